"""The partition log: offsets, rolls, indexes, lookups by offset and timestamp, bad input."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pysparklog import (
    BatchSettings,
    Codec,
    CorruptRecordError,
    InvalidConfigError,
    InvalidLogDirectoryError,
    InvalidOffsetError,
    LogConfig,
    LogDirectory,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    TimestampType,
)
from pysparklog.storage import log as log_module
from pysparklog.storage.active_segment import roll_jitter
from pysparklog.storage.index import OffsetIndex, TimeIndex
from pysparklog.storage.log_reads import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pysparklog.storage.records.arrow_records import EncodedBatches, encode_arrow
from pysparklog.storage.records.default_records import batch_crc
from pysparklog.storage.records.memory_records import as_uint8, scan
from pysparklog.storage.segment import LogSegment
from tests.conftest import keyed_table, read_all

SMALL_BATCHES = BatchSettings(max_batch_bytes=1500)


def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("orders", 0)
    first = log.append_arrow(keyed_table(1000), SMALL_BATCHES)
    second = log.append_arrow(keyed_table(500, start=1000), SMALL_BATCHES)
    assert (first.first_offset, first.last_offset, first.record_count) == (0, 999, 1000)
    assert (second.first_offset, second.last_offset) == (1000, 1499)
    table = read_all(log)
    assert table.column("offset").to_pylist() == list(range(1500))
    assert table.column("key").to_pylist() == keyed_table(1500).column("key").to_pylist()
    assert table.column("value").to_pylist() == keyed_table(1500).column("value").to_pylist()
    assert set(table.column("topic").to_pylist()) == {"orders"}
    assert set(table.column("partition").to_pylist()) == {0}
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == keyed_table(1500).column("timestamp").to_pylist()
    assert set(table.column("timestampType").to_pylist()) == {TimestampType.CREATE_TIME}
    assert (log.log_start_offset, log.log_end_offset) == (0, 1500)


def test_partition_files_are_kafkas(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("orders", 3)
    log.append_arrow(keyed_table(10))
    names = set(os.listdir(log.directory))
    assert {"00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"} <= names
    with open(os.path.join(log.directory, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n1\n0 0\n"
    with open(os.path.join(log.directory, "partition.metadata"), "rb") as f:
        metadata = f.read()
    assert len(metadata) == 43 and metadata.startswith(b"version: 0\ntopic_id: ") and not metadata.endswith(b"\n")
    other = LogDirectory(tmp_path).partition("orders", 4)
    other.append_arrow(keyed_table(1))
    assert other.topic_id == log.topic_id, "partitions of one topic share its id"


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=10_000)
    log = LogDirectory(tmp_path, config).partition("t", 0)
    for chunk in range(5):
        log.append_arrow(keyed_table(200, start=chunk * 200), SMALL_BATCHES)
    segments = log.segments()
    assert len(segments) > 5
    bases = [s.base_offset for s in segments]
    for segment, next_base in zip(segments, bases[1:] + [log.log_end_offset], strict=True):
        assert segment.size() <= config.segment_bytes
        entries = scan(segment.read_bytes(0, segment.size()))
        assert int(entries.base_offsets[0]) == segment.base_offset
        assert int(entries.last_offsets[-1]) + 1 == next_base, "a segment ends where the next one starts"
    # Reads across every boundary, starting at, just before and just after each base.
    for base in bases[1:]:
        for start in (base - 1, base, base + 1):
            table = read_all(log, start, start + 3)
            assert table.column("offset").to_pylist() == [start, start + 1, start + 2]
    # A snapshot is written at each roll, named by the new segment's base.
    snapshots = sorted(n for n in os.listdir(log.directory) if n.endswith(".snapshot"))
    assert snapshots == [f"{b:020d}.snapshot" for b in bases[1:]]


def test_a_batch_larger_than_the_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(segment_bytes=2000)).partition("t", 0)
    log.append_arrow(keyed_table(5, value_size=10))
    log.append_arrow(keyed_table(1, start=5, value_size=5000))
    log.append_arrow(keyed_table(1, start=6, value_size=10))
    assert [s.base_offset for s in log.segments()] == [0, 5, 6]
    assert read_all(log).column("offset").to_pylist() == list(range(7))


def test_roll_on_segment_ms_uses_record_timestamps(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(segment_ms=1000)).partition("t", 0)
    log.append_arrow(keyed_table(3, ts_start=10_000))
    log.append_arrow(keyed_table(3, start=3, ts_start=10_500))  # waited 500 ms: same segment
    log.append_arrow(keyed_table(3, start=6, ts_start=12_000))  # waited > 1000 ms: roll
    assert [s.base_offset for s in log.segments()] == [0, 6]


def test_roll_when_the_offset_index_is_full(tmp_path: Path) -> None:
    # Two index entries fit in 16 bytes; an entry is written after every 100 bytes.
    log = LogDirectory(tmp_path, LogConfig(segment_index_bytes=24, index_interval_bytes=100)).partition("t", 0)
    for i in range(12):
        log.append_arrow(keyed_table(1, start=i))
    segments = log.segments()
    assert len(segments) > 1
    for segment in segments:
        assert len(segment.indexes.offset_index()) <= 3
    assert read_all(log).column("offset").to_pylist() == list(range(12))


def test_sparse_index_follows_kafkas_interval_rule(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(index_interval_bytes=4096)).partition("t", 0)
    for i in range(40):
        log.append_arrow(keyed_table(7, start=i * 7), BatchSettings(max_batch_bytes=800))
    segment = log.segments()[0]
    entries = scan(segment.read_bytes(0, segment.size()))
    # The model: before each batch, if more than 4096 bytes were written since the last entry's
    # position (0 at the start), index (batch last offset, batch position).
    expected_offsets, expected_positions, last_entry = [], [], 0
    for pos, last in zip(entries.positions.tolist(), entries.last_offsets.tolist(), strict=True):
        if pos - last_entry > 4096:
            expected_offsets.append(last)
            expected_positions.append(pos)
            last_entry = pos
    index = segment.indexes.offset_index()
    assert index.offsets.tolist() == expected_offsets
    assert index.positions.tolist() == expected_positions
    assert len(expected_offsets) >= 5


def test_every_offset_is_found_at_and_between_index_entries(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(index_interval_bytes=500)).partition("t", 0)
    log.append_arrow(keyed_table(600), BatchSettings(max_batch_bytes=700))
    index = log.segments()[0].indexes.offset_index()
    assert len(index) > 10
    for offset in range(600):
        table = read_all(log, offset, offset + 1)
        assert table.column("offset").to_pylist() == [offset]
        assert table.column("key").to_pylist() == [f"k{offset}".encode()]


def test_end_offset_bounds_the_read_and_chunks_stay_small(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(5000), BatchSettings(max_batch_bytes=4096))
    batches = list(log.read_arrow(100, 4100, max_chunk_bytes=64 * 1024))
    assert len(batches) > 5, "a small chunk size yields many Arrow batches"
    assert max(b.num_rows for b in batches) < 1000
    offsets = pa.Table.from_batches(batches).column("offset").to_pylist()
    assert offsets == list(range(100, 4100))
    assert read_all(log, 5000).num_rows == 0, "reading at the log end yields nothing"


def test_headers_only_on_request(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = keyed_table(3).append_column(
        "headers", pa.array([[{"key": "a", "value": b"1"}], None, [{"key": "b", "value": None}]], header_type)
    )
    log.append_arrow(table)
    assert "headers" not in read_all(log).column_names
    headers = read_all(log, include_headers=True).column("headers").to_pylist()
    assert headers == [[{"key": "a", "value": b"1"}], None, [{"key": "b", "value": None}]]


@pytest.mark.parametrize("codec", list(Codec))
def test_every_codec_round_trips_through_the_log(tmp_path: Path, codec: Codec) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(3000), BatchSettings(codec=codec, max_batch_bytes=16384))
    table = read_all(log, 1234, 2345)
    assert table.column("value").to_pylist() == keyed_table(3000).column("value").to_pylist()[1234:2345]


def test_log_append_time_topic_stamps_batches(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = LogDirectory(tmp_path, config).partition("t", 0)
    info = log.append_arrow(keyed_table(10, ts_start=5))
    assert info.log_append_time_ms > 1_600_000_000_000
    table = read_all(log)
    assert set(table.column("timestampType").to_pylist()) == {TimestampType.LOG_APPEND_TIME}
    assert set(table.column("timestamp").cast(pa.int64()).to_pylist()) == {info.log_append_time_ms}


def _random_timestamps_log(tmp_path: Path) -> tuple[PartitionLog, np.ndarray]:
    rng = np.random.default_rng(3)
    timestamps = rng.integers(1_000, 50_000, 3000)
    table = keyed_table(3000).set_column(2, "timestamp", pa.array(timestamps, pa.int64()))
    config = LogConfig(segment_bytes=40_000, index_interval_bytes=1000)
    log = LogDirectory(tmp_path, config).partition("t", 0).local
    for start in range(0, 3000, 300):
        log.append_arrow(table.slice(start, 300), BatchSettings(max_batch_bytes=2000))
    return log, timestamps


def test_offset_for_timestamp_matches_a_brute_force_model(tmp_path: Path) -> None:
    log, timestamps = _random_timestamps_log(tmp_path)
    assert len(log.segments()) > 3
    targets = [0, 999, 1000, 25_000, 49_999, 50_000] + np.random.default_rng(9).integers(0, 51_000, 200).tolist()
    for target in targets:
        hits = np.flatnonzero(timestamps >= target)
        expected = (int(hits[0]), int(timestamps[hits[0]])) if len(hits) else None
        assert log.offset_for_timestamp(target) == expected, f"target {target}"


def test_special_timestamps(tmp_path: Path) -> None:
    log, timestamps = _random_timestamps_log(tmp_path)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (3000, -1)
    offset, ts = log.offset_for_timestamp(MAX_TIMESTAMP)  # type: ignore[misc]
    assert ts == int(timestamps.max())
    # Kafka answers with the last offset of the first batch holding the largest timestamp.
    first_max = int(np.argmax(timestamps))
    assert offset >= first_max and timestamps[first_max] == ts
    with pytest.raises(InvalidOffsetError, match="-2 \\(earliest\\)"):
        log.offset_for_timestamp(-7)


def test_time_index_is_monotonic_and_consistent(tmp_path: Path) -> None:
    log, _ = _random_timestamps_log(tmp_path)
    for segment in log.segments()[:-1]:
        index = segment.indexes.time_index()
        assert len(index) >= 1
        assert np.all(np.diff(index.timestamps) > 0)
        # The final entry written on roll is the segment's largest timestamp.
        assert index.last_entry == segment.largest_timestamp(segment.size())


def test_out_of_range_reads_fail_clearly(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(10))
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 11 is outside t-0's range \[0, 10\]"):
        list(log.read_arrow(11))
    with pytest.raises(OffsetOutOfRangeError, match="offset -1"):
        list(log.read_arrow(-1))
    with pytest.raises(InvalidOffsetError, match="end offset 2 is below start offset 5"):
        list(log.read_arrow(5, 2))


@pytest.mark.parametrize("name", ["orders", "orders-x", "-1", "orders-0-", "or ders-0"])
def test_directories_that_are_not_partitions_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidLogDirectoryError, match="is not a partition directory"):
        PartitionLog(str(tmp_path / name))


def test_topic_names_cannot_leave_the_log_directory(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path / "logs")
    for bad in ("../evil", "a/b", ""):
        with pytest.raises(InvalidLogDirectoryError):
            logs.partition(bad, 0)
    with pytest.raises(InvalidLogDirectoryError, match="partition -1 is invalid"):
        logs.partition("ok", -1)


def test_batches_over_max_message_bytes_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(max_message_bytes=1000)).partition("t", 0)
    log.append_arrow(keyed_table(2, value_size=10))
    with pytest.raises(RecordTooLargeError, match=r"exceeds max.message.bytes \(1000\)"):
        log.append_arrow(keyed_table(1, start=2, value_size=5000))
    assert log.log_end_offset == 2
    assert read_all(log).num_rows == 2


def test_appending_foreign_bytes_checks_them(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    encoded = next(encode_arrow(keyed_table(5)))
    raw = bytearray(encoded.data.tobytes())
    assert log.append(bytes(raw)).last_offset == 4
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        log.append(bytes(raw))
    with pytest.raises(CorruptRecordError, match="end inside a record batch"):
        log.append(bytes(encoded.data.tobytes())[:-3])
    assert log.log_end_offset == 5


def test_corrupt_batch_in_a_segment_names_file_and_position(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(100), BatchSettings(max_batch_bytes=2000))
    segment = log.segments()[0]
    entries = scan(segment.read_bytes(0, segment.size()))
    victim = int(entries.positions[3])
    with open(segment.log_path, "r+b") as f:
        f.seek(victim + 70)
        byte = f.read(1)
        f.seek(victim + 70)
        f.write(bytes([byte[0] ^ 0x55]))
    with pytest.raises(CorruptRecordError) as excinfo:
        read_all(log)
    assert excinfo.value.file == segment.log_path
    assert excinfo.value.position == victim
    assert "CRC-32C mismatch" in str(excinfo.value)


def test_unknown_magic_and_codec_in_a_segment(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(10))
    segment = log.segments()[0]
    data = bytearray(segment.read_bytes(0, segment.size()).tobytes())
    data[16] = 7
    with pytest.raises(CorruptRecordError, match="unknown magic value 7, expected 0, 1 or 2"):
        scan(as_uint8(bytes(data)), file=segment.log_path)


def test_roll_before_offsets_overflow_the_segments_relative_offsets(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    # A batch as compaction leaves it: one record at delta 0, lastOffsetDelta kept at the int32 maximum.
    wide = bytearray(next(encode_arrow(keyed_table(1))).data.tobytes())
    wide[23:27] = (2**31 - 1).to_bytes(4, "big")
    wide[17:21] = batch_crc(wide).to_bytes(4, "big")
    assert log.append(bytes(wide)).last_offset == 2**31 - 1
    info = log.append_arrow(keyed_table(1, start=1))
    assert info.first_offset == 2**31
    assert [s.base_offset for s in log.segments()] == [0, 2**31]
    assert read_all(log).column("offset").to_pylist() == [0, 2**31]


def test_opening_a_partition_touches_only_the_segments_it_reads(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000)
    writer = LogDirectory(tmp_path, config).partition("t", 0)
    for i in range(80):
        writer.append_arrow(keyed_table(20, start=i * 20, value_size=30), BatchSettings(max_batch_bytes=400))
    assert len(writer.segments()) >= 100
    reader = LogDirectory(tmp_path, config).partition("t", 0).local
    assert read_all(reader, 777, 780).column("offset").to_pylist() == [777, 778, 779]
    assert reader._segments.opened() <= 2, "segments are opened lazily, only where the read goes"


def test_seventeen_trailing_bytes_are_a_tail_not_corruption_as_in_kafka() -> None:
    batch = next(encode_arrow(keyed_table(3))).data.tobytes()
    entries = scan(as_uint8(batch + bytes(17)))
    assert len(entries) == 1 and entries.incomplete_tail
    with pytest.raises(CorruptRecordError, match="entry size 0 is smaller than the minimum record overhead"):
        scan(as_uint8(batch + bytes(18)))


def test_roll_jitter_shortens_segment_ms_the_same_way_in_every_process(tmp_path: Path) -> None:
    config = LogConfig(segment_ms=1000, segment_jitter_ms=1000)
    log = LogDirectory(tmp_path, config).partition("t", 0)
    log.append_arrow(keyed_table(1, ts_start=10_000))
    jitter = roll_jitter(config, 0)
    assert 0 < jitter < 1000 and jitter == roll_jitter(config, 0), "derived from the base offset, not per process"
    log.append_arrow(keyed_table(1, start=1, ts_start=10_000 + 1000 - jitter - 1))  # waited exactly 1000 - jitter
    assert len(log.segments()) == 1
    log.append_arrow(keyed_table(1, start=2, ts_start=10_000 + 1000 - jitter - 1))  # one millisecond more
    assert [s.base_offset for s in log.segments()] == [0, 2]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"max_chunk_bytes": -1}, InvalidConfigError, "max_chunk_bytes -1 is not valid; accepted: 1 to 2147483647"),
        ({"max_chunk_bytes": 0}, InvalidConfigError, "max_chunk_bytes 0 is not valid"),
        ({"max_chunk_bytes": 2**31}, InvalidConfigError, "max_chunk_bytes 2147483648 is not valid"),
        ({"max_chunk_bytes": 1.5}, InvalidConfigError, "max_chunk_bytes 1.5 is not valid; accepted: an integer"),
        ({"max_chunk_bytes": "1024"}, InvalidConfigError, "max_chunk_bytes '1024' is not valid"),
        ({"include_headers": "yes"}, InvalidConfigError, "include_headers 'yes' is not valid; accepted: True or False"),
        ({"start_offset": "3"}, InvalidOffsetError, r"start_offset '3' is not valid; accepted: an offset \(integer\)"),
        ({"start_offset": True}, InvalidOffsetError, "start_offset True is not valid"),
        (
            {"end_offset": 2.0},
            InvalidOffsetError,
            r"end_offset 2.0 is not valid; accepted: an offset \(integer\) or None",
        ),
        ({"isolation_level": "committed"}, InvalidConfigError, "isolation level 'committed' is not valid"),
    ],
)
def test_read_arguments_are_checked_when_read_arrow_is_called(
    tmp_path: Path, arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(10))
    with pytest.raises(error, match=message):
        log.read_arrow(**arguments)  # type: ignore[arg-type]


def test_the_smallest_chunks_hold_one_batch_each(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(30), BatchSettings(max_batch_records=10))
    for max_chunk_bytes in (1, 11, 12, 13):
        batches = list(log.read_arrow(max_chunk_bytes=max_chunk_bytes))
        assert [b.num_rows for b in batches] == [10, 10, 10]
    # NumPy integers (offsets taken from an Arrow column) are integers too.
    numpy_read = log.read_arrow(np.int64(25), np.int32(27), max_chunk_bytes=np.int64(1))  # type: ignore[arg-type, unused-ignore]
    assert [b.num_rows for b in numpy_read] == [2]


@pytest.mark.parametrize("timestamp", ["1700000000000", 1.7e12, None, -4])
def test_offset_for_timestamp_refuses_what_is_not_a_timestamp(tmp_path: Path, timestamp: object) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(10))
    with pytest.raises(InvalidOffsetError, match=r"accepted: -2 \(earliest\), -1 \(latest\), -3 \(max timestamp\)"):
        log.offset_for_timestamp(timestamp)  # type: ignore[arg-type]


def test_a_table_of_several_chunks_is_one_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer that appends while the table is being encoded lands before it or after it,
    never between its chunks."""
    log = LogDirectory(tmp_path).partition("t", 0)
    other = LogDirectory(tmp_path).partition("t", 0)  # another writer: a lock of its own
    encode = encode_arrow

    def encode_while_another_writer_appends(
        data: pa.Table | pa.RecordBatch, settings: BatchSettings | None = None
    ) -> Iterator[EncodedBatches]:
        for i, encoded in enumerate(encode(data, settings)):
            if i == 1:
                other.append(next(encode(keyed_table(1, start=999))))
            yield encoded

    monkeypatch.setattr(log_module, "encode_arrow", encode_while_another_writer_appends)
    table = pa.concat_tables([keyed_table(10, start=i * 10) for i in range(3)])
    assert table.column("key").num_chunks == 3
    info = log.append_arrow(table)
    assert (info.record_count, info.last_offset - info.first_offset) == (30, 29)
    appended = read_all(log, info.first_offset, info.last_offset + 1).column("key").to_pylist()
    assert appended == table.column("key").to_pylist()
    assert log.log_end_offset == 31


def test_append_refuses_what_is_not_batches(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    with pytest.raises(InvalidConfigError, match="cannot append str; accepted: EncodedBatches, bytes"):
        log.append("batches")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="cannot append dict; accepted: a pyarrow Table or RecordBatch"):
        log.append_arrow({"value": [b"x"]})
    with pytest.raises(InvalidConfigError, match="settings 'zstd' is not valid; accepted: a BatchSettings or None"):
        log.append_arrow(keyed_table(1), "zstd")  # type: ignore[arg-type]
    assert log.log_end_offset == 0


def _damage_index(segment: LogSegment, damage: str, other: LogSegment) -> None:
    """Damage a segment's index the ways a disk or a person does; every index stays loadable."""
    path = segment.time_index_path if "time" in damage else segment.index_path
    data = Path(path).read_bytes()
    if damage.startswith("garbage"):
        data += np.random.default_rng(len(data)).integers(0, 256, 40, dtype=np.uint8).tobytes()
    elif damage.startswith("another segment's"):
        data = Path(other.time_index_path if "time" in damage else other.index_path).read_bytes()
    elif damage == "time index entry that understates its batch":
        time_index = TimeIndex.parse(Path(path).read_bytes(), segment.base_offset)
        first_ts, last_offset = int(time_index.timestamps[0]) - 1, int(time_index.offsets[-1])
        data = TimeIndex.encode(segment.base_offset, [first_ts], [last_offset])
    elif damage == "offset index entry inside a batch":
        index = OffsetIndex.parse(Path(path).read_bytes(), segment.base_offset)
        positions = [int(p) + 1 for p in index.positions]
        data = OffsetIndex.encode(segment.base_offset, index.offsets.tolist(), positions)
    Path(path).write_bytes(data)


@pytest.mark.parametrize(
    "damage",
    [
        "garbage after the time index",
        "garbage after the offset index",
        "another segment's time index",
        "another segment's offset index",
        "time index entry that understates its batch",
        "offset index entry inside a batch",
    ],
)
def test_lookups_check_the_index_entries_they_use(tmp_path: Path, damage: str) -> None:
    log, timestamps = _random_timestamps_log(tmp_path)
    segments = log.segments()
    assert len(segments) > 3
    for segment, other in zip(segments[:-1], segments[1:], strict=True):  # the sealed segments
        _damage_index(segment, damage, other)
    reader = LogDirectory(tmp_path, LogConfig(segment_bytes=40_000, index_interval_bytes=1000)).partition("t", 0)
    targets = [0, 999, 1000, 25_000, 49_999, 50_000] + np.random.default_rng(9).integers(0, 51_000, 200).tolist()
    for target in targets:
        hits = np.flatnonzero(timestamps >= target)
        expected = (int(hits[0]), int(timestamps[hits[0]])) if len(hits) else None
        assert reader.offset_for_timestamp(target) == expected, f"target {target}"
    offset, ts = reader.offset_for_timestamp(MAX_TIMESTAMP)  # type: ignore[misc]
    assert ts == int(timestamps.max()) and timestamps[offset] <= ts
    assert offset >= int(np.argmax(timestamps)), "the batch holding the largest timestamp first"
    for start in np.random.default_rng(5).integers(0, 3000, 50).tolist():
        assert next(reader.read_arrow(start)).column("offset")[0].as_py() == start
