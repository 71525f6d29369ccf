"""Properties of every assignor over random groups (hypothesis): validity, balance, stickiness, determinism."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysparklog.assignors import (
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    partitions_transferring,
    sorted_members,
)
from pysparklog.structs import TopicPartition
from tests.assignors.support import Assignment, assign_until_stable, owned_by, with_owned

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None)
EAGER_ASSIGNORS = [RangeAssignor, RoundRobinAssignor, StickyAssignor]
STICKY_ASSIGNORS = [StickyAssignor, CooperativeStickyAssignor]
NO_METADATA = "no-metadata"  # subscribed to, but absent from partitions_per_topic


@dataclass(frozen=True)
class Group:
    partitions_per_topic: dict[str, int]
    subscriptions: dict[str, Subscription]

    def subscribed_partitions(self) -> set[TopicPartition]:
        subscribed = {topic for subscription in self.subscriptions.values() for topic in subscription.topics}
        return {
            TopicPartition(topic, number)
            for topic, count in self.partitions_per_topic.items()
            if topic in subscribed
            for number in range(count)
        }


@st.composite
def groups(draw: st.DrawFn, equal_subscriptions: bool = False, claims: bool = True) -> Group:
    """A group of 1-7 members over 1-4 topics of 0-8 partitions; some members static; when ``claims``,
    members claim random partitions (existing or not, possibly conflicting) in random generations."""
    topics = [f"topic{index}" for index in range(draw(st.integers(1, 4)))]
    partitions_per_topic = {topic: draw(st.integers(0, 8)) for topic in topics}
    member_ids = draw(st.lists(st.text("abcz019-", min_size=1, max_size=5), min_size=1, max_size=7, unique=True))
    topic_sets = st.sets(st.sampled_from([*topics, NO_METADATA]), min_size=1)
    common = draw(topic_sets)
    instance_numbers = draw(st.permutations(range(len(member_ids))))
    claimable = [TopicPartition(topic, number) for topic in topics for number in range(9)]
    subscriptions = {}
    for member_id, instance_number in zip(member_ids, instance_numbers, strict=True):
        topics_of_member = common if equal_subscriptions else draw(topic_sets)
        owned = draw(st.lists(st.sampled_from(claimable), max_size=6, unique=True)) if claims else []
        subscriptions[member_id] = Subscription(
            tuple(sorted(topics_of_member)),
            tuple(owned),
            draw(st.sampled_from([-1, 1, 2])) if claims else -1,
            f"instance{instance_number}" if draw(st.booleans()) else None,
        )
    return Group(partitions_per_topic, subscriptions)


def assert_valid(group: Group, assignment: Assignment, *, complete: bool) -> None:
    """Every member listed; partitions exist, go to subscribers only, at most once (exactly once when ``complete``)."""
    assert list(assignment) == list(group.subscriptions)
    counted = Counter(partition for partitions in assignment.values() for partition in partitions)
    assert all(times == 1 for times in counted.values()), counted
    expected = group.subscribed_partitions()
    assert set(counted) == expected if complete else set(counted) <= expected
    for member_id, partitions in assignment.items():
        assert all(partition.topic in group.subscriptions[member_id].topics for partition in partitions)


def assert_balanced_where_subscriptions_allow(assignment: Assignment) -> None:
    """``AbstractStickyAssignorTest.verifyValidityAndBalance``: two members whose counts differ by more
    than one share no topic, else a partition could have moved to even them out."""
    members = list(assignment)
    for index, member_id in enumerate(members):
        for other in members[index + 1 :]:
            if abs(len(assignment[member_id]) - len(assignment[other])) > 1:
                topics = {partition.topic for partition in assignment[member_id]}
                assert topics.isdisjoint(partition.topic for partition in assignment[other]), (member_id, other)


def spread(assignment: Assignment) -> int:
    counts = [len(partitions) for partitions in assignment.values()]
    return max(counts) - min(counts)


@pytest.mark.parametrize("assignor_class", EAGER_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups())
def test_eager_assigns_every_subscribed_partition_exactly_once(
    assignor_class: type[ConsumerPartitionAssignor], group: Group
) -> None:
    assert_valid(group, assignor_class().assign(group.partitions_per_topic, group.subscriptions), complete=True)


@PROPERTY_SETTINGS
@given(group=groups())
def test_cooperative_never_hands_over_a_partition_in_the_rebalance_that_revokes_it(group: Group) -> None:
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(group.partitions_per_topic, group.subscriptions)
    assert_valid(group, first, complete=False)
    assert partitions_transferring(owned_by(group.subscriptions), first) == {}

    final, subscriptions = assign_until_stable(assignor, group.partitions_per_topic, group.subscriptions)
    assert_valid(group, final, complete=True)
    # Once stable, the cooperative assignor agrees with the eager one on the same input.
    assert final == StickyAssignor().assign(group.partitions_per_topic, subscriptions)


@pytest.mark.parametrize("assignor_class", [RoundRobinAssignor, *STICKY_ASSIGNORS])
@PROPERTY_SETTINGS
@given(group=groups(equal_subscriptions=True))
def test_equal_subscriptions_balance_within_one(assignor_class: type[ConsumerPartitionAssignor], group: Group) -> None:
    assignment, _ = assign_until_stable(assignor_class(), group.partitions_per_topic, group.subscriptions)
    assert spread(assignment) <= 1


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
@PROPERTY_SETTINGS
@given(group=groups())
def test_sticky_balances_wherever_subscriptions_overlap(
    assignor_class: type[ConsumerPartitionAssignor], group: Group
) -> None:
    assignment, _ = assign_until_stable(assignor_class(), group.partitions_per_topic, group.subscriptions)
    assert_balanced_where_subscriptions_allow(assignment)


@PROPERTY_SETTINGS
@given(group=groups(claims=False))
def test_range_splits_each_topic_into_contiguous_ranges_in_member_order(group: Group) -> None:
    assignment = RangeAssignor().assign(group.partitions_per_topic, group.subscriptions)
    assert_valid(group, assignment, complete=True)
    for topic, count in group.partitions_per_topic.items():
        subscribers = [
            member_id
            for member_id in sorted_members(group.subscriptions)
            if topic in group.subscriptions[member_id].topics
        ]
        numbers = [
            [partition.partition for partition in assignment[member_id] if partition.topic == topic]
            for member_id in subscribers
        ]
        # Consecutive blocks, laid out in member order: together they read 0, 1, ..., count - 1.
        if subscribers:
            assert [number for block in numbers for number in block] == list(range(count))
            sizes = [len(block) for block in numbers]
            assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1


def minimal_moves(previous_counts: list[int], members: int, partitions: int) -> int:
    """The fewest partitions surviving members must give up to reach a balanced assignment of ``members``.

    The ``partitions % members`` largest previous holders may keep the maximum quota, everyone else
    the minimum; each gives up what it holds above that.
    """
    min_quota, members_with_extra = divmod(partitions, members)
    moves = 0
    for rank, count in enumerate(sorted(previous_counts, reverse=True)):
        target = min_quota + 1 if rank < members_with_extra else min_quota
        moves += max(0, count - target)
    return moves


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
@pytest.mark.parametrize("change", ["join", "leave"])
@PROPERTY_SETTINGS
@given(group=groups(equal_subscriptions=True, claims=False), newcomer=st.text("ABC", min_size=1, max_size=3))
def test_one_member_joining_or_leaving_moves_only_what_balance_needs(
    assignor_class: type[ConsumerPartitionAssignor], change: str, group: Group, newcomer: str
) -> None:
    assignor = assignor_class()
    before, subscriptions = assign_until_stable(assignor, group.partitions_per_topic, group.subscriptions)
    generation = max(subscription.generation for subscription in subscriptions.values()) + 1
    owning = with_owned(subscriptions, before, generation)
    if change == "join":
        common = next(iter(owning.values()))
        owning[newcomer] = replace(common, owned_partitions=(), group_instance_id=None)
    else:
        if len(owning) == 1:
            return
        del owning[next(iter(owning))]
    after, _ = assign_until_stable(assignor, group.partitions_per_topic, owning)

    survivors = [member_id for member_id in owning if member_id in before]
    total = len(group.subscribed_partitions())
    min_quota = total // len(owning)
    kept = {member_id: len(set(before[member_id]) & set(after[member_id])) for member_id in survivors}
    for member_id in survivors:
        assert kept[member_id] >= min(len(before[member_id]), min_quota)
    moved = sum(len(before[member_id]) - kept[member_id] for member_id in survivors)
    assert moved == minimal_moves([len(before[member_id]) for member_id in survivors], len(owning), total)


@pytest.mark.parametrize("assignor_class", [*EAGER_ASSIGNORS, CooperativeStickyAssignor])
@PROPERTY_SETTINGS
@given(group=groups())
def test_same_input_same_assignment(assignor_class: type[ConsumerPartitionAssignor], group: Group) -> None:
    first = assignor_class().assign(group.partitions_per_topic, group.subscriptions)
    assert assignor_class().assign(dict(group.partitions_per_topic), dict(group.subscriptions)) == first


@pytest.mark.parametrize("assignor_class", [RangeAssignor, RoundRobinAssignor])
@PROPERTY_SETTINGS
@given(group=groups(claims=False), data=st.data())
def test_range_and_round_robin_ignore_the_order_of_their_input(
    assignor_class: type[ConsumerPartitionAssignor], group: Group, data: st.DataObject
) -> None:
    shuffled_members = data.draw(st.permutations(list(group.subscriptions.items())))
    shuffled_topics = data.draw(st.permutations(list(group.partitions_per_topic.items())))
    first = assignor_class().assign(group.partitions_per_topic, group.subscriptions)
    again = assignor_class().assign(dict(shuffled_topics), dict(shuffled_members))
    if assignor_class is RangeAssignor:
        # Which partitions, not their order: range lists topics in Java HashMap order, where topics
        # sharing a bucket come in the order the members' subscriptions name them first.
        assert {member_id: set(again[member_id]) for member_id in first} == {
            member_id: set(partitions) for member_id, partitions in first.items()
        }
        # The order of the partition counts never matters: Kafka's leader looks them up per topic.
        assert assignor_class().assign(dict(shuffled_topics), group.subscriptions) == first
    else:
        assert {member_id: again[member_id] for member_id in first} == first
