"""``Producer``: Kafka's ``KafkaProducer`` over a log directory, composing the parts of the package.

``send`` checks a record and hands it to the ``RecordAccumulator``; the ``Sender`` appends what the
accumulator holds, from its thread or at once (``flush``, ``close``, ``send_arrow``); the
``TransactionManager`` keeps the producer id, epoch and transaction state. See the package for how
records are acknowledged, idempotence and transactions.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from pysparklog.errors import InvalidConfigError, InvalidTimestampError, RecordTooLargeError
from pysparklog.partitioner import _record_sizes as record_sizes
from pysparklog.producer.accumulator import RecordAccumulator
from pysparklog.producer.config import ProducerConfig
from pysparklog.producer.future import RecordFuture
from pysparklog.producer.sender import Sender, Stage
from pysparklog.producer.transaction_manager import TransactionManager
from pysparklog.storage import AppendInfo
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.default_records import RECORD_BATCH_OVERHEAD
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from pysparklog.transactions import PreparedTransaction

_log = logging.getLogger(__name__)

# Kafka's DefaultRecord.MAX_RECORD_OVERHEAD: the most a record adds to its key and value.
_MAX_RECORD_OVERHEAD = 21
_BINARY = frozenset({bytes, bytearray, memoryview, type(None)})


class Producer:
    """Appends records to the topics of a log directory as Kafka's producer sends them to a broker.

    Thread-safe: any number of threads may send at once. Close it (or use it as a context manager)
    so that the records still waiting are appended.

    Args:
        log_dir: The log directory (a ``LogDirectory`` or its path). A topic that does not exist is created at its
            first use (``send``, ``send_arrow``, ``partitions_for``) with ``num.partitions`` of the log directory's
            ``server.properties``, as a broker creates it for a producer, unless ``auto.create.topics.enable=false``
            there (``TopicStore.get_or_create``).
        config: The settings (default: Kafka's defaults).
        stage: Where the batches go instead of the partitions' logs (an exactly-once sink task's staged objects);
            the producer then neither numbers them for idempotence nor joins a transaction.
    """

    def __init__(
        self,
        log_dir: LogDirectory | str | os.PathLike[str],
        config: ProducerConfig | None = None,
        *,
        stage: Stage | None = None,
    ) -> None:
        self.config = config or ProducerConfig()
        if stage is not None and (self.config.idempotent or self.config.transactional_id is not None):
            raise InvalidConfigError(
                "a producer whose batches are staged numbers no sequences and joins no transaction (the commit of "
                "its stage gives them offsets); accepted: enable_idempotence=False and no transactional_id"
            )
        logs = log_dir if isinstance(log_dir, LogDirectory) else LogDirectory(log_dir)
        cfg = self.config
        self._max_record_bytes = cfg.max_request_size - RECORD_BATCH_OVERHEAD - _MAX_RECORD_OVERHEAD
        self._accumulator = RecordAccumulator(logs, cfg)
        # Guards the appending side: topics, partition queues, sequences, the producer id, the transaction.
        append_lock = threading.Lock()
        self._transactions = TransactionManager(logs, cfg, self._accumulator, append_lock)
        self._sender = Sender(logs, cfg, self._accumulator, self._transactions, append_lock, stage)  # starts its thread

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
            topic: The topic, created if missing (see the class).
            value: The value (None: a tombstone).
            key: The key; a keyed record goes where Kafka's producer sends it (murmur2).
            headers: ``(key, value)`` pairs.
            partition: The partition, overriding the partitioner.
            timestamp_ms: The CreateTime in milliseconds (default: now).

        Returns:
            The future of the record's ``RecordMetadata``; the append's errors reach it.

        Raises:
            TypeError: A key, value or header that is not bytes.
            RecordTooLargeError: The key and value are larger than ``max.request.size`` allows.
            InvalidTimestampError: The timestamp is negative.
            UnknownTopicError: The topic does not exist and is not created (an internal topic's name, or
                ``auto.create.topics.enable=false``), or has no partition ``partition``.
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
            raise InvalidTimestampError(f"Invalid timestamp: {timestamp_ms!r}. Timestamp should always be non-negative")
        if headers is not None:
            headers = _checked_headers(headers)
        if self.config.transactional_id is not None:
            self._transactions.check_in_transaction()
        return self._accumulator.append(topic, value, key, headers, partition, timestamp_ms, size)

    def _too_large(self, size: int) -> RecordTooLargeError:
        return RecordTooLargeError(
            f"The message is {size + RECORD_BATCH_OVERHEAD + _MAX_RECORD_OVERHEAD} bytes when serialized which is "
            f"larger than {self.config.max_request_size}, which is the value of the max.request.size configuration."
        )

    def send_arrow(self, topic: str, data: pa.Table | pa.RecordBatch) -> dict[int, AppendInfo]:
        """Partition, encode and append a whole table at once; returns when everything is appended.

        Records sent with ``send`` before to this topic are appended first, so each partition keeps
        the order records were given in. Each partition's rows are appended in batches of
        ``batch.size``, the last one possibly smaller (nothing lingers).

        Args:
            topic: The topic, created if missing (see the class).
            data: ``value`` (binary or string, required), ``key``, ``timestamp`` (timestamp or int64
                milliseconds; null means now), ``headers`` (list of struct<key: string, value: binary>)
                and ``partition`` (integer: the record's partition, null to let the partitioner decide).

        Returns:
            Per partition that received records: the offsets of the first and last, how many, and
            the log append time (-1 for CreateTime). Other writers' records may lie between.

        Raises:
            InvalidRecordError: A column is missing or of a type that cannot be read.
            RecordTooLargeError: A record is larger than ``max.request.size`` allows.
            UnknownTopicError: The topic does not exist and is not created (see ``send``), or a ``partition`` is not
                one of its partitions.
            PySparkLogError: An append failed (nothing of that partition after it is appended; the
                partitions before it in partition order are), or the producer is closed.
            OSError: An append failed on the filesystem after its retries.
        """
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        self._transactions.check_in_transaction()
        self._check_sizes(table)
        explicit = table.column("partition") if "partition" in table.column_names else None
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        return self._sender.append_table(topic, table, explicit, deadline)

    def _check_sizes(self, table: pa.Table) -> None:
        """``max.request.size`` over a whole table: the largest key and value."""
        largest = int(record_sizes(table).max(initial=0))
        if largest > self._max_record_bytes:
            raise self._too_large(largest)

    def flush(self) -> None:
        """Append every record sent so far, now, and return once each has its outcome (Kafka's ``flush``)."""
        self._sender.flush()

    def close(self) -> None:
        """Append what is still waiting, stop the sender thread and close the partition logs; later sends
        are refused. Closing again does nothing."""
        self._sender.close()

    def partitions_for(self, topic: str) -> list[int]:
        """The partitions of a topic, read from the log directory now; a missing topic is created first, as
        Kafka's ``partitionsFor`` makes the broker create it through its metadata request.

        Raises:
            UnknownTopicError: The topic does not exist and is not created (see ``send``).
        """
        return list(range(self._accumulator.refresh_partition_count(topic)))

    # -- transactions -------------------------------------------------------------------------

    def init_transactions(self) -> None:
        """Start a session of ``transactional.id`` (Kafka's ``initTransactions``): a bumped epoch fences
        every older producer of the id, and a transaction one left open is aborted first.

        Raises:
            PySparkLogError: The producer has no ``transactional.id``, or is in a transaction.
        """
        self._transactions.init_transactions()

    def begin_transaction(self) -> None:
        """Begin a transaction (Kafka's ``beginTransaction``); records sent from now on belong to it."""
        self._transactions.begin()

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_id: str) -> None:
        """Commit a consumer group's offsets as part of the transaction (Kafka's ``sendOffsetsToTransaction`` with a
        group id): they become the group's committed offsets if the transaction commits, and never if it aborts, so a
        consume-transform-produce loop neither loses nor repeats input across a failure.

        Raises:
            PySparkLogError: The producer has no ``transactional.id``, or no transaction is open.
            ProducerFencedError: A newer producer of the id, or a timeout, aborted the transaction.
            InvalidConfigError, InvalidOffsetError, InvalidTopicError: An offset ``OffsetStore.commit`` refuses.
        """
        self._transactions.send_offsets(offsets, group_id)

    def prepare_transaction(self) -> PreparedTransaction:
        """Append everything sent and leave the transaction open for another process to end with
        ``TransactionCoordinator.end_transaction`` (Kafka's KIP-939 ``prepareTransaction``).

        Raises:
            PySparkLogError: An append of the transaction failed (abort it), or no transaction is open.
        """
        self._transactions.require("prepareTransaction")
        self.flush()
        return self._transactions.prepare()

    def commit_transaction(self) -> None:
        """Append everything sent, then commit (Kafka's ``commitTransaction``): COMMIT markers in every
        partition the transaction wrote, after which ``read_committed`` readers see its records.

        Raises:
            PySparkLogError: An append of the transaction failed (abort it), or no transaction is open.
            ProducerFencedError: A newer producer of the id, or a timeout, aborted the transaction.
        """
        self._transactions.require("commitTransaction")
        self.flush()
        self._transactions.commit()

    def abort_transaction(self) -> None:
        """Abort the transaction (Kafka's ``abortTransaction``): its records stay in the log, hidden from
        ``read_committed`` readers by ABORT markers. After a failed append the session starts again
        with a bumped epoch, as Kafka's producer bumps it (KIP-360), so sequences restart cleanly."""
        self._transactions.require("abortTransaction")
        try:
            self.flush()
        except Exception:  # the records' futures have their errors; the abort goes on
            _log.debug("flush before abort failed", exc_info=True)
        self._transactions.abort()


def _checked_headers(headers: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Headers as a list of (str, bytes-like or None) pairs."""
    checked = list(headers)
    for header in checked:
        if not (
            isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str) and type(header[1]) in _BINARY
        ):
            raise TypeError(f"a header must be a (str, bytes or None) pair, not {header!r}")
    return checked
