"""The exactly-once sink (``writeStream.format("pysparklog")``) under failures, on real Spark processes.

Each test runs ``tests/spark/sink_job.py`` in a subprocess with a SparkSession of its own, because what is tested is
what a process that dies leaves behind: a Spark driver killed with -9 (its JVM and every Python worker with it),
or a task that fails after its writes reached the log. The assertions are on the log directory, as a Kafka
consumer sees it: with ``read_committed`` every input record is in the output exactly once, while
``read_uncommitted`` still shows what the failed attempts wrote (aborted, never committed).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pysparklog import LogDirectory
from pysparklog.producer import Producer
from pysparklog.spark.sink import SINK_FILE_PREFIX, SinkDecision
from pysparklog.storage.transaction_index import READ_COMMITTED, READ_UNCOMMITTED
from pysparklog.transactions import TXN_FILE_PREFIX, TransactionMetadata, TransactionState
from tests.conftest import REPO
from tests.spark import sink_job
from tests.spark.sink_job import INPUT, OUTPUT

pytestmark = [pytest.mark.spark]

Record = tuple[bytes, bytes]  # key, value


# -- the job's processes -------------------------------------------------------------------------------------------


def start_job(log_dir: Path, checkpoint: Path, mode: str, stderr: Path, *extra: str) -> subprocess.Popen[str]:
    """``python -m tests.spark.sink_job`` in a session of its own (its pid is the session id), so that every
    process it starts (the JVM, the Python daemons in their own process groups, their workers) can be found."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    with open(stderr, "w", encoding="utf-8") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.sink_job", str(log_dir), str(checkpoint), mode, *extra],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )


@contextmanager
def job(log_dir: Path, checkpoint: Path, mode: str, stderr: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """``start_job``, and whatever is left of it killed at the end, so that a failed test leaves no Spark behind."""
    proc = start_job(log_dir, checkpoint, mode, stderr, *extra)
    try:
        yield proc
    finally:
        kill_all(proc.pid)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        if proc.stdout is not None:
            proc.stdout.close()


def tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-chars:]


def session_processes(sid: int) -> dict[int, tuple[int, str]]:
    """The processes of session ``sid`` still alive (zombies left out): pid -> (process group, command line)."""
    found: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] != "Z":
            found[int(name)] = (int(fields[2]), command)
    return found


def kill_all(sid: int, timeout: float = 30.0) -> dict[int, tuple[int, str]]:
    """SIGKILL every process group of session ``sid`` (the session leader's, holding the driver and its JVM, first)
    until no process is left; returns those still alive after ``timeout`` seconds (none, normally)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = session_processes(sid)
        if not alive or time.monotonic() > deadline:
            return alive
        for pgid in sorted({group for group, _ in alive.values()}, key=lambda group: group != sid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def kill_session(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the job and everything it started, as a machine losing power would; then check none survived.

    The job's process group holds the driver and its JVM; PySpark's daemons make process groups of their own
    (``os.setpgid(0, 0)``) in the same session, so every group of the session is killed, until none is left.
    """
    survivors = kill_all(proc.pid)
    assert not survivors, f"processes of the killed job survived SIGKILL: {survivors}"
    code = proc.wait(timeout=30)
    assert code == -signal.SIGKILL, f"the job exited with {code} before it was killed"


def assert_exits_cleanly(proc: subprocess.Popen[str], stderr: Path, timeout: float) -> str:
    """Wait for the job to finish; it must exit 0 and leave no process behind (PySpark's daemons exit when the JVM
    does). Returns its standard output."""
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"the job failed ({proc.returncode}):\n{out}\n{tail(stderr)}"
    deadline = time.monotonic() + 30
    while session_processes(proc.pid):
        assert time.monotonic() < deadline, f"the job left processes behind: {session_processes(proc.pid)}"
        time.sleep(0.1)
    return out


# -- the log directory -------------------------------------------------------------------------------------------------


def read_topic(
    log_dir: Path, topic: str, isolation_level: str, *, value_prefix: int | None = None
) -> list[list[Record]]:
    """Each partition's records in offset order; with ``value_prefix`` only the first bytes of each value."""
    logs = LogDirectory(log_dir)
    partitions: list[list[Record]] = []
    for partition in range(logs.topics.get(topic).partitions):
        records: list[Record] = []
        with logs.partition(topic, partition) as log:
            for batch in log.read_arrow(0, isolation_level=isolation_level):
                values = batch.column("value")
                if value_prefix is not None:
                    values = pc.binary_slice(values, 0, value_prefix)
                records += zip(batch.column("key").to_pylist(), values.to_pylist(), strict=True)
        partitions.append(records)
    return partitions


def everything(partitions: Iterable[list[Record]]) -> list[Record]:
    return [record for records in partitions for record in records]


def assert_same_records(expected: list[Record], actual: list[Record], what: str) -> None:
    """Equal as multisets; the message names what is missing and what is there twice (or should not be)."""
    want, got = Counter(expected), Counter(actual)
    if want == got:
        return
    missing = sorted((want - got).elements())
    extra = sorted((got - want).elements())
    pytest.fail(
        f"{what}: {len(actual)} records for {len(expected)} expected; {len(missing)} missing (first: {missing[:10]}), "
        f"{len(extra)} duplicated or unexpected (first: {extra[:10]})"
    )


def transaction_states(log_dir: Path) -> dict[str, TransactionMetadata]:
    states = {}
    for path in sorted(log_dir.glob(f"{TXN_FILE_PREFIX}*.json")):
        meta = TransactionMetadata.decode(path.read_bytes(), str(path))
        states[meta.transactional_id] = meta
    return states


def sink_decisions(log_dir: Path) -> list[SinkDecision]:
    return [SinkDecision.decode(p.read_bytes(), str(p)) for p in sorted(log_dir.glob(f"{SINK_FILE_PREFIX}*.json"))]


def assert_nothing_hangs(log_dir: Path) -> None:
    """After a query finished, no transaction of its sink is open or half-ended, and its last decision is complete."""
    states = transaction_states(log_dir)
    assert states, "the sink left no transaction state"
    hanging = {
        tid: (meta.state.value, meta.prepared)
        for tid, meta in states.items()
        if meta.state not in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
    }
    assert not hanging, f"transactions left open or unfinished after the query finished: {hanging}"
    decisions = sink_decisions(log_dir)
    assert len(decisions) == 1 and decisions[0].complete, decisions


def produce(log_dir: Path, topic: str, partitions: int, keys: list[bytes], values: list[bytes]) -> None:
    logs = LogDirectory(log_dir)
    logs.topics.create(topic, partitions)
    with Producer(logs) as producer:
        producer.send_arrow(
            topic, pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
        )


# -- kill -9 -----------------------------------------------------------------------------------------------------------

#: 150 micro-batches of ``sink_job.MAX_OFFSETS_PER_TRIGGER``: more than the killed runs of a few seconds can commit.
RECORDS = 150_000
KEYS = 500
KILLS = 6
SEED = 20251122
#: The share of kills timed from the run's ``started`` line: they land in its first micro-batch (the one the killed
#: run left, re-run), while it is planned, written or committed, or before it. The others are timed from the run's
#: first commit: they land anywhere in the micro-batches that follow.
EARLY_KILLS = 0.3
EARLY_KILL_DELAY_S = (0.5, 14.0)
KILL_DELAY_S = (0.5, 6.0)
FIRST_COMMIT_WAIT_S = 300.0


def batch_files(checkpoint: Path, log: str) -> list[int]:
    """The micro-batches in one of the checkpoint's logs: ``offsets`` (planned) or ``commits`` (committed)."""
    directory = checkpoint / log
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def where_killed(log_dir: Path, checkpoint: Path) -> str:
    """What the kill interrupted, from Spark's checkpoint and the sink's files."""
    planned, committed = batch_files(checkpoint, "offsets"), batch_files(checkpoint, "commits")
    decisions = sink_decisions(log_dir)
    decision = decisions[0] if decisions else None
    states = Counter(
        f"{meta.state.value}{' (prepared)' if meta.prepared else ''}" for meta in transaction_states(log_dir).values()
    )
    last = committed[-1] if committed else None
    if not planned or planned[-1] == last:
        phase = "between micro-batches"
    elif decision is not None and decision.batch_id == planned[-1]:
        phase = (
            f"in batch {planned[-1]}, after the sink's decision ({'complete' if decision.complete else 'unfinished'})"
        )
    else:
        phase = f"in batch {planned[-1]}, before the sink's decision"
    return f"{phase}; transactions: {dict(states)}"


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_exactly_once_after_six_kills(tmp_path: Path) -> None:
    """A streaming query killed with -9 six times at random moments, then run to the end, has written every input
    record exactly once for a ``read_committed`` reader, each key's records in their input order.

    Each kill takes the driver, its JVM and every Python worker at once, wherever they are: planning, tasks
    appending inside their transactions, the driver's commit recording its decision or writing the markers,
    Spark writing its checkpoint. The restarted query re-runs the micro-batch Spark had not committed: the sink
    must abort the previous run's transactions (or finish its recorded decision, and then write nothing again).
    The kills must really have interrupted the query: micro-batches were committed between them, and the query
    was not finished before the last one. Once it is, no transaction is left open or half-ended.
    """
    log_dir, checkpoint = tmp_path / "logs", tmp_path / "checkpoint"
    keys = [f"k{i % KEYS}".encode() for i in range(RECORDS)]
    values = [f"r{i}".encode() for i in range(RECORDS)]
    produce(log_dir, INPUT, 4, keys, values)
    LogDirectory(log_dir).topics.create(OUTPUT, 3)
    rng = random.Random(SEED)
    history: list[str] = []
    progress: list[int] = []
    began = time.monotonic()
    for run in range(KILLS):
        before = batch_files(checkpoint, "commits")
        stderr = tmp_path / f"run-{run}.log"
        with job(log_dir, checkpoint, "run", stderr) as proc:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "started\n", f"run {run} did not start: {line!r}\n{tail(stderr)}"
            early = rng.random() < EARLY_KILLS
            if early:
                delay = rng.uniform(*EARLY_KILL_DELAY_S)
            else:
                delay = rng.uniform(*KILL_DELAY_S)
                deadline = time.monotonic() + FIRST_COMMIT_WAIT_S
                while batch_files(checkpoint, "commits") == before:
                    assert proc.poll() is None, f"run {run} ended before its first commit\n{tail(stderr)}"
                    assert time.monotonic() < deadline, f"run {run} committed nothing in {FIRST_COMMIT_WAIT_S} s"
                    time.sleep(0.05)
            time.sleep(delay)
            assert proc.poll() is None, f"run {run} ended before it was killed\n{tail(stderr)}"
            kill_session(proc)
        after = batch_files(checkpoint, "commits")
        progress.append(len(after) - len(before))
        history.append(
            f"run {run}: killed {delay:.2f} s after {'its start' if early else 'its first commit'}, "
            f"{progress[-1]} micro-batches committed (up to {after[-1] if after else None}), "
            f"killed {where_killed(log_dir, checkpoint)}"
        )
    killed_in = time.monotonic() - began
    print("\n" + "\n".join(history))
    after_kills = batch_files(checkpoint, "commits")
    committed_before_finish = len(everything(read_topic(log_dir, OUTPUT, READ_COMMITTED)))
    assert sum(1 for n in progress if n) >= KILLS // 2, history
    assert 0 < committed_before_finish < RECORDS, (
        f"{committed_before_finish} of {RECORDS} records committed before the last kill: the kills did not interrupt "
        "the query"
    )

    stderr = tmp_path / "finish.log"
    with job(log_dir, checkpoint, "finish", stderr) as proc:
        out = assert_exits_cleanly(proc, stderr, timeout=900)
    assert len(batch_files(checkpoint, "commits")) > len(after_kills)
    print(f"killed {KILLS} times in {killed_in:.0f} s; finished in {time.monotonic() - began - killed_in:.0f} s: {out}")

    committed = read_topic(log_dir, OUTPUT, READ_COMMITTED)
    uncommitted = read_topic(log_dir, OUTPUT, READ_UNCOMMITTED)
    expected = [(k, v.upper()) for k, v in zip(keys, values, strict=True)]
    assert_same_records(expected, everything(committed), "the output read with read_committed")
    print(
        f"read_committed: {len(everything(committed))} records; read_uncommitted: {len(everything(uncommitted))} "
        "(the difference: rows of aborted transactions)"
    )
    # Kafka's order: a key's records are in one input partition, read by one task per micro-batch, written by one
    # producer to one output partition, and a micro-batch commits before the next one is written.
    by_key_in: dict[bytes, list[bytes]] = {}
    for key, value in everything(read_topic(log_dir, INPUT, READ_UNCOMMITTED)):
        by_key_in.setdefault(key, []).append(value.upper())
    by_key_out: dict[bytes, list[bytes]] = {}
    for key, value in everything(committed):
        by_key_out.setdefault(key, []).append(value)
    disordered = [key for key, values_in in by_key_in.items() if by_key_out.get(key) != values_in]
    assert not disordered, f"{len(disordered)} keys' records are out of their input order, e.g. {disordered[:5]}"
    assert_nothing_hangs(log_dir)
    assert sink_decisions(log_dir)[0].batch_id == batch_files(checkpoint, "commits")[-1]


# -- task failures -------------------------------------------------------------------------------------------------

FLAKY_RECORDS = 1600
FLAKY_VALUE_BYTES = 64 * 1024
FLAKY_PREFIX = 6  # b"r<5 digits>"


@pytest.mark.timeout(900)
def test_task_failures_are_retried_without_duplicates(tmp_path: Path) -> None:
    """A task that fails after the sink appended some of its rows (master ``local[2,4]``: Spark retries it) leaves
    those rows aborted: ``read_committed`` shows every input record once, ``read_uncommitted`` the failed attempt's
    rows on top.

    The failure is deterministic: ``sink_job``'s ``mapInArrow`` makes the first attempt of one task of the second
    micro-batch wait until rows it passed on are in the output log (the sink appends every 8 MiB it gathers, and
    the rows are 64 KiB), then raise. The retry takes a new session of the task's transactional id, which aborts
    the failed attempt's transaction, and writes the task's rows again.
    """
    log_dir, checkpoint, markers = tmp_path / "logs", tmp_path / "checkpoint", tmp_path / "markers"
    markers.mkdir()
    filler = b"x" * (FLAKY_VALUE_BYTES - FLAKY_PREFIX)
    keys = [f"k{i}".encode() for i in range(FLAKY_RECORDS)]
    prefixes = [f"r{i:05d}".encode() for i in range(FLAKY_RECORDS)]
    produce(log_dir, INPUT, 2, keys, [p + filler for p in prefixes])
    LogDirectory(log_dir).topics.create(OUTPUT, 3)
    stderr = tmp_path / "flaky.log"
    began = time.monotonic()
    with job(log_dir, checkpoint, "flaky", stderr, str(markers)) as proc:
        out = assert_exits_cleanly(proc, stderr, timeout=800)
    print(f"the flaky job ran in {time.monotonic() - began:.0f} s: {out}")

    failed = markers / f"failed-{sink_job.FLAKY_BATCH}-{sink_job.FLAKY_TASK}.json"
    assert failed.exists(), f"no attempt failed: {sorted(os.listdir(markers))}\n{tail(stderr)}"
    failure = json.loads(failed.read_text())
    assert failure["attempt"] == 0 and failure["appended"], failure
    retries = sorted(p.name for p in markers.glob("retried-*"))
    assert retries == [f"retried-{sink_job.FLAKY_BATCH}-{sink_job.FLAKY_TASK}-1.json"], retries
    assert "InjectedFailure" in tail(stderr, 10**7), "Spark's log does not show the injected failure"

    committed = everything(read_topic(log_dir, OUTPUT, READ_COMMITTED, value_prefix=FLAKY_PREFIX))
    uncommitted = everything(read_topic(log_dir, OUTPUT, READ_UNCOMMITTED, value_prefix=FLAKY_PREFIX))
    assert_same_records(list(zip(keys, prefixes, strict=True)), committed, "the output read with read_committed")
    aborted = Counter(uncommitted) - Counter(committed)
    print(f"read_committed: {len(committed)} records; read_uncommitted: {len(uncommitted)}")
    assert len(uncommitted) > len(committed), "the failed attempt's appended rows are not in the log"
    assert sum(aborted.values()) == len(uncommitted) - len(committed)
    passed = {key.encode() for key in failure["passed"]}
    assert {key for key, _ in aborted} <= passed, "rows other than the failed attempt's are aborted"
    assert {key.encode() for key in failure["appended"]} <= {key for key, _ in aborted}
    assert_nothing_hangs(log_dir)


# -- a crash inside the sink's commit ------------------------------------------------------------------------------

CRASH_RECORDS = 5000  # five micro-batches of sink_job.MAX_OFFSETS_PER_TRIGGER


@pytest.mark.timeout(900)
# "before-markers" and "after-commit" take the paths of "between-markers" (the restart finishes a recorded decision)
# and of a decided batch re-run, which the protocol tests without Spark cover (test_sink_protocol.py) and the random
# kills reach: four JVM restarts spared to keep the suite within its time.
@pytest.mark.parametrize("point", ["between-markers"])
def test_a_crash_inside_the_sinks_commit_is_finished_by_the_restart(tmp_path: Path, point: str) -> None:
    """The driver dies (-9, JVM and workers with it) while the sink commits a micro-batch, at a chosen point: its
    decision recorded and no transaction committed, one of its transactions committed, or all of them (before
    Spark recorded the batch). The restarted query re-runs the micro-batch; its tasks must write nothing again and
    its commit must finish the recorded decision: every record once, and not a single aborted row in the log.

    ``sink_job``'s ``crash`` mode makes it deterministic: ``format("pysparklog_crash")`` is the sink with a commit
    that kills the job at that point (``CrashingStreamWriter``); the restart is the plain ``format("pysparklog")``.
    """
    log_dir, checkpoint = tmp_path / "logs", tmp_path / "checkpoint"
    keys = [f"k{i % KEYS}".encode() for i in range(CRASH_RECORDS)]
    values = [f"r{i}".encode() for i in range(CRASH_RECORDS)]
    produce(log_dir, INPUT, 4, keys, values)
    LogDirectory(log_dir).topics.create(OUTPUT, 3)
    began = time.monotonic()
    stderr = tmp_path / "crash.log"
    with job(log_dir, checkpoint, "crash", stderr, point) as proc:
        code = proc.wait(timeout=600)
        assert code == -signal.SIGKILL, f"the job did not crash: it exited with {code}\n{tail(stderr)}"
        kill_session(proc)  # what the crash left: PySpark's daemons (their stdin closed, they exit anyway)
    assert batch_files(checkpoint, "offsets")[-1] == sink_job.CRASH_BATCH, tail(stderr)
    assert batch_files(checkpoint, "commits") == list(range(sink_job.CRASH_BATCH)), tail(stderr)
    decision = sink_decisions(log_dir)[0]
    assert decision.batch_id == sink_job.CRASH_BATCH
    assert decision.complete is (point == "after-commit")
    states = transaction_states(log_dir)
    assert sorted(t.transactional_id for t in decision.transactions) == sorted(states)
    ended = Counter(meta.state for meta in states.values())[TransactionState.COMPLETE_COMMIT]
    assert ended == {"before-markers": 0, "between-markers": 1, "after-commit": len(states)}[point], states
    print(f"crashed {point} in {time.monotonic() - began:.0f} s: {where_killed(log_dir, checkpoint)}")

    stderr = tmp_path / "finish.log"
    with job(log_dir, checkpoint, "finish", stderr) as proc:
        assert_exits_cleanly(proc, stderr, timeout=600)
    committed = everything(read_topic(log_dir, OUTPUT, READ_COMMITTED))
    uncommitted = everything(read_topic(log_dir, OUTPUT, READ_UNCOMMITTED))
    expected = [(k, v.upper()) for k, v in zip(keys, values, strict=True)]
    assert_same_records(expected, committed, "the output read with read_committed")
    assert len(uncommitted) == len(committed), "the re-run micro-batch wrote its rows again (and aborted them)"
    assert_nothing_hangs(log_dir)
    print(f"crashed {point} and finished in {time.monotonic() - began:.0f} s")
