"""Requests per unit of work on an object store, counted at the server (``counted_s3``): on a real store each is a
round trip of 10-30 ms and a line on the bill, so a change that adds one on a hot path fails here.

Budgets (docs/object-storage.md, "Cost at steady state"):

- an uncontended producer append (``linger.ms=0``) is one request, its commit's create, with a key or without and
  whatever the topic's partition count;
- a Spark task reading a range its host's replica already holds asks the store nothing;
- a driver planning a micro-batch of an unchanged topic it subscribes to asks one probe of the topic's chain, whatever
  its partition count, and nothing else but the topics' metadata, read again at most every 5 s; many new commits
  cost a probe, at most 16 probes at once past it, a listing and the last one's header.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog.datasource_v2 import RangesPartition, read_ranges
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.spark.kafka_options import SourceOptions, latest_offsets, subscribed_partitions
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.storage.io import storage_for
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topics import TOPICS_FILE
from pysparklog.structs import TopicPartition
from tests.conftest import CountedS3
from tests.s3_server import REPO

PARTITION_COUNTS = (4, 64)


def _logs(counted_s3: CountedS3, partitions: int) -> LogDirectory:
    logs = LogDirectory(storage_for(counted_s3.root, counted_s3.storage_options))
    logs.topics.create("t", partitions=partitions)
    return logs


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
@pytest.mark.parametrize("keyed", [False, True], ids=["no key", "key"])
def test_an_uncontended_producer_append_is_one_request(
    counted_s3: CountedS3, partitions: int, keyed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    logs = _logs(counted_s3, partitions)
    proxy = counted_s3.proxy
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:
        key = b"same key" if keyed else None
        producer.send("t", value=b"warm-up", key=key).get()  # the first append of a process finds the log's end
        for i in range(5):
            before = proxy.mark()
            metadata = producer.send("t", value=f"v{i}".encode(), key=key).get()
            assert proxy.count(since=before) == 1, proxy.summary(since=before)
            assert proxy.count(since=before, method="PUT", path_contains="/commits/") == 1
            if keyed:  # one partition: the offsets follow each other
                assert metadata.offset == i + 1
    with logs.partition("t", metadata.partition) as log:
        assert log.log_end_offset == (6 if keyed else log.log_end_offset) and log.log_end_offset >= 1


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_planning_an_unchanged_topic_probes_its_chain_once(
    counted_s3: CountedS3, partitions: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    logs = _logs(counted_s3, partitions)
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:
        for i in range(partitions):
            producer.send("t", value=b"v", partition=i).get()
    options = SourceOptions.parse({"path": counted_s3.root, "subscribe": "t"}, streaming=True)

    def plan() -> dict[TopicPartition, int]:
        """What a stream's driver asks at each trigger: the subscribed partitions, then their log ends."""
        driver = LogDirectory(counted_s3.root)  # as the source opens it anew
        return latest_offsets(driver, subscribed_partitions(options, driver))

    assert plan() == {TopicPartition("t", p): 1 for p in range(partitions)}  # the first planning learns the chain
    proxy = counted_s3.proxy
    for ends in (1, 2):
        for _trigger in range(2):
            before = proxy.mark()
            assert plan() == {TopicPartition("t", p): ends for p in range(partitions)}
            metadata = proxy.count(since=before, path_contains=TOPICS_FILE)
            # One probe of the topic's chain, whatever its partition count, and the metadata at most every 5 s.
            assert metadata <= 1 and proxy.count(since=before) - metadata <= 1, proxy.summary(since=before)
            assert proxy.count(since=before, method="PUT") == 0
            assert proxy.count(since=before, path_contains="/commits/") == proxy.count(since=before) - metadata
        # Another process appends to every partition, a commit each: the next planning finds them with a probe, at
        # most 16 more at once (as many as its last look found), one listing and the last one's header, however many.
        _append_to_each_partition_elsewhere(counted_s3, partitions, tmp_path / "another-host")
        before = proxy.mark()
        assert plan() == {TopicPartition("t", p): ends + 1 for p in range(partitions)}
        found = proxy.count(since=before) - proxy.count(since=before, path_contains=TOPICS_FILE)
        assert found <= 1 + 16 + 2, proxy.summary(since=before)


def _append_to_each_partition_elsewhere(counted_s3: CountedS3, partitions: int, cache: Path) -> None:
    """One record appended to each partition of ``t`` by a process of another host (which shares no chain and no
    replica with this one)."""
    script = (
        "import sys; from pysparklog.producer import Producer, ProducerConfig; "
        "from pysparklog.storage.io import storage_for; "
        "storage = storage_for(sys.argv[1], dict(zip(sys.argv[2::2], sys.argv[3::2]))); "
        "producer = Producer(storage, ProducerConfig(linger_ms=0)); "
        f"[producer.send('t', value=b'w', partition=p).get() for p in range({partitions})]; producer.close()"
    )
    options = [item for pair in counted_s3.storage_options.items() for item in pair]
    elsewhere = {**os.environ, "PYSPARKLOG_CACHE_DIR": str(cache)}
    subprocess.run(
        [sys.executable, "-c", script, counted_s3.root, *options], check=True, cwd=REPO, timeout=120, env=elsewhere
    )


def test_a_task_reading_a_range_its_replica_holds_asks_nothing(
    counted_s3: CountedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    logs = _logs(counted_s3, 2)
    for p in range(2):
        logs.partition("t", p).append_arrow(pa.table({"value": [f"{p}-{i}".encode() for i in range(10)]}))
    task = RangesPartition(
        counted_s3.root,
        (OffsetRange(TopicPartition("t", 0), 2, 8), OffsetRange(TopicPartition("t", 1), 0, 10)),
        include_headers=False,
        read_committed=False,
        fail_on_data_loss=True,
    )
    first = pa.Table.from_batches(list(read_ranges(task)))  # this host's replicas hold both logs already
    proxy = counted_s3.proxy
    before = proxy.mark()
    again = pa.Table.from_batches(list(read_ranges(task)))
    assert proxy.count(since=before) == 0, proxy.summary(since=before)
    assert again.equals(first) and again.column("value").to_pylist() == [
        *(f"0-{i}".encode() for i in range(2, 8)),
        *(f"1-{i}".encode() for i in range(10)),
    ]
    logs.partition("t", 0).append_arrow(pa.table({"value": [b"0-10"]}))
    past_replica = RangesPartition(counted_s3.root, (OffsetRange(TopicPartition("t", 0), 9, 11),), False, False, True)
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "other-host"))
    assert [v for b in read_ranges(past_replica) for v in b.column("value").to_pylist()] == [b"0-9", b"0-10"]


def test_a_task_reading_past_its_replica_reads_the_commit_it_needs_and_no_more(
    counted_s3: CountedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    logs = _logs(counted_s3, 2)
    logs.partition("t", 0).append_arrow(pa.table({"value": [f"0-{i}".encode() for i in range(10)]}))
    held = RangesPartition(counted_s3.root, (OffsetRange(TopicPartition("t", 0), 0, 10),), False, False, True)
    assert sum(b.num_rows for b in read_ranges(held)) == 10
    _append_to_each_partition_elsewhere(counted_s3, 2, tmp_path / "another-host")  # partition 0's, then 1's
    task = RangesPartition(counted_s3.root, (OffsetRange(TopicPartition("t", 0), 10, 11),), False, False, True)
    proxy = counted_s3.proxy
    before = proxy.mark()
    assert [v for b in read_ranges(task) for v in b.column("value").to_pylist()] == [b"w"]
    assert proxy.count(since=before) == 1, proxy.summary(since=before)  # the new commit, not a probe past it


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_a_producers_batches_due_at_once_for_many_partitions_are_one_request(
    counted_s3: CountedS3, partitions: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    logs = _logs(counted_s3, partitions)
    proxy = counted_s3.proxy
    with Producer(logs, ProducerConfig(linger_ms=60_000)) as producer:
        producer.send("t", value=b"warm-up", partition=0)
        producer.flush()  # the first append of a process finds the log's end and its producer id
        futures = [producer.send("t", value=f"v{p}".encode(), partition=p) for p in range(partitions)]
        before = proxy.mark()
        producer.flush()
        assert proxy.count(since=before) == 1, proxy.summary(since=before)  # one commit of every partition's batch
        assert [f.get().offset for f in futures] == [1] + [0] * (partitions - 1)
    ends = LogDirectory(counted_s3.root).offsets("t", range(partitions))
    assert ends == {p: (0, 2 if p == 0 else 1) for p in range(partitions)}
