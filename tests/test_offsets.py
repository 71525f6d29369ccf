"""Committed offsets in ``__consumer_offsets``: Kafka's record formats byte for byte, a broker's copy read, commits
by several processes, durability across ``kill -9``, compaction, resets and lag, and Kafka's own tool reading ours."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog.errors import (
    CorruptRecordError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidTopicError,
    RecordTooLargeError,
    UnknownTopicError,
)
from pysparklog.group import Clock, GroupCoordinator, JoinRequest
from pysparklog.offsets import (
    OFFSETS_TOPIC,
    CommittedOffset,
    OffsetStore,
    PartitionLag,
    ResetStrategy,
    decode_offset_commit_key,
    decode_offset_commit_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.topic_config import MAX_PARTITIONS, SERVER_PROPERTIES
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from tests.conftest import REPO, read_all
from tests.interop.kafka_tools import DumpLogSegments

# The real record of kafka-log-format.md §5, written by a broker for group DEVSmileCDR (partition 6).
REAL_TOPIC = "batch2.work.notification.SHR_PROD.persistence"
REAL_KEY = bytes.fromhex("0001000b") + b"DEVSmileCDR" + bytes.fromhex("002d") + REAL_TOPIC.encode() + bytes(4)
REAL_VALUE = bytes.fromhex("0003 0000000000000000 ffffffff 0000 0000019c0fcdac12")  # offset 0, epoch -1, "", commitTs
TS = 1_700_000_000_000
ORDERS = [TopicPartition("orders", p) for p in range(3)]


SESSION_MS = 60_000  # long enough that members stay live for the whole test


def member(client_id: str, host: str, group_instance_id: str | None = None) -> JoinRequest:
    """A consumer joining with the range assignor and a session that outlasts the test."""
    return JoinRequest(client_id, ("range",), SESSION_MS, group_instance_id, host)


def sessions_ago() -> int:
    """A clock two session timeouts behind: members joined with it look expired to everyone else."""
    return int(time.time() * 1000) - 2 * SESSION_MS


def join(log_dir: LogDirectory, group_id: str, *requests: JoinRequest, clock: Clock | None = None) -> list[str]:
    """Members that join ``group_id`` (subscribed to orders) through its real coordinator and hand partitions over
    until each owns its whole assignment, so the group is Stable; their member ids, in the order of ``requests``."""
    topics = ["orders"]
    coordinator = GroupCoordinator(log_dir, group_id, clock=clock)
    try:
        member_ids = [coordinator.join(request, topics).member_id for request in requests]
        for member_id in member_ids:  # a member gives up the partitions the last join moved to another...
            now = coordinator.heartbeat(member_id, topics)
            coordinator.heartbeat(member_id, topics, now.owned - now.assigned)
        for member_id in member_ids:  # ...which claims them at its next heartbeat
            coordinator.heartbeat(member_id, topics)
        described = coordinator.describe()
        assert described is not None and described.state == "Stable"
        return member_ids
    finally:
        coordinator.close()


def leave(log_dir: LogDirectory, group_id: str, *member_ids: str) -> None:
    coordinator = GroupCoordinator(log_dir, group_id)
    try:
        for member_id in member_ids:
            coordinator.leave(member_id)
    finally:
        coordinator.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[OffsetStore]:
    with OffsetStore(tmp_path) as store:
        yield store


@pytest.fixture
def orders(tmp_path: Path) -> LogDirectory:
    """orders: 3 partitions of 10, 20 and 30 records stamped TS + i; partition 1 starts at offset 5."""
    logs = LogDirectory(tmp_path)
    logs.topics.create("orders", 3)
    for p in range(3):
        n = 10 * (p + 1)
        table = pa.table({"value": [b"v"] * n, "timestamp": pa.array(range(TS, TS + n), pa.int64())})
        logs.partition("orders", p).append_arrow(table)
    logs.partition("orders", 1).raise_log_start_offset(5)
    return logs


def offsets_log(store: OffsetStore, group: str) -> Log:
    return store.log_dir.partition(OFFSETS_TOPIC, store.partition_for(group))


def batches(log: Log) -> int:
    """Record batches in the log."""
    return sum(len(chunk.entries) for seg in log.segments() for chunk in seg.chunks(0, seg.size()))


def run_python(code: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, env=env, **kwargs)  # type: ignore[call-overload, no-any-return]


# -- the records --------------------------------------------------------------------------------------------------


def test_the_real_key_and_value_round_trip_byte_for_byte() -> None:
    assert decode_offset_commit_key(REAL_KEY) == ("DEVSmileCDR", TopicPartition(REAL_TOPIC, 0))
    committed = decode_offset_commit_value(REAL_VALUE)
    assert committed == CommittedOffset(0, "", -1, 1769791663122)
    assert encode_offset_commit_key("DEVSmileCDR", TopicPartition(REAL_TOPIC, 0)) == REAL_KEY
    assert encode_offset_commit_value(committed) == REAL_VALUE
    assert partition_for("DEVSmileCDR") == 6


def test_partition_for_is_javas_string_hash_code() -> None:
    assert partition_for("") == 0
    assert partition_for("a") == 97 % 50
    assert partition_for("polygenelubricants") == 0  # hashCode() is Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("\U0001f600") == (0xD83D * 31 + 0xDE00) % 50  # hashed as two UTF-16 code units


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text.encode())) + text.encode()


def test_every_key_version_decodes_and_other_record_types_are_skipped() -> None:
    body = _string("g") + _string("t") + struct.pack(">i", 3)
    assert decode_offset_commit_key(b"\x00\x00" + body) == ("g", TopicPartition("t", 3))
    assert decode_offset_commit_key(b"\x00\x01" + body + b"extra") == ("g", TopicPartition("t", 3))
    assert decode_offset_commit_key(b"\x00\x02" + _string("g")) is None  # GroupMetadataKey
    assert decode_offset_commit_key(b"\x00\x03" + _string("g")) is None  # ConsumerGroupMetadataKey (KIP-848)
    with pytest.raises(CorruptRecordError, match="ends inside a field"):
        decode_offset_commit_key(b"\x00\x01" + _string("g") + b"\x00")
    with pytest.raises(CorruptRecordError, match="not UTF-8"):
        decode_offset_commit_key(b"\x00\x01\x00\x01\xff" + _string("t") + bytes(4))


def test_every_value_version_decodes() -> None:
    offset, epoch, commit, expire = (
        struct.pack(">q", 42),
        struct.pack(">i", 7),
        struct.pack(">q", TS),
        b"\0" * 7 + b"\x09",
    )
    assert decode_offset_commit_value(b"\x00\x00" + offset + _string("m") + commit) == CommittedOffset(42, "m", -1, TS)
    assert decode_offset_commit_value(b"\x00\x01" + offset + _string("m") + commit + expire) == CommittedOffset(
        42, "m", -1, TS, 9
    )
    assert decode_offset_commit_value(b"\x00\x02" + offset + _string("") + commit) == CommittedOffset(42, "", -1, TS)
    assert decode_offset_commit_value(b"\x00\x03" + offset + epoch + _string("é") + commit) == CommittedOffset(
        42, "é", 7, TS
    )
    # v4 is flexible: a compact string (length + 1 as a varint) and tagged fields (here one: tag 0, 16 bytes).
    flexible = b"\x00\x04" + offset + epoch + b"\x03ab" + commit + b"\x01\x00\x10" + bytes(16)
    assert decode_offset_commit_value(flexible) == CommittedOffset(42, "ab", 7, TS)
    with pytest.raises(CorruptRecordError, match="version 5 is not supported; accepted: 0 to 4"):
        decode_offset_commit_value(b"\x00\x05" + offset + epoch + b"\x01" + commit + b"\x00")
    with pytest.raises(CorruptRecordError, match="ends inside a field"):
        decode_offset_commit_value(b"\x00\x03" + offset)
    with pytest.raises(CorruptRecordError, match="length -1"):
        decode_offset_commit_value(b"\x00\x03" + offset + epoch + b"\xff\xff" + commit)


def test_a_brokers_consumer_offsets_is_read_without_writing(broker_log_dir: Path) -> None:
    before = {str(p): p.stat().st_mtime_ns for p in broker_log_dir.rglob("*")}
    with OffsetStore(broker_log_dir) as store:
        assert store.groups() == ["DEVSmileCDR"]
        assert store.committed_offsets("DEVSmileCDR") == {
            TopicPartition("Retry.TestTopicPatient", 0): CommittedOffset(0, "", -1, 1769792518111),
            TopicPartition("TestTopicPatient", 0): CommittedOffset(3, "", -1, 1769793578176),
            TopicPartition(REAL_TOPIC, 0): CommittedOffset(0, "", -1, 1769791663122),
            TopicPartition("subscription.matching.SHR_PROD.persistence", 0): CommittedOffset(0, "", -1, 1769791783399),
        }
    assert {str(p): p.stat().st_mtime_ns for p in broker_log_dir.rglob("*")} == before


def test_a_brokers_copy_is_adopted_on_the_first_commit(broker_log_dir_copy: Path) -> None:
    with OffsetStore(broker_log_dir_copy) as store:
        store.commit("DEVSmileCDR", {TopicPartition("TestTopicPatient", 0): OffsetAndMetadata(3, "again")})
        topic = store.log_dir.topics.get(OFFSETS_TOPIC)
        assert topic.partitions == 50
        assert dict(topic.configs) == {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": "104857600",
        }
        assert store.log_dir.partition(OFFSETS_TOPIC, 6).log_end_offset == 14
    with OffsetStore(broker_log_dir_copy) as fresh:
        committed = fresh.committed("DEVSmileCDR")
        assert committed[TopicPartition("TestTopicPatient", 0)] == OffsetAndMetadata(3, "again")
        assert len(committed) == 4


# -- committing and reading ---------------------------------------------------------------------------------------


def test_commit_committed_delete_and_groups(store: OffsetStore, tmp_path: Path) -> None:
    assert store.groups() == [] and store.committed("g") == {}
    assert not (tmp_path / f"{OFFSETS_TOPIC}-0").exists(), "reads create nothing"
    store.commit(
        "g", {ORDERS[0]: OffsetAndMetadata(5, "m", 3), ORDERS[1]: OffsetAndMetadata(7)}, commit_timestamp_ms=TS
    )
    store.commit("h", {ORDERS[2]: OffsetAndMetadata(9)})
    store.commit("g", {ORDERS[1]: OffsetAndMetadata(8)}, commit_timestamp_ms=TS + 1)
    assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(5, "m", 3), ORDERS[1]: OffsetAndMetadata(8)}
    assert store.committed_offsets("g", [ORDERS[1], ORDERS[2]]) == {ORDERS[1]: CommittedOffset(8, "", -1, TS + 1)}
    assert store.groups() == ["g", "h"]
    topic = store.log_dir.topics.get(OFFSETS_TOPIC)
    assert topic.partitions == 50 and topic.configs["cleanup.policy"] == "compact"
    assert store.delete("g", [ORDERS[0], ORDERS[2]]) == [ORDERS[0]]
    assert store.committed("g") == {ORDERS[1]: OffsetAndMetadata(8)}
    assert store.delete("g") == [ORDERS[1]]
    assert store.groups() == ["h"]
    with OffsetStore(tmp_path) as fresh:
        assert fresh.groups() == ["h"] and fresh.committed("h") == {ORDERS[2]: OffsetAndMetadata(9)}
    store.commit("g", {})  # nothing to write
    assert store.groups() == ["h"]


def test_commits_are_validated_before_anything_is_written(store: OffsetStore, tmp_path: Path) -> None:
    bad = [
        ("", {ORDERS[0]: OffsetAndMetadata(1)}, InvalidConfigError, "group id '' is invalid"),
        ("g", {ORDERS[0]: OffsetAndMetadata(-1)}, InvalidOffsetError, "offset -1 for orders-0 is invalid"),
        ("g", {ORDERS[0]: OffsetAndMetadata(1, "", -2)}, InvalidOffsetError, "leader epoch -2"),
        ("g", {ORDERS[0]: OffsetAndMetadata(1, "x" * 4097)}, InvalidConfigError, "offset.metadata.max.bytes"),
        ("g", {TopicPartition("a b", 0): OffsetAndMetadata(1)}, InvalidTopicError, "illegal"),
        ("g", {TopicPartition("t", -1): OffsetAndMetadata(1)}, InvalidOffsetError, "partition -1"),
    ]
    for group, committed, error, message in bad:
        with pytest.raises(error, match=message):
            store.commit(group, committed)
    with pytest.raises(InvalidOffsetError, match="commit timestamp -5"):
        store.commit("g", {ORDERS[0]: OffsetAndMetadata(1)}, commit_timestamp_ms=-5)
    assert not any(tmp_path.iterdir())


def test_a_commit_of_thousands_of_partitions_is_one_batch(store: OffsetStore) -> None:
    many = {TopicPartition(f"topic-{i % 7}", i): OffsetAndMetadata(i, "meta") for i in range(3000)}
    started = time.perf_counter()
    store.commit("big", many)
    assert time.perf_counter() - started < 2
    log = offsets_log(store, "big")
    assert log.log_end_offset == 3000 and batches(log) == 1
    assert store.committed("big") == dict(sorted(many.items()))
    assert store.delete("big") == sorted(many) and batches(log) == 2


def test_a_commit_larger_than_max_message_bytes_is_refused_whole(store: OffsetStore) -> None:
    store.commit("g", {ORDERS[0]: OffsetAndMetadata(1)})
    huge = {TopicPartition("t", i): OffsetAndMetadata(i, "m" * 4000) for i in range(300)}  # ~1.2 MB in one batch
    with pytest.raises(RecordTooLargeError, match="exceeds max.message.bytes"):
        store.commit("g", huge)
    assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(1)}
    assert offsets_log(store, "g").log_end_offset == 1


_COMMITTER = """
import sys
from pysparklog.offsets import OffsetStore
from pysparklog.structs import OffsetAndMetadata, TopicPartition
store = OffsetStore(sys.argv[1])
store.commit(sys.argv[2], {TopicPartition("orders", int(p)): OffsetAndMetadata(int(sys.argv[3])) for p in sys.argv[4:]})
"""


def test_reads_are_incremental_and_see_commits_of_other_processes(
    store: OffsetStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.commit("g", {ORDERS[0]: OffsetAndMetadata(1)})
    assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(1)}
    reads: list[int | None] = []
    read_arrow = PartitionLog.read_arrow

    def spy(log: Log, start: int | None = None, *args: object, **kwargs: object) -> Iterator[pa.RecordBatch]:
        reads.append(start)
        return read_arrow(log, start, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PartitionLog, "read_arrow", spy)
    other = run_python(_COMMITTER, str(tmp_path), "g", "7", "1", "2")
    assert other.wait(timeout=60) == 0
    assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(1)} | {tp: OffsetAndMetadata(7) for tp in ORDERS[1:]}
    assert reads == [1], "only the records appended since the last read are read"
    assert store.committed("g") and reads == [1, 3]


def test_a_partition_whose_records_were_deleted_is_rebuilt(store: OffsetStore, tmp_path: Path) -> None:
    store.commit("g", {ORDERS[0]: OffsetAndMetadata(1)})
    assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(1)}
    log = offsets_log(store, "g")
    store.commit("g", {ORDERS[1]: OffsetAndMetadata(2)})
    log.raise_log_start_offset(2)  # kafka-delete-records on __consumer_offsets: the first commit is gone
    store.commit("g", {ORDERS[2]: OffsetAndMetadata(3)})
    expected = {ORDERS[2]: OffsetAndMetadata(3)}
    assert store.committed("g") == expected
    with OffsetStore(tmp_path) as fresh:
        assert fresh.committed("g") == expected


WRITERS = 4
COMMITS = 25
PARTITIONS_PER_COMMIT = 200

_WRITER = """
import sys
from pysparklog.offsets import OffsetStore
from pysparklog.structs import OffsetAndMetadata, TopicPartition
store = OffsetStore(sys.argv[1])
writer = sys.argv[2]
for n in range({commits}):
    store.commit("shared", {{TopicPartition(writer, p): OffsetAndMetadata(n, writer) for p in range({partitions})}})
    store.commit(writer, {{TopicPartition("solo", 0): OffsetAndMetadata(n)}})
"""


@pytest.mark.slow
def test_concurrent_committers_in_several_processes_lose_nothing_and_commit_atomically(tmp_path: Path) -> None:
    code = _WRITER.format(commits=COMMITS, partitions=PARTITIONS_PER_COMMIT)
    writers = [run_python(code, str(tmp_path), f"w{i}", stderr=subprocess.PIPE) for i in range(WRITERS)]
    observed = 0
    with OffsetStore(tmp_path) as reader:
        while any(w.poll() is None for w in writers):
            by_writer: dict[str, set[int]] = {}
            for tp, committed in reader.committed("shared").items():
                by_writer.setdefault(tp.topic, set()).add(committed.offset)
            # A commit is one batch: a reader sees all of a writer's partitions at the same commit, never a mix.
            assert all(len(seen) == 1 for seen in by_writer.values()), by_writer
            observed += 1
        for w in writers:
            _, err = w.communicate()
            assert w.returncode == 0, err
        final = reader.committed("shared")
        assert len(final) == WRITERS * PARTITIONS_PER_COMMIT
        assert {c.offset for c in final.values()} == {COMMITS - 1}
        assert reader.groups() == sorted(["shared", *(f"w{i}" for i in range(WRITERS))])
        log = offsets_log(reader, "shared")
        assert log.log_end_offset == WRITERS * COMMITS * PARTITIONS_PER_COMMIT
        assert batches(log) == WRITERS * COMMITS
    assert observed > 1
    topic = LogDirectory(tmp_path).topics.get(OFFSETS_TOPIC)
    assert topic.partitions == 50 and topic.configs["cleanup.policy"] == "compact"


_KILLED = """
import sys
from pysparklog.offsets import OffsetStore
from pysparklog.structs import OffsetAndMetadata, TopicPartition
store = OffsetStore(sys.argv[1])
n = 0
while True:
    store.commit("g", {TopicPartition("orders", p): OffsetAndMetadata(n) for p in range(50)})
    print(n, flush=True)  # acknowledged
    n += 1
"""


@pytest.mark.slow
def test_acknowledged_commits_survive_kill_9(tmp_path: Path) -> None:
    committer = run_python(_KILLED, str(tmp_path), stdout=subprocess.PIPE)
    assert committer.stdout is not None
    acknowledged = -1
    while acknowledged < 30:
        acknowledged = int(committer.stdout.readline())
    os.kill(committer.pid, signal.SIGKILL)
    committer.communicate()
    with OffsetStore(tmp_path) as store:
        committed = store.committed("g")
        assert len(committed) == 50
        (offset,) = {c.offset for c in committed.values()}  # the commit cut short is all there or not at all
        assert offset >= acknowledged
        store.commit("g", {ORDERS[0]: OffsetAndMetadata(offset + 100)})  # the next writer repairs a torn tail
    with OffsetStore(tmp_path) as fresh:
        assert fresh.committed("g")[ORDERS[0]] == OffsetAndMetadata(offset + 100)


# -- compaction ---------------------------------------------------------------------------------------------------


def _commit_round(store: OffsetStore, topic: str, n: int) -> None:
    """Commit 1000 partitions of ``topic`` for group g at offset ``n``: ~250 kB in one batch."""
    store.commit("g", {TopicPartition(topic, p): OffsetAndMetadata(n, "x" * 200) for p in range(1000)})


def _until_rolled(store: OffsetStore, log: Log, topic: str, start: int) -> int:
    """Commit rounds until one rolls the segment; returns the next round number."""

    def active_base() -> int:
        bases = log.view().segment_bases
        return bases[-1] if bases else 0  # the first commit makes segment 0: no roll

    base = active_base()
    n = start
    while active_base() == base:
        _commit_round(store, topic, n)
        n += 1
    return n


def _cleaned_keys(log: Log) -> list[tuple[str, TopicPartition] | None]:
    """The keys of the records below the active segment, which compaction has cleaned."""
    cleaned = read_all(log, 0, log.segments()[-1].base_offset)
    return [decode_offset_commit_key(key) for key in cleaned.column("key").to_pylist()] if cleaned.num_rows else []


@pytest.fixture
def compacting(tmp_path: Path) -> Iterator[OffsetStore]:
    """A store whose __consumer_offsets rolls segments at 1 MiB (the broker config offsets.topic.segment.bytes)."""
    (tmp_path / SERVER_PROPERTIES).write_text("offsets.topic.segment.bytes=1048576\n")
    with OffsetStore(tmp_path) as store:
        yield store


def test_the_commit_that_rolls_a_segment_compacts_the_partition(compacting: OffsetStore, tmp_path: Path) -> None:
    log = offsets_log(compacting, "g")
    rounds = _until_rolled(compacting, log, "t", 0)
    assert rounds > 2 and len(log.segments()) == 2
    cleaned = read_all(log, 0, log.segments()[1].base_offset)
    assert cleaned.num_rows == 1000, "only the last record of each key survives"
    last = (rounds - 2) * 1000
    assert cleaned.column("offset").to_pylist() == list(range(last, last + 1000)), "offsets are never renumbered"
    with OffsetStore(tmp_path) as fresh:
        assert {c.offset for c in fresh.committed("g").values()} == {rounds - 1}


def test_compaction_drops_tombstones_after_delete_retention_ms(compacting: OffsetStore, tmp_path: Path) -> None:
    log = offsets_log(compacting, "g")
    n = _until_rolled(compacting, log, "t", 0)
    compacting.log_dir.topics.alter_configs(OFFSETS_TOPIC, {"delete.retention.ms": "0"})
    deleted = [TopicPartition("t", p) for p in range(500)]
    assert compacting.delete("g", deleted) == deleted
    n = _until_rolled(compacting, log, "u", n)  # the first round keeps the tombstones and stamps their horizon
    assert set(deleted) <= {key[1] for key in _cleaned_keys(log) if key is not None}
    _until_rolled(compacting, log, "u", n)  # a later round drops them
    keys = [key[1] for key in _cleaned_keys(log) if key is not None]
    assert len(keys) == len(set(keys)), "one record per key"
    assert not set(deleted) & set(keys)
    with OffsetStore(tmp_path) as fresh:
        committed = fresh.committed("g")
        assert {tp.topic for tp in committed} == {"t", "u"} and not set(deleted) & committed.keys()
        assert len(committed) == 1500


# -- resets and lag -----------------------------------------------------------------------------------------------


def test_reset_plans_follow_kafkas_rules_and_execute_commits(orders: LogDirectory) -> None:
    with OffsetStore(orders) as store:
        store.commit("g", {ORDERS[0]: OffsetAndMetadata(4, "m", 1), ORDERS[1]: OffsetAndMetadata(15)})

        def plan(strategy: ResetStrategy, partitions: list[TopicPartition] = ORDERS) -> dict[TopicPartition, int]:
            return dict(store.plan_reset("g", partitions, strategy).offsets)

        assert plan(ResetStrategy.to_earliest()) == {ORDERS[0]: 0, ORDERS[1]: 5, ORDERS[2]: 0}
        assert plan(ResetStrategy.to_latest()) == {ORDERS[0]: 10, ORDERS[1]: 20, ORDERS[2]: 30}
        assert plan(ResetStrategy.to_offset(7)) == {ORDERS[0]: 7, ORDERS[1]: 7, ORDERS[2]: 7}
        clamped = store.plan_reset("g", ORDERS[:2], ResetStrategy.to_offset(12))
        assert dict(clamped.offsets) == {ORDERS[0]: 10, ORDERS[1]: 12}
        assert clamped.warnings == (
            "New offset (12) is higher than latest offset for topic partition orders-0. Value will be set to 10",
        )
        low = store.plan_reset("g", [ORDERS[1]], ResetStrategy.to_offset(2))
        assert dict(low.offsets) == {ORDERS[1]: 5}
        assert low.warnings == (
            "New offset (2) is lower than earliest offset for topic partition orders-1. Value will be set to 5",
        )
        at = store.plan_reset("g", ORDERS, ResetStrategy.to_datetime(TS + 12))
        assert dict(at.offsets) == {ORDERS[0]: 10, ORDERS[1]: 12, ORDERS[2]: 12}
        assert at.warnings == ("Partition 0 from topic orders is empty. Falling back to latest known offset.",)
        assert plan(ResetStrategy.shift_by(-2), ORDERS[:2]) == {ORDERS[0]: 2, ORDERS[1]: 13}
        assert plan(ResetStrategy.shift_by(100), ORDERS[:2]) == {ORDERS[0]: 10, ORDERS[1]: 20}
        with pytest.raises(InvalidOffsetError, match="Cannot shift offset for partition orders-2 since there is no"):
            plan(ResetStrategy.shift_by(1))
        with pytest.raises(UnknownTopicError, match="Topic 'nope' does not exist"):
            plan(ResetStrategy.to_earliest(), [TopicPartition("nope", 0)])
        with pytest.raises(UnknownTopicError, match="Partition 3 of topic 'orders' does not exist"):
            plan(ResetStrategy.to_earliest(), [TopicPartition("orders", 3)])
        with pytest.raises(InvalidOffsetError, match=r"timestamp \(milliseconds since the epoch\) = -1 is invalid"):
            ResetStrategy.to_datetime(-1)
        assert store.committed("g")[ORDERS[0]] == OffsetAndMetadata(4, "m", 1), "planning commits nothing"
        store.execute_reset(store.plan_reset("g", ORDERS, ResetStrategy.to_earliest()))
        assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(0), ORDERS[1]: OffsetAndMetadata(5)} | {
            ORDERS[2]: OffsetAndMetadata(0)
        }
        # A group without offsets (or members) can be reset: that is how offsets are set before a group starts.
        store.execute_reset(store.plan_reset("new", [ORDERS[2]], ResetStrategy.to_latest()))
        assert store.committed("new") == {ORDERS[2]: OffsetAndMetadata(30)}


def test_lag_is_the_log_end_minus_the_committed_offset(orders: LogDirectory) -> None:
    with OffsetStore(orders) as store:
        store.commit("g", {ORDERS[0]: OffsetAndMetadata(4), TopicPartition("gone", 0): OffsetAndMetadata(1)})
        assert store.lag("g") == [
            PartitionLag(TopicPartition("gone", 0), 1, None),
            PartitionLag(ORDERS[0], 4, 10),
        ]
        assert [p.lag for p in store.lag("g", ORDERS[:2])] == [6, None]
        assert store.lag("g", [ORDERS[1]]) == [PartitionLag(ORDERS[1], None, 20)]


# -- groups with live members -------------------------------------------------------------------------------------

C1 = member("c1", "/10.0.0.1")
C2 = member("c2", "/10.0.0.2", "instance-2")  # static: the range assignor puts it first, so it gets orders-0 and 1


def test_a_group_with_active_members_is_refused_resets_and_deletion(orders: LogDirectory) -> None:
    with OffsetStore(orders) as store:
        store.commit("g", {ORDERS[0]: OffsetAndMetadata(4), TopicPartition("other", 0): OffsetAndMetadata(1)})
        plan = store.plan_reset("g", ORDERS, ResetStrategy.to_earliest())
        members = join(orders, "g", C1, C2)
        message = "Assignments can only be reset if the group 'g' is inactive, but the current state is Stable."
        with pytest.raises(GroupNotEmptyError, match=message):
            store.plan_reset("g", ORDERS, ResetStrategy.to_earliest())
        with pytest.raises(GroupNotEmptyError, match=message):
            store.execute_reset(plan)
        with pytest.raises(GroupNotEmptyError, match="Consumer group 'g' is not empty: its state is Stable."):
            store.delete_group("g")
        with pytest.raises(GroupNotEmptyError, match="actively subscribed to the topic\\(s\\) orders"):
            store.delete_offsets("g", [ORDERS[1]])
        assert store.delete_offsets("g", [TopicPartition("other", 0)]) == [TopicPartition("other", 0)]
        assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(4)}
        leave(orders, "g", *members)
        join(orders, "members-only", C1, C2)
        assert [(g.group_id, g.state) for g in store.list_groups()] == [("g", "Empty"), ("members-only", "Stable")]
        store.execute_reset(plan)
        assert store.delete_group("g") == ORDERS
        with pytest.raises(GroupIdNotFoundError, match="Consumer group 'g' does not exist."):
            store.delete_group("g")
        with pytest.raises(GroupIdNotFoundError, match="Consumer group 'absent' does not exist."):
            store.delete_offsets("absent", [ORDERS[0]])


def test_a_group_is_active_while_its_members_sessions_last(orders: LogDirectory) -> None:
    with OffsetStore(orders) as store:
        store.commit("g", {ORDERS[0]: OffsetAndMetadata(4)})
        join(orders, "g", C1, clock=sessions_ago)
        assert [(g.group_id, g.state) for g in store.list_groups()] == [("g", "Empty")]
        store.execute_reset(store.plan_reset("g", ORDERS, ResetStrategy.to_latest()))
        assert store.committed("g") == {ORDERS[0]: OffsetAndMetadata(10)} | {
            ORDERS[1]: OffsetAndMetadata(20),
            ORDERS[2]: OffsetAndMetadata(30),
        }
        assert store.delete_group("g") == ORDERS


def test_describe_lists_assigned_partitions_by_member_then_the_unassigned_committed_ones(
    orders: LogDirectory,
) -> None:
    with OffsetStore(orders) as store:
        store.commit("g", {ORDERS[1]: OffsetAndMetadata(15), TopicPartition("gone", 0): OffsetAndMetadata(3)})
        empty = store.describe("g")
        assert empty is not None and (empty.state, empty.assignor, empty.members) == ("Empty", "", ())
        assert [(r.position, r.member) for r in empty.rows] == [
            (PartitionLag(TopicPartition("gone", 0), 3, None), None),
            (PartitionLag(ORDERS[1], 15, 20), None),
        ]
        c1, c2 = join(orders, "g", C1, C2)
        join(orders, "expired", C1, clock=sessions_ago)
        group = store.describe("g")
        assert group is not None and (group.state, group.assignor) == ("Stable", "range")
        assert [(m.member_id, m.client_id, m.host, m.group_instance_id) for m in group.members] == [
            (c1, "c1", "/10.0.0.1", None),  # members by id
            (c2, "c2", "/10.0.0.2", "instance-2"),
        ]
        assert [(r.position.partition, r.position.committed, r.member and r.member.member_id) for r in group.rows] == [
            (ORDERS[0], None, c2),  # the member with the most partitions first, its partitions sorted
            (ORDERS[1], 15, c2),
            (ORDERS[2], None, c1),
            (TopicPartition("gone", 0), 3, None),
        ]
        # A group whose only member's session ran out, without offsets: Empty, as on a broker until its cleanup.
        expired = store.describe("expired")
        assert expired is not None and (expired.state, expired.members, expired.rows) == ("Empty", (), ())
        assert store.describe("absent") is None


# -- Kafka's own tool ---------------------------------------------------------------------------------------------


@pytest.mark.interop
def test_kafkas_dump_log_segments_decodes_our_offsets(store: OffsetStore, kafka_dump_log: DumpLogSegments) -> None:
    now = int(time.time() * 1000)
    store.commit("billing", {ORDERS[0]: OffsetAndMetadata(42, "ckpt é", 7)}, commit_timestamp_ms=now)
    store.delete("billing", [ORDERS[0]])
    log = offsets_log(store, "billing")
    proc = kafka_dump_log([log.segments()[0].log_path], "--offsets-decoder")
    assert proc.returncode == 0, proc.stderr
    records = [line for line in proc.stdout.splitlines() if line.startswith("| offset:")]
    key = {"type": "1", "data": {"group": "billing", "topic": "orders", "partition": 0}}
    value = {"version": "3", "data": {"offset": 42, "leaderEpoch": 7, "metadata": "ckpt é", "commitTimestamp": now}}
    assert f"key: {json.dumps(key, separators=(',', ':'))} payload: " in records[0]
    assert json.loads(records[0].split(" payload: ", 1)[1]) == value
    assert records[1].endswith(f"key: {json.dumps(key, separators=(',', ':'))} payload: <DELETE>")


def test_a_consumer_offsets_partition_count_above_a_topics_bound_is_refused(tmp_path: Path) -> None:
    (tmp_path / SERVER_PROPERTIES).write_text("offsets.topic.num.partitions=2147483647\n")
    accepted = f"accepted: an integer from 1 to {MAX_PARTITIONS}"
    with pytest.raises(InvalidConfigError, match=f"offsets.topic.num.partitions = '2147483647' is invalid; {accepted}"):
        OffsetStore(tmp_path)


def test_reset_strategies_take_java_longs_as_kafkas_options_do() -> None:
    assert ResetStrategy.to_offset(-(2**63)).value == -(2**63)  # clamped to the log start when planned
    for make, value in (
        (ResetStrategy.to_offset, 2**63),
        (ResetStrategy.shift_by, -(2**63) - 1),
        (ResetStrategy.to_datetime, -1),
        (ResetStrategy.to_datetime, 2**63),
        (ResetStrategy.to_offset, "5"),
    ):
        with pytest.raises(InvalidOffsetError, match=f"= {value!r} is invalid; accepted: an integer from"):
            make(value)  # type: ignore[arg-type]
