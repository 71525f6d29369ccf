"""``pysparklog transactions``: Kafka's ``kafka-transactions.sh`` (``TransactionsCommand``) on a log directory.

Subcommands:

* ``list``: every transactional id with its producer id and state (Kafka's columns less ``Coordinator``).
* ``describe --transactional-id ID``: Kafka's describe columns (less ``CoordinatorId``).
* ``find-hanging``: the transactions open longer than their timeout; they hold back the last stable
  offset of every partition they wrote, so ``read_committed`` readers wait on them.
* ``abort --transactional-id ID`` or ``abort --expired``: abort with the producer's epoch bumped, as the
  coordinator does on a timeout, so the stalled producer is fenced.

Where Kafka's tool differs: ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces
``--bootstrap-server``. Kafka's ``abort`` takes a partition and a start offset because a broker may hold
a transaction its coordinator forgot; here the coordinator's state is in the log directory, so a
transaction is aborted by its id. A prepared transaction (an exactly-once Spark sink's, awaiting the
driver) is never past its timeout: ``abort`` by id still aborts it.
"""

from __future__ import annotations

import argparse

from pysparklog.cli._common import UsageError, add_log_dir_argument, open_log_dir
from pysparklog.transactions import TransactionCoordinator, TransactionMetadata, TransactionState


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``transactions`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "transactions",
        help="list, describe and abort transactions, as Kafka's kafka-transactions.sh does",
        description="List, describe and abort the transactions of a log directory, as Kafka's "
        "kafka-transactions.sh (TransactionsCommand) does.",
    )
    add_log_dir_argument(parser)
    commands = parser.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND")
    commands.add_parser("list", help="list the transactional ids")
    describe = commands.add_parser("describe", help="describe one transactional id")
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    commands.add_parser("find-hanging", help="list the transactions open longer than their timeout")
    abort = commands.add_parser("abort", help="abort a transaction, fencing its producer")
    which = abort.add_mutually_exclusive_group(required=True)
    which.add_argument("--transactional-id", metavar="ID")
    which.add_argument("--expired", action="store_true", help="every transaction open longer than its timeout")
    parser.set_defaults(run=run)


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell, as Kafka's tools print them."""
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(" ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def _describe_row(meta: TransactionMetadata, now: int) -> list[str]:
    open_since = meta.start_ms if meta.state is TransactionState.ONGOING else -1
    state = meta.state.value + (" (prepared)" if meta.prepared else "")
    return [
        meta.transactional_id,
        str(meta.producer_id),
        str(meta.producer_epoch),
        state,
        str(meta.timeout_ms),
        str(open_since),
        str(now - open_since) if open_since >= 0 else "None",
        ",".join(f"{tp.topic}-{tp.partition}" for tp in meta.partitions),
    ]


_DESCRIBE_HEADER = [
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]


def run(args: argparse.Namespace) -> int:
    coordinator = TransactionCoordinator(open_log_dir(args.log_dir))
    now = coordinator.now_ms()
    states = [m for m in (coordinator.describe(t) for t in coordinator.transactional_ids()) if m is not None]
    command = args.transactions_command
    if command == "list":
        rows = [[m.transactional_id, str(m.producer_id), m.state.value] for m in states]
        print(_table(["TransactionalId", "ProducerId", "TransactionState"], rows))
    elif command == "describe":
        meta = coordinator.describe(args.transactional_id)
        if meta is None:
            raise UsageError(f"Transactional id {args.transactional_id!r} not found in {coordinator.log_dir.path}")
        print(_table(_DESCRIBE_HEADER, [_describe_row(meta, now)]))
    elif command == "find-hanging":
        hanging = [m for m in states if coordinator.is_expired(m)]
        print(_table(_DESCRIBE_HEADER, [_describe_row(m, now) for m in hanging]))
    elif args.expired:
        for transactional_id in coordinator.abort_expired():
            print(f"Aborted the transaction of {transactional_id}")
    elif coordinator.abort(args.transactional_id):
        print(f"Aborted the transaction of {args.transactional_id}")
    else:
        print(f"No open transaction for {args.transactional_id}")
    return 0
