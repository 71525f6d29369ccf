"""The storage seam's contract (``pysparklog.storage.io.base``), checked on every backend.

Each test takes a ``storage`` fixture; a backend joins the suite by adding itself to ``BACKENDS``
(a function of a fresh local directory and of a root name no other test uses). The object-store
backend runs against a real S3-compatible server process (``conftest.s3_endpoint``).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pysparklog.errors import InvalidLogDirectoryError, StorageConflictError
from pysparklog.storage.io import FileSystemStorage, PosixStorage, PutMode, Storage, read_if_exists, read_writable
from tests.conftest import BUCKET
from tests.storage.conftest import BACKENDS


def test_a_backend_satisfies_the_protocol(storage: Storage) -> None:
    assert isinstance(storage, Storage)


def test_put_then_read_whole_and_ranges(storage: Storage) -> None:
    path = storage.join("t-0", "00000000000000000000.log")
    storage.put(path, b"0123456789")
    assert storage.read(path) == b"0123456789"
    assert storage.read(path, 3) == b"3456789"
    assert storage.read(path, 3, 4) == b"3456"
    assert storage.read(path, 8, 100) == b"89"
    buffer = bytearray(6)
    assert storage.read_into(path, 7, memoryview(buffer)) == 3
    assert bytes(buffer[:3]) == b"789"


def test_read_writable_fills_a_buffer_the_caller_may_change_and_stops_at_the_end(storage: Storage) -> None:
    # Large enough that the store's answer arrives in many pieces, each copied to its place.
    data = bytes(range(256)) * 20_000
    path = storage.join("big")
    storage.put(path, data)
    middle = read_writable(storage, path, 1_000, 4_000_000)
    assert isinstance(middle, bytearray) and middle == data[1_000:4_001_000]
    middle[0] ^= 0xFF  # the caller's own copy: the file keeps its bytes
    assert storage.read(path, 1_000, 1) == data[1_000:1_001]
    assert read_writable(storage, path, len(data) - 5, 100) == data[-5:]
    assert read_writable(storage, path, len(data), 10) == b""
    assert read_writable(storage, path, len(data) + 7, 10) == b""
    assert read_writable(storage, path, 3, 0) == b""
    with pytest.raises(FileNotFoundError):
        read_writable(storage, storage.join("missing"), 0, 10)


def test_a_missing_file(storage: Storage) -> None:
    path = storage.join("missing")
    assert storage.stat(path) is None
    assert read_if_exists(storage, path) is None
    with pytest.raises(FileNotFoundError):
        storage.read(path)
    assert storage.delete(path) is False
    assert storage.list(storage.join("no-such-dir")) == []


def test_list_is_sorted_and_shows_directories(storage: Storage) -> None:
    for name in ("b", "a", "c-0/x"):
        storage.put(storage.join(*name.split("/")), b"")
    assert storage.list(storage.join()) == ["a", "b", "c-0"]
    assert storage.is_directory(storage.join("c-0"))
    assert not storage.is_directory(storage.join("a"))


def test_list_after_names_the_files_past_a_name_only(storage: Storage) -> None:
    for name in ("03", "01", "02", "04", "05/nested"):
        storage.put(storage.join("commits", *name.split("/")), b"")
    assert storage.list_after(storage.join("commits"), "02") == ["03", "04"]
    assert storage.list_after(storage.join("commits"), "04") == []
    assert storage.list_after(storage.join("no-such-dir"), "00") == []


def test_delete_all_removes_every_file_named_and_passes_missing_ones(storage: Storage) -> None:
    paths = [storage.join("d", name) for name in ("a", "b", "c")]
    for path in paths:
        storage.put(path, b"x")
    storage.delete_all([paths[0], paths[2], storage.join("d", "never-there")])
    assert storage.list(storage.join("d")) == ["b"]
    storage.delete_all([])
    assert storage.list(storage.join("d")) == ["b"]


def test_the_version_changes_with_every_write(storage: Storage) -> None:
    path = storage.join("state.json")
    first = storage.put(path, b"one")
    again = storage.stat(path)
    assert again is not None and again.version == first.version and again.size == 3
    second = storage.put(path, b"two")
    assert second.version != first.version


def test_read_versioned_pairs_the_content_with_its_version(storage: Storage) -> None:
    path = storage.join("state.json")
    assert storage.read_versioned(path) is None
    first = storage.put(path, b"one")
    assert storage.read_versioned(path) == (b"one", first.version)
    second = storage.put(path, b"two", expected_version=first.version)
    assert storage.read_versioned(path) == (b"two", second.version)


def test_create_only_loses_to_an_existing_file_and_keeps_it(storage: Storage) -> None:
    path = storage.join("00000000000000000007.commit")
    storage.put(path, b"mine", mode=PutMode.CREATE)
    with pytest.raises(StorageConflictError, match="already exists"):
        storage.put(path, b"theirs", mode=PutMode.CREATE)
    assert storage.read(path) == b"mine"


def test_replace_if_version(storage: Storage) -> None:
    path = storage.join("group.json")
    v1 = storage.put(path, b"v1").version
    v2 = storage.put(path, b"v2", expected_version=v1).version
    with pytest.raises(StorageConflictError, match="changed"):
        storage.put(path, b"stale", expected_version=v1)
    assert storage.read(path) == b"v2"
    with pytest.raises(StorageConflictError, match="does not exist"):
        storage.put(storage.join("absent.json"), b"x", expected_version=v2)
    assert not [name for name in storage.list(storage.join()) if ".tmp." in name]


def _conditional_writer(backend: str, root: str, version: str, name: str, wins: multiprocessing.Queue[str]) -> None:
    storage = BACKENDS[backend](root)
    try:
        storage.put(storage.join("head"), name.encode(), expected_version=version)
        wins.put(name)
    except StorageConflictError:
        pass


def test_exactly_one_of_many_processes_wins_a_version(backend_and_root: tuple[str, str]) -> None:
    backend, root = backend_and_root
    storage = BACKENDS[backend](root)
    version = storage.put(storage.join("head"), b"start").version
    # Spawned, not forked: a forked child inherits obstore's runtime without its threads.
    context = multiprocessing.get_context("spawn")
    wins: multiprocessing.Queue[str] = context.Queue()
    writers = [
        context.Process(target=_conditional_writer, args=(backend, root, version, f"w{i}", wins)) for i in range(8)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    winners = []
    while not wins.empty():
        winners.append(wins.get(timeout=5))
    assert len(winners) == 1
    assert storage.read(storage.join("head")) == winners[0].encode()


def test_in_place_writes(storage: Storage) -> None:
    if not isinstance(storage, FileSystemStorage):
        pytest.skip("an object store has no in-place writes")
    path = storage.join("t-0", "00000000000000000000.log")
    storage.make_directory(storage.join("t-0"))
    storage.append(path, b"abc")
    storage.write_at(path, 3, b"def")
    storage.write_at(path, 1, memoryview(b"XY"))
    assert storage.read(path) == b"aXYdef"
    storage.truncate(path, 2)
    assert storage.read(path) == b"aX"
    storage.sync(path)
    storage.sync(storage.join("missing"))
    storage.set_modified(path, 1_600_000_000_123)
    stat = storage.stat(path)
    assert stat is not None and stat.modified_ms == 1_600_000_000_123


def test_rename(storage: Storage) -> None:
    if not isinstance(storage, FileSystemStorage):
        pytest.skip("an object store has no atomic rename")
    storage.put(storage.join("t-0", "a.log"), b"1")
    storage.rename(storage.join("t-0", "a.log"), storage.join("t-0", "a.log.deleted"))
    assert storage.list(storage.join("t-0")) == ["a.log.deleted"]
    assert storage.read(storage.join("t-0", "a.log.deleted")) == b"1"
    with pytest.raises(FileNotFoundError):
        storage.rename(storage.join("t-0", "a.log"), storage.join("t-0", "b.log"))


def test_delete_and_trees(storage: Storage) -> None:
    storage.put(storage.join("t-0", "a.log"), b"1")
    storage.put(storage.join("t-0", "kept"), b"")  # an object store has no empty directories
    assert storage.delete(storage.join("t-0", "a.log"))
    assert storage.list(storage.join("t-0")) == ["kept"]
    storage.put(storage.join("t-1", "x", "y"), b"")
    storage.delete_tree(storage.join("t-1"))
    storage.delete_tree(storage.join("t-1"))
    assert storage.list(storage.join()) == ["t-0"]


def _hold_exclusive(path: str, release_after: float) -> None:
    lock = PosixStorage(os.path.dirname(path)).lock(path)
    with lock.exclusive() as record:
        record.write(b"held")
        time.sleep(release_after)
    lock.close()


def test_a_file_put_returns_the_version_of_what_it_wrote_though_another_replaced_it_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer's next conditional write goes by the version its put returned: had that been the version of a file
    another writer renamed over the name in between, the next write would replace that file unseen. (An object
    store's put returns the version the store gave that very write.)"""
    storage = PosixStorage(tmp_path)
    path = storage.join("state.json")
    mine = storage.put(path, b"mine", mode=PutMode.CREATE)
    rename = os.replace

    def then_another_writes(source: str, target: str) -> None:
        rename(source, target)
        monkeypatch.setattr(os, "replace", rename)
        storage.put(path, b"theirs, written meanwhile")

    monkeypatch.setattr(os, "replace", then_another_writes)
    written = storage.put(path, b"mine again", expected_version=mine.version)
    assert storage.read(path) == b"theirs, written meanwhile"
    with pytest.raises(StorageConflictError, match="changed"):
        storage.put(path, b"over theirs", expected_version=written.version)


def test_a_lock_excludes_another_process_and_holds_its_record(tmp_path: Path) -> None:
    storage = PosixStorage(tmp_path)
    path = storage.join("pysparklog.state")
    lock = storage.lock(path)
    with lock.shared() as record:
        assert record is None  # no writer made the file yet
    holder = multiprocessing.Process(target=_hold_exclusive, args=(path, 1.5))
    holder.start()
    deadline = time.monotonic() + 30
    while storage.stat(path) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    with lock.try_exclusive() as record:
        assert record is None  # the other process holds it
    with lock.exclusive() as record:  # waits for the other process
        assert record.read(4) == b"held"
        record.write(b"mine")
    holder.join(30)
    with lock.shared() as record:
        assert record is not None and record.read(100) == b"mine"
    lock.close()


def test_an_object_store_has_no_in_place_writes(s3_endpoint: str) -> None:
    storage = BACKENDS["s3"]("no-in-place")
    assert isinstance(storage, Storage)
    assert not isinstance(storage, FileSystemStorage)
    for operation in ("rename", "write_at", "append", "truncate", "sync", "set_modified"):
        assert not hasattr(storage, operation), f"an object store offers no {operation}"


def test_interrupted_puts_leave_temporary_files_only_on_a_filesystem(storage: Storage) -> None:
    path = storage.join("topics.json")
    storage.put(path, b"{}")
    if isinstance(storage, FileSystemStorage):
        storage.put(f"{path}.tmp.1.2", b"a writer killed mid-put")
        storage.put(storage.join("other.json.tmp.1.2"), b"another file's")
    storage.remove_interrupted_puts(path)
    expected = ["other.json.tmp.1.2", "topics.json"] if isinstance(storage, FileSystemStorage) else ["topics.json"]
    assert storage.list(storage.join()) == expected


def test_an_object_store_path_must_be_below_its_root(s3_endpoint: str) -> None:
    storage = BACKENDS["s3"]("below")
    with pytest.raises(InvalidLogDirectoryError, match="is not below the log directory"):
        storage.read(f"s3://{BUCKET}/elsewhere/file")
