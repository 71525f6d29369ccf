"""The ``pysparklog`` command: one entry point, one module per subcommand.

A subcommand is a module in this package with a ``register(subparsers)`` function that adds its
parser and sets ``run`` (parsed arguments -> exit status) as a default; listing the module in
``COMMANDS`` is all it takes to add one. Errors end the command with one line on stderr,
``pysparklog <command>: error: <what>``, and a non-zero status, never a traceback: the people
reading them are looking at a broken log, not at pysparklog's code.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from pysparklog.cli import (
    configs,
    console_consumer,
    console_producer,
    consumer_groups,
    delete_records,
    dump_log,
    get_offsets,
    log_cleaner,
    topics,
    transactions,
)
from pysparklog.errors import PySparkLogError

EXIT_ERROR = 1
EXIT_USAGE = 2


class Command(Protocol):
    """What a subcommand module provides."""

    def register(self, subparsers: argparse._SubParsersAction[Any]) -> None: ...


COMMANDS: tuple[Command, ...] = (
    dump_log,
    delete_records,
    get_offsets,
    topics,
    configs,
    console_producer,
    console_consumer,
    log_cleaner,
    consumer_groups,
    transactions,
)


class _Parser(argparse.ArgumentParser):
    """An argument parser that reports a usage error in one line (usage is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pysparklog", description="Tools for pysparklog's Kafka-compatible log directories.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def _describe(error: OSError) -> str:
    """``No such file or directory: x.log`` rather than Python's ``[Errno 2] ...: 'x.log'``."""
    if error.strerror and error.filename is not None:
        return f"{error.strerror}: {os.fsdecode(error.filename)}"
    return str(error)


def _use_utf8(stream: object) -> None:
    """Print UTF-8 whatever the locale, as Kafka's tools do with ``-Dstdout.encoding=UTF-8``."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(encoding="utf-8", errors="surrogateescape")


def main(argv: list[str] | None = None) -> int:
    """Run ``pysparklog`` with ``argv`` (default: the process arguments) and return its exit status."""
    _use_utf8(sys.stdout)
    _use_utf8(sys.stderr)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already reported
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python from reporting the
        # failed flush of stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except PySparkLogError as error:
        message = str(error)
    except OSError as error:
        message = _describe(error)
    print(f"pysparklog {args.command}: error: {message}", file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
