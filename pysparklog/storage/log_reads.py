"""The read side of a partition log (Kafka's ``LocalLog.read`` and its lookups), over a ``LogView``.

Everything here reads what a view acknowledges and nothing past it; the caller took the view under the
state record's lock. Aborted transactions come from the ``.txnindex`` files, which are checked as they
are used and rebuilt from the log when lost or damaged (``rebuild_txn_indexes``, under the write lock).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pysparklog.storage.config import LONG_MAX
from pysparklog.storage.index import TransactionIndex
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.log_state import LogView
from pysparklog.storage.producer_state import OpenTransactions, ProducerStateTracker, replay_segment
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.transaction_index import AbortedBatches, AbortedTxn, collect_aborted, entries_of

# Kafka's ListOffsets special timestamps.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment as retention and the cleaner see it.

    Attributes:
        base_offset: The segment's base offset.
        size: Its acknowledged size in bytes.
        largest_timestamp: The largest batch timestamp, -1 when none.
        last_modified_ms: The ``.log`` file's modification time (Kafka's fallback for time retention).
        next_base: The next segment's base offset, or the log end offset for the active segment.
    """

    base_offset: int
    size: int
    largest_timestamp: int
    last_modified_ms: int
    next_base: int


def segment_index(view: LogView, offset: int) -> int:
    """The index in ``view`` of the segment holding ``offset`` (the first one below the log start)."""
    i = bisect.bisect_right(view.segment_bases, offset) - 1
    return max(i, 0)


def read_batches(
    segments: LogSegments,
    view: LogView,
    topic_partition: tuple[str, int],
    start: int,
    end: int,
    include_headers: bool,
    max_chunk_bytes: int,
    aborted: AbortedBatches | None,
) -> Iterator[pa.RecordBatch]:
    """The records of ``view`` from ``start`` up to ``end`` (exclusive) as Arrow batches, without control
    batches and those of ``aborted`` transactions (``PartitionLog.read_arrow``)."""
    first = segment_index(view, start)
    for base in view.segment_bases[first:]:
        if base >= end:
            return
        segment = segments.get(base)
        seg_end = view.end_of(base, segment)
        found = segment.translate_offset(start, seg_end)
        if found is None:
            continue
        for chunk in segment.chunks(
            found[0], seg_end, max_bytes=max_chunk_bytes, offsets_below=view.offsets_below(base)
        ):
            entries = chunk.entries
            keep = ~entries.is_control
            if aborted is not None:
                keep &= ~aborted.mask(entries)
            data = entries.select(keep)
            for batch in decode_entries(
                chunk.buf,
                data,
                topic=topic_partition[0],
                partition=topic_partition[1],
                include_headers=include_headers,
                file=segment.log_path,
                base_position=chunk.position,
            ):
                offsets = _int64_values(batch.column("offset"))
                lo = int(np.searchsorted(offsets, start, side="left"))
                hi = int(np.searchsorted(offsets, end, side="left"))
                if hi > lo:
                    yield batch.slice(lo, hi - lo)
                if hi < len(offsets):
                    return
            if len(entries) and int(entries.last_offsets[-1]) >= end - 1:
                return


def _int64_values(column: pa.Array) -> np.ndarray:
    """A zero-copy view of an int64 column without nulls. ``Array.to_numpy`` imports pandas the first time
    (0.4 s, paid by every fresh Spark Python worker's first read)."""
    return np.frombuffer(column.buffers()[1], np.int64, len(column), column.offset * 8)


def find_offset_for_timestamp(segments: LogSegments, view: LogView, timestamp: int) -> tuple[int, int] | None:
    """``PartitionLog.offset_for_timestamp`` for ``MAX_TIMESTAMP`` (-3) or a timestamp >= 0, over ``view``."""
    if timestamp == MAX_TIMESTAMP:
        best: tuple[int, int] | None = None
        for base in view.segment_bases:
            seg = segments.get(base)
            ts, offset = seg.largest_timestamp(view.end_of(base, seg), view.offsets_below(base))
            if ts >= 0 and (best is None or ts > best[1]):
                best = (offset, ts)
        return best
    # Kafka's UnifiedLog.fetchOffsetByTimestamp: the first segment whose largest timestamp reaches the
    # target answers, even with none; a segment without a record timestamp (empty, as compaction may
    # leave one) counts its file's modification time (LogSegment.largestTimestamp).
    for base in view.segment_bases:
        seg = segments.get(base)
        end = view.end_of(base, seg)
        largest = seg.largest_timestamp(end, view.offsets_below(base))[0]
        if largest < 0:
            if len(seg.indexes.time_index()):
                continue  # the records its time index describes are gone: damage, not an emptied segment
            largest = seg.modified_ms()
        if largest >= timestamp:
            return seg.find_offset_by_timestamp(timestamp, view.log_start_offset, end, view.offsets_below(base))
    return None


def segment_infos(segments: LogSegments, view: LogView) -> list[SegmentInfo]:
    """What retention and the cleaner decide on, for every segment of ``view``."""
    bases = view.segment_bases
    infos = []
    for base, next_base in zip(bases, [*bases[1:], None][: len(bases)], strict=True):
        segment = segments.get(base)
        end = view.end_of(base, segment)
        largest, _ = segment.largest_timestamp(end)
        modified = segment.modified_ms()
        infos.append(SegmentInfo(base, end, largest, modified, view.log_end_offset if next_base is None else next_base))
    return infos


def checked_txn_index(
    segments: LogSegments, producers: ProducerStateTracker, view: LogView, i: int
) -> TransactionIndex | None:
    """The ``.txnindex`` of segment ``i`` of ``view``, None when it must be rebuilt: lost (the segment
    is at or past where the state record says every segment has one), damaged, or holding entries other
    than those its ABORT markers make.

    A flipped bit in an entry's producer id, first offset or last stable offset leaves a file that passes
    every check of its own bytes and still makes read_committed readers return aborted records or skip
    committed ones. So each version of a file with entries is compared once with the entries a replay of
    its segment derives (``replayed_aborted``), which is what recovery would write.
    """
    base = view.segment_bases[i]
    required = 0 <= view.txn_indexes_from <= base
    end_offset = view.segment_bases[i + 1] if i + 1 < len(view.segment_bases) else None
    indexes = segments.get(base).indexes
    index = indexes.checked_transaction_index(required=required, end_offset=end_offset)
    if index is None or len(index) == 0 or indexes.transaction_index_verified():
        return index
    # Entries of markers at or past the log end belong to an append not acknowledged (collect_aborted).
    acknowledged = entries_of(index, index.last_offsets < view.log_end_offset)
    if acknowledged != replayed_aborted(segments, producers, view, i):
        return None
    indexes.mark_transaction_index_verified()
    return index


def replayed_aborted(segments: LogSegments, producers: ProducerStateTracker, view: LogView, i: int) -> list[AbortedTxn]:
    """The ``.txnindex`` entries of segment ``i`` of ``view`` as recovery derives them: the producer state
    at the segment's base (from the last snapshot, replayed forward) replayed through its batches."""
    segment_bases = list(view.segment_bases)
    base = segment_bases[i]
    segment = segments.get(base)
    state = producers.load(segment_bases, segment_bases[-1], view.active_size, base)
    open_txns = OpenTransactions.of(state)
    return replay_segment(state, segment, 0, view.end_of(base, segment), 0, LONG_MAX, open_txns).aborted


def aborted_in(
    segments: LogSegments, producers: ProducerStateTracker, view: LogView, start: int, upper: int
) -> tuple[list[AbortedTxn], list[int]]:
    """Kafka's ``collectAbortedTransactions`` over the ``.txnindex`` files of ``view``, from the
    segment holding ``start`` on until an entry proves later ones cannot overlap.

    A transaction's entry sits in the segment of its marker, which may come after the range. The
    caller holds the state record's lock shared, so no segment of the view is retired or swapped
    while its file is read.

    Returns:
        The aborted transactions, and the bases of the segments searched whose ``.txnindex`` is lost
        or damaged (``checked_txn_index``): the transactions are incomplete until those are rebuilt.
    """
    found: list[AbortedTxn] = []
    damaged: list[int] = []
    if upper <= start or not view.segment_bases:
        return found, damaged
    for i in range(segment_index(view, start), len(view.segment_bases)):
        index = checked_txn_index(segments, producers, view, i)
        if index is None:
            damaged.append(view.segment_bases[i])
        elif collect_aborted(index, start, upper, view.log_end_offset, found):
            break
    return found, damaged


def rebuild_txn_indexes(
    segments: LogSegments, producers: ProducerStateTracker, view: LogView, bases: Sequence[int]
) -> None:
    """Rebuild the ``.txnindex`` of each segment of ``bases`` that is still lost or damaged, as recovery
    does (``replayed_aborted``). The caller holds the write lock, so that no append, roll, retention or
    compaction runs meanwhile."""
    for i, base in enumerate(view.segment_bases):
        if base in bases and checked_txn_index(segments, producers, view, i) is None:
            segments.get(base).indexes.write_aborted(replayed_aborted(segments, producers, view, i))
