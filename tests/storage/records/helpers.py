"""Shared by the record tests: kafka-python's record classes (the oracle) and round trips through our engine."""

from __future__ import annotations

import struct
import warnings

import pyarrow as pa

from pysparklog.storage.records.arrow_records import BatchSettings, decode_entries, encode_arrow, record_schema
from pysparklog.storage.records.default_records import CRC_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD, batch_crc
from pysparklog.storage.records.memory_records import as_uint8, scan, verify_crcs

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text while importing.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
    from kafka.record import MemoryRecords
    from kafka.record import default_records as kafka_default_records
    from kafka.record import legacy_records as kafka_legacy_records
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

__all__ = [
    "NOW_MS",
    "TOPIC",
    "DefaultRecordBatch",
    "DefaultRecordBatchBuilder",
    "LegacyRecordBatchBuilder",
    "MemoryRecords",
    "decode",
    "encode",
    "kafka_codec",
    "kafka_default_records",
    "kafka_legacy_records",
    "restamp_crc",
    "zigzag",
]

#: The ``now_ms`` the tests give the encoder, so that null timestamps are predictable.
NOW_MS = 1_700_000_000_000
TOPIC = "t"


def encode(data: pa.Table | pa.RecordBatch, settings: BatchSettings | None = None, *, now_ms: int = NOW_MS) -> bytes:
    """Every batch ``encode_arrow`` writes for ``data``, laid end to end as in a log file."""
    return b"".join(chunk.data.tobytes() for chunk in encode_arrow(data, settings, now_ms=now_ms))


def decode(
    buf: bytes | bytearray,
    *,
    include_headers: bool = True,
    file: str | None = None,
    base_position: int = 0,
) -> pa.Table:
    """What a reader of ``buf`` gets: scan, verify the checksums, decode to Spark's Kafka columns."""
    data = as_uint8(buf)
    entries = scan(data, file=file, base_position=base_position)
    verify_crcs(data, entries, file=file, base_position=base_position)
    batches = decode_entries(
        data, entries, topic=TOPIC, partition=0, include_headers=include_headers, file=file, base_position=base_position
    )
    return pa.Table.from_batches(list(batches), schema=record_schema(include_headers))


def restamp_crc(buf: bytearray, position: int = 0) -> None:
    """Recompute the CRC of the v2 batch at ``position`` after tampering, so that only structural checks catch it."""
    size = struct.unpack_from(">i", buf, position + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    struct.pack_into(">I", buf, position + CRC_OFFSET, batch_crc(memoryview(buf)[position : position + size]))


def zigzag(value: int) -> bytes:
    """Kafka's varint (ByteUtils.writeVarlong), written here independently of the engine's kernels."""
    raw = ((value << 1) ^ (value >> 63)) & (2**64 - 1)
    out = bytearray()
    while raw >= 0x80:
        out.append(raw & 0x7F | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)
