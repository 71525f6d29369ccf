"""``StickyAssignor`` and ``CooperativeStickyAssignor``: the reference's conformance cases S1-S7 and C1-C2
(``AbstractStickyAssignorTest``, ``CooperativeStickyAssignorTest``), compared as lists, and further
cases from Kafka's tests on generations, conflicting claims and unequal subscriptions."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pysparklog.assignors import (
    AbstractStickyAssignor,
    CooperativeStickyAssignor,
    RebalanceProtocol,
    StickyAssignor,
    Subscription,
    partitions_transferring,
    revoked_partitions,
)
from pysparklog.structs import TopicPartition
from tests.assignors.support import Assignment, assign_until_stable, claims, owned_by, tps

BOTH = ("topic1", "topic2")
STICKY_ASSIGNORS = [StickyAssignor, CooperativeStickyAssignor]


def settled(
    assignor: AbstractStickyAssignor, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    """The assignment the reference lists: one pass for eager, after the re-rebalance loop for cooperative."""
    if assignor.protocol is RebalanceProtocol.COOPERATIVE:
        return assign_until_stable(assignor, partitions_per_topic, subscriptions)[0]
    return assignor.assign(partitions_per_topic, subscriptions)


def check_transfers(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    expected: dict[TopicPartition, str],
) -> None:
    """The eager pass moves exactly ``expected``; the cooperative pass is that minus the moving partitions."""
    eager = StickyAssignor().assign(partitions_per_topic, subscriptions)
    assert partitions_transferring(owned_by(subscriptions), eager) == expected
    cooperative = CooperativeStickyAssignor().assign(partitions_per_topic, subscriptions)
    assert cooperative == {
        member_id: [partition for partition in partitions if partition not in expected]
        for member_id, partitions in eager.items()
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s1_two_consumers_two_topics_six_partitions(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {"consumer1": Subscription(BOTH), "consumer2": Subscription(BOTH)}
    assert settled(assignor_class(), {"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer1": tps("t1-0", "t1-2", "t2-1"),
        "consumer2": tps("t1-1", "t2-0", "t2-2"),
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s2_multiple_consumers_mixed_topic_subscriptions(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {
        "consumer1": Subscription(("topic1",)),
        "consumer2": Subscription(BOTH),
        "consumer3": Subscription(("topic1",)),
    }
    assert settled(assignor_class(), {"topic1": 3, "topic2": 2}, subscriptions) == {
        "consumer1": tps("t1-0", "t1-2"),
        "consumer2": tps("t2-0", "t2-1"),
        "consumer3": tps("t1-1"),
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s3_consumer_owning_min_quota_expected_max_quota(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {
        "consumer1": Subscription(BOTH, claims("t1-0", "t2-1"), 1),
        "consumer2": Subscription(BOTH, claims("t1-1", "t2-2"), 1),
    }
    partitions_per_topic = {"topic1": 2, "topic2": 3}
    assert settled(assignor_class(), partitions_per_topic, subscriptions) == {
        "consumer1": tps("t1-0", "t2-1", "t2-0"),
        "consumer2": tps("t1-1", "t2-2"),
    }
    check_transfers(partitions_per_topic, subscriptions, {})


S4_SUBSCRIPTIONS = {
    "consumer1": Subscription(BOTH, claims("t1-0", "t2-0"), 1),
    "consumer2": Subscription(BOTH, claims("t1-1", "t2-1"), 1),
    "consumer3": Subscription(BOTH, (), 1),
}


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s4_max_quota_consumers_more_than_expected(assignor_class: type[AbstractStickyAssignor]) -> None:
    # consumer1 and consumer2 both own the maximum quota but only one may keep it: Java's HashMap
    # visits consumer3, consumer2, consumer1, so consumer2 does.
    partitions_per_topic = {"topic1": 2, "topic2": 2}
    assert settled(assignor_class(), partitions_per_topic, S4_SUBSCRIPTIONS) == {
        "consumer1": tps("t1-0"),
        "consumer2": tps("t1-1", "t2-1"),
        "consumer3": tps("t2-0"),
    }
    check_transfers(partitions_per_topic, S4_SUBSCRIPTIONS, {TopicPartition("topic2", 0): "consumer3"})


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s4_tie_follows_hash_order_not_insertion_order(assignor_class: type[AbstractStickyAssignor]) -> None:
    reversed_insertion = dict(reversed(S4_SUBSCRIPTIONS.items()))
    assignment = settled(assignor_class(), {"topic1": 2, "topic2": 2}, reversed_insertion)
    assert assignment["consumer2"] == tps("t1-1", "t2-1")
    assert list(assignment) == list(reversed_insertion)


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s5_all_consumers_under_min_quota(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {
        "consumer1": Subscription(BOTH, claims("t1-0"), 1),
        "consumer2": Subscription(BOTH, claims("t1-1"), 1),
        "consumer3": Subscription(BOTH, (), 1),
    }
    partitions_per_topic = {"topic1": 2, "topic2": 3}
    assert settled(assignor_class(), partitions_per_topic, subscriptions) == {
        "consumer1": tps("t1-0", "t2-1"),
        "consumer2": tps("t1-1", "t2-2"),
        "consumer3": tps("t2-0"),
    }
    check_transfers(partitions_per_topic, subscriptions, {})


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s6_add_remove_two_consumers_two_topics(assignor_class: type[AbstractStickyAssignor]) -> None:
    assignor = assignor_class()
    partitions_per_topic = {"topic1": 3, "topic2": 4}

    first = settled(assignor, partitions_per_topic, {"consumer1": Subscription(BOTH), "consumer2": Subscription(BOTH)})
    assert first == {"consumer1": tps("t1-0", "t1-2", "t2-1", "t2-3"), "consumer2": tps("t1-1", "t2-0", "t2-2")}

    grown = {
        "consumer1": Subscription(BOTH, tuple(first["consumer1"]), 1),
        "consumer2": Subscription(BOTH, tuple(first["consumer2"]), 1),
        "consumer3": Subscription(BOTH, (), 1),
        "consumer4": Subscription(BOTH, (), 1),
    }
    check_transfers(
        partitions_per_topic,
        grown,
        {
            TopicPartition("topic1", 2): "consumer3",
            TopicPartition("topic2", 3): "consumer3",
            TopicPartition("topic2", 2): "consumer4",
        },
    )
    second = settled(assignor, partitions_per_topic, grown)
    assert second == {
        "consumer1": tps("t1-0", "t2-1"),
        "consumer2": tps("t2-0", "t1-1"),
        "consumer3": tps("t1-2", "t2-3"),
        "consumer4": tps("t2-2"),
    }

    shrunk = {
        "consumer3": Subscription(BOTH, tuple(second["consumer3"]), 1),
        "consumer4": Subscription(BOTH, tuple(second["consumer4"]), 1),
    }
    assert assignor.assign(partitions_per_topic, shrunk) == {
        "consumer3": tps("t1-2", "t2-3", "t1-0", "t2-1"),
        "consumer4": tps("t2-2", "t1-1", "t2-0"),
    }
    check_transfers(partitions_per_topic, shrunk, {})


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_s7_add_remove_consumer_one_topic(assignor_class: type[AbstractStickyAssignor]) -> None:
    assignor = assignor_class()
    topic = ("topic",)
    partitions_per_topic = {"topic": 3}

    alone = settled(assignor, partitions_per_topic, {"consumer1": Subscription(topic)})
    assert alone == {"consumer1": tps("topic-0", "topic-1", "topic-2")}

    joined = {
        "consumer1": Subscription(topic, tuple(alone["consumer1"]), 1),
        "consumer2": Subscription(topic, (), 1),
    }
    check_transfers(partitions_per_topic, joined, {TopicPartition("topic", 2): "consumer2"})
    together = settled(assignor, partitions_per_topic, joined)
    assert together == {"consumer1": tps("topic-0", "topic-1"), "consumer2": tps("topic-2")}

    # Kafka's test goes on: consumer1 leaves and consumer2 takes everything (compared as a set).
    left = assignor.assign(partitions_per_topic, {"consumer2": Subscription(topic, tuple(together["consumer2"]), 1)})
    assert set(left["consumer2"]) == set(tps("topic-0", "topic-1", "topic-2"))


def test_c1_partition_claimed_twice_in_a_generation_is_withheld() -> None:
    subscriptions = {
        "consumer1": Subscription(("topic",), claims("topic-0", "topic-1"), 1),
        "consumer2": Subscription(("topic",), claims("topic-0", "topic-2"), 1),
        "consumer3": Subscription(("topic",), (), 1),
    }
    assert CooperativeStickyAssignor().assign({"topic": 3}, subscriptions) == {
        "consumer1": tps("topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": [],
    }
    # The eager assignor hands it over at once (StickyAssignorTest's counterpart).
    assert StickyAssignor().assign({"topic": 3}, subscriptions)["consumer3"] == tps("topic-0")


def test_c2_partition_claimed_twice_with_unequal_partitions_per_consumer() -> None:
    subscriptions = {
        "consumer1": Subscription(("topic",), claims("topic-0", "topic-1"), 1),
        "consumer2": Subscription(("topic",), claims("topic-0", "topic-2"), 1),
        "consumer3": Subscription(("topic",), (), 1),
    }
    assert CooperativeStickyAssignor().assign({"topic": 4}, subscriptions) == {
        "consumer1": tps("topic-1", "topic-3"),
        "consumer2": tps("topic-2"),
        "consumer3": [],
    }
    assert StickyAssignor().assign({"topic": 4}, subscriptions)["consumer3"] == tps("topic-0")


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_members_reaching_expected_quota_are_considered_filled(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {
        "consumer1": Subscription(("topic",), claims("topic-0", "topic-1"), 1),
        "consumer2": Subscription(("topic",), claims("topic-2"), 1),
        "consumer3": Subscription(("topic",), (), 1),
    }
    assert assignor_class().assign({"topic": 4}, subscriptions) == {
        "consumer1": tps("topic-0", "topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": tps("topic-3"),
    }


def as_sets(assignment: Assignment) -> dict[str, set[TopicPartition]]:
    return {member_id: set(partitions) for member_id, partitions in assignment.items()}


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
@pytest.mark.parametrize("stale_generation", [9, -1], ids=["older-generation", "no-generation"])
def test_claim_of_an_older_generation_loses(
    assignor_class: type[AbstractStickyAssignor], stale_generation: int
) -> None:
    claimed = claims("topic-0", "topic-2", "topic2-1")
    subscriptions = {
        "consumer1": Subscription(("topic", "topic2"), claimed, 10),
        "consumer2": Subscription(("topic", "topic2"), claimed, stale_generation),
    }
    assignment = assignor_class().assign({"topic": 3, "topic2": 3}, subscriptions)
    assert as_sets(assignment) == {
        "consumer1": set(claimed),
        "consumer2": set(tps("topic-1", "topic2-0", "topic2-2")),
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_claims_across_three_generations_go_to_the_highest(assignor_class: type[AbstractStickyAssignor]) -> None:
    topics = ("topic", "topic2", "topic3")
    subscriptions = {
        "consumer1": Subscription(topics, claims("topic-0", "topic2-0", "topic3-0"), 10),
        "consumer2": Subscription(topics, claims("topic-1", "topic2-1", "topic3-1"), 9),
        "consumer3": Subscription(topics, claims("topic2-1", "topic3-0", "topic3-2"), 8),
    }
    assignment = assignor_class().assign({"topic": 3, "topic2": 3, "topic3": 3}, subscriptions)
    assert as_sets(assignment) == {
        "consumer1": set(tps("topic-0", "topic2-0", "topic3-0")),
        "consumer2": set(tps("topic-1", "topic2-1", "topic3-1")),
        "consumer3": set(tps("topic-2", "topic2-2", "topic3-2")),
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_member_with_multiple_generations_of_claims(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {
        "consumer1": Subscription(("topic", "topic2"), claims("topic-0", "topic2-1", "topic-1"), 10),
        "consumer2": Subscription(("topic", "topic2"), claims("topic-0", "topic2-1", "topic2-2"), 8),
    }
    assignment = assignor_class().assign({"topic": 3, "topic2": 3}, subscriptions)
    assert as_sets(assignment) == {
        "consumer1": set(tps("topic-0", "topic2-1", "topic-1")),
        "consumer2": set(tps("topic-2", "topic2-2", "topic2-0")),
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_no_reassignment_of_current_members(assignor_class: type[AbstractStickyAssignor]) -> None:
    topics = ("topic", "topic2", "topic3", "topic1")
    subscriptions = {
        "consumer1": Subscription(topics, (), -1),
        "consumer2": Subscription(topics, claims("topic-0", "topic2-0", "topic1-0"), 9),
        "consumer3": Subscription(topics, claims("topic3-2", "topic2-2", "topic1-1"), 8),
        "consumer4": Subscription(topics, claims("topic3-1", "topic-1", "topic-2"), 7),
    }
    assignment = assignor_class().assign(dict.fromkeys(topics, 3), subscriptions)
    assert set(assignment["consumer1"]) == set(tps("topic1-2", "topic2-1", "topic3-0"))


@pytest.mark.parametrize("generations", [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)])
@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_unequal_subscriptions_with_one_partition_claimed_in_three_generations(
    assignor_class: type[AbstractStickyAssignor], generations: tuple[int, int, int]
) -> None:
    subscriptions = {
        "consumer1": Subscription(("topic",), claims("topic-0", "topic-2"), generations[0]),
        "consumer2": Subscription(("topic",), claims("topic-1", "topic-2", "topic-3"), generations[1]),
        "consumer3": Subscription(("topic",), claims("topic-2", "topic-4", "topic-5"), generations[2]),
        "consumer4": Subscription(("topic1",), claims("topic1-0"), 2),
    }
    assignment = assignor_class().assign({"topic": 6, "topic1": 1}, subscriptions)
    everything = [partition for partitions in assignment.values() for partition in partitions]
    assert len(everything) == len(set(everything))
    if assignor_class is StickyAssignor:
        assert all(1 <= len(partitions) <= 2 for partitions in assignment.values())


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_poor_round_robin_scenario_is_balanced(assignor_class: type[AbstractStickyAssignor]) -> None:
    # The result AbstractStickyAssignorTest's comment gives for this case.
    every_topic = ("topic1", "topic2", "topic3", "topic4", "topic5")
    odd_topics = ("topic1", "topic3", "topic5")
    subscriptions = {
        "consumer1": Subscription(every_topic),
        "consumer2": Subscription(odd_topics),
        "consumer3": Subscription(odd_topics),
        "consumer4": Subscription(every_topic),
    }
    partitions_per_topic = {f"topic{index}": index % 2 + 1 for index in range(1, 6)}
    assert assignor_class().assign(partitions_per_topic, subscriptions) == {
        "consumer1": tps("topic2-0", "topic3-0"),
        "consumer2": tps("topic1-0", "topic3-1"),
        "consumer3": tps("topic1-1", "topic5-0"),
        "consumer4": tps("topic4-0", "topic5-1"),
    }


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_add_and_remove_a_topic_keeps_partitions_in_place(assignor_class: type[AbstractStickyAssignor]) -> None:
    assignor = assignor_class()
    one_topic = {"consumer1": Subscription(("topic",)), "consumer2": Subscription(("topic",))}
    first = assignor.assign({"topic": 3}, one_topic)
    assert sorted(len(partitions) for partitions in first.values()) == [1, 2]

    both = {
        member_id: Subscription(("topic", "topic2"), tuple(partitions), 1) for member_id, partitions in first.items()
    }
    second = assignor.assign({"topic": 3, "topic2": 3}, both)
    assert all(
        len(partitions) == 3 and set(first[member_id]) <= set(partitions) for member_id, partitions in second.items()
    )

    # "topic" is deleted and unsubscribed: the general path drops it and keeps topic2 where it was.
    only_topic2 = {
        member_id: Subscription(("topic2",), tuple(partitions), 1) for member_id, partitions in second.items()
    }
    third = assignor.assign({"topic2": 3}, only_topic2)
    assert sorted(len(partitions) for partitions in third.values()) == [1, 2]
    assert all(set(partitions) <= set(second[member_id]) for member_id, partitions in third.items())


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_topics_without_metadata_are_ignored(assignor_class: type[AbstractStickyAssignor]) -> None:
    subscriptions = {"consumer": Subscription(("topic1", "topic2", "topic3"))}
    assignment = assignor_class().assign({"topic1": 1, "topic3": 100}, subscriptions)
    assert len(assignment["consumer"]) == 101

    owning = {"consumer": Subscription(("topic",), claims("topic-0", "topic-1"), 1)}
    assert assignor_class().assign({}, owning) == {"consumer": []}


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_member_without_a_subscribed_topic_with_metadata_gets_nothing(
    assignor_class: type[AbstractStickyAssignor],
) -> None:
    subscriptions = {
        "consumer1": Subscription(("topic1",)),
        "consumer2": Subscription(("not-created-yet",)),
        "consumer3": Subscription(()),
        "consumer4": Subscription(("topic1",)),
    }
    assignment = assignor_class().assign({"topic1": 4}, subscriptions)
    assert assignment["consumer2"] == [] and assignment["consumer3"] == []
    assert sorted(len(partitions) for partitions in assignment.values()) == [0, 0, 2, 2]


def test_empty_subscription_is_not_mistaken_for_the_common_one() -> None:
    # Kafka compares every subscription with the first non-empty one it meets, so a member with no
    # topics met first would put the group on the equal-subscriptions path and give it partitions.
    subscriptions = {name: Subscription(("topic1",)) for name in ("consumer1", "consumer2")}
    subscriptions["consumer3"] = Subscription(())
    assignment = StickyAssignor().assign({"topic1": 3}, subscriptions)
    assert assignment["consumer3"] == []


def test_partition_is_not_moved_back_to_a_previous_owner_that_unsubscribed() -> None:
    # t1-0 was last owned by c1 in generation 1; c1 now subscribes only to topic2. Kafka would move
    # it back to c1 to relieve c2; the partition goes to c3, which subscribes to topic1.
    subscriptions = {
        "c1": Subscription(("topic2",), claims("t1-0"), 1),
        "c2": Subscription(BOTH, claims("t1-0", "t1-1", "t1-2", "t1-3"), 2),
        "c3": Subscription(("topic1",), (), 2),
    }
    assignment = StickyAssignor().assign({"topic1": 4, "topic2": 1}, subscriptions)
    assert assignment == {"c1": tps("t2-0"), "c2": tps("t1-2", "t1-3"), "c3": tps("t1-0", "t1-1")}


def test_cooperative_general_path_withholds_moving_partitions() -> None:
    # Unequal subscriptions: c2 must hand two of topic1's partitions to the newcomer c3.
    subscriptions = {
        "c1": Subscription(("topic1", "topic2"), claims("t2-0", "t2-1"), 1),
        "c2": Subscription(("topic1",), claims("t1-0", "t1-1", "t1-2", "t1-3"), 1),
        "c3": Subscription(("topic1",), (), 1),
    }
    partitions_per_topic = {"topic1": 4, "topic2": 2}
    eager = StickyAssignor().assign(partitions_per_topic, subscriptions)
    moving = partitions_transferring(owned_by(subscriptions), eager)
    assert set(moving.values()) == {"c3"} and len(moving) == 2

    cooperative = CooperativeStickyAssignor().assign(partitions_per_topic, subscriptions)
    assert cooperative["c3"] == []
    assert revoked_partitions(owned_by(subscriptions), cooperative) == {"c2": sorted(moving)}
    final, _ = assign_until_stable(CooperativeStickyAssignor(), partitions_per_topic, subscriptions)
    assert final == eager


def test_partitions_transferring_and_revoked_partitions() -> None:
    owned = {"a": tps("t-0", "t-1"), "b": tps("t-2"), "gone": tps("t-3")}
    assignment = {"a": tps("t-0"), "b": tps("t-2", "t-1", "t-3"), "c": []}
    # t-3's owner left the group, so it is not taken from anyone.
    assert partitions_transferring(owned, assignment) == {TopicPartition("t", 1): "b"}
    assert revoked_partitions(owned, assignment) == {"a": tps("t-1")}


@pytest.mark.parametrize("assignor_class", STICKY_ASSIGNORS)
def test_no_members(assignor_class: type[AbstractStickyAssignor]) -> None:
    assert assignor_class().assign({"topic": 3}, {}) == {}
