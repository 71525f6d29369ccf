"""``pysparklog.spark.sink_options``: Spark's Kafka sink options, parsed eagerly; the sink's columns checked as Spark's
``KafkaWriter`` checks them; Spark's Arrow batches turned into the producer's per-topic tables.

Expected messages are Spark's (``KafkaSourceProvider``, ``KafkaWriter``, ``KafkaWriteTask``) or Kafka's
(``ProducerConfig``) unless a test says why pysparklog says more. No Spark session: the Arrow batches are
built with the types ``to_arrow_schema`` gives, which are what Spark hands a Python Arrow writer (checked once
in a local run: the session time zone on timestamps, ``large_*`` types with ``useLargeVarTypes``, non-null
fields and a list child named ``element`` for non-nullable columns).
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pysparklog import LogDirectory
from pysparklog.errors import InvalidConfigError, InvalidRecordError, InvalidTimestampError, PySparkLogError
from pysparklog.partitioner import NullKeyStrategy
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.spark.sink_options import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    PRODUCER_CONFIGS,
    SINK_OPTIONS,
    DeliveryGuarantee,
    SaveMode,
    SinkColumns,
    SinkOptions,
    check_sink_schema,
    producer_tables,
)
from pysparklog.storage.records.arrow_records import HEADER_TYPE
from pysparklog.storage.records.codecs import Codec
from tests.conftest import read_all

ROUND_ROBIN_PARTITIONER = "org.apache.kafka.clients.producer.RoundRobinPartitioner"
HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
INT_MAX = 2**31 - 1


def parse(**options: str) -> SinkOptions:
    return SinkOptions.parse({"path": "/logs", **options})


def refused(options: dict[str, Any]) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        SinkOptions.parse(options)
    return str(raised.value)


# -- defaults and option names ------------------------------------------------------------------------------


def test_defaults() -> None:
    options = SinkOptions.parse({"path": "/logs"})
    assert options.path == "/logs"
    assert options.topic is None
    assert options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert options.auto_create_topics is None  # the log directory's auto.create.topics.enable decides
    assert options.save_mode is SaveMode.APPEND
    assert options.transactional_id_prefix is None
    assert options.transaction_timeout_ms == DEFAULT_TRANSACTION_TIMEOUT_MS == 900_000
    assert options.ignored_options == ()
    # Kafka's producer defaults, with idempotence on: exactly-once needs it.
    producer = options.producer
    assert producer == ProducerConfig(enable_idempotence=True, transaction_timeout_ms=900_000)
    assert producer.idempotent is True
    assert producer.null_key_strategy is NullKeyStrategy.STICKY
    assert producer.transactional_id is None  # kafka.transactional.id is a prefix, not the producer's id


def test_enum_values_are_the_option_values() -> None:
    assert [g.value for g in DeliveryGuarantee] == ["exactly-once", "at-least-once"]
    assert [m.value for m in SaveMode] == ["append", "errorifexists", "ignore"]


def test_option_names_ignore_case() -> None:
    # PySpark hands the options over lower-cased; a caller may also use any case.
    for options in (
        {
            "PATH": "/logs",
            "TOPIC": "orders",
            "DELIVERYGUARANTEE": "At-Least-Once",
            "AutoCreateTopics": "FALSE",
            "SAVEMODE": "Ignore",
            "NullKeyStrategy": "ROUND-ROBIN",
            "Kafka.Compression.Type": "gzip",
            "KAFKA.TRANSACTIONAL.ID": "app",
            "kafka.Transaction.Timeout.MS": "120000",
        },
        {
            "path": "/logs",
            "topic": "orders",
            "deliveryguarantee": "at-least-once",
            "autocreatetopics": "false",
            "savemode": "ignore",
            "nullkeystrategy": "round-robin",
            "kafka.compression.type": "gzip",
            "kafka.transactional.id": "app",
            "kafka.transaction.timeout.ms": "120000",
        },
    ):
        parsed = SinkOptions.parse(options)
        assert parsed.path == "/logs"
        assert parsed.topic == "orders"
        assert parsed.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE
        assert parsed.auto_create_topics is False
        assert parsed.save_mode is SaveMode.IGNORE
        assert parsed.producer.null_key_strategy is NullKeyStrategy.ROUND_ROBIN
        assert parsed.producer.compression_type == "gzip"
        assert parsed.transactional_id_prefix == "app"
        assert parsed.transaction_timeout_ms == 120_000


def test_the_same_option_in_two_spellings_is_refused() -> None:
    message = refused({"path": "/logs", "topic": "a", "TOPIC": "b"})
    assert "'topic' and 'TOPIC'" in message and "names ignore case" in message


def test_non_string_names_and_values_are_refused() -> None:
    assert "accepted: string names and values" in refused({"path": "/logs", "kafka.linger.ms": 5})
    assert "accepted: a mapping" in refused([("path", "/logs")])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "closest"),
    [
        ("topik", "topic"),
        ("deliveryguarante", "deliveryGuarantee"),  # as Spark hands it over: lower-cased
        ("nullKeyStrategie", "nullKeyStrategy"),
        ("checkpointLocaton", "checkpointLocation"),
        ("bogus", None),
    ],
)
def test_an_unknown_option_is_named_as_received_with_the_closest_accepted_spelling(
    given: str, closest: str | None
) -> None:
    message = refused({"path": "/logs", given: "x"})
    suggestion = "" if closest is None else f" (did you mean {closest}?)"
    assert message.startswith(f"option {given!r} is not a pysparklog sink option{suggestion}; accepted: path, ")


def test_unknown_options_are_refused_listing_the_accepted_ones() -> None:
    message = refused({"path": "/logs", "subscribe": "orders"})
    assert "'subscribe' is not a pysparklog sink option" in message
    for name in SINK_OPTIONS:
        assert name in message
    for name in PRODUCER_CONFIGS:
        assert f"kafka.{name}" in message
    assert "kafka.transactional.id" in message and "kafka.transaction.timeout.ms" in message
    assert "other kafka.* options are accepted and ignored" in message


def test_spark_s_own_stream_options_are_accepted_and_not_reported() -> None:
    # A local writeStream passed both to the writer's options, lower-cased.
    parsed = SinkOptions.parse({"path": "/logs", "checkpointlocation": "/ckpt", "queryName": "q"})
    assert parsed.ignored_options == ()
    assert parsed.path == "/logs"


def test_other_kafka_options_are_ignored_as_spelled_in_order() -> None:
    parsed = SinkOptions.parse(
        {
            "path": "/logs",
            "kafka.bootstrap.servers": "broker:9092",
            "KAFKA.security.protocol": "SASL_SSL",
            "kafka.buffer.memory": "not even a number",
            "kafka.compression.type": "lz4",
        }
    )
    assert parsed.ignored_options == ("kafka.bootstrap.servers", "KAFKA.security.protocol", "kafka.buffer.memory")
    assert parsed.producer.compression_type == "lz4"


@pytest.mark.parametrize(
    ("option", "noun"),
    [("kafka.key.serializer", "keys are"), ("KAFKA.Value.Serializer", "value are")],
)
def test_serializers_are_refused_with_spark_s_message(option: str, noun: str) -> None:
    name = option.lower().removeprefix("kafka.")
    message = refused({"path": "/logs", option: "org.apache.kafka.common.serialization.StringSerializer"})
    # KafkaSourceProvider.kafkaParamsForProducer, word for word ("value are" is Spark's).
    assert message.startswith(f"Kafka option '{name}' is not supported as {noun} serialized with ByteArraySerializer.")


# -- path and topic -----------------------------------------------------------------------------------------


def test_path_is_required() -> None:
    message = refused({"topic": "orders"})
    assert "option path is missing" in message
    assert '.option("path", dir)' in message and ".save(dir)" in message and ".start(dir)" in message


@pytest.mark.parametrize("path", ["", "   "])
def test_path_must_not_be_blank(path: str) -> None:
    assert "path = " in refused({"path": path}) and "accepted: a non-empty string" in refused({"path": path})


def test_topic_is_trimmed_as_spark_trims_it() -> None:
    assert parse(topic="  orders ").topic == "orders"


@pytest.mark.parametrize("topic", ["", "  ", "a b", "..", "x" * 250])
def test_an_illegal_topic_is_refused(topic: str) -> None:
    message = refused({"path": "/logs", "topic": topic})
    assert message.startswith(f"topic = {topic!r} is invalid")
    assert "accepted: a topic name of ASCII letters, digits, '.', '_' and '-'" in message


# -- deliveryGuarantee, autoCreateTopics, saveMode, nullKeyStrategy ----------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("exactly-once", DeliveryGuarantee.EXACTLY_ONCE),
        ("EXACTLY-ONCE", DeliveryGuarantee.EXACTLY_ONCE),
        (" Exactly-Once ", DeliveryGuarantee.EXACTLY_ONCE),
        ("at-least-once", DeliveryGuarantee.AT_LEAST_ONCE),
        ("AT-LEAST-ONCE", DeliveryGuarantee.AT_LEAST_ONCE),
    ],
)
def test_delivery_guarantee(value: str, expected: DeliveryGuarantee) -> None:
    assert parse(deliveryGuarantee=value).delivery_guarantee is expected


@pytest.mark.parametrize("value", ["exactly_once", "once", ""])
def test_an_unknown_delivery_guarantee_is_refused(value: str) -> None:
    message = refused({"path": "/logs", "deliveryGuarantee": value})
    assert message == f"deliveryGuarantee = {value!r} is invalid; accepted: exactly-once, at-least-once"


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("FALSE", False), (" False ", False), ("True", True)])
def test_auto_create_topics(value: str, expected: bool) -> None:
    assert parse(autoCreateTopics=value).auto_create_topics is expected


def test_an_auto_create_topics_other_than_a_boolean_is_refused() -> None:
    assert refused({"path": "/logs", "autoCreateTopics": "yes"}) == (
        "autoCreateTopics = 'yes' is invalid; accepted: true, false"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("append", SaveMode.APPEND),
        ("APPEND", SaveMode.APPEND),
        ("errorifexists", SaveMode.ERROR_IF_EXISTS),
        ("ErrorIfExists", SaveMode.ERROR_IF_EXISTS),
        ("error", SaveMode.ERROR_IF_EXISTS),  # Spark's alias
        ("ERROR", SaveMode.ERROR_IF_EXISTS),
        ("ignore", SaveMode.IGNORE),
        ("Ignore", SaveMode.IGNORE),
    ],
)
def test_save_mode(value: str, expected: SaveMode) -> None:
    assert parse(saveMode=value).save_mode is expected


@pytest.mark.parametrize("value", ["overwrite", "default", "error-if-exists"])
def test_an_unknown_save_mode_is_refused(value: str) -> None:
    message = refused({"path": "/logs", "saveMode": value})
    assert message == f"saveMode = {value!r} is invalid; accepted: append, errorifexists, ignore, error"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("sticky", NullKeyStrategy.STICKY),
        ("STICKY", NullKeyStrategy.STICKY),
        ("round_robin", NullKeyStrategy.ROUND_ROBIN),
        ("round-robin", NullKeyStrategy.ROUND_ROBIN),
        ("Round-Robin", NullKeyStrategy.ROUND_ROBIN),
    ],
)
def test_null_key_strategy_reaches_the_partitioner(value: str, expected: NullKeyStrategy) -> None:
    producer = parse(nullKeyStrategy=value).producer
    assert producer.null_key_strategy is expected
    assert producer.partitioner.strategy is expected
    assert producer.partitioner.ignore_keys is False  # unlike Kafka's RoundRobinPartitioner, keys still count


def test_an_unknown_null_key_strategy_is_refused() -> None:
    assert refused({"path": "/logs", "nullKeyStrategy": "random"}) == (
        "nullKeyStrategy = 'random' is invalid; accepted: sticky, round_robin (or round-robin)"
    )


def test_a_null_key_strategy_the_partitioner_class_overrides_is_refused() -> None:
    message = refused(
        {"path": "/logs", "nullKeyStrategy": "sticky", "kafka.partitioner.class": ROUND_ROBIN_PARTITIONER}
    )
    assert "nullKeyStrategy = 'sticky' and kafka.partitioner.class" in message and "disagree" in message
    # Two that agree are fine.
    agreeing = parse(nullKeyStrategy="round_robin", **{"kafka.partitioner.class": ROUND_ROBIN_PARTITIONER})
    assert agreeing.producer.partitioner.strategy is NullKeyStrategy.ROUND_ROBIN


# -- producer configs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "attribute", "expected"),
    [
        ("kafka.batch.size", "65536", "batch_size", 65536),
        ("kafka.linger.ms", " 20 ", "linger_ms", 20),
        ("kafka.compression.type", "zstd", "compression_type", "zstd"),
        ("kafka.max.request.size", "2097152", "max_request_size", 2_097_152),
        ("kafka.max.in.flight.requests.per.connection", "3", "max_in_flight_requests_per_connection", 3),
        ("kafka.client.id", "sink", "client_id", "sink"),
        ("kafka.acks", "-1", "acks", "-1"),
        ("kafka.retries", "7", "retries", 7),
        ("kafka.retry.backoff.ms", "250", "retry_backoff_ms", 250),
        ("kafka.delivery.timeout.ms", "30000", "delivery_timeout_ms", 30_000),
        ("kafka.metadata.max.age.ms", "1000", "metadata_max_age_ms", 1000),
        ("kafka.enable.idempotence", "TRUE", "enable_idempotence", True),
        ("kafka.partitioner.ignore.keys", "true", "partitioner_ignore_keys", True),
        ("kafka.partitioner.class", ROUND_ROBIN_PARTITIONER, "partitioner_class", ROUND_ROBIN_PARTITIONER),
    ],
)
def test_producer_configs_reach_the_producer(option: str, value: str, attribute: str, expected: object) -> None:
    assert getattr(parse(**{option: value}).producer, attribute) == expected


def test_every_producer_config_is_covered() -> None:
    assert set(PRODUCER_CONFIGS) == {
        "acks",
        "batch.size",
        "client.id",
        "compression.type",
        "delivery.timeout.ms",
        "enable.idempotence",
        "linger.ms",
        "max.in.flight.requests.per.connection",
        "max.request.size",
        "metadata.max.age.ms",
        "partitioner.class",
        "partitioner.ignore.keys",
        "retries",
        "retry.backoff.ms",
    }


def test_compression_and_kafka_s_partitioner_classes_take_effect() -> None:
    producer = parse(**{"kafka.compression.type": "zstd", "kafka.partitioner.class": ROUND_ROBIN_PARTITIONER}).producer
    assert producer.codec is Codec.ZSTD
    # Kafka's RoundRobinPartitioner: round robin for every record, keys ignored.
    assert producer.partitioner.strategy is NullKeyStrategy.ROUND_ROBIN
    assert producer.partitioner.ignore_keys is True
    assert producer.partitioner.custom is None


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [
        ("kafka.batch.size", "big", "accepted: an integer from 0 to 2147483647"),
        ("kafka.batch.size", "-1", "accepted: an integer from 0 to 2147483647"),
        ("kafka.linger.ms", "1.5", "accepted: an integer from 0 to 9223372036854775807"),
        ("kafka.compression.type", "brotli", "accepted: one of none, gzip, snappy, lz4, zstd"),
        ("kafka.acks", "0", "accepted: one of all, -1, 1"),
        ("kafka.enable.idempotence", "maybe", "accepted: true or false"),
        ("kafka.partitioner.ignore.keys", "1", "accepted: true or false"),
        ("kafka.max.in.flight.requests.per.connection", "0", "accepted: an integer from 1 to 2147483647"),
        ("kafka.partitioner.class", "no.such.Partitioner", "accepted: a callable or the import path of one"),
    ],
)
def test_a_bad_producer_value_is_refused_naming_the_kafka_option(option: str, value: str, accepted: str) -> None:
    message = refused({"path": "/logs", "deliveryGuarantee": "at-least-once", option: value})
    assert message.startswith(f"{option} = {value!r} ")
    assert accepted in message


def test_a_bad_producer_value_is_named_as_spelled() -> None:
    message = refused({"path": "/logs", "Kafka.Batch.Size": "x"})
    assert message == "Kafka.Batch.Size = 'x' is invalid; accepted: an integer from 0 to 2147483647"


# -- delivery guarantees and idempotence --------------------------------------------------------------------


def test_exactly_once_refuses_idempotence_turned_off() -> None:
    message = refused({"path": "/logs", "kafka.enable.idempotence": "false"})
    assert "deliveryGuarantee = exactly-once needs the idempotent producer" in message
    assert "kafka.enable.idempotence = 'false' turns it off" in message
    assert "accepted: kafka.enable.idempotence = true (or unset)" in message
    assert "deliveryGuarantee = at-least-once" in message


@pytest.mark.parametrize(
    ("option", "value", "kafka_message"),
    [
        ("kafka.acks", "1", "Must set kafka.acks to all in order to use the idempotent producer"),
        ("kafka.retries", "0", "Must set kafka.retries to non-zero in order to use the idempotent producer"),
        (
            "kafka.max.in.flight.requests.per.connection",
            "6",
            "Must set kafka.max.in.flight.requests.per.connection to at most 5 in order to use the idempotent",
        ),
    ],
)
def test_exactly_once_refuses_settings_that_turn_idempotence_off(option: str, value: str, kafka_message: str) -> None:
    message = refused({"path": "/logs", option: value})
    assert message.startswith(kafka_message)  # Kafka's message, with the option's name
    assert "deliveryGuarantee = exactly-once needs it" in message and "deliveryGuarantee = at-least-once" in message


def test_at_least_once_keeps_what_the_producer_settings_say() -> None:
    default = parse(deliveryGuarantee="at-least-once").producer
    assert default.enable_idempotence is None and default.idempotent is True  # Kafka's default: on
    off = parse(deliveryGuarantee="at-least-once", **{"kafka.enable.idempotence": "false"}).producer
    assert off.enable_idempotence is False and off.idempotent is False
    acks_one = parse(deliveryGuarantee="at-least-once", **{"kafka.acks": "1"}).producer
    assert acks_one.enable_idempotence is None and acks_one.idempotent is False  # turned off, as Kafka does


def test_exactly_once_turns_idempotence_on() -> None:
    producer = parse(**{"kafka.enable.idempotence": "true"}).producer
    assert producer.enable_idempotence is True and producer.idempotent is True


# -- transactions -------------------------------------------------------------------------------------------


def test_transactional_id_is_the_prefix_and_not_the_producer_s_id() -> None:
    options = parse(**{"kafka.transactional.id": "orders-sink"})
    assert options.transactional_id_prefix == "orders-sink"
    assert options.producer.transactional_id is None


@pytest.mark.parametrize("value", ["", "  "])
def test_a_blank_transactional_id_is_refused(value: str) -> None:
    message = refused({"path": "/logs", "kafka.transactional.id": value})
    assert message == f"kafka.transactional.id = {value!r} is invalid; accepted: a non-empty string"


@pytest.mark.parametrize(
    ("option", "value"), [("kafka.enable.idempotence", "false"), ("kafka.acks", "1"), ("kafka.retries", "0")]
)
def test_a_transactional_id_without_idempotence_is_refused(option: str, value: str) -> None:
    message = refused(
        {"path": "/logs", "deliveryGuarantee": "at-least-once", "kafka.transactional.id": "app", option: value}
    )
    assert message.startswith("Cannot set a transactional.id without also enabling idempotence")  # Kafka's
    assert "kafka.transactional.id = 'app'" in message and f"{option} = {value!r}" in message


def test_transaction_timeout() -> None:
    options = parse(**{"kafka.transaction.timeout.ms": " 3600000 "})
    assert options.transaction_timeout_ms == 3_600_000
    assert options.producer.transaction_timeout_ms == 3_600_000  # a producer derived from it agrees
    assert parse(**{"kafka.transaction.timeout.ms": str(INT_MAX)}).transaction_timeout_ms == INT_MAX


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "15m", "", str(INT_MAX + 1)])
def test_a_bad_transaction_timeout_is_refused(value: str) -> None:
    message = refused({"path": "/logs", "KAFKA.transaction.timeout.ms": value})
    assert message == f"KAFKA.transaction.timeout.ms = {value!r} is invalid; accepted: an integer from 1 to {INT_MAX}"


def test_options_survive_pickling() -> None:
    # Spark pickles the writer, and the options with it, to the executors.
    options = parse(
        topic="orders",
        deliveryGuarantee="at-least-once",
        nullKeyStrategy="round-robin",
        **{"kafka.compression.type": "zstd", "kafka.transactional.id": "app", "kafka.bootstrap.servers": "b:9092"},
    )
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options
    assert copy.producer.idempotent is True and copy.producer.partitioner.strategy is NullKeyStrategy.ROUND_ROBIN


# -- the schema ---------------------------------------------------------------------------------------------


def schema(**columns: DataType) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in columns.items()])


def check_refused(struct: StructType, topic_option: str | None = "t") -> str:
    with pytest.raises(InvalidConfigError) as raised:
        check_sink_schema(struct, topic_option)
    return str(raised.value)


def test_the_smallest_schema_is_a_value_and_the_topic_option() -> None:
    assert check_sink_schema(schema(value=BinaryType()), "orders") == SinkColumns(
        value_is_string=False,
        key=False,
        key_is_string=False,
        topic=False,
        partition=False,
        headers=False,
        timestamp=False,
    )


def test_every_sink_column() -> None:
    columns = check_sink_schema(
        schema(
            key=StringType(),
            value=StringType(),
            topic=StringType(),
            partition=IntegerType(),
            headers=HEADERS,
            timestamp=TimestampType(),
            other=MapType(StringType(), LongType()),  # ignored, as Spark's sink ignores it
        ),
        None,
    )
    assert columns == SinkColumns(
        value_is_string=True,
        key=True,
        key_is_string=True,
        topic=True,
        partition=True,
        headers=True,
        timestamp=True,
    )


def test_a_missing_value_is_refused_with_spark_s_message() -> None:
    assert check_refused(schema(key=BinaryType())) == "Required attribute 'value' not found"
    # Names are matched exactly, as Spark matches them; say so when the case is all that differs.
    assert check_refused(schema(VALUE=BinaryType())) == (
        "Required attribute 'value' not found (column 'VALUE' is not 'value': column names are matched exactly)"
    )


def test_a_missing_topic_is_refused_with_spark_s_message() -> None:
    message = check_refused(schema(value=BinaryType()), None)
    assert message == (
        "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
    )


def test_the_topic_option_makes_the_topic_column_irrelevant() -> None:
    # Spark's topicExpression takes the option and never looks at the column, whatever its type.
    columns = check_sink_schema(schema(value=BinaryType(), topic=IntegerType()), "orders")
    assert columns.topic is False
    assert check_sink_schema(schema(value=BinaryType(), topic=StringType()), "orders").topic is True


@pytest.mark.parametrize(
    ("column", "data_type", "flag", "expected"),
    [
        ("value", StringType(), "value_is_string", True),
        ("value", BinaryType(), "value_is_string", False),
        ("value", StringType("UTF8_LCASE"), "value_is_string", True),  # a collation changes no bytes
        ("key", StringType(), "key_is_string", True),
        ("key", BinaryType(), "key_is_string", False),
        ("partition", IntegerType(), "partition", True),
        ("headers", HEADERS, "headers", True),
        ("headers", ArrayType(HEADERS.elementType, containsNull=False), "headers", True),  # nullability aside
        (
            "headers",
            ArrayType(StructType([StructField("KEY", StringType(), False), StructField("Value", BinaryType())])),
            "headers",
            True,
        ),  # field names match ignoring case, as Spark's sameType does by default
        ("timestamp", TimestampType(), "timestamp", True),
        ("timestamp", DoubleType(), "timestamp", True),  # seconds since the epoch (SPARK-50160)
    ],
)
def test_accepted_column_types(column: str, data_type: DataType, flag: str, expected: bool) -> None:
    fields = {"value": BinaryType(), column: data_type}
    assert getattr(check_sink_schema(schema(**fields), "t"), flag) is expected


@pytest.mark.parametrize(
    ("column", "data_type", "message"),
    [
        ("value", IntegerType(), "value attribute unsupported type int. value must be a(n) string or binary"),
        ("key", LongType(), "key attribute unsupported type bigint. key must be a(n) string or binary"),
        ("partition", LongType(), "partition attribute unsupported type bigint. partition must be a(n) int"),
        ("partition", StringType(), "partition attribute unsupported type string. partition must be a(n) int"),
        (
            "headers",
            MapType(StringType(), BinaryType()),
            "headers attribute unsupported type map<string,binary>. headers must be a(n) "
            "array<struct<key:string,value:binary>>",
        ),
        (
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())])),
            "headers attribute unsupported type array<struct<key:string,value:string>>. headers must be a(n) "
            "array<struct<key:string,value:binary>>",
        ),
        (
            "headers",
            ArrayType(StructType([StructField("name", StringType()), StructField("value", BinaryType())])),
            "headers attribute unsupported type array<struct<name:string,value:binary>>",
        ),
        (
            "timestamp",
            LongType(),
            "timestamp attribute unsupported type bigint. timestamp must be a(n) double or timestamp",
        ),
        (
            "timestamp",
            TimestampNTZType(),
            "timestamp attribute unsupported type timestamp_ntz. timestamp must be a(n) double or timestamp",
        ),
    ],
)
def test_refused_column_types(column: str, data_type: DataType, message: str) -> None:
    fields = {"value": BinaryType(), column: data_type}
    assert check_refused(schema(**fields)).startswith(message)


def test_a_topic_column_of_another_type_is_refused_without_the_option() -> None:
    message = check_refused(schema(value=BinaryType(), topic=BinaryType()), None)
    assert message == "topic attribute unsupported type binary. topic must be a(n) string"


def test_the_first_of_a_repeated_column_counts() -> None:
    repeated = StructType([StructField("value", StringType()), StructField("value", IntegerType())])
    assert check_sink_schema(repeated, "t").value_is_string is True
    reversed_ = StructType([StructField("value", IntegerType()), StructField("value", StringType())])
    assert "value attribute unsupported type int" in check_refused(reversed_)


# -- Arrow batches ------------------------------------------------------------------------------------------


def spark_batch(struct: StructType, rows: list[dict[str, Any]], *, time_zone: str = "UTC") -> pa.RecordBatch:
    """Rows as Spark hands them to a Python Arrow writer: ``to_arrow_schema`` with the session's time zone."""
    return pa.RecordBatch.from_pylist(rows, schema=to_arrow_schema(struct, timezone=time_zone))


def tables(batch: pa.RecordBatch, struct: StructType, topic_option: str | None) -> list[tuple[str, pa.Table]]:
    return producer_tables(batch, check_sink_schema(struct, topic_option), topic_option)


KV = schema(key=StringType(), value=StringType())
TOPICS = schema(topic=StringType(), value=StringType())


def test_strings_become_their_utf8_bytes_without_a_copy() -> None:
    batch = spark_batch(KV, [{"key": "k", "value": "vé"}, {"key": None, "value": None}, {"key": "", "value": ""}])
    [(topic, table)] = tables(batch, KV, "orders")
    assert topic == "orders"
    assert table.schema == pa.schema([("value", pa.binary()), ("key", pa.binary())])
    assert table.column("value").to_pylist() == ["vé".encode(), None, b""]  # None: a tombstone
    assert table.column("key").to_pylist() == [b"k", None, b""]
    source, converted = batch.column(1), table.column("value").chunk(0)
    assert converted.buffers()[2].address == source.buffers()[2].address  # the same data buffer


def test_binary_columns_pass_through() -> None:
    struct = schema(key=BinaryType(), value=BinaryType())
    batch = spark_batch(struct, [{"key": b"\x00\xff", "value": b"\x01"}, {"key": None, "value": None}])
    [(_, table)] = tables(batch, struct, "t")
    assert table.column("value").to_pylist() == [b"\x01", None]
    assert table.column("key").to_pylist() == [b"\x00\xff", None]


def test_large_types_are_narrowed() -> None:
    # What Spark hands over with spark.sql.execution.arrow.useLargeVarTypes=true.
    struct = schema(key=StringType(), value=BinaryType(), topic=StringType())
    arrow = to_arrow_schema(struct, timezone="UTC", prefers_large_types=True)
    assert arrow.types == [pa.large_string(), pa.large_binary(), pa.large_string()]
    batch = pa.RecordBatch.from_pylist(
        [{"key": "a", "value": b"1", "topic": "x"}, {"key": None, "value": b"2", "topic": "y"}], schema=arrow
    )
    result = tables(batch, struct, None)
    assert [topic for topic, _ in result] == ["x", "y"]
    assert result[0][1].schema.field("key").type == pa.binary()
    assert result[0][1].column("key").to_pylist() == [b"a"]
    assert result[1][1].column("value").to_pylist() == [b"2"]


def test_only_sink_columns_reach_the_producer() -> None:
    struct = schema(value=StringType(), topic=StringType(), extra=LongType())
    batch = spark_batch(struct, [{"value": "v", "topic": "t", "extra": 1}])
    [(topic, table)] = tables(batch, struct, None)
    assert topic == "t"
    assert table.column_names == ["value"]


def test_the_topic_option_wins_over_the_column() -> None:
    batch = spark_batch(TOPICS, [{"topic": "a", "value": "1"}, {"topic": None, "value": "2"}])
    [(topic, table)] = tables(batch, TOPICS, "orders")
    assert topic == "orders"
    assert table.column("value").to_pylist() == [b"1", b"2"]  # a null topic does not matter then


def test_rows_are_split_by_topic_in_first_seen_order_keeping_their_order() -> None:
    topics = ["b", "a", "b", "c", "a", "b"]
    batch = spark_batch(TOPICS, [{"topic": t, "value": str(i)} for i, t in enumerate(topics)])
    result = [(topic, table.column("value").to_pylist()) for topic, table in tables(batch, TOPICS, None)]
    assert result == [("b", [b"0", b"2", b"5"]), ("a", [b"1", b"4"]), ("c", [b"3"])]


def test_every_column_follows_its_row_to_its_topic() -> None:
    struct = schema(topic=StringType(), key=StringType(), value=StringType(), partition=IntegerType())
    rows: list[dict[str, Any]] = [
        {"topic": "t1" if i % 3 else "t0", "key": f"k{i}", "value": f"v{i}", "partition": i} for i in range(9)
    ]
    for topic, table in tables(spark_batch(struct, rows), struct, None):
        expected = [row for row in rows if row["topic"] == topic]
        assert table.column("key").to_pylist() == [row["key"].encode() for row in expected]
        assert table.column("value").to_pylist() == [row["value"].encode() for row in expected]
        assert table.column("partition").to_pylist() == [row["partition"] for row in expected]


def test_a_large_batch_splits_as_a_row_by_row_split_would() -> None:
    rng = random.Random(7)
    topics = [f"t{rng.randrange(7)}" for _ in range(20_000)]
    batch = spark_batch(TOPICS, [{"topic": t, "value": str(i)} for i, t in enumerate(topics)])
    expected: dict[str, list[bytes]] = {}
    for i, topic in enumerate(topics):
        expected.setdefault(topic, []).append(str(i).encode())
    result = tables(batch, TOPICS, None)
    assert [(topic, table.column("value").to_pylist()) for topic, table in result] == list(expected.items())
    assert all(type(topic) is str for topic, _ in result)


def test_one_topic_keeps_the_table_whole() -> None:
    batch = spark_batch(TOPICS, [{"topic": "a", "value": str(i)} for i in range(5)])
    [(topic, table)] = tables(batch, TOPICS, None)
    assert topic == "a" and table.column("value").to_pylist() == [str(i).encode() for i in range(5)]


def test_a_null_topic_is_refused_with_spark_s_message() -> None:
    batch = spark_batch(TOPICS, [{"topic": "a", "value": "1"}, {"topic": None, "value": "2"}])
    with pytest.raises(PySparkLogError) as raised:
        tables(batch, TOPICS, None)
    assert not isinstance(raised.value, InvalidConfigError)  # the data is at fault, not the configuration
    assert str(raised.value) == (
        "null topic present in the data. Use the topic option for setting a default topic. (1 of 2 rows of the "
        "batch have a null topic, the first at row 1)"
    )


def test_an_empty_batch_gives_no_tables() -> None:
    assert tables(spark_batch(TOPICS, []), TOPICS, None) == []
    assert tables(spark_batch(TOPICS, []), TOPICS, "orders") == []


def test_a_missing_topic_column_with_no_option_is_refused() -> None:
    batch = spark_batch(schema(value=StringType()), [{"value": "v"}])
    columns = check_sink_schema(schema(value=StringType()), "t")
    with pytest.raises(InvalidConfigError, match="topic option required when no 'topic' attribute is present"):
        producer_tables(batch, columns, None)


def test_a_column_the_batch_lacks_is_refused() -> None:
    columns = check_sink_schema(KV, "t")
    with pytest.raises(InvalidRecordError, match="column 'key' is missing from the batch"):
        producer_tables(spark_batch(schema(value=StringType()), [{"value": "v"}]), columns, "t")


def test_partitions_are_int32_and_nulls_let_the_partitioner_decide() -> None:
    struct = schema(value=StringType(), partition=IntegerType())
    batch = spark_batch(struct, [{"value": "a", "partition": 2}, {"value": "b", "partition": None}])
    [(_, table)] = tables(batch, struct, "t")
    assert table.schema.field("partition").type == pa.int32()
    assert table.column("partition").to_pylist() == [2, None]


# -- headers ------------------------------------------------------------------------------------------------

WITH_HEADERS = schema(value=StringType(), headers=HEADERS)


def test_headers_become_the_producer_s_header_type() -> None:
    rows: list[dict[str, Any]] = [
        {"value": "a", "headers": [{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}]},
        {"value": "b", "headers": None},  # no headers
        {"value": "c", "headers": []},
        {"value": "d", "headers": [{"key": "", "value": b""}]},
    ]
    [(_, table)] = tables(spark_batch(WITH_HEADERS, rows), WITH_HEADERS, "t")
    assert table.schema.field("headers").type == HEADER_TYPE
    assert table.column("headers").to_pylist() == [row["headers"] for row in rows]


def test_headers_of_a_sliced_batch() -> None:
    rows: list[dict[str, Any]] = [
        {"value": str(i), "headers": [{"key": f"h{i}", "value": bytes([i])}] * (i % 3)} for i in range(8)
    ]
    batch = spark_batch(WITH_HEADERS, rows).slice(3, 4)
    [(_, table)] = tables(batch, WITH_HEADERS, "t")
    assert table.column("headers").to_pylist() == [row["headers"] for row in rows[3:7]]


def test_headers_as_spark_hands_non_nullable_and_large_ones_over() -> None:
    # Non-nullable Spark fields come as "not null" Arrow fields and a list child named "element"; with
    # useLargeVarTypes the children are large_string / large_binary.
    entry = pa.struct([pa.field("key", pa.large_string(), False), pa.field("value", pa.large_binary(), False)])
    arrow = pa.schema(
        [
            pa.field("value", pa.large_string(), False),
            pa.field("headers", pa.list_(pa.field("element", entry, False)), False),
        ]
    )
    rows: list[dict[str, Any]] = [{"value": "a", "headers": [{"key": "h", "value": b"1"}, {"key": "i", "value": b"2"}]}]
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow)
    [(_, table)] = producer_tables(batch, check_sink_schema(WITH_HEADERS, "t"), "t")
    assert table.schema.field("headers").type == HEADER_TYPE
    assert table.column("headers").to_pylist() == [rows[0]["headers"]]


def test_a_null_header_key_is_refused_clearly() -> None:
    rows: list[dict[str, Any]] = [
        {"value": "a", "headers": [{"key": "ok", "value": b"1"}]},
        {"value": "b", "headers": None},
        {"value": "c", "headers": [{"key": "fine", "value": b"2"}, {"key": None, "value": b"3"}]},
    ]
    with pytest.raises(PySparkLogError) as raised:
        tables(spark_batch(WITH_HEADERS, rows), WITH_HEADERS, "t")
    assert str(raised.value).startswith("null header key present in the data (row 2): Kafka header keys cannot be null")


def test_a_null_header_key_of_a_sliced_batch_names_the_batch_s_row() -> None:
    rows: list[dict[str, Any]] = [{"value": str(i), "headers": [{"key": "k", "value": b""}]} for i in range(6)]
    rows[4]["headers"] = [{"key": None, "value": b""}]
    batch = spark_batch(WITH_HEADERS, rows).slice(2, 3)
    with pytest.raises(PySparkLogError, match=r"null header key present in the data \(row 2\)"):
        tables(batch, WITH_HEADERS, "t")


def test_a_null_header_is_refused_clearly() -> None:
    rows: list[dict[str, Any]] = [{"value": "a", "headers": [{"key": "ok", "value": b"1"}, None]}]
    with pytest.raises(PySparkLogError, match=r"null header present in the data \(row 0\)"):
        tables(spark_batch(WITH_HEADERS, rows), WITH_HEADERS, "t")


# -- timestamps ---------------------------------------------------------------------------------------------

WITH_TIMESTAMP = schema(value=StringType(), timestamp=TimestampType())
MICROS = 1_700_000_000_123_456  # 2023-11-14T22:13:20.123456Z


def timestamps_of(batch: pa.RecordBatch, struct: StructType) -> pa.ChunkedArray:
    [(_, table)] = tables(batch, struct, "t")
    column: pa.ChunkedArray = table.column("timestamp")
    return column


@pytest.mark.parametrize("time_zone", ["UTC", "Etc/UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_timestamps_keep_their_instant_in_utc(time_zone: str) -> None:
    # Spark stamps the Arrow type with the session time zone; the values are UTC microseconds all the same.
    rows: list[dict[str, Any]] = [{"value": "a", "timestamp": MICROS}, {"value": "b", "timestamp": None}]
    batch = spark_batch(WITH_TIMESTAMP, rows, time_zone=time_zone)
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz=time_zone)
    column = timestamps_of(batch, WITH_TIMESTAMP)
    assert column.type == pa.timestamp("us", tz="UTC")
    assert column.cast(pa.int64()).to_pylist() == [MICROS, None]  # None: the producer stamps it


@pytest.mark.parametrize(
    ("seconds", "micros"),
    [(1.5, 1_500_000), (1_700_000_000.123456, 1_700_000_000_123_456), (0.0, 0), (2.0000009, 2_000_000), (None, None)],
)
def test_double_timestamps_are_seconds_truncated_to_microseconds(seconds: float | None, micros: int | None) -> None:
    struct = schema(value=StringType(), timestamp=DoubleType())
    column = timestamps_of(spark_batch(struct, [{"value": "a", "timestamp": seconds}]), struct)
    assert column.type == pa.timestamp("us", tz="UTC")
    assert column.cast(pa.int64()).to_pylist() == [micros]


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), float("-inf"), 1e300])
def test_double_timestamps_that_are_no_instant_are_refused(seconds: float) -> None:
    struct = schema(value=StringType(), timestamp=DoubleType())
    batch = spark_batch(struct, [{"value": "a", "timestamp": 1.0}, {"value": "b", "timestamp": seconds}])
    with pytest.raises(PySparkLogError, match=r"\(row 1\) is not an instant; accepted: seconds since the epoch"):
        tables(batch, struct, "t")


def test_negative_timestamps_are_refused_as_kafka_refuses_them() -> None:
    batch = spark_batch(WITH_TIMESTAMP, [{"value": "a", "timestamp": 0}, {"value": "b", "timestamp": -2_500}])
    with pytest.raises(InvalidTimestampError) as raised:
        tables(batch, WITH_TIMESTAMP, "t")
    assert str(raised.value).startswith(
        "Invalid timestamp: -2 (row 1). Timestamp should always be non-negative or null"
    )
    # Spark drops the microseconds (truncating) before Kafka looks: -999 us is 0 ms, which Kafka takes.
    fine = spark_batch(WITH_TIMESTAMP, [{"value": "a", "timestamp": -999}])
    assert timestamps_of(fine, WITH_TIMESTAMP).cast(pa.int64()).to_pylist() == [-999]


# -- into the log -------------------------------------------------------------------------------------------


def test_the_tables_are_what_the_producer_takes(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("a", 1)
    logs.topics.create("b", 2)
    struct = schema(
        topic=StringType(),
        key=StringType(),
        value=BinaryType(),
        partition=IntegerType(),
        headers=HEADERS,
        timestamp=TimestampType(),
    )
    rows: list[dict[str, Any]] = [
        {
            "topic": "a" if i % 2 else "b",
            "key": f"k{i}" if i != 3 else None,
            "value": bytes([i]) if i != 5 else None,
            "partition": i % 4 // 2 if i % 2 == 0 else 0,  # b: 0, 1, 0, 1; a has one partition
            "headers": [{"key": "i", "value": str(i).encode()}, {"key": "n", "value": None}] if i % 3 else None,
            "timestamp": MICROS + i * 1000,
        }
        for i in range(8)
    ]
    batch = spark_batch(struct, rows, time_zone="America/Los_Angeles")
    with Producer(logs, parse(deliveryGuarantee="at-least-once").producer) as producer:
        for topic, table in tables(batch, struct, None):
            producer.send_arrow(topic, table)

    def record(topic: str, partition: int, read: dict[str, Any]) -> dict[str, Any]:
        return {
            "topic": topic,
            "key": read["key"].decode() if read["key"] is not None else None,
            "value": read["value"],
            "partition": partition,
            "headers": read["headers"],
            "timestamp": int(read["timestamp"].timestamp() * 1_000_000),
        }

    for topic, partitions in (("a", 1), ("b", 2)):
        for partition in range(partitions):
            with logs.partition(topic, partition) as log:
                read = read_all(log, include_headers=True).to_pylist()
            expected = [
                {**row, "timestamp": row["timestamp"] // 1000 * 1000}  # Kafka keeps milliseconds
                for row in rows
                if row["topic"] == topic and row["partition"] == partition
            ]
            assert [record(topic, partition, r) for r in read] == expected  # in the batch's order
