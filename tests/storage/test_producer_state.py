"""Producer-state snapshots written on roll, in Kafka's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysparklog import BatchSettings, CorruptRecordError, LogConfig, LogDirectory
from pysparklog.storage import producer_validation
from pysparklog.storage.producer_state import ProducerSnapshotEntry, decode_snapshot, encode_snapshot
from tests.conftest import keyed_table


def test_a_roll_snapshots_the_state_of_idempotent_producers(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(segment_bytes=5000)).partition("t", 0)
    first = log.append_arrow(
        keyed_table(10, ts_start=1000), BatchSettings(producer_id=7, producer_epoch=1, base_sequence=0)
    )
    log.append_arrow(
        keyed_table(5, start=10, ts_start=1000), BatchSettings(producer_id=9, producer_epoch=0, base_sequence=40)
    )
    log.append_arrow(keyed_table(60, start=15, ts_start=1000), BatchSettings(max_batch_bytes=1000))  # rolls
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 1
    snapshot = Path(log.directory) / f"{bases[1]:020d}.snapshot"
    entries = decode_snapshot(snapshot.read_bytes())
    assert entries == [
        ProducerSnapshotEntry(7, 1, 9, first.last_offset, 9, 1009, -1, -1),
        ProducerSnapshotEntry(9, 0, 44, 14, 4, 1014, -1, -1),
    ]


def test_snapshot_corruption_is_reported() -> None:
    data = bytearray(encode_snapshot([ProducerSnapshotEntry(1, 0, 5, 10, 2, 99, -1, -1)]))
    assert decode_snapshot(bytes(data))[0].last_sequence == 5
    data[-1] ^= 1
    corrupt_crc = r"Snapshot is corrupt \(CRC is no longer valid\)\. Stored crc: \d+\. Computed crc: \d+"
    with pytest.raises(CorruptRecordError, match=corrupt_crc):
        decode_snapshot(bytes(data))
    with pytest.raises(CorruptRecordError, match="Snapshot contained an unknown file version 3"):
        decode_snapshot(b"\x00\x03" + bytes(data[2:]))
    with pytest.raises(CorruptRecordError, match="shorter than its 10-byte header"):
        decode_snapshot(b"\x00\x01")


def test_a_long_replay_is_snapshotted_at_the_log_end_for_the_next_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Spark task is a new writer that would replay the whole active segment: the first one to replay
    ``SNAPSHOT_AFTER_REPLAY`` producer batches or more keeps the result, and only the latest such snapshot stays.
    Batches count, not offsets: a replay's cost is per batch."""
    monkeypatch.setattr(producer_validation, "SNAPSHOT_AFTER_REPLAY", 5)
    logs = LogDirectory(tmp_path)
    directory = Path(tmp_path) / "t-0"

    def append_batches(first: int, count: int, records_per_batch: int = 1) -> None:
        """``count`` one-batch appends by producer 3, from a new writer."""
        with logs.partition("t", 0) as log:
            for i in range(count):
                offset = first + i * records_per_batch
                settings = BatchSettings(producer_id=3, producer_epoch=0, base_sequence=offset)
                log.append_arrow(keyed_table(records_per_batch, start=offset), settings)

    def snapshots() -> list[str]:
        return sorted(p.name for p in directory.glob("*.snapshot"))

    append_batches(0, 4)
    append_batches(4, 1)  # a replay of 4 batches: below the threshold
    assert snapshots() == []
    append_batches(5, 1, records_per_batch=100)  # 5 batches replayed: snapshotted at the log end it found, 5
    assert snapshots() == [f"{5:020d}.snapshot"]
    assert decode_snapshot((directory / f"{5:020d}.snapshot").read_bytes())[0].last_sequence == 4
    append_batches(105, 1)  # replays 1 batch of 100 offsets from the snapshot: nothing new
    append_batches(106, 3)  # 2 batches
    assert snapshots() == [f"{5:020d}.snapshot"]
    append_batches(109, 1)  # 5 batches past it: a new one replaces it
    assert snapshots() == [f"{109:020d}.snapshot"]
