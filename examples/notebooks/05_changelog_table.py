# Databricks notebook source
# MAGIC %md
# MAGIC # A compacted topic as a changelog table
# MAGIC
# MAGIC A Kafka topic with `cleanup.policy=compact` keeps at least the last record of every key, so reading it
# MAGIC from the start rebuilds the latest state of a table: Kafka Streams' changelogs, `__consumer_offsets` and
# MAGIC CDC topics work this way. A record with a null value (a **tombstone**) deletes its key.
# MAGIC
# MAGIC pysparklog applies Kafka's log cleaner rules to its log directory; nothing runs in the background, so the
# MAGIC cleaner runs when asked (`pysparklog log-cleaner --once`, or `run_cleaner` from Python, as here):
# MAGIC
# MAGIC 1. a compacted topic, with small segments so that the log has several (the active one is never cleaned);
# MAGIC 2. rounds of user-profile updates, with tombstones deleting some users;
# MAGIC 3. the table in Spark: the last record of each key, tombstones removing theirs;
# MAGIC 4. one pass of the log cleaner: older records of each key go, offsets do not change, and the table read
# MAGIC    from the smaller log is the same.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from examples.changelog_table import (
    CONFIGS,
    compact,
    create_topic,
    expected_table,
    log_stats,
    produce_updates,
    user_updates,
)
from examples.common import fresh_log_dir
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `base_dir` holds the log directory (`logs/`). On Databricks give it an object-store URL the cluster can
# MAGIC write, such as a Unity Catalog external location's cloud URL (`s3://...`, `abfss://...`, `gs://...`), not
# MAGIC `/Volumes` or `/dbfs` (see `docs/cluster.md`). Empty, it is a new temporary directory
# MAGIC (removed when the notebook's Python process ends). `users` profiles are rewritten `rounds` times.

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("base_dir", "", "Base directory or object-store URL")
dbutils.widgets.text("users", "200", "Users")
dbutils.widgets.text("rounds", "40", "Rounds of updates")

BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-changelog-")
USERS = int(dbutils.widgets.get("users"))
ROUNDS = int(dbutils.widgets.get("rounds"))  # every live user's profile is rewritten each round
TOPIC = "users"  # the topic of examples/changelog_table.py
if "display" not in globals():  # outside Databricks: prints DataFrames (this notebook draws no figure)
    display = LocalDisplay(BASE_DIR)

# COMMAND ----------

if "spark" not in globals():  # a Databricks notebook has one; elsewhere start a local session
    from pysparklog.spark.session import local_spark

    spark = local_spark("pysparklog-notebook-changelog-table")
spark.dataSource.register(PySparkLogDataSource)  # also covers a session started before `%pip install`

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. The compacted topic, and the updates
# MAGIC
# MAGIC `create_topic` is `pysparklog topics --create --topic users --partitions 1 --config cleanup.policy=compact
# MAGIC ...`, with the configs below: 1 MiB segments (the smallest Kafka allows) and a `min.cleanable.dirty.ratio`
# MAGIC low enough for the cleaner to find the log due at once. `produce_updates` appends each round with the
# MAGIC producer's `send_arrow`; users ending in 7 are deleted halfway through, those ending in 3 in the last round.

# COMMAND ----------

LOG_DIR = fresh_log_dir(os.path.join(BASE_DIR, "logs"))
print(CONFIGS)
create_topic(LOG_DIR)
changes = user_updates(USERS, ROUNDS)
produced = produce_updates(LOG_DIR, changes)
before = log_stats(LOG_DIR)
print(f"produced {produced:,} changes: {before}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. The table, in Spark
# MAGIC
# MAGIC A batch read of the whole topic, then each key's last record: `max_by(value, offset)` (a key always goes
# MAGIC to the same partition, so offsets order its records). A tombstone's value is null: its key is left out.
# MAGIC The profile is JSON in the record's value.

# COMMAND ----------

PROFILE_SCHEMA = "user STRING, email STRING, round INT"


def changelog_table() -> DataFrame:
    """The table the topic describes: each key's latest value, unless it is a tombstone."""
    records = spark.read.format("pysparklog").option("subscribe", TOPIC).load(LOG_DIR)
    latest = records.groupBy("key").agg(F.max_by("value", "offset").alias("value"), F.max("offset").alias("offset"))
    profile = F.from_json(F.col("value").cast("string"), PROFILE_SCHEMA)
    return latest.where("value IS NOT NULL").select(profile.alias("p"), "offset").select("p.user", "p.round", "offset")


table_before = {row.user: row["round"] for row in changelog_table().collect()}
print(f"{len(table_before)} users in the table, from {before.records:,} records")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. One pass of the log cleaner
# MAGIC
# MAGIC `compact` runs `pysparklog.storage.cleaner.run_cleaner(log_dir, "users")`, what
# MAGIC `pysparklog log-cleaner --once --topic users` runs, and prints what it did. Segments are rewritten
# MAGIC crash-safely while readers and writers go on; the tombstones stay `delete.retention.ms` (a day by default)
# MAGIC so that a consumer reading the changelog sees the deletions, and so does everything in the active segment.

# COMMAND ----------

compact(LOG_DIR)
after = log_stats(LOG_DIR)
print(f"before: {before}\nafter:  {after}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC The compacted log is smaller, keeps its offsets (the log end offset is unchanged), and describes the same
# MAGIC table: each live user's latest profile, the deleted users absent.

# COMMAND ----------

table = changelog_table()
display(table.orderBy("user"))
table_after = {row.user: row["round"] for row in table.collect()}
expected = expected_table(changes)
assert table_before == expected, "the table read before compaction is not the latest state"
assert table_after == expected, "the table read after compaction is not the latest state"
assert after.records < before.records and after.bytes < before.bytes, "the cleaner removed nothing"
assert after.log_end_offset == before.log_end_offset
print(f"{len(expected)} users; the log went from {before.records:,} to {after.records:,} records")
