"""Kafka message sets of magic 0 and 1 (``LegacyRecord`` and ``AbstractLegacyRecordBatch`` in Kafka).

Read-only: brokers stopped writing them with Kafka 3.0's message format, but old segments still hold
them. Wire schema of one entry, all integers big-endian::

    offset      int64
    size        int32    bytes after this field
    crc         uint32   CRC-32 (IEEE) of magic..end
    magic       int8     0 or 1
    attributes  int8     bits 0-2 codec; 0x08 LogAppendTime (magic 1 only)
    timestamp   int64    magic 1 only
    keyLength   int32    -1 for a null key
    key         bytes
    valueLength int32    -1 for a null value
    value       bytes

A compressed entry is a wrapper message: a null key, and as value the compressed message set of the
inner messages, which are never compressed themselves. In magic 1 the inner offsets are relative
(0..n-1) and the wrapper's offset is the absolute offset of the last inner message; in magic 0 the
inner offsets are absolute.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Final, NamedTuple

from pysparklog.errors import CorruptRecordError, UnsupportedCodecError
from pysparklog.storage.records.codecs import CODEC_MASK, Codec, decompress
from pysparklog.storage.records.default_records import (
    LOG_OVERHEAD,
    MIN_ENTRY_SIZE_FIELD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)

MAGIC_V0: Final = 0
MAGIC_V1: Final = 1

# offset int64 | size int32
_OFFSET_SIZE: Final = struct.Struct(">qi")
# crc uint32 | magic int8 | attributes uint8: the start of every message, right after size
_CRC_MAGIC_ATTRIBUTES: Final = struct.Struct(">IbB")
# timestamp int64 (magic 1 only), right after attributes
_TIMESTAMP: Final = struct.Struct(">q")
# keyLength / valueLength int32, -1 for null
_LENGTH: Final = struct.Struct(">i")
_NULL_LENGTH: Final = -1
#: The CRC covers everything after the crc field itself.
_CRC_SIZE: Final = 4

#: Bytes a message takes beyond its key and value, counted by ``size`` (``RECORD_OVERHEAD_V0/V1``).
_RECORD_OVERHEAD: Final = {MAGIC_V0: MIN_ENTRY_SIZE_FIELD, MAGIC_V1: MIN_ENTRY_SIZE_FIELD + _TIMESTAMP.size}

#: librdkafka leaves a magic 1 wrapper's offset at 0; Kafka then takes the inner offsets as absolute.
_UNSET_WRAPPER_OFFSET: Final = 0


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """One message as a consumer sees it: an uncompressed entry itself, or one inner message of a wrapper.

    Attributes:
        offset: The absolute offset.
        timestamp: -1 in magic 0; in a LogAppendTime wrapper, the wrapper's timestamp.
        timestamp_type: NO_TIMESTAMP_TYPE in magic 0; an inner message takes its wrapper's.
        key: None for a null key.
        value: None for a null value.
        crc: The message's stored CRC-32.
        magic: The message's magic.
        attributes: The message's attributes byte.
        size_in_bytes: The size of the message's entry, offset and size fields included.
        is_valid: Whether the stored CRC matches the message's bytes.
    """

    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    crc: int
    magic: int
    attributes: int
    size_in_bytes: int
    is_valid: bool


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    """One entry as it sits in the file, with the records it holds.

    Attributes:
        offset: The stored offset; for a magic 1 wrapper, the offset of its last inner message.
        size_in_bytes: 12 + the size field: the bytes the entry takes in the file.
        crc: The stored CRC-32.
        computed_crc: The CRC-32 of the entry's bytes from magic to the end.
        magic: 0 or 1.
        attributes: The attributes byte.
        codec: The codec from the attributes; not NONE for a wrapper.
        timestamp: -1 in magic 0.
        timestamp_type: From the attributes; NO_TIMESTAMP_TYPE in magic 0.
        key_size: The key length field, -1 for null.
        value_size: The value length field, -1 for null; a wrapper's compressed size.
        is_valid: Whether ``crc`` equals ``computed_crc``.
        records: The entry itself as one record when uncompressed, else the inner messages with
            absolute offsets.
    """

    offset: int
    size_in_bytes: int
    crc: int
    computed_crc: int
    magic: int
    attributes: int
    codec: Codec
    timestamp: int
    timestamp_type: TimestampType
    key_size: int
    value_size: int
    is_valid: bool
    records: tuple[LegacyRecord, ...]


class _Message(NamedTuple):
    """The fields of one message, before offsets and timestamps are resolved against a wrapper."""

    offset: int
    size_in_bytes: int
    crc: int
    computed_crc: int
    magic: int
    attributes: int
    timestamp: int
    key: memoryview | None
    value: memoryview | None

    def to_record(self, offset: int, timestamp: int, timestamp_type: TimestampType) -> LegacyRecord:
        return LegacyRecord(
            offset=offset,
            timestamp=timestamp,
            timestamp_type=timestamp_type,
            key=None if self.key is None else bytes(self.key),
            value=None if self.value is None else bytes(self.value),
            crc=self.crc,
            magic=self.magic,
            attributes=self.attributes,
            size_in_bytes=self.size_in_bytes,
            is_valid=self.crc == self.computed_crc,
        )


def read_legacy_entry(
    buf: bytes | bytearray | memoryview,
    position: int,
    *,
    file: str | None = None,
    verify_crc: bool = True,
    base_position: int = 0,
) -> LegacyEntry:
    """Parse the magic 0 or 1 entry at ``position`` of ``buf``, decompressing a wrapper's inner messages.

    Args:
        buf: Bytes holding the entry.
        position: Where the entry starts in ``buf``.
        file: The file ``buf`` was read from, named by errors.
        verify_crc: Raise on a CRC mismatch (of the entry or an inner message) instead of reporting
            it in ``is_valid``; dump tools turn this off to show corrupt entries.
        base_position: The file position of ``buf[0]``, so that errors name file positions.

    Raises:
        CorruptRecordError: The entry or an inner message is truncated, has a magic other than 0 or
            1, lengths that do not fit its size, a CRC mismatch (with ``verify_crc``), or a wrapper
            whose inner message set is invalid.
        UnsupportedCodecError: The codec id is undefined, or zstd, which wrappers cannot use.
    """
    view = memoryview(buf)
    where = base_position + position
    entry = _read_message(view, position, verify_crc, file=file, position=where, what="message")
    codec = Codec.from_attributes(entry.attributes, file=file, position=where)
    timestamp_type = entry_timestamp_type(entry.magic, entry.attributes)
    if codec is Codec.NONE:
        records: tuple[LegacyRecord, ...] = (entry.to_record(entry.offset, entry.timestamp, timestamp_type),)
    else:
        records = _read_inner_records(entry, codec, timestamp_type, verify_crc, file=file, position=where)
    return LegacyEntry(
        offset=entry.offset,
        size_in_bytes=entry.size_in_bytes,
        crc=entry.crc,
        computed_crc=entry.computed_crc,
        magic=entry.magic,
        attributes=entry.attributes,
        codec=codec,
        timestamp=entry.timestamp,
        timestamp_type=timestamp_type,
        key_size=_NULL_LENGTH if entry.key is None else len(entry.key),
        value_size=_NULL_LENGTH if entry.value is None else len(entry.value),
        is_valid=entry.crc == entry.computed_crc,
        records=records,
    )


def entry_timestamp_type(magic: int, attributes: int) -> TimestampType:
    """The timestamp type of an entry of any magic, from its magic and attributes alone.

    Magic 0 has no timestamps; from magic 1 on, attribute bit 3 says LogAppendTime. Needs no
    decompression, so shallow readers (dump tools) use it for wrappers too.
    """
    if magic == MAGIC_V0:
        return TimestampType.NO_TIMESTAMP_TYPE
    return TimestampType.LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME


def _read_message(
    view: memoryview, start: int, verify_crc: bool, *, file: str | None, position: int, what: str
) -> _Message:
    """Parse the message entry at ``start`` of ``view``; errors name ``file``, ``position`` and ``what``."""

    def corrupt(detail: str) -> CorruptRecordError:
        return CorruptRecordError(f"{what}: {detail}", file=file, position=position)

    available = len(view) - start
    if available < LOG_OVERHEAD:
        raise corrupt(f"truncated: needs {LOG_OVERHEAD} bytes for offset and size, only {available} remain")
    offset, size = _OFFSET_SIZE.unpack_from(view, start)
    if size < MIN_ENTRY_SIZE_FIELD:
        raise corrupt(f"size {size} is below the {MIN_ENTRY_SIZE_FIELD}-byte minimum of a message")
    if size > available - LOG_OVERHEAD:
        raise corrupt(f"truncated: size {size} says {size} bytes follow, only {available - LOG_OVERHEAD} remain")
    body = start + LOG_OVERHEAD
    end = body + size
    crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, body)
    if magic not in _RECORD_OVERHEAD:
        raise corrupt(f"magic {magic} is not a legacy message magic; expected {MAGIC_V0} or {MAGIC_V1}")
    if size < _RECORD_OVERHEAD[magic]:
        raise corrupt(f"size {size} is below the {_RECORD_OVERHEAD[magic]}-byte minimum of a magic {magic} message")
    cursor = body + _CRC_MAGIC_ATTRIBUTES.size
    timestamp = NO_TIMESTAMP
    if magic == MAGIC_V1:
        (timestamp,) = _TIMESTAMP.unpack_from(view, cursor)
        cursor += _TIMESTAMP.size
    fields: list[memoryview | None] = []
    for name in ("key", "value"):
        if cursor + _LENGTH.size > end:
            raise corrupt(f"{name} length at byte {cursor - start} of the entry lies past its end (size {size})")
        (length,) = _LENGTH.unpack_from(view, cursor)
        cursor += _LENGTH.size
        if not _NULL_LENGTH <= length <= end - cursor:
            raise corrupt(f"{name} length {length} does not fit; expected -1 (null) or 0..{end - cursor} (bytes left)")
        fields.append(None if length == _NULL_LENGTH else view[cursor : cursor + length])
        cursor += max(length, 0)
    if cursor != end:
        raise corrupt(f"key and value end {end - cursor} bytes before the end of the message (size {size})")
    computed_crc = zlib.crc32(view[body + _CRC_SIZE : end])
    if verify_crc and crc != computed_crc:
        raise corrupt(f"CRC-32 mismatch: stored 0x{crc:08x}, computed 0x{computed_crc:08x}")
    key, value = fields
    return _Message(offset, LOG_OVERHEAD + size, crc, computed_crc, magic, attributes, timestamp, key, value)


def _read_inner_records(
    wrapper: _Message,
    codec: Codec,
    timestamp_type: TimestampType,
    verify_crc: bool,
    *,
    file: str | None,
    position: int,
) -> tuple[LegacyRecord, ...]:
    """Decompress a wrapper's value and resolve its inner messages' offsets and timestamps as Kafka does."""
    if codec is Codec.ZSTD:
        raise UnsupportedCodecError(
            f"zstd wrapper message of magic {wrapper.magic}; zstd needs magic 2 record batches, "
            "legacy wrappers accept gzip, snappy or lz4",
            file=file,
            position=position,
        )
    if wrapper.value is None:
        raise CorruptRecordError(
            f"{codec.kafka_name} wrapper message has a null value; expected a compressed message set",
            file=file,
            position=position,
        )
    inner = memoryview(decompress(codec, wrapper.value, magic=wrapper.magic, file=file, position=position))
    messages: list[_Message] = []
    cursor = 0
    while cursor < len(inner):
        what = f"inner message at byte {cursor} of the decompressed {codec.kafka_name} message set"
        message = _read_message(inner, cursor, verify_crc, file=file, position=position, what=what)
        if message.attributes & CODEC_MASK:
            raise CorruptRecordError(
                f"{what}: has codec id {message.attributes & CODEC_MASK}; inner messages must be uncompressed",
                file=file,
                position=position,
            )
        messages.append(message)
        cursor += message.size_in_bytes
    if not messages:
        raise CorruptRecordError(
            f"{codec.kafka_name} wrapper message holds no inner messages; expected at least one",
            file=file,
            position=position,
        )

    base_offset = 0
    if wrapper.magic == MAGIC_V1 and wrapper.offset != _UNSET_WRAPPER_OFFSET:
        last_inner = messages[-1].offset
        if wrapper.offset < last_inner:
            raise CorruptRecordError(
                f"wrapper offset {wrapper.offset} is below its last inner message's relative offset {last_inner}; "
                "expected the absolute offset of the last inner message (or 0)",
                file=file,
                position=position,
            )
        base_offset = wrapper.offset - last_inner

    def resolve(message: _Message) -> LegacyRecord:
        if message.magic == MAGIC_V0:
            return message.to_record(base_offset + message.offset, NO_TIMESTAMP, TimestampType.NO_TIMESTAMP_TYPE)
        # A magic 1 inner message reports its wrapper's timestamp type, and in LogAppendTime its time.
        log_append = timestamp_type is TimestampType.LOG_APPEND_TIME
        return message.to_record(
            base_offset + message.offset, wrapper.timestamp if log_append else message.timestamp, timestamp_type
        )

    return tuple(resolve(message) for message in messages)
