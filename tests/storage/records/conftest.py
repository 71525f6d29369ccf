"""Fixtures of the record tests."""

from __future__ import annotations

import struct
import types
from collections.abc import Iterator
from typing import Any

import cramjam
import lz4.frame
import pytest

from tests.storage.records.helpers import kafka_codec


def _xxh32_from_lz4(data: bytes) -> int:
    """xxh32 (seed 0) as the LZ4 C library computes it for an LZ4 frame's content checksum."""
    frame = lz4.frame.compress(data, content_checksum=True)
    return int(struct.unpack("<I", frame[-4:])[0])


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """kafka.codec with its optional back ends supplied, since python-snappy and xxhash are not installed.

    Snappy blocks come from cramjam, which python-snappy itself wraps; xxh32 comes from the LZ4 C
    library. The framing, which is what the tests compare, stays kafka-python's own; so do its record
    builders and readers, which call kafka.codec.
    """
    snappy = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
    )
    xxhash = types.SimpleNamespace(
        xxh32=lambda data: types.SimpleNamespace(digest=lambda: struct.pack(">I", _xxh32_from_lz4(bytes(data))))
    )
    monkeypatch.setattr(kafka_codec, "snappy", snappy)
    monkeypatch.setattr(kafka_codec, "xxhash", xxhash)
    yield kafka_codec
