"""Codecs: round trips, Kafka's framing byte for byte, and streams written by kafka-python."""

from __future__ import annotations

import gzip
import random
import struct
from typing import Any

import cramjam
import pytest
import zstandard

from pysparklog.errors import CorruptRecordError, InvalidConfigError, UnsupportedCodecError
from pysparklog.storage.records.codecs import Codec, compress, decompress
from tests.storage.records.conftest import xxh32

#: cramjam 2.11, the last release for Python 3.10, writes LZ4HC frames (Kafka's non-default lz4 levels) in 8 KiB
#: blocks, not 64 KiB ones: still frames every Kafka client reads, but they compress worse at higher levels.
LZ4HC_IN_8_KIB_BLOCKS = pytest.mark.skipif(
    tuple(int(part) for part in cramjam.__version__.split(".")[:2]) < (2, 12),
    reason="cramjam < 2.12 (Python 3.10) writes LZ4HC frames in 8 KiB blocks",
)

SMALL = b"pysparklog: a Kafka-compatible log " * 3
# Over 100 KiB, half incompressible, so that snappy and lz4 need several blocks of both kinds.
LARGE = random.Random(7).randbytes(60_000) + b"0123456789abcdef" * 4_000
PAYLOADS = [pytest.param(b"", id="empty"), pytest.param(SMALL, id="small"), pytest.param(LARGE, id="large")]

XERIAL_HEADER = bytes.fromhex("82534e41505059000000000100000001")
XERIAL_BLOCK_SIZE = 32 * 1024
LZ4_KAFKA_HEADER = bytes.fromhex("04224d18604082")
# HC of FLG 60 BD 40 computed over the frame magic as well (KIP-57), as Kafka wrote in magic 0.
LZ4_BROKEN_HC = 0x1A
LZ4_HC_POSITION = 6
LZ4_END_MARK = bytes(4)
LZ4_BLOCK = 64 * 1024
LZ4_UNCOMPRESSED = 0x80000000


# Codec


@pytest.mark.parametrize(
    ("codec", "value", "name"),
    [
        (Codec.NONE, 0, "none"),
        (Codec.GZIP, 1, "gzip"),
        (Codec.SNAPPY, 2, "snappy"),
        (Codec.LZ4, 3, "lz4"),
        (Codec.ZSTD, 4, "zstd"),
    ],
)
def test_codec_ids_and_kafka_names(codec: Codec, value: int, name: str) -> None:
    assert codec.value == value
    assert codec.kafka_name == name
    assert Codec.from_name(name) is codec
    assert Codec.from_name(name.upper()) is codec
    assert Codec.from_attributes(value) is codec


def test_from_name_accepts_uncompressed() -> None:
    assert Codec.from_name("Uncompressed") is Codec.NONE


@pytest.mark.parametrize("name", ["brotli", "producer", "", "gzip "])
def test_from_name_rejects_unknown_names(name: str) -> None:
    with pytest.raises(UnsupportedCodecError) as info:
        Codec.from_name(name)
    assert repr(name) in str(info.value)
    assert "accepted: none, uncompressed, gzip, snappy, lz4, zstd" in str(info.value)


def test_from_attributes_reads_only_the_codec_bits() -> None:
    # 0x08 LogAppendTime, 0x10 transactional, 0x20 control: none of them is part of the codec.
    assert Codec.from_attributes(0x08 | 0x10 | 0x20 | 2) is Codec.SNAPPY


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_from_attributes_rejects_undefined_ids(codec_id: int) -> None:
    with pytest.raises(UnsupportedCodecError) as info:
        Codec.from_attributes(0x08 | codec_id, file="00000000000000000000.log", position=4096)
    assert info.value.file == "00000000000000000000.log"
    assert info.value.position == 4096
    message = str(info.value)
    assert f"codec id {codec_id}" in message
    assert "00000000000000000000.log" in message and "4096" in message
    assert "0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd" in message


# Round trips


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("payload", PAYLOADS)
def test_round_trip(codec: Codec, payload: bytes) -> None:
    compressed = compress(codec, payload)
    assert decompress(codec, compressed) == payload
    assert decompress(codec, memoryview(bytearray(compressed))) == payload


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_compressing_codecs_shrink_repetitive_data(codec: Codec) -> None:
    data = b"0123456789abcdef" * 4_000
    assert len(compress(codec, data)) < len(data) // 10


@pytest.mark.parametrize(
    ("codec", "level"),
    [(Codec.GZIP, 1), (Codec.GZIP, 9), (Codec.LZ4, 1), (Codec.LZ4, 17), (Codec.ZSTD, -5), (Codec.ZSTD, 22)],
)
def test_levels_round_trip(codec: Codec, level: int) -> None:
    assert decompress(codec, compress(codec, LARGE, level=level)) == LARGE


@pytest.mark.parametrize(
    ("codec", "low", "high"),
    [(Codec.GZIP, 1, 9), pytest.param(Codec.LZ4, 9, 12, marks=LZ4HC_IN_8_KIB_BLOCKS), (Codec.ZSTD, 1, 19)],
)
def test_higher_levels_compress_text_better(codec: Codec, low: int, high: int) -> None:
    rng = random.Random(5)
    words = [bytes(rng.choices(b"abcdefghij", k=rng.randint(3, 9))) for _ in range(300)]
    text = b" ".join(rng.choices(words, k=20_000))
    assert len(compress(codec, text, level=high)) < len(compress(codec, text, level=low))


def test_lz4_default_level_is_kafkas_fast_compressor() -> None:
    # Kafka's Lz4BlockOutputStream uses the fast compressor at level 9, its default, and LZ4HC otherwise.
    assert compress(Codec.LZ4, LARGE, level=9) == compress(Codec.LZ4, LARGE)
    assert compress(Codec.LZ4, LARGE, level=12) != compress(Codec.LZ4, LARGE)


@pytest.mark.parametrize(
    ("codec", "level", "expected"),
    [
        (Codec.GZIP, 0, "accepted: 1..9"),
        (Codec.GZIP, 10, "accepted: 1..9"),
        (Codec.LZ4, 18, "accepted: 1..17"),
        (Codec.ZSTD, 23, "accepted: -131072..22"),
        (Codec.SNAPPY, 1, "it takes no level"),
        (Codec.NONE, 1, "it takes no level"),
    ],
)
def test_levels_kafka_rejects_are_rejected(codec: Codec, level: int, expected: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        compress(codec, SMALL, level=level)
    assert f"level {level} is not accepted for {codec.kafka_name}; {expected}" in str(info.value)


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(Codec.GZIP, gzip.compress(b"first ") + gzip.compress(b"second")) == b"first second"


def test_gzip_header_has_no_modification_time() -> None:
    # RFC 1952 MTIME, bytes 4-7: 0 as the JDK writes it, so that equal batches compress equally.
    assert compress(Codec.GZIP, SMALL)[4:8] == bytes(4)


# Snappy framing


def test_snappy_writes_xerial_framing_with_32_kib_blocks() -> None:
    framed = compress(Codec.SNAPPY, LARGE)
    assert framed[: len(XERIAL_HEADER)] == XERIAL_HEADER
    cursor, blocks = len(XERIAL_HEADER), []
    while cursor < len(framed):
        (length,) = struct.unpack_from(">i", framed, cursor)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[cursor + 4 : cursor + 4 + length])))
        cursor += 4 + length
    assert cursor == len(framed)
    assert [len(block) for block in blocks] == [XERIAL_BLOCK_SIZE] * 3 + [len(LARGE) - 3 * XERIAL_BLOCK_SIZE]
    assert b"".join(blocks) == LARGE


@pytest.mark.parametrize("payload", PAYLOADS)
def test_snappy_matches_kafka_python_xerial_byte_for_byte(kafka_python_codecs: Any, payload: bytes) -> None:
    assert compress(Codec.SNAPPY, payload) == kafka_python_codecs.snappy_encode(payload, xerial_compatible=True)


@pytest.mark.parametrize("payload", [SMALL, LARGE], ids=["small", "large"])
def test_snappy_accepts_raw_snappy(payload: bytes) -> None:
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(payload))) == payload


def test_snappy_accepts_little_endian_xerial_versions() -> None:
    framed = compress(Codec.SNAPPY, LARGE)
    redpanda = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert redpanda != framed
    assert decompress(Codec.SNAPPY, redpanda) == LARGE


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (struct.pack(">i", 1000) + b"short", "has length 1000; expected 0..5"),
        (struct.pack(">i", -1), "has length -1"),
        (b"\x00\x00", "needs 4 bytes, only 2 remain"),
    ],
    ids=["past-end", "negative", "cut-length"],
)
def test_snappy_rejects_bad_xerial_block_lengths(tail: bytes, expected: str) -> None:
    with pytest.raises(CorruptRecordError) as info:
        decompress(Codec.SNAPPY, compress(Codec.SNAPPY, SMALL) + tail)
    assert "snappy decompression" in str(info.value)
    assert expected in str(info.value)


# LZ4 framing


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("level", [None, 12])
def test_lz4_frame_is_kafkas(payload: bytes, level: int | None) -> None:
    frame = compress(Codec.LZ4, payload, level=level)
    assert frame[:7] == LZ4_KAFKA_HEADER
    assert frame[-4:] == LZ4_END_MARK


def test_lz4_kafkas_header_checksum_is_xxh32_of_its_descriptor() -> None:
    # Checks the xxh32 oracle with the one header checksum Kafka's frames all carry, and its KIP-57 variant.
    assert (xxh32(LZ4_KAFKA_HEADER[4:6]) >> 8) & 0xFF == LZ4_KAFKA_HEADER[LZ4_HC_POSITION]
    assert (xxh32(LZ4_KAFKA_HEADER[:6]) >> 8) & 0xFF == LZ4_BROKEN_HC


def lz4_blocks(frame: bytes) -> list[tuple[int, bytes]]:
    """(size field, bytes) of each block of a frame with Kafka's 7-byte header and no block checksums."""
    blocks, cursor = [], len(LZ4_KAFKA_HEADER)
    while size_field := struct.unpack_from("<I", frame, cursor)[0]:
        cursor += 4
        size = size_field & ~LZ4_UNCOMPRESSED
        blocks.append((size_field, frame[cursor : cursor + size]))
        cursor += size
    assert cursor + 4 == len(frame)
    return blocks


@pytest.mark.parametrize("level", [None, pytest.param(12, marks=LZ4HC_IN_8_KIB_BLOCKS)])
def test_lz4_writes_independent_64_kib_blocks_storing_incompressible_ones(level: int | None) -> None:
    # As KafkaLZ4BlockOutputStream: a block that does not shrink is stored as it is, the size's high bit set.
    payload = random.Random(3).randbytes(LZ4_BLOCK + 100) + b"0123456789abcdef" * 1000
    blocks = lz4_blocks(compress(Codec.LZ4, payload, level=level))
    assert [size_field for size_field, _ in blocks[:1]] == [LZ4_BLOCK | LZ4_UNCOMPRESSED]
    assert blocks[0][1] == payload[:LZ4_BLOCK]
    (second_size, second), *rest = blocks[1:]
    assert not rest and second_size == len(second) < 16_100
    decoded = bytes(cramjam.lz4.decompress_block(second, output_len=LZ4_BLOCK))[: len(payload) - LZ4_BLOCK]
    assert decoded == payload[LZ4_BLOCK:]


def test_lz4_magic_0_accepts_kafkas_broken_header_checksum() -> None:
    broken = bytearray(compress(Codec.LZ4, LARGE))
    broken[LZ4_HC_POSITION] = LZ4_BROKEN_HC
    assert decompress(Codec.LZ4, broken, magic=0) == LARGE
    assert decompress(Codec.LZ4, compress(Codec.LZ4, LARGE), magic=0) == LARGE
    with pytest.raises(CorruptRecordError, match="lz4 decompression"):
        decompress(Codec.LZ4, broken, magic=1)


def test_lz4_magic_0_fixes_the_checksum_of_a_frame_with_content_size() -> None:
    # FLG 68: Kafka's 60 with the content size bit, then the 8-byte content size before HC.
    descriptor = bytes.fromhex("6840") + struct.pack("<Q", len(SMALL))
    body = compress(Codec.LZ4, SMALL)[len(LZ4_KAFKA_HEADER) :]
    frame = LZ4_KAFKA_HEADER[:4] + descriptor + bytes([(xxh32(descriptor) >> 8) & 0xFF]) + body
    assert decompress(Codec.LZ4, frame) == SMALL
    broken = bytearray(frame)
    broken[LZ4_HC_POSITION + 8] ^= 0xFF
    assert decompress(Codec.LZ4, broken, magic=0) == SMALL
    with pytest.raises(CorruptRecordError, match="lz4 decompression"):
        decompress(Codec.LZ4, broken, magic=1)


# Streams written by kafka-python


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize(
    ("codec", "encoder", "magic"),
    [
        (Codec.GZIP, "gzip_encode", 2),
        (Codec.SNAPPY, "snappy_encode", 2),
        (Codec.LZ4, "lz4_encode", 2),
        (Codec.LZ4, "lz4_encode_old_kafka", 0),
        (Codec.ZSTD, "zstd_encode", 2),
    ],
)
def test_reads_kafka_python_output(
    kafka_python_codecs: Any, codec: Codec, encoder: str, magic: int, payload: bytes
) -> None:
    assert decompress(codec, getattr(kafka_python_codecs, encoder)(payload), magic=magic) == payload


def test_kafka_python_old_kafka_lz4_has_the_broken_checksum(kafka_python_codecs: Any) -> None:
    # Checks the oracle the test above relies on: for magic 0 kafka-python computes HC over the magic too.
    frame = kafka_python_codecs.lz4_encode_old_kafka(SMALL)
    assert frame[LZ4_HC_POSITION] == (xxh32(frame[:LZ4_HC_POSITION]) >> 8) & 0xFF
    assert frame[LZ4_HC_POSITION] != (xxh32(frame[4:LZ4_HC_POSITION]) >> 8) & 0xFF


def test_reads_kafka_python_raw_snappy(kafka_python_codecs: Any) -> None:
    assert decompress(Codec.SNAPPY, kafka_python_codecs.snappy_encode(LARGE, xerial_compatible=False)) == LARGE


# zstd frames


def test_zstd_reads_a_frame_without_content_size() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(LARGE)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Codec.ZSTD, frame) == LARGE


def test_zstd_reads_concatenated_frames() -> None:
    assert decompress(Codec.ZSTD, compress(Codec.ZSTD, SMALL) + compress(Codec.ZSTD, LARGE)) == SMALL + LARGE


# Bad input


GARBAGE = b"this is not a compressed stream at all"


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
@pytest.mark.parametrize("cut", ["garbage", "truncated"])
def test_bad_input_names_codec_file_and_position(codec: Codec, cut: str) -> None:
    data = GARBAGE if cut == "garbage" else compress(codec, LARGE)[:-7]
    with pytest.raises(CorruptRecordError) as info:
        decompress(codec, data, file="00000000000000000042.log", position=1234)
    assert info.value.file == "00000000000000000042.log"
    assert info.value.position == 1234
    assert f"{codec.kafka_name} decompression of {len(data)} bytes failed: " in str(info.value)


def test_zstd_truncated_frame_says_so() -> None:
    with pytest.raises(CorruptRecordError, match="zstd frame is truncated"):
        decompress(Codec.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(LARGE)[:-7])
