"""Helpers shared by the assignor tests: Kafka's test notation and the cooperative re-rebalance loop."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pysparklog.assignors import ConsumerPartitionAssignor, Subscription, revoked_partitions
from pysparklog.structs import TopicPartition

Assignment = dict[str, list[TopicPartition]]

# The reference's notation: t1 = topic1, t2 = topic2; a bare name is itself.
_TOPIC_NAMES = {"t1": "topic1", "t2": "topic2"}


def tps(*names: str) -> list[TopicPartition]:
    """``tps("t1-0", "t2-1")`` -> ``[TopicPartition("topic1", 0), TopicPartition("topic2", 1)]``."""
    partitions = []
    for name in names:
        topic, _, number = name.rpartition("-")
        partitions.append(TopicPartition(_TOPIC_NAMES.get(topic, topic), int(number)))
    return partitions


def claims(*names: str) -> tuple[TopicPartition, ...]:
    """:func:`tps` as the tuple a :class:`Subscription` holds."""
    return tuple(tps(*names))


def owned_by(subscriptions: Mapping[str, Subscription]) -> dict[str, tuple[TopicPartition, ...]]:
    return {member_id: subscription.owned_partitions for member_id, subscription in subscriptions.items()}


def with_owned(
    subscriptions: Mapping[str, Subscription], assignment: Assignment, generation: int
) -> dict[str, Subscription]:
    """The next rebalance's subscriptions: each member owns what ``assignment`` gave it, in ``generation``."""
    return {
        member_id: replace(subscription, owned_partitions=tuple(assignment[member_id]), generation=generation)
        for member_id, subscription in subscriptions.items()
    }


def assign_until_stable(
    assignor: ConsumerPartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    max_rebalances: int = 4,
) -> tuple[Assignment, dict[str, Subscription]]:
    """Assign, then re-assign while members revoke partitions, as cooperative members rejoin after revoking.

    This is ``CooperativeStickyAssignorTest.verifyValidityAndBalance``'s loop, each round one
    generation later. For eager assignors the first assignment is already stable.

    Returns:
        The final assignment and the subscriptions it was computed from.
    """
    current = dict(subscriptions)
    assignment = assignor.assign(partitions_per_topic, current)
    generation = max((subscription.generation for subscription in current.values()), default=-1)
    for _ in range(max_rebalances):
        if not revoked_partitions(owned_by(current), assignment):
            return assignment, current
        generation += 1
        current = with_owned(current, assignment, generation)
        assignment = assignor.assign(partitions_per_topic, current)
    raise AssertionError(f"no stable assignment after {max_rebalances} follow-up rebalances: {assignment}")
