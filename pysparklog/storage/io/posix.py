"""The filesystem backend of the storage seam: a local disk or a shared POSIX filesystem (NFS).

Files change in place (``pwrite``), whole-file writes go through a temporary file that is fsynced and
renamed over the old one (then the directory is fsynced), and locks are ``flock`` locks. ``flock``
locks belong to an open file description, so two opens in one process exclude each other as two
processes do; Linux's NFS client maps ``flock`` onto POSIX byte-range locks, so the same lock holds
between hosts sharing the directory over NFS (docs/cluster.md says how to check a mount).

Conditional writes are what the object-store backend is built on; here ``CREATE`` is a hard link of
the fsynced temporary file (which fails when the name exists, atomically), and a replace-if-version
holds an exclusive ``flock`` on the current file while it compares the version and renames over it.
That ``flock`` is what makes the compare and the rename one step for concurrent writers, whatever lock
the caller holds: writers of one version all lock the same file (the one the version names), one at a
time, and each looks again once it has the lock, so the second finds the name pointing at the first's
new file and fails. It is taken on a descriptor opened for writing, as NFS (which emulates ``flock``
with byte-range locks) grants an exclusive lock on no other.

A file's version is its inode, size and modification time: a file put in its place since has another, unless
it reuses the inode number, has the same size and was written within the same tick of the clock, which a
holder whose lock lapsed cannot meet (the next holder takes the lock once the lapsed one's time has run out,
after the file it read was written). ``put`` returns the version of the file it wrote (its descriptor's, not
the name's, which another writer may have replaced already), and ``read_versioned`` the version of the file
it read.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from pysparklog.errors import StorageConflictError
from pysparklog.storage.io.base import FileStat, PutMode


class _FdRecord:
    """The lock file's bytes, read and written through the lock's own descriptor."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, size: int) -> bytes:
        return os.pread(self.fd, size, 0)

    def write(self, data: bytes) -> None:
        os.pwrite(self.fd, data, 0)


class PosixLock:
    """An exclusive/shared ``flock`` on one file, also excluding the threads of this process.

    Args:
        path: The lock file (created on first exclusive use).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._thread_lock = threading.RLock()

    def _open(self, *, create: bool) -> int | None:
        if self._fd is None:
            flags = os.O_RDWR | (os.O_CREAT if create else 0)
            try:
                self._fd = os.open(self.path, flags, 0o644)
            except FileNotFoundError:
                if not create:
                    return None
                os.makedirs(os.path.dirname(self.path), exist_ok=True)  # the lock's directory comes with it
                self._fd = os.open(self.path, flags, 0o644)
            except PermissionError:
                if create:
                    raise
                self._fd = os.open(self.path, os.O_RDONLY)  # a read-only log directory can still be read
        return self._fd

    @contextmanager
    def exclusive(self) -> Iterator[_FdRecord]:
        with self._thread_lock:
            fd = self._open(create=True)
            assert fd is not None
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield _FdRecord(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    @contextmanager
    def try_exclusive(self) -> Iterator[_FdRecord | None]:
        if not self._thread_lock.acquire(blocking=False):
            yield None
            return
        try:
            fd = self._open(create=True)
            assert fd is not None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield None
                return
            try:
                yield _FdRecord(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    @contextmanager
    def shared(self) -> Iterator[_FdRecord | None]:
        with self._thread_lock:
            fd = self._open(create=False)
            if fd is None:
                yield None
                return
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                yield _FdRecord(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._thread_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _version(st: os.stat_result) -> str:
    """Changes with every write: a rename brings a new inode, an in-place write a new size or mtime."""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _stat_of(st: os.stat_result) -> FileStat:
    return FileStat(st.st_size, st.st_mtime_ns // 1_000_000, st.st_ctime_ns // 1_000_000, _version(st))


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _ignore_missing(
    function: Callable[..., Any], path: str, info: tuple[type[BaseException], BaseException, TracebackType]
) -> None:
    """``shutil.rmtree``'s error handler: another process removing the same tree is no error."""
    if not issubclass(info[0], FileNotFoundError):
        raise info[1]


class PosixStorage:
    """A log directory on a filesystem.

    Args:
        root: The directory (made absolute; created by the first write below it).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))

    def __repr__(self) -> str:
        return f"PosixStorage({self.root!r})"

    def join(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    # -- reading --------------------------------------------------------------------------------

    def read(self, path: str, position: int = 0, length: int | None = None) -> bytes:
        with open(path, "rb", buffering=0) as f:
            if position:
                f.seek(position)
            return f.read() if length is None else f.read(length)

    def read_versioned(self, path: str) -> tuple[bytes, str] | None:
        """The whole file and the version of the very file read: its descriptor's, so a rename over the name
        cannot pair the content with another file's version. The version is taken before the read, so a write in
        place meanwhile leaves it behind the content, and a conditional ``put`` on it fails rather than pass over
        a change it did not read. None when the file does not exist."""
        try:
            f = open(path, "rb", buffering=0)
        except FileNotFoundError:
            return None
        with f:
            version = _version(os.fstat(f.fileno()))
            return f.read(), version

    def read_into(self, path: str, position: int, buffer: memoryview) -> int:
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.preadv(fd, [buffer], position)
        finally:
            os.close(fd)

    def stat(self, path: str) -> FileStat | None:
        try:
            return _stat_of(os.stat(path))
        except FileNotFoundError:
            return None

    def list_after(self, directory: str, after: str) -> list[str]:
        return [name for name in self.list(directory) if name > after and os.path.isfile(f"{directory}/{name}")]

    def list(self, directory: str) -> list[str]:
        try:
            return sorted(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def is_directory(self, path: str) -> bool:
        return os.path.isdir(path)

    # -- whole-file writes ----------------------------------------------------------------------

    def put(
        self, path: str, data: bytes, *, mode: PutMode = PutMode.OVERWRITE, expected_version: str | None = None
    ) -> FileStat:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
                if mode is PutMode.CREATE:
                    self._create(tmp, path)
                elif expected_version is not None:
                    self._replace_if(tmp, path, expected_version)
                else:
                    os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
            _fsync_path(directory)
            # The file written, now under the name: stat(path) could see a file another writer renamed over it
            # since, and a version of that file would let the caller's next conditional write replace it.
            return _stat_of(os.fstat(fd))
        finally:
            os.close(fd)

    @staticmethod
    def _create(tmp: str, path: str) -> None:
        try:
            os.link(tmp, path)  # atomic: fails when the name exists
        except FileExistsError:
            raise StorageConflictError(f"{path} already exists") from None

    @staticmethod
    def _replace_if(tmp: str, path: str, expected_version: str) -> None:
        try:
            fd = os.open(path, os.O_RDWR)  # for writing: NFS grants an exclusive flock on no other descriptor
        except FileNotFoundError:
            raise StorageConflictError(f"{path} does not exist; expected version {expected_version}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = os.stat(path)
            # Still the file this descriptor opened (no rename replaced it) and still the version expected.
            if current.st_ino != os.fstat(fd).st_ino or _version(current) != expected_version:
                raise StorageConflictError(f"{path} changed: version {_version(current)}, expected {expected_version}")
            os.replace(tmp, path)
        finally:
            os.close(fd)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def delete(self, path: str) -> bool:
        try:
            os.remove(path)
        except FileNotFoundError:
            return False
        return True

    def delete_all(self, paths: Sequence[str]) -> None:
        for path in paths:
            self.delete(path)

    def make_directory(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def delete_tree(self, path: str) -> None:
        shutil.rmtree(path, onerror=_ignore_missing)

    def remove_interrupted_puts(self, path: str) -> None:
        directory, name = os.path.split(path)
        for entry in self.list(directory):
            if entry.startswith(f"{name}.tmp."):
                self.delete(os.path.join(directory, entry))

    # -- in-place writes ------------------------------------------------------------------------

    def write_at(self, path: str, position: int, data: bytes | memoryview) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            written = 0
            try:
                while written < len(view):
                    written += os.pwrite(fd, view[written:], position + written)
            except BaseException:
                os.ftruncate(fd, position)
                raise
        finally:
            os.close(fd)

    def append(self, path: str, data: bytes | memoryview) -> None:
        with open(path, "ab") as f:
            f.write(data)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def sync(self, path: str) -> None:
        try:
            _fsync_path(path)
        except FileNotFoundError:
            pass

    def set_modified(self, path: str, modified_ms: int) -> None:
        modified_ns = modified_ms * 1_000_000
        os.utime(path, ns=(modified_ns, modified_ns))

    def lock(self, path: str) -> PosixLock:
        return PosixLock(path)
