"""Retention over a partition of 10,000 segments: the decision alone, a pass with nothing to delete (what a
periodic pass costs most of the time), a pass retiring half the segments, and removing their files later.

The partition is written directly, one record batch per segment, as a broker would have left it after 10,000
rolls (``.log`` with the batch at its base offset, an empty ``.index``, the ``.timeindex`` entry a roll
appends); appending it through the log would fsync 10,000 rolls.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import time

from benchmarks.common import TOPIC, Result, Timing, markdown, measure, pin_to_one_core, records_table
from pysparklog.storage import checkpoints
from pysparklog.storage.config import LogConfig
from pysparklog.storage.index import TimeIndex
from pysparklog.storage.io import PosixStorage
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings, encode_arrow
from pysparklog.storage.records.default_records import BASE_OFFSET_OFFSET
from pysparklog.storage.retention import plan_retention, run_retention
from pysparklog.storage.segment import filename_prefix, parse_segment_name

LOCAL = PosixStorage("/")  # checkpoint files are named by absolute paths

SEGMENTS = 10_000
RECORDS_PER_SEGMENT = 10
NO_OP_TARGET_S = 1.0
RETENTION_MS = 1000
CONFIG = LogConfig(retention_ms=RETENTION_MS, file_delete_delay_ms=0)


def write_partition(log_dir: str, segments: int = SEGMENTS) -> int:
    """A partition of ``segments`` one-batch segments of ``RECORDS_PER_SEGMENT`` records; returns its log end.

    Record ``i`` is stamped ``records_table``'s first timestamp + ``i``. Only the batch's base offset is
    rewritten per segment: it lies outside the batch checksum.
    """
    table = records_table(segments * RECORDS_PER_SEGMENT)
    directory = os.path.join(log_dir, f"{TOPIC}-0")
    os.makedirs(directory)
    first_ts = int(table.column("timestamp")[0].as_py())
    base = 0
    for encoded in encode_arrow(table, BatchSettings(max_batch_records=RECORDS_PER_SEGMENT)):
        batches = zip(encoded.positions.tolist(), encoded.sizes.tolist(), encoded.record_counts.tolist(), strict=True)
        for position, size, count in batches:
            batch = bytearray(encoded.data[position : position + size].tobytes())
            struct.pack_into(">q", batch, BASE_OFFSET_OFFSET, base)
            prefix = os.path.join(directory, filename_prefix(base))
            with open(prefix + ".log", "wb") as f:
                f.write(batch)
            open(prefix + ".index", "wb").close()
            with open(prefix + ".timeindex", "wb") as f:
                f.write(TimeIndex.encode(base, [first_ts + base + count - 1], [base + count - 1]))
            base += count
    assert base == segments * RECORDS_PER_SEGMENT, base
    # Everything is flushed: opening the log checks the last segment only, as after a clean shutdown.
    checkpoints.write_offset_checkpoint(
        LOCAL, os.path.join(log_dir, checkpoints.RECOVERY_POINT_CHECKPOINT), {(TOPIC, 0): base}
    )
    return base


def _link_segment_files(source: str, target: str) -> None:
    """Copy a partition cheaply: a retention pass renames segment files but never writes them, so the copy
    shares them by hard link; the files it does write (state record, checkpoints) are copied."""
    if parse_segment_name(os.path.basename(source), os.path.splitext(source)[1]) is not None:
        os.link(source, target)
    else:
        shutil.copy2(source, target)


def open_log(log_dir: str) -> PartitionLog:
    log = LogDirectory(log_dir, CONFIG).partition(TOPIC, 0).local
    log.recover()  # writes the state record, so that the timed passes find a log left by pysparklog
    return log


def run(*, repeats: int = 3) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-") as root:
        built = time.perf_counter()
        original = os.path.join(root, "original")
        log_end = write_partition(original)
        log = open_log(original)
        build_s = time.perf_counter() - built
        infos = log.segment_infos()
        assert len(infos) == SEGMENTS, len(infos)
        first_ts = infos[0].largest_timestamp - (infos[0].next_base - 1)
        half = infos[SEGMENTS // 2].base_offset
        # Records below offset `half` are more than retention.ms old.
        now = first_ts + half + RETENTION_MS

        def decide() -> None:
            plan_retention(
                infos,
                now_ms=now,
                log_start_offset=0,
                high_watermark=log_end,
                retention_ms=RETENTION_MS,
                retention_bytes=-1,
                delete=True,
            )

        plan_time = measure(decide, repeats=20)
        no_op = measure(lambda: run_retention(log, first_ts), repeats)
        log.close()

        retire_s, remove_s = [], []
        for i in range(repeats):
            copy = os.path.join(root, f"copy-{i}")
            shutil.copytree(original, copy, copy_function=_link_segment_files)
            log = LogDirectory(copy, CONFIG).partition(TOPIC, 0).local
            start = time.perf_counter()
            result = run_retention(log, now)  # `now` is in the records' past: no file is old enough to remove
            retire_s.append(time.perf_counter() - start)
            assert len(result.deleted) == SEGMENTS // 2 and result.removed_files == 0, result.removed_files
            start = time.perf_counter()
            removed = log.remove_deleted_files()
            remove_s.append(time.perf_counter() - start)
            assert removed == 3 * (SEGMENTS // 2), removed
            log.close()
            shutil.rmtree(copy)

    retire, remove = Timing(retire_s), Timing(remove_s)
    return [
        Result(
            f"retention pass over {SEGMENTS // 1000} k segments, nothing to delete",
            f"{no_op.median * 1e3:.0f} ms (best {no_op.best * 1e3:.0f})",
            f"< {NO_OP_TARGET_S:.0f} s",
            no_op.median < NO_OP_TARGET_S,
        ),
        Result(
            f"decision alone: `plan_retention` over {SEGMENTS // 1000} k segments",
            f"{plan_time.median * 1e3:.1f} ms",
        ),
        Result(
            f"retention pass retiring {SEGMENTS // 2000} k of {SEGMENTS // 1000} k segments (time rule, renames)",
            f"{retire.median * 1e3:.0f} ms (best {retire.best * 1e3:.0f})",
        ),
        Result(
            f"removing their {3 * SEGMENTS // 2000} k `.deleted` files after `file.delete.delay.ms`",
            f"{remove.median * 1e3:.0f} ms (best {remove.best * 1e3:.0f})",
        ),
        Result(f"building the {SEGMENTS // 1000} k-segment partition (files written directly)", f"{build_s:.1f} s"),
    ]


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
