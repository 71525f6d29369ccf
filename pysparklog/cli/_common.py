"""What several subcommands share: which log directory they work on, and its partitions."""

from __future__ import annotations

import argparse
import os
import re
import signal
import time
from types import FrameType, TracebackType

from pysparklog.cli.main import LOG_DIR_ENV
from pysparklog.errors import InvalidLogDirectoryError, PySparkLogError, UnknownTopicError
from pysparklog.storage.io import storage_for
from pysparklog.storage.log_dir import LogDirectory

#: The longest ``StopSignals.wait`` sleeps before it looks at the flag again.
_STOP_CHECK_S = 0.05


class UsageError(PySparkLogError):
    """Options that do not go together (``--config`` without ``--create``...): one error line, exit status 1,
    as Kafka's tools report them."""


def add_log_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--log-dir``, required unless ``$PYSPARKLOG_LOG_DIR`` names the directory: set once per shell,
    it spares repeating the path in every command, as ``--bootstrap-server`` is repeated for Kafka.

    ``None`` when given neither way, which the ``pysparklog`` parser reports naming both ways (argparse's own
    "required" error would name the option only)."""
    parser.add_argument(
        "--log-dir",
        default=os.environ.get(LOG_DIR_ENV) or None,
        metavar="DIR",
        help=f"the log directory holding the <topic>-<partition> directories (default: ${LOG_DIR_ENV})",
    )


def open_log_dir(path: str) -> LogDirectory:
    """The log directory at ``path``, which must exist: these commands only work on existing logs, and a
    mistyped path must not read as a directory without topics.

    Raises:
        InvalidLogDirectoryError: ``path`` is not a directory.
    """
    storage = storage_for(path)
    if not storage.is_directory(storage.root):
        raise InvalidLogDirectoryError(f"log directory {path} does not exist or is not a directory")
    return LogDirectory(storage)


def topic_filter(raw: str) -> re.Pattern[str]:
    """Kafka's topic filter (``TopicFilter.IncludeList``), matched against whole topic names: trimmed, commas as
    alternatives, no spaces, outer quotes dropped; a Python regular expression where Kafka's is Java's.

    Raises:
        UsageError: Not a regular expression.
    """
    regex = raw.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+|["']+$""", "", regex)
    try:
        return re.compile(regex)
    except re.error:
        raise UsageError(f"{regex} is an invalid regex.") from None


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


class StopSignals:
    """Signals (Ctrl-C's SIGINT, SIGTERM) as a request to stop, which a loop checks between two steps.

    The handlers only set a flag. A handler runs in the main thread between two bytecodes, possibly while
    that thread holds a lock: one that takes a lock itself (``threading.Event.set`` does, and
    ``Event.wait`` holds the same lock around its sleep) can wait forever for its own thread.
    """

    def __init__(self, *signals: signal.Signals) -> None:
        self._signals = signals
        self._previous: dict[signal.Signals, object] = {}
        self.requested = False

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True

    def __enter__(self) -> StopSignals:
        self._previous = {sig: signal.signal(sig, self._handle) for sig in self._signals}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, less if a stop is requested meanwhile; whether one was."""
        deadline = time.monotonic() + seconds
        while not self.requested:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(remaining, _STOP_CHECK_S))
        return self.requested
