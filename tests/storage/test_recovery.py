"""Durability and recovery: torn tails, kill -9 mid-append, lost or corrupt indexes, reboots."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypedDict

import pytest

from pysparklog import BatchSettings, CorruptRecordError, LogConfig, LogDirectory
from pysparklog.storage import checkpoints
from pysparklog.storage.index import OffsetIndex, TimeIndex
from pysparklog.storage.io import PosixStorage
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.log_state import STATE_FILE, LogState
from pysparklog.storage.records.arrow_records import encode_arrow
from pysparklog.storage.records.memory_records import scan
from tests.conftest import REPO, keyed_table, read_all

LOCAL = PosixStorage("/")  # checkpoint files are named by absolute paths


def _state(log: PartitionLog) -> LogState:
    with open(os.path.join(log.directory, STATE_FILE), "rb") as f:
        state = LogState.decode(f.read())
    assert state is not None
    return state


def _write_state(log: PartitionLog, state: LogState) -> None:
    with open(os.path.join(log.directory, STATE_FILE), "r+b") as f:
        f.write(state.encode())


def _append_raw(log: PartitionLog, data: bytes) -> None:
    """Bytes a writer wrote to the active segment before dying, without acknowledging them."""
    with open(log.segments()[-1].log_path, "ab") as f:
        f.write(data)


def test_a_torn_tail_is_invisible_to_readers_and_cut_by_the_next_writer(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0).local
    log.append_arrow(keyed_table(100), BatchSettings(max_batch_bytes=2000))
    torn = next(encode_arrow(keyed_table(50, start=100))).data.tobytes()
    _append_raw(log, torn[: len(torn) // 2])
    assert read_all(log).column("offset").to_pylist() == list(range(100))
    assert log.log_end_offset == 100

    writer = LogDirectory(tmp_path).partition("t", 0).local
    info = writer.append_arrow(keyed_table(10, start=100))
    assert (info.first_offset, info.last_offset) == (100, 109)
    segment = writer.segments()[-1]
    entries = scan(segment.read_bytes(0, segment.size()))
    assert not entries.incomplete_tail and entries.stop_position == segment.size()
    assert read_all(log).column("key").to_pylist() == keyed_table(110).column("key").to_pylist()


def test_a_whole_unacknowledged_batch_is_kept_like_kafka_recovery_keeps_it(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0).local
    log.append_arrow(keyed_table(10))
    # A writer appended a complete batch at offset 10 and died before acknowledging it.
    batch = bytearray(next(encode_arrow(keyed_table(5, start=10))).data.tobytes())
    batch[0:8] = (10).to_bytes(8, "big")
    batch[12:16] = (0).to_bytes(4, "big")
    _append_raw(log, bytes(batch) + b"\x00\x00\x00")
    assert log.log_end_offset == 10, "not acknowledged: readers do not see it yet"
    info = LogDirectory(tmp_path).partition("t", 0).append_arrow(keyed_table(1, start=15))
    assert info.first_offset == 15
    assert read_all(log).column("key").to_pylist() == keyed_table(16).column("key").to_pylist()


def test_missing_and_corrupt_indexes_are_rebuilt_identically(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=30_000, index_interval_bytes=1000)
    log = LogDirectory(tmp_path, config).partition("t", 0).local
    for i in range(6):
        log.append_arrow(keyed_table(100, start=i * 100), BatchSettings(max_batch_bytes=1200))
    segments = log.segments()
    assert len(segments) >= 3
    originals = {}
    for seg in segments:
        for path in (seg.index_path, seg.time_index_path):
            with open(path, "rb") as f:
                originals[path] = f.read()
    os.remove(segments[0].index_path)
    os.remove(segments[0].time_index_path)
    with open(segments[1].index_path, "r+b") as f:
        f.write(b"\xff" * 8)  # a first entry far past the log: fails the sanity check
    os.remove(segments[-1].index_path)

    fresh = LogDirectory(tmp_path, config).partition("t", 0).local
    fresh.recover()
    for seg in segments[:-1]:
        for path in (seg.index_path, seg.time_index_path):
            with open(path, "rb") as f:
                assert f.read() == originals[path], f"{path} rebuilt differently"
    # The active segment's rebuild adds the final time-index entry, as Kafka's recovery does.
    with open(segments[-1].index_path, "rb") as f:
        assert f.read() == originals[segments[-1].index_path]
    assert read_all(fresh).column("offset").to_pylist() == list(range(600))


def test_without_a_state_record_the_writer_recovers_from_the_files(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=20_000)
    log = LogDirectory(tmp_path, config).partition("t", 0).local
    log.append_arrow(keyed_table(400), BatchSettings(max_batch_bytes=1500))
    os.remove(os.path.join(log.directory, STATE_FILE))
    assert log.log_end_offset == 400, "readers derive the end from the files"
    again = LogDirectory(tmp_path, config).partition("t", 0).local
    assert again.append_arrow(keyed_table(5, start=400)).first_offset == 400
    assert read_all(again).num_rows == 405


def test_after_a_reboot_unflushed_garbage_is_truncated(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0).local
    log.append_arrow(keyed_table(50), BatchSettings(max_batch_bytes=1000))
    segment = log.segments()[0]
    entries = scan(segment.read_bytes(0, segment.size()))
    cut = int(entries.positions[5])
    # Power loss: the file keeps its size but the unflushed tail holds zeros.
    with open(segment.log_path, "r+b") as f:
        f.seek(cut + 30)
        f.write(bytes(segment.size() - cut - 30))
    state = _state(log)
    _write_state(log, LogState(**{**{f: getattr(state, f) for f in state.__slots__}, "boot_id": b"another-machine!"}))
    writer = LogDirectory(tmp_path).partition("t", 0).local
    first_lost = int(entries.base_offsets[5])
    assert writer.append_arrow(keyed_table(1, start=1000)).first_offset == first_lost
    assert segment.size() > cut
    keys = read_all(writer).column("key").to_pylist()
    assert keys[:first_lost] == keyed_table(first_lost).column("key").to_pylist()
    assert keys[first_lost:] == [b"k1000"]


def test_roll_moves_the_recovery_point_and_writes_kafka_checkpoints(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(segment_bytes=10_000)).partition("t", 2).local
    log.append_arrow(keyed_table(300), BatchSettings(max_batch_bytes=1500))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    points = checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT))
    assert points == {("t", 2): bases[-1]}
    with open(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT) as f:
        assert f.read() == f"0\n1\nt 2 {bases[-1]}\n"
    with open(tmp_path / checkpoints.LOG_START_OFFSET_CHECKPOINT) as f:
        assert f.read() == "0\n0\n", "Kafka lists only partitions whose log start is above their first segment"


class FlushSettings(TypedDict, total=False):
    """The flush policy keywords of ``LogConfig``."""

    flush_messages: int
    flush_ms: int


@pytest.mark.parametrize("settings", [{"flush_messages": 1}, {"flush_ms": 0}])
def test_flush_policy_moves_the_recovery_point_on_every_append(tmp_path: Path, settings: FlushSettings) -> None:
    log = LogDirectory(tmp_path, LogConfig(**settings)).partition("t", 0).local
    for i in range(3):
        log.append_arrow(keyed_table(7, start=i * 7))
        assert _state(log).recovery_point == 7 * (i + 1)
    points = checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT))
    assert points == {("t", 0): 21}


def test_default_flush_policy_leaves_fsync_to_rolls(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0).local
    log.append_arrow(keyed_table(7))
    assert _state(log).recovery_point == 0
    log.flush()
    assert _state(log).recovery_point == 7


_WRITER = """
import sys
from pysparklog import BatchSettings, CorruptRecordError, LogConfig, LogDirectory
from tests.conftest import keyed_table
log = LogDirectory(sys.argv[1], LogConfig(segment_bytes=200_000)).partition("t", 0).local
start = log.log_end_offset
while True:
    info = log.append_arrow(keyed_table(200, start=start), BatchSettings(max_batch_bytes=3000))
    print(info.first_offset, start, flush=True)
    start += 200
"""


@pytest.mark.slow
def test_kill_9_mid_append_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rng = random.Random(42)
    acknowledged: list[tuple[int, int]] = []  # (first offset, first key number) of each acknowledged append
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _round in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=env
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the writer is running: numba is compiled and appends flow
        assert first.strip(), "the writer process printed nothing"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        # A line cut by the kill is not an acknowledgement the test can read: skip it.
        lines = [line.split() for line in (first + out).splitlines(keepends=True) if line.endswith("\n")]
        acknowledged += [(int(a), int(b)) for a, b in lines]
        log = LogDirectory(tmp_path, LogConfig(segment_bytes=200_000)).partition("t", 0).local
        table = read_all(log)
        offsets = table.column("offset").to_pylist()
        keys = table.column("key").to_pylist()
        values = table.column("value").to_pylist()
        assert offsets == list(range(len(offsets))), "offsets are contiguous"
        for offset, key_start in acknowledged:
            assert keys[offset : offset + 200] == [f"k{key_start + i}".encode() for i in range(200)]
        for key, value in zip(keys, values, strict=True):
            assert value.startswith(key.replace(b"k", b"v", 1) + b":"), "every record is whole"
    assert len(log.segments()) > 1


_CUT_SEGMENT_CHECK = """
import sys
from pysparklog import LogDirectory
from tests.conftest import keyed_table
log = LogDirectory(sys.argv[1]).partition("t", 0).local
view = log.view()
segment = log.segment(view.segment_bases[-1])
chunks = list(segment.chunks(0, view.active_size, max_bytes=int(sys.argv[2]), verify_crc=False))
print(len(chunks), segment.translate_offset(0, view.active_size), segment.largest_timestamp(view.active_size))
print(sum(b.num_rows for b in log.read_arrow(max_chunk_bytes=int(sys.argv[2]))))
print(log.append_arrow(keyed_table(1, start=1000)).first_offset)
"""


@pytest.mark.parametrize("max_bytes", [1024, 4096])  # 4096: what a writer reads of the active segment's start
def test_a_segment_cut_inside_its_first_batch_is_read_and_recovered_without_looping(
    tmp_path: Path, max_bytes: int
) -> None:
    """A machine crash kept the state record and lost the segment's data: every walk over the short file
    stops, and the next writer runs full recovery (in a child process, so that a loop fails the test)."""
    log = LogDirectory(tmp_path).partition("t", 0).local
    log.append_arrow(keyed_table(10))
    log.append_arrow(keyed_table(100, start=10))
    segment = log.segments()[0]
    first_batch = int(scan(segment.read_bytes(0, segment.size())).sizes[0])
    assert 1024 < first_batch < 4096 < segment.size(), "the chunk is smaller, then larger than the cut batch"
    os.truncate(segment.log_path, first_batch - 10)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CUT_SEGMENT_CHECK, str(tmp_path), str(max_bytes)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a walk over the cut segment never ended")
    assert done.returncode == 0, done.stderr
    chunks, read, first_offset = done.stdout.splitlines()
    assert chunks == "0 None (-1, 0)", "nothing whole is left to read"
    assert read == "0"
    assert first_offset == "0", "full recovery truncated the segment at its torn first batch"
    assert read_all(log).column("key").to_pylist() == [b"k1000"]


def _damage_active_segment(log: PartitionLog, damage: str, other: PartitionLog) -> None:
    segment = log.segments()[-1]
    if damage.startswith("delete"):
        os.remove({"delete .index": segment.index_path, "delete .timeindex": segment.time_index_path}[damage])
    elif damage == "truncate .index":
        os.truncate(segment.index_path, os.path.getsize(segment.index_path) - 3)
    elif damage.startswith("garbage"):
        path = segment.index_path if damage == "garbage .index" else segment.time_index_path
        with open(path, "ab") as f:
            f.write(bytes(range(1, 25)))  # whole entries: offsets and positions that are not the log's
    else:
        shutil.copy(os.path.join(other.directory, STATE_FILE), os.path.join(log.directory, STATE_FILE))


@pytest.mark.parametrize(
    "damage",
    ["delete .index", "delete .timeindex", "truncate .index", "garbage .index", "garbage .timeindex", "foreign state"],
)
@pytest.mark.parametrize("writer", ["the same process", "a new process"])
def test_the_next_append_rebuilds_what_is_missing_or_damaged(tmp_path: Path, damage: str, writer: str) -> None:
    config = LogConfig(segment_bytes=20_000, index_interval_bytes=1000)
    logs = LogDirectory(tmp_path, config)
    log = logs.partition("t", 0).local
    log.append_arrow(keyed_table(300), BatchSettings(max_batch_bytes=1500))
    other = logs.partition("u", 0).local
    for i in range(30):  # another partition whose state record names other segments
        other.append_arrow(keyed_table(17, start=i * 17), BatchSettings(max_batch_bytes=1500))
    end = log.log_end_offset
    _damage_active_segment(log, damage, other)

    appender = log if writer == "the same process" else LogDirectory(tmp_path, config).partition("t", 0).local
    for i in range(3):  # enough to roll
        info = appender.append_arrow(keyed_table(100, start=end + i * 100), BatchSettings(max_batch_bytes=1500))
        assert info.first_offset == end + i * 100
    table = read_all(LogDirectory(tmp_path, config).partition("t", 0))
    assert table.column("key").to_pylist() == keyed_table(end + 300).column("key").to_pylist()

    segments = log.segments()
    for segment in segments:
        assert segment.indexes_intact()
        build, _valid = segment.rebuild_indexes(segment.size(), config.index_interval_bytes)
        if segment is not segments[-1]:
            build.maybe_append_time_entry()  # a roll adds the segment's largest timestamp
        with open(segment.index_path, "rb") as f:
            assert f.read() == OffsetIndex.encode(segment.base_offset, build.offsets, build.positions)
        with open(segment.time_index_path, "rb") as f:
            assert f.read() == TimeIndex.encode(segment.base_offset, build.time_stamps, build.time_offsets)


@pytest.mark.parametrize("segments", ["several segments", "one segment"])
def test_a_lost_active_log_is_recovered_by_the_next_append(tmp_path: Path, segments: str) -> None:
    config = LogConfig(segment_bytes=20_000 if segments == "several segments" else 1 << 30)
    log = LogDirectory(tmp_path, config).partition("t", 0).local
    log.append_arrow(keyed_table(300), BatchSettings(max_batch_bytes=1500))
    lost = log.segments()[-1]
    os.remove(lost.log_path)
    kept = lost.base_offset  # the records of the lost segment are gone: the log ends where it began
    assert log.append_arrow(keyed_table(5, start=1000)).first_offset == kept
    keys = read_all(LogDirectory(tmp_path, config).partition("t", 0)).column("key").to_pylist()
    assert keys == keyed_table(kept).column("key").to_pylist() + keyed_table(5, start=1000).column("key").to_pylist()


def test_a_log_that_lost_its_segments_starts_again_at_its_log_start_offset(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0).local
    log.append_arrow(keyed_table(100))
    log.raise_log_start_offset(60)
    os.remove(log.segments()[0].log_path)
    assert log.append_arrow(keyed_table(5, start=1000)).first_offset == 60, "Kafka's LogLoader: no offset goes back"
    assert (log.log_start_offset, log.log_end_offset) == (60, 65)
    assert [s.base_offset for s in log.segments()] == [60]


_CHECKPOINT_DAMAGE = {
    "bytes that are not UTF-8": b"\xff\xfe\x00garbage\x80\n",
    "an offset that is not a number": b"0\n1\nt 0 five\n",
    "fewer entries than its count": b"0\n3\nt 0 5\n",
    "an unknown version": b"7\n0\n",
    "an entry of two fields": b"0\n1\nt 0\n",
}


_CHECKPOINT_WRITERS: dict[str, Callable[[PartitionLog], object]] = {
    "a flush": PartitionLog.flush,
    "a roll": PartitionLog.roll,
    "an append that rolls": lambda log: log.append_arrow(
        keyed_table(300, start=100), BatchSettings(max_batch_bytes=1500)
    ),
}


@pytest.mark.parametrize("writer", list(_CHECKPOINT_WRITERS))
@pytest.mark.parametrize("damage", list(_CHECKPOINT_DAMAGE))
@pytest.mark.parametrize("name", [checkpoints.RECOVERY_POINT_CHECKPOINT, checkpoints.LOG_START_OFFSET_CHECKPOINT])
def test_a_damaged_log_dir_checkpoint_is_written_again_from_the_state_records(
    tmp_path: Path, name: str, damage: str, writer: str
) -> None:
    logs = LogDirectory(tmp_path, LogConfig(segment_bytes=20_000))
    other = logs.partition("u", 3).local
    other.append_arrow(keyed_table(50))
    other.flush()
    other.raise_log_start_offset(20)
    log = logs.partition("t", 0).local
    log.append_arrow(keyed_table(100))
    (tmp_path / name).write_bytes(_CHECKPOINT_DAMAGE[damage])
    with pytest.raises(CorruptRecordError, match=name):
        checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / name))
    _CHECKPOINT_WRITERS[writer](log)
    points = checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT))
    starts = checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / checkpoints.LOG_START_OFFSET_CHECKPOINT))
    state = LogState.decode((Path(log.directory) / STATE_FILE).read_bytes())
    assert state is not None and points == {("u", 3): 50, ("t", 0): state.recovery_point}
    assert starts == {("u", 3): 20}, "u-3's log start, from its state record"
    assert read_all(log).num_rows == state.log_end_offset


_PARTITION_FILE_READERS: dict[str, Callable[[PosixStorage, str], object]] = {
    checkpoints.LEADER_EPOCH_CHECKPOINT: checkpoints.read_leader_epoch_checkpoint,
    checkpoints.PARTITION_METADATA: checkpoints.read_partition_metadata,
}


@pytest.mark.parametrize("name", list(_PARTITION_FILE_READERS))
def test_damaged_partition_files_are_written_again_by_recovery(tmp_path: Path, name: str) -> None:
    logs = LogDirectory(tmp_path)
    log = logs.partition("t", 0).local
    log.append_arrow(keyed_table(10))
    logs.partition("t", 1).append_arrow(keyed_table(10))
    topic_id = log.topic_id
    path = Path(log.directory) / name
    original = path.read_bytes()
    path.write_bytes(b"\xff\xfe" + original[2:])
    with pytest.raises(CorruptRecordError, match=f"{name}.*not UTF-8"):
        _PARTITION_FILE_READERS[name](LOCAL, str(path))
    new = logs.partition("t", 2).local
    new.append_arrow(keyed_table(1))  # another partition's unreadable file does not stop a new one
    log.recover()
    assert path.read_bytes() == original
    assert new.topic_id == topic_id, "from the partition whose file reads"


def test_an_unreadable_producer_snapshot_is_passed_over_and_removed(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(segment_bytes=3000)).partition("t", 0).local
    producer = BatchSettings(producer_id=7, producer_epoch=0, base_sequence=0, max_batch_bytes=500)
    log.append_arrow(keyed_table(100), producer)
    snapshots = sorted(Path(log.directory).glob("*.snapshot"))
    assert len(snapshots) > 2
    latest = snapshots[-1]
    latest.write_bytes(b"\x00\x01" + bytes(10))  # a CRC that does not match
    fresh = LogDirectory(tmp_path, LogConfig(segment_bytes=3000)).partition("t", 0).local
    retry = fresh.append_arrow(keyed_table(100), producer)
    assert (retry.first_offset, retry.last_offset) == (0, 99), "recognised as a retry from the earlier snapshot"
    assert not latest.exists(), "the writer removed the snapshot it could not read"
    after = fresh.append_arrow(keyed_table(5, start=100), replace(producer, base_sequence=100))
    assert after.first_offset == 100


def _segment_files(log: PartitionLog) -> list[str]:
    return sorted(n for n in os.listdir(log.directory) if n.endswith(".log"))


def test_a_segment_holding_another_segments_batches_is_an_error_then_recovered(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path, LogConfig(segment_bytes=3000))
    log = logs.partition("t", 0).local
    log.append_arrow(keyed_table(60), BatchSettings(max_batch_records=4))
    first, second = _segment_files(log)[:2]
    # The first segment's name now holds the second's batches (offsets above the next segment's base).
    shutil.copy(os.path.join(log.directory, second), os.path.join(log.directory, first))
    with pytest.raises(CorruptRecordError, match="does not belong to segment 0"):
        read_all(logs.partition("t", 0))
    with pytest.raises(CorruptRecordError, match="does not belong to segment 0"):
        logs.partition("t", 0).offset_for_timestamp(0)
    # A recovery that revalidates the segment (here from offset 0, after a lost state record and recovery
    # point) truncates at the misplaced batches, as at any invalid batch; the log is readable again.
    os.remove(os.path.join(log.directory, STATE_FILE))
    os.remove(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT)
    recovered = logs.partition("t", 0).local
    recovered.recover()
    assert recovered.log_end_offset == 0
    assert read_all(recovered).num_rows == 0


def test_offset_for_timestamp_passes_over_a_sealed_segment_whose_records_are_gone(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path, LogConfig(segment_bytes=2000))
    log = logs.partition("t", 0).local
    log.append_arrow(keyed_table(60), BatchSettings(max_batch_records=5))
    segments = _segment_files(log)
    assert len(segments) > 2
    os.truncate(os.path.join(log.directory, segments[0]), 0)
    # Its time index still describes records, so it is damage, not a segment compaction emptied.
    found = logs.partition("t", 0).offset_for_timestamp(0)
    assert found is not None and found[0] == int(segments[1].split(".")[0])


def test_another_partitions_state_record_is_not_trusted_by_readers(tmp_path: Path) -> None:
    """A record copied from another partition with the same segment bases names the right active segment
    but not where its bytes end: readers derive the view from the files instead of stopping early."""
    directory = LogDirectory(tmp_path)
    log, other = directory.partition("t", 0).local, directory.partition("t", 1).local
    log.append_arrow(keyed_table(20, value_size=200))
    other.append_arrow(keyed_table(20, value_size=20))
    shutil.copyfile(os.path.join(other.directory, STATE_FILE), os.path.join(log.directory, STATE_FILE))

    reader = LogDirectory(tmp_path).partition("t", 0).local
    assert reader.log_end_offset == 20
    records = read_all(reader)
    assert records.column("offset").to_pylist() == list(range(20))
    assert records.column("value").to_pylist() == keyed_table(20, value_size=200).column("value").to_pylist()


@pytest.mark.parametrize("recovery", ["by the next append", "by recover()"])
def test_another_partitions_log_over_an_empty_active_segment_is_refused(tmp_path: Path, recovery: str) -> None:
    """Bytes past what the state record acknowledges were written from its log end offset: batches starting
    anywhere else are another partition's, whatever the segment's base lets them be."""
    directory = LogDirectory(tmp_path)
    log, other = directory.partition("t", 0).local, directory.partition("t", 1).local
    log.append_arrow(keyed_table(20))
    log.roll()
    other.append_arrow(keyed_table(30, value_size=30))
    other.roll()
    other.append_arrow(keyed_table(5, start=30, value_size=30))
    shutil.copyfile(other.segments()[-1].log_path, log.segments()[-1].log_path)

    writer = LogDirectory(tmp_path).partition("t", 0).local
    if recovery == "by recover()":
        writer.recover()
    info = writer.append_arrow(keyed_table(5, start=20))
    assert (info.first_offset, info.last_offset) == (20, 24)
    records = read_all(writer)
    assert records.column("offset").to_pylist() == list(range(25))
    assert records.column("value").to_pylist() == keyed_table(25).column("value").to_pylist()
