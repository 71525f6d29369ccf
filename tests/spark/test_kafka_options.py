"""``pysparklog.spark.kafka_options``: Spark's Kafka source options, parsed eagerly, and resolved against a log
directory.

Expected messages and rules are Spark's (``KafkaSourceProvider``, ``JsonUtils``, ``KafkaOffsetReaderAdmin``)
unless a test says why pysparklog is stricter.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog.errors import InvalidConfigError, InvalidLogDirectoryError, InvalidOffsetError, UnknownTopicError
from pysparklog.spark.kafka_options import (
    EARLIEST,
    LATEST,
    SOURCE_OPTIONS,
    OffsetRangeLimit,
    SourceOptions,
    earliest_offsets,
    format_offsets,
    latest_offsets,
    offsets_to_dict,
    parse_offsets,
    parse_partition_offsets,
    parse_partition_timestamps,
    resolve_batch,
    resolve_end,
    resolve_start,
    source_log_dir,
    subscribed_partitions,
)
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topics import TOPICS_FILE
from pysparklog.structs import TopicPartition

TP = TopicPartition
LONG_MAX = 2**63 - 1


def stream(**options: str) -> SourceOptions:
    return SourceOptions.parse({"path": "/logs", "subscribe": "t", **options}, streaming=True)


def batch(**options: str) -> SourceOptions:
    return SourceOptions.parse({"path": "/logs", "subscribe": "t", **options}, streaming=False)


def refused(options: dict[str, str], *, streaming: bool = True) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        SourceOptions.parse(options, streaming=streaming)
    return str(raised.value)


# -- defaults and option names ------------------------------------------------------------------------------


def test_stream_defaults() -> None:
    options = stream()
    assert options.path == "/logs"
    assert options.streaming is True
    assert (options.assign, options.subscribe, options.subscribe_pattern) == (None, ("t",), None)
    assert options.strategy == "subscribe"
    assert options.starting_offsets == OffsetRangeLimit("latest")
    assert options.ending_offsets is None
    assert options.timestamp_strategy == "error"
    assert options.fail_on_data_loss is True
    assert options.max_offsets_per_trigger is None
    assert options.min_offsets_per_trigger is None
    assert options.max_trigger_delay_ms == 15 * 60 * 1000
    assert options.min_partitions is None
    assert options.max_records_per_partition is None
    assert options.include_headers is False
    assert options.isolation_level == "read_uncommitted"
    assert options.read_committed is False
    assert options.group_id is None
    assert options.assignor == "range"
    assert options.initial_offsets_location is None
    assert options.ignored_options == ()
    assert options.warnings == ()


def test_batch_defaults_read_from_earliest_to_latest() -> None:
    options = batch()
    assert options.streaming is False
    assert options.starting_offsets == OffsetRangeLimit("earliest")
    assert options.ending_offsets == OffsetRangeLimit("latest")


def test_option_names_ignore_case_as_spark_options_do() -> None:
    options = SourceOptions.parse(
        {"PATH": "/logs", "SubscribePattern": "t.*", "STARTINGOFFSETS": "earliest", "maxoffsetspertrigger": "5"},
        streaming=True,
    )
    assert options.subscribe_pattern == "t.*"
    assert options.starting_offsets == OffsetRangeLimit("earliest", "startingOffsets")
    assert options.max_offsets_per_trigger == 5


def test_the_same_option_twice_in_different_case_is_refused() -> None:
    message = refused({"path": "/logs", "subscribe": "a", "Subscribe": "b"})
    assert "'subscribe'" in message and "'Subscribe'" in message and "same option" in message


@pytest.mark.parametrize("options", [{"path": 3}, {4: "x"}, {"path": None}])
def test_names_and_values_must_be_strings(options: dict[object, object]) -> None:
    message = refused(options)  # type: ignore[arg-type]
    assert "accepted: string names and values" in message


def test_options_must_be_a_mapping() -> None:
    assert "accepted: a mapping" in refused([("path", "/logs")])  # type: ignore[arg-type]


def test_unknown_option_is_named_with_the_accepted_ones() -> None:
    message = refused({"path": "/logs", "subscribe": "t", "startingOffset": "earliest"})
    assert "'startingOffset'" in message
    for name in (*SOURCE_OPTIONS, "groupIdPrefix", "kafka.*"):
        assert name in message


@pytest.mark.parametrize(
    ("given", "closest"),
    [
        ("startingOffset", "startingOffsets"),
        ("startingoffset", "startingOffsets"),  # as Spark hands it over: lower-cased
        ("STARTING_OFFSETS", "startingOffsets"),
        ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
        ("subscribepatern", "subscribePattern"),
        ("groupIdPrefx", "groupIdPrefix"),  # an ignored option is still one a typo may mean
        ("bogus", None),
    ],
)
def test_an_unknown_option_is_named_as_received_with_the_closest_accepted_spelling(
    given: str, closest: str | None
) -> None:
    """Spark lower-cases the names (``'startingoffset'``); the suggestion gives back the guide's spelling."""
    message = refused({"path": "/logs", "subscribe": "t", given: "earliest"})
    suggestion = "" if closest is None else f" (did you mean {closest}?)"
    assert message.startswith(f"option {given!r} is not a pysparklog source option{suggestion}; accepted: assign, ")
    assert "\n" not in message


@pytest.mark.parametrize(
    "name",
    [
        "kafka.bootstrap.servers",
        "KAFKA.BOOTSTRAP.SERVERS",
        "kafka.security.protocol",
        "kafka.metadata.max.age.ms",
        "groupIdPrefix",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
    ],
)
def test_broker_connection_options_are_accepted_and_reported_ignored(name: str) -> None:
    options = stream(**{name: "x"})
    assert options.ignored_options == (name,)


@pytest.mark.parametrize(
    ("name", "spark_message"),
    [
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported. Instead set the source option"),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys are deserialized"),
        ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported as values are deserialized"),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("Kafka.Interceptor.Classes", "Kafka option 'interceptor.classes' is not supported"),
    ],
)
def test_kafka_options_spark_refuses_are_refused_with_its_message(name: str, spark_message: str) -> None:
    assert spark_message in refused({"path": "/logs", "subscribe": "t", name: "x"})


def test_auto_offset_reset_message_points_to_starting_offsets() -> None:
    message = refused({"path": "/logs", "subscribe": "t", "kafka.auto.offset.reset": "earliest"})
    assert "'startingoffsets' to 'earliest' or 'latest'" in message


def test_path_is_required_and_not_empty() -> None:
    assert "option path is missing" in refused({"subscribe": "t"})
    assert "path = ' '" in refused({"subscribe": "t", "path": " "})


# -- the subscription ---------------------------------------------------------------------------------------


def test_exactly_one_subscription_option() -> None:
    none = refused({"path": "/logs"})
    assert none.startswith("One of the following options must be specified for Kafka source: assign, subscribe, ")
    several = refused({"path": "/logs", "subscribe": "t", "subscribePattern": "t.*"})
    assert several.startswith("Only one of the following options can be specified for Kafka source")
    assert "Given: subscribe, subscribePattern" in several


def test_subscribe_is_a_comma_list_trimmed_without_blanks_or_repeats() -> None:
    assert stream(subscribe=" a, b ,,a ,c").subscribe == ("a", "b", "c")


def test_subscribe_without_topics_is_refused() -> None:
    message = refused({"path": "/logs", "subscribe": " , "})
    assert "No topics to subscribe to as specified value for option 'subscribe' is ' , '" in message


def test_subscribe_pattern_is_kept_trimmed_and_checked() -> None:
    options = SourceOptions.parse({"path": "/logs", "subscribePattern": " orders-.* "}, streaming=True)
    assert options.subscribe_pattern == "orders-.*"
    assert options.strategy == "subscribePattern"
    assert "Pattern to subscribe is empty" in refused({"path": "/logs", "subscribePattern": "  "})
    assert "not a valid regular expression" in refused({"path": "/logs", "subscribePattern": "orders-("})


def test_assign_takes_topic_partition_lists() -> None:
    options = SourceOptions.parse({"path": "/logs", "assign": '{"b": [1, 0], "a": [2, 1, 1]}'}, streaming=True)
    assert options.assign == (TP("b", 1), TP("b", 0), TP("a", 2), TP("a", 1))
    assert options.strategy == "assign"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("t:0", "No topicpartitions to assign as specified value for option 'assign' is 't:0'"),
        ('{"t": [0,', "accepted: JSON like"),
        ('{"t": 0}', "topic 't' must be a non-empty name with a list"),
        ('{"": [0]}', "topic '' must be a non-empty name with a list"),
        ('{"t": [true]}', "partition True of 't' is not an integer >= 0"),
        ('{"t": [-1]}', "partition -1 of 't' is not an integer >= 0"),
        ('{"t": [1.0]}', "partition 1.0 of 't' is not an integer >= 0"),
        ('{"t": [2147483648]}', "partition 2147483648 of 't' is not an integer >= 0"),
        ('{"t": [0], "t": [1]}', "key t repeats"),
        ("[1]", "No topicpartitions to assign as specified value for option 'assign' is '[1]'"),
    ],
)
def test_assign_json_is_strict(value: str, reason: str) -> None:
    message = refused({"path": "/logs", "assign": value})
    assert reason in message
    assert '{"topicA":[0,1],"topicB":[0,1]}' in message


# -- starting and ending offsets ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["earliest", " EARLIEST ", "Earliest"])
def test_starting_offsets_earliest_in_any_case(value: str) -> None:
    assert stream(startingOffsets=value).starting_offsets.kind == "earliest"


def test_starting_offsets_json_with_sentinels_in_a_stream() -> None:
    limit = stream(startingOffsets='{"t": {"1": -1, "0": 23, "2": -2}}').starting_offsets
    assert limit.kind == "specific_offsets"
    assert limit.option == "startingOffsets"
    assert limit.values == ((TP("t", 0), 23), (TP("t", 1), LATEST), (TP("t", 2), EARLIEST))
    assert limit.by_partition() == {TP("t", 0): 23, TP("t", 1): -1, TP("t", 2): -2}


def test_starting_precedence_timestamp_then_by_timestamp_then_offsets() -> None:
    options = stream(startingOffsets="earliest", startingOffsetsByTimestamp='{"t": {"0": 5}}', startingTimestamp="7")
    assert options.starting_offsets == OffsetRangeLimit("global_timestamp", "startingTimestamp", timestamp=7)
    assert options.warnings == (
        "startingOffsetsByTimestamp option ignored: startingTimestamp takes precedence",
        "startingOffsets option ignored: startingTimestamp takes precedence",
    )
    options = stream(startingOffsets="earliest", startingOffsetsByTimestamp='{"t": {"0": 5}}')
    assert options.starting_offsets == OffsetRangeLimit(
        "specific_timestamps", "startingOffsetsByTimestamp", ((TP("t", 0), 5),)
    )
    assert options.warnings == ("startingOffsets option ignored: startingOffsetsByTimestamp takes precedence",)


def test_an_overridden_option_is_not_checked_as_spark_never_reads_it() -> None:
    assert batch(startingTimestamp="1", startingOffsets="latest").starting_offsets.kind == "global_timestamp"


@pytest.mark.parametrize("value", ["x", "1.5", "", "-1", "9223372036854775808"])
def test_starting_timestamp_is_one_non_negative_long(value: str) -> None:
    message = refused({"path": "/logs", "subscribe": "t", "startingTimestamp": value})
    assert f"Expected a single long value, got {value.strip()}" in message
    assert "startingTimestamp" in message


@pytest.mark.parametrize(("value", "strategy"), [("error", "error"), ("latest", "latest"), (" LATEST ", "latest")])
def test_timestamp_strategy(value: str, strategy: str) -> None:
    assert stream(startingOffsetsByTimestampStrategy=value).timestamp_strategy == strategy


def test_unknown_timestamp_strategy_is_refused() -> None:
    message = refused({"path": "/logs", "subscribe": "t", "startingOffsetsByTimestampStrategy": "earliest"})
    assert "startingOffsetsByTimestampStrategy = 'earliest' is invalid; accepted: error, latest" in message


@pytest.mark.parametrize("name", ["endingOffsets", "ENDINGOFFSETS"])
def test_ending_offsets_refused_in_a_stream_with_sparks_message(name: str) -> None:
    assert "ending offset not valid in streaming queries" in refused({"path": "/l", "subscribe": "t", name: "latest"})


@pytest.mark.parametrize("name", ["endingOffsetsByTimestamp", "endingTimestamp"])
def test_ending_timestamps_refused_in_a_stream_with_sparks_message(name: str) -> None:
    message = refused({"path": "/l", "subscribe": "t", name: '{"t": {"0": 1}}'})
    assert "ending timestamp not valid in streaming queries" in message
    assert name in message


def test_batch_refuses_a_latest_start() -> None:
    message = refused({"path": "/l", "subscribe": "t", "startingOffsets": "latest"}, streaming=False)
    assert "starting offset can't be latest for batch queries on Kafka" in message
    message = refused({"path": "/l", "subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, streaming=False)
    assert "startingOffsets for t-0 can't be latest for batch queries on Kafka" in message


def test_batch_refuses_an_earliest_end() -> None:
    message = refused({"path": "/l", "subscribe": "t", "endingOffsets": "earliest"}, streaming=False)
    assert "ending offset can't be earliest for batch queries on Kafka" in message
    message = refused({"path": "/l", "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, streaming=False)
    assert "ending offset for t-0 can't be earliest for batch queries on Kafka" in message


def test_batch_ending_options_and_precedence() -> None:
    options = batch(endingOffsets='{"t": {"0": 5}}', endingTimestamp="9")
    assert options.ending_offsets == OffsetRangeLimit("global_timestamp", "endingTimestamp", timestamp=9)
    assert options.warnings == ("endingOffsets option ignored: endingTimestamp takes precedence",)
    options = batch(endingOffsetsByTimestamp='{"t": {"0": 9}}')
    assert options.ending_offsets is not None and options.ending_offsets.kind == "specific_timestamps"


def test_batch_start_and_end_offsets_must_name_the_same_partitions() -> None:
    message = refused(
        {"path": "/l", "subscribe": "t", "startingOffsets": '{"t": {"0": 1}}', "endingOffsets": '{"t": {"1": 5}}'},
        streaming=False,
    )
    assert "The specified start offset and end offset should have the same topic-partitions" in message
    assert "start offset: [t-0], topic-partitions for end offset: [t-1]" in message


@pytest.mark.parametrize(
    ("start_name", "end_name"),
    [("startingOffsets", "endingOffsets"), ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp")],
)
def test_batch_start_after_end_is_refused(start_name: str, end_name: str) -> None:
    message = refused(
        {"path": "/l", "subscribe": "t", start_name: '{"t": {"0": 7}}', end_name: '{"t": {"0": 5}}'}, streaming=False
    )
    assert "The specified start offset 7 is greater than the end offset 5 for topic t partition 0" in message


def test_batch_sentinels_are_not_compared_before_resolution() -> None:
    options = batch(startingOffsets='{"t": {"0": -2, "1": 9}}', endingOffsets='{"t": {"0": 3, "1": -1}}')
    assert options.ending_offsets is not None and options.ending_offsets.kind == "specific_offsets"


def test_batch_start_and_end_of_different_kinds_are_not_compared() -> None:
    assert batch(startingOffsets='{"t": {"0": 9}}', endingTimestamp="5").ending_offsets is not None


# -- flags and numbers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("FALSE", False), (" True ", True)])
def test_booleans(value: str, expected: bool) -> None:
    assert stream(failOnDataLoss=value).fail_on_data_loss is expected
    assert stream(includeHeaders=value).include_headers is expected


@pytest.mark.parametrize("name", ["failOnDataLoss", "includeHeaders"])
def test_booleans_refuse_other_words(name: str) -> None:
    assert f"{name} = 'yes' is invalid; accepted: true, false" in refused({"path": "/l", "subscribe": "t", name: "yes"})


@pytest.mark.parametrize("name", ["maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxRecordsPerPartition"])
def test_positive_longs(name: str) -> None:
    attribute = {
        "maxOffsetsPerTrigger": "max_offsets_per_trigger",
        "minOffsetsPerTrigger": "min_offsets_per_trigger",
        "maxRecordsPerPartition": "max_records_per_partition",
    }[name]
    assert getattr(stream(**{name: " 9223372036854775807 "}), attribute) == LONG_MAX
    for value in ("0", "-5", "1.5", "1e3", "ten", "", "1_000", "9223372036854775808"):
        message = refused({"path": "/l", "subscribe": "t", name: value})
        assert f"{name} must be positive: {name} = {value!r} is invalid; accepted: a positive integer" in message


def test_min_partitions_is_a_positive_int() -> None:
    assert stream(minPartitions="+12").min_partitions == 12
    assert "minPartitions must be positive" in refused({"path": "/l", "subscribe": "t", "minPartitions": "0"})
    assert "at most 2147483647" in refused({"path": "/l", "subscribe": "t", "minPartitions": "2147483648"})


def test_min_offsets_above_max_offsets_is_refused_with_sparks_message() -> None:
    message = refused({"path": "/l", "subscribe": "t", "minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"})
    assert "The value of minOffsetPerTrigger(11) is higher than the maxOffsetsPerTrigger(10)" in message
    assert stream(minOffsetsPerTrigger="10", maxOffsetsPerTrigger="10").min_offsets_per_trigger == 10


def test_trigger_options_are_ignored_with_warnings_in_batch_queries() -> None:
    options = batch(maxOffsetsPerTrigger="10", minOffsetsPerTrigger="5", maxTriggerDelay="5s")
    assert options.max_offsets_per_trigger is None and options.min_offsets_per_trigger is None
    assert options.warnings == (
        "maxOffsetsPerTrigger option ignored in batch queries",
        "minOffsetsPerTrigger option ignored in batch queries",
        "maxTriggerDelay option ignored in batch queries",
    )


def test_trigger_options_are_still_checked_in_batch_queries() -> None:
    message = refused({"path": "/l", "subscribe": "t", "maxOffsetsPerTrigger": "x"}, streaming=False)
    assert "maxOffsetsPerTrigger must be positive" in message


def test_max_trigger_delay_without_min_offsets_warns() -> None:
    options = stream(maxTriggerDelay="5s")
    assert options.max_trigger_delay_ms == 5000
    assert options.warnings == ("maxTriggerDelay option ignored: it only applies with minOffsetsPerTrigger",)
    assert stream(maxTriggerDelay="5s", minOffsetsPerTrigger="3").warnings == ()


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("15m", 900_000),
        ("15min", 900_000),
        ("30s", 30_000),
        ("100ms", 100),
        ("1h", 3_600_000),
        ("2d", 172_800_000),
        ("1500us", 1),
        ("250", 250),
        (" 5S ", 5000),
        ("0", 0),
    ],
)
def test_max_trigger_delay_takes_sparks_durations(value: str, ms: int) -> None:
    assert stream(maxTriggerDelay=value, minOffsetsPerTrigger="1").max_trigger_delay_ms == ms


@pytest.mark.parametrize("value", ["5x", "s", "", "1.5s", "5 s", "-1s", "-3"])
def test_max_trigger_delay_refuses_other_durations(value: str) -> None:
    message = refused({"path": "/l", "subscribe": "t", "maxTriggerDelay": value})
    assert f"maxTriggerDelay = {value!r} is invalid; accepted: a duration" in message


@pytest.mark.parametrize("name", ["isolation.level", "kafka.isolation.level", "Kafka.Isolation.Level"])
def test_isolation_level_under_both_names(name: str) -> None:
    options = stream(**{name: "READ_COMMITTED"})
    assert options.isolation_level == "read_committed"
    assert options.read_committed is True
    assert options.ignored_options == ()
    assert stream(**{name: "read_uncommitted"}).read_committed is False


def test_isolation_level_refusals() -> None:
    message = refused({"path": "/l", "subscribe": "t", "isolation.level": "serializable"})
    assert "isolation.level = 'serializable' is invalid; accepted: read_uncommitted, read_committed" in message
    message = refused(
        {"path": "/l", "subscribe": "t", "isolation.level": "read_committed", "kafka.isolation.level": "x"}
    )
    assert "disagree" in message


@pytest.mark.parametrize("name", ["group.id", "kafka.group.id"])
def test_group_id_under_both_names(name: str) -> None:
    assert stream(**{name: "lag-tools"}).group_id == "lag-tools"
    assert stream(**{"group.id": "g", "kafka.group.id": "g"}).group_id == "g"
    assert "disagree" in refused({"path": "/l", "subscribe": "t", "group.id": "g", "kafka.group.id": "h"})
    assert "group.id = '' is invalid; accepted: a non-empty string" in refused(
        {"path": "/l", "subscribe": "t", name: ""}
    )


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("range", "range"),
        ("roundrobin", "roundrobin"),
        ("Sticky", "sticky"),
        ("cooperative-sticky", "cooperative-sticky"),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", "cooperative-sticky"),
    ],
)
def test_assignor_names(value: str, name: str) -> None:
    assert stream(assignor=value).assignor == name


def test_unknown_assignor_is_refused_with_the_accepted_ones() -> None:
    message = refused({"path": "/l", "subscribe": "t", "assignor": "round-robin"})
    assert "assignor = 'round-robin' is invalid; accepted: range, roundrobin, sticky, cooperative-sticky" in message


def test_initial_offsets_location() -> None:
    assert stream(initialOffsetsLocation="/ckpt/start").initial_offsets_location == "/ckpt/start"
    assert "initialOffsetsLocation = '' is invalid" in refused(
        {"path": "/l", "subscribe": "t", "initialOffsetsLocation": ""}
    )


# -- what the adapter relies on -----------------------------------------------------------------------------


def test_options_are_immutable_hashable_and_picklable() -> None:
    options = stream(startingOffsets='{"t": {"0": 1}}', maxOffsetsPerTrigger="5", **{"kafka.bootstrap.servers": "b"})
    assert pickle.loads(pickle.dumps(options)) == options
    assert hash(options) == hash(pickle.loads(pickle.dumps(options)))
    with pytest.raises(AttributeError):
        options.path = "/elsewhere"  # type: ignore[misc]


def test_identity_names_the_source_not_its_starting_point() -> None:
    base = stream()
    assert base.identity == stream(startingOffsets="earliest", maxOffsetsPerTrigger="3").identity
    assert len(base.identity) == 32 and base.identity.isalnum()
    others = {
        SourceOptions.parse({"path": "/other", "subscribe": "t"}, streaming=True).identity,
        stream(subscribe="u").identity,
        SourceOptions.parse({"path": "/logs", "subscribePattern": "t"}, streaming=True).identity,
        SourceOptions.parse({"path": "/logs", "assign": '{"t": [0]}'}, streaming=True).identity,
        stream(**{"group.id": "g"}).identity,
    }
    assert base.identity not in others and len(others) == 5


def test_the_identity_of_a_source_on_an_object_store_is_the_same_in_every_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def identity(path: str) -> str:
        return SourceOptions.parse({"path": path, "subscribe": "t"}, streaming=True).identity

    monkeypatch.chdir(tmp_path)
    here = identity("s3://bucket/logs")
    monkeypatch.chdir("/")
    assert identity("s3://bucket/logs") == here, "a driver and its executors run in different directories"
    assert identity("s3://bucket/other") != here


# -- offset JSON --------------------------------------------------------------------------------------------


def test_parse_partition_offsets() -> None:
    assert parse_partition_offsets('{"a": {"0": 23, "10": -1}, "b": {"2": -2}, "c": {}}', "startingOffsets") == {
        TP("a", 0): 23,
        TP("a", 10): -1,
        TP("b", 2): -2,
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"t": {"0": true}}', "the value of t-0 is True"),
        ('{"t": {"0": 1.0}}', "the value of t-0 is 1.0"),
        ('{"t": {"0": "1"}}', "the value of t-0 is '1'"),
        ('{"t": {"0": null}}', "the value of t-0 is None"),
        ('{"t": {"0": -3}}', "the value of t-0 is -3"),
        ('{"t": {"0": 9223372036854775808}}', "the value of t-0 is 9223372036854775808"),
        ('{"t": {"0": NaN}}', "the value of t-0 is nan"),
        ('{"t": {"01": 1}}', "partition '01' of 't' is not a partition number"),
        ('{"t": {"-1": 1}}', "partition '-1' of 't' is not a partition number"),
        ('{"t": {" 1": 1}}', "partition ' 1' of 't' is not a partition number"),
        ('{"t": {"x": 1}}', "partition 'x' of 't' is not a partition number"),
        ('{"t": {"2147483648": 1}}', "partition '2147483648' of 't' is not a partition number"),
        ('{"t": {"0": 1, "0": 2}}', "key 0 repeats"),
        ('{"t": {"0": 1}, "t": {"1": 2}}', "key t repeats"),
        ('{"t": [0]}', "topic 't' must be a non-empty name with an object of partitions"),
        ('{"": {"0": 1}}', "topic '' must be a non-empty name"),
        ("[]", "not a JSON object"),
        ('{"t": {"0": 1}', "Expecting"),
        ("", "Expecting value"),
    ],
)
def test_parse_partition_offsets_is_strict(text: str, reason: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        parse_partition_offsets(text, "startingOffsets")
    message = str(raised.value)
    assert message.startswith(f"startingOffsets = {text!r} is invalid")
    assert reason in message
    assert "accepted:" in message


def test_parse_partition_timestamps_refuses_negative_timestamps() -> None:
    assert parse_partition_timestamps('{"t": {"0": 0, "1": 1700000000000}}', "x") == {
        TP("t", 0): 0,
        TP("t", 1): 1700000000000,
    }
    with pytest.raises(InvalidConfigError, match=r"accepted: milliseconds since the epoch"):
        parse_partition_timestamps('{"t": {"0": -1}}', "startingOffsetsByTimestamp")


def test_offsets_by_timestamp_option_uses_the_strict_parser() -> None:
    message = refused({"path": "/l", "subscribe": "t", "startingOffsetsByTimestamp": '{"t": {"0": -2}}'})
    assert message.startswith("startingOffsetsByTimestamp = ")


def test_format_offsets_orders_topics_by_name_and_partitions_by_number() -> None:
    offsets = {TP("b", 10): 5, TP("a", 1): 7, TP("b", 2): 3, TP("b", 0): 0}
    assert format_offsets(offsets) == '{"a": {"1": 7}, "b": {"0": 0, "2": 3, "10": 5}}'
    assert list(offsets_to_dict(offsets)) == ["a", "b"]
    assert list(offsets_to_dict(offsets)["b"]) == ["0", "2", "10"]


def test_format_offsets_is_what_pyspark_writes_for_the_dict_and_round_trips() -> None:
    offsets = {TP(f"t{n % 3}", n): n * 11 for n in range(12)}
    shuffled = dict(reversed(list(offsets.items())))
    assert format_offsets(shuffled) == format_offsets(offsets) == json.dumps(offsets_to_dict(offsets))
    assert parse_offsets(format_offsets(offsets)) == offsets
    assert parse_offsets(json.loads(format_offsets(offsets))) == offsets
    assert format_offsets({}) == "{}" and parse_offsets("{}") == {}


@pytest.mark.parametrize("offset", [-1, -2, True, 1.5])
def test_formatted_offsets_are_resolved(offset: object) -> None:
    with pytest.raises(InvalidOffsetError, match=r"accepted: an integer >= 0"):
        format_offsets({TP("t", 0): offset})  # type: ignore[dict-item]


@pytest.mark.parametrize("value", ['{"t": {"0": -1}}', {"t": {"0": -2}}, '{"t": {"0": true}}', "{", {"t": 3}])
def test_parse_offsets_refuses_unresolved_or_malformed_offsets(value: str | dict[str, object]) -> None:
    with pytest.raises(InvalidOffsetError, match=r"^offset = .* is invalid"):
        parse_offsets(value)


# -- resolution against a log directory ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> LogDirectory:
    """``orders``: p0 timestamps 1000/2000/3000 with its log start raised to 1, p1 1500/2500, p2 empty;
    ``other``: one record; ``__internal`` and ``orders-archive``: empty."""
    directory = LogDirectory(tmp_path_factory.mktemp("logs"))
    directory.topics.create("orders", 3)
    directory.topics.create("other", 1)
    directory.topics.create("orders-archive", 1)
    directory.topics.create("__internal", 1)
    for partition, timestamps in ((0, [1000, 2000, 3000]), (1, [1500, 2500])):
        with directory.partition("orders", partition) as log:
            values = [b"v"] * len(timestamps)
            log.append_arrow(pa.table({"value": values, "timestamp": pa.array(timestamps, pa.int64())}))
    with directory.partition("orders", 0) as log:
        log.raise_log_start_offset(1)
    with directory.partition("other", 0) as log:
        log.append_arrow(pa.table({"value": [b"x"], "timestamp": pa.array([5000], pa.int64())}))
    return directory


def options_for(logs: LogDirectory, *, streaming: bool = True, **options: str) -> SourceOptions:
    return SourceOptions.parse({"path": logs.path, **options}, streaming=streaming)


ORDERS = [TP("orders", 0), TP("orders", 1), TP("orders", 2)]


def test_subscribe_covers_the_existing_topics_partitions(logs: LogDirectory) -> None:
    """A stream reads a missing topic once it is created."""
    options = options_for(logs, subscribe="other,orders,missing")
    assert subscribed_partitions(options, logs) == [*ORDERS, TP("other", 0)]


def test_a_batch_subscribing_to_a_missing_topic_fails_naming_it(logs: LogDirectory) -> None:
    """As Spark's Kafka source fails (UnknownTopicOrPartitionException), rather than reading nothing."""
    options = options_for(logs, streaming=False, subscribe="other,missing,gone")
    with pytest.raises(
        UnknownTopicError, match=f"option subscribe names 'missing', 'gone', but no such topic exists in {logs.path}"
    ):
        subscribed_partitions(options, logs)
    assert subscribed_partitions(options_for(logs, streaming=False, subscribePattern="^nothing$"), logs) == []


def test_the_path_must_be_an_existing_directory(logs: LogDirectory, tmp_path: Path) -> None:
    assert source_log_dir(options_for(logs, subscribe="orders")).path == logs.path
    for path in (tmp_path / "missing", Path(logs.path) / TOPICS_FILE):
        options = SourceOptions.parse({"path": str(path), "subscribe": "orders"}, streaming=False)
        with pytest.raises(InvalidLogDirectoryError, match=f"option path = '{path}' is not a log directory"):
            source_log_dir(options)


def test_subscribe_pattern_finds_topics_as_spark_does_and_skips_internal_ones(logs: LogDirectory) -> None:
    found = subscribed_partitions(options_for(logs, subscribePattern="rders"), logs)
    assert found == [*ORDERS, TP("orders-archive", 0)]  # a match anywhere in the name, like findFirstIn
    assert subscribed_partitions(options_for(logs, subscribePattern="^orders$"), logs) == ORDERS
    everything = subscribed_partitions(options_for(logs, subscribePattern=".*"), logs)
    assert TP("__internal", 0) not in everything and len(everything) == 5


def test_assign_gives_existing_partitions_sorted(logs: LogDirectory) -> None:
    options = options_for(logs, assign='{"other": [0], "orders": [2, 0]}')
    assert subscribed_partitions(options, logs) == [TP("orders", 0), TP("orders", 2), TP("other", 0)]


@pytest.mark.parametrize(
    ("assign", "reason"),
    [('{"missing": [0]}', "topic 'missing' does not exist"), ('{"orders": [3]}', "topic 'orders' has 3 partitions")],
)
def test_assign_of_what_does_not_exist_fails(logs: LogDirectory, assign: str, reason: str) -> None:
    with pytest.raises(UnknownTopicError) as raised:
        subscribed_partitions(options_for(logs, assign=assign), logs)
    assert reason in str(raised.value) and "option assign" in str(raised.value)


def test_earliest_and_latest(logs: LogDirectory) -> None:
    assert resolve_start(options_for(logs, subscribe="orders", startingOffsets="earliest"), logs, ORDERS) == {
        TP("orders", 0): 1,
        TP("orders", 1): 0,
        TP("orders", 2): 0,
    }
    latest = {TP("orders", 0): 3, TP("orders", 1): 2, TP("orders", 2): 0}
    assert resolve_start(options_for(logs, subscribe="orders"), logs, ORDERS) == latest
    assert earliest_offsets(logs, ORDERS) == {TP("orders", 0): 1, TP("orders", 1): 0, TP("orders", 2): 0}
    assert latest_offsets(logs, ORDERS) == latest


def test_specific_offsets_resolve_sentinels_and_keep_explicit_offsets(logs: LogDirectory) -> None:
    options = options_for(logs, subscribe="orders", startingOffsets='{"orders": {"0": -2, "1": -1, "2": 7}}')
    assert resolve_start(options, logs, ORDERS) == {TP("orders", 0): 1, TP("orders", 1): 2, TP("orders", 2): 7}


def test_specific_offsets_must_name_every_subscribed_partition(logs: LogDirectory) -> None:
    options = options_for(logs, subscribe="orders", startingOffsets='{"orders": {"0": 1}}')
    with pytest.raises(InvalidConfigError) as raised:
        resolve_start(options, logs, ORDERS)
    message = str(raised.value)
    assert "Partitions specified for Kafka start offsets don't match what are assigned" in message
    assert "Specified: [orders-0] Assigned: [orders-0, orders-1, orders-2]" in message


def test_a_global_timestamp_finds_the_first_record_at_or_after_it(logs: LogDirectory) -> None:
    options = options_for(
        logs, subscribe="orders", startingTimestamp="1500", startingOffsetsByTimestampStrategy="latest"
    )
    assert resolve_start(options, logs, ORDERS) == {TP("orders", 0): 1, TP("orders", 1): 0, TP("orders", 2): 0}
    options = options_for(logs, subscribe="orders", startingTimestamp="0", startingOffsetsByTimestampStrategy="latest")
    assert resolve_start(options, logs, ORDERS)[TP("orders", 0)] == 1  # not below the log start


def test_a_timestamp_matching_nothing_fails_under_the_error_strategy(logs: LogDirectory) -> None:
    options = options_for(logs, subscribe="orders", startingTimestamp="2600")
    with pytest.raises(InvalidConfigError) as raised:
        resolve_start(options, logs, ORDERS)
    message = str(raised.value)
    assert "No offset matched from request of topic-partition orders-1 and timestamp 2600" in message
    assert "startingOffsetsByTimestampStrategy = latest" in message


def test_a_timestamp_matching_nothing_starts_at_the_log_end_under_the_latest_strategy(logs: LogDirectory) -> None:
    options = options_for(
        logs, subscribe="orders", startingTimestamp="2600", startingOffsetsByTimestampStrategy="latest"
    )
    assert resolve_start(options, logs, ORDERS) == {TP("orders", 0): 2, TP("orders", 1): 2, TP("orders", 2): 0}


def test_per_partition_timestamps(logs: LogDirectory) -> None:
    options = options_for(
        logs,
        subscribe="orders",
        startingOffsetsByTimestamp='{"orders": {"0": 3000, "1": 1000, "2": 0}}',
        startingOffsetsByTimestampStrategy="latest",
    )
    assert resolve_start(options, logs, ORDERS) == {TP("orders", 0): 2, TP("orders", 1): 0, TP("orders", 2): 0}
    options = options_for(logs, subscribe="orders", startingOffsetsByTimestamp='{"orders": {"0": 3000}}')
    with pytest.raises(InvalidConfigError, match=r"timestamp based start offsets don't match what are assigned"):
        resolve_start(options, logs, ORDERS)


def test_stream_end_is_the_log_end(logs: LogDirectory) -> None:
    assert resolve_end(options_for(logs, subscribe="orders"), logs, ORDERS) == latest_offsets(logs, ORDERS)


def test_batch_ends(logs: LogDirectory) -> None:
    default = options_for(logs, streaming=False, subscribe="orders")
    assert resolve_end(default, logs, ORDERS) == latest_offsets(logs, ORDERS)
    explicit = options_for(
        logs, streaming=False, subscribe="orders", endingOffsets='{"orders": {"0": 2, "1": -1, "2": 0}}'
    )
    assert resolve_end(explicit, logs, ORDERS) == {TP("orders", 0): 2, TP("orders", 1): 2, TP("orders", 2): 0}
    by_time = options_for(logs, streaming=False, subscribe="orders", endingTimestamp="2000")
    assert resolve_end(by_time, logs, ORDERS) == {TP("orders", 0): 1, TP("orders", 1): 1, TP("orders", 2): 0}
    mismatched = options_for(logs, streaming=False, subscribe="orders", endingOffsetsByTimestamp='{"orders": {"1": 1}}')
    with pytest.raises(InvalidConfigError, match=r"timestamp based end offsets don't match"):
        resolve_end(mismatched, logs, ORDERS)


def test_an_ending_timestamp_matching_nothing_is_the_log_end_whatever_the_strategy(logs: LogDirectory) -> None:
    options = options_for(logs, streaming=False, subscribe="orders", endingTimestamp="9999")
    assert options.timestamp_strategy == "error"
    assert resolve_end(options, logs, ORDERS) == latest_offsets(logs, ORDERS)


def test_resolve_batch(logs: LogDirectory) -> None:
    options = options_for(logs, streaming=False, subscribe="orders,other", endingTimestamp="2000")
    assert resolve_batch(options, logs) == [
        OffsetRange(TP("orders", 0), 1, 1),
        OffsetRange(TP("orders", 1), 0, 1),
        OffsetRange(TP("orders", 2), 0, 0),
        OffsetRange(TP("other", 0), 0, 0),
    ]


def test_resolve_batch_refuses_a_start_resolved_after_the_end(logs: LogDirectory) -> None:
    options = options_for(
        logs,
        streaming=False,
        subscribe="orders",
        startingTimestamp="2600",
        endingTimestamp="1000",
        startingOffsetsByTimestampStrategy="latest",
    )
    with pytest.raises(InvalidOffsetError) as raised:
        resolve_batch(options, logs)
    message = str(raised.value)
    assert (
        "The resolved start offset 2 is greater than the resolved end offset 1 for topic orders partition 0" in message
    )
    assert "startingTimestamp resolving at or before endingTimestamp" in message


def test_resolution_does_not_write_to_the_log_directory(logs: LogDirectory) -> None:
    before = sorted(str(path) for path in Path(logs.path).rglob("*"))
    resolve_start(
        options_for(logs, subscribe="orders", startingTimestamp="1500", startingOffsetsByTimestampStrategy="latest"),
        logs,
        ORDERS,
    )
    assert sorted(str(path) for path in Path(logs.path).rglob("*")) == before
