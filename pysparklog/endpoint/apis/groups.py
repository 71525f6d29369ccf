"""Coordinators and consumer groups: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup
(14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15) and ListGroups (16).

A group's coordinator is the endpoint the log directory's registry chooses for it (``registry.py``); its membership
is kept there in memory (``group_coordinator.py``) and its offsets and generations in ``__consumer_offsets``, the
topic the Python clients, the CLI and the Spark source read. Versions served: kio's whole range of each API, but
OffsetCommit v10 and OffsetFetch v10, which name topics by id only.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.apis import Api
from pysparklog.endpoint.apis.versions import NO_THROTTLE
from pysparklog.endpoint.context import RequestContext
from pysparklog.endpoint.group_coordinator import GroupCoordinator, GroupError, JoinRequest, Phase, storage_group
from pysparklog.endpoint.registry import Registry
from pysparklog.errors import InvalidPartitionsError, InvalidTopicError, PySparkLogError, UnknownTopicError
from pysparklog.group import describe_group, list_group_ids
from pysparklog.offsets import OFFSET_METADATA_MAX_BYTES
from pysparklog.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger("pysparklog.endpoint.groups")

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 8, 9, 15, 16
#: FindCoordinator's key types (``FindCoordinatorRequest.CoordinatorType``).
GROUP_KEY, TRANSACTION_KEY = 0, 1
#: The protocol type of groups of Kafka's consumers; pysparklog's own consumers speak it too.
CONSUMER_PROTOCOL = "consumer"
#: ListGroups v5's group type of the classic protocol (KIP-848 names the other "consumer").
CLASSIC_GROUP_TYPE = "classic"
#: The state ListGroups gives a group that another endpoint coordinates: Kafka's ``GroupState.UNKNOWN``.
UNKNOWN_STATE = "Unknown"


def _coordinator(context: RequestContext) -> GroupCoordinator:
    return context.endpoint.state(GroupCoordinator)


def _millis(value: timedelta | int) -> int:
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


# -- FindCoordinator --------------------------------------------------------------------------------------------


def _find(context: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    """The coordinator of one key, as the fields of an answer.

    A group's is the endpoint the registry chooses; a transactional id's is this endpoint: a transaction's state is
    in the log directory behind conditional writes, so any endpoint may coordinate it.
    """
    endpoint = context.endpoint
    if key_type == TRANSACTION_KEY:
        return {"node_id": endpoint.node_id, "host": endpoint.advertised_host, "port": endpoint.advertised_port}
    if key_type != GROUP_KEY:
        return {
            "error_code": ErrorCode.invalid_request,
            "error_message": f"key type {key_type} is not served; accepted: 0 (group), 1 (transaction)",
        }
    chosen = endpoint.state(Registry).coordinator(key)
    if chosen is None:
        return {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": "this endpoint's registration has lapsed; it coordinates no group until it renews",
        }
    return {"node_id": chosen.node_id, "host": chosen.host, "port": chosen.port}


async def find_coordinator(context: RequestContext, request: Any) -> Any:
    """FindCoordinator: v0-v3 one key (v0 a group's), v4+ a batch of keys of one type."""
    make = context.message.make
    unknown = {"error_code": ErrorCode.none, "error_message": None, "node_id": -1, "host": "", "port": -1}
    if context.message.version >= 4:
        coordinators = tuple(
            make("Coordinator", **{**unknown, "key": key, **_find(context, key, request.key_type)})
            for key in request.coordinator_keys
        )
        return make("FindCoordinatorResponse", throttle_time=NO_THROTTLE, coordinators=coordinators)
    key_type = getattr(request, "key_type", GROUP_KEY)
    return make(
        "FindCoordinatorResponse", throttle_time=NO_THROTTLE, **{**unknown, **_find(context, request.key, key_type)}
    )


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------------------


async def join_group(context: RequestContext, request: Any) -> Any:
    version = context.message.version
    session_timeout_ms = _millis(request.session_timeout)
    rebalance_timeout_ms = _millis(getattr(request, "rebalance_timeout", -1))
    join = JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=context.header.client_id or "",
        client_host="/" + context.peer.rpartition(":")[0],
        session_timeout_ms=session_timeout_ms,
        # v0 has none: the session timeout bounds the rebalance, as it did then.
        rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        require_known_member_id=version >= 4,
    )
    try:
        result = await _coordinator(context).join(request.group_id, join)
    except GroupError as error:
        result_fields: dict[str, Any] = {"error_code": error.code, "member_id": request.member_id}
    else:
        result_fields = {
            "error_code": result.error,
            "generation_id": result.generation,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "leader": result.leader,
            "member_id": result.member_id,
            "members": tuple(
                context.message.make(
                    "JoinGroupResponseMember", member_id=member_id, group_instance_id=instance_id, metadata=metadata
                )
                for member_id, instance_id, metadata in result.members
            ),
        }
    base: dict[str, Any] = {
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "members": (),
    }
    fields = {**base, **result_fields}
    if version < 7:  # a non-nullable string before v7
        fields["protocol_name"] = fields["protocol_name"] or ""
    return context.message.make("JoinGroupResponse", throttle_time=NO_THROTTLE, skip_assignment=False, **fields)


async def sync_group(context: RequestContext, request: Any) -> Any:
    make = context.message.make
    try:
        result = await _coordinator(context).sync(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            (getattr(request, "protocol_type", None), getattr(request, "protocol_name", None)),
            {a.member_id: a.assignment for a in request.assignments},
        )
    except GroupError as error:
        return make("SyncGroupResponse", throttle_time=NO_THROTTLE, error_code=error.code, assignment=b"")
    return make(
        "SyncGroupResponse",
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def heartbeat(context: RequestContext, request: Any) -> Any:
    try:
        error = await _coordinator(context).heartbeat(
            request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None)
        )
    except GroupError as refused:
        error = refused.code
    return context.message.make("HeartbeatResponse", throttle_time=NO_THROTTLE, error_code=error)


async def leave_group(context: RequestContext, request: Any) -> Any:
    """LeaveGroup: v0-v2 one member (its error is the response's), v3+ a batch (an error each)."""
    make = context.message.make
    batch = context.message.version >= 3
    leaving: list[tuple[str, str | None]] = []
    if batch:
        leaving += [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving.append((request.member_id, None))
    try:
        errors = await _coordinator(context).leave(request.group_id, leaving)
    except GroupError as error:
        return make("LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=error.code, members=())
    if not batch:
        return make("LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=errors[0])
    members = tuple(
        make("MemberResponse", member_id=member_id, group_instance_id=instance_id, error_code=error)
        for (member_id, instance_id), error in zip(leaving, errors, strict=True)
    )
    return make("LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none, members=members)


# -- OffsetCommit and OffsetFetch -------------------------------------------------------------------------------


def _partition_counts(context: RequestContext, topics: set[str]) -> dict[str, int]:
    """The partitions of each of ``topics`` that exists."""
    store = context.endpoint.log_dir.topics
    counts = {}
    for topic in topics:
        try:
            counts[topic] = store.get(topic).partitions
        except (UnknownTopicError, InvalidTopicError, InvalidPartitionsError):
            pass  # none of its partitions exists: each is UNKNOWN_TOPIC_OR_PARTITION
    return counts


async def offset_commit(context: RequestContext, request: Any) -> Any:
    """OffsetCommit v2-v9: each partition checked (a topic or partition that does not exist, metadata over
    ``offset.metadata.max.bytes``), the rest committed as one batch once the member and generation are checked."""
    make = context.message.make
    counts = await context.endpoint.run_blocking(_partition_counts, context, {t.name for t in request.topics})
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in request.topics:
        for p in topic.partitions:
            metadata = p.committed_metadata or ""
            if not 0 <= p.partition_index < counts.get(topic.name, 0):
                errors[(topic.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                errors[(topic.name, p.partition_index)] = ErrorCode.offset_metadata_too_large
            elif p.committed_offset < 0:
                errors[(topic.name, p.partition_index)] = ErrorCode.invalid_commit_offset_size
            else:
                # Kafka takes a negative leader epoch as none (``RecordBatch.NO_PARTITION_LEADER_EPOCH``, -1).
                epoch = max(getattr(p, "committed_leader_epoch", -1), -1)
                offsets[TopicPartition(topic.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, metadata, epoch
                )
    outcome = ErrorCode.none
    if offsets:
        try:
            outcome = await _coordinator(context).commit(
                request.group_id,
                request.generation_id_or_member_epoch,
                request.member_id,
                getattr(request, "group_instance_id", None),
                offsets,
            )
        except GroupError as error:
            outcome = error.code
    topics = tuple(
        make(
            "OffsetCommitResponseTopic",
            name=topic.name,
            partitions=tuple(
                make(
                    "OffsetCommitResponsePartition",
                    partition_index=p.partition_index,
                    error_code=errors.get((topic.name, p.partition_index), outcome),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make("OffsetCommitResponse", throttle_time=NO_THROTTLE, topics=topics)


def _fetch_group(context: RequestContext, group_id: str, wanted: Any) -> tuple[ErrorCode, list[tuple[str, list[Any]]]]:
    """A group's committed offsets (of ``wanted``'s topics and partitions, or all when None) as
    (topic, [(partition, offset, leader epoch, metadata)]) in the order asked."""
    if not group_id:
        return ErrorCode.invalid_group_id, []
    try:
        committed = _coordinator(context).offsets.committed(group_id)
    except (PySparkLogError, OSError) as error:
        log.warning("offsets of group %s cannot be read: %s", group_id, error)
        return ErrorCode.coordinator_not_available, []  # the client retries
    if wanted is None:
        by_topic: dict[str, list[Any]] = {}
        for tp, c in committed.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, c.offset, c.leader_epoch, c.metadata))
        return ErrorCode.none, list(by_topic.items())
    topics = []
    for topic in wanted:
        rows = []
        for partition in topic.partition_indexes:
            found = committed.get(TopicPartition(topic.name, partition))
            rows.append(
                (partition, found.offset, found.leader_epoch, found.metadata)
                if found is not None
                else (partition, -1, -1, "")
            )
        topics.append((topic.name, rows))
    return ErrorCode.none, topics


async def offset_fetch(context: RequestContext, request: Any) -> Any:
    """OffsetFetch v1-v9 (v8+ a batch of groups), from ``__consumer_offsets``: any endpoint answers it, the offsets
    being in the log directory. ``require_stable`` (v7+) is accepted, but pending transactional offset commits
    cannot be told apart (see docs/endpoint.md)."""
    make = context.message.make
    if context.message.version >= 8:
        groups = []
        for group in request.groups:
            error, topics = await context.endpoint.run_blocking(_fetch_group, context, group.group_id, group.topics)
            groups.append(
                make(
                    "OffsetFetchResponseGroup",
                    group_id=group.group_id,
                    error_code=error,
                    topics=tuple(_fetched_topic(context, "Topics", "Partitions", name, rows) for name, rows in topics),
                )
            )
        return make("OffsetFetchResponse", throttle_time=NO_THROTTLE, groups=tuple(groups))
    error, topics = await context.endpoint.run_blocking(_fetch_group, context, request.group_id, request.topics)
    return make(
        "OffsetFetchResponse",
        throttle_time=NO_THROTTLE,
        error_code=error,
        topics=tuple(_fetched_topic(context, "Topic", "Partition", name, rows) for name, rows in topics),
    )


def _fetched_topic(context: RequestContext, topic_class: str, partition_class: str, name: str, rows: list[Any]) -> Any:
    """One topic of an OffsetFetch answer (its classes are named in the singular before v8, the plural after)."""
    make = context.message.make
    partitions = tuple(
        make(
            f"OffsetFetchResponse{partition_class}",
            partition_index=partition,
            committed_offset=offset,
            committed_leader_epoch=epoch,
            metadata=metadata,
            error_code=ErrorCode.none,
        )
        for partition, offset, epoch, metadata in rows
    )
    return make(f"OffsetFetchResponse{topic_class}", name=name, partitions=partitions)


# -- DescribeGroups and ListGroups ------------------------------------------------------------------------------


def _stored_state(context: RequestContext, group_id: str) -> tuple[str, tuple[Any, ...]] | None:
    """What the log directory knows of a group this endpoint does not hold: a group of pysparklog's own consumers
    (its state and members, without Kafka's metadata and assignment bytes), or a group with committed offsets
    (Empty); None when it knows nothing of it."""
    found = storage_group(context.endpoint.log_dir, group_id)
    if found is not None and found.members:
        members = tuple(
            context.message.make(
                "DescribedGroupMember",
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.host,
                member_metadata=b"",
                member_assignment=b"",
            )
            for m in found.members
        )
        return found.state, members
    if _coordinator(context).offsets.committed(group_id):
        return str(Phase.EMPTY), ()
    return None


async def describe_groups(context: RequestContext, request: Any) -> Any:
    """DescribeGroups: a group this endpoint coordinates as its memory holds it; another's, NOT_COORDINATOR; one
    it coordinates but holds nothing of, as the log directory knows it (Dead when it knows nothing: v6+ says
    GROUP_ID_NOT_FOUND, as Kafka 4 does)."""
    make = context.message.make
    coordinator = _coordinator(context)
    described = []
    for group_id in request.groups:
        fields: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group_id,
            "group_state": str(Phase.DEAD),
            "protocol_type": "",
            "protocol_data": "",
            "members": (),
            "authorized_operations": -(2**31),
        }
        try:
            group = await coordinator.group(group_id, create=False)
        except GroupError as error:
            fields.update(error_code=error.code, error_message=str(error))
        else:
            if group is not None and group.phase is not Phase.DEAD:
                stable = group.phase in (Phase.STABLE, Phase.COMPLETING_REBALANCE)
                fields.update(
                    group_state=str(group.phase),
                    protocol_type=group.protocol_type or "",
                    protocol_data=(group.protocol_name or "") if stable else "",
                    members=tuple(
                        make(
                            "DescribedGroupMember",
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                            member_assignment=m.assignment if group.phase is Phase.STABLE else b"",
                        )
                        for m in group.members.values()
                    ),
                )
            else:
                stored = await context.endpoint.run_blocking(_stored_state, context, group_id)
                if stored is not None:
                    fields.update(group_state=stored[0], protocol_type=CONSUMER_PROTOCOL, members=stored[1])
                elif context.message.version >= 6:
                    fields.update(
                        error_code=ErrorCode.group_id_not_found, error_message=f"group {group_id} does not exist"
                    )
        described.append(make("DescribedGroup", **fields))
    return make("DescribeGroupsResponse", throttle_time=NO_THROTTLE, groups=tuple(described))


def _listed(context: RequestContext) -> dict[str, str]:
    """Every group the log directory knows (with committed offsets, or pysparklog's own consumers' groups) with
    its state, as far as this endpoint can tell it."""
    coordinator = _coordinator(context)
    log_dir = context.endpoint.log_dir
    states = {group_id: str(Phase.EMPTY) for group_id in coordinator.offsets.groups()}
    for group_id in list_group_ids(log_dir):
        found = describe_group(log_dir, group_id)
        if found is not None and found.members:
            states[group_id] = found.state
    return states


async def list_groups(context: RequestContext, request: Any) -> Any:
    """ListGroups: the groups this endpoint coordinates, in the state its memory holds, and every other group the
    log directory knows: a Kafka endpoint lists only its own groups, but a client sees one endpoint here (each
    answers Metadata as the only broker), so each lists them all. A Kafka-protocol group another endpoint
    coordinates is "Unknown" (Kafka's ``GroupState.UNKNOWN``): its state is in that endpoint's memory."""
    coordinator = _coordinator(context)
    states = await context.endpoint.run_blocking(_listed, context)
    for group_id, group in coordinator.groups.items():
        if group.phase is not Phase.EMPTY or group_id not in states:
            states[group_id] = str(group.phase)
    registry = context.endpoint.state(Registry)
    for group_id in [g for g in states if g not in coordinator.groups and not registry.coordinates(g)]:
        if states[group_id] == str(Phase.EMPTY):
            states[group_id] = UNKNOWN_STATE
    wanted_states = {s.lower() for s in getattr(request, "states_filter", ())}
    wanted_types = {t.lower() for t in getattr(request, "types_filter", ())}
    if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
        states = {}
    listed = tuple(
        context.message.make(
            "ListedGroup",
            group_id=group_id,
            protocol_type=CONSUMER_PROTOCOL,
            group_state=state,
            group_type=CLASSIC_GROUP_TYPE,
        )
        for group_id, state in sorted(states.items())
        if not wanted_states or state.lower() in wanted_states
    )
    return context.message.make(
        "ListGroupsResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=listed
    )


APIS = (
    Api(OFFSET_COMMIT, 2, 9, offset_commit),
    Api(OFFSET_FETCH, 1, 9, offset_fetch),
    Api(FIND_COORDINATOR, 0, 6, find_coordinator),
    Api(JOIN_GROUP, 0, 9, join_group),
    Api(HEARTBEAT, 0, 4, heartbeat),
    Api(LEAVE_GROUP, 0, 5, leave_group),
    Api(SYNC_GROUP, 0, 5, sync_group),
    Api(DESCRIBE_GROUPS, 0, 6, describe_groups),
    Api(LIST_GROUPS, 0, 5, list_groups),
)
