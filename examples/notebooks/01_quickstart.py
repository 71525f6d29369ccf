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

import os
import tempfile

from pyspark.sql import functions as F

from examples.common import ORDER_SCHEMA, fresh_dir
from examples.quickstart import create_topic, produce_orders
from pysparklog.datasource_v2 import PySparkLogDataSource

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `BASE_DIR` holds the log directory (`logs/`) and the query's checkpoint (`work/`). On Databricks, point it
# MAGIC at a path that every node mounts read-write with working file locks, such as an NFS share; Unity Catalog
# MAGIC volumes (`/Volumes/...`) and `/dbfs` cannot take appends (see `docs/cluster.md`). Locally it is a new
# MAGIC temporary directory. The notebook empties `logs/` and `work/` first if an earlier run of an example made
# MAGIC them, and refuses to touch a non-empty directory it did not make.

# COMMAND ----------

BASE_DIR = os.environ.get("PYSPARKLOG_NOTEBOOK_DIR") or tempfile.mkdtemp(prefix="pysparklog-quickstart-")
TOPIC = "orders"
ORDERS = 12  # orders to produce events for (one to four events each)

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
# MAGIC `create_topic` (from `examples/quickstart.py`) calls `LogDirectory(log_dir).topics.create("orders", 3,
# MAGIC {"compression.type": "zstd"})`: three partitions, and a topic config applied to every batch the log
# MAGIC receives, as a broker applies it. Each partition is a directory of the log directory.

# COMMAND ----------

LOG_DIR = str(fresh_dir(os.path.join(BASE_DIR, "logs")))
WORK_DIR = str(fresh_dir(os.path.join(BASE_DIR, "work")))
create_topic(LOG_DIR, TOPIC, partitions=3)
print(sorted(name for name in os.listdir(LOG_DIR) if name.startswith(TOPIC)))

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
per_partition.orderBy("partition").show()

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
streamed.orderBy("partition", "offset").show(50, truncate=False)
where = sorted((row.partition, row.offset) for row in streamed.select("partition", "offset").collect())
assert where == sorted((m.partition, m.offset) for m in metadata), "the stream did not read what was produced"
print(f"streamed {len(where)} of {len(metadata)} records")
