"""Compaction of a partition: 1 M records over 10 k keys, from a partition Kafka's producers would write.

The benchmark's records (``common.records_table``) with their keys cycling over 10,000 values, so
that compaction keeps 1 % of them, appended in 16 KiB batches (the producer's ``batch.size``) and
rolled, so that the whole partition is dirty and cleanable. Each repeat cleans a fresh copy of it
with ``cleaner.clean_log``: the offset map over the dirty range, the filtering and rewriting of
every batch, the cleaned segment's files fsynced and swapped in, the cleaner checkpoint written.
The copy is made before the clock starts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

from benchmarks.common import RECORDS, TOPIC, Result, Timing, markdown, pin_to_one_core, rate_figure, records_table
from pysparklog.storage.cleaner import clean_log
from pysparklog.storage.config import LogConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings

KEYS = 10_000
BATCH_SETTINGS = BatchSettings(max_batch_bytes=16 * 1024)
CONFIG = LogConfig(cleanup_policy=frozenset({"compact"}))


def keyed(table: pa.Table, keys: int = KEYS) -> pa.Table:
    """The table with its 10-byte keys cycling over ``keys`` values."""
    ids = np.arange(table.num_rows, dtype=np.int64) % keys
    text = np.char.zfill(ids.astype(str), 10).astype("S10")
    key = pa.Array.from_buffers(
        pa.binary(), len(text), [None, pa.py_buffer(np.arange(len(text) + 1, dtype=np.int32) * 10), pa.py_buffer(text)]
    )
    return table.set_column(table.schema.get_field_index("key"), "key", key)


def clean_copy(source: str, scratch: str) -> float:
    """Seconds ``clean_log`` takes on a fresh copy of the dirty log directory ``source``."""
    target = os.path.join(scratch, "copy")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    log = LogDirectory(target, CONFIG).partition(TOPIC, 0)
    log.view()  # the copy's first look (state, listing) is not the cleaner's work
    start = time.perf_counter()
    result = clean_log(log)
    seconds = time.perf_counter() - start
    assert result.cleaned and result.records_read == RECORDS and result.records_kept == KEYS, result
    log.close()
    return seconds


def run(table: pa.Table | None = None, *, repeats: int = 3) -> list[Result]:
    table = keyed(records_table() if table is None else table)
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-") as scratch:
        source = os.path.join(scratch, "source")
        log = LogDirectory(source, CONFIG).partition(TOPIC, 0)
        log.append_arrow(table, BATCH_SETTINGS)
        log.roll()
        log.close()
        clean_copy(source, scratch)  # warm-up: kernels loaded, page cache filled
        timing = Timing([clean_copy(source, scratch) for _ in range(repeats)])
    return [
        Result(
            f"compaction of 1 M records over {KEYS // 1000} k keys, 16 KiB batches (`clean_log`)",
            rate_figure(timing, RECORDS),
        ),
        Result("compaction wall time", f"{timing.median:.2f} s (best {timing.best:.2f} s)"),
    ]


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
