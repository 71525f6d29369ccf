"""What the data plane (Metadata, Produce, Fetch, ListOffsets) keeps per endpoint: the partition logs it opened,
the cluster id, and the signal that wakes long-polling fetches when this endpoint appends."""

from __future__ import annotations

import asyncio
import base64
import threading
import uuid
from dataclasses import dataclass

from pysparklog.endpoint.context import EndpointState
from pysparklog.errors import StorageConflictError, UnknownTopicError
from pysparklog.storage.io import FileSystemStorage, PutMode, read_if_exists
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.topics import ZERO_TOPIC_ID, TopicMetadata

#: A Kafka broker's log directory names its cluster here (``kafka-storage.sh format``); an endpoint serving a
#: broker's directory answers with that cluster's id.
BROKER_META_PROPERTIES = "meta.properties"
#: Where the endpoints of a pysparklog directory keep the cluster id they all answer with, created once by the first
#: endpoint (a conditional create: the others read it). Not ``meta.properties``: a broker takes a directory holding
#: one for a directory it formatted and would look for its node and directory ids there.
CLUSTER_ID_FILE = "pysparklog-cluster.properties"
CLUSTER_ID_KEY = "cluster.id"
#: How often a long-polling fetch looks at the log ends for appends made by other processes (other endpoints,
#: Spark, the Python producer). On a filesystem a look is a stat and a read of each partition's state record; on an
#: object store it is a request per topic (the last commit's header), so it looks less often there.
FILE_SYSTEM_POLL_S = 0.05
OBJECT_STORE_POLL_S = 0.5


def _properties_value(text: str, key: str) -> str | None:
    """The value of ``key`` in a Java properties text (``key=value`` lines, ``#`` comments)."""
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and not name.startswith(("#", "!")) and name.strip() == key:
            return value.strip() or None
    return None


def new_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID as 22 base64url characters (``Uuid.randomUuid().toString()``)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class OpenLog:
    """A partition log opened for the topic incarnation ``topic_id`` (a topic deleted and created again has a new
    id, and its old log must not serve it)."""

    topic_id: str
    log: Log


class DataState:
    """The data plane's per-endpoint state.

    Open partition logs are cached: opening one reads its directory (and on an object store sets up its replica), and
    each keeps a lock file open. A log is opened for its topic's id; when a request finds the topic with another id
    (deleted and created again) or gone, the cached log is closed and dropped.

    Args:
        endpoint: The endpoint's shared state.
    """

    def __init__(self, endpoint: EndpointState) -> None:
        self.endpoint = endpoint
        self.log_dir = endpoint.log_dir
        self._on_file_system = isinstance(self.log_dir.storage, FileSystemStorage)
        self.poll_interval_s = FILE_SYSTEM_POLL_S if self._on_file_system else OBJECT_STORE_POLL_S
        self._logs: dict[tuple[str, int], OpenLog] = {}
        self._lock = threading.Lock()
        self._cluster_id: str | None = None
        self._appended = asyncio.Event()

    # -- topics and their logs (engine threads) ------------------------------------------------------------------

    def topic(self, name: str) -> TopicMetadata:
        """The topic's metadata; drops the cached logs of a topic that is gone.

        On a filesystem the topics' metadata is read each time (a small local file). On an object store each read
        is a request, which every produce and fetch would wait for: there a topic with an entry is taken from what
        this process read within ``OBJECT_STORE_CONFIG_MAX_AGE_S`` (``TopicStore.recent_partition_counts``), as
        the engine's own partition opens take it, so that a topic deleted or grown by another process is seen
        within that long.

        Raises:
            InvalidTopicError: Not a legal topic name.
            UnknownTopicError: No such topic.
        """
        topics = self.log_dir.topics
        if not self._on_file_system:
            partitions = topics.recent_partition_counts().get(name)
            if partitions is not None:
                return TopicMetadata(name, topics.known_topic_id(name) or ZERO_TOPIC_ID, partitions)
        try:
            return topics.get(name)
        except UnknownTopicError:
            self._drop(name, keep_id=None)
            raise

    def log(self, topic: TopicMetadata, partition: int) -> Log:
        """The log of ``partition`` of ``topic`` (as ``topic()`` returned it), opened once per topic incarnation.

        Raises:
            UnknownTopicError: The topic has no such partition.
        """
        if not 0 <= partition < topic.partitions:
            raise UnknownTopicError(
                f"partition {partition} of topic '{topic.name}' does not exist; accepted: 0 to {topic.partitions - 1}"
            )
        key = (topic.name, partition)
        with self._lock:
            cached = self._logs.get(key)
            if cached is not None and cached.topic_id == topic.topic_id:
                return cached.log
        self._drop(topic.name, keep_id=topic.topic_id)
        opened = self.log_dir.partition(topic.name, partition)
        with self._lock:
            cached = self._logs.get(key)
            if cached is not None and cached.topic_id == topic.topic_id:  # another thread opened it meanwhile
                opened.close()
                return cached.log
            self._logs[key] = OpenLog(topic.topic_id, opened)
        return opened

    def _drop(self, name: str, keep_id: str | None) -> None:
        """Close the cached logs of topic ``name`` not opened for ``keep_id``."""
        with self._lock:
            stale = [key for key, open_log in self._logs.items() if key[0] == name and open_log.topic_id != keep_id]
            closing = [self._logs.pop(key).log for key in stale]
        for log in closing:
            log.close()

    def cluster_id(self) -> str:
        """The cluster id every endpoint of this log directory answers with: a broker's own (``meta.properties``)
        when the directory is a broker's, else the one the first endpoint created (``CLUSTER_ID_FILE``)."""
        if self._cluster_id is None:
            self._cluster_id = self._read_or_create_cluster_id()
        return self._cluster_id

    def _read_or_create_cluster_id(self) -> str:
        storage = self.log_dir.storage
        for name in (BROKER_META_PROPERTIES, CLUSTER_ID_FILE):
            data = read_if_exists(storage, storage.join(name))
            found = _properties_value(data.decode("utf-8", "replace"), CLUSTER_ID_KEY) if data is not None else None
            if found is not None:
                return found
        created = new_cluster_id()
        path = storage.join(CLUSTER_ID_FILE)
        content = "# the cluster id the Kafka protocol endpoints of this log directory answer with\n"
        try:
            storage.put(path, f"{content}{CLUSTER_ID_KEY}={created}\n".encode(), mode=PutMode.CREATE)
        except StorageConflictError:  # another endpoint created it first: its id is everyone's
            data = read_if_exists(storage, path)
            found = _properties_value(data.decode("utf-8", "replace"), CLUSTER_ID_KEY) if data is not None else None
            if found is None:
                raise
            return found
        return created

    # -- waking long polls (event loop) ---------------------------------------------------------------------------

    def appended(self) -> None:
        """Wake every fetch waiting for records: this endpoint appended some."""
        woken, self._appended = self._appended, asyncio.Event()
        woken.set()

    async def wait_for_append(self, timeout_s: float) -> None:
        """Wait until this endpoint appends or ``timeout_s`` passes, whichever comes first."""
        try:
            await asyncio.wait_for(self._appended.wait(), timeout_s)
        except TimeoutError:
            pass

    def close(self) -> None:
        with self._lock:
            logs = [open_log.log for open_log in self._logs.values()]
            self._logs.clear()
        for log in logs:
            log.close()
