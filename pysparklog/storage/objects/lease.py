"""The lock of an object store: a lease made of the store's two conditional writes alone (``ObjectLease``).

An object store has no lock service, so the metadata coordinators (the topic store, the producer ids, the groups,
the transactions) and a partition's sealing take a lease where a filesystem gives them an ``flock``. A lease object
names its holder and the end of its lease; a contender creates it only if absent or replaces it, once its lease
has ended, only if it is still the version read, so exactly one of any number of contenders on any number of hosts
wins (``ObjectLease`` has the protocol, docs/object-storage.md the reasons).
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn, Protocol

from pysparklog.errors import InvalidConfigError, PySparkLogError, StorageConflictError
from pysparklog.storage.io.base import PutMode, Storage

_log = logging.getLogger(__name__)

LEASE_MS = 30_000
"""How long a lease lasts unless renewed, by default. Its holder renews it every third of that, so a few slow or
failed requests do not lose it, and a holder that died keeps the others waiting at most this long."""
#: The environment variable setting how long leases last (``LEASE_MS`` when unset), read when a store is made.
LEASE_MS_VARIABLE = "PYSPARKLOG_LEASE_MS"
#: The shortest lease accepted: its holder renews it every third of its length, one request each time.
MIN_LEASE_MS = 100
_FIRST_WAIT_S = 0.02
_LONGEST_WAIT_S = 1.0


def lease_ms_from_environment() -> int:
    """How long a lease lasts: ``$PYSPARKLOG_LEASE_MS``, or ``LEASE_MS`` when it is unset or empty.

    A shorter lease lets a test see a holder lose it within a second; a holder then has to renew it within a
    third of that, and hosts' clocks have to agree within two thirds, so a real store keeps the default.

    Raises:
        InvalidConfigError: The variable is not an integer of at least ``MIN_LEASE_MS``.
    """
    text = os.environ.get(LEASE_MS_VARIABLE, "").strip()
    if not text:
        return LEASE_MS
    try:
        lease_ms: int | None = int(text)
    except ValueError:
        lease_ms = None
    if lease_ms is None or lease_ms < MIN_LEASE_MS:
        raise InvalidConfigError(
            f"{LEASE_MS_VARIABLE}={text!r} is invalid; accepted: an integer number of milliseconds >= {MIN_LEASE_MS}, "
            f"or unset for the default, {LEASE_MS}"
        )
    return lease_ms


class LeaseStorage(Storage, Protocol):
    """The store a lease is kept on: the common contract, and a delete that does not look first, so that a release
    checked against the holding's own version costs one request more, not two (``ObjectStorage`` is one)."""

    def remove(self, path: str) -> None:
        """Delete an object without asking first whether it is there (a concurrent delete is no error)."""
        ...


def _now_ms() -> int:
    return int(time.time() * 1000)


def _lease_body(owner: str, expires_ms: int) -> bytes:
    """A lease object: its holder and the end of its lease, with the host and process for whoever looks."""
    document = {"owner": owner, "expires_ms": expires_ms, "host": socket.gethostname(), "pid": os.getpid()}
    return json.dumps(document).encode()


def _lease_of(data: bytes) -> tuple[str, int]:
    """The holder and the end of the lease an object records; bytes that are no lease (a filesystem's empty lock
    file copied to the store) read as no holder and an ended lease, since nobody renews them."""
    try:
        document = json.loads(data)
        return str(document["owner"]), int(document["expires_ms"])
    except (ValueError, KeyError, TypeError):
        return "", 0


class ObjectLease:
    """The lock of an object store (a ``StorageLock``): a lease, made of the two conditional writes alone.

    The lease object is the lock's own path, holding its holder's id and the time its lease ends. A contender
    creates it only if absent; one that finds it reads it (content and version in one GET) and, if its lease has
    ended (its holder died, or stalled longer than the lease), replaces it only if it is still the version read,
    so of any number of contenders on any number of hosts exactly one wins. The others wait, with jittered backoff
    growing to a second, and try again: never forever, since a holder that dies stops renewing and its lease
    ends ``lease_ms`` later. While held, a daemon thread renews the lease every third of ``lease_ms`` (each time
    replacing its own version only); the holder releases it by deleting the object once it has checked that the
    object is still its version, which it does only while a third of its lease is left (nobody can take it over
    between the check and the delete); with less left it writes the object back ended instead, only if it is
    still its version. So a release never removes another holder's lease.

    The end of a lease is the holder's clock read by the contender's: hosts' clocks must agree within two thirds
    of ``lease_ms`` (20 s by default), well within what NTP keeps. A holder stalled past its lease loses it (its
    renewer logs that and stops); the writes a lease guards are conditional on the versions they read
    (``VersionedFile``), so that a stale holder's write fails with ``MetadataChangedError`` instead of overwriting.

    ``exclusive`` yields a record that refuses reads and writes: on a filesystem the lock file's bytes are a
    small record rewritten in place under the lock (a partition's state), but an object cannot change in place,
    so state on an object store lives in objects of its own, replaced only if their version is the one read,
    and the lease object holds only the lease. ``shared`` takes no lease and yields None: objects are written
    whole by one ``put`` and never changed, so a reader sees an object old or new, never a mix, and has nothing
    to exclude; the shared lock a filesystem's readers take guards the in-place rewrite that does not exist here.

    A lease object excludes the threads of this process too; it is not reentrant (a thread holding it that asks
    again is refused).

    Args:
        storage: The object store.
        path: The lease object.
        lease_ms: How long a holding's lease lasts unless renewed.
    """

    def __init__(self, storage: LeaseStorage, path: str, lease_ms: int = LEASE_MS) -> None:
        self.path = path
        self.lease_ms = lease_ms
        self._storage = storage
        self._thread_lock = threading.Lock()
        self._holding_thread: int | None = None

    def __repr__(self) -> str:
        return f"ObjectLease({self.path!r})"

    @contextmanager
    def exclusive(self) -> Iterator[_NoRecord]:
        if self._holding_thread == threading.get_ident():
            raise PySparkLogError(f"lease {self.path} is already held by this thread: a lease is not reentrant")
        with self._thread_lock:
            wait_s = _FIRST_WAIT_S
            while (holding := self._take()) is None:
                time.sleep(random.uniform(0, wait_s))
                wait_s = min(2 * wait_s, _LONGEST_WAIT_S)
            with self._held(holding):
                yield _NoRecord(self.path)

    @contextmanager
    def try_exclusive(self) -> Iterator[_NoRecord | None]:
        if not self._thread_lock.acquire(blocking=False):
            yield None
            return
        try:
            holding = self._take()
            if holding is None:
                yield None
                return
            with self._held(holding):
                yield _NoRecord(self.path)
        finally:
            self._thread_lock.release()

    @contextmanager
    def shared(self) -> Iterator[None]:
        """No lease: readers of immutable objects need none (see the class's documentation)."""
        yield None

    def close(self) -> None:
        """Nothing: a lease keeps nothing open between holdings."""

    @contextmanager
    def _held(self, holding: _Holding) -> Iterator[None]:
        self._holding_thread = threading.get_ident()
        holding.start()
        try:
            yield
        finally:
            self._holding_thread = None
            holding.release()

    def _take(self) -> _Holding | None:
        """One attempt: create the lease object, or take over one whose lease ended; None when another holds it."""
        owner = uuid.uuid4().hex
        expires_ms = _now_ms() + self.lease_ms
        body = _lease_body(owner, expires_ms)
        try:
            version = self._storage.put(self.path, body, mode=PutMode.CREATE).version
        except StorageConflictError:
            current = self._storage.read_versioned(self.path)
            if current is None:
                return None  # released meanwhile: the next attempt creates it
            data, version = current
            holder, ends_ms = _lease_of(data)
            if holder == owner:
                pass  # this attempt's own create, whose reply was lost and which the client retried
            elif ends_ms > _now_ms():
                return None
            else:
                try:
                    version = self._storage.put(self.path, body, expected_version=version).version
                except StorageConflictError:
                    return None  # another contender took it over first
        return _Holding(self._storage, self.path, owner, version, expires_ms, self.lease_ms)


class _Holding:
    """One holding of a lease: renewed from a daemon thread until released."""

    def __init__(
        self, storage: LeaseStorage, path: str, owner: str, version: str, expires_ms: int, lease_ms: int
    ) -> None:
        self._storage = storage
        self._path = path
        self._owner = owner
        self._version = version
        self._expires_ms = expires_ms
        self._lease_ms = lease_ms
        self._lost = False
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name=f"lease {path}", daemon=True)

    def start(self) -> None:
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(self._lease_ms / 3000):
            try:
                if not self._extend():
                    self._lost = True
                    _log.warning("the lease %s was taken over while held: it was not renewed in time", self._path)
                    return
            except Exception as error:  # a failed request: tried again at the next renewal, before the lease ends
                _log.warning("could not renew the lease %s: %s", self._path, error)

    def _extend(self) -> bool:
        """Renew the lease; False when it is no longer this holding's."""
        expires_ms = _now_ms() + self._lease_ms
        try:
            self._version = self._storage.put(
                self._path, _lease_body(self._owner, expires_ms), expected_version=self._version
            ).version
            self._expires_ms = expires_ms
            return True
        except StorageConflictError:
            current = self._storage.read_versioned(self._path)
            if current is None or _lease_of(current[0])[0] != self._owner:
                return False
            # This holding's own renewal, whose reply was lost and which the client retried.
            self._version = current[1]
            self._expires_ms = _lease_of(current[0])[1]
            return True

    def release(self) -> None:
        self._stop.set()
        self._renewer.join()
        if self._lost:
            return
        try:
            if _now_ms() < self._expires_ms - self._lease_ms // 3:
                current = self._storage.stat(self._path)
                if current is not None and current.version == self._version:
                    self._storage.remove(self._path)
                elif current is not None:
                    _log.warning("the lease %s was taken over while held: it was not renewed in time", self._path)
            else:  # too near its end to check, then delete: another could take it over in between
                self._storage.put(self._path, _lease_body(self._owner, 0), expected_version=self._version)
        except StorageConflictError:
            pass  # no longer this holding's to release


class _NoRecord:
    """What a lease's ``exclusive`` yields: no record (``ObjectLease`` says why); reading or writing it is refused
    rather than read as an empty record."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def _refuse(self, what: str) -> NoReturn:
        raise NotImplementedError(
            f"{what} of the lock record {self.path}: a lease on an object store holds no record (objects cannot "
            "change in place); keep the state in an object of its own, replaced with put(expected_version=...)"
        )

    def read(self, size: int) -> bytes:
        self._refuse("read")

    def write(self, data: bytes) -> None:
        self._refuse("write")
