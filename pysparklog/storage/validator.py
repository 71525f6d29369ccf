"""What an append's batches must pass before they reach a segment (Kafka's ``LogValidator``).

The checks that need no lock run first (whole v2 batches, checksums, ``max.message.bytes``); the ones
that depend on the topic's configs in force at the append (timestamps, ``compression.type``) run under
the write lock, just before the batches are given their offsets and written.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from pysparklog.errors import CorruptRecordError, InvalidConfigError, InvalidTimestampError, RecordTooLargeError
from pysparklog.storage.config import INT_MAX, LONG_MAX, LogConfig
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches, decode_entries, encode_arrow
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from pysparklog.storage.records.memory_records import EntryTable, scan, verify_crcs

PRODUCER_COMPRESSION = "producer"  # compression.type: keep the producer's codec
PARTITION_LEADER_EPOCH = 0  # one leader forever: the log itself


@dataclass(frozen=True, slots=True)
class Batches:
    """Complete batches to append: ``entries`` found in ``buf``."""

    buf: np.ndarray
    entries: EntryTable


def joined(pieces: Sequence[Batches]) -> Batches:
    """The batches of ``pieces`` in one buffer (the producer-state check walks one)."""
    if len(pieces) == 1:
        return pieces[0]
    buf = np.concatenate([piece.buf for piece in pieces])
    return Batches(buf, scan(buf))


def checked_batches(batches: EncodedBatches | bytes | bytearray | memoryview, max_message_bytes: int) -> Batches:
    """The batches of one piece of an append, checked as far as they can be without the lock.

    Raises:
        CorruptRecordError: A checksum is wrong, or the bytes are not complete v2 batches.
        InvalidConfigError: ``batches`` is of another type.
        RecordTooLargeError: A batch is larger than ``max_message_bytes``.
    """
    if isinstance(batches, EncodedBatches):
        buf = batches.data
        entries = scan(buf)
    elif isinstance(batches, bytes | bytearray | memoryview):
        buf = np.frombuffer(bytearray(batches), dtype=np.uint8)
        entries = scan(buf, file="<append>")
        verify_crcs(buf, entries, file="<append>")
    else:
        raise InvalidConfigError(
            f"cannot append {type(batches).__name__}; accepted: EncodedBatches, bytes, bytearray or memoryview"
        )
    if entries.incomplete_tail or entries.stop_position != len(buf):
        raise CorruptRecordError(
            "appended bytes end inside a record batch", file="<append>", position=entries.stop_position
        )
    if (entries.magics != 2).any():
        raise CorruptRecordError("only magic 2 record batches can be appended", file="<append>")
    too_large = np.flatnonzero(entries.sizes > max_message_bytes)
    if len(too_large):
        raise RecordTooLargeError(
            f"record batch of {int(entries.sizes[too_large[0]])} bytes exceeds max.message.bytes ({max_message_bytes})"
        )
    return Batches(buf, entries)


class LogValidator:
    """The checks and rewrites of one append under one set of topic configs.

    Args:
        config: The topic's configs in force for this append.
        topic: The partition's topic (named in errors).
        partition: The partition (named in errors).
    """

    def __init__(self, config: LogConfig, topic: str, partition: int) -> None:
        self.config = config
        self.topic = topic
        self.partition = partition

    def validated(self, piece: Batches) -> Batches:
        """``piece`` once its timestamps passed and it is in the topic's ``compression.type``."""
        self.check_timestamps(piece)
        return self.maybe_recompressed(piece)

    def check_timestamps(self, piece: Batches) -> None:
        """Kafka's ``message.timestamp.before.max.ms`` / ``after.max.ms``: refuse records whose
        CreateTime is too far from now; nothing of the append is written then.

        Raises:
            InvalidTimestampError: A record's timestamp is out of the range, naming both.
        """
        cfg = self.config
        before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
        if cfg.message_timestamp_type != TimestampType.CREATE_TIME or (before == LONG_MAX and after == LONG_MAX):
            return
        now = int(time.time() * 1000)
        low, high = now - before, now + min(after, LONG_MAX - now)
        data = piece.entries.select(~piece.entries.is_control)
        for batch in decode_entries(piece.buf, data, topic=self.topic, partition=0):
            stamps = batch.column("timestamp").cast(pa.int64()).to_numpy()
            bad = np.flatnonzero((stamps < low) | (stamps > high))
            if len(bad):
                raise InvalidTimestampError(
                    f"timestamp {int(stamps[bad[0]])} of a record for {self.topic}-{self.partition} is out of range: "
                    f"it must be within [{low}, {high}] (message.timestamp.before.max.ms={before}, "
                    f"message.timestamp.after.max.ms={after})"
                )

    def maybe_recompressed(self, piece: Batches) -> Batches:
        """The batches in the topic's ``compression.type``, rewritten only when some data batch is not."""
        target = self.config.compression_type
        if target == PRODUCER_COMPRESSION:
            return piece
        data = ~piece.entries.is_control
        if not (piece.entries.codecs[data] != Codec.from_name(target)).any():
            return piece
        return self._recompressed(piece)

    def _recompressed(self, piece: Batches) -> Batches:
        """Data batches rewritten in the topic's ``compression.type``, as a broker does, keeping each
        batch's records, timestamps, producer id, epoch, sequence and transactional flag."""
        codec = Codec.from_name(self.config.compression_type)
        buf, entries = piece.buf, piece.entries
        pieces: list[bytes] = []
        for i in range(len(entries)):
            pos, size = int(entries.positions[i]), int(entries.sizes[i])
            if entries.is_control[i] or entries.codecs[i] == codec:
                pieces.append(buf[pos : pos + size].tobytes())
                continue
            one = entries.select(slice(i, i + 1))
            records = pa.Table.from_batches(
                list(decode_entries(buf, one, topic=self.topic, partition=0, include_headers=True))
            )
            settings = BatchSettings(
                codec=codec,
                max_batch_bytes=INT_MAX,  # one batch in, one batch out
                max_batch_records=max(records.num_rows, 1),
                timestamp_type=TimestampType.CREATE_TIME,
                producer_id=int(entries.producer_ids[i]),
                producer_epoch=int(entries.producer_epochs[i]),
                base_sequence=int(entries.base_sequences[i]),
                transactional=bool(entries.is_transactional[i]),
            )
            pieces += [encoded.data.tobytes() for encoded in encode_arrow(records, settings)]
        rebuilt = np.frombuffer(bytearray(b"".join(pieces)), dtype=np.uint8)
        return Batches(rebuilt, scan(rebuilt))


def stamp_log_append_time(view: memoryview, position: int, size: int, attributes: int, now: int) -> None:
    """Set the batch at ``position`` to LogAppendTime ``now`` (``message.timestamp.type``) and refresh its CRC."""
    struct.pack_into(">h", view, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", view, position + MAX_TIMESTAMP_OFFSET, now)
    crc = _crc32c.crc32c(view[position + ATTRIBUTES_OFFSET : position + size])
    struct.pack_into(">I", view, position + CRC_OFFSET, crc)


def assign_offset(view: memoryview, position: int, base_offset: int) -> None:
    """Give the batch at ``position`` its base offset and the log's leader epoch, as the broker does."""
    struct.pack_into(">q", view, position + BASE_OFFSET_OFFSET, base_offset)
    struct.pack_into(">i", view, position + PARTITION_LEADER_EPOCH_OFFSET, PARTITION_LEADER_EPOCH)


def number_batches(
    buf: np.ndarray, entries: EntryTable, first_offset: int, log_append_time: int = -1, *, stamp_all: bool = False
) -> int:
    """Give the batches of ``buf`` offsets from ``first_offset``, and ``log_append_time`` (when not -1) to those that
    are LogAppendTime batches (every one, with ``stamp_all``), as a broker does when it appends them: the numbering
    of batches staged before their offsets were known. Returns the offset after them."""
    offset = first_offset
    columns = zip(
        entries.positions.tolist(),
        entries.sizes.tolist(),
        entries.last_offset_deltas.tolist(),
        entries.attributes.tolist(),
        strict=True,
    )
    for position, size, delta, attributes in columns:
        if log_append_time >= 0 and (stamp_all or attributes & TIMESTAMP_TYPE_MASK):
            stamp_log_append_time(buf.data, position, size, attributes, log_append_time)
        assign_offset(buf.data, position, offset)
        offset += delta + 1
    return offset
