"""The commit log (``storage.objects.commit_log``): dense, ordered commits from many writers through create-if-absent
alone, on the filesystem and on a real S3-compatible server."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.io import PutMode, Storage
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.storage.objects.commit_log import BodyBuilder, Commit, CommitLog
from tests.conftest import BUCKET
from tests.storage.conftest import BACKENDS, run_with_a_poller
from tests.storage.fault_proxy import FAULTS

WRITERS = 4
APPENDS = 15


def _following(tag: str) -> BodyBuilder:
    """A body builder that records which commit it follows, as an offset-bearing body would."""

    def build(number: int, previous: Commit | None) -> bytes:
        return f"{tag} after {previous.number if previous is not None else -1}".encode()

    return build


def test_commits_follow_each_other(storage: Storage) -> None:
    log = CommitLog(storage, storage.join("t-0"))
    assert log.latest() is None
    written = [log.append(_following(f"a{i}")) for i in range(5)]
    assert [c.number for c in written] == [0, 1, 2, 3, 4]
    assert [c.body for c in written] == [f"a{i} after {i - 1}".encode() for i in range(5)]
    reader = CommitLog(storage, storage.join("t-0"))
    latest = reader.latest()
    assert latest is not None and latest == written[-1]
    assert reader.read(2) == written[2] and reader.read(5) is None


def _append_many(backend: str, root: str, tag: str) -> None:
    storage = BACKENDS[backend](root)
    log = CommitLog(storage, storage.join("t-0"), writer_id=tag)
    for i in range(APPENDS):
        log.append(_following(f"{tag}:{i}"))


@pytest.mark.slow
def test_concurrent_writers_get_dense_ordered_numbers_and_each_append_once(backend_and_root: tuple[str, str]) -> None:
    backend, root = backend_and_root
    context = multiprocessing.get_context("spawn")  # obstore's runtime does not survive a fork
    writers = [context.Process(target=_append_many, args=(backend, root, f"w{n}")) for n in range(WRITERS)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(300)
        assert writer.exitcode == 0
    storage = BACKENDS[backend](root)
    log = CommitLog(storage, storage.join("t-0"))
    latest = log.latest()
    assert latest is not None and latest.number == WRITERS * APPENDS - 1
    commits = [log.read(n) for n in range(WRITERS * APPENDS)]
    bodies = [c.body.decode() for c in commits if c is not None]
    tags = [body.split(" after ")[0] for body in bodies]
    assert sorted(tags) == sorted(f"w{n}:{i}" for n in range(WRITERS) for i in range(APPENDS)), "each append once"
    assert [int(body.split(" after ")[1]) for body in bodies] == list(range(-1, WRITERS * APPENDS - 1)), (
        "every body was built for the commit it follows"
    )
    for n in range(WRITERS):
        mine = [int(tag.split(":")[1]) for tag in tags if tag.startswith(f"w{n}:")]
        assert mine == sorted(mine), "one writer's appends keep their order"


class _Creates:
    """The backend, counting one writer's create-if-absent puts (its attempts); with ``lose_first_reply``,
    the first one lands and then reports a timeout, as a request whose reply was lost does."""

    def __init__(self, storage: Storage, *, lose_first_reply: bool = False) -> None:
        self._storage = storage
        self._lose = lose_first_reply
        self.creates = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._storage, name)

    def put(self, path: str, data: bytes, **kwargs: Any) -> object:
        creating = kwargs.get("mode") is PutMode.CREATE
        self.creates += creating
        result = self._storage.put(path, data, **kwargs)
        if creating and self._lose and self.creates == 1:
            raise TimeoutError(f"no reply for {path}")
        return result


def test_a_commit_whose_reply_was_lost_is_recognised_not_written_again(storage: Storage) -> None:
    flaky = _Creates(storage, lose_first_reply=True)
    log = CommitLog(cast(Storage, flaky), storage.join("t-0"), writer_id="w")
    first = log.append(_following("a"))
    second = log.append(_following("b"))
    assert flaky.creates == 2, "the lost reply is settled by reading the commit back, not by creating again"
    assert (first.number, second.number) == (0, 1)
    assert CommitLog(storage, storage.join("t-0")).read(2) is None


def test_a_follower_that_knows_no_commit_finds_the_last_by_listing_then_probes(storage: Storage) -> None:
    log = CommitLog(storage, storage.join("t-0"))
    for i in range(3):
        log.append(_following(str(i)))
    fresh = CommitLog(storage, storage.join("t-0"))
    latest = fresh.latest()
    assert latest is not None and latest.number == 2
    log.append(_following("3"))
    latest = fresh.latest()  # a probe past the last one known finds the new one
    assert latest is not None and latest.number == 3
    assert fresh.last_number() == 3
    empty = CommitLog(storage, storage.join("t-1"))
    assert empty.latest() is None and empty.last_number() == -1
    CommitLog(storage, storage.join("t-1")).append(_following("first"))
    first = empty.latest()  # listed empty before: the first name decides, without another listing
    assert first is not None and first.number == 0 and empty.last_number() == 0


def test_a_follower_finds_the_last_commit_however_many_came_since_its_last_look(storage: Storage) -> None:
    """Its look probes past a new commit as many names at once as the chain's pace suggests (then lists): whatever
    the bursts, it ends at the last commit, and an idle chain costs one probe."""
    writer, follower = CommitLog(storage, storage.join("t-0")), CommitLog(storage, storage.join("t-0"))
    writer.append(_following("0"))
    assert follower.last_number() == 0
    made = 0
    for burst in (1, 3, 7, 2, 20, 1, 40, 5, 5, 0):
        for _ in range(burst):
            made = writer.append(_following(str(made + 1))).number
        assert follower.last_number() == made, f"after a burst of {burst}"
        latest = follower.latest()
        assert latest is not None and latest.number == made


def test_a_writer_that_made_the_last_commit_appends_after_it_and_loses_only_to_a_real_race(storage: Storage) -> None:
    writer, other = CommitLog(storage, storage.join("t-0")), CommitLog(storage, storage.join("t-0"))
    first = writer.append(_following("a"))
    assert writer.known_latest() == first
    other.append(_following("b"))
    assert writer.known_latest() == first, "known without a request, so stale once another wrote"
    third = writer.append(_following("c"), after=writer.known_latest())  # loses number 1, wins number 2
    assert third.number == 2 and writer.known_latest() == third
    bodies = [commit.body for commit in (writer.read(n) for n in range(3)) if commit is not None]
    assert bodies == [b"a after -1", b"b after 0", b"c after 1"]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:5], "shorter than its header"),
        (lambda data: b"XXXX" + data[4:], "not a commit of version 1"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "does not match its CRC"),
    ],
)
def test_a_damaged_commit_is_a_typed_error_naming_it(
    storage: Storage, damage: Callable[[bytes], bytes], message: str
) -> None:
    log = CommitLog(storage, storage.join("t-0"))
    log.append(_following("a"))
    path = log.path(0)
    storage.put(path, damage(storage.read(path)))
    with pytest.raises(CorruptRecordError, match=message) as raised:
        CommitLog(storage, storage.join("t-0")).read(0)
    assert path in str(raised.value)


def _faulty_storage(proxy: str, root: str) -> Storage:
    return ObjectStorage(f"s3://{BUCKET}/{root.strip('/')}", {"aws_endpoint": proxy})


def _append_through_faults(proxy: str, root: str, tag: str) -> None:
    storage = _faulty_storage(proxy, root)
    log = CommitLog(storage, storage.join("t-0"), writer_id=tag)
    for i in range(APPENDS):
        log.append(_following(f"{tag}:{i}"))


def _poll(proxy: str, root: str, seen: Any, stop: Any) -> None:
    """Read the latest commit until told to stop, recording each (number, body) seen."""
    storage = _faulty_storage(proxy, root)
    log = CommitLog(storage, storage.join("t-0"))
    while not stop.is_set():
        latest = log.latest()
        if latest is not None:
            seen.put((latest.number, latest.body))


@pytest.mark.slow
def test_writers_and_a_reader_through_failing_requests_lose_and_repeat_nothing(
    faulty_s3_endpoint: tuple[str, Path], tmp_path: Path
) -> None:
    proxy, faults = faulty_s3_endpoint
    root = str(tmp_path / "faults")
    observed = run_with_a_poller(
        _poll, (proxy, root), _append_through_faults, [(proxy, root, f"w{n}") for n in range(3)]
    )
    made = [line for line in faults.read_text().splitlines() if line.startswith("fault ")]  # not its other output
    assert {line.split(":")[0] for line in made} == {f"fault {kind}" for kind in FAULTS}, "every kind of fault"
    storage = BACKENDS["s3"](root)  # straight to the server
    log = CommitLog(storage, storage.join("t-0"))
    total = 3 * APPENDS
    commits = [log.read(n) for n in range(total + 1)]
    assert commits[-1] is None and all(c is not None for c in commits[:-1]), "dense numbers, none past the appends"
    tags = sorted(c.body.decode().split(" after ")[0] for c in commits[:-1] if c is not None)
    assert tags == sorted(f"w{n}:{i}" for n in range(3) for i in range(APPENDS)), "each append exactly once"
    numbers = [number for number, _ in observed]
    assert numbers == sorted(numbers), "the reader never saw the log go back"
    for number, body in observed:
        found = commits[number]
        assert found is not None and found.body == body, "what the reader saw stays as it saw it"


def test_a_writer_that_loses_catches_up_with_the_log_before_it_tries_again(storage: Storage) -> None:
    """While a writer builds its body, others commit nine times: its first number is taken, and its next
    attempt is at the log's end, not at each number the others took in turn."""
    others = CommitLog(storage, storage.join("t-0"), writer_id="others")
    others.append(_following("first"))
    counted = _Creates(storage)
    slow = CommitLog(cast(Storage, counted), storage.join("t-0"), writer_id="slow")
    builds: list[int] = []

    def build(number: int, previous: Commit | None) -> bytes:
        if not builds:
            for i in range(9):
                others.append(_following(f"meanwhile {i}"))
        builds.append(number)
        return _following("slow")(number, previous)

    commit = slow.append(build)
    assert (commit.number, builds, counted.creates) == (10, [1, 10], 2)
    assert commit.body == b"slow after 9"
