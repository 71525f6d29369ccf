"""Spark's Kafka source options for ``format("pysparklog")``, checked once and eagerly, and resolved to
concrete offsets against a log directory.

A query written for Spark's Kafka source should run unchanged on a log directory, so the option names,
defaults, precedence and refusals are those of ``KafkaSourceProvider`` (Spark 4.x), and the messages
carry Spark's wording where Spark has one. Unlike Spark, which ignores options it does not know and
parses some only when a query starts, :meth:`SourceOptions.parse` checks every option it will use (an
option another overrides, as ``startingTimestamp`` overrides ``startingOffsets``, is only reported in
``warnings``): a typo fails when the DataFrame is defined, naming the option and what it accepts.

Options that only make sense with a broker (``kafka.bootstrap.servers`` and the other ``kafka.*``
consumer settings, ``groupIdPrefix``, ``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.*``) are accepted
so that a migrated query needs no edit, and listed in :attr:`SourceOptions.ignored_options` for the
adapter to log. The ones Spark refuses (``kafka.auto.offset.reset``, the deserializers,
``kafka.enable.auto.commit``, ``kafka.interceptor.classes``) are refused with Spark's message.

Offsets travel as Spark's Kafka source writes them: ``{"topic": {"partition": next_offset}}``. Spark
compares a source's offsets as JSON strings, so :func:`format_offsets` always writes the same string
for the same offsets (see :func:`offsets_to_dict` for the order).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar

from pysparklog.assignors import assignor_for
from pysparklog.errors import InvalidConfigError, InvalidLogDirectoryError, InvalidOffsetError, UnknownTopicError
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.spark.storage_options import StorageSettings, is_storage_option, log_storage, storage_settings
from pysparklog.storage.config import INT_MAX, LONG_MAX
from pysparklog.storage.io import FileSystemStorage
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.structs import TopicPartition

#: The offset standing for a partition's log start offset in offset JSON (``KafkaOffsetRangeLimit.EARLIEST``).
EARLIEST = -2
#: The offset standing for a partition's log end offset in offset JSON (``KafkaOffsetRangeLimit.LATEST``).
LATEST = -1

ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
STARTING_OFFSETS = "startingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
ENDING_OFFSETS = "endingOffsets"
ENDING_TIMESTAMP = "endingTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
MIN_OFFSETS_PER_TRIGGER = "minOffsetsPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"
MIN_PARTITIONS = "minPartitions"
MAX_RECORDS_PER_PARTITION = "maxRecordsPerPartition"
INCLUDE_HEADERS = "includeHeaders"
ISOLATION_LEVEL = "isolation.level"
KAFKA_ISOLATION_LEVEL = "kafka.isolation.level"
GROUP_ID = "group.id"
KAFKA_GROUP_ID = "kafka.group.id"
ASSIGNOR = "assignor"
PATH = "path"
INITIAL_OFFSETS_LOCATION = "initialOffsetsLocation"
DRIVER_READ_MAX_OFFSETS = "driverReadMaxOffsets"
#: Micro-batches of up to this many offsets are read on the driver by default (see ``driver_read_max_offsets``).
DEFAULT_DRIVER_READ_MAX_OFFSETS = 10_000

#: Every option the source reads, as the guide spells them (matching ignores case).
SOURCE_OPTIONS: tuple[str, ...] = (
    ASSIGN,
    SUBSCRIBE,
    SUBSCRIBE_PATTERN,
    STARTING_OFFSETS,
    STARTING_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
    ENDING_OFFSETS,
    ENDING_TIMESTAMP,
    ENDING_OFFSETS_BY_TIMESTAMP,
    FAIL_ON_DATA_LOSS,
    MAX_OFFSETS_PER_TRIGGER,
    MIN_OFFSETS_PER_TRIGGER,
    MAX_TRIGGER_DELAY,
    MIN_PARTITIONS,
    MAX_RECORDS_PER_PARTITION,
    INCLUDE_HEADERS,
    ISOLATION_LEVEL,
    KAFKA_ISOLATION_LEVEL,
    GROUP_ID,
    KAFKA_GROUP_ID,
    ASSIGNOR,
    PATH,
    INITIAL_OFFSETS_LOCATION,
    DRIVER_READ_MAX_OFFSETS,
)

#: Spark Kafka source options that tune the broker connection; accepted and ignored, as are other ``kafka.*``.
IGNORED_OPTIONS: tuple[str, ...] = (
    "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
)

_STRATEGIES = (ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN)
_DEFAULT_MAX_TRIGGER_DELAY = "15m"
_STARTING_OPTIONS_DOC = "startingoffsets"  # Spark's message spells it in lower case

# KafkaSourceProvider.validateGeneralOptions, word for word.
_REJECTED: dict[str, str] = {
    "kafka.auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        f"'{_STARTING_OPTIONS_DOC}' to 'earliest' or 'latest' to specify where to start. Structured Streaming "
        "manages which offsets are consumed internally, rather than relying on the kafkaConsumer to do it. This "
        "will ensure that no data is missed when new topics/partitions are dynamically subscribed. Note that "
        f"'{_STARTING_OPTIONS_DOC}' only applies when a new Streaming query is started, and that resuming will "
        "always pick up from where the query left off. See the docs for more details."
    ),
    "kafka.key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays with "
        "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
    ),
    "kafka.value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte arrays with "
        "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values."
    ),
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

_BY_LOWER_NAME = {name.lower(): name for name in SOURCE_OPTIONS}
_IGNORED_BY_LOWER_NAME = {name.lower(): name for name in IGNORED_OPTIONS}
#: What an unknown option is compared with for a suggestion: the source's options and the ignored ones it may be
#: a typo of.
_SUGGESTED = (*SOURCE_OPTIONS, *IGNORED_OPTIONS)
_LONG = re.compile(r"[+-]?[0-9]+")
_PARTITION_KEY = re.compile(r"0|[1-9][0-9]*")
# Spark's JavaUtils.timeStringAs: digits, then an optional unit; no unit means milliseconds.
_DURATION = re.compile(r"(-?[0-9]+)([a-z]+)?")
_DURATION_UNITS_MS: dict[str, tuple[int, int]] = {  # unit -> (multiplier, divisor) to milliseconds
    "us": (1, 1000),
    "ms": (1, 1),
    "s": (1000, 1),
    "m": (60_000, 1),
    "min": (60_000, 1),
    "h": (3_600_000, 1),
    "d": (86_400_000, 1),
}
_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000},"topicB":{"0":1700000000000}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'

RangeLimitKind = Literal["earliest", "latest", "specific_offsets", "specific_timestamps", "global_timestamp"]
TimestampStrategy = Literal["error", "latest"]
IsolationLevel = Literal["read_uncommitted", "read_committed"]


@dataclass(frozen=True)
class OffsetRangeLimit:
    """Where a read starts or ends, as the options gave it (Kafka's ``KafkaOffsetRangeLimit``).

    Kept unresolved because ``latest`` and timestamps mean different offsets at different times: a
    stream resolves its start once (:func:`resolve_start`), a batch resolves both ends when planned.

    Attributes:
        kind: ``earliest`` / ``latest``; ``specific_offsets`` (a JSON map, with -2/-1 sentinels);
            ``specific_timestamps`` (a JSON map of timestamps); ``global_timestamp`` (one timestamp
            for every partition).
        option: The option it came from, for messages; ``None`` for the default.
        values: Partition to offset or timestamp, sorted, for the two ``specific_*`` kinds. A tuple, so
            options stay immutable, hashable and picklable (executors receive pickled readers).
        timestamp: The timestamp of ``global_timestamp``.
    """

    kind: RangeLimitKind
    option: str | None = None
    values: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None

    def by_partition(self) -> dict[TopicPartition, int]:
        """``values`` as a new dict."""
        return dict(self.values)


_EARLIEST_LIMIT = OffsetRangeLimit("earliest")
_LATEST_LIMIT = OffsetRangeLimit("latest")


@dataclass(frozen=True)
class SourceOptions:
    """The options of one ``format("pysparklog")`` read, checked; build it with :meth:`parse`.

    Attributes:
        path: The log directory (option ``path``, which ``load(path)`` sets).
        streaming: Whether the options are a stream's (``readStream``) or a batch's (``read``).
        assign: The partitions of option ``assign``, in the order given; ``None`` unless it is the strategy.
        subscribe: The topics of option ``subscribe``; ``None`` unless it is the strategy.
        subscribe_pattern: The regular expression of option ``subscribePattern``; ``None`` unless it is the strategy.
        starting_offsets: Where a new query starts (``startingTimestamp`` > ``startingOffsetsByTimestamp`` >
            ``startingOffsets``; default latest for a stream, earliest for a batch).
        ending_offsets: Where a batch ends (the ``ending*`` options, same precedence; default latest);
            ``None`` for a stream.
        timestamp_strategy: What a starting timestamp matching no record resolves to:
            ``error`` fails, ``latest`` takes the log end offset.
        fail_on_data_loss: Fail (rather than warn and go on) when offsets to read are gone.
        max_offsets_per_trigger: The most offsets one micro-batch reads, split over partitions by backlog;
            ``None`` when unlimited, and always for a batch.
        min_offsets_per_trigger: The fewest new offsets that trigger a micro-batch before
            ``max_trigger_delay_ms``; ``None`` when any amount does, and always for a batch.
        max_trigger_delay_ms: How long ``min_offsets_per_trigger`` may hold a micro-batch back.
        min_partitions: At least this many Spark tasks per micro-batch, splitting large ranges (a hint).
        max_records_per_partition: At most this many offsets per Spark task, splitting larger ranges.
        include_headers: Whether rows have the ``headers`` column.
        isolation_level: ``read_uncommitted`` (default) or ``read_committed`` (skip aborted transactions
            and stop at the last stable offset).
        group_id: The consumer group the adapter commits the query's progress to (``group.id`` or
            ``kafka.group.id``), so lag tools see it; ``None`` for none.
        assignor: The assignor's protocol name that puts ranges on Spark tasks (``range`` by default).
        initial_offsets_location: Where the adapter keeps a new query's resolved starting offsets until its
            first micro-batch commits; ``None`` for its default.
        driver_read_max_offsets: A micro-batch of at most this many offsets is read by the driver while Spark
            plans it and handed to Spark with the plan, which saves its task a Python worker: the latency of
            small micro-batches. 0 never does; a batch query ignores it.
        ignored_options: The options accepted for compatibility and ignored, as the caller spelled them.
        warnings: What the adapter should log: options ignored in batch queries or overridden by others.
        storage_settings: The ``storage.<key>`` options: the object store's settings for this query.
    """

    path: str
    streaming: bool
    assign: tuple[TopicPartition, ...] | None
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    starting_offsets: OffsetRangeLimit
    ending_offsets: OffsetRangeLimit | None
    timestamp_strategy: TimestampStrategy = "error"
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    isolation_level: IsolationLevel = "read_uncommitted"
    group_id: str | None = None
    assignor: str = "range"
    initial_offsets_location: str | None = None
    driver_read_max_offsets: int = DEFAULT_DRIVER_READ_MAX_OFFSETS
    ignored_options: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    storage_settings: StorageSettings = ()

    @property
    def strategy(self) -> str:
        """The subscription option in use: ``assign``, ``subscribe`` or ``subscribePattern``."""
        if self.assign is not None:
            return ASSIGN
        return SUBSCRIBE if self.subscribe is not None else SUBSCRIBE_PATTERN

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @property
    def identity(self) -> str:
        """A file-name-safe digest of what makes two readers the same source: the log directory, the
        subscription and the group.

        The starting options are left out on purpose: a new query's start is resolved once and kept
        until its first micro-batch commits, and like Spark's checkpointed initial offsets it must
        survive a restart that changed them.
        """
        subscription: object = (
            [list(tp) for tp in self.assign] if self.assign is not None else self.subscribe or self.subscribe_pattern
        )
        location = self.path if "://" in self.path else os.path.abspath(self.path)  # URLs are absolute already
        key = json.dumps([location, self.strategy, subscription, self.group_id])
        return hashlib.sha256(key.encode()).hexdigest()[:32]

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Check Spark's string options (keys in any case) and build the source's settings.

        Args:
            options: The reader's options; ``load(path)`` puts its argument in ``path``.
            streaming: ``True`` for ``readStream``, ``False`` for ``read``: defaults and refusals differ.

        Raises:
            InvalidConfigError: An unknown or refused option, a missing or ambiguous subscription, or a
                value the option does not accept; the message names the option and what it accepts.
        """
        given, ignored = _known_options(options)
        warnings: list[str] = []
        assign, subscribe, pattern = _subscription(given)
        timestamp_strategy = _timestamp_strategy(given)
        starting = _range_limit(
            given,
            (STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS),
            _LATEST_LIMIT if streaming else _EARLIEST_LIMIT,
            warnings,
        )
        ending: OffsetRangeLimit | None
        if streaming:
            _refuse_ending_options(given)
            ending = None
        else:
            ending = _range_limit(
                given, (ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS), _LATEST_LIMIT, warnings
            )
            _check_batch_limits(starting, ending)
        max_offsets = _optional(given, MAX_OFFSETS_PER_TRIGGER, _positive_long)
        min_offsets = _optional(given, MIN_OFFSETS_PER_TRIGGER, _positive_long)
        delay_ms = _duration_ms(MAX_TRIGGER_DELAY, given.get(MAX_TRIGGER_DELAY, _DEFAULT_MAX_TRIGGER_DELAY))
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise InvalidConfigError(
                f"The value of minOffsetPerTrigger({min_offsets}) is higher than the maxOffsetsPerTrigger"
                f"({max_offsets}); accepted: {MIN_OFFSETS_PER_TRIGGER} <= {MAX_OFFSETS_PER_TRIGGER}"
            )
        if not streaming:
            for name in (MAX_OFFSETS_PER_TRIGGER, MIN_OFFSETS_PER_TRIGGER, MAX_TRIGGER_DELAY, DRIVER_READ_MAX_OFFSETS):
                if name in given:
                    warnings.append(f"{name} option ignored in batch queries")
            max_offsets = min_offsets = None
        elif MAX_TRIGGER_DELAY in given and min_offsets is None:
            warnings.append(f"{MAX_TRIGGER_DELAY} option ignored: it only applies with {MIN_OFFSETS_PER_TRIGGER}")
        return cls(
            path=_path(given),
            streaming=streaming,
            assign=assign,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            starting_offsets=starting,
            ending_offsets=ending,
            timestamp_strategy=timestamp_strategy,
            fail_on_data_loss=_optional(given, FAIL_ON_DATA_LOSS, parse_boolean, default=True),
            max_offsets_per_trigger=max_offsets,
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=delay_ms,
            min_partitions=_optional(given, MIN_PARTITIONS, _positive_int),
            max_records_per_partition=_optional(given, MAX_RECORDS_PER_PARTITION, _positive_long),
            include_headers=_optional(given, INCLUDE_HEADERS, parse_boolean, default=False),
            isolation_level=_isolation_level(given),
            group_id=_group_id(given),
            assignor=_assignor(given),
            initial_offsets_location=_optional(given, INITIAL_OFFSETS_LOCATION, parse_non_empty),
            driver_read_max_offsets=_optional(
                given, DRIVER_READ_MAX_OFFSETS, _non_negative_long, default=DEFAULT_DRIVER_READ_MAX_OFFSETS
            ),
            ignored_options=tuple(ignored),
            warnings=tuple(warnings),
            storage_settings=storage_settings(options),
        )


# -- parsing ------------------------------------------------------------------------------------------


def spelled_options(options: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    """``(name as given, name in lower case, value)`` of Spark's string options, checked: strings only, and no
    option given twice in different cases (Spark matches names ignoring case). Shared with the sink's options."""
    if not isinstance(options, Mapping):
        raise InvalidConfigError(f"options = {options!r} is invalid; accepted: a mapping of option name to string")
    spelled: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidConfigError(f"option {key!r} = {value!r} is invalid; accepted: string names and values")
        lower = key.lower()
        other = spelled.setdefault(lower, key)
        if other != key:
            raise InvalidConfigError(
                f"options {other!r} and {key!r} are the same option (names ignore case); accepted: one of them"
            )
        yield key, lower, value


def closest_option(key: str, accepted: Iterable[str]) -> str:
    """`` (did you mean startingOffsets?)`` naming the accepted option closest to ``key``, compared ignoring
    case, or nothing when none is close. Shared with the sink's options.

    Spark hands a Python data source its options in a ``CaseInsensitiveDict``, which keeps only the lower-cased
    names: the option a user wrote as ``startingOffset`` arrives as ``startingoffset``, and the message can only
    quote that. The suggestion gives back the spelling the guide uses.
    """
    by_lower_name = {name.lower(): name for name in accepted}
    close = difflib.get_close_matches(key.lower(), by_lower_name, n=1)
    return f" (did you mean {by_lower_name[close[0]]}?)" if close else ""


def _known_options(options: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The source options by canonical name, and the ignored ones as spelled; refuses everything else."""
    given: dict[str, str] = {}
    ignored: list[str] = []
    for key, lower, value in spelled_options(options):
        if lower in _REJECTED:
            raise InvalidConfigError(_REJECTED[lower])
        if lower in _BY_LOWER_NAME:
            given[_BY_LOWER_NAME[lower]] = value
        elif lower in _IGNORED_BY_LOWER_NAME or lower.startswith("kafka."):
            ignored.append(key)
        elif not is_storage_option(lower):
            raise InvalidConfigError(
                f"option {key!r} is not a pysparklog source option{closest_option(key, _SUGGESTED)}; accepted: "
                f"{', '.join(SOURCE_OPTIONS)}, and "
                f"storage.<key> for an object store's settings; accepted and ignored (they configure a broker "
                f"connection): {', '.join(IGNORED_OPTIONS)} and other kafka.* options"
            )
    return given, ignored


def include_headers_option(options: Mapping[str, str]) -> bool:
    """Option ``includeHeaders`` alone, the names of all options checked: what a source's schema depends on, for
    when the other options can only be judged knowing whether the query is a batch or a stream.

    Raises:
        InvalidConfigError: An unknown or refused option, or ``includeHeaders`` not true or false.
    """
    given, _ = _known_options(options)
    return INCLUDE_HEADERS in given and parse_boolean(INCLUDE_HEADERS, given[INCLUDE_HEADERS])


def _subscription(
    given: Mapping[str, str],
) -> tuple[tuple[TopicPartition, ...] | None, tuple[str, ...] | None, str | None]:
    """``(assign, subscribe, subscribePattern)``, exactly one not None (``validateGeneralOptions``)."""
    present = [name for name in _STRATEGIES if name in given]
    accepted = ", ".join(_STRATEGIES)
    if not present:
        raise InvalidConfigError(
            f"One of the following options must be specified for Kafka source: {accepted}. See the docs for more "
            "details."
        )
    if len(present) > 1:
        raise InvalidConfigError(
            f"Only one of the following options can be specified for Kafka source: {accepted}. See the docs for "
            f"more details. Given: {', '.join(present)}"
        )
    name = present[0]
    value = given[name]
    if name == ASSIGN:
        return _assign(value), None, None
    if name == SUBSCRIBE:
        topics = tuple(dict.fromkeys(topic.strip() for topic in value.split(",") if topic.strip()))
        if not topics:
            raise InvalidConfigError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'; accepted: a "
                "comma-separated list of topic names"
            )
        return None, topics, None
    pattern = value.strip()
    if not pattern:
        raise InvalidConfigError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'; "
            "accepted: a regular expression matching topic names"
        )
    try:
        re.compile(pattern)
    except re.error as error:
        raise InvalidConfigError(
            f"subscribePattern = {value!r} is not a valid regular expression ({error}); accepted: a regular "
            "expression matching topic names"
        ) from None
    return None, None, pattern


def _assign(value: str) -> tuple[TopicPartition, ...]:
    """The partitions of ``assign``: ``{"topicA":[0,1]}`` (``JsonUtils.partitions``), repeats dropped."""
    if not value.strip().startswith("{"):
        raise InvalidConfigError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{value}'; accepted: JSON "
            f"like {_ASSIGN_EXAMPLE}"
        )
    parsed = _load_json(value, ASSIGN, _ASSIGN_EXAMPLE, InvalidConfigError)
    partitions: list[TopicPartition] = []
    for topic, numbers in parsed.items():  # a JSON text starting with "{" is an object
        if not topic or not isinstance(numbers, list):
            _bad_json(ASSIGN, value, f"topic {topic!r} must be a non-empty name with a list", _ASSIGN_EXAMPLE)
        for number in numbers:
            if type(number) is not int or not 0 <= number <= INT_MAX:
                _bad_json(ASSIGN, value, f"partition {number!r} of {topic!r} is not an integer >= 0", _ASSIGN_EXAMPLE)
            partitions.append(TopicPartition(topic, number))
    return tuple(dict.fromkeys(partitions))


def _timestamp_strategy(given: Mapping[str, str]) -> TimestampStrategy:
    value = given.get(STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY, "error").strip().lower()
    if value == "error":
        return "error"
    if value == "latest":
        return "latest"
    raise InvalidConfigError(
        f"{STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY} = {given[STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY]!r} is invalid; "
        "accepted: error, latest"
    )


def _range_limit(
    given: Mapping[str, str], names: tuple[str, str, str], default: OffsetRangeLimit, warnings: list[str]
) -> OffsetRangeLimit:
    """``getKafkaOffsetRangeLimit``: the global timestamp, else per-partition timestamps, else offsets."""
    timestamp_name, by_timestamp_name, offsets_name = names
    present = [name for name in names if name in given]
    for shadowed in present[1:]:
        warnings.append(f"{shadowed} option ignored: {present[0]} takes precedence")
    if not present:
        return default
    name = present[0]
    value = given[name]
    if name == timestamp_name:
        text = value.strip()
        if not _LONG.fullmatch(text) or not 0 <= int(text) <= LONG_MAX:
            raise InvalidConfigError(
                f"Expected a single long value, got {text}: {name} is invalid; accepted: milliseconds since the "
                "epoch (an integer >= 0)"
            )
        return OffsetRangeLimit("global_timestamp", name, timestamp=int(text))
    if name == by_timestamp_name:
        return OffsetRangeLimit("specific_timestamps", name, _sorted_items(parse_partition_timestamps(value, name)))
    text = value.strip()
    if text.lower() == "latest":
        return OffsetRangeLimit("latest", name)
    if text.lower() == "earliest":
        return OffsetRangeLimit("earliest", name)
    return OffsetRangeLimit("specific_offsets", name, _sorted_items(parse_partition_offsets(value, name)))


def _refuse_ending_options(given: Mapping[str, str]) -> None:
    """``validateStreamOptions``; ``endingTimestamp`` too, which Spark's stream silently ignores."""
    if ENDING_OFFSETS in given:
        raise InvalidConfigError(
            f"ending offset not valid in streaming queries: option {ENDING_OFFSETS} is accepted in batch queries only"
        )
    for name in (ENDING_OFFSETS_BY_TIMESTAMP, ENDING_TIMESTAMP):
        if name in given:
            raise InvalidConfigError(
                f"ending timestamp not valid in streaming queries: option {name} is accepted in batch queries only"
            )


def _check_batch_limits(starting: OffsetRangeLimit, ending: OffsetRangeLimit) -> None:
    """``validateBatchOptions`` and ``checkOffsetLimitValidity``: a batch has a fixed, non-empty extent."""
    if starting.kind == "latest":
        raise InvalidConfigError(
            f"starting offset can't be latest for batch queries on Kafka: {starting.option} accepts earliest or JSON "
            "offsets (-2 for earliest) in batch queries"
        )
    if starting.kind == "specific_offsets":
        for tp, offset in starting.values:
            if offset == LATEST:
                raise InvalidConfigError(
                    f"startingOffsets for {tp} can't be latest for batch queries on Kafka: {starting.option} accepts "
                    "offsets >= 0 or -2 (earliest) in batch queries"
                )
    if ending.kind == "earliest":
        raise InvalidConfigError(
            f"ending offset can't be earliest for batch queries on Kafka: {ending.option} accepts latest or JSON "
            "offsets (-1 for latest)"
        )
    if ending.kind == "specific_offsets":
        for tp, offset in ending.values:
            if offset == EARLIEST:
                raise InvalidConfigError(
                    f"ending offset for {tp} can't be earliest for batch queries on Kafka: {ending.option} accepts "
                    "offsets >= 0 or -1 (latest)"
                )
    both_specific = {starting.kind, ending.kind}
    if starting.kind == ending.kind and both_specific <= {"specific_offsets", "specific_timestamps"}:
        start, end = starting.by_partition(), ending.by_partition()
        if start.keys() != end.keys():
            raise InvalidConfigError(
                f"The specified start offset and end offset should have the same topic-partitions. Topic-partitions "
                f"for start offset: {_tp_list(start)}, topic-partitions for end offset: {_tp_list(end)}; accepted: "
                f"{starting.option} and {ending.option} naming the same partitions"
            )
        for tp, first in start.items():
            last = end[tp]
            if first > last and first >= 0 and last >= 0:
                raise InvalidConfigError(
                    f"The specified start offset {first} is greater than the end offset {last} for topic {tp.topic} "
                    f"partition {tp.partition}; accepted: {starting.option} <= {ending.option} for every partition"
                )


def _path(given: Mapping[str, str]) -> str:
    if PATH not in given:
        raise InvalidConfigError(
            "option path is missing; accepted: the log directory, as .load(path) or .option('path', ...)"
        )
    return parse_non_empty(PATH, given[PATH])


def _isolation_level(given: Mapping[str, str]) -> IsolationLevel:
    value = _one_of_synonyms(given, ISOLATION_LEVEL, KAFKA_ISOLATION_LEVEL)
    if value is None or value.strip().lower() == "read_uncommitted":
        return "read_uncommitted"
    if value.strip().lower() == "read_committed":
        return "read_committed"
    raise InvalidConfigError(f"{ISOLATION_LEVEL} = {value!r} is invalid; accepted: read_uncommitted, read_committed")


def _group_id(given: Mapping[str, str]) -> str | None:
    value = _one_of_synonyms(given, GROUP_ID, KAFKA_GROUP_ID)
    return None if value is None else parse_non_empty(GROUP_ID, value)


def _one_of_synonyms(given: Mapping[str, str], name: str, synonym: str) -> str | None:
    """The value of an option Kafka users may also write with the ``kafka.`` prefix; both must agree."""
    value, other = given.get(name), given.get(synonym)
    if value is not None and other is not None and value != other:
        raise InvalidConfigError(
            f"{name} = {value!r} and {synonym} = {other!r} disagree; accepted: one of them, or both equal"
        )
    return value if value is not None else other


def _assignor(given: Mapping[str, str]) -> str:
    value = given.get(ASSIGNOR, "range").strip()
    for name in (value, value.lower()):
        try:
            return assignor_for(name).name
        except InvalidConfigError:
            continue
    raise InvalidConfigError(
        f"{ASSIGNOR} = {value!r} is invalid; accepted: range, roundrobin, sticky, cooperative-sticky"
    )


def _optional(given: Mapping[str, str], name: str, convert: Callable[[str, str], Any], default: Any = None) -> Any:
    return convert(name, given[name]) if name in given else default


def parse_non_empty(name: str, value: str) -> str:
    """An option that must not be blank (shared with the sink's options)."""
    if not value.strip():
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: a non-empty string")
    return value


def parse_boolean(name: str, value: str) -> bool:
    """A boolean option as Spark reads one: true or false in any case (shared with the sink's options)."""
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: true, false")
    return text == "true"


def _positive_long(name: str, value: str) -> int:
    return _bounded_integer(name, value, LONG_MAX, "a positive integer (at most 9223372036854775807)")


def _non_negative_long(name: str, value: str) -> int:
    text = value.strip()
    if not _LONG.fullmatch(text) or not 0 <= int(text) <= LONG_MAX:
        raise InvalidConfigError(
            f"{name} = {value!r} is invalid; accepted: 0 or a positive integer (at most 9223372036854775807)"
        )
    return int(text)


def _positive_int(name: str, value: str) -> int:
    return _bounded_integer(name, value, INT_MAX, "a positive integer (at most 2147483647)")


def _bounded_integer(name: str, value: str, maximum: int, accepted: str) -> int:
    text = value.strip()
    if not _LONG.fullmatch(text) or not 1 <= int(text) <= maximum:
        raise InvalidConfigError(f"{name} must be positive: {name} = {value!r} is invalid; accepted: {accepted}")
    return int(text)


def _duration_ms(name: str, value: str) -> int:
    """Spark's ``Utils.timeStringAsMs``: ``100ms``, ``30s``, ``15m`` / ``15min``, ``1h``, ``1d``, ``500us``, or
    plain digits for milliseconds; refused when negative (Spark would fire every trigger)."""
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None or (match.group(2) is not None and match.group(2) not in _DURATION_UNITS_MS):
        raise InvalidConfigError(
            f"{name} = {value!r} is invalid; accepted: a duration such as 100ms, 30s, 15m, 1h or 1d (us, ms, s, m, "
            "min, h, d; milliseconds when no unit is given)"
        )
    amount = int(match.group(1))
    if amount < 0:
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: a duration >= 0 such as 100ms, 30s or 15m")
    multiplier, divisor = _DURATION_UNITS_MS[match.group(2) or "ms"]
    return amount * multiplier // divisor


# -- offset JSON ------------------------------------------------------------------------------------------


def parse_partition_offsets(json_text: str, option_name: str) -> dict[TopicPartition, int]:
    """Per-partition offsets as ``startingOffsets`` / ``endingOffsets`` take them (``JsonUtils.partitionOffsets``).

    Stricter than Jackson: offsets must be JSON integers (not ``true``, ``1.0`` or ``"1"``), ``>= 0`` or
    the sentinels -2 (earliest) and -1 (latest); partitions must be written as canonical decimal strings;
    a key may not repeat. A lenient parse would turn typos into silently different start points.

    Raises:
        InvalidConfigError: The text is not such JSON; the message names ``option_name``.
    """
    return _offset_map(
        _load_json(json_text, option_name, _OFFSETS_EXAMPLE, InvalidConfigError),
        option_name,
        json_text,
        lambda offset: offset >= 0 or offset in (EARLIEST, LATEST),
        "an integer >= 0, -2 (earliest) or -1 (latest)",
        _OFFSETS_EXAMPLE,
        InvalidConfigError,
    )


def parse_partition_timestamps(json_text: str, option_name: str) -> dict[TopicPartition, int]:
    """Per-partition timestamps as ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` take them
    (``JsonUtils.partitionTimestamps``), as strictly as :func:`parse_partition_offsets`.

    Raises:
        InvalidConfigError: The text is not such JSON or a timestamp is negative (Kafka would read -1 and -2
            as latest and earliest); the message names ``option_name``.
    """
    return _offset_map(
        _load_json(json_text, option_name, _TIMESTAMPS_EXAMPLE, InvalidConfigError),
        option_name,
        json_text,
        lambda timestamp: timestamp >= 0,
        "milliseconds since the epoch (an integer >= 0)",
        _TIMESTAMPS_EXAMPLE,
        InvalidConfigError,
    )


def parse_offsets(value: str | Mapping[str, Any]) -> dict[TopicPartition, int]:
    """A source offset back to partition -> next offset: the JSON :func:`format_offsets` writes, or the dict
    PySpark hands a reader after ``json.loads`` of it.

    Raises:
        InvalidOffsetError: Not such an offset (offsets here are resolved, so no sentinels).
    """
    parsed = _load_json(value, "offset", _OFFSETS_EXAMPLE, InvalidOffsetError) if isinstance(value, str) else value
    return _offset_map(
        parsed,
        "offset",
        value,
        lambda offset: offset >= 0,
        "an integer >= 0",
        '{"topicA":{"0":23,"1":5}}',
        InvalidOffsetError,
    )


def offsets_to_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Offsets as the nested dict a PySpark stream reader returns, built in one fixed order.

    PySpark turns the dict into the offset JSON with plain ``json.dumps`` (no ``sort_keys``), and Spark
    compares offsets as strings, so insertion order is the order: topics by name, then partitions by
    number (``"2"`` before ``"10"``, which ``sort_keys`` would reverse).
    """
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        offset = offsets[tp]
        if type(offset) is not int or offset < 0:
            raise InvalidOffsetError(f"offset of {tp} = {offset!r} is invalid; accepted: an integer >= 0")
        result.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return result


def format_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """The offset JSON, ``{"topic": {"partition": next_offset}}``: exactly what PySpark writes for
    :func:`offsets_to_dict` of the same offsets, so both spellings compare equal."""
    return json.dumps(offsets_to_dict(offsets))


class _DuplicateKey(ValueError):
    pass


def _load_json(text: str, what: str, example: str, error: type[ValueError]) -> Any:
    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, item in pairs:
            if key in result:
                raise _DuplicateKey(key)
            result[key] = item
        return result

    try:
        return json.loads(text, object_pairs_hook=no_repeats)
    except _DuplicateKey as duplicate:
        raise error(f"{what} = {text!r} is invalid: key {duplicate} repeats; accepted: JSON like {example}") from None
    except (TypeError, ValueError) as problem:
        raise error(f"{what} = {text!r} is invalid ({problem}); accepted: JSON like {example}") from None


def _offset_map(
    parsed: Any,
    what: str,
    source: object,
    accept: Callable[[int], bool],
    accepted: str,
    example: str,
    error: type[ValueError],
) -> dict[TopicPartition, int]:
    if not isinstance(parsed, dict):
        raise error(f"{what} = {source!r} is invalid: not a JSON object; accepted: JSON like {example}")
    result: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(topic, str) or not topic or not isinstance(partitions, Mapping):
            raise error(
                f"{what} = {source!r} is invalid: topic {topic!r} must be a non-empty name with an object of "
                f"partitions; accepted: JSON like {example}"
            )
        for key, value in partitions.items():
            if not isinstance(key, str) or not _PARTITION_KEY.fullmatch(key) or int(key) > INT_MAX:
                raise error(
                    f"{what} = {source!r} is invalid: partition {key!r} of {topic!r} is not a partition number "
                    f"written as a string; accepted: JSON like {example}"
                )
            if type(value) is not int or not accept(value) or value > LONG_MAX:
                raise error(
                    f"{what} = {source!r} is invalid: the value of {topic}-{key} is {value!r}; accepted: {accepted}"
                )
            result[TopicPartition(topic, int(key))] = value
    return result


def _bad_json(what: str, source: str, reason: str, example: str) -> NoReturn:
    raise InvalidConfigError(f"{what} = {source!r} is invalid: {reason}; accepted: JSON like {example}")


def _sorted_items(values: Mapping[TopicPartition, int]) -> tuple[tuple[TopicPartition, int], ...]:
    return tuple(sorted(values.items()))


def _tp_list(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"


# -- resolution against a log directory ------------------------------------------------------------------


def source_log_dir(options: SourceOptions) -> LogDirectory:
    """The log directory of option ``path``, which must be an existing directory: a mistyped path fails naming
    itself, where reading it as a directory without topics would give an empty result or a wait for topics
    that never come (Spark's Kafka source, given brokers that are not there, fails too).

    Raises:
        InvalidLogDirectoryError: ``path`` does not exist or is not a directory.
    """
    storage = log_storage(options.path, options.storage_settings)
    if not storage.is_directory(storage.root):
        raise InvalidLogDirectoryError(
            f"option path = {options.path!r} is not a log directory: it does not exist or is not a directory; "
            "accepted: an existing log directory, as .load(path) or .option('path', ...)"
        )
    return LogDirectory(storage)


def subscribed_partitions(options: SourceOptions, log_dir: LogDirectory) -> list[TopicPartition]:
    """The partitions the subscription covers now, sorted (``ConsumerStrategy.assignedTopicPartitions``).

    ``assign`` gives its partitions, each of which must exist. ``subscribe`` gives every partition of
    the named topics: in a batch query each must exist, as Spark's Kafka source fails on a topic the
    broker does not have (``UnknownTopicOrPartitionException``); a stream reads a missing one once it is
    created. ``subscribePattern`` gives every partition of the topics the pattern finds (none is no
    error), ``__``-prefixed internal topics excepted; like Spark's default (admin-based) offset reader,
    the pattern need only match part of a name (``re.search``, Scala's ``findFirstIn``), so anchor it
    (``^orders$``) for an exact name.

    Raises:
        UnknownTopicError: ``assign`` names a topic or partition the log directory lacks, or a batch query's
            ``subscribe`` a topic.
    """
    if options.assign is not None:
        for tp in options.assign:
            count = _partition_count(log_dir, tp.topic)
            if count is None or tp.partition >= count:
                have = "does not exist" if count is None else f"has {count} partitions"
                raise UnknownTopicError(
                    f"option assign names {tp}, but topic '{tp.topic}' {have} in {log_dir.path}; accepted: existing "
                    "partitions"
                )
        return sorted(options.assign)
    if options.subscribe is not None:
        recent = log_dir.topics.recent_partition_counts()
        if all(topic in recent for topic in options.subscribe):  # no listing: on an object store a request each
            return sorted(TopicPartition(t, n) for t in set(options.subscribe) for n in range(recent[t]))
    names = log_dir.topics.names()
    if options.subscribe is not None:
        missing = [topic for topic in options.subscribe if topic not in names]
        if missing and not options.streaming:
            raise UnknownTopicError(
                f"option subscribe names {', '.join(repr(t) for t in missing)}, but no such topic exists in "
                f"{log_dir.path}; accepted: existing topics (subscribePattern reads the topics that match)"
            )
        wanted = set(options.subscribe)
        topics = [name for name in names if name in wanted]
    else:
        pattern = re.compile(options.subscribe_pattern or "")
        topics = [name for name in names if not name.startswith("__") and pattern.search(name)]
    partitions: list[TopicPartition] = []
    for topic in topics:
        count = _partition_count(log_dir, topic)
        partitions.extend(TopicPartition(topic, number) for number in range(count or 0))
    return sorted(partitions)


def _partition_count(log_dir: LogDirectory, topic: str) -> int | None:
    try:
        return log_dir.topics.get(topic).partitions
    except UnknownTopicError:  # absent, or deleted since it was listed
        return None


def earliest_offsets(log_dir: LogDirectory, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Each partition's log start offset (ListOffsets ``earliest``)."""
    return {tp: start for tp, (start, _) in partition_offsets(log_dir, partitions).items()}


def latest_offsets(log_dir: LogDirectory, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Each partition's log end offset (ListOffsets ``latest``)."""
    return {tp: end for tp, (_, end) in partition_offsets(log_dir, partitions).items()}


def partition_offsets(
    log_dir: LogDirectory, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int, int]]:
    """Each partition's log start and log end offsets, in order, from one look per topic (``LogDirectory.offsets``:
    on an object store, one probe of the topic's chain, the topics asked at once)."""
    wanted = list(partitions)
    by_topic: dict[str, list[int]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, []).append(tp.partition)

    def one(topic: str) -> dict[int, tuple[int, int]]:
        return log_dir.offsets(topic, by_topic[topic])

    topics = list(by_topic)
    if isinstance(log_dir.storage, FileSystemStorage) or len(topics) < 2:
        found = [one(topic) for topic in topics]
    else:
        with ThreadPoolExecutor(max_workers=min(_PARALLEL_ASKS, len(topics))) as pool:
            found = list(pool.map(one, topics))
    offsets = dict(zip(topics, found, strict=True))
    return {tp: offsets[tp.topic][tp.partition] for tp in wanted}


_Answer = TypeVar("_Answer")
#: How many partitions (or topics) of a log directory on an object store are asked at once: each ask is a request or
#: more of 10-30 ms, which a driver planning a micro-batch must not wait for one after another.
_PARALLEL_ASKS = 16


def each_partition(
    log_dir: LogDirectory, partitions: Iterable[TopicPartition], ask: Callable[[Log], _Answer]
) -> dict[TopicPartition, _Answer]:
    """``ask(log)`` of each partition's log, in order; in parallel on an object store."""

    def one(tp: TopicPartition) -> _Answer:
        with log_dir.partition(tp.topic, tp.partition) as log:
            return ask(log)

    wanted = list(partitions)
    if isinstance(log_dir.storage, FileSystemStorage) or len(wanted) < 2:
        return {tp: one(tp) for tp in wanted}
    with ThreadPoolExecutor(max_workers=min(_PARALLEL_ASKS, len(wanted))) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))


def resolve_start(
    options: SourceOptions, log_dir: LogDirectory, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """The concrete offsets ``starting_offsets`` means now for ``partitions`` (``fetchPartitionOffsets`` with
    ``isStartingOffsets``); a stream calls this once and keeps the answer.

    Earliest and -2 are the log start offset, latest and -1 the log end offset. A timestamp is the
    first offset whose record timestamp is at least it; when no record qualifies,
    ``startingOffsetsByTimestampStrategy`` decides: ``error`` fails, ``latest`` takes the log end offset.
    Explicit offsets are taken as given: one outside the log is the data-loss check's business, when
    the range is read.

    Raises:
        InvalidConfigError: Per-partition offsets or timestamps that do not name exactly ``partitions``,
            or a timestamp matching nothing under the ``error`` strategy.
    """
    return _resolve(options.starting_offsets, log_dir, partitions, starting=True, strategy=options.timestamp_strategy)


def resolve_end(
    options: SourceOptions, log_dir: LogDirectory, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """The concrete offsets a batch ends at (exclusive) for ``partitions``; latest for a stream's options.

    As :func:`resolve_start`, except that a timestamp matching no record always resolves to the log
    end offset, whatever the strategy (Kafka's ``readTimestampOffsets`` for ending offsets).

    Raises:
        InvalidConfigError: Per-partition offsets or timestamps that do not name exactly ``partitions``.
    """
    limit = options.ending_offsets or _LATEST_LIMIT
    return _resolve(limit, log_dir, partitions, starting=False, strategy="latest")


def resolve_batch(options: SourceOptions, log_dir: LogDirectory) -> list[OffsetRange]:
    """A batch read's ranges: the subscribed partitions from their resolved start to their resolved end.

    Raises:
        InvalidConfigError: See :func:`resolve_start` and :func:`resolve_end`.
        UnknownTopicError: See :func:`subscribed_partitions`.
        InvalidOffsetError: A start resolved above its end (Spark's
            ``RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET``), e.g. a starting timestamp after the ending one.
    """
    partitions = subscribed_partitions(options, log_dir)
    if options.starting_offsets.kind == "earliest" and (options.ending_offsets or _LATEST_LIMIT).kind == "latest":
        # Both ends of each partition from one look at its topic: on an object store, one probe of its chain.
        bounds = partition_offsets(log_dir, partitions)
        start = {tp: first for tp, (first, _) in bounds.items()}
        end = {tp: last for tp, (_, last) in bounds.items()}
    else:
        start = resolve_start(options, log_dir, partitions)
        end = resolve_end(options, log_dir, partitions)
    for tp in partitions:
        if start[tp] > end[tp]:
            ending = options.ending_offsets.option if options.ending_offsets is not None else None
            raise InvalidOffsetError(
                f"The resolved start offset {start[tp]} is greater than the resolved end offset {end[tp]} for topic "
                f"{tp.topic} partition {tp.partition}; accepted: {options.starting_offsets.option or 'the start'} "
                f"resolving at or before {ending or 'the log end'}"
            )
    return [OffsetRange(tp, start[tp], end[tp]) for tp in partitions]


def _resolve(
    limit: OffsetRangeLimit,
    log_dir: LogDirectory,
    partitions: Sequence[TopicPartition],
    *,
    starting: bool,
    strategy: TimestampStrategy,
) -> dict[TopicPartition, int]:
    if limit.kind == "earliest":
        return earliest_offsets(log_dir, partitions)
    if limit.kind == "latest":
        return latest_offsets(log_dir, partitions)
    if limit.kind == "global_timestamp":
        assert limit.timestamp is not None
        timestamps = dict.fromkeys(partitions, limit.timestamp)
    else:
        given = limit.by_partition()
        if given.keys() != set(partitions):
            position = "start" if starting else "end"
            if limit.kind == "specific_offsets":
                what = f"Partitions specified for Kafka {position} offsets don't match what are assigned"
                hint = "Use -1 for latest, -2 for earliest."
            else:
                what = (
                    f"Partitions specified for Kafka timestamp based {position} offsets don't match what are assigned"
                )
                hint = "You must specify all the partitions."
            raise InvalidConfigError(
                f"{what}. Maybe topic partitions are created or deleted while the query is running. {hint} "
                f"Specified: {_tp_list(given)} Assigned: {_tp_list(partitions)}; accepted: {limit.option} naming "
                "exactly the subscribed partitions"
            )
        if limit.kind == "specific_offsets":
            return {tp: _offset_or_bound(log_dir, tp, given[tp]) for tp in partitions}
        timestamps = {tp: given[tp] for tp in partitions}
    return {
        tp: _offset_for_timestamp(log_dir, tp, timestamp, limit, starting=starting, strategy=strategy)
        for tp, timestamp in timestamps.items()
    }


def _offset_or_bound(log_dir: LogDirectory, tp: TopicPartition, offset: int) -> int:
    if offset == EARLIEST:
        return _bounds(log_dir, tp)[0]
    if offset == LATEST:
        return _bounds(log_dir, tp)[1]
    return offset


def _offset_for_timestamp(
    log_dir: LogDirectory,
    tp: TopicPartition,
    timestamp: int,
    limit: OffsetRangeLimit,
    *,
    starting: bool,
    strategy: TimestampStrategy,
) -> int:
    with log_dir.partition(tp.topic, tp.partition) as log:
        found = log.offset_for_timestamp(timestamp)
        if found is not None:
            return found[0]
        if starting and strategy == "error":
            raise InvalidConfigError(
                f"No offset matched from request of topic-partition {tp} and timestamp {timestamp}: no record of "
                f"{tp} has a timestamp at or after it ({limit.option}); accepted: an earlier timestamp, or "
                f"{STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY} = latest to start at the log end"
            )
        return log.log_end_offset


def _bounds(log_dir: LogDirectory, tp: TopicPartition) -> tuple[int, int]:
    return log_dir.offsets(tp.topic, [tp.partition])[tp.partition]
