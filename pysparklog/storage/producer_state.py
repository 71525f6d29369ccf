"""Producer-state snapshots (``<offset>.snapshot``), Kafka's ``ProducerStateManager`` format.

Wire schema, big-endian::

    version           int16   = 1
    crc               uint32  CRC-32C of everything after this field
    producerCount     int32
    producers         [ProducerEntry], 46 bytes each:
      producerId            int64
      producerEpoch         int16
      lastSequence          int32
      lastOffset            int64
      offsetDelta           int32   lastOffset - first offset of the producer's last batch
      timestamp             int64   max timestamp of that batch
      coordinatorEpoch      int32
      currentTxnFirstOffset int64   -1 outside a transaction

The file name is the offset the snapshot covers up to, exclusive.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, replace

import crc32c as _crc32c
import numpy as np

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.checkpoints import write_atomically
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.records.default_records import (
    MAGIC_V2,
    ControlRecordType,
    control_record_type,
    parse_end_txn_marker_value,
)
from pysparklog.storage.segment import Chunk, LogSegment, filename_prefix, parse_segment_name

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">hIi")  # version, crc, producerCount
_CRC_START = 6  # the CRC covers bytes from producerCount on
_ENTRY = struct.Struct(">qhiqiqiq")
NO_TXN_FIRST_OFFSET = -1
_END_MARKERS = (ControlRecordType.COMMIT, ControlRecordType.ABORT)


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer's state, as a snapshot stores it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET


def encode_snapshot(entries: list[ProducerSnapshotEntry]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(
        _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in entries
    )
    return struct.pack(">hI", SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes, *, file: str | None = None) -> list[ProducerSnapshotEntry]:
    """Parse a snapshot; a wrong version, length or CRC raises CorruptRecordError.

    Version and CRC errors carry Kafka's own ``CorruptSnapshotException`` message (in ``detail``),
    which tools that mirror Kafka's print.
    """
    if len(data) < _HEADER.size:
        raise CorruptRecordError(
            f"snapshot of {len(data)} bytes, shorter than its {_HEADER.size}-byte header", file=file, position=0
        )
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"Snapshot contained an unknown file version {version}", file=file, position=0)
    computed = _crc32c.crc32c(data[_CRC_START:])
    if computed != stored_crc:
        raise CorruptRecordError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}",
            file=file,
            position=2,
        )
    expected = _HEADER.size + count * _ENTRY.size
    if count < 0 or len(data) != expected:
        raise CorruptRecordError(
            f"snapshot declares {count} producers ({expected} bytes) but has {len(data)} bytes",
            file=file,
            position=_HEADER.size,
        )
    return [ProducerSnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)) for i in range(count)]


class ProducerStateTracker:
    """Producer state of one partition, rebuilt from the last snapshot and the batches after it.

    Kafka keeps this state in memory and snapshots it on every roll; here any process may roll, so
    the state is replayed from the files when a snapshot is due.

    Args:
        directory: The partition directory.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def snapshot_offsets(self) -> list[int]:
        names = os.listdir(self.directory)
        return sorted(o for o in (parse_segment_name(n, SNAPSHOT_SUFFIX) for n in names) if o is not None)

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, filename_prefix(offset) + SNAPSHOT_SUFFIX)

    def state_at(
        self, bases: list[int], active_base: int, active_size: int, offset: int
    ) -> list[ProducerSnapshotEntry]:
        """Producer entries as of ``offset`` (exclusive): the latest snapshot below it plus a replay."""
        earlier = [o for o in self.snapshot_offsets() if o <= offset]
        start = earlier[-1] if earlier else 0
        producers: dict[int, ProducerSnapshotEntry] = {}
        if earlier:
            path = self.snapshot_path(start)
            with open(path, "rb") as f:
                producers = {e.producer_id: e for e in decode_snapshot(f.read(), file=path)}
        for base, next_base in zip(bases, [*bases[1:], None][: len(bases)], strict=True):
            if base >= offset or (next_base is not None and next_base <= start):
                continue
            segment = LogSegment(self.directory, base)
            end = active_size if base == active_base else segment.size()
            for chunk in segment.chunks(0, end, verify_crc=False):
                _replay(producers, chunk, start, offset)
        return sorted(producers.values(), key=lambda e: e.producer_id)

    def take_snapshot(self, bases: list[int], active_base: int, active_size: int, offset: int) -> None:
        """Write ``<offset>.snapshot`` as Kafka does when a segment rolls."""
        entries = self.state_at(bases, active_base, active_size, offset)
        write_atomically(self.snapshot_path(offset), encode_snapshot(entries))


def _replay(producers: dict[int, ProducerSnapshotEntry], chunk: Chunk, start: int, end: int) -> None:
    """Apply the producer batches of ``chunk`` whose last offset lies in [start, end)."""
    e = chunk.entries
    last_offsets = e.last_offsets
    mask = (e.magics >= MAGIC_V2) & (e.column(k.E_PRODUCER_ID) >= 0) & (last_offsets >= start) & (last_offsets < end)
    for i in np.flatnonzero(mask).tolist():
        row = e.rows[i]
        pid, epoch, last = int(row[k.E_PRODUCER_ID]), int(row[k.E_PRODUCER_EPOCH]), int(last_offsets[i])
        prev = producers.get(pid)
        if e.is_control[i]:
            # An end-transaction marker closes the producer's transaction and carries the coordinator epoch.
            marker = next(decode_entries(chunk.buf, e.select(slice(i, i + 1)), topic="", partition=0), None)
            coordinator_epoch = prev.coordinator_epoch if prev else -1
            if marker is not None and control_record_type(marker.column("key")[0].as_py()) in _END_MARKERS:
                coordinator_epoch = parse_end_txn_marker_value(marker.column("value")[0].as_py())
            if prev is None:
                prev = ProducerSnapshotEntry(pid, epoch, -1, last, 0, int(row[k.E_MAX_TIMESTAMP]), -1)
            producers[pid] = replace(
                prev,
                producer_epoch=epoch,
                coordinator_epoch=coordinator_epoch,
                current_txn_first_offset=NO_TXN_FIRST_OFFSET,
            )
            continue
        txn_first = prev.current_txn_first_offset if prev else NO_TXN_FIRST_OFFSET
        if e.is_transactional[i] and txn_first == NO_TXN_FIRST_OFFSET:
            txn_first = int(row[k.E_BASE_OFFSET])
        delta, base_seq = int(row[k.E_LAST_OFFSET_DELTA]), int(row[k.E_BASE_SEQUENCE])
        producers[pid] = ProducerSnapshotEntry(
            pid,
            epoch,
            (base_seq + delta) % 2**31 if base_seq >= 0 else -1,
            last,
            delta,
            int(row[k.E_MAX_TIMESTAMP]),
            prev.coordinator_epoch if prev else -1,
            txn_first,
        )
