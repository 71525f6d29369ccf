"""The coordinators of a log directory on an object store: the group's membership, the transactions' sessions and
the Spark sink's decisions, each kept in small objects changed under a lease (what needs no partition log), and
replaced only if still the version read, so that a holder that lost its lease writes nothing."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from pysparklog import LogDirectory, TopicPartition
from pysparklog.errors import MetadataChangedError
from pysparklog.group import GroupCoordinator, JoinRequest, describe_group, list_group_ids
from pysparklog.spark.sink import SinkCommitLog
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.storage.objects.lease import LEASE_MS_VARIABLE
from pysparklog.transactions import ProducerSession, TransactionCoordinator, TransactionState
from tests.conftest import BUCKET


@pytest.fixture
def logs(s3_endpoint: str, tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(f"s3://{BUCKET}{tmp_path}/logs")
    assert isinstance(logs.storage, ObjectStorage)
    logs.topics.create("t", 2)
    return logs


def test_group_membership(logs: LogDirectory) -> None:
    coordinator = GroupCoordinator(logs, "g")
    member = coordinator.join(JoinRequest("c", ("range",), 10_000), ["t"])
    assert member.assigned == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert coordinator.heartbeat(member.member_id, ["t"]).generation == member.generation
    assert list_group_ids(logs) == ["g"]
    description = describe_group(LogDirectory(logs.path), "g")  # found again from the URL alone
    assert description is not None and [m.member_id for m in description.members] == [member.member_id]
    coordinator.leave(member.member_id)
    assert coordinator.delete()
    assert list_group_ids(logs) == []
    coordinator.close()


def test_transaction_sessions(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    first = coordinator.init_producer_id("tx", 60_000)
    second = coordinator.init_producer_id("tx", 60_000)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    assert TransactionCoordinator(logs).init_producer_id("other", 60_000).producer_id != first.producer_id
    coordinator.end_transaction("tx", second, commit=True)  # no partition: complete at once
    described = coordinator.describe("tx")
    assert described is not None and described.state == TransactionState.COMPLETE_COMMIT
    coordinator.forget("tx")
    assert coordinator.transactional_ids() == ["other"]
    coordinator.close()


def test_sink_decisions(logs: LogDirectory) -> None:
    sink = SinkCommitLog(logs, "sink")
    assert not sink.decided("query", 0)
    sink.commit("query", 0, [])
    sink.commit("query", 1, [])
    decision = sink.read()
    assert decision is not None and decision.complete and decision.batch_id == 1
    assert SinkCommitLog(LogDirectory(logs.path), "sink").decided("query", 1)
    sink.forget()
    assert sink.read() is None


def _commit_stopped_past_the_lease(root: str, session: ProducerSession, outcome: multiprocessing.Queue[str]) -> None:
    """Commit the transaction of ``tx``, stopping this whole process (its lease's renewer with it) once it has read
    the state under the lease: a process paused for longer than its lease, then resumed. Puts what the commit
    raised in ``outcome``."""
    stopped: list[bool] = []

    def clock() -> int:  # read by the commit between its read of the state and its save
        if not stopped:
            stopped.append(True)
            os.kill(os.getpid(), signal.SIGSTOP)
        return int(time.time() * 1000)

    coordinator = TransactionCoordinator(LogDirectory(root), clock=clock)
    try:
        coordinator.end_transaction("tx", session, commit=True)
        outcome.put("committed")
    except Exception as error:
        outcome.put(f"{type(error).__name__}: {error}")
    finally:
        coordinator.close()


def _wait_until_stopped(process: multiprocessing.process.BaseProcess) -> None:
    assert process.pid is not None
    while True:
        assert process.is_alive(), f"the holder ended (exit code {process.exitcode}) before it stopped"
        with open(f"/proc/{process.pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)


@pytest.mark.slow
def test_a_holder_stopped_past_its_lease_fails_its_write_once_another_took_the_lease_over(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real lease taken over: holder A reads an open transaction under the lease and is stopped (SIGSTOP) for
    longer than the lease, B takes the lease over, fences A's session and commits another transaction; A, resumed,
    fails to record its decision, and B's state stands."""
    monkeypatch.setenv(LEASE_MS_VARIABLE, "1000")  # for B's store, made below, and A's, made in its own process
    short_leases = LogDirectory(ObjectStorage(logs.path))
    coordinator = TransactionCoordinator(short_leases)
    first = coordinator.init_producer_id("tx", 60_000)
    coordinator.add_partitions("tx", first, [TopicPartition("t", 0)])
    context = multiprocessing.get_context("spawn")  # a forked child would inherit obstore's runtime without threads
    outcome: multiprocessing.Queue[str] = context.Queue()
    holder = context.Process(target=_commit_stopped_past_the_lease, args=(logs.path, first, outcome))
    holder.start()
    try:
        _wait_until_stopped(holder)
        newer = coordinator.init_producer_id("tx", 60_000)  # waits for A's lease to end, then takes it over
        coordinator.end_transaction("tx", newer, commit=True)
    finally:
        os.kill(holder.pid or 0, signal.SIGCONT)
    holder.join(120)
    assert holder.exitcode == 0
    assert outcome.get(timeout=10).startswith(f"{MetadataChangedError.__name__}: {logs.path}/pysparklog-txn.tx.json")
    meta = coordinator.describe("tx")
    assert meta is not None and (meta.state, meta.session) == (TransactionState.COMPLETE_COMMIT, newer)
    assert newer.producer_epoch == first.producer_epoch + 2, "A's open transaction was aborted, fencing it"
    coordinator.close()
