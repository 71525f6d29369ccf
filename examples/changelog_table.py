"""A compacted topic as a changelog table: updates and tombstones, the log cleaner, then the table in Spark.

A topic with ``cleanup.policy=compact`` keeps at least the last record of every key, so reading it from the
start rebuilds the latest state of a table (Kafka Streams' changelogs, ``__consumer_offsets``, CDC topics):

1. ``create_topic``: one partition, ``cleanup.policy=compact``, the smallest ``segment.bytes`` Kafka allows
   (1 MiB, so the log has several segments: compaction never touches the active one) and
   ``min.cleanable.dirty.ratio=0.01`` (so it is due at once);
2. ``produce_updates``: rounds of profile updates for every user, with tombstones (null values) deleting
   some users halfway through and a few more at the end;
3. ``compact``: one pass of the log cleaner (``pysparklog.storage.cleaner.run_cleaner``, what
   ``pysparklog log-cleaner --once`` runs); offsets do not change, older records of each key go;
4. ``latest_table``: a Spark batch read of the topic, the latest record per key, tombstones deleting their key;
   the same table before and after compaction, and the one the updates describe.

Tombstones themselves stay ``delete.retention.ms`` (a day by default) after the round that first rewrites
them, so that a consumer reading the changelog sees the deletion; so do the records of the active segment.

Run it from the checkout (a few seconds after Spark has started)::

    .venv/bin/python -m examples.changelog_table [--users 200] [--rounds 40] [--log-dir DIR]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from examples.common import example_parser, fresh_log_dir, heading, print_result, spark_session
from pysparklog import LogDirectory, Producer
from pysparklog.cli.log_cleaner import describe
from pysparklog.storage.cleaner import run_cleaner

TOPIC = "users"
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(1024 * 1024),
    "min.cleanable.dirty.ratio": "0.01",
}
#: Bytes of padding in each profile, so that a few thousand updates fill several 1 MiB segments.
BIO_BYTES = 200

Change = tuple[str, str | None]  # (user, profile JSON or None for a tombstone)


def user_updates(users: int, rounds: int) -> list[list[Change]]:
    """The changes, round by round: every live user's profile is rewritten each round; users whose number
    ends in 7 are deleted halfway through (and stay deleted), those ending in 3 in the last round."""
    changes: list[list[Change]] = []
    deleted: set[str] = set()
    for r in range(rounds):
        batch: list[Change] = []
        for u in range(users):
            user = f"user-{u:04d}"
            if user in deleted:
                continue
            if (r == rounds // 2 and u % 10 == 7) or (r == rounds - 1 and u % 10 == 3):
                batch.append((user, None))
                deleted.add(user)
            else:
                profile = {"user": user, "email": f"{user}@example.com", "round": r, "bio": "x" * BIO_BYTES}
                batch.append((user, json.dumps(profile, separators=(",", ":"))))
        changes.append(batch)
    return changes


def expected_table(changes: list[list[Change]]) -> dict[str, int]:
    """What the changelog describes: each live user's round of its latest profile."""
    table: dict[str, int] = {}
    for batch in changes:
        for user, profile in batch:
            if profile is None:
                table.pop(user, None)
            else:
                table[user] = json.loads(profile)["round"]
    return table


def create_topic(log_dir: str | Path) -> None:
    """The compacted topic (``pysparklog topics --create --topic users --config cleanup.policy=compact ...``)."""
    LogDirectory(log_dir).topics.create(TOPIC, 1, CONFIGS)
    print(f"created {TOPIC} with {', '.join(f'{k}={v}' for k, v in CONFIGS.items())}")


def produce_updates(log_dir: str | Path, changes: list[list[Change]]) -> int:
    """Append the changes, one ``send_arrow`` per round; the number of records."""
    with Producer(log_dir) as producer:
        for batch in changes:
            table = pa.table(
                {
                    "key": pa.array([user.encode() for user, _ in batch], pa.binary()),
                    "value": pa.array([None if p is None else p.encode() for _, p in batch], pa.binary()),
                }
            )
            producer.send_arrow(TOPIC, table)
    return sum(len(batch) for batch in changes)


@dataclass(frozen=True)
class LogStats:
    """The size of a partition's log."""

    segments: int
    bytes: int
    records: int
    tombstones: int
    log_end_offset: int

    def __str__(self) -> str:
        return (
            f"{self.segments} segments, {self.bytes:,} bytes, {self.records:,} records "
            f"({self.tombstones} tombstones), log end offset {self.log_end_offset:,}"
        )


def log_stats(log_dir: str | Path, partition: int = 0) -> LogStats:
    """Segments, bytes and records of one partition of the topic, from the engine."""
    with LogDirectory(log_dir).partition(TOPIC, partition) as log:
        segments = log.segments()
        records = tombstones = 0
        for batch in log.read_arrow():
            records += batch.num_rows
            tombstones += batch.column("value").null_count
        return LogStats(len(segments), sum(s.size() for s in segments), records, tombstones, log.log_end_offset)


def compact(log_dir: str | Path) -> None:
    """One pass of the log cleaner over the topic, printing what it did as ``pysparklog log-cleaner`` does."""
    for report in run_cleaner(log_dir, TOPIC):
        if report.error is not None:
            raise SystemExit(f"the cleaner failed on {report.topic}-{report.partition}: {report.error}")
        for line in describe(report) or [f"{report.topic}-{report.partition}: nothing to clean"]:
            print(line)


def latest_table(spark: SparkSession, log_dir: str | Path) -> DataFrame:
    """The table the changelog describes, from a Spark batch read: each key's last record (by offset: a key
    always goes to the same partition), unless it is a tombstone."""
    records = spark.read.format("pysparklog").option("subscribe", TOPIC).load(str(log_dir))
    last_first = Window.partitionBy("key").orderBy(F.col("offset").desc())
    latest = records.withColumn("rank", F.row_number().over(last_first)).where("rank = 1 AND value IS NOT NULL")
    profile = F.from_json(F.col("value").cast("string"), "user STRING, email STRING, round INT")
    return latest.select(F.col("key").cast("string").alias("user"), profile.alias("p"), "offset").select(
        "user", "p.email", "p.round", "offset"
    )


def differences(table: DataFrame, expected: dict[str, int]) -> int:
    """Users whose row is missing, extra or not the latest."""
    rows = {row.user: row["round"] for row in table.collect()}
    return sum(rows.get(user) != expected.get(user) for user in rows.keys() | expected.keys())


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__, work_dir=False)
    parser.add_argument("--users", type=int, default=200, help="users (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of updates (default: %(default)s)")
    args = parser.parse_args(argv)
    log_dir = fresh_log_dir(args.log_dir)
    changes = user_updates(args.users, args.rounds)
    expected = expected_table(changes)

    heading("a compacted topic, updates and tombstones")
    create_topic(log_dir)
    produced = produce_updates(log_dir, changes)
    before = log_stats(log_dir)
    print(f"produced {produced:,} changes: {before}")
    spark = spark_session("pysparklog-changelog-table")
    mismatches_before = differences(latest_table(spark, log_dir), expected)

    heading("the log cleaner")
    compact(log_dir)
    after = log_stats(log_dir)
    print(f"before: {before}\nafter:  {after}")

    heading("the table, from the compacted topic")
    table = latest_table(spark, log_dir)
    table.orderBy("user").show(5, truncate=False)
    mismatches = differences(table, expected)
    print_result(
        "log",
        records_before=before.records,
        records_after=after.records,
        bytes_before=before.bytes,
        bytes_after=after.bytes,
        tombstones_after=after.tombstones,
    )
    print_result("table", rows=table.count(), keys=len(expected), mismatches=mismatches, before=mismatches_before)
    return 0 if mismatches == mismatches_before == 0 and after.bytes < before.bytes else 1


if __name__ == "__main__":
    sys.exit(main())
