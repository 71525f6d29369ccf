"""An exactly-once sink's micro-batch on an object store: each task's batches staged in one object per topic, made
visible at once by one commit of the topic's chain that records the micro-batch (docs/object-storage.md).

A task's batches are validated as the log validates an append (timestamps, ``compression.type``; a LogAppendTime
topic's batches are marked so, and readers stamp them with the time of the commit that makes them visible),
numbered from 0 and written as one object below the chain's ``staged/``, under a name no other
task uses: one PUT, no race, no offsets yet. The driver's commit of the micro-batch is one commit of the chain
whose staged sections refer to the objects' byte ranges and take their offsets from the commit's place in the
chain (Kafka's batch CRC does not cover the base offset, so a reader renumbers them without rewriting a byte the
CRC covers), and whose header records the sink's mark (sink, query, micro-batch). The micro-batch becomes visible
with that one PUT, whole; a driver that runs the micro-batch again finds its mark in the chain's last commit and
commits nothing twice. Staged objects a commit refers to go with that commit, when a seal retires it.

A task's output for a topic of at most ``INLINE_BYTES`` is not staged: it rides to the driver in the task's
commit message, and the driver's commit holds it as ordinary sections, numbered and stamped there. A micro-batch
of small outputs (a stream's steady state) is then one PUT and one round trip of the store.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.io import Storage
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_writer import AppendInfo
from pysparklog.storage.objects.commit_log import Commit, CommitLog
from pysparklog.storage.objects.topic_commit import (
    STAGED_DIRECTORY,
    Section,
    SectionKind,
    SinkMark,
    StagedReference,
    TopicCommit,
    TopicHeader,
    chain_directory_name,
    decode_header,
)
from pysparklog.storage.records.arrow_records import EncodedBatches
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.records.memory_records import scan
from pysparklog.storage.validator import LogValidator, checked_batches, number_batches

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
#: A task's batches for a topic up to this size ride in its commit message and the driver's commit holds them.
INLINE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class StagedSection:
    """One partition's batches in a staged object: ``length`` bytes at ``position``, ``records`` offsets."""

    partition: int
    position: int
    length: int
    records: int


@dataclass(frozen=True, slots=True)
class StagedObject:
    """One task's batches for one topic, staged: picklable, carried to the driver in Spark's commit message. Batches
    of at most ``INLINE_BYTES`` ride in the message itself (``data``) rather than in an object, and the driver's
    commit holds them: a small micro-batch saves its tasks' PUTs and a round trip."""

    topic: str
    topic_id: str | None
    name: str
    sections: tuple[StagedSection, ...]
    data: bytes | None = None

    @property
    def inline(self) -> bool:
        return self.data is not None


class StagedWrites:
    """A task's batches, per topic and partition, until ``put`` stages them (a producer's ``stage``).

    Args:
        logs: The log directory, on an object store.
    """

    def __init__(self, logs: LogDirectory) -> None:
        self._logs = logs
        self._pieces: dict[str, dict[int, list[bytes]]] = {}
        self._records: dict[tuple[str, int], int] = {}

    def append(self, topic: str, partition: int, batches: EncodedBatches) -> AppendInfo:
        """Validate ``batches`` as the log validates an append and keep them, numbered after the partition's earlier
        ones here (offsets of the stage, from 0).

        Raises:
            InvalidTimestampError, RecordTooLargeError: As an append to the partition would.
        """
        config = self._logs.topics.config_provider(topic)()
        validator = LogValidator(config, topic, partition)
        piece = validator.validated(checked_batches(batches, config.max_message_bytes))
        buf = np.array(piece.buf, dtype=np.uint8)  # a copy to renumber and stamp
        entries = piece.entries
        first = self._records.get((topic, partition), 0)
        log_append_time = -1
        if config.message_timestamp_type == TimestampType.LOG_APPEND_TIME:  # the commit's time replaces it
            log_append_time = int(time.time() * 1000)
        next_offset = number_batches(buf, entries, first, log_append_time, stamp_all=True)
        self._pieces.setdefault(topic, {}).setdefault(partition, []).append(buf.tobytes())
        self._records[(topic, partition)] = next_offset
        max_timestamp = int(entries.max_timestamps.max()) if len(entries) else -1
        return AppendInfo(first, next_offset - 1, next_offset - first, log_append_time, max_timestamp)

    def put(self, name: str, *, inline_bytes: int = INLINE_BYTES) -> list[StagedObject]:
        """Write what was kept, one object per topic named ``name`` (made safe) below the topic's chain, or kept in
        the returned ``StagedObject`` when it is at most ``inline_bytes``; nothing for a task that kept nothing."""
        safe = _UNSAFE.sub("_", name)[:160] + "-" + uuid.uuid4().hex[:12]
        staged = []
        for topic, partitions in self._pieces.items():
            topic_id = self._logs.topics.known_topic_id(topic)
            sections, parts, position = [], [], 0
            for partition in sorted(partitions):
                data = b"".join(partitions[partition])
                sections.append(StagedSection(partition, position, len(data), self._records[(topic, partition)]))
                parts.append(data)
                position += len(data)
            whole = b"".join(parts)
            if len(whole) <= inline_bytes:
                staged.append(StagedObject(topic, topic_id, safe, tuple(sections), whole))
                continue
            self._logs.storage.put(staged_path(self._logs.storage, topic, topic_id, safe), whole)
            staged.append(StagedObject(topic, topic_id, safe, tuple(sections)))
        return staged


def staged_path(storage: Storage, topic: str, topic_id: str | None, name: str) -> str:
    return storage.join(f"{chain_directory_name(topic, topic_id)}/{STAGED_DIRECTORY}/{name}")


class _Committed(Exception):
    """The chain's end already records the micro-batch."""


def commit_staged(logs: LogDirectory, staged: Sequence[StagedObject], mark: SinkMark | None) -> bool:
    """Make staged objects of one topic visible with one commit of its chain, recording ``mark`` (a streaming sink's
    micro-batch; None for a one-off write); False, with the objects deleted, when the chain's end records the same
    query's micro-batch, or a later one, already.

    Raises:
        ValueError: The objects are of more than one topic.
        StorageConflictError: Other writers took every number the commit tried.
    """
    topics = {(obj.topic, obj.topic_id) for obj in staged}
    if len(topics) != 1:
        raise ValueError(f"a staged commit is of one topic's objects, not of {sorted(topics)}")
    ((topic, topic_id),) = topics
    chain = _chain(logs.storage, topic, topic_id)
    path = chain.path(0)

    def build(number: int, previous: Commit | None) -> bytes:
        header = decode_header(previous.body, path) if previous is not None else TopicHeader()
        if mark is not None and _committed(header, mark):
            raise _Committed
        now = int(time.time() * 1000)
        ends = {p: header.end(p).log_end_offset for p in {s.partition for obj in staged for s in obj.sections}}
        sections = []
        for obj in staged:
            for s in obj.sections:
                base = ends[s.partition]
                if obj.data is not None:  # carried inline: numbered (and stamped) here, as a reader would
                    batches = _numbered(obj.data[s.position : s.position + s.length], base, now, path)
                    sections.append(Section(s.partition, SectionKind.BATCHES, base, base + s.records, -1, batches))
                else:
                    reference = StagedReference(obj.name, s.position, s.length).encode()
                    sections.append(Section(s.partition, SectionKind.STAGED, base, base + s.records, -1, reference))
                ends[s.partition] = base + s.records
        return TopicCommit.following(header, sections, mark, time_ms=now).encode()

    try:
        chain.append(build, after=chain.known_latest() or chain.latest())
    except _Committed:
        delete_staged(logs.storage, staged)
        return False
    return True


def last_mark(logs: LogDirectory, topic: str, sink_id: str) -> SinkMark | None:
    """The sink's last committed micro-batch of ``topic``, from its chain's last commit (a probe, and a read of that
    commit when it is new to this process)."""
    topic_id = logs.topics.known_topic_id(topic)
    latest = _chain(logs.storage, topic, topic_id).latest()
    return None if latest is None else decode_header(latest.body, topic).mark(sink_id)


def delete_staged(storage: Storage, staged: Sequence[StagedObject]) -> None:
    """Delete staged objects no commit refers to (an aborted micro-batch's, or one committed already)."""
    storage.delete_all([staged_path(storage, obj.topic, obj.topic_id, obj.name) for obj in staged if not obj.inline])


def _numbered(data: bytes, first_offset: int, log_append_time: int, path: str) -> bytes:
    """Batches carried inline, given their offsets from ``first_offset`` and, LogAppendTime ones, the commit's time.

    Raises:
        CorruptRecordError: The bytes are not whole batches (a task's message damaged on its way).
    """
    buf = np.frombuffer(bytearray(data), dtype=np.uint8)
    entries = scan(buf, file=path)
    if not len(entries) or int(entries.positions[-1] + entries.sizes[-1]) != len(buf):
        raise CorruptRecordError(f"a task's inline batches of {len(buf)} bytes are not whole batches", file=path)
    number_batches(buf, entries, first_offset, log_append_time)
    return buf.tobytes()


def _committed(header: TopicHeader, mark: SinkMark) -> bool:
    found = header.mark(mark.sink_id)
    return found is not None and found.query_id == mark.query_id and found.batch_id >= mark.batch_id


def _chain(storage: Storage, topic: str, topic_id: str | None) -> CommitLog:
    directory = storage.join(chain_directory_name(topic, topic_id))
    return CommitLog.shared(storage, directory, topic_id) if topic_id else CommitLog(storage, directory)
