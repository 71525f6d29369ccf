"""The exactly-once sink protocol without Spark: tasks' prepared transactions, the driver's decision, and
every way a micro-batch can be run again (a task retry, a driver killed before or after its decision)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from pysparklog.errors import MetadataChangedError, SinkCommitError, UnknownTopicError
from pysparklog.spark.sink import SinkCommitLog, TaskWrite, coordinator_for, streaming_sink_id, write_task
from pysparklog.spark.sink_options import SinkColumns, SinkOptions, check_sink_schema
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.transaction_index import READ_COMMITTED, READ_UNCOMMITTED
from pysparklog.transactions import TransactionCoordinator, TransactionState
from tests.storage.conftest import BACKENDS, NoLock, storage_on

_SCHEMA = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
QUERY = "9f1c2d3e-0000-4000-8000-000000000001"


@pytest.fixture
def logs(tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(tmp_path)
    logs.topics.create("out", 2)
    return logs


def _options(logs: LogDirectory, **extra: str) -> tuple[SinkOptions, SinkColumns]:
    options = SinkOptions.parse({"path": logs.path, "topic": "out", **extra})
    return options, check_sink_schema(_SCHEMA, options.topic)


def _rows(*values: str) -> list[pa.RecordBatch]:
    keys = pa.array([f"k{v}" for v in values], pa.string())
    return [pa.RecordBatch.from_arrays([keys, pa.array([v.encode() for v in values], pa.binary())], ["key", "value"])]


def _task(logs: LogDirectory, batch_id: int, task: int, *values: str, query: str = QUERY, **extra: str) -> TaskWrite:
    options, columns = _options(logs, **extra)
    sink_id = streaming_sink_id(options, query)
    return write_task(options, columns, _rows(*values), sink_id=sink_id, query_id=query, batch_id=batch_id, task=task)


def _commit(logs: LogDirectory, batch_id: int, writes: list[TaskWrite], query: str = QUERY) -> None:
    SinkCommitLog(logs, writes[0].sink_id).commit(query, batch_id, writes)


def _values(logs: LogDirectory, isolation: str = READ_COMMITTED) -> list[bytes]:
    values: list[bytes] = []
    for partition in (0, 1):
        with logs.partition("out", partition) as log:
            values += [v for b in log.read_arrow(0, isolation_level=isolation) for v in b.column("value").to_pylist()]
    return sorted(values)


def test_a_micro_batch_becomes_visible_when_the_driver_commits_it(logs: LogDirectory) -> None:
    writes = [_task(logs, 0, 0, "a", "b"), _task(logs, 0, 1, "c")]
    assert all(w.transaction is not None and w.records for w in writes)
    assert _values(logs) == [] and _values(logs, READ_UNCOMMITTED) == [b"a", b"b", b"c"]
    _commit(logs, 0, writes)
    assert _values(logs) == [b"a", b"b", b"c"]
    _commit(logs, 0, writes)  # Spark may commit a batch again after a restart: nothing changes
    assert _values(logs, READ_UNCOMMITTED) == [b"a", b"b", b"c"]


def test_a_retried_task_aborts_its_earlier_attempt(logs: LogDirectory) -> None:
    _task(logs, 0, 0, "lost")  # the attempt that failed after writing
    retry = _task(logs, 0, 0, "kept")
    _commit(logs, 0, [retry])
    assert _values(logs) == [b"kept"]
    assert _values(logs, READ_UNCOMMITTED) == [b"kept", b"lost"]


def test_a_batch_run_again_before_its_decision_is_written_afresh(logs: LogDirectory) -> None:
    _task(logs, 0, 0, "x")  # the driver died before committing
    _task(logs, 0, 1, "y")
    rerun = [_task(logs, 0, 0, "x"), _task(logs, 0, 1, "y")]
    _commit(logs, 0, rerun)
    assert _values(logs) == [b"x", b"y"]


def test_a_batch_run_again_after_its_decision_is_not_written_again(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = [_task(logs, 0, 0, "x"), _task(logs, 0, 1, "y")]

    def killed(*_: object, **__: object) -> None:
        raise OSError("driver killed while committing")

    monkeypatch.setattr(TransactionCoordinator, "end_transaction", killed)
    with pytest.raises(OSError):
        _commit(logs, 0, writes)
    monkeypatch.undo()
    assert _values(logs) == []
    rerun = [_task(logs, 0, 0, "x"), _task(logs, 0, 1, "y")]
    assert [w.transaction for w in rerun] == [None, None] and [w.records for w in rerun] == [0, 0]
    _commit(logs, 0, rerun)  # finishes the recorded decision
    assert _values(logs) == [b"x", b"y"] == _values(logs, READ_UNCOMMITTED)
    _commit(logs, 1, [_task(logs, 1, 0, "z")])
    assert _values(logs) == [b"x", b"y", b"z"]


def test_a_transaction_fenced_by_another_attempt_fails_the_commit_and_commits_nothing(logs: LogDirectory) -> None:
    first, other = _task(logs, 0, 0, "first"), _task(logs, 0, 1, "other")
    _task(logs, 0, 0, "speculative")  # a second attempt of task 0 fences the first
    with pytest.raises(SinkCommitError, match="fenced by another attempt"):
        _commit(logs, 0, [first, other])
    assert _values(logs) == []
    assert SinkCommitLog(logs, first.sink_id).read() is None  # no decision: the re-run writes it all


def test_abort_closes_every_open_transaction_of_the_sink(logs: LogDirectory) -> None:
    reported = _task(logs, 0, 0, "a")
    _task(logs, 0, 1, "b")  # its task failed before reporting
    other_query = _task(logs, 0, 0, "c", query="another-query")
    aborted = SinkCommitLog(logs, reported.sink_id).abort()
    assert aborted == [f"{reported.sink_id}-0", f"{reported.sink_id}-1"]
    _commit(logs, 0, [other_query], query="another-query")
    assert _values(logs) == [b"c"]
    for partition in (0, 1):
        with logs.partition("out", partition) as log:
            assert log.last_stable_offset == log.log_end_offset  # nothing left open
    coordinator = TransactionCoordinator(logs)
    states = {t: coordinator.describe(t) for t in coordinator.transactional_ids()}
    assert {t: s.state for t, s in states.items() if s} == {
        f"{reported.sink_id}-0": TransactionState.COMPLETE_ABORT,
        f"{reported.sink_id}-1": TransactionState.COMPLETE_ABORT,
        f"{other_query.sink_id}-0": TransactionState.COMPLETE_COMMIT,
    }


def test_a_new_query_reusing_a_prefix_is_not_taken_for_the_old_one(logs: LogDirectory) -> None:
    old = _task(logs, 0, 0, "old", query="q-old", **{"kafka.transactional.id": "shared"})
    _commit(logs, 0, [old], query="q-old")
    new = _task(logs, 0, 0, "new", query="q-new", **{"kafka.transactional.id": "shared"})
    assert new.transaction is not None and new.sink_id == old.sink_id == "shared"
    _commit(logs, 0, [new], query="q-new")
    assert _values(logs) == [b"new", b"old"]


def test_at_least_once_appends_without_transactions(logs: LogDirectory) -> None:
    write = _task(logs, 0, 0, "plain", deliveryGuarantee="at-least-once")
    assert write.transaction is None and write.records == 1
    assert _values(logs) == [b"plain"]
    assert TransactionCoordinator(logs).transactional_ids() == []


def test_missing_topics_are_created_or_refused(logs: LogDirectory) -> None:
    options, columns = _options(logs, topic="fresh")
    write_task(options, columns, _rows("v"), sink_id="s", query_id="q", batch_id=0, task=0)
    assert logs.topics.get("fresh").partitions == 1
    options, columns = _options(logs, topic="absent", autoCreateTopics="false")
    with pytest.raises(UnknownTopicError, match="autoCreateTopics is false"):
        write_task(options, columns, _rows("v"), sink_id="s2", query_id="q", batch_id=0, task=0)
    assert "absent" not in logs.topics.names()


def test_the_log_directorys_auto_create_setting_decides_unless_the_option_is_given(logs: LogDirectory) -> None:
    """As Spark's Kafka sink against a broker with ``auto.create.topics.enable=false``: the option left unset, the
    log directory refuses; ``autoCreateTopics=true`` is the query author's explicit wish and creates."""
    logs.storage.put(logs.storage.join("server.properties"), b"auto.create.topics.enable=false\nnum.partitions=2\n")
    options, columns = _options(logs, topic="refused")
    with pytest.raises(UnknownTopicError, match="sets auto.create.topics.enable=false, so it is not created"):
        write_task(options, columns, _rows("v"), sink_id="s", query_id="q", batch_id=0, task=0)
    assert "refused" not in logs.topics.names()
    options, columns = _options(logs, topic="wished", autoCreateTopics="true")
    write_task(options, columns, _rows("v"), sink_id="s2", query_id="q", batch_id=0, task=0)
    assert logs.topics.get("wished").partitions == 2


def test_a_re_run_with_fewer_tasks_aborts_the_transactions_of_the_missing_ones(logs: LogDirectory) -> None:
    """A re-run may plan fewer tasks: no new session would ever abort the others' transactions, prepared ones
    never time out, and they would hold back the last stable offset for good."""
    for task in range(4):
        _task(logs, 0, task, f"first-{task}")  # the driver died before deciding
    rerun = [_task(logs, 0, 0, "a", "b"), _task(logs, 0, 1, "c")]
    _commit(logs, 0, rerun)
    assert _values(logs) == [b"a", b"b", b"c"]
    for partition in (0, 1):
        with logs.partition("out", partition) as log:
            assert log.last_stable_offset == log.log_end_offset
    coordinator = TransactionCoordinator(logs)
    orphan = coordinator.describe(f"{rerun[0].sink_id}-3")
    assert orphan is not None and orphan.state is TransactionState.COMPLETE_ABORT and not orphan.prepared


@pytest.fixture(params=sorted(BACKENDS))
def logs_on_each_backend(request: pytest.FixtureRequest, tmp_path: Path) -> LogDirectory:
    return LogDirectory(storage_on(request.param, request, tmp_path))


def test_a_driver_whose_lock_lapsed_fails_rather_than_record_an_older_decision(
    logs_on_each_backend: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver that read the sink's decision, lost its lease while it stalled, and recorded its own anyway would
    take the decision back to an older micro-batch than the one the next driver recorded meanwhile: a restart would
    then write the batches in between again."""
    logs = logs_on_each_backend
    sink = SinkCommitLog(logs, "sink")
    sink.commit(QUERY, 0, [])
    lock = logs.storage.lock
    monkeypatch.setattr(logs.storage, "lock", lambda path: NoLock() if path == sink._lock_path else lock(path))
    coordinator = coordinator_for(logs)
    hold = coordinator.hold
    meanwhile: list[int] = []

    def the_next_driver_decides_meanwhile(transactional_ids: list[str]) -> AbstractContextManager[object]:
        if not meanwhile:  # the stale driver's decision, between its read of the file and its write
            meanwhile.append(2)
            SinkCommitLog(logs, "sink").commit(QUERY, 1, [])
            SinkCommitLog(logs, "sink").commit(QUERY, 2, [])
        return hold(transactional_ids)

    monkeypatch.setattr(coordinator, "hold", the_next_driver_decides_meanwhile)
    with pytest.raises(MetadataChangedError, match=r"pysparklog-sink\.sink\.json changed after this process read it"):
        SinkCommitLog(logs, "sink").commit(QUERY, 1, [])
    decision = sink.read()
    assert decision is not None and (decision.batch_id, decision.complete) == (2, True)
    assert sink.decided(QUERY, 2)
