"""A partition log on an object store (``storage.objects.log``): commits are the log, and every process's local
replica follows them. Against a real S3-compatible server process (tests/s3_server.py)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pysparklog import BatchSettings, LogConfig, LogDirectory
from pysparklog.errors import CorruptRecordError, InvalidOffsetError, OutOfOrderSequenceError
from pysparklog.storage.cleaner import clean_log
from pysparklog.storage.io import PutMode, Storage
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.storage.objects.commit_log import CommitLog
from pysparklog.storage.objects.log import APPLIED_FILE, ObjectPartitionLog, append_together
from pysparklog.storage.objects.sealing import Manifest, Manifests
from pysparklog.storage.objects.topic_commit import chain_directory_name
from pysparklog.storage.records.arrow_records import encode_arrow
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.retention import run_retention
from pysparklog.storage.validator import checked_batches
from tests.cli.test_dump_log import assert_like_kafka
from tests.conftest import BUCKET, keyed_table, read_all
from tests.interop.kafka_tools import DumpLogSegments
from tests.s3_server import store_proxy
from tests.storage.conftest import run_processes, run_with_a_poller
from tests.storage.fault_proxy import FAULTS
from tests.storage.test_transactions import ABORT, COMMIT, Model, Producers, check_against, plain

WRITERS = 4
APPENDS = 12


def _storage(root: str, endpoint: str | None = None) -> ObjectStorage:
    return ObjectStorage(f"s3://{BUCKET}/{root.strip('/')}", {"aws_endpoint": endpoint} if endpoint else None)


@pytest.fixture
def remote(s3_endpoint: str, tmp_path: Path) -> ObjectStorage:
    return _storage(str(tmp_path / "logs"))


def _open(storage: Storage, cache: Path, seal_commits: int = 1000, **config: Any) -> ObjectPartitionLog:
    return ObjectPartitionLog(storage, "t", 0, LogConfig(**config), cache_dir=str(cache), seal_commits=seal_commits)


def _values(log: ObjectPartitionLog, *args: Any, **kwargs: Any) -> list[bytes]:
    values: list[bytes] = read_all(log, *args, **kwargs).column("value").to_pylist() if log.log_end_offset else []
    return values


def test_appends_through_one_replica_are_read_through_another(remote: ObjectStorage, tmp_path: Path) -> None:
    writer, reader = _open(remote, tmp_path / "a"), _open(remote, tmp_path / "b")
    first = writer.append_arrow(keyed_table(10))
    second = reader.append_arrow(keyed_table(5, start=10))
    assert (first.first_offset, first.last_offset, second.first_offset, second.last_offset) == (0, 9, 10, 14)
    expected = keyed_table(15).column("value").to_pylist()
    assert _values(writer) == expected and _values(reader) == expected
    table = read_all(reader, 12)
    assert table.column("offset").to_pylist() == [12, 13, 14]
    assert writer.offset_for_timestamp(1_700_000_000_012) == (12, 1_700_000_000_012)
    commits = CommitLog(remote, remote.join(chain_directory_name("t", None)))
    latest = commits.latest()
    assert latest is not None and latest.number == 1, "one commit object per append"


#: A round trip long enough that a replica following many commits is still fetching when its first ones are read.
_SLOW_ROUND_TRIP_MS = 100


def test_a_replica_far_behind_hands_on_its_first_records_while_it_still_follows(
    s3_endpoint: str, remote: ObjectStorage, tmp_path: Path
) -> None:
    """A partition's first read on a host (a Spark task's) gets the records of the commits applied so far while the
    next ones are fetched: it does not wait for the last. Stopping the read stops the follow."""
    writer = _open(remote, tmp_path / "writer")
    commits, records = 24, 30
    for i in range(commits):
        writer.append_arrow(keyed_table(records, start=i * records))
    end = commits * records
    with store_proxy(s3_endpoint, tmp_path / "proxy.log", delay_ms=_SLOW_ROUND_TRIP_MS) as proxy:
        slow = _storage(str(tmp_path / "logs"), proxy.endpoint)
        reader = _open(slow, tmp_path / "reader", segment_bytes=8 * 1024)  # rolling while it is read
        batches = reader.read_arrow(0, end)
        first = next(batches)
        assert first.column("offset")[0].as_py() == 0
        assert reader.local.view().log_end_offset < end, "the first records came before the follow ended"
        rest = list(batches)
        offsets = pa.Table.from_batches([first, *rest]).column("offset").to_pylist()
        assert offsets == list(range(end))
        assert reader.local.view().log_end_offset == end and len(reader.local.view().segment_bases) > commits // 4

        stopped = _open(slow, tmp_path / "stopped")
        head = stopped.read_arrow(0, records)
        assert [b.num_rows for b in head] == [records]
        assert stopped.local.view().log_end_offset < end, "a read of the first commit stops the follow with it"
        assert _values(stopped) == keyed_table(end).column("value").to_pylist(), "a later read follows the rest"


def test_the_log_end_offset_is_known_without_following_the_commits(remote: ObjectStorage, tmp_path: Path) -> None:
    """What a Spark driver asks when it plans ranges: it must not download the records its executors read."""
    writer, planner = _open(remote, tmp_path / "a"), _open(remote, tmp_path / "b")
    assert planner.log_end_offset == 0
    for i in range(3):
        writer.append_arrow(keyed_table(4, start=4 * i))
    writer.raise_log_start_offset(2)
    assert planner.log_end_offset == 12
    assert planner.local.view().log_end_offset == 0, "the planner's replica followed nothing"
    assert planner.log_start_offset == 2 and planner.offsets() == (2, 12), "the log start is in the header too"
    assert planner.local.view().log_end_offset == 0
    assert planner.view().log_end_offset == 12 and planner.view().log_start_offset == 2


def test_log_append_time_is_stamped_once_and_every_replica_keeps_it(remote: ObjectStorage, tmp_path: Path) -> None:
    writer = _open(remote, tmp_path / "a", message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    info = writer.append_arrow(keyed_table(3))
    assert info.log_append_time_ms > 0
    for cache in ("a", "b"):
        stamps = read_all(_open(remote, tmp_path / cache), 0).column("timestamp").cast(pa.int64()).to_pylist()
        assert stamps == [info.log_append_time_ms] * 3


def test_transactions_through_alternating_replicas_match_kafkas_rules(remote: ObjectStorage, tmp_path: Path) -> None:
    """The transaction model of test_transactions, its appends made through two replicas in turn."""
    rng = random.Random(3)
    logs = [_open(remote, tmp_path / name, seal_commits=9, segment_bytes=1500) for name in ("a", "b")]
    producers, model = Producers(), Model()
    for step in range(40):
        pid, roll = rng.randrange(3), rng.random()
        if roll < 0.5:
            n = rng.randrange(1, 4)
            data = producers.data(pid, n, model.end)
            model.data(pid, n)
        elif roll < 0.8:
            kind = rng.choice([COMMIT, ABORT])
            data = producers.marker(pid, kind)
            model.marker(pid, kind)
        else:
            data = plain(2, model.end)
            model.plain(2)
        assert logs[step % 2].append(data).last_offset == model.end - 1
    assert len(model.aborted) >= 2
    manifest = Manifests(remote, remote.join("t-0")).latest()
    assert manifest is not None and manifest.generation >= 2, "the writers sealed as they went"
    assert CommitLog(remote, remote.join(chain_directory_name("t", None))).read(0) is None, (
        "commits under an older manifest are gone"
    )
    for log in logs:
        check_against(log, model, rng)
    # A new replica follows the sealed segments, then the commits after them.
    check_against(_open(remote, tmp_path / "fresh", segment_bytes=1500), model, rng)


def test_an_idempotent_retry_through_another_replica_is_recognised(remote: ObjectStorage, tmp_path: Path) -> None:
    settings = BatchSettings(producer_id=7, producer_epoch=0, base_sequence=0)
    (batch,) = encode_arrow(keyed_table(4), settings)
    data = batch.data.tobytes()
    first = _open(remote, tmp_path / "a").append(data)
    retried = _open(remote, tmp_path / "b").append(data)
    assert (retried.first_offset, retried.last_offset) == (first.first_offset, first.last_offset) == (0, 3)
    assert _open(remote, tmp_path / "c").log_end_offset == 4
    (gap,) = encode_arrow(keyed_table(1), BatchSettings(producer_id=7, producer_epoch=0, base_sequence=9))
    with pytest.raises(OutOfOrderSequenceError):
        _open(remote, tmp_path / "b").append(gap.data.tobytes())
    latest = CommitLog(remote, remote.join(chain_directory_name("t", None))).latest()
    assert latest is not None and latest.number == 0, "nothing committed for a repeat or a gap"


def test_delete_records_and_retention_reach_every_replica(remote: ObjectStorage, tmp_path: Path) -> None:
    a = _open(remote, tmp_path / "a", segment_bytes=2000, retention_bytes=3000, retention_ms=-1)
    b = _open(remote, tmp_path / "b", segment_bytes=2000, retention_bytes=3000, retention_ms=-1)
    for i in range(8):
        a.append_arrow(keyed_table(5, start=5 * i))
    assert b.raise_log_start_offset(7) == 7 and a.log_start_offset == 7
    with pytest.raises(InvalidOffsetError):
        a.raise_log_start_offset(41)
    result = run_retention(a)
    assert result.deleted, "retention.bytes left segments to delete"
    assert b.log_start_offset == a.log_start_offset == result.log_start_offset > 7
    assert read_all(b).column("offset").to_pylist()[0] == result.log_start_offset
    assert [s.base_offset for s in b.segments()][0] <= result.log_start_offset


def test_a_replica_ahead_of_its_record_or_deleted_is_brought_back(remote: ObjectStorage, tmp_path: Path) -> None:
    """A process that died between appending a commit to its replica and recording it; then a cache wiped."""
    log = _open(remote, tmp_path / "a")
    log.append_arrow(keyed_table(3))
    record = Path(log.directory) / APPLIED_FILE
    before = record.read_bytes()
    log.append_arrow(keyed_table(2, start=3))
    record.write_bytes(before)  # the record of the first commit only, the replica holding both
    _open(remote, tmp_path / "b").append_arrow(keyed_table(1, start=5))
    reopened = _open(remote, tmp_path / "a")
    assert _values(reopened) == keyed_table(6).column("value").to_pylist()
    shutil.rmtree(tmp_path / "a")
    assert _values(_open(remote, tmp_path / "a")) == keyed_table(6).column("value").to_pylist()


def test_a_replica_of_a_log_emptied_and_written_again_starts_over(remote: ObjectStorage, tmp_path: Path) -> None:
    old = _open(remote, tmp_path / "a")
    for i in range(3):
        old.append_arrow(keyed_table(2, start=2 * i))
    assert old.log_end_offset == 6
    remote.delete_tree(remote.root)
    _open(remote, tmp_path / "b").append_arrow(keyed_table(1, start=100))
    again = _open(remote, tmp_path / "a")
    assert _values(again) == keyed_table(1, start=100).column("value").to_pylist()


def _rounds(log: ObjectPartitionLog, rounds: int, keys: int = 5) -> None:
    """``rounds`` appends of the same ``keys`` keys, round ``r`` giving each the value ``r<r>``."""
    for r in range(rounds):
        log.append_arrow(pa.table({"key": [f"k{k}".encode() for k in range(keys)], "value": [f"r{r}".encode()] * keys}))


def _latest_by_key(table: pa.Table) -> dict[bytes, bytes]:
    return dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))


def test_compaction_on_an_object_store_seals_compacted_segments_new_replicas_read(
    remote: ObjectStorage, tmp_path: Path
) -> None:
    compact: dict[str, Any] = {
        "cleanup_policy": frozenset({"compact"}),
        "segment_bytes": 600,
        "min_cleanable_dirty_ratio": 0.01,
    }
    log, other = _open(remote, tmp_path / "a", **compact), _open(remote, tmp_path / "b", **compact)
    _rounds(log, 6)
    assert read_all(other).num_rows == 30  # its replica holds every record
    result = clean_log(log, now_ms=2**62)
    assert result.cleaned and result.records_kept < result.records_read
    manifest = Manifests(remote, remote.join("t-0")).latest()
    assert manifest is not None and manifest.cleaned_through > 0 and manifest.end_offset == 30
    fresh = _open(remote, tmp_path / "fresh", **compact)
    table = read_all(fresh)
    assert table.num_rows < 30, "a new replica reads the compacted segments"
    assert _latest_by_key(table) == {f"k{k}".encode(): b"r5" for k in range(5)}
    offsets = table.column("offset").to_pylist()
    assert offsets == sorted(offsets) and offsets[-1] == 29, "compaction keeps the records' offsets"
    assert read_all(log).column("offset").to_pylist() == offsets, "the compacting host's replica takes them"
    assert read_all(other).num_rows == 30, "another host's replica keeps what it held"
    assert _latest_by_key(read_all(other)) == _latest_by_key(table)
    assert fresh.append_arrow(keyed_table(1)).first_offset == 30
    assert log.log_end_offset == other.log_end_offset == 31


def test_a_compaction_that_loses_its_manifest_keeps_nothing(
    remote: ObjectStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _open(remote, tmp_path / "a", cleanup_policy=frozenset({"compact"}), segment_bytes=600)
    _rounds(log, 6)
    log.seal()
    before = sorted(remote.list(f"{remote.join('t-0')}/sealed"))
    monkeypatch.setattr(log._manifests, "create", lambda manifest: False)  # another process sealed first
    result = clean_log(log, now_ms=2**62)
    assert not result.cleaned and "during the round" in result.reason
    assert sorted(remote.list(f"{remote.join('t-0')}/sealed")) == before, "the round's uploads are deleted"


def test_a_damaged_commit_is_a_typed_error_naming_it(remote: ObjectStorage, tmp_path: Path) -> None:
    _open(remote, tmp_path / "a").append_arrow(keyed_table(2))
    path = CommitLog(remote, remote.join(chain_directory_name("t", None))).path(1)
    remote.put(path, b"PSLC\x00\x00\x00\x01w" + bytes(20), mode=PutMode.CREATE)
    with pytest.raises(CorruptRecordError) as raised:
        _open(remote, tmp_path / "b").log_end_offset  # noqa: B018  # the read is the point
    assert path in str(raised.value)


# -- many processes ---------------------------------------------------------------------------------


def _append_many(root: str, endpoint: str | None, cache: str, tag: str) -> None:
    log = ObjectPartitionLog(_storage(root, endpoint), "t", 0, cache_dir=cache)
    for i in range(APPENDS):
        log.append_arrow(pa.table({"value": [f"{tag}:{i}:{j}".encode() for j in range(3)]}))


def _poll(root: str, endpoint: str | None, cache: str, seen: Any, stop: Any) -> None:
    """Read the whole log until told to stop, recording each read's values."""
    log = ObjectPartitionLog(_storage(root, endpoint), "t", 0, cache_dir=cache)
    while not stop.is_set():
        if log.log_end_offset:
            seen.put(read_all(log).column("value").to_pylist())


def _run_writers_and_a_reader(root: str, endpoint: str | None, tmp_path: Path) -> list[list[bytes]]:
    # Two writers share one host's cache (one replica, its lock), the others have their own.
    caches = [str(tmp_path / name) for name in ("w0", "w0", "w2", "w3")]
    return run_with_a_poller(
        _poll,
        (root, endpoint, str(tmp_path / "reader")),
        _append_many,
        [(root, endpoint, caches[n], f"w{n}") for n in range(WRITERS)],
    )


def _check_every_append_once_in_order(values: list[bytes], observed: list[list[bytes]]) -> None:
    expected = {f"w{n}:{i}:{j}".encode() for n in range(WRITERS) for i in range(APPENDS) for j in range(3)}
    assert sorted(values) == sorted(expected), "every acknowledged record once"
    for n in range(WRITERS):
        mine = [v for v in values if v.startswith(f"w{n}:".encode())]
        assert mine == sorted(mine, key=lambda v: tuple(int(x) for x in v.split(b":")[1:])), "one writer's order"
    for i in range(0, len(values), 3):  # an append's records are contiguous
        assert len({v.rsplit(b":", 1)[0] for v in values[i : i + 3]}) == 1
    assert observed, "the reader read while the writers wrote"
    for read in observed:
        assert read == values[: len(read)], "what a reader saw stays as it saw it"


@pytest.mark.slow
def test_processes_appending_to_one_partition_get_dense_offsets(remote: ObjectStorage, tmp_path: Path) -> None:
    root = remote.root.removeprefix(f"s3://{BUCKET}")
    observed = _run_writers_and_a_reader(root, None, tmp_path)
    log = _open(remote, tmp_path / "check")
    table = read_all(log)
    assert table.column("offset").to_pylist() == list(range(WRITERS * APPENDS * 3)), "dense offsets"
    _check_every_append_once_in_order(table.column("value").to_pylist(), observed)


@pytest.mark.slow
def test_processes_appending_through_failing_requests_lose_and_repeat_nothing(
    faulty_s3_endpoint: tuple[str, Path], tmp_path: Path
) -> None:
    proxy, faults = faulty_s3_endpoint
    root = str(tmp_path / "faults")
    observed = _run_writers_and_a_reader(root, proxy, tmp_path)
    made = [line for line in faults.read_text().splitlines() if line.startswith("fault ")]  # not its other output
    assert {line.split(":")[0] for line in made} == {f"fault {kind}" for kind in FAULTS}, "every kind of fault"
    log = _open(_storage(root), tmp_path / "check")  # straight to the server
    table = read_all(log)
    assert table.column("offset").to_pylist() == list(range(WRITERS * APPENDS * 3))
    _check_every_append_once_in_order(table.column("value").to_pylist(), observed)


# -- sealing ------------------------------------------------------------------------------------------


def _download(remote: ObjectStorage, manifest: Manifest, target: Path) -> list[Path]:
    """A manifest's sealed segment files, downloaded into ``target`` under their own names."""
    target.mkdir(parents=True)
    files = []
    for segment in manifest.segments:
        directory = f"{remote.join('t-0')}/{segment.directory}"
        for name in remote.list(directory):
            if name.startswith(f"{segment.base_offset:020d}."):
                (target / name).write_bytes(remote.read(f"{directory}/{name}"))
                files.append(target / name)
    return files


def test_sealed_segments_are_kafka_segments_a_filesystem_log_reads(remote: ObjectStorage, tmp_path: Path) -> None:
    log = _open(remote, tmp_path / "a", seal_commits=4, segment_bytes=3000)
    for i in range(10):
        log.append_arrow(keyed_table(10, start=10 * i))
    manifest = Manifests(remote, remote.join("t-0")).latest()
    assert manifest is not None and manifest.commit >= 7
    assert [s.base_offset for s in manifest.segments][0] == 0
    files = _download(remote, manifest, tmp_path / "copy" / "t-0")
    assert {f.suffix for f in files} >= {".log", ".index", ".timeindex"}
    copied = LogDirectory(tmp_path / "copy").partition("t", 0)
    assert copied.log_end_offset == manifest.end_offset
    assert read_all(copied).column("value").to_pylist() == keyed_table(manifest.end_offset).column("value").to_pylist()


@pytest.mark.interop
def test_kafka_dumps_sealed_segments(remote: ObjectStorage, tmp_path: Path, kafka_dump_log: DumpLogSegments) -> None:
    log = _open(remote, tmp_path / "a", seal_commits=3, segment_bytes=2000)
    for i in range(6):
        log.append_arrow(keyed_table(8, start=8 * i))
    manifest = Manifests(remote, remote.join("t-0")).latest()
    assert manifest is not None
    files = [f for f in _download(remote, manifest, tmp_path / "t-0") if f.suffix in (".log", ".index", ".timeindex")]
    out = assert_like_kafka(kafka_dump_log, sorted(files), "--deep-iteration")
    assert out.count("baseOffset:") == manifest.commit + 1, "one batch per append"


def test_retention_drops_sealed_segments_and_a_new_replica_starts_at_the_log_start(
    remote: ObjectStorage, tmp_path: Path
) -> None:
    log = _open(remote, tmp_path / "a", seal_commits=1000, segment_bytes=2000)
    for i in range(12):
        log.append_arrow(keyed_table(5, start=5 * i))
    first = log.seal()
    assert first is not None and len(first.segments) > 3
    log.raise_log_start_offset(33)
    log.append_arrow(keyed_table(5, start=60))
    second = log.seal()
    assert second is not None and second.log_start_offset == 33
    assert second.segments[0].base_offset <= 33 < second.segments[0].end_offset
    dropped = [s for s in first.segments if s.end_offset <= 33]
    assert dropped and all(
        not remote.list(f"{remote.join('t-0')}/{s.directory}")
        or f"{s.base_offset:020d}.log" not in remote.list(f"{remote.join('t-0')}/{s.directory}")
        for s in dropped
    ), "retention removed the dropped segments' objects"
    assert CommitLog(remote, remote.join(chain_directory_name("t", None))).read(first.commit) is None, (
        "the first manifest's commits are gone"
    )
    fresh = _open(remote, tmp_path / "fresh")
    assert fresh.log_start_offset == 33 and fresh.log_end_offset == 65
    assert read_all(fresh).column("value").to_pylist() == keyed_table(65).column("value").to_pylist()[33:]
    assert log.seal() is None, "nothing new to seal"


def test_a_sealer_that_loses_the_manifest_leaves_nothing(
    remote: ObjectStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _open(remote, tmp_path / "a"), _open(remote, tmp_path / "b")
    a.append_arrow(keyed_table(5))
    stale = b._manifests.latest()  # none yet
    assert a.seal() is not None
    monkeypatch.setattr(b._manifests, "latest", lambda: stale)  # b decided to seal before a's manifest
    assert b.seal() is None
    sealed = remote.list(f"{remote.join('t-0')}/sealed")
    assert sealed == [f"0-{a._sealer_id}"], "the loser's uploads are deleted"


# -- appends to several partitions made together ------------------------------------------------------------


def _append_together(root: str, endpoint: str | None, cache: str, tag: str) -> None:
    """``APPENDS`` rounds, each one commit of three records to each of partitions 0-2 (``append_together``)."""
    storage = _storage(root, endpoint)
    logs = [ObjectPartitionLog(storage, "t", p, cache_dir=cache) for p in range(3)]
    for i in range(APPENDS):
        pieces = [
            checked_batches(
                next(encode_arrow(pa.table({"value": [f"{tag}:{i}:{j}".encode() for j in range(3)]}), BatchSettings())),
                LogConfig().max_message_bytes,
            )
            for _ in logs
        ]
        outcomes = append_together([(log, [piece]) for log, piece in zip(logs, pieces, strict=True)])
        assert all(not isinstance(outcome, Exception) for outcome in outcomes), outcomes


@pytest.mark.slow
def test_processes_appending_to_several_partitions_together_get_dense_offsets_in_each(
    remote: ObjectStorage, tmp_path: Path
) -> None:
    root = remote.root.removeprefix(f"s3://{BUCKET}")
    caches = [str(tmp_path / name) for name in ("w0", "w0", "w2", "w3")]
    run_processes(_append_together, [(root, None, caches[n], f"w{n}") for n in range(WRITERS)])
    for partition in range(3):
        table = read_all(ObjectPartitionLog(remote, "t", partition, cache_dir=str(tmp_path / "check")))
        assert table.column("offset").to_pylist() == list(range(WRITERS * APPENDS * 3)), "dense offsets"
        _check_every_append_once_in_order(table.column("value").to_pylist(), [[]])
    # One commit per round: the chain has as many commits as rounds were made.
    last = CommitLog(remote, remote.join(chain_directory_name("t", None))).latest()
    assert last is not None and last.number == WRITERS * APPENDS - 1


def test_an_append_the_log_refuses_leaves_the_others_made_together(remote: ObjectStorage, tmp_path: Path) -> None:
    first, second = (ObjectPartitionLog(remote, "t", p, LogConfig(), cache_dir=str(tmp_path / "a")) for p in range(2))
    first.append(next(encode_arrow(keyed_table(2), BatchSettings(producer_id=7, producer_epoch=0, base_sequence=0))))
    out_of_order = next(encode_arrow(keyed_table(2), BatchSettings(producer_id=7, producer_epoch=0, base_sequence=5)))
    plain = next(encode_arrow(keyed_table(2), BatchSettings()))
    refused, made = append_together(
        [(first, [checked_batches(out_of_order, 10**6)]), (second, [checked_batches(plain, 10**6)])]
    )
    assert isinstance(refused, OutOfOrderSequenceError) and not isinstance(made, Exception)
    assert (first.log_end_offset, second.log_end_offset) == (2, 2) and made.first_offset == 0
    with pytest.raises(ValueError, match="distinct partitions"):
        append_together([(second, [checked_batches(plain, 10**6)]), (second, [checked_batches(plain, 10**6)])])


def test_writers_sharing_a_replica_take_turns_without_starting_it_over(
    remote: ObjectStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes of one host (here two logs with chains of their own) append in turn: each finds the shared
    replica ahead of the last commit it knows of, and follows the chain rather than starting the replica over."""
    first, second = _open(remote, tmp_path / "host"), _open(remote, tmp_path / "host")

    def start_over(self: ObjectPartitionLog, record: object) -> None:
        raise AssertionError("a replica ahead of what its process knew was started over")

    monkeypatch.setattr(ObjectPartitionLog, "_start_over", start_over)
    for i in range(3):
        first.append_arrow(pa.table({"value": [f"a{i}".encode()]}))
        second.append_arrow(pa.table({"value": [f"b{i}".encode()]}))
    assert read_all(first).column("value").to_pylist() == [b"a0", b"b0", b"a1", b"b1", b"a2", b"b2"]


def test_a_reader_of_one_partition_fetches_only_its_sections_of_large_commits(
    remote: ObjectStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large commit is read as its header and section table, then this partition's sections' bytes: a replica of
    one partition of a busy topic downloads that partition's records, not the topic's."""
    writers = [ObjectPartitionLog(remote, "t", p, cache_dir=str(tmp_path / "writer")) for p in range(2)]
    for i in range(4):
        writers[0].append_arrow(pa.table({"value": [f"small-{i}".encode()]}))
        writers[1].append_arrow(pa.table({"value": [bytes(200_000)] * 3}))  # about 600 kB a commit
    fetched: list[int] = []
    read = ObjectStorage.read

    def counted(self: ObjectStorage, path: str, position: int = 0, length: int | None = None) -> bytes:
        data = read(self, path, position, length)
        fetched.append(len(data))
        return data

    monkeypatch.setattr(ObjectStorage, "read", counted)
    reader = ObjectPartitionLog(remote, "t", 0, cache_dir=str(tmp_path / "reader"))
    assert read_all(reader).column("value").to_pylist() == [f"small-{i}".encode() for i in range(4)]
    assert sum(fetched) < 200_000, f"{sum(fetched)} bytes read for 4 small records in {len(fetched)} reads"


def test_a_replica_of_a_quiet_partition_skips_the_others_commits_by_their_headers(
    remote: ObjectStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers = [ObjectPartitionLog(remote, "t", p, cache_dir=str(tmp_path / "writer")) for p in range(2)]
    for i in range(64):
        writers[0].append_arrow(pa.table({"value": [f"busy-{i}".encode()]}))
    writers[1].append_arrow(pa.table({"value": [b"quiet"]}))
    writers[0].append_arrow(pa.table({"value": [b"busy-last"]}))
    reads: list[str] = []
    read = ObjectStorage.read

    def counted(self: ObjectStorage, path: str, position: int = 0, length: int | None = None) -> bytes:
        reads.append(path)
        return read(self, path, position, length)

    monkeypatch.setattr(ObjectStorage, "read", counted)
    reader = ObjectPartitionLog(remote, "t", 1, cache_dir=str(tmp_path / "reader"))
    assert read_all(reader).column("value").to_pylist() == [b"quiet"]
    assert len(reads) <= 12, f"{len(reads)} reads to find one commit among 66"
