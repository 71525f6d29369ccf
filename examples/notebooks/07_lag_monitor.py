# Databricks notebook source
# MAGIC %md
# MAGIC # Consumer lag: a consumer group, then a Spark query, watched and plotted
# MAGIC
# MAGIC Lag is what a Kafka operator watches first: how far a consumer group's committed offsets are behind the
# MAGIC log end offsets. pysparklog keeps committed offsets where a broker keeps them, in the log directory's
# MAGIC `__consumer_offsets` topic, and `OffsetStore.lag(group, partitions)` gives the numbers
# MAGIC `kafka-consumer-groups.sh --describe` (and `pysparklog consumer-groups --describe`) print.
# MAGIC
# MAGIC 1. **A consumer group**: a producer thread writes order events faster than a consumer thread (a member of
# MAGIC    group `dashboard`, Kafka's consumer API) processes them, so the lag rises, then falls to 0 once the
# MAGIC    producer stops. The notebook samples the group's lag meanwhile.
# MAGIC 2. **A Spark query as a consumer group**: `readStream.format("pysparklog")` with option `group.id` commits
# MAGIC    each micro-batch's end offsets to the same place, so the same tools show its lag; and
# MAGIC    `OffsetsBehindLatestListener` reports Kafka's `offsetsBehindLatest` metrics (min, max, avg over the
# MAGIC    partitions) from each progress of the query, as Spark's Kafka source reports them.
# MAGIC
# MAGIC Both are plotted with matplotlib and shown with `display`.

# COMMAND ----------

# MAGIC %pip install pysparklog

# COMMAND ----------

if "dbutils" in globals():  # on Databricks: restart Python, so that the notebook imports what %pip installed
    dbutils.library.restartPython()  # type: ignore[has-type,used-before-def]  # noqa: F821

# COMMAND ----------

import os
import time

import matplotlib.pyplot as plt

from examples.common import fresh_log_dir
from examples.lag_monitor import GROUP, PARTITIONS, TOPIC, create_topic, describe_group, monitor
from examples.notebook_shims import LocalDbutils, LocalDisplay, temporary_base_dir
from pysparklog import OffsetStore, TopicPartition
from pysparklog.datasource_v2 import PySparkLogDataSource
from pysparklog.spark.lag import OffsetsBehindLatest, OffsetsBehindLatestListener

# COMMAND ----------

# MAGIC %md
# MAGIC ## Parameters
# MAGIC
# MAGIC `base_dir` holds the log directory (`logs/`), `work_dir` the Spark checkpoint (empty: `base_dir`'s `work/`;
# MAGIC outside Databricks, `display` saves the plot there as a PNG). On Databricks give `base_dir` an object-store
# MAGIC URL the cluster can write, such as a Unity Catalog external location's cloud URL (`s3://...`,
# MAGIC `abfss://...`, `gs://...`), not `/Volumes` or `/dbfs` (see `docs/cluster.md`); `work_dir` may be on the same
# MAGIC bucket or a volume. Empty, `base_dir` is a new temporary directory, removed when the
# MAGIC notebook's Python process ends. The rates (records per second) make the consumer half as fast as the producer.

# COMMAND ----------

if "dbutils" not in globals():  # outside Databricks: widgets with their defaults or PYSPARKLOG_WIDGET_<NAME>
    dbutils = LocalDbutils()
dbutils.widgets.text("base_dir", "", "Base directory or object-store URL")
dbutils.widgets.text("work_dir", "", "Work directory (default: base_dir/work)")
dbutils.widgets.text("produce_rate", "400", "Producer records/s")
dbutils.widgets.text("consume_rate", "200", "Consumer records/s")
dbutils.widgets.text("produce_seconds", "3", "Producer seconds")

BASE_DIR = dbutils.widgets.get("base_dir") or temporary_base_dir("pysparklog-lag-")
WORK_DIR = dbutils.widgets.get("work_dir") or os.path.join(BASE_DIR, "work")
PRODUCE_RATE = float(dbutils.widgets.get("produce_rate"))
CONSUME_RATE = float(dbutils.widgets.get("consume_rate"))
PRODUCE_SECONDS = float(dbutils.widgets.get("produce_seconds"))
INTERVAL = 0.25  # seconds between lag samples
SPARK_GROUP = "spark-dashboard"
MAX_OFFSETS_PER_TRIGGER = 250  # records per micro-batch, over all partitions
if "display" not in globals():  # outside Databricks: prints DataFrames, saves figures in WORK_DIR
    display = LocalDisplay(WORK_DIR)

# COMMAND ----------

if "spark" not in globals():  # a Databricks notebook has one; elsewhere start a local session
    from pysparklog.spark.session import local_spark

    spark = local_spark("pysparklog-notebook-lag-monitor")
spark.dataSource.register(PySparkLogDataSource)  # also covers a session started before `%pip install`

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. A producer outpacing a consumer group
# MAGIC
# MAGIC `monitor` (from `examples/lag_monitor.py`) runs the producer (`Producer.send`, flushed every 50 ms) and the
# MAGIC consumer (`Consumer.poll_arrow`, a sleep per record as its "processing", `commit` after each poll) in
# MAGIC threads, and samples `OffsetStore.lag` every `INTERVAL` seconds until the producer has stopped and the group
# MAGIC has caught up. Then the group as `pysparklog consumer-groups --describe --group dashboard` shows it.

# COMMAND ----------

LOG_DIR = fresh_log_dir(os.path.join(BASE_DIR, "logs"))
WORK_DIR = fresh_log_dir(WORK_DIR)
create_topic(LOG_DIR)
samples, production_ended = monitor(LOG_DIR, PRODUCE_RATE, PRODUCE_SECONDS, CONSUME_RATE, INTERVAL)
describe_group(LOG_DIR)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. A Spark query as a consumer group
# MAGIC
# MAGIC The query reads the same topic from the start in micro-batches of at most `MAX_OFFSETS_PER_TRIGGER` records
# MAGIC (`maxOffsetsPerTrigger`, split over the partitions in proportion to their backlog, as Kafka's source splits
# MAGIC it). `group.id` makes every committed micro-batch commit its end offsets to the group (Spark's Kafka source
# MAGIC only names its consumer with it). The listener hears each progress event: events arrive asynchronously,
# MAGIC so the cell waits for the last one. `driverReadMaxOffsets=0` has tasks read every micro-batch: PySpark asks a
# MAGIC source for its latest offsets, which the listener compares with each micro-batch's end, only then.

# COMMAND ----------

behind: list[OffsetsBehindLatest] = []  # offsetsBehindLatest of each micro-batch, in order
listener = OffsetsBehindLatestListener(lambda query_id, source, metrics: behind.append(metrics))
spark.streams.addListener(listener)
try:
    query = (
        spark.readStream.format("pysparklog")
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
        .option("group.id", SPARK_GROUP)
        .option("driverReadMaxOffsets", "0")
        .load(LOG_DIR)
        .writeStream.format("noop")  # a real job would write somewhere; the reading is what is watched here
        .option("checkpointLocation", os.path.join(WORK_DIR, "checkpoint-spark-dashboard"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    deadline = time.monotonic() + 30
    while len(behind) < len(query.recentProgress) and time.monotonic() < deadline:
        time.sleep(0.1)
finally:
    spark.streams.removeListener(listener)
for batch, metrics in enumerate(behind):
    print(f"micro-batch {batch}: offsets behind latest min {metrics.min}, max {metrics.max}, avg {metrics.avg:.1f}")

with OffsetStore(LOG_DIR) as offsets:
    spark_lag = offsets.lag(SPARK_GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
for position in spark_lag:
    print(f"{SPARK_GROUP} {position.partition}: committed {position.committed}, lag {position.lag}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## The plot
# MAGIC
# MAGIC Top: the `dashboard` group's total lag over time, with the producer's end marked. Bottom: how far each of
# MAGIC the Spark query's micro-batches left it behind the latest offsets. `display(figure)` shows it in the
# MAGIC notebook on Databricks; elsewhere it saves it as a PNG in the work directory.

# COMMAND ----------

figure, (group_axes, spark_axes) = plt.subplots(2, 1, figsize=(8, 6))
group_axes.plot([s.seconds for s in samples], [s.lag for s in samples], marker=".", color="tab:red")
if production_ended is not None:
    group_axes.axvline(production_ended, color="grey", linestyle="--", label="producer stops")
    group_axes.legend(loc="upper right")
group_axes.set(title=f"consumer group {GROUP!r}", xlabel="seconds", ylabel="records behind (lag)")
batches = range(len(behind))
spark_axes.plot(batches, [m.max for m in behind], marker="o", label="max over partitions")
spark_axes.plot(batches, [m.avg for m in behind], marker=".", label="avg")
spark_axes.set(title=f"Spark query, group {SPARK_GROUP!r}", xlabel="micro-batch", ylabel="offsets behind latest")
spark_axes.set_xticks(list(batches))
spark_axes.legend(loc="upper right")
for axes in (group_axes, spark_axes):
    axes.grid(alpha=0.3)
figure.tight_layout()
display(figure)
plt.close(figure)  # shown once: a notebook front end would also render a figure left open at the cell's end

# COMMAND ----------

# MAGIC %md
# MAGIC ## Result
# MAGIC
# MAGIC The group's lag rose while the producer outpaced it and ended at 0; the Spark query caught up micro-batch
# MAGIC by micro-batch (its last one 0 behind) and its group's committed offsets are the log end offsets.

# COMMAND ----------

peak = max(samples, key=lambda s: s.lag)
print(f"{GROUP}: {len(samples)} samples, peak lag {peak.lag} at {peak.seconds} s, final lag {samples[-1].lag}")
print(f"{SPARK_GROUP}: {len(behind)} micro-batches, behind latest {[m.max for m in behind]}")
assert peak.lag > 0 and samples[-1].lag == 0, "the group's lag should rise, then fall to 0"
assert len(behind) > 1 and behind[-1].max == 0, "the Spark query should catch up in several micro-batches"
assert all(p.lag == 0 for p in spark_lag), "the Spark query's group should have committed the log end offsets"
