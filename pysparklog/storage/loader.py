"""Recovery of a partition log (Kafka's ``LogLoader``): what runs when the state record cannot be trusted.

Every segment from the one holding the recovery point to the last is revalidated: indexes are rebuilt,
the first invalid batch and everything after it is truncated, and later segments are deleted when one
is truncated. The producer state is replayed through them from the segment's base, which rebuilds each
one's ``.txnindex`` and gives the first unstable offset; producer snapshots past the new log end are
removed (``ProducerStateManager.truncateAndReload``). Every revalidated segment then has a ``.txnindex``,
so the state record says they start at the first of them, or lower if the previous record did.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass

from pysparklog.errors import CorruptRecordError
from pysparklog.storage import checkpoints
from pysparklog.storage.config import LONG_MAX, LogConfig
from pysparklog.storage.log_dir_checkpoints import LogDirCheckpoints
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.log_state import UNKNOWN_TXN_INDEXES_FROM, LogState, describes_active_segment
from pysparklog.storage.producer_state import OpenTransactions, ProducerEntry, ProducerStateTracker, replay_segment
from pysparklog.storage.segment import LogSegment
from pysparklog.storage.segment_indexes import IndexBuild
from pysparklog.storage.validator import PARTITION_LEADER_EPOCH


@dataclass(slots=True)
class LoadedLog:
    """What recovery leaves: the state to record, and the producers' state at its log end."""

    state: LogState
    producers: dict[int, ProducerEntry]
    open_txns: OpenTransactions


class LogLoader:
    """Recovers one partition's files. Runs under the partition's write lock.

    Args:
        segments: The partition's segments.
        producers: Its producer state (snapshots and replay).
        log_dir_checkpoints: The log directory's checkpoints (recovery point, log start offset).
        topic_partition: The partition.
    """

    def __init__(
        self,
        segments: LogSegments,
        producers: ProducerStateTracker,
        log_dir_checkpoints: LogDirCheckpoints,
        topic_partition: tuple[str, int],
    ) -> None:
        self.segments = segments
        self.producers = producers
        self.checkpoints = log_dir_checkpoints
        self.topic_partition = topic_partition

    def recover(
        self, previous: LogState | None, recovery_point: int | None, config: LogConfig, *, only_active: bool = False
    ) -> LoadedLog:
        """Revalidate from ``recovery_point`` (None: the checkpointed one), or only the active segment.

        Args:
            previous: The state record found (None when it is missing or unreadable).
            recovery_point: Everything below is known to be fsynced.
            config: The topic's configs in force (``index.interval.bytes``).
            only_active: Only the last segment is suspect (a writer died mid-append on this machine).
        """
        segments = self.segments
        segments.storage.make_directory(segments.directory)
        indexed_from = previous.txn_indexes_from if previous is not None else UNKNOWN_TXN_INDEXES_FROM
        segments.remove_stray_files()
        bases = segments.list()
        if not bases:  # Kafka starts an empty log at its checkpointed log start offset
            segments.create(self.checkpoints.log_start(self.topic_partition, 0))
            bases = segments.list()
        if recovery_point is None:
            recovery_point = self.checkpoints.recovery_point(self.topic_partition)
        first = len(bases) - 1 if only_active else max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        if not only_active:
            # Below the recovery point only segments with a missing or broken index are recovered.
            broken = [
                i
                for i in range(first)
                if not segments.get(bases[i]).indexes_intact(txn_index_required=0 <= indexed_from <= bases[i])
            ]
            first = min([first, *broken])
        indexed_from = bases[first] if indexed_from == UNKNOWN_TXN_INDEXES_FROM else min(indexed_from, bases[first])
        end_offset = bases[first]
        build = None
        producers = self.producers.load(bases, bases[-1], 0, bases[first], remove_unreadable=True)
        open_txns = OpenTransactions.of(producers)
        for i in range(first, len(bases)):
            segment = segments.get(bases[i])
            size = segment.size()
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            build, valid = segment.rebuild_indexes(
                size, config.index_interval_bytes, next_base, _acknowledged_part(previous, segment, next_base)
            )
            build.maybe_append_time_entry()
            segment.indexes.write(build)
            segment.indexes.write_aborted(replay_segment(producers, segment, 0, valid, 0, LONG_MAX, open_txns).aborted)
            if build.offsets or valid:
                end_offset = segment.end_offset(valid)
            else:
                end_offset = max(end_offset, segment.base_offset)
            if valid < size:
                segment.truncate(valid)
                for later in bases[i + 1 :]:
                    segments.delete(later)
                bases = segments.bases = bases[: i + 1]
                break
        log_start = self.checkpoints.log_start(self.topic_partition, bases[0])
        if end_offset < log_start:
            # Segment files were deleted: as Kafka does, drop the rest and start again at the log start.
            for base in bases:
                segments.delete(base)
            self.producers.remove_snapshots(self.producers.snapshot_offsets())
            segments.bases = []
            bases = [segments.create(log_start).base_offset]
            build, end_offset, producers, open_txns = IndexBuild(log_start, 0), log_start, {}, OpenTransactions({})
            indexed_from = log_start
        segment = segments.get(bases[-1])
        assert build is not None
        size = segment.size()
        state = LogState(
            segment.base_offset,
            size,
            max(end_offset, segment.base_offset),
            build.max_timestamp,
            build.offset_of_max_timestamp if build.max_timestamp >= 0 else segment.base_offset,
            log_start,
            min(recovery_point, end_offset),
            int(time.time() * 1000),
            previous.segments_generation + 1 if previous is not None else 1,
            first_unstable_offset=open_txns.first_unstable_offset(),
            txn_indexes_from=indexed_from,
        )
        self.producers.remove_snapshots([o for o in self.producers.snapshot_offsets() if o > state.log_end_offset])
        self._ensure_partition_files(bases[0])
        return LoadedLog(state, producers, open_txns)

    def _ensure_partition_files(self, first_base: int) -> None:
        """``leader-epoch-checkpoint`` and ``partition.metadata``, as a broker leaves them; written again
        when missing or unreadable (the epoch file names the one leader epoch from the first segment, the
        metadata the topic's id, which its other partitions keep)."""
        storage = self.segments.storage
        epoch_path = self.segments.path(checkpoints.LEADER_EPOCH_CHECKPOINT)
        try:
            epochs = checkpoints.read_leader_epoch_checkpoint(storage, epoch_path)
        except CorruptRecordError:
            epochs = None
        if not epochs:
            checkpoints.write_leader_epoch_checkpoint(storage, epoch_path, [(PARTITION_LEADER_EPOCH, first_base)])
        metadata_path = self.segments.path(checkpoints.PARTITION_METADATA)
        if readable_topic_id(self.segments, metadata_path) is None:
            checkpoints.write_partition_metadata(storage, metadata_path, self._topic_id())

    def _topic_id(self) -> str:
        """The topic's id: shared with its other partitions (those whose ``partition.metadata`` reads), new
        for a new topic."""
        parent, _, own = self.segments.directory.rpartition("/")
        prefix = f"{self.topic_partition[0]}-"
        for name in self.segments.storage.list(parent):
            if name.startswith(prefix) and name[len(prefix) :].isdigit() and name != own:
                topic_id = readable_topic_id(self.segments, f"{parent}/{name}/{checkpoints.PARTITION_METADATA}")
                if topic_id is not None:
                    return topic_id
        return checkpoints.new_topic_id()


def _acknowledged_part(previous: LogState | None, segment: LogSegment, next_base: int | None) -> tuple[int, int] | None:
    """(size, log end offset) of the state record found, when it describes ``segment`` as the active one
    (``describes_active_segment``): what follows those bytes must continue at that offset."""
    if previous is None or next_base is not None or previous.active_base != segment.base_offset:
        return None
    return (previous.active_size, previous.log_end_offset) if describes_active_segment(previous, segment) else None


def readable_topic_id(segments: LogSegments, path: str) -> str | None:
    """The topic id of a ``partition.metadata`` file; None when it is missing or cannot be read."""
    try:
        return checkpoints.read_partition_metadata(segments.storage, path)
    except CorruptRecordError:
        return None
