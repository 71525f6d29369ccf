"""Numbered commit objects, each created only if absent: the sequencer of docs/object-storage.md.

``<directory>/commits/<20-digit number>`` holds one commit; commit ``n + 1`` follows commit ``n``.
Creating the next name with ``PutMode.CREATE`` *is* the commit: of any number of writers on any
number of hosts exactly one gets each number, so commits are dense and ordered without a lock or a
broker. A writer that loses a number reads the winner's commit and tries the next one, its payload
rebuilt from the commit it now follows. A write whose outcome is unknown (a timeout, a 5xx) is
settled by reading the name back: every commit carries its writer's id and append id, so a writer
recognises its own earlier success and never commits twice.

A follower that knows the last commit learns whether it is still the last with one probe of the next
name (a 404 when nothing changed); one that knows none lists the commits once (one request: sealing
keeps them below a few thousand) and probes from the last listed. A writer that made the last commit
it knows of creates the next one without looking first: winning the create proves its view was current,
so an uncontended append is one request, and losing it costs what a race must (the winner's commit, the
commits after it, a new attempt). There is no hint object to keep current: it would cost a PUT per commit.

A commit object, big-endian::

    0  magic          4 bytes  "PSLC"
    4  version        int16    0
    6  writer length  int16
    8  writer id      UTF-8
    .  append id      int64
    .  crc            uint32   CRC-32C of the body
    .  body           the rest
"""

from __future__ import annotations

import itertools
import os
import random
import struct
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import crc32c as _crc32c

from pysparklog.errors import CorruptRecordError, StorageConflictError
from pysparklog.storage.io import PutMode, Storage, read_if_exists, read_writable

COMMITS = "commits"
NUMBER_DIGITS = 20
_MAGIC = b"PSLC"
_VERSION = 1  # 0: a chain per partition, whose bodies were one partition's
_PREFIX = struct.Struct(">4shh")
_TRAILER = struct.Struct(">qI")
#: How many large commits' body positions an object remembers (``body_range``).
_KEPT_STARTS = 4096
#: The most names past a new commit a look probes at once.
_MAX_WINDOW = 16
#: How many times ``latest`` looks for the last commit when the one it found is gone before it is read.
_LOOKS_FOR_LAST = 5
#: How much of a commit's body a probe for it reads: a topic's header of up to a thousand partitions.
PROBE_BYTES = 16 * 1024
#: Bytes of commits a chain's object keeps once read: the replicas of a topic's partitions in one process (a Spark
#: task reading several, a sealer sealing each) read the commits they share once.
_KEPT_BYTES = 64 * 1024 * 1024
#: How long ``last_number`` trusts that the last commit it found is still there, rather than looking again.
_RECHECK_KNOWN_S = 30.0
_MAX_WRITER_ID = 255  # bytes of UTF-8: ids are 32 hex digits, or short names in tests


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit: its number, who wrote it, and its body."""

    number: int
    writer_id: str
    append_id: int
    body: bytes

    def encode(self) -> bytes:
        writer = self.writer_id.encode()
        if len(writer) > _MAX_WRITER_ID:
            raise ValueError(f"a writer id is at most {_MAX_WRITER_ID} bytes of UTF-8, not {len(writer)}")
        return (
            _PREFIX.pack(_MAGIC, _VERSION, len(writer))
            + writer
            + _TRAILER.pack(self.append_id, _crc32c.crc32c(self.body))
            + self.body
        )

    @classmethod
    def decode(cls, number: int, data: bytes, path: str) -> Commit:
        """The commit in ``data``.

        Raises:
            CorruptRecordError: The object is not a commit of a known version, or its body's CRC is wrong.
        """
        if len(data) < _PREFIX.size:
            raise CorruptRecordError(f"a commit of {len(data)} bytes is shorter than its header", file=path)
        magic, version, writer_length = _PREFIX.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise CorruptRecordError(
                f"not a commit of version {_VERSION} (magic {magic!r}, version {version})", file=path
            )
        start = _PREFIX.size + writer_length
        if len(data) < start + _TRAILER.size:
            raise CorruptRecordError("a commit ends inside its header", file=path)
        append_id, crc = _TRAILER.unpack_from(data, start)
        body = data[start + _TRAILER.size :]
        if _crc32c.crc32c(body) != crc:
            raise CorruptRecordError("a commit's body does not match its CRC", file=path, position=start)
        try:
            writer = data[_PREFIX.size : start].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("a commit's writer id is not UTF-8", file=path, position=_PREFIX.size) from None
        return cls(number, writer, append_id, body)


_shared: dict[tuple[str, str, str], CommitLog] = {}
_shared_lock = threading.Lock()


def _forget_shared() -> None:
    global _shared_lock
    _shared.clear()
    _shared_lock = threading.Lock()  # a fork may have copied it held


os.register_at_fork(after_in_child=_forget_shared)


class _Unknown:
    """The default of ``CommitLog.append``'s ``after``: not known, to be looked up."""


_UNKNOWN = _Unknown()

#: Builds the body of a commit that will get ``number``, following ``previous`` (None for the first).
BodyBuilder = Callable[[int, "Commit | None"], bytes]


class CommitLog:
    """The commits of one directory.

    What an object learns of its chain (the last commit, the last body prefix) saves requests later, so the
    engine keeps one object per chain in a process (``shared``) rather than one per open partition: a Spark
    driver that plans every trigger, or a task reading a partition, asks the store only what changed since.

    Args:
        storage: The log directory's storage.
        directory: Where the ``commits/`` and ``head`` objects are, a path of ``storage``.
        writer_id: This writer's id, unique among writers (default: a new random one).
        max_attempts: How many numbers an append may lose before it gives up.
    """

    def __init__(
        self, storage: Storage, directory: str, *, writer_id: str | None = None, max_attempts: int = 1000
    ) -> None:
        self.storage = storage
        self.directory = directory
        self.writer_id = writer_id or uuid.uuid4().hex
        self.max_attempts = max_attempts
        self._appends = itertools.count(1)  # next() is atomic: a chain's object may be shared by threads
        self._known = -1  # the highest number this object has seen exist
        self._last_read: Commit | None = None  # the last commit read or written, which ``known_latest`` answers
        self._kept: OrderedDict[int, Commit] = OrderedDict()  # commits never change: recent ones are read for free
        self._kept_bytes = 0
        self._kept_lock = threading.Lock()
        # The last body prefix read (``body_prefix``), and whether it is the whole body.
        self._prefix: tuple[int, bytes, bool] | None = None
        self._listed_empty = False  # a listing found no commit: later looks probe the first name instead
        self._known_seen_at = -_RECHECK_KNOWN_S  # when ``last_number`` last saw the last known commit exist
        self._look_lock = threading.Lock()  # one ``last_number`` look at a time, shared by the callers waiting
        self._looked_at = -1.0  # when the last look began
        self._prefix_lock = threading.Lock()  # one ranged read of a body's prefix at a time
        self._window = 1  # the names probed at once past a new commit: as many as the last look found
        self._body_starts: dict[int, int] = {}  # where the body of a large commit starts in its object

    @classmethod
    def shared(cls, storage: Storage, directory: str, incarnation: str) -> CommitLog:
        """This process's object of the chain in ``directory`` of ``storage``, for this ``incarnation`` of it (a
        topic's id: a topic deleted and created again starts a new chain under the same name)."""
        key = (storage.root, directory, incarnation)
        with _shared_lock:
            chain = _shared.get(key)
            if chain is None or chain.storage is not storage:
                chain = _shared[key] = cls(storage, directory)
            return chain

    def path(self, number: int) -> str:
        return f"{self.directory}/{COMMITS}/{self._name(number)}"

    @staticmethod
    def _name(number: int) -> str:
        return f"{number:0{NUMBER_DIGITS}d}"

    def read(self, number: int) -> Commit | None:
        """Commit ``number``, or None when it does not exist (yet).

        Raises:
            CorruptRecordError: The object is not a commit.
        """
        last = self._last_read
        if last is not None and last.number == number:
            return last
        with self._kept_lock:
            kept = self._kept.get(number)
        if kept is not None:
            return kept
        data = read_if_exists(self.storage, self.path(number))
        if data is None:
            return None
        self._known = max(self._known, number)
        commit = self._last_read = Commit.decode(number, data, self.path(number))
        self._keep(commit)
        return commit

    def _keep(self, commit: Commit) -> None:
        with self._kept_lock:
            if commit.number in self._kept:
                return
            self._kept[commit.number] = commit
            self._kept_bytes += len(commit.body)
            while self._kept_bytes > _KEPT_BYTES and len(self._kept) > 1:
                _number, oldest = self._kept.popitem(last=False)
                self._kept_bytes -= len(oldest.body)

    def latest(self) -> Commit | None:
        """The last commit: one probe past the last one this object knows of (all that a writer alone on its
        log and a reader of an idle one pay), else a listing, then the commit found last, read whole.

        Raises:
            CorruptRecordError: A commit is not a commit, or the last one kept going before it could be read.
        """
        for _attempt in range(_LOOKS_FOR_LAST):
            number = self.last_number()
            if number < 0:
                return None
            commit = self.read(number)
            if commit is not None:
                if commit.number == self._known:
                    self._last_read = commit  # what ``known_latest`` answers
                return commit
            self._known_seen_at = -_RECHECK_KNOWN_S  # cut back meanwhile: the next look lists the chain
            self._looked_at = -1.0
        raise CorruptRecordError("the last commit kept going before it could be read", file=self.directory)

    @property
    def known_number(self) -> int:
        """The highest commit number this object has seen exist (-1: none), without a request."""
        return self._known

    def known_latest(self) -> Commit | None:
        """The last commit this object wrote or found to be the last, without a request (None: none known): what a
        writer appends after, its create at the next number being the check that nothing followed it."""
        last = self._last_read
        return last if last is not None and last.number == self._known else None

    def last_number(self) -> int:
        """The last commit's number (-1: none), found with probes past the last one known (a listing when none
        is): the log's extent without downloading the commits on the way, only the start of each found.

        Callers asking at once share one look: a driver asking every partition of a topic at each trigger makes
        one probe of the topic's chain, not one per partition. A caller is answered by a look that began after it
        asked, so what it learns is never older than its question."""
        asked = time.monotonic()
        with self._look_lock:
            if self._looked_at >= asked:
                return self._known
            began = time.monotonic()
            number = self._look_for_last()
            self._looked_at = began
            return number

    def _look_for_last(self) -> int:
        start = self._known
        last = self._last_read
        # Read whole, or seen by a HEAD lately: no need to look again. A last known commit can go only once two
        # manifests of sealing followed it, and then the probe past it misses commits, so it is looked at again
        # every ``_RECHECK_KNOWN_S``: a listing finds the chain's end when it is gone.
        recently = time.monotonic() - self._known_seen_at < _RECHECK_KNOWN_S
        known_there = (last is not None and last.number == start) or recently
        if start < 0 and self._listed_empty:  # listed before and found none: the first name decides
            start = 0 if self.storage.stat(self.path(0)) is not None else -1
            if start < 0:
                return -1
        elif start < 0 or not (known_there or self.storage.stat(self.path(start)) is not None):  # none, or cut back
            start = self._listed_last()
            if start < 0:
                return -1
        # A ranged GET rather than a HEAD: the same one request, and it brings the new commit's header with it (a
        # small commit whole). Once it finds one, the names after it are probed at once, twice as many as the last
        # look found new commits past its first (a busy chain keeps growing at its pace: one round trip catches up);
        # when all of them exist, or after one probe for a chain that was quiet, one listing from there finds the
        # rest, however many.
        probed = start
        if self._fetch_prefix(start + 1, PROBE_BYTES) is not None:
            start += 1
            window = self._window
            names = range(start + 1, start + 1 + window)
            with ThreadPoolExecutor(max_workers=window) as pool:
                found = list(pool.map(lambda number: self._fetch_prefix(number, PROBE_BYTES) is not None, names))
            leading = found.index(False) if False in found else window
            start += leading
            if leading == window:
                listed = self.storage.list_after(f"{self.directory}/{COMMITS}", self._name(start))
                start = max([int(name) for name in listed if name.isdigit()], default=start)
            self._window = max(1, min(2 * (start - probed - 1), _MAX_WINDOW))  # room for the pace to vary
        if start > self._known or not recently:
            self._known_seen_at = time.monotonic()
        self._known = max(self._known, start)
        return start

    def body_prefix(self, number: int, size: int) -> bytes | None:
        """At most the first ``size`` bytes of commit ``number``'s body (fewer when the body is shorter): ``head``, with
        callers asking at once sharing one read; None when the commit is gone (then the next look for the last commit
        lists the chain)."""
        with self._prefix_lock:
            head = self.head(number, max(size, PROBE_BYTES))
        if head is None:
            self._known_seen_at = -_RECHECK_KNOWN_S
            return None
        return head[:size]

    def kept(self, number: int) -> Commit | None:
        """Commit ``number`` if this object holds it whole (read, written or probed whole lately), without a request."""
        last = self._last_read
        if last is not None and last.number == number:
            return last
        with self._kept_lock:
            return self._kept.get(number)

    def head(self, number: int, size: int) -> bytes | None:
        """At most the first ``size`` bytes of commit ``number``'s body with one ranged GET (the commit is kept whole
        when it is no longer: ``kept``), or from what this object holds; None when the commit does not exist."""
        commit = self.kept(number)
        if commit is not None:
            return commit.body[:size]
        prefix = self._prefix
        if prefix is not None and prefix[0] == number and (prefix[2] or len(prefix[1]) >= size):
            return prefix[1][:size]
        return self._fetch_prefix(number, size)

    def body_range(self, number: int, position: int, length: int) -> bytes | bytearray | None:
        """``length`` bytes of commit ``number``'s body from ``position``, with one ranged GET (fewer when the body
        ends first) into a buffer of the caller's; None when the commit does not exist. The bytes are unchecked: the
        CRC covers the whole body."""
        start = self._body_starts.get(number)
        if start is None:
            if self.head(number, 0) is None:
                return None
            commit = self.kept(number)
            if commit is not None:
                return commit.body[position : position + length]
            start = self._body_starts[number]
        try:
            return read_writable(self.storage, self.path(number), start + position, length)
        except FileNotFoundError:
            return None

    def _fetch_prefix(self, number: int, size: int) -> bytes | None:
        """At most the first ``size`` bytes of commit ``number``'s body, read with one ranged GET and kept as the
        last prefix read; None when the commit does not exist."""
        length = _PREFIX.size + _MAX_WRITER_ID + _TRAILER.size + size
        try:
            head = self.storage.read(self.path(number), 0, length)
        except FileNotFoundError:
            return None
        self._known = max(self._known, number)
        if len(head) < length:  # the whole commit: kept, so that reading it costs nothing more
            commit = Commit.decode(number, head, self.path(number))
            self._keep(commit)
            self._prefix = (number, commit.body, True)
            return commit.body[:size]
        if len(head) < _PREFIX.size:
            raise CorruptRecordError("a commit is shorter than its header", file=self.path(number))
        magic, version, writer_length = _PREFIX.unpack_from(head)
        if magic != _MAGIC or version != _VERSION:
            raise CorruptRecordError(
                f"not a commit of version {_VERSION} (magic {magic!r}, version {version})", file=self.path(number)
            )
        start = _PREFIX.size + writer_length + _TRAILER.size
        if writer_length > _MAX_WRITER_ID or len(head) < start:
            raise CorruptRecordError("a commit's header is not whole", file=self.path(number))
        with self._kept_lock:
            self._body_starts[number] = start
            while len(self._body_starts) > _KEPT_STARTS:
                del self._body_starts[next(iter(self._body_starts))]
        body = head[start : start + size]
        if self._prefix is None or self._prefix[0] <= number:  # probes run at once: the last commit's stays
            self._prefix = (number, body, len(body) < size)
        return body

    def _listed_last(self) -> int:
        """The last commit's number by a listing (-1: none), for a follower that knows none (or whose last known
        was cut back); a listing that finds none makes later looks probe the first name instead."""
        numbers = [int(name) for name in self.storage.list(f"{self.directory}/{COMMITS}") if name.isdigit()]
        self._listed_empty = not numbers
        return max(numbers, default=-1)

    def append(self, build: BodyBuilder, *, after: Commit | None | _Unknown = _UNKNOWN) -> Commit:
        """Commit a body built for the next number; returns the commit as written.

        ``after`` is the last commit as the caller knows it (``latest()``, or ``known_latest()`` for a writer
        that made it), which saves looking again; a stale one costs a lost first attempt, never a wrong commit.

        ``build(number, previous)`` is called again for each number lost to another writer, with the
        commit the new attempt follows (the last one by then, not only the winner's: a writer that kept
        to the next number would lose to every faster writer in turn), so that what the body derives
        from the log (offsets) is right.

        Raises:
            StorageConflictError: Every one of ``max_attempts`` numbers went to other writers.
        """
        append_id = next(self._appends)
        previous = self.latest() if isinstance(after, _Unknown) else after
        for attempt in range(self.max_attempts):
            number = previous.number + 1 if previous is not None else 0
            commit = Commit(number, self.writer_id, append_id, build(number, previous))
            outcome = self._create(commit)
            if outcome is None or _same_append(outcome, commit):
                self._known = max(self._known, number)
                self._last_read = commit
                self._keep(commit)
                return commit
            # Lost: the log may have moved on by more than the winner's commit while this one was built.
            if attempt >= 2:
                time.sleep(random.uniform(0, min(0.002 * attempt, 0.05)))  # break up writers in lockstep
            previous = self._following(outcome)
        raise StorageConflictError(
            f"{self.directory}: {self.max_attempts} commit numbers in a row went to other writers"
        )

    def _following(self, known: Commit) -> Commit:
        """The last commit, from ``known`` on: probing the next names, not trusting the head hint."""
        self._known = max(self._known, known.number)
        while (following := self.read(known.number + 1)) is not None:
            known = following
        return known

    def _create(self, commit: Commit) -> Commit | None:
        """Create the commit's object; None when it was created by this call, else the commit found there
        (another writer's, or this one's from an attempt whose reply was lost)."""
        try:
            self.storage.put(self.path(commit.number), commit.encode(), mode=PutMode.CREATE)
            return None
        except StorageConflictError:
            found = self.read(commit.number)
        except OSError:  # the request may have landed: what is there now decides
            found = self.read(commit.number)
            if found is None:
                raise
        if found is None:  # the name was taken and is gone again: cut back by retention, an error here
            raise StorageConflictError(f"{self.path(commit.number)} was taken by a commit that is gone")
        return found


def _same_append(found: Commit, mine: Commit) -> bool:
    return found.writer_id == mine.writer_id and found.append_id == mine.append_id
