"""Damaged objects of a log directory on an object store: a seeded fuzz test of every kind of object a partition
there holds, and of the local replica's record.

A partition on the loopback S3 server, with plain, idempotent and transactional appends (one transaction
aborted), sealed twice and followed by more commits (one of them an exactly-once sink's staged batches), is
copied to a prefix of its own per mutant, one object of one kind damaged (a bit flipped, bytes overwritten with
garbage, cut short, garbage appended, deleted), and read by a new replica: with ``read_uncommitted`` and
``read_committed``, and by timestamp. Every mutant must give the records that were written or a typed error
(``PySparkLogError``), within ``TIMEOUT_S`` seconds; never another exception, never other records (but for the
chain's last commit deleted: the log as it was before that append). Damage to a cache (a replica's record) must
not even give an error.

``PYSPARKLOG_FUZZ_SEED`` and ``PYSPARKLOG_OBJECT_FUZZ_MUTANTS`` (default 40) change the run.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pyarrow as pa
import pytest

from pysparklog import BatchSettings, LogConfig, LogDirectory
from pysparklog.errors import PySparkLogError
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.io import Storage
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.storage.objects.log import APPLIED_FILE, ObjectPartitionLog
from pysparklog.storage.objects.staged import StagedWrites, commit_staged
from pysparklog.storage.objects.topic_commit import SinkMark
from pysparklog.storage.records.arrow_records import encode_arrow, encode_control_batch
from pysparklog.storage.records.default_records import ControlRecordType, end_txn_marker
from tests.conftest import BUCKET, keyed_table, read_all
from tests.fuzz.runner import DEFAULT_SEED

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("PYSPARKLOG_FUZZ_SEED", DEFAULT_SEED))
MUTANTS = int(os.environ.get("PYSPARKLOG_OBJECT_FUZZ_MUTANTS", 40))
TIMEOUT_S = 30
CONFIG = LogConfig(segment_bytes=1500)
#: Kinds of damaged object, by what their name says; "replica-record" is the local ``commit.applied``.
KINDS = (
    "commit",
    "staged",
    "topic-seal",
    "manifest",
    "sealed-log",
    "sealed-index",
    "sealed-timeindex",
    "sealed-snapshot",
    "replica-record",
)
#: Kinds whose damage must never show: a cache.
HARMLESS = ("replica-record",)
OPERATIONS = ("bit-flip", "garbage", "truncate", "append", "delete")


@dataclass(frozen=True)
class Truth:
    """What a reader must get from the undamaged partition."""

    uncommitted: list[tuple[int, bytes]]
    committed: list[tuple[int, bytes]]
    by_time: tuple[int, int] | None


def _open(storage: Storage, cache: Path) -> ObjectPartitionLog:
    return ObjectPartitionLog(storage, "t", 0, CONFIG, cache_dir=str(cache), seal_commits=10**9)


def _read(log: ObjectPartitionLog) -> Truth:
    def rows(isolation: str) -> list[tuple[int, bytes]]:
        table = read_all(log, isolation_level=isolation)
        if not table.num_rows:
            return []
        return list(zip(table.column("offset").to_pylist(), table.column("value").to_pylist(), strict=True))

    return Truth(rows("read_uncommitted"), rows("read_committed"), log.offset_for_timestamp(1_700_000_000_030))


def _build(storage: Storage, cache: Path) -> None:
    """Plain, idempotent and transactional appends, sealed twice, then more commits."""
    log = _open(storage, cache)

    def transactional(pid: int, sequence: int, start: int) -> bytes:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, base_sequence=sequence, transactional=True)
        (encoded,) = encode_arrow(keyed_table(3, start=start), settings)
        return encoded.data.tobytes()

    def marker(pid: int, kind: ControlRecordType) -> bytes:
        settings = BatchSettings(producer_id=pid, producer_epoch=0, transactional=True)
        return encode_control_batch(*end_txn_marker(kind, 0), settings, now_ms=1_700_000_000_000).data.tobytes()

    for i in range(4):
        log.append_arrow(keyed_table(5, start=5 * i))
    log.append(transactional(1, 0, 100))
    log.append(marker(1, ControlRecordType.ABORT))
    log.seal()
    (idempotent,) = encode_arrow(
        keyed_table(4, start=200), BatchSettings(producer_id=2, producer_epoch=0, base_sequence=0)
    )
    log.append(idempotent.data.tobytes())
    log.append(transactional(1, 3, 300))
    log.append(marker(1, ControlRecordType.COMMIT))
    log.seal()
    for i in range(3):
        log.append_arrow(keyed_table(2, start=400 + 2 * i))
    log.close()
    # An exactly-once sink's micro-batch: a task's staged object, made visible by one commit.
    logs = LogDirectory(storage)
    stage = StagedWrites(logs)
    rows = keyed_table(3, start=500)
    with Producer(logs, ProducerConfig(enable_idempotence=False), stage=stage) as producer:
        producer.send_arrow("t", rows.append_column("partition", pa.array([0] * rows.num_rows, pa.int32())))
    assert commit_staged(logs, stage.put("task", inline_bytes=0), SinkMark("sink", "query", 0))


def _objects(storage: Storage, directory: str) -> Iterator[str]:
    """Every object below ``directory``, recursively."""
    for name in storage.list(directory):
        path = f"{directory}/{name}"
        if storage.is_directory(path) and storage.stat(path) is None:
            yield from _objects(storage, path)
        else:
            yield path


def _kind(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    if "/commits/" in path:
        return "commit"
    if "/staged/" in path:
        return "staged"
    if "/seals/" in path:
        return "topic-seal"
    if "/manifests/" in path:
        return "manifest"
    if "/sealed/" in path:
        for suffix in ("log", "index", "timeindex", "snapshot"):
            if name.endswith(f".{suffix}"):
                return f"sealed-{suffix}"
    return None


def _damaged(data: bytes, operation: str, rng: random.Random) -> bytes | None:
    """``data`` damaged by ``operation``; None for a deletion."""
    if operation == "delete":
        return None
    if operation == "append":
        return data + rng.randbytes(rng.randint(1, 64))
    if not data:
        return rng.randbytes(8)
    if operation == "bit-flip":
        at = rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
    if operation == "garbage":
        at = rng.randrange(len(data))
        size = rng.randint(1, min(32, len(data) - at))
        return data[:at] + rng.randbytes(size) + data[at + size :]
    return data[: rng.randrange(len(data))]  # truncate


def _difference(got: Truth, truth: Truth) -> str:
    """Where a mutant's reads differ from the truth, briefly."""
    parts = []
    for what, mine, right in (
        ("uncommitted", got.uncommitted, truth.uncommitted),
        ("committed", got.committed, truth.committed),
    ):
        if mine != right:
            first = next(
                (i for i, (a, b) in enumerate(zip(mine, right, strict=False)) if a != b), min(len(mine), len(right))
            )
            parts.append(f"{what}: {len(mine)} records, not {len(right)}, first different at {first}")
    if got.by_time != truth.by_time:
        parts.append(f"by time: {got.by_time}, not {truth.by_time}")
    return "; ".join(parts)


def _timeout(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError(f"no answer within {TIMEOUT_S} s")


@pytest.fixture(scope="module")
def source(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[ObjectStorage, Truth, Path]:
    base = tmp_path_factory.mktemp("object-fuzz")
    storage = ObjectStorage(f"s3://{BUCKET}{base}/source")
    _build(storage, base / "builder")
    truth = _read(_open(storage, base / "reader"))
    assert truth.uncommitted and truth.committed != truth.uncommitted and truth.by_time is not None
    return storage, truth, base


def test_damaged_objects_give_the_records_written_or_a_typed_error(
    source: tuple[ObjectStorage, Truth, Path],
) -> None:
    storage, truth, base = source
    objects = {path[len(storage.root) + 1 :]: storage.read(path) for path in _objects(storage, storage.root)}
    by_kind: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for key in objects:
        kind = _kind(key)
        if kind is not None:
            by_kind[kind].append(key)
    assert all(by_kind[kind] for kind in KINDS if kind != "replica-record"), by_kind
    # A store that loses the chain's last commit loses that append: nothing else records it (an append is one write),
    # so the log is as it was before it, never other records.
    last_commit = max(by_kind["commit"])
    trimmed = ObjectStorage(f"{storage.root}-without-last")
    for key, data in objects.items():
        if key != last_commit:
            trimmed.put(trimmed.join(key), data)
    before_last = _read(_open(trimmed, base / "cache-without-last"))
    rng = random.Random(SEED)
    failures: list[str] = []
    outcomes: dict[str, int] = {"same": 0, "typed error": 0}
    previous = signal.signal(signal.SIGALRM, _timeout)
    try:
        for index in range(MUTANTS):
            kind, operation = KINDS[index % len(KINDS)], rng.choice(OPERATIONS)
            mutant = ObjectStorage(f"{storage.root}-mutant-{index}")
            for key, data in objects.items():
                mutant.put(mutant.join(key), data)
            cache = base / f"cache-{index}"
            if kind == "replica-record":
                _read(_open(mutant, cache))  # a replica made, whose record is then damaged
                record = next(cache.rglob(APPLIED_FILE))
                target = str(record)
                damaged = _damaged(record.read_bytes(), operation, rng)
                if damaged is None:
                    record.unlink()
                else:
                    record.write_bytes(damaged)
            else:
                target = rng.choice(by_kind[kind])
                damaged = _damaged(objects[target], operation, rng)
                if damaged is None:
                    mutant.delete(mutant.join(target))
                else:
                    mutant.put(mutant.join(target), damaged)
            what = f"mutant {index}: {kind} {operation} of {target}"
            signal.alarm(TIMEOUT_S)
            try:
                got = _read(_open(mutant, cache))
            except PySparkLogError as error:
                outcomes["typed error"] += 1
                if kind in HARMLESS:
                    failures.append(f"{what}: {type(error).__name__}: {error} (a hint or a cache must not fail a read)")
                continue
            except BaseException as error:  # noqa: BLE001  # anything else is the failure this test looks for
                failures.append(f"{what}: {type(error).__name__}: {error}")
                continue
            finally:
                signal.alarm(0)
            if got != truth and not (target == last_commit and operation == "delete" and got == before_last):
                failures.append(f"{what}: other records than were written ({_difference(got, truth)})")
            else:
                outcomes["same"] += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    print(f"\nseed {SEED}, {MUTANTS} mutants: {outcomes}")
    assert not failures, "\n".join(failures)
    assert outcomes["typed error"] and outcomes["same"], outcomes
