# Databricks notebook source
# MAGIC %md
# MAGIC # From the log to Delta Lake: bronze and silver tables
# MAGIC
# MAGIC The medallion pattern a Databricks user runs on Kafka, with a pysparklog topic in Kafka's place:
# MAGIC
# MAGIC * **Bronze**: `spark.readStream.format("pysparklog")` into a Delta table, the records as they are (key,
# MAGIC   value, topic, partition, offset, timestamp). The stream is exactly-once end to end, as with Kafka: the
# MAGIC   checkpoint holds the offsets each micro-batch read and Delta's sink records each batch it committed, so a
# MAGIC   restarted query continues where the last one stopped and a micro-batch run again is not appended twice.
# MAGIC * **Silver**: a stream over bronze whose `foreachBatch` keeps each order's latest event of the micro-batch
# MAGIC   and `MERGE`s it into a table with one row per order. An order is only updated by a newer event, so
# MAGIC   replaying a micro-batch changes nothing.
# MAGIC
# MAGIC Both streams run with `trigger(availableNow=True)`, as a scheduled job would run them (a Databricks job
# MAGIC every few minutes): they read what is new and stop. The notebook runs the pipeline twice, with more events
# MAGIC produced in between.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from examples.common import ORDER_SCHEMA, fresh_log_dir, latest_per_order, order_events
from examples.log_to_delta import produce
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `base_dir` holds the log directory (`logs/`), `work_dir` the Delta tables and the checkpoints (empty:
# MAGIC `base_dir`'s `work/`). On Databricks give `base_dir` an object-store URL the cluster can write, such as a
# MAGIC Unity Catalog external location's cloud URL (`s3://...`, `abfss://...`, `gs://...`), not `/Volumes` or
# MAGIC `/dbfs` (see `docs/cluster.md`); the tables and checkpoints can be anywhere Delta writes: the same bucket,
# MAGIC or a volume. Empty, `base_dir` is a new temporary directory, removed when the notebook's Python process
# MAGIC ends. `orders` is the number of orders to produce events for.

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("base_dir", "", "Base directory or object-store URL")
dbutils.widgets.text("work_dir", "", "Tables and checkpoints (default: base_dir/work)")
dbutils.widgets.text("orders", "100", "Orders")

BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-log-to-delta-")
WORK_DIR = dbutils.widgets.get("work_dir") or os.path.join(BASE_DIR, "work")
ORDERS = int(dbutils.widgets.get("orders"))
TOPIC = "orders"
FIRST_ROUND = 0.6  # the share of the events produced before the first run
if "display" not in globals():  # outside Databricks: prints DataFrames, saves figures in WORK_DIR
    display = LocalDisplay(WORK_DIR)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Spark with Delta Lake
# MAGIC
# MAGIC Databricks runtimes have Delta built in and a `spark` session; locally the cell starts one with Delta's
# MAGIC jars and SQL extension (`delta=True`; the first run downloads the jars from Maven Central).

# COMMAND ----------

if "spark" not in globals():
    from pysparklog.spark.session import local_spark

    # Delta's jars and SQL extension; its snapshots on 2 partitions, not 50: the tables here are tiny.
    spark = local_spark(
        "pysparklog-notebook-log-to-delta", delta=True, conf={"spark.databricks.delta.snapshotPartitions": "2"}
    )
spark.dataSource.register(PySparkLogDataSource)  # also covers a session started before `%pip install`

# COMMAND ----------

# MAGIC %md
# MAGIC ## Produce the first events
# MAGIC
# MAGIC `order_events` makes a deterministic stream of orders changing status, and `produce` (from
# MAGIC `examples/log_to_delta.py`) appends them to a three-partition topic with `Producer.send_arrow`, the
# MAGIC producer's bulk path: keyed by order id, so each order's events stay in one partition, in order.

# COMMAND ----------

LOG_DIR = fresh_log_dir(os.path.join(BASE_DIR, "logs"))
WORK_DIR = fresh_log_dir(WORK_DIR)
BRONZE, SILVER = os.path.join(WORK_DIR, "bronze"), os.path.join(WORK_DIR, "silver")
events = order_events(ORDERS)
first = int(len(events) * FIRST_ROUND)
produce(LOG_DIR, events[:first], TOPIC)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Bronze: the topic into a Delta table
# MAGIC
# MAGIC `startingOffsets=earliest` is where the first run starts; later runs follow the checkpoint.
# MAGIC `maxOffsetsPerTrigger` bounds the size of a micro-batch, as with Kafka (here 200 records, split over the
# MAGIC partitions in proportion to their backlog).

# COMMAND ----------

BRONZE_CHECKPOINT = os.path.join(WORK_DIR, "checkpoints", "bronze")


def ingest_bronze() -> int:
    """Append the topic's new records to bronze; how many."""
    records = (
        spark.readStream.format("pysparklog")
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "200")
        .load(LOG_DIR)
    )
    query = (
        records.selectExpr(
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition", "offset", "timestamp"
        )
        .writeStream.format("delta")
        .option("checkpointLocation", BRONZE_CHECKPOINT)
        .trigger(availableNow=True)
        .start(BRONZE)
    )
    query.awaitTermination()
    return sum(progress["numInputRows"] for progress in query.recentProgress)


print(f"bronze: appended {ingest_bronze()} records")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Silver: one row per order, by `MERGE`
# MAGIC
# MAGIC A micro-batch may hold several events of one order, and a `MERGE` source must not match a target row
# MAGIC twice, so `max_by(struct(*), version)` first keeps only each order's newest event. The `MERGE` then inserts new
# MAGIC orders and updates known ones only when the event is newer (`s.version > t.version`), which makes it
# MAGIC idempotent.

# COMMAND ----------

SILVER_CHECKPOINT = os.path.join(WORK_DIR, "checkpoints", "silver")
spark.sql(
    f"CREATE TABLE IF NOT EXISTS delta.`{SILVER}` "
    f"({ORDER_SCHEMA}, `partition` INT, `offset` BIGINT, `timestamp` TIMESTAMP) USING DELTA"
)


def upsert(batch: DataFrame, batch_id: int) -> None:
    """``foreachBatch``: MERGE each order's newest event of the micro-batch into silver."""
    parsed = batch.select(F.from_json("value", ORDER_SCHEMA).alias("o"), "partition", "offset", "timestamp")
    flat = parsed.select("o.*", "partition", "offset", "timestamp")
    newest = flat.groupBy("order_id").agg(F.max_by(F.struct(*flat.columns), "version").alias("e")).select("e.*")
    newest.createOrReplaceTempView("silver_updates")
    batch.sparkSession.sql(
        f"MERGE INTO delta.`{SILVER}` t USING silver_updates s ON t.order_id = s.order_id "
        "WHEN MATCHED AND s.version > t.version THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def upsert_silver() -> int:
    """Stream bronze's new rows into silver; how many bronze rows it read."""
    query = (
        spark.readStream.format("delta")
        .load(BRONZE)
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", SILVER_CHECKPOINT)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sum(progress["numInputRows"] for progress in query.recentProgress)


print(f"silver: merged {upsert_silver()} bronze rows")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Round 2: more events, the same pipeline again
# MAGIC
# MAGIC New orders and new states of known ones arrive; both streams resume from their checkpoints and read only
# MAGIC what is new.

# COMMAND ----------

produce(LOG_DIR, events[first:], TOPIC)
appended, merged = ingest_bronze(), upsert_silver()
print(f"bronze: appended {appended} records; silver: merged {merged} bronze rows")
assert appended == merged == len(events) - first, "a restarted stream read more or less than what was new"

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC Bronze holds every record of the topic once; silver holds one row per order, its latest state; the
# MAGIC table's history shows one `MERGE` per micro-batch.

# COMMAND ----------

bronze = spark.read.format("delta").load(BRONZE)
silver = spark.read.format("delta").load(SILVER)
display(silver.orderBy("order_id"))
display(silver.groupBy("status").count().orderBy("status"))
history = spark.sql(f"DESCRIBE HISTORY delta.`{SILVER}`")
display(
    history.selectExpr(
        "version",
        "operation",
        "operationMetrics.numTargetRowsInserted AS inserted",
        "operationMetrics.numTargetRowsUpdated AS updated",
    ).orderBy("version")
)

assert bronze.count() == bronze.select("partition", "offset").distinct().count() == len(events)
expected = {order_id: (event.status, event.version) for order_id, event in latest_per_order(events).items()}
assert {row.order_id: (row.status, row.version) for row in silver.collect()} == expected
print(f"bronze: {len(events)} records; silver: {len(expected)} orders, each in its latest state")
