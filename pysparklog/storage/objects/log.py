"""A partition log on an object store: its topic's chain of commit objects is the log, and each process reads a
replica of it on its local disk (docs/object-storage.md).

An object store cannot append to a file, rename one or hold a lock, so a topic there is the sequence of its
commits (``CommitLog``, one chain per topic): an append is one commit object created only if absent, and the
commit it wins fixes its offsets. A commit's header gives every partition's log end after it and its sections
change some of them (``topic_commit``). Every process that opens a partition keeps a *replica* below its cache
directory: a local ``PartitionLog`` that holds exactly the partition's sections of commits ``0..n`` in order,
appended as Kafka's followers append (offsets and timestamps kept, producer state moved). The replica gives the
object-store log everything the filesystem engine has, unchanged: Kafka segments and indexes, lookups by offset
and time, the producers' state for idempotence and transactions, the last stable offset and the aborted
transactions of ``read_committed``. It is a cache: deleting it costs a replay of the commits, nothing else.

An append follows the commits (applying the ones it lacks: none to read when the last commit's header shows the
partition where the replica ends), validates and numbers its batches against the replica as a broker's leader
does (``PartitionLog.prepared_append``), and creates the next commit. When another writer wins that number, it
follows again and prepares again from the new log end (an idempotent retry may now be a repeat), so offsets stay
dense and every batch is checked against the state it lands on. Readers follow the commits before each read: one
probe of the next name, never a listing per read.

The replica records, in its ``commit.applied`` lock file, the last commit it holds and the log end offset after
it. Appending to the replica and recording it are two steps: a process that dies between them leaves the replica
one section ahead of its record, which the next follower recognises (the replica already ends where that
section ends) and records.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import queue
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pysparklog.errors import CorruptRecordError, InvalidOffsetError, PySparkLogError, StorageConflictError
from pysparklog.storage import checkpoints
from pysparklog.storage.config import LogConfig
from pysparklog.storage.io import FileSystemStorage, LockedRecord, Storage, read_if_exists, read_writable
from pysparklog.storage.log import DEFAULT_MAX_CHUNK_BYTES, PartitionLog, ReadRequest, arrow_pieces
from pysparklog.storage.log_reads import SegmentInfo
from pysparklog.storage.log_state import LogView
from pysparklog.storage.log_writer import AppendInfo
from pysparklog.storage.objects.commit_log import PROBE_BYTES, Commit, CommitLog
from pysparklog.storage.objects.sealing import SEALED, Manifest, Manifests, SealedSegment, TopicSeal, TopicSeals
from pysparklog.storage.objects.topic_commit import (
    NO_LOG_START,
    NO_TOPIC_ID,
    STAGED_DIRECTORY,
    CommitLayout,
    HeadTooShortError,
    PartitionEnd,
    Section,
    SectionKind,
    TopicCommit,
    TopicHeader,
    chain_directory_name,
    decode_ends,
    decode_header,
    end_of,
    header_size,
)
from pysparklog.storage.producer_state import SNAPSHOT_SUFFIX
from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches
from pysparklog.storage.records.memory_records import EntryTable, scan, verify_crcs
from pysparklog.storage.segment import LOG_SUFFIX, LogSegment, filename_prefix
from pysparklog.storage.segment_indexes import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from pysparklog.storage.transaction_index import READ_UNCOMMITTED, AbortedTxn
from pysparklog.storage.validator import Batches, checked_batches, number_batches

#: The environment variable naming the directory of the replicas (default: the user's cache directory).
CACHE_DIR_VARIABLE = "PYSPARKLOG_CACHE_DIR"
APPLIED_FILE = "commit.applied"
_APPLIED = struct.Struct(">qq")
#: How many commits a topic gathers before a writer seals them into segments.
SEAL_COMMITS = 1000
#: How many commits past its replica a follow must be behind to bisect their headers for the first that changes it.
_BISECT_FROM = 16
#: How many commits a replica far behind fetches at once.
_READ_AHEAD = 8
#: How many commits a read follows one at a time toward the offset it needs before it follows them all.
_FOLLOW_TO_STEPS = 4
#: How many partitions a topic's sealing seals at once.
_PARALLEL_SEALS = 8
#: The header entries a reader of one partition's end fetches at least: the first 256 partitions in one read.
_MIN_HEADER_ENTRIES = 256
#: The files of a sealed segment, as Kafka names them (a ``.txnindex`` only where a transaction aborted).
_SEALED_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
_OPTIONAL_SUFFIXES = (TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
_DOWNLOAD_CHUNK_BYTES = 8 * 1024 * 1024
_MAX_MANIFEST_RETRIES = 5


class CommitHead(NamedTuple):
    """A commit's number and the start of its body, which holds its header: as much of a commit as following to it
    takes (its sections are read where this partition has some)."""

    number: int
    body: bytes


class _Fetched(NamedTuple):
    """A commit fetched for a replica: its number, its time, and the replica's partition's sections in it."""

    number: int
    time_ms: int
    sections: list[Section]


class _Following:
    """``follow_to(end_offset, committed)``, a generator that pauses after each step that grows a replica, run on a
    thread of its own while the caller reads what the replica holds so far: ``wait`` returns once it grew again
    (True) or finished (False), and raises what it raised. Leaving the context stops it after its current step."""

    _FINISHED = object()

    def __init__(
        self, follow_to: Callable[[int, bool], Generator[None, None, None]], end_offset: int, committed: bool
    ) -> None:
        self._steps = follow_to(end_offset, committed)
        self._news: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pysparklog-follow", daemon=True)
        self._done = False

    def _run(self) -> None:
        try:
            with closing(self._steps) as steps:
                for _step in steps:
                    self._news.put(None)
                    if self._stop.is_set():
                        return
        except BaseException as error:  # handed to the reader, which raises it
            self._news.put(error)
        finally:
            self._news.put(self._FINISHED)

    def __enter__(self) -> _Following:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def wait(self) -> bool:
        """Whether the replica grew since the last call (False: the follow is over). Steps that came meanwhile are
        taken together.

        Raises:
            What the follow raised.
        """
        if self._done:
            return False
        news = [self._news.get()]
        while not self._news.empty():
            news.append(self._news.get())
        for item in news:
            if isinstance(item, BaseException):
                self._done = True
                raise item
        self._done = self._FINISHED in news
        return not self._done


class _OutOfStep(Exception):
    """The replica does not follow the commits from where its record says it is."""


class _Lost:
    """A partition's sealing lost its manifest's generation to other sealers every time it tried."""


_LOST = _Lost()


def cache_root(cache_dir: str | None = None) -> str:
    """Where replicas are kept: ``cache_dir``, else ``$PYSPARKLOG_CACHE_DIR``, else the user's cache directory."""
    if cache_dir:
        return cache_dir
    if os.environ.get(CACHE_DIR_VARIABLE):
        return os.environ[CACHE_DIR_VARIABLE]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pysparklog")


def replica_directory(root: str, cache_dir: str | None = None) -> str:
    """The local directory of the replicas of the log directory at ``root`` (one per root URL)."""
    digest = hashlib.sha256(root.encode()).hexdigest()[:24]
    return os.path.join(cache_root(cache_dir), digest)


class ObjectPartitionLog:
    """One partition of a log directory on an object store, read through a local replica.

    It *has* a local ``PartitionLog``, its replica, rather than being one: every read follows the commits into
    the replica first, every write is a commit, and the maintenance the engine runs (retention, the cleaner) is
    done the object store's way, so each method says what it does with the replica and nothing acts on the
    replica alone by inheritance.

    Args:
        storage: The log directory's object storage.
        topic: The topic.
        partition: The partition.
        config: The topic's configs (a callable is asked again at each append).
        cache_dir: The directory of the replicas (default: ``cache_root()``).
        seal_commits: A writer seals the commits after the last manifest once there are this many.
        topic_id: The topic's id, where the caller knows it (the topics' metadata); else read from the
            partition's ``partition.metadata``.
    """

    def __init__(
        self,
        storage: Storage,
        topic: str,
        partition: int,
        config: LogConfig | Callable[[], LogConfig] | None = None,
        *,
        cache_dir: str | None = None,
        seal_commits: int = SEAL_COMMITS,
        topic_id: str | None = None,
    ) -> None:
        remote_directory = storage.join(f"{topic}-{partition}")
        # A topic deleted and created again has a new id, so a replica of the old one is never taken for it.
        if topic_id is None:
            path = f"{remote_directory}/{checkpoints.PARTITION_METADATA}"
            topic_id = checkpoints.read_partition_metadata(storage, path)
        self._cache_dir = cache_dir
        replicas = os.path.join(replica_directory(storage.root, cache_dir), topic_id or NO_TOPIC_ID)
        self._config_source = config or LogConfig()
        # The replica asks this log for its configs, so that a follow asks the topic's metadata once.
        self._replica = PartitionLog(
            os.path.join(replicas, f"{topic}-{partition}"), self._config, checkpoint_dir=replicas
        )
        self.topic, self.partition = topic, partition
        self.directory = self._replica.directory
        self.checkpoint_dir = replicas
        self.remote = storage
        self.remote_directory = remote_directory
        self._topic_id = topic_id
        # The topic's chain, one object per process for each incarnation of the topic: its partitions' logs share
        # what it learns (the last commit, recent commits), so a writer of several partitions knows the chain's end.
        # One without an id (a topic made by appends) could be emptied and written again under the same name, which
        # only an object of its own finds out.
        self.chain_directory = storage.join(chain_directory_name(topic, topic_id))
        self._commits = (
            CommitLog.shared(storage, self.chain_directory, topic_id)
            if topic_id
            else CommitLog(storage, self.chain_directory)
        )
        self._seals = TopicSeals(storage, self.chain_directory)
        self._sealer_id = uuid.uuid4().hex  # names this object's scratch copies and sealed uploads
        self._manifests = Manifests(storage, self.remote_directory)
        self.seal_commits = seal_commits
        self._following_config: LogConfig | None = None  # the configs while following, asked once
        self._applied = self._replica.storage.lock(f"{self._replica.directory}/{APPLIED_FILE}")

    def __repr__(self) -> str:
        return f"ObjectPartitionLog({self.remote_directory!r})"

    @property
    def local(self) -> PartitionLog:
        """The replica: a filesystem partition log holding exactly the commits applied so far, as the last
        follow left it (``follow`` brings it up to the last commit)."""
        return self._replica

    def close(self) -> None:
        self._applied.close()
        self._replica.close()

    def __enter__(self) -> ObjectPartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- following the commits -----------------------------------------------------------------

    def follow(self) -> None:
        """Bring the replica up to the last commit."""
        last = self._last_head()
        with self._applied.exclusive() as record:
            self._apply_through(record, last)

    def _last_head(self) -> CommitHead | Commit | None:
        """The last commit as far as following to it needs (``_head_of``); None when there is none."""
        number = self._commits.last_number()
        return self._head_of(number) if number >= 0 else None

    def _head_of(self, number: int) -> CommitHead | Commit | None:
        """Commit ``number`` as far as following to it needs (its number and its header: the start of its body, not
        the sections of a large commit); the last commit whole when it was retired meanwhile; None when it does not
        exist."""
        head = self._commits.head(number, self._head_bytes)
        return CommitHead(number, head) if head is not None else self._commits.latest()

    @property
    def _head_bytes(self) -> int:
        """How much of a commit's body holds this partition's entry of its header."""
        return max(PROBE_BYTES, header_size(self.partition + 1))

    def _apply_through(self, record: LockedRecord, last: CommitHead | Commit | None) -> int:
        """Apply the commits after the replica's up to ``last`` (under the replica's lock); returns the log end.

        A replica out of step with its record (its files or the record damaged, a log directory emptied and
        written again under it) starts over: it is a cache of the commits. Only a replica that starts over
        and is still out of step means the commits themselves do not follow each other.

        Raises:
            CorruptRecordError: A commit is damaged, or the commits do not follow each other.
        """
        self._following_config = self.config
        try:
            return self._apply_commits(record, last)
        except _OutOfStep:
            self._start_over(record)
            try:
                return self._apply_commits(record, last)
            except _OutOfStep as error:
                raise CorruptRecordError(str(error), file=self.remote_directory) from None
        finally:
            self._following_config = None

    def _start_over(self, record: LockedRecord) -> None:
        """Empty the replica, to be filled again from the commits and the sealed segments."""
        self._replica.truncate_fully_and_start_at(0)
        record.write(_APPLIED.pack(-1, 0))

    def _apply_commits(self, record: LockedRecord, last: CommitHead | Commit | None) -> int:
        if (last.number if last is not None else -1) < _applied(record)[0]:
            raise _OutOfStep("the replica holds commits the log directory does not have")
        applied, end = self._reconciled(record)
        if last is None or last.number <= applied:
            return end
        if self._unchanged(last, end):
            record.write(_APPLIED.pack(last.number, end))
            return end
        if self._commits.head(applied + 1, PROBE_BYTES) is None:  # sealed, and deleted once a later seal covered it
            applied, end = self._apply_sealed(record, applied)
            if applied >= last.number:
                return end
            if self._unchanged(last, end):
                record.write(_APPLIED.pack(last.number, end))
                return end
        for fetched in self._sections_between(self._first_change(applied + 1, last, end), last.number):
            end, done = self._apply_fetched(record, fetched, last, end)
            if done:
                break
        return end

    def _apply_fetched(
        self, record: LockedRecord, fetched: _Fetched, last: CommitHead | Commit, end: int
    ) -> tuple[int, bool]:
        """Apply one fetched commit to a replica ending at ``end`` and record it (under the replica's lock); returns
        the log end after it, and whether the replica then holds this partition as ``last`` has it (the commits after
        this one up to ``last`` are other partitions', and are recorded as applied too).

        Raises:
            _OutOfStep: A section does not start where the replica ends.
        """
        number, time_ms, sections = fetched
        for section in sections:
            if section.base_offset != end:
                raise _OutOfStep(
                    f"commit {number} starts partition {self.partition} at offset {section.base_offset}, "
                    f"but the commits before it end it at {end}"
                )
            self._apply(section, time_ms)
            end = section.end_offset
        if self._unchanged(last, end):
            record.write(_APPLIED.pack(last.number, end))
            return end, True
        if sections:
            record.write(_APPLIED.pack(number, end))
        return end, False

    def _follow_in_steps(self) -> Generator[None, None, None]:
        """``follow``, with the replica's lock taken for each commit applied and released between them, pausing (a
        yield) after each commit that grew the replica: a reader far behind (the first read of a partition on a
        host) hands on the records of the commits applied while the next ones are still on their way, rather than
        after the last. The commits are fetched ahead as ``follow`` fetches them.

        Where the replica is not simply behind (another process of the host moved it meanwhile, it must start over,
        the commits it lacks were sealed), the rest is a ``follow`` under one lock.
        """
        last = self._last_head()
        with self._applied.exclusive() as record:
            try:
                applied, end = self._reconciled(record)
            except _OutOfStep:
                applied, end = -1, -1
            behind = (
                end >= 0
                and last is not None
                and last.number > applied
                and not self._unchanged(last, end)
                and self._commits.head(applied + 1, PROBE_BYTES) is not None
            )
            first = self._first_change(applied + 1, last, end) if behind and last is not None else 0
            state = _applied(record)
        if behind and last is not None:
            config = self.config
            with closing(self._sections_between(first, last.number)) as commits:
                for fetched in commits:
                    with self._applied.exclusive() as record:
                        if _applied(record) != state:  # another process of the host moved the replica meanwhile
                            break
                        self._following_config = config
                        try:
                            end, done = self._apply_fetched(record, fetched, last, end)
                        except _OutOfStep:
                            break
                        finally:
                            self._following_config = None
                        state = _applied(record)
                    if done:
                        return
                    if fetched.sections:
                        yield
        with self._applied.exclusive() as record:
            self._apply_through(record, last)

    def _first_change(self, first: int, last: CommitHead | Commit, end: int) -> int:
        """The first of commits ``first`` to ``last`` that changes this partition, whose replica ends at ``end`` (and
        ``last`` changes it): found by bisecting their headers, as a partition's end and log start only grow. A
        replica of a quiet partition of a busy topic skips the others' commits with a few header reads, not one
        each; where that saves nothing (a short stretch), ``first``."""
        low, high = first, last.number
        if high - low < _BISECT_FROM:
            return low
        while low < high:
            middle = (low + high) // 2
            head = self._commits.head(middle, self._head_bytes)
            if head is None:  # retired meanwhile: follow them in order
                return first
            if self._unchanged(CommitHead(middle, head), end):
                low = middle + 1
            else:
                high = middle
        return low

    def _sections_between(self, first: int, last: int) -> Generator[_Fetched, None, None]:
        """This partition's sections of commits ``first`` to ``last``, in order, with each commit's time: up to
        ``_READ_AHEAD`` fetched at once ahead of the one applied, so a replica far behind waits for the store's latency
        once, not once per commit.

        Raises:
            CorruptRecordError: A commit is missing (commit ``last`` exists), or damaged.
        """
        numbers = iter(range(first, last + 1))
        with ThreadPoolExecutor(max_workers=_READ_AHEAD) as pool:
            # A sliding window: the next commits are fetched while the caller applies this one.
            pending = deque((n, pool.submit(self._sections_in, n)) for n in itertools.islice(numbers, _READ_AHEAD))
            while pending:
                number, future = pending.popleft()
                following = next(numbers, None)
                if following is not None:
                    pending.append((following, pool.submit(self._sections_in, following)))
                found = future.result()
                if found is None:
                    raise CorruptRecordError(
                        f"commit {number} is missing, but commit {last} exists", file=self._commits.path(number)
                    )
                yield _Fetched(number, *found)

    def _sections_in(self, number: int) -> tuple[int, list[Section]] | None:
        """Commit ``number``'s time and this partition's sections (None: the commit does not exist): the commit read
        whole when it is small, else its header and section table, then only this partition's sections' bytes with
        a ranged GET each. A reader of one partition of a busy topic downloads that partition's records, not the
        topic's.

        Raises:
            CorruptRecordError: The commit is damaged.
        """
        path = self._commits.path(number)
        size = PROBE_BYTES
        while (commit := self._commits.kept(number)) is None:
            head = self._commits.head(number, size)
            if head is None:
                return None
            if self._commits.kept(number) is not None:
                continue  # it was small: now held whole
            try:
                layout = CommitLayout.decode(head, path)
            except HeadTooShortError as short:
                if short.needed <= size:
                    raise CorruptRecordError("a commit's header and section table do not add up", file=path) from None
                size = short.needed
                continue
            sections = []
            for entry in layout.entries:
                if entry.partition != self.partition:
                    continue
                data = self._commits.body_range(number, entry.position, entry.size) if entry.size else b""
                if data is None:
                    return None
                if len(data) != entry.size:
                    raise CorruptRecordError(f"a section of {entry.size} bytes runs past its commit's end", file=path)
                section = entry.section(data)
                if entry.kind == SectionKind.STAGED:
                    section.reference(path)
                sections.append(section)
            return layout.header.time_ms, sections
        decoded = TopicCommit.decode(commit.body, path)
        return decoded.header.time_ms, decoded.sections_of(self.partition)

    def _unchanged(self, commit: CommitHead | Commit, end: int) -> bool:
        """Whether ``commit``'s header shows this partition where a replica ending at ``end`` is: then no commit
        up to it changed the partition (log ends and log starts only grow), and the replica holds it as it is."""
        mine = self._end_in(commit)
        return mine.log_end_offset == end and mine.log_start_offset <= self._replica.view().log_start_offset

    def _end_in(self, commit: CommitHead | Commit) -> PartitionEnd:
        """This partition's end after ``commit``, from its header (the start of its body holds it)."""
        return end_of(commit.body, self.partition, self._commits.path(commit.number))

    def _apply_sealed(self, record: LockedRecord, applied: int) -> tuple[int, int]:
        """Start the replica over from the last manifest's sealed segments, downloaded (the commits after
        ``applied`` are gone: sealed, and deleted once a later seal covered them), as a Kafka follower that fell
        too far behind starts over from the leader's log. Sealed segments are downloaded whole, not appended batch
        by batch: compaction leaves gaps between offsets, which only the segments keep.

        A topic's sealing seals every partition changed since its own last manifest before the seal is recorded,
        so a partition whose last manifest is older than the last seal was as that manifest has it at the seal's
        commit. Returns the last commit the replica then holds and its log end."""
        for _attempt in range(_MAX_MANIFEST_RETRIES):
            manifest = self._manifests.latest()
            seal = self._seals.latest()
            covered = max(manifest.commit if manifest is not None else -1, seal.commit if seal is not None else -1)
            if covered <= applied:
                raise CorruptRecordError(
                    f"commit {applied + 1} of {self.chain_directory} is missing and no seal covers it",
                    file=self._commits.path(applied + 1),
                )
            if manifest is None:  # never sealed: it had nothing when the topic was sealed
                if self._replica.view().log_end_offset:
                    raise _OutOfStep(f"the replica holds records of {self.remote_directory}, which has none sealed")
                record.write(_APPLIED.pack(covered, 0))
                return covered, 0
            if self._replica.view().log_end_offset != manifest.end_offset:
                try:
                    self._download_sealed(manifest, self._replica)
                except FileNotFoundError:
                    continue  # a newer manifest replaced those segments (compaction, retention) meanwhile
            if manifest.log_start_offset > self._replica.view().log_start_offset:
                self._apply_log_start(manifest.log_start_offset)
            record.write(_APPLIED.pack(covered, manifest.end_offset))
            return covered, manifest.end_offset
        raise CorruptRecordError(
            f"the sealed segments of {self.remote_directory} kept changing under a replica starting over",
            file=self._manifests.path(0),
        )

    def _download_sealed(self, manifest: Manifest, log: PartitionLog) -> None:
        """Make ``log`` (a replica, or a cleaner's scratch copy) the manifest's sealed segments: emptied, the
        segments' files downloaded into it, an empty segment at the manifest's end, then recovered.

        Raises:
            FileNotFoundError: A segment's object is gone.
            CorruptRecordError: The files do not end at the manifest's end offset.
        """
        segments = manifest.segments
        first = segments[0] if segments else None
        start = first.base_offset if first is not None else manifest.end_offset
        log.truncate_fully_and_start_at(start, self._manifests.snapshot(manifest, first))
        for segment in segments:
            for suffix in _SEALED_SUFFIXES:
                target = f"{log.directory}/{filename_prefix(segment.base_offset)}{suffix}"
                _copy(self.remote, segment.path(self.remote_directory, suffix), log.storage, target, suffix)
        end_prefix = f"{log.directory}/{filename_prefix(manifest.end_offset)}"
        if first is not None:
            log.storage.put(f"{end_prefix}{LOG_SUFFIX}", b"")
            snapshot = self._manifests.snapshot(manifest)
            if snapshot is not None:
                log.storage.put(f"{end_prefix}{SNAPSHOT_SUFFIX}", snapshot)
        log.recover()
        if log.view().log_end_offset != manifest.end_offset:
            raise CorruptRecordError(
                f"the sealed segments of manifest {manifest.generation} end at "
                f"{log.view().log_end_offset}, not at its end offset {manifest.end_offset}",
                file=self._manifests.path(manifest.generation),
            )

    def _reconciled(self, record: LockedRecord) -> tuple[int, int]:
        """The last commit the replica holds and its log end, checked against the replica's own log end.

        A replica one commit ahead of its record (its process died between the two) is recognised when
        that commit is applied; one behind it (a machine crash lost what was not fsynced) goes back to
        the last commit it holds whole.
        """
        applied, end = _applied(record)
        replica_end = self._replica.view().log_end_offset
        if replica_end >= end:
            return applied, end
        number = applied
        while number >= 0:
            commit = self._commits.read(number)
            if commit is None:
                break
            commit_end = self._end_in(commit).log_end_offset
            if commit_end <= replica_end:
                if commit_end == replica_end:
                    record.write(_APPLIED.pack(number, replica_end))
                    return number, replica_end
                break
            number -= 1
        raise _OutOfStep(f"the replica ends at offset {replica_end}, inside a commit")

    def _apply(self, body: Section, time_ms: int) -> None:
        """Append one section of a commit made at ``time_ms`` to the replica (nothing when the replica already ends
        where it ends)."""
        if body.kind == SectionKind.LOG_START:
            self._apply_log_start(body.log_start_offset)
            return
        if body.end_offset == body.base_offset:
            return
        replica_end = self._replica.view().log_end_offset
        if replica_end == body.end_offset:
            return  # applied by a process that died before recording it
        source = self._commits.directory
        if body.kind == SectionKind.STAGED:
            source = self._staged_path(body)
            buf, entries = self._staged_batches(body, source, time_ms)
        else:
            buf = _writable(body.data)
            entries = scan(buf, file=source)
            verify_crcs(buf, entries, file=source)
        whole = len(entries) and int(entries.positions[-1] + entries.sizes[-1]) == len(buf)
        if not whole or int(entries.last_offsets[-1]) + 1 != body.end_offset:
            found = int(entries.last_offsets[-1]) + 1 if len(entries) else body.base_offset
            raise CorruptRecordError(
                f"a section's {len(buf)} bytes hold batches to offset {found} ({len(entries)} whole ones), its header "
                f"says to {body.end_offset}",
                file=source,
            )
        try:
            self._replica.append_replica(Batches(buf, entries), body.base_offset)
        except InvalidOffsetError as error:
            raise _OutOfStep(str(error)) from None

    def _staged_path(self, section: Section) -> str:
        return f"{self.chain_directory}/{STAGED_DIRECTORY}/{section.reference(self._commits.path(0)).name}"

    def _staged_batches(self, section: Section, staged: str, time_ms: int) -> tuple[np.ndarray, EntryTable]:
        """A staged section's batches, read from their staged object with one ranged GET and given the section's
        offsets (numbered from 0 when staged: Kafka's batch CRC does not cover the base offset); those of a
        LogAppendTime topic are stamped with the commit's time, ``time_ms``, as every reader stamps them.

        Raises:
            _OutOfStep: The staged object is gone (retired with its commit by a seal meanwhile).
            CorruptRecordError: The range holds no whole batches, or batches of a producer id (a sink stages none).
        """
        reference = section.reference(staged)
        try:
            data = read_writable(self.remote, staged, reference.position, reference.length)
        except FileNotFoundError:
            raise _OutOfStep(f"the staged object {staged} is gone") from None
        if len(data) != reference.length:
            raise CorruptRecordError(
                f"the staged object holds {len(data)} bytes at {reference.position}, not {reference.length}",
                file=staged,
            )
        buf = _writable(data)
        entries = scan(buf, file=staged)
        verify_crcs(buf, entries, file=staged)
        if entries.has_producers:
            raise CorruptRecordError("a staged section holds batches of a producer id", file=staged)
        number_batches(buf, entries, section.base_offset, time_ms)
        return buf, scan(buf, file=staged)

    def _apply_log_start(self, offset: int) -> None:
        """Raise the replica's log start and retire its segments wholly below it, as retention would."""
        self._replica.raise_log_start_offset(offset)
        bases = list(self._replica.view().segment_bases)
        below = [base for base, following in zip(bases, bases[1:], strict=False) if following <= offset]
        if below:
            self._replica.delete_segments(below)

    # -- reading: the replica, once it has followed -------------------------------------------------

    def view(self) -> LogView:
        """The replica's view once it has followed the commits (``PartitionLog.view``)."""
        self.follow()
        return self._replica.view()

    def segments(self) -> list[LogSegment]:
        """The replica's segments once it has followed the commits."""
        return [self._replica.segment(base) for base in self.view().segment_bases]

    def segment(self, base: int) -> LogSegment:
        """The replica's segment at ``base``, as the last follow left it."""
        return self._replica.segment(base)

    @property
    def log_start_offset(self) -> int:
        """The log start offset, from the last commit's header (``ends_in_last_commit``)."""
        return self.ends_in_last_commit().log_start_offset

    def offsets(self) -> tuple[int, int]:
        """The log start offset and the log end offset, from the last commit's header (``ends_in_last_commit``)."""
        end = self.ends_in_last_commit()
        return end.log_start_offset, end.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset once the replica has followed (``PartitionLog.last_stable_offset``)."""
        return self._replica.last_stable(self.view())

    def read_arrow(
        self,
        start_offset: int | None = None,
        end_offset: int | None = None,
        *,
        include_headers: bool = False,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        isolation_level: str = READ_UNCOMMITTED,
    ) -> Iterator[pa.RecordBatch]:
        """The replica's ``read_arrow``, once it has followed the commits as far as the read needs.

        Raises:
            The errors of ``PartitionLog.read_arrow``.
        """
        request = ReadRequest.checked(start_offset, end_offset, include_headers, max_chunk_bytes, isolation_level)
        return self._followed_read(request)

    def _followed_read(self, request: ReadRequest) -> Iterator[pa.RecordBatch]:
        if request.end_offset is None:
            self.follow()
        elif not self._holds(request.end_offset, request.committed):
            yield from self._read_while_following(request, request.end_offset)
            return
        yield from self._replica.read_checked(request)

    def _read_while_following(self, request: ReadRequest, end_offset: int) -> Iterator[pa.RecordBatch]:
        """A read of a range the replica does not hold yet: ``_follow_to`` runs on a thread of its own, and each time
        it has grown the replica the part of the range the replica holds is read here. The records of a replica far
        behind (a partition's first read on a host) thus reach the reader (a Spark task decoding them, its JVM
        consuming them) while the next commits are fetched and written to the replica, not after the last. A read
        from the log start waits for the whole follow, as the log start may still rise.

        Raises:
            The errors of ``follow`` and of ``PartitionLog.read_arrow``.
        """
        position = request.start_offset
        with _Following(self._follow_to, end_offset, request.committed) as following:
            while following.wait():
                if position is None:
                    continue
                upto = min(self._replica.view().log_end_offset, end_offset)
                if position >= upto:
                    continue
                for batch in self._replica.read_checked(request._replace(start_offset=position, end_offset=upto)):
                    position = int(batch.column("offset")[-1].as_py()) + 1
                    yield batch
                if position >= end_offset:
                    return
        yield from self._replica.read_checked(request._replace(start_offset=position))

    def _follow_to(self, end_offset: int, committed: bool) -> Generator[None, None, None]:
        """Bring the replica far enough to hold ``end_offset``, pausing (a yield, the replica's lock released) after
        each step that grew it: the commits after the last one this process knows of, read one at a time, stopping
        at the first that gets it there (a Spark task reading the range its driver planned reads the new commit, and
        does not probe past it); past a few, a full follow in steps (``_follow_in_steps``)."""
        for _step in range(_FOLLOW_TO_STEPS):
            with self._applied.exclusive() as record:
                # Past what this process knows of the chain and what the replica holds (another process of the host
                # may have brought it further).
                known = max(self._commits.known_number, _applied(record)[0])
                head = self._commits.head(known + 1, self._head_bytes) if known >= 0 else None
                if head is not None:
                    self._apply_through(record, CommitHead(known + 1, head))
            if head is None:
                break
            if self._holds(end_offset, committed):
                return
            yield
        yield from self._follow_in_steps()

    def _holds(self, end_offset: int, committed: bool) -> bool:
        """Whether the replica already holds every record below ``end_offset`` (stable ones, for ``committed``):
        then a read up to it needs no request, as a Spark task reading a range its driver planned on a host
        whose replica followed that far. The replica holds exactly the commits up to one, so what it holds
        below its end cannot change (retention aside, which a read then finds out of range)."""
        view = self._replica.view()
        return end_offset <= (self._replica.last_stable(view) if committed else view.log_end_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """Kafka's ListOffsets, on the replica once it has followed (``PartitionLog.offset_for_timestamp``)."""
        self.follow()
        return self._replica.offset_for_timestamp(timestamp)

    @property
    def log_end_offset(self) -> int:
        """The log end offset, from the last commit's header, without following the commits: all a Spark driver
        planning offset ranges needs (its executors' replicas then follow them as they read)."""
        return self.ends_in_last_commit().log_end_offset

    def ends_in_last_commit(self) -> PartitionEnd:
        """The partition's log end and log start from the last commit's header: a probe past the last commit this
        process knows of, and a ranged read of the header when the probe found a new one."""
        return self.topic_ends([self.partition])[self.partition]

    def topic_ends(self, partitions: Iterable[int]) -> dict[int, PartitionEnd]:
        """The log end and log start of ``partitions`` of the topic (this one's or others), from the last commit's
        header: what a Spark driver planning every partition of the topic asks, with one probe of its chain."""
        wanted = sorted(set(partitions))
        size = header_size(max(wanted[-1] + 1 if wanted else 0, _MIN_HEADER_ENTRIES))
        for _attempt in range(_MAX_MANIFEST_RETRIES):
            number = self._commits.last_number()
            if number < 0:
                return dict.fromkeys(wanted, PartitionEnd(0, 0))
            head = self._commits.body_prefix(number, size)
            if head is not None:
                return {p: end_of(head, p, self._commits.path(number)) for p in wanted}
            # Retired meanwhile (a newer commit exists): the next look lists the chain.
        raise CorruptRecordError(
            "the last commit kept going before its header could be read", file=self.chain_directory
        )

    @property
    def config(self) -> LogConfig:
        """The configs in force, asked once per follow (each ask reads the topic's metadata objects)."""
        return self._config()

    def _config(self) -> LogConfig:
        if self._following_config is not None:
            return self._following_config
        source = self._config_source
        return source() if callable(source) else source

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The replica's aborted transactions once it has followed (``PartitionLog.aborted_transactions``)."""
        self.follow()
        return self._replica.aborted_transactions(start_offset, end_offset)

    @property
    def topic_id(self) -> str | None:
        return self._topic_id

    # -- writing: a commit per append --------------------------------------------------------------

    def append_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        settings: BatchSettings | None = None,
        *,
        expected_end_offset: int | None = None,
    ) -> AppendInfo:
        """Encode Arrow rows and append them as one commit (``PartitionLog.append_arrow`` has the rules). The
        log end ``expected_end_offset`` is checked against the replica brought up to the commit the new one
        follows, again each time the create of the next commit loses a race, so it holds at the chain's end."""
        return self._append_all(arrow_pieces(data, settings, self.config.max_message_bytes), expected_end_offset)

    def append(self, batches: EncodedBatches | bytes | bytearray | memoryview) -> AppendInfo:
        """Append complete v2 record batches as one commit (``PartitionLog.append`` has the rules)."""
        return self._append_all([checked_batches(batches, self.config.max_message_bytes)])

    def _append_all(self, pieces: Sequence[Batches], expected_end_offset: int | None = None) -> AppendInfo:
        """Commit the checked pieces as one append, then apply the commit to the replica (``append_together``);
        only if the partition ends at ``expected_end_offset``, when given.

        Raises:
            PySparkLogError: The log refused the batches (``PartitionLog.append`` has the errors).
        """
        (outcome,) = append_together([(self, pieces)], expected_end_offsets=[expected_end_offset])
        if isinstance(outcome, PySparkLogError):
            raise outcome
        return outcome

    def _following(self, previous: Commit | None, sections: Sequence[Section]) -> bytes:
        """The body of the commit of ``sections`` after ``previous``.

        Raises:
            CorruptRecordError: A section does not start where ``previous``'s header has its partition end (the
                replica, brought up to ``previous``, disagrees with the chain).
        """
        header = decode_header(previous.body, self._commits.path(previous.number)) if previous else TopicHeader()
        try:
            return TopicCommit.following(header, sections, time_ms=int(time.time() * 1000)).encode()
        except ValueError as error:
            raise CorruptRecordError(str(error), file=self.chain_directory) from None

    def _seal_when_due(self, number: int) -> None:
        """Seal the topic once ``seal_commits`` commits follow the last seal this process knows of (and still do
        once it has looked for a newer one)."""
        if number - self._seal_covers >= self.seal_commits:
            self._seals.latest()  # another process may have sealed them
            if number - self._seal_covers >= self.seal_commits:
                self.seal()

    def flush(self) -> None:
        """Nothing to do: an append is durable when its commit is written."""

    # -- maintenance: retention and the cleaner, the object store's way -------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        """The replica's segments once it has followed: what retention decides on (its deletions are commits,
        ``delete_segments``)."""
        self.follow()
        return self._replica.segment_infos()

    def roll(self) -> bool:
        """Roll the replica's active segment, as retention does before retiring every segment: the log start
        then moves past it by a commit (``delete_segments``)."""
        return self._replica.roll()

    def remove_deleted_files(self, now_ms: int | None = None) -> int:
        """Remove the replica's retired files (an object store's own are deleted when a manifest retires them)."""
        return self._replica.remove_deleted_files(now_ms)

    # -- sealing ------------------------------------------------------------------------------------

    @property
    def _seal_covers(self) -> int:
        """The last commit the last seal of the topic this object knows of covers (-1: none)."""
        known = self._seals.known
        return known.commit if known is not None else -1

    def seal(self) -> Manifest | None:
        """Seal the topic (``sealing``): every partition changed since its own last manifest gets its commits'
        sections sealed into Kafka segments under a new manifest; then the seal is recorded, created only if
        absent, and the commits the seal before it covered are deleted. Returns this partition's new manifest;
        None when it had nothing new, or when another sealer sealed first.
        """
        previous_seal = self._seals.latest()
        latest = self._commits.latest()
        if latest is None or (previous_seal is not None and latest.number <= previous_seal.commit):
            return None
        ends = decode_ends(latest.body, self._commits.path(latest.number))

        def seal_one(partition: int) -> Manifest | None | _Lost:
            if partition == self.partition:
                return self._seal_partition(latest, ends[partition])
            with self._sibling(partition) as log:
                return log._seal_partition(latest, ends[partition])

        with ThreadPoolExecutor(max_workers=_PARALLEL_SEALS) as pool:
            sealed = list(pool.map(seal_one, range(len(ends))))
        mine = sealed[self.partition] if self.partition < len(sealed) else None
        if any(isinstance(result, _Lost) for result in sealed):
            return None  # a partition could not be sealed through the commit: no seal may claim it
        first = previous_seal.commit + 1 if previous_seal is not None else 0
        seal = TopicSeal(
            previous_seal.generation + 1 if previous_seal is not None else 0,
            first,
            latest.number,
            self._staged_names(first, latest.number),
        )
        if self._seals.create(seal) and previous_seal is not None:
            self._retire_commits(previous_seal, seal.commit)
        return mine if isinstance(mine, Manifest) else None

    def _sibling(self, partition: int) -> ObjectPartitionLog:
        """Another partition of the topic, read through this process's replicas and the same chain object."""
        return ObjectPartitionLog(
            self.remote,
            self.topic,
            partition,
            self._config_source,
            cache_dir=self._cache_dir,
            seal_commits=self.seal_commits,
            topic_id=self._topic_id,
        )

    def _retire_commits(self, covered: TopicSeal, keep: int) -> None:
        """Delete the commits the seal ``covered`` covered but commit ``keep`` and those after it: a seal retires
        the commits of the seal before it (one seal late, so that a reader in the middle of them finishes), and
        the chain's last commit is always there to be found."""
        numbers = range(covered.first_commit, min(covered.commit + 1, keep))
        staged = [
            f"{self.chain_directory}/{STAGED_DIRECTORY}/{name}" for number, name in covered.staged if number in numbers
        ]
        self.remote.delete_all([self._commits.path(number) for number in numbers] + staged)

    def _staged_names(self, first: int, last: int) -> tuple[tuple[int, str], ...]:
        """The staged objects commits ``first`` to ``last`` refer to, (commit, name) pairs: those a seal's commits
        take with them when they go. The commits were just read by the sealing (this process keeps them)."""
        names: dict[tuple[int, str], None] = {}
        for number in range(first, last + 1):
            commit = self._commits.read(number)
            if commit is None:
                continue  # retired by a compaction meanwhile, its staged objects with it
            for section in TopicCommit.decode(commit.body, self._commits.path(number)).sections:
                if section.kind == SectionKind.STAGED:
                    names[(number, section.reference(self._commits.path(number)).name)] = None
        return tuple(names)

    def _seal_partition(self, latest: Commit, end: PartitionEnd) -> Manifest | None | _Lost:
        """Seal this partition's sections up to commit ``latest`` under a new manifest, unless its last manifest
        has it as ``latest``'s header does (``end``); None then, ``_LOST`` when other sealers kept taking the
        generation.

        The segments are built by a scratch replica primed at the last manifest's end, so that they are
        exactly what the engine writes, and follow the sealed ones whatever this process's replica rolled.
        """
        for _attempt in range(_MAX_MANIFEST_RETRIES):
            previous = self._manifests.latest()
            if previous is not None and previous.commit >= latest.number:
                return None  # another sealer sealed it this far
            sealed_end = (previous.end_offset, previous.log_start_offset) if previous is not None else (0, 0)
            if sealed_end == (end.log_end_offset, end.log_start_offset):
                return None  # unchanged since its last manifest
            manifest = self._seal_from(previous, latest, end)
            if manifest is not None:
                if previous is not None:
                    self._retire(previous, manifest)
                return manifest
        return _LOST

    def _seal_from(self, previous: Manifest | None, latest: Commit, end: PartitionEnd) -> Manifest | None:
        """The partition sealed from ``previous`` through ``latest`` under the next manifest; None when another
        sealer created that manifest first."""
        generation = previous.generation + 1 if previous is not None else 0
        scratch_root = f"{self.checkpoint_dir}/sealing-{self._sealer_id}"
        scratch = ObjectPartitionLog(
            self.remote, self.topic, self.partition, self.config, cache_dir=scratch_root, topic_id=self._topic_id
        )
        try:
            if previous is not None:
                scratch._replica.truncate_fully_and_start_at(previous.end_offset, self._manifests.snapshot(previous))
            with scratch._applied.exclusive() as record:
                if previous is not None:
                    record.write(_APPLIED.pack(previous.commit, previous.end_offset))
                sealed_end = scratch._apply_through(record, latest)
            if sealed_end != end.log_end_offset:
                raise CorruptRecordError(
                    f"the sections of {self.remote_directory} end at {sealed_end}, commit {latest.number}'s header "
                    f"at {end.log_end_offset}",
                    file=self._commits.path(latest.number),
                )
            scratch._replica.roll()
            log_start = max(end.log_start_offset, previous.log_start_offset if previous is not None else 0)
            earlier = previous.segments if previous is not None else ()
            return self._publish(
                scratch._replica,
                generation,
                sealed_end,
                lambda snapshot, segments: Manifest(
                    generation,
                    previous.commit + 1 if previous is not None else 0,
                    latest.number,
                    sealed_end,
                    log_start,
                    snapshot,
                    tuple(s for s in (*earlier, *segments) if s.end_offset > log_start),
                    previous.cleaned_through if previous is not None else 0,
                ),
            )
        finally:
            scratch.close()
            scratch._replica.storage.delete_tree(scratch_root)

    def _publish(
        self,
        scratch: PartitionLog,
        generation: int,
        end: int,
        manifest_of: Callable[[str, list[SealedSegment]], Manifest],
    ) -> Manifest | None:
        """Upload the scratch replica's segments (all but its empty last one) below the generation's own sealed
        directory, then create ``manifest_of(snapshot path, segments)`` if absent; None, with the uploads deleted,
        when another process created that generation first."""
        sealed_dir = f"{SEALED}/{generation}-{self._sealer_id}"
        bases = list(scratch.view().segment_bases)
        segments = [SealedSegment(b, e, sealed_dir) for b, e in zip(bases, bases[1:], strict=False)]
        uploaded = self._upload(scratch, sealed_dir, segments, end)
        manifest = manifest_of(f"{sealed_dir}/{filename_prefix(end)}{SNAPSHOT_SUFFIX}", segments)
        if not self._manifests.create(manifest):
            for path in uploaded:
                self.remote.delete(path)
            return None
        return manifest

    def _upload(self, scratch: PartitionLog, sealed_dir: str, segments: list[SealedSegment], end: int) -> list[str]:
        """Put the scratch replica's files of ``segments`` and its producer snapshot at ``end``; returns the paths."""
        uploaded = []
        local = [(segment.base_offset, suffix) for segment in segments for suffix in _SEALED_SUFFIXES]
        for offset, suffix in [*local, (end, SNAPSHOT_SUFFIX)]:
            name = filename_prefix(offset) + suffix
            data = read_if_exists(scratch.storage, f"{scratch.directory}/{name}")
            if data is None:
                continue  # no .txnindex without an abort; no snapshot where no producer wrote
            path = f"{self.remote_directory}/{sealed_dir}/{name}"
            self.remote.put(path, data)
            uploaded.append(path)
        return uploaded

    def _retire(self, previous: Manifest, manifest: Manifest) -> None:
        """Delete the sealed segments ``manifest`` no longer lists that ``previous`` did (retention or compaction
        replaced them); the topic's seal deletes the commits (``_retire_commits``)."""
        kept = {(s.directory, s.base_offset) for s in manifest.segments}
        for segment in previous.segments:
            if (segment.directory, segment.base_offset) not in kept:
                for suffix in _SEALED_SUFFIXES:
                    self.remote.delete(segment.path(self.remote_directory, suffix))

    def raise_log_start_offset(self, offset: int) -> int:
        """Kafka's DeleteRecords, as a commit every replica applies; returns the log start.

        Raises:
            InvalidOffsetError: ``offset`` is not an integer, or negative or past the log end.
        """
        if isinstance(offset, bool) or not isinstance(offset, int | np.integer):
            raise InvalidOffsetError(
                f"offset {offset!r} is not valid; accepted: an offset (integer) from 0 to the log end"
            )
        offset = int(offset)
        with self._applied.exclusive() as record:
            latest = self._commits.latest()
            end = self._apply_through(record, latest)
            start = self._replica.view().log_start_offset
            if not 0 <= offset <= end:
                raise InvalidOffsetError(
                    f"cannot delete records of {self.topic}-{self.partition} below offset {offset}: accepted 0 to "
                    f"the log end {end}"
                )
            if offset <= start:
                return start
            following = latest.number if latest is not None else -1

            def build(number: int, previous: Commit | None) -> bytes:
                nonlocal end, following
                if previous is not None and previous.number != following:
                    end = self._apply_through(record, previous)
                    following = previous.number
                return self._following(
                    previous, [Section(self.partition, SectionKind.LOG_START, end, end, min(offset, end))]
                )

            commit = self._commits.append(build, after=latest)
            self._apply_log_start(min(offset, end))
            record.write(_APPLIED.pack(commit.number, end))
            return self._replica.view().log_start_offset

    def delete_segments(self, bases: Sequence[int]) -> int:
        """Retention on an object store: the log start moves past ``bases`` by a commit, and every replica
        retires the segments below it."""
        segment_bases = list(self._replica.view().segment_bases)
        if list(bases) != segment_bases[: len(bases)] or len(bases) >= len(segment_bases):
            raise InvalidOffsetError(
                f"segments {list(bases)} of {self.topic}-{self.partition} are not its oldest inactive segments"
            )
        return self.raise_log_start_offset(segment_bases[len(bases)])

    @contextmanager
    def compaction_scope(self) -> Iterator[PartitionLog]:
        """The log cleaner compacts the sealed segments (the commits are sealed first): in a scratch copy of
        the last manifest's, downloaded, whose result is sealed under the next manifest, created only if
        absent. This host's replica then takes the compacted segments; other hosts' replicas keep what they
        hold until they start over (a compacted topic promises the latest value of each key, never the
        absence of older ones).

        Raises:
            StorageConflictError: Another process sealed or compacted the log during the round; nothing of the
                round is kept.
        """
        self.seal()
        manifest = self._manifests.latest()
        scratch_root = f"{self.checkpoint_dir}/compacting-{self._sealer_id}"
        scratch = PartitionLog(
            f"{scratch_root}/{self.topic}-{self.partition}", self.config, checkpoint_dir=scratch_root
        )
        cleaner_checkpoint = f"{scratch_root}/{checkpoints.CLEANER_OFFSET_CHECKPOINT}"
        tp = (self.topic, self.partition)
        try:
            if manifest is None or not manifest.segments:
                yield scratch  # nothing sealed: nothing to compact
                return
            self._download_sealed(manifest, scratch)
            checkpoints.write_offset_checkpoint(scratch.storage, cleaner_checkpoint, {tp: manifest.cleaned_through})
            before = scratch.segment_infos()
            yield scratch
            if scratch.segment_infos() != before:
                cleaned = checkpoints.read_offset_checkpoint(scratch.storage, cleaner_checkpoint).get(tp, 0)
                compacted = self._publish_compacted(manifest, scratch, cleaned)
                with self._applied.exclusive() as record:  # this host's replica takes the compacted segments
                    self._download_sealed(compacted, self._replica)
                    record.write(_APPLIED.pack(compacted.commit, compacted.end_offset))
                seal = self._seals.known
                if seal is not None:  # new replicas start from the compacted segments, not the commits
                    self._retire_commits(seal, seal.commit)
        finally:
            scratch.close()
            scratch.storage.delete_tree(scratch_root)

    def _publish_compacted(self, manifest: Manifest, scratch: PartitionLog, cleaned_through: int) -> Manifest:
        """Seal the scratch copy's compacted segments under the manifest after ``manifest``; returns it.

        Raises:
            StorageConflictError: That manifest exists already (another process sealed or compacted first).
        """
        generation = manifest.generation + 1
        compacted = self._publish(
            scratch,
            generation,
            manifest.end_offset,
            lambda snapshot, segments: Manifest(
                generation,
                manifest.commit + 1,  # it covers no new commit
                manifest.commit,
                manifest.end_offset,
                manifest.log_start_offset,
                snapshot,
                tuple(segments),
                cleaned_through,
            ),
        )
        if compacted is None:
            raise StorageConflictError(
                f"manifest {generation} of {self.remote_directory} was created by another process during the round"
            )
        self._retire(manifest, compacted)
        return compacted


@dataclass
class _Prepared:
    """One partition's append prepared against its replica at a commit: its batches numbered from ``base``, or the
    log's refusal."""

    base: int
    batches: Batches | None
    outcome: AppendInfo | PySparkLogError

    @property
    def end(self) -> int:
        if self.batches is None:
            return self.base
        return self.base + int((self.batches.entries.last_offset_deltas + 1).sum())


class _NothingLeft(Exception):
    """Prepared again after a lost race, no partition has batches to commit (each refused, or a repeat)."""


#: An append made together with others: its index among them, its partition's log, its pieces and the log end it is
#: conditional on (None: unconditional).
_Append = tuple[int, "ObjectPartitionLog", list[Batches], int | None]


def append_together(
    appends: Sequence[tuple[ObjectPartitionLog, Sequence[Batches]]],
    *,
    expected_end_offsets: Sequence[int | None] | None = None,
) -> list[AppendInfo | PySparkLogError]:
    """Appends to partitions of one topic as one commit of its chain, a section each: a producer's batches due at
    once for several partitions cost one request, not one each. Each append is validated and numbered against its
    partition's replica as ``append`` does it; one the log refuses gets its error, and the others are committed.

    Args:
        appends: Each partition's log (distinct partitions of one topic, opened in this process) and its checked
            pieces.
        expected_end_offsets: Per append, the log end it is conditional on (``LogEndChangedError`` otherwise), or
            None; checked against the replica at the commit the new one follows.

    Returns:
        Per append, in order: its ``AppendInfo``, or the ``PySparkLogError`` the log refused it with.

    Raises:
        ValueError: The logs are not distinct partitions of one topic.
    """
    outcomes: list[AppendInfo | PySparkLogError | None] = [None] * len(appends)
    ends = [None] * len(appends) if expected_end_offsets is None else list(expected_end_offsets)
    live: list[_Append] = []
    for index, ((log, pieces), expected_end) in enumerate(zip(appends, ends, strict=True)):
        kept = [piece for piece in pieces if len(piece.entries)]
        if kept:
            live.append((index, log, kept, expected_end))
        else:
            end = log.log_end_offset
            outcomes[index] = AppendInfo(end, end - 1, 0, -1, -1)
    if live:
        _commit_together(sorted(live, key=lambda item: item[1].partition), outcomes)
    return [outcome for outcome in outcomes if outcome is not None]


def _commit_together(live: list[_Append], outcomes: list[AppendInfo | PySparkLogError | None]) -> None:
    """``append_together``'s commit of the appends with batches, in partition order (the order their replicas'
    locks are taken in), filling ``outcomes``."""
    first = live[0][1]
    commits = first._commits
    logs = [log for _, log, _, _ in live]
    same_chain = all(log.chain_directory == first.chain_directory and log.remote is first.remote for log in logs)
    if not same_chain or len({log.partition for log in logs}) < len(live):
        raise ValueError("appends made together are of distinct partitions of one topic")
    with ExitStack() as stack:
        records = [stack.enter_context(log._applied.exclusive()) for log in logs]

        def prepared_at(commit: Commit | None) -> list[_Prepared]:
            prepared = []
            for (_index, log, pieces, expected_end), record in zip(live, records, strict=True):
                base = log._apply_through(record, commit)
                try:
                    batches, info = log._replica.prepared_append(pieces, expected_end)
                except PySparkLogError as error:
                    prepared.append(_Prepared(base, None, error))
                    continue
                prepared.append(_Prepared(base, batches if len(batches.entries) else None, info))
            return prepared

        # The last commit this process made or found (of any partition of the topic: the header brings each replica
        # up to it without a read); winning the create of the next name proves nothing followed it.
        latest = commits.known_latest()
        if latest is not None and any(_applied(record)[0] > latest.number for record in records):
            latest = None  # another process of this host took a replica further: this one is behind the chain
        assumed = latest is not None
        if not assumed:
            latest = commits.latest()  # none made or found yet
        prepared = prepared_at(latest)
        if assumed and any(isinstance(p.outcome, PySparkLogError) for p in prepared):
            # Checked against the last commit this process knows of, which others may have followed (their batches
            # may be what a sequence follows): refused only against the chain's end.
            latest = commits.latest()
            prepared = prepared_at(latest)
        following = latest.number if latest is not None else -1

        def build(number: int, previous: Commit | None) -> bytes:
            nonlocal prepared, following
            if previous is not None and previous.number != following:
                prepared = prepared_at(previous)
                following = previous.number
            sections = [
                Section(log.partition, SectionKind.BATCHES, p.base, p.end, NO_LOG_START, p.batches.buf.tobytes())
                for (_index, log, _pieces, _end), p in zip(live, prepared, strict=True)
                if p.batches is not None
            ]
            if not sections:
                raise _NothingLeft
            return first._following(previous, sections)

        if any(p.batches is not None for p in prepared):
            try:
                commit = commits.append(build, after=latest)
            except _NothingLeft:
                commit = None
            for (_index, log, _pieces, _end), p, record in zip(live, prepared, records, strict=True):
                if commit is not None and p.batches is not None:
                    log._replica.append_replica(p.batches, p.base)
                    record.write(_APPLIED.pack(commit.number, p.end))
        else:
            commit = None
    for (index, _log, _pieces, _end), p in zip(live, prepared, strict=True):
        outcomes[index] = p.outcome
    if commit is not None:
        first._seal_when_due(commit.number)


def _writable(data: bytes | bytearray) -> np.ndarray:
    """Batches as an array the replica may number again in place: a buffer fetched for it as it is, bytes (a commit
    kept whole, shared with other readers of it) copied."""
    return np.frombuffer(data if isinstance(data, bytearray) else bytearray(data), dtype=np.uint8)


def _applied(record: LockedRecord) -> tuple[int, int]:
    """The last commit a replica holds and the log end after it, from its record ((-1, 0): none yet)."""
    data = record.read(_APPLIED.size)
    applied, end = _APPLIED.unpack(data) if len(data) == _APPLIED.size else (-1, 0)
    return int(applied), int(end)


def _copy(source: Storage, path: str, target: FileSystemStorage, target_path: str, suffix: str) -> None:
    """Copy one sealed file down, a ``.log`` a chunk at a time; a ``.txnindex`` or ``.snapshot`` may be absent.

    Raises:
        FileNotFoundError: A ``.log``, ``.index`` or ``.timeindex`` is absent.
    """
    if suffix in _OPTIONAL_SUFFIXES:
        data = read_if_exists(source, path)
        if data is not None:
            target.put(target_path, data)
        return
    position = 0
    while True:
        chunk = source.read(path, position, _DOWNLOAD_CHUNK_BYTES)
        if position == 0:
            target.put(target_path, chunk)
        elif chunk:
            target.append(target_path, chunk)
        position += len(chunk)
        if len(chunk) < _DOWNLOAD_CHUNK_BYTES:
            return
