"""``python -m benchmarks``: every benchmark in one run, printed as one Markdown table."""

from __future__ import annotations

import os
import platform
import sys
import time

from benchmarks import (
    bench_cold_start,
    bench_compaction,
    bench_endpoint,
    bench_log,
    bench_object_store,
    bench_partitioner,
    bench_producer,
    bench_records,
    bench_retention,
    bench_sink,
    bench_source,
    bench_store_costs,
    bench_store_latency,
)
from benchmarks.common import RECORDS, markdown, pin_to_one_core, records_table


def main() -> int:
    core = pin_to_one_core()
    started = time.perf_counter()
    table = records_table()
    results = (
        bench_records.run(table)
        + bench_log.run(table)
        + bench_partitioner.run()
        + bench_retention.run()
        + bench_compaction.run(table)
        + bench_producer.run()
        + bench_source.run()
        + bench_sink.run()
        + bench_object_store.run()
        + bench_store_latency.run()
        + bench_store_costs.run()
        + bench_endpoint.run()
        + bench_cold_start.run(table)
    )
    print(
        f"pysparklog benchmarks: {RECORDS:,} records (10-byte keys, 100-byte values), pinned to core {core} "
        f"of {os.cpu_count()}, Python {platform.python_version()}; figures are medians of repeats, best in brackets\n"
    )
    print(markdown(results))
    judged = [r for r in results if r.passed is not None]
    met = sum(1 for r in judged if r.passed)
    print(f"\n{met} of {len(judged)} targets met ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
