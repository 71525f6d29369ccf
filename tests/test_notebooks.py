"""The notebooks of ``examples/notebooks/`` run, top to bottom, as plain Python scripts.

Each notebook is in Databricks' source format: a ``# Databricks notebook source`` first line, cells separated
by ``# COMMAND ----------`` lines, markdown cells as ``# MAGIC %md`` then ``# MAGIC ...`` lines. Dropping the
header and every ``# MAGIC`` line leaves the code cells in order, a script that runs anywhere; its last cell
asserts the pipeline's result, so a notebook that stopped working fails here.

The notebooks run one after another in one interpreter (``tests.pipeline_runner``), as notebooks attached to one
cluster do: each runs as a script from the checkout, its parameters cell pointed at a temporary directory through
the environment, and its session cell finds the SparkSession (with Delta's jars) the runner started, instead of
starting a JVM of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import BROKER_LOG_DIR, REPO
from tests.pipeline_runner import PipelineJob, PipelineRun, run_pipelines

pytestmark = [pytest.mark.slow, pytest.mark.spark]

NOTEBOOKS_DIR = REPO / "examples" / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))
HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
#: The one notebook whose parameters cell takes a broker's log directory.
BROKER_NOTEBOOK = "06_broker_log_analysis"
#: The longest all the notebooks may take together, in seconds (about a minute and a half on two cores).
NOTEBOOKS_TIMEOUT = 600


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
class Notebooks:
    """The notebooks' runs, and the runner's stderr."""

    runs: dict[str, PipelineRun]
    stderr: Path


@pytest.fixture(scope="module")
def notebooks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Notebooks:
    """The notebooks whose ``test_notebook_runs`` is selected, converted to scripts and run one after another in
    one runner, with their parameters pointed into a temporary directory through the environment."""
    selected = [
        path
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_notebook_runs"
        for path in NOTEBOOKS
        if item.callspec.params["path"] == path
    ]
    base = tmp_path_factory.mktemp("notebooks")
    jobs = []
    for path in selected:
        script = base / "scripts" / f"{path.stem}.py"
        script.parent.mkdir(exist_ok=True)
        script.write_text(to_script(path.read_text()))
        env = {"PYSPARKLOG_NOTEBOOK_DIR": str(base / path.stem / "data")}
        if path.stem == BROKER_NOTEBOOK:
            env["PYSPARKLOG_BROKER_LOG_DIR"] = str(BROKER_LOG_DIR)
        jobs.append(PipelineJob(id=path.stem, path=str(script), env=env))
    runs, stderr = run_pipelines(jobs, base / "runner", NOTEBOOKS_TIMEOUT)
    return Notebooks(runs, stderr)


@pytest.mark.timeout(NOTEBOOKS_TIMEOUT + 60)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs(path: Path, notebooks: Notebooks) -> None:
    run = notebooks.runs[path.stem]
    assert run.returncode == 0, run.describe(path.name, notebooks.stderr.read_text(errors="replace")[-6000:])
    assert run.queries_left_running == 0, f"{path.name} left streaming queries running"
    print(f"{path.name}: {run.seconds:.1f} s")
