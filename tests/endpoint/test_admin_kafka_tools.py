"""Kafka 4.2's own command-line tools (``kafka-topics.sh``, ``kafka-configs.sh``, ``kafka-delete-records.sh``: Java's
AdminClient at the newest versions of each admin API) pointed at the endpoint, their changes checked in the log
directory, and their output compared with the pysparklog commands that make the same changes on the directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pysparklog.endpoint import Endpoint
from pysparklog.storage.log_dir import LogDirectory
from tests.cli.test_console import cli
from tests.conftest import keyed_table
from tests.interop.kafka_tools import BROKER, JVM_OPTIONS, RUN_TIMEOUT_S, missing_tools

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
DELETE_RECORDS_COMMAND = "org.apache.kafka.tools.DeleteRecordsCommand"


@pytest.fixture(scope="module")
def classpath() -> str:
    """Kafka 4.2's jars, tools included (``tests/interop/kafka-broker/pom.xml``)."""
    missing = missing_tools()
    if missing is not None:
        pytest.skip(missing)
    resolved = BROKER.resolve()
    if resolved is None:
        pytest.fail(f"Kafka's jars could not be resolved: {BROKER.reason}")
    return resolved


def _kafka(classpath: str, endpoint: Endpoint, main_class: str, *args: str) -> str:
    """Run one of Kafka's tools against the endpoint; its stdout (it must succeed)."""
    command = ["java", *JVM_OPTIONS, "-cp", classpath, main_class, "--bootstrap-server", endpoint.bootstrap, *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"{main_class} {' '.join(args)} failed: {proc.stdout}{proc.stderr}"
    return proc.stdout


def test_kafka_topics_creates_and_deletes_topics_through_the_endpoint(
    classpath: str, endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    created = _kafka(
        classpath, endpoint, TOPIC_COMMAND, "--create", "--topic", "orders", "--partitions", "3", "--config",
        "retention.ms=60000",
    )  # fmt: skip
    assert created.strip() == "Created topic orders."
    orders = log_dir.topics.get("orders")
    assert (orders.partitions, dict(orders.configs)) == (3, {"retention.ms": "60000"})
    _kafka(classpath, endpoint, TOPIC_COMMAND, "--delete", "--topic", "orders")
    assert log_dir.topics.names() == []


def test_kafka_configs_alters_and_describes_as_pysparklog_configs_does(
    classpath: str, endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create("orders", 1)
    altered = _kafka(
        classpath, endpoint, CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", "orders", "--alter",
        "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]",
    )  # fmt: skip
    assert altered.strip() == "Completed updating config for topic orders."
    assert dict(log_dir.topics.get("orders").configs) == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
    described = _kafka(
        classpath, endpoint, CONFIG_COMMAND, "--entity-type", "topics", "--entity-name", "orders", "--describe"
    )
    ours = cli("configs", "--log-dir", log_dir.path, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert ours.returncode == 0, ours.stderr.decode()
    assert sorted(described.splitlines()) == sorted(ours.stdout.decode().splitlines())
    assert "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, " in described


def test_kafka_delete_records_reports_as_pysparklog_delete_records_does(
    classpath: str, endpoint: Endpoint, log_dir: LogDirectory, tmp_path: Path
) -> None:
    log_dir.topics.create("events", 1)
    log_dir.topics.create("compacted", 1, {"cleanup.policy": "compact"})
    for topic in ("events", "compacted"):
        with log_dir.partition(topic, 0) as log:
            log.append_arrow(keyed_table(10))
    offsets = tmp_path / "offsets.json"
    entries = [{"topic": "events", "partition": 0, "offset": 4}, {"topic": "compacted", "partition": 0, "offset": 2}]
    offsets.write_text(json.dumps({"partitions": entries, "version": 1}))
    theirs = _kafka(classpath, endpoint, DELETE_RECORDS_COMMAND, "--offset-json-file", str(offsets))
    with log_dir.partition("events", 0) as log:
        assert log.log_start_offset == 4
    ours = cli("delete-records", "--log-dir", log_dir.path, "--offset-json-file", str(offsets))  # the same again

    def reported(output: str) -> list[str]:
        return sorted(line for line in output.splitlines() if line.startswith("partition:"))

    assert reported(theirs) == reported(ours.stdout.decode())
    assert reported(theirs) == [
        "partition: compacted-0\terror: org.apache.kafka.common.errors.PolicyViolationException: Request parameters "
        "do not satisfy the configured policy.",
        "partition: events-0\tlow_watermark: 4",
    ]
