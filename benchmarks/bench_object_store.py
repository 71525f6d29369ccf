"""The object store's sequencer (``storage.commit_log`` over ``ObjectStorage``) against a real S3-compatible
server on loopback (moto's, started here): commit latency, throughput with one and four writers, and the
requests each appended MB costs (counted from the server's own request log).

A commit here is one append of a 16 KiB body (Kafka's default ``batch.size``): what one partition's
append costs in requests and time before the engine's own work, which docs/object-storage.md builds on it.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import Result, markdown
from pysparklog.storage.commit_log import Commit, CommitLog
from pysparklog.storage.io.object_store import ObjectStorage
from tests.s3_server import s3_server

BUCKET = "pysparklog-bench"
BODY = os.urandom(16 * 1024)
APPENDS = 300
WRITERS = 4
COMMIT_P50_TARGET_MS = 50.0
SCALING_TARGET = 2.5


def _body(number: int, previous: Commit | None) -> bytes:
    return BODY


def _timed_appends(root: str, partition: str, appends: int) -> list[float]:
    """Seconds of each of ``appends`` commits to one partition."""
    storage = ObjectStorage(f"s3://{BUCKET}/{root}")
    log = CommitLog(storage, storage.join(partition))
    seconds = []
    for _ in range(appends):
        start = time.perf_counter()
        log.append(_body)
        seconds.append(time.perf_counter() - start)
    return seconds


def _writers(root: str, partitions: list[str], appends: int) -> tuple[float, list[float]]:
    """(wall seconds, every commit's seconds) of one process per entry of ``partitions`` appending at once."""
    context = multiprocessing.get_context("spawn")  # obstore's runtime does not survive a fork
    with context.Pool(len(partitions)) as pool:
        start = time.perf_counter()
        results = pool.starmap(_timed_appends, [(root, partition, appends) for partition in partitions])
        wall = time.perf_counter() - start
    return wall, [s for seconds in results for s in seconds]


def _requests(log: Path) -> Counter[str]:
    """Requests the server answered, by method, from its access log."""
    counts: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        for method in ("GET", "PUT", "HEAD", "POST", "DELETE"):
            if f'"{method} ' in line:
                counts[method] += 1
    return counts


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run() -> list[Result]:
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))  # the server and the writers share the machine
    try:
        return _run()
    finally:
        os.sched_setaffinity(0, pinned)


def _run() -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-") as work:
        server_log = Path(work) / "moto.log"
        with s3_server(BUCKET, server_log):
            _timed_appends("warm-up", "t-0", 10)
            before = _requests(server_log)
            one = _timed_appends("one", "t-0", APPENDS)
            used = _requests(server_log) - before
            one_wall = sum(one)
            spread_wall, _spread = _writers("spread", [f"t-{n}" for n in range(WRITERS)], APPENDS)
            shared_wall, shared = _writers("shared", ["t-0"] * WRITERS, APPENDS)
    megabytes = APPENDS * len(BODY) / 1e6
    p50 = statistics.median(one)
    scaling = (WRITERS * APPENDS / spread_wall) / (APPENDS / one_wall)
    per_mb = ", ".join(f"{count / megabytes:.0f} {method}" for method, count in sorted(used.items()))
    return [
        Result(
            f"object store: commit of one 16 KiB append, one writer ({APPENDS} commits, moto server on loopback)",
            f"p50 {_ms(p50)}, p99 {_ms(statistics.quantiles(one, n=100)[98])}",
            f"p50 < {COMMIT_P50_TARGET_MS:.0f} ms",
            p50 * 1000 < COMMIT_P50_TARGET_MS,
        ),
        Result("object store: requests per appended MB, one writer", per_mb),
        Result(
            f"object store: {WRITERS} writers on {WRITERS} partitions, commits/s against one writer's",
            f"{WRITERS * APPENDS / spread_wall:.0f} against {APPENDS / one_wall:.0f} ({scaling:.2f}x)",
            f">= {SCALING_TARGET}x",
            scaling >= SCALING_TARGET,
        ),
        Result(
            f"object store: {WRITERS} writers racing for one partition",
            f"{WRITERS * APPENDS / shared_wall:.0f} commits/s, p50 {_ms(statistics.median(shared))}, "
            f"p99 {_ms(statistics.quantiles(shared, n=100)[98])}",
        ),
    ]


def main() -> None:
    print(markdown(run()))


if __name__ == "__main__":
    main()
