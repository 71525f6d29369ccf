"""Magic 0 and 1 message sets: golden vectors, kafka-python's builder, wrappers and corruption."""

from __future__ import annotations

import struct
import zlib

import pytest

from pysparklog.errors import CorruptRecordError, UnsupportedCodecError
from pysparklog.storage.records.codecs import Codec, compress
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.records.legacy_records import LegacyEntry, LegacyRecord, read_legacy_entry
from tests.storage.records.helpers import LegacyRecordBatchBuilder

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results

# kafka-python test/record/test_records.py, re-verified (reference §1.2).
GOLDEN_V1 = bytes.fromhex("000000000000000000000019478628c201000000015e1867abaeffffffff00000003313233")
GOLDEN_V0 = bytes.fromhex("000000000000000000000011feb01dbf0000ffffffff00000003313233")
LOG_APPEND_TIME = 0x08
# Byte positions in an entry: offset at 0, crc at 12, attributes at 17, magic 1 timestamp at 18.
OFFSET_FIELD = struct.Struct(">q")
CRC_POSITION = 12
MAGIC_POSITION = 16
ATTRIBUTES_POSITION = 17
TIMESTAMP_POSITION = 18
BUILDER_BATCH_SIZE = 1 << 20
RECORDS = [
    (b"k0", b"v0", 1_600_000_000_000),
    (None, b"value with a null key", 1_600_000_000_001),
    (b"key with a null value", None, 1_600_000_000_002),
    (None, None, 1_600_000_000_003),
    (b"", b"", 1_600_000_000_004),
]


def raw_entry(body: bytes, offset: int = 0) -> bytes:
    """An entry around ``body`` (magic onwards) with the size and CRC that fit it."""
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def message(
    offset: int,
    value: bytes | None,
    *,
    magic: int = 1,
    attributes: int = 0,
    timestamp: int = 0,
    key: bytes | None = None,
) -> bytes:
    """One entry with a correct CRC, to build wrappers and corruptions kafka-python would not write."""
    body = struct.pack(">bB", magic, attributes) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return raw_entry(body, offset)


def wrapper(inner: bytes, codec: Codec = Codec.GZIP, *, offset: int = 0, magic: int = 1, timestamp: int = 0) -> bytes:
    return message(offset, compress(codec, inner), magic=magic, attributes=codec, timestamp=timestamp)


def read_all(buf: bytes | bytearray) -> list[LegacyEntry]:
    entries, position = [], 0
    while position < len(buf):
        entries.append(read_legacy_entry(buf, position))
        position += entries[-1].size_in_bytes
    return entries


def set_log_append_time(entry: bytearray, timestamp: int) -> None:
    """Do what a broker does to a magic 1 entry for LogAppendTime: set the bit and time, then the CRC."""
    entry[ATTRIBUTES_POSITION] |= LOG_APPEND_TIME
    struct.pack_into(">q", entry, TIMESTAMP_POSITION, timestamp)
    struct.pack_into(">I", entry, CRC_POSITION, zlib.crc32(entry[MAGIC_POSITION:]))


def build(magic: int, codec: Codec, offsets: list[int]) -> bytearray:
    builder = LegacyRecordBatchBuilder(magic, int(codec), BUILDER_BATCH_SIZE)
    for offset, (key, value, timestamp) in zip(offsets, RECORDS, strict=True):
        builder.append(offset, timestamp=timestamp, key=key, value=value)
    return bytearray(builder.build())


def assert_records(records: list[LegacyRecord], magic: int, offsets: list[int]) -> None:
    assert [r.offset for r in records] == offsets
    assert [(r.key, r.value) for r in records] == [(key, value) for key, value, _ in RECORDS]
    if magic == 0:
        assert {(r.timestamp, r.timestamp_type) for r in records} == {(-1, TimestampType.NO_TIMESTAMP_TYPE)}
    else:
        assert [r.timestamp for r in records] == [timestamp for _, _, timestamp in RECORDS]
        assert {r.timestamp_type for r in records} == {TimestampType.CREATE_TIME}
    assert all(r.is_valid and r.magic == magic for r in records)


# Golden vectors


def test_golden_v1() -> None:
    entry = read_legacy_entry(GOLDEN_V1, 0)
    assert entry == LegacyEntry(
        offset=0,
        size_in_bytes=37,
        crc=0x478628C2,
        computed_crc=0x478628C2,
        magic=1,
        attributes=0,
        codec=Codec.NONE,
        timestamp=1503648000942,
        timestamp_type=TimestampType.CREATE_TIME,
        key_size=-1,
        value_size=3,
        is_valid=True,
        records=(
            LegacyRecord(
                offset=0,
                timestamp=1503648000942,
                timestamp_type=TimestampType.CREATE_TIME,
                key=None,
                value=b"123",
                crc=0x478628C2,
                magic=1,
                attributes=0,
                size_in_bytes=37,
                is_valid=True,
            ),
        ),
    )


def test_golden_v0() -> None:
    entry = read_legacy_entry(GOLDEN_V0, 0)
    assert (entry.offset, entry.size_in_bytes, entry.crc, entry.magic) == (0, 29, 0xFEB01DBF, 0)
    assert (entry.timestamp, entry.timestamp_type) == (-1, TimestampType.NO_TIMESTAMP_TYPE)
    assert (entry.key_size, entry.value_size, entry.is_valid) == (-1, 3, True)
    [record] = entry.records
    assert (record.offset, record.key, record.value, record.timestamp) == (0, None, b"123", -1)
    assert record.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE


def test_test_helper_reproduces_the_golden_vectors() -> None:
    assert message(0, b"123", magic=1, timestamp=1503648000942) == GOLDEN_V1
    assert message(0, b"123", magic=0) == GOLDEN_V0


@pytest.mark.parametrize(("magic", "crc"), [(1, -2095076219), (0, 278251978)])
def test_kafka_python_crc_vectors(magic: int, crc: int) -> None:
    builder = LegacyRecordBatchBuilder(magic, 0, BUILDER_BATCH_SIZE)
    builder.append(0, timestamp=9999999, key=b"test", value=b"Super")
    entry = read_legacy_entry(bytes(builder.build()), 0)
    assert entry.crc == entry.computed_crc == crc & 0xFFFFFFFF
    [record] = entry.records
    assert (record.key, record.value, record.timestamp) == (b"test", b"Super", 9999999 if magic == 1 else -1)


# Message sets written by kafka-python


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_message_set(magic: int) -> None:
    offsets = [7, 8, 9, 10, 11]
    buf = build(magic, Codec.NONE, offsets)
    entries = read_all(buf)
    assert [e.offset for e in entries] == offsets
    assert all(e.codec is Codec.NONE and len(e.records) == 1 for e in entries)
    assert [(e.key_size, e.value_size) for e in entries] == [
        (-1 if k is None else len(k), -1 if v is None else len(v)) for k, v, _ in RECORDS
    ]
    assert_records([e.records[0] for e in entries], magic, offsets)


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_compressed_v0_inner_offsets_are_absolute(codec: Codec) -> None:
    offsets = [50, 51, 52, 53, 54]
    buf = build(0, codec, offsets)
    OFFSET_FIELD.pack_into(buf, 0, offsets[-1])
    [entry] = read_all(buf)
    assert (entry.codec, entry.magic, entry.key_size, entry.size_in_bytes) == (codec, 0, -1, len(buf))
    assert_records(list(entry.records), 0, offsets)


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_compressed_v1_offsets_count_back_from_the_wrapper(codec: Codec) -> None:
    buf = build(1, codec, [0, 1, 2, 3, 4])
    # The broker sets the wrapper offset to the last inner offset; it is outside the CRC.
    OFFSET_FIELD.pack_into(buf, 0, 104)
    [entry] = read_all(buf)
    assert (entry.codec, entry.offset, entry.is_valid) == (codec, 104, True)
    assert_records(list(entry.records), 1, [100, 101, 102, 103, 104])


@pytest.mark.usefixtures("kafka_python_codecs")
def test_compressed_v1_wrapper_offset_0_leaves_inner_offsets_as_they_are() -> None:
    # librdkafka's produce data: Kafka takes the inner offsets as they are.
    [entry] = read_all(build(1, Codec.GZIP, [0, 1, 2, 3, 4]))
    assert [r.offset for r in entry.records] == [0, 1, 2, 3, 4]


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_log_append_time_wrapper_gives_its_timestamp_to_inner_records(codec: Codec) -> None:
    buf = build(1, codec, [0, 1, 2, 3, 4])
    set_log_append_time(buf, 1_700_000_000_000)
    entry = read_legacy_entry(buf, 0)
    assert (entry.timestamp, entry.timestamp_type) == (1_700_000_000_000, TimestampType.LOG_APPEND_TIME)
    assert {(r.timestamp, r.timestamp_type) for r in entry.records} == {
        (1_700_000_000_000, TimestampType.LOG_APPEND_TIME)
    }


def test_log_append_time_uncompressed_message() -> None:
    buf = bytearray(message(3, b"v", timestamp=5))
    set_log_append_time(buf, 42)
    [record] = read_legacy_entry(buf, 0).records
    assert (record.timestamp, record.timestamp_type) == (42, TimestampType.LOG_APPEND_TIME)


def test_v1_create_time_wrapper_keeps_inner_timestamps() -> None:
    inner = message(0, b"a", timestamp=10) + message(1, b"b", timestamp=20)
    entry = read_legacy_entry(wrapper(inner, offset=9, timestamp=20), 0)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in entry.records] == [
        (8, 10, TimestampType.CREATE_TIME),
        (9, 20, TimestampType.CREATE_TIME),
    ]


def test_reads_at_a_position_inside_a_buffer() -> None:
    buf = GOLDEN_V0 + GOLDEN_V1
    entry = read_legacy_entry(memoryview(buf), len(GOLDEN_V0))
    assert entry.magic == 1 and entry.records[0].value == b"123"


# Corruption


def corrupt_error(buf: bytes | bytearray, position: int = 0, base_position: int = 0) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        read_legacy_entry(buf, position, file="00000000000000000000.log", base_position=base_position)
    assert info.value.file == "00000000000000000000.log"
    return info.value


@pytest.mark.parametrize("flip", [MAGIC_POSITION + 1, len(GOLDEN_V1) - 1], ids=["attributes", "value"])
def test_crc_mismatch_names_position_and_both_crcs(flip: int) -> None:
    buf = bytearray(b"\xff" * 29 + GOLDEN_V1)
    buf[29 + flip] ^= 0x02
    error = corrupt_error(buf, 29, base_position=1000)
    assert error.position == 1029
    assert "position 1029" in str(error)
    assert f"CRC-32 mismatch: stored 0x478628c2, computed 0x{zlib.crc32(buf[29 + MAGIC_POSITION :]):08x}" in str(error)


def test_crc_mismatch_without_verification_is_reported_in_is_valid() -> None:
    buf = bytearray(GOLDEN_V1)
    buf[-1] ^= 0x01
    entry = read_legacy_entry(buf, 0, verify_crc=False)
    assert not entry.is_valid and not entry.records[0].is_valid
    assert entry.crc == 0x478628C2 and entry.computed_crc == zlib.crc32(buf[MAGIC_POSITION:])


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (5, "truncated: needs 12 bytes for offset and size, only 5 remain"),
        (12, "truncated: size 25 says 25 bytes follow, only 0 remain"),
        (len(GOLDEN_V1) - 1, "truncated: size 25 says 25 bytes follow, only 24 remain"),
    ],
)
def test_truncated_entry(length: int, expected: str) -> None:
    error = corrupt_error(GOLDEN_V1[:length])
    assert error.position == 0
    assert expected in str(error)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (raw_entry(bytes(9)), "size 13 is below the 14-byte minimum of a message"),
        (message(0, b"x", magic=2), "magic 2 is not a legacy message magic; expected 0 or 1"),
        (message(0, b"x", magic=-1), "magic -1 is not a legacy message magic; expected 0 or 1"),
        (raw_entry(b"\x01\x00" + bytes(12)), "size 18 is below the 22-byte minimum of a magic 1 message"),
    ],
    ids=["size-below-v0-minimum", "magic-2", "magic-negative", "v1-size-below-minimum"],
)
def test_bad_header(entry: bytes, expected: str) -> None:
    assert expected in str(corrupt_error(entry))


def with_lengths(key_length: int, value_length: int, tail: bytes = b"") -> bytes:
    return raw_entry(struct.pack(">bBii", 0, 0, key_length, value_length) + tail)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (with_lengths(-2, -1), "key length -2 does not fit; expected -1 (null) or 0..4"),
        (with_lengths(100, -1), "key length 100 does not fit; expected -1 (null) or 0..4"),
        (with_lengths(-1, 3, b"ab"), "value length 3 does not fit; expected -1 (null) or 0..2"),
        (with_lengths(-1, -1, b"extra"), "key and value end 5 bytes before the end of the message"),
    ],
    ids=["negative-key", "key-past-end", "value-past-end", "trailing-bytes"],
)
def test_bad_lengths(entry: bytes, expected: str) -> None:
    assert expected in str(corrupt_error(entry))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_undefined_codec(codec_id: int) -> None:
    with pytest.raises(UnsupportedCodecError, match=f"file x.log, position 3: unknown compression codec id {codec_id}"):
        read_legacy_entry(b"pad" + message(0, b"x", attributes=codec_id), 3, file="x.log")


def test_zstd_wrapper_is_rejected() -> None:
    with pytest.raises(UnsupportedCodecError, match="zstd wrapper message of magic 1; zstd needs magic 2"):
        read_legacy_entry(wrapper(message(0, b"x"), Codec.ZSTD), 0)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (message(0, None, attributes=Codec.GZIP), "gzip wrapper message has a null value"),
        (wrapper(b""), "gzip wrapper message holds no inner messages"),
        (message(0, b"not gzip", attributes=Codec.GZIP), "gzip decompression of 8 bytes failed"),
        (
            wrapper(wrapper(message(0, b"x"))),
            "inner message at byte 0 of the decompressed gzip message set: has codec id 1; inner messages must be",
        ),
        (
            wrapper(message(0, b"a") + message(1, b"b")[:-1], Codec.SNAPPY),
            "inner message at byte 35 of the decompressed snappy message set: truncated",
        ),
        (
            wrapper(message(0, b"a") + message(1, b"b")[:-1] + b"X", Codec.LZ4),
            "inner message at byte 35 of the decompressed lz4 message set: CRC-32 mismatch",
        ),
        (
            wrapper(message(0, b"a") + message(5, b"b"), offset=4),
            "wrapper offset 4 is below its last inner message's relative offset 5",
        ),
    ],
    ids=["null-value", "empty", "bad-gzip", "nested", "inner-truncated", "inner-crc", "wrapper-offset-too-low"],
)
def test_bad_wrapper(entry: bytes, expected: str) -> None:
    error = corrupt_error(b"\x00" * 7 + entry, 7, base_position=100)
    assert error.position == 107
    assert expected in str(error)


def test_inner_crc_mismatch_without_verification_is_reported_in_is_valid() -> None:
    entry = read_legacy_entry(wrapper(message(0, b"a") + message(1, b"b")[:-1] + b"X"), 0, verify_crc=False)
    assert entry.is_valid
    assert [(r.value, r.is_valid) for r in entry.records] == [(b"a", True), (b"X", False)]
