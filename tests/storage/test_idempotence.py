"""Idempotent appends: the log recognises a producer's retried batches and refuses gaps and fenced epochs,
as a broker's ``ProducerStateManager`` does."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pytest

from pysparklog import (
    BatchSettings,
    LogConfig,
    LogDirectory,
    OutOfOrderSequenceError,
    PartitionLog,
    ProducerFencedError,
)
from pysparklog.storage.records.arrow_records import EncodedBatches, encode_arrow
from tests.conftest import keyed_table, read_all

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11 on


def batches(
    n: int, *, pid: int = 7, epoch: int = 0, sequence: int = 0, start: int = 0, per_batch: int = 0
) -> EncodedBatches:
    """``n`` records of producer ``pid`` from ``sequence`` on, in batches of ``per_batch`` records (one batch if 0)."""
    settings = BatchSettings(
        producer_id=pid, producer_epoch=epoch, base_sequence=sequence, max_batch_records=per_batch or max(n, 1)
    )
    (encoded,) = encode_arrow(keyed_table(n, start=start), settings)
    return encoded


class SegmentSettings(TypedDict, total=False):
    """The ``LogConfig`` keywords these tests set."""

    segment_bytes: int


def log_at(path: Path, **config: Unpack[SegmentSettings]) -> PartitionLog:
    return LogDirectory(path, LogConfig(**config)).partition("t", 0).local


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written_again(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    log.append_arrow(keyed_table(3))  # a non-idempotent writer first: offsets 0-2
    first = batches(5)
    appended = log.append(first)
    assert (appended.first_offset, appended.last_offset, appended.record_count) == (3, 7, 5)
    retried = log.append(first)
    assert (retried.first_offset, retried.last_offset, retried.record_count) == (3, 7, 5)
    assert log.log_end_offset == 8
    assert read_all(log).column("offset").to_pylist() == list(range(8))


def test_a_retry_of_a_multi_batch_append_repeats_none_of_its_batches(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    encoded = batches(20, per_batch=4)
    assert encoded.num_batches == 5
    log.append(encoded)
    again = log.append(encoded)
    assert (again.first_offset, again.last_offset) == (0, 19)
    assert log.log_end_offset == 20


def test_a_gap_or_a_step_back_in_sequence_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    log.append(batches(5))  # sequences 0-4
    with pytest.raises(OutOfOrderSequenceError, match=r"sequence 6 is out of order, expected 5"):
        log.append(batches(2, sequence=6))
    with pytest.raises(OutOfOrderSequenceError, match=r"sequence 3 is out of order, expected 5"):
        log.append(batches(3, sequence=3))  # 3-5: overlaps what was appended and goes past it
    assert log.log_end_offset == 5
    assert log.append(batches(2, sequence=5)).first_offset == 5


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    log.append(batches(3, epoch=2))
    with pytest.raises(ProducerFencedError, match=r"producer 7 epoch 1 is fenced: the log has seen epoch 2"):
        log.append(batches(1, epoch=1, sequence=3))
    with pytest.raises(OutOfOrderSequenceError, match=r"starts epoch 3 at sequence 3; a new epoch starts at 0"):
        log.append(batches(1, epoch=3, sequence=3))
    assert log.append(batches(1, epoch=3, sequence=0)).first_offset == 3
    with pytest.raises(ProducerFencedError):
        log.append(batches(3, epoch=2))  # the first epoch's batch, retried after the bump
    assert log.log_end_offset == 4


def test_an_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    assert log.append(batches(2, sequence=1000)).record_count == 2
    assert log.append(batches(2, pid=8, sequence=17)).first_offset == 2


def test_a_batch_inside_what_the_producer_appended_is_recognised_with_its_own_offsets(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    log.append(batches(10, per_batch=2))  # sequences 0-9 at offsets 0-9, five batches, one run
    again = log.append(batches(3, sequence=4, start=4))  # sequences 4-6, as a producer split differently
    assert (again.first_offset, again.last_offset) == (4, 6)
    assert log.log_end_offset == 10


def test_only_the_last_five_runs_are_recognised(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    sent = []
    for i in range(6):
        sent.append(batches(2, sequence=2 * i, start=2 * i))
        log.append(sent[-1])
        log.append_arrow(keyed_table(1))  # another writer in between: each batch is a run of its own
    assert log.append(sent[1]).first_offset == 3  # among the last five: recognised
    with pytest.raises(OutOfOrderSequenceError):
        log.append(sent[0])  # older: Kafka cannot tell it from a step back either
    assert log.log_end_offset == 18


def test_sequences_wrap_at_two_to_the_31(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    log.append(batches(3, sequence=2**31 - 3))  # sequences 2147483645..2147483647
    assert log.append(batches(2, sequence=0)).first_offset == 3
    assert log.append(batches(2, sequence=0)).first_offset == 3  # its retry


def test_a_reopened_log_recognises_retries_also_across_a_roll(tmp_path: Path) -> None:
    log = log_at(tmp_path, segment_bytes=2000)
    sent = [batches(10, sequence=10 * i, start=10 * i) for i in range(6)]
    for encoded in sent:
        log.append(encoded)
    assert len(log.segments()) > 1
    reopened = log_at(tmp_path, segment_bytes=2000)  # a new process: state from the snapshot and a replay
    assert reopened.append(sent[-1]).first_offset == 50
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(batches(1, sequence=70))
    assert reopened.append(batches(1, sequence=60)).first_offset == 60


def test_batches_another_writer_appended_are_seen_before_checking(tmp_path: Path) -> None:
    mine, theirs = log_at(tmp_path), PartitionLog(str(tmp_path / "t-0"))  # as two processes hold it
    first = batches(3)
    mine.append(first)
    theirs.append(batches(4, sequence=3))  # the same producer's next batch through another handle
    assert mine.append(first).first_offset == 0  # still recognised
    with pytest.raises(OutOfOrderSequenceError, match="expected 7"):
        mine.append(batches(1, sequence=8))
    assert mine.append(batches(1, sequence=7)).first_offset == 7


def test_duplicates_mixed_with_new_batches_keep_the_new_ones(tmp_path: Path) -> None:
    log = log_at(tmp_path)
    log.append(batches(4, per_batch=2))  # sequences 0-3 as two batches
    both = batches(6, per_batch=2)  # 0-1, 2-3 (both appended) and 4-5 (new)
    info = log.append(both)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.log_end_offset == 6
