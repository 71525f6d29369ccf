"""Kafka's transaction coordinator on a log directory: transactional ids, epochs and end markers.

A Kafka transaction works like this (``TransactionCoordinator``, KIP-98):

- ``InitProducerId(transactional.id)`` maps the id to a producer id and bumps its epoch. The bump
  fences every older session of the id; a transaction the old session left open is aborted first.
- Before its first write to a partition in a transaction, the producer registers the partition
  (``AddPartitionsToTxn``), so the coordinator knows where the transaction's markers go.
- ``EndTxn(commit)`` is recorded durably as ``PrepareCommit`` or ``PrepareAbort``: that is the
  decision. Then a COMMIT or ABORT control record is written to every registered partition, and
  the state becomes ``CompleteCommit`` or ``CompleteAbort``.
- A transaction left open longer than its timeout is aborted by the coordinator, with a bumped
  epoch, so the stalled producer is fenced.
- A consume-transform-produce loop commits its input offsets in the transaction
  (``AddOffsetsToTxn``, ``TxnOffsetCommit``): they become the group's committed offsets only
  if the transaction commits.

Here the coordinator is whoever calls this module. Each transactional id's state is one small JSON
file in the log directory, ``pysparklog-txn.<quoted id>.json``, changed under its ``.lock`` and
replaced only if still the version read (``VersionedFile``), so a holder whose lease ran out while it
stalled fails instead of taking the state back. That file is ours: Kafka keeps the state in
``__transaction_state``. The producer ids, epochs, sequences and control records in the partitions
are Kafka's, so Kafka's tools and ``read_committed`` consumers understand the result.

A decision is durable before any marker is written, and the markers are fsynced before the state
says complete. After a crash, whoever touches the transactional id next rolls the decision forward:
``init_producer_id``, ``end_transaction`` or ``abort_expired``. Marker writes are idempotent in
effect: a second COMMIT for a transaction already closed closes nothing.

Kafka writes a transaction's offsets into ``__consumer_offsets`` as transactional records that its
group coordinator holds back until the marker. Here they are held in the transactional id's state
(``TransactionMetadata.offsets``) and committed to ``__consumer_offsets`` as ordinary commits
(``OffsetStore.commit``) after the COMMIT markers, before the state says complete, so that every
reader of committed offsets (the Python consumer, the Spark source, ``consumer-groups``) sees them
at commit and never sees an aborted transaction's. A crash after the decision commits them again on
roll-forward, with the same values.

``end_transaction`` may be called from another process than the producer's, with the producer id
and epoch the producer was given. That is the two-phase commit of Kafka's KIP-939 (``prepare`` in
one process, ``complete`` in another), and it is how Spark's driver commits the transactions its
tasks wrote.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from pysparklog._compat import StrEnum
from pysparklog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    ProducerFencedError,
    PySparkLogError,
    UnknownTopicError,
)
from pysparklog.offsets import OffsetStore, checked_offsets
from pysparklog.storage.io import VersionedFile, read_if_exists
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.producer_ids import TXN_STATE_PREFIX, allocate_producer_id
from pysparklog.storage.records.arrow_records import BatchSettings, encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
from pysparklog.structs import OffsetAndMetadata, TopicPartition

TXN_FILE_PREFIX = TXN_STATE_PREFIX
_STATE_SUFFIX = ".json"
_LOCK_SUFFIX = ".lock"
_VERSION = 1
#: Kafka bumps to a new producer id before an epoch would reach ``Short.MAX_VALUE``; an abort's
#: fencing bump needs one epoch more than the session it fences.
MAX_SESSION_EPOCH = 32765
#: The coordinator epoch written in end markers: there is one coordinator, which never moves.
COORDINATOR_EPOCH = 0

Clock = Callable[[], int]


class InvalidTxnStateError(PySparkLogError):
    """The transaction is not in a state that allows the request (Kafka's ``InvalidTxnStateException``)."""


class InvalidPidMappingError(PySparkLogError):
    """The transactional id has no producer session (Kafka's ``InvalidPidMappingException``): it was never
    initialised, or its state was forgotten."""


class TransactionState(StrEnum):
    """Kafka's ``TransactionState``, as its tools print it."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_PREPARED = {True: TransactionState.PREPARE_COMMIT, False: TransactionState.PREPARE_ABORT}
_COMPLETED = {True: TransactionState.COMPLETE_COMMIT, False: TransactionState.COMPLETE_ABORT}


@dataclass(frozen=True, slots=True)
class ProducerSession:
    """A producer id and the epoch one ``init_producer_id`` handed out (Kafka's ``ProducerIdAndEpoch``)."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """A transaction its producer flushed and left open for someone else to end with
    ``TransactionCoordinator.end_transaction`` (KIP-939's ``PreparedTxnState``); picklable."""

    transactional_id: str
    session: ProducerSession


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``).

    Attributes:
        transactional_id: The id.
        producer_id: Its producer id.
        producer_epoch: The current epoch; a request with an older one is fenced.
        state: Where its current (or last) transaction is.
        partitions: The partitions the current transaction has registered, sorted.
        timeout_ms: How long a transaction may stay open before it is aborted.
        start_ms: When the current transaction registered its first partition (-1: none open).
        update_ms: When the state last changed.
        prepared: The producer prepared the transaction for another process to end (KIP-939): it
            takes no more partitions and no timeout aborts it; only its end or a new session does.
        bumped_from: The epoch the producer's own request last bumped (KIP-360: InitProducerId with its session), so
            that the request sent again after its answer was lost gets the session it made, not a fencing; -1 when
            the epoch last moved otherwise (a new producer, a timeout).
        offsets: The consumer groups the current transaction commits offsets of (``AddOffsetsToTxn``), each
            with the offsets committed in it so far (``TxnOffsetCommit``): the groups' committed offsets once
            the transaction commits, dropped if it aborts.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TransactionState = TransactionState.EMPTY
    partitions: list[TopicPartition] = field(default_factory=list)
    timeout_ms: int = 60000
    start_ms: int = -1
    update_ms: int = -1
    prepared: bool = False
    bumped_from: int = -1
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)

    @property
    def session(self) -> ProducerSession:
        return ProducerSession(self.producer_id, self.producer_epoch)

    def encode(self) -> bytes:
        document = {
            "version": _VERSION,
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "state": self.state.value,
            "partitions": [[tp.topic, tp.partition] for tp in self.partitions],
            "timeout_ms": self.timeout_ms,
            "start_ms": self.start_ms,
            "update_ms": self.update_ms,
            "prepared": self.prepared,
            "bumped_from": self.bumped_from,
            "offsets": {
                group: [
                    [tp.topic, tp.partition, o.offset, o.leader_epoch, o.metadata] for tp, o in sorted(offsets.items())
                ]
                for group, offsets in self.offsets.items()
            },
        }
        return json.dumps(document, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> TransactionMetadata:
        try:
            document = json.loads(data)
            if document["version"] != _VERSION:
                raise ValueError(f"version {document['version']}, expected {_VERSION}")
            return cls(
                str(document["transactional_id"]),
                int(document["producer_id"]),
                int(document["producer_epoch"]),
                TransactionState(document["state"]),
                [TopicPartition(str(t), int(p)) for t, p in document["partitions"]],
                int(document["timeout_ms"]),
                int(document["start_ms"]),
                int(document["update_ms"]),
                bool(document["prepared"]),
                int(document.get("bumped_from", -1)),  # absent from the files of an older pysparklog
                {  # absent from the files of a pysparklog that had no transactional offsets: none pending
                    str(group): {
                        TopicPartition(str(t), int(p)): OffsetAndMetadata(int(o), str(m), int(e))
                        for t, p, o, e, m in offsets
                    }
                    for group, offsets in document.get("offsets", {}).items()
                },
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptRecordError(f"transaction state file {path} is not readable: {error}") from None


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def validate_transactional_id(transactional_id: str) -> None:
    """Kafka's ids are UTF-8 text: a command-line argument of bytes that are not UTF-8 is no id."""
    try:
        valid = isinstance(transactional_id, str) and bool(transactional_id.encode())
    except UnicodeEncodeError:
        valid = False
    if not valid:
        raise InvalidConfigError(
            f"transactional.id = {transactional_id!r} is invalid; accepted: a non-empty string of UTF-8"
        )


class TransactionCoordinator:
    """The transaction coordinator of a log directory, run by its clients under per-id file locks.

    Args:
        log_dir: The log directory whose partitions the transactions write.
        clock: Milliseconds of wall-clock time (tests pass their own).
    """

    def __init__(self, log_dir: LogDirectory, *, clock: Clock | None = None) -> None:
        self.log_dir = log_dir
        self._storage = log_dir.storage
        self._clock = clock or _wall_clock_ms
        # Partitions markers went to, kept open: a log opened anew rebuilds its producer state first.
        self._partition_logs: dict[TopicPartition, Log] = {}
        self._offset_store: OffsetStore | None = None  # made at the first commit of transactional offsets
        # Guards the two above: a server ends several transactions at once, each on a thread of its own.
        self._open_lock = threading.Lock()

    def close(self) -> None:
        """Close the partition logs markers were written to, and the committed offsets' store."""
        with self._open_lock:
            for log in self._partition_logs.values():
                log.close()
            self._partition_logs.clear()
            if self._offset_store is not None:
                self._offset_store.close()
                self._offset_store = None

    # -- the requests -------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: ProducerSession | None = None
    ) -> ProducerSession:
        """A new session of ``transactional_id`` (Kafka's ``InitProducerId``): its producer id with a
        bumped epoch, which fences every older session.

        A transaction the previous session left open is aborted first, and one whose decision was
        recorded but not finished is finished, so the new session starts clean.

        Args:
            transactional_id: The id.
            timeout_ms: How long this session's transactions may stay open (``transaction.timeout.ms``).
            expected: The session a producer that already has one bumps (KIP-360: a producer recovering
                from an error keeps its id and asks for the next epoch); None for a new producer.

        Raises:
            InvalidConfigError: An empty id or a timeout below 1.
            ProducerFencedError: ``expected`` is not the id's current session (nor the one its last bump came from,
                asked again): another producer has taken the id since.
        """
        validate_transactional_id(transactional_id)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise InvalidConfigError(f"transaction.timeout.ms = {timeout_ms!r} is invalid; accepted: an integer >= 1")
        with self._state(transactional_id) as (meta, save):
            now = self._clock()
            if meta is None:
                meta = TransactionMetadata(transactional_id, allocate_producer_id(self._storage), 0)
            else:
                if expected is not None:
                    if self._is_bump_retried(meta, expected):
                        return meta.session
                    self._check_session(transactional_id, meta, expected)
                self._settle(meta, save)
                if meta.producer_epoch >= MAX_SESSION_EPOCH:
                    meta.producer_id, meta.producer_epoch, meta.bumped_from = allocate_producer_id(self._storage), 0, -1
                else:
                    meta.producer_epoch += 1
                    meta.bumped_from = -1 if expected is None else expected.producer_epoch
            meta.state, meta.partitions, meta.start_ms, meta.prepared = TransactionState.EMPTY, [], -1, False
            meta.offsets, meta.timeout_ms, meta.update_ms = {}, timeout_ms, now
            save(meta)
            return meta.session

    @staticmethod
    def _is_bump_retried(meta: TransactionMetadata, expected: ProducerSession) -> bool:
        """Whether ``expected`` asks again for the bump it was answered (Kafka's retry of InitProducerId, recognised
        by ``lastProducerEpoch``): the session it bumped from, nothing changed since."""
        return (
            meta.bumped_from >= 0
            and expected.producer_id == meta.producer_id
            and expected.producer_epoch == meta.bumped_from
            and meta.state == TransactionState.EMPTY
        )

    def add_partitions(self, transactional_id: str, session: ProducerSession, partitions: list[TopicPartition]) -> None:
        """Register partitions in the session's transaction, opening it (Kafka's ``AddPartitionsToTxn``);
        the producer must call this before it writes to a partition in the transaction.

        Raises:
            ProducerFencedError: A newer session of the id exists, or the transaction was aborted
                (timed out) and the epoch bumped.
            InvalidTxnStateError: The transaction is being ended.
        """
        with self._state(transactional_id) as (meta, save):
            meta, began = self._open(transactional_id, meta, session, "no partition can be added")
            added = set(meta.partitions).union(partitions)
            if began or len(added) != len(meta.partitions):
                meta.partitions = sorted(added)
                meta.update_ms = self._clock()
                save(meta)

    def add_offsets(self, transactional_id: str, session: ProducerSession, group_id: str) -> None:
        """Let the session's transaction commit offsets of ``group_id``, opening it (Kafka's
        ``AddOffsetsToTxn``, which adds the group's ``__consumer_offsets`` partition to the transaction).

        Raises:
            ProducerFencedError: A newer session of the id exists.
            InvalidTxnStateError: The transaction is being ended.
        """
        with self._state(transactional_id) as (meta, save):
            meta, began = self._open(transactional_id, meta, session, "no group can be added")
            if began or group_id not in meta.offsets:
                meta.offsets.setdefault(group_id, {})
                meta.update_ms = self._clock()
                save(meta)

    def commit_offsets(
        self,
        transactional_id: str,
        session: ProducerSession,
        group_id: str,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> None:
        """Offsets of ``group_id`` that the session's transaction commits (Kafka's ``TxnOffsetCommit``): they
        become the group's committed offsets when the transaction commits; a later call's offset of a
        partition replaces an earlier one's.

        Raises:
            ProducerFencedError: A newer session of the id exists.
            InvalidTxnStateError: No transaction is open, or it has not added the group (``add_offsets``).
            InvalidConfigError, InvalidOffsetError, InvalidTopicError: An offset ``OffsetStore.commit`` would
                refuse (``checked_offsets``); nothing is taken.
        """
        with self._state(transactional_id) as (meta, save):
            meta = self._check_session(transactional_id, meta, session)
            if meta.state != TransactionState.ONGOING or group_id not in meta.offsets:
                raise InvalidTxnStateError(
                    f"transaction of {transactional_id!r} has not added group {group_id!r} (AddOffsetsToTxn): its "
                    "offsets cannot be committed in it"
                )
            meta.offsets[group_id].update(checked_offsets(group_id, offsets))
            meta.update_ms = self._clock()
            save(meta)

    def _open(
        self, transactional_id: str, meta: TransactionMetadata | None, session: ProducerSession, refused: str
    ) -> tuple[TransactionMetadata, bool]:
        """The session's transaction, and whether it was begun here (Ongoing, with nothing registered) rather
        than open already; a transaction begun here is not saved yet.

        Raises:
            ProducerFencedError: A newer session of the id exists.
            InvalidTxnStateError: The transaction is being ended (``refused`` says what is refused).
        """
        meta = self._check_session(transactional_id, meta, session)
        if meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT) or meta.prepared:
            state = "prepared" if meta.prepared else meta.state.value
            raise InvalidTxnStateError(f"transaction of {transactional_id!r} is {state}: {refused}")
        if meta.state == TransactionState.ONGOING:
            return meta, False
        meta.state, meta.partitions, meta.offsets, meta.start_ms = TransactionState.ONGOING, [], {}, self._clock()
        return meta, True

    def prepare_transaction(self, transactional_id: str, session: ProducerSession) -> None:
        """Mark the session's transaction prepared: its producer has appended everything and leaves the
        decision to another process (KIP-939). From now on it takes no partition and no timeout aborts it.

        Raises:
            ProducerFencedError: A newer session of the id exists.
            InvalidTxnStateError: The transaction is being ended or already ended.
        """
        with self._state(transactional_id) as (meta, save):
            meta = self._check_session(transactional_id, meta, session)
            if meta.state not in (TransactionState.EMPTY, TransactionState.ONGOING):
                raise InvalidTxnStateError(
                    f"cannot prepare the transaction of {transactional_id!r}: it is {meta.state.value}"
                )
            if not meta.prepared:
                meta.prepared, meta.update_ms = True, self._clock()
                save(meta)

    @contextmanager
    def hold(self, transactional_ids: list[str]) -> Iterator[dict[str, TransactionMetadata | None]]:
        """The states of several ids, locked together (in sorted order, so holders never deadlock): what
        they are cannot change until the block ends. Call no other method of a held id inside it."""
        with ExitStack() as stack:
            states = {}
            for transactional_id in sorted(set(transactional_ids)):
                meta, _save = stack.enter_context(self._state(transactional_id))
                states[transactional_id] = meta
            yield states

    def end_transaction(self, transactional_id: str, session: ProducerSession, *, commit: bool) -> None:
        """Commit or abort the session's transaction (Kafka's ``EndTxn``): record the decision, write
        the markers to every registered partition, fsync them, record completion.

        Repeating a completed request does nothing; a decision recorded by a call that crashed is
        finished. Ending a transaction that registered no partition completes at once.

        Raises:
            ProducerFencedError: A newer session of the id exists (for a commit this means the
                transaction was aborted: its writes are not visible to ``read_committed`` readers).
            InvalidTxnStateError: The opposite decision was already taken.
            InvalidPidMappingError: The id has no session.
        """
        with self._state(transactional_id) as (meta, save):
            meta = self._check_session(transactional_id, meta, session)
            if meta.state in (_COMPLETED[not commit], _PREPARED[not commit]):
                raise InvalidTxnStateError(
                    f"cannot {'commit' if commit else 'abort'} the transaction of {transactional_id!r}: it is "
                    f"{meta.state.value}"
                )
            if meta.state == _COMPLETED[commit]:
                return
            if meta.state != _PREPARED[commit]:
                meta.state, meta.update_ms = _PREPARED[commit], self._clock()
                save(meta)
            self._settle(meta, save)

    def now_ms(self) -> int:
        """The coordinator's clock."""
        return self._clock()

    def is_expired(self, meta: TransactionMetadata) -> bool:
        """Whether the transaction is open (not prepared) and older than its timeout."""
        open_for = self._clock() - meta.start_ms
        return meta.state == TransactionState.ONGOING and not meta.prepared and open_for > meta.timeout_ms

    def abort_expired(self) -> list[str]:
        """Abort every transaction open longer than its timeout, fencing its producer (Kafka's
        coordinator does this periodically); returns the transactional ids aborted."""
        aborted = []
        for transactional_id in self.transactional_ids():
            seen = self.describe(transactional_id)
            if seen is None or not self.is_expired(seen):
                continue  # decided on a plain read: only a candidate is locked (an object store's lease costs requests)
            with self._state(transactional_id) as (meta, save):
                if meta is not None and self.is_expired(meta):
                    self._abort_fencing(meta, save)
                    aborted.append(transactional_id)
        return aborted

    def abort(self, transactional_id: str) -> bool:
        """Abort the id's open or unfinished transaction, fencing its producer (what Kafka's
        ``kafka-transactions.sh abort`` does for a hanging transaction); False when none was open."""
        with self._state(transactional_id) as (meta, save):
            if meta is None:
                return False
            if meta.state == TransactionState.ONGOING:
                self._abort_fencing(meta, save)
                return True
            was_unfinished = meta.state in _PREPARED.values()
            self._settle(meta, save)
            return was_unfinished

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's state, or None for an id never initialised."""
        validate_transactional_id(transactional_id)
        path = self._paths(transactional_id)[0]
        return self._decode(transactional_id, read_if_exists(self._storage, path), path)

    @staticmethod
    def _decode(transactional_id: str, data: bytes | None, path: str) -> TransactionMetadata | None:
        """The id's state in ``data``, the content of its file ``path``; None when there is no file.

        Raises:
            CorruptRecordError: The file is unreadable, or holds another id's state.
        """
        if data is None:
            return None
        meta = TransactionMetadata.decode(data, path)
        if meta.transactional_id != transactional_id:
            # Another id's file under this name (copied or restored in the wrong place): using it would give
            # two ids one producer session, each taking the other's batches for retries of its own.
            raise CorruptRecordError(
                f"transaction state file {path} holds the state of transactional id {meta.transactional_id!r}, "
                f"not of {transactional_id!r}"
            )
        return meta

    def transactional_ids(self, prefix: str = "") -> list[str]:
        """The ids with a state file, sorted; only those starting with ``prefix`` when given."""
        ids = (
            unquote(n[len(TXN_FILE_PREFIX) : -len(_STATE_SUFFIX)])
            for n in self._storage.list(self._storage.join())
            if n.startswith(TXN_FILE_PREFIX) and n.endswith(_STATE_SUFFIX)
        )
        return sorted(i for i in ids if i.startswith(prefix))

    def forget(self, transactional_id: str) -> None:
        """Remove a completed id's state (a one-off id, as a batch write's, is never used again).

        Raises:
            InvalidTxnStateError: Its transaction is not complete.
        """
        with self._state(transactional_id) as (meta, _save):
            if meta is not None and meta.state not in (*_COMPLETED.values(), TransactionState.EMPTY):
                raise InvalidTxnStateError(f"transaction of {transactional_id!r} is {meta.state.value}")
            for path in self._paths(transactional_id):
                self._storage.delete(path)

    # -- internals ----------------------------------------------------------------------------

    def _paths(self, transactional_id: str) -> tuple[str, str]:
        base = TXN_FILE_PREFIX + quote(transactional_id, safe="")
        return self._storage.join(base + _STATE_SUFFIX), self._storage.join(base + _LOCK_SUFFIX)

    @contextmanager
    def _state(
        self, transactional_id: str
    ) -> Iterator[tuple[TransactionMetadata | None, Callable[[TransactionMetadata], None]]]:
        """The id's state under its lock, and the function that makes a change durable: only if the file is still
        the version read or last saved, so that a holder whose lock lapsed (a lease that ran out while it stalled)
        cannot take the state back behind what another holder recorded since (a decision, a bumped epoch).

        Raises:
            MetadataChangedError: From ``save``: another process changed the state meanwhile; nothing was saved.
        """
        validate_transactional_id(transactional_id)
        state_path, lock_path = self._paths(transactional_id)
        self._storage.make_directory(self._storage.join())
        lock = self._storage.lock(lock_path)
        try:
            with lock.exclusive():
                stored = VersionedFile.read(self._storage, state_path)

                def save(changed: TransactionMetadata) -> None:
                    stored.write(changed.encode())

                yield self._decode(transactional_id, stored.data, state_path), save
        finally:
            lock.close()

    @staticmethod
    def _check_session(
        transactional_id: str, meta: TransactionMetadata | None, session: ProducerSession
    ) -> TransactionMetadata:
        if meta is None:
            raise InvalidPidMappingError(
                f"transactional id {transactional_id!r} has no producer session: initialise it first"
            )
        if session != meta.session:
            raise ProducerFencedError(
                f"producer {session.producer_id} epoch {session.producer_epoch} of transactional id "
                f"{transactional_id!r} is fenced: the current session is producer {meta.producer_id} epoch "
                f"{meta.producer_epoch}"
            )
        return meta

    def _settle(self, meta: TransactionMetadata, save: Callable[[TransactionMetadata], None]) -> None:
        """Leave no transaction behind: finish a recorded decision, abort an open transaction."""
        if meta.state == TransactionState.ONGOING:
            self._abort_fencing(meta, save)
        elif meta.state in _PREPARED.values():
            commit = meta.state == TransactionState.PREPARE_COMMIT
            self._write_markers(meta, commit)
            if commit:
                self._commit_offsets(meta)
            meta.state, meta.update_ms, meta.prepared = _COMPLETED[commit], self._clock(), False
            save(meta)

    def _abort_fencing(self, meta: TransactionMetadata, save: Callable[[TransactionMetadata], None]) -> None:
        """Abort an open transaction with the epoch bumped, as Kafka's coordinator aborts one it
        fences: the markers carry the new epoch, so the old session cannot append after them."""
        meta.producer_epoch, meta.bumped_from = meta.producer_epoch + 1, -1
        meta.state, meta.update_ms = TransactionState.PREPARE_ABORT, self._clock()
        save(meta)
        self._settle(meta, save)

    def _commit_offsets(self, meta: TransactionMetadata) -> None:
        """The committed transaction's offsets, as each group's commit (one batch per group), once its markers
        are written: as a broker's group coordinator makes them visible when the COMMIT marker reaches the
        group's ``__consumer_offsets`` partition. Unfenced by the groups' generations, which ``TxnOffsetCommit``
        was checked against when it was made: the decision to commit them is taken."""
        pending = {group: offsets for group, offsets in meta.offsets.items() if offsets}
        if not pending:
            return
        with self._open_lock:
            if self._offset_store is None:
                self._offset_store = OffsetStore(self.log_dir)
            store = self._offset_store
        for group, offsets in pending.items():
            store.commit(group, offsets)

    def _write_markers(self, meta: TransactionMetadata, commit: bool) -> None:
        """A COMMIT or ABORT marker in each registered partition, then fsync, before completion is recorded."""
        key, value = end_txn_marker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, COORDINATOR_EPOCH)
        settings = BatchSettings(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, transactional=True)
        marker = encode_control_batch(key, value, settings)
        for tp in meta.partitions:
            with self._open_lock:
                log = self._partition_logs.get(tp)
                if log is None:
                    try:
                        log = self._partition_logs[tp] = self.log_dir.partition(tp.topic, tp.partition)
                    except UnknownTopicError:  # deleted since: nothing left to close there
                        continue
            try:
                log.append(marker)
                log.flush()
            except BaseException:
                with self._open_lock:
                    if self._partition_logs.get(tp) is log:
                        del self._partition_logs[tp]
                log.close()
                raise
