"""The consumer in one process: assign and poll, positions and seeks, resets, commits, groups and rebalances.

Everything runs on real files in ``tmp_path``, with short session timeouts so that group changes settle in
well under a second; waits poll for a condition up to a deadline instead of sleeping a fixed time.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pysparklog import (
    CommitFailedError,
    FencedInstanceIdError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidTopicError,
    LogDirectory,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    TopicPartition,
    UnknownTopicError,
)
from pysparklog.broker_configs import is_broker_config
from pysparklog.consumer import (
    AutoOffsetReset,
    Consumer,
    ConsumerConfig,
    ConsumerRecord,
    OffsetAndTimestamp,
)
from pysparklog.group import GroupCoordinator, describe_group
from pysparklog.offsets import OffsetStore
from pysparklog.storage.records.arrow_records import BatchSettings, encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
from tests.conftest import keyed_table

TS = 1_700_000_000_000  # keyed_table's first timestamp
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
DEADLINE_S = 10.0


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def group_config(**overrides: Any) -> ConsumerConfig:
    settings: dict[str, Any] = {
        "group_id": "g",
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 1500,
        "heartbeat_interval_ms": 100,
        "enable_auto_commit": False,
    }
    settings.update(overrides)
    return ConsumerConfig(**settings)


@pytest.fixture
def log_dir(tmp_path: Path) -> LogDirectory:
    return LogDirectory(tmp_path / "logs")


def fill(log_dir: LogDirectory, topic: str, partitions: int, per_partition: int, *, create: bool = True) -> None:
    """``per_partition`` records in each partition; partition p holds keys ``k<p*1000 + i>``."""
    if create:
        log_dir.topics.create(topic, partitions)
    for p in range(partitions):
        log = log_dir.partition(topic, p)
        try:
            log.append_arrow(keyed_table(per_partition, start=p * 1000, value_size=20))
        finally:
            log.close()


def append(log_dir: LogDirectory, topic: str, partition: int, table: pa.Table) -> None:
    log = log_dir.partition(topic, partition)
    try:
        log.append_arrow(table)
    finally:
        log.close()


@pytest.fixture
def consumers(log_dir: LogDirectory) -> Iterator[Callable[..., Consumer]]:
    """Makes consumers that are closed when the test ends, whatever happens."""
    made: list[Consumer] = []

    def make(config: ConsumerConfig | None = None) -> Consumer:
        consumer = Consumer(log_dir, config)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close(autocommit=False)


def wait_for(condition: Callable[[], bool], what: str, *, step: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        if step is not None:
            step()
        else:
            time.sleep(0.01)


def offsets_of(records: list[ConsumerRecord]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for r in records:
        found.setdefault(r.partition, []).append(r.offset)
    return found


# -- assign and poll ------------------------------------------------------------------------------------------


def test_poll_arrow_returns_spark_kafka_columns_with_headers(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    log_dir.topics.create("t", 1)
    headers = pa.array([[{"key": "h", "value": b"1"}], None, [{"key": "n", "value": None}]], HEADER_TYPE)
    append(log_dir, "t", 0, keyed_table(3, value_size=10).append_column("headers", headers))

    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest"))
    consumer.assign([tp("t", 0)])
    table = consumer.poll_arrow(timeout_ms=1000)

    assert table.column_names == [*SPARK_COLUMNS, "headers"]
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert table.column("key").to_pylist() == [b"k0", b"k1", b"k2"]
    assert table.column("value").to_pylist() == [f"v{i}:".encode().ljust(10, b".") for i in range(3)]
    assert table.column("topic").to_pylist() == ["t"] * 3
    assert table.column("partition").to_pylist() == [0] * 3
    assert table.column("offset").to_pylist() == [0, 1, 2]
    assert table.column("timestampType").to_pylist() == [0] * 3  # CreateTime
    assert table.column("headers").to_pylist() == [[{"key": "h", "value": b"1"}], None, [{"key": "n", "value": None}]]
    assert consumer.poll_arrow().num_rows == 0  # nothing more: an empty table with the same columns
    assert consumer.poll_arrow().schema == table.schema

    plain = consumers(ConsumerConfig(auto_offset_reset="earliest", include_headers=False))
    plain.assign([tp("t", 0)])
    assert plain.poll_arrow(timeout_ms=1000).column_names == SPARK_COLUMNS


def test_poll_returns_consumer_records_with_headers(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    log_dir.topics.create("t", 1)
    headers = pa.array([[{"key": "h", "value": b"1"}, {"key": "h", "value": b"2"}], None], HEADER_TYPE)
    append(log_dir, "t", 0, keyed_table(2, value_size=4).append_column("headers", headers))

    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest"))
    consumer.assign([tp("t", 0)])
    records = consumer.poll(timeout_ms=1000)

    assert records == [
        ConsumerRecord("t", 0, 0, TS, 0, b"k0", b"v0:.", [("h", b"1"), ("h", b"2")]),
        ConsumerRecord("t", 0, 1, TS + 1, 0, b"k1", b"v1:.", []),
    ]
    assert consumer.poll() == []


def test_poll_waits_up_to_its_timeout_for_records(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    log_dir.topics.create("t", 1)
    consumer = consumers(ConsumerConfig())
    consumer.assign([tp("t", 0)])
    started = time.monotonic()
    assert consumer.poll(timeout_ms=200) == []
    assert time.monotonic() - started >= 0.2
    append(log_dir, "t", 0, keyed_table(1))
    assert [r.offset for r in consumer.poll(timeout_ms=5000)] == [0]


def test_max_records_and_partitions_take_turns(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 3, 100)
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest", max_poll_records=10))
    consumer.assign([tp("t", p) for p in range(3)])

    polls = [consumer.poll() for _ in range(6)]
    assert [len(records) for records in polls] == [10] * 6  # max.poll.records
    assert [{r.partition for r in records} for records in polls] == [{0}, {1}, {2}, {0}, {1}, {2}]
    assert [r.offset for r in polls[3]] == list(range(10, 20))

    big = consumer.poll(max_records=200)  # a larger limit for one call spans partitions
    assert Counter(r.partition for r in big) == {0: 80, 1: 80, 2: 40}
    rest = consumer.poll(max_records=1000)
    seen = Counter((r.partition, r.offset) for records in [*polls, big, rest] for r in records)
    assert seen == Counter((p, o) for p in range(3) for o in range(100))
    with pytest.raises(InvalidConfigError, match="max_records = 0 is invalid"):
        consumer.poll(max_records=0)


def test_a_partition_with_a_backlog_does_not_starve_the_others(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    log_dir.topics.create("t", 2)
    append(log_dir, "t", 0, keyed_table(1000, value_size=10))
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest", max_poll_records=100))
    consumer.assign([tp("t", 0), tp("t", 1)])
    assert {r.partition for r in consumer.poll()} == {0}
    append(log_dir, "t", 1, keyed_table(5, value_size=10))
    second = consumer.poll()
    assert [r.partition for r in second] == [1] * 5 + [0] * 95  # partition 1's turn comes first


def test_assign_refuses_unknown_partitions_and_subscribe(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    log_dir.topics.create("t", 2)
    consumer = consumers(ConsumerConfig(group_id="g"))
    with pytest.raises(UnknownTopicError):
        consumer.assign([tp("missing", 0)])
    with pytest.raises(UnknownTopicError, match="t-2 does not exist: t has 2"):
        consumer.assign([tp("t", 2)])
    consumer.assign([("t", 1)])  # type: ignore[list-item]
    assert consumer.assignment() == {tp("t", 1)}
    with pytest.raises(InvalidConfigError, match="exclusive"):
        consumer.subscribe(["t"])
    consumer.unsubscribe()
    assert consumer.assignment() == set()
    consumer.subscribe(["t"])
    with pytest.raises(InvalidConfigError, match="exclusive"):
        consumer.assign([tp("t", 0)])


# -- positions and seeks --------------------------------------------------------------------------------------


def test_position_and_seeks(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 2, 50)
    p0, p1 = tp("t", 0), tp("t", 1)
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest", max_poll_records=10))
    consumer.assign([p0, p1])
    assert (consumer.position(p0), consumer.position(p1)) == (0, 0)

    consumer.seek(p0, 42)
    consumer.seek_to_end([p1])
    assert (consumer.position(p0), consumer.position(p1)) == (42, 50)
    assert [r.offset for r in consumer.poll(timeout_ms=1000)] == list(range(42, 50))
    assert consumer.position(p0) == 50

    consumer.seek_to_beginning()
    assert (consumer.position(p0), consumer.position(p1)) == (0, 0)
    consumer.seek_to_end()
    assert (consumer.position(p0), consumer.position(p1)) == (50, 50)
    assert consumer.poll() == []

    # Timestamps: partition 1 holds keys k1000... with timestamps TS + 1000 + i.
    consumer.seek_to_timestamp(TS + 1010)
    assert (consumer.position(p0), consumer.position(p1)) == (50, 10)  # p0 has nothing that late: its end
    consumer.seek_to_timestamp(TS + 7, [p0])
    assert consumer.position(p0) == 7
    assert consumer.offsets_for_times({p0: TS + 7, p1: TS + 1049, tp("t", 1): TS}) == {
        p0: OffsetAndTimestamp(7, TS + 7),
        p1: OffsetAndTimestamp(0, TS + 1000),
    }
    assert consumer.offsets_for_times({p0: TS + 10_000}) == {p0: None}
    assert consumer.beginning_offsets([p0, p1]) == {p0: 0, p1: 0}
    assert consumer.end_offsets([p0, p1]) == {p0: 50, p1: 50}

    with pytest.raises(InvalidConfigError, match="not assigned"):
        consumer.position(tp("t", 5))
    with pytest.raises(InvalidConfigError, match="not assigned"):
        consumer.seek_to_beginning([tp("other", 0)])
    with pytest.raises(InvalidOffsetError, match="seek offset = -1 is invalid; accepted: an integer from 0 to"):
        consumer.seek(p0, -1)
    with pytest.raises(InvalidOffsetError, match="timestamp for t-0 = -5 is invalid"):
        consumer.offsets_for_times({p0: -5})


LONG_MAX = 2**63 - 1


def test_offsets_and_timestamps_are_java_longs_as_in_kafka(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    """Kafka's consumer takes them as Java longs, so 2**63 cannot even be written; here it was taken, and the
    position silently reset at the next poll."""
    fill(log_dir, "t", 1, 5)
    p0 = tp("t", 0)
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest"))
    consumer.assign([p0])
    accepted = f"accepted: an integer from 0 to {LONG_MAX}"
    for offset in (2**63, 2**64, 1.0, True):
        with pytest.raises(InvalidOffsetError, match=f"seek offset = {offset!r} is invalid; {accepted}"):
            consumer.seek(p0, offset)  # type: ignore[arg-type]
    with pytest.raises(InvalidOffsetError, match=f"timestamp for t-0 = {2**63} is invalid; {accepted}"):
        consumer.offsets_for_times({p0: 2**63})
    with pytest.raises(InvalidOffsetError, match=f"timestamp for t-0 = {2**63} is invalid"):
        consumer.seek_to_timestamp(2**63)
    consumer.seek(p0, LONG_MAX)  # the largest offset: past the log end, reset by the policy
    assert consumer.poll() == [] and consumer.position(p0) == 0
    assert consumer.offsets_for_times({p0: LONG_MAX}) == {p0: None}


def test_poll_refuses_a_negative_timeout_and_a_limit_beyond_an_int(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 1, 5)
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest"))
    consumer.assign([tp("t", 0)])
    with pytest.raises(InvalidOffsetError, match="timeout_ms = -1 is invalid; accepted: an integer from 0"):
        consumer.poll(timeout_ms=-1)
    with pytest.raises(InvalidOffsetError, match="timeout_ms = '5' is invalid"):
        consumer.poll_arrow(timeout_ms="5")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="max_records = 2147483648 is invalid; accepted: an integer from 1"):
        consumer.poll(max_records=2**31)
    assert len(consumer.poll(max_records=2**31 - 1)) == 5


@pytest.mark.parametrize(
    "partition",
    [("t", "0"), ("t", -1), ("t", 2**31), ("t", 0, 1), "t-0", ("a b", 0)],
    ids=["partition-as-text", "negative", "beyond-int", "three-fields", "a-string", "bad-topic"],
)
def test_malformed_partitions_are_refused_by_every_method_taking_partitions(
    log_dir: LogDirectory, consumers: Callable[..., Consumer], partition: Any
) -> None:
    fill(log_dir, "t", 1, 5)
    consumer = consumers(ConsumerConfig(group_id="g", auto_offset_reset="earliest"))
    for call in (
        lambda: consumer.assign([partition]),
        lambda: consumer.beginning_offsets([partition]),
        lambda: consumer.end_offsets([partition]),
        lambda: consumer.offsets_for_times({partition: 0}),
        lambda: consumer.committed([partition]),
        lambda: consumer.commit({partition: 1}),
        lambda: consumer.seek_to_beginning([partition]),
    ):
        with pytest.raises((InvalidOffsetError, InvalidTopicError)):
            call()


def test_subscribe_refuses_one_string_which_would_read_as_its_characters(consumers: Callable[..., Consumer]) -> None:
    with pytest.raises(InvalidConfigError, match="topics = 'orders' is invalid; accepted: a collection of topic"):
        consumers(ConsumerConfig(group_id="g")).subscribe("orders")


def test_a_seek_past_the_log_end_is_reset_by_the_policy(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 1, 20)
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest"))
    consumer.assign([tp("t", 0)])
    consumer.seek(tp("t", 0), 500)
    assert consumer.position(tp("t", 0)) == 500
    assert [r.offset for r in consumer.poll(timeout_ms=1000)] == list(range(20))


# -- auto.offset.reset ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("reset", "start"), [("earliest", 0), ("latest", 30)])
def test_auto_offset_reset_without_a_committed_offset(
    log_dir: LogDirectory, consumers: Callable[..., Consumer], reset: str, start: int
) -> None:
    fill(log_dir, "t", 1, 30)
    consumer = consumers(ConsumerConfig(group_id="fresh", auto_offset_reset=reset, enable_auto_commit=False))
    consumer.assign([tp("t", 0)])
    assert consumer.position(tp("t", 0)) == start
    append(log_dir, "t", 0, keyed_table(5, start=30))
    assert [r.offset for r in consumer.poll(timeout_ms=1000, max_records=100)] == list(range(start, 35))


def test_auto_offset_reset_none_without_a_committed_offset_fails_at_poll(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 1, 30)
    consumer = consumers(ConsumerConfig(group_id="fresh", auto_offset_reset="none", enable_auto_commit=False))
    consumer.assign([tp("t", 0)])
    assert consumer.assignment() == {tp("t", 0)}
    for _ in range(2):  # every poll, until the application picks a position
        with pytest.raises(OffsetOutOfRangeError, match="t-0 .*auto.offset.reset is none"):
            consumer.poll(timeout_ms=100)
    with pytest.raises(OffsetOutOfRangeError, match="t-0"):
        consumer.position(tp("t", 0))
    consumer.seek(tp("t", 0), 25)
    assert [r.offset for r in consumer.poll(timeout_ms=1000)] == list(range(25, 30))


def test_auto_offset_reset_none_returns_what_other_partitions_gave_before_raising(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 20)
    OffsetStore(log_dir).commit("g", {tp("t", 0): OffsetAndMetadata(0), tp("t", 1): OffsetAndMetadata(5)})
    log = log_dir.partition("t", 1)
    try:
        log.raise_log_start_offset(10)
    finally:
        log.close()
    consumer = consumers(ConsumerConfig(group_id="g", auto_offset_reset="none", enable_auto_commit=False))
    consumer.assign([tp("t", 0), tp("t", 1)])
    assert [(r.partition, r.offset) for r in consumer.poll(max_records=100)] == [(0, o) for o in range(20)]
    with pytest.raises(OffsetOutOfRangeError, match="position 5 of t-1"):
        consumer.poll()
    consumer.seek_to_beginning([tp("t", 1)])
    assert [(r.partition, r.offset) for r in consumer.poll(max_records=100)] == [(1, o) for o in range(10, 20)]


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_auto_offset_reset_when_the_log_start_moves_past_the_position(
    log_dir: LogDirectory, consumers: Callable[..., Consumer], reset: str
) -> None:
    fill(log_dir, "t", 1, 100)
    OffsetStore(log_dir).commit("g", {tp("t", 0): OffsetAndMetadata(10)})
    consumer = consumers(ConsumerConfig(group_id="g", auto_offset_reset=reset, enable_auto_commit=False))
    consumer.assign([tp("t", 0)])
    assert consumer.position(tp("t", 0)) == 10  # the committed offset, whatever the policy
    assert [r.offset for r in consumer.poll(max_records=5)] == list(range(10, 15))

    log = log_dir.partition("t", 0)
    try:
        assert log.raise_log_start_offset(60) == 60  # DeleteRecords (or retention) below offset 60
    finally:
        log.close()
    if reset == "none":
        with pytest.raises(OffsetOutOfRangeError, match="position 15 of t-0 is outside its log \\[60, 100\\]"):
            consumer.poll(timeout_ms=100)
        return
    wait_ms = 1000 if reset == "earliest" else 100  # "latest" has nothing to wait for
    records = consumer.poll(timeout_ms=wait_ms, max_records=1000)
    assert [r.offset for r in records] == (list(range(60, 100)) if reset == "earliest" else [])
    assert consumer.position(tp("t", 0)) == 100

    # A committed offset below the log start is reset the same way when a consumer starts from it.
    restarted = consumers(ConsumerConfig(group_id="g", auto_offset_reset=reset, enable_auto_commit=False))
    restarted.assign([tp("t", 0)])
    records = restarted.poll(timeout_ms=wait_ms, max_records=1000)
    assert [r.offset for r in records] == (list(range(60, 100)) if reset == "earliest" else [])


# -- commits --------------------------------------------------------------------------------------------------


def test_commit_and_committed_round_trip_and_restart_from_the_commit(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 40)
    p0, p1 = tp("t", 0), tp("t", 1)
    config = ConsumerConfig(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=15)
    consumer = consumers(config)
    consumer.assign([p0, p1])
    assert consumer.committed([p0, p1]) == {p0: None, p1: None}
    consumer.poll()  # 15 records of p0
    consumer.commit()
    assert consumer.committed([p0, p1]) == {p0: OffsetAndMetadata(15), p1: OffsetAndMetadata(0)}
    consumer.commit({p1: OffsetAndMetadata(7, "checkpoint-7"), ("t", 0): 12})  # type: ignore[dict-item]
    assert consumer.committed([p0, p1]) == {p0: OffsetAndMetadata(12), p1: OffsetAndMetadata(7, "checkpoint-7")}
    consumer.close()

    restarted = consumers(config)
    restarted.assign([p0, p1])
    assert (restarted.position(p0), restarted.position(p1)) == (12, 7)
    records = restarted.poll(max_records=100)
    assert offsets_of(records) == {1: list(range(7, 40)), 0: list(range(12, 40))}


def test_manual_commits_do_not_leak_file_descriptors(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 1, 10)
    consumer = consumers(ConsumerConfig(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False))
    consumer.assign([tp("t", 0)])
    consumer.commit({tp("t", 0): 1})
    before = len(os.listdir("/proc/self/fd"))
    for offset in range(2, 22):
        consumer.commit({tp("t", 0): offset})
    assert len(os.listdir("/proc/self/fd")) == before
    assert consumer.committed([tp("t", 0)]) == {tp("t", 0): OffsetAndMetadata(21)}


def test_commit_and_committed_need_a_group_id(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 1, 5)
    consumer = consumers(ConsumerConfig(auto_offset_reset="earliest"))
    consumer.assign([tp("t", 0)])
    with pytest.raises(InvalidConfigError, match="commit needs a group.id"):
        consumer.commit()
    with pytest.raises(InvalidConfigError, match="committed needs a group.id"):
        consumer.committed([tp("t", 0)])
    with pytest.raises(InvalidConfigError, match="subscribe needs a group.id"):
        consumer.subscribe(["t"])


def test_auto_commit_commits_what_earlier_polls_returned_every_interval(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 1, 100)
    p0 = tp("t", 0)
    consumer = consumers(
        ConsumerConfig(group_id="g", auto_offset_reset="earliest", auto_commit_interval_ms=300, max_poll_records=10)
    )
    assert consumer.config.enable_auto_commit is True  # the default with a group id
    consumer.assign([p0])
    assert len(consumer.poll()) == 10
    assert consumer.committed([p0])[p0] in (None, OffsetAndMetadata(0))  # no interval has passed yet
    time.sleep(0.35)
    assert [r.offset for r in consumer.poll()] == list(range(10, 20))
    # The interval passed: the poll committed what the application had received before it, not the
    # records it is about to return (those would be lost if the application died processing them).
    assert consumer.committed([p0])[p0] == OffsetAndMetadata(10)
    consumer.poll()
    assert consumer.committed([p0])[p0] == OffsetAndMetadata(10)  # not due again yet
    consumer.close()  # commits on the way out
    assert consumers(ConsumerConfig(group_id="g")).committed([p0])[p0] == OffsetAndMetadata(30)


# -- subscriptions and groups ---------------------------------------------------------------------------------


def test_pattern_subscription_picks_up_topics_created_later(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "ev-a", 1, 5)
    fill(log_dir, "other", 1, 5)
    OffsetStore(log_dir).commit("elsewhere", {tp("other", 0): OffsetAndMetadata(1)})  # makes __consumer_offsets
    consumer = consumers(group_config())
    consumer.subscribe(pattern="ev-.*|__consumer_offsets")
    records = consumer.poll(timeout_ms=2000)
    assert {(r.topic, r.offset) for r in records} == {("ev-a", o) for o in range(5)}
    assert consumer.subscription() == {"ev-a"}  # internal topics are left out of patterns
    consumer.commit()  # the new topic's rebalance revokes ev-a-0 (eager): it resumes from here

    fill(log_dir, "ev-b", 2, 3)
    got: list[ConsumerRecord] = []
    wait_for(lambda: len(got) == 6, "records of ev-b", step=lambda: got.extend(consumer.poll(timeout_ms=50)))
    assert sorted((r.topic, r.partition, r.offset) for r in got) == [("ev-b", p, o) for p in range(2) for o in range(3)]
    assert consumer.subscription() == {"ev-a", "ev-b"}
    assert consumer.assignment() == {tp("ev-a", 0), tp("ev-b", 0), tp("ev-b", 1)}


def test_subscribe_arguments_are_checked(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    consumer = consumers(group_config())
    with pytest.raises(InvalidConfigError, match="exactly one"):
        consumer.subscribe()
    with pytest.raises(InvalidConfigError, match="exactly one"):
        consumer.subscribe(["t"], pattern="t.*")
    with pytest.raises(InvalidConfigError, match="not a valid regular expression"):
        consumer.subscribe(pattern="(")


class Recorder:
    """A rebalance listener that records what it is told, and can commit on revocation."""

    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", lost))

    def take(self) -> list[tuple[str, set[TopicPartition]]]:
        events, self.events = self.events, []
        return events


def consume_together(consumers: list[Consumer], total: int) -> Counter[tuple[int, int]]:
    """Poll the consumers in turn until they have read ``total`` records between them."""
    seen: Counter[tuple[int, int]] = Counter()

    def step() -> None:
        for consumer in consumers:
            seen.update((r.partition, r.offset) for r in consumer.poll(timeout_ms=10))

    wait_for(lambda: sum(seen.values()) >= total, f"{total} records", step=step)
    for _ in range(5):
        step()  # nothing more arrives: no record is read twice
    return seen


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_two_consumers_split_the_partitions_and_read_every_record_once(
    log_dir: LogDirectory, consumers: Callable[..., Consumer], assignor: str
) -> None:
    fill(log_dir, "t", 6, 60)
    config = group_config(
        partition_assignment_strategy=(assignor,),
        enable_auto_commit=True,  # commits on revocation; the interval is too long to matter
        auto_commit_interval_ms=60_000,
        max_poll_records=7,
    )
    first, second = consumers(config), consumers(config)
    first.subscribe(["t"])
    assert len(first.poll(timeout_ms=2000)) == 7
    assert first.assignment() == {tp("t", p) for p in range(6)}
    consumed = Counter((0, o) for o in range(7))
    second.subscribe(["t"])

    consumed += consume_together([first, second], 6 * 60 - 7)
    assert consumed == Counter((p, o) for p in range(6) for o in range(60))
    assert first.assignment().isdisjoint(second.assignment())
    assert len(first.assignment()) == len(second.assignment()) == 3
    description = describe_group(log_dir, "g")
    assert description is not None
    assert (description.state, description.assignor, len(description.members)) == ("Stable", assignor, 2)


def test_rebalance_listener_eager(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 4, 5)
    config = group_config(partition_assignment_strategy=("range",), client_id="a")
    first, second = consumers(config), consumers(group_config(partition_assignment_strategy=("range",), client_id="b"))
    heard_first, heard_second = Recorder(), Recorder()
    everything = {tp("t", p) for p in range(4)}

    first.subscribe(["t"], listener=heard_first)
    first.poll(timeout_ms=1000)
    assert heard_first.take() == [("assigned", everything)]

    second.subscribe(["t"], listener=heard_second)
    wait_for(
        lambda: second.assignment() != set(),
        "the second member's partitions",
        step=lambda: [c.poll(timeout_ms=10) for c in (first, second)],
    )
    # Eager: the first member gave up everything, then took back its share; client ids order a before b.
    assert heard_first.take() == [("revoked", everything), ("assigned", {tp("t", 0), tp("t", 1)})]
    assert heard_second.take() == [("assigned", {tp("t", 2), tp("t", 3)})]

    second.close()  # leaves: the first member is given everything back
    wait_for(
        lambda: first.assignment() == everything,
        "the first member's new assignment",
        step=lambda: first.poll(timeout_ms=10),
    )
    assert heard_first.take() == [("revoked", {tp("t", 0), tp("t", 1)}), ("assigned", everything)]
    assert heard_second.take() == [("revoked", {tp("t", 2), tp("t", 3)})]  # closing revokes, as in Kafka


def test_rebalance_listener_cooperative(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 4, 5)
    first = consumers(group_config(partition_assignment_strategy=("cooperative-sticky",), client_id="a"))
    second = consumers(group_config(partition_assignment_strategy=("cooperative-sticky",), client_id="b"))
    heard_first, heard_second = Recorder(), Recorder()
    everything = {tp("t", p) for p in range(4)}

    first.subscribe(["t"], listener=heard_first)
    first.poll(timeout_ms=1000)
    assert heard_first.take() == [("assigned", everything)]
    second.subscribe(["t"], listener=heard_second)
    wait_for(
        lambda: len(second.assignment()) == 2,
        "the second member's partitions",
        step=lambda: [c.poll(timeout_ms=10) for c in (first, second)],
    )
    moved = second.assignment()
    assert first.assignment() == everything - moved
    # Cooperative: only what moved is revoked, and nothing is taken back.
    assert heard_first.take() == [("revoked", moved)]
    assert heard_second.take() == [("assigned", moved)]


def test_rebalance_listener_hears_of_lost_partitions_and_the_consumer_rejoins(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 5)
    consumer = consumers(group_config())
    heard = Recorder()
    consumer.subscribe(["t"], listener=heard)
    assert len(consumer.poll(timeout_ms=1000, max_records=100)) == 10
    consumer.commit()
    assert heard.take() == [("assigned", {tp("t", 0), tp("t", 1)})]
    description = describe_group(log_dir, "g")
    assert description is not None
    old_member = description.members[0].member_id

    # The group removes the member (as when its session times out without it noticing).
    coordinator = GroupCoordinator(log_dir, "g")
    try:
        coordinator.leave(old_member)
    finally:
        coordinator.close()
    wait_for(
        lambda: ("lost", {tp("t", 0), tp("t", 1)}) in heard.events,
        "the partitions reported lost",
        step=lambda: consumer.poll(timeout_ms=10),
    )
    wait_for(lambda: len(consumer.assignment()) == 2, "the rejoin", step=lambda: consumer.poll(timeout_ms=10))
    assert heard.take() == [("lost", {tp("t", 0), tp("t", 1)}), ("assigned", {tp("t", 0), tp("t", 1)})]
    description = describe_group(log_dir, "g")
    assert description is not None
    assert [m.member_id for m in description.members] != [old_member]
    assert consumer.poll(timeout_ms=100) == []  # it goes on from the commit: nothing read twice


def test_auto_commit_failures_are_not_raised_by_poll(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 2, 5)
    consumer = consumers(group_config(enable_auto_commit=True, auto_commit_interval_ms=1))
    heard = Recorder()
    consumer.subscribe(["t"], listener=heard)
    assert len(consumer.poll(timeout_ms=1000, max_records=100)) == 10
    description = describe_group(log_dir, "g")
    assert description is not None
    coordinator = GroupCoordinator(log_dir, "g")
    try:
        coordinator.leave(description.members[0].member_id)  # removed behind the consumer's back
    finally:
        coordinator.close()
    # The commits of the removed member are refused, which poll logs as Kafka does, and goes on.
    wait_for(
        lambda: any(kind == "lost" for kind, _ in heard.events),
        "the partitions reported lost",
        step=lambda: consumer.poll(timeout_ms=10),
    )
    wait_for(lambda: len(consumer.assignment()) == 2, "the rejoin", step=lambda: consumer.poll(timeout_ms=10))


def test_a_partition_claimed_between_polls_and_moved_away_is_let_go_without_being_fetched(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 5)
    a = consumers(group_config(client_id="a"))
    b = consumers(group_config(client_id="b"))
    c = consumers(group_config(client_id="c"))
    heard = Recorder()
    a.subscribe(["t"], listener=heard)
    a.poll(timeout_ms=1000, max_records=100)
    a.commit()
    b.subscribe(["t"])
    wait_for(
        lambda: b.assignment() == {tp("t", 1)}, "b's partition", step=lambda: [x.poll(timeout_ms=10) for x in (a, b)]
    )
    assert heard.take() == [
        ("assigned", {tp("t", 0), tp("t", 1)}),
        ("revoked", {tp("t", 0), tp("t", 1)}),
        ("assigned", {tp("t", 0)}),
    ]
    b.close()

    # a's heartbeat thread claims t-1 again, but before a polls, c joins and is given t-1.
    state = GroupCoordinator(log_dir, "g")
    try:
        wait_for(
            lambda: len(set(state._read().owners.values())) == 1 and len(state._read().owners) == 2,
            "a's heartbeat to claim t-1",
        )
        c.subscribe(["t"])
        c.poll()
        assert state._read().assignment[next(m for m in state._read().members if m.startswith("c-"))] == [tp("t", 1)]
    finally:
        state.close()
    records = a.poll(timeout_ms=100, max_records=100)
    assert {r.partition for r in records} <= {0}
    assert heard.take() == [("revoked", {tp("t", 0)}), ("assigned", {tp("t", 0)})]
    assert a.assignment() == {tp("t", 0)}
    records = []

    def poll_both() -> None:
        for x in (a, c):
            records.extend(x.poll(timeout_ms=10))

    wait_for(lambda: c.assignment() == {tp("t", 1)}, "c's partition", step=poll_both)
    assert a.assignment() == {tp("t", 0)}
    assert heard.take() == []


def test_max_poll_interval_exceeded_leaves_the_group_and_the_next_poll_rejoins(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 5)
    consumer = consumers(group_config(max_poll_interval_ms=300))
    heard = Recorder()
    consumer.subscribe(["t"], listener=heard)
    assert len(consumer.poll(timeout_ms=1000, max_records=100)) == 10
    assert heard.take() == [("assigned", {tp("t", 0), tp("t", 1)})]

    # The application takes too long between polls: the heartbeat thread leaves the group.
    wait_for(lambda: not describe_group(log_dir, "g").members, "the member to leave")  # type: ignore[union-attr]
    with pytest.raises(CommitFailedError):
        consumer.commit()
    assert consumer.committed([tp("t", 0)]) == {tp("t", 0): None}

    # Lost, rejoined, and read again from the start: nothing had been committed.
    assert len(consumer.poll(timeout_ms=1000, max_records=100)) == 10
    assert heard.take() == [("lost", {tp("t", 0), tp("t", 1)}), ("assigned", {tp("t", 0), tp("t", 1)})]
    description = describe_group(log_dir, "g")
    assert description is not None and len(description.members) == 1
    consumer.commit()  # a member again: commits go through
    assert consumer.committed([tp("t", 0)]) == {tp("t", 0): OffsetAndMetadata(5)}


def test_time_spent_inside_poll_does_not_count_toward_max_poll_interval(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 1, 5)

    class Slow(Recorder):
        def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            super().on_partitions_assigned(assigned)
            time.sleep(0.6)  # slow work inside poll, while heartbeats go on

    consumer = consumers(group_config(max_poll_interval_ms=200))
    heard = Slow()
    consumer.subscribe(["t"], listener=heard)
    assert len(consumer.poll(timeout_ms=1000)) == 5
    member = describe_group(log_dir, "g").members  # type: ignore[union-attr]
    assert len(member) == 1
    assert consumer.poll() == []
    consumer.commit()  # still a member
    assert heard.take() == [("assigned", {tp("t", 0)})]
    assert describe_group(log_dir, "g").members == member  # type: ignore[union-attr]


def test_static_members_are_fenced_by_a_newer_instance_and_do_not_leave_on_close(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 5)
    config = group_config(group_instance_id="worker-1", session_timeout_ms=5000)
    old = consumers(config)
    old.subscribe(["t"])
    assert len(old.poll(timeout_ms=1000, max_records=100)) == 10
    old.commit()
    generation = describe_group(log_dir, "g").generation  # type: ignore[union-attr]

    new = consumers(config)
    new.subscribe(["t"])
    assert new.poll(timeout_ms=200) == []  # took the old instance's place and its committed positions
    assert new.assignment() == {tp("t", 0), tp("t", 1)}
    description = describe_group(log_dir, "g")
    assert description is not None
    assert description.generation == generation
    assert [m.group_instance_id for m in description.members] == ["worker-1"]

    with pytest.raises(FencedInstanceIdError, match="worker-1"):
        wait_for(lambda: False, "the fencing", step=lambda: old.poll(timeout_ms=10))
    assert old.assignment() == set()
    with pytest.raises(FencedInstanceIdError):  # fenced for good: it does not take the place back
        old.poll(timeout_ms=10)
    assert new.poll(timeout_ms=200) == []
    assert new.assignment() == {tp("t", 0), tp("t", 1)}
    assert describe_group(log_dir, "g").generation == generation  # type: ignore[union-attr]
    old.close()

    new.close()  # a static member stays in the group until its session times out
    description = describe_group(log_dir, "g")
    assert description is not None
    assert [m.group_instance_id for m in description.members] == ["worker-1"]


def test_subscribing_again_changes_the_topics(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "a", 2, 3)
    fill(log_dir, "b", 1, 4)
    consumer = consumers(group_config())
    consumer.subscribe(["a"])
    assert {(r.topic, r.partition) for r in consumer.poll(timeout_ms=1000, max_records=100)} == {("a", 0), ("a", 1)}
    consumer.subscribe(["b"])
    records: list[ConsumerRecord] = []
    wait_for(lambda: len(records) == 4, "b's records", step=lambda: records.extend(consumer.poll(timeout_ms=10)))
    assert consumer.assignment() == {tp("b", 0)}
    assert consumer.subscription() == {"b"}
    assert {r.topic for r in records} == {"b"}


def test_a_group_consumer_restarts_from_the_committed_positions(
    log_dir: LogDirectory, consumers: Callable[..., Consumer]
) -> None:
    fill(log_dir, "t", 2, 20)
    consumer = consumers(group_config(max_poll_records=15))
    consumer.subscribe(["t"])
    first = consumer.poll(timeout_ms=1000)
    consumer.commit()
    consumer.close()
    restarted = consumers(group_config(max_poll_records=100))
    restarted.subscribe(["t"])
    rest = restarted.poll(timeout_ms=1000)
    seen = Counter((r.partition, r.offset) for r in [*first, *rest])
    assert seen == Counter((p, o) for p in range(2) for o in range(20))


def test_unsubscribe_commits_and_leaves(log_dir: LogDirectory, consumers: Callable[..., Consumer]) -> None:
    fill(log_dir, "t", 1, 10)
    consumer = consumers(group_config(enable_auto_commit=True, auto_commit_interval_ms=60_000))
    consumer.subscribe(["t"])
    assert len(consumer.poll(timeout_ms=1000)) == 10
    consumer.unsubscribe()
    assert consumer.assignment() == set()
    assert consumer.subscription() == set()
    assert consumer.committed([tp("t", 0)]) == {tp("t", 0): OffsetAndMetadata(10)}
    assert describe_group(log_dir, "g").members == ()  # type: ignore[union-attr]
    consumer.assign([tp("t", 0)])  # free to assign by hand now
    assert consumer.position(tp("t", 0)) == 10


# -- configuration --------------------------------------------------------------------------------------------


def test_config_defaults() -> None:
    config = ConsumerConfig()
    assert config.auto_offset_reset is AutoOffsetReset.LATEST
    assert config.enable_auto_commit is False  # no group id
    assert ConsumerConfig(group_id="g").enable_auto_commit is True
    assert ConsumerConfig(auto_offset_reset="none").auto_offset_reset is AutoOffsetReset.NONE


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"auto_offset_reset": "smallest"},
            "auto.offset.reset = 'smallest' is invalid; accepted: earliest, latest, none",
        ),
        ({"session_timeout_ms": 0}, "session.timeout.ms = 0 is invalid; accepted: an integer from 1 to 2147483647"),
        ({"max_poll_records": "5"}, "max.poll.records = '5' is invalid; accepted: an integer from 1"),
        ({"max_poll_records": 2**31}, "max.poll.records = 2147483648 is invalid; accepted: an integer from 1 to"),
        ({"max_partition_fetch_bytes": 2**40}, "max.partition.fetch.bytes = 1099511627776 is invalid"),
        ({"max_poll_interval_ms": True}, r"max.poll.interval.ms = True is invalid"),
        (
            {"session_timeout_ms": 1000, "heartbeat_interval_ms": 1000},
            "heartbeat.interval.ms = 1000 must be lower than session.timeout.ms = 1000",
        ),
        ({"enable_auto_commit": True}, "enable.auto.commit = true needs a group.id"),
        ({"group_id": ""}, "group.id '' is invalid; accepted: a non-empty string"),
        ({"partition_assignment_strategy": ()}, "partition.assignment.strategy is empty"),
        ({"partition_assignment_strategy": ["range"]}, "accepted: a tuple of assignor names"),
        ({"partition_assignment_strategy": ("fancy",)}, "'fancy' is not a known assignor; accepted: range"),
        ({"group_instance_id": ""}, "group.instance.id = '' is invalid; accepted: a non-empty string"),
    ],
)
def test_config_validation(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        ConsumerConfig(**settings)


def test_config_from_kafka_property_names() -> None:
    config = ConsumerConfig.from_properties(
        {
            "group.id": "billing",
            "client.id": "c1",
            "group.instance.id": "host-1",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "FALSE",
            "auto.commit.interval.ms": "1000",
            "session.timeout.ms": "10000",
            "heartbeat.interval.ms": 3000,
            "max.poll.interval.ms": "60000",
            "max.poll.records": "50",
            "max.partition.fetch.bytes": "65536",
            "partition.assignment.strategy": "cooperative-sticky, org.apache.kafka.clients.consumer.RangeAssignor",
            "exclude.internal.topics": "true",
            "include.headers": "false",
        }
    )
    assert config == ConsumerConfig(
        group_id="billing",
        client_id="c1",
        group_instance_id="host-1",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        auto_commit_interval_ms=1000,
        session_timeout_ms=10000,
        heartbeat_interval_ms=3000,
        max_poll_interval_ms=60000,
        max_poll_records=50,
        max_partition_fetch_bytes=65536,
        partition_assignment_strategy=("cooperative-sticky", "org.apache.kafka.clients.consumer.RangeAssignor"),
        exclude_internal_topics=True,
        include_headers=False,
    )


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"fetch.min.bytes": "1"}, "unknown consumer property 'fetch.min.bytes'; accepted: .*group.id"),
        ({"group_id": "g"}, "unknown consumer property 'group_id'"),
        ({"max.poll.records": "many"}, "max.poll.records = 'many' is invalid; accepted: an integer"),
        ({"max.poll.records": "0"}, "max.poll.records = 0 is invalid; accepted: an integer from 1 to 2147483647"),
        ({"enable.auto.commit": "yes"}, "enable.auto.commit = 'yes' is invalid; accepted: true, false"),
        (
            {"auto.offset.reset": "largest"},
            "auto.offset.reset = 'largest' is invalid; accepted: earliest, latest, none",
        ),
        ({"session.timeout.ms": "100", "heartbeat.interval.ms": "200"}, "must be lower than session.timeout.ms"),
        ({"enable.auto.commit": "true"}, "enable.auto.commit = true needs a group.id"),
        ({"partition.assignment.strategy": " , "}, "partition.assignment.strategy is empty"),
    ],
)
def test_config_from_properties_refuses_bad_input(properties: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        ConsumerConfig.from_properties(properties)


@pytest.mark.parametrize("name", ["enable_auto_commit", "exclude_internal_topics", "include_headers"])
def test_boolean_settings_must_be_booleans(name: str) -> None:
    with pytest.raises(
        InvalidConfigError, match=rf"{name.replace('_', '.')} = 'false' is invalid; accepted: true or false"
    ):
        ConsumerConfig(group_id="g", **{name: "false"})  # type: ignore[arg-type]


def test_read_committed_stops_at_an_open_transaction_and_skips_aborted_ones(log_dir: LogDirectory) -> None:
    log_dir.topics.create("txn", 1)
    log = log_dir.partition("txn", 0)

    def transaction(pid: int, values: list[bytes], marker: ControlRecordType | None) -> None:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
        log.append_arrow(pa.table({"value": pa.array(values, pa.binary())}), settings)
        if marker is not None:
            end = BatchSettings(producer_id=pid, producer_epoch=0, transactional=True)
            log.append(encode_control_batch(*end_txn_marker(marker, 0), end))

    log.append_arrow(pa.table({"value": [b"plain"]}))  # offset 0
    transaction(1, [b"aborted-1", b"aborted-2"], ControlRecordType.ABORT)  # 1-2, marker 3
    transaction(2, [b"committed"], ControlRecordType.COMMIT)  # 4, marker 5
    transaction(3, [b"open"], None)  # 6: the last stable offset
    log.append_arrow(pa.table({"value": [b"after"]}))  # 7: not visible until 3 ends
    part = tp("txn", 0)

    committed = Consumer(log_dir, ConsumerConfig(isolation_level="read_committed", auto_offset_reset="earliest"))
    uncommitted = Consumer(log_dir, ConsumerConfig(auto_offset_reset="earliest"))
    try:
        committed.assign([part])
        uncommitted.assign([part])
        assert committed.end_offsets([part]) == {part: 6} and uncommitted.end_offsets([part]) == {part: 8}
        assert [r.value for r in committed.poll(timeout_ms=200)] == [b"plain", b"committed"]
        assert committed.poll(timeout_ms=50) == []  # past the COMMIT marker, up to the open transaction
        assert committed.position(part) == 6
        every = [r.value for r in uncommitted.poll(timeout_ms=200)]
        assert every == [b"plain", b"aborted-1", b"aborted-2", b"committed", b"open", b"after"]
        end = BatchSettings(producer_id=3, producer_epoch=0, transactional=True)
        log.append(encode_control_batch(*end_txn_marker(ControlRecordType.COMMIT, 0), end))
        assert [r.value for r in committed.poll(timeout_ms=200)] == [b"open", b"after"]
    finally:
        committed.close()
        uncommitted.close()


def test_isolation_level_is_checked() -> None:
    with pytest.raises(
        InvalidConfigError,
        match=r"isolation.level = 'serializable' is invalid; accepted: read_uncommitted, read_committed",
    ):
        ConsumerConfig.from_properties({"isolation.level": "serializable"})


def test_the_broker_connections_configs_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    kafka_style = {"bootstrap.servers": "broker:9092", "ssl.truststore.location": "/etc/kafka/truststore.jks"}
    with caplog.at_level(logging.WARNING, logger="pysparklog.broker_configs"):
        config = ConsumerConfig.from_properties({**kafka_style, "group.id": "g"})
    assert config == ConsumerConfig.from_properties({"group.id": "g"})
    assert "pysparklog consumer: ignoring bootstrap.servers, ssl.truststore.location" in caplog.text
    with pytest.raises(InvalidConfigError, match="unknown consumer property 'bootstrap'"):
        ConsumerConfig.from_properties({"bootstrap": "broker:9092"})
    assert not [f.name for f in fields(ConsumerConfig) if is_broker_config(f.name.replace("_", "."))]
