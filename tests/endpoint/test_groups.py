"""Coordinators and consumer groups on the endpoint, asked with exact requests (``kafka_wire``): the join barrier,
leaders and assignments, session and rebalance timeouts, commits fenced by member and generation into the log
directory's ``__consumer_offsets``, the registry choosing one coordinator per group among several endpoints, and
generations that outlive the coordinator."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribeGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorRequestV3
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as FindCoordinatorResponseV3
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import FindCoordinatorResponse
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v9.response import JoinGroupResponse
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.leave_group.v5.response import LeaveGroupResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_commit.v9.response import OffsetCommitResponse
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.registry import Registry
from pysparklog.endpoints import REGISTRY_FILE, kafka_protocol_groups
from pysparklog.errors import CommitFailedError, InconsistentGroupProtocolError, InvalidConfigError
from pysparklog.group import GroupCoordinator as StorageGroupCoordinator
from pysparklog.group import JoinRequest as StorageJoinRequest
from pysparklog.offsets import OffsetStore
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from tests.conftest import BUCKET
from tests.endpoint.endpoint_process import LISTENING
from tests.endpoint.kafka_wire import WireClient

T = TypeVar("T")
SESSION_MS = 1500
REBALANCE_MS = 3000


@pytest.fixture
def logs(tmp_path: Path) -> LogDirectory:
    log_dir = LogDirectory(str(tmp_path / "logs"))
    log_dir.topics.create("t", 3)
    return log_dir


@pytest.fixture(params=["posix", "s3"])
def shared_logs(request: pytest.FixtureRequest, tmp_path: Path) -> LogDirectory:
    """A log directory with topic ``t`` on a filesystem or on the object store: the registry and the generations
    go through each backend's conditional writes."""
    if request.param == "s3":
        request.getfixturevalue("s3_endpoint")
        log_dir = LogDirectory(f"s3://{BUCKET}{tmp_path}/logs")
        log_dir.topics.create("t", 3)
        return log_dir
    return request.getfixturevalue("logs")  # type: ignore[no-any-return]


def _config(**overrides: Any) -> EndpointConfig:
    # A lease long enough that a renewal delayed by a loaded machine does not drop the endpoint from its own view
    # (it would answer NOT_COORDINATOR); the tests of a dead endpoint's groups moving kill one with a short lease.
    return EndpointConfig(port=0, group_min_session_timeout_ms=100, registry_lease_ms=4000, **overrides)


@pytest.fixture
def endpoint(logs: LogDirectory) -> Iterator[Endpoint]:
    with Endpoint(logs, _config()) as started:
        yield started


def _ask(endpoint: Endpoint, request: Any, response_type: type[T]) -> T:
    with WireClient(endpoint.bootstrap) as client:
        answer: T = client.request(request, response_type)
        return answer


def _join(
    endpoint: Endpoint,
    member_id: str = "",
    protocols: tuple[str, ...] = ("range",),
    *,
    group: str = "g",
    instance: str | None = None,
    session_ms: int = SESSION_MS,
) -> JoinGroupResponse:
    request = JoinGroupRequest(
        group_id=GroupId(group),
        session_timeout=i32Timedelta.parse(timedelta(milliseconds=session_ms)),
        rebalance_timeout=i32Timedelta.parse(timedelta(milliseconds=REBALANCE_MS)),
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=tuple(JoinGroupRequestProtocol(name=p, metadata=f"{p}:{member_id}".encode()) for p in protocols),
    )
    return _ask(endpoint, request, JoinGroupResponse)


def _join_fully(endpoint: Endpoint, protocols: tuple[str, ...] = ("range",), **kwargs: Any) -> JoinGroupResponse:
    """A first join as a v4+ client makes it: MEMBER_ID_REQUIRED, then again with the id given."""
    first = _join(endpoint, "", protocols, **kwargs)
    if first.error_code != ErrorCode.member_id_required:
        return first
    return _join(endpoint, first.member_id, protocols, **kwargs)


def _sync(
    endpoint: Endpoint, joined: JoinGroupResponse, assignments: dict[str, bytes] | None = None
) -> SyncGroupResponse:
    request = SyncGroupRequest(
        group_id=GroupId("g"),
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name=joined.protocol_name,
        assignments=tuple(
            SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()
        ),
    )
    return _ask(endpoint, request, SyncGroupResponse)


def _heartbeat(endpoint: Endpoint, member_id: str, generation: int, group: str = "g") -> ErrorCode:
    request = HeartbeatRequest(
        group_id=GroupId(group), generation_id=i32(generation), member_id=member_id, group_instance_id=None
    )
    return _ask(endpoint, request, HeartbeatResponse).error_code


def _commit(
    endpoint: Endpoint, member_id: str, generation: int, offsets: dict[tuple[str, int], int], group: str = "g"
) -> dict[tuple[str, int], ErrorCode]:
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=i32(partition),
                committed_offset=i64(offset),
                committed_leader_epoch=i32(-1),
                committed_metadata="m",
            )
        )
    request = OffsetCommitRequest(
        group_id=GroupId(group),
        generation_id_or_member_epoch=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        topics=tuple(OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in topics.items()),
    )
    response = _ask(endpoint, request, OffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def _group_of_three(endpoint: Endpoint, pool: ThreadPoolExecutor) -> list[JoinGroupResponse]:
    """Three members joined and synced: the leader assigns partition i of ``t`` to the i-th member."""
    ids = [_join(endpoint).member_id for _ in range(3)]
    joins = [pool.submit(_join, endpoint, member_id) for member_id in ids]
    joined = [f.result(timeout=10) for f in joins]
    leader = next(j for j in joined if j.leader == j.member_id)
    assignments = {j.member_id: str(i).encode() for i, j in enumerate(joined)}
    syncs = [pool.submit(_sync, endpoint, j) for j in joined if j is not leader]
    assert _sync(endpoint, leader, assignments).assignment == assignments[leader.member_id]
    assert [f.result(timeout=10).assignment for f in syncs] == [
        assignments[j.member_id] for j in joined if j is not leader
    ]
    return joined


def _wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- FindCoordinator ------------------------------------------------------------------------------------------


def test_find_coordinator_names_this_endpoint_for_groups_and_transactional_ids(endpoint: Endpoint) -> None:
    state = endpoint.state
    assert state is not None
    batch = _ask(
        endpoint, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("g1", "g2")), FindCoordinatorResponse
    ).coordinators
    assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in batch] == [
        (key, ErrorCode.none, state.node_id, state.advertised_host, state.advertised_port) for key in ("g1", "g2")
    ]
    txn = _ask(endpoint, FindCoordinatorRequestV3(key="tx", key_type=i8(1)), FindCoordinatorResponseV3)
    assert (txn.error_code, txn.node_id, txn.port) == (ErrorCode.none, state.node_id, state.advertised_port)
    share = _ask(endpoint, FindCoordinatorRequestV3(key="s", key_type=i8(2)), FindCoordinatorResponseV3)
    assert share.error_code == ErrorCode.invalid_request
    assert share.error_message is not None and "accepted" in share.error_message


# -- the join barrier -----------------------------------------------------------------------------------------


def test_three_members_join_behind_the_barrier_and_the_leader_assigns(endpoint: Endpoint) -> None:
    first = _join(endpoint)
    assert first.error_code == ErrorCode.member_id_required and first.member_id.startswith("wire-test-")
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
    assert len({j.generation_id for j in joined}) == 1
    leaders = [j for j in joined if j.leader == j.member_id]
    assert len(leaders) == 1
    # The leader gets every member's metadata for the protocol chosen; the followers none.
    assert sorted(m.member_id for m in leaders[0].members) == sorted(j.member_id for j in joined)
    assert all(m.metadata == f"range:{m.member_id}".encode() for m in leaders[0].members)
    assert all(not j.members for j in joined if j is not leaders[0])
    assert all(_heartbeat(endpoint, j.member_id, j.generation_id) == ErrorCode.none for j in joined)


def test_the_protocol_chosen_is_one_every_member_supports_and_a_member_sharing_none_is_refused(
    endpoint: Endpoint,
) -> None:
    with ThreadPoolExecutor(2) as pool:
        ids = [_join(endpoint).member_id for _ in range(2)]
        a = pool.submit(_join, endpoint, ids[0], ("roundrobin", "cooperative-sticky"))
        b = pool.submit(_join, endpoint, ids[1], ("cooperative-sticky", "range"))
        assert {a.result(10).protocol_name, b.result(10).protocol_name} == {"cooperative-sticky"}
        assert _join(endpoint, "", ("range",)).error_code == ErrorCode.inconsistent_group_protocol


def test_a_member_joining_a_stable_group_makes_the_others_rejoin_into_a_new_generation(endpoint: Endpoint) -> None:
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
        newcomer_id = _join(endpoint).member_id
        newcomer = pool.submit(_join, endpoint, newcomer_id)
        _wait_for(lambda: _heartbeat(endpoint, joined[0].member_id, joined[0].generation_id) != ErrorCode.none)
        assert all(
            _heartbeat(endpoint, j.member_id, j.generation_id) == ErrorCode.rebalance_in_progress for j in joined
        )
        assert not newcomer.done()  # held at the barrier until every member rejoined
        rejoined = [pool.submit(_join, endpoint, j.member_id) for j in joined]
        generations = {f.result(10).generation_id for f in [*rejoined, newcomer]}
    assert generations == {joined[0].generation_id + 1}


def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout(endpoint: Endpoint) -> None:
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
        alive, dead = joined[:2], joined[2]
        started = time.monotonic()
        while time.monotonic() - started < SESSION_MS / 1000 * 2:
            errors = {_heartbeat(endpoint, j.member_id, j.generation_id) for j in alive}
            if errors == {ErrorCode.rebalance_in_progress}:
                break
            time.sleep(0.2)
        assert errors == {ErrorCode.rebalance_in_progress}
        assert time.monotonic() - started >= SESSION_MS / 1000 * 0.8
        rejoined = [f.result(10) for f in [pool.submit(_join, endpoint, j.member_id) for j in alive]]
    leader = next(j for j in rejoined if j.leader == j.member_id)
    assert sorted(m.member_id for m in leader.members) == sorted(j.member_id for j in alive)
    assert _heartbeat(endpoint, dead.member_id, dead.generation_id) == ErrorCode.unknown_member_id


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_left_out(endpoint: Endpoint) -> None:
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
        # The leader rejoins (a rebalance starts), a follower told so by its heartbeat too; the third keeps
        # heartbeating (it is alive) but never rejoins.
        leader = next(j for j in joined if j.leader == j.member_id)
        follower, idle = (j for j in joined if j is not leader)
        rejoining = [pool.submit(_join, endpoint, leader.member_id)]
        _wait_for(lambda: _heartbeat(endpoint, follower.member_id, follower.generation_id) != ErrorCode.none)
        rejoining.append(pool.submit(_join, endpoint, follower.member_id))
        started = time.monotonic()
        while not all(f.done() for f in rejoining):
            _heartbeat(endpoint, idle.member_id, idle.generation_id)
            time.sleep(0.2)
        waited = time.monotonic() - started
        results = [f.result() for f in rejoining]
    assert REBALANCE_MS / 1000 * 0.8 <= waited
    assert {r.error_code for r in results} == {ErrorCode.none}
    assert sorted(m.member_id for m in next(r for r in results if r.leader == r.member_id).members) == sorted(
        (leader.member_id, follower.member_id)
    )


def test_leave_group_removes_members_in_a_batch(endpoint: Endpoint) -> None:
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
        request = LeaveGroupRequest(
            group_id=GroupId("g"),
            members=(
                MemberIdentity(member_id=joined[0].member_id, group_instance_id=None, reason="bye"),
                MemberIdentity(member_id="nobody", group_instance_id=None, reason=None),
            ),
        )
        response = _ask(endpoint, request, LeaveGroupResponse)
        assert [m.error_code for m in response.members] == [ErrorCode.none, ErrorCode.unknown_member_id]
        assert _heartbeat(endpoint, joined[1].member_id, joined[1].generation_id) == ErrorCode.rebalance_in_progress
        rejoined = [f.result(10) for f in [pool.submit(_join, endpoint, j.member_id) for j in joined[1:]]]
    assert {r.generation_id for r in rejoined} == {joined[0].generation_id + 1}


def test_a_static_member_restarting_takes_its_place_without_a_rebalance_and_fences_the_old(
    endpoint: Endpoint,
) -> None:
    first = _join(endpoint, instance="i-1")  # static members get their id at once
    assert first.error_code == ErrorCode.none
    assert _sync(endpoint, first, {first.member_id: b"p0"}).assignment == b"p0"
    again = _join(endpoint, instance="i-1")
    assert again.error_code == ErrorCode.none and again.generation_id == first.generation_id
    assert again.member_id != first.member_id
    assert _sync(endpoint, again).assignment == b"p0"
    request = HeartbeatRequest(
        group_id=GroupId("g"), generation_id=first.generation_id, member_id=first.member_id, group_instance_id="i-1"
    )
    assert _ask(endpoint, request, HeartbeatResponse).error_code == ErrorCode.fenced_instance_id


def test_a_join_with_a_session_timeout_outside_the_bounds_is_refused(logs: LogDirectory) -> None:
    with Endpoint(logs, EndpointConfig(port=0)) as strict:
        assert _join(strict, session_ms=1000).error_code == ErrorCode.invalid_session_timeout


# -- offsets --------------------------------------------------------------------------------------------------


def test_commits_are_checked_against_member_and_generation_and_land_in_consumer_offsets(
    endpoint: Endpoint, logs: LogDirectory
) -> None:
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
    member, generation = joined[0].member_id, joined[0].generation_id
    assert _commit(endpoint, member, generation, {("t", 0): 5, ("t", 7): 1, ("nope", 0): 1}) == {
        ("t", 0): ErrorCode.none,
        ("t", 7): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert _commit(endpoint, member, generation - 1, {("t", 0): 6}) == {("t", 0): ErrorCode.illegal_generation}
    assert _commit(endpoint, "stranger", generation, {("t", 0): 6}) == {("t", 0): ErrorCode.unknown_member_id}
    # From outside the group (no member, generation -1) only while it is empty.
    assert _commit(endpoint, "", -1, {("t", 0): 6}) == {("t", 0): ErrorCode.unknown_member_id}
    with OffsetStore(logs) as store:
        assert store.committed("g") == {TopicPartition("t", 0): OffsetAndMetadata(5, "m", -1)}
        assert store.recorded_generation("g") == generation
    fetched = _ask(
        endpoint,
        OffsetFetchRequest(
            group_id=GroupId("g"),
            topics=(OffsetFetchRequestTopic(name=TopicName("t"), partition_indexes=(i32(0), i32(1))),),
            require_stable=True,
        ),
        OffsetFetchResponse,
    )
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
        (0, 5, "m"),
        (1, -1, ""),
    ]


def test_a_commit_during_completing_rebalance_is_refused(endpoint: Endpoint) -> None:
    with ThreadPoolExecutor(2) as pool:
        ids = [_join(endpoint).member_id for _ in range(2)]
        joined = [f.result(10) for f in [pool.submit(_join, endpoint, m) for m in ids]]
    # Joined, the leader has not synced: CompletingRebalance.
    assert _commit(endpoint, joined[0].member_id, joined[0].generation_id, {("t", 0): 1}) == {
        ("t", 0): ErrorCode.rebalance_in_progress
    }


def test_generations_survive_the_coordinator_and_a_dead_coordinators_commits_are_fenced(
    shared_logs: LogDirectory,
) -> None:
    with Endpoint(shared_logs, _config()) as first:
        joined = _join_fully(first)
        _sync(first, joined, {joined.member_id: b""})
        assert _commit(first, joined.member_id, joined.generation_id, {("t", 0): 3})[("t", 0)] == ErrorCode.none
    with Endpoint(shared_logs, _config()) as second:
        taken = _join_fully(second)
    assert taken.generation_id > joined.generation_id
    with OffsetStore(shared_logs) as store, pytest.raises(CommitFailedError):
        # What a stalled process of the first coordinator would append for its member.
        store.commit("g", {TopicPartition("t", 0): OffsetAndMetadata(99)}, generation=joined.generation_id)
        assert store.committed("g")[TopicPartition("t", 0)].offset == 3


# -- several endpoints ----------------------------------------------------------------------------------------


def _coordinator_node(endpoint: Endpoint, group: str) -> int:
    answer = _ask(endpoint, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)), FindCoordinatorResponse)
    return int(answer.coordinators[0].node_id)


def test_endpoints_of_one_log_directory_agree_on_coordinators_and_the_others_answer_not_coordinator(
    shared_logs: LogDirectory,
) -> None:
    with Endpoint(shared_logs, _config()) as a, Endpoint(shared_logs, _config()) as b:
        assert a.state is not None and b.state is not None
        nodes = {a.state.node_id: a, b.state.node_id: b}
        # Each sees the other once it renews its entry (every third of the lease) and reads the registry again.
        _wait_for(lambda: all(len(e.state.state(Registry).live()) == 2 for e in (a, b) if e.state is not None))
        groups = [f"group-{i}" for i in range(20)]
        chosen = {g: _coordinator_node(a, g) for g in groups}
        assert chosen == {g: _coordinator_node(b, g) for g in groups}
        assert set(chosen.values()) == set(nodes)  # both coordinate some of them
        group = groups[0]
        other = next(e for node, e in nodes.items() if node != chosen[group])
        assert _join(other, group=group).error_code == ErrorCode.not_coordinator
        coordinator = nodes[chosen[group]]
        assert _join_fully(coordinator, group=group).error_code == ErrorCode.none
        # The other endpoint lists it, once the coordinator's registry entry names it, without knowing its state.
        _wait_for(lambda: group in kafka_protocol_groups(shared_logs))
        listed = _ask(other, ListGroupsRequest(states_filter=(), types_filter=()), ListGroupsResponse)
        assert (group, "Unknown") in {(g.group_id, g.group_state) for g in listed.groups}
        coordinator.stop()  # a clean stop removes its entry: its groups move at once
        _wait_for(lambda: _coordinator_node(other, group) != chosen[group])
        assert _join(other, group=group).error_code == ErrorCode.member_id_required


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the refused start's thread
def test_an_expired_entry_is_dropped_and_a_live_node_id_is_not_taken_twice(logs: LogDirectory) -> None:
    storage = logs.storage
    path = storage.join(REGISTRY_FILE)
    stale = b'{"version": 1, "endpoints": [{"node_id": 7, "host": "gone", "port": 1, "expires_ms": 1}]}'
    storage.put(path, stale)
    with Endpoint(logs, _config(node_id=8)) as live:
        assert b'"gone"' not in storage.read(path)
        refused = Endpoint(logs, _config(node_id=8, advertised_host="elsewhere"))
        with pytest.raises(InvalidConfigError, match="node id 8 is already served"):
            refused.start()
        refused.stop()  # its thread ends (with the error) within this test
        assert _coordinator_node(live, "g") == 8
    assert b'"node_id": 8' not in storage.read(path)


# -- the log directory's own groups ---------------------------------------------------------------------------


def test_a_group_id_used_by_pysparklog_consumers_is_refused_to_kafka_clients(
    endpoint: Endpoint, logs: LogDirectory
) -> None:
    coordinator = StorageGroupCoordinator(logs, "shared")
    try:
        coordinator.join(StorageJoinRequest("py", ("range",), 30_000), ["t"])
        assert _join(endpoint, group="shared").error_code == ErrorCode.inconsistent_group_protocol
        listed = _ask(endpoint, ListGroupsRequest(states_filter=(), types_filter=()), ListGroupsResponse)
        assert ("shared", "Stable") in {(g.group_id, g.group_state) for g in listed.groups}
    finally:
        coordinator.close()


def test_pysparklog_consumers_cannot_join_a_group_kafka_clients_hold_through_an_endpoint(
    endpoint: Endpoint, logs: LogDirectory
) -> None:
    """The endpoint lists its groups with members in the registry at each renewal; pysparklog's own coordinator
    refuses their ids, and takes them again once the Kafka members left."""
    joined = _join_fully(endpoint, group="kafka-side")
    assert joined.error_code == ErrorCode.none
    _wait_for(lambda: "kafka-side" in kafka_protocol_groups(logs))
    coordinator = StorageGroupCoordinator(logs, "kafka-side")
    try:
        with pytest.raises(InconsistentGroupProtocolError, match="Kafka clients"):
            coordinator.join(StorageJoinRequest("py", ("range",), 30_000), ["t"])
        leave = LeaveGroupRequest(
            group_id=GroupId("kafka-side"),
            members=(MemberIdentity(member_id=joined.member_id, group_instance_id=None, reason=None),),
        )
        assert _ask(endpoint, leave, LeaveGroupResponse).members[0].error_code == ErrorCode.none
        _wait_for(lambda: "kafka-side" not in kafka_protocol_groups(logs))
        assert coordinator.join(StorageJoinRequest("py", ("range",), 30_000), ["t"]).generation > 0
    finally:
        coordinator.close()


def test_describe_and_list_groups_show_this_coordinators_groups_and_those_with_offsets(
    endpoint: Endpoint, logs: LogDirectory
) -> None:
    with OffsetStore(logs) as store:
        store.commit("offsets-only", {TopicPartition("t", 1): OffsetAndMetadata(4)})
    with ThreadPoolExecutor(4) as pool:
        joined = _group_of_three(endpoint, pool)
    described = _ask(
        endpoint,
        DescribeGroupsRequest(
            groups=(GroupId("g"), GroupId("offsets-only"), GroupId("missing")), include_authorized_operations=False
        ),
        DescribeGroupsResponse,
    ).groups
    by_id = {str(d.group_id): d for d in described}
    assert (by_id["g"].group_state, by_id["g"].protocol_type, by_id["g"].protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert sorted((m.member_id, m.member_assignment) for m in by_id["g"].members) == sorted(
        (j.member_id, str(i).encode()) for i, j in enumerate(joined)
    )
    assert (by_id["offsets-only"].group_state, by_id["offsets-only"].members) == ("Empty", ())
    assert by_id["missing"].group_state == "Dead"
    listed = _ask(endpoint, ListGroupsRequest(states_filter=("stable",), types_filter=()), ListGroupsResponse)
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Stable")]
    everything = _ask(endpoint, ListGroupsRequest(states_filter=(), types_filter=()), ListGroupsResponse)
    assert {g.group_id for g in everything.groups} == {"g", "offsets-only"}


def test_a_request_waiting_at_the_barrier_does_not_stop_the_endpoint_from_stopping(logs: LogDirectory) -> None:
    endpoint = Endpoint(logs, _config()).start()
    with ThreadPoolExecutor(1) as pool:
        member_id = _join(endpoint).member_id
        other = _join(endpoint).member_id
        waiting: Future[Any] = pool.submit(_join, endpoint, member_id)
        time.sleep(0.2)
        started = time.monotonic()
        endpoint.stop()
        assert time.monotonic() - started < 5
        with pytest.raises(ConnectionError):
            waiting.result(10)
    assert other


def _serve_in_a_process(logs: LogDirectory) -> tuple[subprocess.Popen[str], str]:
    """``pysparklog serve`` as its own process on a free port, with a one-second registry lease; its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pysparklog.cli.main", "serve", "--log-dir", logs.path, "--listen", "127.0.0.1:0"]
        + ["--registry-lease-ms", "1000", "--group-min-session-timeout-ms", "100"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    listening = LISTENING.match(line.strip())
    assert listening is not None, f"the endpoint did not start: {line!r}"
    return process, listening["bootstrap"]


def test_a_killed_coordinators_groups_move_and_its_generation_is_fenced(logs: LogDirectory) -> None:
    """The coordinator killed with -9 mid-group: its lease runs out, the surviving endpoint takes the group over
    above the dead one's generation, the offsets committed through the dead one stay, and a commit of the dead
    generation is refused."""
    process, address = _serve_in_a_process(logs)
    try:
        with Endpoint(logs, _config()) as survivor:
            assert survivor.state is not None
            registry = survivor.state.state(Registry)
            _wait_for(lambda: len(registry.live()) == 2)
            node = survivor.state.node_id
            group = next(g for g in (f"group-{i}" for i in range(100)) if not registry.coordinates(g))
            with WireClient(address) as client:
                join = JoinGroupRequest(
                    group_id=GroupId(group),
                    session_timeout=i32Timedelta.parse(timedelta(milliseconds=SESSION_MS)),
                    rebalance_timeout=i32Timedelta.parse(timedelta(milliseconds=REBALANCE_MS)),
                    member_id="",
                    group_instance_id="static-1",
                    protocol_type="consumer",
                    protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
                )
                first = client.request(join, JoinGroupResponse)
            assert first.error_code == ErrorCode.none
            sync = SyncGroupRequest(
                group_id=GroupId(group),
                generation_id=first.generation_id,
                member_id=first.member_id,
                group_instance_id="static-1",
                protocol_type="consumer",
                protocol_name="range",
                assignments=(SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"t-0"),),
            )
            with WireClient(address) as client:
                assert client.request(sync, SyncGroupResponse).assignment == b"t-0"
            partition = OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(7), committed_leader_epoch=i32(-1), committed_metadata=None
            )
            commit = OffsetCommitRequest(
                group_id=GroupId(group),
                generation_id_or_member_epoch=first.generation_id,
                member_id=first.member_id,
                group_instance_id="static-1",
                topics=(OffsetCommitRequestTopic(name=TopicName("t"), partitions=(partition,)),),
            )
            with WireClient(address) as client:
                committed = client.request(commit, OffsetCommitResponse)
            assert committed.topics[0].partitions[0].error_code == ErrorCode.none
            process.send_signal(signal.SIGKILL)
            process.wait(10)
            _wait_for(lambda: _coordinator_node(survivor, group) == node)
            taken = _join_fully(survivor, group=group)
            assert taken.error_code == ErrorCode.none and taken.generation_id > first.generation_id
            with OffsetStore(logs) as store:
                assert store.committed(group)[TopicPartition("t", 0)].offset == 7
                with pytest.raises(CommitFailedError):
                    store.commit(group, {TopicPartition("t", 0): OffsetAndMetadata(1)}, generation=first.generation_id)
    finally:
        process.kill()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()


def test_what_a_client_may_send_is_answered_with_an_error_code_not_a_closed_connection(endpoint: Endpoint) -> None:
    """A group id longer than pysparklog's own consumers allow, a leader epoch below -1, topic names no topic can
    have, an empty group id."""
    long_group = "g" * 300
    assert _join_fully(endpoint, group=long_group).error_code == ErrorCode.none
    joined = _join_fully(endpoint)
    _sync(endpoint, joined, {joined.member_id: b""})
    partitions = (
        OffsetCommitRequestPartition(
            partition_index=i32(0), committed_offset=i64(1), committed_leader_epoch=i32(-5), committed_metadata=None
        ),
    )
    request = OffsetCommitRequest(
        group_id=GroupId("g"),
        generation_id_or_member_epoch=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=None,
        topics=tuple(
            OffsetCommitRequestTopic(name=TopicName(name), partitions=partitions) for name in ("t", "../t", "x" * 300)
        ),
    )
    errors = [p.error_code for t in _ask(endpoint, request, OffsetCommitResponse).topics for p in t.partitions]
    assert errors == [ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition]
    assert _join(endpoint, group="").error_code == ErrorCode.invalid_group_id
    fetch = OffsetFetchRequest(group_id=GroupId(""), topics=None, require_stable=False)
    assert _ask(endpoint, fetch, OffsetFetchResponse).error_code == ErrorCode.invalid_group_id
