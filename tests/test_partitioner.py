"""``pysparklog.partitioner``: murmur2 against Kafka's vectors and kafka-python, Kafka's order of
precedence, custom partitioners, and the null-key strategies by their properties (their choices are
random)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from pysparklog.errors import InvalidConfigError, InvalidPartitionsError, InvalidRecordError, UnknownTopicError
from pysparklog.partitioner import (
    NullKeyStrategy,
    Partitioner,
    PartitionerConfig,
    murmur2,
    murmur2_array,
    partition_for_keys,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results

# UtilsTest.testMurmur2, with the partitions for 3 and 10 partitions (kafka-log-format.md §4.1).
VECTORS = [
    (b"21", -973932308, 0, 0),
    (b"foobar", -790332482, 0, 6),
    (b"a-little-bit-long-string", -985981536, 2, 2),
    (b"a-little-bit-longer-string", -1486304829, 2, 9),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 2, 7),
    (b"abc", 479470107, 0, 7),
]


class Constant:
    """A custom partitioner class for ``partitioner.class`` paths: everything to partition 1."""

    def __call__(self, table: pa.Table, num_partitions: int) -> np.ndarray:
        return np.ones(table.num_rows, np.int64)


NOT_CALLABLE = 42


def random_keys(n: int, seed: int = 5) -> list[bytes]:
    """``n`` random keys of 0 to 200 bytes, the first ones empty and of every tail length."""
    rng = np.random.default_rng(seed)
    fixed = [b"", b"a", b"ab", b"abc", b"abcd", b"\xff\xfe\x80\x00"]
    return fixed + [rng.bytes(int(size)) for size in rng.integers(0, 201, n - len(fixed))]


def unkeyed(sizes: list[int] | np.ndarray) -> pa.Table:
    """Records without keys whose values have the given sizes."""
    return pa.table({"value": pa.array([b"x" * int(s) for s in sizes], pa.binary())})


def sticky(batch_size: int, seed: int = 3) -> Partitioner:
    return Partitioner(PartitionerConfig(batch_size=batch_size), rng=np.random.default_rng(seed))


# -- murmur2 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected", "of_3", "of_10"), VECTORS)
def test_murmur2_matches_kafkas_vectors(key: bytes, expected: int, of_3: int, of_10: int) -> None:
    assert murmur2(key) == expected
    keys = pa.array([key], pa.binary())
    assert murmur2_array(keys).tolist() == [expected]
    assert partition_for_keys(keys, 3).tolist() == [of_3]
    assert partition_for_keys(keys, 10).tolist() == [of_10]


def test_murmur2_of_a_string_column_hashes_its_utf8_bytes() -> None:
    keys = pa.array([k.decode() for k, *_ in VECTORS], pa.string())
    assert murmur2_array(keys).tolist() == [h for _, h, *_ in VECTORS]


def test_murmur2_equals_kafka_python_on_random_keys() -> None:
    keys = random_keys(10_000)
    expected = [kafka_python_murmur2(k) for k in keys]  # unsigned: the same 32 bits
    hashes = murmur2_array(pa.array(keys, pa.binary()))
    assert hashes.dtype == np.int32
    assert (hashes.astype(np.int64) & 0xFFFFFFFF).tolist() == expected
    assert [murmur2(k) & 0xFFFFFFFF for k in keys[:500]] == expected[:500]
    partitions = partition_for_keys(pa.array(keys, pa.binary()), 7)
    assert partitions.tolist() == [(h & 0x7FFFFFFF) % 7 for h in expected]


@pytest.mark.parametrize(
    "build",
    [
        lambda keys: pa.array(keys, pa.large_binary()),
        lambda keys: pa.array([b"junk", *keys], pa.binary()).slice(1),
        lambda keys: pa.chunked_array([pa.array(keys[:300], pa.binary()), pa.array(keys[300:], pa.binary())]),
    ],
    ids=["large_binary", "sliced", "chunked"],
)
def test_murmur2_reads_any_layout_of_a_key_column(build: Callable[[list[bytes]], pa.Array]) -> None:
    keys = random_keys(1000, seed=9)
    expected = murmur2_array(pa.array(keys, pa.binary())).tolist()
    assert murmur2_array(build(keys)).tolist() == expected


def test_null_keys_have_no_partition_from_the_hash() -> None:
    keys = pa.array([b"21", None, b"abc", None], pa.binary())
    assert partition_for_keys(keys, 10).tolist() == [0, -1, 7, -1]
    assert murmur2_array(keys).tolist() == [-973932308, 0, 479470107, 0]


def test_partition_for_keys_rejects_bad_inputs() -> None:
    with pytest.raises(InvalidRecordError, match="column 'key' has type int64"):
        partition_for_keys(pa.array([1, 2]), 3)
    for bad in (0, -1, 2**31, True):
        with pytest.raises(InvalidPartitionsError, match=f"partitions = {bad!r} is invalid"):
            partition_for_keys(pa.array([b"k"]), bad)


# -- order of precedence -----------------------------------------------------------------------


def test_keyed_rows_go_where_murmur2_says_and_unkeyed_rows_to_the_null_key_strategy() -> None:
    keys = [b"21", None, b"foobar", b"abc", None]
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array([b"v"] * 5)})
    partitioner = Partitioner(PartitionerConfig(strategy="round_robin"))
    assert partitioner.assign_partitions(table, 10).tolist() == [0, 0, 6, 7, 1]


def test_explicit_partitions_come_first_then_the_custom_partitioner_then_keys() -> None:
    seen: list[pa.Table] = []

    def last_partition(rows: pa.Table, num_partitions: int) -> list[int]:
        seen.append(rows)
        return [num_partitions - 1] * rows.num_rows

    table = pa.table({"key": pa.array([b"21", b"abc", None, b"foobar"]), "value": pa.array([b"a", b"b", b"c", b"d"])})
    explicit = pa.array([2, None, None, 0], pa.int32())
    assert Partitioner(PartitionerConfig()).assign_partitions(table, 10, explicit).tolist()[::3] == [2, 0]
    custom = Partitioner(PartitionerConfig(partitioner_class=last_partition))
    assert custom.assign_partitions(table, 10, explicit).tolist() == [2, 9, 9, 0]
    # The custom partitioner decides only the rows without an explicit partition, keyed or not.
    assert seen[0].column("value").to_pylist() == [b"b", b"c"]
    assert custom.assign_partitions(table, 10, pa.array([1, 1, 1, 1])).tolist() == [1, 1, 1, 1]
    assert len(seen) == 1  # nothing left to decide: not called


def test_an_explicit_partition_outside_the_topic_is_rejected_as_kafka_rejects_it() -> None:
    table = pa.table({"value": pa.array([b"a", b"b"])})
    partitioner = Partitioner()
    with pytest.raises(
        UnknownTopicError, match=r"Invalid partition given with record: 3 is not in the range \[0\.\.\.3\)"
    ):
        partitioner.assign_partitions(table, 3, pa.array([None, 3]))
    with pytest.raises(UnknownTopicError, match="-1 is not in the range"):
        partitioner.assign_partitions(table, 3, pa.array([-1, None]))
    with pytest.raises(InvalidRecordError, match="explicit has 1 partitions for 2 rows"):
        partitioner.assign_partitions(table, 3, pa.array([1]))
    with pytest.raises(InvalidRecordError, match="explicit has type string"):
        partitioner.assign_partitions(table, 3, pa.array(["1", "2"]))


def test_ignore_keys_partitions_keyed_records_like_unkeyed_ones() -> None:
    table = pa.table({"key": pa.array([b"21"] * 6), "value": pa.array([b"v"] * 6)})
    hashed = Partitioner(PartitionerConfig(strategy="round_robin")).assign_partitions(table, 3)
    assert hashed.tolist() == [0] * 6
    # RoundRobinPartitioner as Kafka's class behaves: keys play no part.
    ignored = Partitioner(PartitionerConfig(strategy="round_robin", ignore_keys=True)).assign_partitions(table, 3)
    assert ignored.tolist() == [0, 1, 2, 0, 1, 2]


# -- custom partitioners -----------------------------------------------------------------------


def test_a_partitioner_class_path_is_imported_and_instantiated() -> None:
    config = PartitionerConfig(partitioner_class="tests.test_partitioner.Constant")
    assert isinstance(config.custom, Constant)
    table = pa.table({"key": pa.array([b"21", None]), "value": pa.array([b"a", b"b"])})
    assert Partitioner(config).assign_partitions(table, 3).tolist() == [1, 1]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("no_such_module.Partitioner", "could not be loaded"),
        ("tests.test_partitioner.Missing", "could not be loaded"),
        ("Constant", "could not be loaded"),
        ("tests.test_partitioner.NOT_CALLABLE", "is a int, which is not callable"),
    ],
)
def test_a_bad_partitioner_class_fails_when_the_config_is_made_naming_it(path: str, why: str) -> None:
    with pytest.raises(InvalidConfigError, match=f"partitioner.class = '{path}' {why}"):
        PartitionerConfig(partitioner_class=path)


@pytest.mark.parametrize(
    ("returned", "error", "message"),
    [
        (
            lambda rows, n: [n] * rows.num_rows,
            UnknownTopicError,
            r"returned a partition: 4 is not in the range \[0\.\.\.4\)",
        ),
        (lambda rows, n: [0], InvalidConfigError, r"returned int64 of shape \(1,\) for 3 rows"),
        (lambda rows, n: [0.5] * rows.num_rows, InvalidConfigError, r"returned float64 of shape \(3,\)"),
    ],
    ids=["out of range", "too few", "not integers"],
)
def test_what_a_custom_partitioner_returns_is_checked(
    returned: Callable[[pa.Table, int], list[float]], error: type[Exception], message: str
) -> None:
    partitioner = Partitioner(PartitionerConfig(partitioner_class=returned))
    with pytest.raises(error, match=message):
        partitioner.assign_partitions(unkeyed([1, 2, 3]), 4)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"strategy": "random"}, "strategy = 'random' is invalid; accepted: sticky, round_robin"),
        ({"batch_size": -1}, "batch.size = -1 is invalid"),
        ({"batch_size": True}, "batch.size = True is invalid"),
        ({"ignore_keys": "yes"}, "partitioner.ignore.keys = 'yes' is invalid"),
    ],
)
def test_config_is_validated_eagerly(settings: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        PartitionerConfig(**settings)  # type: ignore[arg-type]


def test_strategy_names_become_the_enum() -> None:
    assert PartitionerConfig(strategy="round_robin").strategy is NullKeyStrategy.ROUND_ROBIN
    assert PartitionerConfig().strategy is NullKeyStrategy.STICKY


# -- uniform sticky ----------------------------------------------------------------------------


def expected_runs(sizes: list[int], batch_size: int, produced: int = 0) -> list[int]:
    """Kafka's rule record by record: which run (sticky partition) each record belongs to."""
    runs, run = [], 0
    for size in sizes:
        runs.append(run)
        produced += size
        if produced >= batch_size:
            run, produced = run + 1, 0
    return runs


def test_sticky_stays_until_batch_size_bytes_then_switches() -> None:
    sizes = np.random.default_rng(1).integers(0, 700, 3000).tolist()
    runs = expected_runs(sizes, 1000)
    # With 2**30 partitions a new random choice repeats the old one with negligible probability.
    partitions = sticky(1000).assign_partitions(unkeyed(sizes), 2**30)
    # The partition changes exactly where a run ends: never inside one, at every boundary.
    changes = np.flatnonzero(np.diff(partitions))
    assert changes.tolist() == np.flatnonzero(np.diff(runs)).tolist()
    assert len(changes) > 500


def test_sticky_keeps_its_partition_and_bytes_across_calls() -> None:
    partitioner = sticky(1000)
    first = partitioner.assign_partitions(unkeyed([100] * 5), 2**30)  # 500 bytes: no switch yet
    second = partitioner.assign_partitions(unkeyed([100] * 10), 2**30)
    assert len(set(first.tolist()) | set(second[:5].tolist())) == 1
    assert len(set(second[5:].tolist())) == 1 and second[5] != second[4]


def test_sticky_counts_only_the_records_it_places() -> None:
    """Keyed records go by their hash and do not move the sticky partition along."""
    keys = pa.array([b"k" if i % 2 else None for i in range(20)], pa.binary())
    table = pa.table({"key": keys, "value": pa.array([b"x" * 100] * 20)})
    partitions = sticky(1000).assign_partitions(table, 2**30)
    unkeyed_rows = partitions[0::2]
    assert len(set(unkeyed_rows.tolist())) == 1  # ten unkeyed records of 100 bytes: one run
    assert set(partitions[1::2].tolist()) == {partition_for_keys(pa.array([b"k"]), 2**30)[0]}


def test_sticky_counts_keys_when_keys_are_ignored() -> None:
    table = pa.table({"key": pa.array([b"k" * 400] * 4), "value": pa.array([b"x" * 100] * 4)})
    config = PartitionerConfig(batch_size=1000, ignore_keys=True)
    partitions = Partitioner(config, rng=np.random.default_rng(2)).assign_partitions(table, 2**30)
    assert partitions[0] == partitions[1] != partitions[2] == partitions[3]  # 500 bytes a record


def test_sticky_choices_are_uniform_and_may_repeat() -> None:
    partitioner = sticky(0)  # switch after every record
    partitions = np.concatenate([partitioner.assign_partitions(unkeyed([10] * 1000), 5) for _ in range(100)])
    counts = np.bincount(partitions, minlength=5)
    assert counts.sum() == 100_000 and np.all(np.abs(counts - 20_000) < 600), counts
    repeats = np.mean(partitions[1:] == partitions[:-1])
    assert 0.18 < repeats < 0.22  # a uniform choice repeats the current partition 1 time in 5


# -- round robin -------------------------------------------------------------------------------


def test_round_robin_cycles_from_partition_0_across_calls() -> None:
    partitioner = Partitioner(PartitionerConfig(strategy=NullKeyStrategy.ROUND_ROBIN))
    assert partitioner.assign_partitions(unkeyed([1] * 4), 3).tolist() == [0, 1, 2, 0]
    assert partitioner.assign_partitions(unkeyed([1] * 5), 3).tolist() == [1, 2, 0, 1, 2]
    assert partitioner.assign_partitions(unkeyed([1] * 3), 5).tolist() == [4, 0, 1]  # the topic grew
