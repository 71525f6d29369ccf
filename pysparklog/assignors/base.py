"""What every consumer partition assignor shares: the subscription a member sends, the assignor
interface the group coordinator calls, input checking, and Kafka's member order.

The group leader in Kafka runs the assignor over every member's subscription and the partition
counts it knows; the coordinator here does the same through :meth:`ConsumerPartitionAssignor.assign`.
Each assignor mirrors the Java class of the same ``name`` (``RangeAssignor``, ``RoundRobinAssignor``,
``StickyAssignor``, ``CooperativeStickyAssignor``), so a group may mix pysparklog consumers with
Java ones and the leader's choice of implementation does not change the assignment.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pysparklog.assignors.java_compat import java_string_key
from pysparklog.errors import InvalidConfigError
from pysparklog.storage.config import INT_MAX
from pysparklog.structs import TopicPartition

#: The generation of a member that reports none: it never completed a rebalance, or its
#: protocol version predates generations in subscriptions (``AbstractStickyAssignor.DEFAULT_GENERATION``).
NO_GENERATION = -1


class RebalanceProtocol(enum.Enum):
    """How members hand partitions over (``ConsumerPartitionAssignor.RebalanceProtocol``; values are its ids).

    EAGER members revoke everything before a rebalance, so an assignor may move any partition.
    COOPERATIVE members keep consuming what they own, so a partition may only be given to a new
    owner once its old owner has let it go, one rebalance later.
    """

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True)
class Subscription:
    """What one member tells the assignor (``ConsumerPartitionAssignor.Subscription``).

    Lists given for ``topics`` and ``owned_partitions`` are stored as tuples (``topics`` without
    repeats), and ``(topic, partition)`` pairs as :class:`TopicPartition`, so a subscription is
    immutable and hashable whatever built it.

    Attributes:
        topics: The topics the member subscribes to; those without metadata yet are ignored.
        owned_partitions: What the member owned in ``generation``, in the order it reports them
            (sticky assignors keep that order for the partitions they let it keep).
        generation: The group generation ``owned_partitions`` belong to; :data:`NO_GENERATION` when unknown.
        group_instance_id: The static member id (``group.instance.id``), which orders members ahead of
            dynamic ones so an assignment survives a restart that changes the member id.

    Raises:
        InvalidConfigError: A field has the wrong type or an impossible value.
    """

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = NO_GENERATION
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", _topic_names(self.topics))
        object.__setattr__(self, "owned_partitions", _topic_partitions(self.owned_partitions))
        if isinstance(self.generation, bool) or not isinstance(self.generation, int) or self.generation < NO_GENERATION:
            raise InvalidConfigError(
                f"Subscription generation = {self.generation!r} is invalid; accepted: an integer >= {NO_GENERATION} "
                f"({NO_GENERATION} when the member reports no generation)"
            )
        if self.group_instance_id is not None and (
            not isinstance(self.group_instance_id, str) or not self.group_instance_id
        ):
            raise InvalidConfigError(
                f"Subscription group_instance_id = {self.group_instance_id!r} is invalid; accepted: None (a dynamic "
                "member) or a non-empty string"
            )


def _topic_names(topics: Any) -> tuple[str, ...]:
    # A bare string is iterable too, and would silently subscribe to one topic per character.
    if isinstance(topics, str | bytes) or not isinstance(topics, Iterable):
        raise InvalidConfigError(
            f"Subscription topics = {topics!r} is invalid; accepted: a tuple or list of topic names"
        )
    names = tuple(dict.fromkeys(topics))  # a topic listed twice is subscribed once, as Kafka's Set<String> has it
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidConfigError(
                f"Subscription topic {name!r} is invalid; accepted: non-empty strings (topic names)"
            )
    return names


def _topic_partitions(partitions: Any) -> tuple[TopicPartition, ...]:
    if isinstance(partitions, str | bytes) or not isinstance(partitions, Iterable):
        raise InvalidConfigError(
            f"Subscription owned_partitions = {partitions!r} is invalid; accepted: a tuple or list of TopicPartition"
        )
    converted = []
    for item in partitions:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidConfigError(
                f"owned partition {item!r} is invalid; accepted: TopicPartition(topic, partition) or a "
                "(topic, partition) pair"
            )
        topic, partition = item
        if not isinstance(topic, str) or isinstance(partition, bool) or not isinstance(partition, int):
            raise InvalidConfigError(
                f"owned partition {item!r} is invalid; accepted: a topic name (str) and a partition number (int)"
            )
        converted.append(TopicPartition(topic, partition))
    return tuple(converted)


class ConsumerPartitionAssignor(ABC):
    """Turns a group's subscriptions into an assignment (``ConsumerPartitionAssignor`` / ``AbstractPartitionAssignor``).

    Assignors keep no state between calls: everything a sticky assignor remembers travels in the
    subscriptions (owned partitions and their generation), so any member can act as leader.
    """

    #: The protocol name members advertise in JoinGroup (``partition.assignment.strategy``'s short form).
    name: ClassVar[str]
    #: The strongest protocol the assignor supports; the group uses it when every member supports it.
    protocol: ClassVar[RebalanceProtocol]

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """Assign the partitions of every subscribed topic to the members.

        Args:
            partitions_per_topic: Partition count per topic, for the topics with metadata. Topics no
                member subscribes to, and topics with no partitions, are left out, as Kafka's leader
                only looks up subscribed topics that have partitions.
            subscriptions: Member id to subscription. Its iteration order is the order Kafka's
                assignor walks its ``Map<String, Subscription>`` in, which orders range's lists and
                settles ties and conflicting claims in the sticky assignors. A Java leader's map is a
                ``HashMap`` filled in JoinGroup order: pass the members in
                ``java_compat.hash_map_order`` of that order to get the assignment it computes.

        Returns:
            Member id to assigned partitions, in the order Kafka's assignor lists them; every member
            has an entry, possibly empty, in the order of ``subscriptions``.

        Raises:
            InvalidConfigError: A member id is not a non-empty string, a subscription is not a
                :class:`Subscription`, two members share a ``group_instance_id``, or a partition count
                is not an integer from 0 to 2147483647.
        """
        _check_subscriptions(subscriptions)
        _check_partition_counts(partitions_per_topic)
        subscribed = {topic for subscription in subscriptions.values() for topic in subscription.topics}
        partition_counts = {
            topic: count for topic, count in partitions_per_topic.items() if count > 0 and topic in subscribed
        }
        return self._assign(partition_counts, dict(subscriptions))

    @abstractmethod
    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """:meth:`assign` on checked input: every topic in ``partitions_per_topic`` has partitions and a subscriber."""


def _check_subscriptions(subscriptions: Mapping[str, Subscription]) -> None:
    if not isinstance(subscriptions, Mapping):
        raise InvalidConfigError(
            f"subscriptions = {subscriptions!r} is invalid; accepted: a mapping of member id (str) to Subscription"
        )
    members_by_instance: dict[str, str] = {}
    for member_id, subscription in subscriptions.items():
        if not isinstance(member_id, str) or not member_id:
            raise InvalidConfigError(
                f"member id {member_id!r} is invalid; accepted: a non-empty string (the coordinator's member.id)"
            )
        if not isinstance(subscription, Subscription):
            raise InvalidConfigError(
                f"subscription of member {member_id!r} is a {type(subscription).__name__}; accepted: a Subscription"
            )
        instance_id = subscription.group_instance_id
        if instance_id is not None:
            other = members_by_instance.setdefault(instance_id, member_id)
            if other != member_id:
                raise InvalidConfigError(
                    f"members {other!r} and {member_id!r} share group_instance_id {instance_id!r}; accepted: "
                    "one member per static instance id"
                )


def _check_partition_counts(partitions_per_topic: Mapping[str, int]) -> None:
    if not isinstance(partitions_per_topic, Mapping):
        raise InvalidConfigError(
            f"partitions_per_topic = {partitions_per_topic!r} is invalid; accepted: a mapping of topic name to "
            "partition count"
        )
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str) or not topic:
            raise InvalidConfigError(f"topic {topic!r} is invalid; accepted: a non-empty string")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= INT_MAX:
            raise InvalidConfigError(
                f"partition count of topic {topic!r} = {count!r} is invalid; accepted: an integer from 0 to {INT_MAX}"
            )


def member_sort_key(member_id: str, subscription: Subscription) -> tuple[bool, bytes]:
    """Kafka's member order (``AbstractPartitionAssignor.MemberInfo.compareTo``).

    Static members come first, by ``group.instance.id``; then dynamic members, by member id, both
    compared as Java strings. Static ids survive restarts while member ids do not, so ordering by
    them keeps range and round-robin assignments stable across rolling restarts.
    """
    if subscription.group_instance_id is not None:
        return (False, java_string_key(subscription.group_instance_id))
    return (True, java_string_key(member_id))


def sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in Kafka's member order (see :func:`member_sort_key`)."""
    return sorted(subscriptions, key=lambda member_id: member_sort_key(member_id, subscriptions[member_id]))
