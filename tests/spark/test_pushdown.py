"""Filter pushdown of batch reads: Spark's filters on ``partition``, ``offset`` and ``timestamp`` as offset bounds.

The translation and the planning are checked without Spark, on the filter objects PySpark hands
``pushFilters`` (a ``timestamp`` literal comes as a UTC-aware ``datetime``, whatever the session time zone);
the few Spark tests check that a query reads the same rows with pushdown as without, in a session with
``spark.sql.python.filterPushdown.enabled`` and in a default one, and which filters Spark still applies.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from pysparklog import LogDirectory
from pysparklog.datasource_v2 import (
    _PUSHDOWN_PLANNER,
    PySparkLogBatchReader,
    PySparkLogDataSource,
    PySparkLogPushdownReader,
    RangesPartition,
)
from pysparklog.spark.arrow import source_schema
from pysparklog.spark.kafka_options import SourceOptions
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.spark.pushdown import PushedBounds, narrow_ranges, translate
from pysparklog.structs import TopicPartition
from tests.spark.conftest import TS, Coordinates, coordinates, make_topic

UTC = dt.timezone.utc

#: CreateTime offsets of topic ``events``'s partitions, out of order: a record may be older than one before it.
EVENT_TIMES = [
    [0, 50, 10, 60, 20, 70, 30, 80, 40, 90],
    [5, 15, 25, 35, 45, 55, 65, 75],
    [100, 0, 100, 0, 100, 0],
]

OFFSET = ("offset",)
PARTITION = ("partition",)
TIMESTAMP = ("timestamp",)


def at(ms: int) -> dt.datetime:
    """The instant ``TS + ms`` as PySpark hands a timestamp literal to ``pushFilters``."""
    return dt.datetime.fromtimestamp((TS + ms) / 1000, UTC)


@pytest.fixture
def events(tmp_path: Path) -> Path:
    """Topic ``events``: partition ``p``'s record ``o`` is stamped ``TS + EVENT_TIMES[p][o]``."""
    logs = LogDirectory(tmp_path / "logs")
    logs.topics.create("events", len(EVENT_TIMES))
    for partition, times in enumerate(EVENT_TIMES):
        # One batch per record, so that the time index has an entry for each, but for the last partition, one batch.
        batches = [times] if partition == len(EVENT_TIMES) - 1 else [[time] for time in times]
        with logs.partition("events", partition) as log:
            for batch in batches:
                values = [f"{partition}:{time}".encode() for time in batch]
                log.append_arrow(pa.table({"value": values, "timestamp": [TS + time for time in batch]}))
    return tmp_path / "logs"


def planned(path: Path, filters: Sequence[Filter], **options: str) -> tuple[list[OffsetRange], list[Filter]]:
    """The ranges the pushdown reader plans for ``filters`` over topic ``events``, and the filters it gives back."""
    reader = PySparkLogPushdownReader(
        SourceOptions.parse({"path": str(path), "subscribe": "events", **options}, streaming=False)
    )
    returned = list(reader.pushFilters(list(filters)))
    ranges = [piece for task in reader.partitions() if isinstance(task, RangesPartition) for piece in task.ranges]
    return sorted(ranges), returned


def tp(partition: int) -> TopicPartition:
    return TopicPartition("events", partition)


# -- translation -------------------------------------------------------------------------------------------


def test_partition_and_offset_filters_are_exact_and_not_given_back() -> None:
    filters: list[Filter] = [
        In(PARTITION, (0, 2, 3)),
        Not(EqualTo(PARTITION, 3)),
        GreaterThanOrEqual(OFFSET, 3),
        LessThanOrEqual(OFFSET, 7),
        GreaterThan(OFFSET, 3),
        LessThan(OFFSET, 100),
    ]
    bounds, returned = translate(filters)
    assert bounds == PushedBounds(frozenset({0, 2, 3}), frozenset({3}), 4, 8, None)
    assert [bounds.allows_partition(p) for p in range(4)] == [True, False, True, False]
    assert returned == []


def test_equalities_and_a_contradiction() -> None:
    assert translate([EqualTo(OFFSET, 5), EqualNullSafe(PARTITION, 1)])[0] == PushedBounds(
        frozenset({1}), offset_from=5, offset_until=6
    )
    assert translate([EqualTo(PARTITION, 1), EqualTo(PARTITION, 2)])[0].partitions == frozenset()
    assert translate([In(PARTITION, (None,))])[0].partitions == frozenset()  # null equals nothing


def test_an_offset_in_list_bounds_to_its_extremes_and_stays_with_spark() -> None:
    in_list = In(OFFSET, (9, 2, None, 5))
    bounds, returned = translate([in_list])
    assert (bounds.offset_from, bounds.offset_until) == (2, 10)
    assert returned == [in_list] and returned[0] is in_list


def test_timestamp_lower_bounds_push_to_the_millisecond_and_stay_with_spark() -> None:
    at_or_after = GreaterThanOrEqual(TIMESTAMP, dt.datetime(2023, 11, 14, 22, 13, 20, 1500, tzinfo=UTC))
    after = GreaterThan(TIMESTAMP, dt.datetime(2023, 11, 14, 22, 13, 20, 1000, tzinfo=UTC))
    equal = EqualTo(TIMESTAMP, dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC))
    assert translate([at_or_after])[0].timestamp_from_ms == TS + 2  # 1.5 ms: the first whole millisecond is 2
    assert translate([after])[0].timestamp_from_ms == TS + 2  # strictly after 1 ms
    assert translate([equal])[0].timestamp_from_ms == TS
    bounds, returned = translate([equal, after, at_or_after])
    assert bounds.timestamp_from_ms == TS + 2
    assert [id(f) for f in returned] == [id(equal), id(after), id(at_or_after)]


def test_an_aware_timestamp_in_any_time_zone_is_its_instant() -> None:
    kolkata = dt.timezone(dt.timedelta(hours=5, minutes=30))
    local = GreaterThanOrEqual(TIMESTAMP, dt.datetime(2023, 11, 15, 3, 43, 20, tzinfo=kolkata))
    assert translate([local])[0].timestamp_from_ms == TS


def test_shapes_not_handled_are_given_back_untouched() -> None:
    filters: list[Filter] = [
        LessThan(TIMESTAMP, at(10)),  # an upper bound: an older record may come after any offset
        GreaterThanOrEqual(TIMESTAMP, dt.datetime(2023, 11, 14, 22, 13, 20)),  # naive: no instant
        GreaterThanOrEqual(TIMESTAMP, dt.datetime(1969, 12, 31, tzinfo=UTC)),  # before any record timestamp
        Not(GreaterThan(OFFSET, 3)),
        Not(GreaterThanOrEqual(TIMESTAMP, at(10))),
        GreaterThan(OFFSET, 2.5),
        EqualTo(OFFSET, True),
        In(PARTITION, (1, "2")),
        GreaterThan(PARTITION, 1),
        IsNotNull(OFFSET),
        StringStartsWith(("topic",), "ev"),
        EqualTo(("key",), b"k"),
    ]
    bounds, returned = translate(filters)
    assert bounds == PushedBounds()
    assert len(returned) == len(filters)
    assert all(back is given for back, given in zip(returned, filters, strict=True))


# -- planning ----------------------------------------------------------------------------------------------


def test_partition_and_offset_filters_plan_only_what_they_select(events: Path) -> None:
    ranges, returned = planned(events, [In(PARTITION, (0, 2)), GreaterThanOrEqual(OFFSET, 3), LessThan(OFFSET, 8)])
    assert ranges == [OffsetRange(tp(0), 3, 8), OffsetRange(tp(2), 3, 6)]
    assert returned == []


def test_pushed_bounds_intersect_the_starting_and_ending_offsets(events: Path) -> None:
    options = {
        "startingOffsets": '{"events": {"0": 2, "1": 4, "2": 0}}',
        "endingOffsets": '{"events": {"0": 6, "1": 8, "2": 2}}',
    }
    ranges, _ = planned(events, [GreaterThanOrEqual(OFFSET, 3), LessThanOrEqual(OFFSET, 6)], **options)
    assert ranges == [OffsetRange(tp(0), 3, 6), OffsetRange(tp(1), 4, 7)]  # partition 2's [0, 2) has none of them


def test_a_predicate_matching_nothing_plans_no_task(events: Path) -> None:
    assert planned(events, [GreaterThan(OFFSET, 1000)]) == ([], [])
    assert planned(events, [EqualTo(PARTITION, 7)]) == ([], [])
    assert planned(events, [GreaterThan(TIMESTAMP, at(1000))])[0] == []


def test_a_timestamp_bound_starts_each_partition_at_the_first_record_reaching_it(events: Path) -> None:
    bound = GreaterThanOrEqual(TIMESTAMP, at(45))
    ranges, returned = planned(events, [bound])
    # The first offsets stamped 45 or later: 50 at 1 in partition 0, 45 at 4 in partition 1, 100 at 0 in 2.
    assert ranges == [OffsetRange(tp(0), 1, 10), OffsetRange(tp(1), 4, 8), OffsetRange(tp(2), 0, 6)]
    assert returned == [bound]
    ranges, _ = planned(events, [GreaterThan(TIMESTAMP, at(80)), GreaterThanOrEqual(OFFSET, 2)])
    assert ranges == [OffsetRange(tp(0), 9, 10), OffsetRange(tp(2), 2, 6)]  # no record of partition 1 is after 80


def test_no_record_before_the_pushed_start_matches(events: Path) -> None:
    """With timestamps out of order, pruning must still keep every record that matches: checked against the
    records themselves for every bound."""
    logs = LogDirectory(events)
    full = [OffsetRange(tp(p), 0, len(times)) for p, times in enumerate(EVENT_TIMES)]
    for bound in range(-1, 102):
        narrowed = {
            piece.tp.partition: piece.start
            for piece in narrow_ranges(full, PushedBounds(timestamp_from_ms=TS + bound), logs)
        }
        for partition, times in enumerate(EVENT_TIMES):
            start = narrowed.get(partition, len(times))
            assert all(time < bound for time in times[:start]), (bound, partition, start)
            assert start == len(times) or times[start] >= bound


# -- which reader Spark gets ---------------------------------------------------------------------------------


def test_only_the_pushdown_planner_gets_the_reader_with_push_filters(events: Path) -> None:
    source = PySparkLogDataSource({"path": str(events), "subscribe": "events"})
    schema = source_schema(False)
    assert type(source.reader(schema)) is PySparkLogBatchReader
    call = compile("reader = source.reader(schema)", "data_source_pushdown_filters.py", "exec")
    imported: dict[str, object] = {"__name__": _PUSHDOWN_PLANNER, "source": source, "schema": schema}
    exec(call, imported)  # noqa: S102 (code running as the planner's module)
    assert type(imported["reader"]) is PySparkLogPushdownReader

    class Spec:  # ``python -m``: the module runs as __main__, and its spec says which it is
        name = _PUSHDOWN_PLANNER

    run_as_main: dict[str, object] = {"__name__": "__main__", "__spec__": Spec(), "source": source, "schema": schema}
    exec(call, run_as_main)  # noqa: S102
    assert type(run_as_main["reader"]) is PySparkLogPushdownReader


# -- on Spark ----------------------------------------------------------------------------------------------


QUERIES = [
    "partition = 1",
    "partition in (0, 2) and offset between 3 and 7",
    "offset in (1, 4, 9) and partition != 1",
    f"timestamp >= timestamp_millis({TS + 45})",
    f"timestamp > timestamp_millis({TS + 45}) and offset < 8",
    f"timestamp >= timestamp_millis({TS + 45}) and timestamp < timestamp_millis({TS + 80})",
    "offset > 100",
]


@pytest.fixture(scope="module")
def pushdown_spark(spark: SparkSession) -> SparkSession:
    session = spark.newSession()
    session.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    return session


@pytest.mark.spark
@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "startingOffsets": '{"events": {"0": 2, "1": 0, "2": 1}}',
            "endingOffsets": '{"events": {"0": 9, "1": 5, "2": 4}}',
        },
    ],
    ids=["all", "offset-options"],
)
def test_pushdown_reads_the_rows_spark_would_filter(
    spark: SparkSession, pushdown_spark: SparkSession, events: Path, options: dict[str, str]
) -> None:
    """Each query gives the same rows in a session with pushdown as in a default one, where the reader takes no
    filters (and, as PySpark refuses a reader with ``pushFilters`` there, must not offer it)."""
    pushed = pushdown_spark.read.format("pysparklog").option("subscribe", "events").options(**options).load(str(events))
    plain = spark.read.format("pysparklog").option("subscribe", "events").options(**options).load(str(events))
    for query in QUERIES:
        assert coordinates(pushed.where(query)) == coordinates(plain.where(query)), query
    assert coordinates(plain.where(QUERIES[3])), "the timestamp query selects rows"


def scanned(df: DataFrame) -> tuple[list[Coordinates], int]:
    """The rows of ``df`` (a filtered read of the source) and how many rows its scan read before Spark's filter
    (the ``BatchScan`` node's ``numOutputRows``)."""
    rows = sorted((row.topic, row.partition, row.offset) for row in df.collect())  # df's own plan runs
    scan = df._jdf.queryExecution().executedPlan().collectLeaves().head()
    assert scan.nodeName() == "BatchScan pysparklog"
    return rows, scan.metrics().apply("numOutputRows").value()


@pytest.mark.spark
def test_spark_reads_less_and_applies_only_the_filters_given_back(
    spark: SparkSession, pushdown_spark: SparkSession, events: Path
) -> None:
    query = f"partition = 1 and offset >= 3 and timestamp >= timestamp_millis({TS + 45})"
    df = pushdown_spark.read.format("pysparklog").option("subscribe", "events").load(str(events)).where(query)
    assert scanned(df) == ([("events", 1, offset) for offset in range(4, 8)], 4)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "timestamp" in plan.split("BatchScan")[0] and "offset >=" not in plan and "partition =" not in plan
    everything = spark.read.format("pysparklog").option("subscribe", "events").load(str(events)).where(query)
    assert scanned(everything)[1] == sum(map(len, EVENT_TIMES))
    # Out of order: from the first record stamped 45 or later on, in each partition; Spark drops the older ones.
    recent = pushdown_spark.read.format("pysparklog").option("subscribe", "events").load(str(events))
    rows, read = scanned(recent.where(f"timestamp >= timestamp_millis({TS + 45})"))
    assert (len(rows), read) == (5 + 4 + 3, 9 + 4 + 6)


@pytest.mark.spark
def test_a_session_time_zone_other_than_utc(pushdown_spark: SparkSession, tmp_path: Path) -> None:
    """A timestamp string is read in the session time zone (+05:30 here), and the bound is that instant: the
    record stamped exactly then is the first read, the one a millisecond earlier is not read."""
    make_topic(tmp_path, "events", [10])
    session = pushdown_spark.newSession()
    session.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    session.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    local = dt.datetime.fromtimestamp((TS + 4) / 1000, dt.timezone(dt.timedelta(hours=5, minutes=30)))
    df = session.read.format("pysparklog").option("subscribe", "events").load(str(tmp_path))
    selected = df.where(f"timestamp >= '{local.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}'")
    assert scanned(selected) == ([("events", 0, offset) for offset in range(4, 10)], 6)
