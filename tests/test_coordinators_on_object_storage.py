"""The coordinators of a log directory on an object store: the group's membership, the transactions' sessions and
the Spark sink's decisions, each kept in small objects changed under a lease (what needs no partition log), and
replaced only if still the version read, so that a holder that lost its lease writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysparklog import LogDirectory, TopicPartition
from pysparklog.group import GroupCoordinator, JoinRequest, describe_group, list_group_ids
from pysparklog.spark.sink import SinkCommitLog
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.transactions import TransactionCoordinator, TransactionState
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
