"""``pysparklog transactions``: list, describe, find the hanging transaction a dead producer left, abort it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings
from pysparklog.storage.transaction_index import READ_COMMITTED
from pysparklog.structs import TopicPartition
from pysparklog.transactions import TransactionCoordinator
from tests.cli.test_dump_log import run_cli
from tests.conftest import keyed_table


@pytest.fixture
def hanging(tmp_path: Path) -> Path:
    """A log directory where producer ``dead`` appended in a transaction a second ago, its timeout 1 ms, and
    ``done`` committed one."""
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 1)
    coordinator = TransactionCoordinator(logs)
    for transactional_id in ("dead", "done"):
        session = coordinator.init_producer_id(transactional_id, 1 if transactional_id == "dead" else 60000)
        coordinator.add_partitions(transactional_id, session, [TopicPartition("t", 0)])
        settings = BatchSettings(
            producer_id=session.producer_id, producer_epoch=session.producer_epoch, base_sequence=0, transactional=True
        )
        with logs.partition("t", 0) as log:
            log.append_arrow(keyed_table(3), settings)
        if transactional_id == "done":
            coordinator.end_transaction("done", session, commit=True)
    return tmp_path


def test_list_describe_and_find_the_hanging_transaction(hanging: Path) -> None:
    listed = run_cli("transactions", "--log-dir", str(hanging), "list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[::2] for line in listed.stdout.splitlines()] == [
        ["TransactionalId", "TransactionState"],
        ["dead", "Ongoing"],
        ["done", "CompleteCommit"],
    ]
    described = run_cli("transactions", "--log-dir", str(hanging), "describe", "--transactional-id", "dead")
    header, row = described.stdout.splitlines()
    fields = dict(zip(header.split(), row.split(), strict=True))
    assert fields["TransactionState"] == "Ongoing" and fields["TopicPartitions"] == "t-0"
    assert fields["TransactionTimeoutMs"] == "1" and int(fields["TransactionDurationMs"]) >= 0
    hanging_out = run_cli("transactions", "--log-dir", str(hanging), "find-hanging").stdout.splitlines()
    assert [line.split()[0] for line in hanging_out[1:]] == ["dead"]
    missing = run_cli("transactions", "--log-dir", str(hanging), "describe", "--transactional-id", "nobody")
    assert missing.returncode != 0 and "'nobody' not found" in missing.stderr


def test_abort_expired_unblocks_read_committed_readers(hanging: Path) -> None:
    with LogDirectory(hanging).partition("t", 0) as log:
        assert log.last_stable_offset == 0  # the dead producer's transaction holds everyone back
    aborted = run_cli("transactions", "--log-dir", str(hanging), "abort", "--expired")
    assert aborted.returncode == 0 and aborted.stdout == "Aborted the transaction of dead\n"
    with LogDirectory(hanging).partition("t", 0) as log:
        assert log.last_stable_offset == log.log_end_offset
        committed = [b.num_rows for b in log.read_arrow(0, isolation_level=READ_COMMITTED)]
    assert sum(committed) == 3  # ``done``'s records; ``dead``'s are aborted
    again = run_cli("transactions", "--log-dir", str(hanging), "abort", "--transactional-id", "dead")
    assert again.stdout == "No open transaction for dead\n"
    state = json.loads((hanging / "pysparklog-txn.dead.json").read_text())
    assert state["state"] == "CompleteAbort"


def test_console_consumer_reads_committed_records_only_when_asked(hanging: Path) -> None:
    """Kafka's ``--isolation-level``: read_committed stops at the dead producer's open transaction."""
    base = ["console-consumer", "--log-dir", str(hanging), "--topic", "t", "--from-beginning", "--timeout-ms", "500"]
    everything = run_cli(*base)
    committed = run_cli(*base, "--isolation-level", "read_committed")
    assert everything.returncode == committed.returncode == 0, committed.stderr
    assert len(everything.stdout.splitlines()) == 6  # both producers' records
    assert committed.stdout == ""  # the last stable offset is 0: ``dead`` opened its transaction first
