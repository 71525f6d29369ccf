"""The body of a topic's commit: every partition's log end after it, then what it changes (docs/object-storage.md).

A topic on an object store has one chain of commits (``CommitLog``), not one per partition: a reader or a Spark
driver learns whether anything of the topic changed with one probe of the chain's next name, and a commit's
header alone tells every partition's log end and log start, so a replica whose partition the header shows
unchanged records the commit without reading anything more.

A commit holds *sections*, each one partition's change: record batches (their offsets and timestamps already the
log's) or a new log start offset. Offsets are fixed before the commit is written, against the writer's replica at
the chain's end, so winning the create of the commit's name fixes them.

Big-endian::

    0  partitions        int32   P, the entries of the header (partitions above them have never changed)
    4  ends              P x (log end offset int64, log start offset int64): each partition's after this commit
    .  sections          int32   S
    .  S x section       partition int32, kind int8, base offset int64, end offset int64, log start offset int64
                         (kind 1; else -1), size int32 (bytes of its batches)
    .  batches           each section's record batches, in section order
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pysparklog.errors import CorruptRecordError

#: The directory of a topic's chains, beside its partitions' (``<topic>-chain/<topic id>``): a name no partition
#: directory has, so Kafka's tools and ``partition_dirs`` pass it by.
CHAIN_SUFFIX = "-chain"
#: The incarnation of a topic without an id (made by appends) in its chain's directory.
NO_TOPIC_ID = "no-topic-id"
_COUNT = struct.Struct(">i")
_END = struct.Struct(">qq")
_SECTION = struct.Struct(">ibqqqi")
NO_LOG_START = -1
#: A partition count no topic reaches (``topics.MAX_PARTITIONS`` is far below it): beyond it a header is damaged.
_MAX_ENTRIES = 1 << 20


class SectionKind(enum.IntEnum):
    """What a section does to its partition."""

    BATCHES = 0
    LOG_START = 1


@dataclass(frozen=True, slots=True)
class PartitionEnd:
    """A partition's log end offset and log start offset after a commit."""

    log_end_offset: int
    log_start_offset: int


_NEVER_WRITTEN = PartitionEnd(0, 0)


@dataclass(frozen=True, slots=True)
class Section:
    """One partition's change in a commit: batches from ``base_offset`` to ``end_offset`` (exclusive), or a new log
    start offset (``LOG_START``, base and end both the log end)."""

    partition: int
    kind: SectionKind
    base_offset: int
    end_offset: int
    log_start_offset: int = NO_LOG_START
    batches: bytes = b""


def chain_directory_name(topic: str, topic_id: str | None) -> str:
    """The directory of a topic's chain below the log directory: one per incarnation of the topic (its id), so a
    topic deleted and created again starts a new chain."""
    return f"{topic}{CHAIN_SUFFIX}/{topic_id or NO_TOPIC_ID}"


def header_size(partitions: int) -> int:
    """The bytes of a header with ``partitions`` entries: what a reader of the ends fetches of a commit."""
    return _COUNT.size + partitions * _END.size


@dataclass(frozen=True, slots=True)
class TopicCommit:
    """A decoded commit body: every partition's end after it, and its sections."""

    ends: tuple[PartitionEnd, ...]
    sections: tuple[Section, ...]

    def end(self, partition: int) -> PartitionEnd:
        """The partition's end after this commit ((0, 0) for one no commit has changed)."""
        return self.ends[partition] if partition < len(self.ends) else _NEVER_WRITTEN

    def sections_of(self, partition: int) -> list[Section]:
        return [section for section in self.sections if section.partition == partition]

    @classmethod
    def following(cls, previous: Sequence[PartitionEnd], sections: Sequence[Section]) -> TopicCommit:
        """The commit of ``sections`` after a commit whose header is ``previous`` (empty: the chain's first), its
        header derived from both.

        Raises:
            ValueError: A section does not start at its partition's end.
        """
        ends = list(previous)
        for section in sections:
            while len(ends) <= section.partition:
                ends.append(_NEVER_WRITTEN)
            before = ends[section.partition]
            if section.base_offset != before.log_end_offset:
                raise ValueError(
                    f"a section of partition {section.partition} starts at {section.base_offset}, not at its log end "
                    f"{before.log_end_offset}"
                )
            log_start = before.log_start_offset
            if section.kind == SectionKind.LOG_START:
                log_start = max(log_start, section.log_start_offset)
            ends[section.partition] = PartitionEnd(section.end_offset, log_start)
        return cls(tuple(ends), tuple(sections))

    def encode(self) -> bytes:
        parts = [_COUNT.pack(len(self.ends))]
        parts.extend(_END.pack(end.log_end_offset, end.log_start_offset) for end in self.ends)
        parts.append(_COUNT.pack(len(self.sections)))
        for s in self.sections:
            parts.append(
                _SECTION.pack(s.partition, s.kind, s.base_offset, s.end_offset, s.log_start_offset, len(s.batches))
            )
        parts.extend(s.batches for s in self.sections)
        return b"".join(parts)

    @classmethod
    def decode(cls, body: bytes, path: str) -> TopicCommit:
        """The commit in ``body``.

        Raises:
            CorruptRecordError: The body is not a topic commit: cut short, of an unknown section kind, with offsets
                that do not add up or sections that do not end where the header says.
        """
        ends = decode_ends(body, path)
        position = header_size(len(ends))
        count = _unpack(_COUNT, body, position, path, "the section count")[0]
        position += _COUNT.size
        if not 0 <= count <= len(ends) * 2 + 1:
            raise CorruptRecordError(f"a topic commit of {len(ends)} partitions with {count} sections", file=path)
        headers = []
        for _ in range(count):
            headers.append(_unpack(_SECTION, body, position, path, "a section"))
            position += _SECTION.size
        sections = []
        for partition, kind, base, end, log_start, size in headers:
            if size < 0 or position + size > len(body):
                raise CorruptRecordError(f"a section of {size} bytes runs past its commit's end", file=path)
            if kind not in SectionKind.__members__.values() or not 0 <= partition < len(ends) or not 0 <= base <= end:
                raise CorruptRecordError(
                    f"not a section: partition {partition} of {len(ends)}, kind {kind}, offsets {base} to {end} "
                    "(kinds: 0 batches, 1 log start)",
                    file=path,
                )
            if kind == SectionKind.LOG_START and (base != end or not 0 <= log_start <= end or size):
                raise CorruptRecordError(f"a log start section with offsets {base}, {end} and {log_start}", file=path)
            if ends[partition].log_end_offset < end:
                raise CorruptRecordError(
                    f"a section of partition {partition} ends at {end}, past the header's {ends[partition]}", file=path
                )
            sections.append(
                Section(partition, SectionKind(kind), base, end, log_start, body[position : position + size])
            )
            position += size
        if position != len(body):
            raise CorruptRecordError(f"a topic commit has {len(body) - position} bytes after its sections", file=path)
        return cls(ends, tuple(sections))


def decode_ends(body: bytes, path: str) -> tuple[PartitionEnd, ...]:
    """Every partition's end from a body's header: all a reader of the ends needs of it (``header_size``).

    Raises:
        CorruptRecordError: The header is cut short or its offsets do not add up.
    """
    partitions = _unpack(_COUNT, body, 0, path, "the partition count")[0]
    if not 0 < partitions <= _MAX_ENTRIES:  # every commit changes a partition
        raise CorruptRecordError(f"a topic commit's header has {partitions} partitions", file=path)
    if len(body) < header_size(partitions):
        raise CorruptRecordError(f"a topic commit's header of {partitions} partitions is cut short", file=path)
    ends = []
    for index in range(partitions):
        end, start = _END.unpack_from(body, _COUNT.size + index * _END.size)
        if not 0 <= start <= end:
            raise CorruptRecordError(
                f"partition {index}'s log start {start} and log end {end} in a commit's header", file=path
            )
        ends.append(PartitionEnd(end, start))
    return tuple(ends)


def end_of(head: bytes, partition: int, path: str) -> PartitionEnd:
    """One partition's end from the start of a body, which holds at least the header's first ``partition + 1``
    entries, or the whole header.

    Raises:
        CorruptRecordError: The header is cut short or its offsets do not add up.
    """
    partitions = _unpack(_COUNT, head, 0, path, "the partition count")[0]
    if not 0 < partitions <= _MAX_ENTRIES:  # every commit changes a partition
        raise CorruptRecordError(f"a topic commit's header has {partitions} partitions", file=path)
    if partition >= partitions:
        return _NEVER_WRITTEN
    end, start = _unpack(_END, head, _COUNT.size + partition * _END.size, path, "the header")
    if not 0 <= start <= end:
        raise CorruptRecordError(f"partition {partition}'s log start {start} and log end {end} in a header", file=path)
    return PartitionEnd(end, start)


def ends_by_partition(ends: Sequence[PartitionEnd], partitions: int) -> Mapping[int, PartitionEnd]:
    """The ends of partitions ``0..partitions - 1`` ((0, 0) for those no commit has changed)."""
    return {p: ends[p] if p < len(ends) else _NEVER_WRITTEN for p in range(partitions)}


def _unpack(layout: struct.Struct, body: bytes, position: int, path: str, what: str) -> tuple[int, ...]:
    if len(body) < position + layout.size:
        raise CorruptRecordError(f"a topic commit ends inside {what}", file=path, position=position)
    return layout.unpack_from(body, position)
