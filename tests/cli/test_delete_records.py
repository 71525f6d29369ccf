"""``pysparklog delete-records``: kafka-delete-records.sh's lines for raised, refused and unknown partitions, its
errors on bad offset files, and retention freeing the segments afterwards; run in a new process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pysparklog import BatchSettings, LogConfig, LogDirectory
from pysparklog.storage.retention import DeletionReason, run_retention
from tests.cli.test_dump_log import run_cli
from tests.conftest import keyed_table, read_all

HEADER = "Executing records delete operation\nRecords delete operation completed:\n"
OUT_OF_RANGE = (
    "error: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
    "The requested offset is not within the range of offsets maintained by the server."
)
UNKNOWN = (
    "error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
    "This server does not host this topic-partition."
)
POLICY = (
    "error: org.apache.kafka.common.errors.PolicyViolationException: "
    "Request parameters do not satisfy the configured policy."
)
FIRST_TS = 1_700_000_000_000


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """orders (3 partitions: 100 records over several segments, 30 records, none) and compacted (10 records)."""
    logs = LogDirectory(tmp_path / "logs", LogConfig(segment_bytes=3000))
    logs.topics.create("orders", 3)
    logs.partition("orders", 0).append_arrow(keyed_table(100), BatchSettings(max_batch_bytes=500))
    logs.partition("orders", 1).append_arrow(keyed_table(30))
    logs.topics.create("compacted", 1, {"cleanup.policy": "compact"})
    logs.partition("compacted", 0).append_arrow(keyed_table(10))
    return tmp_path / "logs"


def delete_records(log_dir: Path, document: Any) -> tuple[int, str, str]:
    offsets = log_dir.parent / "offsets.json"
    if isinstance(document, bytes):
        offsets.write_bytes(document)
    else:
        offsets.write_text(document if isinstance(document, str) else json.dumps(document))
    proc = run_cli("delete-records", "--log-dir", str(log_dir), "--offset-json-file", str(offsets))
    return proc.returncode, proc.stdout, proc.stderr


def partitions(*entries: tuple[str, int, int]) -> dict[str, Any]:
    return {"partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in entries], "version": 1}


def log_start(log_dir: Path, topic: str, partition: int) -> int:
    return LogDirectory(log_dir).partition(topic, partition).log_start_offset


def test_raises_the_log_start_offset_and_retention_frees_the_segments_below(log_dir: Path) -> None:
    assert delete_records(log_dir, partitions(("orders", 0, 42), ("orders", 1, -1))) == (
        0,
        HEADER + "partition: orders-0\tlow_watermark: 42\npartition: orders-1\tlow_watermark: 30\n",
        "",
    )
    log = LogDirectory(log_dir).partition("orders", 0)
    assert read_all(log).column("offset").to_pylist() == list(range(42, 100))
    assert read_all(LogDirectory(log_dir).partition("orders", 1)).num_rows == 0, "-1 is the high watermark"
    below = [s.base_offset for s in log.segment_infos() if s.next_base <= 42]
    assert below, "the fixture has whole segments below offset 42"
    result = run_retention(log, FIRST_TS)
    assert [(d.base_offset, d.reason) for d in result.deleted] == [
        (base, DeletionReason.LOG_START_OFFSET_BREACH) for base in below
    ]
    assert log.segments()[0].base_offset <= 42 < log.segment_infos()[0].next_base


def test_a_lower_offset_leaves_the_low_watermark_where_it_is(log_dir: Path) -> None:
    delete_records(log_dir, partitions(("orders", 0, 42)))
    assert delete_records(log_dir, partitions(("orders", 0, 10))) == (
        0,
        HEADER + "partition: orders-0\tlow_watermark: 42\n",
        "",
    )


def test_refused_partitions_get_kafkas_error_and_the_others_proceed(log_dir: Path) -> None:
    document = partitions(
        ("orders", 0, 101),  # above the high watermark (100)
        ("orders", 1, -2),
        ("orders", 3, 0),  # orders has 3 partitions
        ("nowhere", 0, 0),
        ("compacted", 0, 5),  # cleanup.policy=compact: delete-records is not allowed
        ("orders", 2, -1),  # the empty partition: its high watermark is 0
    )
    assert delete_records(log_dir, document) == (
        1,
        HEADER
        + f"partition: orders-0\t{OUT_OF_RANGE}\n"
        + f"partition: orders-1\t{OUT_OF_RANGE}\n"
        + f"partition: orders-3\t{UNKNOWN}\n"
        + f"partition: nowhere-0\t{UNKNOWN}\n"
        + f"partition: compacted-0\t{POLICY}\n"
        + "partition: orders-2\tlow_watermark: 0\n",
        "",
    )
    assert [log_start(log_dir, t, p) for t, p in (("orders", 0), ("orders", 1), ("compacted", 0))] == [0, 0, 0]


def test_an_empty_list_does_nothing(log_dir: Path) -> None:
    assert delete_records(log_dir, {"partitions": []}) == (0, HEADER, "")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "The input string is not a valid JSON"),
        (b"\xff\xfe{}", "The input string is not a valid JSON"),  # not UTF-8
        ({"partitions": [], "version": 2}, "Not supported version field value 2"),
        ({"version": 1}, "Missing partitions field"),
        ({"partitions": [{"topic": "orders", "offset": 3}]}, "No such field exists: `partition`"),
        (
            {"partitions": [{"topic": "orders", "partition": "0", "offset": 3}]},
            'Expected `partition` to be an integer, found "0"',
        ),
        (
            partitions(("orders", 0, 3), ("orders", 1, 3), ("orders", 0, 4)),
            "Offset json file contains duplicate topic partitions: orders-0",
        ),
    ],
)
def test_a_bad_offset_file_stops_before_anything_is_deleted(log_dir: Path, document: Any, message: str) -> None:
    assert delete_records(log_dir, document) == (1, "", f"pysparklog delete-records: error: {message}\n")
    assert log_start(log_dir, "orders", 0) == 0


def test_a_missing_offset_file_or_log_dir(log_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    proc = run_cli("delete-records", "--log-dir", str(log_dir), "--offset-json-file", str(missing))
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        1,
        "",
        f"pysparklog delete-records: error: No such file or directory: {missing}\n",
    )
    nowhere = tmp_path / "nowhere"
    assert delete_records(nowhere, partitions(("orders", 0, 1))) == (
        1,
        "",
        f"pysparklog delete-records: error: log directory {nowhere} does not exist or is not a directory\n",
    )
