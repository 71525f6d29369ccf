"""The writer's side of the active segment: Kafka's roll decision and per-batch index upkeep.

Only the process holding a partition's write lock has an :class:`ActiveSegment`. It is rebuilt from
the segment's files whenever the state record changed under it (another process appended), so it is
a cache of what the files say, never a second source of truth. Index entries of the batches being
appended wait in ``pending_*`` until their batches are written: an index entry never points past the
data.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pysparklog.storage.config import INT_MAX, LogConfig
from pysparklog.storage.index import OFFSET_INDEX_ENTRY_SIZE, TIME_INDEX_ENTRY_SIZE, TXN_INDEX_ENTRY_SIZE, max_entries
from pysparklog.storage.log_state import UNKNOWN_TXN_INDEXES_FROM, LogState
from pysparklog.storage.segment import LogSegment
from pysparklog.storage.transaction_index import AbortedTxn


def roll_jitter(config: LogConfig, base_offset: int) -> int:
    """Kafka's per-segment random reduction of ``segment.ms``; seeded by the base offset so every process agrees."""
    bound = min(config.segment_jitter_ms, config.segment_ms)
    return random.Random(base_offset).randrange(bound) if bound > 0 else 0


@dataclass(slots=True)
class ActiveSegment:
    """The writer's knowledge of the active segment, reconciled with the state record under the lock."""

    state: LogState
    segment: LogSegment
    index_entries: int
    last_index_position: int
    time_index_entries: int
    last_time_index_ts: int
    first_batch_max_ts: int  # Kafka's rollingBasedTimestamp, -1 when unknown
    created_ms: int
    roll_jitter_ms: int  # Kafka's per-segment random reduction of segment.ms
    indexes_valid: bool  # the indexes, .txnindex included, passed the sanity checks when loaded
    txn_index_entries: int
    # Index entries of batches not yet written, written right after their batches.
    pending_index: list[tuple[int, int]] = field(default_factory=list)
    pending_time_index: list[tuple[int, int]] = field(default_factory=list)
    pending_txn_index: list[AbortedTxn] = field(default_factory=list)

    @classmethod
    def new(cls, state: LogState, segment: LogSegment, config: LogConfig, now: int) -> ActiveSegment:
        """A segment just created at ``state.active_base``: no entries, its roll clock starting now."""
        return cls(state, segment, 0, 0, 0, -1, -1, now, roll_jitter(config, segment.base_offset), True, 0)

    @classmethod
    def from_files(cls, state: LogState, segment: LogSegment, config: LogConfig) -> ActiveSegment:
        """The active segment of ``state``, read from its files."""
        index = segment.indexes.offset_index()
        time_index = segment.indexes.time_index()
        required = 0 <= state.txn_indexes_from <= state.active_base
        txn_index = segment.indexes.checked_transaction_index(required=required, end_offset=None)
        first_ts = -1
        if state.active_size > 0:
            first = next(segment.chunks(0, state.active_size, max_bytes=4096, verify_crc=False), None)
            if first is not None:
                first_ts = int(first.entries.max_timestamps[0])
        return cls(
            state,
            segment,
            len(index),
            int(index.positions[-1]) if len(index) else 0,
            len(time_index),
            time_index.last_entry[0],
            first_ts,
            segment.created_ms(),
            roll_jitter(config, segment.base_offset),
            index.is_consistent(state.active_size, state.log_end_offset)
            and time_index.is_consistent(state.log_end_offset, state.max_timestamp)
            and txn_index is not None,
            len(txn_index) if txn_index is not None else 0,
        )

    def indexes_unchanged(self) -> bool:
        """Whether the indexes were valid when loaded and are still exactly the entries written since (a
        ``stat`` each: this runs at every append). The ``.txnindex`` is looked at only when it holds
        entries: an empty one that is gone loses nothing (an abort creates the file again, a reader
        rebuilds it). A state record that does not say where ``.txnindex`` files start (an older
        pysparklog's) fails too: recovery records it."""
        if not self.indexes_valid or self.state.txn_indexes_from == UNKNOWN_TXN_INDEXES_FROM:
            return False
        segment = self.segment
        txn_index_bytes = self.txn_index_entries * TXN_INDEX_ENTRY_SIZE
        return (
            segment.file_size(segment.index_path) == self.index_entries * OFFSET_INDEX_ENTRY_SIZE
            and segment.file_size(segment.time_index_path) == self.time_index_entries * TIME_INDEX_ENTRY_SIZE
            and (txn_index_bytes == 0 or segment.file_size(segment.txn_index_path) == txn_index_bytes)
        )

    def should_roll(self, config: LogConfig, size: int, max_ts: int, last_offset: int, now: int) -> bool:
        """Kafka's ``LogSegment.shouldRoll`` before a batch of ``size`` bytes up to ``last_offset``."""
        seg_size = self.state.active_size
        if seg_size == 0:
            return False  # rolling an empty segment would recreate it at the same base offset
        if seg_size > config.segment_bytes - size:
            return True
        rolling_ts = self.first_batch_max_ts
        waited = (max_ts - rolling_ts) if rolling_ts >= 0 else (now - self.created_ms)
        if waited > config.segment_ms - self.roll_jitter_ms:
            return True
        if self.index_entries >= max_entries(config.segment_index_bytes, OFFSET_INDEX_ENTRY_SIZE):
            return True
        if self.time_index_entries >= max_entries(config.segment_index_bytes, TIME_INDEX_ENTRY_SIZE) - 1:
            return True
        return last_offset - self.segment.base_offset > INT_MAX

    def index_batch(self, config: LogConfig, last_offset: int, max_ts: int, size: int) -> None:
        """Per-batch index maintenance, exactly as ``LogSegment.append`` does it."""
        state = self.state
        position = state.active_size
        max_ts_so_far, offset_of_max = state.max_timestamp, state.offset_of_max_timestamp
        if max_ts > max_ts_so_far:
            max_ts_so_far, offset_of_max = max_ts, last_offset
        if position - self.last_index_position > config.index_interval_bytes:
            self.pending_index.append((last_offset, position))
            self.index_entries += 1
            self.last_index_position = position
            self.maybe_append_time_index(max_ts_so_far, offset_of_max)
        if self.first_batch_max_ts < 0 and position == 0:
            self.first_batch_max_ts = max_ts
        # Kept current batch by batch: a roll in the middle of an append records the true log end.
        self.state = replace(
            state,
            active_size=position + size,
            log_end_offset=last_offset + 1,
            max_timestamp=max_ts_so_far,
            offset_of_max_timestamp=offset_of_max,
        )

    def maybe_append_time_index(self, ts: int, offset: int) -> None:
        if ts > self.last_time_index_ts:
            self.pending_time_index.append((ts, offset))
            self.time_index_entries += 1
            self.last_time_index_ts = ts

    def queue_aborted(self, aborted: Sequence[AbortedTxn], queued: int, below: int) -> int:
        """Take the entries of ``aborted`` from ``queued`` on whose markers lie below ``below`` as pending
        ``.txnindex`` entries; returns how many are taken in all."""
        while queued < len(aborted) and aborted[queued].last_offset < below:
            self.pending_txn_index.append(aborted[queued])
            queued += 1
        return queued

    def write(self, data: memoryview) -> None:
        """Write the batches that end at the acknowledged size so far, then their index entries.

        A partial write is undone before the error is raised; the log goes first so an index
        entry never points past the data.
        """
        end = self.state.active_size
        self.segment.append(end - len(data), data)
        self.write_pending_indexes()

    def write_pending_indexes(self) -> None:
        segment = self.segment
        if self.pending_index:
            offsets, positions = zip(*self.pending_index, strict=True)
            segment.indexes.append_offsets(offsets, positions)
            self.pending_index.clear()
        if self.pending_time_index:
            stamps, offsets = zip(*self.pending_time_index, strict=True)
            segment.indexes.append_times(stamps, offsets)
            self.pending_time_index.clear()
        if self.pending_txn_index:
            segment.indexes.append_aborted(self.pending_txn_index)
            self.txn_index_entries += len(self.pending_txn_index)
            self.pending_txn_index.clear()

    def flush(self, now: int) -> None:
        """fsync the segment and move the recovery point to the log end."""
        self.segment.flush()
        self.state = replace(self.state, recovery_point=self.state.log_end_offset, last_flush_ms=now)
