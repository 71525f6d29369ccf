"""``pysparklog get-offsets``: what Kafka's ``kafka-get-offsets.sh`` (``GetOffsetShell``) prints, for the
partitions of a log directory.

One line per partition, ``<topic>:<partition>:<offset>``, sorted as Kafka's tool sorts them (by the
``<topic>-<partition>`` string, so ``t-10`` comes before ``t-2``). ``--time`` takes Kafka's values:
``-1``/``latest`` (the log end offset, which is the high watermark here), ``-2``/``earliest`` (the log
start offset), ``-3``/``max-timestamp`` (the record with the largest timestamp), or milliseconds since
the epoch (the first record at or after that time). A partition without such an offset is left out,
as Kafka's tool leaves out a partition whose answer is ``-1``. Partitions are chosen as Kafka's tool
chooses them: ``--topic`` (a regular expression matched against the whole topic name; every topic
by default) with ``--partitions`` (a list of ids; every partition by default), or
``--topic-partitions`` (comma-separated ``topic-regex:partitions`` rules, partitions being ``N``,
``N-M`` (M excluded), ``N-`` or ``-M``).

Where Kafka's tool differs:

* ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces ``--bootstrap-server`` and
  ``--command-config``; the topics are the log directory's as a broker lists them
  (``TopicStore.names``: the internal topics, left out with ``--exclude-internal-topics``, but never the
  KRaft metadata log ``__cluster_metadata`` a broker's directory holds).
* Regular expressions are Python's (``re``), not Java's; the two agree on the usual constructs
  (classes, alternation, ``.*``, anchors).
* There is no tiered storage: ``-4``/``earliest-local`` is the log start offset and
  ``-5``/``latest-tiered``, ``-6``/``earliest-pending-upload`` find no offset (a broker without
  tiered storage answers ``-1``), so nothing is printed for them. A negative ``--time`` other than
  ``-1`` to ``-6`` is refused.
* A partition whose offsets cannot be read (a corrupt segment) is reported on stderr with Kafka's
  ``Skip getting offsets for topic-partition <tp> due to error: <why>`` line, and the command then
  ends with status 1 (Kafka's tool ends with 0).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from pysparklog.cli._common import (
    UsageError,
    add_log_dir_argument,
    open_log_dir,
    topic_filter,
    topic_partitions,
)
from pysparklog.errors import PySparkLogError
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_reads import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pysparklog.storage.topics import INTERNAL_TOPICS

EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
_TIME_NAMES = {
    "latest": LATEST_TIMESTAMP,
    "earliest": EARLIEST_TIMESTAMP,
    "max-timestamp": MAX_TIMESTAMP,
    "earliest-local": EARLIEST_LOCAL_TIMESTAMP,
    "latest-tiered": LATEST_TIERED_TIMESTAMP,
    "earliest-pending-upload": EARLIEST_PENDING_UPLOAD_TIMESTAMP,
}
_TIME_HELP = (
    "-1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered / "
    "-6 or earliest-pending-upload"
)
# One --topic-partitions rule: an optional topic regex, then ':' and a partition, a range or nothing.
_RULE = re.compile(r"(?P<topic>[^:,]*)(?::(?:(?P<one>[0-9]*)|(?P<low>[0-9]*)-(?P<high>[0-9]*)))?")
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Java's Long.parseLong accepts


@dataclass(frozen=True, slots=True)
class _Rule:
    """Partitions of the topics whose whole name matches ``topic`` that ``partitions`` accepts."""

    topic: re.Pattern[str]
    partitions: Callable[[int], bool]

    def allows(self, topic: str, partition: int) -> bool:
        return self.topic.fullmatch(topic) is not None and self.partitions(partition)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``get-offsets`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "get-offsets",
        help="print partition offsets for a time as Kafka's kafka-get-offsets.sh does",
        description="Print <topic>:<partition>:<offset> for the partitions of a log directory, as Kafka's "
        "kafka-get-offsets.sh (GetOffsetShell) does.",
    )
    add_log_dir_argument(parser)
    parser.add_argument(
        "--topic",
        metavar="REGEX",
        help="the topics to get offsets for: a regular expression matching whole topic names (default: all)",
    )
    parser.add_argument(
        "--partitions",
        metavar="IDS",
        help="comma-separated partition ids (default: all); not with --topic-partitions",
    )
    parser.add_argument(
        "--topic-partitions",
        metavar="RULES",
        help="comma-separated topic-regex:partitions rules, e.g. 'orders:0,logs.*:2-5,audit:3-'; "
        "not with --topic or --partitions",
    )
    parser.add_argument(
        "--time",
        default="latest",
        metavar="TIME",
        help=f"milliseconds since the epoch, or {_TIME_HELP} (default: latest)",
    )
    parser.add_argument(
        "--exclude-internal-topics",
        action="store_true",
        help="leave out Kafka's internal topics (__consumer_offsets, ...)",
    )
    parser.set_defaults(run=run)


def parse_time(value: str) -> int:
    """Kafka's ``--time``: a name, a special negative value, or milliseconds since the epoch.

    Raises:
        UsageError: Neither, in the words of Kafka's tool.
    """
    if value in _TIME_NAMES:
        return _TIME_NAMES[value]
    if _INTEGER.fullmatch(value) is None or int(value) < EARLIEST_PENDING_UPLOAD_TIMESTAMP:
        raise UsageError(
            f"Malformed time argument {value}. Please use {_TIME_HELP}, or a specified long format timestamp"
        )
    return int(value)


def _partition_set(raw: str | None) -> Callable[[int], bool]:
    """``--partitions``: absent or empty means every partition, as in Kafka's tool."""
    if not raw:
        return lambda partition: True
    ids = raw.split(",")
    if not all(_INTEGER.fullmatch(i) for i in ids):
        raise UsageError(f"--partitions expects a comma separated list of numeric partition ids, but received: {raw}")
    wanted = {int(i) for i in ids}
    return wanted.__contains__


def _parse_rule(spec: str) -> _Rule:
    """One ``--topic-partitions`` rule: ``N`` one partition, ``N-M`` from N to M excluded, open at either end."""
    match = _RULE.fullmatch(spec)
    if match is None:
        raise UsageError(f"Invalid rule specification: {spec}")
    topic = topic_filter(match["topic"] or ".*")
    if match["one"]:
        one = int(match["one"])
        return _Rule(topic, lambda partition: partition == one)
    low = int(match["low"]) if match["low"] else 0
    high = int(match["high"]) if match["high"] else INT_MAX
    return _Rule(topic, lambda partition: low <= partition < high)


def _rules(args: argparse.Namespace) -> list[_Rule]:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise UsageError("--topic-partitions cannot be used with --topic or --partitions")
        return [_parse_rule(spec) for spec in args.topic_partitions.split(",")]
    return [_Rule(topic_filter(args.topic if args.topic is not None else ".*"), _partition_set(args.partitions))]


def offset_at(log: Log, timestamp: int) -> int | None:
    """The ListOffsets answer for one partition; None where a broker answers -1."""
    if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return None  # nothing is ever tiered
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        timestamp = EARLIEST_TIMESTAMP  # the local log is the whole log
    found = log.offset_for_timestamp(timestamp)
    return None if found is None else found[0]


def run(args: argparse.Namespace) -> int:
    timestamp = parse_time(args.time)
    rules = _rules(args)
    logs = open_log_dir(args.log_dir)
    chosen = [
        (topic, partition)
        for topic, partition in topic_partitions(logs)
        if not (args.exclude_internal_topics and topic in INTERNAL_TOPICS)
        and any(rule.allows(topic, partition) for rule in rules)
    ]
    if not chosen:
        raise UsageError("Could not match any topic-partitions with the specified filters")
    failed = False
    for topic, partition in sorted(chosen, key=lambda tp: f"{tp[0]}-{tp[1]}"):
        try:
            with logs.partition(topic, partition) as log:
                offset = offset_at(log, timestamp)
        except PySparkLogError as error:
            print(
                f"Skip getting offsets for topic-partition {topic}-{partition} due to error: {error}", file=sys.stderr
            )
            failed = True
            continue
        if offset is not None:
            print(f"{topic}:{partition}:{offset}")
    return 1 if failed else 0
