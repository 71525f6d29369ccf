"""The real-client scenarios of issue 23, written once and run against a Kafka 4.2 broker (``test_java_clients.py``,
which proves them) and against two pysparklog endpoints serving one log directory with one of them killed
mid-scenario (``tests/endpoint/test_real_clients.py``). ``during`` is what happens to the servers mid-scenario:
nothing for the broker, SIGKILL of an endpoint for the endpoints.

Each scenario checks what a client can see for itself and returns what it saw, for the caller to compare with
the log directory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.interop.client_process import ClientProcess
from tests.interop.java_clients import BASE_TIMESTAMP, JAVA_CLIENTS

CLIENT_TIMEOUT_S = 180.0
Coordinates = tuple[int, int]  # partition, offset
Event = dict[str, Any]


def _run_to_end(client: ClientProcess, timeout: float = CLIENT_TIMEOUT_S) -> None:
    try:
        client.wait(timeout)
    finally:
        client.close()


def acknowledged(producer: ClientProcess) -> dict[Coordinates, int]:
    """The Java producer's acknowledged records: (partition, offset) -> the record's index ``i``.

    Raises:
        AssertionError: Two records were acknowledged at one offset.
    """
    acks: dict[Coordinates, int] = {}
    for ack in producer.events("ack"):
        where = (ack["partition"], ack["offset"])
        assert where not in acks, f"records {acks[where]} and {ack['i']} were both acknowledged at {where}"
        acks[where] = ack["i"]
    return acks


def idempotent_produce(
    work_dir: Path,
    bootstrap: str,
    topic: str,
    count: int,
    *,
    delay_ms: int = 0,
    during: Callable[[ClientProcess], object] | None = None,
    after_acks: int = 0,
) -> dict[Coordinates, int]:
    """The Java producer (idempotent, acks=all) sends ``count`` records; ``during(producer)`` runs once
    ``after_acks`` are acknowledged. Every record must be acknowledged exactly once.

    Returns:
        (partition, offset) -> record index, for each acknowledged record.
    """
    producer = JAVA_CLIENTS.start(work_dir, "produce", bootstrap=bootstrap, topic=topic, count=count, delay_ms=delay_ms)
    try:
        if during is not None:
            producer.wait_until(lambda _: len(producer.events("ack")) >= after_acks, CLIENT_TIMEOUT_S, "acks")
            during(producer)
        producer.wait(CLIENT_TIMEOUT_S)
    finally:
        producer.close()
    acks = acknowledged(producer)
    errors = producer.events("error")
    assert not errors, f"{len(errors)} records failed, the first: {errors[0]}"
    assert sorted(acks.values()) == list(range(count)), "records acknowledged twice or not at all"
    return acks


def _first_record(consumer: ClientProcess) -> None:
    consumer.wait_until(lambda _: consumer.events("record"), CLIENT_TIMEOUT_S, "its first record")


def stop_consumer(consumer: ClientProcess) -> None:
    """SIGTERM: the Java consumer's shutdown hook wakes it up, and it closes (leaving its group) before the JVM
    exits (with 143, as a JVM ended by SIGTERM does)."""
    consumer.stop()
    if not consumer.events("closed"):
        raise consumer.error("did not close (and leave its group) on SIGTERM")


def check_java_record(record: Event, index: int) -> None:
    """A record the Java consumer printed is record ``index`` of the Java producer: key, value, header, time."""
    assert (record["key"], record["value"], record["headers"]) == (f"k{index}", f"v{index}", [["seq", str(index)]])
    assert (record["timestamp"], record["timestamp_type"]) == (BASE_TIMESTAMP + index, "CreateTime")


def consume_and_check(work_dir: Path, bootstrap: str, topic: str, group: str, written: dict[Coordinates, int]) -> None:
    """A Java consumer of group ``group`` reads back exactly the records ``written`` ((partition, offset) -> the
    index of a record as the Java producer makes them), each with its key, value, header and time."""
    consumer = JAVA_CLIENTS.start(
        work_dir, "consume", bootstrap=bootstrap, topic=topic, group=group, max_records=len(written)
    )
    _run_to_end(consumer)
    records = consumer.events("record")
    assert {(r["partition"], r["offset"]) for r in records} == set(written)
    for record in records:
        check_java_record(record, written[(record["partition"], record["offset"])])


@dataclass
class GroupRun:
    """What the consumers of ``consumer_group`` printed, and what the producer had acknowledged."""

    acks: dict[Coordinates, int]
    consumers: list[ClientProcess]

    def records(self) -> list[Event]:
        return [record for consumer in self.consumers for record in consumer.events("record")]

    def consumed(self) -> set[Coordinates]:
        return {(record["partition"], record["offset"]) for record in self.records()}


def consumer_group(
    work_dir: Path,
    bootstrap: str,
    topic: str,
    group: str,
    assignor: str,
    *,
    count: int = 1500,
    during: Callable[[], object] | None = None,
) -> GroupRun:
    """A group of 3 Java consumers reads what the idempotent Java producer is writing; a 4th joins, then
    ``during()`` (an endpoint killed), then one of the first three leaves (SIGTERM: a clean LeaveGroup); the
    rest read on until every acknowledged record is read.

    Checks that no acknowledged record is missed, and that a partition's new owner after each rebalance starts
    no earlier than the offset last committed for it (it continues from the group's committed offsets).
    """
    producer = JAVA_CLIENTS.start(work_dir, "produce", bootstrap=bootstrap, topic=topic, count=count, delay_ms=8)
    consumers: list[ClientProcess] = []

    def join(n: int) -> ClientProcess:
        consumer = JAVA_CLIENTS.start(
            work_dir,
            "consume",
            name=f"consumer-{n}",
            bootstrap=bootstrap,
            topic=topic,
            group=group,
            assignor=assignor,
            client_id=f"consumer-{n}",
        )
        consumers.append(consumer)
        return consumer

    try:
        for n in range(3):
            join(n)
        for consumer in consumers:
            _first_record(consumer)
        fourth = join(3)
        fourth.wait_until(
            lambda _: any(event["partitions"] for event in fourth.events("assigned")),
            CLIENT_TIMEOUT_S,
            "partitions assigned to the joining member",
        )
        if during is not None:
            during()
        leaving = consumers[1]
        stop_consumer(leaving)
        producer.wait(CLIENT_TIMEOUT_S)
        acks = acknowledged(producer)
        assert len(acks) == count, producer.error(f"acknowledged {len(acks)} of {count} records")
        run = GroupRun(acks, consumers)
        consumers[0].wait_until(lambda _: run.consumed() >= set(acks), CLIENT_TIMEOUT_S, "every record read")
        for consumer in consumers:
            if consumer is not leaving:
                stop_consumer(consumer)
    finally:
        producer.close()
        for consumer in consumers:
            consumer.close()
    for record in run.records():
        check_java_record(record, acks[(record["partition"], record["offset"])])
    _check_continues_from_committed(consumers)
    return run


def _check_continues_from_committed(consumers: list[ClientProcess]) -> None:
    """Each time a consumer starts reading a partition (its first record of it, or its first after an
    assignment), the offset is no lower than every commit of that partition printed before."""
    commits: dict[int, list[tuple[int, int]]] = defaultdict(list)  # partition -> (at, offset)
    for consumer in consumers:
        for commit in consumer.events("committed"):
            commits[commit["partition"]].append((commit["at"], commit["offset"]))
    for consumer in consumers:
        reading: set[int] = set()
        for line in consumer.lines:
            event = line.get("event")
            if event == "assigned":
                reading.clear()
            elif event == "record" and line["partition"] not in reading:
                reading.add(line["partition"])
                committed_before = max(
                    (offset for at, offset in commits[line["partition"]] if at < line["at"]), default=0
                )
                assert line["offset"] >= committed_before, (
                    f"{consumer!r} started partition {line['partition']} at offset {line['offset']}, before "
                    f"{committed_before} which the group had committed"
                )


@dataclass
class TransactionalRun:
    """The keys of the records of the committed and of the aborted transactions, and what read_committed read."""

    committed: set[str]
    aborted: set[str]
    read: list[Event]


def transactions_read_committed(
    work_dir: Path,
    bootstrap: str,
    topic: str,
    group: str,
    *,
    transactions: int = 12,
    during: Callable[[], object] | None = None,
) -> TransactionalRun:
    """The Java transactional producer commits two transactions of five records and aborts the third, over and
    over, while a read_committed Java consumer of ``group`` reads; ``during()`` runs after the consumer's first
    record. The consumer must read exactly the committed records' keys, never an aborted one."""
    producer = JAVA_CLIENTS.start(
        work_dir,
        "produce-transactional",
        bootstrap=bootstrap,
        topic=topic,
        transactional_id=f"{group}-tx",
        transactions=transactions,
        per_transaction=5,
        abort_every=3,
        delay_ms=300,
    )
    consumer = JAVA_CLIENTS.start(
        work_dir, "consume", bootstrap=bootstrap, topic=topic, group=group, isolation="read_committed"
    )
    try:
        _first_record(consumer)
        if during is not None:
            during()
        producer.wait(CLIENT_TIMEOUT_S)
        committed = {record["key"] for t in producer.events("committed") for record in t["records"]}
        aborted = {record["key"] for t in producer.events("aborted") for record in t["records"]}
        assert len(committed) + len(aborted) == transactions * 5, producer.error("not every transaction ended")
        consumer.wait_until(
            lambda _: {r["key"] for r in consumer.events("record")} >= committed, CLIENT_TIMEOUT_S, "every commit"
        )
        stop_consumer(consumer)
    finally:
        producer.close()
        consumer.close()
    read = consumer.events("record")
    assert {record["key"] for record in read} == committed, "read_committed read other records than committed"
    return TransactionalRun(committed, aborted, read)
