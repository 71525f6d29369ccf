"""The driver side of ``readStream.format("pysparklog")`` without Spark: the stream reader called as Spark's Python
runner calls it (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``), with offsets as PySpark passes
them (the dicts ``json.loads`` gives back).

No SparkSession is started, so this module is not marked ``spark``.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.serializers import SpecialLengths
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from pysparklog import LogDirectory
from pysparklog.datasource_v2 import (
    DriverReadingStreamReader,
    PySparkLogDataSource,
    PySparkLogStreamReader,
    RangesPartition,
    read_ranges,
)
from pysparklog.errors import DataLossError, InvalidConfigError
from pysparklog.offsets import OffsetStore
from pysparklog.spark.arrow import source_schema
from pysparklog.spark.kafka_options import SourceOptions
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from tests.conftest import REPO
from tests.spark.conftest import TS, append, make_topic

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def reader(path: Path, **options: str) -> PySparkLogStreamReader:
    """A new stream reader, as Spark makes one per query run (``group_id`` stands for ``group.id``)."""
    given = {"path": str(path), "subscribe": "t"} | {name.replace("_", "."): value for name, value in options.items()}
    return PySparkLogStreamReader(SourceOptions.parse(given, streaming=True))


def foreign_entries(path: Path) -> list[str]:
    """Directories of the log directory that are not ``<topic>-<partition>``: a Kafka broker refuses to start on it
    ("Kafka's log directories (and children) should only contain Kafka topic data")."""
    return sorted(
        name
        for name in os.listdir(path)
        if (path / name).is_dir() and not (name.rpartition("-")[0] and name.rpartition("-")[2].isdigit())
    )


@pytest.fixture
def uneven(tmp_path: Path) -> Path:
    """Topic ``t``: 101, 11 and 1 records, the partitions of Spark's maxOffsetsPerTrigger test."""
    make_topic(tmp_path, "t", [101, 11, 1])
    return tmp_path


# -- where a new query starts, kept until its first micro-batch commits --------------------------------------------


def test_a_latest_start_survives_a_restart_before_the_first_commit(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [3, 2])
    first = reader(tmp_path).initialOffset()
    assert first == {"t": {"0": 3, "1": 2}}
    append(logs, "t", 0, 4)
    restarted = reader(tmp_path)  # the query restarts before batch 0 committed: Spark asks again
    assert restarted.initialOffset() == first
    assert restarted.initialOffset() == first  # and Spark asks twice
    # Batch 0 (3 -> 7) is planned; Spark asking for the next end means it committed.
    restarted.latestOffset(first, ReadAllAvailable())
    assert reader(tmp_path).initialOffset() == first  # batch 0 not committed yet: still kept
    restarted.commit({"t": {"0": 7, "1": 2}})
    assert reader(tmp_path).initialOffset() == {"t": {"0": 7, "1": 2}}  # a new query: latest again
    assert foreign_entries(tmp_path) == []


def test_a_timestamp_start_survives_a_restart_and_is_forgotten_once_a_batch_is_committed(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [3])
    options = {"startingTimestamp": str(TS + 5), "startingOffsetsByTimestampStrategy": "latest"}
    first = reader(tmp_path, **options).initialOffset()
    assert first == {"t": {"0": 3}}  # nothing stamped TS + 5 yet: the log end
    append(logs, "t", 0, 5)  # offsets 3..7, offset 5 stamped TS + 5
    restarted = reader(tmp_path, **options)
    assert restarted.initialOffset() == first
    # Spark asks for the next end with batch 0's end as start: batch 0 committed, before commit() reaches us.
    assert restarted.latestOffset({"t": {"0": 8}}, ReadAllAvailable()) == {"t": {"0": 8}}
    assert reader(tmp_path, **options).initialOffset() == {"t": {"0": 5}}
    assert foreign_entries(tmp_path) == []


def test_the_start_is_forgotten_once_not_at_every_micro_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleting the kept start is a request on an object store: once it is gone, later commits do not ask again;
    a reader resumed from a checkpoint (no ``initialOffset``) deletes what its first run may have left, once."""
    logs = make_topic(tmp_path, "t", [3])
    for resumed in (False, True):
        source = reader(tmp_path, startingOffsets="earliest")
        if not resumed:
            source.initialOffset()
        deletes: list[str] = []
        monkeypatch.setattr(source._start_storage, "delete", deletes.append)
        for end in (1, 2, 3):
            append(logs, "t", 0, 1)
            source.commit({"t": {"0": end}})
        assert len(deletes) == 1


def test_initial_offsets_location_keeps_the_start_outside_the_log_directory(tmp_path: Path) -> None:
    logs = make_topic(tmp_path / "logs", "t", [2])
    kept = tmp_path / "kept"
    first = reader(tmp_path / "logs", initialOffsetsLocation=str(kept)).initialOffset()
    assert len(os.listdir(kept)) == 1
    append(logs, "t", 0, 3)
    assert reader(tmp_path / "logs", initialOffsetsLocation=str(kept)).initialOffset() == first
    assert reader(tmp_path / "logs").initialOffset() == {"t": {"0": 5}}  # another location: another query


def test_with_a_group_the_start_is_the_groups_committed_offsets(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [5, 4])
    with OffsetStore(logs) as store:
        store.commit("g", {T0: OffsetAndMetadata(3)})
    # Offsets by partition must name every partition; the group's commit wins where it has one.
    source = reader(tmp_path, group_id="g", startingOffsets='{"t":{"0":1,"1":2}}')
    assert source.initialOffset() == {"t": {"0": 3, "1": 2}}
    source.stop()
    with OffsetStore(logs) as store:  # the start of the partition without a commit is committed to keep it
        assert {tp: c.offset for tp, c in store.committed("g").items()} == {T0: 3, T1: 2}
    append(logs, "t", 1, 3)
    again = reader(tmp_path, group_id="g")  # latest by default, but the group has offsets: they win
    assert again.initialOffset() == {"t": {"0": 3, "1": 2}}
    again.stop()


def test_with_a_group_committed_batches_become_the_groups_offsets(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [5, 4])
    source = reader(tmp_path, group_id="g", startingOffsets="earliest")
    start = source.initialOffset()
    end = source.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 5, "1": 4}}
    # Spark commits batch 0 and asks for the next end: no commit() comes for the last batch before data runs out.
    assert source.latestOffset(end, ReadAllAvailable()) == end
    with OffsetStore(logs) as store:
        assert [(lag.partition, lag.committed, lag.lag) for lag in store.lag("g")] == [(T0, 5, 0), (T1, 4, 0)]
    source.commit(end)  # late, and the same: nothing new to write
    source.stop()
    assert pickle.loads(pickle.dumps(reader(tmp_path, group_id="g"))).options.group_id == "g"


# -- read limits -----------------------------------------------------------------------------------------------


def test_default_read_limit(tmp_path: Path) -> None:
    def limit(**options: str) -> object:
        return PySparkLogStreamReader(
            SourceOptions.parse({"path": str(tmp_path), "subscribe": "t", **options}, streaming=True)
        ).getDefaultReadLimit()

    assert limit() == ReadAllAvailable()
    assert limit(maxOffsetsPerTrigger="10") == ReadMaxRows(10)
    assert limit(minOffsetsPerTrigger="4") == ReadMinRows(4)
    assert limit(minOffsetsPerTrigger="4", maxOffsetsPerTrigger="10") == ReadMaxRows(10)  # the minimum is applied here


def test_latest_offset_reads_all_or_splits_the_maximum_by_backlog(uneven: Path) -> None:
    source = reader(uneven, startingOffsets="earliest", maxOffsetsPerTrigger="10")
    start = source.initialOffset()
    assert start == {"t": {"0": 0, "1": 0, "2": 0}}
    assert source.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 101, "1": 11, "2": 1}}  # Trigger.Once
    first = source.latestOffset(start, ReadMaxRows(10))
    assert first == {"t": {"0": 8, "1": 1, "2": 1}}  # Spark's KafkaMicroBatchSourceSuite: 8/1/1, then 9/1/0
    assert source.latestOffset(first, ReadMaxRows(10)) == {"t": {"0": 17, "1": 2, "2": 1}}
    assert source.reportLatestOffset() == {"t": {"0": 101, "1": 11, "2": 1}}  # the latest seen, not the limited end


def test_report_latest_offset_is_none_until_latest_offset_ran(uneven: Path) -> None:
    source = reader(uneven)
    assert source.reportLatestOffset() is None


def test_available_now_never_reads_past_its_snapshot(uneven: Path) -> None:
    logs = LogDirectory(uneven)
    source = reader(uneven, startingOffsets="earliest", maxOffsetsPerTrigger="60")
    start = source.initialOffset()
    source.prepareForTriggerAvailableNow()
    append(logs, "t", 2, 50)  # after the snapshot: never read by this run
    ends = []
    while True:
        end = source.latestOffset(start, ReadMaxRows(60))
        if end == start:
            break
        ends.append(end)
        start = end
    assert ends[-1] == {"t": {"0": 101, "1": 11, "2": 1}}
    assert len(ends) == 2
    assert source.latestOffset(start, ReadAllAvailable()) == start


def test_min_offsets_hold_a_trigger_back_until_enough_arrived(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [3])
    source = reader(tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="4", maxTriggerDelay="1h")
    start = source.initialOffset()
    end = source.latestOffset(start, ReadMinRows(4))
    assert end == {"t": {"0": 3}}  # the first trigger always fires, as in Kafka
    append(logs, "t", 0, 3)
    assert source.latestOffset(end, ReadMinRows(4)) == end  # 3 < 4: held back
    append(logs, "t", 0, 1)
    assert source.latestOffset(end, ReadMinRows(4)) == {"t": {"0": 7}}
    # Under AvailableNow the same start would end the query with data unread: the minimum does not apply.
    append(logs, "t", 0, 1)
    source.prepareForTriggerAvailableNow()
    assert source.latestOffset({"t": {"0": 7}}, ReadMinRows(4)) == {"t": {"0": 8}}


def test_trigger_delay_releases_a_held_trigger(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [3])
    source = reader(tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="100", maxTriggerDelay="0ms")
    start = source.initialOffset()
    end = source.latestOffset(start, ReadMinRows(100))
    append(logs, "t", 0, 1)
    assert source.latestOffset(end, ReadMinRows(100)) == {"t": {"0": 4}}  # no wait at all: fires every time


# -- planning --------------------------------------------------------------------------------------------------


def test_partitions_of_an_empty_range_are_none(uneven: Path) -> None:
    source = reader(uneven, startingOffsets="earliest")
    start = source.initialOffset()
    assert source.partitions(start, start) == []
    planned = source.partitions(start, {"t": {"0": 10, "1": 0, "2": 1}})
    ranges = sorted(piece for partition in planned for piece in partition.ranges)  # type: ignore[attr-defined]
    assert ranges == [OffsetRange(T0, 0, 10), OffsetRange(T2, 0, 1)]


def test_a_new_partition_is_read_from_its_earliest_offset(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [2])
    source = reader(tmp_path, startingOffsets="earliest")
    start = source.initialOffset()
    logs.topics.alter_partitions("t", 2)
    append(logs, "t", 1, 3)
    end = source.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 2, "1": 3}}
    planned = source.partitions(start, end)
    ranges = sorted(piece for partition in planned for piece in partition.ranges)  # type: ignore[attr-defined]
    assert ranges == [OffsetRange(T0, 0, 2), OffsetRange(T1, 0, 3)]


def test_offsets_going_backwards_are_data_loss(tmp_path: Path) -> None:
    make_topic(tmp_path, "t", [2])
    strict = reader(tmp_path)
    with pytest.raises(DataLossError, match="partition t-0's offset was changed from 5 to 2"):
        strict.partitions({"t": {"0": 5}}, {"t": {"0": 2}})
    with pytest.raises(DataLossError, match="t-1 are gone"):
        strict.partitions({"t": {"0": 0, "1": 0}}, {"t": {"0": 2}})
    lenient = reader(tmp_path, failOnDataLoss="false")
    assert lenient.partitions({"t": {"0": 5}}, {"t": {"0": 2}}) == []


def test_an_added_partition_not_starting_at_zero_is_data_loss(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [2])
    logs.topics.alter_partitions("t", 2)
    append(logs, "t", 1, 4)
    with logs.partition("t", 1) as log:
        log.raise_log_start_offset(3)
    with pytest.raises(DataLossError, match="added partition t-1 starts from 3 instead of 0"):
        reader(tmp_path).partitions({"t": {"0": 2}}, {"t": {"0": 2, "1": 4}})
    planned = reader(tmp_path, failOnDataLoss="false").partitions({"t": {"0": 2}}, {"t": {"0": 2, "1": 4}})
    assert [piece for partition in planned for piece in partition.ranges] == [OffsetRange(T1, 3, 4)]  # type: ignore[attr-defined]


def test_the_driver_closes_what_it_opens(uneven: Path) -> None:
    """Spark polls ``latestOffset`` every few milliseconds while a stream is idle, for as long as it runs."""
    source = reader(uneven, startingOffsets="earliest", minOffsetsPerTrigger="5")
    start = source.initialOffset()
    source.latestOffset(start, ReadMinRows(5))
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        source.latestOffset(start, ReadMinRows(5))
        source.reportLatestOffset()
    assert len(os.listdir("/proc/self/fd")) <= before


# -- executors -------------------------------------------------------------------------------------------------


def test_read_ranges_fails_or_skips_removed_offsets(tmp_path: Path) -> None:
    logs = make_topic(tmp_path, "t", [10])
    with logs.partition("t", 0) as log:
        log.raise_log_start_offset(6)
    task = RangesPartition(str(tmp_path), (OffsetRange(T0, 2, 8),), False, False, True)
    with pytest.raises(DataLossError, match=r"offsets 2 to 8 of t-0 are no longer in the log"):
        list(read_ranges(task))
    lenient = RangesPartition(str(tmp_path), (OffsetRange(T0, 2, 8),), False, False, False)
    assert [o for batch in read_ranges(lenient) for o in batch.column("offset").to_pylist()] == [6, 7]
    gone = RangesPartition(str(tmp_path), (OffsetRange(T0, 1, 4),), False, False, False)
    assert list(read_ranges(gone)) == []


# -- small micro-batches read on the driver ------------------------------------------------------------------------


def _int(stream: io.BytesIO) -> int:
    """A 4-byte big-endian int, as PySpark's runner frames its answers."""
    return int(struct.unpack(">i", stream.read(4))[0])


def _plan_through_pysparks_runner(
    source: PySparkLogStreamReader, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
) -> tuple[list[object], list[pa.RecordBatch]]:
    """What PySpark's own stream runner (``partitions_func``, which the JVM calls to plan a micro-batch) sends
    back: the partitions, and the records it sends with them (none when the tasks are to read them)."""
    from pyspark.sql.streaming import python_streaming_source_runner as runner

    request = io.BytesIO()
    for offsets in (start, end):
        text = json.dumps(offsets).encode()
        request.write(struct.pack(">i", len(text)) + text)
    request.seek(0)
    answer = io.BytesIO()
    data_source = PySparkLogDataSource({"path": "unused", "subscribe": "t"})
    runner.partitions_func(source, data_source, source_schema(False), 10_000, request, answer)
    answer.seek(0)
    partitions = [pickle.loads(answer.read(_int(answer))) for _ in range(_int(answer))]
    flag = _int(answer)
    if flag == runner.PREFETCHED_RECORDS_NOT_FOUND:
        return partitions, []
    assert flag == runner.NON_EMPTY_PYARROW_RECORD_BATCHES
    assert _int(answer) == SpecialLengths.START_ARROW_STREAM
    return partitions, list(pa.ipc.open_stream(answer))


def test_a_small_micro_batch_goes_to_spark_with_its_plan(uneven: Path) -> None:
    """A micro-batch of at most ``driverReadMaxOffsets`` offsets is read by the driver and handed to Spark with
    its single partition, through PySpark's own runner; a larger one is planned as tasks that read it."""
    options = SourceOptions.parse({"path": str(uneven), "subscribe": "t", "driverReadMaxOffsets": "20"}, streaming=True)
    source = DriverReadingStreamReader(options)
    start, small = {"t": {"0": 0, "1": 0, "2": 0}}, {"t": {"0": 10, "1": 5, "2": 1}}
    partitions, batches = _plan_through_pysparks_runner(source, start, small)
    (partition,) = partitions
    assert isinstance(partition, RangesPartition)
    expected = pa.Table.from_batches(list(read_ranges(partition)))
    assert pa.Table.from_batches(batches).to_pylist() == expected.to_pylist()
    assert sorted(zip(expected["partition"].to_pylist(), expected["offset"].to_pylist(), strict=True)) == [
        (p, o) for p, end in ((0, 10), (1, 5), (2, 1)) for o in range(end)
    ]
    partitions, batches = _plan_through_pysparks_runner(source, start, {"t": {"0": 101, "1": 11, "2": 1}})
    assert batches == [] and len(partitions) >= 1
    assert all(isinstance(p, RangesPartition) for p in partitions)
    given = {"path": str(uneven), "subscribe": "t", "driverReadMaxOffsets": "20", "minPartitions": "2"}
    several_tasks = DriverReadingStreamReader(SourceOptions.parse(given, streaming=True))
    partitions, batches = _plan_through_pysparks_runner(several_tasks, start, small)
    assert batches == [] and len(partitions) == 3  # minPartitions asks for tasks: they read


def test_driver_reads_are_refused_with_zero_and_bad_values_named() -> None:
    given = {"path": "/logs", "subscribe": "t"}
    assert SourceOptions.parse(given, streaming=True).driver_read_max_offsets == 10_000
    assert SourceOptions.parse(given | {"driverReadMaxOffsets": "0"}, streaming=True).driver_read_max_offsets == 0
    with pytest.raises(InvalidConfigError, match=r"driverReadMaxOffsets = '-1' is invalid; accepted: 0 or a positive"):
        SourceOptions.parse(given | {"driverReadMaxOffsets": "-1"}, streaming=True)


_READ_TASK = """
import sys
from pysparklog.datasource_v2 import RangesPartition, read_ranges
from pysparklog.spark.offset_ranges import OffsetRange
from pysparklog.structs import TopicPartition
pieces = (OffsetRange(TopicPartition("t", 0), 1, 9), OffsetRange(TopicPartition("t", 1), 0, 5))
for include_headers in (False, True):
    for read_committed in (False, True):
        task = RangesPartition(sys.argv[1], pieces, include_headers, read_committed, True)
        print(sum(batch.num_rows for batch in read_ranges(task)))
print("pandas" in sys.modules)
"""


def test_a_read_task_does_not_import_pandas(tmp_path: Path) -> None:
    """A fresh Python worker's first read would pay pandas' import (0.4 s) if the read path built Arrow columns with
    ``pa.array`` of NumPy arrays or read them with ``to_numpy``: nothing in a read needs pandas."""
    make_topic(tmp_path, "t", [10, 5])
    out = subprocess.run(
        [sys.executable, "-c", _READ_TASK, str(tmp_path)], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.split()
    assert out == ["13"] * 4 + ["False"]
