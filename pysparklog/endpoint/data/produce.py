"""Produce (key 0): each partition's record batches appended to its log as they came, validated as the log validates
every append (``Log.append``: whole v2 batches with good checksums, ``max.message.bytes``, timestamps, idempotent
sequences and producer epochs, transactional batches).

An append is acknowledged once it is written (a filesystem's segment and state record, or an object store's
commit), which is all that acks=all could wait for here: acks 1 and -1 are answered alike, acks 0 not at all. The
partitions of a request are appended in parallel (on an object store, a topic's partitions in one commit). A batch
an idempotent producer sends again (same producer, epoch and sequences as one of its last five) is not written
twice: it is answered with the offsets it was first given, as Kafka answers it. ``transactional_id`` is not
checked here: the transaction coordinator's APIs answer for it, and the log checks the batches' producer epochs.

Wire (v3-v12): request ``transactional_id``, ``acks``, ``timeout``, ``topic_data`` (``name``, ``partition_data``:
``index``, ``records``); response ``responses`` (``name``, ``partition_responses``: ``index``, ``error_code``,
``base_offset``, ``log_append_time`` (v2+), ``log_start_offset`` (v5+), ``record_errors`` and ``error_message``
(v8+)), ``throttle_time``. v13 names topics by id only and is not served.
"""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.context import RequestContext
from pysparklog.endpoint.data.errors import error_code
from pysparklog.endpoint.data.metadata import NO_THROTTLE
from pysparklog.endpoint.data.state import DataState, Leases
from pysparklog.errors import InvalidRecordError, InvalidTopicError, PySparkLogError
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_writer import AppendInfo
from pysparklog.storage.topics import INTERNAL_TOPICS

PRODUCE = 0
#: Kafka's acks: none, the leader, all in-sync replicas (the same here: an append is acknowledged once written).
ACKS = (0, 1, -1)
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """One partition's outcome."""

    partition: int
    error: ErrorCode
    message: str | None = None
    base_offset: int = NO_OFFSET
    log_append_time_ms: int = -1
    log_start_offset: int = NO_OFFSET


def _answered(partition: int, log: Log, info: AppendInfo) -> PartitionAnswer:
    return PartitionAnswer(
        partition,
        ErrorCode.none,
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time_ms,
        log_start_offset=log.local.log_start_offset,
    )


def _refused(partition: int, error: BaseException, what: str) -> PartitionAnswer:
    return PartitionAnswer(partition, error_code(error, what), str(error))


def _checked(topic: str, records: bytes | None) -> bytes:
    """The records of a partition, once Kafka's checks of the request itself passed (the log checks the batches).

    Raises:
        InvalidTopicError: ``topic`` is internal: Kafka's ``ReplicaManager`` refuses a client's appends to it, whose
            records only its coordinators write (here, pysparklog's offsets and transaction coordinators).
        InvalidRecordError: No records (null or empty): Kafka's ``ProduceRequest.validateRecords`` wants a batch.
    """
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot append to internal topic {topic}")
    if not records:
        raise InvalidRecordError("the produce request holds no record batch for the partition; accepted: one or more")
    return records


def _append(data: DataState, topic: str, partition: int, records: bytes | None) -> PartitionAnswer:
    """Append one partition's batches (engine thread)."""
    try:
        batches = _checked(topic, records)
        with Leases(data) as leases:
            log = leases.log(data.topic(topic), partition)
            return _answered(partition, log, log.append(batches))
    except (PySparkLogError, OSError) as error:
        return _refused(partition, error, f"a produce to {topic}-{partition}")


def _append_topic_together(
    data: DataState, topic: str, records: list[tuple[int, bytes | None]]
) -> list[PartitionAnswer]:
    """Append to several partitions of one topic in one write (an object store's commit; engine thread)."""
    with Leases(data) as leases:
        return _append_together(data, leases, topic, records)


def _append_together(
    data: DataState, leases: Leases, topic: str, records: list[tuple[int, bytes | None]]
) -> list[PartitionAnswer]:
    answers: dict[int, PartitionAnswer] = {}
    appends: list[tuple[int, Log, bytes]] = []
    for partition, batches in records:
        try:
            appends.append((partition, leases.log(data.topic(topic), partition), _checked(topic, batches)))
        except (PySparkLogError, OSError) as error:
            answers[partition] = _refused(partition, error, f"a produce to {topic}-{partition}")
    if appends:
        outcomes: list[AppendInfo | PySparkLogError | OSError]
        try:
            # append_together checks each append as Log.append does, bytes included; its annotation names only
            # EncodedBatches.
            together = [(log, batches) for _, log, batches in appends]
            outcomes = list(data.log_dir.append_together(together))  # type: ignore[arg-type]
        except OSError as error:  # the store failed: the appends may or may not have been made, as a timeout
            outcomes = [error] * len(appends)
        for (partition, log, _), outcome in zip(appends, outcomes, strict=True):
            answers[partition] = (
                _answered(partition, log, outcome)
                if isinstance(outcome, AppendInfo)
                else _refused(partition, outcome, f"a produce to {topic}-{partition}")
            )
    return [answers[partition] for partition, _ in records]


async def _topic_answers(context: RequestContext, data: DataState, topic: Any) -> list[PartitionAnswer]:
    records = [(int(p.index), None if p.records is None else bytes(p.records)) for p in topic.partition_data]
    if data.log_dir.appends_together and len(records) > 1:
        return await context.endpoint.run_blocking(_append_topic_together, data, topic.name, records)
    return list(
        await asyncio.gather(
            *(context.endpoint.run_blocking(_append, data, topic.name, p, batches) for p, batches in records)
        )
    )


def _log_append_time(ms: int) -> datetime.datetime | None:
    """The wire's LogAppendTime: -1 (null) when the topic keeps the producer's CreateTime."""
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


async def produce(context: RequestContext, request: Any) -> Any:
    data = context.endpoint.state(DataState)
    if request.acks not in ACKS:
        answers = [
            [PartitionAnswer(int(p.index), ErrorCode.invalid_required_acks) for p in topic.partition_data]
            for topic in request.topic_data
        ]
    else:
        answers = list(await asyncio.gather(*(_topic_answers(context, data, topic) for topic in request.topic_data)))
        if any(a.error is ErrorCode.none for topic in answers for a in topic):
            data.appended()
    if request.acks == 0:
        return None  # acks=0: the client reads no response
    make = context.message.make
    return make(
        "ProduceResponse",
        responses=tuple(
            make(
                "TopicProduceResponse",
                name=topic.name,
                partition_responses=tuple(
                    make(
                        "PartitionProduceResponse",
                        index=answer.partition,
                        error_code=answer.error,
                        base_offset=answer.base_offset,
                        log_append_time=_log_append_time(answer.log_append_time_ms),
                        log_start_offset=answer.log_start_offset,
                        record_errors=(),
                        error_message=answer.message,
                    )
                    for answer in topic_answers
                ),
            )
            for topic, topic_answers in zip(request.topic_data, answers, strict=True)
        ),
        throttle_time=NO_THROTTLE,
    )
