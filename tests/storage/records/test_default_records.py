"""Magic 2 record batches: golden vectors, both directions against kafka-python, log files and corruption."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import crc32c
import pyarrow as pa
import pytest

from pysparklog import compiled
from pysparklog.errors import CorruptRecordError, UnsupportedCodecError
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.records import kernels
from pysparklog.storage.records.arrow_records import HEADER_TYPE, BatchSettings, decode_entries, record_schema
from pysparklog.storage.records.codecs import Codec, compress
from pysparklog.storage.records.default_records import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    BatchHeader,
    TimestampType,
    batch_crc,
    verify_batch_crc,
)
from pysparklog.storage.records.memory_records import as_uint8, scan, verify_crcs
from tests.storage.records.helpers import (
    TOPIC,
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
    LegacyRecordBatchBuilder,
    MemoryRecords,
    decode,
    encode,
    restamp_crc,
    zigzag,
)

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results

Header = tuple[str, bytes | None]
Row = tuple[bytes | None, bytes | None, list[Header], int]
Record = tuple[int, bytes | None, bytes | None, list[Header] | None, int | None, int]

# kafka-python test/record/test_records.py, "real live data from Kafka 11 broker", re-verified (reference §1.1).
GOLDEN_ONE_VALUE = bytes.fromhex(
    "00000000000000000000003b00000001020318a2700000000000000000015dff7b063c0000015dff7b063cffffffffffffffff"
    "ffffffffffff0000000112000000010631323300"
)
GOLDEN_TWO_EMPTY = bytes.fromhex(
    "0000000000000001000000400000000202c85cbd230000000000010000015dff7cdd6c0000015dff7cde14ffffffffffffffff"
    "ffffffffffff000000020c0000000100000e00d00202010000"
)
GOLDEN_HEADER = bytes.fromhex(
    "00000000000000000000004500000000025cd8ef520000000000000000016585b6f3c10000016585b6f3c1ffffffffffffffff"
    "ffffffffffff000000012600000001066864720208686b6579086876616c"
)
GOLDEN_TS = 1503229838908

LOG_APPEND_TIME = 0x08
# A magic 1 message: crc at 12, magic at 16, attributes at 17, timestamp at 18 (reference §1.2).
LEGACY_CRC_OFFSET, LEGACY_ATTRIBUTES_OFFSET, LEGACY_TIMESTAMP_OFFSET = 12, 17, 18
TRANSACTIONAL = 0x10
PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE = 123_456_789_012, 7, 41
BUILDER_BATCH_SIZE = 1 << 20
LOG_FILE = "00000000000000000000.log"

# Keys, null keys, null values, empty values, headers with null values, and a timestamp earlier than
# the first (a negative delta). Values repeat so that kafka-python's builder does compress them.
ROWS: list[Row] = [
    (b"key-0", b"value-0 " * 20, [("h1", b"x"), ("h2", None)], 1_600_000_000_000),
    (None, b"a value with a null key " * 10, [], 1_600_000_000_500),
    (b"a key with a null value", None, [("only", b"")], 1_599_999_999_000),
    (b"", b"", [], 1_600_000_001_000),
    (b"k" * 300, b"\x00\xff" * 500, [("\u00e9t\u00e9", b"\x01\x02\x03")], 1_600_000_002_000),
]


def rows_table(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "value": pa.array([r[1] for r in rows], pa.binary()),
            "headers": pa.array([[{"key": k, "value": v} for k, v in r[2]] for r in rows], HEADER_TYPE),
            "timestamp": pa.array([r[3] for r in rows], pa.int64()),
        }
    )


def expected_records(rows: list[Row], offsets: list[int], timestamp_type: int = 0) -> list[Record]:
    """What a reader gets for ``rows``: no headers is a null column value, as in Spark's Kafka source."""
    return [(o, k, v, h or None, ts, timestamp_type) for o, (k, v, h, ts) in zip(offsets, rows, strict=True)]


def our_records(table: pa.Table) -> list[Record]:
    columns = [
        table.column("offset").to_pylist(),
        table.column("key").to_pylist(),
        table.column("value").to_pylist(),
        [None if h is None else [(e["key"], e["value"]) for e in h] for h in table.column("headers").to_pylist()],
        table.column("timestamp").cast(pa.int64()).to_pylist(),
        table.column("timestampType").to_pylist(),
    ]
    return list(zip(*columns, strict=True))


def kafka_python_records(buf: bytes) -> list[Record]:
    """kafka-python's reading of every entry in ``buf``, in our column conventions, after checking each CRC."""
    records: list[Record] = []
    for batch in MemoryRecords(buf):
        assert batch.validate_crc()
        for r in batch:
            headers = [(k, v) for k, v in r.headers] or None
            timestamp_type = -1 if r.timestamp_type is None else r.timestamp_type
            records.append((r.offset, r.key, r.value, headers, r.timestamp, timestamp_type))
    return records


def field(data: bytes | None) -> bytes:
    return zigzag(-1) if data is None else zigzag(len(data)) + data


def record(body: bytes) -> bytes:
    return zigzag(len(body)) + body


def record_body(
    value: bytes | None, *, key: bytes | None = None, ts_delta: int = 0, offset_delta: int = 0, headers: bytes = b"\0"
) -> bytes:
    """A record's body from its length onwards; ``headers`` is the raw header count and headers."""
    return b"\0" + zigzag(ts_delta) + zigzag(offset_delta) + field(key) + field(value) + headers


def raw_batch(records: bytes, count: int, *, attributes: int = 0, base_offset: int = 0) -> bytearray:
    """A batch around raw record bytes, with the header our encoder writes and a correct CRC."""
    buf = bytearray(RECORD_BATCH_OVERHEAD) + records
    BatchHeader(
        base_offset, len(buf) - LOG_OVERHEAD, -1, 2, 0, attributes, count - 1, GOLDEN_TS, GOLDEN_TS, -1, -1, -1, count
    ).pack_into(buf)
    restamp_crc(buf)
    return buf


def kafka_python_v2(
    rows: list[Row], codec: Codec, *, base_offset: int = 0, producer: tuple[int, int, int] | None = None
) -> bytearray:
    """One batch as kafka-python's producer writes it, with the base offset a broker would assign."""
    pid, epoch, sequence = producer or (-1, -1, -1)
    builder = DefaultRecordBatchBuilder(2, int(codec), producer is not None, pid, epoch, sequence, BUILDER_BATCH_SIZE)
    for offset, (key, value, headers, timestamp) in enumerate(rows):
        assert builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers) is not None
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)  # outside the CRC, as the broker rewrites it
    assert buf[ATTRIBUTES_OFFSET + 1] & 0x07 == codec, "kafka-python fell back to no compression"
    return buf


def kafka_python_legacy(rows: list[Row], magic: int, codec: Codec, base_offset: int) -> bytes:
    """Messages as kafka-python writes them, with the offsets a broker assigns (reference §1.2)."""
    builder = LegacyRecordBatchBuilder(magic, int(codec), BUILDER_BATCH_SIZE)
    relative = magic == 1 and codec is not Codec.NONE  # v1 wrappers hold relative inner offsets
    for i, (key, value, _headers, timestamp) in enumerate(rows):
        builder.append(i if relative else base_offset + i, timestamp=timestamp, key=key, value=value)
    buf = bytearray(builder.build())
    if codec is not Codec.NONE:
        struct.pack_into(">q", buf, 0, base_offset + len(rows) - 1)  # the wrapper's offset: its last inner one
    return bytes(buf)


def legacy_expected(rows: list[Row], magic: int, base_offset: int) -> list[Record]:
    return [
        (base_offset + i, k, v, None, None if magic == 0 else ts, -1 if magic == 0 else 0)
        for i, (k, v, _h, ts) in enumerate(rows)
    ]


# Golden vectors


def test_golden_one_value() -> None:
    [entry] = scan(as_uint8(GOLDEN_ONE_VALUE)).rows.tolist()
    assert entry[kernels.E_POSITION] == 0 and entry[kernels.E_SIZE] == 59 + LOG_OVERHEAD
    assert entry[kernels.E_BASE_OFFSET] == 0 and entry[kernels.E_PARTITION_LEADER_EPOCH] == 1
    assert entry[kernels.E_MAGIC] == 2 and entry[kernels.E_CRC] == 0x0318A270
    assert entry[kernels.E_RECORDS_COUNT] == 1
    assert our_records(decode(GOLDEN_ONE_VALUE)) == [(0, None, b"123", None, GOLDEN_TS, 0)]


def test_the_entry_columns_read_what_the_batch_header_holds() -> None:
    rows: list[Row] = [(b"k", b"v", [], 1_000), (None, b"w", [], 1_007), (b"x", None, [], 1_003)]
    buf = kafka_python_v2(rows, Codec.NONE, base_offset=40, producer=(7, 3, 11))
    buf += kafka_python_v2(rows[:1], Codec.NONE, base_offset=43)
    entries = scan(as_uint8(buf))
    headers = [BatchHeader.parse(buf, position) for position in entries.positions.tolist()]
    assert entries.base_offsets.tolist() == [h.base_offset for h in headers] == [40, 43]
    assert entries.last_offset_deltas.tolist() == [h.last_offset_delta for h in headers] == [2, 0]
    assert entries.base_timestamps.tolist() == [h.base_timestamp for h in headers] == [1_000, 1_000]
    assert entries.max_timestamps.tolist() == [h.max_timestamp for h in headers] == [1_007, 1_000]
    assert entries.producer_ids.tolist() == [h.producer_id for h in headers] == [7, -1]
    assert entries.producer_epochs.tolist() == [h.producer_epoch for h in headers] == [3, -1]
    assert entries.base_sequences.tolist() == [h.base_sequence for h in headers] == [11, -1]
    assert entries.record_counts.tolist() == [h.records_count for h in headers] == [3, 1]
    assert entries.partition_leader_epochs.tolist() == [h.partition_leader_epoch for h in headers]
    assert entries.crcs.tolist() == [h.crc for h in headers]
    assert entries.sizes.tolist() == [h.length + LOG_OVERHEAD for h in headers]


def test_golden_two_empty_values() -> None:
    entries = scan(as_uint8(GOLDEN_TWO_EMPTY))
    assert entries.base_offsets.tolist() == [1] and entries.last_offsets.tolist() == [2]
    assert entries.max_timestamps.tolist() == [1503229959532 + 168]
    assert our_records(decode(GOLDEN_TWO_EMPTY)) == [
        (1, None, b"", None, 1503229959532, 0),
        (2, None, b"", None, 1503229959532 + 168, 0),
    ]


def test_golden_header() -> None:
    assert our_records(decode(GOLDEN_HEADER)) == [(0, None, b"hdr", [("hkey", b"hval")], 1535546684353, 0)]
    assert "headers" not in decode(GOLDEN_HEADER, include_headers=False).column_names


def test_golden_vectors_laid_end_to_end() -> None:
    buf = GOLDEN_ONE_VALUE + GOLDEN_TWO_EMPTY + GOLDEN_HEADER
    entries = scan(as_uint8(buf))
    assert entries.positions.tolist() == [0, 71, 71 + 76]
    assert (entries.stop_position, entries.incomplete_tail) == (len(buf), False)
    table = decode(buf)
    assert table.column("offset").to_pylist() == [0, 1, 2, 0]
    assert table.column("topic").to_pylist() == [TOPIC] * 4
    assert table.column("partition").to_pylist() == [0] * 4


def test_batch_header_parse() -> None:
    header = BatchHeader.parse(GOLDEN_ONE_VALUE)
    assert header == BatchHeader(
        base_offset=0,
        length=59,
        partition_leader_epoch=1,
        magic=2,
        crc=0x0318A270,
        attributes=0,
        last_offset_delta=0,
        base_timestamp=GOLDEN_TS,
        max_timestamp=GOLDEN_TS,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=1,
    )
    assert (header.size_in_bytes, header.last_offset, header.codec) == (71, 0, Codec.NONE)
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not (header.is_transactional or header.is_control or header.has_delete_horizon)
    assert (header.delete_horizon_ms, header.last_sequence) == (-1, -1)


def test_batch_header_parse_at_a_position_and_pack_back() -> None:
    buf = GOLDEN_ONE_VALUE + GOLDEN_TWO_EMPTY
    header = BatchHeader.parse(buf, len(GOLDEN_ONE_VALUE))
    assert (header.base_offset, header.last_offset, header.records_count, header.crc) == (1, 2, 2, 0xC85CBD23)
    assert header.max_timestamp - header.base_timestamp == 168
    packed = bytearray(RECORD_BATCH_OVERHEAD)
    header.pack_into(packed)
    assert bytes(packed) == GOLDEN_TWO_EMPTY[:RECORD_BATCH_OVERHEAD]


@pytest.mark.parametrize(
    ("batch", "crc"), [(GOLDEN_ONE_VALUE, 0x0318A270), (GOLDEN_TWO_EMPTY, 0xC85CBD23), (GOLDEN_HEADER, 0x5CD8EF52)]
)
def test_batch_crc_of_golden_vectors(batch: bytes, crc: int) -> None:
    assert batch_crc(batch) == BatchHeader.parse(batch).crc == crc
    verify_batch_crc(batch)
    verify_crcs(as_uint8(batch), scan(as_uint8(batch)))


def test_batch_crc_is_crc32c_from_the_attributes() -> None:
    # The standard CRC-32C check value, with 21 bytes in front that the checksum skips.
    assert batch_crc(bytes(ATTRIBUTES_OFFSET) + b"123456789") == 0xE3069283
    assert batch_crc(b"\xff" * ATTRIBUTES_OFFSET + b"123456789") == 0xE3069283
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_raw_batch_helper_matches_our_encoder() -> None:
    # Checks the hand-written batches the corruption tests use against the encoder, byte for byte.
    body = record_body(b"v", key=b"k", headers=zigzag(1) + field(b"hk") + field(None))
    table = pa.table(
        {
            "key": [b"k"],
            "value": [b"v"],
            "headers": pa.array([[{"key": "hk", "value": None}]], HEADER_TYPE),
            "timestamp": pa.array([GOLDEN_TS], pa.int64()),
        }
    )
    assert bytes(raw_batch(record(body), 1)) == encode(table)


# Our batches read by kafka-python


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", list(Codec))
def test_kafka_python_reads_our_batches(codec: Codec) -> None:
    settings = BatchSettings(
        codec=codec,
        max_batch_records=2,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        base_sequence=BASE_SEQUENCE,
        transactional=True,
    )
    buf = encode(rows_table(ROWS), settings)
    batches = list(MemoryRecords(buf))
    assert [b.records_count for b in batches] == [2, 2, 1]
    first_rows = [0, 2, 4]
    for batch, first in zip(batches, first_rows, strict=True):
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        rows = ROWS[first : first + batch.records_count]
        assert (batch.magic, batch.base_offset, batch.leader_epoch) == (2, 0, -1)
        assert batch.attributes == int(codec) | TRANSACTIONAL
        assert (batch.compression_type, batch.timestamp_type) == (codec, 0)
        assert batch.is_transactional and not batch.is_control_batch
        assert (batch.producer_id, batch.producer_epoch) == (PRODUCER_ID, PRODUCER_EPOCH)
        assert batch.base_sequence == BASE_SEQUENCE + first
        assert batch.last_sequence == BASE_SEQUENCE + first + len(rows) - 1
        assert batch.last_offset_delta == len(rows) - 1
        assert batch.first_timestamp == rows[0][3]
        assert batch.max_timestamp == max(r[3] for r in rows)
    records = kafka_python_records(buf)
    assert records == expected_records(ROWS, [0, 1, 0, 1, 0])


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", list(Codec))
def test_kafka_python_reads_our_log_append_time_batch(codec: Codec) -> None:
    buf = encode(rows_table(ROWS), BatchSettings(codec=codec, timestamp_type=TimestampType.LOG_APPEND_TIME))
    [batch] = list(MemoryRecords(buf))
    assert batch.attributes == int(codec) | LOG_APPEND_TIME and batch.timestamp_type == 1
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.has_producer_id() and not batch.is_transactional
    newest = max(r[3] for r in ROWS)
    assert batch.max_timestamp == newest
    expected = [(o, k, v, h or None, newest, 1) for o, (k, v, h, _) in enumerate(ROWS)]
    assert kafka_python_records(buf) == expected
    assert our_records(decode(buf)) == expected


def test_kafka_python_reads_sequence_numbers_that_wrap() -> None:
    settings = BatchSettings(max_batch_records=2, producer_id=1, producer_epoch=0, base_sequence=2**31 - 3)
    buf = encode(rows_table(ROWS), settings)
    expected = [(2**31 - 3, 2**31 - 2), (2**31 - 1, 0), (1, 1)]
    assert [(b.base_sequence, b.last_sequence) for b in MemoryRecords(buf)] == expected
    ours = [BatchHeader.parse(buf, position) for position in scan(as_uint8(buf)).positions.tolist()]
    assert [(h.base_sequence, h.last_sequence) for h in ours] == expected


# kafka-python's batches read by us


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", list(Codec))
def test_we_read_kafka_python_v2_batches(codec: Codec) -> None:
    buf = kafka_python_v2(ROWS, codec, base_offset=100, producer=(PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE))
    expected = expected_records(ROWS, list(range(100, 105)))
    assert kafka_python_records(bytes(buf)) == expected
    assert our_records(decode(buf)) == expected
    entries = scan(as_uint8(buf))
    assert entries.column(kernels.E_PRODUCER_ID).tolist() == [PRODUCER_ID]
    assert entries.column(kernels.E_PRODUCER_EPOCH).tolist() == [PRODUCER_EPOCH]
    assert entries.column(kernels.E_BASE_SEQUENCE).tolist() == [BASE_SEQUENCE]
    assert entries.is_transactional.tolist() == [True] and entries.codecs.tolist() == [codec]


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", list(Codec))
def test_we_read_kafka_python_v2_batches_stamped_with_log_append_time(codec: Codec) -> None:
    buf = kafka_python_v2(ROWS, codec)
    broker_time = 1_700_000_000_123
    buf[ATTRIBUTES_OFFSET + 1] |= LOG_APPEND_TIME
    struct.pack_into(">q", buf, MAX_TIMESTAMP_OFFSET, broker_time)
    restamp_crc(buf)
    expected = [(o, k, v, h or None, broker_time, 1) for o, (k, v, h, _) in enumerate(ROWS)]
    assert kafka_python_records(bytes(buf)) == expected
    assert our_records(decode(buf)) == expected


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_we_read_kafka_python_legacy_messages(magic: int, codec: Codec) -> None:
    buf = kafka_python_legacy(ROWS, magic, codec, base_offset=20)
    expected = legacy_expected(ROWS, magic, 20)
    assert kafka_python_records(buf) == expected
    assert our_records(decode(buf)) == expected
    assert set(scan(as_uint8(buf)).magics.tolist()) == {magic}


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_we_read_kafka_python_v1_wrappers_stamped_with_log_append_time(codec: Codec) -> None:
    buf = bytearray(kafka_python_legacy(ROWS, 1, codec, base_offset=20))
    broker_time = 1_700_000_000_123
    buf[LEGACY_ATTRIBUTES_OFFSET] |= LOG_APPEND_TIME
    struct.pack_into(">q", buf, LEGACY_TIMESTAMP_OFFSET, broker_time)
    struct.pack_into(">I", buf, LEGACY_CRC_OFFSET, zlib.crc32(buf[MAGIC_OFFSET:]))
    expected = [(20 + i, k, v, None, broker_time, 1) for i, (k, v, _h, _ts) in enumerate(ROWS)]
    assert kafka_python_records(bytes(buf)) == expected
    assert our_records(decode(buf)) == expected


# Log files written by others, read through PartitionLog


def read_partition(tmp_path: Path, data: bytes, **read: Any) -> tuple[tuple[int, int], pa.Table]:
    """(log start offset, log end offset) and the records of a partition whose only file holds ``data``."""
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / LOG_FILE).write_bytes(data)
    with PartitionLog(str(directory)) as log:
        batches = list(log.read_arrow(include_headers=True, **read))
        return (log.log_start_offset, log.log_end_offset), pa.Table.from_batches(batches, schema=record_schema(True))


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", list(Codec))
def test_partition_log_reads_kafka_python_v2_file(tmp_path: Path, codec: Codec) -> None:
    data = bytes(kafka_python_v2(ROWS, codec) + kafka_python_v2(ROWS[:2], codec, base_offset=5))
    extent, table = read_partition(tmp_path, data)
    assert extent == (0, 7)
    assert our_records(table) == expected_records(ROWS + ROWS[:2], list(range(7)))
    assert set(table.column("topic").to_pylist()) == {"t"}


@pytest.mark.usefixtures("kafka_python_codecs")
def test_partition_log_reads_a_file_mixing_magic_0_1_and_2(tmp_path: Path) -> None:
    data = (
        kafka_python_legacy(ROWS, 0, Codec.NONE, 0)
        + kafka_python_legacy(ROWS, 0, Codec.SNAPPY, 5)
        + kafka_python_legacy(ROWS, 1, Codec.NONE, 10)
        + kafka_python_legacy(ROWS, 1, Codec.GZIP, 15)
        + bytes(kafka_python_v2(ROWS, Codec.LZ4, base_offset=20))
        + bytes(kafka_python_v2(ROWS, Codec.NONE, base_offset=25))
    )
    assert scan(as_uint8(data)).magics.tolist() == [0] * 6 + [1] * 6 + [2, 2]
    extent, table = read_partition(tmp_path, data)
    assert extent == (0, 30)
    expected = (
        legacy_expected(ROWS, 0, 0)
        + legacy_expected(ROWS, 0, 5)
        + legacy_expected(ROWS, 1, 10)
        + legacy_expected(ROWS, 1, 15)
        + expected_records(ROWS, list(range(20, 25)))
        + expected_records(ROWS, list(range(25, 30)))
    )
    assert our_records(table) == expected
    assert kafka_python_records(data) == expected


@pytest.mark.usefixtures("kafka_python_codecs")
def test_partition_log_reads_a_range_across_formats(tmp_path: Path) -> None:
    data = kafka_python_legacy(ROWS, 0, Codec.GZIP, 0) + kafka_python_legacy(ROWS, 1, Codec.LZ4, 5)
    data += bytes(kafka_python_v2(ROWS, Codec.ZSTD, base_offset=10))
    _, table = read_partition(tmp_path, data, start_offset=3, end_offset=12)
    assert table.column("offset").to_pylist() == list(range(3, 12))
    assert table.column("timestampType").to_pylist() == [-1, -1, 0, 0, 0, 0, 0, 0, 0]


# Corruption

PREFIX = GOLDEN_ONE_VALUE  # one valid batch in front, so that positions are not 0
BASE_POSITION = 4096
BATCH_POSITION = BASE_POSITION + len(PREFIX)
RECORDS_POSITION = BATCH_POSITION + RECORD_BATCH_OVERHEAD


def corrupt_error(batch: bytes | bytearray, *, include_headers: bool = False) -> CorruptRecordError:
    """The error reading ``PREFIX + batch`` raises; it must name the file and the batch's position."""
    with pytest.raises(CorruptRecordError) as info:
        decode(PREFIX + batch, include_headers=include_headers, file=LOG_FILE, base_position=BASE_POSITION)
    assert info.value.file == LOG_FILE
    assert info.value.position == BATCH_POSITION
    assert f"file {LOG_FILE}, position {BATCH_POSITION}: " in str(info.value)
    return info.value


@pytest.mark.parametrize(
    "flip",
    [ATTRIBUTES_OFFSET, RECORDS_COUNT_OFFSET + 3, RECORD_BATCH_OVERHEAD + 2, -1],
    ids=["attributes", "records-count", "record", "last-byte"],
)
def test_flipped_byte_fails_the_crc(flip: int) -> None:
    batch = bytearray(encode(rows_table(ROWS)))
    stored = BatchHeader.parse(batch).crc
    batch[flip] ^= 0x10
    error = corrupt_error(batch)
    computed = batch_crc(batch)
    assert f"CRC-32C mismatch in the entry at offset 0: stored 0x{stored:08x}, computed 0x{computed:08x}" in str(error)
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        verify_batch_crc(batch)


@pytest.mark.parametrize("position", [0, 7, 12, 15], ids=["base-offset", "base-offset-low", "epoch", "epoch-low"])
def test_crc_leaves_out_base_offset_and_leader_epoch(position: int) -> None:
    batch = bytearray(encode(rows_table(ROWS)))
    batch[position] ^= 0x01
    verify_batch_crc(batch)
    assert decode(batch).num_rows == len(ROWS)


# The decoder's messages (arrow_records._DECODE_ERRORS), spelled out so that a change shows here.
BAD_VARINT = "a varint runs past its record or is longer than 10 bytes"
BAD_RECORD_LENGTH = "a record length is negative or runs past the end of its batch"
BAD_FIELD_LENGTH = "a key, value or header length is invalid or runs past the end of its record"
TOO_FEW_RECORDS = "the batch holds fewer records than its header's recordsCount"
TRAILING_BYTES = "bytes are left after the last record the batch header counts"
BAD_RECORD_SIZE = "a record's fields do not add up to its length"


def at(position: int) -> str:
    """How a decoder error names the record it failed at, in an uncompressed batch of PREFIX + batch."""
    return f"(batch at offset 0, file position {position})"


VALID = record(record_body(b"a value of some length"))
SECOND = RECORDS_POSITION + len(VALID)  # where a record after VALID starts


@pytest.mark.parametrize(
    ("records", "count", "expected"),
    [
        pytest.param(VALID, 2, f"{TOO_FEW_RECORDS} {at(SECOND)}", id="count-above-records"),
        pytest.param(VALID, 1000, f"recordsCount 1000 cannot fit in {len(VALID)} bytes", id="count-far-above-records"),
        pytest.param(VALID, -1, f"recordsCount -1 cannot fit in {len(VALID)} bytes", id="count-negative"),
        pytest.param(VALID + VALID, 1, f"{TRAILING_BYTES} {at(SECOND)}", id="count-below-records"),
        pytest.param(record(b"\0" + b"\x80" * 20), 1, f"{BAD_VARINT} {at(RECORDS_POSITION)}", id="varint-cut"),
        pytest.param(
            VALID + record(b"\0" + b"\x80" * 11 + b"\0" * 10), 2, f"{BAD_VARINT} {at(SECOND)}", id="varint-11-bytes"
        ),
        pytest.param(b"\x80" * 12, 1, f"{BAD_VARINT} {at(RECORDS_POSITION)}", id="length-varint-cut"),
        pytest.param(zigzag(100) + bytes(10), 1, f"{BAD_RECORD_LENGTH} {at(RECORDS_POSITION)}", id="record-past-batch"),
        pytest.param(zigzag(0) + bytes(10), 1, f"{BAD_RECORD_LENGTH} {at(RECORDS_POSITION)}", id="record-length-0"),
        pytest.param(zigzag(-5) + bytes(10), 1, f"{BAD_RECORD_LENGTH} {at(RECORDS_POSITION)}", id="record-length-neg"),
        pytest.param(
            VALID + record(b"\0\0\2" + zigzag(50) + b"abc" + field(b"") + b"\0"),
            2,
            f"{BAD_FIELD_LENGTH} {at(SECOND)}",
            id="key-past-record",
        ),
        pytest.param(
            record(b"\0\0\0" + zigzag(-2) + field(b"value") + b"\0"),
            1,
            f"{BAD_FIELD_LENGTH} {at(RECORDS_POSITION)}",
            id="key-length-below-minus-1",
        ),
        pytest.param(
            record(b"\0\0\0" + zigzag(2**63 - 1) + field(b"value") + b"\0"),
            1,
            f"{BAD_FIELD_LENGTH} {at(RECORDS_POSITION)}",
            id="key-length-overflows",
        ),
        pytest.param(
            record(b"\0\0\0" + field(None) + zigzag(2**63 - 20) + b"value\0"),
            1,
            f"{BAD_FIELD_LENGTH} {at(RECORDS_POSITION)}",
            id="value-length-overflows",
        ),
        pytest.param(
            record(record_body(b"v", headers=zigzag(-1))),
            1,
            f"{BAD_FIELD_LENGTH} {at(RECORDS_POSITION)}",
            id="header-count-negative",
        ),
    ],
)
@pytest.mark.parametrize("include_headers", [False, True], ids=["no-headers", "headers"])
def test_structural_corruption(records: bytes, count: int, expected: str, include_headers: bool) -> None:
    assert expected in str(corrupt_error(raw_batch(records, count), include_headers=include_headers))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param(zigzag(2**40), BAD_FIELD_LENGTH, id="count-huge"),
        pytest.param(zigzag(1) + zigzag(9) + b"abc" + field(None), BAD_FIELD_LENGTH, id="key-past-record"),
        pytest.param(zigzag(1) + field(b"k") + zigzag(2**63 - 2), BAD_FIELD_LENGTH, id="value-length-overflows"),
        pytest.param(zigzag(1) + field(b"k") + zigzag(-2), BAD_FIELD_LENGTH, id="value-length-below-minus-1"),
        pytest.param(b"\0" + b"extra", BAD_RECORD_SIZE, id="trailing-bytes"),
    ],
)
def test_header_corruption(headers: bytes, expected: str) -> None:
    # Only a read that asks for headers parses them, as Kafka's consumer does.
    batch = raw_batch(record(record_body(b"v", headers=headers)), 1)
    assert f"{expected} {at(RECORDS_POSITION)}" in str(corrupt_error(batch, include_headers=True))


def test_corruption_after_records_with_headers_stays_in_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel writes the headers of the good records before it finds the bad one. Run as plain
    # Python, NumPy bounds-checks every write, which compiled code does not.
    with compiled.using(compiled.JIT):
        jitted: Any = kernels.decode_v2_records  # a numba dispatcher
    monkeypatch.setattr(kernels, "decode_v2_records", jitted.py_func)
    headers = zigzag(3) + (field(b"") + field(None)) * 3
    good = record(record_body(b"v", headers=headers))
    for bad in (zigzag(100) + b"\0" * 10, record(record_body(b"v", headers=zigzag(2**40)))):
        error = corrupt_error(raw_batch(good + bad, 2), include_headers=True)
        assert at(RECORDS_POSITION + len(good)) in str(error)


def test_corruption_in_a_compressed_batch_names_the_byte_of_its_records() -> None:
    bad = record(b"\0\0\2" + zigzag(50) + b"abc" + field(b"") + b"\0")
    batch = raw_batch(compress(Codec.GZIP, VALID + bad), 2, attributes=int(Codec.GZIP))
    error = corrupt_error(batch)
    assert f"(batch at offset 0, byte {len(VALID)} of its records)" in str(error)


def test_undecompressable_batch() -> None:
    batch = raw_batch(b"not a zstd frame", 1, attributes=int(Codec.ZSTD))
    assert "zstd decompression of 16 bytes failed" in str(corrupt_error(batch))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id: int) -> None:
    batch = raw_batch(VALID, 1, attributes=codec_id | TRANSACTIONAL)
    with pytest.raises(UnsupportedCodecError) as info:
        decode(PREFIX + batch, file=LOG_FILE, base_position=BASE_POSITION)
    assert (info.value.file, info.value.position) == (LOG_FILE, BATCH_POSITION)
    assert f"unknown compression codec id {codec_id} in attributes 0x{codec_id | TRANSACTIONAL:02x}" in str(info.value)


def scan_error(buf: bytes | bytearray) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        scan(as_uint8(PREFIX + buf), file=LOG_FILE, base_position=BASE_POSITION)
    assert (info.value.file, info.value.position) == (LOG_FILE, BATCH_POSITION)
    return info.value


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_unknown_magic(magic: int) -> None:
    batch = bytearray(encode(rows_table(ROWS)))
    batch[MAGIC_OFFSET] = magic
    assert f"unknown magic value {magic}, expected 0, 1 or 2" in str(scan_error(batch))


@pytest.mark.parametrize("size", [13, 0, -1, -(2**31)])
def test_size_below_the_minimum(size: int) -> None:
    entry = struct.pack(">qi", 0, size) + bytes(64)
    assert f"entry size {size} is smaller than the minimum record overhead (14)" in str(scan_error(entry))


def test_v2_batch_shorter_than_its_header() -> None:
    entry = bytearray(encode(rows_table(ROWS))[:40])
    struct.pack_into(">i", entry, 8, 40 - LOG_OVERHEAD)
    assert "record batch of 40 bytes is shorter than the v2 header (61)" in str(scan_error(entry))


@pytest.mark.parametrize("cut", [17, 60, 100, -1], ids=["17-bytes", "60-bytes", "100-bytes", "all-but-one-byte"])
def test_incomplete_tail_is_no_error(cut: int) -> None:
    whole = encode(rows_table(ROWS))
    buf = as_uint8(PREFIX + whole + whole[:cut])
    entries = scan(buf, file=LOG_FILE)
    assert len(entries) == 2 and entries.incomplete_tail
    assert entries.stop_position == len(PREFIX) + len(whole)
    verify_crcs(buf, entries)
    decoded = list(decode_entries(buf, entries, topic=TOPIC, partition=0))
    assert sum(b.num_rows for b in decoded) == 1 + len(ROWS)


def test_short_tail_under_17_bytes_is_incomplete() -> None:
    entries = scan(as_uint8(PREFIX + bytes(16)))
    assert (len(entries), entries.stop_position, entries.incomplete_tail) == (1, len(PREFIX), True)
    complete = scan(as_uint8(PREFIX))
    assert (len(complete), complete.incomplete_tail) == (1, False)
