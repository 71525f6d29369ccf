"""The warning that Spark would start a Python without pysparklog (``pysparklog.spark.python_workers``).

The Pythons are real: this interpreter's environment (the project's, which has pysparklog) and a new virtual
environment without pip or packages, whose ``bin/python3`` links to the same base interpreter as the project's but
lacks pysparklog. Each check is given the environment Spark would run in, ``PATH`` and ``PYTHONPATH`` included, never
the suite's own (whose ``PYTHONPATH`` names the checkout). The Spark tests start a real local Spark from a driver
process whose environment is not activated, as a user's shell is, and show the warning is right: the source is then
not found.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pysparklog.errors import PythonWorkerEnvironmentWarning
from pysparklog.spark.python_workers import warn_if_workers_lack_pysparklog
from tests.conftest import REPO

SPARK_TIMEOUT_S = 300
THIS_PYTHON = sys.executable


@pytest.fixture(scope="module")
def bare_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a virtual environment without pysparklog (nor pip)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    return venv / "bin"


@pytest.fixture(autouse=True)
def outside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks run in a directory of their own: a Python asked about the source looks in the working directory
    first, as Spark's workers do in the driver's, and the checkout's holds ``pyspark_pysparklog``."""
    monkeypatch.chdir(tmp_path)


def warning_for(environment: dict[str, str]) -> str | None:
    """The warning's text for a Spark started in ``environment``, or None when there is none."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_workers_lack_pysparklog(environment)
    messages = [str(warning.message) for warning in caught if warning.category is PythonWorkerEnvironmentWarning]
    assert len(messages) == len(caught) <= 1, [str(warning.message) for warning in caught]
    return messages[0] if messages else None


def path_with(directory: Path | str) -> str:
    return f"{directory}{os.pathsep}/usr/bin{os.pathsep}/bin"


def test_python3_on_path_without_pysparklog_is_named_with_the_fix(bare_bin: Path) -> None:
    message = warning_for({"PATH": path_with(bare_bin)})
    assert message is not None
    assert message.startswith('format("pysparklog") will fail with DATA_SOURCE_NOT_FOUND: ')
    assert f"python3 from PATH ({bare_bin / 'python3'}), as neither PYSPARK_DRIVER_PYTHON nor PYSPARK_PYTHON" in message
    assert "does not have pysparklog" in message
    assert f"`export PYSPARK_PYTHON={THIS_PYTHON}`" in message
    assert "activate the environment pysparklog is installed in" in message
    assert "category=pysparklog.PythonWorkerEnvironmentWarning" in message


def test_python3_on_path_of_this_environment_needs_nothing() -> None:
    """The environment activated: ``python3`` on ``PATH`` is this environment's, whatever its symlink points to."""
    assert warning_for({"PATH": path_with(Path(THIS_PYTHON).parent)}) is None


def test_pyspark_python_without_pysparklog_is_named(bare_bin: Path) -> None:
    python = bare_bin / "python"
    message = warning_for({"PATH": path_with(Path(THIS_PYTHON).parent), "PYSPARK_PYTHON": str(python)})
    assert message is not None
    assert f"with PYSPARK_PYTHON={python}, and that Python does not have pysparklog" in message
    assert f"`export PYSPARK_PYTHON={THIS_PYTHON}`" in message
    assert "activate" not in message


def test_a_pyspark_python_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-python"
    message = warning_for({"PATH": path_with(Path(THIS_PYTHON).parent), "PYSPARK_PYTHON": str(missing)})
    assert message is not None
    assert f"with PYSPARK_PYTHON={missing}, and that Python is not found" in message


def test_pyspark_driver_python_comes_first_as_in_spark(bare_bin: Path) -> None:
    """Spark's JVM looks Python data sources up with ``PYSPARK_DRIVER_PYTHON`` when it is set."""
    bare = str(bare_bin / "python")
    message = warning_for({"PATH": path_with(bare_bin), "PYSPARK_DRIVER_PYTHON": bare, "PYSPARK_PYTHON": THIS_PYTHON})
    assert message is not None
    assert f"with PYSPARK_DRIVER_PYTHON={bare} (" in message
    assert f"`export PYSPARK_DRIVER_PYTHON={THIS_PYTHON}`" in message
    assert (
        warning_for({"PATH": path_with(bare_bin), "PYSPARK_DRIVER_PYTHON": THIS_PYTHON, "PYSPARK_PYTHON": bare}) is None
    )


def test_another_python_that_finds_pysparklog_in_sparks_environment_needs_nothing(bare_bin: Path) -> None:
    """The other Python is asked in the environment Spark gives it: there ``PYTHONPATH`` names the checkout."""
    environment = {"PATH": path_with(bare_bin), "PYSPARK_PYTHON": str(bare_bin / "python"), "PYTHONPATH": str(REPO)}
    assert warning_for(environment) is None


# -- at import, in a driver process ------------------------------------------------------------------------


def driver_environment(bare_bin: Path, **variables: str) -> dict[str, str]:
    """A shell's environment with no Python environment activated: ``python3`` on ``PATH`` is the bare one, and
    neither the suite's ``PYTHONPATH`` nor its ``PYSPARK_*`` variables are there."""
    left_out = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONWARNINGS")
    environment = {name: value for name, value in os.environ.items() if name not in left_out}
    return environment | {"PATH": f"{bare_bin}{os.pathsep}{os.environ['PATH']}"} | variables


def run_driver(script: str, environment: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run by this interpreter with the checkout's pysparklog first on its path."""
    code = f"import sys; sys.path.insert(0, {str(REPO)!r})\n{script}"
    return subprocess.run(
        [THIS_PYTHON, "-c", code], env=environment, cwd=cwd, capture_output=True, text=True, timeout=SPARK_TIMEOUT_S
    )


def test_a_process_started_by_sparks_jvm_is_checked_at_import(bare_bin: Path, tmp_path: Path) -> None:
    """``spark-submit`` started the driver (``PYSPARK_GATEWAY_PORT``): Spark's choice is made, the import says so."""
    environment = driver_environment(bare_bin, PYSPARK_GATEWAY_PORT="1")
    result = run_driver("import pysparklog", environment, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "PythonWorkerEnvironmentWarning" in result.stderr
    assert f"python3 from PATH ({bare_bin / 'python3'})" in result.stderr


def test_sparks_own_python_workers_check_nothing(bare_bin: Path, tmp_path: Path) -> None:
    environment = driver_environment(bare_bin, PYSPARK_GATEWAY_PORT="1", SPARK_PYTHON_RUNTIME="PYTHON_WORKER")
    result = run_driver("import pysparklog", environment, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


# -- with Spark ----------------------------------------------------------------------------------------------

#: Starts Spark (after ``SET_PYTHON``, if given, sets PYSPARK_PYTHON) and reads a topic through the source.
READ_THROUGH_THE_SOURCE = """
import os
from pyspark.sql import SparkSession
{set_python}
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
{import_after_start}
try:
    spark.read.format("pysparklog").option("subscribe", "t").load({log_dir!r}).collect()
except Exception as error:
    print("DATA_SOURCE_NOT_FOUND" if "DATA_SOURCE_NOT_FOUND" in str(error) else "found")
spark.stop()
"""


def read_through_the_source(
    bare_bin: Path, tmp_path: Path, *, set_python: str = "", import_after_start: str = ""
) -> subprocess.CompletedProcess[str]:
    script = READ_THROUGH_THE_SOURCE.format(
        set_python=set_python, import_after_start=import_after_start, log_dir=str(tmp_path / "logs")
    )
    result = run_driver(script, driver_environment(bare_bin), tmp_path)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.spark
@pytest.mark.slow
def test_spark_started_with_python3_lacking_pysparklog_warns_and_does_not_find_the_source(
    bare_bin: Path, tmp_path: Path
) -> None:
    result = read_through_the_source(bare_bin, tmp_path, set_python="import pysparklog")
    assert result.stdout.split() == ["DATA_SOURCE_NOT_FOUND"]
    warned = [line for line in result.stderr.splitlines() if "PythonWorkerEnvironmentWarning" in line]
    assert len(warned) == 1, result.stderr
    assert f"python3 from PATH ({bare_bin / 'python3'})" in warned[0]


@pytest.mark.spark
@pytest.mark.slow
def test_pyspark_python_set_after_the_import_before_spark_starts_gives_no_warning(
    bare_bin: Path, tmp_path: Path
) -> None:
    set_python = f"import pysparklog\nos.environ['PYSPARK_PYTHON'] = {THIS_PYTHON!r}"
    result = read_through_the_source(bare_bin, tmp_path, set_python=set_python)
    assert result.stdout.split() == ["found"]
    assert "PythonWorkerEnvironmentWarning" not in result.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_an_import_after_spark_started_checks_the_running_jvms_choice(bare_bin: Path, tmp_path: Path) -> None:
    """A notebook's session runs before the import: the check asks the JVM's environment, not this process's, which
    names this Python since Spark started, to no effect on Spark."""
    import_after_start = f"os.environ['PYSPARK_PYTHON'] = {THIS_PYTHON!r}\nimport pysparklog"
    result = read_through_the_source(bare_bin, tmp_path, import_after_start=import_after_start)
    assert result.stdout.split() == ["DATA_SOURCE_NOT_FOUND"]
    warned = [line for line in result.stderr.splitlines() if "PythonWorkerEnvironmentWarning" in line]
    assert len(warned) == 1, result.stderr
    assert f"python3 from PATH ({bare_bin / 'python3'})" in warned[0]
