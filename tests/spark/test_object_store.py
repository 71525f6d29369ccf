"""``format("pysparklog")`` on a log directory on an object store (``s3://`` on the loopback S3 server): batch reads
and writes, and the exactly-once stream copy killed with -9 and restarted. The store's settings reach the executors
as ``storage.*`` options only: the Spark processes get no AWS_* variables."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from pysparklog import LogDirectory, OffsetStore, TopicPartition
from pysparklog.storage.transaction_index import READ_COMMITTED
from pysparklog.transactions import TransactionCoordinator
from tests.conftest import BUCKET, s3_storage_options
from tests.s3_server import ENVIRONMENT
from tests.spark.conftest import BatchCollector, await_end, make_topic, start, stream
from tests.spark.sink_job import INPUT, OUTPUT, STORAGE_OPTIONS_ENV
from tests.spark.test_sink_recovery import (
    assert_exits_cleanly,
    assert_same_records,
    batch_files,
    everything,
    job,
    kill_session,
    produce,
    read_topic,
    tail,
)

pytestmark = [pytest.mark.spark]


@pytest.fixture
def url(s3_endpoint: str, tmp_path: Path) -> str:
    return f"s3://{BUCKET}{tmp_path}/logs"


def test_batch_write_and_read_on_an_object_store(spark: SparkSession, s3_endpoint: str, url: str) -> None:
    options = s3_storage_options(s3_endpoint)
    rows = [(f"k{i % 7}".encode(), f"v{i}".encode()) for i in range(500)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    df.write.format("pysparklog").mode("append").options(**options).option("topic", "t").save(url)
    read = spark.read.format("pysparklog").options(**options).option("subscribe", "t").load(url)
    got = sorted((r.key, r.value) for r in read.select("key", "value").collect())
    assert got == sorted(rows)
    offsets = [r.offset for r in read.where("partition = 0").orderBy("offset").collect()]
    assert offsets and offsets[-1] < LogDirectory(url).partition("t", 0).log_end_offset  # a COMMIT marker follows


def test_a_stream_with_a_group_id_and_a_rate_limit_on_an_object_store(
    spark: SparkSession, s3_endpoint: str, url: str, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    make_topic(url, "t", [7, 5])
    reader = stream(spark, url, subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="5", group_id="g")
    query = start(
        queries,
        reader.options(**s3_storage_options(s3_endpoint)).load(),
        tmp_path / "ckpt",
        sink := BatchCollector(),
        availableNow=True,
    )
    await_end(query)
    assert sorted(sink.rows()) == sorted([("t", 0, o) for o in range(7)] + [("t", 1, o) for o in range(5)])
    assert len(sink.batches) == 3, "maxOffsetsPerTrigger admits 5 records a micro-batch"
    with OffsetStore(url) as store:
        committed = {tp: c.offset for tp, c in store.committed("g").items()}
    assert committed == {TopicPartition("t", 0): 7, TopicPartition("t", 1): 5}


def test_an_unknown_store_setting_fails_naming_it(spark: SparkSession, s3_endpoint: str, url: str) -> None:
    LogDirectory(url).topics.create("t", 1)
    reader = spark.read.format("pysparklog").option("storage.no_such_key", "x").option("subscribe", "t")
    with pytest.raises(Exception, match="no_such_key"):
        reader.load(url).collect()


# -- kill -9 -----------------------------------------------------------------------------------------------------------

RECORDS = 25_000  # 25 micro-batches of sink_job.MAX_OFFSETS_PER_TRIGGER: more than the run before the kill commits
KEYS = 200
KILLS = 1
SEED = 20261126
KILL_DELAY_S = (0.5, 5.0)
FIRST_COMMIT_WAIT_S = 300.0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_stream_copy_killed_and_restarted_on_an_object_store_writes_each_record_once(
    s3_endpoint: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exactly-once stream copy of test_sink_recovery with both topics on S3, its driver, JVM and Python
    workers killed with -9 after a micro-batch committed, then run to the end: read_committed shows
    every input record exactly once, and no micro-batch partly."""
    keys = [f"k{i % KEYS}".encode() for i in range(RECORDS)]
    values = [f"r{i}".encode() for i in range(RECORDS)]
    produce(url, INPUT, 3, keys, values)  # type: ignore[arg-type]  # a URL, which LogDirectory takes as it is
    LogDirectory(url).topics.create(OUTPUT, 2)
    checkpoint = tmp_path / "checkpoint"
    for key in ENVIRONMENT:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(STORAGE_OPTIONS_ENV, json.dumps(s3_storage_options(s3_endpoint)))
    rng = random.Random(SEED)
    progress = []
    for run in range(KILLS):
        before = batch_files(checkpoint, "commits")
        stderr = tmp_path / f"run-{run}.log"
        with job(url, checkpoint, "run", stderr) as proc:  # type: ignore[arg-type]  # a URL, passed as it is
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "started\n", f"run {run} did not start: {line!r}\n{tail(stderr)}"
            deadline = time.monotonic() + FIRST_COMMIT_WAIT_S
            while batch_files(checkpoint, "commits") == before:
                assert proc.poll() is None, f"run {run} ended before its first commit\n{tail(stderr)}"
                assert time.monotonic() < deadline, f"run {run} committed nothing in {FIRST_COMMIT_WAIT_S} s"
                time.sleep(0.05)
            time.sleep(rng.uniform(*KILL_DELAY_S))
            assert proc.poll() is None, f"run {run} ended before it was killed\n{tail(stderr)}"
            kill_session(proc)
        progress.append(len(batch_files(checkpoint, "commits")) - len(before))
    committed_before_finish = len(everything(read_topic(url, OUTPUT, READ_COMMITTED)))  # type: ignore[arg-type]
    assert 0 < committed_before_finish < RECORDS, f"the kills did not interrupt the query: {progress}"

    stderr = tmp_path / "finish.log"
    with job(url, checkpoint, "finish", stderr) as proc:  # type: ignore[arg-type]
        assert_exits_cleanly(proc, stderr, timeout=900)
    monkeypatch.undo()

    committed = everything(read_topic(url, OUTPUT, READ_COMMITTED))  # type: ignore[arg-type]
    assert_same_records([(k, v.upper()) for k, v in zip(keys, values, strict=True)], committed, "read_committed")
    # One topic on an object store: each micro-batch is one commit of its chain, staged by the tasks, no transaction.
    assert not TransactionCoordinator(LogDirectory(url)).transactional_ids()
    ends = {TopicPartition(OUTPUT, p): LogDirectory(url).partition(OUTPUT, p).last_stable_offset for p in range(2)}
    assert all(ends.values()), ends
