"""Kafka's classic group protocol, coordinated in memory by the endpoint the registry chooses for each group.

The membership of a group lives in its coordinator's memory, as a broker's GroupCoordinator keeps it; what must
outlive the coordinator is in the log directory: the committed offsets and each generation, as GroupMetadata
records of ``__consumer_offsets`` (``OffsetStore.advance_generation``). A coordinator that takes a group over (its
previous coordinator died and the registry moved the group) starts above every generation recorded, so a commit of
the dead coordinator's generation is refused by the offsets' fencing, whichever process makes it.

The states and transitions are those of Kafka's classic groups (``ClassicGroupState``)::

    Empty --join--> PreparingRebalance --every member rejoined, or the rebalance timeout--> CompletingRebalance
    CompletingRebalance --the leader's SyncGroup--> Stable --a join, leave, expiry or new protocols--> Preparing...
    PreparingRebalance --no member left--> Empty;  any --the coordinator resigns--> Dead

Everything here runs on the endpoint's event loop (one thread), so a group changes one request at a time; the
requests that wait (JoinGroup for the barrier, SyncGroup for the leader's assignment) wait on futures that the
transitions complete. The engine's blocking calls (recording a generation, committing offsets) run on the engine's
threads; a transition that spans one re-reads the group after it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from kio.schema.errors import ErrorCode

from pysparklog._compat import StrEnum
from pysparklog.endpoint.context import EndpointState
from pysparklog.endpoint.registry import Registry
from pysparklog.errors import CommitFailedError, InvalidConfigError, PySparkLogError
from pysparklog.group import GroupDescription, describe_group, validate_group_id
from pysparklog.offsets import OffsetStore
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger("pysparklog.endpoint.groups")


class Phase(StrEnum):
    """Kafka's ``ClassicGroupState``, as DescribeGroups and ListGroups name them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


def storage_group(log_dir: LogDirectory, group_id: str) -> GroupDescription | None:
    """The group of pysparklog's own consumers (``pysparklog.group``, coordinated through the log directory) with
    this id, None when there is none, or when the id is one they cannot use (``validate_group_id``: Kafka's ids may
    be longer)."""
    try:
        validate_group_id(group_id)
    except InvalidConfigError:
        return None
    return describe_group(log_dir, group_id)


class GroupError(Exception):
    """A request the coordinator refuses, with the Kafka error code its response carries."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a JoinGroup says, whatever its version.

    Attributes:
        require_known_member_id: v4+: a member joining without an id is given one with MEMBER_ID_REQUIRED and
            joins again with it, so a member that times out mid-join leaves no member behind (KIP-394).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A JoinGroup's answer; ``members`` (id, instance id, metadata) only for the leader."""

    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Member:
    """A member as its coordinator holds it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    joining: asyncio.Future[JoinResult] | None = None
    syncing: asyncio.Future[SyncResult] | None = None
    expiry: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str) -> bytes:
        return next(metadata for name, metadata in self.protocols if name == protocol)

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(slots=True)
class ClassicGroup:
    """One group's membership: ``members`` in the order they joined (the first is leader when none is)."""

    group_id: str
    generation: int
    phase: Phase = Phase.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED, each dropped unless it joins within its session timeout.
    pending: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    join_deadline: asyncio.TimerHandle | None = None
    #: A generation is being recorded (``OffsetStore.advance_generation``) to complete the join barrier.
    completing: bool = False

    def supports(self, protocols: Iterable[str]) -> bool:
        """Whether a member with ``protocols`` shares one with every member (Kafka's ``supportsProtocols``)."""
        offered = set(protocols)
        return all(offered.intersection(m.protocol_names) for m in self.members.values())

    def select_protocol(self) -> str:
        """Kafka's ``selectProtocol``: among the protocols every member supports, the one most members list first
        among those (ties: the first such in the first member's list)."""
        members = list(self.members.values())
        common = set.intersection(*(set(m.protocol_names) for m in members))
        votes = Counter(next(p for p in m.protocol_names if p in common) for m in members)
        return max((p for p in members[0].protocol_names if p in common), key=lambda p: votes[p])

    def static_member(self, group_instance_id: str) -> Member | None:
        return next((m for m in self.members.values() if m.group_instance_id == group_instance_id), None)


class GroupCoordinator:
    """The groups this endpoint coordinates (``EndpointState.state(GroupCoordinator)``)."""

    def __init__(self, endpoint: EndpointState) -> None:
        self.endpoint = endpoint
        self.offsets = OffsetStore(endpoint.log_dir)
        self.groups: dict[str, ClassicGroup] = {}
        self._loading: dict[str, asyncio.Future[ClassicGroup]] = {}

    @property
    def registry(self) -> Registry:
        """The endpoint's registry (made at its start; not taken here, inside ``EndpointState.state``'s lock)."""
        return self.endpoint.state(Registry)

    def close(self) -> None:
        """Forget every group and close the offsets store. Called off the event loop once every connection is closed:
        no request waits on a group any more, so only the timers are stopped."""
        for group in self.groups.values():
            timers = [m.expiry for m in group.members.values()] + [*group.pending.values(), group.join_deadline]
            for timer in timers:
                if timer is not None:
                    timer.cancel()
        self.groups.clear()
        self.offsets.close()

    def _publish(self) -> None:
        """Tell the registry which groups have members here: it lists them at its next renewal, and pysparklog's own
        consumers refuse to join those."""
        self.registry.active_groups = tuple(sorted(g for g, group in self.groups.items() if group.members))

    # -- taking and giving up groups --------------------------------------------------------------

    async def group(self, group_id: str, *, create: bool) -> ClassicGroup | None:
        """The group, loaded on first use when ``create`` (None when it is not loaded and not ``create``).

        Raises:
            GroupError: INVALID_GROUP_ID for an empty id; NOT_COORDINATOR when another endpoint coordinates it (the
                client finds the coordinator again), a group held here being given up at once.
        """
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id, "a group id must not be empty")
        if not self.registry.coordinates(group_id):
            held = self.groups.get(group_id)
            if held is not None:
                log.info("group %s moved to another endpoint: giving it up", group_id)
                self._unload(held, ErrorCode.not_coordinator)
            raise GroupError(ErrorCode.not_coordinator, f"group {group_id} is coordinated by another endpoint")
        group = self.groups.get(group_id)
        if group is not None or not create:
            return group
        loading = self._loading.get(group_id)
        if loading is None:
            loading = self._loading[group_id] = asyncio.get_running_loop().create_future()
            try:
                recorded = await self.endpoint.run_blocking(self.offsets.recorded_generation, group_id)
            except (PySparkLogError, OSError) as error:
                failure = GroupError(ErrorCode.coordinator_not_available, f"group {group_id} cannot load: {error}")
                loading.set_exception(failure)
                loading.exception()  # marked retrieved: each waiter gets it through its own await
                raise failure from None
            finally:
                del self._loading[group_id]
            # The group starts where its last coordinator left it: its next generation is above this one.
            group = self.groups[group_id] = ClassicGroup(group_id, max(recorded, 0))
            loading.set_result(group)
            return group
        return await asyncio.shield(loading)

    def _unload(self, group: ClassicGroup, error: ErrorCode) -> None:
        """Forget a group: its waiting requests are answered with ``error``, its timers cancelled."""
        group.phase = Phase.DEAD
        for member in list(group.members.values()):
            self._drop_member(group, member, error)
        for timer in group.pending.values():
            timer.cancel()
        group.pending.clear()
        if group.join_deadline is not None:
            group.join_deadline.cancel()
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self._publish()

    # -- JoinGroup --------------------------------------------------------------------------------

    async def join(self, group_id: str, request: JoinRequest) -> JoinResult:
        """Kafka's ``classicGroupJoin``: the answer once the join barrier completes (or an error at once)."""
        config = self.endpoint.config
        if not config.group_min_session_timeout_ms <= request.session_timeout_ms <= config.group_max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, request.member_id)
        if not request.protocol_type or not request.protocols:
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        group = await self.group(group_id, create=True)
        assert group is not None
        if not group.members and not group.pending:
            try:
                await self._check_not_a_storage_group(group_id)
            except GroupError:
                self._unload(group, ErrorCode.inconsistent_group_protocol)  # not a group of this coordinator's
                raise
            if self.groups.get(group_id) is not group:
                raise GroupError(ErrorCode.not_coordinator, f"group {group_id} was given up meanwhile")
        names = [name for name, _ in request.protocols]
        if group.members and (request.protocol_type != group.protocol_type or not group.supports(names)):
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        if not group.members:
            group.protocol_type = request.protocol_type
        if not request.member_id:
            return await self._join_unknown(group, request)
        return await self._join_known(group, request)

    async def _check_not_a_storage_group(self, group_id: str) -> None:
        """A group id that pysparklog's own consumers (``pysparklog.group``, coordinated through the log directory)
        use with live members cannot also be a Kafka-protocol group: the two coordinators would hand the same
        partitions out twice. Refused as Kafka refuses a join whose protocol the group's members do not speak."""
        found = await self.endpoint.run_blocking(storage_group, self.endpoint.log_dir, group_id)
        if found is not None and found.members:
            raise GroupError(
                ErrorCode.inconsistent_group_protocol,
                f"group {group_id} has {len(found.members)} live member(s) of pysparklog's own consumers "
                "(coordinated through the log directory); a Kafka client must use another group.id",
            )

    async def _join_unknown(self, group: ClassicGroup, request: JoinRequest) -> JoinResult:
        member_id = f"{request.client_id}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            previous = group.static_member(request.group_instance_id)
            if previous is not None:
                return await self._replace_static_member(group, previous, member_id, request)
        elif request.require_known_member_id:
            loop = asyncio.get_running_loop()
            group.pending[member_id] = loop.call_later(
                request.session_timeout_ms / 1000, self._drop_pending, group, member_id
            )
            return JoinResult(ErrorCode.member_id_required, member_id)
        member = self._new_member(member_id, request)
        group.members[member_id] = member
        return await self._rejoin(group, member)

    async def _join_known(self, group: ClassicGroup, request: JoinRequest) -> JoinResult:
        timer = group.pending.pop(request.member_id, None)
        if timer is not None:
            timer.cancel()
            member = self._new_member(request.member_id, request)
            group.members[member.member_id] = member
            return await self._rejoin(group, member)
        member = self._member(group, request.member_id, request.group_instance_id)
        unchanged = member.protocols == request.protocols
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if group.phase is Phase.COMPLETING_REBALANCE and unchanged:
            return self._join_result(group, member)  # its answer was lost: the same again
        if group.phase is Phase.STABLE and unchanged and member.member_id != group.leader_id:
            return self._join_result(group, member)  # a follower rejoining changes nothing
        return await self._rejoin(group, member)

    async def _replace_static_member(
        self, group: ClassicGroup, previous: Member, member_id: str, request: JoinRequest
    ) -> JoinResult:
        """A static member restarted (KIP-345): the new instance takes the old one's place and assignment under a
        new member id, and the old one is fenced; with unchanged protocols in a stable group, without a
        rebalance."""
        unchanged = previous.protocols == request.protocols
        self._drop_member(group, previous, ErrorCode.fenced_instance_id)
        member = self._new_member(member_id, request)
        member.assignment = previous.assignment
        group.members[member_id] = member
        if group.leader_id == previous.member_id:
            group.leader_id = member_id
        if group.phase is Phase.STABLE and unchanged:
            self._schedule_expiry(group, member)
            return self._join_result(group, member)
        return await self._rejoin(group, member)

    def _new_member(self, member_id: str, request: JoinRequest) -> Member:
        return Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocols,
        )

    async def _rejoin(self, group: ClassicGroup, member: Member) -> JoinResult:
        """Put the member behind the join barrier and wait for it to complete."""
        if member.expiry is not None:
            member.expiry.cancel()  # a member waiting at the barrier is alive until the rebalance timeout
        if member.joining is None or member.joining.done():
            member.joining = asyncio.get_running_loop().create_future()
        joining = member.joining
        self._prepare_rebalance(group)
        self._maybe_complete_join(group)
        return await asyncio.shield(joining)

    def _join_result(self, group: ClassicGroup, member: Member) -> JoinResult:
        assert group.protocol_name is not None and group.leader_id is not None
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == group.leader_id:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id,
            members,
        )

    # -- the barrier ------------------------------------------------------------------------------

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        """Start a rebalance (Kafka's ``prepareRebalance``): members must rejoin within the rebalance timeout."""
        if group.phase is Phase.PREPARING_REBALANCE:
            return
        if group.phase is Phase.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
        group.phase = Phase.PREPARING_REBALANCE
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.join_deadline = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, lambda: asyncio.ensure_future(self._complete_join(group))
        )

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        """Complete the barrier once every member rejoined and no member id handed out is still to join."""
        if group.phase is not Phase.PREPARING_REBALANCE or group.completing or group.pending:
            return
        if all(m.joining is not None and not m.joining.done() for m in group.members.values()):
            asyncio.ensure_future(self._complete_join(group))

    async def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's ``onCompleteJoin``: members that did not rejoin are removed, the next generation is recorded and
        every member answered, the leader with every member's metadata for the protocol chosen."""
        if group.phase is not Phase.PREPARING_REBALANCE or group.completing:
            return
        group.completing = True
        try:
            generation = await self.endpoint.run_blocking(
                self.offsets.advance_generation, group.group_id, group.generation + 1
            )
        except (PySparkLogError, OSError) as error:
            log.warning(
                "group %s: its next generation cannot be recorded (%s); giving the group up", group.group_id, error
            )
            self._unload(group, ErrorCode.coordinator_not_available)
            return
        finally:
            group.completing = False
        if self.groups.get(group.group_id) is not group:
            return  # given up meanwhile
        if group.join_deadline is not None:
            group.join_deadline.cancel()
            group.join_deadline = None
        for member in [m for m in group.members.values() if m.joining is None or m.joining.done()]:
            self._drop_member(group, member, ErrorCode.unknown_member_id)
        for timer in group.pending.values():
            timer.cancel()
        group.pending.clear()
        group.generation = generation
        if not group.members:
            group.phase, group.protocol_type, group.protocol_name, group.leader_id = Phase.EMPTY, None, None, None
            self._publish()
            return
        group.phase = Phase.COMPLETING_REBALANCE
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        for member in group.members.values():
            assert member.joining is not None
            member.joining.set_result(self._join_result(group, member))
            member.joining = None
            self._schedule_expiry(group, member)
        self._publish()

    # -- members leaving --------------------------------------------------------------------------

    def _member(self, group: ClassicGroup, member_id: str, group_instance_id: str | None) -> Member:
        """The member, checked as Kafka's ``validateMember`` checks it.

        Raises:
            GroupError: UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for a static member a newer instance replaced.
        """
        if group_instance_id is not None:
            current = group.static_member(group_instance_id)
            if current is None:
                raise GroupError(
                    ErrorCode.unknown_member_id, f"no member of group {group.group_id} is {group_instance_id}"
                )
            if current.member_id != member_id:
                raise GroupError(ErrorCode.fenced_instance_id, f"{member_id} was replaced by {current.member_id}")
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id, f"{member_id} is not a member of group {group.group_id}")
        return member

    def _answer_sync(self, member: Member, result: SyncResult) -> None:
        if member.syncing is not None and not member.syncing.done():
            member.syncing.set_result(result)
        member.syncing = None

    def _drop_member(self, group: ClassicGroup, member: Member, error: ErrorCode) -> None:
        """Remove a member, answering its waiting requests with ``error``."""
        if group.members.get(member.member_id) is member:
            del group.members[member.member_id]
        if member.expiry is not None:
            member.expiry.cancel()
        if member.joining is not None and not member.joining.done():
            member.joining.set_result(JoinResult(error, member.member_id))
        member.joining = None
        self._answer_sync(member, SyncResult(error))

    def _drop_pending(self, group: ClassicGroup, member_id: str) -> None:
        group.pending.pop(member_id, None)
        self._maybe_complete_join(group)

    def _members_left(self, group: ClassicGroup) -> None:
        """After members went: the others rebalance (or the barrier may now be complete)."""
        if group.phase in (Phase.STABLE, Phase.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)

    def _schedule_expiry(self, group: ClassicGroup, member: Member) -> None:
        """(Re)start the member's session: without a heartbeat (or a join, sync or commit) within its session
        timeout it is removed and the others rebalance."""
        if member.expiry is not None:
            member.expiry.cancel()
        member.expiry = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._expire, group, member
        )

    def _expire(self, group: ClassicGroup, member: Member) -> None:
        if group.members.get(member.member_id) is not member or member.joining is not None:
            return
        log.info("group %s: member %s timed out", group.group_id, member.member_id)
        self._drop_member(group, member, ErrorCode.unknown_member_id)
        self._members_left(group)

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Kafka's LeaveGroup: each (member id, group instance id) removed; the error of each."""
        group = await self.group(group_id, create=False)
        errors: list[ErrorCode] = []
        for member_id, group_instance_id in leaving:
            if group is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            if not member_id and group_instance_id is not None:
                static = group.static_member(group_instance_id)
                member_id = static.member_id if static is not None else ""
            timer = group.pending.pop(member_id, None)
            if timer is not None:
                timer.cancel()
                errors.append(ErrorCode.none)
                continue
            try:
                member = self._member(group, member_id, group_instance_id)
            except GroupError as error:
                errors.append(error.code)
                continue
            self._drop_member(group, member, ErrorCode.unknown_member_id)
            errors.append(ErrorCode.none)
        if group is not None:
            self._members_left(group)
        return errors

    # -- SyncGroup and Heartbeat ------------------------------------------------------------------

    def _current_member(
        self, group: ClassicGroup | None, generation: int, member_id: str, group_instance_id: str | None
    ) -> tuple[ClassicGroup, Member]:
        """The group and member a SyncGroup or Heartbeat of ``generation`` comes from, checked as Kafka checks them.

        Raises:
            GroupError: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or ILLEGAL_GENERATION.
        """
        if group is None or group.phase in (Phase.EMPTY, Phase.DEAD):
            raise GroupError(ErrorCode.unknown_member_id, f"{member_id} is not a member: the group has none")
        member = self._member(group, member_id, group_instance_id)
        if generation != group.generation:
            raise GroupError(
                ErrorCode.illegal_generation, f"generation {generation} is not the group's, {group.generation}"
            )
        return group, member

    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        protocol: tuple[str | None, str | None],
        assignments: dict[str, bytes],
    ) -> SyncResult:
        """Kafka's SyncGroup: the member's assignment, once the leader sent the generation's assignments."""
        group, member = self._current_member(
            await self.group(group_id, create=False), generation, member_id, group_instance_id
        )
        protocol_type, protocol_name = protocol
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.phase is Phase.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        self._schedule_expiry(group, member)
        if group.phase is Phase.STABLE:
            return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)
        member.syncing = syncing = asyncio.get_running_loop().create_future()
        if member_id == group.leader_id:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            group.phase = Phase.STABLE
            for other in group.members.values():
                self._answer_sync(
                    other, SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, other.assignment)
                )
        return await asyncio.shield(syncing)

    async def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Kafka's Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""
        group, member = self._current_member(
            await self.group(group_id, create=False), generation, member_id, group_instance_id
        )
        self._schedule_expiry(group, member)
        return ErrorCode.rebalance_in_progress if group.phase is Phase.PREPARING_REBALANCE else ErrorCode.none

    # -- offsets ----------------------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> ErrorCode:
        """Kafka's ``validateOffsetCommit``, then the commit appended to ``__consumer_offsets`` fenced by its
        generation (a commit of a generation older than the recorded one is ILLEGAL_GENERATION)."""
        from_member = generation >= 0 or bool(member_id) or group_instance_id is not None
        group = await self.group(group_id, create=not from_member)
        if from_member:
            if group is None:
                return ErrorCode.unknown_member_id
            try:
                member = self._member(group, member_id, group_instance_id)
            except GroupError as error:
                return error.code
            if generation != group.generation:
                return ErrorCode.illegal_generation
            if group.phase is Phase.COMPLETING_REBALANCE:
                return ErrorCode.rebalance_in_progress
            if member.joining is None:
                self._schedule_expiry(group, member)  # a commit is as good as a heartbeat
        else:
            assert group is not None
            if group.phase is not Phase.EMPTY:
                return ErrorCode.unknown_member_id  # outside the group only while it has no members
        try:
            await self.endpoint.run_blocking(
                partial(self.offsets.commit, group_id, offsets, generation=group.generation)
            )
        except CommitFailedError:
            return ErrorCode.illegal_generation  # the group moved past this generation (another coordinator's)
        except InvalidConfigError:
            return ErrorCode.invalid_commit_offset_size  # over max.message.bytes of __consumer_offsets, as Kafka says
        except (PySparkLogError, OSError) as error:
            log.warning("a commit of group %s cannot be appended: %s", group_id, error)
            return ErrorCode.coordinator_not_available  # the client finds the coordinator and retries
        return ErrorCode.none
