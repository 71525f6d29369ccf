"""A segment's indexes (Kafka's ``OffsetIndex``, ``TimeIndex`` and ``TransactionIndex`` files), owned by
its ``LogSegment``: loaded on demand and cached by the files' versions, checked once per load against
Kafka's sanity rules, appended to entry by entry and rewritten whole by recovery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.index import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_ENTRY_SIZE,
    OffsetIndex,
    TimeIndex,
    TransactionIndex,
)
from pysparklog.storage.io import FileSystemStorage, read_if_exists
from pysparklog.storage.transaction_index import AbortedTxn, encode_aborted

INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"


@dataclass(slots=True)
class IndexBuild:
    """Index entries derived from a walk over a segment with Kafka's ``index.interval.bytes`` rule."""

    base_offset: int
    interval: int
    offsets: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    time_stamps: list[int] = field(default_factory=list)
    time_offsets: list[int] = field(default_factory=list)
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    last_entry_position: int = 0

    def add(self, position: int, last_offset: int, max_timestamp: int) -> None:
        """Account for the entry at ``position`` exactly as ``LogSegment.append`` does per batch."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if position - self.last_entry_position > self.interval:
            self.offsets.append(last_offset)
            self.positions.append(position)
            self.maybe_append_time_entry()
            self.last_entry_position = position

    def maybe_append_time_entry(self) -> None:
        if self.max_timestamp > (self.time_stamps[-1] if self.time_stamps else -1):
            self.time_stamps.append(self.max_timestamp)
            self.time_offsets.append(self.offset_of_max_timestamp)


class SegmentIndexes:
    """The ``.index``, ``.timeindex`` and ``.txnindex`` of one segment.

    Args:
        storage: The log directory's storage.
        prefix: The segment's files' path without suffix (directory and 20-digit base offset).
        base_offset: The segment's base offset.
        file_suffix: After each file's name (``.swap``, ``.cleaned``...).
    """

    def __init__(self, storage: FileSystemStorage, prefix: str, base_offset: int, file_suffix: str = "") -> None:
        self.storage = storage
        self.base_offset = base_offset
        self.offset_path = prefix + INDEX_SUFFIX + file_suffix
        self.time_path = prefix + TIME_INDEX_SUFFIX + file_suffix
        self.txn_path = prefix + TXN_INDEX_SUFFIX + file_suffix
        self._index_cache: tuple[tuple[int, str], OffsetIndex] | None = None
        self._time_index_cache: tuple[tuple[int, str], TimeIndex] | None = None
        self._txn_index_cache: tuple[tuple[int, str], TransactionIndex | None] | None = None
        # The version of the .txnindex last found to hold exactly the entries a replay of the log makes.
        self._txn_index_verified: tuple[int, str] | None = None
        self._index_check: tuple[OffsetIndex, int, bool] | None = None  # (index, end, consistent)
        self._time_index_check: tuple[TimeIndex, bool] | None = None  # (index, consistent)

    # -- reading --------------------------------------------------------------------------------

    def _stamp(self, path: str) -> tuple[int, str]:
        stat = self.storage.stat(path)
        return (-1, "") if stat is None else (stat.size, stat.version)

    def offset_index(self) -> OffsetIndex:
        stamp = self._stamp(self.offset_path)
        if self._index_cache is None or self._index_cache[0] != stamp:
            data = read_if_exists(self.storage, self.offset_path)
            self._index_cache = (stamp, OffsetIndex.parse(data, self.base_offset))
        return self._index_cache[1]

    def time_index(self) -> TimeIndex:
        stamp = self._stamp(self.time_path)
        if self._time_index_cache is None or self._time_index_cache[0] != stamp:
            data = read_if_exists(self.storage, self.time_path)
            self._time_index_cache = (stamp, TimeIndex.parse(data, self.base_offset))
        return self._time_index_cache[1]

    def transaction_index(self) -> TransactionIndex:
        """The aborted transactions of the ``.txnindex`` (none when the segment has no file; a partial last
        entry is ignored, as in Kafka).

        Raises:
            CorruptRecordError: An entry of an unknown version.
        """
        index = self._loaded_transaction_index()[1]
        return index if index is not None else self._parsed_transaction_index()

    def _parsed_transaction_index(self) -> TransactionIndex:
        return TransactionIndex.parse(read_if_exists(self.storage, self.txn_path), self.txn_path)

    def checked_transaction_index(self, *, required: bool, end_offset: int | None) -> TransactionIndex | None:
        """The ``.txnindex`` entries, or None when the file must be rebuilt from the log before a
        read_committed answer may use it: missing although ``required`` (the segment was created with
        one), ending in a partial entry, or holding entries that are not this segment's ABORT markers in
        log order (``TransactionIndex.is_consistent``; ``end_offset``: one past the segment's last
        offset, None for the active segment, whose file may hold entries of a marker not acknowledged).
        """
        stamp, index = self._loaded_transaction_index()
        if stamp[0] < 0:
            return None if required else index
        if index is None or stamp[0] % TXN_INDEX_ENTRY_SIZE:
            return None
        return index if index.is_consistent(self.base_offset, end_offset) else None

    def transaction_index_verified(self) -> bool:
        """Whether the loaded ``.txnindex`` is the version a replay of the log was found to agree with: a
        checked file is compared with the log once per version, not per read."""
        return self._txn_index_cache is not None and self._txn_index_verified == self._txn_index_cache[0]

    def mark_transaction_index_verified(self) -> None:
        """Record that the loaded ``.txnindex`` holds the entries a replay of the log makes."""
        if self._txn_index_cache is not None:
            self._txn_index_verified = self._txn_index_cache[0]

    def _loaded_transaction_index(self) -> tuple[tuple[int, str], TransactionIndex | None]:
        """The file's (size, mtime) and its entries, None for entries of an unknown version; cached."""
        stamp = self._stamp(self.txn_path)
        if self._txn_index_cache is None or self._txn_index_cache[0] != stamp:
            try:
                index: TransactionIndex | None = self._parsed_transaction_index()
            except CorruptRecordError:
                index = None
            self._txn_index_cache = (stamp, index)
        return self._txn_index_cache

    def usable_offset_index(self, end: int) -> OffsetIndex | None:
        """The offset index when its file holds whole entries that pass Kafka's sanity rules for a log
        of ``end`` bytes; None when it does not (readers then scan from the segment's start).

        The check passes over the whole index, which would cost a random lookup more than the
        rest of it: it runs once per loaded index and ``end``. An entry found wrong where it is used
        (``LogSegment``) marks the index unusable the same way (``distrust_offset_index``).
        """
        index = self.offset_index()
        check = self._index_check
        if check is None or check[0] is not index or check[1] != end:
            whole = self._index_cache is not None and self._index_cache[0][0] % OFFSET_INDEX_ENTRY_SIZE == 0
            check = self._index_check = (index, end, whole and index.is_consistent(end))
        return index if check[2] else None

    def usable_time_index(self) -> TimeIndex | None:
        """The time index when its file holds whole entries with increasing timestamps and offsets from
        the base on; None when it does not (readers then scan the segment). The check runs once per
        loaded index. Whether the entry a scan starts from tells the truth about the log is checked as
        the scan passes it (``LogSegment``)."""
        index = self.time_index()
        check = self._time_index_check
        if check is None or check[0] is not index:
            assert self._time_index_cache is not None
            whole = self._time_index_cache[0][0] % TIME_INDEX_ENTRY_SIZE == 0
            check = self._time_index_check = (index, whole and index.is_consistent())
        return index if check[1] else None

    def distrust_offset_index(self, end: int) -> None:
        """Mark the loaded offset index unusable for a log of ``end`` bytes: one of its entries proved wrong."""
        if self._index_cache is not None:
            self._index_check = (self._index_cache[1], end, False)

    # -- writing --------------------------------------------------------------------------------

    def append_offsets(self, offsets: Sequence[int], positions: Sequence[int]) -> None:
        """Add entries at the end of the ``.index``; they follow the batches they point at."""
        self.storage.append(self.offset_path, OffsetIndex.encode(self.base_offset, list(offsets), list(positions)))

    def append_times(self, timestamps: Sequence[int], offsets: Sequence[int]) -> None:
        """Add entries at the end of the ``.timeindex``."""
        self.storage.append(self.time_path, TimeIndex.encode(self.base_offset, list(timestamps), list(offsets)))

    def append_aborted(self, txns: list[AbortedTxn]) -> None:
        """Add entries at the end of the ``.txnindex``, creating it with the first (as Kafka does)."""
        self.storage.append(self.txn_path, encode_aborted(txns))

    def write(self, build: IndexBuild) -> None:
        """Replace both index files with the entries of ``build`` (atomically, for concurrent readers)."""
        self.storage.put(self.offset_path, OffsetIndex.encode(self.base_offset, build.offsets, build.positions))
        self.storage.put(self.time_path, TimeIndex.encode(self.base_offset, build.time_stamps, build.time_offsets))

    def write_aborted(self, txns: list[AbortedTxn]) -> None:
        """Replace the ``.txnindex`` with ``txns`` (atomically); without entries the file is empty, as
        Kafka's ``TransactionIndex.reset`` leaves it."""
        self.storage.put(self.txn_path, encode_aborted(txns))

    def intact(self, log_size: int, *, txn_index_required: bool = False) -> bool:
        """Both index files exist, hold whole entries and pass Kafka's sanity rules for a log of
        ``log_size`` bytes, and so does the ``.txnindex`` (``checked_transaction_index``; it must exist
        when ``txn_index_required``)."""
        for path, entry_size in (
            (self.offset_path, OFFSET_INDEX_ENTRY_SIZE),
            (self.time_path, TIME_INDEX_ENTRY_SIZE),
        ):
            stat = self.storage.stat(path)
            if stat is None or stat.size % entry_size:
                return False
        if self.checked_transaction_index(required=txn_index_required, end_offset=None) is None:
            return False
        return self.offset_index().is_consistent(log_size) and self.time_index().is_consistent()
