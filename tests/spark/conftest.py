"""A real local SparkSession for the data source tests, started once per test run, and what the tests share.

Executors run ``PYSPARK_PYTHON``, not the test's interpreter, so it is pointed at this interpreter
(the project's environment) before Spark starts.

``format("pysparklog")`` is never registered on the shared session: Spark finds it by itself through the
``pyspark_pysparklog`` shim, which ``test_source_batch`` proves; a test that registers it does so on a
``spark.newSession()``, whose registrations the other tests cannot see.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamReader

from pysparklog import LogDirectory
from pysparklog.spark.arrow import arrow_schema, to_spark_batch
from pysparklog.storage import AppendInfo
from pysparklog.storage.records.arrow_records import BatchSettings

#: The CreateTime of offset 0 in the topics these tests write; offset ``o`` is stamped ``TS + o``.
TS = 1_700_000_000_000

Coordinates = tuple[str, int, int]  # topic, partition, offset


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pysparklog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")  # data-loss tests fail queries on purpose; their traces are noise
    yield session
    session.stop()


@pytest.fixture
def queries() -> Iterator[list[StreamingQuery]]:
    """Streaming queries a test starts; stopped at its end, passed or failed, so none outlives its test."""
    started: list[StreamingQuery] = []
    yield started
    for query in started:
        if query.isActive:
            query.stop()


# -- data --------------------------------------------------------------------------------------------------


def append(
    logs: LogDirectory,
    topic: str,
    partition: int,
    n: int,
    *,
    settings: BatchSettings | None = None,
    headers: list[list[tuple[str, bytes | None]] | None] | None = None,
) -> AppendInfo:
    """``n`` records at the log end of ``topic-partition``: record at offset ``o`` has key ``k<o>``, value
    ``<topic>:<partition>:<o>`` and CreateTime ``TS + o`` (offsets counted as if no control record came between)."""
    with logs.partition(topic, partition) as log:
        first = log.log_end_offset
        offsets = range(first, first + n)
        columns: dict[str, pa.Array] = {
            "key": pa.array([f"k{o}".encode() for o in offsets], pa.binary()),
            "value": pa.array([f"{topic}:{partition}:{o}".encode() for o in offsets], pa.binary()),
            "timestamp": pa.array([TS + o for o in offsets], pa.int64()),
        }
        if headers is not None:
            columns["headers"] = pa.array(
                headers, pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
            )
        return log.append_arrow(pa.table(columns), settings)


def make_topic(path: Path | str, topic: str, counts: list[int]) -> LogDirectory:
    """Topic ``topic`` with one partition per count, partition ``p`` holding ``counts[p]`` records (see ``append``)."""
    logs = LogDirectory(path)
    logs.topics.create(topic, len(counts))
    for partition, n in enumerate(counts):
        if n:
            append(logs, topic, partition, n)
    return logs


def coordinates(df: DataFrame) -> list[Coordinates]:
    """The ``(topic, partition, offset)`` of every row, sorted."""
    return sorted((row.topic, row.partition, row.offset) for row in df.select("topic", "partition", "offset").collect())


def engine_df(
    spark: SparkSession,
    path: Path | str,
    ranges: list[tuple[str, int, int | None, int | None]],
    *,
    include_headers: bool = False,
    isolation_level: str = "read_uncommitted",
) -> DataFrame:
    """What the engine itself reads for ``(topic, partition, start, end)`` ranges, as a Spark DataFrame of the
    source's schema: the expected side of a comparison with ``format("pysparklog")``."""
    logs = LogDirectory(path)
    batches: list[pa.RecordBatch] = []
    for topic, partition, start, end in ranges:
        with logs.partition(topic, partition) as log:
            for batch in log.read_arrow(start, end, include_headers=include_headers, isolation_level=isolation_level):
                batches.append(to_spark_batch(batch, include_headers))
    table = pa.Table.from_batches(batches, schema=arrow_schema(include_headers))
    return spark.createDataFrame(table)


def ordered(df: DataFrame) -> DataFrame:
    return df.orderBy("topic", "partition", "offset")


# -- streams -----------------------------------------------------------------------------------------------


class BatchCollector:
    """A ``foreachBatch`` function keeping each micro-batch's rows as ``(topic, partition, offset)``, by batch id."""

    def __init__(self) -> None:
        self.batches: dict[int, list[Coordinates]] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.batches[batch_id] = coordinates(df)

    def rows(self) -> list[Coordinates]:
        """Every row of every batch, sorted: duplicates stay, so a test can tell."""
        return sorted(row for rows in self.batches.values() for row in rows)

    def sizes(self) -> list[int]:
        return [len(self.batches[batch_id]) for batch_id in sorted(self.batches)]


def stream(spark: SparkSession, path: Path | str, **options: str) -> DataStreamReader:
    """``spark.readStream.format("pysparklog")`` with ``options`` (names as Python keywords: ``group_id`` stands
    for ``group.id``), over the log directory ``path``."""
    reader = spark.readStream.format("pysparklog").option("path", str(path))
    for name, value in options.items():
        reader = reader.option(name.replace("_", "."), value)
    return reader


def start(
    queries: list[StreamingQuery],
    df: DataFrame,
    checkpoint: Path,
    sink: Callable[[DataFrame, int], None],
    **trigger: Any,
) -> StreamingQuery:
    """Start ``df`` into ``foreachBatch(sink)`` with its checkpoint at ``checkpoint`` (and ``trigger`` if given)."""
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    if trigger:
        writer = writer.trigger(**trigger)
    query = writer.start()
    queries.append(query)
    return query


#: How long a query may stand still (the same status, no new progress) before waiting for its end fails.
STILL_SECONDS = 240.0


def await_end(query: StreamingQuery, still_seconds: float = STILL_SECONDS) -> None:
    """Wait for a query that ends by itself (``availableNow``, or failing) to end, raising its failure as
    ``awaitTermination`` does: as long as it keeps changing (its status message, whether a trigger runs, its last
    progress), however long a loaded machine makes it take, and no longer than ``still_seconds`` without a change.
    A query still initializing its sources on a machine running many Spark processes is slow, not stuck.

    Raises:
        StreamingQueryException: The query failed.
        AssertionError: It stood still for ``still_seconds``.
    """
    seen: tuple[object, ...] = ()
    changed = time.monotonic()
    while not query.awaitTermination(1):
        status, progress = query.status, query.lastProgress
        last = (progress["batchId"], progress["timestamp"]) if progress is not None else None
        state = (status["message"], status["isTriggerActive"], last)
        if state != seen:
            seen, changed = state, time.monotonic()
        elif time.monotonic() - changed > still_seconds:
            raise AssertionError(f"the query stood still for {still_seconds:.0f} s: {status}")


def end_offsets(query: StreamingQuery) -> list[str]:
    """Each micro-batch's end offsets as Spark recorded them in its progress (the source's offset JSON)."""
    return [progress["sources"][0]["endOffset"] for progress in query.recentProgress if progress["numInputRows"]]
