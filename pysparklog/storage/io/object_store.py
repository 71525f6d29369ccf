"""The object-store backend of the storage seam: ``s3://`` (any S3-compatible store), ``gs://``,
``az://`` / ``abfss://``, through obstore (the Python binding of the Rust ``object_store`` crate).

Objects are written whole and never changed: there are no in-place writes, appends or renames here (it
is a ``Storage``, not a ``FileSystemStorage``), and the engine keeps its commit protocol on ``put`` alone
(docs/object-storage.md). The two conditional writes are the store's own: create-if-absent
(``If-None-Match: *``, GCS ``ifGenerationMatch=0``) and replace-if-version (``If-Match: <etag>``, GCS
generations), so exactly one of any number of writers on any number of hosts wins a name or a version.
There is no lock service either: ``lock`` gives a lease built from those two writes (``ObjectLease``, in
``pysparklog.storage.objects.lease``, with the object-store partition log it serves).

Paths are URLs below the root (``s3://bucket/prefix/t-0/00000000000000000000.log``), so that callers
compose them as they compose filesystem paths; the backend turns them into keys below the store's
prefix. A file's version is its ETag (its generation on GCS). Credentials and endpoints come from each
cloud's standard environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_ALLOW_HTTP``...), as
obstore reads them, plus the ``options`` given.
"""

from __future__ import annotations

import functools
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import from_url

from pysparklog.errors import (
    ConditionalWritesUnsupportedError,
    InvalidLogDirectoryError,
    NoSuchBucketError,
    PySparkLogError,
    StorageConflictError,
    StoreAccessDeniedError,
    StoreUnreachableError,
)
from pysparklog.storage.io.base import FileStat, PutMode
from pysparklog.storage.objects.lease import ObjectLease, lease_ms_from_environment

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


_Call = TypeVar("_Call", bound=Callable[..., Any])
#: The store's answers that say its bucket is not there, or that the credentials are refused (S3's error codes).
_NO_SUCH_BUCKET = "<Code>NoSuchBucket</Code>"
_DENIED = re.compile(r"<Code>(AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken)</Code>")
#: How obstore says a request got no answer, after its retries.
_UNANSWERED = ("error sending request", "connection refused", "timed out", "dns error")
_ENDPOINT = re.compile(r"performing \w+ (\w+://[^/\s]+)")


def _answered(call: _Call) -> _Call:
    """An ``ObjectStorage`` method whose store errors reach the caller as ``pysparklog.errors``, each one line that
    names the log directory, the endpoint asked and the setting to check, instead of obstore's error and its debug
    dump; a missing object stays ``FileNotFoundError``, which callers take for "not written yet"."""

    @functools.wraps(call)
    def answered(self: ObjectStorage, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self, *args, **kwargs)
        except PySparkLogError:
            raise
        except Exception as error:
            typed = self._typed(error)
            if typed is None:
                raise
            raise typed from None

    return answered  # type: ignore[return-value]


#: Where the check of conditional writes puts its probe object, below the log directory.
PROBE_DIRECTORY = ".pysparklog-probe"


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
        self._conditions_checked = False
        self._conditions_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ObjectStorage({self.root!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Its state without the lock of its check, which cannot be pickled: a store goes to Spark's executors
        inside a reader or writer, its check's answer with it."""
        state = dict(self.__dict__)
        del state["_conditions_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._conditions_lock = threading.Lock()

    def _typed(self, error: Exception) -> PySparkLogError | None:
        """The ``pysparklog.errors`` error a store's error means, or None for one it does not map (a missing object,
        a conditional write that lost, which the caller handles)."""
        text = str(error)
        found = _ENDPOINT.search(text)
        endpoint = found.group(1) if found else "the store's default endpoint"
        if _NO_SUCH_BUCKET in text:
            return NoSuchBucketError(
                f"the bucket of log directory {self.root} does not exist at {endpoint}: check the bucket's name in "
                "the URL, and the endpoint (AWS_ENDPOINT_URL or the endpoint option) and region (AWS_REGION) it is "
                "looked for at"
            )
        if isinstance(error, PermissionDeniedError | UnauthenticatedError) or _DENIED.search(text):
            return StoreAccessDeniedError(
                f"the object store at {endpoint} refused the credentials for log directory {self.root}: check "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the cloud's credentials) and the bucket's policy"
            )
        if isinstance(error, FileNotFoundError):
            return None
        if any(words in text.lower() for words in _UNANSWERED):
            return StoreUnreachableError(
                f"the object store of log directory {self.root} did not answer at {endpoint}, after its retries: "
                "check the endpoint (AWS_ENDPOINT_URL or the endpoint option), AWS_ALLOW_HTTP for http://, and the "
                "network"
            )
        return None

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

    @_answered
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

    @_answered
    def read_versioned(self, path: str) -> tuple[bytes, str] | None:
        """A whole object and its version, from one GET (a ``read`` then a ``stat`` could pair the content with a
        later version); None when it does not exist."""
        try:
            result = obstore.get(self._store, self._key(path))
        except FileNotFoundError:
            return None
        meta = result.meta
        return bytes(result.bytes()), _version(meta["e_tag"], meta["version"])

    @_answered
    def read_into(self, path: str, position: int, buffer: memoryview) -> int:
        """One ranged GET whose body is copied into ``buffer`` as it arrives: a large range (a commit's section, a
        staged object's) costs one copy into memory the caller keeps, not the client's assembled copy and then
        ours (which would fault in twice the pages, and did cost more than the copy itself)."""
        if not len(buffer):
            return 0
        target = memoryview(buffer).cast("B")
        try:
            result = obstore.get(self._store, self._key(path), options={"range": (position, position + len(target))})
        except FileNotFoundError:
            raise
        except Exception:  # a start at or past the end is refused (416): nothing to read, if the object is there
            if self._size(path) <= position:
                return 0
            raise
        filled = 0
        for chunk in result.stream(min_chunk_size=0):
            size = min(len(chunk), len(target) - filled)
            target[filled : filled + size] = memoryview(chunk)[:size]
            filled += size
        return filled

    def _size(self, path: str) -> int:
        stat = self.stat(path)
        if stat is None:
            raise FileNotFoundError(path)
        return stat.size

    @_answered
    def stat(self, path: str) -> FileStat | None:
        try:
            meta = obstore.head(self._store, self._key(path))
        except FileNotFoundError:
            return None
        modified_ms = int(meta["last_modified"].timestamp() * 1000)
        return FileStat(meta["size"], modified_ms, modified_ms, _version(meta["e_tag"], meta["version"]))

    @_answered
    def list_after(self, directory: str, after: str) -> list[str]:
        prefix = self._key(directory) + "/"
        found = obstore.list(self._store, prefix, offset=prefix + after, chunk_size=1000)
        names = [meta["path"][len(prefix) :] for batch in found for meta in batch]
        return sorted(name for name in names if "/" not in name)

    @_answered
    def list(self, directory: str) -> list[str]:
        key = self._key(directory)
        found = obstore.list_with_delimiter(self._store, key or None)
        names = [prefix.rsplit("/", 1)[-1] for prefix in found["common_prefixes"]]
        names += [meta["path"].rsplit("/", 1)[-1] for meta in found["objects"]]
        return sorted(set(names))

    @_answered
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
        """``Storage.put``; the first of this object's writes first checks that the store honours conditional writes
        (``check_conditional_writes``).

        Raises:
            ConditionalWritesUnsupportedError: The store ignores a condition.
            StorageConflictError: The condition failed.
        """
        if not self._conditions_checked:
            self.check_conditional_writes()
        return self._put(path, data, mode=mode, expected_version=expected_version)

    def check_conditional_writes(self) -> None:
        """Check, once per store object (one per log directory and settings in a process), that the store refuses
        a create-if-absent of an object that exists and a replace-if-version with a wrong version, on a probe object
        of its own below ``PROBE_DIRECTORY`` that it deletes again: five requests before the first write, so that a
        store that would let every writer win every name is refused before it can lose anything.

        Raises:
            ConditionalWritesUnsupportedError: The store ignored a condition.
        """
        with self._conditions_lock:
            if self._conditions_checked:
                return
            probe = self.join(PROBE_DIRECTORY, uuid.uuid4().hex)
            try:
                try:
                    version = self._put(probe, b"probe", mode=PutMode.CREATE).version
                except StorageConflictError:  # created by a try whose answer was lost, refused on the retry
                    version = ""
                self._expect_refused(probe, "If-None-Match: * (create only if absent)", mode=PutMode.CREATE)
                wrong = version + "-not-its-version"
                self._expect_refused(probe, "If-Match (replace only if still a version)", expected_version=wrong)
            finally:
                self.remove(probe)
            self._conditions_checked = True

    def _expect_refused(self, probe: str, condition: str, **put: Any) -> None:
        try:
            self._put(probe, b"overwritten", **put)
        except StorageConflictError:
            return
        raise ConditionalWritesUnsupportedError(
            f"the object store of {self.root} accepted a write whose condition {condition} did not hold: it ignores "
            "conditional writes, so writers of this log directory would overwrite each other's commits and lose "
            "acknowledged records; use a store that honours If-None-Match and If-Match (AWS S3, Google Cloud Storage, "
            "Azure Blob Storage, a current MinIO), or a gateway that passes both headers on"
        )

    @_answered
    def _put(
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
        self.remove(path)
        return True

    @_answered
    def remove(self, path: str) -> None:
        """Delete an object without asking first whether it is there (a concurrent delete is no error)."""
        try:
            obstore.delete(self._store, self._key(path))
        except FileNotFoundError:
            pass  # GCS and Azure refuse to delete a missing object; S3 does not

    def make_directory(self, path: str) -> None:
        """Nothing: an object store has no directories, only key prefixes."""

    @_answered
    def delete_all(self, paths: Sequence[str]) -> None:
        if paths:
            obstore.delete(self._store, [self._key(path) for path in paths])

    @_answered
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
