"""Which partition each record goes to: the Kafka producer's partitioning, over whole Arrow tables.

A keyed record must land on the partition a Kafka producer would choose, because everything that
reads the topic by key relies on it: consumers that own a key's partition, compaction, and joins
with topics written by Kafka clients. So keys are hashed with the Java client's murmur2, bit for
bit (``Utils.murmur2``), and mapped as ``BuiltInPartitioner.partitionForKey`` maps them. The hash
runs in a numba kernel over the key column's Arrow buffers: no Python object per record.

For each record, Kafka's order of precedence (``KafkaProducer.partition``):

1. an explicit partition given with the record;
2. a custom partitioner (``partitioner.class``);
3. the key's murmur2 hash over all partitions, unless ``partitioner.ignore.keys``;
4. for records without a key (or with keys ignored), the null-key strategy: uniform sticky
   (KIP-794, Kafka's default) or round robin.

Sticky and round-robin choices depend on what was sent before, so a ``Partitioner`` keeps that
state between calls; keep one per topic, as Kafka keeps one sticky partition and one counter per
topic.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pysparklog import partitioner_kernels as kernels
from pysparklog._compat import StrEnum
from pysparklog.errors import InvalidConfigError, InvalidPartitionsError, InvalidRecordError, UnknownTopicError
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.records.arrow_records import binary_buffers

#: A custom partitioner: given the records it decides for (the table's rows that carry no explicit
#: partition) and the topic's partition count, it returns one partition per row. It sees whole
#: tables rather than one record at a time, so it can stay vectorised as the built-in rules are.
CustomPartitioner = Callable[[pa.Table, int], npt.ArrayLike]


def murmur2(key: bytes) -> int:
    """The Java client's ``Utils.murmur2`` of ``key``: a signed 32-bit int, as Java returns it."""
    h = int(kernels.murmur2_of(np.frombuffer(key, np.uint8), 0, len(key)))
    return h - (1 << 32) if h > kernels.POSITIVE else h


def murmur2_array(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """murmur2 of every key of a binary or string column, as int32; a null key's slot holds 0.

    Raises:
        InvalidConfigError: ``keys`` is not binary, string, large_binary or large_string.
    """
    offsets, valid, data = binary_buffers(keys, "key")
    out = np.empty(len(valid), np.int32)
    kernels.hash_column(offsets, valid, data, out)
    return out


def partition_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray:
    """The partition Kafka's producer gives each key: ``(murmur2(key) & 0x7fffffff) % num_partitions``.

    Returns:
        int32 partitions, -1 where the key is null (the null-key strategy decides those).

    Raises:
        InvalidConfigError: ``keys`` is not binary, string, large_binary or large_string.
        InvalidPartitionsError: ``num_partitions`` is not a positive int32.
    """
    _validate_num_partitions(num_partitions)
    offsets, valid, data = binary_buffers(keys, "key")
    out = np.empty(len(valid), np.int32)
    kernels.partition_column(offsets, valid, data, num_partitions, out)
    return out


class NullKeyStrategy(StrEnum):
    """Where records without a key (or with ``ignore_keys``) go."""

    #: KIP-794's uniform sticky partitioning, Kafka's default since 3.3: stay on one partition
    #: until ``batch.size`` bytes have gone to it, then move to a uniformly random partition (it
    #: may be the same one). Kafka weighs that choice by broker queue sizes when it has them;
    #: without brokers there are none, which is Kafka's own behaviour without load stats.
    STICKY = "sticky"
    #: Kafka's ``RoundRobinPartitioner``: partition ``counter++ % n``, the counter starting at 0.
    #: Kafka once called it twice per new batch and skipped partitions (KAFKA-9965); this follows
    #: the fix (KAFKA-17632). Kafka's class also ignores keys: set ``ignore_keys`` to match it.
    ROUND_ROBIN = "round_robin"


@dataclass(frozen=True, slots=True)
class PartitionerConfig:
    """How records are partitioned; every setting is checked when the config is made.

    Attributes:
        strategy: The null-key strategy, a ``NullKeyStrategy`` or its value (``"sticky"``,
            ``"round_robin"``).
        batch_size: Kafka's ``batch.size``: the bytes (keys and values) the sticky strategy sends
            to a partition before it switches. Kafka counts whole encoded records, a few bytes
            more each, so switches come a record or so later here.
        ignore_keys: Kafka's ``partitioner.ignore.keys``: partition keyed records as unkeyed ones.
        partitioner_class: Kafka's ``partitioner.class``: a ``CustomPartitioner``, or the import
            path of one (``"package.module.Name"``). A class is instantiated without arguments
            and its instances must be callable, as Kafka instantiates its partitioner class.
    """

    strategy: NullKeyStrategy | str = NullKeyStrategy.STICKY
    batch_size: int = 16384
    ignore_keys: bool = False
    partitioner_class: str | CustomPartitioner | None = None
    #: The custom partitioner in use: ``partitioner_class`` imported and instantiated.
    custom: CustomPartitioner | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "strategy", NullKeyStrategy(self.strategy))
        except ValueError:
            accepted = ", ".join(s.value for s in NullKeyStrategy)
            raise InvalidConfigError(f"strategy = {self.strategy!r} is invalid; accepted: {accepted}") from None
        if (
            isinstance(self.batch_size, bool)
            or not isinstance(self.batch_size, int)
            or not 0 <= self.batch_size <= INT_MAX
        ):
            raise InvalidConfigError(
                f"batch.size = {self.batch_size!r} is invalid; accepted: an integer from 0 to {INT_MAX}"
            )
        if not isinstance(self.ignore_keys, bool):
            raise InvalidConfigError(f"partitioner.ignore.keys = {self.ignore_keys!r} is invalid; accepted: a bool")
        object.__setattr__(self, "custom", _load_partitioner(self.partitioner_class))


def _load_partitioner(spec: str | CustomPartitioner | None) -> CustomPartitioner | None:
    """Resolve ``partitioner.class``: import a path, instantiate a class, check the result is callable."""
    if spec is None:
        return None
    found: object = spec
    if isinstance(spec, str):
        module_name, _, name = spec.rpartition(".")
        try:
            found = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError, ValueError) as error:
            raise InvalidConfigError(
                f"partitioner.class = {spec!r} could not be loaded ({error}); accepted: a callable or the import "
                "path of one, such as 'package.module.MyPartitioner'"
            ) from None
    if isinstance(found, type):
        found = found()
    if not callable(found):
        raise InvalidConfigError(
            f"partitioner.class = {spec!r} is a {type(found).__name__}, which is not callable; accepted: a callable "
            "taking (table, num_partitions), or a class whose instances are"
        )
    return cast(CustomPartitioner, found)


class Partitioner:
    """Assigns partitions to records as a Kafka producer does, keeping the sticky and round-robin state.

    Args:
        config: The partitioning settings.
        rng: Where the sticky strategy's random choices come from (default: a fresh generator).

    Example:
        >>> partitioner = Partitioner(PartitionerConfig())
        >>> partitions = partitioner.assign_partitions(table, num_partitions=3)
        >>> for p in range(3):
        ...     logs.partition("orders", p).append_arrow(table.filter(partitions == p))
    """

    def __init__(self, config: PartitionerConfig | None = None, *, rng: np.random.Generator | None = None) -> None:
        self.config = config or PartitionerConfig()
        self._rng = rng or np.random.default_rng()
        self._sticky_partition = -1  # none chosen yet
        self._sticky_produced = 0
        self._counter = 0  # a Java int's bit pattern: it wraps at 2**32

    def assign_partitions(
        self, table: pa.Table, num_partitions: int, explicit: pa.Array | pa.ChunkedArray | None = None
    ) -> np.ndarray:
        """The partition of every row of ``table``, by Kafka's order of precedence.

        Args:
            table: The records: a ``key`` column (binary or string) decides keyed rows; ``key``
                and ``value`` sizes feed the sticky strategy.
            num_partitions: The topic's partition count.
            explicit: Per row, a partition given with the record, or null to let the partitioner
                decide (Kafka's ``ProducerRecord.partition``).

        Returns:
            int32 partitions, one per row.

        Raises:
            InvalidPartitionsError: ``num_partitions`` is not positive.
            UnknownTopicError: An explicit partition is outside the topic, or a custom partitioner
                returned one that is.
            InvalidRecordError: A column has a type the partitioner cannot read, or ``explicit`` does not
                give one integer (or null) per row.
            InvalidConfigError: A custom partitioner did not return one integer per row.
        """
        _validate_num_partitions(num_partitions)
        n = table.num_rows
        out = np.empty(n, np.int32)
        pending = np.ones(n, dtype=bool)  # rows the next rule still has to decide
        if explicit is not None:
            given, has_given = _explicit_partitions(explicit, n, num_partitions)
            out[has_given] = given[has_given]
            pending &= ~has_given
        custom = self.config.custom
        if custom is not None:
            rows = np.flatnonzero(pending)
            if len(rows):
                chosen = custom(table if len(rows) == n else table.take(rows), num_partitions)
                out[rows] = _checked_custom(chosen, len(rows), num_partitions, self.config.partitioner_class)
            return out
        if "key" in table.column_names and not self.config.ignore_keys:
            by_key = partition_for_keys(table.column("key"), num_partitions)
            keyed = pending & (by_key >= 0)
            out[keyed] = by_key[keyed]
            pending &= ~keyed
        rows = np.flatnonzero(pending)
        if len(rows):
            if self.config.strategy is NullKeyStrategy.ROUND_ROBIN:
                out[rows] = self._round_robin(len(rows), num_partitions)
            else:
                out[rows] = self._sticky(_record_sizes(table)[rows], num_partitions)
        return out

    def _sticky(self, sizes: np.ndarray, num_partitions: int) -> np.ndarray:
        if not 0 <= self._sticky_partition < num_partitions:
            self._sticky_partition = int(self._rng.integers(num_partitions))
            self._sticky_produced = 0
        runs = np.empty(len(sizes), np.int64)
        switches, self._sticky_produced = kernels.sticky_runs(
            sizes, self._sticky_produced, self.config.batch_size, runs
        )
        choices = np.empty(switches + 1, np.int32)
        choices[0] = self._sticky_partition
        choices[1:] = self._rng.integers(num_partitions, size=switches)
        self._sticky_partition = int(choices[-1])
        return choices[runs]

    def _round_robin(self, count: int, num_partitions: int) -> np.ndarray:
        counters = (self._counter + np.arange(count, dtype=np.int64)) & kernels.POSITIVE
        self._counter = (self._counter + count) & kernels.MASK32
        return (counters % num_partitions).astype(np.int32)


def _validate_num_partitions(num_partitions: int) -> None:
    """Refuse a partition count Kafka's arithmetic has no answer for: the partitioner computes for any topic,
    a broker's too, so its bound is Kafka's int32 rather than a log directory's ``MAX_PARTITIONS``."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or not 1 <= num_partitions <= INT_MAX:
        raise InvalidPartitionsError(
            f"num_partitions = {num_partitions!r} is invalid; accepted: an integer from 1 to {INT_MAX}"
        )


def _record_sizes(table: pa.Table) -> np.ndarray:
    """Bytes of each row's key and value, what the sticky strategy counts (a null counts 0)."""
    sizes = np.zeros(table.num_rows, np.int64)
    for name in ("key", "value"):
        if name in table.column_names:
            offsets, valid, _data = binary_buffers(table.column(name), name)
            sizes += np.diff(offsets) * valid
    return sizes


def _explicit_partitions(
    explicit: pa.Array | pa.ChunkedArray, n: int, num_partitions: int
) -> tuple[np.ndarray, np.ndarray]:
    """(partitions, which rows have one) of the ``explicit`` column, checked against the topic."""
    if len(explicit) != n:
        raise InvalidRecordError(f"explicit has {len(explicit)} partitions for {n} rows; give one (or null) per row")
    if not pa.types.is_integer(explicit.type):
        raise InvalidRecordError(f"explicit has type {explicit.type}; accepted: an integer type, null for none")
    given = np.asarray(explicit.fill_null(0), dtype=np.int64)
    has_given = np.asarray(explicit.is_valid(), dtype=bool)
    _check_range(given[has_given], num_partitions, "Invalid partition given with record")
    return given, has_given


def _checked_custom(
    chosen: npt.ArrayLike, rows: int, num_partitions: int, name: str | CustomPartitioner | None
) -> np.ndarray:
    """What a custom partitioner returned, once it is known to be one valid partition per row."""
    result = np.asarray(chosen)
    if result.shape != (rows,) or not np.issubdtype(result.dtype, np.integer):
        raise InvalidConfigError(
            f"partitioner.class {name!r} returned {result.dtype} of shape {result.shape} for {rows} rows; "
            "it must return one integer partition per row"
        )
    _check_range(result, num_partitions, f"partitioner.class {name!r} returned a partition")
    return result


def _check_range(partitions: np.ndarray, num_partitions: int, what: str) -> None:
    """Kafka's check of an explicit partition, for all at once: ``[0...num_partitions)``."""
    bad = (partitions < 0) | (partitions >= num_partitions)
    if bad.any():
        raise UnknownTopicError(f"{what}: {int(partitions[np.argmax(bad)])} is not in the range [0...{num_partitions})")
