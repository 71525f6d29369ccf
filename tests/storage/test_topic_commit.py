"""A topic commit's body (``storage.objects.topic_commit``): the header every commit carries forward and the
sections it adds, as bytes."""

from __future__ import annotations

import random

import pytest

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.objects.topic_commit import (
    MAX_MARKS,
    PartitionEnd,
    Section,
    SectionKind,
    SinkMark,
    StagedReference,
    TopicCommit,
    TopicHeader,
    decode_header,
    end_of,
    header_size,
)

PATH = "t-chain/id/commits/00000000000000000007"


def _commit() -> TopicCommit:
    first = TopicCommit.following(
        TopicHeader(),
        [Section(2, SectionKind.BATCHES, 0, 3, data=b"batches")],
        SinkMark("sink", None, 4),
    )
    reference = StagedReference("task-0-abc", 10, 20).encode()
    return TopicCommit.following(
        first.header,
        [
            Section(0, SectionKind.STAGED, 0, 5, data=reference),
            Section(0, SectionKind.STAGED, 5, 6, data=reference),
            Section(2, SectionKind.LOG_START, 3, 3, log_start_offset=2),
        ],
        SinkMark("other", "query", 9),
        time_ms=1_800_000_000_000,
    )


def test_a_commit_round_trips_and_its_header_follows_its_sections() -> None:
    commit = _commit()
    assert commit.header.ends == (PartitionEnd(6, 0), PartitionEnd(0, 0), PartitionEnd(3, 2))
    assert commit.header.marks == (SinkMark("sink", None, 4), SinkMark("other", "query", 9))
    assert commit.header.time_ms == 1_800_000_000_000
    body = commit.encode()
    assert TopicCommit.decode(body, PATH) == commit
    assert decode_header(body, PATH) == commit.header
    assert end_of(body[: header_size(3)], 2, PATH) == PartitionEnd(3, 2), "an end from the header's first bytes"
    assert end_of(body, 7, PATH) == PartitionEnd(0, 0), "a partition no commit changed"
    assert commit.sections[0].reference(PATH) == StagedReference("task-0-abc", 10, 20)


def test_a_section_must_start_at_its_partition_end() -> None:
    with pytest.raises(ValueError, match="starts at 1, not at its log end 0"):
        TopicCommit.following(TopicHeader(), [Section(0, SectionKind.BATCHES, 1, 2, data=b"x")])


def test_a_sinks_new_mark_replaces_its_old_one_and_the_least_recent_goes_past_the_limit() -> None:
    header = TopicHeader()
    for sink in range(MAX_MARKS + 1):
        header = TopicCommit.following(header, [], SinkMark(f"s{sink}", "q", 0)).header
    assert len(header.marks) == MAX_MARKS and header.mark("s0") is None and header.mark("s1") is not None
    header = TopicCommit.following(header, [], SinkMark("s1", "q", 7)).header
    assert header.marks[-1] == SinkMark("s1", "q", 7) and len(header.marks) == MAX_MARKS


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda body: body[:3], "ends inside the partition count"),
        (lambda body: bytes(4) + body[4:], "has 0 partitions"),
        (lambda body: body + b"x", "bytes after its sections"),
        (lambda body: body[:-1], "runs past its commit's end"),
    ],
)
def test_a_damaged_body_is_a_typed_error(damage: object, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        TopicCommit.decode(damage(_commit().encode()), PATH)  # type: ignore[operator]


def test_random_damage_is_a_typed_error_or_the_same_commit() -> None:
    """A seeded fuzz of the body: a flipped bit, garbage or a cut gives a typed error or decodes to some commit,
    never another exception."""
    body, rng = _commit().encode(), random.Random(20261128)
    for _ in range(2000):
        mutant = bytearray(body)
        at = rng.randrange(len(mutant))
        if rng.random() < 0.5:
            mutant[at] ^= 1 << rng.randrange(8)
        else:
            mutant = mutant[:at] + bytearray(rng.randbytes(rng.randint(0, 8)))
        try:
            TopicCommit.decode(bytes(mutant), PATH)
        except CorruptRecordError:
            pass
