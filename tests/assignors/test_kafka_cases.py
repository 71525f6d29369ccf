"""pysparklog's assignors give Kafka 4.2's assignment on the groups where they once differed
(``kafka_cases.py``; ``test_kafka_interop.py`` checks the same values against Kafka's classes)."""

from __future__ import annotations

import pytest

from pysparklog.assignors import assignor_for
from tests.assignors.kafka_cases import KAFKA_CASES, KafkaCase


@pytest.mark.parametrize("case", KAFKA_CASES, ids=lambda case: case.name)
def test_assignment_is_kafkas(case: KafkaCase) -> None:
    scenario = case.scenario
    assignment = assignor_for(scenario.assignor).assign(scenario.partitions_per_topic, scenario.walked_subscriptions())
    assert assignment == case.expected
