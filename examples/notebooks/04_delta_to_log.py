# Databricks notebook source
# MAGIC %md
# MAGIC # From Delta Lake to the log: a table's change feed as a topic
# MAGIC
# MAGIC Change data capture the way Debezium does it for a database, here for a Delta table: every insert,
# MAGIC update and delete becomes a record on a topic that any number of consumers can replay. Kafka would carry
# MAGIC the topic; here a pysparklog log directory does, written by Spark's Kafka sink API:
# MAGIC
# MAGIC * the table has `delta.enableChangeDataFeed = true`, so each commit also records its row changes;
# MAGIC * `spark.readStream.format("delta").option("readChangeFeed", "true")` streams them with `_change_type`
# MAGIC   (`insert`, `update_preimage`, `update_postimage`, `delete`), `_commit_version` and `_commit_timestamp`;
# MAGIC * `writeStream.format("pysparklog")` publishes them **exactly once** (each micro-batch is a set of Kafka
# MAGIC   transactions committed together): key = the table's key, value = the row as JSON, headers
# MAGIC   `change_type` and `commit_version`;
# MAGIC * a `read_committed` batch read of the topic rebuilds the table.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import os

from pyspark.sql import functions as F

from examples.common import fresh_log_dir
from examples.delta_to_log import NEW_IN_ROUND_2, SCHEMA, create_table, first_changes, more_changes
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from pysparklog import LogDirectory
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `base_dir` holds the log directory (`logs/`), `work_dir` the Delta table and the checkpoint (empty:
# MAGIC `base_dir`'s `work/`). On Databricks give `base_dir` an object-store URL the cluster can write, such as a
# MAGIC Unity Catalog external location's cloud URL (`s3://...`, `abfss://...`, `gs://...`), not `/Volumes` or
# MAGIC `/dbfs` (see `docs/cluster.md`); the table can be anywhere Delta writes: the same bucket, or a volume.
# MAGIC Empty, `base_dir` is a new temporary directory, removed when the notebook's Python process ends.
# MAGIC `customers` is the number of rows the first commit inserts.

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("base_dir", "", "Base directory or object-store URL")
dbutils.widgets.text("work_dir", "", "Table and checkpoint (default: base_dir/work)")
dbutils.widgets.text("customers", "20", "Customers")

BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-delta-to-log-")
WORK_DIR = dbutils.widgets.get("work_dir") or os.path.join(BASE_DIR, "work")
CUSTOMERS = int(dbutils.widgets.get("customers"))
TOPIC = "customers.changes"
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

    # Delta's snapshots on 2 partitions, not 50: the table here is tiny.
    spark = local_spark(
        "pysparklog-notebook-delta-to-log", delta=True, conf={"spark.databricks.delta.snapshotPartitions": "2"}
    )
spark.dataSource.register(PySparkLogDataSource)  # also covers a session started before `%pip install`

# COMMAND ----------

# MAGIC %md
# MAGIC ## A Delta table with its change data feed
# MAGIC
# MAGIC `create_table` and `first_changes` (from `examples/delta_to_log.py`) run plain Delta SQL:
# MAGIC `CREATE TABLE ... TBLPROPERTIES (delta.enableChangeDataFeed = true)`, then three commits: insert the
# MAGIC customers, `UPDATE` every third to tier `gold`, `DELETE` every fifth.

# COMMAND ----------

LOG_DIR = fresh_log_dir(os.path.join(BASE_DIR, "logs"))
WORK_DIR = fresh_log_dir(WORK_DIR)
TABLE = os.path.join(WORK_DIR, "customers")
create_table(spark, TABLE)
first_changes(spark, TABLE, CUSTOMERS)
display(spark.sql(f"DESCRIBE HISTORY delta.`{TABLE}`").select("version", "operation").orderBy("version"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Publish the change feed to a topic
# MAGIC
# MAGIC The sink takes Spark's Kafka sink columns: `key`, `value` and `headers`
# MAGIC (`array<struct<key: string, value: binary>>`). Pre-images of updates are left out: the post-image is the
# MAGIC new state. `startingVersion=0` publishes the whole history; the checkpoint makes a later run publish only
# MAGIC the commits made since.

# COMMAND ----------

LogDirectory(LOG_DIR).topics.create(TOPIC, 2, if_not_exists=True)
CHECKPOINT = os.path.join(WORK_DIR, "checkpoints", "publish")


def publish_changes() -> int:
    """Publish the table's changes not published yet; how many change rows the query read (pre-images too)."""
    changes = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", "0")
        .load(TABLE)
        .where("_change_type != 'update_preimage'")
    )
    records = changes.selectExpr(
        "CAST(id AS STRING) AS key",
        "to_json(struct(id, name, tier, balance_cents, _change_type)) AS value",
        "array(named_struct('key', 'change_type', 'value', CAST(_change_type AS BINARY)),"
        " named_struct('key', 'commit_version', 'value', CAST(CAST(_commit_version AS STRING) AS BINARY)))"
        " AS headers",
    )
    query = (
        records.writeStream.format("pysparklog")  # was: format("kafka")
        .option("topic", TOPIC)
        .option("checkpointLocation", CHECKPOINT)
        .trigger(availableNow=True)
        .start(LOG_DIR)  # was: .option("kafka.bootstrap.servers", ...).start()
    )
    query.awaitTermination()
    return sum(progress["numInputRows"] for progress in query.recentProgress)


print(f"read {publish_changes()} change rows")

# COMMAND ----------

# MAGIC %md
# MAGIC ## More changes; the restarted query publishes only those
# MAGIC
# MAGIC `more_changes` is one `MERGE` commit: new customers, and a new name for customer 1.

# COMMAND ----------

more_changes(spark, TABLE, CUSTOMERS)
print(f"read {publish_changes()} more change rows")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Read the topic back and rebuild the table
# MAGIC
# MAGIC `kafka.isolation.level=read_committed` reads only what committed micro-batches wrote, as a Kafka consumer
# MAGIC of a transactional producer's topic should. A key's changes are ordered by their commit version (offsets
# MAGIC only order what one task of one micro-batch wrote); the latest one wins, and a delete removes the key.

# COMMAND ----------

topic = (
    spark.read.format("pysparklog")
    .option("subscribe", TOPIC)
    .option("includeHeaders", "true")
    .option("kafka.isolation.level", "read_committed")
    .load(LOG_DIR)
)
changes = topic.select(
    F.col("key").cast("string").alias("key"),
    F.col("value").cast("string").alias("value"),
    F.map_from_entries("headers").alias("h"),
    "offset",
).select(
    "key",
    "value",
    F.col("h")["change_type"].cast("string").alias("change_type"),
    F.col("h")["commit_version"].cast("string").cast("bigint").alias("commit_version"),
    "offset",
)
per_commit = changes.groupBy("commit_version", "change_type").count().orderBy("commit_version", "change_type")
display(per_commit)

latest = changes.groupBy("key").agg(
    F.max_by(F.struct("change_type", "value"), F.struct("commit_version", "offset")).alias("last")
)
rebuilt = latest.where("last.change_type != 'delete'").select(F.from_json("last.value", SCHEMA).alias("row"))
rebuilt = rebuilt.select("row.*")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC The topic holds every change of the feed once (pre-images left out), the second run published only the
# MAGIC `MERGE`'s changes (the new customers and one update), and the table rebuilt from the topic equals the
# MAGIC Delta table.

# COMMAND ----------

feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", "0").load(TABLE)
feed_changes = feed.where("_change_type != 'update_preimage'").count()
records = {(row.commit_version, row.change_type): row["count"] for row in per_commit.collect()}
assert sum(records.values()) == feed_changes, f"the topic has {records}, the feed {feed_changes} changes"
latest_commit = spark.sql(f"DESCRIBE HISTORY delta.`{TABLE}` LIMIT 1").first()
assert latest_commit is not None
merge_version = latest_commit.version
assert records[merge_version, "insert"] == NEW_IN_ROUND_2 and records[merge_version, "update_postimage"] == 1

display(rebuilt.orderBy("id"))
current_rows = sorted(spark.read.format("delta").load(TABLE).select(*rebuilt.columns).collect())
assert sorted(rebuilt.collect()) == current_rows, "the table rebuilt from the topic differs from the Delta table"
print(f"{feed_changes} changes published once each; the topic rebuilds the table's {len(current_rows)} rows")
