"""The examples run, end to end, and do what their docstrings say.

Each example runs as a user runs it (``python -m examples.<name> args`` from the checkout), all of them in one
subprocess that ``tests.pipeline_runner`` runs on one Spark JVM with Delta's jars (the suite's shared
SparkSession has no Delta, and nothing here starts Spark in the test process). What is checked comes from the
example's ``RESULT`` lines and, independently, from the files it leaves, read with the engine.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from examples.changelog_table import expected_table, user_updates
from examples.common import STATUSES, latest_per_order, order_events, parse_results, topic_records
from pysparklog import LogDirectory
from tests.conftest import BROKER_LOG_DIR, BUCKET
from tests.pipeline_runner import PipelineJob, PipelineRun, run_pipelines

pytestmark = [pytest.mark.slow, pytest.mark.spark]

#: The longest all the examples may take together; they take about a minute and a half on two cores.
EXAMPLES_TIMEOUT_S = 600
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*")}


QUICKSTART_ORDERS = 8
GUIDE_RECORDS = 10
DELTA_ORDERS = 60
CUSTOMERS = 20
USERS, ROUNDS = 200, 40


def log_and_work(directory: Path) -> list[str | Path]:
    return ["--log-dir", directory / "logs", "--work-dir", directory / "work"]


#: Each example's command line, given its own directory (or, for those run on S3, its own prefix of the bucket).
ARGUMENTS: dict[str, Callable[[Path], list[str | Path]]] = {
    "quickstart": lambda d: ["--orders", str(QUICKSTART_ORDERS), "--log-dir", d / "logs"],
    "migrate_from_kafka": lambda d: ["--records", str(GUIDE_RECORDS), *log_and_work(d)],
    "log_to_delta": lambda d: ["--orders", str(DELTA_ORDERS), *log_and_work(d)],
    "delta_to_log": lambda d: ["--customers", str(CUSTOMERS), *log_and_work(d)],
    "changelog_table": lambda d: ["--users", str(USERS), "--rounds", str(ROUNDS), "--log-dir", d / "logs"],
    "broker_log_analysis": lambda d: [BROKER_LOG_DIR, "--log-dir", d / "copy"],
    "lag_monitor": lambda d: ["--log-dir", d / "logs", "--out", d / "plots" / "lag.png"],
    "quickstart_on_s3": lambda d: ["--orders", str(QUICKSTART_ORDERS), "--log-dir", s3_url(d)],
    "changelog_table_on_s3": lambda d: ["--users", str(USERS), "--rounds", str(ROUNDS), "--log-dir", s3_url(d)],
}
#: The runs of examples unchanged but for a log directory on S3 (the loopback server), by run name.
ON_S3 = {"quickstart_on_s3": "quickstart", "changelog_table_on_s3": "changelog_table"}


def s3_url(directory: Path) -> str:
    return f"s3://{BUCKET}{directory}/logs"


@dataclass(frozen=True)
class Examples:
    """The examples' runs, and the broker fixture's files as they were before them."""

    base: Path
    runs: dict[str, PipelineRun]
    stderr: Path
    broker_before: dict[str, tuple[int, int]]

    def output(self, name: str) -> str:
        """What example ``name`` printed, once it exited with 0 leaving no streaming query running."""
        run = self.runs[name]
        assert run.returncode == 0, run.describe(f"examples.{name}", self.stderr.read_text(errors="replace")[-6000:])
        assert run.queries_left_running == 0, f"examples.{name} left streaming queries running"
        return run.output

    def directory(self, name: str) -> Path:
        return self.base / name


@pytest.fixture(scope="module")
def examples(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Examples:
    """The examples whose tests are selected (a test of example ``x`` is named ``test_x_...``), run in one runner
    when the first of those tests asks."""
    module_tests = [item.name for item in request.session.items if item.module is request.module]  # type: ignore[attr-defined]
    selected = [name for name in ARGUMENTS if any(test.startswith(f"test_{name}_") for test in module_tests)]
    if any(name in ON_S3 for name in selected):
        request.getfixturevalue("s3_endpoint")  # the runner, its JVM and its workers inherit the AWS_* variables
    base = tmp_path_factory.mktemp("examples")
    jobs = [
        PipelineJob(
            id=name,
            module=f"examples.{ON_S3.get(name, name)}",
            argv=[str(arg) for arg in ARGUMENTS[name](base / name)],
        )
        for name in selected
    ]
    broker_before = snapshot(BROKER_LOG_DIR)
    runs, stderr = run_pipelines(jobs, base / "runner", EXAMPLES_TIMEOUT_S)
    return Examples(base, runs, stderr, broker_before)


def counts(text: str) -> dict[str, int]:
    """A ``format_counts`` value back as a dict."""
    return {name: int(count) for name, count in (pair.rsplit(":", 1) for pair in text.split(","))}


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_quickstart_streams_what_it_produced(examples: Examples) -> None:
    log_dir = examples.directory("quickstart") / "logs"
    output = examples.output("quickstart")

    events = order_events(QUICKSTART_ORDERS)
    result = parse_results(output)["quickstart"]
    assert int(result["produced"]) == int(result["streamed"]) == len(events)
    # The console sink printed every record it streamed, and the topic holds them.
    for event in events:
        assert event.value.decode() in output
    assert sorted(topic_records(log_dir, "orders").column("value").to_pylist()) == sorted(e.value for e in events)


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_migrate_from_kafka_runs_every_guide_snippet(examples: Examples) -> None:
    records = GUIDE_RECORDS
    log_dir = examples.directory("migrate_from_kafka") / "logs"
    output = examples.output("migrate_from_kafka")

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
    on_disk = {t: topic_records(log_dir, t).num_rows for t in LogDirectory(log_dir).topics.names()}
    assert on_disk == expected


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_log_to_delta_keeps_every_record_once_and_the_latest_per_key(examples: Examples) -> None:
    work_dir = examples.directory("log_to_delta") / "work"
    output = examples.output("log_to_delta")

    events = order_events(DELTA_ORDERS)
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
    assert topic_records(examples.directory("log_to_delta") / "logs", "orders").num_rows == len(events)


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_delta_to_log_publishes_the_change_feed(examples: Examples) -> None:
    customers = CUSTOMERS
    log_dir = examples.directory("delta_to_log") / "logs"
    output = examples.output("delta_to_log")

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


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_quickstart_on_s3_streams_what_it_produced(examples: Examples) -> None:
    output = examples.output("quickstart_on_s3")
    result = parse_results(output)["quickstart"]
    events = order_events(QUICKSTART_ORDERS)
    assert int(result["produced"]) == int(result["streamed"]) == len(events)
    url = s3_url(examples.directory("quickstart_on_s3"))
    assert sorted(topic_records(url, "orders").column("value").to_pylist()) == sorted(e.value for e in events)


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_changelog_table_compacts_and_keeps_the_latest_per_key(examples: Examples) -> None:
    check_changelog_table(examples.output("changelog_table"), examples.directory("changelog_table") / "logs")


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_changelog_table_on_s3_compacts_and_keeps_the_latest_per_key(examples: Examples) -> None:
    check_changelog_table(examples.output("changelog_table_on_s3"), s3_url(examples.directory("changelog_table_on_s3")))


def check_changelog_table(output: str, log_dir: str | Path) -> None:

    changes = user_updates(USERS, ROUNDS)
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


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_broker_log_analysis_of_the_broker_fixture(examples: Examples, broker_log_dir: Path) -> None:
    output = examples.output("broker_log_analysis")

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
    assert snapshot(broker_log_dir) == examples.broker_before  # the analysis read a copy


@pytest.mark.timeout(EXAMPLES_TIMEOUT_S + 30)
def test_lag_monitor_samples_a_rising_then_falling_lag_and_plots_it(examples: Examples) -> None:
    out = examples.directory("lag_monitor") / "plots" / "lag.png"
    output = examples.output("lag_monitor")

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
