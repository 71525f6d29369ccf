"""Topic configs the append path applies as a broker does: compression.type and timestamp bounds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pysparklog import BatchSettings, Codec, LogConfig, LogDirectory, TimestampType
from pysparklog.errors import InvalidTimestampError
from pysparklog.storage.records.memory_records import scan
from tests.conftest import keyed_table, read_all


def _now() -> int:
    return int(time.time() * 1000)


def test_timestamps_too_old_or_too_far_ahead_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000)
    log = LogDirectory(tmp_path, config).partition("t", 0)
    assert log.append_arrow(keyed_table(3, ts_start=_now())).record_count == 3
    with pytest.raises(InvalidTimestampError, match=r"out of range: it must be within \[\d+, \d+\]"):
        log.append_arrow(keyed_table(3, start=3, ts_start=_now() - 3_600_000))
    with pytest.raises(InvalidTimestampError, match="message.timestamp.after.max.ms=1000"):
        log.append_arrow(keyed_table(3, start=3, ts_start=_now() + 3_600_000))
    assert read_all(log).num_rows == 3


def test_log_append_time_topics_take_any_producer_timestamp(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_before_max_ms=1, message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = LogDirectory(tmp_path, config).partition("t", 0)
    assert log.append_arrow(keyed_table(2, ts_start=5)).record_count == 2


@pytest.mark.parametrize(("topic_codec", "producer_codec"), [("zstd", Codec.NONE), ("uncompressed", Codec.GZIP)])
def test_compression_type_recompresses_batches_keeping_producer_fields(
    tmp_path: Path, topic_codec: str, producer_codec: Codec
) -> None:
    log = LogDirectory(tmp_path, LogConfig(compression_type=topic_codec)).partition("t", 0)
    settings = BatchSettings(
        codec=producer_codec, max_batch_bytes=4000, producer_id=7, producer_epoch=2, base_sequence=0
    )
    log.append_arrow(keyed_table(200), settings)
    segment = log.segments()[0]
    entries = scan(segment.read_bytes(0, segment.size()))
    assert set(entries.codecs.tolist()) == {Codec.from_name(topic_codec)}
    assert set(entries.producer_ids.tolist()) == {7}
    sequences = entries.base_sequences.tolist()
    assert sequences[0] == 0 and sequences == sorted(sequences), "sequences continue batch after batch"
    assert read_all(log).column("value").to_pylist() == keyed_table(200).column("value").to_pylist()


def test_producer_compression_keeps_the_producers_codec(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(keyed_table(50), BatchSettings(codec=Codec.LZ4))
    segment = log.segments()[0]
    assert set(scan(segment.read_bytes(0, segment.size())).codecs.tolist()) == {Codec.LZ4}
