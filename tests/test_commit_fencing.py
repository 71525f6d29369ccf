"""Committed offsets fenced by the group's generation: a member that stalled between the coordinator's check that it
owns its partitions and the append of its commit, while the group moved on and the new owner committed, appends
nothing when it resumes, whether or not its lock held; and the generations recorded in ``__consumer_offsets`` stay
Kafka's records."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory, OffsetAndMetadata, TopicPartition
from pysparklog.errors import CommitFailedError, LogEndChangedError
from pysparklog.group import GroupCoordinator, JoinRequest
from pysparklog.offsets import (
    OFFSETS_TOPIC,
    OffsetStore,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from pysparklog.storage.objects.lease import LEASE_MS_VARIABLE
from tests.conftest import BUCKET
from tests.interop.kafka_tools import DumpLogSegments
from tests.test_stalled_metadata_writers import wait_until_stopped

PARTITION = TopicPartition("t", 0)
SESSION_TIMEOUT_MS = 1000
LEASE_MS = "1000"


@pytest.fixture(params=["posix", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A log directory with topic ``t`` on a filesystem or on the object store, whose leases (when it has them) run
    out after a second, in this process and in the processes it starts."""
    monkeypatch.setenv(LEASE_MS_VARIABLE, LEASE_MS)
    if request.param == "s3":
        request.getfixturevalue("s3_endpoint")
    logs = LogDirectory(f"s3://{BUCKET}{tmp_path}/logs" if request.param == "s3" else str(tmp_path / "logs"))
    logs.topics.create("t", 1)
    return logs.path


def _commit_stalled_after_the_ownership_check(root: str, offset: int, outcome: multiprocessing.Queue[str]) -> None:
    """Join group ``g``, then commit ``offset`` of ``t-0`` the way a consumer commits (the coordinator's ownership
    check, then the append in the generation it yields), stopping this whole process (a lease's renewer with it)
    between the two. Puts what the commit did in ``outcome``."""
    logs = LogDirectory(root)
    coordinator = GroupCoordinator(logs, "g")
    store = OffsetStore(logs)
    member = coordinator.join(JoinRequest("stalled", ("range",), SESSION_TIMEOUT_MS), ["t"])
    try:
        with coordinator.owning(member.member_id, [PARTITION], store.recorded_generation("g")) as generation:
            os.kill(os.getpid(), signal.SIGSTOP)
            store.commit("g", {PARTITION: OffsetAndMetadata(offset)}, generation=generation)
        outcome.put("committed")
    except Exception as error:
        outcome.put(f"{type(error).__name__}: {error}")
    finally:
        store.close()
        coordinator.close()


def _join_and_commit(root: str, offset: int) -> int:
    """A member that joins group ``g`` once the stalled one's session has run out, takes ``t-0`` and commits
    ``offset``; returns the generation it joined in."""
    logs = LogDirectory(root)
    coordinator = GroupCoordinator(logs, "g")
    with OffsetStore(logs) as store:
        member = coordinator.join(JoinRequest("newer", ("range",), 60_000), ["t"])
        assert member.owned == {PARTITION}
        store.commit_as(coordinator, member.member_id, {PARTITION: OffsetAndMetadata(offset)})
    coordinator.close()
    return member.generation


@pytest.mark.slow
def test_a_member_stalled_after_its_ownership_check_never_commits_over_the_new_owner(root: str) -> None:
    """The stalled member is stopped (SIGSTOP) past its session and any lease. On the object store the new owner
    takes the group's lease over, commits 100, and the resumed member's commit of 50 is refused by the generation
    check made with its append. On a filesystem the group's flock holds: the new owner waits until the stalled one
    resumes and commits; either way the last commit is the new owner's."""
    context = multiprocessing.get_context("spawn")  # a forked child would inherit obstore's runtime without threads
    outcome: multiprocessing.Queue[str] = context.Queue()
    holder = context.Process(target=_commit_stalled_after_the_ownership_check, args=(root, 50, outcome))
    holder.start()
    newer_generation: list[int] = []
    newer = threading.Thread(target=lambda: newer_generation.append(_join_and_commit(root, 100)))
    try:
        wait_until_stopped(holder)
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 0.2)  # the stalled member's session has run out
        newer.start()
        newer.join(3 * int(LEASE_MS) / 1000)
        lock_held = newer.is_alive()
    finally:
        os.kill(holder.pid or 0, signal.SIGCONT)
    newer.join(60)
    holder.join(60)
    assert holder.exitcode == 0 and newer_generation
    with OffsetStore(LogDirectory(root)) as store:
        assert store.committed("g") == {PARTITION: OffsetAndMetadata(100)}
        assert store.recorded_generation("g") == newer_generation[0]
    if root.startswith("s3://"):
        assert not lock_held, "the new owner waited for the stalled one although its lease ran out"
        refused = outcome.get(timeout=10)
        assert refused.startswith(f"{CommitFailedError.__name__}: commit of group 'g' refused"), refused
    else:
        assert lock_held, "the new owner joined while the stalled member held the group's lock"
        assert outcome.get(timeout=10) == "committed"  # it still owned the partition: the lock held


def test_a_commit_from_an_older_generation_appends_nothing(root: str) -> None:
    logs = LogDirectory(root)
    with OffsetStore(logs) as store:
        store.commit("g", {PARTITION: OffsetAndMetadata(100)}, generation=2)
        log = logs.partition(OFFSETS_TOPIC, store.partition_for("g"))
        end = log.log_end_offset
        with pytest.raises(CommitFailedError, match="made in generation 1, and the group has since moved to"):
            store.commit("g", {PARTITION: OffsetAndMetadata(50)}, generation=1)
        assert log.log_end_offset == end
        store.commit("g", {PARTITION: OffsetAndMetadata(120)}, generation=2)  # the generation is recorded once
        assert log.log_end_offset == end + 1
    with OffsetStore(logs) as reader:
        assert reader.committed("g") == {PARTITION: OffsetAndMetadata(120)}
        assert reader.recorded_generation("g") == 2


def test_a_group_started_again_over_a_brokers_generations_commits_past_them(root: str) -> None:
    """A copy of a broker's ``__consumer_offsets`` records the broker's generations of the group; a group whose
    state starts here again (generation 1) takes its generation past them rather than having its commits refused."""
    logs = LogDirectory(root)
    with OffsetStore(logs) as store:
        store.commit("other", {PARTITION: OffsetAndMetadata(1)})  # creates the topic as a broker would
        broker_record = pa.table(
            {
                "key": pa.array([encode_group_metadata_key("g")], pa.binary()),
                "value": pa.array([encode_group_metadata_value(37, 0)], pa.binary()),
            }
        )
        logs.partition(OFFSETS_TOPIC, store.partition_for("g")).append_arrow(broker_record)
        coordinator = GroupCoordinator(logs, "g")
        member = coordinator.join(JoinRequest("c", ("range",), 60_000), ["t"])
        assert member.generation == 1
        store.commit_as(coordinator, member.member_id, {PARTITION: OffsetAndMetadata(5)})
        assert store.committed("g") == {PARTITION: OffsetAndMetadata(5)}
        assert coordinator.heartbeat(member.member_id, ["t"]).generation == 37
        coordinator.close()


def test_kafkas_dump_log_segments_decodes_the_recorded_generation(
    tmp_path: Path, kafka_dump_log: DumpLogSegments
) -> None:
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("t", 1)
    with OffsetStore(logs) as store:
        store.commit("g", {PARTITION: OffsetAndMetadata(7)}, generation=3, commit_timestamp_ms=1_700_000_000_000)
        log = logs.partition(OFFSETS_TOPIC, store.partition_for("g"))
    proc = kafka_dump_log([log.segments()[0].log_path], "--offsets-decoder")
    assert proc.returncode == 0, proc.stderr
    records = [line for line in proc.stdout.splitlines() if line.startswith("| offset:")]
    key, payload = records[0].split(" key: ", 1)[1].split(" payload: ", 1)
    assert json.loads(key) == {"type": "2", "data": {"group": "g"}}
    value = json.loads(payload)
    assert value["version"] == "3"
    assert value["data"]["protocolType"] == "consumer" and value["data"]["generation"] == 3
    assert value["data"]["members"] == []
    assert "offset" in records[1] and '"offset":7' in records[1]


def test_an_append_conditional_on_the_log_end_appends_nothing_once_another_appended(root: str) -> None:
    """The primitive the fence rests on, with two writers of their own on one partition: the one whose decision
    rests on an end another has since appended past appends nothing; at the end it read again, it appends."""
    first, second = LogDirectory(root).partition("t", 0), LogDirectory(root).partition("t", 0)
    read_end = first.log_end_offset
    second.append_arrow(pa.table({"value": pa.array([b"newer"], pa.binary())}))
    with pytest.raises(LogEndChangedError, match=f"ends at offset {read_end + 1}, not at {read_end}"):
        first.append_arrow(pa.table({"value": pa.array([b"stale"], pa.binary())}), expected_end_offset=read_end)
    assert first.log_end_offset == read_end + 1
    again = pa.table({"value": pa.array([b"decided again"], pa.binary())})
    info = first.append_arrow(again, expected_end_offset=read_end + 1)
    assert info.first_offset == read_end + 1


def test_deleting_a_group_forgets_its_recorded_generation(root: str) -> None:
    logs = LogDirectory(root)
    with OffsetStore(logs) as store:
        store.commit("g", {PARTITION: OffsetAndMetadata(9)}, generation=4)
        assert store.delete_group("g") == [PARTITION]
    with OffsetStore(logs) as reader:
        assert reader.recorded_generation("g") == -1 and reader.committed("g") == {}
