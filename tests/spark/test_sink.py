"""``df.write`` / ``df.writeStream.format("pysparklog")`` on a real local SparkSession: Spark's Kafka sink
columns and options on a log directory, sink-then-source round trips, modes, and the transactions that make
the sink exactly-once (visibility around an aborted micro-batch, two queries writing one topic at once).

Kills and task retries, which need a Spark of their own, are in ``test_sink_recovery``.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.errors import AnalysisException, PySparkException, StreamingQueryException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pysparklog import LogDirectory
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.records.memory_records import as_uint8, scan
from pysparklog.storage.transaction_index import READ_COMMITTED, READ_UNCOMMITTED
from pysparklog.transactions import TransactionCoordinator, TransactionState
from tests.spark.conftest import await_end, make_topic, stream

with warnings.catch_warnings():  # kafka-python's import uses a deprecated importlib call
    warnings.simplefilter("ignore")
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

pytestmark = pytest.mark.spark

_HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
_WRITE_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("headers", _HEADERS),
        StructField("timestamp", TimestampType()),
        StructField("partition", IntegerType()),
    ]
)
_T0 = dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.timezone.utc)


def _records(logs: LogDirectory, topic: str, isolation: str = READ_COMMITTED) -> pa.Table:
    """Every record of ``topic`` the engine reads, with its partition."""
    batches = []
    for partition in range(logs.topics.get(topic).partitions):
        with logs.partition(topic, partition) as log:
            batches += list(log.read_arrow(0, isolation_level=isolation, include_headers=True))
    return pa.Table.from_batches(batches)


def _values(logs: LogDirectory, topic: str, isolation: str = READ_COMMITTED) -> list[bytes]:
    return sorted(_records(logs, topic, isolation).column("value").to_pylist())


def _read(spark: SparkSession, path: Path, topic: str, **options: str) -> DataFrame:
    reader = spark.read.format("pysparklog").option("subscribe", topic).option("includeHeaders", "true")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(path))


def _write(df: DataFrame, path: Path, **options: str) -> None:
    writer = df.write.format("pysparklog").mode("append")
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save(str(path))


# -- round trips -------------------------------------------------------------------------------------------


def test_batch_write_round_trips_keys_values_headers_timestamps_and_partitions(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Written with the sink, read with the source: every column comes back; keyed rows sit in kafka-python's
    murmur2 partition, an explicit ``partition`` wins, unkeyed rows go anywhere."""
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("rt", 5)
    rows = [
        (
            None if i % 10 == 0 else f"key-{i}",
            f"value-{i}".encode(),
            [(f"h{i}", f"hv{i}".encode()), ("empty", None)] if i % 3 == 0 else None,
            _T0 + dt.timedelta(milliseconds=i),
            3 if i % 7 == 0 else None,
        )
        for i in range(200)
    ]
    _write(spark.createDataFrame(rows, _WRITE_SCHEMA), tmp_path / "logs", topic="rt")

    read = _read(spark, tmp_path / "logs", "rt", **{"kafka.isolation.level": "read_committed"})
    actual = read.selectExpr("cast(key as string) as key", "value", "headers", "timestamp").orderBy("value")
    expected = spark.createDataFrame(rows, _WRITE_SCHEMA).drop("partition").orderBy("value")
    assert_df_equality(actual, expected, ignore_nullable=True)

    placed = {row.value: row.partition for row in read.select("value", "partition").collect()}
    for key, value, _headers, _ts, partition in rows:
        if partition is not None:
            assert placed[value] == partition
        elif key is not None:
            assert placed[value] == (kafka_python_murmur2(key.encode()) & 0x7FFFFFFF) % 5, key


def test_stream_round_trip_commits_every_micro_batch_once(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Source to sink in several micro-batches: the output topic read_committed equals the input, each batch's
    transactions are committed (markers follow Kafka's rules), and the sink's decision names the last batch."""
    logs = make_topic(tmp_path / "logs", "in", [40, 25, 35])
    options = {"subscribe": "in", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "30", "includeHeaders": "true"}
    df = stream(spark, tmp_path / "logs", **options).load()
    query = (
        df.selectExpr("key", "value", "headers", "timestamp")
        .writeStream.format("pysparklog")
        .option("topic", "out")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "logs"))
    )
    queries.append(query)
    await_end(query)
    assert query.exception() is None
    batches = len([p for p in query.recentProgress if p["numInputRows"]])
    assert batches == 4  # 100 records, 30 a trigger

    assert _values(logs, "out") == _values(logs, "in")
    source = _records(logs, "in")
    written = _records(logs, "out")
    assert sorted(written.select(["value", "timestamp"]).to_pylist(), key=str) == sorted(
        source.select(["value", "timestamp"]).to_pylist(), key=str
    )
    coordinator = TransactionCoordinator(logs)
    states = [coordinator.describe(t) for t in coordinator.transactional_ids()]
    assert states and all(s is not None and s.state is TransactionState.COMPLETE_COMMIT for s in states)
    with logs.partition("out", 0) as log:
        assert log.last_stable_offset == log.log_end_offset  # nothing left open
    decision = next((tmp_path / "logs").glob("pysparklog-sink.*.json")).read_text()
    assert f'"batch_id": {batches - 1}' in decision and '"complete": true' in decision


def test_a_topic_column_routes_rows_and_a_null_topic_fails(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.createDataFrame([("a", b"1"), ("b", b"2"), ("a", b"3")], "topic string, value binary")
    _write(df, tmp_path / "logs")
    logs = LogDirectory(tmp_path / "logs")
    assert (_values(logs, "a"), _values(logs, "b")) == ([b"1", b"3"], [b"2"])
    _write(df, tmp_path / "logs", topic="c")  # the option wins over the column
    assert _values(logs, "c") == [b"1", b"2", b"3"]

    nulls = spark.createDataFrame([("a", b"4"), (None, b"5")], "topic string, value binary")
    with pytest.raises(PySparkException, match="null topic present in the data"):
        _write(nulls.coalesce(1), tmp_path / "logs")
    assert _values(logs, "a") == [b"1", b"3"]  # the failed write's transaction was aborted


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("cast(id as int) as key, cast(id as string) as value", "key attribute unsupported type int"),
        ("cast(id as string) as key", "Required attribute 'value' not found"),
        ("cast(id as string) as value, id as partition", "partition attribute unsupported type bigint"),
        ("cast(id as string) as value, 'x' as headers", "headers attribute unsupported type string"),
    ],
)
def test_wrong_columns_fail_when_the_query_starts(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery], columns: str, message: str
) -> None:
    df = spark.readStream.format("rate").load().selectExpr("value as id").selectExpr(*columns.split(", "))
    with pytest.raises(PySparkException, match=message):
        query = (
            df.writeStream.format("pysparklog")
            .option("topic", "t")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start(str(tmp_path / "logs"))
        )
        queries.append(query)
        query.processAllAvailable()


def test_an_unknown_write_option_names_the_closest_accepted_one(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Spark hands the writer lower-cased option names, so the message quotes them so, and suggests the spelling."""
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException) as refused:
        _write(df, tmp_path / "logs", topic="t", deliveryGuarante="exactly-once")
    assert (
        "option 'deliveryguarante' is not a pysparklog sink option (did you mean deliveryGuarantee?); accepted: "
        in (str(refused.value))
    )
    stream = spark.readStream.format("rate").load().selectExpr("CAST(value AS STRING) AS value")
    with pytest.raises(PySparkException) as refused:
        query = (
            stream.writeStream.format("pysparklog")
            .option("topik", "t")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start(str(tmp_path / "logs"))
        )
        queries.append(query)
        query.processAllAvailable()
    assert "option 'topik' is not a pysparklog sink option (did you mean topic?); accepted: " in str(refused.value)


# -- modes ----------------------------------------------------------------------------------------------------


def test_overwrite_is_refused_because_a_log_is_append_only(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException, match="a log is append-only"):
        df.write.format("pysparklog").mode("overwrite").option("topic", "t").save(str(tmp_path / "logs"))


def test_spark_refuses_errorifexists_and_ignore_modes_which_save_mode_provides(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark hands a Python data source append or overwrite only; ``saveMode`` carries the other two."""
    df = spark.createDataFrame([(b"v",)], "value binary")
    path = str(tmp_path / "logs")
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("pysparklog").mode("errorifexists").option("topic", "t").save(path)

    _write(df, tmp_path / "logs", topic="new", saveMode="errorifexists")  # the topic did not exist
    with pytest.raises(PySparkException, match="Topic 'new' already exists"):
        _write(df, tmp_path / "logs", topic="new", saveMode="errorifexists")
    _write(df, tmp_path / "logs", topic="new", saveMode="ignore")  # exists: nothing written
    _write(df, tmp_path / "logs", topic="other", saveMode="ignore")  # does not: written
    logs = LogDirectory(path)
    assert (_values(logs, "new"), _values(logs, "other")) == ([b"v"], [b"v"])


def test_complete_mode_appends_the_whole_result_and_update_mode_is_refused(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    logs = make_topic(tmp_path / "logs", "in", [30])
    counts = (
        stream(spark, tmp_path / "logs", subscribe="in", startingOffsets="earliest", maxOffsetsPerTrigger="10")
        .load()
        .groupBy(F.expr("offset % 2 = 0").alias("even"))
        .count()
        .selectExpr("cast(even as string) as key", "cast(count as string) as value")
    )
    query = (
        counts.writeStream.outputMode("complete")
        .format("pysparklog")
        .option("topic", "counts")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "logs"))
    )
    queries.append(query)
    await_end(query)
    assert query.exception() is None
    written = _records(logs, "counts")
    pairs = sorted(zip(written.column("key").to_pylist(), written.column("value").to_pylist(), strict=True))
    assert pairs == sorted((even, str(n).encode()) for even in (b"false", b"true") for n in (5, 10, 15))

    with pytest.raises((StreamingQueryException, PySparkException), match="does not support Update mode"):
        updating = (
            counts.writeStream.outputMode("update")
            .format("pysparklog")
            .option("topic", "counts")
            .option("checkpointLocation", str(tmp_path / "ckpt-update"))
            .start(str(tmp_path / "logs"))
        )
        queries.append(updating)
        updating.processAllAvailable()


def test_missing_topics_are_created_with_the_directory_defaults_or_refused(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "server.properties").write_text("num.partitions=3\n")
    df = spark.createDataFrame([(f"k{i}", b"v") for i in range(20)], "key string, value binary")
    _write(df, tmp_path / "logs", topic="auto")
    logs = LogDirectory(tmp_path / "logs")
    assert logs.topics.get("auto").partitions == 3 and len(_values(logs, "auto")) == 20
    with pytest.raises(PySparkException, match="autoCreateTopics is false"):
        _write(df, tmp_path / "logs", topic="absent", autoCreateTopics="false")
    assert "absent" not in logs.topics.names()


def test_auto_create_topics_enable_false_refuses_unless_the_option_asks(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """The log directory's ``auto.create.topics.enable=false`` wins over the option left unset, as a broker's does
    for Spark's Kafka sink: a batch write fails naming the setting, and so does a stream when it starts; an explicit
    ``autoCreateTopics=true`` creates."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "server.properties").write_text("auto.create.topics.enable=false\n")
    df = spark.createDataFrame([("k", b"v")], "key string, value binary")
    with pytest.raises(PySparkException, match="auto.create.topics.enable=false, so it is not created on first use"):
        _write(df, tmp_path / "logs", topic="refused")
    rates = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
    with pytest.raises(PySparkException, match="auto.create.topics.enable=false"):
        query = (
            rates.writeStream.format("pysparklog")
            .option("topic", "refused")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start(str(tmp_path / "logs"))
        )
        queries.append(query)
        query.processAllAvailable()
    logs = LogDirectory(tmp_path / "logs")
    assert "refused" not in logs.topics.names()
    _write(df, tmp_path / "logs", topic="wished", autoCreateTopics="true")
    assert _values(logs, "wished") == [b"v"]


# -- transactions -------------------------------------------------------------------------------------------


def _poison_on_marker(marker: str, out_log: str) -> object:
    """A ``mapInArrow`` function passing batches through, failing once 250 rows have passed while ``marker``
    exists. Before failing it waits (up to a minute) for ``out_log`` to grow past the size written in
    ``marker``: the sink task appends every ~8 MiB (each row is 64 KiB), and the test needs some of the
    failed batch's rows appended, whatever the order in which Spark's threads run."""

    def passthrough(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen = 0
        for batch in batches:
            yield batch
            seen += batch.num_rows
            if seen >= 250 and os.path.exists(marker):
                size_before = int(Path(marker).read_text())
                deadline = time.monotonic() + 60
                while os.path.getsize(out_log) <= size_before and time.monotonic() < deadline:
                    time.sleep(0.05)
                raise RuntimeError("injected failure")

    return passthrough


def test_read_committed_never_sees_an_aborted_micro_batch_and_a_restart_writes_it_once(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("in", 1)
    values = [f"{i:06d}".encode() + bytes(64 * 1024 - 6) for i in range(600)]
    with logs.partition("in", 0) as log:
        log.append_arrow(pa.table({"value": pa.array(values[:300], pa.binary())}))
    marker = tmp_path / "poison"
    out_log = tmp_path / "logs" / "out-0" / f"{0:020d}.log"
    session = spark.newSession()
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")

    def run() -> StreamingQuery:
        df = stream(session, tmp_path / "logs", subscribe="in", startingOffsets="earliest", maxOffsetsPerTrigger="300")
        schema = "value binary"
        query = (
            df.load()
            .select("value")
            .mapInArrow(_poison_on_marker(str(marker), str(out_log)), schema)  # type: ignore[arg-type]
            .writeStream.format("pysparklog")
            .option("topic", "out")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "logs"))
        )
        queries.append(query)
        return query

    first = run()
    await_end(first)
    assert first.exception() is None
    assert _values(logs, "out") == values[:300] == _values(logs, "out", READ_UNCOMMITTED)

    with logs.partition("in", 0) as log:  # a second micro-batch, which fails
        log.append_arrow(pa.table({"value": pa.array(values[300:], pa.binary())}))
    marker.write_text(str(out_log.stat().st_size))
    failed = run()
    with pytest.raises(StreamingQueryException, match="injected failure"):
        await_end(failed)
    assert _values(logs, "out") == values[:300]  # read_committed: only the committed batch
    uncommitted = _values(logs, "out", READ_UNCOMMITTED)
    assert len(uncommitted) > 300  # the failed batch's appended rows are in the log, aborted
    with logs.partition("out", 0) as log:
        assert log.last_stable_offset == log.log_end_offset  # Spark's abort closed the transaction

    marker.unlink()
    again = run()
    await_end(again)
    assert again.exception() is None
    assert _values(logs, "out") == values  # each once


def _batches_by_producer(logs: LogDirectory, topic: str) -> Iterator[tuple[int, list[bytes]]]:
    """Each data record batch of ``topic``: its producer id and its records' values."""
    for partition in range(logs.topics.get(topic).partitions):
        with logs.partition(topic, partition) as log:
            for segment in log.segments():
                buf = as_uint8(np.fromfile(segment.log_path, dtype=np.uint8))
                entries = scan(buf)
                for i in np.flatnonzero(~entries.is_control).tolist():
                    (batch,) = decode_entries(buf, entries.select(slice(i, i + 1)), topic=topic, partition=partition)
                    yield int(entries.rows[i, k.E_PRODUCER_ID]), batch.column("value").to_pylist()


def test_two_streaming_queries_write_one_topic_at_once(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Both succeed; every record batch holds one query's records only, under one of its producers."""
    logs = make_topic(tmp_path / "logs", "a", [300, 300])
    make_topic(tmp_path / "logs", "b", [300, 300])
    running = []
    for name in ("a", "b"):
        df = stream(spark, tmp_path / "logs", subscribe=name, startingOffsets="earliest", maxOffsetsPerTrigger="100")
        query = (
            df.load()
            .selectExpr("key", "value")
            .writeStream.format("pysparklog")
            .option("topic", "both")
            .option("checkpointLocation", str(tmp_path / f"ckpt-{name}"))
            .trigger(processingTime="100 milliseconds")
            .start(str(tmp_path / "logs"))
        )
        queries.append(query)
        running.append(query)
    for query in running:
        query.processAllAvailable()
    for query in running:
        assert query.exception() is None
        query.stop()
    assert _values(logs, "both") == sorted(_values(logs, "a") + _values(logs, "b"))
    origin: dict[int, set[bytes]] = {}
    for producer_id, batch_values in _batches_by_producer(logs, "both"):
        topics = {value.split(b":")[0] for value in batch_values}
        assert len(topics) == 1, f"a record batch mixes the queries' records: {batch_values[:5]}"
        origin.setdefault(producer_id, set()).update(topics)
    assert all(len(topics) == 1 for topics in origin.values())  # a producer writes for one query only
    assert set().union(*origin.values()) == {b"a", b"b"}


def test_at_least_once_writes_without_transactions(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.createDataFrame([Row(value=b"x"), Row(value=b"y")])
    _write(df, tmp_path / "logs", topic="plain", deliveryGuarantee="at-least-once")
    logs = LogDirectory(tmp_path / "logs")
    assert _values(logs, "plain", READ_UNCOMMITTED) == [b"x", b"y"]
    assert TransactionCoordinator(logs).transactional_ids() == []
    assert all(pid >= 0 for pid, _ in _batches_by_producer(logs, "plain"))  # still idempotent
