"""A partition directory's segments and the files around them (Kafka's ``LogSegments`` with the file
handling of ``LocalLog``): listing, creating, retiring and deleting segments, and the clean-up of what
a dead process left behind. It keeps no state of its own beyond caches of what the storage lists.
"""

from __future__ import annotations

import bisect

from pysparklog.storage.io import FileSystemStorage
from pysparklog.storage.segment import DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, LogSegment, parse_segment_name

_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


class LogSegments:
    """The segments of one partition directory.

    Args:
        storage: The log directory's storage.
        directory: The partition directory, a path of ``storage``.
    """

    def __init__(self, storage: FileSystemStorage, directory: str) -> None:
        self.storage = storage
        self.directory = directory
        self._segments: dict[int, LogSegment] = {}
        self.bases: list[int] = []  # as last listed
        self.listed_generation = -1  # the state's segments generation when ``bases`` was listed

    def path(self, name: str) -> str:
        """The path of the file ``name`` of the partition directory."""
        return f"{self.directory}/{name}"

    def names(self) -> list[str]:
        """The names of the partition directory's files, sorted; [] when it does not exist."""
        return self.storage.list(self.directory)

    def get(self, base: int) -> LogSegment:
        """The segment at ``base`` (kept, so that its loaded indexes are reused)."""
        segment = self._segments.get(base)
        if segment is None:
            segment = self._segments[base] = LogSegment(self.directory, base, storage=self.storage)
        return segment

    def opened(self) -> int:
        """How many segments are kept: segments are opened lazily, only where reads and writes go."""
        return len(self._segments)

    def forget(self, base: int) -> None:
        """Drop the kept segment at ``base`` (its files were swapped or deleted)."""
        self._segments.pop(base, None)

    def list(self) -> list[int]:
        """The base offsets of the segments whose ``.log`` is there, sorted (and kept as ``bases``)."""
        self.bases = sorted(b for b in (parse_segment_name(n) for n in self.names()) if b is not None)
        return self.bases

    def create(self, base: int) -> LogSegment:
        """A new empty segment at ``base`` (``LogSegment.create``)."""
        self.storage.make_directory(self.directory)
        segment = self.get(base)
        segment.create()
        if base not in self.bases:
            bisect.insort(self.bases, base)
        return segment

    def delete(self, base: int) -> None:
        """Remove the segment's files now (recovery drops segments past a torn one)."""
        self.get(base).delete_files()
        self.forget(base)

    def retire(self, base: int) -> None:
        """Rename the segment's files ``.deleted``, removed once readers are done (``remove_deleted_files``)."""
        self.get(base).rename_files(DELETED_SUFFIX)
        self.forget(base)

    def remove_deleted_files(self, now_ms: int, delay_ms: int) -> int:
        """Remove ``.deleted`` files retired more than ``delay_ms`` ago; returns how many."""
        removed = 0
        for name in self.names():
            if not name.endswith(DELETED_SUFFIX):
                continue
            path = self.path(name)
            stat = self.storage.stat(path)
            if stat is not None and now_ms - stat.changed_ms >= delay_ms and self.storage.delete(path):
                removed += 1
        return removed

    def remove_stray_files(self) -> None:
        """Startup clean-up as ``LogLoader`` does it: leftover temporary files and orphan indexes.

        A swap that started is finished from its marker before this runs, so a ``.swap`` file here is
        an orphan. ``.cleaned`` files are left to the cleaner, which may be writing them now and removes
        stale ones when it takes its own lock.
        """
        names = self.names()
        present = set(names)
        for name in names:
            if name.endswith((DELETED_SUFFIX, SWAP_SUFFIX)) or ".tmp." in name:
                self.storage.delete(self.path(name))
            elif name.endswith(_INDEX_SUFFIXES) and name.rsplit(".", 1)[0] + LOG_SUFFIX not in present:
                self.storage.delete(self.path(name))
