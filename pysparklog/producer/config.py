"""The producer's settings: Kafka's producer configs of the same names, checked when a config is made.

``ProducerConfig`` holds them as fields (dots for underscores) with Kafka's defaults, types and ranges;
``ProducerConfig.from_properties`` reads Kafka-named properties (as the console producer's
``--producer-property`` and the sink's ``kafka.*`` options give them), and ``ACCEPTED_CONFIGS`` lists
the names it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pysparklog.broker_configs import without_broker_configs
from pysparklog.errors import InvalidConfigError
from pysparklog.partitioner import CustomPartitioner, NullKeyStrategy, PartitionerConfig
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.producer_state import BATCHES_RETAINED
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.topic_config import ConfigKey, ConfigType
from pysparklog.transactions import validate_transactional_id

# Kafka's partitioner.class names that select a built-in strategy: (null-key strategy, ignore keys).
_KAFKA_PARTITIONERS: Mapping[str, tuple[NullKeyStrategy, bool]] = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": (NullKeyStrategy.STICKY, False),
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": (NullKeyStrategy.STICKY, True),
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": (NullKeyStrategy.ROUND_ROBIN, True),
}
_CODECS: Mapping[str, Codec] = {codec.kafka_name: codec for codec in Codec}
_ACKS = ("all", "-1", "1")


def _key(name: str, kind: ConfigType, default: object, minimum: int | None = None, *choices: str) -> ConfigKey:
    return ConfigKey(name, kind, str(default), minimum, None, choices)


# Kafka's ProducerConfig definitions of the numeric and string settings (types, defaults, ranges).
_KEYS: Mapping[str, ConfigKey] = {
    key.name: key
    for key in (
        _key("batch.size", ConfigType.INT, 16384, 0),
        _key("linger.ms", ConfigType.LONG, 5, 0),
        _key("compression.type", ConfigType.STRING, "none", None, *_CODECS),
        _key("max.request.size", ConfigType.INT, 1024 * 1024, 0),
        _key("max.in.flight.requests.per.connection", ConfigType.INT, 5, 1),
        _key("client.id", ConfigType.STRING, ""),
        _key("acks", ConfigType.STRING, "all", None, *_ACKS),
        _key("retries", ConfigType.INT, INT_MAX, 0),
        _key("retry.backoff.ms", ConfigType.LONG, 100, 0),
        _key("delivery.timeout.ms", ConfigType.INT, 120000, 0),
        _key("metadata.max.age.ms", ConfigType.LONG, 300000, 0),
        _key("transaction.timeout.ms", ConfigType.INT, 60000, 1),
    )
}
_BOOLEANS = ("enable.idempotence", "partitioner.ignore.keys")


def _default(name: str) -> Any:
    """Kafka's default of a setting, parsed: the dataclass's default, so the two cannot disagree."""
    key = _KEYS[name]
    assert key.default is not None
    return key.parse(key.default)


ACCEPTED_CONFIGS = sorted([*_KEYS, *_BOOLEANS, "partitioner.class", "transactional.id"])


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """The producer's settings, Kafka's producer configs of the same names (dots for underscores),
    checked when the config is made.

    Attributes:
        batch_size: ``batch.size``: the bytes of a partition's record batch; a batch closes before the
            record that would take it past this (a larger record gets a batch of its own). 0 puts
            every record in a batch of its own.
        linger_ms: ``linger.ms``: how long a partition's records may wait for more before their
            batch is appended although not full.
        compression_type: ``compression.type``: none, gzip, snappy, lz4 or zstd, per batch.
        enable_idempotence: ``enable.idempotence``: number batches so that retried appends are never
            written twice (see ``pysparklog.producer``). None is Kafka's default: on, unless ``acks``,
            ``retries`` or ``max.in.flight.requests.per.connection`` is set to a value idempotence
            excludes, which then turns it off; set True, such a value is refused.
        partitioner_class: ``partitioner.class``: a ``CustomPartitioner``, the import path of one, or
            one of Kafka's class names: ``...RoundRobinPartitioner`` selects round robin for every
            record, ``...UniformStickyPartitioner`` sticky for every record, and
            ``...internals.DefaultPartitioner`` the default.
        partitioner_ignore_keys: ``partitioner.ignore.keys``: partition keyed records as unkeyed ones.
        null_key_strategy: Where records without a key go: ``"sticky"`` (Kafka's uniform sticky
            partitioning, the default) or ``"round_robin"`` (what Kafka's ``RoundRobinPartitioner``
            does, without ignoring keys unless ``partitioner_ignore_keys``).
        max_request_size: ``max.request.size``: the most bytes one append carries, and the largest
            record (key and value) accepted.
        max_in_flight_requests_per_connection: ``max.in.flight.requests.per.connection``: checked as
            Kafka checks it (at most 5 with idempotence); appends are synchronous, one per partition
            at a time, so it bounds nothing more here.
        client_id: ``client.id``: names the sender thread (default ``producer-<n>``).
        acks: ``acks``: ``all`` (or ``-1``) or ``1``, the same here (one copy); ``0`` is refused, as an
            append is always waited for.
        retries: ``retries``: how often an append that failed with an ``OSError`` is tried again.
        retry_backoff_ms: ``retry.backoff.ms``: the pause before each retry.
        delivery_timeout_ms: ``delivery.timeout.ms``: retries stop once a record has waited this long
            since it was sent, its linger included.
        metadata_max_age_ms: ``metadata.max.age.ms``: how old a topic's partition count may get before
            it is read again (partitions added meanwhile are used from then on).
        transactional_id: ``transactional.id``: makes the producer transactional (see
            ``pysparklog.producer``); needs idempotence.
        transaction_timeout_ms: ``transaction.timeout.ms``: how long a transaction may stay open before
            the coordinator aborts it and fences the producer.
    """

    batch_size: int = _default("batch.size")
    linger_ms: int = _default("linger.ms")
    compression_type: str = _default("compression.type")
    enable_idempotence: bool | None = None
    partitioner_class: str | CustomPartitioner | None = None
    partitioner_ignore_keys: bool = False
    null_key_strategy: NullKeyStrategy | str = NullKeyStrategy.STICKY
    max_request_size: int = _default("max.request.size")
    max_in_flight_requests_per_connection: int = _default("max.in.flight.requests.per.connection")
    client_id: str = _default("client.id")
    acks: str = _default("acks")
    retries: int = _default("retries")
    retry_backoff_ms: int = _default("retry.backoff.ms")
    delivery_timeout_ms: int = _default("delivery.timeout.ms")
    metadata_max_age_ms: int = _default("metadata.max.age.ms")
    transactional_id: str | None = None
    transaction_timeout_ms: int = _default("transaction.timeout.ms")
    #: Whether idempotence is in force: ``enable_idempotence`` resolved as Kafka resolves it.
    idempotent: bool = field(init=False, repr=False, compare=False)
    #: The partitioning settings these make.
    partitioner: PartitionerConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for key in _KEYS.values():
            key.check(getattr(self, key.name.replace(".", "_")))
        for name in _BOOLEANS:
            value = getattr(self, name.replace(".", "_"))
            if not isinstance(value, bool) and not (name == "enable.idempotence" and value is None):
                raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: true or false")
        object.__setattr__(self, "idempotent", self._resolve_idempotence())
        if self.transactional_id is not None:
            validate_transactional_id(self.transactional_id)
            if not self.idempotent:
                raise InvalidConfigError("Cannot set a transactional.id without also enabling idempotence.")
        strategy, ignore_keys, custom = self.null_key_strategy, self.partitioner_ignore_keys, self.partitioner_class
        if isinstance(custom, str) and custom in _KAFKA_PARTITIONERS:
            strategy, kafka_ignores = _KAFKA_PARTITIONERS[custom]
            ignore_keys, custom = ignore_keys or kafka_ignores, None
        partitioner = PartitionerConfig(strategy, self.batch_size, ignore_keys, custom)
        object.__setattr__(self, "partitioner", partitioner)

    def _resolve_idempotence(self) -> bool:
        """Kafka's ``ProducerConfig.postProcessAndValidateIdempotenceConfigs``."""
        if self.enable_idempotence is False:
            return False
        conflicts = []
        if self.retries == 0:
            conflicts.append("retries to non-zero")
        if self.acks not in ("all", "-1"):
            conflicts.append("acks to all")
        if self.max_in_flight_requests_per_connection > BATCHES_RETAINED:
            conflicts.append(f"max.in.flight.requests.per.connection to at most {BATCHES_RETAINED}")
        if conflicts and self.enable_idempotence:
            raise InvalidConfigError(f"Must set {' and '.join(conflicts)} in order to use the idempotent producer")
        return not conflicts

    @property
    def codec(self) -> Codec:
        return _CODECS[self.compression_type]

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ProducerConfig:
        """Build from Kafka-named producer configs (``{"batch.size": "65536", "linger.ms": 10}``).

        Values are Kafka strings (parsed as Kafka parses them) or Python values of the field's type.

        The broker connection's configs (``bootstrap.servers``, ``security.protocol``, ``sasl.*``...) are accepted
        and ignored, with a warning: there is no broker.

        Raises:
            InvalidConfigError: An unknown name (the message lists the accepted ones) or a refused value.
        """
        values: dict[str, Any] = {}
        for name, value in without_broker_configs(properties, "producer").items():
            if name == "transactional.id":
                value = value or None  # Kafka's default is null; an empty id means none
            elif name in _KEYS and isinstance(value, str):
                value = _KEYS[name].parse(value)
            elif name in _BOOLEANS and isinstance(value, str):
                value = _parse_bool(name, value)
            elif name not in ACCEPTED_CONFIGS:
                raise InvalidConfigError(
                    f"unknown producer config {name!r}; accepted: {', '.join(ACCEPTED_CONFIGS)}, and the broker "
                    "connection's configs (bootstrap.servers, security.protocol, sasl.*, ssl.*...), ignored"
                )
            values[name.replace(".", "_")] = value
        return cls(**values)


def _parse_bool(name: str, text: str) -> bool:
    """A Kafka BOOLEAN: ``true`` or ``false`` in any case, blanks around ignored."""
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise InvalidConfigError(f"{name} = {text!r} is invalid; accepted: true or false")
    return word == "true"
