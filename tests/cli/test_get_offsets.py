"""``pysparklog get-offsets``: kafka-get-offsets.sh's lines for every ``--time``, Kafka's partition filters and
its error messages, run in a new process as people run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysparklog import BatchSettings, LogConfig, LogDirectory
from tests.cli.test_dump_log import run_cli
from tests.conftest import keyed_table

FIRST_TS = 1_700_000_000_000  # keyed_table's timestamps: FIRST_TS + row number
EMPTY_ORDERS = "".join(f"orders:{partition}:0\n" for partition in range(2, 10))
LATEST_ORDERS = "orders:0:100\norders:1:30\norders:10:5\n" + EMPTY_ORDERS  # "orders-10" < "orders-2"
NO_MATCH = "pysparklog get-offsets: error: Could not match any topic-partitions with the specified filters\n"


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """orders (11 partitions: 0 with 100 records over several segments, 1 with 30 of later timestamps, 10 with
    5, the others empty), audit (10 records), __consumer_offsets (1) and a KRaft metadata log (3), as a broker's
    log directory holds one."""
    path = tmp_path_factory.mktemp("logs")
    logs = LogDirectory(path, LogConfig(segment_bytes=3000))
    logs.topics.create("orders", 11)
    logs.partition("orders", 0).append_arrow(keyed_table(100), BatchSettings(max_batch_bytes=500))
    logs.partition("orders", 1).append_arrow(keyed_table(30, start=1000))
    logs.partition("orders", 10).append_arrow(keyed_table(5))
    logs.partition("audit", 0).append_arrow(keyed_table(10))
    logs.partition("__consumer_offsets", 0).append_arrow(keyed_table(1))
    logs.partition("__cluster_metadata", 0).append_arrow(keyed_table(3))
    return path


def get_offsets(log_dir: Path, *args: str) -> tuple[int, str, str]:
    proc = run_cli("get-offsets", "--log-dir", str(log_dir), *args)
    return proc.returncode, proc.stdout, proc.stderr


def test_latest_by_default_sorted_as_kafka_sorts_topic_partitions(log_dir: Path) -> None:
    assert get_offsets(log_dir, "--topic", "orders") == (0, LATEST_ORDERS, "")
    assert get_offsets(log_dir, "--topic", "orders", "--time", "-1") == (0, LATEST_ORDERS, "")
    assert get_offsets(log_dir, "--topic", "orders", "--time", "latest") == (0, LATEST_ORDERS, "")


def test_earliest_is_the_log_start_offset(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path, LogConfig(segment_bytes=3000)).partition("orders", 0)
    log.append_arrow(keyed_table(100), BatchSettings(max_batch_bytes=500))
    assert get_offsets(tmp_path, "--time", "-2") == (0, "orders:0:0\n", "")
    log.raise_log_start_offset(42)
    for time in ("-2", "earliest", "-4", "earliest-local"):
        assert get_offsets(tmp_path, "--time", time) == (0, "orders:0:42\n", ""), time


def test_a_timestamp_finds_the_first_record_at_or_after_it(log_dir: Path) -> None:
    assert get_offsets(log_dir, "--topic", "orders", "--partitions", "0", "--time", str(FIRST_TS + 50)) == (
        0,
        "orders:0:50\n",
        "",
    )
    # Past every record of orders-0, within orders-1 (whose records are stamped FIRST_TS + 1000 + i):
    # a partition without an answer is left out, as Kafka's tool leaves out -1.
    assert get_offsets(log_dir, "--topic", "orders", "--time", str(FIRST_TS + 1010)) == (0, "orders:1:10\n", "")
    assert get_offsets(log_dir, "--topic", "orders", "--time", str(FIRST_TS + 10**6)) == (0, "", "")


def test_max_timestamp_and_the_tiered_times(log_dir: Path) -> None:
    assert get_offsets(log_dir, "--topic", "orders", "--time", "-3") == (
        0,
        "orders:0:99\norders:1:29\norders:10:4\n",  # an empty partition has no timestamp
        "",
    )
    assert get_offsets(log_dir, "--topic", "orders", "--time", "max-timestamp")[1].startswith("orders:0:99\n")
    for time in ("-5", "latest-tiered", "-6", "earliest-pending-upload"):
        assert get_offsets(log_dir, "--time", time) == (0, "", ""), "no tiered storage: no offset"


def test_topic_is_a_regex_matching_whole_names_and_partitions_a_list(log_dir: Path) -> None:
    assert get_offsets(log_dir, "--topic", "ord.*", "--partitions", "0,2") == (0, "orders:0:100\norders:2:0\n", "")
    assert get_offsets(log_dir, "--topic", "orders,audit", "--partitions", "0") == (
        0,
        "audit:0:10\norders:0:100\n",  # a comma is an alternative, as in Kafka's topic filter
        "",
    )
    assert get_offsets(log_dir, "--topic", "rder") == (1, "", NO_MATCH)
    assert get_offsets(log_dir, "--topic", "orders", "--partitions", "11") == (1, "", NO_MATCH)


def test_every_topic_by_default_and_internal_topics_can_be_left_out(log_dir: Path) -> None:
    """Kafka's tool lists the topics a broker lists: its internal topics unless ``--exclude-internal-topics``, and
    never ``__cluster_metadata``, the KRaft metadata log, which is no topic."""
    everything = "__consumer_offsets:0:1\naudit:0:10\n" + LATEST_ORDERS
    assert get_offsets(log_dir) == (0, everything, "")
    assert get_offsets(log_dir, "--exclude-internal-topics") == (0, everything.split("\n", 1)[1], "")
    assert get_offsets(log_dir, "--topic", "__cluster_metadata") == (1, "", NO_MATCH)


def test_topic_partitions_rules(log_dir: Path) -> None:
    assert get_offsets(log_dir, "--topic-partitions", "orders:1-3,audit") == (
        0,
        "audit:0:10\norders:1:30\norders:2:0\n",  # 1-3 excludes 3 (and 10)
        "",
    )
    assert get_offsets(log_dir, "--topic-partitions", "orders:-2") == (0, "orders:0:100\norders:1:30\n", "")
    assert get_offsets(log_dir, "--topic-partitions", "orders:2-") == (0, "orders:10:5\n" + EMPTY_ORDERS, "")
    assert get_offsets(log_dir, "--topic-partitions", ":0", "--exclude-internal-topics") == (
        0,
        "audit:0:10\norders:0:100\n",
        "",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--time", "yesterday"],
            "Malformed time argument yesterday. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / "
            "-4 or earliest-local / -5 or latest-tiered / -6 or earliest-pending-upload, or a specified long format "
            "timestamp",
        ),
        (
            ["--time", "-7"],
            "Malformed time argument -7. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / "
            "-4 or earliest-local / -5 or latest-tiered / -6 or earliest-pending-upload, or a specified long format "
            "timestamp",
        ),
        (
            ["--partitions", "0,one"],
            "--partitions expects a comma separated list of numeric partition ids, but received: 0,one",
        ),
        (
            ["--topic", "orders", "--topic-partitions", "orders:0"],
            "--topic-partitions cannot be used with --topic or --partitions",
        ),
        (["--topic-partitions", "orders:x"], "Invalid rule specification: orders:x"),
        (["--topic", "orders("], "orders( is an invalid regex."),
    ],
)
def test_errors_are_kafkas(log_dir: Path, args: list[str], message: str) -> None:
    assert get_offsets(log_dir, *args) == (1, "", f"pysparklog get-offsets: error: {message}\n")


def test_log_dir_from_the_environment_and_missing(
    log_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_LOG_DIR", str(log_dir))
    proc = run_cli("get-offsets", "--topic", "audit")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "audit:0:10\n", "")
    monkeypatch.delenv("PYSPARKLOG_LOG_DIR")
    proc = run_cli("get-offsets", "--topic", "audit")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "pysparklog get-offsets: error: --log-dir is required (or set PYSPARKLOG_LOG_DIR)\n"
    missing = tmp_path / "nowhere"
    assert get_offsets(missing) == (
        1,
        "",
        f"pysparklog get-offsets: error: log directory {missing} does not exist or is not a directory\n",
    )


def test_a_partition_that_cannot_be_read_is_skipped_with_kafkas_line(log_dir: Path, tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.partition("good", 0).append_arrow(keyed_table(3))
    bad = tmp_path / "bad-0"
    bad.mkdir()
    (bad / "00000000000000000000.log").write_bytes(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\xff" * 40)
    code, out, err = get_offsets(tmp_path)
    assert (code, out) == (1, "good:0:3\n")
    assert err.startswith("Skip getting offsets for topic-partition bad-0 due to error: file ")
    assert err.count("\n") == 1
