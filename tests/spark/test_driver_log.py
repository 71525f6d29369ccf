"""The task assignment of each micro-batch is visible in the driver's log (Spark forwards a Python
worker's stderr to it), in a Spark application that configured no Python logging."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
          .option("assignor", "sticky").load(path))
query = (stream.writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", os.path.join(path, "..", "checkpoint")).start())
query.awaitTermination()
spark.stop()
"""


def test_the_driver_log_names_each_micro_batchs_assignment(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    proc = subprocess.run(
        [sys.executable, "-c", _APPLICATION, str(logs)], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "pysparklog.datasource_v2" in line]
    assert any(
        "sticky assignment (generation 1): 3 offset ranges of 3 log partitions on 3 tasks" in line for line in lines
    ), proc.stderr[-2000:]
