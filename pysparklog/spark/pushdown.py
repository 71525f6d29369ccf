"""Filter pushdown for batch reads: Spark's filters on ``partition``, ``offset`` and ``timestamp`` as offset bounds.

Spark's Kafka source reads the whole requested offset range and filters afterwards. A log knows more: a
partition number names the files to read, an offset is a position in them, and the time index finds the
first offset at or after a timestamp (Kafka's ``offsetsForTimes``, which ``startingTimestamp`` uses too).
So :func:`translate` turns the filters Spark hands ``DataSourceReader.pushFilters`` into
:class:`PushedBounds`, and :func:`narrow_ranges` intersects a batch's planned ranges with them, before
any record is read:

* ``partition`` with ``=``, ``<=>``, ``in`` and their negations selects partitions: exact, Spark need not
  check it again.
* ``offset`` with ``=``, ``<=>``, ``>``, ``>=``, ``<``, ``<=`` bounds each partition's range: exact. An
  ``in`` list bounds it to its smallest..largest value and stays with Spark too, which picks the values.
* ``timestamp`` with ``>``, ``>=`` or ``=`` starts each partition's range at the first offset whose
  timestamp reaches the bound. CreateTime timestamps are the producer's and need not grow with the
  offset, so a later record can be older than the bound: the filter stays with Spark as well. Upper
  bounds on the timestamp cannot prune (an older record may come after any offset) and stay with Spark.

Anything else (other columns, ``or``, values of unexpected types) is returned to Spark as it came:
every filter returned is one of the input objects, as PySpark checks.

Spark hands a ``timestamp`` literal as a UTC-aware ``datetime`` whatever ``spark.sql.session.timeZone`` is
(the session time zone only decides how a string such as ``'2024-01-01 10:00'`` is read before that);
a naive one, which carries no instant, is left to Spark.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
)

from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.storage import MAX_TIMESTAMP
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)  # noqa: UP017 (dt.UTC is 3.11+)
_MICROSECOND = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class PushedBounds:
    """What the pushed filters allow, all of it at once (Spark's filters are a conjunction).

    Attributes:
        partitions: The partition numbers that may hold matching rows; None for any.
        excluded_partitions: Partition numbers that hold none (``partition != p``, ``partition not in``).
        offset_from: The smallest offset that may match (inclusive).
        offset_until: The offset past the largest one that may match (exclusive); None for no bound.
        timestamp_from_ms: The smallest record timestamp, in epoch milliseconds, that may match; None
            for no bound.
    """

    partitions: frozenset[int] | None = None
    excluded_partitions: frozenset[int] = frozenset()
    offset_from: int = 0
    offset_until: int | None = None
    timestamp_from_ms: int | None = None

    def allows_partition(self, partition: int) -> bool:
        return (self.partitions is None or partition in self.partitions) and partition not in self.excluded_partitions


def translate(filters: Sequence[Filter]) -> tuple[PushedBounds, list[Filter]]:
    """The bounds ``filters`` set, and the filters Spark must still evaluate (the same objects, in order).

    A filter shaped as none of those in the module's description leaves the bounds as they are and is
    returned; a ``timestamp`` or offset ``in`` filter narrows the bounds and is returned too.
    """
    bounds = PushedBounds()
    for_spark: list[Filter] = []
    for pushed in filters:
        narrowed, exact = _apply(bounds, pushed)
        if narrowed is not None:
            bounds = narrowed
        if narrowed is None or not exact:
            for_spark.append(pushed)
    return bounds, for_spark


def _apply(bounds: PushedBounds, pushed: Filter) -> tuple[PushedBounds | None, bool]:
    """``bounds`` narrowed by one filter and whether that is exact; (None, False) for a filter not handled."""
    negated = isinstance(pushed, Not)
    inner = pushed.child if isinstance(pushed, Not) else pushed
    column = getattr(inner, "attribute", None)
    if column == ("partition",):
        values = _values(inner, allowed=(EqualTo, EqualNullSafe, In))
        if values is None:
            return None, False
        if negated:
            return dataclasses.replace(bounds, excluded_partitions=bounds.excluded_partitions | values), True
        partitions = values if bounds.partitions is None else bounds.partitions & values
        return dataclasses.replace(bounds, partitions=partitions), True
    if negated:
        return None, False
    if column == ("offset",):
        return _offset_bounds(bounds, inner)
    if column == ("timestamp",) and isinstance(inner, GreaterThan | GreaterThanOrEqual | EqualTo):
        first_ms = _first_millisecond(inner.value, strictly_after=isinstance(inner, GreaterThan))
        if first_ms is None:
            return None, False
        current = bounds.timestamp_from_ms
        latest_bound = first_ms if current is None else max(current, first_ms)
        return dataclasses.replace(bounds, timestamp_from_ms=latest_bound), False
    return None, False


def _offset_bounds(bounds: PushedBounds, inner: Filter) -> tuple[PushedBounds | None, bool]:
    if isinstance(inner, In):
        values = _values(inner, allowed=(In,))
        if values is None:
            return None, False
        if not values:  # ``offset in ()`` of nulls only: nothing matches
            return _bounded(bounds, 0, 0), True
        return _bounded(bounds, min(values), max(values) + 1), False
    value = getattr(inner, "value", None)
    if not _is_integer(value):
        return None, False
    if isinstance(inner, EqualTo | EqualNullSafe):
        return _bounded(bounds, value, value + 1), True
    if isinstance(inner, GreaterThan):
        return _bounded(bounds, value + 1, None), True
    if isinstance(inner, GreaterThanOrEqual):
        return _bounded(bounds, value, None), True
    if isinstance(inner, LessThan):
        return _bounded(bounds, 0, value), True
    if isinstance(inner, LessThanOrEqual):
        return _bounded(bounds, 0, value + 1), True
    return None, False


def _bounded(bounds: PushedBounds, start: int, until: int | None) -> PushedBounds:
    """``bounds`` with offsets ``[start, until)`` intersected in."""
    offset_until = bounds.offset_until
    if until is not None:
        offset_until = until if offset_until is None else min(offset_until, until)
    return dataclasses.replace(bounds, offset_from=max(bounds.offset_from, start), offset_until=offset_until)


def _values(inner: Filter, *, allowed: tuple[type[Filter], ...]) -> frozenset[int] | None:
    """The integer values an equality or ``in`` filter names (nulls, which match nothing, left out); None when
    the filter is of another kind or names something other than integers."""
    if not isinstance(inner, allowed):
        return None
    raw: Iterable[object] = inner.value if isinstance(inner, In) else (getattr(inner, "value", None),)
    values = [value for value in raw if value is not None]
    integers = [value for value in values if _is_integer(value)]
    return frozenset(integers) if len(integers) == len(values) else None


def _is_integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _first_millisecond(value: object, *, strictly_after: bool) -> int | None:
    """The first whole millisecond (a record timestamp's unit) at or after, or strictly after, ``value``;
    None for anything but a time-zone-aware ``datetime`` at or after the epoch (record timestamps are not
    negative, so an earlier bound prunes nothing)."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None or value.utcoffset() is None:
        return None
    micros = (value - _EPOCH) // _MICROSECOND
    if micros < 0:
        return None
    if strictly_after:
        return micros // 1000 + 1
    return -(-micros // 1000)


def narrow_ranges(ranges: Sequence[OffsetRange], bounds: PushedBounds, log_dir: LogDirectory) -> list[OffsetRange]:
    """``ranges`` (one per partition, from the batch's options) intersected with ``bounds``; partitions left
    with nothing to read are dropped, so a predicate matching nothing plans no task rather than failing.

    A timestamp bound is looked up only in partitions still worth reading, with the log's time index.
    """
    narrowed: list[OffsetRange] = []
    for piece in ranges:
        if not bounds.allows_partition(piece.tp.partition):
            continue
        start = max(piece.start, bounds.offset_from)
        end = piece.end if bounds.offset_until is None else min(piece.end, bounds.offset_until)
        if start < end and bounds.timestamp_from_ms is not None:
            start = max(start, first_offset_at_or_after(log_dir, piece.tp, bounds.timestamp_from_ms, end))
        if start < end:
            narrowed.append(OffsetRange(piece.tp, start, end))
    return narrowed


def first_offset_at_or_after(log_dir: LogDirectory, tp: TopicPartition, timestamp_ms: int, end: int) -> int:
    """The offset before which no record of ``tp`` has a timestamp of ``timestamp_ms`` or later, ``end`` when
    no record has one.

    Kafka's ``offsetsForTimes`` (``PartitionLog.offset_for_timestamp``) answers it, searching the first segment
    whose largest timestamp reaches the bound. It has no answer both when no record qualifies and when that
    segment holds no record at all (compaction can leave one, whose file time then stands for its
    timestamp): the log's largest timestamp tells them apart, and in the second case nothing is pruned.
    """
    with log_dir.partition(tp.topic, tp.partition) as log:
        found = log.offset_for_timestamp(timestamp_ms)
        if found is not None:
            return found[0]
        largest = log.offset_for_timestamp(MAX_TIMESTAMP)
        if largest is None or largest[1] < timestamp_ms:
            return end
        return log.log_start_offset
