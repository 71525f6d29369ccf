"""The locks of the storage seam (``StorageLock``) on every backend, and what is the object store's own: its lease,
made of conditional writes alone (``ObjectLease``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pysparklog.errors import InvalidConfigError, PySparkLogError
from pysparklog.storage.io import Storage, StorageLock, read_if_exists
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.storage.objects import lease as lease_module
from pysparklog.storage.objects.lease import LEASE_MS, ObjectLease
from tests.conftest import BUCKET
from tests.storage.conftest import BACKENDS, run_processes

PROCESSES = 4
INCREMENTS = 20


def _lock(storage: Storage, name: str, lease_ms: int = LEASE_MS) -> StorageLock:
    """The backend's lock of ``name``; an object store's with a lease of ``lease_ms``."""
    if isinstance(storage, ObjectStorage):
        return ObjectLease(storage, storage.join(name), lease_ms)
    return storage.lock(storage.join(name))


def _increment(backend: str, root: str) -> None:
    storage = BACKENDS[backend](root)
    lock = storage.lock(storage.join("counter.lock"))
    counter = storage.join("counter")
    for _ in range(INCREMENTS):
        with lock.exclusive():
            count = int(read_if_exists(storage, counter) or b"0")
            storage.put(counter, str(count + 1).encode())  # unconditional: only the lock keeps increments apart
    lock.close()


@pytest.mark.slow
def test_exclusive_holders_never_overlap(backend_and_root: tuple[str, str]) -> None:
    backend, root = backend_and_root
    run_processes(_increment, [(backend, root)] * PROCESSES)
    storage = BACKENDS[backend](root)
    assert storage.read(storage.join("counter")) == str(PROCESSES * INCREMENTS).encode(), "no increment was lost"


def test_try_exclusive_yields_none_while_another_holds_it(storage: Storage) -> None:
    holder, other = storage.lock(storage.join("held.lock")), storage.lock(storage.join("held.lock"))
    with holder.exclusive():
        with other.try_exclusive() as record:
            assert record is None
    with other.try_exclusive() as record:
        assert record is not None
    holder.close()
    other.close()


def _hold_and_die(backend: str, root: str, lease_ms: int) -> None:
    lock = _lock(BACKENDS[backend](root), "dead.lock", lease_ms)
    with lock.exclusive():
        os._exit(0)  # no release: the process dies holding the lock


@pytest.mark.slow
def test_the_lock_of_a_holder_that_died_is_taken(backend_and_root: tuple[str, str]) -> None:
    backend, root = backend_and_root
    run_processes(_hold_and_die, [(backend, root, 1000)])
    storage = BACKENDS[backend](root)
    path = storage.join("dead.lock")
    if isinstance(storage, ObjectStorage):
        assert json.loads(storage.read(path))["pid"] != os.getpid(), "the dead holder's lease is still there"
    lock = storage.lock(path)
    with lock.exclusive():  # waits, on an object store, for the dead holder's lease to end
        with storage.lock(path).try_exclusive() as record:
            assert record is None, "held by this process now"
        if isinstance(storage, ObjectStorage):
            assert json.loads(storage.read(path))["pid"] == os.getpid()
    lock.close()


def _take_once(root: str, start: Any, done: Any, wins: Any) -> None:
    storage = BACKENDS["s3"](root)
    lock = storage.lock(storage.join("ended.lock"))
    start.wait(60)
    with lock.try_exclusive() as record:
        if record is not None:
            wins.put(os.getpid())
        done.wait(60)  # a winner holds on until every contender has tried


@pytest.fixture
def s3(s3_endpoint: str, tmp_path: Path) -> ObjectStorage:
    storage = BACKENDS["s3"](str(tmp_path / "logs"))
    assert isinstance(storage, ObjectStorage)
    return storage


@pytest.mark.slow
def test_exactly_one_contender_takes_over_an_ended_lease(s3: ObjectStorage) -> None:
    s3.put(s3.join("ended.lock"), json.dumps({"owner": "gone", "expires_ms": 1}).encode())
    context = multiprocessing.get_context("spawn")
    contenders = 6
    start, done, wins = context.Barrier(contenders), context.Barrier(contenders), context.Queue()
    run_processes(_take_once, [(s3.root.removeprefix(f"s3://{BUCKET}"), start, done, wins)] * contenders)
    winners = []
    while not wins.empty():
        winners.append(wins.get(timeout=5))
    assert len(winners) == 1


def test_a_lease_holds_no_record_and_readers_take_none(s3: ObjectStorage) -> None:
    path = s3.join(".lock")
    lock = s3.lock(path)
    with lock.shared() as record:
        assert record is None
    assert s3.stat(path) is None, "a reader makes no lease object"
    with lock.exclusive() as record:
        assert s3.stat(path) is not None
        with pytest.raises(NotImplementedError, match="holds no record"):
            record.read(10)
        with pytest.raises(NotImplementedError, match="holds no record"):
            record.write(b"state")
    assert s3.stat(path) is None, "released by deleting it"


def test_a_lease_is_not_reentrant(s3: ObjectStorage) -> None:
    lock = s3.lock(s3.join(".lock"))
    with lock.exclusive():
        with pytest.raises(PySparkLogError, match="not reentrant"):
            with lock.exclusive():
                pass
    with lock.try_exclusive() as record:
        assert record is not None


def _another_holder() -> bytes:
    return json.dumps({"owner": "another", "expires_ms": int(time.time() * 1000) + LEASE_MS}).encode()


def test_a_release_leaves_a_lease_another_took_over(s3: ObjectStorage) -> None:
    path = s3.join(".lock")
    with s3.lock(path).exclusive():
        s3.put(path, _another_holder())  # as a contender does when this holder stalls past its lease
    assert json.loads(s3.read(path))["owner"] == "another"


def test_a_release_near_the_lease_end_never_deletes(s3: ObjectStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    """With little of its lease left, a holder cannot check that the lease is still its own and then delete it
    before another could take it over: it writes it back ended instead, only if it is still its version."""
    path = s3.join(".lock")
    late = int(time.time() * 1000) + LEASE_MS  # the clock at the release: the lease about to end
    with s3.lock(path).exclusive():
        monkeypatch.setattr(lease_module, "_now_ms", lambda: late)
    assert json.loads(s3.read(path))["expires_ms"] == 0, "written back ended"
    monkeypatch.undo()
    with s3.lock(path).try_exclusive() as record:
        assert record is not None, "an ended lease is taken at once"
        s3.put(path, _another_holder())
        monkeypatch.setattr(lease_module, "_now_ms", lambda: late)
    assert json.loads(s3.read(path))["owner"] == "another"


@pytest.mark.slow
def test_a_lease_is_renewed_while_held(s3: ObjectStorage) -> None:
    path = s3.join(".lock")
    lease_ms = 1500
    with ObjectLease(s3, path, lease_ms).exclusive():
        first = s3.stat(path)
        time.sleep(3 * lease_ms / 1000)  # three leases long: the renewer has extended it several times
        with s3.lock(path).try_exclusive() as record:
            assert record is None, "still held"
        renewed = s3.stat(path)
        assert first is not None and renewed is not None and renewed.version != first.version


def _lease_of(storage: Storage) -> ObjectLease:
    lease = storage.lock(storage.join(".lock"))
    assert isinstance(lease, ObjectLease)
    return lease


def test_the_lease_lasts_what_the_environment_says_when_the_store_is_made(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "logs")
    monkeypatch.delenv(lease_module.LEASE_MS_VARIABLE, raising=False)
    assert _lease_of(BACKENDS["s3"](root)).lease_ms == LEASE_MS
    monkeypatch.setenv(lease_module.LEASE_MS_VARIABLE, " 1500 ")
    storage = BACKENDS["s3"](root)
    lease = _lease_of(storage)
    assert lease.lease_ms == 1500
    with lease.exclusive():
        expires_ms = json.loads(storage.read(storage.join(".lock")))["expires_ms"]
        assert expires_ms <= int(time.time() * 1000) + 1500


@pytest.mark.parametrize("value", ["abc", "1.5", "99", "-1"])
def test_a_lease_length_not_accepted_fails_when_the_store_is_made(
    value: str, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lease_module.LEASE_MS_VARIABLE, value)
    with pytest.raises(InvalidConfigError, match=rf"PYSPARKLOG_LEASE_MS='{value}' is invalid; accepted: an integer"):
        BACKENDS["s3"](str(tmp_path / "logs"))
