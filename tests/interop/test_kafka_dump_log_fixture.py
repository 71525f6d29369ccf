"""Kafka's own DumpLogSegments on real broker-written files: proves the harness, pins the format.

These files were written by a real Kafka broker (see the fixture's README), so what the tool
prints here is the reference our own ``dump-log`` must reproduce, and the baseline our engine's
files are compared against.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.interop.kafka_tools import DumpLogSegments

pytestmark = pytest.mark.interop

BROKER_LOGDIR = Path(__file__).resolve().parents[1] / "fixtures" / "kafka-broker-logdir"
PATIENT_LOG = BROKER_LOGDIR / "TestTopicPatient-0" / "00000000000000000000.log"
OFFSETS_DIR = BROKER_LOGDIR / "__consumer_offsets-6"

PATIENT_BATCH_LINES = [
    "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 1769792698283 size: 1901 magic: 2 compresscodec: none crc: 3321075021 isvalid: true",
    "baseOffset: 1 lastOffset: 1 count: 1 baseSequence: 0 lastSequence: 0 producerId: 2 producerEpoch: 0 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 1901 CreateTime: 1769793423115 size: 976 magic: 2 compresscodec: none crc: 2459829793 isvalid: true",
    "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 producerId: 3 producerEpoch: 0 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 2877 CreateTime: 1769793578165 size: 394 magic: 2 compresscodec: none crc: 3160044214 isvalid: true",
]
# Each record line up to its payload (the payload is the value bytes decoded as UTF-8).
PATIENT_RECORD_PREFIXES = [
    "| offset: 0 CreateTime: 1769792698283 keySize: -1 valueSize: 1831 sequence: 0 headerKeys: [] payload: ",
    "| offset: 1 CreateTime: 1769793423115 keySize: -1 valueSize: 906 sequence: 0 headerKeys: [] payload: ",
    "| offset: 2 CreateTime: 1769793578165 keySize: -1 valueSize: 324 sequence: 0 headerKeys: [] payload: ",
]


def _assert_clean(stderr: str) -> None:
    """DumpLogSegments reports index mismatches, offset gaps and logging on stderr: expect none."""
    complaints = [line for line in stderr.splitlines() if not line.startswith("Picked up ")]  # JVM env notices
    assert complaints == [], stderr


def _copy(src_dir: Path, names: list[str], dst: Path) -> list[Path]:
    """Copy fixtures (read-only, shared) to tmp: the tool may create a missing sibling .index."""
    copies = [dst / name for name in names]
    for name, copy in zip(names, copies, strict=True):
        shutil.copyfile(src_dir / name, copy)
    return copies


def _field(line: str, name: str) -> int:
    """An integer ``name: value`` field of a DumpLogSegments line."""
    match = re.search(rf"(?:^|\s){name}: (-?\d+)", line)
    assert match is not None, f"no {name!r} in {line!r}"
    return int(match[1])


def _patient_value(data: bytes, batch_line: str, record_prefix: str) -> str:
    """The record's value as text. Each batch holds one record with no key and no headers, so the
    value is the batch's last bytes before the trailing header-count varint (0)."""
    end = _field(batch_line, "position") + _field(batch_line, "size") - 1
    assert data[end] == 0, "expected an empty header list at the end of the batch"
    return data[end - _field(record_prefix, "valueSize") : end].decode("utf-8")


def test_deep_iteration_print_data_log_on_broker_written_log(kafka_dump_log: DumpLogSegments) -> None:
    proc = kafka_dump_log([str(PATIENT_LOG)], "--deep-iteration", "--print-data-log")
    assert proc.returncode == 0, proc.stderr
    _assert_clean(proc.stderr)

    data = PATIENT_LOG.read_bytes()
    expected = f"Dumping {PATIENT_LOG}\nLog starting offset: 0\n"
    for batch_line, prefix in zip(PATIENT_BATCH_LINES, PATIENT_RECORD_PREFIXES, strict=True):
        expected += f"{batch_line}\n{prefix}{_patient_value(data, batch_line, prefix)}\n"
    assert proc.stdout == expected

    batches = [line for line in proc.stdout.splitlines() if line.startswith("baseOffset: ")]
    assert len(batches) == 3
    assert [_field(b, "producerId") for b in batches] == [1, 2, 3]
    assert all(b.endswith(" isvalid: true") for b in batches)
    assert [_field(b, "baseOffset") for b in batches] == [0, 1, 2]
    records = [line for line in proc.stdout.splitlines() if line.startswith("| offset: ")]
    assert [_field(r, "offset") for r in records] == [0, 1, 2]


def test_shallow_iteration_on_broker_written_log(kafka_dump_log: DumpLogSegments) -> None:
    proc = kafka_dump_log([str(PATIENT_LOG)])
    assert proc.returncode == 0, proc.stderr
    _assert_clean(proc.stderr)
    assert proc.stdout == "\n".join([f"Dumping {PATIENT_LOG}", "Log starting offset: 0", *PATIENT_BATCH_LINES, ""])


@pytest.mark.parametrize(
    ("name", "extra_args", "expected_body"),
    [
        ("00000000000000000000.index", (), ["offset: 3 position: 4730", "offset: 7 position: 9571"]),
        ("00000000000000000000.index", ("--index-sanity-check",), ["{path} passed sanity check."]),
        ("00000000000000000000.index", ("--verify-index-only",), []),
        (
            "00000000000000000000.timeindex",
            (),
            [
                "timestamp: 1769791783399 offset: 3",
                "timestamp: 1769792518093 offset: 7",
                "timestamp: 1769793578176 offset: 12",
            ],
        ),
        ("00000000000000000000.timeindex", ("--index-sanity-check",), ["{path} passed sanity check."]),
        ("00000000000000000000.timeindex", ("--verify-index-only",), []),
        ("00000000000000000013.snapshot", (), []),  # empty producer-state snapshot: no entries
    ],
)
def test_consumer_offsets_index_files(
    kafka_dump_log: DumpLogSegments, tmp_path: Path, name: str, extra_args: tuple[str, ...], expected_body: list[str]
) -> None:
    names = ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex", name]
    _copy(OFFSETS_DIR, sorted(set(names)), tmp_path)
    target = tmp_path / name
    proc = kafka_dump_log([str(target)], *extra_args)
    assert proc.returncode == 0, proc.stderr
    # --verify-index-only prints nothing on success: mismatches would go to stderr.
    _assert_clean(proc.stderr)
    lines = [f"Dumping {target}", *(line.format(path=target) for line in expected_body)]
    assert proc.stdout == "".join(f"{line}\n" for line in lines)


def test_detects_a_corrupted_batch(kafka_dump_log: DumpLogSegments, tmp_path: Path) -> None:
    """Negative control: the harness must be able to fail, or it proves nothing about our files."""
    (copy,) = _copy(PATIENT_LOG.parent, [PATIENT_LOG.name], tmp_path)
    data = bytearray(copy.read_bytes())
    data[1901 + 100] ^= 0xFF  # a byte inside batch 1's records, covered by its CRC-32C
    copy.write_bytes(bytes(data))
    proc = kafka_dump_log([str(copy)])
    assert proc.returncode == 0, proc.stderr
    assert [line.endswith("isvalid: true") for line in proc.stdout.splitlines()[2:]] == [True, False, True]
