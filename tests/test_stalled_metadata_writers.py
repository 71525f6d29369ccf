"""Each kind of metadata with a real holder stopped (SIGSTOP) between its read under the lock and its write, for
longer than its lease, while another process changes the same state: on the object store the other takes the lease
over and writes, and the resumed holder's write fails with ``MetadataChangedError``, changing nothing; on a
filesystem the ``flock`` holds, so the other waits until the stopped holder resumes and finishes. Either way the
newer change is what stands. (Committed offsets, which are appends rather than files: ``test_commit_fencing``.)"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pysparklog import LogDirectory, TopicPartition
from pysparklog.errors import MetadataChangedError
from pysparklog.group import GroupCoordinator, JoinRequest, describe_group
from pysparklog.spark.sink import SinkCommitLog
from pysparklog.storage.io import versioned
from pysparklog.storage.objects.lease import LEASE_MS_VARIABLE
from pysparklog.storage.producer_ids import allocate_producer_id
from pysparklog.transactions import TransactionCoordinator, TransactionState
from tests.conftest import BUCKET

pytestmark = pytest.mark.slow

LEASE_MS = 1000


def wait_until_stopped(process: multiprocessing.process.BaseProcess) -> None:
    """Wait until ``process`` has stopped itself (its state in /proc is T), failing if it ended instead."""
    assert process.pid is not None
    while True:
        assert process.is_alive(), f"the holder ended (exit code {process.exitcode}) before it stopped"
        with open(f"/proc/{process.pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)


def _join(logs: LogDirectory, client_id: str) -> object:
    coordinator = GroupCoordinator(logs, "g")
    try:
        return coordinator.join(JoinRequest(client_id, ("range",), 60_000), ["t"]).member_id
    finally:
        coordinator.close()


def _members(logs: LogDirectory) -> object:
    description = describe_group(logs, "g")
    assert description is not None
    return sorted(m.client_id for m in description.members)


def _retention(value: str) -> Callable[[LogDirectory], object]:
    return lambda logs: logs.topics.alter_configs("t", {"retention.ms": value}).configs["retention.ms"]


def _decide(batch_id: int) -> Callable[[LogDirectory], object]:
    return lambda logs: SinkCommitLog(logs, "sink").commit("query", batch_id, [])


def _open_transaction(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    coordinator.add_partitions("tx", coordinator.init_producer_id("tx", 60_000), [TopicPartition("t", 0)])
    coordinator.close()


def _commit_open_transaction(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    meta = coordinator.describe("tx")
    assert meta is not None
    coordinator.end_transaction("tx", meta.session, commit=True)
    coordinator.close()


def _commit_in_a_new_session(logs: LogDirectory) -> None:
    """What a restarted producer does: its init_producer_id fences the open transaction (aborting it if still
    open), then it commits one of its own."""
    coordinator = TransactionCoordinator(logs)
    coordinator.end_transaction("tx", coordinator.init_producer_id("tx", 60_000), commit=True)
    coordinator.close()


def _transaction_state(logs: LogDirectory) -> object:
    meta = TransactionCoordinator(logs).describe("tx")
    assert meta is not None
    return meta.state, meta.producer_epoch


def _last_decision(logs: LogDirectory) -> object:
    decision = SinkCommitLog(logs, "sink").read()
    assert decision is not None
    return decision.batch_id


@dataclass(frozen=True)
class Kind:
    """A kind of metadata: the change the stalled holder makes, the newer one another process makes meanwhile,
    and the state read at the end, with what it must be when the stalled change failed (object store) and when
    it was made first and the newer one after it (filesystem)."""

    stalled: Callable[[LogDirectory], object]
    newer: Callable[[LogDirectory], object]
    state: Callable[[LogDirectory], object]
    after_refusal: object
    after_both: object
    prepare: Callable[[LogDirectory], object] = lambda logs: None


KINDS = {
    "group state": Kind(
        lambda logs: _join(logs, "stalled"),
        lambda logs: _join(logs, "newer"),
        _members,
        ["newer"],
        ["newer", "stalled"],
    ),
    "topics": Kind(
        _retention("1000"),
        _retention("2000"),
        lambda logs: logs.topics.get("t").configs.get("retention.ms"),
        "2000",
        "2000",
    ),
    "producer ids": Kind(
        lambda logs: allocate_producer_id(logs.storage),
        lambda logs: allocate_producer_id(logs.storage),
        lambda logs: allocate_producer_id(logs.storage),
        1,
        2,
    ),
    "sink decisions": Kind(_decide(0), _decide(1), _last_decision, 1, 1),
    "transactions": Kind(
        _commit_open_transaction,
        _commit_in_a_new_session,
        _transaction_state,
        (TransactionState.COMPLETE_COMMIT, 2),  # the open one aborted at epoch 1, fencing the stalled session
        (TransactionState.COMPLETE_COMMIT, 1),
        _open_transaction,
    ),
}


def _change_stopped_before_its_write(kind: str, root: str, outcome: multiprocessing.Queue[str]) -> None:
    """Make the kind's stalled change, stopping this whole process (a lease's renewer with it) once, right before
    its first conditional write: after it read the state under its lock and computed the change. Puts what the
    change did in ``outcome``."""
    write = versioned.VersionedFile.write

    def write_after_a_stop(self: versioned.VersionedFile, data: bytes) -> None:
        versioned.VersionedFile.write = write  # type: ignore[method-assign]
        os.kill(os.getpid(), signal.SIGSTOP)
        write(self, data)

    logs = LogDirectory(root)
    logs.topics.get("t")  # read before the stop: only the change's own write is to be stalled
    versioned.VersionedFile.write = write_after_a_stop  # type: ignore[method-assign]
    try:
        KINDS[kind].stalled(logs)
        outcome.put("changed")
    except Exception as error:
        outcome.put(f"{type(error).__name__}: {error}")


@pytest.mark.parametrize("backend", ["posix", "s3"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_holder_stopped_past_its_lease_never_writes_over_a_newer_change(
    kind: str, backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEASE_MS_VARIABLE, str(LEASE_MS))
    if backend == "s3":
        request.getfixturevalue("s3_endpoint")
    root = f"s3://{BUCKET}{tmp_path}/logs" if backend == "s3" else str(tmp_path / "logs")
    LogDirectory(root).topics.create("t", 1)
    KINDS[kind].prepare(LogDirectory(root))
    context = multiprocessing.get_context("spawn")  # a forked child would inherit obstore's runtime without threads
    outcome: multiprocessing.Queue[str] = context.Queue()
    holder = context.Process(target=_change_stopped_before_its_write, args=(kind, root, outcome))
    holder.start()
    newer = threading.Thread(target=KINDS[kind].newer, args=(LogDirectory(root),))
    try:
        wait_until_stopped(holder)
        newer.start()
        newer.join(3 * LEASE_MS / 1000)
        waited = newer.is_alive()
    finally:
        os.kill(holder.pid or 0, signal.SIGCONT)
    newer.join(60)
    holder.join(60)
    assert holder.exitcode == 0 and not newer.is_alive()
    stalled = outcome.get(timeout=10)
    if backend == "s3":
        assert not waited, "the newer change waited although the stopped holder's lease ran out"
        assert stalled.startswith(f"{MetadataChangedError.__name__}: "), stalled
        assert KINDS[kind].state(LogDirectory(root)) == KINDS[kind].after_refusal
    else:
        assert waited, "the newer change was made while the stopped holder held the flock"
        assert stalled == "changed"
        assert KINDS[kind].state(LogDirectory(root)) == KINDS[kind].after_both
