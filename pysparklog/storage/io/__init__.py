"""The storage seam: the one way the engine reaches the bytes of a log directory.

``Storage`` (``base``) is the contract every backend honours and ``FileSystemStorage`` what a filesystem adds
(in-place writes, renames, locks holding a record); ``PosixStorage`` (``posix``) is the filesystem backend and
``ObjectStorage`` (``object_store``) the object-store one, imported only when a log directory is on an
object store (it loads obstore, which a filesystem path never needs).

``storage_for(location, options)`` picks the backend for a log directory's location: a filesystem path or a
``file://`` URL, or an object-store URL (``s3://bucket/prefix``, ``s3a://`` read as ``s3://``, ``gs://``,
``az://``, ``abfs://``, ``abfss://``). It is called where a location comes in (``LogDirectory(url)``, the
command line's ``--log-dir``, the Spark data source's ``path``); everything given a ``LogDirectory`` uses its
``storage``. An object store is made once per root URL and options in a process and kept, so that a location
given again without options (a log directory opened again from its URL) gets the store, and the options (an
endpoint, credentials: Spark's ``storage.*`` options), that the first caller gave for that root, or for a root
above it. Without options a store takes its credentials and endpoint from the cloud's standard environment
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``,
``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_NAME``...), as obstore reads it. A forked child forgets the
stores its parent made: their connections belong to the parent's runtime.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from pysparklog.errors import InvalidLogDirectoryError
from pysparklog.storage.io.base import (
    LOG_DIR_LOCK,
    FileStat,
    FileSystemLock,
    FileSystemStorage,
    LockedRecord,
    PutMode,
    Storage,
    StorageLock,
    read_if_exists,
    read_writable,
)
from pysparklog.storage.io.posix import PosixLock, PosixStorage
from pysparklog.storage.io.versioned import VersionedFile

#: URL schemes of the object stores a log directory can live on.
OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss")
#: Schemes read as another: Hadoop's S3A connector names the same buckets ``s3a://``.
_SCHEME_ALIASES = {"s3a": "s3"}
_ACCEPTED = (
    "a filesystem path, a file:// URL, or an object-store URL: s3://<bucket>[/<prefix>] (or s3a://), "
    "gs://<bucket>[/<prefix>], az://<container>[/<prefix>], abfs[s]://<container>@<account>.dfs.core.windows.net"
    "[/<prefix>]"
)

_Options = tuple[tuple[str, str], ...]
_object_stores: dict[tuple[str, _Options], Storage] = {}
_first_options: dict[str, _Options] = {}  # root URL -> the options of the first store made for it
_object_stores_lock = threading.Lock()


def _forget_object_stores() -> None:
    global _object_stores_lock
    _object_stores.clear()
    _first_options.clear()
    _object_stores_lock = threading.Lock()  # a fork may have copied it held


os.register_at_fork(after_in_child=_forget_object_stores)


def storage_for(location: str | os.PathLike[str] | Storage, options: Mapping[str, str] | None = None) -> Storage:
    """The storage of a log directory (a ``Storage`` as it is).

    Args:
        location: A filesystem path, a ``file://`` URL, an object-store URL or a ``Storage``.
        options: An object store's settings beyond the environment's (obstore's config keys, such as
            ``aws_endpoint`` or ``aws_region``): kept for the root, so later calls without options get them. A
            filesystem takes none and ignores them.

    Raises:
        InvalidLogDirectoryError: The location is a URL of another scheme, names no bucket, or the store refuses
            it or its options.
    """
    if isinstance(location, Storage):
        return location
    text = os.fspath(location)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return PosixStorage(text)
    scheme = scheme.lower()
    if scheme == "file":
        return PosixStorage(rest)
    if scheme not in OBJECT_STORE_SCHEMES:
        raise InvalidLogDirectoryError(
            f"log directory {text!r} has an unknown scheme {scheme!r}; accepted: {_ACCEPTED}"
        )
    rest = rest.rstrip("/")
    if not rest.split("/", 1)[0]:
        raise InvalidLogDirectoryError(f"log directory {text!r} names no bucket or container; accepted: {_ACCEPTED}")
    return _object_storage(f"{_SCHEME_ALIASES.get(scheme, scheme)}://{rest}", options)


def file_system_for(location: str | os.PathLike[str] | Storage) -> FileSystemStorage:
    """The storage of a location that must be a filesystem: a Kafka log of segments changes its files in place.

    Raises:
        InvalidLogDirectoryError: The location is on an object store (whose partitions are ``ObjectPartitionLog``
            objects, made by ``LogDirectory.partition``), or no storage serves it.
    """
    storage = storage_for(location)
    if not isinstance(storage, FileSystemStorage):
        raise InvalidLogDirectoryError(
            f"{storage.root} is on an object store, where files cannot change in place; accepted: a filesystem path "
            "(open a partition on an object store with LogDirectory(url).partition(topic, partition))"
        )
    return storage


def _object_storage(root: str, options: Mapping[str, str] | None) -> Storage:
    """The store of ``root`` with ``options`` (those first given for it, or for a root above it, when None)."""
    from pysparklog.storage.io.object_store import ObjectStorage  # loads obstore: only for object stores

    with _object_stores_lock:
        if options is not None:
            key = tuple(sorted((str(name), str(value)) for name, value in options.items()))
        elif root in _first_options:
            key = _first_options[root]
        else:
            above = [known for known in _first_options if root.startswith(known + "/")]
            key = _first_options[max(above, key=len)] if above else ()
        store = _object_stores.get((root, key))
        if store is None:
            store = _object_stores[(root, key)] = ObjectStorage(root, dict(key))
        _first_options.setdefault(root, key)
        return store


__all__ = [
    "LOG_DIR_LOCK",
    "FileStat",
    "FileSystemLock",
    "FileSystemStorage",
    "LockedRecord",
    "OBJECT_STORE_SCHEMES",
    "PosixLock",
    "PosixStorage",
    "PutMode",
    "Storage",
    "StorageLock",
    "VersionedFile",
    "file_system_for",
    "read_if_exists",
    "read_writable",
    "storage_for",
]
