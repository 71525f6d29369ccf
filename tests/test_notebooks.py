"""The notebooks of ``examples/notebooks/`` run, top to bottom, as plain Python scripts.

Each notebook is in Databricks' source format: a ``# Databricks notebook source`` first line, cells separated
by ``# COMMAND ----------`` lines, markdown cells as ``# MAGIC %md`` then ``# MAGIC ...`` lines. Dropping the
header and every ``# MAGIC`` line leaves the code cells in order, a script that runs anywhere; its last cell
asserts the pipeline's result, so a notebook that stopped working fails here.

The notebooks run one after another in one interpreter (``tests.pipeline_runner``), as notebooks attached to one
cluster do: each runs as a script from the checkout, its widgets pointed at a temporary directory through the
environment (``PYSPARKLOG_WIDGET_<NAME>``, read by ``examples.notebook_shims``), and its session cell finds the
SparkSession (with Delta's jars) the runner started, instead of starting a JVM of its own. The quickstart runs a
second time with its log directory on ``s3://`` (the loopback S3 server), as a Databricks user runs it on a bucket.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.common import order_events, topic_records
from examples.notebook_shims import environment_variable
from tests.conftest import BROKER_LOG_DIR, BUCKET, REPO
from tests.pipeline_runner import PipelineJob, PipelineRun, run_pipelines

pytestmark = [pytest.mark.slow, pytest.mark.spark]

NOTEBOOKS_DIR = REPO / "examples" / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))
HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
#: The one notebook whose parameters cell takes a broker's log directory.
BROKER_NOTEBOOK = "06_broker_log_analysis"
#: The one notebook that draws a figure, which ``display`` saves as a PNG outside Databricks.
FIGURE_NOTEBOOK = "07_lag_monitor"
QUICKSTART = NOTEBOOKS_DIR / "01_quickstart.py"
#: The notebook run a second time with its log directory on S3, that run's id, and its ``orders`` widget.
S3_NOTEBOOK = QUICKSTART
S3_RUN = "01_quickstart_on_s3"
S3_ORDERS = 8
#: The longest all the notebooks may take together, in seconds (about three minutes on two cores).
NOTEBOOKS_TIMEOUT = 600
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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

    base: Path
    runs: dict[str, PipelineRun]
    stderr: Path

    def check(self, run_id: str, name: str) -> PipelineRun:
        """Run ``run_id`` of notebook ``name``, checked to have ended without an error, leaving no query running."""
        run = self.runs[run_id]
        assert run.returncode == 0, run.describe(name, self.stderr.read_text(errors="replace")[-6000:])
        assert run.queries_left_running == 0, f"{name} left streaming queries running"
        print(f"{run_id}: {run.seconds:.1f} s")
        return run


def local_base_dir(base: Path, run_id: str) -> Path:
    """The ``base_dir`` widget of a run on the filesystem."""
    return base / run_id / "data"


def s3_base_dir(base: Path) -> str:
    """The S3 run's ``base_dir``: a prefix of the test bucket named after the run's own temporary directory."""
    return f"s3://{BUCKET}{base / S3_RUN}"


@pytest.fixture(scope="module")
def notebooks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Notebooks:
    """The notebooks whose ``test_notebook_runs`` is selected (and the quickstart on S3, if its test is), converted
    to scripts and run one after another in one runner, with their widgets pointed into a temporary directory
    through the environment."""
    tests = [item for item in request.session.items if isinstance(item, pytest.Function)]
    selected = [
        path
        for item in tests
        if item.originalname == "test_notebook_runs"
        for path in NOTEBOOKS
        if item.callspec.params["path"] == path
    ]
    base = tmp_path_factory.mktemp("notebooks")
    scripts = base / "scripts"
    scripts.mkdir()
    for path in NOTEBOOKS:
        (scripts / path.name).write_text(to_script(path.read_text()))
    jobs = []
    for path in selected:
        widgets = {"base_dir": str(local_base_dir(base, path.stem))}
        if path.stem == BROKER_NOTEBOOK:
            widgets["broker_log_dir"] = str(BROKER_LOG_DIR)
        jobs.append(PipelineJob(id=path.stem, path=str(scripts / path.name), env=widget_environment(widgets)))
    if any(item.originalname == "test_quickstart_runs_on_s3" for item in tests):
        request.getfixturevalue("s3_endpoint")  # the runner, its JVM and its workers inherit the AWS_* variables
        # The work directory (the checkpoint) stays local: this Spark has no s3:// filesystem, as Databricks has.
        widgets = {"base_dir": s3_base_dir(base), "work_dir": str(base / S3_RUN / "work"), "orders": str(S3_ORDERS)}
        jobs.append(PipelineJob(id=S3_RUN, path=str(scripts / S3_NOTEBOOK.name), env=widget_environment(widgets)))
    runs, stderr = run_pipelines(jobs, base / "runner", NOTEBOOKS_TIMEOUT)
    return Notebooks(base, runs, stderr)


def widget_environment(widgets: dict[str, str]) -> dict[str, str]:
    """The environment variables that give the notebooks' widgets these values."""
    return {environment_variable(name): value for name, value in widgets.items()}


@pytest.mark.timeout(NOTEBOOKS_TIMEOUT + 60)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs(path: Path, notebooks: Notebooks) -> None:
    notebooks.check(path.stem, path.name)
    if path.stem == FIGURE_NOTEBOOK:  # display(figure) outside Databricks: a PNG in the work directory
        figure = local_base_dir(notebooks.base, path.stem) / "work" / "figure-1.png"
        assert figure.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.timeout(NOTEBOOKS_TIMEOUT + 60)
def test_quickstart_runs_on_s3(notebooks: Notebooks) -> None:
    """The quickstart with ``base_dir`` an ``s3://`` URL: its log is on the bucket, and holds what it produced."""
    notebooks.check(S3_RUN, S3_NOTEBOOK.name)
    produced = topic_records(f"{s3_base_dir(notebooks.base)}/logs", "orders").column("value").to_pylist()
    assert sorted(produced) == sorted(event.value for event in order_events(S3_ORDERS))


#: Run between two notebooks in one runner: what the temporary directory holds then.
LIST_TEMPORARY_DIRECTORY = "import os, tempfile\nprint(sorted(os.listdir(tempfile.gettempdir())))\n"


@pytest.mark.timeout(NOTEBOOKS_TIMEOUT + 60)
def test_a_local_run_removes_the_temporary_base_dir_it_made_and_keeps_a_given_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quickstart twice in one runner, with the runner's temporary directory (``$TMPDIR``) one of the test's:
    with ``base_dir`` empty the notebook makes its directory there, which is gone once the runner's Python has ended;
    with ``base_dir`` given, the log it wrote there stays."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    script = tmp_path / QUICKSTART.name
    script.write_text(to_script(QUICKSTART.read_text()))
    listing = tmp_path / "list_temporary_directory.py"
    listing.write_text(LIST_TEMPORARY_DIRECTORY)
    given = tmp_path / "given"
    orders = {environment_variable("orders"): "4"}
    jobs = [
        PipelineJob(id="temporary", path=str(script), env=orders),
        PipelineJob(id="listing", path=str(listing)),
        PipelineJob(id="given", path=str(script), env=orders | widget_environment({"base_dir": str(given)})),
    ]
    runs, stderr = run_pipelines(jobs, tmp_path / "runner", NOTEBOOKS_TIMEOUT)
    for job in jobs:
        run = runs[job.id]
        assert run.returncode == 0, run.describe(job.id, stderr.read_text(errors="replace")[-6000:])
    assert "'pysparklog-quickstart-" in runs["listing"].output, "the run made no directory in $TMPDIR"
    assert list(temporary.iterdir()) == []
    assert sorted(path.name for path in (given / "logs").iterdir() if path.name.startswith("orders-")) == [
        "orders-0",
        "orders-1",
        "orders-2",
    ]
