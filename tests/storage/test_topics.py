"""Topics of a log directory: Kafka's validation rules, durable and atomic metadata shared by processes, topics
made by appends, deletion, and configs that reach logs already open."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pysparklog import LogConfig, LogDirectory
from pysparklog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    InvalidTopicIdError,
    TopicExistsError,
    TransactionInProgressError,
    UnknownTopicError,
)
from pysparklog.storage import checkpoints
from pysparklog.storage.io import PosixStorage
from pysparklog.storage.records.default_records import ControlRecordType
from pysparklog.storage.topics import (
    MAX_PARTITIONS,
    TOPICS_FILE,
    ZERO_TOPIC_ID,
    TopicStore,
    parse_topic_id,
    parse_topic_partitions,
    validate_topic_partitions,
)
from tests.conftest import REPO, keyed_table, read_all
from tests.storage.test_transactions import Producers

LOCAL = PosixStorage("/")  # checkpoint files are named by absolute paths


def _store(tmp_path: Path) -> TopicStore:
    return LogDirectory(tmp_path).topics


def _python(code: str, *args: str, stdin: int | None = None, stdout: int | None = None) -> subprocess.Popen[str]:
    """Run ``code`` in a new interpreter that imports this checkout."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=REPO,
        text=True,
        stdin=stdin,
        stdout=stdout,
    )


def _age(path: Path) -> None:
    """Make a file look written an hour ago, past the window in which a provider distrusts its cache."""
    old = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(old, old))


# -- names ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a b", "a/b", "a\\b", "café", "a:b", "a*", "tab\t", "a\nb"])
def test_names_with_characters_kafka_refuses_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidTopicError, match="contains a character other than ASCII alphanumerics"):
        _store(tmp_path).create(name)
    assert list(tmp_path.iterdir()) == [], "refused before anything is written"


def test_names_are_at_most_249_characters(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.create("x" * 249).partitions == 1
    assert (tmp_path / f"{'x' * 249}-0").is_dir()
    with pytest.raises(InvalidTopicError, match="can't be longer than 249 characters"):
        store.create("y" * 250)


@pytest.mark.parametrize(
    ("name", "message"), [(".", 'cannot be "." or ".."'), ("..", 'cannot be "." or ".."'), ("", "empty")]
)
def test_dot_dotdot_and_empty_names_are_refused(tmp_path: Path, name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError, match=message):
        _store(tmp_path).create(name)


@pytest.mark.parametrize(("first", "second"), [("a.b", "a_b"), ("a_b", "a.b")])
def test_names_that_collide_in_kafkas_metrics_are_refused(tmp_path: Path, first: str, second: str) -> None:
    store = _store(tmp_path)
    store.create(first)
    with pytest.raises(InvalidTopicError, match=f"Topic '{second}' collides with existing topic: {first}"):
        store.create(second)
    assert store.names() == [first]


def test_a_topic_made_by_appends_collides_too(tmp_path: Path) -> None:
    LogDirectory(tmp_path).partition("x.y", 0).append_arrow(keyed_table(1))
    with pytest.raises(InvalidTopicError, match="collides with existing topic: x.y"):
        _store(tmp_path).create("x_y")


@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "/tmp/evil", ".."])
def test_no_name_makes_a_path_outside_the_log_directory(tmp_path: Path, name: str) -> None:
    logs = LogDirectory(tmp_path / "logs")
    with pytest.raises(InvalidTopicError):
        logs.partition(name, 0)
    with pytest.raises(InvalidTopicError):
        logs.topics.create(name)
    with pytest.raises(InvalidTopicError):
        logs.topics.config_provider(name)
    assert list(tmp_path.rglob("*")) == [], "refused before anything is written"
    assert not Path("/tmp/evil-0").exists()


def test_legal_names_with_dots_stay_inside(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for name in ("...", "a..b", "-x-"):
        store.create(name, 2)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "-x--0",
        "-x--1",
        "...-0",
        "...-1",
        "a..b-0",
        "a..b-1",
    ]


# -- create, partitions --------------------------------------------------------------------------------------------


def test_create_writes_the_metadata_then_the_partition_directories(tmp_path: Path) -> None:
    topic = _store(tmp_path).create("orders", 3, {"retention.ms": " 1000 "})
    assert (topic.name, topic.partitions, dict(topic.configs)) == ("orders", 3, {"retention.ms": "1000"})
    document = json.loads((tmp_path / TOPICS_FILE).read_text())
    assert document == {
        "version": 1,
        "topics": {"orders": {"topic_id": topic.topic_id, "partitions": 3, "configs": {"retention.ms": "1000"}}},
        "deleting": {},
    }
    for p in range(3):
        assert (
            checkpoints.read_partition_metadata(LOCAL, str(tmp_path / f"orders-{p}" / "partition.metadata"))
            == topic.topic_id
        )
    assert _store(tmp_path).get("orders") == topic


def test_the_default_partition_count_is_num_partitions(tmp_path: Path) -> None:
    assert _store(tmp_path).create("one").partitions == 1
    (tmp_path / "server.properties").write_text("num.partitions=4\n")
    assert _store(tmp_path).create("four").partitions == 4


@pytest.mark.parametrize("partitions", [0, -1, True, MAX_PARTITIONS + 1, 2**31, "3", 1.5])
def test_every_partition_count_out_of_range_gets_one_message_with_one_range(tmp_path: Path, partitions: int) -> None:
    """0 once said "1 to 2147483647" where 20000 said "1 to 10000": a user met two limits for one."""
    message = (
        f"partitions = {partitions!r} is invalid; accepted: an integer from 1 to {MAX_PARTITIONS} (each partition is "
        "a directory of the log directory, which commands visit one by one)"
    )
    store = _store(tmp_path)
    with pytest.raises(InvalidPartitionsError) as refused:
        store.create("t", partitions)
    assert str(refused.value) == message
    store.create("t", 1)
    with pytest.raises(InvalidPartitionsError) as refused:
        store.alter_partitions("t", partitions)
    assert str(refused.value) == message
    assert store.get("t").partitions == 1


@pytest.mark.parametrize("text", ["0", "-1", "20000", "x", "1.5", ""])
def test_a_partition_count_given_as_text_is_refused_with_the_same_range(text: str) -> None:
    with pytest.raises(
        InvalidPartitionsError, match=rf"^--partitions = .* accepted: an integer from 1 to {MAX_PARTITIONS} \("
    ):
        parse_topic_partitions(text, "--partitions")
    assert parse_topic_partitions(" 7 ", "--partitions") == 7


def test_a_topic_has_at_most_max_partitions(tmp_path: Path) -> None:
    """Each partition is a directory that commands visit: 2147483647 of them made ``topics --create`` run for
    days, and the entry it had written already stalled every later command."""
    validate_topic_partitions(MAX_PARTITIONS)
    store = _store(tmp_path)
    accepted = f"accepted: an integer from 1 to {MAX_PARTITIONS}"
    for count in (MAX_PARTITIONS + 1, 2**31 - 1):
        with pytest.raises(InvalidPartitionsError, match=f"partitions = {count} is invalid; {accepted}"):
            store.create("t", count)
    assert (store.names(), list(tmp_path.iterdir())) == ([], [])
    store.create("t", 2)
    with pytest.raises(InvalidPartitionsError, match=f"partitions = {2**31 - 1} is invalid; {accepted}"):
        store.alter_partitions("t", 2**31 - 1)
    assert store.get("t").partitions == 2


@pytest.mark.parametrize("count", ["0", "-1", "10001", "2147483647", "x"])
def test_num_partitions_out_of_range_is_refused_naming_it_with_the_topics_range(tmp_path: Path, count: str) -> None:
    (tmp_path / "server.properties").write_text(f"num.partitions={count}\n")
    with pytest.raises(InvalidConfigError) as refused:
        _store(tmp_path).create("t")
    assert str(refused.value) == (
        f"{tmp_path / 'server.properties'}: num.partitions = {count!r} is invalid; accepted: an integer from 1 to "
        f"{MAX_PARTITIONS}"
    )
    assert _store(tmp_path).names() == []


def test_appends_cannot_make_a_topic_of_more_than_max_partitions(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    with pytest.raises(InvalidPartitionsError, match=f"partition {2**31 - 2} of topic 'made' is invalid"):
        logs.partition("made", 2**31 - 2)
    logs.partition("made", MAX_PARTITIONS - 1).append_arrow(keyed_table(1))
    assert logs.topics.get("made").partitions == MAX_PARTITIONS


def test_an_entry_above_the_bound_names_the_way_out_and_can_be_deleted(tmp_path: Path) -> None:
    """As the entry an interrupted ``topics --create --partitions 2147483647`` left before the bound."""
    store = _store(tmp_path)
    store.create("huge", 1)
    metadata = json.loads((tmp_path / TOPICS_FILE).read_text())
    metadata["topics"]["huge"]["partitions"] = 2**31 - 1
    (tmp_path / TOPICS_FILE).write_text(json.dumps(metadata))
    with pytest.raises(InvalidPartitionsError, match="'pysparklog topics --delete --topic huge'"):
        store.get("huge")
    store.delete("huge")
    assert (store.names(), sorted(p.name for p in tmp_path.iterdir() if p.is_dir())) == ([], [])


def test_an_existing_topic_cannot_be_created_again_unless_if_not_exists(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = store.create("t", 2)
    with pytest.raises(TopicExistsError, match="Topic 't' already exists."):
        store.create("t", 2)
    assert store.create("t", 5, if_not_exists=True) == first


def test_a_topic_made_by_appends_exists(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.partition("t", 0).append_arrow(keyed_table(1))
    with pytest.raises(TopicExistsError):
        logs.topics.create("t")


def test_unknown_topics(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for operation in (
        lambda: store.get("nope"),
        lambda: store.alter_partitions("nope", 2),
        lambda: store.alter_configs("nope", {"retention.ms": "1"}),
        lambda: store.delete("nope"),
    ):
        with pytest.raises(UnknownTopicError, match="Topic 'nope' does not exist"):
            operation()


def test_partitions_are_only_ever_added(tmp_path: Path) -> None:
    store = _store(tmp_path)
    topic = store.create("t", 3)
    with pytest.raises(
        InvalidPartitionsError, match="currently has 3 partitions, which is higher than the requested 2"
    ):
        store.alter_partitions("t", 2)
    with pytest.raises(InvalidPartitionsError, match="already has 3 partitions"):
        store.alter_partitions("t", 3)
    assert store.alter_partitions("t", 5).partitions == 5
    assert checkpoints.read_partition_metadata(LOCAL, str(tmp_path / "t-4" / "partition.metadata")) == topic.topic_id


def test_a_partition_the_topic_does_not_have_cannot_be_opened(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 2)
    with pytest.raises(UnknownTopicError, match="Partition 2 of topic 't' does not exist: the topic has 2 partitions"):
        logs.partition("t", 2)


def test_a_partition_directory_a_crash_left_missing_is_made_with_the_topic_id(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    topic = logs.topics.create("t", 2)
    for child in (tmp_path / "t-1").iterdir():
        child.unlink()
    (tmp_path / "t-1").rmdir()
    log = logs.partition("t", 1)
    log.append_arrow(keyed_table(3))
    assert log.topic_id == topic.topic_id


# -- topics made by appends ----------------------------------------------------------------------------------------


def test_topics_made_by_appends_are_listed_and_adopted_with_their_id(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.partition("implicit", 0).append_arrow(keyed_table(1))
    logs.partition("implicit", 2).append_arrow(keyed_table(1))
    topic_id = logs.partition("implicit", 0).topic_id
    assert topic_id is not None
    logs.topics.create("declared", 1)
    assert logs.topics.names() == ["declared", "implicit"]
    implicit = logs.topics.get("implicit")
    assert (implicit.topic_id, implicit.partitions, dict(implicit.configs)) == (topic_id, 3, {})
    adopted = logs.topics.alter_configs("implicit", {"retention.ms": "5"})
    assert (adopted.topic_id, adopted.partitions) == (topic_id, 3)
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]["implicit"]["topic_id"] == topic_id
    assert checkpoints.read_partition_metadata(LOCAL, str(tmp_path / "implicit-1" / "partition.metadata")) == topic_id
    assert logs.topics.alter_partitions("implicit", 4).topic_id == topic_id


def test_a_kraft_metadata_log_is_read_by_name_but_no_topic(tmp_path: Path) -> None:
    """A broker's log directory holds ``__cluster_metadata-0``: no broker lists it as a topic, and Kafka refuses to
    create one of that name."""
    logs = LogDirectory(tmp_path)
    logs.partition("__cluster_metadata", 0).append_arrow(keyed_table(3))
    logs.partition("__consumer_offsets", 0).append_arrow(keyed_table(1))
    assert logs.topics.names() == ["__consumer_offsets"]
    assert logs.topics.get("__cluster_metadata").partitions == 1
    with pytest.raises(InvalidTopicError, match="Creation of internal topic __cluster_metadata is prohibited."):
        _store(tmp_path / "new").create("__cluster_metadata")


def test_directories_without_partition_metadata_get_an_id_when_adopted(tmp_path: Path) -> None:
    (tmp_path / "bare-0").mkdir()
    store = _store(tmp_path)
    assert store.get("bare").topic_id == ZERO_TOPIC_ID
    topic = store.alter_partitions("bare", 2)
    assert topic.topic_id != ZERO_TOPIC_ID
    assert checkpoints.read_partition_metadata(LOCAL, str(tmp_path / "bare-0" / "partition.metadata")) == topic.topic_id


# -- configs -------------------------------------------------------------------------------------------------------


def test_append_and_subtract_change_a_list_config_from_its_value_in_force(tmp_path: Path) -> None:
    """Kafka's IncrementalAlterConfigs APPEND and SUBTRACT: from the default (delete) when the topic sets none."""
    store = _store(tmp_path)
    store.create("t", 1)
    assert store.alter_configs("t", {}, append={"cleanup.policy": ["compact", "delete"]}).configs == {
        "cleanup.policy": "delete,compact"
    }
    assert store.alter_configs("t", {}, subtract={"cleanup.policy": ["delete"]}).configs == {
        "cleanup.policy": "compact"
    }
    with pytest.raises(InvalidConfigError, match="append is not allowed for config key: retention.ms; accepted: the"):
        store.alter_configs("t", {}, append={"retention.ms": ["1"]})
    with pytest.raises(InvalidConfigError, match="both set or deleted and appended to or subtracted from"):
        store.alter_configs("t", {"cleanup.policy": "delete"}, subtract={"cleanup.policy": ["compact"]})


def test_validate_only_checks_a_change_and_makes_none(tmp_path: Path) -> None:
    store = _store(tmp_path)
    would_be = store.create("t", 2, {"retention.ms": "1000"}, validate_only=True)
    assert (would_be.name, would_be.partitions, dict(would_be.configs)) == ("t", 2, {"retention.ms": "1000"})
    assert store.names() == [] and not (tmp_path / "t-0").exists()
    store.create("t", 2)
    with pytest.raises(TopicExistsError):
        store.create("t", 2, validate_only=True)
    assert store.alter_partitions("t", 5, validate_only=True).partitions == 5
    assert store.alter_configs("t", {"retention.ms": "5"}, validate_only=True).configs == {"retention.ms": "5"}
    with pytest.raises(InvalidPartitionsError, match="Topic already has 2 partitions"):
        store.alter_partitions("t", 2, validate_only=True)
    assert store.get("t").partitions == 2 and store.get("t").configs == {} and not (tmp_path / "t-2").exists()


def test_alter_configs_sets_and_deletes_in_one_change(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("t", 1, {"retention.ms": "1000", "segment.ms": "5"})
    topic = store.alter_configs("t", {"cleanup.policy": "compact,delete"}, ["retention.ms", "flush.ms"])
    assert dict(topic.configs) == {"segment.ms": "5", "cleanup.policy": "compact,delete"}
    with pytest.raises(InvalidConfigError, match="both added and deleted: segment.ms"):
        store.alter_configs("t", {"segment.ms": "6"}, ["segment.ms"])
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: nope; accepted: cleanup.policy"):
        store.alter_configs("t", {}, ["nope"])
    with pytest.raises(InvalidConfigError, match=r"min.compaction.lag.ms \(10\) is above max.compaction.lag.ms \(5\)"):
        store.alter_configs("t", {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(InvalidConfigError, match="segment.bytes = '100' is invalid"):
        store.create("u", 1, {"segment.bytes": "100"})
    assert store.names() == ["t"], "a refused create writes nothing"
    assert dict(store.get("t").configs) == {"segment.ms": "5", "cleanup.policy": "compact,delete"}


def test_partition_configs_follow_topic_then_server_properties_then_the_directory_default(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path, LogConfig(segment_bytes=5000, retention_ms=11))
    logs.topics.create("t", 1)
    log = logs.partition("t", 0)
    assert (log.config.segment_bytes, log.config.retention_ms) == (5000, 11)
    (tmp_path / "server.properties").write_text("log.retention.hours=1\nlog.segment.bytes=2097152\n")
    assert (log.config.segment_bytes, log.config.retention_ms) == (2_097_152, 3_600_000)
    (tmp_path / "server.properties").write_text("log.retention.hours=1\nlog.retention.minutes=2\n")
    assert (log.config.segment_bytes, log.config.retention_ms) == (5000, 120_000)
    logs.topics.alter_configs("t", {"retention.ms": "7"})
    assert log.config.retention_ms == 7
    assert LogDirectory(tmp_path).partition("t", 0, LogConfig(retention_ms=3)).config.retention_ms == 3, "fixed"


def test_a_provider_reads_nothing_while_the_files_do_not_change(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("t", 1, {"retention.ms": "1000"})
    (tmp_path / "server.properties").write_text("log.segment.bytes=2097152\n")
    provider = store.config_provider("t")
    _age(tmp_path / TOPICS_FILE)
    _age(tmp_path / "server.properties")
    first = provider()
    assert provider() is first, "cached by the files' inode, size and mtime"
    store.alter_configs("t", {"retention.ms": "2000"})
    assert provider().retention_ms == 2000


def test_a_provider_rereads_a_file_changed_within_the_same_timestamp_tick(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("t", 1, {"retention.ms": "1000"})
    provider = store.config_provider("t")
    assert provider().retention_ms == 1000
    # Same inode, size and mtime as when the provider read it: only the file's youth says it may have changed.
    path = tmp_path / TOPICS_FILE
    before = os.stat(path)
    with open(path, "r+b") as f:
        data = f.read().replace(b'"1000"', b'"2000"')
        f.seek(0)
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert provider().retention_ms == 2000


def test_changes_reach_a_log_open_in_another_process(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 1, {"max.message.bytes": "1000"})
    child = _python(
        """
        import sys
        from pysparklog import LogDirectory
        log = LogDirectory(sys.argv[1]).partition("t", 0)
        print(log.config.max_message_bytes, flush=True)
        sys.stdin.readline()
        print(log.config.max_message_bytes, flush=True)
        """,
        str(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline() == "1000\n"
    logs.topics.alter_configs("t", {"max.message.bytes": "5000"})
    # typeshed types both as str, but stderr is None: it is not piped
    output: tuple[str | None, str | None] = child.communicate("go\n", timeout=60)
    assert output == ("5000\n", None)
    assert child.returncode == 0


def test_changes_made_in_another_process_reach_a_log_open_here(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 1)
    log = logs.partition("t", 0)
    assert log.config.cleanup_policy == frozenset({"delete"})
    child = _python(
        """
        import sys
        from pysparklog import LogDirectory
        LogDirectory(sys.argv[1]).topics.alter_configs("t", {"cleanup.policy": "compact"})
        """,
        str(tmp_path),
    )
    assert child.wait(60) == 0
    assert log.config.cleanup_policy == frozenset({"compact"})


def test_a_log_open_on_a_deleted_topic_cannot_bring_it_back(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 1)
    log = logs.partition("t", 0)
    log.append_arrow(keyed_table(2))
    logs.topics.delete("t")
    with pytest.raises(UnknownTopicError, match="Topic 't' was deleted while open"):
        log.append_arrow(keyed_table(1))
    assert logs.topics.names() == []
    logs.topics.create("t", 1)
    with pytest.raises(UnknownTopicError, match=r"was deleted and created again \(or given another id\) while open"):
        log.append_arrow(keyed_table(1))


# -- delete --------------------------------------------------------------------------------------------------------


def test_delete_removes_the_topic_its_directories_and_its_checkpoint_entries(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 2)
    logs.topics.create("kept", 1)
    for p in range(2):
        log = logs.partition("t", p)
        log.append_arrow(keyed_table(10))
        log.flush()
        log.raise_log_start_offset(4)
    logs.partition("kept", 0).append_arrow(keyed_table(1))
    logs.partition("kept", 0).flush()
    logs.topics.delete("t")
    assert logs.topics.names() == ["kept"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept-0"]
    for name in (checkpoints.RECOVERY_POINT_CHECKPOINT, checkpoints.LOG_START_OFFSET_CHECKPOINT):
        assert all(topic == "kept" for topic, _ in checkpoints.read_offset_checkpoint(LOCAL, str(tmp_path / name)))
    logs.topics.create("t", 1)
    log = logs.partition("t", 0)
    assert log.append_arrow(keyed_table(1)).first_offset == 0
    assert log.log_start_offset == 0, "the old topic's log start offset is gone with it"


def test_a_deletion_interrupted_before_the_renames_is_finished_by_the_next_listing(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    topic = logs.topics.create("t", 2)
    document = json.loads((tmp_path / TOPICS_FILE).read_text())
    del document["topics"]["t"]
    document["deleting"] = {"t": topic.topic_id}  # the commit point was written, then the process died
    (tmp_path / TOPICS_FILE).write_text(json.dumps(document))
    with pytest.raises(UnknownTopicError):
        logs.topics.get("t")
    assert logs.topics.names() == []
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["deleting"] == {}


def test_delete_directories_a_crash_left_are_removed_by_the_next_listing(tmp_path: Path) -> None:
    leftover = tmp_path / f"t-0.{'ab' * 16}-delete"
    (leftover / "deep").mkdir(parents=True)
    (leftover / "deep" / "00000000000000000000.log").write_bytes(b"x")
    logs = LogDirectory(tmp_path)
    assert logs.topic_partitions() == []
    assert logs.topics.names() == []
    assert not leftover.exists()


def test_delete_renames_as_kafka_does_and_fits_long_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path)
    name = "n" * 249
    store.create(name, 1)
    renamed: list[str] = []
    assert isinstance(store.storage, PosixStorage)
    real_rename = store.storage.rename

    def rename(src: str, dst: str) -> None:
        renamed.append(os.path.basename(dst))
        real_rename(src, dst)

    monkeypatch.setattr(store.storage, "rename", rename)
    store.delete(name)
    assert len(renamed) == 1 and len(renamed[0]) == 255
    assert re.fullmatch(r"n{213}-0\.[0-9a-f]{32}-delete", renamed[0])
    assert store.names() == [] and list(tmp_path.iterdir()) != []


def test_a_store_on_a_storage_shares_the_topics_of_its_location(tmp_path: Path) -> None:
    storage = PosixStorage(tmp_path)
    store = TopicStore(storage)
    assert store.storage is storage and store.log_dir == str(tmp_path)
    created = store.create("t", 2, {"retention.ms": "1000"})
    assert TopicStore(tmp_path).get("t") == created
    metadata_path = tmp_path / "t-1" / checkpoints.PARTITION_METADATA
    assert checkpoints.read_partition_metadata(LOCAL, str(metadata_path)) == created.topic_id
    assert store.config_provider("t")().retention_ms == 1000


def test_delete_reports_progress(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("t", 4)
    seen: list[tuple[int, int]] = []
    store.delete("t", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


# -- topic ids -----------------------------------------------------------------------------------------------------

#: One id in Kafka's form (kafka-topics.sh --describe's "TopicId:") and in the canonical UUID form.
KAFKA_ID = "fFqDVmuKQi-6-agtLR19vw"
CANONICAL_ID = "7c5a8356-6b8a-422f-baf9-a82d2d1d7dbf"


def _ids_on_disk(tmp_path: Path, topic: str, partitions: int) -> list[str | None]:
    return [
        checkpoints.read_partition_metadata(LOCAL, str(tmp_path / f"{topic}-{p}" / checkpoints.PARTITION_METADATA))
        for p in range(partitions)
    ]


@pytest.mark.parametrize("given", [KAFKA_ID, CANONICAL_ID, CANONICAL_ID.upper()])
def test_an_id_is_taken_in_kafkas_form_or_the_canonical_uuid_form(given: str) -> None:
    assert parse_topic_id(given) == KAFKA_ID


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("", "is malformed; accepted: Kafka's form, 22 base64url characters"),
        ("fFqDVmuKQi-6-agtLR19v", "is malformed"),  # 21 characters
        ("fFqDVmuKQi-6-agtLR19vw==", "is malformed"),
        ("fFqDVmuKQi+6/agtLR19vw", "is malformed"),  # base64, not base64url
        (" fFqDVmuKQi-6-agtLR19vw", "is malformed"),
        ("fFqDVmuKQi-6-agtLR19vx", "its last character holds bits past the id's 16 bytes"),
        ("7c5a83566b8a422fbaf9a82d2d1d7dbf", "is malformed"),
        ("7c5a8356-6b8a-422f-baf9-a82d2d1d7dbg", "is malformed"),
        ("AAAAAAAAAAAAAAAAAAAAAA", "is reserved by Kafka (Kafka's zero id"),
        ("00000000-0000-0000-0000-000000000001", "is reserved by Kafka (the id of Kafka's metadata log"),
    ],
)
def test_malformed_and_reserved_ids_are_refused_naming_the_accepted_forms(
    tmp_path: Path, given: str, message: str
) -> None:
    logs = LogDirectory(tmp_path)
    created = logs.topics.create("t", 2)
    with pytest.raises(InvalidTopicIdError, match=re.escape(message)):
        logs.set_topic_id("t", given)
    assert logs.topics.get("t") == created
    assert _ids_on_disk(tmp_path, "t", 2) == [created.topic_id] * 2


def test_setting_an_id_rewrites_the_metadata_and_every_partition_and_keeps_the_records(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 3, {"retention.ms": "60000"})
    logs.partition("t", 1).append_arrow(keyed_table(5))
    shutil.rmtree(tmp_path / "t-2")  # a crash in create left it missing
    seen: list[tuple[int, int]] = []
    topic = logs.set_topic_id("t", CANONICAL_ID, progress=lambda done, total: seen.append((done, total)))
    assert (topic.topic_id, topic.partitions, dict(topic.configs)) == (KAFKA_ID, 3, {"retention.ms": "60000"})
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert LogDirectory(tmp_path).topics.get("t") == topic
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]["t"]["topic_id"] == KAFKA_ID
    assert _ids_on_disk(tmp_path, "t", 3) == [KAFKA_ID] * 3
    assert (
        tmp_path / "t-1" / checkpoints.PARTITION_METADATA
    ).read_bytes() == b"version: 0\ntopic_id: " + KAFKA_ID.encode()
    log = logs.partition("t", 1)
    assert log.topic_id == KAFKA_ID
    assert read_all(log).column("key").to_pylist() == keyed_table(5).column("key").to_pylist()
    assert logs.topics.topic_with_id(CANONICAL_ID) == topic


def test_setting_the_id_again_rewrites_partitions_left_with_another(tmp_path: Path) -> None:
    """A crash after the metadata took the id leaves partitions with the old one (or a torn file): run again."""
    logs = LogDirectory(tmp_path)
    old = logs.topics.create("t", 3)
    logs.set_topic_id("t", KAFKA_ID)
    checkpoints.write_partition_metadata(LOCAL, str(tmp_path / "t-0" / checkpoints.PARTITION_METADATA), old.topic_id)
    (tmp_path / "t-2" / checkpoints.PARTITION_METADATA).write_bytes(b"version: 0\ntop")
    with pytest.raises(CorruptRecordError):
        logs.topics.alter_partitions("t", 4)  # no other change takes a torn file for an id
    assert logs.set_topic_id("t", KAFKA_ID).topic_id == KAFKA_ID
    assert _ids_on_disk(tmp_path, "t", 3) == [KAFKA_ID] * 3


def test_a_topic_made_by_appends_is_adopted_with_the_id(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.partition("implicit", 0).append_arrow(keyed_table(1))
    logs.partition("implicit", 1).append_arrow(keyed_table(1))
    topic = logs.set_topic_id("implicit", KAFKA_ID)
    assert (topic.topic_id, topic.partitions) == (KAFKA_ID, 2)
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]["implicit"]["topic_id"] == KAFKA_ID
    assert _ids_on_disk(tmp_path, "implicit", 2) == [KAFKA_ID] * 2


def test_another_topics_id_is_refused(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    declared = logs.topics.create("declared", 1)
    logs.partition("implicit", 0).append_arrow(keyed_table(1))
    implicit_id = logs.topics.get("implicit").topic_id
    target = logs.topics.create("t", 2)
    for other, other_id in (("declared", declared.topic_id), ("implicit", implicit_id)):
        with pytest.raises(
            InvalidTopicIdError,
            match=re.escape(f"is the id of topic '{other}' in {tmp_path}; accepted: an id no other"),
        ):
            logs.set_topic_id("t", other_id)
    assert logs.topics.get("t") == target
    assert _ids_on_disk(tmp_path, "t", 2) == [target.topic_id] * 2
    assert logs.set_topic_id("t", target.topic_id) == target  # its own id is no other topic's


def test_an_unknown_topic_or_id_is_refused(tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    with pytest.raises(UnknownTopicError, match="Topic 'nope' does not exist"):
        logs.set_topic_id("nope", KAFKA_ID)
    with pytest.raises(UnknownTopicError, match=f"Topic id {KAFKA_ID} does not exist"):
        logs.topics.topic_with_id(CANONICAL_ID)
    assert not (tmp_path / "nope-0").exists()


def test_the_id_is_refused_while_a_transaction_is_open_on_a_partition(tmp_path: Path) -> None:
    """Moved into a broker, the transaction's records would have no coordinator to end them."""
    logs = LogDirectory(tmp_path)
    created = logs.topics.create("t", 2)
    log = logs.partition("t", 1)
    log.append_arrow(keyed_table(2))
    producers = Producers()
    log.append(producers.data(7, 3))
    with pytest.raises(
        TransactionInProgressError, match="a transaction is open on partition 1 of topic 't' from offset 2"
    ):
        logs.set_topic_id("t", KAFKA_ID)
    assert logs.topics.get("t") == created
    assert _ids_on_disk(tmp_path, "t", 2) == [created.topic_id] * 2
    log.append(producers.marker(7, ControlRecordType.ABORT))
    assert logs.set_topic_id("t", KAFKA_ID).topic_id == KAFKA_ID


def test_a_writer_open_while_the_id_is_set_fails_at_its_next_append(tmp_path: Path) -> None:
    """Its partitions are on their way to a broker: a record appended now would not go with them."""
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 1)
    log = logs.partition("t", 0)
    log.append_arrow(keyed_table(2))
    logs.set_topic_id("t", KAFKA_ID)
    with pytest.raises(UnknownTopicError, match=r"created again \(or given another id\) while open"):
        log.append_arrow(keyed_table(1))
    assert logs.partition("t", 0).log_end_offset == 2


# -- several processes ---------------------------------------------------------------------------------------------

_WORKER = """
import sys
from pysparklog import LogDirectory
store = LogDirectory(sys.argv[1]).topics
worker, key = sys.argv[2], sys.argv[3]
for i in range(5):
    store.create(f"w{worker}-{i}", 2)
    store.alter_configs("shared", {key: str(1000 + i)})
"""


def test_processes_creating_topics_and_altering_configs_at_once_lose_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("shared", 1)
    keys = ["retention.ms", "segment.ms", "flush.ms", "delete.retention.ms"]
    workers = [_python(_WORKER, str(tmp_path), str(w), key) for w, key in enumerate(keys)]
    assert [w.wait(120) for w in workers] == [0] * len(keys)
    assert store.names() == sorted(["shared"] + [f"w{w}-{i}" for w in range(len(keys)) for i in range(5)])
    assert dict(store.get("shared").configs) == dict.fromkeys(keys, "1004")
    assert len({store.get(name).topic_id for name in store.names()}) == len(store.names())


_ALTER_LOOP = """
import sys
from pysparklog import LogDirectory
store = LogDirectory(sys.argv[1]).topics
print("ready", flush=True)
i = 0
while True:
    store.alter_configs("t", {"retention.ms": "1000" if i % 2 else "2000000"})
    i += 1
"""


def test_a_process_killed_while_altering_leaves_the_old_or_the_new_metadata(tmp_path: Path) -> None:
    store = _store(tmp_path)
    topic = store.create("t", 1, {"retention.ms": "1000"})
    for delay in (0.05, 0.13, 0.21):
        child = _python(_ALTER_LOOP, str(tmp_path), stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        json.loads((tmp_path / TOPICS_FILE).read_text())
        after = store.get("t")
        assert after.topic_id == topic.topic_id
        assert dict(after.configs) in ({"retention.ms": "1000"}, {"retention.ms": "2000000"})
    store.alter_configs("t", {"segment.ms": "1"})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", TOPICS_FILE, "t-0"], "no temporary file is left"
