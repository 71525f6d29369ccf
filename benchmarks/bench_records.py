"""Record batches to Arrow and back: the per-chunk cost of the log's read and append paths.

Decode is what ``PartitionLog.read_arrow`` does per chunk (scan, CRC verification, decode to
pyarrow); encode is ``encode_arrow``. kafka-python's ``MemoryRecords`` iterates the same bytes as
the baseline, on a prefix since it is slow. Each codec alone on the same batches shows how much of
a compressed variant's time is the compression library's.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pyarrow as pa

from benchmarks.common import (
    RECORDS,
    TOPIC,
    Result,
    Timing,
    markdown,
    measure,
    pin_to_one_core,
    rate,
    rate_figure,
    records_table,
)
from pysparklog.storage.records import arrow_records, memory_records
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches
from pysparklog.storage.records.codecs import Codec, compress, decompress
from pysparklog.storage.records.default_records import RECORD_BATCH_OVERHEAD

DECODE_TARGET = 10e6  # records/s on one core
KAFKA_PYTHON_FACTOR = 30  # decode must beat kafka-python's iteration by this much
ENCODE_TARGET = 5e6
KAFKA_PYTHON_RECORDS = 100_000
KAFKA_DEFAULT_BATCH_BYTES = 16 * 1024  # the producer's batch.size
CONSUMER_PAUSE_S = 0.05  # what a consumer does with each chunk before asking for the next


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    settings: BatchSettings


UNCOMPRESSED = Variant("uncompressed, 1 MiB batches", BatchSettings(max_batch_bytes=1024 * 1024))
ZSTD = Variant("zstd, 1 MiB batches", BatchSettings(codec=Codec.ZSTD, max_batch_bytes=1024 * 1024))
SMALL_BATCHES = Variant("uncompressed, 16 KiB batches", BatchSettings(max_batch_bytes=KAFKA_DEFAULT_BATCH_BYTES))
VARIANTS = [UNCOMPRESSED, ZSTD, SMALL_BATCHES]


def encode(table: pa.Table, settings: BatchSettings) -> int:
    return sum(chunk.num_records for chunk in arrow_records.encode_arrow(table, settings))


def decode(chunks: list[EncodedBatches], *, pause: float = 0.0) -> float:
    """Seconds spent decoding each chunk as the log's read path does, ``pause`` seconds apart.

    Each batch is dropped once counted, as a consumer does, so its memory is free for the next.
    """
    busy = 0.0
    n = 0
    for chunk in chunks:
        start = time.perf_counter()
        entries = memory_records.scan(chunk.data)
        memory_records.verify_crcs(chunk.data, entries)
        for batch in arrow_records.decode_entries(chunk.data, entries, topic=TOPIC, partition=0):
            n += batch.num_rows
        busy += time.perf_counter() - start
        time.sleep(pause)
    assert n == RECORDS, n
    return busy


def records_sections(chunks: list[EncodedBatches]) -> list[memoryview]:
    """The records section of every batch (compressed or not), without its header."""
    return [
        chunk.data.data[position + RECORD_BATCH_OVERHEAD : position + size]
        for chunk in chunks
        for position, size in zip(chunk.positions.tolist(), chunk.sizes.tolist(), strict=True)
    ]


def prefix(chunks: list[EncodedBatches], records: int) -> tuple[bytes, int]:
    """The leading whole batches that hold at least ``records`` records, and how many they hold."""
    parts = []
    count = 0
    for chunk in chunks:
        for position, size, batch_records in zip(
            chunk.positions.tolist(), chunk.sizes.tolist(), chunk.record_counts.tolist(), strict=True
        ):
            parts.append(chunk.data[position : position + size].tobytes())
            count += batch_records
            if count >= records:
                return b"".join(parts), count
    return b"".join(parts), count


def kafka_python_iterate(data: bytes) -> int:
    """kafka-python's consumer loop over fetched bytes: every batch, every record, its key and value."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import MemoryRecords

    records = MemoryRecords(data)
    n = 0
    while (batch := records.next_batch()) is not None:
        for record in batch:
            _key, _value = record.key, record.value
            n += 1
    return n


def _target(what: str, timing: Timing, items: int, minimum: float) -> Result:
    return Result(what, rate_figure(timing, items), f">= {rate(minimum)}", items / timing.median >= minimum)


def run_variant(table: pa.Table, variant: Variant, repeats: int) -> list[Result]:
    chunks = list(arrow_records.encode_arrow(table, variant.settings))
    decode_time = measure(lambda: decode(chunks), repeats)
    data, kp_records = prefix(chunks, KAFKA_PYTHON_RECORDS)
    assert kafka_python_iterate(data) == kp_records
    kp_time = measure(lambda: kafka_python_iterate(data), max(3, repeats // 2))
    encode_time = measure(lambda: encode(table, variant.settings), repeats)
    factor = (RECORDS / decode_time.median) / (kp_records / kp_time.median)
    return [
        _target(f"decode to Arrow, {variant.name}", decode_time, RECORDS, DECODE_TARGET),
        Result(
            f"kafka-python 3.0.12 iteration of the same bytes, {variant.name} ({kp_records // 1000} k records)",
            rate_figure(kp_time, kp_records),
        ),
        Result(
            f"decode / kafka-python, {variant.name}",
            f"{factor:.1f}x",
            f">= {KAFKA_PYTHON_FACTOR}x",
            factor >= KAFKA_PYTHON_FACTOR,
        ),
        _target(f"encode from Arrow, {variant.name}", encode_time, RECORDS, ENCODE_TARGET),
    ]


CODECS = (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD)


def _each(codec_function: Callable[[Codec, memoryview], bytes], codec: Codec, sections: list[memoryview]) -> None:
    """Apply ``codec`` to every section, dropping each result as the engine does once it has copied it."""
    for section in sections:
        codec_function(codec, section)


def run_codecs_alone(table: pa.Table, repeats: int) -> list[Result]:
    """Each codec on the records sections of the 1 MiB batches, without the engine: the ceiling of a compressed
    variant's rows."""
    plain = records_sections(list(arrow_records.encode_arrow(table, UNCOMPRESSED.settings)))
    results = []
    for codec in CODECS:
        settings = BatchSettings(codec=codec, max_batch_bytes=UNCOMPRESSED.settings.max_batch_bytes)
        packed = records_sections(list(arrow_records.encode_arrow(table, settings)))
        compress_time = measure(partial(_each, compress, codec, plain), max(3, repeats // 2))
        decompress_time = measure(partial(_each, decompress, codec, packed), repeats)
        results += [
            Result(f"{codec.kafka_name} alone: decompressing those batches", rate_figure(decompress_time, RECORDS)),
            Result(
                f"{codec.kafka_name} alone: compressing them at Kafka's default level",
                rate_figure(compress_time, RECORDS),
            ),
        ]
    return results


def run_slow_consumer(table: pa.Table, repeats: int) -> list[Result]:
    """Decode time when the consumer takes a while per chunk: caches are cold and freed memory may be unmapped."""
    chunks = list(arrow_records.encode_arrow(table, UNCOMPRESSED.settings))
    busy = [decode(chunks, pause=CONSUMER_PAUSE_S) for _ in range(repeats + 1)][1:]
    return [
        _target(
            f"decode to Arrow, {UNCOMPRESSED.name}, consumer busy {CONSUMER_PAUSE_S * 1000:.0f} ms per chunk",
            Timing(busy),
            RECORDS,
            DECODE_TARGET,
        )
    ]


def run(table: pa.Table | None = None, *, repeats: int = 7) -> list[Result]:
    table = records_table() if table is None else table
    results = []
    for variant in VARIANTS:
        results += run_variant(table, variant, repeats)
        if variant is ZSTD:
            results += run_codecs_alone(table, repeats)
    return results + run_slow_consumer(table, max(3, repeats // 2))


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
