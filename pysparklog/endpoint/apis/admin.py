"""The admin APIs: CreateTopics (19), DeleteTopics (20), DeleteRecords (21), DescribeConfigs (32), CreatePartitions
(37) and IncrementalAlterConfigs (44), onto the log directory's topics as ``pysparklog topics``, ``configs`` and
``delete-records`` change them (``LogDirectory.topics``, ``LogDirectory.delete_records``).

A Kafka cluster's controller makes these changes; here the log directory's topic metadata does, under its lock, so
every endpoint serving a directory (and every other process) sees a change once it is answered. Each topic,
resource or partition of a request gets its own error code and message, as Kafka's controller gives them; the
messages of refusals Kafka does not know (a replication factor other than one) say what a log directory accepts.

Every version kio has is served (the versions Kafka 4.x brokers serve); the topic-id form of DeleteTopics (v6) is
served too, a topic's id being the one in its ``partition.metadata``.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.apis import Api, Handle
from pysparklog.endpoint.apis.versions import NO_THROTTLE
from pysparklog.endpoint.context import RequestContext
from pysparklog.endpoint.data.metadata import topic_id_text, topic_uuid
from pysparklog.errors import (
    InvalidConfigError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidTopicError,
    InvalidTopicIdError,
    ObjectStoreError,
    PolicyViolationError,
    PySparkLogError,
    StorageConflictError,
    TopicExistsError,
    UnknownTopicError,
)
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topic_config import (
    NUM_PARTITIONS,
    TOPIC_CONFIGS,
    ConfigEntry,
    ConfigKey,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ServerProperties,
    describe_configs,
)
from pysparklog.storage.topics import CLUSTER_METADATA_TOPIC, TopicMetadata

log = logging.getLogger("pysparklog.endpoint")

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
DESCRIBE_CONFIGS = 32
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44

#: Kafka's ``Uuid.ZERO_UUID``: no topic id (a DeleteTopics v6 entry naming its topic by name, an error's result).
ZERO_UUID = uuid.UUID(int=0)
#: The replication factor of every partition: a log directory holds one copy, the one its storage keeps.
REPLICATION_FACTOR = 1
#: CreateTopics' ``num_partitions`` and ``replication_factor`` meaning "the default" (and "given by assignments").
DEFAULT = -1
#: DeleteRecords' ``low_watermark`` of a partition that failed (Kafka's ``INVALID_LOW_WATERMARK``).
INVALID_LOW_WATERMARK = -1


class ResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type`` ids of the resources the config APIs serve."""

    TOPIC = 2
    BROKER = 4


class WireConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` ids."""

    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


SOURCE_IDS = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG: WireConfigSource.TOPIC_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG: WireConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DEFAULT_CONFIG: WireConfigSource.DEFAULT_CONFIG,
}
#: Kafka's ``DescribeConfigsResponse.ConfigType`` ids (DescribeConfigs v3+).
TYPE_IDS = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
}


class AlterConfigOp(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType`` ids (IncrementalAlterConfigs' ``config_operation``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class Refused(Exception):
    """A topic, resource or partition of a request refused with a Kafka error code and message."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: The engine's errors, by the Kafka error code answering them in an admin API (first match wins: ``InvalidTopicError``
#: before the errors it derives from). Not the data plane's table (``data.errors``): here a partition count refused is
#: INVALID_PARTITIONS and an offset refused OFFSET_OUT_OF_RANGE, as Kafka's controller and DeleteRecords answer them.
_ENGINE_ERRORS: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (TopicExistsError, ErrorCode.topic_already_exists),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (InvalidPartitionsError, ErrorCode.invalid_partitions),
    (InvalidConfigError, ErrorCode.invalid_config),
    (UnknownTopicError, ErrorCode.unknown_topic_or_partition),
    (InvalidTopicIdError, ErrorCode.unknown_topic_id),
    (PolicyViolationError, ErrorCode.policy_violation),
    (InvalidOffsetError, ErrorCode.offset_out_of_range),
    # The storage failed, or another process changed the topic metadata while this one held the lock it lost:
    # retriable, an admin client sends again.
    (StorageConflictError, ErrorCode.kafka_storage_error),
    (ObjectStoreError, ErrorCode.kafka_storage_error),
    (OSError, ErrorCode.kafka_storage_error),
)


def refusal(error: Exception) -> Refused:
    """The Kafka error code and message answering an error of the engine: a known refusal by its code, a failing
    storage as KAFKA_STORAGE_ERROR (logged), anything else of the engine as UNKNOWN_SERVER_ERROR (logged with its
    traceback); the message is the engine's, which names the problem and what is accepted."""
    if isinstance(error, Refused):
        return error
    for kind, code in _ENGINE_ERRORS:
        if isinstance(error, kind):
            if code is ErrorCode.kafka_storage_error:
                log.warning("storage error serving an admin request: %s", error)
                return Refused(code, f"the log directory's storage failed: {error}")
            return Refused(code, str(error))
    log.error("unexpected error serving an admin request", exc_info=error)
    return Refused(ErrorCode.unknown_server_error, f"{type(error).__name__}: {error}")


#: What a change of one topic, resource or partition can raise that is answered with an error code rather than by
#: closing the connection: the engine's errors and its storage's.
ANSWERED = (Refused, PySparkLogError, OSError)


def duplicates(names: Iterable[Any]) -> set[Any]:
    counts = Counter(names)
    return {name for name, count in counts.items() if count > 1}


# -- CreateTopics and CreatePartitions -----------------------------------------------------------------------------


def check_replicas(broker_ids: Sequence[int], node_id: int, partition: int) -> None:
    """Refuse a manual assignment's replicas other than this endpoint alone, the one broker Metadata names (each
    endpoint leads every partition, and a log directory holds one copy of it).

    Raises:
        Refused: INVALID_REPLICA_ASSIGNMENT for no broker or another broker, INVALID_REPLICATION_FACTOR for more
            than one.
    """
    if not broker_ids:
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes an empty replica list (partition {partition}); accepted: "
            f"[{node_id}]",
        )
    if len(broker_ids) > REPLICATION_FACTOR:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            f"The manual partition assignment of partition {partition} has {len(broker_ids)} replicas; accepted: "
            f"one, [{node_id}] (a log directory holds one copy of each partition, its storage's)",
        )
    if broker_ids[0] != node_id:
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes broker {broker_ids[0]}, but no such broker is registered; "
            f"accepted: [{node_id}], this endpoint, which leads every partition",
        )


def requested_partitions(topic: Any, node_id: int) -> int | None:
    """The partition count a CreateTopics entry asks for (None: ``num.partitions``), checked as Kafka's controller
    checks ``num_partitions``, ``replication_factor`` and manual ``assignments``.

    Raises:
        Refused: The entry's numbers or assignments are refused.
    """
    if topic.assignments:
        for field in ("replication_factor", "num_partitions"):
            if getattr(topic, field) != DEFAULT:
                name = "replication factor" if field == "replication_factor" else "numPartitions"
                raise Refused(
                    ErrorCode.invalid_request,
                    f"A manual partition assignment was specified, but {name} was not set to -1.",
                )
        indexes = [assignment.partition_index for assignment in topic.assignments]
        repeated = duplicates(indexes)
        if repeated:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"Found multiple manual partition assignments for partition {min(repeated)}",
            )
        for assignment in topic.assignments:
            check_replicas(assignment.broker_ids, node_id, assignment.partition_index)
        if sorted(indexes) != list(range(len(indexes))):
            raise Refused(
                ErrorCode.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
            )
        return len(indexes)
    if topic.replication_factor < DEFAULT or topic.replication_factor == 0:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if topic.replication_factor > REPLICATION_FACTOR:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {topic.replication_factor} time(s): a log directory holds one copy "
            "of each partition, the one its storage keeps; accepted: 1, or -1 for the default (1)",
        )
    if topic.num_partitions < DEFAULT or topic.num_partitions == 0:
        raise Refused(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
    return None if topic.num_partitions == DEFAULT else int(topic.num_partitions)


def creation_configs(configs: Iterable[Any]) -> dict[str, str]:
    """A CreateTopics entry's configs (a name given twice: the last value, as Kafka's controller takes it).

    Raises:
        Refused: INVALID_CONFIG for a config without a value, as Kafka refuses it.
    """
    null = [config.name for config in configs if config.value is None]
    if null:
        raise Refused(ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(null)}")
    return {config.name: config.value for config in configs}


def _create_topic(context: RequestContext, topic: Any, validate_only: bool) -> Any:
    make = context.message.make
    logs = context.endpoint.log_dir
    try:
        if topic.name == CLUSTER_METADATA_TOPIC:  # Kafka's controller refuses it before looking at the name's rules
            raise Refused(ErrorCode.invalid_request, f"Creation of internal topic {topic.name} is prohibited.")
        partitions = requested_partitions(topic, context.endpoint.node_id)
        created = logs.topics.create(
            topic.name, partitions, creation_configs(topic.configs), validate_only=validate_only
        )
        entries = describe_configs(created.configs, logs.topics.server_properties(), logs.topics.defaults)
    except ANSWERED as error:
        refused = refusal(error)
        return make(
            "CreatableTopicResult",
            name=topic.name,
            topic_id=ZERO_UUID,
            error_code=refused.code,
            error_message=refused.message,
            configs=(),
        )
    # v5+: the topic's configs in force, so that a client need not describe it (Kafka's controller answers them).
    answers_configs = context.message.has_field("CreatableTopicResult", "configs")
    configs = tuple(
        make(
            "CreatableTopicConfigs",
            name=entry.name,
            value=entry.value,
            read_only=False,
            config_source=SOURCE_IDS[entry.source],
            is_sensitive=False,
        )
        for entry in (entries if answers_configs else ())
    )
    return make(
        "CreatableTopicResult",
        name=topic.name,
        topic_id=topic_uuid(created.topic_id),
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=ErrorCode.none,
        num_partitions=created.partitions,
        replication_factor=REPLICATION_FACTOR,
        configs=configs,
    )


def _create_topics(context: RequestContext, request: Any) -> Any:
    """CreateTopics v2-v7. Topics are created one after another, each answered on its own (Kafka's controller
    creates a request's topics in one atomic batch of records; here each is a change of the topic metadata). A name
    given twice is refused, as Kafka refuses it. The request's ``timeout`` is not waited on: a topic is created, and
    every endpoint sees it, before the answer."""
    twice = duplicates(topic.name for topic in request.topics)
    results = [
        _create_topic(context, topic, request.validate_only) for topic in request.topics if topic.name not in twice
    ]
    results += [
        context.message.make(
            "CreatableTopicResult",
            name=name,
            topic_id=ZERO_UUID,
            error_code=ErrorCode.invalid_request,
            error_message="Duplicate topic name.",
            configs=(),
        )
        for name in sorted(twice)
    ]
    return context.message.make("CreateTopicsResponse", throttle_time=NO_THROTTLE, topics=tuple(results))


def _create_partitions_of(context: RequestContext, topic: Any, validate_only: bool) -> None:
    logs = context.endpoint.log_dir
    if topic.assignments is not None:
        current = logs.topics.get(topic.name).partitions
        additional = topic.count - current
        if additional > 0 and len(topic.assignments) != additional:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
                "assignment(s) were specified.",
            )
        for index, assignment in enumerate(topic.assignments, start=current):
            check_replicas(assignment.broker_ids, context.endpoint.node_id, index)
    logs.topics.alter_partitions(topic.name, topic.count, validate_only=validate_only)


def _create_partitions(context: RequestContext, request: Any) -> Any:
    """CreatePartitions v0-v3: ``LogDirectory.topics.alter_partitions`` per topic; a name given twice is refused."""
    make = context.message.make
    twice = duplicates(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if topic.name in twice:
            continue
        try:
            _create_partitions_of(context, topic, request.validate_only)
            results.append(make("CreatePartitionsTopicResult", name=topic.name, error_code=ErrorCode.none))
        except ANSWERED as error:
            refused = refusal(error)
            results.append(
                make(
                    "CreatePartitionsTopicResult",
                    name=topic.name,
                    error_code=refused.code,
                    error_message=refused.message,
                )
            )
    results += [
        make(
            "CreatePartitionsTopicResult",
            name=name,
            error_code=ErrorCode.invalid_request,
            error_message="Duplicate topic name.",
        )
        for name in sorted(twice)
    ]
    return make("CreatePartitionsResponse", throttle_time=NO_THROTTLE, results=tuple(results))


# -- DeleteTopics ---------------------------------------------------------------------------------------------------


def _delete_topics(context: RequestContext, request: Any) -> Any:
    """DeleteTopics v1-v6: v1-v5 name topics, v6 names each by name or by id (one of the two). Refused as Kafka's
    controller refuses them: neither or both given, a name or id given twice, an id naming a topic also named."""
    make = context.message.make
    topics = context.endpoint.log_dir.topics

    def result(name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None = None) -> Any:
        return make("DeletableTopicResult", name=name, topic_id=topic_id, error_code=code, error_message=message)

    results = []
    by_name: list[str] = list(getattr(request, "topic_names", ()))
    by_id: list[uuid.UUID] = []
    for state in getattr(request, "topics", ()):
        given_id = state.topic_id is not None and state.topic_id != ZERO_UUID
        if state.name is None and not given_id:
            results.append(
                result(None, ZERO_UUID, ErrorCode.invalid_request, "Neither topic name nor id were specified.")
            )
        elif state.name is not None and given_id:
            results.append(
                result(
                    state.name,
                    state.topic_id,
                    ErrorCode.invalid_request,
                    "You may not specify both topic name and topic id.",
                )
            )
        elif given_id:
            by_id.append(state.topic_id)
        else:
            by_name.append(state.name)
    twice_named, twice_ids = duplicates(by_name), duplicates(by_id)
    results += [result(name, ZERO_UUID, ErrorCode.invalid_request, "Duplicate topic name.") for name in twice_named]
    results += [result(None, topic_id, ErrorCode.invalid_request, "Duplicate topic id.") for topic_id in twice_ids]
    # Every topic to delete, by name, with the id it was given by (None: given by name).
    targets: dict[str, uuid.UUID | None] = {}
    for topic_id in dict.fromkeys(by_id):
        if topic_id in twice_ids:
            continue
        try:
            targets[topics.topic_with_id(topic_id_text(topic_id)).name] = topic_id
        except ANSWERED as error:
            refused = refusal(error)
            unknown = isinstance(error, (UnknownTopicError, InvalidTopicIdError))
            results.append(
                result(None, topic_id, ErrorCode.unknown_topic_id if unknown else refused.code, refused.message)
            )
    for name in dict.fromkeys(by_name):
        if name in twice_named:
            continue
        if name in targets:
            results.append(
                result(
                    name,
                    targets.pop(name) or ZERO_UUID,
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
        else:
            targets[name] = None
    for name, given_id in targets.items():
        try:
            topic_id = topic_uuid(topics.get(name).topic_id)
            topics.delete(name)
            results.append(result(name, topic_id, ErrorCode.none))
        except ANSWERED as error:
            refused = refusal(error)
            # An illegal name is no topic: Kafka answers UNKNOWN_TOPIC_OR_PARTITION.
            code = ErrorCode.unknown_topic_or_partition if isinstance(error, InvalidTopicError) else refused.code
            results.append(result(name, given_id or ZERO_UUID, code, refused.message))
    return make("DeleteTopicsResponse", throttle_time=NO_THROTTLE, responses=tuple(results))


# -- DescribeConfigs ------------------------------------------------------------------------------------------------


def _documentation(key: ConfigKey) -> str:
    """What DescribeConfigs v3+ answers as a config's documentation when asked: what it accepts and its default."""
    default = "none" if key.default is None else repr(key.default)
    return f"{key.name}: accepted: {key.accepted}; Kafka's default: {default}"


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One config of a DescribeConfigs answer: a topic's (``ConfigEntry``) or a broker's, whose value may be null."""

    name: str
    value: str | None
    source: ConfigSource
    synonyms: tuple[ConfigSynonym, ...]
    key: ConfigKey

    @classmethod
    def of_topic(cls, entry: ConfigEntry) -> DescribedConfig:
        return cls(entry.name, entry.value, entry.source, entry.synonyms, TOPIC_CONFIGS[entry.name].key)


def _config_result(
    context: RequestContext,
    entry: DescribedConfig,
    *,
    read_only: bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Any:
    make = context.message.make
    key = entry.key
    synonyms = tuple(
        make("DescribeConfigsSynonym", name=synonym.name, value=synonym.value, source=SOURCE_IDS[synonym.source])
        for synonym in (entry.synonyms if include_synonyms else ())
    )
    return make(
        "DescribeConfigsResourceResult",
        name=entry.name,
        value=entry.value,
        read_only=read_only,
        config_source=SOURCE_IDS[entry.source],
        is_sensitive=False,
        synonyms=synonyms,
        config_type=TYPE_IDS[key.type],
        documentation=_documentation(key) if include_documentation else None,
    )


def broker_config_keys() -> list[ConfigKey]:
    """The broker configs a log directory's ``server.properties`` sets for its topics (every topic config's broker
    synonyms, and ``num.partitions``), sorted by name."""
    keys = {synonym.key.name: synonym.key for config in TOPIC_CONFIGS.values() for synonym in config.synonyms}
    keys[NUM_PARTITIONS.name] = NUM_PARTITIONS
    return [keys[name] for name in sorted(keys)]


def broker_configs(server: ServerProperties) -> list[DescribedConfig]:
    """Each of ``broker_config_keys`` as a broker describes itself: the value in ``server.properties``
    (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG; none for ``log.retention.ms`` and the others that
    only count when set).

    Raises:
        InvalidConfigError: ``server.properties`` holds a value Kafka refuses.
    """
    configs = []
    for key in broker_config_keys():
        layers = []
        value = server.get(key)
        if value is not None:
            layers.append(ConfigSynonym(key.name, key.format(value), ConfigSource.STATIC_BROKER_CONFIG))
        if key.default is not None:
            layers.append(ConfigSynonym(key.name, key.default, ConfigSource.DEFAULT_CONFIG))
        if layers:
            configs.append(DescribedConfig(key.name, layers[0].value, layers[0].source, tuple(layers), key))
        else:
            configs.append(DescribedConfig(key.name, None, ConfigSource.DEFAULT_CONFIG, (), key))
    return configs


def _describe_resource(context: RequestContext, resource: Any, include_synonyms: bool, documented: bool) -> Any:
    """The configs of one DescribeConfigs resource: a topic's, or this endpoint's as a broker (its log directory's
    ``server.properties``); the empty broker name (the cluster's dynamic defaults) has none."""
    logs: LogDirectory = context.endpoint.log_dir
    node_id = context.endpoint.node_id
    configs: list[DescribedConfig]
    if resource.resource_type == ResourceType.TOPIC:
        configs = [DescribedConfig.of_topic(entry) for entry in logs.topics.describe_configs(resource.resource_name)]
        read_only = False
    elif resource.resource_type == ResourceType.BROKER:
        if resource.resource_name == "":
            configs = []
        elif resource.resource_name == str(node_id):
            configs = broker_configs(logs.topics.server_properties())
        else:
            raise Refused(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {node_id} or empty string, but received {resource.resource_name}",
            )
        # The log directory's settings are shared by every process using it: edited in the file, not through here.
        read_only = True
    else:
        raise Refused(
            ErrorCode.invalid_request,
            f"Unsupported resource type {resource.resource_type} for resource {resource.resource_name!r}; accepted: "
            f"{ResourceType.TOPIC.value} (topic) and {ResourceType.BROKER.value} (broker)",
        )
    wanted = set(resource.configuration_keys or ())  # null or empty: every config
    return tuple(
        _config_result(
            context, config, read_only=read_only, include_synonyms=include_synonyms, include_documentation=documented
        )
        for config in configs
        if not wanted or config.name in wanted
    )


def _describe_configs(context: RequestContext, request: Any) -> Any:
    """DescribeConfigs v1-v4: per resource its configs, or its error (an unknown topic: UNKNOWN_TOPIC_OR_PARTITION)."""
    make = context.message.make
    results = []
    for resource in request.resources:
        try:
            configs = _describe_resource(
                context, resource, request.include_synonyms, getattr(request, "include_documentation", False)
            )
            code, message = ErrorCode.none, None
        except ANSWERED as error:
            refused = refusal(error)
            configs, code, message = (), refused.code, refused.message
        results.append(
            make(
                "DescribeConfigsResult",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return make("DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=tuple(results))


# -- IncrementalAlterConfigs ----------------------------------------------------------------------------------------


def _alter_topic_configs(logs: LogDirectory, resource: Any, validate_only: bool) -> TopicMetadata:
    """One topic's IncrementalAlterConfigs: its SET, DELETE, APPEND and SUBTRACT in one change of its configs.

    Raises:
        Refused: INVALID_REQUEST for a config named twice, a value missing or an unknown operation.
    """
    names = [config.name for config in resource.configs]
    if duplicates(names):
        raise Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    null = [c.name for c in resource.configs if c.config_operation != AlterConfigOp.DELETE and c.value is None]
    if null:
        raise Refused(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(null)}")
    set_configs: dict[str, str] = {}
    delete: list[str] = []
    append: dict[str, list[str]] = {}
    subtract: dict[str, list[str]] = {}
    for config in resource.configs:
        if config.config_operation == AlterConfigOp.SET:
            set_configs[config.name] = config.value
        elif config.config_operation == AlterConfigOp.DELETE:
            delete.append(config.name)
        elif config.config_operation in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            values = [value.strip() for value in config.value.split(",")]
            (append if config.config_operation == AlterConfigOp.APPEND else subtract)[config.name] = values
        else:
            raise Refused(
                ErrorCode.invalid_request,
                f"Unknown config operation {config.config_operation} for {config.name}; accepted: "
                + ", ".join(f"{op.value} ({op.name})" for op in AlterConfigOp),
            )
    return logs.topics.alter_configs(
        resource.resource_name, set_configs, delete, append=append, subtract=subtract, validate_only=validate_only
    )


def _alter_resource(context: RequestContext, resource: Any, validate_only: bool) -> None:
    if resource.resource_type == ResourceType.TOPIC:
        _alter_topic_configs(context.endpoint.log_dir, resource, validate_only)
    elif resource.resource_type == ResourceType.BROKER:
        node_id = context.endpoint.node_id
        if resource.resource_name not in ("", str(node_id)):
            raise Refused(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {node_id}, but received {resource.resource_name}",
            )
        raise Refused(
            ErrorCode.invalid_config,
            f"Cannot update these configs dynamically: {', '.join(c.name for c in resource.configs)}; a broker config "
            "of the endpoint is a setting of its log directory's server.properties, shared by every process using "
            "the directory: edit that file (topic configs are altered here)",
        )
    else:
        raise Refused(
            ErrorCode.invalid_request,
            f"Unsupported resource type {resource.resource_type} for resource {resource.resource_name!r}; accepted: "
            f"{ResourceType.TOPIC.value} (topic)",
        )


def _incremental_alter_configs(context: RequestContext, request: Any) -> Any:
    """IncrementalAlterConfigs v0-v1: each resource's changes made together, or refused together."""
    make = context.message.make
    twice = duplicates((resource.resource_type, resource.resource_name) for resource in request.resources)
    responses = []
    for resource in request.resources:
        try:
            if (resource.resource_type, resource.resource_name) in twice:
                raise Refused(ErrorCode.invalid_request, "Each resource must appear at most once.")
            _alter_resource(context, resource, request.validate_only)
            code, message = ErrorCode.none, None
        except ANSWERED as error:
            refused = refusal(error)
            code, message = refused.code, refused.message
        responses.append(
            make(
                "AlterConfigsResourceResponse",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return make("IncrementalAlterConfigsResponse", throttle_time=NO_THROTTLE, responses=tuple(responses))


# -- DeleteRecords --------------------------------------------------------------------------------------------------


def _delete_records(context: RequestContext, request: Any) -> Any:
    """DeleteRecords v0-v2: ``LogDirectory.delete_records`` per partition, its new log start offset as the low
    watermark; each partition's error as Kafka's (unknown partition, offset past the high watermark, a topic whose
    ``cleanup.policy`` lacks ``delete``). Kafka's response has no error message: the engine's goes to the log."""
    make = context.message.make
    logs = context.endpoint.log_dir
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            try:
                low_watermark = logs.delete_records(topic.name, partition.partition_index, partition.offset)
                code = ErrorCode.none
            except ANSWERED as error:
                low_watermark, code = INVALID_LOW_WATERMARK, refusal(error).code
            partitions.append(
                make(
                    "DeleteRecordsPartitionResult",
                    partition_index=partition.partition_index,
                    low_watermark=low_watermark,
                    error_code=code,
                )
            )
        topics.append(make("DeleteRecordsTopicResult", name=topic.name, partitions=tuple(partitions)))
    return make("DeleteRecordsResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


# -- handlers -------------------------------------------------------------------------------------------------------


def _on_engine_threads(answer: Callable[[RequestContext, Any], Any]) -> Handle:
    """The handler answering with ``answer(context, request)``, which blocks on the log directory: each admin call
    is a read-modify-write of its metadata, run whole on the engine's threads."""

    async def handle(context: RequestContext, request: Any) -> Any:
        return await context.endpoint.run_blocking(answer, context, request)

    return handle


APIS = (
    Api(CREATE_TOPICS, 2, 7, _on_engine_threads(_create_topics)),
    Api(DELETE_TOPICS, 1, 6, _on_engine_threads(_delete_topics)),
    Api(DELETE_RECORDS, 0, 2, _on_engine_threads(_delete_records)),
    Api(DESCRIBE_CONFIGS, 1, 4, _on_engine_threads(_describe_configs)),
    Api(CREATE_PARTITIONS, 0, 3, _on_engine_threads(_create_partitions)),
    Api(INCREMENTAL_ALTER_CONFIGS, 0, 1, _on_engine_threads(_incremental_alter_configs)),
)
