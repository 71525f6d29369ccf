"""Issue 23's done-means with real clients: Java's kafka-clients 4.2 (idempotent, transactional with read_committed,
a group of three with a member joining and one leaving), kcat and confluent-kafka, each against two
``pysparklog serve`` processes serving one log directory, the endpoint that coordinates the group (or that the
producer writes through) killed with SIGKILL midway: nothing acknowledged lost, nothing duplicated for the
idempotent producer, the group rebalances and continues from its committed offsets. And one log, every door: what
Java writes through an endpoint, pysparklog's Consumer and CLI read with the same offsets, keys, headers and
timestamps, and the other way round; a Java group's commits show in ``pysparklog consumer-groups --describe``.

The scenarios are those ``tests/interop/test_java_clients.py`` proves against a Kafka 4.2 broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.static.primitive import i8

from pysparklog.consumer import Consumer, ConsumerConfig
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition
from tests.conftest import BUCKET
from tests.endpoint.endpoint_process import REPO_ROOT, EndpointProcess
from tests.endpoint.kafka_wire import WireClient
from tests.interop import scenarios
from tests.interop.client_process import ClientProcess
from tests.interop.java_clients import BASE_TIMESTAMP
from tests.interop.kafka_tools import missing_tools
from tests.interop.kcat import KCAT, headers_of

pytestmark = [pytest.mark.interop, pytest.mark.slow]

#: The endpoints' registry lease: a killed coordinator's groups move to the survivor within it.
LEASE_MS = 3000
GROUP_KEY = i8(0)  # FindCoordinator's key_types: a consumer group, a transactional id
TRANSACTION_KEY = i8(1)
PARTITIONS = 3


@pytest.fixture(autouse=True)
def _java() -> None:
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"the real-client tests need Java and Maven: {missing}")


@dataclass
class Endpoints:
    """Two ``pysparklog serve`` processes over one log directory."""

    log_dir: str
    members: list[EndpointProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(endpoint.bootstrap for endpoint in self.members)

    def logs(self) -> LogDirectory:
        return LogDirectory(self.log_dir)

    def create_topic(self, topic: str, partitions: int = PARTITIONS) -> str:
        self.logs().topics.create(topic, partitions)
        return topic

    def coordinator(self, key: str, key_type: i8 = GROUP_KEY) -> EndpointProcess:
        """The endpoint that coordinates ``key`` (a group, or a transactional id), as FindCoordinator (v4, what
        Kafka 4.2's clients send) answers it at a live endpoint."""
        asked = next(endpoint for endpoint in self.members if endpoint.alive)
        with WireClient(asked.bootstrap) as client:
            response: FindCoordinatorResponse = client.request(
                FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)), FindCoordinatorResponse
            )
        (found,) = response.coordinators
        assert found.error_code == ErrorCode.none, f"FindCoordinator {key}: {found}"
        return next(endpoint for endpoint in self.members if endpoint.port == found.port)

    def kill_coordinator(self, key: str, key_type: i8 = GROUP_KEY) -> EndpointProcess:
        """SIGKILL to the endpoint coordinating ``key``."""
        victim = self.coordinator(key, key_type)
        victim.kill()
        return victim

    def kill_connected(self, client: ClientProcess) -> EndpointProcess:
        """SIGKILL to an endpoint ``client`` has a connection to (the one its requests are in flight to)."""
        ports = _connected_ports(client.process.pid)
        victim = next(endpoint for endpoint in self.members if endpoint.port in ports)
        victim.kill()
        return victim

    def records(self, topic: str, isolation_level: str = "read_uncommitted") -> dict[tuple[int, int], dict[str, Any]]:
        """Every record of ``topic`` as pysparklog's own reader reads it from the log directory, by (partition,
        offset)."""
        logs = self.logs()
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for partition in range(logs.topics.get(topic).partitions):
            with logs.partition(topic, partition) as log:
                for batch in log.read_arrow(include_headers=True, isolation_level=isolation_level):
                    for row in batch.to_pylist():
                        found[(partition, row["offset"])] = row
        return found


#: /proc/net/tcp's state of an established connection.
TCP_ESTABLISHED = "01"


def _connected_ports(pid: int) -> set[int]:
    """The remote ports of the established TCP connections of process ``pid`` (Linux's /proc: the inodes of the
    process's sockets, looked up in the kernel's TCP tables)."""
    sockets = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            sockets.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()  # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if fields[3] == TCP_ESTABLISHED and fields[9] in sockets:
                ports.add(int(fields[2].rpartition(":")[2], 16))
    return ports


@contextmanager
def two_endpoints(log_dir: str, work_dir: Path) -> Iterator[Endpoints]:
    with ExitStack() as stack:
        members = [
            stack.enter_context(
                EndpointProcess.started(log_dir, work_dir, name, options=("--registry-lease-ms", str(LEASE_MS)))
            )
            for name in ("a", "b")
        ]
        yield Endpoints(log_dir, members)


@pytest.fixture
def endpoints(tmp_path: Path) -> Iterator[Endpoints]:
    """Two endpoints over a log directory on the filesystem."""
    with two_endpoints(str(tmp_path / "logs"), tmp_path) as started:
        yield started


@pytest.fixture(params=["filesystem", "object-store"])
def endpoints_anywhere(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Endpoints]:
    """Two endpoints over a log directory on the filesystem, then on the object store (the moto server)."""
    if request.param == "filesystem":
        log_dir = str(tmp_path / "logs")
    else:
        request.getfixturevalue("s3_endpoint")
        log_dir = f"s3://{BUCKET}{tmp_path}/logs"
    with two_endpoints(log_dir, tmp_path) as started:
        yield started


def _millis(timestamp: Any) -> int:
    return int(timestamp.timestamp() * 1000)


def _check_java_records_in_log(endpoints: Endpoints, topic: str, acks: dict[tuple[int, int], int]) -> None:
    """Every acknowledged record is in the log at its acknowledged offset, whole; no record is there twice."""
    stored = endpoints.records(topic)
    keys = Counter(row["key"] for row in stored.values())
    duplicated = {key: n for key, n in keys.items() if n > 1}
    assert not duplicated, f"records written more than once: {sorted(duplicated)[:10]}"
    missing = sorted(set(acks) - set(stored))
    assert not missing, f"{len(missing)} acknowledged records are not in the log, the first at {missing[:5]}"
    for where, i in acks.items():
        row = stored[where]
        assert (row["key"], row["value"]) == (f"k{i}".encode(), f"v{i}".encode()), where
        assert [(h["key"], h["value"]) for h in row["headers"]] == [("seq", str(i).encode())], where
        assert _millis(row["timestamp"]) == BASE_TIMESTAMP + i, where


# -- Java's clients ----------------------------------------------------------------------------------------------


def test_java_idempotent_producer_loses_and_duplicates_nothing_when_its_endpoint_is_killed(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    topic = endpoints.create_topic("java-idempotent")
    acks = scenarios.idempotent_produce(
        tmp_path,
        endpoints.bootstrap,
        topic,
        1500,
        delay_ms=4,
        during=endpoints.kill_connected,
        after_acks=300,
    )
    _check_java_records_in_log(endpoints, topic, acks)


def test_java_idempotent_producer_on_an_object_store_loses_and_duplicates_nothing_when_its_endpoint_is_killed(
    s3_endpoint: str, tmp_path: Path
) -> None:
    with two_endpoints(f"s3://{BUCKET}{tmp_path}/logs", tmp_path) as endpoints:
        topic = endpoints.create_topic("java-idempotent-s3")
        acks = scenarios.idempotent_produce(
            tmp_path, endpoints.bootstrap, topic, 600, delay_ms=5, during=endpoints.kill_connected, after_acks=150
        )
        _check_java_records_in_log(endpoints, topic, acks)


def test_java_transactions_read_committed_through_two_endpoints_with_the_group_coordinator_killed(
    endpoints_anywhere: Endpoints, tmp_path: Path
) -> None:
    endpoints = endpoints_anywhere
    topic = endpoints.create_topic("java-transactions")
    group = "java-read-committed"
    run = scenarios.transactions_read_committed(
        tmp_path, endpoints.bootstrap, topic, group, during=lambda: endpoints.kill_coordinator(group)
    )
    committed_in_log = {row["key"].decode() for row in endpoints.records(topic, "read_committed").values()}
    assert committed_in_log == run.committed
    everything = {row["key"].decode() for row in endpoints.records(topic).values()}
    assert everything == run.committed | run.aborted


def test_java_transactions_read_committed_through_two_endpoints_with_the_transaction_coordinator_killed(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """The producer's transaction coordinator dies between transactions or in one: the producer goes on through
    the other endpoint (a transaction cut short is aborted or completed, never half-visible to read_committed)."""
    topic = endpoints.create_topic("java-transactions-coordinator")
    group = "java-read-committed-tx-killed"
    run = scenarios.transactions_read_committed(
        tmp_path,
        endpoints.bootstrap,
        topic,
        group,
        during=lambda: endpoints.kill_coordinator(f"{group}-tx", TRANSACTION_KEY),
    )
    committed_in_log = {row["key"].decode() for row in endpoints.records(topic, "read_committed").values()}
    assert committed_in_log == run.committed


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_java_group_of_three_with_a_member_joining_and_one_leaving_survives_its_coordinator_killed(
    endpoints: Endpoints, tmp_path: Path, assignor: str
) -> None:
    topic = endpoints.create_topic(f"java-group-{assignor}", 6)
    group = f"java-group-{assignor}"
    run = scenarios.consumer_group(
        tmp_path, endpoints.bootstrap, topic, group, assignor, during=lambda: endpoints.kill_coordinator(group)
    )
    _check_java_records_in_log(endpoints, topic, run.acks)
    assert run.consumed() == set(endpoints.records(topic))
    # The group's last commits are at the log end of every partition: `consumer-groups --describe` says lag 0.
    described = _cli("consumer-groups", "--log-dir", endpoints.log_dir, "--describe", "--group", group)
    rows = [line.split() for line in described.splitlines() if line.startswith(f"{group} ")]
    assert sorted(int(row[2]) for row in rows) == list(range(6)), described
    for row in rows:
        current, end, lag = int(row[3]), int(row[4]), row[5]
        assert (current, lag) == (end, "0"), described


def test_java_group_on_an_object_store_survives_its_coordinator_killed(s3_endpoint: str, tmp_path: Path) -> None:
    """The group scenario over an ``s3://`` log directory: the registry, the generations and the commits are
    objects there, and the surviving endpoint takes the group over from them."""
    with two_endpoints(f"s3://{BUCKET}{tmp_path}/logs", tmp_path) as endpoints:
        topic = endpoints.create_topic("java-group-s3", 6)
        group = "java-group-s3"
        run = scenarios.consumer_group(
            tmp_path,
            endpoints.bootstrap,
            topic,
            group,
            "cooperative-sticky",
            count=600,
            during=lambda: endpoints.kill_coordinator(group),
        )
        _check_java_records_in_log(endpoints, topic, run.acks)
        assert run.consumed() == set(endpoints.records(topic))


# -- kcat --------------------------------------------------------------------------------------------------------


def test_kcat_produces_and_consumes_keys_and_headers_through_two_endpoints_with_the_coordinator_killed(
    endpoints_anywhere: Endpoints, tmp_path: Path
) -> None:
    endpoints = endpoints_anywhere
    topic = endpoints.create_topic("kcat")
    group = "kcat-group"

    def produce(first: int, count: int) -> None:
        lines = "".join(f"k{i}:v{i}\n" for i in range(first, first + count)).encode()
        KCAT.run(
            "-b", endpoints.bootstrap, "-t", topic, "-P", "-K:", "-H", "origin=kcat", "-X", "acks=all", stdin=lines
        )

    members = [
        KCAT.start(
            tmp_path,
            f"kcat-member-{n}",
            "-b",
            endpoints.bootstrap,
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "session.timeout.ms=6000",
            topic,
        )
        for n in range(2)
    ]

    def consumed() -> set[str]:
        return {line["key"] for member in members for line in member.lines if "key" in line}

    try:
        produce(0, 100)
        members[0].wait_until(lambda _: consumed() >= {f"k{i}" for i in range(100)}, 120, "the first 100 records")
        endpoints.kill_coordinator(group)
        produce(100, 100)
        members[0].wait_until(lambda _: consumed() >= {f"k{i}" for i in range(200)}, 120, "all 200 records")
        for member in members:
            member.stop()
    finally:
        for member in members:
            member.close()

    stored = endpoints.records(topic)
    assert sorted(row["key"].decode() for row in stored.values()) == sorted(f"k{i}" for i in range(200))
    for member in members:
        for line in member.lines:
            if "key" not in line:
                continue
            row = stored[(line["partition"], line["offset"])]
            assert (line["key"], line["payload"]) == (row["key"].decode(), row["value"].decode())
            assert headers_of(line) == [("origin", "kcat")]

    read = KCAT.records("-b", endpoints.bootstrap, "-t", topic, "-C", "-o", "beginning", "-e")
    assert {(m["partition"], m["offset"]) for m in read} == set(stored)
    for message in read:
        row = stored[(message["partition"], message["offset"])]
        assert (message["key"], message["payload"]) == (row["key"].decode(), row["value"].decode())
        assert headers_of(message) == [("origin", "kcat")]
        assert message["ts"] == _millis(row["timestamp"])


# -- confluent-kafka (librdkafka) --------------------------------------------------------------------------------


def test_confluent_kafka_idempotent_producer_and_group_through_two_endpoints_with_the_coordinator_killed(
    endpoints_anywhere: Endpoints,
) -> None:
    endpoints = endpoints_anywhere
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = endpoints.create_topic("confluent")
    group = "confluent-group"
    acked: dict[tuple[int, int], int] = {}
    failed: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            acked[(message.partition(), message.offset())] = int(message.key()[1:])

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": endpoints.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(
                topic,
                value=f"v{i}",
                key=f"k{i}",
                headers=[("seq", str(i).encode())],
                timestamp=BASE_TIMESTAMP + i,
                on_delivery=delivered,
            )
            producer.poll(0)
        assert producer.flush(60) == 0, "records still unacknowledged after 60 s"

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": endpoints.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    consumed: list[tuple[int, int]] = []
    try:
        consumer.subscribe([topic])
        produce(0, 300)

        def consume_until(count: int) -> None:
            deadline = time.monotonic() + 120
            while len(set(consumed)) < count:
                assert time.monotonic() < deadline, f"read {len(set(consumed))} of {count} records in 120 s" + "".join(
                    f"\n--- endpoint {member.name}:\n{member.log()}" for member in endpoints.members
                )
                message = consumer.poll(0.5)
                if message is None or message.error() is not None:
                    continue
                consumed.append((message.partition(), message.offset()))
                try:
                    consumer.commit(message=message, asynchronous=False)
                except confluent_kafka.KafkaException:
                    pass  # the coordinator died or the group rebalanced: the record is read again, from the commit

        consume_until(150)
        endpoints.kill_coordinator(group)
        produce(300, 300)
        consume_until(600)
    finally:
        consumer.close()
    assert not failed, failed[:5]
    assert sorted(acked.values()) == list(range(600))
    stored = endpoints.records(topic)
    assert set(consumed) == set(acked) == set(stored)
    for where, i in acked.items():
        assert stored[where]["key"] == f"k{i}".encode()
        assert _millis(stored[where]["timestamp"]) == BASE_TIMESTAMP + i
    read_twice = len(consumed) - len(set(consumed))
    assert read_twice <= 10, f"{read_twice} records read again: the group went back before its commits"


# -- one log, every door -----------------------------------------------------------------------------------------


def _cli(*arguments: str) -> str:
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pysparklog.cli.main", *arguments],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"pysparklog {' '.join(arguments)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_what_java_writes_through_an_endpoint_the_python_consumer_and_the_cli_read_alike(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    topic = endpoints.create_topic("java-to-python")
    acks = scenarios.idempotent_produce(tmp_path, endpoints.bootstrap, topic, 60)

    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(endpoints.log_dir, ConsumerConfig(auto_offset_reset="earliest")) as consumer:
        consumer.assign(partitions)
        read = [record for _ in range(20) for record in consumer.poll(timeout_ms=200)]
    assert {(r.partition, r.offset) for r in read} == set(acks)
    for record in read:
        i = acks[(record.partition, record.offset)]
        assert (record.key, record.value, record.headers) == (
            f"k{i}".encode(),
            f"v{i}".encode(),
            [("seq", str(i).encode())],
        )
        assert (record.timestamp, record.timestamp_type) == (BASE_TIMESTAMP + i, 0)

    fields = ("timestamp", "partition", "offset", "headers", "key")
    printed = _cli(
        "console-consumer", "--log-dir", endpoints.log_dir, "--topic", topic, "--from-beginning",
        "--max-messages", "60", "--timeout-ms", "10000",
        *(item for name in fields for item in ("--property", f"print.{name}=true")),
    )  # fmt: skip
    lines = [line.split("\t") for line in printed.splitlines()]
    assert len(lines) == 60
    for timestamp, partition, offset, headers, key, value in lines:
        i = acks[(int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")))]
        assert (timestamp, headers, key, value) == (f"CreateTime:{BASE_TIMESTAMP + i}", f"seq:{i}", f"k{i}", f"v{i}")


def test_what_pysparklog_writes_a_java_consumer_reads_through_an_endpoint_alike(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    topic = endpoints.create_topic("python-to-java")
    with Producer(endpoints.log_dir, ProducerConfig.from_properties({"linger.ms": "0"})) as producer:
        futures = [
            producer.send(
                topic,
                f"v{i}".encode(),
                key=f"k{i}".encode(),
                headers=[("seq", str(i).encode())],
                timestamp_ms=BASE_TIMESTAMP + i,
            )
            for i in range(60)
        ]
        written = {(m.partition, m.offset): i for i, m in enumerate(future.get(30) for future in futures)}
    scenarios.consume_and_check(tmp_path, endpoints.bootstrap, topic, "python-to-java", written)
