"""Spark's Kafka sink options and columns for ``df.write`` / ``df.writeStream.format("pysparklog")``, checked
once and eagerly, and Spark's Arrow batches turned into the producer's input.

A query written for Spark's Kafka sink should run unchanged against a log directory, so the columns, their
types and the refusals are those of ``KafkaWriter`` and ``KafkaSourceProvider`` (Spark 4.x), with Spark's
messages where Spark has one. Unlike Spark, which ignores options it does not know, :meth:`SinkOptions.parse`
refuses them, naming what it accepts: a typo fails when the query is defined, not after a day of writes.

The options, next to Spark's:

============================  ================================  =========================================
option                        Spark's Kafka sink                pysparklog
============================  ================================  =========================================
``path``                      (none: a broker)                  the log directory; ``.save(dir)`` /
                                                                ``.start(dir)`` set it. Required.
``topic``                     the topic of every row; wins      the same (trimmed, as Spark trims it)
                              over a ``topic`` column
``kafka.<producer config>``   passed to ``KafkaProducer``       the configs ``Producer`` implements
                                                                (``batch.size``, ``linger.ms``,
                                                                ``compression.type``, ``acks``,
                                                                ``partitioner.class``, ...) are checked and
                                                                used; every other ``kafka.*`` option
                                                                (``bootstrap.servers``, security, buffer
                                                                sizes) is accepted and ignored
``kafka.key.serializer``,     refused                           refused, with Spark's message
``kafka.value.serializer``
``kafka.transactional.id``    passed on (Spark never calls      the prefix of the transactional ids of an
                              ``initTransactions``, so sends    exactly-once write
                              fail)
``kafka.transaction.          passed on                         how long a transaction may stay open;
timeout.ms``                                                    default 900000, not Kafka's 60000
``deliveryGuarantee``         (none: at least once only)        ``exactly-once`` (default) or
                                                                ``at-least-once``
``autoCreateTopics``          the broker's                      create a missing target topic: ``true``
                              ``auto.create.topics.enable``     or ``false``; unset, as the log
                                                                directory's ``auto.create.topics.enable``
                                                                says (true unless its
                                                                ``server.properties`` turns it off)
``saveMode``                  ``.mode(...)``                    what a batch write does when a target
                                                                topic exists: ``append`` (default),
                                                                ``errorifexists`` / ``error``, ``ignore``
``nullKeyStrategy``           (``partitioner.class`` only)      ``sticky`` (default) or ``round_robin``
============================  ================================  =========================================

``saveMode`` is an option because Spark refuses ``.mode("errorifexists")`` and ``.mode("ignore")`` for every
Python data source (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``) before the source sees them. Spark passes
``checkpointLocation`` and ``queryName`` of a ``writeStream`` to the writer's options too (seen in a local
run); they are Spark's, accepted and not reported as ignored.

Columns (:func:`check_sink_schema`) are matched by exact name, as Spark's ``schema.find(_.name == ...)``
matches them: ``value`` (string or binary, required), ``key`` (string or binary), ``topic`` (string; required
unless the ``topic`` option is given, which then wins and the column is not even checked), ``partition``
(int), ``headers`` (``array<struct<key:string,value:binary>>``) and ``timestamp`` (timestamp, or double
seconds since the epoch as ``Cast(double as timestamp)`` reads it, SPARK-50160). Other columns are
ignored, as Spark's sink ignores them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from pysparklog._compat import StrEnum
from pysparklog.errors import (
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
)
from pysparklog.partitioner import NullKeyStrategy
from pysparklog.producer import ACCEPTED_CONFIGS as _PRODUCER_CONFIGS
from pysparklog.producer import ProducerConfig
from pysparklog.spark.kafka_options import closest_option, parse_boolean, parse_non_empty, spelled_options
from pysparklog.spark.storage_options import StorageSettings, is_storage_option, storage_settings
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.records.arrow_records import HEADER_TYPE
from pysparklog.storage.topics import validate_topic_name

_T = TypeVar("_T")


class DeliveryGuarantee(StrEnum):
    """What a sink write promises once Spark has committed it."""

    #: Every row is in the log once: the sink writes in transactions that commit with Spark's commit.
    EXACTLY_ONCE = "exactly-once"
    #: Every row is in the log at least once: a retried task may write its rows again (Spark's Kafka sink).
    AT_LEAST_ONCE = "at-least-once"


class SaveMode(StrEnum):
    """What a batch write does when a target topic already exists."""

    #: Append to it (Spark's Kafka sink always appends).
    APPEND = "append"
    #: Fail the write (Spark's ``SaveMode.ErrorIfExists``; ``error`` is accepted for it).
    ERROR_IF_EXISTS = "errorifexists"
    #: Write nothing to it (Spark's ``SaveMode.Ignore``).
    IGNORE = "ignore"


PATH = "path"
TOPIC = "topic"
DELIVERY_GUARANTEE = "deliveryGuarantee"
AUTO_CREATE_TOPICS = "autoCreateTopics"
SAVE_MODE = "saveMode"
NULL_KEY_STRATEGY = "nullKeyStrategy"
KAFKA_TRANSACTIONAL_ID = "kafka.transactional.id"
KAFKA_TRANSACTION_TIMEOUT_MS = "kafka.transaction.timeout.ms"

#: The sink's own options, as documented (matching ignores case); ``kafka.*`` producer configs come on top.
SINK_OPTIONS: tuple[str, ...] = (PATH, TOPIC, DELIVERY_GUARANTEE, AUTO_CREATE_TOPICS, SAVE_MODE, NULL_KEY_STRATEGY)

#: Options Spark itself adds to a ``writeStream``'s writer options: accepted, and not reported as ignored.
SPARK_OPTIONS: tuple[str, ...] = ("checkpointLocation", "queryName")

#: The Kafka producer configs the sink checks and hands to ``ProducerConfig``, as ``kafka.<name>`` options.
#: ``transactional.id`` and ``transaction.timeout.ms`` are the sink's own (see :class:`SinkOptions`).
PRODUCER_CONFIGS: tuple[str, ...] = tuple(
    name for name in _PRODUCER_CONFIGS if name not in ("transactional.id", "transaction.timeout.ms")
)

#: Kafka brokers' default ``transaction.max.timeout.ms``. Kafka's producer defaults ``transaction.timeout.ms``
#: to 60000, but a sink transaction stays open from a task's first write until Spark commits the whole
#: micro-batch, which for a large or slow batch takes longer than a minute; a timeout that aborts it would
#: fail the batch. The broker's ceiling is the longest a Kafka user could have asked for.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000

# KafkaSourceProvider.kafkaParamsForProducer, word for word ("as value are" included).
_REJECTED: dict[str, str] = {
    "kafka.key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized with ByteArraySerializer."
    ),
    "kafka.value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are serialized with ByteArraySerializer."
    ),
}
_REJECTED_HINT = " Remove the option and give the column as string or binary: its bytes are written as they are."

# Spark's KafkaWriter / KafkaWriteTask messages.
_NO_TOPIC = "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
_NULL_TOPIC = "null topic present in the data. Use the topic option for setting a default topic."

_BY_LOWER_NAME = {name.lower(): name for name in (*SINK_OPTIONS, KAFKA_TRANSACTIONAL_ID, KAFKA_TRANSACTION_TIMEOUT_MS)}
_SPARK_LOWER_NAMES = frozenset(name.lower() for name in SPARK_OPTIONS)
_PRODUCER_LOWER_NAMES = frozenset(f"kafka.{name}" for name in PRODUCER_CONFIGS)
#: What an unknown option is compared with for a suggestion: every option the sink reads or accepts by name.
_SUGGESTED = (
    *SINK_OPTIONS,
    *(f"kafka.{name}" for name in PRODUCER_CONFIGS),
    KAFKA_TRANSACTIONAL_ID,
    KAFKA_TRANSACTION_TIMEOUT_MS,
    *SPARK_OPTIONS,
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
# A producer config name inside a message from ProducerConfig: not part of a longer dotted name.
_CONFIG_NAME = re.compile(
    r"(?<![\w.])("
    + "|".join(re.escape(name) for name in sorted(PRODUCER_CONFIGS, key=len, reverse=True))
    + r")(?![\w.])"
)
_DELIVERY_GUARANTEES = {g.value: g for g in DeliveryGuarantee}
_SAVE_MODES = {**{m.value: m for m in SaveMode}, "error": SaveMode.ERROR_IF_EXISTS}
_NULL_KEY_STRATEGIES = {**{s.value: s for s in NullKeyStrategy}, "round-robin": NullKeyStrategy.ROUND_ROBIN}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The options of one ``format("pysparklog")`` write, checked; build it with :meth:`parse`.

    Attributes:
        path: The log directory (option ``path``, which ``.save(dir)`` / ``.start(dir)`` set).
        topic: The topic of every row (option ``topic``, trimmed); it wins over a ``topic`` column.
        delivery_guarantee: ``deliveryGuarantee``: exactly-once (the default) or at-least-once.
        auto_create_topics: ``autoCreateTopics``: whether a target topic that does not exist is created; None
            (unset) follows ``auto.create.topics.enable`` of the log directory (``TopicStore.get_or_create``).
        save_mode: ``saveMode``: what a batch write does when a target topic exists (default append).
        producer: The producer's settings, from the ``kafka.<name>`` options of the configs ``Producer``
            implements and ``nullKeyStrategy``. Exactly-once turns idempotence on (it numbers the batches
            that a transaction commits); at-least-once leaves it as the configs say. It carries
            ``transaction_timeout_ms`` but no ``transactional_id``: the writer gives each of its producers an
            id of its own, made from ``transactional_id_prefix``.
        transactional_id_prefix: ``kafka.transactional.id``: the prefix of the sink's transactional ids;
            ``None`` lets the sink derive one.
        transaction_timeout_ms: ``kafka.transaction.timeout.ms``: how long a transaction may stay open
            (default :data:`DEFAULT_TRANSACTION_TIMEOUT_MS`).
        ignored_options: The other ``kafka.*`` options (``kafka.bootstrap.servers``, security settings...),
            accepted so that a migrated query needs no edit, as the caller spelled them, for the writer to log.
        checkpoint_location: The streaming query's ``checkpointLocation``, which Spark passes on: where
            the driver finds the query's id when no task reported it.
        storage_settings: The ``storage.<key>`` options: the object store's settings for this query.
    """

    path: str
    topic: str | None
    delivery_guarantee: DeliveryGuarantee
    auto_create_topics: bool | None
    save_mode: SaveMode
    producer: ProducerConfig
    transactional_id_prefix: str | None
    transaction_timeout_ms: int
    ignored_options: tuple[str, ...]
    checkpoint_location: str | None = None
    storage_settings: StorageSettings = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Check Spark's string options (names in any case) and build the sink's settings.

        Args:
            options: The writer's options; ``.save(dir)`` / ``.start(dir)`` put their argument in ``path``.

        Raises:
            InvalidConfigError: An unknown or refused option, a missing ``path``, a value the option does not
                accept, or options that contradict each other; the message names the options as given
                (``kafka.`` prefix included) and what they accept.
        """
        given, producer_values, spelled, ignored = _known_options(options)
        checkpoint = next((v for k, v in options.items() if k.lower() == "checkpointlocation"), None)
        path, topic = _path(given), _topic(given)
        guarantee = _one_of(given, DELIVERY_GUARANTEE, _DELIVERY_GUARANTEES, DeliveryGuarantee.EXACTLY_ONCE)
        timeout = given.get(KAFKA_TRANSACTION_TIMEOUT_MS)
        timeout_ms = (
            DEFAULT_TRANSACTION_TIMEOUT_MS
            if timeout is None
            else _positive_int(spelled[KAFKA_TRANSACTION_TIMEOUT_MS], timeout)
        )
        producer = _producer_config(producer_values, spelled, guarantee, given.get(NULL_KEY_STRATEGY), timeout_ms)
        transactional_id = given.get(KAFKA_TRANSACTIONAL_ID)
        if transactional_id is not None:
            parse_non_empty(spelled[KAFKA_TRANSACTIONAL_ID], transactional_id)
            if not producer.idempotent:  # Kafka's ProducerConfig refuses it so
                raise InvalidConfigError(
                    f"Cannot set a transactional.id without also enabling idempotence: "
                    f"{spelled[KAFKA_TRANSACTIONAL_ID]} = {transactional_id!r} needs the idempotent producer, which "
                    f"{_idempotence_off_by(producer_values, spelled)} turns off; accepted: "
                    f"{_kafka('enable.idempotence', spelled)} = true (or unset) with kafka.acks = all"
                )
        return cls(
            path=path,
            topic=topic,
            delivery_guarantee=guarantee,
            auto_create_topics=_optional_boolean(given, AUTO_CREATE_TOPICS),
            save_mode=_one_of(given, SAVE_MODE, _SAVE_MODES, SaveMode.APPEND),
            producer=producer,
            transactional_id_prefix=transactional_id,
            transaction_timeout_ms=timeout_ms,
            ignored_options=tuple(ignored),
            checkpoint_location=checkpoint,
            storage_settings=storage_settings(options),
        )


# -- parsing ------------------------------------------------------------------------------------------------


def _known_options(
    options: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str], dict[str, str], list[str]]:
    """(sink options by canonical name, producer configs by Kafka name, option names as spelled by canonical
    or ``kafka.<name>`` lower-case name, ignored options as spelled); refuses everything else."""
    given: dict[str, str] = {}
    producer: dict[str, str] = {}
    spelled: dict[str, str] = {}
    ignored: list[str] = []
    for key, lower, value in spelled_options(options):
        if lower in _REJECTED:
            raise InvalidConfigError(_REJECTED[lower] + _REJECTED_HINT)
        if lower in _BY_LOWER_NAME:
            name = _BY_LOWER_NAME[lower]
            given[name] = value
            spelled[name] = key
        elif lower in _PRODUCER_LOWER_NAMES:
            producer[lower.removeprefix("kafka.")] = value
            spelled[lower] = key
        elif lower.startswith("kafka."):
            ignored.append(key)
        elif lower not in _SPARK_LOWER_NAMES and not is_storage_option(lower):
            raise InvalidConfigError(
                f"option {key!r} is not a pysparklog sink option{closest_option(key, _SUGGESTED)}; accepted: "
                f"{', '.join(SINK_OPTIONS)}, kafka.* "
                f"producer configs: {', '.join(f'kafka.{name}' for name in PRODUCER_CONFIGS)}, "
                f"{KAFKA_TRANSACTIONAL_ID}, {KAFKA_TRANSACTION_TIMEOUT_MS}, and storage.<key> for an object store's "
                "settings; other kafka.* options are accepted and ignored (they configure a broker connection)"
            )
    return given, producer, spelled, ignored


def _producer_config(
    values: Mapping[str, str],
    spelled: Mapping[str, str],
    guarantee: DeliveryGuarantee,
    null_key_strategy: str | None,
    transaction_timeout_ms: int,
) -> ProducerConfig:
    """``ProducerConfig`` from the ``kafka.*`` producer configs; its messages name the options as given.

    It carries the sink's transaction timeout, so that a producer the writer derives from it (with a
    ``transactional_id`` of its own) agrees with :attr:`SinkOptions.transaction_timeout_ms`, but no
    transactional id: ``kafka.transactional.id`` is only the prefix of the ids the writer makes.
    """
    try:
        config = ProducerConfig.from_properties({**values, "transaction.timeout.ms": transaction_timeout_ms})
    except InvalidConfigError as error:
        raise InvalidConfigError(_with_kafka_prefix(str(error), spelled)) from None
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        if config.enable_idempotence is False:
            name = _kafka("enable.idempotence", spelled)
            raise InvalidConfigError(
                f"{DELIVERY_GUARANTEE} = {guarantee.value} needs the idempotent producer, but {name} = "
                f"{values['enable.idempotence']!r} turns it off; accepted: {name} = true (or unset) with "
                f"{DELIVERY_GUARANTEE} = exactly-once, or {DELIVERY_GUARANTEE} = at-least-once"
            )
        try:
            config = dataclasses.replace(config, enable_idempotence=True)
        except InvalidConfigError as error:
            raise InvalidConfigError(
                f"{_with_kafka_prefix(str(error), spelled)} ({DELIVERY_GUARANTEE} = {guarantee.value} needs it); "
                f"accepted: the settings above, or {DELIVERY_GUARANTEE} = at-least-once"
            ) from None
    if null_key_strategy is None:
        return config
    strategy = _NULL_KEY_STRATEGIES.get(null_key_strategy.strip().lower())
    if strategy is None:
        raise InvalidConfigError(
            f"{NULL_KEY_STRATEGY} = {null_key_strategy!r} is invalid; accepted: sticky, round_robin (or round-robin)"
        )
    config = dataclasses.replace(config, null_key_strategy=strategy)
    if "partitioner.class" in values and (
        config.partitioner.custom is not None or config.partitioner.strategy != strategy
    ):
        # ProducerConfig lets Kafka's partitioner class decide: say so rather than drop the option silently.
        raise InvalidConfigError(
            f"{NULL_KEY_STRATEGY} = {null_key_strategy!r} and {_kafka('partitioner.class', spelled)} = "
            f"{values['partitioner.class']!r} both choose where records without a key go, and disagree; accepted: "
            "one of them"
        )
    return config


def _with_kafka_prefix(message: str, spelled: Mapping[str, str]) -> str:
    """A ``ProducerConfig`` message with each Kafka config name replaced by its ``kafka.`` option."""
    return _CONFIG_NAME.sub(lambda match: _kafka(match.group(1), spelled), message)


def _kafka(name: str, spelled: Mapping[str, str]) -> str:
    """The option of Kafka config ``name``, as the caller spelled it when given."""
    return spelled.get(f"kafka.{name}", f"kafka.{name}")


def _idempotence_off_by(values: Mapping[str, str], spelled: Mapping[str, str]) -> str:
    """The options that turned idempotence off, for a message."""
    names = [
        name
        for name in ("enable.idempotence", "acks", "retries", "max.in.flight.requests.per.connection")
        if name in values
    ]
    return ", ".join(f"{_kafka(name, spelled)} = {values[name]!r}" for name in names)


def _path(given: Mapping[str, str]) -> str:
    if PATH not in given:
        raise InvalidConfigError(
            'option path is missing; accepted: the log directory, as .option("path", dir) or .save(dir) / .start(dir)'
        )
    return parse_non_empty(PATH, given[PATH])


def _topic(given: Mapping[str, str]) -> str | None:
    if TOPIC not in given:
        return None
    topic = given[TOPIC].strip()  # KafkaSourceProvider trims it
    try:
        validate_topic_name(topic)
    except InvalidTopicError as error:
        raise InvalidConfigError(
            f"{TOPIC} = {given[TOPIC]!r} is invalid ({error}); accepted: a topic name of ASCII letters, digits, '.', "
            "'_' and '-', at most 249 characters"
        ) from None
    return topic


def _one_of(given: Mapping[str, str], name: str, choices: Mapping[str, _T], default: _T) -> _T:
    if name not in given:
        return default
    value = given[name]
    found = choices.get(value.strip().lower())
    if found is None:
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: {', '.join(choices)}")
    return found


def _optional_boolean(given: Mapping[str, str], name: str) -> bool | None:
    """A boolean option's value; None when it is not given (the log directory's setting then decides)."""
    value = given.get(name)
    return None if value is None else parse_boolean(name, value)


def _positive_int(name: str, value: str) -> int:
    text = value.strip()
    if not _INTEGER.fullmatch(text) or not 1 <= int(text) <= INT_MAX:
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: an integer from 1 to {INT_MAX}")
    return int(text)


# -- columns ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Which of Spark's Kafka sink columns a DataFrame has, checked.

    Attributes:
        value_is_string: ``value`` is a string (else binary); it is always present.
        key: A ``key`` column is present.
        key_is_string: It is a string (else binary, or absent).
        topic: A string ``topic`` column is present (used only without the ``topic`` option).
        partition: A ``partition`` column is present.
        headers: A ``headers`` column is present.
        timestamp: A ``timestamp`` column is present (timestamp, or double seconds).
    """

    value_is_string: bool
    key: bool
    key_is_string: bool
    topic: bool
    partition: bool
    headers: bool
    timestamp: bool


_STRING = (StringType(),)
_STRING_OR_BINARY = (StringType(), BinaryType())
_HEADERS_DOC = "array<struct<key:string,value:binary>>"
_HEADERS_SPARK_TYPE = ArrayType(
    StructType().add("key", StringType()).add("value", BinaryType())  # KafkaRecordToRowConverter.headersType
)


def check_sink_schema(schema: StructType, topic_option: str | None) -> SinkColumns:
    """Spark's ``KafkaWriter.validateQuery`` (and the timestamp check ``KafkaWriteTask`` makes at run time).

    ``value`` (string or binary, required), ``key`` (string or binary), ``topic`` (string; required unless
    ``topic_option``, and not checked when it is given, as Spark does not), ``partition`` (int), ``headers``
    (``array<struct<key:string,value:binary>>``; nullability and the case of the struct's field names do not
    matter, as in Spark's ``sameType``), ``timestamp`` (timestamp, or double seconds since the epoch).
    Columns are found by exact name, the first of a repeated name, as Spark finds them; other columns are
    ignored, as Spark's sink ignores them.

    Raises:
        InvalidConfigError: A missing ``value``, a missing topic (no column, no option) or a column of another
            type, in Spark's words (``"<name> attribute unsupported type <type>. <name> must be a(n) ..."``).
    """
    fields: dict[str, DataType] = {}
    for field in schema.fields:
        fields.setdefault(field.name, field.dataType)

    def check(name: str, accepted: tuple[DataType, ...], doc: str | None = None) -> DataType | None:
        data_type = fields.get(name)
        if data_type is not None and not any(_same_type(data_type, a) for a in accepted):
            desired = doc or " or ".join(a.simpleString() for a in accepted)
            raise InvalidConfigError(
                f"{name} attribute unsupported type {data_type.simpleString()}. {name} must be a(n) {desired}"
            )
        return data_type

    topic = None if topic_option is not None else check(TOPIC, _STRING)
    if topic is None and topic_option is None:
        raise InvalidConfigError(_NO_TOPIC + _case_hint(fields, TOPIC))
    key = check("key", _STRING_OR_BINARY)
    value = check("value", _STRING_OR_BINARY)
    if value is None:
        raise InvalidConfigError("Required attribute 'value' not found" + _case_hint(fields, "value"))
    headers = check("headers", (_HEADERS_SPARK_TYPE,), _HEADERS_DOC)
    partition = check("partition", (IntegerType(),))
    timestamp = check("timestamp", (DoubleType(), TimestampType()))
    topic_column = fields.get(TOPIC)
    return SinkColumns(
        value_is_string=isinstance(value, StringType),
        key=key is not None,
        key_is_string=isinstance(key, StringType),
        topic=isinstance(topic_column, StringType),
        partition=partition is not None,
        headers=headers is not None,
        timestamp=timestamp is not None,
    )


def _same_type(given: DataType, accepted: DataType) -> bool:
    """Spark's ``DataTypeUtils.sameType`` under the default ``spark.sql.caseSensitive=false``: equal but for
    nullability and the case of struct field names. Any string collation counts as a string: its bytes are
    UTF-8 all the same."""
    if isinstance(accepted, StringType):
        return isinstance(given, StringType)
    if isinstance(accepted, ArrayType):
        return isinstance(given, ArrayType) and _same_type(given.elementType, accepted.elementType)
    if isinstance(accepted, StructType):
        return (
            isinstance(given, StructType)
            and len(given.fields) == len(accepted.fields)
            and all(
                g.name.lower() == a.name.lower() and _same_type(g.dataType, a.dataType)
                for g, a in zip(given.fields, accepted.fields, strict=True)
            )
        )
    return type(given) is type(accepted)


def _case_hint(fields: Mapping[str, DataType], name: str) -> str:
    """Why a column that seems to be there was not found: names are matched exactly."""
    near = [field for field in fields if field.lower() == name]
    return f" (column {near[0]!r} is not '{name}': column names are matched exactly)" if near else ""


# -- Arrow batches ------------------------------------------------------------------------------------------

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_MICROS_PER_SECOND = 1_000_000
_LONG_LIMIT = 2.0**63  # micros beyond this (either sign) do not fit a long: Spark's ANSI cast fails on them


def producer_tables(
    batch: pa.RecordBatch, columns: SinkColumns, topic_option: str | None
) -> list[tuple[str, pa.Table]]:
    """One Spark Arrow batch as the Producer's input: per target topic, in first-seen order, a table whose rows
    keep their order.

    Columns: ``value`` (binary; a null stays null, a tombstone), ``key`` (binary, when ``columns.key``),
    ``partition`` (int32, when ``columns.partition``), ``headers`` (``HEADER_TYPE``, when ``columns.headers``)
    and ``timestamp`` (``timestamp[us, tz=UTC]``, when ``columns.timestamp``; null lets the producer stamp
    the record). Strings become their UTF-8 bytes by a zero-copy cast; Spark's ``large_*`` types (with
    ``spark.sql.execution.arrow.useLargeVarTypes``) are narrowed, their data buffers shared, unless a batch
    holds more than 2 GiB of a column, which stays ``large_binary`` (the producer takes either). Spark stamps
    timestamps with the session time zone: the instants are kept and only the zone becomes UTC. A double
    timestamp is seconds since the epoch, truncated to microseconds as Spark's cast does. A batch without
    rows gives no tables.

    Args:
        batch: The rows, as Spark hands them to a Python Arrow writer.
        columns: :func:`check_sink_schema` of the DataFrame's schema.
        topic_option: The ``topic`` option: it wins over the ``topic`` column.

    Raises:
        PySparkLogError: A null topic (Spark's message, with where), a null header or header key (Kafka's
            headers have non-null keys), or a timestamp Kafka refuses (negative) or a double that is no instant.
        InvalidConfigError: A column ``columns`` names is missing or of a type the sink does not accept.
    """
    if batch.num_rows == 0:
        return []
    arrays: dict[str, pa.Array] = {"value": _binary(_column(batch, "value"), "value")}
    if columns.key:
        arrays["key"] = _binary(_column(batch, "key"), "key")
    if columns.partition:
        arrays["partition"] = _partitions(_column(batch, "partition"))
    if columns.headers:
        arrays["headers"] = _headers(_column(batch, "headers"))
    if columns.timestamp:
        arrays["timestamp"] = _timestamps(_column(batch, "timestamp"))
    table = pa.Table.from_pydict(arrays)
    if topic_option is not None:
        return [(topic_option, table)]
    if not columns.topic:
        raise InvalidConfigError(_NO_TOPIC)
    return _split_by_topic(table, _column(batch, TOPIC))


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    """The first column named ``name``, as Spark's writer takes the first attribute of a name."""
    try:
        return batch.column(batch.schema.names.index(name))
    except ValueError:
        raise InvalidRecordError(
            f"column {name!r} is missing from the batch; the columns given are {batch.schema.names}"
        ) from None


def _binary(array: pa.Array, name: str) -> pa.Array:
    """A string or binary column as binary: the same buffers, nulls kept."""
    if array.type in (pa.string(), pa.binary()):
        return array.view(pa.binary())
    if array.type in (pa.large_string(), pa.large_binary()):
        try:
            return array.cast(pa.binary())
        except (pa.ArrowInvalid, OverflowError):  # more than 2 GiB: int32 offsets cannot address it
            return array.view(pa.large_binary())
    raise InvalidConfigError(f"{name} attribute unsupported type {array.type}. {name} must be a(n) string or binary")


def _partitions(array: pa.Array) -> pa.Array:
    if not pa.types.is_integer(array.type):
        raise InvalidConfigError(f"partition attribute unsupported type {array.type}. partition must be a(n) int")
    return array if array.type == pa.int32() else array.cast(pa.int32())


def _headers(array: pa.Array) -> pa.Array:
    """Spark's headers (``list<struct<key:string,value:binary>>``, every level nullable, ``large_*`` children
    with ``useLargeVarTypes``) as ``HEADER_TYPE``: entries rebuilt by position, so Spark's list child name and
    the struct fields' names and nullability do not matter. A null list (no headers) stays null."""
    value_type = array.type.value_type if pa.types.is_list(array.type) or pa.types.is_large_list(array.type) else None
    if value_type is None or not pa.types.is_struct(value_type) or value_type.num_fields != 2:
        raise InvalidRecordError(
            f"headers attribute unsupported type {array.type}. headers must be a(n) {_HEADERS_DOC}"
        )
    entries = array.flatten()  # the entries of the non-null lists, in order
    if entries.null_count:
        raise InvalidRecordError(
            f"null header present in the data (row {_row_of_entry(array, entries.is_null())}); accepted: headers "
            "whose entries are (key, value) structs, or a null headers column for none"
        )
    key, value = entries.flatten()
    if key.null_count:
        raise InvalidRecordError(
            f"null header key present in the data (row {_row_of_entry(array, key.is_null())}): Kafka header keys "
            "cannot be null; accepted: a string key (the value may be null)"
        )
    structs = pa.StructArray.from_arrays(
        [_string(key, "headers.key"), _binary(value, "headers.value")], fields=list(HEADER_TYPE.value_type)
    )
    lengths = pc.fill_null(pc.list_value_length(array), 0).cast(pa.int32())
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
    return pa.ListArray.from_arrays(offsets, structs, type=HEADER_TYPE, mask=array.is_null())


def _row_of_entry(lists: pa.Array, bad_entries: pa.Array) -> int:
    """The row of the first flagged entry of ``lists.flatten()``."""
    first = pc.index(bad_entries, True).as_py()
    return int(pc.list_parent_indices(lists)[first].as_py())


def _string(array: pa.Array, name: str) -> pa.Array:
    if array.type == pa.string():
        return array
    if array.type == pa.large_string():
        return array.cast(pa.string())
    raise InvalidRecordError(f"column {name!r} has type {array.type}; accepted: string")


def _timestamps(array: pa.Array) -> pa.Array:
    """Timestamps as ``timestamp[us, tz=UTC]``, refused where Kafka's ``ProducerRecord`` refuses them (negative
    milliseconds; Spark drops the microseconds, truncating, before it hands them over)."""
    if pa.types.is_timestamp(array.type):
        if array.type.unit != "us":  # not from Spark: finer units are truncated, coarser ones checked for overflow
            array = array.cast(pa.timestamp("us", tz=array.type.tz), safe=array.type.unit != "ns")
        micros = array.view(pa.int64())
    elif pa.types.is_floating(array.type):
        micros = _seconds_to_micros(array)
    else:
        raise InvalidRecordError(
            f"timestamp attribute unsupported type {array.type}. timestamp must be a(n) double or timestamp"
        )
    least = pc.min(micros).as_py()
    if least is not None and least <= -1000:  # -999 us truncates to 0 ms, which Kafka takes
        row = pc.index(micros, least).as_py()
        raise InvalidTimestampError(
            f"Invalid timestamp: {-(-least // 1000)} (row {row}). Timestamp should always be non-negative or null; "
            "accepted: instants from 1970-01-01T00:00:00Z on"
        )
    return micros.view(_TIMESTAMP)


def _seconds_to_micros(array: pa.Array) -> pa.Array:
    """Double seconds as int64 microseconds, truncated toward zero (``Cast(double as timestamp)``); NaN, the
    infinities and values beyond a long are refused, as Spark's ANSI cast (the Spark 4 default) refuses them."""
    micros = pc.multiply(array.cast(pa.float64()), float(_MICROS_PER_SECOND))
    fits = pc.fill_null(pc.and_(pc.is_finite(micros), pc.less(pc.abs(micros), _LONG_LIMIT)), True)  # null: now
    if not pc.all(fits).as_py():
        row = pc.index(fits, False).as_py()
        raise InvalidTimestampError(
            f"timestamp {array[row].as_py()!r} (row {row}) is not an instant; accepted: seconds since the epoch, "
            "finite and within the range of a timestamp"
        )
    return pc.trunc(micros).cast(pa.int64())


def _split_by_topic(table: pa.Table, topics: pa.Array) -> list[tuple[str, pa.Table]]:
    """``table``'s rows grouped by ``topics``: one stable sort, then zero-copy slices."""
    if not (pa.types.is_string(topics.type) or pa.types.is_large_string(topics.type)):
        raise InvalidRecordError(f"topic attribute unsupported type {topics.type}. topic must be a(n) string")
    if topics.null_count:
        first = pc.index(topics.is_null(), True).as_py()
        raise InvalidRecordError(
            f"{_NULL_TOPIC} ({topics.null_count} of {len(topics)} rows of the batch have a null topic, the first "
            f"at row {first})"
        )
    encoded = pc.dictionary_encode(topics)  # the dictionary is in first-seen order
    names = encoded.dictionary.to_pylist()
    if len(names) == 1:
        return [(names[0], table)]
    order = pc.array_sort_indices(encoded.indices)  # stable: rows keep their order within a topic
    counts = pc.value_counts(encoded.indices)
    count_of = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))
    grouped = table.take(order)
    result: list[tuple[str, pa.Table]] = []
    start = 0
    for index, name in enumerate(names):  # the sort put topic 0's rows first, then topic 1's...
        result.append((name, grouped.slice(start, count_of[index])))
        start += count_of[index]
    return result
