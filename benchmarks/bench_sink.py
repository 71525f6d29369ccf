"""The Spark sink: a streaming write of 10 M records, exactly-once against at-least-once, on 2 cores.

The source is in memory: a Python stream source whose offsets count rows of one Arrow IPC file on tmpfs
(10 M records of the common shape, 10-byte keys and 100-byte values, in batches of 10,000 rows),
memory-mapped by each task, which yields zero-copy slices of the batches in its range. It takes a read
limit, so ``Trigger.AvailableNow`` plans 5 micro-batches of 2 M records, each split over 2 tasks of 1 M:
a query catching up on a backlog under ``maxOffsetsPerTrigger``, as streaming jobs are usually run. A
task then writes about 110 MB, far from a task's memory (both sides stream), while every micro-batch
still pays what a micro-batch costs: Spark's planning, offset and commit logs, and for exactly-once the
decision record and a COMMIT marker in each partition each task wrote. That cost is measured, neither
hidden in one huge batch nor made to dominate by tiny ones.

Each write runs ``writeStream.format("pysparklog")`` with the ``topic`` option into a new log
directory on tmpfs whose topic was created beforehand with 6 partitions (keyed records are spread by
murmur2), with the producer's defaults (``batch.size`` 16384, ``linger.ms`` 5, no compression): once
with ``deliveryGuarantee=exactly-once`` (the default) and once with ``at-least-once``. Two ceilings run
the same query into other sinks: Spark's ``noop`` (what Spark's Python source and the JVM cost) and a
Python sink whose tasks drop their Arrow batches (what any Python sink costs on top: the JVM turns the
rows back into Arrow batches for a second Python worker per task).

The four queries run in two rounds, the two guarantees taking turns to go first (noop, null, at-least-once,
exactly-once, then noop, null, exactly-once, at-least-once), so that drift in the machine's speed
reaches all of them alike; figures are medians over the rounds, the best in brackets, after an untimed
warm-up of each (4 micro-batches of 250 k: the JIT compiles, every Python worker loads its modules).
Times are wall times from ``start()`` to the end of ``awaitTermination()``, query start-up included.

After each write, outside the clock, the topic is read back (``read_committed`` for exactly-once): it
must hold exactly the 10 M records, each key once (their count and the sum of the ids they spell), or
the benchmark fails.

The target is stated for 2 cores, so this part runs in a child process on 2 cores with a JVM of its
own, whatever core ``python -m benchmarks`` pinned itself to (the JVM an earlier part started stays in
that process, pinned to its one core).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import BinaryType, StructField, StructType

from benchmarks.common import (
    Result,
    Timing,
    child_main,
    local_spark,
    rate,
    rate_figure,
    records_table,
    run_available_now,
    run_in_child,
)
from pysparklog.storage.log_dir import LogDirectory

RECORDS = 10_000_000
SLOTS = 2  # cores, task slots, and tasks per micro-batch
TOPIC_PARTITIONS = 6
ROWS_PER_TRIGGER = 2_000_000
ROWS_PER_BATCH = 10_000  # as spark.sql.execution.arrow.maxRecordsPerBatch's default
ROUNDS = 2
WARMUP_RECORDS = 1_000_000
WARMUP_ROWS_PER_TRIGGER = 250_000
EXACTLY_ONCE_TARGET = 1e6  # records/s on 2 cores
COST_TARGET = 0.10  # of at-least-once's throughput
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
_TOPIC = "bench"
_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
_MODULE = "benchmarks.bench_sink"


# -- the source: row ranges of a memory-mapped Arrow IPC file ----------------------------------


@dataclass(frozen=True)
class _Rows(InputPartition):
    path: str
    start: int
    end: int


class _RowsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets count rows; each micro-batch of at most ``max_rows`` is split evenly over ``SLOTS`` tasks."""

    def __init__(self, path: str, total: int, max_rows: int) -> None:
        self.path = path
        self.total = total
        self.max_rows = max_rows

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        step = limit.max_rows if isinstance(limit, ReadMaxRows) else self.total
        return {"row": min(start["row"] + step, self.total)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        first, stop = start["row"], end["row"]
        bounds = [first + (stop - first) * i // SLOTS for i in range(SLOTS + 1)]
        return [_Rows(self.path, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if a < b]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Rows)
        with pa.memory_map(partition.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(partition.start // ROWS_PER_BATCH, -(-partition.end // ROWS_PER_BATCH)):
                batch = reader.get_batch(i)
                first = max(partition.start - i * ROWS_PER_BATCH, 0)
                stop = min(partition.end - i * ROWS_PER_BATCH, batch.num_rows)
                yield batch if stop - first == batch.num_rows else batch.slice(first, stop - first)


class RowsSource(DataSource):
    """Options ``path`` (the IPC file), ``total`` (rows to read from its start) and ``maxRows`` (per trigger)."""

    @classmethod
    def name(cls) -> str:
        return "pysparklog_bench_rows"

    def schema(self) -> StructType:
        return _SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options: Any = self.options
        return _RowsReader(str(options["path"]), int(options["total"]), int(options["maxRows"]))


def _write_source_file(path: str) -> None:
    table = records_table(RECORDS).select(["key", "value"])
    with pa.ipc.new_file(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=ROWS_PER_BATCH):
            writer.write_batch(batch)


# -- the null sink: a Python sink that drops its batches ---------------------------------------


@dataclass(frozen=True)
class _Dropped(WriterCommitMessage):
    rows: int


class _NullWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _Dropped(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        pass


class NullSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pysparklog_bench_null"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return _NullWriter()


# -- the queries -------------------------------------------------------------------------------


def _verify(path: str, records: int, *, read_committed: bool) -> None:
    """Fail unless the topic holds each of the first ``records`` keys exactly once."""
    logs = LogDirectory(path)
    isolation = "read_committed" if read_committed else "read_uncommitted"
    count = id_sum = 0
    for p in range(TOPIC_PARTITIONS):
        with logs.partition(_TOPIC, p) as log:
            for batch in log.read_arrow(isolation_level=isolation):
                count += batch.num_rows
                id_sum += pc.sum(pc.cast(batch.column("key").cast(pa.string()), pa.int64())).as_py() or 0
    expected = records * (records - 1) // 2
    if count != records or id_sum != expected:
        raise AssertionError(
            f"the sink wrote the wrong records into {path} ({isolation}): {count:,} records whose ids sum to "
            f"{id_sum:,}; expected {records:,} records, ids summing to {expected:,}"
        )


class _Queries:
    """The benchmark's queries over one source file, each from a fresh checkpoint (and log directory)."""

    def __init__(self, spark: SparkSession, root: str, source_file: str) -> None:
        self.spark = spark
        self.root = root
        self.source_file = source_file
        self.started = 0

    def noop(self, records: int, rows_per_trigger: int = ROWS_PER_TRIGGER) -> float:
        return self._run(self._source(records, rows_per_trigger).writeStream.format("noop"), records, rows_per_trigger)

    def null(self, records: int, rows_per_trigger: int = ROWS_PER_TRIGGER) -> float:
        writer = self._source(records, rows_per_trigger).writeStream.format(NullSink.name())
        return self._run(writer, records, rows_per_trigger)

    def sink(self, guarantee: str, records: int, rows_per_trigger: int = ROWS_PER_TRIGGER) -> float:
        """Seconds of a write into a new log directory, checked and removed after the clock stopped."""
        path = self._scratch("logs")
        LogDirectory(path).topics.create(_TOPIC, TOPIC_PARTITIONS)
        writer = self._source(records, rows_per_trigger).writeStream.format("pysparklog")
        writer = writer.option("path", path).option("topic", _TOPIC).option("deliveryGuarantee", guarantee)
        seconds = self._run(writer, records, rows_per_trigger)
        _verify(path, records, read_committed=guarantee == EXACTLY_ONCE)
        shutil.rmtree(path)
        return seconds

    def _source(self, records: int, rows_per_trigger: int) -> DataFrame:
        reader = self.spark.readStream.format(RowsSource.name()).option("path", self.source_file)
        return reader.option("total", str(records)).option("maxRows", str(rows_per_trigger)).load()

    def _run(self, writer: Any, records: int, rows_per_trigger: int) -> float:
        seconds, batches = run_available_now(writer.option("checkpointLocation", self._scratch("checkpoint")))
        if batches != -(-records // rows_per_trigger):
            raise AssertionError(f"{batches} micro-batches ran; expected {-(-records // rows_per_trigger)}")
        return seconds

    def _scratch(self, name: str) -> str:
        self.started += 1
        return os.path.join(self.root, f"{name}-{self.started}")


# -- measurements ------------------------------------------------------------------------------


def _measure() -> list[Result]:
    root = tempfile.mkdtemp(prefix="pysparklog-bench-sink-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        source_file = os.path.join(root, "source.arrow")
        _write_source_file(source_file)
        spark = local_spark("pysparklog-bench-sink", SLOTS, (RowsSource, NullSink))
        try:
            queries = _Queries(spark, root, source_file)
            queries.noop(WARMUP_RECORDS, WARMUP_ROWS_PER_TRIGGER)
            queries.null(WARMUP_RECORDS, WARMUP_ROWS_PER_TRIGGER)
            queries.sink(AT_LEAST_ONCE, WARMUP_RECORDS, WARMUP_ROWS_PER_TRIGGER)
            queries.sink(EXACTLY_ONCE, WARMUP_RECORDS, WARMUP_ROWS_PER_TRIGGER)
            seconds: dict[str, list[float]] = {"noop": [], "null": [], AT_LEAST_ONCE: [], EXACTLY_ONCE: []}
            for round_ in range(ROUNDS):
                seconds["noop"].append(queries.noop(RECORDS))
                seconds["null"].append(queries.null(RECORDS))
                guarantees = [AT_LEAST_ONCE, EXACTLY_ONCE] if round_ % 2 == 0 else [EXACTLY_ONCE, AT_LEAST_ONCE]
                for guarantee in guarantees:
                    seconds[guarantee].append(queries.sink(guarantee, RECORDS))
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    timings = {name: Timing(s) for name, s in seconds.items()}
    return _rows(timings["noop"], timings["null"], timings[AT_LEAST_ONCE], timings[EXACTLY_ONCE])


def _rows(noop: Timing, null: Timing, alo: Timing, eo: Timing) -> list[Result]:
    eo_rate, alo_rate = RECORDS / eo.median, RECORDS / alo.median
    cost = 1 - eo_rate / alo_rate
    shape = (
        f"{RECORDS // 1_000_000} M records (10-byte keys, 100-byte values) from memory, AvailableNow in "
        f"{RECORDS // ROWS_PER_TRIGGER} micro-batches of {ROWS_PER_TRIGGER // 1_000_000} M, {SLOTS} tasks on "
        f"{SLOTS} cores"
    )
    return [
        Result(
            f"sink: exactly-once streaming write of {shape}, into {TOPIC_PARTITIONS} partitions (producer "
            "defaults: 16 KiB batches, linger 5 ms, no compression)",
            rate_figure(eo, RECORDS),
            f">= {rate(EXACTLY_ONCE_TARGET)}",
            eo_rate >= EXACTLY_ONCE_TARGET,
        ),
        Result(f"sink: the same with `deliveryGuarantee={AT_LEAST_ONCE}`", rate_figure(alo, RECORDS)),
        Result(
            "sink: what exactly-once costs, 1 - exactly-once / at-least-once throughput",
            f"{cost:.1%}",
            f"<= {COST_TARGET:.0%}",
            cost <= COST_TARGET,
        ),
        Result(
            "sink: the same query into a Python sink that drops its batches (ceiling of any Python sink)",
            rate_figure(null, RECORDS),
        ),
        Result(
            "sink: the same query into Spark's `noop` sink (Python source and JVM only)", rate_figure(noop, RECORDS)
        ),
    ]


def run() -> list[Result]:
    """The measurements, in a child process on ``SLOTS`` cores with a JVM of its own."""
    return run_in_child(_MODULE)


def main() -> None:
    child_main(_MODULE, SLOTS, _measure)


if __name__ == "__main__":
    main()
