"""Per-log settings, with Kafka's topic-config names and defaults.

Each field is one of Kafka's topic configs (``pysparklog.storage.topic_config`` defines them: type, default, range),
validated when the config is built, so a bad value fails before any file is touched. A ``LogDirectory`` resolves a
topic's ``LogConfig`` from the topic's overrides, the log directory's ``server.properties`` and a default
``LogConfig``; that happens again whenever either file changes, so building one stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysparklog.errors import InvalidConfigError
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.topic_config import INT_MAX as INT_MAX
from pysparklog.storage.topic_config import LONG_MAX as LONG_MAX
from pysparklog.storage.topic_config import TOPIC_CONFIGS, default_field_value, topic_config


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log: Kafka's topic configs of the same names, dots for underscores.

    The defaults are Kafka's; the ranges too, except that ``segment_bytes`` goes down to 14 bytes (Kafka's own
    tests use tiny segments through ``internal.segment.bytes``; a topic config keeps Kafka's 1 MiB minimum).

    Attributes:
        segment_bytes: ``segment.bytes``: roll before an append would take the segment past this.
        segment_ms: ``segment.ms``: roll when the segment's first timestamp is this old.
        segment_jitter_ms: ``segment.jitter.ms``: random reduction of ``segment_ms`` per segment.
        segment_index_bytes: ``segment.index.bytes``: size bound of each index; a full one rolls.
        index_interval_bytes: ``index.interval.bytes``: bytes between offset-index entries.
        flush_messages: ``flush.messages``: fsync after this many messages.
        flush_ms: ``flush.ms``: fsync when the last one is this old.
        max_message_bytes: ``max.message.bytes``: the largest record batch accepted.
        message_timestamp_type: ``message.timestamp.type``: CreateTime or LogAppendTime.
        retention_ms: ``retention.ms``: delete segments whose newest record is older; -1 keeps them forever.
        retention_bytes: ``retention.bytes``: delete the oldest segments while the log is larger; -1: no limit.
        cleanup_policy: ``cleanup.policy``: ``"delete"`` (retention), ``"compact"`` (the cleaner), both or neither.
        compression_type: ``compression.type``: the codec batches are stored with; ``producer`` keeps theirs.
        delete_retention_ms: ``delete.retention.ms``: how long compaction keeps tombstones.
        file_delete_delay_ms: ``file.delete.delay.ms``: how long a deleted segment's files wait before removal.
        min_cleanable_dirty_ratio: ``min.cleanable.dirty.ratio``: the dirty share that makes a log cleanable.
        min_compaction_lag_ms: ``min.compaction.lag.ms``: records younger than this are not compacted.
        max_compaction_lag_ms: ``max.compaction.lag.ms``: records older than this make the log cleanable.
        message_timestamp_before_max_ms: ``message.timestamp.before.max.ms``: how far in the past a CreateTime
            timestamp may be.
        message_timestamp_after_max_ms: ``message.timestamp.after.max.ms``: how far in the future it may be.
    """

    segment_bytes: int = default_field_value("segment.bytes")
    segment_ms: int = default_field_value("segment.ms")
    segment_jitter_ms: int = default_field_value("segment.jitter.ms")
    segment_index_bytes: int = default_field_value("segment.index.bytes")
    index_interval_bytes: int = default_field_value("index.interval.bytes")
    flush_messages: int = default_field_value("flush.messages")
    flush_ms: int = default_field_value("flush.ms")
    max_message_bytes: int = default_field_value("max.message.bytes")
    message_timestamp_type: TimestampType = default_field_value("message.timestamp.type")
    retention_ms: int = default_field_value("retention.ms")
    retention_bytes: int = default_field_value("retention.bytes")
    cleanup_policy: frozenset[str] = default_field_value("cleanup.policy")
    compression_type: str = default_field_value("compression.type")
    delete_retention_ms: int = default_field_value("delete.retention.ms")
    file_delete_delay_ms: int = default_field_value("file.delete.delay.ms")
    min_cleanable_dirty_ratio: float = default_field_value("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = default_field_value("min.compaction.lag.ms")
    max_compaction_lag_ms: int = default_field_value("max.compaction.lag.ms")
    message_timestamp_before_max_ms: int = default_field_value("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = default_field_value("message.timestamp.after.max.ms")

    def __post_init__(self) -> None:
        for config in TOPIC_CONFIGS.values():
            config.check_field(getattr(self, config.attribute))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            # Kafka's LogConfig.validateValues: the cleaner could never honour both.
            raise InvalidConfigError(
                f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) is above max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms}); accepted: min.compaction.lag.ms <= max.compaction.lag.ms"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> LogConfig:
        """Build from Kafka-named topic configs (``{"segment.bytes": "1048576", "cleanup.policy": "compact"}``).

        Values are Kafka strings or Python values of the field's type, checked with Kafka's ranges.

        Raises:
            InvalidConfigError: An unknown name (the message lists the known ones) or a refused value.
        """
        values = {}
        for name, value in properties.items():
            config = topic_config(name)
            values[config.attribute] = config.field_value(value)
        return cls(**values)
