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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import crc32c as _crc32c

from pysparklog.errors import CorruptRecordError, StorageConflictError
from pysparklog.storage.io import PutMode, Storage, read_if_exists

COMMITS = "commits"
NUMBER_DIGITS = 20
_MAGIC = b"PSLC"
_VERSION = 0
_PREFIX = struct.Struct(">4shh")
_TRAILER = struct.Struct(">qI")
_READ_AHEAD = 8
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
        self._last_read: Commit | None = None  # commits never change: the last one read is read again for free
        self._prefix: tuple[int, bytes] | None = None  # the last body prefix read (``body_prefix``)
        self._listed_empty = False  # a listing found no commit: later looks probe the first name instead
        self._known_seen_at = -_RECHECK_KNOWN_S  # when ``last_number`` last saw the last known commit exist

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
        return f"{self.directory}/{COMMITS}/{number:0{NUMBER_DIGITS}d}"

    def read(self, number: int) -> Commit | None:
        """Commit ``number``, or None when it does not exist (yet).

        Raises:
            CorruptRecordError: The object is not a commit.
        """
        last = self._last_read
        if last is not None and last.number == number:
            return last
        data = read_if_exists(self.storage, self.path(number))
        if data is None:
            return None
        self._known = max(self._known, number)
        commit = self._last_read = Commit.decode(number, data, self.path(number))
        return commit

    def read_range(self, first: int, last: Commit) -> Iterator[Commit]:
        """Commits ``first`` to ``last`` (which the caller has), in order, fetched a window at a time in
        parallel: a reader catching up with many commits waits for the store's latency once per window.

        Raises:
            CorruptRecordError: A commit is missing or is not a commit.
        """
        numbers = range(first, last.number)
        if numbers:
            with ThreadPoolExecutor(max_workers=_READ_AHEAD) as pool:
                for start in range(0, len(numbers), _READ_AHEAD):
                    window = numbers[start : start + _READ_AHEAD]
                    for number, commit in zip(window, pool.map(self.read, window), strict=True):
                        if commit is None:
                            raise CorruptRecordError(
                                f"commit {number} is missing, but commit {last.number} exists", file=self.path(number)
                            )
                        yield commit
        if first <= last.number:
            yield last

    def latest(self) -> Commit | None:
        """The last commit: one probe past the last one this object knows of (all that a writer alone on its
        log and a reader of an idle one pay), else a listing, then probes forward until a name is missing.

        Raises:
            CorruptRecordError: A commit is not a commit.
        """
        if self._known >= 0:
            known = self.read(self._known)
            if known is not None:
                return self._following(known)
        elif self._listed_empty:  # listed before and found none: the first name decides
            first = self.read(0)
            return self._following(first) if first is not None else None
        last = self._listed_last()  # none known yet, or cut back below it: list once
        current = self.read(last) if last >= 0 else None
        return self._following(current) if current is not None else None

    def known_latest(self) -> Commit | None:
        """The last commit this object wrote or found to be the last, without a request (None: none known): what a
        writer appends after, its create at the next number being the check that nothing followed it."""
        last = self._last_read
        return last if last is not None and last.number == self._known else None

    def last_number(self) -> int:
        """The last commit's number (-1: none), found with HEADs past the last one known (a listing when none
        is): the log's extent without downloading the commits on the way."""
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
        while self.storage.stat(self.path(start + 1)) is not None:
            start += 1
        if start > self._known or not recently:
            self._known_seen_at = time.monotonic()
        self._known = max(self._known, start)
        return start

    def body_prefix(self, number: int, size: int) -> bytes | None:
        """The first ``size`` bytes of commit ``number``'s body, with one ranged read and unchecked (the CRC covers
        the whole body); None when the commit is gone. The last commit read whole, or the last prefix read, costs
        no request."""
        last = self._last_read
        if last is not None and last.number == number and len(last.body) >= size:
            return last.body[:size]
        if self._prefix is not None and self._prefix[0] == number and len(self._prefix[1]) >= size:
            return self._prefix[1][:size]
        try:
            head = self.storage.read(self.path(number), 0, _PREFIX.size + _MAX_WRITER_ID + _TRAILER.size + size)
        except FileNotFoundError:
            return None
        if len(head) < _PREFIX.size:
            raise CorruptRecordError("a commit is shorter than its header", file=self.path(number))
        _magic, _version, writer_length = _PREFIX.unpack_from(head)
        start = _PREFIX.size + writer_length + _TRAILER.size
        if writer_length > _MAX_WRITER_ID or len(head) < start + size:
            raise CorruptRecordError("a commit's header is not whole", file=self.path(number))
        self._prefix = (number, head[start : start + size])
        return self._prefix[1]

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
