"""Consumer groups across processes: members killed with SIGKILL, members joining late, static restarts.

Each member is ``python -m tests.consumer_member``, which writes every record it consumed and every commit
that succeeded to its own file, flushed before the next step, so the files tell what each process did
up to the moment it died.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pysparklog import LogDirectory, OffsetAndMetadata, TopicPartition
from pysparklog.group import GroupDescription, describe_group
from pysparklog.offsets import OffsetStore
from tests.conftest import REPO, keyed_table

pytestmark = pytest.mark.slow

TOPIC = "orders"
DEADLINE_S = 40.0


@dataclass
class Output:
    """What a member's file says."""

    records: list[tuple[int, int, str]] = field(default_factory=list)  # partition, offset, key
    commits: dict[TopicPartition, int] = field(default_factory=dict)  # the last successful commit of each
    events: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # assigned/revoked/lost
    failures: list[str] = field(default_factory=list)
    idle: bool = False


def read_output(path: Path) -> Output:
    result = Output()
    if not path.exists():
        return result
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # a line still being written
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "record":
            p, o, key = rest.split(" ")
            result.records.append((int(p), int(o), key))
        elif kind == "committed":
            name, offset = rest.split(" ")
            topic, _, p = name.rpartition("-")
            result.commits[TopicPartition(topic, int(p))] = int(offset)
        elif kind in ("assigned", "revoked", "lost"):
            result.events.append((kind, frozenset(rest.split(",")) if rest else frozenset()))
        elif kind == "commit-failed":
            result.failures.append(rest)
        elif kind == "idle":
            result.idle = True
    return result


class Members:
    """Starts member processes and makes sure none outlives the test."""

    def __init__(self, log_dir: Path, tmp_path: Path) -> None:
        self.log_dir = log_dir
        self.tmp_path = tmp_path
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *options: str, group: str = "g") -> Path:
        out = self.tmp_path / f"{name}.out"
        with open(self.tmp_path / f"{name}.err", "wb") as err:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.consumer_member", "consume", str(self.log_dir), group, TOPIC, str(out)]
                + ["--client-id", name, *options],
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=REPO,
            )
        return out

    def stderr(self, name: str) -> str:
        return (self.tmp_path / f"{name}.err").read_text(errors="replace")

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL

    def stop(self, name: str) -> None:
        """SIGTERM: the member closes its consumer (leaving the group) and exits 0."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        assert proc.returncode == 0, self.stderr(name)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None and proc.returncode not in (0, -signal.SIGKILL):
                pytest.fail(f"member {name} exited with {proc.returncode}:\n{self.stderr(name)}")

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def members(log_dir: Path, tmp_path: Path) -> Iterator[Members]:
    started = Members(log_dir, tmp_path)
    yield started
    started.close()


def fill(log_dir: Path, partitions: int, per_partition: int) -> None:
    """Partition p holds keys ``k<p * per_partition + i>``: every record's key is unique."""
    logs = LogDirectory(log_dir)
    logs.topics.create(TOPIC, partitions)
    for p in range(partitions):
        log = logs.partition(TOPIC, p)
        try:
            log.append_arrow(keyed_table(per_partition, start=p * per_partition, value_size=16))
        finally:
            log.close()


def wait_for(condition: Callable[[], bool], what: str, members: Members) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        members.check_alive()
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def owned_now(output: Output) -> set[str]:
    """The partitions a member holds after the listener calls it has written."""
    owned: set[str] = set()
    for kind, partitions in output.events:
        owned = owned | partitions if kind == "assigned" else owned - partitions
    return owned


def committed(log_dir: Path, group: str = "g") -> dict[TopicPartition, OffsetAndMetadata]:
    with OffsetStore(log_dir) as store:
        return store.committed(group)


def group_now(log_dir: Path, group: str = "g") -> GroupDescription:
    description = describe_group(LogDirectory(log_dir), group)
    assert description is not None
    return description


def test_killed_member_and_late_joiner_consume_every_record_once_past_the_last_commit(
    log_dir: Path, tmp_path: Path, members: Members
) -> None:
    partitions, per_partition = 6, 2000
    fill(log_dir, partitions, per_partition)
    options = ("--session-ms", "1500", "--heartbeat-ms", "100", "--max-poll-records", "40", "--pause-ms", "15")
    outs = {name: members.start(name, *options) for name in ("m1", "m2", "m3")}
    total = partitions * per_partition

    # Kill one member once it has committed, with the group a good way from done.
    def consumed() -> int:
        return sum(len(read_output(out).records) for out in outs.values())

    wait_for(lambda: len(read_output(outs["m2"]).commits) >= 1 and consumed() >= total // 5, "progress", members)
    assert consumed() < total * 3 // 4, "consumption went too fast to kill a member mid-way"
    members.kill("m2")
    outs["m4"] = members.start("m4", *options)

    ends = {TopicPartition(TOPIC, p): per_partition for p in range(partitions)}
    wait_for(lambda: {tp: c.offset for tp, c in committed(log_dir).items()} == ends, "every commit at the end", members)
    description = group_now(log_dir)
    assert sorted(m.client_id for m in description.members) == ["m1", "m3", "m4"]
    assert sorted(tp for m in description.members for tp in m.assignment) == sorted(ends)
    for name in ("m1", "m3", "m4"):
        members.stop(name)
    assert group_now(log_dir).members == ()

    outputs = {name: read_output(out) for name, out in outs.items()}
    for name, output in outputs.items():
        assert output.failures == [], f"{name}'s commits were refused: {output.failures}"
        assert not [e for e in output.events if e[0] == "lost"], f"{name} lost its partitions while alive"
    every = Counter((p, o) for output in outputs.values() for p, o, _ in output.records)
    assert set(every) == {(p, o) for p in range(partitions) for o in range(per_partition)}, "records never consumed"
    keys = {(p, o): key for output in outputs.values() for p, o, key in output.records}
    assert len(set(keys.values())) == total

    # The killed member's records past its last commit are consumed again by the new owner; all other
    # records exactly once: nobody consumed a partition another member was consuming.
    victim = outputs["m2"]
    assert victim.records, "the killed member consumed nothing"
    last_commit = {tp.partition: offset for tp, offset in victim.commits.items()}
    counted = Counter(
        (p, o)
        for name, output in outputs.items()
        for p, o, _ in output.records
        if name != "m2" or o < last_commit.get(p, 0)
    )
    uncommitted_by_victim = {(p, o) for p, o, _ in victim.records if o >= last_commit.get(p, 0)}
    twice = sorted(r for r, n in counted.items() if n > 1)
    assert twice == [], f"consumed by two owners: {twice[:10]}"
    # A record not counted is one the victim read and committed in the instant before the kill, before it
    # could write that commit down; the new owner rightly started after it.
    missing = {(p, o) for p in range(partitions) for o in range(per_partition)} - set(counted)
    assert missing <= uncommitted_by_victim
    assert len(missing) <= 40  # at most one poll's worth
    assert sum(counted.values()) + len(missing) == total


def test_committed_offsets_survive_kill_9(log_dir: Path, tmp_path: Path, members: Members) -> None:
    fill(log_dir, 3, 500)
    out = members.start("c1", "--max-poll-records", "30", "--stop-after", "600")
    wait_for(lambda: read_output(out).idle, "the member to commit and go idle", members)
    members.kill("c1")
    written = read_output(out)
    assert written.commits, "nothing was committed"
    assert 600 <= len(written.records) < 1500

    fresh = subprocess.run(
        [sys.executable, "-m", "tests.consumer_member", "committed", str(log_dir), "g", TOPIC],
        capture_output=True,
        check=True,
        cwd=REPO,
        timeout=60,
    )
    found = json.loads(fresh.stdout)
    expected: dict[str, int | None] = {str(TopicPartition(TOPIC, p)): None for p in range(3)}
    expected.update({str(tp): offset for tp, offset in written.commits.items()})
    assert found == expected
    # What the commits say is what was consumed: each partition from 0 up to its commit.
    for tp, offset in written.commits.items():
        assert sorted(o for p, o, _ in written.records if p == tp.partition) == list(range(offset))


def test_static_member_restarting_within_the_session_timeout_keeps_its_partitions(
    log_dir: Path, tmp_path: Path, members: Members
) -> None:
    fill(log_dir, 4, 200)
    options = ("--session-ms", "10000", "--heartbeat-ms", "100", "--max-poll-records", "20")
    first = members.start("s1", "--instance-id", "static-1", *options)
    other = members.start("s2", "--instance-id", "static-2", *options)

    def settled() -> bool:
        description = describe_group(LogDirectory(log_dir), "g")
        return (
            description is not None
            and description.state == "Stable"
            and owned_now(read_output(first)) == {f"{TOPIC}-0", f"{TOPIC}-1"}
            and owned_now(read_output(other)) == {f"{TOPIC}-2", f"{TOPIC}-3"}
        )

    wait_for(settled, "both static members to own their partitions", members)
    before = group_now(log_dir)
    assignment = {m.group_instance_id: m.assignment for m in before.members}
    assert assignment == {
        "static-1": (TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)),
        "static-2": (TopicPartition(TOPIC, 2), TopicPartition(TOPIC, 3)),
    }
    other_events = read_output(other).events
    early_commits = read_output(other).commits

    members.kill("s1")
    restarted = members.start("s1-again", "--instance-id", "static-1", *options)
    wait_for(lambda: bool(read_output(restarted).events), "the restarted member's partitions", members)
    assert read_output(restarted).events == [("assigned", frozenset({f"{TOPIC}-0", f"{TOPIC}-1"}))]
    after = group_now(log_dir)
    assert after.generation == before.generation, "the restart caused a rebalance"
    assert {m.group_instance_id: m.assignment for m in after.members} == assignment
    assert read_output(other).events == other_events, "the other member saw a rebalance"

    # Every record consumed; the restarted member went on from the dead one's commits.
    ends = {TopicPartition(TOPIC, p): 200 for p in range(4)}
    wait_for(lambda: {tp: c.offset for tp, c in committed(log_dir).items()} == ends, "every commit at the end", members)
    members.stop("s1-again")
    members.stop("s2")
    dead = read_output(first)
    resumed = read_output(restarted)
    for p in (0, 1):
        # From the last commit before the restart: one written down (by the dead instance, or by the other
        # member before the first rebalance), or one the dead instance made just before the kill.
        recorded = max(dead.commits.get(TopicPartition(TOPIC, p), 0), early_commits.get(TopicPartition(TOPIC, p), 0))
        read = max([recorded, *(o + 1 for q, o, _ in dead.records if q == p)])
        offsets = sorted(o for q, o, _ in resumed.records if q == p)
        start = offsets[0] if offsets else 200
        assert recorded <= start <= read
        assert offsets == list(range(start, 200))
