"""A Kafka-style producer: records in, batched per partition, appended to the log directory.

``Producer`` is what Kafka's ``KafkaProducer`` is to a broker, with the log directory in place of the
broker: ``send`` queues a record and returns a future of its ``RecordMetadata``; records are
partitioned as Kafka's producer partitions them (``pysparklog.partitioner``), gathered per partition
into record batches of ``batch.size`` bytes, and a background sender thread appends a partition's
batches once a batch is full or its oldest record has waited ``linger.ms``, as Kafka's ``Sender``
drains its ``RecordAccumulator``. ``flush`` and ``close`` append everything at once. ``send_arrow``
is the bulk path: a whole Arrow table, partitioned, encoded and appended in one call.

Per record, ``send`` only appends to a few lists. The work Kafka does per record (partitioning,
sizing, encoding) runs over everything the sender takes at once, vectorised: the partitioner over
the accumulated key column, ``encode_arrow`` over each partition's rows. A future is an index into
its drain's result arrays, not a callback per record.

Acknowledged, on a filesystem
-----------------------------

A future completes (and ``send_arrow`` returns) once ``PartitionLog.append`` has returned: the
batch is written to the segment and the partition's state record updated, so every reader sees it.
It is fsynced only as the topic's flush policy (``flush.messages``, ``flush.ms``) says, as a Kafka
broker acknowledges ``acks=all`` without fsync: by default the OS writes it back and segments are
fsynced when they roll. A process crash loses nothing acknowledged; a machine crash (power, kernel)
can lose what was acknowledged after the last fsync, which recovery then truncates. Records still
in the producer (sent, not yet appended) are lost with the process, as they are with Kafka's.
There is one copy, the log directory: ``acks=1`` and ``acks=all`` mean the same.

Idempotence
-----------

With ``enable.idempotence`` (the default) the producer takes a producer id from the log directory
(``storage.producer_ids``), epoch 0, and numbers each partition's batches as Kafka's
``TransactionManager`` does: a partition's first batch has base sequence 0, each next one the
previous plus its record count, wrapping at 2**31. An append that fails with an ``OSError`` may
have been written anyway, so it is retried with the same batches, which the log recognises (it
keeps the producer's last five runs of consecutive batches, so a retried append of any number of
batches is recognised whole) and does not write twice. When an append finally fails, the
producer cannot know which of its sequences the log holds, so it takes a new producer id and
starts every partition at sequence 0 again (Kafka's idempotent producer resets its id the same way).

Transactions
------------

With ``transactional.id`` the producer is Kafka's transactional producer: ``init_transactions``
takes a session (producer id, bumped epoch) from ``pysparklog.transactions``, fencing older producers
of the id; ``begin_transaction``, then sends (each partition registered before its first append),
then ``commit_transaction`` or ``abort_transaction`` write COMMIT or ABORT markers, which
``read_committed`` readers follow. ``prepare_transaction`` flushes and hands the open transaction to
another process to end (KIP-939's two-phase commit): Spark's driver commits its tasks' transactions so.

Example:
    >>> with Producer("/data/logs") as producer:
    ...     future = producer.send("orders", b'{"amount": 5}', key=b"c1")
    ...     metadata = future.get(timeout=10)   # RecordMetadata(topic='orders', partition=..., offset=...)
"""

from __future__ import annotations

import enum
import itertools
import logging
import operator
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pysparklog.errors import InvalidConfigError, PySparkLogError, UnknownTopicError
from pysparklog.partitioner import CustomPartitioner, NullKeyStrategy, Partitioner, PartitionerConfig
from pysparklog.partitioner import _record_sizes as record_sizes
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.log import AppendInfo, PartitionLog
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.producer_ids import allocate_producer_id
from pysparklog.storage.producer_state import BATCHES_RETAINED, next_sequence
from pysparklog.storage.records.arrow_records import HEADER_TYPE, BatchSettings, EncodedBatches, encode_arrow
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
)
from pysparklog.storage.topic_config import ConfigKey, ConfigType
from pysparklog.structs import TopicPartition
from pysparklog.transactions import (
    PreparedTransaction,
    ProducerSession,
    TransactionCoordinator,
    validate_transactional_id,
)

_log = logging.getLogger(__name__)

# Kafka's partitioner.class names that select a built-in strategy: (null-key strategy, ignore keys).
_KAFKA_PARTITIONERS: Mapping[str, tuple[NullKeyStrategy, bool]] = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": (NullKeyStrategy.STICKY, False),
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": (NullKeyStrategy.STICKY, True),
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": (NullKeyStrategy.ROUND_ROBIN, True),
}
_CODECS: Mapping[str, Codec] = {codec.kafka_name: codec for codec in Codec}
_ACKS = ("all", "-1", "1")
# Kafka's DefaultRecord.MAX_RECORD_OVERHEAD: the most a record adds to its key and value.
_MAX_RECORD_OVERHEAD = 21
# Rows the bulk path gathers per partition at a time: the copy stays in cache and memory bounded.
_BULK_ROWS = 1 << 16
_BINARY = frozenset({bytes, bytearray, memoryview, type(None)})
_client_ids = itertools.count(1)


def _key(name: str, kind: ConfigType, default: object, minimum: int | None = None, *choices: str) -> ConfigKey:
    return ConfigKey(name, kind, str(default), minimum, None, choices)


# Kafka's ProducerConfig definitions of the numeric and string settings (types, defaults, ranges).
_KEYS: Mapping[str, ConfigKey] = {
    key.name: key
    for key in (
        _key("batch.size", ConfigType.INT, 16384, 0),
        _key("linger.ms", ConfigType.LONG, 5, 0),
        _key("compression.type", ConfigType.STRING, "none", None, *_CODECS),
        _key("max.request.size", ConfigType.INT, 1024 * 1024, 0),
        _key("max.in.flight.requests.per.connection", ConfigType.INT, 5, 1),
        _key("client.id", ConfigType.STRING, ""),
        _key("acks", ConfigType.STRING, "all", None, *_ACKS),
        _key("retries", ConfigType.INT, INT_MAX, 0),
        _key("retry.backoff.ms", ConfigType.LONG, 100, 0),
        _key("delivery.timeout.ms", ConfigType.INT, 120000, 0),
        _key("metadata.max.age.ms", ConfigType.LONG, 300000, 0),
        _key("transaction.timeout.ms", ConfigType.INT, 60000, 1),
    )
}
_BOOLEANS = ("enable.idempotence", "partitioner.ignore.keys")


def _default(name: str) -> Any:
    """Kafka's default of a setting, parsed: the dataclass's default, so the two cannot disagree."""
    key = _KEYS[name]
    assert key.default is not None
    return key.parse(key.default)


ACCEPTED_CONFIGS = sorted([*_KEYS, *_BOOLEANS, "partitioner.class", "transactional.id"])


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """The producer's settings, Kafka's producer configs of the same names (dots for underscores),
    checked when the config is made.

    Attributes:
        batch_size: ``batch.size``: the bytes of a partition's record batch; a batch closes before the
            record that would take it past this (a larger record gets a batch of its own). 0 puts
            every record in a batch of its own.
        linger_ms: ``linger.ms``: how long a partition's records may wait for more before their
            batch is appended although not full.
        compression_type: ``compression.type``: none, gzip, snappy, lz4 or zstd, per batch.
        enable_idempotence: ``enable.idempotence``: number batches so that retried appends are never
            written twice (see the module). None is Kafka's default: on, unless ``acks``, ``retries``
            or ``max.in.flight.requests.per.connection`` is set to a value idempotence excludes, which
            then turns it off; set True, such a value is refused.
        partitioner_class: ``partitioner.class``: a ``CustomPartitioner``, the import path of one, or
            one of Kafka's class names: ``...RoundRobinPartitioner`` selects round robin for every
            record, ``...UniformStickyPartitioner`` sticky for every record, and
            ``...internals.DefaultPartitioner`` the default.
        partitioner_ignore_keys: ``partitioner.ignore.keys``: partition keyed records as unkeyed ones.
        null_key_strategy: Where records without a key go: ``"sticky"`` (Kafka's uniform sticky
            partitioning, the default) or ``"round_robin"`` (what Kafka's ``RoundRobinPartitioner``
            does, without ignoring keys unless ``partitioner_ignore_keys``).
        max_request_size: ``max.request.size``: the most bytes one append carries, and the largest
            record (key and value) accepted.
        max_in_flight_requests_per_connection: ``max.in.flight.requests.per.connection``: checked as
            Kafka checks it (at most 5 with idempotence); appends are synchronous, one per partition
            at a time, so it bounds nothing more here.
        client_id: ``client.id``: names the sender thread (default ``producer-<n>``).
        acks: ``acks``: ``all`` (or ``-1``) or ``1``, the same here (one copy); ``0`` is refused, as an
            append is always waited for.
        retries: ``retries``: how often an append that failed with an ``OSError`` is tried again.
        retry_backoff_ms: ``retry.backoff.ms``: the pause before each retry.
        delivery_timeout_ms: ``delivery.timeout.ms``: retries stop once a record has waited this long
            since it was sent, its linger included.
        metadata_max_age_ms: ``metadata.max.age.ms``: how old a topic's partition count may get before
            it is read again (partitions added meanwhile are used from then on).
        transactional_id: ``transactional.id``: makes the producer transactional (see the module);
            needs idempotence.
        transaction_timeout_ms: ``transaction.timeout.ms``: how long a transaction may stay open before
            the coordinator aborts it and fences the producer.
    """

    batch_size: int = _default("batch.size")
    linger_ms: int = _default("linger.ms")
    compression_type: str = _default("compression.type")
    enable_idempotence: bool | None = None
    partitioner_class: str | CustomPartitioner | None = None
    partitioner_ignore_keys: bool = False
    null_key_strategy: NullKeyStrategy | str = NullKeyStrategy.STICKY
    max_request_size: int = _default("max.request.size")
    max_in_flight_requests_per_connection: int = _default("max.in.flight.requests.per.connection")
    client_id: str = _default("client.id")
    acks: str = _default("acks")
    retries: int = _default("retries")
    retry_backoff_ms: int = _default("retry.backoff.ms")
    delivery_timeout_ms: int = _default("delivery.timeout.ms")
    metadata_max_age_ms: int = _default("metadata.max.age.ms")
    transactional_id: str | None = None
    transaction_timeout_ms: int = _default("transaction.timeout.ms")
    #: Whether idempotence is in force: ``enable_idempotence`` resolved as Kafka resolves it.
    idempotent: bool = field(init=False, repr=False, compare=False)
    #: The partitioning settings these make.
    partitioner: PartitionerConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for key in _KEYS.values():
            key.check(getattr(self, key.name.replace(".", "_")))
        for name in _BOOLEANS:
            value = getattr(self, name.replace(".", "_"))
            if not isinstance(value, bool) and not (name == "enable.idempotence" and value is None):
                raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: true or false")
        object.__setattr__(self, "idempotent", self._resolve_idempotence())
        if self.transactional_id is not None:
            validate_transactional_id(self.transactional_id)
            if not self.idempotent:
                raise InvalidConfigError("Cannot set a transactional.id without also enabling idempotence.")
        strategy, ignore_keys, custom = self.null_key_strategy, self.partitioner_ignore_keys, self.partitioner_class
        if isinstance(custom, str) and custom in _KAFKA_PARTITIONERS:
            strategy, kafka_ignores = _KAFKA_PARTITIONERS[custom]
            ignore_keys, custom = ignore_keys or kafka_ignores, None
        partitioner = PartitionerConfig(strategy, self.batch_size, ignore_keys, custom)
        object.__setattr__(self, "partitioner", partitioner)

    def _resolve_idempotence(self) -> bool:
        """Kafka's ``ProducerConfig.postProcessAndValidateIdempotenceConfigs``."""
        if self.enable_idempotence is False:
            return False
        conflicts = []
        if self.retries == 0:
            conflicts.append("retries to non-zero")
        if self.acks not in ("all", "-1"):
            conflicts.append("acks to all")
        if self.max_in_flight_requests_per_connection > BATCHES_RETAINED:
            conflicts.append(f"max.in.flight.requests.per.connection to at most {BATCHES_RETAINED}")
        if conflicts and self.enable_idempotence:
            raise InvalidConfigError(f"Must set {' and '.join(conflicts)} in order to use the idempotent producer")
        return not conflicts

    @property
    def codec(self) -> Codec:
        return _CODECS[self.compression_type]

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ProducerConfig:
        """Build from Kafka-named producer configs (``{"batch.size": "65536", "linger.ms": 10}``).

        Values are Kafka strings (parsed as Kafka parses them) or Python values of the field's type.

        Raises:
            InvalidConfigError: An unknown name (the message lists the accepted ones) or a refused value.
        """
        values: dict[str, Any] = {}
        for name, value in properties.items():
            if name == "transactional.id":
                value = value or None  # Kafka's default is null; an empty id means none
            elif name in _KEYS and isinstance(value, str):
                value = _KEYS[name].parse(value)
            elif name in _BOOLEANS and isinstance(value, str):
                value = _parse_bool(name, value)
            elif name not in ACCEPTED_CONFIGS:
                raise InvalidConfigError(f"unknown producer config {name!r}; accepted: {', '.join(ACCEPTED_CONFIGS)}")
            values[name.replace(".", "_")] = value
        return cls(**values)


def _parse_bool(name: str, text: str) -> bool:
    """A Kafka BOOLEAN: ``true`` or ``false`` in any case, blanks around ignored."""
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise InvalidConfigError(f"{name} = {text!r} is invalid; accepted: true or false")
    return word == "true"


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record was appended (Kafka's ``RecordMetadata``).

    Attributes:
        topic: The topic.
        partition: The partition.
        offset: The record's offset.
        timestamp: Its CreateTime (given, or the time it was sent), or the log append time when the
            topic's ``message.timestamp.type`` is LogAppendTime.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


#: A completion callback, as Kafka's ``Callback.onCompletion``: the metadata, or the error.
Callback = Callable[[RecordMetadata | None, BaseException | None], None]


class _Chunk:
    """The records ``send`` queued for one topic between two drains, and then their outcomes.

    ``send`` appends to the lists; the sender takes the chunk whole, and from then on the records'
    partitions, offsets and timestamps live in arrays that the futures index. A record has its
    outcome once its offset is set (an offset is never negative) or it has an error.
    """

    __slots__ = (
        "topic",
        "num_partitions",
        "created",
        "bytes",
        "values",
        "keys",
        "headers",
        "partitions",
        "timestamps",
        "has_headers",
        "has_partitions",
        "lock",
        "changed",
        "partition",
        "offset",
        "timestamp",
        "errors",
        "callbacks",
    )

    def __init__(self, topic: str, num_partitions: int, lock: threading.Lock) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.created = 0.0  # monotonic time of the first record
        self.bytes = 0  # key and value bytes
        self.values: list[Any] = []
        self.keys: list[Any] = []
        self.headers: list[list[tuple[str, Any]] | None] = []
        self.partitions: list[int | None] = []
        self.timestamps: list[int] = []
        self.has_headers = False
        self.has_partitions = False
        self.lock = lock  # the producer's: waiters and ``callbacks`` against new outcomes
        self.changed = threading.Condition(lock)  # notified when records get their outcomes
        self.partition = np.empty(0, np.int32)
        self.offset = np.empty(0, np.int64)
        self.timestamp = np.empty(0, np.int64)
        self.errors: dict[int, BaseException] = {}
        self.callbacks: list[tuple[int, Callback]] = []

    def take_table(self) -> pa.Table:
        """The records as Arrow columns (key, value, timestamp, headers when any has some); the lists are
        released, and the timestamps become the result array."""
        self.offset = np.full(len(self.timestamps), -1, np.int64)  # first, so that ``fail`` reaches every record
        self.timestamp = np.array(self.timestamps, np.int64)
        columns = {
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "timestamp": pa.array(self.timestamps, pa.int64()),
        }
        if self.has_headers:
            columns["headers"] = pa.array(self.headers, HEADER_TYPE)
        self.values, self.keys, self.headers, self.timestamps = [], [], [], []
        return pa.table(columns)

    def take_explicit(self) -> pa.Array | None:
        explicit = pa.array(self.partitions, pa.int32()) if self.has_partitions else None
        self.partitions = []
        return explicit

    def resolve(self, rows: np.ndarray, outcome: AppendInfo | BaseException, position: int) -> None:
        """Record the outcome of ``rows``, the records at ``position`` onwards of an append."""
        if isinstance(outcome, AppendInfo):
            self.offset[rows] = outcome.first_offset + position + np.arange(len(rows))
            if outcome.log_append_time_ms >= 0:
                self.timestamp[rows] = outcome.log_append_time_ms
        else:
            self.errors.update(dict.fromkeys(rows.tolist(), outcome))

    def fail(self, error: BaseException) -> None:
        """Every record of the chunk without an outcome fails with ``error``."""
        for index in np.flatnonzero(self.offset < 0).tolist():
            self.errors.setdefault(index, error)

    def has_outcome(self, index: int) -> bool:
        return index < len(self.offset) and (self.offset[index] >= 0 or index in self.errors)

    def result(self, index: int) -> RecordMetadata:
        error = self.errors.get(index)
        if error is not None:
            raise error
        return RecordMetadata(
            self.topic, int(self.partition[index]), int(self.offset[index]), int(self.timestamp[index])
        )

    def publish(self) -> None:
        """Wake the futures waiting on the chunk and run the callbacks of records that have their outcome,
        in the calling thread (as Kafka runs them in its I/O thread), outside the producer's locks."""
        with self.lock:
            self.changed.notify_all()
            due = [(i, callback) for i, callback in self.callbacks if self.has_outcome(i)]
            if due:
                self.callbacks = [(i, callback) for i, callback in self.callbacks if not self.has_outcome(i)]
        for index, callback in due:
            _run_callback(callback, self, index)


def _run_callback(callback: Callback, chunk: _Chunk, index: int) -> None:
    """Call a callback with the record's outcome; its errors are logged, as Kafka logs them, so that
    one faulty callback does not keep other records' callbacks from running."""
    try:
        metadata = chunk.result(index)
    except BaseException as error:  # the record's failure, handed to the callback
        outcome: tuple[RecordMetadata | None, BaseException | None] = (None, error)
    else:
        outcome = (metadata, None)
    try:
        callback(*outcome)
    except Exception:
        _log.exception("Error executing user-provided callback on message for topic %s", chunk.topic)


class RecordFuture:
    """The future result of one ``send`` (Kafka's ``Future<RecordMetadata>``)."""

    __slots__ = ("_chunk", "_index")

    def __init__(self, chunk: _Chunk, index: int) -> None:
        self._chunk = chunk
        self._index = index

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the record to be appended and return where it went.

        Args:
            timeout: Seconds to wait at most; None waits as long as it takes.

        Raises:
            TimeoutError: The record is not appended after ``timeout`` seconds.
            PySparkLogError: The append failed (``OutOfOrderSequenceError``, ``InvalidTimestampError``...);
                an ``OSError`` when it failed on the filesystem after its retries.
        """
        chunk = self._chunk
        with chunk.lock:
            if not chunk.changed.wait_for(lambda: chunk.has_outcome(self._index), timeout):
                raise TimeoutError(f"record for topic {chunk.topic} not appended within {timeout} s")
        return chunk.result(self._index)

    def done(self) -> bool:
        """Whether the record has its outcome (appended or failed)."""
        return self._chunk.has_outcome(self._index)

    def add_callback(self, callback: Callback) -> None:
        """Call ``callback(metadata, None)`` once the record is appended, ``callback(None, error)`` if it
        fails: at once when it already has; otherwise in the thread that appends it (keep it short)."""
        chunk = self._chunk
        with chunk.lock:
            if not chunk.has_outcome(self._index):
                chunk.callbacks.append((self._index, callback))
                return
        _run_callback(callback, chunk, self._index)


@dataclass(slots=True)
class _Piece:
    """Records of one chunk waiting in one partition's queue, in the order they were sent."""

    chunk: _Chunk
    rows: np.ndarray  # their indexes in the chunk
    table: pa.Table
    sizes: np.ndarray  # key and value bytes of each


@dataclass(slots=True, eq=False)  # hashed by identity: kept in an ordered set
class _PartitionState:
    """What the producer keeps per partition: the open log, the next sequence and the waiting records."""

    topic: str
    partition: int
    log: PartitionLog | None = None
    next_sequence: int = 0
    pieces: list[_Piece] = field(default_factory=list)
    pending_bytes: int = 0

    @property
    def oldest(self) -> float:
        """When the oldest waiting record was sent (monotonic seconds)."""
        return self.pieces[0].chunk.created


@dataclass(slots=True)
class _Topic:
    name: str
    num_partitions: int
    refreshed: float  # monotonic time the partition count was read
    partitioner: Partitioner
    partitions: dict[int, _PartitionState] = field(default_factory=dict)


class _TxnState(enum.Enum):
    """Where a transactional producer is (Kafka's ``TransactionManager.State``, the states used here)."""

    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED = "PREPARED_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"


class Producer:
    """Appends records to the topics of a log directory as Kafka's producer sends them to a broker.

    Thread-safe: any number of threads may send at once. Close it (or use it as a context manager)
    so that the records still waiting are appended.

    Args:
        log_dir: The log directory (a ``LogDirectory`` or its path); topics must exist in it.
        config: The settings (default: Kafka's defaults).
    """

    def __init__(self, log_dir: LogDirectory | str | os.PathLike[str], config: ProducerConfig | None = None) -> None:
        self.config = config or ProducerConfig()
        self._logs = log_dir if isinstance(log_dir, LogDirectory) else LogDirectory(log_dir)
        cfg = self.config
        self._linger_s = cfg.linger_ms / 1000
        self._max_record_bytes = cfg.max_request_size - RECORD_BATCH_OVERHEAD - _MAX_RECORD_OVERHEAD
        # Guards what ``send`` touches: the incoming chunks, the partition counts, the closed flag.
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._chunks: dict[str, _Chunk] = {}
        self._partition_counts: dict[str, int] = {}
        self._closed = False
        # Guards the appending side: topics, partition queues, sequences, the producer id.
        self._append_lock = threading.Lock()
        self._topics: dict[str, _Topic] = {}
        self._waiting: dict[_PartitionState, None] = {}  # partitions with queued records, as an ordered set
        self._next_deadline = float("inf")  # when the oldest queued record's linger ends
        self._producer_id = NO_PRODUCER_ID  # allocated at the first idempotent append
        self._producer_epoch = 0
        # A transactional producer's state (with ``transactional.id``), changed under ``_append_lock``.
        self._txn_state = _TxnState.UNINITIALIZED
        self._txn_partitions: set[TopicPartition] = set()
        self._coordinator = TransactionCoordinator(self._logs) if cfg.transactional_id is not None else None
        name = f"pysparklog-producer-sender | {cfg.client_id or f'producer-{next(_client_ids)}'}"
        self._sender = threading.Thread(target=self._run, name=name, daemon=True)
        self._sender.start()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending ------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | bytearray | memoryview | None = None,
        key: bytes | bytearray | memoryview | None = None,
        headers: Iterable[tuple[str, bytes | bytearray | memoryview | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue one record; it is appended with others of its partition once their batch is full,
        after ``linger.ms``, or at ``flush``/``close``.

        Args:
            topic: The topic; it must exist.
            value: The value (None: a tombstone).
            key: The key; a keyed record goes where Kafka's producer sends it (murmur2).
            headers: ``(key, value)`` pairs.
            partition: The partition, overriding the partitioner.
            timestamp_ms: The CreateTime in milliseconds (default: now).

        Returns:
            The future of the record's ``RecordMetadata``; the append's errors reach it.

        Raises:
            TypeError: A key, value or header that is not bytes.
            InvalidConfigError: The key and value are larger than ``max.request.size`` allows, or the
                timestamp is negative.
            UnknownTopicError: The topic does not exist, or has no partition ``partition``.
            PySparkLogError: The producer is closed.
        """
        if type(value) not in _BINARY or type(key) not in _BINARY:
            raise TypeError(
                f"key and value must be bytes, bytearray, memoryview or None, not {type(key).__name__} and "
                f"{type(value).__name__}"
            )
        size = (0 if value is None else len(value)) + (0 if key is None else len(key))
        if size > self._max_record_bytes:
            raise self._too_large(size)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        elif type(timestamp_ms) is not int or timestamp_ms < 0:
            raise InvalidConfigError(f"Invalid timestamp: {timestamp_ms!r}. Timestamp should always be non-negative")
        if headers is not None:
            headers = _checked_headers(headers)
        if self._coordinator is not None and self._txn_state is not _TxnState.IN_TRANSACTION:
            raise self._wrong_state("send")
        with self._lock:
            chunk = self._chunks.get(topic) or self._open_chunk(topic)
            if partition is not None:
                partition = _checked_partition(partition, chunk.num_partitions)
                chunk.has_partitions = True
            if headers is not None:
                chunk.has_headers = True
            index = len(chunk.values)
            chunk.values.append(value)
            chunk.keys.append(key)
            chunk.headers.append(headers)
            chunk.partitions.append(partition)
            chunk.timestamps.append(timestamp_ms)
            chunk.bytes += size
            if index == 0:
                chunk.created = time.monotonic()
                self._wakeup.notify()  # a new linger deadline
            elif chunk.bytes >= self.config.batch_size > chunk.bytes - size:
                self._wakeup.notify()  # a batch may be full
        return RecordFuture(chunk, index)

    def _too_large(self, size: int) -> InvalidConfigError:
        return InvalidConfigError(
            f"The message is {size + RECORD_BATCH_OVERHEAD + _MAX_RECORD_OVERHEAD} bytes when serialized which is "
            f"larger than {self.config.max_request_size}, which is the value of the max.request.size configuration."
        )

    def _open_chunk(self, topic: str) -> _Chunk:
        """The first chunk of a topic (``send``'s slow path, under ``_lock``)."""
        if self._closed:
            raise PySparkLogError("Cannot perform operation after producer has been closed")
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = self._logs.topics.get(topic).partitions
        chunk = self._chunks[topic] = _Chunk(topic, count, self._lock)
        return chunk

    def send_arrow(self, topic: str, data: pa.Table | pa.RecordBatch) -> dict[int, AppendInfo]:
        """Partition, encode and append a whole table at once; returns when everything is appended.

        Records sent with ``send`` before to this topic are appended first, so each partition keeps
        the order records were given in. Each partition's rows are appended in batches of
        ``batch.size``, the last one possibly smaller (nothing lingers).

        Args:
            topic: The topic; it must exist.
            data: ``value`` (binary or string, required), ``key``, ``timestamp`` (timestamp or int64
                milliseconds; null means now), ``headers`` (list of struct<key: string, value: binary>)
                and ``partition`` (integer: the record's partition, null to let the partitioner decide).

        Returns:
            Per partition that received records: the offsets of the first and last, how many, and
            the log append time (-1 for CreateTime). Other writers' records may lie between.

        Raises:
            InvalidConfigError: A column is missing or of a type that cannot be read, or a record is
                larger than ``max.request.size`` allows.
            UnknownTopicError: The topic does not exist, or a ``partition`` is not one of its partitions.
            PySparkLogError: An append failed (nothing of that partition after it is appended; the
                partitions before it in partition order are), or the producer is closed.
            OSError: An append failed on the filesystem after its retries.
        """
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if self._coordinator is not None and self._txn_state is not _TxnState.IN_TRANSACTION:
            raise self._wrong_state("send")
        self._check_sizes(table)
        explicit = table.column("partition") if "partition" in table.column_names else None
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        with self._append_lock:
            with self._lock:
                if self._closed:
                    raise PySparkLogError("Cannot perform operation after producer has been closed")
                earlier = self._take_chunks(topic)
            touched = self._drain(earlier, force_topic=topic)
            try:
                state = self._topic(topic)
                partitions = state.partitioner.assign_partitions(table, state.num_partitions, explicit)
                order, bounds = _group_rows(partitions, state.num_partitions)
                self._register([TopicPartition(topic, p) for p in np.flatnonzero(np.diff(bounds)).tolist()])
                return {
                    p: self._append_bulk(self._partition(state, p), table, order[bounds[p] : bounds[p + 1]], deadline)
                    for p in np.flatnonzero(np.diff(bounds)).tolist()
                }
            finally:
                _publish(touched)

    def _check_sizes(self, table: pa.Table) -> None:
        """``max.request.size`` over a whole table: the largest key and value."""
        largest = int(record_sizes(table).max(initial=0))
        if largest > self._max_record_bytes:
            raise self._too_large(largest)

    def flush(self) -> None:
        """Append every record sent so far, now, and return once each has its outcome (Kafka's ``flush``)."""
        with self._append_lock:
            with self._lock:
                chunks = self._take_chunks()
            touched = self._drain(chunks, force_all=True)
        _publish(touched)

    def close(self) -> None:
        """Append what is still waiting, stop the sender thread and close the partition logs; later sends
        are refused. Closing again does nothing."""
        with self._lock:
            if self._closed:
                return
            chunks = [chunk for chunk in self._chunks.values() if chunk.values]
            self._chunks.clear()
            self._closed = True
            self._wakeup.notify()
        self._sender.join()
        with self._append_lock:
            touched = self._drain(chunks, force_all=True)
            for topic in self._topics.values():
                for state in topic.partitions.values():
                    if state.log is not None:
                        state.log.close()
        _publish(touched)

    def partitions_for(self, topic: str) -> list[int]:
        """The partitions of a topic, read from the log directory now.

        Raises:
            UnknownTopicError: The topic does not exist.
        """
        count = self._logs.topics.get(topic).partitions
        with self._lock:
            self._partition_counts[topic] = count
        return list(range(count))

    # -- transactions -------------------------------------------------------------------------

    def init_transactions(self) -> None:
        """Start a session of ``transactional.id`` (Kafka's ``initTransactions``): a bumped epoch fences
        every older producer of the id, and a transaction one left open is aborted first.

        Raises:
            PySparkLogError: The producer has no ``transactional.id``, or is in a transaction.
        """
        coordinator = self._transactional("initTransactions")
        with self._append_lock:
            if self._txn_state not in (_TxnState.UNINITIALIZED, _TxnState.READY):
                raise self._wrong_state("initTransactions")
            self._start_session(coordinator)

    def begin_transaction(self) -> None:
        """Begin a transaction (Kafka's ``beginTransaction``); records sent from now on belong to it."""
        self._transactional("beginTransaction")
        with self._append_lock:
            if self._txn_state is not _TxnState.READY:
                raise self._wrong_state("beginTransaction")
            self._txn_state, self._txn_partitions = _TxnState.IN_TRANSACTION, set()

    def prepare_transaction(self) -> PreparedTransaction:
        """Append everything sent and leave the transaction open for another process to end with
        ``TransactionCoordinator.end_transaction`` (Kafka's KIP-939 ``prepareTransaction``).

        Raises:
            PySparkLogError: An append of the transaction failed (abort it), or no transaction is open.
        """
        coordinator = self._transactional("prepareTransaction")
        self.flush()
        with self._append_lock:
            self._check_committable("prepareTransaction")
            assert self.config.transactional_id is not None
            coordinator.prepare_transaction(self.config.transactional_id, self._session())
            self._txn_state = _TxnState.PREPARED
            return PreparedTransaction(self.config.transactional_id, self._session())

    def commit_transaction(self) -> None:
        """Append everything sent, then commit (Kafka's ``commitTransaction``): COMMIT markers in every
        partition the transaction wrote, after which ``read_committed`` readers see its records.

        Raises:
            PySparkLogError: An append of the transaction failed (abort it), or no transaction is open.
            ProducerFencedError: A newer producer of the id, or a timeout, aborted the transaction.
        """
        coordinator = self._transactional("commitTransaction")
        self.flush()
        with self._append_lock:
            if self._txn_state is not _TxnState.PREPARED:
                self._check_committable("commitTransaction")
            assert self.config.transactional_id is not None
            coordinator.end_transaction(self.config.transactional_id, self._session(), commit=True)
            self._txn_state = _TxnState.READY

    def abort_transaction(self) -> None:
        """Abort the transaction (Kafka's ``abortTransaction``): its records stay in the log, hidden from
        ``read_committed`` readers by ABORT markers. After a failed append the session starts again
        with a bumped epoch, as Kafka's producer bumps it (KIP-360), so sequences restart cleanly."""
        coordinator = self._transactional("abortTransaction")
        try:
            self.flush()
        except Exception:  # the records' futures have their errors; the abort goes on
            _log.debug("flush before abort failed", exc_info=True)
        with self._append_lock:
            if self._txn_state not in (_TxnState.IN_TRANSACTION, _TxnState.PREPARED, _TxnState.ABORTABLE_ERROR):
                raise self._wrong_state("abortTransaction")
            assert self.config.transactional_id is not None
            if self._txn_state is _TxnState.ABORTABLE_ERROR:
                self._start_session(coordinator)  # the new epoch aborts the transaction and fences the old one
            else:
                coordinator.end_transaction(self.config.transactional_id, self._session(), commit=False)
                self._txn_state = _TxnState.READY

    def _transactional(self, operation: str) -> TransactionCoordinator:
        if self._coordinator is None:
            raise PySparkLogError(f"Cannot use {operation} without setting the transactional.id")
        return self._coordinator

    def _wrong_state(self, operation: str) -> PySparkLogError:
        if self._txn_state is _TxnState.UNINITIALIZED:
            return PySparkLogError(f"Cannot perform a '{operation}' before completing a call to initTransactions")
        return PySparkLogError(f"Cannot call {operation} in state {self._txn_state.value}")

    def _check_committable(self, operation: str) -> None:
        if self._txn_state is _TxnState.ABORTABLE_ERROR:
            raise PySparkLogError(
                f"Cannot {operation}: an append of the transaction failed (its future has the error); abort it"
            )
        if self._txn_state is not _TxnState.IN_TRANSACTION:
            raise self._wrong_state(operation)

    def _session(self) -> ProducerSession:
        return ProducerSession(self._producer_id, self._producer_epoch)

    def _start_session(self, coordinator: TransactionCoordinator) -> None:
        """A new session from the coordinator, every partition at sequence 0 (under ``_append_lock``)."""
        assert self.config.transactional_id is not None
        session = coordinator.init_producer_id(self.config.transactional_id, self.config.transaction_timeout_ms)
        self._producer_id, self._producer_epoch = session.producer_id, session.producer_epoch
        for topic in self._topics.values():
            for state in topic.partitions.values():
                state.next_sequence = 0
        self._txn_state, self._txn_partitions = _TxnState.READY, set()

    def _register(self, partitions: list[TopicPartition]) -> None:
        """Register the transaction's new partitions with the coordinator before anything is appended
        to them (Kafka's ``AddPartitionsToTxn``); nothing without a transaction (under ``_append_lock``)."""
        if self._coordinator is None:
            return
        new = [tp for tp in partitions if tp not in self._txn_partitions]
        if new:
            if self._txn_state is not _TxnState.IN_TRANSACTION:
                raise self._wrong_state("send")
            assert self.config.transactional_id is not None
            self._coordinator.add_partitions(self.config.transactional_id, self._session(), new)
            self._txn_partitions.update(new)

    # -- the sender ---------------------------------------------------------------------------

    def _run(self) -> None:
        """The sender thread: append what is due whenever something becomes due, until closed."""
        while True:
            with self._wakeup:
                while not self._closed and (wait := self._time_to_drain()) > 0:
                    self._wakeup.wait(min(wait, threading.TIMEOUT_MAX))
                if self._closed:
                    return
            with self._append_lock:
                with self._lock:
                    chunks = self._take_chunks()
                touched = self._drain(chunks)
            _publish(touched)

    def _time_to_drain(self) -> float:
        """Seconds until something is due: a possibly full batch, or a linger ending (under ``_lock``)."""
        now = time.monotonic()
        wait = self._next_deadline - now
        for chunk in self._chunks.values():
            if chunk.values:
                if chunk.bytes >= self.config.batch_size:
                    return 0.0
                wait = min(wait, chunk.created + self._linger_s - now)
        return wait

    def _take_chunks(self, topic: str | None = None) -> list[_Chunk]:
        """The incoming chunks with records (of ``topic``, or all), replaced by empty ones (under ``_lock``)."""
        taken = [c for c in self._chunks.values() if c.values and topic in (None, c.topic)]
        for chunk in taken:
            self._chunks[chunk.topic] = _Chunk(chunk.topic, self._partition_counts[chunk.topic], self._lock)
        return taken

    def _drain(
        self, chunks: list[_Chunk], *, force_all: bool = False, force_topic: str | None = None
    ) -> dict[_Chunk, None]:
        """Queue the chunks' records per partition, then append every queue that is due (under
        ``_append_lock``); returns the chunks whose records got outcomes, to publish outside it."""
        touched: dict[_Chunk, None] = {}
        for chunk in chunks:
            try:
                self._enqueue(chunk)
            except Exception as error:  # the partitioner or the topic's metadata: every record of the chunk fails
                chunk.fail(error)
                touched[chunk] = None
        now = time.monotonic()
        for state in list(self._waiting):
            lingered = now >= state.oldest + self._linger_s
            if force_all or lingered or state.topic == force_topic:
                self._append_queue(state, keep_partial=False, touched=touched)
            elif state.pending_bytes >= self.config.batch_size:
                self._append_queue(state, keep_partial=True, touched=touched)
            if not state.pieces:
                del self._waiting[state]
        self._next_deadline = min((s.oldest + self._linger_s for s in self._waiting), default=float("inf"))
        return touched

    def _enqueue(self, chunk: _Chunk) -> None:
        """Partition a chunk's records and queue each partition's share (vectorised: no Python per record)."""
        table = chunk.take_table()
        explicit = chunk.take_explicit()
        topic = self._topic(chunk.topic)
        chunk.partition = topic.partitioner.assign_partitions(table, topic.num_partitions, explicit)
        sizes = record_sizes(table)
        order, bounds = _group_rows(chunk.partition, topic.num_partitions)
        for p in np.flatnonzero(np.diff(bounds)).tolist():
            rows = order[bounds[p] : bounds[p + 1]]
            piece = _Piece(chunk, rows, table if len(rows) == table.num_rows else table.take(rows), sizes[rows])
            state = self._partition(topic, p)
            state.pieces.append(piece)
            state.pending_bytes += int(piece.sizes.sum())
            self._waiting[state] = None

    def _topic(self, name: str) -> _Topic:
        """A topic's state, its partition count read again once older than ``metadata.max.age.ms``."""
        now = time.monotonic()
        topic = self._topics.get(name)
        if topic is None or now - topic.refreshed >= self.config.metadata_max_age_ms / 1000:
            count = self._logs.topics.get(name).partitions
            with self._lock:
                self._partition_counts[name] = count
            if topic is None:
                topic = self._topics[name] = _Topic(name, count, now, Partitioner(self.config.partitioner))
            topic.num_partitions, topic.refreshed = count, now
        return topic

    def _partition(self, topic: _Topic, partition: int) -> _PartitionState:
        state = topic.partitions.get(partition)
        if state is None:
            state = topic.partitions[partition] = _PartitionState(topic.name, partition)
        return state

    # -- appending ----------------------------------------------------------------------------

    def _append_queue(self, state: _PartitionState, *, keep_partial: bool, touched: dict[_Chunk, None]) -> None:
        """Append a partition's queued records (with ``keep_partial``, all but those of the last batch,
        which may fill up still) and hand each record its outcome."""
        while state.pieces:
            tables = [piece.table for piece in state.pieces]
            table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")
            deadline = state.oldest + self.config.delivery_timeout_ms / 1000
            try:
                consumed, outcomes = self._append_rows(state, table.combine_chunks(), keep_partial, deadline)
            except Exception as error:  # outside the appends (the producer id file...): the queue fails
                consumed, outcomes = table.num_rows, [(0, table.num_rows, error)]
            _resolve(state, outcomes, touched)
            _drop_rows(state, consumed)
            if not outcomes or isinstance(outcomes[-1][2], AppendInfo):
                return  # else a failure stopped the appends: go on with the records after it

    def _append_bulk(self, state: _PartitionState, table: pa.Table, rows: np.ndarray, deadline: float) -> AppendInfo:
        """Append ``rows`` of ``table`` to one partition, a slice at a time; raises the first failure."""
        infos: list[AppendInfo] = []
        start, step = 0, _BULK_ROWS
        while start < len(rows):
            end = min(start + step, len(rows))
            gathered = table.take(rows[start:end]).combine_chunks()
            consumed, outcomes = self._append_rows(state, gathered, end < len(rows), deadline)
            for _first, _last, outcome in outcomes:
                if not isinstance(outcome, AppendInfo):
                    raise outcome
                infos.append(outcome)
            # A slice smaller than one batch appends nothing while it keeps its last batch: take more.
            step = step if consumed else step * 2
            start += consumed
        return AppendInfo.spanning(infos)

    def _append_rows(
        self, state: _PartitionState, table: pa.Table, keep_partial: bool, deadline: float
    ) -> tuple[int, list[tuple[int, int, AppendInfo | BaseException]]]:
        """Encode rows and append them in order, stopping at the first failed append.

        Args:
            state: The partition.
            table: The rows, one Arrow chunk.
            keep_partial: Leave the rows of the last batch out (it may not be full yet).
            deadline: Monotonic time after which a failed append is not retried.

        Returns:
            (rows consumed, [(first row, end row, AppendInfo or the error)] per append).
        """
        groups = self._encode(state, table)
        if keep_partial:
            groups = _without_last_batch(groups)
        outcomes: list[tuple[int, int, AppendInfo | BaseException]] = []
        done = 0
        for group in groups:
            count = group.num_records
            try:
                outcome = self._append_group(state, group, deadline)
            except BaseException:  # interrupted (Ctrl-C): the append may or may not have been written
                self._reset_producer_id()
                raise
            outcomes.append((done, done + count, outcome))
            done += count
            if not isinstance(outcome, AppendInfo):
                self._reset_producer_id()
                break
            if self.config.idempotent:
                state.next_sequence = next_sequence(state.next_sequence, count)
        return done, outcomes

    def _encode(self, state: _PartitionState, table: pa.Table) -> list[EncodedBatches]:
        """The rows as batches of ``batch.size``, numbered from the partition's next sequence, grouped into
        appends of at most ``max.request.size`` bytes."""
        cfg = self.config
        if cfg.idempotent and self._producer_id == NO_PRODUCER_ID:
            self._producer_id = allocate_producer_id(self._logs.path)
        self._register([TopicPartition(state.topic, state.partition)])
        settings = BatchSettings(
            codec=cfg.codec,
            max_batch_bytes=max(cfg.batch_size, RECORD_BATCH_OVERHEAD),
            max_batch_records=INT_MAX,
            producer_id=self._producer_id if cfg.idempotent else NO_PRODUCER_ID,
            producer_epoch=self._producer_epoch if cfg.idempotent else NO_PRODUCER_EPOCH,
            base_sequence=state.next_sequence if cfg.idempotent else NO_SEQUENCE,
            transactional=self._coordinator is not None,
        )
        return [group for encoded in encode_arrow(table, settings) for group in _split(encoded, cfg.max_request_size)]

    def _append_group(
        self, state: _PartitionState, group: EncodedBatches, deadline: float
    ) -> AppendInfo | BaseException:
        """One append, retried with the same batches after an ``OSError`` while retries and time are left."""
        cfg = self.config
        backoff = cfg.retry_backoff_ms / 1000
        attempts = 0
        while True:
            try:
                if state.log is None:
                    state.log = self._logs.partition(state.topic, state.partition)
                return state.log.append(group)
            except OSError as error:
                attempts += 1
                if attempts > cfg.retries or time.monotonic() + backoff > deadline:
                    return error
                _log.warning(
                    "append to %s-%d failed (%s); retry %d in %s ms",
                    state.topic,
                    state.partition,
                    error,
                    attempts,
                    cfg.retry_backoff_ms,
                )
                time.sleep(backoff)
            except Exception as error:
                return error

    def _reset_producer_id(self) -> None:
        """After a failed append the log may or may not hold its batches: start afresh with a new producer
        id (allocated at the next append), every partition at sequence 0."""
        if not self.config.idempotent:
            return
        if self._coordinator is not None:  # the session stays; the transaction can only be aborted
            self._txn_state = _TxnState.ABORTABLE_ERROR
            return
        self._producer_id = NO_PRODUCER_ID
        for topic in self._topics.values():
            for state in topic.partitions.values():
                state.next_sequence = 0


def _checked_headers(headers: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Headers as a list of (str, bytes-like or None) pairs."""
    checked = list(headers)
    for header in checked:
        if not (
            isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str) and type(header[1]) in _BINARY
        ):
            raise TypeError(f"a header must be a (str, bytes or None) pair, not {header!r}")
    return checked


def _checked_partition(partition: int, num_partitions: int) -> int:
    """An explicit partition as an int, checked as Kafka checks it.

    Raises:
        TypeError: It is not an integer.
        UnknownTopicError: It is not one of the topic's partitions.
    """
    checked = operator.index(partition)
    if not 0 <= checked < num_partitions:
        raise UnknownTopicError(
            f"Invalid partition given with record: {checked} is not in the range [0...{num_partitions})."
        )
    return checked


def _group_rows(partitions: np.ndarray, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """(row indexes ordered by partition, keeping their order within each; where each partition's rows
    start in it, plus the end): a stable radix sort for up to 32767 partitions."""
    narrow = partitions.astype(np.int16) if num_partitions <= np.iinfo(np.int16).max else partitions
    order = np.argsort(narrow, kind="stable")
    bounds = np.zeros(num_partitions + 1, np.int64)
    np.cumsum(np.bincount(partitions, minlength=num_partitions), out=bounds[1:])
    return order, bounds


def _split(encoded: EncodedBatches, max_bytes: int) -> list[EncodedBatches]:
    """Consecutive batches grouped into appends of at most ``max_bytes`` bytes (a larger batch alone)."""
    positions, sizes, counts = encoded.positions, encoded.sizes, encoded.record_counts
    ends = positions + sizes
    groups = []
    i, n = 0, len(positions)
    while i < n:
        fitting = int(np.searchsorted(ends, int(positions[i]) + max_bytes, side="right"))
        j = min(max(fitting, i + 1), n)
        start = int(positions[i])
        groups.append(
            EncodedBatches(encoded.data[start : int(ends[j - 1])], positions[i:j] - start, sizes[i:j], counts[i:j])
        )
        i = j
    return groups


def _without_last_batch(groups: list[EncodedBatches]) -> list[EncodedBatches]:
    """The groups less their very last batch."""
    if not groups:
        return groups
    last = groups[-1]
    if last.num_batches == 1:
        return groups[:-1]
    cut = int(last.positions[-1])
    shorter = EncodedBatches(last.data[:cut], last.positions[:-1], last.sizes[:-1], last.record_counts[:-1])
    return [*groups[:-1], shorter]


def _resolve(
    state: _PartitionState, outcomes: list[tuple[int, int, AppendInfo | BaseException]], touched: dict[_Chunk, None]
) -> None:
    """Hand the outcome of each append to the records it holds: rows [first, end) of the queue's pieces."""
    piece_start = 0
    index = 0
    for first, end, outcome in outcomes:
        while index < len(state.pieces) and piece_start + len(state.pieces[index].rows) <= first:
            piece_start += len(state.pieces[index].rows)
            index += 1
        start, i = piece_start, index
        while i < len(state.pieces) and start < end:
            piece = state.pieces[i]
            lo, hi = max(first, start) - start, min(end, start + len(piece.rows)) - start
            piece.chunk.resolve(piece.rows[lo:hi], outcome, start + lo - first)
            touched[piece.chunk] = None
            start += len(piece.rows)
            i += 1


def _drop_rows(state: _PartitionState, count: int) -> None:
    """Remove the first ``count`` queued rows (they have their outcomes)."""
    while count and state.pieces:
        piece = state.pieces[0]
        if count >= len(piece.rows):
            state.pieces.pop(0)
            state.pending_bytes -= int(piece.sizes.sum())
            count -= len(piece.rows)
        else:
            state.pending_bytes -= int(piece.sizes[:count].sum())
            state.pieces[0] = _Piece(piece.chunk, piece.rows[count:], piece.table.slice(count), piece.sizes[count:])
            count = 0


def _publish(chunks: dict[_Chunk, None]) -> None:
    for chunk in chunks:
        chunk.publish()
