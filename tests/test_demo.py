"""The main job (``python -m examples.demo``, what ``make run`` runs), run for real with a short producer.

It runs in a subprocess, as a user runs it: it starts its own SparkSession with Delta Lake's jars, and a process has
one SparkContext (the suite's ``spark`` fixture has no Delta). What it left is then checked by
``tests.delta_check`` (another process with a Delta-enabled session: the Delta table compared with chispa to the
aggregates recomputed from ``orders``, and to ``order-stats`` read with ``read_committed``) and here, without Spark:
both consumer groups have committed every partition's log end offset.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from examples.demo import DELTA_GROUP, ORDERS, STATS, STATS_GROUP, STATS_QUERY, Paths
from pysparklog.offsets import OffsetStore
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition

pytestmark = [pytest.mark.slow, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[1]


def run_module(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m <args>`` from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )


def shown(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@pytest.mark.timeout(600)
def test_main_job_delivers_every_closed_window_once_to_the_topic_and_the_delta_table(tmp_path: Path) -> None:
    paths = Paths(str(tmp_path), str(tmp_path / "logs"))
    job = run_module(
        "examples.demo",
        *("--data-dir", paths.data_dir, "--log-dir", paths.log_dir, "--seconds", "12", "--rate", "400"),
        timeout=300,
    )
    assert job.returncode == 0, shown(job)
    # Spark's log (and Ivy's report) went to its file: the terminal shows the job's output only.
    assert job.stderr == "", shown(job)
    assert Path(paths.spark_log).stat().st_size > 0
    for expected in ("Progress every", "producer done", "Every order counted once", "Where everything is"):
        assert expected in job.stdout, shown(job)
    assert Path(paths.checkpoint(STATS_QUERY), "commits").is_dir()

    check = run_module("tests.delta_check", paths.log_dir, paths.delta, timeout=300)
    assert check.returncode == 0, shown(check)
    assert check.stdout.startswith("ok:"), shown(check)

    log_dir = LogDirectory(paths.log_dir)
    with OffsetStore(log_dir) as store:
        for group, topic in ((STATS_GROUP, ORDERS), (DELTA_GROUP, STATS)):
            partitions = [TopicPartition(topic, p) for p in range(log_dir.topics.get(topic).partitions)]
            positions = store.lag(group, partitions)
            assert [(p.partition, p.committed) for p in positions] == [
                (p.partition, p.log_end_offset) for p in positions
            ], f"group {group} has not committed the end of {topic}"
            assert all(p.lag == 0 and p.committed for p in positions)
