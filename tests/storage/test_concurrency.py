"""Several processes appending to one partition at once, with a reader in another process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest

from pysparklog import LogConfig, LogDirectory
from tests.conftest import REPO, read_all


class Settings(TypedDict):
    """The ``LogConfig`` keywords of the test's log."""

    segment_bytes: int


WRITERS = 4
BATCHES = 40
ROWS = 25
CONFIG: Settings = {"segment_bytes": 30_000}

# Each append is a table of three chunks; the writer prints the offsets each append got.
_WRITER = """
import sys
import pyarrow as pa
from pysparklog import LogConfig, LogDirectory
log = LogDirectory(sys.argv[1], LogConfig(segment_bytes=30_000)).partition("t", 0)
writer = sys.argv[2]
for b in range({batches}):
    keys = [f"{{writer}}-{{b * {rows} + i}}".encode() for i in range({rows})]
    thirds = [keys[: {rows} // 3], keys[{rows} // 3 : 2 * {rows} // 3], keys[2 * {rows} // 3 :]]
    table = pa.concat_tables([pa.table({{"key": part, "value": [k * 3 for k in part]}}) for part in thirds])
    info = log.append_arrow(table)
    print(info.first_offset, info.last_offset, " ".join(k.decode() for part in thirds for k in part), flush=True)
"""

_READER = """
import json, sys, time
from pysparklog import LogConfig, LogDirectory
from pysparklog.errors import PySparkLogError
log = LogDirectory(sys.argv[1], LogConfig(segment_bytes=30_000)).partition("t", 0)
total = int(sys.argv[2])
passes, seen, deadline = 0, 0, time.time() + 120
while seen < total and time.time() < deadline:
    try:
        batches = list(log.read_arrow()) if log.log_end_offset else []
    except FileNotFoundError:
        continue
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(len(offsets))), "a reader saw a gap or a repeat"
    for b in batches:
        for k, v in zip(b.column("key").to_pylist(), b.column("value").to_pylist()):
            assert v == k * 3, "a reader saw a torn record"
    seen = len(offsets)
    passes += 1
print(json.dumps({{"passes": passes, "seen": seen}}))
"""


@pytest.mark.slow
def test_four_processes_append_to_one_partition_while_another_reads(tmp_path: Path) -> None:
    LogDirectory(tmp_path).partition("t", 0).append_arrow(
        __import__("pyarrow").table({"key": [b"seed"], "value": [b"seed" * 3]})
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writer_code = _WRITER.format(batches=BATCHES, rows=ROWS)
    total = 1 + WRITERS * BATCHES * ROWS
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER.format(), str(tmp_path), str(total)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", writer_code, str(tmp_path), f"w{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(WRITERS)
    ]
    appends = []
    for w in writers:
        writer_out, writer_err = w.communicate(timeout=300)
        assert w.returncode == 0, writer_err
        appends += [line.split() for line in writer_out.splitlines()]
    out, err = reader.communicate(timeout=300)
    assert reader.returncode == 0, err
    report = json.loads(out)
    assert report["seen"] == total and report["passes"] > 1

    log = LogDirectory(tmp_path, LogConfig(**CONFIG)).partition("t", 0)
    table = read_all(log)
    assert table.column("offset").to_pylist() == list(range(total))
    keys = [k.decode() for k in table.column("key").to_pylist()[1:]]
    assert len(appends) == WRITERS * BATCHES
    for first, last, *appended in appends:
        assert keys[int(first) - 1 : int(last)] == appended, "one append's records are contiguous"
    assert len(set(keys)) == len(keys) == WRITERS * BATCHES * ROWS, "no record appended twice or lost"
    for i in range(WRITERS):
        mine = [int(k.split("-")[1]) for k in keys if k.startswith(f"w{i}-")]
        assert mine == list(range(BATCHES * ROWS)), "each writer's records keep their order"
    assert len(log.segments()) > 3, "rolls happened while writers raced"
    for segment in log.segments():
        assert segment.indexes_intact()
