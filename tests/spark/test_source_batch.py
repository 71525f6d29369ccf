"""``spark.read.format("pysparklog")`` on a real local SparkSession: the Kafka source's schema, registration,
offset and timestamp bounds, isolation levels, and a real broker's log directory.

Every read is compared with what the engine itself reads for the same offsets (``PartitionLog.read_arrow``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pysparklog import BatchSettings, LogDirectory
from pysparklog.datasource_v2 import PySparkLogDataSource
from pysparklog.storage.records.arrow_records import encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
from tests.spark.conftest import TS, append, coordinates, engine_df, make_topic, ordered

pytestmark = pytest.mark.spark

# Spark's Kafka source schema (KafkaRecordToRowConverter), spelled out here rather than taken from the code under test.
KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
)
HEADERS_FIELD = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True),
    True,
)


@pytest.fixture
def orders(tmp_path: Path) -> Path:
    """Topic ``orders``: partitions of 6, 4 and 0 records (see ``conftest.append``)."""
    make_topic(tmp_path / "logs", "orders", [6, 4, 0])
    return tmp_path / "logs"


# -- schema and registration -------------------------------------------------------------------------------


def test_schema_is_the_kafka_sources_and_headers_only_on_request(spark: SparkSession, orders: Path) -> None:
    plain = spark.read.format("pysparklog").option("subscribe", "orders").load(str(orders))
    assert plain.schema == KAFKA_SCHEMA
    with_headers = (
        spark.read.format("pysparklog").option("subscribe", "orders").option("includeHeaders", "true").load(str(orders))
    )
    assert with_headers.schema == StructType([*KAFKA_SCHEMA.fields, HEADERS_FIELD])
    assert plain.count() == 10
    row = plain.where("partition = 0 AND offset = 2").collect()[0]
    assert (bytes(row.key), bytes(row.value), row.timestampType) == (b"k2", b"orders:0:2", 0)
    assert int(row.timestamp.timestamp() * 1000) == TS + 2


def test_headers_are_null_for_a_record_without_headers(spark: SparkSession, tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("h", 1)
    append(logs, "h", 0, 3, headers=[[("trace", b"abc"), ("empty", None)], None, []])
    df = spark.read.format("pysparklog").option("subscribe", "h").option("includeHeaders", "true").load(str(tmp_path))
    headers = {row.offset: row.headers for row in df.collect()}
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in headers[0]] == [
        ("trace", b"abc"),
        ("empty", None),
    ]
    assert headers[1] is None  # Kafka's source gives null, not an empty array, when a record has no headers
    assert headers[2] is None  # an empty list is no headers in Kafka's record format
    assert_df_equality(ordered(df), ordered(engine_df(spark, tmp_path, [("h", 0, None, None)], include_headers=True)))


def test_the_pyspark_prefixed_shim_is_what_spark_finds_from_any_directory(tmp_path: Path) -> None:
    """Spark registers the ``DefaultSource`` of every top-level ``pyspark_*`` module that ``pkgutil.iter_modules()``
    lists in a fresh Python worker. An editable install through setuptools' import hook hides the shim from
    that listing unless the worker happens to start in the project directory (``make setup`` installs in
    ``editable_mode=compat`` for that reason), so the listing is checked from elsewhere."""
    code = "import pkgutil; print(sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_')))"
    listed = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "pyspark_pysparklog" in listed.stdout, (
        "Spark cannot auto-register format('pysparklog') in this environment: pkgutil.iter_modules() does not list "
        "the pyspark_pysparklog shim (an editable install needs --config-settings editable_mode=compat)"
    )
    from pyspark_pysparklog import DefaultSource

    assert DefaultSource is PySparkLogDataSource
    assert DefaultSource.name() == "pysparklog"


def test_format_pysparklog_needs_no_registration(spark: SparkSession, orders: Path) -> None:
    fresh = spark.newSession()  # nothing registered on it, whatever other tests did
    df = fresh.read.format("pysparklog").option("subscribe", "orders").load(str(orders))
    assert df.count() == 10
    assert fresh.read.format("PySparkLog").option("subscribe", "orders").load(str(orders)).count() == 10


def test_an_explicit_registration_works_too(spark: SparkSession, orders: Path) -> None:
    session = spark.newSession()
    session.dataSource.register(PySparkLogDataSource)
    df = session.read.format("pysparklog").option("subscribe", "orders").load(str(orders))
    assert coordinates(df) == [("orders", 0, o) for o in range(6)] + [("orders", 1, o) for o in range(4)]


def test_the_log_directory_is_load_path_or_option_path(spark: SparkSession, orders: Path) -> None:
    by_load = spark.read.format("pysparklog").option("subscribe", "orders").load(str(orders))
    by_option = spark.read.format("pysparklog").option("subscribe", "orders").option("path", str(orders)).load()
    assert_df_equality(ordered(by_load), ordered(by_option))
    with pytest.raises(AnalysisException, match="option path is missing"):
        spark.read.format("pysparklog").option("subscribe", "orders").load()


def test_a_custom_schema_is_refused(spark: SparkSession, orders: Path) -> None:
    with pytest.raises(AnalysisException, match="fixed schema and cannot be set with a custom one"):
        spark.read.format("pysparklog").schema("value string").option("subscribe", "orders").load(str(orders)).count()


# -- bounds ------------------------------------------------------------------------------------------------


def test_offsets_json_bounds_read_what_the_engine_reads(spark: SparkSession, orders: Path) -> None:
    df = (
        spark.read.format("pysparklog")
        .option("subscribe", "orders")
        .option("startingOffsets", '{"orders":{"0":2,"1":-2,"2":-2}}')
        .option("endingOffsets", '{"orders":{"0":5,"1":-1,"2":-1}}')
        .load(str(orders))
    )
    expected = engine_df(spark, orders, [("orders", 0, 2, 5), ("orders", 1, 0, 4)])
    assert_df_equality(ordered(df), ordered(expected))
    assigned = (
        spark.read.format("pysparklog")
        .option("assign", '{"orders":[1]}')
        .option("startingOffsets", '{"orders":{"1":1}}')
        .option("endingOffsets", '{"orders":{"1":3}}')
        .load(str(orders))
    )
    assert_df_equality(ordered(assigned), ordered(engine_df(spark, orders, [("orders", 1, 1, 3)])))


def test_timestamp_bounds(spark: SparkSession, orders: Path) -> None:
    """Offset ``o`` is stamped ``TS + o``: a timestamp bound is the first offset stamped at or after it. Partition
    2 is empty, so no offset matches a starting timestamp there: ``startingOffsetsByTimestampStrategy`` decides."""
    reader = spark.read.format("pysparklog").option("subscribe", "orders")
    with pytest.raises(AnalysisException, match="No offset matched from request of topic-partition orders-2"):
        reader.option("startingTimestamp", str(TS + 1)).load(str(orders)).count()
    global_bounds = (
        spark.read.format("pysparklog")
        .option("subscribe", "orders")
        .option("startingTimestamp", str(TS + 1))
        .option("startingOffsetsByTimestampStrategy", "latest")
        .option("endingTimestamp", str(TS + 3))
        .load(str(orders))
    )
    expected = engine_df(spark, orders, [("orders", 0, 1, 3), ("orders", 1, 1, 3)])
    assert_df_equality(ordered(global_bounds), ordered(expected))
    by_partition = (
        spark.read.format("pysparklog")
        .option("subscribe", "orders")
        .option("startingOffsetsByTimestamp", f'{{"orders":{{"0":{TS + 4},"1":{TS},"2":{TS}}}}}')
        .option("startingOffsetsByTimestampStrategy", "latest")
        .option("endingOffsetsByTimestamp", f'{{"orders":{{"0":{TS + 99},"1":{TS + 2},"2":{TS}}}}}')
        .load(str(orders))
    )
    # No record at or after an ending timestamp: the end is the log end (Kafka's readTimestampOffsets).
    expected = engine_df(spark, orders, [("orders", 0, 4, 6), ("orders", 1, 0, 2)])
    assert_df_equality(ordered(by_partition), ordered(expected))
    # A timestamp takes precedence over offsets, as in Spark.
    precedence = (
        spark.read.format("pysparklog")
        .option("assign", '{"orders":[0,1]}')
        .option("startingOffsets", "earliest")
        .option("startingTimestamp", str(TS + 3))
        .load(str(orders))
    )
    assert coordinates(precedence) == [("orders", 0, o) for o in (3, 4, 5)] + [("orders", 1, 3)]


def test_bad_batch_options_fail_when_the_dataframe_is_defined(spark: SparkSession, orders: Path) -> None:
    reader = spark.read.format("pysparklog").option("subscribe", "orders")
    with pytest.raises(AnalysisException, match="starting offset can't be latest for batch queries"):
        reader.option("startingOffsets", "latest").load(str(orders)).count()
    with pytest.raises(AnalysisException, match="Only one of the following options can be specified"):
        spark.read.format("pysparklog").option("subscribe", "orders").option("assign", '{"orders":[0]}').load(
            str(orders)
        )
    # PySpark hands a data source its option names in lower case, so the message names it so, with the spelling meant.
    with pytest.raises(
        AnalysisException,
        match=r"option 'subscribepatern' is not a pysparklog source option \(did you mean subscribePattern\?\)",
    ):
        spark.read.format("pysparklog").option("subscribePatern", "o.*").load(str(orders))
    inverted = (
        spark.read.format("pysparklog")
        .option("assign", '{"orders":[0]}')
        .option("startingTimestamp", str(TS + 4))
        .option("endingTimestamp", str(TS + 2))
    )
    with pytest.raises(
        AnalysisException, match="The resolved start offset 4 is greater than the resolved end offset 2"
    ):
        inverted.load(str(orders)).count()


def test_a_batch_querys_ending_offsets_error_is_the_batch_sentence_only(spark: SparkSession, orders: Path) -> None:
    """``schema()`` cannot tell a batch from a stream: it once refused ``endingOffsets`` earliest with the batch's
    sentence and the stream's ("not valid in streaming queries") joined, which only confused a batch's user."""
    reader = spark.read.format("pysparklog").option("subscribe", "orders").option("endingOffsets", "earliest")
    with pytest.raises(AnalysisException) as refused:
        reader.load(str(orders)).collect()
    message = str(refused.value)
    assert "ending offset can't be earliest for batch queries on Kafka: endingOffsets accepts latest or JSON" in message
    assert "not valid in streaming queries" not in message and "(in a stream)" not in message


def test_an_unknown_option_of_a_batch_read_names_the_closest_accepted_one(spark: SparkSession, orders: Path) -> None:
    reader = spark.read.format("pysparklog").option("subscribe", "orders").option("startingOffset", "earliest")
    with pytest.raises(AnalysisException) as refused:
        reader.load(str(orders))
    assert "option 'startingoffset' is not a pysparklog source option (did you mean startingOffsets?); accepted: " in (
        str(refused.value)
    )


def test_an_empty_topic_and_a_pattern_matching_nothing_read_no_rows(spark: SparkSession, tmp_path: Path) -> None:
    """As Spark's Kafka source: PySpark runs one task on a placeholder partition when none is planned, which
    failed with a bare AssertionError."""
    path = str(tmp_path / "logs")
    make_topic(path, "empty", [0, 0])
    assert spark.read.format("pysparklog").option("subscribe", "empty").load(path).count() == 0
    assert spark.read.format("pysparklog").option("subscribePattern", "^nothing$").load(path).count() == 0


def test_a_missing_topic_or_a_path_that_is_no_log_directory_fails_naming_it(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    """Spark's Kafka source fails on a subscribed topic the broker does not have; both failed with a bare
    AssertionError."""
    reader = spark.read.format("pysparklog").option("subscribe", "orders,nope")
    with pytest.raises(
        AnalysisException, match="option subscribe names 'nope', but no such topic exists in"
    ) as missing:
        reader.load(str(orders)).count()
    nowhere = tmp_path / "nowhere"
    with pytest.raises(AnalysisException, match=f"option path = '{nowhere}' is not a log directory") as wrong:
        reader.load(str(nowhere)).count()
    assert "AssertionError" not in str(missing.value) + str(wrong.value)


# -- isolation -------------------------------------------------------------------------------------------------


def transactions(path: Path) -> LogDirectory:
    """Partition ``tx-0``: 0-1 plain; 2-3 producer 1 and 4-5 producer 2 in transactions; 6 commits producer 1's,
    7 aborts producer 2's; 8-9 plain; 10-11 producer 3's transaction, left open; 12-13 plain."""
    logs = LogDirectory(path)
    logs.topics.create("tx", 1)
    append(logs, "tx", 0, 2)
    for producer in (1, 2):
        append(logs, "tx", 0, 2, settings=transaction(producer))
    end_transaction(logs, 1, ControlRecordType.COMMIT)
    end_transaction(logs, 2, ControlRecordType.ABORT)
    append(logs, "tx", 0, 2)
    append(logs, "tx", 0, 2, settings=transaction(3))
    append(logs, "tx", 0, 2)
    return logs


def transaction(producer_id: int, base_sequence: int = 0) -> BatchSettings:
    return BatchSettings(producer_id=producer_id, producer_epoch=0, base_sequence=base_sequence, transactional=True)


def end_transaction(logs: LogDirectory, producer_id: int, marker: ControlRecordType) -> None:
    key, value = end_txn_marker(marker, coordinator_epoch=0)
    settings = BatchSettings(producer_id=producer_id, producer_epoch=0, transactional=True)
    with logs.partition("tx", 0) as log:
        log.append(encode_control_batch(key, value, settings))


def test_min_partitions_splits_the_read_into_more_tasks_with_the_same_rows(spark: SparkSession, tmp_path: Path) -> None:
    """``minPartitions`` cuts the ranges as Kafka's range calculator does: partitions of 101, 11 and 1 records asked
    for 5 tasks leave the two small ones whole and cut the large one in three (SPARK-36576); the rows do not change."""
    make_topic(tmp_path, "t", [101, 11, 1])
    default = spark.read.format("pysparklog").option("subscribe", "t").load(str(tmp_path))
    split = spark.read.format("pysparklog").option("subscribe", "t").option("minPartitions", "5").load(str(tmp_path))
    assert default.rdd.getNumPartitions() == 3
    assert split.rdd.getNumPartitions() == 5
    expected = engine_df(spark, tmp_path, [("t", partition, None, None) for partition in range(3)])
    assert_df_equality(ordered(split), ordered(expected))


def test_read_committed_skips_aborted_records_and_stops_at_an_open_transaction(
    spark: SparkSession, tmp_path: Path
) -> None:
    transactions(tmp_path)
    reader = spark.read.format("pysparklog").option("subscribe", "tx")
    committed = reader.option("isolation.level", "read_committed").load(str(tmp_path))
    assert coordinates(committed) == [("tx", 0, o) for o in (0, 1, 2, 3, 8, 9)]
    expected = engine_df(spark, tmp_path, [("tx", 0, None, None)], isolation_level="read_committed")
    assert_df_equality(ordered(committed), ordered(expected))
    uncommitted = spark.read.format("pysparklog").option("subscribe", "tx").load(str(tmp_path))
    assert coordinates(uncommitted) == [("tx", 0, o) for o in (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13)]


# -- a real broker's log directory ------------------------------------------------------------------------------


def test_reads_a_real_brokers_log_directory(spark: SparkSession, broker_log_dir_copy: Path) -> None:
    path = str(broker_log_dir_copy)
    patient = spark.read.format("pysparklog").option("subscribe", "TestTopicPatient").load(path)
    rows = patient.orderBy("offset").collect()
    assert [row.offset for row in rows] == [0, 1, 2]
    assert {row.topic for row in rows} == {"TestTopicPatient"} and {row.partition for row in rows} == {0}
    assert int(rows[0].timestamp.timestamp() * 1000) == 1769792698283
    assert int(rows[-1].timestamp.timestamp() * 1000) == 1769793578165
    assert_df_equality(ordered(patient), ordered(engine_df(spark, path, [("TestTopicPatient", 0, None, None)])))
    # Internal topics are read when assigned, and left out of patterns, as by Spark's Kafka source.
    offsets = spark.read.format("pysparklog").option("assign", '{"__consumer_offsets":[6]}').load(path)
    assert [row.offset for row in offsets.orderBy("offset").collect()] == list(range(13))
    assert_df_equality(ordered(offsets), ordered(engine_df(spark, path, [("__consumer_offsets", 6, None, None)])))
    everything = spark.read.format("pysparklog").option("subscribePattern", ".*").load(path)
    assert {row.topic for row in everything.select("topic").distinct().collect()} == {"TestTopicPatient"}
    # 4929 records, of which offset 0 is a control record (KRaft's leader change), which consumers skip.
    metadata = spark.read.format("pysparklog").option("assign", '{"__cluster_metadata":[0]}').load(path)
    assert [row.offset for row in metadata.select("offset").orderBy("offset").collect()] == list(range(1, 4929))
    assert_df_equality(ordered(metadata), ordered(engine_df(spark, path, [("__cluster_metadata", 0, None, None)])))
