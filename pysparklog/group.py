"""Consumer-group membership without a broker: Kafka's group coordinator, kept in one file per group.

Kafka's coordinator is a broker that members talk to. Here the coordinator's state is a small JSON
file in the log directory (``pysparklog-group.<group>.json``, the group id percent-encoded; a
file, not a directory, as a Kafka broker refuses directories it cannot parse as partitions), and every member runs the
coordinator's logic itself on each heartbeat, under an exclusive lock of that file: expire members
whose session timed out, take in joins, leaves and subscription or partition-count changes, and when
any of those happened, start a new generation with the assignment the group's assignor computes. The
state is written back only if it is still the version read (``VersionedFile``): a member whose lock
lapsed meanwhile (a lease that ran out while it stalled) fails with ``MetadataChangedError`` instead of
handing back partitions the group has since given to others.

Partitions change hands by an explicit hand-off. The state records, besides each member's target
assignment, which member *owns* (fetches) each partition. A member claims a partition of its target
only once nobody owns it; the previous owner gives it up at its next heartbeat, after committing
its position. So two live members never fetch the same partition, even when a generation's
assignment is computed before every member has heard of it. A member that dies without leaving
keeps its partitions until its session times out; then anyone's heartbeat removes it and frees
them. A member that cannot heartbeat for its session timeout must assume it was removed: the
consumer stops fetching then (``Membership.valid_until_ms``).

Rebalance protocols, as in Kafka:

* eager (range, roundrobin, sticky): on a new generation a member commits and gives up every
  partition, then claims its new assignment (``on_partitions_revoked`` sees all of them);
* cooperative (cooperative-sticky): a member gives up only the partitions that moved; the assignor
  leaves a moving partition unassigned for one generation, and once its old owner has let it go a
  follow-up rebalance gives it to its new owner.

Static members (``group.instance.id``) keep their assignment when they restart within the session
timeout: the new instance takes over the old member's place without a rebalance, and the old
instance, if it still runs, is fenced. Like Kafka's, a static member does not leave on close.

Clocks: membership ages by wall-clock time, so members on several hosts sharing a log directory
need synchronised clocks (NTP), with skew well below the session timeout.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from urllib.parse import quote, unquote

from pysparklog._compat import StrEnum
from pysparklog.assignors import RebalanceProtocol, Subscription, assignor_for
from pysparklog.assignors.java_compat import hash_map_order
from pysparklog.endpoints import kafka_protocol_groups
from pysparklog.errors import (
    CommitFailedError,
    CorruptRecordError,
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    UnknownMemberIdError,
)
from pysparklog.storage.io import VersionedFile, read_if_exists
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition

GROUP_FILE_PREFIX = "pysparklog-group."
_STATE_SUFFIX = ".json"
_LOCK_SUFFIX = ".lock"
_STATE_VERSION = 1
#: The longest group id percent-encoded, as its file names hold it: keeps ``pysparklog-group.<id>.json``, its lock
#: and the temporary file a replace writes through within a file system's 255 bytes.
_MAX_ESCAPED_GROUP_ID = 200


class GroupState(StrEnum):
    """Kafka's consumer-group states, as ``consumer-groups --describe --state`` prints them."""

    EMPTY = "Empty"
    STABLE = "Stable"
    #: A generation started but some partitions still wait for their previous owner to let them go.
    COMPLETING_REBALANCE = "CompletingRebalance"


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """One live member, as ``consumer-groups --describe --members`` shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group's membership at one moment."""

    group_id: str
    state: str
    protocol_type: str
    assignor: str
    generation: int
    members: tuple[MemberDescription, ...]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a consumer tells the group when it joins.

    Attributes:
        client_id: Kafka's ``client.id``; the member id starts with it.
        assignors: ``partition.assignment.strategy``: assignor names by preference.
        session_timeout_ms: How long without a heartbeat before the member is removed.
        group_instance_id: Kafka's ``group.instance.id`` for static membership, or None.
        host: Where the member runs (shown by ``consumer-groups --describe``).
    """

    client_id: str
    assignors: tuple[str, ...]
    session_timeout_ms: int
    group_instance_id: str | None = None
    host: str = field(default_factory=lambda: "/" + socket.gethostname())


@dataclass(frozen=True, slots=True)
class Membership:
    """A member's view of the group after a heartbeat.

    Attributes:
        member_id: The member's id.
        generation: The group's generation.
        protocol: How partitions move between members in this group (eager or cooperative).
        assigned: The member's assignment in this generation.
        owned: The partitions the member may fetch now: the assigned ones it has claimed. An
            assigned partition still owned by another member joins ``owned`` once it is let go.
        valid_until_ms: Wall-clock time after which, without a new heartbeat, the member must
            assume the group removed it and stop fetching.
    """

    member_id: str
    generation: int
    protocol: RebalanceProtocol
    assigned: frozenset[TopicPartition]
    owned: frozenset[TopicPartition]
    valid_until_ms: int


@dataclass(slots=True)
class _Member:
    instance_id: str | None
    client_id: str
    host: str
    session_timeout_ms: int
    assignors: list[str]
    topics: list[str]
    last_heartbeat_ms: int


@dataclass(slots=True)
class _Group:
    """The coordinator's state of one group, as stored in its file."""

    generation: int = 0
    assignor: str = ""
    members: dict[str, _Member] = field(default_factory=dict)
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": _STATE_VERSION,
                "generation": self.generation,
                "assignor": self.assignor,
                "members": {mid: asdict(m) for mid, m in self.members.items()},
                "assignment": {mid: [list(tp) for tp in tps] for mid, tps in self.assignment.items()},
                "owners": [[tp.topic, tp.partition, mid] for tp, mid in sorted(self.owners.items())],
                "partition_counts": self.partition_counts,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> _Group:
        try:
            raw = json.loads(data)
            if raw["version"] != _STATE_VERSION:
                raise ValueError(f"version {raw['version']}, expected {_STATE_VERSION}")
            return cls(
                raw["generation"],
                raw["assignor"],
                {mid: _Member(**m) for mid, m in raw["members"].items()},
                {mid: [TopicPartition(t, p) for t, p in tps] for mid, tps in raw["assignment"].items()},
                {TopicPartition(t, p): mid for t, p, mid in raw["owners"]},
                dict(raw["partition_counts"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptRecordError(f"consumer group state is unreadable: {error}", file=path) from None

    def expire(self, now_ms: int) -> bool:
        """Remove members whose session timed out; whether any was."""
        dead = [mid for mid, m in self.members.items() if now_ms - m.last_heartbeat_ms > m.session_timeout_ms]
        for mid in dead:
            self.remove(mid)
        return bool(dead)

    def remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.assignment.pop(member_id, None)
        self.owners = {tp: mid for tp, mid in self.owners.items() if mid != member_id}

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        waiting = any(self.owners.get(tp) != mid for mid, tps in self.assignment.items() for tp in tps)
        return GroupState.COMPLETING_REBALANCE if waiting else GroupState.STABLE


def validate_group_id(group_id: str) -> None:
    """Kafka refuses an empty group id (``InvalidGroupIdException``); the file name bounds its length.

    The bound is on the id as its file names hold it, percent-encoded: a character outside ASCII letters, digits
    and ``_.-~`` takes three bytes per UTF-8 byte there, so 200 bytes of UTF-8 could make a name of 600.

    Raises:
        InvalidConfigError: The id is not a non-empty string of at most 200 bytes once percent-encoded (a
            command-line argument of bytes that are not UTF-8 is not one).
    """
    try:
        valid = isinstance(group_id, str) and 0 < len(quote(group_id, safe="")) <= _MAX_ESCAPED_GROUP_ID
    except UnicodeEncodeError:
        valid = False
    if not valid:
        raise InvalidConfigError(
            f"group.id {group_id!r} is invalid; accepted: a non-empty string of UTF-8 of at most "
            f"{_MAX_ESCAPED_GROUP_ID} bytes once percent-encoded (ASCII letters, digits and _.-~ count one byte, "
            "any other UTF-8 byte three)"
        )


def _select_assignor(members: Mapping[str, _Member]) -> str:
    """Kafka's ``GroupMetadata.selectProtocol``: among the assignors every member supports, the one
    most members list first among those (ties: the first in the first member's preference)."""
    common = set.intersection(*(set(m.assignors) for m in members.values()))
    votes = Counter(next(a for a in m.assignors if a in common) for m in members.values())
    first_member = members[min(members)]
    return max((a for a in first_member.assignors if a in common), key=lambda a: votes[a])


#: Milliseconds of wall-clock time.
Clock = Callable[[], int]


class GroupCoordinator:
    """The coordinator of one consumer group, run by its members under the group file's lock.

    Args:
        log_dir: The log directory the group consumes from.
        group_id: Kafka's ``group.id``.
        clock: Milliseconds of wall-clock time (tests pass their own).
    """

    def __init__(self, log_dir: LogDirectory, group_id: str, *, clock: Clock | None = None) -> None:
        validate_group_id(group_id)
        self.log_dir = log_dir
        self.group_id = group_id
        self._storage = log_dir.storage
        base = GROUP_FILE_PREFIX + quote(group_id, safe="")
        self.path = self._storage.join(base + _STATE_SUFFIX)
        self._lock = self._storage.lock(self._storage.join(base + _LOCK_SUFFIX))
        self._clock = clock or _wall_clock_ms

    def close(self) -> None:
        self._lock.close()

    # -- state --------------------------------------------------------------------------------

    def _read(self) -> _Group:
        return self._decode(read_if_exists(self._storage, self.path))

    def _decode(self, data: bytes | None) -> _Group:
        """The state the file holds; a group never joined without it."""
        return _Group() if data is None else _Group.decode(data, self.path)

    @contextmanager
    def _locked(self) -> Iterator[tuple[_Group, VersionedFile]]:
        """The group's state under the lock, with the version it was read at, which any write is conditional on."""
        self._storage.make_directory(self._storage.join())
        with self._lock.exclusive():
            stored = VersionedFile.read(self._storage, self.path)
            yield self._decode(stored.data), stored

    @contextmanager
    def _transaction(self) -> Iterator[_Group]:
        """The group's state under the lock, written back when the block ends without an error.

        Raises:
            MetadataChangedError: Another process changed the state meanwhile (this one's lock lapsed); nothing
                was written.
        """
        with self._locked() as (group, stored):
            before = group.encode()
            yield group
            after = group.encode()
            if after != before:
                stored.write(after)

    # -- members ------------------------------------------------------------------------------

    def join(self, request: JoinRequest, topics: Iterable[str]) -> Membership:
        """Add a member subscribed to ``topics`` (already resolved from a pattern); returns its membership.

        A static member whose instance id is already in the group takes that member's place and
        assignment; the old member is fenced. Anyone else starts a new generation.

        Raises:
            InconsistentGroupProtocolError: The member supports none of the assignors every member
                of the group supports, or Kafka clients use the group id through a ``pysparklog serve`` endpoint.
            InvalidConfigError: An assignor name is unknown.
        """
        assignors = [assignor_for(name).name for name in request.assignors]  # Java class names too
        if self.group_id in kafka_protocol_groups(self.log_dir):
            # Coordinated in an endpoint's memory, where this file cannot see its members: the two coordinators
            # would hand the same partitions out twice.
            raise InconsistentGroupProtocolError(
                f"group '{self.group_id}' has members that are Kafka clients of a pysparklog serve endpoint; use "
                "another group.id"
            )
        now = self._clock()
        with self._transaction() as group:
            expired = group.expire(now)
            member = _Member(
                request.group_instance_id,
                request.client_id,
                request.host,
                request.session_timeout_ms,
                assignors,
                sorted(set(topics)),
                now,
            )
            member_id = f"{request.client_id}-{uuid.uuid4()}"
            previous = next(
                (
                    mid
                    for mid, m in group.members.items()
                    if m.instance_id and m.instance_id == request.group_instance_id
                ),
                None,
            )
            others = [m for mid, m in group.members.items() if mid != previous]
            if others and not set(assignors).intersection(*(m.assignors for m in others)):
                raise InconsistentGroupProtocolError(
                    f"partition.assignment.strategy {assignors} shares no assignor with the members of "
                    f"group '{self.group_id}' (they use {group.assignor!r})"
                )
            group.members[member_id] = member
            rebalance = True
            if previous is not None:
                old = group.members.pop(previous)
                group.assignment[member_id] = group.assignment.pop(previous, [])
                group.owners = {tp: member_id if mid == previous else mid for tp, mid in group.owners.items()}
                # The partitions of members that expired just now need a new owner all the same.
                rebalance = expired or old.topics != member.topics or old.assignors != member.assignors
            if rebalance:
                self._rebalance(group)
            self._claim(group, member_id)
            return self._membership(group, member_id, now)

    def heartbeat(
        self,
        member_id: str,
        topics: Iterable[str],
        release: Iterable[TopicPartition] = (),
        *,
        group_instance_id: str | None = None,
    ) -> Membership:
        """Keep the member alive, give up ``release``, and claim what its assignment allows.

        ``topics`` is the member's subscription now (a pattern resolved again), so a subscription
        change or a new matching topic starts a new generation, as does a partition count change of
        a subscribed topic or any member joining, leaving or expiring.

        Raises:
            UnknownMemberIdError: The group removed the member (its session timed out): rejoin.
            FencedInstanceIdError: A newer instance with the same ``group.instance.id`` took over.
        """
        now = self._clock()
        with self._transaction() as group:
            rebalance = group.expire(now)
            member = self._member(group, member_id, group_instance_id)
            member.last_heartbeat_ms = now
            for tp in release:
                if group.owners.get(tp) == member_id:
                    del group.owners[tp]
            subscribed = sorted(set(topics))
            if subscribed != member.topics:
                member.topics = subscribed
                rebalance = True
            if rebalance or self._needs_rebalance(group):
                self._rebalance(group)
            self._claim(group, member_id)
            return self._membership(group, member_id, now)

    def leave(self, member_id: str) -> None:
        """Remove the member now (Kafka's LeaveGroup); the others rebalance at their next heartbeat."""
        with self._transaction() as group:
            if member_id in group.members:
                group.remove(member_id)
                self._rebalance(group)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Hold the group's lock: nobody joins, leaves or rebalances until the block ends. Offset
        tools check that a group is inactive and write its offsets inside one such block."""
        self._storage.make_directory(self._storage.join())
        with self._lock.exclusive():
            yield

    @contextmanager
    def owning(
        self, member_id: str | None, partitions: Iterable[TopicPartition], recorded_generation: int = -1
    ) -> Iterator[int]:
        """Hold the group still while the caller commits offsets of ``partitions``; yields the generation the
        commit is made in, which the offsets' append checks (``OffsetStore.commit``).

        A member may commit only partitions it owns in the current generation; a consumer outside
        the group (``member_id`` None, with manually assigned partitions) only while the group has
        no live members, as Kafka accepts such commits only for an empty group.

        ``recorded_generation`` is the latest generation of the group that ``__consumer_offsets`` records. A
        group's generation never falls below it: a copy of a broker's topic records the broker's generations, and
        a group whose state started here again would otherwise have every commit refused as from an older one.

        Raises:
            CommitFailedError: The member no longer owns one of the partitions, or was removed.
            MetadataChangedError: The group's state changed while the lock was held (it lapsed).
        """
        now = self._clock()
        with self._locked() as (group, stored):
            live = {mid for mid, m in group.members.items() if now - m.last_heartbeat_ms <= m.session_timeout_ms}
            if member_id is None:
                if live:
                    raise CommitFailedError(
                        f"cannot commit offsets for group '{self.group_id}' from outside it while it has "
                        f"{len(live)} live member(s); use a different group.id or stop the group first"
                    )
            else:
                lost = sorted(str(tp) for tp in partitions if group.owners.get(tp) != member_id)
                if member_id not in live or lost:
                    raise CommitFailedError(
                        f"commit of group '{self.group_id}' refused: member {member_id} "
                        + ("was removed from the group" if member_id not in live else f"no longer owns {lost}")
                        + "; a rebalance moved its partitions, so another member consumes them from the last commit"
                    )
            if recorded_generation > group.generation:
                group.generation = recorded_generation
                stored.write(group.encode())
            yield group.generation

    def describe(self) -> GroupDescription | None:
        """The group's members now (members whose session timed out are left out), or None when the
        group has never had members here."""
        data = read_if_exists(self._storage, self.path)
        if data is None:
            return None
        group = _Group.decode(data, self.path)
        group.expire(self._clock())
        members = tuple(
            MemberDescription(mid, m.instance_id, m.client_id, m.host, tuple(sorted(group.assignment.get(mid, []))))
            for mid, m in sorted(group.members.items())
        )
        return GroupDescription(
            self.group_id, str(group.state), "consumer", group.assignor if members else "", group.generation, members
        )

    def delete(self) -> bool:
        """Remove the group's membership state unless it has live members; whether it had none."""
        with self.frozen():
            group = self._read()
            group.expire(self._clock())
            if group.members:
                return False
            self._storage.delete(self.path)
            return True

    # -- the coordinator's logic ----------------------------------------------------------------

    def _member(self, group: _Group, member_id: str, group_instance_id: str | None) -> _Member:
        member = group.members.get(member_id)
        if member is not None:
            return member
        if group_instance_id is not None and any(m.instance_id == group_instance_id for m in group.members.values()):
            raise FencedInstanceIdError(
                f"member {member_id} of group '{self.group_id}' was fenced: a newer instance with group.instance.id "
                f"{group_instance_id!r} took its place"
            )
        raise UnknownMemberIdError(
            f"member {member_id} is not in group '{self.group_id}': its session timed out or it left; rejoin"
        )

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        store = self.log_dir.topics
        existing = set(store.names())
        return {t: store.get(t).partitions for t in sorted(set(topics)) if t in existing}

    def _needs_rebalance(self, group: _Group) -> bool:
        """Partitions were added to a subscribed topic (or it appeared or vanished), or, with a
        cooperative assignor, partitions left unassigned for their hand-off are free now."""
        topics = {t for m in group.members.values() for t in m.topics}
        if self._partition_counts(topics) != group.partition_counts:
            return True
        if not group.assignor or assignor_for(group.assignor).protocol is not RebalanceProtocol.COOPERATIVE:
            return False
        assigned = {tp for tps in group.assignment.values() for tp in tps}
        return any(
            TopicPartition(t, p) not in assigned and TopicPartition(t, p) not in group.owners
            for t, n in group.partition_counts.items()
            for p in range(n)
        )

    def _rebalance(self, group: _Group) -> None:
        """Start a generation: the group's assignor over its members' subscriptions and current
        assignments (what sticky assignors keep)."""
        group.generation += 1
        if not group.members:
            group.assignment, group.owners, group.partition_counts, group.assignor = {}, {}, {}, ""
            return
        common = set.intersection(*(set(m.assignors) for m in group.members.values()))
        if not common:
            raise InconsistentGroupProtocolError(
                f"the members of group '{self.group_id}' share no partition.assignment.strategy"
            )
        group.assignor = _select_assignor(group.members)
        group.partition_counts = self._partition_counts(t for m in group.members.values() for t in m.topics)
        # A Java leader puts the members, in the order they joined, into a HashMap and its assignor
        # walks that map: pass them in the map's order so the assignment is the one it would compute.
        subscriptions = {
            mid: Subscription(
                topics=tuple(group.members[mid].topics),
                owned_partitions=tuple(group.assignment.get(mid, ())),
                generation=group.generation - 1,
                group_instance_id=group.members[mid].instance_id,
            )
            for mid in hash_map_order(group.members)
        }
        assignment = assignor_for(group.assignor).assign(group.partition_counts, subscriptions)
        group.assignment = {mid: assignment[mid] for mid in group.members}

    def _claim(self, group: _Group, member_id: str) -> None:
        for tp in group.assignment.get(member_id, ()):
            group.owners.setdefault(tp, member_id)

    def _membership(self, group: _Group, member_id: str, now: int) -> Membership:
        member = group.members[member_id]
        return Membership(
            member_id,
            group.generation,
            assignor_for(group.assignor).protocol,
            frozenset(group.assignment.get(member_id, ())),
            frozenset(tp for tp, mid in group.owners.items() if mid == member_id),
            now + member.session_timeout_ms,
        )


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def list_group_ids(log_dir: LogDirectory) -> list[str]:
    """Groups with membership state in ``log_dir``, sorted."""
    storage = log_dir.storage
    return sorted(
        unquote(n[len(GROUP_FILE_PREFIX) : -len(_STATE_SUFFIX)])
        for n in storage.list(storage.join())
        if n.startswith(GROUP_FILE_PREFIX) and n.endswith(_STATE_SUFFIX)
    )


def describe_group(log_dir: LogDirectory, group_id: str) -> GroupDescription | None:
    """The members of ``group_id`` now, or None when it never had members (see ``GroupCoordinator.describe``)."""
    coordinator = GroupCoordinator(log_dir, group_id)
    try:
        return coordinator.describe()
    finally:
        coordinator.close()
