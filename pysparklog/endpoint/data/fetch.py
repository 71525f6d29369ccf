"""Fetch (key 1): record batches served as the stored bytes (``reads.read_stored``), under either isolation level,
with ``max_wait_ms`` long polling.

A fetch answers at once when its partitions hold ``min_bytes`` or more past the offsets asked (or on any error);
otherwise it waits up to ``max_wait_ms`` for more: an append through this endpoint wakes it at once, and the log
ends are looked at every ``DataState.poll_interval_s`` for appends made by other processes (other endpoints, Spark,
the Python producer), whereupon the partitions are read again.

Sizes follow Kafka's ``ReplicaManager.readFromLog``: each partition gets up to its ``partition_max_bytes`` and the
response up to ``max_bytes``, in whole batches; the first partition with records gets at least one whole batch
even when it is larger than either, so a consumer never stalls on a large batch.

Fetch sessions (KIP-227) are not kept: every response has session id 0, which tells the client that no session
was created, so that its next fetch is a full one again; a request naming a session gets
FETCH_SESSION_ID_NOT_FOUND.

Wire (v4-v12): request ``max_wait``, ``min_bytes``, ``max_bytes`` (v3+), ``isolation_level`` (v4+),
``session_id``/``session_epoch`` (v7+), ``topics`` (``topic``, ``partitions``: ``partition``, ``fetch_offset``,
``partition_max_bytes``...); response ``throttle_time``, ``error_code``/``session_id`` (v7+), ``responses``
(``topic``, ``partitions``: ``partition_index``, ``error_code``, ``high_watermark``, ``last_stable_offset``,
``log_start_offset`` (v5+), ``aborted_transactions``, ``records``). v13+ name topics by id only and are not served.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.context import RequestContext
from pysparklog.endpoint.data.errors import error_code
from pysparklog.endpoint.data.metadata import NO_THROTTLE
from pysparklog.endpoint.data.reads import PartitionRead, log_ends, read_stored
from pysparklog.endpoint.data.state import DataState
from pysparklog.errors import PySparkLogError
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.objects.log import ObjectPartitionLog
from pysparklog.storage.topics import TopicMetadata

FETCH = 1
READ_COMMITTED = 1
NO_SESSION = 0
UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition's answer: its read, or the error it got (with the offsets known, for OFFSET_OUT_OF_RANGE)."""

    topic: str
    partition: int
    error: ErrorCode
    read: PartitionRead | None
    log: Log | None = None


def _read_all(data: DataState, request: Any) -> tuple[list[PartitionFetch], int]:
    """Every partition asked, in order, within the response's bytes (engine thread); and the bytes read."""
    committed = request.isolation_level == READ_COMMITTED
    budget = max(int(request.max_bytes), 0)
    total = 0
    answers = []
    for topic in request.topics:
        metadata: TopicMetadata | None = None
        topic_error: BaseException | None = None
        try:
            metadata = data.topic(topic.topic)
        except (PySparkLogError, OSError) as error:
            topic_error = error
        for asked in topic.partitions:
            what = f"a fetch of {topic.topic}-{asked.partition}"
            if metadata is None:
                assert topic_error is not None
                answers.append(PartitionFetch(topic.topic, asked.partition, error_code(topic_error, what), None))
                continue
            try:
                log = data.log(metadata, asked.partition)
            except (PySparkLogError, OSError) as error:
                answers.append(PartitionFetch(topic.topic, asked.partition, error_code(error, what), None))
                continue
            limit = min(max(int(asked.partition_max_bytes), 0), budget - total)
            try:
                read = read_stored(log, int(asked.fetch_offset), limit, committed, min_one_batch=total == 0)
            except (PySparkLogError, OSError) as error:
                answers.append(_failed_read(topic.topic, asked.partition, log, error_code(error, what)))
                continue
            total += len(read.records)
            answers.append(PartitionFetch(topic.topic, asked.partition, ErrorCode.none, read, log))
    return answers, total


def _failed_read(topic: str, partition: int, log: Log, code: ErrorCode) -> PartitionFetch:
    """A partition whose read failed; an offset out of range comes with the log's offsets, from which the client
    resets its position (``auto.offset.reset``)."""
    if code is not ErrorCode.offset_out_of_range:
        return PartitionFetch(topic, partition, code, None, log)
    try:
        ends = log_ends(log)
    except (PySparkLogError, OSError):
        return PartitionFetch(topic, partition, code, None, log)
    read = PartitionRead(b"", ends.high_watermark, ends.last_stable_offset, ends.log_start_offset, None)
    return PartitionFetch(topic, partition, code, read, log)


def _satisfied(answers: list[PartitionFetch], total: int, min_bytes: int) -> bool:
    """Kafka answers a fetch at once when it has min_bytes, or when a partition has an error to report."""
    return total >= min_bytes or any(answer.error is not ErrorCode.none for answer in answers)


def _ends_of(answers: list[PartitionFetch]) -> list[int]:
    """The log ends of the partitions read (engine thread): what a long poll compares to see appends. On an object
    store one request per topic (the header of its chain's last commit), on a filesystem a look at each
    partition's state record."""
    ends: dict[tuple[str, int], int] = {}
    by_topic: dict[str, list[PartitionFetch]] = {}
    for answer in answers:
        if answer.log is not None:
            by_topic.setdefault(answer.topic, []).append(answer)
    for topic, partitions in by_topic.items():
        try:
            first = partitions[0].log
            if isinstance(first, ObjectPartitionLog):
                found = first.topic_ends(a.partition for a in partitions)
                ends.update(((topic, p), end.log_end_offset) for p, end in found.items())
            else:
                ends.update(((topic, a.partition), a.log.offsets()[1]) for a in partitions if a.log is not None)
        except (PySparkLogError, OSError):
            continue  # the next read reports it
    return [ends.get((answer.topic, answer.partition), UNKNOWN_OFFSET) for answer in answers]


async def fetch(context: RequestContext, request: Any) -> Any:
    data = context.endpoint.state(DataState)
    make = context.message.make
    if getattr(request, "session_id", NO_SESSION) != NO_SESSION:
        return make(
            "FetchResponse",
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=NO_SESSION,
            responses=(),
        )
    run = context.endpoint.run_blocking
    deadline = time.monotonic() + max(request.max_wait.total_seconds(), 0)
    answers, total = await run(_read_all, data, request)
    if not _satisfied(answers, total, request.min_bytes):
        seen = [a.read.high_watermark if a.read is not None else UNKNOWN_OFFSET for a in answers]
        while (remaining := deadline - time.monotonic()) > 0:
            await data.wait_for_append(min(remaining, data.poll_interval_s))
            if await run(_ends_of, answers) == seen:
                continue
            answers, total = await run(_read_all, data, request)
            if _satisfied(answers, total, request.min_bytes):
                break
            seen = [a.read.high_watermark if a.read is not None else UNKNOWN_OFFSET for a in answers]
    return make(
        "FetchResponse",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=NO_SESSION,
        responses=tuple(_topic_responses(context, answers)),
    )


def _topic_responses(context: RequestContext, answers: list[PartitionFetch]) -> list[Any]:
    make = context.message.make
    by_topic: dict[str, list[Any]] = {}
    for answer in answers:
        read = answer.read
        aborted = None
        if read is not None and read.aborted is not None:
            aborted = tuple(
                make("AbortedTransaction", producer_id=txn.producer_id, first_offset=txn.first_offset)
                for txn in read.aborted
            )
        by_topic.setdefault(answer.topic, []).append(
            make(
                "PartitionData",
                partition_index=answer.partition,
                error_code=answer.error,
                high_watermark=read.high_watermark if read else UNKNOWN_OFFSET,
                last_stable_offset=read.last_stable_offset if read else UNKNOWN_OFFSET,
                log_start_offset=read.log_start_offset if read else UNKNOWN_OFFSET,
                aborted_transactions=aborted,
                preferred_read_replica=-1,
                records=read.records if read else b"",
            )
        )
    return [make("FetchableTopicResponse", topic=topic, partitions=tuple(parts)) for topic, parts in by_topic.items()]
