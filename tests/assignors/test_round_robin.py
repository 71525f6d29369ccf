"""``RoundRobinAssignor``: the reference's conformance cases RR1-RR5 (``RoundRobinAssignorTest``), compared as lists."""

from __future__ import annotations

from pysparklog.assignors import RoundRobinAssignor, Subscription
from pysparklog.structs import TopicPartition
from tests.assignors.support import tps

BOTH = ("topic1", "topic2")


def test_rr1_multiple_consumers_mixed_topics() -> None:
    subscriptions = {
        "consumer1": Subscription(("topic1",)),
        "consumer2": Subscription(BOTH),
        "consumer3": Subscription(("topic1",)),
    }
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 2}, subscriptions) == {
        "consumer1": tps("t1-0"),
        "consumer2": tps("t1-1", "t2-0", "t2-1"),
        "consumer3": tps("t1-2"),
    }


def test_rr2_two_dynamic_consumers_two_topics_six_partitions() -> None:
    subscriptions = {"consumer1": Subscription(BOTH), "consumer2": Subscription(BOTH)}
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer1": tps("t1-0", "t1-2", "t2-1"),
        "consumer2": tps("t1-1", "t2-0", "t2-2"),
    }


def test_rr3_two_static_consumers_order_by_instance_id() -> None:
    subscriptions = {
        "consumer-b": Subscription(BOTH, group_instance_id="instance1"),
        "consumer-a": Subscription(BOTH, group_instance_id="instance2"),
    }
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer-b": tps("t1-0", "t1-2", "t2-1"),
        "consumer-a": tps("t1-1", "t2-0", "t2-2"),
    }


def test_rr4_static_member_assignment_persistent() -> None:
    static = {f"consumer{index}": Subscription(BOTH, group_instance_id=f"instance{index}") for index in (1, 2, 3)}
    expected_static = {
        "consumer1": tps("t1-0", "t2-1"),
        "consumer2": tps("t1-1", "t2-2"),
        "consumer3": tps("t1-2"),
    }
    partitions_per_topic = {"topic1": 3, "topic2": 3}
    assignment = RoundRobinAssignor().assign(partitions_per_topic, {**static, "consumer4": Subscription(BOTH)})
    assert assignment == {**expected_static, "consumer4": tps("t2-0")}
    # Replacing the dynamic member changes nothing for the static ones.
    assignment = RoundRobinAssignor().assign(partitions_per_topic, {**static, "consumer5": Subscription(BOTH)})
    assert assignment == {**expected_static, "consumer5": tps("t2-0")}


def by_instance(
    assignment: dict[str, list[TopicPartition]], subscriptions: dict[str, Subscription]
) -> dict[str | None, list[TopicPartition]]:
    return {subscriptions[member_id].group_instance_id: partitions for member_id, partitions in assignment.items()}


def test_rr5_static_assignment_persistent_after_member_ids_change() -> None:
    partitions_per_topic = {"topic1": 5, "topic2": 5}
    expected = {
        "instance1": tps("t1-0", "t1-3", "t2-1", "t2-4"),
        "instance2": tps("t1-1", "t1-4", "t2-2"),
        "instance3": tps("t1-2", "t2-0", "t2-3"),
    }
    subscriptions = {
        f"consumer{index}": Subscription(BOTH, group_instance_id=f"instance{index}") for index in (1, 2, 3)
    }
    assert by_instance(RoundRobinAssignor().assign(partitions_per_topic, subscriptions), subscriptions) == expected

    # The members restart with new member ids (consumer3 -> consumer4, consumer2 -> consumer5).
    renamed = {
        "consumer1": subscriptions["consumer1"],
        "consumer4": subscriptions["consumer3"],
        "consumer5": subscriptions["consumer2"],
    }
    assert by_instance(RoundRobinAssignor().assign(partitions_per_topic, renamed), renamed) == expected


def test_skips_members_not_subscribed_to_the_topic() -> None:
    # RoundRobinAssignor's own example: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2.
    subscriptions = {
        "C0": Subscription(("t0",)),
        "C1": Subscription(("t0", "t1")),
        "C2": Subscription(("t0", "t1", "t2")),
    }
    assert RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subscriptions) == {
        "C0": [TopicPartition("t0", 0)],
        "C1": [TopicPartition("t1", 0)],
        "C2": [TopicPartition("t1", 1), TopicPartition("t2", 0), TopicPartition("t2", 1), TopicPartition("t2", 2)],
    }
