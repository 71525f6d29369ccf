"""What every benchmark shares: the data set, the timer, the result rows and the Markdown table.

The machine the figures come from is small and shared, so every benchmark runs pinned to one core,
repeats each measurement and reports the median (best in brackets); a ratio is only ever taken
between figures of the same run.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource
    from pyspark.sql.streaming.readwriter import DataStreamWriter

RECORDS = 1_000_000
KEY_BYTES = 10
VALUE_BYTES = 100
TOPIC = "bench"
_FIRST_TIMESTAMP_MS = 1_700_000_000_000
_CHILD = "--child"
#: The repository: Spark's Python workers need it on their path to import ``benchmarks``.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A 100-byte JSON event: digits vary per record, the rest repeats, so zstd sees realistic redundancy.
_VALUE_TEMPLATE = b'{"id":##########,"user":"u######","amount":#####.##,"currency":"EUR","status":"settled"}'
_VALUE_TEMPLATE = _VALUE_TEMPLATE.ljust(VALUE_BYTES, b" ")


@dataclass(frozen=True, slots=True)
class Result:
    """One row of the final table; ``passed`` is None for figures without a target."""

    what: str
    figure: str
    target: str = "-"
    passed: bool | None = None


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds of each repeat of one measurement."""

    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)

    def rate(self, items: int) -> tuple[float, float]:
        """(median, best) items per second."""
        return items / self.median, items / self.best


def pin_to_one_core() -> int:
    """Run on one core only, as the targets are stated per core; returns the core."""
    core = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def use_cores(cores: int) -> None:
    """Run on ``cores`` cores, the highest (``pin_to_one_core`` takes the highest); a JVM and the processes
    started afterwards inherit them."""
    os.sched_setaffinity(0, range(os.cpu_count() or 1))  # the kernel keeps the cores the cpuset allows
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[-cores:])


def run_in_child(module: str, *arguments: str) -> list[Result]:
    """The rows of a part measured by ``python -m <module> [arguments]`` in a child process (``child_main``): a
    fresh process, so a JVM of its own and the cores the part asks for, whatever an earlier part started or
    pinned here."""
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-") as scratch:
        out = os.path.join(scratch, "results.json")
        subprocess.run([sys.executable, "-m", module, *arguments, _CHILD, out], check=True, cwd=REPO)
        with open(out, encoding="utf-8") as f:
            return [Result(**row) for row in json.load(f)]


def _in_child() -> bool:
    return len(sys.argv) >= 3 and sys.argv[-2] == _CHILD


def child_arguments() -> list[str]:
    """The part's own command-line arguments, in the child ``run_in_child`` starts as when run directly."""
    return sys.argv[1:-2] if _in_child() else sys.argv[1:]


def child_main(module: str, cores: int, measure: Callable[[], list[Result]]) -> None:
    """``main`` of a part measured in a child process: in the child ``run_in_child`` starts, ``measure`` on
    ``cores`` cores, its rows written for the parent; run directly, the part's table, from such a child given
    the same arguments (``child_arguments``)."""
    if _in_child():
        use_cores(cores)
        results = measure()
        with open(sys.argv[-1], "w", encoding="utf-8") as f:
            json.dump([asdict(r) for r in results], f)
        return
    print(markdown(run_in_child(module, *sys.argv[1:])))


def measure(fn: Callable[[], object], repeats: int, *, warmup: int = 1) -> Timing:
    """Time ``fn`` ``repeats`` times after ``warmup`` untimed calls (JIT loading, page cache, pools)."""
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return Timing(seconds)


def local_spark(
    app_name: str, slots: int, sources: Iterable[type[DataSource]] = (), conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A local SparkSession with ``slots`` task slots whose Python workers run this interpreter, reused
    between tasks, without the UI, logging errors only, with ``sources`` registered."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    builder = (
        SparkSession.builder.master(f"local[{slots}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.shuffle.partitions", str(slots))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for source in sources:
        spark.dataSource.register(source)
    return spark


def run_available_now(writer: DataStreamWriter) -> tuple[float, int]:
    """Seconds and micro-batches with rows of a streaming query run with ``Trigger.AvailableNow``: wall time
    from ``start()`` to the end of ``awaitTermination()``, which raises if the query failed."""
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    seconds = time.perf_counter() - started
    return seconds, sum(1 for p in query.recentProgress if p["numInputRows"] > 0)


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """ASCII decimal digits of ``values``, zero-padded to ``width``: shape (len(values), width)."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[:, None] // powers) % 10 + ord("0")).astype(np.uint8)


def _fill(template: bytes, columns: list[np.ndarray]) -> np.ndarray:
    """One row of ``template`` per record with its ``#`` runs replaced by ``columns`` in order."""
    rows = np.tile(np.frombuffer(template, np.uint8), (len(columns[0]), 1))
    for run, digits in zip(re.finditer(rb"#+", template), columns, strict=True):
        rows[:, run.start() : run.end()] = digits
    return rows


def binary_column(rows: np.ndarray) -> pa.Array:
    """A binary column with one value per row of a 2-D uint8 array."""
    n, width = rows.shape
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(rows.tobytes())])


def records_table(n: int = RECORDS, *, seed: int = 7) -> pa.Table:
    """``n`` records with 10-byte keys, 100-byte values and increasing millisecond timestamps."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    keys = _digits(ids, KEY_BYTES)
    values = _fill(
        _VALUE_TEMPLATE,
        [
            _digits(ids, 10),
            _digits(rng.integers(0, 10**6, n), 6),
            _digits(rng.integers(0, 10**5, n), 5),
            _digits(rng.integers(0, 100, n), 2),
        ],
    )
    return pa.table(
        {
            "key": binary_column(keys),
            "value": binary_column(values),
            "timestamp": pa.array(ids + _FIRST_TIMESTAMP_MS, pa.int64()),
        }
    )


def rate(records_per_second: float) -> str:
    return f"{records_per_second / 1e6:.2f} M rec/s"


def rate_figure(timing: Timing, items: int) -> str:
    median, best = timing.rate(items)
    return f"{rate(median)} (best {best / 1e6:.2f})"


def markdown(results: list[Result]) -> str:
    """The results as a Markdown table: what, figure, target, pass/fail."""
    lines = ["| What | Figure | Target | Result |", "| --- | --- | --- | --- |"]
    for r in results:
        verdict = "-" if r.passed is None else ("pass" if r.passed else "FAIL")
        lines.append(f"| {r.what} | {r.figure} | {r.target} | {verdict} |")
    return "\n".join(lines)
