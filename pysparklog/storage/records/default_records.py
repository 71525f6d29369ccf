"""Kafka RecordBatch, magic 2 (``DefaultRecordBatch`` in Kafka's clients).

Wire schema of one batch, all integers big-endian::

    RecordBatch =>
      0  baseOffset            int64
      8  batchLength           int32   bytes after this field (size - 12)
      12 partitionLeaderEpoch  int32
      16 magic                 int8    = 2
      17 crc                   uint32  CRC-32C of bytes [21, end)
      21 attributes            int16   bit 0-2 codec, 3 timestamp type, 4 transactional,
                                       5 control, 6 delete horizon present
      23 lastOffsetDelta       int32
      27 baseTimestamp         int64   (the delete horizon when bit 6 is set)
      35 maxTimestamp          int64
      43 producerId            int64   -1 without a producer
      51 producerEpoch         int16
      53 baseSequence          int32
      57 recordsCount          int32
      61 records               [Record], compressed as one block when codec != 0

    Record =>
      length          varint   size of what follows
      attributes      int8     unused, 0
      timestampDelta  varlong
      offsetDelta     varint
      keyLength       varint   -1 for a null key
      key             bytes
      valueLength     varint   -1 for a null value
      value           bytes
      headerCount     varint
      headers         [headerKeyLength varint, headerKey utf-8, headerValueLength varint (-1 null), headerValue]

A legacy message (magic 0 or 1) shares the first 17 bytes' meaning (offset, size, then magic at
byte 16), so one walker finds the entries of a file whatever their magic.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import crc32c as _crc32c

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.records.codecs import CODEC_MASK, Codec

MAGIC_V2 = 2

# Byte offsets of the header fields.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET

LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1
# Kafka refuses an entry whose size field is below the smallest legacy message (FileLogInputStream).
MIN_ENTRY_SIZE_FIELD = 14

# Attribute bits.

TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# Everything from the partition leader epoch to the records count, after baseOffset and length.
_HEADER_STRUCT = struct.Struct(
    ">q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # recordsCount
)
assert _HEADER_STRUCT.size == RECORD_BATCH_OVERHEAD


class TimestampType(enum.IntEnum):
    """Kafka's ``TimestampType``; the ids are those Spark's Kafka source puts in ``timestampType``."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[int(self)]


class ControlRecordType(enum.IntEnum):
    """The ``type`` field of a control record's key (``ControlRecordType.java``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


# Control record key: version int16 (0), type int16. End-transaction marker value: version int16 (0),
# coordinatorEpoch int32.
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER_VALUE = struct.Struct(">hi")
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


def control_record_type_id(key: bytes | None) -> int:
    """The type id a control record's key holds (``ControlRecordType.parseTypeId``), known or not.

    Tools print the id of a type they do not know, which ``control_record_type`` folds into UNKNOWN.

    Raises:
        CorruptRecordError: The key is shorter than its version and type fields.
    """
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(
            f"control record key of {0 if key is None else len(key)} bytes, expected at least {_CONTROL_KEY.size}"
        )
    return int(_CONTROL_KEY.unpack_from(key)[1])


def control_record_type(key: bytes | None) -> ControlRecordType:
    """The type of a control record from its key; UNKNOWN for a key Kafka would not recognise."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return ControlRecordType.UNKNOWN
    try:
        return ControlRecordType(control_record_type_id(key))
    except ValueError:
        return ControlRecordType.UNKNOWN


def end_txn_marker(marker: ControlRecordType, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """Key and value of a COMMIT or ABORT control record (``EndTransactionMarker``)."""
    if marker not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise ValueError(f"an end-transaction marker is COMMIT or ABORT, not {marker.name}")
    return (
        _CONTROL_KEY.pack(CONTROL_RECORD_KEY_VERSION, int(marker)),
        _END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
    )


def parse_end_txn_marker_value(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker's value."""
    if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError(
            f"end-transaction marker value of {0 if value is None else len(value)} bytes, expected at least "
            f"{_END_TXN_MARKER_VALUE.size}"
        )
    return int(_END_TXN_MARKER_VALUE.unpack_from(value)[1])


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The value of a LEADER_CHANGE control record (``LeaderChangeMessage``): a KRaft quorum's new
    leader and the voters that elected it, which a KRaft leader writes first in its epoch."""

    version: int
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UVARINT_MAX_BYTES = 5  # Kafka's unsigned varints are 32-bit
_VARLONG_MAX_BYTES = 10  # a signed 64-bit varint, zigzag-encoded


def _zigzag_varint(data: bytes, position: int) -> tuple[int, int]:
    """The signed (zigzag) varint at ``position`` of a record, and the position after it."""
    value = 0
    for i in range(_VARLONG_MAX_BYTES):
        if position >= len(data):
            raise CorruptRecordError(f"a varint runs past the end of a {len(data)}-byte record batch")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position
    raise CorruptRecordError(f"a varint is longer than {_VARLONG_MAX_BYTES} bytes")


def _length_prefixed(data: bytes, position: int) -> tuple[bytes | None, int]:
    """A record's key or value (its varint length, -1 for null, then the bytes) and the position after it."""
    length, position = _zigzag_varint(data, position)
    if length < 0:
        return None, position
    if position + length > len(data):
        raise CorruptRecordError(f"a {length}-byte field runs past the end of a {len(data)}-byte record batch")
    return data[position : position + length], position + length


def first_control_record(batch: bytes) -> tuple[bytes | None, bytes | None] | None:
    """Key and value of the first record of an uncompressed control batch, read in place: an end-transaction
    marker needs no decoding of the whole batch to Arrow. None for a batch without records.

    Record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, keyLength varint,
    key, valueLength varint, value, headers.

    Raises:
        CorruptRecordError: The batch is compressed (callers decode those) or its record runs past its end.
    """
    if len(batch) < RECORDS_OFFSET:
        raise CorruptRecordError(f"a control batch of {len(batch)} bytes is shorter than its header")
    attributes = _INT16.unpack_from(batch, ATTRIBUTES_OFFSET)[0]
    count = _INT32.unpack_from(batch, RECORDS_COUNT_OFFSET)[0]
    if attributes & CODEC_MASK:
        raise CorruptRecordError("a compressed control batch is not read in place")
    if count <= 0:
        return None
    _, position = _zigzag_varint(batch, RECORDS_OFFSET)  # the record's length
    _, position = _zigzag_varint(batch, position + 1)  # after attributes: timestampDelta
    _, position = _zigzag_varint(batch, position)  # offsetDelta
    key, position = _length_prefixed(batch, position)
    value, _ = _length_prefixed(batch, position)
    return key, value


class _FlexibleMessageReader:
    """Reads a flexible-version Kafka message (KIP-482): fixed-width integers, compact arrays whose
    length is an unsigned varint plus one, and tagged fields, which a reader that does not know
    them skips."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._what = what
        self._pos = 0

    def _corrupt(self, detail: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self._what} of {len(self._data)} bytes: {detail} at byte {self._pos}")

    def fixed(self, field: struct.Struct) -> int:
        if self._pos + field.size > len(self._data):
            raise self._corrupt(f"a {field.size}-byte field runs past the end")
        value = int(field.unpack_from(self._data, self._pos)[0])
        self._pos += field.size
        return value

    def uvarint(self) -> int:
        value = 0
        for i in range(_UVARINT_MAX_BYTES):
            if self._pos >= len(self._data):
                raise self._corrupt("an unsigned varint runs past the end")
            byte = self._data[self._pos]
            self._pos += 1
            value |= (byte & 0x7F) << (7 * i)
            if byte < 0x80:
                return value
        raise self._corrupt(f"an unsigned varint is longer than {_UVARINT_MAX_BYTES} bytes")

    def array_length(self) -> int:
        length = self.uvarint() - 1
        if length < 0:
            raise self._corrupt("a non-nullable array is null")
        return length

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            if self._pos + size > len(self._data):
                raise self._corrupt(f"a tagged field of {size} bytes runs past the end")
            self._pos += size

    def voter_ids(self) -> tuple[int, ...]:
        """An array of ``Voter`` structs, each a voter id and its tagged fields."""
        ids = []
        for _ in range(self.array_length()):
            ids.append(self.fixed(_INT32))
            self.skip_tagged_fields()
        return tuple(ids)


def parse_leader_change_value(value: bytes | None) -> LeaderChange:
    """Parse a LEADER_CHANGE control record's value, a version 0 (flexible) ``LeaderChangeMessage``.

    Raises:
        CorruptRecordError: The value is null, truncated or malformed.
    """
    if value is None:
        raise CorruptRecordError("leader change control record with a null value")
    reader = _FlexibleMessageReader(value, "leader change control record value")
    version = reader.fixed(_INT16)
    leader_id = reader.fixed(_INT32)
    voters = reader.voter_ids()
    granting_voters = reader.voter_ids()
    reader.skip_tagged_fields()
    return LeaderChange(version, leader_id, voters, granting_voters)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of a v2 record batch, as stored."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        return cls(*_HEADER_STRUCT.unpack_from(buf, position))

    def pack_into(self, buf: bytearray | memoryview, position: int = 0) -> None:
        _HEADER_STRUCT.pack_into(
            buf,
            position,
            self.base_offset,
            self.length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        )

    @property
    def size_in_bytes(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> Codec:
        return Codec.from_attributes(self.attributes)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The tombstone delete horizon a cleaned batch carries, else -1."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        """Kafka's ``lastSequence``: wraps at Int.MAX like the Java client."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def batch_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C over attributes..end, the checksum a v2 batch stores at byte 17."""
    return int(_crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


def verify_batch_crc(batch: bytes | bytearray | memoryview, *, file: str | None = None, position: int = 0) -> None:
    """Raise CorruptRecordError naming the file and position when a batch's stored CRC is wrong."""
    stored = struct.unpack_from(">I", batch, CRC_OFFSET)[0]
    computed = batch_crc(batch)
    if stored != computed:
        raise CorruptRecordError(
            f"record batch CRC-32C mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}",
            file=file,
            position=position,
        )
