"""pysparklog through Spark Connect (``SparkSession.builder.remote``), the way Databricks serverless and
shared clusters run Python: a real Connect server started with ``spark-submit`` on loopback, and a client
process that reads, writes and streams through it. What the client gets back is compared with what the
engine itself holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from pysparklog import LogDirectory
from tests.s3_server import free_port, running
from tests.spark.conftest import TS, make_topic

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: The Connect server's entry point, in the ``spark-connect`` jar that pyspark's distribution carries.
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server (``local[2]``) whose Python workers run this interpreter, as a cluster's run the
    interpreter pysparklog is installed in."""
    spark_home = Path(pyspark.__file__).parent
    environment = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    command = [
        str(spark_home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", "local[2]",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.sql.session.timeZone=UTC",
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with running(command, port, log, timeout=180, env=environment):
        yield f"sc://127.0.0.1:{port}"


def values(logs: LogDirectory, topic: str, partition: int) -> list[bytes]:
    with logs.partition(topic, partition) as log:
        return [value for batch in log.read_arrow(0) for value in batch.column("value").to_pylist()]


def test_read_write_and_stream_through_spark_connect(connect_url: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    logs = make_topic(log_dir, "events", [30, 20])
    logs.topics.create("copied", 2)  # the copy keeps each record's partition
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [sys.executable, "-m", "tests.spark.connect_client", connect_url, str(log_dir), str(tmp_path / "work")],
        capture_output=True, text=True, check=False, timeout=300, env=environment,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])

    # Spark's Kafka schema, and every record as the engine wrote it.
    assert got["schema"] == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,timestampType:int>"
    )
    expected = [
        ["events", partition, offset, f"k{offset}", f"events:{partition}:{offset}", TS + offset]
        for partition, count in enumerate([30, 20])
        for offset in range(count)
    ]
    assert sorted(got["read"]) == expected

    # The batch write landed in the log.
    assert sorted(values(logs, "written", 0)) == sorted(f"written:{i}".encode() for i in range(10))

    # The stream copied every record exactly once, per partition in offset order, 20 records per micro-batch.
    commits = tmp_path / "work" / "copy-checkpoint" / "commits"
    assert sorted(path.name for path in commits.iterdir() if not path.name.startswith(".")) == ["0", "1", "2"]
    for partition, count in enumerate([30, 20]):
        assert values(logs, "copied", partition) == [f"events:{partition}:{offset}".encode() for offset in range(count)]

    assert got["registered_count"] == 10
