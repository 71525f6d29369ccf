"""Kafka's topic configs: names, types, defaults, accepted values, broker synonyms and their precedence.

A topic config has three layers, as on a broker (``ServerTopicConfigSynonyms``, ``LogConfig.fromProps``):

1. the topic's own override (``kafka-configs --alter --add-config``), kept in ``pysparklog-topics.json``;
2. the log directory's ``server.properties``, under the broker's names (``log.segment.bytes``, ``log.roll.hours``,
   ``log.retention.minutes``...), the first synonym that is set winning, as in Kafka;
3. the built-in default: Kafka's, or the :class:`~pysparklog.storage.config.LogConfig` a program passes to
   ``LogDirectory``.

Values are parsed and checked as Kafka's ``ConfigDef`` does (Kafka 4.2's types and ranges), so a config Kafka
refuses is refused here, with a message that names the key and says what it accepts.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from pysparklog.errors import InvalidConfigError
from pysparklog.storage.io import Storage, read_if_exists
from pysparklog.storage.records.default_records import TimestampType

if TYPE_CHECKING:
    from pysparklog.storage.config import LogConfig

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS

KafkaValue = bool | int | float | str | tuple[str, ...]
"""A parsed config value, typed as Kafka's ``ConfigDef`` types it (a LIST is a tuple of strings)."""


class ConfigType(enum.Enum):
    """Kafka's ``ConfigDef.Type`` of the configs pysparklog knows."""

    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"


_TYPE_BOUNDS: Final = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX)}
_INTEGER = re.compile(r"[+-]?[0-9]+")  # Java's parseInt/parseLong: no '_', no non-ASCII digits
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config as Kafka's ``ConfigDef`` declares it.

    Attributes:
        name: Kafka's name.
        type: How a string value is parsed.
        default: Kafka's default as it prints it; None when the config has none (a broker synonym that only
            counts when it is set, such as ``log.retention.ms``).
        minimum: The smallest accepted number (None: the type's).
        maximum: The largest accepted number (None: the type's).
        choices: The accepted strings (of each item, for a list).
    """

    name: str
    type: ConfigType
    default: str | None
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[str, ...] = ()

    @property
    def accepted(self) -> str:
        """What the key accepts, in words, for error messages."""
        if self.type in _TYPE_BOUNDS:
            low, high = _TYPE_BOUNDS[self.type]
            return f"an integer from {_or(self.minimum, low)} to {_or(self.maximum, high)}"
        if self.type is ConfigType.DOUBLE:
            return f"a number from {self.minimum} to {self.maximum}"
        if self.type is ConfigType.BOOLEAN:
            return "true or false"
        if self.type is ConfigType.STRING:
            return f"one of {', '.join(self.choices)}"
        return f"a comma-separated list of distinct values among {', '.join(self.choices)}, or nothing"

    def parse(self, raw: str) -> KafkaValue:
        """Parse and check a string as Kafka does (surrounding blanks ignored).

        Raises:
            InvalidConfigError: The string is not of the key's type or not accepted.
        """
        text = raw.strip()
        value: KafkaValue
        if self.type in _TYPE_BOUNDS:
            if not _INTEGER.fullmatch(text):
                raise self.invalid(raw)
            value = int(text)
        elif self.type is ConfigType.DOUBLE:
            if not _DECIMAL.fullmatch(text):
                raise self.invalid(raw)
            value = float(text)
        elif self.type is ConfigType.BOOLEAN:
            # ConfigDef.parseType: "true" or "false" in any case, nothing else (no "yes", no "1").
            if text.lower() not in ("true", "false"):
                raise self.invalid(raw)
            value = text.lower() == "true"
        elif self.type is ConfigType.LIST:
            value = tuple(_LIST_SEPARATOR.split(text)) if text else ()
            if "" in value:
                raise self.invalid(raw, "values must not be empty")
            if len(set(value)) != len(value):
                raise self.invalid(raw, "values must not be duplicated")
        else:
            value = text
        self.check(value, shown=raw)
        return value

    def check(self, value: object, *, shown: object = None, minimum: int | None = None) -> None:
        """Check a value of the key's type against its range or choices.

        Args:
            value: The value.
            shown: What to quote in the error (default: ``value``).
            minimum: A lower bound replacing the key's (``LogConfig``'s own bounds).

        Raises:
            InvalidConfigError: The value is not accepted.
        """
        if self.type in _TYPE_BOUNDS:
            low, high = _TYPE_BOUNDS[self.type]
            low = _or(minimum, _or(self.minimum, low))
            ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= _or(self.maximum, high)
        elif self.type is ConfigType.DOUBLE:
            # NaN fails both comparisons, as Kafka's Range refuses it.
            ok = (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and _or(self.minimum, -float("inf")) <= value <= _or(self.maximum, float("inf"))
            )
        elif self.type is ConfigType.LIST:
            ok = isinstance(value, tuple) and all(item in self.choices for item in value)
        elif self.type is ConfigType.BOOLEAN:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, str) and (not self.choices or value in self.choices)
        if not ok:
            raise self.invalid(value if shown is None else shown, minimum=minimum)

    def invalid(self, shown: object, reason: str | None = None, *, minimum: int | None = None) -> InvalidConfigError:
        """The error for a value this key does not accept."""
        accepted = self.accepted if minimum is None else dataclasses.replace(self, minimum=minimum).accepted
        why = f" ({reason})" if reason else ""
        return InvalidConfigError(f"{self.name} = {shown!r} is invalid{why}; accepted: {accepted}")

    def format(self, value: KafkaValue) -> str:
        """The value as Kafka prints it (``ConfigDef.convertToString``)."""
        if isinstance(value, tuple):
            return ",".join(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return _java_double(value)
        return str(value)


def _or(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: plain from 10^-3 to 10^7, else ``d.dddE±n``, shortest digits either way."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent + len(mantissa) - 1}"


@dataclass(frozen=True, slots=True)
class BrokerSynonym:
    """A broker config that sets a topic config's log-directory default.

    Attributes:
        key: The broker config (its own type, default and range).
        unit: Milliseconds per unit of the broker config (``log.roll.hours``: 3600000).
        negative_is_unlimited: Any negative value means -1, as ``KafkaConfig.logRetentionTimeMillis`` reads
            ``log.retention.{ms,minutes,hours}``.
    """

    key: ConfigKey
    unit: int = 1
    negative_is_unlimited: bool = False

    def to_topic(self, value: KafkaValue) -> KafkaValue:
        """The broker value in the topic config's unit."""
        if isinstance(value, int) and self.negative_is_unlimited and value < 0:
            return -1
        return value * self.unit if self.unit != 1 and isinstance(value, int) else value


def _identity(value: KafkaValue) -> Any:
    return value


def _cleanup_policy(value: KafkaValue) -> frozenset[str]:
    assert isinstance(value, tuple)
    return frozenset(value)


def _timestamp_type(value: KafkaValue) -> TimestampType:
    return TimestampType.LOG_APPEND_TIME if value == "LogAppendTime" else TimestampType.CREATE_TIME


def kafka_value(field_value: Any) -> Any:
    """A ``LogConfig`` field value as Kafka types it: the inverse of :attr:`TopicConfig.to_field`."""
    if isinstance(field_value, TimestampType):
        return field_value.kafka_name
    if isinstance(field_value, frozenset):
        return tuple(sorted(field_value))
    return field_value


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic config: its Kafka definition, the ``LogConfig`` field it sets and its broker synonyms.

    Attributes:
        key: The topic config's Kafka definition.
        attribute: The ``LogConfig`` field.
        synonyms: The broker configs that set its default, in Kafka's order of precedence.
        to_field: Converts a parsed value to the field's type (``cleanup.policy`` is a frozenset,
            ``message.timestamp.type`` a ``TimestampType``).
        engine_minimum: A lower bound ``LogConfig`` accepts below Kafka's (tests and small logs use tiny
            segments, as Kafka's own tests do through ``internal.segment.bytes``).
    """

    key: ConfigKey
    attribute: str
    synonyms: tuple[BrokerSynonym, ...]
    to_field: Callable[[KafkaValue], Any] = _identity
    engine_minimum: int | None = None

    @property
    def name(self) -> str:
        return self.key.name

    def field_value(self, value: object) -> Any:
        """The ``LogConfig`` value of a Kafka string, or of a Python value, checked with Kafka's ranges."""
        if isinstance(value, str):
            return self.to_field(self.key.parse(value))
        kafka = kafka_value(value)
        self.key.check(kafka)
        return self.to_field(kafka)

    def check_field(self, value: object) -> None:
        """Check a ``LogConfig`` field value: Kafka's range (or ``engine_minimum``) and the field's exact type."""
        kafka = kafka_value(value)
        self.key.check(kafka, shown=value, minimum=self.engine_minimum)
        expected = self.to_field(kafka)
        if expected != value:
            raise self.key.invalid(value, f"expected a {type(expected).__name__}")


def _same(key: ConfigKey, broker_name: str) -> BrokerSynonym:
    """A broker synonym declared like the topic config itself (only the name differs)."""
    return BrokerSynonym(dataclasses.replace(key, name=broker_name))


def _int(name: str, default: int | None, minimum: int | None = None) -> ConfigKey:
    return ConfigKey(name, ConfigType.INT, None if default is None else str(default), minimum)


def _long(name: str, default: int | None, minimum: int | None = None) -> ConfigKey:
    return ConfigKey(name, ConfigType.LONG, None if default is None else str(default), minimum)


def _config(key: ConfigKey, *synonyms: BrokerSynonym, **options: Any) -> TopicConfig:
    return TopicConfig(key, key.name.replace(".", "_"), synonyms or (_same(key, f"log.{key.name}"),), **options)


_SEGMENT_BYTES = _int("segment.bytes", 1024 * 1024 * 1024, 1024 * 1024)
_SEGMENT_MS = _long("segment.ms", 7 * 24 * HOUR_MS, 1)
_SEGMENT_JITTER_MS = _long("segment.jitter.ms", 0, 0)
_SEGMENT_INDEX_BYTES = _int("segment.index.bytes", 10 * 1024 * 1024, 4)
_FLUSH_MESSAGES = _long("flush.messages", LONG_MAX, 1)
_FLUSH_MS = _long("flush.ms", LONG_MAX, 0)
_RETENTION_BYTES = _long("retention.bytes", -1)
_RETENTION_MS = _long("retention.ms", 7 * 24 * HOUR_MS, -1)
_MAX_MESSAGE_BYTES = _int("max.message.bytes", 1024 * 1024 + 12, 0)
_INDEX_INTERVAL_BYTES = _int("index.interval.bytes", 4096, 0)
_DELETE_RETENTION_MS = _long("delete.retention.ms", 24 * HOUR_MS, 0)
_MIN_COMPACTION_LAG_MS = _long("min.compaction.lag.ms", 0, 0)
_MAX_COMPACTION_LAG_MS = _long("max.compaction.lag.ms", LONG_MAX, 1)
_FILE_DELETE_DELAY_MS = _long("file.delete.delay.ms", 60000, 0)
_MIN_CLEANABLE_DIRTY_RATIO = ConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", 0, 1)
_CLEANUP_POLICY = ConfigKey("cleanup.policy", ConfigType.LIST, "delete", choices=("compact", "delete"))
_COMPRESSION_TYPE = ConfigKey(
    "compression.type",
    ConfigType.STRING,
    "producer",
    choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
)
_MESSAGE_TIMESTAMP_TYPE = ConfigKey(
    "message.timestamp.type", ConfigType.STRING, "CreateTime", choices=("CreateTime", "LogAppendTime")
)
_TIMESTAMP_BEFORE_MAX_MS = _long("message.timestamp.before.max.ms", LONG_MAX, 0)
_TIMESTAMP_AFTER_MAX_MS = _long("message.timestamp.after.max.ms", LONG_MAX, 0)

TOPIC_CONFIGS: Final[Mapping[str, TopicConfig]] = {
    config.name: config
    for config in sorted(
        [
            _config(_SEGMENT_BYTES, engine_minimum=14),
            _config(
                _SEGMENT_MS,
                BrokerSynonym(_long("log.roll.ms", None)),
                BrokerSynonym(_int("log.roll.hours", 7 * 24, 1), unit=HOUR_MS),
            ),
            _config(
                _SEGMENT_JITTER_MS,
                BrokerSynonym(_long("log.roll.jitter.ms", None)),
                BrokerSynonym(_int("log.roll.jitter.hours", 0, 0), unit=HOUR_MS),
            ),
            _config(_SEGMENT_INDEX_BYTES, _same(_SEGMENT_INDEX_BYTES, "log.index.size.max.bytes")),
            _config(_FLUSH_MESSAGES, _same(_FLUSH_MESSAGES, "log.flush.interval.messages")),
            _config(
                _FLUSH_MS,
                BrokerSynonym(_long("log.flush.interval.ms", None)),
                BrokerSynonym(_long("log.flush.scheduler.interval.ms", LONG_MAX)),
            ),
            _config(_RETENTION_BYTES),
            _config(
                _RETENTION_MS,
                BrokerSynonym(_long("log.retention.ms", None), negative_is_unlimited=True),
                BrokerSynonym(_int("log.retention.minutes", None), MINUTE_MS, negative_is_unlimited=True),
                BrokerSynonym(_int("log.retention.hours", 7 * 24), HOUR_MS, negative_is_unlimited=True),
            ),
            _config(_MAX_MESSAGE_BYTES, _same(_MAX_MESSAGE_BYTES, "message.max.bytes")),
            _config(_INDEX_INTERVAL_BYTES),
            _config(_DELETE_RETENTION_MS, _same(_DELETE_RETENTION_MS, "log.cleaner.delete.retention.ms")),
            _config(_MIN_COMPACTION_LAG_MS, _same(_MIN_COMPACTION_LAG_MS, "log.cleaner.min.compaction.lag.ms")),
            _config(_MAX_COMPACTION_LAG_MS, _same(_MAX_COMPACTION_LAG_MS, "log.cleaner.max.compaction.lag.ms")),
            _config(_FILE_DELETE_DELAY_MS, _same(_FILE_DELETE_DELAY_MS, "log.segment.delete.delay.ms")),
            _config(_MIN_CLEANABLE_DIRTY_RATIO, _same(_MIN_CLEANABLE_DIRTY_RATIO, "log.cleaner.min.cleanable.ratio")),
            _config(_CLEANUP_POLICY, to_field=_cleanup_policy),
            _config(_COMPRESSION_TYPE, _same(_COMPRESSION_TYPE, "compression.type")),
            _config(_MESSAGE_TIMESTAMP_TYPE, to_field=_timestamp_type),
            _config(_TIMESTAMP_BEFORE_MAX_MS),
            _config(_TIMESTAMP_AFTER_MAX_MS),
        ],
        key=lambda config: config.name,
    )
}
"""The topic configs pysparklog knows, by Kafka name, sorted."""

#: The most partitions a topic may have. Kafka's controller refuses to create more than about this many in one
#: request ("Unable to perform excessively large batch operation.": QuorumController's 10000 records per
#: operation, one per partition); here it bounds the topic, so that every command visiting its partitions stays
#: quick (see ``pysparklog.storage.topics``). The broker configs giving partition counts are bounded by it too.
MAX_PARTITIONS: Final = 10_000

NUM_PARTITIONS: Final = ConfigKey("num.partitions", ConfigType.INT, "1", minimum=1, maximum=MAX_PARTITIONS)
"""The broker config giving a topic created without ``--partitions`` its partition count."""

AUTO_CREATE_TOPICS_ENABLE: Final = ConfigKey("auto.create.topics.enable", ConfigType.BOOLEAN, "true")
"""The broker config that lets a producer's first use of a missing topic create it (Kafka's default true)."""


def topic_config(name: str) -> TopicConfig:
    """The definition of a topic config.

    Raises:
        InvalidConfigError: ``name`` is not a topic config pysparklog knows; the message lists those it does.
    """
    config = TOPIC_CONFIGS.get(name)
    if config is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}; accepted: {', '.join(TOPIC_CONFIGS)}")
    return config


def default_field_value(name: str) -> Any:
    """Kafka's default of a topic config, as its ``LogConfig`` field holds it (``LogConfig``'s defaults)."""
    config = TOPIC_CONFIGS[name]
    assert config.key.default is not None
    return config.to_field(config.key.parse(config.key.default))


def normalize_overrides(configs: Mapping[str, str]) -> dict[str, str]:
    """Topic config overrides checked and in Kafka's printed form (``" 10"`` -> ``"10"``, ``"a, b"`` -> ``"a,b"``).

    Raises:
        InvalidConfigError: An unknown name or a value Kafka refuses.
    """
    normalized = {}
    for name, raw in configs.items():
        key = topic_config(name).key
        normalized[name] = key.format(key.parse(raw))
    return normalized


# -- server.properties ------------------------------------------------------------------------------------------

SERVER_PROPERTIES = "server.properties"
"""The file of a log directory holding its broker settings (``log.*``, ``num.partitions``...)."""

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Java's ``Properties.load`` format, as Kafka reads ``server.properties``.

    ``#`` and ``!`` start comments; a key ends at the first unescaped ``=``, ``:`` or blank; a line ending in an
    odd number of backslashes continues on the next; ``\\t``, ``\\n``, ``\\uXXXX`` and friends are unescaped.
    """
    properties: dict[str, str] = {}
    lines = iter(text.splitlines())
    for first in lines:
        line = first.lstrip(_BLANKS)
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1] + next(lines, "").lstrip(_BLANKS)
        end = 0
        while end < len(line) and line[end] not in "=:" + _BLANKS:
            end += 2 if line[end] == "\\" else 1
        value = line[end:].lstrip(_BLANKS)
        if value[:1] in ("=", ":"):
            value = value[1:].lstrip(_BLANKS)
        properties[_unescape(line[:end])] = _unescape(value)
    return properties


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match[1]
        return chr(int(escaped[1:], 16)) if len(escaped) == 5 else _ESCAPED.get(escaped, escaped)

    return _ESCAPE.sub(replace, text)


@dataclass(frozen=True, slots=True)
class ServerProperties:
    """A log directory's broker settings (``server.properties``); keys pysparklog does not read are ignored.

    Attributes:
        path: The file, named in errors about its values.
        values: Every key as written.
    """

    path: str
    values: Mapping[str, str]

    @classmethod
    def load(cls, storage: Storage, path: str) -> ServerProperties:
        """Read the file from the log directory's storage; no file means no settings."""
        return cls.decode(path, read_if_exists(storage, path))

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> ServerProperties:
        """Parse the file's bytes (None: no file) as ISO-8859-1, as Java's ``Properties.load`` reads them."""
        return cls(path, {} if data is None else parse_properties(data.decode("latin-1")))

    def get(self, key: ConfigKey) -> KafkaValue | None:
        """The value of a broker config, parsed; None when it is not set.

        Raises:
            InvalidConfigError: The value is not accepted; the message names this file.
        """
        raw = self.values.get(key.name)
        if raw is None:
            return None
        try:
            return key.parse(raw)
        except InvalidConfigError as error:
            raise InvalidConfigError(f"{self.path}: {error}") from None

    @property
    def num_partitions(self) -> int:
        """``num.partitions``: the partition count of a topic created without one (Kafka's default 1)."""
        value = self.get(NUM_PARTITIONS)
        assert value is None or isinstance(value, int)
        return 1 if value is None else value

    @property
    def auto_create_topics_enable(self) -> bool:
        """``auto.create.topics.enable``: whether a producer's first use of a missing topic creates it, as a broker
        does on a metadata request naming it (Kafka's default true).

        Raises:
            InvalidConfigError: The value is not true or false; the message names this file.
        """
        value = self.get(AUTO_CREATE_TOPICS_ENABLE)
        assert value is None or isinstance(value, bool)
        return True if value is None else value

    def static_values(self, config: TopicConfig) -> list[tuple[BrokerSynonym, KafkaValue]]:
        """The synonyms of a topic config set here, first one winning, with their values in the topic's unit.

        Raises:
            InvalidConfigError: A value that is not accepted, by the broker config or, once converted, by the
                topic config; the message names this file and the broker key.
        """
        found = []
        for synonym in config.synonyms:
            value = self.get(synonym.key)
            if value is not None:
                converted = synonym.to_topic(value)
                try:
                    config.key.check(converted)
                except InvalidConfigError:
                    raise InvalidConfigError(
                        f"{self.path}: {synonym.key.name} = {self.values[synonym.key.name]!r} is invalid: it gives "
                        f"{config.name} = {converted!r}; accepted for {config.name}: {config.key.accepted}"
                    ) from None
                found.append((synonym, converted))
        return found


# -- resolution ---------------------------------------------------------------------------------------------------


def effective_config(overrides: Mapping[str, str], server: ServerProperties, base: LogConfig) -> LogConfig:
    """The settings of a topic: its overrides, else ``server.properties``, else ``base``.

    Raises:
        InvalidConfigError: A value, or a combination (``min.compaction.lag.ms`` above ``max.compaction.lag.ms``),
            that Kafka refuses.
    """
    values = {}
    for name, config in TOPIC_CONFIGS.items():
        raw = overrides.get(name)
        if raw is not None:
            values[config.attribute] = config.to_field(config.key.parse(raw))
        else:
            static = server.static_values(config)
            if static:
                values[config.attribute] = config.to_field(static[0][1])
    return dataclasses.replace(base, **values) if values else base


class ConfigSource(enum.Enum):
    """Where a value comes from, in Kafka's ``ConfigEntry.ConfigSource`` names (``kafka-configs`` prints them)."""

    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One layer's value of a config: a ``synonyms={...}`` item of ``kafka-configs --describe``."""

    name: str
    value: str
    source: ConfigSource

    def __str__(self) -> str:
        return f"{self.source.value}:{self.name}={self.value}"


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """A topic config's value in force, where it comes from, and every layer that sets it, first winning."""

    name: str
    value: str
    source: ConfigSource
    synonyms: tuple[ConfigSynonym, ...]


def describe_configs(overrides: Mapping[str, str], server: ServerProperties, base: LogConfig) -> list[ConfigEntry]:
    """Every topic config of a topic, sorted by name, as Kafka's ``DescribeConfigs`` with synonyms reports it.

    The default layer is Kafka's built-in default under its broker name (``log.retention.hours=168``); when
    ``base`` holds another value, that value under the first synonym (``log.retention.ms=...``).
    """
    entries = []
    for name, config in TOPIC_CONFIGS.items():
        layers: list[tuple[ConfigSynonym, str]] = []  # (synonym, the config's value when it wins)
        raw = overrides.get(name)
        if raw is not None:
            layers.append((ConfigSynonym(name, raw, ConfigSource.DYNAMIC_TOPIC_CONFIG), raw))
        for synonym, value in server.static_values(config):
            static = ConfigSynonym(synonym.key.name, server.values[synonym.key.name], ConfigSource.STATIC_BROKER_CONFIG)
            layers.append((static, config.key.format(value)))
        base_value = getattr(base, config.attribute)
        formatted = config.key.format(kafka_value(base_value))
        if base_value == default_field_value(name):
            # Only the last synonym has a default (log.roll.hours, log.retention.hours...): Kafka names that one.
            default = config.synonyms[-1].key
            assert default.default is not None
            layers.append((ConfigSynonym(default.name, default.default, ConfigSource.DEFAULT_CONFIG), formatted))
        else:
            layers.append(
                (ConfigSynonym(config.synonyms[0].key.name, formatted, ConfigSource.DEFAULT_CONFIG), formatted)
            )
        winner, value = layers[0]
        entries.append(ConfigEntry(name, value, winner.source, tuple(synonym for synonym, _ in layers)))
    return entries


# -- command-line syntax ------------------------------------------------------------------------------------------

_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_CONFIG_KEY = re.compile(r"[$a-zA-Z0-9._-]*")


def parse_config_list(text: str) -> dict[str, str]:
    """``kafka-configs --add-config`` syntax: ``k1=v1,k2=[a,b]`` (brackets group values holding commas).

    As Kafka's ``ConfigCommand.parseConfigsToBeAdded``: split on commas outside brackets, then each pair on
    ``=``; brackets are dropped from values, blanks around keys and values too; a later key wins.

    Raises:
        InvalidConfigError: A pair that is not ``key=value``, or a key with characters Kafka refuses.
    """
    configs = {}
    for pair in re.split("," + _OUTSIDE_BRACKETS, text):
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, pair)
        if len(parts) != 2:
            raise InvalidConfigError(
                f"invalid config {pair!r}: configs to add must be 'key=value' or 'key=[value1,value2]' to group "
                "values that contain commas, separated by commas"
            )
        key = parts[0].strip()
        if not _CONFIG_KEY.fullmatch(key):
            raise InvalidConfigError(f"Invalid character found for config key: {key}")
        configs[key] = re.sub(r"[\[\]]", "", parts[1]).strip()
    return configs


def parse_config_assignments(assignments: Iterable[str]) -> dict[str, str]:
    """``kafka-topics --config k=v`` (repeatable) syntax: one ``key=value`` each, the value taken whole.

    Raises:
        InvalidConfigError: An assignment that is not ``key=value``.
    """
    configs = {}
    for assignment in assignments:
        parts = re.split(r"\s*=\s*", assignment)
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise InvalidConfigError(f"invalid topic config {assignment!r}: expected 'key=value'")
        configs[parts[0].strip()] = parts[1].strip()
    return configs
