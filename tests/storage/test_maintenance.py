"""The partition log's maintenance operations that retention, delete-records and the cleaner use."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pysparklog import BatchSettings, InvalidOffsetError, LogConfig, LogDirectory, OffsetOutOfRangeError
from pysparklog.storage import checkpoints
from pysparklog.storage.io import PosixStorage
from pysparklog.storage.log import PartitionLog
from pysparklog.storage.swap import SWAP_MARKER
from tests.conftest import keyed_table, read_all

LOCAL = PosixStorage("/")  # checkpoint files are named by absolute paths

CONFIG = LogConfig(segment_bytes=6000)


def _log(tmp_path: Path, rows: int = 300) -> PartitionLog:
    log = LogDirectory(tmp_path, CONFIG).partition("t", 0).local
    log.append_arrow(keyed_table(rows), BatchSettings(max_batch_bytes=1200))
    assert len(log.segments()) > 4
    return log


def test_raise_log_start_offset_hides_records_below_it(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert log.raise_log_start_offset(42) == 42
    assert log.raise_log_start_offset(10) == 42, "a lower offset is a no-op"
    assert read_all(log).column("offset").to_pylist()[0] == 42
    with pytest.raises(OffsetOutOfRangeError):
        list(log.read_arrow(41))
    with pytest.raises(InvalidOffsetError, match="accepted 0 to the high watermark 300"):
        log.raise_log_start_offset(301)
    starts = checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / checkpoints.LOG_START_OFFSET_CHECKPOINT))
    assert starts == {("t", 0): 42}
    assert LogDirectory(tmp_path, CONFIG).partition("t", 0).log_start_offset == 42, "durable"


def test_delete_segments_retires_a_prefix(tmp_path: Path) -> None:
    log = _log(tmp_path)
    bases = [s.base_offset for s in log.segments()]
    stale_reader = LogDirectory(tmp_path, CONFIG).partition("t", 0)
    assert read_all(stale_reader).num_rows == 300  # caches the segment list
    with pytest.raises(InvalidOffsetError, match="not its oldest inactive segments"):
        log.delete_segments(bases[1:2])
    with pytest.raises(InvalidOffsetError):
        log.delete_segments(bases)
    assert log.delete_segments(bases[:2]) == bases[2]
    names = os.listdir(log.directory)
    assert f"{bases[0]:020d}.log.deleted" in names and f"{bases[1]:020d}.index.deleted" in names
    assert not any(n.endswith(".snapshot") and int(n[:20]) < bases[2] for n in names)
    assert read_all(stale_reader).column("offset").to_pylist() == list(range(bases[2], 300))
    with pytest.raises(OffsetOutOfRangeError):
        list(stale_reader.read_arrow(bases[1]))


def test_roll_only_when_the_active_segment_holds_data(tmp_path: Path) -> None:
    log = _log(tmp_path)
    before = len(log.segments())
    assert log.roll() is True
    assert len(log.segments()) == before + 1
    assert log.roll() is False


def _clean_copy(log: PartitionLog, base: int) -> None:
    """Stand in for the cleaner: the segment's own files as ``.cleaned`` files."""
    segment = log.segment(base)
    for path in (segment.log_path, segment.index_path, segment.time_index_path):
        shutil.copyfile(path, path + ".cleaned")


def test_replace_segments_swaps_files_in(tmp_path: Path) -> None:
    log = _log(tmp_path)
    base = log.segments()[1].base_offset
    _clean_copy(log, base)
    log.replace_segments([base], base)
    names = os.listdir(log.directory)
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))] and SWAP_MARKER not in names
    assert f"{base:020d}.log.deleted" in names and f"{base:020d}.log" in names
    assert read_all(log).column("offset").to_pylist() == list(range(300))
    with pytest.raises(InvalidOffsetError, match="cannot swap"):
        _clean_copy(log, log.segments()[-1].base_offset)
        log.replace_segments([log.segments()[-1].base_offset], log.segments()[-1].base_offset)
    assert not [n for n in os.listdir(log.directory) if n.endswith(".cleaned")], "refused files are removed"


@pytest.mark.parametrize("phase", ["swap", "finish"])
def test_an_interrupted_swap_is_finished_by_the_next_reader(tmp_path: Path, phase: str) -> None:
    log = _log(tmp_path)
    base = log.segments()[1].base_offset
    _clean_copy(log, base)
    segment = log.segment(base)
    # A cleaner died mid-swap: marker written, some files already moved.
    os.replace(segment.log_path + ".cleaned", segment.log_path + ".swap")
    if phase == "finish":
        for path in (segment.log_path, segment.index_path, segment.time_index_path):
            os.replace(path, path + ".deleted")
        os.replace(segment.index_path + ".cleaned", segment.index_path + ".swap")
        os.replace(segment.time_index_path + ".cleaned", segment.time_index_path + ".swap")
        os.replace(segment.log_path + ".swap", segment.log_path)  # one file already in place
    marker = {"old": [base], "new": base, "phase": phase}
    (Path(log.directory) / SWAP_MARKER).write_text(json.dumps(marker))
    reader = LogDirectory(tmp_path, CONFIG).partition("t", 0)
    assert read_all(reader).column("offset").to_pylist() == list(range(300))
    names = os.listdir(log.directory)
    assert SWAP_MARKER not in names and not [n for n in names if n.endswith((".cleaned", ".swap"))]


def test_a_config_source_is_asked_again_at_every_append(tmp_path: Path) -> None:
    current = {"config": LogConfig()}
    log = PartitionLog(str(tmp_path / "t-0"), lambda: current["config"])
    log.append_arrow(keyed_table(50), BatchSettings(max_batch_bytes=1000))
    assert len(log.segments()) == 1
    current["config"] = LogConfig(segment_bytes=2000)
    log.append_arrow(keyed_table(50, start=50), BatchSettings(max_batch_bytes=1000))
    assert len(log.segments()) > 2
    assert log.config.segment_bytes == 2000
