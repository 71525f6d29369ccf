"""The transaction coordinator and the transactional producer: Kafka's sessions, fencing, markers,
two-phase completion from another process, roll-forward after a crash, timeouts."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidOffsetError,
    MetadataChangedError,
    ProducerFencedError,
    PySparkLogError,
)
from pysparklog.offsets import OffsetStore
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings
from pysparklog.storage.transaction_index import READ_COMMITTED, READ_UNCOMMITTED
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from pysparklog.transactions import (
    MAX_SESSION_EPOCH,
    InvalidTxnStateError,
    PreparedTransaction,
    ProducerSession,
    TransactionCoordinator,
    TransactionState,
    validate_transactional_id,
)
from tests.conftest import keyed_table
from tests.storage.conftest import BACKENDS, NoLock, storage_on


@pytest.fixture
def logs(tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 2)
    return logs


def _values(logs: LogDirectory, partition: int, isolation: str) -> list[bytes]:
    log = logs.partition("t", partition)
    try:
        batches = list(log.read_arrow(0, isolation_level=isolation))
    finally:
        log.close()
    return [v for b in batches for v in b.column("value").to_pylist()]


def _producer(logs: LogDirectory, transactional_id: str = "tx", **settings: object) -> Producer:
    config = ProducerConfig.from_properties({"transactional.id": transactional_id, "linger.ms": 0, **settings})
    return Producer(logs, config)


def _send(producer: Producer, partition: int, *values: bytes) -> None:
    table = pa.table({"value": pa.array(values, pa.binary()), "partition": pa.array([partition] * len(values))})
    producer.send_arrow("t", table)


def test_committed_records_become_visible_to_read_committed_only_at_commit(logs: LogDirectory) -> None:
    with _producer(logs) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        _send(producer, 0, b"a", b"b")
        producer.send("t", b"c", partition=1).get(timeout=10)
        assert _values(logs, 0, READ_COMMITTED) == []
        assert _values(logs, 0, READ_UNCOMMITTED) == [b"a", b"b"]
        producer.commit_transaction()
    assert _values(logs, 0, READ_COMMITTED) == [b"a", b"b"]
    assert _values(logs, 1, READ_COMMITTED) == [b"c"]
    meta = TransactionCoordinator(logs).describe("tx")
    assert meta is not None and meta.state is TransactionState.COMPLETE_COMMIT
    assert meta.partitions == [TopicPartition("t", 0), TopicPartition("t", 1)]


def test_aborted_records_stay_hidden_from_read_committed(logs: LogDirectory) -> None:
    with _producer(logs) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        _send(producer, 0, b"gone")
        producer.abort_transaction()
        producer.begin_transaction()
        _send(producer, 0, b"kept")
        producer.commit_transaction()
    assert _values(logs, 0, READ_COMMITTED) == [b"kept"]
    assert _values(logs, 0, READ_UNCOMMITTED) == [b"gone", b"kept"]


def test_a_new_session_aborts_the_open_transaction_and_fences_the_old_producer(logs: LogDirectory) -> None:
    old = _producer(logs)
    old.init_transactions()
    old.begin_transaction()
    _send(old, 0, b"zombie")
    old_session = ProducerSession(old._transactions.producer_id, old._transactions.producer_epoch)
    with _producer(logs) as new:
        new.init_transactions()  # aborts the old session's transaction with a bumped epoch
        assert _values(logs, 0, READ_COMMITTED) == []
        with pytest.raises(ProducerFencedError):
            _send(old, 0, b"late")  # partition 0 saw the bumped epoch in the ABORT marker
        with pytest.raises(ProducerFencedError):  # a partition it never wrote: the coordinator refuses it
            TransactionCoordinator(logs).add_partitions("tx", old_session, [TopicPartition("t", 1)])
        new.begin_transaction()
        _send(new, 0, b"fresh")
        new.commit_transaction()
    old.close()
    assert _values(logs, 0, READ_COMMITTED) == [b"fresh"]


def test_sending_outside_a_transaction_is_refused(logs: LogDirectory) -> None:
    with _producer(logs) as producer:
        with pytest.raises(PySparkLogError, match="before completing a call to initTransactions"):
            producer.send("t", b"x")
        producer.init_transactions()
        with pytest.raises(PySparkLogError, match="Cannot call send in state READY"):
            _send(producer, 0, b"x")
    with Producer(logs) as plain, pytest.raises(PySparkLogError, match="without setting the transactional.id"):
        plain.begin_transaction()


def test_transactional_id_needs_idempotence() -> None:
    with pytest.raises(InvalidConfigError, match="without also enabling idempotence"):
        ProducerConfig.from_properties({"transactional.id": "x", "enable.idempotence": "false"})


def _complete_in_another_process(log_dir: str, prepared: PreparedTransaction, commit: bool) -> None:
    coordinator = TransactionCoordinator(LogDirectory(log_dir))
    coordinator.end_transaction(prepared.transactional_id, prepared.session, commit=commit)


@pytest.mark.parametrize("commit", [True, False])
def test_a_prepared_transaction_is_ended_by_another_process(logs: LogDirectory, commit: bool) -> None:
    with _producer(logs) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        _send(producer, 1, b"two-phase")
        prepared = producer.prepare_transaction()
        with pytest.raises(PySparkLogError, match="PREPARED"):
            _send(producer, 1, b"more")
    process = multiprocessing.get_context("spawn").Process(
        target=_complete_in_another_process, args=(logs.path, prepared, commit)
    )
    process.start()
    process.join(60)
    assert process.exitcode == 0
    assert _values(logs, 1, READ_COMMITTED) == ([b"two-phase"] if commit else [])
    coordinator = TransactionCoordinator(logs)
    coordinator.end_transaction("tx", prepared.session, commit=commit)  # a repeat does nothing
    with pytest.raises(InvalidTxnStateError, match="cannot"):
        coordinator.end_transaction("tx", prepared.session, commit=not commit)


def test_a_decision_left_unfinished_by_a_crash_is_rolled_forward(
    logs: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _producer(logs) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        _send(producer, 0, b"decided")
        prepared = producer.prepare_transaction()
    coordinator = TransactionCoordinator(logs)

    def crash(*_: object) -> None:
        raise OSError("killed while writing markers")

    monkeypatch.setattr(TransactionCoordinator, "_write_markers", crash)
    with pytest.raises(OSError):
        coordinator.end_transaction("tx", prepared.session, commit=True)
    monkeypatch.undo()
    meta = coordinator.describe("tx")
    assert meta is not None and meta.state is TransactionState.PREPARE_COMMIT
    assert _values(logs, 0, READ_COMMITTED) == []
    session = coordinator.init_producer_id("tx", 60000)  # the next session finishes the commit first
    assert _values(logs, 0, READ_COMMITTED) == [b"decided"]
    assert session == ProducerSession(prepared.session.producer_id, prepared.session.producer_epoch + 1)


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(logs: LogDirectory) -> None:
    now = [1_000_000]
    coordinator = TransactionCoordinator(logs, clock=lambda: now[0])
    session = coordinator.init_producer_id("slow", 5000)
    coordinator.add_partitions("slow", session, [TopicPartition("t", 0)])
    now[0] += 5000
    assert coordinator.abort_expired() == []
    now[0] += 1
    assert coordinator.abort_expired() == ["slow"]
    meta = coordinator.describe("slow")
    assert meta is not None and meta.state is TransactionState.COMPLETE_ABORT
    assert meta.producer_epoch == session.producer_epoch + 1
    with pytest.raises(ProducerFencedError):
        coordinator.add_partitions("slow", session, [TopicPartition("t", 1)])


def test_an_exhausted_epoch_moves_to_a_new_producer_id(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    first = coordinator.init_producer_id("old", 60000)
    meta = coordinator.describe("old")
    assert meta is not None
    meta.producer_epoch = MAX_SESSION_EPOCH
    Path(coordinator._paths("old")[0]).write_bytes(meta.encode())
    second = coordinator.init_producer_id("old", 60000)
    assert second.producer_epoch == 0 and second.producer_id != first.producer_id


def test_a_stale_marker_is_fenced_by_the_log(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    session = coordinator.init_producer_id("m", 60000)
    coordinator.add_partitions("m", session, [TopicPartition("t", 0)])
    log = logs.partition("t", 0)
    newer = BatchSettings(producer_id=session.producer_id, producer_epoch=session.producer_epoch + 2, base_sequence=0)
    log.append_arrow(keyed_table(1), newer)
    log.close()
    with pytest.raises(ProducerFencedError, match="marker"):
        coordinator.end_transaction("m", session, commit=False)


def test_forget_removes_only_finished_ids(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    session = coordinator.init_producer_id("once", 60000)
    coordinator.add_partitions("once", session, [TopicPartition("t", 0)])
    with pytest.raises(InvalidTxnStateError):
        coordinator.forget("once")
    coordinator.end_transaction("once", session, commit=True)
    coordinator.forget("once")
    assert coordinator.describe("once") is None and coordinator.transactional_ids() == []


def test_a_prepared_transaction_outlives_its_timeout(logs: LogDirectory) -> None:
    """KIP-939: once prepared, only its end or a new session decides it; the timeout does not."""
    now = [1_000_000]
    coordinator = TransactionCoordinator(logs, clock=lambda: now[0])
    session = coordinator.init_producer_id("two-phase", 1000)
    coordinator.add_partitions("two-phase", session, [TopicPartition("t", 0)])
    coordinator.prepare_transaction("two-phase", session)
    now[0] += 10_000
    assert coordinator.abort_expired() == []
    with pytest.raises(InvalidTxnStateError, match="prepared"):
        coordinator.add_partitions("two-phase", session, [TopicPartition("t", 1)])
    with coordinator.hold(["two-phase"]) as states:
        meta = states["two-phase"]
        assert meta is not None and meta.prepared and meta.session == session
    coordinator.end_transaction("two-phase", session, commit=True)
    meta = coordinator.describe("two-phase")
    assert meta is not None and meta.state is TransactionState.COMPLETE_COMMIT


def test_another_ids_state_file_under_an_ids_name_is_refused(logs: LogDirectory) -> None:
    for transactional_id in ("a", "b"):
        with Producer(logs, ProducerConfig.from_properties({"transactional.id": transactional_id})) as producer:
            producer.init_transactions()
    coordinator = TransactionCoordinator(logs)
    copied = coordinator._paths("b")[0]
    with open(copied, "rb") as f:
        data = f.read()
    with open(coordinator._paths("a")[0], "wb") as f:
        f.write(data)
    # Used, it would give both ids one producer session: each would take the other's batches for retries.
    with pytest.raises(CorruptRecordError, match="holds the state of transactional id 'b', not of 'a'"):
        coordinator.describe("a")
    with pytest.raises(CorruptRecordError, match="not of 'a'"):
        Producer(logs, ProducerConfig.from_properties({"transactional.id": "a"})).init_transactions()


@pytest.fixture(params=sorted(BACKENDS))
def logs_on_each_backend(request: pytest.FixtureRequest, tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(storage_on(request.param, request, tmp_path))
    logs.topics.create("t", 2)
    return logs


def test_a_holder_whose_lock_lapsed_fails_rather_than_take_the_state_back(
    logs_on_each_backend: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coordinator that read an open transaction, lost its lease while it stalled, and saved its decision anyway
    would take the state back from the next holder's CompleteCommit of epoch 2 to PrepareCommit of epoch 0, a
    session fenced since: the id would be stuck on a decision no producer can finish."""
    logs = logs_on_each_backend
    coordinator = TransactionCoordinator(logs)
    first = coordinator.init_producer_id("tx", 60000)
    coordinator.add_partitions("tx", first, [TopicPartition("t", 0)])
    state_lock, lock = coordinator._paths("tx")[1], logs.storage.lock
    # Every holder of the id's lock holds a lapsed lease, excluding none (the partitions keep theirs).
    monkeypatch.setattr(logs.storage, "lock", lambda path: NoLock() if path == state_lock else lock(path))
    newer: list[ProducerSession] = []

    def the_next_holder_acts_meanwhile() -> int:  # the stale holder's clock, read between its read and its save
        newer.append(coordinator.init_producer_id("tx", 60000))  # aborts the open transaction, fencing it
        coordinator.end_transaction("tx", newer[0], commit=True)
        return 0

    stale = TransactionCoordinator(logs, clock=the_next_holder_acts_meanwhile)
    with pytest.raises(MetadataChangedError, match=r"pysparklog-txn\.tx\.json changed after this process read it"):
        stale.end_transaction("tx", first, commit=True)
    meta = coordinator.describe("tx")
    assert meta is not None and (meta.state, meta.session) == (TransactionState.COMPLETE_COMMIT, newer[0])
    assert newer[0].producer_epoch == first.producer_epoch + 2
    assert _values(logs, 0, READ_COMMITTED) == _values(logs, 0, READ_UNCOMMITTED) == []
    coordinator.close()
    stale.close()


@pytest.mark.parametrize("transactional_id", ["", "\udcff", None])
def test_transactional_ids_are_non_empty_utf8_text(transactional_id: str) -> None:
    """``\\udcff`` is what a command-line byte that is not UTF-8 becomes; it made a UnicodeEncodeError."""
    with pytest.raises(
        InvalidConfigError, match="transactional.id = .* is invalid; accepted: a non-empty string of UTF-8"
    ):
        validate_transactional_id(transactional_id)


def test_a_transactions_offsets_are_committed_only_when_it_commits(logs: LogDirectory) -> None:
    """TxnOffsetCommit's offsets are held by the coordinator: the group sees them after the COMMIT markers, and
    never those of an aborted transaction."""
    coordinator = TransactionCoordinator(logs)
    offsets = OffsetStore(logs)
    try:
        session = coordinator.init_producer_id("tx", 60000)
        coordinator.add_offsets("tx", session, "g")
        coordinator.commit_offsets("tx", session, "g", {TopicPartition("t", 0): OffsetAndMetadata(5, "m")})
        coordinator.commit_offsets("tx", session, "g", {TopicPartition("t", 0): OffsetAndMetadata(7, "m")})
        assert offsets.committed("g") == {}
        coordinator.end_transaction("tx", session, commit=True)
        assert offsets.committed("g") == {TopicPartition("t", 0): OffsetAndMetadata(7, "m")}

        coordinator.add_offsets("tx", session, "g")
        coordinator.commit_offsets("tx", session, "g", {TopicPartition("t", 0): OffsetAndMetadata(9)})
        coordinator.end_transaction("tx", session, commit=False)
        assert offsets.committed("g") == {TopicPartition("t", 0): OffsetAndMetadata(7, "m")}
    finally:
        offsets.close()
        coordinator.close()


def test_offsets_need_their_group_added_and_a_valid_offset(logs: LogDirectory) -> None:
    coordinator = TransactionCoordinator(logs)
    session = coordinator.init_producer_id("tx", 60000)
    with pytest.raises(InvalidTxnStateError, match="has not added group 'g'"):
        coordinator.commit_offsets("tx", session, "g", {TopicPartition("t", 0): OffsetAndMetadata(1)})
    coordinator.add_offsets("tx", session, "g")
    with pytest.raises(InvalidOffsetError, match="offset -2"):
        coordinator.commit_offsets("tx", session, "g", {TopicPartition("t", 0): OffsetAndMetadata(-2)})
    meta = coordinator.describe("tx")
    assert meta is not None and meta.offsets == {"g": {}}


def test_a_producer_bumping_its_session_must_hold_the_current_one(logs: LogDirectory) -> None:
    """KIP-360: InitProducerId with the producer's own session bumps it; with an older one it is fenced."""
    coordinator = TransactionCoordinator(logs)
    first = coordinator.init_producer_id("tx", 60000)
    second = coordinator.init_producer_id("tx", 60000, expected=first)
    assert second == ProducerSession(first.producer_id, first.producer_epoch + 1)
    # Asked again (its answer lost), the bump answers the session it made instead of bumping again...
    assert coordinator.init_producer_id("tx", 60000, expected=first) == second
    # ...but not once another producer has taken the id, nor for an older session.
    third = coordinator.init_producer_id("tx", 60000)
    for stale in (first, second, ProducerSession(first.producer_id, first.producer_epoch - 1)):
        with pytest.raises(ProducerFencedError):
            coordinator.init_producer_id("tx", 60000, expected=stale)
    assert coordinator.describe("tx") is not None and coordinator.init_producer_id("tx", 60000, expected=third) == (
        ProducerSession(third.producer_id, third.producer_epoch + 1)
    )


def test_a_bump_asked_again_after_its_producers_transaction_timed_out_is_fenced(logs: LogDirectory) -> None:
    clock = [0]
    coordinator = TransactionCoordinator(logs, clock=lambda: clock[0])
    first = coordinator.init_producer_id("tx", 100)
    second = coordinator.init_producer_id("tx", 100, expected=first)
    coordinator.add_partitions("tx", second, [TopicPartition("t", 0)])
    clock[0] += 1000
    assert coordinator.abort_expired() == ["tx"]
    with pytest.raises(ProducerFencedError):
        coordinator.init_producer_id("tx", 100, expected=first)


@pytest.mark.parametrize("commit", [True, False])
def test_the_producers_offsets_commit_with_its_transaction(logs: LogDirectory, commit: bool) -> None:
    """Producer.send_offsets_to_transaction: a consume-transform-produce loop's input offsets go with its output."""
    with _producer(logs) as producer, OffsetStore(logs) as offsets:
        with pytest.raises(PySparkLogError, match="before completing a call to initTransactions"):
            producer.send_offsets_to_transaction({TopicPartition("t", 0): OffsetAndMetadata(1)}, "g")
        producer.init_transactions()
        producer.begin_transaction()
        _send(producer, 1, b"out")
        producer.send_offsets_to_transaction({TopicPartition("t", 0): OffsetAndMetadata(12, "m")}, "g")
        assert offsets.committed("g") == {}
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
        assert offsets.committed("g") == ({TopicPartition("t", 0): OffsetAndMetadata(12, "m")} if commit else {})
    assert _values(logs, 1, READ_COMMITTED) == ([b"out"] if commit else [])
