"""Producer-state snapshots written on roll, in Kafka's format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pysparklog import BatchSettings, CorruptRecordError, LogConfig, LogDirectory
from pysparklog.storage import producer_validation
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.producer_state import (
    OpenTransactions,
    ProducerEntry,
    ProducerSnapshotEntry,
    apply_entry,
    decode_snapshot,
    encode_snapshot,
    replay_segment,
)
from pysparklog.storage.records.arrow_records import encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
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
    ``SNAPSHOT_AFTER_REPLAY`` runs of producer batches or more keeps the result, and only the latest such snapshot
    stays. Runs count, not offsets: a replay's cost is per run."""
    monkeypatch.setattr(producer_validation, "SNAPSHOT_AFTER_REPLAY", 5)
    logs = LogDirectory(tmp_path)
    directory = Path(tmp_path) / "t-0"

    def append_batches(first: int, count: int, records_per_batch: int = 1) -> None:
        """``count`` one-batch appends, each by a producer of its own (so each batch is a run), from a new
        writer."""
        with logs.partition("t", 0) as log:
            for i in range(count):
                offset = first + i * records_per_batch
                settings = BatchSettings(producer_id=100 + offset, producer_epoch=0, base_sequence=0)
                log.append_arrow(keyed_table(records_per_batch, start=offset), settings)

    def snapshots() -> list[str]:
        return sorted(p.name for p in directory.glob("*.snapshot"))

    append_batches(0, 4)
    append_batches(4, 1)  # a replay of 4 runs: below the threshold
    assert snapshots() == []
    append_batches(5, 1, records_per_batch=100)  # 5 runs replayed: snapshotted at the log end it found, 5
    assert snapshots() == [f"{5:020d}.snapshot"]
    assert [e.producer_id for e in decode_snapshot((directory / f"{5:020d}.snapshot").read_bytes())] == [
        100,
        101,
        102,
        103,
        104,
    ]
    append_batches(105, 1)  # replays 1 run of 100 offsets from the snapshot: nothing new
    append_batches(106, 3)  # 2 runs
    assert snapshots() == [f"{5:020d}.snapshot"]
    append_batches(109, 1)  # 5 runs past it: a new one replaces it
    assert snapshots() == [f"{109:020d}.snapshot"]


def test_a_replay_applies_runs_of_batches_as_batch_by_batch(tmp_path: Path) -> None:
    """The replay applies a producer's consecutive batches as one run: the state it leaves (epochs, last
    batches, open transactions, aborted ones) is the one applying every batch in turn leaves."""
    logs = LogDirectory(tmp_path)
    rng = np.random.default_rng(11)
    sequences = {1: 0, 2: 0}
    epochs = {1: 0, 2: 0}
    with logs.partition("t", 0) as log:
        for step in range(60):
            producer = int(rng.integers(0, 3))
            if producer == 0:  # another writer without a producer id, between the runs
                log.append_arrow(keyed_table(3, start=step * 10))
                continue
            if producer == 2 and rng.random() < 0.3:  # the transactional producer ends its transaction
                kind = ControlRecordType.COMMIT if rng.random() < 0.5 else ControlRecordType.ABORT
                marker = BatchSettings(producer_id=2, producer_epoch=epochs[2], transactional=True)
                log.append(encode_control_batch(*end_txn_marker(kind, 0), marker))
                continue
            if producer == 1 and rng.random() < 0.1:  # a new epoch starts at sequence 0
                epochs[1], sequences[1] = epochs[1] + 1, 0
            rows = int(rng.integers(1, 30))
            settings = BatchSettings(
                producer_id=producer,
                producer_epoch=epochs[producer],
                base_sequence=sequences[producer],
                transactional=producer == 2,
                max_batch_bytes=200,
            )
            log.append_arrow(keyed_table(rows, start=step * 10), settings)
            sequences[producer] += rows
        segments = [log.segment(base) for base in log.view().segment_bases]  # keyed_table's timestamps roll it
    by_runs: dict[int, ProducerEntry] = {}
    runs_open = OpenTransactions({})
    aborted = []
    by_batches: dict[int, ProducerEntry] = {}
    batches_open = OpenTransactions({})
    expected_aborted = []
    for segment in segments:
        end = segment.file_size(segment.log_path)
        assert end is not None
        aborted += replay_segment(by_runs, segment, 0, end, 0, INT_MAX, runs_open).aborted
        for chunk in segment.chunks(0, end, verify_crc=False):
            e = chunk.entries
            for i in np.flatnonzero(e.producer_ids >= 0).tolist():
                completed = apply_entry(by_batches, chunk.buf, e, i, int(e.last_offsets[i]))
                if e.is_transactional[i] or e.is_control[i]:
                    entry = batches_open.follow(by_batches[int(e.producer_ids[i])], completed)
                    if entry is not None:
                        expected_aborted.append(entry)
    assert by_runs == by_batches and len(by_runs[1].batches) >= 1
    assert aborted == expected_aborted and len(aborted) > 0
