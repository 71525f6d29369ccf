"""Analysing a Kafka broker's log directory with Spark: topics, partitions, records, keys, sizes, codecs.

A broker's log directory (``log.dirs``), copied off the broker (a backup, a decommissioned node, a support
bundle), is a pysparklog log directory: Spark reads it with ``spark.read.format("pysparklog")``, without a
broker and without Kafka's tools. This example prints:

* the topics and partitions found, with their offsets, segments and bytes (the engine's view);
* per partition (Spark): records, offsets, the time range, timestamp types;
* per topic: distinct keys, records without a key, the most frequent keys, key and value sizes, headers;
* per partition: the compression codecs of the record batches (batch headers, which Spark's Kafka schema does
  not carry, read with the engine).

Internal topics (``__consumer_offsets``, ``__cluster_metadata``...) are included by naming every partition
with ``assign``; ``--no-internal`` reads with ``subscribePattern=.*`` instead, which leaves them out as Kafka's
consumers do. The directory is copied first (to ``--log-dir``): reading a log a broker did not close cleanly
may rebuild its indexes, and the original stays untouched.

Run it from the checkout (a few seconds after Spark has started), e.g. on the project's broker fixture::

    .venv/bin/python -m examples.broker_log_analysis tests/fixtures/kafka-broker-logdir [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from examples.common import example_parser, format_counts, fresh_dir, heading, print_result, spark_session
from pysparklog import Codec, LogDirectory
from pysparklog.storage.records.kernels import E_ATTRIBUTES

#: Keys and header keys as printable text: bytes outside printable ASCII become dots, as in a hex dump.
PRINTABLE_KEY = "regexp_replace(CAST(key AS STRING), '[^ -~]', '.')"


def copy_log_dir(source: str | Path, target: str | Path) -> Path:
    """Copy a broker's log directory into ``target`` (made by ``fresh_dir``), writable: a copy from a broker
    or a read-only archive keeps their permissions otherwise."""
    target = Path(target)
    shutil.copytree(source, target, dirs_exist_ok=True)
    for root, dirs, files in os.walk(target):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return target


def list_partitions(log_dir: str | Path) -> dict[str, list[int]]:
    """The topics of the log directory and their partitions (those with a directory: a broker holds only the
    partitions it hosts), printed with each partition's offsets, segments and bytes."""
    logs = LogDirectory(log_dir)
    topics: dict[str, list[int]] = defaultdict(list)
    print(f"{'partition':<24} {'log start':>10} {'log end':>10} {'segments':>9} {'bytes':>10}")
    for topic, partition in logs.topic_partitions():
        topics[topic].append(partition)
        with logs.partition(topic, partition) as log:
            segments = log.segments()
            size = sum(segment.size() for segment in segments)
            name = f"{topic}-{partition}"
            print(f"{name:<24} {log.log_start_offset:>10} {log.log_end_offset:>10} {len(segments):>9} {size:>10,}")
    return dict(topics)


def load_records(
    spark: SparkSession, log_dir: str | Path, partitions: dict[str, list[int]], *, internal: bool = True
) -> DataFrame:
    """Every record of the log directory as a batch DataFrame, headers included.

    ``subscribePattern`` leaves out the ``__`` internal topics, as Kafka's consumers do by default
    (``exclude.internal.topics``); ``assign`` with every partition takes them too.
    """
    reader = spark.read.format("pysparklog").option("includeHeaders", "true")
    if internal:
        reader = reader.option("assign", json.dumps(partitions))
    else:
        reader = reader.option("subscribePattern", ".*")
    return reader.load(str(log_dir))


def records_per_partition(records: DataFrame) -> dict[str, int]:
    """Records, offsets, time range and timestamp types per partition; the record counts."""
    per_partition = records.groupBy("topic", "partition").agg(
        F.count("*").alias("records"),
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.min("timestamp").alias("oldest"),
        F.max("timestamp").alias("newest"),
        F.concat_ws(",", F.array_sort(F.collect_set("timestampType"))).alias("timestamp_types"),
    )
    rows = per_partition.orderBy("topic", "partition").collect()
    per_partition.orderBy("topic", "partition").show(truncate=False)
    for row in rows:
        print_result(
            f"time_range:{row.topic}-{row.partition}",
            oldest_ms=int(row.oldest.timestamp() * 1000),
            newest_ms=int(row.newest.timestamp() * 1000),
        )
    return {f"{row.topic}-{row.partition}": row.records for row in rows}


def keys_per_topic(records: DataFrame, top: int = 3) -> None:
    """Distinct keys and keyless records per topic, then each topic's most frequent keys."""
    records.groupBy("topic").agg(
        F.countDistinct("key").alias("distinct_keys"),
        F.sum(F.col("key").isNull().cast("int")).alias("records_without_key"),
    ).orderBy("topic").show(truncate=False)
    counted = records.where("key IS NOT NULL").groupBy("topic", "key").count()
    ranked = counted.selectExpr(
        "topic",
        f"{PRINTABLE_KEY} AS key",
        "count",
        "row_number() OVER (PARTITION BY topic ORDER BY count DESC, key) AS rank",
    )
    ranked.where(f"rank <= {top}").orderBy("topic", "rank").show(truncate=60)


def message_sizes(records: DataFrame) -> None:
    """Key and value sizes per topic: what a broker's ``max.message.bytes`` and a consumer's fetch sizes see."""
    records.groupBy("topic").agg(
        F.round(F.avg(F.length("key")), 1).alias("avg_key_bytes"),
        F.round(F.avg(F.length("value")), 1).alias("avg_value_bytes"),
        F.max(F.length("value")).alias("max_value_bytes"),
        F.sum(F.length("value")).alias("value_bytes"),
        F.sum(F.col("value").isNull().cast("int")).alias("tombstones"),
    ).orderBy("topic").show(truncate=False)


def header_keys(records: DataFrame) -> None:
    """Which header keys the records carry, per topic (none is common: headers are optional)."""
    with_headers = records.where("headers IS NOT NULL AND size(headers) > 0")
    headers = with_headers.select("topic", F.explode("headers").alias("header"))
    summary = headers.groupBy("topic", "header.key").count().orderBy("topic", "key")
    if summary.count() == 0:
        print("no record has headers")
    else:
        summary.show(truncate=False)


def batch_codecs(log_dir: str | Path) -> dict[str, Counter[str]]:
    """The compression codec of every record batch, per partition: ``{"orders-0": {"zstd": 12}}``.

    Spark's Kafka schema has no codec column (a consumer decompresses transparently), so this reads the batch
    headers of the segments with the engine: the codec is in the low three bits of a batch's attributes.
    """
    logs = LogDirectory(log_dir)
    codecs: dict[str, Counter[str]] = {}
    for topic, partition in logs.topic_partitions():
        found: Counter[str] = Counter()
        with logs.partition(topic, partition) as log:
            for segment in log.segments():
                for chunk in segment.chunks(0, segment.size(), verify_crc=False):
                    attributes = chunk.entries.column(E_ATTRIBUTES).tolist()
                    found.update(Codec.from_attributes(int(a), file=segment.log_path).kafka_name for a in attributes)
        name = f"{topic}-{partition}"
        codecs[name] = found
        print(f"{name:<24} {sum(found.values()):>6} batches: {format_counts(found)}")
    return codecs


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__, work_dir=False)
    parser.add_argument("broker_log_dir", type=Path, help="a Kafka broker's log directory (or a copy of one)")
    parser.add_argument(
        "--internal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="include internal topics such as __consumer_offsets (default: yes)",
    )
    args = parser.parse_args(argv)
    if not args.broker_log_dir.is_dir():
        parser.error(f"{args.broker_log_dir} is not a directory")
    log_dir = copy_log_dir(args.broker_log_dir, fresh_dir(args.log_dir))
    print(f"analysing a copy of {args.broker_log_dir.resolve()} in {log_dir}")

    heading("topics and partitions")
    partitions = list_partitions(log_dir)
    if not args.internal:
        partitions = {topic: ps for topic, ps in partitions.items() if not topic.startswith("__")}
    print_result("topics", partitions=format_counts({t: len(ps) for t, ps in partitions.items()}))
    if not partitions:
        print("no topic to analyse")
        return 0
    spark = spark_session("pysparklog-broker-log-analysis")
    records = load_records(spark, log_dir, partitions, internal=args.internal).cache()

    heading("records per partition")
    counts = records_per_partition(records)
    print_result("records", counts=format_counts(counts))
    heading("keys")
    keys_per_topic(records)
    heading("message sizes")
    message_sizes(records)
    heading("headers")
    header_keys(records)
    heading("compression codecs of the record batches")
    codecs = batch_codecs(log_dir)
    kept = {name: found for name, found in codecs.items() if name.rsplit("-", 1)[0] in partitions}
    print_result(
        "codecs", codecs=format_counts(Counter(codec for found in kept.values() for codec in found.elements()))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
