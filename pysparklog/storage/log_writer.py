"""The writing side of a partition log, for the process holding its write lock (Kafka's ``LocalLog``).

A ``LogWriter`` keeps what one process knows of the active segment and of the producers between its
appends, and reconciles both with the state record each time it takes the lock: another process may
have appended, rolled, retired or compacted segments meanwhile, or died mid-append, in which case
recovery (``LogLoader``) runs first. Appends assign offsets, roll as Kafka rolls, write the batches
and their index entries through the segment, then acknowledge them in the state record at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from pysparklog.storage.active_segment import ActiveSegment
from pysparklog.storage.config import LogConfig
from pysparklog.storage.io import LockedRecord
from pysparklog.storage.loader import LogLoader
from pysparklog.storage.log_state import (
    BOOT_ID,
    UNKNOWN_FIRST_UNSTABLE_OFFSET,
    LogState,
    describes_active_segment,
    read_state,
)
from pysparklog.storage.producer_state import OpenTransactions
from pysparklog.storage.producer_validation import ProducerCache, ProducerCheck, ProducerStates, check_producers
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.records.memory_records import EntryTable, scan
from pysparklog.storage.transaction_index import AbortedTxn
from pysparklog.storage.validator import Batches, LogValidator, assign_offset, joined, stamp_log_append_time


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append wrote: offsets ``first_offset..last_offset`` and, for LogAppendTime, its time."""

    first_offset: int
    last_offset: int
    record_count: int
    log_append_time_ms: int
    max_timestamp: int

    @classmethod
    def spanning(cls, infos: Sequence[AppendInfo]) -> AppendInfo:
        """What consecutive appends wrote, as one (``infos`` must not be empty)."""
        return cls(
            infos[0].first_offset,
            infos[-1].last_offset,
            sum(i.record_count for i in infos),
            infos[-1].log_append_time_ms,
            max(i.max_timestamp for i in infos),
        )


class LogWriter:
    """What the writer of one partition keeps between appends, and the appends themselves.

    Args:
        loader: The partition's recovery, which holds its segments, producer state and checkpoints.
    """

    def __init__(self, loader: LogLoader) -> None:
        self.loader = loader
        self.segments, self.producers = loader.segments, loader.producers
        self.checkpoints, self.topic_partition = loader.checkpoints, loader.topic_partition
        self.config = LogConfig()  # the configs in force at the last ``sync``
        self.active: ActiveSegment | None = None
        self.producer_states = ProducerStates(self.producers, self.segments)

    def append_producer_batches(
        self,
        record: LockedRecord,
        active: ActiveSegment,
        validator: LogValidator | None,
        piece: Batches,
    ) -> AppendInfo:
        """Append batches some of which carry a producer id, checked against the producers' state.

        ``validator`` None appends batches validated when they were first appended (a replica's, which
        keep their timestamps): only the producers' state is checked and moved.
        """
        check, piece = self._producer_checked(active, validator, piece)
        info = None
        if len(piece.entries):
            info = self.append_batches(
                record, active, [piece], check.aborted, check.open_txns, stamp=validator is not None
            )
        assert self.active is not None  # the append (or sync) left the active segment there
        self.producer_states.remember(check, self.active.state)
        return _producer_append_info(check, info)

    def _producer_checked(
        self, active: ActiveSegment, validator: LogValidator | None, piece: Batches
    ) -> tuple[ProducerCheck, Batches]:
        """The producers' verdict on ``piece`` as of the log end, and its new batches, validated."""
        check = check_producers(self.producer_states.at(active), active.state.log_end_offset, piece.buf, piece.entries)
        if not check.keep.all():
            piece = Batches(piece.buf, piece.entries.select(check.keep))
        return check, piece if validator is None else validator.validated(piece)

    def prepared(
        self, active: ActiveSegment, validator: LogValidator, pieces: Sequence[Batches]
    ) -> tuple[Batches, AppendInfo]:
        """What appending ``pieces`` now would write, and acknowledge, with nothing written: the batches
        validated, without the repeats of idempotent retries, numbered from the log end and stamped with
        the LogAppendTime when the topic uses it. A log whose appends are sequenced elsewhere (an object
        store's commits) commits these and then appends them as a replica (``stamp=False``)."""
        if any(piece.entries.has_producers for piece in pieces):
            check, piece = self._producer_checked(active, validator, joined(pieces))
        else:
            check = None
            for piece in pieces:
                validator.check_timestamps(piece)
            piece = joined([validator.maybe_recompressed(piece) for piece in pieces])
        entries = piece.entries
        spans = [
            piece.buf[pos : pos + size]
            for pos, size in zip(entries.positions.tolist(), entries.sizes.tolist(), strict=True)
        ]
        buf = np.concatenate(spans) if spans else np.empty(0, dtype=np.uint8)
        out = Batches(buf, scan(buf))
        now = int(time.time() * 1000)
        log_append = self.config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        first_offset = next_offset = active.state.log_end_offset
        max_ts = -1
        view = buf.data
        for pos, size, last_delta, batch_max_ts, attributes in _batch_columns(out.entries):
            if log_append:
                stamp_log_append_time(view, pos, size, attributes, now)
                batch_max_ts = now
            assign_offset(view, pos, next_offset)
            next_offset += last_delta + 1
            max_ts = max(max_ts, batch_max_ts)
        info = None
        if len(out.entries):
            info = AppendInfo(
                first_offset, next_offset - 1, next_offset - first_offset, now if log_append else -1, max_ts
            )
        if check is not None:
            return out, _producer_append_info(check, info)
        assert info is not None  # the caller appends something
        return out, info

    def append_batches(
        self,
        record: LockedRecord,
        active: ActiveSegment,
        pieces: Sequence[Batches],
        aborted: Sequence[AbortedTxn] = (),
        open_txns: OpenTransactions | None = None,
        *,
        stamp: bool = True,
    ) -> AppendInfo:
        """Write the batches of ``pieces``, in order (assigning offsets, rolling as Kafka rolls), and
        acknowledge them all at once.

        ``stamp`` False keeps the timestamps the batches hold (a replica's, already stamped with the
        LogAppendTime when the topic uses it).

        ``aborted`` are the ``.txnindex`` entries of the ABORT markers among the batches, each written
        to the segment its marker lands in; ``open_txns`` the open transactions once the batches are
        in, when the batches change them (they give the first unstable offset the state records).
        """
        now = int(time.time() * 1000)
        config = self.config
        log_append = stamp and config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        first_offset = active.state.log_end_offset
        next_offset = first_offset
        records = 0
        max_ts = -1
        queued = 0  # of ``aborted``, the entries handed to their segment
        for piece in pieces:
            view = piece.buf.data
            entries = piece.entries
            pending_start = None
            pending_end = 0
            for pos, size, last_delta, batch_max_ts, attributes in _batch_columns(entries):
                if log_append:
                    stamp_log_append_time(view, pos, size, attributes, now)
                    batch_max_ts = now
                last_offset = next_offset + last_delta
                if active.should_roll(config, size, batch_max_ts, last_offset, now):
                    if aborted:
                        queued = active.queue_aborted(aborted, queued, next_offset)
                    if pending_start is not None:
                        active.write(view[pending_start:pending_end])
                        pending_start = None
                    active = self.roll(record, active, next_offset, now)
                assign_offset(view, pos, next_offset)
                active.index_batch(config, last_offset, batch_max_ts, size)
                if pending_start is None:
                    pending_start = pos
                pending_end = pos + size
                records += last_delta + 1
                max_ts = max(max_ts, batch_max_ts)
                next_offset = last_offset + 1
            if aborted:
                queued = active.queue_aborted(aborted, queued, next_offset)
            if pending_start is not None:
                active.write(view[pending_start:pending_end])
        if open_txns is not None:
            active.state = replace(active.state, first_unstable_offset=open_txns.first_unstable_offset())
        self._maybe_flush(active, now)
        self.write_state(record, active.state)
        self.active = active
        return AppendInfo(first_offset, next_offset - 1, records, now if log_append else -1, max_ts)

    def roll(self, record: LockedRecord, active: ActiveSegment, new_base: int, now: int) -> ActiveSegment:
        """Close the active segment as Kafka's ``LocalLog.roll`` does and start one at ``new_base``."""
        active.maybe_append_time_index(active.state.max_timestamp, active.state.offset_of_max_timestamp)
        active.write_pending_indexes()
        active.segment.flush()
        new_base = max(new_base, active.state.log_end_offset)
        bases = self.segments.list()  # other processes may have retired or compacted segments
        producers = self.producers.take_snapshot(bases, active.state.active_base, active.state.active_size, new_base)
        segment = self.segments.create(new_base)
        state = replace(
            active.state,
            # Exact at the roll point even in the middle of an append (from the snapshot's state).
            first_unstable_offset=OpenTransactions.of(producers).first_unstable_offset(),
            active_base=new_base,
            active_size=0,
            max_timestamp=-1,
            offset_of_max_timestamp=new_base,
            recovery_point=new_base,
            last_flush_ms=now,
            segments_generation=active.state.segments_generation + 1,
        )
        self.write_state(record, state)
        self.write_checkpoints(state)
        return ActiveSegment.new(state, segment, self.config, now)

    def _maybe_flush(self, active: ActiveSegment, now: int) -> None:
        """``flush.messages`` / ``flush.ms``: fsync and move the recovery point."""
        state = active.state
        due = (
            state.log_end_offset - state.recovery_point >= self.config.flush_messages
            or now - state.last_flush_ms >= self.config.flush_ms
        )
        if due and state.log_end_offset > state.recovery_point:
            active.flush(now)
            self.write_checkpoints(active.state)

    def write_state(self, record: LockedRecord, state: LogState) -> None:
        record.write(state.encode())

    def write_checkpoints(self, state: LogState) -> None:
        """Record this partition's recovery point and log start in the log directory's checkpoints."""
        bases = self.segments.bases
        first_base = bases[0] if bases else state.active_base
        self.checkpoints.update(
            self.topic_partition,
            state.recovery_point,
            state.log_start_offset if state.log_start_offset > first_base else None,
        )

    # -- reconciling with the files -----------------------------------------------------------

    def sync(self, record: LockedRecord, config: LogConfig) -> ActiveSegment:
        """Bring this process's view of the active segment up to date, under the configs in force, running
        Kafka's recovery for whatever does not match the state record (``_reconciled``)."""
        self.config = config
        state = read_state(record)
        active = self.active
        if state is None or state.boot_id != BOOT_ID:
            active = self.recover(record, None if state is None else state.recovery_point)
        else:
            if active is None or active.state != state:
                active = self._loaded_active(state)
            active = self._reconciled(record, state, active)
        if active.state.first_unstable_offset == UNKNOWN_FIRST_UNSTABLE_OFFSET:
            # A version 0 record: derive the first unstable offset once and record it.
            unstable = self.producer_states.at(active).open_txns.first_unstable_offset()
            active.state = replace(active.state, first_unstable_offset=unstable)
            self.write_state(record, active.state)
        self.active = active
        return active

    def _reconciled(self, record: LockedRecord, state: LogState, active: ActiveSegment | None) -> ActiveSegment:
        """The active segment once its files agree with the state record of this machine's boot.

        - The record does not describe these files (``active`` is None: its segment is not the last
          one or is gone, or does not end at its log end offset; a record copied from another
          partition), or the segment is shorter than acknowledged (a machine crash lost data): full
          recovery, from the checkpointed recovery point or the record's.
        - Bytes past the acknowledged size (a writer died mid-append), or an index of the active
          segment that is missing, damaged or not the size its entries make: the active segment is
          revalidated and its indexes rebuilt.
        """
        if active is None:
            return self.recover(record, None)
        try:
            size = active.segment.size()
        except FileNotFoundError:
            return self.recover(record, None)
        if size < state.active_size:
            return self.recover(record, state.recovery_point)
        if size > state.active_size or not active.indexes_unchanged():
            return self.recover(record, state.recovery_point, only_active=True)
        return active

    def _loaded_active(self, state: LogState) -> ActiveSegment | None:
        """The active segment the state record describes, or None when the record does not describe
        the files: a segment that is not the last one or is gone, or one the record does not describe
        (``describes_active_segment``)."""
        segments = self.segments
        bases = segments.bases
        if not bases or segments.listed_generation != state.segments_generation or bases[-1] != state.active_base:
            bases = segments.list()
            segments.listed_generation = state.segments_generation
        if not bases or bases[-1] != state.active_base:
            return None
        try:
            segment = self.segments.get(state.active_base)
            if not describes_active_segment(state, segment):
                return None
            return ActiveSegment.from_files(state, segment, self.config)
        except FileNotFoundError:
            return None

    def recover(self, record: LockedRecord, recovery_point: int | None, *, only_active: bool = False) -> ActiveSegment:
        """Kafka's log recovery for this partition (``LogLoader``), under the write lock."""
        loaded = self.loader.recover(read_state(record), recovery_point, self.config, only_active=only_active)
        self.write_state(record, loaded.state)
        state = loaded.state
        self.producer_states.reset(
            ProducerCache(
                loaded.producers, state.active_base, state.active_size, state.log_end_offset, loaded.open_txns
            )
        )
        return ActiveSegment.from_files(state, self.segments.get(state.active_base), self.config)


def _batch_columns(entries: EntryTable) -> Iterator[tuple[int, int, int, int, int]]:
    """Each batch's position, size, last offset delta, max timestamp and attributes, as Python ints."""
    return zip(
        entries.positions.tolist(),
        entries.sizes.tolist(),
        entries.last_offset_deltas.tolist(),
        entries.max_timestamps.tolist(),
        entries.attributes.tolist(),
        strict=True,
    )


def _producer_append_info(check: ProducerCheck, info: AppendInfo | None) -> AppendInfo:
    """What an idempotent append acknowledges: its new batches' ``info`` (None: all were repeats) and
    the offsets the repeated ones were given when first appended."""
    repeated = check.max_timestamps[~check.keep]
    return AppendInfo(
        int(check.first_offsets[0]),
        int(check.last_offsets[-1]),
        int((check.last_offsets - check.first_offsets + 1).sum()),
        info.log_append_time_ms if info is not None else -1,
        max(info.max_timestamp if info is not None else -1, int(repeated.max()) if len(repeated) else -1),
    )
