"""``pysparklog log-cleaner``: a broker's log maintenance (retention and compaction) for a log directory.

Without a broker nothing deletes old segments or compacts topics unless someone runs it: this
command is that someone. Each pass runs ``pysparklog.storage.cleaner.run_cleaner``: retention for
every partition, then compaction of the partitions of compacted topics that are due, dirtiest
first. ``--once`` (the default) runs one pass; ``--interval-ms`` runs a pass, waits, and again,
until SIGINT or SIGTERM, which end the command after the pass under way. Writers and readers in
other processes go on meanwhile. A partition that fails (a corrupt segment) is reported on stderr
and skipped, and the pass goes on; ``--once`` then ends with status 1. One line is printed per
partition a pass changed::

    retention orders-0: deleted 2 segments (retention time breach), log start offset 1200
    compaction users-0: offsets [0, 5400): 3 segments, 5400 records, 81920 bytes -> 1, 60 records, 2048 bytes
"""

from __future__ import annotations

import argparse
import signal
import sys

from pysparklog.cli._common import StopSignals, add_log_dir_argument, open_log_dir
from pysparklog.cli.progress import progress_bar
from pysparklog.storage.cleaner import CleanerReport, run_cleaner
from pysparklog.storage.log_dir import LogDirectory

EXIT_PARTITION_FAILED = 1


def _interval(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of milliseconds")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``log-cleaner`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "log-cleaner",
        help="delete old segments and compact compacted topics, as a broker's log manager and log cleaner do",
        description="Run retention (cleanup.policy=delete) and compaction (cleanup.policy=compact) over the "
        "partitions of a log directory, once or every --interval-ms until SIGINT or SIGTERM.",
    )
    add_log_dir_argument(parser)
    parser.add_argument("--topic", help="only this topic's partitions")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="run one pass and exit (the default)")
    when.add_argument(
        "--interval-ms", type=_interval, metavar="MS", help="run a pass every MS milliseconds until interrupted"
    )
    parser.set_defaults(run=run)


def describe(report: CleanerReport) -> list[str]:
    """The lines a pass prints for one partition: one per thing it changed."""
    name = f"{report.topic}-{report.partition}"
    lines = []
    retention = report.retention
    if retention is not None and retention.deleted:
        reasons = ", ".join(sorted({d.reason.value for d in retention.deleted}))
        lines.append(
            f"retention {name}: deleted {_count(len(retention.deleted), 'segment')} ({reasons}), "
            f"log start offset {retention.log_start_offset}"
        )
    result = report.compaction
    if result is not None and result.cleaned and result.cleanable is not None:
        lines.append(
            f"compaction {name}: offsets [{result.cleanable.first_dirty}, {result.end_offset}): "
            f"{_count(result.segments_cleaned, 'segment')}, {result.records_read} records, {result.bytes_read} bytes "
            f"-> {result.segments_written}, {result.records_kept} records, {result.bytes_written} bytes"
        )
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _pass(logs: LogDirectory, topic: str | None) -> bool:
    """One pass, its lines printed as they come; False when a partition failed (reported on stderr)."""
    ok = True
    with progress_bar("Cleaning") as progress:
        reports = run_cleaner(logs, topic, progress=progress)
    for report in reports:
        for line in describe(report):
            print(line, flush=True)
        if report.error is not None:
            print(f"pysparklog log-cleaner: error: {report.topic}-{report.partition}: {report.error}", file=sys.stderr)
            ok = False
    return ok


def run(args: argparse.Namespace) -> int:
    logs = open_log_dir(args.log_dir)
    if args.interval_ms is None:
        return 0 if _pass(logs, args.topic) else EXIT_PARTITION_FAILED
    # A signal lets the pass under way finish: its swaps are crash-safe, but a finished pass is tidier.
    with StopSignals(signal.SIGINT, signal.SIGTERM) as stop:
        while not stop.requested:
            _pass(logs, args.topic)
            stop.wait(args.interval_ms / 1000)
    return 0
