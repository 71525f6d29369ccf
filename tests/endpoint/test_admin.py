"""The admin APIs on the wire (CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords): exact requests of the oldest and newest versions served, each answered
with Kafka's error codes per topic, resource or partition, and each change checked in the log directory itself."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from kio.schema.create_partitions.v0 import request as create_partitions_v0
from kio.schema.create_partitions.v0 import response as create_partitions_v0_response
from kio.schema.create_partitions.v3 import request as create_partitions_v3
from kio.schema.create_partitions.v3 import response as create_partitions_v3_response
from kio.schema.create_topics.v2 import request as create_topics_v2
from kio.schema.create_topics.v2 import response as create_topics_v2_response
from kio.schema.create_topics.v7 import request as create_topics_v7
from kio.schema.create_topics.v7 import response as create_topics_v7_response
from kio.schema.delete_records.v2 import request as delete_records_v2
from kio.schema.delete_records.v2 import response as delete_records_v2_response
from kio.schema.delete_topics.v1 import request as delete_topics_v1
from kio.schema.delete_topics.v1 import response as delete_topics_v1_response
from kio.schema.delete_topics.v6 import request as delete_topics_v6
from kio.schema.delete_topics.v6 import response as delete_topics_v6_response
from kio.schema.describe_configs.v1 import request as describe_configs_v1
from kio.schema.describe_configs.v1 import response as describe_configs_v1_response
from kio.schema.describe_configs.v4 import request as describe_configs_v4
from kio.schema.describe_configs.v4 import response as describe_configs_v4_response
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1 import request as alter_configs_v1
from kio.schema.incremental_alter_configs.v1 import response as alter_configs_v1_response
from kio.static.primitive import i32Timedelta

from pysparklog.endpoint import Endpoint
from pysparklog.endpoint.data.metadata import topic_uuid
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.topics import MAX_PARTITIONS
from tests.conftest import keyed_table
from tests.endpoint.kafka_wire import WireClient

T = TypeVar("T")
TIMEOUT = i32Timedelta.parse(timedelta(seconds=30))
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def kio(entity: type[T], **fields: Any) -> T:
    """A kio entity from plain ints and strings: kio types them as its own int and str subtypes, which mypy would have
    written out at every field."""
    return entity(**fields)


def _server_properties(log_dir: LogDirectory, text: str) -> None:
    """Give the log directory broker settings, as its ``server.properties``."""
    Path(log_dir.path).mkdir(parents=True, exist_ok=True)
    Path(log_dir.path, "server.properties").write_text(text)


def _topic_v7(name: str, partitions: int = 1, replication: int = -1, configs: dict[str, Any] | None = None) -> Any:
    return kio(
        create_topics_v7.CreatableTopic,
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=(),
        configs=tuple(kio(create_topics_v7.CreatableTopicConfig, name=k, value=v) for k, v in (configs or {}).items()),
    )


def _create_v7(client: WireClient, *topics: Any, validate_only: bool = False) -> dict[str, Any]:
    request = kio(create_topics_v7.CreateTopicsRequest, topics=topics, validate_only=validate_only)
    response = client.request(request, create_topics_v7_response.CreateTopicsResponse)
    return {result.name: result for result in response.topics}


def test_create_topics_creates_each_topic_or_answers_its_error(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create("existing", 1)
    with WireClient(endpoint.bootstrap) as client:
        results = _create_v7(
            client,
            _topic_v7("orders", 3, configs={"retention.ms": "60000", "cleanup.policy": "compact,delete"}),
            _topic_v7("existing"),
            _topic_v7("copies", 2, replication=3),
            _topic_v7("no-rf", 2, replication=0),
            _topic_v7("bad-config", 1, configs={"retention.ms": "soon"}),
            _topic_v7("null-config", 1, configs={"retention.ms": None}),
            _topic_v7("unknown-config", 1, configs={"retention.msec": "1"}),
            _topic_v7("no-partitions", 0),
            _topic_v7("too-many", MAX_PARTITIONS + 1),
            _topic_v7("bad/name"),
            _topic_v7("__cluster_metadata"),
            _topic_v7("twice"),
            _topic_v7("twice"),
        )
    orders = results["orders"]
    assert orders.error_code == ErrorCode.none and orders.error_message is None
    created = log_dir.topics.get("orders")
    assert (created.partitions, dict(created.configs)) == (
        3,
        {"retention.ms": "60000", "cleanup.policy": "compact,delete"},
    )
    assert orders.topic_id == topic_uuid(created.topic_id)
    assert (orders.num_partitions, orders.replication_factor) == (3, 1)
    configs = {c.name: (c.value, c.config_source) for c in orders.configs}
    assert configs["retention.ms"] == ("60000", TOPIC_CONFIG)
    assert configs["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)

    def error(name: str) -> tuple[ErrorCode, str]:
        return results[name].error_code, results[name].error_message

    assert error("existing") == (ErrorCode.topic_already_exists, "Topic 'existing' already exists.")
    code, message = error("copies")
    assert code == ErrorCode.invalid_replication_factor and "holds one copy of each partition" in message
    assert error("no-rf")[0] == ErrorCode.invalid_replication_factor
    code, message = error("bad-config")
    assert code == ErrorCode.invalid_config and "retention.ms" in message and "accepted: an integer" in message
    assert error("null-config") == (
        ErrorCode.invalid_config,
        "Null value not supported for topic configs: retention.ms",
    )
    code, message = error("unknown-config")
    assert code == ErrorCode.invalid_config and "accepted: cleanup.policy" in message
    assert error("no-partitions")[0] == ErrorCode.invalid_partitions
    assert error("too-many")[0] == ErrorCode.invalid_partitions
    assert error("bad/name")[0] == ErrorCode.invalid_topic_exception
    assert error("__cluster_metadata") == (
        ErrorCode.invalid_request,
        "Creation of internal topic __cluster_metadata is prohibited.",
    )
    assert error("twice") == (ErrorCode.invalid_request, "Duplicate topic name.")
    assert log_dir.topics.names() == ["existing", "orders"]


def test_create_topics_validate_only_creates_nothing_and_answers_what_it_would(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    with WireClient(endpoint.bootstrap) as client:
        results = _create_v7(client, _topic_v7("orders", 4, configs={"segment.ms": "1000"}), validate_only=True)
    assert results["orders"].error_code == ErrorCode.none
    assert results["orders"].num_partitions == 4
    assert {c.name: c.value for c in results["orders"].configs}["segment.ms"] == "1000"
    assert log_dir.topics.names() == []


def test_create_topics_default_partitions_come_from_server_properties(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    _server_properties(log_dir, "num.partitions=5\n")
    with WireClient(endpoint.bootstrap) as client:
        results = _create_v7(client, _topic_v7("defaulted", -1))
    assert results["defaulted"].num_partitions == 5
    assert log_dir.topics.get("defaulted").partitions == 5


def test_create_topics_takes_a_manual_assignment_to_this_endpoint_only(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    node = endpoint.state.node_id if endpoint.state is not None else -1

    def assigned(name: str, *replicas: tuple[int, ...]) -> Any:
        return kio(
            create_topics_v7.CreatableTopic,
            name=name,
            num_partitions=-1,
            replication_factor=-1,
            assignments=tuple(
                kio(create_topics_v7.CreatableReplicaAssignment, partition_index=i, broker_ids=ids)
                for i, ids in enumerate(replicas)
            ),
            configs=(),
        )

    with WireClient(endpoint.bootstrap) as client:
        results = _create_v7(
            client,
            assigned("here", (node,), (node,)),
            assigned("elsewhere", (node + 1,)),
            assigned("two", (node, node + 1)),
        )
    assert results["here"].error_code == ErrorCode.none and log_dir.topics.get("here").partitions == 2
    assert results["elsewhere"].error_code == ErrorCode.invalid_replica_assignment
    assert f"accepted: [{node}]" in results["elsewhere"].error_message
    assert results["two"].error_code == ErrorCode.invalid_replication_factor


def test_create_topics_v2_the_oldest_served(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    request = kio(
        create_topics_v2.CreateTopicsRequest,
        topics=(
            kio(
                create_topics_v2.CreatableTopic,
                name="old",
                num_partitions=2,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=TIMEOUT,
        validate_only=False,
    )
    with WireClient(endpoint.bootstrap) as client:
        response = client.request(request, create_topics_v2_response.CreateTopicsResponse)
    assert [(r.name, r.error_code) for r in response.topics] == [("old", ErrorCode.none)]
    assert log_dir.topics.get("old").partitions == 2


def test_delete_topics_by_name_and_by_id(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    by_name = log_dir.topics.create("by-name", 2)
    by_id = log_dir.topics.create("by-id", 1)
    log_dir.topics.create("kept", 1)
    unknown_id = uuid.uuid4()
    request = kio(
        delete_topics_v6.DeleteTopicsRequest,
        topics=(
            kio(delete_topics_v6.DeleteTopicState, name="by-name", topic_id=uuid.UUID(int=0)),
            kio(delete_topics_v6.DeleteTopicState, name=None, topic_id=topic_uuid(by_id.topic_id)),
            kio(delete_topics_v6.DeleteTopicState, name=None, topic_id=unknown_id),
            kio(delete_topics_v6.DeleteTopicState, name="missing", topic_id=uuid.UUID(int=0)),
            kio(delete_topics_v6.DeleteTopicState, name="kept", topic_id=topic_uuid(by_id.topic_id)),
        ),
        timeout=TIMEOUT,
    )
    with WireClient(endpoint.bootstrap) as client:
        response = client.request(request, delete_topics_v6_response.DeleteTopicsResponse)
    results = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in response.responses}
    assert results[("by-name", topic_uuid(by_name.topic_id))] == (ErrorCode.none, None)
    assert results[("by-id", topic_uuid(by_id.topic_id))] == (ErrorCode.none, None)
    assert results[(None, unknown_id)][0] == ErrorCode.unknown_topic_id
    assert results[("missing", None)][0] == ErrorCode.unknown_topic_or_partition  # kio reads the zero id as None
    assert results[("kept", topic_uuid(by_id.topic_id))] == (
        ErrorCode.invalid_request,
        "You may not specify both topic name and topic id.",
    )
    assert log_dir.topics.names() == ["kept"]
    assert not Path(log_dir.path, "by-name-0").exists()


def test_delete_topics_v1_by_names(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create("a", 1)
    request = kio(delete_topics_v1.DeleteTopicsRequest, topic_names=("a", "b", "b"), timeout=TIMEOUT)
    with WireClient(endpoint.bootstrap) as client:
        response = client.request(request, delete_topics_v1_response.DeleteTopicsResponse)
    assert {r.name: r.error_code for r in response.responses} == {
        "a": ErrorCode.none,
        "b": ErrorCode.invalid_request,
    }
    assert log_dir.topics.names() == []


def test_create_partitions_adds_partitions_or_answers_why_not(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    log_dir.topics.create("grow", 1)
    log_dir.topics.create("same", 2)
    log_dir.topics.create("checked", 1)

    def topic(name: str, count: int) -> Any:
        return kio(create_partitions_v3.CreatePartitionsTopic, name=name, count=count, assignments=None)

    with WireClient(endpoint.bootstrap) as client:
        response = client.request(
            kio(
                create_partitions_v3.CreatePartitionsRequest,
                topics=(topic("grow", 3), topic("same", 2), topic("same", 1), topic("missing", 2)),
                timeout=TIMEOUT,
                validate_only=False,
            ),
            create_partitions_v3_response.CreatePartitionsResponse,
        )
        validated = client.request(
            kio(
                create_partitions_v3.CreatePartitionsRequest,
                topics=(topic("checked", 4),),
                timeout=TIMEOUT,
                validate_only=True,
            ),
            create_partitions_v3_response.CreatePartitionsResponse,
        )
        oldest = client.request(
            kio(
                create_partitions_v0.CreatePartitionsRequest,
                topics=(kio(create_partitions_v0.CreatePartitionsTopic, name="checked", count=2, assignments=None),),
                timeout=TIMEOUT,
                validate_only=False,
            ),
            create_partitions_v0_response.CreatePartitionsResponse,
        )
    results = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert results["grow"] == (ErrorCode.none, None)
    assert results["same"] == (ErrorCode.invalid_request, "Duplicate topic name.")
    assert results["missing"][0] == ErrorCode.unknown_topic_or_partition
    assert [(r.name, r.error_code) for r in validated.results] == [("checked", ErrorCode.none)]
    assert [(r.name, r.error_code) for r in oldest.results] == [("checked", ErrorCode.none)]
    assert log_dir.topics.get("grow").partitions == 3 and Path(log_dir.path, "grow-2").is_dir()
    assert log_dir.topics.get("checked").partitions == 2  # validate_only added none; v0 added one
    with WireClient(endpoint.bootstrap) as client:
        fewer = client.request(
            kio(
                create_partitions_v3.CreatePartitionsRequest,
                topics=(topic("grow", 2),),
                timeout=TIMEOUT,
                validate_only=False,
            ),
            create_partitions_v3_response.CreatePartitionsResponse,
        )
    assert fewer.results[0].error_code == ErrorCode.invalid_partitions
    assert fewer.results[0].error_message == "Topic currently has 3 partitions, which is higher than the requested 2."


def _describe_v4(client: WireClient, *resources: tuple[int, str, tuple[str, ...] | None], **flags: bool) -> Any:
    request = kio(
        describe_configs_v4.DescribeConfigsRequest,
        resources=tuple(
            kio(
                describe_configs_v4.DescribeConfigsResource,
                resource_type=kind,
                resource_name=name,
                configuration_keys=keys,
            )
            for kind, name, keys in resources
        ),
        **flags,
    )
    return client.request(request, describe_configs_v4_response.DescribeConfigsResponse).results


def test_describe_configs_gives_each_topic_config_with_its_source_and_synonyms(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    _server_properties(log_dir, "log.retention.hours=24\n")
    log_dir.topics.create("orders", 1, {"segment.bytes": "1048576"})
    with WireClient(endpoint.bootstrap) as client:
        (everything,) = _describe_v4(client, (TOPIC, "orders", None), include_synonyms=True, include_documentation=True)
        (some, missing, illegal) = _describe_v4(
            client, (TOPIC, "orders", ("retention.ms",)), (TOPIC, "missing", None), (TOPIC, "bad/name", None)
        )
    assert everything.error_code == ErrorCode.none
    configs = {c.name: c for c in everything.configs}
    assert set(configs) == {entry.name for entry in log_dir.topics.describe_configs("orders")}
    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source, segment.read_only, segment.config_type) == ("1048576", 1, False, 3)
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("segment.bytes", "1048576", TOPIC_CONFIG),
        ("log.segment.bytes", "1073741824", DEFAULT_CONFIG),
    ]
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.config_type) == ("86400000", STATIC_BROKER_CONFIG, 5)
    assert ("log.retention.hours", "24", STATIC_BROKER_CONFIG) in [
        (s.name, s.value, s.source) for s in retention.synonyms
    ]
    assert "accepted: an integer" in retention.documentation
    assert [(c.name, c.value, c.synonyms, c.documentation) for c in some.configs] == [
        ("retention.ms", "86400000", (), None)
    ]
    assert (missing.error_code, missing.configs) == (ErrorCode.unknown_topic_or_partition, ())
    assert illegal.error_code == ErrorCode.invalid_topic_exception


def test_describe_configs_of_the_endpoint_as_a_broker(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    _server_properties(log_dir, "num.partitions=3\nlog.segment.bytes=2097152\n")
    node = endpoint.state.node_id if endpoint.state is not None else -1
    with WireClient(endpoint.bootstrap) as client:
        (broker, defaults, other, group) = _describe_v4(
            client, (BROKER, str(node), None), (BROKER, "", None), (BROKER, str(node + 1), None), (32, "g", None)
        )
        (v1,) = client.request(
            kio(
                describe_configs_v1.DescribeConfigsRequest,
                resources=(
                    kio(
                        describe_configs_v1.DescribeConfigsResource,
                        resource_type=BROKER,
                        resource_name=str(node),
                        configuration_keys=("num.partitions",),
                    ),
                ),
                include_synonyms=False,
            ),
            describe_configs_v1_response.DescribeConfigsResponse,
        ).results
    configs = {c.name: (c.value, c.config_source, c.read_only) for c in broker.configs}
    assert configs["num.partitions"] == ("3", STATIC_BROKER_CONFIG, True)
    assert configs["log.segment.bytes"] == ("2097152", STATIC_BROKER_CONFIG, True)
    assert configs["log.retention.hours"] == ("168", DEFAULT_CONFIG, True)
    assert configs["log.retention.ms"] == (None, DEFAULT_CONFIG, True)
    assert (defaults.error_code, defaults.configs) == (ErrorCode.none, ())
    assert other.error_code == ErrorCode.invalid_request and f"expected {node}" in other.error_message
    assert group.error_code == ErrorCode.invalid_request and "accepted: 2 (topic) and 4 (broker)" in group.error_message
    assert [(c.name, c.value) for c in v1.configs] == [("num.partitions", "3")]


def _alter_v1(
    client: WireClient, *resources: tuple[int, str, tuple[tuple[str, int, str | None], ...]], **flags: bool
) -> dict[str, Any]:
    request = kio(
        alter_configs_v1.IncrementalAlterConfigsRequest,
        resources=tuple(
            kio(
                alter_configs_v1.AlterConfigsResource,
                resource_type=kind,
                resource_name=name,
                configs=tuple(
                    kio(alter_configs_v1.AlterableConfig, name=key, config_operation=op, value=value)
                    for key, op, value in configs
                ),
            )
            for kind, name, configs in resources
        ),
        validate_only=flags.get("validate_only", False),
    )
    response = client.request(request, alter_configs_v1_response.IncrementalAlterConfigsResponse)
    return {r.resource_name: (r.error_code, r.error_message) for r in response.responses}


def test_incremental_alter_configs_sets_deletes_appends_and_subtracts(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create("orders", 1, {"retention.ms": "1000", "segment.ms": "5000"})
    log_dir.topics.create("checked", 1)
    log_dir.topics.create("refused", 1, {"retention.ms": "1000"})
    with WireClient(endpoint.bootstrap) as client:
        results = _alter_v1(
            client,
            (
                TOPIC,
                "orders",
                (("retention.ms", SET, "2000"), ("segment.ms", DELETE, None), ("cleanup.policy", APPEND, "compact")),
            ),
            (TOPIC, "refused", (("retention.ms", SET, "3000"), ("segment.ms", APPEND, "1"))),
            (TOPIC, "missing", (("retention.ms", SET, "1"),)),
            (TOPIC, "twice", (("retention.ms", SET, "1"), ("retention.ms", DELETE, None))),
            (TOPIC, "null", (("retention.ms", SET, None),)),
        )
        validated = _alter_v1(client, (TOPIC, "checked", (("retention.ms", SET, "7"),)), validate_only=True)
        subtracted = _alter_v1(client, (TOPIC, "orders", (("cleanup.policy", SUBTRACT, "delete"),)))
    assert results["orders"] == (ErrorCode.none, None)
    code, message = results["refused"]
    assert code == ErrorCode.invalid_config and "append is not allowed for config key: segment.ms" in message
    assert results["missing"][0] == ErrorCode.unknown_topic_or_partition
    assert results["twice"] == (ErrorCode.invalid_request, "Error due to duplicate config keys")
    assert results["null"] == (ErrorCode.invalid_request, "Null value not supported for : retention.ms")
    assert validated["checked"] == (ErrorCode.none, None)
    assert subtracted["orders"] == (ErrorCode.none, None)
    assert dict(log_dir.topics.get("orders").configs) == {"retention.ms": "2000", "cleanup.policy": "compact"}
    assert dict(log_dir.topics.get("refused").configs) == {"retention.ms": "1000"}  # a resource changes whole or not
    assert dict(log_dir.topics.get("checked").configs) == {}


def test_incremental_alter_configs_refuses_broker_configs_and_repeated_resources(endpoint: Endpoint) -> None:
    node = endpoint.state.node_id if endpoint.state is not None else -1
    with WireClient(endpoint.bootstrap) as client:
        broker = _alter_v1(client, (BROKER, str(node), (("log.retention.hours", SET, "1"),)))
        repeated = _alter_v1(client, (TOPIC, "t", ()), (TOPIC, "t", ()))
    code, message = broker[str(node)]
    assert code == ErrorCode.invalid_config and "server.properties" in message
    assert repeated["t"] == (ErrorCode.invalid_request, "Each resource must appear at most once.")


def test_delete_records_raises_each_log_start_offset_or_answers_why_not(
    endpoint: Endpoint, log_dir: LogDirectory
) -> None:
    log_dir.topics.create("events", 2)
    log_dir.topics.create("compacted", 1, {"cleanup.policy": "compact"})
    for topic, partition in (("events", 0), ("events", 1), ("compacted", 0)):
        with log_dir.partition(topic, partition) as log:
            log.append_arrow(keyed_table(10))

    def entry(name: str, *offsets: tuple[int, int]) -> Any:
        return kio(
            delete_records_v2.DeleteRecordsTopic,
            name=name,
            partitions=tuple(
                kio(delete_records_v2.DeleteRecordsPartition, partition_index=p, offset=o) for p, o in offsets
            ),
        )

    request = kio(
        delete_records_v2.DeleteRecordsRequest,
        topics=(entry("events", (0, 4), (1, -1), (2, 1)), entry("compacted", (0, 1)), entry("missing", (0, 1))),
        timeout=TIMEOUT,
    )
    with WireClient(endpoint.bootstrap) as client:
        response = client.request(request, delete_records_v2_response.DeleteRecordsResponse)
        past_the_end = client.request(
            kio(delete_records_v2.DeleteRecordsRequest, topics=(entry("events", (0, 11)),), timeout=TIMEOUT),
            delete_records_v2_response.DeleteRecordsResponse,
        )
    results = {
        (t.name, p.partition_index): (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions
    }
    assert results == {
        ("events", 0): (ErrorCode.none, 4),
        ("events", 1): (ErrorCode.none, 10),
        ("events", 2): (ErrorCode.unknown_topic_or_partition, -1),
        ("compacted", 0): (ErrorCode.policy_violation, -1),
        ("missing", 0): (ErrorCode.unknown_topic_or_partition, -1),
    }
    assert past_the_end.topics[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    with log_dir.partition("events", 0) as log:
        assert log.log_start_offset == 4
    with log_dir.partition("compacted", 0) as log:
        assert log.log_start_offset == 0


def test_a_bad_server_properties_or_operation_is_answered_not_fatal(endpoint: Endpoint, log_dir: LogDirectory) -> None:
    """What the endpoint cannot describe or do is a resource's error, and the connection goes on serving."""
    log_dir.topics.create("orders", 1)
    _server_properties(log_dir, "log.retention.hours=soon\n")
    with WireClient(endpoint.bootstrap) as client:
        (described,) = _describe_v4(client, (TOPIC, "orders", None))
        unknown_operation = _alter_v1(client, (TOPIC, "orders", (("retention.ms", 7, "1"),)))
    assert described.error_code == ErrorCode.invalid_config
    assert "server.properties: log.retention.hours" in described.error_message
    code, message = unknown_operation["orders"]
    assert code == ErrorCode.invalid_request and "Unknown config operation 7" in message and "3 (SUBTRACT)" in message
