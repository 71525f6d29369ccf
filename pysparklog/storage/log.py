"""A partition log: the segments of one ``<topic>-<partition>`` directory, appended to and read
by any number of processes at once (Kafka's ``UnifiedLog``, composing the parts Kafka's storage
module has).

- :class:`~pysparklog.storage.segment.LogSegment` owns a segment's files (reads, appends, flush,
  renames) and its indexes (``segment_indexes``); :class:`~pysparklog.storage.log_segments.LogSegments`
  the directory's set.
- :class:`~pysparklog.storage.log_writer.LogWriter` appends, rolls, flushes and reconciles with the
  state record; ``log_reads`` reads over a view.
- :class:`~pysparklog.storage.validator.LogValidator` checks and rewrites an append's batches, and
  ``producer_validation`` checks them against the producers' state (idempotence, transactions).
- :class:`~pysparklog.storage.loader.LogLoader` recovers what a crash left.
- The partition log holds the lock and the state record (``log_state``): appends are serialised by an
  exclusive lock on the partition's ``pysparklog.state`` file, which holds the state of the last
  acknowledged append. Readers take the lock shared for a moment to read that record and never look
  past the acknowledged size, so a batch being written is never seen half-written.

A writer that finds bytes past the acknowledged size (a writer died mid-append) validates them as
Kafka's recovery does and truncates at the first invalid batch. A boot id other than the machine's
means the machine restarted, so data not yet fsynced may be lost: the writer then runs Kafka's full
recovery from the recovery point.

Every byte is reached through the log directory's :class:`~pysparklog.storage.io.FileSystemStorage`: segments,
indexes and the state record change in place, which only a filesystem offers.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import NamedTuple, TypeVar

import numpy as np
import pyarrow as pa

from pysparklog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidOffsetError,
    LogEndChangedError,
    OffsetOutOfRangeError,
    PySparkLogError,
)
from pysparklog.storage import checkpoints
from pysparklog.storage.active_segment import ActiveSegment
from pysparklog.storage.config import INT_MAX, LogConfig
from pysparklog.storage.index import TransactionIndex
from pysparklog.storage.io import FileSystemStorage, LockedRecord, file_system_for
from pysparklog.storage.loader import LogLoader
from pysparklog.storage.log_dir_checkpoints import LogDirCheckpoints
from pysparklog.storage.log_reads import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    SegmentInfo,
    aborted_in,
    checked_txn_index,
    find_offset_for_timestamp,
    read_batches,
    rebuild_txn_indexes,
    segment_infos,
)
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.log_state import (
    STATE_FILE,
    UNKNOWN_FIRST_UNSTABLE_OFFSET,
    LogState,
    LogView,
    describes_active_segment,
    parse_partition_dir,
    read_state,
)
from pysparklog.storage.log_writer import AppendInfo, LogWriter
from pysparklog.storage.producer_state import (
    NO_TXN_FIRST_OFFSET,
    OpenTransactions,
    ProducerStateTracker,
)
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches, encode_arrow
from pysparklog.storage.segment import LogSegment
from pysparklog.storage.swap import (
    begin_swap,
    cleaned_files_ready,
    complete_pending_swap,
    discard_cleaned,
    swap_pending,
)
from pysparklog.storage.transaction_index import (
    READ_UNCOMMITTED,
    AbortedBatches,
    AbortedTxn,
    is_read_committed,
)
from pysparklog.storage.validator import (
    Batches,
    LogValidator,
    checked_batches,
    joined,
)

ConfigSource = LogConfig | Callable[[], LogConfig]
#: How much file data ``read_arrow`` decodes into one Arrow batch by default.
DEFAULT_MAX_CHUNK_BYTES = 8 * 1024 * 1024
_MAX_VIEW_RETRIES = 20
_T = TypeVar("_T")


class ReadRequest(NamedTuple):
    """The arguments of ``read_arrow``, checked: what a read of either partition log goes by."""

    start_offset: int | None
    end_offset: int | None
    include_headers: bool
    max_chunk_bytes: int
    committed: bool
    """``isolation_level`` is ``read_committed``."""

    @classmethod
    def checked(
        cls,
        start_offset: int | None,
        end_offset: int | None,
        include_headers: bool,
        max_chunk_bytes: int,
        isolation_level: str,
    ) -> ReadRequest:
        """The arguments of ``read_arrow``, checked when it is called (its records are read later).

        Raises:
            InvalidOffsetError: An offset is not an integer.
            InvalidConfigError: ``isolation_level``, ``max_chunk_bytes`` or ``include_headers`` is not valid.
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
        return cls(start_offset, end_offset, include_headers, max_chunk_bytes, committed)


def arrow_pieces(
    data: pa.Table | pa.RecordBatch, settings: BatchSettings | None, max_message_bytes: int
) -> list[Batches]:
    """The checked pieces of an ``append_arrow``: every batch encoded and checked before anything is written.

    Raises:
        InvalidConfigError: ``data`` is not an Arrow table or record batch, or ``settings`` not a ``BatchSettings``.
        InvalidRecordError: A column is missing or of a type the encoder does not take.
        RecordTooLargeError: A batch is larger than ``max_message_bytes``.
    """
    if not isinstance(data, pa.Table | pa.RecordBatch):
        raise InvalidConfigError(f"cannot append {type(data).__name__}; accepted: a pyarrow Table or RecordBatch")
    if settings is not None and not isinstance(settings, BatchSettings):
        raise InvalidConfigError(f"settings {settings!r} is not valid; accepted: a BatchSettings or None")
    return [checked_batches(encoded, max_message_bytes) for encoded in encode_arrow(data, settings)]


class PartitionLog:
    """One partition's log directory.


    Args:
        directory: The ``<topic>-<partition>`` directory (created on the first append): a filesystem
            path, or a path of ``storage`` when one is given.
        config: Segment, index and flush settings.
        checkpoint_dir: The log directory holding ``recovery-point-offset-checkpoint`` and
            ``log-start-offset-checkpoint`` (default: the parent of ``directory``).
        storage: The log directory's storage, a filesystem (default: the one holding ``checkpoint_dir``).

    Raises:
        InvalidLogDirectoryError: ``directory`` is not named ``<topic>-<partition>``, or is on an object store.
    """

    def __init__(
        self,
        directory: str,
        config: ConfigSource | None = None,
        *,
        checkpoint_dir: str | None = None,
        storage: FileSystemStorage | None = None,
    ) -> None:
        if storage is None:
            directory = os.path.abspath(directory)
        self.directory = directory.rstrip("/")
        self.topic, self.partition = parse_partition_dir(self.directory)
        self.checkpoint_dir = checkpoint_dir or self.directory.rpartition("/")[0]
        self.storage = storage if storage is not None else file_system_for(self.checkpoint_dir)
        self._config_source: ConfigSource = config or LogConfig()
        self._lock = self.storage.lock(f"{self.directory}/{STATE_FILE}")
        self._segments = LogSegments(self.storage, self.directory)
        self._checkpoints = LogDirCheckpoints(self.storage, self.checkpoint_dir)
        self._producers = ProducerStateTracker(self._segments)
        self._writer = LogWriter(LogLoader(self._segments, self._producers, self._checkpoints, self._topic_partition))
        # The first unstable offset derived for a view whose state record does not hold it.
        self._derived_unstable: tuple[tuple[tuple[int, ...], int, int], int] | None = None
        self._trusted_state: LogState | None = None  # the last state record found to describe the files
        self._write_mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"PartitionLog({self.directory!r})"

    @property
    def config(self) -> LogConfig:
        """The settings in force now: a callable source is asked again, so topic config changes made
        by other processes reach this log at its next append or maintenance pass."""
        source = self._config_source
        return source() if callable(source) else source

    @property
    def local(self) -> PartitionLog:
        """Itself: a filesystem log holds its segments where it is (``Log.local``)."""
        return self

    def close(self) -> None:
        self._lock.close()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _topic_partition(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def segment(self, base: int) -> LogSegment:
        """The segment at ``base``."""
        return self._segments.get(base)

    def segments(self) -> list[LogSegment]:
        """The segments of the acknowledged view, oldest first."""
        return [self.segment(b) for b in self.view().segment_bases]

    # -- reading ------------------------------------------------------------------------------

    def view(self) -> LogView:
        """The acknowledged extent of the log, read consistently with concurrent writers."""
        self._finish_swap()
        with self._lock.shared() as record:
            return self._locked_view(record)

    def _finish_swap(self) -> None:
        """Finish a segment swap that a process died in (its marker is there) before reading."""
        if swap_pending(self._segments):
            with self._write_mutex, self._lock.exclusive() as record:
                self._complete_pending_swap(record)

    def _locked_view(self, record: LockedRecord | None) -> LogView:
        """``view()`` for a caller holding the state record's lock shared (None: no writer created it)."""
        state = read_state(record)
        segments = self._segments
        if state is not None:
            cached = segments.bases and segments.listed_generation == state.segments_generation
            bases = segments.bases if cached else segments.list()
            segments.listed_generation = state.segments_generation
            if bases and bases[-1] == state.active_base:
                if not self._describes_files(state):
                    # The record or the active segment is another partition's: neither is trusted alone. The
                    # files say where the segment's bytes end, and records past the record's log end are
                    # served by neither (the segment's batches there are refused as not its own).
                    files = self._view_from_files()
                    end = max(min(files.log_end_offset, state.log_end_offset), bases[-1])
                    return replace(files, log_start_offset=min(files.log_start_offset, end), log_end_offset=end)
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

    def _describes_files(self, state: LogState) -> bool:
        """Whether a reader may take its view from ``state`` (``describes_active_segment``), checked once per
        record: a record is rewritten by every append, and the check reads the active segment's tail."""
        if state != self._trusted_state:
            try:
                if not describes_active_segment(state, self._segments.get(state.active_base)):
                    return False
            except FileNotFoundError:
                return False
            self._trusted_state = state
        return True

    def _view_from_files(self) -> LogView:
        bases = self._segments.list()
        if not bases:
            return LogView((), 0, 0, 0, NO_TXN_FIRST_OFFSET)
        last = self.segment(bases[-1])
        size = last.size()
        # Never below the active segment's base: batches below it (another segment's .log copied in) are not
        # its own, and the sealed segments before it still end there.
        end_offset = max(last.end_offset(size), bases[-1])
        start = self._checkpoints.log_start(self._topic_partition, bases[0])
        return LogView(tuple(bases), size, start, end_offset, UNKNOWN_FIRST_UNSTABLE_OFFSET)

    @property
    def log_start_offset(self) -> int:
        return self.view().log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.view().log_end_offset

    def offsets(self) -> tuple[int, int]:
        """The log start offset and the log end offset, from one view."""
        view = self.view()
        return view.log_start_offset, view.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's last stable offset, where read_committed reads stop: the first offset of the earliest
        transaction still open (never below the log start offset), else the log end offset (the high
        watermark here). Every process's appends count; it costs what ``view()`` costs."""
        return self.last_stable(self.view())

    def last_stable(self, view: LogView) -> int:
        """The last stable offset of ``view`` (``last_stable_offset`` without reading the view again)."""
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

        def collect(record: LockedRecord | None) -> tuple[list[AbortedTxn], list[int]]:
            view = self._locked_view(record)
            return aborted_in(self._segments, self._producers, view, start_offset, min(end_offset, view.log_end_offset))

        return self._with_transaction_indexes(collect)

    def transaction_index(self, base: int) -> TransactionIndex:
        """The ``.txnindex`` entries of segment ``base``, rebuilt first when lost or damaged.

        Raises:
            InvalidOffsetError: The partition has no segment at ``base`` (retention retired it).
        """

        def read(record: LockedRecord | None) -> tuple[TransactionIndex | None, list[int]]:
            view = self._locked_view(record)
            if base not in view.segment_bases:
                raise InvalidOffsetError(f"{self.topic}-{self.partition} has no segment at offset {base}")
            index = checked_txn_index(self._segments, self._producers, view, view.segment_bases.index(base))
            return index, [] if index is not None else [base]

        index = self._with_transaction_indexes(read)
        assert index is not None
        return index

    def _with_transaction_indexes(self, read: Callable[[LockedRecord | None], tuple[_T, list[int]]]) -> _T:
        """``read(record)`` under the state record's lock held shared; when it found ``.txnindex`` files lost
        or damaged (the bases it returns), they are rebuilt under the write lock and it runs again."""
        for _attempt in range(_MAX_VIEW_RETRIES):
            self._finish_swap()
            with self._lock.shared() as record:
                result, damaged = read(record)
            if not damaged:
                return result
            self._rebuild_transaction_indexes(damaged)
        raise CorruptRecordError(f"the .txnindex files of {self.directory} could not be rebuilt")

    def _rebuild_transaction_indexes(self, bases: Sequence[int]) -> None:
        """Rebuild the ``.txnindex`` files of ``bases`` that are still lost or damaged, under the write lock."""
        with self._write_mutex, self._lock.exclusive() as record:
            rebuild_txn_indexes(self._segments, self._producers, self._locked_view(record), bases)

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
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
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
        return self.read_checked(
            ReadRequest.checked(start_offset, end_offset, include_headers, max_chunk_bytes, isolation_level)
        )

    def read_checked(self, request: ReadRequest) -> Iterator[pa.RecordBatch]:
        """``read_arrow`` once its arguments are checked."""
        start_offset, end_offset, include_headers, max_chunk_bytes, committed = request

        def plan(record: LockedRecord | None) -> tuple[tuple[LogView, int, int, AbortedBatches | None], list[int]]:
            view = self._locked_view(record)
            start = view.log_start_offset if start_offset is None else start_offset
            self._check_range(view, start)
            end = view.log_end_offset if end_offset is None else min(end_offset, view.log_end_offset)
            if end_offset is not None and end_offset < start:
                raise InvalidOffsetError(f"end offset {end_offset} is below start offset {start}")
            if not committed:
                return (view, start, end, None), []
            end = min(end, self.last_stable(view))
            txns, damaged = aborted_in(self._segments, self._producers, view, start, end)
            return (view, start, end, AbortedBatches(txns) if txns else None), damaged

        view, start, end, aborted = self._with_transaction_indexes(plan)
        position = start
        if position >= end:
            return
        for _attempt in range(_MAX_VIEW_RETRIES):
            try:
                for batch in read_batches(
                    self._segments,
                    view,
                    self._topic_partition,
                    position,
                    end,
                    include_headers,
                    max_chunk_bytes,
                    aborted,
                ):
                    position = int(batch.column("offset")[-1].as_py()) + 1
                    yield batch
                return
            except FileNotFoundError:
                # Retention or compaction replaced segments under this reader: look again.
                self._segments.bases = []
                view = self.view()
                if position < view.log_start_offset:
                    raise OffsetOutOfRangeError(
                        f"offset {position} of {self.topic}-{self.partition} was deleted while it was being read; "
                        f"the log now starts at {view.log_start_offset}"
                    ) from None
        raise CorruptRecordError(f"the segments of {self.directory} keep disappearing under the reader")

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
        if timestamp < 0 and timestamp != MAX_TIMESTAMP:
            raise InvalidOffsetError(f"timestamp {timestamp} is not valid; accepted: {_TIMESTAMP_ARGUMENTS}")
        return find_offset_for_timestamp(self._segments, view, timestamp)

    # -- writing ------------------------------------------------------------------------------

    def append_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        settings: BatchSettings | None = None,
        *,
        expected_end_offset: int | None = None,
    ) -> AppendInfo:
        """Encode Arrow rows (``value``, optional ``key``, ``timestamp``, ``headers``) and append them.

        One call is one append, whatever the table's chunks: everything is encoded and checked first,
        then written under one hold of the lock, so its offsets are contiguous and nothing is written
        when a check fails.

        With ``expected_end_offset``, the append is made only if the log still ends there when the lock is
        held: a caller that decided what to append from the records it read up to that end (whether a consumer
        group's commit is still from its latest generation) appends nothing when anyone appended since.

        Returns:
            The offsets of everything appended by this call.

        Raises:
            InvalidConfigError: ``data`` is not an Arrow table or record batch, or ``settings`` not a
                ``BatchSettings``.
            InvalidRecordError: A column is missing or of a type the encoder does not take.
            RecordTooLargeError: A batch is larger than ``max.message.bytes``.
            LogEndChangedError: The log no longer ends at ``expected_end_offset``.
        """
        return self._append_all(arrow_pieces(data, settings, self.config.max_message_bytes), expected_end_offset)

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
            InvalidConfigError: ``batches`` is not bytes or ``EncodedBatches``.
            RecordTooLargeError: A batch is larger than ``max.message.bytes``.
            OutOfOrderSequenceError: An idempotent batch does not follow its producer's last batch.
            ProducerFencedError: An idempotent batch comes from an older epoch of its producer.
        """
        return self._append_all([checked_batches(batches, self.config.max_message_bytes)])

    def _append_all(self, pieces: Sequence[Batches], expected_end_offset: int | None = None) -> AppendInfo:
        """Append checked pieces as one append: under one hold of the lock, in order, contiguous; only if the
        log ends at ``expected_end_offset``, when given."""
        pieces = [piece for piece in pieces if len(piece.entries)]
        if not pieces:
            end = self.log_end_offset
            return AppendInfo(end, end - 1, 0, -1, -1)
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            self._check_end(active, expected_end_offset)
            writer = self._writer
            validator = LogValidator(writer.config, self.topic, self.partition)
            if any(piece.entries.has_producers for piece in pieces):
                return writer.append_producer_batches(record, active, validator, joined(pieces))
            for piece in pieces:
                validator.check_timestamps(piece)
            return writer.append_batches(record, active, [validator.maybe_recompressed(piece) for piece in pieces])

    def prepared_append(
        self, pieces: Sequence[Batches], expected_end_offset: int | None = None
    ) -> tuple[Batches, AppendInfo]:
        """What appending the checked ``pieces`` now would write and acknowledge, with nothing written
        (``LogWriter.prepared``): the append of a log whose appends are sequenced elsewhere.

        Raises:
            LogEndChangedError: The log does not end at ``expected_end_offset`` (when given).
        """
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            self._check_end(active, expected_end_offset)
            return self._writer.prepared(active, LogValidator(self._writer.config, self.topic, self.partition), pieces)

    def append_replica(self, piece: Batches, first_offset: int) -> None:
        """Append batches already validated and numbered elsewhere, keeping their offsets and timestamps
        (Kafka's ``appendAsFollower``); the producers' state follows them.

        Raises:
            InvalidOffsetError: The log does not end at ``first_offset``.
        """
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            if active.state.log_end_offset != first_offset:
                raise InvalidOffsetError(
                    f"{self.topic}-{self.partition} ends at {active.state.log_end_offset}, not at {first_offset} "
                    f"where the replicated batches start"
                )
            if not len(piece.entries):
                return
            if piece.entries.has_producers:
                self._writer.append_producer_batches(record, active, None, piece)
            else:
                self._writer.append_batches(record, active, [piece], stamp=False)

    def truncate_fully_and_start_at(self, offset: int, producer_snapshot: bytes | None = None) -> None:
        """Empty the log and start it again at ``offset`` (Kafka's ``truncateFullyAndStartAt``), with the
        producers' state of ``producer_snapshot`` (a ``.snapshot`` file's bytes) there: how a replica that
        cannot follow from where it is (what it lacks is gone) starts over."""
        with self._write_mutex, self._lock.exclusive() as record:
            for base in self._segments.list():
                self._segments.delete(base)
            self._producers.remove_snapshots(self._producers.snapshot_offsets())
            if producer_snapshot is not None:
                self.storage.put(self._producers.snapshot_path(offset), producer_snapshot)
            self._segments.create(offset)
            writer = self._writer
            writer.config = self.config
            writer.active = writer.recover(record, offset)

    def flush(self) -> None:
        """fsync everything appended so far and record it as the recovery point."""
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            active.flush(int(time.time() * 1000))
            self._writer.write_state(record, active.state)
            self._writer.write_checkpoints(active.state)

    def _check_end(self, active: ActiveSegment, expected_end_offset: int | None) -> None:
        """Refuse a conditional append once the log, brought up to date under the write lock, ends elsewhere."""
        end = active.state.log_end_offset
        if expected_end_offset is not None and end != expected_end_offset:
            raise LogEndChangedError(
                f"{self.topic}-{self.partition} ends at offset {end}, not at {expected_end_offset} as the append "
                "expected: records were appended since; nothing was appended"
            )

    def _sync_for_write(self, record: LockedRecord) -> ActiveSegment:
        """Finish a swap a process died in, then bring the writer up to date with the state record."""
        self._complete_pending_swap(record)
        return self._writer.sync(record, self.config)

    @property
    def topic_id(self) -> str | None:
        return checkpoints.read_partition_metadata(self.storage, self._segments.path(checkpoints.PARTITION_METADATA))

    # -- maintenance: retention, delete-records, compaction ------------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        """What retention and the cleaner decide on, for every segment of the acknowledged view."""
        return segment_infos(self._segments, self.view())

    def roll(self) -> bool:
        """Roll the active segment now if it holds data (retention does this when everything qualifies)."""
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            if active.state.active_size == 0:
                return False
            self._writer.active = self._writer.roll(
                record, active, active.state.log_end_offset, int(time.time() * 1000)
            )
            return True

    def raise_log_start_offset(self, offset: int) -> int:
        """Kafka's DeleteRecords: records below ``offset`` stop being readable; returns the log start.

        Raises:
            InvalidOffsetError: ``offset`` is not an integer, or negative or past the log end (the high watermark).
        """
        offset = _integer_argument("offset", offset, "an offset (integer) from 0 to the high watermark")
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            state = active.state
            if not 0 <= offset <= state.log_end_offset:
                raise InvalidOffsetError(
                    f"cannot delete records of {self.topic}-{self.partition} below offset {offset}: accepted "
                    f"0 to the high watermark {state.log_end_offset}"
                )
            if offset > state.log_start_offset:
                active.state = replace(state, log_start_offset=offset)
                self._writer.write_state(record, active.state)
                self._writer.write_checkpoints(active.state)
            return active.state.log_start_offset

    def delete_segments(self, bases: Sequence[int]) -> int:
        """Retire the oldest segments: their files are renamed ``.deleted`` (removed later by
        ``remove_deleted_files``) and the log start moves to the first remaining segment.

        Raises:
            InvalidOffsetError: ``bases`` is not a prefix of the segments, or includes the active one.
        """
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            current = self._segments.list()
            if list(bases) != current[: len(bases)] or active.segment.base_offset in bases:
                raise InvalidOffsetError(
                    f"segments {list(bases)} of {self.topic}-{self.partition} are not its oldest inactive segments "
                    f"(segments: {current[:5]}{'...' if len(current) > 5 else ''}, active {active.segment.base_offset})"
                )
            for base in bases:
                self._segments.retire(base)
            remaining = self._segments.bases = current[len(bases) :]
            self._producers.remove_snapshots(o for o in self._producers.snapshot_offsets() if o < remaining[0])
            active.state = replace(
                active.state,
                log_start_offset=max(active.state.log_start_offset, remaining[0]),
                segments_generation=active.state.segments_generation + 1,
            )
            self._writer.write_state(record, active.state)
            self._writer.write_checkpoints(active.state)
            return active.state.log_start_offset

    def remove_deleted_files(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` files renamed more than ``file.delete.delay.ms`` ago; returns how many.

        The delay lets readers that opened a segment before it was retired finish with it.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return self._segments.remove_deleted_files(now, self.config.file_delete_delay_ms)

    def replace_segments(self, old_bases: Sequence[int], cleaned_base: int) -> None:
        """Swap compacted files in for ``old_bases``, crash-safely (Kafka's ``replaceSegments``, ``swap``).

        Raises:
            InvalidOffsetError: The old segments changed meanwhile (retention ran) or include the
                active segment; the cleaned files are then removed.
        """
        with self._write_mutex, self._lock.exclusive() as record:
            active = self._sync_for_write(record)
            current = self._segments.list()
            ok = (
                bool(old_bases)
                and old_bases[0] == cleaned_base
                and active.segment.base_offset not in old_bases
                and all(b in current for b in old_bases)
                and cleaned_files_ready(self._segments, cleaned_base)
            )
            if not ok:
                discard_cleaned(self._segments, cleaned_base)
                raise InvalidOffsetError(
                    f"cannot swap cleaned segment {cleaned_base} in for {list(old_bases)} of "
                    f"{self.topic}-{self.partition}: the segments changed or include the active one"
                )
            begin_swap(self._segments, cleaned_base, old_bases)
            self._complete_pending_swap(record)

    def compaction_scope(self) -> AbstractContextManager[PartitionLog]:
        """The log a compaction round works on and swaps its cleaned segments into: this one. (A log on an
        object store compacts a scratch copy of its sealed segments instead, and seals the result.)"""
        return nullcontext(self)

    def _complete_pending_swap(self, record: LockedRecord) -> None:
        """Finish a swap a process died in, and record that the segments changed. Runs under the write lock."""
        if complete_pending_swap(self._segments):
            state = read_state(record)
            if state is not None:
                self._writer.write_state(record, replace(state, segments_generation=state.segments_generation + 1))

    def recover(self) -> None:
        """Run Kafka's recovery now: revalidate from the recovery point, rebuild indexes, cut torn tails."""
        with self._write_mutex, self._lock.exclusive() as record:
            state = read_state(record)
            writer = self._writer
            writer.config = self.config
            writer.active = writer.recover(record, None if state is None else state.recovery_point)


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
