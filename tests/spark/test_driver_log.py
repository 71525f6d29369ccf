"""The task assignment of each micro-batch: pysparklog logs it and, as a library, prints nothing of its own
accord; ``PYSPARKLOG_LOG_LEVEL=INFO`` in the environment shows it in the driver's log (Spark forwards a Python
worker's stderr to it, and its workers inherit the variable, which an application's logging configuration
never reaches)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pysparklog import LOG_LEVEL_VARIABLE
from tests.conftest import REPO

pytestmark = pytest.mark.spark

_APPLICATION = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
import pyarrow as pa
from pyspark.sql import SparkSession
from pysparklog import LogDirectory
path = sys.argv[1]
logs = LogDirectory(path)
logs.topics.create("t", 3)
for p in range(3):
    logs.partition("t", p).append_arrow(pa.table({"value": [b"x"] * 10}))
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
stream = (spark.readStream.format("pysparklog").option("subscribe", "t").option("startingOffsets", "earliest")
          .option("assignor", "sticky").option("driverReadMaxOffsets", sys.argv[2]).load(path))
query = (stream.writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", os.path.join(path, "..", "checkpoint")).start())
query.awaitTermination()
spark.stop()
"""


@pytest.mark.parametrize(
    ("driver_read_max_offsets", "logged"),
    [
        ("0", "sticky assignment (generation 1): 3 offset ranges of 3 log partitions on 3 tasks"),
        ("10000", "30 offsets of 3 log partitions read by the driver"),
    ],
    ids=["task-read", "driver-read"],
)
def test_the_driver_log_names_each_micro_batchs_assignment_when_asked(
    tmp_path: Path, driver_read_max_offsets: str, logged: str
) -> None:
    logs = tmp_path / "logs"
    env = {**os.environ, LOG_LEVEL_VARIABLE: "INFO"}
    proc = subprocess.run(
        [sys.executable, "-c", _APPLICATION, str(logs), driver_read_max_offsets],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "pysparklog.datasource_v2" in line]
    assert any(logged in line for line in lines), proc.stderr[-2000:]


_LIBRARY_LOGS = """
import logging, sys
import pysparklog
logging.getLogger("pysparklog.datasource_v2").info("an assignment")
logging.getLogger("pysparklog.datasource_v2").warning("a warning")
print([type(h).__name__ for h in logging.getLogger("pysparklog").handlers])
"""


@pytest.mark.parametrize(
    ("level", "handlers", "printed"),
    [
        (None, "['NullHandler']", []),  # Python's last resort prints warnings, never INFO
        ("INFO", "['NullHandler', 'StreamHandler']", ["an assignment", "a warning"]),
        ("warning", "['NullHandler', 'StreamHandler']", ["a warning"]),
    ],
)
def test_pysparklog_prints_nothing_of_its_own_accord(level: str | None, handlers: str, printed: list[str]) -> None:
    env = {key: value for key, value in os.environ.items() if key != LOG_LEVEL_VARIABLE}
    if level is not None:
        env[LOG_LEVEL_VARIABLE] = level
    proc = subprocess.run([sys.executable, "-c", _LIBRARY_LOGS], capture_output=True, text=True, env=env, check=True)
    assert proc.stdout.strip() == handlers
    shown = [line.rsplit(": ", 1)[-1] for line in proc.stderr.splitlines() if "pysparklog.datasource_v2" in line]
    assert shown == printed


def test_an_unknown_level_is_named_with_the_accepted_ones() -> None:
    env = {**os.environ, LOG_LEVEL_VARIABLE: "VERBOSE"}
    proc = subprocess.run([sys.executable, "-c", "import pysparklog"], capture_output=True, text=True, env=env)
    assert "PYSPARKLOG_LOG_LEVEL='VERBOSE' is not a logging level; accepted: DEBUG, INFO, WARNING" in proc.stderr
