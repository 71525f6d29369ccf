"""The clients and the CLI with their log directory on an object store (``s3://`` on the loopback S3 server): the
producer (idempotent and transactional), consumer groups with committed offsets in ``__consumer_offsets``, and the
Kafka-shaped commands, unchanged but for the URL."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import Consumer, ConsumerConfig, LogDirectory, OffsetStore, TopicPartition
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.objects.log import ObjectPartitionLog
from tests.cli.test_console import cli
from tests.conftest import BUCKET

RECORDS = 120


@pytest.fixture
def url(s3_endpoint: str, tmp_path: Path) -> str:
    return f"s3://{BUCKET}{tmp_path}/logs"


def _consume_all(url: str, group: str, expected: int, polls: int = 50) -> list[tuple[bytes | None, bytes | None]]:
    config = ConsumerConfig.from_properties({"group.id": group, "auto.offset.reset": "earliest"})
    records: list[tuple[bytes | None, bytes | None]] = []
    with Consumer(url, config) as consumer:
        consumer.subscribe(["orders"])
        for _ in range(polls):
            records += [(r.key, r.value) for r in consumer.poll(timeout_ms=200)]
            if len(records) >= expected:
                break
        consumer.commit()
    return records


def test_a_producer_and_a_consumer_group_on_an_object_store(url: str) -> None:
    LogDirectory(url).topics.create("orders", 3)
    sent = [(f"k{i % 10}".encode(), f"v{i}".encode()) for i in range(RECORDS)]
    with Producer(url, ProducerConfig.from_properties({"linger.ms": "20"})) as producer:
        futures = [producer.send("orders", value, key=key) for key, value in sent]
        offsets = [future.get(timeout=60) for future in futures]
    assert all(m.offset >= 0 for m in offsets)
    assert isinstance(LogDirectory(url).partition("orders", 0), ObjectPartitionLog)
    assert sorted(_consume_all(url, "billing", RECORDS)) == sorted(sent)
    assert _consume_all(url, "billing", 1, polls=3) == [], "the group goes on from its committed offsets"
    with OffsetStore(url) as store:
        committed = store.committed("billing", [TopicPartition("orders", p) for p in range(3)])
    ends = [LogDirectory(url).partition("orders", p).log_end_offset for p in range(3)]
    assert [committed[TopicPartition("orders", p)].offset for p in range(3)] == ends


def test_a_transactional_producer_on_an_object_store(url: str) -> None:
    LogDirectory(url).topics.create("orders", 2)
    with Producer(url, ProducerConfig.from_properties({"transactional.id": "tx"})) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send_arrow("orders", pa.table({"key": [b"a", b"b"], "value": [b"aborted-1", b"aborted-2"]}))
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send_arrow("orders", pa.table({"key": [b"a", b"b"], "value": [b"committed-1", b"committed-2"]}))
        producer.commit_transaction()
    config = ConsumerConfig.from_properties(
        {"group.id": "reader", "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    )
    with Consumer(url, config) as consumer:
        consumer.subscribe(["orders"])
        values = sorted(r.value or b"" for _ in range(10) for r in consumer.poll(timeout_ms=200))
    assert values == [b"committed-1", b"committed-2"]


def test_the_cli_on_an_object_store(url: str) -> None:
    def run(*args: str, stdin: bytes = b"") -> str:
        proc = cli(*args, stdin=stdin)
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stdout.decode()

    run("topics", "--log-dir", url, "--create", "--topic", "orders", "--partitions", "2")
    assert "PartitionCount: 2" in run("topics", "--log-dir", url, "--describe", "--topic", "orders")
    lines = b"".join(f"k{i}\tv{i}\n".encode() for i in range(20))
    run("console-producer", "--log-dir", url, "--topic", "orders", "--property", "parse.key=true", stdin=lines)
    out = run(
        "console-consumer",
        "--log-dir",
        url,
        "--topic",
        "orders",
        "--from-beginning",
        "--group",
        "g",
        "--timeout-ms",
        "2000",
    )
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(20))
    described = run("consumer-groups", "--log-dir", url, "--describe", "--group", "g")
    assert "orders" in described and described.count(" 0 ") >= 1  # lag 0 on the partitions
    assert os.environ.get("AWS_ENDPOINT_URL"), "the commands found the server from the environment"


def test_console_producer_creates_a_missing_topic_on_an_object_store(url: str) -> None:
    storage = LogDirectory(url).storage
    storage.put(storage.join("server.properties"), b"num.partitions=2\n")
    proc = cli("console-producer", "--log-dir", url, "--topic", "fresh", stdin=b"a\nb\n")
    assert (proc.returncode, proc.stderr) == (0, b"")
    logs = LogDirectory(url)
    assert logs.topics.get("fresh").partitions == 2
    assert sum(logs.partition("fresh", p).log_end_offset for p in range(2)) == 2
