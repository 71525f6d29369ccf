"""Kafka's Java client and pysparklog read each other's compressed batches, for every codec, in batches large enough
to hold several LZ4 blocks (64 KiB) and xerial snappy blocks (32 KiB).

Kafka's side is its own code: ``MemoryRecords.withRecords`` (what its producer builds batches with) through
``kafka-tools/WriteCompressedBatches.java``, and ``DumpLogSegments --deep-iteration`` to read ours.
"""

from __future__ import annotations

import hashlib
import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from pysparklog import BatchSettings, Codec, LogDirectory
from pysparklog.storage.records.default_records import RECORD_BATCH_OVERHEAD
from tests.interop.kafka_tools import RUN_TIMEOUT_S, DumpLogSegments, kafka_classpath
from tests.storage.records.helpers import decode

pytestmark = pytest.mark.interop

JAVA_WRITER = Path(__file__).resolve().parent / "kafka-tools" / "WriteCompressedBatches.java"
COUNT = 3000  # about 330 KB of records: several blocks of every codec
TIMESTAMP = 1_700_000_000_000
CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


def java_records() -> pa.Table:
    """The records ``WriteCompressedBatches`` writes: each value is its key's SHA-256, then ``v<i>:`` and dots."""
    keys = [f"k{i}".encode() for i in range(COUNT)]
    values = [hashlib.sha256(key).digest() + f"v{i}:".encode() + b"." * 64 for i, key in enumerate(keys)]
    return pa.table({"key": keys, "value": values, "timestamp": range(TIMESTAMP, TIMESTAMP + COUNT)})


@pytest.fixture(scope="module")
def java_written(kafka_dump_log: DumpLogSegments, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One segment file per codec, ``<codec>.log``, written by Kafka's client (``kafka_dump_log`` skips the tests
    where Kafka's tools cannot run)."""
    directory = tmp_path_factory.mktemp("java-written")
    classpath = kafka_classpath()
    assert classpath is not None
    subprocess.run(
        ["java", "-cp", classpath, str(JAVA_WRITER), str(directory), str(COUNT)],
        check=True,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
    )
    return directory


@pytest.mark.parametrize("codec", CODECS, ids=lambda codec: codec.kafka_name)
def test_reads_what_kafkas_client_compressed(java_written: Path, codec: Codec) -> None:
    data = (java_written / f"{codec.kafka_name}.log").read_bytes()
    table = decode(data)
    expected = java_records()
    assert table.column("key").to_pylist() == expected.column("key").to_pylist()
    assert table.column("value").to_pylist() == expected.column("value").to_pylist()
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == expected.column("timestamp").to_pylist()
    assert table.column("offset").to_pylist() == list(range(COUNT))
    # The framing the Java client writes, which is what this test is about.
    section = data[RECORD_BATCH_OVERHEAD:]
    if codec is Codec.LZ4:
        assert section[:7] == bytes.fromhex("04224d18604082")
    elif codec is Codec.SNAPPY:
        assert section[:16] == bytes.fromhex("82534e41505059000000000100000001")
    elif codec is Codec.ZSTD:
        assert zstandard.get_frame_parameters(section).content_size == zstandard.CONTENTSIZE_UNKNOWN
    else:
        assert section[:2] == b"\x1f\x8b"


@pytest.mark.parametrize("codec", CODECS, ids=lambda codec: codec.kafka_name)
def test_kafka_reads_what_pysparklog_compressed(kafka_dump_log: DumpLogSegments, tmp_path: Path, codec: Codec) -> None:
    # A first record of 70 KiB of random bytes makes a block that lz4 stores uncompressed; the rest compresses.
    records = java_records()
    values = [random.Random(0).randbytes(70_000), *(f"v{i}:".encode() for i in range(1, COUNT))]
    records = records.set_column(1, "value", pa.array(values, pa.binary()))
    log = LogDirectory(tmp_path).partition("t", 0)
    log.append_arrow(records, BatchSettings(codec=codec, max_batch_bytes=1 << 20))
    result = kafka_dump_log([tmp_path / "t-0" / "00000000000000000000.log"], "--deep-iteration", "--print-data-log")
    assert result.returncode == 0, result.stderr
    assert f"compresscodec: {codec.kafka_name} " in result.stdout
    assert "isvalid: true" in result.stdout and "isvalid: false" not in result.stdout
    printed = [line for line in result.stdout.splitlines() if line.startswith("| offset: ")]
    assert len(printed) == COUNT
    for i in (1, COUNT // 2, COUNT - 1):
        assert printed[i].startswith(f"| offset: {i} ") and printed[i].endswith(f" key: k{i} payload: v{i}:")
