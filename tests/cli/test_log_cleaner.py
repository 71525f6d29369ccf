"""``pysparklog log-cleaner``: one pass or a loop until SIGTERM, retention and compaction, run in new processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import BatchSettings, LogConfig, LogDirectory
from tests.cli.test_dump_log import CLI, run_cli
from tests.conftest import read_all

OLD = 1_700_000_000_000  # long past the default retention.ms of a week


def records(keys: list[bytes], ts: int = OLD) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array([key + b"@" + str(i).encode() for i, key in enumerate(keys)], pa.binary()),
            "timestamp": pa.array(range(ts, ts + len(keys)), pa.int64()),
        }
    )


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """users (compacted, 60 records over 6 keys) and events (deleted by retention.ms, an old segment)."""
    logs = LogDirectory(tmp_path / "logs", LogConfig(segment_bytes=2000))
    logs.topics.create("users", 1, {"cleanup.policy": "compact"})
    users = logs.partition("users", 0)
    users.append_arrow(records([f"u{i % 6}".encode() for i in range(60)]), BatchSettings(max_batch_bytes=400))
    users.roll()
    logs.topics.create("events", 1, {"cleanup.policy": "delete"})
    events = logs.partition("events", 0)
    events.append_arrow(records([b"e"] * 10))
    events.roll()
    now = int(time.time() * 1000)
    events.append_arrow(records([b"e"] * 3, ts=now))
    return tmp_path / "logs"


def keys_and_offsets(log_dir: Path, topic: str) -> list[tuple[int, bytes]]:
    table = read_all(LogDirectory(log_dir).partition(topic, 0))
    return list(zip(table.column("offset").to_pylist(), table.column("key").to_pylist(), strict=True))


def segment_size(log_dir: Path, topic: str) -> int:
    return (log_dir / f"{topic}-0" / "00000000000000000000.log").stat().st_size


def test_one_pass_retains_and_compacts(log_dir: Path) -> None:
    size_before = segment_size(log_dir, "users")
    proc = run_cli("log-cleaner", "--log-dir", str(log_dir), "--once")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == [
        "retention events-0: deleted 1 segment (retention time breach), log start offset 10",
        f"compaction users-0: offsets [0, 60): 1 segment, 60 records, {size_before} bytes "
        f"-> 1, 6 records, {segment_size(log_dir, 'users')} bytes",
    ]
    assert keys_and_offsets(log_dir, "users") == [(54 + i, f"u{i}".encode()) for i in range(6)]
    assert [o for o, _ in keys_and_offsets(log_dir, "events")] == [10, 11, 12]
    # Nothing left to do: a second pass prints nothing.
    again = run_cli("log-cleaner", "--log-dir", str(log_dir))
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_the_log_dir_comes_from_the_environment_and_topic_narrows_the_pass(log_dir: Path) -> None:
    env = {**os.environ, "PYSPARKLOG_LOG_DIR": str(log_dir)}
    proc = subprocess.run([*CLI, "log-cleaner", "--topic", "users"], capture_output=True, text=True, env=env)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["compaction users-0"]
    assert len(keys_and_offsets(log_dir, "events")) == 13, "events was not part of the pass"


def test_a_loop_runs_passes_until_sigterm(log_dir: Path) -> None:
    loop = subprocess.Popen(
        [*CLI, "log-cleaner", "--log-dir", str(log_dir), "--topic", "users", "--interval-ms", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert loop.stdout is not None
        assert loop.stdout.readline().startswith("compaction users-0: offsets [0, 60)")
        # New dirty data: a later pass of the same process compacts it.
        users = LogDirectory(log_dir).partition("users", 0)
        users.append_arrow(records([f"u{i % 6}".encode() for i in range(30)]))
        users.roll()
        assert loop.stdout.readline().startswith("compaction users-0: offsets [60, 90)")
        loop.send_signal(signal.SIGTERM)
        out, err = loop.communicate(timeout=60)
    finally:
        loop.kill()
    assert (loop.returncode, out, err) == (0, "", "")
    assert keys_and_offsets(log_dir, "users") == [(84 + i, f"u{i}".encode()) for i in range(6)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval-ms", "0"], "argument --interval-ms: '0' is not a positive number of milliseconds"),
        (["--once", "--interval-ms", "5"], "argument --interval-ms: not allowed with argument --once"),
    ],
)
def test_usage_errors(log_dir: Path, args: list[str], message: str) -> None:
    proc = run_cli("log-cleaner", "--log-dir", str(log_dir), *args)
    assert proc.returncode == 2
    assert proc.stderr == f"pysparklog log-cleaner: error: {message}\n"


def test_a_missing_log_dir_is_an_error(tmp_path: Path) -> None:
    proc = run_cli("log-cleaner", "--log-dir", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert (
        proc.stderr
        == f"pysparklog log-cleaner: error: log directory {tmp_path / 'nope'} does not exist or is not a directory\n"
    )


def test_a_corrupt_partition_is_reported_and_the_pass_goes_on(log_dir: Path) -> None:
    logs = LogDirectory(log_dir)
    logs.topics.create("broken", 1, {"cleanup.policy": "compact"})
    broken = logs.partition("broken", 0)
    broken.append_arrow(records([b"b"] * 20), BatchSettings(max_batch_bytes=200))
    broken.roll()
    segment = log_dir / "broken-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF  # inside the first batch: its CRC no longer matches
    segment.write_bytes(bytes(data))
    proc = run_cli("log-cleaner", "--log-dir", str(log_dir))
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"pysparklog log-cleaner: error: broken-0: CorruptRecordError: file {segment}")
    assert "CRC-32C mismatch" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["retention events-0", "compaction users-0"]
    assert segment.read_bytes() == bytes(data), "the corrupt partition is left as it was"


def test_a_terminal_gets_a_progress_bar_and_a_pipe_does_not(log_dir: Path) -> None:
    leader, follower = os.openpty()
    try:
        proc = subprocess.run(
            [*CLI, "log-cleaner", "--log-dir", str(log_dir), "--once"],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
        )
        os.close(follower)
        on_terminal = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            on_terminal += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert b"\rCleaning " in on_terminal and re.search(rb"\r +\r$", on_terminal), "drawn, then erased"
    piped = run_cli("log-cleaner", "--log-dir", str(log_dir), "--once")
    assert "Cleaning" not in piped.stderr
