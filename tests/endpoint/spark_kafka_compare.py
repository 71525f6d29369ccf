"""Run as a process of its own by ``test_spark_kafka_connector.py``: Spark's own Kafka connector
(``spark-sql-kafka-0-10`` of the installed pyspark's version, through ``spark.jars.packages`` as
``benchmarks/bench_peer.py`` gets it) reads a topic through a pysparklog endpoint, ``format("pysparklog")`` reads
the same topic from the log directory, and chispa compares the two, row by row::

    python -m tests.endpoint.spark_kafka_compare --bootstrap HOST:PORT --log-dir DIR --topic T [--isolation L]
    python -m tests.endpoint.spark_kafka_compare --log-dir DIR --topic T --group G --checkpoint DIR

The second form is the Spark source's side of a group: a new streaming query of ``format("pysparklog")`` with
``group.id`` G starts at the group's committed offsets (those a Java consumer committed through an endpoint);
it reads to the end (``availableNow``) and prints the (partition, offset) of each row it read.

A process of its own because the connector's jar must be on the classpath the SparkSession starts with, and a
test run's shared session (``tests/spark/conftest.py``) starts without it. Prints each row compared as a JSON
line, then their count; exits 1 with chispa's difference when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import pyspark
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
#: The columns both sources have, Spark's Kafka source's, in its order.
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def session() -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    built = (
        SparkSession.builder.master("local[2]")
        .appName("pysparklog-endpoint-kafka-connector")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.jars.packages", KAFKA_PACKAGE)
        .getOrCreate()
    )
    built.sparkContext.setLogLevel("ERROR")
    return built


def compare(spark: SparkSession, bootstrap: str, log_dir: str, topic: str, isolation: str) -> int:
    """The two reads' rows, compared; returns how many there are."""
    through_endpoint: DataFrame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", isolation)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    from_directory: DataFrame = (
        spark.read.format("pysparklog")
        .option("subscribe", topic)
        .option("isolation.level", isolation)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load(log_dir)
    )
    order = ("partition", "offset")
    expected = from_directory.select(*COLUMNS).orderBy(*order)
    actual = through_endpoint.select(*COLUMNS).orderBy(*order)
    assert_df_equality(actual, expected, ignore_nullable=True)
    for row in expected.collect():
        print(json.dumps(_printable(row.asDict(recursive=True))), flush=True)
    return expected.count()


def _printable(row: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON: bytes as text, the timestamp as epoch milliseconds."""
    return {
        **row,
        "key": None if row["key"] is None else bytes(row["key"]).decode(),
        "value": None if row["value"] is None else bytes(row["value"]).decode(),
        "timestamp": round(row["timestamp"].timestamp() * 1000),
        "headers": None
        if row["headers"] is None
        else [[h["key"], None if h["value"] is None else bytes(h["value"]).decode()] for h in row["headers"]],
    }


def group_stream(spark: SparkSession, log_dir: str, topic: str, group: str, checkpoint: str) -> list[list[int]]:
    """The (partition, offset) of each row a new ``group.id`` query reads, to the end of the topic."""
    stream = (
        spark.readStream.format("pysparklog")
        .option("subscribe", topic)
        .option("group.id", group)
        .option("startingOffsets", "earliest")
        .load(log_dir)
    )
    query = (
        stream.select("partition", "offset")
        .writeStream.format("memory")
        .queryName("group_rows")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return [[row.partition, row.offset] for row in spark.sql("select * from group_rows").collect()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="the endpoint, for the comparison")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--isolation", default="read_uncommitted", choices=("read_uncommitted", "read_committed"))
    parser.add_argument("--group", help="read as a new streaming query of this group instead")
    parser.add_argument("--checkpoint", help="the group query's checkpoint location")
    args = parser.parse_args()
    if (args.group is None) == (args.bootstrap is None) or (args.group is None) != (args.checkpoint is None):
        parser.error("give --bootstrap (compare the two reads) or --group and --checkpoint (a group's query)")
    spark = session()
    try:
        if args.group is not None:
            print(
                json.dumps({"group_read": group_stream(spark, args.log_dir, args.topic, args.group, args.checkpoint)})
            )
        else:
            print(json.dumps({"rows": compare(spark, args.bootstrap, args.log_dir, args.topic, args.isolation)}))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
