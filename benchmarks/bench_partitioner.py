"""murmur2 partitioning of 10 M keys: what a producer does to every keyed record before it appends.

The keys are 10-byte strings of random digits, the size of the other benchmarks' keys; the row
times ``partition_for_keys`` over the whole column, hashing included, into 12 partitions.
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import KEY_BYTES, Result, binary_column, markdown, measure, pin_to_one_core, rate_figure
from pysparklog.partitioner import partition_for_keys

KEYS = 10_000_000
PARTITIONS = 12


def run(*, repeats: int = 5) -> list[Result]:
    digits = np.random.default_rng(13).integers(ord("0"), ord("9") + 1, (KEYS, KEY_BYTES), dtype=np.uint8)
    keys = binary_column(digits)
    del digits
    timing = measure(lambda: partition_for_keys(keys, PARTITIONS), repeats)
    return [Result(f"murmur2 partitioning of {KEYS // 1_000_000} M {KEY_BYTES}-byte keys", rate_figure(timing, KEYS))]


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
