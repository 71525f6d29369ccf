"""Transactions on the read side: the last stable offset, ``.txnindex`` entries of aborted transactions,
and read_committed reads, checked against a model of Kafka's rules (``ProducerStateManager``,
``UnifiedLog.collectAbortedTransactions``, the consumer's ``CompletedFetch``)."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest

from pysparklog import BatchSettings, InvalidConfigError, LogConfig, LogDirectory, PartitionLog
from pysparklog.storage import checkpoints
from pysparklog.storage.cleaner import clean_log
from pysparklog.storage.index import TransactionIndex
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.log_state import STATE_FILE, LogState
from pysparklog.storage.records.arrow_records import encode_arrow, encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
from pysparklog.storage.transaction_index import AbortedTxn
from tests.conftest import keyed_table, read_all

T0 = 1_700_000_000_000
DAY = 24 * 60 * 60 * 1000
COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def open_log(path: Path, **config: object) -> PartitionLog:
    return LogDirectory(path, LogConfig(**config)).partition("t", 0).local  # type: ignore[arg-type]


class Producers:
    """Transactional producers writing to one log: their data batches and end markers, as raw bytes or appends."""

    def __init__(self) -> None:
        self.sequences: dict[int, int] = {}

    def data(self, pid: int, n: int, start: int = 0) -> bytes:
        sequence = self.sequences.get(pid, 0)
        self.sequences[pid] = sequence + n
        settings = BatchSettings(producer_id=pid, producer_epoch=0, base_sequence=sequence, transactional=True)
        (encoded,) = encode_arrow(keyed_table(n, start=start, value_size=40), settings)
        return encoded.data.tobytes()

    @staticmethod
    def marker(pid: int, kind: ControlRecordType) -> bytes:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, transactional=True)
        return encode_control_batch(*end_txn_marker(kind, 3), settings, now_ms=T0).data.tobytes()


def plain(n: int, start: int = 0) -> bytes:
    (encoded,) = encode_arrow(keyed_table(n, start=start, value_size=40))
    return encoded.data.tobytes()


def at_offset(offset: int, batch: bytes) -> bytes:
    """The batch as a writer puts it in the log: with its base offset."""
    return struct.pack(">q", offset) + batch[8:]


def offsets(log: Log, *args: int | None, committed: bool = False) -> list[int]:
    level = "read_committed" if committed else "read_uncommitted"
    found: list[int] = read_all(log, *args, isolation_level=level).column("offset").to_pylist()
    return found


def txn_index(log: Log, base: int) -> list[AbortedTxn]:
    index = log.segment(base).indexes.transaction_index()
    rows = zip(index.producer_ids, index.first_offsets, index.last_offsets, index.last_stable_offsets, strict=True)
    return [AbortedTxn(*(int(v) for v in row)) for row in rows]


def all_txn_index_bytes(log: Log) -> dict[str, bytes]:
    return {
        name: (Path(log.directory) / name).read_bytes()
        for name in os.listdir(log.directory)
        if name.endswith(".txnindex")
    }


# -- a model of Kafka's rules ------------------------------------------------------------------------


@dataclass
class Model:
    """What the log must hold: every offset with its producer and kind, the open transactions, the aborts."""

    records: list[tuple[int, int, bool]] = field(default_factory=list)  # (offset, producer id or -1, transactional)
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset of its open transaction
    aborted: list[AbortedTxn] = field(default_factory=list)
    end: int = 0

    def data(self, pid: int, n: int) -> None:
        self.open.setdefault(pid, self.end)
        self.records += [(self.end + i, pid, True) for i in range(n)]
        self.end += n

    def plain(self, n: int) -> None:
        self.records += [(self.end + i, -1, False) for i in range(n)]
        self.end += n

    def marker(self, pid: int, kind: ControlRecordType) -> None:
        first = self.open.pop(pid, None)
        if first is not None and kind == ABORT:
            # ProducerStateManager.lastStableOffset: the earliest transaction another producer has open.
            self.aborted.append(AbortedTxn(pid, first, self.end, min(self.open.values(), default=self.end + 1)))
        self.end += 1

    @property
    def last_stable_offset(self) -> int:
        return min(self.open.values(), default=self.end)

    def committed(self, start: int, end: int) -> list[int]:
        upper = min(end, self.last_stable_offset)
        return [
            offset
            for offset, pid, transactional in self.records
            if start <= offset < upper
            and not (
                transactional
                and any(t.producer_id == pid and t.first_offset <= offset <= t.last_offset for t in self.aborted)
            )
        ]


def check_against(log: Log, model: Model, rng: random.Random) -> None:
    assert log.log_end_offset == model.end
    assert log.last_stable_offset == model.last_stable_offset
    assert offsets(log, committed=True) == model.committed(0, model.end)
    for _ in range(3):
        start = rng.randrange(model.end + 1)
        end = rng.randrange(start, model.end + 1)
        assert offsets(log, start, end, committed=True) == model.committed(start, end)
        overlapping = [t for t in model.aborted if t.last_offset >= start and t.first_offset < end]
        assert log.aborted_transactions(start, end) == (overlapping if start < end else [])
    # Each entry sits in the segment of its marker, and the segments hold them all, in marker order.
    bases = [s.base_offset for s in log.segments()]
    found = []
    for base, next_base in zip(bases, [*bases[1:], model.end + 1], strict=True):
        entries = txn_index(log, base)
        assert all(base <= t.last_offset < next_base for t in entries)
        found += entries
    assert found == model.aborted


@pytest.mark.parametrize("seed", range(6))
def test_interleaved_producers_match_kafkas_rules(tmp_path: Path, seed: int) -> None:
    """Random appends of four transactional producers and plain records, some appends holding several
    producers' batches and markers at once, with rolls in the middle of appends."""
    rng = random.Random(seed)
    log = open_log(tmp_path, segment_bytes=1500)
    producers, model = Producers(), Model()
    for step in range(60):
        parts = []
        for _ in range(rng.choice([1, 1, 1, 3])):
            pid = rng.randrange(4)
            roll = rng.random()
            if roll < 0.45:
                n = rng.randrange(1, 4)
                parts.append(producers.data(pid, n, model.end))
                model.data(pid, n)
            elif roll < 0.75:
                kind = rng.choice([COMMIT, ABORT])
                parts.append(producers.marker(pid, kind))
                model.marker(pid, kind)
            else:
                n = rng.randrange(1, 3)
                parts.append(plain(n, model.end))
                model.plain(n)
        info = log.append(b"".join(parts))
        assert info.last_offset == model.end - 1
        if step % 10 == 9:
            check_against(log, model, rng)
    assert len(log.segments()) > 3 and len(model.aborted) > 3
    check_against(log, model, rng)
    assert offsets(log) == [offset for offset, _, _ in model.records]  # read_uncommitted sees every record

    # Recovery from nothing (no state, no checkpoint, no .txnindex) rebuilds the same files.
    written = all_txn_index_bytes(log)
    log.close()
    for name in [*written, STATE_FILE]:
        os.remove(tmp_path / "t-0" / name)
    os.remove(tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT)
    recovered = open_log(tmp_path, segment_bytes=1500)
    recovered.recover()
    assert all_txn_index_bytes(recovered) == written
    check_against(recovered, model, rng)


# -- the last stable offset --------------------------------------------------------------------------


def test_an_open_transaction_holds_the_last_stable_offset_and_its_end_releases_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    assert log.last_stable_offset == 0
    log.append(plain(3))
    assert log.last_stable_offset == 3 == log.log_end_offset
    log.append(producers.data(5, 2))  # 3, 4
    log.append(plain(2))  # 5, 6: not transactional, but after the open transaction
    assert (log.last_stable_offset, log.log_end_offset) == (3, 7)
    assert offsets(log, committed=True) == [0, 1, 2]
    assert offsets(log, 1, 6, committed=True) == [1, 2]
    assert offsets(log, 3, committed=True) == []  # at the last stable offset: nothing yet
    assert offsets(log) == list(range(7))
    log.append(producers.marker(5, COMMIT))  # 7
    assert log.last_stable_offset == 8 == log.log_end_offset
    assert offsets(log, committed=True) == [0, 1, 2, 3, 4, 5, 6]
    assert set(all_txn_index_bytes(log).values()) == {b""}, "a commit writes no entry"


def test_an_abort_writes_kafkas_txnindex_entry_and_read_committed_skips_its_records(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(plain(2))  # 0, 1
    log.append(producers.data(5, 2))  # 2, 3
    log.append(producers.data(6, 1))  # 4
    log.append(producers.data(5, 1))  # 5
    path = Path(log.segments()[0].txn_index_path)
    assert path.read_bytes() == b"", "created with the segment, empty until a transaction is aborted in it"
    log.append(producers.marker(5, ABORT))  # 6: producer 6's transaction, from 4, is still open
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 5, 2, 6, 4)
    assert log.last_stable_offset == 4
    assert offsets(log, committed=True) == [0, 1]
    log.append(producers.marker(6, COMMIT))  # 7
    log.append(producers.data(7, 2))  # 8, 9
    log.append(producers.marker(7, ABORT))  # 10: nothing else open, so the entry's LSO is 11
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 5, 2, 6, 4) + struct.pack(">hqqqq", 0, 7, 8, 10, 11)
    assert log.last_stable_offset == 11
    assert offsets(log, committed=True) == [0, 1, 4]
    assert offsets(log) == [0, 1, 2, 3, 4, 5, 8, 9]
    assert log.aborted_transactions(0, 11) == [AbortedTxn(5, 2, 6, 4), AbortedTxn(7, 8, 10, 11)]
    assert log.aborted_transactions(7, 9) == [AbortedTxn(7, 8, 10, 11)]
    # A marker of a producer without an open transaction completes nothing (Kafka writes no entry).
    log.append(producers.marker(7, ABORT))
    assert len(TransactionIndex.parse(path.read_bytes(), str(path))) == 2


def test_an_unknown_isolation_level_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(plain(1))
    with pytest.raises(InvalidConfigError, match="read_committed"):
        list(log.read_arrow(isolation_level="READ_COMMITTED"))


def test_a_transaction_spanning_rolls_is_indexed_in_the_segment_of_its_marker(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(producers.data(5, 2))  # 0, 1
    log.append(plain(2))  # 2, 3
    log.roll()
    assert log.last_stable_offset == 0, "a roll keeps the open transaction"
    log.append(producers.data(5, 1))  # 4
    log.roll()
    log.append(plain(1))  # 5
    log.append(producers.marker(5, ABORT))  # 6
    bases = [s.base_offset for s in log.segments()]
    assert bases == [0, 4, 5]
    assert [txn_index(log, b) for b in bases] == [[], [], [AbortedTxn(5, 0, 6, 7)]]
    assert offsets(log, committed=True) == [2, 3, 5]
    assert offsets(log, 1, 5, committed=True) == [2, 3], "found from a segment before the marker's"
    assert offsets(log, 4, committed=True) == [5]


def test_one_append_rolling_in_the_middle_puts_each_entry_in_its_markers_segment(tmp_path: Path) -> None:
    producers = Producers()
    parts = []
    for i in range(6):
        parts += [producers.data(i, 5, 10 * i), producers.marker(i, ABORT if i % 2 else COMMIT)]
    log = open_log(tmp_path, segment_bytes=700)
    log.append(b"".join(parts))
    assert sum(bool(txn_index(log, s.base_offset)) for s in log.segments()) == 3, "entries in three segments"
    model = Model()
    for i in range(6):
        model.data(i, 5)
        model.marker(i, ABORT if i % 2 else COMMIT)
    check_against(log, model, random.Random(0))
    # The same batches appended one by one leave the same files.
    separate = open_log(tmp_path / "separate", segment_bytes=700)
    for part in parts:
        separate.append(part)
    assert all_txn_index_bytes(separate) == all_txn_index_bytes(log)


def _aborts_in_three_segments(path: Path) -> tuple[PartitionLog, Model]:
    """A log whose first two segments each hold an aborted and a committed transaction, the active one an abort."""
    log = open_log(path)
    producers, model = Producers(), Model()
    for segment in range(3):
        for pid, kind in ((10 + segment, ABORT), (20 + segment, COMMIT)):
            log.append(producers.data(pid, 3, model.end))
            model.data(pid, 3)
            log.append(plain(1, model.end))
            model.plain(1)
            log.append(producers.marker(pid, kind))
            model.marker(pid, kind)
        if segment < 2:
            log.roll()
    assert [len(txn_index(log, s.base_offset)) for s in log.segments()] == [1, 1, 1]
    return log, model


def _flip_bit(position: int, bit: int) -> Callable[[Path], None]:
    """Damage that flips one bit of a file, past every check of the file's own bytes."""

    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[position] ^= 1 << bit
        path.write_bytes(bytes(data))

    return flip


# AbortedTxn entry: version (bytes 0-1), producer id (2-9), first offset (10-17), last offset (18-25) and
# last stable offset (26-33), big-endian.
_TXN_INDEX_DAMAGE: dict[str, Callable[[Path], object]] = {
    "deleted": lambda path: path.unlink(),
    "a flipped producer id": _flip_bit(9, 0),
    "a flipped first offset": _flip_bit(17, 1),
    "a flipped last stable offset": _flip_bit(32, 1),
    "cut inside its entry": lambda path: path.write_bytes(path.read_bytes()[:20]),
    "an unknown version": lambda path: path.write_bytes(b"\x00\x07" + path.read_bytes()[2:]),
    "a repeated entry": lambda path: path.write_bytes(path.read_bytes() * 2),
}


@pytest.mark.parametrize("damage", list(_TXN_INDEX_DAMAGE))
@pytest.mark.parametrize("segment", [0, 2], ids=["sealed segment", "active segment"])
def test_a_lost_or_damaged_txnindex_is_rebuilt_before_read_committed_answers(
    tmp_path: Path, damage: str, segment: int
) -> None:
    log, model = _aborts_in_three_segments(tmp_path)
    written = all_txn_index_bytes(log)
    victim = Path(log.segments()[segment].txn_index_path)
    _TXN_INDEX_DAMAGE[damage](victim)
    reader = open_log(tmp_path)  # another process
    assert offsets(reader, committed=True) == model.committed(0, model.end)
    assert all_txn_index_bytes(log) == written, "rebuilt as the writer wrote it"
    _TXN_INDEX_DAMAGE[damage](victim)
    assert log.aborted_transactions(0, model.end) == model.aborted


def test_a_writer_rebuilds_the_active_txnindex_before_adding_to_it(tmp_path: Path) -> None:
    log, model = _aborts_in_three_segments(tmp_path)
    producers = Producers()
    active = Path(log.segments()[-1].txn_index_path)
    active.unlink()
    log.append(producers.data(30, 2, model.end))
    model.data(30, 2)
    log.append(producers.marker(30, ABORT))
    model.marker(30, ABORT)
    assert txn_index(log, log.segments()[-1].base_offset) == model.aborted[-2:], "the lost entry and the new one"
    check_against(open_log(tmp_path), model, random.Random(0))


def test_where_txnindex_files_start_is_recorded_by_the_next_writer_of_an_older_log(tmp_path: Path) -> None:
    """Before version 2 of the state record a segment had a .txnindex only once a transaction was aborted in
    it: there a missing file means none, and the next writer records from which segment on every one has it."""
    log, model = _aborts_in_three_segments(tmp_path)
    for segment in log.segments():
        if not txn_index(log, segment.base_offset):
            os.remove(segment.txn_index_path)
    state_path = Path(log.directory) / STATE_FILE
    state = LogState.decode(state_path.read_bytes())
    assert state is not None and state.txn_indexes_from == 0
    fields = [getattr(state, f) for f in LogState.__slots__[:9]]
    body = struct.pack(">4sh16sqqqqqqqqqq", b"PSLG", 1, state.boot_id, *fields, state.first_unstable_offset)
    state_path.write_bytes(body + struct.pack(">I", crc32c.crc32c(body)))
    os.remove(log.segments()[0].txn_index_path)  # lost, but nothing says it existed: read as Kafka reads it
    reader = open_log(tmp_path)
    assert reader.aborted_transactions(0, model.end) == model.aborted[1:]
    reader.append(plain(1, model.end))
    upgraded = LogState.decode(state_path.read_bytes())
    active_base = log.segments()[-1].base_offset
    assert upgraded is not None and upgraded.txn_indexes_from == active_base


# -- other processes, crashes, older records ---------------------------------------------------------


def test_another_process_sees_the_last_stable_offset_and_may_end_the_transaction(tmp_path: Path) -> None:
    writer, reader = open_log(tmp_path), open_log(tmp_path)  # as two processes would
    producers = Producers()
    writer.append(plain(2))
    assert reader.last_stable_offset == 2
    writer.append(producers.data(5, 3))  # 2..4
    writer.append(plain(1))  # 5
    assert reader.last_stable_offset == 2
    assert offsets(reader, committed=True) == [0, 1]
    reader.append(producers.marker(5, ABORT))  # 6: the other handle ends the writer's transaction
    assert writer.last_stable_offset == 7
    assert offsets(writer, committed=True) == [0, 1, 5]
    writer.append(producers.data(6, 1))  # 7: the writer's state was brought forward over the abort
    assert reader.last_stable_offset == 7
    assert txn_index(reader, 0) == [AbortedTxn(5, 2, 6, 7)]


def test_a_marker_cut_by_a_crash_is_reindexed_by_the_next_writer(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(producers.data(5, 2))  # 0, 1
    segment = log.segments()[-1]
    # A writer died after writing its marker and half of its .txnindex entry, before acknowledging.
    with open(segment.log_path, "ab") as f:
        f.write(at_offset(2, producers.marker(5, ABORT)))
    with open(segment.txn_index_path, "wb") as f:
        f.write(struct.pack(">hqqqq", 0, 5, 0, 2, 3)[:20])
    assert log.last_stable_offset == 0 and log.aborted_transactions(0, 3) == []
    writer = open_log(tmp_path)
    writer.append(plain(1))  # recovery keeps the whole marker (offset 2), as Kafka's does
    assert Path(segment.txn_index_path).read_bytes() == struct.pack(">hqqqq", 0, 5, 0, 2, 3)
    assert (log.last_stable_offset, log.log_end_offset) == (4, 4)
    assert offsets(log, committed=True) == [3]


def test_a_torn_marker_is_cut_and_its_transaction_stays_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(producers.data(5, 2))
    segment = log.segments()[-1]
    marker = at_offset(2, producers.marker(5, ABORT))
    with open(segment.log_path, "ab") as f:
        f.write(marker[: len(marker) - 3])
    with open(segment.txn_index_path, "wb") as f:
        f.write(struct.pack(">hqqqq", 0, 5, 0, 2, 3))
    open_log(tmp_path).append(plain(1))  # 2
    assert Path(segment.txn_index_path).read_bytes() == b"", "emptied, as Kafka's recovery leaves it"
    assert log.last_stable_offset == 0
    assert offsets(log) == [0, 1, 2]


def test_a_version_0_state_record_is_read_and_upgraded(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(plain(1))
    log.append(producers.data(5, 2))  # 1, 2
    state_path = Path(log.directory) / STATE_FILE
    state = LogState.decode(state_path.read_bytes())
    assert state is not None and state.first_unstable_offset == 1
    # What an older pysparklog wrote: the record up to the segments generation, and its CRC.
    fields = [getattr(state, f) for f in LogState.__slots__[:9]]
    body = struct.pack(">4sh16sqqqqqqqqq", b"PSLG", 0, state.boot_id, *fields)
    state_path.write_bytes(body + struct.pack(">I", crc32c.crc32c(body)))
    reader = open_log(tmp_path)
    assert reader.last_stable_offset == 1, "derived from the producer state"
    assert offsets(reader, committed=True) == [0]
    reader.append(plain(1))  # the next writer records it
    upgraded = LogState.decode(state_path.read_bytes())
    assert upgraded is not None and upgraded.first_unstable_offset == 1 and len(state_path.read_bytes()) == 114


def test_a_log_without_a_state_record_derives_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(plain(2))
    log.append(producers.data(5, 1))  # 2
    log.roll()
    log.append(producers.data(6, 1))  # 3
    log.append(producers.marker(5, ABORT))  # 4
    log.close()
    os.remove(tmp_path / "t-0" / STATE_FILE)  # as a broker leaves a log: nothing of pysparklog's
    reader = open_log(tmp_path)
    assert reader.last_stable_offset == 3
    assert offsets(reader, committed=True) == [0, 1]


# -- retention and compaction ------------------------------------------------------------------------


def test_retention_takes_the_txnindex_along_and_the_log_start_bounds_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producers = Producers()
    log.append(producers.data(5, 2))  # 0, 1
    log.append(producers.marker(5, ABORT))  # 2
    log.roll()
    log.append(producers.data(6, 2))  # 3, 4
    log.roll()
    log.append(plain(2))  # 5, 6
    first = log.segments()[0]
    log.delete_segments([0])
    assert not os.path.exists(first.txn_index_path) and os.path.exists(first.txn_index_path + ".deleted")
    assert log.remove_deleted_files(now_ms=2**62) == 4
    assert log.last_stable_offset == 3 and offsets(log, committed=True) == []
    log.raise_log_start_offset(4)  # delete-records past the open transaction's start
    assert log.last_stable_offset == 4
    assert offsets(log, committed=True) == []
    log.append(producers.marker(6, COMMIT))  # 7
    assert offsets(log, committed=True) == [4, 5, 6]


def _keyed(keys: list[bytes], values: list[bytes], ts: int) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "timestamp": pa.array([ts] * len(keys), pa.int64()),
        }
    )


@pytest.mark.parametrize("txnindex", ["kept", "lost"])
def test_compaction_keeps_the_entries_of_aborted_transactions_with_batches_left(tmp_path: Path, txnindex: str) -> None:
    now = T0 + 10 * DAY  # the producers have expired: no empty batch is kept for them
    config = {"cleanup_policy": frozenset({"compact"}), "min_cleanable_dirty_ratio": 0.0, "delete_retention_ms": 0}
    log = open_log(tmp_path, **config)

    def txn(pid: int, sequence: int, key: bytes, value: bytes) -> None:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, base_sequence=sequence, transactional=True)
        log.append_arrow(_keyed([key], [value], T0), settings)

    def end(pid: int, kind: ControlRecordType) -> None:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, transactional=True)
        log.append(encode_control_batch(*end_txn_marker(kind, 0), settings, now_ms=T0))

    log.append_arrow(_keyed([b"a", b"b"], [b"a0", b"b0"], T0))  # 0, 1
    txn(5, 0, b"a", b"aborted")  # 2
    txn(6, 0, b"b", b"committed")  # 3
    end(5, ABORT)  # 4
    end(6, COMMIT)  # 5
    log.roll()
    log.append_arrow(_keyed([b"c"], [b"c0"], T0))  # 6
    before = read_all(log, isolation_level="read_committed").column("value").to_pylist()
    assert before == [b"a0", b"b0", b"committed", b"c0"]
    assert txn_index(log, 0) == [AbortedTxn(5, 2, 4, 3)]
    if txnindex == "lost":  # the cleaner rebuilds it before it decides what the cleaned segment keeps
        os.remove(log.segments()[0].txn_index_path)

    assert clean_log(log, now).cleaned
    # The aborted batch is gone; its entry stays with the cleaned segment while the round saw a batch of it.
    assert txn_index(log, 0) == [AbortedTxn(5, 2, 4, 3)]
    assert [(r["key"], r["value"]) for r in read_all(log, isolation_level="read_committed").to_pylist()] == [
        (b"a", b"a0"),
        (b"b", b"committed"),
        (b"c", b"c0"),
    ]
    log.roll()
    assert clean_log(log, now).cleaned
    assert txn_index(log, 0) == [], "no batch of the transaction is left: the entry goes"
    assert not any(name.endswith((".cleaned", ".swap")) for name in os.listdir(log.directory))
    assert read_all(log, isolation_level="read_committed").column("value").to_pylist() == [b"a0", b"committed", b"c0"]
