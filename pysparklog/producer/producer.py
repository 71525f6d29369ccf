"""``Producer``: Kafka's ``KafkaProducer`` over a log directory (see the package for how it works)."""

from __future__ import annotations

import enum
import itertools
import logging
import operator
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pysparklog.errors import InvalidConfigError, PySparkLogError, UnknownTopicError
from pysparklog.partitioner import Partitioner
from pysparklog.partitioner import _record_sizes as record_sizes
from pysparklog.producer.config import ProducerConfig
from pysparklog.producer.future import Chunk, RecordFuture, publish
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.log import AppendInfo, PartitionLog
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.producer_ids import allocate_producer_id
from pysparklog.storage.producer_state import next_sequence
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches, encode_arrow
from pysparklog.storage.records.default_records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
)
from pysparklog.structs import TopicPartition
from pysparklog.transactions import (
    PreparedTransaction,
    ProducerSession,
    TransactionCoordinator,
)

_log = logging.getLogger(__name__)

# Kafka's DefaultRecord.MAX_RECORD_OVERHEAD: the most a record adds to its key and value.
_MAX_RECORD_OVERHEAD = 21
# Rows the bulk path gathers per partition at a time: the copy stays in cache and memory bounded.
_BULK_ROWS = 1 << 16
_BINARY = frozenset({bytes, bytearray, memoryview, type(None)})
_client_ids = itertools.count(1)


@dataclass(slots=True)
class _Piece:
    """Records of one chunk waiting in one partition's queue, in the order they were sent."""

    chunk: Chunk
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
        self._chunks: dict[str, Chunk] = {}
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

    def _open_chunk(self, topic: str) -> Chunk:
        """The first chunk of a topic (``send``'s slow path, under ``_lock``)."""
        if self._closed:
            raise PySparkLogError("Cannot perform operation after producer has been closed")
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = self._logs.topics.get(topic).partitions
        chunk = self._chunks[topic] = Chunk(topic, count, self._lock)
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
                publish(touched)

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
        publish(touched)

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
        publish(touched)

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
            publish(touched)

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

    def _take_chunks(self, topic: str | None = None) -> list[Chunk]:
        """The incoming chunks with records (of ``topic``, or all), replaced by empty ones (under ``_lock``)."""
        taken = [c for c in self._chunks.values() if c.values and topic in (None, c.topic)]
        for chunk in taken:
            self._chunks[chunk.topic] = Chunk(chunk.topic, self._partition_counts[chunk.topic], self._lock)
        return taken

    def _drain(
        self, chunks: list[Chunk], *, force_all: bool = False, force_topic: str | None = None
    ) -> dict[Chunk, None]:
        """Queue the chunks' records per partition, then append every queue that is due (under
        ``_append_lock``); returns the chunks whose records got outcomes, to publish outside it."""
        touched: dict[Chunk, None] = {}
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

    def _enqueue(self, chunk: Chunk) -> None:
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

    def _append_queue(self, state: _PartitionState, *, keep_partial: bool, touched: dict[Chunk, None]) -> None:
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
    state: _PartitionState, outcomes: list[tuple[int, int, AppendInfo | BaseException]], touched: dict[Chunk, None]
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
