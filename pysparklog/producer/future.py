"""What ``send`` hands back: the future of a record's ``RecordMetadata``, and the chunk it reads from.

A ``Chunk`` gathers the records ``send`` queued for one topic between two drains of the sender; once
the sender takes it, the records' partitions, offsets and timestamps live in arrays of the chunk,
and a ``RecordFuture`` is an index into them, not a callback per record (Kafka's
``FutureRecordMetadata`` over its ``ProduceRequestResult``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pysparklog.storage import AppendInfo
from pysparklog.storage.records.arrow_records import HEADER_TYPE

_log = logging.getLogger(__name__)


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


class Chunk:
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


def _run_callback(callback: Callback, chunk: Chunk, index: int) -> None:
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

    def __init__(self, chunk: Chunk, index: int) -> None:
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


def publish(chunks: dict[Chunk, None]) -> None:
    """``Chunk.publish`` of each chunk whose records got outcomes, in the order they got them."""
    for chunk in chunks:
        chunk.publish()
