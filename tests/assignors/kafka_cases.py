"""Groups on which pysparklog's assignors once disagreed with Kafka's, with Kafka 4.2's assignment.

Each expected assignment is what ``kafka-clients`` 4.2.0 computes for the scenario:
``test_kafka_interop.py`` checks that against Kafka's classes, and ``test_kafka_cases.py`` checks
pysparklog's assignors against the same values without Java, so the fast suite keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pysparklog.assignors import Subscription
from tests.assignors.kafka_assignors import Scenario
from tests.assignors.support import Assignment, claims, tps

TWELVE_TOPICS = tuple(f"topic{number}" for number in range(1, 13))


@dataclass(frozen=True)
class KafkaCase:
    """A scenario, Kafka's assignment for it, and why it is here."""

    name: str
    scenario: Scenario
    expected: Assignment


def _claiming_partition_0(assignor: str) -> Scenario:
    # consumerA (generation 7) is walked first, so the later claims of generation 5 lose to it; in
    # HashMap order (consumer3, consumer2, consumerA) they would cancel each other first and
    # consumerA's claim, though it wins, would leave partition 0 marked as claimed by several.
    return Scenario(
        assignor,
        {"topic1": 4},
        {
            "consumerA": Subscription(("topic1",), claims("t1-0", "t1-3"), 7),
            "consumer2": Subscription(("topic1",), claims("t1-0", "t1-1"), 5),
            "consumer3": Subscription(("topic1",), claims("t1-0", "t1-2"), 5),
        },
    )


def _previous_owners_tie(first: str, second: str) -> Scenario:
    # Unequal subscriptions (general path). consumerX of the latest generation holds all of topic1;
    # consumer1 and consumer2 both held topic1-0 a generation earlier, and the first of them in the
    # walk is its previous owner, to which balancing moves it back.
    return Scenario(
        "sticky",
        {"topic1": 4, "topic2": 1},
        {
            "consumerX": Subscription(("topic1", "topic2"), claims("t1-0", "t1-1", "t1-2", "t1-3", "t2-0"), 3),
            first: Subscription(("topic1",), claims("t1-0"), 2),
            second: Subscription(("topic1",), claims("t1-0"), 2),
        },
    )


KAFKA_CASES = [
    KafkaCase(
        "range lists topics in the order of the leader's set of subscribed topics",
        # topic3 and topic10 share a bucket of Kafka's HashMap; the leader meets topic3 first in
        # consumer1's subscription, whatever order the partition counts come in.
        Scenario(
            "range",
            {"topic10": 2, "topic3": 2},
            {"consumer1": Subscription(("topic3", "topic10")), "consumer2": Subscription(("topic10",))},
        ),
        {"consumer1": tps("topic3-0", "topic3-1", "topic10-0"), "consumer2": tps("topic10-1")},
    ),
    KafkaCase(
        "range: a topic without metadata enlarges the leader's set, which reorders topics sharing a bucket",
        Scenario(
            "range", dict.fromkeys(reversed(TWELVE_TOPICS), 1), {"c": Subscription((*TWELVE_TOPICS, "no-metadata"))}
        ),
        {
            "c": tps(
                *(f"topic{n}-0" for n in (1, 2, 5, 6, 3, 10, 4, 11, 9, 12, 7, 8)),
            )
        },
    ),
    KafkaCase(
        "sticky: a claim of a higher generation walked first keeps the partition",
        _claiming_partition_0("sticky"),
        {"consumerA": tps("t1-0", "t1-3"), "consumer2": tps("t1-1"), "consumer3": tps("t1-2")},
    ),
    KafkaCase(
        "cooperative-sticky does not hold back a partition its only trusted owner keeps",
        _claiming_partition_0("cooperative-sticky"),
        {"consumerA": tps("t1-0", "t1-3"), "consumer2": tps("t1-1"), "consumer3": tps("t1-2")},
    ),
    KafkaCase(
        "sticky: of two previous owners of one generation, the first walked gets the partition back",
        _previous_owners_tie("consumer1", "consumer2"),
        {"consumerX": tps("t1-3", "t2-0"), "consumer1": tps("t1-0", "t1-2"), "consumer2": tps("t1-1")},
    ),
    KafkaCase(
        "sticky: the same tie walked the other way round",
        _previous_owners_tie("consumer2", "consumer1"),
        {"consumerX": tps("t1-3", "t2-0"), "consumer2": tps("t1-0"), "consumer1": tps("t1-1", "t1-2")},
    ),
    KafkaCase(
        "roundrobin orders member ids as Java strings: a surrogate pair sorts before U+FF21",
        Scenario(
            "roundrobin",
            {"topic1": 3},
            {"a\U0001f600": Subscription(("topic1",)), "a\uff21": Subscription(("topic1",))},
        ),
        {"a\U0001f600": tps("t1-0", "t1-2"), "a\uff21": tps("t1-1")},
    ),
]
