"""A log directory: the partitions below it, its topics and its Kafka checkpoint files."""

from __future__ import annotations

import os

from pysparklog.errors import InvalidLogDirectoryError
from pysparklog.storage import checkpoints
from pysparklog.storage.config import LogConfig
from pysparklog.storage.locking import LOG_DIR_LOCK, FileLock
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.topics import TopicStore, partition_dirs, validate_topic_name


def update_log_dir_checkpoints(
    log_dir: str, topic_partition: tuple[str, int], recovery_point: int, log_start_offset: int | None
) -> None:
    """Set one partition's entries in ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``.

    A read-modify-write of files shared by every partition, so it runs under the log directory's
    lock; each file is replaced atomically. Kafka lists a log start offset only when it is above
    the first segment's base, so ``None`` removes the partition's entry.
    """
    lock = FileLock(os.path.join(log_dir, LOG_DIR_LOCK))
    try:
        with lock.exclusive():
            path = os.path.join(log_dir, checkpoints.RECOVERY_POINT_CHECKPOINT)
            points = checkpoints.read_offset_checkpoint(path)
            if points.get(topic_partition) != recovery_point:
                points[topic_partition] = recovery_point
                checkpoints.write_offset_checkpoint(path, points)
            path = os.path.join(log_dir, checkpoints.LOG_START_OFFSET_CHECKPOINT)
            starts = checkpoints.read_offset_checkpoint(path)
            if starts.get(topic_partition) != log_start_offset or not os.path.exists(path):
                if log_start_offset is None:
                    starts.pop(topic_partition, None)
                else:
                    starts[topic_partition] = log_start_offset
                checkpoints.write_offset_checkpoint(path, starts)
    finally:
        lock.close()


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
