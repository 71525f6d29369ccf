"""Spark's writes as Kafka transactions: the sink's protocol, without Spark.

Spark's Kafka sink is at-least-once: a task's records are visible as soon as they are sent, so a
retried task or a re-run micro-batch writes them again. This sink keeps every write in a Kafka
transaction and decides on all of a micro-batch's transactions at once, in the driver:

1. Each task takes a session of its transactional id ``<sink id>-<task>`` (the sink id is
   ``pysparklog-sink-<query id>``: stable across restarts, as Spark keeps the query id in the
   checkpoint). The new epoch fences any earlier attempt of the task, and a transaction one left
   open is aborted. The task writes its rows through the producer (partitioner, batching,
   compression, sequences), then prepares the transaction (KIP-939) and reports it to the driver.
2. The driver's ``commit(batch)`` locks the reported transactions, checks that each is still
   prepared under the reported session, and records the decision (``pysparklog-sink.<sink id>.json``:
   the query, the batch and its transactions). The record is the commit point.
3. Then the driver commits each transaction: COMMIT markers in every partition it wrote, fsynced.
4. ``abort(batch)`` aborts the reported transactions. A failed task's transaction is aborted by the
   next attempt of the task, or by the timeout (``transaction.timeout.ms``).

After a crash (driver killed with -9, an executor lost, a crash inside ``commit``), Spark runs the
micro-batch again:

- If its decision was not recorded, the tasks' new sessions abort what the first run wrote, and the
  run writes it again.
- If its decision was recorded, the tasks write nothing, and the driver's ``commit`` finishes the
  recorded decision. Committing is idempotent.

Either way every row is committed once, and a ``read_committed`` reader never sees rows of a batch
Spark did not commit. A batch write (``df.write``) runs the same protocol with a one-off sink id, so
it appears whole or not at all.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import quote

import pyarrow as pa

from pysparklog.errors import CorruptRecordError, SinkCommitError, UnknownTopicError
from pysparklog.producer import Producer
from pysparklog.spark.sink_options import DeliveryGuarantee, SinkColumns, SinkOptions, producer_tables
from pysparklog.spark.storage_options import open_logs
from pysparklog.storage.io import FileSystemStorage, VersionedFile, read_if_exists
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.objects.staged import StagedObject, StagedWrites, commit_staged, delete_staged
from pysparklog.storage.objects.topic_commit import SinkMark
from pysparklog.transactions import PreparedTransaction, ProducerSession, TransactionCoordinator

_log = logging.getLogger(__name__)

SINK_FILE_PREFIX = "pysparklog-sink."
_VERSION = 1
#: Rows a task gathers per topic before handing them to the producer: Spark's Arrow batches hold
#: 10 000 rows by default, and fewer, larger appends cost less per record.
_GATHER_BYTES = 8 * 1024 * 1024


_coordinators: dict[str, TransactionCoordinator] = {}


def coordinator_for(logs: LogDirectory) -> TransactionCoordinator:
    """One coordinator per log directory and process: Spark runs the sink's commits in a reused Python
    worker, where the partition logs the coordinator keeps open spare each commit a rebuild of their
    producer state. It works on the storage of the first ``logs`` given for the directory's location."""
    coordinator = _coordinators.get(logs.path)
    if coordinator is None:
        coordinator = _coordinators.setdefault(logs.path, TransactionCoordinator(logs))
    return coordinator


@dataclass(frozen=True, slots=True)
class TaskWrite:
    """What a task reports to the driver: picklable, carried in Spark's ``WriterCommitMessage``.

    Attributes:
        sink_id: The sink (its transactional ids start with it).
        query_id: The streaming query's id (None for a batch write).
        batch_id: The micro-batch (0 for a batch write).
        task: The task's partition id.
        records: Rows written.
        transaction: The prepared transaction (None: at-least-once, staged, or the batch was already committed).
        staged: The staged objects (``stages``): one per topic the task wrote.
    """

    sink_id: str
    query_id: str | None
    batch_id: int
    task: int
    records: int
    transaction: PreparedTransaction | None
    staged: tuple[StagedObject, ...] = ()


def streaming_sink_id(options: SinkOptions, query_id: str) -> str:
    """The sink id of a streaming query: the ``kafka.transactional.id`` prefix, or one from the query id."""
    return options.transactional_id_prefix or f"pysparklog-sink-{query_id}"


def batch_sink_id(options: SinkOptions) -> str:
    """A batch write's sink id: unique, as each write is a new transaction set that is never re-run."""
    return f"{options.transactional_id_prefix or 'pysparklog-write'}-{uuid.uuid4()}"


def task_transactional_id(sink_id: str, task: int) -> str:
    return f"{sink_id}-{task}"


def write_task(
    options: SinkOptions,
    columns: SinkColumns,
    batches: Iterable[pa.RecordBatch],
    *,
    sink_id: str,
    query_id: str | None,
    batch_id: int,
    task: int,
) -> TaskWrite:
    """Write one task's rows: in a prepared transaction (exactly-once), or idempotently appended.

    Raises:
        UnknownTopicError: A target topic does not exist and ``autoCreateTopics`` is false.
        PySparkLogError: A null topic, an append that failed, a fenced session.
    """
    logs = open_logs(options.path, options.storage_settings)
    if stages(options, logs):
        return _stage_task(
            options, columns, batches, logs, sink_id=sink_id, query_id=query_id, batch_id=batch_id, task=task
        )
    exactly_once = options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    if exactly_once and SinkCommitLog(logs, sink_id).decided(query_id, batch_id):
        for _ in batches:  # already committed by an earlier run: nothing to write again
            pass
        return TaskWrite(sink_id, query_id, batch_id, task, 0, None)
    config = options.producer
    if exactly_once:
        config = replace(
            config,
            transactional_id=task_transactional_id(sink_id, task),
            transaction_timeout_ms=options.transaction_timeout_ms,
        )
    with Producer(logs, config) as producer:
        if exactly_once:
            producer.init_transactions()
            producer.begin_transaction()
        records = _send_rows(producer, _TopicCheck(logs, options.auto_create_topics), options, columns, batches)
        prepared = producer.prepare_transaction() if exactly_once else None
    return TaskWrite(sink_id, query_id, batch_id, task, records, prepared)


def stages(options: SinkOptions, logs: LogDirectory) -> bool:
    """Whether an exactly-once write stages its tasks' batches and commits each micro-batch with one commit of the
    topic's chain (``storage.objects.staged``) rather than in a transaction per task: on an object store, writing
    one topic (the ``topic`` option). A micro-batch of several topics would be a commit of each chain, which only
    transactions make one."""
    return (
        options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
        and not isinstance(logs.storage, FileSystemStorage)
        and options.topic is not None
    )


def _stage_task(
    options: SinkOptions,
    columns: SinkColumns,
    batches: Iterable[pa.RecordBatch],
    logs: LogDirectory,
    *,
    sink_id: str,
    query_id: str | None,
    batch_id: int,
    task: int,
) -> TaskWrite:
    """Write one task's rows as a staged object (one PUT), which the driver's commit makes visible with the rest of
    the micro-batch. A re-run stages again; the driver then finds the micro-batch committed and deletes them."""
    stage = StagedWrites(logs)
    config = replace(options.producer, enable_idempotence=False, transactional_id=None)
    with Producer(logs, config, stage=stage) as producer:
        records = _send_rows(producer, _TopicCheck(logs, options.auto_create_topics), options, columns, batches)
    staged = stage.put(f"{sink_id}-{batch_id}-{task}")
    return TaskWrite(sink_id, query_id, batch_id, task, records, None, tuple(staged))


def commit_staged_write(logs: LogDirectory, query_id: str | None, batch_id: int, writes: list[TaskWrite]) -> bool:
    """The driver's commit of a staged micro-batch: one commit of the topic's chain recording it (a streaming
    query's; a one-off write records nothing); False when the chain records it committed already (a re-run).

    Raises:
        StorageConflictError: Other writers took every number the commit tried.
    """
    staged = [obj for write in writes for obj in write.staged]
    if not staged:
        return True  # no rows: nothing to make visible
    mark = SinkMark(writes[0].sink_id, query_id, batch_id) if query_id is not None else None
    return commit_staged(logs, staged, mark)


def abort_staged_write(logs: LogDirectory, writes: list[TaskWrite]) -> None:
    """Delete what the tasks of an aborted micro-batch staged (a task that failed before reporting leaves its
    object, which no commit refers to)."""
    delete_staged(logs.storage, [obj for write in writes for obj in write.staged])


def _send_rows(
    producer: Producer,
    topics: _TopicCheck,
    options: SinkOptions,
    columns: SinkColumns,
    batches: Iterable[pa.RecordBatch],
) -> int:
    """Send a task's rows, gathered per topic into appends of about ``_GATHER_BYTES``; returns how many."""
    records = 0
    gathered: dict[str, list[pa.Table]] = {}
    sizes: dict[str, int] = {}
    for batch in batches:
        for topic, table in producer_tables(batch, columns, options.topic):
            gathered.setdefault(topic, []).append(table)
            sizes[topic] = sizes.get(topic, 0) + table.nbytes
            if sizes[topic] >= _GATHER_BYTES:
                records += _send(producer, topics, topic, gathered.pop(topic))
                del sizes[topic]
    for topic, tables in gathered.items():
        records += _send(producer, topics, topic, tables)
    return records


def _send(producer: Producer, topics: _TopicCheck, topic: str, tables: list[pa.Table]) -> int:
    topics.ensure(topic)
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    producer.send_arrow(topic, table)
    return int(table.num_rows)


class _TopicCheck:
    """Gets each target topic once per task, creating a missing one through ``ensure_topic``."""

    def __init__(self, logs: LogDirectory, auto_create: bool | None) -> None:
        self._logs = logs
        self._auto_create = auto_create
        self._known: set[str] = set()

    def ensure(self, topic: str) -> None:
        if topic in self._known:
            return
        if topic not in self._logs.topics.recent_partition_counts():  # read within a few seconds: no request
            ensure_topic(self._logs, topic, self._auto_create)
        self._known.add(topic)


def ensure_topic(logs: LogDirectory, topic: str, auto_create: bool | None, *, validate_only: bool = False) -> None:
    """Get a target topic, creating it when missing as ``TopicStore.get_or_create`` does for every client.

    ``autoCreateTopics`` (``auto_create``) decides when it is given: ``true`` creates the topic even where
    ``server.properties`` sets ``auto.create.topics.enable=false`` (the query's author asked for it, as a
    ``topics --create`` would), ``false`` never creates. Left unset, the log directory's
    ``auto.create.topics.enable`` decides, as the broker's does for Spark's Kafka sink, which has no option of
    its own.

    Args:
        logs: The log directory.
        topic: The topic.
        auto_create: ``autoCreateTopics``; None when unset.
        validate_only: Create nothing: only fail now if the topic is missing and would not be created.

    Raises:
        UnknownTopicError: The topic is missing and not created; the message names the option or the setting
            that refused it.
    """
    try:
        logs.topics.get_or_create(topic, auto_create=auto_create, validate_only=validate_only)
    except UnknownTopicError as error:
        if auto_create is not False:
            raise
        raise UnknownTopicError(
            f"topic {topic!r} does not exist in {logs.path} and autoCreateTopics is false; create it "
            "(pysparklog topics --create) or set autoCreateTopics to true"
        ) from error


@dataclass(frozen=True, slots=True)
class SinkDecision:
    """The last micro-batch a sink decided to commit, and its transactions."""

    sink_id: str
    query_id: str | None
    batch_id: int
    transactions: tuple[PreparedTransaction, ...]
    complete: bool

    def encode(self) -> bytes:
        document = {
            "version": _VERSION,
            "sink_id": self.sink_id,
            "query_id": self.query_id,
            "batch_id": self.batch_id,
            "transactions": [
                [t.transactional_id, t.session.producer_id, t.session.producer_epoch] for t in self.transactions
            ],
            "complete": self.complete,
        }
        return json.dumps(document, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> SinkDecision:
        try:
            document = json.loads(data)
            if document["version"] != _VERSION:
                raise ValueError(f"version {document['version']}, expected {_VERSION}")
            transactions = tuple(
                PreparedTransaction(str(tid), ProducerSession(int(pid), int(epoch)))
                for tid, pid, epoch in document["transactions"]
            )
            query_id = document["query_id"]
            return cls(
                str(document["sink_id"]),
                None if query_id is None else str(query_id),
                int(document["batch_id"]),
                transactions,
                bool(document["complete"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptRecordError(f"sink commit file {path} is not readable: {error}") from None


class SinkCommitLog:
    """The driver's side of the protocol: one sink's decisions, in the log directory.

    Args:
        logs: The log directory.
        sink_id: The sink.
    """

    def __init__(self, logs: LogDirectory, sink_id: str) -> None:
        self._logs = logs
        self.sink_id = sink_id
        self._storage = logs.storage
        base = SINK_FILE_PREFIX + quote(sink_id, safe="")
        self.path = self._storage.join(base + ".json")
        self._lock_path = self._storage.join(base + ".lock")

    def read(self) -> SinkDecision | None:
        return self._decode(read_if_exists(self._storage, self.path))

    def _decode(self, data: bytes | None) -> SinkDecision | None:
        return None if data is None else SinkDecision.decode(data, self.path)

    def decided(self, query_id: str | None, batch_id: int) -> bool:
        """Whether the query's micro-batch ``batch_id`` was decided (so its tasks must not write again)."""
        decision = self.read()
        return decision is not None and decision.query_id == query_id and decision.batch_id >= batch_id

    def commit(self, query_id: str | None, batch_id: int, writes: list[TaskWrite]) -> None:
        """Commit a micro-batch's transactions: record the decision, then end each transaction.

        The decision file is written only if still the version read under the lock (``VersionedFile``): a
        driver that stalled past its lease and resumed cannot record an older batch over a newer decision.

        Raises:
            SinkCommitError: A transaction is no longer the one its task prepared (a later attempt of
                the task fenced it); nothing of the batch is committed.
            MetadataChangedError: Another process recorded a decision meanwhile (this one's lease lapsed);
                this one recorded none.
        """
        coordinator = coordinator_for(self._logs)
        lock = self._storage.lock(self._lock_path)
        try:
            with lock.exclusive():
                stored = VersionedFile.read(self._storage, self.path)
                decision = self._decode(stored.data)
                same_query = decision is not None and decision.query_id == query_id
                if decision is not None and same_query and decision.batch_id > batch_id:
                    raise SinkCommitError(
                        f"sink {self.sink_id}: batch {batch_id} is older than the decided batch {decision.batch_id}"
                    )
                if decision is not None and not decision.complete:
                    self._finish(coordinator, decision, stored)  # an earlier run's decision first
                if decision is None or not same_query or decision.batch_id < batch_id:
                    decision = self._decide(coordinator, query_id, batch_id, writes, stored)
                    self._finish(coordinator, decision, stored)
                self._abort_orphans(coordinator, decision)
        finally:
            lock.close()
        coordinator.abort_expired()

    def _abort_orphans(self, coordinator: TransactionCoordinator, decision: SinkDecision) -> None:
        """Abort the sink's transactions left open by a run that died: a re-run of a batch may plan fewer
        tasks, so no new session of theirs would ever abort them, and prepared ones never time out. Spark
        runs a query's micro-batches one at a time, so once a batch is committed no task of the query is
        writing and every other open transaction of the sink is an orphan."""
        decided = {txn.transactional_id for txn in decision.transactions}
        for transactional_id in self._task_ids(coordinator):
            if transactional_id not in decided and coordinator.abort(transactional_id):
                _log.info("sink %s: aborted the transaction %s a failed run left open", self.sink_id, transactional_id)

    def _decide(
        self,
        coordinator: TransactionCoordinator,
        query_id: str | None,
        batch_id: int,
        writes: list[TaskWrite],
        stored: VersionedFile,
    ) -> SinkDecision:
        """Record the decision in ``stored``, having checked under their locks that every transaction is still
        prepared."""
        transactions = tuple(w.transaction for w in writes if w.transaction is not None)
        with coordinator.hold([t.transactional_id for t in transactions]) as states:
            for txn in transactions:
                meta = states[txn.transactional_id]
                if meta is None or meta.session != txn.session or not meta.prepared:
                    raise SinkCommitError(
                        f"sink {self.sink_id}: batch {batch_id} cannot be committed: the transaction of "
                        f"{txn.transactional_id} (producer {txn.session.producer_id} epoch "
                        f"{txn.session.producer_epoch}) was fenced by another attempt of its task; nothing of the "
                        "batch is committed, and it is written again when the query restarts"
                    )
            decision = SinkDecision(self.sink_id, query_id, batch_id, transactions, complete=False)
            stored.write(decision.encode())
        return decision

    def _finish(self, coordinator: TransactionCoordinator, decision: SinkDecision, stored: VersionedFile) -> None:
        """Commit the decision's transactions, then record it complete in ``stored``."""
        for txn in decision.transactions:
            coordinator.end_transaction(txn.transactional_id, txn.session, commit=True)
        stored.write(replace(decision, complete=True).encode())

    def abort(self) -> list[str]:
        """Abort every open transaction of the sink's tasks (Spark aborts a write that failed): those
        the tasks reported and those of tasks that failed before reporting, whose producers are fenced.
        A decided transaction is finished instead. Returns the transactional ids aborted."""
        coordinator = coordinator_for(self._logs)
        return [tid for tid in self._task_ids(coordinator) if coordinator.abort(tid)]

    def _task_ids(self, coordinator: TransactionCoordinator) -> list[str]:
        """The transactional ids of the sink's tasks (``<sink id>-<task>``)."""
        task_id = re.compile(re.escape(self.sink_id) + r"-[0-9]+")
        return [t for t in coordinator.transactional_ids(prefix=self.sink_id + "-") if task_id.fullmatch(t)]

    def forget(self) -> None:
        """Remove a finished one-off sink's files (a batch write's): its ids are never used again."""
        coordinator = coordinator_for(self._logs)
        for transactional_id in self._task_ids(coordinator):
            coordinator.forget(transactional_id)
        for path in (self.path, self._lock_path):
            self._storage.delete(path)
