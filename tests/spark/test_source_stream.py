"""``spark.readStream.format("pysparklog")`` on a real local SparkSession: the scenarios of Spark's
``KafkaMicroBatchSourceSuite`` (numbered as in ``peers-and-tests.md`` §3) on log directories.

Rows are collected per micro-batch by a ``foreachBatch`` function (``BatchCollector``); triggers are driven with
``processAllAvailable`` or ``Trigger.AvailableNow``; checkpoints live in the test's temporary directory.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from pysparklog import LogDirectory
from pysparklog.cli.main import main as cli
from pysparklog.offsets import OffsetStore
from pysparklog.storage.records.default_records import ControlRecordType
from pysparklog.structs import TopicPartition
from tests.spark.conftest import TS, BatchCollector, append, await_end, end_offsets, make_topic, start, stream
from tests.spark.test_source_batch import end_transaction, transaction, transactions

pytestmark = pytest.mark.spark


def offsets(topic: str, partition: int, first: int, end: int) -> list[tuple[str, int, int]]:
    return [(topic, partition, o) for o in range(first, end)]


# -- admission control -------------------------------------------------------------------------------------


#: Both ways a micro-batch is read: by the driver while Spark plans it (small ones, by default), or by tasks.
READ_PATHS = pytest.mark.parametrize("driver_read_max_offsets", ["10000", "0"], ids=["driver-read", "task-read"])


def test_waiting_for_a_query_to_end_fails_once_it_stands_still_however_long_it_ran(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """The tests wait for a query's end on its state, not on a wall-clock limit (a loaded machine makes a query slow,
    not stuck): one that runs its first trigger and then waits an hour for the next stands still, and the wait says
    so instead of hanging."""
    make_topic(tmp_path / "logs", "t", [3])
    sink = BatchCollector()
    query = start(
        queries,
        stream(spark, tmp_path / "logs", subscribe="t", startingOffsets="earliest").load(),
        tmp_path / "ckpt",
        sink,
        processingTime="1 hour",
    )
    with pytest.raises(AssertionError, match="stood still for 3 s"):
        await_end(query, still_seconds=3)
    assert query.isActive and sink.batches == {0: offsets("t", 0, 0, 3)}


@READ_PATHS
def test_available_now_with_max_offsets_runs_three_batches_then_stops(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery], driver_read_max_offsets: str
) -> None:
    """Scenario 10: 15 records, ``maxOffsetsPerTrigger=5``: exactly three micro-batches, then the query ends."""
    make_topic(tmp_path / "logs", "t", [15])
    sink = BatchCollector()
    df = stream(
        spark,
        tmp_path / "logs",
        subscribe="t",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="5",
        driverReadMaxOffsets=driver_read_max_offsets,
    ).load()
    query = start(queries, df, tmp_path / "ckpt", sink, availableNow=True)
    await_end(query)
    assert query.exception() is None
    assert sink.batches == {
        0: offsets("t", 0, 0, 5),
        1: offsets("t", 0, 5, 10),
        2: offsets("t", 0, 10, 15),
    }
    assert end_offsets(query) == [json.dumps({"t": {"0": end}}) for end in (5, 10, 15)]


def test_max_offsets_are_split_over_partitions_by_backlog(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Scenario 7: partitions of 101, 11 and 1 records with ``maxOffsetsPerTrigger=10``: 8/1/1 then 9/1/0, as in
    Spark; ``Trigger.Once`` ignores the limit."""
    logs = tmp_path / "logs"
    make_topic(logs, "t", [101, 11, 1])
    options = {"subscribe": "t", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"}
    sink = BatchCollector()
    query = start(queries, stream(spark, logs, **options).load(), tmp_path / "limited", sink)
    query.processAllAvailable()
    query.stop()
    ends = [json.loads(end)["t"] for end in end_offsets(query)]
    assert ends[:2] == [{"0": 8, "1": 1, "2": 1}, {"0": 17, "1": 2, "2": 1}]
    assert ends[-1] == {"0": 101, "1": 11, "2": 1}
    assert sink.sizes()[:2] == [10, 10]
    assert sink.rows() == offsets("t", 0, 0, 101) + offsets("t", 1, 0, 11) + offsets("t", 2, 0, 1)
    once = BatchCollector()
    query = start(queries, stream(spark, logs, **options).load(), tmp_path / "once", once, once=True)
    await_end(query)
    assert once.sizes() == [113]


def test_min_offsets_hold_batches_back_until_enough_records_or_the_delay(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Scenario 8: ``minOffsetsPerTrigger=5`` with ``maxTriggerDelay=3s``. A trigger fires with 5 new records, or
    3 s after the last one fired; the first trigger always fires."""
    delay = 3.0
    logs = make_topic(tmp_path / "logs", "t", [10])
    options = {"subscribe": "t", "startingOffsets": "earliest", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "3s"}
    sink = BatchCollector()
    query = start(queries, stream(spark, tmp_path / "logs", **options).load(), tmp_path / "ckpt", sink)
    query.processAllAvailable()
    assert sink.sizes() == [10]

    def held(count: int) -> None:
        """Append ``count`` (< 5) records: no trigger fires while the delay runs, if it still runs when checked."""
        begun = time.monotonic()
        batches = len(sink.batches)
        append(logs, "t", 0, count)
        query.processAllAvailable()
        if time.monotonic() - begun < delay:  # the last trigger fired before `begun`: the delay cannot have passed
            assert len(sink.batches) == batches

    fired = time.monotonic()
    held(2)
    append(logs, "t", 0, 3)  # 5 new records: enough
    query.processAllAvailable()
    assert sink.sizes()[1:] == [5]
    fired = time.monotonic()
    held(1)
    time.sleep(max(0.0, delay - (time.monotonic() - fired)) + 0.2)  # the delay passes: the held record goes
    deadline = time.monotonic() + 60
    while len(sink.batches) < 3 and time.monotonic() < deadline:
        query.processAllAvailable()
    assert sink.sizes() == [10, 5, 1]
    assert sink.rows() == offsets("t", 0, 0, 16)


# -- partitions and topics that appear --------------------------------------------------------------------------


def test_an_added_partition_and_a_new_matching_topic_are_read_from_earliest(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Scenarios 1 and 2: a partition added mid-query, and a topic created after the start that matches
    ``subscribePattern``, are both read from their earliest offset."""
    logs = make_topic(tmp_path / "logs", "s1", [3])
    sink = BatchCollector()
    df = stream(spark, tmp_path / "logs", subscribePattern="^s[0-9]$", startingOffsets="latest").load()
    query = start(queries, df, tmp_path / "ckpt", sink)
    query.processAllAvailable()
    append(logs, "s1", 0, 2)
    query.processAllAvailable()
    assert sink.rows() == offsets("s1", 0, 3, 5)
    logs.topics.alter_partitions("s1", 2)
    append(logs, "s1", 1, 2)
    make_topic(tmp_path / "logs", "s2", [3])
    make_topic(tmp_path / "logs", "other", [3])
    query.processAllAvailable()
    assert sink.rows() == offsets("s1", 0, 3, 5) + offsets("s1", 1, 0, 2) + offsets("s2", 0, 0, 3)


# -- data loss --------------------------------------------------------------------------------------------------


def test_records_removed_under_a_running_query_fail_it(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    logs = make_topic(tmp_path / "logs", "t", [10])
    sink = BatchCollector()
    df = stream(spark, tmp_path / "logs", subscribe="t", startingOffsets="earliest").load()
    query = start(queries, df, tmp_path / "ckpt", sink)
    query.processAllAvailable()
    append(logs, "t", 0, 10)
    with logs.partition("t", 0) as log:
        log.raise_log_start_offset(15)  # offsets 10 to 14 are gone before the query read them
    with pytest.raises(StreamingQueryException) as failure:
        query.processAllAvailable()
    assert "offsets 10 to 20 of t-0 are no longer in the log" in str(failure.value)
    assert "Set failOnDataLoss to false" in str(failure.value)
    assert sink.rows() == offsets("t", 0, 0, 10)


def test_without_fail_on_data_loss_removed_records_are_skipped_without_duplicates(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Scenario 6: retention under a running query with ``failOnDataLoss=false``."""
    logs = make_topic(tmp_path / "logs", "t", [10])
    sink = BatchCollector()
    df = stream(spark, tmp_path / "logs", subscribe="t", startingOffsets="earliest", failOnDataLoss="false").load()
    query = start(queries, df, tmp_path / "ckpt", sink)
    query.processAllAvailable()
    append(logs, "t", 0, 10)
    with logs.partition("t", 0) as log:
        log.raise_log_start_offset(15)
    query.processAllAvailable()
    append(logs, "t", 0, 3)
    query.processAllAvailable()
    assert query.exception() is None
    assert sink.rows() == offsets("t", 0, 0, 10) + offsets("t", 0, 15, 23)


# -- restarts and starting positions ------------------------------------------------------------------------------


def test_a_restart_from_the_checkpoint_neither_loses_nor_repeats(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Scenario 12, into a parquet sink: stop, append, restart; the starting offsets (-2 earliest, -1 latest by
    partition) only apply to the first run."""
    logs = make_topic(tmp_path / "logs", "t", [4, 3])
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"

    def run(starting: str) -> None:
        df = stream(spark, tmp_path / "logs", subscribe="t", startingOffsets=starting, maxOffsetsPerTrigger="3").load()
        writer = df.select("topic", "partition", "offset").writeStream.format("parquet")
        query = writer.option("path", str(output)).option("checkpointLocation", str(checkpoint)).start()
        queries.append(query)
        query.processAllAvailable()
        query.stop()

    run('{"t":{"0":-2,"1":-1}}')
    append(logs, "t", 0, 2)
    append(logs, "t", 1, 2)
    run("earliest")  # ignored: the checkpoint knows where the query is
    rows = sorted(tuple(row) for row in spark.read.parquet(str(output)).collect())
    assert rows == offsets("t", 0, 0, 6) + offsets("t", 1, 3, 5)


def test_starting_timestamps_with_both_strategies(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Scenario 13: offset ``o`` is stamped ``TS + o``; partition 1 has no record at or after ``TS + 4``."""
    logs = make_topic(tmp_path / "logs", "t", [6, 3])
    path = tmp_path / "logs"
    by_partition = f'{{"t":{{"0":{TS + 4},"1":{TS + 4}}}}}'
    failing = stream(spark, path, subscribe="t", startingOffsetsByTimestamp=by_partition).load()
    query = start(queries, failing, tmp_path / "error", BatchCollector(), availableNow=True)
    with pytest.raises(StreamingQueryException, match="No offset matched from request of topic-partition t-1"):
        await_end(query)
    sink = BatchCollector()
    latest = stream(
        spark, path, subscribe="t", startingOffsetsByTimestamp=by_partition, startingOffsetsByTimestampStrategy="latest"
    ).load()
    query = start(queries, latest, tmp_path / "latest", sink)
    query.processAllAvailable()
    append(logs, "t", 1, 1)
    query.processAllAvailable()
    query.stop()
    assert sink.rows() == offsets("t", 0, 4, 6) + offsets("t", 1, 3, 4)
    everywhere = BatchCollector()
    one = stream(spark, path, subscribe="t", startingTimestamp=str(TS + 2)).load()
    query = start(queries, one, tmp_path / "global", everywhere, availableNow=True)
    await_end(query)
    assert everywhere.rows() == offsets("t", 0, 2, 6) + offsets("t", 1, 2, 4)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
        ({}, "One of the following options must be specified for Kafka source"),
        ({"subscribe": "t", "subscribePattern": "t.*"}, "Only one of the following options can be specified"),
        (
            {"subscribe": "t", "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"},
            r"minOffsetPerTrigger\(20\) is higher than the maxOffsetsPerTrigger\(10\)",
        ),
        (
            {"subscribe": "t", "maxOffsetPerTrigger": "10"},
            r"option 'maxoffsetpertrigger' is not a pysparklog source option \(did you mean maxOffsetsPerTrigger\?\)",
        ),
        (
            {"subscribe": "t", "startingOffset": "earliest"},
            r"option 'startingoffset' is not a pysparklog source option \(did you mean startingOffsets\?\); accepted",
        ),
        # A batch refuses this value and a stream the option: the stream's sentence alone, not both joined.
        (
            {"subscribe": "t", "endingOffsets": "earliest"},
            r"ending offset not valid in streaming queries: option endingOffsets is accepted in batch queries only"
            r"(?! \(in a stream\))",
        ),
    ],
    ids=[
        "ending-offsets",
        "no-subscription",
        "two-subscriptions",
        "min-above-max",
        "unknown-option",
        "unknown-option-closest",
        "ending-offsets-earliest",
    ],
)
def test_bad_options_fail_the_query_at_its_start(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery], options: dict[str, str], message: str
) -> None:
    """Scenario 15: with our message, before any micro-batch. Options no query accepts fail at ``load()``; those
    only a stream refuses when the query starts (``schema()`` cannot tell a stream from a batch)."""
    make_topic(tmp_path / "logs", "t", [2])
    sink = BatchCollector()
    try:
        df = stream(spark, tmp_path / "logs", **options).load()
    except AnalysisException as error:
        assert re.search(message, str(error))
        return
    query = start(queries, df, tmp_path / "ckpt", sink)
    with pytest.raises(StreamingQueryException, match=message) as failure:
        await_end(query)
    # The query's error is ours, not PySpark's UnboundLocalError with ours buried in its context.
    assert "UnboundLocalError" not in str(failure.value)
    assert sink.batches == {}


def test_a_path_that_is_no_log_directory_fails_the_query_naming_it(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    """Rather than waiting for topics to appear in a directory that is not there."""
    df = stream(spark, tmp_path / "nowhere", subscribe="t").load()
    query = start(queries, df, tmp_path / "ckpt", BatchCollector())
    with pytest.raises(StreamingQueryException, match="is not a log directory: it does not exist") as failure:
        await_end(query)
    assert "UnboundLocalError" not in str(failure.value)


# -- concurrent writers, groups, transactions ----------------------------------------------------------------------

PRODUCER = textwrap.dedent(
    """
    import sys, time
    from pysparklog.producer import Producer
    path, rounds = sys.argv[1], int(sys.argv[2])
    with Producer(path) as producer:
        for i in range(rounds):
            for j in range(10):
                producer.send("live", f"{i}-{j}".encode(), key=f"k{j}".encode())
            producer.flush()
            time.sleep(0.05)
    """
)


def test_a_stream_sees_every_record_of_a_concurrent_producer_exactly_once(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery]
) -> None:
    logs = make_topic(tmp_path / "logs", "live", [0, 0])
    sink = BatchCollector()
    values: list[bytes] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        rows = df.select("partition", "offset", "value").collect()
        sink.batches[batch_id] = sorted(("live", row.partition, row.offset) for row in rows)
        values.extend(bytes(row.value) for row in rows)

    df = stream(
        spark, tmp_path / "logs", subscribe="live", startingOffsets="earliest", maxOffsetsPerTrigger="40"
    ).load()
    query = start(queries, df, tmp_path / "ckpt", collect)
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, str(tmp_path / "logs"), "30"])
    try:
        while producer.poll() is None:
            query.processAllAvailable()
    finally:
        assert producer.wait(timeout=120) == 0
    query.processAllAvailable()
    ends = {p: LogDirectory(logs.path).partition("live", p).log_end_offset for p in (0, 1)}
    assert sum(ends.values()) == 300
    assert sink.rows() == offsets("live", 0, 0, ends[0]) + offsets("live", 1, 0, ends[1])
    assert sorted(values) == sorted(f"{i}-{j}".encode() for i in range(30) for j in range(10))
    assert len(sink.batches) > 1


def test_with_a_group_id_the_groups_offsets_follow_the_query(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery], capsys: pytest.CaptureFixture[str]
) -> None:
    logs = make_topic(tmp_path / "logs", "t", [7, 5])
    df = stream(
        spark, tmp_path / "logs", subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="5", group_id="g"
    ).load()
    query = start(queries, df, tmp_path / "ckpt", BatchCollector(), availableNow=True)
    await_end(query)
    last = json.loads(end_offsets(query)[-1])
    assert last == {"t": {"0": 7, "1": 5}}
    with OffsetStore(logs) as store:
        assert {tp: c.offset for tp, c in store.committed("g").items()} == {
            TopicPartition("t", 0): 7,
            TopicPartition("t", 1): 5,
        }
        assert [lag.lag for lag in store.lag("g")] == [0, 0]
    assert cli(["consumer-groups", "--log-dir", str(tmp_path / "logs"), "--describe", "--group", "g"]) == 0
    described = capsys.readouterr().out
    assert [line.split()[1:6] for line in described.splitlines() if line.startswith("g ")] == [
        ["t", "0", "7", "7", "0"],
        ["t", "1", "5", "5", "0"],
    ]
    # A new query of the group goes on where the group is.
    append(logs, "t", 1, 2)
    sink = BatchCollector()
    again = stream(spark, tmp_path / "logs", subscribe="t", group_id="g").load()
    query = start(queries, again, tmp_path / "ckpt2", sink, availableNow=True)
    await_end(query)
    assert sink.rows() == offsets("t", 1, 5, 7)


@READ_PATHS
def test_read_committed_streams_only_committed_transactions(
    spark: SparkSession, tmp_path: Path, queries: list[StreamingQuery], driver_read_max_offsets: str
) -> None:
    """An open transaction holds back everything after its first offset; aborted records never show. A
    micro-batch may hold nothing but markers and aborted records: read on the driver too, it has no rows."""
    logs = transactions(tmp_path / "logs")  # 0-1, commit 2-3, abort 4-5, markers 6-7, 8-9, open 10-11, 12-13
    sink = BatchCollector()
    df = stream(
        spark,
        tmp_path / "logs",
        subscribe="tx",
        startingOffsets="earliest",
        isolation_level="read_committed",
        driverReadMaxOffsets=driver_read_max_offsets,
    )
    query = start(queries, df.load(), tmp_path / "ckpt", sink)
    query.processAllAvailable()
    assert sink.rows() == [("tx", 0, o) for o in (0, 1, 2, 3, 8, 9)]
    append(logs, "tx", 0, 1, settings=transaction(4))  # another transaction opens, at 14
    end_transaction(logs, 3, ControlRecordType.COMMIT)
    query.processAllAvailable()
    assert sink.rows() == [("tx", 0, o) for o in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13)]
    end_transaction(logs, 4, ControlRecordType.ABORT)
    append(logs, "tx", 0, 1)
    query.processAllAvailable()
    assert sink.rows() == [("tx", 0, o) for o in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 17)]
    append(logs, "tx", 0, 1, settings=transaction(5))  # a micro-batch of an aborted record and its marker
    end_transaction(logs, 5, ControlRecordType.ABORT)
    query.processAllAvailable()
    last = query.lastProgress
    assert last is not None and last["sources"][0]["endOffset"] == json.dumps({"tx": {"0": 20}})
    assert sink.rows() == [("tx", 0, o) for o in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 17)]
