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
from dataclasses import dataclass

import crc32c as _crc32c

from pysparklog.errors import CorruptRecordError

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">hIi")  # version, crc, producerCount
_CRC_START = 6  # the CRC covers bytes from producerCount on
_ENTRY = struct.Struct(">qhiqiqiq")
NO_TXN_FIRST_OFFSET = -1


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
            e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
            e.coordinator_epoch, e.current_txn_first_offset,
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
        raise CorruptRecordError(f"snapshot of {len(data)} bytes, shorter than its {_HEADER.size}-byte header",
                                 file=file, position=0)
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
            f"snapshot declares {count} producers ({expected} bytes) but has {len(data)} bytes", file=file,
            position=_HEADER.size,
        )
    return [
        ProducerSnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)) for i in range(count)
    ]


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
        from pysparklog.storage.segment import parse_segment_name

        names = os.listdir(self.directory)
        return sorted(o for o in (parse_segment_name(n, SNAPSHOT_SUFFIX) for n in names) if o is not None)

    def snapshot_path(self, offset: int) -> str:
        from pysparklog.storage.segment import filename_prefix

        return os.path.join(self.directory, filename_prefix(offset) + SNAPSHOT_SUFFIX)

    def state_at(self, bases: list[int], active_base: int, active_size: int, offset: int) -> list[ProducerSnapshotEntry]:
        """Producer entries as of ``offset`` (exclusive): the latest snapshot below it plus a replay."""
        from pysparklog.storage.records import kernels as k
        from pysparklog.storage.records.arrow_records import decode_entries
        from pysparklog.storage.records.default_records import ControlRecordType, parse_end_txn_marker_value
        from pysparklog.storage.segment import LogSegment

        earlier = [o for o in self.snapshot_offsets() if o <= offset]
        producers: dict[int, ProducerSnapshotEntry] = {}
        start = 0
        if earlier:
            start = earlier[-1]
            with open(self.snapshot_path(start), "rb") as f:
                producers = {e.producer_id: e for e in decode_snapshot(f.read(), file=self.snapshot_path(start))}
        for i, base in enumerate(bases):
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            if (next_base is not None and next_base <= start) or base >= offset:
                continue
            segment = LogSegment(self.directory, base)
            end = active_size if base == active_base else segment.size()
            for chunk in segment.chunks(0, end, verify_crc=False):
                e = chunk.entries
                for row, last in zip(e.rows.tolist(), e.last_offsets.tolist(), strict=True):
                    pid = row[k.E_PRODUCER_ID]
                    if row[k.E_MAGIC] < 2 or pid < 0 or last < start or last >= offset:
                        continue
                    prev = producers.get(pid)
                    attributes = row[k.E_ATTRIBUTES]
                    if attributes & 0x20:  # control batch: an end-transaction marker closes the transaction
                        marker = next(decode_entries(chunk.buf, e.select(slice(e.rows.tolist().index(row),
                                      e.rows.tolist().index(row) + 1)), topic="", partition=0), None)
                        coordinator_epoch = prev.coordinator_epoch if prev else -1
                        if marker is not None and marker.num_rows:
                            key = marker.column("key")[0].as_py()
                            from pysparklog.storage.records.default_records import control_record_type

                            if control_record_type(key) in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                                coordinator_epoch = parse_end_txn_marker_value(marker.column("value")[0].as_py())
                        producers[pid] = ProducerSnapshotEntry(
                            pid, row[k.E_PRODUCER_EPOCH], prev.last_sequence if prev else -1,
                            prev.last_offset if prev else last, prev.offset_delta if prev else 0,
                            prev.timestamp if prev else row[k.E_MAX_TIMESTAMP], coordinator_epoch, NO_TXN_FIRST_OFFSET,
                        )
                        continue
                    txn_first = prev.current_txn_first_offset if prev else NO_TXN_FIRST_OFFSET
                    if attributes & 0x10 and txn_first == NO_TXN_FIRST_OFFSET:
                        txn_first = row[k.E_BASE_OFFSET]
                    delta = row[k.E_LAST_OFFSET_DELTA]
                    base_seq = row[k.E_BASE_SEQUENCE]
                    producers[pid] = ProducerSnapshotEntry(
                        pid, row[k.E_PRODUCER_EPOCH], (base_seq + delta) % 2**31 if base_seq >= 0 else -1, last,
                        delta, row[k.E_MAX_TIMESTAMP], prev.coordinator_epoch if prev else -1, txn_first,
                    )
        return sorted(producers.values(), key=lambda e: e.producer_id)

    def take_snapshot(self, bases: list[int], active_base: int, active_size: int, offset: int) -> None:
        """Write ``<offset>.snapshot`` as Kafka does when a segment rolls."""
        from pysparklog.storage.checkpoints import write_atomically

        write_atomically(self.snapshot_path(offset), encode_snapshot(self.state_at(bases, active_base, active_size, offset)))
