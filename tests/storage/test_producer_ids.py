"""``storage.producer_ids``: ids from 0, never twice, also between processes allocating at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory, Producer
from pysparklog.errors import CorruptRecordError, InvalidLogDirectoryError, MetadataChangedError
from pysparklog.storage import producer_ids
from pysparklog.storage.io import PosixStorage, Storage
from pysparklog.storage.producer_ids import PRODUCER_IDS_FILE, allocate_producer_id
from tests.storage.conftest import BACKENDS, NoLock, run_processes


def test_ids_start_at_0_and_never_repeat(tmp_path: Path) -> None:
    assert [allocate_producer_id(tmp_path) for _ in range(5)] == [0, 1, 2, 3, 4]
    assert json.loads((tmp_path / PRODUCER_IDS_FILE).read_text()) == {"version": 1, "next_producer_id": 5}
    assert allocate_producer_id(str(tmp_path)) == 5  # a path as str, or any later process: the file is the truth


def test_a_storage_allocates_from_the_same_sequence_as_its_location(tmp_path: Path) -> None:
    assert allocate_producer_id(PosixStorage(tmp_path)) == 0
    assert allocate_producer_id(f"file://{tmp_path}") == 1
    assert allocate_producer_id(PosixStorage(tmp_path)) == 2


def test_processes_allocating_at_once_never_get_the_same_id(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from pysparklog.storage.producer_ids import allocate_producer_id\n"
        "print(' '.join(str(allocate_producer_id(sys.argv[1])) for _ in range(25)))\n"
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE) for _ in range(4)
    ]
    ids = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        ids += [int(i) for i in out.split()]
    assert sorted(ids) == list(range(100))


def test_ids_on_every_backend(storage: Storage) -> None:
    storage.make_directory(storage.join())
    assert [allocate_producer_id(storage) for _ in range(3)] == [0, 1, 2]
    assert json.loads(storage.read(storage.join(PRODUCER_IDS_FILE))) == {"version": 1, "next_producer_id": 3}
    assert allocate_producer_id(storage.root) == 3  # its location: an object store's URL too


def _allocate(backend: str, root: str, ids: multiprocessing.Queue[int]) -> None:
    storage = BACKENDS[backend](root)
    for _ in range(10):
        ids.put(allocate_producer_id(storage))


@pytest.mark.slow
def test_processes_on_every_backend_never_get_the_same_id(backend_and_root: tuple[str, str]) -> None:
    backend, root = backend_and_root
    BACKENDS[backend](root).make_directory(root)  # a log directory must exist (an object store's always does)
    queue: multiprocessing.Queue[int] = multiprocessing.get_context("spawn").Queue()
    run_processes(_allocate, [(backend, root, queue)] * 4)
    ids = [queue.get(timeout=60) for _ in range(40)]
    assert sorted(ids) == list(range(40))


def test_an_allocation_without_exclusion_fails_rather_than_hand_out_an_id_twice(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An allocator that lost its lease while it stalled, and wrote anyway, would hand out the id the next holder
    was given meanwhile: the file is replaced only if it is still the version read."""
    storage.make_directory(storage.join())
    assert allocate_producer_id(storage) == 0
    monkeypatch.setattr(storage, "lock", lambda path: NoLock())
    decode_next = producer_ids._decode_next
    meanwhile: list[int] = []

    def read_then_another_allocates(data: bytes | None, path: str) -> int | None:
        if not meanwhile:
            meanwhile.append(-1)  # the other allocation reads too: only this one lets another in
            meanwhile[0] = allocate_producer_id(storage)
        return decode_next(data, path)

    monkeypatch.setattr(producer_ids, "_decode_next", read_then_another_allocates)
    with pytest.raises(MetadataChangedError, match=PRODUCER_IDS_FILE):
        allocate_producer_id(storage)
    assert meanwhile == [1]
    monkeypatch.undo()
    assert allocate_producer_id(storage) == 2


def test_a_write_a_crash_interrupted_leaves_the_last_complete_file(tmp_path: Path) -> None:
    assert allocate_producer_id(tmp_path) == 0
    torn = tmp_path / f"{PRODUCER_IDS_FILE}.tmp.99999"
    torn.write_text('{"version": 1, "next_')  # killed mid-write: the rename never happened
    assert allocate_producer_id(tmp_path) == 1
    assert not torn.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json", "not a pysparklog producer-id file"),
        (b'{"version": 2, "next_producer_id": 3}', "producer-id file version 2, expected 1"),
        (b'{"version": 1}', "not a pysparklog producer-id file"),
        (b'{"version": 1, "next_producer_id": -4}', "next_producer_id -4 is not an integer from 0"),
        (b'{"version": 1, "next_producer_id": "7"}', "next_producer_id '7' is not an integer from 0"),
    ],
)
def test_a_file_that_is_not_ours_is_reported(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / PRODUCER_IDS_FILE
    path.write_bytes(content)
    with pytest.raises(CorruptRecordError, match=message) as error:
        allocate_producer_id(tmp_path)
    assert error.value.file == str(path)
    assert path.read_bytes() == content  # left as it was


def test_the_log_directory_must_exist(tmp_path: Path) -> None:
    with pytest.raises(InvalidLogDirectoryError, match="does not exist"):
        allocate_producer_id(tmp_path / "missing")


def test_a_lost_file_restarts_above_every_id_the_logs_use(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 2)
    assert allocate_producer_id(tmp_path) == 0  # topics without producers: the ids start at 0
    with Producer(logs) as producer:
        producer.send_arrow("t", pa.table({"value": [b"a", b"b"], "partition": pa.array([0, 1], pa.int32())}))
    used = allocate_producer_id(tmp_path) - 1
    os.remove(tmp_path / PRODUCER_IDS_FILE)
    # The ids the logs carry are not handed out again: a new producer's batches are not taken for retries.
    assert allocate_producer_id(tmp_path) == used + 1
    with Producer(logs) as producer:
        producer.send_arrow("t", pa.table({"value": [b"c"], "partition": pa.array([0], pa.int32())}))
    assert [v for b in logs.partition("t", 0).read_arrow() for v in b.column("value").to_pylist()] == [b"a", b"c"]
