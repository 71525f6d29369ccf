"""A Spark Connect client's pysparklog session, run as its own process by ``test_spark_connect``.

A Connect client is only a gRPC stub (``SparkSession.builder.remote``): the plans it sends name
``format("pysparklog")`` and its options, and the server runs them, with pysparklog installed beside the
server's Python workers. It runs as a separate process because choosing a remote session switches
pyspark's module-level functions to Connect mode for the rest of the process.

Usage: ``python -m tests.spark.connect_client sc://host:port LOG_DIR WORK_DIR``; prints one JSON object
with what Spark returned, which the test compares with what the engine reads and wrote.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.functions import unix_millis

#: Records per micro-batch: the streaming copy of a 50-record topic takes three.
MAX_OFFSETS_PER_TRIGGER = 20


def run(url: str, log_dir: str, work_dir: str) -> dict[str, Any]:
    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        events = spark.read.format("pysparklog").option("subscribe", "events").load(log_dir)
        read = [
            [row.topic, row.partition, row.offset, row.key.decode(), row.value.decode(), row.ts]
            for row in events.withColumn("ts", unix_millis("timestamp")).collect()
        ]
        written = spark.createDataFrame([(f"w{i}", f"written:{i}") for i in range(10)], "key string, value string")
        written.write.format("pysparklog").option("topic", "written").mode("append").save(log_dir)

        query = (
            spark.readStream.format("pysparklog")
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
            .load(log_dir)
            .select("key", "value", "partition")
            .writeStream.format("pysparklog")
            .option("topic", "copied")
            .option("checkpointLocation", f"{work_dir}/copy-checkpoint")
            .trigger(availableNow=True)
            .start(log_dir)
        )
        query.awaitTermination()

        from pysparklog.datasource_v2 import PySparkLogDataSource

        spark.dataSource.register(PySparkLogDataSource)  # what a client does on a server started before the install
        registered_count = spark.read.format("pysparklog").option("subscribe", "written").load(log_dir).count()
        return {
            "schema": events.schema.simpleString(),
            "read": read,
            "registered_count": registered_count,
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:4])))
