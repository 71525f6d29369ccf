"""Where sent records wait: per topic as ``send`` gives them, then per partition until appended.

Kafka's ``RecordAccumulator``, in two stages. ``send`` only appends a record to its topic's
``Chunk`` (a few list appends, under the accumulator's lock). The sender takes the chunks whole and
``enqueue`` partitions each at once, vectorised, into the queues of its partitions
(``PartitionState``), where the records wait until their batch is full or has lingered ``linger.ms``;
``due`` says which queues to append now. The queued stage is touched under the producer's append
lock only, by the sender and the transaction manager (which restarts the sequences).
"""

from __future__ import annotations

import operator
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pysparklog.errors import PySparkLogError, UnknownTopicError
from pysparklog.partitioner import Partitioner
from pysparklog.partitioner import _record_sizes as record_sizes
from pysparklog.producer.config import ProducerConfig
from pysparklog.producer.future import Chunk, RecordFuture
from pysparklog.storage import AppendInfo
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.records.arrow_records import CompressionEstimate


@dataclass(slots=True)
class _Piece:
    """Records of one chunk waiting in one partition's queue, in the order they were sent."""

    chunk: Chunk
    rows: np.ndarray  # their indexes in the chunk
    table: pa.Table
    sizes: np.ndarray  # key and value bytes of each


@dataclass(slots=True, eq=False)  # hashed by identity: kept in an ordered set
class PartitionState:
    """What the producer keeps per partition: the open log, the next sequence and the waiting records."""

    topic: str
    partition: int
    log: Log | None = None
    next_sequence: int = 0
    pieces: list[_Piece] = field(default_factory=list)
    pending_bytes: int = 0

    @property
    def oldest(self) -> float:
        """When the oldest waiting record was sent (monotonic seconds)."""
        return self.pieces[0].chunk.created

    def queued_table(self) -> pa.Table:
        """The waiting records, in order, as one table."""
        tables = [piece.table for piece in self.pieces]
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")

    def resolve(self, outcomes: list[tuple[int, int, AppendInfo | BaseException]], touched: dict[Chunk, None]) -> None:
        """Hand the outcome of each append to the records it holds: rows [first, end) of the queue's pieces."""
        piece_start = 0
        index = 0
        for first, end, outcome in outcomes:
            while index < len(self.pieces) and piece_start + len(self.pieces[index].rows) <= first:
                piece_start += len(self.pieces[index].rows)
                index += 1
            start, i = piece_start, index
            while i < len(self.pieces) and start < end:
                piece = self.pieces[i]
                lo, hi = max(first, start) - start, min(end, start + len(piece.rows)) - start
                piece.chunk.resolve(piece.rows[lo:hi], outcome, start + lo - first)
                touched[piece.chunk] = None
                start += len(piece.rows)
                i += 1

    def drop_rows(self, count: int) -> None:
        """Remove the first ``count`` queued rows (they have their outcomes)."""
        while count and self.pieces:
            piece = self.pieces[0]
            if count >= len(piece.rows):
                self.pieces.pop(0)
                self.pending_bytes -= int(piece.sizes.sum())
                count -= len(piece.rows)
            else:
                self.pending_bytes -= int(piece.sizes[:count].sum())
                self.pieces[0] = _Piece(piece.chunk, piece.rows[count:], piece.table.slice(count), piece.sizes[count:])
                count = 0


@dataclass(slots=True)
class TopicState:
    """What the producer keeps per topic: its partition count, partitioner and partitions."""

    name: str
    num_partitions: int
    refreshed: float  # monotonic time the partition count was read
    partitioner: Partitioner
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    # What the codec makes of the topic's records (Kafka's producer keeps one estimate per topic and codec).
    compression: CompressionEstimate = field(default_factory=CompressionEstimate)


class RecordAccumulator:
    """The records sent and not yet appended: the incoming chunks per topic and the partition queues.

    Args:
        logs: The log directory, for the topics' partition counts.
        config: The producer's settings (``batch.size``, ``linger.ms``, partitioning).
    """

    def __init__(self, logs: LogDirectory, config: ProducerConfig) -> None:
        self._logs = logs
        self.config = config
        self._linger_s = config.linger_ms / 1000
        # Guards what ``send`` touches: the incoming chunks, the partition counts, the closed flag.
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._chunks: dict[str, Chunk] = {}
        self._partition_counts: dict[str, int] = {}
        self._closed = False
        # The queued stage, under the producer's append lock: topics, partition queues.
        self._topics: dict[str, TopicState] = {}
        self._waiting: dict[PartitionState, None] = {}  # partitions with queued records, as an ordered set
        self._next_deadline = float("inf")  # when the oldest queued record's linger ends

    # -- incoming: what ``send`` touches, under the accumulator's lock ------------------------

    def append(
        self,
        topic: str,
        value: bytes | bytearray | memoryview | None,
        key: bytes | bytearray | memoryview | None,
        headers: list[tuple[str, Any]] | None,
        partition: int | None,
        timestamp_ms: int,
        size: int,
    ) -> RecordFuture:
        """Add one checked record (``size``: its key and value bytes) to its topic's chunk.

        Raises:
            UnknownTopicError: The topic does not exist and is not created on first use
                (``TopicStore.get_or_create``), or has no partition ``partition``.
            PySparkLogError: The producer is closed.
        """
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

    def _open_chunk(self, topic: str) -> Chunk:
        """The first chunk of a topic (``send``'s slow path, under ``_lock``), creating a missing topic as a
        broker does for a producer's first metadata request about it."""
        self._check_open()
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = self._logs.topics.get_or_create(topic).partitions
        chunk = self._chunks[topic] = Chunk(topic, count, self._lock)
        return chunk

    def _check_open(self) -> None:
        if self._closed:
            raise PySparkLogError("Cannot perform operation after producer has been closed")

    def take_chunks(self, topic: str | None = None, *, refuse_closed: bool = False) -> list[Chunk]:
        """The incoming chunks with records (of ``topic``, or all), replaced by empty ones.

        Raises:
            PySparkLogError: With ``refuse_closed``, the producer is closed (nothing is taken).
        """
        with self._lock:
            if refuse_closed:
                self._check_open()
            taken = [c for c in self._chunks.values() if c.values and topic in (None, c.topic)]
            for chunk in taken:
                self._chunks[chunk.topic] = Chunk(chunk.topic, self._partition_counts[chunk.topic], self._lock)
            return taken

    def close(self) -> list[Chunk] | None:
        """Refuse further records and wake the sender; returns the chunks still holding records, or None
        when already closed."""
        with self._lock:
            if self._closed:
                return None
            chunks = [chunk for chunk in self._chunks.values() if chunk.values]
            self._chunks.clear()
            self._closed = True
            self._wakeup.notify()
            return chunks

    def await_due(self) -> bool:
        """Wait until something is due (a possibly full batch, a linger ending) or the accumulator is
        closed; returns False once closed."""
        with self._wakeup:
            while not self._closed and (wait := self._time_to_drain()) > 0:
                self._wakeup.wait(min(wait, threading.TIMEOUT_MAX))
            return not self._closed

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

    def refresh_partition_count(self, topic: str) -> int:
        """A topic's partition count, read from the log directory now (on an object store, as this process read
        it within a few seconds: ``TopicStore.recent_partition_counts``); new chunks use it. A missing topic is
        created as a broker creates it for a producer's metadata request (``TopicStore.get_or_create``).

        Raises:
            UnknownTopicError: The topic does not exist and is not created on first use.
        """
        count = self._logs.topics.recent_partition_counts().get(topic)
        if count is None:  # created since, made by appends, or to be created by this first use
            count = self._logs.topics.get_or_create(topic).partitions
        with self._lock:
            self._partition_counts[topic] = count
        return count

    # -- queued: per partition, under the producer's append lock ------------------------------

    def enqueue(self, chunk: Chunk) -> None:
        """Partition a chunk's records and queue each partition's share (vectorised: no Python per record)."""
        table = chunk.take_table()
        explicit = chunk.take_explicit()
        topic = self.topic(chunk.topic)
        chunk.partition = topic.partitioner.assign_partitions(table, topic.num_partitions, explicit)
        sizes = record_sizes(table)
        order, bounds = group_rows(chunk.partition, topic.num_partitions)
        for p in np.flatnonzero(np.diff(bounds)).tolist():
            rows = order[bounds[p] : bounds[p + 1]]
            piece = _Piece(chunk, rows, table if len(rows) == table.num_rows else table.take(rows), sizes[rows])
            state = self.partition(topic, p)
            state.pieces.append(piece)
            state.pending_bytes += int(piece.sizes.sum())
            self._waiting[state] = None

    def due(self, *, force_all: bool, force_topic: str | None) -> list[tuple[PartitionState, bool]]:
        """The queues to append now, each with whether to keep its last batch back (it may fill up still):
        every one with ``force_all``, those of ``force_topic``, those whose oldest record has lingered
        enough, and those holding a full batch (keeping the last back). Once the caller has appended them,
        ``settle`` drops the emptied queues and sets the next linger deadline.
        """
        now = time.monotonic()
        due = []
        for state in self._waiting:
            lingered = now >= state.oldest + self._linger_s
            if force_all or lingered or state.topic == force_topic:
                due.append((state, False))
            elif state.pending_bytes >= self._full_batch_bytes(state.topic):
                due.append((state, True))
        return due

    def settle(self) -> None:
        """After the due queues were appended: the emptied ones stop waiting, and the next linger deadline is set."""
        for state in [state for state in self._waiting if not state.pieces]:
            del self._waiting[state]
        self._next_deadline = min((s.oldest + self._linger_s for s in self._waiting), default=float("inf"))

    def _full_batch_bytes(self, topic: str) -> int:
        """How many bytes of records fill a batch of the topic: ``batch.size``, or with compression as many
        as its estimated compressed size takes to reach it."""
        cfg = self.config
        return self._topics[topic].compression.batch_bytes(cfg.batch_size, cfg.max_request_size)

    def topic(self, name: str) -> TopicState:
        """A topic's state, its partition count read again once older than ``metadata.max.age.ms``."""
        now = time.monotonic()
        topic = self._topics.get(name)
        if topic is None or now - topic.refreshed >= self.config.metadata_max_age_ms / 1000:
            count = self.refresh_partition_count(name)
            if topic is None:
                topic = self._topics[name] = TopicState(name, count, now, Partitioner(self.config.partitioner))
            topic.num_partitions, topic.refreshed = count, now
        return topic

    def partition(self, topic: TopicState, partition: int) -> PartitionState:
        state = topic.partitions.get(partition)
        if state is None:
            state = topic.partitions[partition] = PartitionState(topic.name, partition)
        return state

    def reset_sequences(self) -> None:
        """Every partition back to sequence 0 (a new producer id or epoch)."""
        for topic in self._topics.values():
            for state in topic.partitions.values():
                state.next_sequence = 0

    def close_logs(self) -> None:
        """Close the partition logs the appends opened."""
        for topic in self._topics.values():
            for state in topic.partitions.values():
                if state.log is not None:
                    state.log.close()


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


def group_rows(partitions: np.ndarray, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """(row indexes ordered by partition, keeping their order within each; where each partition's rows
    start in it, plus the end): a stable radix sort for up to 32767 partitions."""
    narrow = partitions.astype(np.int16) if num_partitions <= np.iinfo(np.int16).max else partitions
    order = np.argsort(narrow, kind="stable")
    bounds = np.zeros(num_partitions + 1, np.int64)
    np.cumsum(np.bincount(partitions, minlength=num_partitions), out=bounds[1:])
    return order, bounds
