"""``TopicStore`` on every storage backend: the topics of a log directory on a filesystem and on an object store,
where the lock is a lease and a deleted topic's partition directories cannot be renamed."""

from __future__ import annotations

import json

import pytest

from pysparklog import LogDirectory
from pysparklog.errors import InvalidLogDirectoryError, MetadataChangedError, TopicExistsError, UnknownTopicError
from pysparklog.storage import checkpoints
from pysparklog.storage.io import FileSystemStorage, Storage
from pysparklog.storage.topic_config import SERVER_PROPERTIES
from pysparklog.storage.topics import TOPICS_FILE, TopicStore
from tests.conftest import keyed_table
from tests.storage.conftest import BACKENDS, NoLock, run_processes


def _topic_id_in(storage: Storage, directory: str) -> str | None:
    return checkpoints.read_partition_metadata(storage, storage.join(directory, checkpoints.PARTITION_METADATA))


def _directories(storage: Storage) -> list[str]:
    root = storage.join()
    return [name for name in storage.list(root) if storage.is_directory(storage.join(name))]


def test_create_list_and_describe(storage: Storage) -> None:
    store = TopicStore(storage)
    created = store.create("orders", 3, {"retention.ms": "3600000"})
    store.create("audit", 1)
    assert store.names() == ["audit", "orders"]
    assert TopicStore(storage).get("orders") == created
    assert created.partitions == 3 and dict(created.configs) == {"retention.ms": "3600000"}
    assert [_topic_id_in(storage, f"orders-{p}") for p in range(3)] == [created.topic_id] * 3
    retention = next(entry for entry in store.describe_configs("orders") if entry.name == "retention.ms")
    assert retention.value == "3600000"
    assert store.config_provider("orders")().retention_ms == 3_600_000
    with pytest.raises(TopicExistsError):
        store.create("orders", 1)
    assert store.create("orders", 1, if_not_exists=True) == created


def test_server_properties_give_the_defaults(storage: Storage) -> None:
    storage.put(storage.join(SERVER_PROPERTIES), b"num.partitions=4\nlog.retention.ms=5000\n")
    store = TopicStore(storage)
    topic = store.create("t")
    assert topic.partitions == 4
    assert store.config_provider("t")().retention_ms == 5000


def test_alter_partitions_and_configs(storage: Storage) -> None:
    store = TopicStore(storage)
    created = store.create("t", 2, {"retention.ms": "1000"})
    provider = store.config_provider("t")
    assert provider().retention_ms == 1000
    assert store.alter_partitions("t", 5).partitions == 5
    assert [_topic_id_in(storage, f"t-{p}") for p in range(5)] == [created.topic_id] * 5
    store.alter_configs("t", {"segment.ms": "60000"}, delete=["retention.ms"])
    assert dict(TopicStore(storage).get("t").configs) == {"segment.ms": "60000"}
    assert provider().segment_ms == 60000 and provider().retention_ms != 1000


def test_delete_removes_the_topic_its_directories_and_its_checkpoint_entries(storage: Storage) -> None:
    store = TopicStore(storage)
    deleted = store.create("t", 3)
    store.create("kept", 1)
    checkpoint = storage.join(checkpoints.LOG_START_OFFSET_CHECKPOINT)
    checkpoints.write_offset_checkpoint(storage, checkpoint, {("t", 0): 4, ("kept", 0): 2})
    storage.put(storage.join("t-1", "00000000000000000000.log"), b"records")
    seen: list[tuple[int, int]] = []
    store.delete("t", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert store.names() == ["kept"]
    with pytest.raises(UnknownTopicError):
        store.get("t")
    assert _directories(storage) == ["kept-0"]
    assert checkpoints.read_offset_checkpoint(storage, checkpoint) == {("kept", 0): 2}
    assert json.loads(storage.read(storage.join(TOPICS_FILE)))["deleting"] == {}
    again = store.create("t", 1)
    assert again.topic_id != deleted.topic_id
    assert _topic_id_in(storage, "t-0") == again.topic_id


def test_a_deletion_a_crash_interrupted_is_finished_by_the_next_listing(storage: Storage) -> None:
    store = TopicStore(storage)
    topic = store.create("t", 2)
    path = storage.join(TOPICS_FILE)
    document = json.loads(storage.read(path))
    del document["topics"]["t"]
    document["deleting"] = {"t": topic.topic_id}  # the commit point was written, then the process died
    storage.put(path, json.dumps(document).encode())
    with pytest.raises(UnknownTopicError):
        store.get("t")
    assert store.names() == []
    assert _directories(storage) == []
    assert json.loads(storage.read(path))["deleting"] == {}


def test_a_topic_id_is_set_on_a_filesystem_and_refused_on_an_object_store(storage: Storage) -> None:
    """On an object store a topic's id names the local replicas of its partitions (``objects.log``): an id chosen
    again could name a replica of another log, so it is never set there, and a broker could not load the partitions
    anyway."""
    logs = LogDirectory(storage)
    created = logs.topics.create("t", 2)
    with logs.partition("t", 1) as log:
        log.append_arrow(keyed_table(3))
    kafka_id = "fFqDVmuKQi-6-agtLR19vw"
    if isinstance(storage, FileSystemStorage):
        assert logs.set_topic_id("t", kafka_id).topic_id == kafka_id
        expected = kafka_id
    else:
        with pytest.raises(
            InvalidLogDirectoryError, match="on an object store: .* accepted: a log directory on a file"
        ):
            logs.set_topic_id("t", kafka_id)
        expected = created.topic_id
    assert TopicStore(storage).get("t").topic_id == expected
    assert [_topic_id_in(storage, f"t-{p}") for p in range(2)] == [expected] * 2
    with logs.partition("t", 1) as log:
        assert (log.topic_id, log.log_end_offset) == (expected, 3)


def test_a_change_made_without_exclusion_fails_rather_than_overwrite(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metadata is replaced only if it is still the version read: a holder that lost its lease while it
    stalled, and wrote anyway, would undo what the next holder changed meanwhile."""
    TopicStore(storage).create("b", 1)
    monkeypatch.setattr(storage, "lock", lambda path: NoLock())
    stale = TopicStore(storage)
    read_settings = stale.server_properties

    def meanwhile() -> object:  # called by create, between its read of the metadata and its write
        TopicStore(storage).alter_configs("b", {"retention.ms": "1000"})
        return read_settings()

    monkeypatch.setattr(stale, "server_properties", meanwhile)
    with pytest.raises(MetadataChangedError, match=f"{TOPICS_FILE} changed after this process read it"):
        stale.create("a", 1)
    assert dict(TopicStore(storage).get("b").configs) == {"retention.ms": "1000"}, "the other change is kept"


def _create_and_alter(backend: str, root: str, worker: int, key: str) -> None:
    store = TopicStore(BACKENDS[backend](root))
    for i in range(4):
        store.create(f"w{worker}-{i}", 2)
        store.alter_configs("shared", {key: str(1000 + i)})


@pytest.mark.slow
def test_processes_creating_topics_and_altering_configs_at_once_lose_nothing(backend_and_root: tuple[str, str]) -> None:
    backend, root = backend_and_root
    store = TopicStore(BACKENDS[backend](root))
    store.create("shared", 1)
    keys = ["retention.ms", "segment.ms", "flush.ms", "delete.retention.ms"]
    run_processes(_create_and_alter, [(backend, root, worker, key) for worker, key in enumerate(keys)])
    assert store.names() == sorted(["shared"] + [f"w{w}-{i}" for w in range(len(keys)) for i in range(4)])
    assert dict(store.get("shared").configs) == dict.fromkeys(keys, "1003")
