"""A pysparklog log directory moved into a real Kafka broker, as docs/moving-to-kafka.md says: the topic is created
on the broker, its id given to ours (``topics --alter --topic-id``), the partition directories copied into the
broker's log directory while it is stopped. Started again, the broker loads them as its own (none renamed
``-stray``), Kafka's consumer reads every record with its offset, timestamp, key, value and headers (compressed
batches, transactions: the aborted one skipped by ``read_committed``), and Kafka's producer appends after them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from tests.cli.test_dump_log import run_cli
from tests.interop.kafka_broker import CONSOLE_CONSUMER, CONSOLE_PRODUCER, TOPIC_COMMAND, KafkaBroker
from tests.interop.kafka_tools import BROKER, missing_tools

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "orders"
PARTITIONS = 3
#: Records Kafka's producer appends once the broker holds the partitions.
APPENDED = [(f"kafka-k{i}", f"kafka-v{i}") for i in range(6)]
#: What the directories keep that a broker must not get: pysparklog's own files, and the producer snapshots
#: (pysparklog's producer ids would pass for those the cluster hands its own producers).
NOT_MOVED = ("pysparklog.*", "*.snapshot")


@pytest.fixture(scope="module")
def broker_classpath() -> str:
    """Kafka's broker jars; skipped only without Java or Maven (as the ``kafka_dump_log`` fixture)."""
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"Kafka interop tests need Java and Maven: {missing}")
    classpath = BROKER.resolve()
    if classpath is None:
        pytest.fail(f"Java and Maven are present but Kafka's broker could not be resolved:\n{BROKER.reason}")
    return classpath


def _write(log_dir: Path) -> None:
    """Keyed records with headers (one without a key), batches in three codecs, a roll, a committed and an
    aborted transaction."""
    logs = LogDirectory(log_dir)
    logs.topics.create(TOPIC, PARTITIONS)
    with Producer(logs, ProducerConfig.from_properties({"linger.ms": "0"})) as producer:
        for i in range(24):
            headers = [("trace", f"t{i}".encode()), ("empty", b"")] if i % 3 else []
            producer.send(TOPIC, f"v{i}".encode(), key=f"k{i}".encode(), headers=headers).get(30)
        producer.send(TOPIC, b"no key", partition=2).get(30)
    with logs.partition(TOPIC, 0) as log:
        log.roll()
    for codec in ("zstd", "lz4", "gzip"):
        with Producer(
            logs, ProducerConfig.from_properties({"compression.type": codec, "linger.ms": "100"})
        ) as producer:
            for i in range(10):
                producer.send(TOPIC, f"{codec}-v{i}".encode(), key=f"{codec}-k{i}".encode(), partition=1)
    config = ProducerConfig.from_properties({"transactional.id": "mover", "linger.ms": "0"})
    with Producer(logs, config) as producer:
        producer.init_transactions()
        for commit in (True, False):
            producer.begin_transaction()
            label = "committed" if commit else "aborted"
            producer.send_arrow(
                TOPIC, pa.table({"key": [f"{label}-k{i}".encode() for i in range(6)], "value": [label.encode()] * 6})
            )
            producer.commit_transaction() if commit else producer.abort_transaction()


def _committed_lines(log_dir: Path) -> list[str]:
    """Every committed record as Kafka's console consumer prints it (timestamp, partition, offset, headers, key,
    value), read by pysparklog."""
    logs = LogDirectory(log_dir)
    lines = []
    for partition in range(PARTITIONS):
        with logs.partition(TOPIC, partition) as log:
            batches = list(log.read_arrow(0, include_headers=True, isolation_level="read_committed"))
        table = pa.Table.from_batches(batches)
        table = table.set_column(
            table.schema.get_field_index("timestamp"), "timestamp", table["timestamp"].cast(pa.int64())
        )
        for row in table.to_pylist():
            headers = ",".join(f"{h['key']}:{h['value'].decode()}" for h in row["headers"] or []) or "NO_HEADERS"
            key = "null" if row["key"] is None else row["key"].decode()
            lines.append(
                f"CreateTime:{row['timestamp']}\tPartition:{partition}\tOffset:{row['offset']}\t{headers}\t{key}\t"
                f"{row['value'].decode()}"
            )
    return lines


def _position(line: str) -> tuple[int, int]:
    found = re.search(r"\tPartition:(\d+)\tOffset:(\d+)\t", line)
    assert found is not None, line
    return int(found.group(1)), int(found.group(2))


def test_a_log_directory_moved_into_a_broker_is_kafkas_to_read_and_append_to(
    tmp_path: Path, broker_classpath: str
) -> None:
    ours = tmp_path / "pysparklog"
    _write(ours)
    expected = _committed_lines(ours)
    assert len(expected) == 25 + 30 + 6 and not any("aborted" in line for line in expected)
    ends = {}
    for partition in range(PARTITIONS):
        with LogDirectory(ours).partition(TOPIC, partition) as log:
            ends[partition] = log.log_end_offset

    with KafkaBroker.started(tmp_path / "kafka", broker_classpath) as broker:
        broker.tool(TOPIC_COMMAND, "--create", "--topic", TOPIC, "--partitions", str(PARTITIONS))
        topic_id = broker.topic_id(TOPIC)
        with broker.stopped():
            moved = run_cli("topics", "--log-dir", str(ours), "--alter", "--topic", TOPIC, "--topic-id", topic_id)
            assert (moved.returncode, moved.stderr) == (0, "")
            for partition in range(PARTITIONS):
                target = broker.log_dir / f"{TOPIC}-{partition}"
                shutil.rmtree(target)  # the broker's empty partition
                shutil.copytree(ours / f"{TOPIC}-{partition}", target, ignore=shutil.ignore_patterns(*NOT_MOVED))
        broker.tool(
            CONSOLE_PRODUCER,
            "--topic",
            TOPIC,
            "--reader-property",
            "parse.key=true",
            stdin="".join(f"{key}\t{value}\n" for key, value in APPENDED),
        )
        consumed = broker.tool(
            CONSOLE_CONSUMER,
            "--topic",
            TOPIC,
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "--max-messages",
            str(len(expected) + len(APPENDED)),
            "--timeout-ms",
            "60000",
            *(f"--formatter-property=print.{field}=true" for field in ("timestamp", "partition", "offset", "headers")),
            "--formatter-property=print.key=true",
        ).splitlines()
        on_disk = sorted(path.name for path in broker.log_dir.iterdir() if path.name.startswith(TOPIC))
        assert on_disk == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
        assert broker.logged(r"marked stray|Found stray log dir") == []

    consumed.sort(key=_position)
    appended = [line for line in consumed if "\tkafka-k" in line]
    assert [line for line in consumed if line not in appended] == sorted(expected, key=_position)
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for line in appended:
        partition, offset = _position(line)
        assert re.fullmatch(
            rf"CreateTime:\d+\tPartition:{partition}\tOffset:{offset}\tNO_HEADERS\tkafka-k\d+\tkafka-v\d+", line
        )
        by_partition.setdefault(partition, []).append((offset, line.rsplit("\t", 1)[1]))
    assert sorted(value for entries in by_partition.values() for _, value in entries) == sorted(v for _, v in APPENDED)
    for partition, entries in by_partition.items():  # the broker's offsets go on from ours
        assert [offset for offset, _ in entries] == list(range(ends[partition], ends[partition] + len(entries)))
