"""The ``pysparklog`` command: one entry point, one module per subcommand.

A subcommand is a module in this package with a ``register(subparsers)`` function that adds its
parser and sets ``run`` (parsed arguments -> exit status) as a default; listing the module in
``COMMANDS`` is all it takes to add one.

Whatever goes wrong, a command ends with one line on stderr, ``pysparklog <command>: error: <what>``,
and a non-zero status, never a traceback: the people reading it are looking at a broken log, not at
pysparklog's code. :func:`main` holds that for every subcommand at once. pysparklog's own errors and
``OSError`` print their message; any other exception (a bug, or damage nothing recognised) prints its
type and message, and with ``PYSPARKLOG_DEBUG=1`` in the environment its traceback too, for a bug
report. Ctrl-C ends a command with status 130 and ``interrupted`` (the console tools print their
count instead, as Kafka's do), and a reader that went away (``| head``) ends it quietly.

The subcommands are imported inside :func:`main`, after those rules are in force, so that a Ctrl-C
while the engine's modules load is reported like any other.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import io
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, Protocol

from pysparklog.errors import PySparkLogError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C ended
DEBUG_ENV = "PYSPARKLOG_DEBUG"
#: The environment variable naming the log directory when ``--log-dir`` is not given.
LOG_DIR_ENV = "PYSPARKLOG_LOG_DIR"


class Command(Protocol):
    """What a subcommand module provides."""

    def register(self, subparsers: argparse._SubParsersAction[Any]) -> None: ...


#: The subcommand modules of ``pysparklog.cli``, in ``--help`` order.
COMMANDS: tuple[str, ...] = (
    "dump_log",
    "delete_records",
    "get_offsets",
    "topics",
    "configs",
    "console_producer",
    "console_consumer",
    "log_cleaner",
    "consumer_groups",
    "transactions",
    "serve",
)


#: Kafka's tools' options for reaching a broker, which a log directory replaces.
BROKER_OPTIONS = ("--bootstrap-server", "--bootstrap-controller", "--command-config")


class _Parser(argparse.ArgumentParser):
    """An argument parser that reports a usage error in one line (usage is in ``--help``) and never takes an
    abbreviation for an option (``--formatter`` is not ``--formatter-property``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def parse_command(self, argv: list[str] | None) -> argparse.Namespace:
        """The arguments, with a usage error reported by the subcommand it concerns (``pysparklog topics: error:
        unrecognized arguments: ...``), and an option of Kafka's for reaching a broker named as such.

        A missing log directory is reported here rather than by argparse, whose "the following arguments are
        required: --log-dir" would not say that ``$PYSPARKLOG_LOG_DIR`` gives it too.

        Raises:
            SystemExit: A usage error, reported.
        """
        given = sys.argv[1:] if argv is None else argv
        broker = next((arg.split("=", 1)[0] for arg in given if arg.split("=", 1)[0] in BROKER_OPTIONS), None)
        subcommands = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction)).choices
        named = next((arg for arg in given if arg in subcommands), None)
        reporter = subcommands[named] if named is not None else self
        if broker is not None:
            reporter.error(
                f"{broker} names a broker, and pysparklog has none: give the log directory with --log-dir (or "
                f"${LOG_DIR_ENV})"
            )
        args, extras = self.parse_known_args(argv)
        if extras:
            reporter.error(f"unrecognized arguments: {' '.join(extras)}")
        if getattr(args, "log_dir", "") is None:  # a subcommand that takes --log-dir, given neither way
            reporter.error(f"--log-dir is required (or set {LOG_DIR_ENV})")
        return args


def build_parser() -> _Parser:
    parser = _Parser(prog="pysparklog", description="Tools for pysparklog's Kafka-compatible log directories.")
    parser.add_argument("--version", action="version", version=f"pysparklog {_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        command: Command = importlib.import_module(f"pysparklog.cli.{name}")
        command.register(subparsers)
    return parser


def _version() -> str:
    """The installed distribution's version."""
    try:
        return importlib.metadata.version("pysparklog")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def describe_error(error: BaseException) -> str:
    """What went wrong, on one line: pysparklog's message; ``No such file or directory: x.log`` rather than
    Python's ``[Errno 2] ...: 'x.log'``; the type and message of anything else."""
    if isinstance(error, PySparkLogError):
        text = str(error)
    elif isinstance(error, OSError) and error.strerror and error.filename is not None:
        text = f"{error.strerror}: {os.fsdecode(error.filename)}"
    elif isinstance(error, OSError):
        text = str(error)
    else:
        text = f"{type(error).__name__}: {error}".removesuffix(": ")
        if not _debugging():
            text += f" (an unexpected error: {DEBUG_ENV}=1 shows where it happened)"
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(error).__name__


def _debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _report(command: str, what: str, error: BaseException | None = None) -> None:
    """One line on stderr, after the traceback when debugging; nothing if stderr is gone too."""
    try:
        if error is not None and _debugging():
            traceback.print_exception(error, file=sys.stderr)
        print(f"{command}: {what}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: there is nowhere left to say it
        pass


def _silence_stdout() -> None:
    """The reader of stdout went away (``| head``): send what is still buffered nowhere, so that Python
    does not report the failed flush at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (a test's capture)
        pass


@contextmanager
def _thread_errors_reported(command: list[str]) -> Iterator[None]:
    """An exception that ends a background thread (a consumer's heartbeats, a producer's sender) is
    reported like the command's own, on one line, instead of by Python's default hook."""

    def report(hook: threading.ExceptHookArgs) -> None:
        if hook.exc_value is not None and not isinstance(hook.exc_value, SystemExit):
            name = hook.thread.name if hook.thread is not None else "a thread"
            _report(command[0], f"error: in {name}: {describe_error(hook.exc_value)}", hook.exc_value)

    previous = threading.excepthook
    threading.excepthook = report
    try:
        yield
    finally:
        threading.excepthook = previous


def _use_utf8(stream: object) -> None:
    """Print UTF-8 whatever the locale, as Kafka's tools do with ``-Dstdout.encoding=UTF-8``."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(encoding="utf-8", errors="surrogateescape")


def main(argv: list[str] | None = None) -> int:
    """Run ``pysparklog`` with ``argv`` (default: the process arguments) and return its exit status."""
    command = ["pysparklog"]  # named once the arguments are parsed; a list, for the thread hook to see it
    with _thread_errors_reported(command):
        try:
            _use_utf8(sys.stdout)
            _use_utf8(sys.stderr)
            try:
                args = build_parser().parse_command(argv)
            except SystemExit as exit_:  # --help, or a usage error already reported
                status = exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
            else:
                command[0] = f"pysparklog {args.command}"
                run: Callable[[argparse.Namespace], int] = args.run
                status = run(args)
            sys.stdout.flush()  # a reader that went away shows here, not in Python's exit
            return status
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_ERROR
        except KeyboardInterrupt as interrupt:
            _report(command[0], "interrupted", interrupt)
            return EXIT_INTERRUPTED
        except Exception as error:  # noqa: BLE001 (the promise: one line, whatever the error)
            _report(command[0], f"error: {describe_error(error)}", error)
            return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
