"""The built distributions: the wheel installs next to a pyspark 4.2 a user already has, without replacing it, and
Spark finds ``format("pysparklog")`` there by itself; the sdist carries the sources.

The wheel and the sdist are built once (``python -m build``, as a release would). The wheel goes into a fresh virtual
environment of the suite's interpreter that already holds the other patch release of pyspark 4.2 than the lock's, and
the newest numpy and pandas in pysparklog's ranges, as a user's runtime would; pip installs the wheel with its
dependencies. Packages come from pip's cache or the package index, never from the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("pysparklog", "pyspark_pysparklog")
#: The pyspark 4.2 of the user's runtime: a patch release other than the one the lock (and so this suite) has.
RUNTIME_PYSPARK = "4.2.1" if version("pyspark") == "4.2.0" else "4.2.0"
COMMAND_TIMEOUT_S = 300

#: Run in the new environment: a batch write through ``format("pysparklog")`` and a batch read of it, with the
#: data source registered by Spark itself (the ``pyspark_pysparklog`` module of the installed wheel).
SPARK_ROUND_TRIP = """
import sys
from pathlib import Path

import pysparklog
from pyspark.sql import SparkSession

assert Path(pysparklog.__file__).is_relative_to(sys.prefix), f"pysparklog from {pysparklog.__file__}"
from pysparklog.storage.records import kernels

assert kernels.KERNELS == "aot", "the wheel's compiled kernels are not used"
log_dir = sys.argv[1]
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    .getOrCreate()
)
rows = [(f"k{i % 3}", f"v{i}") for i in range(20)]
spark.createDataFrame(rows, "key string, value string").write.format("pysparklog").mode("append").option(
    "topic", "events"
).save(log_dir)
read = (
    spark.read.format("pysparklog")
    .option("subscribe", "events")
    .load(log_dir)
    .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition", "offset")
    .collect()
)
assert sorted((r.key, r.value) for r in read) == sorted(rows), read
assert {r.topic for r in read} == {"events"}, read
by_partition = {}
for r in read:
    by_partition.setdefault(r.partition, []).append(r.offset)
assert all(sorted(o) == list(range(len(o))) for o in by_partition.values()), by_partition
spark.stop()
print("round trip:", len(read), "records")
"""


@dataclass(frozen=True)
class Dists:
    wheel: Path
    sdist: Path

    @property
    def version(self) -> str:
        return self.wheel.name.split("-")[1]


def run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    """A command's output; its exit status, output and errors in the failure if it fails."""
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, env=env, timeout=COMMAND_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, REPO)
    (wheel,) = out.glob("pysparklog-*.whl")
    (sdist,) = out.glob("pysparklog-*.tar.gz")
    return Dists(wheel, sdist)


def sources() -> set[str]:
    """The package's files in the checkout, relative to the repository."""
    return {
        path.relative_to(REPO).as_posix()
        for package in PACKAGES
        for path in (REPO / package).rglob("*")
        if path.suffix in (".py", ".typed") and "__pycache__" not in path.parts
    }


def test_the_wheel_holds_the_packages_and_nothing_else(dists: Dists) -> None:
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    assert sources() <= names
    assert "pysparklog/py.typed" in names
    assert any(name.startswith("pysparklog/_compiled_kernels.") and name.endswith(".so") for name in names)
    assert {name.split("/", 1)[0] for name in names} == {*PACKAGES, f"pysparklog-{dists.version}.dist-info"}


def test_the_sdist_holds_the_sources_and_the_type_marker(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert sources() <= names
    assert {"pysparklog/py.typed", "pyproject.toml", "README.md"} <= names


def installed(pip: list[str]) -> dict[str, str]:
    return {p["name"].lower(): p["version"] for p in json.loads(run(*pip, "list", "--format", "json"))}


@pytest.mark.timeout(900)
def test_the_wheel_installs_next_to_a_users_pyspark_and_spark_reads_and_writes_through_it(
    dists: Dists, tmp_path: Path
) -> None:
    venv = tmp_path / "runtime"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    # The user's runtime: another pyspark 4.2, numpy and pandas at least as new as the lock's (the newest in range).
    runtime_packages = [f"pyspark=={RUNTIME_PYSPARK}", f"numpy>={version('numpy')}", f"pandas>={version('pandas')},<3"]
    run(*pip, "install", "--quiet", *runtime_packages)
    runtime = installed(pip)

    run(*pip, "install", "--quiet", dists.wheel)
    after = installed(pip)
    assert after["pyspark"] == RUNTIME_PYSPARK
    assert (after["numpy"], after["pandas"]) == (runtime["numpy"], runtime["pandas"])
    assert after["pysparklog"] == dists.version
    assert "delta-spark" not in after and "matplotlib" not in after
    run(*pip, "check")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_HOME"))}
    env |= {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    script = tmp_path / "round_trip.py"
    script.write_text(SPARK_ROUND_TRIP)
    (tmp_path / "logs").mkdir()
    output = run(python, script, tmp_path / "logs", env=env)
    assert "round trip: 20 records" in output


def build_runtime_pyspark_wheel() -> None:
    """Build the runtime pyspark's wheel into pip's cache, where the install test finds it: pyspark is published
    as an sdist only, and building it is set-up (minutes on a fresh machine), not what the test checks."""
    with tempfile.TemporaryDirectory() as wheels:
        pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", wheels]
        run(*pip, f"pyspark=={RUNTIME_PYSPARK}")


if __name__ == "__main__":
    build_runtime_pyspark_wheel()
