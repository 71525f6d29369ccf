"""Spark's own Kafka connector (``spark-sql-kafka-0-10``) reads a topic through the endpoint with the same rows as
``format("pysparklog")`` reading the log directory (issue 23's done-means): offsets, keys, values, headers,
timestamps, under both isolation levels. The topic holds what the Java client wrote through the endpoint and what
pysparklog's own Producer wrote (null keys, a null header value, a committed and an aborted transaction), so the
comparison also checks that a record the Java client produced through the endpoint is what ``format("pysparklog")``
reads. The comparison runs in a process of its own (``spark_kafka_compare.py``), whose SparkSession starts with the
connector's jar.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pysparklog.endpoint import Endpoint
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from tests.endpoint.endpoint_process import REPO_ROOT
from tests.interop import scenarios
from tests.interop.java_clients import BASE_TIMESTAMP, JAVA_CLIENTS
from tests.interop.kafka_tools import missing_tools

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.spark]

TOPIC = "spark-connector"
COMPARE_TIMEOUT_S = 600.0


def _write_with_pysparklog(log_dir: LogDirectory) -> None:
    with Producer(log_dir, ProducerConfig.from_properties({"linger.ms": "0"})) as producer:
        for i in range(20):
            key = None if i % 5 == 0 else f"py{i}".encode()
            producer.send(TOPIC, f"py-v{i}".encode(), key=key, headers=[("h", None if i % 3 else b"x")]).get(30)
    for outcome in ("commit", "abort"):
        config = ProducerConfig.from_properties({"transactional.id": "spark-connector-tx", "linger.ms": "0"})
        with Producer(log_dir, config) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            for i in range(4):
                producer.send(TOPIC, f"{outcome}-{i}".encode(), key=f"{outcome}{i}".encode(), partition=i % 3)
            producer.flush()
            if outcome == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()


def _spark(failure: str, *arguments: str) -> list[Any]:
    """``spark_kafka_compare.py`` run with ``arguments``: the JSON lines it printed.

    Raises:
        AssertionError: It failed; ``failure`` says what that means, its output follows.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "tests.endpoint.spark_kafka_compare", *arguments],
        capture_output=True,
        text=True,
        timeout=COMPARE_TIMEOUT_S,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, f"{failure}:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _compare(endpoint: Endpoint, log_dir: LogDirectory, isolation: str) -> list[dict[str, object]]:
    lines = _spark(
        f"the two reads differ ({isolation})",
        *("--bootstrap", endpoint.bootstrap, "--log-dir", log_dir.path, "--topic", TOPIC, "--isolation", isolation),
    )
    *rows, count = lines
    assert count == {"rows": len(rows)}
    return rows


def test_spark_kafka_connector_reads_through_the_endpoint_the_rows_format_pysparklog_reads(
    endpoint: Endpoint, log_dir: LogDirectory, tmp_path: Path
) -> None:
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"the Java client needs Java and Maven: {missing}")
    log_dir.topics.create(TOPIC, 3)
    acks = scenarios.idempotent_produce(tmp_path, endpoint.bootstrap, TOPIC, 100)
    _write_with_pysparklog(log_dir)

    rows = _compare(endpoint, log_dir, "read_uncommitted")
    by_offset = {(row["partition"], row["offset"]): row for row in rows}
    for where, i in acks.items():
        row = by_offset[where]
        assert (row["key"], row["value"], row["headers"]) == (f"k{i}", f"v{i}", [["seq", str(i)]])
        assert (row["timestamp"], row["timestampType"]) == (BASE_TIMESTAMP + i, 0)
    keys = {row["key"] for row in rows}
    assert {"commit0", "abort0"} <= keys and None in keys

    committed_keys = {row["key"] for row in _compare(endpoint, log_dir, "read_committed")}
    assert "commit0" in committed_keys and not any(str(key).startswith("abort") for key in committed_keys)


def test_a_new_spark_query_of_a_group_starts_where_a_java_consumer_of_it_committed_through_the_endpoint(
    endpoint: Endpoint, log_dir: LogDirectory, tmp_path: Path
) -> None:
    """The group's offsets a Java consumer committed through the endpoint (OffsetCommit into ``__consumer_offsets``)
    are those the Spark source's ``group.id`` reads: a new query of the group reads from there to the end."""
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"the Java client needs Java and Maven: {missing}")
    topic, group = "java-then-spark", "java-then-spark"
    log_dir.topics.create(topic, 3)
    acks = scenarios.idempotent_produce(tmp_path, endpoint.bootstrap, topic, 90)
    consumer = JAVA_CLIENTS.start(
        tmp_path, "consume", bootstrap=endpoint.bootstrap, topic=topic, group=group, max_records=40
    )
    try:
        consumer.wait(scenarios.CLIENT_TIMEOUT_S)
    finally:
        consumer.close()
    committed = {commit["partition"]: commit["offset"] for commit in consumer.events("committed")}
    assert sum(committed.values()) >= 40, consumer.error("committed fewer records than it read")

    (printed,) = _spark(
        "the group's query failed",
        *("--log-dir", log_dir.path, "--topic", topic, "--group", group, "--checkpoint", str(tmp_path / "checkpoint")),
    )
    read = {(partition, offset) for partition, offset in printed["group_read"]}
    expected = {(p, o) for p, o in acks if o >= committed.get(p, 0)}
    assert read == expected
