"""A partition's state record, ``pysparklog.state``: what the last acknowledged append left behind.

Appends are serialised by an exclusive lock on this file, which also holds the record (a fixed
114-byte record, below). Readers take the lock shared for a moment to read it and never look past
the acknowledged size, so a batch being written is never seen half-written.

``pysparklog.state`` (pysparklog's own file; Kafka ignores it), big-endian::

    0  magic                  4 bytes  "PSLG"
    4  version                int16    2
    6  boot id                16 bytes the kernel boot id of the last writer's machine
    22 active segment base    int64
    30 active segment size    int64    acknowledged bytes of its .log
    38 log end offset         int64
    46 max timestamp          int64    of the active segment, -1 when none
    54 offset of max ts       int64
    62 log start offset       int64
    70 recovery point         int64    everything below is fsynced
    78 last flush time        int64    milliseconds
    86 segments generation    int64    bumped whenever segments are added, retired or swapped
    94 first unstable offset  int64    the first offset of the earliest open transaction, -1 when none
    102 txn indexes from      int64    every segment whose base is at or above it has a .txnindex; -1: unknown
    110 crc                   uint32   CRC-32C of bytes [0, 110)

Versions 0 and 1 (an older pysparklog) end at the segments generation and at the first unstable
offset, their CRCs at 94 and 102. They are still read: a version 0 record's first unstable offset
is then unknown, derived from the producer state until the next writer records it, and the next
writer of either rebuilds the active segment's indexes and records where ``.txnindex`` files start.

The first unstable offset is there so that readers know the last stable offset (where read_committed
reads stop) of every process's appends without replaying producer state: the writer derives it from
the producer state it keeps for idempotence, and only an append holding transactional or control
batches (or a roll, which snapshots that state) changes it. Aborted transactions go to the
``.txnindex`` of the segment holding their ABORT marker (``transaction_index``), written after the
marker and before the state record acknowledges it; recovery rebuilds the file from the log.

Kafka creates a ``.txnindex`` with its first entry, so a missing file means "nothing aborted here" or
"lost", which read_committed readers must tell apart: every segment pysparklog creates or recovers
gets one, empty until a transaction is aborted in it, and the state record says from which segment on
that holds ("txn indexes from"). A missing file there, or a damaged one anywhere, is rebuilt from the
segment's control batches and the producer state at its base before a read_committed answer uses it
(``log_reads.rebuild_txn_indexes``). Below that segment (a broker's segments, an older
pysparklog's), a missing file means none, as in Kafka.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from dataclasses import dataclass

import crc32c as _crc32c

from pysparklog.errors import CorruptRecordError, InvalidLogDirectoryError
from pysparklog.storage.io import LockedRecord
from pysparklog.storage.producer_state import NO_TXN_FIRST_OFFSET
from pysparklog.storage.segment import LogSegment

STATE_FILE = "pysparklog.state"
# The state record of the module docstring: magic, version, boot id, then int64 fields up to the segments
# generation (version 0), the first unstable offset (version 1) and where .txnindex files start (version 2);
# a CRC-32C follows each.
_STATE_V0 = struct.Struct(">4sh16sqqqqqqqqq")
_STATE_V1 = struct.Struct(">4sh16sqqqqqqqqqq")
_STATE = struct.Struct(">4sh16sqqqqqqqqqqq")
_STATE_MAGIC = b"PSLG"
_STATE_VERSION = 2
_STATE_LAYOUTS = {0: _STATE_V0, 1: _STATE_V1, _STATE_VERSION: _STATE}
#: The first unstable offset of a state record that does not hold it (version 0), or of a log without one.
UNKNOWN_FIRST_UNSTABLE_OFFSET = -2
#: Where ``.txnindex`` files start when no state record says it (before version 2, or a broker's log):
#: a missing file then means that nothing was aborted in the segment, as in Kafka.
UNKNOWN_TXN_INDEXES_FROM = -1
_TOPIC_PARTITION = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")


def _boot_id() -> bytes:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return bytes.fromhex(f.read().strip().replace("-", ""))
    except (OSError, ValueError):
        return bytes(16)


BOOT_ID = _boot_id()


def parse_partition_dir(directory: str) -> tuple[str, int]:
    """(topic, partition) from a ``<topic>-<partition>`` directory name.

    Raises:
        InvalidLogDirectoryError: The name is not of that form.
    """
    name = os.path.basename(os.path.normpath(directory))
    match = _TOPIC_PARTITION.match(name)
    if match is None:
        raise InvalidLogDirectoryError(
            f"{directory!r} is not a partition directory: expected '<topic>-<partition>' with a topic of "
            "[a-zA-Z0-9._-] characters and a partition number"
        )
    return match["topic"], int(match["partition"])


@dataclass(frozen=True, slots=True)
class LogState:
    """What the last acknowledged append left behind (the ``pysparklog.state`` record)."""

    active_base: int
    active_size: int
    log_end_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_start_offset: int
    recovery_point: int
    last_flush_ms: int
    segments_generation: int = 0
    boot_id: bytes = BOOT_ID
    first_unstable_offset: int = NO_TXN_FIRST_OFFSET  # UNKNOWN_FIRST_UNSTABLE_OFFSET from a version 0 record
    txn_indexes_from: int = UNKNOWN_TXN_INDEXES_FROM  # every segment from this base on has a .txnindex

    def encode(self) -> bytes:
        body = _STATE.pack(
            _STATE_MAGIC,
            _STATE_VERSION,
            self.boot_id,
            self.active_base,
            self.active_size,
            self.log_end_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.log_start_offset,
            self.recovery_point,
            self.last_flush_ms,
            self.segments_generation,
            self.first_unstable_offset,
            self.txn_indexes_from,
        )
        return body + struct.pack(">I", _crc32c.crc32c(body))

    @classmethod
    def decode(cls, data: bytes) -> LogState | None:
        """The state, or None when the record is absent, torn or of an unknown version."""
        layout = _STATE_LAYOUTS.get(struct.unpack_from(">h", data, 4)[0]) if len(data) >= 6 else None
        if layout is None or len(data) < layout.size + 4:
            return None
        body = data[: layout.size]
        if struct.unpack_from(">I", data, layout.size)[0] != _crc32c.crc32c(body):
            return None
        magic, version, boot, *values = layout.unpack(body)
        if magic != _STATE_MAGIC:
            return None
        if version == 0:
            values.append(UNKNOWN_FIRST_UNSTABLE_OFFSET)
        if version <= 1:
            values.append(UNKNOWN_TXN_INDEXES_FROM)
        (
            active_base,
            active_size,
            end,
            max_ts,
            offset_of_max_ts,
            log_start,
            recovery_point,
            flushed,
            generation,
            first_unstable,
            txn_indexes_from,
        ) = values
        return cls(
            active_base,
            active_size,
            end,
            max_ts,
            offset_of_max_ts,
            log_start,
            recovery_point,
            flushed,
            generation,
            boot,
            first_unstable,
            txn_indexes_from,
        )


def describes_active_segment(state: LogState, segment: LogSegment) -> bool:
    """Whether ``state`` can be the record of ``segment`` as the active segment: plausible values, and its
    acknowledged bytes ending at the record's log end offset (found from the last offset-index entry).

    A record that names the right segment base may still be another partition's (copied over this one's,
    with the same segment bases): trusted, it would end reads early while the log end offset says more, or
    make them read past what the files hold. Writers recover from the files then, readers derive the view
    from them.

    Raises:
        FileNotFoundError: The segment's ``.log`` is gone.
    """
    plausible = (
        0 <= state.active_base <= state.log_end_offset
        and state.active_size >= 0
        and 0 <= state.log_start_offset <= state.log_end_offset
        and state.recovery_point <= state.log_end_offset
        and UNKNOWN_FIRST_UNSTABLE_OFFSET <= state.first_unstable_offset <= state.log_end_offset
    )
    try:
        return plausible and segment.end_offset(state.active_size) == state.log_end_offset
    except CorruptRecordError:  # the bytes it acknowledges do not hold whole batches
        return False


@dataclass(frozen=True, slots=True)
class LogView:
    """A consistent view for readers: the segments and how far each may be read.

    ``first_unstable_offset`` is the first offset of the earliest open transaction (-1 when none is
    open, ``UNKNOWN_FIRST_UNSTABLE_OFFSET`` when no state record holds it: a broker's log);
    ``txn_indexes_from`` the base from which every segment has a ``.txnindex`` (``LogState``).
    """

    segment_bases: tuple[int, ...]
    active_size: int
    log_start_offset: int
    log_end_offset: int
    first_unstable_offset: int
    txn_indexes_from: int = UNKNOWN_TXN_INDEXES_FROM

    def end_of(self, base: int, segment: LogSegment) -> int:
        return self.active_size if base == self.segment_bases[-1] else segment.size()

    def offsets_below(self, base: int) -> int:
        """The bound of the offsets the segment at ``base`` may hold: the next segment's base, or the log end."""
        i = bisect.bisect_right(self.segment_bases, base)
        return self.segment_bases[i] if i < len(self.segment_bases) else self.log_end_offset


#: Bytes of the record as this version writes it (the CRC included).
STATE_RECORD_SIZE = _STATE.size + 4


def read_state(record: LockedRecord | None) -> LogState | None:
    """The state in the lock's record; None without one (no writer created it) or when it does not decode."""
    return LogState.decode(record.read(STATE_RECORD_SIZE)) if record is not None else None
