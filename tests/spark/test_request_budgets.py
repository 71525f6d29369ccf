"""Requests a Spark query makes of a log directory on an object store, counted at the server (``counted_s3``): an
idle trigger of a stream, a batch read of an unchanged topic, and a one-record micro-batch of an exactly-once stream
copy, at 4 and 64 partitions. On a real store each request is a round trip of 10-30 ms and a line on the bill.

The budgets do not grow with the partition count (docs/object-storage.md, "Cost at steady state"): a topic is one
chain of commits, whose last commit's header gives every partition's end.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.io import storage_for
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topics import TOPICS_FILE
from tests.conftest import CountedS3
from tests.spark.conftest import BatchCollector, start, stream

pytestmark = [pytest.mark.spark]

PARTITION_COUNTS = (4, 64)


def _topic(counted_s3: CountedS3, topic: str, partitions: int, records: int) -> LogDirectory:
    """A topic of ``partitions`` partitions holding ``records`` records, written through the counting proxy."""
    logs = LogDirectory(storage_for(counted_s3.root, counted_s3.storage_options))
    logs.topics.create(topic, partitions=partitions)
    with Producer(logs, ProducerConfig(linger_ms=5)) as producer:
        for i in range(records):
            producer.send(topic, value=f"v{i}".encode(), partition=i % partitions)
    return logs


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_a_batch_read_of_an_unchanged_topic_asks_at_most_ten_requests(
    spark: SparkSession, counted_s3: CountedS3, partitions: int
) -> None:
    _topic(counted_s3, "t", partitions, 2 * partitions)
    read = spark.read.format("pysparklog").options(**counted_s3.spark_options).option("subscribe", "t")
    assert read.load(counted_s3.root).count() == 2 * partitions  # builds this host's replicas
    proxy = counted_s3.proxy
    before = proxy.mark()
    assert read.load(counted_s3.root).count() == 2 * partitions
    assert proxy.count(since=before, method="PUT") == 0, proxy.summary(since=before)
    # The driver's probe of the topic's chain, and in a Python worker new to the log directory its topics' metadata
    # and configs; the replicas hold every range, so no data object is read.
    assert proxy.count(since=before) <= 10, proxy.summary(since=before)


@pytest.mark.parametrize("partitions", [64])  # 4 partitions plan the same way: tests/storage/test_request_budgets.py
def test_an_idle_trigger_asks_at_most_two_requests(
    spark: SparkSession, counted_s3: CountedS3, partitions: int, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    _topic(counted_s3, "t", partitions, partitions)
    reader = stream(spark, counted_s3.root, subscribe="t", startingOffsets="earliest").options(
        **counted_s3.spark_options
    )
    query = start(queries, reader.load(), tmp_path / "ckpt", sink := BatchCollector(), processingTime="1 second")
    deadline = time.monotonic() + 120
    while not sink.batches and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sink.batches, "the first micro-batch ran"
    time.sleep(1.5)  # past the first idle trigger, whose planning follows the micro-batch's commit
    proxy = counted_s3.proxy
    before = proxy.mark()
    time.sleep(4.5)
    requests = proxy.requests(since=before)
    query.stop()
    triggers = len([r for r in requests if "/commits/" in r.path and r.status == 404])  # one probe each
    assert triggers >= 3, f"the stream kept triggering: {proxy.summary(since=before)}"
    assert len(sink.batches) == 1, "nothing new: no micro-batch after the first"
    assert not [r for r in requests if r.method == "PUT"], proxy.summary(since=before)
    # One probe of the topic's chain per trigger, and the topics' metadata read again in the background every 5 s.
    assert len(requests) <= 2 * triggers, proxy.summary(since=before)


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_a_one_record_exactly_once_micro_batch_asks_at_most_two_per_task_and_four(
    spark: SparkSession,
    counted_s3: CountedS3,
    s3_endpoint: str,
    partitions: int,
    tmp_path: Path,
    queries: list[StreamingQuery],
) -> None:
    """A stream copy of a topic into another, exactly-once: the micro-batch copying one record is a probe of the
    input's chain, the task's read of the new commit and the driver's commit of the output's chain, holding the
    task's small output (a larger one is a staged object, a PUT per task), whatever the partition count (Delta's
    streaming profile: a PUT per task and one commit)."""
    logs = _topic(counted_s3, "in", partitions, partitions)
    logs.topics.create("out", partitions=partitions)
    copy = (
        stream(spark, counted_s3.root, subscribe="in", startingOffsets="earliest")
        .options(**counted_s3.spark_options)
        .load()
        .select("key", "value")
        .writeStream.format("pysparklog")
        .options(**counted_s3.spark_options)
        .option("topic", "out")
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start(counted_s3.root)
    )
    queries.append(copy)
    direct = LogDirectory(storage_for(counted_s3.root, {**counted_s3.storage_options, "aws_endpoint": s3_endpoint}))

    def copied() -> int:
        return sum(direct.offsets("out", range(partitions))[p][1] for p in range(partitions))

    deadline = time.monotonic() + 120
    while copied() < partitions and time.monotonic() < deadline:
        time.sleep(0.2)
    assert copied() == partitions, "the first micro-batch copied the topic"
    time.sleep(1.5)  # idle triggers: the workers that run the next micro-batch are up
    proxy = counted_s3.proxy
    with Producer(direct, ProducerConfig(linger_ms=0)) as producer:  # not through the proxy: not counted
        producer.send("in", value=b"one", partition=partitions - 1).get()
    before, started = proxy.mark(), time.monotonic()
    while copied() < partitions + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert copied() == partitions + 1, "the record was copied"
    time.sleep(1.2)  # the trigger after it, where Spark calls the source's commit
    window_s = time.monotonic() - started
    requests = proxy.requests(since=before)
    idle_triggers = int(window_s) + 1  # at a 1 s trigger, the triggers of the window that copied nothing
    puts = [r for r in requests if r.method == "PUT"]
    assert len(puts) == 1, f"the driver's commit, holding the task's record: {proxy.summary(since=before)}"
    tasks = partitions
    assert len(requests) <= 2 * tasks + 4 + 2 * idle_triggers, proxy.summary(since=before)
    # The micro-batch's own requests, beside the idle triggers' probes, do not grow with the partitions; the rest are
    # the topics' metadata and configs, read again every 5 s by each process that uses them.
    chain = [r for r in requests if "-chain/" in r.path]
    assert len(chain) <= 4 + idle_triggers, "independent of the partition count: " + proxy.summary(since=before)
    assert {r.key.rsplit("/", 1)[-1] for r in requests if r not in chain} <= {TOPICS_FILE, "server.properties"}
