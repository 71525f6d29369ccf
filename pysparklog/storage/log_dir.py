"""A log directory: the partitions below it, its topics and its Kafka checkpoint files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from pysparklog.errors import (
    InvalidLogDirectoryError,
    InvalidTopicError,
    PolicyViolationError,
    PySparkLogError,
    TransactionInProgressError,
    UnknownTopicError,
)
from pysparklog.storage.config import LogConfig
from pysparklog.storage.io import FileSystemStorage, Storage, storage_for
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_writer import AppendInfo
from pysparklog.storage.objects.log import ObjectPartitionLog, append_together
from pysparklog.storage.records.arrow_records import EncodedBatches
from pysparklog.storage.retention import deletes
from pysparklog.storage.topics import (
    Progress,
    TopicMetadata,
    TopicStore,
    parse_topic_id,
    partition_dirs,
    validate_topic_name,
)
from pysparklog.storage.validator import Batches, checked_batches

#: DeleteRecords' offset meaning the high watermark.
HIGH_WATERMARK = -1


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

    def partition(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
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
        if isinstance(self.storage, FileSystemStorage):  # a Kafka log of segments, changed in place
            return PartitionLog(
                self.storage.join(f"{topic}-{partition}"),
                config or self._topics.config_provider(topic),
                checkpoint_dir=self.path,
                storage=self.storage,
            )
        return self._object_log(topic, partition, config)

    def _object_log(self, topic: str, partition: int, config: LogConfig | None) -> ObjectPartitionLog:
        """An object store's partition log: its topic's commits (storage.objects.log)."""
        return ObjectPartitionLog(
            self.storage,
            topic,
            partition,
            config or self._topics.config_provider(topic),
            topic_id=self._topics.known_topic_id(topic),
        )

    def offsets(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """The log start offset and log end offset of each of ``partitions`` of ``topic``, from one look: on an object
        store the header of the topic chain's last commit, one probe whatever the partition count; on a filesystem
        each partition's view.

        Raises:
            InvalidTopicError: ``topic`` is not a legal topic name.
            InvalidLogDirectoryError: A partition is negative.
            UnknownTopicError: The topic was created with fewer partitions.
        """
        wanted = sorted(set(partitions))
        if isinstance(self.storage, FileSystemStorage) or not wanted:
            offsets = {}
            for partition in wanted:
                with self.partition(topic, partition) as log:
                    offsets[partition] = log.offsets()
            return offsets
        for partition in {wanted[0], wanted[-1]}:
            self.partition(topic, partition).close()  # checks the name and the partitions, as every open does
        with self._object_log(topic, wanted[0], None) as first:
            ends = first.topic_ends(wanted)
        return {p: (end.log_start_offset, end.log_end_offset) for p, end in ends.items()}

    @property
    def appends_together(self) -> bool:
        """Whether appends to several partitions of a topic made at once cost one write (``append_together``): on an
        object store, one commit of the topic's chain; on a filesystem each partition is its own files."""
        return not isinstance(self.storage, FileSystemStorage)

    def append_together(self, appends: Sequence[tuple[Log, EncodedBatches]]) -> list[AppendInfo | PySparkLogError]:
        """Appends of complete v2 record batches to partitions of one topic, opened from this directory, made at once:
        on an object store one commit (``objects.log.append_together``), on a filesystem one after another. Each
        append is validated as ``Log.append`` validates it.

        Returns:
            Per append, in order: its ``AppendInfo``, or the ``PySparkLogError`` the log refused it with.

        Raises:
            OSError: The storage failed; on an object store, the appends may or may not have been made together.
        """
        if isinstance(self.storage, FileSystemStorage):
            outcomes: list[AppendInfo | PySparkLogError] = []
            for log, batches in appends:
                try:
                    outcomes.append(log.append(batches))
                except PySparkLogError as error:
                    outcomes.append(error)
            return outcomes
        checked: list[tuple[ObjectPartitionLog, list[Batches]]] = []
        refused: dict[int, PySparkLogError] = {}
        for index, (log, batches) in enumerate(appends):
            if not isinstance(log, ObjectPartitionLog):
                raise InvalidLogDirectoryError(f"{log!r} is not a partition of this log directory on an object store")
            try:
                checked.append((log, [checked_batches(batches, log.config.max_message_bytes)]))
            except PySparkLogError as error:
                refused[index] = error
        made = iter(append_together(checked))
        return [refused[index] if index in refused else next(made) for index in range(len(appends))]

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords for one partition: raise its log start offset to ``offset`` (``HIGH_WATERMARK``: the
        high watermark, the log end offset here), so that records below it can no longer be read; the next
        retention pass deletes the segments wholly below it.

        Returns:
            The partition's log start offset after it (Kafka's ``low_watermark``).

        Raises:
            UnknownTopicError: No such topic or partition (or an illegal topic name).
            PolicyViolationError: The topic's ``cleanup.policy`` lacks ``delete`` (a compacted-only topic keeps
                its records until compaction drops them, as a broker refuses to delete them).
            InvalidOffsetError: ``offset`` is negative (other than -1) or past the high watermark.
        """
        try:
            partitions = self._topics.get(topic).partitions
        except InvalidTopicError:
            raise UnknownTopicError(f"Topic '{topic}' does not exist: its name is illegal") from None
        if not 0 <= partition < partitions:
            raise UnknownTopicError(
                f"Partition {partition} of topic '{topic}' does not exist: the topic has {partitions} partitions"
            )
        with self.partition(topic, partition) as log:
            if not deletes(log.config):
                raise PolicyViolationError(
                    f"cannot delete records of {topic}-{partition}: its cleanup.policy is "
                    f"{','.join(sorted(log.config.cleanup_policy)) or 'empty'}; accepted: a topic whose cleanup.policy "
                    "includes delete"
                )
            return log.raise_log_start_offset(log.log_end_offset if offset == HIGH_WATERMARK else offset)

    def topic_partitions(self) -> list[tuple[str, int]]:
        """Every ``(topic, partition)`` with a directory here, sorted; directories being deleted are skipped."""
        return partition_dirs(self.storage)

    def set_topic_id(self, topic: str, topic_id: str, *, progress: Progress | None = None) -> TopicMetadata:
        """Give a topic the id a Kafka cluster knows it by, before its partition directories are moved into a
        broker's log directory (``docs/moving-to-kafka.md``): ``TopicStore.set_topic_id``, refused while a
        transaction is open on one of its partitions. The broker would get that transaction's records without its
        coordinator, which stays here: a broker keeping its state would hold ``read_committed`` readers at its
        first offset, one without it would hand its records out as committed.

        Raises:
            InvalidTopicIdError: ``topic_id`` is malformed, reserved, or another topic's.
            InvalidLogDirectoryError: The log directory is on an object store.
            UnknownTopicError: No such topic.
            TransactionInProgressError: A transaction is open on a partition of the topic.
        """
        parse_topic_id(topic_id)  # a malformed id fails before any partition is read
        if isinstance(self.storage, FileSystemStorage):  # an object store refuses the id (TopicStore.set_topic_id)
            for partition in range(self._topics.get(topic).partitions):
                with self.partition(topic, partition) as log:
                    end = log.log_end_offset  # before the stable offset: an append in between cannot pass for a txn
                    stable = log.last_stable_offset
                if stable < end:
                    raise TransactionInProgressError(
                        f"a transaction is open on partition {partition} of topic '{topic}' from offset {stable}: "
                        "let its producer end it, or abort it ('pysparklog transactions list' names it, "
                        "'pysparklog transactions abort --transactional-id ID'), then set the id"
                    )
        return self._topics.set_topic_id(topic, topic_id, progress=progress)
