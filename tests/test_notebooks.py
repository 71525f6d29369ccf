"""The notebooks of ``examples/notebooks/`` run, top to bottom, as plain Python scripts.

Each notebook is in Databricks' source format: a ``# Databricks notebook source`` first line, cells separated
by ``# COMMAND ----------`` lines, markdown cells as ``# MAGIC %md`` then ``# MAGIC ...`` lines. Dropping the
header and every ``# MAGIC`` line leaves the code cells in order, a script that runs anywhere; its last cell
asserts the pipeline's result, so a notebook that stopped working fails here.

Each notebook runs in its own interpreter (so its own Spark JVM, as on a fresh cluster) from the checkout, with
its parameters cell pointed at a temporary directory through the environment. The notebooks are queued at once and
run two at a time, each test waiting for its own; they take 20 to 70 s each alone on two cores, about four minutes
in all (the notebooks are mostly CPU-bound, so two at a time gains little over one at a time on a busy machine).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import BROKER_LOG_DIR, REPO

pytestmark = [pytest.mark.slow, pytest.mark.spark]

NOTEBOOKS_DIR = REPO / "examples" / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))
HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
#: The one notebook whose parameters cell takes a broker's log directory.
BROKER_NOTEBOOK = "06_broker_log_analysis"
#: Longest run of one notebook, in seconds (the slowest, 04_delta_to_log, takes 45 to 110 s on two cores).
NOTEBOOK_TIMEOUT = 240
#: Notebooks running at once.
PARALLEL = 2


def cells(text: str) -> list[str]:
    """A Databricks source notebook's cells (without the header line), in order."""
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        raise ValueError(f"not a Databricks source notebook: the first line is not {HEADER!r}")
    return [cell.strip("\n") for cell in re.split(rf"^{re.escape(SEPARATOR)}$", "\n".join(lines[1:]), flags=re.M)]


def is_markdown(cell: str) -> bool:
    return cell.startswith(f"{MAGIC} %md")


def to_script(text: str) -> str:
    """The notebook as a plain Python script: its code cells, in order, with the separators as comments; the
    header line and the ``# MAGIC`` lines (markdown and other magic commands) dropped."""
    kept = [line for line in text.splitlines()[1:] if not line.startswith(MAGIC)]
    return "\n".join(kept) + "\n"


def test_notebooks_are_there() -> None:
    assert [path.stem[:2] for path in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 8)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_databricks_source_format(path: Path) -> None:
    text = path.read_text()
    assert text.startswith(HEADER + "\n"), "the first line must be the Databricks header"
    separators = text.count(SEPARATOR)
    assert separators >= 3, f"at least 3 {SEPARATOR!r} lines"
    assert len(re.findall(rf"[^\n]\n\n{re.escape(SEPARATOR)}\n\n[^\n]", text)) == separators, (
        f"each {SEPARATOR!r} line has one blank line before and after it, as Databricks exports it"
    )
    notebook_cells = cells(text)
    assert all(notebook_cells), "empty cell"
    markdown = [cell for cell in notebook_cells if is_markdown(cell)]
    assert len(markdown) >= 2, "at least two markdown cells"
    for cell in notebook_cells:
        magic = [line.startswith(MAGIC) for line in cell.splitlines()]
        assert all(magic) or not any(magic), f"a cell mixes # MAGIC lines and code:\n{cell}"
    assert not is_markdown(notebook_cells[-1]), "the last cell must be code (the one that checks the result)"


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    seconds: float


def run_notebook(path: Path, work: Path) -> Run:
    """Convert ``path`` to a script and run it from the checkout, its parameters pointed into ``work``."""
    work.mkdir(parents=True)
    script = work / f"{path.stem}.py"
    script.write_text(to_script(path.read_text()))
    env = {
        **os.environ,
        "PYSPARKLOG_NOTEBOOK_DIR": str(work / "data"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "MPLBACKEND": "Agg",
        # Quicker JVM start-up and no progress bars in the output; the notebooks' own settings are untouched.
        "PYSPARK_SUBMIT_ARGS": "--driver-java-options -XX:TieredStopAtLevel=1 "
        "--conf spark.ui.showConsoleProgress=false pyspark-shell",
    }
    if path.stem == BROKER_NOTEBOOK:
        env["PYSPARKLOG_BROKER_LOG_DIR"] = str(BROKER_LOG_DIR)
    start = time.monotonic()
    # A session of its own, so that a notebook that hangs is stopped with everything it started (Spark's JVM).
    with subprocess.Popen(
        [sys.executable, str(script)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=NOTEBOOK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            output += f"\n[stopped after {NOTEBOOK_TIMEOUT} s]"
    return Run(process.returncode, output, time.monotonic() - start)


@pytest.fixture(scope="module")
def notebook_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Run]]]:
    """The runs of the notebooks whose ``test_notebook_runs`` is selected, all queued at once on ``PARALLEL``
    workers in the tests' order; each test waits for its own."""
    selected = [
        item.callspec.params["path"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_notebook_runs"
    ]
    base = tmp_path_factory.mktemp("notebooks")
    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="notebook") as pool:
        runs = {path.stem: pool.submit(run_notebook, path, base / path.stem) for path in selected}
        yield runs
        for run in runs.values():
            run.cancel()


# A test waits for its notebook only: the notebook started at the latest when the previous test's finished.
@pytest.mark.timeout(NOTEBOOK_TIMEOUT + 60)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs(path: Path, notebook_runs: dict[str, Future[Run]]) -> None:
    run = notebook_runs[path.stem].result()
    tail = "\n".join(run.output.splitlines()[-60:])
    assert run.returncode == 0, f"{path.name} failed (exit {run.returncode}, {run.seconds:.0f} s):\n{tail}"
    print(f"{path.name}: {run.seconds:.1f} s")
