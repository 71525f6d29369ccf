"""``pysparklog.spark.lag``: Kafka's offsets-behind-latest metrics, from the math to a running query's listener."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from pysparklog import LogDirectory
from pysparklog.spark.lag import OffsetsBehindLatest, OffsetsBehindLatestListener, offsets_behind_latest

pytestmark = pytest.mark.spark


def test_min_max_and_mean_over_partitions() -> None:
    end = {"t": {"0": 10, "1": 4}}
    latest = {"t": {"0": 10, "1": 9, "2": 3}}  # partition 2 is new: it is behind from 0
    assert offsets_behind_latest(end, latest) == OffsetsBehindLatest(0, 5, 8 / 3)
    assert offsets_behind_latest({}, {}) is None


def test_a_running_query_reports_how_far_it_is_behind(spark: SparkSession, tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("lagging", 2)
    logs.partition("lagging", 0).append_arrow(pa.table({"value": [b"x"] * 30}))
    logs.partition("lagging", 1).append_arrow(pa.table({"value": [b"y"] * 6}))
    heard: list[tuple[str, OffsetsBehindLatest]] = []
    listener = OffsetsBehindLatestListener(lambda query, source, metrics: heard.append((query, metrics)))
    spark.streams.addListener(listener)
    try:
        stream = (
            spark.readStream.format("pysparklog")
            .option("subscribe", "lagging")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "12")
            .option("driverReadMaxOffsets", "0")  # PySpark asks only such a source for its latest offsets
            .load(str(tmp_path / "logs"))
        )
        query = (
            stream.writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        query.awaitTermination()
        deadline = time.monotonic() + 30  # listener events arrive asynchronously
        while not (heard and heard[-1][1].max == 0) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)
    assert heard, "the listener heard the query's progress"
    first = heard[0][1]
    # 12 of 36 offsets split by backlog (30 and 6): 10 and 2, so 20 and 4 remain behind.
    assert (first.min, first.max, first.avg) == (4, 20, 12.0)
    assert heard[-1][1] == OffsetsBehindLatest(0, 0, 0.0)
    assert list(listener.latest(query.id).values()) == [heard[-1][1]]


def test_a_source_without_latest_offsets_is_named_once(caplog: pytest.LogCaptureFixture) -> None:
    """A pysparklog source reading small micro-batches on the driver reports no latest offset (PySpark does not
    ask it): the listener says why there are no metrics, once per query and source, and reports none."""
    heard: list[OffsetsBehindLatest] = []
    listener = OffsetsBehindLatestListener(lambda query, source, metrics: heard.append(metrics))
    source = SimpleNamespace(description="pysparklog", endOffset='{"t": {"0": 5}}', latestOffset=None)
    event = SimpleNamespace(progress=SimpleNamespace(id="q1", sources=[source]))
    with caplog.at_level("WARNING", logger="pysparklog.spark.lag"):
        listener.onQueryProgress(event)
        listener.onQueryProgress(event)
    assert heard == []
    assert [r.getMessage().count("driverReadMaxOffsets=0") for r in caplog.records] == [1]
    source.latestOffset = '{"t": {"0": 9}}'
    listener.onQueryProgress(event)
    assert heard == [OffsetsBehindLatest(4, 4, 4.0)]
