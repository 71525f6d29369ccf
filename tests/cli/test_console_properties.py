"""The console tools' headers (``parse.headers``, ``print.headers``), client configs (``--producer-property``,
``--consumer-property``) and ``--include``, as Kafka's ``LineMessageReader``, ``DefaultMessageFormatter`` and
console tools read them.

Round trips run in new processes as people run them; the many refusals run in this process (``main``), stdin
being a pipe."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory
from pysparklog.cli.main import main
from tests.cli.test_console import cli, consume, new_log_dir, partition_values, processed, produce
from tests.conftest import read_all

HEADERS = ("--property", "parse.headers=true", "--property", "parse.key=true")
PRINT_HEADERS = ("--property", "print.headers=true", "--property", "print.key=true")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return new_log_dir(tmp_path / "logs")


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """What the next in-process ``console-producer`` reads on stdin: append the bytes to the list."""
    given: list[bytes] = []

    class Pipe:
        def fileno(self) -> int:
            read, write = os.pipe()
            os.write(write, b"".join(given))
            os.close(write)
            return read

    monkeypatch.setattr("sys.stdin", Pipe())
    yield given


def records(log_dir: Path, topic: str = "one", partition: int = 0) -> list[dict[str, object]]:
    """Each record's key, value and headers, as ``(key, value)`` pairs."""
    table = read_all(LogDirectory(log_dir).partition(topic, partition), include_headers=True)
    rows = table.select(["key", "value", "headers"]).to_pylist() if table.num_rows else []
    return [{**row, "headers": [(h["key"], h["value"]) for h in row["headers"] or []]} for row in rows]


# -- headers ----------------------------------------------------------------------------------------------


def test_headers_round_trip_byte_for_byte(log_dir: Path) -> None:
    # Kafka's reader and formatter use the same separators by default: what goes in comes out.
    lines = b"h1:v1,h2:v2\tk1\tvalue 1\nh:\tk2\tv:2,x\nh1:caf\xc3\xa9,h1:again\tk3\t\n"
    produce(log_dir, "one", lines, *HEADERS)
    assert records(log_dir)[0] == {"key": b"k1", "value": b"value 1", "headers": [("h1", b"v1"), ("h2", b"v2")]}
    consumed = consume(log_dir, "one", "--from-beginning", *PRINT_HEADERS)
    assert (consumed.returncode, consumed.stdout, consumed.stderr) == (0, lines, processed(3))


def test_headers_without_a_key_and_records_without_headers(log_dir: Path) -> None:
    produce(log_dir, "one", b"a:1\tv1\n", "--property", "parse.headers=true")
    produce(log_dir, "one", b"k\tv2\n", "--property", "parse.key=true")
    consumed = consume(
        log_dir, "one", "--from-beginning", *PRINT_HEADERS, "--property", "headers.separator=;",
        "--property", "print.offset=true",
    )  # fmt: skip
    assert consumed.stdout == b"Offset:0\ta:1\tnull\tv1\nOffset:1\tNO_HEADERS\tk\tv2\n"


def test_null_marker_and_kafkas_header_splitting(log_dir: Path) -> None:
    lines = (
        b"NULL\tk1\tNULL\n"  # no headers, a null value: a tombstone
        b"h:NULL\tNULL\tv2\n"  # a null header value, a null key
        b"x:1,,\tk3\tv3\n"  # Java's split drops trailing empty pairs
        b",\tk4\tv4\n"  # and so all of them: no headers
        b"a:1|b:2\tk5\tv5\n"  # no match of the separator: one pair, split at its first ':'
    )
    produce(log_dir, "one", lines, *HEADERS, "--property", "null.marker=NULL")
    assert records(log_dir) == [
        {"key": b"k1", "value": None, "headers": []},
        {"key": None, "value": b"v2", "headers": [("h", None)]},
        {"key": b"k3", "value": b"v3", "headers": [("x", b"1")]},
        {"key": b"k4", "value": b"v4", "headers": []},
        {"key": b"k5", "value": b"v5", "headers": [("a", b"1|b:2")]},
    ]
    consumed = consume(log_dir, "one", "--from-beginning", *PRINT_HEADERS)
    assert consumed.stdout == (
        b"NO_HEADERS\tk1\tnull\nh:null\tnull\tv2\nx:1\tk3\tv3\nNO_HEADERS\tk4\tv4\na:1|b:2\tk5\tv5\n"
    )


def test_separators_and_a_regex_headers_separator(log_dir: Path) -> None:
    produce(
        log_dir, "one", b"a=1; b=2|k|v\n", *HEADERS, "--property", "headers.delimiter=|",
        "--property", "key.separator=|", "--property", "headers.separator=; *", "--property", "headers.key.separator==",
    )  # fmt: skip
    assert records(log_dir) == [{"key": b"k", "value": b"v", "headers": [("a", b"1"), ("b", b"2")]}]


def test_ignore_error_reads_what_it_can(log_dir: Path) -> None:
    produce(log_dir, "one", b"no delimiter\nh\tk\tv\nh:1\tno key\n", *HEADERS, "--property", "ignore.error=true")
    assert records(log_dir) == [
        {"key": None, "value": b"no delimiter", "headers": []},
        {"key": b"k", "value": b"v", "headers": [("h", None)]},
        {"key": None, "value": b"no key", "headers": [("h", b"1")]},
    ]


@pytest.mark.parametrize(
    ("lines", "args", "message"),
    [
        (b"h:1\tk\tv\nno delimiter\n", (), "No headers delimiter found on line number 2: 'no delimiter'"),
        (b"h:1\tk\tv\nh:2\tno key\n", (), "No key separator found on line number 2: 'h:2\tno key'"),
        (b"h:1\tk\tv\n\tk\tv\n", (), "No header key separator found in pair '' on line number 2"),
        (b"h:1\tk\tv\na:1,b\tk\tv\n", (), "No header key separator found in pair 'b' on line number 2"),
        (
            b"h:1\tk\tv\nN:1,b\tk\tv\n",
            ("--property", "null.marker=N"),
            "Header keys should not be equal to the null marker 'N' as they can't be null",
        ),
        (
            b"h:1\tk\tv\nN:1\tk\tv\n",
            ("--property", "null.marker=N", "--property", "ignore.error=true"),
            "Header keys should not be equal to the null marker 'N' as they can't be null",
        ),
    ],
)
def test_a_line_kafkas_reader_refuses_ends_the_command_after_the_lines_before_it(
    log_dir: Path,
    stdin: list[bytes],
    capsys: pytest.CaptureFixture[str],
    lines: bytes,
    args: tuple[str, ...],
    message: str,
) -> None:
    stdin.append(lines)
    assert main(["console-producer", "--log-dir", str(log_dir), "--topic", "one", *HEADERS, *args]) == 1
    assert capsys.readouterr().err == f"pysparklog console-producer: error: {message}\n"
    assert partition_values(log_dir, "one", 0) == [b"v"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("headers.delimiter=,",), "headers.delimiter and headers.separator may not be equal; accepted: different"),
        (("headers.separator=:",), "headers.separator and headers.key.separator may not be equal"),
        (("headers.key.separator=\t",), "headers.delimiter and headers.key.separator may not be equal"),
        (("null.marker=\t",), "null.marker and key.separator may not be equal"),
        (("key.separator=;", "null.marker=,"), "null.marker and headers.separator may not be equal"),
        (("headers.separator=",), "headers.separator is empty; accepted: one or more characters"),
        (("headers.separator=(",), "headers.separator '(' is not a regular expression"),
    ],
)
def test_reader_properties_kafka_refuses_are_refused(
    log_dir: Path, stdin: list[bytes], capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    stdin.append(b"h:1\tk\tv\n")
    properties = [arg for value in args for arg in ("--property", value)]
    assert main(["console-producer", "--log-dir", str(log_dir), "--topic", "one", *HEADERS, *properties]) == 1
    assert capsys.readouterr().err.startswith(f"pysparklog console-producer: error: {message}")
    assert partition_values(log_dir, "one", 0) == []


# -- client configs ---------------------------------------------------------------------------------------


def test_producer_properties_reach_the_producer(log_dir: Path) -> None:
    lines = b"".join(b"line %d\n" % i for i in range(200))
    proc = cli(
        "console-producer", "--log-dir", str(log_dir), "--topic", "one", "--producer-property", "batch.size=100",
        "--producer-property", "compression.type=zstd", "--producer-property", "bootstrap.servers=broker:9092",
        stdin=lines,
    )  # fmt: skip
    assert proc.returncode == 0
    assert proc.stderr == (
        b"WARN: pysparklog producer: ignoring bootstrap.servers: there is no broker to connect to (the log "
        b"directory takes the place of bootstrap.servers)\n"
    )
    assert partition_values(log_dir, "one", 0) == lines.splitlines()
    dumped = cli("dump-log", "--files", str(log_dir / "one-0" / "00000000000000000000.log")).stdout.decode()
    assert dumped.count("compresscodec: zstd") > 50, "batch.size=100: two records or fewer per batch, each zstd"


def test_compression_codec_wins_over_compression_type(log_dir: Path) -> None:
    produce(log_dir, "one", b"v\n", "--producer-property", "compression.type=zstd", "--compression-codec", "lz4")
    dumped = cli("dump-log", "--files", str(log_dir / "one-0" / "00000000000000000000.log")).stdout.decode()
    assert "compresscodec: lz4" in dumped


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--producer-property", "batch.size"), "Invalid producer property 'batch.size'; accepted: NAME=VALUE"),
        (("--producer-property", "fetch.min.bytes=1"), "unknown producer config 'fetch.min.bytes'; accepted: "),
        (("--producer-property", "acks=0"), "acks"),
    ],
)
def test_producer_property_errors(
    log_dir: Path, stdin: list[bytes], capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    stdin.append(b"v\n")
    assert main(["console-producer", "--log-dir", str(log_dir), "--topic", "one", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pysparklog console-producer: error: ") and message in err and err.count("\n") == 1
    assert partition_values(log_dir, "one", 0) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--topic", "one", "--group", "a", "--consumer-property", "group.id=b"),
            "The group ids provided in different places (directly using '--group', via '--consumer-property') do not "
            "match. Detected group ids: 'a', 'b'",
        ),
        (
            ("--topic", "one", "--partition", "0", "--consumer-property", "group.id=b"),
            "Options group and partition cannot be specified together.",
        ),
        (
            ("--topic", "one", "--from-beginning", "--consumer-property", "auto.offset.reset=latest"),
            "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please remove one option",
        ),
        (("--topic", "one", "--consumer-property", "fetch.min.bytes=1"), "unknown consumer property 'fetch.min.bytes'"),
        (("--topic", "one", "--consumer-property", "max.poll.records=0"), "max.poll.records = 0 is invalid"),
        (("--include", "(", "--from-beginning"), "( is an invalid regex."),
        (("--include", "one", "--partition", "0"), "The topic is required when partition is specified."),
    ],
)
def test_consumer_option_errors(
    log_dir: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    assert main(["console-consumer", "--log-dir", str(log_dir), "--timeout-ms", "100", *args]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"pysparklog console-consumer: error: {message}") and err.count("\n") == 1


def test_consumer_properties_reach_the_consumer(log_dir: Path) -> None:
    produce(log_dir, "one", b"a\nb\nc\n")
    # group.id makes it a group member (it commits what it printed), auto.offset.reset=earliest starts at the start.
    args = ("--consumer-property", "group.id=g", "--consumer-property", "auto.offset.reset=earliest")
    first = consume(log_dir, "one", *args, "--consumer-property", "bootstrap.servers=broker:9092")
    assert (first.returncode, first.stdout) == (0, b"a\nb\nc\n")
    assert first.stderr.startswith(b"WARN: pysparklog consumer: ignoring bootstrap.servers: there is no broker")
    produce(log_dir, "one", b"d\n")
    again = consume(log_dir, "one", *args)
    assert (again.stdout, again.stderr) == (b"d\n", processed(1)), "from the group's committed offset"


def test_include_reads_every_matching_topic(tmp_path: Path) -> None:
    log_dir = new_log_dir(tmp_path)
    LogDirectory(log_dir).topics.create("__consumer_offsets", 1)
    LogDirectory(log_dir).partition("__consumer_offsets", 0).append_arrow(pa.table({"value": [b"internal"]}))
    produce(log_dir, "one", b"1\n")
    produce(log_dir, "three", b"3\n", "--partition", "2")
    include = ("console-consumer", "--log-dir", str(log_dir), "--from-beginning", "--timeout-ms", "300")
    consumed = cli(*include, "--include", "one, three, __.*", "--property", "print.partition=true")
    assert (consumed.returncode, consumed.stderr) == (0, processed(2))
    assert sorted(consumed.stdout.splitlines()) == [b"Partition:0\t1", b"Partition:2\t3"]
    assert cli(*include, "--include", "t.*").stdout == b"3\n"
    both = cli(*include, "--include", "one", "--topic", "one")
    assert both.returncode == 2 and b"not allowed with argument" in both.stderr
