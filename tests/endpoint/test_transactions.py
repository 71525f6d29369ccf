"""Idempotent and transactional producers through the endpoint: librdkafka's idempotent producer across lost
responses, and the transaction coordinator's APIs at the wire (what a client would not send, and every refusal)
with the records, markers and offsets checked in the log directory by pysparklog's own readers."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import random
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v4.response import AddOffsetsToTxnResponse
from kio.schema.add_partitions_to_txn.v1 import request as add_partitions_v1
from kio.schema.add_partitions_to_txn.v1 import response as add_partitions_v1_response
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions_v3
from kio.schema.add_partitions_to_txn.v3 import response as add_partitions_v3_response
from kio.schema.add_partitions_to_txn.v5 import request as add_partitions_v5
from kio.schema.add_partitions_to_txn.v5 import response as add_partitions_v5_response
from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.end_txn.v4.response import EndTxnResponse
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as InitProducerIdRequestV3
from kio.schema.init_producer_id.v3.response import InitProducerIdResponse as InitProducerIdResponseV3
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.txn_offset_commit.v4 import request as txn_offset_commit_v4
from kio.schema.txn_offset_commit.v4.response import TxnOffsetCommitResponse
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.apis.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    APIS,
    END_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
)
from pysparklog.errors import InvalidConfigError, ProducerFencedError
from pysparklog.offsets import OffsetStore
from pysparklog.producer import Producer as LogProducer
from pysparklog.producer import ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings, encode_arrow
from pysparklog.storage.transaction_index import READ_COMMITTED
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from pysparklog.transactions import TransactionCoordinator, TransactionState
from tests.conftest import BUCKET
from tests.endpoint.kafka_wire import SIZE, WireClient
from tests.endpoint.lossy_proxy import LossyProxy

TOPIC = "payments"
GROUP = "billing"
PRODUCE = 0
SENT = [f"record-{i}".encode() for i in range(3000)]


def _init(
    client: WireClient, transactional_id: str | None, timeout_ms: int = 60000, producer_id: int = -1, epoch: int = -1
) -> Any:
    request = InitProducerIdRequest(
        transactional_id=None if transactional_id is None else TransactionalId(transactional_id),
        transaction_timeout=i32Timedelta.parse(timedelta(milliseconds=timeout_ms)),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )
    return client.request(request, InitProducerIdResponse)


def _add_partitions(client: WireClient, transactional_id: str, session: Any, partitions: dict[str, list[int]]) -> Any:
    topics = tuple(
        add_partitions_v3.AddPartitionsToTxnTopic(name=TopicName(t), partitions=tuple(i32(n) for n in p))
        for t, p in partitions.items()
    )
    request = add_partitions_v3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(transactional_id),
        v3_and_below_producer_id=session.producer_id,
        v3_and_below_producer_epoch=session.producer_epoch,
        v3_and_below_topics=topics,
    )
    return client.request(request, add_partitions_v3_response.AddPartitionsToTxnResponse)


def _errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (topic.name, result.partition_index): result.partition_error_code
        for topic in response.results_by_topic_v3_and_below
        for result in topic.results_by_partition
    }


def _produce(client: WireClient, session: Any, partition: int, values: list[bytes], sequence: int) -> ErrorCode:
    """A transactional batch of ``values`` through Produce, as a producer of ``session`` sends it."""
    settings = BatchSettings(
        producer_id=session.producer_id,
        producer_epoch=session.producer_epoch,
        base_sequence=sequence,
        transactional=True,
    )
    records = b"".join(
        bytes(e.data) for e in encode_arrow(pa.table({"value": pa.array(values, pa.binary())}), settings)
    )
    partition_data = produce_v9.PartitionProduceData(index=i32(partition), records=Records(records))
    request = produce_v9.ProduceRequest(
        transactional_id=TransactionalId("tx"),
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(seconds=10)),
        topic_data=(produce_v9.TopicProduceData(name=TopicName(TOPIC), partition_data=(partition_data,)),),
    )
    response = client.request(request, ProduceResponse)
    error: ErrorCode = response.responses[0].partition_responses[0].error_code
    return error


def _end(client: WireClient, transactional_id: str, session: Any, *, commit: bool) -> ErrorCode:
    request = EndTxnRequest(
        transactional_id=TransactionalId(transactional_id),
        producer_id=session.producer_id,
        producer_epoch=session.producer_epoch,
        committed=commit,
    )
    error: ErrorCode = client.request(request, EndTxnResponse).error_code
    return error


def _add_offsets(client: WireClient, session: Any, group: str = GROUP) -> ErrorCode:
    request = AddOffsetsToTxnRequest(
        transactional_id=TransactionalId("tx"),
        producer_id=session.producer_id,
        producer_epoch=session.producer_epoch,
        group_id=GroupId(group),
    )
    error: ErrorCode = client.request(request, AddOffsetsToTxnResponse).error_code
    return error


def _commit_offsets(
    client: WireClient, session: Any, offsets: dict[int, tuple[int, str]], member_id: str = "", generation: int = -1
) -> dict[int, ErrorCode]:
    partitions = tuple(
        txn_offset_commit_v4.TxnOffsetCommitRequestPartition(
            partition_index=i32(p),
            committed_offset=i64(offset),
            committed_leader_epoch=i32(-1),
            committed_metadata=metadata,
        )
        for p, (offset, metadata) in offsets.items()
    )
    request = txn_offset_commit_v4.TxnOffsetCommitRequest(
        transactional_id=TransactionalId("tx"),
        group_id=GroupId(GROUP),
        producer_id=session.producer_id,
        producer_epoch=session.producer_epoch,
        member_id=member_id,
        generation_id=i32(generation),
        topics=(txn_offset_commit_v4.TxnOffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=partitions),),
    )
    response = client.request(request, TxnOffsetCommitResponse)
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def _values(log_dir: LogDirectory, partition: int, isolation: str = READ_COMMITTED) -> list[bytes]:
    with log_dir.partition(TOPIC, partition) as log:
        return [v for batch in log.read_arrow(isolation_level=isolation) for v in batch.column("value").to_pylist()]


@pytest.fixture
def client(endpoint: Endpoint, log_dir: LogDirectory) -> Iterator[WireClient]:
    log_dir.topics.create(TOPIC, 2)
    with WireClient(endpoint.bootstrap) as connected:
        yield connected


# -- InitProducerId -------------------------------------------------------------------------------------------------


def test_an_idempotent_producer_gets_a_producer_id_of_its_own(client: WireClient) -> None:
    first, second = _init(client, None), _init(client, None)
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    assert first.producer_id >= 0 and second.producer_id != first.producer_id
    assert (first.producer_epoch, second.producer_epoch) == (0, 0)


def test_a_new_session_of_a_transactional_id_bumps_its_epoch_and_an_older_session_is_fenced(
    client: WireClient,
) -> None:
    first = _init(client, "tx")
    second = _init(client, "tx")
    assert second.error_code == ErrorCode.none
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    # KIP-360: a producer bumps its own session; one holding an older session is fenced, in the code its version knows.
    bumped = _init(client, "tx", producer_id=second.producer_id, epoch=second.producer_epoch)
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.none, second.producer_epoch + 1)
    retried = _init(client, "tx", producer_id=second.producer_id, epoch=second.producer_epoch)  # its answer lost
    assert (retried.error_code, retried.producer_epoch) == (ErrorCode.none, bumped.producer_epoch)
    stale = _init(client, "tx", producer_id=first.producer_id, epoch=first.producer_epoch)
    assert stale.error_code == ErrorCode.producer_fenced
    old = InitProducerIdRequestV3(
        transactional_id=TransactionalId("tx"),
        transaction_timeout=i32Timedelta.parse(timedelta(minutes=1)),
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
    )
    assert client.request(old, InitProducerIdResponseV3).error_code == ErrorCode.invalid_producer_epoch


def test_an_empty_id_or_a_timeout_past_the_brokers_maximum_is_refused(client: WireClient) -> None:
    assert _init(client, "").error_code == ErrorCode.invalid_request
    session = _init(client, "tx")
    assert _errors(_add_partitions(client, "", session, {TOPIC: [0]})) == {(TOPIC, 0): ErrorCode.invalid_request}
    assert _end(client, "", session, commit=True) == ErrorCode.invalid_request
    assert _init(client, "tx", timeout_ms=900_001).error_code == ErrorCode.invalid_transaction_timeout
    assert _init(client, "tx", timeout_ms=0).error_code == ErrorCode.invalid_transaction_timeout


def test_a_storage_failure_is_answered_as_a_coordinator_not_available_and_the_connection_kept(
    client: WireClient, log_dir: LogDirectory
) -> None:
    """A state file that cannot be read (here a directory in its place) fails the request, not the endpoint."""
    (Path(log_dir.path) / "pysparklog-txn.broken.json").mkdir()
    assert _init(client, "broken").error_code == ErrorCode.coordinator_not_available
    assert _init(client, "tx").error_code == ErrorCode.none


def test_a_transaction_setting_kafka_refuses_stops_the_endpoint_at_its_start(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "server.properties").write_text("transaction.max.timeout.ms=0\n")
    with pytest.raises(InvalidConfigError, match=r"server.properties.*transaction.max.timeout.ms"):
        Endpoint(LogDirectory(str(tmp_path / "logs")), EndpointConfig(port=0)).start()


# -- AddPartitionsToTxn, Produce, EndTxn ----------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_writes_its_marker_to_every_partition_of_the_transaction(
    client: WireClient, log_dir: LogDirectory, commit: bool
) -> None:
    session = _init(client, "tx")
    errors = _errors(_add_partitions(client, "tx", session, {TOPIC: [0, 1]}))
    assert errors == {(TOPIC, 0): ErrorCode.none, (TOPIC, 1): ErrorCode.none}
    assert _produce(client, session, 0, [b"a", b"b"], 0) == ErrorCode.none
    assert _produce(client, session, 1, [b"c"], 0) == ErrorCode.none
    assert _values(log_dir, 0) == [] and _values(log_dir, 1) == []  # open: nothing stable yet
    assert _end(client, "tx", session, commit=commit) == ErrorCode.none
    assert (_values(log_dir, 0), _values(log_dir, 1)) == (([b"a", b"b"], [b"c"]) if commit else ([], []))
    assert _values(log_dir, 0, "read_uncommitted") == [b"a", b"b"]
    # A retry of the completed end succeeds; the opposite decision is refused.
    assert _end(client, "tx", session, commit=commit) == ErrorCode.none
    assert _end(client, "tx", session, commit=not commit) == ErrorCode.invalid_txn_state


def test_partitions_that_do_not_exist_are_refused_and_the_others_not_attempted(client: WireClient) -> None:
    session = _init(client, "tx")
    errors = _errors(_add_partitions(client, "tx", session, {TOPIC: [0, 7], "missing": [0]}))
    assert errors == {
        (TOPIC, 0): ErrorCode.operation_not_attempted,
        (TOPIC, 7): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }


def test_a_fenced_session_cannot_add_partitions_or_end_the_transaction(
    client: WireClient, log_dir: LogDirectory
) -> None:
    old = _init(client, "tx")
    assert _errors(_add_partitions(client, "tx", old, {TOPIC: [0]})) == {(TOPIC, 0): ErrorCode.none}
    assert _produce(client, old, 0, [b"zombie"], 0) == ErrorCode.none
    new = _init(client, "tx")  # aborts the old session's transaction
    assert _errors(_add_partitions(client, "tx", old, {TOPIC: [1]})) == {(TOPIC, 1): ErrorCode.producer_fenced}
    assert _end(client, "tx", old, commit=True) == ErrorCode.producer_fenced
    assert _produce(client, old, 0, [b"late"], 1) != ErrorCode.none  # the log fences the old epoch too
    assert _end(client, "tx", new, commit=True) == ErrorCode.none
    assert _values(log_dir, 0) == []
    # Before KIP-588 (v2) clients knew only INVALID_PRODUCER_EPOCH.
    request = add_partitions_v1.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId("tx"),
        v3_and_below_producer_id=old.producer_id,
        v3_and_below_producer_epoch=old.producer_epoch,
        v3_and_below_topics=(add_partitions_v1.AddPartitionsToTxnTopic(name=TopicName(TOPIC), partitions=(i32(0),)),),
    )
    response = client.request(request, add_partitions_v1_response.AddPartitionsToTxnResponse)
    assert _errors(response) == {(TOPIC, 0): ErrorCode.invalid_producer_epoch}


def test_an_id_never_initialised_has_no_producer_id_mapping(client: WireClient) -> None:
    session = _init(client, None)  # an idempotent producer's id, not the transactional id's
    assert _errors(_add_partitions(client, "never", session, {TOPIC: [0]})) == {
        (TOPIC, 0): ErrorCode.invalid_producer_id_mapping
    }
    assert _end(client, "never", session, commit=True) == ErrorCode.invalid_producer_id_mapping


def test_the_batched_form_adds_and_verifies_each_transactions_partitions(client: WireClient) -> None:
    """AddPartitionsToTxn v4+ (brokers' form): several transactional ids at once, ``verify_only`` changing nothing."""
    one, two = _init(client, "one"), _init(client, "two")

    def send(verify_only: bool, partitions: dict[str, list[int]]) -> dict[tuple[str, str, int], ErrorCode]:
        transactions = tuple(
            add_partitions_v5.AddPartitionsToTxnTransaction(
                transactional_id=TransactionalId(transactional_id),
                producer_id=session.producer_id,
                producer_epoch=session.producer_epoch,
                verify_only=verify_only,
                topics=(
                    add_partitions_v5.AddPartitionsToTxnTopic(
                        name=TopicName(TOPIC), partitions=tuple(i32(p) for p in partitions[name])
                    ),
                ),
            )
            for name, (transactional_id, session) in {"one": ("one", one), "two": ("two", two)}.items()
        )
        response = client.request(
            add_partitions_v5.AddPartitionsToTxnRequest(transactions=transactions),
            add_partitions_v5_response.AddPartitionsToTxnResponse,
        )
        assert response.error_code == ErrorCode.none
        return {
            (result.transactional_id, topic.name, p.partition_index): p.partition_error_code
            for result in response.results_by_transaction
            for topic in result.topic_results
            for p in topic.results_by_partition
        }

    assert send(True, {"one": [0], "two": [1]}) == {
        ("one", TOPIC, 0): ErrorCode.invalid_txn_state,
        ("two", TOPIC, 1): ErrorCode.invalid_txn_state,
    }
    assert set(send(False, {"one": [0], "two": [1]}).values()) == {ErrorCode.none}
    assert send(True, {"one": [0, 1], "two": [1]}) == {
        ("one", TOPIC, 0): ErrorCode.none,
        ("one", TOPIC, 1): ErrorCode.invalid_txn_state,
        ("two", TOPIC, 1): ErrorCode.none,
    }


# -- AddOffsetsToTxn, TxnOffsetCommit -------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_a_transactions_offsets_become_the_groups_only_when_it_commits(
    client: WireClient, log_dir: LogDirectory, commit: bool
) -> None:
    session = _init(client, "tx")
    assert _add_offsets(client, session) == ErrorCode.none
    assert _commit_offsets(client, session, {0: (10, "m"), 1: (20, "")}) == {0: ErrorCode.none, 1: ErrorCode.none}
    with OffsetStore(log_dir) as offsets:
        assert offsets.committed(GROUP) == {}
        assert _end(client, "tx", session, commit=commit) == ErrorCode.none
        expected = {
            TopicPartition(TOPIC, 0): OffsetAndMetadata(10, "m"),
            TopicPartition(TOPIC, 1): OffsetAndMetadata(20),
        }
        assert offsets.committed(GROUP) == (expected if commit else {})


def test_offsets_outside_a_transaction_that_added_the_group_or_too_large_are_refused(
    client: WireClient, log_dir: LogDirectory
) -> None:
    session = _init(client, "tx")
    assert _commit_offsets(client, session, {0: (10, "")}) == {0: ErrorCode.invalid_txn_state}
    assert _add_offsets(client, session, group="") == ErrorCode.invalid_group_id
    assert _add_offsets(client, session) == ErrorCode.none
    assert _commit_offsets(client, session, {0: (10, "x" * 4097), 1: (5, "")}) == {
        0: ErrorCode.offset_metadata_too_large,
        1: ErrorCode.none,
    }
    assert _end(client, "tx", session, commit=True) == ErrorCode.none
    with OffsetStore(log_dir) as offsets:
        assert offsets.committed(GROUP) == {TopicPartition(TOPIC, 1): OffsetAndMetadata(5)}


def test_offsets_of_a_member_the_group_does_not_have_are_refused_by_its_coordinator(client: WireClient) -> None:
    """TxnOffsetCommit v3+ names the consumer's member id and generation; the group's coordinator checks them."""
    session = _init(client, "tx")
    assert _add_offsets(client, session) == ErrorCode.none
    assert _commit_offsets(client, session, {0: (1, "")}, member_id="ghost") == {0: ErrorCode.unknown_member_id}
    assert _commit_offsets(client, session, {0: (1, "")}, generation=4) == {0: ErrorCode.illegal_generation}


# -- timeouts -------------------------------------------------------------------------------------------------------


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_endpoint(tmp_path: Path) -> None:
    """The endpoint aborts it on Kafka's cleanup interval (here 100 ms, from the log directory's server.properties)
    and fences its producer: the records stay hidden from read_committed readers, the commit is refused."""
    log_dir = LogDirectory(str(tmp_path / "logs"))
    log_dir.topics.create(TOPIC, 1)
    (tmp_path / "logs" / "server.properties").write_text(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=100\n"
    )
    with Endpoint(log_dir, EndpointConfig(port=0)) as endpoint, WireClient(endpoint.bootstrap) as client:
        session = _init(client, "tx", timeout_ms=1500)
        assert _errors(_add_partitions(client, "tx", session, {TOPIC: [0]})) == {(TOPIC, 0): ErrorCode.none}
        assert _produce(client, session, 0, [b"stalled"], 0) == ErrorCode.none
        coordinator = TransactionCoordinator(log_dir)
        deadline = time.monotonic() + 10
        while (meta := coordinator.describe("tx")) is not None and meta.state != TransactionState.COMPLETE_ABORT:
            assert time.monotonic() < deadline, f"the expired transaction was not aborted: {meta}"
            time.sleep(0.1)
        assert meta is not None and meta.producer_epoch == session.producer_epoch + 1  # its producer fenced
        assert _end(client, "tx", session, commit=True) == ErrorCode.producer_fenced
        assert _values(log_dir, 0) == []
        with log_dir.partition(TOPIC, 0) as log:
            assert log.last_stable_offset == log.log_end_offset  # the marker closed it


def test_an_endpoint_aborts_expired_transactions_it_never_served(tmp_path: Path) -> None:
    """The timer runs from the endpoint's start: a transaction pysparklog's own producer left open on the log
    directory is aborted by an endpoint no client has talked to."""
    log_dir = LogDirectory(str(tmp_path / "logs"))
    log_dir.topics.create(TOPIC, 1)
    (tmp_path / "logs" / "server.properties").write_text(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=100\n"
    )
    config = ProducerConfig.from_properties({"transactional.id": "py", "transaction.timeout.ms": 500})
    with LogProducer(log_dir, config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TOPIC, b"abandoned", partition=0)
        producer.flush()
        with Endpoint(log_dir, EndpointConfig(port=0)):
            coordinator = TransactionCoordinator(log_dir)
            deadline = time.monotonic() + 10
            while (meta := coordinator.describe("py")) is not None and meta.state != TransactionState.COMPLETE_ABORT:
                assert time.monotonic() < deadline, f"the abandoned transaction was not aborted: {meta}"
                time.sleep(0.1)
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction()
    assert _values(log_dir, 0) == []


# -- idempotence through librdkafka ---------------------------------------------------------------------------------


def _produce_through_lossy_proxy(log_dir: LogDirectory, idempotent: bool) -> tuple[LossyProxy, list[Any]]:
    """3000 records from librdkafka through a proxy that loses every 5th Produce response (at most 4); returns the
    proxy and the records' delivery errors."""
    log_dir.topics.create(TOPIC, 2)
    with LossyProxy(PRODUCE, every=5, limit=4) as proxy:
        with Endpoint(log_dir, EndpointConfig(port=0, advertised_port=proxy.port)) as endpoint:
            proxy.forward_to(f"127.0.0.1:{endpoint.port}")
            producer = Producer(
                {
                    "bootstrap.servers": endpoint.bootstrap,
                    "enable.idempotence": idempotent,
                    "acks": "all",
                    "linger.ms": 2,
                    "batch.num.messages": 100,
                    "reconnect.backoff.ms": 10,
                    "retry.backoff.ms": 10,
                }
            )
            failures: list[Any] = []
            for i, value in enumerate(SENT):
                producer.produce(
                    TOPIC, value, partition=i % 2, on_delivery=lambda e, m: failures.append(e) if e else None
                )
            assert producer.flush(30) == 0
    return proxy, failures


def test_librdkafkas_idempotent_producer_writes_each_record_once_across_lost_acknowledgements(
    log_dir: LogDirectory,
) -> None:
    """Produce responses lost on the way back: librdkafka sends the batches again, and the log recognises them by
    producer id and sequence and answers with their first offsets instead of writing them twice."""
    proxy, failures = _produce_through_lossy_proxy(log_dir, idempotent=True)
    assert proxy.lost == 4 and failures == []
    for partition in (0, 1):
        assert _values(log_dir, partition, "read_uncommitted") == SENT[partition::2]


def test_without_idempotence_the_same_lost_acknowledgements_duplicate_records(log_dir: LogDirectory) -> None:
    """The control of the test above: the proxy does lose acknowledged appends."""
    proxy, _ = _produce_through_lossy_proxy(log_dir, idempotent=False)
    stored = [v for partition in (0, 1) for v in _values(log_dir, partition, "read_uncommitted")]
    assert proxy.lost == 4 and len(stored) > len(SENT)


def test_a_transaction_with_offsets_on_an_object_store(s3_endpoint: str, tmp_path: Path) -> None:
    """The same coordinator on an ``s3://`` log directory: conditional writes of the id's state, markers appended
    as commits of the partitions, the offsets in its ``__consumer_offsets``."""
    log_dir = LogDirectory(f"s3://{BUCKET}{tmp_path}/logs")
    log_dir.topics.create(TOPIC, 2)
    with Endpoint(log_dir, EndpointConfig(port=0)) as endpoint, WireClient(endpoint.bootstrap) as client:
        session = _init(client, "tx")
        assert set(_errors(_add_partitions(client, "tx", session, {TOPIC: [0, 1]})).values()) == {ErrorCode.none}
        assert _produce(client, session, 0, [b"a"], 0) == _produce(client, session, 1, [b"b"], 0) == ErrorCode.none
        assert _add_offsets(client, session) == ErrorCode.none
        assert _commit_offsets(client, session, {0: (3, "")}) == {0: ErrorCode.none}
        assert _end(client, "tx", session, commit=True) == ErrorCode.none
    assert (_values(log_dir, 0), _values(log_dir, 1)) == ([b"a"], [b"b"])
    with OffsetStore(log_dir) as offsets:
        assert offsets.committed(GROUP) == {TopicPartition(TOPIC, 0): OffsetAndMetadata(3)}


# -- malformed requests ---------------------------------------------------------------------------------------------


def test_truncated_and_mutated_requests_of_the_transaction_apis_cost_at_most_their_connection(
    client: WireClient, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    """Each API's request at its highest version, cut short or with bytes changed: an answer or a closed connection
    (never a handler's unexpected error), and the endpoint answers the next client."""
    session = _init(client, "tx")
    requests = [
        InitProducerIdRequest(
            transactional_id=TransactionalId("tx"),
            transaction_timeout=i32Timedelta.parse(timedelta(seconds=60)),
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
        ),
        add_partitions_v5.AddPartitionsToTxnRequest(
            transactions=(
                add_partitions_v5.AddPartitionsToTxnTransaction(
                    transactional_id=TransactionalId("tx"),
                    producer_id=session.producer_id,
                    producer_epoch=session.producer_epoch,
                    verify_only=False,
                    topics=(add_partitions_v5.AddPartitionsToTxnTopic(name=TopicName(TOPIC), partitions=(i32(0),)),),
                ),
            )
        ),
        AddOffsetsToTxnRequest(
            transactional_id=TransactionalId("tx"),
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
            group_id=GroupId(GROUP),
        ),
        txn_offset_commit_v4.TxnOffsetCommitRequest(
            transactional_id=TransactionalId("tx"),
            group_id=GroupId(GROUP),
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
            topics=(
                txn_offset_commit_v4.TxnOffsetCommitRequestTopic(
                    name=TopicName(TOPIC),
                    partitions=(
                        txn_offset_commit_v4.TxnOffsetCommitRequestPartition(
                            partition_index=i32(0),
                            committed_offset=i64(1),
                            committed_leader_epoch=i32(-1),
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        ),
        EndTxnRequest(
            transactional_id=TransactionalId("tx"),
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
            committed=False,
        ),
    ]
    draw = random.Random(5)
    answered = 0
    caplog.set_level(logging.WARNING, "pysparklog.endpoint")
    for request in requests:
        frame = client.frame(request)
        body = frame[SIZE.size :]
        for _ in range(150):
            mutated = bytearray(body)
            if draw.random() < 0.5:
                del mutated[draw.randrange(8, len(mutated)) :]  # truncated past the api key and version
            else:
                for _ in range(draw.randint(1, 4)):
                    mutated[draw.randrange(8, len(mutated))] = draw.randrange(256)
            with WireClient(endpoint.bootstrap, timeout=10) as fuzzed:
                fuzzed.send_raw(SIZE.pack(len(mutated)) + bytes(mutated))
                answered += fuzzed.receive_frame() is not None  # or None: closed; a hang times out
    with WireClient(endpoint.bootstrap) as healthy:
        assert _init(healthy, None).error_code == ErrorCode.none
    assert answered > 0, "no mutated request reached a handler"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# -- every version served ---------------------------------------------------------------------------------------------


def _versioned(api: str, version: int, kind: str, class_name: str, **fields: Any) -> Any:
    """An instance of kio's ``class_name`` of ``api`` at ``version`` from those of ``fields`` it has."""
    cls = getattr(importlib.import_module(f"kio.schema.{api}.v{version}.{kind}"), class_name)
    return cls(**{f.name: fields[f.name] for f in dataclasses.fields(cls) if f.name in fields})


def _response_type(api: str, version: int, class_name: str) -> Any:
    return getattr(importlib.import_module(f"kio.schema.{api}.v{version}.response"), class_name)


@pytest.mark.parametrize(
    ("api_key", "version"), [(api.api_key, v) for api in APIS for v in range(api.min_version, api.max_version + 1)]
)
def test_every_version_served_is_answered_in_that_version(client: WireClient, api_key: int, version: int) -> None:
    """A transaction walked through with the one API at ``version`` (the others at their highest): a field that
    version lacks, or one it adds, would cost the client its connection or a wrong answer."""

    def versions(key: int) -> int:
        return version if key == api_key else next(a.max_version for a in APIS if a.api_key == key)

    tid, group = TransactionalId("tx"), GroupId(GROUP)
    v = versions(INIT_PRODUCER_ID)
    init = _versioned(
        "init_producer_id",
        v,
        "request",
        "InitProducerIdRequest",
        transactional_id=tid,
        transaction_timeout=i32Timedelta.parse(timedelta(minutes=1)),
    )
    session = client.request(init, _response_type("init_producer_id", v, "InitProducerIdResponse"))
    assert session.error_code == ErrorCode.none
    ids = {"producer_id": session.producer_id, "producer_epoch": session.producer_epoch}

    v = versions(ADD_PARTITIONS_TO_TXN)
    topic = _versioned(
        "add_partitions_to_txn", v, "request", "AddPartitionsToTxnTopic", name=TopicName(TOPIC), partitions=(i32(0),)
    )
    if v < 4:
        add = _versioned(
            "add_partitions_to_txn",
            v,
            "request",
            "AddPartitionsToTxnRequest",
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=session.producer_id,
            v3_and_below_producer_epoch=session.producer_epoch,
            v3_and_below_topics=(topic,),
        )
    else:
        transaction = _versioned(
            "add_partitions_to_txn",
            v,
            "request",
            "AddPartitionsToTxnTransaction",
            transactional_id=tid,
            verify_only=False,
            topics=(topic,),
            **ids,
        )
        add = _versioned(
            "add_partitions_to_txn", v, "request", "AddPartitionsToTxnRequest", transactions=(transaction,)
        )
    added = client.request(add, _response_type("add_partitions_to_txn", v, "AddPartitionsToTxnResponse"))
    results = added.results_by_topic_v3_and_below if v < 4 else added.results_by_transaction[0].topic_results
    assert [p.partition_error_code for t in results for p in t.results_by_partition] == [ErrorCode.none]

    v = versions(ADD_OFFSETS_TO_TXN)
    offsets = _versioned(
        "add_offsets_to_txn", v, "request", "AddOffsetsToTxnRequest", transactional_id=tid, group_id=group, **ids
    )
    assert client.request(offsets, _response_type("add_offsets_to_txn", v, "AddOffsetsToTxnResponse")).error_code == (
        ErrorCode.none
    )

    v = versions(TXN_OFFSET_COMMIT)
    partition = _versioned(
        "txn_offset_commit",
        v,
        "request",
        "TxnOffsetCommitRequestPartition",
        partition_index=i32(0),
        committed_offset=i64(4),
        committed_leader_epoch=i32(-1),
        committed_metadata="",
    )
    commit_topic = _versioned(
        "txn_offset_commit", v, "request", "TxnOffsetCommitRequestTopic", name=TopicName(TOPIC), partitions=(partition,)
    )
    commit = _versioned(
        "txn_offset_commit",
        v,
        "request",
        "TxnOffsetCommitRequest",
        transactional_id=tid,
        group_id=group,
        generation_id=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(commit_topic,),
        **ids,
    )
    committed = client.request(commit, _response_type("txn_offset_commit", v, "TxnOffsetCommitResponse"))
    assert [p.error_code for t in committed.topics for p in t.partitions] == [ErrorCode.none]

    v = versions(END_TXN)
    # Aborted: a commit would create __consumer_offsets (50 partitions) in each case for what the other tests show.
    end = _versioned("end_txn", v, "request", "EndTxnRequest", transactional_id=tid, committed=False, **ids)
    assert client.request(end, _response_type("end_txn", v, "EndTxnResponse")).error_code == ErrorCode.none
