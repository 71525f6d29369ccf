"""The real peer: Spark's Kafka connector reading and writing a real Kafka broker, against pysparklog, in one run.

The other parts compare pysparklog with synthetic ceilings (what any Python source or sink costs); this one
compares it with what it replaces. A single-node Kafka broker (KRaft, broker and controller in one process, on
loopback, its jars from Maven Central: ``tests/interop/kafka_broker.py``) and Spark's Kafka connector (its jars
through ``spark.jars.packages``, ``spark-sql-kafka-0-10`` of the installed pyspark's version, from Spark's Ivy
cache after the first run) run beside a pysparklog log directory, both on tmpfs when the machine has one, in one
local SparkSession with 2 task slots on 2 cores, which the broker shares. Every query runs once per side, the
Kafka connector's first; ratios are pysparklog's figure over the connector's, from the same run. Both sides
keep their defaults: the connector's Kafka producer (kafka-clients of the connector's release) and consumer,
pysparklog's exactly-once sink (the connector's sink is at-least-once only).

- **Batch write**: ``spark.range(n)`` over 2 partitions, turned in the JVM into the common records (10-byte
  keys, 100-byte JSON-like values), written with ``df.write`` into a new 2-partition topic on each side. These
  are the records every read below reads: the same rows, loaded by each side's own Spark sink. The count of
  each topic is checked afterwards (the broker's end offsets; pysparklog's ``read_committed`` records).
- **Batch read**: ``spark.read`` of that topic from the earliest offsets into Spark's ``noop`` sink.
- **Streaming read**: the same as a ``readStream`` with ``Trigger.AvailableNow`` into ``noop``.
- **Analytical query over the recent records**: ``spark.read`` of that topic ``where timestamp >=`` a bound, then a
  count and a sum of the value lengths. The records' CreateTimes are their write times (the connector's sink
  ignores a ``timestamp`` column), so each side's bound is taken from its own topic, untimed: the write time
  from which on the share of records written is nearest to 10% (a sink stamps a batch of records with one
  time), with the exact count of records at or after it, which the timed query must find. pysparklog's session
  has ``spark.sql.python.filterPushdown.enabled`` on, so its reader starts each partition at the bound's offset
  (the time-index lookup); the connector reads the whole topic and filters. The same query in pysparklog with
  the conf off (reading everything, as the connector does) is shown too.
- **One-record micro-batches**: a 1-partition topic of 30 records read with ``maxOffsetsPerTrigger=1`` and
  ``Trigger.AvailableNow`` into ``noop``; the medians of ``durationMs`` ``triggerExecution`` and ``addBatch``
  over the micro-batches after the first. A trivial Python stream source (``bench_source``'s synthetic one,
  one row per micro-batch) runs the same query: the floor of Spark's Python data source machinery.
- **End-to-end latency**: a stream copy from a 1-partition topic to another whose ``message.timestamp.type`` is
  ``LogAppendTime``, with the default trigger (a new micro-batch as soon as the last one ends). A producer in
  this process (kafka-python's for the broker, pysparklog's for the log directory, ``linger.ms`` 0, each send
  waited for) sends one record every 100 ms whose value is its own CreateTime in milliseconds. A record's
  latency is the output record's log-append time minus that CreateTime: the same clock, stamped by the broker
  or by pysparklog's append, read back with each side's batch reader. The first records, sent while the query
  warms up, are left out. For pysparklog's exactly-once sink the append precedes the micro-batch's commit, so a
  ``read_committed`` reader sees a record later than this figure by the commit (the decision record and the
  COMMIT markers); the connector's sink has no commit, its records are visible once appended.
- **The copy's floor**: pysparklog's copy again, at the same pace, into a Python stream sink that only counts its
  batches (``bench_sink``'s ``NullSink``): the micro-batch of Spark's Python sink machinery, whatever the sink does.

``python -m benchmarks.bench_peer`` (``make bench-peer``) runs it with 10 M records; ``--records`` sizes the
loaded topic. It is not part of ``python -m benchmarks``: the broker, the connector's resolution and the two
loads make it several minutes long. It needs ``java`` and ``mvn`` on PATH (the broker's jars) and, on its first
run, Maven Central for the connector's jars.
"""

from __future__ import annotations

import abc
import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyspark
import pyspark.sql.functions as F  # noqa: N812 (Spark's convention)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from benchmarks.bench_sink import NullSink
from benchmarks.bench_source import SyntheticArrowSource, SyntheticSimpleSource
from benchmarks.common import local_spark, use_cores
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from tests.interop.kafka_broker import TOPIC_COMMAND, KafkaBroker

RECORDS = 10_000_000
SLOTS = 2  # cores, task slots
PARTITIONS = 2  # of the loaded topic: one task per slot
WARM_RECORDS = 100_000
TINY_BATCHES = 30
LATENCY_RECORDS = 200
LATENCY_INTERVAL_S = 0.1
LATENCY_WARM_UP_RECORDS = 10  # sent while the copy query's first micro-batches compile and load their workers
LATENCY_DRAIN_TIMEOUT_S = 60.0
SEND_TIMEOUT_S = 30.0
#: Targets as pysparklog / connector ratios of time: at least 4x the connector's throughput for a read, 2x for a
#: write, no slower for a micro-batch and end to end.
READ_TARGET = 0.25
WRITE_TARGET = 0.5
LATENCY_TARGET = 1.0
KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
LOG_APPEND_TIME = 1  # Spark's timestampType column
RECENT_FRACTION = 0.1  # of the loaded records, about, that the analytical query's timestamp predicate selects
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_LOADED = "bench"
_TINY = "tiny"
_WARM = "warm"
_COPY_IN = "copy-in"
_COPY_OUT = "copy-out"
_VALUE_FORMAT = '{"id":%010d,"user":"u%06d","amount":%05d.%02d,"currency":"EUR","status":"settled"}'


# -- the two sides ------------------------------------------------------------------------------------------------


class _Side(abc.ABC):
    """How one side creates topics, reads, writes and produces; subclasses name the format and its options."""

    name: str

    @abc.abstractmethod
    def create_topic(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        """Create ``topic`` with ``partitions`` partitions and topic ``configs``."""

    @abc.abstractmethod
    def read(self, reader: Any, topic: str) -> DataFrame:
        """``reader`` (``spark.read`` or ``spark.readStream``, options set) on ``topic`` from the earliest offsets."""

    @abc.abstractmethod
    def write(self, writer: Any, topic: str) -> Any:
        """``writer`` (``df.write`` or ``df.writeStream``) into ``topic``, ready for ``save()`` or ``start()``."""

    @abc.abstractmethod
    def records(self, topic: str, partitions: int) -> int:
        """The records ``topic`` holds (control records left out)."""

    @abc.abstractmethod
    def sender(self) -> Callable[[str, bytes, int], None]:
        """A function sending one record (topic, value, CreateTime in ms) and waiting until it is appended."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close what ``sender`` opened, if it was called."""


class _Kafka(_Side):
    name = "Kafka connector"

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker
        self._producer: Any = None

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        settings = [arg for key, value in (configs or {}).items() for arg in ("--config", f"{key}={value}")]
        self.broker.tool(
            TOPIC_COMMAND,
            "--create",
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
            *settings,
        )

    def read(self, reader: Any, topic: str) -> DataFrame:
        reader = reader.format("kafka").option("kafka.bootstrap.servers", self.broker.bootstrap_server)
        loaded: DataFrame = reader.option("subscribe", topic).option("startingOffsets", "earliest").load()
        return loaded

    def write(self, writer: Any, topic: str) -> Any:
        return (
            writer.format("kafka")
            .option("kafka.bootstrap.servers", self.broker.bootstrap_server)
            .option("topic", topic)
        )

    def records(self, topic: str, partitions: int) -> int:
        # kafka-get-offsets.sh prints topic:partition:end offset; the connector's sink writes no control records.
        printed = self.broker.tool("org.apache.kafka.tools.GetOffsetShell", "--topic", topic)
        return sum(int(line.rsplit(":", 1)[1]) for line in printed.split())

    def sender(self) -> Callable[[str, bytes, int], None]:
        from kafka import KafkaProducer

        producer = self._producer = KafkaProducer(bootstrap_servers=self.broker.bootstrap_server, linger_ms=0)

        def send(topic: str, value: bytes, timestamp_ms: int) -> None:
            producer.send(topic, value, timestamp_ms=timestamp_ms).get(SEND_TIMEOUT_S)

        return send

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()


class _Pysparklog(_Side):
    name = "pysparklog"

    def __init__(self, path: str) -> None:
        self.path = path
        self.logs = LogDirectory(path)
        self._producer: Producer | None = None

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        self.logs.topics.create(topic, partitions, configs)

    def read(self, reader: Any, topic: str) -> DataFrame:
        reader = reader.format("pysparklog").option("subscribe", topic).option("startingOffsets", "earliest")
        loaded: DataFrame = reader.load(self.path)
        return loaded

    def write(self, writer: Any, topic: str) -> Any:
        return writer.format("pysparklog").option("path", self.path).option("topic", topic)

    def records(self, topic: str, partitions: int) -> int:
        count = 0
        for p in range(partitions):
            with self.logs.partition(topic, p) as log:
                count += sum(batch.num_rows for batch in log.read_arrow(isolation_level="read_committed"))
        return count

    def sender(self) -> Callable[[str, bytes, int], None]:
        producer = self._producer = Producer(self.path, ProducerConfig.from_properties({"linger.ms": "0"}))

        def send(topic: str, value: bytes, timestamp_ms: int) -> None:
            producer.send(topic, value, timestamp_ms=timestamp_ms).get(timeout=SEND_TIMEOUT_S)

        return send

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()


@dataclass(frozen=True, slots=True)
class Durations:
    """Medians of a query's micro-batches' ``durationMs`` (ms), phase by phase, and how many micro-batches they
    are over."""

    phases: dict[str, float]
    micro_batches: int

    @classmethod
    def of(cls, progress: Sequence[Any]) -> Durations:
        if not progress:
            raise AssertionError("no micro-batch with rows to take durations from")
        names = {name for p in progress for name in p["durationMs"]}
        return cls(
            {name: statistics.median(p["durationMs"].get(name, 0) for p in progress) for name in sorted(names)},
            len(progress),
        )

    @property
    def trigger_execution(self) -> float:
        return self.phases["triggerExecution"]

    @property
    def add_batch(self) -> float:
        return self.phases["addBatch"]

    def breakdown(self) -> str:
        """Every phase but the whole, as a row shows them."""
        return ", ".join(f"{name} {ms:.0f}" for name, ms in self.phases.items() if name != "triggerExecution")

    def __str__(self) -> str:
        return f"{self.trigger_execution:.0f} / {self.add_batch:.0f} ms"

    def over(self, other: Durations) -> str:
        """The two ratios to ``other``'s, as a row shows them."""
        return f"{self.trigger_execution / other.trigger_execution:.2f} / {self.add_batch / other.add_batch:.2f}"


# -- the queries --------------------------------------------------------------------------------------------------


def _records(spark: SparkSession, n: int) -> DataFrame:
    """``n`` records of the common shape (10-byte keys, 100-byte values whose digits vary), made in the JVM."""
    value = F.format_string(
        _VALUE_FORMAT,
        F.col("id"),
        F.pmod(F.hash("id"), F.lit(1_000_000)),
        F.pmod(F.hash("id", F.lit(1)), F.lit(100_000)),
        F.pmod(F.hash("id", F.lit(2)), F.lit(100)),
    )
    return spark.range(n, numPartitions=SLOTS).select(
        F.lpad(F.col("id").cast("string"), 10, "0").cast("binary").alias("key"),
        F.rpad(value, 100, " ").cast("binary").alias("value"),
    )


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


class _Run:
    """The queries of one run, each from a fresh checkpoint under ``root``."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark = spark
        self.root = root
        self.checkpoints = 0

    def checkpoint(self) -> str:
        self.checkpoints += 1
        return os.path.join(self.root, f"checkpoint-{self.checkpoints}")

    def load(self, side: _Side, topic: str, records: int, partitions: int) -> float:
        """Seconds of a batch write of ``records`` records into a new topic; fails unless it holds them all."""
        side.create_topic(topic, partitions)
        seconds = _timed(side.write(_records(self.spark, records).write.mode("append"), topic).save)
        held = side.records(topic, partitions)
        if held != records:
            raise AssertionError(f"{side.name}: topic {topic} holds {held:,} records after a write of {records:,}")
        return seconds

    def batch_read(self, side: _Side, topic: str) -> float:
        return _timed(side.read(self.spark.read, topic).write.format("noop").mode("overwrite").save)

    def recent_bound(self, side: _Side, topic: str) -> tuple[int, int]:
        """Untimed: the CreateTime in ms from which on the share of ``topic``'s records written is the nearest to
        ``RECENT_FRACTION`` (a sink stamps a whole batch of records with one time), and how many records that is."""
        per_ms = side.read(self.spark.read, topic).groupBy(F.unix_millis("timestamp").alias("ms")).count().toArrow()
        newest_first = np.argsort(per_ms["ms"].to_numpy())[::-1]
        times = per_ms["ms"].to_numpy()[newest_first]
        at_or_after = np.cumsum(per_ms["count"].to_numpy()[newest_first])
        nearest = int(np.argmin(np.abs(at_or_after - RECENT_FRACTION * at_or_after[-1])))
        return int(times[nearest]), int(at_or_after[nearest])

    def recent_query(self, side: _Side, topic: str, bound: tuple[int, int], *, pushdown: bool) -> float:
        """Seconds of a count and sum over the records of ``topic`` stamped at or after ``bound`` (from
        :meth:`recent_bound`), with Python filter pushdown on or off; fails unless it counts them exactly."""
        since_ms, expected = bound
        recent = side.read(self.spark.read, topic).where(F.col("timestamp") >= F.timestamp_millis(F.lit(since_ms)))
        query = recent.agg(F.count("*").alias("records"), F.sum(F.length("value")).alias("bytes"))
        self.spark.conf.set(PUSHDOWN_CONF, str(pushdown).lower())
        try:
            started = time.perf_counter()
            row = query.collect()[0]
            seconds = time.perf_counter() - started
        finally:
            self.spark.conf.unset(PUSHDOWN_CONF)
        if row["records"] != expected:
            raise AssertionError(f"{side.name}: the recent records counted {row['records']:,}, not {expected:,}")
        return seconds

    def stream_read(self, side: _Side, topic: str) -> float:
        return self._into_noop(side.read(self.spark.readStream, topic))[0]

    def micro_batches(self, stream: DataFrame) -> Durations:
        """The one-record micro-batches after the first, read into ``noop``."""
        query = self._into_noop(stream)[1]
        return Durations.of([p for p in query.recentProgress if p["numInputRows"] > 0][1:])

    def tiny_stream(self, side: _Side) -> DataFrame:
        return side.read(self.spark.readStream.option("maxOffsetsPerTrigger", "1"), _TINY)

    def trivial_stream(self) -> DataFrame:
        reader = self.spark.readStream.format(SyntheticArrowSource.name()).option("total", str(TINY_BATCHES))
        return reader.option("rowsPerBatch", "1").option("maxOffsetsPerTrigger", "1").load()

    def simple_stream(self) -> DataFrame:
        """The trivial source's rows through PySpark's simple stream reader: one row per micro-batch, read by
        the driver and handed to Spark with the plan."""
        return self.spark.readStream.format(SyntheticSimpleSource.name()).option("total", str(TINY_BATCHES)).load()

    def _into_noop(self, stream: DataFrame) -> tuple[float, StreamingQuery]:
        writer = stream.writeStream.format("noop").option("checkpointLocation", self.checkpoint())
        started = time.perf_counter()
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return time.perf_counter() - started, query

    def latencies(self, side: _Side, records: int) -> tuple[np.ndarray, Durations]:
        """Milliseconds from each copied record's CreateTime to its copy's log-append time, warm-up left out, and
        the copy's micro-batches that had rows."""
        side.create_topic(_COPY_IN, 1)
        side.create_topic(_COPY_OUT, 1, {"message.timestamp.type": "LogAppendTime"})
        copy = side.read(self.spark.readStream, _COPY_IN).select("key", "value")
        writer = side.write(copy.writeStream.option("checkpointLocation", self.checkpoint()), _COPY_OUT)
        with _running(writer) as query:
            _send_paced(side.sender(), records)
            deadline = time.monotonic() + LATENCY_DRAIN_TIMEOUT_S
            while side.records(_COPY_OUT, 1) < records:
                if query.exception() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{side.name}: the copy did not reach {records} records: {query.exception()}")
                time.sleep(0.5)
            durations = Durations.of([p for p in query.recentProgress if p["numInputRows"] > 0])
        copied = side.read(self.spark.read, _COPY_OUT).select(
            F.col("value").cast("string").cast("long").alias("created"),
            F.unix_millis("timestamp").alias("appended"),
            "timestampType",
        )
        rows = copied.collect()
        if any(row["timestampType"] != LOG_APPEND_TIME for row in rows):
            raise AssertionError(f"{side.name}: {_COPY_OUT} holds records without a log-append time")
        created = np.array([row["created"] for row in rows], np.int64)
        appended = np.array([row["appended"] for row in rows], np.int64)
        order = np.argsort(created)
        return (appended[order] - created[order])[LATENCY_WARM_UP_RECORDS:], durations

    def sink_floor(self, side: _Pysparklog, records: int) -> Durations:
        """The copy's micro-batches with rows when its sink is a Python sink that drops its batches: what Spark's
        Python sink machinery costs whatever the sink does, with the same source and the same pace."""
        copy = side.read(self.spark.readStream, _COPY_IN).select("key", "value")
        writer = copy.writeStream.format(NullSink.name()).option("checkpointLocation", self.checkpoint())
        with _running(writer) as query:
            _send_paced(side.sender(), records)
            time.sleep(1.0)  # the last records' micro-batch
            # The first micro-batch reads what the latency copy left in the topic.
            return Durations.of([p for p in query.recentProgress if p["numInputRows"] > 0][1:])


def _send_paced(send: Callable[[str, bytes, int], None], records: int) -> None:
    """Send ``records`` records to the copy's input, one every ``LATENCY_INTERVAL_S``, each value its CreateTime."""
    first = time.monotonic()
    for i in range(records):
        time.sleep(max(0.0, first + i * LATENCY_INTERVAL_S - time.monotonic()))
        now_ms = time.time_ns() // 1_000_000
        send(_COPY_IN, str(now_ms).encode(), now_ms)


@contextmanager
def _running(writer: Any) -> Iterator[StreamingQuery]:
    """A streaming query started for the block and stopped after it, whatever happened; waits for its first
    progress (the query planned and ran its first, empty, micro-batch) before the block."""
    query: StreamingQuery = writer.start()
    try:
        while query.lastProgress is None:
            if query.exception() is not None:
                raise AssertionError(f"the copy query failed: {query.exception()}")
            time.sleep(0.1)
        yield query
    finally:
        query.stop()


# -- measurements and the table -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """One row: the connector's figure and ours, their ratio (ours / the connector's), and the ratio's target
    (ours at most ``target`` times the connector's; None for figures without one)."""

    what: str
    kafka: str
    ours: str
    ratio: str
    target: float | None = None
    passed: bool | None = None


def _compare(what: str, figures: Sequence[float], unit: str, target: float | None = None) -> Comparison:
    """A row of the two figures (the connector's, ours) and their ratio."""
    kafka, ours = figures
    ratio = ours / kafka
    digits = 1 if unit == "s" else 0
    return Comparison(
        what,
        f"{kafka:.{digits}f} {unit}",
        f"{ours:.{digits}f} {unit}",
        f"{ratio:.2f}",
        target,
        None if target is None else ratio <= target,
    )


def measure(records: int, latency_records: int) -> list[Comparison]:
    """Every row, from one broker and one SparkSession, both stopped at the end whatever happened."""
    root = tempfile.mkdtemp(prefix="pysparklog-bench-peer-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        with KafkaBroker.started(Path(root) / "kafka") as broker:
            kafka, ours = _Kafka(broker), _Pysparklog(os.path.join(root, "logs"))
            spark = local_spark(
                "pysparklog-bench-peer",
                SLOTS,
                (SyntheticArrowSource, SyntheticSimpleSource, NullSink),
                {"spark.jars.packages": KAFKA_PACKAGE},
            )
            try:
                return _measure(_Run(spark, root), kafka, ours, records, latency_records)
            finally:
                spark.stop()
                kafka.close()
                ours.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _measure(run: _Run, kafka: _Kafka, ours: _Pysparklog, records: int, latency_records: int) -> list[Comparison]:
    sides = (kafka, ours)
    for side in sides:  # untimed: the JIT, the connector's classes, every Python worker's imports
        run.load(side, _WARM, WARM_RECORDS, PARTITIONS)
        run.batch_read(side, _WARM)
        run.recent_query(side, _WARM, run.recent_bound(side, _WARM), pushdown=True)
        run.stream_read(side, _WARM)
        run.load(side, _TINY, TINY_BATCHES, 1)
    write = [run.load(side, _LOADED, records, PARTITIONS) for side in sides]
    batch = [run.batch_read(side, _LOADED) for side in sides]
    stream = [run.stream_read(side, _LOADED) for side in sides]
    bounds = [run.recent_bound(side, _LOADED) for side in sides]
    recent = [run.recent_query(side, _LOADED, bound, pushdown=True) for side, bound in zip(sides, bounds, strict=True)]
    recent_unpushed = run.recent_query(ours, _LOADED, bounds[1], pushdown=False)
    shares = " and ".join(f"{selected / records:.1%}" for _, selected in bounds)
    tiny = [run.micro_batches(run.tiny_stream(side)) for side in sides]
    trivial = run.micro_batches(run.trivial_stream())
    simple = run.micro_batches(run.simple_stream())
    copies = [run.latencies(side, latency_records) for side in sides]
    sink_floor = run.sink_floor(ours, latency_records // 2)
    p50, p99 = ([float(np.percentile(ms, q)) for ms, _ in copies] for q in (50, 99))
    copy = [durations for _, durations in copies]
    millions = f"{records / 1e6:g} M"
    return [
        _compare(f"batch read of {millions} records into `noop`", batch, "s", READ_TARGET),
        _compare("streaming read of the same, AvailableNow into `noop`", stream, "s", READ_TARGET),
        _compare(
            f"analytical query: count and sum over the records written last by CreateTime ({shares} of them), "
            "pysparklog with filter pushdown",
            recent,
            "s",
        ),
        Comparison(
            "the same in pysparklog without filter pushdown (the conf off)",
            "-",
            f"{recent_unpushed:.1f} s",
            f"{recent_unpushed / recent[0]:.2f}",
        ),
        _compare(
            f"batch write of {millions} records (pysparklog exactly-once, the connector at-least-once)",
            write,
            "s",
            WRITE_TARGET,
        ),
        _compare(
            f"one-record micro-batch, median triggerExecution ({tiny[1].micro_batches} micro-batches)",
            [d.trigger_execution for d in tiny],
            "ms",
            LATENCY_TARGET,
        ),
        _compare("of which addBatch", [d.add_batch for d in tiny], "ms"),
        Comparison(
            "the floor: a trivial Python stream source (one row per micro-batch), triggerExecution / addBatch",
            "-",
            str(trivial),
            trivial.over(tiny[0]),
        ),
        Comparison(
            "the floor of micro-batches read by the driver: the trivial source as a simple stream reader, "
            "triggerExecution / addBatch",
            "-",
            str(simple),
            simple.over(tiny[0]),
        ),
        _compare(
            f"end-to-end latency p50, 1 record per {LATENCY_INTERVAL_S * 1000:.0f} ms, stream copy topic to topic "
            f"({len(copies[1][0])} records)",
            p50,
            "ms",
            LATENCY_TARGET,
        ),
        _compare("end-to-end latency p99, the same", p99, "ms", LATENCY_TARGET),
        Comparison(
            "the copy's micro-batches with rows, median triggerExecution / addBatch "
            f"({copy[0].micro_batches} and {copy[1].micro_batches} micro-batches)",
            str(copy[0]),
            str(copy[1]),
            copy[1].over(copy[0]),
        ),
        Comparison("of which, phase by phase (median ms)", copy[0].breakdown(), copy[1].breakdown(), "-"),
        Comparison(
            "the floor: pysparklog's copy into a Python sink that drops its batches, triggerExecution / addBatch "
            f"({sink_floor.micro_batches} micro-batches)",
            "-",
            str(sink_floor),
            sink_floor.over(copy[0]),
        ),
        Comparison("of which, phase by phase (median ms)", "-", sink_floor.breakdown(), "-"),
    ]


def markdown(rows: Sequence[Comparison]) -> str:
    lines = [
        "| What | Kafka connector | pysparklog | pysparklog / Kafka (time) | Target | Result |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        target = "-" if r.target is None else f"<= {r.target:g}"
        verdict = "-" if r.passed is None else ("pass" if r.passed else "FAIL")
        lines.append(f"| {r.what} | {r.kafka} | {r.ours} | {r.ratio} | {target} | {verdict} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_peer", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS, help="records loaded and read (default 10 M)")
    parser.add_argument(
        "--latency-records", type=int, default=LATENCY_RECORDS, help="records of the end-to-end copy (default 200)"
    )
    args = parser.parse_args(argv)
    if args.latency_records <= LATENCY_WARM_UP_RECORDS:
        parser.error(f"--latency-records must be more than the {LATENCY_WARM_UP_RECORDS} warm-up records")
    use_cores(SLOTS)
    started = time.perf_counter()
    rows = measure(args.records, args.latency_records)
    print(
        f"pysparklog against Spark's Kafka connector ({KAFKA_PACKAGE}) and a single-node Kafka broker on loopback: "
        f"local[{SLOTS}] on {SLOTS} cores, {args.records:,} records; one run per side, ratios of time\n"
    )
    print(markdown(rows))
    judged = [r for r in rows if r.passed is not None]
    print(
        f"\n{sum(1 for r in judged if r.passed)} of {len(judged)} targets met ({time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
