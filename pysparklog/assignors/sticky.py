"""Kafka's ``sticky`` and ``cooperative-sticky`` assignors (``AbstractStickyAssignor`` and its two
subclasses, without racks).

Both aim first for balance (partition counts within one of each other wherever subscriptions allow
it) and then for stickiness: a member keeps as much of what it owned as balance permits, so a
rebalance moves as few partitions, and loses as little consumer state, as it can.

**Ownership.** Each member reports what it owned and in which generation. Walking the members in
the order of the subscriptions, a claim meets the last claim kept for the partition: of the same
generation, both are dropped; otherwise the higher generation wins. A later claim of a higher
generation still wins a partition two earlier members dropped, so the walk order decides
conflicts. Claims on partitions that no longer exist, or of topics the claimant no longer
subscribes to, are dropped.

**Two paths.** When every member subscribes to the same topics, a direct quota-based assignment
is used (``ConstrainedAssignmentBuilder``): each member may keep owned partitions up to its quota
and the rest are dealt round robin. Otherwise the general algorithm (``GeneralAssignmentBuilder``)
assigns the free partitions to the least loaded eligible members, then moves partitions from more
to less loaded members while that improves balance, keeping the result only if it is better
balanced than what it started from.

**Cooperative.** Under the cooperative protocol a member keeps consuming what it owns during a
rebalance, so a partition cannot be handed to its new owner in the same rebalance: the
cooperative assignor computes the sticky assignment, then withholds every partition that changes
owner. The old owner revokes it, rejoins, and the follow-up rebalance gives it to the new owner.

Where Kafka walks its input map, the subscriptions are walked in their order; where it lets the
iteration order of a ``HashMap`` it builds break ties, that order is reproduced (see
:mod:`pysparklog.assignors.java_compat`), so a Java leader and this one agree on the assignment.

Deliberate departures from the Java code, each for input Kafka itself never produces or mishandles:

* owned partitions whose number is outside the topic's partition count are ignored (Kafka checks
  only the topic, and partition counts never shrink there);
* subscriptions count as equal only when every member's topic set is the same (Kafka compares with
  the first non-empty set it meets, so a member with an empty subscription can be taken for
  subscribing to everything and be given partitions);
* a partition is moved back to its previous owner only if that owner still subscribes to its topic;
* the highest generation is taken over the call's subscriptions only (Kafka's assignor object keeps
  the highest it has ever seen, across calls).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from pysparklog.assignors.base import NO_GENERATION, ConsumerPartitionAssignor, RebalanceProtocol, Subscription
from pysparklog.assignors.java_compat import TopicPartitionHashSet, hash_map_order, java_string_key
from pysparklog.structs import TopicPartition

Assignment = dict[str, list[TopicPartition]]


def partitions_transferring(
    owned: Mapping[str, Iterable[TopicPartition]], assignment: Mapping[str, Iterable[TopicPartition]]
) -> dict[TopicPartition, str]:
    """The partitions an assignment takes from one member and gives to another, with their new owner.

    This is ``CooperativeStickyAssignor.computePartitionsTransferringOwnership``: a partition
    transfers when some member is assigned it without owning it and some member owns it without
    being assigned it. Owners absent from ``assignment`` (members that left) are not counted, as
    they already let go of their partitions.

    Args:
        owned: Member id to the partitions it owns now.
        assignment: Member id to the partitions an eager assignor gives it.
    """
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member_id, assigned in assignment.items():
        assigned_now = list(assigned)
        owned_now = set(owned.get(member_id, ()))
        added.update((partition, member_id) for partition in assigned_now if partition not in owned_now)
        revoked.update(owned_now.difference(assigned_now))
    return {partition: member_id for partition, member_id in added.items() if partition in revoked}


def revoked_partitions(
    owned: Mapping[str, Iterable[TopicPartition]], assignment: Mapping[str, Iterable[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """Per member, what it owns but is not assigned; members that lose nothing are left out.

    Under the cooperative protocol this is what tells the group a follow-up rebalance is needed:
    a member that revokes partitions rejoins at once (``ConsumerCoordinator.onJoinComplete``), and
    the next assignment gives the revoked partitions to the members the cooperative assignor held
    them back from.
    """
    revoked: dict[str, list[TopicPartition]] = {}
    for member_id, assigned in assignment.items():
        keep = set(assigned)
        lost = [partition for partition in owned.get(member_id, ()) if partition not in keep]
        if lost:
            revoked[member_id] = lost
    return revoked


class AbstractStickyAssignor(ConsumerPartitionAssignor):
    """The sticky assignment both sticky assignors compute; see the module docstring."""

    def _sticky_assignment(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> tuple[Assignment, dict[TopicPartition, str] | None]:
        """The balanced, sticky assignment, and when the constrained path made it, the partitions it moves.

        Returns:
            The assignment, in ``subscriptions`` order, and partition to new owner for the partitions
            taken from another member; ``None`` when the general path ran, which does not track them
            (as in Kafka, where the cooperative assignor then computes them from the result).
        """
        if not subscriptions:
            return {}, None
        ownership = _resolve_ownership(partitions_per_topic, subscriptions)
        transferring: dict[TopicPartition, str] | None
        if len({frozenset(subscription.topics) for subscription in subscriptions.values()}) == 1:
            # Kafka collects the trusted claims into a new HashMap (``consumerToOwnedPartitions``),
            # filled in the walk above, and the constrained path walks that map.
            members = hash_map_order(subscriptions)
            assignment, transferring = _ConstrainedAssignment(partitions_per_topic, members, ownership).build()
        else:
            assignment = _GeneralAssignment(partitions_per_topic, subscriptions, ownership).build()
            transferring = None
        return {member_id: assignment[member_id] for member_id in subscriptions}, transferring


class StickyAssignor(AbstractStickyAssignor):
    """``sticky``, for the eager protocol: members revoke everything first, so partitions move in one rebalance."""

    name = "sticky"
    protocol = RebalanceProtocol.EAGER

    def _assign(self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]) -> Assignment:
        assignment, _ = self._sticky_assignment(partitions_per_topic, subscriptions)
        return assignment


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """``cooperative-sticky``: the sticky assignment minus the partitions changing owner.

    A withheld partition stays with nobody until its owner has revoked it and rejoined; use
    :func:`revoked_partitions` on the result to see which members must do so.
    """

    name = "cooperative-sticky"
    protocol = RebalanceProtocol.COOPERATIVE

    def _assign(self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]) -> Assignment:
        assignment, transferring = self._sticky_assignment(partitions_per_topic, subscriptions)
        if transferring is None:
            owned = {member_id: subscription.owned_partitions for member_id, subscription in subscriptions.items()}
            transferring = partitions_transferring(owned, assignment)
        for partition, new_owner in transferring.items():
            assignment[new_owner].remove(partition)
        return assignment


@dataclass
class _Ownership:
    """Who may keep what: every member's trusted claims, in the order it reported them.

    Attributes:
        owned: Member id to the existing partitions it owned and no other member may claim.
        claimed_by_several: Partitions two members claimed in the same generation; neither keeps them.
        max_generation: The highest generation any member reported.
    """

    owned: dict[str, list[TopicPartition]]
    claimed_by_several: set[TopicPartition]
    max_generation: int


def _resolve_ownership(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> _Ownership:
    """Settle conflicting claims (``AbstractStickyAssignor.allSubscriptionsEqual``), walking ``subscriptions`` in order.

    The order matters: a claim is only compared with the last claim kept for the partition. Two
    members of one generation cancel each other's claims unless a member of a higher generation
    claimed the partition before them in the walk. A claim of a higher generation met after them
    is kept, but the partition stays marked as claimed by several, which the constrained path
    honours and the general path does not (as in Kafka).
    """
    owned: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
    claimed_by_several: set[TopicPartition] = set()
    claimant: dict[TopicPartition, str] = {}
    for member_id, subscription in subscriptions.items():
        generation = subscription.generation
        for partition in subscription.owned_partitions:
            if not 0 <= partition.partition < partitions_per_topic.get(partition.topic, 0):
                continue
            other = claimant.get(partition)
            if other is None:
                owned[member_id].append(partition)
            else:
                other_generation = subscriptions[other].generation
                if generation < other_generation:
                    continue
                if partition in owned[other]:
                    owned[other].remove(partition)
                if generation == other_generation:
                    claimed_by_several.add(partition)
                else:
                    owned[member_id].append(partition)
            claimant[partition] = member_id
    max_generation = max((subscription.generation for subscription in subscriptions.values()), default=NO_GENERATION)
    return _Ownership(owned, claimed_by_several, max_generation)


class _ConstrainedAssignment:
    """The path for identical subscriptions (``ConstrainedAssignmentBuilder``).

    With ``P`` partitions and ``C`` members, every member gets ``P // C`` partitions (the minimum
    quota) and ``P % C`` of them one more (the maximum quota). Members keep owned partitions up to
    their quota, lowest partition numbers first, visiting members in Java ``HashMap`` order, which
    decides who of several members owning the maximum quota may keep it. Free partitions are then
    dealt round robin, first to members below the minimum quota, then to members at it.
    """

    def __init__(self, partitions_per_topic: dict[str, int], members: list[str], ownership: _Ownership):
        self._partitions_per_topic = partitions_per_topic
        self._members = members
        self._ownership = ownership
        self._min_quota, self._expected_members_over_min = divmod(sum(partitions_per_topic.values()), len(members))
        self._max_quota = self._min_quota + (1 if self._expected_members_over_min else 0)
        self._assignment: Assignment = {member_id: [] for member_id in members}
        self._previous_owner_of_revoked: dict[TopicPartition, str] = {}
        self._transferring: dict[TopicPartition, str] = {}
        self._under_min_quota: list[str] = []
        self._at_min_quota: deque[str] = deque()

    def build(self) -> tuple[Assignment, dict[TopicPartition, str]]:
        kept = self._keep_owned_partitions()
        free = [
            TopicPartition(topic, number)
            for topic in sorted(self._partitions_per_topic, key=java_string_key)
            for number in range(self._partitions_per_topic[topic])
            if TopicPartition(topic, number) not in kept
        ]
        self._under_min_quota.sort(key=java_string_key)
        self._at_min_quota = deque(sorted(self._at_min_quota, key=java_string_key))
        self._deal(free)
        return self._assignment, self._transferring

    def _keep_owned_partitions(self) -> set[TopicPartition]:
        members_over_min = 0
        kept: set[TopicPartition] = set()
        for member_id in self._members:
            owned = sorted(
                (
                    partition
                    for partition in self._ownership.owned[member_id]
                    if partition not in self._ownership.claimed_by_several
                ),
                key=lambda partition: (partition.partition, java_string_key(partition.topic)),
            )
            if len(owned) < self._min_quota:
                keep = len(owned)
                self._under_min_quota.append(member_id)
            elif len(owned) >= self._max_quota and members_over_min < self._expected_members_over_min:
                keep = self._max_quota
                members_over_min += 1
                if members_over_min == self._expected_members_over_min:
                    # No one else may go above the minimum quota now.
                    self._at_min_quota.clear()
            else:
                keep = self._min_quota
                if members_over_min < self._expected_members_over_min:
                    self._at_min_quota.append(member_id)
            self._assignment[member_id].extend(owned[:keep])
            kept.update(owned[:keep])
            for partition in owned[keep:]:
                self._previous_owner_of_revoked[partition] = member_id
        return kept

    def _deal(self, free: list[TopicPartition]) -> None:
        """Deal ``free`` round robin over the members under the minimum quota, then one each to members at it."""
        position = 0  # in _under_min_quota, which shrinks as members reach the minimum quota
        for partition in free:
            if self._under_min_quota:
                if position == len(self._under_min_quota):
                    position = 0
                member_id = self._under_min_quota[position]
                if self._give(partition, member_id) == self._min_quota:
                    del self._under_min_quota[position]
                    self._at_min_quota.append(member_id)
                else:
                    position += 1
            else:
                self._give(partition, self._at_min_quota.popleft())

    def _give(self, partition: TopicPartition, member_id: str) -> int:
        self._assignment[member_id].append(partition)
        previous_owner = self._previous_owner_of_revoked.get(partition)
        if (previous_owner is not None and previous_owner != member_id) or (
            partition in self._ownership.claimed_by_several
        ):
            self._transferring[partition] = member_id
        return len(self._assignment[member_id])


class _MembersByLoad:
    """Members ordered by (assigned partition count, member id): the general path's ``sortedCurrentSubscriptions``.

    A member's position is fixed when it is added, so callers remove a member before changing its
    assignment and add it back afterwards, as Kafka does with its ``TreeSet``.
    """

    def __init__(self, assignment: Assignment):
        self._assignment = assignment
        self._ordered: list[tuple[int, bytes, str]] = []
        self._key_of: dict[str, tuple[int, bytes, str]] = {}

    def add(self, member_id: str) -> None:
        key = (len(self._assignment[member_id]), java_string_key(member_id), member_id)
        insort(self._ordered, key)
        self._key_of[member_id] = key

    def remove(self, member_id: str) -> None:
        del self._ordered[bisect_left(self._ordered, self._key_of.pop(member_id))]

    def __iter__(self) -> Iterator[str]:
        return (member_id for _, _, member_id in self._ordered)

    def least_loaded(self) -> str:
        return self._ordered[0][2]

    def most_loaded(self) -> str:
        return self._ordered[-1][2]


class _PartitionMovements:
    """Where partitions moved during one general-path balancing (``AbstractStickyAssignor.PartitionMovements``).

    When a partition would travel back along a route another partition of the same topic took the
    other way, that other partition is moved instead: a member then never both gives and receives
    partitions of one topic, which would undo stickiness for no gain in balance.
    """

    def __init__(self) -> None:
        self._route_of: dict[TopicPartition, tuple[str, str]] = {}
        self._moved_by_topic: dict[str, dict[tuple[str, str], TopicPartitionHashSet]] = {}

    def record(self, partition: TopicPartition, old_owner: str, new_owner: str) -> None:
        if partition in self._route_of:
            origin = self._forget(partition)[0]
            if origin != new_owner:  # a partition back at its starting point has not moved at all
                self._remember(partition, (origin, new_owner))
        else:
            self._remember(partition, (old_owner, new_owner))

    def partition_to_move(self, partition: TopicPartition, owner: str, new_owner: str) -> TopicPartition:
        moved = self._moved_by_topic.get(partition.topic)
        if moved is None:
            return partition
        if partition in self._route_of:
            owner = self._route_of[partition][0]
        reverse = moved.get((new_owner, owner))
        return partition if reverse is None else reverse.first()

    def _remember(self, partition: TopicPartition, route: tuple[str, str]) -> None:
        self._route_of[partition] = route
        by_route = self._moved_by_topic.setdefault(partition.topic, {})
        if route not in by_route:
            by_route[route] = TopicPartitionHashSet()
        by_route[route].add(partition)

    def _forget(self, partition: TopicPartition) -> tuple[str, str]:
        route = self._route_of.pop(partition)
        by_route = self._moved_by_topic[partition.topic]
        by_route[route].discard(partition)
        if not by_route[route]:
            del by_route[route]
        if not by_route:
            del self._moved_by_topic[partition.topic]
        return route


def _balance_score(assignment: Assignment) -> int:
    """Sum of ``|count(a) - count(b)|`` over all member pairs; 0 is perfectly balanced (``getBalanceScore``)."""
    counts = sorted(len(partitions) for partitions in assignment.values())
    # In ascending order, the i-th count exceeds the i counts before it and falls short of the rest.
    return sum(count * (2 * index - len(counts) + 1) for index, count in enumerate(counts))


class _GeneralAssignment:
    """The path for unequal subscriptions (``GeneralAssignmentBuilder``); see the module docstring."""

    def __init__(
        self,
        partitions_per_topic: dict[str, int],
        subscriptions: dict[str, Subscription],
        ownership: _Ownership,
    ):
        self._partitions_per_topic = partitions_per_topic
        self._subscriptions = subscriptions
        self._ownership = ownership
        self._consumers_of: dict[str, list[str]] = {topic: [] for topic in partitions_per_topic}
        self._topics_of: dict[str, list[str]] = {}
        for member_id in subscriptions:
            topics = [topic for topic in subscriptions[member_id].topics if topic in partitions_per_topic]
            self._topics_of[member_id] = topics
            for topic in topics:
                self._consumers_of[topic].append(member_id)
        self._topic_set_of = {member_id: frozenset(topics) for member_id, topics in self._topics_of.items()}
        self._max_assignment_size = {
            member_id: sum(partitions_per_topic[topic] for topic in topics)
            for member_id, topics in self._topics_of.items()
        }
        self._assignment: Assignment = {member_id: list(ownership.owned[member_id]) for member_id in subscriptions}
        self._owner_of = {
            partition: member_id for member_id, partitions in self._assignment.items() for partition in partitions
        }
        # Topics with the fewest potential consumers first: they have the least freedom.
        sorted_topics = sorted(
            partitions_per_topic, key=lambda topic: (len(self._consumers_of[topic]), java_string_key(topic))
        )
        self._sorted_partitions = [
            TopicPartition(topic, number) for topic in sorted_topics for number in range(partitions_per_topic[topic])
        ]
        self._by_load = _MembersByLoad(self._assignment)
        self._movements = _PartitionMovements()
        self._revocation_required = False

    def build(self) -> Assignment:
        previous_owner_of = self._previous_owners()
        kept = self._keep_subscribed_partitions()
        free = [partition for partition in self._sorted_partitions if partition not in kept]
        for member_id in self._assignment:
            self._by_load.add(member_id)
        self._balance(previous_owner_of, free)
        return self._assignment

    def _previous_owners(self) -> dict[TopicPartition, str]:
        """Partition to the member that owned it in the latest generation before the current one
        (``prepopulateCurrentAssignments``); of two members of that generation, the first in
        ``subscriptions`` order wins."""
        latest: dict[TopicPartition, tuple[str, int]] = {}
        for member_id, subscription in self._subscriptions.items():
            if subscription.generation >= self._ownership.max_generation:
                continue
            for partition in subscription.owned_partitions:
                known = latest.get(partition)
                if known is None or subscription.generation > known[1]:
                    latest[partition] = (member_id, subscription.generation)
        return {partition: member_id for partition, (member_id, _) in latest.items()}

    def _keep_subscribed_partitions(self) -> set[TopicPartition]:
        """Drop owned partitions of topics their owner no longer subscribes to; return the partitions kept."""
        kept: set[TopicPartition] = set()
        for member_id, partitions in self._assignment.items():
            subscribed = self._topic_set_of[member_id]
            still_subscribed = [partition for partition in partitions if partition.topic in subscribed]
            if len(still_subscribed) < len(partitions):
                self._revocation_required = True
                for partition in set(partitions).difference(still_subscribed):
                    del self._owner_of[partition]
            partitions[:] = still_subscribed
            kept.update(still_subscribed)
        return kept

    def _balance(self, previous_owner_of: dict[TopicPartition, str], free: list[TopicPartition]) -> None:
        initializing = not self._assignment[self._by_load.most_loaded()]
        for partition in free:
            self._give(partition, self._least_loaded_consumer_of(partition.topic))

        # Only partitions of topics with two or more consumers, and only members that can gain or
        # lose one of those, take part in the reassignment.
        movable_topics = {topic for topic, consumers in self._consumers_of.items() if len(consumers) >= 2}
        movable_partitions = [partition for partition in self._sorted_partitions if partition.topic in movable_topics]
        free_movable = [partition for partition in free if partition.topic in movable_topics]
        fixed: Assignment = {}
        for member_id in self._topics_of:
            partitions = self._assignment[member_id]
            if len(partitions) >= self._max_assignment_size[member_id] and not any(
                partition.topic in movable_topics for partition in partitions
            ):
                self._by_load.remove(member_id)
                fixed[member_id] = self._assignment.pop(member_id)

        before = {member_id: list(partitions) for member_id, partitions in self._assignment.items()}
        owners_before = dict(self._owner_of)
        if not self._revocation_required:
            # Nothing has to move for a subscription change, so first try moving only the new partitions.
            self._reassign_for_balance(free_movable, previous_owner_of)
        reassigned = self._reassign_for_balance(movable_partitions, previous_owner_of)
        if not initializing and reassigned and _balance_score(self._assignment) >= _balance_score(before):
            # Moving partitions bought no balance: keep them where they were.
            self._assignment.clear()
            self._assignment.update(before)
            self._owner_of = owners_before
        self._assignment.update(fixed)

    def _reassign_for_balance(
        self, partitions: list[TopicPartition], previous_owner_of: dict[TopicPartition, str]
    ) -> bool:
        """Move partitions to less loaded members until balanced or nothing moves (``performReassignments``).

        Returns:
            Whether any partition moved.
        """
        reassigned = False
        modified = True
        while modified:
            modified = False
            for partition in partitions:
                if self._is_balanced():
                    break
                owner_load = len(self._assignment[self._owner_of[partition]])
                previous_owner = previous_owner_of.get(partition)
                if (
                    previous_owner is not None
                    and partition.topic in self._topic_set_of[previous_owner]
                    and owner_load > len(self._assignment[previous_owner]) + 1
                ):
                    self._reassign(partition, previous_owner)
                elif any(
                    owner_load > len(self._assignment[other]) + 1 for other in self._consumers_of[partition.topic]
                ):
                    self._reassign(partition, self._least_loaded_consumer_of(partition.topic))
                else:
                    continue
                reassigned = modified = True
        return reassigned

    def _is_balanced(self) -> bool:
        """Whether no partition could move to a member holding two or more fewer (``isBalanced``)."""
        least = len(self._assignment[self._by_load.least_loaded()])
        most = len(self._assignment[self._by_load.most_loaded()])
        if least >= most - 1:
            return True
        for member_id in self._by_load:
            load = len(self._assignment[member_id])
            if load == self._max_assignment_size[member_id]:
                continue
            for topic in self._topics_of[member_id]:
                for number in range(self._partitions_per_topic[topic]):
                    owner = self._owner_of[TopicPartition(topic, number)]
                    if owner != member_id and load + 1 < len(self._assignment[owner]):
                        return False
        return True

    def _least_loaded_consumer_of(self, topic: str) -> str:
        return next(member_id for member_id in self._by_load if topic in self._topic_set_of[member_id])

    def _give(self, partition: TopicPartition, member_id: str) -> None:
        self._by_load.remove(member_id)
        self._assignment[member_id].append(partition)
        self._owner_of[partition] = member_id
        self._by_load.add(member_id)

    def _reassign(self, partition: TopicPartition, new_owner: str) -> None:
        moving = self._movements.partition_to_move(partition, self._owner_of[partition], new_owner)
        old_owner = self._owner_of[moving]
        self._by_load.remove(old_owner)
        self._by_load.remove(new_owner)
        self._movements.record(moving, old_owner, new_owner)
        self._assignment[old_owner].remove(moving)
        self._assignment[new_owner].append(moving)
        self._owner_of[moving] = new_owner
        self._by_load.add(new_owner)
        self._by_load.add(old_owner)
