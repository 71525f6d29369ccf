"""A partition log: the segments of one ``<topic>-<partition>`` directory, appended to and read
by any number of processes at once.

Appends are serialised by an exclusive lock on the partition's ``pysparklog.state`` file, which
also holds the state of the last acknowledged append (a fixed 114-byte record, below). Readers
take the lock shared for a moment to read that record and never look past the acknowledged size,
so a batch being written is never seen half-written.

``pysparklog.state`` (pysparklog's own file; Kafka ignores it), big-endian::

    0  magic                  4 bytes  "PSLG"
    4  version                int16    2
    6  boot id                16 bytes the kernel boot id of the last writer's machine
    22 active segment base    int64
    30 active segment size    int64    acknowledged bytes of its .log
    38 log end offset         int64
    46 max timestamp          int64    of the active segment, -1 when none
    54 offset of max ts       int64
    62 log start offset       int64
    70 recovery point         int64    everything below is fsynced
    78 last flush time        int64    milliseconds
    86 segments generation    int64    bumped whenever segments are added, retired or swapped
    94 first unstable offset  int64    the first offset of the earliest open transaction, -1 when none
    102 txn indexes from      int64    every segment whose base is at or above it has a .txnindex; -1: unknown
    110 crc                   uint32   CRC-32C of bytes [0, 110)

Versions 0 and 1 (an older pysparklog) end at the segments generation and at the first unstable
offset, their CRCs at 94 and 102. They are still read: a version 0 record's first unstable offset
is then unknown, derived from the producer state until the next writer records it, and the next
writer of either rebuilds the active segment's indexes and records where ``.txnindex`` files start.

The first unstable offset is there so that readers know the last stable offset (where read_committed
reads stop) of every process's appends without replaying producer state: the writer derives it from
the producer state it keeps for idempotence, and only an append holding transactional or control
batches (or a roll, which snapshots that state) changes it. Aborted transactions go to the
``.txnindex`` of the segment holding their ABORT marker (``transaction_index``), written after the
marker and before the state record acknowledges it; recovery rebuilds the file from the log.

Kafka creates a ``.txnindex`` with its first entry, so a missing file means "nothing aborted here" or
"lost", which read_committed readers must tell apart: every segment pysparklog creates or recovers
gets one, empty until a transaction is aborted in it, and the state record says from which segment on
that holds ("txn indexes from"). A missing file there, or a damaged one anywhere, is rebuilt from the
segment's control batches and the producer state at its base before a read_committed answer uses it
(``PartitionLog._rebuild_transaction_indexes``). Below that segment (a broker's segments, an older
pysparklog's), a missing file means none, as in Kafka.

A writer that finds bytes past the acknowledged size (a writer died mid-append) validates them as
Kafka's recovery does and truncates at the first invalid batch. A boot id other than the machine's
means the machine restarted, so data not yet fsynced may be lost: the writer then runs Kafka's full
recovery from the recovery point.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import random
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from pysparklog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidLogDirectoryError,
    InvalidOffsetError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    PySparkLogError,
)
from pysparklog.storage import checkpoints
from pysparklog.storage.config import INT_MAX, LONG_MAX, LogConfig
from pysparklog.storage.index import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_ENTRY_SIZE,
    OffsetIndex,
    TimeIndex,
    TransactionIndex,
    max_entries,
)
from pysparklog.storage.locking import FileLock
from pysparklog.storage.producer_state import (
    NO_TXN_FIRST_OFFSET,
    OpenTransactions,
    ProducerEntry,
    ProducerStateTracker,
    apply_entry,
    apply_run,
    check_marker_epoch,
    check_sequence,
    next_sequence,
    replay_segment,
)
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches, decode_entries, encode_arrow
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from pysparklog.storage.records.memory_records import EntryTable, scan, verify_crcs
from pysparklog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    IndexBuild,
    LogSegment,
    filename_prefix,
    parse_segment_name,
)
from pysparklog.storage.transaction_index import (
    READ_UNCOMMITTED,
    AbortedBatches,
    AbortedTxn,
    collect_aborted,
    is_read_committed,
)

STATE_FILE = "pysparklog.state"
PRODUCER_COMPRESSION = "producer"  # compression.type: keep the producer's codec
SWAP_MARKER = "pysparklog.swap"  # present while a compaction swaps segments in
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# The .log goes last: a segment is listed by its .log, so it appears or vanishes whole.
SEGMENT_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)
ConfigSource = LogConfig | Callable[[], LogConfig]
PARTITION_LEADER_EPOCH = 0  # one leader forever: the log itself
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3

# The state record of the module docstring: magic, version, boot id, then int64 fields up to the segments
# generation (version 0), the first unstable offset (version 1) and where .txnindex files start (version 2);
# a CRC-32C follows each.
_STATE_V0 = struct.Struct(">4sh16sqqqqqqqqq")
_STATE_V1 = struct.Struct(">4sh16sqqqqqqqqqq")
_STATE = struct.Struct(">4sh16sqqqqqqqqqqq")
_STATE_MAGIC = b"PSLG"
_STATE_VERSION = 2
_STATE_LAYOUTS = {0: _STATE_V0, 1: _STATE_V1, _STATE_VERSION: _STATE}
#: The first unstable offset of a state record that does not hold it (version 0), or of a log without one.
UNKNOWN_FIRST_UNSTABLE_OFFSET = -2
#: Where ``.txnindex`` files start when no state record says it (before version 2, or a broker's log):
#: a missing file then means that nothing was aborted in the segment, as in Kafka.
UNKNOWN_TXN_INDEXES_FROM = -1
_MAX_VIEW_RETRIES = 20
_T = TypeVar("_T")
_log = logging.getLogger(__name__)
_TOPIC_PARTITION = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")


def _boot_id() -> bytes:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return bytes.fromhex(f.read().strip().replace("-", ""))
    except (OSError, ValueError):
        return bytes(16)


BOOT_ID = _boot_id()


def parse_partition_dir(directory: str) -> tuple[str, int]:
    """(topic, partition) from a ``<topic>-<partition>`` directory name.

    Raises:
        InvalidLogDirectoryError: The name is not of that form.
    """
    name = os.path.basename(os.path.normpath(directory))
    match = _TOPIC_PARTITION.match(name)
    if match is None:
        raise InvalidLogDirectoryError(
            f"{directory!r} is not a partition directory: expected '<topic>-<partition>' with a topic of "
            "[a-zA-Z0-9._-] characters and a partition number"
        )
    return match["topic"], int(match["partition"])


@dataclass(frozen=True, slots=True)
class LogState:
    """What the last acknowledged append left behind (the ``pysparklog.state`` record)."""

    active_base: int
    active_size: int
    log_end_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_start_offset: int
    recovery_point: int
    last_flush_ms: int
    segments_generation: int = 0
    boot_id: bytes = BOOT_ID
    first_unstable_offset: int = NO_TXN_FIRST_OFFSET  # UNKNOWN_FIRST_UNSTABLE_OFFSET from a version 0 record
    txn_indexes_from: int = UNKNOWN_TXN_INDEXES_FROM  # every segment from this base on has a .txnindex

    def encode(self) -> bytes:
        body = _STATE.pack(
            _STATE_MAGIC,
            _STATE_VERSION,
            self.boot_id,
            self.active_base,
            self.active_size,
            self.log_end_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.log_start_offset,
            self.recovery_point,
            self.last_flush_ms,
            self.segments_generation,
            self.first_unstable_offset,
            self.txn_indexes_from,
        )
        return body + struct.pack(">I", _crc32c.crc32c(body))

    @classmethod
    def decode(cls, data: bytes) -> LogState | None:
        """The state, or None when the record is absent, torn or of an unknown version."""
        layout = _STATE_LAYOUTS.get(struct.unpack_from(">h", data, 4)[0]) if len(data) >= 6 else None
        if layout is None or len(data) < layout.size + 4:
            return None
        body = data[: layout.size]
        if struct.unpack_from(">I", data, layout.size)[0] != _crc32c.crc32c(body):
            return None
        magic, version, boot, *values = layout.unpack(body)
        if magic != _STATE_MAGIC:
            return None
        if version == 0:
            values.append(UNKNOWN_FIRST_UNSTABLE_OFFSET)
        if version <= 1:
            values.append(UNKNOWN_TXN_INDEXES_FROM)
        (
            active_base,
            active_size,
            end,
            max_ts,
            offset_of_max_ts,
            log_start,
            recovery_point,
            flushed,
            generation,
            first_unstable,
            txn_indexes_from,
        ) = values
        return cls(
            active_base,
            active_size,
            end,
            max_ts,
            offset_of_max_ts,
            log_start,
            recovery_point,
            flushed,
            generation,
            boot,
            first_unstable,
            txn_indexes_from,
        )


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


@dataclass(frozen=True, slots=True)
class LogView:
    """A consistent view for readers: the segments and how far each may be read.

    ``first_unstable_offset`` is the first offset of the earliest open transaction (-1 when none is
    open, ``UNKNOWN_FIRST_UNSTABLE_OFFSET`` when no state record holds it: a broker's log);
    ``txn_indexes_from`` the base from which every segment has a ``.txnindex`` (``LogState``).
    """

    segment_bases: tuple[int, ...]
    active_size: int
    log_start_offset: int
    log_end_offset: int
    first_unstable_offset: int
    txn_indexes_from: int = UNKNOWN_TXN_INDEXES_FROM

    def end_of(self, base: int, segment: LogSegment) -> int:
        return self.active_size if base == self.segment_bases[-1] else segment.size()

    def offsets_below(self, base: int) -> int:
        """The bound of the offsets the segment at ``base`` may hold: the next segment's base, or the log end."""
        i = bisect.bisect_right(self.segment_bases, base)
        return self.segment_bases[i] if i < len(self.segment_bases) else self.log_end_offset


@dataclass(slots=True)
class _ActiveSegment:
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


@dataclass(frozen=True, slots=True)
class _Batches:
    """Complete batches to append: ``entries`` found in ``buf``."""

    buf: np.ndarray
    entries: EntryTable


def _joined(pieces: Sequence[_Batches]) -> _Batches:
    """The batches of ``pieces`` in one buffer (the producer-state check walks one)."""
    if len(pieces) == 1:
        return pieces[0]
    buf = np.concatenate([piece.buf for piece in pieces])
    return _Batches(buf, scan(buf))


@dataclass(slots=True)
class _ProducerCache:
    """The producers' state as of one acknowledged log end, kept between idempotent appends."""

    producers: dict[int, ProducerEntry]
    active_base: int
    active_size: int
    log_end_offset: int
    open_txns: OpenTransactions


@dataclass(slots=True)
class _ProducerCheck:
    """An idempotent append checked against the producers' state: which batches are new, where each
    batch is (or already was) in the log, and the producers' state once the new ones are appended.

    ``aborted`` holds the ``.txnindex`` entries of the transactions the append aborts, in log order,
    and ``open_txns`` the open transactions after it; None when it has no transactional or control
    batch, which leaves them as they were.
    """

    keep: np.ndarray
    first_offsets: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    updated: dict[int, ProducerEntry]
    aborted: list[AbortedTxn] = field(default_factory=list)
    open_txns: OpenTransactions | None = None


class PartitionLog:
    """One partition's log directory.

    Args:
        directory: The ``<topic>-<partition>`` directory (created on the first append).
        config: Segment, index and flush settings.
        checkpoint_dir: The log directory holding ``recovery-point-offset-checkpoint`` and
            ``log-start-offset-checkpoint`` (default: the parent of ``directory``).

    Raises:
        InvalidLogDirectoryError: ``directory`` is not named ``<topic>-<partition>``.
    """

    def __init__(
        self, directory: str, config: ConfigSource | None = None, *, checkpoint_dir: str | None = None
    ) -> None:
        self.directory = os.path.abspath(directory)
        self.topic, self.partition = parse_partition_dir(self.directory)
        self._config_source: ConfigSource = config or LogConfig()
        self._config = self.config
        self.checkpoint_dir = checkpoint_dir or os.path.dirname(self.directory)
        self._lock = FileLock(os.path.join(self.directory, STATE_FILE))
        self._segments: dict[int, LogSegment] = {}
        self._bases: list[int] = []
        self._listed_generation = -1  # the state's segments generation when ``_bases`` was listed
        self._active: _ActiveSegment | None = None
        self._producers = ProducerStateTracker(self.directory)
        self._producer_cache: _ProducerCache | None = None
        # The first unstable offset derived for a view whose state record does not hold it.
        self._derived_unstable: tuple[tuple[tuple[int, ...], int, int], int] | None = None
        self._write_mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"PartitionLog({self.directory!r})"

    @property
    def config(self) -> LogConfig:
        """The settings in force now: a callable source is asked again, so topic config changes made
        by other processes reach this log at its next append or maintenance pass."""
        source = self._config_source
        return source() if callable(source) else source

    def close(self) -> None:
        self._lock.close()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- segments -----------------------------------------------------------------------------

    def segment(self, base: int) -> LogSegment:
        seg = self._segments.get(base)
        if seg is None:
            seg = self._segments[base] = LogSegment(self.directory, base)
        return seg

    def _list_segments(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        bases = sorted(b for b in (parse_segment_name(n) for n in names) if b is not None)
        self._bases = bases
        return bases

    # -- state record -------------------------------------------------------------------------

    def _read_state(self, fd: int) -> LogState | None:
        return LogState.decode(os.pread(fd, _STATE.size + 4, 0))

    def _write_state(self, fd: int, state: LogState) -> None:
        os.pwrite(fd, state.encode(), 0)

    # -- reading ------------------------------------------------------------------------------

    def view(self) -> LogView:
        """The acknowledged extent of the log, read consistently with concurrent writers."""
        self._finish_swap()
        with self._lock.shared() as fd:
            return self._locked_view(fd)

    def _finish_swap(self) -> None:
        """Finish a segment swap that a process died in (its marker is there) before reading."""
        if os.path.exists(os.path.join(self.directory, SWAP_MARKER)):
            with self._write_mutex, self._lock.exclusive() as fd:
                self._complete_pending_swap(fd)

    def _locked_view(self, fd: int | None) -> LogView:
        """``view()`` for a caller holding the state record's lock shared (``fd``: its file, None without one)."""
        state = self._read_state(fd) if fd is not None else None
        if state is not None:
            cached = self._bases and self._listed_generation == state.segments_generation
            bases = self._bases if cached else self._list_segments()
            self._listed_generation = state.segments_generation
            if bases and bases[-1] == state.active_base:
                log_start = max(state.log_start_offset, bases[0])
                return LogView(
                    tuple(bases),
                    state.active_size,
                    log_start,
                    state.log_end_offset,
                    state.first_unstable_offset,
                    state.txn_indexes_from,
                )
        # Written by a broker or never appended to by pysparklog: derive the view from the files.
        return self._view_from_files()

    def _view_from_files(self) -> LogView:
        bases = self._list_segments()
        if not bases:
            return LogView((), 0, 0, 0, NO_TXN_FIRST_OFFSET)
        last = self.segment(bases[-1])
        size = last.size()
        end_offset = last.end_offset(size)
        start = self._checkpointed_log_start(bases[0])
        return LogView(tuple(bases), size, start, end_offset, UNKNOWN_FIRST_UNSTABLE_OFFSET)

    def _checkpointed_log_start(self, first_base: int) -> int:
        path = os.path.join(self.checkpoint_dir, checkpoints.LOG_START_OFFSET_CHECKPOINT)
        try:
            recorded = checkpoints.read_offset_checkpoint(path).get((self.topic, self.partition))
        except CorruptRecordError:
            recorded = None
        return max(first_base, recorded) if recorded is not None else first_base

    @property
    def log_start_offset(self) -> int:
        return self.view().log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.view().log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's last stable offset, where read_committed reads stop: the first offset of the earliest
        transaction still open (never below the log start offset), else the log end offset (the high
        watermark here). Every process's appends count; it costs what ``view()`` costs."""
        return self._last_stable(self.view())

    def _last_stable(self, view: LogView) -> int:
        unstable = view.first_unstable_offset
        if unstable == UNKNOWN_FIRST_UNSTABLE_OFFSET:
            unstable = self._derived_first_unstable(view)
        if unstable < 0:
            return view.log_end_offset
        return min(max(unstable, view.log_start_offset), view.log_end_offset)

    def _derived_first_unstable(self, view: LogView) -> int:
        """The first unstable offset of a view whose state record does not hold it (a broker's log, or
        an older pysparklog's): from the last producer snapshot and a replay, once per extent of the log."""
        key = (view.segment_bases, view.active_size, view.log_end_offset)
        if self._derived_unstable is None or self._derived_unstable[0] != key:
            bases = list(view.segment_bases)
            producers = self._producers.load(bases, bases[-1], view.active_size, view.log_end_offset) if bases else {}
            self._derived_unstable = (key, OpenTransactions.of(producers).first_unstable_offset())
        return self._derived_unstable[1]

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [``start_offset``, ``end_offset``), what a broker
        returns with a read_committed fetch of that range, for readers that skip aborted records
        themselves (``read_arrow`` with ``isolation_level="read_committed"`` does).

        Raises:
            InvalidOffsetError: An offset is not an integer.
        """
        start_offset = _integer_argument("start_offset", start_offset, "an offset (integer)")
        end_offset = _integer_argument("end_offset", end_offset, "an offset (integer)")

        def collect(fd: int | None) -> tuple[list[AbortedTxn], list[int]]:
            view = self._locked_view(fd)
            return self._aborted_in(view, start_offset, min(end_offset, view.log_end_offset))

        return self._with_transaction_indexes(collect)

    def _aborted_in(self, view: LogView, start: int, upper: int) -> tuple[list[AbortedTxn], list[int]]:
        """Kafka's ``collectAbortedTransactions`` over the ``.txnindex`` files of ``view``, from the
        segment holding ``start`` on until an entry proves later ones cannot overlap.

        A transaction's entry sits in the segment of its marker, which may come after the range. The
        caller holds the state record's lock shared, so no segment of the view is retired or swapped
        while its file is read.

        Returns:
            The aborted transactions, and the bases of the segments searched whose ``.txnindex`` is lost
            or damaged (``_checked_txn_index``): the transactions are incomplete until those are rebuilt.
        """
        found: list[AbortedTxn] = []
        damaged: list[int] = []
        if upper <= start or not view.segment_bases:
            return found, damaged
        for i in range(self._segment_for(view, start), len(view.segment_bases)):
            index = self._checked_txn_index(view, i)
            if index is None:
                damaged.append(view.segment_bases[i])
            elif collect_aborted(index, start, upper, view.log_end_offset, found):
                break
        return found, damaged

    def transaction_index(self, base: int) -> TransactionIndex:
        """The ``.txnindex`` entries of segment ``base``, rebuilt first when lost or damaged.

        Raises:
            InvalidOffsetError: The partition has no segment at ``base`` (retention retired it).
        """

        def read(fd: int | None) -> tuple[TransactionIndex | None, list[int]]:
            view = self._locked_view(fd)
            if base not in view.segment_bases:
                raise InvalidOffsetError(f"{self.topic}-{self.partition} has no segment at offset {base}")
            index = self._checked_txn_index(view, view.segment_bases.index(base))
            return index, [] if index is not None else [base]

        index = self._with_transaction_indexes(read)
        assert index is not None
        return index

    def _checked_txn_index(self, view: LogView, i: int) -> TransactionIndex | None:
        """The ``.txnindex`` of segment ``i`` of ``view``, None when it must be rebuilt: lost (the segment
        is at or past where the state record says every segment has one) or damaged."""
        base = view.segment_bases[i]
        required = 0 <= view.txn_indexes_from <= base
        end_offset = view.segment_bases[i + 1] if i + 1 < len(view.segment_bases) else None
        return self.segment(base).checked_transaction_index(required=required, end_offset=end_offset)

    def _with_transaction_indexes(self, read: Callable[[int | None], tuple[_T, list[int]]]) -> _T:
        """``read(fd)`` under the state record's lock held shared; when it found ``.txnindex`` files lost
        or damaged (the bases it returns), they are rebuilt under the write lock and it runs again."""
        for _attempt in range(_MAX_VIEW_RETRIES):
            self._finish_swap()
            with self._lock.shared() as fd:
                result, damaged = read(fd)
            if not damaged:
                return result
            self._rebuild_transaction_indexes(damaged)
        raise CorruptRecordError(f"the .txnindex files of {self.directory} could not be rebuilt")

    def _rebuild_transaction_indexes(self, bases: Sequence[int]) -> None:
        """Rebuild the ``.txnindex`` of each segment of ``bases`` that is still lost or damaged, as
        recovery does: the producer state at the segment's base (from the last snapshot, replayed
        forward) replayed through its batches gives each aborted transaction's entry. Under the write
        lock, so that no append, roll, retention or compaction runs meanwhile."""
        with self._write_mutex, self._lock.exclusive() as fd:
            view = self._locked_view(fd)
            segment_bases = list(view.segment_bases)
            for i, base in enumerate(segment_bases):
                if base not in bases or self._checked_txn_index(view, i) is not None:
                    continue
                segment = self.segment(base)
                producers = self._producers.load(segment_bases, segment_bases[-1], view.active_size, base)
                open_txns = OpenTransactions.of(producers)
                end = view.end_of(base, segment)
                segment.write_txn_index(replay_segment(producers, segment, 0, end, 0, LONG_MAX, open_txns))

    def segments(self) -> list[LogSegment]:
        return [self.segment(b) for b in self.view().segment_bases]

    def _segment_for(self, view: LogView, offset: int) -> int:
        i = bisect.bisect_right(view.segment_bases, offset) - 1
        return max(i, 0)

    def _check_range(self, view: LogView, offset: int) -> None:
        if not view.log_start_offset <= offset <= view.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside {self.topic}-{self.partition}'s range "
                f"[{view.log_start_offset}, {view.log_end_offset}] (log start offset, log end offset)"
            )

    def read_arrow(
        self,
        start_offset: int | None = None,
        end_offset: int | None = None,
        *,
        include_headers: bool = False,
        max_chunk_bytes: int = 8 * 1024 * 1024,
        isolation_level: str = READ_UNCOMMITTED,
    ) -> Iterator[pa.RecordBatch]:
        """Records from ``start_offset`` (default: the log start) up to ``end_offset`` (exclusive;
        default: the log end when the read starts), as Arrow batches with Spark's Kafka columns.

        Memory stays bounded by ``max_chunk_bytes`` of file data per batch (plus one record batch
        larger than that, when there is one). Control records are skipped, as a consumer does.

        ``isolation_level`` is Kafka's consumer setting. ``"read_committed"`` reads what such a
        consumer gets: up to the last stable offset at most, without the records of aborted
        transactions (the batches the aborted transactions overlapping the range cover, found from
        the ``.txnindex`` files as a broker's fetch finds them, are dropped before decoding).

        The arguments are checked when this is called, the offsets against the log when the first
        batch is asked for.

        Raises:
            OffsetOutOfRangeError: ``start_offset`` is below the log start or above the log end.
            InvalidOffsetError: An offset is not an integer, or ``end_offset`` is below ``start_offset``.
            CorruptRecordError: A checksum or record is invalid; the error names file and position.
            InvalidConfigError: ``isolation_level`` is neither ``"read_uncommitted"`` nor ``"read_committed"``,
                ``max_chunk_bytes`` is not an integer from 1 to 2147483647, or ``include_headers`` not a bool.
        """
        committed = is_read_committed(isolation_level)
        start_offset = _optional_offset("start_offset", start_offset, "None (the log start)")
        end_offset = _optional_offset("end_offset", end_offset, "None (the log end)")
        if not isinstance(include_headers, bool):
            raise InvalidConfigError(f"include_headers {include_headers!r} is not valid; accepted: True or False")
        max_chunk_bytes = _integer_argument(
            "max_chunk_bytes", max_chunk_bytes, f"an integer from 1 to {INT_MAX}", InvalidConfigError
        )
        if not 1 <= max_chunk_bytes <= INT_MAX:
            raise InvalidConfigError(f"max_chunk_bytes {max_chunk_bytes} is not valid; accepted: 1 to {INT_MAX}")
        return self._read_arrow(start_offset, end_offset, include_headers, max_chunk_bytes, committed)

    def _read_arrow(
        self,
        start_offset: int | None,
        end_offset: int | None,
        include_headers: bool,
        max_chunk_bytes: int,
        committed: bool,
    ) -> Iterator[pa.RecordBatch]:
        """``read_arrow`` once its arguments are checked."""

        def plan(fd: int | None) -> tuple[tuple[LogView, int, int, AbortedBatches | None], list[int]]:
            view = self._locked_view(fd)
            start = view.log_start_offset if start_offset is None else start_offset
            self._check_range(view, start)
            end = view.log_end_offset if end_offset is None else min(end_offset, view.log_end_offset)
            if end_offset is not None and end_offset < start:
                raise InvalidOffsetError(f"end offset {end_offset} is below start offset {start}")
            if not committed:
                return (view, start, end, None), []
            end = min(end, self._last_stable(view))
            txns, damaged = self._aborted_in(view, start, end)
            return (view, start, end, AbortedBatches(txns) if txns else None), damaged

        view, start, end, aborted = self._with_transaction_indexes(plan)
        position = start
        if position >= end:
            return
        for _attempt in range(_MAX_VIEW_RETRIES):
            try:
                for batch in self._read_view(view, position, end, include_headers, max_chunk_bytes, aborted):
                    position = int(batch.column("offset")[-1].as_py()) + 1
                    yield batch
                return
            except FileNotFoundError:
                # Retention or compaction replaced segments under this reader: look again.
                self._bases = []
                view = self.view()
                if position < view.log_start_offset:
                    raise OffsetOutOfRangeError(
                        f"offset {position} of {self.topic}-{self.partition} was deleted while it was being read; "
                        f"the log now starts at {view.log_start_offset}"
                    ) from None
        raise CorruptRecordError(f"the segments of {self.directory} keep disappearing under the reader")

    def _read_view(
        self,
        view: LogView,
        start: int,
        end: int,
        include_headers: bool,
        max_chunk_bytes: int,
        aborted: AbortedBatches | None,
    ) -> Iterator[pa.RecordBatch]:
        first = self._segment_for(view, start)
        for base in view.segment_bases[first:]:
            if base >= end:
                return
            segment = self.segment(base)
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
                    topic=self.topic,
                    partition=self.partition,
                    include_headers=include_headers,
                    file=segment.log_path,
                    base_position=chunk.position,
                ):
                    offsets = batch.column("offset").to_numpy()
                    lo = int(np.searchsorted(offsets, start, side="left"))
                    hi = int(np.searchsorted(offsets, end, side="left"))
                    if hi > lo:
                        yield batch.slice(lo, hi - lo)
                    if hi < len(offsets):
                        return
                if len(entries) and int(entries.last_offsets[-1]) >= end - 1:
                    return

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """Kafka's ListOffsets for one partition: (offset, timestamp), or None when nothing qualifies.

        ``-2`` is the log start offset, ``-1`` the log end offset, ``-3`` the offset of the batch with
        the largest timestamp; any other value finds the first record whose timestamp is at least it,
        in the first segment whose largest timestamp reaches it, as Kafka searches: a segment without
        record timestamps (an empty one, as compaction can leave) counts its file's modification time,
        and when the segment found holds no such record there is no answer.

        Raises:
            InvalidOffsetError: ``timestamp`` is not an integer, or negative other than -1, -2 and -3.
        """
        timestamp = _integer_argument("timestamp", timestamp, _TIMESTAMP_ARGUMENTS)
        view = self.view()
        if timestamp == EARLIEST_TIMESTAMP:
            return view.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return view.log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            best: tuple[int, int] | None = None
            for base in view.segment_bases:
                seg = self.segment(base)
                ts, offset = seg.largest_timestamp(view.end_of(base, seg), view.offsets_below(base))
                if ts >= 0 and (best is None or ts > best[1]):
                    best = (offset, ts)
            return best
        if timestamp < 0:
            raise InvalidOffsetError(f"timestamp {timestamp} is not valid; accepted: {_TIMESTAMP_ARGUMENTS}")
        # Kafka's UnifiedLog.fetchOffsetByTimestamp: the first segment whose largest timestamp reaches the
        # target answers, even with none; a segment without a record timestamp (empty, as compaction may
        # leave one) counts its file's modification time (LogSegment.largestTimestamp).
        for base in view.segment_bases:
            seg = self.segment(base)
            end = view.end_of(base, seg)
            largest = seg.largest_timestamp(end, view.offsets_below(base))[0]
            if largest < 0:
                if len(seg.time_index()):
                    continue  # the records its time index describes are gone: damage, not an emptied segment
                largest = int(os.path.getmtime(seg.log_path) * 1000)
            if largest >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, view.log_start_offset, end, view.offsets_below(base))
        return None

    # -- writing ------------------------------------------------------------------------------

    def append_arrow(self, data: pa.Table | pa.RecordBatch, settings: BatchSettings | None = None) -> AppendInfo:
        """Encode Arrow rows (``value``, optional ``key``, ``timestamp``, ``headers``) and append them.

        One call is one append, whatever the table's chunks: everything is encoded and checked first,
        then written under one hold of the lock, so its offsets are contiguous and nothing is written
        when a check fails.

        Returns:
            The offsets of everything appended by this call.

        Raises:
            InvalidConfigError: ``data`` is not an Arrow table or record batch, ``settings`` not a
                ``BatchSettings``, a column is missing or of a type the encoder does not take, or a batch
                is larger than ``max.message.bytes``.
        """
        if not isinstance(data, pa.Table | pa.RecordBatch):
            raise InvalidConfigError(f"cannot append {type(data).__name__}; accepted: a pyarrow Table or RecordBatch")
        if settings is not None and not isinstance(settings, BatchSettings):
            raise InvalidConfigError(f"settings {settings!r} is not valid; accepted: a BatchSettings or None")
        return self._append_all([self._checked(encoded) for encoded in encode_arrow(data, settings)])

    def append(self, batches: EncodedBatches | bytes | bytearray | memoryview) -> AppendInfo:
        """Append complete v2 record batches, assigning offsets from the log end as a broker does.

        The batches are acknowledged when this returns: written to the segment (and fsynced when
        the flush policy says so) with the state record updated, so every reader sees them.

        Batches of an idempotent producer (producer id and base sequence set) are checked as a
        broker checks them: a batch repeating one of the producer's last five batches (same epoch
        and sequences) is not written again and the offsets it was first given are returned, so a
        producer that retries an append it could not see acknowledged never duplicates records.

        Returns:
            The offsets the batches hold: ``first_offset`` of the first batch to ``last_offset`` of
            the last (a retried batch keeps its original offsets).

        Raises:
            CorruptRecordError: A batch's checksum is wrong or it is not a complete v2 batch.
            InvalidConfigError: A batch is larger than ``max.message.bytes``, or ``batches`` is not bytes.
            OutOfOrderSequenceError: An idempotent batch does not follow its producer's last batch.
            ProducerFencedError: An idempotent batch comes from an older epoch of its producer.
        """
        return self._append_all([self._checked(batches)])

    def _checked(self, batches: EncodedBatches | bytes | bytearray | memoryview) -> _Batches:
        """The batches of one piece of an append, checked as far as they can be without the lock."""
        if isinstance(batches, EncodedBatches):
            buf = batches.data
            entries = scan(buf)
        elif isinstance(batches, bytes | bytearray | memoryview):
            buf = np.frombuffer(bytearray(batches), dtype=np.uint8)
            entries = scan(buf, file="<append>")
            verify_crcs(buf, entries, file="<append>")
        else:
            raise InvalidConfigError(
                f"cannot append {type(batches).__name__}; accepted: EncodedBatches, bytes, bytearray or memoryview"
            )
        if entries.incomplete_tail or entries.stop_position != len(buf):
            raise CorruptRecordError(
                "appended bytes end inside a record batch", file="<append>", position=entries.stop_position
            )
        if (entries.magics != 2).any():
            raise CorruptRecordError("only magic 2 record batches can be appended", file="<append>")
        too_large = np.flatnonzero(entries.sizes > self.config.max_message_bytes)
        if len(too_large):
            raise InvalidConfigError(
                f"record batch of {int(entries.sizes[too_large[0]])} bytes exceeds max.message.bytes "
                f"({self.config.max_message_bytes})"
            )
        return _Batches(buf, entries)

    def _append_all(self, pieces: Sequence[_Batches]) -> AppendInfo:
        """Append checked pieces as one append: under one hold of the lock, in order, contiguous."""
        pieces = [piece for piece in pieces if len(piece.entries)]
        if not pieces:
            end = self.log_end_offset
            return AppendInfo(end, end - 1, 0, -1, -1)
        os.makedirs(self.directory, exist_ok=True)
        with self._write_mutex, self._lock.exclusive() as fd:
            active = self._sync_for_write(fd)
            if any(piece.entries.has_producers for piece in pieces):
                return self._append_producer_batches(fd, active, _joined(pieces))
            for piece in pieces:
                self._check_timestamps(piece.buf, piece.entries)
            return self._append_locked(fd, active, [self._maybe_recompressed(piece) for piece in pieces])

    def _append_producer_batches(self, fd: int, active: _ActiveSegment, piece: _Batches) -> AppendInfo:
        """Append batches some of which carry a producer id, checked against the producers' state."""
        check = self._check_producers(active, piece.buf, piece.entries)
        if not check.keep.all():
            piece = _Batches(piece.buf, piece.entries.select(check.keep))
        self._check_timestamps(piece.buf, piece.entries)
        piece = self._maybe_recompressed(piece)
        info = self._append_locked(fd, active, [piece], check.aborted, check.open_txns) if len(piece.entries) else None
        self._remember_producers(check)
        repeated = check.max_timestamps[~check.keep]
        return AppendInfo(
            int(check.first_offsets[0]),
            int(check.last_offsets[-1]),
            int((check.last_offsets - check.first_offsets + 1).sum()),
            info.log_append_time_ms if info is not None else -1,
            max(info.max_timestamp if info is not None else -1, int(repeated.max()) if len(repeated) else -1),
        )

    # -- idempotent producers -----------------------------------------------------------------

    def _producer_state(self, active: _ActiveSegment) -> _ProducerCache:
        """The producers as of the acknowledged log end: the cached state, brought forward over what
        other processes appended since, or rebuilt from the last snapshot when the log moved under it
        (a roll, a truncation). Runs under the write lock."""
        state = active.state
        cache = self._producer_cache
        if (
            cache is not None
            and cache.active_base == state.active_base
            and cache.active_size <= state.active_size
            and cache.log_end_offset <= state.log_end_offset
        ):
            replay_segment(
                cache.producers,
                active.segment,
                cache.active_size,
                state.active_size,
                cache.log_end_offset,
                state.log_end_offset,
                cache.open_txns,
            )
        else:
            bases = self._list_segments()
            producers, replayed_from = self._producers.load_replayed(
                bases, state.active_base, state.active_size, state.log_end_offset, remove_unreadable=True
            )
            if state.log_end_offset - replayed_from >= SNAPSHOT_AFTER_REPLAY:
                # The next process would replay it all again (every Spark task has a new producer): keep it.
                self._producers.write_snapshot(state.log_end_offset, producers, bases)
            cache = self._producer_cache = _ProducerCache(producers, 0, 0, 0, OpenTransactions.of(producers))
        cache.active_base, cache.active_size, cache.log_end_offset = (
            state.active_base,
            state.active_size,
            state.log_end_offset,
        )
        return cache

    def _check_producers(self, active: _ActiveSegment, buf: np.ndarray, entries: EntryTable) -> _ProducerCheck:
        """Kafka's producer-state validation of an append: drop duplicates, refuse gaps and fenced epochs.

        Transactional and control batches also move the producers' open transactions, and an ABORT
        marker closing a transaction yields its ``.txnindex`` entry, as Kafka's append derives them
        (the last stable offset as of each marker, as Kafka's recovery does batch by batch).
        """
        cache = self._producer_state(active)
        producers = cache.producers
        if _is_one_producer_run(entries):
            check = _check_run(producers, cache.open_txns, active.state.log_end_offset, entries)
            if check is not None:
                return check
        updated: dict[int, ProducerEntry] = {}
        n = len(entries)
        keep = np.ones(n, dtype=bool)
        first_offsets = np.empty(n, dtype=np.int64)
        last_offsets = np.empty(n, dtype=np.int64)
        max_timestamps = entries.max_timestamps.copy()
        next_offset = active.state.log_end_offset
        is_control = entries.is_control
        followed = entries.is_transactional | is_control
        open_txns: OpenTransactions | None = None
        aborted: list[AbortedTxn] = []
        for i, row in enumerate(entries.rows):
            pid, epoch, delta = int(row[k.E_PRODUCER_ID]), int(row[k.E_PRODUCER_EPOCH]), int(row[k.E_LAST_OFFSET_DELTA])
            first_sequence = int(row[k.E_BASE_SEQUENCE])
            if pid >= 0 and first_sequence >= 0 and not is_control[i]:
                entry = updated.get(pid) or producers.get(pid)
                last_sequence = next_sequence(first_sequence, delta)
                duplicate = entry.duplicate_of(epoch, first_sequence, last_sequence) if entry else None
                if duplicate is not None:
                    keep[i] = False
                    first_offsets[i], last_offsets[i] = duplicate.first_offset, duplicate.last_offset
                    max_timestamps[i] = duplicate.timestamp
                    continue
                check_sequence(entry, pid, epoch, first_sequence)
            elif pid >= 0 and is_control[i]:
                check_marker_epoch(updated.get(pid) or producers.get(pid), pid, epoch)
            first_offsets[i], last_offsets[i] = next_offset, next_offset + delta
            next_offset += delta + 1
            if pid >= 0:
                if pid not in updated and pid in producers:
                    updated[pid] = producers[pid].copy()
                completed = apply_entry(updated, buf, entries, i, int(last_offsets[i]))
                if followed[i]:
                    if open_txns is None:
                        open_txns = cache.open_txns.copy()
                    txn = open_txns.follow(updated[pid], completed)
                    if txn is not None:
                        aborted.append(txn)
        return _ProducerCheck(keep, first_offsets, last_offsets, max_timestamps, updated, aborted, open_txns)

    def _remember_producers(self, check: _ProducerCheck) -> None:
        """Fold an append's producer updates into the cache, now at the log end the append left."""
        cache, active = self._producer_cache, self._active
        assert cache is not None and active is not None
        cache.producers.update(check.updated)
        if check.open_txns is not None:
            cache.open_txns = check.open_txns
        cache.active_base, cache.active_size, cache.log_end_offset = (
            active.state.active_base,
            active.state.active_size,
            active.state.log_end_offset,
        )

    def _check_timestamps(self, buf: np.ndarray, entries: EntryTable) -> None:
        """Kafka's ``message.timestamp.before.max.ms`` / ``after.max.ms``: refuse records whose
        CreateTime is too far from now; nothing of the append is written then."""
        cfg = self._config
        before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
        if cfg.message_timestamp_type != TimestampType.CREATE_TIME or (before == LONG_MAX and after == LONG_MAX):
            return
        now = int(time.time() * 1000)
        low, high = now - before, now + min(after, LONG_MAX - now)
        for batch in decode_entries(buf, entries.select(~entries.is_control), topic=self.topic, partition=0):
            stamps = batch.column("timestamp").cast(pa.int64()).to_numpy()
            bad = np.flatnonzero((stamps < low) | (stamps > high))
            if len(bad):
                raise InvalidTimestampError(
                    f"timestamp {int(stamps[bad[0]])} of a record for {self.topic}-{self.partition} is out of range: "
                    f"it must be within [{low}, {high}] (message.timestamp.before.max.ms={before}, "
                    f"message.timestamp.after.max.ms={after})"
                )

    def _maybe_recompressed(self, piece: _Batches) -> _Batches:
        """The batches in the topic's ``compression.type``, rewritten only when some data batch is not."""
        target = self._config.compression_type
        if target == PRODUCER_COMPRESSION:
            return piece
        data = ~piece.entries.is_control
        if not (piece.entries.codecs[data] != Codec.from_name(target)).any():
            return piece
        return _Batches(*self._recompress(piece.buf, piece.entries))

    def _recompress(self, buf: np.ndarray, entries: EntryTable) -> tuple[np.ndarray, EntryTable]:
        """Rewrite data batches in the topic's ``compression.type``, as a broker does, keeping each
        batch's records, timestamps, producer id, epoch, sequence and transactional flag."""
        codec = Codec.from_name(self._config.compression_type)
        pieces: list[bytes] = []
        rows = entries.rows
        for i in range(len(entries)):
            pos, size = int(rows[i, k.E_POSITION]), int(rows[i, k.E_SIZE])
            if entries.is_control[i] or entries.codecs[i] == codec:
                pieces.append(buf[pos : pos + size].tobytes())
                continue
            records = pa.Table.from_batches(
                list(
                    decode_entries(
                        buf, entries.select(slice(i, i + 1)), topic=self.topic, partition=0, include_headers=True
                    )
                )
            )
            settings = BatchSettings(
                codec=codec,
                max_batch_bytes=INT_MAX,  # one batch in, one batch out
                max_batch_records=max(records.num_rows, 1),
                timestamp_type=TimestampType.CREATE_TIME,
                producer_id=int(rows[i, k.E_PRODUCER_ID]),
                producer_epoch=int(rows[i, k.E_PRODUCER_EPOCH]),
                base_sequence=int(rows[i, k.E_BASE_SEQUENCE]),
                transactional=bool(entries.is_transactional[i]),
            )
            pieces += [encoded.data.tobytes() for encoded in encode_arrow(records, settings)]
        rebuilt = np.frombuffer(bytearray(b"".join(pieces)), dtype=np.uint8)
        return rebuilt, scan(rebuilt)

    def _append_locked(
        self,
        fd: int,
        active: _ActiveSegment,
        pieces: Sequence[_Batches],
        aborted: Sequence[AbortedTxn] = (),
        open_txns: OpenTransactions | None = None,
    ) -> AppendInfo:
        """Write the batches of ``pieces``, in order (assigning offsets, rolling as Kafka rolls), and
        acknowledge them all at once.

        ``aborted`` are the ``.txnindex`` entries of the ABORT markers among the batches, each written
        to the segment its marker lands in; ``open_txns`` the open transactions once the batches are
        in, when the batches change them (they give the first unstable offset the state records).
        """
        now = int(time.time() * 1000)
        log_append = self._config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        first_offset = active.state.log_end_offset
        next_offset = first_offset
        records = 0
        max_ts = -1
        queued = 0  # of ``aborted``, the entries handed to their segment
        for piece in pieces:
            view = piece.buf.data
            rows = piece.entries.rows[
                :, [k.E_POSITION, k.E_SIZE, k.E_LAST_OFFSET_DELTA, k.E_MAX_TIMESTAMP, k.E_ATTRIBUTES]
            ]
            pending_start = None
            pending_end = 0
            for pos, size, last_delta, batch_max_ts, attributes in rows.tolist():
                if log_append:
                    struct.pack_into(">h", view, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
                    struct.pack_into(">q", view, pos + MAX_TIMESTAMP_OFFSET, now)
                    crc = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
                    struct.pack_into(">I", view, pos + CRC_OFFSET, crc)
                    batch_max_ts = now
                last_offset = next_offset + last_delta
                if self._should_roll(active, size, batch_max_ts, last_offset, now):
                    if aborted:
                        queued = _queue_aborted(active, aborted, queued, next_offset)
                    if pending_start is not None:
                        self._write_pending(active, view[pending_start:pending_end])
                        pending_start = None
                    active = self._roll(fd, active, next_offset, now)
                struct.pack_into(">q", view, pos + BASE_OFFSET_OFFSET, next_offset)
                struct.pack_into(">i", view, pos + PARTITION_LEADER_EPOCH_OFFSET, PARTITION_LEADER_EPOCH)
                self._index_batch(active, last_offset, batch_max_ts, size)
                if pending_start is None:
                    pending_start = pos
                pending_end = pos + size
                records += last_delta + 1
                max_ts = max(max_ts, batch_max_ts)
                next_offset = last_offset + 1
            if aborted:
                queued = _queue_aborted(active, aborted, queued, next_offset)
            if pending_start is not None:
                self._write_pending(active, view[pending_start:pending_end])
        if open_txns is not None:
            active.state = replace(active.state, first_unstable_offset=open_txns.first_unstable_offset())
        self._maybe_flush(fd, active, now)
        self._write_state(fd, active.state)
        self._active = active
        return AppendInfo(first_offset, next_offset - 1, records, now if log_append else -1, max_ts)

    def _should_roll(self, active: _ActiveSegment, size: int, max_ts: int, last_offset: int, now: int) -> bool:
        """Kafka's ``LogSegment.shouldRoll``."""
        cfg = self._config
        seg_size = active.state.active_size
        if seg_size == 0:
            return False  # rolling an empty segment would recreate it at the same base offset
        if seg_size > cfg.segment_bytes - size:
            return True
        rolling_ts = active.first_batch_max_ts
        waited = (max_ts - rolling_ts) if rolling_ts >= 0 else (now - active.created_ms)
        if waited > cfg.segment_ms - active.roll_jitter_ms:
            return True
        if active.index_entries >= max_entries(cfg.segment_index_bytes, OFFSET_INDEX_ENTRY_SIZE):
            return True
        if active.time_index_entries >= max_entries(cfg.segment_index_bytes, TIME_INDEX_ENTRY_SIZE) - 1:
            return True
        return last_offset - active.segment.base_offset > INT_MAX

    def _jitter(self, base_offset: int) -> int:
        """Kafka's per-segment roll jitter; seeded by the base offset so every process agrees."""
        bound = min(self._config.segment_jitter_ms, self._config.segment_ms)
        return random.Random(base_offset).randrange(bound) if bound > 0 else 0

    def _index_batch(self, active: _ActiveSegment, last_offset: int, max_ts: int, size: int) -> None:
        """Per-batch index maintenance, exactly as ``LogSegment.append`` does it."""
        state = active.state
        position = state.active_size
        max_ts_so_far, offset_of_max = state.max_timestamp, state.offset_of_max_timestamp
        if max_ts > max_ts_so_far:
            max_ts_so_far, offset_of_max = max_ts, last_offset
        if position - active.last_index_position > self._config.index_interval_bytes:
            active.pending_index.append((last_offset, position))
            active.index_entries += 1
            active.last_index_position = position
            self._maybe_append_time_index(active, max_ts_so_far, offset_of_max)
        if active.first_batch_max_ts < 0 and position == 0:
            active.first_batch_max_ts = max_ts
        # Kept current batch by batch: a roll in the middle of an append records the true log end.
        active.state = replace(
            state,
            active_size=position + size,
            log_end_offset=last_offset + 1,
            max_timestamp=max_ts_so_far,
            offset_of_max_timestamp=offset_of_max,
        )

    def _maybe_append_time_index(self, active: _ActiveSegment, ts: int, offset: int) -> None:
        if ts > active.last_time_index_ts:
            active.pending_time_index.append((ts, offset))
            active.time_index_entries += 1
            active.last_time_index_ts = ts

    def _write_pending(self, active: _ActiveSegment, data: memoryview) -> None:
        """Write the batches at the end of the acknowledged bytes, then their index entries.

        A partial write is undone before the error is raised; the log goes first so an index
        entry never points past the data.
        """
        end = active.state.active_size
        start = end - len(data)
        fd = os.open(active.segment.log_path, os.O_WRONLY)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], start + written)
        except BaseException:
            os.ftruncate(fd, start)
            raise
        finally:
            os.close(fd)
        self._write_pending_indexes(active)

    def _write_pending_indexes(self, active: _ActiveSegment) -> None:
        seg = active.segment
        if active.pending_index:
            offsets, positions = zip(*active.pending_index, strict=True)
            with open(seg.index_path, "ab") as f:
                f.write(OffsetIndex.encode(seg.base_offset, list(offsets), list(positions)))
            active.pending_index.clear()
        if active.pending_time_index:
            stamps, offsets = zip(*active.pending_time_index, strict=True)
            with open(seg.time_index_path, "ab") as f:
                f.write(TimeIndex.encode(seg.base_offset, list(stamps), list(offsets)))
            active.pending_time_index.clear()
        if active.pending_txn_index:
            seg.append_txn_index(active.pending_txn_index)
            active.txn_index_entries += len(active.pending_txn_index)
            active.pending_txn_index.clear()

    def _roll(self, fd: int, active: _ActiveSegment, new_base: int, now: int) -> _ActiveSegment:
        """Close the active segment as Kafka's ``LocalLog.roll`` does and start one at ``new_base``."""
        old = active.segment
        self._maybe_append_time_index(active, active.state.max_timestamp, active.state.offset_of_max_timestamp)
        self._write_pending_indexes(active)
        _fsync_segment(old)
        new_base = max(new_base, active.state.log_end_offset)
        bases = self._list_segments()  # other processes may have retired or compacted segments
        producers = self._producers.take_snapshot(bases, active.state.active_base, active.state.active_size, new_base)
        segment = self._create_segment(new_base)
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
        self._write_state(fd, state)
        self._write_checkpoints(state)
        return _ActiveSegment(state, segment, 0, 0, 0, -1, -1, now, self._jitter(new_base), True, 0)

    def _create_segment(self, base: int) -> LogSegment:
        """A new empty segment: its indexes, an empty ``.txnindex`` (see the module docstring), then its ``.log``."""
        segment = self.segment(base)
        for path in (segment.index_path, segment.time_index_path, segment.txn_index_path, segment.log_path):
            with open(path, "ab"):
                pass
        if base not in self._bases:
            bisect.insort(self._bases, base)
        return segment

    def _maybe_flush(self, fd: int, active: _ActiveSegment, now: int) -> None:
        """``flush.messages`` / ``flush.ms``: fsync and move the recovery point."""
        state = active.state
        due = (
            state.log_end_offset - state.recovery_point >= self._config.flush_messages
            or now - state.last_flush_ms >= self._config.flush_ms
        )
        if due and state.log_end_offset > state.recovery_point:
            self._flush_active(active, now)
            self._write_checkpoints(active.state)

    def _flush_active(self, active: _ActiveSegment, now: int) -> None:
        _fsync_segment(active.segment)
        active.state = replace(active.state, recovery_point=active.state.log_end_offset, last_flush_ms=now)

    def flush(self) -> None:
        """fsync everything appended so far and record it as the recovery point."""
        os.makedirs(self.directory, exist_ok=True)
        with self._write_mutex, self._lock.exclusive() as fd:
            active = self._sync_for_write(fd)
            self._flush_active(active, int(time.time() * 1000))
            self._write_state(fd, active.state)
            self._write_checkpoints(active.state)

    def _write_checkpoints(self, state: LogState) -> None:
        """Record this partition's recovery point and log start in the log directory's checkpoints."""
        from pysparklog.storage.log_dir import update_log_dir_checkpoints

        first_base = self._bases[0] if self._bases else state.active_base
        update_log_dir_checkpoints(
            self.checkpoint_dir,
            (self.topic, self.partition),
            state.recovery_point,
            state.log_start_offset if state.log_start_offset > first_base else None,
        )

    # -- reconciling with the files -----------------------------------------------------------

    def _sync_for_write(self, fd: int) -> _ActiveSegment:
        """Bring this process's view of the active segment up to date, running Kafka's recovery for
        whatever does not match the state record (``_reconciled``)."""
        self._config = self.config
        self._complete_pending_swap(fd)
        state = self._read_state(fd)
        active = self._active
        if state is None or state.boot_id != BOOT_ID:
            active = self._recover(fd, None if state is None else state.recovery_point)
        else:
            if active is None or active.state != state:
                active = self._loaded_active(state)
            active = self._reconciled(fd, state, active)
        if active.state.first_unstable_offset == UNKNOWN_FIRST_UNSTABLE_OFFSET:
            # A version 0 record: derive the first unstable offset once and record it.
            unstable = self._producer_state(active).open_txns.first_unstable_offset()
            active.state = replace(active.state, first_unstable_offset=unstable)
            self._write_state(fd, active.state)
        self._active = active
        return active

    def _reconciled(self, fd: int, state: LogState, active: _ActiveSegment | None) -> _ActiveSegment:
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
            return self._recover(fd, None)
        try:
            size = active.segment.size()
        except FileNotFoundError:
            return self._recover(fd, None)
        if size < state.active_size:
            return self._recover(fd, state.recovery_point)
        if size > state.active_size or not self._indexes_unchanged(active):
            return self._recover(fd, state.recovery_point, only_active=True)
        return active

    @staticmethod
    def _indexes_unchanged(active: _ActiveSegment) -> bool:
        """Whether the active segment's indexes were valid when loaded and are still exactly the entries
        written since (a ``stat`` each: this runs at every append). The ``.txnindex`` is looked at only
        when it holds entries: an empty one that is gone loses nothing (an abort creates the file again,
        a reader rebuilds it). A state record that does not say where ``.txnindex`` files start (an
        older pysparklog's) fails too: recovery records it."""
        segment = active.segment
        if not active.indexes_valid or active.state.txn_indexes_from == UNKNOWN_TXN_INDEXES_FROM:
            return False
        txn_index_bytes = active.txn_index_entries * TXN_INDEX_ENTRY_SIZE
        try:
            return (
                os.path.getsize(segment.index_path) == active.index_entries * OFFSET_INDEX_ENTRY_SIZE
                and os.path.getsize(segment.time_index_path) == active.time_index_entries * TIME_INDEX_ENTRY_SIZE
                and (txn_index_bytes == 0 or os.path.getsize(segment.txn_index_path) == txn_index_bytes)
            )
        except FileNotFoundError:
            return False

    def _loaded_active(self, state: LogState) -> _ActiveSegment | None:
        """The active segment the state record describes, or None when the record does not describe
        the files: implausible values, a segment that is not the last one or is gone, or a segment that
        does not end at the record's log end offset (found from the last offset-index entry)."""
        if not (
            0 <= state.active_base <= state.log_end_offset
            and state.active_size >= 0
            and 0 <= state.log_start_offset <= state.log_end_offset
            and state.recovery_point <= state.log_end_offset
            and UNKNOWN_FIRST_UNSTABLE_OFFSET <= state.first_unstable_offset <= state.log_end_offset
        ):
            return None
        bases = self._bases
        if not bases or self._listed_generation != state.segments_generation or bases[-1] != state.active_base:
            bases = self._list_segments()
            self._listed_generation = state.segments_generation
        if not bases or bases[-1] != state.active_base:
            return None
        try:
            if self.segment(state.active_base).end_offset(state.active_size) != state.log_end_offset:
                return None
            return self._active_from(state)
        except FileNotFoundError:
            return None

    def _active_from(self, state: LogState) -> _ActiveSegment:
        """The writer's knowledge of the active segment of ``state``, read from its files."""
        segment = self.segment(state.active_base)
        index = segment.offset_index()
        time_index = segment.time_index()
        required = 0 <= state.txn_indexes_from <= state.active_base
        txn_index = segment.checked_transaction_index(required=required, end_offset=None)
        first_ts = -1
        if state.active_size > 0:
            first = next(segment.chunks(0, state.active_size, max_bytes=4096, verify_crc=False), None)
            if first is not None:
                first_ts = int(first.entries.max_timestamps[0])
        return _ActiveSegment(
            state,
            segment,
            len(index),
            int(index.positions[-1]) if len(index) else 0,
            len(time_index),
            time_index.last_entry[0],
            first_ts,
            int(os.path.getctime(segment.log_path) * 1000),
            self._jitter(segment.base_offset),
            index.is_consistent(state.active_size, state.log_end_offset)
            and time_index.is_consistent(state.log_end_offset, state.max_timestamp)
            and txn_index is not None,
            len(txn_index) if txn_index is not None else 0,
        )

    def _recover(self, fd: int, recovery_point: int | None, *, only_active: bool = False) -> _ActiveSegment:
        """Kafka's log recovery (``LogLoader``) for this partition, under the write lock.

        Every segment from the one holding the recovery point to the last is revalidated: indexes
        are rebuilt, the first invalid batch and everything after it is truncated, and later
        segments are deleted when one is truncated. The producer state is replayed through them
        from the segment's base (``LogSegment.recover``), which rebuilds each one's ``.txnindex``
        and gives the first unstable offset; producer snapshots past the new log end are removed
        (``ProducerStateManager.truncateAndReload``). Every revalidated segment then has a
        ``.txnindex``, so the state record says they start at the first of them, or lower if the
        previous record did.
        """
        os.makedirs(self.directory, exist_ok=True)
        previous = self._read_state(fd)
        indexed_from = previous.txn_indexes_from if previous is not None else UNKNOWN_TXN_INDEXES_FROM
        self._remove_stray_files()
        bases = self._list_segments()
        if not bases:  # Kafka starts an empty log at its checkpointed log start offset
            self._create_segment(self._checkpointed_log_start(0))
            bases = self._list_segments()
        if recovery_point is None:
            recovery_point = self._checkpointed_recovery_point()
        first = len(bases) - 1 if only_active else max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        if not only_active:
            # Below the recovery point only segments with a missing or broken index are recovered.
            broken = [
                i
                for i in range(first)
                if not self.segment(bases[i]).indexes_intact(txn_index_required=0 <= indexed_from <= bases[i])
            ]
            first = min([first, *broken])
        indexed_from = bases[first] if indexed_from == UNKNOWN_TXN_INDEXES_FROM else min(indexed_from, bases[first])
        end_offset = bases[first]
        build = None
        producers = self._producers.load(bases, bases[-1], 0, bases[first], remove_unreadable=True)
        open_txns = OpenTransactions.of(producers)
        for i in range(first, len(bases)):
            segment = self.segment(bases[i])
            size = segment.size()
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            build, valid = segment.rebuild_indexes(size, self._config.index_interval_bytes, next_base)
            build.maybe_append_time_entry()
            segment.write_indexes(build)
            segment.write_txn_index(replay_segment(producers, segment, 0, valid, 0, LONG_MAX, open_txns))
            if build.offsets or valid:
                end_offset = segment.end_offset(valid)
            else:
                end_offset = max(end_offset, segment.base_offset)
            if valid < size:
                os.truncate(segment.log_path, valid)
                for later in bases[i + 1 :]:
                    self._delete_segment_files(self.segment(later))
                bases = bases[: i + 1]
                self._bases = bases
                break
        log_start = self._checkpointed_log_start(bases[0])
        if end_offset < log_start:
            # Segment files were deleted: as Kafka does, drop the rest and start again at the log start.
            for base in bases:
                self._delete_segment_files(self.segment(base))
            for offset in self._producers.snapshot_offsets():
                os.remove(self._producers.snapshot_path(offset))
            self._bases = []
            bases = [self._create_segment(log_start).base_offset]
            build, end_offset, producers, open_txns = IndexBuild(log_start, 0), log_start, {}, OpenTransactions({})
            indexed_from = log_start
        segment = self.segment(bases[-1])
        assert build is not None
        size = segment.size()
        now = int(time.time() * 1000)
        state = LogState(
            segment.base_offset,
            size,
            max(end_offset, segment.base_offset),
            build.max_timestamp,
            build.offset_of_max_timestamp if build.max_timestamp >= 0 else segment.base_offset,
            log_start,
            min(recovery_point, end_offset),
            now,
            previous.segments_generation + 1 if previous is not None else 1,
            first_unstable_offset=open_txns.first_unstable_offset(),
            txn_indexes_from=indexed_from,
        )
        for offset in self._producers.snapshot_offsets():
            if offset > state.log_end_offset:
                os.remove(self._producers.snapshot_path(offset))
        self._ensure_partition_files(bases[0])
        self._write_state(fd, state)
        self._producer_cache = _ProducerCache(producers, state.active_base, size, state.log_end_offset, open_txns)
        return self._active_from(state)

    def _checkpointed_recovery_point(self) -> int:
        path = os.path.join(self.checkpoint_dir, checkpoints.RECOVERY_POINT_CHECKPOINT)
        try:
            return checkpoints.read_offset_checkpoint(path).get((self.topic, self.partition), 0)
        except CorruptRecordError:
            return 0

    def _remove_stray_files(self) -> None:
        """Startup clean-up as ``LogLoader`` does it: leftover temporary files and orphan indexes.

        A swap that started is finished from its marker (``_complete_pending_swap``) before this
        runs, so a ``.swap`` file here is an orphan. ``.cleaned`` files are left to the cleaner,
        which may be writing them now and removes stale ones when it takes its own lock.
        """
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if name.endswith((DELETED_SUFFIX, SWAP_SUFFIX)) or ".tmp." in name:
                os.remove(path)
            elif name.endswith((".index", ".timeindex", ".txnindex")):
                stem = name.rsplit(".", 1)[0]
                if not os.path.exists(os.path.join(self.directory, stem + LOG_SUFFIX)):
                    os.remove(path)

    def _delete_segment_files(self, segment: LogSegment) -> None:
        for path in (segment.log_path, segment.index_path, segment.time_index_path, segment.txn_index_path):
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        self._segments.pop(segment.base_offset, None)

    def _ensure_partition_files(self, first_base: int) -> None:
        """``leader-epoch-checkpoint`` and ``partition.metadata``, as a broker leaves them; written again
        when missing or unreadable (the epoch file names the one leader epoch from the first segment, the
        metadata the topic's id, which its other partitions keep)."""
        epoch_path = os.path.join(self.directory, checkpoints.LEADER_EPOCH_CHECKPOINT)
        try:
            epochs = checkpoints.read_leader_epoch_checkpoint(epoch_path) if os.path.exists(epoch_path) else None
        except CorruptRecordError:
            epochs = None
        if not epochs:
            checkpoints.write_leader_epoch_checkpoint(epoch_path, [(PARTITION_LEADER_EPOCH, first_base)])
        metadata_path = os.path.join(self.directory, checkpoints.PARTITION_METADATA)
        if _readable_topic_id(metadata_path) is None:
            checkpoints.write_partition_metadata(metadata_path, self._topic_id())

    def _topic_id(self) -> str:
        """The topic's id: shared with its other partitions (those whose ``partition.metadata`` reads), new
        for a new topic."""
        parent = os.path.dirname(self.directory)
        prefix = f"{self.topic}-"
        for name in sorted(os.listdir(parent)):
            if name.startswith(prefix) and name[len(prefix) :].isdigit() and name != os.path.basename(self.directory):
                topic_id = _readable_topic_id(os.path.join(parent, name, checkpoints.PARTITION_METADATA))
                if topic_id is not None:
                    return topic_id
        return checkpoints.new_topic_id()

    @property
    def topic_id(self) -> str | None:
        return checkpoints.read_partition_metadata(os.path.join(self.directory, checkpoints.PARTITION_METADATA))

    # -- maintenance: retention, delete-records, compaction ------------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        """What retention and the cleaner decide on, for every segment of the acknowledged view."""
        view = self.view()
        bases = view.segment_bases
        infos = []
        for base, next_base in zip(bases, [*bases[1:], None][: len(bases)], strict=True):
            segment = self.segment(base)
            end = view.end_of(base, segment)
            largest, _ = segment.largest_timestamp(end)
            modified = int(os.path.getmtime(segment.log_path) * 1000)
            infos.append(
                SegmentInfo(base, end, largest, modified, view.log_end_offset if next_base is None else next_base)
            )
        return infos

    def roll(self) -> bool:
        """Roll the active segment now if it holds data (retention does this when everything qualifies)."""
        os.makedirs(self.directory, exist_ok=True)
        with self._write_mutex, self._lock.exclusive() as fd:
            active = self._sync_for_write(fd)
            if active.state.active_size == 0:
                return False
            self._active = self._roll(fd, active, active.state.log_end_offset, int(time.time() * 1000))
            return True

    def raise_log_start_offset(self, offset: int) -> int:
        """Kafka's DeleteRecords: records below ``offset`` stop being readable; returns the log start.

        Raises:
            InvalidOffsetError: ``offset`` is not an integer, or negative or past the log end (the high watermark).
        """
        offset = _integer_argument("offset", offset, "an offset (integer) from 0 to the high watermark")
        with self._write_mutex, self._lock.exclusive() as fd:
            active = self._sync_for_write(fd)
            state = active.state
            if not 0 <= offset <= state.log_end_offset:
                raise InvalidOffsetError(
                    f"cannot delete records of {self.topic}-{self.partition} below offset {offset}: accepted "
                    f"0 to the high watermark {state.log_end_offset}"
                )
            if offset > state.log_start_offset:
                active.state = replace(state, log_start_offset=offset)
                self._write_state(fd, active.state)
                self._write_checkpoints(active.state)
            return active.state.log_start_offset

    def delete_segments(self, bases: Sequence[int]) -> int:
        """Retire the oldest segments: their files are renamed ``.deleted`` (removed later by
        ``remove_deleted_files``) and the log start moves to the first remaining segment.

        Raises:
            InvalidOffsetError: ``bases`` is not a prefix of the segments, or includes the active one.
        """
        with self._write_mutex, self._lock.exclusive() as fd:
            active = self._sync_for_write(fd)
            current = self._list_segments()
            if list(bases) != current[: len(bases)] or active.segment.base_offset in bases:
                raise InvalidOffsetError(
                    f"segments {list(bases)} of {self.topic}-{self.partition} are not its oldest inactive segments "
                    f"(segments: {current[:5]}{'...' if len(current) > 5 else ''}, active {active.segment.base_offset})"
                )
            for base in bases:
                self._rename_segment_files(base, "", DELETED_SUFFIX)
            self._bases = current[len(bases) :]
            for name in os.listdir(self.directory):
                snapshot = parse_segment_name(name, ".snapshot")
                if snapshot is not None and snapshot < self._bases[0]:
                    os.remove(os.path.join(self.directory, name))
            active.state = replace(
                active.state,
                log_start_offset=max(active.state.log_start_offset, self._bases[0]),
                segments_generation=active.state.segments_generation + 1,
            )
            self._write_state(fd, active.state)
            self._write_checkpoints(active.state)
            return active.state.log_start_offset

    def remove_deleted_files(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` files renamed more than ``file.delete.delay.ms`` ago; returns how many.

        The delay lets readers that opened a segment before it was retired finish with it.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        delay = self.config.file_delete_delay_ms
        removed = 0
        for name in os.listdir(self.directory) if os.path.isdir(self.directory) else []:
            path = os.path.join(self.directory, name)
            if name.endswith(DELETED_SUFFIX) and now - int(os.path.getctime(path) * 1000) >= delay:
                os.remove(path)
                removed += 1
        return removed

    def replace_segments(self, old_bases: Sequence[int], cleaned_base: int) -> None:
        """Swap compacted files in for ``old_bases``, crash-safely (Kafka's ``replaceSegments``).

        The cleaner has written ``<cleaned_base>.log.cleaned`` (and ``.index.cleaned``,
        ``.timeindex.cleaned``). Under the write lock a marker records the swap, ``.cleaned`` files
        become ``.swap``, the old segments become ``.deleted``, and the ``.swap`` files take the
        final names. Whoever takes the lock next finishes a swap a crash interrupted.

        Raises:
            InvalidOffsetError: The old segments changed meanwhile (retention ran) or include the
                active segment; the cleaned files are then removed.
        """
        with self._write_mutex, self._lock.exclusive() as fd:
            active = self._sync_for_write(fd)
            current = self._list_segments()
            ok = (
                bool(old_bases)
                and old_bases[0] == cleaned_base
                and active.segment.base_offset not in old_bases
                and all(b in current for b in old_bases)
                and all(
                    os.path.exists(self._segment_path(cleaned_base, suffix) + CLEANED_SUFFIX)
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
                )
            )
            if not ok:
                self._rename_segment_files(cleaned_base, CLEANED_SUFFIX, None)
                raise InvalidOffsetError(
                    f"cannot swap cleaned segment {cleaned_base} in for {list(old_bases)} of "
                    f"{self.topic}-{self.partition}: the segments changed or include the active one"
                )
            marker = _SwapMarker(int(cleaned_base), [int(b) for b in old_bases], "swap")
            checkpoints.write_atomically(os.path.join(self.directory, SWAP_MARKER), marker.encode())
            self._complete_pending_swap(fd)

    def _complete_pending_swap(self, fd: int) -> None:
        """Finish a segment swap from its marker; every step is idempotent. Runs under the write lock.

        A marker that cannot be read is replaced by what the files say, as Kafka's ``LogLoader`` finishes
        a swap from its ``.swap`` files alone (``_swap_from_files``).
        """
        path = os.path.join(self.directory, SWAP_MARKER)
        try:
            with open(path, "rb") as f:
                marker = _parse_swap_marker(f.read())
        except FileNotFoundError:
            return
        if marker is None:
            _log.warning("%s cannot be read; finishing the swap from the files", path)
            marker = self._swap_from_files()
        if marker is not None:
            if marker.phase == "swap":
                self._rename_segment_files(marker.new, CLEANED_SUFFIX, SWAP_SUFFIX)
                for base in marker.old:
                    self._rename_segment_files(base, "", DELETED_SUFFIX)
                marker = replace(marker, phase="finish")
                checkpoints.write_atomically(path, marker.encode())
            self._rename_segment_files(marker.new, SWAP_SUFFIX, "")
            for base in marker.old:
                self._segments.pop(base, None)
        os.remove(path)
        self._bases = []
        state = self._read_state(fd)
        if state is not None:
            self._write_state(fd, replace(state, segments_generation=state.segments_generation + 1))

    def _swap_from_files(self) -> _SwapMarker | None:
        """The swap the files show, for a marker that cannot be read; None when no file was swapped yet.

        With ``<new>.log.swap`` there, the segments it replaces are the live ones in its offset range
        (Kafka: those overlapping [its base, its next offset)), and the swap is redone from its first
        phase; with only index files left as ``.swap``, only its last step is.
        """
        swapped = sorted(
            {
                base
                for name in os.listdir(self.directory)
                for suffix in SEGMENT_SUFFIXES
                if (base := parse_segment_name(name, suffix + SWAP_SUFFIX)) is not None
            }
        )
        if not swapped:
            return None
        new = swapped[0]
        incoming = LogSegment(self.directory, new, SWAP_SUFFIX)
        if not os.path.exists(incoming.log_path):
            return _SwapMarker(new, [], "finish")
        end = incoming.end_offset(os.path.getsize(incoming.log_path))
        return _SwapMarker(new, [b for b in self._list_segments() if new <= b < max(end, new + 1)], "swap")

    def _segment_path(self, base: int, suffix: str) -> str:
        return os.path.join(self.directory, filename_prefix(base) + suffix)

    def _rename_segment_files(self, base: int, from_suffix: str, to_suffix: str | None) -> None:
        """Rename (or, with ``to_suffix`` None, remove) each file of a segment that exists.

        A segment is live while its ``.log`` has the plain name, so that file goes last when a segment
        comes in (``to_suffix`` ""), and first when one goes out (Kafka's ``changeFileSuffixes``
        renames the log first too): a crash in between leaves stray index files, which recovery
        removes, never a live ``.log`` without its indexes.
        """
        order = SEGMENT_SUFFIXES if to_suffix == "" else (LOG_SUFFIX, *SEGMENT_SUFFIXES[:-1])
        for suffix in order:
            source = self._segment_path(base, suffix) + from_suffix
            if not os.path.exists(source):
                continue
            if to_suffix is None:
                os.remove(source)
            else:
                os.replace(source, self._segment_path(base, suffix) + to_suffix)

    def recover(self) -> None:
        """Run Kafka's recovery now: revalidate from the recovery point, rebuild indexes, cut torn tails."""
        os.makedirs(self.directory, exist_ok=True)
        with self._write_mutex, self._lock.exclusive() as fd:
            state = self._read_state(fd)
            self._active = self._recover(fd, None if state is None else state.recovery_point)


#: Offsets of log a process may replay to rebuild producer state before it snapshots the result at the log
#: end (besides the snapshot of every roll), so that the next process starts from there. Kafka's broker keeps
#: the state in memory and needs no such snapshot; short-lived writers (a Spark task each) do.
SNAPSHOT_AFTER_REPLAY = 100_000


_TIMESTAMP_ARGUMENTS = "-2 (earliest), -1 (latest), -3 (max timestamp) or milliseconds since the epoch"


def _integer_argument(
    name: str, value: object, accepted: str, error: type[PySparkLogError] = InvalidOffsetError
) -> int:
    """``value`` as an int, for an argument that takes one (Python and NumPy integers; not bools).

    Raises:
        PySparkLogError: Of type ``error``, naming the argument, its value and ``accepted``.
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise error(f"{name} {value!r} is not valid; accepted: {accepted}")
    return int(value)


def _optional_offset(name: str, value: object, default: str) -> int | None:
    """An offset argument that may be None (``default`` says what None means)."""
    return None if value is None else _integer_argument(name, value, f"an offset (integer) or {default}")


def _is_one_producer_run(entries: EntryTable) -> bool:
    """Whether the batches are one idempotent producer's data batches with consecutive sequences, as a
    producer's append of one partition is: then they are checked as one run, without a loop per batch."""
    rows = entries.rows
    pids, epochs, sequences = rows[:, k.E_PRODUCER_ID], rows[:, k.E_PRODUCER_EPOCH], rows[:, k.E_BASE_SEQUENCE]
    transactional = entries.is_transactional
    if pids[0] < 0 or (pids != pids[0]).any() or (epochs != epochs[0]).any() or (sequences < 0).any():
        return False
    if entries.is_control.any() or transactional.any() != transactional.all():
        return False
    following = (sequences[:-1] + rows[:-1, k.E_LAST_OFFSET_DELTA] + 1) % 2**31
    return bool((sequences[1:] == following).all())


def _check_run(
    producers: dict[int, ProducerEntry], open_txns: OpenTransactions, log_end: int, entries: EntryTable
) -> _ProducerCheck | None:
    """``_check_producers`` for one producer's run of batches: all new, or all a retry of what it appended;
    None when only some are (the batch-by-batch check sorts those out)."""
    row = entries.rows[0]
    pid, epoch, first_sequence = int(row[k.E_PRODUCER_ID]), int(row[k.E_PRODUCER_EPOCH]), int(row[k.E_BASE_SEQUENCE])
    sizes = entries.column(k.E_LAST_OFFSET_DELTA) + 1
    starts = np.cumsum(sizes) - sizes
    total = int(sizes.sum())
    entry = producers.get(pid)
    if entry is not None:
        repeated = entry.duplicate_of(epoch, first_sequence, next_sequence(first_sequence, total - 1))
        if repeated is not None:
            first_offsets = repeated.first_offset + starts
            stamps = np.full(len(entries), repeated.timestamp, dtype=np.int64)
            return _ProducerCheck(np.zeros(len(entries), bool), first_offsets, first_offsets + sizes - 1, stamps, {})
        if entry.duplicate_of(epoch, first_sequence, next_sequence(first_sequence, int(sizes[0]) - 1)) is not None:
            return None
    check_sequence(entry, pid, epoch, first_sequence)
    updated = {pid: entry.copy()} if entry is not None else {}
    max_timestamps = entries.max_timestamps.copy()
    transactional = bool(entries.is_transactional[0])
    apply_run(
        updated,
        pid,
        epoch,
        first_sequence,
        log_end,
        log_end + total - 1,
        int(max_timestamps.max()),
        transactional=transactional,
    )
    following = None
    if transactional:  # the run may open the producer's transaction
        following = open_txns.copy()
        following.follow(updated[pid], None)
    first_offsets = log_end + starts
    return _ProducerCheck(
        np.ones(len(entries), bool), first_offsets, first_offsets + sizes - 1, max_timestamps, updated, [], following
    )


def _queue_aborted(active: _ActiveSegment, aborted: Sequence[AbortedTxn], queued: int, below: int) -> int:
    """Hand the entries of ``aborted`` from ``queued`` on whose markers lie below ``below`` to the
    active segment's pending ``.txnindex`` entries; returns how many are handed over in all."""
    while queued < len(aborted) and aborted[queued].last_offset < below:
        active.pending_txn_index.append(aborted[queued])
        queued += 1
    return queued


@dataclass(frozen=True, slots=True)
class _SwapMarker:
    """``pysparklog.swap``: the cleaned segment ``new`` replaces the segments ``old``; ``phase`` says
    how far the swap got ("swap": renames may be under way; "finish": only the ``.swap`` files are left)."""

    new: int
    old: list[int]
    phase: str

    def encode(self) -> bytes:
        return json.dumps({"old": self.old, "new": self.new, "phase": self.phase}).encode()


def _parse_swap_marker(data: bytes) -> _SwapMarker | None:
    """The swap marker in ``data``; None when it is not one."""
    try:
        marker = json.loads(data)
        new, old, phase = marker["new"], marker["old"], marker["phase"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(old, list) or phase not in ("swap", "finish"):
        return None
    if any(isinstance(b, bool) or not isinstance(b, int) for b in [new, *old]):
        return None
    return _SwapMarker(new, old, phase)


def _readable_topic_id(path: str) -> str | None:
    """The topic id of a ``partition.metadata`` file; None when it is missing or cannot be read."""
    try:
        return checkpoints.read_partition_metadata(path)
    except CorruptRecordError:
        return None


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_segment(segment: LogSegment) -> None:
    """fsync a segment's files, its ``.txnindex`` too when it has entries (``LogSegment.flush``): an
    empty one holds nothing an fsync would keep, and one lost in a crash is rebuilt by its readers."""
    for path in (segment.log_path, segment.index_path, segment.time_index_path):
        _fsync(path)
    try:
        if os.path.getsize(segment.txn_index_path):
            _fsync(segment.txn_index_path)
    except FileNotFoundError:
        pass
