"""A log directory: the partitions below it, its topics and its Kafka checkpoint files."""

from __future__ import annotations

import logging
import os

from pysparklog.errors import CorruptRecordError, InvalidLogDirectoryError
from pysparklog.storage import checkpoints
from pysparklog.storage.config import LogConfig
from pysparklog.storage.locking import LOG_DIR_LOCK, FileLock
from pysparklog.storage.log import STATE_FILE, LogState, PartitionLog
from pysparklog.storage.segment import parse_segment_name
from pysparklog.storage.topics import TopicStore, partition_dirs, validate_topic_name

_log = logging.getLogger(__name__)


def update_log_dir_checkpoints(
    log_dir: str, topic_partition: tuple[str, int], recovery_point: int, log_start_offset: int | None
) -> None:
    """Set one partition's entries in ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``.

    A read-modify-write of files shared by every partition, so it runs under the log directory's
    lock; each file is replaced atomically. Kafka lists a log start offset only when it is above
    the first segment's base, so ``None`` removes the partition's entry. A file that cannot be read
    is written again from the partitions' state records, as Kafka writes its checkpoints from the
    logs it holds (``_offsets_from_state_records``).
    """
    lock = FileLock(os.path.join(log_dir, LOG_DIR_LOCK))
    try:
        with lock.exclusive():
            path = os.path.join(log_dir, checkpoints.RECOVERY_POINT_CHECKPOINT)
            points, rebuilt = _read_or_rebuild(log_dir, path)
            if points.get(topic_partition) != recovery_point or rebuilt:
                points[topic_partition] = recovery_point
                checkpoints.write_offset_checkpoint(path, points)
            path = os.path.join(log_dir, checkpoints.LOG_START_OFFSET_CHECKPOINT)
            starts, rebuilt = _read_or_rebuild(log_dir, path)
            if starts.get(topic_partition) != log_start_offset or rebuilt or not os.path.exists(path):
                if log_start_offset is None:
                    starts.pop(topic_partition, None)
                else:
                    starts[topic_partition] = log_start_offset
                checkpoints.write_offset_checkpoint(path, starts)
    finally:
        lock.close()


def _read_or_rebuild(log_dir: str, path: str) -> tuple[dict[tuple[str, int], int], bool]:
    """The entries of a log directory's recovery-point or log-start checkpoint, and False; or, when the
    file cannot be read, the entries rebuilt from the partitions' state records, and True."""
    try:
        return checkpoints.read_offset_checkpoint(path), False
    except CorruptRecordError as error:
        _log.warning("%s; writing it again from the partitions' state records", error)
        return _offsets_from_state_records(log_dir, os.path.basename(path)), True


def _offsets_from_state_records(log_dir: str, checkpoint: str) -> dict[tuple[str, int], int]:
    """What ``checkpoint`` (recovery points or log start offsets) holds for the partitions of ``log_dir``,
    from their state records. A partition without a readable record is left out: its recovery then
    starts from its first segment, and its log start is its first segment's base, as for a broker's log
    whose checkpoint lists it not. Read without the partitions' locks (a record is one CRC-checked
    write), as the caller holds the log directory's lock, which their writers take inside theirs."""
    offsets = {}
    for topic, partition in partition_dirs(log_dir):
        directory = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            with open(os.path.join(directory, STATE_FILE), "rb") as f:
                state = LogState.decode(f.read())
            bases = [b for b in (parse_segment_name(name) for name in os.listdir(directory)) if b is not None]
        except OSError:
            continue
        if state is None:
            continue
        if checkpoint == checkpoints.RECOVERY_POINT_CHECKPOINT:
            offsets[(topic, partition)] = state.recovery_point
        elif bases and state.log_start_offset > min(bases):
            offsets[(topic, partition)] = state.log_start_offset
    return offsets


class LogDirectory:
    """A directory of ``<topic>-<partition>`` partition logs.

    Args:
        path: The log directory; created when missing.
        config: The settings of a topic config that neither the topic (``topics``) nor the directory's
            ``server.properties`` sets (default: Kafka's).

    Example:
        >>> logs = LogDirectory("/tmp/logs")
        >>> orders = logs.partition("orders", 0)
    """

    def __init__(self, path: str | os.PathLike[str], config: LogConfig | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise InvalidLogDirectoryError(f"{self.path!r} is not a directory")
        self.config = config or LogConfig()
        self._topics = TopicStore(self.path, self.config)

    @property
    def topics(self) -> TopicStore:
        """The topics: create, list, alter and delete them, and their configs."""
        return self._topics

    def partition(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The log of one partition; its directory is created on the first append.

        Its settings are the topic's configs in force (its overrides, then ``server.properties``, then this
        directory's ``config``), followed as they change, unless ``config`` fixes them.

        Raises:
            InvalidTopicError: ``topic`` is not a legal topic name.
            InvalidLogDirectoryError: ``partition`` is negative.
            UnknownTopicError: The topic was created with fewer partitions.
        """
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise InvalidLogDirectoryError(f"partition {partition!r} is invalid; accepted: an integer >= 0")
        validate_topic_name(topic)
        self._topics.open_partition(topic, partition)
        directory = os.path.join(self.path, f"{topic}-{partition}")
        return PartitionLog(directory, config or self._topics.config_provider(topic), checkpoint_dir=self.path)

    def topic_partitions(self) -> list[tuple[str, int]]:
        """Every ``(topic, partition)`` with a directory here, sorted; directories being deleted are skipped."""
        return partition_dirs(self.path)
