"""A real Kafka broker's log directory (../shared/fixtures/kafka-broker-logdir) read with exactly the
values its README lists, and its missing indexes rebuilt in a copy."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa

from pysparklog import LogDirectory
from pysparklog.storage import checkpoints
from pysparklog.storage.index import OffsetIndex, TimeIndex
from pysparklog.storage.io import PosixStorage
from pysparklog.storage.log_state import STATE_FILE
from pysparklog.storage.producer_state import decode_snapshot, encode_snapshot
from pysparklog.storage.records.memory_records import EntryTable, scan, verify_crcs
from tests.conftest import keyed_table, read_all

LOCAL = PosixStorage("/")  # checkpoint files are named by absolute paths


def _entries(log_dir: Path, topic: str, partition: int) -> EntryTable:
    """The entries of a partition's first segment, checksums verified."""
    segment = LogDirectory(log_dir).partition(topic, partition).segments()[0]
    buf = segment.read_bytes(0, segment.size())
    entries = scan(buf, file=segment.log_path)
    verify_crcs(buf, entries, file=segment.log_path)
    return entries


def _snapshot_of_tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_reading_the_broker_directory_writes_nothing(broker_log_dir: Path) -> None:
    before = _snapshot_of_tree(broker_log_dir)
    logs = LogDirectory(broker_log_dir)
    assert logs.topic_partitions() == [("TestTopicPatient", 0), ("__cluster_metadata", 0), ("__consumer_offsets", 6)]
    for topic, partition in logs.topic_partitions():
        read_all(logs.partition(topic, partition))
    assert _snapshot_of_tree(broker_log_dir) == before


def test_patient_topic(broker_log_dir: Path) -> None:
    log = LogDirectory(broker_log_dir).partition("TestTopicPatient", 0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 3)
    table = read_all(log)
    assert table.column("offset").to_pylist() == [0, 1, 2]
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps[0] == 1769792698283 and stamps[-1] == 1769793578165
    assert table.column("key").null_count == 3
    assert all(b'"resourceType"' in v for v in table.column("value").to_pylist())
    entries = _entries(broker_log_dir, "TestTopicPatient", 0)
    assert entries.producer_ids.tolist() == [1, 2, 3]
    assert log.offset_for_timestamp(1769793423115) == (1, 1769793423115)
    assert log.offset_for_timestamp(1769793423116) == (2, 1769793578165)
    assert log.offset_for_timestamp(1769793578166) is None


def test_consumer_offsets_partition(broker_log_dir: Path) -> None:
    log = LogDirectory(broker_log_dir).partition("__consumer_offsets", 6)
    table = read_all(log)
    assert table.column("offset").to_pylist() == list(range(13))
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert (stamps[0], stamps[-1]) == (1769791662955, 1769793578176)
    entries = _entries(broker_log_dir, "__consumer_offsets", 6)
    assert (entries.producer_ids == -1).all()
    # OffsetCommit key v1 / value v3 for group DEVSmileCDR (reference §5).
    topic = b"batch2.work.notification.SHR_PROD.persistence"
    key = struct.pack(">hh", 1, 11) + b"DEVSmileCDR" + struct.pack(">h", len(topic)) + topic + struct.pack(">i", 0)
    assert key in table.column("key").to_pylist()
    value = bytes.fromhex("00030000000000000000ffffffff00000000019c0fcdac12")
    assert value in table.column("value").to_pylist()
    # The broker's own sparse index is used for lookups between its entries.
    index = OffsetIndex.parse((broker_log_dir / "__consumer_offsets-6" / "00000000000000000000.index").read_bytes(), 0)
    assert list(zip(index.offsets.tolist(), index.positions.tolist(), strict=True)) == [(3, 4730), (7, 9571)]
    for offset in range(13):
        assert read_all(log, offset, offset + 1).column("offset").to_pylist() == [offset]
    for target in (1769791662955, 1769791783399, 1769792518093, 1769793000000, 1769793578176):
        expected = next((o, t) for o, t in zip(range(13), stamps, strict=True) if t >= target)
        assert log.offset_for_timestamp(target) == expected


def test_cluster_metadata_partition(broker_log_dir: Path) -> None:
    entries = _entries(broker_log_dir, "__cluster_metadata", 0)
    assert len(entries) == 4814
    assert int(entries.record_counts.sum()) == 4929
    assert int(entries.last_offsets[-1]) == 4928
    log = LogDirectory(broker_log_dir).partition("__cluster_metadata", 0)
    assert log.log_end_offset == 4929
    offsets = read_all(log).column("offset").to_numpy()
    control_records = int(entries.record_counts[entries.is_control].sum())
    assert len(offsets) == 4929 - control_records, "control records are not user records"
    assert np.all(np.diff(offsets) > 0) and offsets[-1] == 4928


def test_partition_and_log_dir_text_files(broker_log_dir: Path) -> None:
    assert checkpoints.read_leader_epoch_checkpoint(
        LOCAL, str(broker_log_dir / "TestTopicPatient-0" / "leader-epoch-checkpoint")
    ) == [(0, 0)]
    assert checkpoints.read_leader_epoch_checkpoint(
        LOCAL, str(broker_log_dir / "__cluster_metadata-0" / "leader-epoch-checkpoint")
    ) == [(1, 0)]
    for name in ("TestTopicPatient-0", "__consumer_offsets-6", "__cluster_metadata-0"):
        topic_id = checkpoints.read_partition_metadata(LOCAL, str(broker_log_dir / name / "partition.metadata"))
        assert topic_id is not None and len(topic_id) == 22
    points = checkpoints.read_offset_checkpoint(LOCAL, str(broker_log_dir / "recovery-point-offset-checkpoint"))
    assert len(points) == 54 and set(points.values()) == {0}
    assert checkpoints.read_offset_checkpoint(LOCAL, str(broker_log_dir / "log-start-offset-checkpoint")) == {}
    assert checkpoints.read_offset_checkpoint(LOCAL, str(broker_log_dir / "cleaner-offset-checkpoint")) == {}


def test_empty_producer_snapshot(broker_log_dir: Path) -> None:
    data = (broker_log_dir / "__consumer_offsets-6" / "00000000000000000013.snapshot").read_bytes()
    assert data == bytes.fromhex("0001 48674BC7 00000000")
    assert decode_snapshot(data) == []
    assert encode_snapshot([]) == data


def test_missing_indexes_are_rebuilt_as_the_broker_wrote_them(broker_log_dir_copy: Path) -> None:
    partition = broker_log_dir_copy / "__consumer_offsets-6"
    original_index = (partition / "00000000000000000000.index").read_bytes()
    original_time_index = (partition / "00000000000000000000.timeindex").read_bytes()
    os.remove(partition / "00000000000000000000.index")
    os.remove(partition / "00000000000000000000.timeindex")
    log = LogDirectory(broker_log_dir_copy).partition("__consumer_offsets", 6).local
    log.recover()
    assert (partition / "00000000000000000000.index").read_bytes() == original_index
    assert (partition / "00000000000000000000.timeindex").read_bytes() == original_time_index

    patient = broker_log_dir_copy / "TestTopicPatient-0"
    LogDirectory(broker_log_dir_copy).partition("TestTopicPatient", 0).local.recover()
    assert (patient / "00000000000000000000.index").read_bytes() == b"", "three small batches: no entry is due"
    time_index = TimeIndex.parse((patient / "00000000000000000000.timeindex").read_bytes(), 0)
    assert list(zip(time_index.timestamps.tolist(), time_index.offsets.tolist(), strict=True)) == [(1769793578165, 2)]


def test_appending_to_a_copied_broker_partition_continues_its_offsets(broker_log_dir_copy: Path) -> None:
    log = LogDirectory(broker_log_dir_copy).partition("TestTopicPatient", 0)
    info = log.append_arrow(keyed_table(4))
    assert (info.first_offset, info.last_offset) == (3, 6)
    assert (broker_log_dir_copy / "TestTopicPatient-0" / STATE_FILE).exists()
    table = read_all(log)
    assert table.column("offset").to_pylist() == list(range(7))
    assert table.column("key").to_pylist()[3:] == keyed_table(4).column("key").to_pylist()
