"""Who the producer's batches say they are from, and its transaction (Kafka's ``TransactionManager``).

An idempotent producer's batches carry a producer id, taken from the log directory at the first
append (``storage.producer_ids``), and epoch 0; after a failed append the id is dropped and every
partition starts again at sequence 0 under a new one. A transactional producer (``transactional.id``)
takes its id and a bumped epoch from the ``TransactionCoordinator`` instead, and walks Kafka's
transaction states: ``init_transactions``, ``begin``, partitions registered before their first
append, then ``prepare``, ``commit`` or ``abort``.

Everything here changes under the producer's append lock, which the sender holds while it appends:
the operations of the producer's API take it themselves, the sender's calls run under it.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping

from pysparklog.errors import PySparkLogError
from pysparklog.producer.accumulator import RecordAccumulator
from pysparklog.producer.config import ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.producer_ids import allocate_producer_id
from pysparklog.storage.records.default_records import NO_PRODUCER_ID
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from pysparklog.transactions import PreparedTransaction, ProducerSession, TransactionCoordinator


class _TxnState(enum.Enum):
    """Where a transactional producer is (Kafka's ``TransactionManager.State``, the states used here)."""

    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED = "PREPARED_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"


class TransactionManager:
    """The producer id and epoch of the producer's batches, and its transaction state.

    Args:
        logs: The log directory: where producer ids and transactions are kept.
        config: The producer's settings (``enable.idempotence``, ``transactional.id``...).
        accumulator: Whose partitions restart at sequence 0 with a new producer id or epoch.
        append_lock: The producer's append lock (see the module).
    """

    def __init__(
        self, logs: LogDirectory, config: ProducerConfig, accumulator: RecordAccumulator, append_lock: threading.Lock
    ) -> None:
        self._logs = logs
        self._config = config
        self._accumulator = accumulator
        self._append_lock = append_lock
        self._producer_id = NO_PRODUCER_ID  # allocated at the first idempotent append
        self._producer_epoch = 0
        # A transactional producer's state (with ``transactional.id``).
        self._txn_state = _TxnState.UNINITIALIZED
        self._txn_partitions: set[TopicPartition] = set()
        self._coordinator = TransactionCoordinator(logs) if config.transactional_id is not None else None

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def transactional(self) -> bool:
        """Whether the producer has a ``transactional.id``: its batches are transactional."""
        return self._coordinator is not None

    # -- the producer's transaction API ---------------------------------------------------------

    def require(self, operation: str) -> TransactionCoordinator:
        """The coordinator, for a transactional producer's ``operation``.

        Raises:
            PySparkLogError: The producer has no ``transactional.id``.
        """
        if self._coordinator is None:
            raise PySparkLogError(f"Cannot use {operation} without setting the transactional.id")
        return self._coordinator

    def check_in_transaction(self) -> None:
        """Refuse records outside a transaction (nothing for a producer without ``transactional.id``).

        Raises:
            PySparkLogError: No transaction is open.
        """
        if self._coordinator is not None and self._txn_state is not _TxnState.IN_TRANSACTION:
            raise self._wrong_state("send")

    def init_transactions(self) -> None:
        """A new session of ``transactional.id`` (``Producer.init_transactions``)."""
        coordinator = self.require("initTransactions")
        with self._append_lock:
            if self._txn_state not in (_TxnState.UNINITIALIZED, _TxnState.READY):
                raise self._wrong_state("initTransactions")
            self._start_session(coordinator)

    def begin(self) -> None:
        """``Producer.begin_transaction``."""
        self.require("beginTransaction")
        with self._append_lock:
            if self._txn_state is not _TxnState.READY:
                raise self._wrong_state("beginTransaction")
            self._txn_state, self._txn_partitions = _TxnState.IN_TRANSACTION, set()

    def send_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_id: str) -> None:
        """Commit a group's offsets with the transaction (``Producer.send_offsets_to_transaction``): Kafka's
        AddOffsetsToTxn, then TxnOffsetCommit, to the coordinator, which commits them when the transaction does."""
        coordinator = self.require("sendOffsetsToTransaction")
        with self._append_lock:
            if self._txn_state is not _TxnState.IN_TRANSACTION:
                raise self._wrong_state("sendOffsetsToTransaction")
            assert self._config.transactional_id is not None
            coordinator.add_offsets(self._config.transactional_id, self._session(), group_id)
            coordinator.commit_offsets(self._config.transactional_id, self._session(), group_id, dict(offsets))

    def prepare(self) -> PreparedTransaction:
        """Leave the transaction to another process to end (``Producer.prepare_transaction``, once flushed)."""
        coordinator = self.require("prepareTransaction")
        with self._append_lock:
            self._check_committable("prepareTransaction")
            assert self._config.transactional_id is not None
            coordinator.prepare_transaction(self._config.transactional_id, self._session())
            self._txn_state = _TxnState.PREPARED
            return PreparedTransaction(self._config.transactional_id, self._session())

    def commit(self) -> None:
        """COMMIT markers (``Producer.commit_transaction``, once flushed)."""
        coordinator = self.require("commitTransaction")
        with self._append_lock:
            if self._txn_state is not _TxnState.PREPARED:
                self._check_committable("commitTransaction")
            assert self._config.transactional_id is not None
            coordinator.end_transaction(self._config.transactional_id, self._session(), commit=True)
            self._txn_state = _TxnState.READY

    def abort(self) -> None:
        """ABORT markers, or after a failed append a new session (``Producer.abort_transaction``, once flushed)."""
        coordinator = self.require("abortTransaction")
        with self._append_lock:
            if self._txn_state not in (_TxnState.IN_TRANSACTION, _TxnState.PREPARED, _TxnState.ABORTABLE_ERROR):
                raise self._wrong_state("abortTransaction")
            assert self._config.transactional_id is not None
            if self._txn_state is _TxnState.ABORTABLE_ERROR:
                self._start_session(coordinator)  # the new epoch aborts the transaction and fences the old one
            else:
                coordinator.end_transaction(self._config.transactional_id, self._session(), commit=False)
                self._txn_state = _TxnState.READY

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
        """A new session from the coordinator, every partition at sequence 0 (under the append lock)."""
        assert self._config.transactional_id is not None
        session = coordinator.init_producer_id(self._config.transactional_id, self._config.transaction_timeout_ms)
        self._producer_id, self._producer_epoch = session.producer_id, session.producer_epoch
        self._accumulator.reset_sequences()
        self._txn_state, self._txn_partitions = _TxnState.READY, set()

    # -- the sender's calls, under the append lock ------------------------------------------------

    def ensure_producer_id(self) -> None:
        """An idempotent producer's id, allocated from the log directory before its first append."""
        if self._config.idempotent and self._producer_id == NO_PRODUCER_ID:
            self._producer_id = allocate_producer_id(self._logs.storage)

    def register(self, partitions: list[TopicPartition]) -> None:
        """Register the transaction's new partitions with the coordinator before anything is appended
        to them (Kafka's ``AddPartitionsToTxn``); nothing without a transaction."""
        if self._coordinator is None:
            return
        new = [tp for tp in partitions if tp not in self._txn_partitions]
        if new:
            if self._txn_state is not _TxnState.IN_TRANSACTION:
                raise self._wrong_state("send")
            assert self._config.transactional_id is not None
            self._coordinator.add_partitions(self._config.transactional_id, self._session(), new)
            self._txn_partitions.update(new)

    def reset_producer_id(self) -> None:
        """After a failed append the log may or may not hold its batches: start afresh with a new producer
        id (allocated at the next append), every partition at sequence 0."""
        if not self._config.idempotent:
            return
        if self._coordinator is not None:  # the session stays; the transaction can only be aborted
            self._txn_state = _TxnState.ABORTABLE_ERROR
            return
        self._producer_id = NO_PRODUCER_ID
        self._accumulator.reset_sequences()
