"""pysparklog's assignors against Kafka's own (``kafka-clients`` 4.2.0, run by ``kafka-assignors/KafkaAssignors.java``).

Every assignor on a few hundred seeded random groups, each handed to Kafka both in a
``LinkedHashMap`` (walked in the given order) and in a ``HashMap`` (as a Java leader holds the
JoinGroup members), compared member by member and list order included; and the groups of
``kafka_cases.py`` with the assignment the fast suite expects there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from pysparklog.assignors import Subscription, assignor_for
from tests.assignors.kafka_assignors import KafkaError, Scenario, run_kafka_assignors
from tests.assignors.kafka_cases import KAFKA_CASES
from tests.assignors.scenarios import ASSIGNORS, moves_back_to_unsubscribed_owner, random_scenarios
from tests.interop.kafka_tools import kafka_classpath, missing_tools, unavailable_reason

pytestmark = pytest.mark.interop

SCENARIOS_PER_SEED = 400


@pytest.fixture(scope="module", autouse=True)
def kafka_jars() -> None:
    """Skip without Java or Maven only; with both, failing to get Kafka's jars is a failure."""
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"Kafka interop tests need Java and Maven: {missing}")
    if kafka_classpath() is None:
        pytest.fail(f"Java and Maven are present but Kafka's jars could not be resolved:\n{unavailable_reason()}")


def test_kafka_cases_are_kafkas_assignment() -> None:
    results = run_kafka_assignors([case.scenario for case in KAFKA_CASES])
    assert {case.name: result for case, result in zip(KAFKA_CASES, results, strict=True)} == {
        case.name: case.expected for case in KAFKA_CASES
    }


def claimed_twice_in_one_generation(subscriptions: dict[str, Subscription]) -> bool:
    claims = Counter(
        (partition, subscription.generation)
        for subscription in subscriptions.values()
        for partition in subscription.owned_partitions
    )
    return any(count > 1 for count in claims.values())


@pytest.mark.parametrize("seed", [20240, 4200])
def test_random_groups_get_kafkas_assignment(seed: int) -> None:
    generated = random_scenarios(seed, SCENARIOS_PER_SEED)
    scenarios: list[Scenario] = [
        *generated,
        *(replace(scenario, java_map="HashMap") for scenario in generated),
    ]
    compared: Counter[str] = Counter()
    conflicts_compared = 0
    mismatches = []
    for scenario, kafka in zip(scenarios, run_kafka_assignors(scenarios), strict=True):
        if moves_back_to_unsubscribed_owner(scenario):
            continue  # Kafka's answer there is invalid or an exception: a documented departure
        subscriptions = scenario.walked_subscriptions()
        ours = assignor_for(scenario.assignor).assign(scenario.partitions_per_topic, subscriptions)
        if isinstance(kafka, KafkaError) or ours != kafka:
            mismatches.append((scenario, kafka, ours))
        compared[scenario.assignor] += 1
        conflicts_compared += claimed_twice_in_one_generation(subscriptions)
    assert not mismatches, f"{len(mismatches)} groups differ from Kafka's assignment; first: {mismatches[0]}"
    # The skipped groups stay few, and the comparisons cover every assignor and conflicting claims.
    assert min(compared[assignor] for assignor in ASSIGNORS) >= 100, compared
    assert conflicts_compared >= 50, conflicts_compared
