"""The producer: a bulk ``send_arrow`` of 10 M records, and single-record ``send`` calls.

Both write 10-byte keys and 100-byte values into a topic of 6 partitions with Kafka's default
producer settings (idempotent, ``batch.size`` 16384, no compression): partitioning by murmur2,
grouping per partition, encoding, the appends and the log's duplicate check are all timed. The
bulk row is one ``send_arrow`` of the whole table; the single-record row is ``send`` per record
from Python ``bytes``, then ``flush``, the sender thread sharing the one core.

The log directory is on tmpfs (``/dev/shm``) when there is one: 10 M records make 1.4 GB of
segments, and these rows are about the producer's work on one core, not about how fast the disk
takes 1.4 GB (on the project machine the first few hundred MB go at page-cache speed, the rest at
the disk's, from 0.5 to 3 GB/s from one run to the next).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable

from benchmarks.common import Result, Timing, markdown, pin_to_one_core, rate, rate_figure, records_table
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory

BULK_RECORDS = 10_000_000
SINGLE_RECORDS = 500_000
PARTITIONS = 6
BULK_TARGET = 3e6  # records/s on one core
SINGLE_TARGET = 200e3
_TOPIC = "bench"
_TMPFS = "/dev/shm"


def _timed(work: Callable[[Producer], object], config: ProducerConfig, repeats: int) -> Timing:
    """Seconds of ``work`` on a new producer over a new log directory, each repeat, after an untimed
    warm-up (the kernels load, the memory the segments take is first touched)."""
    parent = _TMPFS if os.path.isdir(_TMPFS) else None
    seconds = []
    for repeat in range(repeats + 1):
        directory = tempfile.mkdtemp(prefix="pysparklog-bench-", dir=parent)
        try:
            logs = LogDirectory(directory)
            logs.topics.create(_TOPIC, PARTITIONS)
            with Producer(logs, config) as producer:
                start = time.perf_counter()
                work(producer)
                if repeat:
                    seconds.append(time.perf_counter() - start)
        finally:
            shutil.rmtree(directory)
    return Timing(seconds)


def _send_each(producer: Producer, keys: list[bytes], values: list[bytes]) -> None:
    send = producer.send
    for key, value in zip(keys, values, strict=True):
        send(_TOPIC, value, key)
    producer.flush()


def _target(what: str, timing: Timing, records: int, minimum: float) -> Result:
    return Result(what, rate_figure(timing, records), f">= {rate(minimum)}", records / timing.median >= minimum)


def run(*, repeats: int = 3) -> list[Result]:
    table = records_table(BULK_RECORDS)
    bulk = _timed(lambda p: p.send_arrow(_TOPIC, table), ProducerConfig(), repeats)
    plain = _timed(lambda p: p.send_arrow(_TOPIC, table), ProducerConfig(enable_idempotence=False), repeats)
    head = table.slice(0, SINGLE_RECORDS)
    keys, values = head.column("key").to_pylist(), head.column("value").to_pylist()
    single = _timed(lambda p: _send_each(p, keys, values), ProducerConfig(), repeats)
    return [
        _target(
            f"producer: bulk `send_arrow` of {BULK_RECORDS // 1_000_000} M records into {PARTITIONS} partitions "
            "(idempotent, 16 KiB batches)",
            bulk,
            BULK_RECORDS,
            BULK_TARGET,
        ),
        Result(
            "producer: the same with `enable.idempotence=false` (appends of up to `max.request.size`)",
            rate_figure(plain, BULK_RECORDS),
        ),
        _target(
            f"producer: single-record `send` of {SINGLE_RECORDS // 1000} k records, then `flush`",
            single,
            SINGLE_RECORDS,
            SINGLE_TARGET,
        ),
    ]


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
