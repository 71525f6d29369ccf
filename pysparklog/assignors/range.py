"""Kafka's ``range`` assignor (``RangeAssignor``, without racks).

Each topic is split on its own: its subscribers, in member order, get contiguous blocks of
partitions, the first ``P % C`` of them one partition more than the rest. Because every topic is
split the same way, members that subscribe to several topics with equal partition counts get the
same partition numbers of each (co-partitioning, which joins across topics rely on), at the price
of the first members being loaded more when counts do not divide evenly.
"""

from __future__ import annotations

from collections import defaultdict

from pysparklog.assignors.base import ConsumerPartitionAssignor, RebalanceProtocol, Subscription, sorted_members
from pysparklog.assignors.java_compat import hash_map_order
from pysparklog.structs import TopicPartition


class RangeAssignor(ConsumerPartitionAssignor):
    """Per-topic contiguous ranges; see the module docstring."""

    name = "range"
    protocol = RebalanceProtocol.EAGER

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        subscribers: defaultdict[str, list[str]] = defaultdict(list)
        for member_id in sorted_members(subscriptions):
            for topic in subscriptions[member_id].topics:
                subscribers[topic].append(member_id)

        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        for topic in _leader_topic_order(partitions_per_topic, subscriptions):
            members = subscribers[topic]
            quota, members_with_extra = divmod(partitions_per_topic[topic], len(members))
            start = 0
            for index, member_id in enumerate(members):
                end = start + quota + (1 if index < members_with_extra else 0)
                assignment[member_id].extend(TopicPartition(topic, partition) for partition in range(start, end))
                start = end
        return assignment


def _leader_topic_order(partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]) -> list[str]:
    """The order Kafka's range assignor walks the topics in, which orders each member's list.

    A Java leader (``AbstractPartitionAssignor.assign(Cluster, GroupSubscription)``) collects every
    subscribed topic into a ``HashSet``, walking the subscriptions (in ``subscriptions`` order) and
    each member's topics in order, then fills a ``HashMap`` of partitions per topic from that set, skipping
    topics without partitions; ``RangeAssignor.assignPartitions`` walks that map. Both tables hash
    the same names but may differ in size (the set also holds the topics without metadata), so
    names sharing a bucket of the map come in the set's order, not in ``partitions_per_topic``'s.
    """
    subscribed = dict.fromkeys(topic for subscription in subscriptions.values() for topic in subscription.topics)
    return hash_map_order(topic for topic in hash_map_order(subscribed) if topic in partitions_per_topic)
