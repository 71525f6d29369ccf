"""Compaction: a property test against a model of what must survive, each of Kafka's cleaner rules on
its own, Kafka's DumpLogSegments on the cleaned files, kill -9 in the middle of rounds, and a reader
in another process while rounds run."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysparklog import BatchSettings, Codec, LogConfig, LogDirectory, PartitionLog
from pysparklog.storage import checkpoints
from pysparklog.storage.cleaner import (
    CLEANER_LOCK,
    PRODUCER_ID_EXPIRATION_MS,
    CleanResult,
    clean_log,
    cleanable_logs,
    read_cleaner_checkpoint,
    run_cleaner,
)
from pysparklog.storage.io import PosixStorage
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.records.arrow_records import HEADER_TYPE, encode_control_batch
from pysparklog.storage.records.default_records import (
    DELETE_HORIZON_FLAG_MASK,
    ControlRecordType,
    end_txn_marker,
)
from pysparklog.storage.records.memory_records import EntryTable, scan
from pysparklog.storage.swap import SWAP_MARKER
from tests.conftest import REPO, read_all
from tests.interop.kafka_tools import DumpLogSegments

T0 = 1_700_000_000_000  # the first record timestamp
NOW = T0 + 10 * 60 * 1000  # when the cleaner runs, unless a test says otherwise
DAY = 24 * 60 * 60 * 1000
COMPACT = frozenset({"compact"})

LOCAL_STORAGE = PosixStorage("/")  # checkpoint files are named by absolute paths


def config(**overrides: object) -> LogConfig:
    """A compacted topic's settings: small segments, and a round whenever anything is dirty."""
    values: dict[str, object] = {"cleanup_policy": COMPACT, "segment_bytes": 4000, "min_cleanable_dirty_ratio": 0.0}
    return LogConfig(**{**values, **overrides})  # type: ignore[arg-type]


def open_log(path: Path | str, cfg: LogConfig | None = None, topic: str = "t", partition: int = 0) -> PartitionLog:
    return LogDirectory(path, cfg or config()).partition(topic, partition).local


def table(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None] | None = None,
    *,
    ts: int | Sequence[int] = T0,
    headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
) -> pa.Table:
    """Records with the given keys; values default to ``<key>@<position>``; timestamps from ``ts`` on."""
    n = len(keys)
    if values is None:
        values = [(key or b"-") + b"@" + str(i).encode() for i, key in enumerate(keys)]
    stamps = list(range(ts, ts + n)) if isinstance(ts, int) else list(ts)
    columns = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array(stamps, pa.int64()),
    }
    if headers is not None:
        columns["headers"] = pa.array(
            [None if h is None else [{"key": hk, "value": hv} for hk, hv in h] for h in headers], HEADER_TYPE
        )
    return pa.table(columns)


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def read(log: Log) -> list[Record]:
    t = read_all(log, include_headers=True)
    if t.num_rows == 0:
        return []
    return [
        Record(o, key, value, ts, tuple((h["key"], h["value"]) for h in hs or ()))
        for o, key, value, ts, hs in zip(
            t.column("offset").to_pylist(),
            t.column("key").to_pylist(),
            t.column("value").to_pylist(),
            t.column("timestamp").cast(pa.int64()).to_pylist(),
            t.column("headers").to_pylist(),
            strict=True,
        )
    ]


def append(log: Log, data: pa.Table, settings: BatchSettings | None = None) -> list[Record]:
    """Append and return the records as the model sees them (offsets assigned by the log)."""
    info = log.append_arrow(data, settings or BatchSettings(max_batch_bytes=300))
    rows = data.to_pylist()
    return [
        Record(
            info.first_offset + i,
            r["key"],
            r["value"],
            r["timestamp"],
            tuple((h["key"], h["value"]) for h in r.get("headers") or ()),
        )
        for i, r in enumerate(rows)
    ]


def entries(log: Log, base: int | None = None) -> EntryTable:
    """The batch headers of one segment (default: every segment), as the scan sees them."""
    bases = [s.base_offset for s in log.segments()] if base is None else [base]
    rows = []
    for b in bases:
        segment = log.segment(b)
        rows.append(scan(segment.read_bytes(0, segment.size())).rows)
    return EntryTable(np.concatenate(rows), 0, False)


def last_per_key(records: Sequence[Record], below: int | None = None) -> dict[bytes, Record]:
    latest: dict[bytes, Record] = {}
    for r in records:
        if r.key is not None and (below is None or r.offset < below):
            latest[r.key] = r
    return latest


def active_bytes(log: Log) -> bytes:
    return Path(log.segments()[-1].log_path).read_bytes()


def clean(log: Log, now: int = NOW, **kwargs: int) -> CleanResult:
    result = clean_log(log, now, **kwargs)
    assert result.cleaned, result.reason
    return result


# -- the model ------------------------------------------------------------------------------------

KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
record_st = st.tuples(
    st.one_of(st.none(), st.sampled_from(KEYS)),  # a key, or none
    st.one_of(st.none(), st.binary(min_size=0, max_size=40)),  # a value, or a tombstone
    st.booleans(),  # with a header
)
batch_st = st.tuples(st.lists(record_st, min_size=1, max_size=12), st.sampled_from([Codec.NONE, Codec.ZSTD, Codec.LZ4]))
round_st = st.tuples(st.lists(batch_st, min_size=1, max_size=6), st.booleans())  # batches, then roll or not


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(round_st, min_size=1, max_size=4),
    segment_bytes=st.sampled_from([400, 900, 3000]),
    map_slots=st.sampled_from([4, 8, 1 << 16]),  # small maps end rounds early
)
def test_compaction_matches_the_model(
    rounds: list[tuple[list[tuple[list[tuple[bytes | None, bytes | None, bool]], Codec]], bool]],
    segment_bytes: int,
    map_slots: int,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(directory, config(segment_bytes=segment_bytes))
        model: list[Record] = []
        for batches, roll in rounds:
            for records, codec in batches:
                keys = [key for key, _, _ in records]
                values = [value for _, value, _ in records]
                headers = [[("h", key)] if with_header else None for key, _, with_header in records]
                ts = T0 + len(model)
                model += append(log, table(keys, values, ts=ts, headers=headers), BatchSettings(codec=codec))
            if roll:
                log.roll()
            active_before = active_bytes(log)
            before = read(log)
            result = clean_log(log, NOW, dedupe_buffer_bytes=map_slots * 24)
            assert active_bytes(log) == active_before, "the active segment is never touched"
            survivors = read(log)
            by_offset = {r.offset: r for r in model}
            offsets = [r.offset for r in survivors]
            assert offsets == sorted(set(offsets)), "the log reads back in offset order"
            for r in survivors:
                assert r == by_offset[r.offset], "a survivor keeps its offset, key, value, timestamp and headers"
            kept = {r.offset for r in survivors}
            # The last record of every key survives, tombstones included (the delete horizon is a day away).
            assert {r.offset for r in last_per_key(model).values()} <= kept
            if result.cleaned:
                # Below the end of the round only the last record of each key is left, keyless ones are gone.
                cleaned = {o for o in kept if o < result.end_offset}
                assert cleaned == {r.offset for r in last_per_key(model, result.end_offset).values()}
                # Past it every record stays, keyless ones too: the map says nothing about them.
                assert [r for r in survivors if r.offset >= result.end_offset] == [
                    r for r in before if r.offset >= result.end_offset
                ]
                assert read_cleaner_checkpoint(LOCAL_STORAGE, directory)[("t", 0)] == result.end_offset
            for segment in log.segments():
                assert segment.indexes_intact()
        log.close()


def test_last_value_of_each_key_survives_at_its_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    model = append(log, table([b"a", b"b", b"a", b"c", None, b"b", b"a"]))
    model += append(log, table([b"d"], ts=T0 + 100))  # the active segment after the roll below
    log.roll()
    model += append(log, table([b"a", b"d"], ts=T0 + 200))
    result = clean(log)
    assert [(r.offset, r.key, r.value) for r in read(log)] == [
        (3, b"c", b"c@3"),
        (5, b"b", b"b@5"),
        (6, b"a", b"a@6"),
        (7, b"d", b"d@0"),
        (8, b"a", b"a@0"),  # the active segment: not cleaned, so the older a and d stay below it
        (9, b"d", b"d@1"),
    ]
    assert result.cleanable is not None and (result.cleanable.first_dirty, result.end_offset) == (0, 8)
    assert (result.records_read, result.records_kept) == (8, 4)


# -- when a round runs ----------------------------------------------------------------------------


def test_a_log_is_cleaned_only_when_dirtier_than_min_cleanable_dirty_ratio(tmp_path: Path) -> None:
    log = open_log(tmp_path, config(min_cleanable_dirty_ratio=0.5))
    keys = [f"k{i % 20}".encode() for i in range(200)]
    append(log, table(keys))
    log.roll()
    first = clean(log)
    assert first.cleanable is not None and first.cleanable.dirty_ratio == 1.0
    clean_size = sum(s.size() for s in log.segments()[:-1])
    # A little more data: dirty / (clean + dirty) below one half, so no round.
    append(log, table(keys[:5], ts=T0 + 1000))
    log.roll()
    files_before = sorted(os.listdir(log.directory))
    skipped = clean_log(log, NOW)
    assert not skipped.cleaned and skipped.reason.startswith("not due")
    assert skipped.cleanable is not None
    dirty = skipped.cleanable.cleanable_bytes
    assert skipped.cleanable.clean_bytes == clean_size
    assert skipped.cleanable.dirty_ratio == pytest.approx(dirty / (clean_size + dirty)) and dirty < clean_size
    assert sorted(os.listdir(log.directory)) == files_before
    assert read_cleaner_checkpoint(LOCAL_STORAGE, str(tmp_path))[("t", 0)] == first.end_offset
    # More: past one half.
    append(log, table(keys[:60], ts=T0 + 2000))
    log.roll()
    second = clean(log)
    assert second.cleanable is not None and second.cleanable.dirty_ratio > 0.5
    assert second.cleanable.first_dirty == first.end_offset
    assert {r.key for r in read(log)} == set(keys) and len(read(log)) == 20


def test_the_dirtiest_log_is_cleaned_first(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path, config(min_cleanable_dirty_ratio=0.2))
    keys = [f"k{i % 50}".encode() for i in range(100)]
    for partition, extra in ((0, 40), (1, 90), (2, 2)):
        log = logs.partition("t", partition)
        append(log, table(keys))
        log.roll()
        clean(log)
        append(log, table(keys[:extra], ts=T0 + 500))
        log.roll()
    due = cleanable_logs([logs.partition("t", p) for p in range(3)], NOW)
    assert [log.partition for log, _ in due] == [1, 0], "partition 2 is below the ratio; 1 is dirtier than 0"
    assert due[0][1].dirty_ratio > due[1][1].dirty_ratio > 0.2


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path, config(min_compaction_lag_ms=60_000))
    append(log, table([b"a", b"a", b"b"], ts=NOW - 3_600_000))  # an hour old: cleanable
    log.roll()
    recent_base = log.log_end_offset
    append(log, table([b"a", b"b", b"b"], ts=NOW - 30_000))  # 30 s old: within the lag
    log.roll()
    recent = log.segment(recent_base)
    recent_bytes = Path(recent.log_path).read_bytes()
    result = clean(log)
    assert result.cleanable is not None and result.cleanable.first_uncleanable == recent_base
    assert result.end_offset == recent_base
    assert Path(log.segment(recent_base).log_path).read_bytes() == recent_bytes, "not touched: within the lag"
    # The old segment lost its first a only: the newer a and b of the recent segment are not in the map.
    assert [r.offset for r in read(log)] == [1, 2, 3, 4, 5]
    # Once the lag has passed, the recent segment is cleaned as well.
    later = clean_log(log, NOW + 60_000)
    assert later.cleaned and later.end_offset == 6
    assert [r.offset for r in read(log)] == [3, 5]


def test_max_compaction_lag_forces_a_round_below_the_dirty_ratio(tmp_path: Path) -> None:
    keys = [f"k{i % 10}".encode() for i in range(100)]
    for max_lag, due in ((LogConfig().max_compaction_lag_ms, False), (60_000, True)):
        directory = tmp_path / str(max_lag)
        log = open_log(directory, config(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=max_lag))
        append(log, table(keys, ts=NOW - 10 * 60_000))
        log.roll()
        clean(log)
        append(log, table(keys[:20], ts=NOW - 5 * 60_000), BatchSettings(max_batch_records=1))  # 5 minutes old
        log.roll()
        result = clean_log(log, NOW)
        assert result.cleanable is not None and result.cleanable.dirty_ratio < 0.9
        assert result.cleaned is due, result.reason
        if due:
            assert result.cleanable.compaction_delay_ms == 4 * 60_000
            assert len(read(log)) == 10


def test_nothing_happens_without_compact_in_the_policy(tmp_path: Path) -> None:
    log = open_log(tmp_path, config(cleanup_policy=frozenset({"delete"})))
    append(log, table([b"a"] * 10))
    log.roll()
    result = clean_log(log, NOW)
    assert not result.cleaned and "does not compact" in result.reason
    assert len(read(log)) == 10


def test_a_second_cleaner_skips_a_partition_being_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, table([b"a"] * 10))
    log.roll()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, os.path.join(log.directory, CLEANER_LOCK)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        result = clean_log(log, NOW)
        assert not result.cleaned and result.reason == "another cleaner is compacting it"
    finally:
        holder.kill()
        holder.communicate()
    assert clean_log(log, NOW).cleaned


_HOLD_LOCK = """
import fcntl, sys, time
fd = open(sys.argv[1], "a")
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


# -- what a round keeps -----------------------------------------------------------------------------


def test_tombstones_get_a_horizon_then_go_after_delete_retention_ms(tmp_path: Path) -> None:
    delete_retention = 3_600_000
    log = open_log(tmp_path, config(delete_retention_ms=delete_retention))
    append(log, table([b"a", b"b"]))
    append(log, table([b"a"], [None], ts=T0 + 10))  # a's tombstone
    log.roll()
    clean(log, NOW)
    assert [(r.key, r.value, r.timestamp) for r in read(log)] == [(b"b", b"b@1", T0 + 1), (b"a", None, T0 + 10)]
    batch = entries(log, 0)
    horizon_batches = np.flatnonzero(batch.attributes & DELETE_HORIZON_FLAG_MASK)
    assert horizon_batches.tolist() == [len(batch) - 1], "only the tombstone's batch gets a horizon"
    assert int(batch.base_timestamps[-1]) == NOW + delete_retention

    # Before the horizon a later round keeps the tombstone, and its horizon.
    append(log, table([b"c"], ts=T0 + 20))
    log.roll()
    clean(log, NOW + delete_retention - 1)
    assert [r.key for r in read(log)] == [b"b", b"a", b"c"]
    tombstone_batch = entries(log, 0)
    assert int(tombstone_batch.base_timestamps[1]) == NOW + delete_retention, "the horizon is set once"

    # At the horizon it goes.
    append(log, table([b"d"], ts=T0 + 30))
    log.roll()
    clean(log, NOW + delete_retention)
    assert [r.key for r in read(log)] == [b"b", b"c", b"d"]


def test_rewritten_batches_keep_their_base_and_last_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, table([b"a", b"b", b"c", b"d", b"e"]), BatchSettings())  # one batch, offsets 0-4
    append(log, table([b"a", b"c", b"e"], ts=T0 + 10), BatchSettings())  # offsets 5-7
    log.roll()
    clean(log)
    batches = entries(log, 0)
    assert batches.base_offsets.tolist() == [0, 5]
    assert batches.last_offsets.tolist() == [4, 7], "lastOffsetDelta is kept even though records went"
    assert batches.record_counts.tolist() == [2, 3]
    assert [r.offset for r in read(log)] == [1, 3, 5, 6, 7]


def test_a_round_covers_the_offsets_missing_at_the_end_of_its_last_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, config(segment_bytes=200))  # too small to group the two segments
    append(log, table([b"a", b"b"], ts=NOW - 3_600_000), BatchSettings())
    append(log, table([b"c"], ts=NOW - 3_600_000 + 10), BatchSettings())
    log.roll()
    append(log, table([b"c"], ts=NOW - 10_000), BatchSettings())
    log.roll()
    clean(log)
    assert entries(log, 0).last_offsets.tolist() == [1], "the segment lost its last batch: offset 2 is a gap"
    # A round over the first segment only (the second is within min.compaction.lag.ms): the map
    # covers the gap, so the round ends at the next segment's base.
    (tmp_path / checkpoints.CLEANER_OFFSET_CHECKPOINT).unlink()
    lagging = open_log(tmp_path, config(segment_bytes=200, min_compaction_lag_ms=60_000))
    result = clean(lagging)
    assert result.cleanable is not None and result.cleanable.first_uncleanable == 3
    assert result.end_offset == 3


def test_a_cleaned_segment_left_empty_answers_lookups_by_time_as_kafka_does(tmp_path: Path) -> None:
    """Kafka's ListOffsets searches the first segment whose largest timestamp reaches the target, and a
    segment without a record timestamp counts its file's modification time (``LogSegment.largestTimestamp``):
    an empty cleaned segment modified after the target ends the search with no offset."""
    log = open_log(tmp_path, config(segment_bytes=100))  # one segment per group
    append(log, table([b"a", b"b"]), BatchSettings())  # 0, 1
    log.roll()
    append(log, table([b"a", b"b"], ts=T0 + 100), BatchSettings())  # 2, 3
    log.roll()
    append(log, table([b"c"], ts=T0 + 200), BatchSettings())  # 4
    log.roll()
    clean(log)
    first = log.segments()[0]
    assert (first.base_offset, first.size()) == (0, 0), "every record of the first segment has a newer value"
    assert log.offset_for_timestamp(T0) is None, "the empty segment was modified after T0"
    os.utime(first.log_path, ns=((T0 - 1) * 1_000_000,) * 2)
    assert log.offset_for_timestamp(T0) == (2, T0 + 100), "modified before T0: the search goes on"
    assert log.offset_for_timestamp(T0 + 201) is None, "the empty active segment ends it"


def test_keyless_records_go_but_the_batch_ending_the_round_stays_empty(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, table([None, b"a"]), BatchSettings())
    append(log, table([None, None], ts=T0 + 10), BatchSettings())  # the last batch below the active segment
    log.roll()
    clean(log)
    batches = entries(log, 0)
    assert batches.base_offsets.tolist() == [0, 2]
    assert batches.last_offsets.tolist() == [1, 3], "the round's last batch keeps its offsets, without records"
    assert batches.record_counts.tolist() == [1, 0]
    assert [r.offset for r in read(log)] == [1]


def test_producer_fields_are_kept_and_an_active_producers_last_batch_stays_empty(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producer = BatchSettings(producer_id=7, producer_epoch=3, base_sequence=100)
    append(log, table([b"a", b"b", b"c"], ts=NOW - 1000), producer)
    append(log, table([b"x"], ts=NOW - 900), BatchSettings(producer_id=9, producer_epoch=1, base_sequence=5))
    append(log, table([b"a", b"x"], ts=NOW - 800))
    log.roll()
    clean(log)
    batches = entries(log, 0)
    assert batches.base_offsets.tolist() == [0, 3, 4]
    assert batches.last_offsets.tolist() == [2, 3, 5]
    assert batches.record_counts.tolist() == [2, 0, 2], "producer 9's last batch is kept, empty"
    assert batches.producer_ids.tolist() == [7, 9, -1]
    assert batches.producer_epochs.tolist() == [3, 1, -1]
    assert batches.base_sequences.tolist() == [100, 5, -1]
    assert [r.key for r in read(log)] == [b"b", b"c", b"a", b"x"]
    # Once producer 9 has expired its empty batch goes too.
    append(log, table([b"z"], ts=NOW))
    log.roll()
    clean(log, NOW + PRODUCER_ID_EXPIRATION_MS)
    assert 9 not in entries(log, 0).producer_ids.tolist()


def test_headers_survive(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    headers: list[list[tuple[str, bytes | None]] | None] = [[("trace", b"1"), ("none", None)], None, [("trace", b"3")]]
    model = append(log, table([b"a", b"b", b"c"], headers=headers), BatchSettings())
    append(log, table([b"b"], ts=T0 + 10))
    log.roll()
    clean(log)
    survivors = read(log)
    assert survivors[:2] == [model[0], model[2]]
    assert survivors[0].headers == (("trace", b"1"), ("none", None))
    assert entries(log, 0).record_counts[0] == 2, "the batch was rewritten"


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_codec_is_kept(tmp_path: Path, codec: Codec) -> None:
    log = open_log(tmp_path)
    keys = [f"k{i % 7}".encode() for i in range(40)]
    model = append(log, table(keys), BatchSettings(codec=codec))
    log.roll()
    clean(log)
    batches = entries(log, 0)
    assert len(batches) == 1 and batches.record_counts.tolist() == [7]
    assert (batches.attributes & 0x07).tolist() == [int(codec)]
    assert read(log) == model[-7:]


def test_cleaner_checkpoint_is_kafkas_text_file(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path, config())
    ends = {}
    for partition in (0, 1):
        log = logs.partition("t", partition)
        append(log, table([b"a", b"b", b"a"] * (partition + 1)))
        log.roll()
        ends[partition] = clean(log).end_offset
    text = (tmp_path / checkpoints.CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n2\nt 0 {ends[0]}\nt 1 {ends[1]}\n"
    assert ends == {0: 3, 1: 6}


def test_a_full_offset_map_ends_the_round_early(tmp_path: Path) -> None:
    log = open_log(tmp_path, config(segment_bytes=1500))
    keys = [f"k{i:02}".encode() for i in range(30)]
    model = append(log, table(keys + keys, ts=T0))
    log.roll()
    upper = log.segments()[-1].base_offset
    # Room for 8 slots: at most 7 keys a round.
    first = clean(log, dedupe_buffer_bytes=8 * 24)
    assert first.end_offset == 7, "the map filled at the eighth key"
    assert [r.offset for r in read(log)] == [r.offset for r in model], "nothing superseded yet: all newer"
    rounds = 1
    end = first.end_offset
    while end < upper:
        end = clean(log, dedupe_buffer_bytes=8 * 24).end_offset
        rounds += 1
    assert rounds > 3
    assert read(log) == model[30:]


def test_aborted_transactions_go_and_markers_stay_until_their_data_is_gone(tmp_path: Path) -> None:
    log = open_log(tmp_path, config(delete_retention_ms=1000))
    old = NOW - 2 * DAY  # the producers have expired by NOW: no empty batch is kept for them
    append(log, table([b"a", b"b", b"u"], ts=old))
    txn = {pid: BatchSettings(producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True) for pid in (5, 6)}
    append(log, table([b"a"], [b"aborted"], ts=old + 1), txn[5])
    append(log, table([b"b"], [b"committed"], ts=old + 2), txn[6])
    for pid, marker in ((5, ControlRecordType.ABORT), (6, ControlRecordType.COMMIT)):
        settings = BatchSettings(producer_id=pid, producer_epoch=0, transactional=True)
        log.append(encode_control_batch(*end_txn_marker(marker, 0), settings, now_ms=old + 4))
    log.roll()
    clean(log)
    survivors = [(r.key, r.value) for r in read(log)]
    # a's aborted write is gone and does not hide a's value.
    assert survivors == [(b"a", b"a@0"), (b"u", b"u@2"), (b"b", b"committed")]
    control = entries(log, 0).is_control
    assert int(control.sum()) == 2, "the markers stay while their transactions' batches were seen"
    # The abort marker's transaction is empty now: it gets a horizon, then goes; the commit marker's is not.
    append(log, table([b"z"], ts=old + 5))
    log.roll()
    clean(log)
    assert int(entries(log, 0).is_control.sum()) == 2
    append(log, table([b"y"], ts=old + 6))
    log.roll()
    clean(log, NOW + 1000)
    batches = entries(log, 0)
    assert batches.is_control.sum() == 1 and int(batches.producer_ids[batches.is_control][0]) == 6


def test_an_open_transaction_stops_cleaning_at_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, config())
    append(log, table([b"k", b"k"], ts=NOW - 1000))
    append(
        log,
        table([b"k"], [b"open"], ts=NOW - 900),
        BatchSettings(producer_id=9, producer_epoch=0, base_sequence=0, transactional=True),
    )
    log.roll()
    append(log, table([b"k"], ts=NOW - 800))
    log.roll()
    assert log.last_stable_offset == 2
    blocked = clean_log(log, NOW)
    assert not blocked.cleaned and "dirty ratio 0.000" in blocked.reason  # [0, 2) is one segment's part: not due
    assert [r.offset for r in read(log)] == [0, 1, 2, 3], "nothing past the open transaction's first offset is cleaned"
    commit = BatchSettings(producer_id=9, producer_epoch=0, transactional=True)
    log.append(encode_control_batch(*end_txn_marker(ControlRecordType.COMMIT, 0), commit, now_ms=NOW - 700))
    log.roll()
    clean(log)
    assert [r.offset for r in read(log)] == [3], "once it commits, the range is cleaned: only the latest k stays"


def test_compact_delete_runs_retention_then_compaction(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path, LogConfig(segment_bytes=4000, min_cleanable_dirty_ratio=0.0))
    logs.topics.create("both", 1, {"cleanup.policy": "compact,delete", "retention.ms": str(DAY)})
    logs.topics.create("compacted", 1, {"cleanup.policy": "compact", "retention.ms": str(DAY)})
    logs.topics.create("deleted", 1, {"cleanup.policy": "delete", "retention.ms": str(DAY)})
    for name in ("both", "compacted", "deleted"):
        log = logs.partition(name, 0)
        append(log, table([b"old"] * 3, ts=NOW - 2 * DAY))  # past retention.ms
        log.roll()
        append(log, table([b"a", b"b", b"a"], ts=NOW - 1000))
        log.roll()
    reports = {r.topic: r for r in run_cleaner(tmp_path, now_ms=NOW)}
    assert reports["both"].retention is not None
    assert [d.base_offset for d in reports["both"].retention.deleted] == [0]
    assert reports["both"].compaction is not None and reports["both"].compaction.cleaned
    assert [(r.offset, r.key) for r in read(logs.partition("both", 0))] == [(4, b"b"), (5, b"a")]
    assert reports["compacted"].retention is not None
    assert reports["compacted"].retention.deleted == () and reports["compacted"].compaction is not None
    assert [(r.offset, r.key) for r in read(logs.partition("compacted", 0))] == [(2, b"old"), (4, b"b"), (5, b"a")]
    assert reports["deleted"].retention is not None
    assert [d.base_offset for d in reports["deleted"].retention.deleted] == [0]
    assert reports["deleted"].compaction is None
    assert len(read(logs.partition("deleted", 0))) == 3


@pytest.mark.parametrize(("limit", "groups"), [("segment_bytes", 2), ("segment_index_bytes", 3)])
def test_groups_stay_within_segment_bytes_and_the_index_size(tmp_path: Path, limit: str, groups: int) -> None:
    def fill(log: Log) -> None:
        for i in range(6):  # six segments of four one-record batches: three index entries each
            for j in range(4):
                append(log, table([f"k{i}-{j}".encode()], ts=T0 + 10 * i + j), BatchSettings())
            log.roll()

    probe = open_log(tmp_path / "probe", config(index_interval_bytes=0))
    fill(probe)
    size = probe.segments()[0].size()
    index_bytes = os.path.getsize(probe.segments()[0].time_index_path)
    assert index_bytes == 3 * 12
    # Room for three segments' logs, or for two segments' time indexes.
    limits = {"segment_bytes": 3 * size + 10, "segment_index_bytes": 2 * index_bytes + 10}
    log = open_log(tmp_path / "logs", config(index_interval_bytes=0, **{limit: limits[limit]}))
    fill(log)
    clean(log)
    assert len(log.segments()) - 1 == groups, "six segments in groups of three logs, or of two time indexes"
    assert len(read(log)) == 24


def test_cleaned_segments_keep_the_modification_time_of_what_they_replace(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(5):
        append(log, table([f"k{j % 3}".encode() for j in range(8)], ts=T0 + 10 * i))
        log.roll()
    infos = log.segment_infos()[:-1]
    for i, info in enumerate(infos):
        stamp = (T0 + i * 1000) / 1000
        os.utime(log.segment(info.base_offset).log_path, (stamp, stamp))
    clean(log)
    after = log.segment_infos()[:-1]
    assert len(after) == 1 and len(infos) == 5, "the segments were grouped into one"
    assert after[0].last_modified_ms == T0 + 4000


def test_cleaners_in_turn_each_see_the_others_segments(tmp_path: Path) -> None:
    first, second = open_log(tmp_path), open_log(tmp_path)  # as two processes would
    for i in range(3):
        append(first, table([b"k"] * 5, ts=T0 + 10 * i))
        first.roll()
    first.view()
    assert clean_log(second, NOW).cleaned
    assert first.view().segment_bases == open_log(tmp_path).view().segment_bases
    assert clean_log(first, NOW).reason.startswith("not due"), "nothing new to clean, and no segment missing"


def test_stale_cleaned_files_of_a_killed_cleaner_are_removed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, table([b"a"] * 5))
    log.roll()
    stale = Path(log.directory) / "00000000000000000000.log.cleaned"
    stale.write_bytes(b"half written")
    assert read(log)[-1].value == b"a@4", "readers ignore .cleaned files"
    clean(log)
    assert not stale.exists()


# -- Kafka's own tool on the cleaned files ---------------------------------------------------------


def _assert_clean(stderr: str, offsets: Sequence[int] = ()) -> None:
    """DumpLogSegments reports index mismatches and errors on stderr: expect none. It also lists the
    gaps between record offsets, which compaction makes: each must be a gap between two of ``offsets``."""
    following = dict(zip(offsets, offsets[1:], strict=False))
    complaints = []
    for line in stderr.splitlines():
        gap = re.fullmatch(r"\s*(\d+) is followed by (\d+)", line)
        if gap is not None and following.get(int(gap[1])) == int(gap[2]):
            continue
        if not line.startswith(("Picked up ", "Non-consecutive offsets in ")):
            complaints.append(line)
    assert complaints == [], stderr


@pytest.mark.interop
def test_kafka_dump_log_segments_accepts_cleaned_segments(kafka_dump_log: DumpLogSegments, tmp_path: Path) -> None:
    log = open_log(tmp_path / "logs", config(segment_bytes=3000, index_interval_bytes=200))
    keys = [f"key-{i % 25}".encode() for i in range(300)]
    headers: list[list[tuple[str, bytes | None]] | None] = [[("n", str(i).encode())] for i in range(300)]
    append(log, table(keys, ts=NOW - 5000, headers=headers), BatchSettings(max_batch_bytes=400, codec=Codec.ZSTD))
    append(log, table(keys[:5], [None] * 5, ts=NOW - 4000))  # tombstones: their batch gets a horizon
    kept = [f"kept-{i}".encode() for i in range(10)]
    # A compressed batch with headers, which loses one record: rewritten, still zstd, headers kept.
    append(log, table(kept, ts=NOW - 3500, headers=headers[:10]), BatchSettings(codec=Codec.ZSTD))
    append(log, table(kept[:1], ts=NOW - 3400))
    append(log, table([b"key-1"], ts=NOW - 3000), BatchSettings(producer_id=4, producer_epoch=0, base_sequence=0))
    append(log, table([b"key-1"] * 50 + keys[105:125], ts=NOW - 2000), BatchSettings(max_batch_bytes=500))
    log.roll()
    clean(log)
    # A second round groups the now small segments into one.
    append(log, table(keys[10:25], ts=NOW - 1000))
    log.roll()
    append(log, table([b"active"], ts=NOW))
    before = len(log.segments())
    clean(log)
    cleaned = log.segments()[:-1]
    assert len(cleaned) < before - 1, "segments were grouped"
    batches = entries(log)
    assert (batches.attributes & DELETE_HORIZON_FLAG_MASK).any() and (batches.record_counts == 0).any()
    assert ((batches.codecs == Codec.ZSTD) & (batches.record_counts == 9)).any()
    expected = [r.offset for r in read(log)]
    dumped: list[int] = []
    copies = tmp_path / "copies"
    copies.mkdir()
    for segment in cleaned:
        files = []
        for path in (segment.log_path, segment.index_path, segment.time_index_path):
            copy = copies / os.path.basename(path)
            copy.write_bytes(Path(path).read_bytes())
            files.append(copy)
        deep = kafka_dump_log([files[0]], "--deep-iteration")
        assert deep.returncode == 0, deep.stderr
        _assert_clean(deep.stderr, expected)
        dumped += [int(line.split()[2]) for line in deep.stdout.splitlines() if line.startswith("| offset: ")]
        sanity = kafka_dump_log(files[1:], "--index-sanity-check")
        assert sanity.returncode == 0, sanity.stderr
        _assert_clean(sanity.stderr)
        assert sanity.stdout.count("passed sanity check.") == 2, sanity.stdout
        verified = kafka_dump_log(files[1:], "--verify-index-only")
        assert verified.returncode == 0, verified.stderr
        _assert_clean(verified.stderr)
    assert dumped == [o for o in expected if o < log.segments()[-1].base_offset]


# -- crashes and concurrent readers ------------------------------------------------------------------

_COMPACTOR = """
import os, sys, tempfile
import pyarrow as pa
from pysparklog import LogConfig, LogDirectory
from pysparklog.storage import checkpoints
from pysparklog.storage.cleaner import clean_log
log_dir, now = sys.argv[1], int(sys.argv[2])
config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=3000, min_cleanable_dirty_ratio=0.0)
# A first round elsewhere loads the compiled kernels, so that the kills land in rounds on the log.
warm_up = LogDirectory(tempfile.mkdtemp(), config).partition("t", 0)
warm_up.append_arrow(pa.table({"key": [b"k", b"k"], "value": [b"1", b"2"]}))
warm_up.roll()
assert clean_log(warm_up, now).cleaned
log = LogDirectory(log_dir, config).partition("t", 0)
checkpoint = os.path.join(log_dir, checkpoints.CLEANER_OFFSET_CHECKPOINT)
print("ready", flush=True)
while True:
    # Forget where the last round ended, so that every round rewrites and swaps every segment.
    if os.path.exists(checkpoint):
        os.remove(checkpoint)
    clean_log(log, now)
"""


def _check_against_model(log: Log, model: list[Record]) -> None:
    by_offset = {r.offset: r for r in model}
    survivors = read(log)
    offsets = [r.offset for r in survivors]
    assert offsets == sorted(set(offsets)), "offsets in order, none twice"
    assert all(by_offset[r.offset] == r for r in survivors), "every record as written, at its offset"
    assert {r.offset for r in last_per_key(model).values()} <= set(offsets), "the last value of every key"


class _Crash(Exception):
    """The process dies here."""


@pytest.mark.parametrize("renames", range(28))  # a round of 4 segments renames 27 times
def test_a_swap_cut_short_is_finished_even_when_its_marker_is_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renames: int
) -> None:
    """A round dies after ``renames`` renames (of its files, marker and checkpoint), and the swap marker it
    left is damaged: the next reader finishes the swap from the .swap files, as Kafka's LogLoader does."""
    log = open_log(tmp_path, config(segment_bytes=1000))
    model: list[Record] = []
    for i in range(4):
        keys = [f"k{(i * 7 + j) % 9}".encode() for j in range(12)]
        model += append(log, table(keys, ts=T0 + len(model)))
        log.roll()
    rename = os.replace
    done = 0

    def rename_then_die(source: str, target: str) -> None:
        nonlocal done
        if done == renames:
            raise _Crash
        done += 1
        rename(source, target)

    monkeypatch.setattr(os, "replace", rename_then_die)
    try:
        clean_log(log, NOW)
    except _Crash:
        pass
    monkeypatch.setattr(os, "replace", rename)
    marker = Path(log.directory) / SWAP_MARKER
    if marker.exists():
        marker.write_bytes(b"\xff{not json" + marker.read_bytes()[:5])
    reader = open_log(tmp_path, config(segment_bytes=1000))
    _check_against_model(reader, model)
    names = os.listdir(log.directory)
    assert SWAP_MARKER not in names and not [n for n in names if n.endswith(".swap")], names
    model += append(reader, table([b"k1"], ts=T0 + len(model)))
    _check_against_model(open_log(tmp_path, config(segment_bytes=1000)), model)


@pytest.mark.slow
def test_kill_9_during_compaction_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = open_log(tmp_path, config(segment_bytes=3000))
    model: list[Record] = []
    for iteration in range(20):
        keys = [f"k{rng.randrange(40)}".encode() for _ in range(150)]
        model += append(log, table(keys, ts=T0 + len(model)), BatchSettings(max_batch_bytes=rng.choice([200, 800])))
        log.roll()
        compactor = subprocess.Popen(
            [sys.executable, "-c", _COMPACTOR, str(tmp_path), str(NOW)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert compactor.stdout is not None and compactor.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.2))
        compactor.send_signal(signal.SIGKILL)
        compactor.communicate()
        assert compactor.returncode == -signal.SIGKILL, f"iteration {iteration}: the compactor died by itself"
        log.close()
        log = open_log(tmp_path, config(segment_bytes=3000))
        _check_against_model(log, model)  # the view finished any swap the kill interrupted
        names = os.listdir(log.directory)
        assert SWAP_MARKER not in names and not [n for n in names if n.endswith(".swap")], names
        clean_log(log, NOW)  # the next cleaner removes what a killed one was writing
        assert not [n for n in os.listdir(log.directory) if n.endswith(".cleaned")]
        _check_against_model(log, model)
        for segment in log.segments():
            assert segment.indexes_intact()
    log.close()


_READER = """
import json, os, sys
from pysparklog import LogConfig, LogDirectory
log_dir, stop = sys.argv[1], sys.argv[2]
stable = set(json.loads(sys.argv[3]))
log = LogDirectory(log_dir, LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=3000)).partition("t", 0)
passes = 0
while not os.path.exists(stop) or passes == 0:
    seen, last = set(), -1
    for batch in log.read_arrow():
        for offset, key, value in zip(*(batch.column(c).to_pylist() for c in ("offset", "key", "value"))):
            assert offset > last, f"offset {offset} after {last}"
            assert value.startswith(key + b"@"), f"offset {offset}: value {value!r} is not one of key {key!r}"
            last = offset
            seen.add(key.decode())
    assert stable <= seen, f"a read pass missed keys {sorted(stable - seen)}"
    passes += 1
print(json.dumps({"passes": passes}))
"""


@pytest.mark.slow
def test_a_reader_in_another_process_never_sees_a_torn_segment(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = open_log(tmp_path, config(segment_bytes=3000))
    # Keys written once: every read pass must find them, however segments are swapped under it.
    stable = [f"s{i}" for i in range(60)]
    append(log, table([key.encode() for key in stable]))
    churn = [f"c{i}".encode() for i in range(20)]
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(tmp_path), str(stop), json.dumps(stable)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    rounds = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and reader.poll() is None:
            batch = [rng.choice(churn) for _ in range(200)]
            append(log, table(batch, ts=T0 + rounds), BatchSettings(max_batch_bytes=rng.choice([150, 600])))
            log.roll()
            rounds += clean_log(log, NOW).cleaned
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert json.loads(out)["passes"] > 5 and rounds > 5
