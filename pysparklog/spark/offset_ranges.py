"""Micro-batch planning with Kafka's algorithms: how far a trigger reads, how ranges split, which task reads what.

Spark's Kafka source decides three things per micro-batch, and a drop-in must decide them the same
way for a query to behave the same:

* how far to read: ``maxOffsetsPerTrigger`` shared out over partitions by backlog (:func:`rate_limit`),
  and ``minOffsetsPerTrigger`` holding a trigger back until enough arrived or ``maxTriggerDelay`` passed
  (:class:`MinOffsetsTrigger`), both as ``KafkaMicroBatchStream`` does;
* how to cut the offset ranges into Spark tasks: ``maxRecordsPerPartition`` then ``minPartitions``
  (:func:`split_ranges`, ``KafkaOffsetRangeCalculator``);
* which task reads which pieces: Spark's Kafka source runs one task per piece; here a Kafka consumer
  assignor may put pieces on fewer tasks, and the sticky ones keep a log partition on the same task
  index from one micro-batch to the next (:func:`group_ranges`).

Everything is pure Python over small dicts (hundreds of partitions at most) and knows nothing of Spark.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pysparklog.assignors import NO_GENERATION, Subscription, assignor_for
from pysparklog.errors import InvalidConfigError
from pysparklog.structs import TopicPartition


class OffsetRange(NamedTuple):
    """Offsets ``[start, end)`` of one log partition (Kafka's ``KafkaOffsetRange``); ``end`` is exclusive,
    so the size is the number of offsets, which compaction and transaction markers may leave unfilled."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.tp} [{self.start}, {self.end})"


# -- how far a trigger reads ------------------------------------------------------------------------------


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_offsets: int
) -> dict[TopicPartition, int]:
    """Where a micro-batch capped at ``max_offsets`` ends (``KafkaMicroBatchStream.rateLimit``).

    Each partition with a backlog gets ``max_offsets * backlog / total backlog`` offsets, rounded down,
    except that a share below one is rounded up so that small partitions are never starved; the float
    arithmetic is Kafka's, so the split is the same offset for offset. A partition never goes past its
    latest offset, and one without backlog stays at its latest offset. When nothing is pending the
    latest offsets are returned unchanged.

    Args:
        start: Where the micro-batch starts. Kafka starts partitions that appeared since the last
            micro-batch at their earliest offset, so include those too; a partition missing here is
            not limited (Kafka's behaviour when it cannot find a new partition's earliest offset).
        latest: The latest offsets; the result has the same partitions, in the same order.
        max_offsets: ``maxOffsetsPerTrigger`` (or the ``ReadMaxRows`` Spark passes).

    Raises:
        InvalidConfigError: ``max_offsets`` is not a positive integer.
    """
    _check_positive("maxOffsetsPerTrigger", max_offsets)
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    limited: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            limited[tp] = end
            continue
        prorate = max_offsets * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        limited[tp] = min(end, start[tp] + share)
    return limited


def available_offsets(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """How many new offsets ``latest`` holds past ``start``, what ``minOffsetsPerTrigger`` is compared with.

    As in Kafka's ``delayBatch``, a partition missing from ``start`` counts from offset 0. Unlike it, a
    partition whose latest offset fell below its start (a recreated topic) counts as 0, not negative,
    so it cannot hide other partitions' new records.
    """
    return sum(max(end - start.get(tp, 0), 0) for tp, end in latest.items())


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class MinOffsetsTrigger:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay`` (``KafkaMicroBatchStream.delayBatch``).

    A trigger fires when ``max_trigger_delay_ms`` has passed since the last one fired, or else when at
    least ``min_offsets`` new offsets are available; firing restarts the delay. As in Kafka, the first
    trigger always fires (Kafka's last trigger time starts at the epoch), and the time counts from
    when a trigger was allowed, not from when its micro-batch ran.

    Args:
        min_offsets: ``minOffsetsPerTrigger``.
        max_trigger_delay_ms: ``maxTriggerDelay`` in milliseconds.
        clock: Milliseconds now; a monotonic clock by default, so a wall-clock step cannot stall or
            release triggers (tests inject a fake one).

    Raises:
        InvalidConfigError: ``min_offsets`` is not positive, or ``max_trigger_delay_ms`` is negative.
    """

    def __init__(self, min_offsets: int, max_trigger_delay_ms: int, clock: Callable[[], float] = _monotonic_ms) -> None:
        _check_positive("minOffsetsPerTrigger", min_offsets)
        if (
            isinstance(max_trigger_delay_ms, bool)
            or not isinstance(max_trigger_delay_ms, int)
            or max_trigger_delay_ms < 0
        ):
            raise InvalidConfigError(
                f"maxTriggerDelay = {max_trigger_delay_ms!r} ms is invalid; accepted: an integer number of "
                "milliseconds >= 0"
            )
        self.min_offsets = min_offsets
        self.max_trigger_delay_ms = max_trigger_delay_ms
        self._clock = clock
        self._last_trigger_ms: float | None = None

    def should_trigger(self, available: int) -> bool:
        """Whether a micro-batch should run now with ``available`` new offsets (see :func:`available_offsets`)."""
        now = self._clock()
        if self._last_trigger_ms is None or now - self._last_trigger_ms >= self.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return True
        if available < self.min_offsets:
            return False
        self._last_trigger_ms = now
        return True


# -- how ranges split into Spark tasks -------------------------------------------------------------------


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None = None, max_records_per_partition: int | None = None
) -> list[OffsetRange]:
    """Cut offset ranges into the pieces Spark tasks read (``KafkaOffsetRangeCalculator.getRanges``).

    Empty ranges (and inverted ones, which the data-loss check reports) are dropped. Then, with
    ``max_records_per_partition``, each range is cut into ``ceil(size / max)`` pieces. Then, when fewer
    pieces than ``min_partitions`` remain, pieces are cut again in proportion to their size:
    ``parts = max(round(size / total * minPartitions), 1)``, where pieces that would get one part are
    left whole and taken out of the proportion (SPARK-36576), so that many small pieces do not starve the
    large ones of parts. Cuts are even, the last part taking the remainder. Input order is kept, each
    range's pieces in offset order; pass ranges sorted for a deterministic plan.

    Args:
        ranges: One range per log partition.
        min_partitions: ``minPartitions``: a hint, the result may have a few more or fewer pieces.
        max_records_per_partition: ``maxRecordsPerPartition``: a hard cap on a piece's size.

    Raises:
        InvalidConfigError: A limit is given and is not a positive integer.
    """
    if min_partitions is not None:
        _check_positive("minPartitions", min_partitions)
    if max_records_per_partition is not None:
        _check_positive("maxRecordsPerPartition", max_records_per_partition)
    pieces = [piece for piece in ranges if piece.size > 0]
    if max_records_per_partition is not None:
        pieces = [part for piece in pieces for part in _divide(piece, -(-piece.size // max_records_per_partition))]
    if min_partitions is None or len(pieces) >= min_partitions:
        return pieces
    total = sum(piece.size for piece in pieces)
    whole = [_part_count(piece.size, total, min_partitions) == 1 for piece in pieces]
    split_total = total - sum(piece.size for piece, kept in zip(pieces, whole, strict=True) if kept)
    split_min_partitions = max(min_partitions - sum(whole), 1)
    result: list[OffsetRange] = []
    for piece, kept in zip(pieces, whole, strict=True):
        parts = 1 if kept else _part_count(piece.size, split_total, split_min_partitions)
        result.extend(_divide(piece, parts))
    return result


def _part_count(size: int, total: int, min_partitions: int) -> int:
    # Kafka divides doubles (exact int division would differ past 2**53), and Scala's math.round rounds
    # halves up (floor(x + 0.5)) where Python's round() rounds them to even.
    return max(math.floor(float(size) / float(total) * min_partitions + 0.5), 1)


def _divide(piece: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` consecutive pieces, even but for the last, which takes the remainder, without the empty ones
    (``getDividedPartition`` filters them: a range of 1 offset asked for 2 parts is 1 piece, not 2 tasks)."""
    result: list[OffsetRange] = []
    remaining = piece.size
    start = piece.start
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        if size > 0:
            result.append(OffsetRange(piece.tp, start, start + size))
        start += size
    return result


# -- which task reads which pieces ------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskAssignment:
    """What :func:`group_ranges` remembers of a micro-batch's plan, for the next one.

    Attributes:
        assignor: The assignor's protocol name.
        generation: Counts the plans, as a consumer group counts rebalances; sticky assignors trust
            owned partitions of the latest generation.
        tasks: The number of tasks the plan used.
        task_of: Log partition to the index of the task that read its first piece, sorted; kept for
            partitions with nothing to read since, so they return to their task when data arrives.
            A tuple, so the state is immutable, hashable and picklable.
    """

    assignor: str
    generation: int
    tasks: int
    task_of: tuple[tuple[TopicPartition, int], ...] = ()

    def task_index(self) -> dict[TopicPartition, int]:
        """``task_of`` as a new dict."""
        return dict(self.task_of)


def group_ranges(
    ranges: Sequence[OffsetRange],
    tasks: int | None,
    assignor_name: str,
    previous: TaskAssignment | None = None,
) -> tuple[list[list[OffsetRange]], TaskAssignment, str]:
    """Put range pieces on Spark tasks with a Kafka consumer assignor, the tasks acting as group members.

    The members are ``task-0000``, ``task-0001``, ... (zero-padded so that Kafka's member order, by id,
    is the task order), all subscribed to every topic. Each piece is a pseudo partition of its log
    topic, numbered by its rank among that topic's pieces (by partition, then offset): with one piece
    per partition and every partition present, the numbers are the partition numbers, so ``range`` and
    ``roundrobin`` give exactly the assignment a consumer group of that many members would get.
    Pieces, not partitions, are the unit, so the assignor balances the work of split partitions too.

    For ``sticky`` and ``cooperative-sticky``, every task reports as owned, in ``previous``'s
    generation, the pieces of the log partitions it read before (a partition's task is the one that
    read its first piece), so a log partition stays on the same task index from one micro-batch to the
    next as far as balance allows. ``cooperative-sticky`` hands a partition to a new task only one
    micro-batch after it withheld it, as a cooperative rebalance does: meanwhile the old task reads it
    and gives it up. The other assignors ignore ``previous`` but the state they return still lets a
    later switch to a sticky assignor start from their assignment.

    Args:
        ranges: The pieces (from :func:`split_ranges`); empty ones are dropped.
        tasks: How many Spark tasks at most; ``None`` for one per piece, which Spark's Kafka source
            always uses. More tasks than pieces would only add empty tasks, so it is capped there.
        assignor_name: ``range``, ``roundrobin``, ``sticky`` or ``cooperative-sticky`` (or the Java class).
        previous: The state the previous micro-batch's call returned.

    Returns:
        The pieces of each task, by task index (a list per task, possibly empty: ``range`` splits each
        topic on its own, so the first tasks take more when topics have few pieces), each sorted by
        partition and offset; the state for the next call; and a description for the driver log.

    Raises:
        InvalidConfigError: ``tasks`` is not a positive integer, or the assignor is unknown.
    """
    if tasks is not None:
        _check_positive("tasks", tasks)
    assignor = assignor_for(assignor_name)
    pieces = sorted(piece for piece in ranges if piece.size > 0)
    if not pieces:
        state = previous or TaskAssignment(assignor.name, NO_GENERATION, 0)
        return [], state, f"{assignor.name}: no offsets to read"
    count = len(pieces) if tasks is None else min(tasks, len(pieces))
    width = max(4, len(str(count - 1)))
    members = [f"task-{index:0{width}d}" for index in range(count)]

    pseudo: dict[TopicPartition, OffsetRange] = {}
    rank: dict[str, int] = {}
    for piece in pieces:
        number = rank.get(piece.tp.topic, 0)
        rank[piece.tp.topic] = number + 1
        pseudo[TopicPartition(piece.tp.topic, number)] = piece

    previous_task = previous.task_index() if previous is not None else {}
    owner: dict[TopicPartition, int] = {}
    for name, piece in pseudo.items():
        index = previous_task.get(piece.tp)
        if index is not None and index < count:
            owner[name] = index
    generation = previous.generation if previous is not None else NO_GENERATION
    topics = tuple(rank)
    subscriptions = {
        member: Subscription(topics, tuple(name for name, index in owner.items() if index == task), generation)
        for task, member in enumerate(members)
    }
    assignment = assignor.assign(rank, subscriptions)

    index_of = {member: index for index, member in enumerate(members)}
    task_of_pseudo = {name: index_of[member] for member, names in assignment.items() for name in names}
    withheld = {name for name in pseudo if name not in task_of_pseudo}  # cooperative: changing owner
    for name in withheld:
        task_of_pseudo[name] = owner[name]
    groups: list[list[OffsetRange]] = [[] for _ in members]
    for name, task in task_of_pseudo.items():
        groups[task].append(pseudo[name])
    for group in groups:
        group.sort()

    first_piece_task: dict[TopicPartition, int] = {}
    released: set[TopicPartition] = set()
    for name, piece in pseudo.items():  # in piece order, so a partition's first piece comes first
        tp = piece.tp
        if tp not in first_piece_task and tp not in released:
            if name in withheld:
                released.add(tp)  # read by its old task this time, free for its new one next time
            else:
                first_piece_task[tp] = task_of_pseudo[name]
    task_of = {tp: index for tp, index in previous_task.items() if index < count and tp not in released}
    task_of.update(first_piece_task)
    state = TaskAssignment(
        assignor.name,
        generation + 1 if generation != NO_GENERATION else 1,
        count,
        tuple(sorted(task_of.items())),
    )
    moved = sum(1 for tp, index in first_piece_task.items() if previous_task.get(tp, index) != index)
    return groups, state, _describe(state, members, groups, len({piece.tp for piece in pieces}), moved, released)


def _describe(
    state: TaskAssignment,
    members: list[str],
    groups: list[list[OffsetRange]],
    partitions: int,
    moved: int,
    released: set[TopicPartition],
) -> str:
    pieces = sum(len(group) for group in groups)
    lines = [
        f"{state.assignor} assignment (generation {state.generation}): {pieces} offset ranges of {partitions} log "
        f"partitions on {state.tasks} tasks, {moved} log partitions moved task"
    ]
    if released:
        handover = ", ".join(str(tp) for tp in sorted(released))
        lines.append(f"  read by their old task, handed over next micro-batch: {handover}")
    for member, group in zip(members, groups, strict=True):
        lines.append(f"  {member}: {', '.join(str(piece) for piece in group) or '(nothing)'}")
    return "\n".join(lines)


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(f"{name} = {value!r} is invalid; accepted: a positive integer")
