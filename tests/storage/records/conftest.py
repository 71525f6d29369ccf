"""Fixtures of the record tests."""

from __future__ import annotations

import struct
import types
from collections.abc import Iterator
from typing import Any

import cramjam
import pytest

from tests.storage.records.helpers import kafka_codec, kafka_default_records, kafka_legacy_records

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_U32 = 0xFFFFFFFF


def _rotl(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (32 - bits))) & _U32


def xxh32(data: bytes) -> int:
    """xxh32 with seed 0, from its specification: the oracle of LZ4 header checksums, independent of the LZ4 C
    library that pysparklog's own checksum comes from."""
    size, i = len(data), 0
    if size >= 16:
        lanes = [(_P1 + _P2) & _U32, _P2, 0, -_P1 & _U32]
        while i <= size - 16:
            for lane in range(4):
                word = int.from_bytes(data[i : i + 4], "little")
                lanes[lane] = (_rotl((lanes[lane] + word * _P2) & _U32, 13) * _P1) & _U32
                i += 4
        h = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _U32
    else:
        h = _P5
    h = (h + size) & _U32
    while i <= size - 4:
        h = (_rotl((h + int.from_bytes(data[i : i + 4], "little") * _P3) & _U32, 17) * _P4) & _U32
        i += 4
    for byte in data[i:]:
        h = (_rotl((h + byte * _P5) & _U32, 11) * _P1) & _U32
    h ^= h >> 15
    h = (h * _P2) & _U32
    h ^= h >> 13
    h = (h * _P3) & _U32
    return h ^ (h >> 16)


def _lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame as the LZ4 C library writes one with independent blocks (block checksums on), which is not
    how pysparklog frames its own."""
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """kafka.codec with its optional back ends supplied, since python-snappy, lz4 and xxhash are not installed.

    Snappy blocks and LZ4 frames come from cramjam (python-snappy wraps the same code; lz4 and cramjam both
    wrap the LZ4 C library); xxh32 is computed from its specification. The framing, which is what the tests
    compare, stays kafka-python's own (its xerial blocks, its broken magic 0 LZ4 header checksum); so do its
    record builders and readers, which call kafka.codec.
    """
    snappy = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
    )
    xxhash = types.SimpleNamespace(
        xxh32=lambda data: types.SimpleNamespace(digest=lambda: struct.pack(">I", xxh32(bytes(data))))
    )
    monkeypatch.setattr(kafka_codec, "snappy", snappy)
    monkeypatch.setattr(kafka_codec, "xxhash", xxhash)
    monkeypatch.setattr(kafka_codec, "lz4", types.SimpleNamespace())  # has_lz4() looks for the module
    # The record modules bound kafka.codec's functions when they were imported.
    for module in (kafka_codec, kafka_default_records, kafka_legacy_records):
        monkeypatch.setattr(module, "lz4_encode", _lz4_frame)
        monkeypatch.setattr(module, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data)))
    yield kafka_codec
