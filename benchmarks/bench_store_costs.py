"""What a month of three reference workloads costs in requests on an object store at S3 Standard's prices,
measured at the store: the requests the proxy of ``tests.storage.fault_proxy`` records while every request
waits a real store's round trip (``ROUND_TRIP_MS``, as S3 Standard answers a small request: the producer's
batching and Spark's triggers depend on it).

- **Producer**: a topic of ``PARTITIONS`` partitions written at ``BYTES_PER_SECOND`` by one ``Producer`` with
  Kafka's default batching (``ProducerConfig()``: ``linger.ms`` 5, ``batch.size`` 16 KiB), records of
  ``RECORD_BYTES`` bytes with random 16-byte keys, sent ``RECORDS_PER_TICK`` every ``TICK_SECONDS``, for
  ``SECONDS`` after ``WARM_UP_SECONDS``.
- **Exactly-once copy**: the same producer and, reading its topic, a stream copy (``select key, value``) into
  a topic of as many partitions with the exactly-once sink, ``Trigger.ProcessingTime("1 second")``, for
  ``SECONDS``; the copy's requests are the window's less the producer's alone (the first workload's rate).
- **Idle stream**: the same copy once two triggers in a row found nothing new, for ``SECONDS``: requests per
  second and per trigger (Spark reports every trigger's progress here, an idle one too).

Each is shown as requests per second by method and dollars a month (30 days): PUT, POST and LIST at $0.005
per 1,000, GET and HEAD at $0.0004 per 1,000, DELETE free (S3 Standard's list prices). The replicas of every
process go to one ``$PYSPARKLOG_CACHE_DIR``. ``python -m benchmarks.bench_store_costs`` runs it (about 2.5
minutes), in a child process with a JVM of its own, on all cores.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from benchmarks.common import Result, child_main, local_spark, run_in_child
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.spark.sink_options import DELIVERY_GUARANTEE, DeliveryGuarantee
from pysparklog.storage.io import storage_for
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.objects.log import CACHE_DIR_VARIABLE
from tests.s3_server import Request, StoreProxy, environment, s3_server, store_proxy

BUCKET = "pysparklog-bench-costs"
ROUND_TRIP_MS = 20.0
PARTITIONS = 64
BYTES_PER_SECOND = 1_000_000
RECORD_BYTES = 1000
TICK_SECONDS = 0.01
RECORDS_PER_TICK = int(BYTES_PER_SECOND / RECORD_BYTES * TICK_SECONDS)
SECONDS = 30.0
#: Long enough for the producer to have appended to every partition once (a first append lists its commits).
WARM_UP_SECONDS = 15.0
TRIGGER = "1 second"
#: S3 Standard's list prices per request, in dollars.
PRICES = {"PUT": 0.005 / 1000, "POST": 0.005 / 1000, "LIST": 0.005 / 1000, "GET": 0.0004 / 1000, "HEAD": 0.0004 / 1000}
SECONDS_PER_MONTH = 30 * 24 * 3600
_MODULE = "benchmarks.bench_store_costs"
_WAIT_SECONDS = 180.0


def _method(request: Request) -> str:
    """The method a store bills a request as: a listing is a GET with ``list-type`` in its query."""
    return "LIST" if request.method == "GET" and "list-type" in request.query else request.method


def _rates(requests: Sequence[Request], seconds: float) -> Counter[str]:
    """Requests per second, by billed method."""
    counts = Counter(_method(r) for r in requests)
    return Counter({method: n / seconds for method, n in counts.items()})


def _figure(rates: Counter[str]) -> str:
    """``N requests/s (by method), $M a month``."""
    total = sum(rates.values())
    dollars = sum(rate * PRICES.get(method, 0.0) for method, rate in rates.items()) * SECONDS_PER_MONTH
    by_method = ", ".join(f"{rate:.1f} {method}" for method, rate in sorted(rates.items()) if rate >= 0.05)
    return f"{total:.1f} requests/s ({by_method or 'none'}), ${dollars:,.0f} a month"


@contextmanager
def _producing(url: str, topic: str) -> Iterator[None]:
    """A producer writing ``BYTES_PER_SECOND`` into ``topic`` on a thread of its own, meanwhile."""
    stop = threading.Event()
    rng = np.random.default_rng(7)

    def produce() -> None:
        with Producer(url, ProducerConfig()) as producer:
            next_tick = time.monotonic()
            while not stop.is_set():
                raw = rng.bytes(16 * RECORDS_PER_TICK)
                keys = pa.array([raw[i : i + 16] for i in range(0, len(raw), 16)], pa.binary())
                values = pa.array([b"v" * RECORD_BYTES] * RECORDS_PER_TICK, pa.binary())
                producer.send_arrow(topic, pa.table({"key": keys, "value": values}))
                next_tick += TICK_SECONDS
                time.sleep(max(0.0, next_tick - time.monotonic()))

    thread = threading.Thread(target=produce, name="producer", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)


def _window(proxy: StoreProxy) -> tuple[list[Request], float]:
    """The requests of the next ``SECONDS``, and the seconds they took."""
    before, started = proxy.mark(), time.monotonic()
    time.sleep(SECONDS)
    return proxy.requests(since=before), time.monotonic() - started


def _copy(spark: SparkSession, url: str, checkpoint: str) -> StreamingQuery:
    """The exactly-once stream copy of ``in`` into ``out``."""
    source = spark.readStream.format("pysparklog").option("subscribe", "in").option("startingOffsets", "latest")
    return (
        source.load(url)
        .select("key", "value")
        .writeStream.format("pysparklog")
        .option("topic", "out")
        .option(DELIVERY_GUARANTEE, DeliveryGuarantee.EXACTLY_ONCE.value)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=TRIGGER)
        .start(url)
    )


def _wait_for_progress(query: StreamingQuery, batches: int) -> None:
    """Wait until the query has reported ``batches`` micro-batches with records."""
    deadline = time.monotonic() + _WAIT_SECONDS
    while sum(1 for p in query.recentProgress if p["numInputRows"]) < batches:
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the copy did not make progress: {query.exception()}")
        time.sleep(0.2)


def _wait_until_idle(query: StreamingQuery) -> None:
    """Wait until two triggers in a row found nothing new: the copy has caught up with the producer."""
    deadline = time.monotonic() + _WAIT_SECONDS
    while [p["numInputRows"] for p in query.recentProgress[-2:]] != [0, 0]:
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the copy did not catch up: {query.exception()}")
        time.sleep(0.2)


def _measure() -> list[Result]:
    work = tempfile.mkdtemp(prefix="pysparklog-bench-costs-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        with (
            environment({CACHE_DIR_VARIABLE: os.path.join(work, "replicas")}),
            s3_server(BUCKET, Path(work) / "moto.log") as server,
            store_proxy(server, delay_ms=ROUND_TRIP_MS) as proxy,
            environment({"AWS_ENDPOINT_URL": proxy.endpoint}),  # for Spark's processes
        ):
            url = f"s3://{BUCKET}/costs"
            logs = LogDirectory(storage_for(url, {"aws_endpoint": proxy.endpoint}))
            logs.topics.create("in", PARTITIONS)
            logs.topics.create("out", PARTITIONS)
            # Progress at every trigger, an idle one too, so that the idle window's triggers can be counted.
            no_data_progress = {"spark.sql.streaming.noDataProgressEventInterval": "0"}
            spark = local_spark("pysparklog-bench-costs", 2, conf=no_data_progress)
            try:
                with _producing(url, "in"):
                    time.sleep(WARM_UP_SECONDS)  # the producer's first append to each partition finds its end
                    produced = _window(proxy)
                    query = _copy(spark, url, os.path.join(work, "checkpoint"))
                    _wait_for_progress(query, 2)
                    copying = _window(proxy)
                _wait_until_idle(query)
                triggers = len(query.recentProgress)
                idle = _window(proxy)
                idle_triggers = len(query.recentProgress) - triggers
                query.stop()
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    producer_rates = _rates(*produced)
    copy_rates = _rates(*copying)
    copy_rates.subtract(producer_rates)
    shape = f"{PARTITIONS} partitions, {BYTES_PER_SECOND / 1e6:.0f} MB/s of {RECORD_BYTES}-byte records"
    return [
        Result(
            f"store costs, {ROUND_TRIP_MS:.0f} ms a request: a producer, default batching, {shape}",
            _figure(producer_rates),
        ),
        Result(f"store costs: the same copied by an exactly-once stream, {TRIGGER} trigger", _figure(+copy_rates)),
        Result(
            f"store costs: an idle stream of the {PARTITIONS}-partition topic, {TRIGGER} trigger",
            f"{_figure(_rates(*idle))}; {len(idle[0]) / max(idle_triggers, 1):.0f} requests per trigger "
            f"({idle_triggers} triggers)",
        ),
    ]


def run() -> list[Result]:
    """The measurements, in a child process on all cores with a JVM of its own."""
    return run_in_child(_MODULE)


def main() -> None:
    child_main(_MODULE, os.cpu_count() or 1, _measure)


if __name__ == "__main__":
    main()
