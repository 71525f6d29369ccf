"""Metadata (key 3): the endpoint as the cluster's only broker, its controller, and the leader, only replica and
in-sync replica of every partition of every topic of the log directory.

Every endpoint of a log directory answers so about itself (as WarpStream's agents do): the log is shared storage,
so whichever endpoint a client writes to appends to the same partition. The cluster id is the log directory's
(``DataState.cluster_id``), the same from every endpoint.

A request naming a topic that does not exist, with ``allow_auto_topic_creation`` (implied before v4), creates it
as a broker does (``AutoTopicCreationManager``), through the engine's ``TopicStore.get_or_create``: with
``num.partitions`` of the log directory's ``server.properties``, unless ``auto.create.topics.enable=false`` there
or the name is an internal topic's. The answer for the topic is UNKNOWN_TOPIC_OR_PARTITION either way, as Kafka 4's
brokers answer while the controller creates it: a client asks again (librdkafka within
``topic.metadata.propagation.max.ms``, Java's producer until ``max.block.ms``) and then finds it, or keeps being
told it does not exist. A request for every topic creates none.

Wire (v0-v13): request ``topics`` (v0: empty means all; v1+: null means all, empty none; v10+: each by name or
``topic_id``); response ``brokers``, ``cluster_id`` (v2+), ``controller_id`` (v1+), ``topics`` (``error_code``,
``name``, ``topic_id`` v10+, ``is_internal`` v1+, ``partitions``: ``leader_id``, ``leader_epoch`` v7+,
``replica_nodes``, ``isr_nodes``, ``offline_replicas`` v5+), top-level ``error_code`` (v13).
"""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.context import RequestContext
from pysparklog.endpoint.data.errors import error_code
from pysparklog.endpoint.data.state import DataState
from pysparklog.errors import PySparkLogError, UnknownTopicError
from pysparklog.storage.topics import INTERNAL_TOPICS, ZERO_TOPIC_ID, TopicMetadata, validate_topic_name

METADATA = 3
#: No leader epoch: the log keeps none (no elections), so clients skip the epoch checks they would make.
NO_LEADER_EPOCH = -1
NO_THROTTLE = timedelta(0)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic id of the log directory (Kafka's 22 base64url characters) as the wire's UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def topic_id_text(value: uuid.UUID) -> str:
    """The wire's UUID as the log directory writes a topic id."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _topic_response(context: RequestContext, topic: TopicMetadata) -> Any:
    node = context.endpoint.node_id
    partitions = tuple(
        context.message.make(
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=partition,
            leader_id=node,
            leader_epoch=NO_LEADER_EPOCH,
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for partition in range(topic.partitions)
    )
    return context.message.make(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic_uuid(topic.topic_id),
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions,
    )


def _topic_error(context: RequestContext, name: str | None, topic_id: uuid.UUID | None, code: ErrorCode) -> Any:
    # A response topic's name is nullable from v12 only (MetadataResponse.json), while v10-11 requests may ask by
    # id with a null name: those get an empty name (found by tests/endpoint/test_fuzz_requests.py).
    return context.message.make(
        "MetadataResponseTopic",
        error_code=code,
        name="" if name is None and context.message.version < 12 else name,
        topic_id=topic_id or topic_uuid(ZERO_TOPIC_ID),
        is_internal=name in INTERNAL_TOPICS,
        partitions=(),
    )


def _describe(context: RequestContext, data: DataState, request: Any) -> list[Any]:
    """The topics asked for, creating those missing when the request allows (engine threads: every look at the
    topics reads the log directory)."""
    topics = data.log_dir.topics
    asked: list[tuple[str | None, uuid.UUID | None]]
    auto_create = False
    # The topics are listed once: looking for a topic that does not exist lists the log directory, which a request
    # naming thousands of them would otherwise do thousands of times.
    existing = set(topics.names())
    if request.topics is None or (context.message.version == 0 and not request.topics):
        asked = [(name, None) for name in sorted(existing)]
    else:
        asked = [(wanted.name, getattr(wanted, "topic_id", None)) for wanted in request.topics]
        auto_create = getattr(request, "allow_auto_topic_creation", True)  # v0-3 have no field: they allow it
    answers = []
    for name, wanted_id in asked:
        wanted_id = None if wanted_id is None or wanted_id.int == 0 else wanted_id
        try:
            if name is None:
                if wanted_id is None:
                    answers.append(_topic_error(context, None, None, ErrorCode.invalid_request))
                    continue
                name = topics.topic_with_id(topic_id_text(wanted_id)).name
            if name not in existing:
                validate_topic_name(name)
                if not auto_create:
                    raise UnknownTopicError(f"Topic '{name}' does not exist")
                topics.get_or_create(name)  # refused: UnknownTopicError, answered the same
                answers.append(_topic_error(context, name, None, ErrorCode.unknown_topic_or_partition))
                continue
            answers.append(_topic_response(context, data.topic(name)))
        except (PySparkLogError, OSError) as error:
            code = error_code(error, f"metadata of topic {name or wanted_id}")
            if name is None and code is ErrorCode.unknown_topic_or_partition:
                code = ErrorCode.unknown_topic_id  # asked by id: Kafka names what it could not find
            answers.append(_topic_error(context, name, wanted_id, code))
    return answers


async def metadata(context: RequestContext, request: Any) -> Any:
    data = context.endpoint.state(DataState)
    endpoint = context.endpoint
    topics = await endpoint.run_blocking(_describe, context, data, request)
    cluster_id = await endpoint.run_blocking(data.cluster_id)
    broker = context.message.make(
        "MetadataResponseBroker",
        node_id=endpoint.node_id,
        host=endpoint.advertised_host,
        port=endpoint.advertised_port,
        rack=None,
    )
    return context.message.make(
        "MetadataResponse",
        throttle_time=NO_THROTTLE,
        brokers=(broker,),
        cluster_id=cluster_id,
        controller_id=endpoint.node_id,
        topics=tuple(topics),
        error_code=ErrorCode.none,
    )
