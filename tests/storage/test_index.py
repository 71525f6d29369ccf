"""Index files read as Kafka reads them: the sanity checks a broker runs on startup, the zero entry of a
preallocated time index, and the aborted transactions of a ``.txnindex``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pysparklog import CorruptRecordError
from pysparklog.storage.index import OffsetIndex, TimeIndex, TransactionIndex

BASE = 100


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">iiii", 3, 400, 0, 0))  # a zero entry does not end the file for the check
    OffsetIndex.sanity_check(path.read_bytes(), str(path), BASE)
    path.write_bytes(struct.pack(">iiii", 3, 400, -1, 500))
    with pytest.raises(CorruptRecordError) as error:
        OffsetIndex.sanity_check(path.read_bytes(), str(path), BASE)
    assert str(error.value) == (
        f"Corrupt index found, index file {path} has non-zero size but the last offset is 99 which is less than "
        "the base offset 100"
    )
    path.write_bytes(struct.pack(">ii", 3, 400) + b"\x00")
    with pytest.raises(CorruptRecordError) as error:
        OffsetIndex.sanity_check(path.read_bytes(), str(path), BASE)
    assert str(error.value) == (
        f"Index file {path} is corrupt, found 9 bytes which is neither positive nor a multiple of 8"
    )


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(struct.pack(">qiqi", 50, 3, 60, 4))
    TimeIndex.sanity_check(path.read_bytes(), str(path), BASE)
    path.write_bytes(struct.pack(">qiqi", 50, 3, 40, 4))
    with pytest.raises(CorruptRecordError) as error:
        TimeIndex.sanity_check(path.read_bytes(), str(path), BASE)
    assert str(error.value) == (
        f"Corrupt time index found, time index file ({path}) has non-zero size but the last timestamp is 40 which "
        "is less than the first timestamp 50"
    )
    path.write_bytes(struct.pack(">qiqi", 50, 3, 60, -4))
    with pytest.raises(CorruptRecordError, match="the last offset is 96 which is less than the first offset 100"):
        TimeIndex.sanity_check(path.read_bytes(), str(path), BASE)
    path.write_bytes(struct.pack(">qi", 50, 3) + b"\x00" * 5)
    with pytest.raises(CorruptRecordError, match="found 17 bytes which is neither positive nor a multiple of 12"):
        TimeIndex.sanity_check(path.read_bytes(), str(path), BASE)


def test_a_preallocated_time_index_is_empty_unless_its_zero_entry_is_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(bytes(12 * 4))
    assert len(TimeIndex.parse(path.read_bytes(), BASE)) == 0
    kept = TimeIndex.parse(path.read_bytes(), BASE, keep_zero_entry=True)
    assert (kept.timestamps.tolist(), kept.offsets.tolist()) == ([0], [BASE])


def test_transaction_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    assert len(TransactionIndex.parse(None, str(path))) == 0  # a segment without aborted transactions has no file
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 110, 115, 105) + struct.pack(">hqqqq", 0, 8, 120, 130, 118) + b"\x00")
    index = TransactionIndex.parse(path.read_bytes(), str(path))
    assert index.producer_ids.tolist() == [7, 8]
    assert (index.first_offsets.tolist(), index.last_offsets.tolist()) == ([110, 120], [115, 130])
    assert (index.versions.tolist(), index.last_stable_offsets.tolist()) == ([0, 0], [105, 118])
    path.write_bytes(struct.pack(">hqqqq", 1, 7, 110, 115, 105))
    with pytest.raises(CorruptRecordError) as error:
        TransactionIndex.parse(path.read_bytes(), str(path))
    assert str(error.value) == (
        f"Unexpected aborted transaction version 1 in transaction index {path}, current version is 0"
    )
