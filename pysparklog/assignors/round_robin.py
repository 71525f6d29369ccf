"""Kafka's ``roundrobin`` assignor (``RoundRobinAssignor``).

All partitions of all subscribed topics, topics by name and partitions in order, are dealt one at
a time around the members in member order, skipping a member that does not subscribe to the
partition's topic. With identical subscriptions the counts differ by at most one across members,
whatever the partition counts per topic, which ``range`` cannot promise.
"""

from __future__ import annotations

from pysparklog.assignors.base import ConsumerPartitionAssignor, RebalanceProtocol, Subscription, sorted_members
from pysparklog.assignors.java_compat import java_string_key
from pysparklog.structs import TopicPartition


class RoundRobinAssignor(ConsumerPartitionAssignor):
    """Partitions dealt around the members; see the module docstring."""

    name = "roundrobin"
    protocol = RebalanceProtocol.EAGER

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        members = sorted_members(subscriptions)
        topics_of = {member_id: frozenset(subscriptions[member_id].topics) for member_id in members}
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        next_member = 0  # the position of Kafka's CircularIterator
        for topic in sorted(partitions_per_topic, key=java_string_key):
            for partition in range(partitions_per_topic[topic]):
                # Every topic here has a subscriber, so this stops within one turn around the members.
                while topic not in topics_of[members[next_member]]:
                    next_member = (next_member + 1) % len(members)
                assignment[members[next_member]].append(TopicPartition(topic, partition))
                next_member = (next_member + 1) % len(members)
        return assignment
