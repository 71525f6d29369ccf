"""An exactly-once sink's micro-batch on an object store (``storage.objects.staged``): tasks stage their batches, the
driver makes them visible with one commit of the topic's chain that records the micro-batch. Against a real
S3-compatible server process (tests/s3_server.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory
from pysparklog.errors import CorruptRecordError
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.io import storage_for
from pysparklog.storage.objects.staged import (
    INLINE_BYTES,
    StagedObject,
    StagedWrites,
    commit_staged,
    last_mark,
    staged_path,
)
from pysparklog.storage.objects.topic_commit import MAX_MARKS, SinkMark
from pysparklog.storage.records.default_records import TimestampType
from tests.conftest import BUCKET, read_all

STAGING = ProducerConfig(enable_idempotence=False, linger_ms=0)


@pytest.fixture
def logs(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LogDirectory:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    logs = LogDirectory(storage_for(f"s3://{BUCKET}{tmp_path}/logs"))
    logs.topics.create("t", partitions=4)
    return logs


def _stage(logs: LogDirectory, name: str, rows: dict[int, list[bytes]], *, inline: bool = False) -> list[StagedObject]:
    """One task's rows for partitions of ``t``, staged as a producer stages them: in an object (or ``inline``)."""
    stage = StagedWrites(logs)
    with Producer(logs, STAGING, stage=stage) as producer:
        for partition, values in rows.items():
            producer.send_arrow("t", pa.table({"value": values, "partition": [partition] * len(values)}))
    return stage.put(name, inline_bytes=INLINE_BYTES if inline else 0)


def _values(logs: LogDirectory, partition: int) -> list[bytes]:
    with logs.partition("t", partition) as log:
        return read_all(log).column("value").to_pylist() if log.log_end_offset else []


def test_a_micro_batch_is_invisible_until_its_commit_then_whole_at_the_chain_offsets(logs: LogDirectory) -> None:
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:
        producer.send("t", value=b"before", partition=1).get()
    tasks = [_stage(logs, "task-0", {0: [b"a0", b"a1"], 1: [b"a2"]}), _stage(logs, "task-1", {1: [b"b0", b"b1"]})]
    assert [_values(logs, p) for p in range(2)] == [[], [b"before"]], "staged batches are no one's records yet"
    assert commit_staged(logs, [obj for task in tasks for obj in task], SinkMark("sink", "query", 0))
    assert _values(logs, 0) == [b"a0", b"a1"]
    assert _values(logs, 1) == [b"before", b"a2", b"b0", b"b1"], "each task's batches follow the partition's end"
    with logs.partition("t", 1) as log:
        assert read_all(log).column("offset").to_pylist() == [0, 1, 2, 3]
    assert last_mark(logs, "t", "sink") == SinkMark("sink", "query", 0)


def test_a_micro_batch_committed_once_is_not_committed_again_and_its_second_staging_goes(logs: LogDirectory) -> None:
    first = _stage(logs, "task-0", {2: [b"x"]})
    assert commit_staged(logs, first, SinkMark("sink", "query", 5))
    again = _stage(logs, "task-0", {2: [b"x"]})  # the micro-batch run again after a crash
    assert not commit_staged(logs, again, SinkMark("sink", "query", 5))
    assert not commit_staged(logs, _stage(logs, "old", {2: [b"y"]}), SinkMark("sink", "query", 4))
    assert _values(logs, 2) == [b"x"]
    assert logs.storage.stat(staged_path(logs.storage, "t", again[0].topic_id, again[0].name)) is None
    # Another query with the sink's id (a new checkpoint) starts its own count of micro-batches.
    assert commit_staged(logs, _stage(logs, "new", {2: [b"z"]}), SinkMark("sink", "other query", 0))
    assert _values(logs, 2) == [b"x", b"z"]


def test_marks_survive_other_writers_commits_and_the_least_recent_sink_goes_past_the_limit(logs: LogDirectory) -> None:
    assert commit_staged(logs, _stage(logs, "s", {0: [b"s"]}), SinkMark("kept", "q", 1))
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:  # a producer's commits carry the marks forward
        for i in range(3):
            producer.send("t", value=b"p", partition=i).get()
    assert last_mark(logs, "t", "kept") == SinkMark("kept", "q", 1)
    for sink in range(MAX_MARKS):
        assert commit_staged(logs, _stage(logs, f"s{sink}", {3: [b"m"]}), SinkMark(f"sink-{sink}", "q", 0))
    assert last_mark(logs, "t", "kept") is None and last_mark(logs, "t", f"sink-{MAX_MARKS - 1}") is not None


def test_a_topic_with_log_append_time_gets_the_time_of_the_commit_that_makes_them_visible(
    logs: LogDirectory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs.topics.create("stamped", partitions=1, configs={"message.timestamp.type": "LogAppendTime"})
    stage = StagedWrites(logs)
    with Producer(logs, STAGING, stage=stage) as producer:
        producer.send_arrow("stamped", pa.table({"value": [b"a", b"b"], "timestamp": [0, 1]}))
    staged = stage.put("task", inline_bytes=0)
    time.sleep(0.05)
    committing = int(time.time() * 1000)
    assert commit_staged(logs, staged, None)
    stamps = []
    for host in ("this host", "another host"):  # every replica stamps the same time
        monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / host))
        with LogDirectory(logs.storage).partition("stamped", 0) as log:
            table = read_all(log)
        assert set(table.column("timestampType").to_pylist()) == {TimestampType.LOG_APPEND_TIME.value}
        stamps.append(set(table.column("timestamp").cast(pa.int64()).to_pylist()))
    assert stamps[0] == stamps[1] and len(stamps[0]) == 1 and min(stamps[0]) >= committing


def test_sealing_takes_staged_sections_into_segments_and_retires_their_objects(logs: LogDirectory) -> None:
    staged = []
    for batch in range(3):
        objects = _stage(logs, f"task-{batch}", {0: [f"r{batch}".encode()], 3: [b"q"]})
        assert commit_staged(logs, objects, SinkMark("sink", "q", batch))
        staged += objects
    with logs.partition("t", 0) as log:
        assert log.seal() is not None  # type: ignore[attr-defined]  # an object store's log
        log.append_arrow(pa.table({"value": [b"after"]}))
        log.seal()  # type: ignore[attr-defined]  # retires the commits (and staged objects) the first seal covered
    assert all(logs.storage.stat(staged_path(logs.storage, "t", o.topic_id, o.name)) is None for o in staged)
    fresh = LogDirectory(logs.storage)
    with fresh.partition("t", 0) as log:
        assert read_all(log).column("value").to_pylist() == [b"r0", b"r1", b"r2", b"after"]


def test_a_staged_object_cut_short_is_a_typed_error_naming_it(logs: LogDirectory) -> None:
    objects = _stage(logs, "task", {0: [b"v" * 100]})
    path = staged_path(logs.storage, "t", objects[0].topic_id, objects[0].name)
    logs.storage.put(path, logs.storage.read(path)[:40])
    assert commit_staged(logs, objects, None)
    with logs.partition("t", 0) as log, pytest.raises(CorruptRecordError) as raised:
        read_all(log)
    assert objects[0].name in str(raised.value)


def test_a_small_task_output_rides_inline_and_the_commit_holds_it(logs: LogDirectory) -> None:
    """Batches of at most ``INLINE_BYTES`` go to the driver in the task's message: no staged object, and the commit
    that makes them visible holds them, numbered at the chain's end like staged ones."""
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:
        producer.send("t", value=b"before", partition=0).get()
    small = _stage(logs, "small", {0: [b"a", b"b"], 3: [b"c"]}, inline=True)
    large = _stage(logs, "large", {0: [b"x" * 100]})
    assert [obj.inline for obj in small + large] == [True, False]
    assert commit_staged(logs, small + large, SinkMark("sink", "q", 0))
    assert _values(logs, 0) == [b"before", b"a", b"b", b"x" * 100] and _values(logs, 3) == [b"c"]
    staged = logs.storage.list(logs.storage.join(f"t-chain/{small[0].topic_id}/staged"))
    assert staged == [large[0].name], "only the large output was staged"
