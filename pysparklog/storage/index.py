"""Kafka's segment indexes: the sparse ``.index`` (offset -> file position) and ``.timeindex``
(timestamp -> offset), and the ``.txnindex`` of aborted transactions.

Wire schema (``OffsetIndex.java``, ``TimeIndex.java``, ``AbortedTxn.java``), big-endian::

    .index entry     => relativeOffset int32, position int32          (8 bytes)
    .timeindex entry => timestamp int64, relativeOffset int32          (12 bytes)
    .txnindex entry  => version int16 (0), producerId int64, firstOffset int64, lastOffset int64,
                        lastStableOffset int64                         (34 bytes)

Kafka preallocates an active index to ``segment.index.bytes`` of zeros and trims it when the
segment rolls or closes; pysparklog never preallocates, so every index file is always in the
trimmed state Kafka leaves behind, and readers in other processes see only whole entries.
A zero entry after the first one marks where the entries of a preallocated (broker-written) file
end, as in Kafka's ``DumpLogSegments``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysparklog.errors import CorruptRecordError

OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12
TXN_INDEX_ENTRY_SIZE = 34
ABORTED_TXN_VERSION = 0

_OFFSET_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
_TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
_ABORTED_TXN_ENTRY = np.dtype(
    [
        ("version", ">i2"),
        ("producer_id", ">i8"),
        ("first_offset", ">i8"),
        ("last_offset", ">i8"),
        ("last_stable_offset", ">i8"),
    ]
)
assert _ABORTED_TXN_ENTRY.itemsize == TXN_INDEX_ENTRY_SIZE


def max_entries(index_bytes: int, entry_size: int) -> int:
    """How many entries fit in ``segment.index.bytes``, rounded down to whole entries as Kafka does."""
    return index_bytes // entry_size


def _read_entries(raw: bytes | None, dtype: np.dtype) -> tuple[np.ndarray, int]:
    """The whole entries of an index file's bytes and the file's length, which may end in a partial entry.

    A missing file (None) reads as empty, as the index of a segment that has none yet.
    """
    if raw is None:
        return np.empty(0, dtype=dtype), 0
    whole = len(raw) - len(raw) % dtype.itemsize
    return np.frombuffer(raw[:whole], dtype=dtype), len(raw)


def _increasing(values: np.ndarray) -> bool:
    """Whether ``values`` strictly increase (comparisons of slices: indexes are checked on every load)."""
    return bool((values[1:] > values[:-1]).all())


def _trim_preallocated(relative_offsets: np.ndarray) -> int:
    """Entries before the first zero relative offset that is not entry 0."""
    zeros = np.flatnonzero(relative_offsets[1:] == 0)
    return int(zeros[0]) + 1 if len(zeros) else len(relative_offsets)


@dataclass(frozen=True, slots=True)
class OffsetIndex:
    """The entries of one ``.index`` file, absolute offsets and positions as int64 arrays."""

    base_offset: int
    offsets: np.ndarray
    positions: np.ndarray

    @classmethod
    def parse(cls, data: bytes | None, base_offset: int) -> OffsetIndex:
        """The entries of a ``.index`` file's bytes (None: no file), up to where a preallocated file's zeros begin."""
        entries, _length = _read_entries(data, _OFFSET_ENTRY)
        n = _trim_preallocated(entries["relative_offset"])
        entries = entries[:n]
        return cls(
            base_offset,
            entries["relative_offset"].astype(np.int64) + base_offset,
            entries["position"].astype(np.int64),
        )

    def __len__(self) -> int:
        return len(self.offsets)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The largest entry with offset <= target, else (base offset, 0): where a scan starts."""
        i = int(np.searchsorted(self.offsets, target_offset, side="right")) - 1
        if i < 0:
            return self.base_offset, 0
        return int(self.offsets[i]), int(self.positions[i])

    def is_consistent(self, log_size: int, end_offset: int | None = None) -> bool:
        """Kafka's sanity rules: strictly increasing offsets and positions, all inside the log; and,
        when the segment's end offset (one past its last offset) is known, offsets below it."""
        if len(self) == 0:
            return True
        return bool(
            (self.offsets[0] >= self.base_offset)
            and _increasing(self.offsets)
            and _increasing(self.positions)
            and self.positions[0] >= 0
            and self.positions[-1] < log_size
            and (end_offset is None or self.offsets[-1] < end_offset)
        )

    @staticmethod
    def sanity_check(data: bytes | None, path: str, base_offset: int) -> None:
        """Kafka's ``OffsetIndex.sanityCheck`` of the bytes of ``path``, the check that decides on broker
        startup whether to rebuild.

        Unlike ``parse`` it looks at every whole entry, as Kafka's read-only index does: a zero
        entry does not end the file here.

        Raises:
            CorruptRecordError: With Kafka's ``CorruptIndexException`` message, which names the file.
        """
        entries, length = _read_entries(data, _OFFSET_ENTRY)
        if len(entries) and (last_offset := base_offset + int(entries["relative_offset"][-1])) < base_offset:
            raise CorruptRecordError(
                f"Corrupt index found, index file {path} has non-zero size but the last offset is "
                f"{last_offset} which is less than the base offset {base_offset}"
            )
        if length % OFFSET_INDEX_ENTRY_SIZE:
            raise CorruptRecordError(
                f"Index file {path} is corrupt, found {length} bytes which is neither positive nor a "
                f"multiple of {OFFSET_INDEX_ENTRY_SIZE}"
            )

    @staticmethod
    def encode(base_offset: int, offsets: list[int], positions: list[int]) -> bytes:
        entries = np.empty(len(offsets), dtype=_OFFSET_ENTRY)
        entries["relative_offset"] = np.asarray(offsets, dtype=np.int64) - base_offset
        entries["position"] = positions
        return entries.tobytes()


@dataclass(frozen=True, slots=True)
class TimeIndex:
    """The entries of one ``.timeindex`` file, with absolute offsets."""

    base_offset: int
    timestamps: np.ndarray
    offsets: np.ndarray

    @classmethod
    def parse(cls, data: bytes | None, base_offset: int, *, keep_zero_entry: bool = False) -> TimeIndex:
        """The entries of a ``.timeindex`` file's bytes, up to where a preallocated file's zeros begin.

        Args:
            data: The file's bytes; None (a missing file) has no entries.
            base_offset: The segment's base offset.
            keep_zero_entry: Keep a lone first entry (timestamp 0, base offset). A preallocated
                broker file that was never written holds just that, so readers drop it; Kafka's
                ``DumpLogSegments`` lists it, and so do dump tools that match it.
        """
        entries, _length = _read_entries(data, _TIME_ENTRY)
        n = _trim_preallocated(entries["relative_offset"])
        entries = entries[:n]
        if not keep_zero_entry and n == 1 and entries["timestamp"][0] == 0 and entries["relative_offset"][0] == 0:
            entries = entries[:0]
        return cls(
            base_offset,
            entries["timestamp"].astype(np.int64),
            entries["relative_offset"].astype(np.int64) + base_offset,
        )

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when there is none."""
        if len(self) == 0:
            return -1, self.base_offset
        return int(self.timestamps[-1]), int(self.offsets[-1])

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The largest entry with timestamp <= target, else (-1, base offset)."""
        i = int(np.searchsorted(self.timestamps, target_timestamp, side="right")) - 1
        if i < 0:
            return -1, self.base_offset
        return int(self.timestamps[i]), int(self.offsets[i])

    def is_consistent(self, end_offset: int | None = None, max_timestamp: int | None = None) -> bool:
        """Strictly increasing timestamps, offsets that do not decrease and start at the base; and, when
        the segment's end offset and largest timestamp are known, offsets below the one and timestamps
        up to the other."""
        if len(self) == 0:
            return True
        return bool(
            _increasing(self.timestamps)
            and (self.offsets[1:] >= self.offsets[:-1]).all()
            and self.offsets[0] >= self.base_offset
            and (end_offset is None or self.offsets[-1] < end_offset)
            and (max_timestamp is None or self.timestamps[-1] <= max_timestamp)
        )

    @staticmethod
    def sanity_check(data: bytes | None, path: str, base_offset: int) -> None:
        """Kafka's ``TimeIndex.sanityCheck`` over every whole entry of the bytes of ``path`` (see
        ``OffsetIndex.sanity_check``).

        Raises:
            CorruptRecordError: With Kafka's ``CorruptIndexException`` message, which names the file.
        """
        entries, length = _read_entries(data, _TIME_ENTRY)
        if len(entries):
            first_timestamp, last_timestamp = int(entries["timestamp"][0]), int(entries["timestamp"][-1])
            last_offset = base_offset + int(entries["relative_offset"][-1])
            if last_timestamp < first_timestamp:
                raise CorruptRecordError(
                    f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"timestamp is {last_timestamp} which is less than the first timestamp {first_timestamp}"
                )
            if last_offset < base_offset:
                raise CorruptRecordError(
                    f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"offset is {last_offset} which is less than the first offset {base_offset}"
                )
        if length % TIME_INDEX_ENTRY_SIZE:
            raise CorruptRecordError(
                f"Time index file {path} is corrupt, found {length} bytes which is neither positive nor "
                f"a multiple of {TIME_INDEX_ENTRY_SIZE}"
            )

    @staticmethod
    def encode(base_offset: int, timestamps: list[int], offsets: list[int]) -> bytes:
        entries = np.empty(len(offsets), dtype=_TIME_ENTRY)
        entries["timestamp"] = timestamps
        entries["relative_offset"] = np.asarray(offsets, dtype=np.int64) - base_offset
        return entries.tobytes()


@dataclass(frozen=True, slots=True)
class TransactionIndex:
    """The aborted transactions a ``.txnindex`` file lists, in file order, as int64 arrays.

    One entry per transaction aborted in the segment; consumers reading committed data skip the
    transaction's records from ``first_offsets`` to ``last_offsets``.
    """

    versions: np.ndarray
    producer_ids: np.ndarray
    first_offsets: np.ndarray
    last_offsets: np.ndarray
    last_stable_offsets: np.ndarray

    @classmethod
    def parse(cls, data: bytes | None, path: str) -> TransactionIndex:
        """Every whole entry of the bytes of ``path`` (none when it is missing: None); a partial last entry
        is ignored, as in Kafka.

        Raises:
            CorruptRecordError: An entry's version is newer than Kafka's, with Kafka's message.
        """
        entries, _length = _read_entries(data, _ABORTED_TXN_ENTRY)
        newer = np.flatnonzero(entries["version"] > ABORTED_TXN_VERSION)
        if len(newer):
            raise CorruptRecordError(
                f"Unexpected aborted transaction version {int(entries['version'][newer[0]])} in transaction index "
                f"{path}, current version is {ABORTED_TXN_VERSION}"
            )
        return cls(
            entries["version"].astype(np.int64),
            entries["producer_id"].astype(np.int64),
            entries["first_offset"].astype(np.int64),
            entries["last_offset"].astype(np.int64),
            entries["last_stable_offset"].astype(np.int64),
        )

    def __len__(self) -> int:
        return len(self.versions)

    def is_consistent(self, base_offset: int, end_offset: int | None = None) -> bool:
        """Whether the entries can be the ABORT markers of a segment at ``base_offset``, in log order:
        version 0, markers at or past the base (and below ``end_offset`` when given) in increasing
        order, each after its transaction's first offset (Kafka's ``sanityCheck`` checks the base)."""
        if len(self) == 0:
            return True
        last = self.last_offsets
        return bool(
            (self.versions == ABORTED_TXN_VERSION).all()
            and last[0] >= base_offset
            and (end_offset is None or last[-1] < end_offset)
            and _increasing(last)
            and ((self.first_offsets >= 0) & (self.first_offsets < last)).all()
        )
