"""Kafka's sparse segment indexes: ``.index`` (offset -> file position) and ``.timeindex``
(timestamp -> offset).

Wire schema (``OffsetIndex.java``, ``TimeIndex.java``), big-endian::

    .index entry     => relativeOffset int32, position int32          (8 bytes)
    .timeindex entry => timestamp int64, relativeOffset int32          (12 bytes)

Kafka preallocates an active index to ``segment.index.bytes`` of zeros and trims it when the
segment rolls or closes; pysparklog never preallocates, so every index file is always in the
trimmed state Kafka leaves behind, and readers in other processes see only whole entries.
A zero entry after the first one marks where the entries of a preallocated (broker-written) file
end, as in Kafka's ``DumpLogSegments``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from pysparklog.errors import CorruptRecordError

OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12

_OFFSET_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
_TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])


def max_entries(index_bytes: int, entry_size: int) -> int:
    """How many entries fit in ``segment.index.bytes``, rounded down to whole entries as Kafka does."""
    return index_bytes // entry_size


def _read_entries(path: str, dtype: np.dtype) -> np.ndarray:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return np.empty(0, dtype=dtype)
    whole = len(raw) - len(raw) % dtype.itemsize
    return np.frombuffer(raw[:whole], dtype=dtype)


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
    def load(cls, path: str, base_offset: int) -> OffsetIndex:
        entries = _read_entries(path, _OFFSET_ENTRY)
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

    def is_consistent(self, log_size: int) -> bool:
        """Kafka's sanity rules: strictly increasing offsets and positions, all inside the log."""
        if len(self) == 0:
            return True
        return bool(
            (self.offsets[0] >= self.base_offset)
            and np.all(np.diff(self.offsets) > 0)
            and np.all(np.diff(self.positions) > 0)
            and self.positions[0] >= 0
            and self.positions[-1] < log_size
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
    def load(cls, path: str, base_offset: int) -> TimeIndex:
        entries = _read_entries(path, _TIME_ENTRY)
        n = _trim_preallocated(entries["relative_offset"])
        entries = entries[:n]
        # A preallocated broker file starts with a zero entry when it holds nothing at all.
        if n == 1 and entries["timestamp"][0] == 0 and entries["relative_offset"][0] == 0:
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

    def is_consistent(self) -> bool:
        if len(self) == 0:
            return True
        return bool(
            np.all(np.diff(self.timestamps) > 0)
            and np.all(np.diff(self.offsets) >= 0)
            and self.offsets[0] >= self.base_offset
        )

    @staticmethod
    def encode(base_offset: int, timestamps: list[int], offsets: list[int]) -> bytes:
        entries = np.empty(len(offsets), dtype=_TIME_ENTRY)
        entries["timestamp"] = timestamps
        entries["relative_offset"] = np.asarray(offsets, dtype=np.int64) - base_offset
        return entries.tobytes()


def check_entry_file(path: str, entry_size: int) -> None:
    """Raise when an index file's length is not a whole number of entries (Kafka's sanity check)."""
    size = os.path.getsize(path)
    if size % entry_size:
        raise CorruptRecordError(
            f"index file length {size} is not a multiple of the entry size {entry_size}", file=path, position=size
        )
