"""``pysparklog console-consumer --group``: consuming as a group member, committing what was printed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from pysparklog import LogDirectory, TopicPartition
from pysparklog.offsets import OffsetStore
from tests.cli.test_console import consume, one_error_line, processed


def make_topic(log_dir: Path, records_per_partition: int) -> None:
    logs = LogDirectory(log_dir)
    logs.topics.create("events", 3)
    for p in range(3):
        values = [f"{p}:{i}".encode() for i in range(records_per_partition)]
        logs.partition("events", p).append_arrow(pa.table({"value": pa.array(values, pa.binary())}))


def test_a_group_resumes_where_its_last_run_stopped(tmp_path: Path) -> None:
    make_topic(tmp_path, 10)
    first = consume(tmp_path, "events", "--group", "printer", "--from-beginning", "--max-messages", "12")
    assert (first.returncode, first.stderr) == (0, processed(12))
    committed = OffsetStore(tmp_path).committed("printer")
    assert sum(o.offset for o in committed.values()) == 12  # what was printed, and nothing more
    second = consume(tmp_path, "events", "--group", "printer", "--from-beginning")
    assert (second.returncode, second.stderr) == (0, processed(18))
    printed = first.stdout.splitlines() + second.stdout.splitlines()
    assert sorted(printed) == sorted(f"{p}:{i}".encode() for p in range(3) for i in range(10))
    final = OffsetStore(tmp_path).committed("printer")
    assert {tp: o.offset for tp, o in final.items()} == {TopicPartition("events", p): 10 for p in range(3)}


def test_without_from_beginning_a_new_group_starts_at_the_log_end(tmp_path: Path) -> None:
    make_topic(tmp_path, 5)
    proc = consume(tmp_path, "events", "--group", "late")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", processed(0))
    assert {o.offset for o in OffsetStore(tmp_path).committed("late").values()} == {5}


def test_group_and_partition_are_exclusive(tmp_path: Path) -> None:
    make_topic(tmp_path, 1)
    proc = consume(tmp_path, "events", "--group", "g", "--partition", "0")
    assert one_error_line(proc, "console-consumer") == "Options group and partition cannot be specified together."
