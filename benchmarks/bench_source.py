"""The Spark source: a streaming read of 10 M records, micro-batch overhead, and a read task's memory.

Throughput is compared with the ceiling of any Python source: a synthetic one whose tasks yield
the very batches our tasks yield, from memory (Arrow IPC files on tmpfs, memory-mapped, written
from ``read_ranges`` before the clock starts), so the ratio shows what reading the log costs on top
of what Spark's Python data source machinery costs anyway. Both queries run with
``Trigger.AvailableNow`` into Spark's ``noop`` sink, in one local SparkSession, one after the other,
on the same cores.

Micro-batch overhead: 30 micro-batches of one record each (``maxOffsetsPerTrigger=1``), against a
trivial Python stream source planning 30 micro-batches of one row: what a micro-batch costs beyond
its data.

Memory: one read task (``datasource_v2.read_ranges``) over the whole topic, about 1.2 GB of
segments, in a fresh Python process; its peak resident set size, as the executor's Python worker
would have it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from benchmarks.common import REPO, Result, local_spark, markdown, rate, records_table, run_available_now
from pysparklog.datasource_v2 import RangesPartition, read_ranges
from pysparklog.spark.arrow import SOURCE_SCHEMA, arrow_schema
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings
from pysparklog.structs import TopicPartition

BULK_RECORDS = 10_000_000
PARTITIONS = 2
ROWS_PER_BATCH = 8192  # about what the engine's decoder yields per 1 MiB of 110-byte records
TINY_BATCHES = 30
THROUGHPUT_RATIO_TARGET = 0.9
OVERHEAD_RATIO_TARGET = 1.2
MEMORY_TARGET_MB = 300
_TOPIC = "bench"
_TINY_TOPIC = "tiny"
WARM_TOPIC = "warm"
WARM_RECORDS = 20_000
# The peak is read from VmHWM: ``ru_maxrss`` survives ``exec`` on Linux, so in a child of this
# process it would report this process's peak.
_MEMORY_PROBE = """
import sys
from pysparklog.datasource_v2 import RangesPartition, read_ranges
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition
path, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
logs = LogDirectory(path)
ranges = tuple(
    OffsetRange(TopicPartition(topic, p), 0, logs.partition(topic, p).log_end_offset) for p in range(partitions)
)
rows = sum(b.num_rows for b in read_ranges(RangesPartition(path, ranges, False, False, True)))
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(rows, peak_kb // 1024)
"""


# -- the synthetic source: Arrow batches from memory ------------------------------------------


_cached: dict[int, pa.RecordBatch] = {}


def _synthetic_batch(rows: int) -> pa.RecordBatch:
    """A batch shaped as the source's (Spark's Kafka columns, 10-byte keys, 100-byte values), built once
    per worker process."""
    batch = _cached.get(rows)
    if batch is None:
        table = records_table(rows)
        columns = {
            "key": table.column("key"),
            "value": table.column("value"),
            "topic": pa.array([_TOPIC] * rows, pa.string()),
            "partition": pa.array([0] * rows, pa.int32()),
            "offset": pa.array(range(rows), pa.int64()),
            "timestamp": table.column("timestamp").cast(pa.timestamp("ms", tz="UTC")),
            "timestampType": pa.array([0] * rows, pa.int32()),
        }
        batch = _cached[rows] = pa.Table.from_pydict(columns).cast(arrow_schema(False)).combine_chunks().to_batches()[0]
    return batch


@dataclass(frozen=True)
class _Slice(InputPartition):
    batches: int
    rows_per_batch: int
    tail: int  # rows of a last, shorter batch


class _SyntheticReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets count rows; each task yields its share of cached batches."""

    def __init__(self, total: int, rows_per_batch: int, max_rows: int | None) -> None:
        self.total = total
        self.rows_per_batch = rows_per_batch
        self.max_rows = max_rows

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows is not None else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        step = limit.max_rows if isinstance(limit, ReadMaxRows) else self.total
        return {"row": min(start["row"] + step, self.total)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        rows = end["row"] - start["row"]
        if rows <= 0:
            return []
        shares = [rows // PARTITIONS + (1 if i < rows % PARTITIONS else 0) for i in range(PARTITIONS)]
        return [
            _Slice(share // self.rows_per_batch, self.rows_per_batch, share % self.rows_per_batch)
            for share in shares
            if share
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Slice)
        if partition.batches:
            batch = _synthetic_batch(partition.rows_per_batch)
            for _ in range(partition.batches):
                yield batch
        if partition.tail:
            yield _synthetic_batch(partition.tail)


@dataclass(frozen=True)
class _IpcFile(InputPartition):
    path: str


class _IpcReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One micro-batch: each task yields the batches of one Arrow IPC file, memory-mapped."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def initialOffset(self) -> dict[str, int]:
        return {"done": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"done": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [_IpcFile(path) for path in self.paths] if start != end else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _IpcFile)
        with pa.memory_map(partition.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


class IpcArrowSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pysparklog_bench_ipc"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options: Any = self.options
        return _IpcReader(str(options["files"]).split(","))


class _SyntheticSimpleReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """One cached row per micro-batch, read by the driver: PySpark sends it with the micro-batch's plan."""

    def __init__(self, total: int) -> None:
        self.total = total

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def read(self, start: dict[str, int]) -> tuple[Iterator[pa.RecordBatch], dict[str, int]]:
        if start["row"] >= self.total:
            return iter(()), start
        return iter([_synthetic_batch(1)]), {"row": start["row"] + 1}

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Iterator[pa.RecordBatch]:
        return iter([_synthetic_batch(end["row"] - start["row"])])


class SyntheticSimpleSource(DataSource):
    """The synthetic source's rows through PySpark's simple stream reader: a micro-batch read by the driver and
    handed to Spark with its plan, the path of pysparklog's ``driverReadMaxOffsets``."""

    @classmethod
    def name(cls) -> str:
        return "pysparklog_bench_synthetic_simple"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        options: Any = self.options
        return _SyntheticSimpleReader(int(options["total"]))


class SyntheticArrowSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pysparklog_bench_synthetic"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options: Any = self.options
        limit = options.get("maxOffsetsPerTrigger")
        return _SyntheticReader(int(options["total"]), int(options["rowsPerBatch"]), int(limit) if limit else None)


# -- measurements -----------------------------------------------------------------------------


def _session() -> SparkSession:
    return local_spark("pysparklog-bench-source", PARTITIONS, (SyntheticArrowSource, IpcArrowSource))


def into_noop(reader: Any, checkpoint: str) -> tuple[float, int]:
    """Seconds and micro-batches of an AvailableNow query of ``reader`` into the noop sink."""
    return run_available_now(reader.writeStream.format("noop").option("checkpointLocation", checkpoint))


def stream_of(spark: SparkSession, path: str, topic: str, limit: int | None = None) -> Any:
    """Our source's stream of ``topic`` in the log directory at ``path``, from the earliest offsets, with
    ``maxOffsetsPerTrigger`` set to ``limit`` when given."""
    reader = spark.readStream.format("pysparklog").option("subscribe", topic).option("startingOffsets", "earliest")
    if limit is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(limit))
    return reader.load(path)


def write_topic(
    logs: LogDirectory, topic: str, table: pa.Table, partitions: int, records_per_append: int | None = None
) -> None:
    """Create ``topic`` with ``partitions`` partitions and append an equal share of ``table`` to each, in
    appends of ``records_per_append`` records (default: the whole share in one append), 1 MiB batches."""
    logs.topics.create(topic, partitions)
    share = table.num_rows // partitions
    step = records_per_append or share
    for p in range(partitions):
        with logs.partition(topic, p) as log:
            for start in range(0, share, step):
                log.append_arrow(table.slice(p * share + start, min(step, share - start)), BatchSettings())


def _fill(path: str, root: str) -> list[str]:
    """Write the topics, and the batches each task of the big topic yields as Arrow IPC files."""
    logs = LogDirectory(path)
    write_topic(logs, _TOPIC, records_table(BULK_RECORDS), PARTITIONS)
    share = BULK_RECORDS // PARTITIONS
    files = []
    for p in range(PARTITIONS):
        files.append(os.path.join(root, f"task-{p}.arrow"))
        task = RangesPartition(path, (OffsetRange(TopicPartition(_TOPIC, p), 0, share),), False, False, True)
        with pa.ipc.new_file(files[-1], arrow_schema(False)) as writer:
            for batch in read_ranges(task):
                writer.write_batch(batch)
    write_topic(logs, _TINY_TOPIC, records_table(TINY_BATCHES), 1)
    write_warm_up_topic(logs)
    return files


def write_warm_up_topic(logs: LogDirectory) -> None:
    """A small topic to read first, so that every Python worker has loaded the decoder before the clock starts."""
    write_topic(logs, WARM_TOPIC, records_table(WARM_RECORDS), PARTITIONS)


def _peak_task_memory_mb(path: str) -> tuple[int, int]:
    """(rows read, peak RSS in MB) of one read task over the whole topic, in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, path, _TOPIC, str(PARTITIONS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.split()
    return int(out[0]), int(out[1])


def run() -> list[Result]:
    root = tempfile.mkdtemp(prefix="pysparklog-bench-source-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        path = os.path.join(root, "logs")
        files = _fill(path, root)
        spark = _session()
        try:

            def synthetic(total: int, rows_per_batch: int, limit: int | None) -> Any:
                reader = spark.readStream.format("pysparklog_bench_synthetic").option("total", str(total))
                reader = reader.option("rowsPerBatch", str(rows_per_batch))
                if limit is not None:
                    reader = reader.option("maxOffsetsPerTrigger", str(limit))
                return reader.load()

            checkpoints = iter(os.path.join(root, f"checkpoint-{i}") for i in range(100))
            from_memory = spark.readStream.format("pysparklog_bench_ipc").option("files", ",".join(files)).load()
            into_noop(synthetic(BULK_RECORDS // 10, ROWS_PER_BATCH, None), next(checkpoints))  # warm-up
            into_noop(stream_of(spark, path, WARM_TOPIC), next(checkpoints))  # warm-up
            # Alternated, best of two each: whichever runs first would otherwise pay for the JVM's warming.
            synthetic_runs, our_runs = [], []
            for _ in range(2):
                synthetic_runs.append(into_noop(from_memory, next(checkpoints))[0])
                our_runs.append(into_noop(stream_of(spark, path, _TOPIC), next(checkpoints))[0])
            synthetic_s, ours_s = min(synthetic_runs), min(our_runs)
            tiny_synthetic_s, tiny_synthetic_n = into_noop(synthetic(TINY_BATCHES, 1, 1), next(checkpoints))
            tiny_ours_s, tiny_ours_n = into_noop(stream_of(spark, path, _TINY_TOPIC, 1), next(checkpoints))
        finally:
            spark.stop()
        rows, peak_mb = _peak_task_memory_mb(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = synthetic_s / ours_s
    per_batch_ours = tiny_ours_s / max(tiny_ours_n, 1)
    per_batch_synthetic = tiny_synthetic_s / max(tiny_synthetic_n, 1)
    overhead = per_batch_ours / per_batch_synthetic
    return [
        Result(
            f"source: AvailableNow read of {BULK_RECORDS // 1_000_000} M records into `noop`, {PARTITIONS} tasks",
            rate(BULK_RECORDS / ours_s),
        ),
        Result(
            "synthetic Python source yielding the same Arrow batches from memory (memory-mapped IPC)",
            rate(BULK_RECORDS / synthetic_s),
        ),
        Result(
            "source / synthetic throughput",
            f"{ratio:.2f}",
            f">= {THROUGHPUT_RATIO_TARGET}",
            ratio >= THROUGHPUT_RATIO_TARGET,
        ),
        Result(
            f"source: time per micro-batch of 1 record ({tiny_ours_n} batches)",
            f"{per_batch_ours * 1000:.0f} ms (trivial source: {per_batch_synthetic * 1000:.0f} ms, "
            f"{tiny_synthetic_n} batches)",
        ),
        Result(
            "source / trivial source per-micro-batch time",
            f"{overhead:.2f}x",
            f"<= {OVERHEAD_RATIO_TARGET}x",
            overhead <= OVERHEAD_RATIO_TARGET,
        ),
        Result(
            f"peak memory of one read task over the whole topic ({rows / 1e6:.0f} M records, about 1.2 GB)",
            f"{peak_mb} MB",
            f"< {MEMORY_TARGET_MB} MB",
            peak_mb < MEMORY_TARGET_MB,
        ),
    ]


def main() -> None:
    print(markdown(run()))


if __name__ == "__main__":
    main()
