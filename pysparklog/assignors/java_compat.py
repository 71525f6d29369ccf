"""The Java iteration orders that Kafka's assignors leak into their results.

Kafka's sticky assignors walk some ``java.util.HashMap`` and ``HashSet`` instances in iteration
order and let that order decide ties: which member keeps its partitions up to the maximum quota,
which earlier owner is remembered for a partition, which partition goes back along a reversed
move. Giving the same answers as a Java group leader for the same group therefore needs those
orders, not just any deterministic order.

A Java ``HashMap`` iterates its table bucket by bucket, and each bucket in insertion order. The
bucket of a key is ``(h ^ (h >>> 16)) & (capacity - 1)`` where ``h`` is the key's ``hashCode()``.
The capacity starts at 16 and doubles whenever the size passes three quarters of it; a resize
keeps the relative order of the keys that share a bucket, and the table never shrinks.

What is modelled, and what is assumed:

* the map or set was filled by ``put``/``add`` from empty (Kafka's ``new HashMap<>()``), so its
  capacity is the smallest power of two from 16 up that holds the largest size it ever reached;
* insertion order is the order the caller supplies (for the maps Kafka's assignors build from
  the subscriptions: the order of the mapping passed to ``assign``, which is the order Kafka's
  assignor walks its input map in);
* no bucket holds 8 or more keys in a table of 64 or more, the point at which Java turns a bucket
  into a tree whose insertion rules this module does not follow.
"""

from __future__ import annotations

from collections.abc import Iterable

from pysparklog.structs import TopicPartition

_MASK32 = 0xFFFFFFFF
_INITIAL_CAPACITY = 16  # HashMap.DEFAULT_INITIAL_CAPACITY


def java_string_key(value: str) -> bytes:
    """A sort key that orders strings as ``String.compareTo`` does: by UTF-16 code units.

    Python compares code points instead, which disagrees for characters beyond U+FFFF: Java sees
    their surrogates (U+D800-U+DFFF), which sort before U+E000-U+FFFF. Big-endian UTF-16 bytes
    compare exactly as the code units do, shorter prefix first.
    """
    return value.encode("utf-16-be", "surrogatepass")


def string_hash_code(value: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, wrapping at 32 bits.

    Returns:
        The hash as an unsigned 32-bit pattern (Java's signed int, two's complement).
    """
    units = java_string_key(value)
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h


def topic_partition_hash_code(partition: TopicPartition) -> int:
    """``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()``, as an unsigned 32-bit pattern."""
    return (31 * (31 + partition.partition) + string_hash_code(partition.topic)) & _MASK32


def hash_map_capacity(largest_size: int) -> int:
    """The table size of a ``HashMap`` that grew from empty to hold ``largest_size`` entries.

    Java resizes when an insertion takes the size above ``0.75 * capacity``.
    """
    capacity = _INITIAL_CAPACITY
    while largest_size * 4 > capacity * 3:
        capacity *= 2
    return capacity


def bucket_index(hash_code: int, capacity: int) -> int:
    """The bucket ``HashMap`` puts a key in: the hash with its high half folded in (``HashMap.hash``), masked."""
    return (hash_code ^ (hash_code >> 16)) & (capacity - 1)


def hash_map_order(keys: Iterable[str]) -> list[str]:
    """The order a ``HashMap<String, ?>`` filled with ``keys`` (in this order, no removals) iterates them."""
    ordered = list(keys)
    capacity = hash_map_capacity(len(ordered))
    # sorted() is stable, so keys sharing a bucket keep their insertion order, as in Java's bucket chains.
    return sorted(ordered, key=lambda key: bucket_index(string_hash_code(key), capacity))


class TopicPartitionHashSet:
    """A ``HashSet<TopicPartition>`` reduced to what the sticky assignor asks of it: membership and its first element.

    Removing and re-adding an element puts it at the end of its bucket, which a Python dict's
    insertion order mirrors; the capacity only ever grows, as Java's does.
    """

    def __init__(self) -> None:
        self._members: dict[TopicPartition, None] = {}
        self._capacity = _INITIAL_CAPACITY

    def add(self, partition: TopicPartition) -> None:
        self._members[partition] = None
        self._capacity = max(self._capacity, hash_map_capacity(len(self._members)))

    def discard(self, partition: TopicPartition) -> None:
        self._members.pop(partition, None)

    def __len__(self) -> int:
        return len(self._members)

    def first(self) -> TopicPartition:
        """What ``iterator().next()`` returns: the element in the lowest bucket, earliest inserted within it.

        Raises:
            ValueError: The set is empty.
        """
        return min(
            self._members,
            key=lambda partition: bucket_index(topic_partition_hash_code(partition), self._capacity),
        )
