"""``pysparklog topics``: what Kafka's ``kafka-topics.sh`` does, on a log directory.

Kafka's flag names and messages (``Created topic T.``, the ``WARNING`` about ``.`` and ``_``, silent ``--alter``
and ``--delete``), with ``--log-dir`` where Kafka's tool takes ``--bootstrap-server``. ``--describe`` keeps Kafka's
first line per topic (``Topic: T<TAB>TopicId: ...<TAB>PartitionCount: N<TAB>ReplicationFactor: 1<TAB>Configs:
k=v,...``, the configs being those not at their default) and then, instead of leaders and replicas a log directory
does not have, an aligned table of each partition's log start and end offsets, segment count and bytes.

With ``--list`` and ``--describe``, ``--topic`` is Kafka's topic filter: a regular expression matched against whole
names, commas separating alternatives; ``--exclude-internal`` leaves out the internal topics (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``). A filter that matches nothing is an error for ``--describe``
(``Topic 'T' does not exist as expected``) unless ``--if-exists``, and lists nothing for ``--list``.

Where Kafka's tool differs:

* The filter is a Python regular expression where Kafka's is Java's (they agree on the usual constructs).
  ``--alter`` and ``--delete`` take one topic's name, not a filter (Kafka's alter or delete every topic it
  matches).
* ``--replication-factor`` is accepted for Kafka's scripts, and must be 1.
* ``--alter --topic T --topic-id ID`` sets the topic's id (a broker's ids are its controller's to give): the step
  before its partition directories are moved into a broker's log directory (``docs/moving-to-kafka.md``).
  ``--describe --topic-id ID`` describes the topic with that id, as Kafka's does.
* Not implemented: ``--replica-assignment``, the ``--*-partitions`` reports and
  ``--topics-with-overrides``.
"""

from __future__ import annotations

import argparse

from pysparklog.cli._common import UsageError, add_log_dir_argument, open_log_dir, topic_filter
from pysparklog.cli.progress import progress_bar
from pysparklog.errors import TopicExistsError, UnknownTopicError
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topic_config import ConfigSource, parse_config_assignments
from pysparklog.storage.topics import (
    INTERNAL_TOPICS,
    ZERO_TOPIC_ID,
    TopicMetadata,
    parse_topic_partitions,
    validate_topic_name,
)

ACTIONS = ("create", "list", "describe", "alter", "delete")
COLUMNS = ("Partition", "LogStartOffset", "LogEndOffset", "Segments", "Bytes")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``topics`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics as Kafka's kafka-topics.sh does",
        description="Create, delete, describe, or change a topic of a log directory (Kafka's kafka-topics.sh).",
    )
    add_log_dir_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--list", action="store_true", help="list all topics")
    actions.add_argument("--describe", action="store_true", help="describe the given topic, or all")
    actions.add_argument(
        "--alter", action="store_true", help="add partitions to a topic, or set its id (configs: pysparklog configs)"
    )
    actions.add_argument("--delete", action="store_true", help="delete a topic and its data")
    parser.add_argument(
        "--topic",
        metavar="TOPIC",
        help="the topic to create, alter or delete; with --list and --describe a regular expression of the topics "
        "(whole names; commas separate alternatives)",
    )
    parser.add_argument(
        "--exclude-internal",
        action="store_true",
        help=f"with --list or --describe: leave out the internal topics ({', '.join(sorted(INTERNAL_TOPICS))})",
    )
    parser.add_argument(
        "--topic-id",
        metavar="ID",
        help="with --alter: the id to give the topic, the one a Kafka cluster knows it by (kafka-topics.sh "
        "--describe prints it: TopicId: ...); with --describe: the id of the topic to describe",
    )
    parser.add_argument(
        "--partitions", metavar="N", help="the partition count (--create default: num.partitions, else 1)"
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic config override for --create (repeatable); see 'pysparklog configs' for the names",
    )
    parser.add_argument(
        "--replication-factor", type=int, metavar="1", help="accepted for Kafka's scripts: must be 1 (one log copy)"
    )
    parser.add_argument("--if-not-exists", action="store_true", help="with --create: no error if the topic exists")
    parser.add_argument(
        "--if-exists", action="store_true", help="with --alter, --delete or --describe: nothing if no such topic"
    )
    parser.set_defaults(run=run)


def _check(args: argparse.Namespace, action: str) -> None:
    """Refuse options that do not go with the action, as Kafka's ``TopicCommandOptions.checkArgs`` does."""
    if action in ("create", "alter", "delete") and args.topic is None:
        raise UsageError(f"--topic is required with --{action}")
    for flag, given, actions in (
        ("--partitions", args.partitions is not None, ("create", "alter")),
        ("--topic-id", args.topic_id is not None, ("alter", "describe")),
        ("--config", bool(args.config), ("create",)),
        ("--replication-factor", args.replication_factor is not None, ("create",)),
        ("--if-not-exists", args.if_not_exists, ("create",)),
        ("--if-exists", args.if_exists, ("alter", "delete", "describe")),
        ("--exclude-internal", args.exclude_internal, ("list", "describe")),
    ):
        if given and action not in actions:
            raise UsageError(f"{flag} is only valid with {' or '.join('--' + a for a in actions)}")
    if action == "alter" and (args.partitions is None) == (args.topic_id is None):
        raise UsageError(
            "--alter takes one of --partitions and --topic-id (alter topic configs with 'pysparklog configs')"
        )
    if action == "describe" and args.topic is not None and args.topic_id is not None:
        raise UsageError("--describe takes --topic or --topic-id, not both")
    if args.replication_factor not in (None, 1):
        raise UsageError(
            f"--replication-factor {args.replication_factor} is not supported: a topic has one copy, its log "
            "directory (use 1)"
        )


def run(args: argparse.Namespace) -> int:
    """Run the one action given."""
    action = next(a for a in ACTIONS if getattr(args, a))
    _check(args, action)
    # Refused as the engine refuses a count, text that is no integer included, before a log directory is started.
    partitions = None if args.partitions is None else parse_topic_partitions(args.partitions, "--partitions")
    # Creating a topic may start a log directory; anything else on a missing one is a mistyped path.
    logs = LogDirectory(args.log_dir) if action == "create" else open_log_dir(args.log_dir)
    try:
        if action == "create":
            _create(logs, args, partitions)
        elif action == "list":
            for name in _matching(logs, args):
                print(name)
        elif action == "describe":
            if args.topic_id is None:
                _describe(logs, _matching(logs, args))
            else:
                _describe(logs, [logs.topics.topic_with_id(args.topic_id).name])
        elif action == "alter" and partitions is not None:
            with progress_bar(f"Adding partitions to {args.topic}") as progress:
                logs.topics.alter_partitions(args.topic, partitions, progress=progress)
        elif action == "alter":
            with progress_bar(f"Setting the id of {args.topic}") as progress:
                logs.set_topic_id(args.topic, args.topic_id, progress=progress)
        else:
            with progress_bar(f"Deleting topic {args.topic}") as progress:
                logs.topics.delete(args.topic, progress=progress)
    except UnknownTopicError:
        if not args.if_exists:
            raise
    return 0


def _create(logs: LogDirectory, args: argparse.Namespace, partitions: int | None) -> None:
    name: str = args.topic
    configs = parse_config_assignments(args.config)
    validate_topic_name(name)
    if "." in name or "_" in name:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
            "collide. To avoid issues it is best to use either, but not both."
        )
    try:
        with progress_bar(f"Creating topic {name}") as progress:
            logs.topics.create(name, partitions, configs, progress=progress)
    except TopicExistsError:
        if args.if_not_exists:
            return
        raise
    print(f"Created topic {name}.")


def _matching(logs: LogDirectory, args: argparse.Namespace) -> list[str]:
    """The topics ``--topic`` (a filter; every topic when absent) and ``--exclude-internal`` select, sorted.

    Raises:
        UnknownTopicError: ``--describe`` with a ``--topic`` that matches none.
    """
    pattern = None if args.topic is None else topic_filter(args.topic)
    names = [
        name
        for name in logs.topics.names()
        if (pattern is None or pattern.fullmatch(name)) and not (args.exclude_internal and name in INTERNAL_TOPICS)
    ]
    if args.describe and args.topic and not names:
        raise UnknownTopicError(f"Topic '{args.topic}' does not exist as expected")
    return names


def _describe(logs: LogDirectory, names: list[str]) -> None:
    for name in names:
        try:
            metadata = logs.topics.get(name)
        except UnknownTopicError:
            continue  # deleted since it was listed
        configs = ",".join(
            f"{entry.name}={entry.value}"
            for entry in logs.topics.describe_configs(name)
            if entry.source is not ConfigSource.DEFAULT_CONFIG
        )
        topic_id = "" if metadata.topic_id == ZERO_TOPIC_ID else f"\tTopicId: {metadata.topic_id}"
        rows = _partition_rows(logs, metadata)
        print(
            f"Topic: {name}{topic_id}\tPartitionCount: {metadata.partitions}\tReplicationFactor: 1\tConfigs: {configs}"
        )
        widths = [max(len(str(cell)) for cell in column) for column in zip(COLUMNS, *rows, strict=True)]
        for row in (COLUMNS, *rows):
            print("\t" + "  ".join(str(cell).rjust(width) for cell, width in zip(row, widths, strict=True)))


def _partition_rows(logs: LogDirectory, topic: TopicMetadata) -> list[tuple[int, ...]]:
    """(partition, log start offset, log end offset, segments, bytes) of each partition; a partition without a
    directory yet is empty."""
    rows: list[tuple[int, ...]] = []
    with progress_bar(f"Reading {topic.name}") as progress:
        for partition in range(topic.partitions):
            with logs.partition(topic.name, partition) as log:
                view = log.view()
                bases = view.segment_bases
                size = sum(log.segment(base).size() for base in bases[:-1]) + (view.active_size if bases else 0)
            rows.append((partition, view.log_start_offset, view.log_end_offset, len(bases), size))
            if progress is not None:
                progress(partition + 1, topic.partitions)
    return rows
