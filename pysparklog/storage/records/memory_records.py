"""A buffer of log entries (Kafka's ``MemoryRecords``/``FileRecords`` view): find the entries,
check their checksums, and hand their record sections to the decoder.

An *entry* is what a log file is a concatenation of: a v2 record batch, or a legacy message (which
may be a compressed wrapper). The walk itself runs in ``kernels.scan_entries``; this module turns
its stop reasons into errors that name the file and position.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c as _crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.codecs import CODEC_MASK
from pysparklog.storage.records.default_records import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    MAGIC_V2,
    MIN_ENTRY_SIZE_FIELD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)

_INITIAL_TABLE_ROWS = 1024
# Legacy CRC-32 covers magic..end; the stored CRC sits at bytes 12..16.
_LEGACY_CRC_START = 16


def pool_empty(n: int, dtype: type[np.generic]) -> np.ndarray:
    """An uninitialised array in Arrow's memory pool, which keeps freed memory for the next chunk.

    NumPy's arrays of these sizes are mmapped afresh each time, and page-faulting them in cost
    more than decoding into them; the C heap they fall back to once glibc raises its mmap threshold
    fragments, so a reader's resident memory would grow with what it read.
    """
    return np.frombuffer(pa.allocate_buffer(n * np.dtype(dtype).itemsize), dtype)


def as_uint8(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """A zero-copy uint8 view of a bytes-like object, the form the kernels take."""
    if isinstance(data, np.ndarray):
        return data.view(np.uint8) if data.dtype != np.uint8 else data
    return np.frombuffer(data, dtype=np.uint8)


@dataclass(frozen=True, slots=True)
class EntryTable:
    """Entries found in a buffer: one row per entry, columns ``kernels.E_*``, read through the properties (views of
    the columns; legacy messages have no producer fields and read -1 there, as Kafka's ``NO_PRODUCER_ID``).

    Attributes:
        rows: int64 array of shape (entries, ``kernels.ENTRY_FIELDS``).
        stop_position: Buffer position after the last complete entry.
        incomplete_tail: True when bytes after ``stop_position`` hold a partial entry.
        corrupt: True when the entry at ``stop_position`` is invalid (non-strict scans only).
    """

    rows: npt.NDArray[np.int64]
    stop_position: int
    incomplete_tail: bool
    corrupt: bool = False

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def column(self, field: int) -> np.ndarray:
        return self.rows[:, field]

    @property
    def positions(self) -> np.ndarray:
        return self.rows[:, k.E_POSITION]

    @property
    def sizes(self) -> np.ndarray:
        return self.rows[:, k.E_SIZE]

    @property
    def base_offsets(self) -> np.ndarray:
        return self.rows[:, k.E_BASE_OFFSET]

    @property
    def last_offset_deltas(self) -> np.ndarray:
        return self.rows[:, k.E_LAST_OFFSET_DELTA]

    @property
    def last_offsets(self) -> np.ndarray:
        return np.asarray(self.base_offsets + self.last_offset_deltas)

    @property
    def magics(self) -> np.ndarray:
        return self.rows[:, k.E_MAGIC]

    @property
    def attributes(self) -> np.ndarray:
        return self.rows[:, k.E_ATTRIBUTES]

    @property
    def base_timestamps(self) -> np.ndarray:
        return self.rows[:, k.E_BASE_TIMESTAMP]

    @property
    def max_timestamps(self) -> np.ndarray:
        return self.rows[:, k.E_MAX_TIMESTAMP]

    @property
    def producer_ids(self) -> np.ndarray:
        return self.rows[:, k.E_PRODUCER_ID]

    @property
    def producer_epochs(self) -> np.ndarray:
        return self.rows[:, k.E_PRODUCER_EPOCH]

    @property
    def base_sequences(self) -> np.ndarray:
        return self.rows[:, k.E_BASE_SEQUENCE]

    @property
    def record_counts(self) -> np.ndarray:
        return self.rows[:, k.E_RECORDS_COUNT]

    @property
    def partition_leader_epochs(self) -> np.ndarray:
        return self.rows[:, k.E_PARTITION_LEADER_EPOCH]

    @property
    def crcs(self) -> np.ndarray:
        """The checksum each entry stores (CRC-32C of a v2 batch, CRC-32 of a legacy message)."""
        return self.rows[:, k.E_CRC]

    @property
    def is_control(self) -> np.ndarray:
        return np.asarray((self.magics >= MAGIC_V2) & ((self.attributes & CONTROL_FLAG_MASK) != 0))

    @property
    def is_transactional(self) -> np.ndarray:
        return np.asarray((self.magics >= MAGIC_V2) & ((self.attributes & TRANSACTIONAL_FLAG_MASK) != 0))

    @property
    def has_producers(self) -> bool:
        """Whether any batch carries a producer id (idempotent or transactional)."""
        return bool(((self.magics >= MAGIC_V2) & (self.producer_ids >= 0)).any())

    @property
    def codecs(self) -> np.ndarray:
        return np.asarray(self.attributes & CODEC_MASK)

    @property
    def log_append_time(self) -> np.ndarray:
        return np.asarray((self.attributes & TIMESTAMP_TYPE_MASK) != 0)

    def select(self, mask_or_index: np.ndarray | slice) -> EntryTable:
        return EntryTable(self.rows[mask_or_index], self.stop_position, self.incomplete_tail, self.corrupt)


def scan(
    buf: np.ndarray,
    start: int = 0,
    end: int | None = None,
    *,
    file: str | None = None,
    base_position: int = 0,
    strict: bool = True,
) -> EntryTable:
    """Find the complete entries in ``buf[start:end]``.

    Args:
        buf: The bytes, as uint8.
        start: First byte of the first entry.
        end: End of the bytes to walk (default: the whole buffer).
        file: File name for error messages.
        base_position: File position of ``buf[0]``, so errors name positions in the file.
        strict: Raise on a corrupt entry; otherwise stop before it and mark the table ``corrupt``
            (what recovery needs: everything before the first invalid entry).

    Raises:
        CorruptRecordError: In strict mode, an entry's size field is smaller than Kafka's minimum,
            its magic is unknown, or a v2 batch is shorter than its own header.
    """
    stop = len(buf) if end is None else end
    tables = []
    pos = start
    rows = _INITIAL_TABLE_ROWS
    problem: tuple[int, str] | None = None  # (buffer position, what is wrong)
    while True:
        table = np.empty((rows, k.ENTRY_FIELDS), dtype=np.int64)
        n, pos, reason = k.scan_entries(buf, pos, stop, table)
        tables.append(table[:n])
        if reason == k.STOP_MAX_ENTRIES:
            rows = min(rows * 4, 1 << 20)
            continue
        if reason == k.STOP_BAD_SIZE:
            size = int.from_bytes(bytes(buf[pos + 8 : pos + 12]), "big", signed=True)
            problem = (pos, f"entry size {size} is smaller than the minimum record overhead ({MIN_ENTRY_SIZE_FIELD})")
        break
    found = EntryTable(np.concatenate(tables) if len(tables) > 1 else tables[0], pos, reason == k.STOP_INCOMPLETE)
    magics, sizes = found.magics, found.sizes
    short = np.flatnonzero((magics >= MAGIC_V2) & (sizes < RECORD_BATCH_OVERHEAD))[:1]
    bad_magic = np.flatnonzero(magics > MAGIC_V2)[:1]
    for i in sorted([*short.tolist(), *bad_magic.tolist()])[:1]:
        what = (
            f"unknown magic value {int(magics[i])}, expected 0, 1 or 2"
            if magics[i] > MAGIC_V2
            else f"record batch of {int(sizes[i])} bytes is shorter than the v2 header ({RECORD_BATCH_OVERHEAD})"
        )
        problem = (int(found.positions[i]), what)
        found = found.select(slice(0, i))
    if problem is not None:
        if strict:
            raise CorruptRecordError(problem[1], file=file, position=base_position + problem[0])
        return EntryTable(found.rows, problem[0], False, corrupt=True)
    return found


def entry_crc_error(buf: np.ndarray, entries: EntryTable) -> int:
    """Index of the first entry whose stored checksum is wrong, or -1.

    v2 batches carry CRC-32C over attributes..end; legacy messages CRC-32 over magic..end.
    """
    view = buf.data
    columns = (entries.positions.tolist(), entries.sizes.tolist(), entries.magics.tolist(), entries.crcs.tolist())
    for i, (pos, size, magic, stored) in enumerate(zip(*columns, strict=True)):
        if magic >= MAGIC_V2:
            computed = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
        else:
            computed = zlib.crc32(view[pos + _LEGACY_CRC_START : pos + size])
        if computed != stored:
            return i
    return -1


def verify_crcs(buf: np.ndarray, entries: EntryTable, *, file: str | None = None, base_position: int = 0) -> None:
    """Raise CorruptRecordError for the first entry whose checksum is wrong, naming file and position."""
    i = entry_crc_error(buf, entries)
    if i < 0:
        return
    pos, size, magic, stored = (
        int(column[i]) for column in (entries.positions, entries.sizes, entries.magics, entries.crcs)
    )
    view = buf.data
    if magic >= MAGIC_V2:
        kind, computed = "CRC-32C", _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
    else:
        kind, computed = "CRC-32", zlib.crc32(view[pos + _LEGACY_CRC_START : pos + size])
    raise CorruptRecordError(
        f"{kind} mismatch in the entry at offset {int(entries.base_offsets[i])}: stored 0x{stored:08x}, "
        f"computed 0x{computed:08x}",
        file=file,
        position=base_position + pos,
    )


def iter_runs(magics: np.ndarray) -> Iterator[tuple[int, int, bool]]:
    """Split entries into runs of v2 batches and runs of legacy messages: (start, stop, is_v2)."""
    if len(magics) == 0:
        return
    is_v2 = magics >= MAGIC_V2
    boundaries = np.flatnonzero(is_v2[1:] != is_v2[:-1]) + 1
    starts = np.concatenate(([0], boundaries))
    stops = np.concatenate((boundaries, [len(magics)]))
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        yield a, b, bool(is_v2[a])
