"""Log compaction (``cleanup.policy=compact``): Kafka's log cleaner, run by whoever calls it.

A compacted topic keeps, for every key, at least the last record written with it, so that a reader
starting from the beginning rebuilds the latest state. The rules are Kafka's (``LogCleaner``,
``LogCleanerManager``, ``MemoryRecords.filterTo``), so a log compacted here reads as a broker's would:

* **What is cleaned.** From the first dirty offset (the partition's entry in the log directory's
  ``cleaner-offset-checkpoint``, else the log start offset) up to the first uncleanable offset: the
  base of the active segment, which is never touched, or of the first dirty segment holding a record
  newer than ``min.compaction.lag.ms``. (Kafka also stops at the last stable offset; an open
  transaction's records are kept here instead, below.)
* **When.** A log is due when its dirty bytes exceed ``min.cleanable.dirty.ratio`` of its bytes, or
  when the first batch of its oldest dirty segment is older than ``max.compaction.lag.ms``; the
  dirtiest log is cleaned first.
* **The offset map.** Every keyed record of the dirty range sets its key's last offset (records of
  aborted transactions and control records do not). The map holds a 128-bit hash per key in a fixed
  budget (``offset_map``); when it fills, the round ends at the last offset mapped.
* **Which records survive**, in every segment from the first up to the end of the map: records past
  the map's last offset; otherwise records with a key whose offset is the key's last, if they have a
  value or are a tombstone before its delete horizon. Keyless records go. Offsets never change: a
  rewritten batch keeps its base offset, its last offset delta, its producer id, epoch and base
  sequence, its partition leader epoch and its codec.
* **Tombstones** survive ``delete.retention.ms`` after the round that first rewrites their batch:
  that round sets the batch's delete-horizon attribute (0x40) and its base timestamp to ``now +
  delete.retention.ms``, rebasing the records' timestamp deltas; a later round drops them once
  ``now`` reaches the horizon.
* **Transactions.** Records of a transaction whose abort marker lies in the cleaned range are
  dropped; markers stay until no record of their transaction remains and their own horizon has
  passed. Records of a transaction whose marker is past the range (or not written yet) are kept and
  do not replace older values of their keys, so an abort that comes later loses nothing.
* **Empty batches** are kept (a header without records) for the last batch of each active producer,
  so its sequence survives, and for the batch ending at the round's upper bound.
* **Legacy (magic 0/1) entries** are kept as they are: only a broker older than 0.11 wrote them.

Cleaned segments are written beside the originals as ``<base>.log.cleaned`` (with ``.index.cleaned``,
``.timeindex.cleaned`` and ``.txnindex.cleaned``, rewritten as Kafka's cleaner does: the group's
aborted transactions that still have a batch, read from ``.txnindex`` files rebuilt first when lost or
damaged), grouped so each stays within
``segment.bytes`` and the index limits, fsynced, given the modification time of the last segment they
replace, and swapped in by
``PartitionLog.replace_segments`` (crash-safe, under the write lock). Appends and reads go on
meanwhile; one cleaner at a time works on a partition (``pysparklog.cleaner.lock``), and the cleaner
checkpoint moves only once every group of the round is swapped in.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from pysparklog.errors import CorruptRecordError, InvalidOffsetError, PySparkLogError, StorageConflictError
from pysparklog.storage import checkpoints
from pysparklog.storage.config import INT_MAX, LONG_MAX, LogConfig
from pysparklog.storage.io import LOG_DIR_LOCK, Storage
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_reads import SegmentInfo
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.offset_map import OffsetMap, key_hashes
from pysparklog.storage.producer_state import ProducerStateTracker
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.arrow_records import binary_buffers, decode_entries, encode_planned, record_schema
from pysparklog.storage.records.default_records import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    ControlRecordType,
)
from pysparklog.storage.records.memory_records import EntryTable
from pysparklog.storage.retention import RetentionResult, run_retention
from pysparklog.storage.segment import CLEANED_SUFFIX, Chunk, LogSegment
from pysparklog.storage.segment_indexes import IndexBuild
from pysparklog.storage.topics import Progress
from pysparklog.storage.transaction_index import AbortedTxn, entries_of

DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size: the offset map's budget
PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000  # Kafka's producer.id.expiration.ms
CLEANER_LOCK = "pysparklog.cleaner.lock"  # held by the one cleaner working on a partition

# What becomes of each batch of a cleaned segment.
_DROP = 0
_ORIGINAL = 1  # copied byte for byte
_REWRITE = 2  # re-encoded with the records that survive, or with a delete horizon
_EMPTY = 3  # a header without records, kept for its offsets and producer fields

# The attributes an empty batch keeps (``DefaultRecordBatch.writeEmptyHeader``): no codec, no horizon.
_EMPTY_BATCH_ATTRIBUTES = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
_EMPTY_CONTROL_BATCH = -2  # a control batch whose records a previous round removed
_NOT_A_MARKER = -3


def compacts(config: LogConfig) -> bool:
    """Whether ``cleanup.policy`` includes ``compact``."""
    return "compact" in config.cleanup_policy


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """What compaction could clean in a log now, and whether it is due (Kafka's ``LogToClean``).

    Attributes:
        first_dirty: The first offset not compacted yet: the cleaner checkpoint, else the log start.
        first_uncleanable: Where a round stops: the base of the active segment, or of the first dirty
            segment holding a record newer than ``min.compaction.lag.ms``.
        clean_bytes: Bytes of the segments below ``first_dirty``.
        cleanable_bytes: Bytes of the segments from the one holding ``first_dirty`` up to
            ``first_uncleanable``.
        compaction_delay_ms: How long ago the first batch of the oldest dirty segment passed
            ``max.compaction.lag.ms``; 0 when none has.
        min_cleanable_dirty_ratio: The log's ``min.cleanable.dirty.ratio``.
    """

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int
    min_cleanable_dirty_ratio: float

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def due(self) -> bool:
        """Kafka's trigger: past ``max.compaction.lag.ms`` with something to clean, or dirtier than the ratio."""
        overdue = self.compaction_delay_ms > 0 and self.cleanable_bytes > 0
        return overdue or self.dirty_ratio > self.min_cleanable_dirty_ratio


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What ``clean_log`` did to one partition.

    Attributes:
        topic: The partition's topic.
        partition: Its number.
        cleaned: True when a round ran and its segments were swapped in.
        reason: What happened, in words: why nothing was cleaned, or "cleaned".
        cleanable: The range the decision was taken on; None when the log was not looked at.
        end_offset: The cleaner checkpoint after the round (where the next one starts); -1 when no
            round ran.
        segments_cleaned: Segments replaced.
        segments_written: Cleaned segments that replaced them.
        records_read: Records in the replaced segments.
        records_kept: Records in the cleaned segments.
        bytes_read: Size of the replaced segments.
        bytes_written: Size of the cleaned segments.
    """

    topic: str
    partition: int
    cleaned: bool
    reason: str
    cleanable: CleanableRange | None = None
    end_offset: int = -1
    segments_cleaned: int = 0
    segments_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass(frozen=True, slots=True)
class CleanerReport:
    """What ``run_cleaner`` did to one partition.

    Attributes:
        topic: The partition's topic.
        partition: Its number.
        retention: What retention did; None when it failed.
        compaction: What compaction did, when the topic compacts and the log was due; None otherwise.
        error: Why retention or compaction failed (a corrupt segment...): the partition is left as
            it was and the pass goes on with the others, as Kafka's cleaner marks a partition
            uncleanable and goes on.
    """

    topic: str
    partition: int
    retention: RetentionResult | None
    compaction: CleanResult | None = None
    error: str | None = None


# -- the cleaner checkpoint ------------------------------------------------------------------------


def read_cleaner_checkpoint(storage: Storage, log_dir: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): first dirty offset}`` of a log directory's ``cleaner-offset-checkpoint``.

    A corrupt file reads as empty: compaction then starts again from each log's start, which is
    always correct, only slower.
    """
    try:
        return checkpoints.read_offset_checkpoint(storage, f"{log_dir}/{checkpoints.CLEANER_OFFSET_CHECKPOINT}")
    except CorruptRecordError:
        return {}


def _write_cleaner_checkpoint(log: PartitionLog, offset: int) -> None:
    """Set one partition's entry: a read-modify-write of a file every partition shares, so under the
    log directory's lock, the file replaced atomically (as ``LogDirCheckpoints.update`` does)."""
    storage, log_dir = log.storage, log.checkpoint_dir
    lock = storage.lock(f"{log_dir}/{LOG_DIR_LOCK}")
    try:
        with lock.exclusive():
            offsets = read_cleaner_checkpoint(storage, log_dir)
            if offsets.get((log.topic, log.partition)) != offset:
                offsets[(log.topic, log.partition)] = offset
                path = f"{log_dir}/{checkpoints.CLEANER_OFFSET_CHECKPOINT}"
                checkpoints.write_offset_checkpoint(storage, path, offsets)
    finally:
        lock.close()


# -- choosing what to clean ------------------------------------------------------------------------


def _floor_index(segments: list[SegmentInfo], offset: int) -> int:
    """Index of the segment holding ``offset`` (the last whose base is <= it; 0 below the first)."""
    bases = [s.base_offset for s in segments]
    return max(int(np.searchsorted(bases, offset, side="right")) - 1, 0)


def _first_batch_timestamp(log: Log, segment: SegmentInfo) -> int:
    """The max timestamp of the segment's first batch (Kafka's ``rollingBasedTimestamp``), -1 when none."""
    first = next(log.segment(segment.base_offset).chunks(0, segment.size, max_bytes=4096, verify_crc=False), None)
    return int(first.entries.max_timestamps[0]) if first is not None else -1


def _cleanable_range(
    log: Log,
    segments: list[SegmentInfo],
    log_start: int,
    checkpoint: int | None,
    config: LogConfig,
    now: int,
) -> CleanableRange:
    """Kafka's ``cleanableOffsets`` and ``LogToClean`` over the segments of the acknowledged view."""
    log_end = segments[-1].next_base
    first_dirty = checkpoint if checkpoint is not None else log_start
    if not log_start <= first_dirty <= log_end:
        first_dirty = log_start  # segments were deleted or truncated past it: clean everything again
    dirty = segments[_floor_index(segments, first_dirty) : -1]  # the active segment is never cleaned
    # As in Kafka, nothing at or past the last stable offset is cleaned: a record of a transaction
    # still open must not replace an older value a read_committed reader still sees.
    uncleanable = min(log_end, log.last_stable_offset, segments[-1].base_offset)
    if config.min_compaction_lag_ms > 0:
        recent = [s.base_offset for s in dirty if s.largest_timestamp > now - config.min_compaction_lag_ms]
        uncleanable = min([uncleanable, *recent])
    first_uncleanable = segments[_floor_index(segments, uncleanable)].base_offset
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    # The segments holding [first dirty, first uncleanable): none when the lag stops the round at or
    # below the first dirty offset.
    lowest = min(first_dirty, first_uncleanable)
    cleanable_bytes = sum(s.size for s in dirty if s.next_base > lowest and s.base_offset < first_uncleanable)
    clean_until = now - config.max_compaction_lag_ms
    # Only read the first batches when a timestamp could be older than that (not with the default lag).
    stamps = [t for t in (_first_batch_timestamp(log, s) for s in dirty) if t > 0] if clean_until > 0 else []
    earliest = min(stamps, default=LONG_MAX)
    delay = clean_until - earliest if earliest < clean_until else 0
    return CleanableRange(
        first_dirty,
        max(first_dirty, first_uncleanable),
        clean_bytes,
        cleanable_bytes,
        delay,
        config.min_cleanable_dirty_ratio,
    )


def cleanable_range(log: Log, now_ms: int | None = None) -> CleanableRange | None:
    """What compaction could clean in ``log`` now; None when the log has no segment."""
    segments = log.segment_infos()
    if not segments:
        return None
    local = log.local
    checkpoint = read_cleaner_checkpoint(local.storage, local.checkpoint_dir).get((log.topic, log.partition))
    now = _now(now_ms)
    return _cleanable_range(log, segments, log.log_start_offset, checkpoint, log.config, now)


def cleanable_logs(logs: list[Log], now_ms: int | None = None) -> list[tuple[Log, CleanableRange]]:
    """The logs of compacted topics that are due for compaction, dirtiest first (Kafka's order)."""
    now = _now(now_ms)
    due = []
    for log in logs:
        if not compacts(log.config):
            continue
        cleanable = cleanable_range(log, now)
        if cleanable is not None and cleanable.due:
            due.append((log, cleanable))
    return _dirtiest_first(due)


def _dirtiest_first(due: list[tuple[Log, CleanableRange]]) -> list[tuple[Log, CleanableRange]]:
    return sorted(due, key=lambda pair: (-pair[1].dirty_ratio, -pair[1].compaction_delay_ms))


# -- transactions ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Transactions:
    """What the markers of the cleaned range say about its transactional batches, by batch last offset.

    Attributes:
        aborted: Data batches of aborted transactions: dropped, and left out of the offset map.
        undetermined: Data batches of transactions whose marker is not in the range: kept, and left
            out of the offset map so that they replace no older value before they commit.
        discardable_markers: Control batches the cleaner may remove once their horizon passes: end
            markers whose transaction has no batch left, and control batches already emptied.
    """

    aborted: np.ndarray
    undetermined: np.ndarray
    discardable_markers: np.ndarray

    def is_aborted(self, last_offsets: np.ndarray) -> np.ndarray:
        return _find(self.aborted, last_offsets)[1]

    def unmapped(self, last_offsets: np.ndarray) -> np.ndarray:
        """Batches whose records stay out of the offset map."""
        return np.asarray(_find(self.aborted, last_offsets)[1] | _find(self.undetermined, last_offsets)[1])

    def is_discardable_marker(self, last_offsets: np.ndarray) -> np.ndarray:
        return _find(self.discardable_markers, last_offsets)[1]


def _find(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, found) of each of ``keys`` in the sorted array ``sorted_keys``; the index is meaningless
    where not found."""
    if not len(sorted_keys):
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    i = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return i, np.asarray(sorted_keys[i] == keys)


def _control_types(chunk: Chunk, entries: EntryTable, file: str) -> np.ndarray:
    """The type of each control batch's (first) control record, ``_EMPTY_CONTROL_BATCH`` for a batch without."""
    records = _decode(chunk, entries, include_headers=False, file=file)
    counts = entries.record_counts
    first = np.cumsum(counts) - counts
    key_offsets, key_valid, key_data = binary_buffers(records.column("key"), "key")
    types = np.full(len(entries), _EMPTY_CONTROL_BATCH, dtype=np.int64)
    has = np.flatnonzero(counts > 0)
    start = key_offsets[first[has]].astype(np.int64)
    long_enough = (key_valid[first[has]] != 0) & (key_offsets[first[has] + 1] - start >= 4)
    # The key is (version int16, type int16); too short a key reads as an unknown type, as in Kafka.
    padded = np.concatenate((key_data, np.zeros(4, np.uint8)))
    type_id = (padded[start + 2].astype(np.int64) << 8) | padded[start + 3]
    types[has] = np.where(long_enough, np.where(type_id >= 1 << 15, type_id - (1 << 16), type_id), -1)
    return types


def _scan_transactions(log: PartitionLog, segments: list[SegmentInfo]) -> _Transactions:
    """Find the transactional and control batches of ``segments`` and resolve each transaction by
    its producer's next end marker. Only headers are read, and the records of control batches."""
    parts = []
    for info in segments:
        segment = log.segment(info.base_offset)
        for chunk in segment.chunks(0, info.size, verify_crc=False):
            e = chunk.entries
            txn = e.select(e.is_transactional | e.is_control)
            if len(txn) == 0:
                continue
            control = txn.is_control
            types = np.full(len(txn), _NOT_A_MARKER, dtype=np.int64)
            if control.any():
                types[control] = _control_types(chunk, txn.select(control), segment.log_path)
            parts.append(np.column_stack((txn.producer_ids, txn.last_offsets, control, types)))
    if not parts:
        empty = np.empty(0, np.int64)
        return _Transactions(empty, empty, empty)
    rows = np.concatenate(parts)
    aborted, undetermined, discardable = [], [], []
    for producer_id in np.unique(rows[:, 0]).tolist():  # one step per producer, not per batch
        mine = rows[rows[:, 0] == producer_id]
        last, control, types = mine[:, 1], mine[:, 2] != 0, mine[:, 3]
        ends = control & ((types == ControlRecordType.ABORT) | (types == ControlRecordType.COMMIT))
        marker_last, marker_type = last[ends], types[ends]
        data_last = last[~control]
        # A transaction's batches are the producer's data batches up to its next end marker.
        following = np.searchsorted(marker_last, data_last)
        closed = following < len(marker_last)
        aborted.append(data_last[closed][marker_type[following[closed]] == ControlRecordType.ABORT])
        undetermined.append(data_last[~closed])
        has_batches = np.bincount(following[closed], minlength=len(marker_last)) > 0
        discardable += [marker_last[~has_batches], last[control & (types == _EMPTY_CONTROL_BATCH)]]
    return _Transactions(*(np.sort(np.concatenate(a)) for a in (aborted, undetermined, discardable)))


# -- the offset map --------------------------------------------------------------------------------


def _decode(chunk: Chunk, entries: EntryTable, *, include_headers: bool, file: str) -> pa.RecordBatch:
    """The records of ``entries`` as one Arrow batch (decode_entries gives one per run of a magic)."""
    batches = list(
        decode_entries(
            chunk.buf,
            entries,
            topic="",
            partition=0,
            include_headers=include_headers,
            file=file,
            base_position=chunk.position,
        )
    )
    if len(batches) == 1:
        return batches[0]
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=record_schema(include_headers))
    return pa.concat_batches(batches)


def _build_offset_map(
    log: PartitionLog,
    dirty: list[SegmentInfo],
    first_dirty: int,
    transactions: _Transactions,
    offset_map: OffsetMap,
) -> int:
    """Map every key of the dirty segments to its last offset (Kafka's ``buildOffsetMap``).

    Returns:
        The last offset the map covers: the end of the dirty range less one, or, when the map filled
        up, the last offset before the record that found it full.
    """
    latest = first_dirty - 1
    for info in dirty:
        segment = log.segment(info.base_offset)
        start = 0
        if info.base_offset < first_dirty:  # the segment holding the first dirty offset: skip its clean part
            found = segment.translate_offset(first_dirty, info.size)
            start = found[0] if found is not None else info.size
        for chunk in segment.chunks(start, info.size):
            e = chunk.entries
            last = e.last_offsets
            considered = last >= first_dirty
            mapped = considered & ~e.is_control & ~transactions.unmapped(last)
            records = _decode(chunk, e.select(mapped), include_headers=False, file=segment.log_path)
            offsets = records.column("offset").to_numpy()
            key_offsets, key_valid, key_data = binary_buffers(records.column("key"), "key")
            eligible = (key_valid != 0) & (offsets >= first_dirty)
            stop = offset_map.put(*key_hashes(key_offsets, key_data), offsets, eligible)
            if stop < len(offsets):
                # Full: the batches wholly before the refused record, and the records put, are covered.
                refused = offsets[stop]
                before = last[considered & (last < refused)]
                put = offsets[:stop][eligible[:stop]]
                return max(latest, int(before.max(initial=latest)), int(put.max(initial=latest)))
            latest = max(latest, int(last[considered].max(initial=latest)))
        latest = max(latest, info.next_base - 1)  # offsets missing at the end of the segment are covered too
    return latest


# -- cleaning --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Round:
    """What every batch of a round is judged by."""

    now: int
    delete_retention_ms: int
    offset_map: OffsetMap
    latest: int  # the offset map's last offset: later records are all kept
    upper: int  # the round's upper bound (first uncleanable offset)
    transactions: _Transactions
    producer_ids: np.ndarray  # active producers, sorted
    producer_last_offsets: np.ndarray  # the last offset of each one's last data batch

    def last_of_active_producer(self, producer_ids: np.ndarray, last_offsets: np.ndarray) -> np.ndarray:
        """Batches holding an active producer's last sequence (Kafka's ``isBatchLastRecordOfProducer``)."""
        i, active = _find(self.producer_ids, producer_ids)
        if not active.any():
            return active
        return np.asarray(active & (producer_ids >= 0) & (self.producer_last_offsets[i] == last_offsets))


@dataclass(frozen=True, slots=True)
class _Cleaned:
    """The surviving batches of one chunk, laid end to end, with what the indexes need of each."""

    data: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    sizes: np.ndarray
    records_read: int
    records_kept: int


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What the record filter decided for the v2 batches of a chunk."""

    keep: np.ndarray  # per record
    kept: np.ndarray  # records kept per batch
    kinds: np.ndarray  # _DROP, _ORIGINAL, _REWRITE or _EMPTY per batch
    needs_horizon: np.ndarray  # per batch: the rewrite sets the delete horizon


def _judge(b: EntryTable, records: pa.RecordBatch, batch_of: np.ndarray, rnd: _Round) -> _Verdict:
    """Kafka's cleaner ``RecordFilter`` (batch retention, then record retention) on every batch at once."""
    offsets = records.column("offset").to_numpy()
    key_offsets, key_valid, key_data = binary_buffers(records.column("key"), "key")
    has_value = records.column("value").is_valid().to_numpy(zero_copy_only=False)
    last_for_key = rnd.offset_map.get(*key_hashes(key_offsets, key_data))
    attributes = b.attributes
    control = b.is_control
    last = b.last_offsets
    base_ts = b.base_timestamps
    has_horizon = (attributes & DELETE_HORIZON_FLAG_MASK) != 0
    marker_gone = control & rnd.transactions.is_discardable_marker(last)  # Kafka's containsMarkerForEmptyTxn
    discard = np.where(control, marker_gone & has_horizon & (base_ts <= rnd.now), rnd.transactions.is_aborted(last))
    retain_deletes = ~has_horizon | (rnd.now < base_ts)
    latest_for_key = (key_valid != 0) & (offsets >= last_for_key)
    keep = ~discard[batch_of] & (
        control[batch_of] | (offsets > rnd.latest) | (latest_for_key & (has_value | retain_deletes[batch_of]))
    )
    kept = np.bincount(batch_of[keep], minlength=len(b))
    tombstones = np.bincount(batch_of[keep & ~has_value], minlength=len(b)) > 0
    needs_horizon = (tombstones | marker_gone) & ~has_horizon
    retain_empty = rnd.last_of_active_producer(b.producer_ids, last) | (last + 1 == rnd.upper)
    kinds = np.where(kept > 0, _REWRITE, np.where(retain_empty, _EMPTY, _DROP)).astype(np.int8)
    kinds[(kept > 0) & (kept == b.record_counts) & ~needs_horizon] = _ORIGINAL
    return _Verdict(keep, kept, kinds, needs_horizon)


def _rewrite_plan(
    b: EntryTable, records: pa.RecordBatch, batch_of: np.ndarray, verdict: _Verdict, rnd: _Round
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The encoding plan of the batches to write anew (``MemoryRecords.buildRetainedRecordsInto``
    and ``writeEmptyHeader``): each keeps its offsets, producer fields, leader epoch and codec.

    Returns:
        (the plan, one row per planned batch; the planned batches' indexes; the records they hold)
    """
    rewrite = verdict.kinds == _REWRITE
    planned = np.flatnonzero(rewrite | (verdict.kinds == _EMPTY))
    take = verdict.keep & rewrite[batch_of]
    max_ts = b.max_timestamps.copy()  # an empty batch and a LogAppendTime batch keep theirs
    first_ts = max_ts.copy()
    kept_ts = records.column("timestamp").view(pa.int64()).to_numpy()[take]
    if len(kept_ts):
        # The kept records of a batch are contiguous: each rewritten batch starts where the batch changes.
        kept_batch = batch_of[take]
        starts = np.flatnonzero(np.diff(kept_batch, prepend=-1))
        rewritten = kept_batch[starts]
        first_ts[rewritten] = kept_ts[starts]
        create_time = ~b.log_append_time[rewritten]
        max_ts[rewritten] = np.where(create_time, np.maximum.reduceat(kept_ts, starts), max_ts[rewritten])
    attributes = b.attributes
    has_horizon = (attributes & DELETE_HORIZON_FLAG_MASK) != 0
    # The base timestamp of a batch with tombstones is its delete horizon: kept once set, else now + retention.
    horizon = np.where(verdict.needs_horizon, rnd.now + rnd.delete_retention_ms, first_ts)
    base = np.where(has_horizon, b.base_timestamps, horizon)
    horizon_attributes = np.where(verdict.needs_horizon, attributes | DELETE_HORIZON_FLAG_MASK, attributes)
    plan = np.zeros((len(planned), k.PLAN_FIELDS), dtype=np.int64)
    plan[:, k.P_RECORDS] = np.where(rewrite[planned], verdict.kept[planned], 0)
    plan[:, k.P_BASE_OFFSET] = b.base_offsets[planned]
    plan[:, k.P_LAST_OFFSET_DELTA] = b.last_offset_deltas[planned]
    plan[:, k.P_BASE_TIMESTAMP] = np.where(rewrite[planned], base[planned], max_ts[planned])
    plan[:, k.P_MAX_TIMESTAMP] = max_ts[planned]
    plan[:, k.P_ATTRIBUTES] = np.where(
        rewrite[planned], horizon_attributes[planned], attributes[planned] & _EMPTY_BATCH_ATTRIBUTES
    )
    for field, column in (
        (k.P_PRODUCER_ID, b.producer_ids),
        (k.P_PRODUCER_EPOCH, b.producer_epochs),
        (k.P_BASE_SEQUENCE, b.base_sequences),
        (k.P_PARTITION_LEADER_EPOCH, b.partition_leader_epochs),
    ):
        plan[:, field] = column[planned]
    return plan, planned, take


def _clean_chunk(chunk: Chunk, rnd: _Round, file: str) -> _Cleaned:
    """Kafka's ``filterTo`` with the cleaner's filter, on every batch of ``chunk`` at once: batches kept
    whole are copied byte for byte, the others encoded anew, in their order."""
    e = chunk.entries
    v2 = np.flatnonzero(e.magics >= MAGIC_V2)
    b = e.select(v2)
    records = _decode(chunk, b, include_headers=True, file=file)  # headers survive compaction
    batch_of = np.repeat(np.arange(len(b)), b.record_counts)
    verdict = _judge(b, records, batch_of, rnd)
    plan, planned, take = _rewrite_plan(b, records, batch_of, verdict, rnd)
    kinds = np.full(len(e), _ORIGINAL, dtype=np.int8)  # legacy entries are copied as they are
    kinds[v2] = verdict.kinds
    sizes = np.where(kinds == _ORIGINAL, e.sizes, 0)
    original = np.flatnonzero(kinds == _ORIGINAL)
    timestamps = e.max_timestamps.copy()
    encoded = None
    if len(planned):
        offsets = records.column("offset").to_numpy()[take]
        encoded = encode_planned(records.filter(pa.array(take)), plan, offsets)
        sizes[v2[planned]] = encoded.sizes
        timestamps[v2[planned]] = plan[:, k.P_MAX_TIMESTAMP]
    positions = np.cumsum(sizes) - sizes
    data = np.empty(int(sizes.sum()), dtype=np.uint8)
    k.copy_ranges(data, positions[original], chunk.buf, e.positions[original], e.sizes[original])
    if encoded is not None:
        k.copy_ranges(data, positions[v2[planned]], encoded.data, encoded.positions, encoded.sizes)
    written = kinds != _DROP
    legacy = len(e) - len(b)
    return _Cleaned(
        data,
        e.last_offsets[written],
        timestamps[written],
        sizes[written],
        records.num_rows + legacy,
        int(verdict.keep.sum()) + legacy,
    )


class _CleanedSegment:
    """``<base>.log.cleaned`` and its indexes, written as Kafka writes a cleaned segment.

    Args:
        log: The partition log.
        base_offset: The base offset of the first segment it replaces, which it takes.
        index_interval_bytes: ``index.interval.bytes``.
    """

    def __init__(self, log: PartitionLog, base_offset: int, index_interval_bytes: int) -> None:
        self._segment = LogSegment(log.directory, base_offset, CLEANED_SUFFIX, storage=log.storage)
        self._segment.delete_files()  # left by a round that failed
        self._build = IndexBuild(base_offset, index_interval_bytes)
        self.size = 0

    def append(self, cleaned: _Cleaned) -> None:
        positions = self.size + np.cumsum(cleaned.sizes) - cleaned.sizes
        for position, last, max_ts in zip(
            positions.tolist(), cleaned.last_offsets.tolist(), cleaned.max_timestamps.tolist(), strict=True
        ):
            self._build.add(position, last, max_ts)  # per batch, as LogSegment.append indexes
        self._segment.append(self.size, cleaned.data.data)
        self.size += len(cleaned.data)

    def finish(self, last_modified_ms: int, aborted: list[AbortedTxn]) -> None:
        """Trim-state indexes with the final time-index entry (``onBecomeInactiveSegment``), the
        ``.txnindex`` (empty when ``aborted`` is: every segment pysparklog writes has one), everything
        durable, and the modification time of the last replaced segment, which time retention reads."""
        segment = self._segment
        if self.size == 0:
            segment.append(0, b"")  # an empty cleaned segment is a file too
        self._build.maybe_append_time_entry()
        segment.flush()
        segment.indexes.write(self._build)
        segment.indexes.write_aborted(aborted)
        segment.storage.set_modified(segment.log_path, last_modified_ms)

    def discard(self) -> None:
        self._segment.delete_files()


def _group_segments(
    log: PartitionLog, segments: list[SegmentInfo], max_size: int, max_index_size: int, upper: int
) -> list[list[SegmentInfo]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose logs, offset indexes and time
    indexes each fit the limits together, and whose offsets fit 32 bits relative to the first."""

    def index_sizes(info: SegmentInfo) -> tuple[int, int]:
        segment = log.segment(info.base_offset)
        return segment.file_size(segment.index_path) or 0, segment.file_size(segment.time_index_path) or 0

    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size, time_index_size = index_sizes(segments[i])
        i += 1
        while i < len(segments):
            candidate = segments[i]
            candidate_index, candidate_time_index = index_sizes(candidate)
            last_offset = (segments[i + 1].base_offset if i + 1 < len(segments) else upper) - 1
            if not (
                log_size + candidate.size <= max_size
                and index_size + candidate_index <= max_index_size
                and time_index_size + candidate_time_index <= max_index_size
                and (candidate.size == 0 or last_offset - group[0].base_offset <= INT_MAX)
            ):
                break
            group.append(candidate)
            log_size += candidate.size
            index_size += candidate_index
            time_index_size += candidate_time_index
            i += 1
        groups.append(group)
    return groups


def _kept_aborted_txns(log: PartitionLog, group: list[SegmentInfo], transactions: _Transactions) -> list[AbortedTxn]:
    """The cleaned segment's ``.txnindex`` entries, as Kafka's ``CleanedTransactionMetadata`` keeps them:
    those of the group's segments whose transaction still has a batch in the log (an empty one counts);
    a transaction whose batches are all gone needs no entry, and its marker may go."""
    kept: list[AbortedTxn] = []
    for info in group:
        index = log.transaction_index(info.base_offset)
        kept += entries_of(index, ~transactions.is_discardable_marker(index.last_offsets))
    return kept


def _active_producers(log: PartitionLog, segments: list[SegmentInfo], now: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, last data offsets) of the producers not expired at the log end (``producer.id.expiration.ms``;
    a producer with an open transaction never expires), sorted by id."""
    active = segments[-1]
    entries = ProducerStateTracker(LogSegments(log.storage, log.directory)).state_at(
        [s.base_offset for s in segments], active.base_offset, active.size, active.next_base
    )
    live = [
        (e.producer_id, e.last_offset)
        for e in entries
        if e.current_txn_first_offset >= 0 or now - e.timestamp < PRODUCER_ID_EXPIRATION_MS
    ]
    ids = np.array([p for p, _ in live], dtype=np.int64)
    order = np.argsort(ids)
    return ids[order], np.array([o for _, o in live], dtype=np.int64)[order]


def _remove_stale_cleaned_files(log: PartitionLog) -> None:
    """Drop ``.cleaned`` files a killed cleaner left. Only the cleaner writes them and it holds the
    cleaner lock, and ``view()`` has finished any swap a crash interrupted: none is in use."""
    for name in log.storage.list(log.directory):
        if name.endswith(CLEANED_SUFFIX):
            log.storage.delete(f"{log.directory}/{name}")


def _clean_locked(log: PartitionLog, config: LogConfig, now: int, dedupe_buffer_bytes: int) -> CleanResult:
    log.view()  # finishes a swap a crash interrupted
    _remove_stale_cleaned_files(log)
    try:
        return _round(log, config, now, dedupe_buffer_bytes)
    except (InvalidOffsetError, FileNotFoundError):
        # Retention, delete-records or a recovery changed the segments under the round. The groups
        # swapped in are complete; the checkpoint has not moved, so the next round starts over.
        return CleanResult(log.topic, log.partition, False, "the segments changed during the round")


def _round(log: PartitionLog, config: LogConfig, now: int, dedupe_buffer_bytes: int) -> CleanResult:
    """One round of the cleaner, if the log is due: Kafka's ``doClean``."""
    topic_partition = (log.topic, log.partition)
    log_start = log.log_start_offset
    segments = log.segment_infos()
    if not segments:
        return CleanResult(*topic_partition, False, "the log has no segment")
    checkpoint = read_cleaner_checkpoint(log.storage, log.checkpoint_dir).get(topic_partition)
    cleanable = _cleanable_range(log, segments, log_start, checkpoint, config, now)
    if not cleanable.due:
        return CleanResult(
            *topic_partition,
            False,
            f"not due: dirty ratio {cleanable.dirty_ratio:.3f} <= min.cleanable.dirty.ratio "
            f"{config.min_cleanable_dirty_ratio} and max.compaction.lag.ms not reached",
            cleanable,
        )
    first_dirty, upper = cleanable.first_dirty, cleanable.first_uncleanable
    below_upper = [s for s in segments if s.base_offset < upper]
    transactions = _scan_transactions(log, below_upper)
    offset_map = OffsetMap(upper - first_dirty, dedupe_buffer_bytes)
    dirty = below_upper[_floor_index(below_upper, first_dirty) :]
    latest = _build_offset_map(log, dirty, first_dirty, transactions, offset_map)
    end_offset = latest + 1
    ids, last_offsets = _active_producers(log, segments, now)
    rnd = _Round(now, config.delete_retention_ms, offset_map, latest, upper, transactions, ids, last_offsets)
    groups = _group_segments(
        log,
        [s for s in below_upper if s.base_offset < end_offset],
        config.segment_bytes,
        config.segment_index_bytes,
        upper,
    )
    result = CleanResult(*topic_partition, True, "cleaned", cleanable, end_offset)
    for group in groups:
        result = _clean_group(log, group, rnd, config.index_interval_bytes, result)
    _write_cleaner_checkpoint(log, end_offset)
    return result


def _clean_group(
    log: PartitionLog, group: list[SegmentInfo], rnd: _Round, index_interval_bytes: int, result: CleanResult
) -> CleanResult:
    """Write the group's cleaned segment and swap it in for the group."""
    base = group[0].base_offset
    cleaned = _CleanedSegment(log, base, index_interval_bytes)
    records_read = records_kept = 0
    try:
        for info in group:
            segment = log.segment(info.base_offset)
            for chunk in segment.chunks(0, info.size):
                out = _clean_chunk(chunk, rnd, segment.log_path)
                cleaned.append(out)
                records_read += out.records_read
                records_kept += out.records_kept
        cleaned.finish(group[-1].last_modified_ms, _kept_aborted_txns(log, group, rnd.transactions))
    except BaseException:
        cleaned.discard()
        raise
    log.replace_segments([s.base_offset for s in group], base)
    return replace(
        result,
        segments_cleaned=result.segments_cleaned + len(group),
        segments_written=result.segments_written + 1,
        records_read=result.records_read + records_read,
        records_kept=result.records_kept + records_kept,
        bytes_read=result.bytes_read + sum(s.size for s in group),
        bytes_written=result.bytes_written + cleaned.size,
    )


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def clean_log(log: Log, now_ms: int | None = None, *, dedupe_buffer_bytes: int = DEDUPE_BUFFER_BYTES) -> CleanResult:
    """Compact ``log`` if its topic compacts and it is due: one round of Kafka's log cleaner.

    Safe with concurrent appends, reads, retention and other cleaners: a partition is compacted by
    one cleaner at a time (others return at once), segments are swapped in under the write lock,
    and a round whose segments changed under it is abandoned without effect.

    Args:
        log: The partition log.
        now_ms: The current time in milliseconds (default: the clock): compaction lags, delete
            horizons and producer expiry are measured from it.
        dedupe_buffer_bytes: The offset map's memory budget (Kafka's ``log.cleaner.dedupe.buffer.size``);
            a round covers as many dirty keys as fit.

    Returns:
        What was done, or why nothing was.

    Raises:
        CorruptRecordError: A batch of a segment to clean is corrupt; nothing is changed.
    """
    config = log.config  # read once: a callable source may change under the round
    if not compacts(config):
        return CleanResult(
            log.topic,
            log.partition,
            False,
            f"cleanup.policy {','.join(sorted(config.cleanup_policy))} does not compact",
        )
    if not log.local.storage.is_directory(log.directory):
        return CleanResult(log.topic, log.partition, False, "the log has no segment")
    try:
        with log.compaction_scope() as target:
            lock = target.storage.lock(f"{target.directory}/{CLEANER_LOCK}")
            try:
                with lock.try_exclusive() as held:
                    if held is None:
                        return CleanResult(log.topic, log.partition, False, "another cleaner is compacting it")
                    return _clean_locked(target, config, _now(now_ms), dedupe_buffer_bytes)
            finally:
                lock.close()
    except StorageConflictError:
        return CleanResult(log.topic, log.partition, False, "another process sealed or compacted it during the round")


def run_cleaner(
    log_dir: str | os.PathLike[str] | LogDirectory,
    topic: str | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
) -> list[CleanerReport]:
    """One pass of a broker's log maintenance over a log directory: retention for every partition
    (``retention.run_retention``), then compaction of the compacted partitions that are due,
    dirtiest first.

    Args:
        log_dir: The log directory (a path or a ``LogDirectory``, whose topic configs apply).
        topic: Only this topic's partitions.
        now_ms: The current time in milliseconds (default: the clock).
        progress: Called with (steps done, steps) as partitions are retained and compacted.

    Returns:
        One report per partition, sorted by topic and partition. A partition whose retention or
        compaction fails has its ``error`` set; the pass goes on with the others.
    """
    logs = log_dir if isinstance(log_dir, LogDirectory) else LogDirectory(log_dir)
    now = _now(now_ms)
    partitions = [tp for tp in logs.topic_partitions() if topic is None or tp[0] == topic]
    reports = {tp: CleanerReport(*tp, None) for tp in partitions}
    opened: dict[tuple[str, int], Log] = {}
    due = []
    try:
        for done, tp in enumerate(partitions, 1):
            try:
                log = opened[tp] = logs.partition(*tp)
                reports[tp] = replace(reports[tp], retention=run_retention(log, now))
                due += cleanable_logs([log], now)
            except (PySparkLogError, OSError) as error:
                reports[tp] = replace(reports[tp], error=_describe(error))
            if progress is not None:
                progress(done, len(partitions) + len(due))
        for done, (log, _cleanable) in enumerate(_dirtiest_first(due), len(partitions) + 1):
            tp = (log.topic, log.partition)
            try:
                reports[tp] = replace(reports[tp], compaction=clean_log(log, now))
            except (PySparkLogError, OSError) as error:
                reports[tp] = replace(reports[tp], error=_describe(error))
            if progress is not None:
                progress(done, len(partitions) + len(due))
    finally:
        for log in opened.values():
            log.close()
    return [reports[tp] for tp in partitions]


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"
