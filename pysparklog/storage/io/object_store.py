"""The object-store backend of the storage seam: ``s3://`` (any S3-compatible store), ``gs://``,
``az://`` / ``abfss://``, through obstore (the Python binding of the Rust ``object_store`` crate).

Objects are written whole and never changed: there are no in-place writes, appends or renames here (it
is a ``Storage``, not a ``FileSystemStorage``), and the engine keeps its commit protocol on ``put`` alone
(docs/object-storage.md). The two conditional writes are the store's own: create-if-absent
(``If-None-Match: *``, GCS ``ifGenerationMatch=0``) and replace-if-version (``If-Match: <etag>``, GCS
generations), so exactly one of any number of writers on any number of hosts wins a name or a version.
There is no lock service either: ``lock`` gives a lease (``ObjectLease``) built from those two writes.

Paths are URLs below the root (``s3://bucket/prefix/t-0/00000000000000000000.log``), so that callers
compose them as they compose filesystem paths; the backend turns them into keys below the store's
prefix. A file's version is its ETag (its generation on GCS). Credentials and endpoints come from each
cloud's standard environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_ALLOW_HTTP``...), as
obstore reads them, plus the ``options`` given.
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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import obstore
from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError
from obstore.store import from_url

from pysparklog.errors import InvalidConfigError, InvalidLogDirectoryError, PySparkLogError, StorageConflictError
from pysparklog.storage.io.base import FileStat, PutMode

_log = logging.getLogger(__name__)

LEASE_MS = 30_000
"""How long a lease lasts unless renewed, by default. Its holder renews it every third of that, so a few slow or
failed requests do not lose it, and a holder that died keeps the others waiting at most this long."""
#: The environment variable setting how long leases last (``LEASE_MS`` when unset), read when a store is made.
LEASE_MS_VARIABLE = "PYSPARKLOG_LEASE_MS"
#: The shortest lease accepted: its holder renews it every third of its length, one request each time.
MIN_LEASE_MS = 100
#: obstore's options of the HTTP client (its ``ClientConfig``), the same for every store; other keys are the store's.
_CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "proxy_ca_certificate",
        "proxy_excludes",
        "randomize_addresses",
        "read_timeout",
        "root_certificate",
        "timeout",
        "user_agent",
    }
)
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


class ObjectStorage:
    """A log directory on an object store.

    Args:
        url: The log directory's URL: ``s3://bucket/prefix`` and the like.
        options: Settings beyond the environment's: obstore's keys of the store (``endpoint`` or
            ``aws_endpoint``, ``region``, ``access_key_id``...) and of its HTTP client (``allow_http``,
            ``timeout``...).

    Attributes:
        lease_ms: How long the leases of its locks last (``$PYSPARKLOG_LEASE_MS`` when the store was made, else
            ``LEASE_MS``).

    Raises:
        InvalidLogDirectoryError: obstore cannot make a store of the URL or the options.
        InvalidConfigError: ``$PYSPARKLOG_LEASE_MS`` is set to a value not accepted.
    """

    def __init__(self, url: str, options: Mapping[str, str] | None = None) -> None:
        self.root = url.rstrip("/")
        self.lease_ms = lease_ms_from_environment()
        config: Any = {}  # keys checked by obstore, per store type
        client: Any = {}
        for key, value in (options or {}).items():
            # A client key is also written with the store's prefix (aws_allow_http, as the environment's
            # AWS_ALLOW_HTTP), which obstore would take for a store key, and panic on.
            bare = key.split("_", 1)[1] if key.startswith(("aws_", "google_", "azure_")) else key
            if bare in _CLIENT_OPTIONS:
                client[bare] = value
            else:
                config[key] = value
        try:
            self._store: Any = from_url(self.root, config=config or None, client_options=client or None)
        except Exception as error:  # obstore raises its own error types for bad URLs and keys
            reason = str(error).splitlines()[0]  # the rest is the Rust error's debug dump
            raise InvalidLogDirectoryError(f"log directory {url!r}: {reason}") from None

    def __repr__(self) -> str:
        return f"ObjectStorage({self.root!r})"

    def join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _key(self, path: str) -> str:
        """The key below the store's prefix of a path below the root."""
        if path == self.root:
            return ""
        if not path.startswith(self.root + "/"):
            raise InvalidLogDirectoryError(f"{path!r} is not below the log directory {self.root!r}")
        return path[len(self.root) + 1 :]

    # -- reading --------------------------------------------------------------------------------

    def read(self, path: str, position: int = 0, length: int | None = None) -> bytes:
        key = self._key(path)
        if position == 0 and length is None:
            return bytes(obstore.get(self._store, key).bytes())
        if length == 0:
            return b""
        if length is None:
            length = self._size(path) - position
            if length <= 0:
                return b""
        try:  # one ranged GET: a range past the end returns the rest
            return bytes(obstore.get_range(self._store, key, start=position, length=length))
        except FileNotFoundError:
            raise
        except Exception:  # a start at or past the end is refused (416): nothing to read, if the object is there
            if self._size(path) <= position:
                return b""
            raise

    def read_versioned(self, path: str) -> tuple[bytes, str] | None:
        """A whole object and its version, from one GET (a ``read`` then a ``stat`` could pair the content with a
        later version); None when it does not exist."""
        try:
            result = obstore.get(self._store, self._key(path))
        except FileNotFoundError:
            return None
        meta = result.meta
        return bytes(result.bytes()), _version(meta["e_tag"], meta["version"])

    def read_into(self, path: str, position: int, buffer: memoryview) -> int:
        data = self.read(path, position, len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _size(self, path: str) -> int:
        stat = self.stat(path)
        if stat is None:
            raise FileNotFoundError(path)
        return stat.size

    def stat(self, path: str) -> FileStat | None:
        try:
            meta = obstore.head(self._store, self._key(path))
        except FileNotFoundError:
            return None
        modified_ms = int(meta["last_modified"].timestamp() * 1000)
        return FileStat(meta["size"], modified_ms, modified_ms, _version(meta["e_tag"], meta["version"]))

    def list(self, directory: str) -> list[str]:
        key = self._key(directory)
        found = obstore.list_with_delimiter(self._store, key or None)
        names = [prefix.rsplit("/", 1)[-1] for prefix in found["common_prefixes"]]
        names += [meta["path"].rsplit("/", 1)[-1] for meta in found["objects"]]
        return sorted(set(names))

    def is_directory(self, path: str) -> bool:
        key = self._key(path)
        if not key:
            return True  # the root: a bucket prefix is there as soon as the bucket is
        found = obstore.list_with_delimiter(self._store, key)
        return bool(found["common_prefixes"] or found["objects"])

    # -- whole-object writes ----------------------------------------------------------------------

    def put(
        self, path: str, data: bytes, *, mode: PutMode = PutMode.OVERWRITE, expected_version: str | None = None
    ) -> FileStat:
        key = self._key(path)
        condition: Any = "overwrite"
        if mode is PutMode.CREATE:
            condition = "create"
        elif expected_version is not None:
            e_tag, _, version = expected_version.partition(_VERSION_SEPARATOR)
            condition = {"e_tag": e_tag} if e_tag else {}
            if version:
                condition["version"] = version  # GCS compares generations
        try:
            result = obstore.put(self._store, key, bytes(data), mode=condition)
        except AlreadyExistsError:
            raise StorageConflictError(f"{path} already exists") from None
        except (PreconditionError, NotFoundError):
            if self.stat(path) is None:
                raise StorageConflictError(f"{path} does not exist; expected version {expected_version}") from None
            raise StorageConflictError(f"{path} changed: expected version {expected_version}") from None
        now_ms = int(time.time() * 1000)
        return FileStat(len(data), now_ms, now_ms, _version(result["e_tag"], result["version"]))

    def delete(self, path: str) -> bool:
        if self.stat(path) is None:
            return False
        self._remove(path)
        return True

    def _remove(self, path: str) -> None:
        """Delete an object without asking first whether it is there (a concurrent delete is no error)."""
        try:
            obstore.delete(self._store, self._key(path))
        except FileNotFoundError:
            pass  # GCS and Azure refuse to delete a missing object; S3 does not

    def make_directory(self, path: str) -> None:
        """Nothing: an object store has no directories, only key prefixes."""

    def delete_tree(self, path: str) -> None:
        key = self._key(path)
        keys = [meta["path"] for batch in obstore.list(self._store, key + "/" if key else None) for meta in batch]
        if keys:
            obstore.delete(self._store, keys)

    def remove_interrupted_puts(self, path: str) -> None:
        """Nothing: an interrupted ``put`` of an object leaves no object behind."""

    # -- exclusion ------------------------------------------------------------------------------

    def lock(self, path: str) -> ObjectLease:
        """A lease whose object is ``path`` (``ObjectLease``), lasting ``lease_ms``."""
        return ObjectLease(self, path, self.lease_ms)


_VERSION_SEPARATOR = "\n"


def _version(e_tag: str | None, version: str | None) -> str:
    """The token a conditional put compares: the ETag and, where the store has one, its object version (GCS's
    generation, which its conditional writes compare). S3's ETag is the content's hash, so two writes of the
    same bytes share it: a conditional writer cannot tell them from no write, which loses nothing."""
    return f"{e_tag or ''}{_VERSION_SEPARATOR}{version}" if version else e_tag or ""


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

    def __init__(self, storage: ObjectStorage, path: str, lease_ms: int = LEASE_MS) -> None:
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
        self, storage: ObjectStorage, path: str, owner: str, version: str, expires_ms: int, lease_ms: int
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
                    self._storage._remove(self._path)
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
