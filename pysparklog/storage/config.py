"""Per-log settings, with Kafka's topic-config names and defaults.

Only the settings the storage engine reads live here; each is validated when the config is built,
so a bad value fails before any file is touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysparklog.errors import InvalidConfigError
from pysparklog.storage.records.default_records import TimestampType

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log (Kafka topic configs of the same names, dots for underscores).

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
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME

    # (minimum, maximum) accepted for each integer setting, as Kafka's ConfigDef declares them.
    _RANGES = {
        "segment_bytes": (14, INT_MAX),
        "segment_ms": (1, LONG_MAX),
        "segment_jitter_ms": (0, LONG_MAX),
        "segment_index_bytes": (4, INT_MAX),
        "index_interval_bytes": (0, INT_MAX),
        "flush_messages": (1, LONG_MAX),
        "flush_ms": (0, LONG_MAX),
        "max_message_bytes": (0, INT_MAX),
    }

    def __post_init__(self) -> None:
        for name, (low, high) in self._RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidConfigError(
                    f"{self.kafka_name(name)} = {value!r} is invalid; accepted: an integer from {low} to {high}"
                )
        if not isinstance(self.message_timestamp_type, TimestampType) or self.message_timestamp_type < 0:
            raise InvalidConfigError(
                f"message.timestamp.type = {self.message_timestamp_type!r} is invalid; accepted: CreateTime, "
                "LogAppendTime"
            )

    @staticmethod
    def kafka_name(field: str) -> str:
        return field.replace("_", ".")

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> LogConfig:
        """Build from Kafka-named properties (``{"segment.bytes": "1048576"}``); unknown names fail."""
        fields = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
        values: dict[str, Any] = {}
        for key, raw in properties.items():
            name = key.replace(".", "_")
            if name not in fields:
                accepted = ", ".join(sorted(cls.kafka_name(f) for f in fields))
                raise InvalidConfigError(f"unknown log config {key!r}; accepted: {accepted}")
            if name == "message_timestamp_type":
                values[name] = _timestamp_type(str(raw))
            else:
                try:
                    values[name] = int(raw)
                except (TypeError, ValueError):
                    raise InvalidConfigError(f"{key} = {raw!r} is not an integer") from None
        return cls(**values)


def _timestamp_type(raw: str) -> TimestampType:
    for member in (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME):
        if raw == member.kafka_name:
            return member
    raise InvalidConfigError(f"message.timestamp.type = {raw!r} is invalid; accepted: CreateTime, LogAppendTime")
