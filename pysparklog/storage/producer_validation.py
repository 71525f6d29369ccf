"""Kafka's producer-state validation of an append (``UnifiedLog.analyzeAndValidateProducerState``).

An idempotent producer's batch that repeats one of its last five is not written again (its first
offsets are returned); a gap in its sequences or an older epoch is refused; transactional and control
batches move the producers' open transactions, and an ABORT marker yields its ``.txnindex`` entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pysparklog.storage.active_segment import ActiveSegment
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.log_state import LogState
from pysparklog.storage.producer_state import (
    OpenTransactions,
    ProducerEntry,
    ProducerStateTracker,
    apply_entry,
    apply_run,
    check_marker_epoch,
    check_sequence,
    next_sequence,
    replay_segment,
)
from pysparklog.storage.records.memory_records import EntryTable
from pysparklog.storage.transaction_index import AbortedTxn

#: Runs of producer batches (a writer's consecutive batches are one run) a process may replay to rebuild producer
#: state before it snapshots the result at the log end (besides the snapshot of every roll), so that the next
#: process starts from there. Kafka's broker keeps the state in memory and needs no such snapshot; short-lived
#: writers (a Spark task each) do. Counted in runs, as a replay's cost is: a stream of one-record transactions adds
#: two runs (a batch and its marker) per micro-batch, and a replay of 10^5 offsets of them took each task tens of
#: milliseconds.
SNAPSHOT_AFTER_REPLAY = 200


@dataclass(slots=True)
class ProducerCache:
    """The producers' state as of one acknowledged log end, kept between idempotent appends."""

    producers: dict[int, ProducerEntry]
    active_base: int
    active_size: int
    log_end_offset: int
    open_txns: OpenTransactions


@dataclass(slots=True)
class ProducerCheck:
    """An idempotent append checked against the producers' state: which batches are new, where each
    batch is (or already was) in the log, and the producers' state once the new ones are appended.

    ``aborted`` holds the ``.txnindex`` entries of the transactions the append aborts, in log order,
    and ``open_txns`` the open transactions after it; None when it has no transactional or control
    batch, which leaves them as they were.
    """

    keep: np.ndarray
    first_offsets: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    updated: dict[int, ProducerEntry]
    aborted: list[AbortedTxn] = field(default_factory=list)
    open_txns: OpenTransactions | None = None


def check_producers(cache: ProducerCache, log_end: int, buf: np.ndarray, entries: EntryTable) -> ProducerCheck:
    """Kafka's producer-state validation of an append: drop duplicates, refuse gaps and fenced epochs.

    Transactional and control batches also move the producers' open transactions, and an ABORT
    marker closing a transaction yields its ``.txnindex`` entry, as Kafka's append derives them
    (the last stable offset as of each marker, as Kafka's recovery does batch by batch).
    """
    producers = cache.producers
    if _is_one_producer_run(entries):
        check = _check_run(producers, cache.open_txns, log_end, entries)
        if check is not None:
            return check
    updated: dict[int, ProducerEntry] = {}
    n = len(entries)
    keep = np.ones(n, dtype=bool)
    first_offsets = np.empty(n, dtype=np.int64)
    last_offsets = np.empty(n, dtype=np.int64)
    max_timestamps = entries.max_timestamps.copy()
    next_offset = log_end
    is_control = entries.is_control
    followed = entries.is_transactional | is_control
    open_txns: OpenTransactions | None = None
    aborted: list[AbortedTxn] = []
    columns = zip(
        entries.producer_ids.tolist(),
        entries.producer_epochs.tolist(),
        entries.last_offset_deltas.tolist(),
        entries.base_sequences.tolist(),
        strict=True,
    )
    for i, (pid, epoch, delta, first_sequence) in enumerate(columns):
        if pid >= 0 and first_sequence >= 0 and not is_control[i]:
            entry = updated.get(pid) or producers.get(pid)
            last_sequence = next_sequence(first_sequence, delta)
            duplicate = entry.duplicate_of(epoch, first_sequence, last_sequence) if entry else None
            if duplicate is not None:
                keep[i] = False
                first_offsets[i], last_offsets[i] = duplicate.first_offset, duplicate.last_offset
                max_timestamps[i] = duplicate.timestamp
                continue
            check_sequence(entry, pid, epoch, first_sequence)
        elif pid >= 0 and is_control[i]:
            check_marker_epoch(updated.get(pid) or producers.get(pid), pid, epoch)
        first_offsets[i], last_offsets[i] = next_offset, next_offset + delta
        next_offset += delta + 1
        if pid >= 0:
            if pid not in updated and pid in producers:
                updated[pid] = producers[pid].copy()
            completed = apply_entry(updated, buf, entries, i, int(last_offsets[i]))
            if followed[i]:
                if open_txns is None:
                    open_txns = cache.open_txns.copy()
                txn = open_txns.follow(updated[pid], completed)
                if txn is not None:
                    aborted.append(txn)
    return ProducerCheck(keep, first_offsets, last_offsets, max_timestamps, updated, aborted, open_txns)


def _is_one_producer_run(entries: EntryTable) -> bool:
    """Whether the batches are one idempotent producer's data batches with consecutive sequences, as a
    producer's append of one partition is: then they are checked as one run, without a loop per batch."""
    pids, epochs, sequences = entries.producer_ids, entries.producer_epochs, entries.base_sequences
    transactional = entries.is_transactional
    if pids[0] < 0 or (pids != pids[0]).any() or (epochs != epochs[0]).any() or (sequences < 0).any():
        return False
    if entries.is_control.any() or transactional.any() != transactional.all():
        return False
    following = (sequences[:-1] + entries.last_offset_deltas[:-1] + 1) % 2**31
    return bool((sequences[1:] == following).all())


def _check_run(
    producers: dict[int, ProducerEntry], open_txns: OpenTransactions, log_end: int, entries: EntryTable
) -> ProducerCheck | None:
    """``check_producers`` for one producer's run of batches: all new, or all a retry of what it appended;
    None when only some are (the batch-by-batch check sorts those out)."""
    pid, epoch = int(entries.producer_ids[0]), int(entries.producer_epochs[0])
    first_sequence = int(entries.base_sequences[0])
    sizes = entries.last_offset_deltas + 1
    starts = np.cumsum(sizes) - sizes
    total = int(sizes.sum())
    entry = producers.get(pid)
    if entry is not None:
        repeated = entry.duplicate_of(epoch, first_sequence, next_sequence(first_sequence, total - 1))
        if repeated is not None:
            first_offsets = repeated.first_offset + starts
            stamps = np.full(len(entries), repeated.timestamp, dtype=np.int64)
            return ProducerCheck(np.zeros(len(entries), bool), first_offsets, first_offsets + sizes - 1, stamps, {})
        if entry.duplicate_of(epoch, first_sequence, next_sequence(first_sequence, int(sizes[0]) - 1)) is not None:
            return None
    check_sequence(entry, pid, epoch, first_sequence)
    updated = {pid: entry.copy()} if entry is not None else {}
    max_timestamps = entries.max_timestamps.copy()
    transactional = bool(entries.is_transactional[0])
    apply_run(
        updated,
        pid,
        epoch,
        first_sequence,
        log_end,
        log_end + total - 1,
        int(max_timestamps.max()),
        transactional=transactional,
    )
    following = None
    if transactional:  # the run may open the producer's transaction
        following = open_txns.copy()
        following.follow(updated[pid], None)
    first_offsets = log_end + starts
    return ProducerCheck(
        np.ones(len(entries), bool), first_offsets, first_offsets + sizes - 1, max_timestamps, updated, [], following
    )


class ProducerStates:
    """The producers' state as of the acknowledged log end, kept by one writer between its appends.

    Args:
        tracker: The partition's producer snapshots and replay.
        segments: The partition's segments.
    """

    def __init__(self, tracker: ProducerStateTracker, segments: LogSegments) -> None:
        self._tracker = tracker
        self._segments = segments
        self._cache: ProducerCache | None = None

    def reset(self, cache: ProducerCache) -> None:
        """Start again from ``cache`` (what recovery replayed)."""
        self._cache = cache

    def at(self, active: ActiveSegment) -> ProducerCache:
        """The producers as of the acknowledged log end: the cached state, brought forward over what
        other processes appended since, or rebuilt from the last snapshot when the log moved under it
        (a roll, a truncation). Runs under the write lock."""
        state = active.state
        cache = self._cache
        if (
            cache is not None
            and cache.active_base == state.active_base
            and cache.active_size <= state.active_size
            and cache.log_end_offset <= state.log_end_offset
        ):
            replay_segment(
                cache.producers,
                active.segment,
                cache.active_size,
                state.active_size,
                cache.log_end_offset,
                state.log_end_offset,
                cache.open_txns,
            )
        else:
            bases = self._segments.list()
            producers, replayed = self._tracker.load_replayed(
                bases, state.active_base, state.active_size, state.log_end_offset, remove_unreadable=True
            )
            if replayed >= SNAPSHOT_AFTER_REPLAY:
                # The next process would replay it all again (every Spark task has a new producer): keep it.
                self._tracker.write_snapshot(state.log_end_offset, producers, bases)
            cache = self._cache = ProducerCache(producers, 0, 0, 0, OpenTransactions.of(producers))
        cache.active_base, cache.active_size, cache.log_end_offset = (
            state.active_base,
            state.active_size,
            state.log_end_offset,
        )
        return cache

    def remember(self, check: ProducerCheck, state: LogState) -> None:
        """Fold an append's producer updates into the cache, now at the log end the append left (``state``)."""
        cache = self._cache
        assert cache is not None
        cache.producers.update(check.updated)
        if check.open_txns is not None:
            cache.open_txns = check.open_txns
        cache.active_base, cache.active_size, cache.log_end_offset = (
            state.active_base,
            state.active_size,
            state.log_end_offset,
        )
