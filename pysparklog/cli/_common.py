"""What several subcommands share: which log directory they work on, and its partitions."""

from __future__ import annotations

import argparse
import os

from pysparklog.errors import InvalidLogDirectoryError, PySparkLogError, UnknownTopicError
from pysparklog.storage.log_dir import LogDirectory

LOG_DIR_ENV = "PYSPARKLOG_LOG_DIR"


class UsageError(PySparkLogError):
    """Options that do not go together (``--config`` without ``--create``...): one error line, exit status 1,
    as Kafka's tools report them."""


def add_log_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--log-dir``, required unless ``$PYSPARKLOG_LOG_DIR`` names the directory: set once per shell,
    it spares repeating the path in every command, as ``--bootstrap-server`` is repeated for Kafka."""
    default = os.environ.get(LOG_DIR_ENV) or None
    parser.add_argument(
        "--log-dir",
        default=default,
        required=default is None,
        metavar="DIR",
        help=f"the log directory holding the <topic>-<partition> directories (default: ${LOG_DIR_ENV})",
    )


def open_log_dir(path: str) -> LogDirectory:
    """The log directory at ``path``, which must exist: these commands only work on existing logs, and a
    mistyped path must not read as a directory without topics.

    Raises:
        InvalidLogDirectoryError: ``path`` is not a directory.
    """
    if not os.path.isdir(path):
        raise InvalidLogDirectoryError(f"log directory {path} does not exist or is not a directory")
    return LogDirectory(path)


def topic_partitions(logs: LogDirectory) -> list[tuple[str, int]]:
    """Every ``(topic, partition)`` of the log directory's topics, as a broker would list them: each topic has
    the partitions of its metadata, with or without data."""
    found = []
    for name in logs.topics.names():
        try:
            count = logs.topics.get(name).partitions
        except UnknownTopicError:
            continue  # deleted since it was listed
        found += [(name, partition) for partition in range(count)]
    return found
