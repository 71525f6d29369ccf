"""The cleaner's offset map: for each key of a log's dirty section, the offset of its last record.

Kafka's cleaner (``SkimpyOffsetMap``) keeps a 16-byte MD5 digest of each key rather than the key,
so a map of millions of keys fits a fixed buffer (``log.cleaner.dedupe.buffer.size``); two keys
are confused only when their digests collide. This map does the same with a 128-bit hash computed
by a compiled kernel (two 64-bit lanes, each a chain of a bijective avalanche mix over the key's
8-byte words, seeded differently and by the key's length). For ``n`` distinct keys the chance that
any two collide is about ``n**2 / 2**129``: for a billion keys, below 10**-20. The hash is not
meant to resist keys crafted to collide, no more than Kafka's use of MD5 is.

Slots live in three NumPy arrays (two hash lanes and the offset, 24 bytes a slot, as Kafka's map)
with open addressing: the first lane picks the slot, the second the (odd) probe step, which
reaches every slot of the power-of-two table. Filling and querying run in numba with no Python per
record.
"""

from __future__ import annotations

import numpy as np

from pysparklog.compiled import bind, kernel

SLOT_BYTES = 24  # two 8-byte hash lanes and an 8-byte offset
LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor: the share of slots the map may fill
EMPTY = -1  # the offset of an empty slot; offsets are never negative

_SEED_A = np.uint64(0x9E3779B97F4A7C15)
_SEED_B = np.uint64(0xC2B2AE3D27D4EB4F)
_LANE_B_MULTIPLIER = np.uint64(0x9FB21C651E98DF25)  # odd: a bijection of the word


@kernel(cache=True, inline="always")
def _mix(x: np.uint64) -> np.uint64:
    """A bijective 64-bit avalanche mix (the finaliser of SplitMix64): every input bit flips each output bit
    with probability about one half."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@kernel(cache=True, inline="always")
def _word(data: np.ndarray, start: int, n: int) -> np.uint64:
    """Bytes ``data[start:start + n]`` (n <= 8) as a little-endian 64-bit word."""
    w = np.uint64(0)
    for j in range(n):
        w |= np.uint64(data[start + j]) << np.uint64(8 * j)
    return w


@kernel("i4[::1], u1[::1], u8[::1], u8[::1]", "i8[::1], u1[::1], u8[::1], u8[::1]", cache=True, nogil=True)
def hash_keys(key_offsets: np.ndarray, key_data: np.ndarray, out_a: np.ndarray, out_b: np.ndarray) -> None:
    """The two 64-bit hash lanes of each key ``key_data[key_offsets[i]:key_offsets[i + 1]]``.

    A null key hashes as an empty one: callers leave keyless records out of the map.
    """
    for i in range(out_a.shape[0]):
        start = key_offsets[i]
        end = key_offsets[i + 1]
        length = np.uint64(end - start)
        a = _mix(_SEED_A ^ length)
        b = _mix(_SEED_B + length * _LANE_B_MULTIPLIER)
        p = start
        while p < end:
            n = min(8, end - p)
            w = _word(key_data, p, n)
            a = _mix(a ^ w)
            b = _mix(b + w * _LANE_B_MULTIPLIER)
            p += n
        out_a[i] = a
        out_b[i] = b


@kernel(cache=True, inline="always")
def _probe(slot_a: np.ndarray, slot_b: np.ndarray, slot_offset: np.ndarray, a: np.uint64, b: np.uint64) -> int:
    """The slot holding hash (a, b), or the empty slot where it would go."""
    mask = np.uint64(slot_a.shape[0] - 1)
    step = b | np.uint64(1)
    s = a & mask
    while True:
        i = int(s)
        if slot_offset[i] == EMPTY or (slot_a[i] == a and slot_b[i] == b):
            return i
        s = (s + step) & mask


@kernel("u8[::1], u8[::1], i8[::1], u8[::1], u8[::1], i8[::1], b1[::1], i8, i8", cache=True, nogil=True)
def _put(
    slot_a: np.ndarray,
    slot_b: np.ndarray,
    slot_offset: np.ndarray,
    hash_a: np.ndarray,
    hash_b: np.ndarray,
    offsets: np.ndarray,
    eligible: np.ndarray,
    size: int,
    max_size: int,
) -> tuple[int, int]:
    """Record ``offsets[i]`` for the key of every eligible row, in row order.

    Returns:
        (the first row not recorded: ``len(offsets)``, or the row of a new key that found the map
        full; the number of keys in the map)
    """
    for i in range(offsets.shape[0]):
        if not eligible[i]:
            continue
        s = _probe(slot_a, slot_b, slot_offset, hash_a[i], hash_b[i])
        if slot_offset[s] == EMPTY:
            if size >= max_size:
                return i, size
            slot_a[s] = hash_a[i]
            slot_b[s] = hash_b[i]
            size += 1
        slot_offset[s] = offsets[i]
    return offsets.shape[0], size


@kernel("u8[::1], u8[::1], i8[::1], u8[::1], u8[::1]", cache=True, nogil=True)
def _get(
    slot_a: np.ndarray, slot_b: np.ndarray, slot_offset: np.ndarray, hash_a: np.ndarray, hash_b: np.ndarray
) -> np.ndarray:
    found = np.empty(hash_a.shape[0], dtype=np.int64)
    for i in range(hash_a.shape[0]):
        found[i] = slot_offset[_probe(slot_a, slot_b, slot_offset, hash_a[i], hash_b[i])]
    return found


class OffsetMap:
    """Key hash -> last offset, for at most ``max_size`` keys.

    Args:
        keys: How many distinct keys it must be able to hold (the table is sized for this many at
            ``LOAD_FACTOR``); at most ``memory_bytes`` is used whatever this is.
        memory_bytes: The memory budget of the slots (Kafka's ``log.cleaner.dedupe.buffer.size``).

    Raises:
        ValueError: The budget does not hold a single slot.
    """

    def __init__(self, keys: int, memory_bytes: int) -> None:
        budget = memory_bytes // SLOT_BYTES
        if budget < 2:
            raise ValueError(f"an offset map of {memory_bytes} bytes holds no key; it needs {2 * SLOT_BYTES}")
        wanted = int(keys / LOAD_FACTOR) + 1
        # Power-of-two tables, so that an odd probe step reaches every slot.
        slots = min(1 << max(1, (wanted - 1).bit_length()), 1 << (budget.bit_length() - 1))
        self.max_size = max(1, int(slots * LOAD_FACTOR))
        self.size = 0
        self._a = np.zeros(slots, dtype=np.uint64)
        self._b = np.zeros(slots, dtype=np.uint64)
        self._offsets = np.full(slots, EMPTY, dtype=np.int64)

    @property
    def slots(self) -> int:
        return len(self._offsets)

    def put(self, hash_a: np.ndarray, hash_b: np.ndarray, offsets: np.ndarray, eligible: np.ndarray) -> int:
        """Record the offset of each eligible row's key, later rows winning; returns the first row not
        recorded (``len(offsets)`` unless the map filled up at a new key)."""
        stop, self.size = _put(
            self._a, self._b, self._offsets, hash_a, hash_b, offsets, eligible, self.size, self.max_size
        )
        return int(stop)

    def get(self, hash_a: np.ndarray, hash_b: np.ndarray) -> np.ndarray:
        """The recorded offset of each key, ``EMPTY`` (-1) for keys not in the map."""
        return _get(self._a, self._b, self._offsets, hash_a, hash_b)


def key_hashes(key_offsets: np.ndarray, key_data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two hash lanes of each key of a binary column's (offsets, data) buffers."""
    n = len(key_offsets) - 1
    a = np.empty(n, dtype=np.uint64)
    b = np.empty(n, dtype=np.uint64)
    hash_keys(key_offsets, key_data, a, b)
    return a, b


#: Which compiled kernels this module uses: ``"aot"`` (the package's extension) or ``"jit"`` (numba's).
KERNELS = bind(globals())
