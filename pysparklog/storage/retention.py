"""Retention: dropping a partition's oldest segments, as a broker's log manager does, without a broker.

Kafka's rules (``UnifiedLog.deleteOldSegments``), applied in three passes, each on what the
previous one left:

1. **log start offset breach**: a segment goes when the next segment's base is at or below the log
   start offset (raised by delete-records), so it holds nothing readable any more;
2. **size** (``retention.bytes``, -1 disables): with ``diff = log size - retention.bytes``, segments
   go while ``diff - segment size >= 0``, so the log never shrinks below ``retention.bytes``;
3. **time** (``retention.ms``, -1 disables): a segment goes when ``now - largest timestamp >
   retention.ms``; the largest timestamp is the largest batch timestamp, or the ``.log`` file's
   modification time for a segment without timestamps.

Passes 2 and 3 run only when ``cleanup.policy`` includes ``delete``: a compacted topic keeps its
history, and an empty policy keeps everything that delete-records did not remove. Each pass walks
from the oldest segment and stops at the first one that does not qualify, so what survives is
always a suffix of the log. A segment qualifies only when everything in it is below the high
watermark (for pysparklog every acknowledged record, so the log end offset), and an empty last
segment never does: there must always be a segment to append to. When every segment qualifies,
the active segment is rolled first and then deleted with the others.

Deleted segments are renamed ``*.deleted`` and removed ``file.delete.delay.ms`` later, so readers
that opened them before they were retired can finish.

``plan_retention`` decides, from a description of the segments alone (so it is tested without
files); ``run_retention`` applies it to a partition's ``Log``, on a filesystem or an object store.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pysparklog.errors import InvalidOffsetError
from pysparklog.storage.config import LogConfig
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_reads import SegmentInfo

# A plan made from a snapshot is refused when another process retired or compacted the oldest
# segments meanwhile; it is then made again, a few times at most.
_ATTEMPTS = 5


class DeletionReason(enum.Enum):
    """Why a segment was deleted (Kafka's ``SegmentDeletionReason``), in the order the rules run."""

    LOG_START_OFFSET_BREACH = "log start offset breach"
    RETENTION_SIZE_BREACH = "retention size breach"
    RETENTION_TIME_BREACH = "retention time breach"


@dataclass(frozen=True, slots=True)
class Deletion:
    """One segment chosen for deletion."""

    base_offset: int
    size: int
    reason: DeletionReason


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What a retention pass does.

    Attributes:
        deletions: The segments to delete, oldest first: always a prefix of the segments.
        roll: Every segment qualified, the active one included: it must be rolled before it is
            deleted, so that the log keeps a segment to append to.
        log_start_offset: The log start offset once the deletions are done.
    """

    deletions: tuple[Deletion, ...]
    roll: bool
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class RetentionResult:
    """What ``run_retention`` did.

    Attributes:
        deleted: The segments retired (renamed ``.deleted``), oldest first, with the rule that chose each.
        rolled: The active segment was rolled because every segment qualified.
        log_start_offset: The log start offset after the pass.
        removed_files: ``.deleted`` files removed because ``file.delete.delay.ms`` had passed.
    """

    deleted: tuple[Deletion, ...]
    rolled: bool
    log_start_offset: int
    removed_files: int


# (segment, is it the last segment) -> does it qualify
_Rule = Callable[[SegmentInfo, bool], bool]


def plan_retention(
    segments: Sequence[SegmentInfo],
    *,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
    retention_ms: int,
    retention_bytes: int,
    delete: bool,
) -> RetentionPlan:
    """Choose the segments a retention pass deletes, by Kafka's rules (see the module docstring).

    Args:
        segments: Every segment, oldest first; the last one is the active segment and its
            ``next_base`` is the log end offset.
        now_ms: The time the time rule measures against.
        log_start_offset: The log start offset (raised by delete-records).
        high_watermark: Only segments entirely below it may go.
        retention_ms: ``retention.ms``; negative disables the time rule.
        retention_bytes: ``retention.bytes``; negative disables the size rule.
        delete: ``cleanup.policy`` includes ``delete``; without it only the log start rule runs.

    Returns:
        The deletions with their reasons, whether the active segment must be rolled first, and
        the log start offset afterwards.
    """
    remaining = list(segments)
    deletions: list[Deletion] = []
    roll = False
    passes = [DeletionReason.LOG_START_OFFSET_BREACH]
    if delete:
        passes += [DeletionReason.RETENTION_SIZE_BREACH, DeletionReason.RETENTION_TIME_BREACH]
    for reason in passes:
        rule = _rule(reason, remaining, now_ms, log_start_offset, retention_ms, retention_bytes)
        count = 0 if rule is None else _qualifying_prefix(remaining, rule, high_watermark)
        if count == 0:
            continue
        if count == len(remaining):
            # The active segment goes too: what replaces it is an empty segment at the log end,
            # which no later pass can delete.
            roll = True
            log_end = remaining[-1].next_base
            remaining.append(SegmentInfo(log_end, 0, -1, now_ms, log_end))
        deletions += [Deletion(s.base_offset, s.size, reason) for s in remaining[:count]]
        remaining = remaining[count:]
    if deletions:
        log_start_offset = max(log_start_offset, remaining[0].base_offset)
    return RetentionPlan(tuple(deletions), roll, log_start_offset)


def _rule(
    reason: DeletionReason,
    segments: list[SegmentInfo],
    now_ms: int,
    log_start_offset: int,
    retention_ms: int,
    retention_bytes: int,
) -> _Rule | None:
    """The predicate of one pass over ``segments``, or None when the rule is disabled or cannot apply."""
    if reason is DeletionReason.LOG_START_OFFSET_BREACH:
        # The last segment has no next segment: the log start rule never deletes it.
        return lambda segment, last: not last and segment.next_base <= log_start_offset
    if reason is DeletionReason.RETENTION_SIZE_BREACH:
        total = sum(s.size for s in segments)
        if retention_bytes < 0 or total < retention_bytes:
            return None
        excess = total - retention_bytes

        def over_size(segment: SegmentInfo, last: bool) -> bool:
            nonlocal excess
            if excess - segment.size < 0:
                return False
            excess -= segment.size
            return True

        return over_size
    if retention_ms < 0:
        return None
    return lambda segment, last: now_ms - largest_timestamp(segment) > retention_ms


def _qualifying_prefix(segments: list[SegmentInfo], rule: _Rule, high_watermark: int) -> int:
    """How many segments, from the oldest, qualify before the first that does not (``deletableSegments``)."""
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        # The high watermark is checked first: the size rule counts only what it actually deletes.
        if segment.next_base > high_watermark or not rule(segment, last) or (last and segment.size == 0):
            return i
    return len(segments)


def largest_timestamp(segment: SegmentInfo) -> int:
    """What the time rule ages a segment by: its largest batch timestamp, else its file's modification time."""
    return segment.largest_timestamp if segment.largest_timestamp >= 0 else segment.last_modified_ms


def deletes(config: LogConfig) -> bool:
    """Whether ``cleanup.policy`` includes ``delete``: retention by size and time, and delete-records, apply."""
    return "delete" in config.cleanup_policy


def _plan(log: Log, now_ms: int) -> RetentionPlan:
    config = log.config
    segments = log.segment_infos()
    if not segments:
        return RetentionPlan((), False, log.log_start_offset)
    return plan_retention(
        segments,
        now_ms=now_ms,
        log_start_offset=log.log_start_offset,
        # Every acknowledged record is committed: the high watermark is the log end offset.
        high_watermark=segments[-1].next_base,
        retention_ms=config.retention_ms,
        retention_bytes=config.retention_bytes,
        delete=deletes(config),
    )


def run_retention(log: Log, now_ms: int | None = None) -> RetentionResult:
    """One retention pass over ``log``: retire the segments Kafka's rules choose, then remove the
    ``.deleted`` files whose ``file.delete.delay.ms`` has passed.

    Safe with concurrent writers, readers, delete-records and other retention passes: segments
    are retired under the log's write lock, and a plan that another process overtook is made again.

    Args:
        log: The partition log.
        now_ms: The current time in milliseconds (default: the clock), for the time rule and the
            deletion delay.

    Raises:
        InvalidOffsetError: The oldest segments kept changing under the pass.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    rolled = False
    attempts = 0
    while True:
        plan = _plan(log, now)
        if plan.roll:
            rolled = log.roll() or rolled
            # Decide again on the files as they are now: records appended to the active segment
            # since the plan was made may not qualify.
            plan = _plan(log, now)
        # Still everything: appends reached the new active segment and qualify too. The active
        # segment is the last deletion; it is left to the next pass.
        deletions = plan.deletions[:-1] if plan.roll else plan.deletions
        if not deletions:
            return RetentionResult((), rolled, log.log_start_offset, log.remove_deleted_files(now))
        try:
            log_start = log.delete_segments([d.base_offset for d in deletions])
        except InvalidOffsetError:
            attempts += 1
            if attempts == _ATTEMPTS:
                raise
            continue
        return RetentionResult(deletions, rolled, log_start, log.remove_deleted_files(now))
