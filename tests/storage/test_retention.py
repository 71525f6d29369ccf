"""Retention: Kafka's rules one by one on segment descriptions, a property test against a model of what
must survive, then passes over real logs, with concurrent readers and with kill -9 in the middle."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysparklog import BatchSettings, InvalidOffsetError, LogConfig, LogDirectory, OffsetOutOfRangeError, PartitionLog
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_reads import SegmentInfo
from pysparklog.storage.records.memory_records import scan
from pysparklog.storage.retention import (
    DeletionReason,
    RetentionPlan,
    largest_timestamp,
    plan_retention,
    run_retention,
)
from tests.conftest import REPO, keyed_table, read_all

START = DeletionReason.LOG_START_OFFSET_BREACH
SIZE = DeletionReason.RETENTION_SIZE_BREACH
TIME = DeletionReason.RETENTION_TIME_BREACH
NOW = 1_000_000
FIRST_TS = 1_700_000_000_000  # keyed_table's first timestamp


def segments(*specs: tuple[int, int, int], log_end: int, modified: int = 0) -> list[SegmentInfo]:
    """Segments from ``(base, size, largest timestamp)``, each ending where the next begins."""
    bases = [base for base, _, _ in specs]
    return [
        SegmentInfo(base, size, ts, modified, next_base)
        for (base, size, ts), next_base in zip(specs, [*bases[1:], log_end], strict=True)
    ]


def plan(
    segs: Sequence[SegmentInfo],
    *,
    log_start: int | None = None,
    hw: int | None = None,
    retention_ms: int = -1,
    retention_bytes: int = -1,
    delete: bool = True,
    now: int = NOW,
) -> RetentionPlan:
    return plan_retention(
        segs,
        now_ms=now,
        log_start_offset=segs[0].base_offset if log_start is None else log_start,
        high_watermark=segs[-1].next_base if hw is None else hw,
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        delete=delete,
    )


def deleted(result: RetentionPlan) -> list[tuple[int, DeletionReason]]:
    return [(d.base_offset, d.reason) for d in result.deletions]


# Four segments of 100 bytes, aged 900, 800, 700 and 600 ms at NOW.
FOUR = segments((0, 100, NOW - 900), (10, 100, NOW - 800), (20, 100, NOW - 700), (30, 100, NOW - 600), log_end=40)


# -- the rules, one by one ------------------------------------------------------------------------


def test_time_deletes_segments_older_than_retention_ms() -> None:
    result = plan(FOUR, retention_ms=750)
    assert deleted(result) == [(0, TIME), (10, TIME)]
    assert (result.roll, result.log_start_offset) == (False, 20)
    assert deleted(plan(FOUR, retention_ms=700)) == [(0, TIME), (10, TIME)], "exactly retention.ms old stays"
    assert deleted(plan(FOUR, retention_ms=699)) == [(0, TIME), (10, TIME), (20, TIME)]
    assert deleted(plan(FOUR, retention_ms=-1)) == [], "-1 disables"


def test_time_falls_back_to_the_file_mtime_without_timestamps() -> None:
    segs = segments((0, 100, -1), (10, 100, -1), log_end=20, modified=NOW - 500)
    segs[1] = replace(segs[1], last_modified_ms=NOW - 100)
    assert largest_timestamp(segs[0]) == NOW - 500
    assert deleted(plan(segs, retention_ms=300)) == [(0, TIME)]
    with_ts = [replace(segs[0], largest_timestamp=NOW - 10), segs[1]]
    assert deleted(plan(with_ts, retention_ms=300)) == [], "a batch timestamp wins over the mtime"


def test_size_deletes_while_the_log_stays_at_or_above_retention_bytes() -> None:
    # 400 bytes, 150 retained: 250 to shed; two segments take 200, a third would cut into the 150.
    assert deleted(plan(FOUR, retention_bytes=150)) == [(0, SIZE), (10, SIZE)]
    assert deleted(plan(FOUR, retention_bytes=200)) == [(0, SIZE), (10, SIZE)], "diff - size == 0 still deletes"
    assert deleted(plan(FOUR, retention_bytes=201)) == [(0, SIZE)]
    assert deleted(plan(FOUR, retention_bytes=400)) == [], "the log is at its bound"
    assert deleted(plan(FOUR, retention_bytes=10_000)) == []
    assert deleted(plan(FOUR, retention_bytes=-1)) == [], "-1 disables"


def test_size_counts_segments_of_unequal_size_oldest_first() -> None:
    segs = segments((0, 50, NOW), (10, 300, NOW), (20, 10, NOW), (30, 10, NOW), log_end=40)
    # 370 bytes, 300 retained: the first segment (50) fits the 70 to shed, the second (300) does not,
    # and the walk stops there although the two small ones after it would fit.
    assert deleted(plan(segs, retention_bytes=300)) == [(0, SIZE)]


def test_log_start_offset_deletes_segments_wholly_below_it() -> None:
    assert deleted(plan(FOUR, log_start=25)) == [(0, START), (10, START)]
    assert deleted(plan(FOUR, log_start=20)) == [(0, START), (10, START)], "next base == log start"
    assert deleted(plan(FOUR, log_start=19)) == [(0, START)]
    result = plan(FOUR, log_start=40)
    assert deleted(result) == [(0, START), (10, START), (20, START)], "the last segment has no next segment"
    assert (result.roll, result.log_start_offset) == (False, 40), "the log start never moves back"


def test_log_start_rule_applies_without_delete_policy_size_and_time_do_not() -> None:
    assert deleted(plan(FOUR, retention_ms=0, retention_bytes=0, delete=False)) == []
    assert deleted(plan(FOUR, log_start=15, retention_ms=0, retention_bytes=0, delete=False)) == [(0, START)]


def test_rules_run_start_offset_then_size_then_time_each_on_what_is_left() -> None:
    segs = segments((0, 100, NOW - 900), (10, 100, NOW), (20, 100, NOW - 900), (30, 100, NOW), log_end=40)
    # Start: segment 0. Size on the 300 left with 150 retained: segment 10 (a size computed on the
    # original 400 would take 20 as well). Time: 20 is old, 30 is not.
    result = plan(segs, log_start=10, retention_bytes=150, retention_ms=500)
    assert deleted(result) == [(0, START), (10, SIZE), (20, TIME)]
    assert result.log_start_offset == 30


def test_each_rule_stops_at_the_first_segment_that_does_not_qualify() -> None:
    segs = segments((0, 100, NOW - 900), (10, 100, NOW - 10), (20, 100, NOW - 900), (30, 100, NOW), log_end=40)
    assert deleted(plan(segs, retention_ms=500)) == [(0, TIME)], "20 is old but 10 is not"


def test_only_segments_below_the_high_watermark_qualify() -> None:
    assert deleted(plan(FOUR, retention_ms=0, hw=25)) == [(0, TIME), (10, TIME)]
    assert deleted(plan(FOUR, retention_ms=0, hw=19)) == [(0, TIME)]
    assert deleted(plan(FOUR, retention_bytes=0, hw=30)) == [(0, SIZE), (10, SIZE), (20, SIZE)]
    assert deleted(plan(FOUR, log_start=40, hw=20)) == [(0, START), (10, START)]


def test_an_empty_last_segment_is_never_deleted() -> None:
    segs = segments((0, 100, NOW - 900), (10, 100, NOW - 900), (20, 0, -1), log_end=20, modified=NOW - 900)
    result = plan(segs, retention_ms=0, retention_bytes=0)
    assert deleted(result) == [(0, SIZE), (10, SIZE)]
    assert (result.roll, result.log_start_offset) == (False, 20)


def test_when_every_segment_qualifies_the_active_one_is_rolled_then_deleted() -> None:
    result = plan(FOUR, retention_ms=0)
    assert deleted(result) == [(0, TIME), (10, TIME), (20, TIME), (30, TIME)]
    assert (result.roll, result.log_start_offset) == (True, 40)
    result = plan(FOUR, log_start=30, retention_bytes=0)
    assert deleted(result) == [(0, START), (10, START), (20, START), (30, SIZE)]
    assert (result.roll, result.log_start_offset) == (True, 40)
    assert [d.size for d in result.deletions] == [100] * 4


def test_nothing_to_do_on_an_empty_or_single_empty_segment_log() -> None:
    assert plan_retention(
        [], now_ms=NOW, log_start_offset=0, high_watermark=0, retention_ms=0, retention_bytes=0, delete=True
    ) == RetentionPlan((), False, 0)
    assert plan(segments((7, 0, -1), log_end=7), retention_ms=0, retention_bytes=0) == RetentionPlan((), False, 7)


# -- the property test: a model of what must survive ------------------------------------------------


@dataclass(frozen=True)
class Case:
    segs: list[SegmentInfo]
    log_start: int
    hw: int
    retention_ms: int
    retention_bytes: int
    delete: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 7))
    gaps = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(0, 120), min_size=n, max_size=n))
    # Ages and retention.ms on a coarse grid as well, so that age == retention.ms comes up often.
    ages = st.one_of(st.integers(0, 10).map(lambda k: NOW - 100 * k), st.integers(NOW - 1000, NOW + 50))
    stamps = draw(st.lists(st.one_of(st.just(-1), ages), min_size=n, max_size=n))
    modified = draw(st.lists(ages, min_size=n, max_size=n))
    first = draw(st.integers(0, 20))
    bases = [first + sum(gaps[:i]) + i for i in range(n)]  # strictly increasing
    log_end = bases[-1] + (gaps[-1] + 1 if sizes[-1] else 0)  # an empty last segment ends where it starts
    segs = [
        SegmentInfo(base, size, ts, mtime, next_base)
        for base, size, ts, mtime, next_base in zip(bases, sizes, stamps, modified, [*bases[1:], log_end], strict=True)
    ]
    return Case(
        segs,
        log_start=draw(st.integers(first, log_end)),
        hw=draw(st.integers(first, log_end)),
        retention_ms=draw(st.one_of(st.just(-1), st.integers(0, 11).map(lambda k: 100 * k), st.integers(0, 1100))),
        retention_bytes=draw(st.one_of(st.just(-1), st.integers(0, 800))),
        delete=draw(st.booleans()),
    )


def model_first_survivor(case: Case) -> tuple[int, list[DeletionReason]]:
    """How many of the oldest segments go, and why: for each rule in turn, the longest run of
    segments from the oldest remaining one that the rule allows to go."""
    segs, n = case.segs, len(case.segs)

    def may_go(i: int) -> bool:
        return segs[i].next_base <= case.hw and not (i == n - 1 and segs[i].size == 0)

    def longest_run(start: int, allowed: Callable[[int], bool]) -> int:
        end = start
        while end < n and may_go(end) and allowed(end):
            end += 1
        return end

    reasons: list[DeletionReason] = []
    gone = longest_run(0, lambda i: i < n - 1 and segs[i].next_base <= case.log_start)
    reasons += [START] * gone
    if case.delete and gone < n:
        total = sum(s.size for s in segs[gone:])
        if 0 <= case.retention_bytes <= total:
            start = gone
            # What the size rule deletes never takes the log below retention.bytes.
            gone = longest_run(
                start, lambda i: sum(s.size for s in segs[start : i + 1]) <= total - case.retention_bytes
            )
            reasons += [SIZE] * (gone - start)
        if case.retention_ms >= 0 and gone < n:
            start = gone
            gone = longest_run(start, lambda i: NOW - largest_timestamp(segs[i]) > case.retention_ms)
            reasons += [TIME] * (gone - start)
    return gone, reasons


def run_case(case: Case) -> RetentionPlan:
    return plan(
        case.segs,
        log_start=case.log_start,
        hw=case.hw,
        retention_ms=case.retention_ms,
        retention_bytes=case.retention_bytes,
        delete=case.delete,
    )


@settings(max_examples=1500, deadline=None)
@given(cases())
def test_plan_matches_the_model_of_what_must_survive(case: Case) -> None:
    result = run_case(case)
    gone, reasons = model_first_survivor(case)
    segs = case.segs
    assert [d.base_offset for d in result.deletions] == [s.base_offset for s in segs[:gone]], "a prefix goes"
    assert [d.reason for d in result.deletions] == reasons
    assert [d.size for d in result.deletions] == [s.size for s in segs[:gone]]
    assert result.roll == (gone == len(segs)), "rolled exactly when the active segment goes"
    survivor_base = segs[gone].base_offset if gone < len(segs) else segs[-1].next_base
    assert result.log_start_offset == (max(case.log_start, survivor_base) if gone else case.log_start)


@settings(max_examples=1000, deadline=None)
@given(cases())
def test_plan_invariants(case: Case) -> None:
    result = run_case(case)
    segs = case.segs
    gone = len(result.deletions)
    assert all(s.next_base <= case.hw for s in segs[:gone]), "nothing at or above the high watermark goes"
    assert not (segs[-1].size == 0 and gone == len(segs)), "an empty last segment stays"
    if not case.delete:
        assert {d.reason for d in result.deletions} <= {START}
    # A second pass over what survives (the rolled empty segment included) deletes nothing more.
    survivors = segs[gone:] or [SegmentInfo(segs[-1].next_base, 0, -1, NOW, segs[-1].next_base)]
    again = plan(
        survivors,
        log_start=result.log_start_offset,
        hw=case.hw,
        retention_ms=case.retention_ms,
        retention_bytes=case.retention_bytes,
        delete=case.delete,
    )
    assert again.deletions == ()


# -- passes over real logs --------------------------------------------------------------------------

SMALL_BATCHES = BatchSettings(max_batch_bytes=1200)
ROWS = 300


def make_log(path: Path, rows: int = ROWS, **config: Any) -> PartitionLog:
    """A log of ``rows`` keyed_table records (offset i stamped FIRST_TS + i) over several segments."""
    log = LogDirectory(path, LogConfig(segment_bytes=6000, **config)).partition("t", 0).local
    log.append_arrow(keyed_table(rows), SMALL_BATCHES)
    assert len(log.segments()) > 4
    return log


def bases_and_next(log: PartitionLog) -> list[tuple[int, int]]:
    return [(s.base_offset, s.next_base) for s in log.segment_infos()]


def deleted_names(log: PartitionLog) -> set[str]:
    return {n for n in os.listdir(log.directory) if n.endswith(".deleted")}


def test_time_retention_on_a_log_follows_topic_config_changes(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    segs = bases_and_next(log)
    now = FIRST_TS + 150 + 1000  # records below offset 150 are more than 1000 ms old
    assert run_retention(log, now).deleted == (), "retention.ms defaults to 7 days"
    LogDirectory(tmp_path).topics.alter_configs("t", {"retention.ms": "1000"})  # as another process would
    result = run_retention(log, now)
    gone = [base for base, next_base in segs if next_base <= 150]
    assert [(d.base_offset, d.reason) for d in result.deleted] == [(b, TIME) for b in gone]
    first = segs[len(gone)][0]
    assert (result.rolled, result.log_start_offset, result.removed_files) == (False, first, 0)
    assert read_all(log).column("offset").to_pylist() == list(range(first, ROWS))
    with pytest.raises(OffsetOutOfRangeError):
        list(log.read_arrow(first - 1))
    assert deleted_names(log) == {
        f"{b:020d}{suffix}.deleted" for b in gone for suffix in (".log", ".index", ".timeindex", ".txnindex")
    }
    assert LogDirectory(tmp_path).partition("t", 0).log_start_offset == first, "durable, seen by other readers"


def test_size_retention_on_a_log_keeps_at_least_retention_bytes(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    infos = log.segment_infos()
    total = sum(s.size for s in infos)
    LogDirectory(tmp_path).topics.alter_configs("t", {"retention.bytes": str(total // 2)})
    result = run_retention(log, FIRST_TS)
    assert result.deleted and {d.reason for d in result.deleted} == {SIZE}
    kept = log.segment_infos()
    assert [s.base_offset for s in infos] == [d.base_offset for d in result.deleted] + [s.base_offset for s in kept]
    kept_bytes = sum(s.size for s in kept)
    assert kept_bytes >= total // 2 > kept_bytes - kept[0].size, "one segment more would cut into retention.bytes"


def test_delete_records_then_retention_then_removal_after_the_delay(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=-1)
    segs = bases_and_next(log)
    assert log.raise_log_start_offset(150) == 150
    now = int(time.time() * 1000)
    result = run_retention(log, now)
    gone = [base for base, next_base in segs if next_base <= 150]
    assert [(d.base_offset, d.reason) for d in result.deleted] == [(b, START) for b in gone]
    assert result.log_start_offset == 150, "the log start stays where delete-records put it"
    assert read_all(log).column("offset").to_pylist() == list(range(150, ROWS))
    renamed = deleted_names(log)
    assert len(renamed) == 4 * len(gone), "each segment's .log, .index, .timeindex and .txnindex"
    assert run_retention(log, now + 59_000).removed_files == 0, "file.delete.delay.ms is 60 s"
    assert run_retention(log, now + 61_000).removed_files == len(renamed)
    assert deleted_names(log) == set()
    assert [b for b, _ in bases_and_next(log)] == [b for b, _ in segs[len(gone) :]]


def test_when_every_segment_qualifies_the_log_rolls_and_keeps_appending(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=0)
    count = len(log.segments())
    result = run_retention(log, FIRST_TS + 10**6)
    assert len(result.deleted) == count and result.rolled
    assert result.log_start_offset == ROWS
    assert [(s.base_offset, s.size) for s in log.segment_infos()] == [(ROWS, 0)]
    assert read_all(log).num_rows == 0
    assert run_retention(log, FIRST_TS + 10**6).deleted == (), "the empty active segment stays"
    info = log.append_arrow(keyed_table(5, start=ROWS))
    assert (info.first_offset, info.last_offset) == (ROWS, ROWS + 4)
    assert read_all(log).column("offset").to_pylist() == list(range(ROWS, ROWS + 5))


def test_a_compacted_topic_keeps_everything_but_what_delete_records_removed(tmp_path: Path) -> None:
    log = make_log(tmp_path, retention_ms=0, retention_bytes=0, cleanup_policy=frozenset({"compact"}))
    segs = bases_and_next(log)
    assert run_retention(log, FIRST_TS + 10**6).deleted == ()
    log.raise_log_start_offset(100)
    result = run_retention(log, FIRST_TS + 10**6)
    assert [(d.base_offset, d.reason) for d in result.deleted] == [(b, START) for b, n in segs if n <= 100]


def test_a_plan_overtaken_by_another_pass_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = make_log(tmp_path, retention_ms=-1)
    other = LogDirectory(tmp_path, LogConfig(retention_ms=-1)).partition("t", 0)  # another process, say
    segs = bases_and_next(log)
    log.raise_log_start_offset(200)
    real_delete = log.delete_segments
    attempts: list[list[int]] = []

    def overtaken_delete(bases: Sequence[int]) -> int:
        attempts.append(list(bases))
        if len(attempts) == 1:  # another pass retires the oldest segment between this one's plan and deletion
            other.delete_segments([segs[0][0]])
        return real_delete(bases)

    monkeypatch.setattr(log, "delete_segments", overtaken_delete)
    result = run_retention(log)
    below = [b for b, n in segs if n <= 200]
    assert attempts == [below, below[1:]], "the refused plan is made again on what is left"
    assert [d.base_offset for d in result.deleted] == below[1:]
    assert result.log_start_offset == 200


def test_a_pass_always_overtaken_gives_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = make_log(tmp_path, retention_ms=-1)
    log.raise_log_start_offset(200)
    calls = []

    def always_overtaken(bases: Sequence[int]) -> int:
        calls.append(bases)
        raise InvalidOffsetError("the oldest segments changed")

    monkeypatch.setattr(log, "delete_segments", always_overtaken)
    with pytest.raises(InvalidOffsetError, match="the oldest segments changed"):
        run_retention(log)
    assert len(calls) == 5


def test_records_appended_while_the_pass_rolls_are_decided_on_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path, retention_ms=1000)
    before = [s.base_offset for s in log.segments()]
    real_roll = log.roll
    now = FIRST_TS + ROWS + 10_000  # every record is old

    def roll_after_a_fresh_append() -> bool:
        log.append_arrow(keyed_table(5, start=ROWS, ts_start=now - ROWS))  # stamped `now`: young
        return real_roll()

    monkeypatch.setattr(log, "roll", roll_after_a_fresh_append)
    result = run_retention(log, now)
    assert result.rolled and result.deleted
    kept = log.segment_infos()
    assert [d.base_offset for d in result.deleted] == before[: len(result.deleted)]
    assert now - largest_timestamp(kept[0]) <= 1000, "the segment that took the fresh records stays"
    assert (kept[-1].base_offset, kept[-1].size) == (ROWS + 5, 0)
    assert read_all(log).column("offset").to_pylist()[-5:] == list(range(ROWS, ROWS + 5))


def test_records_appended_after_the_roll_leave_the_new_active_segment_to_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path, retention_ms=1000)
    count = len(log.segments())
    real_roll = log.roll
    now = FIRST_TS + ROWS + 10_000

    def roll_then_an_old_append() -> bool:
        rolled = real_roll()
        log.append_arrow(keyed_table(5, start=ROWS))  # old records in the new active segment: all qualify again
        return rolled

    monkeypatch.setattr(log, "roll", roll_then_an_old_append)
    result = run_retention(log, now)
    assert result.rolled and len(result.deleted) == count, "every old segment, not the new active one"
    assert read_all(log).column("offset").to_pylist() == list(range(ROWS, ROWS + 5))
    assert [s.base_offset for s in log.segments()] == [ROWS]


# -- concurrency and crashes ------------------------------------------------------------------------

_READER = """
import json, sys, time
from pysparklog import LogDirectory, OffsetOutOfRangeError
log = LogDirectory(sys.argv[1]).partition("t", 0)
end = int(sys.argv[2])
position, resets, seen = 0, [], 0
print("ready", flush=True)
while position < end:
    try:
        for batch in log.read_arrow(position, max_chunk_bytes=2048):
            offsets = batch.column("offset").to_pylist()
            values = batch.column("value").to_pylist()
            assert offsets == list(range(position, position + len(offsets))), ("not contiguous", position, offsets)
            assert all(v.startswith(f"v{o}:".encode()) for o, v in zip(offsets, values)), "a record is not its offset's"
            position += len(offsets)
            seen += len(offsets)
            time.sleep(0.01)
    except OffsetOutOfRangeError:
        start = log.log_start_offset
        assert position < start, ("out of range although not deleted", position, start)
        resets.append((position, start))
        position = start
print(json.dumps({"resets": resets, "seen": seen, "position": position}))
"""


@pytest.mark.slow
def test_a_reader_in_another_process_keeps_reading_during_retention(tmp_path: Path) -> None:
    rows = 3000
    log = make_log(tmp_path, rows, retention_ms=-1, file_delete_delay_ms=0)
    proc = subprocess.Popen(
        [sys.executable, "-c", _READER, str(tmp_path), str(rows)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    # Delete-records and retention overtake the reader (throttled to at most ~1500 records/s): segments are
    # renamed and removed under it, between its reads and while it holds one open.
    for target in range(100, rows + 1, 100):
        log.raise_log_start_offset(target)
        run_retention(log)
        time.sleep(0.01)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["position"] == rows
    assert report["resets"], "retention overtook the reader at least once"
    assert report["seen"] + sum(start - position for position, start in report["resets"]) == rows
    # A pass removes the files renamed before it took the time; those of the last pass go now.
    log.remove_deleted_files()
    assert len(log.segments()) == 1 and deleted_names(log) == set()


_RETENTION_LOOP = """
import itertools, sys
from pysparklog import LogConfig, LogDirectory
from pysparklog.storage.retention import run_retention
logs = LogDirectory(sys.argv[1])
mode, step = sys.argv[2], int(sys.argv[3])
log = logs.partition("t", 0, LogConfig(retention_ms=-1, file_delete_delay_ms=0))
total = sum(s.size for s in log.segment_infos())
print("ready", flush=True)
for i in itertools.count(1):
    if mode == "delete-records":
        log.raise_log_start_offset(min(i * step, log.log_end_offset))
        run_retention(log)
    else:  # a shrinking retention.bytes, down to 0: every segment goes and the log rolls
        config = LogConfig(retention_ms=-1, retention_bytes=max(total - i * step, 0), file_delete_delay_ms=0)
        run_retention(logs.partition("t", 0, config))
    print(i, flush=True)
"""


def check_whole_suffix(log: Log, rows: int) -> int:
    """The log holds offsets [log start, rows) exactly, each record whole and at its offset, in segments
    that end where the next begins; returns the log start."""
    start = log.log_start_offset
    table = read_all(log)
    offsets = table.column("offset").to_pylist()
    assert offsets == list(range(start, rows)), "the surviving records are a suffix, offsets unchanged"
    values = table.column("value").to_pylist() if offsets else []
    assert all(v.startswith(f"v{o}:".encode()) for o, v in zip(offsets, values, strict=True))
    assert log.log_end_offset == rows
    infos = log.segment_infos()
    for info in infos:
        segment = log.segment(info.base_offset)
        entries = scan(segment.read_bytes(0, info.size))
        assert not entries.incomplete_tail and entries.stop_position == info.size, f"torn segment {segment}"
        if len(entries):
            assert int(entries.base_offsets[0]) == info.base_offset
            assert int(entries.last_offsets[-1]) + 1 == info.next_base
        assert segment.indexes_intact()
    return start


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "step", "rounds"), [("delete-records", 40, 8), ("size", 3000, 6)])
def test_kill_9_during_retention_leaves_a_whole_suffix(tmp_path: Path, mode: str, step: int, rounds: int) -> None:
    rows = 3000
    original = tmp_path / "original"
    make_log(original, rows)
    rng = random.Random(7)
    starts = set()
    for round_ in range(rounds):
        copy = tmp_path / f"round-{round_}"
        shutil.copytree(original, copy)
        proc = subprocess.Popen(
            [sys.executable, "-c", _RETENTION_LOOP, str(copy), mode, str(step)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate()[1]
        # Let a few passes complete, then kill at a random moment of the next ones.
        passes = rng.randint(1, 8)
        for line in iter(proc.stdout.readline, ""):  # ends early only if the loop died: asserted below
            if line.strip() == str(passes):
                break
        time.sleep(rng.uniform(0.0, 0.02))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err
        log = LogDirectory(copy).partition("t", 0, LogConfig(retention_ms=-1, file_delete_delay_ms=0))
        starts.add(check_whole_suffix(log, rows))
        # The log carries on: another pass finishes what the killed one started, appends continue.
        run_retention(log)
        check_whole_suffix(log, rows)
        info = log.append_arrow(keyed_table(5, start=rows))
        assert info.first_offset == rows
    assert len(starts - {0, rows}) >= 2, f"kills landed mid-way: log starts {sorted(starts)}"


def test_every_state_a_crash_between_renames_can_leave_reads_as_a_whole_suffix(tmp_path: Path) -> None:
    original = tmp_path / "original"
    log = make_log(original, retention_ms=-1)
    bases = [s.base_offset for s in log.segments()][:3]
    # Retiring three segments renames their files oldest first, then records the new log start: stop
    # after each rename in turn, as kill -9 would.
    renames = [f"{base:020d}{suffix}" for base in bases for suffix in (".log", ".index", ".timeindex")]
    for done in range(len(renames) + 1):
        copy = tmp_path / f"crash-{done}"
        shutil.copytree(original, copy)
        for name in renames[:done]:
            os.replace(copy / "t-0" / name, copy / "t-0" / f"{name}.deleted")
        crashed = LogDirectory(copy, LogConfig(segment_bytes=6000, retention_ms=-1)).partition("t", 0)
        gone = (done + 2) // 3  # a segment whose .log is renamed is gone
        expected_start = log.segments()[gone].base_offset if gone else 0
        assert check_whole_suffix(crashed, ROWS) == expected_start, done
        crashed.raise_log_start_offset(bases[-1] + 1)
        run_retention(crashed)
        assert check_whole_suffix(crashed, ROWS) == max(bases[-1] + 1, expected_start)
        assert [s.base_offset for s in crashed.segments()][0] == max(bases[-1], expected_start)
