"""The data plane through real clients: confluent-kafka (librdkafka) producing and consuming through the endpoint,
the same records read by pysparklog's own reader with the same offsets, keys, headers and timestamps, and the other
way round; and what a client cannot make happen through librdkafka (a corrupt batch, an exact long poll, every
ListOffsets variant) through the bare wire client."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.apis import served
from pysparklog.producer import Producer as LogProducer
from pysparklog.storage.log_dir import LogDirectory
from tests.conftest import BUCKET
from tests.endpoint.test_data_wire import write_transactions

TOPIC = "orders"
BASE_TIME_MS = 1_700_000_000_000
#: The API an idempotent producer asks its producer id with.
INIT_PRODUCER_ID = 22

Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]], int]
"""(partition, offset, key, value, headers, timestamp ms) of one record."""


def _confluent_producer(endpoint: Endpoint, **settings: Any) -> Producer:
    return Producer({"bootstrap.servers": endpoint.bootstrap, "linger.ms": 5, **settings})


def _consume(endpoint: Endpoint, partitions: list[TopicPartition], expected: int, **settings: Any) -> list[Record]:
    """``expected`` records read by a confluent-kafka consumer assigned ``partitions``, sorted."""
    consumer = Consumer(
        {"bootstrap.servers": endpoint.bootstrap, "group.id": "unused", "enable.auto.commit": False, **settings}
    )
    records: list[Record] = []
    try:
        consumer.assign(partitions)
        deadline = time.monotonic() + 20
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                continue
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            headers = cast("list[tuple[str, bytes]]", message.headers() or [])
            records.append((partition, offset, message.key(), message.value(), list(headers), message.timestamp()[1]))
    finally:
        consumer.close()
    return sorted(records)


def _stored(log_dir: LogDirectory, topic: str, partitions: int) -> list[Record]:
    """Every record of ``topic`` as pysparklog's own reader reads it from the log directory, sorted."""
    records: list[Record] = []
    for partition in range(partitions):
        with log_dir.partition(topic, partition) as log:
            for batch in log.read_arrow(include_headers=True):
                for row in batch.to_pylist():
                    headers = [(h["key"], h["value"]) for h in row["headers"] or []]
                    stamp = int(row["timestamp"].timestamp() * 1000)
                    records.append((partition, row["offset"], row["key"], row["value"], headers, stamp))
    return sorted(records)


def test_librdkafka_producing_to_a_new_topic_creates_it_with_num_partitions(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.storage.put(log_dir.storage.join("server.properties"), b"num.partitions=2\n")
    producer = _confluent_producer(endpoint)
    for i in range(10):
        producer.produce("fresh", key=b"key-%d" % i, value=b"value-%d" % i)
    assert producer.flush(20) == 0
    assert log_dir.topics.get("fresh").partitions == 2
    assert sorted(r[3] or b"" for r in _stored(log_dir, "fresh", 2)) == sorted(b"value-%d" % i for i in range(10))


def test_librdkafka_producing_to_a_new_topic_is_refused_when_server_properties_turns_creation_off(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.storage.put(log_dir.storage.join("server.properties"), b"auto.create.topics.enable=false\n")
    errors: list[KafkaError | None] = []
    producer = _confluent_producer(endpoint, **{"topic.metadata.propagation.max.ms": 1000})
    producer.produce("fresh", value=b"v", on_delivery=lambda error, _message: errors.append(error))
    assert producer.flush(20) == 0
    assert [None if error is None else error.code() for error in errors] in (
        [KafkaError.UNKNOWN_TOPIC_OR_PART],
        [KafkaError._UNKNOWN_TOPIC],
    ), errors
    assert "fresh" not in log_dir.topics.names()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_produced_by_librdkafka_are_read_alike_by_pysparklog_and_by_librdkafka(
    endpoint: Endpoint, log_dir: LogDirectory, codec: str
) -> None:
    log_dir.topics.create(TOPIC, 3)
    producer = _confluent_producer(endpoint, **{"compression.type": codec})
    for i in range(60):
        producer.produce(
            TOPIC,
            key=b"key-%d" % i,
            value=b"value-%d" % i if i % 7 else None,
            partition=i % 3,
            headers=[("index", str(i).encode()), ("codec", codec.encode())],
            timestamp=BASE_TIME_MS + i,
        )
    assert producer.flush(10) == 0

    stored = _stored(log_dir, TOPIC, 3)
    assert [(r[0], r[1]) for r in stored] == [(p, o) for p in range(3) for o in range(20)]
    assert {(r[2], r[3], r[5]) for r in stored} == {
        (b"key-%d" % i, b"value-%d" % i if i % 7 else None, BASE_TIME_MS + i) for i in range(60)
    }
    consumed = _consume(endpoint, [TopicPartition(TOPIC, p, 0) for p in range(3)], 60)
    assert consumed == stored


def test_records_appended_by_pysparklog_are_read_by_librdkafka(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 2)
    with LogProducer(log_dir) as producer:
        for i in range(40):
            producer.send(
                TOPIC,
                value=b"value-%d" % i,
                key=b"key-%d" % i,
                headers=[("index", str(i).encode())],
                partition=i % 2,
                timestamp_ms=BASE_TIME_MS + i,
            )
    consumed = _consume(endpoint, [TopicPartition(TOPIC, p, 0) for p in range(2)], 40)
    assert consumed == _stored(log_dir, TOPIC, 2)
    assert len(consumed) == 40


def test_a_read_committed_librdkafka_consumer_gets_what_pysparklog_reads_committed(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    """Transactions written by pysparklog's producer (committed, aborted, one left open) read through the endpoint by
    librdkafka with isolation.level=read_committed: the committed records only, up to the open transaction."""
    log_dir.topics.create(TOPIC, 1)
    write_transactions(log_dir)
    with log_dir.partition(TOPIC, 0) as log:
        expected = [
            row["value"] for batch in log.read_arrow(isolation_level="read_committed") for row in batch.to_pylist()
        ]
    assert expected == [b"c1", b"c2", b"c3"]
    consumed = _consume(endpoint, [TopicPartition(TOPIC, 0, 0)], 3, **{"isolation.level": "read_committed"})
    assert [r[3] for r in consumed] == expected
    uncommitted = _consume(endpoint, [TopicPartition(TOPIC, 0, 0)], 6, **{"isolation.level": "read_uncommitted"})
    assert [r[3] for r in uncommitted] == [b"c1", b"c2", b"a1", b"a2", b"c3", b"open"]


def test_a_consumer_starting_past_the_log_start_reads_from_there(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1)
    with LogProducer(log_dir) as producer:
        for i in range(10):
            producer.send(TOPIC, value=b"%d" % i, partition=0)
    consumed = _consume(endpoint, [TopicPartition(TOPIC, 0, 7)], 3)
    assert [(r[1], r[3]) for r in consumed] == [(7, b"7"), (8, b"8"), (9, b"9")]


def test_librdkafka_resets_an_out_of_range_position_and_finds_offsets_by_time(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    """OFFSET_OUT_OF_RANGE makes the consumer reset by auto.offset.reset, which it looks up with ListOffsets, as
    it does offsets_for_times and the watermarks."""
    log_dir.topics.create(TOPIC, 1)
    with LogProducer(log_dir) as producer:
        for i in range(10):
            producer.send(TOPIC, value=b"%d" % i, partition=0, timestamp_ms=BASE_TIME_MS + 10 * i)
    reset = _consume(endpoint, [TopicPartition(TOPIC, 0, 100)], 10, **{"auto.offset.reset": "earliest"})
    assert [r[1] for r in reset] == list(range(10))
    consumer = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition(TOPIC, 0, BASE_TIME_MS + 35)], timeout=10)
        past = consumer.offsets_for_times([TopicPartition(TOPIC, 0, BASE_TIME_MS + 1000)], timeout=10)
    finally:
        consumer.close()
    assert [(tp.offset, tp.error) for tp in found] == [(4, None)]
    assert [tp.offset for tp in past] == [-1]  # no record that late: the end, as librdkafka reports it


def test_a_long_poll_is_woken_by_an_append_from_another_process(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    """The consumer waits up to 10 s for records (fetch.wait.max.ms); another process appends after it started
    waiting, and the record arrives within a poll of the log end, long before the wait ends."""
    log_dir.topics.create(TOPIC, 1)
    consumer = Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10_000,
            "socket.timeout.ms": 30_000,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        assert consumer.poll(1.0) is None  # its fetch is waiting at the endpoint now
        script = (
            "import sys, time\n"
            "from pysparklog.producer import Producer\n"
            "with Producer(sys.argv[1]) as p:\n"
            "    p.send('orders', value=b'from-another-process', partition=0)\n"
            "print(time.monotonic(), flush=True)\n"
        )
        appended = subprocess.run(
            [sys.executable, "-c", script, log_dir.path], capture_output=True, text=True, check=True, timeout=60
        )
        appended_at = float(appended.stdout)
        message = consumer.poll(8.0)
        received_at = time.monotonic()
    finally:
        consumer.close()
    assert message is not None and message.error() is None
    assert message.value() == b"from-another-process"
    assert received_at - appended_at < 2.0, "the fetch waited out its max wait instead of seeing the append"


def test_two_endpoints_of_one_log_directory_serve_one_log(log_dir: LogDirectory) -> None:
    """Records produced through one endpoint are consumed through another, each answering as the leader of every
    partition; the second endpoint's consumer sees them within a poll of the log ends."""
    log_dir.topics.create(TOPIC, 2)
    with Endpoint(log_dir, EndpointConfig(port=0)) as first, Endpoint(log_dir, EndpointConfig(port=0)) as second:
        consumer = Consumer(
            {
                "bootstrap.servers": second.bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10_000,
            }
        )
        try:
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
            assert consumer.poll(1.0) is None
            producer = _confluent_producer(first)
            for i in range(10):
                producer.produce(TOPIC, value=b"%d" % i, partition=i % 2)
            assert producer.flush(10) == 0
            received: list[bytes | None] = []
            deadline = time.monotonic() + 5
            while len(received) < 10 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    received.append(message.value())
        finally:
            consumer.close()
    assert sorted(value or b"" for value in received) == sorted(b"%d" % i for i in range(10))


def test_produce_and_consume_through_an_endpoint_over_an_object_store(s3_endpoint: str, tmp_path: Path) -> None:
    """The same round trip with the log directory on S3 (the moto server): a topic's partitions are appended in one
    commit, and the records read back through the endpoint are those pysparklog reads from the store."""
    log_dir = LogDirectory(f"s3://{BUCKET}{tmp_path}/logs")
    log_dir.topics.create(TOPIC, 2)
    with Endpoint(log_dir, EndpointConfig(port=0)) as endpoint:
        producer = _confluent_producer(endpoint, **{"compression.type": "zstd", "linger.ms": 50})
        for i in range(40):
            producer.produce(
                TOPIC, key=b"key-%d" % i, value=b"value-%d" % i, partition=i % 2, timestamp=BASE_TIME_MS + i
            )
        assert producer.flush(30) == 0
        consumed = _consume(endpoint, [TopicPartition(TOPIC, p, 0) for p in range(2)], 40)
        assert len(consumed) == 40
        assert consumed == _stored(LogDirectory(f"s3://{BUCKET}{tmp_path}/logs"), TOPIC, 2)
        # A consumer waiting at the log end sees a commit made by another writer within a poll of the chain.
        consumer = Consumer(
            {
                "bootstrap.servers": endpoint.bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10_000,
            }
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 20)])
            assert consumer.poll(1.0) is None
            with LogProducer(LogDirectory(f"s3://{BUCKET}{tmp_path}/logs")) as other_writer:
                other_writer.send(TOPIC, value=b"committed elsewhere", partition=0)
            appended_at = time.monotonic()
            message = consumer.poll(8.0)
            received_at = time.monotonic()
        finally:
            consumer.close()
    assert message is not None and message.error() is None and message.offset() == 20
    assert received_at - appended_at < 3.0, "the fetch waited out its max wait instead of seeing the commit"


@pytest.mark.skipif(INIT_PRODUCER_ID not in served(), reason="InitProducerId (the transactions family) is not served")
def test_an_idempotent_librdkafka_producer_writes_each_record_once(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 2)
    producer = _confluent_producer(endpoint, **{"enable.idempotence": True, "compression.type": "lz4"})
    for i in range(200):
        producer.produce(TOPIC, key=b"key-%d" % i, value=b"value-%d" % i, partition=i % 2)
        if i % 50 == 0:
            producer.poll(0)
    assert producer.flush(20) == 0
    stored = _stored(log_dir, TOPIC, 2)
    assert sorted(r[3] or b"" for r in stored) == sorted(b"value-%d" % i for i in range(200))
    assert _consume(endpoint, [TopicPartition(TOPIC, p, 0) for p in range(2)], 200) == stored
