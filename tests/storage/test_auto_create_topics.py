"""``TopicStore.get_or_create``: a topic created on first use, as a broker creates it for a producer
(``auto.create.topics.enable``, ``num.partitions``), on a filesystem and on an object store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysparklog.errors import InvalidConfigError, InvalidTopicError, UnknownTopicError
from pysparklog.storage.io import Storage, storage_for
from pysparklog.storage.topic_config import SERVER_PROPERTIES
from pysparklog.storage.topics import TopicStore
from tests.conftest import CountedS3
from tests.storage.conftest import BACKENDS, run_processes


def _server_properties(storage: Storage, text: str) -> None:
    storage.put(storage.join(SERVER_PROPERTIES), text.encode())


def test_a_missing_topic_is_created_with_num_partitions(storage: Storage) -> None:
    _server_properties(storage, "num.partitions=3\n")
    store = TopicStore(storage)
    created = store.get_or_create("events")
    assert created.partitions == 3
    assert store.names() == ["events"]
    assert store.get("events") == created
    assert store.get_or_create("events") == created  # the second use finds it


def test_without_server_properties_a_topic_gets_kafkas_default_of_one_partition(storage: Storage) -> None:
    assert TopicStore(storage).get_or_create("events").partitions == 1


@pytest.mark.parametrize("value", ["false", " FALSE "])
def test_auto_create_topics_enable_false_refuses_naming_the_setting_and_the_fix(storage: Storage, value: str) -> None:
    _server_properties(storage, f"auto.create.topics.enable={value}\nnum.partitions=3\n")
    store = TopicStore(storage)
    with pytest.raises(UnknownTopicError) as refused:
        store.get_or_create("events")
    assert str(refused.value) == (
        f"Topic 'events' does not exist, and {store.server_properties_path} sets auto.create.topics.enable=false, so "
        "it is not created on first use; create it with 'pysparklog topics --create --topic events', or set "
        "auto.create.topics.enable=true there"
    )
    assert store.names() == []
    store.create("events")  # an explicit creation is not first use
    assert store.get_or_create("events").partitions == 3


def test_the_setting_true_creates(storage: Storage) -> None:
    _server_properties(storage, "auto.create.topics.enable=true\n")
    assert TopicStore(storage).get_or_create("events").partitions == 1


def test_an_explicit_wish_overrides_the_setting_either_way(storage: Storage) -> None:
    _server_properties(storage, "auto.create.topics.enable=false\n")
    store = TopicStore(storage)
    assert store.get_or_create("wished", auto_create=True).partitions == 1
    _server_properties(storage, "")
    with pytest.raises(UnknownTopicError, match="Topic 'refused' does not exist in .*; create it with 'pysparklog"):
        store.get_or_create("refused", auto_create=False)
    assert store.names() == ["wished"]


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state", "__share_group_state"])
def test_an_internal_topic_is_never_created_on_first_use(storage: Storage, name: str) -> None:
    store = TopicStore(storage)
    with pytest.raises(
        UnknownTopicError, match=f"Topic '{name}' does not exist in .*it is an internal topic, created by its coordin"
    ):
        store.get_or_create(name, auto_create=True)
    assert store.names() == []


def test_a_name_starting_with_underscores_that_is_no_internal_topic_is_created_as_any_other(storage: Storage) -> None:
    # Kafka refuses to create only its internal topics on first use: other names may start with '__'.
    assert TopicStore(storage).get_or_create("__audit").partitions == 1
    assert TopicStore(storage).names() == ["__audit"]


@pytest.mark.parametrize(("name", "message"), [("bad name", "is illegal, it contains"), ("..", "cannot be")])
def test_an_illegal_name_keeps_its_error(storage: Storage, name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError, match=message):
        TopicStore(storage).get_or_create(name)


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_a_bad_value_of_the_setting_names_the_file_and_the_accepted_values(storage: Storage, value: str) -> None:
    _server_properties(storage, f"auto.create.topics.enable={value}\n")
    store = TopicStore(storage)
    with pytest.raises(InvalidConfigError) as refused:
        store.get_or_create("events")
    assert str(refused.value) == (
        f"{store.server_properties_path}: auto.create.topics.enable = {value!r} is invalid; accepted: true or false"
    )
    assert store.names() == []


def test_validate_only_creates_nothing(storage: Storage) -> None:
    _server_properties(storage, "num.partitions=2\n")
    store = TopicStore(storage)
    assert store.get_or_create("events", validate_only=True).partitions == 2
    assert store.names() == []


def _get_or_create(backend: str, root: str, results: str, worker: int) -> None:
    topic = TopicStore(BACKENDS[backend](root)).get_or_create("racy")
    (Path(results) / str(worker)).write_text(f"{topic.topic_id} {topic.partitions}")


def test_processes_racing_to_create_a_topic_all_get_the_one_topic(
    backend_and_root: tuple[str, str], tmp_path: Path
) -> None:
    backend, root = backend_and_root
    storage = BACKENDS[backend](root)
    _server_properties(storage, "num.partitions=3\n")
    results = tmp_path / "results"
    results.mkdir()
    run_processes(_get_or_create, [(backend, root, str(results), worker) for worker in range(4)])
    store = TopicStore(storage)
    topic = store.get("racy")
    assert store.names() == ["racy"]
    assert {path.read_text() for path in results.iterdir()} == {f"{topic.topic_id} 3"}


def test_an_existing_topic_costs_what_get_costs_on_an_object_store(counted_s3: CountedS3) -> None:
    store = TopicStore(storage_for(counted_s3.root, counted_s3.storage_options))
    store.create("events", 2)
    proxy = counted_s3.proxy
    before = proxy.mark()
    store.get("events")
    by_get = proxy.count(since=before)
    before = proxy.mark()
    assert store.get_or_create("events").partitions == 2
    assert proxy.count(since=before) == by_get, proxy.summary(since=before)
    assert proxy.count(since=before, path_contains=SERVER_PROPERTIES) == 0
