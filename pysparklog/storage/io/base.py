"""The storage seam: everything the engine asks of the place a log directory lives.

The engine (segments, indexes, the state record, checkpoints, topic, group, transaction and sink
files) reaches its bytes only through a :class:`Storage`. Two kinds of backend are meant to sit behind
it:

- a **filesystem** (local disk, NFS): files change in place, appends extend them, and exclusion comes
  from locks (``flock``). :class:`~pysparklog.storage.io.posix.PosixStorage` is that backend and is
  today's behaviour.
- an **object store** (``s3://``, ``gs://``, ``abfss://``): objects are immutable once written, an
  append is a new object, and exclusion comes from conditional writes: create-if-absent
  (:attr:`PutMode.CREATE`) and replace-if-version (``put(..., expected_version=...)``). Such a backend
  says so with ``in_place_writes = False`` and does not offer ``write_at``/``append``/``truncate`` or
  ``set_modified``; the log keeps its commit protocol on ``put`` alone there, and its locks are leases
  made of those two writes, holding no record.

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
- ``write_at``/``append``/``truncate``/``set_modified`` change a file in place (filesystems only) and are durable only
  after ``sync``.
- ``lock(path)`` gives a lock that excludes across threads, processes and hosts sharing the directory. On a
  filesystem it holds a small record (the lock file's own bytes) that its holders read and write; an object
  store's lease holds none (its record refuses reads and writes) and its ``shared`` takes nothing, as readers
  of objects that never change need no lock.
"""

from __future__ import annotations

import enum
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
    """A lock excluding across threads, processes and hosts, on one file of the directory."""

    def exclusive(self) -> AbstractContextManager[LockedRecord]:
        """Hold the lock alone (creating its file, and the directory holding it, on first use)."""
        ...

    def try_exclusive(self) -> AbstractContextManager[LockedRecord | None]:
        """Hold it alone if nobody holds it now; None (holding nothing) otherwise."""
        ...

    def shared(self) -> AbstractContextManager[LockedRecord | None]:
        """Hold it with other readers; None (holding nothing) when no writer ever created the file."""
        ...

    def close(self) -> None:
        """Release the resources the lock keeps between uses."""
        ...


@runtime_checkable
class Storage(Protocol):
    """One log directory's storage (see the module docstring for the contract)."""

    root: str
    """Where the log directory is: a filesystem path, or the store's URL."""

    in_place_writes: bool
    """True where ``write_at``/``append``/``truncate`` work and a lock holds a record (filesystems); False on
    object stores."""

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

    def rename(self, source: str, target: str) -> None:
        """Move a file, replacing ``target``; ``FileNotFoundError`` when ``source`` is missing."""
        ...

    def delete(self, path: str) -> bool:
        """Remove a file; False when it was already gone."""
        ...

    def make_directory(self, path: str) -> None:
        """Create a directory and its parents (nothing on stores without directories)."""
        ...

    def delete_tree(self, path: str) -> None:
        """Remove a directory and everything below it; a concurrent removal is no error."""
        ...

    # -- in-place writes (filesystems) ----------------------------------------------------------

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
        """Make a file's in-place writes durable (fsync); a missing file is no error."""
        ...

    def set_modified(self, path: str, modified_ms: int) -> None:
        """Set a file's modification time: a compacted segment keeps the time of the segments it
        replaces, which time retention goes by (Kafka's ``File.setLastModified``)."""
        ...

    def lock(self, path: str) -> StorageLock:
        """The lock whose file is ``path`` (on an object store, the lease object)."""
        ...


def read_if_exists(storage: Storage, path: str) -> bytes | None:
    """A whole file, or None when it does not exist: the read every small state file starts with."""
    try:
        return storage.read(path)
    except FileNotFoundError:
        return None
