# Databricks notebook source
# MAGIC %md
# MAGIC # Analysing a Kafka broker's log directory with Spark
# MAGIC
# MAGIC A broker keeps its partitions in its log directory (`log.dirs`) in the format pysparklog uses, so a copy
# MAGIC of one (a backup, a decommissioned node's disk, a support bundle) is a pysparklog log directory: Spark
# MAGIC reads it with `spark.read.format("pysparklog")`, with no broker running and without Kafka's tools.
# MAGIC
# MAGIC The notebook looks at every partition the broker held, internal topics included (`__consumer_offsets`,
# MAGIC KRaft's `__cluster_metadata`):
# MAGIC
# MAGIC * the partitions, with their offsets, segments and bytes (the engine's view);
# MAGIC * per partition (Spark): records, offsets, time range, timestamp types;
# MAGIC * per topic (Spark): distinct keys, keyless records, key and value sizes, header keys;
# MAGIC * per partition: the compression codecs of the record batches, from the batch headers (Spark's Kafka
# MAGIC   schema has no codec column).
# MAGIC
# MAGIC The directory is copied first: reading a log that a broker did not close cleanly may rebuild its
# MAGIC indexes, and the original must stay as it is.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import json
import os

from pyspark.sql import functions as F

from examples.broker_log_analysis import PRINTABLE_KEY, batch_codecs, copy_log_dir, list_partitions
from examples.common import REPO, fresh_dir
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from pysparklog import LogDirectory
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `broker_log_dir` is the broker's log directory (or a copy of it); it is only read. Empty, it is the
# MAGIC project's fixture, a real KRaft broker's directory kept next to the repository
# MAGIC (`tests/fixtures/kafka-broker-logdir`). On Databricks, point it at where the copy is, e.g. a volume
# MAGIC (`/Volumes/...`). The notebook copies it, file by file, to `logs/` in `base_dir`, which must therefore be
# MAGIC a directory, not an object-store URL, that every node sees at the same path: the driver's local disk on a
# MAGIC single-node cluster, or a shared filesystem such as NFS (see `docs/cluster.md`). Empty, it is a new
# MAGIC temporary directory, removed when the notebook's Python process ends.
# MAGIC `include_internal`: `false` leaves out the topics Kafka's consumers do not see by default (`__...`).

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("broker_log_dir", "", "Broker log directory")
dbutils.widgets.text("base_dir", "", "Base directory")
dbutils.widgets.dropdown("include_internal", "true", ["true", "false"], "Include internal topics")

BROKER_FIXTURE = REPO / "tests" / "fixtures" / "kafka-broker-logdir"
BROKER_LOG_DIR = dbutils.widgets.get("broker_log_dir") or str(BROKER_FIXTURE)
BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-broker-")
INCLUDE_INTERNAL = dbutils.widgets.get("include_internal") == "true"
if "display" not in globals():  # outside Databricks: prints DataFrames (this notebook draws no figure)
    display = LocalDisplay(BASE_DIR)

# COMMAND ----------

if "spark" not in globals():  # a Databricks notebook has one; elsewhere start a local session
    from pysparklog.spark.session import local_spark

    spark = local_spark("pysparklog-notebook-broker-log-analysis")
spark.dataSource.register(PySparkLogDataSource)  # also covers a session started before `%pip install`

# COMMAND ----------

# MAGIC %md
# MAGIC ## The copy, and its partitions
# MAGIC
# MAGIC `copy_log_dir` copies the directory and makes the copy writable; `list_partitions` opens each
# MAGIC `<topic>-<partition>` directory with the engine, as a broker does at start-up (running Kafka's recovery on
# MAGIC a log that was not closed cleanly, and rebuilding missing indexes from the `.log` files).

# COMMAND ----------

LOG_DIR = str(copy_log_dir(BROKER_LOG_DIR, fresh_dir(os.path.join(BASE_DIR, "logs"))))
print(f"a copy of {BROKER_LOG_DIR} in {LOG_DIR}\n")
partitions = list_partitions(LOG_DIR)
if not INCLUDE_INTERNAL:
    partitions = {topic: ps for topic, ps in partitions.items() if not topic.startswith("__")}

# COMMAND ----------

# MAGIC %md
# MAGIC ## Every record, as a Spark DataFrame
# MAGIC
# MAGIC `assign` names every partition in Kafka's JSON (`{"topic": [0, 1]}`), which takes the internal topics too;
# MAGIC `subscribePattern=.*` would leave out the `__` topics, as Kafka's consumers do by default
# MAGIC (`exclude.internal.topics`). A batch read goes from the earliest to the latest offsets. As a temporary
# MAGIC view, the records can be queried with SQL too.

# COMMAND ----------

records = (
    spark.read.format("pysparklog")
    .option("assign", json.dumps(partitions))
    .option("includeHeaders", "true")
    .load(LOG_DIR)
    .cache()
)
records.createOrReplaceTempView("broker_records")
per_partition = spark.sql("""
    SELECT topic, partition, count(*) AS records, min(offset) AS first_offset, max(offset) AS last_offset,
           min(timestamp) AS oldest, max(timestamp) AS newest,
           array_sort(collect_set(timestampType)) AS timestamp_types  -- 0: CreateTime, 1: LogAppendTime
    FROM broker_records
    GROUP BY topic, partition
""")
display(per_partition.orderBy("topic", "partition"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Keys, sizes and headers per topic
# MAGIC
# MAGIC Keys are binary; for display, bytes outside printable ASCII become dots. The sizes are what a broker's
# MAGIC `max.message.bytes` and a consumer's fetch sizes see; a null value is a tombstone.

# COMMAND ----------

sizes = records.groupBy("topic").agg(
    F.countDistinct("key").alias("distinct_keys"),
    F.sum(F.col("key").isNull().cast("int")).alias("without_key"),
    F.round(F.avg(F.length("key")), 1).alias("avg_key_bytes"),
    F.round(F.avg(F.length("value")), 1).alias("avg_value_bytes"),
    F.max(F.length("value")).alias("max_value_bytes"),
    F.sum(F.col("value").isNull().cast("int")).alias("tombstones"),
)
display(sizes.orderBy("topic"))

top_keys = records.where("key IS NOT NULL").groupBy("topic", "key").count()
ranked = top_keys.selectExpr(
    "topic", f"{PRINTABLE_KEY} AS key", "count", "row_number() OVER (PARTITION BY topic ORDER BY count DESC) AS rank"
)
display(ranked.where("rank <= 3").orderBy("topic", "rank"))

headers = records.select("topic", F.explode("headers").alias("header"))  # a record without headers has null
header_keys = headers.groupBy("topic", "header.key").count().orderBy("topic", "key")
if header_keys.isEmpty():
    print("no record has headers")
else:
    display(header_keys)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Compression codecs of the record batches
# MAGIC
# MAGIC A consumer decompresses transparently, so the codec is not a column; `batch_codecs` reads each batch's
# MAGIC attributes from the segments with the engine (the codec is their low three bits).

# COMMAND ----------

codecs = batch_codecs(LOG_DIR)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC Spark read every record the engine finds in each partition. The count is not simply `log end - log start`:
# MAGIC compaction leaves gaps in the offsets, and control records (transaction markers, KRaft's leader changes)
# MAGIC take offsets but are never returned to consumers. On the project's fixture the counts are the ones its
# MAGIC README states, less the one control record of `__cluster_metadata-0`.

# COMMAND ----------

spark_counts = {f"{row.topic}-{row.partition}": row.records for row in per_partition.collect()}
engine_counts = {}
logs = LogDirectory(LOG_DIR)
for topic, numbers in partitions.items():
    for number in numbers:
        with logs.partition(topic, number) as log:
            engine_counts[f"{topic}-{number}"] = sum(batch.num_rows for batch in log.read_arrow())
print(json.dumps(spark_counts, indent=2, sort_keys=True))
assert spark_counts == {name: count for name, count in engine_counts.items() if count}, "Spark and the engine differ"
if os.path.basename(os.path.normpath(BROKER_LOG_DIR)) == "kafka-broker-logdir" and INCLUDE_INTERNAL:
    # __cluster_metadata-0 holds 4929 records, offsets 0-4928; offset 0 is a control record (KRaft's LeaderChange),
    # which consumers, Spark's Kafka source included, never return.
    assert spark_counts == {"TestTopicPatient-0": 3, "__consumer_offsets-6": 13, "__cluster_metadata-0": 4928}
    assert set(codecs) == set(spark_counts)
