"""The data plane's answers to what a client library does not let a test send at will: idempotent and corrupt
batches, acks 0 and invalid acks, exact fetch sizes and waits, every ListOffsets variant, topics asked by id; sent
with the bare wire client and checked against the log directory."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_request
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.list_offsets.v10 import request as list_request
from kio.schema.list_offsets.v10.response import ListOffsetsResponse
from kio.schema.metadata.v12 import request as metadata_request
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9 import request as produce_request
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.data import state as data_state
from pysparklog.endpoint.data.metadata import topic_uuid
from pysparklog.endpoint.data.state import CLUSTER_ID_FILE
from pysparklog.producer import Producer as LogProducer
from pysparklog.producer import ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings, encode_arrow
from tests.endpoint.kafka_wire import WireClient

TOPIC = "orders"
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def _batches(values: Sequence[bytes], timestamps: Sequence[int] | None = None, **settings: Any) -> bytes:
    """``values`` as v2 record batches (one per ``BatchSettings``), as a producer sends them."""
    table = pa.table({"value": pa.array(values, pa.binary())})
    if timestamps is not None:
        table = table.append_column("timestamp", pa.array(timestamps, pa.int64()))
    return b"".join(bytes(encoded.data) for encoded in encode_arrow(table, BatchSettings(**settings)))


def _produce(client: WireClient, partitions: dict[int, bytes | None], acks: int = -1, topic: str = TOPIC) -> Any:
    request = produce_request.ProduceRequest(
        acks=i16(acks),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
        topic_data=(
            produce_request.TopicProduceData(
                name=TopicName(topic),
                partition_data=tuple(
                    produce_request.PartitionProduceData(
                        index=i32(p), records=None if records is None else Records(records)
                    )
                    for p, records in partitions.items()
                ),
            ),
        ),
    )
    return client.request(request, ProduceResponse)


def _produced(client: WireClient, partition: int, records: bytes | None, topic: str = TOPIC) -> Any:
    """The one partition's answer to a produce."""
    response = _produce(client, {partition: records}, topic=topic)
    return response.responses[0].partition_responses[0]


def _fetch(
    client: WireClient,
    offsets: dict[int, int],
    *,
    topic: str = TOPIC,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchResponse:
    request = fetch_request.FetchRequest(
        max_wait=i32Timedelta.parse(timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(min_bytes),
        max_bytes=i32(max_bytes),
        isolation_level=i8(isolation_level),
        topics=(
            fetch_request.FetchTopic(
                topic=TopicName(topic),
                partitions=tuple(
                    fetch_request.FetchPartition(
                        partition=i32(p), fetch_offset=i64(o), partition_max_bytes=i32(partition_max_bytes)
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    response: FetchResponse = client.request(request, FetchResponse)
    return response


def _list_offsets(
    client: WireClient, timestamp: int, isolation_level: int = READ_UNCOMMITTED, topic: str = TOPIC
) -> Any:
    request = list_request.ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(isolation_level),
        topics=(
            list_request.ListOffsetsTopic(
                name=TopicName(topic),
                partitions=(list_request.ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp)),),
            ),
        ),
        timeout=i32Timedelta.parse(timedelta(seconds=5)),
    )
    return client.request(request, ListOffsetsResponse).topics[0].partitions[0]


def _metadata(
    client: WireClient, topics: Sequence[metadata_request.MetadataRequestTopic] | None, *, auto_create: bool = True
) -> MetadataResponse:
    request = metadata_request.MetadataRequest(
        topics=None if topics is None else tuple(topics),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )
    response: MetadataResponse = client.request(request, MetadataResponse)
    return response


def _end(log_dir: LogDirectory, partition: int = 0) -> int:
    with log_dir.partition(TOPIC, partition) as log:
        return log.log_end_offset


# -- Produce ---------------------------------------------------------------------------------------------------------


def test_a_corrupt_batch_is_refused_and_nothing_is_written(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 2)
    good = _batches([b"a", b"b"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # a byte of the last record: the batch's CRC no longer matches
    torn = good[:-3]
    with WireClient(endpoint.bootstrap) as client:
        answers = _produce(client, {0: bytes(corrupt), 1: torn}).responses[0].partition_responses
        assert [(a.index, a.error_code) for a in answers] == [
            (0, ErrorCode.corrupt_message),
            (1, ErrorCode.corrupt_message),
        ]
        assert all(a.error_message for a in answers)
        assert _end(log_dir, 0) == _end(log_dir, 1) == 0
        assert _produced(client, 0, good).error_code == ErrorCode.none
    assert _end(log_dir, 0) == 2


def test_empty_records_and_appends_to_an_internal_topic_are_refused(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    """Kafka wants a batch in each partition's records, and lets no client append to its internal topics, whose
    records only the coordinators write (here, the offsets written by pysparklog's group coordinator)."""
    log_dir.topics.create(TOPIC, 1)
    log_dir.topics.create("__consumer_offsets", 1)
    with WireClient(endpoint.bootstrap) as client:
        assert _produced(client, 0, None).error_code == ErrorCode.invalid_record
        assert _produced(client, 0, b"").error_code == ErrorCode.invalid_record
        internal = _produced(client, 0, _batches([b"x"]), topic="__consumer_offsets")
        assert internal.error_code == ErrorCode.invalid_topic_exception
    assert _end(log_dir) == 0
    with log_dir.partition("__consumer_offsets", 0) as log:
        assert log.log_end_offset == 0


def test_a_batch_over_the_topics_limits_is_refused_with_kafkas_code(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1, configs={"max.message.bytes": "200", "message.timestamp.before.max.ms": "60000"})
    now_ms = int(time.time() * 1000)
    with WireClient(endpoint.bootstrap) as client:
        too_large = _produced(client, 0, _batches([b"x" * 500], timestamps=[now_ms]))
        too_old = _produced(client, 0, _batches([b"x"], timestamps=[now_ms - 3_600_000]))
        fine = _produced(client, 0, _batches([b"x"], timestamps=[now_ms]))
    assert (too_large.error_code, too_old.error_code, fine.error_code) == (
        ErrorCode.message_too_large,
        ErrorCode.invalid_timestamp,
        ErrorCode.none,
    )
    assert "max.message.bytes" in (too_large.error_message or "")
    assert _end(log_dir) == 1


def test_produce_answers_each_partition_with_its_offsets(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 3)
    with WireClient(endpoint.bootstrap) as client:
        first = _produce(client, {0: _batches([b"a"]), 1: _batches([b"b", b"c"]), 2: _batches([b"d"])})
        second = _produce(client, {1: _batches([b"e"]), 2: _batches([b"f", b"g"])})
    assert [(a.index, a.error_code, a.base_offset) for a in first.responses[0].partition_responses] == [
        (0, ErrorCode.none, 0),
        (1, ErrorCode.none, 0),
        (2, ErrorCode.none, 0),
    ]
    assert [(a.index, a.base_offset, a.log_start_offset) for a in second.responses[0].partition_responses] == [
        (1, 2, 0),
        (2, 1, 0),
    ]
    assert [_end(log_dir, p) for p in range(3)] == [1, 3, 3]


def test_log_append_time_is_answered_when_the_topic_stamps_it(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1, configs={"message.timestamp.type": "LogAppendTime"})
    before = time.time()
    with WireClient(endpoint.bootstrap) as client:
        answer = _produced(client, 0, _batches([b"a"], timestamps=[1]))
    assert answer.error_code == ErrorCode.none
    assert answer.log_append_time is not None and before - 1 <= answer.log_append_time.timestamp() <= time.time() + 1


def test_an_idempotent_retry_gets_its_first_offsets_and_a_gap_or_an_old_epoch_is_refused(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 1)
    producer: dict[str, Any] = {"producer_id": 4000, "producer_epoch": 3}
    with WireClient(endpoint.bootstrap) as client:
        assert _produced(client, 0, _batches([b"x"], base_sequence=0, **producer)).base_offset == 0
        retried = _batches([b"a", b"b"], base_sequence=1, **producer)
        assert _produced(client, 0, retried).base_offset == 1
        assert _produced(client, 0, _batches([b"c"], base_sequence=3, **producer)).base_offset == 3
        again = _produced(client, 0, retried)  # its acknowledgement was lost: the producer sends it again
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 1)
        gap = _produced(client, 0, _batches([b"d"], base_sequence=9, **producer))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        fenced = _produced(client, 0, _batches([b"e"], producer_id=4000, producer_epoch=2, base_sequence=4))
        assert fenced.error_code == ErrorCode.invalid_producer_epoch
    assert _end(log_dir) == 4


def test_acks_0_gets_no_answer_and_invalid_acks_are_refused(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        request = produce_request.ProduceRequest(
            acks=i16(0),
            timeout=i32Timedelta.parse(timedelta(seconds=5)),
            topic_data=(
                produce_request.TopicProduceData(
                    name=TopicName(TOPIC),
                    partition_data=(
                        produce_request.PartitionProduceData(index=i32(0), records=Records(_batches([b"a"]))),
                    ),
                ),
            ),
        )
        client.send_raw(client.frame(request))
        # The next request's answer is the next frame: acks=0 got none.
        answer = _produce(client, {0: _batches([b"b"])}, acks=2).responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.invalid_required_acks
    assert _end(log_dir) == 1


def test_an_unknown_topic_or_partition_is_answered_as_such_and_not_created(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        assert (
            _produced(client, 0, _batches([b"a"]), topic="missing").error_code == ErrorCode.unknown_topic_or_partition
        )
        assert _produced(client, 1, _batches([b"a"])).error_code == ErrorCode.unknown_topic_or_partition
        fetched = _fetch(client, {0: 0}, topic="missing").responses[0].partitions[0]
        assert fetched.error_code == ErrorCode.unknown_topic_or_partition
        assert _list_offsets(client, -1, topic="missing").error_code == ErrorCode.unknown_topic_or_partition
        described = _metadata(client, [_by_name("missing")], auto_create=False)
        assert [(t.name, t.error_code, t.partitions) for t in described.topics] == [
            ("missing", ErrorCode.unknown_topic_or_partition, ())
        ]
    assert log_dir.topics.names() == [TOPIC]


def _by_name(name: str) -> metadata_request.MetadataRequestTopic:
    return metadata_request.MetadataRequestTopic(name=TopicName(name), topic_id=None)


def _answers(response: MetadataResponse) -> list[tuple[str | None, ErrorCode, int]]:
    return [(t.name, t.error_code, len(t.partitions)) for t in response.topics]


def test_a_metadata_request_allowing_auto_creation_creates_a_missing_topic_as_kafka_4_answers_it(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    """Kafka 4's broker asks its controller to create the topic and answers UNKNOWN_TOPIC_OR_PARTITION meanwhile;
    the client's next request finds it, with ``num.partitions`` partitions."""
    log_dir.storage.put(log_dir.storage.join("server.properties"), b"num.partitions=3\n")
    with WireClient(endpoint.bootstrap) as client:
        first = _metadata(client, [_by_name("fresh")])
        assert _answers(first) == [("fresh", ErrorCode.unknown_topic_or_partition, 0)]
        assert _answers(_metadata(client, [_by_name("fresh")])) == [("fresh", ErrorCode.none, 3)]
        assert _answers(_metadata(client, None)) == [("fresh", ErrorCode.none, 3)]  # listing all creates nothing
        assert _answers(_metadata(client, [_by_name("__transaction_state"), _by_name("bad name")])) == [
            ("__transaction_state", ErrorCode.unknown_topic_or_partition, 0),
            ("bad name", ErrorCode.invalid_topic_exception, 0),
        ]
    assert log_dir.topics.names() == ["fresh"]


def test_auto_create_topics_enable_false_in_server_properties_refuses_a_metadata_requests_creation(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.storage.put(log_dir.storage.join("server.properties"), b"auto.create.topics.enable=false\n")
    with WireClient(endpoint.bootstrap) as client:
        for _ in range(2):
            answered = _metadata(client, [_by_name("fresh")])
            assert _answers(answered) == [("fresh", ErrorCode.unknown_topic_or_partition, 0)]
    assert log_dir.topics.names() == []


# -- Fetch -----------------------------------------------------------------------------------------------------------


def test_a_fetch_returns_at_least_one_whole_batch_and_else_whole_batches_within_its_bytes(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 2)
    with WireClient(endpoint.bootstrap) as client:
        for value in (b"a" * 1000, b"b" * 1000, b"c" * 1000):
            _produced(client, 0, _batches([value]))
            _produced(client, 1, _batches([value]))
        one = _fetch(client, {0: 0, 1: 0}, partition_max_bytes=10).responses[0].partitions
        assert [p.partition_index for p in one] == [0, 1]
        assert _offsets_in(one[0].records) == [0]  # larger than 10 bytes, yet whole: the first partition's
        assert _offsets_in(one[1].records) == []  # not the first with records: within its bytes or nothing
        size = len(_batches([b"a" * 1000]))
        assert 2 * size <= 2500 < 3 * size
        two = _fetch(client, {0: 1}, partition_max_bytes=2500).responses[0].partitions[0]
        assert _offsets_in(two.records) == [1, 2]
        within = _fetch(client, {0: 0, 1: 0}, max_bytes=2500).responses[0].partitions
        assert (_offsets_in(within[0].records), _offsets_in(within[1].records)) == ([0, 1], [])
        assert (within[0].high_watermark, within[0].last_stable_offset, within[0].log_start_offset) == (3, 3, 0)


def _offsets_in(records: bytes | None) -> list[int]:
    """The base offsets of the v2 batches in ``records`` (each batch: base offset int64, length int32, ...)."""
    offsets, position = [], 0
    data = records or b""
    while position < len(data):
        offsets.append(int.from_bytes(data[position : position + 8], "big", signed=True))
        position += 12 + int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
    return offsets


def test_a_fetch_reads_one_segment_and_the_next_fetch_goes_on_into_the_next(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        for values in ([b"a", b"b"], [b"c"], [b"d", b"e"]):
            _produced(client, 0, _batches(values))
            with log_dir.partition(TOPIC, 0) as log:
                log.roll()
        with log_dir.partition(TOPIC, 0) as log:
            assert [segment.base_offset for segment in log.segments()] == [0, 2, 3, 5]
        read = [_offsets_in(_fetch(client, {0: offset}).responses[0].partitions[0].records) for offset in range(6)]
    assert read == [[0], [0], [2], [3], [3], []]


def test_a_fetch_outside_the_log_gets_offset_out_of_range_with_the_log_offsets(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        _produced(client, 0, _batches([b"a", b"b", b"c"]))
        with log_dir.partition(TOPIC, 0) as log:
            log.raise_log_start_offset(1)
        for offset in (0, 4):
            answer = _fetch(client, {0: offset}).responses[0].partitions[0]
            assert (answer.error_code, answer.high_watermark, answer.log_start_offset) == (
                ErrorCode.offset_out_of_range,
                3,
                1,
            )
        at_end = _fetch(client, {0: 3}).responses[0].partitions[0]
        assert (at_end.error_code, at_end.records) == (ErrorCode.none, b"")


def test_a_long_poll_waits_for_min_bytes_and_is_woken_by_a_produce_through_the_endpoint(
    endpoint: Endpoint, log_dir: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint's own appends wake a waiting fetch at once: with the look at the log ends made rare, only the
    wake can end the wait early."""
    monkeypatch.setattr(data_state, "FILE_SYSTEM_POLL_S", 60.0)
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as fetcher, WireClient(endpoint.bootstrap) as producer:
        started = time.monotonic()
        assert _fetch(fetcher, {0: 0}, max_wait_ms=300).responses[0].partitions[0].records == b""
        assert 0.25 <= time.monotonic() - started < 3

        def produce_soon() -> None:
            time.sleep(0.5)
            _produced(producer, 0, _batches([b"woken"]))

        thread = threading.Thread(target=produce_soon)
        started = time.monotonic()
        thread.start()
        answer = _fetch(fetcher, {0: 0}, max_wait_ms=10_000).responses[0].partitions[0]
        waited = time.monotonic() - started
        thread.join()
    assert _offsets_in(answer.records) == [0]
    assert 0.45 <= waited < 3, "the fetch did not wait for the record, or waited out its max wait"


def test_a_session_the_endpoint_never_gave_is_not_found(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1)
    request = fetch_request.FetchRequest(
        max_wait=i32Timedelta.parse(timedelta(0)),
        min_bytes=i32(1),
        session_id=i32(1234),
        session_epoch=i32(1),
        topics=(),
        forgotten_topics_data=(),
    )
    with WireClient(endpoint.bootstrap) as client:
        response = client.request(request, FetchResponse)
    assert (response.error_code, response.session_id) == (ErrorCode.fetch_session_id_not_found, 0)


def write_transactions(log_dir: LogDirectory) -> None:
    """Offsets 0-1 committed (and its marker at 2), 3-4 aborted (marker at 5), 6 committed (marker 7), then 8 in a
    transaction left open."""
    config = ProducerConfig(transactional_id="t-1", enable_idempotence=True)
    producer = LogProducer(log_dir, config)
    producer.init_transactions()
    for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2"], False), ([b"c3"], True), ([b"open"], None)):
        producer.begin_transaction()
        for value in values:
            producer.send(TOPIC, value=value, partition=0)
        producer.flush()
        if commit is True:
            producer.commit_transaction()
        elif commit is False:
            producer.abort_transaction()


def test_read_committed_stops_at_the_last_stable_offset_with_the_aborted_transactions(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 1)
    write_transactions(log_dir)
    with log_dir.partition(TOPIC, 0) as log:
        stable, end = log.last_stable_offset, log.log_end_offset
    assert (stable, end) == (8, 9)
    with WireClient(endpoint.bootstrap) as client:
        committed = _fetch(client, {0: 0}, isolation_level=READ_COMMITTED).responses[0].partitions[0]
        uncommitted = _fetch(client, {0: 0}).responses[0].partitions[0]
        assert (committed.high_watermark, committed.last_stable_offset) == (9, 8)
        assert _offsets_in(committed.records) == [0, 2, 3, 5, 6, 7]
        assert [(t.first_offset) for t in committed.aborted_transactions or ()] == [3]
        assert _offsets_in(uncommitted.records) == [0, 2, 3, 5, 6, 7, 8]
        assert uncommitted.aborted_transactions is None
        assert _list_offsets(client, -1, READ_COMMITTED).offset == 8
        assert _list_offsets(client, -1, READ_UNCOMMITTED).offset == 9


# -- ListOffsets -----------------------------------------------------------------------------------------------------


def test_list_offsets_earliest_latest_max_timestamp_and_by_timestamp(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        _produced(client, 0, _batches([b"a", b"b"], timestamps=[1000, 3000]))
        _produced(client, 0, _batches([b"c", b"d"], timestamps=[2000, 4000]))
        _produced(client, 0, _batches([b"e"], timestamps=[3500]))
        with log_dir.partition(TOPIC, 0) as log:
            log.raise_log_start_offset(1)
        answers = {ts: _list_offsets(client, ts) for ts in (-2, -4, -1, -3, 1500, 3000, 3600, 9999)}
    found = {ts: (a.error_code, a.offset, a.timestamp, a.leader_epoch) for ts, a in answers.items()}
    assert found[-2] == found[-4] == (ErrorCode.none, 1, -1, -1)
    assert found[-1] == (ErrorCode.none, 5, -1, -1)
    assert found[-3] == (ErrorCode.none, 3, 4000, -1)
    with log_dir.partition(TOPIC, 0) as log:
        for ts in (1500, 3000, 3600):
            assert found[ts][1:3] == log.offset_for_timestamp(ts)
    assert found[3600][1:3] == (3, 4000)
    assert found[9999] == (ErrorCode.none, -1, -1, -1)


def test_max_timestamp_is_the_offset_of_the_record_holding_it(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    """As Kafka answers since 3.8 (KAFKA-16310): the record's offset, not the last offset of its batch."""
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        _produced(client, 0, _batches([b"a", b"b"], timestamps=[1000, 2000]))
        _produced(client, 0, _batches([b"c", b"d", b"e"], timestamps=[5000, 3000, 5000]))
        answer = _list_offsets(client, -3)
    assert (answer.error_code, answer.offset, answer.timestamp) == (ErrorCode.none, 2, 5000)


# -- Metadata --------------------------------------------------------------------------------------------------------


def test_metadata_names_the_endpoint_as_the_only_broker_and_leader(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 2)
    log_dir.topics.create("__consumer_offsets", 1)
    with WireClient(endpoint.bootstrap) as client:
        response = _metadata(client, None)
    assert [(b.node_id, f"{b.host}:{b.port}") for b in response.brokers] == [
        (endpoint.state.node_id if endpoint.state else -1, endpoint.bootstrap)
    ]
    node = response.brokers[0].node_id
    assert response.controller_id == node
    by_name = {str(t.name): t for t in response.topics}
    assert sorted(by_name) == ["__consumer_offsets", TOPIC]
    orders = by_name[TOPIC]
    assert orders.topic_id == topic_uuid(log_dir.topics.get(TOPIC).topic_id)
    assert (orders.error_code, orders.is_internal) == (ErrorCode.none, False)
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in orders.partitions] == [
        (0, node, (node,), (node,)),
        (1, node, (node,), (node,)),
    ]
    assert by_name["__consumer_offsets"].is_internal


def test_metadata_finds_a_topic_by_its_id(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create(TOPIC, 1)
    topic_id = topic_uuid(log_dir.topics.get(TOPIC).topic_id)
    with WireClient(endpoint.bootstrap) as client:
        found = _metadata(client, [metadata_request.MetadataRequestTopic(name=None, topic_id=topic_id)]).topics
        missing = _metadata(client, [metadata_request.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())]).topics
    assert [(t.name, t.error_code) for t in found] == [(TOPIC, ErrorCode.none)]
    assert [t.error_code for t in missing] == [ErrorCode.unknown_topic_id]


def test_every_endpoint_of_a_log_directory_answers_with_one_cluster_id(log_dir: LogDirectory) -> None:
    with Endpoint(log_dir, EndpointConfig(port=0)) as first, Endpoint(log_dir, EndpointConfig(port=0)) as second:
        with WireClient(first.bootstrap) as one, WireClient(second.bootstrap) as other:
            ids = {_metadata(one, []).cluster_id, _metadata(other, []).cluster_id}
    assert len(ids) == 1 and None not in ids
    assert log_dir.storage.stat(log_dir.storage.join(CLUSTER_ID_FILE)) is not None
    assert log_dir.topics.names() == []  # the file is no topic


@pytest.mark.parametrize("broker_id", ["MkU3OEVBNTcwNTJENDM2Qg"])
def test_a_brokers_log_directory_answers_with_its_cluster_id(log_dir: LogDirectory, broker_id: str) -> None:
    log_dir.storage.put(
        log_dir.storage.join("meta.properties"), f"version=1\nnode.id=1\ncluster.id={broker_id}\n".encode()
    )
    with Endpoint(log_dir, EndpointConfig(port=0)) as endpoint, WireClient(endpoint.bootstrap) as client:
        assert _metadata(client, []).cluster_id == broker_id


def test_a_topic_deleted_and_created_again_is_served_from_its_new_log(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as client:
        _produced(client, 0, _batches([b"old-1", b"old-2"]))
        log_dir.topics.delete(TOPIC)
        assert _produced(client, 0, _batches([b"x"])).error_code == ErrorCode.unknown_topic_or_partition
        log_dir.topics.create(TOPIC, 1)
        assert _produced(client, 0, _batches([b"new"])).base_offset == 0
        answer = _fetch(client, {0: 0}).responses[0].partitions[0]
    assert (answer.high_watermark, _offsets_in(answer.records)) == (1, [0])


def test_past_its_bound_the_endpoint_closes_the_least_recently_used_logs_and_reopens_them(
    endpoint: Endpoint, log_dir: LogDirectory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each open log holds its lock file open: past ``MAX_OPEN_LOGS`` the least recently used are closed, and a log
    closed so serves again when asked."""
    monkeypatch.setattr(data_state, "MAX_OPEN_LOGS", 2)
    log_dir.topics.create(TOPIC, 4)
    with WireClient(endpoint.bootstrap) as client:
        for round_ in range(2):
            for partition in range(4):
                assert _produced(client, partition, _batches([b"%d" % round_])).base_offset == round_
        fetched = _fetch(client, dict.fromkeys(range(4), 0)).responses[0].partitions
    assert [_offsets_in(p.records) for p in fetched] == [[0, 1]] * 4
    assert len({path.rpartition("/")[0] for path in _open_files() if path.startswith(log_dir.path + "/" + TOPIC)}) == 2


def test_a_log_dropped_under_a_long_poll_is_closed_once_the_poll_is_answered(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    """A fetch waits on a topic's log while the topic is deleted and created again, and a produce through the
    endpoint opens the new log: the old one, in use, is closed when the fetch is answered, not before nor never."""
    log_dir.topics.create(TOPIC, 1)
    with WireClient(endpoint.bootstrap) as fetcher, WireClient(endpoint.bootstrap) as producer:
        _produced(producer, 0, _batches([b"old"]))

        def recreate_and_produce() -> None:
            time.sleep(0.3)
            log_dir.topics.delete(TOPIC)
            log_dir.topics.create(TOPIC, 1)
            _produced(producer, 0, _batches([b"new"]))

        thread = threading.Thread(target=recreate_and_produce)
        thread.start()
        answer = _fetch(fetcher, {0: 1}, max_wait_ms=1500).responses[0].partitions[0]
        thread.join()
        old_files = [path for path in _open_files() if path.startswith(log_dir.path) and "-delete" in path]
        assert _offsets_in(_fetch(fetcher, {0: 0}).responses[0].partitions[0].records) == [0]
    assert answer.error_code in (ErrorCode.none, ErrorCode.offset_out_of_range)
    assert old_files == []


def _open_files() -> set[str]:
    """What this process's file descriptors point at."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return found
