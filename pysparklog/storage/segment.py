"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex`` (which Kafka
creates once a transaction is aborted in the segment, and pysparklog with the segment).

A segment object holds no open files and reads its indexes on demand, so opening a partition with
thousands of segments costs one directory listing. Positions past ``end`` (the acknowledged size
the caller passes in) are never read: bytes a writer is still appending stay invisible.

A segment owns its files (Kafka's ``LogSegment``): it reads them, appends batches and index entries,
rebuilds its indexes, flushes, renames and deletes them, all through the log directory's
:class:`~pysparklog.storage.io.FileSystemStorage`: a segment changes its files in place.
"""

from __future__ import annotations

import bisect
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.io import FileStat, FileSystemStorage, file_system_for
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.records.default_records import LOG_OVERHEAD, MAGIC_V2
from pysparklog.storage.records.memory_records import EntryTable, entry_crc_error, pool_empty, scan, verify_crcs
from pysparklog.storage.segment_indexes import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    IndexBuild,
    SegmentIndexes,
)

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# The .log goes last: a segment is listed by its .log, so it appears or vanishes whole.
SEGMENT_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)
OFFSET_DIGITS = 20
READ_CHUNK_BYTES = 8 * 1024 * 1024


def filename_prefix(offset: int) -> str:
    """Kafka's file name for a base offset: 20 digits, zero-padded."""
    return f"{offset:0{OFFSET_DIGITS}d}"


def parse_segment_name(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    """The base offset of a ``<20 digits><suffix>`` file name, or None for any other name."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != OFFSET_DIGITS or not stem.isdigit():
        return None
    return int(stem)


_LAST_OFFSET = 2**63 - 1  # looks up the last offset-index entry
_LAST_TIMESTAMP = 2**63 - 1  # looks up the last time-index entry: the segment's largest timestamp


class _Unconfirmed:
    """A scan whose time-index entry the log contradicts."""


_UNCONFIRMED = _Unconfirmed()


def _holds(entries: EntryTable, i: int, offset: int) -> bool:
    """Whether entry ``i`` holds ``offset``: a v2 batch from its base to its last offset, a legacy entry
    (whose base is its last offset, its inner offsets unknown without decompressing) up to its offset."""
    base = int(entries.base_offsets[i])
    return offset <= int(entries.last_offsets[i]) and (int(entries.magics[i]) < MAGIC_V2 or base <= offset)


def _entry_size(buf: np.ndarray) -> int:
    """The size of the entry at the start of ``buf``, from its size field (which does not count the
    offset and itself)."""
    return int.from_bytes(buf[8:LOG_OVERHEAD].tobytes(), "big", signed=True) + LOG_OVERHEAD


def misplaced_entry(entries: EntryTable, after: int, below: int | None) -> int:
    """The first entry whose offsets do not rise above the previous entry's (above ``after`` for the first)
    or reach ``below`` (None: no bound), or -1: such an entry cannot be in this place of the log."""
    first, last = entries.base_offsets, entries.last_offsets
    if not len(first):
        return -1
    previous = np.concatenate((np.array([after], dtype=np.int64), last[:-1]))
    wrong = (first <= previous) | (last < first)
    if below is not None:
        wrong |= last >= below
    found = np.flatnonzero(wrong)
    return int(found[0]) if len(found) else -1


@dataclass(frozen=True, slots=True)
class Chunk:
    """Complete entries read from a segment: ``buf`` starts at file position ``position``."""

    buf: np.ndarray
    position: int
    entries: EntryTable


class LogSegment:
    """The files of one segment.

    Args:
        directory: The partition directory, a path of ``storage``.
        base_offset: The segment's base offset (its file name).
        file_suffix: After each file's name: ``.swap`` for a segment being swapped in (Kafka's ``fileSuffix``).
        storage: The log directory's storage (default: the filesystem holding ``directory``).
    """

    def __init__(
        self, directory: str, base_offset: int, file_suffix: str = "", *, storage: FileSystemStorage | None = None
    ) -> None:
        self.storage = storage if storage is not None else file_system_for(directory)
        self.directory = directory
        self.base_offset = base_offset
        self.file_suffix = file_suffix
        prefix = f"{directory}/{filename_prefix(base_offset)}"
        self.log_path = prefix + LOG_SUFFIX + file_suffix
        self.indexes = SegmentIndexes(self.storage, prefix, base_offset, file_suffix)
        self.index_path = self.indexes.offset_path
        self.time_index_path = self.indexes.time_path
        self.txn_index_path = self.indexes.txn_path

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r})"

    @property
    def paths(self) -> tuple[str, str, str, str]:
        """The segment's files, the ``.log`` last (``SEGMENT_SUFFIXES``' order)."""
        return (self.index_path, self.time_index_path, self.txn_index_path, self.log_path)

    def _stat(self, path: str) -> FileStat:
        stat = self.storage.stat(path)
        if stat is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return stat

    def size(self) -> int:
        """The ``.log`` file's size.

        Raises:
            FileNotFoundError: The segment's ``.log`` is gone (retention or compaction retired it).
        """
        return self._stat(self.log_path).size

    def modified_ms(self) -> int:
        """The ``.log`` file's modification time (Kafka's ``LogSegment.lastModified``)."""
        return self._stat(self.log_path).modified_ms

    def created_ms(self) -> int:
        """When the ``.log`` file was last renamed or created: the start of ``segment.ms``'s wait."""
        return self._stat(self.log_path).changed_ms

    def file_size(self, path: str) -> int | None:
        """The size of one of the segment's files, None when it does not exist."""
        stat = self.storage.stat(path)
        return stat.size if stat is not None else None

    # -- writing ------------------------------------------------------------------------------

    def create(self) -> None:
        """Create the files of a new empty segment: its indexes, an empty ``.txnindex`` (pysparklog gives
        every segment one, see ``storage.log``), then its ``.log``, which makes it a segment."""
        for path in self.paths:
            self.storage.append(path, b"")

    def append(self, position: int, data: bytes | memoryview) -> None:
        """Write batches at ``position`` of the ``.log`` (the acknowledged end); a partial write is undone."""
        self.storage.write_at(self.log_path, position, data)

    def truncate(self, size: int) -> None:
        """Cut the ``.log`` to ``size`` bytes (recovery drops a torn or invalid tail)."""
        self.storage.truncate(self.log_path, size)

    def flush(self) -> None:
        """fsync the segment's files, its ``.txnindex`` too when it has entries (``LogSegment.flush``): an
        empty one holds nothing an fsync would keep, and one lost in a crash is rebuilt by its readers."""
        for path in (self.log_path, self.index_path, self.time_index_path):
            self.storage.sync(path)
        if self.file_size(self.txn_index_path):
            self.storage.sync(self.txn_index_path)

    def rename_files(self, to_suffix: str) -> None:
        """Give each of the segment's files that exists the suffix ``to_suffix`` in place of its own
        (Kafka's ``changeFileSuffixes``).

        A segment is live while its ``.log`` has the plain name, so that file goes last when a segment
        comes in (``to_suffix`` ""), and first when one goes out (Kafka renames the log first too): a
        crash in between leaves stray index files, which recovery removes, never a live ``.log``
        without its indexes.
        """
        paths = self.paths if to_suffix == "" else (self.log_path, *self.paths[:-1])
        for path in paths:
            if self.storage.stat(path) is not None:
                self.storage.rename(path, path[: len(path) - len(self.file_suffix)] + to_suffix)

    def delete_files(self) -> None:
        """Remove the segment's files, the ``.log`` first (see ``rename_files``)."""
        for path in (self.log_path, *self.paths[:-1]):
            self.storage.delete(path)

    def _chunks_from_index(
        self,
        offset: int,
        end: int,
        *,
        verify_crc: bool,
        max_bytes: int = READ_CHUNK_BYTES,
        offsets_below: int | None = None,
    ) -> Iterator[Chunk]:
        """``chunks`` from the offset-index entry at or below ``offset`` (from the start without one).

        The entry is checked as it is used: the entry at its position must be the batch holding its
        offset. When it is not (a damaged index: a position inside a batch, an offset of another
        segment), the index is marked unusable and the walk starts from the segment's start.
        """
        index = self.indexes.usable_offset_index(end)
        indexed, position = index.lookup(offset) if index is not None else (self.base_offset, 0)
        chunks = self.chunks(position, end, max_bytes=max_bytes, verify_crc=verify_crc, offsets_below=offsets_below)
        if position > 0:
            try:
                first = next(chunks, None)
            except CorruptRecordError:
                first = None
            if first is not None and _holds(first.entries, 0, indexed):
                yield first
            else:
                self.indexes.distrust_offset_index(end)
                chunks = self.chunks(0, end, max_bytes=max_bytes, verify_crc=verify_crc, offsets_below=offsets_below)
        yield from chunks

    # -- reading ------------------------------------------------------------------------------

    def read_bytes(self, position: int, size: int) -> np.ndarray:
        data = bytearray(size)
        got = self.storage.read_into(self.log_path, position, memoryview(data))
        return np.frombuffer(data, dtype=np.uint8)[:got]

    def chunks(
        self,
        start: int,
        end: int,
        *,
        max_bytes: int = READ_CHUNK_BYTES,
        verify_crc: bool = True,
        strict: bool = True,
        offsets_below: int | None = None,
    ) -> Iterator[Chunk]:
        """Complete entries from ``start`` up to ``end``, in chunks of about ``max_bytes``.

        A chunk never splits an entry; an entry larger than ``max_bytes`` comes alone. Bytes at
        ``end`` that do not form a whole entry are not returned (a torn or in-progress tail), nor
        is anything past the end of the file when it is shorter than ``end`` (a machine crash lost
        acknowledged bytes).

        Every pass either moves past the entries it returns or reads more bytes than the pass
        before, up to ``end``: the walk ends on any file.

        With ``offsets_below`` (the next segment's base offset, or the log end for the active one) every
        entry's offsets are checked to belong to this segment: at or above its base, below that bound and
        increasing. A segment file holding another segment's batches (a file copied or swapped in) is then
        an error rather than records at offsets that were never written.

        Raises:
            CorruptRecordError: A checksum or size field is wrong (when ``verify_crc``), or an entry's
                offsets do not belong to the segment, naming the file and position.
        """
        pos = start
        after = self.base_offset - 1  # the last offset before the walk: offsets must rise above it
        while pos < end:
            want = min(max(max_bytes, LOG_OVERHEAD), end - pos)  # enough to read an entry's size
            buf = pool_empty(want, np.uint8)
            got = self.storage.read_into(self.log_path, pos, buf.data)
            buf = buf[:got]
            entries = scan(buf, file=self.log_path, base_position=pos, strict=strict)
            if entries.corrupt and len(entries) == 0:
                return  # non-strict: the walk ends at the first invalid entry
            if len(entries) == 0:
                # Nothing whole in what was read. Only an entry larger than a full read, which
                # ends before ``end``, is read again, exactly: any other case is a tail.
                size = _entry_size(buf) if got >= LOG_OVERHEAD else 0
                if got < want or size <= got or size > end - pos:
                    return
                max_bytes = size
                continue
            if verify_crc:
                bad = entry_crc_error(buf, entries)
                if bad >= 0:
                    verify_crcs(buf, entries.select(slice(bad, bad + 1)), file=self.log_path, base_position=pos)
            if offsets_below is not None:
                bad = misplaced_entry(entries, after, offsets_below)
                if bad >= 0:
                    floor = after if bad == 0 else int(entries.last_offsets[bad - 1])
                    raise CorruptRecordError(
                        f"batch of offsets {int(entries.base_offsets[bad])}..{int(entries.last_offsets[bad])} "
                        f"does not belong to segment {self.base_offset}: its offsets must rise above "
                        f"{floor} and stay below {offsets_below}",
                        file=self.log_path,
                        position=pos + int(entries.positions[bad]),
                    )
                after = int(entries.last_offsets[-1])
            yield Chunk(buf, pos, entries)
            if entries.corrupt:
                return
            pos += entries.stop_position

    def translate_offset(self, target: int, end: int) -> tuple[int, int] | None:
        """(file position, last offset) of the first entry whose last offset is >= ``target``.

        Looks up the sparse index, then scans forward, like ``LogSegment.translateOffset``.
        Returns None when the segment holds no such entry below ``end``.
        """
        for chunk in self._chunks_from_index(target, end, max_bytes=64 * 1024, verify_crc=False):
            last = chunk.entries.last_offsets
            i = int(np.searchsorted(last, target, side="left"))
            if i < len(last):
                return chunk.position + int(chunk.entries.positions[i]), int(last[i])
        return None

    def end_offset(self, end: int) -> int:
        """One past the last offset of the entries below byte ``end``; the base offset when there are none.

        Walks from the last offset-index entry, as Kafka's ``readNextOffset`` does.
        """
        last = self.base_offset - 1
        for chunk in self._chunks_from_index(_LAST_OFFSET, end, verify_crc=False):
            last = int(chunk.entries.last_offsets[-1])
        return last + 1

    def largest_timestamp(self, end: int, offsets_below: int | None = None) -> tuple[int, int]:
        """(max timestamp, offset of the batch holding it) over the segment; (-1, base) when empty.

        Starts from the last time-index entry and scans only the batches after it (all of them when
        the entry proves wrong: its batch does not have its timestamp, or an earlier one has more).
        """
        ts, offset = self._time_entry(_LAST_TIMESTAMP)
        found = self._scan_by_time(ts, offset, _LAST_TIMESTAMP, self.base_offset, end, offsets_below)
        if found is _UNCONFIRMED:
            found = self._scan_by_time(-1, self.base_offset, _LAST_TIMESTAMP, self.base_offset, end, offsets_below)
        assert isinstance(found, tuple)
        return found

    def find_offset_by_timestamp(
        self, timestamp: int, start_offset: int, end: int, offsets_below: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= target and offset >= ``start_offset``.

        Kafka's algorithm: time index, then offset index, then the first batch whose max timestamp
        reaches the target, then its records. The time-index entry that lets the scan skip the batches
        before it is checked as the scan passes it; a scan that proves it wrong starts again from the
        segment's first batch at or past ``start_offset``.
        """
        ts, offset = self._time_entry(timestamp)
        found = self._scan_by_time(ts, offset, timestamp, start_offset, end, offsets_below)
        if found is _UNCONFIRMED:
            found = self._scan_by_time(-1, self.base_offset, timestamp, start_offset, end, offsets_below)
        assert not isinstance(found, _Unconfirmed)
        return found

    def _time_entry(self, timestamp: int) -> tuple[int, int]:
        """The time-index entry with the largest timestamp up to ``timestamp`` ((-1, base) without one)."""
        index = self.indexes.usable_time_index()
        return index.lookup(timestamp) if index is not None else (-1, self.base_offset)

    def _scan_by_time(
        self, entry_ts: int, entry_offset: int, target: int, start_offset: int, end: int, offsets_below: int | None
    ) -> tuple[int, int] | None | _Unconfirmed:
        """The scan of ``find_offset_by_timestamp`` (or of ``largest_timestamp``, with target
        ``_LAST_TIMESTAMP``) from the time-index entry (``entry_ts``, ``entry_offset``); -1: no entry.

        The entry says that every batch before the one holding its offset has a smaller max timestamp,
        and that this batch has exactly its timestamp (Kafka's time index: the max timestamp so far, at
        the batch that first reached it). The batches from the entry's offset-index position up to that
        batch are checked against it; ``_UNCONFIRMED`` when they contradict it, or the batch is not
        there, so that the caller scans without it.
        """
        largest = target == _LAST_TIMESTAMP
        skips = entry_ts >= 0 and entry_offset > start_offset  # the entry lets the scan skip batches
        best = (entry_ts, entry_offset) if skips else (-1, self.base_offset)  # a scan from the start finds it
        scan_from = entry_offset if skips else start_offset
        for chunk in self._chunks_from_index(scan_from, end, verify_crc=not largest, offsets_below=offsets_below):
            entries = chunk.entries
            # As lists: a chunk holds few batches per segment here, and list work costs less than numpy's calls.
            last: list[int] = entries.last_offsets.tolist()
            max_ts: list[int] = entries.max_timestamps.tolist()
            if skips:
                holding = bisect.bisect_left(last, entry_offset)
                if max(max_ts[:holding], default=-1) >= entry_ts or (
                    holding < len(last) and (max_ts[holding] != entry_ts or not _holds(entries, holding, entry_offset))
                ):
                    return _UNCONFIRMED
                skips = holding >= len(last)
            if largest:
                top = max(max_ts, default=-1)
                if top > best[0]:
                    best = (top, last[max_ts.index(top)])
                continue
            found = self._first_record_at(chunk, target, start_offset)
            if found is not None:
                return found
        if skips:
            return _UNCONFIRMED
        return best if largest else None

    def _first_record_at(self, chunk: Chunk, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the chunk's first record at or after ``timestamp`` and ``start_offset``."""
        reaching = np.flatnonzero(chunk.entries.max_timestamps >= timestamp)
        for i in reaching.tolist():
            for batch in decode_entries(
                chunk.buf,
                chunk.entries.select(slice(i, i + 1)),
                topic="",
                partition=0,
                file=self.log_path,
                base_position=chunk.position,
            ):
                offsets = batch.column("offset").to_numpy()
                stamps = batch.column("timestamp").cast("int64").to_numpy()
                hit = np.flatnonzero((stamps >= timestamp) & (offsets >= start_offset))
                if len(hit):
                    return int(offsets[hit[0]]), int(stamps[hit[0]])
        return None

    # -- recovery -----------------------------------------------------------------------------

    def rebuild_indexes(
        self, end: int, interval: int, offsets_below: int | None = None, acknowledged: tuple[int, int] | None = None
    ) -> tuple[IndexBuild, int]:
        """Walk the segment, validating every entry, and derive its index entries.

        Follows ``LogSegment.recover``: stops at the first entry that is incomplete, has a wrong
        checksum, or whose offsets do not fit the segment (below its base, not above the previous
        entry's, or at or past ``offsets_below``, the next segment's base).

        Args:
            acknowledged: (size, log end offset) of a state record found to describe this segment: a
                batch starting at that byte was written by an append from that log end, so one starting
                at another offset is not this partition's (another partition's ``.log`` copied over an
                emptier one) and is refused with everything after it.

        Returns:
            (the derived index state, the number of valid bytes)
        """
        build = IndexBuild(self.base_offset, interval)
        valid = 0
        after = self.base_offset - 1
        for chunk in self.chunks(0, end, verify_crc=False, strict=False):
            entries = chunk.entries
            bad = entry_crc_error(chunk.buf, entries)
            misplaced = misplaced_entry(entries, after, offsets_below)
            last = entries.last_offsets
            not_continuing = (
                ((chunk.position + entries.positions) == acknowledged[0]) & (entries.base_offsets != acknowledged[1])
                if acknowledged is not None
                else False
            )
            out_of_range = np.flatnonzero(
                (entries.base_offsets < self.base_offset)
                | (last - self.base_offset > 2**31 - 1)
                | (entries.last_offset_deltas < 0)
                | not_continuing
            )
            stop = min([len(entries)] + [i for i in (bad, misplaced) if i >= 0] + out_of_range[:1].tolist())
            if len(entries):
                after = int(last[-1])
            for pos, size, max_ts, last_offset in zip(
                entries.positions[:stop].tolist(),
                entries.sizes[:stop].tolist(),
                entries.max_timestamps[:stop].tolist(),
                last[:stop].tolist(),
                strict=True,
            ):
                build.add(chunk.position + pos, last_offset, max_ts)
                valid = chunk.position + pos + size
            if stop < len(entries):
                break
        return build, valid

    def indexes_intact(self, *, txn_index_required: bool = False) -> bool:
        """Whether the segment's indexes can be trusted for its ``.log`` as it is (``SegmentIndexes.intact``)."""
        return self.indexes.intact(self.size(), txn_index_required=txn_index_required)
