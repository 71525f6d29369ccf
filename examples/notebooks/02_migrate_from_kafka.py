# Databricks notebook source
# MAGIC %md
# MAGIC # Migrating a Spark job from Kafka to pysparklog
# MAGIC
# MAGIC `format("pysparklog")` is a drop-in for Spark's Kafka source and sink. Taking the examples of Spark's
# MAGIC *Structured Streaming + Kafka Integration Guide*, exactly two things change:
# MAGIC
# MAGIC * `format("kafka")` becomes `format("pysparklog")`;
# MAGIC * `.option("kafka.bootstrap.servers", "host1:port1,host2:port2")` becomes the log directory, given to
# MAGIC   `.load(path)`, `.save(path)` or `.start(path)` (or as option `path`). Leaving the servers option in is
# MAGIC   harmless: it is accepted and ignored.
# MAGIC
# MAGIC Every other option keeps its name and meaning: `subscribe`, `subscribePattern`, `assign`,
# MAGIC `startingOffsets`/`endingOffsets` with Kafka's JSON and its `-2`/`-1`, `includeHeaders`, `topic`, a
# MAGIC `topic` column, `maxOffsetsPerTrigger`... Two things Spark imposes on every Python data source, not on
# MAGIC Kafka's: a batch write needs `.mode("append")`, and (as for any sink) a stream needs `checkpointLocation`.
# MAGIC
# MAGIC One thing is better than Kafka's sink: writes are **exactly-once** by default (each micro-batch is a set
# MAGIC of Kafka transactions committed together), so a `read_committed` reader sees every row once.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import os
from collections import Counter

from pyspark.sql import functions as F

from examples.common import fresh_log_dir, order_events
from examples.migrate_from_kafka import create_topics
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `base_dir` holds the log directory (`logs/`), `work_dir` the checkpoints (empty: `base_dir`'s `work/`). On
# MAGIC Databricks give `base_dir` an object-store URL the cluster can write, such as a Unity Catalog external
# MAGIC location's cloud URL (`s3://...`, `abfss://...`, `gs://...`), not `/Volumes` or `/dbfs` (see
# MAGIC `docs/cluster.md`); `work_dir` may be on the same bucket or a volume. Empty, `base_dir` is a new temporary
# MAGIC directory, removed when the notebook's Python process ends. `records` is the number of records in each of
# MAGIC the guide's topics, `topic1` and `topic2`.

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("base_dir", "", "Base directory or object-store URL")
dbutils.widgets.text("work_dir", "", "Work directory (default: base_dir/work)")
dbutils.widgets.text("records", "20", "Records per topic")

BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-migrate-")
WORK_DIR = dbutils.widgets.get("work_dir") or os.path.join(BASE_DIR, "work")
RECORDS = int(dbutils.widgets.get("records"))
if "display" not in globals():  # outside Databricks: prints DataFrames, saves figures in WORK_DIR
    display = LocalDisplay(WORK_DIR)

# COMMAND ----------

if "spark" not in globals():  # a Databricks notebook has one; elsewhere start a local session
    from pysparklog.spark.session import local_spark

    spark = local_spark("pysparklog-notebook-migrate")
spark.dataSource.register(PySparkLogDataSource)  # also covers a session started before `%pip install`

# COMMAND ----------

# MAGIC %md
# MAGIC ## The guide's topics
# MAGIC
# MAGIC `create_topics` (from `examples/migrate_from_kafka.py`) makes the guide's `topic1` (two partitions) and
# MAGIC `topic2` with keyed records carrying a `source` header, and an `events` topic of order events (JSON, keyed
# MAGIC by order id) for the write examples.

# COMMAND ----------

LOG_DIR = fresh_log_dir(os.path.join(BASE_DIR, "logs"))
WORK_DIR = fresh_log_dir(WORK_DIR)
create_topics(LOG_DIR, RECORDS)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Streaming read: subscribe to a pattern, with headers
# MAGIC
# MAGIC The guide's version:
# MAGIC
# MAGIC ```python
# MAGIC df = spark.readStream.format("kafka") \
# MAGIC     .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
# MAGIC     .option("subscribePattern", "topic.*") \
# MAGIC     .option("includeHeaders", "true") \
# MAGIC     .load()
# MAGIC df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "headers")
# MAGIC ```
# MAGIC
# MAGIC `startingOffsets=earliest` is added because a stream starts at `latest` by default (as Kafka's does) and the
# MAGIC records are already there; `trigger(availableNow=True)` stops the query once it has read them.

# COMMAND ----------

df = (
    spark.readStream.format("pysparklog")
    .option("subscribePattern", "topic.*")
    .option("includeHeaders", "true")
    .option("startingOffsets", "earliest")
    .load(LOG_DIR)
)
query = (
    df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)", "headers")
    .writeStream.format("memory")
    .queryName("pattern_with_headers")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
pattern_rows = spark.table("pattern_with_headers")
display(pattern_rows)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Batch read with explicit offsets
# MAGIC
# MAGIC Offsets in Kafka's JSON, `-2` meaning earliest and `-1` latest (the guide's `23` is `3` here: the topics
# MAGIC are short):
# MAGIC
# MAGIC ```python
# MAGIC df = spark.read.format("kafka") \
# MAGIC     .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
# MAGIC     .option("subscribe", "topic1,topic2") \
# MAGIC     .option("startingOffsets", """{"topic1":{"0":23,"1":-2},"topic2":{"0":-2}}""") \
# MAGIC     .option("endingOffsets", """{"topic1":{"0":50,"1":-1},"topic2":{"0":-1}}""") \
# MAGIC     .load()
# MAGIC ```

# COMMAND ----------

ranged = (
    spark.read.format("pysparklog")
    .option("subscribe", "topic1,topic2")
    .option("startingOffsets", """{"topic1":{"0":3,"1":-2},"topic2":{"0":-2}}""")
    .option("endingOffsets", """{"topic1":{"0":-1,"1":-1},"topic2":{"0":-1}}""")
    .load(LOG_DIR)
)
per_partition = ranged.groupBy("topic", "partition").agg(F.min("offset").alias("from"), F.count("*").alias("records"))
display(per_partition.orderBy("topic", "partition"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Streaming write, the topic from a column
# MAGIC
# MAGIC The order events are routed to one topic per status (`orders-created`, `orders-paid`...) through a `topic`
# MAGIC column; topics that do not exist are created, as a broker with `auto.create.topics.enable` creates them.
# MAGIC
# MAGIC ```python
# MAGIC ds = df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)") \
# MAGIC     .writeStream.format("kafka") \
# MAGIC     .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
# MAGIC     .start()
# MAGIC ```
# MAGIC
# MAGIC Rows are partitioned as Kafka's producer partitions them (murmur2 of the key), and each micro-batch is
# MAGIC written exactly once: its tasks write in Kafka transactions that the driver commits together.

# COMMAND ----------

events = spark.readStream.format("pysparklog").option("subscribe", "events").option("startingOffsets", "earliest")
routed = events.load(LOG_DIR).selectExpr(
    "concat('orders-', get_json_object(CAST(value AS STRING), '$.status')) AS topic",
    "CAST(key AS STRING)",
    "CAST(value AS STRING)",
)
ds = (
    routed.writeStream.format("pysparklog")
    .option("checkpointLocation", os.path.join(WORK_DIR, "checkpoint-orders-by-status"))
    .trigger(availableNow=True)
    .start(LOG_DIR)
)
ds.awaitTermination()
print(f"wrote {sum(p['numInputRows'] for p in ds.recentProgress)} rows")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Batch write to one topic
# MAGIC
# MAGIC ```python
# MAGIC df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)") \
# MAGIC     .write.format("kafka") \
# MAGIC     .option("kafka.bootstrap.servers", "host1:port1,host2:port2") \
# MAGIC     .option("topic", "topic1") \
# MAGIC     .save()
# MAGIC ```
# MAGIC
# MAGIC Here the order events are copied, as a batch, to a new topic `orders-all`. `.mode("append")` is needed:
# MAGIC Spark refuses its default mode, `errorifexists`, for every Python data source. The whole write is one set of
# MAGIC transactions: all of it or nothing.

# COMMAND ----------

(
    spark.read.format("pysparklog")
    .option("subscribe", "events")
    .load(LOG_DIR)
    .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
    .write.format("pysparklog")
    .mode("append")
    .option("topic", "orders-all")
    .save(LOG_DIR)
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC Read what the sink wrote with `kafka.isolation.level=read_committed`, as a downstream job would: the
# MAGIC records of committed transactions only, each once. Every order event is in the topic of its status, and
# MAGIC in `orders-all`; the earlier reads saw every record of the guide's topics.

# COMMAND ----------

written = (
    spark.read.format("pysparklog")
    .option("subscribePattern", "orders-.*")
    .option("kafka.isolation.level", "read_committed")
    .load(LOG_DIR)
)
per_topic = written.groupBy("topic").count().orderBy("topic")
display(per_topic)
counts = {row.topic: row["count"] for row in per_topic.collect()}
expected = Counter(f"orders-{event.status}" for event in order_events(RECORDS))
expected["orders-all"] = expected.total()
assert counts == expected, f"read_committed sees {counts}, expected {dict(expected)}"

guide_rows = pattern_rows.collect()
assert len(guide_rows) == 2 * RECORDS and {row.topic for row in guide_rows} == {"topic1", "topic2"}
assert all([(h.key, bytes(h.value)) for h in row.headers] == [("source", b"app")] for row in guide_rows)
ranges = {(row.topic, row.partition): (row["from"], row.records) for row in per_partition.collect()}
assert ranges["topic1", 0][0] == 3 and sum(records for _, records in ranges.values()) == 2 * RECORDS - 3
