"""The admin APIs through confluent-kafka's ``AdminClient`` (librdkafka), called as a user calls it: topics created,
grown, configured, trimmed and deleted through the endpoint, each change checked in the log directory with the engine
and with ``pysparklog topics --describe``; and once on an object store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

# Where confluent-kafka defines them: its admin module re-exports them without declaring it, which strict mypy refuses.
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from confluent_kafka.cimpl import NewPartitions, NewTopic

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.storage.log_dir import LogDirectory
from tests.cli.test_console import cli
from tests.conftest import BUCKET, keyed_table

TIMEOUT_S = 30


def _admin(endpoint: Endpoint) -> AdminClient:
    return AdminClient({"bootstrap.servers": endpoint.bootstrap})


def _outcome(future: Any) -> Any:
    """The future's result, or the Kafka error it failed with."""
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as error:
        return error.args[0]


def _error_of(future: Any) -> KafkaError:
    error = _outcome(future)
    assert isinstance(error, KafkaError), f"expected an error, got {error!r}"
    return error


def _describe_cli(log_dir: str, topic: str) -> str:
    proc = cli("topics", "--log-dir", log_dir, "--describe", "--topic", topic)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_topics_created_grown_and_deleted_by_the_admin_client(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    admin = _admin(endpoint)
    created = admin.create_topics(
        [
            NewTopic("orders", num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"}),
            NewTopic("defaulted"),
            NewTopic("replicated", num_partitions=1, replication_factor=3),
        ]
    )
    assert _outcome(created["orders"]) is None and _outcome(created["defaulted"]) is None
    refused = _error_of(created["replicated"])
    assert refused.code() == KafkaError.INVALID_REPLICATION_FACTOR and "one copy" in refused.str()
    assert _error_of(admin.create_topics([NewTopic("orders", 1)])["orders"]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    orders = log_dir.topics.get("orders")
    assert (orders.partitions, dict(orders.configs)) == (3, {"retention.ms": "3600000"})
    assert log_dir.topics.get("defaulted").partitions == 1
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000" in _describe_cli(
        log_dir.path, "orders"
    )

    assert _outcome(admin.create_partitions([NewPartitions("orders", 5)])["orders"]) is None
    fewer = _error_of(admin.create_partitions([NewPartitions("orders", 2)])["orders"])
    assert fewer.code() == KafkaError.INVALID_PARTITIONS
    assert log_dir.topics.get("orders").partitions == 5
    assert "PartitionCount: 5" in _describe_cli(log_dir.path, "orders")

    assert _outcome(admin.create_topics([NewTopic("checked", 2)], validate_only=True)["checked"]) is None
    assert "checked" not in log_dir.topics.names()

    deleted = admin.delete_topics(["defaulted", "missing"])
    assert _outcome(deleted["defaulted"]) is None
    assert _error_of(deleted["missing"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert log_dir.topics.names() == ["orders"]


def test_configs_described_and_altered_by_the_admin_client(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create("orders", 1, {"segment.ms": "60000"})
    admin = _admin(endpoint)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    configs = _outcome(admin.describe_configs([topic])[topic])
    assert configs["segment.ms"].value == "60000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.ms"].value == "604800000"

    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    assert _outcome(admin.incremental_alter_configs([change])[change]) is None
    assert dict(log_dir.topics.get("orders").configs) == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    assert "Configs: cleanup.policy=delete,compact,retention.ms=1000" in _describe_cli(log_dir.path, "orders")

    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        "orders",
        incremental_configs=[ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)],
    )
    refused = _error_of(admin.incremental_alter_configs([bad])[bad])
    assert refused.code() == KafkaError.INVALID_CONFIG and "retention.ms" in refused.str()
    assert log_dir.topics.get("orders").configs["retention.ms"] == "1000"

    assert endpoint.state is not None
    broker = ConfigResource(ConfigResource.Type.BROKER, str(endpoint.state.node_id))
    broker_configs = _outcome(admin.describe_configs([broker])[broker])
    assert broker_configs["log.retention.hours"].value == "168"
    assert broker_configs["log.retention.hours"].is_read_only


def test_records_deleted_by_the_admin_client(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create("events", 2)
    log_dir.topics.create("compacted", 1, {"cleanup.policy": "compact"})
    for topic, partition in (("events", 0), ("events", 1), ("compacted", 0)):
        with log_dir.partition(topic, partition) as log:
            log.append_arrow(keyed_table(10))
    admin = _admin(endpoint)
    results = admin.delete_records(
        [TopicPartition("events", 0, 4), TopicPartition("events", 1, -1), TopicPartition("compacted", 0, 3)]
    )
    outcomes = {(tp.topic, tp.partition): _outcome(future) for tp, future in results.items()}
    assert outcomes[("events", 0)].low_watermark == 4
    assert outcomes[("events", 1)].low_watermark == 10
    assert outcomes[("compacted", 0)].code() == KafkaError.POLICY_VIOLATION
    past_the_end = admin.delete_records([TopicPartition("events", 0, 11)])
    assert _error_of(next(iter(past_the_end.values()))).code() == KafkaError.OFFSET_OUT_OF_RANGE
    with log_dir.partition("events", 0) as log:
        assert log.log_start_offset == 4
    with log_dir.partition("compacted", 0) as log:
        assert log.log_start_offset == 0


@pytest.fixture
def s3_endpoint_of(s3_endpoint: str, tmp_path: Path) -> Iterator[tuple[Endpoint, str]]:
    """An endpoint serving a log directory on the moto S3 server, and the directory's URL."""
    url = f"s3://{BUCKET}{tmp_path}/logs"
    with Endpoint(url, EndpointConfig(port=0)) as started:
        yield started, url


def test_topics_and_configs_on_an_object_store(s3_endpoint_of: tuple[Endpoint, str]) -> None:
    endpoint, url = s3_endpoint_of
    admin = _admin(endpoint)
    created = admin.create_topics([NewTopic("orders", num_partitions=2, config={"retention.ms": "60000"})])
    assert _outcome(created["orders"]) is None
    assert _outcome(admin.create_partitions([NewPartitions("orders", 3)])["orders"]) is None
    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        "orders",
        incremental_configs=[ConfigEntry("segment.ms", "5000", incremental_operation=AlterConfigOpType.SET)],
    )
    assert _outcome(admin.incremental_alter_configs([change])[change]) is None
    logs = LogDirectory(url)
    with logs.partition("orders", 2) as log:
        log.append_arrow(keyed_table(5))
    deleted = admin.delete_records([TopicPartition("orders", 2, 3)])
    assert _outcome(next(iter(deleted.values()))).low_watermark == 3
    orders = logs.topics.get("orders")
    assert (orders.partitions, dict(orders.configs)) == (3, {"retention.ms": "60000", "segment.ms": "5000"})
    assert "PartitionCount: 3" in _describe_cli(url, "orders")
    with logs.partition("orders", 2) as log:
        assert log.log_start_offset == 3
    assert _outcome(admin.delete_topics(["orders"])["orders"]) is None
    assert LogDirectory(url).topics.names() == []


def test_two_endpoints_creating_one_topic_at_once_create_it_once(log_dir: LogDirectory) -> None:
    """Endpoints share the log directory's topic metadata (changed under its lock): of two creations of one topic
    racing through two endpoints, one succeeds and the other finds it exists, whichever wins."""
    with (
        Endpoint(log_dir.path, EndpointConfig(port=0)) as first,
        Endpoint(log_dir.path, EndpointConfig(port=0)) as other,
    ):
        admins = [_admin(first), _admin(other)]
        rounds = 5
        for index in range(rounds):
            name = f"raced-{index}"
            futures = [admin.create_topics([NewTopic(name, num_partitions=2)])[name] for admin in admins]
            outcomes = [_outcome(future) for future in futures]
            assert sorted(repr(o.code()) if isinstance(o, KafkaError) else "created" for o in outcomes) == [
                repr(KafkaError.TOPIC_ALREADY_EXISTS),
                "created",
            ]
        assert log_dir.topics.names() == [f"raced-{index}" for index in range(rounds)]


def _produce(endpoint: Endpoint, topic: str, partition: int, count: int) -> list[int]:
    """``count`` records produced by librdkafka to one partition; their offsets."""
    producer = Producer({"bootstrap.servers": endpoint.bootstrap, "linger.ms": 5})
    offsets: list[int] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        offset = message.offset()
        assert error is None and offset is not None, error
        offsets.append(offset)

    for index in range(count):
        producer.produce(topic, value=f"v{index}".encode(), partition=partition, on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    return offsets


def _first_offset(endpoint: Endpoint, topic: str, partition: int) -> int:
    """The offset of the first record librdkafka reads from the partition's beginning."""
    consumer = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        for _ in range(100):
            message = consumer.poll(0.2)
            offset = None if message is None or message.error() is not None else message.offset()
            if offset is not None:
                return offset
        raise AssertionError(f"nothing read from {topic}-{partition}")
    finally:
        consumer.close()


def test_admin_changes_reach_the_produce_and_fetch_of_the_same_endpoint(endpoint: Endpoint) -> None:
    """The data plane keeps partition logs open: records deleted, partitions added and a topic deleted and created
    again through the admin APIs are what its produces and fetches see next."""
    admin = _admin(endpoint)
    assert _outcome(admin.create_topics([NewTopic("orders", num_partitions=1)])["orders"]) is None
    assert _produce(endpoint, "orders", 0, 10) == list(range(10))
    assert _first_offset(endpoint, "orders", 0) == 0
    assert (
        _outcome(admin.delete_records([TopicPartition("orders", 0, 4)])[TopicPartition("orders", 0, 4)]).low_watermark
        == 4
    )
    assert _first_offset(endpoint, "orders", 0) == 4

    assert _outcome(admin.create_partitions([NewPartitions("orders", 2)])["orders"]) is None
    assert _produce(endpoint, "orders", 1, 3) == [0, 1, 2]

    assert _outcome(admin.delete_topics(["orders"])["orders"]) is None
    assert _outcome(admin.create_topics([NewTopic("orders", num_partitions=1)])["orders"]) is None
    assert _produce(endpoint, "orders", 0, 2) == [0, 1]
    assert _first_offset(endpoint, "orders", 0) == 0
