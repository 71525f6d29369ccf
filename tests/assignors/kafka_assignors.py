"""Run Apache Kafka's own assignors (``kafka-assignors/KafkaAssignors.java``) on group scenarios.

Why: pysparklog's assignors promise Kafka's assignment for the same group, member by member and in
the order Kafka lists each member's partitions. The strongest check of that promise is Kafka's Java
classes on the same input. The driver runs as a single-file Java program (compiled in memory by
``java``, nothing written to disk) on the ``kafka-clients`` jar that :mod:`tests.interop.kafka_tools`
resolves from Maven Central.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pysparklog.assignors import NO_GENERATION, Subscription
from pysparklog.assignors.java_compat import hash_map_order
from pysparklog.structs import TopicPartition
from tests.assignors.support import Assignment
from tests.interop.kafka_tools import JVM_OPTIONS, kafka_classpath, unavailable_reason

DRIVER = Path(__file__).resolve().parent / "kafka-assignors" / "KafkaAssignors.java"
#: One JVM for a whole batch: a few hundred scenarios take seconds, the JVM start most of it.
RUN_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Scenario:
    """One rebalance: the cluster's partition counts and the members' subscriptions.

    Attributes:
        java_map: The ``Map`` the driver hands Kafka's assignor the subscriptions in:
            ``"LinkedHashMap"`` walks them in ``subscriptions`` order, ``"HashMap"`` in the order of
            a ``HashMap`` filled in that order, as a Java group leader does with the JoinGroup
            response (``ConsumerCoordinator.onLeaderElected``).
    """

    assignor: str
    partitions_per_topic: Mapping[str, int]
    subscriptions: Mapping[str, Subscription]
    java_map: Literal["LinkedHashMap", "HashMap"] = "LinkedHashMap"

    def walked_subscriptions(self) -> dict[str, Subscription]:
        """The subscriptions in the order Kafka's assignor walks them: what pysparklog's assignors take."""
        if self.java_map == "HashMap":
            return {member_id: self.subscriptions[member_id] for member_id in hash_map_order(self.subscriptions)}
        return dict(self.subscriptions)


@dataclass(frozen=True)
class KafkaError:
    """Kafka's assignor threw on the scenario (it has no assignment to compare with)."""

    message: str


def _encode(scenarios: Iterable[Scenario]) -> str:
    lines = []
    for scenario in scenarios:
        lines.append(f"scenario {scenario.assignor} {scenario.java_map}")
        lines.extend(f"topic {topic} {count}" for topic, count in scenario.partitions_per_topic.items())
        for member_id, subscription in scenario.subscriptions.items():
            owned = [f"{partition.topic} {partition.partition}" for partition in subscription.owned_partitions]
            fields = [
                member_id,
                subscription.group_instance_id or "-",
                str(subscription.generation),
                str(len(subscription.topics)),
                *subscription.topics,
                str(len(owned)),
                *owned,
            ]
            lines.append("member " + " ".join(fields))
        lines.append("end")
    return "\n".join(lines) + "\n"


def _decode(output: str) -> Iterator[Assignment | KafkaError]:
    assignment: Assignment = {}
    for line in output.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "error":
            yield KafkaError(rest)
        elif kind == "result":
            assignment = {}
        elif kind == "member":
            member_id, count, *fields = rest.split()
            assignment[member_id] = [
                TopicPartition(fields[index], int(fields[index + 1])) for index in range(0, 2 * int(count), 2)
            ]
        elif kind == "end":
            yield assignment


def _check_encodable(scenario: Scenario) -> None:
    names = [*scenario.partitions_per_topic, *scenario.subscriptions]
    for subscription in scenario.subscriptions.values():
        names.extend(subscription.topics)
        names.extend(partition.topic for partition in subscription.owned_partitions)
        if subscription.group_instance_id is not None:
            names.append(subscription.group_instance_id)
    for name in names:
        if not name or name == "-" or any(character.isspace() for character in name):
            raise ValueError(f"name {name!r} cannot be passed to the Kafka driver (no whitespace, not '-')")
    for subscription in scenario.subscriptions.values():
        if subscription.generation < NO_GENERATION:
            raise ValueError(f"generation {subscription.generation} is below {NO_GENERATION}")


def run_kafka_assignors(scenarios: Sequence[Scenario]) -> list[Assignment | KafkaError]:
    """Kafka's assignment for each scenario (or the exception its assignor threw), in order.

    Raises:
        RuntimeError: Kafka's classpath is unavailable or the driver failed as a whole.
    """
    for scenario in scenarios:
        _check_encodable(scenario)
    classpath = kafka_classpath()
    if classpath is None:
        raise RuntimeError(f"Kafka's jars are unavailable: {unavailable_reason()}")
    cmd = ["java", *JVM_OPTIONS, "-cp", classpath, str(DRIVER)]
    proc = subprocess.run(
        cmd, input=_encode(scenarios), capture_output=True, text=True, encoding="utf-8", timeout=RUN_TIMEOUT_S
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{DRIVER.name} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    results = list(_decode(proc.stdout))
    if len(results) != len(scenarios):
        raise RuntimeError(
            f"{DRIVER.name} answered {len(results)} of {len(scenarios)} scenarios:\n{proc.stderr[-4000:]}"
        )
    return results
