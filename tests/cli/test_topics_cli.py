"""``pysparklog topics``: kafka-topics.sh's actions on a log directory, run in new processes as people run them."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from pysparklog import LogDirectory
from pysparklog.cli.main import main
from tests.cli.test_dump_log import CLI, run_cli
from tests.conftest import keyed_table

WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. "
    "To avoid issues it is best to use either, but not both.\n"
)
HEADER = ("Partition", "LogStartOffset", "LogEndOffset", "Segments", "Bytes")
#: One id in Kafka's form (kafka-topics.sh --describe's "TopicId:") and in the canonical UUID form.
KAFKA_ID = "fFqDVmuKQi-6-agtLR19vw"
CANONICAL_ID = "7c5a8356-6b8a-422f-baf9-a82d2d1d7dbf"


@pytest.fixture(autouse=True)
def _no_log_dir_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARKLOG_LOG_DIR", raising=False)


def topics(log_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("topics", "--log-dir", str(log_dir), *args)


def _table(*rows: tuple[int, ...]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(HEADER, *rows, strict=True)]
    return "".join(
        "\t" + "  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)) + "\n" for row in (HEADER, *rows)
    )


def test_create_list_alter_and_delete(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    created = topics(logs, "--create", "--topic", "orders", "--partitions", "3", "--config", "retention.ms=1000")
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created topic orders.\n", "")
    assert (
        topics(logs, "--create", "--topic", "a.b", "--replication-factor", "1").stdout
        == f"{WARNING}Created topic a.b.\n"
    )
    assert topics(logs, "--list").stdout == "a.b\norders\n"
    altered = topics(logs, "--alter", "--topic", "orders", "--partitions", "5")
    assert (altered.returncode, altered.stdout, altered.stderr) == (0, "", "")
    store = LogDirectory(logs).topics
    assert (store.get("orders").partitions, dict(store.get("orders").configs)) == (5, {"retention.ms": "1000"})
    deleted = topics(logs, "--delete", "--topic", "orders")
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (0, "", "")
    assert store.names() == ["a.b"]
    assert sorted(p.name for p in logs.iterdir() if p.is_dir()) == ["a.b-0"]


def test_describe_prints_kafkas_topic_line_and_a_table_of_partitions(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    orders = logs.topics.create("orders", 3, {"retention.ms": "1000"})
    (tmp_path / "server.properties").write_text("log.segment.bytes=2097152\n")
    log = logs.partition("orders", 1)
    log.append_arrow(keyed_table(120))
    log.raise_log_start_offset(7)
    size = os.path.getsize(tmp_path / "orders-1" / "00000000000000000000.log")
    (tmp_path / "bare-0").mkdir()  # a directory without partition.metadata: no topic id, as Kafka omits the zero id
    described = topics(tmp_path, "--describe")
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout == (
        "Topic: bare\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: segment.bytes=2097152\n"
        + _table((0, 0, 0, 0, 0))
        + f"Topic: orders\tTopicId: {orders.topic_id}\tPartitionCount: 3\tReplicationFactor: 1\t"
        "Configs: retention.ms=1000,segment.bytes=2097152\n"
        + _table((0, 0, 0, 0, 0), (1, 7, 120, 1, size), (2, 0, 0, 0, 0))
    )
    assert topics(tmp_path, "--describe", "--topic", "bare").stdout.startswith("Topic: bare\t")


def test_the_log_directory_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    LogDirectory(tmp_path).topics.create("t")
    monkeypatch.setenv("PYSPARKLOG_LOG_DIR", str(tmp_path))
    assert run_cli("topics", "--list").stdout == "t\n"


def test_without_a_log_directory_the_command_says_so(tmp_path: Path) -> None:
    missing = run_cli("topics", "--list")
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        2,
        "",
        "pysparklog topics: error: --log-dir is required (or set PYSPARKLOG_LOG_DIR)\n",
    )
    absent = topics(tmp_path / "nope", "--list")
    assert (absent.returncode, absent.stderr) == (
        1,
        f"pysparklog topics: error: log directory {tmp_path / 'nope'} does not exist or is not a directory\n",
    )


ERRORS = [
    (
        ("--create", "--topic", "a/b"),
        "Topic name 'a/b' is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
    ),
    (("--create", "--topic", "t"), "Topic 't' already exists."),
    (
        ("--create", "--topic", "u", "--partitions", "0"),
        "--partitions = 0 is invalid; accepted: an integer from 1 to 10000",
    ),
    (
        ("--create", "--topic", "u", "--partitions", "2147483647"),
        "--partitions = 2147483647 is invalid; accepted: an integer from 1 to 10000",
    ),
    (
        ("--alter", "--topic", "t", "--partitions", "2147483647"),
        "--partitions = 2147483647 is invalid; accepted: an integer from 1 to 10000",
    ),
    (("--alter", "--topic", "t", "--partitions", "x"), "--partitions = 'x' is invalid; accepted: an integer from 1"),
    (("--create", "--topic", "u", "--config", "retention.hours=1"), "Unknown topic config name: retention.hours;"),
    (("--create", "--topic", "u", "--config", "retention.ms"), "invalid topic config 'retention.ms'"),
    (("--create", "--topic", "u", "--replication-factor", "3"), "--replication-factor 3 is not supported"),
    (("--alter", "--topic", "t", "--partitions", "1"), "Topic currently has 2 partitions, which is higher than"),
    (("--alter", "--topic", "t", "--config", "retention.ms=1"), "--config is only valid with --create"),
    (("--alter", "--topic", "t"), "--alter takes one of --partitions and --topic-id"),
    (("--alter", "--topic", "t", "--partitions", "3", "--topic-id", KAFKA_ID), "--alter takes one of --partitions"),
    (("--alter", "--topic", "t", "--topic-id", "nope"), "topic id 'nope' is malformed; accepted: Kafka's form, 22"),
    (
        ("--alter", "--topic", "t", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAA"),
        "topic id 'AAAAAAAAAAAAAAAAAAAAAA' is reserved",
    ),
    (("--alter", "--topic", "nope", "--topic-id", KAFKA_ID), "Topic 'nope' does not exist"),
    (("--create", "--topic", "u", "--topic-id", KAFKA_ID), "--topic-id is only valid with --alter or --describe"),
    (("--describe", "--topic", "t", "--topic-id", KAFKA_ID), "--describe takes --topic or --topic-id, not both"),
    (("--describe", "--topic-id", KAFKA_ID), f"Topic id {KAFKA_ID} does not exist"),
    (("--delete",), "--topic is required with --delete"),
    (("--delete", "--topic", "nope"), "Topic 'nope' does not exist"),
    (("--list", "--if-not-exists"), "--if-not-exists is only valid with --create"),
    (("--list", "--partitions", "0"), "--partitions is only valid with --create or --alter"),
    (("--delete", "--topic", "t", "--exclude-internal"), "--exclude-internal is only valid with --list or --describe"),
    (("--describe", "--topic", "x.*"), "Topic 'x.*' does not exist as expected"),
    (("--list", "--topic", "t("), "t( is an invalid regex."),
]


@pytest.mark.parametrize(("args", "error"), ERRORS[:2])
def test_errors_are_one_line_on_stderr_and_a_non_zero_status(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    LogDirectory(tmp_path).topics.create("t", 2)
    failed = topics(tmp_path, *args)
    assert (failed.returncode, failed.stdout.replace(WARNING, "")) == (1, "")
    assert failed.stderr == f"pysparklog topics: error: {error}\n"


@pytest.mark.parametrize(
    ("action", "count", "shown"),
    [
        ("--create", "0", "0"),
        ("--create", "-1", "-1"),
        ("--create", "20000", "20000"),
        ("--create", "x", "'x'"),
        ("--alter", "0", "0"),
        ("--alter", "1.5", "'1.5'"),
    ],
)
def test_every_partition_count_out_of_range_is_refused_with_one_range(
    tmp_path: Path, action: str, count: str, shown: str
) -> None:
    """0 once said "1 to 2147483647" where 20000 said "1 to 10000", and "x" was argparse's "invalid int value"."""
    LogDirectory(tmp_path).topics.create("t", 2)
    failed = topics(tmp_path, action, "--topic", "u" if action == "--create" else "t", "--partitions", count)
    assert (failed.returncode, failed.stdout, failed.stderr) == (
        1,
        "",
        f"pysparklog topics: error: --partitions = {shown} is invalid; accepted: an integer from 1 to 10000 (each "
        "partition is a directory of the log directory, which commands visit one by one)\n",
    )
    assert LogDirectory(tmp_path).topics.names() == ["t"]


@pytest.mark.parametrize(("args", "error"), ERRORS)
def test_each_refusal_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], error: str
) -> None:
    """The whole table in this process (a new process per case would take seconds each)."""
    created = LogDirectory(tmp_path).topics.create("t", 2)
    assert main(["topics", "--log-dir", str(tmp_path), *args]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"pysparklog topics: error: {error}") and captured.err.count("\n") == 1
    assert LogDirectory(tmp_path).topics.names() == ["t"]
    assert LogDirectory(tmp_path).topics.get("t") == created


def test_alter_sets_the_topic_id_and_describe_finds_the_topic_by_it(tmp_path: Path) -> None:
    """The step before the partition directories move into a broker's log directory (docs/moving-to-kafka.md)."""
    LogDirectory(tmp_path).topics.create("orders", 2)
    altered = topics(tmp_path, "--alter", "--topic", "orders", "--topic-id", CANONICAL_ID)
    assert (altered.returncode, altered.stdout, altered.stderr) == (0, "", "")
    assert [(tmp_path / f"orders-{p}" / "partition.metadata").read_text() for p in range(2)] == [
        f"version: 0\ntopic_id: {KAFKA_ID}"
    ] * 2
    described = topics(tmp_path, "--describe", "--topic-id", KAFKA_ID)
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout.startswith(f"Topic: orders\tTopicId: {KAFKA_ID}\tPartitionCount: 2\t")


def test_if_not_exists_and_if_exists_make_those_cases_no_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    LogDirectory(tmp_path).topics.create("t", 2)
    done = topics(tmp_path, "--create", "--topic", "t", "--if-not-exists")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    for action in ("--delete", "--describe"):
        assert main(["topics", "--log-dir", str(tmp_path), action, "--topic", "nope", "--if-exists"]) == 0
        assert capsys.readouterr() == ("", "")
    assert (
        main(["topics", "--log-dir", str(tmp_path), "--alter", "--topic", "nope", "--partitions", "3", "--if-exists"])
        == 0
    )


def test_list_and_describe_take_a_topic_filter_and_exclude_internal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = LogDirectory(tmp_path).topics
    for name in ("orders", "orders.eu", "users", "__consumer_offsets", "__transaction_state"):
        store.create(name, 1)

    def run(*args: str) -> str:
        assert main(["topics", "--log-dir", str(tmp_path), *args]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        return out

    assert run("--list") == "__consumer_offsets\n__transaction_state\norders\norders.eu\nusers\n"
    assert run("--list", "--exclude-internal") == "orders\norders.eu\nusers\n"
    assert run("--list", "--topic", "orders.*") == "orders\norders.eu\n"
    assert run("--list", "--topic", "order") == "", "whole names only"
    assert run("--list", "--topic", " users, __.* ") == "__consumer_offsets\n__transaction_state\nusers\n"
    assert run("--list", "--topic", "__.*", "--exclude-internal") == ""
    described = run("--describe", "--topic", "orders|users", "--exclude-internal")
    assert [line.split("\t")[0] for line in described.splitlines() if line.startswith("Topic: ")] == [
        "Topic: orders",
        "Topic: users",
    ]
    assert "Topic: __consumer_offsets" not in run("--describe", "--exclude-internal")
    assert run("--describe", "--topic", "nope.*", "--if-exists") == ""


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    both = topics(tmp_path, "--list", "--describe")
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "not allowed with argument" in both.stderr


def test_a_progress_bar_is_drawn_on_a_terminal_only(tmp_path: Path) -> None:
    store = LogDirectory(tmp_path).topics
    store.create("big", 40)
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [*CLI, "topics", "--log-dir", str(tmp_path), "--delete", "--topic", "big"],
        stdout=subprocess.PIPE,
        stderr=terminal,
    ) as proc:
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(60) == 0
    os.close(controller)
    text = seen.decode()
    # tqdm's bar, its last state shown, then erased: the line blanked and the cursor back at its start.
    assert "\rDeleting topic big " in text and "| 40/40 [" in text
    assert re.search(r"\r +\r$", text)
    store.create("big", 40)
    piped = topics(tmp_path, "--delete", "--topic", "big")
    assert (piped.returncode, piped.stderr) == (0, "")
