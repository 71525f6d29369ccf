"""``pysparklog console-producer`` and ``console-consumer`` in new processes, as people run them: lines in,
Kafka's DefaultMessageFormatter lines out, records on the partitions Kafka's producer would choose."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from pysparklog import LogDirectory
from pysparklog.partitioner import partition_for_keys
from tests.conftest import read_all

CLI = (sys.executable, "-m", "pysparklog.cli.main")
# UtilsTest.testMurmur2's keys and their partitions among 3 (kafka-log-format.md §4.1).
KEYED_LINES = [
    (b"21", 0),
    (b"foobar", 0),
    (b"a-little-bit-long-string", 2),
    (b"a-little-bit-longer-string", 2),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 2),
    (b"abc", 0),
]


def cli(
    *args: str, stdin: bytes = b"", env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=timeout, check=False, env=env)


def produce(log_dir: Path, topic: str, lines: bytes, *args: str) -> None:
    proc = cli("console-producer", "--log-dir", str(log_dir), "--topic", topic, *args, stdin=lines)
    assert (proc.returncode, proc.stderr) == (0, b"")


def consume(log_dir: Path, topic: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return cli("console-consumer", "--log-dir", str(log_dir), "--topic", topic, "--timeout-ms", "300", *args)


def processed(n: int) -> bytes:
    return f"Processed a total of {n} messages\n".encode()


def one_error_line(proc: subprocess.CompletedProcess[bytes], command: str) -> str:
    """The error of a failed command, checked to be one line naming the command."""
    assert proc.returncode != 0
    text = proc.stderr.decode()
    assert text.startswith(f"pysparklog {command}: error: ") and text.count("\n") == 1, text
    return text.removeprefix(f"pysparklog {command}: error: ").rstrip("\n")


def new_log_dir(path: Path) -> Path:
    logs = LogDirectory(path)
    logs.topics.create("one", 1)
    logs.topics.create("three", 3)
    return path


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return new_log_dir(tmp_path / "logs")


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log directory whose topic ``one`` holds three keyed records (offsets 0-2, one key empty, one value
    with a tab) and an unkeyed one (offset 3), for tests that only consume."""
    log_dir = new_log_dir(tmp_path_factory.mktemp("produced"))
    produce(log_dir, "one", b"k1\tv1\n\tempty key\nk3\tv\twith a tab\n", "--property", "parse.key=true")
    produce(log_dir, "one", b"unkeyed\n")
    return log_dir


def partition_values(log_dir: Path, topic: str, partition: int) -> list[bytes]:
    records = read_all(LogDirectory(log_dir).partition(topic, partition))
    return records.column("value").to_pylist() if records.num_rows else []


# -- producing and consuming -------------------------------------------------------------------


def test_lines_come_back_in_order_as_values(log_dir: Path) -> None:
    # Java's readLine ends lines at \n, \r\n and \r; an empty line is an empty record; the last needs no end.
    produce(log_dir, "one", b"first\nsecond\r\n\nthird\rfourth")
    proc = consume(log_dir, "one", "--from-beginning")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"first\nsecond\n\nthird\nfourth\n", processed(5))


def test_keyed_lines_land_where_murmur2_sends_them(log_dir: Path) -> None:
    produce(
        log_dir,
        "three",
        b"".join(key + b"\tvalue of " + key + b"\n" for key, _ in KEYED_LINES),
        "--property",
        "parse.key=true",
    )
    for partition in range(3):
        expected = [b"value of " + key for key, p in KEYED_LINES if p == partition]
        assert partition_values(log_dir, "three", partition) == expected
    keys = LogDirectory(log_dir).partition("three", 2)
    assert read_all(keys).column("key").to_pylist() == [key for key, p in KEYED_LINES if p == 2]


def test_a_line_splits_at_the_first_key_separator(log_dir: Path) -> None:
    produce(
        log_dir, "one", b"k1::v::1\n::empty key\n", "--property", "parse.key=true", "--property", "key.separator=::"
    )
    records = read_all(LogDirectory(log_dir).partition("one", 0))
    assert records.column("key").to_pylist() == [b"k1", b""]
    assert records.column("value").to_pylist() == [b"v::1", b"empty key"]


def test_unkeyed_lines_stay_on_a_sticky_partition_for_batch_size_bytes(log_dir: Path) -> None:
    """Kafka's uniform sticky partitioning: 100-byte values reach batch.size (16384 bytes) every 164 lines."""
    lines = 5000
    produce(log_dir, "three", b"".join(b"%0100d\n" % i for i in range(lines)))
    partition_of = np.full(lines, -1)
    for partition in range(3):
        partition_of[[int(v) for v in partition_values(log_dir, "three", partition)]] = partition
    assert (partition_of >= 0).all()
    runs = [partition_of[start : start + 164] for start in range(0, lines, 164)]
    assert all(len(set(run.tolist())) == 1 for run in runs)
    assert len(set(partition_of.tolist())) > 1  # 31 random choices among 3 partitions


def test_lines_are_appended_in_batches_not_one_batch_per_line(log_dir: Path) -> None:
    produce(log_dir, "one", b"".join(b"line %d\n" % i for i in range(1000)))
    dumped = cli("dump-log", "--files", str(log_dir / "one-0" / "00000000000000000000.log")).stdout.decode()
    batches = [line for line in dumped.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 1 and "count: 1000 " in batches[0]


def test_lines_reach_the_log_within_a_second_while_stdin_stays_open(log_dir: Path) -> None:
    with subprocess.Popen(
        [*CLI, "console-producer", "--log-dir", str(log_dir), "--topic", "one"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as producer:
        assert producer.stdin is not None
        producer.stdin.write(b"typed\npartial")
        producer.stdin.flush()
        deadline = time.monotonic() + 30
        while not partition_values(log_dir, "one", 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert producer.poll() is None  # still reading
        assert partition_values(log_dir, "one", 0) == [b"typed"]  # the unfinished line waits for its end
        _, err = producer.communicate(b" line\n", timeout=30)
    assert (producer.returncode, err) == (0, b"")
    assert partition_values(log_dir, "one", 0) == [b"typed", b"partial line"]


def test_partition_sends_every_line_to_one_partition(log_dir: Path) -> None:
    produce(log_dir, "three", b"21\ta\nabc\tb\n\tc\n", "--partition", "1", "--property", "parse.key=true")
    assert [partition_values(log_dir, "three", p) for p in range(3)] == [[], [b"a", b"b", b"c"], []]


@pytest.mark.parametrize(
    ("flag", "codec"), [(("--compression-codec", "zstd"), "zstd"), (("--compression-codec",), "gzip")]
)
def test_compression_codec(log_dir: Path, flag: tuple[str, ...], codec: str) -> None:
    produce(log_dir, "one", b"a\nb\n", *flag)
    dumped = cli("dump-log", "--files", str(log_dir / "one-0" / "00000000000000000000.log")).stdout.decode()
    assert f"compresscodec: {codec} " in dumped
    assert consume(log_dir, "one", "--from-beginning").stdout == b"a\nb\n"


def test_a_missing_topic_is_created_by_the_first_line_with_num_partitions(log_dir: Path) -> None:
    (log_dir / "server.properties").write_text("num.partitions=2\n")
    produce(log_dir, "new", b"k\tv\n", "--property", "parse.key=true")
    assert LogDirectory(log_dir).topics.get("new").partitions == 2
    assert sorted(partition_values(log_dir, "new", 0) + partition_values(log_dir, "new", 1)) == [b"v"]


def test_a_missing_topic_is_not_created_from_an_empty_stdin(log_dir: Path) -> None:
    produce(log_dir, "new", b"")
    assert "new" not in LogDirectory(log_dir).topics.names()


def test_a_missing_topic_is_refused_before_stdin_when_server_properties_turns_creation_off(log_dir: Path) -> None:
    (log_dir / "server.properties").write_text("auto.create.topics.enable=false\n")
    proc = cli("console-producer", "--log-dir", str(log_dir), "--topic", "new", stdin=b"v\n")
    assert one_error_line(proc, "console-producer") == (
        f"Topic 'new' does not exist, and {log_dir / 'server.properties'} sets auto.create.topics.enable=false, so "
        "it is not created on first use; create it with 'pysparklog topics --create --topic new', or set "
        "auto.create.topics.enable=true there"
    )
    assert "new" not in LogDirectory(log_dir).topics.names()


def test_a_bad_auto_create_setting_is_one_line_naming_the_file_and_the_accepted_values(log_dir: Path) -> None:
    (log_dir / "server.properties").write_text("auto.create.topics.enable=yes\n")
    proc = cli("console-producer", "--log-dir", str(log_dir), "--topic", "new", stdin=b"v\n")
    assert one_error_line(proc, "console-producer") == (
        f"{log_dir / 'server.properties'}: auto.create.topics.enable = 'yes' is invalid; accepted: true or false"
    )


def test_the_log_dir_defaults_to_the_environment(log_dir: Path) -> None:
    env = {**os.environ, "PYSPARKLOG_LOG_DIR": str(log_dir)}
    assert cli("console-producer", "--topic", "one", stdin=b"from env\n", env=env).returncode == 0
    proc = cli("console-consumer", "--topic", "one", "--from-beginning", "--timeout-ms", "300", env=env)
    assert proc.stdout == b"from env\n"


# -- what the consumer prints ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "line"),
    [
        ((), "{value}\n"),
        (("print.key=true",), "{key}\t{value}\n"),
        (("print.partition=true",), "Partition:0\t{value}\n"),
        (("print.offset=true",), "Offset:{offset}\t{value}\n"),
        (("print.timestamp=true",), "CreateTime:{ts}\t{value}\n"),
        (
            ("print.timestamp=true", "print.partition=true", "print.offset=true", "print.key=true"),
            "CreateTime:{ts}\tPartition:0\tOffset:{offset}\t{key}\t{value}\n",
        ),
        (("print.key=TRUE ", "print.value=false"), "{key}\n"),
        (("print.offset=true", "print.value=false"), "Offset:{offset}\n"),
        (("print.value=false",), ""),
        (("print.key=true", "key.separator= | ", "line.separator=;\n"), "{key} | {value};\n"),
        (("print.key=true", "null.literal=<none>"), "{key}\t{value}\n"),
        (("print.key=yes",), "{value}\n"),
    ],
)
def test_consumer_prints_as_kafkas_default_message_formatter(
    produced: Path, properties: Sequence[str], line: str
) -> None:
    records = read_all(LogDirectory(produced).partition("one", 0))
    null = "<none>" if "null.literal=<none>" in properties else "null"
    expected = "".join(
        line.format(key=null if key is None else key.decode(), value=value.decode(), offset=offset, ts=ts)
        for key, value, offset, ts in zip(
            records.column("key").to_pylist(),
            records.column("value").to_pylist(),
            records.column("offset").to_pylist(),
            records.column("timestamp").cast("int64").to_pylist(),
            strict=True,
        )
    )
    args = [arg for p in properties for arg in ("--property", p)]
    proc = consume(produced, "one", "--from-beginning", *args)
    assert (proc.returncode, proc.stdout.decode(), proc.stderr) == (0, expected, processed(4))


def test_a_log_append_time_topic_prints_log_append_time(log_dir: Path) -> None:
    LogDirectory(log_dir).topics.create("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
    produce(log_dir, "stamped", b"v\n")
    stamp = read_all(LogDirectory(log_dir).partition("stamped", 0)).column("timestamp").cast("int64")[0].as_py()
    proc = consume(log_dir, "stamped", "--from-beginning", "--property", "print.timestamp=true")
    assert proc.stdout == f"LogAppendTime:{stamp}\tv\n".encode()


def test_partitions_are_printed_in_partition_order(log_dir: Path) -> None:
    produce(
        log_dir, "three", b"".join(key + b"\t" + key + b"\n" for key, _ in KEYED_LINES), "--property", "parse.key=true"
    )
    proc = consume(log_dir, "three", "--from-beginning", "--property", "print.partition=true")
    expected = [b"Partition:%d\t%s" % (p, key) for key, p in sorted(KEYED_LINES, key=lambda kp: kp[1])]
    assert proc.stdout.splitlines() == expected


# -- where the consumer starts and when it stops ------------------------------------------------


@pytest.mark.parametrize(
    ("args", "offsets"),
    [
        (("--partition", "0", "--offset", "2"), [2, 3]),
        (("--partition", "0", "--offset", "earliest"), [0, 1, 2, 3]),
        (("--partition", "0", "--offset", "LATEST"), []),
        (("--partition", "0"), []),  # from the end, as Kafka's tool starts a partition without --offset
        (("--partition", "0", "--from-beginning"), [0, 1, 2, 3]),
        (("--partition", "0", "--offset", "99"), []),  # out of range: auto.offset.reset=latest
        ((), []),
    ],
)
def test_start_position(produced: Path, args: Sequence[str], offsets: list[int]) -> None:
    proc = consume(produced, "one", *args, "--property", "print.offset=true", "--property", "print.value=false")
    printed = [f"Offset:{offset}".encode() for offset in offsets]
    assert (proc.returncode, proc.stdout.splitlines(), proc.stderr) == (0, printed, processed(len(offsets)))


def test_max_messages_stops_after_that_many_records(log_dir: Path) -> None:
    produce(log_dir, "three", b"".join(b"%d\n" % i for i in range(50)))
    proc = cli(
        "console-consumer", "--log-dir", str(log_dir), "--topic", "three", "--from-beginning", "--max-messages", "7"
    )
    assert (proc.returncode, len(proc.stdout.splitlines()), proc.stderr) == (0, 7, processed(7))


def test_timeout_ms_stops_after_that_long_without_records(log_dir: Path) -> None:
    started = time.monotonic()
    proc = cli("console-consumer", "--log-dir", str(log_dir), "--topic", "three", "--timeout-ms", "1500")
    elapsed = time.monotonic() - started
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", processed(0))
    assert 1.5 <= elapsed < 10


def test_a_consumer_started_before_a_producer_prints_its_lines(log_dir: Path) -> None:
    produce(log_dir, "one", b"old 1\nold 2\n")
    with subprocess.Popen(
        [*CLI, "console-consumer", "--log-dir", str(log_dir), "--topic", "one", "--max-messages", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as consumer:
        try:
            # Produce rounds of three lines until the consumer has three: it starts at the log end it finds,
            # so it must print exactly one whole round, and never the older lines.
            rounds = 0
            while consumer.poll() is None and rounds < 100:
                produce(log_dir, "one", b"round %d a\nround %d b\nround %d c\n" % (rounds, rounds, rounds))
                rounds += 1
                time.sleep(0.2)
            out, err = consumer.communicate(timeout=30)
        finally:
            consumer.kill()
    assert (consumer.returncode, err) == (0, processed(3))
    lines = out.splitlines()
    assert len(lines) == 3 and lines[0].startswith(b"round ")
    round_ = lines[0].split()[1]
    assert lines == [b"round %s a" % round_, b"round %s b" % round_, b"round %s c" % round_]


def test_ctrl_c_ends_the_consumer_with_its_count(log_dir: Path) -> None:
    produce(log_dir, "one", b"a\nb\n")
    with subprocess.Popen(
        [*CLI, "console-consumer", "--log-dir", str(log_dir), "--topic", "one", "--from-beginning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as consumer:
        try:
            assert consumer.stdout is not None
            assert [consumer.stdout.readline(), consumer.stdout.readline()] == [b"a\n", b"b\n"]  # now polling
            consumer.send_signal(signal.SIGINT)
            out, err = consumer.communicate(timeout=30)
        finally:
            consumer.kill()
    assert (consumer.returncode, out, err) == (130, b"", processed(2))


# -- errors: one line on stderr, a non-zero status -----------------------------------------------


def test_a_line_without_the_key_separator_stops_the_producer_after_the_lines_before_it(log_dir: Path) -> None:
    proc = cli(
        "console-producer", "--log-dir", str(log_dir), "--topic", "one", "--property", "parse.key=true",
        stdin=b"k\tv\nno separator here\nk2\tv2\n",
    )  # fmt: skip
    assert one_error_line(proc, "console-producer") == "No key separator found on line number 2: 'no separator here'"
    assert partition_values(log_dir, "one", 0) == [b"v"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--topic", "__transaction_state"), "Topic '__transaction_state' does not exist"),
        (
            ("--topic", "one", "--compression-codec", "brotli"),
            "argument --compression-codec: unknown compression codec 'brotli'; accepted: none, uncompressed, gzip, "
            "snappy, lz4, zstd",
        ),
        (("--topic", "three", "--partition", "3"), "Partition 3 of topic 'three' does not exist"),
        (
            ("--topic", "one", "--property", "parse.everything=true"),
            "property 'parse.everything' is not supported; accepted: parse.key, key.separator, parse.headers, "
            "headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error",
        ),
        (("--topic", "one", "--property", "parse.key"), "Invalid command line properties: 'parse.key'"),
        (("--topic", "one", "--property", "key.separator="), "key.separator is empty"),
    ],
)
def test_producer_errors(log_dir: Path, args: Sequence[str], message: str) -> None:
    proc = cli("console-producer", "--log-dir", str(log_dir), *args, stdin=b"k\tv\n")
    assert one_error_line(proc, "console-producer").startswith(message)
    assert partition_values(log_dir, "one", 0) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--topic", "missing"), "Topic 'missing' does not exist"),
        (("--topic", "one", "--offset", "1"), "The partition is required when offset is specified."),
        (
            ("--topic", "one", "--partition", "0", "--offset", "1", "--from-beginning"),
            "Options from-beginning and offset cannot be specified together.",
        ),
        (
            ("--topic", "one", "--partition", "0", "--offset", "-1"),
            "The provided offset value '-1' is incorrect. Valid values are 'earliest', 'latest', or a non-negative "
            "long.",
        ),
        (("--topic", "one", "--property", "print.epoch=true"), "property 'print.epoch' is not supported"),
        (("--topic", "one", "--max-messages", "many"), "argument --max-messages: invalid value 'many'"),
    ],
)
def test_consumer_errors(log_dir: Path, args: Sequence[str], message: str) -> None:
    proc = cli("console-consumer", "--log-dir", str(log_dir), "--timeout-ms", "100", *args)
    assert one_error_line(proc, "console-consumer").startswith(message)
    assert proc.stdout == b""


def test_keyed_partitions_agree_with_the_partitioner(log_dir: Path) -> None:
    """Many random keys: each record sits in the partition ``partition_for_keys`` gives its key."""
    rng = np.random.default_rng(3)
    keys = [b"key-%d" % k for k in rng.integers(0, 10**9, 2000)]
    produce(log_dir, "three", b"".join(k + b"\tv\n" for k in keys), "--property", "parse.key=true")
    logs = LogDirectory(log_dir)
    for partition in range(3):
        stored = read_all(logs.partition("three", partition)).column("key")
        assert (partition_for_keys(stored, 3) == partition).all()
    assert sum(len(read_all(logs.partition("three", p))) for p in range(3)) == len(keys)
