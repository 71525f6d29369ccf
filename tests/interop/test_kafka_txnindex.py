"""Kafka's own DumpLogSegments on the ``.txnindex`` files the engine writes for aborted transactions.

The engine appends transactions of several producers (committed, aborted, one spanning a roll);
Kafka's tool must read every ``.txnindex`` it left, print what ``pysparklog dump-log`` prints, and
show the entries Kafka's rules give: the transaction's first offset, its ABORT marker's offset, and
the last stable offset then (the earliest transaction another producer had open, else the offset
after the marker).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pysparklog import BatchSettings, LogConfig, LogDirectory, PartitionLog
from pysparklog.storage.records.arrow_records import encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
from tests.cli.test_dump_log import assert_like_kafka
from tests.conftest import keyed_table
from tests.interop.kafka_tools import DumpLogSegments

pytestmark = pytest.mark.interop

T0 = 1_700_000_000_000
_ENTRY_LINE = re.compile(
    r"^version: (\d+) producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)$"
)


class _Writer:
    """Appends to one log as transactional producers and a plain one, keeping each producer's sequence."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def data(self, pid: int, n: int) -> None:
        sequence = self.sequences.get(pid, 0)
        self.sequences[pid] = sequence + n
        settings = BatchSettings(producer_id=pid, producer_epoch=0, base_sequence=sequence, transactional=True)
        self.log.append_arrow(keyed_table(n, start=self.log.log_end_offset), settings)

    def plain(self, n: int) -> None:
        self.log.append_arrow(keyed_table(n, start=self.log.log_end_offset))

    def end(self, pid: int, marker: ControlRecordType) -> None:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, transactional=True)
        self.log.append(encode_control_batch(*end_txn_marker(marker, 7), settings, now_ms=T0))


def test_kafka_reads_the_engines_txnindex_files(kafka_dump_log: DumpLogSegments, tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig()).partition("t", 0).local
    w = _Writer(log)
    w.plain(2)  # 0, 1
    w.data(5, 2)  # 2, 3
    w.data(6, 1)  # 4
    w.data(5, 1)  # 5
    w.end(5, ControlRecordType.ABORT)  # 6: producer 6's transaction (from 4) is still open
    w.end(6, ControlRecordType.COMMIT)  # 7: a commit has no entry
    w.data(7, 2)  # 8, 9
    log.roll()
    w.data(7, 1)  # 10
    w.data(8, 1)  # 11
    w.end(7, ControlRecordType.ABORT)  # 12: in the second segment; producer 8's transaction is open
    w.end(8, ControlRecordType.ABORT)  # 13: nothing else open
    w.data(9, 1)  # 14
    w.end(9, ControlRecordType.COMMIT)  # 15
    directory = Path(log.directory)
    files = sorted(directory.glob("*.txnindex"))
    assert [f.name for f in files] == ["00000000000000000000.txnindex", "00000000000000000010.txnindex"]

    out = assert_like_kafka(kafka_dump_log, files)
    entries: dict[str, list[tuple[int, ...]]] = {}
    current = ""
    for line in out.splitlines():
        if line.startswith("Dumping "):
            current = Path(line.removeprefix("Dumping ")).name
            entries[current] = []
        else:
            match = _ENTRY_LINE.match(line)
            assert match is not None, line
            entries[current].append(tuple(int(g) for g in match.groups()))
    assert entries == {
        "00000000000000000000.txnindex": [(0, 5, 2, 6, 4)],
        "00000000000000000010.txnindex": [(0, 7, 8, 12, 11), (0, 8, 11, 13, 14)],
    }
    # The logs holding the markers dump alike too, with the markers Kafka shows.
    logs = sorted(directory.glob("*.log"))
    log_out = assert_like_kafka(kafka_dump_log, logs, "--deep-iteration")
    assert log_out.count("endTxnMarker: ABORT coordinatorEpoch: 7") == 3
    assert log_out.count("endTxnMarker: COMMIT coordinatorEpoch: 7") == 2
