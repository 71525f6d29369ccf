"""Quickstart: create a topic, produce order events into it, stream it with Spark and print it.

Shows the three pieces of pysparklog most programs use, on a log directory of Kafka-format files and no
broker:

1. ``LogDirectory(...).topics.create``: a topic with three partitions (``pysparklog topics --create``);
2. ``Producer.send``: Kafka's producer API; keyed records go where Kafka's Java producer would put them;
3. ``spark.readStream.format("pysparklog")``: Spark's Kafka source with the log directory in place of the
   brokers, run here with ``Trigger.AvailableNow`` into the console sink.

Run it from the checkout (a few seconds after Spark has started)::

    .venv/bin/python -m examples.quickstart [--orders 12] [--log-dir DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

from examples.common import (
    example_parser,
    fresh_log_dir,
    heading,
    order_events,
    print_result,
    run_until_caught_up,
    spark_session,
)
from pysparklog import LogDirectory, Producer, ProducerConfig, RecordMetadata

TOPIC = "orders"
PARTITIONS = 3


def create_topic(log_dir: str | Path, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
    """Create ``topic`` with ``partitions`` partitions, as ``kafka-topics.sh --create`` would on a broker.

    A topic could also be created by its first write (the Spark sink does); creating it states its partition
    count and configs (zstd compression here, applied by the log to every batch it receives).
    """
    LogDirectory(log_dir).topics.create(topic, partitions, {"compression.type": "zstd"})
    print(f"created topic {topic} with {partitions} partitions in {log_dir}")


def produce_orders(log_dir: str | Path, orders: int, topic: str = TOPIC) -> list[RecordMetadata]:
    """Send the events of ``orders`` orders with Kafka's producer API; the metadata of each record.

    ``send`` returns a future at once; records are batched per partition and appended by a background thread
    (``linger.ms``), and ``close`` (the ``with`` block's end) appends what is still waiting.
    """
    events = order_events(orders)
    config = ProducerConfig.from_properties({"linger.ms": "5", "client.id": "quickstart"})
    with Producer(log_dir, config) as producer:
        futures = [producer.send(topic, event.value, key=event.key) for event in events]
        metadata = [future.get(timeout=30) for future in futures]
    for event, meta in zip(events, metadata, strict=True):
        print(f"produced {event.order_id} {event.status:<9} -> {meta.topic}-{meta.partition} offset {meta.offset}")
    return metadata


def stream_to_console(spark: SparkSession, log_dir: str | Path, topic: str = TOPIC) -> int:
    """Stream the topic from its first offset to the console sink; the number of records read.

    ``Trigger.AvailableNow`` reads everything there is when the query starts, in micro-batches, then stops:
    the way to run a streaming query as a job. Without it the query would run until stopped, printing each new
    micro-batch as records arrive.
    """
    stream = (
        spark.readStream.format("pysparklog")  # was: format("kafka")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load(str(log_dir))  # was: .option("kafka.bootstrap.servers", "host:9092")
    )
    rows = stream.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")
    query = (
        rows.writeStream.format("console")
        .option("truncate", "false")
        .option("numRows", "1000")
        .trigger(availableNow=True)
        .start()
    )
    return run_until_caught_up(query)


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__, work_dir=False)
    parser.add_argument("--orders", type=int, default=12, help="orders to produce events for (default: %(default)s)")
    args = parser.parse_args(argv)
    log_dir = fresh_log_dir(args.log_dir)

    heading("create a topic")
    create_topic(log_dir)
    heading("produce")
    produced = produce_orders(log_dir, args.orders)
    heading("stream it (Spark, format('pysparklog'), console sink)")
    spark = spark_session("pysparklog-quickstart")
    streamed = stream_to_console(spark, log_dir)
    print_result("quickstart", produced=len(produced), streamed=streamed)
    print(f"\nThe topic's files: {log_dir}/{TOPIC}-<partition>/; try: pysparklog topics --log-dir {log_dir} --describe")
    return 0 if streamed == len(produced) else 1


if __name__ == "__main__":
    sys.exit(main())
