"""``pysparklog.producer``: records land where Kafka's producer puts them and come back identical;
batching by ``batch.size`` and ``linger.ms``; compression, producer ids and sequences in the batch
headers; retried appends written once; errors on the futures of their records; configs."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from pysparklog import (
    AppendInfo,
    InvalidConfigError,
    InvalidRecordError,
    LogDirectory,
    OutOfOrderSequenceError,
    PartitionLog,
    PySparkLogError,
    UnknownTopicError,
)
from pysparklog.broker_configs import is_broker_config
from pysparklog.errors import InvalidTimestampError, RecordTooLargeError
from pysparklog.partitioner import NullKeyStrategy
from pysparklog.producer import Producer, ProducerConfig, RecordMetadata
from pysparklog.producer.config import ACCEPTED_CONFIGS
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.arrow_records import HEADER_TYPE, BatchSettings, encode_arrow
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.memory_records import EntryTable
from tests.conftest import read_all

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# A linger no test waits for: records stay in the producer until flush, close or a full batch.
FOREVER_MS = 600_000


@pytest.fixture
def logs(tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("three", 3)
    logs.topics.create("one", 1)
    return logs


@pytest.fixture
def producer(logs: LogDirectory) -> Iterator[Producer]:
    with Producer(logs, ProducerConfig(linger_ms=FOREVER_MS)) as producer:
        yield producer


def entries(logs: LogDirectory, topic: str, partition: int) -> EntryTable:
    """Every batch header of a partition, in log order."""
    log = logs.partition(topic, partition)
    view = log.view()
    tables = [
        chunk.entries.rows
        for base in view.segment_bases
        for chunk in log.segment(base).chunks(0, view.end_of(base, log.segment(base)))
    ]
    rows = np.concatenate(tables) if tables else np.empty((0, k.ENTRY_FIELDS), np.int64)
    return EntryTable(rows, 0, False)


def kafka_partition(key: bytes, partitions: int) -> int:
    """Where kafka-python's Java-compatible DefaultPartitioner sends a key."""
    hashed: int = kafka_python_murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


def wait_until(condition: Callable[[], bool], seconds: float = 10) -> float:
    """Seconds until ``condition`` held (polled); fails the test after ``seconds``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "condition not met in time"
        time.sleep(0.01)
    return time.monotonic() - start


# -- where records go and what comes back -------------------------------------------------------


def test_send_returns_topic_partition_offset_and_timestamp(producer: Producer) -> None:
    before = int(time.time() * 1000)
    first = producer.send("one", b"a", timestamp_ms=1_700_000_000_123)
    second = producer.send("one", b"b")
    producer.flush()
    assert first.done() and second.done()
    assert first.get() == RecordMetadata("one", 0, 0, 1_700_000_000_123)
    metadata = second.get(timeout=0)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("one", 0, 1)
    assert before <= metadata.timestamp <= int(time.time() * 1000)


def test_keyed_records_land_where_kafka_puts_them_and_read_back_identical(
    logs: LogDirectory, producer: Producer
) -> None:
    sent = [
        (
            f"key-{i}".encode(),
            f"value {i}".encode() if i % 7 else None,
            [("trace", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None,
            1_700_000_000_000 + i,
        )
        for i in range(300)
    ]
    futures = [producer.send("three", v, key=key, headers=h, timestamp_ms=ts) for key, v, h, ts in sent]
    producer.flush()
    metadata = [f.get() for f in futures]
    assert [m.partition for m in metadata] == [kafka_partition(key, 3) for key, *_ in sent]
    for partition in range(3):
        records = read_all(logs.partition("three", partition), include_headers=True).to_pylist()
        expected = [(m.offset, *record) for m, record in zip(metadata, sent, strict=True) if m.partition == partition]
        assert [r["offset"] for r in records] == [e[0] for e in expected] == list(range(len(expected)))
        for record, (_offset, key, value, headers, ts) in zip(records, expected, strict=True):
            assert (record["key"], record["value"], record["timestamp"].timestamp() * 1000) == (key, value, ts)
            assert record["headers"] == (None if headers is None else [{"key": k, "value": v} for k, v in headers])


def test_an_explicit_partition_overrides_the_key(producer: Producer) -> None:
    key = b"foobar"  # murmur2 sends it to partition 0 of 3
    futures = [producer.send("three", b"v", key=key, partition=p) for p in (2, 1, 0)]
    producer.flush()
    assert [f.get().partition for f in futures] == [2, 1, 0]


def test_unkeyed_records_stick_to_a_partition_until_a_batch_is_full(logs: LogDirectory) -> None:
    config = ProducerConfig(batch_size=1000, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        futures = [producer.send("three", b"x" * 100) for _ in range(100)]
    partitions = [f.get().partition for f in futures]
    # Uniform sticky partitioning: a run of 10 records (1000 bytes) per partition choice.
    assert all(len(set(partitions[i : i + 10])) == 1 for i in range(0, 100, 10))


def test_round_robin_partitioner_class_spreads_every_record(logs: LogDirectory) -> None:
    config = ProducerConfig.from_properties(
        {"partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner", "linger.ms": "600000"}
    )
    assert (config.partitioner.strategy, config.partitioner.ignore_keys) == (NullKeyStrategy.ROUND_ROBIN, True)
    with Producer(logs, config) as producer:
        futures = [producer.send("three", b"v", key=b"same key") for _ in range(6)]
    assert [f.get().partition for f in futures] == [0, 1, 2, 0, 1, 2]


def test_a_custom_partitioner_decides_records_without_a_partition(logs: LogDirectory) -> None:
    def last(table: pa.Table, num_partitions: int) -> np.ndarray:
        return np.full(table.num_rows, num_partitions - 1)

    with Producer(logs, ProducerConfig(partitioner_class=last, linger_ms=FOREVER_MS)) as producer:
        futures = [producer.send("three", b"v", key=b"k"), producer.send("three", b"v", partition=0)]
    assert [f.get().partition for f in futures] == [2, 0]


def test_send_arrow_partitions_as_send_does_and_keeps_the_order_of_earlier_sends(
    logs: LogDirectory, producer: Producer
) -> None:
    earlier = producer.send("three", b"sent first", key=b"k0")
    keys = [f"k{i}".encode() for i in range(1000)]
    table = pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array([b"bulk %d" % i for i in range(1000)], pa.binary()),
            "timestamp": pa.array(np.arange(1000) + 1_700_000_000_000, pa.int64()),
        }
    )
    results = producer.send_arrow("three", table)
    assert earlier.done() and earlier.get().offset == 0
    first_partition = earlier.get().partition
    for partition in range(3):
        expected = [i for i, key in enumerate(keys) if kafka_partition(key, 3) == partition]
        info = results[partition]
        start = 1 if partition == first_partition else 0
        assert (info.first_offset, info.last_offset, info.record_count) == (
            start,
            start + len(expected) - 1,
            len(expected),
        )
        records = read_all(logs.partition("three", partition))
        assert records.column("value").to_pylist()[start:] == [b"bulk %d" % i for i in expected]
        assert records.column("timestamp").cast(pa.int64()).to_pylist()[start:] == [
            1_700_000_000_000 + i for i in expected
        ]


def test_send_arrow_of_many_chunks_keeps_each_partitions_order_and_fills_its_batches(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows of 100 rows: each partition's rows span many, so the last batch of a window is carried on.
    monkeypatch.setattr("pysparklog.producer.sender._BULK_ROWS", 100)
    rows = 3000
    partitions = np.random.default_rng(5).integers(0, 3, rows)
    table = pa.Table.from_batches(
        pa.table(
            {
                "value": pa.array([b"%040d" % i for i in range(rows)], pa.binary()),
                "headers": pa.array([[{"key": "i", "value": b"%d" % i}] for i in range(rows)], HEADER_TYPE),
                "timestamp": pa.array(np.arange(rows) + 1_700_000_000_000, pa.int64()),
                "partition": pa.array(partitions, pa.int32()),
            }
        ).to_batches(max_chunksize=70)
    )
    with Producer(logs, ProducerConfig(batch_size=512, linger_ms=FOREVER_MS)) as producer:
        results = producer.send_arrow("three", table)
    for partition in range(3):
        expected = table.filter(pa.array(partitions == partition)).combine_chunks()
        records = read_all(logs.partition("three", partition), include_headers=True)
        assert records.column("value").to_pylist() == expected.column("value").to_pylist()
        assert records.column("headers").to_pylist() == expected.column("headers").to_pylist()
        assert records.column("timestamp").cast(pa.int64()).equals(expected.column("timestamp"))
        assert results[partition].record_count == expected.num_rows
        # Batches as full as one encoding of the partition's rows makes them: no window cut one short.
        whole = encode_arrow(expected, BatchSettings(max_batch_bytes=512))
        assert len(entries(logs, "three", partition)) == sum(e.num_batches for e in whole)


def test_send_arrow_honours_a_partition_column(logs: LogDirectory, producer: Producer) -> None:
    table = pa.table(
        {
            "value": pa.array([b"a", b"b", b"c"], pa.binary()),
            "key": pa.array([b"foobar", b"foobar", None], pa.binary()),
            "partition": pa.array([2, None, 1], pa.int32()),
        }
    )
    results = producer.send_arrow("three", table.to_batches()[0])
    assert sorted(results) == [0, 1, 2]  # foobar hashes to partition 0
    assert read_all(logs.partition("three", 2)).column("value").to_pylist() == [b"a"]
    assert read_all(logs.partition("three", 0)).column("value").to_pylist() == [b"b"]


# -- batching ------------------------------------------------------------------------------------


def test_batches_hold_at_most_batch_size_bytes(logs: LogDirectory) -> None:
    config = ProducerConfig(batch_size=1024, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        for i in range(100):
            producer.send("one", b"%099d" % i)
    sizes = entries(logs, "one", 0).sizes
    record_size = int(sizes.max()) // 8  # roughly: about 9 records of 108 encoded bytes fill 1024 bytes
    assert (sizes <= 1024).all() and (sizes[:-1] > 1024 - record_size).all()
    expected = sum(
        e.num_batches for e in encode_arrow(read_all(logs.partition("one", 0)), BatchSettings(max_batch_bytes=1024))
    )
    assert len(sizes) == expected > 10


def test_batch_size_zero_puts_every_record_in_a_batch_of_its_own(logs: LogDirectory) -> None:
    with Producer(logs, ProducerConfig(batch_size=0, linger_ms=FOREVER_MS)) as producer:
        for i in range(5):
            producer.send("one", b"%d" % i)
    assert (entries(logs, "one", 0).record_counts == 1).all()


def test_a_record_becomes_visible_after_linger_without_flush(logs: LogDirectory) -> None:
    log = logs.partition("one", 0)
    with Producer(logs, ProducerConfig(linger_ms=1000)) as producer:
        sent = time.monotonic()
        future = producer.send("one", b"lingering")
        assert log.log_end_offset == 0  # waiting for more records
        wait_until(lambda: log.log_end_offset == 1)
        assert time.monotonic() - sent >= 0.99
        assert future.get(timeout=10).offset == 0


def test_a_full_batch_is_appended_without_waiting_for_linger(logs: LogDirectory) -> None:
    log = logs.partition("one", 0)
    config = ProducerConfig(batch_size=1024, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        futures = [producer.send("one", b"%099d" % i) for i in range(25)]  # two full batches and a part
        wait_until(lambda: futures[0].done())  # its full batch went without waiting for linger.ms
        assert 0 < log.log_end_offset < 25
        assert not futures[-1].done()  # its batch may still fill up
        producer.flush()
        assert log.log_end_offset == 25 and futures[-1].get().offset == 24


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_type_applies_to_every_batch(logs: LogDirectory, codec: str) -> None:
    # Incompressible values: a batch holds about batch.size of them, compressed or not, so there are many.
    values = [np.random.default_rng(i).bytes(200) for i in range(300)]
    with Producer(logs, ProducerConfig(compression_type=codec, batch_size=4096, linger_ms=FOREVER_MS)) as producer:
        for value in values[:150]:
            producer.send("one", value)
        producer.send_arrow("one", pa.table({"value": pa.array(values[150:], pa.binary())}))
    batches = entries(logs, "one", 0)
    assert len(batches) > 2 and (batches.codecs == Codec.from_name(codec)).all()
    assert read_all(logs.partition("one", 0)).column("value").to_pylist() == values


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_hold_about_batch_size_compressed_bytes(logs: LogDirectory, codec: str) -> None:
    # As Kafka's producer: a compressed batch closes once its estimated compressed size reaches batch.size.
    values = [
        b'{"id": %010d, "kind": "click", "page": "/products/%06d"}' % (i, i * 7919 % 10**6) for i in range(30_000)
    ]
    config = ProducerConfig(compression_type=codec, batch_size=8192, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        producer.send_arrow("one", pa.table({"value": pa.array(values[:20_000], pa.binary())}))
        for value in values[20_000:]:
            producer.send("one", value)
    sizes = entries(logs, "one", 0).sizes
    assert 0.7 * 8192 <= np.median(sizes) <= 8192 and sizes.max() <= config.max_request_size
    assert read_all(logs.partition("one", 0)).column("value").to_pylist() == values


# -- idempotence ---------------------------------------------------------------------------------


def test_batches_carry_the_producer_id_epoch_and_sequences(logs: LogDirectory) -> None:
    config = ProducerConfig(batch_size=500, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        for i in range(60):
            producer.send("three", b"%050d" % i, partition=i % 2)
        producer.flush()
        producer.send_arrow("three", pa.table({"value": [b"bulk"] * 20, "partition": pa.array([1] * 20, pa.int8())}))
    for partition, records in ((0, 30), (1, 50)):
        batches = entries(logs, "three", partition)
        counts = batches.record_counts
        assert len(batches) > 3 and counts.sum() == records
        assert (batches.producer_ids == 0).all()  # the log directory's first producer id
        assert (batches.producer_epochs == 0).all()
        assert batches.base_sequences.tolist() == (np.cumsum(counts) - counts).tolist()
    with Producer(logs) as second:
        second.send("three", b"v", partition=2)
    assert entries(logs, "three", 2).producer_ids.tolist() == [1]


def test_without_idempotence_batches_carry_no_producer(logs: LogDirectory) -> None:
    with Producer(logs, ProducerConfig(enable_idempotence=False)) as producer:
        producer.send("one", b"v")
    batch = entries(logs, "one", 0).rows[0]
    assert (batch[k.E_PRODUCER_ID], batch[k.E_PRODUCER_EPOCH], batch[k.E_BASE_SEQUENCE]) == (-1, -1, -1)
    assert not (Path(logs.path) / "pysparklog-producer-ids").exists()


def test_sequences_wrap_at_2_31(logs: LogDirectory) -> None:
    config = ProducerConfig(batch_size=200, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        accumulator = producer._accumulator
        accumulator.partition(accumulator.topic("one"), 0).next_sequence = 2**31 - 3  # as after 2**31 - 3 records
        for i in range(10):
            producer.send("one", b"%050d" % i)
    batches = entries(logs, "one", 0)
    counts = batches.record_counts
    assert batches.base_sequences.tolist() == ((2**31 - 3 + np.cumsum(counts) - counts) % 2**31).tolist()
    assert batches.base_sequences[-1] < 10  # wrapped


def failing_append(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, *, after_write: bool, times: int
) -> list[AppendInfo]:
    """Make ``PartitionLog.append`` raise ``error`` (after writing, or before) ``times`` times; returns what
    the appends that wrote returned."""
    real = PartitionLog.append
    written: list[AppendInfo] = []
    failures = [times]

    def append(self: PartitionLog, batches: Any) -> AppendInfo:
        if failures[0] > 0:
            failures[0] -= 1
            if after_write:
                written.append(real(self, batches))
            raise error
        return real(self, batches)

    monkeypatch.setattr(PartitionLog, "append", append)
    return written


@pytest.mark.parametrize("after_write", [True, False], ids=["after the write", "before the write"])
def test_a_retried_append_is_written_once(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch, after_write: bool
) -> None:
    written = failing_append(monkeypatch, OSError(5, "Input/output error"), after_write=after_write, times=2)
    config = ProducerConfig(batch_size=300, retry_backoff_ms=0, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        futures = [producer.send("one", b"%050d" % i) for i in range(20)]
        producer.flush()
        assert [f.get().offset for f in futures] == list(range(20))
        results = producer.send_arrow("one", pa.table({"value": [b"bulk %d" % i for i in range(20)]}))
    assert (results[0].first_offset, results[0].last_offset) == (20, 39)
    records = read_all(logs.partition("one", 0))
    assert records.column("value").to_pylist() == [b"%050d" % i for i in range(20)] + [
        b"bulk %d" % i for i in range(20)
    ]
    assert records.column("offset").to_pylist() == list(range(40))
    assert len(written) == (2 if after_write else 0)


def test_retries_that_run_out_fail_the_futures_and_the_producer_takes_a_new_id(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_append(monkeypatch, OSError(28, "No space left on device"), after_write=False, times=3)
    config = ProducerConfig(retries=2, retry_backoff_ms=0, linger_ms=FOREVER_MS)
    with Producer(logs, config) as producer:
        failed = producer.send("one", b"lost")
        producer.flush()
        with pytest.raises(OSError, match="No space left"):
            failed.get()
        kept = producer.send("one", b"kept")
        producer.flush()
        assert kept.get().offset == 0
    batch = entries(logs, "one", 0).rows[0]
    assert (batch[k.E_PRODUCER_ID], batch[k.E_BASE_SEQUENCE]) == (1, 0)


def test_an_out_of_order_sequence_fails_the_futures_of_its_records(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_append(monkeypatch, OutOfOrderSequenceError("sequence 0 is out of order"), after_write=False, times=1)
    with Producer(logs, ProducerConfig(linger_ms=FOREVER_MS)) as producer:
        failed = producer.send("three", b"a", partition=0)
        producer.flush()
        with pytest.raises(OutOfOrderSequenceError):
            failed.get()
        later = producer.send("three", b"b", partition=0)
    assert later.get() == RecordMetadata("three", 0, 0, later.get().timestamp)
    assert entries(logs, "three", 0).producer_ids.tolist() == [1]  # a new id, sequences from 0


def test_an_append_error_reaches_only_its_records_and_the_producer_keeps_working(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("strict", 2, {"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    with Producer(logs, ProducerConfig(linger_ms=FOREVER_MS)) as producer:
        too_old = producer.send("strict", b"old", partition=0, timestamp_ms=now - 7_200_000)
        fine = producer.send("strict", b"new", partition=1)
        producer.flush()
        with pytest.raises(InvalidTimestampError, match="out of range"):
            too_old.get()
        assert fine.get().offset == 0
        after = producer.send("strict", b"after", partition=0)
    assert after.get().offset == 0
    assert read_all(logs.partition("strict", 0)).column("value").to_pylist() == [b"after"]


def test_callbacks_get_the_metadata_or_the_error(logs: LogDirectory, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    with Producer(logs, ProducerConfig(linger_ms=FOREVER_MS)) as producer:
        future = producer.send("one", b"v")
        future.add_callback(lambda metadata, error: seen.append((metadata, error)))
        assert seen == []
        producer.flush()
        assert seen == [(future.get(), None)]
        future.add_callback(lambda metadata, error: seen.append((metadata, error)))  # already done: at once
        assert len(seen) == 2
        failing_append(monkeypatch, OutOfOrderSequenceError("gap"), after_write=False, times=1)
        failed = producer.send("one", b"w")
        failed.add_callback(lambda metadata, error: seen.append((metadata, error)))
        producer.flush()
    assert seen[2][0] is None and isinstance(seen[2][1], OutOfOrderSequenceError)


def test_a_log_append_time_topic_reports_the_append_time(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer(logs) as producer:
        future = producer.send("stamped", b"v", timestamp_ms=1000)
    stamp = future.get().timestamp
    assert before <= stamp <= int(time.time() * 1000)
    assert read_all(logs.partition("stamped", 0)).column("timestamp").cast(pa.int64()).to_pylist() == [stamp]


def test_threads_send_at_once(logs: LogDirectory) -> None:
    with Producer(logs, ProducerConfig(linger_ms=1, batch_size=2000)) as producer:

        def send(thread: int) -> None:
            for i in range(500):
                producer.send("three", b"%d:%d" % (thread, i), key=b"%d" % (i % 10))

        threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
        for worker in threads:
            worker.start()
        for worker in threads:
            worker.join()
    values = [v for p in range(3) for v in read_all(logs.partition("three", p)).column("value").to_pylist()]
    assert sorted(values) == sorted(b"%d:%d" % (t, i) for t in range(4) for i in range(500))
    for partition in range(3):
        for thread in range(4):
            mine = [
                int(v.split(b":")[1])
                for v in read_all(logs.partition("three", partition)).column("value").to_pylist()
                if v.startswith(b"%d:" % thread)
            ]
            assert mine == sorted(mine)  # each thread's records keep their order within a partition


# -- flush and close -----------------------------------------------------------------------------


def test_flush_appends_everything_and_close_refuses_more(logs: LogDirectory) -> None:
    log = logs.partition("three", 1)
    producer = Producer(logs, ProducerConfig(linger_ms=FOREVER_MS))
    futures = [producer.send("three", b"%d" % i, partition=1) for i in range(10)]
    assert log.log_end_offset == 0 and not any(f.done() for f in futures)
    producer.flush()
    assert log.log_end_offset == 10 and all(f.done() for f in futures)
    waiting = producer.send("three", b"at close", partition=1)
    producer.close()
    assert waiting.get(timeout=0).offset == 10
    producer.close()  # again: nothing
    with pytest.raises(PySparkLogError, match="closed"):
        producer.send("three", b"too late")
    with pytest.raises(PySparkLogError, match="closed"):
        producer.send_arrow("three", pa.table({"value": [b"too late"]}))


def test_get_times_out_while_the_record_waits(producer: Producer) -> None:
    future = producer.send("one", b"v")
    with pytest.raises(TimeoutError):
        future.get(timeout=0.01)
    producer.flush()
    assert future.get(timeout=0).offset == 0


def test_partitions_for(producer: Producer) -> None:
    assert producer.partitions_for("three") == [0, 1, 2]
    with pytest.raises(UnknownTopicError, match="Topic '__transaction_state' does not exist"):
        producer.partitions_for("__transaction_state")  # an internal topic: never created on first use


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("send", "error", "message"),
    [
        (lambda p: p.send("__consumer_offsets", b"v"), UnknownTopicError, "Topic '__consumer_offsets' does not exist"),
        (
            lambda p: p.send("three", b"v", partition=3),
            UnknownTopicError,
            r"Invalid partition given with record: 3 is not in the range \[0...3\)",
        ),
        (lambda p: p.send("three", 42), TypeError, "must be bytes"),
        (lambda p: p.send("three", b"v", headers=[("k", 1)]), TypeError, "a header must be"),
        (lambda p: p.send("three", b"v", timestamp_ms=-5), InvalidTimestampError, "Invalid timestamp: -5"),
        (lambda p: p.send("three", b"x" * 2_000_000), RecordTooLargeError, "larger than 1048576, which is the value"),
        (
            lambda p: p.send_arrow("three", pa.table({"value": [b"x" * 2_000_000]})),
            RecordTooLargeError,
            "max.request.size",
        ),
        (lambda p: p.send_arrow("three", pa.table({"key": [b"k"]})), InvalidRecordError, "a 'value' column"),
        (
            lambda p: p.send_arrow("three", pa.table({"value": [b"v"], "partition": [7]})),
            UnknownTopicError,
            "Invalid partition given with record: 7",
        ),
    ],
)
def test_refused_records(
    producer: Producer, send: Callable[[Producer], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        send(producer)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"batch.sizes": 1}, "unknown producer config 'batch.sizes'; accepted: acks, batch.size, client.id"),
        ({"batch.size": -1}, "batch.size = -1 is invalid; accepted: an integer from 0 to 2147483647"),
        ({"linger.ms": "soon"}, "linger.ms = 'soon' is invalid; accepted: an integer from 0"),
        ({"compression.type": "brotli"}, "compression.type = 'brotli' is invalid; accepted: one of none, gzip"),
        ({"acks": "0"}, "acks = '0' is invalid; accepted: one of all, -1, 1"),
        ({"enable.idempotence": "maybe"}, "enable.idempotence = 'maybe' is invalid; accepted: true or false"),
        ({"partitioner.ignore.keys": 1}, "partitioner.ignore.keys = 1 is invalid; accepted: true or false"),
        ({"delivery.timeout.ms": "-1"}, "delivery.timeout.ms = '-1' is invalid; accepted: an integer from 0"),
        ({"enable.idempotence": "true", "acks": "1"}, "Must set acks to all in order to use the idempotent producer"),
        (
            {"enable.idempotence": True, "retries": 0, "max.in.flight.requests.per.connection": 6},
            "Must set retries to non-zero and max.in.flight.requests.per.connection to at most 5",
        ),
        ({"partitioner.class": "no.such.Partitioner"}, "partitioner.class = 'no.such.Partitioner' could not be"),
    ],
)
def test_bad_configs_are_refused_naming_the_key_and_what_it_accepts(properties: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ProducerConfig.from_properties(properties)


def test_kafka_properties_are_parsed_as_kafka_parses_them() -> None:
    config = ProducerConfig.from_properties(
        {
            "batch.size": " 65536 ",
            "linger.ms": "10",
            "enable.idempotence": "FALSE",
            "compression.type": "zstd",
            "max.request.size": 2_000_000,
            "client.id": "orders-writer",
            "partitioner.ignore.keys": "true",
        }
    )
    assert (config.batch_size, config.linger_ms, config.compression_type, config.codec) == (
        65536,
        10,
        "zstd",
        Codec.ZSTD,
    )
    assert (config.idempotent, config.max_request_size, config.client_id) == (False, 2_000_000, "orders-writer")
    assert config.partitioner.ignore_keys and config.partitioner.batch_size == 65536
    defaults = ProducerConfig()
    assert (defaults.batch_size, defaults.linger_ms, defaults.compression_type, defaults.idempotent) == (
        16384,
        5,
        "none",
        True,
    )


def test_settings_that_exclude_idempotence_turn_it_off_unless_it_was_asked_for() -> None:
    assert not ProducerConfig(acks="1").idempotent
    assert not ProducerConfig(retries=0).idempotent
    assert not ProducerConfig(max_in_flight_requests_per_connection=10).idempotent
    assert ProducerConfig(acks="-1", enable_idempotence=True).idempotent


def test_the_broker_connections_configs_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Code written for kafka-python or confluent-kafka keeps its configs: the log directory replaces the brokers."""
    kafka_style = {"bootstrap.servers": "broker:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    with caplog.at_level(logging.WARNING, logger="pysparklog.broker_configs"):
        config = ProducerConfig.from_properties({**kafka_style, "linger.ms": "10"})
    assert config == ProducerConfig.from_properties({"linger.ms": "10"})
    assert "ignoring bootstrap.servers, sasl.mechanism, security.protocol" in caplog.text
    with pytest.raises(InvalidConfigError, match="unknown producer config 'bootstrap.server'"):
        ProducerConfig.from_properties({"bootstrap.server": "broker:9092"})  # a typo is still refused
    assert not [name for name in ACCEPTED_CONFIGS if is_broker_config(name)], "no config is both used and ignored"
