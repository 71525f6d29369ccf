"""The topics of a log directory: what ``kafka-topics.sh`` creates, lists, alters and deletes, with their configs.

Topic metadata is one JSON file in the log directory (a file: Kafka's LogManager refuses directories it does not
know in a log directory)::

    pysparklog-topics.json
    {"version": 1,
     "topics": {"orders": {"topic_id": "<22-char id>", "partitions": 3, "configs": {"retention.ms": "3600000"}}},
     "deleting": {"old-topic": "<its topic id>"}}

Every change is a read-modify-write under the log directory's lock (``.lock``; on an object store, a lease) that
replaces the file atomically, and only if it is still the version read: concurrent processes lose no change, a
holder that lost its lease while it stalled fails instead of undoing the next holder's change, and a crash leaves
the old metadata or the new, never a mix. Readers take no lock. The metadata is the truth: a topic is created by
writing its entry, then its partition directories (each with a ``partition.metadata`` holding the topic id) are
made; one that a crash left missing is made when the partition is opened.

A topic has at most ``MAX_PARTITIONS`` partitions. Every partition is a directory made when the topic is created
(or its partitions added), and the commands that describe a topic, list its offsets or plan a Spark read visit
each one: the bound keeps all of them quick, where a count up to Kafka's int32 limit (2147483647) would have
``topics --create`` make directories for days and every later command stall on it.

A topic also exists without an entry when appends created its partition directories (``LogDirectory.partition``
works without ``topics --create``): such a topic is listed, described, altered and deleted like the others, its
partition count being one more than its highest partition directory; altering it adopts it into the metadata
with the id in its ``partition.metadata``.

A topic's id is made when it is created, and is set to the id a Kafka cluster gave the topic before its partition
directories are moved into a broker's log directory (``set_topic_id``): a KRaft broker takes a partition whose
``partition.metadata`` names an id its metadata does not know for a stray replica and renames it ``-stray``
(``LogManager.isStrayKraftReplica``). The id is written into the metadata first (the commit point), then into each
partition's ``partition.metadata``; a crash in between leaves partitions with the old id, which running it again
rewrites. On an object store an id is never set: it names the local replicas of the topic's partitions on every host
that read them (``objects.log``), and only an id made for each topic keeps a replica of another log from being taken
for this one.

Deleting a topic replaces its entry by a tombstone under ``deleting`` (the commit point), renames each partition
directory as Kafka does (``<topic>-<partition>.<32 hex>-delete``), drops the tombstone, then removes the renamed
directories. A crash before the renames leaves the tombstone, which the next change finishes; one after leaves
``-delete`` directories, which the next delete or listing removes. An object store cannot rename a prefix (a
rename is a copy of each object and a delete): there the partition directories' objects are deleted where they
are, under the lease, before the tombstone is dropped, so a deletion a crash interrupted is finished by the next
change as well.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import NoReturn

from pysparklog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidLogDirectoryError,
    InvalidPartitionsError,
    InvalidTopicError,
    InvalidTopicIdError,
    PySparkLogError,
    TopicExistsError,
    UnknownTopicError,
)
from pysparklog.storage import checkpoints
from pysparklog.storage.config import LogConfig
from pysparklog.storage.io import (
    LOG_DIR_LOCK,
    FileStat,
    FileSystemStorage,
    Storage,
    VersionedFile,
    read_if_exists,
    storage_for,
)
from pysparklog.storage.log_state import parse_partition_dir
from pysparklog.storage.objects.topic_commit import chain_directory_name
from pysparklog.storage.topic_config import (
    AUTO_CREATE_TOPICS_ENABLE,
    SERVER_PROPERTIES,
    TOPIC_CONFIGS,
    ConfigEntry,
    ConfigType,
    ServerProperties,
    describe_configs,
    effective_config,
    normalize_overrides,
    topic_config,
)
from pysparklog.storage.topic_config import (
    MAX_PARTITIONS as MAX_PARTITIONS,  # the bound is the topics', kept with the broker configs it bounds
)

_log = logging.getLogger(__name__)

TOPICS_FILE = "pysparklog-topics.json"
METADATA_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH: "<topic>-<partition>" must fit a file name
#: Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME: the KRaft metadata log. A broker's log directory holds it as
#: ``__cluster_metadata-0``, but it is no topic: no broker lists it, and Kafka refuses to create it.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: Kafka's internal topics (``Topic.isInternal``), which only their coordinators create, each with its own settings
#: (``offsets.topic.num.partitions``...), never a producer's first use; ``--exclude-internal`` leaves them out, and
#: Metadata marks them internal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID: the id of a topic whose id is unknown
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's Uuid.METADATA_TOPIC_ID (ONE_UUID): __cluster_metadata's
#: The ids Kafka's ``Uuid.RESERVED`` holds, which no topic may be given.
RESERVED_TOPIC_IDS = {
    ZERO_TOPIC_ID: "Kafka's zero id, which means 'no id'",
    METADATA_TOPIC_ID: "the id of Kafka's metadata log, __cluster_metadata",
}
DELETE_SUFFIX = "-delete"

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_BASE64URL_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_ACCEPTED_IDS = (
    "accepted: Kafka's form, 22 base64url characters as kafka-topics.sh --describe prints after 'TopicId:' "
    "(e.g. fFqDVmuKQi-6-agtLR19vw), or the same id in the canonical UUID form, 32 hex digits as 8-4-4-4-12 "
    "(7c5a8356-6b8a-422f-baf9-a82d2d1d7dbf)"
)
_DELETE_DIR = re.compile(r".+-[0-9]+\.[0-9a-f]{32}" + DELETE_SUFFIX)
_FILE_NAME_MAX = 255
# The log directory's checkpoint files that hold an entry per partition, cleared of a deleted topic's.
_TOPIC_PARTITION_CHECKPOINTS = (checkpoints.RECOVERY_POINT_CHECKPOINT, checkpoints.LOG_START_OFFSET_CHECKPOINT)
# A file whose mtime is this close to the time it was read may change again within the same timestamp tick (and
# version: a filesystem's is its inode, size and mtime): its cached content is trusted only once it is older (git's
# "racily clean" entries).
_RACY_NS = 2_000_000_000
#: How old a topic's cached configs may grow on an object store before they are read again, in the background:
#: there every look at the metadata objects is a request of 10-30 ms, which an append must not wait for. A change
#: made by another process takes effect within about this long, as a broker's dynamic configs reach its logs
#: asynchronously; a change made through this process takes effect at once (``_changes``).
OBJECT_STORE_CONFIG_MAX_AGE_S = 5.0
#: How many times each log directory's metadata was written by this process: a provider whose cache predates a
#: write reads again at once instead of waiting out its age.
_changes: dict[str, int] = {}
#: Per log directory on an object store, the metadata this process read last: (when, ``_changes`` then, metadata).
_recent_metadata: dict[str, tuple[float, int, _Metadata]] = {}
_recent_metadata_lock = threading.Lock()
#: Per (log directory, topic) on an object store, the configs this process read last (``TopicConfigProvider``).
_recent_configs: dict[tuple[str, str], _Cached] = {}
_recent_configs_lock = threading.Lock()

Progress = Callable[[int, int], None]
"""Called with (done, total) as a long operation advances, for a progress bar."""


def validate_topic_name(name: str) -> None:
    """Refuse a topic name as Kafka's ``Topic.validate`` does; no legal name makes a path outside the log directory.

    Raises:
        InvalidTopicError: The name is empty, ``.`` or ``..``, longer than 249 characters, or has a character
            other than ASCII letters, digits, ``.``, ``_`` and ``-``.
    """
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


def _collision_key(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: names equal after this collide in metric names, so Kafka refuses them."""
    return name.replace(".", "_")


def validate_topic_partitions(partitions: int, source: str = "partitions") -> None:
    """Refuse a topic's partition count outside 1 to ``MAX_PARTITIONS``, whatever is wrong with it, with one
    message: the same accepted range for 0, -1, 20000 or a count that is no integer.

    Args:
        partitions: The count.
        source: Where the count came from, for the message (``num.partitions`` of ``server.properties``...).

    Raises:
        InvalidPartitionsError: Not an integer from 1 to ``MAX_PARTITIONS``.
    """
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
        _refuse_partitions(partitions, source)


def parse_topic_partitions(text: str, source: str) -> int:
    """A topic's partition count given as text (a command's ``--partitions``), refused as
    :func:`validate_topic_partitions` refuses a count, text that is no integer included.

    Raises:
        InvalidPartitionsError: Not an integer from 1 to ``MAX_PARTITIONS``.
    """
    try:
        partitions = int(text)
    except ValueError:
        _refuse_partitions(text, source)
    validate_topic_partitions(partitions, source)
    return partitions


def _refuse_partitions(partitions: object, source: str) -> NoReturn:
    raise InvalidPartitionsError(
        f"{source} = {partitions!r} is invalid; accepted: an integer from 1 to {MAX_PARTITIONS} (each partition is a "
        "directory of the log directory, which commands visit one by one)"
    )


def parse_topic_id(text: str) -> str:
    """A topic id in Kafka's form (``Uuid.toString``), from that form or the canonical UUID form, for a topic to be
    given the id a Kafka cluster knows it by.

    Raises:
        InvalidTopicIdError: ``text`` is in neither form (a 22-character id whose last character carries bits past
            the 16 bytes is no id Kafka prints: a typo), or is an id Kafka reserves.
    """
    if _CANONICAL_UUID.fullmatch(text):
        topic_id = checkpoints.topic_id_text(uuid.UUID(text).bytes)
    elif not _BASE64URL_ID.fullmatch(text):
        raise InvalidTopicIdError(f"topic id {text!r} is malformed; {_ACCEPTED_IDS}")
    elif checkpoints.topic_id_text(base64.urlsafe_b64decode(text + "==")) != text:
        raise InvalidTopicIdError(
            f"topic id {text!r} is malformed: its last character holds bits past the id's 16 bytes, which Kafka "
            f"never prints (a typo?); {_ACCEPTED_IDS}"
        )
    else:
        topic_id = text
    if topic_id in RESERVED_TOPIC_IDS:
        raise InvalidTopicIdError(
            f"topic id {text!r} is reserved by Kafka ({RESERVED_TOPIC_IDS[topic_id]}); accepted: any other id"
        )
    return topic_id


def partition_dirs(log_dir: str | os.PathLike[str] | Storage) -> list[tuple[str, int]]:
    """Every ``(topic, partition)`` with a directory in the log directory (its location or storage), sorted;
    directories being deleted and foreign ones are skipped."""
    storage = storage_for(log_dir)
    found = []
    for name in storage.list(storage.join()):
        try:
            topic, partition = parse_partition_dir(name)
            validate_topic_name(topic)
        except PySparkLogError:
            continue  # '-delete', '-future', '-stray' and foreign directories
        if storage.is_directory(storage.join(name)):
            found.append((topic, partition))
    return sorted(found)


@dataclass(frozen=True)
class TopicMetadata:
    """What a log directory knows of a topic.

    Attributes:
        name: The topic.
        topic_id: Its id (Kafka's ``Uuid`` string), the one in each partition's ``partition.metadata``;
            ``ZERO_TOPIC_ID`` for a topic made by appends whose directories have none.
        partitions: Its partition count.
        configs: Its config overrides (Kafka names and values); the rest come from ``server.properties`` and
            the defaults.
    """

    name: str
    topic_id: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", MappingProxyType(dict(self.configs)))


@dataclass(slots=True)
class _Metadata:
    """The content of ``pysparklog-topics.json``."""

    topics: dict[str, TopicMetadata]
    deleting: dict[str, str]  # topic -> id of a deletion committed but not yet applied to the directories
    stored: VersionedFile | None = None  # the file as read under the lock: a change replaces it if still that version

    @classmethod
    def decode(cls, data: bytes | None, path: str) -> _Metadata:
        """Parse the file's bytes; None (no file) is no topics."""
        if data is None:
            return cls({}, {})
        try:
            document = json.loads(data)
            if document["version"] != METADATA_VERSION:
                raise CorruptRecordError(
                    f"metadata version {document['version']!r}, expected {METADATA_VERSION} (written by a newer "
                    "pysparklog?)",
                    file=path,
                )
            topics = {
                name: TopicMetadata(name, str(entry["topic_id"]), int(entry["partitions"]), dict(entry["configs"]))
                for name, entry in document["topics"].items()
            }
            return cls(topics, {str(k): str(v) for k, v in document["deleting"].items()})
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptRecordError(f"not pysparklog topic metadata: {error}", file=path) from None

    def encode(self) -> bytes:
        document = {
            "version": METADATA_VERSION,
            "topics": {
                name: {"topic_id": t.topic_id, "partitions": t.partitions, "configs": dict(t.configs)}
                for name, t in sorted(self.topics.items())
            },
            "deleting": self.deleting,
        }
        return json.dumps(document, indent=1).encode() + b"\n"


class TopicStore:
    """The topics of one log directory.

    Args:
        log_dir: The log directory: its location (a path or ``file://`` URL) or its storage.
        defaults: The settings of a topic config that neither the topic nor ``server.properties`` sets
            (default: Kafka's).

    Raises:
        InvalidLogDirectoryError: ``log_dir`` is a location no storage serves.
    """

    def __init__(self, log_dir: str | os.PathLike[str] | Storage, defaults: LogConfig | None = None) -> None:
        self.storage = storage_for(log_dir)
        # The filesystem's storage, which renames directories and syncs their entries; None on an object store,
        # where a look costs a request and partition directories cannot be renamed.
        self._file_system = self.storage if isinstance(self.storage, FileSystemStorage) else None
        self.log_dir = self.storage.root
        self.defaults = defaults or LogConfig()
        self.path = self.storage.join(TOPICS_FILE)
        self.server_properties_path = self.storage.join(SERVER_PROPERTIES)

    def __repr__(self) -> str:
        return f"TopicStore({self.log_dir!r})"

    # -- reading ----------------------------------------------------------------------------------------------

    def _read(self) -> _Metadata:
        return _Metadata.decode(read_if_exists(self.storage, self.path), self.path)

    def server_properties(self) -> ServerProperties:
        """The log directory's broker settings (``server.properties``; none when the file is absent)."""
        return ServerProperties.load(self.storage, self.server_properties_path)

    def _topic(self, name: str, metadata: _Metadata) -> TopicMetadata | None:
        """The metadata of a topic, or of one made by appends (from its directories); None when neither exists."""
        topic = metadata.topics.get(name)
        if topic is not None or name in metadata.deleting:
            return topic
        partitions = [p for t, p in partition_dirs(self.storage) if t == name]
        if not partitions:
            return None
        return TopicMetadata(name, self._id_on_disk(name, partitions), max(partitions) + 1)

    def _topic_id_of(self, directory: str) -> str | None:
        """The topic id in a partition directory's ``partition.metadata``; None when it has none.

        Raises:
            CorruptRecordError: The file is not of that form.
        """
        return checkpoints.read_partition_metadata(
            self.storage, self.storage.join(directory, checkpoints.PARTITION_METADATA)
        )

    def _id_on_disk(self, name: str, partitions: Iterable[int]) -> str:
        for partition in partitions:
            topic_id = self._topic_id_of(f"{name}-{partition}")
            if topic_id is not None:
                return topic_id
        return ZERO_TOPIC_ID

    def names(self) -> list[str]:
        """Every topic, sorted, with those made by appends, as a broker lists them: a copied KRaft metadata log
        (``__cluster_metadata-0``) is readable by name but no topic. Removes what a crashed deletion left behind."""
        metadata = self._read()
        if metadata.deleting:
            with self._transaction() as metadata:
                pass  # a transaction finishes the deletion a crash interrupted
        self._remove_deleted_dirs()
        on_disk = {topic for topic, _ in partition_dirs(self.storage)}
        return sorted(metadata.topics.keys() | (on_disk - metadata.deleting.keys() - {CLUSTER_METADATA_TOPIC}))

    def get(self, name: str) -> TopicMetadata:
        """The metadata of a topic.

        Raises:
            InvalidTopicError: The name is not a legal topic name.
            UnknownTopicError: No such topic.
        """
        validate_topic_name(name)
        return self._usable(name, self._topic(name, self._read()))

    def _usable(self, name: str, topic: TopicMetadata | None) -> TopicMetadata:
        """A topic found, checked as every command needs it.

        Raises:
            UnknownTopicError: None was found.
            InvalidPartitionsError: It has more than ``MAX_PARTITIONS`` partitions.
        """
        if topic is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist")
        if topic.partitions > MAX_PARTITIONS:  # written by hand, or before the bound: no command could cope
            raise InvalidPartitionsError(
                f"Topic '{name}' has {topic.partitions} partitions in {self.path}; accepted: at most {MAX_PARTITIONS} "
                f"(delete it with 'pysparklog topics --delete --topic {name}')"
            )
        return topic

    def get_or_create(
        self, name: str, *, auto_create: bool | None = None, validate_only: bool = False
    ) -> TopicMetadata:
        """The metadata of a topic, creating it first when it is missing and the log directory allows: what a
        broker does when a producer names a topic it does not have (``auto.create.topics.enable``, Kafka's default
        true), so that every client that writes (``Producer``, ``console-producer``, the Spark sink, the endpoint's
        Metadata) creates topics the same way.

        A created topic gets ``num.partitions`` of ``server.properties`` (Kafka's default 1) and the log directory's
        config defaults. Creation is ``create(if_not_exists=True)``: two writers racing both get the one topic. A
        topic that exists costs what ``get`` costs; ``server.properties`` is read only for a missing one.

        Args:
            name: The topic.
            auto_create: Whether a missing topic is created: None follows ``auto.create.topics.enable``; True
                creates it whatever that says (a writer's explicit wish, as ``topics --create``); False never.
            validate_only: Create nothing: check that the topic exists or could be created now, and return it or
                the topic creating it would make.

        Raises:
            InvalidTopicError: An illegal name, or one colliding with an existing topic's.
            UnknownTopicError: The topic is missing and is not created: an internal topic
                (``INTERNAL_TOPICS``, which Kafka creates for its coordinators only), ``auto_create`` False, or
                ``auto.create.topics.enable=false``; the message names the setting and the fix.
            InvalidPartitionsError: ``num.partitions`` outside 1 to ``MAX_PARTITIONS``.
            InvalidConfigError: ``server.properties`` holds a value Kafka refuses.
        """
        validate_topic_name(name)
        topic = self._topic(name, self._read())
        if topic is None:
            self._check_auto_creation(name, auto_create)
            topic = self.create(name, if_not_exists=True, validate_only=validate_only)
        return self._usable(name, topic)

    def _check_auto_creation(self, name: str, auto_create: bool | None) -> None:
        """Refuse to create a missing topic on first use, as ``get_or_create`` documents.

        Raises:
            UnknownTopicError: The topic is not to be created; the message says why and how to create it.
        """
        create_it = f"create it with 'pysparklog topics --create --topic {name}'"
        if name in INTERNAL_TOPICS:
            raise UnknownTopicError(
                f"Topic '{name}' does not exist in {self.log_dir}, and it is an internal topic, created by its "
                f"coordinator, never on first use; {create_it}"
            )
        if auto_create is False:
            raise UnknownTopicError(f"Topic '{name}' does not exist in {self.log_dir}; {create_it}")
        if auto_create is None and not self.server_properties().auto_create_topics_enable:
            raise UnknownTopicError(
                f"Topic '{name}' does not exist, and {self.server_properties_path} sets "
                f"{AUTO_CREATE_TOPICS_ENABLE.name}=false, so it is not created on first use; {create_it}, or set "
                f"{AUTO_CREATE_TOPICS_ENABLE.name}=true there"
            )

    def describe_configs(self, name: str) -> list[ConfigEntry]:
        """Every config of a topic: the value in force, its source and its synonyms, as ``kafka-configs`` shows them.

        Raises:
            UnknownTopicError: No such topic.
            InvalidConfigError: ``server.properties`` holds a value Kafka refuses.
        """
        return describe_configs(self.get(name).configs, self.server_properties(), self.defaults)

    def config_provider(self, name: str) -> Callable[[], LogConfig]:
        """A callable returning a topic's settings in force, for ``PartitionLog``: cheap enough to call on every
        append, and current (changes by any process reach it).

        Raises:
            InvalidTopicError: The name is not a legal topic name.
        """
        validate_topic_name(name)
        max_age_s = None if self._file_system is not None else OBJECT_STORE_CONFIG_MAX_AGE_S
        return TopicConfigProvider(self, name, max_age_s=max_age_s)

    # -- changing ---------------------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[_Metadata]:
        """The metadata under the log directory's lock, with any deletion a crash interrupted finished first."""
        self.storage.make_directory(self.log_dir)
        lock = self.storage.lock(self.storage.join(LOG_DIR_LOCK))
        try:
            with lock.exclusive():
                self.storage.remove_interrupted_puts(self.path)
                stored = VersionedFile.read(self.storage, self.path)
                metadata = _Metadata.decode(stored.data, self.path)
                metadata.stored = stored
                if metadata.deleting:
                    self._apply_deletions(metadata)
                yield metadata
        finally:
            lock.close()

    def _write(self, metadata: _Metadata) -> None:
        """Replace the file if it is still the version the transaction read or last wrote (create it if absent).

        Raises:
            MetadataChangedError: Another process changed it meanwhile: this one no longer held the lock.
        """
        assert metadata.stored is not None, "written only in a transaction"
        metadata.stored.write(metadata.encode())
        _changes[self.log_dir] = _changes.get(self.log_dir, 0) + 1

    def create(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, str] | None = None,
        *,
        if_not_exists: bool = False,
        validate_only: bool = False,
        progress: Progress | None = None,
    ) -> TopicMetadata:
        """Create a topic and its partition directories.

        Args:
            name: The topic.
            partitions: Its partition count (default: ``num.partitions`` of ``server.properties``, else 1).
            configs: Its config overrides, Kafka names and string values.
            if_not_exists: Return the existing topic instead of failing.
            validate_only: Check everything creating it checks, then return the topic it would make (its id a new
                one) without creating it: Kafka's CreateTopics ``validate_only``.
            progress: Told as partition directories are made.

        Raises:
            InvalidTopicError: An illegal name, ``__cluster_metadata``, or one colliding with an existing topic's
                (``a.b`` and ``a_b``).
            InvalidPartitionsError: A partition count (or ``num.partitions``) outside 1 to ``MAX_PARTITIONS``.
            InvalidConfigError: An unknown config or a value Kafka refuses.
            TopicExistsError: The topic exists (with an entry, or made by appends).
        """
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC:
            raise InvalidTopicError(f"Creation of internal topic {name} is prohibited.")
        if partitions is not None:
            validate_topic_partitions(partitions)
        overrides = normalize_overrides(configs or {})
        with self._transaction() as metadata:
            server = self.server_properties()
            existing = self._topic(name, metadata)
            if existing is not None:
                if if_not_exists:
                    return existing
                raise TopicExistsError(f"Topic '{name}' already exists.")
            for other in self._all_names(metadata):
                if _collision_key(other) == _collision_key(name):
                    raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
            effective_config(overrides, server, self.defaults)  # a combination Kafka refuses fails here
            count = server.num_partitions if partitions is None else partitions
            topic = TopicMetadata(name, checkpoints.new_topic_id(), count, overrides)
            if validate_only:
                return topic
            metadata.topics[name] = topic
            self._write(metadata)
            self._make_partition_dirs(topic, range(topic.partitions), progress)
        return topic

    def _all_names(self, metadata: _Metadata) -> set[str]:
        return metadata.topics.keys() | {t for t, _ in partition_dirs(self.storage)} - metadata.deleting.keys()

    def _make_partition_dirs(
        self, topic: TopicMetadata, partitions: Iterable[int], progress: Progress | None, *, set_ids: bool = False
    ) -> None:
        """Make missing partition directories with their ``partition.metadata`` (under the lock, so that a
        concurrent deletion cannot leave them behind); with ``set_ids``, also write the topic's id over any other
        (or unreadable) one."""
        todo = list(partitions)
        for done, partition in enumerate(todo, 1):
            directory = f"{topic.name}-{partition}"
            self.storage.make_directory(self.storage.join(directory))
            try:
                on_disk = self._topic_id_of(directory)
            except CorruptRecordError:
                if not set_ids:
                    raise
                on_disk = None
            if on_disk is None or (set_ids and on_disk != topic.topic_id):
                path = self.storage.join(directory, checkpoints.PARTITION_METADATA)
                checkpoints.write_partition_metadata(self.storage, path, topic.topic_id)
            if progress is not None:
                progress(done, len(todo))
        if self._file_system is not None:
            self._file_system.sync(self.log_dir)  # the new directories' entries

    def _adopt(self, name: str, metadata: _Metadata) -> tuple[TopicMetadata, bool]:
        """A topic's metadata for a change, and whether it had no entry (made by appends, or an unknown id)."""
        topic = self._topic(name, metadata)
        if topic is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist")
        adopted = name not in metadata.topics
        if topic.topic_id == ZERO_TOPIC_ID:
            topic = replace(topic, topic_id=checkpoints.new_topic_id())
        return topic, adopted

    def alter_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False, progress: Progress | None = None
    ) -> TopicMetadata:
        """Add partitions to a topic (never fewer, as in Kafka); with ``validate_only``, only check that it could and
        return the topic it would make (Kafka's CreatePartitions ``validate_only``).

        Raises:
            InvalidPartitionsError: ``partitions`` is not above the topic's count, or above ``MAX_PARTITIONS``.
            UnknownTopicError: No such topic.
        """
        validate_topic_name(name)
        validate_topic_partitions(partitions)
        with self._transaction() as metadata:
            topic, _ = self._adopt(name, metadata)
            if partitions < topic.partitions:
                raise InvalidPartitionsError(
                    f"Topic currently has {topic.partitions} partitions, which is higher than the requested "
                    f"{partitions}."
                )
            if partitions == topic.partitions:
                raise InvalidPartitionsError(f"Topic already has {topic.partitions} partitions.")
            topic = replace(topic, partitions=partitions)
            if validate_only:
                return topic
            metadata.topics[name] = topic
            self._write(metadata)
            self._make_partition_dirs(topic, range(partitions), progress)
        return topic

    def alter_configs(
        self,
        name: str,
        set_configs: Mapping[str, str],
        delete: Iterable[str] = (),
        *,
        append: Mapping[str, Iterable[str]] | None = None,
        subtract: Mapping[str, Iterable[str]] | None = None,
        validate_only: bool = False,
    ) -> TopicMetadata:
        """Set and remove config overrides of a topic, in one atomic change; removing an unset one does nothing.

        ``append`` and ``subtract`` are Kafka's IncrementalAlterConfigs APPEND and SUBTRACT of a list config: values
        added at the end unless present, or removed, starting from the topic's value in force (its override, else
        ``server.properties``, else the default). They are applied under the lock, so that two processes appending
        to one list both count.

        Args:
            name: The topic.
            set_configs: Configs to set (SET).
            delete: Configs to remove (DELETE).
            append: Values to add to list configs (APPEND).
            subtract: Values to remove from list configs (SUBTRACT).
            validate_only: Check the change and return the topic it would make, without making it (Kafka's
                ``validate_only``).

        Raises:
            InvalidConfigError: An unknown config, a value or combination Kafka refuses, a config changed by more
                than one of the four, or an append or subtract to a config that is not a list.
            UnknownTopicError: No such topic.
        """
        validate_topic_name(name)
        updates = normalize_overrides(set_configs)
        removals = [topic_config(key).name for key in delete]
        list_changes = {key: (list(values), True) for key, values in (append or {}).items()}
        for key, values in (subtract or {}).items():
            if key in list_changes:
                raise InvalidConfigError(
                    f"config {key} both appended to and subtracted from; accepted: one change each"
                )
            list_changes[key] = (list(values), False)
        for key in list_changes:
            operation = "append" if list_changes[key][1] else "subtract"
            if topic_config(key).key.type is not ConfigType.LIST:
                raise InvalidConfigError(
                    f"Config value {operation} is not allowed for config key: {key}; accepted: the list configs "
                    f"({', '.join(n for n, c in TOPIC_CONFIGS.items() if c.key.type is ConfigType.LIST)})"
                )
        both = sorted(updates.keys() & set(removals))
        if both:
            raise InvalidConfigError(
                f"config(s) both added and deleted: {', '.join(both)}; accepted: each at most once"
            )
        repeated = sorted(list_changes.keys() & (updates.keys() | set(removals)))
        if repeated:
            raise InvalidConfigError(
                f"config(s) both set or deleted and appended to or subtracted from: {', '.join(repeated)}; accepted: "
                "one change each"
            )
        with self._transaction() as metadata:
            topic, adopted = self._adopt(name, metadata)
            server = self.server_properties()
            configs = {**topic.configs, **updates}
            for key in removals:
                configs.pop(key, None)
            if list_changes:
                in_force = {entry.name: entry.value for entry in describe_configs(topic.configs, server, self.defaults)}
                for key, (values, adding) in list_changes.items():
                    current = [value for value in in_force[key].split(",") if value]
                    changed_list = (
                        current + [v for v in values if v not in current]
                        if adding
                        else [v for v in current if v not in values]
                    )
                    configs[key] = normalize_overrides({key: ",".join(changed_list)})[key]
            effective_config(configs, server, self.defaults)
            topic = replace(topic, configs=configs)
            if validate_only:
                return topic
            metadata.topics[name] = topic
            self._write(metadata)
            if adopted:
                self._make_partition_dirs(topic, range(topic.partitions), None)
        return topic

    def set_topic_id(self, name: str, topic_id: str, *, progress: Progress | None = None) -> TopicMetadata:
        """Give a topic the id a Kafka cluster knows it by, in the metadata and each partition's ``partition.metadata``
        (the module's documentation says why and in which order). Setting the id it has rewrites the partitions'
        files that hold another.

        Only the metadata is checked here: ``LogDirectory.set_topic_id`` also refuses a topic with a transaction
        open, and the topic's writers must be stopped (one still open fails at its next append, as if the topic had
        been deleted and created again).

        Args:
            name: The topic (one made by appends is adopted into the metadata).
            topic_id: Its new id: Kafka's form or the canonical UUID form (``parse_topic_id``).
            progress: Told as partitions are rewritten.

        Raises:
            InvalidTopicIdError: ``topic_id`` is malformed, reserved, or another topic's.
            InvalidLogDirectoryError: The log directory is on an object store.
            UnknownTopicError: No such topic.
        """
        validate_topic_name(name)
        new_id = parse_topic_id(topic_id)
        if self._file_system is None:
            raise InvalidLogDirectoryError(
                f"cannot set the id of topic '{name}' in {self.log_dir}, a log directory on an object store: there a "
                "topic's id names the local replicas of its partitions on every host that read them, and an id "
                "chosen again could name a replica of another log (nor could a broker load a partition kept as "
                "commits); accepted: a log directory on a filesystem"
            )
        with self._transaction() as metadata:
            topic, _ = self._adopt(name, metadata)
            owner = self._topic_having(new_id, metadata)
            if owner is not None and owner.name != name:
                raise InvalidTopicIdError(
                    f"topic id {new_id} is the id of topic '{owner.name}' in {self.log_dir}; accepted: an id no other "
                    "topic of the log directory has"
                )
            topic = replace(topic, topic_id=new_id)
            metadata.topics[name] = topic
            self._write(metadata)
            self._make_partition_dirs(topic, range(topic.partitions), progress, set_ids=True)
        return topic

    def topic_with_id(self, topic_id: str) -> TopicMetadata:
        """The metadata of the topic with an id (Kafka's form or the canonical UUID form), as ``kafka-topics.sh
        --describe --topic-id`` finds it.

        Raises:
            InvalidTopicIdError: ``topic_id`` is malformed or reserved.
            UnknownTopicError: No topic has it.
        """
        wanted = parse_topic_id(topic_id)
        topic = self._topic_having(wanted, self._read())
        if topic is None:
            raise UnknownTopicError(f"Topic id {wanted} does not exist")
        return topic

    def _topic_having(self, topic_id: str, metadata: _Metadata) -> TopicMetadata | None:
        """The topic with an id, with an entry or made by appends; None when none has it."""
        for name in sorted(self._all_names(metadata)):
            topic = self._topic(name, metadata)
            if topic is not None and topic.topic_id == topic_id:
                return topic
        return None

    def delete(self, name: str, *, progress: Progress | None = None) -> None:
        """Delete a topic and its partition directories.

        Raises:
            UnknownTopicError: No such topic.
        """
        validate_topic_name(name)
        with self._transaction() as metadata:
            topic = self._topic(name, metadata)
            if topic is None:
                raise UnknownTopicError(f"Topic '{name}' does not exist")
            metadata.topics.pop(name, None)
            metadata.deleting[name] = topic.topic_id
            self._write(metadata)  # the commit point: the topic is gone
            self._apply_deletions(metadata, progress)
        self._remove_deleted_dirs(progress)

    def _apply_deletions(self, metadata: _Metadata, progress: Progress | None = None) -> None:
        """Retire the directories of the deleted topics, then drop the tombstones (under the lock).

        A filesystem renames them as Kafka does, and their files go once the lock is released
        (``_remove_deleted_dirs``); an object store cannot rename a prefix, so their objects are deleted here,
        reported to ``progress``, and the tombstones stay until the last is gone.
        """
        retired = []
        for topic, partition in partition_dirs(self.storage):
            topic_id = metadata.deleting.get(topic)
            if topic_id is None:
                continue
            on_disk = self._topic_id_of(f"{topic}-{partition}")
            # A directory with another id belongs to a topic an append made after the deletion: keep it.
            if on_disk is None or topic_id in (on_disk, ZERO_TOPIC_ID):
                retired.append((topic, partition))
        for done, (topic, partition) in enumerate(retired, 1):
            directory = self.storage.join(f"{topic}-{partition}")
            if self._file_system is not None:
                self._file_system.rename(directory, self.storage.join(_delete_dir_name(topic, partition)))
            else:
                self.storage.delete_tree(directory)
                if progress is not None:
                    progress(done, len(retired))
        if self._file_system is None:  # the topics' chains (``objects.topic_commit``), one per incarnation
            for topic, topic_id in metadata.deleting.items():
                incarnation = None if topic_id == ZERO_TOPIC_ID else topic_id
                self.storage.delete_tree(self.storage.join(chain_directory_name(topic, incarnation)))
        if self._file_system is not None:
            self._file_system.sync(self.log_dir)  # the renames, before the tombstones go
        # A topic created again under the name must not inherit the old recovery points and log start offsets.
        for name in _TOPIC_PARTITION_CHECKPOINTS:
            path = self.storage.join(name)
            offsets = checkpoints.read_offset_checkpoint(self.storage, path)
            kept = {tp: offset for tp, offset in offsets.items() if tp[0] not in metadata.deleting}
            if kept != offsets:
                checkpoints.write_offset_checkpoint(self.storage, path, kept)
        metadata.deleting.clear()
        self._write(metadata)

    def _remove_deleted_dirs(self, progress: Progress | None = None) -> None:
        """Remove every ``-delete`` directory; several processes may do it at once. An object store has none: its
        deleted directories are gone when their deletion is applied."""
        if self._file_system is None:
            return
        names = [n for n in self.storage.list(self.log_dir) if _DELETE_DIR.fullmatch(n)]
        for done, name in enumerate(names, 1):
            self.storage.delete_tree(self.storage.join(name))
            if progress is not None:
                progress(done, len(names))

    def open_partition(self, name: str, partition: int) -> None:
        """Check that a topic has a partition before it is opened, and remake its directory if a crash in
        ``create`` or ``alter_partitions`` left it missing. A topic without an entry accepts any partition below
        ``MAX_PARTITIONS``.

        Raises:
            UnknownTopicError: The topic has an entry and fewer partitions.
            InvalidPartitionsError: The topic has no entry and the partition would make it more than
                ``MAX_PARTITIONS`` partitions.
        """
        topic = self._recent().topics.get(name)
        if topic is None or partition >= topic.partitions:  # created or grown since it was read, perhaps
            topic = self._recent(fresh=True).topics.get(name)
        if topic is None:
            if partition >= MAX_PARTITIONS:
                raise InvalidPartitionsError(
                    f"partition {partition} of topic '{name}' is invalid; accepted: 0 to {MAX_PARTITIONS - 1} (a "
                    f"topic has at most {MAX_PARTITIONS} partitions)"
                )
            return
        if partition >= topic.partitions:
            raise UnknownTopicError(
                f"Partition {partition} of topic '{name}' does not exist: the topic has {topic.partitions} "
                "partitions (add some with 'pysparklog topics --alter')"
            )
        if self._file_system is None:  # a partition there is its topic's chain: nothing of its own to remake
            return
        metadata_path = self.storage.join(f"{name}-{partition}", checkpoints.PARTITION_METADATA)
        if self.storage.stat(metadata_path) is None:
            with self._transaction() as metadata:
                topic = metadata.topics.get(name)
                if topic is not None and partition < topic.partitions:
                    self._make_partition_dirs(topic, [partition], None)

    def _recent(self, *, fresh: bool = False) -> _Metadata:
        """The metadata, on an object store as this process read it within ``OBJECT_STORE_CONFIG_MAX_AGE_S`` unless
        it wrote some since: opening a partition there must not cost a request each time (a Spark task opens one
        per range, a driver one per partition at every trigger). A topic created or grown by another process
        meanwhile is read at once (``fresh``: it is missing here); one deleted there is found by the partition's
        configs."""
        if self._file_system is not None:
            return self._read()
        asked = time.monotonic()
        with _recent_metadata_lock:  # a driver opens many partitions at once: one of its threads reads for all
            changes = _changes.get(self.log_dir, 0)
            recent = _recent_metadata.get(self.log_dir)
            if (
                recent is not None
                and recent[1] == changes
                and (asked <= recent[0] if fresh else time.monotonic() - recent[0] < OBJECT_STORE_CONFIG_MAX_AGE_S)
            ):
                return recent[2]
            read_at = time.monotonic()
            metadata = self._read()
            _recent_metadata[self.log_dir] = (read_at, changes, metadata)
            return metadata

    def recent_partition_counts(self) -> dict[str, int]:
        """The partition count of every topic with an entry in the metadata, on an object store as this process read
        it within ``OBJECT_STORE_CONFIG_MAX_AGE_S`` (``_recent``): what a Spark driver planning each trigger needs
        of the topics it subscribes to, without a request each time. Topics made by appends have no entry."""
        return {name: topic.partitions for name, topic in self._recent().topics.items()}

    def known_topic_id(self, name: str) -> str | None:
        """A topic's id as its entry in the metadata has it (``_recent``, read again at once when the topic is missing
        there); None for a topic without an entry (made by appends) or with the zero id."""
        topic = self._recent().topics.get(name)
        if topic is None:  # created since it was read, perhaps
            topic = self._recent(fresh=True).topics.get(name)
        return None if topic is None or topic.topic_id == ZERO_TOPIC_ID else topic.topic_id


def _delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``LocalLog.logDeleteDirName``: the topic cut so that the name fits a file name."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
    return topic[: _FILE_NAME_MAX - len(suffix)] + suffix


@dataclass(frozen=True, slots=True)
class _Cached:
    stamps: tuple[FileStat | None, FileStat | None]  # None for an absent file
    digests: tuple[bytes, bytes]  # of the two files' contents, to skip parsing what did not change
    config: LogConfig
    trusted: bool  # both files were old enough when read that their stamps tell every later change
    read_at: float  # time.monotonic() of the read
    changes: int  # this process's writes of the log directory's metadata before the read (``_changes``)
    topic: TopicMetadata | None  # the topic's entry as read


def _digest(data: bytes | None) -> bytes:
    return b"" if data is None else hashlib.blake2b(data, digest_size=16).digest()


class TopicConfigProvider:
    """A topic's settings in force, for a ``PartitionLog`` to ask at every append and maintenance pass.

    On a filesystem a call costs two ``stat`` calls while neither ``pysparklog-topics.json`` nor
    ``server.properties`` changes (by the storage's version, size and times), and reading and hashing them for two
    seconds after one does; a change by any process is seen at the next call.

    With ``max_age_s`` (an object store, where each of those looks is a request of 10-30 ms) a call makes no
    request: it answers from the configs read last, and once they are older than ``max_age_s`` it reads them
    again in the background, so a change by another process takes effect within about ``max_age_s``. A change
    written by this process takes effect at the next call. Only the first call waits for the store.

    A topic deleted (or deleted and created again) since this provider saw it raises, so a writer holding it open
    cannot bring it back (with ``max_age_s``, at the first call after the background read that found it gone).

    Args:
        store: The topics of the log directory.
        topic: The topic.
        max_age_s: How old the configs may grow before they are read again in the background; None reads them
            at every call.
    """

    def __init__(self, store: TopicStore, topic: str, *, max_age_s: float | None = None) -> None:
        self._store = store
        self._topic = topic
        self._max_age_s = max_age_s
        self._topic_id: str | None = None
        # On an object store, what any provider of the topic in this process read last is as good as its own.
        self._key = (store.log_dir, topic)
        self._own: _Cached | None = None
        self._refresh_lock = threading.Lock()
        self._refreshing = False
        self._refresh_error: PySparkLogError | None = None

    def __repr__(self) -> str:
        return f"TopicConfigProvider({self._store.log_dir!r}, {self._topic!r})"

    @property
    def _cached(self) -> _Cached | None:
        return self._own if self._max_age_s is None else _recent_configs.get(self._key)

    @_cached.setter
    def _cached(self, cached: _Cached) -> None:
        if self._max_age_s is None:
            self._own = cached
        else:
            _recent_configs[self._key] = cached

    def __call__(self) -> LogConfig:
        """The settings in force now.

        Raises:
            UnknownTopicError: The topic was deleted since this provider last saw it.
            InvalidConfigError: ``server.properties`` holds a value Kafka refuses.
        """
        if self._max_age_s is None:
            return self._read().config
        cached = self._cached
        if cached is None or cached.changes != _changes.get(self._store.log_dir, 0):
            with _recent_configs_lock:  # a driver opens many partitions at once: one of its threads reads for all
                cached = self._cached
                if cached is None or cached.changes != _changes.get(self._store.log_dir, 0):
                    return self._read().config
        error, self._refresh_error = self._refresh_error, None
        if error is not None:
            raise error
        self._check_same_topic(cached.topic)  # another provider of this process may have read it
        if time.monotonic() - cached.read_at >= self._max_age_s:
            self._refresh_in_background()
        return cached.config

    def _refresh_in_background(self) -> None:
        with self._refresh_lock:
            if self._refreshing:
                return
            self._refreshing = True
        threading.Thread(target=self._refresh, name=f"configs of {self._topic}", daemon=True).start()

    def _refresh(self) -> None:
        try:
            self._read()
        except PySparkLogError as error:  # raised by the next call, on the appending thread
            self._refresh_error = error
        except Exception as error:  # a failed request: tried again once the configs are old again
            _log.warning("could not read the configs of topic %r again: %s", self._topic, error)
        finally:
            with self._refresh_lock:
                self._refreshing = False

    def _read(self) -> _Cached:
        """Read the configs (when their files changed) and cache them."""
        store = self._store
        changes = _changes.get(store.log_dir, 0)
        read_at = time.monotonic()
        stamps = (store.storage.stat(store.path), store.storage.stat(store.server_properties_path))
        cached = self._cached
        if cached is not None and cached.trusted and cached.stamps == stamps:
            fresh = self._cached = replace(cached, read_at=read_at, changes=changes)
            return fresh
        now = time.time_ns()
        topics = read_if_exists(store.storage, store.path)
        server = read_if_exists(store.storage, store.server_properties_path)
        digests = (_digest(topics), _digest(server))
        if cached is not None and cached.digests == digests:
            config, topic = cached.config, cached.topic
        else:
            topic = _Metadata.decode(topics, store.path).topics.get(self._topic)
            overrides = {} if topic is None else topic.configs
            config = effective_config(
                overrides, ServerProperties.decode(store.server_properties_path, server), store.defaults
            )
        self._check_same_topic(topic)
        trusted = all(stamp is None or stamp.modified_ms * 1_000_000 + _RACY_NS < now for stamp in stamps)
        read = self._cached = _Cached(stamps, digests, config, trusted, read_at, changes, topic)
        return read

    def _check_same_topic(self, topic: TopicMetadata | None) -> None:
        topic_id = None if topic is None else topic.topic_id
        if self._topic_id is not None and topic_id != self._topic_id:
            again = "" if topic is None else " and created again (or given another id)"
            raise UnknownTopicError(f"Topic '{self._topic}' was deleted{again} while open")
        self._topic_id = topic_id or self._topic_id
