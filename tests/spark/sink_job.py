"""A streaming job for ``test_sink_recovery``: ``format("pysparklog")`` in, ``format("pysparklog")`` out, exactly once.

Run it from the repository root as ``python -m tests.spark.sink_job <log dir> <checkpoint> <mode> [<arguments>]``
(``flaky`` takes a marker directory, ``crash`` a crash point and optionally ``minPartitions``; the ``storage.*``
options of a log directory on an object store come from ``$SINK_JOB_STORAGE_OPTIONS``, JSON); it starts its own
SparkSession, so that a test can kill it (JVM and Python workers included) and start it again.

The log directory must hold the topics ``input`` and ``output``. The query reads ``input`` from the earliest offset,
at most ``MAX_OFFSETS_PER_TRIGGER`` records per micro-batch, and appends every record's key with its value upper-cased
to ``output`` (option ``topic``, ``deliveryGuarantee`` exactly-once), its checkpoint at ``<checkpoint>``. Modes:

- ``run``: a short processing-time trigger, until the process is killed; prints ``started`` once the query runs.
- ``finish``: ``Trigger.AvailableNow`` with ``FINISH_MAX_OFFSETS_PER_TRIGGER``: every record there when it starts,
  then exit 0.
- ``flaky``: ``Trigger.AvailableNow`` with ``MAX_FLAKY_OFFSETS_PER_TRIGGER`` and master ``local[2,4]`` (a failed task
  is retried), the rows passing through ``mapInArrow(FlakyPassThrough)`` unchanged. The first attempt of task
  ``FLAKY_TASK`` of micro-batch ``FLAKY_BATCH`` fails once the sink has appended some of its rows to ``output``:
  it writes ``failed-<batch>-<task>.json`` (the keys it had passed on, and those of them already in ``output``) in
  ``<marker dir>``, then raises. Its later attempts write ``retried-<batch>-<task>-<attempt>.json``.
- ``crash``: as ``finish``, with ``MAX_OFFSETS_PER_TRIGGER``, into ``format("pysparklog_crash")``: the sink whose
  driver-side commit of micro-batch ``CRASH_BATCH`` kills the job (driver, JVM and the committing Python worker,
  with SIGKILL) at the point named by the fourth argument: ``before-decision`` (every task has prepared its
  transaction, the sink has decided nothing), or one of ``CRASH_POINTS``: ``before-markers`` (the sink has recorded
  its decision, no transaction is committed yet), ``between-markers`` (one transaction is committed, the others are
  not) or ``after-commit`` (the sink's commit returned, Spark has not recorded the batch yet). A fifth argument is
  the source's ``minPartitions`` (Spark tasks per micro-batch).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import NoReturn

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pysparklog import LogDirectory
from pysparklog.datasource_v2 import PySparkLogDataSource, PySparkLogStreamWriter
from pysparklog.storage.transaction_index import READ_UNCOMMITTED
from pysparklog.transactions import ProducerSession, TransactionCoordinator

INPUT = "input"
OUTPUT = "output"
#: The environment variable holding the ``storage.*`` options of both ends as JSON (a log directory on an object store).
STORAGE_OPTIONS_ENV = "SINK_JOB_STORAGE_OPTIONS"
#: Small, so that a run is many micro-batches and a kill lands in one of them.
MAX_OFFSETS_PER_TRIGGER = 1000
#: ``finish`` goes faster: Spark re-runs the micro-batch a killed run left with the offsets it recorded, and plans
#: the next ones with this limit.
FINISH_MAX_OFFSETS_PER_TRIGGER = 50_000
TRIGGER_INTERVAL = "100 milliseconds"

MAX_FLAKY_OFFSETS_PER_TRIGGER = 800
FLAKY_BATCH = 1
FLAKY_TASK = 1
#: Rows per Arrow batch between the Python workers: small, as ``flaky`` rows are 64 KiB.
FLAKY_ARROW_ROWS = 50
#: Rows the failing attempt passes on before it waits for the sink to append some of them: more than the sink
#: gathers before its first append (8 MiB), with a margin for what sits in buffers between the workers.
FLAKY_ROWS_BEFORE_FAILURE = 250
_APPEND_WAIT_S = 120.0


class InjectedFailure(RuntimeError):
    """The failure ``flaky`` injects; Spark retries the task."""


class FlakyPassThrough:
    """A ``mapInArrow`` function passing its batches on unchanged, except in the first attempt of one task.

    Args:
        log_dir: The log directory (to see the sink's appends to ``output``).
        markers: Where the attempts leave their marker files.
    """

    def __init__(self, log_dir: str, markers: str) -> None:
        self.log_dir = log_dir
        self.markers = markers

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        assert context is not None
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or "-1")
        task, attempt = context.partitionId(), context.attemptNumber()
        failing = batch_id == FLAKY_BATCH and task == FLAKY_TASK and attempt == 0
        ends = self._log_ends() if failing else []
        if batch_id == FLAKY_BATCH and task == FLAKY_TASK and attempt > 0:
            self._mark(f"retried-{batch_id}-{task}-{attempt}.json", {"attempt": attempt})
        passed: list[bytes] = []
        for batch in batches:
            yield batch
            if not failing:
                continue
            passed.extend(batch.column("key").to_pylist())
            if len(passed) >= FLAKY_ROWS_BEFORE_FAILURE:
                appended = self._wait_for_append(ends, set(passed))
                self._mark(
                    f"failed-{batch_id}-{task}.json",
                    {"attempt": attempt, "passed": [k.decode() for k in passed], "appended": appended},
                )
                raise InjectedFailure(
                    f"injected failure of task {task} of micro-batch {batch_id} (attempt {attempt}) after the sink "
                    f"appended {len(appended)} of its rows"
                )
        if failing:
            raise AssertionError(
                f"task {task} of micro-batch {batch_id} had only {len(passed)} rows, fewer than the "
                f"{FLAKY_ROWS_BEFORE_FAILURE} it passes on before failing"
            )

    def _log_ends(self) -> list[int]:
        logs = LogDirectory(self.log_dir)
        ends = []
        for partition in range(logs.topics.get(OUTPUT).partitions):
            with logs.partition(OUTPUT, partition) as log:
                ends.append(log.log_end_offset)
        return ends

    def _wait_for_append(self, ends: list[int], passed: set[bytes]) -> list[str]:
        """The passed keys already in ``output`` (uncommitted, after the log ends ``ends``), once there is one."""
        deadline = time.monotonic() + _APPEND_WAIT_S
        logs = LogDirectory(self.log_dir)
        while True:
            found: list[str] = []
            for partition, end in enumerate(ends):
                with logs.partition(OUTPUT, partition) as log:
                    for batch in log.read_arrow(end, isolation_level=READ_UNCOMMITTED):
                        found += [k.decode() for k in batch.column("key").to_pylist() if k in passed]
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"the sink appended none of the {len(passed)} rows in {_APPEND_WAIT_S} s")
            time.sleep(0.1)

    def _mark(self, name: str, document: dict[str, object]) -> None:
        path = os.path.join(self.markers, name)
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as f:
                json.dump(document, f)


CRASH_BATCH = 2
#: The crash points after the sink's decision.
CRASH_POINTS = ("before-markers", "between-markers", "after-commit")
BEFORE_DECISION = "before-decision"
#: The crash point, and the pid of the job's driver (whose process group holds the JVM), for the Python workers.
_CRASH_POINT_ENV = "SINK_JOB_CRASH_POINT"
_DRIVER_PID_ENV = "SINK_JOB_DRIVER_PID"


def crash() -> NoReturn:
    """Die as a machine that loses power: SIGKILL the job's driver and JVM, then this worker's process group."""
    os.killpg(os.getpgid(int(os.environ[_DRIVER_PID_ENV])), signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)
    raise AssertionError("still alive after SIGKILL")


class CrashingStreamWriter(PySparkLogStreamWriter):
    """``PySparkLogStreamWriter`` whose commit of ``CRASH_BATCH`` crashes at the point named in the environment.

    The commit runs in the driver's long-lived Python worker (Spark's ``python_streaming_sink_runner``): the
    coordinator's ``end_transaction`` is wrapped there, for that one commit."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        point = os.environ.get(_CRASH_POINT_ENV)
        if batchId != CRASH_BATCH or point is None:
            super().commit(messages, batchId)
            return
        if point == BEFORE_DECISION:
            crash()
        if point == "after-commit":
            super().commit(messages, batchId)
            crash()
        ends_before_crash = CRASH_POINTS.index(point)  # 0 before the first transaction's markers, 1 after them
        original = TransactionCoordinator.end_transaction
        ended = 0

        def end_transaction(
            coordinator: TransactionCoordinator, transactional_id: str, session: ProducerSession, *, commit: bool
        ) -> None:
            nonlocal ended
            if ended == ends_before_crash:
                crash()
            ended += 1
            original(coordinator, transactional_id, session, commit=commit)

        TransactionCoordinator.end_transaction = end_transaction  # type: ignore[method-assign, assignment]
        try:
            super().commit(messages, batchId)
        finally:
            TransactionCoordinator.end_transaction = original  # type: ignore[method-assign]
        raise AssertionError(f"micro-batch {batchId} committed {ended} transactions without crashing at {point}")


class CrashingDataSource(PySparkLogDataSource):
    """``format("pysparklog_crash")``: ``format("pysparklog")`` with a ``CrashingStreamWriter``."""

    @classmethod
    def name(cls) -> str:
        return "pysparklog_crash"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        writer = super().streamWriter(schema, overwrite)
        assert isinstance(writer, PySparkLogStreamWriter)
        return CrashingStreamWriter(writer.options, writer.columns)


def session(master: str, **conf: str) -> SparkSession:
    builder = (
        SparkSession.builder.master(master)
        .appName("pysparklog-sink-job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        # The JVM starts a few seconds sooner on a small machine with the client compiler only.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def storage_options() -> dict[str, str]:
    """The ``storage.*`` options of both ends (an object store's settings), from ``STORAGE_OPTIONS_ENV`` (JSON)."""
    options: dict[str, str] = json.loads(os.environ.get(STORAGE_OPTIONS_ENV, "{}"))
    return options


def source(
    spark: SparkSession, log_dir: str, max_offsets: int, min_partitions: str | None = None, *, tasks_read: bool = False
) -> DataFrame:
    """The input stream; ``tasks_read`` keeps small micro-batches' reads on tasks (``driverReadMaxOffsets=0``),
    one per input partition, where a scenario names a task or needs several transactions."""
    reader = (
        spark.readStream.format("pysparklog")
        .options(**storage_options())
        .option("path", log_dir)
        .option("subscribe", INPUT)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
    )
    if tasks_read:
        reader = reader.option("driverReadMaxOffsets", "0")
    if min_partitions is not None:
        reader = reader.option("minPartitions", min_partitions)
    return reader.load()


def main(argv: list[str]) -> int:
    log_dir, checkpoint, mode = argv[:3]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sink = "pysparklog"
    if mode == "crash":
        if argv[3] not in (BEFORE_DECISION, *CRASH_POINTS):
            raise SystemExit(f"unknown crash point {argv[3]!r}; accepted: {BEFORE_DECISION}, {', '.join(CRASH_POINTS)}")
        os.environ[_CRASH_POINT_ENV] = argv[3]  # before the JVM starts: its Python workers inherit it
        os.environ[_DRIVER_PID_ENV] = str(os.getpid())
        spark = session("local[2]")
        spark.dataSource.register(CrashingDataSource)
        sink = CrashingDataSource.name()
        min_partitions = argv[4] if len(argv) > 4 else None
        df = source(spark, log_dir, MAX_OFFSETS_PER_TRIGGER, min_partitions, tasks_read=True).selectExpr(
            "key", "upper(cast(value as string)) as value"
        )
    elif mode == "flaky":
        markers = argv[3]
        spark = session("local[2,4]", **{"spark.sql.execution.arrow.maxRecordsPerBatch": str(FLAKY_ARROW_ROWS)})
        passed = source(spark, log_dir, MAX_FLAKY_OFFSETS_PER_TRIGGER, tasks_read=True).select("key", "value")
        df = passed.mapInArrow(FlakyPassThrough(log_dir, markers), passed.schema)
    elif mode in ("run", "finish"):
        spark = session("local[2]")
        limit = MAX_OFFSETS_PER_TRIGGER if mode == "run" else FINISH_MAX_OFFSETS_PER_TRIGGER
        df = source(spark, log_dir, limit).selectExpr("key", "upper(cast(value as string)) as value")
    else:
        raise SystemExit(f"unknown mode {mode!r}; accepted: run, finish, flaky, crash")
    writer = (
        df.writeStream.format(sink)
        .options(**storage_options())
        .option("path", log_dir)
        .option("topic", OUTPUT)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", checkpoint)
    )
    if mode == "run":
        writer = writer.trigger(processingTime=TRIGGER_INTERVAL)
    else:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()  # raises when the query fails
    print(f"finished after batch {query.lastProgress['batchId'] if query.lastProgress else None}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
