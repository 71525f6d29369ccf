"""Migrating from Spark's Kafka source and sink: the read and write examples of Spark's "Structured Streaming
+ Kafka Integration Guide", each as the guide has it (in a comment) and as it runs on pysparklog.

What changes is only where the data is: ``format("kafka")`` becomes ``format("pysparklog")`` and the
``kafka.bootstrap.servers`` option becomes the log directory, given to ``.load(path)`` / ``.save(path)`` /
``.start(path)`` (or as option ``path``). Every other option keeps its name and meaning: ``subscribe``,
``subscribePattern``, ``startingOffsets``/``endingOffsets`` with Kafka's JSON and its -2/-1, ``includeHeaders``,
``topic``, a ``topic`` column. (Leaving ``kafka.bootstrap.servers`` in is harmless: it is accepted and ignored.)

Two things Spark itself imposes, not the source:

* a batch write to a Python data source needs ``.mode("append")``: Spark refuses the default mode
  (``errorifexists``) for every Python data source before the source sees it;
* a streaming write needs ``checkpointLocation`` (the guide leaves it out for brevity; Spark does not).

And one the guide relies on: a stream starts at ``latest`` by default (as Kafka's does), so the streaming reads
here add ``startingOffsets=earliest`` to see the records produced before they start.

Run it from the checkout (about half a minute, most of it Spark's per-query overhead)::

    .venv/bin/python -m examples.migrate_from_kafka [--records 20] [--log-dir DIR] [--work-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from examples.common import (
    example_parser,
    format_counts,
    fresh_dir,
    fresh_log_dir,
    heading,
    order_events,
    orders_table,
    print_result,
    run_until_caught_up,
    spark_session,
    topic_records,
)
from pysparklog import LogDirectory, Producer

#: The guide's topics, and a stream of order events that the write examples copy.
TOPICS = {"topic1": 2, "topic2": 1, "events": 1}


def create_topics(log_dir: str | Path, records: int) -> None:
    """The guide's ``topic1`` (two partitions) and ``topic2`` with ``records`` keyed records each, every record
    with a ``source`` header; and ``events``, order events for the write examples."""
    logs = LogDirectory(log_dir)
    for topic, partitions in TOPICS.items():
        logs.topics.create(topic, partitions)
    with Producer(logs) as producer:
        for topic in ("topic1", "topic2"):
            for i in range(records):
                producer.send(
                    topic, f"{topic} message {i}".encode(), key=f"k{i}".encode(), headers=[("source", b"app")]
                )
        producer.send_arrow("events", orders_table(order_events(records)))
    counts = {topic: topic_records(log_dir, topic).num_rows for topic in TOPICS}
    print(f"produced {format_counts(counts)}")


def drain(df: DataFrame, name: str) -> int:
    """Run a streaming DataFrame until it has read what is there (``Trigger.AvailableNow``) into a memory
    table, show a few rows, and return how many it read."""
    query = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    rows = run_until_caught_up(query)
    df.sparkSession.table(name).show(4, truncate=False)
    print_result(name, rows=rows)
    return rows


def show_batch(df: DataFrame, name: str) -> int:
    """Show a few rows of a batch DataFrame; how many rows it has."""
    df.show(4, truncate=False)
    rows = df.count()
    print_result(name, rows=rows)
    return rows


# -- reading: streaming queries ------------------------------------------------------------------------------


def stream_one_topic(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to 1 topic."""
    # df = spark \
    #   .readStream \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribe", "topic1") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    df = (
        spark.readStream.format("pysparklog")
        .option("subscribe", "topic1")
        .option("startingOffsets", "earliest")  # added: see the module docstring
        .load(str(log_dir))
    )
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")


def stream_one_topic_with_headers(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to 1 topic, with headers."""
    # df = spark \
    #   .readStream \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribe", "topic1") \
    #   .option("includeHeaders", "true") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "headers")
    df = (
        spark.readStream.format("pysparklog")
        .option("subscribe", "topic1")
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")  # added
        .load(str(log_dir))
    )
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "headers")


def stream_multiple_topics(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to multiple topics."""
    # df = spark \
    #   .readStream \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribe", "topic1,topic2") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    df = (
        spark.readStream.format("pysparklog")
        .option("subscribe", "topic1,topic2")
        .option("startingOffsets", "earliest")  # added
        .load(str(log_dir))
    )
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")


def stream_pattern(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to a pattern."""
    # df = spark \
    #   .readStream \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribePattern", "topic.*") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    df = (
        spark.readStream.format("pysparklog")
        .option("subscribePattern", "topic.*")
        .option("startingOffsets", "earliest")  # added
        .load(str(log_dir))
    )
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")


# -- reading: batch queries ----------------------------------------------------------------------------------


def batch_one_topic(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to 1 topic, defaults to the earliest and latest offsets."""
    # df = spark \
    #   .read \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribe", "topic1") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    df = spark.read.format("pysparklog").option("subscribe", "topic1").load(str(log_dir))
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")


def batch_explicit_offsets(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to multiple topics, specifying explicit Kafka offsets (-2: earliest, -1: latest)."""
    # df = spark \
    #   .read \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribe", "topic1,topic2") \
    #   .option("startingOffsets", """{"topic1":{"0":23,"1":-2},"topic2":{"0":-2}}""") \
    #   .option("endingOffsets", """{"topic1":{"0":50,"1":-1},"topic2":{"0":-1}}""") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    #
    # The guide's offsets 23 and 50 assume a longer topic1-0 than this example's; here it starts at 3 and
    # ends at its log end offset (-1).
    df = (
        spark.read.format("pysparklog")
        .option("subscribe", "topic1,topic2")
        .option("startingOffsets", """{"topic1":{"0":3,"1":-2},"topic2":{"0":-2}}""")
        .option("endingOffsets", """{"topic1":{"0":-1,"1":-1},"topic2":{"0":-1}}""")
        .load(str(log_dir))
    )
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")


def batch_pattern(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """Subscribe to a pattern, at the earliest and latest offsets."""
    # df = spark \
    #   .read \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("subscribePattern", "topic.*") \
    #   .option("startingOffsets", "earliest") \
    #   .option("endingOffsets", "latest") \
    #   .load()
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    df = (
        spark.read.format("pysparklog")
        .option("subscribePattern", "topic.*")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load(str(log_dir))
    )
    return df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")


# -- writing -------------------------------------------------------------------------------------------------


def with_status_topic(events: DataFrame) -> DataFrame:
    """Order events with a ``topic`` column naming a topic per order status (``orders-created``,
    ``orders-paid``...): the ``df`` the guide's writes start from."""
    status = "get_json_object(CAST(value AS STRING), '$.status')"
    return events.selectExpr("key", "value", f"concat('orders-', {status}) AS topic")


def order_stream(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """The order events as a streaming DataFrame, for the guide's streaming writes."""
    events = (
        spark.readStream.format("pysparklog")
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .load(str(log_dir))
    )
    return with_status_topic(events)


def write_stream_topic_option(df: DataFrame, log_dir: str | Path, checkpoint: str | Path) -> int:
    """Write key-value data from a DataFrame to a specific topic specified in an option; rows written."""
    # ds = df \
    #   .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)") \
    #   .writeStream \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("topic", "topic1") \
    #   .start()
    ds = (
        df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
        .writeStream.format("pysparklog")
        .option("topic", "topic1")
        .option("checkpointLocation", str(checkpoint))  # added: Spark requires it
        .trigger(availableNow=True)  # added: stop once caught up
        .start(str(log_dir))
    )
    rows = run_until_caught_up(ds)
    print_result("write_stream_topic_option", rows=rows)
    return rows


def write_stream_topic_column(df: DataFrame, log_dir: str | Path, checkpoint: str | Path) -> int:
    """Write key-value data from a DataFrame using a topic specified in the data; rows written. Topics that do
    not exist yet are created, as a broker with ``auto.create.topics.enable`` creates them."""
    # ds = df \
    #   .selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \
    #   .writeStream \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .start()
    ds = (
        df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)")
        .writeStream.format("pysparklog")
        .option("checkpointLocation", str(checkpoint))  # added
        .trigger(availableNow=True)  # added
        .start(str(log_dir))
    )
    rows = run_until_caught_up(ds)
    print_result("write_stream_topic_column", rows=rows)
    return rows


def write_batch(spark: SparkSession, log_dir: str | Path) -> int:
    """The guide's two batch writes, of the order events read as a batch: to a topic named in an option, then
    to the topics of a ``topic`` column; rows written by each."""
    df = with_status_topic(spark.read.format("pysparklog").option("subscribe", "events").load(str(log_dir)))
    # df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)") \
    #   .write \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .option("topic", "topic1") \
    #   .save()
    (
        df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
        .write.format("pysparklog")
        .mode("append")  # added: Spark requires it for a Python data source
        .option("topic", "topic1")
        .save(str(log_dir))
    )
    # df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \
    #   .write \
    #   .format("kafka") \
    #   .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
    #   .save()
    (
        df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)")
        .write.format("pysparklog")
        .mode("append")  # added
        .save(str(log_dir))
    )
    rows = df.count()
    print_result("write_batch", rows=rows)
    return rows


def topic_counts(log_dir: str | Path) -> dict[str, int]:
    """Records per topic, read with the engine."""
    logs = LogDirectory(log_dir)
    return {topic: topic_records(log_dir, topic).num_rows for topic in logs.topics.names()}


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__)
    parser.add_argument("--records", type=int, default=20, help="records per guide topic (default: %(default)s)")
    args = parser.parse_args(argv)
    log_dir, work_dir = fresh_log_dir(args.log_dir), fresh_dir(args.work_dir)

    heading("topics")
    create_topics(log_dir, args.records)
    spark = spark_session("pysparklog-migrate-from-kafka")

    heading("streaming reads")
    drain(stream_one_topic(spark, log_dir), "stream_one_topic")
    drain(stream_one_topic_with_headers(spark, log_dir), "stream_one_topic_with_headers")
    drain(stream_multiple_topics(spark, log_dir), "stream_multiple_topics")
    drain(stream_pattern(spark, log_dir), "stream_pattern")

    heading("batch reads")
    show_batch(batch_one_topic(spark, log_dir), "batch_one_topic")
    show_batch(batch_explicit_offsets(spark, log_dir), "batch_explicit_offsets")
    show_batch(batch_pattern(spark, log_dir), "batch_pattern")

    heading("streaming writes")
    write_stream_topic_option(order_stream(spark, log_dir), log_dir, work_dir / "checkpoint-topic-option")
    write_stream_topic_column(order_stream(spark, log_dir), log_dir, work_dir / "checkpoint-topic-column")

    heading("batch writes")
    write_batch(spark, log_dir)

    heading("records per topic now")
    counts = topic_counts(log_dir)
    for topic, count in sorted(counts.items()):
        print(f"{topic:<20} {count:>5}")
    print_result("topics", counts=format_counts(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
