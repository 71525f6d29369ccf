"""What the examples share, so that no two of them carry the same code.

* **Where they keep their data.** Each example writes under ``data/examples/<name>/`` in the checkout
  (``/data/`` is git-ignored): the log directory in ``logs/`` and, for the examples that need one, their
  Spark checkpoints, Delta tables and plots in ``work/``. Both are deleted and re-created at the start of a
  run, so a run never sees the previous one's records; a directory the examples did not make is refused
  rather than deleted (``fresh_dir``).
* **Their command line** (``example_parser``): ``--log-dir`` and ``--work-dir`` to put those elsewhere.
* **The Spark session** (``spark_session``): ``pysparklog.spark.session.local_spark`` without the console
  progress bars (they would bury the printed results), with its SQL warehouse under ``data/examples`` and, with
  Delta, with Delta's snapshot reconstruction on two partitions instead of 50 (the example tables are tiny; 50
  tasks on two cores cost seconds per read).
* **Order events** (``order_events``): a deterministic stream of orders changing status, keyed by order id,
  so an example that deduplicates by key knows what the latest state of each order must be.
* **Summary lines** (``print_result``): ``RESULT <step> key=value ...``, which the tests read.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from pysparklog import LogDirectory
from pysparklog.spark.session import local_spark

REPO = Path(__file__).resolve().parents[1]
EXAMPLES_DATA = REPO / "data" / "examples"
#: Dropped into every directory ``fresh_dir`` makes: only such directories are deleted by a later run. A file
#: (not a directory) so that Kafka and pysparklog, which only look at ``<topic>-<partition>`` directories, ignore
#: it in a log directory.
MARKER = ".pysparklog-example"

_QUIET = {"spark.ui.showConsoleProgress": "false"}
_SMALL_DELTA = {"spark.databricks.delta.snapshotPartitions": "2"}


# -- directories and command line ----------------------------------------------------------------------------


def default_dir(example: str, kind: str) -> Path:
    """``data/examples/<example>/<kind>`` in the checkout."""
    return EXAMPLES_DATA / example / kind


def fresh_dir(path: str | Path) -> Path:
    """Delete ``path`` if an example made it, and create it empty.

    Raises:
        SystemExit: ``path`` is a non-empty directory without the examples' marker: it may hold someone's
            data, so it is left alone; or it is a URL (``fresh_log_dir`` takes those), which would otherwise
            become a local directory named ``s3:``.
    """
    if "://" in str(path):
        raise SystemExit(f"{path} is a URL: a directory is needed here")
    path = Path(path).resolve()
    if path.exists():
        if not path.is_dir():
            raise SystemExit(f"{path} is not a directory")
        if any(path.iterdir()) and not (path / MARKER).exists():
            raise SystemExit(f"refusing to delete {path}: it is not empty and no example made it; choose another")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("made by a pysparklog example; deleted by its next run\n")
    return path


def log_location(text: str) -> str:
    """A ``--log-dir``: an object-store URL (``s3://bucket/prefix``) as given, a path made absolute."""
    return text if "://" in text else str(Path(text).resolve())


def fresh_log_dir(location: str | Path) -> str:
    """``fresh_dir`` for a log directory, which may be an object-store URL: there the marker is an object and
    deleting the directory deletes the objects below its prefix. The notebooks also use it for their work
    directory, which may be on the same bucket as their logs.

    Raises:
        SystemExit: The location holds something without the examples' marker.
    """
    location = str(location)
    if "://" not in location:
        return str(fresh_dir(location))
    storage = LogDirectory(location).storage
    names = storage.list(storage.root)
    if names and MARKER not in names:
        raise SystemExit(f"refusing to delete {location}: it is not empty and no example made it; choose another")
    storage.delete_tree(storage.root)
    storage.put(storage.join(MARKER), b"made by a pysparklog example; deleted by its next run\n")
    return location


def example_parser(script: str, doc: str | None, *, work_dir: bool = True) -> argparse.ArgumentParser:
    """An example's argument parser: its docstring as the description, ``--log-dir`` and (when it needs one)
    ``--work-dir``, both defaulting to ``data/examples/<name>/`` in the checkout.

    Args:
        script: The example's ``__file__`` (not ``__name__``, which is ``__main__`` under ``python -m``).
        doc: Its docstring.
        work_dir: Whether it takes ``--work-dir``.
    """
    name = Path(script).stem
    parser = argparse.ArgumentParser(
        prog=f"python -m examples.{name}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--log-dir",
        type=log_location,
        default=str(default_dir(name, "logs")),
        help="the pysparklog log directory, a path or an object-store URL (s3://bucket/prefix); deleted and "
        "re-created at the start (default: %(default)s)",
    )
    if work_dir:
        parser.add_argument(
            "--work-dir",
            type=Path,
            default=default_dir(name, "work"),
            help="Spark checkpoints, tables and other outputs; deleted and re-created at the start "
            "(default: %(default)s)",
        )
    return parser


# -- Spark ---------------------------------------------------------------------------------------------------


def spark_session(app_name: str, *, delta: bool = False) -> SparkSession:
    """The examples' local SparkSession (or the running one, e.g. a notebook's).

    Its SQL warehouse (which Spark creates in the working directory the first time SQL touches the catalog,
    as Delta's ``CREATE TABLE delta.`path` `` does) goes under ``data/examples``, not into the checkout.
    """
    warehouse = {"spark.sql.warehouse.dir": str(EXAMPLES_DATA / "spark-warehouse")}
    return local_spark(app_name, delta=delta, conf=_QUIET | warehouse | (_SMALL_DELTA if delta else {}))


def run_until_caught_up(query: StreamingQuery) -> int:
    """Wait for a query started with ``trigger(availableNow=True)`` to finish; the number of rows it read.

    Raises:
        pyspark.errors.StreamingQueryException: The query failed.
    """
    query.awaitTermination()
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)


# -- data ----------------------------------------------------------------------------------------------------

#: The statuses an order goes through, in order; an order stops at a random one.
STATUSES = ("created", "paid", "shipped", "delivered")


@dataclass(frozen=True, slots=True)
class OrderEvent:
    """One change of an order: the record ``key`` is the order id, the ``value`` the order as JSON.

    ``version`` counts the order's events (1 for ``created``), so the latest state of an order is the event
    with the highest version, whatever the order in which a pipeline sees them.
    """

    order_id: str
    customer: str
    status: str
    amount_cents: int
    version: int
    timestamp_ms: int

    @property
    def key(self) -> bytes:
        return self.order_id.encode()

    def as_dict(self) -> dict[str, str | int]:
        return {
            "order_id": self.order_id,
            "customer": self.customer,
            "status": self.status,
            "amount_cents": self.amount_cents,
            "version": self.version,
        }

    @property
    def value(self) -> bytes:
        return json.dumps(self.as_dict(), separators=(",", ":")).encode()


#: The Spark schema of ``OrderEvent.value``, for ``from_json``.
ORDER_SCHEMA = "order_id STRING, customer STRING, status STRING, amount_cents BIGINT, version INT"


def order_events(orders: int, *, seed: int = 7, first_order: int = 0, start_ms: int | None = None) -> list[OrderEvent]:
    """The events of ``orders`` orders (ids ``order-<first_order>`` on), interleaved in time.

    Each order has one to four events (``created``, then ``paid``...), with increasing timestamps; the
    content depends only on the arguments, the timestamps on ``start_ms`` (default: now minus one millisecond
    per event, so they are recent enough for any retention).
    """
    rng = random.Random(seed + first_order)
    planned: list[tuple[float, int, int]] = []  # (moment, order, version)
    for order in range(first_order, first_order + orders):
        moments = sorted(rng.random() for _ in range(rng.randint(1, len(STATUSES))))
        planned += [(moment, order, version) for version, moment in enumerate(moments, 1)]
    planned.sort()
    start = int(time.time() * 1000) - len(planned) if start_ms is None else start_ms
    customers = {order: f"customer-{rng.randrange(100):03d}" for order in range(first_order, first_order + orders)}
    amounts = {order: rng.randrange(500, 50_000) for order in customers}
    return [
        OrderEvent(f"order-{order:05d}", customers[order], STATUSES[version - 1], amounts[order], version, start + i)
        for i, (_, order, version) in enumerate(planned)
    ]


def latest_per_order(events: Iterable[OrderEvent]) -> dict[str, OrderEvent]:
    """Each order's latest event: what a table deduplicated by key must hold."""
    latest: dict[str, OrderEvent] = {}
    for event in events:
        if event.order_id not in latest or event.version > latest[event.order_id].version:
            latest[event.order_id] = event
    return latest


def orders_table(events: Iterable[OrderEvent]) -> pa.Table:
    """The events as the Arrow table ``Producer.send_arrow`` and ``PartitionLog.append_arrow`` take."""
    rows = list(events)
    return pa.table(
        {
            "key": pa.array([e.key for e in rows], pa.binary()),
            "value": pa.array([e.value for e in rows], pa.binary()),
            "timestamp": pa.array([e.timestamp_ms for e in rows], pa.int64()),
        }
    )


def topic_records(log_dir: str | Path, topic: str, *, include_headers: bool = False) -> pa.Table:
    """Every record of every partition of ``topic``, read with the engine (no Spark), in partition order."""
    logs = LogDirectory(log_dir)
    batches: list[pa.RecordBatch] = []
    for partition in range(logs.topics.get(topic).partitions):
        with logs.partition(topic, partition) as log:
            batches += log.read_arrow(include_headers=include_headers)
    if not batches:
        return pa.table({"key": pa.array([], pa.binary()), "value": pa.array([], pa.binary())})
    return pa.Table.from_batches(batches)


# -- output --------------------------------------------------------------------------------------------------


def print_result(step: str, **fields: object) -> None:
    """A machine-readable summary line, ``RESULT <step> key=value ...`` (values without spaces)."""
    print(f"RESULT {step} " + " ".join(f"{name}={value}" for name, value in fields.items()), flush=True)


def parse_results(output: str) -> dict[str, dict[str, str]]:
    """The ``RESULT`` lines of an example's output, by step (a later line of a step wins)."""
    results: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        if line.startswith("RESULT "):
            _, step, *pairs = line.split()
            results[step] = dict(pair.split("=", 1) for pair in pairs)
    return results


def heading(text: str) -> None:
    """A section title in an example's output."""
    print(f"\n== {text} ==", flush=True)


def format_counts(counts: Mapping[str, int]) -> str:
    """``{"a": 1, "b": 2}`` as ``a:1,b:2`` (a ``print_result`` value)."""
    return ",".join(f"{name}:{count}" for name, count in sorted(counts.items()))
