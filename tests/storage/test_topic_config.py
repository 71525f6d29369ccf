"""Kafka's topic configs: every config's type, range and default, the LogConfig built from them, server.properties
and the precedence topic > log directory > default, and the command-line syntaxes."""

from __future__ import annotations

from typing import Any

import pytest

from pysparklog import InvalidConfigError, LogConfig, TimestampType
from pysparklog.storage.topic_config import (
    INT_MAX,
    LONG_MAX,
    LONG_MIN,
    TOPIC_CONFIGS,
    ConfigSource,
    ServerProperties,
    describe_configs,
    effective_config,
    normalize_overrides,
    parse_config_assignments,
    parse_config_list,
    parse_properties,
)

# name: (a valid value at the edge of the range, its LogConfig value, a value just outside, Kafka's default)
CONFIGS: dict[str, tuple[str, Any, str, Any]] = {
    "cleanup.policy": ("compact,delete", frozenset({"compact", "delete"}), "compact,remove", frozenset({"delete"})),
    "compression.type": ("zstd", "zstd", "brotli", "producer"),
    "delete.retention.ms": ("0", 0, "-1", 86_400_000),
    "file.delete.delay.ms": ("0", 0, "-1", 60_000),
    "flush.messages": ("1", 1, "0", LONG_MAX),
    "flush.ms": ("0", 0, "-1", LONG_MAX),
    "index.interval.bytes": ("0", 0, "-1", 4096),
    "max.compaction.lag.ms": ("1", 1, "0", LONG_MAX),
    "max.message.bytes": (str(INT_MAX), INT_MAX, str(INT_MAX + 1), 1_048_588),
    "message.timestamp.after.max.ms": ("0", 0, "-1", LONG_MAX),
    "message.timestamp.before.max.ms": ("0", 0, "-1", LONG_MAX),
    "message.timestamp.type": (
        "LogAppendTime",
        TimestampType.LOG_APPEND_TIME,
        "logappendtime",
        TimestampType.CREATE_TIME,
    ),
    "min.cleanable.dirty.ratio": ("1", 1.0, "1.01", 0.5),
    "min.compaction.lag.ms": ("0", 0, "-1", 0),
    "retention.bytes": (str(LONG_MIN), LONG_MIN, str(LONG_MAX + 1), -1),
    "retention.ms": ("-1", -1, "-2", 604_800_000),
    "segment.bytes": ("1048576", 1_048_576, "1048575", 1_073_741_824),
    "segment.index.bytes": ("4", 4, "3", 10_485_760),
    "segment.jitter.ms": ("0", 0, "-1", 0),
    "segment.ms": ("1", 1, "0", 604_800_000),
}
NUMERIC = [name for name, (_, value, _, _) in CONFIGS.items() if isinstance(value, int | float)]


def test_every_kafka_topic_config_of_the_issue_is_defined() -> None:
    assert sorted(TOPIC_CONFIGS) == sorted(CONFIGS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_config_accepts_its_range_refuses_beyond_it_and_has_kafkas_default(name: str) -> None:
    valid, value, invalid, default = CONFIGS[name]
    attribute = TOPIC_CONFIGS[name].attribute
    assert getattr(LogConfig.from_properties({name: valid}), attribute) == value
    assert getattr(LogConfig(), attribute) == default
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_properties({name: invalid})
    assert str(info.value).startswith(f"{name} = {invalid!r} is invalid") and "; accepted: " in str(info.value)


@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("raw", ["ten", "1_0", "0x10", "", "١٢"])
def test_numbers_are_parsed_as_java_parses_them(name: str, raw: str) -> None:
    with pytest.raises(InvalidConfigError, match=f"^{name} = "):
        LogConfig.from_properties({name: raw})


def test_values_are_trimmed_and_normalized_as_kafka_prints_them() -> None:
    assert normalize_overrides({"retention.ms": " +1000 ", "cleanup.policy": "compact , delete"}) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
    }
    assert normalize_overrides({"min.cleanable.dirty.ratio": "0.00010"}) == {"min.cleanable.dirty.ratio": "1.0E-4"}
    assert normalize_overrides({"cleanup.policy": ""}) == {"cleanup.policy": ""}, "an empty list: neither policy"


@pytest.mark.parametrize(
    ("raw", "reason"), [("delete,delete", "must not be duplicated"), ("delete,", "must not be empty")]
)
def test_cleanup_policy_is_a_list_of_distinct_policies(raw: str, reason: str) -> None:
    with pytest.raises(InvalidConfigError, match=reason):
        normalize_overrides({"cleanup.policy": raw})


def test_unknown_configs_are_refused_naming_the_key_and_listing_the_accepted_ones() -> None:
    with pytest.raises(InvalidConfigError) as info:
        normalize_overrides({"retention.hours": "1"})
    assert str(info.value) == f"Unknown topic config name: retention.hours; accepted: {', '.join(sorted(CONFIGS))}"
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: segment_bytes"):
        LogConfig.from_properties({"segment_bytes": 1})


def test_log_config_checks_its_fields_with_kafkas_ranges_but_allows_tiny_segments() -> None:
    assert LogConfig(segment_bytes=14).segment_bytes == 14
    for bad in (
        {"segment_bytes": 13},
        {"retention_ms": -2},
        {"cleanup_policy": {"delete"}},
        {"cleanup_policy": frozenset({"archive"})},
        {"message_timestamp_type": "CreateTime"},
        {"message_timestamp_type": TimestampType.NO_TIMESTAMP_TYPE},
        {"min_cleanable_dirty_ratio": float("nan")},
        {"flush_ms": True},
        {"compression_type": "brotli"},
    ):
        with pytest.raises(InvalidConfigError, match="is invalid"):
            LogConfig(**bad)
    with pytest.raises(InvalidConfigError, match=r"min.compaction.lag.ms \(5\) is above max.compaction.lag.ms \(4\)"):
        LogConfig(min_compaction_lag_ms=5, max_compaction_lag_ms=4)


def test_from_properties_takes_python_values_with_kafkas_ranges() -> None:
    config = LogConfig.from_properties({"retention.ms": 5, "cleanup.policy": frozenset({"compact"})})
    assert (config.retention_ms, config.cleanup_policy) == (5, frozenset({"compact"}))
    with pytest.raises(InvalidConfigError, match="segment.bytes = 2000 is invalid; accepted: an integer from 1048576"):
        LogConfig.from_properties({"segment.bytes": 2000})


# -- server.properties and precedence ------------------------------------------------------------------------------


def test_properties_are_read_as_java_reads_them() -> None:
    text = (
        "# a comment\n! another\n  spaced = value with spaces  \ncolon:x\nblank y\nempty=\n"
        "continued = a\\\n    b\\\\\nescaped\\=key=tab\\there\\u0041\n"
    )
    assert parse_properties(text) == {
        "spaced": "value with spaces  ",
        "colon": "x",
        "blank": "y",
        "empty": "",
        "continued": "ab\\",
        "escaped=key": "tab\thereA",
    }


def _server(**values: str) -> ServerProperties:
    return ServerProperties("/logs/server.properties", {k.replace("_", "."): v for k, v in values.items()})


def _retention(server: ServerProperties, overrides: dict[str, str] | None = None) -> int:
    return effective_config(overrides or {}, server, LogConfig()).retention_ms


def test_topic_overrides_win_over_server_properties_which_win_over_defaults() -> None:
    assert _retention(_server()) == 604_800_000
    assert _retention(_server(log_retention_hours="1")) == 3_600_000
    assert _retention(_server(log_retention_hours="1", log_retention_minutes="5")) == 300_000
    assert _retention(_server(log_retention_hours="1", log_retention_minutes="5", log_retention_ms="42")) == 42
    assert _retention(_server(log_retention_ms="42"), {"retention.ms": "7"}) == 7
    assert _retention(_server(log_retention_minutes="-5")) == -1, "any negative broker retention is unlimited"
    base = LogConfig(segment_ms=1234, segment_bytes=2000)
    assert effective_config({}, _server(), base) is base, "nothing set: the default layer itself"
    config = effective_config({}, _server(log_roll_hours="2", compression_type="gzip"), base)
    assert (config.segment_ms, config.segment_bytes, config.compression_type) == (7_200_000, 2000, "gzip")
    assert effective_config({}, _server(log_roll_hours="2", log_roll_ms="5"), base).segment_ms == 5


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("log.segment.bytes", "1000", "log.segment.bytes = '1000' is invalid; accepted: an integer from 1048576"),
        ("log.roll.hours", "0", "log.roll.hours = '0' is invalid; accepted: an integer from 1"),
        ("log.roll.ms", "0", "log.roll.ms = '0' is invalid: it gives segment.ms = 0; accepted for segment.ms"),
        ("log.cleanup.policy", "forever", "log.cleanup.policy = 'forever' is invalid"),
    ],
)
def test_bad_server_properties_are_refused_naming_the_file_and_key(key: str, value: str, expected: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        effective_config({}, _server(**{key.replace(".", "_"): value}), LogConfig())
    assert str(info.value).startswith(f"/logs/server.properties: {expected}")


def test_unknown_server_properties_are_ignored_like_other_broker_settings() -> None:
    assert effective_config({}, _server(broker_id="1", listeners="x"), LogConfig()) == LogConfig()


def test_num_partitions() -> None:
    assert _server().num_partitions == 1
    assert _server(num_partitions="6").num_partitions == 6
    with pytest.raises(InvalidConfigError, match="num.partitions = '0' is invalid"):
        _server(num_partitions="0").num_partitions  # noqa: B018


def test_describe_reports_each_layer_as_kafkas_describe_configs_with_synonyms() -> None:
    entries = {
        e.name: e
        for e in describe_configs(
            {"retention.ms": "1000"}, _server(log_retention_minutes="5", log_segment_bytes="2097152"), LogConfig()
        )
    }
    assert list(entries) == sorted(CONFIGS)
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [str(s) for s in retention.synonyms] == [
        "DYNAMIC_TOPIC_CONFIG:retention.ms=1000",
        "STATIC_BROKER_CONFIG:log.retention.minutes=5",
        "DEFAULT_CONFIG:log.retention.hours=168",
    ]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("2097152", ConfigSource.STATIC_BROKER_CONFIG)
    assert [str(s) for s in segment.synonyms] == [
        "STATIC_BROKER_CONFIG:log.segment.bytes=2097152",
        "DEFAULT_CONFIG:log.segment.bytes=1073741824",
    ]
    flush = entries["flush.ms"]
    assert (flush.value, [str(s) for s in flush.synonyms]) == (
        str(LONG_MAX),
        [f"DEFAULT_CONFIG:log.flush.scheduler.interval.ms={LONG_MAX}"],
    )
    assert str(entries["max.message.bytes"].synonyms[0]) == "DEFAULT_CONFIG:message.max.bytes=1048588"


def test_describe_shows_a_programs_default_layer_under_the_first_synonym() -> None:
    entries = {e.name: e for e in describe_configs({}, _server(), LogConfig(segment_ms=1234))}
    assert [str(s) for s in entries["segment.ms"].synonyms] == ["DEFAULT_CONFIG:log.roll.ms=1234"]
    assert entries["segment.ms"].value == "1234"


# -- command-line syntax -------------------------------------------------------------------------------------------


def test_add_config_syntax_groups_values_with_commas_in_brackets() -> None:
    assert parse_config_list("retention.ms=1000, cleanup.policy=[compact,delete],segment.ms = 5") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
        "segment.ms": "5",
    }
    assert parse_config_list("a=1,a=2") == {"a": "2"}, "a later key wins"


@pytest.mark.parametrize("text", ["retention.ms", "retention.ms=1=2", "a=1,,b=2", ""])
def test_add_config_syntax_refuses_what_is_not_key_value(text: str) -> None:
    with pytest.raises(InvalidConfigError, match="configs to add must be 'key=value'"):
        parse_config_list(text)


def test_add_config_syntax_refuses_keys_with_characters_kafka_refuses() -> None:
    with pytest.raises(InvalidConfigError, match="Invalid character found for config key: retention ms"):
        parse_config_list("retention ms=1")


def test_topics_config_syntax_is_one_assignment_each() -> None:
    assert parse_config_assignments(["cleanup.policy=compact,delete", "retention.ms = 5"]) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "5",
    }
    for bad in ("retention.ms", "retention.ms=", "=5", "a=b=c"):
        with pytest.raises(InvalidConfigError, match="expected 'key=value'"):
            parse_config_assignments([bad])
