"""Checks what the main job (``examples.demo``) left, for ``test_demo``: the Delta table against the orders.

Run it from the repository root as ``python -m tests.delta_check <log dir> <Delta table>``. It exits 0 when

* the Delta table holds exactly the closed windows' aggregates recomputed from the topic ``orders`` with a plain
  batch query (``spark.read.format("pysparklog")``, ``groupBy(window, country)``), a window being closed when its
  end is at or before the last watermark, ``max(event_time)`` minus the watermark's delay: no window missing, none
  twice, no count or sum off;
* the topic ``order-stats`` read with ``read_committed`` holds exactly the same rows as the Delta table (each
  window once in both: exactly-once from end to end);

and 1, with chispa's comparison, otherwise. It runs in a process of its own because it needs a SparkSession with
Delta Lake's jars, and the test suite's session (one per process) has none.
"""

from __future__ import annotations

import sys

from chispa import DataFramesNotEqualError, SchemasNotEqualError, assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from examples.demo import ORDER_SCHEMA, ORDERS, STATS, STATS_SCHEMA, WATERMARK_DELAY_S, WINDOW_S
from pysparklog.spark.session import local_spark

#: No progress bars; Delta reads a table's log with 2 tasks (its default of 50 is for clusters); a short-lived JVM
#: spends less time compiling with the JIT's quick compiler alone (as the main job's session does).
SPARK_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


def read_topic(spark: SparkSession, log_dir: str, topic: str, schema: str, isolation_level: str) -> DataFrame:
    """Every record of ``topic``, its JSON value parsed with ``schema``."""
    records = (
        spark.read.format("pysparklog")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", isolation_level)
        .load(log_dir)
    )
    return records.select(F.from_json(F.col("value").cast("string"), schema).alias("row")).select("row.*")


def closed_windows(orders: DataFrame) -> DataFrame:
    """Orders and revenue per 10-second window and country, for the windows the last watermark has closed."""
    watermark = orders.agg((F.max("event_time") - F.expr(f"INTERVAL {WATERMARK_DELAY_S} SECONDS")).alias("watermark"))
    return (
        orders.groupBy(F.window("event_time", f"{WINDOW_S} seconds").alias("w"), "country")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("revenue"))
        .crossJoin(watermark)
        .where(F.col("w.end") <= F.col("watermark"))
        .select(
            F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "country", "orders", "revenue"
        )
    )


def check(spark: SparkSession, log_dir: str, delta_table: str) -> str:
    """Raise chispa's error at the first difference; else a line saying what was compared."""
    table = spark.read.format("delta").load(delta_table).cache()
    rows = table.count()
    if rows == 0:
        raise AssertionError(f"the Delta table {delta_table} is empty")
    orders = read_topic(spark, log_dir, ORDERS, ORDER_SCHEMA, "read_uncommitted")
    assert_df_equality(table, closed_windows(orders), ignore_row_order=True, ignore_nullable=True)
    stats = read_topic(spark, log_dir, STATS, STATS_SCHEMA, "read_committed")
    assert_df_equality(stats, table, ignore_row_order=True, ignore_nullable=True)
    return f"ok: the Delta table's {rows} rows = the closed windows recomputed from {ORDERS} = {STATS} (read_committed)"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.delta_check <log dir> <Delta table>", file=sys.stderr)
        return 2
    log_dir, delta_table = argv
    spark = local_spark("pysparklog-delta-check", delta=True, conf=SPARK_CONF)
    try:
        print(check(spark, log_dir, delta_table))
        return 0
    except (AssertionError, DataFramesNotEqualError, SchemasNotEqualError) as error:
        print(f"MISMATCH: {type(error).__name__}\n{error}")
        return 1
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
