"""``pysparklog.assignors.base``: subscriptions, input checking and Kafka's member order."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pysparklog.assignors import (
    ASSIGNOR_NAMES,
    RangeAssignor,
    Subscription,
    assignor_for,
    member_sort_key,
    sorted_members,
)
from pysparklog.errors import InvalidConfigError
from pysparklog.structs import TopicPartition


def test_subscription_normalises_lists_and_pairs() -> None:
    subscription = Subscription(["a", "b", "a"], [("a", 0), TopicPartition("b", 1)], 3, "instance")  # type: ignore[arg-type]
    assert subscription.topics == ("a", "b")
    assert subscription.owned_partitions == (TopicPartition("a", 0), TopicPartition("b", 1))
    assert isinstance(subscription.owned_partitions[0], TopicPartition)
    assert hash(subscription) == hash(
        Subscription(("a", "b"), (TopicPartition("a", 0), TopicPartition("b", 1)), 3, "instance")
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"topics": "topic"}, "tuple or list of topic names"),
        ({"topics": ("topic", 3)}, "non-empty strings"),
        ({"topics": ("",)}, "non-empty strings"),
        ({"topics": (), "owned_partitions": ("t", 0)}, "TopicPartition"),
        ({"topics": (), "owned_partitions": (("t", "0"),)}, "partition number (int)"),
        ({"topics": (), "owned_partitions": 5}, "tuple or list of TopicPartition"),
        ({"topics": (), "generation": -2}, "integer >= -1"),
        ({"topics": (), "generation": True}, "integer >= -1"),
        ({"topics": (), "group_instance_id": ""}, "non-empty string"),
    ],
)
def test_subscription_rejects_bad_fields(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        Subscription(**fields)


def test_member_order_puts_static_members_first_by_instance_id() -> None:
    subscriptions = {
        "a-dynamic": Subscription(()),
        "z-static": Subscription((), group_instance_id="instance1"),
        "b-dynamic": Subscription(()),
        "y-static": Subscription((), group_instance_id="instance2"),
    }
    assert sorted_members(subscriptions) == ["z-static", "y-static", "a-dynamic", "b-dynamic"]
    assert member_sort_key("z-static", subscriptions["z-static"]) < member_sort_key(
        "a-dynamic", subscriptions["a-dynamic"]
    )


@pytest.mark.parametrize("name", ASSIGNOR_NAMES)
@pytest.mark.parametrize(
    ("partitions_per_topic", "message"),
    [
        ({"topic": -1}, "integer from 0 to 2147483647"),
        ({"topic": 2**31}, "integer from 0 to 2147483647"),
        ({"topic": 1.0}, "integer from 0 to 2147483647"),
        ({"topic": True}, "integer from 0 to 2147483647"),
        ({3: 1}, "non-empty string"),
        ([("topic", 1)], "mapping of topic name to partition count"),
    ],
)
def test_bad_partition_counts(name: str, partitions_per_topic: Any, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        assignor_for(name).assign(partitions_per_topic, {"member": Subscription(("topic",))})


@pytest.mark.parametrize("name", ASSIGNOR_NAMES)
@pytest.mark.parametrize(
    ("subscriptions", "message"),
    [
        ({1: Subscription(("topic",))}, "member id 1 is invalid; accepted: a non-empty string"),
        ({b"member": Subscription(("topic",))}, "member id b'member' is invalid"),
        ({"": Subscription(("topic",))}, "member id '' is invalid"),
        ({"member": ("topic",)}, "is a tuple; accepted: a Subscription"),
        (
            {
                "m1": Subscription(("topic",), group_instance_id="same"),
                "m2": Subscription(("topic",), group_instance_id="same"),
            },
            "share group_instance_id 'same'",
        ),
        ([("member", Subscription(("topic",)))], "mapping of member id"),
    ],
)
def test_bad_subscriptions(name: str, subscriptions: Any, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        assignor_for(name).assign({"topic": 1}, subscriptions)


def test_zero_partition_topics_and_members_without_topics() -> None:
    subscriptions = {"m1": Subscription(("empty",)), "m2": Subscription(())}
    assert RangeAssignor().assign({"empty": 0}, subscriptions) == {"m1": [], "m2": []}
