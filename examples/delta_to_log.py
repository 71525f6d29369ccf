"""From Delta Lake to the log: a Delta table's change data feed published as a topic, then read back.

The CDC pattern (Debezium's, for a Delta table): every insert, update and delete of a table becomes a record
that any number of consumers can replay, here on a pysparklog topic instead of a Kafka cluster:

* the table has ``delta.enableChangeDataFeed = true``, so each commit also records its row changes;
* ``readStream.format("delta").option("readChangeFeed", "true")`` streams them, with ``_change_type``
  (``insert``, ``update_preimage``, ``update_postimage``, ``delete``), ``_commit_version`` and
  ``_commit_timestamp``; pre-images are left out (the post-image is the new state);
* ``writeStream.format("pysparklog")`` publishes them, exactly once: key = the table's key, value = the row
  as JSON with its ``_change_type``, headers ``change_type`` and ``commit_version``;
* a batch read of the topic rebuilds the table: the latest change of each key, a delete removing it. The
  commit version orders a key's changes: offsets order only what one task of one micro-batch wrote.

The publishing query runs twice, with more table changes in between, to show that a restart from its
checkpoint publishes only the new commits.

Run it from the checkout (about half a minute; the first run downloads Delta's jars)::

    .venv/bin/python -m examples.delta_to_log [--customers 30] [--log-dir DIR] [--work-dir DIR]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from examples.common import (
    example_parser,
    fresh_dir,
    fresh_log_dir,
    heading,
    print_result,
    run_until_caught_up,
    spark_session,
    topic_records,
)
from pysparklog import LogDirectory

TOPIC = "customers.changes"
PARTITIONS = 2
SCHEMA = "id INT, name STRING, tier STRING, balance_cents BIGINT"
COLUMNS = tuple(field.split()[0] for field in SCHEMA.split(", "))
#: Customers inserted by round 2 (ids after the first round's).
NEW_IN_ROUND_2 = 5


def create_table(spark: SparkSession, table: str | Path) -> None:
    """The Delta table ``customers`` with its change data feed on (from its first version)."""
    spark.sql(f"CREATE TABLE delta.`{table}` ({SCHEMA}) USING DELTA TBLPROPERTIES (delta.enableChangeDataFeed = true)")


def first_changes(spark: SparkSession, table: str | Path, customers: int) -> None:
    """Three commits: insert customers 1..``customers``, move every third to tier ``gold``, delete every
    fifth."""
    rows = [(i, f"customer {i}", "basic", 1000 * i) for i in range(1, customers + 1)]
    spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(str(table))
    spark.sql(f"UPDATE delta.`{table}` SET tier = 'gold', balance_cents = balance_cents + 500 WHERE id % 3 = 0")
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id % 5 = 0")


def more_changes(spark: SparkSession, table: str | Path, customers: int) -> None:
    """One ``MERGE`` commit: ``NEW_IN_ROUND_2`` new customers and a new name for customer 1."""
    changes = [(1, "customer 1 (renamed)", "basic", 1000)] + [
        (i, f"customer {i}", "basic", 1000 * i) for i in range(customers + 1, customers + 1 + NEW_IN_ROUND_2)
    ]
    source = spark.createDataFrame(changes, SCHEMA)
    source.createOrReplaceTempView("customer_changes")
    spark.sql(
        f"MERGE INTO delta.`{table}` t USING customer_changes s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


def change_records(spark: SparkSession, table: str | Path) -> DataFrame:
    """The table's change feed as the sink's columns: ``key``, ``value`` and ``headers``."""
    changes = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", "0")  # the whole history; without it: the current snapshot, then changes
        .load(str(table))
        .where("_change_type != 'update_preimage'")
    )
    return changes.select(
        F.col("id").cast("string").alias("key"),
        F.to_json(F.struct(*COLUMNS, "_change_type")).alias("value"),
        F.array(
            F.struct(F.lit("change_type").alias("key"), F.col("_change_type").cast("binary").alias("value")),
            F.struct(
                F.lit("commit_version").alias("key"),
                F.col("_commit_version").cast("string").cast("binary").alias("value"),
            ),
        ).alias("headers"),
    )


def publish_changes(spark: SparkSession, table: str | Path, log_dir: str | Path, checkpoint: str | Path) -> int:
    """Publish the changes not published yet to the topic (created with ``PARTITIONS`` partitions if missing);
    the number of records the topic gained.

    Each micro-batch is one Kafka transaction per task, committed together with the batch: a restart after a
    failure neither loses nor repeats a change. (The query's ``numInputRows`` would count the pre-images too:
    they are read, then filtered out.)
    """
    LogDirectory(log_dir).topics.create(TOPIC, PARTITIONS, if_not_exists=True)
    before = int(topic_records(log_dir, TOPIC).num_rows)
    query = (
        change_records(spark, table)
        .writeStream.format("pysparklog")
        .option("topic", TOPIC)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(log_dir))
    )
    run_until_caught_up(query)
    return int(topic_records(log_dir, TOPIC).num_rows) - before


def read_changes(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """The topic as a batch DataFrame: key, the row, the change type and commit version from the headers.

    ``kafka.isolation.level=read_committed`` reads only what committed micro-batches wrote, as a Kafka
    consumer of a transactional producer's topic should.
    """
    records = (
        spark.read.format("pysparklog")
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        .load(str(log_dir))
    )
    header = "CAST(filter(headers, h -> h.key = '{}')[0].value AS STRING)"
    return records.selectExpr(
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        f"{header.format('change_type')} AS change_type",
        f"CAST({header.format('commit_version')} AS BIGINT) AS commit_version",
        "partition",
        "offset",
    )


def replay(changes: DataFrame) -> DataFrame:
    """The table the changes describe: each key's latest change (by commit version), unless it is a delete."""
    latest_first = Window.partitionBy("key").orderBy(F.col("commit_version").desc(), F.col("offset").desc())
    latest = changes.withColumn("rank", F.row_number().over(latest_first)).where("rank = 1")
    rows = latest.where("change_type != 'delete'").select(F.from_json("value", SCHEMA).alias("row"))
    return rows.select("row.*")


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__)
    parser.add_argument("--customers", type=int, default=30, help="customers of round 1 (default: %(default)s)")
    args = parser.parse_args(argv)
    log_dir, work_dir = fresh_log_dir(args.log_dir), fresh_dir(args.work_dir)
    table, checkpoint = work_dir / "customers", work_dir / "checkpoints" / "publish"
    spark = spark_session("pysparklog-delta-to-log", delta=True)

    heading("round 1: create the table, insert, update, delete; publish the change feed")
    create_table(spark, table)
    first_changes(spark, table, args.customers)
    published = [publish_changes(spark, table, log_dir, checkpoint)]
    print(f"published {published[0]} changes")
    heading("round 2: a MERGE; the restarted query publishes only its changes")
    more_changes(spark, table, args.customers)
    published.append(publish_changes(spark, table, log_dir, checkpoint))
    print(f"published {published[1]} changes")

    heading("the topic, read back")
    changes = read_changes(spark, log_dir).cache()
    changes.orderBy("commit_version", "key").show(8, truncate=False)
    by_type = Counter({row.change_type: row["count"] for row in changes.groupBy("change_type").count().collect()})
    changes.groupBy("commit_version", "change_type").count().orderBy("commit_version", "change_type").show()

    heading("the table, rebuilt from the topic, against the Delta table")
    rebuilt = replay(changes)
    current = spark.read.format("delta").load(str(table)).select(*COLUMNS)
    rebuilt.orderBy("id").show(5, truncate=False)
    differing = rebuilt.exceptAll(current).count() + current.exceptAll(rebuilt).count()
    print_result(
        "published",
        round1=published[0],
        round2=published[1],
        inserts=by_type["insert"],
        updates=by_type["update_postimage"],
        deletes=by_type["delete"],
    )
    print_result("replay", rows=rebuilt.count(), table_rows=current.count(), differing=differing)
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
