"""The partition log on an object store (``storage.objects.log``), against a real S3-compatible server on
loopback (moto's, started here): append latency and throughput with one and four writers, the requests
each appended MB costs (counted from the server's own request log), and a Spark read of 10 M records from
the store against the same read from a log directory on local disk.

Appends: each is one ``ObjectPartitionLog.append_arrow`` of 148 records of 110 bytes (10-byte keys,
100-byte values), 16 KiB of keys and values (Kafka's default ``batch.size``), so one commit object holds
one record batch of 17.8 KB, as a producer's batch would be one append. Every writer is a process of its
own (spawned: obstore's runtime does not survive a fork) with its own replica directory, as writers on
different hosts have; each warms up (numba's kernels, the store's client, its replica) and then waits for
the others and a signal, so the writers of a round start together. A round's throughput is its appends
over the wall time from the first writer's start to the last one's end. No round reaches
``SEAL_COMMITS`` commits, so none seals.

Read: 10 M records in a topic of 2 partitions, written to the store by ``ObjectPartitionLog.append_arrow``
of 100 k records at a time (1 MiB batches): each partition is 50 commits, each holding one append's twelve
record batches inline (12.1 MB). That is far below ``SEAL_COMMITS``, so nothing is sealed and a reader
builds its replica from the commits themselves. A log directory on local disk gets the same appends. One
SparkSession (2 task slots) reads both with ``bench_source``'s query, a ``Trigger.AvailableNow`` stream
into ``noop``: the store's topic first with no replica yet (cold: the replicas below
``$PYSPARKLOG_CACHE_DIR``, a temporary directory here, are built from the commits), then with the
replicas in place (cached: the read follows the commits, a few small requests per partition, then reads
the replicas), alternated with the local-disk read; the cached and local figures are the best of
two runs each. The local log and the replicas are both on tmpfs when the machine has one. The Spark
processes find the server through the ``AWS_*`` variables set before the session starts.

This part runs in a child process with a JVM of its own, on all cores: the server (one Python process)
and the writers or Spark share them.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path

from benchmarks.bench_source import PARTITIONS, WARM_TOPIC, into_noop, stream_of, write_topic, write_warm_up_topic
from benchmarks.common import (
    KEY_BYTES,
    TOPIC,
    VALUE_BYTES,
    Result,
    child_main,
    local_spark,
    rate,
    records_table,
    run_in_child,
)
from pysparklog.storage.io import storage_for
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.objects.commit_log import CommitLog
from pysparklog.storage.objects.log import CACHE_DIR_VARIABLE, ObjectPartitionLog
from tests.s3_server import s3_server, store_proxy

BUCKET = "pysparklog-bench"
RECORD_BYTES = KEY_BYTES + VALUE_BYTES
RECORDS_PER_APPEND = 16 * 1024 // RECORD_BYTES
APPENDS = 300
APPENDS_PER_WRITER = 150  # by each writer on a partition of its own
RACING_APPENDS = 75  # by each writer racing for one partition
BARE_COMMITS = 50
WARM_UP_APPENDS = 10
WRITERS = 4
READ_RECORDS = 10_000_000
RECORDS_PER_COMMIT = 100_000
COMMIT_P50_TARGET_MS = 50.0
SCALING_TARGET = 2.5
CACHED_READ_TARGET = 0.7
FIRST_READ_TARGET = 0.5
#: The round trip of every request of the reads, as S3 Standard answers a small one.
READ_ROUND_TRIP_MS = 20.0
_MODULE = "benchmarks.bench_object_store"
_SERVER = "moto_server"
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)?([A-Z]+) /')  # moto colours the request line of an error reply
_WAIT_SECONDS = 600
_LOG_DELAY_SECONDS = 0.2


# -- appends ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Appends:
    """One writer's timed appends: each one's seconds, and when the first began and the last ended."""

    seconds: list[float]
    started: float
    ended: float


@dataclass(frozen=True, slots=True)
class _Round:
    """A round of writers appending at once: every append's seconds, the round's wall time, the server's CPU
    seconds and the requests it answered meanwhile."""

    seconds: list[float]
    wall: float
    server_cpu: float
    requests: Counter[str]

    @property
    def appends_per_second(self) -> float:
        return len(self.seconds) / self.wall

    def quantile_ms(self, percent: int) -> float:
        return statistics.quantiles(self.seconds, n=100)[percent - 1] * 1000


def _writer(
    root: str, partition: int, appends: int, cache_dir: str, warm: Barrier, go: Event, results: Queue[_Appends]
) -> None:
    """A writer process: warm up, wait for the others and the signal, then time ``appends`` appends to one
    partition."""
    table = records_table((WARM_UP_APPENDS + appends) * RECORDS_PER_APPEND)
    slices = [table.slice(i * RECORDS_PER_APPEND, RECORDS_PER_APPEND) for i in range(WARM_UP_APPENDS + appends)]
    with ObjectPartitionLog(storage_for(f"s3://{BUCKET}/{root}"), TOPIC, partition, cache_dir=cache_dir) as log:
        for records in slices[:WARM_UP_APPENDS]:
            log.append_arrow(records)
        warm.wait(_WAIT_SECONDS)
        go.wait(_WAIT_SECONDS)
        seconds = []
        started = time.perf_counter()  # CLOCK_MONOTONIC: the same clock in every process
        for records in slices[WARM_UP_APPENDS:]:
            start = time.perf_counter()
            log.append_arrow(records)
            seconds.append(time.perf_counter() - start)
    results.put(_Appends(seconds, started, time.perf_counter()))


def _append_round(work: str, server_log: Path, root: str, partitions: list[int], appends: int) -> _Round:
    """One process per entry of ``partitions`` appending ``appends`` times to it, all at once."""
    context = multiprocessing.get_context("spawn")  # obstore's runtime does not survive a fork
    warm, go = context.Barrier(len(partitions) + 1), context.Event()
    results: Queue[_Appends] = context.Queue()
    writers = [
        context.Process(
            target=_writer,
            args=(root, partition, appends, os.path.join(work, f"{root}-{n}"), warm, go, results),
        )
        for n, partition in enumerate(partitions)
    ]
    for writer in writers:
        writer.start()
    try:
        warm.wait(_WAIT_SECONDS)
        cpu, requests = _server_cpu_seconds(), _requests(server_log)  # the warm-ups' requests are done
        go.set()
        outcomes = [results.get(timeout=_WAIT_SECONDS) for _ in writers]
        cpu, requests = _server_cpu_seconds() - cpu, _requests(server_log) - requests
    finally:
        for writer in writers:
            writer.join(_WAIT_SECONDS)
    if any(writer.exitcode != 0 for writer in writers):
        raise RuntimeError(f"a writer failed: exit codes {[writer.exitcode for writer in writers]}")
    wall = max(o.ended for o in outcomes) - min(o.started for o in outcomes)
    return _Round([s for o in outcomes for s in o.seconds], wall, cpu, requests)


def _requests(server_log: Path) -> Counter[str]:
    """Requests the server answered so far, by method, from its access log (read after a pause: the server logs
    a request once it has answered it)."""
    time.sleep(_LOG_DELAY_SECONDS)
    return Counter(_REQUEST.findall(server_log.read_text(errors="replace")))


def _bare_commit_requests(server_log: Path) -> Counter[str]:
    """The requests of ``BARE_COMMITS`` bare ``CommitLog.append`` of a body of one append's size: the sequencer
    alone, without the partition log's work."""
    storage = storage_for(f"s3://{BUCKET}/bare")
    commits = CommitLog(storage, storage.join(f"{TOPIC}-0"))
    body = os.urandom(RECORDS_PER_APPEND * RECORD_BYTES)
    commits.append(lambda number, previous: body)  # the first commit lists: not a steady-state append
    before = _requests(server_log)
    for _ in range(BARE_COMMITS):
        commits.append(lambda number, previous: body)
    return _requests(server_log) - before


def _server_cpu_seconds() -> float:
    """The CPU seconds (user and system) the server, a child process of this one, has used so far."""
    with open(f"/proc/self/task/{os.getpid()}/children", encoding="ascii") as f:
        children = f.read().split()
    for pid in children:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if _SERVER.encode() not in f.read():
                continue
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the fields after the command's name, from the 3rd
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError(f"no {_SERVER} process among this process's children {children}")


# -- the Spark read --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Reads:
    """Seconds of the writes and reads of the 10 M records, and the requests of the two kinds of object-store read."""

    store_write: float
    cold: float
    cached: float
    local: float
    cold_requests: Counter[str]
    cached_requests: Counter[str]


@contextmanager
def _cache_dir(path: str) -> Iterator[None]:
    """``$PYSPARKLOG_CACHE_DIR`` set to ``path`` meanwhile: the replicas of this process and of the Spark
    processes it starts."""
    saved = os.environ.get(CACHE_DIR_VARIABLE)
    os.environ[CACHE_DIR_VARIABLE] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CACHE_DIR_VARIABLE, None)
        else:
            os.environ[CACHE_DIR_VARIABLE] = saved


def _write_read_data(url: str, local: str, writer_cache: str) -> float:
    """Write the 10 M records and the warm-up topic to the store and to local disk; returns the seconds of the
    store's 10 M. The writer's replicas are removed, so that the reads find none."""
    table = records_table(READ_RECORDS)
    with _cache_dir(writer_cache):
        started = time.perf_counter()
        write_topic(LogDirectory(url), TOPIC, table, PARTITIONS, RECORDS_PER_COMMIT)
        seconds = time.perf_counter() - started
        write_warm_up_topic(LogDirectory(url))
    shutil.rmtree(writer_cache)
    logs = LogDirectory(local)
    write_topic(logs, TOPIC, table, PARTITIONS, RECORDS_PER_COMMIT)
    write_warm_up_topic(logs)
    return seconds


def _reads(work: str, server_log: Path, endpoint: str) -> _Reads:
    url, local = f"s3://{BUCKET}/read", os.path.join(work, "logs")
    store_write = _write_read_data(url, local, os.path.join(work, "writer-replicas"))
    checkpoints = (os.path.join(work, f"checkpoint-{n}") for n in range(100))
    # Spark's processes reach the store through a proxy delaying every request by a real store's round trip.
    with _cache_dir(os.path.join(work, "replicas")), _delayed(endpoint, Path(work) / "proxy.log"):
        spark = local_spark("pysparklog-bench-object-store", PARTITIONS)
        try:

            def read(path: str) -> float:
                return into_noop(stream_of(spark, path, TOPIC), next(checkpoints))[0]

            def store_read() -> tuple[float, Counter[str]]:
                before = _requests(server_log)
                seconds = read(url)
                return seconds, _requests(server_log) - before

            for path in (local, url):
                into_noop(stream_of(spark, path, WARM_TOPIC), next(checkpoints))
            local_runs = [read(local)]
            cold, cold_requests = store_read()
            cached, cached_requests = store_read()
            local_runs.append(read(local))
            cached = min(cached, store_read()[0])
        finally:
            spark.stop()
    return _Reads(store_write, cold, cached, min(local_runs), cold_requests, cached_requests)


@contextmanager
def _delayed(endpoint: str, log: Path) -> Iterator[None]:
    """``AWS_ENDPOINT_URL`` pointing at a proxy of ``endpoint`` that delays every request by ``READ_ROUND_TRIP_MS``,
    for the processes started meanwhile (a SparkSession's)."""
    with store_proxy(endpoint, log, delay_ms=READ_ROUND_TRIP_MS) as proxy:
        saved = os.environ["AWS_ENDPOINT_URL"]
        os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
        try:
            yield
        finally:
            os.environ["AWS_ENDPOINT_URL"] = saved


# -- the rows --------------------------------------------------------------------------------------


def _measure() -> list[Result]:
    root = tempfile.mkdtemp(prefix="pysparklog-bench-s3-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        server_log = Path(root) / "moto.log"
        with s3_server(BUCKET, server_log) as endpoint:
            bare = _bare_commit_requests(server_log)
            one = _append_round(root, server_log, "one", [0], APPENDS)
            spread = _append_round(root, server_log, "spread", list(range(WRITERS)), APPENDS_PER_WRITER)
            racing = _append_round(root, server_log, "racing", [0] * WRITERS, RACING_APPENDS)
            reads = _reads(root, server_log, endpoint)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return _append_rows(one, bare, spread, racing) + _read_rows(reads)


def _per_megabyte(requests: Counter[str], bare: Counter[str]) -> str:
    megabytes = APPENDS * RECORDS_PER_APPEND * RECORD_BYTES / 1e6
    per_mb = ", ".join(f"{count / megabytes:.0f} {method}" for method, count in sorted(requests.items()))
    return f"{per_mb} ({_per(requests, APPENDS)} per append; a bare `CommitLog.append`: {_per(bare, BARE_COMMITS)})"


def _per(requests: Counter[str], times: int) -> str:
    return ", ".join(f"{count / times:.1f} {method}" for method, count in sorted(requests.items()))


def _requests_figure(requests: Counter[str]) -> str:
    return ", ".join(f"{count} {method}" for method, count in sorted(requests.items()))


def _append_rows(one: _Round, bare: Counter[str], spread: _Round, racing: _Round) -> list[Result]:
    append = f"`append_arrow` of {RECORDS_PER_APPEND} records (16 KiB)"
    p50 = one.quantile_ms(50)
    scaling = spread.appends_per_second / one.appends_per_second
    megabytes_per_second = one.appends_per_second * RECORDS_PER_APPEND * RECORD_BYTES / 1e6
    return [
        Result(
            f"object store: {append}, one writer ({APPENDS} appends, moto server on loopback)",
            f"p50 {p50:.1f} ms, p99 {one.quantile_ms(99):.1f} ms; {one.appends_per_second:.0f} appends/s "
            f"({megabytes_per_second:.2f} MB/s)",
            f"p50 < {COMMIT_P50_TARGET_MS:.0f} ms",
            p50 < COMMIT_P50_TARGET_MS,
        ),
        Result(
            "object store: requests per appended MB of keys and values, one writer",
            _per_megabyte(one.requests, bare),
        ),
        Result(
            f"object store: {WRITERS} writer processes on {WRITERS} partitions ({APPENDS_PER_WRITER} appends each), "
            f"appends/s against one writer's (one moto process serves them, on the same {os.cpu_count()} cores)",
            f"{spread.appends_per_second:.0f} against {one.appends_per_second:.0f} ({scaling:.2f}x); p50 "
            f"{spread.quantile_ms(50):.1f} ms; server busy {spread.server_cpu / spread.wall:.0%} of the time "
            f"(one writer: {one.server_cpu / one.wall:.0%})",
            f">= {SCALING_TARGET}x",
            scaling >= SCALING_TARGET,
        ),
        Result(
            f"object store: {WRITERS} writer processes racing for one partition ({RACING_APPENDS} appends each)",
            f"{racing.appends_per_second:.0f} appends/s, p50 {racing.quantile_ms(50):.1f} ms, "
            f"p99 {racing.quantile_ms(99):.1f} ms",
        ),
    ]


def _read_rows(reads: _Reads) -> list[Result]:
    ratio, first_ratio = reads.local / reads.cached, reads.local / reads.cold
    shape = (
        f"{READ_RECORDS // 1_000_000} M records into `noop`, {PARTITIONS} tasks, {READ_ROUND_TRIP_MS:.0f} ms a request"
    )
    return [
        Result(
            f"object store: writing the {READ_RECORDS // 1_000_000} M records, `append_arrow` of "
            f"{RECORDS_PER_COMMIT // 1000} k records per commit ({PARTITIONS} partitions, one after the other)",
            f"{rate(READ_RECORDS / reads.store_write)} ({reads.store_write:.1f} s)",
        ),
        Result(
            f"object store: AvailableNow read of {shape}, first read (replicas built from the commits)",
            f"{rate(READ_RECORDS / reads.cold)} ({_requests_figure(reads.cold_requests)})",
        ),
        Result(
            "object store: the same read again (replicas on local disk)",
            f"{rate(READ_RECORDS / reads.cached)} ({_requests_figure(reads.cached_requests)})",
        ),
        Result("object store: the same read from a log directory on local disk", rate(READ_RECORDS / reads.local)),
        Result(
            "object store: cached read / local-disk read throughput",
            f"{ratio:.2f}",
            f">= {CACHED_READ_TARGET}",
            ratio >= CACHED_READ_TARGET,
        ),
        Result(
            "object store: first read / local-disk read throughput",
            f"{first_ratio:.2f}",
            f">= {FIRST_READ_TARGET}",
            first_ratio >= FIRST_READ_TARGET,
        ),
    ]


def run() -> list[Result]:
    """The measurements, in a child process on all cores with a JVM of its own."""
    return run_in_child(_MODULE)


def main() -> None:
    child_main(_MODULE, os.cpu_count() or 1, _measure)


if __name__ == "__main__":
    main()
