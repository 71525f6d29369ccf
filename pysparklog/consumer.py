"""A Kafka-style consumer over a log directory: subscribe or assign, poll Arrow batches, commit offsets.

``Consumer`` follows Kafka's ``KafkaConsumer``: ``subscribe`` (topics or a pattern) joins the consumer
group ``group.id`` and consumes the partitions the group's assignor gives it; ``assign`` takes
partitions by hand. ``poll_arrow`` returns the next records as one Arrow table (Spark's Kafka
columns, plus ``headers``), read straight from the segments; ``poll`` returns them as records.
Positions start at the group's committed offsets, else where ``auto.offset.reset`` says, and
``commit`` (or auto-commit every ``auto.commit.interval.ms``, on revocation and on close) stores
them in ``__consumer_offsets`` through ``pysparklog.offsets``.

Group membership runs through ``pysparklog.group``: a background thread heartbeats every
``heartbeat.interval.ms``; rebalances are applied inside ``poll``, where the rebalance listener
runs, as Kafka runs it on the polling thread. A partition this consumer is asked to give up is
committed first (with auto-commit) and only then released, and a partition is fetched only while
the group records this consumer as its owner, so no two live members consume it at once. If
``poll`` is not called for ``max.poll.interval.ms`` the consumer leaves the group, as Kafka's does,
and rejoins at its next poll.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import NamedTuple, Protocol

import pyarrow as pa

from pysparklog._compat import StrEnum
from pysparklog.assignors import RebalanceProtocol, assignor_for
from pysparklog.broker_configs import without_broker_configs
from pysparklog.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    InvalidConfigError,
    OffsetOutOfRangeError,
    PySparkLogError,
    UnknownMemberIdError,
    UnknownTopicError,
)
from pysparklog.group import GroupCoordinator, JoinRequest, Membership, validate_group_id
from pysparklog.offsets import OffsetStore, check_long, checked_topic_partition
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.records.arrow_records import record_schema
from pysparklog.storage.transaction_index import ISOLATION_LEVELS, READ_UNCOMMITTED, is_read_committed
from pysparklog.structs import OffsetAndMetadata, TopicPartition

_log = logging.getLogger(__name__)
_INTERNAL_TOPIC_PREFIX = "__"  # __consumer_offsets, __transaction_state: left out of pattern subscriptions
_IDLE_POLL_S = 0.02  # the pause between reads that found nothing while poll waits


class AutoOffsetReset(StrEnum):
    """Kafka's ``auto.offset.reset``: where a partition without a valid position starts."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"  # raise OffsetOutOfRangeError instead


def _positive(name: str, value: object) -> None:
    """A positive Java int, as Kafka's int consumer configs are."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT_MAX:
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: an integer from 1 to {INT_MAX}")


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Consumer settings, Kafka's names with dots as underscores; checked when made.

    Attributes:
        group_id: ``group.id``: needed to subscribe and to commit.
        client_id: ``client.id``: member ids start with it.
        group_instance_id: ``group.instance.id``: static membership.
        auto_offset_reset: ``auto.offset.reset``: ``earliest``, ``latest`` (default) or ``none``.
        enable_auto_commit: ``enable.auto.commit`` (default on when there is a group id).
        auto_commit_interval_ms: ``auto.commit.interval.ms``.
        session_timeout_ms: ``session.timeout.ms``: without a heartbeat this long a member is removed.
        heartbeat_interval_ms: ``heartbeat.interval.ms``: below the session timeout.
        max_poll_interval_ms: ``max.poll.interval.ms``: without a poll this long the consumer leaves.
        max_poll_records: ``max.poll.records``: at most this many records per poll.
        max_partition_fetch_bytes: ``max.partition.fetch.bytes``: file data read per partition per poll.
        partition_assignment_strategy: ``partition.assignment.strategy``: assignors by preference.
        exclude_internal_topics: ``exclude.internal.topics``: patterns do not match ``__`` topics.
        include_headers: Return record headers (a ``headers`` column); off saves decoding them.
        isolation_level: ``isolation.level``: ``read_uncommitted`` (default) reads everything
            appended; ``read_committed`` stops at the last stable offset and skips records of
            aborted transactions, and positions at "the end" mean the last stable offset.
    """

    group_id: str | None = None
    client_id: str = "pysparklog-consumer"
    group_instance_id: str | None = None
    auto_offset_reset: AutoOffsetReset | str = AutoOffsetReset.LATEST
    enable_auto_commit: bool | None = None
    auto_commit_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500
    max_partition_fetch_bytes: int = 1024 * 1024
    partition_assignment_strategy: tuple[str, ...] = ("range", "cooperative-sticky")
    exclude_internal_topics: bool = True
    include_headers: bool = True
    isolation_level: str = READ_UNCOMMITTED

    def __post_init__(self) -> None:
        if self.group_id is not None:
            validate_group_id(self.group_id)
        try:
            object.__setattr__(self, "auto_offset_reset", AutoOffsetReset(self.auto_offset_reset))
        except ValueError:
            accepted = ", ".join(r.value for r in AutoOffsetReset)
            raise InvalidConfigError(
                f"auto.offset.reset = {self.auto_offset_reset!r} is invalid; accepted: {accepted}"
            ) from None
        if self.enable_auto_commit is None:
            object.__setattr__(self, "enable_auto_commit", self.group_id is not None)
        elif self.enable_auto_commit and self.group_id is None:
            raise InvalidConfigError("enable.auto.commit = true needs a group.id; set group.id or turn it off")
        for name in ("enable_auto_commit", "exclude_internal_topics", "include_headers"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidConfigError(
                    f"{name.replace('_', '.')} = {getattr(self, name)!r} is invalid; accepted: true or false"
                )
        if self.isolation_level not in ISOLATION_LEVELS:
            raise InvalidConfigError(
                f"isolation.level = {self.isolation_level!r} is invalid; accepted: {', '.join(ISOLATION_LEVELS)}"
            )
        if not isinstance(self.client_id, str):
            raise InvalidConfigError(f"client.id = {self.client_id!r} is invalid; accepted: a string")
        for name in (
            "auto_commit_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "max_poll_interval_ms",
            "max_poll_records",
            "max_partition_fetch_bytes",
        ):
            _positive(name.replace("_", "."), getattr(self, name))
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidConfigError(
                f"heartbeat.interval.ms = {self.heartbeat_interval_ms} must be lower than session.timeout.ms = "
                f"{self.session_timeout_ms}"
            )
        strategy = self.partition_assignment_strategy
        if not isinstance(strategy, tuple) or not all(isinstance(name, str) for name in strategy):
            raise InvalidConfigError(
                f"partition.assignment.strategy = {strategy!r} is invalid; accepted: a tuple of assignor names"
            )
        if not self.partition_assignment_strategy:
            raise InvalidConfigError("partition.assignment.strategy is empty; name at least one assignor")
        for name in self.partition_assignment_strategy:
            assignor_for(name)
        if self.group_instance_id is not None and not (
            isinstance(self.group_instance_id, str) and self.group_instance_id
        ):
            raise InvalidConfigError(
                f"group.instance.id = {self.group_instance_id!r} is invalid; accepted: a non-empty string"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> ConsumerConfig:
        """A config from Kafka property names (``"group.id"``, ``"max.poll.records"``...); strings are converted.

        The broker connection's configs (``bootstrap.servers``, ``security.protocol``, ``sasl.*``...) are accepted
        and ignored, with a warning: there is no broker.

        Raises:
            InvalidConfigError: An unknown name or a value of the wrong type.
        """
        by_name = {f.name.replace("_", "."): f for f in fields(cls)}
        values: dict[str, object] = {}
        for name, value in without_broker_configs(properties, "consumer").items():
            f = by_name.get(name)
            if f is None:
                raise InvalidConfigError(
                    f"unknown consumer property {name!r}; accepted: {', '.join(sorted(by_name))}, and the broker "
                    "connection's configs (bootstrap.servers, security.protocol, sasl.*, ssl.*...), ignored"
                )
            values[f.name] = _convert(name, value)
        return cls(**values)  # type: ignore[arg-type]


_BOOL_PROPERTIES = frozenset({"enable.auto.commit", "exclude.internal.topics", "include.headers"})
_STRING_PROPERTIES = frozenset({"group.id", "client.id", "group.instance.id", "auto.offset.reset", "isolation.level"})


def _convert(name: str, value: object) -> object:
    """A property value given as text, converted to the type of its field."""
    if not isinstance(value, str) or name in _STRING_PROPERTIES:
        return value
    if name == "partition.assignment.strategy":  # Kafka's list syntax: names separated by commas
        return tuple(n.strip() for n in value.split(",") if n.strip())
    if name in _BOOL_PROPERTIES:
        if value.lower() not in ("true", "false"):
            raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: true, false")
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: an integer") from None


class ConsumerRecord(NamedTuple):
    """One record, as ``poll`` returns it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class ConsumerRebalanceListener(Protocol):
    """Kafka's ``ConsumerRebalanceListener``: called inside ``poll`` when partitions move."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None: ...


@dataclass(slots=True)
class _GroupState:
    """The consumer's side of its group membership."""

    coordinator: GroupCoordinator
    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    listener: ConsumerRebalanceListener | None = None
    membership: Membership | None = None  # the latest heartbeat's answer
    generation: int = -1  # the generation whose assignment poll applied last
    error: Exception | None = None  # raised by the heartbeat thread, handled by the next poll
    last_poll: float = field(default_factory=time.monotonic)
    polling: bool = False  # inside poll: time spent there does not count toward max.poll.interval.ms


class Consumer:
    """Reads topics of a log directory as a Kafka consumer does.

    Args:
        log_dir: The log directory (a path or a ``LogDirectory``).
        config: The settings (default: ``ConsumerConfig()``).

    Example:
        >>> with Consumer("/data/logs", ConsumerConfig(group_id="billing")) as consumer:
        ...     consumer.subscribe(["orders"])
        ...     table = consumer.poll_arrow(timeout_ms=1000)
        ...     consumer.commit()
    """

    def __init__(self, log_dir: str | LogDirectory, config: ConsumerConfig | None = None) -> None:
        self.log_dir = log_dir if isinstance(log_dir, LogDirectory) else LogDirectory(log_dir)
        self.config = config or ConsumerConfig()
        self._offsets = OffsetStore(self.log_dir)
        self._logs: dict[TopicPartition, Log] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._fetching: list[TopicPartition] = []  # the partitions poll reads, in turn
        self._next_partition = 0  # where the next poll starts, so no partition starves
        self._manual: set[TopicPartition] | None = None
        self._group: _GroupState | None = None
        self._lock = threading.RLock()
        # Guards the group membership; the heartbeat thread takes only this one, so poll's fetching,
        # commits and listener calls (under ``_lock``) never hold up heartbeats. Taken after ``_lock``.
        self._group_lock = threading.RLock()
        self._closed = threading.Event()
        self._heartbeats: threading.Thread | None = None
        self._last_commit = time.monotonic()
        self._schema = record_schema(self.config.include_headers)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] = (),
        *,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group for ``topics`` or the topics matching ``pattern`` (a whole-name regular
        expression, matched again at every heartbeat so new topics are picked up).

        Raises:
            InvalidConfigError: No group.id, both or neither of topics and pattern, a bad pattern,
                or the consumer has manually assigned partitions.
        """
        if isinstance(topics, str):  # iterable, but as its characters
            raise InvalidConfigError(f"topics = {topics!r} is invalid; accepted: a collection of topic names")
        topics = tuple(topics)
        if self.config.group_id is None:
            raise InvalidConfigError("subscribe needs a group.id; set group.id or use assign()")
        if bool(topics) == (pattern is not None):
            raise InvalidConfigError("subscribe takes topics or a pattern, exactly one of them")
        if self._manual is not None:
            raise InvalidConfigError("subscribe and assign are exclusive; call unsubscribe() first")
        try:
            compiled = re.compile(pattern) if pattern is not None else None
        except re.error as error:
            raise InvalidConfigError(f"pattern {pattern!r} is not a valid regular expression: {error}") from None
        with self._lock, self._group_lock:
            if self._group is None:
                self._group = _GroupState(GroupCoordinator(self.log_dir, self.config.group_id))
            self._group.topics, self._group.pattern, self._group.listener = topics, compiled, listener
        if self._heartbeats is None:
            self._heartbeats = threading.Thread(target=self._heartbeat_loop, name="pysparklog-heartbeat", daemon=True)
            self._heartbeats.start()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, outside any group membership.

        Raises:
            InvalidConfigError: The consumer is subscribed.
            UnknownTopicError: A topic or partition does not exist.
        """
        if self._group is not None:
            raise InvalidConfigError("subscribe and assign are exclusive; call unsubscribe() first")
        wanted = {checked_topic_partition(tp) for tp in partitions}
        with self._lock:
            for tp in wanted - set(self._positions):
                self._log(tp)
            self._manual = wanted
            self._set_fetching(wanted)

    def unsubscribe(self) -> None:
        """Leave the group (committing with auto-commit) or drop the manual assignment."""
        with self._lock, self._group_lock:
            if self._group is not None:
                self._depart(autocommit=True)
            self._manual = None
            self._set_fetching(set())

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer fetches now."""
        return set(self._fetching)

    def subscription(self) -> set[str]:
        """The topics subscribed to (a pattern's matches at the last heartbeat)."""
        return set(self._subscribed_topics()) if self._group is not None else set()

    # -- positions ----------------------------------------------------------------------------

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``partition``.

        Raises:
            InvalidConfigError: The partition is not assigned to this consumer.
        """
        with self._lock:
            self._check_assigned(partition)
            position = self._positions.get(partition)
            if position is None:  # nothing committed and auto.offset.reset is none: raises
                position = self._positions[partition] = self._reset_position(partition, self._log(partition))
            return position

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next offset of ``partition`` (a position outside the log is reset at the
        next poll by ``auto.offset.reset``).

        Raises:
            InvalidOffsetError: ``offset`` is not an offset: an integer from 0 to the largest Java long (Kafka's
                ``seek`` refuses a negative one).
            InvalidConfigError: The partition is not assigned to this consumer.
        """
        check_long("seek offset", offset, 0)
        with self._lock:
            self._check_assigned(partition)
            self._positions[partition] = offset

    def seek_to_beginning(self, partitions: Collection[TopicPartition] | None = None) -> None:
        for tp in self._targets(partitions):
            self._positions[tp] = self._log(tp).log_start_offset

    def seek_to_end(self, partitions: Collection[TopicPartition] | None = None) -> None:
        for tp in self._targets(partitions):
            self._positions[tp] = self._fetch_end(self._log(tp))

    def seek_to_timestamp(self, timestamp_ms: int, partitions: Collection[TopicPartition] | None = None) -> None:
        """Position each partition at its first record with a timestamp >= ``timestamp_ms`` (the log
        end when there is none)."""
        targets = self._targets(partitions)
        found = self.offsets_for_times(dict.fromkeys(targets, timestamp_ms))
        for tp in targets:
            hit = found[tp]
            self._positions[tp] = hit.offset if hit is not None else self._log(tp).log_end_offset

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Kafka's ``offsetsForTimes``: per partition the first offset whose timestamp is >= the one given.

        Raises:
            InvalidOffsetError: A timestamp that is not milliseconds from 0 to the largest Java long (Kafka refuses
                a negative one), or a malformed partition.
        """
        result: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            partition = checked_topic_partition(tp)
            check_long(f"timestamp for {partition}", ts, 0)
            hit = self._log(partition).offset_for_timestamp(ts)
            result[partition] = OffsetAndTimestamp(hit[0], hit[1]) if hit is not None else None
        return result

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._log(tp).log_start_offset for tp in map(checked_topic_partition, partitions)}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._fetch_end(self._log(tp)) for tp in map(checked_topic_partition, partitions)}

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None for one never committed)."""
        wanted = [checked_topic_partition(tp) for tp in partitions]
        found = self._offsets.committed(self._require_group_id("committed"), wanted)
        return {tp: found.get(tp) for tp in wanted}

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition), synchronously.

        Raises:
            CommitFailedError: A rebalance moved one of the partitions to another member.
            InvalidConfigError: No group.id.
        """
        with self._lock:
            if offsets is None:
                chosen = {tp: OffsetAndMetadata(pos) for tp, pos in self._positions.items() if tp in self._fetching}
            else:
                chosen = {
                    checked_topic_partition(tp): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                    for tp, o in offsets.items()
                }
            self._commit(chosen)

    # -- polling ------------------------------------------------------------------------------

    def poll_arrow(self, timeout_ms: int = 0, max_records: int | None = None) -> pa.Table:
        """The next records of the assigned partitions, as one Arrow table, waiting up to ``timeout_ms``
        for some to arrive. Partitions take turns, so one with a backlog does not starve the others.

        Raises:
            OffsetOutOfRangeError: A position is outside its log and ``auto.offset.reset`` is ``none``.
            FencedInstanceIdError: A newer instance with this ``group.instance.id`` took over.
            InvalidConfigError: ``max_records`` is not an integer from 1 to 2147483647.
            InvalidOffsetError: ``timeout_ms`` is negative or not an integer.
        """
        limit = self.config.max_poll_records if max_records is None else max_records
        _positive("max_records", limit)
        check_long("timeout_ms", timeout_ms, 0)  # Kafka's poll: "Timeout must not be negative"
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            with self._lock:
                group = self._group
                try:
                    if group is not None:
                        group.polling = True
                        self._apply_group_changes()
                    # Before fetching: only what earlier polls returned counts as consumed (Kafka's order).
                    self._maybe_auto_commit()
                    batches = self._fetch(limit)
                finally:
                    if group is not None:
                        group.last_poll, group.polling = time.monotonic(), False
            if batches or time.monotonic() >= deadline:
                return pa.Table.from_batches(batches, schema=self._schema)
            time.sleep(min(_IDLE_POLL_S, max(deadline - time.monotonic(), 0)))

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """``poll_arrow`` as a list of records (one Python object per record: use ``poll_arrow`` for bulk)."""
        table = self.poll_arrow(timeout_ms, max_records)
        columns = table.to_pydict()
        headers = columns.get("headers") or [None] * table.num_rows
        return [
            ConsumerRecord(
                topic,
                partition,
                offset,
                int(ts.timestamp() * 1000) if ts is not None else -1,
                ts_type,
                key,
                value,
                [(h["key"], h["value"]) for h in hs or ()],
            )
            for topic, partition, offset, ts, ts_type, key, value, hs in zip(
                columns["topic"],
                columns["partition"],
                columns["offset"],
                columns["timestamp"],
                columns["timestampType"],
                columns["key"],
                columns["value"],
                headers,
                strict=True,
            )
        ]

    def close(self, *, autocommit: bool = True) -> None:
        """Commit (with auto-commit), leave the group (a static member stays until its session times
        out, as in Kafka) and release the files."""
        self._closed.set()
        if self._heartbeats is not None:
            self._heartbeats.join()
            self._heartbeats = None
        with self._lock:
            if self._group is not None:
                self._depart(autocommit=autocommit)
            elif autocommit and self.config.enable_auto_commit:
                self._commit_quietly(set(self._fetching))  # manually assigned partitions: committed too
            for log in self._logs.values():
                log.close()
            self._logs.clear()
            self._offsets.close()

    # -- fetching -----------------------------------------------------------------------------

    def _fetch(self, limit: int) -> list[pa.RecordBatch]:
        batches: list[pa.RecordBatch] = []
        order = self._fetching[self._next_partition :] + self._fetching[: self._next_partition]
        for tp in order:
            if limit <= 0:
                break
            try:
                batch = self._read(tp, limit)
            except OffsetOutOfRangeError:
                if batches:
                    break  # return what was read (its positions moved past it); the next poll raises
                raise
            if batch is not None:
                batches.append(batch)
                limit -= batch.num_rows
                self._next_partition = (self._fetching.index(tp) + 1) % len(self._fetching)
        return batches

    def _read(self, tp: TopicPartition, limit: int) -> pa.RecordBatch | None:
        """Up to ``limit`` records of ``tp`` from its position; the position moves past them (and past
        control records and compacted gaps up to where the read stopped)."""
        log = self._log(tp)
        position = self._positions.get(tp)
        if position is None:  # nothing committed and auto.offset.reset is none: raises
            position = self._positions[tp] = self._reset_position(tp, log)
        end = position + limit
        log_end = self._fetch_end(log)  # before the read: everything below it is visible to the read
        try:
            reader = log.read_arrow(
                position,
                end,
                include_headers=self.config.include_headers,
                max_chunk_bytes=self.config.max_partition_fetch_bytes,
                isolation_level=self.config.isolation_level,
            )
            batch = next(reader, None)
        except OffsetOutOfRangeError:
            self._positions[tp] = self._reset_position(tp, log)
            return None
        if batch is None or batch.num_rows == 0:
            self._positions[tp] = max(position, min(end, log_end))
            return None
        self._positions[tp] = int(batch.column("offset")[-1].as_py()) + 1
        return batch

    def _reset_position(self, tp: TopicPartition, log: Log) -> int:
        reset = self.config.auto_offset_reset
        if reset is AutoOffsetReset.NONE:
            position = self._positions.get(tp)
            if position is None:
                raise OffsetOutOfRangeError(
                    f"{tp} has no committed offset and auto.offset.reset is none; seek to a position first"
                )
            raise OffsetOutOfRangeError(
                f"position {position} of {tp} is outside its log [{log.log_start_offset}, "
                f"{log.log_end_offset}] and auto.offset.reset is none"
            )
        return log.log_start_offset if reset is AutoOffsetReset.EARLIEST else self._fetch_end(log)

    def _fetch_end(self, log: Log) -> int:
        """How far this consumer may read: the log end, or with read_committed the last stable offset."""
        return log.last_stable_offset if is_read_committed(self.config.isolation_level) else log.log_end_offset

    def _log(self, tp: TopicPartition) -> Log:
        log = self._logs.get(tp)
        if log is None:
            topic = self.log_dir.topics.get(tp.topic)  # UnknownTopicError for a missing topic
            if not 0 <= tp.partition < topic.partitions:
                raise UnknownTopicError(f"partition {tp} does not exist: {tp.topic} has {topic.partitions}")
            log = self._logs[tp] = self.log_dir.partition(tp.topic, tp.partition)
        return log

    def _set_fetching(self, partitions: set[TopicPartition]) -> None:
        """Fetch ``partitions`` from now on: new ones start at the committed offset or the reset policy.

        With ``auto.offset.reset`` none a partition without a committed offset gets no position: poll and
        ``position`` raise until the application seeks (Kafka's ``NoOffsetForPartitionException``)."""
        new = partitions - set(self._fetching)
        committed = self._offsets.committed(self.config.group_id, new) if self.config.group_id and new else {}
        for tp in sorted(new):
            log = self._log(tp)
            if tp in committed:
                self._positions[tp] = committed[tp].offset
            elif self.config.auto_offset_reset is not AutoOffsetReset.NONE:
                self._positions[tp] = self._reset_position(tp, log)
        for tp in set(self._fetching) - partitions:
            self._positions.pop(tp, None)
        self._fetching = sorted(partitions)
        self._next_partition = 0

    def _targets(self, partitions: Collection[TopicPartition] | None) -> list[TopicPartition]:
        with self._lock:
            targets = list(self._fetching) if partitions is None else [checked_topic_partition(tp) for tp in partitions]
            for tp in targets:
                self._check_assigned(tp)
            return targets

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._fetching:
            raise InvalidConfigError(f"partition {tp} is not assigned to this consumer")

    # -- commits ------------------------------------------------------------------------------

    def _require_group_id(self, what: str) -> str:
        if self.config.group_id is None:
            raise InvalidConfigError(f"{what} needs a group.id; set group.id in the consumer config")
        return self.config.group_id

    def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        group_id = self._require_group_id("commit")
        if not offsets:
            return
        made: GroupCoordinator | None = None  # for this commit only: closed after it
        if self._group is not None:
            membership = self._group.membership  # read once: the heartbeat thread may drop it
            member = membership.member_id if membership is not None else None
            coordinator = self._group.coordinator
            if member is None:
                raise CommitFailedError(f"commit of group '{group_id}' refused: this consumer is not in the group")
        else:
            member = None
            coordinator = made = GroupCoordinator(self.log_dir, group_id)
        try:
            self._offsets.commit_as(coordinator, member, offsets)
        finally:
            if made is not None:
                made.close()
        self._last_commit = time.monotonic()

    def _commit_positions(self, partitions: set[TopicPartition]) -> None:
        self._commit({tp: OffsetAndMetadata(self._positions[tp]) for tp in sorted(partitions) if tp in self._positions})

    def _maybe_auto_commit(self) -> None:
        due = time.monotonic() - self._last_commit >= self.config.auto_commit_interval_ms / 1000
        if self.config.enable_auto_commit and due and self._fetching:
            self._commit_quietly(set(self._fetching))  # a refused auto-commit is logged, as Kafka's async one

    # -- group membership ---------------------------------------------------------------------

    def _subscribed_topics(self) -> list[str]:
        group = self._group
        assert group is not None
        if group.pattern is None:
            return list(group.topics)
        exclude = self.config.exclude_internal_topics
        return [
            t
            for t in self.log_dir.topics.names()
            if group.pattern.fullmatch(t) and not (exclude and t.startswith(_INTERNAL_TOPIC_PREFIX))
        ]

    def _join(self) -> Membership:
        group = self._group
        assert group is not None
        cfg = self.config
        request = JoinRequest(
            cfg.client_id, cfg.partition_assignment_strategy, cfg.session_timeout_ms, cfg.group_instance_id
        )
        return group.coordinator.join(request, self._subscribed_topics())

    def _heartbeat(self, release: Iterable[TopicPartition] = ()) -> Membership:
        group = self._group
        assert group is not None
        with self._group_lock:
            if group.membership is None:
                group.membership = self._join()
                return group.membership
            group.membership = group.coordinator.heartbeat(
                group.membership.member_id,
                self._subscribed_topics(),
                release,
                group_instance_id=self.config.group_instance_id,
            )
            return group.membership

    def _heartbeat_loop(self) -> None:
        """Kafka's heartbeat thread: keeps the membership alive between polls, and leaves the group when
        ``poll`` has not been called for ``max.poll.interval.ms``."""
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._closed.wait(interval):
            with self._group_lock:
                group = self._group
                if group is None or group.membership is None or group.error is not None:
                    continue
                if not group.polling and time.monotonic() - group.last_poll > self.config.max_poll_interval_ms / 1000:
                    # Leave without a commit: the polling thread is stuck mid-work. As in Kafka, a static
                    # member sends no leave, and the next poll reports the partitions lost and rejoins;
                    # commits fail until then.
                    if self.config.group_instance_id is None:
                        group.coordinator.leave(group.membership.member_id)
                    group.membership = None
                    group.error = UnknownMemberIdError(
                        f"left group '{self.config.group_id}': poll was not called for max.poll.interval.ms = "
                        f"{self.config.max_poll_interval_ms}"
                    )
                    continue
                try:
                    self._heartbeat()
                except (UnknownMemberIdError, FencedInstanceIdError) as error:
                    group.error = error
                except (PySparkLogError, OSError) as error:
                    # A file system hiccup: try again at the next interval. Should it last past the
                    # session timeout, the group removes the member and the next poll rejoins.
                    _log.warning("heartbeat of group %r failed, retrying: %s", self.config.group_id, error)

    def _apply_group_changes(self) -> None:
        """Join, heartbeat when due, and apply the assignment: revoke (commit, listener, release) what
        moved away, then take what this member now owns. Runs inside poll, under the lock; the group
        lock is taken only around the membership, so the heartbeat thread goes on meanwhile."""
        group = self._group
        assert group is not None
        with self._group_lock:
            error = group.error
            if error is not None:
                group.membership = None  # the heartbeat thread stops using it at once
                if not isinstance(error, FencedInstanceIdError):
                    group.error = None  # a fenced instance stays fenced: each poll raises, as in Kafka
        if error is not None:
            self._lose_partitions()
            if isinstance(error, FencedInstanceIdError):
                raise error
        try:
            membership = group.membership
            now_ms = int(time.time() * 1000)
            stale = membership is None or now_ms >= membership.valid_until_ms - self.config.heartbeat_interval_ms
            if stale:
                membership = self._heartbeat()
            assert membership is not None
            owned = set(self._fetching)
            if membership.protocol is RebalanceProtocol.EAGER and membership.generation != group.generation:
                revoked = owned
            else:
                revoked = owned - membership.assigned
            # Claimed by a heartbeat since the last poll, then moved away by a rebalance before this one:
            # let go without fetching them (or telling the listener).
            unused = membership.owned - membership.assigned - owned
            if revoked:
                if self.config.enable_auto_commit:
                    self._commit_quietly(revoked)
                if group.listener is not None:
                    group.listener.on_partitions_revoked(set(revoked))
                self._set_fetching(owned - revoked)
            if revoked or unused:
                membership = self._heartbeat(release=revoked | unused)
            group.generation = membership.generation
            added = (membership.owned & membership.assigned) - set(self._fetching)  # the rest: unused next poll
            if added:
                self._set_fetching(set(self._fetching) | added)
                if group.listener is not None:
                    group.listener.on_partitions_assigned(set(added))
        except UnknownMemberIdError:
            self._lose_partitions()

    def _lose_partitions(self) -> None:
        """The group removed this member: its partitions are someone else's already, so they are dropped
        without a commit (Kafka's ``onPartitionsLost``) and the next poll rejoins."""
        group = self._group
        assert group is not None
        lost = set(self._fetching)
        self._set_fetching(set())
        with self._group_lock:
            group.membership = None
        group.generation = -1
        if lost and group.listener is not None:
            group.listener.on_partitions_lost(lost)

    def _commit_quietly(self, partitions: set[TopicPartition]) -> None:
        """A commit on the way out: refused when a rebalance already moved the partitions, which then
        are consumed again from the last commit by their new owner (Kafka logs the same and goes on)."""
        try:
            self._commit_positions(partitions)
        except CommitFailedError as error:
            _log.warning("%s", error)

    def _depart(self, *, autocommit: bool) -> None:
        """Give the group up, as Kafka's ``onLeavePrepare`` does: commit (with auto-commit), tell the
        listener its partitions are revoked, and leave; a static member does not leave, as in Kafka, so
        a restart within the session timeout gets its partitions back."""
        group = self._group
        assert group is not None
        owned = set(self._fetching)
        if group.membership is not None:
            if autocommit and self.config.enable_auto_commit:
                self._commit_quietly(owned)
            if owned and group.listener is not None:
                group.listener.on_partitions_revoked(owned)
        if self.config.group_instance_id is None:
            self._leave_group()
        group.coordinator.close()
        self._group = None

    def _leave_group(self) -> None:
        group = self._group
        assert group is not None
        if group.membership is not None:
            group.coordinator.leave(group.membership.member_id)
        group.membership = None
        group.generation = -1
        self._set_fetching(set())
