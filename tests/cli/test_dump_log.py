"""``pysparklog dump-log``: Kafka's DumpLogSegments lines, on a real broker's files, against Kafka 4.2.0's own
tool on files of every kind (broker-written, engine-written, legacy, transactional, damaged), and on bad input.

The command runs in a new process, as people run it; the ``interop`` tests run Kafka's tool on the
same files first and require the same stdout byte for byte (and the same stderr where Kafka's tool
ends normally).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import BatchSettings, Codec, LogConfig, LogDirectory, TimestampType
from pysparklog.storage.records.arrow_records import HEADER_TYPE, encode_control_batch
from pysparklog.storage.records.default_records import ATTRIBUTES_OFFSET, ControlRecordType, end_txn_marker
from tests.interop.kafka_tools import DumpLogSegments
from tests.interop.test_kafka_dump_log_fixture import PATIENT_BATCH_LINES, PATIENT_RECORD_PREFIXES, _patient_value
from tests.storage.records.helpers import LegacyRecordBatchBuilder, restamp_crc

SEGMENT = "00000000000000000000"
LEADER_CHANGE_LINE = (
    "| offset: 0 CreateTime: 1769791434349 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] "
    'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'
)
# Bytes Python and Java decode differently unless the CLI replaces them as Java does (encoded
# surrogates), and a truncated sequence; plus text that must survive as it is.
AWKWARD_BYTES = [b"\xed\xa0\x80-\xed\xbf", b"caf\xc3\xa9 \xe2\x82", b"line\r\nbreak\x00", b"\xf0\x9f\x98\x80"]


CLI = (sys.executable, "-m", "pysparklog.cli.main")


def run_cli(*args: str, executable: Sequence[str] = CLI) -> subprocess.CompletedProcess[str]:
    """Run ``pysparklog <args>`` in a new process; output decoded as UTF-8 with no newline translation."""
    proc = subprocess.run([*executable, *args], capture_output=True, timeout=300, check=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def dump(files: Sequence[Path], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("dump-log", "--files", ",".join(str(f) for f in files), *args)


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith(prefix)]


def field(line: str, name: str) -> int:
    match = re.search(rf"(?:^|\s){name}: (-?\d+)", line)
    assert match is not None, f"no {name!r} in {line!r}"
    return int(match[1])


def copy(directory: Path, names: Sequence[str], target: Path) -> list[Path]:
    """Copies of read-only fixture files (Kafka's tool may create a missing sibling ``.index``)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(directory / name, target / name)
    return [target / name for name in names]


# -- a real broker's files, exact lines -------------------------------------------------------------


def test_shallow_dump_of_a_broker_log(broker_log_dir: Path) -> None:
    log = broker_log_dir / "TestTopicPatient-0" / f"{SEGMENT}.log"
    proc = dump([log])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == "\n".join([f"Dumping {log}", "Log starting offset: 0", *PATIENT_BATCH_LINES, ""])


def test_print_data_log_prints_each_record_with_its_payload(broker_log_dir: Path) -> None:
    log = broker_log_dir / "TestTopicPatient-0" / f"{SEGMENT}.log"
    data = log.read_bytes()
    proc = dump([log], "--print-data-log")
    assert (proc.returncode, proc.stderr) == (0, "")
    expected = f"Dumping {log}\nLog starting offset: 0\n"
    for batch_line, prefix in zip(PATIENT_BATCH_LINES, PATIENT_RECORD_PREFIXES, strict=True):
        expected += f"{batch_line}\n{prefix}{_patient_value(data, batch_line, prefix)}\n"
    assert proc.stdout == expected


def test_consumer_offsets_log_and_its_indexes(broker_log_dir: Path) -> None:
    directory = broker_log_dir / "__consumer_offsets-6"
    log = directory / f"{SEGMENT}.log"
    proc = dump([log], "--deep-iteration")
    assert (proc.returncode, proc.stderr) == (0, "")
    batches = lines(proc.stdout, "baseOffset: ")
    assert [field(b, "baseOffset") for b in batches] == list(range(13))
    assert all(b.endswith(" isvalid: true") and " producerId: -1 " in b for b in batches)
    positions = [field(b, "position") for b in batches]
    sizes = [field(b, "size") for b in batches]
    assert positions == [sum(sizes[:i]) for i in range(13)]
    records = lines(proc.stdout, "| offset: ")
    assert [field(r, "offset") for r in records] == list(range(13))
    assert (field(records[0], "CreateTime"), field(records[-1], "CreateTime")) == (1769791662955, 1769793578176)
    # The broker's index entries point at the batches holding offsets 3 and 7.
    assert (positions[3], positions[7]) == (4730, 9571)

    index, time_index = directory / f"{SEGMENT}.index", directory / f"{SEGMENT}.timeindex"
    snapshot = directory / "00000000000000000013.snapshot"
    proc = dump([index, time_index, snapshot])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.split("\n") == [
        f"Dumping {index}",
        "offset: 3 position: 4730",
        "offset: 7 position: 9571",
        f"Dumping {time_index}",
        "timestamp: 1769791783399 offset: 3",
        "timestamp: 1769792518093 offset: 7",
        "timestamp: 1769793578176 offset: 12",
        f"Dumping {snapshot}",  # an empty producer-state snapshot
        "",
    ]
    sanity = dump([index, time_index], "--index-sanity-check")
    assert (sanity.returncode, sanity.stderr) == (0, "")
    assert sanity.stdout == (
        f"Dumping {index}\n{index} passed sanity check.\nDumping {time_index}\n{time_index} passed sanity check.\n"
    )
    verified = dump([index, time_index], "--verify-index-only")
    assert (verified.returncode, verified.stderr) == (0, "")
    assert verified.stdout == f"Dumping {index}\nDumping {time_index}\n"


def test_cluster_metadata_log_deep_iteration(broker_log_dir: Path) -> None:
    proc = dump([broker_log_dir / "__cluster_metadata-0" / f"{SEGMENT}.log"], "--deep-iteration")
    assert (proc.returncode, proc.stderr) == (0, "")  # stderr would list offset gaps
    batches = lines(proc.stdout, "baseOffset: ")
    records = lines(proc.stdout, "| offset: ")
    assert (len(batches), len(records)) == (4814, 4929)
    assert all(b.endswith(" isvalid: true") for b in batches)
    assert [field(r, "offset") for r in records] == list(range(4929))
    assert records[0] == LEADER_CHANGE_LINE  # the KRaft leader's control record


# -- bad input -------------------------------------------------------------------------------------


def test_a_missing_file_is_one_error_line(tmp_path: Path) -> None:
    missing = tmp_path / f"{SEGMENT}.log"
    proc = dump([missing])
    assert proc.returncode == 1
    assert proc.stdout == f"Dumping {missing}\nLog starting offset: 0\n"
    assert proc.stderr == f"pysparklog dump-log: error: No such file or directory: {missing}\n"


def test_an_unknown_file_is_ignored_and_the_next_one_dumped(tmp_path: Path, broker_log_dir: Path) -> None:
    unknown = tmp_path / "notes.txt"
    unknown.write_text("not a log")
    snapshot = broker_log_dir / "__consumer_offsets-6" / "00000000000000000013.snapshot"
    proc = dump([unknown, snapshot])
    assert proc.returncode == 0
    assert proc.stdout == f"Dumping {unknown}\nDumping {snapshot}\n"
    assert proc.stderr == f"Ignoring unknown file {unknown}\n"


def test_a_truncated_index_lists_its_whole_entries_and_fails_the_sanity_check(
    tmp_path: Path, broker_log_dir: Path
) -> None:
    (log,) = copy(broker_log_dir / "__consumer_offsets-6", [f"{SEGMENT}.log"], tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">ii", 3, 4730) + b"\x00\x00\x00\x07")  # 12 bytes: one entry and a half
    proc = dump([index])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"Dumping {index}\noffset: 3 position: 4730\n"
    proc = dump([index], "--index-sanity-check")
    assert proc.returncode == 1
    assert proc.stdout == f"Dumping {index}\n"
    assert proc.stderr == (
        f"pysparklog dump-log: error: Index file {index} is corrupt, found 12 bytes which is neither positive nor "
        "a multiple of 8\n"
    )


def test_a_corrupt_size_field_ends_the_dump_after_the_batches_before_it(tmp_path: Path, broker_log_dir: Path) -> None:
    (log,) = copy(broker_log_dir / "TestTopicPatient-0", [f"{SEGMENT}.log"], tmp_path)
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, 1901 + 8, 5)  # the second batch's size field, below Kafka's minimum of 14
    log.write_bytes(bytes(data))
    proc = dump([log])
    assert proc.returncode == 1
    assert proc.stdout == "\n".join([f"Dumping {log}", "Log starting offset: 0", PATIENT_BATCH_LINES[0], ""])
    assert proc.stderr == (
        f"pysparklog dump-log: error: file {log}, position 1901: entry size 5 is smaller than the minimum record "
        "overhead (14)\n"
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((), "pysparklog: error: the following arguments are required: COMMAND"),
        (("dump-log",), "pysparklog dump-log: error: the following arguments are required: --files"),
        (
            ("dump-log", "--files", "segment.log"),
            "pysparklog dump-log: error: argument --files: segment.log is not a segment file name: "
            "expected <20-digit base offset>.log",
        ),
        (
            ("dump-log", "--files", f"{SEGMENT}.log", "--max-bytes", "-1"),
            "pysparklog dump-log: error: argument --max-bytes: expected an integer from 0 to 2147483647, got '-1'",
        ),
        (
            ("dump-log", "--files", ",x.log"),
            "pysparklog dump-log: error: argument --files: expected a comma-separated list of file names, got ',x.log'",
        ),
        (
            ("dump-log", "--files", f"{SEGMENT}.log", "--no-such-option"),
            "pysparklog dump-log: error: unrecognized arguments: --no-such-option",
        ),
    ],
)
def test_bad_arguments_are_one_error_line(args: tuple[str, ...], error: str) -> None:
    proc = run_cli(*args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", error + "\n")


def test_the_console_script_is_the_same_command(broker_log_dir: Path) -> None:
    script = Path(sys.executable).parent / "pysparklog"
    log = broker_log_dir / "TestTopicPatient-0" / f"{SEGMENT}.log"
    by_script = run_cli("dump-log", "--files", str(log), executable=[str(script)])
    assert by_script.returncode == 0
    assert by_script.stdout == dump([log]).stdout


def test_undecodable_bytes_print_as_java_prints_them(tmp_path: Path) -> None:
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(pa.table({"value": pa.array(AWKWARD_BYTES, pa.binary()), "timestamp": [0, 1, 2, 3]}))
    proc = dump([Path(log.directory) / f"{SEGMENT}.log"], "--print-data-log")
    assert (proc.returncode, proc.stderr) == (0, "")
    # Java replaces an encoded surrogate with one U+FFFD, where Python would put three; \r\n stays as it is.
    payloads = ["\ufffd-\ufffd", "café \ufffd", "line\r\nbreak\x00", "\U0001f600"]
    _dumping, _start, _batch, records = proc.stdout.split("\n", 3)
    assert records == "".join(
        f"| offset: {i} CreateTime: {i} keySize: -1 valueSize: {len(value)} sequence: -1 headerKeys: [] "
        f"payload: {payload}\n"
        for i, (value, payload) in enumerate(zip(AWKWARD_BYTES, payloads, strict=True))
    )


# -- against Kafka's own tool ----------------------------------------------------------------------


def kafka_stderr(proc: subprocess.CompletedProcess[str]) -> str:
    """Kafka's stderr without the JVM's notices about environment options."""
    return "".join(line for line in proc.stderr.splitlines(keepends=True) if not line.startswith("Picked up "))


def kafka_exception(proc: subprocess.CompletedProcess[str]) -> str:
    """The message of the exception that ended Kafka's tool."""
    match = re.search(r'^Exception in thread "main" [\w.$]+: (.*)$', proc.stderr, re.MULTILINE)
    assert match is not None, proc.stderr
    return match[1]


def assert_like_kafka(kafka_dump_log: DumpLogSegments, files: Sequence[Path], *args: str) -> str:
    """Kafka's tool and ours agree on stdout and stderr, and both succeed; returns the stdout."""
    kafka = kafka_dump_log(files, *args)
    ours = dump(files, *args)
    assert ours.stdout == kafka.stdout
    assert ours.stderr == kafka_stderr(kafka)
    assert ours.returncode == kafka.returncode == 0
    return ours.stdout


def assert_fails_like_kafka(kafka_dump_log: DumpLogSegments, files: Sequence[Path], *args: str) -> None:
    """Where Kafka's tool dies with an exception: the same stdout before it, then its message as our one line."""
    kafka = kafka_dump_log(files, *args)
    ours = dump(files, *args)
    assert ours.stdout == kafka.stdout
    assert kafka.returncode != 0 and ours.returncode == 1
    assert ours.stderr == f"pysparklog dump-log: error: {kafka_exception(kafka)}\n"


# No headers, an empty list, and two headers (a non-ASCII key, a null value), in turn.
HEADERS: list[list[dict[str, str | bytes | None]] | None] = [
    None,
    [],
    [{"key": "h1", "value": b"x"}, {"key": "ключ", "value": None}],
]


def records(n: int, start: int) -> pa.Table:
    """Keys, values, null keys and values, headers (some null, one non-ASCII key), awkward bytes."""
    rows = range(start, start + n)
    return pa.table(
        {
            "key": pa.array([None if i % 5 == 0 else f"key-{i}".encode() for i in rows], pa.binary()),
            "value": pa.array(
                [None if i % 7 == 3 else f"value {i} ".encode() + AWKWARD_BYTES[i % 4] for i in rows], pa.binary()
            ),
            "timestamp": pa.array([1_700_000_000_000 + 10 * i for i in rows], pa.int64()),
            "headers": pa.array([HEADERS[i % len(HEADERS)] for i in rows], HEADER_TYPE),
        }
    )


@pytest.fixture(scope="module")
def engine_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Segments, indexes and snapshots written by the engine: every codec, producers, transactions, control batches."""
    root = tmp_path_factory.mktemp("engine-logs")
    log = LogDirectory(root, LogConfig(segment_bytes=2000, index_interval_bytes=300)).partition("t", 0)
    start = 0
    for codec in Codec:
        settings = BatchSettings(codec=codec, max_batch_bytes=500, producer_id=7, producer_epoch=1, base_sequence=start)
        start = log.append_arrow(records(25, start), settings).last_offset + 1
    # Sequences that wrap past Int.MaxValue, then transactions ended by control batches.
    wrapping = BatchSettings(producer_id=8, producer_epoch=0, base_sequence=2**31 - 3)
    start = log.append_arrow(records(6, start), wrapping).last_offset + 1
    for epoch, marker in enumerate((ControlRecordType.COMMIT, ControlRecordType.ABORT)):  # a new epoch restarts at 0
        transaction = BatchSettings(producer_id=9, producer_epoch=epoch, base_sequence=0, transactional=True)
        log.append_arrow(records(4, start), transaction)
        key, value = end_txn_marker(marker, coordinator_epoch=5 + epoch)
        markers = BatchSettings(producer_id=9, producer_epoch=epoch, transactional=True)
        start = log.append(encode_control_batch(key, value, markers, now_ms=1_700_000_009_000)).last_offset + 1
    # A transaction still open when the next segments roll: snapshots carry its first offset.
    open_txn = BatchSettings(producer_id=10, producer_epoch=0, base_sequence=0, transactional=True)
    start = log.append_arrow(records(3, start), open_txn).last_offset + 1
    log.append_arrow(records(60, start), BatchSettings(max_batch_bytes=400))
    stamped = LogDirectory(root, LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)).partition("s", 0)
    stamped.append_arrow(records(10, 0), BatchSettings(max_batch_bytes=300))
    return root


# What the engine fixture's dump must show, so that the comparison with Kafka covers it.
ENGINE_DUMP_SNIPPETS = [
    "isControl: true",
    "endTxnMarker: COMMIT coordinatorEpoch: 5",
    "endTxnMarker: ABORT coordinatorEpoch: 6",
    "LogAppendTime: ",
    "headerKeys: [h1,ключ]",
    "sequence: 2147483647",  # the wrapping producer's third record
    "lastSequence: 2 ",  # and its batch
    "currentTxnFirstOffset: OptionalLong[",
    " payload: value 1 café \ufffd",
]


def engine_files(root: Path) -> list[Path]:
    suffixes = (".log", ".index", ".timeindex", ".snapshot")
    return sorted(path for path in root.glob("*-0/*") if path.suffix in suffixes)


@pytest.mark.interop
@pytest.mark.parametrize(
    "args", [(), ("--deep-iteration",), ("--print-data-log",), ("--index-sanity-check",), ("--verify-index-only",)]
)
def test_engine_written_files_dump_as_kafka_dumps_them(
    kafka_dump_log: DumpLogSegments, engine_log_dir: Path, args: tuple[str, ...]
) -> None:
    files = engine_files(engine_log_dir)
    assert sum(path.suffix == ".snapshot" for path in files) >= 2, "the fixture must roll segments"
    out = assert_like_kafka(kafka_dump_log, files, *args)
    if args == ("--print-data-log",):
        for text in [*(f" compresscodec: {codec.kafka_name} " for codec in Codec), *ENGINE_DUMP_SNIPPETS]:
            assert text in out, text


@pytest.mark.interop
@pytest.mark.parametrize("args", [(), ("--deep-iteration",), ("--print-data-log",)])
def test_broker_files_dump_as_kafka_dumps_them(
    kafka_dump_log: DumpLogSegments, broker_log_dir_copy: Path, args: tuple[str, ...]
) -> None:
    offsets = broker_log_dir_copy / "__consumer_offsets-6"
    files = [
        broker_log_dir_copy / "TestTopicPatient-0" / f"{SEGMENT}.log",
        *(offsets / f"{SEGMENT}{suffix}" for suffix in (".log", ".index", ".timeindex")),
        offsets / "00000000000000000013.snapshot",
        broker_log_dir_copy / "__cluster_metadata-0" / f"{SEGMENT}.log",
    ]
    out = assert_like_kafka(kafka_dump_log, files, *args)
    assert (LEADER_CHANGE_LINE in out) == bool(args)


def legacy_message_set(magic: int, codec: Codec, first_offset: int, n: int) -> bytes:
    """What a pre-0.11 broker stored: ``n`` messages from kafka-python's builder, with the offsets a broker gives."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    relative = magic == 1 and codec is not Codec.NONE  # magic 1 wrappers hold relative inner offsets
    for i in range(n):
        builder.append(
            i if relative else first_offset + i,
            timestamp=1_700_000_000_000 + i if magic else None,
            key=None if i == 1 else f"k{i}".encode(),
            value=None if i == 2 else f"v{i} ".encode() + AWKWARD_BYTES[i % 4],
        )
    data = bytearray(builder.build())
    if codec is not Codec.NONE:
        struct.pack_into(">q", data, 0, first_offset + n - 1)  # a wrapper's offset is its last inner offset
    return bytes(data)


@pytest.mark.interop
def test_legacy_message_sets_dump_as_kafka_dumps_them(kafka_dump_log: DumpLogSegments, tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    parts = [(0, Codec.NONE), (0, Codec.GZIP), (1, Codec.NONE), (1, Codec.GZIP)]
    log.write_bytes(b"".join(legacy_message_set(magic, codec, 3 * i, 3) for i, (magic, codec) in enumerate(parts)))
    out = assert_like_kafka(kafka_dump_log, [log], "--print-data-log")
    assert "\noffset: 5 position: 102 NoTimestampType: -1 size: " in out  # the magic 0 gzip wrapper
    assert "\n| offset: 0 NoTimestampType: -1 keySize: 2 valueSize: 9 isValid: true crc: " in out
    assert " compresscodec: gzip " in out and "magic: 1 " in out
    # Offset gaps are reported on stderr after the dump, the last one first, as Kafka does.
    gapped = tmp_path / "gapped" / f"{SEGMENT}.log"
    gapped.parent.mkdir()
    gapped.write_bytes(
        legacy_message_set(0, Codec.NONE, 0, 3)
        + legacy_message_set(0, Codec.GZIP, 10, 3)
        + legacy_message_set(1, Codec.NONE, 5, 3)
    )
    assert_like_kafka(kafka_dump_log, [gapped], "--deep-iteration")
    assert dump([gapped], "--deep-iteration").stderr == (
        f"Non-consecutive offsets in {gapped}\n  12 is followed by 5\n  2 is followed by 10\n"
    )


def batch_positions(log: Path) -> list[int]:
    """Where the entries of a log file start, from their size fields."""
    data, positions, position = log.read_bytes(), [], 0
    while position + 12 <= len(data):
        positions.append(position)
        position += struct.unpack_from(">i", data, position + 8)[0] + 12
    return positions


@pytest.mark.interop
def test_damaged_logs_dump_as_kafka_dumps_them(
    kafka_dump_log: DumpLogSegments, engine_log_dir: Path, tmp_path: Path
) -> None:
    (log,) = copy(engine_log_dir / "t-0", [f"{SEGMENT}.log"], tmp_path)
    data = bytearray(log.read_bytes())
    second = batch_positions(log)[1]
    data[second + 17] ^= 0x40  # a byte of the stored CRC: Kafka's tool says isvalid: false and goes on
    third = batch_positions(log)[2]
    data[third + ATTRIBUTES_OFFSET + 1] |= 0x40  # a delete horizon, as the log cleaner sets it
    restamp_crc(data, third)
    log.write_bytes(bytes(data) + b"\x00" * 8 + struct.pack(">i", 1 << 30) + b"torn tail")
    out = assert_like_kafka(kafka_dump_log, [log], "--deep-iteration")
    assert [line.endswith("isvalid: false") for line in lines(out, "baseOffset: ")][:3] == [False, True, False]
    assert "deleteHorizonMs: OptionalLong[" in out
    assert out.endswith(f"Found 21 invalid bytes at the end of {SEGMENT}.log\n")
    limited = assert_like_kafka(kafka_dump_log, [log], "--max-bytes", str(third + 10))
    assert len(lines(limited, "baseOffset: ")) == 2 and "invalid bytes" not in limited
    assert_like_kafka(kafka_dump_log, [log], "--max-bytes", "0")


@pytest.mark.interop
def test_index_mismatches_are_reported_as_kafka_reports_them(
    kafka_dump_log: DumpLogSegments, broker_log_dir: Path, tmp_path: Path
) -> None:
    directory = broker_log_dir / "__consumer_offsets-6"
    (log,) = copy(directory, [f"{SEGMENT}.log"], tmp_path)
    index, time_index = tmp_path / f"{SEGMENT}.index", tmp_path / f"{SEGMENT}.timeindex"
    index.write_bytes(struct.pack(">iiii", 4, 4730, 8, 9571))  # the batches there end at offsets 3 and 7
    time_index.write_bytes(
        struct.pack(">qi", 1769791783399, 3)
        + struct.pack(">qi", 5, 7)  # wrong and out of order
        + struct.pack(">qi", 1769793578176, 11)  # the next batch's timestamp
        + struct.pack(">qi", 1769793578177, 40)  # past the end of the log
    )
    assert_like_kafka(kafka_dump_log, [index, time_index])
    assert_like_kafka(kafka_dump_log, [index, time_index], "--verify-index-only")
    ours = dump([index, time_index])
    assert ours.stderr.split("\n")[:3] == [
        f"Mismatches in :{index}",
        "  Index offset: 8, log offset: 7",  # the last one first, as Kafka's tool reports them
        "  Index offset: 4, log offset: 3",
    ]
    assert "Found out of order timestamp in :" in ours.stderr and "Indexed offset: 40, found log offset: -1" in (
        ours.stderr
    )
    # A preallocated, never-trimmed time index (a broker that crashed): Kafka lists its first zero entry.
    time_index.write_bytes(bytes(36))
    assert "timestamp: 0 offset: 0\n" in assert_like_kafka(kafka_dump_log, [time_index])


@pytest.mark.interop
@pytest.mark.parametrize(
    ("suffix", "content"),
    [
        (".index", struct.pack(">ii", 3, 4730) + struct.pack(">ii", -2, 9571)),
        (".index", struct.pack(">ii", 3, 4730) + b"\x01\x02\x03"),
        (".timeindex", struct.pack(">qi", 1769791783399, 3) + struct.pack(">qi", 5, 7)),
        (".timeindex", struct.pack(">qi", 1769791783399, 3) + struct.pack(">qi", 1769792518093, -7)),
        (".timeindex", struct.pack(">qi", 1769791783399, 3) + b"\x00" * 11),
    ],
)
def test_failed_sanity_checks_say_what_kafka_says(
    kafka_dump_log: DumpLogSegments, broker_log_dir: Path, tmp_path: Path, suffix: str, content: bytes
) -> None:
    copy(broker_log_dir / "__consumer_offsets-6", [f"{SEGMENT}.log", f"{SEGMENT}.index"], tmp_path)
    index = tmp_path / f"{SEGMENT}{suffix}"
    index.write_bytes(content)
    assert_fails_like_kafka(kafka_dump_log, [index], "--index-sanity-check")


@pytest.mark.interop
def test_snapshots_and_transaction_indexes_dump_as_kafka_dumps_them(
    kafka_dump_log: DumpLogSegments, engine_log_dir: Path, tmp_path: Path
) -> None:
    snapshots = sorted((engine_log_dir / "t-0").glob("*.snapshot"))
    (snapshot,) = copy(snapshots[0].parent, [snapshots[0].name], tmp_path)
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 1
    corrupt = tmp_path / "00000000000000000001.snapshot"
    corrupt.write_bytes(bytes(data))
    txn_index = tmp_path / f"{SEGMENT}.txnindex"
    aborted = struct.pack(">hqqqq", 0, 9, 117, 121, 110) + struct.pack(">hqqqq", 0, 11, 130, 140, 125)
    txn_index.write_bytes(aborted + b"partial")
    out = assert_like_kafka(kafka_dump_log, [corrupt, snapshot, txn_index])
    assert "version: 0 producerId: 11 firstOffset: 130 lastOffset: 140 lastStableOffset: 125\n" in out
    assert dump([corrupt]).stderr.startswith("Snapshot is corrupt (CRC is no longer valid). Stored crc: ")


def test_a_transaction_index_entry_of_a_later_version_is_an_error(tmp_path: Path) -> None:
    # Not compared with Kafka's tool: it reads the version's first byte only (AbortedTxn.version()), so it
    # takes version 1 for 0 and fails on 256 reporting version 1.
    txn_index = tmp_path / f"{SEGMENT}.txnindex"
    txn_index.write_bytes(struct.pack(">hqqqq", 0, 9, 117, 121, 110) + struct.pack(">hqqqq", 1, 12, 150, 151, 150))
    proc = dump([txn_index])
    assert (proc.returncode, proc.stdout) == (1, f"Dumping {txn_index}\n")  # every entry is read before printing
    assert proc.stderr == (
        f"pysparklog dump-log: error: Unexpected aborted transaction version 1 in transaction index {txn_index}, "
        "current version is 0\n"
    )
