"""``format("pysparklog")``: Spark's Kafka source and sink, over a log directory, as a Python data source.

A thin adapter: the options are Kafka's (``pysparklog.spark.kafka_options`` parses and resolves them),
micro-batches are planned with Kafka's algorithms (``pysparklog.spark.offset_ranges``: the proportional
split of ``maxOffsetsPerTrigger``, the range calculator, the assignors putting ranges on tasks),
and each task reads its ranges with the engine's decoder (``PartitionLog.read_arrow``), yielding
Arrow batches of bounded size in the exact form Spark checks (``pysparklog.spark.arrow``).

Spark runs the stream reader's driver side in one long-lived Python process (``initialOffset``,
``latestOffset``, ``partitions``, ``commit``) and ``read`` in executors on a pickled copy, so
everything a task needs travels in its ``InputPartition``.

Offsets are ``{"topic": {"partition": next_offset}}`` with topics and partitions in sorted order,
as Spark compares offsets as JSON strings.

The sink (``write``/``writeStream``) takes Spark's Kafka sink columns and options
(``pysparklog.spark.sink_options``); each task writes its Arrow batches through the producer inside a
Kafka transaction and the driver commits a micro-batch's transactions together, so the sink is
exactly-once (``pysparklog.spark.sink`` has the protocol). Spark hands a Python sink only append or
overwrite: a log is append-only, so overwrite is refused, and ``saveMode`` gives a batch write
errorifexists and ignore, which Spark refuses to pass on.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import FrameType

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pysparklog.errors import (
    DataLossError,
    InvalidConfigError,
    OffsetOutOfRangeError,
    PySparkLogError,
    TopicExistsError,
)
from pysparklog.group import GroupCoordinator
from pysparklog.offsets import OffsetStore
from pysparklog.spark.arrow import source_schema, to_spark_batch
from pysparklog.spark.kafka_options import (
    SourceOptions,
    each_partition,
    include_headers_option,
    latest_offsets,
    offsets_to_dict,
    parse_offsets,
    resolve_batch,
    resolve_start,
    source_log_dir,
    subscribed_partitions,
)
from pysparklog.spark.offset_ranges import (
    MinOffsetsTrigger,
    OffsetRange,
    TaskAssignment,
    available_offsets,
    group_ranges,
    rate_limit,
    split_ranges,
)
from pysparklog.spark.pushdown import PushedBounds, narrow_ranges, translate
from pysparklog.spark.sink import (
    SinkCommitLog,
    TaskWrite,
    abort_staged_write,
    batch_sink_id,
    commit_staged_write,
    ensure_topic,
    stages,
    streaming_sink_id,
    write_task,
)
from pysparklog.spark.sink_options import DeliveryGuarantee, SaveMode, SinkColumns, SinkOptions, check_sink_schema
from pysparklog.spark.storage_options import StorageSettings, open_logs
from pysparklog.storage.io import read_if_exists, storage_for
from pysparklog.structs import OffsetAndMetadata, TopicPartition

_log = logging.getLogger(__name__)


#: Log data a task decodes at a time. Measured over a 1.2 GB range: 4 MiB chunks read at ~32 M rec/s
#: with a peak resident set of ~280 MB in a worker (8 MiB: ~30 M rec/s, ~320 MB).
TASK_CHUNK_BYTES = 4 * 1024 * 1024
# A file in the log directory itself, never a directory: a Kafka broker refuses to start on a log directory
# holding any directory that is not <topic>-<partition> ("should only contain Kafka topic data").
_INITIAL_OFFSETS_FILE = "pysparklog-initial-offsets.{identity}.json"
# PySpark's planner module that calls ``reader()`` and then ``pushFilters``, run only with
# spark.sql.python.filterPushdown.enabled (see ``PySparkLogDataSource.reader``).
_PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"

Offsets = dict[TopicPartition, int]


class PySparkLogDataSource(DataSource):
    """``spark.readStream.format("pysparklog")`` and ``spark.read.format("pysparklog")``.

    The log directory is the ``path`` option or the argument of ``load(path)``; every other option
    is Spark's Kafka source's (see the README's options table).
    """

    @classmethod
    def name(cls) -> str:
        return "pysparklog"

    def schema(self) -> StructType:
        return source_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader; one that takes filters when PySpark's pushdown planner asks.

        With ``spark.sql.python.filterPushdown.enabled`` false (PySpark's default) the planner refuses a reader
        that implements ``pushFilters`` (``DATA_SOURCE_PUSHDOWN_DISABLED``), so which reader to give depends on
        who asks: ``data_source_pushdown_filters``, which runs only with the conf on and then calls
        ``pushFilters``, gets the pushdown reader; any other caller the plain one, as before.
        """
        options = self._options(streaming=False, schema=schema)
        if _called_from(sys._getframe(1), _PUSHDOWN_PLANNER):
            return PySparkLogPushdownReader(options)
        return PySparkLogBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # PySpark 4.2's stream runner stops the reader in a ``finally`` even when making it failed, so an error
        # raised here reaches the user as "UnboundLocalError: cannot access local variable 'reader'", ours only in
        # its context. Raised by the reader at Spark's first call instead, it is the query's error.
        try:
            options = self._options(streaming=True, schema=schema)
            if options.driver_read_max_offsets > 0:
                return DriverReadingStreamReader(options)
            return PySparkLogStreamReader(options)
        except Exception as error:  # noqa: BLE001 (every error: each would be hidden the same way)
            return _FailedStreamReader(error)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise InvalidConfigError(
                "pysparklog cannot overwrite: a log is append-only, records are only ever appended (retention and "
                "compaction remove old ones); accepted modes: append, with option saveMode append, errorifexists or "
                "ignore"
            )
        options, columns = self._sink_options(schema)
        return PySparkLogBatchWriter(options, columns, batch_sink_id(options), skip=_skips_write(options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        # ``overwrite`` is complete mode's: each micro-batch appends the whole result, as Spark's Kafka sink does.
        options, columns = self._sink_options(schema)
        if options.save_mode is not SaveMode.APPEND:
            raise InvalidConfigError(
                f"saveMode = {options.save_mode.value!r} applies to batch writes only; accepted in a stream: append"
            )
        if options.topic is not None:  # a target topic that will not be created fails now, naming why
            logs = open_logs(options.path, options.storage_settings)
            ensure_topic(logs, options.topic, options.auto_create_topics, validate_only=True)
        return PySparkLogStreamWriter(options, columns)

    def _sink_options(self, schema: StructType) -> tuple[SinkOptions, SinkColumns]:
        options = SinkOptions.parse(dict(self.options))
        for name in options.ignored_options:
            _log.info("pysparklog: option %s ignored (it configures a broker connection)", name)
        return options, check_sink_schema(schema, options.topic)

    def _options(self, *, streaming: bool, schema: StructType | None = None) -> SourceOptions:
        options = SourceOptions.parse(dict(self.options), streaming=streaming)
        if schema is not None and schema != source_schema(options.include_headers):
            raise InvalidConfigError(
                f"pysparklog source has a fixed schema and cannot be set with a custom one (given: "
                f"{schema.simpleString()}); accepted: no .schema(...), the columns being Spark's Kafka source's"
            )
        for name in options.ignored_options:
            _log.info("pysparklog: option %s ignored (it configures a broker connection)", name)
        for warning in options.warnings:
            _log.warning("pysparklog: %s", warning)
        return options

    def _include_headers(self) -> bool:
        """Whether rows have the ``headers`` column, from options a batch read or a stream accepts.

        Spark asks ``schema()`` for both kinds of query without saying which, so only what neither accepts fails
        here, with the one message both give. When each kind refuses for a reason of its own (``endingOffsets``
        earliest: a batch refuses the value, a stream the option), a message here could only carry both; the
        reader Spark asks for next raises the one for its kind, and the schema needs only ``includeHeaders``.
        """
        try:
            return SourceOptions.parse(dict(self.options), streaming=False).include_headers
        except InvalidConfigError as batch_error:
            try:
                return SourceOptions.parse(dict(self.options), streaming=True).include_headers
            except InvalidConfigError as stream_error:
                if str(stream_error) == str(batch_error):
                    raise
                return include_headers_option(dict(self.options))


@dataclass(frozen=True)
class RangesPartition(InputPartition):
    """What one Spark task reads: offset ranges of log partitions, and how."""

    log_dir: str
    ranges: tuple[OffsetRange, ...]
    include_headers: bool
    read_committed: bool
    fail_on_data_loss: bool
    storage_settings: StorageSettings = ()


def read_ranges(partition: RangesPartition) -> Iterator[pa.RecordBatch]:
    """The records of a task's ranges as Spark-ready Arrow batches of bounded size.

    A range whose start was removed meanwhile (retention, delete-records) fails the task with
    ``failOnDataLoss``, or is read from the earliest offset still there, as Kafka's consumer does.
    """
    logs = open_logs(partition.log_dir, partition.storage_settings)
    isolation = "read_committed" if partition.read_committed else "read_uncommitted"
    for piece in partition.ranges:
        log = logs.partition(piece.tp.topic, piece.tp.partition)
        start = piece.start
        try:  # a start below the log start is refused by the read itself, which on an object store may ask nothing
            batches = log.read_arrow(
                start,
                piece.end,
                include_headers=partition.include_headers,
                isolation_level=isolation,
                max_chunk_bytes=TASK_CHUNK_BYTES,
            )
            for batch in batches:
                yield to_spark_batch(batch, partition.include_headers)
        except OffsetOutOfRangeError as error:
            message = (
                f"offsets {start} to {piece.end} of {piece.tp} are no longer in the log ({error}); some data "
                "may have been lost (retention or delete-records removed it)"
            )
            if partition.fail_on_data_loss:
                raise DataLossError(message + ". Set failOnDataLoss to false to skip it") from None
            _log.warning("%s: skipping to the earliest offset available", message)
            available = max(start, log.log_start_offset)
            if available < piece.end:
                for batch in log.read_arrow(
                    available,
                    piece.end,
                    include_headers=partition.include_headers,
                    isolation_level=isolation,
                    max_chunk_bytes=TASK_CHUNK_BYTES,
                ):
                    yield to_spark_batch(batch, partition.include_headers)
        finally:
            log.close()


class PySparkLogBatchReader(DataSourceReader):
    """``spark.read.format("pysparklog")``: the ranges between starting and ending offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return _plan(self.options, resolve_batch(self.options, source_log_dir(self.options)), None)[0]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class PySparkLogPushdownReader(PySparkLogBatchReader):
    """The batch reader with filter pushdown: ``partition``, ``offset`` and ``timestamp`` filters narrow the
    ranges read (``pysparklog.spark.pushdown`` says which, and which Spark still checks)."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self.bounds = PushedBounds()

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 (Spark's name)
        self.bounds, for_spark = translate(filters)
        return for_spark

    def partitions(self) -> list[InputPartition]:
        logs = source_log_dir(self.options)
        return _plan(self.options, narrow_ranges(resolve_batch(self.options, logs), self.bounds, logs), None)[0]


def _called_from(frame: FrameType | None, module: str) -> bool:
    """Whether ``frame`` runs code of ``module``, imported (PySpark's daemon imports its workers) or run as
    ``python -m`` (without the daemon), where ``__name__`` is ``__main__`` but ``__spec__`` names it."""
    if frame is None:
        return False
    spec = frame.f_globals.get("__spec__")
    return frame.f_globals.get("__name__") == module or getattr(spec, "name", None) == module


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task's records. With no ranges to read (an empty topic, a pattern matching none) ``partitions()`` plans
    none, and PySpark then runs one task on ``InputPartition(None)``: it reads nothing, as Spark's Kafka source
    returns no rows."""
    if isinstance(partition, RangesPartition):
        return read_ranges(partition)
    if type(partition) is InputPartition and partition.value is None:
        return iter(())
    raise PySparkLogError(f"a pysparklog task was given {partition!r}; accepted: the partitions its reader planned")


def _plan(
    options: SourceOptions, ranges: list[OffsetRange], previous: TaskAssignment | None
) -> tuple[list[InputPartition], TaskAssignment | None]:
    """Split the ranges as Kafka's range calculator does and put them on tasks with the assignor."""
    pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    if not pieces:
        return [], previous
    groups, state, description = group_ranges(pieces, None, options.assignor, previous)
    _log.info("pysparklog: %s", description)
    planned: list[InputPartition] = [_reading(options, group) for group in groups if group]
    return planned, state


def _reading(options: SourceOptions, ranges: Iterable[OffsetRange]) -> RangesPartition:
    """What one task (or the driver) reads: ``ranges``, as the options say to read them."""
    return RangesPartition(
        options.path,
        tuple(ranges),
        options.include_headers,
        options.read_committed,
        options.fail_on_data_loss,
        options.storage_settings,
    )


class PySparkLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pysparklog")``: micro-batches of offset ranges, with admission control."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._logs = source_log_dir(options)
        self._start_storage = (
            storage_for(options.initial_offsets_location) if options.initial_offsets_location else self._logs.storage
        )
        self._latest: Offsets | None = None  # the latest offsets seen, for reportLatestOffset
        self._available_now: Offsets | None = None  # the target of Trigger.AvailableNow
        self._assignment: TaskAssignment | None = None  # the previous micro-batch's (sticky assignors)
        self._min_trigger = (
            MinOffsetsTrigger(options.min_offsets_per_trigger, options.max_trigger_delay_ms)
            if options.min_offsets_per_trigger is not None
            else None
        )
        self._offsets: OffsetStore | None = None  # with group.id, opened on the driver at first use
        self._initial: Offsets | None = None  # the start this reader gave, while kept for a restart
        self._start_forgotten = False  # no start file of this query is left: nothing to delete per micro-batch
        self._committed: Offsets | None = None  # the offsets the micro-batches are known committed to

    # -- offsets ------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Where a new query starts. ``latest`` and timestamps resolve differently each time, and Spark
        asks again when it restarts before the first micro-batch committed, so the first answer is
        kept (in the group's committed offsets with ``group.id``, else in a file) until then."""
        partitions = subscribed_partitions(self.options, self._logs)
        start = self._remembered_start(partitions)
        if start is None:
            start = resolve_start(self.options, self._logs, partitions)
            self._remember_start(start)
        self._initial = start
        if self.options.group_id is not None:
            self._committed = start  # the group holds it already
        return offsets_to_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """Kafka's default limit: ``maxOffsetsPerTrigger``, else ``minOffsetsPerTrigger``, else everything.

        PySpark has no composite limit and no delay in ``ReadMinRows``: with both options Spark is given
        the maximum and the minimum (with ``maxTriggerDelay``) is applied here, as it is with the minimum alone.
        """
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest_offsets({})

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        current = parse_offsets(start)
        self._committed_up_to(current)
        latest = self._available_now if self._available_now is not None else self._latest_offsets(current)
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_dict(latest)
        begin = {tp: current[tp] if tp in current else self._earliest(tp) for tp in latest}
        # Under AvailableNow returning ``start`` ends the query, so a minimum would leave data unread.
        trigger = self._min_trigger if self._available_now is None else None
        if trigger is not None and not trigger.should_trigger(available_offsets(begin, latest)):
            return start
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return offsets_to_dict(latest)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return offsets_to_dict(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[InputPartition]:
        planned, self._assignment = _plan(self.options, self._ranges(start, end), self._assignment)
        return planned

    def _ranges(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[OffsetRange]:
        """The micro-batch's offset ranges, one per partition, with Kafka's data-loss checks."""
        begin, until = parse_offsets(start), parse_offsets(end)
        ranges: list[OffsetRange] = []
        for tp, stop in until.items():
            first = begin.get(tp)
            if first is None:  # a partition found since the last batch: from its earliest offset
                first = self._earliest(tp)
                if first != 0:
                    self._report_data_loss(f"added partition {tp} starts from {first} instead of 0")
            if stop < first:
                self._report_data_loss(f"partition {tp}'s offset was changed from {first} to {stop}")
                continue
            ranges.append(OffsetRange(tp, first, stop))
        gone = sorted(set(begin) - set(until))
        if gone:
            self._report_data_loss(f"{', '.join(map(str, gone))} are gone")
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """The micro-batch up to ``end`` is committed (see :meth:`_committed_up_to`)."""
        self._committed_up_to(parse_offsets(end))

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None

    # -- helpers ------------------------------------------------------------------------------

    def _committed_up_to(self, offsets: Offsets) -> None:
        """Spark has committed every micro-batch up to ``offsets``: with ``group.id`` they become the group's
        committed offsets (so ``consumer-groups --describe`` shows the query's lag), and unless they are still
        the start this reader gave, no start need be kept for a restart any more.

        Spark calls ``commit(end)`` only while it plans the next micro-batch, so never for the last one
        before the data runs out. But micro-batches run one at a time, so the ``start`` of ``latestOffset``
        is committed too: both lead here, and only a change is written.
        """
        if offsets == self._committed:
            return
        self._commit_to_group(offsets)
        self._committed = offsets
        if offsets != self._initial and not self._start_forgotten:
            self._forget_start()  # also a reader resumed from a checkpoint: its first run's file may be left
            self._start_forgotten = True
            self._initial = None

    def _earliest(self, tp: TopicPartition) -> int:
        with self._logs.partition(tp.topic, tp.partition) as log:
            return log.log_start_offset

    def _latest_offsets(self, current: Offsets) -> Offsets:
        """The log end (or last stable offset with read_committed) of every subscribed partition,
        including partitions and topics that appeared since the query started."""
        partitions = subscribed_partitions(self.options, self._logs)
        if not self.options.read_committed:
            return latest_offsets(self._logs, partitions)  # on an object store, one probe of each topic's chain
        return each_partition(self._logs, partitions, lambda log: log.last_stable_offset)

    def _report_data_loss(self, message: str) -> None:
        """Kafka's ``reportDataLoss``: fail with ``failOnDataLoss``, else warn and go on."""
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{message}. Some data may have been lost. Set failOnDataLoss to false to go on")
        _log.warning("%s. Some data may have been lost", message)

    # -- the first micro-batch's start, kept until it commits ---------------------------------

    def _start_file(self) -> str:
        if self.options.initial_offsets_location is not None:
            return self._start_storage.join(self.options.identity + ".json")
        return self._start_storage.join(_INITIAL_OFFSETS_FILE.format(identity=self.options.identity))

    def _group_store(self) -> OffsetStore | None:
        """With ``group.id``, the offset store, opened at first use: only the driver uses it, and Spark
        pickles a reader for the executors, which an open store (its locks) would prevent."""
        if self.options.group_id is None:
            return None
        if self._offsets is None:
            self._offsets = OffsetStore(self._logs)
        return self._offsets

    def _commit_to_group(self, offsets: Offsets) -> None:
        """Commit as a consumer outside the group does: refused while the group has live members, so a
        query never overwrites the positions of a running consumer group."""
        store = self._group_store()
        if store is None or self.options.group_id is None:
            return
        coordinator = GroupCoordinator(self._logs, self.options.group_id)
        try:
            store.commit_as(coordinator, None, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()})
        finally:
            coordinator.close()

    def _remembered_start(self, partitions: list[TopicPartition]) -> Offsets | None:
        """The start kept for this query: with ``group.id`` the group's committed offsets (a new query
        of a group goes on where the group stopped; partitions without one start per
        ``startingOffsets``), else the file written by the first ``initialOffset``."""
        store = self._group_store()
        if store is not None and self.options.group_id is not None:
            committed = store.committed(self.options.group_id, partitions)
            if not committed:
                return None
            start = {tp: c.offset for tp, c in committed.items()}
            missing = [tp for tp in partitions if tp not in start]
            if missing:  # resolved with the others: offsets or timestamps by partition must name them all
                resolved = resolve_start(self.options, self._logs, partitions)
                start.update({tp: resolved[tp] for tp in missing})
                self._remember_start(start)
            return start
        data = read_if_exists(self._start_storage, self._start_file())
        return None if data is None else parse_offsets(json.loads(data.decode("utf-8")))

    def _remember_start(self, start: Offsets) -> None:
        if self.options.group_id is not None:
            self._commit_to_group(start)
            return
        self._start_storage.put(self._start_file(), json.dumps(offsets_to_dict(start)).encode())
        self._start_forgotten = False

    def _forget_start(self) -> None:
        self._start_storage.delete(self._start_file())


class DriverReadingStreamReader(PySparkLogStreamReader, _SimpleStreamReaderWrapper):
    """The stream reader that reads small micro-batches on the driver (``driverReadMaxOffsets``).

    A Python source's micro-batch normally costs a task that starts a Python worker to read it, tens of
    milliseconds however few its records. For its simple stream readers PySpark has a cheaper path: the
    driver's source worker sends the records along with the micro-batch's single partition, Spark keeps them
    in its block manager, and the task reads them from there without Python. PySpark takes that path for
    instances of its wrapper of simple readers only (``pyspark.sql.datasource_internal``), so this reader is
    one, and takes it for micro-batches of at most ``driverReadMaxOffsets`` offsets, unless ``minPartitions``
    asks for several tasks; other micro-batches are planned as tasks as usual. What the wrapper changes
    besides: PySpark does not ask it for ``reportLatestOffset``, so the query's progress has no
    ``latestOffset`` for this source.
    """

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._driver_read: RangesPartition | None = None  # the micro-batch ``partitions`` planned to read here
        # What PySpark's runner asks of a wrapper for ``Trigger.AvailableNow``: the reader itself is one.
        self.simple_reader = self  # type: ignore[assignment]

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[InputPartition]:
        ranges = self._ranges(start, end)
        to_read = [r for r in ranges if r.end > r.start]  # as the tasks' planning leaves out empty ranges
        self._driver_read = _reading(self.options, to_read) if self._read_on_driver(to_read) else None
        if self._driver_read is not None:
            _log.info(
                "pysparklog: %d offsets of %d log partitions read by the driver",
                sum(r.end - r.start for r in to_read),
                len(to_read),
            )
            return [self._driver_read]
        planned, self._assignment = _plan(self.options, ranges, self._assignment)
        return planned

    def getCache(  # noqa: N802 (PySpark's name)
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> Iterator[pa.RecordBatch] | None:
        """The records of the micro-batch ``partitions`` just planned, when it is read here; None otherwise."""
        return None if self._driver_read is None else read_ranges(self._driver_read)

    def _read_on_driver(self, ranges: list[OffsetRange]) -> bool:
        """Whether the micro-batch is read here: it has offsets to read, at most ``driverReadMaxOffsets`` of
        them, and no ``minPartitions`` asks for more than one task."""
        if (self.options.min_partitions or 1) > 1:
            return False
        offsets = sum(r.end - r.start for r in ranges)
        return 0 < offsets <= self.options.driver_read_max_offsets


class _FailedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of a query whose options or log directory were refused: it raises that error at whatever
    Spark asks first, so that the query fails with it (see ``PySparkLogDataSource.streamReader``)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def initialOffset(self) -> dict[str, dict[str, int]]:
        raise self.error

    def getDefaultReadLimit(self) -> ReadLimit:
        raise self.error

    def prepareForTriggerAvailableNow(self) -> None:
        raise self.error

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        raise self.error

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[InputPartition]:
        raise self.error

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise self.error

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        raise self.error

    def stop(self) -> None:
        """Nothing was opened."""


def _skips_write(options: SinkOptions) -> bool:
    """Whether a batch write writes nothing (``saveMode`` ignore and the topic exists); fails for
    errorifexists and an existing topic. Both need the ``topic`` option: a topic column's topics are
    only known while writing, when a task cannot tell a topic another task created from an old one."""
    if options.save_mode is SaveMode.APPEND:
        return False
    if options.topic is None:
        raise InvalidConfigError(
            f"saveMode = {options.save_mode.value!r} needs the topic option (a topic column's topics are only known "
            "while writing); accepted without it: saveMode append"
        )
    exists = options.topic in open_logs(options.path, options.storage_settings).topics.names()
    if exists and options.save_mode is SaveMode.ERROR_IF_EXISTS:
        raise TopicExistsError(
            f"Topic '{options.topic}' already exists in {options.path} and saveMode is errorifexists; accepted: "
            "saveMode append to add to it, or ignore to leave it as it is"
        )
    return exists


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    """A task's ``TaskWrite``, carried to the driver's commit or abort."""

    write: TaskWrite


def _writes(messages: list[WriterCommitMessage | None]) -> list[TaskWrite]:
    return [m.write for m in messages if isinstance(m, SinkCommitMessage)]


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise PySparkLogError("the pysparklog sink writes in Spark tasks only (no TaskContext)")
    return context


class PySparkLogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pysparklog")``: every task's transaction is committed together, or none."""

    def __init__(self, options: SinkOptions, columns: SinkColumns, sink_id: str, *, skip: bool) -> None:
        self.options = options
        self.columns = columns
        self.sink_id = sink_id
        self.skip = skip

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        task = _task().partitionId()
        if self.skip:
            for _ in iterator:
                pass
            return SinkCommitMessage(TaskWrite(self.sink_id, None, 0, task, 0, None))
        written = write_task(
            self.options, self.columns, iterator, sink_id=self.sink_id, query_id=None, batch_id=0, task=task
        )
        return SinkCommitMessage(written)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        writes = _writes(messages)
        if self.options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE and not self.skip:
            logs = open_logs(self.options.path, self.options.storage_settings)
            if stages(self.options, logs):
                commit_staged_write(logs, None, 0, writes)
                return
            commit_log = SinkCommitLog(logs, self.sink_id)
            commit_log.commit(None, 0, writes)
            commit_log.forget()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE and not self.skip:
            logs = open_logs(self.options.path, self.options.storage_settings)
            if stages(self.options, logs):
                abort_staged_write(logs, _writes(messages))
                return
            commit_log = SinkCommitLog(logs, self.sink_id)
            commit_log.abort()
            commit_log.forget()


class PySparkLogStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("pysparklog")``: each micro-batch is committed exactly once (or, with
    ``deliveryGuarantee`` at-least-once, appended as Spark's Kafka sink appends it)."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        context = _task()
        query_id = context.getLocalProperty("sql.streaming.queryId")
        batch_id = context.getLocalProperty("streaming.sql.batchId")
        if query_id is None or batch_id is None:
            raise PySparkLogError("the pysparklog stream writer runs in a streaming query only (no query or batch id)")
        written = write_task(
            self.options,
            self.columns,
            iterator,
            sink_id=streaming_sink_id(self.options, query_id),
            query_id=query_id,
            batch_id=int(batch_id),
            task=context.partitionId(),
        )
        return SinkCommitMessage(written)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        writes = _writes(messages)
        if self.options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE and writes:
            first = writes[0]
            logs = open_logs(self.options.path, self.options.storage_settings)
            if stages(self.options, logs):
                commit_staged_write(logs, first.query_id, batchId, writes)
            else:
                SinkCommitLog(logs, first.sink_id).commit(first.query_id, batchId, writes)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        if self.options.delivery_guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            return
        writes = _writes(messages)
        logs = open_logs(self.options.path, self.options.storage_settings)
        if stages(self.options, logs):
            abort_staged_write(logs, writes)
            return
        query_id = _checkpoint_query_id(self.options.checkpoint_location)
        sink_id = writes[0].sink_id if writes else query_id and streaming_sink_id(self.options, query_id)
        if sink_id:
            SinkCommitLog(logs, sink_id).abort()
        else:  # the tasks' next attempts, or the timeout, abort what the failed ones left open
            _log.warning("pysparklog: batch %d aborted; its query id is unknown here (no checkpoint)", batchId)


def _checkpoint_query_id(location: str | None) -> str | None:
    """The query id Spark keeps in ``<checkpointLocation>/metadata`` (``{"id": ...}``), when the location is
    a local or mounted path; None otherwise."""
    if not location:
        return None
    path = os.path.join(location.removeprefix("file:"), "metadata")
    try:
        with open(path, encoding="utf-8") as f:
            query_id = json.loads(f.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return query_id if isinstance(query_id, str) else None
