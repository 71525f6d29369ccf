"""A lock that works across processes (Spark tasks are processes) and across threads.

``flock`` locks belong to an open file description, so two opens in one process exclude each
other like two processes do; Linux's NFS client maps ``flock`` onto POSIX byte-range locks, so the
same lock holds between hosts sharing the log directory over NFS.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

LOG_DIR_LOCK = ".lock"
"""The lock file of a log directory (the name Kafka's LogManager locks): held while its shared files change."""


class FileLock:
    """An exclusive/shared lock on one file; the file is created on first exclusive use.

    Args:
        path: The lock file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._thread_lock = threading.RLock()

    def fileno(self, *, create: bool) -> int | None:
        """The open file, opening it on first use; None when it does not exist and ``create`` is False."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
            except FileNotFoundError:
                if create:
                    raise
                return None
            except PermissionError:
                if create:
                    raise
                self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    @contextmanager
    def exclusive(self) -> Iterator[int]:
        """Hold the lock alone; yields the lock file's descriptor."""
        with self._thread_lock:
            fd = self.fileno(create=True)
            assert fd is not None
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    @contextmanager
    def try_exclusive(self) -> Iterator[int | None]:
        """Hold the lock alone if nobody holds it; yields the descriptor, or None (holding nothing) when
        another process or thread does. For work that one holder at a time does and others skip."""
        if not self._thread_lock.acquire(blocking=False):
            yield None
            return
        try:
            fd = self.fileno(create=True)
            assert fd is not None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield None
                return
            try:
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    @contextmanager
    def shared(self) -> Iterator[int | None]:
        """Hold the lock with other readers; yields None (and locks nothing) when no writer ever made the file."""
        with self._thread_lock:
            fd = self.fileno(create=False)
            if fd is None:
                yield None
                return
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._thread_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
