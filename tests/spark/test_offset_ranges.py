"""``pysparklog.spark.offset_ranges``: Kafka's micro-batch planning, replayed on the numbers of Spark's own suites.

Acceptance data: ``KafkaMicroBatchSourceSuite`` ("maxOffsetsPerTrigger", "minOffsetsPerTrigger",
"compositeReadLimit") and ``KafkaOffsetRangeCalculatorSuite`` (apache/spark, connector/kafka-0-10-sql).
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysparklog.errors import InvalidConfigError
from pysparklog.spark.offset_ranges import (
    MinOffsetsTrigger,
    OffsetRange,
    TaskAssignment,
    available_offsets,
    group_ranges,
    rate_limit,
    split_ranges,
)
from pysparklog.structs import TopicPartition

TP = TopicPartition
LONG_MAX = 2**63 - 1
ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]


def test_offset_range() -> None:
    piece = OffsetRange(TP("t", 3), 5, 12)
    assert piece.size == 7
    assert str(piece) == "t-3 [5, 12)"
    assert sorted([OffsetRange(TP("t", 3), 0, 1), OffsetRange(TP("a", 9), 4, 5), OffsetRange(TP("t", 1), 8, 9)]) == [
        OffsetRange(TP("a", 9), 4, 5),
        OffsetRange(TP("t", 1), 8, 9),
        OffsetRange(TP("t", 3), 0, 1),
    ]
    assert pickle.loads(pickle.dumps(piece)) == piece


# -- rate_limit ---------------------------------------------------------------------------------------------


def test_rate_limit_replays_sparks_max_offsets_per_trigger_test() -> None:
    """Partition 0 holds 101 records, 1 holds 11, 2 holds 1; maxOffsetsPerTrigger=10."""
    p0, p1, p2 = TP("t", 0), TP("t", 1), TP("t", 2)
    latest = {p0: 101, p1: 11, p2: 1}
    start = {p0: 0, p1: 0, p2: 0}
    per_batch = []
    for _ in range(4):
        end = rate_limit(start, latest, 10)
        per_batch.append((end[p2] - start[p2], end[p1] - start[p1], end[p0] - start[p0]))
        start = end
    # "1 from smallest, 1 from middle, 8 from biggest", then "smallest now empty, 1 more from middle, 9 more ..."
    assert per_batch == [(1, 1, 8), (0, 1, 9), (0, 1, 9), (0, 1, 9)]
    assert start == {p0: 35, p1: 4, p2: 1}


def test_rate_limit_replays_sparks_composite_read_limit_test() -> None:
    """maxOffsetsPerTrigger=20 over 21/11/1 records, then over the backlog after 8/10/1 more arrived."""
    p0, p1, p2 = TP("t", 0), TP("t", 1), TP("t", 2)
    first = rate_limit({p0: 0, p1: 0, p2: 0}, {p0: 21, p1: 11, p2: 1}, 20)
    assert first == {p0: 12, p1: 6, p2: 1}  # 100..111, 10..15 and 1
    second = rate_limit(first, {p0: 29, p1: 21, p2: 2}, 20)
    assert second == {p0: 22, p1: 15, p2: 2}  # then 112..121, 16..24 and 2
    assert rate_limit(second, {p0: 29, p1: 21, p2: 2}, 20) == {p0: 29, p1: 21, p2: 2}  # the rest fits


def test_rate_limit_keeps_partitions_without_backlog_at_their_latest_offset() -> None:
    idle, busy = TP("t", 0), TP("t", 1)
    assert rate_limit({idle: 7, busy: 0}, {idle: 7, busy: 100}, 10) == {idle: 7, busy: 10}
    assert rate_limit({idle: 9, busy: 0}, {idle: 7, busy: 100}, 10) == {idle: 7, busy: 10}  # moved back: unchanged


def test_rate_limit_with_nothing_pending_returns_the_latest_offsets() -> None:
    tp = TP("t", 0)
    assert rate_limit({tp: 5}, {tp: 5}, 10) == {tp: 5}
    assert rate_limit({}, {}, 10) == {}


def test_rate_limit_starts_new_partitions_where_the_caller_says() -> None:
    old, new = TP("t", 0), TP("t", 1)
    assert rate_limit({old: 0, new: 40}, {old: 50, new: 90}, 10) == {old: 5, new: 45}


def test_rate_limit_does_not_limit_a_partition_without_a_start() -> None:
    old, unknown = TP("t", 0), TP("t", 1)
    assert rate_limit({old: 0}, {old: 50, unknown: 90}, 10) == {old: 10, unknown: 90}


def test_rate_limit_result_has_the_latest_partitions_in_order() -> None:
    gone, kept = TP("a", 0), TP("b", 0)
    assert list(rate_limit({gone: 0, kept: 0}, {kept: 5}, 3)) == [kept]


def test_rate_limit_at_long_max_does_not_overflow() -> None:
    """SPARK-26718: maxOffsetsPerTrigger = Long.MaxValue from offset 5."""
    tp = TP("t", 0)
    assert rate_limit({tp: 5}, {tp: 10}, LONG_MAX) == {tp: 10}


def test_rate_limit_never_passes_the_latest_offset_with_tiny_shares() -> None:
    partitions = [TP("t", p) for p in range(30)]
    start = dict.fromkeys(partitions, 0)
    latest = dict.fromkeys(partitions, 1)
    assert rate_limit(start, latest, 3) == latest  # every share < 1 is rounded up, capped at the end


@pytest.mark.parametrize("limit", [0, -1, True, 2.5])
def test_rate_limit_needs_a_positive_limit(limit: object) -> None:
    with pytest.raises(InvalidConfigError, match=r"maxOffsetsPerTrigger = .* accepted: a positive integer"):
        rate_limit({}, {}, limit)  # type: ignore[arg-type]


# -- minOffsetsPerTrigger and maxTriggerDelay ---------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_available_offsets() -> None:
    a, b, c = TP("t", 0), TP("t", 1), TP("t", 2)
    assert available_offsets({a: 3, b: 10}, {a: 8, b: 4, c: 6}) == 5 + 0 + 6  # c is new: from 0, as Kafka counts


def test_min_offsets_replays_sparks_min_offsets_per_trigger_test() -> None:
    """minOffsetsPerTrigger=15, maxTriggerDelay=5s; triggers every 100 ms."""
    clock = FakeClock()
    gate = MinOffsetsTrigger(15, 5000, clock)
    assert gate.should_trigger(16)  # "First Batch is always processed"
    clock.now += 100
    assert not gate.should_trigger(6)  # 6 more records: fewer than 15, delay not expired
    clock.now += 100
    assert gate.should_trigger(6 + 11 + 1)  # 18 new records
    clock.now += 100
    assert not gate.should_trigger(10)
    clock.now += 4899
    assert not gate.should_trigger(10)
    clock.now += 1
    assert gate.should_trigger(10)  # 5 s since the last trigger
    clock.now += 100
    assert not gate.should_trigger(0)  # the delay restarted


def test_min_offsets_first_trigger_fires_even_without_data() -> None:
    gate = MinOffsetsTrigger(15, 5000, FakeClock())
    assert gate.should_trigger(0)
    assert not gate.should_trigger(0)


def test_min_offsets_replays_sparks_composite_read_limit_test() -> None:
    """min 15 / max 20 / delay 5 s with a mocked system clock."""
    clock = FakeClock()
    gate = MinOffsetsTrigger(15, 5000, clock)
    assert gate.should_trigger(33)
    clock.now += 100
    assert not gate.should_trigger(14)  # 14 left over from the capped first batch
    clock.now += 100
    assert gate.should_trigger(14 + 8 + 10 + 1)
    clock.now += 100
    assert not gate.should_trigger(13)
    clock.now += 5000
    assert gate.should_trigger(13)


def test_min_offsets_uses_a_monotonic_clock_by_default() -> None:
    gate = MinOffsetsTrigger(1, 0)
    assert gate.should_trigger(0) and gate.should_trigger(0)  # a zero delay always fires


@pytest.mark.parametrize(("minimum", "delay"), [(0, 10), (True, 10), (1, -1), (1, 1.5), (1, False)])
def test_min_offsets_trigger_checks_its_settings(minimum: object, delay: object) -> None:
    with pytest.raises(InvalidConfigError, match=r"accepted:"):
        MinOffsetsTrigger(minimum, delay)  # type: ignore[arg-type]


# -- split_ranges: KafkaOffsetRangeCalculatorSuite ----------------------------------------------------------

T1, T2, T3 = TP("t1", 1), TP("t2", 1), TP("t3", 1)


def r(tp: TopicPartition, start: int, end: int) -> OffsetRange:
    return OffsetRange(tp, start, end)


CALCULATOR_SUITE = [
    ("with no minPartition: N TopicPartitions to N offset ranges", None, None, [r(T1, 1, 2)], [r(T1, 1, 2)]),
    ("with no minPartition: empty ranges ignored", None, None, [r(T1, 1, 2), r(T2, 1, 1)], [r(T1, 1, 2)]),
    (
        "N TopicPartitions to N offset ranges",
        3,
        None,
        [r(T1, 1, 2), r(T2, 1, 2), r(T3, 1, 2)],
        [r(T1, 1, 2), r(T2, 1, 2), r(T3, 1, 2)],
    ),
    (
        "1 TopicPartition to N offset ranges",
        4,
        None,
        [r(T1, 1, 5)],
        [r(T1, 1, 2), r(T1, 2, 3), r(T1, 3, 4), r(T1, 4, 5)],
    ),
    (
        "N skewed TopicPartitions to M offset ranges",
        4,
        None,
        [r(T1, 1, 5), r(T2, 1, 21)],
        [r(T1, 1, 5), r(T2, 1, 7), r(T2, 7, 14), r(T2, 14, 21)],
    ),
    (
        "SPARK-30656: ignore empty ranges and split the rest",
        4,
        None,
        [r(T1, 1, 1), r(T2, 1, 21)],
        [r(T2, 1, 6), r(T2, 6, 11), r(T2, 11, 16), r(T2, 16, 21)],
    ),
    (
        "SPARK-30656: N very skewed TopicPartitions to M offset ranges",
        4,
        None,
        [r(T1, 1, 2), r(T2, 1, 1001)],
        [r(T1, 1, 2), r(T2, 1, 334), r(T2, 334, 667), r(T2, 667, 1001)],
    ),
    (
        "SPARK-30656: minPartitions less than the length of topic partitions",
        1,
        None,
        [r(T1, 1, 5), r(T2, 1, 21)],
        [r(T1, 1, 5), r(T2, 1, 21)],
    ),
    ("range inexact multiple of minPartitions", 3, None, [r(T1, 1, 11)], [r(T1, 1, 4), r(T1, 4, 7), r(T1, 7, 11)]),
    (
        "empty ranges ignored",
        4,
        None,
        [r(T1, 1, 5), r(T2, 1, 21), r(T3, 1, 1)],
        [r(T1, 1, 5), r(T2, 1, 7), r(T2, 7, 14), r(T2, 14, 21)],
    ),
    (
        "SPARK-28489: never drop offsets",
        6,
        None,
        [r(T1, 0, 10), r(T2, 0, 10), r(T3, 0, 1)],
        [r(T1, 0, 3), r(T1, 3, 6), r(T1, 6, 10), r(T2, 0, 3), r(T2, 3, 6), r(T2, 6, 10), r(T3, 0, 1)],
    ),
    (
        "SPARK-36576: 0 small unsplit ranges and 3 large split ranges",
        9,
        None,
        [r(T1, 0, 10000), r(T2, 0, 15000), r(T3, 0, 20000)],
        [
            r(T1, 0, 5000),
            r(T1, 5000, 10000),
            r(T2, 0, 5000),
            r(T2, 5000, 10000),
            r(T2, 10000, 15000),
            r(T3, 0, 5000),
            r(T3, 5000, 10000),
            r(T3, 10000, 15000),
            r(T3, 15000, 20000),
        ],
    ),
    (
        "SPARK-36576: 1 small unsplit range and 2 large split ranges",
        6,
        None,
        [r(T1, 0, 500), r(T2, 0, 12000), r(T3, 0, 15001)],
        [r(T1, 0, 500), r(T2, 0, 6000), r(T2, 6000, 12000), r(T3, 0, 5000), r(T3, 5000, 10000), r(T3, 10000, 15001)],
    ),
    (
        "SPARK-36576: 2 small unsplit ranges and 1 large split range",
        6,
        None,
        [r(T1, 0, 1), r(T2, 0, 1), r(T3, 0, 10000)],
        [r(T1, 0, 1), r(T2, 0, 1), r(T3, 0, 2500), r(T3, 2500, 5000), r(T3, 5000, 7500), r(T3, 7500, 10000)],
    ),
    (
        "SPARK-46798: locations set when ranges unsplit (without locations here)",
        3,
        None,
        [r(T1, 0, 1), r(T2, 0, 1), r(T3, 0, 1)],
        [r(T1, 0, 1), r(T2, 0, 1), r(T3, 0, 1)],
    ),
    (
        "SPARK-46798: locations not set when ranges split (without locations here)",
        4,
        None,
        [r(T1, 0, 1), r(T2, 0, 1), r(T3, 0, 2)],
        [r(T1, 0, 1), r(T2, 0, 1), r(T3, 0, 1), r(T3, 1, 2)],
    ),
    ("SPARK-49259: 1 TopicPartition to N offset ranges (fits)", None, 4, [r(T1, 1, 5)], [r(T1, 1, 5)]),
    ("SPARK-49259: 1 TopicPartition to N offset ranges (one)", None, 4, [r(T1, 1, 2)], [r(T1, 1, 2)]),
    ("SPARK-49259: 1 TopicPartition to N offset ranges (split)", None, 4, [r(T1, 1, 6)], [r(T1, 1, 3), r(T1, 3, 6)]),
    (
        "SPARK-49259: N TopicPartition to N offset ranges",
        None,
        20,
        [r(T1, 1, 40), r(T2, 1, 50), r(T3, 1, 60)],
        [
            r(T1, 1, 20),
            r(T1, 20, 40),
            r(T2, 1, 17),
            r(T2, 17, 33),
            r(T2, 33, 50),
            r(T3, 1, 20),
            r(T3, 20, 40),
            r(T3, 40, 60),
        ],
    ),
    (
        "SPARK-49259: 1 TopicPartition with low minPartitions value",
        1,
        20,
        [r(T1, 1, 40)],
        [r(T1, 1, 20), r(T1, 20, 40)],
    ),
    (
        "SPARK-49259: 1 TopicPartition with high minPartitions value",
        4,
        20,
        [r(T1, 1, 40)],
        [r(T1, 1, 10), r(T1, 10, 20), r(T1, 20, 30), r(T1, 30, 40)],
    ),
]


@pytest.mark.parametrize(
    ("min_partitions", "max_records", "ranges", "expected"),
    [case[1:] for case in CALCULATOR_SUITE],
    ids=[case[0] for case in CALCULATOR_SUITE],
)
def test_split_ranges_replays_the_range_calculator_suite(
    min_partitions: int | None, max_records: int | None, ranges: list[OffsetRange], expected: list[OffsetRange]
) -> None:
    assert split_ranges(ranges, min_partitions, max_records) == expected


def test_split_ranges_rounds_halves_up_as_scala_does() -> None:
    """5 / 20 * 10 = 2.5 parts: Scala's math.round makes 3, Python's round() would make 2."""
    pieces = split_ranges([r(T1, 0, 5), r(T2, 0, 15)], min_partitions=10)
    assert [piece.tp for piece in pieces].count(T1) == 3
    assert [piece.tp for piece in pieces].count(T2) == 8  # 7.5 -> 8
    assert pieces[:3] == [r(T1, 0, 1), r(T1, 1, 3), r(T1, 3, 5)]


def test_split_ranges_drops_inverted_ranges() -> None:
    assert split_ranges([r(T1, 5, 3), r(T2, 0, 2)]) == [r(T2, 0, 2)]
    assert split_ranges([r(T1, 5, 5)], min_partitions=4, max_records_per_partition=1) == []


@pytest.mark.parametrize(
    ("min_partitions", "max_records"), [(0, None), (None, 0), (-1, None), (True, None), (None, 1.5)]
)
def test_split_ranges_checks_its_limits(min_partitions: object, max_records: object) -> None:
    with pytest.raises(InvalidConfigError, match=r"accepted: a positive integer"):
        split_ranges([], min_partitions, max_records)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=-3, max_value=2000), min_size=0, max_size=8),
    min_partitions=st.none() | st.integers(min_value=1, max_value=40),
    max_records=st.none() | st.integers(min_value=1, max_value=500),
)
def test_split_ranges_covers_every_offset_once(
    sizes: list[int], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [r(TP("t", number), 100, 100 + size) for number, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    for original in ranges:
        own = [piece for piece in pieces if piece.tp == original.tp]
        if original.size <= 0:
            assert own == []
            continue
        assert own[0].start == original.start and own[-1].end == original.end
        assert all(a.end == b.start for a, b in zip(own, own[1:], strict=False))
        assert all(piece.size > 0 for piece in own)
        if max_records is not None:
            assert all(piece.size <= max_records for piece in own)


# -- group_ranges -------------------------------------------------------------------------------------------


def ranges_of(topic: str, *sizes: int) -> list[OffsetRange]:
    return [r(TP(topic, number), 0, size) for number, size in enumerate(sizes) if size]


def tasks_of(groups: list[list[OffsetRange]]) -> dict[TopicPartition, set[int]]:
    found: dict[TopicPartition, set[int]] = {}
    for index, group in enumerate(groups):
        for piece in group:
            found.setdefault(piece.tp, set()).add(index)
    return found


@pytest.mark.parametrize("assignor", ASSIGNORS)
@pytest.mark.parametrize("tasks", [None, 1, 3, 100])
def test_every_piece_is_on_exactly_one_task(assignor: str, tasks: int | None) -> None:
    pieces = split_ranges(ranges_of("a", 10, 50, 5) + ranges_of("b", 7, 7), min_partitions=8)
    groups, state, _ = group_ranges(pieces, tasks, assignor)
    assert sorted(piece for group in groups for piece in group) == sorted(pieces)
    assert len(groups) == (len(pieces) if tasks is None else min(tasks, len(pieces)))
    assert state.tasks == len(groups)
    assert state.assignor == assignor
    assert state.generation == 1
    assert all(group == sorted(group) for group in groups)


@pytest.mark.parametrize("assignor", ["roundrobin", "sticky", "cooperative-sticky"])
def test_one_piece_per_task_by_default(assignor: str) -> None:
    pieces = ranges_of("a", 3, 3, 3) + ranges_of("b", 3)
    groups, _, _ = group_ranges(pieces, None, assignor)
    assert sorted(len(group) for group in groups) == [1, 1, 1, 1]


def test_range_splits_each_topic_on_its_own_as_kafka_does() -> None:
    groups, _, _ = group_ranges(ranges_of("a", 5) + ranges_of("b", 5), None, "range")
    assert groups == [[r(TP("a", 0), 0, 5), r(TP("b", 0), 0, 5)], []]


def test_range_and_roundrobin_match_a_consumer_group_for_unsplit_partitions() -> None:
    pieces = ranges_of("a", 1, 1, 1, 1, 1)
    range_groups, _, _ = group_ranges(pieces, 2, "range")
    assert [[piece.tp.partition for piece in group] for group in range_groups] == [[0, 1, 2], [3, 4]]
    robin_groups, _, _ = group_ranges(pieces, 2, "roundrobin")
    assert [[piece.tp.partition for piece in group] for group in robin_groups] == [[0, 2, 4], [1, 3]]


def test_pieces_of_a_split_partition_go_to_different_tasks() -> None:
    pieces = split_ranges(ranges_of("a", 100, 1), min_partitions=4)
    groups, _, _ = group_ranges(pieces, None, "roundrobin")
    assert tasks_of(groups)[TP("a", 0)] == {0, 1, 2}


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
def test_sticky_keeps_every_partition_on_its_task_when_nothing_changes(assignor: str) -> None:
    pieces = ranges_of("a", 10, 20, 30, 40) + ranges_of("b", 5, 5)
    first, state, _ = group_ranges(pieces, 3, assignor)
    later = [r(piece.tp, piece.end, piece.end + 7) for piece in pieces]
    second, state2, description = group_ranges(later, 3, assignor, state)
    assert tasks_of(second) == tasks_of(first)
    assert state2.generation == 2
    assert state2.task_of == state.task_of
    assert "0 log partitions moved task" in description


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
def test_sticky_keeps_partitions_on_their_task_index_when_one_is_added(assignor: str) -> None:
    first, state, _ = group_ranges(ranges_of("a", 9, 9, 9), None, assignor)
    second, state, _ = group_ranges(ranges_of("a", 9, 9, 9, 9), None, assignor, state)
    before, after = tasks_of(first), tasks_of(second)
    assert all(after[tp] == before[tp] for tp in before)
    assert after[TP("a", 3)] == {3}
    assert state.task_index() == {TP("a", p): next(iter(after[TP("a", p)])) for p in range(4)}


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
def test_sticky_keeps_partitions_on_their_task_when_a_topic_is_added_to_fixed_tasks(assignor: str) -> None:
    first, state, _ = group_ranges(ranges_of("a", 9, 9, 9, 9), 2, assignor)
    second, _, _ = group_ranges(ranges_of("a", 9, 9, 9, 9) + ranges_of("b", 9, 9), 2, assignor, state)
    before, after = tasks_of(first), tasks_of(second)
    assert all(after[tp] == before[tp] for tp in before)
    assert sorted(len(group) for group in second) == [3, 3]


def test_sticky_keeps_partitions_where_range_moves_them_when_one_idles() -> None:
    """Partition 0 has nothing to read in the second micro-batch: range renumbers the rest and moves a-2."""
    busy = ranges_of("a", 9, 9, 9, 9)
    idle_first = ranges_of("a", 0, 9, 9, 9)
    range_first, range_state, _ = group_ranges(busy, 2, "range")
    range_second, _, _ = group_ranges(idle_first, 2, "range", range_state)
    assert tasks_of(range_first)[TP("a", 2)] == {1} and tasks_of(range_second)[TP("a", 2)] == {0}

    sticky_first, sticky_state, _ = group_ranges(busy, 2, "sticky")
    sticky_second, sticky_state, _ = group_ranges(idle_first, 2, "sticky", sticky_state)
    assert all(tasks_of(sticky_second)[tp] == tasks_of(sticky_first)[tp] for tp in tasks_of(sticky_second))
    # the idle partition keeps its task in the state, and returns to it when data arrives
    assert sticky_state.task_index()[TP("a", 0)] == next(iter(tasks_of(sticky_first)[TP("a", 0)]))
    sticky_third, _, _ = group_ranges(busy, 2, "sticky", sticky_state)
    assert tasks_of(sticky_third) == tasks_of(sticky_first)


def test_cooperative_sticky_hands_a_partition_over_one_micro_batch_later() -> None:
    pieces = ranges_of("a", 9, 9)
    _, state, _ = group_ranges(pieces, 1, "cooperative-sticky")
    assert state.task_index() == {TP("a", 0): 0, TP("a", 1): 0}

    # A second task: balance moves one partition, but its old task reads it once more and lets it go.
    held, state, description = group_ranges(pieces, 2, "cooperative-sticky", state)
    assert held == [[r(TP("a", 0), 0, 9), r(TP("a", 1), 0, 9)], []]
    moving = next(tp for tp in (TP("a", 0), TP("a", 1)) if tp not in state.task_index())
    assert f"read by their old task, handed over next micro-batch: {moving}" in description

    handed, state, _ = group_ranges(pieces, 2, "cooperative-sticky", state)
    assert tasks_of(handed)[moving] == {1}
    assert len(handed[0]) == len(handed[1]) == 1
    assert state.task_index()[moving] == 1

    # The eager sticky assignor moves it at once.
    _, eager_state, _ = group_ranges(pieces, 1, "sticky")
    moved, _, _ = group_ranges(pieces, 2, "sticky", eager_state)
    assert len(moved[0]) == len(moved[1]) == 1


def test_fewer_tasks_than_before_drops_the_missing_tasks_ownership() -> None:
    _, state, _ = group_ranges(ranges_of("a", 9, 9, 9, 9), None, "sticky")
    groups, state, _ = group_ranges(ranges_of("a", 9, 9), None, "sticky", state)
    assert tasks_of(groups) == {TP("a", 0): {0}, TP("a", 1): {1}}
    assert state.task_index() == {TP("a", 0): 0, TP("a", 1): 1}  # a-2 and a-3 were on tasks that are gone


def test_task_ids_sort_in_task_order() -> None:
    groups, _, description = group_ranges(ranges_of("a", *([1] * 12)), None, "roundrobin")
    assert [group[0].tp.partition for group in groups] == list(range(12))
    assert "task-0011: a-11 [0, 1)" in description


def test_description_for_the_driver_log() -> None:
    _, _, description = group_ranges(ranges_of("a", 10, 5) + ranges_of("b", 3), 2, "range")
    assert description.splitlines() == [
        "range assignment (generation 1): 3 offset ranges of 3 log partitions on 2 tasks, 0 log partitions moved task",
        "  task-0000: a-0 [0, 10), b-0 [0, 3)",
        "  task-0001: a-1 [0, 5)",
    ]


def test_nothing_to_read() -> None:
    groups, state, description = group_ranges([r(TP("a", 0), 4, 4)], None, "sticky")
    assert groups == []
    assert state == TaskAssignment("sticky", -1, 0)
    assert description == "sticky: no offsets to read"
    _, previous, _ = group_ranges(ranges_of("a", 3), None, "sticky")
    assert group_ranges([], 4, "sticky", previous)[1] == previous


def test_state_is_immutable_hashable_and_picklable() -> None:
    _, state, _ = group_ranges(ranges_of("a", 3, 4), None, "sticky")
    assert pickle.loads(pickle.dumps(state)) == state
    assert hash(state) == hash(pickle.loads(pickle.dumps(state)))


@pytest.mark.parametrize("tasks", [0, -2, True, 1.5])
def test_group_ranges_needs_a_positive_task_count(tasks: object) -> None:
    with pytest.raises(InvalidConfigError, match=r"tasks = .* accepted: a positive integer"):
        group_ranges(ranges_of("a", 1), tasks, "range")  # type: ignore[arg-type]


def test_group_ranges_names_the_accepted_assignors() -> None:
    with pytest.raises(InvalidConfigError, match=r"cooperative-sticky"):
        group_ranges(ranges_of("a", 1), None, "fair")


def test_a_range_smaller_than_its_parts_gives_no_empty_piece() -> None:
    # Spark's getDividedPartition drops empty pieces: one offset asked for two parts is one task.
    assert split_ranges([r(TP("t", 0), 100, 101)], 2) == [r(TP("t", 0), 100, 101)]
