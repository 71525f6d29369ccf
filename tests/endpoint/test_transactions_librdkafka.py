"""Transactions through the endpoint as a librdkafka (confluent-kafka) user writes them: commits and aborts over
several partitions read alike by a read_committed consumer of the endpoint, pysparklog's own reader and its Python
consumer; a second producer of the transactional id fencing the first; a transaction left open past its timeout
aborted by the endpoint; and a consume-transform-produce loop whose offsets commit with its transaction."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from pysparklog import Consumer as LogConsumer
from pysparklog import ConsumerConfig
from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.apis.transactions import ADD_PARTITIONS_TO_TXN, END_TXN
from pysparklog.offsets import OffsetStore
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.transaction_index import READ_COMMITTED
from pysparklog.structs import OffsetAndMetadata
from pysparklog.structs import TopicPartition as LogTopicPartition
from tests.conftest import BUCKET
from tests.endpoint.lossy_proxy import LossyProxy

TOPIC = "ledger"
OUTPUT = "ledger-out"
GROUP = "reconciler"
PARTITIONS = 3
TIMEOUT_S = 20


def _producer(endpoint: Endpoint, transactional_id: str, **settings: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": endpoint.bootstrap, "transactional.id": transactional_id, "linger.ms": 1, **settings}
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def _transaction(producer: Producer, values: list[bytes], *, commit: bool) -> None:
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % PARTITIONS)
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.abort_transaction(TIMEOUT_S)


def _read_committed_through_endpoint(endpoint: Endpoint, topic: str = TOPIC) -> list[bytes]:
    """Every record a read_committed librdkafka consumer assigned all partitions reads up to their ends."""
    consumer = Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        ends = 0
        deadline = time.monotonic() + TIMEOUT_S
        while ends < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                ends += 1
                continue
            value = message.value()
            assert value is not None
            values.append(value)
        assert ends == PARTITIONS, "the consumer did not reach every partition's end"
    finally:
        consumer.close()
    return sorted(values)


def _read_committed_from_directory(log_dir: LogDirectory, topic: str = TOPIC) -> list[bytes]:
    values: list[bytes] = []
    for partition in range(PARTITIONS):
        with log_dir.partition(topic, partition) as log:
            values += [v for b in log.read_arrow(isolation_level=READ_COMMITTED) for v in b.column("value").to_pylist()]
    return sorted(values)


def _read_with_pysparklogs_consumer(log_dir: LogDirectory, expected: int) -> list[bytes]:
    config = ConsumerConfig.from_properties(
        {"group.id": "auditor", "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    )
    values: list[bytes] = []
    with LogConsumer(log_dir, config) as consumer:
        consumer.assign([LogTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        for _ in range(50):
            values += [r.value for r in consumer.poll(timeout_ms=100) if r.value is not None]
            if len(values) >= expected:
                break
    return sorted(values)


@pytest.fixture
def topic(log_dir: LogDirectory) -> str:
    log_dir.topics.create(TOPIC, PARTITIONS)
    return TOPIC


def _commit_abort_commit(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    """Three transactions over every partition, the second aborted: only the others' records are read, alike by a
    read_committed consumer of the endpoint, pysparklog's reader and its Python consumer."""
    producer = _producer(endpoint, "ledger-writer")
    committed = [f"committed-{i}".encode() for i in range(30)]
    _transaction(producer, committed[:15], commit=True)
    _transaction(producer, [f"aborted-{i}".encode() for i in range(15)], commit=False)
    _transaction(producer, committed[15:], commit=True)
    assert _read_committed_through_endpoint(endpoint) == sorted(committed)
    assert _read_committed_from_directory(log_dir) == sorted(committed)
    assert _read_with_pysparklogs_consumer(log_dir, len(committed)) == sorted(committed)


def test_committed_transactions_are_read_and_aborted_ones_are_not_through_every_door(
    endpoint: Endpoint, log_dir: LogDirectory, topic: str
) -> None:
    _commit_abort_commit(endpoint, log_dir)


def test_transactions_on_an_object_store(s3_endpoint: str, tmp_path: Path) -> None:
    log_dir = LogDirectory(f"s3://{BUCKET}{tmp_path}/logs")
    log_dir.topics.create(TOPIC, PARTITIONS)
    with Endpoint(log_dir, EndpointConfig(port=0)) as endpoint:
        _commit_abort_commit(endpoint, log_dir)


def test_a_second_producer_of_the_transactional_id_fences_the_first_through_another_endpoint(
    endpoint: Endpoint, log_dir: LogDirectory, topic: str
) -> None:
    """Each endpoint coordinates the id it is asked about (FindCoordinator answers with itself): two endpoints of one
    log directory agree through the id's state file."""
    first = _producer(endpoint, "ledger-writer")
    first.begin_transaction()
    first.produce(TOPIC, b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    with Endpoint(log_dir, EndpointConfig(port=0)) as other:
        second = _producer(other, "ledger-writer")  # aborts the first's transaction
        _transaction(second, [b"survivor"], commit=True)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal(), raised.value
    assert raised.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    assert _read_committed_through_endpoint(endpoint) == [b"survivor"]
    assert _read_committed_from_directory(log_dir) == [b"survivor"]


def test_a_transaction_left_open_past_its_timeout_is_aborted_by_the_endpoint(tmp_path: Path) -> None:
    log_dir = LogDirectory(str(tmp_path / "logs"))
    log_dir.topics.create(TOPIC, PARTITIONS)
    (tmp_path / "logs" / "server.properties").write_text(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n"
    )
    with Endpoint(log_dir, EndpointConfig(port=0)) as endpoint:
        producer = _producer(endpoint, "stalled-writer", **{"transaction.timeout.ms": 2000})
        producer.begin_transaction()
        producer.produce(TOPIC, b"stalled", partition=1)
        producer.flush(TIMEOUT_S)
        with log_dir.partition(TOPIC, 1) as log:
            assert log.last_stable_offset == 0  # held open by the transaction
            deadline = time.monotonic() + TIMEOUT_S
            while log.last_stable_offset < log.log_end_offset:  # until the endpoint's ABORT marker closes it
                assert time.monotonic() < deadline, "the transaction was not aborted past its timeout"
                time.sleep(0.1)
        with pytest.raises(KafkaException):
            producer.commit_transaction(TIMEOUT_S)
        assert _read_committed_through_endpoint(endpoint) == []
    assert _read_committed_from_directory(log_dir) == []


@pytest.mark.parametrize("commit", [True, False])
def test_send_offsets_to_transaction_commits_the_groups_offsets_with_the_transaction(
    endpoint: Endpoint, log_dir: LogDirectory, topic: str, commit: bool
) -> None:
    """Consume-transform-produce: the input's offsets go with the output's transaction, so the group resumes after
    what was committed and at the same place as before an aborted one."""
    log_dir.topics.create(OUTPUT, PARTITIONS)
    seed = Producer({"bootstrap.servers": endpoint.bootstrap})
    for i in range(9):
        seed.produce(TOPIC, f"input-{i}".encode(), partition=i % PARTITIONS)
    assert seed.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = _producer(endpoint, "reconciler-1")
    try:
        consumer.subscribe([TOPIC])
        consumed: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(consumed) < 9 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed.append(message)
        assert len(consumed) == 9
        producer.begin_transaction()
        for message in consumed:
            producer.produce(OUTPUT, message.value().upper(), partition=message.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), TIMEOUT_S
        )
        with OffsetStore(log_dir) as offsets:
            assert offsets.committed(GROUP) == {}  # held until the transaction ends
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
    finally:
        consumer.close()
    expected = {LogTopicPartition(TOPIC, p): OffsetAndMetadata(3) for p in range(PARTITIONS)}
    with OffsetStore(log_dir) as offsets:
        assert {tp: OffsetAndMetadata(o.offset) for tp, o in offsets.committed(GROUP).items()} == (
            expected if commit else {}
        )
    # The group's coordinator answers OffsetFetch with them too: where the next member of the group resumes.
    fetcher = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        resumed = fetcher.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], TIMEOUT_S)
    finally:
        fetcher.close()
    assert [tp.offset for tp in resumed] == [3 if commit else OFFSET_INVALID] * PARTITIONS
    outputs = sorted(f"INPUT-{i}".encode() for i in range(9))
    assert _read_committed_from_directory(log_dir, OUTPUT) == (outputs if commit else [])


def test_concurrent_transactional_producers_on_shared_partitions(
    endpoint: Endpoint, log_dir: LogDirectory, topic: str
) -> None:
    """Four producers, each on a thread of its own, commit and abort transactions over the same partitions: the
    coordinator's markers and the data plane's appends interleave on each partition, and read_committed readers get
    exactly the committed transactions' records."""
    committed: list[bytes] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def run(writer: int) -> None:
        try:
            producer = _producer(endpoint, f"writer-{writer}")
            for round_ in range(4):
                values = [f"w{writer}-r{round_}-{i}".encode() for i in range(12)]
                _transaction(producer, values, commit=round_ % 2 == 0)
                if round_ % 2 == 0:
                    with lock:
                        committed.extend(values)
        except BaseException as error:  # handed to the test's thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(writer,)) for writer in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert _read_committed_through_endpoint(endpoint) == sorted(committed)
    assert _read_committed_from_directory(log_dir) == sorted(committed)


def _serve_in_subprocess(log_dir: LogDirectory) -> tuple[subprocess.Popen[str], str]:
    """``pysparklog serve`` in a process of its own on a free port, and its ``host:port`` once it listens."""
    server = subprocess.Popen(
        [sys.executable, "-m", "pysparklog.cli.main", "serve", "--log-dir", log_dir.path, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line.startswith("serving "), line
    return server, line.split(" as ")[-1].strip()


def _commit_as_a_user_does(producer: Producer, values: list[bytes]) -> None:
    """One transaction of ``values``, begun again after an abortable error and its commit retried after a retriable
    one, as confluent-kafka's documentation tells a user to."""
    for _attempt in range(10):
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(TOPIC, value, partition=i % PARTITIONS)
        try:
            for _retry in range(10):
                try:
                    producer.commit_transaction(TIMEOUT_S)
                    return
                except KafkaException as error:
                    if not error.args[0].retriable():
                        raise
        except KafkaException as error:
            if not error.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(TIMEOUT_S)
    raise AssertionError("the transaction never committed")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_transactions_go_on_through_the_other_endpoint_when_one_is_killed(log_dir: LogDirectory, topic: str) -> None:
    """Two endpoints of one log directory: the producer's transactions start on the only one up, a process then
    killed with -9 while the other has started; the producer finds the survivor (FindCoordinator answers with the
    endpoint asked), which takes the transactional id's state over, and every committed transaction is read once."""
    server, address = _serve_in_subprocess(log_dir)
    survivor_port = _free_port()
    try:
        producer = Producer(
            {
                "bootstrap.servers": f"{address},127.0.0.1:{survivor_port}",
                "transactional.id": "resilient",
                "linger.ms": 1,
                "retry.backoff.ms": 50,
            }
        )
        producer.init_transactions(TIMEOUT_S)  # coordinated by the process: the other endpoint is not up yet
        batches = [[f"t{t}-{i}".encode() for i in range(9)] for t in range(4)]
        _commit_as_a_user_does(producer, batches[0])
        _transaction(producer, [b"aborted"] * 6, commit=False)
        producer.begin_transaction()
        for i, value in enumerate(batches[1]):
            producer.produce(TOPIC, value, partition=i % PARTITIONS)
        producer.flush(TIMEOUT_S)
        with Endpoint(log_dir, EndpointConfig(port=survivor_port)) as survivor:
            server.kill()  # with a transaction open
            server.wait()
            producer.commit_transaction(TIMEOUT_S)
            for values in batches[2:]:
                _commit_as_a_user_does(producer, values)
            expected = sorted(v for values in batches for v in values)
            assert _read_committed_through_endpoint(survivor) == expected
        assert _read_committed_from_directory(log_dir) == expected
    finally:
        server.kill()
        server.wait()
        assert server.stdout is not None
        server.stdout.close()


@pytest.mark.parametrize("api_key", [ADD_PARTITIONS_TO_TXN, END_TXN], ids=["AddPartitionsToTxn", "EndTxn"])
def test_lost_answers_of_the_coordinator_are_asked_again_without_harm(log_dir: LogDirectory, api_key: int) -> None:
    """Every other answer of AddPartitionsToTxn or EndTxn lost on the way back (the request was served): librdkafka
    sends it again on a new connection, and the coordinator answers the repeat as done."""
    log_dir.topics.create(TOPIC, PARTITIONS)
    with LossyProxy(api_key, every=2, limit=2) as proxy:
        with Endpoint(log_dir, EndpointConfig(port=0, advertised_port=proxy.port)) as endpoint:
            proxy.forward_to(f"127.0.0.1:{endpoint.port}")
            producer = _producer(endpoint, "unlucky")
            batches = [[f"t{t}-{i}".encode() for i in range(6)] for t in range(4)]
            for values in batches:
                _commit_as_a_user_does(producer, values)
            assert proxy.lost == 2
            assert _read_committed_through_endpoint(endpoint) == sorted(v for values in batches for v in values)
