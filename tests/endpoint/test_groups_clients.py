"""Consumer groups through a real client: confluent-kafka (librdkafka) consumers in a group coordinated by the
endpoint, with the client-side assignors, members joining and leaving, every record consumed once with commits into
the ``__consumer_offsets`` that ``pysparklog consumer-groups`` reads; and the group continuing from its committed
offsets on another endpoint when its coordinator is killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.registry import Registry
from pysparklog.offsets import OffsetStore
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition
from tests.endpoint.endpoint_process import LISTENING

TOPIC = "events"
PARTITIONS = 6
REPO = Path(__file__).parents[2]


def _config() -> EndpointConfig:
    return EndpointConfig(port=0, registry_lease_ms=4000)  # the killed endpoint's is short: see its test


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), value=str(i).encode())
    assert producer.flush(20) == 0


class Member:
    """A confluent-kafka consumer of the group on a thread of its own: polls, notes what it consumed, commits after
    each batch and before giving partitions up, until told to stop (then closes, leaving the group)."""

    def __init__(self, bootstrap: str, group: str, strategy: str, consumed: list[tuple[int, int, bytes]]) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": strategy,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.consumed = consumed
        self.errors: list[str] = []
        #: The codes of commits refused.
        self.refused: list[int] = []
        self.stopping = threading.Event()
        #: A commit was refused and not yet made since.
        self.pending = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _commit(self, when: str) -> None:
        """Commit what was consumed. A commit refused mid-rebalance (the member's generation just ended, or the
        next has not synced) is retried at the next poll, batch or not, as an application does: the partitions it
        keeps go on from its position, and one it gives up is committed in ``on_revoke`` in the generation that
        moves it. (Retried with the next batch only, the last one's commit was lost when no batch came after it.)"""
        try:
            self.consumer.commit(asynchronous=False)
            self.pending = False
        except KafkaException as exception:
            code = exception.args[0].code()
            if code == KafkaError._NO_OFFSET:
                self.pending = False
                return  # nothing consumed since the last commit
            self.refused.append(code)
            self.pending = True
            if code not in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION):
                self.errors.append(f"commit {when}: {exception}")

    def _revoked(self, consumer: Consumer, partitions: list[Any]) -> None:
        self._commit("on revoke")

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC], on_revoke=self._revoked)
        try:
            while not self.stopping.is_set():
                messages = self.consumer.consume(100, 0.2)
                taken = []
                for message in messages:
                    error = message.error()
                    if error is not None:
                        self.errors.append(str(error))
                        continue
                    partition, offset, value = message.partition(), message.offset(), message.value()
                    assert partition is not None and offset is not None and value is not None
                    taken.append((partition, offset, value))
                if taken:
                    self.consumed.extend(taken)
                    self._commit("after a batch")
                elif self.pending:
                    self._commit("again, after a refusal")
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def _wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_group_of_librdkafka_consumers_consumes_every_record_once_across_joins_and_leaves(
    log_dir: LogDirectory, strategy: str
) -> None:
    log_dir.topics.create(TOPIC, PARTITIONS)
    consumed: list[tuple[int, int, bytes]] = []
    with Endpoint(log_dir, _config()) as endpoint:
        members = [Member(endpoint.bootstrap, "g", strategy, consumed) for _ in range(3)]
        try:
            _produce(endpoint.bootstrap, 0, 300)
            _wait_for(lambda: len(consumed) >= 300)
            members.append(Member(endpoint.bootstrap, "g", strategy, consumed))  # one joins
            _produce(endpoint.bootstrap, 300, 150)
            _wait_for(lambda: len(consumed) >= 450)
            members.pop(0).stop()  # one leaves
            _produce(endpoint.bootstrap, 450, 150)
            _wait_for(lambda: len(consumed) >= 600)
            time.sleep(1)  # anything consumed twice would show by now
        finally:
            for member in members:
                member.stop()
        assert [e for m in members for e in m.errors] == []
    counts = Counter((partition, offset) for partition, offset, _ in consumed)
    assert len(counts) == 600 and set(counts.values()) == {1}
    assert sorted(int(value) for _, _, value in consumed) == list(range(600))
    with OffsetStore(log_dir) as store:
        committed = store.committed("g")
    ends = {}
    for partition in range(PARTITIONS):
        with log_dir.partition(TOPIC, partition) as log:
            ends[TopicPartition(TOPIC, partition)] = log.log_end_offset
    assert {tp: c.offset for tp, c in committed.items()} == ends
    described = subprocess.run(
        [sys.executable, "-m", "pysparklog.cli.main", "consumer-groups", "--log-dir", log_dir.path]
        + ["--describe", "--group", "g"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    ).stdout
    rows = [line.split() for line in described.splitlines() if line.startswith("g ")]
    assert len(rows) == PARTITIONS and {row[5] for row in rows} == {"0"}, described


def test_the_group_continues_from_its_committed_offsets_when_its_coordinator_is_killed(log_dir: LogDirectory) -> None:
    """Two endpoints serve one log directory; the group's coordinator, a ``pysparklog serve`` process, is killed with
    -9 mid-consumption: the consumers find the other endpoint, rejoin the group there and go on from the offsets
    committed, losing nothing (what was consumed after the last commit is consumed again, as Kafka's at-least-once
    consumers do)."""
    log_dir.topics.create(TOPIC, PARTITIONS)
    process = subprocess.Popen(
        [sys.executable, "-m", "pysparklog.cli.main", "serve", "--log-dir", log_dir.path, "--listen", "127.0.0.1:0"]
        + ["--registry-lease-ms", "1000"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    consumed: list[tuple[int, int, bytes]] = []
    try:
        assert process.stdout is not None
        listening = LISTENING.match(process.stdout.readline().strip())
        assert listening is not None, "the endpoint did not start"
        doomed = listening["bootstrap"]
        with Endpoint(log_dir, _config()) as survivor:
            assert survivor.state is not None
            registry = survivor.state.state(Registry)
            _wait_for(lambda: len(registry.live()) == 2)
            group = next(g for g in (f"group-{i}" for i in range(100)) if not registry.coordinates(g))
            bootstrap = f"{doomed},{survivor.bootstrap}"
            members = [Member(bootstrap, group, "range", consumed) for _ in range(3)]
            try:
                _produce(survivor.bootstrap, 0, 300)
                _wait_for(lambda: len(consumed) >= 300)
                process.send_signal(signal.SIGKILL)
                process.wait(10)
                _produce(survivor.bootstrap, 300, 300)
                _wait_for(lambda: len({(p, o) for p, o, _ in consumed}) >= 600, timeout=90)
            finally:
                for member in members:
                    member.stop()
    finally:
        process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    assert sorted({int(value) for _, _, value in consumed}) == list(range(600))
    with OffsetStore(log_dir) as store:
        committed = {tp.partition: c.offset for tp, c in store.committed(group).items()}
    assert sum(committed.values()) == 600
