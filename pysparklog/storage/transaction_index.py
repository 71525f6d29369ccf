"""Aborted transactions: the ``.txnindex`` entries a segment gets, the search a read_committed fetch makes
over them, and the test that tells a consumer which batches to skip.

Kafka writes one ``AbortedTxn`` to the ``.txnindex`` of the segment that receives an ABORT marker
closing a transaction with data (``UnifiedLog.append``, ``LogSegment.updateTxnIndex``); the file is
created with its first entry. A read_committed fetch reads the log up to the last stable offset
and returns the aborted transactions overlapping what it read (``UnifiedLog.collectAbortedTransactions``);
the consumer then skips every transactional batch of an aborted transaction's producer from the
transaction's first offset up to its marker (``CompletedFetch``). The entries are read with
``index.TransactionIndex``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pysparklog.errors import InvalidConfigError
from pysparklog.storage.index import ABORTED_TXN_VERSION, TransactionIndex
from pysparklog.storage.records.memory_records import EntryTable

# ``AbortedTxn.java``: version int16 (0), producerId int64, firstOffset int64, lastOffset int64,
# lastStableOffset int64: 34 bytes, big-endian.
_ENTRY = struct.Struct(">hqqqq")

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


def is_read_committed(isolation_level: str) -> bool:
    """Whether a read with ``isolation_level`` (Kafka's ``isolation.level`` values) reads committed data only.

    Raises:
        InvalidConfigError: Another value.
    """
    if isolation_level not in ISOLATION_LEVELS:
        raise InvalidConfigError(
            f"isolation level {isolation_level!r} is not valid; accepted: {', '.join(ISOLATION_LEVELS)}"
        )
    return isolation_level == READ_COMMITTED


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction (Kafka's ``AbortedTxn``).

    Attributes:
        producer_id: The transaction's producer.
        first_offset: The offset of its first batch.
        last_offset: The offset of its ABORT marker.
        last_stable_offset: The last stable offset once the marker was written: the first offset of the
            earliest transaction of another producer still open then, else ``last_offset + 1``. No later
            entry has a first offset below it, which ends a search early.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_aborted(txns: Sequence[AbortedTxn]) -> bytes:
    """The ``.txnindex`` bytes of ``txns``, in order (version 0 entries, as Kafka writes)."""
    return b"".join(
        _ENTRY.pack(ABORTED_TXN_VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in txns
    )


def collect_aborted(index: TransactionIndex, start: int, upper: int, log_end: int, into: list[AbortedTxn]) -> bool:
    """Kafka's ``TransactionIndex.collectAbortedTxns``: add to ``into`` the entries of one segment that
    overlap [``start``, ``upper``), in file order.

    Entries of markers at or past ``log_end`` belong to an append not acknowledged (a writer died
    mid-append; the next writer's recovery rebuilds the file) and are ignored.

    Returns:
        Whether the search is complete: an entry's last stable offset reached ``upper``, so no entry of
        a later segment can overlap the range.
    """
    acknowledged = index.last_offsets < log_end
    ends = np.flatnonzero(acknowledged & (index.last_stable_offsets >= upper))
    stop = int(ends[0]) + 1 if len(ends) else len(index)
    overlapping = acknowledged[:stop] & (index.last_offsets[:stop] >= start) & (index.first_offsets[:stop] < upper)
    into += entries_of(index, overlapping)
    return bool(len(ends))


def entries_of(index: TransactionIndex, mask: np.ndarray) -> list[AbortedTxn]:
    """The entries of ``index`` that ``mask`` (a boolean per entry, or a prefix of them) selects."""
    rows = np.flatnonzero(mask)
    return [
        AbortedTxn(*values)
        for values in zip(
            index.producer_ids[rows].tolist(),
            index.first_offsets[rows].tolist(),
            index.last_offsets[rows].tolist(),
            index.last_stable_offsets[rows].tolist(),
            strict=True,
        )
    ]


class AbortedBatches:
    """Which batches hold records of aborted transactions, found for many batches at once.

    A consumer (``CompletedFetch``) skips a transactional data batch of producer P when an aborted
    transaction of P starts at or before the batch's last offset and P's ABORT marker has not been
    read yet: the batch lies in [first offset, marker offset] of one of P's aborted transactions.
    P's transactions never overlap, so the candidate is P's last transaction starting at or before
    the batch, found by binary search.

    Args:
        txns: The aborted transactions overlapping what is read.
    """

    def __init__(self, txns: Sequence[AbortedTxn]) -> None:
        by_producer: dict[int, list[AbortedTxn]] = {}
        for txn in txns:
            by_producer.setdefault(txn.producer_id, []).append(txn)
        self._ranges: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for producer_id, mine in by_producer.items():
            mine.sort(key=lambda t: t.first_offset)
            firsts = np.array([t.first_offset for t in mine], dtype=np.int64)
            lasts = np.array([t.last_offset for t in mine], dtype=np.int64)
            self._ranges[producer_id] = (firsts, lasts)
        self._producer_ids = np.array(sorted(self._ranges), dtype=np.int64)

    def mask(self, entries: EntryTable) -> np.ndarray:
        """A boolean per entry: True for a transactional data batch of an aborted transaction."""
        aborted = np.zeros(len(entries), dtype=bool)
        if not self._ranges or len(entries) == 0:
            return aborted
        candidates = entries.is_transactional & ~entries.is_control
        producer_ids = entries.producer_ids
        last_offsets = entries.last_offsets
        # One step per producer with aborted transactions in this chunk, not per batch.
        for producer_id in np.intersect1d(self._producer_ids, producer_ids[candidates]).tolist():
            rows = np.flatnonzero(candidates & (producer_ids == producer_id))
            firsts, lasts = self._ranges[producer_id]
            last = last_offsets[rows]
            txn = np.searchsorted(firsts, last, side="right") - 1
            aborted[rows] = (txn >= 0) & (last <= lasts[np.maximum(txn, 0)])
        return aborted
