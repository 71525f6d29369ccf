"""The main job, on the embedded default log directory (``./data/logs`` in the checkout).

Produces a keyed stream of order events into a 3-partition topic through the engine's Arrow
encoder, reads every partition back as Arrow, checks that nothing was lost or reordered, and
prints where everything is. Run it with ``make run``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import pyarrow as pa

from pysparklog import BatchSettings, Codec, LogDirectory
from pysparklog.partitioner import partition_for_keys

DEFAULT_LOG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "logs")
TOPIC = "orders"
PARTITIONS = 3


def order_events(n: int, seed: int = 7) -> pa.Table:
    """``n`` order events: key = customer id, value = a small JSON document, timestamps increasing."""
    rng = np.random.default_rng(seed)
    customers = rng.integers(0, 1000, n)
    amounts = rng.integers(100, 50_000, n)
    start = int(time.time() * 1000) - n
    keys = pa.array([f"customer-{c:04d}".encode() for c in customers.tolist()], pa.binary())
    values = pa.array(
        [
            f'{{"order": {i}, "customer": {c}, "amount_cents": {a}}}'.encode()
            for i, (c, a) in enumerate(zip(customers.tolist(), amounts.tolist(), strict=True))
        ],
        pa.binary(),
    )
    return pa.table({"key": keys, "value": values, "timestamp": pa.array(np.arange(start, start + n), pa.int64())})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-dir", default=os.environ.get("PYSPARKLOG_LOG_DIR", DEFAULT_LOG_DIR))
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keep", action="store_true", help="append to an existing log directory")
    args = parser.parse_args(argv)

    if not args.keep and os.path.isdir(os.path.join(args.log_dir)):
        shutil.rmtree(args.log_dir)
    logs = LogDirectory(args.log_dir)
    logs.topics.create(TOPIC, PARTITIONS, {"compression.type": "zstd"}, if_not_exists=True)
    events = order_events(args.records)
    # Keyed events go where Kafka's Java producer would put them: murmur2 of the key.
    partition_of = partition_for_keys(events.column("key"), PARTITIONS)

    started = time.perf_counter()
    for p in range(PARTITIONS):
        rows = events.filter(pa.array(partition_of == p))
        info = logs.partition(TOPIC, p).append_arrow(rows, BatchSettings(codec=Codec.ZSTD))
        offsets = f"{info.first_offset}..{info.last_offset}"
        print(f"produced {info.record_count:>8,} records to {TOPIC}-{p}, offsets {offsets}")
    produced_s = time.perf_counter() - started

    started = time.perf_counter()
    total = 0
    for p in range(PARTITIONS):
        log = logs.partition(TOPIC, p)
        read = pa.Table.from_batches(list(log.read_arrow()))
        expected = events.filter(pa.array(partition_of == p))
        assert read.column("value").equals(expected.column("value")), f"partition {p} differs"
        total += read.num_rows
        offsets = f"{log.log_start_offset}..{log.log_end_offset - 1}"
        segments = len(log.segments())
        print(f"read     {read.num_rows:>8,} records from {TOPIC}-{p}, offsets {offsets}, {segments} segment(s)")
    read_s = time.perf_counter() - started
    print(f"\n{total:,} records produced in {produced_s:.2f} s and read back in {read_s:.2f} s, all equal.")
    print(f"Log directory: {logs.path}")
    print(f"Describe the topic:  pysparklog topics --log-dir {logs.path} --describe --topic {TOPIC}")
    first_segment = os.path.join(logs.path, f"{TOPIC}-0", "00000000000000000000.log")
    print(f"Inspect a segment in Kafka's dump format:  pysparklog dump-log --files {first_segment} --deep-iteration")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
