"""From the log to Delta Lake: a bronze table of raw records, then a silver table with one row per order.

The medallion pattern a Delta user runs on Kafka, with a pysparklog topic in Kafka's place:

* **Bronze** (``ingest_bronze``): ``readStream.format("pysparklog")`` into a Delta table, the records as they
  are (key, value, topic, partition, offset, timestamp). Exactly once: the query's checkpoint holds the offsets
  each micro-batch read and Delta's sink records each batch id it committed, so a restarted query continues
  where the last one stopped and a batch that is run again is not appended twice. The example runs the
  query twice, with new records produced in between, and checks that bronze holds every record once.
* **Silver** (``upsert_to_silver``): a stream over bronze whose ``foreachBatch`` parses the JSON, keeps each
  order's latest event of the micro-batch and ``MERGE``s it into the silver table by key (Delta's
  ``DeltaTable.merge``): new orders are inserted, known ones updated when the event is newer (higher
  ``version``), so replaying a batch changes nothing.

Run it from the checkout (about half a minute, most of it Delta's commits; the first run downloads Delta's jars)::

    .venv/bin/python -m examples.log_to_delta [--orders 200] [--log-dir DIR] [--work-dir DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from examples.common import (
    ORDER_SCHEMA,
    OrderEvent,
    example_parser,
    fresh_dir,
    fresh_log_dir,
    heading,
    latest_per_order,
    order_events,
    orders_table,
    print_result,
    run_until_caught_up,
    spark_session,
)
from pysparklog import LogDirectory, Producer

TOPIC = "orders"
PARTITIONS = 3
#: The share of the events produced before the first run of the pipeline; the rest come before the second.
FIRST_ROUND = 0.6


def produce(log_dir: str | Path, events: list[OrderEvent], topic: str = TOPIC) -> None:
    """Append order events to the topic (created with ``PARTITIONS`` partitions if missing)."""
    LogDirectory(log_dir).topics.create(topic, PARTITIONS, if_not_exists=True)
    with Producer(log_dir) as producer:
        producer.send_arrow(topic, orders_table(events))
    print(f"produced {len(events)} order events to {topic}")


def ingest_bronze(spark: SparkSession, log_dir: str | Path, bronze: str | Path, checkpoint: str | Path) -> int:
    """Append the topic's new records to the bronze Delta table; the number appended.

    ``Trigger.AvailableNow`` makes the streaming query a job: it reads what the topic holds now and stops. Run
    again with the same checkpoint, it starts where it stopped.
    """
    records = (
        spark.readStream.format("pysparklog")
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")  # where the first run starts; later runs follow the checkpoint
        .option("maxOffsetsPerTrigger", "500")  # micro-batches of a bounded size, as with Kafka
        .load(str(log_dir))
    )
    raw = records.selectExpr(
        "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition", "offset", "timestamp"
    )
    query = (
        raw.writeStream.format("delta")
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(bronze))
    )
    return run_until_caught_up(query)


def create_silver(spark: SparkSession, silver: str | Path) -> None:
    """The silver table: one row per order, its latest state and where in the log it came from."""
    schema = StructType.fromDDL(f"{ORDER_SCHEMA}, partition INT, offset BIGINT, timestamp TIMESTAMP")
    assert isinstance(schema, StructType)
    DeltaTable.createIfNotExists(spark).location(str(silver)).addColumns(schema).execute()


def latest_in_batch(bronze_rows: DataFrame) -> DataFrame:
    """Each order's latest event among ``bronze_rows``, parsed: a MERGE source must not match a target row
    twice, and a micro-batch may hold several events of an order."""
    parsed = bronze_rows.select(
        F.from_json("value", ORDER_SCHEMA).alias("order"), "partition", "offset", "timestamp"
    ).select("order.*", "partition", "offset", "timestamp")
    newest_first = Window.partitionBy("order_id").orderBy(F.col("version").desc(), F.col("offset").desc())
    return parsed.withColumn("rank", F.row_number().over(newest_first)).where("rank = 1").drop("rank")


def merge_into_silver(silver: str | Path) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function upserting a micro-batch of bronze rows into ``silver`` by order id.

    An order is updated only by a newer event (``s.version > t.version``), so the MERGE is idempotent: a
    micro-batch that Spark runs again after a failure leaves the table as it was.
    """

    def upsert(batch: DataFrame, batch_id: int) -> None:
        target = DeltaTable.forPath(batch.sparkSession, str(silver))
        (
            target.alias("t")
            .merge(latest_in_batch(batch).alias("s"), "t.order_id = s.order_id")
            .whenMatchedUpdateAll(condition="s.version > t.version")
            .whenNotMatchedInsertAll()
            .execute()
        )

    return upsert


def upsert_to_silver(spark: SparkSession, bronze: str | Path, silver: str | Path, checkpoint: str | Path) -> int:
    """Stream bronze's new rows into silver with ``MERGE``; the number of bronze rows it read."""
    create_silver(spark, silver)
    query = (
        spark.readStream.format("delta")
        .load(str(bronze))
        .writeStream.foreachBatch(merge_into_silver(silver))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    return run_until_caught_up(query)


def show_bronze(spark: SparkSession, bronze: str | Path) -> tuple[int, int]:
    """Show the first bronze rows; (rows, distinct log positions): equal when no record was appended twice."""
    table = spark.read.format("delta").load(str(bronze))
    table.orderBy("partition", "offset").show(5, truncate=False)
    row = table.agg(F.count("*").alias("rows"), F.countDistinct("topic", "partition", "offset").alias("positions"))
    counts = row.first()
    assert counts is not None
    return int(counts["rows"]), int(counts["positions"])


def show_silver(spark: SparkSession, silver: str | Path, expected: dict[str, OrderEvent]) -> tuple[int, int]:
    """Show silver, its orders per status and its history (a MERGE per micro-batch), and compare it with each
    order's latest event; (rows, orders that differ: missing, extra or stale)."""
    table = spark.read.format("delta").load(str(silver))
    table.orderBy("order_id").show(5, truncate=False)
    table.groupBy("status").count().orderBy("status").show()
    metrics = ("numTargetRowsInserted", "numTargetRowsUpdated")
    history = DeltaTable.forPath(spark, str(silver)).history().orderBy("version")
    history.select("version", "operation", *(f"operationMetrics.{m}" for m in metrics)).show(truncate=False)
    rows = {row.order_id: (row.status, row.version) for row in table.collect()}
    wanted = {order_id: (event.status, event.version) for order_id, event in expected.items()}
    differing = {order_id for order_id in rows.keys() | wanted.keys() if rows.get(order_id) != wanted.get(order_id)}
    for order_id in sorted(differing)[:5]:
        print(f"  {order_id}: silver has {rows.get(order_id)}, the latest event is {wanted.get(order_id)}")
    return len(rows), len(differing)


def run_pipeline(spark: SparkSession, log_dir: str | Path, work_dir: Path) -> tuple[int, int]:
    """One run of both streams, each resuming from its checkpoint: (rows appended to bronze, rows merged)."""
    bronze, silver = work_dir / "bronze", work_dir / "silver"
    appended = ingest_bronze(spark, log_dir, bronze, work_dir / "checkpoints" / "bronze")
    merged = upsert_to_silver(spark, bronze, silver, work_dir / "checkpoints" / "silver")
    print(f"bronze: appended {appended} records; silver: merged {merged} bronze rows")
    return appended, merged


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__)
    parser.add_argument("--orders", type=int, default=200, help="orders to produce events for (default: %(default)s)")
    args = parser.parse_args(argv)
    log_dir, work_dir = fresh_log_dir(args.log_dir), fresh_dir(args.work_dir)
    events = order_events(args.orders)
    first = int(len(events) * FIRST_ROUND)
    spark = spark_session("pysparklog-log-to-delta", delta=True)

    heading("round 1: produce, then run the pipeline")
    produce(log_dir, events[:first])
    run_pipeline(spark, log_dir, work_dir)
    heading("round 2: produce more (new orders, new states of known ones); the restarted streams read only those")
    produce(log_dir, events[first:])
    appended, _ = run_pipeline(spark, log_dir, work_dir)
    print_result("round2", appended=appended, produced=len(events) - first)

    heading("bronze: every record once")
    bronze_rows, distinct = show_bronze(spark, work_dir / "bronze")
    print_result("bronze", rows=bronze_rows, distinct_offsets=distinct, produced=len(events))
    heading("silver: one row per order, its latest state")
    expected = latest_per_order(events)
    silver_rows, mismatches = show_silver(spark, work_dir / "silver", expected)
    print_result("silver", rows=silver_rows, keys=len(expected), mismatches=mismatches)
    ok = bronze_rows == distinct == len(events) and silver_rows == len(expected) and mismatches == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
