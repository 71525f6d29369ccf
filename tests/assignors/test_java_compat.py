"""``pysparklog.assignors.java_compat``: Java's String and TopicPartition hashes and HashMap/HashSet order."""

from __future__ import annotations

import pytest

from pysparklog.assignors.java_compat import (
    TopicPartitionHashSet,
    bucket_index,
    hash_map_capacity,
    hash_map_order,
    string_hash_code,
    topic_partition_hash_code,
)
from pysparklog.structs import TopicPartition


def signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("", 0),
        ("abc", 96354),
        ("consumer1", -421004549),
        ("topic", 110546223),
        ("\U0001f600", 1772899),  # a surrogate pair counts as two UTF-16 code units
    ],
)
def test_string_hash_code(text: str, java_hash: int) -> None:
    assert signed(string_hash_code(text)) == java_hash


def test_topic_partition_hash_code() -> None:
    # 31 * (31 + 2) + "topic".hashCode()
    assert signed(topic_partition_hash_code(TopicPartition("topic", 2))) == 31 * 33 + 110546223


def test_hash_map_order_of_consumers() -> None:
    # Verified against Java (kafka-log-format.md §4.3): HashMap iterates consumer1..3 backwards.
    assert hash_map_order(["consumer1", "consumer2", "consumer3"]) == ["consumer3", "consumer2", "consumer1"]


def test_capacity_grows_past_three_quarters() -> None:
    assert [hash_map_capacity(size) for size in (0, 12, 13, 24, 25)] == [16, 16, 32, 32, 64]


def test_keys_sharing_a_bucket_keep_insertion_order() -> None:
    # "Aa" and "BB" have the same String.hashCode.
    assert string_hash_code("Aa") == string_hash_code("BB")
    assert hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert hash_map_order(["Aa", "BB"]) == ["Aa", "BB"]


def test_topic_partition_hash_set_first_is_lowest_bucket_then_earliest() -> None:
    moved = TopicPartitionHashSet()
    partitions = [TopicPartition("topic", number) for number in (5, 1, 3)]
    for partition in partitions:
        moved.add(partition)
    lowest = min(partitions, key=lambda partition: bucket_index(topic_partition_hash_code(partition), 16))
    assert moved.first() == lowest
    moved.discard(lowest)
    assert len(moved) == 2 and moved.first() != lowest
    moved.discard(TopicPartition("absent", 0))
    assert len(moved) == 2
