# Databricks notebook source
# MAGIC %md
# MAGIC # Quickstart: a Kafka topic without a broker
# MAGIC
# MAGIC pysparklog keeps topics the way a Kafka broker keeps them on disk, in a **log directory** (Kafka's
# MAGIC `log.dirs`): one directory per partition (`orders-0`, `orders-1`...) holding `.log`, `.index` and
# MAGIC `.timeindex` segment files in Kafka's own format. There is no broker: whoever can reach the directory
# MAGIC appends and reads, and Spark is the compute.
# MAGIC
# MAGIC This notebook does what a first Kafka tutorial does, with the log directory in the broker's place:
# MAGIC
# MAGIC | Step | Kafka | pysparklog |
# MAGIC | --- | --- | --- |
# MAGIC | create a topic | `kafka-topics.sh --create` | `LogDirectory(path).topics.create(...)` |
# MAGIC | produce | `KafkaProducer.send` | `Producer.send`: same partitioning, batching, configs |
# MAGIC | read with Spark | `format("kafka")`, `kafka.bootstrap.servers` | `format("pysparklog")`, `.load(log_dir)` |
# MAGIC
# MAGIC The events are orders changing status (`created`, `paid`, `shipped`, `delivered`), keyed by order id.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import os

from pyspark.sql import functions as F

from examples.common import ORDER_SCHEMA, fresh_log_dir
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from examples.quickstart import create_topic, produce_orders
from pysparklog import LogDirectory
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC The widgets at the top of the notebook:
# MAGIC
# MAGIC * `base_dir` holds the log directory (`logs/`). On Databricks give it an object-store URL that the cluster
# MAGIC   can write, such as the cloud URL of a Unity Catalog external location (`s3://bucket/prefix`,
# MAGIC   `abfss://container@account.dfs.core.windows.net/prefix`, `gs://bucket/prefix`): every node reaches the log
# MAGIC   there without a shared filesystem. Not `/Volumes/...` or `/dbfs/...`, which cannot take appends (see
# MAGIC   `docs/cluster.md`). Empty, it is a new temporary directory on the driver, which only a single-node
# MAGIC   cluster (or a laptop) can use, removed when the notebook's Python process ends.
# MAGIC * `work_dir` holds the query's checkpoint; empty, it is `base_dir`'s `work/`. It may be a volume
# MAGIC   (`/Volumes/catalog/schema/volume/...`) or on the logs' bucket.
# MAGIC * `orders`: how many orders to produce events for (one to four events each), and `partitions`: the topic's.
# MAGIC
# MAGIC The notebook empties `logs/` and the work directory first if an earlier run of an example made them, and
# MAGIC refuses to touch a non-empty one it did not make. Outside Databricks, `dbutils` and `display` are stand-ins
# MAGIC (`examples/notebook_shims.py`): a widget takes its default, or the environment variable
# MAGIC `PYSPARKLOG_WIDGET_<NAME>` (`PYSPARKLOG_WIDGET_BASE_DIR`...).

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("base_dir", "", "Base directory or object-store URL")
dbutils.widgets.text("work_dir", "", "Work directory (default: base_dir/work)")
dbutils.widgets.text("orders", "12", "Orders")
dbutils.widgets.dropdown("partitions", "3", ["1", "2", "3", "6"], "Partitions")

BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-quickstart-")
WORK_DIR = dbutils.widgets.get("work_dir") or os.path.join(BASE_DIR, "work")
ORDERS = int(dbutils.widgets.get("orders"))
PARTITIONS = int(dbutils.widgets.get("partitions"))
TOPIC = "orders"
if "display" not in globals():  # outside Databricks: prints DataFrames, saves figures in WORK_DIR
    display = LocalDisplay(WORK_DIR)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Spark
# MAGIC
# MAGIC A Databricks notebook already has `spark`; elsewhere the cell starts a local session. Installing the
# MAGIC package is enough for Spark to find `format("pysparklog")`; registering the data source by hand, as the
# MAGIC cell does, also covers a session that started before the package was installed (`%pip install`).

# COMMAND ----------

if "spark" not in globals():
    from pysparklog.spark.session import local_spark

    spark = local_spark("pysparklog-notebook-quickstart")
spark.dataSource.register(PySparkLogDataSource)
print(f"Spark {spark.version}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. Create a topic
# MAGIC
# MAGIC `create_topic` (from `examples/quickstart.py`) calls `LogDirectory(log_dir).topics.create("orders",
# MAGIC partitions, {"compression.type": "zstd"})`: the partitions, and a topic config applied to every batch the
# MAGIC log receives, as a broker applies it. Each partition is a directory of the log directory (a prefix, on an
# MAGIC object store).

# COMMAND ----------

LOG_DIR = fresh_log_dir(os.path.join(BASE_DIR, "logs"))
WORK_DIR = fresh_log_dir(WORK_DIR)
create_topic(LOG_DIR, TOPIC, PARTITIONS)
print(LogDirectory(LOG_DIR).topics.get(TOPIC))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Produce order events
# MAGIC
# MAGIC `produce_orders` sends each event with `Producer.send(topic, value, key=order_id)`, Kafka's producer API:
# MAGIC `send` returns a future, records are batched per partition (`linger.ms`) and appended by a background
# MAGIC thread, and a keyed record goes to the partition Kafka's Java producer would choose (murmur2 of the key),
# MAGIC so all events of an order land in one partition, in order. Each future's `RecordMetadata` says where.

# COMMAND ----------

metadata = produce_orders(LOG_DIR, ORDERS, TOPIC)
print(f"{len(metadata)} records produced")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. Read the topic with Spark, as a batch
# MAGIC
# MAGIC `spark.read.format("pysparklog")` is Spark's Kafka source with the log directory given to `load`: the same
# MAGIC columns (`key`, `value` as binary, `topic`, `partition`, `offset`, `timestamp`, `timestampType`) and options.
# MAGIC A batch read defaults to the earliest and latest offsets, as Kafka's does. The value is the order as JSON;
# MAGIC each partition holds whole orders, since an order's events share a key.

# COMMAND ----------

records = (
    spark.read.format("pysparklog")  # was: format("kafka")
    .option("subscribe", TOPIC)
    .load(LOG_DIR)  # was: .option("kafka.bootstrap.servers", "host:9092")
)
orders = records.select(
    "partition", "offset", F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("order")
).select("partition", "offset", "order.*")
per_partition = orders.groupBy("partition").agg(
    F.count("*").alias("records"), F.max("offset").alias("last_offset"), F.countDistinct("order_id").alias("orders")
)
display(per_partition.orderBy("partition"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. Stream it
# MAGIC
# MAGIC The same source as a stream. `startingOffsets=earliest` reads what is already there (a stream starts at
# MAGIC `latest` by default, as with Kafka). `trigger(availableNow=True)` reads everything the topic holds when the
# MAGIC query starts, in micro-batches, then stops: the way to run a stream as a job. The memory sink keeps the
# MAGIC rows in a table named after the query, for the next cell; a real pipeline would write a Delta table
# MAGIC (see `03_log_to_delta`).

# COMMAND ----------

stream = (
    spark.readStream.format("pysparklog")
    .option("subscribe", TOPIC)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "10")  # micro-batches of at most 10 records, split over the partitions
    .load(LOG_DIR)
)
query = (
    stream.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")
    .writeStream.format("memory")
    .queryName("quickstart_orders")
    .option("checkpointLocation", os.path.join(WORK_DIR, "checkpoint"))
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
batches = [(p["batchId"], p["numInputRows"]) for p in query.recentProgress]
print(f"micro-batches (id, rows): {batches}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC The stream read every produced record once, at the partition and offset the producer reported.

# COMMAND ----------

streamed = spark.table("quickstart_orders")
display(streamed.orderBy("partition", "offset"))
where = sorted((row.partition, row.offset) for row in streamed.select("partition", "offset").collect())
assert where == sorted((m.partition, m.offset) for m in metadata), "the stream did not read what was produced"
print(f"streamed {len(where)} of {len(metadata)} records")
