"""The partitioner's kernels: the Java client's murmur2 over a key column, and the runs of the sticky strategy.

They live apart from ``partitioner`` so that the package build, which compiles them ahead of time
(``pysparklog.compiled``), needs numba and NumPy only.
"""

from __future__ import annotations

import numpy as np

from pysparklog.compiled import bind, kernel

SEED = 0x9747B28C
M = 0x5BD1E995
MASK32 = 0xFFFFFFFF
POSITIVE = 0x7FFFFFFF  # Utils.toPositive: drop the sign bit rather than negate

#: The offset types of binary columns: int32 (binary, string) and int64 (large_binary, large_string).
_OFFSETS = ("i4[::1]", "i8[::1]")


@kernel("u1[::1], i8, i8", cache=True, inline="always")
def murmur2_of(data: np.ndarray, start: int, end: int) -> int:
    """murmur2 of ``data[start:end]`` as Java computes it, returned as the unsigned 32-bit pattern.

    Java wraps on every int multiply; here each product of two values below 2**32 and 2**31 fits
    in an int64 and is masked back to 32 bits, and ``>>`` on the masked value is Java's ``>>>``.
    """
    length = end - start
    h = (SEED ^ length) & MASK32
    tail = start + (length & ~3)
    for p in range(start, tail, 4):
        k = int(data[p]) | (int(data[p + 1]) << 8) | (int(data[p + 2]) << 16) | (int(data[p + 3]) << 24)
        k = (k * M) & MASK32
        k ^= k >> 24
        k = (k * M) & MASK32
        h = ((h * M) & MASK32) ^ k
    rest = length & 3
    if rest == 3:
        h ^= int(data[tail + 2]) << 16
    if rest >= 2:
        h ^= int(data[tail + 1]) << 8
    if rest >= 1:
        h ^= int(data[tail])
        h = (h * M) & MASK32
    h ^= h >> 13
    h = (h * M) & MASK32
    h ^= h >> 15
    return h


@kernel(*(f"{offsets}, u1[::1], u1[::1], i4[::1]" for offsets in _OFFSETS), cache=True)
def hash_column(offsets: np.ndarray, valid: np.ndarray, data: np.ndarray, out: np.ndarray) -> None:
    """``out[i]`` = murmur2 of key i as a Java int; 0 for a null key."""
    for i in range(out.shape[0]):
        if valid[i]:
            h = murmur2_of(data, offsets[i], offsets[i + 1])
            out[i] = h - (1 << 32) if h > POSITIVE else h
        else:
            out[i] = 0


@kernel(*(f"{offsets}, u1[::1], u1[::1], i8, i4[::1]" for offsets in _OFFSETS), cache=True)
def partition_column(
    offsets: np.ndarray, valid: np.ndarray, data: np.ndarray, num_partitions: int, out: np.ndarray
) -> None:
    """``out[i]`` = ``toPositive(murmur2(key i)) % num_partitions``; -1 for a null key."""
    for i in range(out.shape[0]):
        if valid[i]:
            out[i] = (murmur2_of(data, offsets[i], offsets[i + 1]) & POSITIVE) % num_partitions
        else:
            out[i] = -1


@kernel("i8[::1], i8, i8, i8[::1]", cache=True)
def sticky_runs(sizes: np.ndarray, produced: int, batch_size: int, runs: np.ndarray) -> tuple[int, int]:
    """Number the runs of records that share a sticky partition, as ``BuiltInPartitioner`` forms them.

    A record goes to the current partition and adds its size to the bytes produced there; once
    those reach ``batch_size`` the next record starts a new run. Each run restarts from zero, so
    where runs end depends on every earlier overshoot: a sequential scan, compiled.

    Returns:
        (switches, bytes produced to the last run's partition): records are numbered 0..switches,
        and ``switches`` counts a switch after the last record too, whose run is still empty.
    """
    run = 0
    for i in range(sizes.shape[0]):
        runs[i] = run
        produced += sizes[i]
        if produced >= batch_size:
            run += 1
            produced = 0
    return run, produced


#: Which compiled kernels this module uses: ``"aot"`` (the package's extension) or ``"jit"`` (numba's).
KERNELS = bind(globals())
