"""What a user's calls cost on an object store whose every request takes a real store's round trip: latency and
the requests the store is asked, side by side, against the same calls on a log directory on local disk.

moto on loopback answers in about a millisecond and bills nothing; S3 Standard answers in about 20 ms, S3
Express One Zone in about 5, and each request is billed. Here Spark's processes and the writers this part
spawns reach moto through the proxy of ``tests.storage.fault_proxy`` (``tests.s3_server.store_proxy``), found
through the ``AWS_*`` variables set before the SparkSession starts: it delays every request by the round trip
(half on the way there, half on the way back) and records it. Each round trip (``--round-trip-ms``, 20 and 5
by default) gets log directories of its own in the bucket, set up and warmed up without delay; the delay is on
while their calls are measured. This process reaches a log directory through the proxy when its own calls are
measured (the sends, the end-to-end copy's producer), and straight otherwise (set-up, the records the copies
copy), so that the requests counted are those of what is measured. The replicas of every process go to one
``$PYSPARKLOG_CACHE_DIR`` on tmpfs, where the local log directories are too. The first round trip measures
topics of 4 and 64 partitions, the others 4 only: the requests do not depend on the delay, and the 64-partition
rows take most of the part's time.

- **Producer send**: ``Producer(log_dir, ProducerConfig(linger_ms=0)).send(topic, value=..., key=...).get()`` of
  a 100-byte value and a 10-byte key into a 1-partition topic, ``SENDS`` times (or as many as ``SEND_SECONDS``
  allow) after ``WARM_UP_SENDS``: p50 and p99, and the requests per send by method.
- **Batch read**: ``spark.read.format("pysparklog").option("subscribe", topic).load(url).count()`` of a topic of
  ``RECORDS_PER_PARTITION`` records per partition: the second read (the first built the replicas), its wall
  time and its requests.
- **Idle trigger**: a stream copy (``select key, value`` into another topic of as many partitions, exactly-once
  sink), ``Trigger.ProcessingTime`` of ``TRIGGER``, with Spark reporting every trigger's progress
  (``spark.sql.streaming.noDataProgressEventInterval`` 0). The requests between the ends of two consecutive
  triggers, found by polling the query's last progress, are the second one's. ``IDLE_TRIGGERS`` triggers with
  nothing new (as many as ``IDLE_SECONDS`` allow, at least one): requests per trigger, median
  ``triggerExecution``.
- **One-record micro-batch**: the same query; after a trigger this process appends one record to the copy's
  input, and the trigger that copies it is measured together with the next one, where Spark calls the source's
  ``commit`` of that micro-batch: their requests less an idle trigger's, ``ONE_RECORD_BATCHES`` times (as many
  as ``ONE_RECORD_SECONDS`` allow, at least one) after one without delay, which starts the sink's Python
  workers; median ``triggerExecution`` of the copying trigger.
- **End to end**: ``bench_peer``'s stream copy (one partition, exactly-once sink into a ``LogAppendTime`` topic,
  default trigger) with a producer sending one record every 100 ms, ``LATENCY_RECORDS`` after its warm-up
  records: p50 and p99 of the copy's log-append time less the record's CreateTime. On local disk and at the
  first round trip.
- **Racing writers**: ``bench_object_store``'s round of ``RACING_WRITERS`` writer processes appending to one
  partition (``ObjectPartitionLog.append_arrow`` of 148 records), ``RACING_APPENDS`` each after 10 warm-up
  appends: p50 and p99 of an append, retries included, and the requests per append (moto's access log).

``python -m benchmarks.bench_store_latency [--round-trip-ms 20 5] [--requests]`` runs it; ``--requests`` also
prints which requests a send, a batch read, an idle trigger and a one-record micro-batch made, by method and key
(commit numbers, ids and partitions elided) with their statuses. It runs in a child process with a JVM of its
own, on all cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from benchmarks.bench_object_store import BUCKET, RECORDS_PER_APPEND, _append_round
from benchmarks.bench_peer import LATENCY_WARM_UP_RECORDS, _Pysparklog, _Run
from benchmarks.bench_source import write_topic
from benchmarks.common import Result, child_arguments, child_main, local_spark, records_table, run_in_child
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.spark.sink_options import DELIVERY_GUARANTEE, DeliveryGuarantee
from pysparklog.storage.io import storage_for
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.objects.log import CACHE_DIR_VARIABLE
from tests.s3_server import Request, StoreProxy, s3_server, store_proxy, summarise

#: S3 Standard's round trip, then S3 Express One Zone's, in ms.
ROUND_TRIPS_MS = (20.0, 5.0)
SLOTS = 2
SENDS = 200
SEND_SECONDS = 15.0
WARM_UP_SENDS = 10
#: The topics' partitions of the reads and copies; the round trips after the first measure the first only.
PARTITIONS = (4, 64)
RECORDS_PER_PARTITION = 10
TRIGGER = "1 second"
IDLE_TRIGGERS = 3
IDLE_SECONDS = 10.0
ONE_RECORD_BATCHES = 3
ONE_RECORD_SECONDS = 12.0
LATENCY_RECORDS = 30
RACING_WRITERS = 4
RACING_APPENDS = 10
_MODULE = "benchmarks.bench_store_latency"
_TOPIC = "sends"
_KEY = b"0123456789"
_VALUE = b"v" * 100
_POLL_SECONDS = 0.01
_WAIT_SECONDS = 120.0


# -- the log directories -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Store:
    """Where log directories are measured: local disk (``proxy`` None), or the bucket at a round trip.

    Attributes:
        name: As the rows name it.
        root: A local directory, or the bucket's URL with a prefix of this round trip's.
        proxy: The proxy every request of Spark's processes goes through.
        server: moto's endpoint, for this process's requests that are not measured.
        round_trip_ms: The delay of every request through the proxy while a call is measured.
        partitions: The topics' partitions of its reads and copies.
        end_to_end: Whether the end-to-end copy is measured on it.
    """

    name: str
    root: str
    proxy: StoreProxy | None = None
    server: str = ""
    round_trip_ms: float = 0.0
    partitions: tuple[int, ...] = PARTITIONS
    end_to_end: bool = True

    def log_dir(self, name: str, *, measured: bool) -> str:
        """The URL of the log directory ``name``, which this process reaches through the proxy if ``measured``,
        else straight (every later ``storage_for`` of it in this process gets the same)."""
        url = f"{self.root}/{name}"
        if self.proxy is not None:
            storage_for(url, {"aws_endpoint": self.proxy.endpoint if measured else self.server})
        return url

    def mark(self) -> int:
        return self.proxy.mark() if self.proxy is not None else 0

    def requests(self, since: int) -> list[Request]:
        return self.proxy.requests(since) if self.proxy is not None else []

    @contextmanager
    def delayed(self) -> Iterator[None]:
        """Every request delayed by the round trip meanwhile; not before nor after, for set-up."""
        if self.proxy is not None:
            self.proxy.set_delay(self.round_trip_ms)
        try:
            yield
        finally:
            if self.proxy is not None:
                self.proxy.set_delay(0)


@dataclass(frozen=True, slots=True)
class _Printer:
    """What ``--requests`` prints: which requests one of each kind of call made."""

    enabled: bool

    def show(self, store: _Store, what: str, requests: Sequence[Request]) -> None:
        if self.enabled and store.proxy is not None:
            print(f"\n{store.name}, {what}:\n{summarise(requests, by_partition=False)}", flush=True)


def _per(requests: Sequence[Request], times: float) -> str:
    """The requests per time, by method (``1.0 GET, 2.0 PUT``), or ``none``."""
    methods = Counter(r.method for r in requests)
    return ", ".join(f"{n / times:.1f} {method}" for method, n in sorted(methods.items())) or "none"


def _requests_figure(requests: Sequence[Request], times: float, what: str) -> str:
    """``; N requests per <what> (by method)``, or nothing on local disk."""
    return f"; {len(requests) / times:.1f} requests per {what} ({_per(requests, times)})" if requests else ""


def _quantile_ms(seconds: Sequence[float], percent: int) -> float:
    return statistics.quantiles(seconds, n=100, method="inclusive")[percent - 1] * 1000


# -- producer sends ----------------------------------------------------------------------------------------------


def _sends(store: _Store, printer: _Printer) -> Result:
    """``Producer.send(...).get()`` with ``linger.ms`` 0: p50, p99 and the requests per send."""
    url = store.log_dir("sends", measured=True)
    LogDirectory(url).topics.create(_TOPIC, 1)
    producer = Producer(url, ProducerConfig(linger_ms=0))
    try:
        for _ in range(WARM_UP_SENDS):
            producer.send(_TOPIC, value=_VALUE, key=_KEY).get()
        with store.delayed():
            before = store.mark()
            seconds: list[float] = []
            deadline = time.perf_counter() + SEND_SECONDS
            while len(seconds) < SENDS and time.perf_counter() < deadline:
                started = time.perf_counter()
                producer.send(_TOPIC, value=_VALUE, key=_KEY).get()
                seconds.append(time.perf_counter() - started)
            requests = store.requests(before)
            before = store.mark()
            producer.send(_TOPIC, value=_VALUE, key=_KEY).get()
            printer.show(store, "one producer send", store.requests(before))
    finally:
        producer.close()
    return Result(
        f"store latency, {store.name}: `Producer.send(...).get()` of one record, `linger.ms` 0 ({len(seconds)} sends)",
        f"p50 {_quantile_ms(seconds, 50):.1f} ms, p99 {_quantile_ms(seconds, 99):.1f} ms"
        + _requests_figure(requests, len(seconds), "send"),
    )


# -- batch reads -------------------------------------------------------------------------------------------------


def _batch_reads(spark: SparkSession, store: _Store, printer: _Printer) -> list[Result]:
    """A batch read's ``count()`` of an unchanged topic, the second time (the first, without delay, built the
    replicas), at each of the store's partition counts."""
    rows = []
    for partitions in store.partitions:
        url, topic = store.log_dir(f"reads{partitions}", measured=False), "read"
        records = partitions * RECORDS_PER_PARTITION
        write_topic(LogDirectory(url), topic, records_table(records), partitions)
        spark.read.format("pysparklog").option("subscribe", topic).load(url).count()
        with store.delayed():
            before = store.mark()
            started = time.perf_counter()
            counted = spark.read.format("pysparklog").option("subscribe", topic).load(url).count()
            seconds = time.perf_counter() - started
            requests = store.requests(before)
        printer.show(store, f"the second batch read of a {partitions}-partition topic", requests)
        if counted != records:
            raise AssertionError(f"{store.name}: {counted} records counted in {url}, not {records}")
        rows.append(
            Result(
                f"store latency, {store.name}: batch read `count()` of an unchanged {partitions}-partition topic "
                f"({RECORDS_PER_PARTITION} records each), the second read",
                f"{seconds * 1000:.0f} ms" + _requests_figure(requests, 1, "read"),
            )
        )
    return rows


# -- stream copies -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Trigger:
    """One trigger of a streaming query: its progress, and the requests made since the one before ended."""

    progress: Any
    requests: list[Request]

    @property
    def rows(self) -> int:
        return int(self.progress["numInputRows"])

    @property
    def milliseconds(self) -> float:
        return float(self.progress["durationMs"]["triggerExecution"])


class _Triggers:
    """A running query's triggers one after the other, each with the requests made since the one before ended.

    The query's last progress is polled; when it changed, every progress since the last one handed out is taken
    from its recent progress, as a trigger that found nothing new can end a few milliseconds after a long one and
    replace it before a poll. Such triggers, ended within one poll, are handed out in order, the requests made
    meanwhile with the first.
    """

    def __init__(self, query: StreamingQuery, store: _Store) -> None:
        self.query = query
        self.store = store
        self.seen: str | None = None  # the timestamp of the last progress handed out
        self.pending: deque[Any] = deque()
        self.mark = store.mark()
        self.next()

    def _new(self) -> list[Any]:
        """The progresses after the last one handed out, once there is one."""
        deadline = time.monotonic() + _WAIT_SECONDS
        while (last := self.query.lastProgress) is None or last["timestamp"] == self.seen:
            if self.query.exception() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the copy query made no progress: {self.query.exception()}")
            time.sleep(_POLL_SECONDS)
        recent = self.query.recentProgress
        stamps = [p["timestamp"] for p in recent]
        return recent[stamps.index(self.seen) + 1 :] if self.seen in stamps else recent

    def _taken(self) -> list[Request]:
        requests = self.store.requests(self.mark)
        self.mark += len(requests)
        return requests

    def next(self) -> _Trigger:
        requests = []
        if not self.pending:
            self.pending.extend(self._new())
            requests = self._taken()
        progress = self.pending.popleft()
        self.seen = progress["timestamp"]
        return _Trigger(progress, requests)

    def next_with_rows(self) -> list[_Trigger]:
        """The triggers up to the next one that had rows, then the one after it."""
        deadline = time.monotonic() + _WAIT_SECONDS
        triggers = [self.next()]
        while triggers[-1].rows == 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"the copy query read no record in {_WAIT_SECONDS:.0f} s")
            triggers.append(self.next())
        return [*triggers, self.next()]


def _copy_query(spark: SparkSession, url: str, partitions: int, checkpoint: str) -> StreamingQuery:
    """An exactly-once stream copy of the topic ``in`` into ``out``, both created here with ``partitions``."""
    logs = LogDirectory(url)
    logs.topics.create("in", partitions)
    logs.topics.create("out", partitions)
    stream = spark.readStream.format("pysparklog").option("subscribe", "in").load(url).select("key", "value")
    writer = stream.writeStream.format("pysparklog").option("path", url).option("topic", "out")
    writer = writer.option(DELIVERY_GUARANTEE, DeliveryGuarantee.EXACTLY_ONCE.value)
    return writer.option("checkpointLocation", checkpoint).trigger(processingTime=TRIGGER).start()


def _until(seconds: float, most: int) -> Iterator[int]:
    """0, 1, ... up to ``most`` times, while less than ``seconds`` have passed since the first: at least once."""
    deadline = time.monotonic() + seconds
    for n in range(most):
        if n and time.monotonic() > deadline:
            return
        yield n


def _copies(spark: SparkSession, store: _Store, scratch: str, printer: _Printer) -> list[Result]:
    """Idle triggers and one-record micro-batches of an exactly-once stream copy, at each of the store's partition
    counts. The query starts, and copies a first record (which starts the sink's Python workers), without delay;
    the delay is on from the end of a trigger, a second before the next starts. The records to copy are appended
    by this process straight to the store: none of their requests is counted."""
    rows = []
    for partitions in store.partitions:
        url = store.log_dir(f"copies{partitions}", measured=False)
        producer = Producer(url, ProducerConfig(linger_ms=0))
        query = _copy_query(spark, url, partitions, os.path.join(scratch, f"copy-{store.round_trip_ms:g}-{partitions}"))
        try:
            triggers = _Triggers(query, store)
            producer.send("in", value=_VALUE, key=_KEY).get()
            triggers.next_with_rows()
            with store.delayed():
                idle = [triggers.next() for _ in _until(IDLE_SECONDS, IDLE_TRIGGERS)]
                batches = []
                for n in _until(ONE_RECORD_SECONDS, ONE_RECORD_BATCHES):
                    producer.send("in", value=_VALUE, key=b"%010d" % n).get()
                    batches.append(triggers.next_with_rows())
        finally:
            query.stop()
            producer.close()
        if any(t.rows for t in idle):
            raise AssertionError(f"{store.name}: an idle trigger of the copy had rows")
        idle_requests = [r for t in idle for r in t.requests]
        # The trigger that copied the record and the one after it, less an idle trigger's share.
        batch_requests = [[r for t in batch[-2:] for r in t.requests] for batch in batches]
        idle_methods = Counter(r.method for r in idle_requests)
        batch_methods = Counter(r.method for requests in batch_requests for r in requests)
        beyond = {
            m: batch_methods[m] / len(batches) - idle_methods[m] / len(idle) for m in batch_methods | idle_methods
        }
        by_method = ", ".join(f"{n:.1f} {method}" for method, n in sorted(beyond.items()))
        printer.show(store, f"an idle trigger of the copy, {partitions} partitions", idle[-1].requests)
        printer.show(
            store,
            f"a one-record micro-batch of the copy with the trigger after it, {partitions} partitions",
            batch_requests[-1],
        )
        rows += [
            Result(
                f"store latency, {store.name}: an idle trigger of an exactly-once stream copy, {partitions} "
                f"partitions (`processingTime` {TRIGGER}; {len(idle)} triggers)",
                f"triggerExecution {statistics.median(t.milliseconds for t in idle):.0f} ms"
                + _requests_figure(idle_requests, len(idle), "trigger"),
            ),
            Result(
                f"store latency, {store.name}: a one-record micro-batch of the same copy, {partitions} partitions "
                f"({len(batches)} micro-batches)",
                f"triggerExecution {statistics.median(batch[-2].milliseconds for batch in batches):.0f} ms"
                + (
                    f"; {sum(beyond.values()):.1f} requests beyond an idle trigger's ({by_method})"
                    if store.proxy is not None
                    else ""
                ),
            ),
        ]
    return rows


# -- end to end and racing writers -------------------------------------------------------------------------------


def _end_to_end(spark: SparkSession, store: _Store, scratch: str) -> Result:
    """``bench_peer``'s end-to-end latency of a one-partition exactly-once stream copy."""
    side = _Pysparklog(store.log_dir("end-to-end", measured=True))
    checkpoints = os.path.join(scratch, f"end-to-end-{store.round_trip_ms:g}")
    try:
        with store.delayed():
            milliseconds, _ = _Run(spark, checkpoints).latencies(side, LATENCY_RECORDS + LATENCY_WARM_UP_RECORDS)
    finally:
        side.close()
    seconds = [float(ms) / 1000 for ms in milliseconds]
    return Result(
        f"store latency, {store.name}: end to end, one record per 100 ms through an exactly-once stream copy "
        f"({len(milliseconds)} records)",
        f"p50 {_quantile_ms(seconds, 50):.0f} ms, p99 {_quantile_ms(seconds, 99):.0f} ms",
    )


def _racing(store: _Store, scratch: str, server_log: Path) -> Result:
    """``bench_object_store``'s round of writers racing for one partition, every request delayed."""
    root = store.root.removeprefix(f"s3://{BUCKET}/") + "/racing"
    with store.delayed():
        round_ = _append_round(scratch, server_log, root, [0] * RACING_WRITERS, RACING_APPENDS)
    appends = len(round_.seconds)
    per = ", ".join(f"{n / appends:.1f} {method}" for method, n in sorted(round_.requests.items()))
    return Result(
        f"store latency, {store.name}: {RACING_WRITERS} writer processes racing for one partition, "
        f"`append_arrow` of {RECORDS_PER_APPEND} records ({RACING_APPENDS} appends each)",
        f"p50 {round_.quantile_ms(50):.0f} ms, p99 {round_.quantile_ms(99):.0f} ms; "
        f"{sum(round_.requests.values()) / appends:.1f} requests per append ({per})",
    )


# -- the part ----------------------------------------------------------------------------------------------------


def _measure(round_trips_ms: Sequence[float], printer: _Printer) -> list[Result]:
    scratch = tempfile.mkdtemp(
        prefix="pysparklog-bench-latency-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
    )
    os.environ[CACHE_DIR_VARIABLE] = os.path.join(scratch, "replicas")
    server_log = Path(scratch) / "moto.log"
    try:
        with s3_server(BUCKET, server_log) as server, store_proxy(server, Path(scratch) / "proxy.log") as proxy:
            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint  # Spark's processes and spawned writers: restored on exit
            first, *others = round_trips_ms
            stores = [
                _Store("local disk", os.path.join(scratch, "local")),
                _Store(f"s3 at {first:g} ms", f"s3://{BUCKET}/rt{first:g}", proxy, server, first),
            ] + [
                _Store(f"s3 at {ms:g} ms", f"s3://{BUCKET}/rt{ms:g}", proxy, server, ms, PARTITIONS[:1], False)
                for ms in others
            ]
            spark = local_spark(
                "pysparklog-bench-store-latency", SLOTS, conf={"spark.sql.streaming.noDataProgressEventInterval": "0"}
            )
            try:
                results = []
                for store in stores:
                    results.append(_sends(store, printer))
                    results += _batch_reads(spark, store, printer)
                    results += _copies(spark, store, scratch, printer)
                    if store.end_to_end:
                        results.append(_end_to_end(spark, store, scratch))
                    if store.proxy is not None:
                        results.append(_racing(store, scratch, server_log))
            finally:
                spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--round-trip-ms",
        type=float,
        nargs="+",
        default=list(ROUND_TRIPS_MS),
        help="the round trips of the store to measure, in ms (default: 20, S3 Standard's, and 5, S3 Express's)",
    )
    parser.add_argument(
        "--requests", action="store_true", help="print which requests a send, a trigger and a micro-batch made"
    )
    return parser.parse_args(child_arguments())


def run() -> list[Result]:
    """The measurements, in a child process on all cores with a JVM of its own."""
    return run_in_child(_MODULE)


def main() -> None:
    arguments = _arguments()
    child_main(_MODULE, os.cpu_count() or 1, lambda: _measure(arguments.round_trip_ms, _Printer(arguments.requests)))


if __name__ == "__main__":
    main()
