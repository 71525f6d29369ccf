"""What the storage engine needs from the filesystem under a log directory, checked on that filesystem.

A log directory may live on a local disk, on ``/dev/shm`` or on a shared mount (NFS, a FUSE filesystem...).
The engine relies on a few properties of it; each test here checks one, on pytest's ``tmp_path``, on
``/dev/shm`` when there is one, and on the directory named by ``$PYSPARKLOG_FS_CHECK_DIR`` when it is set::

    PYSPARKLOG_FS_CHECK_DIR=/mnt/shared .venv/bin/pytest -q -p no:cacheprovider \\
        tests/storage/test_shared_filesystem.py -k PYSPARKLOG_FS_CHECK_DIR

(a fresh subdirectory is made there and removed afterwards; see docs/cluster.md). The properties:

* ``flock`` excludes across processes, exclusive against shared, and between two opens in one process
  (``PosixStorage.lock``: the per-partition ``pysparklog.state`` lock and the log directory's ``.lock``);
* ``os.replace`` swaps a file atomically, so readers without a lock see the old or the new content
  (``PosixStorage.put``: topic metadata, checkpoints, group and transaction state);
* the writes appends make: ``pwrite`` at the end of an existing file opened without ``O_APPEND``, ``pwrite``
  in place at offset 0, ``ftruncate``, appends with ``O_APPEND``, all visible to the next process to open the file;
* ``fsync`` of a file (through a read-only descriptor too) and of a directory;
* modification times follow this host's clock (the topic-config cache and retention read them);
* the engine itself: appends from two processes, one after the other, read back with dense offsets.

Four processes appending at the same time, with a reader racing them, are
``tests/storage/test_concurrency.py`` (marked slow); point it at a mount with ``--basetemp``.
These checks run on one host: whether locks also exclude between hosts depends on the mount
(docs/cluster.md shows a two-host check with ``flock(1)``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory
from pysparklog.storage.io import PosixLock, PosixStorage
from tests.conftest import REPO, read_all

FS_CHECK_DIR_ENV = "PYSPARKLOG_FS_CHECK_DIR"
STATE_RECORD_SIZE = 114  # pysparklog.state: storage.log_state.LogState

_TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
mode = fcntl.LOCK_EX if sys.argv[2] == "exclusive" else fcntl.LOCK_SH
try:
    fcntl.flock(fd, mode | fcntl.LOCK_NB)
except BlockingIOError:
    print("refused")
else:
    print("granted")
"""

_WAIT_FOR_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("granted")
"""

_REPLACER = """
import os, sys
target, rounds = sys.argv[1], int(sys.argv[2])
for i in range(rounds):
    tmp = f"{target}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(b"b" * 8192 if i % 2 else b"a" * 4096)
    os.replace(tmp, target)
"""

_READ = """
import hashlib, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = f.read()
    print(len(data), hashlib.sha256(data).hexdigest())
"""

_APPENDER = """
import sys
import pyarrow as pa
from pysparklog import LogDirectory
with LogDirectory(sys.argv[1]).partition("t", 0) as log:
    for b in range(2):
        keys = [f"other-{b}-{i}".encode() for i in range(5)]
        log.append_arrow(pa.table({"key": keys, "value": keys}))
"""


def _targets() -> Sequence[object]:
    targets = [pytest.param("tmp_path", id="tmp_path"), pytest.param("/dev/shm", id="dev-shm")]
    extra = os.environ.get(FS_CHECK_DIR_ENV)
    if extra:
        targets.append(pytest.param(extra, id=FS_CHECK_DIR_ENV))
    return targets


@pytest.fixture(params=_targets())
def fs_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A fresh, empty directory on the filesystem under test."""
    where = request.param
    if where == "tmp_path":
        yield tmp_path
        return
    base = Path(where)
    if where == "/dev/shm" and not (base.is_dir() and os.access(base, os.W_OK)):
        pytest.skip("no writable /dev/shm on this machine")
    if not base.is_dir():
        pytest.fail(f"{FS_CHECK_DIR_ENV}={where} is not a directory")
    directory = Path(tempfile.mkdtemp(prefix="pysparklog-fs-check-", dir=base))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _python(code: str, *args: object, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in another Python process; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _try_lock(path: Path, mode: str) -> str:
    """Whether another process gets the lock on ``path`` at once: ``granted`` or ``refused``."""
    return _python(_TRY_LOCK, path, mode).strip()


def test_flock_excludes_other_processes(fs_dir: Path) -> None:
    path = fs_dir / "pysparklog.state"
    lock = PosixLock(str(path))
    try:
        with lock.exclusive():
            assert _try_lock(path, "exclusive") == "refused", "an exclusive flock did not exclude another process"
            assert _try_lock(path, "shared") == "refused", "an exclusive flock did not exclude a shared one"
        with lock.shared():
            assert _try_lock(path, "shared") == "granted", "shared flocks of two processes did not coexist"
            assert _try_lock(path, "exclusive") == "refused", "a shared flock did not exclude an exclusive one"
        assert _try_lock(path, "exclusive") == "granted", "a released flock was not granted"
    finally:
        lock.close()


def test_a_process_waiting_for_the_lock_gets_it_when_it_is_released(fs_dir: Path) -> None:
    path = fs_dir / ".lock"
    lock = PosixLock(str(path))
    try:
        with lock.exclusive():
            waiter = subprocess.Popen(
                [sys.executable, "-c", _WAIT_FOR_LOCK, str(path)], stdout=subprocess.PIPE, text=True
            )
            time.sleep(0.2)
            assert waiter.poll() is None, "another process took a lock held here"
        out, _ = waiter.communicate(timeout=30)
        assert waiter.returncode == 0 and out.strip() == "granted"
    finally:
        lock.close()


def test_two_opens_of_one_file_in_one_process_exclude_each_other(fs_dir: Path) -> None:
    # Two PartitionLog objects of one partition in one process hold two PosixLocks of one file.
    path = fs_dir / "pysparklog.state"
    first, second = PosixLock(str(path)), PosixLock(str(path))
    try:
        with first.exclusive():
            with second.try_exclusive() as record:
                assert record is None, "flock does not exclude between two opens of the file in one process"
        with second.try_exclusive() as record:
            assert record is not None
    finally:
        first.close()
        second.close()


def test_replace_swaps_a_file_atomically_for_readers(fs_dir: Path) -> None:
    target = fs_dir / "pysparklog-topics.json"
    contents = {b"a" * 4096, b"b" * 8192}
    target.write_bytes(b"b" * 8192)
    replacer = subprocess.Popen([sys.executable, "-c", _REPLACER, str(target), "300"], stderr=subprocess.PIPE)
    reads = 0
    try:
        while replacer.poll() is None or reads == 0:
            try:
                data = target.read_bytes()
            except FileNotFoundError:
                pytest.fail("os.replace is not atomic here: a reader found no file while it was replaced")
            assert data in contents, f"a reader saw {len(data)} bytes: neither the old nor the new content"
            reads += 1
    finally:
        _, err = replacer.communicate(timeout=60)
    assert replacer.returncode == 0, err
    assert target.read_bytes() == b"b" * 8192


def test_a_file_renamed_while_open_stays_readable(fs_dir: Path) -> None:
    # Retention renames a segment to .deleted while readers may have it open.
    path = fs_dir / "00000000000000000000.log"
    path.write_bytes(b"batch" * 100)
    with open(path, "rb") as reader:
        os.replace(path, fs_dir / "00000000000000000000.log.deleted")
        assert reader.read() == b"batch" * 100


def test_the_writes_of_an_append_are_seen_by_the_next_process(fs_dir: Path) -> None:
    log_path, index_path, state_path = fs_dir / "0.log", fs_dir / "0.index", fs_dir / "pysparklog.state"
    log_path.write_bytes(b"x" * 100)
    fd = os.open(log_path, os.O_WRONLY)  # PosixStorage.write_at: at the acknowledged size, no O_APPEND
    try:
        assert os.pwrite(fd, b"y" * 50, 100) == 50
        os.ftruncate(fd, 140)  # a failed write is cut back, and recovery truncates a torn tail
    finally:
        os.close(fd)
    with open(index_path, "ab") as f:  # index entries are appended with O_APPEND
        f.write(b"i" * 8)
    with open(index_path, "ab") as f:
        f.write(b"j" * 8)
    fd = os.open(state_path, os.O_RDWR | os.O_CREAT, 0o644)  # the state record, rewritten in place
    try:
        os.pwrite(fd, b"1" * STATE_RECORD_SIZE, 0)
        os.pwrite(fd, b"2" * STATE_RECORD_SIZE, 0)
    finally:
        os.close(fd)
    expected = [b"x" * 100 + b"y" * 40, b"i" * 8 + b"j" * 8, b"2" * STATE_RECORD_SIZE]
    assert [p.read_bytes() for p in (log_path, index_path, state_path)] == expected
    seen = _python(_READ, log_path, index_path, state_path).split("\n")[:3]
    assert seen == [f"{len(data)} {hashlib.sha256(data).hexdigest()}" for data in expected]


def test_fsync_of_files_and_directories(fs_dir: Path) -> None:
    path = fs_dir / "recovery-point-offset-checkpoint"
    PosixStorage(fs_dir).put(str(path), b"0\n1\nt 0 42\n")  # temporary file, fsync, rename, fsync of the directory
    assert path.read_bytes() == b"0\n1\nt 0 42\n"
    assert not [p for p in fs_dir.iterdir() if ".tmp." in p.name]
    segment = fs_dir / "00000000000000000000.log"
    segment.write_bytes(b"unflushed")
    fd = os.open(segment, os.O_RDONLY)  # how a roll or a flush fsyncs a segment's files (PosixStorage.sync)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_modification_times_follow_this_hosts_clock(fs_dir: Path) -> None:
    # Cached topic configs are trusted once their files' mtimes are 2 s old by this host's clock
    # (storage.topics: _RACY_NS), and retention ages segments without timestamps by mtime.
    path = fs_dir / "pysparklog-topics.json"
    before = time.time()
    path.write_bytes(b"{}")
    mtime = path.stat().st_mtime
    assert before - 2 <= mtime <= time.time() + 2, f"mtime {mtime} is {mtime - before:+.1f} s from this host's clock"


def test_the_engine_appends_from_two_processes_with_dense_offsets(fs_dir: Path) -> None:
    logs = LogDirectory(fs_dir / "logs")
    logs.topics.create("t", 1)
    with logs.partition("t", 0) as log:
        mine = [[f"mine-{b}-{i}".encode() for i in range(5)] for b in range(2)]
        log.append_arrow(pa.table({"key": mine[0], "value": mine[0]}))
        _python(_APPENDER, fs_dir / "logs", env={**os.environ, "PYTHONPATH": str(REPO)})
        log.append_arrow(pa.table({"key": mine[1], "value": mine[1]}))
        table = read_all(log)
    theirs = [f"other-{b}-{i}".encode() for b in range(2) for i in range(5)]
    assert table.column("offset").to_pylist() == list(range(20))
    assert table.column("key").to_pylist() == [*mine[0], *theirs, *mine[1]]
    assert table.column("value").to_pylist() == table.column("key").to_pylist()
    assert (fs_dir / "logs" / "t-0" / "pysparklog.state").stat().st_size == STATE_RECORD_SIZE
