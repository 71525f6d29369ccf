"""The release's distributions (``make dist``): a manylinux wheel per supported Python and the sdist. Each wheel
installs next to a pyspark 4.2 a user already has, without replacing it and without numba, and Spark finds
``format("pysparklog")`` there by itself and reads and writes through it with the wheel's compiled kernels.

``make test-dist`` builds ``dist/`` and runs these with ``PYSPARKLOG_DIST_PYTHONS`` naming the interpreter of each
Python (the ones the wheels were built with). Each wheel goes into a fresh virtual environment of its Python that
already holds the other patch release of pyspark 4.2 than the lock's and the newest numpy, pandas and pyarrow
that Python has, as a user's runtime would; pip installs the wheel with its dependencies. Packages come from pip's
cache or the package index, never from the checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from release.dist import SUPPORTED, Interpreter, interpreter

pytestmark = [pytest.mark.dist, pytest.mark.slow, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[1]
DIST = REPO / "dist"
PACKAGES = ("pysparklog", "pyspark_pysparklog")
#: The pyspark 4.2 of the user's runtime: a patch release other than the one the lock (and so this suite) has.
RUNTIME_PYSPARK = "4.2.1" if version("pyspark") == "4.2.0" else "4.2.0"
#: Where ``python -m tests.test_packaging`` puts the runtime pyspark's wheel (pyspark is published as an sdist).
LOCAL_WHEELS = REPO / ".cache" / "wheels"
#: The interpreters the wheels were built with, space-separated (the Makefile's ``DIST_PYTHONS``).
PYTHONS_VARIABLE = "PYSPARKLOG_DIST_PYTHONS"
COMMAND_TIMEOUT_S = 600

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
assert "numba" not in sys.modules, "numba was imported"
print("round trip:", len(read), "records")
"""

#: Run in the new environment: the installed package's requirements, as its metadata has them.
REQUIREMENTS = "import json; from importlib.metadata import requires; print(json.dumps(requires('pysparklog')))"


def requirement_names(requirements: list[str], extra: str) -> set[str]:
    """The names of ``requirements`` that apply with ``extra`` ("" for none) and not without it."""
    parsed = [Requirement(text) for text in requirements]
    applies = {r.name for r in parsed if r.marker is None or r.marker.evaluate({"extra": extra})}
    return applies if not extra else applies - requirement_names(requirements, "")


def run(*command: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """A command's output; its exit status, output and errors in the failure if it fails."""
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def the_sdist() -> Path:
    sdists = list(DIST.glob("pysparklog-*.tar.gz"))
    assert len(sdists) == 1, f"{DIST} should hold one sdist (make dist), holds {[p.name for p in sdists]}"
    return sdists[0]


def the_wheel(tag: str) -> Path:
    wheels = list(DIST.glob(f"pysparklog-*-{tag}-{tag}-*.whl"))
    assert len(wheels) == 1, f"{DIST} should hold one {tag} wheel (make dist), holds {[p.name for p in wheels]}"
    return wheels[0]


@pytest.fixture(scope="module")
def interpreters() -> dict[str, Interpreter]:
    """The interpreters of ``$PYSPARKLOG_DIST_PYTHONS`` by Python version."""
    commands = os.environ.get(PYTHONS_VARIABLE, "").split()
    assert commands, f"${PYTHONS_VARIABLE} names no interpreter: run these with make test-dist"
    return {python.version: python for python in map(interpreter, commands)}


def sources() -> set[str]:
    """The package's files in the checkout, relative to the repository."""
    return {
        path.relative_to(REPO).as_posix()
        for package in PACKAGES
        for path in (REPO / package).rglob("*")
        if path.suffix in (".py", ".typed") and "__pycache__" not in path.parts
    }


def test_dist_holds_the_sdist_and_a_manylinux_wheel_per_supported_python() -> None:
    sdist = the_sdist()
    release = sdist.name.removeprefix("pysparklog-").removesuffix(".tar.gz")
    expected = {rf"pysparklog-{re.escape(release)}-cp{v.replace('.', '')}-cp{v.replace('.', '')}" for v in SUPPORTED}
    wheels = sorted(p.name for p in DIST.glob("*.whl"))
    assert len(wheels) == len(SUPPORTED), wheels
    for pattern in expected:
        assert any(re.fullmatch(pattern + r"-manylinux_\d+_\d+_x86_64\.whl", name) for name in wheels), (
            pattern,
            wheels,
        )


@pytest.mark.parametrize("python", SUPPORTED)
def test_each_wheel_holds_the_packages_its_pythons_extension_and_nothing_else(python: str) -> None:
    tag = "cp" + python.replace(".", "")
    wheel = the_wheel(tag)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert sources() <= names
    assert "pysparklog/py.typed" in names
    extensions = [name for name in names if name.startswith("pysparklog/_compiled_kernels.")]
    assert extensions == [f"pysparklog/_compiled_kernels.cpython-{tag[2:]}-x86_64-linux-gnu.so"]
    release = wheel.name.split("-")[1]
    assert {name.split("/", 1)[0] for name in names} == {*PACKAGES, f"pysparklog-{release}.dist-info"}


def test_the_sdist_holds_the_sources_and_the_type_marker() -> None:
    with tarfile.open(the_sdist()) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert sources() <= names
    assert {"pysparklog/py.typed", "pyproject.toml", "README.md", "setup.py"} <= names
    assert not any(name.endswith(".so") for name in names)


def installed(pip: list[str]) -> dict[str, str]:
    return {p["name"].lower(): p["version"] for p in json.loads(run(*pip, "list", "--format", "json"))}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("python", SUPPORTED)
def test_the_wheel_installs_next_to_a_users_pyspark_without_numba_and_spark_reads_and_writes_through_it(
    python: str, interpreters: dict[str, Interpreter], tmp_path: Path
) -> None:
    assert python in interpreters, f"${PYTHONS_VARIABLE} names no Python {python}"
    wheel = the_wheel(interpreters[python].tag)
    venv = tmp_path / "runtime"
    run(interpreters[python].command, "-m", "venv", "--without-pip", venv)
    python_path = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python_path), "--disable-pip-version-check"]
    # The user's runtime: another pyspark 4.2 and the newest numpy, pandas and pyarrow in range for its Python.
    runtime_packages = [f"pyspark=={RUNTIME_PYSPARK}", "numpy", "pandas<3", "pyarrow"]
    run(*pip, "install", "--quiet", "--find-links", LOCAL_WHEELS, *runtime_packages)
    runtime = installed(pip)

    run(*pip, "install", "--quiet", wheel)
    after = installed(pip)
    assert after["pyspark"] == RUNTIME_PYSPARK
    assert (after["numpy"], after["pandas"], after["pyarrow"]) == (
        runtime["numpy"],
        runtime["pandas"],
        runtime["pyarrow"],
    )
    assert after["pysparklog"] == wheel.name.split("-")[1]
    assert not {"numba", "llvmlite", "delta-spark", "matplotlib"} & after.keys(), sorted(after)
    run(*pip, "check")

    requirements = json.loads(run(python_path, "-c", REQUIREMENTS))
    assert "numba" not in requirement_names(requirements, "")
    assert requirement_names(requirements, "jit") == {"numba"}

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_HOME", "NUMBA"))}
    env |= {"PYSPARK_PYTHON": str(python_path), "PYSPARK_DRIVER_PYTHON": str(python_path)}
    script = tmp_path / "round_trip.py"
    script.write_text(SPARK_ROUND_TRIP)
    (tmp_path / "logs").mkdir()
    # Away from the checkout: Spark's Python workers put their working directory first on sys.path, where the
    # checkout's own pysparklog would shadow the wheel's.
    output = run(python_path, script, tmp_path / "logs", env=env, cwd=tmp_path)
    assert "round trip: 20 records" in output


def build_runtime_pyspark_wheel() -> None:
    """Build the runtime pyspark's wheel into ``.cache/wheels``, where the install tests find it: pyspark is
    published as an sdist only, and building it is set-up (minutes on a fresh machine), not what the tests check.
    One wheel serves every Python: pyspark is pure Python."""
    if not list(LOCAL_WHEELS.glob(f"pyspark-{RUNTIME_PYSPARK}-*.whl")):
        run(
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            LOCAL_WHEELS,
            f"pyspark=={RUNTIME_PYSPARK}",
        )


if __name__ == "__main__":
    build_runtime_pyspark_wheel()
