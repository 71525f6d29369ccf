"""The storage seam: everything the engine asks of the place a log directory lives.

The engine (segments, indexes, the state record, checkpoints, topic, group, transaction and sink
files) reaches its bytes only through a :class:`Storage`. Two kinds of backend sit behind it, and the
contract is split accordingly:

- :class:`Storage` is what every backend honours: whole-file reads (ranged too), ``stat``, listings,
  atomic ``put`` with its two conditions, create-if-absent (:attr:`PutMode.CREATE`) and
  replace-if-version (``put(..., expected_version=...)``), deletes, and a lock for exclusion. An
  **object store** (``s3://``, ``gs://``, ``abfss://``) offers exactly that: objects are immutable
  once written, an append is a new object, the log keeps its commit protocol on ``put`` alone there,
  and its locks are leases made of the two conditional writes, holding no record.
- :class:`FileSystemStorage` is what a **filesystem** (local disk, NFS) adds: files change in place
  (``write_at``, ``append``, ``truncate``, ``set_modified``, durable after ``sync``), ``rename`` is
  atomic, and its locks (``flock``) hold a small record. A Kafka log of segments and indexes needs
  them, so the local partition log takes a ``FileSystemStorage``;
  :class:`~pysparklog.storage.io.posix.PosixStorage` is that backend.

Code that treats the two differently asks ``isinstance(storage, FileSystemStorage)``: there is no flag
to keep in step with the methods a backend has.

Paths are strings in the backend's own form (a filesystem path, or a key below the store's root);
:meth:`Storage.join` builds them, so no caller concatenates separators itself.

The contract, in the words an implementation must honour:

- ``read`` never returns bytes past what ``stat`` reported at the time of the call's start, other
  than bytes appended since; a missing file raises ``FileNotFoundError``.
- ``read_versioned`` returns a whole file with the version of that very content, in one request where
  the backend can: what a conditional ``put`` of a read-modify-write compares against.
- ``put`` is atomic and durable: a reader sees the old content or the new, never a mix, and the new
  content survives a machine crash once ``put`` returns.
- ``put`` with ``mode=PutMode.CREATE`` fails with :class:`~pysparklog.errors.StorageConflictError` when
  the path exists; with ``expected_version`` it fails with the same error when the file's current
  version differs (or it does not exist). Exactly one of any number of concurrent conditional
  writers of one version wins.
- ``lock(path)`` gives a lock that excludes across threads, processes and hosts sharing the directory. An
  object store's lease holds no record (what its ``exclusive`` yields refuses reads and writes) and its
  ``shared`` takes nothing, as readers of objects that never change need no lock.
- a filesystem's ``write_at``/``append``/``truncate``/``set_modified`` change a file in place and are durable
  only after ``sync``; its lock holds a small record (the lock file's own bytes) that its holders read and
  write (:class:`FileSystemLock`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

LOG_DIR_LOCK = ".lock"
"""The lock file of a log directory (the name Kafka's LogManager locks): held while its shared files change."""


class PutMode(enum.Enum):
    """How ``Storage.put`` treats a file that already exists."""

    OVERWRITE = "overwrite"
    """Replace it (or create it)."""
    CREATE = "create"
    """Fail with ``StorageConflictError`` if it exists: create-if-absent, the sequencer of a commit log."""


@dataclass(frozen=True, slots=True)
class FileStat:
    """What a backend knows of one file without reading it.

    Attributes:
        size: Bytes in the file.
        modified_ms: Last modification, milliseconds since the epoch (Kafka's fallback for time retention).
        changed_ms: Last change of the file's metadata, a rename included (when a ``.deleted`` file was retired).
        version: An opaque token that changes whenever the content does: the ``expected_version`` of a
            conditional ``put`` (an ETag or generation on object stores).
    """

    size: int
    modified_ms: int
    changed_ms: int
    version: str


@runtime_checkable
class LockedRecord(Protocol):
    """The small record a lock holds (``pysparklog.state`` is one), readable and writable while locked."""

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes from the record's start (fewer, or none, when it is shorter)."""
        ...

    def write(self, data: bytes) -> None:
        """Overwrite the record's start with ``data``."""
        ...


@runtime_checkable
class StorageLock(Protocol):
    """A lock excluding across threads, processes and hosts, on one file of the directory.

    What a holding yields is the backend's: a filesystem's lock holds a record (``FileSystemLock``), an object
    store's lease none, so code written for every backend only uses the exclusion.
    """

    def exclusive(self) -> AbstractContextManager[object]:
        """Hold the lock alone (creating its file, and the directory holding it, on first use)."""
        ...

    def try_exclusive(self) -> AbstractContextManager[object | None]:
        """Hold it alone if nobody holds it now; None (holding nothing) otherwise."""
        ...

    def shared(self) -> AbstractContextManager[object | None]:
        """Hold it with other readers; None (holding nothing) when no writer ever created the file, or when the
        backend's readers need no lock (an object store's objects never change)."""
        ...

    def close(self) -> None:
        """Release the resources the lock keeps between uses."""
        ...


@runtime_checkable
class FileSystemLock(StorageLock, Protocol):
    """A filesystem's lock (``flock``): its holders read and write the small record the lock file holds."""

    def exclusive(self) -> AbstractContextManager[LockedRecord]:
        """Hold the lock alone (creating its file, and the directory holding it, on first use)."""
        ...

    def try_exclusive(self) -> AbstractContextManager[LockedRecord | None]:
        """Hold it alone if nobody holds it now; None (holding nothing) otherwise."""
        ...

    def shared(self) -> AbstractContextManager[LockedRecord | None]:
        """Hold it with other readers; None (holding nothing) when no writer ever created the file."""
        ...


@runtime_checkable
class Storage(Protocol):
    """One log directory's storage: what every backend honours (see the module docstring for the contract)."""

    root: str
    """Where the log directory is: a filesystem path, or the store's URL."""

    def join(self, *parts: str) -> str:
        """The path of ``parts`` below the root (``join()`` is the root itself)."""
        ...

    # -- reading --------------------------------------------------------------------------------

    def read(self, path: str, position: int = 0, length: int | None = None) -> bytes:
        """Bytes ``[position, position + length)`` of a file (to its end without ``length``)."""
        ...

    def read_versioned(self, path: str) -> tuple[bytes, str] | None:
        """A whole file and the version of that content (``FileStat.version``), read together: a ``read`` and
        a ``stat`` could pair the content with the version of a later write. None when it does not exist."""
        ...

    def read_into(self, path: str, position: int, buffer: memoryview) -> int:
        """Fill ``buffer`` from ``position``; returns how many bytes were read (fewer at the end)."""
        ...

    def stat(self, path: str) -> FileStat | None:
        """The file's size, times and version; None when it does not exist."""
        ...

    def list_after(self, directory: str, after: str) -> list[str]:
        """The names of the files directly below ``directory`` that sort after ``after``, sorted: on an object store
        one listing request (a thousand names each) that starts there, however many names sort before it."""
        ...

    def list(self, directory: str) -> list[str]:
        """The names directly below ``directory``, files and directories, sorted; [] when it is missing."""
        ...

    def is_directory(self, path: str) -> bool:
        """Whether ``path`` holds other paths (a partition directory)."""
        ...

    # -- whole-file writes ----------------------------------------------------------------------

    def put(
        self, path: str, data: bytes, *, mode: PutMode = PutMode.OVERWRITE, expected_version: str | None = None
    ) -> FileStat:
        """Write a whole file atomically and durably; returns its new stat (with the new version).

        Raises:
            StorageConflictError: ``mode`` is ``CREATE`` and the file exists, or ``expected_version`` is
                not the file's current version.
        """
        ...

    def delete(self, path: str) -> bool:
        """Remove a file; False when it was already gone."""
        ...

    def delete_all(self, paths: Sequence[str]) -> None:
        """Remove files, those already gone being no error: on an object store one bulk request per thousand."""
        ...

    def make_directory(self, path: str) -> None:
        """Create a directory and its parents (nothing on stores without directories)."""
        ...

    def delete_tree(self, path: str) -> None:
        """Remove a directory and everything below it; a concurrent removal is no error."""
        ...

    def remove_interrupted_puts(self, path: str) -> None:
        """Remove what a ``put`` of ``path`` killed mid-write left: a filesystem's ``put`` writes a temporary file
        first, an object store's leaves nothing. Only for a caller holding the lock every writer of ``path``
        holds, so that no ``put`` is under way."""
        ...

    # -- exclusion ------------------------------------------------------------------------------

    def lock(self, path: str) -> StorageLock:
        """The lock whose file is ``path`` (on an object store, the lease object)."""
        ...


@runtime_checkable
class FileSystemStorage(Storage, Protocol):
    """A filesystem's storage: the common contract, plus files changed in place, atomic renames and locks
    holding a record, which a Kafka log of segments, indexes and a state record is made of."""

    def rename(self, source: str, target: str) -> None:
        """Move a file, replacing ``target``; ``FileNotFoundError`` when ``source`` is missing."""
        ...

    # -- in-place writes ------------------------------------------------------------------------

    def write_at(self, path: str, position: int, data: bytes | memoryview) -> None:
        """Write ``data`` at ``position``, creating the file; a partial write is undone before raising."""
        ...

    def append(self, path: str, data: bytes | memoryview) -> None:
        """Add ``data`` at the end of a file, creating it."""
        ...

    def truncate(self, path: str, size: int) -> None:
        """Cut a file to ``size`` bytes."""
        ...

    def sync(self, path: str) -> None:
        """Make a file's in-place writes, or a directory's new entries and renames, durable (fsync); a missing
        file is no error."""
        ...

    def set_modified(self, path: str, modified_ms: int) -> None:
        """Set a file's modification time: a compacted segment keeps the time of the segments it
        replaces, which time retention goes by (Kafka's ``File.setLastModified``)."""
        ...

    def lock(self, path: str) -> FileSystemLock:
        """The ``flock`` whose file is ``path``, holding the file's bytes as its record."""
        ...


def read_if_exists(storage: Storage, path: str) -> bytes | None:
    """A whole file, or None when it does not exist: the read every small state file starts with."""
    try:
        return storage.read(path)
    except FileNotFoundError:
        return None


def read_writable(storage: Storage, path: str, position: int, length: int) -> bytearray:
    """``length`` bytes of a file from ``position`` (fewer when it ends first) in a new buffer the caller may change:
    batches a replica numbers again in place arrive there straight from the store, with no copy between.

    Raises:
        FileNotFoundError: The file does not exist.
    """
    buffer = bytearray(length)
    got = storage.read_into(path, position, memoryview(buffer))
    del buffer[got:]
    return buffer
