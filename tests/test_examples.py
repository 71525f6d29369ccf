"""The examples run, end to end, and do what their docstrings say.

Each example runs as a user runs it (``python -m examples.<name>`` from the checkout) in a subprocess with
its own JVM: the Delta examples need Delta's jars on the JVM's classpath, which the suite's shared
SparkSession does not have, and nothing here starts Spark in the test process. What is checked comes from the
example's ``RESULT`` lines and, independently, from the files it leaves, read with the engine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from examples.changelog_table import expected_table, user_updates
from examples.common import STATUSES, latest_per_order, order_events, parse_results, topic_records
from pysparklog import LogDirectory
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.spark]

#: The longest an example may take here; they take well under a minute alone, more on a busy machine.
EXAMPLE_TIMEOUT_S = 240
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_example(name: str, *args: str | Path | int) -> str:
    """Run ``python -m examples.<name> args...`` from the checkout; its stdout, once it exited with 0."""
    env = os.environ | {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",  # the JVM (console sink) and Python write to the same pipe: keep their order
    }
    process = subprocess.run(
        [sys.executable, "-m", f"examples.{name}", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
    )
    assert process.returncode == 0, (
        f"examples.{name} exited with {process.returncode}\n--- stdout\n{process.stdout[-6000:]}\n"
        f"--- stderr\n{process.stderr[-6000:]}"
    )
    return process.stdout


def counts(text: str) -> dict[str, int]:
    """A ``format_counts`` value back as a dict."""
    return {name: int(count) for name, count in (pair.rsplit(":", 1) for pair in text.split(","))}


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_quickstart_streams_what_it_produced(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    output = run_example("quickstart", "--orders", "8", "--log-dir", log_dir)

    events = order_events(8)
    result = parse_results(output)["quickstart"]
    assert int(result["produced"]) == int(result["streamed"]) == len(events)
    # The console sink printed every record it streamed, and the topic holds them.
    for event in events:
        assert event.value.decode() in output
    assert sorted(topic_records(log_dir, "orders").column("value").to_pylist()) == sorted(e.value for e in events)


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_migrate_from_kafka_runs_every_guide_snippet(tmp_path: Path) -> None:
    records = 10
    output = run_example(
        "migrate_from_kafka", "--records", records, "--log-dir", tmp_path / "logs", "--work-dir", tmp_path / "work"
    )

    results = parse_results(output)
    rows = {step: int(fields["rows"]) for step, fields in results.items() if "rows" in fields}
    events = order_events(records)
    assert rows == {
        "stream_one_topic": records,
        "stream_one_topic_with_headers": records,
        "stream_multiple_topics": 2 * records,
        "stream_pattern": 2 * records,
        "batch_one_topic": records,
        "batch_explicit_offsets": 2 * records - 3,  # topic1-0 from offset 3
        "batch_pattern": 2 * records,
        "write_stream_topic_option": len(events),
        "write_stream_topic_column": len(events),
        "write_batch": len(events),
    }
    # Each write example wrote the events once: topic1 got them from the option writes, the orders-<status>
    # topics from the topic-column writes (stream and batch).
    statuses = Counter(e.status for e in events)
    expected = {"topic1": records + 2 * len(events), "topic2": records, "events": len(events)}
    expected |= {f"orders-{status}": 2 * statuses[status] for status in STATUSES if statuses[status]}
    assert counts(results["topics"]["counts"]) == expected
    on_disk = {t: topic_records(tmp_path / "logs", t).num_rows for t in LogDirectory(tmp_path / "logs").topics.names()}
    assert on_disk == expected


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_log_to_delta_keeps_every_record_once_and_the_latest_per_key(tmp_path: Path) -> None:
    orders = 60
    work_dir = tmp_path / "work"
    output = run_example("log_to_delta", "--orders", orders, "--log-dir", tmp_path / "logs", "--work-dir", work_dir)

    events = order_events(orders)
    results = parse_results(output)
    assert results["bronze"] == {
        "rows": str(len(events)),
        "distinct_offsets": str(len(events)),
        "produced": str(len(events)),
    }
    keys = len(latest_per_order(events))
    assert results["silver"] == {"rows": str(keys), "keys": str(keys), "mismatches": "0"}
    assert results["round2"]["appended"] == results["round2"]["produced"]  # resumed where round 1 stopped
    for table in ("bronze", "silver"):
        assert (work_dir / table / "_delta_log").is_dir()
    assert topic_records(tmp_path / "logs", "orders").num_rows == len(events)


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_delta_to_log_publishes_the_change_feed(tmp_path: Path) -> None:
    customers = 20
    log_dir = tmp_path / "logs"
    output = run_example(
        "delta_to_log", "--customers", customers, "--log-dir", log_dir, "--work-dir", tmp_path / "work"
    )

    thirds = sum(1 for i in range(1, customers + 1) if i % 3 == 0)
    fifths = sum(1 for i in range(1, customers + 1) if i % 5 == 0)
    new = 5  # delta_to_log.NEW_IN_ROUND_2
    expected = {"insert": customers + new, "update_postimage": thirds + 1, "delete": fifths}
    results = parse_results(output)
    assert results["published"] == {
        "round1": str(customers + thirds + fifths),
        "round2": str(new + 1),
        "inserts": str(expected["insert"]),
        "updates": str(expected["update_postimage"]),
        "deletes": str(expected["delete"]),
    }
    live = customers - fifths + new
    assert results["replay"] == {"rows": str(live), "table_rows": str(live), "differing": "0"}

    # The topic, read with the engine as a read_committed consumer: every change once, with its headers.
    logs = LogDirectory(log_dir)
    batches: list[pa.RecordBatch] = []
    for partition in range(logs.topics.get("customers.changes").partitions):
        with logs.partition("customers.changes", partition) as log:
            batches += log.read_arrow(include_headers=True, isolation_level="read_committed")
    records = pa.Table.from_batches(batches).to_pylist()
    headers = [{h["key"]: h["value"].decode() for h in r["headers"]} for r in records]
    assert Counter(h["change_type"] for h in headers) == expected
    for record, header in zip(records, headers, strict=True):
        row = json.loads(record["value"])
        assert row["_change_type"] == header["change_type"]
        assert record["key"] == str(row["id"]).encode()
        assert int(header["commit_version"]) >= 1


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_changelog_table_compacts_and_keeps_the_latest_per_key(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    output = run_example("changelog_table", "--users", "200", "--rounds", "40", "--log-dir", log_dir)

    changes = user_updates(200, 40)
    expected = expected_table(changes)
    results = parse_results(output)
    log = results["log"]
    assert int(log["records_before"]) == sum(len(batch) for batch in changes)
    assert int(log["records_after"]) < int(log["records_before"]) / 5
    assert int(log["bytes_after"]) < int(log["bytes_before"]) / 5
    assert results["table"] == {
        "rows": str(len(expected)),
        "keys": str(len(expected)),
        "mismatches": "0",
        "before": "0",
    }

    # Replaying the compacted topic gives the same table: nothing the table needs was cleaned away.
    table: dict[str, int] = {}
    for record in topic_records(log_dir, "users").to_pylist():
        if record["value"] is None:
            table.pop(record["key"].decode(), None)
        else:
            table[record["key"].decode()] = json.loads(record["value"])["round"]
    assert table == expected


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*")}


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_broker_log_analysis_of_the_broker_fixture(broker_log_dir: Path, tmp_path: Path) -> None:
    before = _snapshot(broker_log_dir)
    output = run_example("broker_log_analysis", broker_log_dir, "--log-dir", tmp_path / "copy")

    results = parse_results(output)
    assert counts(results["topics"]["partitions"]) == {
        "TestTopicPatient": 1,
        "__cluster_metadata": 1,
        "__consumer_offsets": 1,
    }
    # Data records only: offset 0 of __cluster_metadata-0 is a control record (KRaft's LeaderChange).
    assert counts(results["records"]["counts"]) == {
        "TestTopicPatient-0": 3,
        "__cluster_metadata-0": 4928,
        "__consumer_offsets-6": 13,
    }
    assert results["time_range:TestTopicPatient-0"] == {"oldest_ms": "1769792698283", "newest_ms": "1769793578165"}
    assert results["time_range:__consumer_offsets-6"] == {"oldest_ms": "1769791662955", "newest_ms": "1769793578176"}
    assert counts(results["codecs"]["codecs"]) == {"none": 3 + 4814 + 13}
    assert "DEVSmileCDR" in output  # the group in __consumer_offsets' keys, among the top keys
    assert _snapshot(broker_log_dir) == before  # the analysis read a copy


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
def test_lag_monitor_samples_a_rising_then_falling_lag_and_plots_it(tmp_path: Path) -> None:
    out = tmp_path / "plots" / "lag.png"
    output = run_example("lag_monitor", "--log-dir", tmp_path / "logs", "--out", out)

    lags = [int(m) for m in re.findall(r"^SAMPLE t=[\d.]+s lag=(\d+)", output, re.MULTILINE)]
    assert len(lags) >= 5
    peak = lags.index(max(lags))
    assert max(lags) > 0
    assert 0 < peak < len(lags) - 1, f"the lag should rise, then fall: {lags}"
    assert lags[0] < max(lags) and lags[-1] == 0
    result = parse_results(output)["lag"]
    assert int(result["peak"]) == max(lags) and result["final"] == "0"
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
