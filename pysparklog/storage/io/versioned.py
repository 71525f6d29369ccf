"""Metadata read-modify-writes: a small file read with its version, and written back only if still that version.

A log directory's metadata (its topics, the next producer id, each group's membership, each transactional id's
state, each sink's last decision) is small files changed by read-modify-write under a lock: an ``flock`` on a
filesystem, a lease on an object store (``ObjectLease``). The lock serialises holders that keep it; it cannot keep
out one whose lease ran out while it stalled (stopped, swapped out, paused by a garbage collector longer than the
lease): another process takes the lease over and changes the file, and the stalled holder, once it resumes, would
write what it computed from the older content over the newer one (a group's partitions handed back to a member
that lost them, a transaction's state taken back from ``CompleteCommit`` to ``PrepareCommit`` of an older epoch).

So every such write goes through a ``VersionedFile``: read with its version in one request
(``Storage.read_versioned``), replaced only if it is still that version (``put(expected_version=...)``), or
created only if still absent (``PutMode.CREATE``). The lock keeps the well-behaved holders from conflicting; the
condition makes a stale holder's write fail with ``MetadataChangedError``, writing nothing.

Example:
    >>> with storage.lock(lock_path).exclusive():
    ...     state = VersionedFile.read(storage, path)
    ...     state.write(change(state.data))
"""

from __future__ import annotations

from pysparklog.errors import MetadataChangedError, StorageConflictError
from pysparklog.storage.io.base import PutMode, Storage


class VersionedFile:
    """One metadata file as its holder last read or wrote it, and the conditional write of its next content.

    Attributes:
        storage: The log directory's storage.
        path: The file.
        data: Its content; None when it did not exist.
        version: The version of that content; None when the file did not exist.
    """

    __slots__ = ("data", "path", "storage", "version")

    def __init__(self, storage: Storage, path: str, data: bytes | None, version: str | None) -> None:
        self.storage = storage
        self.path = path
        self.data = data
        self.version = version

    def __repr__(self) -> str:
        return f"VersionedFile({self.path!r}, version={self.version!r})"

    @classmethod
    def read(cls, storage: Storage, path: str) -> VersionedFile:
        """The file's content and version, read together (under the caller's lock, for a change)."""
        found = storage.read_versioned(path)
        data, version = found if found is not None else (None, None)
        return cls(storage, path, data, version)

    def write(self, data: bytes) -> None:
        """Replace the file with ``data`` if it is still the version read or last written here (create it if it
        was absent); this is then that new content and version, for a further write in the same holding.

        Raises:
            MetadataChangedError: Another process wrote (or created, or deleted) the file since: this holder's
                lock lapsed. Nothing was written.
        """
        try:
            if self.version is None:
                written = self.storage.put(self.path, data, mode=PutMode.CREATE)
            else:
                written = self.storage.put(self.path, data, expected_version=self.version)
        except StorageConflictError:
            raise MetadataChangedError(
                f"{self.path} changed after this process read it under its lock, which lapsed (a lease that ran out "
                "while the process stalled) and was taken by another process; nothing was written: run the operation "
                "again, which reads the newer state"
            ) from None
        self.data, self.version = data, written.version
