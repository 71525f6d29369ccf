"""The Java client harness proven against Kafka itself: a real 4.2 broker, Kafka's own clients. What these tests
assert of the broker, ``tests/endpoint/test_real_clients.py`` asserts of two pysparklog endpoints with the same
harness, so a difference is the endpoint's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.java_clients import BASE_TIMESTAMP, JAVA_CLIENTS
from tests.interop.kafka_broker import TOPIC_COMMAND, KafkaBroker
from tests.interop.kafka_tools import missing_tools

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PARTITIONS = 3
CLIENT_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"Kafka interop tests need Java and Maven: {missing}")
    with KafkaBroker.started(tmp_path_factory.mktemp("broker")) as started:
        yield started


def _topic(broker: KafkaBroker, name: str) -> str:
    broker.tool(TOPIC_COMMAND, "--create", "--topic", name, "--partitions", str(PARTITIONS))
    return name


def test_idempotent_producer_acks_each_record_once_and_a_consumer_reads_them_back(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = _topic(broker, "java-produce")
    producer = JAVA_CLIENTS.start(tmp_path, "produce", bootstrap=broker.bootstrap_server, topic=topic, count=300)
    try:
        producer.wait(CLIENT_TIMEOUT_S)
    finally:
        producer.close()
    acks = {(ack["partition"], ack["offset"]): ack["i"] for ack in producer.events("ack")}
    assert len(acks) == 300 and sorted(acks.values()) == list(range(300))
    assert producer.events("done") == [{"event": "done", "acked": 300, "failed": 0}]

    consumer = JAVA_CLIENTS.start(
        tmp_path, "consume", bootstrap=broker.bootstrap_server, topic=topic, group="g-read", max_records=300
    )
    try:
        consumer.wait(CLIENT_TIMEOUT_S)
    finally:
        consumer.close()
    records = consumer.events("record")
    assert {(r["partition"], r["offset"]) for r in records} == set(acks)
    for record in records:
        i = acks[(record["partition"], record["offset"])]
        assert (record["key"], record["value"], record["headers"]) == (f"k{i}", f"v{i}", [["seq", str(i)]])
        assert (record["timestamp"], record["timestamp_type"]) == (BASE_TIMESTAMP + i, "CreateTime")


def test_read_committed_consumer_sees_the_committed_transactions_only(broker: KafkaBroker, tmp_path: Path) -> None:
    topic = _topic(broker, "java-transactions")
    producer = JAVA_CLIENTS.start(
        tmp_path,
        "produce-transactional",
        bootstrap=broker.bootstrap_server,
        topic=topic,
        transactional_id="interop-tx",
        transactions=6,
        per_transaction=5,
        abort_every=3,
    )
    try:
        producer.wait(CLIENT_TIMEOUT_S)
    finally:
        producer.close()
    committed = {r["key"] for t in producer.events("committed") for r in t["records"]}
    aborted = {r["key"] for t in producer.events("aborted") for r in t["records"]}
    assert (len(committed), len(aborted)) == (20, 10)

    seen: dict[str, set[str]] = {}
    for isolation, expected in (("read_committed", committed), ("read_uncommitted", committed | aborted)):
        consumer = JAVA_CLIENTS.start(
            tmp_path,
            "consume",
            name=isolation,
            bootstrap=broker.bootstrap_server,
            topic=topic,
            group=f"g-{isolation}",
            isolation=isolation,
            idle_ms=5000,
        )
        try:
            consumer.wait(CLIENT_TIMEOUT_S)
        finally:
            consumer.close()
        seen[isolation] = {r["key"] for r in consumer.events("record")}
        assert seen[isolation] == expected, isolation
