"""The cleaner's offset map: last offset per key hash, its budget, and its hash."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pysparklog.storage.offset_map import EMPTY, LOAD_FACTOR, SLOT_BYTES, OffsetMap, key_hashes

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results


def hashes(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    array = pa.array(keys, pa.binary())
    offsets = np.frombuffer(array.buffers()[1], np.int32)[: len(keys) + 1]
    data = np.frombuffer(array.buffers()[2], np.uint8) if array.buffers()[2] is not None else np.empty(0, np.uint8)
    return key_hashes(offsets, data)


def test_later_rows_win_and_absent_keys_read_empty() -> None:
    keys = [b"a", b"b", b"a", b"c", b"b", b""]
    offset_map = OffsetMap(len(keys), 1 << 20)
    a, b = hashes(keys)
    eligible = np.array([1, 1, 1, 0, 1, 1], dtype=bool)  # c is not eligible (a keyless record, say)
    assert offset_map.put(a, b, np.arange(10, 16, dtype=np.int64), eligible) == 6
    assert offset_map.size == 3
    assert offset_map.get(*hashes([b"a", b"b", b"c", b"", b"zz"])).tolist() == [12, 14, EMPTY, 15, EMPTY]


def test_a_full_map_stops_at_the_first_new_key_but_updates_known_ones() -> None:
    offset_map = OffsetMap(100, 4 * SLOT_BYTES)  # the budget holds four slots: three keys at the load factor
    assert (offset_map.slots, offset_map.max_size) == (4, int(4 * LOAD_FACTOR))
    keys = [b"k1", b"k2", b"k3", b"k1", b"k4", b"k2"]
    stop = offset_map.put(*hashes(keys), np.arange(6, dtype=np.int64), np.ones(6, dtype=bool))
    assert stop == 4, "k4 finds the map full; k1's update before it goes in"
    assert offset_map.get(*hashes([b"k1", b"k2", b"k3", b"k4"])).tolist() == [3, 1, 2, EMPTY]


def test_the_table_is_sized_for_the_keys_within_the_budget() -> None:
    assert OffsetMap(1000, 1 << 30).slots == 2048
    assert OffsetMap(10**9, 1 << 20).slots == 32768, "the budget caps it: 2**20 / 24 bytes, to a power of two"
    with pytest.raises(ValueError, match="holds no key"):
        OffsetMap(10, SLOT_BYTES)


def test_a_million_distinct_keys_have_distinct_hashes() -> None:
    keys = [f"key-{i}".encode() for i in range(1_000_000)] + [b"", b"\x00", b"\x00\x00", b"12345678", b"123456789"]
    a, b = hashes(keys)
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)
    assert len(pairs) == len(keys)
    assert len(np.unique(a)) == len(keys), "even one lane alone separates them"
