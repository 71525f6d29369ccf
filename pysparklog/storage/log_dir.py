"""A log directory: the partitions below it, its topics and its Kafka checkpoint files."""

from __future__ import annotations

import os

from pysparklog.errors import InvalidLogDirectoryError
from pysparklog.storage.config import LogConfig
from pysparklog.storage.io import Storage, storage_for
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.object_log import ObjectPartitionLog
from pysparklog.storage.topics import TopicStore, partition_dirs, validate_topic_name


class LogDirectory:
    """A directory of ``<topic>-<partition>`` partition logs.

    Args:
        path: The log directory, created when missing: a filesystem path, a ``file://`` URL, or the
            ``Storage`` of one.
        config: The settings of a topic config that neither the topic (``topics``) nor the directory's
            ``server.properties`` sets (default: Kafka's).

    Example:
        >>> logs = LogDirectory("/tmp/logs")
        >>> orders = logs.partition("orders", 0)
    """

    def __init__(self, path: str | os.PathLike[str] | Storage, config: LogConfig | None = None) -> None:
        self.storage = storage_for(path)
        self.path = self.storage.root
        if not self.storage.is_directory(self.path) and self.storage.stat(self.path) is not None:
            raise InvalidLogDirectoryError(f"{self.path!r} is not a directory")
        self.config = config or LogConfig()
        self._topics = TopicStore(self.storage, self.config)

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
        if not self.storage.in_place_writes:  # an object store: the log is its commits (object_log)
            return ObjectPartitionLog(self.storage, topic, partition, config or self._topics.config_provider(topic))
        return PartitionLog(
            self.storage.join(f"{topic}-{partition}"),
            config or self._topics.config_provider(topic),
            checkpoint_dir=self.path,
            storage=self.storage,
        )

    def topic_partitions(self) -> list[tuple[str, int]]:
        """Every ``(topic, partition)`` with a directory here, sorted; directories being deleted are skipped."""
        return partition_dirs(self.path)
