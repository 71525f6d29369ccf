"""Committed consumer offsets, stored as Kafka stores them: records of the compacted internal topic
``__consumer_offsets`` in the log directory.

A copy of a broker's ``__consumer_offsets`` reads here, and Kafka's tools (``kafka-dump-log.sh
--offsets-decoder``) read ours:

* **The topic** is created on the first commit with the settings a broker gives it
  (``GroupCoordinatorService.groupMetadataTopicConfigs``): ``cleanup.policy=compact``,
  ``compression.type=producer`` and ``segment.bytes`` = the broker config ``offsets.topic.segment.bytes``
  (100 MiB), with ``offsets.topic.num.partitions`` partitions (50); both broker configs are read from the log
  directory's ``server.properties``. Processes creating it at once agree (the topic store serialises creation).
  A topic copied from a broker without pysparklog's topic metadata is adopted with those settings, grown to
  ``offsets.topic.num.partitions`` if it has fewer partition directories. Reads never create anything.
* **A group's partition** is ``abs(groupId.hashCode()) % partitions`` (Java's ``String.hashCode``), so a
  group's offsets are in the partition a broker would put them in.
* **Records**: key ``OffsetCommitKey`` v1 (group, topic, partition), value ``OffsetCommitValue`` v3
  (offset, leader epoch, metadata, commit timestamp), record timestamp = commit timestamp, no producer id,
  uncompressed (``offsets.topic.compression.codec`` = none), as Kafka 4's group coordinator writes them. A null
  value (tombstone) deletes the offset. Reading also accepts key v0 and values v0 to v4, takes the generation of
  ``GroupMetadataKey`` v2 records (below), and skips every other record type a broker writes there (the consumer
  and share group records of KIP-848).
* **One commit is one record batch**, whatever the number of partitions: readers see all of it or none of it,
  and concurrent commits by any number of processes are serialised by the partition's append lock, so none is
  lost. A commit whose batch exceeds the topic's ``max.message.bytes`` is refused whole, as a broker refuses it.
* **Generations fence commits**, as a broker's coordinator checks a commit's generation before appending it. A
  member's commit carries the group generation it owned its partitions in; the group's partition records each
  generation a commit was made in as a ``GroupMetadataKey`` v2 record whose ``GroupMetadataValue`` v3 is the one
  Kafka writes for an empty group (protocol type ``consumer``, the generation, no protocol, leader or members:
  membership lives in the group coordinator's file). A commit is appended only if the partition's latest
  recorded generation of its group is not newer than its own, checked against the partition's end in the same
  critical section as the append (an append conditional on the log end, ``expected_end_offset``, read again
  and retried when anything was appended since). So a member that stalled between the coordinator's ownership
  check and its append, while the group moved on and the new owner committed, is refused with
  ``CommitFailedError`` and appends nothing, whether or not its lock or lease still held.

**Acknowledged.** ``commit`` returns once its batch is appended: in the segment file with the partition's state
record updated, so every process sees it and it survives ``kill -9`` of any process. It is fsynced when the
topic's ``flush.messages`` / ``flush.ms`` say so; as in Kafka, by default the OS flushes (a broker relies on
replication instead). Set ``flush.messages=1`` on ``__consumer_offsets`` for commits that survive a machine crash.

**Reads are incremental.** An ``OffsetStore`` keeps, per partition, the offset it has read up to and the
offsets it materialised, and reads only the records appended since (by any process) at the next call; a new
process rebuilds from the partition, which compaction keeps small. A partition whose log moved past what was
read (its records deleted, or the topic re-created) is rebuilt.

**Compaction** happens as on a broker, without anyone running it: the commit whose append rolls a partition's
segment runs Kafka's log cleaner on that partition (``storage.cleaner.clean_log``: due when the dirty share
passes ``min.cleanable.dirty.ratio``) before returning, which is when a broker's cleaner would find new work,
since the active segment is never cleaned. ``pysparklog log-cleaner`` compacts it too. Tombstones stay
``delete.retention.ms`` (a day) after the round that first rewrites them: a reader that falls further behind
than that may miss a deletion, as a Kafka consumer may.

**Groups and members.** Live members and their assignments are the group coordinator's state, not offsets;
``_membership`` is where they are looked up. Kafka refuses to reset the offsets of, or delete, a group with
active members, and so do ``plan_reset``, ``execute_reset``, ``delete_group`` and ``delete_offsets``; ``commit``
and ``delete`` are the coordinator's own operations and do not check.

Transactional offset commits made here (``TxnOffsetCommit`` through ``pysparklog serve``) are held by the
transaction coordinator and committed here, as ordinary commits, once their transaction commits
(``pysparklog.transactions``).

Not done: offsets of empty groups are never expired (a broker drops them after ``offsets.retention.minutes``),
and transactional offset commits (``TxnOffsetCommit``) copied from a broker are applied without regard to
their transaction's outcome.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa

from pysparklog.errors import (
    CommitFailedError,
    CorruptRecordError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidPartitionsError,
    LogEndChangedError,
    OffsetOutOfRangeError,
    PySparkLogError,
    UnknownTopicError,
)
from pysparklog.group import (
    GroupCoordinator,
    GroupDescription,
    GroupState,
    MemberDescription,
    describe_group,
    list_group_ids,
)
from pysparklog.storage.cleaner import clean_log
from pysparklog.storage.config import INT_MAX, LONG_MAX
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.records.arrow_records import BatchSettings
from pysparklog.storage.records.default_records import RECORD_BATCH_OVERHEAD
from pysparklog.storage.topic_config import (
    MAX_PARTITIONS,
    ConfigKey,
    ConfigType,
    ServerProperties,
    normalize_overrides,
)
from pysparklog.storage.topics import validate_topic_name
from pysparklog.structs import OffsetAndMetadata, TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = ConfigKey(
    "offsets.topic.num.partitions", ConfigType.INT, "50", minimum=1, maximum=MAX_PARTITIONS
)
OFFSETS_TOPIC_SEGMENT_BYTES = ConfigKey(
    "offsets.topic.segment.bytes", ConfigType.INT, str(100 * 1024 * 1024), minimum=1
)
OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes
OFFSET_COMMIT_KEY_VERSION = 1  # what Kafka's coordinator writes (GroupCoordinatorRecordHelpers.newOffsetCommitRecord)
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3  # what Kafka's coordinator writes (newGroupMetadataRecord), not flexible
_FLEXIBLE_GROUP_METADATA_VERSION = 4
_CONSUMER_PROTOCOL_TYPE = "consumer"
_NULL_STRING = -1

# The largest varints a record adds to its key and value (length, attributes, timestamp delta, offset delta, key
# and value lengths, header count), so that the batch size given to the encoder holds a whole commit.
_RECORD_OVERHEAD_BOUND = 40
_MAX_STRING_BYTES = 32767  # a non-flexible string's length is an int16

# OffsetCommitKey (key versions 0 and 1; the writer uses 1), big-endian:
#   version    => int16
#   group      => string   (int16 length, then UTF-8)
#   topic      => string
#   partition  => int32
# Key version 2 is GroupMetadataKey (version, group); versions 3 and up are the records of the consumer and share
# groups of KIP-848 (ConsumerGroupMetadataKey...). None of them is an offset.
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

# OffsetCommitValue, big-endian:
#   version          => int16
#   offset           => int64
#   leaderEpoch      => int32    (version 3+; -1 before)
#   metadata         => string   (versions 0-3: int16 length, then UTF-8; 4+: compact string, uvarint length + 1)
#   commitTimestamp  => int64
#   expireTimestamp  => int64    (version 1 only)
#   tagged fields               (version 4+: uvarint count, then per field uvarint tag, uvarint size, bytes)
_VALUE_V3_HEAD = struct.Struct(">hqih")  # version, offset, leaderEpoch, metadata length
_MAX_VALUE_VERSION = 4
_FLEXIBLE_VALUE_VERSION = 4


def _broker_int(server: ServerProperties, key: ConfigKey) -> int:
    """An int broker config of ``server.properties``, else its default."""
    value = server.get(key)
    assert value is None or isinstance(value, int)
    return int(str(key.default)) if value is None else value


def _membership(log_dir: LogDirectory, group_ids: Collection[str] | None) -> dict[str, GroupDescription]:
    """The membership state of ``group_ids`` (of every group that has one when None); groups without one are left
    out. Every check of live members (describe, list, reset, delete) goes through here."""
    ids = list_group_ids(log_dir) if group_ids is None else group_ids
    return {g: d for g in ids if (d := describe_group(log_dir, g)) is not None}


@contextmanager
def _group_frozen(log_dir: LogDirectory, group_id: str) -> Iterator[GroupCoordinator]:
    """The group's coordinator, holding its lock, so no member joins between a check that the group is inactive
    and the write that relies on it."""
    coordinator = GroupCoordinator(log_dir, group_id)
    try:
        with coordinator.frozen():
            yield coordinator
    finally:
        coordinator.close()


# -- the records ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed offset as ``__consumer_offsets`` holds it.

    Attributes:
        offset: The next offset the group will consume.
        metadata: What the committer attached.
        leader_epoch: The leader epoch of the record before ``offset``; -1 when unknown (values before v3).
        commit_timestamp_ms: When it was committed.
        expire_timestamp_ms: When it expires, as value v1 (written by brokers before 2.1) says; -1 otherwise.
    """

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1

    @property
    def offset_and_metadata(self) -> OffsetAndMetadata:
        return OffsetAndMetadata(self.offset, self.metadata, self.leader_epoch)


def partition_for(group_id: str, partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition of a group: Kafka's ``Utils.abs(groupId.hashCode()) % partitions``.

    Java hashes a string's UTF-16 code units with 32-bit overflow; ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0.
    """
    h = 0
    for (unit,) in struct.iter_unpack(">H", group_id.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 1 << 31:
        h = 0 if h == 1 << 31 else (1 << 32) - h
    return h % partitions


def _string(value: str, what: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) > _MAX_STRING_BYTES:
        raise InvalidConfigError(f"{what} is {len(raw)} bytes of UTF-8; accepted: at most {_MAX_STRING_BYTES}")
    return _INT16.pack(len(raw)) + raw


def encode_offset_commit_key(group_id: str, partition: TopicPartition) -> bytes:
    """The ``__consumer_offsets`` key of a group's offset for a partition (``OffsetCommitKey`` v1)."""
    return (
        _INT16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(group_id, "group id")
        + _string(partition.topic, "topic")
        + _INT32.pack(partition.partition)
    )


def encode_offset_commit_value(committed: CommittedOffset) -> bytes:
    """The ``__consumer_offsets`` value of a committed offset (``OffsetCommitValue`` v3)."""
    metadata = committed.metadata.encode("utf-8", "surrogatepass")
    return (
        _VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, committed.offset, committed.leader_epoch, len(metadata))
        + metadata
        + _INT64.pack(committed.commit_timestamp_ms)
    )


class _Reader:
    """A cursor over a key or value, raising CorruptRecordError when it runs out."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.what = what
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptRecordError(
                f"{self.what} of {len(self.data)} bytes ends inside a field at byte {self.pos} (needs {n} more)"
            )
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def unpack(self, fmt: struct.Struct) -> int:
        value: int = fmt.unpack(self.take(fmt.size))[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptRecordError(f"{self.what}: an unsigned varint at byte {self.pos} is longer than 5 bytes")

    def text(self, length: int) -> str:
        if length < 0:
            raise CorruptRecordError(f"{self.what}: a non-nullable string has length {length} at byte {self.pos}")
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorruptRecordError(f"{self.what}: a string is not UTF-8 ({error.reason})") from None

    def string(self) -> str:
        return self.text(self.unpack(_INT16))

    def compact_string(self) -> str:
        return self.text(self.uvarint() - 1)


def decode_offset_commit_key(key: bytes) -> tuple[str, TopicPartition] | None:
    """(group, partition) of an ``OffsetCommitKey`` (v0 or v1); None for the other record types of
    ``__consumer_offsets``. Bytes after the fields are ignored, as Kafka ignores them.

    Raises:
        CorruptRecordError: The key is too short or a string is not UTF-8.
    """
    reader = _Reader(key, "OffsetCommitKey")
    version = reader.unpack(_INT16)
    if version not in (0, 1):
        return None
    group = reader.string()
    topic = reader.string()
    return group, TopicPartition(topic, reader.unpack(_INT32))


def encode_group_metadata_key(group_id: str) -> bytes:
    """The ``__consumer_offsets`` key of a group's metadata (``GroupMetadataKey`` v2)."""
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id, "group id")


def encode_group_metadata_value(generation: int, timestamp_ms: int) -> bytes:
    """The ``GroupMetadataValue`` v3 Kafka writes for an empty consumer group of ``generation``: protocol type
    ``consumer``, no protocol, no leader, the state's timestamp and no members."""
    return (
        _INT16.pack(GROUP_METADATA_VALUE_VERSION)
        + _string(_CONSUMER_PROTOCOL_TYPE, "protocol type")
        + _INT32.pack(generation)
        + _INT16.pack(_NULL_STRING)
        + _INT16.pack(_NULL_STRING)
        + _INT64.pack(timestamp_ms)
        + _INT32.pack(0)
    )


def decode_group_metadata_key(key: bytes) -> str | None:
    """The group of a ``GroupMetadataKey`` (v2); None for the other record types of ``__consumer_offsets``.

    Raises:
        CorruptRecordError: The key is too short or its group is not UTF-8.
    """
    reader = _Reader(key, "GroupMetadataKey")
    if reader.unpack(_INT16) != GROUP_METADATA_KEY_VERSION:
        return None
    return reader.string()


def decode_group_metadata_generation(value: bytes) -> int:
    """The generation of a ``GroupMetadataValue`` of any version (0 to 4 start alike: version, protocol type,
    generation), whoever wrote it.

    Raises:
        CorruptRecordError: A value too short, or a protocol type that is not UTF-8.
    """
    reader = _Reader(value, "GroupMetadataValue")
    version = reader.unpack(_INT16)
    if version >= _FLEXIBLE_GROUP_METADATA_VERSION:
        reader.compact_string()
    else:
        reader.string()
    return reader.unpack(_INT32)


def decode_offset_commit_value(value: bytes) -> CommittedOffset:
    """An ``OffsetCommitValue`` of any version Kafka has written (0 to 4).

    Raises:
        CorruptRecordError: Another version, a value too short, or a string that is not UTF-8.
    """
    reader = _Reader(value, "OffsetCommitValue")
    version = reader.unpack(_INT16)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise CorruptRecordError(f"OffsetCommitValue version {version} is not supported; accepted: 0 to 4")
    offset = reader.unpack(_INT64)
    leader_epoch = reader.unpack(_INT32) if version >= 3 else -1
    metadata = reader.compact_string() if version >= _FLEXIBLE_VALUE_VERSION else reader.string()
    commit_timestamp = reader.unpack(_INT64)
    expire_timestamp = reader.unpack(_INT64) if version == 1 else -1
    if version >= _FLEXIBLE_VALUE_VERSION:
        for _ in range(reader.uvarint()):
            reader.uvarint()  # the tag
            reader.take(reader.uvarint())
    return CommittedOffset(offset, metadata, leader_epoch, commit_timestamp, expire_timestamp)


# -- validation -------------------------------------------------------------------------------------------------


def _check_group_id(group_id: str) -> None:
    if not isinstance(group_id, str) or not group_id:
        raise InvalidConfigError(f"group id {group_id!r} is invalid; accepted: a non-empty string")


def checked_topic_partition(tp: tuple[str, int]) -> TopicPartition:
    """``tp`` as a ``TopicPartition``, checked as the clients' arguments are: a pair of a legal topic name and a
    partition number from 0 to 2147483647 (Kafka's int32).

    Raises:
        InvalidTopicError: The topic name is not legal.
        InvalidOffsetError: Not such a pair, or a partition number outside that range.
    """
    if not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str):
        raise InvalidOffsetError(f"topic partition {tp!r} is invalid; accepted: TopicPartition(topic, partition)")
    topic, partition = tp
    validate_topic_name(topic)
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT_MAX:
        raise InvalidOffsetError(f"partition {partition!r} of topic {topic!r} is invalid; accepted: 0 to {INT_MAX}")
    return TopicPartition(topic, partition)


def check_long(name: str, value: object, minimum: int = -LONG_MAX - 1) -> int:
    """``value``, an integer Kafka keeps in a Java long (from ``minimum``).

    Raises:
        InvalidOffsetError: Not an integer (bools are not), or outside ``minimum`` to 9223372036854775807.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= LONG_MAX:
        raise InvalidOffsetError(f"{name} = {value!r} is invalid; accepted: an integer from {minimum} to {LONG_MAX}")
    return value


def _check_offset(tp: TopicPartition, committed: OffsetAndMetadata) -> None:
    if not isinstance(committed, OffsetAndMetadata):
        raise InvalidOffsetError(f"the offset for {tp} is {committed!r}; accepted: an OffsetAndMetadata")
    offset, metadata, epoch = committed
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= LONG_MAX:
        raise InvalidOffsetError(f"offset {offset!r} for {tp} is invalid; accepted: 0 to {LONG_MAX}")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not -1 <= epoch <= INT_MAX:
        raise InvalidOffsetError(f"leader epoch {epoch!r} for {tp} is invalid; accepted: -1 (unknown) to {INT_MAX}")
    if not isinstance(metadata, str):
        raise InvalidConfigError(f"metadata {metadata!r} for {tp} is invalid; accepted: a string")
    size = len(metadata.encode("utf-8", "surrogatepass"))
    if size > OFFSET_METADATA_MAX_BYTES:
        raise InvalidConfigError(
            f"metadata for {tp} is {size} bytes of UTF-8; accepted: at most {OFFSET_METADATA_MAX_BYTES} "
            "(Kafka's offset.metadata.max.bytes)"
        )


def checked_offsets(
    group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
) -> dict[TopicPartition, OffsetAndMetadata]:
    """A group's commit as ``OffsetStore.commit`` takes it, checked before it is made (a transaction's offsets are
    checked when the transaction takes them, as their commit comes after its decision and must not fail).

    Raises:
        InvalidConfigError: An empty group id, or metadata above 4096 bytes (Kafka's ``offset.metadata.max.bytes``).
        InvalidOffsetError: A negative offset or partition, or a leader epoch below -1.
        InvalidTopicError: A partition of a topic name Kafka refuses.
    """
    _check_group_id(group_id)
    checked = {}
    for tp, committed in offsets.items():
        partition = checked_topic_partition(tp)
        _check_offset(partition, committed)
        checked[partition] = committed
    return checked


# -- results ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """A group's position in one partition (a row of ``kafka-consumer-groups --describe``).

    Attributes:
        partition: The partition.
        committed: The group's committed offset; None when it has none.
        log_end_offset: The partition's log end offset; None when the partition does not exist.
        lag: ``log_end_offset - committed``; None when either is unknown.
    """

    partition: TopicPartition
    committed: int | None
    log_end_offset: int | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.committed


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One row of a group's description: a partition, the group's position in it and the member it is assigned to
    (None when no live member has it)."""

    position: PartitionLag
    member: MemberDescription | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """A group as ``kafka-consumer-groups --describe`` shows it.

    Attributes:
        group_id: The group.
        state: Its state: its membership's, else ``Empty`` (a group with committed offsets and no members).
        assignor: The partition assignor of its current generation; empty without members.
        members: Its live members.
        rows: Its assigned partitions, members with the most partitions first, then the partitions with a committed
            offset that no member is assigned.
    """

    group_id: str
    state: str
    assignor: str
    members: tuple[MemberDescription, ...]
    rows: tuple[OffsetRow, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    """A group and its state, as ``kafka-consumer-groups --list --state`` lists it."""

    group_id: str
    state: str


ResetKind = Literal["earliest", "latest", "offset", "datetime", "shift", "current"]


@dataclass(frozen=True, slots=True)
class ResetStrategy:
    """Where ``plan_reset`` moves a group's offsets: the scenarios of ``kafka-consumer-groups --reset-offsets``.

    Build one with the class methods.
    """

    kind: ResetKind
    value: int = 0

    @classmethod
    def to_earliest(cls) -> ResetStrategy:
        """To each partition's log start offset."""
        return cls("earliest")

    @classmethod
    def to_latest(cls) -> ResetStrategy:
        """To each partition's log end offset."""
        return cls("latest")

    @classmethod
    def to_current(cls) -> ResetStrategy:
        """To each partition's committed offset as it is; the log end offset for a partition without one."""
        return cls("current")

    @classmethod
    def to_offset(cls, offset: int) -> ResetStrategy:
        """To ``offset`` (a Java long, as Kafka's ``--to-offset``), moved into [log start, log end] when outside it.

        Raises:
            InvalidOffsetError: ``offset`` is not such an integer.
        """
        return cls("offset", check_long("offset", offset))

    @classmethod
    def to_datetime(cls, timestamp_ms: int) -> ResetStrategy:
        """To the first record at or after ``timestamp_ms``; the log end when there is none.

        Raises:
            InvalidOffsetError: ``timestamp_ms`` is not milliseconds from 0 to the largest Java long.
        """
        return cls("datetime", check_long("timestamp (milliseconds since the epoch)", timestamp_ms, 0))

    @classmethod
    def shift_by(cls, delta: int) -> ResetStrategy:
        """``delta`` (negative: back; a Java long, as Kafka's ``--shift-by``) from the committed offset, moved into
        [log start, log end].

        Raises:
            InvalidOffsetError: ``delta`` is not such an integer.
        """
        return cls("shift", check_long("shift", delta))


@dataclass(frozen=True, slots=True)
class ResetPlan:
    """The offsets a reset would commit, and what the planning noticed.

    Attributes:
        group_id: The group.
        offsets: The new offset of each partition, sorted.
        warnings: Kafka's warnings: an offset moved into the log's range, a partition without a record at the
            datetime falling back to its log end.
    """

    group_id: str
    offsets: Mapping[TopicPartition, int]
    warnings: tuple[str, ...] = ()


# -- the store --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Partition:
    """What one ``__consumer_offsets`` partition holds, read up to ``position``."""

    position: int = 0
    groups: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)  # the latest recorded generation of each group


class OffsetStore:
    """Consumer groups' committed offsets in a log directory's ``__consumer_offsets``.

    Safe to share between threads; any number of processes may use the same log directory at once.

    Args:
        log_dir: The log directory (a path or a ``LogDirectory``).

    Raises:
        InvalidConfigError: ``server.properties`` sets ``offsets.topic.num.partitions`` or
            ``offsets.topic.segment.bytes`` to a value Kafka refuses.

    Example:
        >>> store = OffsetStore("/data/logs")
        >>> store.commit("billing", {TopicPartition("orders", 0): OffsetAndMetadata(42)})
        >>> store.committed("billing")
        {TopicPartition(topic='orders', partition=0): OffsetAndMetadata(offset=42, metadata='', leader_epoch=-1)}
    """

    def __init__(self, log_dir: str | os.PathLike[str] | LogDirectory) -> None:
        self._log_dir = log_dir if isinstance(log_dir, LogDirectory) else LogDirectory(log_dir)
        self._storage = self._log_dir.storage
        server = self._log_dir.topics.server_properties()
        self._configured_partitions = _broker_int(server, OFFSETS_TOPIC_PARTITIONS)
        segment_bytes = _broker_int(server, OFFSETS_TOPIC_SEGMENT_BYTES)
        try:
            self._topic_configs = normalize_overrides(
                {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(segment_bytes)}
            )
        except InvalidConfigError as error:
            raise InvalidConfigError(
                f"{server.path}: {OFFSETS_TOPIC_SEGMENT_BYTES.name} = {segment_bytes} cannot be the segment.bytes of "
                f"{OFFSETS_TOPIC}: {error}"
            ) from None
        self._partition_count: int | None = None  # known once the topic exists
        self._topic_ready = False
        self._logs: dict[int, Log] = {}
        self._partitions: dict[int, _Partition] = {}
        self._mutex = threading.RLock()

    def __repr__(self) -> str:
        return f"OffsetStore({self._log_dir.path!r})"

    def close(self) -> None:
        """Close the partition logs this store opened."""
        with self._mutex:
            for log in self._logs.values():
                log.close()
            self._logs.clear()

    def __enter__(self) -> OffsetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def log_dir(self) -> LogDirectory:
        return self._log_dir

    # -- the topic --------------------------------------------------------------------------------------------

    @property
    def partition_count(self) -> int:
        """The partitions of ``__consumer_offsets``: the topic's, or ``offsets.topic.num.partitions`` when that is
        more (a broker's partial copy) or the topic does not exist yet."""
        if self._partition_count is None:
            try:
                existing = self._log_dir.topics.get(OFFSETS_TOPIC).partitions
            except UnknownTopicError:
                return self._configured_partitions
            self._partition_count = max(existing, self._configured_partitions)
        return self._partition_count

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding a group's offsets."""
        return partition_for(group_id, self.partition_count)

    def _ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` as a broker does, or adopt a copy made by a broker; once per store."""
        if self._topic_ready:
            return
        topics = self._log_dir.topics
        topic = topics.create(OFFSETS_TOPIC, self._configured_partitions, self._topic_configs, if_not_exists=True)
        count = max(topic.partitions, self._configured_partitions)
        if topic.partitions < count:
            try:
                topics.alter_partitions(OFFSETS_TOPIC, count)
            except InvalidPartitionsError:
                pass  # another process grew it first
        if "cleanup.policy" not in topic.configs:
            topics.alter_configs(
                OFFSETS_TOPIC, {k: v for k, v in self._topic_configs.items() if k not in topic.configs}
            )
        self._partition_count = count
        self._topic_ready = True

    def _log(self, partition: int) -> Log:
        log = self._logs.get(partition)
        if log is None:
            log = self._logs[partition] = self._log_dir.partition(OFFSETS_TOPIC, partition)
        return log

    # -- reading ----------------------------------------------------------------------------------------------

    def _refresh(self, partition: int) -> dict[str, dict[TopicPartition, CommittedOffset]]:
        """The groups' offsets in a partition, after reading what was appended since the last call."""
        state = self._partitions.setdefault(partition, _Partition())
        if not self._storage.is_directory(self._storage.join(f"{OFFSETS_TOPIC}-{partition}")):
            state.groups.clear()
            state.generations.clear()
            state.position = 0
            return state.groups
        try:
            log = self._log(partition)
        except UnknownTopicError:
            return {}  # a topic with fewer partitions, not grown yet: nothing committed there
        while True:
            view = log.view()
            if not view.log_start_offset <= state.position <= view.log_end_offset:
                # Records deleted below what was read, or the topic deleted and created again: start over.
                state.groups.clear()
                state.generations.clear()
                state.position = view.log_start_offset
            try:
                for batch in log.read_arrow(state.position, view.log_end_offset):
                    self._apply(state, batch, partition)
                    state.position = int(batch.column("offset")[-1].as_py()) + 1
            except OffsetOutOfRangeError:
                continue  # retention moved the log start past the position while reading: the check starts over
            state.position = view.log_end_offset  # past trailing control records too
            return state.groups

    def _apply(self, state: _Partition, batch: pa.RecordBatch, partition: int) -> None:
        """Apply a batch of records: only the last record of each key in the batch matters, so the rest are not
        decoded (a partition not compacted yet repeats keys many times)."""
        keys = batch.column("key")
        if keys.null_count:
            batch = batch.filter(keys.is_valid())
            keys = batch.column("key")
        n = batch.num_rows
        if n == 0:
            return
        codes = np.asarray(keys.dictionary_encode().indices)
        _, first_from_end = np.unique(codes[::-1], return_index=True)
        rows = pa.array(np.sort(n - 1 - first_from_end))
        records = zip(
            keys.take(rows).to_pylist(),
            batch.column("value").take(rows).to_pylist(),
            batch.column("offset").take(rows).to_pylist(),
            strict=True,
        )
        for key, value, offset in records:
            try:
                metadata_group = decode_group_metadata_key(key)
                if metadata_group is not None:
                    if value is None:
                        state.generations.pop(metadata_group, None)
                    else:
                        state.generations[metadata_group] = decode_group_metadata_generation(value)
                    continue
                decoded = decode_offset_commit_key(key)
                if decoded is None:
                    continue
                group, tp = decoded
                offsets = state.groups.get(group)
                if value is None:
                    if offsets is not None:
                        offsets.pop(tp, None)
                        if not offsets:
                            del state.groups[group]
                    continue
                committed = decode_offset_commit_value(value)
            except CorruptRecordError as error:
                raise CorruptRecordError(
                    f"{OFFSETS_TOPIC}-{partition} offset {offset}: {error.detail}",
                    file=self._log(partition).directory,
                ) from None
            state.groups.setdefault(group, {})[tp] = committed

    def _group_offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self._refresh(self.partition_for(group_id)).get(group_id, {})

    def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """A group's committed offsets with their commit timestamps, sorted; only ``partitions`` when given
        (those without one are left out)."""
        _check_group_id(group_id)
        with self._mutex:
            offsets = self._group_offsets(group_id)
            wanted = offsets.keys() if partitions is None else {checked_topic_partition(tp) for tp in partitions}
            return {tp: offsets[tp] for tp in sorted(wanted) if tp in offsets}

    def committed(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets, sorted; only ``partitions`` when given (those without one are left out)."""
        return {tp: c.offset_and_metadata for tp, c in self.committed_offsets(group_id, partitions).items()}

    def groups(self) -> list[str]:
        """The groups with at least one committed offset, sorted."""
        found: set[str] = set()
        with self._mutex:
            for partition in range(self.partition_count):
                found.update(self._refresh(partition))
        return sorted(found)

    # -- writing ----------------------------------------------------------------------------------------------

    def _append(
        self,
        group_id: str,
        keys: list[bytes],
        values: list[bytes | None],
        timestamp_ms: int,
        expected_end_offset: int | None = None,
    ) -> None:
        """Append the records as one batch to the group's partition (only if it ends at ``expected_end_offset``,
        when given), then compact it if this append rolled it.

        Raises:
            LogEndChangedError: The partition no longer ends at ``expected_end_offset``; nothing was appended.
        """
        self._ensure_topic()
        size = sum(len(k) + len(v or b"") + _RECORD_OVERHEAD_BOUND for k, v in zip(keys, values, strict=True))
        records = pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array(np.full(len(keys), timestamp_ms, dtype=np.int64)),
            ],
            names=["key", "value", "timestamp"],
        )
        settings = BatchSettings(max_batch_bytes=size + RECORD_BATCH_OVERHEAD, max_batch_records=len(keys))
        with self._mutex:
            log = self._log(self.partition_for(group_id))
            info = log.append_arrow(records, settings, expected_end_offset=expected_end_offset)
            self._maybe_compact(log, info.first_offset)

    def _maybe_compact(self, log: Log, first_offset: int) -> None:
        """Run the log cleaner on the partition if the append starting at ``first_offset`` rolled its segment: the
        one moment new records become cleanable, when a broker's cleaner thread would pick the partition up."""
        bases = log.view().segment_bases
        if len(bases) < 2 or bases[-1] != first_offset:
            return
        try:
            clean_log(log)
        except (PySparkLogError, OSError):
            pass  # the commit is acknowledged; the next roll or `pysparklog log-cleaner` retries, and reports why

    def recorded_generation(self, group_id: str) -> int:
        """The latest generation of a group that its partition records (-1: none)."""
        _check_group_id(group_id)
        partition = self.partition_for(group_id)
        with self._mutex:
            self._refresh(partition)
            return self._partitions[partition].generations.get(group_id, -1)

    def advance_generation(self, group_id: str, at_least: int) -> int:
        """Record a new generation of a group, above every generation its partition records, and return it:
        ``at_least``, or one past the latest recorded when that is higher.

        A coordinator that keeps its group's membership elsewhere (the Kafka protocol endpoint keeps it in memory)
        records each generation as it starts, as a broker writes its GroupMetadata record: a coordinator that takes
        a group over starts above every generation a previous one gave out, and a commit of a generation older than
        the recorded one is refused (``commit``'s fencing), whichever process makes it.
        """
        _check_group_id(group_id)
        self._ensure_topic()
        partition = self.partition_for(group_id)
        with self._mutex:
            while True:
                self._refresh(partition)
                state = self._partitions[partition]
                generation = max(at_least, state.generations.get(group_id, -1) + 1)
                now = int(time.time() * 1000)
                key, value = encode_group_metadata_key(group_id), encode_group_metadata_value(generation, now)
                try:
                    self._append(group_id, [key], [value], now, state.position)
                    return generation
                except LogEndChangedError:
                    continue  # another commit came first: decide again on what it appended

    def commit_as(
        self,
        coordinator: GroupCoordinator,
        member_id: str | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> None:
        """Commit offsets of the coordinator's group as one of its members (``member_id`` None: from outside the
        group, which must have no live members), fenced by the generation the member owns its partitions in.

        Raises:
            CommitFailedError: The member does not own the partitions, or the group has moved past its generation.
            MetadataChangedError: The group's state changed while its lock was held (the lock lapsed).
        """
        group_id = coordinator.group_id
        with coordinator.owning(member_id, offsets, self.recorded_generation(group_id)) as generation:
            self.commit(group_id, offsets, generation=generation)

    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        commit_timestamp_ms: int | None = None,
        generation: int | None = None,
    ) -> None:
        """Commit offsets of a group, atomically: one record batch, whatever the number of partitions.

        Acknowledged when this returns (see the module's documentation). Nothing is written for no offsets.

        Args:
            group_id: The group.
            offsets: The next offset to consume, per partition, with its metadata and leader epoch.
            commit_timestamp_ms: The commit time (default: now).
            generation: The group generation the commit is made in: it is appended only if the partition records
                no newer generation of the group, and records this one if it is newer (see the module's
                documentation). None: unfenced, for tools that hold the group's lock while it has no members.

        Raises:
            CommitFailedError: The partition records a newer generation of the group than ``generation``.
            InvalidConfigError: An empty group id, metadata above 4096 bytes (Kafka's ``offset.metadata.max.bytes``),
                or a commit whose batch is larger than ``max.message.bytes`` of ``__consumer_offsets``.
            InvalidOffsetError: A negative offset or partition, or a leader epoch below -1.
            InvalidTopicError: A partition of a topic name Kafka refuses.
        """
        now = int(time.time() * 1000) if commit_timestamp_ms is None else commit_timestamp_ms
        if isinstance(now, bool) or not isinstance(now, int) or not 0 <= now <= LONG_MAX:
            raise InvalidOffsetError(f"commit timestamp {now!r} is invalid; accepted: milliseconds since the epoch")
        checked = checked_offsets(group_id, offsets)
        if not checked:
            return
        keys = [encode_offset_commit_key(group_id, tp) for tp in checked]
        values: list[bytes | None] = [
            encode_offset_commit_value(CommittedOffset(c.offset, c.metadata, c.leader_epoch, now))
            for c in checked.values()
        ]
        if generation is None:
            self._append(group_id, keys, values, now)
        else:
            self._append_fenced(group_id, generation, keys, values, now)

    def _append_fenced(
        self, group_id: str, generation: int, keys: list[bytes], values: list[bytes | None], timestamp_ms: int
    ) -> None:
        """Append a commit of ``generation`` unless the partition's latest state records a newer generation of the
        group: decided on the partition read to its end, and appended only if it still ends there, else read
        again and decided again. The commit's batch records its generation first when that is new.

        Raises:
            CommitFailedError: The partition records a newer generation of the group.
        """
        self._ensure_topic()
        partition = self.partition_for(group_id)
        with self._mutex:
            while True:
                self._refresh(partition)
                state = self._partitions[partition]
                recorded = state.generations.get(group_id, -1)
                if recorded > generation:
                    raise CommitFailedError(
                        f"commit of group '{group_id}' refused: it was made in generation {generation}, and the "
                        f"group has since moved to generation {recorded}, whose members may have committed newer "
                        "offsets; nothing was written"
                    )
                fence_keys: list[bytes] = []
                fence_values: list[bytes | None] = []
                if recorded < generation:
                    fence_keys.append(encode_group_metadata_key(group_id))
                    fence_values.append(encode_group_metadata_value(generation, timestamp_ms))
                try:
                    self._append(group_id, fence_keys + keys, fence_values + values, timestamp_ms, state.position)
                    return
                except LogEndChangedError:
                    continue  # another commit came first: decide again on what it appended

    def delete(self, group_id: str, partitions: Iterable[TopicPartition] | None = None) -> list[TopicPartition]:
        """Delete a group's committed offsets (of ``partitions`` only, when given) with tombstones, in one batch, as
        the coordinator does. An offset another process commits meanwhile may survive the deletion.

        Returns:
            The partitions that had a committed offset, sorted.
        """
        _check_group_id(group_id)
        with self._mutex:
            live = self._group_offsets(group_id)
            chosen = live.keys() if partitions is None else {checked_topic_partition(tp) for tp in partitions}
            deleted = sorted(tp for tp in chosen if tp in live)
            if deleted:
                keys = [encode_offset_commit_key(group_id, tp) for tp in deleted]
                self._append(group_id, keys, [None] * len(keys), int(time.time() * 1000))
            return deleted

    # -- groups -----------------------------------------------------------------------------------------------

    def _membership(self, group_id: str) -> GroupDescription | None:
        return _membership(self._log_dir, [group_id]).get(group_id)

    def _existing(self, group_id: str) -> GroupDescription | None:
        """A group's live membership, checking that the group exists.

        Raises:
            GroupIdNotFoundError: The group has neither live membership nor committed offsets.
        """
        membership = self._membership(group_id)
        if membership is None and not self._group_offsets(group_id):
            raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
        return membership

    def list_groups(self) -> list[ConsumerGroupListing]:
        """Every group with committed offsets or live membership, sorted, with its state."""
        with self._mutex:
            memberships = _membership(self._log_dir, None)
            names = set(self.groups()) | memberships.keys()
            return [
                ConsumerGroupListing(g, memberships[g].state if g in memberships else GroupState.EMPTY)
                for g in sorted(names)
            ]

    def _positions(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[PartitionLag]:
        offsets = self._group_offsets(group_id)
        ends = _log_ends(self._log_dir, partitions)
        return [PartitionLag(tp, offsets[tp].offset if tp in offsets else None, end) for tp, end in ends.items()]

    def lag(self, group_id: str, partitions: Iterable[TopicPartition] | None = None) -> list[PartitionLag]:
        """A group's committed offset, log end offset and lag per partition (its committed partitions by default),
        sorted."""
        _check_group_id(group_id)
        with self._mutex:
            chosen = (
                self._group_offsets(group_id).keys() if partitions is None else map(checked_topic_partition, partitions)
            )
            return self._positions(group_id, sorted(set(chosen)))

    def describe(self, group_id: str) -> ConsumerGroupDescription | None:
        """A group's state, members and per-partition positions as ``kafka-consumer-groups --describe`` shows
        them; None when the group has neither members nor committed offsets."""
        _check_group_id(group_id)
        with self._mutex:
            membership = self._membership(group_id)
            offsets = self._group_offsets(group_id)
            if membership is None and not offsets:
                return None
            members = tuple(membership.members) if membership is not None else ()
            rows: list[OffsetRow] = []
            assigned: set[TopicPartition] = set()
            for member in sorted((m for m in members if m.assignment), key=lambda m: -len(m.assignment)):
                partitions = sorted(set(member.assignment))
                assigned.update(partitions)
                rows += [OffsetRow(p, member) for p in self._positions(group_id, partitions)]
            rows += [OffsetRow(p, None) for p in self._positions(group_id, sorted(offsets.keys() - assigned))]
            return ConsumerGroupDescription(
                group_id,
                membership.state if membership is not None else GroupState.EMPTY,
                membership.assignor if membership is not None else "",
                members,
                tuple(rows),
            )

    def _check_inactive(self, group_id: str) -> None:
        membership = self._membership(group_id)
        if membership is not None and membership.state != GroupState.EMPTY:
            raise GroupNotEmptyError(
                f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state is "
                f"{membership.state}."
            )

    def plan_reset(self, group_id: str, partitions: Iterable[TopicPartition], strategy: ResetStrategy) -> ResetPlan:
        """The offsets ``kafka-consumer-groups --reset-offsets --dry-run`` would show; nothing is committed.

        Raises:
            GroupNotEmptyError: The group has active members.
            UnknownTopicError: A partition that does not exist.
            InvalidOffsetError: ``shift_by`` for a partition without a committed offset.
        """
        _check_group_id(group_id)
        with self._mutex:
            self._check_inactive(group_id)
            chosen = sorted({checked_topic_partition(tp) for tp in partitions})
            committed = self._group_offsets(group_id)
            offsets: dict[TopicPartition, int] = {}
            warnings: list[str] = []
            with _data_logs(self._log_dir, chosen) as logs:
                for tp, log in logs.items():
                    offsets[tp] = _reset_offset(tp, log, strategy, committed.get(tp), warnings)
            return ResetPlan(group_id, offsets, tuple(warnings))

    def execute_reset(self, plan: ResetPlan) -> None:
        """Commit a reset plan (``--execute``), in one batch; its offsets get no metadata and no leader epoch.

        Raises:
            GroupNotEmptyError: The group has active members (a member joined since the plan was made).
        """
        with self._mutex, _group_frozen(self._log_dir, plan.group_id):
            self._check_inactive(plan.group_id)
            self.commit(plan.group_id, {tp: OffsetAndMetadata(offset) for tp, offset in plan.offsets.items()})

    def delete_group(self, group_id: str) -> list[TopicPartition]:
        """Delete a group's committed offsets, as Kafka's DeleteGroups does; returns the partitions that had one.

        Raises:
            GroupNotEmptyError: The group has active members.
            GroupIdNotFoundError: The group has neither members nor committed offsets.
        """
        _check_group_id(group_id)
        with self._mutex:
            with _group_frozen(self._log_dir, group_id):
                membership = self._existing(group_id)
                if membership is not None and membership.state != GroupState.EMPTY:
                    raise GroupNotEmptyError(
                        f"Consumer group '{group_id}' is not empty: its state is {membership.state}."
                    )
                deleted = self.delete(group_id)
                if self.recorded_generation(group_id) >= 0:
                    # As a broker's DeleteGroups: the group's metadata record goes with its offsets.
                    self._append(group_id, [encode_group_metadata_key(group_id)], [None], int(time.time() * 1000))
            coordinator = GroupCoordinator(self._log_dir, group_id)
            try:
                coordinator.delete()  # its membership state too, unless a member joined meanwhile
            finally:
                coordinator.close()
            return deleted

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Delete a group's committed offsets of some partitions, as Kafka's OffsetDelete does: refused for topics
        that live members are assigned. Returns the partitions that had one.

        Raises:
            GroupIdNotFoundError: The group has neither members nor committed offsets.
            GroupNotEmptyError: A live member is assigned a partition of one of the topics.
        """
        _check_group_id(group_id)
        chosen = sorted({checked_topic_partition(tp) for tp in partitions})
        with self._mutex:
            membership = self._existing(group_id)
            consumed = {tp.topic for m in membership.members for tp in m.assignment} if membership else set()
            subscribed = sorted(consumed & {tp.topic for tp in chosen})
            if subscribed:
                raise GroupNotEmptyError(
                    f"The consumer group '{group_id}' is actively subscribed to the topic(s) {', '.join(subscribed)}: "
                    "their offsets can be deleted once no member is assigned them."
                )
            return self.delete(group_id, chosen)


# -- the partitions offsets point into --------------------------------------------------------------------------


def _check_exists(log_dir: LogDirectory, tp: TopicPartition, counts: dict[str, int]) -> None:
    """Raise UnknownTopicError unless the partition exists; ``counts`` caches the topics' partition counts."""
    if tp.topic not in counts:
        counts[tp.topic] = log_dir.topics.get(tp.topic).partitions
    if tp.partition >= counts[tp.topic]:
        raise UnknownTopicError(
            f"Partition {tp.partition} of topic '{tp.topic}' does not exist: the topic has {counts[tp.topic]} "
            "partitions"
        )


@contextmanager
def _data_logs(log_dir: LogDirectory, partitions: Iterable[TopicPartition]) -> Iterator[dict[TopicPartition, Log]]:
    """The logs of partitions that must exist, closed afterwards.

    Raises:
        UnknownTopicError: A partition does not exist.
    """
    counts: dict[str, int] = {}
    logs: dict[TopicPartition, Log] = {}
    try:
        for tp in partitions:
            _check_exists(log_dir, tp, counts)
            logs[tp] = log_dir.partition(tp.topic, tp.partition)
        yield logs
    finally:
        for log in logs.values():
            log.close()


def _log_ends(log_dir: LogDirectory, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
    """Each partition's log end offset; None for one that does not exist (its topic was deleted...)."""
    counts: dict[str, int] = {}
    ends: dict[TopicPartition, int | None] = {}
    for tp in partitions:
        try:
            _check_exists(log_dir, tp, counts)
        except UnknownTopicError:
            counts.setdefault(tp.topic, 0)
            ends[tp] = None
            continue
        with log_dir.partition(tp.topic, tp.partition) as log:
            ends[tp] = log.log_end_offset
    return ends


def _reset_offset(
    tp: TopicPartition,
    log: Log,
    strategy: ResetStrategy,
    committed: CommittedOffset | None,
    warnings: list[str],
) -> int:
    """One partition's new offset under ``strategy`` (Kafka's ``prepareOffsetsToReset``)."""
    view = log.view()
    start, end = view.log_start_offset, view.log_end_offset
    if strategy.kind == "earliest":
        return start
    if strategy.kind == "latest":
        return end
    if strategy.kind == "current":
        return end if committed is None else committed.offset
    if strategy.kind == "datetime":
        found = log.offset_for_timestamp(strategy.value)
        if found is None:
            warnings.append(
                f"Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset."
            )
            return end
        return found[0]
    if strategy.kind == "shift":
        if committed is None:
            raise InvalidOffsetError(
                f"Cannot shift offset for partition {tp} since there is no current committed offset"
            )
        requested = committed.offset + strategy.value
    else:
        requested = strategy.value
    if requested > end:
        warnings.append(
            f"New offset ({requested}) is higher than latest offset for topic partition {tp}. Value will be set to "
            f"{end}"
        )
        return end
    if requested < start:
        warnings.append(
            f"New offset ({requested}) is lower than earliest offset for topic partition {tp}. Value will be set to "
            f"{start}"
        )
        return start
    return requested
