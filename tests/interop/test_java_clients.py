"""The Java client harness and the real-client scenarios (``scenarios.py``) proven against Kafka itself: a real
4.2 broker, Kafka's own clients. ``tests/endpoint/test_real_clients.py`` runs the same scenarios against two
pysparklog endpoints, one of them killed midway, so a difference is the endpoint's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop import scenarios
from tests.interop.kafka_broker import TOPIC_COMMAND, KafkaBroker

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def _topic(broker: KafkaBroker, name: str, partitions: int) -> str:
    broker.tool(TOPIC_COMMAND, "--create", "--topic", name, "--partitions", str(partitions))
    return name


def test_idempotent_producer_acks_each_record_once_and_a_consumer_reads_them_back(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = _topic(kafka_broker, "java-produce", 3)
    acks = scenarios.idempotent_produce(tmp_path, kafka_broker.bootstrap_server, topic, 300)
    scenarios.consume_and_check(tmp_path, kafka_broker.bootstrap_server, topic, "g-read", acks)


def test_read_committed_consumer_sees_the_committed_transactions_only(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = _topic(kafka_broker, "java-transactions", 3)
    run = scenarios.transactions_read_committed(tmp_path, kafka_broker.bootstrap_server, topic, "g-tx", transactions=6)
    assert (len(run.committed), len(run.aborted)) == (20, 10)


def test_a_group_of_three_with_a_member_joining_and_one_leaving_reads_every_record(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = _topic(kafka_broker, "java-group", 6)
    run = scenarios.consumer_group(
        tmp_path, kafka_broker.bootstrap_server, topic, "g-group", "cooperative-sticky", count=600
    )
    assert run.consumed() == set(run.acks)
