"""Every version of the data plane's APIs that ApiVersions offers is answered, and its answer decodes with kio's
types of that version: a client negotiating any of them (older librdkafka, newer Java) gets the same records and
offsets."""

from __future__ import annotations

import dataclasses
import importlib
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from pysparklog.endpoint import Endpoint
from pysparklog.endpoint.apis import served
from pysparklog.endpoint.data.fetch import FETCH
from pysparklog.endpoint.data.list_offsets import LIST_OFFSETS
from pysparklog.endpoint.data.metadata import METADATA
from pysparklog.endpoint.data.produce import PRODUCE
from pysparklog.endpoint.protocol import message
from pysparklog.storage.log_dir import LogDirectory
from tests.endpoint.kafka_wire import WireClient
from tests.endpoint.test_data_wire import TOPIC, _batches, _offsets_in

NO_TIMEOUT = i32Timedelta.parse(timedelta(seconds=5))


def _versions(api_key: int) -> list[int]:
    api = served()[api_key]
    return list(range(api.min_version, api.max_version + 1))


def _module(api_key: int, version: int) -> ModuleType:
    return importlib.import_module(message(api_key, version).request_type.__module__)


def _build(module: ModuleType, class_name: str, **fields: Any) -> Any:
    """``class_name`` of ``module`` from those of ``fields`` it has at this version."""
    cls = getattr(module, class_name)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in fields.items() if name in names})


def _ask(endpoint: Endpoint, api_key: int, version: int, request: Any) -> Any:
    with WireClient(endpoint.bootstrap) as client:
        return client.request(request, message(api_key, version).response_type)


@pytest.fixture
def orders(log_dir: LogDirectory) -> LogDirectory:
    log_dir.topics.create(TOPIC, 1)
    return log_dir


@pytest.mark.parametrize("version", _versions(PRODUCE))
def test_produce(endpoint: Endpoint, orders: LogDirectory, version: int) -> None:
    module = _module(PRODUCE, version)
    partition = _build(module, "PartitionProduceData", index=0, records=_batches([b"a", b"b"]))
    topic = _build(module, "TopicProduceData", name=TOPIC, partition_data=(partition,))
    request = _build(module, "ProduceRequest", transactional_id=None, acks=-1, timeout=NO_TIMEOUT, topic_data=(topic,))
    answer = _ask(endpoint, PRODUCE, version, request).responses[0].partition_responses[0]
    assert (answer.index, answer.error_code, answer.base_offset) == (0, ErrorCode.none, 0)
    with orders.partition(TOPIC, 0) as log:
        assert log.log_end_offset == 2


@pytest.mark.parametrize("version", _versions(FETCH))
def test_fetch(endpoint: Endpoint, orders: LogDirectory, version: int) -> None:
    with orders.partition(TOPIC, 0) as log:
        log.append(_batches([b"a", b"b"]))
    module = _module(FETCH, version)
    partition = _build(module, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request = _build(
        module,
        "FetchRequest",
        max_wait=i32Timedelta.parse(timedelta(0)),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(_build(module, "FetchTopic", topic=TOPIC, partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    answer = _ask(endpoint, FETCH, version, request).responses[0].partitions[0]
    assert (answer.partition_index, answer.error_code, answer.high_watermark) == (0, ErrorCode.none, 2)
    assert _offsets_in(answer.records) == [0]


@pytest.mark.parametrize("version", _versions(LIST_OFFSETS))
def test_list_offsets(endpoint: Endpoint, orders: LogDirectory, version: int) -> None:
    with orders.partition(TOPIC, 0) as log:
        log.append(_batches([b"a", b"b"]))
    module = _module(LIST_OFFSETS, version)
    partition = _build(module, "ListOffsetsPartition", partition_index=0, timestamp=-1)
    request = _build(
        module,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        topics=(_build(module, "ListOffsetsTopic", name=TOPIC, partitions=(partition,)),),
        timeout=NO_TIMEOUT,
    )
    answer = _ask(endpoint, LIST_OFFSETS, version, request).topics[0].partitions[0]
    assert (answer.partition_index, answer.error_code, answer.offset) == (0, ErrorCode.none, 2)


@pytest.mark.parametrize("version", _versions(METADATA))
def test_metadata(endpoint: Endpoint, orders: LogDirectory, version: int) -> None:
    module = _module(METADATA, version)
    request = _build(
        module,
        "MetadataRequest",
        topics=(_build(module, "MetadataRequestTopic", name=TOPIC, topic_id=None),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    response = _ask(endpoint, METADATA, version, request)
    host, _, port = endpoint.bootstrap.rpartition(":")
    assert [(b.host, b.port) for b in response.brokers] == [(host, int(port))]
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [(TOPIC, ErrorCode.none, 1)]
