"""ListOffsets (key 2): a partition's offset for a timestamp, or for one of Kafka's special timestamps.

- ``-2`` (earliest) and ``-4`` (earliest local, v8+: the log has no remote tier, so it is the log start offset);
- ``-1`` (latest): the high watermark (the log end), the last stable offset under ``read_committed``;
- ``-3`` (max timestamp, v7+) and a timestamp: ``Log.offset_for_timestamp``, an answer only below the offset a
  consumer of the isolation level may read up to (Kafka's ``Partition.fetchOffsetForTimestamp``), else offset
  and timestamp -1 with no error; for ``-3`` the offset of the record holding the largest timestamp, as Kafka
  answers since 3.8.

Leader epochs are -1: the log keeps none (no elections), as Metadata says.

Wire (v1-v10): request ``replica_id``, ``isolation_level`` (v2+), ``topics`` (``name``, ``partitions``:
``partition_index``, ``timestamp``), ``timeout`` (v10); response ``throttle_time`` (v2+), ``topics`` (``name``,
``partitions``: ``partition_index``, ``error_code``, ``timestamp``, ``offset``, ``leader_epoch`` (v4+)).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pyarrow as pa
from kio.schema.errors import ErrorCode

from pysparklog.endpoint.context import RequestContext
from pysparklog.endpoint.data.errors import error_code
from pysparklog.endpoint.data.metadata import NO_LEADER_EPOCH, NO_THROTTLE
from pysparklog.endpoint.data.state import DataState
from pysparklog.errors import InvalidOffsetError, PySparkLogError
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_reads import segment_index

LIST_OFFSETS = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
READ_COMMITTED = 1
UNKNOWN = -1


def _offset_for(log: Log, timestamp: int, committed: bool) -> tuple[int, int]:
    """(offset, timestamp) for ``timestamp``, (-1, -1) when no record qualifies (engine thread)."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.offsets()[0], UNKNOWN
    view = log.view()
    readable = log.local.last_stable(view) if committed else view.log_end_offset
    if timestamp == LATEST:
        return readable, UNKNOWN
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:
        raise InvalidOffsetError(
            f"timestamp {timestamp} is not valid; accepted: a timestamp >= 0, -1 (latest), -2 (earliest), "
            "-3 (max timestamp) or -4 (earliest local)"
        )
    found = log.offset_for_timestamp(timestamp)
    if found is not None and timestamp == MAX_TIMESTAMP:
        found = _record_of_max_timestamp(log, *found)
    if found is None or found[0] >= readable:
        return UNKNOWN, UNKNOWN
    return found


def _record_of_max_timestamp(log: Log, batch_offset: int, timestamp: int) -> tuple[int, int]:
    """The offset of the first record with ``timestamp`` in the batch holding ``batch_offset``.

    Kafka answers ``-3`` with the offset of the record holding the largest timestamp (``RecordBatch
    .offsetOfMaxTimestamp``, since KAFKA-16310 in 3.8), where ``Log.offset_for_timestamp`` gives an offset of the
    batch holding it (its last): the batch is read again to find the record.
    """
    view = log.view()
    base = view.segment_bases[segment_index(view, batch_offset)]
    segment = log.segment(base)
    located = segment.translate_offset(batch_offset, view.end_of(base, segment))
    if located is None:
        return batch_offset, timestamp
    first = next(segment.chunks(located[0], view.end_of(base, segment), max_bytes=1, verify_crc=False), None)
    start = max(int(first.entries.base_offsets[0]) if first is not None else batch_offset, view.log_start_offset)
    for records in log.read_arrow(start, batch_offset + 1):
        stamps = records.column("timestamp").cast(pa.int64()).to_numpy()
        matching = np.flatnonzero(stamps == timestamp)
        if len(matching):
            return int(records.column("offset")[int(matching[0])].as_py()), timestamp
    return batch_offset, timestamp


def _list_topic(data: DataState, topic: Any, committed: bool) -> list[tuple[int, ErrorCode, int, int]]:
    """(partition, error, offset, timestamp) for each partition asked of ``topic`` (engine thread)."""
    answers = []
    try:
        metadata = data.topic(topic.name)
    except (PySparkLogError, OSError) as error:
        code = error_code(error, f"offsets of topic {topic.name}")
        return [(int(p.partition_index), code, UNKNOWN, UNKNOWN) for p in topic.partitions]
    for asked in topic.partitions:
        try:
            offset, timestamp = _offset_for(data.log(metadata, asked.partition_index), int(asked.timestamp), committed)
            answers.append((int(asked.partition_index), ErrorCode.none, offset, timestamp))
        except (PySparkLogError, OSError) as error:
            code = error_code(error, f"offsets of {topic.name}-{asked.partition_index}")
            answers.append((int(asked.partition_index), code, UNKNOWN, UNKNOWN))
    return answers


async def list_offsets(context: RequestContext, request: Any) -> Any:
    data = context.endpoint.state(DataState)
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    run = context.endpoint.run_blocking
    topics = await asyncio.gather(*(run(_list_topic, data, topic, committed) for topic in request.topics))
    make = context.message.make
    return make(
        "ListOffsetsResponse",
        throttle_time=NO_THROTTLE,
        topics=tuple(
            make(
                "ListOffsetsTopicResponse",
                name=topic.name,
                partitions=tuple(
                    make(
                        "ListOffsetsPartitionResponse",
                        partition_index=partition,
                        error_code=code,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=NO_LEADER_EPOCH,
                    )
                    for partition, code, offset, timestamp in answers
                ),
            )
            for topic, answers in zip(request.topics, topics, strict=True)
        ),
    )
