"""The main job: a live order stream, aggregated by Spark Structured Streaming and delivered exactly once to a topic
and to a Delta table. Run it with ``make run``; it stops by itself after a minute or two.

Everything runs on this machine: the log directory is ``./data/logs``, Spark runs in local mode, the checkpoints and
the Delta table are under ``./data``. What happens:

1. **A producer** (``Producer.send_arrow``, in a background thread) writes orders into the topic ``orders`` (6
   partitions) in small bursts, for ``--seconds`` at about ``--rate`` orders a second. Key: the customer id, so a
   customer's orders stay in one partition, in order. Value: JSON ``{order_id, customer_id, country, amount,
   event_time}``. Event times trail the wall clock by up to a second, and one order in twenty arrives late, up to
   ``MAX_LATENESS_S`` seconds: out of order, as real events are, but within the watermark's delay, so Spark counts
   every one. It starts once both queries run, so that they process a live stream; they work off what piles up
   meanwhile (their first micro-batch takes longest: Spark starts its Python workers) at most
   ``maxOffsetsPerTrigger`` orders a micro-batch.
2. **Query A** (``orders`` -> ``order-stats``) reads ``orders`` with ``readStream.format("pysparklog")`` as consumer
   group ``order-stats-job`` (each micro-batch's end offsets are committed, so ``pysparklog consumer-groups`` shows
   its lag), counts orders and sums revenue per country in 10-second event-time windows with a 10-second watermark,
   and appends each window once the watermark passes it (output mode append) to the topic ``order-stats`` with
   ``writeStream.format("pysparklog")``: exactly once, each micro-batch one set of Kafka transactions.
3. **Query B** (``order-stats`` -> Delta) reads ``order-stats`` with ``kafka.isolation.level=read_committed`` as
   group ``order-stats-to-delta``, so it only ever sees micro-batches query A committed, and appends them to a Delta
   table, exactly once through its checkpoint (Delta records each micro-batch's id in the table's log).

**Why two queries.** A streaming query has one sink. ``foreachBatch`` could write both, but only the Delta write
can be made idempotent there (``txnAppId``/``txnVersion``): a batch write to the topic inside it would append a
re-run micro-batch a second time. Chained, each query has a sink that is exactly-once with its own checkpoint, and
the topic between them is a product of its own: replayable, in Kafka's format, readable by any other consumer.

**How it ends.** A window is emitted once the watermark (the latest event time minus the delay) passes its end; the
last windows would wait for events that never come, so the producer's final order is dated ``WINDOW_S +
WATERMARK_DELAY_S`` seconds after the others: it closes every window before it, and its own window stays open (the
job says so). Then each query processes everything available, both stop, and the job prints the Delta table's
totals, the topics' record counts, the groups' lag (0) and where everything is, with commands to look at it.
Spark's own log goes to ``./data/spark.log``, so what the terminal shows is the job's output.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from examples.common import log_location
from pysparklog.offsets import OffsetStore
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.spark.session import local_spark
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.structs import TopicPartition

DEFAULT_DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")

ORDERS = "orders"
ORDERS_PARTITIONS = 6
STATS = "order-stats"
STATS_PARTITIONS = 2
STATS_GROUP = "order-stats-job"
DELTA_GROUP = "order-stats-to-delta"
STATS_QUERY = "orders-to-order-stats"
DELTA_QUERY = "order-stats-to-delta"

WINDOW_S = 10
WATERMARK_DELAY_S = 10
#: The latest an order arrives after its event time. Below the watermark's delay, with a margin for the partitions
#: of a micro-batch ending at slightly different times, so Spark drops none of them (it would drop later ones).
MAX_LATENESS_S = 6.0
LATE_SHARE = 0.05
JITTER_S = 1.0
BURST_S = 0.25
TRIGGER = "2 seconds"
#: Per micro-batch, the cost is mostly fixed (planning, tasks, state store, transactions), so a backlog is worked
#: off in large steps; the limit still keeps the first micro-batch of a long backlog bounded.
MAX_OFFSETS_PER_TRIGGER = 20_000
REPORT_EVERY_S = 5.0

ORDER_SCHEMA = "order_id BIGINT, customer_id STRING, country STRING, amount DECIMAL(10,2), event_time TIMESTAMP"
STATS_SCHEMA = "window_start TIMESTAMP, window_end TIMESTAMP, country STRING, orders BIGINT, revenue DECIMAL(20,2)"

CUSTOMERS = 5_000
COUNTRIES = ("US", "DE", "GB", "FR", "JP", "BR", "IN", "CA", "AU")
COUNTRY_WEIGHTS = (0.28, 0.14, 0.12, 0.10, 0.09, 0.08, 0.08, 0.06, 0.05)


@dataclass(frozen=True, slots=True)
class Paths:
    """Where the job keeps things: the log directory, and the rest under the data directory."""

    data_dir: str
    log_dir: str

    @property
    def delta(self) -> str:
        return os.path.join(self.data_dir, "delta", "order_stats")

    @property
    def checkpoints(self) -> str:
        return os.path.join(self.data_dir, "checkpoints")

    def checkpoint(self, query: str) -> str:
        return os.path.join(self.checkpoints, query)

    @property
    def spark_log(self) -> str:
        return os.path.join(self.data_dir, "spark.log")


# -- the order stream -------------------------------------------------------------------------------------------


class OrderEvents:
    """Order events as the producer sends them: customers with a home country, amounts with a long tail, event
    times slightly out of order. Not thread-safe: one producer thread uses it.

    Args:
        first_order_id: The first order's id (a run with ``--keep`` goes on after the last run's).
        seed: Seeds customers, countries and amounts; event times come from the wall clock.
    """

    def __init__(self, first_order_id: int = 1, seed: int = 7) -> None:
        self._rng = np.random.default_rng(seed)
        self._home = self._rng.choice(len(COUNTRIES), CUSTOMERS, p=COUNTRY_WEIGHTS)
        self._next_id = first_order_id
        self.latest_event_ms = 0

    def burst(self, n: int, now_ms: int) -> pa.Table:
        """``n`` orders placed just before ``now_ms``: most up to ``JITTER_S`` earlier, ``LATE_SHARE`` of them late,
        up to ``MAX_LATENESS_S`` earlier."""
        rng = self._rng
        behind_s = rng.uniform(0.0, JITTER_S, n)
        late = rng.random(n) < LATE_SHARE
        behind_s[late] = rng.uniform(JITTER_S, MAX_LATENESS_S, int(late.sum()))
        event_ms = now_ms - (behind_s * 1000).astype(np.int64)
        return self._table(rng.integers(0, CUSTOMERS, n), event_ms)

    def closing_order(self) -> pa.Table:
        """One order dated ``WINDOW_S + WATERMARK_DELAY_S`` seconds after the latest: the watermark it brings passes
        the end of every window before it, so Spark emits them all; its own window stays open."""
        latest_ms = self.latest_event_ms or time.time_ns() // 1_000_000
        ahead_ms = (WINDOW_S + WATERMARK_DELAY_S) * 1000
        return self._table(self._rng.integers(0, CUSTOMERS, 1), np.array([latest_ms + ahead_ms]))

    def _table(self, customers: np.ndarray, event_ms: np.ndarray) -> pa.Table:
        n = len(customers)
        ids = range(self._next_id, self._next_id + n)
        self._next_id += n
        self.latest_event_ms = max(self.latest_event_ms, int(event_ms.max(initial=0)))
        amounts = np.clip(np.round(self._rng.lognormal(3.5, 0.8, n), 2), 1.0, 5_000.0)
        times = np.datetime_as_string(event_ms.astype("datetime64[ms]"), unit="ms")
        keys = [f"C{c:05d}" for c in customers.tolist()]
        countries = [COUNTRIES[h] for h in self._home[customers].tolist()]
        values = [
            f'{{"order_id":{i},"customer_id":"{k}","country":"{c}","amount":{a:.2f},"event_time":"{t}Z"}}'
            for i, k, c, a, t in zip(ids, keys, countries, amounts.tolist(), times.tolist(), strict=True)
        ]
        return pa.table({"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.string())})


class OrderProducer(threading.Thread):
    """Sends ``OrderEvents`` bursts to ``orders`` every ``BURST_S`` for ``seconds``, then the closing order.

    Bursts are Poisson-sized around ``rate * BURST_S``, so the stream is bursty as real traffic is. An error ends
    the thread and is kept in ``error`` for the main thread to raise.
    """

    def __init__(self, log_dir: str, seconds: float, rate: float, events: OrderEvents) -> None:
        super().__init__(name="order-producer", daemon=True)
        self._log_dir = log_dir
        self._seconds = seconds
        self._rate = rate
        self._events = events
        self._halt = threading.Event()
        self.sent = 0
        self.started = time.monotonic()
        self.error: BaseException | None = None

    def halt(self) -> None:
        self._halt.set()

    def run(self) -> None:
        config = ProducerConfig.from_properties({"compression.type": "zstd", "client.id": "order-producer"})
        rng = np.random.default_rng()
        try:
            with Producer(self._log_dir, config) as producer:
                self.started = time.monotonic()
                for burst in range(max(1, round(self._seconds / BURST_S))):
                    if self._halt.wait(max(0.0, self.started + burst * BURST_S - time.monotonic())):
                        return
                    n = int(rng.poisson(self._rate * BURST_S))
                    if n:
                        producer.send_arrow(ORDERS, self._events.burst(n, time.time_ns() // 1_000_000))
                        self.sent += n
                producer.send_arrow(ORDERS, self._events.closing_order())
                self.sent += 1
        except BaseException as error:  # handed to the main thread, which raises it
            self.error = error


# -- the queries ------------------------------------------------------------------------------------------------


def start_order_stats(spark: SparkSession, paths: Paths) -> StreamingQuery:
    """Query A: ``orders`` -> per-country windowed order counts and revenue -> topic ``order-stats``, exactly once.

    The ``order-stats`` records are keyed by country, so a country's windows are in one partition, in order.
    """
    orders = (
        spark.readStream.format("pysparklog")
        .option("subscribe", ORDERS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
        .option("group.id", STATS_GROUP)
        .load(paths.log_dir)
    )
    stats = (
        orders.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("order"))
        .select("order.*")
        .withWatermark("event_time", f"{WATERMARK_DELAY_S} seconds")
        .groupBy(F.window("event_time", f"{WINDOW_S} seconds"), "country")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("revenue"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "country",
            "orders",
            "revenue",
        )
    )
    return (
        stats.select(F.col("country").alias("key"), F.to_json(F.struct(*stats.columns)).alias("value"))
        .writeStream.format("pysparklog")
        .queryName(STATS_QUERY)
        .outputMode("append")
        .option("topic", STATS)
        .option("checkpointLocation", paths.checkpoint(STATS_QUERY))
        .trigger(processingTime=TRIGGER)
        .start(paths.log_dir)
    )


def start_stats_to_delta(spark: SparkSession, paths: Paths) -> StreamingQuery:
    """Query B: the committed records of ``order-stats`` -> the Delta table, exactly once."""
    stats = (
        spark.readStream.format("pysparklog")
        .option("subscribe", STATS)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("group.id", DELTA_GROUP)
        .load(paths.log_dir)
    )
    return (
        stats.select(F.from_json(F.col("value").cast("string"), STATS_SCHEMA).alias("stats"))
        .select("stats.*")
        .writeStream.format("delta")
        .queryName(DELTA_QUERY)
        .outputMode("append")
        .option("checkpointLocation", paths.checkpoint(DELTA_QUERY))
        .trigger(processingTime=TRIGGER)
        .start(paths.delta)
    )


# -- progress ---------------------------------------------------------------------------------------------------


def end_offsets(logs: LogDirectory, topic: str) -> list[int]:
    """The log end offset of each partition of ``topic``."""
    ends = []
    for partition in range(logs.topics.get(topic).partitions):
        with logs.partition(topic, partition) as log:
            ends.append(log.log_end_offset)
    return ends


def group_lag(store: OffsetStore, logs: LogDirectory, group: str, topic: str) -> int:
    """Log end offsets minus the group's committed offsets, over every partition of ``topic``: the sum of the LAG
    column of ``consumer-groups --describe``, a partition without a committed offset counting from 0 (where the
    query starts)."""
    partitions = [TopicPartition(topic, p) for p in range(logs.topics.get(topic).partitions)]
    return sum((row.log_end_offset or 0) - (row.committed or 0) for row in store.lag(group, partitions))


class ProgressReport:
    """The table the job prints while it runs: one line every ``REPORT_EVERY_S`` seconds, from each query's last
    progress (batch id, input rate, the watermark and open windows of A) and the groups' lag in the log directory.
    """

    LEGEND = (
        f"Progress every {REPORT_EVERY_S:.0f} s. rows/s: the last micro-batch's input rate. lag: log end offsets minus",
        "the group's committed offsets. windows open: (window, country) groups in A's state, waiting for the",
        "watermark. -: no micro-batch done yet (the first one also starts Spark's Python workers: it takes longest).",
    )
    HEADER = (
        "    time  produced |  A: batch  rows/s     lag  windows open  watermark |  B: batch  rows/s   lag",
        "  ------  -------- |  --------  ------  ------  ------------  --------- |  --------  ------  ----",
    )

    def __init__(
        self, store: OffsetStore, producer: OrderProducer, stats: StreamingQuery, to_delta: StreamingQuery
    ) -> None:
        self._store = store
        self._logs = store.log_dir
        self._producer = producer
        self._stats = stats
        self._to_delta = to_delta
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress-report", daemon=True)

    def __enter__(self) -> ProgressReport:
        say()
        for line in self.LEGEND + self.HEADER:
            say(line)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._halt.wait(REPORT_EVERY_S):
            try:
                self.print_line()
            except Exception as error:  # a report missed is no reason to stop the job; the queries' errors are
                say(f"  (no progress this time: {type(error).__name__}: {error})")  # raised by the main thread

    def print_line(self) -> None:
        elapsed = time.monotonic() - self._producer.started
        a_batch, a_rate, open_windows, watermark = "-", "-", "-", "-"
        progress = self._stats.lastProgress
        if progress is not None:
            a_batch, a_rate = f"{progress.batchId:,}", f"{progress.inputRowsPerSecond:,.0f}"
            if progress.stateOperators:
                open_windows = f"{progress.stateOperators[0].numRowsTotal:,}"
            mark = progress.eventTime.get("watermark", "")
            watermark = mark[11:19] if mark and not mark.startswith("1970") else "-"
        b_batch, b_rate = "-", "-"
        progress = self._to_delta.lastProgress
        if progress is not None:
            b_batch, b_rate = f"{progress.batchId:,}", f"{progress.inputRowsPerSecond:,.0f}"
        a_lag = group_lag(self._store, self._logs, STATS_GROUP, ORDERS)
        b_lag = group_lag(self._store, self._logs, DELTA_GROUP, STATS)
        produced = self._producer.sent  # after the lag: the log end it saw cannot be ahead of it
        say(
            f"  {elapsed:>4.0f} s  {produced:>8,} |  {a_batch:>8}  {a_rate:>6}  {a_lag:>6,}  "
            f"{open_windows:>12}  {watermark:>9} |  {b_batch:>8}  {b_rate:>6}  {b_lag:>4,}"
        )


_print_lock = threading.Lock()


def say(line: str = "") -> None:
    """Print a line whole, whichever thread prints."""
    with _print_lock:
        print(line, flush=True)


# -- the run ----------------------------------------------------------------------------------------------------


def shown(path: str) -> str:
    """``path`` relative to the working directory when it is under it, for short commands to copy (a URL as it is)."""
    if "://" in path:
        return path
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


@contextmanager
def stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` while the block runs, so that the JVM started in it (and the Python
    workers it starts) write their log there for good; this process's stderr is restored at the end."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def start_spark(paths: Paths) -> SparkSession:
    """A local SparkSession with Delta Lake, its log in ``paths.spark_log``."""
    conf = {
        "spark.ui.showConsoleProgress": "false",
        # Delta reads a table's log with this many tasks: its default of 50 is for clusters, not two local cores.
        "spark.databricks.delta.snapshotPartitions": "2",
        # A job of a minute or two on two cores spends much of its CPU in the JIT's optimising compiler (C2); the
        # quick one (C1) alone gets Spark's code compiled sooner, and the whole job ends sooner.
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    }
    with stderr_to(paths.spark_log):
        return local_spark("pysparklog-main-job", delta=True, conf=conf)


class NotOurs(Exception):
    """The log directory holds topics that are not the job's: it is not removed."""


def wipe(paths: Paths) -> list[str]:
    """Remove what an earlier run left (log directory, checkpoints, Delta table, Spark's log); returns what was.

    Raises:
        NotOurs: The log directory holds other topics than the job's (``--log-dir`` or ``$PYSPARKLOG_LOG_DIR``
            naming a directory in use): nothing is removed.
    """
    on_object_store = "://" in paths.log_dir
    logs = LogDirectory(paths.log_dir) if on_object_store or os.path.isdir(paths.log_dir) else None
    if logs is not None:
        names = set(logs.topics.names()) | {topic for topic, _ in logs.topic_partitions()}
        others = sorted(n for n in names if n not in (ORDERS, STATS) and not n.startswith("__"))
        if others:
            raise NotOurs(
                f"{shown(paths.log_dir)} holds other topics than the job's ({', '.join(others)}): not removing it. "
                "Run with --keep, or give another --log-dir."
            )
    removed = []
    if on_object_store and logs is not None and logs.storage.list(logs.path):
        logs.storage.delete_tree(logs.path)
        removed.append(paths.log_dir)
    local = [paths.checkpoints, os.path.dirname(paths.delta), paths.spark_log]
    for path in local if on_object_store else [paths.log_dir, *local]:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        else:
            continue
        removed.append(shown(path))
    return removed


def check_running(producer: OrderProducer, queries: list[StreamingQuery]) -> None:
    """Raise what stopped the producer or a query, if anything did."""
    if producer.error is not None:
        raise RuntimeError("the producer failed") from producer.error
    for query in queries:
        if not query.isActive:
            raise RuntimeError(f"query {query.name} stopped") from query.exception()


def report_results(spark: SparkSession, paths: Paths, store: OffsetStore, stats: StreamingQuery) -> None:
    """The Delta table's totals, the topics' record counts, the groups' lag and how the numbers add up."""
    table = spark.read.format("delta").load(paths.delta)
    totals = table.agg(
        F.count("*").alias("rows"),
        F.countDistinct("window_start").alias("windows"),
        F.coalesce(F.sum("orders"), F.lit(0)).alias("orders"),
        F.coalesce(F.sum("revenue"), F.lit(0)).alias("revenue"),
    ).first()
    assert totals is not None
    say(
        f"\nDelta table {shown(paths.delta)}: {totals.rows:,} rows ({totals.windows:,} closed windows x country), "
        f"{totals.orders:,} orders, revenue {totals.revenue:,.2f}"
    )
    by_country = (
        table.groupBy("country")
        .agg(F.sum("orders").alias("orders"), F.sum("revenue").alias("revenue"))
        .orderBy(F.desc("revenue"))
        .collect()
    )
    # Formatted by Spark, in the session's time zone (UTC): Python would show its own local time.
    by_window = (
        table.groupBy("window_start", "window_end")
        .agg(F.sum("orders").alias("orders"), F.sum("revenue").alias("revenue"))
        .orderBy(F.desc("window_start"))
        .limit(len(COUNTRIES))
        .select(
            F.concat_ws("-", F.date_format("window_start", "HH:mm:ss"), F.date_format("window_end", "HH:mm:ss")),
            "orders",
            "revenue",
        )
        .collect()
    )[::-1]
    windows = "per window (UTC)" if totals.windows <= len(COUNTRIES) else f"last {len(COUNTRIES)} windows (UTC)"
    say(f"  per country   orders       revenue     {windows:<20}  orders       revenue")
    for country, window in itertools.zip_longest(by_country, by_window):
        left = f"{country[0]:<10}  {country[1]:>8,}  {country[2]:>12,.2f}" if country else " " * 34
        right = f"{window[0]:<20}  {window[1]:>6,}  {window[2]:>12,.2f}" if window else ""
        say(f"  {left}     {right}".rstrip())

    say('\nTopics (records read back with spark.read.format("pysparklog")):')
    logs = store.log_dir
    counts: dict[str, int] = {}
    for topic, isolation in ((ORDERS, "read_uncommitted"), (STATS, "read_committed")):
        records = (
            spark.read.format("pysparklog")
            .option("subscribe", topic)
            .option("kafka.isolation.level", isolation)
            .load(paths.log_dir)
            .count()
        )
        counts[topic] = records
        ends = end_offsets(logs, topic)
        extra = f", {isolation}; + {sum(ends) - records:,} transaction markers" if sum(ends) != records else ""
        say(f"  {topic:<12} {len(ends)} partitions  {records:>8,} records{extra}")

    say("\nConsumer groups (committed offsets against log end offsets):")
    for group, topic in ((STATS_GROUP, ORDERS), (DELTA_GROUP, STATS)):
        say(f"  {group:<21} on {topic:<12} lag {group_lag(store, logs, group, topic):,}")

    still_open = counts[ORDERS] - int(totals.orders)
    progress = stats.lastProgress
    groups = progress.stateOperators[0].numRowsTotal if progress is not None and progress.stateOperators else 0
    say(
        f"\nEvery order counted once: {totals.orders:,} in the Delta table's closed windows + {still_open:,} in windows"
    )
    say(f"still open ({groups} (window, country) group(s) in query A's state, until later events close them, as a")
    say(f"run with --keep does) = {counts[ORDERS]:,} orders in '{ORDERS}'.")
    say(f"'{STATS}' read_committed holds the same {counts[STATS]:,} rows as the Delta table: each window once.")


def print_where(paths: Paths) -> None:
    """Where everything is, and commands to look at it."""
    log_dir = shown(paths.log_dir)
    cli = (
        "pysparklog"
        if shutil.which("pysparklog")
        else shown(os.path.join(os.path.dirname(sys.executable), "pysparklog"))
    )
    say("\nWhere everything is:")
    say(f"  log directory  {log_dir}  (topics {ORDERS}, {STATS}; group offsets in __consumer_offsets)")
    say(f"  Delta table    {shown(paths.delta)}")
    say(f"  checkpoints    {shown(paths.checkpoint(STATS_QUERY))}, {shown(paths.checkpoint(DELTA_QUERY))}")
    say(f"  Spark's log    {shown(paths.spark_log)}")
    say("Look at them:")
    say(f"  {cli} topics --log-dir {log_dir} --describe --topic {ORDERS}")
    say(f"  {cli} consumer-groups --log-dir {log_dir} --describe --all-groups")
    say(
        f"  {cli} console-consumer --log-dir {log_dir} --topic {STATS} --from-beginning --max-messages 3 "
        "--property print.key=true"
    )
    if "://" not in log_dir:  # on an object store the segments are sealed objects (docs/object-storage.md)
        segment = os.path.join(log_dir, f"{STATS}-0", "00000000000000000000.log")
        say(f"  {cli} dump-log --files {segment} --print-data-log   # records and COMMIT markers")


def log_tail(path: str, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file."""
    with open(path, errors="replace") as log:
        return "".join(log.readlines()[-lines:]).rstrip()


def run(paths: Paths, seconds: float, rate: float) -> int:
    """Produce, stream, catch up, stop, report; the exit status."""
    started = time.monotonic()
    logs = LogDirectory(paths.log_dir)
    logs.topics.create(ORDERS, ORDERS_PARTITIONS, {"compression.type": "zstd"}, if_not_exists=True)
    logs.topics.create(STATS, STATS_PARTITIONS, if_not_exists=True)
    # Every record of orders is an order (no transactions there): the next order's id follows them.
    events = OrderEvents(first_order_id=sum(end_offsets(logs, ORDERS)) + 1)
    producer = OrderProducer(paths.log_dir, seconds, rate, events)
    say(f"Starting Spark (local[2], Delta Lake; the first start fetches Delta's jars; log: {shown(paths.spark_log)})")
    try:
        spark = start_spark(paths)
    except Exception:
        say(f"Spark did not start. The end of its log, {shown(paths.spark_log)}:\n{log_tail(paths.spark_log)}")
        return 1
    queries: list[StreamingQuery] = []
    try:
        say(f"Spark started in {time.monotonic() - started:.0f} s; starting the queries:")
        say(f"  A  {ORDERS} -> {WINDOW_S}-second windows per country -> topic '{STATS}'  (group {STATS_GROUP})")
        say(f"  B  {STATS} (read_committed) -> Delta table                      (group {DELTA_GROUP})")
        stats, to_delta = start_order_stats(spark, paths), start_stats_to_delta(spark, paths)
        queries += [stats, to_delta]
        producer.start()
        topic = f"'{ORDERS}' ({ORDERS_PARTITIONS} partitions, keyed by customer)"
        say(f"Producing about {rate:,.0f} orders/s for {seconds:,.0f} s into {topic}.")
        with OffsetStore(paths.log_dir) as store:
            with ProgressReport(store, producer, stats, to_delta) as report:
                while producer.is_alive():
                    producer.join(0.5)
                    check_running(producer, queries)
                check_running(producer, queries)
                say(
                    f"  producer done: {producer.sent:,} orders, the last one dated "
                    f"{WINDOW_S + WATERMARK_DELAY_S} s ahead to close the windows; catching up"
                )
                stats.processAllAvailable()
                to_delta.processAllAvailable()
            report.print_line()
            for query in queries:
                query.stop()
            report_results(spark, paths, store, stats)
        print_where(paths)
        say(f"\nDone in {time.monotonic() - started:.0f} s.")
        return 0
    finally:
        producer.halt()
        for query in queries:
            if query.isActive:
                query.stop()
        spark.stop()


def positive(text: str) -> float:
    """An argument that must be a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        help="where the checkpoints, the Delta table and Spark's log go (default: ./data of the checkout)",
    )
    parser.add_argument(
        "--log-dir",
        default=os.environ.get("PYSPARKLOG_LOG_DIR"),
        help="the log directory (default: $PYSPARKLOG_LOG_DIR, else DATA_DIR/logs)",
    )
    parser.add_argument("--seconds", type=positive, default=60.0, help="how long the producer runs (default: 60)")
    parser.add_argument("--rate", type=positive, default=1000.0, help="orders a second (default: 1000)")
    parser.add_argument(
        "--keep", action="store_true", help="go on from the previous run's data (by default each run starts clean)"
    )
    args = parser.parse_args(argv)

    data_dir = os.path.abspath(args.data_dir)
    paths = Paths(data_dir, log_location(args.log_dir or os.path.join(data_dir, "logs")))
    if not args.keep:
        try:
            removed = wipe(paths)
        except NotOurs as error:
            print(error, file=sys.stderr)
            return 2
        if removed:
            say(f"Starting clean (--keep keeps them): removed the previous run's {', '.join(removed)}")
    os.makedirs(paths.data_dir, exist_ok=True)
    return run(paths, args.seconds, args.rate)


if __name__ == "__main__":
    raise SystemExit(main())
