"""The Kafka protocol endpoint against a real Kafka broker: the same client, the same records, in one run.

A single-node Kafka 4.2 broker (KRaft, on loopback, its jars from Maven Central: ``tests/interop/kafka_broker.py``,
the broker ``make bench-peer`` measures against) and ``pysparklog serve`` over a log directory (its own process, as
the broker is) run side by side, both on tmpfs when the machine has one, on the machine's cores, which the
client shares. The client is confluent-kafka (librdkafka), the same on both sides with the same settings; each
side gets a new 2-partition topic per repeat, made through the admin API, and the same records (10-byte keys,
100-byte values, ``benchmarks.common.records_table``). Ratios are the endpoint's figure over the broker's, from
the same run; each measurement alternates between the sides and is the median of its repeats.

- **Produce throughput**: ``acks=all``, librdkafka's defaults otherwise (``linger.ms`` 5, batches up to 1 MB),
  every record produced then ``flush()``: from the first ``produce`` to the last acknowledgement.
- **Produce latency**: one record at a time, ``linger.ms`` 0, ``acks=all``, each waited for (``flush()``): the
  median and 99th percentile of the round trips after a warm-up.
- **Consume throughput**: a consumer assigned both partitions from offset 0 reads every record just produced
  (``consume`` of up to 10,000 at a time).

``python -m benchmarks.bench_endpoint`` runs it (part of ``make bench``); ``--records`` sizes the throughput runs.
It needs ``java`` and ``mvn`` on PATH (the broker's jars) and kio (the ``serve`` extra, Python 3.11 and later).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, Result, child_arguments, child_main, records_table, run_in_child

_MODULE = "benchmarks.bench_endpoint"
DEFAULT_RECORDS = 500_000
REPEATS = 3
LATENCY_SENDS = 300
LATENCY_WARMUP = 30
PARTITIONS = 2
TIMEOUT_S = 120.0
#: What ``pysparklog serve`` prints once it listens: ``serving <dir> on <host>:<port> as <host>:<port>``.
_SERVING = re.compile(rb"serving .* as (?P<address>\S+:\d+)")


@contextmanager
def _endpoint(log_dir: Path, stderr: Path) -> Iterator[str]:
    """``pysparklog serve`` over ``log_dir`` in a process of its own, on a free loopback port; yields its address."""
    command = [sys.executable, "-m", "pysparklog.cli.main", "serve", "--log-dir", str(log_dir), "--listen"]
    with open(stderr, "wb") as errors:
        process = subprocess.Popen([*command, "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=errors, cwd=REPO)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = _SERVING.search(line)
        if found is None:
            raise RuntimeError(f"pysparklog serve did not start: {stderr.read_text(errors='replace')[-2000:]}")
        yield found["address"].decode()
    finally:
        process.terminate()
        process.wait(30)


def _scratch_root() -> str:
    shm = "/dev/shm"
    return tempfile.mkdtemp(prefix="pysparklog-bench-endpoint-", dir=shm if os.access(shm, os.W_OK) else None)


class _Side:
    """One server as the client sees it: a bootstrap address, a new topic per measurement."""

    def __init__(self, name: str, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.name = name
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def new_topic(self) -> str:
        from confluent_kafka.cimpl import NewTopic

        topic = f"bench-{uuid.uuid4().hex[:8]}"
        for future in self.admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            future.result(TIMEOUT_S)
        return topic

    def producer(self, **settings: Any) -> Any:
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "acks": "all", **settings})


def _produce_all(side: _Side, topic: str, keys: list[bytes], values: list[bytes]) -> float:
    """Seconds to produce every record and have it acknowledged."""
    producer = side.producer()
    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    start = time.perf_counter()
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        while True:
            try:
                producer.produce(topic, value, key, partition=i % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S) != 0 or failures:
        raise RuntimeError(f"{side.name}: {len(failures)} records failed ({failures[:3]}) or were not sent")
    return time.perf_counter() - start


def _consume_all(side: _Side, topic: str, expected: int) -> float:
    """Seconds to read ``expected`` records from both partitions' starts."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": side.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen = 0
        start = time.perf_counter()
        deadline = start + TIMEOUT_S
        while seen < expected:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{side.name}: {seen} of {expected} records read in {TIMEOUT_S:.0f} s")
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def _latencies(side: _Side, topic: str, value: bytes) -> list[float]:
    """Milliseconds of each one-record produce round trip after the warm-up."""
    producer = side.producer(**{"linger.ms": 0})
    times = []
    for i in range(LATENCY_WARMUP + LATENCY_SENDS):
        start = time.perf_counter()
        producer.produce(topic, value, partition=i % PARTITIONS)
        if producer.flush(TIMEOUT_S) != 0:
            raise RuntimeError(f"{side.name}: a record was not acknowledged in {TIMEOUT_S:.0f} s")
        times.append((time.perf_counter() - start) * 1000)
    return times[LATENCY_WARMUP:]


def _alternating(sides: list[_Side], measure: Callable[[_Side], float]) -> dict[str, list[float]]:
    """``measure`` of each side, ``REPEATS`` times, the sides taking turns (who goes first alternates too)."""
    figures: dict[str, list[float]] = {side.name: [] for side in sides}
    for repeat in range(REPEATS):
        for side in sides if repeat % 2 == 0 else reversed(sides):
            figures[side.name].append(measure(side))
    return figures


def _measure(records: int) -> list[Result]:
    from tests.interop.kafka_broker import KafkaBroker

    table = records_table(records)
    keys = [bytes(k) for k in table.column("key").to_pylist()]
    values = [bytes(v) for v in table.column("value").to_pylist()]
    root = Path(_scratch_root())
    try:
        with KafkaBroker.started(root / "broker") as broker, _endpoint(root / "logs", root / "serve.log") as address:
            kafka = _Side("broker", broker.bootstrap_server)
            endpoint = _Side("endpoint", address)
            sides = [kafka, endpoint]
            topics: dict[str, list[str]] = {side.name: [] for side in sides}

            def produce(side: _Side) -> float:
                topic = side.new_topic()
                topics[side.name].append(topic)
                return _produce_all(side, topic, keys, values)

            produced = _alternating(sides, produce)
            consumed = _alternating(sides, lambda side: _consume_all(side, topics[side.name].pop(), records))
            latencies = {side.name: _latencies(side, side.new_topic(), values[0]) for side in sides}
            del kafka, endpoint, sides
            gc.collect()  # the clients go before their servers do, or they retry to connect meanwhile
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return _results(records, produced, consumed, latencies)


def _results(
    records: int, produced: dict[str, list[float]], consumed: dict[str, list[float]], latencies: dict[str, list[float]]
) -> list[Result]:
    def rate(seconds: list[float]) -> float:
        return records / statistics.median(seconds)

    produce_ratio = rate(produced["endpoint"]) / rate(produced["broker"])
    consume_ratio = rate(consumed["endpoint"]) / rate(consumed["broker"])
    p50 = {name: statistics.median(times) for name, times in latencies.items()}
    p99 = {name: statistics.quantiles(times, n=100)[98] for name, times in latencies.items()}
    what = (
        f"endpoint: confluent-kafka, {records:,} records (10-byte keys, 100-byte values) over {PARTITIONS} partitions"
    )
    return [
        Result(
            f"{what}, produced with acks=all, against a Kafka 4.2 broker",
            f"{rate(produced['endpoint']) / 1e6:.2f} M rec/s against {rate(produced['broker']) / 1e6:.2f} M rec/s "
            f"({produce_ratio:.2f}x)",
            ">= 0.5x",
            produce_ratio >= 0.5,
        ),
        Result(
            "endpoint: one-record produce round trip, acks=all, linger.ms 0, against the broker's",
            f"p50 {p50['endpoint']:.2f} ms (p99 {p99['endpoint']:.2f}) against p50 {p50['broker']:.2f} ms "
            f"(p99 {p99['broker']:.2f})",
            "p50 <= broker + 2 ms",
            p50["endpoint"] <= p50["broker"] + 2,
        ),
        Result(
            f"{what}, consumed from offset 0, against the broker",
            f"{rate(consumed['endpoint']) / 1e6:.2f} M rec/s against {rate(consumed['broker']) / 1e6:.2f} M rec/s "
            f"({consume_ratio:.2f}x)",
            ">= 0.7x",
            consume_ratio >= 0.7,
        ),
    ]


def run() -> list[Result]:
    """The measurements, in a child process on all cores."""
    return run_in_child(_MODULE)


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description=__doc__)
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records per throughput run")
    arguments = parser.parse_args(child_arguments())
    child_main(_MODULE, os.cpu_count() or 1, lambda: _measure(arguments.records))


if __name__ == "__main__":
    main()
