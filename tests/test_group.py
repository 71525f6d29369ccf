"""The broker-less group coordinator: membership, generations, hand-offs, static members, commits' guard.

Every test drives ``GroupCoordinator`` with a fake clock, so session timeouts pass without sleeping.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pysparklog import (
    CommitFailedError,
    CorruptRecordError,
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    LogDirectory,
    TopicPartition,
    UnknownMemberIdError,
)
from pysparklog.assignors import RebalanceProtocol
from pysparklog.errors import MetadataChangedError
from pysparklog.group import (
    GROUP_FILE_PREFIX,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    Membership,
    describe_group,
    list_group_ids,
    validate_group_id,
)
from tests.storage.conftest import BACKENDS, NoLock, storage_on

SESSION_MS = 1000
T0 = 1_700_000_000_000


class FakeClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def tps(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


def request(
    client_id: str,
    *assignors: str,
    session_ms: int = SESSION_MS,
    instance: str | None = None,
) -> JoinRequest:
    return JoinRequest(client_id, assignors or ("range",), session_ms, instance, host="/test")


@pytest.fixture
def log_dir(tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("t", 4)
    logs.topics.create("u", 6)
    return logs


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def coordinator(log_dir: LogDirectory, clock: FakeClock) -> Iterable[GroupCoordinator]:
    coordinator = GroupCoordinator(log_dir, "g", clock=clock)
    yield coordinator
    coordinator.close()


def owners(coordinator: GroupCoordinator) -> dict[TopicPartition, str]:
    """The owners map as stored in the group file."""
    with open(coordinator.path, "rb") as f:
        raw = json.load(f)
    return {TopicPartition(t, p): mid for t, p, mid in raw["owners"]}


def assert_disjoint(*memberships: Membership) -> None:
    seen: dict[TopicPartition, str] = {}
    for m in memberships:
        for tp in m.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


# -- join, hand-off, leave, expiry ----------------------------------------------------------------------------


def test_join_creates_generation_one_and_assigns_every_partition(coordinator: GroupCoordinator) -> None:
    a = coordinator.join(request("a"), ["t"])

    assert a.member_id.startswith("a-")
    assert a.generation == 1
    assert a.protocol is RebalanceProtocol.EAGER
    assert a.assigned == a.owned == tps("t", 0, 1, 2, 3)
    assert a.valid_until_ms == T0 + SESSION_MS
    assert os.path.basename(coordinator.path) == GROUP_FILE_PREFIX + "g.json"
    assert os.path.dirname(coordinator.path) == coordinator.log_dir.path  # a file: brokers refuse unknown dirs
    description = coordinator.describe()
    assert description is not None
    assert (description.state, description.assignor, description.generation) == ("Stable", "range", 1)
    assert [(m.member_id, m.client_id, m.host, m.assignment) for m in description.members] == [
        (a.member_id, "a", "/test", tuple(sorted(tps("t", 0, 1, 2, 3))))
    ]


def test_second_member_gets_partitions_only_after_the_first_releases_them(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = coordinator.join(request("a"), ["t"])
    clock.advance(10)
    b = coordinator.join(request("b"), ["t"])

    # Range over a-... < b-...: a keeps 0-1, b is given 2-3, which a still owns.
    assert b.generation == 2
    assert b.assigned == tps("t", 2, 3)
    assert b.owned == frozenset()
    assert owners(coordinator) == dict.fromkeys(tps("t", 0, 1, 2, 3), a.member_id)
    description = coordinator.describe()
    assert description is not None and description.state == GroupState.COMPLETING_REBALANCE

    # b asking again changes nothing while a has not let go.
    b = coordinator.heartbeat(b.member_id, ["t"])
    assert b.owned == frozenset()
    # a's heartbeat without a release: it learns of generation 2 and still owns everything.
    a = coordinator.heartbeat(a.member_id, ["t"])
    assert (a.generation, a.assigned, a.owned) == (2, tps("t", 0, 1), tps("t", 0, 1, 2, 3))
    assert_disjoint(a, b)

    # An eager member gives up everything and takes back its new assignment in the same heartbeat.
    a = coordinator.heartbeat(a.member_id, ["t"], release=a.owned)
    assert a.owned == tps("t", 0, 1)
    assert owners(coordinator) == dict.fromkeys(tps("t", 0, 1), a.member_id)
    b = coordinator.heartbeat(b.member_id, ["t"])
    assert b.owned == tps("t", 2, 3)
    assert_disjoint(a, b)
    assert b.generation == a.generation == 2  # the hand-off needs no new generation
    description = coordinator.describe()
    assert description is not None and description.state == GroupState.STABLE


def test_release_of_a_partition_owned_by_another_member_is_ignored(coordinator: GroupCoordinator) -> None:
    a = coordinator.join(request("a"), ["t"])
    b = coordinator.join(request("b"), ["t"])
    b = coordinator.heartbeat(b.member_id, ["t"], release=tps("t", 0, 1, 2, 3))  # none of them b's
    assert b.owned == frozenset()
    assert owners(coordinator) == dict.fromkeys(tps("t", 0, 1, 2, 3), a.member_id)


def test_leave_rebalances_and_frees_the_partitions_at_once(coordinator: GroupCoordinator) -> None:
    a = coordinator.join(request("a"), ["t"])
    b = coordinator.join(request("b"), ["t"])
    a = coordinator.heartbeat(a.member_id, ["t"], release=a.owned)
    b = coordinator.heartbeat(b.member_id, ["t"])
    assert b.owned == tps("t", 2, 3)

    coordinator.leave(b.member_id)
    a = coordinator.heartbeat(a.member_id, ["t"])
    assert a.generation == 3
    assert a.assigned == a.owned == tps("t", 0, 1, 2, 3)  # b's partitions left with it
    with pytest.raises(UnknownMemberIdError, match="rejoin"):
        coordinator.heartbeat(b.member_id, ["t"])
    coordinator.leave(b.member_id)  # leaving twice is harmless
    assert coordinator.heartbeat(a.member_id, ["t"]).generation == 3

    coordinator.leave(a.member_id)
    description = coordinator.describe()
    assert description is not None
    assert (description.state, description.members, description.assignor) == ("Empty", (), "")
    assert owners(coordinator) == {}


def test_a_member_expires_after_its_session_timeout_and_not_before(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = coordinator.join(request("a"), ["t"])
    b = coordinator.join(request("b"), ["t"])
    a = coordinator.heartbeat(a.member_id, ["t"], release=a.owned)
    b = coordinator.heartbeat(b.member_id, ["t"])  # b's last heartbeat: T0
    generation = b.generation

    clock.advance(SESSION_MS)  # exactly the session timeout: still alive
    a = coordinator.heartbeat(a.member_id, ["t"])
    assert a.generation == generation
    assert a.owned == tps("t", 0, 1)
    assert {m.member_id for m in coordinator.describe().members} == {a.member_id, b.member_id}  # type: ignore[union-attr]
    with pytest.raises(CommitFailedError):
        with coordinator.owning(None, tps("t", 0)):
            pass  # b still counts as live

    clock.advance(1)  # one millisecond more: b is gone, and its partitions free
    assert {m.member_id for m in coordinator.describe().members} == {a.member_id}  # type: ignore[union-attr]
    a = coordinator.heartbeat(a.member_id, ["t"])
    assert a.generation == generation + 1
    assert a.assigned == a.owned == tps("t", 0, 1, 2, 3)
    assert set(owners(coordinator).values()) == {a.member_id}
    with pytest.raises(UnknownMemberIdError):
        coordinator.heartbeat(b.member_id, ["t"])


def test_an_expired_member_is_removed_by_whoever_comes_next(coordinator: GroupCoordinator, clock: FakeClock) -> None:
    a = coordinator.join(request("a"), ["t"])
    clock.advance(SESSION_MS + 1)
    b = coordinator.join(request("b"), ["t"])  # a's session is over: b is alone
    assert b.generation == 2  # a's expiry and b's join make one new generation
    assert b.assigned == b.owned == tps("t", 0, 1, 2, 3)
    with pytest.raises(UnknownMemberIdError):
        coordinator.heartbeat(a.member_id, ["t"])


def test_membership_valid_until_follows_the_last_heartbeat(coordinator: GroupCoordinator, clock: FakeClock) -> None:
    a = coordinator.join(request("a", session_ms=5000), ["t"])
    assert a.valid_until_ms == T0 + 5000
    clock.advance(1234)
    assert coordinator.heartbeat(a.member_id, ["t"]).valid_until_ms == T0 + 1234 + 5000


# -- static membership ----------------------------------------------------------------------------------------


def test_static_member_rejoining_within_its_session_keeps_its_assignment_without_a_rebalance(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = coordinator.join(request("a", session_ms=10_000, instance="a-host"), ["t"])
    b = coordinator.join(request("b", session_ms=10_000), ["t"])
    a = coordinator.heartbeat(a.member_id, ["t"], release=a.owned, group_instance_id="a-host")
    b = coordinator.heartbeat(b.member_id, ["t"])
    assert (a.owned, b.owned) == (tps("t", 0, 1), tps("t", 2, 3))  # static members sort first
    generation = a.generation

    clock.advance(5_000)  # a restarts, within its session timeout
    restarted = coordinator.join(request("a", session_ms=10_000, instance="a-host"), ["t"])
    assert restarted.member_id != a.member_id
    assert restarted.generation == generation
    assert restarted.assigned == restarted.owned == tps("t", 0, 1)
    b = coordinator.heartbeat(b.member_id, ["t"])
    assert (b.generation, b.assigned, b.owned) == (generation, tps("t", 2, 3), tps("t", 2, 3))
    description = coordinator.describe()
    assert description is not None
    assert {(m.member_id, m.group_instance_id) for m in description.members} == {
        (restarted.member_id, "a-host"),
        (b.member_id, None),
    }

    # The old instance is fenced, and may no longer commit.
    with pytest.raises(FencedInstanceIdError, match="a-host"):
        coordinator.heartbeat(a.member_id, ["t"], group_instance_id="a-host")
    with pytest.raises(CommitFailedError, match="removed"):
        with coordinator.owning(a.member_id, tps("t", 0)):
            pass
    with coordinator.owning(restarted.member_id, tps("t", 0, 1)):
        pass


def test_static_member_rejoining_after_its_session_timed_out_starts_a_generation(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = coordinator.join(request("a", session_ms=1000, instance="a-host"), ["t"])
    b = coordinator.join(request("b", session_ms=10_000), ["t"])
    clock.advance(1001)
    b = coordinator.heartbeat(b.member_id, ["t"])  # a expires here
    assert b.generation == 3
    restarted = coordinator.join(request("a", session_ms=1000, instance="a-host"), ["t"])
    assert restarted.generation == 4
    with pytest.raises(FencedInstanceIdError):  # its instance id belongs to the new member now
        coordinator.heartbeat(a.member_id, ["t"], group_instance_id="a-host")
    with pytest.raises(UnknownMemberIdError):
        coordinator.heartbeat(a.member_id, ["t"])


def test_static_member_rejoining_with_another_subscription_rebalances(coordinator: GroupCoordinator) -> None:
    a = coordinator.join(request("a", session_ms=10_000, instance="a-host"), ["t"])
    restarted = coordinator.join(request("a", session_ms=10_000, instance="a-host"), ["t", "u"])
    assert restarted.generation == a.generation + 1
    assert restarted.assigned == tps("t", 0, 1, 2, 3) | tps("u", 0, 1, 2, 3, 4, 5)
    assert restarted.owned == restarted.assigned  # the old instance's partitions passed to the new one


def test_static_rejoin_does_not_orphan_the_partitions_of_a_member_that_expired_meanwhile(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = coordinator.join(request("a", session_ms=10_000, instance="a-host"), ["t"])
    b = coordinator.join(request("b", session_ms=1000), ["t"])
    a = coordinator.heartbeat(a.member_id, ["t"], release=a.owned, group_instance_id="a-host")
    b = coordinator.heartbeat(b.member_id, ["t"])
    assert b.owned == tps("t", 2, 3)

    clock.advance(2000)  # b died; a restarts before anyone noticed
    restarted = coordinator.join(request("a", session_ms=10_000, instance="a-host"), ["t"])
    assert restarted.assigned == restarted.owned == tps("t", 0, 1, 2, 3)
    description = coordinator.describe()
    assert description is not None and description.state == GroupState.STABLE


# -- protocols ------------------------------------------------------------------------------------------------


def test_cooperative_sticky_revokes_only_what_moves_and_assigns_it_after_the_release(
    coordinator: GroupCoordinator,
) -> None:
    a = coordinator.join(request("a", "cooperative-sticky"), ["u"])
    assert a.protocol is RebalanceProtocol.COOPERATIVE
    assert a.owned == tps("u", 0, 1, 2, 3, 4, 5)

    b = coordinator.join(request("b", "cooperative-sticky"), ["u"])
    assert b.generation == 2
    assert b.assigned == frozenset()  # what moves is withheld for one generation
    a = coordinator.heartbeat(a.member_id, ["u"])
    kept = a.assigned
    assert len(kept) == 3 and kept < a.owned
    moved = a.owned - kept

    # a revokes only the moved partitions; the follow-up rebalance gives them to b.
    a = coordinator.heartbeat(a.member_id, ["u"], release=moved)
    assert a.generation == 3
    assert a.assigned == a.owned == kept
    b = coordinator.heartbeat(b.member_id, ["u"])
    assert (b.generation, b.assigned, b.owned) == (3, moved, moved)
    assert_disjoint(a, b)
    a = coordinator.heartbeat(a.member_id, ["u"])
    assert (a.generation, a.owned) == (3, kept)  # stable: no further generation
    description = coordinator.describe()
    assert description is not None and (description.state, description.assignor) == ("Stable", "cooperative-sticky")


def test_cooperative_member_can_commit_a_moving_partition_until_it_lets_go(coordinator: GroupCoordinator) -> None:
    a = coordinator.join(request("a", "cooperative-sticky"), ["u"])
    b = coordinator.join(request("b", "cooperative-sticky"), ["u"])
    a = coordinator.heartbeat(a.member_id, ["u"])
    moved = a.owned - a.assigned
    with coordinator.owning(a.member_id, moved):  # the commit before the release
        pass
    with pytest.raises(CommitFailedError, match="no longer owns"):
        with coordinator.owning(b.member_id, moved):
            pass
    coordinator.heartbeat(a.member_id, ["u"], release=moved)
    with pytest.raises(CommitFailedError, match="no longer owns"):
        with coordinator.owning(a.member_id, moved):
            pass
    b = coordinator.heartbeat(b.member_id, ["u"])
    with coordinator.owning(b.member_id, moved):
        pass


def test_eager_assignors_change_generation_on_every_membership_change(coordinator: GroupCoordinator) -> None:
    for client in ("a", "b", "c"):
        coordinator.join(request(client, "roundrobin"), ["t"])
    description = coordinator.describe()
    assert description is not None
    assert (description.generation, description.assignor) == (3, "roundrobin")
    assignment = {m.client_id: m.assignment for m in description.members}
    assert assignment == {
        "a": (TopicPartition("t", 0), TopicPartition("t", 3)),
        "b": (TopicPartition("t", 1),),
        "c": (TopicPartition("t", 2),),
    }
    b = next(m.member_id for m in description.members if m.client_id == "b")
    coordinator.leave(b)
    description = coordinator.describe()
    assert description is not None and description.generation == 4


def test_new_partitions_of_a_subscribed_topic_start_a_generation(
    coordinator: GroupCoordinator, log_dir: LogDirectory
) -> None:
    a = coordinator.join(request("a"), ["t"])
    assert coordinator.heartbeat(a.member_id, ["t"]).generation == 1
    log_dir.topics.alter_partitions("t", 6)
    a = coordinator.heartbeat(a.member_id, ["t"])
    assert a.generation == 2
    assert a.assigned == a.owned == tps("t", 0, 1, 2, 3, 4, 5)
    assert coordinator.heartbeat(a.member_id, ["t"]).generation == 2


def test_a_new_topic_in_the_subscription_starts_a_generation(
    coordinator: GroupCoordinator, log_dir: LogDirectory
) -> None:
    a = coordinator.join(request("a"), ["t", "later"])  # "later" does not exist yet
    assert a.assigned == tps("t", 0, 1, 2, 3)
    log_dir.topics.create("later", 2)
    a = coordinator.heartbeat(a.member_id, ["t", "later"])
    assert a.generation == 2
    assert a.assigned == tps("t", 0, 1, 2, 3) | tps("later", 0, 1)
    a = coordinator.heartbeat(a.member_id, ["t"])  # a pattern that no longer matches "later"
    assert a.generation == 3
    assert a.assigned == tps("t", 0, 1, 2, 3)


def test_members_sharing_no_assignor_are_refused(coordinator: GroupCoordinator) -> None:
    a = coordinator.join(request("a", "range", "cooperative-sticky"), ["t"])
    with pytest.raises(InconsistentGroupProtocolError, match="roundrobin"):
        coordinator.join(request("b", "roundrobin"), ["t"])
    description = coordinator.describe()
    assert description is not None
    assert [m.member_id for m in description.members] == [a.member_id]
    assert description.generation == 1  # the refused join changed nothing

    # Sharing one assignor is enough; the group picks what most members prefer among the shared ones.
    b = coordinator.join(request("b", "cooperative-sticky", "roundrobin"), ["t"])
    assert b.protocol is RebalanceProtocol.COOPERATIVE
    c = coordinator.join(request("c", "cooperative-sticky"), ["t"])
    description = coordinator.describe()
    assert description is not None and description.assignor == "cooperative-sticky"
    assert c.generation == 3


def test_unknown_assignor_names_are_refused_with_the_accepted_ones(coordinator: GroupCoordinator) -> None:
    with pytest.raises(InvalidConfigError, match="'nope' is not a known assignor; accepted: range"):
        coordinator.join(request("a", "nope"), ["t"])
    java = coordinator.join(request("a", "org.apache.kafka.clients.consumer.RangeAssignor"), ["t"])
    assert java.protocol is RebalanceProtocol.EAGER
    assert coordinator.describe().assignor == "range"  # type: ignore[union-attr]


# -- the commit guard -----------------------------------------------------------------------------------------


def test_owning_refuses_commits_of_non_owners_and_outsiders_while_members_live(
    coordinator: GroupCoordinator, clock: FakeClock
) -> None:
    a = coordinator.join(request("a"), ["t"])
    b = coordinator.join(request("b"), ["t"])
    a = coordinator.heartbeat(a.member_id, ["t"], release=a.owned)
    b = coordinator.heartbeat(b.member_id, ["t"])

    with coordinator.owning(a.member_id, tps("t", 0, 1)):
        pass
    with pytest.raises(CommitFailedError, match=r"no longer owns \['t-2'\]"):
        with coordinator.owning(a.member_id, tps("t", 1, 2)):
            pass
    with pytest.raises(CommitFailedError, match="from outside it while it has 2 live member"):
        with coordinator.owning(None, tps("t", 0)):
            pass
    with pytest.raises(CommitFailedError, match="removed"):
        with coordinator.owning("stranger-1", tps("t", 0)):
            pass

    clock.advance(SESSION_MS + 1)  # everyone's session is over: the group counts as empty
    with coordinator.owning(None, tps("t", 0, 1, 2, 3)):
        pass
    with pytest.raises(CommitFailedError, match="removed"):
        with coordinator.owning(a.member_id, tps("t", 0)):
            pass


def test_owning_holds_the_group_still(coordinator: GroupCoordinator, log_dir: LogDirectory, clock: FakeClock) -> None:
    a = coordinator.join(request("a"), ["t"])
    other = GroupCoordinator(log_dir, "g", clock=clock)
    try:
        with coordinator.owning(a.member_id, tps("t", 0)):
            # Another handle on the group (another process, in effect) cannot change it meanwhile.
            with other._lock.try_exclusive() as held:
                assert held is None
    finally:
        other.close()


# -- a member whose lock lapsed ---------------------------------------------------------------------------------


@pytest.fixture(params=sorted(BACKENDS))
def log_dir_on_each_backend(request: pytest.FixtureRequest, tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(storage_on(request.param, request, tmp_path))
    logs.topics.create("t", 4)
    return logs


def test_a_member_whose_lock_lapsed_fails_rather_than_undo_what_the_group_did_meanwhile(
    log_dir_on_each_backend: LogDirectory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member that read the group's state, lost its lease while it stalled, and wrote back what it computed would
    drop the member that joined meanwhile and take back the partitions its new generation moved."""
    logs = log_dir_on_each_backend
    coordinator = GroupCoordinator(logs, "g", clock=clock)
    a = coordinator.join(request("a"), ["t"])
    monkeypatch.setattr(logs.storage, "lock", lambda path: NoLock())
    stale = GroupCoordinator(logs, "g", clock=clock)  # holds a lock that excludes nothing: a lapsed lease
    needs_rebalance = stale._needs_rebalance
    joined: list[Membership] = []

    def another_joins_meanwhile(group: object) -> bool:  # called by heartbeat, between its read and its write
        joined.append(coordinator.join(request("b"), ["t"]))
        return needs_rebalance(group)  # type: ignore[arg-type]

    monkeypatch.setattr(stale, "_needs_rebalance", another_joins_meanwhile)
    clock.advance(SESSION_MS // 2)  # a heartbeat that changes the state: its member's last heartbeat
    with pytest.raises(MetadataChangedError, match=r"pysparklog-group\.g\.json changed after this process read it"):
        stale.heartbeat(a.member_id, ["t"])
    description = coordinator.describe()
    assert description is not None
    assert description.generation == joined[0].generation == a.generation + 1, "the join's generation is kept"
    assert sorted(m.member_id for m in description.members) == sorted([a.member_id, joined[0].member_id])
    assert coordinator.heartbeat(a.member_id, ["t"]).generation == joined[0].generation
    coordinator.close()
    stale.close()


# -- describe, delete, list -----------------------------------------------------------------------------------


def test_describe_delete_and_list(log_dir: LogDirectory) -> None:
    clock = FakeClock(int(time.time() * 1000))  # describe_group reads the wall clock
    assert list_group_ids(log_dir) == []
    assert describe_group(log_dir, "g") is None
    names = ["g", "with/slash", "ünïcode", "dots.and spaces"]
    coordinators = {name: GroupCoordinator(log_dir, name, clock=clock) for name in names}
    try:
        members = {
            name: c.join(request("c", instance="static" if name == "g" else None), ["t"])
            for name, c in coordinators.items()
        }
        assert list_group_ids(log_dir) == sorted(names)
        description = describe_group(log_dir, "with/slash")
        assert description is not None
        assert description.group_id == "with/slash"
        assert (description.state, description.protocol_type, description.assignor) == ("Stable", "consumer", "range")
        g = coordinators["g"].describe()
        assert g is not None
        assert [(m.group_instance_id, m.assignment) for m in g.members] == [
            ("static", tuple(sorted(tps("t", 0, 1, 2, 3))))
        ]

        # Deleting needs the group empty: left, or every session over.
        assert coordinators["g"].delete() is False
        assert coordinators["with/slash"].delete() is False
        coordinators["with/slash"].leave(members["with/slash"].member_id)
        assert coordinators["with/slash"].delete() is True
        assert coordinators["with/slash"].describe() is None
        assert list_group_ids(log_dir) == sorted(set(names) - {"with/slash"})
        clock.advance(SESSION_MS + 1)
        assert coordinators["g"].delete() is True
        assert coordinators["g"].delete() is True  # nothing left to delete is fine
        assert list_group_ids(log_dir) == sorted(set(names) - {"with/slash", "g"})
    finally:
        for c in coordinators.values():
            c.close()


def test_group_ids_are_validated() -> None:
    validate_group_id("x" * 200)
    validate_group_id("é" * 33)  # 66 bytes of UTF-8, 198 percent-encoded
    # "𝑻" * 50: 200 bytes of UTF-8 but 600 in its file name, which no file system takes (found by fuzzing the endpoint)
    for bad in ("", "x" * 201, "é" * 34, "\U0001d47b" * 50, None, 7, "\udcff"):  # the last: a byte that is not UTF-8
        with pytest.raises(InvalidConfigError, match="group.id .* is invalid; accepted: a non-empty string"):
            validate_group_id(bad)  # type: ignore[arg-type]


def test_the_longest_group_id_accepted_has_its_files_written(log_dir: LogDirectory) -> None:
    """The longest id of characters outside ASCII that validation accepts joins a group: its file names fit."""
    group_id = "\U0001d47b" * 16  # 64 bytes of UTF-8, 192 percent-encoded
    validate_group_id(group_id)
    coordinator = GroupCoordinator(log_dir, group_id)
    try:
        joined = coordinator.join(JoinRequest("c", ("range",), 10_000), ["t"])
    finally:
        coordinator.close()
    assert joined.generation >= 1


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"\xff\xfe",
        b"[]",
        b'{"version": 99}',
        b'{"version": 1, "generation": 1}',
        b'{"version": 1, "generation": 1, "assignor": "", "members": [], "assignment": {}, "owners": [], '
        b'"partition_counts": {}}',
        b'{"version": 1, "generation": 1, "assignor": "", "members": {"m": {"bad": 1}}, "assignment": {}, '
        b'"owners": [], "partition_counts": {}}',
    ],
)
def test_a_corrupt_state_file_names_the_file(coordinator: GroupCoordinator, content: bytes) -> None:
    os.makedirs(os.path.dirname(coordinator.path), exist_ok=True)
    with open(coordinator.path, "wb") as f:
        f.write(content)
    with pytest.raises(CorruptRecordError, match="consumer group state is unreadable") as caught:
        coordinator.join(request("a"), ["t"])
    assert caught.value.file == coordinator.path
    assert coordinator.path in str(caught.value)
    with pytest.raises(CorruptRecordError):
        coordinator.describe()
    with open(coordinator.path, "rb") as f:
        assert f.read() == content  # left as it was, for inspection


# -- many changes, one invariant --------------------------------------------------------------------------------


@dataclass
class _SimMember:
    """A consumer's side of the protocol, as ``Consumer._apply_group_changes`` plays it."""

    client: str
    instance: str | None
    session_ms: int
    membership: Membership
    fetching: set[TopicPartition] = field(default_factory=set)
    generation: int = -1

    def step(self, coordinator: GroupCoordinator, topics: list[str]) -> None:
        m = coordinator.heartbeat(self.membership.member_id, topics, group_instance_id=self.instance)
        if m.protocol is RebalanceProtocol.EAGER and m.generation != self.generation:
            revoked = set(self.fetching)
        else:
            revoked = self.fetching - m.assigned
        if revoked:
            self.fetching -= revoked
            m = coordinator.heartbeat(self.membership.member_id, topics, revoked, group_instance_id=self.instance)
        self.generation = m.generation
        self.fetching |= m.owned
        self.membership = m


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
@pytest.mark.parametrize("seed", range(4))
def test_random_membership_changes_never_share_a_partition_and_converge(
    log_dir: LogDirectory, clock: FakeClock, assignor: str, seed: int
) -> None:
    rng = random.Random(seed)
    topics = ["t", "u"]
    coordinator = GroupCoordinator(log_dir, f"g-{assignor}", clock=clock)
    live: dict[str, _SimMember] = {}
    counter = 0

    def check() -> None:
        seen: dict[TopicPartition, str] = {}
        for name, member in live.items():
            if clock.now > member.membership.valid_until_ms:
                continue  # a consumer stops fetching when its session may be over
            for tp in member.fetching:
                assert tp not in seen, f"{tp} fetched by {seen[tp]} and {name}"
                seen[tp] = name

    def join(name: str, instance: str | None = None) -> None:
        session = rng.choice([1000, 3000])
        m = coordinator.join(request(name, assignor, session_ms=session, instance=instance), topics)
        live[name] = _SimMember(name, instance, session, m, set(m.owned), m.generation)

    def step(name: str) -> None:
        try:
            live[name].step(coordinator, topics)
        except UnknownMemberIdError:
            del live[name]  # its session timed out: a consumer rejoins as a new member

    try:
        for _ in range(60):
            action = rng.random()
            if action < 0.25 or not live:
                counter += 1
                static = rng.random() < 0.3
                join(f"m{counter:02d}", f"i{counter:02d}" if static else None)
            elif action < 0.35:
                name = rng.choice(sorted(live))
                coordinator.leave(live.pop(name).membership.member_id)
            elif action < 0.45:
                # A static member restarts: its new instance takes over; the old one is fenced.
                statics = sorted(n for n, m in live.items() if m.instance is not None)
                if statics:
                    old = live.pop(statics[0])
                    join(old.client, old.instance)
                    with pytest.raises(FencedInstanceIdError):
                        coordinator.heartbeat(old.membership.member_id, topics, group_instance_id=old.instance)
            elif action < 0.55:
                # Time passes while one member is silent: it may expire, and its partitions move.
                silent = rng.choice(sorted(live))
                clock.advance(1500)
                for name in sorted(live):
                    if name != silent:
                        step(name)
                        check()
            else:
                name = rng.choice(sorted(live))
                clock.advance(rng.randrange(0, 200))
                step(name)
            check()

        # Quiet rounds: everyone heartbeats; the group must settle with every partition fetched once.
        for _ in range(4):
            clock.advance(10)
            for name in sorted(live):
                step(name)
                check()
        description = coordinator.describe()
        assert description is not None
        if live:
            assert description.state == GroupState.STABLE
            fetched = set().union(*(m.fetching for m in live.values()))
            assert fetched == tps("t", 0, 1, 2, 3) | tps("u", 0, 1, 2, 3, 4, 5)
            for member in live.values():
                assert member.fetching == member.membership.assigned
        assert {m.member_id for m in description.members} == {m.membership.member_id for m in live.values()}
    finally:
        coordinator.close()
