"""Run the example pipelines and notebooks one after another in one Python process, on one Spark JVM.

Each example is a script (``python -m examples.<name> args``) and each notebook a script once its ``# MAGIC``
lines are dropped; each starts (or finds) its SparkSession with ``getOrCreate``. Run in one interpreter, they
find the session this runner started first, with Delta's jars, as notebooks attached to one cluster do: the
tests pay for one JVM start instead of one per script (about 7 s each on two cores). Everything else is as
when a user runs them: ``runpy`` runs the module or file as ``__main__`` with its own ``sys.argv`` and
environment, from the checkout.

The runner is ``python -m tests.pipeline_runner JOBS.json``; ``run_pipelines`` starts it and splits its output
into one ``PipelineRun`` per job. A job's section of standard output sits between two marker lines, and the end
marker carries its exit status, its duration and the streaming queries it left running (stopped by the runner,
so that one job's leftovers do not load the next).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pysparklog.spark.session import local_spark

REPO = Path(__file__).resolve().parents[1]
_BEGIN = "@@@ pipeline-runner begin "
_END = "@@@ pipeline-runner end "
_END_LINE = re.compile(
    rf"^{re.escape(_END)}(?P<id>\S+) rc=(?P<rc>-?\d+) seconds=(?P<seconds>[\d.]+) left=(?P<left>\d+)$"
)


@dataclass(frozen=True)
class PipelineJob:
    """One script to run: a module (``python -m module argv...``) or a file (``python path argv...``)."""

    id: str
    module: str | None = None
    path: str | None = None
    argv: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineRun:
    """What one job printed, and how it ended: ``returncode`` is None if the runner never finished it."""

    returncode: int | None
    output: str
    seconds: float
    queries_left_running: int

    def describe(self, job_id: str, stderr_tail: str) -> str:
        """A failure message: the status and the ends of both outputs."""
        status = "did not finish" if self.returncode is None else f"exited with {self.returncode}"
        return (
            f"{job_id} {status} after {self.seconds:.0f} s\n--- its output\n{self.output[-6000:]}\n"
            f"--- the runner's stderr\n{stderr_tail}"
        )


# -- the runner (in its own process) ----------------------------------------------------------------------------------


@contextmanager
def _environment(overrides: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(overrides)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run_job(job: PipelineJob) -> int:
    """Run one job as ``__main__``; its exit status (1 for an exception, whose traceback goes to stdout)."""
    target = job.module if job.module is not None else job.path
    assert target is not None, f"job {job.id} names neither a module nor a path"
    sys.argv = [target, *job.argv]
    try:
        with _environment(job.env):
            if job.module is not None:
                runpy.run_module(job.module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # noqa: BLE001 - any failure of the job is its result, and the next job still runs
        traceback.print_exc(file=sys.stdout)
        return 1
    return 0


def main(jobs_file: str) -> int:
    """Start the shared session (Delta's jars, a warehouse under the work directory), then run each job."""
    spec = json.loads(Path(jobs_file).read_text())
    jobs = [PipelineJob(**job) for job in spec["jobs"]]
    spark = local_spark(
        "pysparklog-pipelines",
        delta=True,
        conf={
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",  # short jobs: C1 only starts faster
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.warehouse.dir": spec["warehouse"],
        },
    )
    for job in jobs:
        print(f"{_BEGIN}{job.id}", flush=True)
        began = time.monotonic()
        code = _run_job(job)
        left = spark.streams.active
        for query in left:
            query.stop()
        sys.stdout.flush()
        print(f"{_END}{job.id} rc={code} seconds={time.monotonic() - began:.1f} left={len(left)}", flush=True)
    return 0


# -- the tests' side --------------------------------------------------------------------------------------------------


def _split(output: str, ids: Sequence[str], total_seconds: float) -> dict[str, PipelineRun]:
    """Each job's section of the runner's output; a job without an end line did not finish."""
    runs: dict[str, PipelineRun] = {}
    sections = output.split("\n" + _BEGIN)
    for section in sections[1:]:
        job_id, _, body = section.partition("\n")
        lines = body.rstrip("\n").split("\n")
        end = _END_LINE.match(lines[-1]) if lines else None
        if end is not None and end["id"] == job_id:
            runs[job_id] = PipelineRun(
                int(end["rc"]), "\n".join(lines[:-1]) + "\n", float(end["seconds"]), int(end["left"])
            )
        else:
            runs[job_id] = PipelineRun(None, body, total_seconds, 0)
    for job_id in ids:
        runs.setdefault(job_id, PipelineRun(None, "", 0.0, 0))
    return runs


def run_pipelines(jobs: Sequence[PipelineJob], work: Path, timeout: float) -> tuple[dict[str, PipelineRun], Path]:
    """Run ``jobs`` in one runner process from the checkout; each job's run and the runner's stderr file.

    The runner is killed with everything it started (its JVM, the Python workers) after ``timeout`` seconds.
    """
    work.mkdir(parents=True, exist_ok=True)
    jobs_file = work / "jobs.json"
    jobs_file.write_text(
        json.dumps(
            {
                "warehouse": str(work / "spark-warehouse"),
                "jobs": [asdict(job) | {"argv": list(job.argv)} for job in jobs],
            }
        )
    )
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",  # the JVM (console sinks) and Python share the pipe: keep their order
        "MPLBACKEND": "Agg",
    }
    stderr_path = work / "runner.stderr"
    began = time.monotonic()
    with (
        open(stderr_path, "w", encoding="utf-8") as stderr,
        subprocess.Popen(
            [sys.executable, "-m", "tests.pipeline_runner", str(jobs_file)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # so that a hung run is stopped with its JVM and workers
        ) as process,
    ):
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
    return _split("\n" + output, [job.id for job in jobs], time.monotonic() - began), stderr_path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
