"""The body of a topic's commit: every partition's log end after it, then what it changes (docs/object-storage.md).

A topic on an object store has one chain of commits (``CommitLog``), not one per partition: a reader or a Spark
driver learns whether anything of the topic changed with one probe of the chain's next name, and a commit's
header alone tells every partition's log end and log start, so a replica whose partition the header shows
unchanged records the commit without reading anything more.

A commit holds *sections*, each one partition's change: record batches (their offsets and timestamps already the
log's), a new log start offset, or record batches staged in an object of their own (an exactly-once sink task's
output, numbered from 0: Kafka's batch CRC does not cover the base offset, so a reader gives them the section's
offsets). Offsets are fixed before the commit is written, against the chain's end as the writer knows it, so
winning the create of the commit's name fixes them.

The header also carries the *marks* of the exactly-once sinks that wrote the topic: each sink's last committed
micro-batch, copied forward by every commit (the most recent 256 sinks), so that a sink's commit of a micro-batch
and its record of having committed it are one write, and a re-run finds it in the chain's last commit.

Big-endian::

    0  partitions        int32   P, the entries of the header (partitions above them have never changed)
    4  ends              P x (log end offset int64, log start offset int64): each partition's after this commit
    .  marks             int16   M
    .  M x mark          sink id length int16, sink id UTF-8, query id length int16 (-1: none), query id UTF-8,
                         batch id int64
    .  time              int64   when the writer built the commit (ms, its clock): its staged batches' LogAppendTime
    .  sections          int32   S
    .  S x section       partition int32, kind int8 (0 batches, 1 log start, 2 staged batches), base offset int64,
                         end offset int64, log start offset int64 (kind 1; else -1), size int32 (of its bytes)
    .  bytes             each section's, in section order: kind 0 its record batches; kind 2 where its batches are,
                         position int64 and length int64 in the staged object, then the object's name (UTF-8)
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pysparklog.errors import CorruptRecordError

#: The directory of a topic's chains, beside its partitions' (``<topic>-chain/<topic id>``): a name no partition
#: directory has, so Kafka's tools and ``partition_dirs`` pass it by.
CHAIN_SUFFIX = "-chain"
#: Where a chain's staged objects are, below its directory.
STAGED_DIRECTORY = "staged"
#: The incarnation of a topic without an id (made by appends) in its chain's directory.
NO_TOPIC_ID = "no-topic-id"
_COUNT = struct.Struct(">i")
_END = struct.Struct(">qq")
_SHORT = struct.Struct(">h")
_BATCH_ID = struct.Struct(">q")  # a mark's batch id, and a commit's time
_SECTION = struct.Struct(">ibqqqi")
_REFERENCE = struct.Struct(">qq")
NO_LOG_START = -1
#: The most bytes a header and its section table take (a damaged count claiming more is refused).
_TABLE_LIMIT = 4 * 1024 * 1024
#: The sinks whose marks a header keeps: the most recently committed.
MAX_MARKS = 256
#: The names a staged object may have: one path segment, so a damaged reference cannot point elsewhere.
_STAGED_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
#: A partition count no topic reaches (``topics.MAX_PARTITIONS`` is far below it): beyond it a header is damaged.
_MAX_ENTRIES = 1 << 20


class SectionKind(enum.IntEnum):
    """What a section does to its partition."""

    BATCHES = 0
    LOG_START = 1
    STAGED = 2


@dataclass(frozen=True, slots=True)
class SinkMark:
    """An exactly-once sink's last committed micro-batch: its id, its query's id (None: a batch write) and the
    batch."""

    sink_id: str
    query_id: str | None
    batch_id: int


@dataclass(frozen=True, slots=True)
class StagedReference:
    """Where a staged section's batches are: ``length`` bytes at ``position`` of the staged object ``name`` (below
    the chain's ``staged/``)."""

    name: str
    position: int
    length: int

    def encode(self) -> bytes:
        return _REFERENCE.pack(self.position, self.length) + self.name.encode()

    @classmethod
    def decode(cls, data: bytes | bytearray, path: str) -> StagedReference:
        """The reference in a staged section's bytes.

        Raises:
            CorruptRecordError: It is cut short, or names no staged object.
        """
        if len(data) <= _REFERENCE.size:
            raise CorruptRecordError(f"a staged section's reference of {len(data)} bytes is cut short", file=path)
        position, length = _REFERENCE.unpack_from(data)
        try:
            name = data[_REFERENCE.size :].decode()
        except UnicodeDecodeError:
            name = ""
        if position < 0 or length <= 0 or not _STAGED_NAME.fullmatch(name):
            raise CorruptRecordError(
                f"a staged section refers to {length} bytes at {position} of {name!r}, not a staged object's range",
                file=path,
            )
        return cls(name, position, length)


@dataclass(frozen=True, slots=True)
class PartitionEnd:
    """A partition's log end offset and log start offset after a commit."""

    log_end_offset: int
    log_start_offset: int


_NEVER_WRITTEN = PartitionEnd(0, 0)


@dataclass(frozen=True, slots=True)
class Section:
    """One partition's change in a commit: batches from ``base_offset`` to ``end_offset`` (exclusive), inline or
    staged (``data`` their bytes, or the ``StagedReference``'s), or a new log start offset (``LOG_START``, base and
    end both the log end)."""

    partition: int
    kind: SectionKind
    base_offset: int
    end_offset: int
    log_start_offset: int = NO_LOG_START
    data: bytes | bytearray = b""

    def reference(self, path: str) -> StagedReference:
        """Where a staged section's batches are.

        Raises:
            CorruptRecordError: Its bytes are no reference to a staged object's range.
        """
        return StagedReference.decode(self.data, path)


def chain_directory_name(topic: str, topic_id: str | None) -> str:
    """The directory of a topic's chain below the log directory: one per incarnation of the topic (its id), so a
    topic deleted and created again starts a new chain."""
    return f"{topic}{CHAIN_SUFFIX}/{topic_id or NO_TOPIC_ID}"


def header_size(partitions: int) -> int:
    """The bytes of a header's ends with ``partitions`` entries: what a reader of the ends fetches of a commit."""
    return _COUNT.size + partitions * _END.size


@dataclass(frozen=True, slots=True)
class TopicHeader:
    """What every commit carries forward: every partition's end after it, and the sinks' marks."""

    ends: tuple[PartitionEnd, ...] = ()
    marks: tuple[SinkMark, ...] = ()
    #: When the commit's writer built it (ms since the epoch; 0 for an empty header): the LogAppendTime of the staged
    #: batches it makes visible, stamped by every reader alike.
    time_ms: int = 0

    def end(self, partition: int) -> PartitionEnd:
        """The partition's end ((0, 0) for one no commit has changed)."""
        return self.ends[partition] if partition < len(self.ends) else _NEVER_WRITTEN

    def mark(self, sink_id: str) -> SinkMark | None:
        """The sink's last committed micro-batch, if the header keeps it."""
        return next((mark for mark in self.marks if mark.sink_id == sink_id), None)


@dataclass(frozen=True, slots=True)
class TopicCommit:
    """A decoded commit body: its header and its sections."""

    header: TopicHeader
    sections: tuple[Section, ...]

    def sections_of(self, partition: int) -> list[Section]:
        return [section for section in self.sections if section.partition == partition]

    @classmethod
    def following(
        cls, previous: TopicHeader, sections: Sequence[Section], mark: SinkMark | None = None, *, time_ms: int = 0
    ) -> TopicCommit:
        """The commit of ``sections`` after a commit whose header is ``previous`` (empty: the chain's first), its
        header derived from both; ``mark`` records a sink's micro-batch (the sink's earlier mark dropped, and the
        least recent sink's when the header keeps ``MAX_MARKS``); ``time_ms`` is when it is made.

        Raises:
            ValueError: A section does not start at its partition's end.
        """
        ends = list(previous.ends)
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
        marks = previous.marks
        if mark is not None:
            marks = (*(m for m in marks if m.sink_id != mark.sink_id), mark)[-MAX_MARKS:]
        return cls(TopicHeader(tuple(ends), marks, time_ms), tuple(sections))

    def encode(self) -> bytes:
        header = self.header
        parts: list[bytes | bytearray] = [_COUNT.pack(len(header.ends))]
        parts.extend(_END.pack(end.log_end_offset, end.log_start_offset) for end in header.ends)
        parts.append(_SHORT.pack(len(header.marks)))
        for mark in header.marks:
            parts.append(_text(mark.sink_id))
            parts.append(_SHORT.pack(-1) if mark.query_id is None else _text(mark.query_id))
            parts.append(_BATCH_ID.pack(mark.batch_id))
        parts.append(_BATCH_ID.pack(header.time_ms))
        parts.append(_COUNT.pack(len(self.sections)))
        for s in self.sections:
            parts.append(
                _SECTION.pack(s.partition, s.kind, s.base_offset, s.end_offset, s.log_start_offset, len(s.data))
            )
        parts.extend(s.data for s in self.sections)
        return b"".join(parts)

    @classmethod
    def decode(cls, body: bytes, path: str) -> TopicCommit:
        """The commit in ``body``.

        Raises:
            CorruptRecordError: The body is not a topic commit: cut short, of an unknown section kind, with offsets
                that do not add up or sections that do not end where the header says.
        """
        layout = CommitLayout.decode(body, path, body_size=len(body))
        sections = []
        for entry in layout.entries:
            section = entry.section(body[entry.position : entry.position + entry.size])
            if entry.kind == SectionKind.STAGED:
                section.reference(path)  # checked now: a damaged reference is the commit's damage
            sections.append(section)
        end = layout.entries[-1].position + layout.entries[-1].size
        if end != len(body):
            raise CorruptRecordError(f"a topic commit has {len(body) - end} bytes after its sections", file=path)
        return cls(layout.header, tuple(sections))


@dataclass(frozen=True, slots=True)
class SectionEntry:
    """A section as the commit's table describes it: whose, what, which offsets, and where its bytes are in the
    body (``position``, ``size``)."""

    partition: int
    kind: SectionKind
    base_offset: int
    end_offset: int
    log_start_offset: int
    position: int
    size: int

    def section(self, data: bytes | bytearray) -> Section:
        return Section(self.partition, self.kind, self.base_offset, self.end_offset, self.log_start_offset, data)


class HeadTooShortError(Exception):
    """The start of a body read so far ends inside its header or section table: ``needed`` bytes hold them."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"{needed} bytes hold the header and the section table")
        self.needed = needed


@dataclass(frozen=True, slots=True)
class CommitLayout:
    """A commit's header and section table, from the start of its body: what a reader of one partition needs to
    fetch only its sections' bytes of a large commit."""

    header: TopicHeader
    entries: tuple[SectionEntry, ...]

    @classmethod
    def decode(cls, head: bytes, path: str, *, body_size: int | None = None) -> CommitLayout:
        """The layout from ``head``, the body's first bytes (all of it when ``body_size`` is its length; else the
        sections' extents are checked when their bytes are read).

        Raises:
            HeadTooShortError: ``head`` ends inside the header or the table (only without ``body_size``).
            CorruptRecordError: The header or the table is not a topic commit's.
        """
        try:
            header, position = _decode_header(head, path)
            count = _unpack(_COUNT, head, position, path, "the section count")[0]
        except CorruptRecordError:
            if body_size is None and len(head) < _TABLE_LIMIT:  # perhaps only cut short: a longer start decides
                raise HeadTooShortError(min(4 * len(head), _TABLE_LIMIT)) from None
            raise
        position += _COUNT.size
        room = (body_size if body_size is not None else _TABLE_LIMIT) - position
        if not 0 < count <= room // _SECTION.size:
            raise CorruptRecordError(f"a topic commit with {count} sections", file=path)
        table_end = position + count * _SECTION.size
        if len(head) < table_end:
            if body_size is None:
                raise HeadTooShortError(table_end)
            raise CorruptRecordError("a topic commit ends inside its section table", file=path)
        ends = header.ends
        entries, data = [], table_end
        for _ in range(count):
            partition, kind, base, end, log_start, size = _SECTION.unpack_from(head, position)
            position += _SECTION.size
            if size < 0 or (body_size is not None and data + size > body_size):
                raise CorruptRecordError(f"a section of {size} bytes runs past its commit's end", file=path)
            if kind not in SectionKind.__members__.values() or not 0 <= partition < len(ends) or not 0 <= base <= end:
                raise CorruptRecordError(
                    f"not a section: partition {partition} of {len(ends)}, kind {kind}, offsets {base} to {end} "
                    "(kinds: 0 batches, 1 log start, 2 staged batches)",
                    file=path,
                )
            if kind == SectionKind.LOG_START and (base != end or not 0 <= log_start <= end or size):
                raise CorruptRecordError(f"a log start section with offsets {base}, {end} and {log_start}", file=path)
            if ends[partition].log_end_offset < end:
                raise CorruptRecordError(
                    f"a section of partition {partition} ends at {end}, past the header's {ends[partition]}", file=path
                )
            entries.append(SectionEntry(partition, SectionKind(kind), base, end, log_start, data, size))
            data += size
        return cls(header, tuple(entries))


def decode_header(body: bytes, path: str) -> TopicHeader:
    """A body's header: every partition's end and the sinks' marks, what the next commit carries forward.

    Raises:
        CorruptRecordError: The header is cut short or does not add up.
    """
    return _decode_header(body, path)[0]


def _decode_header(body: bytes, path: str) -> tuple[TopicHeader, int]:
    ends = decode_ends(body, path)
    position = header_size(len(ends))
    count = _unpack(_SHORT, body, position, path, "the mark count")[0]
    position += _SHORT.size
    if not 0 <= count <= MAX_MARKS:
        raise CorruptRecordError(f"a topic commit's header has {count} sink marks", file=path)
    marks = []
    for _ in range(count):
        sink_id, position = _decode_text(body, position, path)
        query_id: str | None = None
        if _unpack(_SHORT, body, position, path, "a mark")[0] == -1:
            position += _SHORT.size
        else:
            query_id, position = _decode_text(body, position, path)
        batch_id = _unpack(_BATCH_ID, body, position, path, "a mark")[0]
        position += _BATCH_ID.size
        if batch_id < 0:
            raise CorruptRecordError(f"a sink mark of batch {batch_id}", file=path)
        marks.append(SinkMark(sink_id, query_id, batch_id))
    time_ms = _unpack(_BATCH_ID, body, position, path, "the commit's time")[0]
    if time_ms < 0:
        raise CorruptRecordError(f"a commit's time of {time_ms} ms", file=path)
    return TopicHeader(ends, tuple(marks), time_ms), position + _BATCH_ID.size


def _text(value: str) -> bytes:
    data = value.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"a sink or query id is at most {0x7FFF} bytes of UTF-8, not {len(data)}")
    return _SHORT.pack(len(data)) + data


def _decode_text(body: bytes, position: int, path: str) -> tuple[str, int]:
    length = _unpack(_SHORT, body, position, path, "a mark")[0]
    position += _SHORT.size
    if length < 0 or position + length > len(body):
        raise CorruptRecordError(f"a mark's id of {length} bytes runs past the commit's end", file=path)
    try:
        return body[position : position + length].decode(), position + length
    except UnicodeDecodeError:
        raise CorruptRecordError("a mark's id is not UTF-8", file=path, position=position) from None


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
