"""``pysparklog configs``: what Kafka's ``kafka-configs.sh --entity-type topics`` does, on a log directory.

``--describe`` prints Kafka's lines: ``Dynamic configs for topic T are:`` (``All`` with ``--all``), then per config
``  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, STATIC_BROKER_CONFIG:log.k=v, DEFAULT_CONFIG:log.k=v}``,
the static layer being the log directory's ``server.properties``. ``--alter`` takes ``--add-config 'k1=v1,k2=[a,b]'``
(or ``--add-config-file``) and ``--delete-config 'k1,k2'`` and prints ``Completed updating config for topic T.``;
the change reaches processes that have the topic open at their next append.

Where Kafka's tool differs:

* Topics are the only entity type.
* Describing a topic that does not exist is an error; Kafka's tool says so on stdout and exits with 0.
* ``--all`` lists the topic configs pysparklog knows, not every config of a Kafka topic.
"""

from __future__ import annotations

import argparse

from pysparklog.cli._common import UsageError, add_log_dir_argument, open_log_dir
from pysparklog.errors import InvalidConfigError
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topic_config import (
    TOPIC_CONFIGS,
    ConfigSource,
    parse_config_list,
    parse_properties,
    topic_config,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``configs`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "configs",
        help="describe and alter topic configs as Kafka's kafka-configs.sh does",
        description="Describe and alter the configs of a log directory's topics (Kafka's kafka-configs.sh). Topic "
        f"configs: {', '.join(TOPIC_CONFIGS)}.",
    )
    add_log_dir_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the configs of the topic, or of every topic")
    actions.add_argument("--alter", action="store_true", help="add or delete configs of the topic")
    parser.add_argument("--entity-type", choices=["topics"], help="the type of entity: topics")
    parser.add_argument("--entity-name", metavar="TOPIC", help="the topic")
    parser.add_argument("--topic", metavar="TOPIC", help="the same as --entity-type topics --entity-name TOPIC")
    parser.add_argument("--all", action="store_true", help="with --describe: every config, not only overrides")
    parser.add_argument(
        "--add-config",
        metavar="K1=V1,K2=[A,B]",
        help="configs to set; square brackets group a value that holds commas",
    )
    parser.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    parser.add_argument("--delete-config", metavar="K1,K2", help="configs to remove")
    parser.set_defaults(run=run)


def _topic(args: argparse.Namespace) -> str | None:
    """The topic named, checking the entity options as Kafka's ``ConfigCommandOptions.checkArgs`` does."""
    if args.topic is not None:
        if args.entity_type is not None or args.entity_name is not None:
            raise UsageError("--entity-{type,name} should not be used in conjunction with specific entity flags")
        return str(args.topic)
    if args.entity_type is None:
        raise UsageError("At least one entity type must be specified (--entity-type topics, or --topic)")
    return None if args.entity_name is None else str(args.entity_name)


def run(args: argparse.Namespace) -> int:
    """Describe or alter."""
    topic = _topic(args)
    changes = args.add_config is not None or args.add_config_file is not None or args.delete_config is not None
    if args.describe and changes:
        raise UsageError("--add-config, --add-config-file and --delete-config are only valid with --alter")
    if args.alter and args.all:
        raise UsageError("--all is only valid with --describe")
    logs = open_log_dir(args.log_dir)
    if args.describe:
        _describe(logs, topic, args.all)
        return 0
    if topic is None:
        raise UsageError("An entity name must be specified with --alter of topics")
    if not changes:
        raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be specified")
    if args.add_config is not None and args.add_config_file is not None:
        raise UsageError("Only one of --add-config or --add-config-file must be specified")
    _alter(logs, topic, args)
    return 0


def _describe(logs: LogDirectory, topic: str | None, describe_all: bool) -> None:
    for name in [topic] if topic is not None else logs.topics.names():
        entries = logs.topics.describe_configs(name)
        print(f"{'All' if describe_all else 'Dynamic'} configs for topic {name} are:")
        for entry in entries:
            if describe_all or entry.source is ConfigSource.DYNAMIC_TOPIC_CONFIG:
                synonyms = ", ".join(str(synonym) for synonym in entry.synonyms)
                print(f"  {entry.name}={entry.value} sensitive=false synonyms={{{synonyms}}}")


def _alter(logs: LogDirectory, topic: str, args: argparse.Namespace) -> None:
    if args.add_config_file is not None:
        with open(args.add_config_file, encoding="latin-1") as f:
            additions = parse_properties(f.read())
    else:
        additions = parse_config_list(args.add_config) if args.add_config is not None else {}
    deletions = [name.strip() for name in args.delete_config.split(",")] if args.delete_config is not None else []
    for name in deletions:
        topic_config(name)  # an unknown name is refused with the list of known ones
    current = logs.topics.get(topic).configs
    unset = [name for name in deletions if name not in current]
    if unset:
        # Kafka's tool refuses to delete what the topic does not set (the broker would ignore it).
        raise InvalidConfigError(f"Invalid config(s): {','.join(unset)} (not set on topic {topic})")
    logs.topics.alter_configs(topic, additions, deletions)
    print(f"Completed updating config for topic {topic}.")
