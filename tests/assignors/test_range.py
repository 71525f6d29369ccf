"""``RangeAssignor``: the reference's conformance cases R1-R5 (``RangeAssignorTest``), compared as sets."""

from __future__ import annotations

from pysparklog.assignors import RangeAssignor, Subscription
from pysparklog.structs import TopicPartition
from tests.assignors.support import tps

BOTH = ("topic1", "topic2")


def as_sets(assignment: dict[str, list[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    return {member_id: set(partitions) for member_id, partitions in assignment.items()}


def test_r1_multiple_consumers_mixed_topics() -> None:
    subscriptions = {
        "consumer1": Subscription(("topic1",)),
        "consumer2": Subscription(BOTH),
        "consumer3": Subscription(("topic1",)),
    }
    assignment = RangeAssignor().assign({"topic1": 3, "topic2": 2}, subscriptions)
    assert as_sets(assignment) == {
        "consumer1": set(tps("t1-0")),
        "consumer2": set(tps("t1-1", "t2-0", "t2-1")),
        "consumer3": set(tps("t1-2")),
    }


def test_r2_two_consumers_two_topics_six_partitions() -> None:
    subscriptions = {"consumer1": Subscription(BOTH), "consumer2": Subscription(BOTH)}
    assignment = RangeAssignor().assign({"topic1": 3, "topic2": 3}, subscriptions)
    assert as_sets(assignment) == {
        "consumer1": set(tps("t1-0", "t1-1", "t2-0", "t2-1")),
        "consumer2": set(tps("t1-2", "t2-2")),
    }


def test_r3_static_members_order_by_instance_id_not_member_id() -> None:
    expected = {"consumer-b": set(tps("t1-0", "t1-1", "t2-0", "t2-1")), "consumer-a": set(tps("t1-2", "t2-2"))}
    both_static = {
        "consumer-b": Subscription(BOTH, group_instance_id="instance1"),
        "consumer-a": Subscription(BOTH, group_instance_id="instance2"),
    }
    assert as_sets(RangeAssignor().assign({"topic1": 3, "topic2": 3}, both_static)) == expected
    # A static member goes before a dynamic one whatever their member ids.
    one_static = {
        "consumer-b": Subscription(BOTH, group_instance_id="instance1"),
        "consumer-a": Subscription(BOTH),
    }
    assert as_sets(RangeAssignor().assign({"topic1": 3, "topic2": 3}, one_static)) == expected


def test_r4_static_member_assignment_persists_when_a_dynamic_member_is_replaced() -> None:
    static = {f"consumer{index}": Subscription(BOTH, group_instance_id=f"instance{index}") for index in (1, 2, 3)}
    partitions_per_topic = {"topic1": 5, "topic2": 4}
    expected_static = {
        "consumer1": set(tps("t1-0", "t1-1", "t2-0")),
        "consumer2": set(tps("t1-2", "t2-1")),
        "consumer3": set(tps("t1-3", "t2-2")),
    }
    assignment = RangeAssignor().assign(partitions_per_topic, {**static, "consumer4": Subscription(BOTH)})
    assert as_sets(assignment) == {**expected_static, "consumer4": set(tps("t1-4", "t2-3"))}

    assignment = RangeAssignor().assign(partitions_per_topic, {**static, "consumer5": Subscription(BOTH)})
    assert as_sets(assignment) == {**expected_static, "consumer5": set(tps("t1-4", "t2-3"))}


def test_r5_two_consumers_one_topic_one_partition() -> None:
    subscriptions = {"consumer1": Subscription(("topic1",)), "consumer2": Subscription(("topic1",))}
    assignment = RangeAssignor().assign({"topic1": 1}, subscriptions)
    assert as_sets(assignment) == {"consumer1": set(tps("t1-0")), "consumer2": set()}


def test_lists_follow_kafkas_topic_order_and_ascending_partitions() -> None:
    # Kafka walks the topics in HashMap order, which for these two names is topic1 then topic2.
    subscriptions = {"consumer1": Subscription(BOTH), "consumer2": Subscription(BOTH)}
    assignment = RangeAssignor().assign({"topic2": 3, "topic1": 3}, subscriptions)
    assert assignment == {"consumer1": tps("t1-0", "t1-1", "t2-0", "t2-1"), "consumer2": tps("t1-2", "t2-2")}


def test_topics_without_metadata_or_subscribers_are_ignored() -> None:
    subscriptions = {"consumer1": Subscription(("topic1", "no-metadata-yet"))}
    assignment = RangeAssignor().assign({"topic1": 2, "unsubscribed": 4}, subscriptions)
    assert assignment == {"consumer1": tps("t1-0", "t1-1")}
