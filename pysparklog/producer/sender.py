"""The appending side: the sender thread, drains, encoding, appends and their retries (Kafka's ``Sender``).

The sender thread waits until the accumulator has something due, takes its chunks, queues them per
partition and appends every queue that is due; ``flush``, ``close`` and ``send_arrow`` do the same
in the caller's thread. All of it runs under the producer's append lock, one append at a time. A
queue's rows are encoded at once (``encode_arrow``: batches of ``batch.size``, numbered from the
partition's next sequence) and appended in groups of at most ``max.request.size`` bytes; an append
that fails with an ``OSError`` is retried with the same batches, which the log recognises when it
has them already. The outcome of each append reaches its records' chunks, whose futures and
callbacks are then woken outside the lock.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

from pysparklog.producer.accumulator import PartitionState, RecordAccumulator, TopicState, group_rows
from pysparklog.producer.config import ProducerConfig
from pysparklog.producer.future import Chunk, publish
from pysparklog.producer.transaction_manager import TransactionManager
from pysparklog.storage import AppendInfo
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.producer_state import next_sequence
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches, encode_arrow
from pysparklog.storage.records.default_records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
)
from pysparklog.structs import TopicPartition

_log = logging.getLogger(__name__)

# Rows the bulk path gathers at a time (for every partition among them at once): memory stays bounded.
_BULK_ROWS = 1 << 16
_client_ids = itertools.count(1)


class Stage(Protocol):
    """Where a producer's batches go instead of the partitions' logs: an exactly-once sink task's staged objects
    on an object store (``storage.objects.staged``), which its driver's commit gives offsets."""

    def append(self, topic: str, partition: int, batches: EncodedBatches) -> AppendInfo:
        """Keep ``batches`` for ``topic``-``partition``; their offsets are the stage's own, numbered from 0."""
        ...


class Sender:
    """Appends what the accumulator holds: from its own thread when due, at once on ``flush`` and ``close``.

    Args:
        logs: The log directory the partitions are appended to.
        config: The producer's settings.
        accumulator: Where the records wait.
        transactions: The producer id, epoch and transaction the batches belong to.
        append_lock: The producer's append lock: held while draining and appending.
        stage: Where the batches go instead of the logs (None: the logs).
    """

    def __init__(
        self,
        logs: LogDirectory,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        transactions: TransactionManager,
        append_lock: threading.Lock,
        stage: Stage | None = None,
    ) -> None:
        self._logs = logs
        self._stage = stage
        self.config = config
        self._accumulator = accumulator
        self._transactions = transactions
        self._append_lock = append_lock
        name = f"pysparklog-producer-sender | {config.client_id or f'producer-{next(_client_ids)}'}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """The sender thread: append what is due whenever something becomes due, until closed."""
        while self._accumulator.await_due():
            with self._append_lock:
                chunks = self._accumulator.take_chunks()
                touched = self._drain(chunks)
            publish(touched)

    def flush(self) -> None:
        """Append every record taken so far, now (``Producer.flush``)."""
        with self._append_lock:
            chunks = self._accumulator.take_chunks()
            touched = self._drain(chunks, force_all=True)
        publish(touched)

    def close(self) -> None:
        """Close the accumulator, stop the thread, append what is left and close the logs (``Producer.close``)."""
        chunks = self._accumulator.close()
        if chunks is None:
            return
        self._thread.join()
        with self._append_lock:
            touched = self._drain(chunks, force_all=True)
            self._accumulator.close_logs()
        publish(touched)

    def append_table(
        self, topic: str, table: pa.Table, explicit: pa.ChunkedArray | None, deadline: float
    ) -> dict[int, AppendInfo]:
        """``Producer.send_arrow``'s appends: the records sent before to the topic, then the table's rows
        partitioned (``explicit``: its ``partition`` column), each partition's at once."""
        with self._append_lock:
            earlier = self._accumulator.take_chunks(topic, refuse_closed=True)
            touched = self._drain(earlier, force_topic=topic)
            try:
                state = self._accumulator.topic(topic)
                partitions = state.partitioner.assign_partitions(table, state.num_partitions, explicit)
                order, bounds = group_rows(partitions, state.num_partitions)
                self._transactions.register(
                    [TopicPartition(topic, p) for p in np.flatnonzero(np.diff(bounds)).tolist()]
                )
                return self._append_grouped(state, table, order, bounds, deadline)
            finally:
                publish(touched)

    def _drain(
        self, chunks: list[Chunk], *, force_all: bool = False, force_topic: str | None = None
    ) -> dict[Chunk, None]:
        """Queue the chunks' records per partition, then append every queue that is due (under the
        append lock); returns the chunks whose records got outcomes, to publish outside it."""
        touched: dict[Chunk, None] = {}
        for chunk in chunks:
            try:
                self._accumulator.enqueue(chunk)
            except Exception as error:  # the partitioner or the topic's metadata: every record of the chunk fails
                chunk.fail(error)
                touched[chunk] = None
        due = self._accumulator.due(force_all=force_all, force_topic=force_topic)
        if self._stage is None and self._logs.appends_together:
            by_topic: dict[str, list[tuple[PartitionState, bool]]] = {}
            for state, keep_partial in due:
                by_topic.setdefault(state.topic, []).append((state, keep_partial))
            for queues in by_topic.values():
                self._append_queues_together(queues, touched)
        else:
            for state, keep_partial in due:
                self._append_queue(state, keep_partial=keep_partial, touched=touched)
        self._accumulator.settle()
        return touched

    # -- appending ----------------------------------------------------------------------------

    def _append_queue(self, state: PartitionState, *, keep_partial: bool, touched: dict[Chunk, None]) -> None:
        """Append a partition's queued records (with ``keep_partial``, all but those of the last batch,
        which may fill up still) and hand each record its outcome."""
        while state.pieces:
            table = state.queued_table()
            deadline = state.oldest + self.config.delivery_timeout_ms / 1000
            try:
                consumed, outcomes = self._append_rows(state, table.combine_chunks(), keep_partial, deadline)
            except Exception as error:  # outside the appends (the producer id file...): the queue fails
                consumed, outcomes = table.num_rows, [(0, table.num_rows, error)]
            state.resolve(outcomes, touched)
            state.drop_rows(consumed)
            if not outcomes or isinstance(outcomes[-1][2], AppendInfo):
                return  # else a failure stopped the appends: go on with the records after it

    def _append_queues_together(self, queues: list[tuple[PartitionState, bool]], touched: dict[Chunk, None]) -> None:
        """Append the queues of several partitions of one topic in rounds, each round one append of every queue's
        next group made together (on an object store, one commit); a queue whose append fails goes on alone with
        the records after it, as ``_append_queue`` does."""
        work: list[_QueueWork] = []
        for state, keep_partial in queues:
            table = state.queued_table().combine_chunks()
            try:
                groups = self._encode(state, table)
            except Exception as error:  # outside the appends (the producer id file...): the queue fails
                state.resolve([(0, table.num_rows, error)], touched)
                state.drop_rows(table.num_rows)
                continue
            groups = _without_last_batch(groups) if keep_partial else groups
            deadline = state.oldest + self.config.delivery_timeout_ms / 1000
            work.append(_QueueWork(state, keep_partial, groups, deadline))
        try:
            while round_ := [w for w in work if w.next < len(w.groups)]:
                for w, outcome in zip(round_, self._append_together(round_), strict=True):
                    group = w.groups[w.next]
                    w.outcomes.append((w.done, w.done + group.num_records, outcome))
                    w.done += group.num_records
                    w.next += 1
                    if not isinstance(outcome, AppendInfo):
                        self._transactions.reset_producer_id()
                        w.next, w.failed = len(w.groups), True
                    elif self.config.idempotent:
                        w.state.next_sequence = next_sequence(w.state.next_sequence, group.num_records)
        except BaseException:  # interrupted (Ctrl-C): the appends may or may not have been written
            self._transactions.reset_producer_id()
            raise
        finally:
            for w in work:
                w.state.resolve(w.outcomes, touched)
                w.state.drop_rows(w.done)
        for w in work:
            if w.failed:
                self._append_queue(w.state, keep_partial=w.keep_partial, touched=touched)

    def _append_together(self, round_: list[_QueueWork]) -> list[AppendInfo | BaseException]:
        """Each queue's next group appended together, retried with the same batches after an ``OSError`` while
        retries and time are left."""
        cfg = self.config
        backoff = cfg.retry_backoff_ms / 1000
        attempts = 0
        while True:
            try:
                appends = []
                for w in round_:
                    if w.state.log is None:
                        w.state.log = self._logs.partition(w.state.topic, w.state.partition)
                    appends.append((w.state.log, w.groups[w.next]))
                return list(self._logs.append_together(appends))
            except OSError as error:
                attempts += 1
                if attempts > cfg.retries or time.monotonic() + backoff > min(w.deadline for w in round_):
                    return [error] * len(round_)
                _log.warning(
                    "appends to %d partitions of %s failed (%s); retry %d",
                    len(round_),
                    round_[0].state.topic,
                    error,
                    attempts,
                )
                time.sleep(backoff)
            except Exception as error:
                return [error] * len(round_)

    def _append_grouped(
        self, topic: TopicState, table: pa.Table, order: np.ndarray, bounds: np.ndarray, deadline: float
    ) -> dict[int, AppendInfo]:
        """Append each partition's rows of ``table`` (``order`` lists them partition after partition,
        ``bounds`` where each partition's rows start in it) in order; raises the first failure.

        The rows are gathered a window of ``order`` at a time, with one ``take`` for every partition the
        window holds, so each partition's rows are one contiguous slice of it; a partition that runs on
        past the window keeps its last batch (it may fill up still) for the next window, which starts
        at that batch's first row.
        """
        infos: dict[int, list[AppendInfo]] = {}
        total = len(order)
        ends = bounds[1:]
        one_partition = np.count_nonzero(np.diff(bounds)) == 1  # then ``order`` is every row in turn
        start, step = 0, _BULK_ROWS
        while start < total:
            end = min(start + step, total)
            gathered = table.slice(start, end - start) if one_partition else table.take(order[start:end])
            gathered = gathered.combine_chunks()
            resume = end
            for partition in range(int(np.searchsorted(ends, start, side="right")), len(ends)):
                first, last = max(int(bounds[partition]), start), min(int(ends[partition]), end)
                if first >= end:
                    break
                if first == last:
                    continue
                runs_on = int(ends[partition]) > end
                consumed, outcomes = self._append_rows(
                    self._accumulator.partition(topic, partition),
                    gathered.slice(first - start, last - first),
                    runs_on,
                    deadline,
                )
                for _first, _last, outcome in outcomes:
                    if not isinstance(outcome, AppendInfo):
                        raise outcome
                    infos.setdefault(partition, []).append(outcome)
                if runs_on:
                    resume = first + consumed
            # A window whose last partition appended nothing (less than one batch) takes more rows next.
            step = step if resume > start else step * 2
            start = resume
        return {partition: AppendInfo.spanning(appended) for partition, appended in infos.items()}

    def _append_rows(
        self, state: PartitionState, table: pa.Table, keep_partial: bool, deadline: float
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
                self._transactions.reset_producer_id()
                raise
            outcomes.append((done, done + count, outcome))
            done += count
            if not isinstance(outcome, AppendInfo):
                self._transactions.reset_producer_id()
                break
            if self.config.idempotent:
                state.next_sequence = next_sequence(state.next_sequence, count)
        return done, outcomes

    def _encode(self, state: PartitionState, table: pa.Table) -> list[EncodedBatches]:
        """The rows as batches of ``batch.size`` (compressed, by the topic's estimated compression ratio,
        as Kafka's producer fills them), numbered from the partition's next sequence, grouped into
        appends of at most ``max.request.size`` bytes."""
        cfg = self.config
        transactions = self._transactions
        transactions.ensure_producer_id()
        transactions.register([TopicPartition(state.topic, state.partition)])
        settings = BatchSettings(
            codec=cfg.codec,
            max_batch_bytes=max(cfg.batch_size, RECORD_BATCH_OVERHEAD),
            batch_bytes_limit=cfg.max_request_size,
            max_batch_records=INT_MAX,
            producer_id=transactions.producer_id if cfg.idempotent else NO_PRODUCER_ID,
            producer_epoch=transactions.producer_epoch if cfg.idempotent else NO_PRODUCER_EPOCH,
            base_sequence=state.next_sequence if cfg.idempotent else NO_SEQUENCE,
            transactional=transactions.transactional,
        )
        estimate = self._accumulator.topic(state.topic).compression
        return [
            group
            for encoded in encode_arrow(table, settings, estimate=estimate)
            for group in _split(encoded, cfg.max_request_size)
        ]

    def _append_group(
        self, state: PartitionState, group: EncodedBatches, deadline: float
    ) -> AppendInfo | BaseException:
        """One append, retried with the same batches after an ``OSError`` while retries and time are left."""
        cfg = self.config
        backoff = cfg.retry_backoff_ms / 1000
        attempts = 0
        while True:
            try:
                if self._stage is not None:
                    return self._stage.append(state.topic, state.partition, group)
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


@dataclass(eq=False)
class _QueueWork:
    """One partition's queue in ``_append_queues_together``: its encoded groups, the next to append, and the
    outcomes so far ((first row, end row, outcome) per append)."""

    state: PartitionState
    keep_partial: bool
    groups: list[EncodedBatches]
    deadline: float
    next: int = 0
    done: int = 0
    failed: bool = False
    outcomes: list[tuple[int, int, AppendInfo | BaseException]] = field(default_factory=list)


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
