"""A ``Producer`` creates a missing topic at its first use, as a broker does for Kafka's producer
(``auto.create.topics.enable``, ``num.partitions`` of the log directory's ``server.properties``), on a filesystem
and on an object store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory
from pysparklog.errors import UnknownTopicError
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.io import storage_for
from pysparklog.storage.topic_config import SERVER_PROPERTIES
from tests.conftest import BUCKET, CountedS3, read_all

FIRST_USES: dict[str, Callable[[Producer], object]] = {
    "send": lambda producer: producer.send("events", b"v").get(timeout=30),
    "send_arrow": lambda producer: producer.send_arrow("events", pa.table({"value": [b"v"]})),
    "partitions_for": lambda producer: producer.partitions_for("events"),
}


@pytest.fixture(params=["filesystem", "object store"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "filesystem":
        return str(tmp_path / "logs")
    request.getfixturevalue("s3_endpoint")
    return f"s3://{BUCKET}{tmp_path}/logs"


def _server_properties(logs: LogDirectory, text: str) -> None:
    logs.storage.put(logs.storage.join(SERVER_PROPERTIES), text.encode())


@pytest.mark.parametrize("first_use", sorted(FIRST_USES))
def test_a_first_use_creates_the_topic_with_num_partitions(location: str, first_use: str) -> None:
    logs = LogDirectory(location)
    _server_properties(logs, "num.partitions=3\n")
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:
        FIRST_USES[first_use](producer)
        assert producer.partitions_for("events") == [0, 1, 2]
    assert LogDirectory(location).topics.get("events").partitions == 3


def test_records_sent_to_a_new_topic_are_appended(location: str) -> None:
    with Producer(location) as producer:
        metadata = producer.send("events", b"first", key=b"k").get(timeout=30)
    assert (metadata.topic, metadata.partition, metadata.offset) == ("events", 0, 0)  # Kafka's default: 1 partition
    with LogDirectory(location).partition("events", 0) as log:
        assert read_all(log).column("value").to_pylist() == [b"first"]


@pytest.mark.parametrize("first_use", sorted(FIRST_USES))
def test_auto_create_topics_enable_false_refuses_naming_the_setting(location: str, first_use: str) -> None:
    logs = LogDirectory(location)
    _server_properties(logs, "auto.create.topics.enable=false\n")
    with Producer(logs) as producer, pytest.raises(UnknownTopicError) as refused:
        FIRST_USES[first_use](producer)
    message = str(refused.value)
    assert "Topic 'events' does not exist" in message
    assert f"{logs.topics.server_properties_path} sets auto.create.topics.enable=false" in message
    assert "pysparklog topics --create --topic events" in message
    assert logs.topics.names() == []


def test_an_explicit_partition_beyond_a_created_topic_stays_an_error(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    with Producer(logs) as producer, pytest.raises(UnknownTopicError, match=r"1 is not in the range \[0...1\)"):
        producer.send("events", b"v", partition=1)
    assert logs.topics.get("events").partitions == 1


def test_threads_of_two_producers_racing_create_one_topic(tmp_path: Path) -> None:
    _server_properties(LogDirectory(tmp_path), "num.partitions=2\n")
    barrier = threading.Barrier(4)
    counts: list[list[int]] = []

    def first_use() -> None:
        with Producer(tmp_path) as producer:
            barrier.wait()
            counts.append(producer.partitions_for("racy"))
            producer.send("racy", b"v").get(timeout=30)

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert counts == [[0, 1]] * 4
    logs = LogDirectory(tmp_path)
    assert logs.topics.names() == ["racy"]
    assert sum(logs.partition("racy", p).log_end_offset for p in range(2)) == 4


def test_a_producers_first_look_at_an_existing_topic_asks_no_more_than_get(counted_s3: CountedS3) -> None:
    """The creation path costs nothing when the topic exists: the producer's first look at it is at most the
    ``get`` it was before, with no read of ``server.properties`` (which only a missing topic needs)."""
    logs = LogDirectory(storage_for(counted_s3.root, counted_s3.storage_options))
    logs.topics.create("events", 2)
    proxy = counted_s3.proxy
    before = proxy.mark()
    logs.topics.get("events")
    by_get = proxy.count(since=before)
    with Producer(logs, ProducerConfig(linger_ms=0)) as producer:
        before = proxy.mark()
        assert producer.partitions_for("events") == [0, 1]
        assert proxy.count(since=before) <= by_get, proxy.summary(since=before)
        assert proxy.count(since=before, path_contains=SERVER_PROPERTIES) == 0, proxy.summary(since=before)
