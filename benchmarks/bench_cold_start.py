"""Cold start: how soon a fresh process has its first batch, and what the compiled kernels cost once it runs.

A fresh process is what a Spark Python worker is on a new node, in a new container or with the package
in a read-only site-packages: numba's cache (``NUMBA_CACHE_DIR``) is empty, so with numba's JIT every
kernel the first read calls is compiled before its first batch. The package's wheel carries the kernels
compiled ahead of time (``pysparklog/compiled.py``). Here the wheel is built from this checkout
(``pip wheel``, in the isolated environment of its ``[build-system]``) and installed with
``pip install --no-deps --target`` into a temporary directory; each child python runs from another
temporary directory with that one first on ``PYTHONPATH`` and a new, empty ``NUMBA_CACHE_DIR``, and reads
the first chunk of a 100 k-record partition (``LogDirectory(...).partition(...).read_arrow``). Its time runs
from the parent's spawn to the child holding the batch: interpreter start, imports and the read. The
same children then run with ``PYSPARKLOG_KERNELS=jit``, once with an empty cache each and once with a
cache an earlier child filled. The files are in the page cache for all of them: a new machine's disk
would add the same to each.

Throughput: the decode and encode rows of ``bench_records`` (uncompressed, 1 MiB batches), with the
compiled kernels and with the JIT's, taking turns in the same process.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyarrow as pa

from benchmarks import bench_records
from benchmarks.common import RECORDS, REPO, Result, Timing, markdown, measure, pin_to_one_core, records_table
from pysparklog import LogDirectory, compiled
from pysparklog.storage.records import arrow_records

FIRST_BATCH_TARGET_S = 2.0
THROUGHPUT_RATIO_TARGET = 0.9  # compiled / JIT: within the noise of this shared machine
PARTITION_RECORDS = 100_000
TOPIC = "cold"

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy, pyarrow  # what every reader of Arrow batches imports anyway: timed apart
    libraries = time.time()
    import pysparklog
    from pysparklog import LogDirectory
    from pysparklog.storage.records import kernels
    imported = time.time()
    batch = next(iter(LogDirectory(sys.argv[1]).partition(sys.argv[2], 0).read_arrow(0)))
    done = time.time()
    print(json.dumps({"libraries": libraries, "imported": imported, "done": done, "rows": batch.num_rows,
                      "kernels": kernels.KERNELS, "numba": "numba" in sys.modules, "package": pysparklog.__file__}))
    """
)


def build_and_install(scratch: Path) -> Path:
    """The wheel of this checkout, installed into ``scratch/site``; returns that directory."""
    wheels, site = scratch / "wheels", scratch / "site"
    pip = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO)], capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{built.stderr}")
    (wheel,) = wheels.glob("pysparklog-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    return site


def first_batch(site: Path, log_dir: Path, numba_cache: Path, kernels: str | None) -> dict[str, float]:
    """One fresh child's times (seconds from its spawn: ``libraries``, ``imported``, ``done``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", compiled.IMPLEMENTATION_VARIABLE)}
    env |= {"PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(numba_cache)}
    if kernels is not None:
        env[compiled.IMPLEMENTATION_VARIABLE] = kernels
    with tempfile.TemporaryDirectory(prefix="pysparklog-cold-") as cwd:
        spawned = time.time()
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(log_dir), TOPIC], env=env, cwd=cwd, check=True, capture_output=True
        )
    child = json.loads(out.stdout)
    if not child["package"].startswith(str(site)) or child["kernels"] != (kernels or compiled.AOT):
        raise RuntimeError(f"the child did not run the installed wheel's {kernels or compiled.AOT} kernels: {child}")
    if kernels is None and child["numba"]:
        raise RuntimeError("the child with the compiled kernels imported numba")
    return {key: child[key] - spawned for key in ("libraries", "imported", "done")}


def _row(what: str, runs: list[dict[str, float]], target: bool = False) -> Result:
    timing = Timing([r["done"] for r in runs])
    libraries = statistics.median(r["libraries"] for r in runs)
    imported = statistics.median(r["imported"] for r in runs)
    figure = (
        f"{timing.median:.2f} s (best {timing.best:.2f}; numpy and pyarrow imported at {libraries:.2f} s, "
        f"pysparklog at {imported:.2f} s)"
    )
    if not target:
        return Result(what, figure)
    return Result(what, figure, f"< {FIRST_BATCH_TARGET_S:.0f} s", timing.median < FIRST_BATCH_TARGET_S)


def run_cold_start(scratch: Path, repeats: int) -> list[Result]:
    site = build_and_install(scratch)
    log_dir = scratch / "logs"
    LogDirectory(str(log_dir)).partition(TOPIC, 0).append_arrow(records_table(PARTITION_RECORDS))

    def empty_cache() -> Path:
        return Path(tempfile.mkdtemp(prefix="numba-cache-", dir=scratch))

    aot = [first_batch(site, log_dir, empty_cache(), None) for _ in range(repeats)]
    jit_cold = [first_batch(site, log_dir, empty_cache(), compiled.JIT) for _ in range(repeats)]
    warm = empty_cache()
    first_batch(site, log_dir, warm, compiled.JIT)  # fills it
    jit_warm = [first_batch(site, log_dir, warm, compiled.JIT) for _ in range(repeats)]
    where = "installed wheel, empty numba cache"
    return [
        _row(f"first batch of a fresh process, compiled kernels ({where}; numba not imported)", aot, target=True),
        _row(f"first batch of a fresh process, numba's JIT ({where})", jit_cold),
        _row("first batch of a fresh process, numba's JIT with a warm cache", jit_warm),
    ]


def run_throughput(table: pa.Table, rounds: int) -> list[Result]:
    """Decode and encode with each implementation in turn, ``rounds`` times: medians of all their repeats."""
    settings = bench_records.UNCOMPRESSED.settings
    chunks = list(arrow_records.encode_arrow(table, settings))
    data_bytes = sum(len(chunk.data) for chunk in chunks)
    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for which in (compiled.AOT, compiled.JIT):
            with compiled.using(which):
                decode = measure(lambda: bench_records.decode(chunks), 3)
                encode = measure(lambda: bench_records.encode(table, settings), 3)
            seconds.setdefault(("decode", which), []).extend(decode.seconds)
            seconds.setdefault(("encode", which), []).extend(encode.seconds)
    results = []
    for what in ("decode", "encode"):
        aot, jit = Timing(seconds[(what, compiled.AOT)]), Timing(seconds[(what, compiled.JIT)])
        for which, timing in ((compiled.AOT, aot), (compiled.JIT, jit)):
            name = "compiled ahead of time" if which == compiled.AOT else "numba's JIT"
            results.append(
                Result(
                    f"{what} {'to' if what == 'decode' else 'from'} Arrow, {bench_records.UNCOMPRESSED.name}, {name}",
                    f"{data_bytes / timing.median / 1e6:.0f} MB/s, {RECORDS / timing.median / 1e6:.2f} M rec/s "
                    f"(best {data_bytes / timing.best / 1e6:.0f} MB/s)",
                )
            )
        ratio = jit.median / aot.median
        results.append(
            Result(
                f"{what}: compiled / JIT throughput",
                f"{ratio:.2f}",
                f">= {THROUGHPUT_RATIO_TARGET}",
                ratio >= THROUGHPUT_RATIO_TARGET,
            )
        )
    return results


def run(table: pa.Table | None = None, *, repeats: int = 3, rounds: int = 3) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="pysparklog-bench-cold-") as scratch:
        results = run_cold_start(Path(scratch), repeats)
    return results + run_throughput(records_table() if table is None else table, rounds)


def main() -> None:
    pin_to_one_core()
    print(markdown(run()))


if __name__ == "__main__":
    main()
