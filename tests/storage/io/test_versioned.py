"""``VersionedFile``: the read-modify-write every piece of metadata goes through, on every backend."""

from __future__ import annotations

import pytest

from pysparklog.errors import MetadataChangedError, StorageConflictError
from pysparklog.storage.io import Storage, VersionedFile


def test_an_absent_file_is_created_then_replaced_in_one_holding(storage: Storage) -> None:
    path = storage.join("state.json")
    state = VersionedFile.read(storage, path)
    assert (state.data, state.version) == (None, None)
    state.write(b"first")
    state.write(b"second")  # conditional on the version the first write made
    again = VersionedFile.read(storage, path)
    assert (again.data, again.version) == (b"second", state.version)


def test_a_holder_whose_file_changed_since_its_read_writes_nothing(storage: Storage) -> None:
    path = storage.join("state.json")
    VersionedFile.read(storage, path).write(b"v1")
    stale = VersionedFile.read(storage, path)
    newer = VersionedFile.read(storage, path)
    newer.write(b"v2, by the holder that took the lock over")
    with pytest.raises(MetadataChangedError, match=r"state\.json changed after this process read it") as raised:
        stale.write(b"v2, from v1")
    assert isinstance(raised.value, StorageConflictError)
    assert "\n" not in str(raised.value)
    assert storage.read(path) == b"v2, by the holder that took the lock over"


def test_a_holder_that_found_no_file_does_not_replace_one_created_since(storage: Storage) -> None:
    path = storage.join("state.json")
    stale = VersionedFile.read(storage, path)
    VersionedFile.read(storage, path).write(b"created by another")
    with pytest.raises(MetadataChangedError, match=r"state\.json"):
        stale.write(b"created from nothing")
    assert storage.read(path) == b"created by another"


def test_a_holder_does_not_bring_back_a_file_deleted_since(storage: Storage) -> None:
    path = storage.join("state.json")
    VersionedFile.read(storage, path).write(b"v1")
    stale = VersionedFile.read(storage, path)
    storage.delete(path)
    with pytest.raises(MetadataChangedError):
        stale.write(b"v2")
    assert storage.stat(path) is None
