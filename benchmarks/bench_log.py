"""A partition of 100 segments: random offset lookups, a full ``read_arrow`` and ``append_arrow``.

A lookup is what ``read_arrow`` does before its first chunk: the acknowledged view, the segment
floor of the offset by bisection over the view's bases, then ``LogSegment.translate_offset``.
"""

from __future__ import annotations

import bisect
import tempfile
import time

import numpy as np
import pyarrow as pa

from benchmarks.common import (
    RECORDS,
    TOPIC,
    Result,
    markdown,
    measure,
    pin_to_one_core,
    rate_figure,
    records_table,
)
from pysparklog.storage.config import LogConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.records.arrow_records import BatchSettings, encode_arrow

SEGMENTS = 100
LOOKUPS = 2000
LOOKUP_TARGET_US = 50.0
# Kafka's producer default batch.size: what a partition written by Kafka clients is made of.
LOG_BATCH_SETTINGS = BatchSettings(max_batch_bytes=16 * 1024)


def segment_bytes_for(table: pa.Table, settings: BatchSettings, segments: int) -> int:
    """The largest ``segment.bytes`` that rolls the table's batches into at least ``segments`` segments.

    Replays Kafka's size rule (roll before a batch that would pass ``segment.bytes``) over the
    encoded batch sizes, so the partition is written once. With equal batches an exact count may
    not exist; one more segment is then the closest.
    """
    sizes: list[int] = np.concatenate([chunk.sizes for chunk in encode_arrow(table, settings)]).tolist()

    def count(limit: int) -> int:
        n, used = 1, 0
        for size in sizes:
            if used > limit - size and used > 0:
                n, used = n + 1, 0
            used += size
        return n

    low, high = max(sizes), sum(sizes)
    while low < high:
        mid = (low + high + 1) // 2
        if count(mid) >= segments:
            low = mid
        else:
            high = mid - 1
    return low


def lookup(log: Log, offset: int) -> tuple[int, int] | None:
    """(file position, last offset of the entry) of ``offset``, as ``read_arrow`` finds it."""
    view = log.view()
    base = view.segment_bases[max(bisect.bisect_right(view.segment_bases, offset) - 1, 0)]
    segment = log.segment(base)
    return segment.translate_offset(offset, view.end_of(base, segment))


def lookup_latencies(log: Log, offsets: list[int]) -> np.ndarray:
    """Microseconds of each lookup."""
    latencies = np.empty(len(offsets))
    for i, offset in enumerate(offsets):
        start = time.perf_counter_ns()
        found = lookup(log, offset)
        latencies[i] = (time.perf_counter_ns() - start) / 1000
        assert found is not None and found[1] >= offset
    return latencies


def read_all(log: Log) -> int:
    return sum(batch.num_rows for batch in log.read_arrow())


def append_fresh(table: pa.Table, config: LogConfig, settings: BatchSettings) -> None:
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-") as path:
        LogDirectory(path, config).partition(TOPIC, 0).append_arrow(table, settings)


def run(table: pa.Table | None = None, *, repeats: int = 5) -> list[Result]:
    table = records_table() if table is None else table
    config = LogConfig(segment_bytes=segment_bytes_for(table, LOG_BATCH_SETTINGS, SEGMENTS))
    append_default = measure(lambda: append_fresh(table, LogConfig(), BatchSettings()), repeats=3)
    append_rolling = measure(lambda: append_fresh(table, config, LOG_BATCH_SETTINGS), repeats=3, warmup=0)
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-") as path:
        logs = LogDirectory(path, config)
        log = logs.partition(TOPIC, 0)
        log.append_arrow(table, LOG_BATCH_SETTINGS)
        segments = len(log.view().segment_bases)
        assert segments >= SEGMENTS, segments
        offsets = np.random.default_rng(11).integers(0, RECORDS, LOOKUPS).tolist()

        cold_log = logs.partition(TOPIC, 0)  # a new reader: no index loaded yet
        cold = lookup_latencies(cold_log, [base + 1 for base in cold_log.view().segment_bases])
        lookup_latencies(log, offsets[: LOOKUPS // 10])  # warm-up
        warm = lookup_latencies(log, offsets)
        view_time = measure(log.view, repeats=LOOKUPS)
        assert read_all(log) == RECORDS
        read_time = measure(lambda: read_all(log), repeats)
        log.close()
        cold_log.close()

    median_us = float(np.median(warm))
    return [
        Result(
            f"random offset lookup, {segments}-segment partition, median of {LOOKUPS}",
            f"{median_us:.1f} us (p99 {np.percentile(warm, 99):.1f} us)",
            f"< {LOOKUP_TARGET_US:.0f} us",
            median_us < LOOKUP_TARGET_US,
        ),
        Result(
            "lookup part: `PartitionLog.view()` (shared flock, state record)",
            f"{view_time.median * 1e6:.1f} us",
        ),
        Result(
            "first lookup in each segment by a new reader (loads the index)",
            f"{np.median(cold):.1f} us (p99 {np.percentile(cold, 99):.1f} us)",
        ),
        Result(f"`read_arrow` of the whole {segments}-segment partition", rate_figure(read_time, RECORDS)),
        Result("`append_arrow` of 1 M records, default settings (one segment)", rate_figure(append_default, RECORDS)),
        Result(
            f"`append_arrow` of 1 M records, 16 KiB batches, {segments} segments (rolls fsync)",
            rate_figure(append_rolling, RECORDS),
        ),
    ]


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
