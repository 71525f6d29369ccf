"""Fetch's read of one partition: the stored record batches, as bytes, from the position the offset index gives,
without decoding them (Kafka's ``LocalLog.read``: a slice of the segment file sent as it is).

Kafka's rules kept here:

- The read starts at the batch holding the fetch offset, which may begin before it (the client skips the records
  below the offset it asked for), and stays within one segment: the client's next fetch goes on from there.
- It ends at the last stable offset under ``read_committed`` (a batch boundary: the first batch of the earliest open
  transaction), at the log end (the high watermark: every append here is acknowledged once written) otherwise.
- It holds whole batches up to ``max_bytes``; the first partition of a response that has records gets at least one
  whole batch even when that batch is larger (``minOneMessage``), so a consumer never stalls on a large batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysparklog.errors import CorruptRecordError, OffsetOutOfRangeError
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_reads import segment_index
from pysparklog.storage.log_state import LogView
from pysparklog.storage.transaction_index import AbortedTxn

#: Times a read starts over with a new view when retention or compaction removed a segment under it.
_MAX_VIEW_RETRIES = 5


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """What a fetch of one partition found.

    Attributes:
        records: Whole stored batches, as they are in the segment file (b"" when none).
        high_watermark: The log end offset.
        last_stable_offset: Where ``read_committed`` reads stop.
        log_start_offset: The first offset the log holds.
        aborted: Under ``read_committed``, the aborted transactions with records in the range read; None otherwise.
    """

    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None


@dataclass(frozen=True, slots=True)
class LogEnds:
    """A partition's offsets, for a response that carries no records (an offset out of range)."""

    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


def log_ends(log: Log) -> LogEnds:
    """The partition's offsets from one view."""
    view = log.view()
    return LogEnds(view.log_end_offset, log.local.last_stable(view), view.log_start_offset)


def read_stored(log: Log, fetch_offset: int, max_bytes: int, committed: bool, min_one_batch: bool) -> PartitionRead:
    """The batches of ``log`` from ``fetch_offset``, as stored.

    Args:
        log: The partition's log.
        fetch_offset: The offset the consumer asks for.
        max_bytes: At most this many bytes, in whole batches (but see ``min_one_batch``).
        committed: ``read_committed``: stop at the last stable offset and list the aborted transactions in range.
        min_one_batch: Return the first batch even when it is larger than ``max_bytes``.

    Raises:
        OffsetOutOfRangeError: ``fetch_offset`` is below the log start offset or above the log end offset.
        CorruptRecordError: A segment's bytes are not whole batches where the index says they are.
    """
    for _attempt in range(_MAX_VIEW_RETRIES):
        view = log.view()
        try:
            return _read_view(log, view, fetch_offset, max_bytes, committed, min_one_batch)
        except FileNotFoundError:
            continue  # retention or compaction replaced segments under this read: look again
    raise CorruptRecordError(f"the segments of {log.topic}-{log.partition} keep disappearing under the reader")


def _read_view(
    log: Log, view: LogView, fetch_offset: int, max_bytes: int, committed: bool, min_one_batch: bool
) -> PartitionRead:
    stable = log.local.last_stable(view)
    if not view.log_start_offset <= fetch_offset <= view.log_end_offset:
        raise OffsetOutOfRangeError(
            f"offset {fetch_offset} is outside {log.topic}-{log.partition}'s range "
            f"[{view.log_start_offset}, {view.log_end_offset}] (log start offset, log end offset)"
        )
    upper = stable if committed else view.log_end_offset
    records, read_end = _batches_below(log, view, fetch_offset, upper, max_bytes, min_one_batch)
    aborted = None
    if committed:
        aborted = log.local.aborted_transactions(fetch_offset, read_end) if read_end > fetch_offset else []
    return PartitionRead(records, view.log_end_offset, stable, view.log_start_offset, aborted)


def _batches_below(
    log: Log, view: LogView, fetch_offset: int, upper: int, max_bytes: int, min_one: bool
) -> tuple[bytes, int]:
    """Whole batches from the one holding ``fetch_offset`` whose base offsets are below ``upper``, in one segment,
    and one past their last offset (``fetch_offset`` when there are none)."""
    nothing = (b"", fetch_offset)
    if fetch_offset >= upper:
        return nothing
    for base in view.segment_bases[segment_index(view, fetch_offset) :]:
        if base >= upper:
            return nothing
        segment = log.segment(base)
        segment_end = view.end_of(base, segment)
        found = segment.translate_offset(fetch_offset, segment_end)
        if found is None:
            continue  # the offset is past this segment's batches (compaction emptied its end)
        # One chunk: whole batches of about max_bytes, or the first batch alone when it is larger.
        chunk = next(
            segment.chunks(found[0], segment_end, max_bytes=max(max_bytes, 1), verify_crc=False),
            None,
        )
        if chunk is None:
            return nothing
        entries = chunk.entries
        ends = entries.positions + entries.sizes
        below = entries.base_offsets < upper
        fits = ends <= max_bytes
        take = int(np.argmin(below & fits)) if not (below & fits).all() else len(entries)
        if take == 0 and min_one and below[0]:
            take = 1
        if take == 0:
            return nothing
        records = bytes(chunk.buf[int(entries.positions[0]) : int(ends[take - 1])])
        return records, int(entries.last_offsets[take - 1]) + 1
    return nothing
