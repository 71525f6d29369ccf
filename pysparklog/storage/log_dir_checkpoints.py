"""A log directory's two offset checkpoints, shared by its partitions: ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` (Kafka's ``LogManager`` writes them for the logs it holds).

Each partition's writer keeps its own entries current; a file that cannot be read is written again
from the partitions' state records, as Kafka writes its checkpoints from the logs it holds.
"""

from __future__ import annotations

import logging

from pysparklog.errors import CorruptRecordError
from pysparklog.storage import checkpoints
from pysparklog.storage.io import LOG_DIR_LOCK, Storage, read_if_exists
from pysparklog.storage.log_state import STATE_FILE, LogState
from pysparklog.storage.segment import parse_segment_name
from pysparklog.storage.topics import partition_dirs

_log = logging.getLogger(__name__)


class LogDirCheckpoints:
    """The offset checkpoints of the log directory at ``directory`` of ``storage``.

    Args:
        storage: The log directory's storage.
        directory: The log directory, a path of ``storage``.
    """

    def __init__(self, storage: Storage, directory: str) -> None:
        self.storage = storage
        self.directory = directory

    def _path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    def _recorded(self, name: str, topic_partition: tuple[str, int]) -> int | None:
        try:
            return checkpoints.read_offset_checkpoint(self.storage, self._path(name)).get(topic_partition)
        except CorruptRecordError:
            return None

    def log_start(self, topic_partition: tuple[str, int], first_base: int) -> int:
        """The partition's log start offset: the checkpointed one, never below its first segment's base."""
        recorded = self._recorded(checkpoints.LOG_START_OFFSET_CHECKPOINT, topic_partition)
        return max(first_base, recorded) if recorded is not None else first_base

    def recovery_point(self, topic_partition: tuple[str, int]) -> int:
        """The partition's checkpointed recovery point; 0 (recover everything) without one."""
        recorded = self._recorded(checkpoints.RECOVERY_POINT_CHECKPOINT, topic_partition)
        return recorded if recorded is not None else 0

    def update(self, topic_partition: tuple[str, int], recovery_point: int, log_start_offset: int | None) -> None:
        """Set one partition's entries in both files.

        A read-modify-write of files shared by every partition, so it runs under the log directory's
        lock; each file is replaced atomically. Kafka lists a log start offset only when it is above
        the first segment's base, so ``None`` removes the partition's entry.
        """
        lock = self.storage.lock(self._path(LOG_DIR_LOCK))
        try:
            with lock.exclusive():
                path = self._path(checkpoints.RECOVERY_POINT_CHECKPOINT)
                points, rebuilt = self._read_or_rebuild(path)
                if points.get(topic_partition) != recovery_point or rebuilt:
                    points[topic_partition] = recovery_point
                    checkpoints.write_offset_checkpoint(self.storage, path, points)
                path = self._path(checkpoints.LOG_START_OFFSET_CHECKPOINT)
                starts, rebuilt = self._read_or_rebuild(path)
                if starts.get(topic_partition) != log_start_offset or rebuilt or self.storage.stat(path) is None:
                    if log_start_offset is None:
                        starts.pop(topic_partition, None)
                    else:
                        starts[topic_partition] = log_start_offset
                    checkpoints.write_offset_checkpoint(self.storage, path, starts)
        finally:
            lock.close()

    def _read_or_rebuild(self, path: str) -> tuple[dict[tuple[str, int], int], bool]:
        """The entries of a checkpoint, and False; or, when the file cannot be read, the entries rebuilt
        from the partitions' state records, and True."""
        try:
            return checkpoints.read_offset_checkpoint(self.storage, path), False
        except CorruptRecordError as error:
            _log.warning("%s; writing it again from the partitions' state records", error)
            return self._offsets_from_state_records(path.rsplit("/", 1)[-1]), True

    def _offsets_from_state_records(self, checkpoint: str) -> dict[tuple[str, int], int]:
        """What ``checkpoint`` (recovery points or log start offsets) holds for the partitions, from their
        state records. A partition without a readable record is left out: its recovery then starts from its
        first segment, and its log start is its first segment's base, as for a broker's log whose checkpoint
        lists it not. Read without the partitions' locks (a record is one CRC-checked write), as the caller
        holds the log directory's lock, which their writers take inside theirs."""
        offsets = {}
        for topic, partition in partition_dirs(self.directory):
            directory = self._path(f"{topic}-{partition}")
            try:
                data = read_if_exists(self.storage, f"{directory}/{STATE_FILE}")
                bases = [b for b in map(parse_segment_name, self.storage.list(directory)) if b is not None]
            except OSError:
                continue
            state = LogState.decode(data) if data is not None else None
            if state is None:
                continue
            if checkpoint == checkpoints.RECOVERY_POINT_CHECKPOINT:
                offsets[(topic, partition)] = state.recovery_point
            elif bases and state.log_start_offset > min(bases):
                offsets[(topic, partition)] = state.log_start_offset
        return offsets
