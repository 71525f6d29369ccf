"""Producer-state snapshots (``<offset>.snapshot``), Kafka's ``ProducerStateManager`` format.

Wire schema, big-endian::

    version           int16   = 1
    crc               uint32  CRC-32C of everything after this field
    producerCount     int32
    producers         [ProducerEntry], 46 bytes each:
      producerId            int64
      producerEpoch         int16
      lastSequence          int32
      lastOffset            int64
      offsetDelta           int32   lastOffset - first offset of the producer's last batch
      timestamp             int64   max timestamp of that batch
      coordinatorEpoch      int32
      currentTxnFirstOffset int64   -1 outside a transaction

The file name is the offset the snapshot covers up to, exclusive.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import crc32c as _crc32c
import numpy as np

from pysparklog.errors import CorruptRecordError, OutOfOrderSequenceError, ProducerFencedError
from pysparklog.storage.io import read_if_exists
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.records.codecs import CODEC_MASK
from pysparklog.storage.records.default_records import (
    CONTROL_FLAG_MASK,
    MAGIC_V2,
    TRANSACTIONAL_FLAG_MASK,
    ControlRecordType,
    control_record_type,
    first_control_record,
    parse_end_txn_marker_value,
)
from pysparklog.storage.records.memory_records import EntryTable
from pysparklog.storage.segment import Chunk, LogSegment, filename_prefix, parse_segment_name
from pysparklog.storage.transaction_index import AbortedTxn

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">hIi")  # version, crc, producerCount
_CRC_START = 6  # the CRC covers bytes from producerCount on
_ENTRY = struct.Struct(">qhiqiqiq")
NO_TXN_FIRST_OFFSET = -1
_END_MARKERS = (ControlRecordType.COMMIT, ControlRecordType.ABORT)


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer's state, as a snapshot stores it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET


def encode_snapshot(entries: list[ProducerSnapshotEntry]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(
        _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in entries
    )
    return struct.pack(">hI", SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes, *, file: str | None = None) -> list[ProducerSnapshotEntry]:
    """Parse a snapshot; a wrong version, length or CRC raises CorruptRecordError.

    Version and CRC errors carry Kafka's own ``CorruptSnapshotException`` message (in ``detail``),
    which tools that mirror Kafka's print.
    """
    if len(data) < _HEADER.size:
        raise CorruptRecordError(
            f"snapshot of {len(data)} bytes, shorter than its {_HEADER.size}-byte header", file=file, position=0
        )
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"Snapshot contained an unknown file version {version}", file=file, position=0)
    computed = _crc32c.crc32c(data[_CRC_START:])
    if computed != stored_crc:
        raise CorruptRecordError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}",
            file=file,
            position=2,
        )
    expected = _HEADER.size + count * _ENTRY.size
    if count < 0 or len(data) != expected:
        raise CorruptRecordError(
            f"snapshot declares {count} producers ({expected} bytes) but has {len(data)} bytes",
            file=file,
            position=_HEADER.size,
        )
    return [ProducerSnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)) for i in range(count)]


#: Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``: how many recent batches of a producer a
#: retried batch is recognised against. Here each retained entry is a run of batches with
#: consecutive sequences and offsets (see ``ProducerEntry.record``), so a retried append of many
#: batches is recognised whole, where Kafka needs one request per batch.
BATCHES_RETAINED = 5
_SEQUENCE_MODULUS = 2**31  # sequences are non-negative int32s that wrap to 0


def next_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapped as Kafka wraps sequences (``DefaultRecordBatch.incrementSequence``)."""
    return (sequence + increment) % _SEQUENCE_MODULUS


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer, as Kafka's ``BatchMetadata`` remembers it."""

    last_sequence: int
    last_offset: int
    offset_delta: int  # last offset - first offset
    timestamp: int  # the batch's max timestamp

    @property
    def first_sequence(self) -> int:
        return next_sequence(self.last_sequence, -self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerEntry:
    """What the log knows of one producer: its epoch and its last batches (Kafka's ``ProducerStateEntry``)."""

    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET

    @classmethod
    def from_snapshot(cls, entry: ProducerSnapshotEntry) -> ProducerEntry:
        batches: deque[BatchMetadata] = deque(maxlen=BATCHES_RETAINED)
        if entry.last_sequence >= 0:
            batches.append(BatchMetadata(entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp))
        return cls(
            entry.producer_id, entry.producer_epoch, batches, entry.coordinator_epoch, entry.current_txn_first_offset
        )

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=BATCHES_RETAINED),
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def to_snapshot(self) -> ProducerSnapshotEntry:
        """The snapshot form: only the last batch survives, as in Kafka's snapshots (-1s without one)."""
        last = self.batches[-1] if self.batches else None
        return ProducerSnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            last.last_sequence if last else -1,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            last.timestamp if last else -1,
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )

    def duplicate_of(self, epoch: int, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        """Where a batch with these sequences already is, if it repeats an appended one (Kafka's
        ``findDuplicateBatch``, which matches whole batches; a run matches any batch inside it, whose
        offsets follow from its sequences as each record took one sequence and one offset)."""
        if epoch != self.producer_epoch:
            return None
        length = (last_sequence - first_sequence) % _SEQUENCE_MODULUS
        for run in self.batches:
            start = (first_sequence - run.first_sequence) % _SEQUENCE_MODULUS
            if start + length <= run.offset_delta:
                first_offset = run.first_offset + start
                return BatchMetadata(last_sequence, first_offset + length, length, run.timestamp)
        return None

    def record(self, first_sequence: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        """Remember an appended batch, extending the last run when the batch continues it."""
        last = self.batches[-1] if self.batches else None
        if (
            last is not None
            and first_sequence == next_sequence(last.last_sequence, 1)
            and last_offset - offset_delta == last.last_offset + 1
        ):
            self.batches[-1] = BatchMetadata(
                next_sequence(first_sequence, offset_delta),
                last_offset,
                last.offset_delta + offset_delta + 1,
                max(last.timestamp, timestamp),
            )
        else:
            self.batches.append(
                BatchMetadata(next_sequence(first_sequence, offset_delta), last_offset, offset_delta, timestamp)
            )


def check_sequence(entry: ProducerEntry | None, producer_id: int, epoch: int, first_sequence: int) -> None:
    """Kafka's ``ProducerAppendInfo`` checks of a new (not duplicate) idempotent batch.

    An older epoch is fenced. A newer epoch must start at sequence 0. Within an epoch the batch
    must follow the last one; a producer the log has no state for (never seen, or removed with old
    segments) may start anywhere, as Kafka accepts it.

    Raises:
        ProducerFencedError: ``epoch`` is older than the producer's current one.
        OutOfOrderSequenceError: The sequence leaves a gap or goes back.
    """
    if entry is None:
        return
    if epoch < entry.producer_epoch:
        raise ProducerFencedError(
            f"producer {producer_id} epoch {epoch} is fenced: the log has seen epoch {entry.producer_epoch}"
        )
    if epoch > entry.producer_epoch:
        if first_sequence != 0:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} starts epoch {epoch} at sequence {first_sequence}; a new epoch starts at 0"
            )
        return
    if entry.batches:
        expected = next_sequence(entry.batches[-1].last_sequence, 1)
        if first_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} epoch {epoch}: sequence {first_sequence} is out of order, expected "
                f"{expected} (last appended sequence {entry.batches[-1].last_sequence})"
            )


def check_marker_epoch(entry: ProducerEntry | None, producer_id: int, epoch: int) -> None:
    """Kafka's ``ProducerAppendInfo.appendEndTxnMarker`` check: a marker may not carry an epoch older
    than the producer's, so a coordinator that has moved the producer on (fencing an older session)
    cannot be overruled by a late marker of the old one.

    Raises:
        ProducerFencedError: ``epoch`` is older than the producer's current one.
    """
    if entry is not None and epoch < entry.producer_epoch:
        raise ProducerFencedError(
            f"transaction marker of producer {producer_id} with epoch {epoch} is fenced: the log has seen epoch "
            f"{entry.producer_epoch}"
        )


def _entry_at_epoch(producers: dict[int, ProducerEntry], producer_id: int, epoch: int) -> ProducerEntry:
    """The producer's entry, created if new; a new epoch forgets the batches of the old one, as Kafka does."""
    entry = producers.get(producer_id)
    if entry is None:
        entry = producers[producer_id] = ProducerEntry(producer_id, epoch)
    if epoch != entry.producer_epoch:
        entry.producer_epoch = epoch
        entry.batches.clear()
    return entry


def apply_run(
    producers: dict[int, ProducerEntry],
    producer_id: int,
    epoch: int,
    first_sequence: int,
    first_offset: int,
    last_offset: int,
    max_timestamp: int,
    *,
    transactional: bool,
) -> None:
    """Record appended data batches of one producer whose sequences and offsets are consecutive."""
    entry = _entry_at_epoch(producers, producer_id, epoch)
    if transactional and entry.current_txn_first_offset == NO_TXN_FIRST_OFFSET:
        entry.current_txn_first_offset = first_offset
    if first_sequence >= 0:
        entry.record(first_sequence, last_offset, last_offset - first_offset, max_timestamp)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction an end marker closed (Kafka's ``CompletedTxn``): its first offset, the marker's
    offset, and whether the marker aborted it."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


def _apply_batch(
    producers: dict[int, ProducerEntry],
    entries: EntryTable,
    i: int,
    last_offset: int,
    *,
    transactional: bool,
    end_marker_coordinator_epoch: int | None = None,
    end_marker_type: ControlRecordType | None = None,
) -> CompletedTxn | None:
    """Record one appended producer batch (entry ``i`` of ``entries``) in ``producers``.

    Args:
        producers: The state to update, by producer id.
        entries: The batches' entries.
        i: Which of them.
        last_offset: The batch's last offset in the log.
        transactional: Whether the batch is transactional.
        end_marker_coordinator_epoch: For a control batch, the coordinator epoch of its end-transaction
            marker (None for a data batch).
        end_marker_type: For a control batch holding an end-transaction marker, COMMIT or ABORT.

    Returns:
        The transaction the batch completed: an end marker closing a transaction that has data (Kafka
        emits none for a marker without one, which changes no last stable offset); else None.
    """
    pid, epoch = int(entries.producer_ids[i]), int(entries.producer_epochs[i])
    if end_marker_coordinator_epoch is not None:
        entry = _entry_at_epoch(producers, pid, epoch)
        first_offset = entry.current_txn_first_offset
        entry.coordinator_epoch = end_marker_coordinator_epoch
        entry.current_txn_first_offset = NO_TXN_FIRST_OFFSET
        if end_marker_type is None or first_offset < 0:
            return None
        return CompletedTxn(pid, first_offset, last_offset, end_marker_type == ControlRecordType.ABORT)
    delta = int(entries.last_offset_deltas[i])
    apply_run(
        producers,
        pid,
        epoch,
        int(entries.base_sequences[i]),
        last_offset - delta,
        last_offset,
        int(entries.max_timestamps[i]),
        transactional=transactional,
    )
    return None


class OpenTransactions:
    """The producers' open transactions (Kafka's ``ongoingTxns``): what the first unstable offset and
    the last stable offset an abort records are derived from.

    Args:
        first_offsets: The first offset of each open transaction, by producer id.
    """

    def __init__(self, first_offsets: dict[int, int]) -> None:
        self._first_offsets = first_offsets

    @classmethod
    def of(cls, producers: Mapping[int, ProducerEntry]) -> OpenTransactions:
        return cls({pid: e.current_txn_first_offset for pid, e in producers.items() if e.current_txn_first_offset >= 0})

    def copy(self) -> OpenTransactions:
        return OpenTransactions(dict(self._first_offsets))

    def first_unstable_offset(self) -> int:
        """The first offset of the earliest open transaction; ``NO_TXN_FIRST_OFFSET`` when none is open."""
        return min(self._first_offsets.values(), default=NO_TXN_FIRST_OFFSET)

    def follow(self, entry: ProducerEntry, completed: CompletedTxn | None) -> AbortedTxn | None:
        """Take in a transactional or control batch just applied to ``entry``.

        Returns:
            The ``.txnindex`` entry when the batch aborted a transaction, with the last stable offset
            Kafka records (``ProducerStateManager.lastStableOffset``): the first offset of the earliest
            transaction of another producer still open, else the offset after the marker.
        """
        if entry.current_txn_first_offset >= 0:
            self._first_offsets[entry.producer_id] = entry.current_txn_first_offset
        else:
            self._first_offsets.pop(entry.producer_id, None)
        if completed is None or not completed.aborted:
            return None
        others = (first for pid, first in self._first_offsets.items() if pid != completed.producer_id)
        stable = min(others, default=completed.last_offset + 1)
        return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, stable)


def snapshot_entries(producers: Mapping[int, ProducerEntry]) -> list[ProducerSnapshotEntry]:
    """The producers as a snapshot holds them, by producer id."""
    return [producers[pid].to_snapshot() for pid in sorted(producers)]


class ProducerStateTracker:
    """Producer state of one partition, rebuilt from the last snapshot and the batches after it.

    Kafka keeps this state in memory and snapshots it on every roll; here any process may roll, so
    the state is replayed from the files when a snapshot is due or an idempotent append needs it.

    Args:
        segments: The partition's segments, whose directory holds the ``.snapshot`` files too.
    """

    def __init__(self, segments: LogSegments) -> None:
        self.segments = segments
        self.storage = segments.storage

    def snapshot_offsets(self) -> list[int]:
        names = self.segments.names()
        return sorted(o for o in (parse_segment_name(n, SNAPSHOT_SUFFIX) for n in names) if o is not None)

    def snapshot_path(self, offset: int) -> str:
        return self.segments.path(filename_prefix(offset) + SNAPSHOT_SUFFIX)

    def remove_snapshots(self, offsets: Iterable[int]) -> None:
        """Remove the snapshots at ``offsets`` (another process removing one too is no error)."""
        for offset in offsets:
            self.storage.delete(self.snapshot_path(offset))

    def load(
        self, bases: list[int], active_base: int, active_size: int, offset: int, *, remove_unreadable: bool = False
    ) -> dict[int, ProducerEntry]:
        """Producer state as of ``offset`` (exclusive): the latest snapshot below it plus a replay."""
        return self.load_replayed(bases, active_base, active_size, offset, remove_unreadable=remove_unreadable)[0]

    def write_snapshot(self, offset: int, producers: Mapping[int, ProducerEntry], bases: list[int]) -> None:
        """Snapshot the state as of ``offset`` (not a segment base), replacing an earlier such snapshot: at
        most one snapshot between segment bases is kept, as Kafka removes stray ones."""
        self.storage.put(self.snapshot_path(offset), encode_snapshot(snapshot_entries(producers)))
        at_bases = set(bases)
        below = max((b for b in bases if b <= offset), default=0)
        self.remove_snapshots(o for o in self.snapshot_offsets() if below < o < offset and o not in at_bases)

    def load_replayed(
        self, bases: list[int], active_base: int, active_size: int, offset: int, *, remove_unreadable: bool = False
    ) -> tuple[dict[int, ProducerEntry], int]:
        """``load``, and how many runs of producer batches it replayed after the snapshot it started from.

        A snapshot that cannot be read is passed over for the one before it, and removed when
        ``remove_unreadable`` (a writer holding the partition's lock), as Kafka's ``ProducerStateManager``
        deletes a corrupt snapshot and loads the previous one.
        """
        start = 0
        producers: dict[int, ProducerEntry] = {}
        for candidate in reversed([o for o in self.snapshot_offsets() if o <= offset]):
            entries = self._read_snapshot(candidate)
            if entries is not None:
                start, producers = candidate, {e.producer_id: ProducerEntry.from_snapshot(e) for e in entries}
                break
            if remove_unreadable:
                self.remove_snapshots([candidate])
        runs = 0
        for base, next_base in zip(bases, [*bases[1:], None][: len(bases)], strict=True):
            if base >= offset or (next_base is not None and next_base <= start):
                continue
            segment = self.segments.get(base)
            end = active_size if base == active_base else segment.size()
            runs += replay_segment(producers, segment, 0, end, start, offset).runs
        return producers, runs

    def _read_snapshot(self, offset: int) -> list[ProducerSnapshotEntry] | None:
        """The entries of ``<offset>.snapshot``; None when it is gone or corrupt."""
        path = self.snapshot_path(offset)
        data = read_if_exists(self.storage, path)
        try:
            return decode_snapshot(data, file=path) if data is not None else None
        except CorruptRecordError:
            return None

    def state_at(
        self, bases: list[int], active_base: int, active_size: int, offset: int
    ) -> list[ProducerSnapshotEntry]:
        """Producer entries as of ``offset`` (exclusive), as a snapshot holds them, by producer id."""
        return snapshot_entries(self.load(bases, active_base, active_size, offset))

    def take_snapshot(
        self, bases: list[int], active_base: int, active_size: int, offset: int
    ) -> dict[int, ProducerEntry]:
        """Write ``<offset>.snapshot`` as Kafka does when a segment rolls; returns the state it holds."""
        producers = self.load(bases, active_base, active_size, offset)
        self.storage.put(self.snapshot_path(offset), encode_snapshot(snapshot_entries(producers)))
        return producers


@dataclass(slots=True)
class Replayed:
    """What a replay went over.

    Attributes:
        aborted: With ``open_txns``, the ``.txnindex`` entries of the transactions the batches aborted, in log
            order, as Kafka's recovery (``LogSegment.recover``) derives them batch by batch; else empty.
        runs: The runs of producer batches applied (a writer's consecutive batches are one run): what a replay
            costs, one Python step per run.
    """

    aborted: list[AbortedTxn] = field(default_factory=list)
    runs: int = 0


def replay_segment(
    producers: dict[int, ProducerEntry],
    segment: LogSegment,
    position: int,
    end: int,
    start: int,
    stop: int,
    open_txns: OpenTransactions | None = None,
) -> Replayed:
    """Apply the producer batches of ``segment`` between byte ``position`` and ``end`` whose last offset
    lies in [start, stop).

    Args:
        open_txns: Kept up to date with the transactions the batches open and close, when given.
    """
    replayed = Replayed()
    for chunk in segment.chunks(position, end, verify_crc=False):
        _replay(producers, chunk, start, stop, open_txns, replayed)
    return replayed


def _replay(
    producers: dict[int, ProducerEntry],
    chunk: Chunk,
    start: int,
    end: int,
    open_txns: OpenTransactions | None,
    replayed: Replayed,
) -> None:
    """Apply the producer batches of ``chunk`` whose last offset lies in [start, end).

    Consecutive data batches of one producer that continue each other (``_continuing``) are applied
    as one run, as the producer's state records them: a writer's batches mostly come so, and the
    replay then costs Python per run, not per batch.
    """
    e = chunk.entries
    last_offsets = e.last_offsets
    producer_ids = e.producer_ids
    mask = (e.magics >= MAGIC_V2) & (producer_ids >= 0) & (last_offsets >= start) & (last_offsets < end)
    transactional = e.is_transactional
    followed = transactional | e.is_control
    indexes = np.flatnonzero(mask)
    if len(indexes) == 0:
        return
    firsts = np.flatnonzero(np.concatenate(([True], ~_continuing(e, indexes, last_offsets))))
    lasts = np.append(firsts[1:], len(indexes)) - 1
    replayed.runs += len(firsts)
    for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
        i = int(indexes[first])
        if first == last:
            completed = apply_entry(producers, chunk.buf, e, i, int(last_offsets[i]))
        else:
            completed = None
            apply_run(
                producers,
                int(producer_ids[i]),
                int(e.producer_epochs[i]),
                int(e.base_sequences[i]),
                int(last_offsets[i] - e.last_offset_deltas[i]),
                int(last_offsets[indexes[last]]),
                int(e.max_timestamps[indexes[first : last + 1]].max()),
                transactional=bool(transactional[i]),
            )
        if open_txns is not None and followed[i]:
            entry = open_txns.follow(producers[int(producer_ids[i])], completed)
            if entry is not None:
                replayed.aborted.append(entry)


def _continuing(e: EntryTable, indexes: np.ndarray, last_offsets: np.ndarray) -> np.ndarray:
    """For each batch of ``indexes`` after the first, whether it continues the one before: a data batch
    of the same producer, epoch and transactionality at the next offset and the next sequence, which
    ``ProducerEntry.record`` merges into the same run."""
    before, after = indexes[:-1], indexes[1:]
    data = ~e.is_control
    transactional = e.is_transactional
    pids, epochs, deltas, sequences = e.producer_ids, e.producer_epochs, e.last_offset_deltas, e.base_sequences
    return np.asarray(
        data[before]
        & data[after]
        & (pids[before] == pids[after])
        & (epochs[before] == epochs[after])
        & (transactional[before] == transactional[after])
        & (last_offsets[after] - deltas[after] == last_offsets[before] + 1)
        & (sequences[before] >= 0)
        & (sequences[after] == (sequences[before] + deltas[before] + 1) % _SEQUENCE_MODULUS)
    )


def apply_entry(
    producers: dict[int, ProducerEntry], buf: np.ndarray, entries: EntryTable, i: int, last_offset: int
) -> CompletedTxn | None:
    """Record batch ``i`` of ``entries`` (in ``buf``) in ``producers``, reading a control batch's marker."""
    marker_epoch = None
    marker_type = None
    attributes = int(entries.attributes[i]) if entries.magics[i] >= MAGIC_V2 else 0
    if attributes & CONTROL_FLAG_MASK:
        # An end-transaction marker closes the producer's transaction and carries the coordinator epoch.
        marker = _control_record(buf, entries, i)
        previous = producers.get(int(entries.producer_ids[i]))
        marker_epoch = previous.coordinator_epoch if previous else -1
        if marker is not None:
            control_type = control_record_type(marker[0])
            if control_type in _END_MARKERS:
                marker_epoch = parse_end_txn_marker_value(marker[1])
                marker_type = control_type
    return _apply_batch(
        producers,
        entries,
        i,
        last_offset,
        transactional=bool(attributes & TRANSACTIONAL_FLAG_MASK),
        end_marker_coordinator_epoch=marker_epoch,
        end_marker_type=marker_type,
    )


def _control_record(buf: np.ndarray, entries: EntryTable, i: int) -> tuple[bytes | None, bytes | None] | None:
    """Key and value of control batch ``i``'s record: read in place (a replay meets a marker per
    transaction), or decoded when the batch is compressed, which Kafka's own markers never are."""
    position = int(entries.positions[i])
    try:
        return first_control_record(buf[position : position + int(entries.sizes[i])].tobytes())
    except CorruptRecordError:
        if not int(entries.attributes[i]) & CODEC_MASK:
            raise
    marker = next(decode_entries(buf, entries.select(slice(i, i + 1)), topic="", partition=0), None)
    return None if marker is None else (marker.column("key")[0].as_py(), marker.column("value")[0].as_py())
