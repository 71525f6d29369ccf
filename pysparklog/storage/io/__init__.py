"""The storage seam: the one way the engine reaches the bytes of a log directory.

``Storage`` (``base``) is the contract; ``PosixStorage`` (``posix``) the filesystem backend and
``ObjectStorage`` (``object_store``, imported only where used: it loads obstore) the object-store one.
``storage_for(location)`` picks the backend for a log directory's location; it refuses object-store URLs
until the engine's commit protocol for them (docs/object-storage.md) is built, as a log directory there
needs it.
"""

from __future__ import annotations

import os

from pysparklog.errors import InvalidLogDirectoryError
from pysparklog.storage.io.base import (
    LOG_DIR_LOCK,
    FileStat,
    LockedRecord,
    PutMode,
    Storage,
    StorageLock,
    read_if_exists,
)
from pysparklog.storage.io.posix import PosixLock, PosixStorage

#: URL schemes of the object stores a log directory will live on; not served by this version.
OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss")


def storage_for(location: str | os.PathLike[str] | Storage) -> Storage:
    """The storage of a log directory: a filesystem path or a ``file://`` URL (a ``Storage`` as it is).

    Raises:
        InvalidLogDirectoryError: The location is a URL of a scheme this version cannot store logs on.
    """
    if isinstance(location, Storage):
        return location
    text = os.fspath(location)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return PosixStorage(text)
    if scheme == "file":
        return PosixStorage(rest)
    accepted = "a filesystem path or a file:// URL"
    if scheme in OBJECT_STORE_SCHEMES:
        raise InvalidLogDirectoryError(
            f"log directory {text!r}: object storage ({scheme}://) is not supported yet; accepted: {accepted}"
        )
    raise InvalidLogDirectoryError(f"log directory {text!r} has an unknown scheme {scheme!r}; accepted: {accepted}")


__all__ = [
    "LOG_DIR_LOCK",
    "FileStat",
    "LockedRecord",
    "OBJECT_STORE_SCHEMES",
    "PosixLock",
    "PosixStorage",
    "PutMode",
    "Storage",
    "StorageLock",
    "read_if_exists",
    "storage_for",
]
