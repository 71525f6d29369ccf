"""``pysparklog configs --entity-type topics``: kafka-configs.sh's describe and alter, in new processes as people run
them, and the change reaching a log already open."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pysparklog import LogDirectory
from pysparklog.cli.main import main
from pysparklog.storage.topic_config import TOPIC_CONFIGS
from tests.cli.test_dump_log import run_cli

ACCEPTED = ", ".join(TOPIC_CONFIGS)


@pytest.fixture(autouse=True)
def _no_log_dir_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARKLOG_LOG_DIR", raising=False)


@pytest.fixture
def logs(tmp_path: Path) -> LogDirectory:
    logs = LogDirectory(tmp_path)
    logs.topics.create("orders", 2, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    (tmp_path / "server.properties").write_text("log.retention.hours=1\nlog.segment.bytes=2097152\n")
    return logs


def configs(logs: LogDirectory, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("configs", "--log-dir", logs.path, *args)


def test_describe_prints_kafkas_lines_with_every_layer(logs: LogDirectory) -> None:
    described = configs(logs, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout == (
        "Dynamic configs for topic orders are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "STATIC_BROKER_CONFIG:log.retention.hours=1, DEFAULT_CONFIG:log.retention.hours=168}\n"
    )


def test_describe_all_lists_every_config_with_its_source(
    logs: LogDirectory, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["configs", "--log-dir", logs.path, "--topic", "orders", "--describe", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "All configs for topic orders are:"
    assert [line.split("=", 1)[0].strip() for line in lines[1:]] == list(TOPIC_CONFIGS)
    assert (
        "  segment.bytes=2097152 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.segment.bytes=2097152, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}" in lines
    )
    assert "  segment.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:log.roll.hours=168}" in lines


def test_describe_without_a_name_describes_every_topic(logs: LogDirectory, capsys: pytest.CaptureFixture[str]) -> None:
    logs.topics.create("plain")
    assert main(["configs", "--log-dir", logs.path, "--entity-type", "topics", "--describe"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("  ")]
    assert headers == ["Dynamic configs for topic orders are:", "Dynamic configs for topic plain are:"]


def test_alter_adds_and_deletes_and_an_open_log_follows(logs: LogDirectory) -> None:
    log = logs.partition("orders", 1)
    assert (log.config.retention_ms, log.config.max_message_bytes) == (1000, 1_048_588)
    altered = configs(
        logs,
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--alter",
        "--add-config",
        "max.message.bytes=5000, cleanup.policy=[compact]",
        "--delete-config",
        "retention.ms",
    )
    assert (altered.returncode, altered.stdout, altered.stderr) == (
        0,
        "Completed updating config for topic orders.\n",
        "",
    )
    assert dict(logs.topics.get("orders").configs) == {"max.message.bytes": "5000", "cleanup.policy": "compact"}
    assert log.config.max_message_bytes == 5000
    assert log.config.retention_ms == 3_600_000, "back to server.properties' log.retention.hours"
    assert log.config.cleanup_policy == frozenset({"compact"})


def test_alter_from_a_properties_file(logs: LogDirectory, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "add.properties").write_text("# configs\nsegment.ms = 60000\nflush.messages: 10\n")
    args = ["configs", "--log-dir", logs.path, "--topic", "orders", "--alter", "--add-config-file"]
    assert main([*args, str(tmp_path / "add.properties")]) == 0
    assert capsys.readouterr().out == "Completed updating config for topic orders.\n"
    configs_ = dict(logs.topics.get("orders").configs)
    assert (configs_["segment.ms"], configs_["flush.messages"]) == ("60000", "10")


def test_a_refused_alteration_is_one_line_on_stderr(logs: LogDirectory) -> None:
    refused = configs(logs, "--topic", "orders", "--alter", "--add-config", "retention.hours=2")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert (
        refused.stderr
        == f"pysparklog configs: error: Unknown topic config name: retention.hours; accepted: {ACCEPTED}\n"
    )


ERRORS = [
    (
        ("--alter", "--add-config", "segment.bytes=100"),
        "segment.bytes = '100' is invalid; accepted: an integer from 1048576",
    ),
    (("--alter", "--add-config", "cleanup.policy=compact,delete"), "invalid config 'delete': configs to add must be"),
    (
        ("--alter", "--delete-config", "segment.ms,retention.ms"),
        "Invalid config(s): segment.ms (not set on topic orders)",
    ),
    (("--alter", "--delete-config", "nope"), f"Unknown topic config name: nope; accepted: {ACCEPTED}"),
    (
        ("--alter", "--add-config", "min.compaction.lag.ms=9,max.compaction.lag.ms=8"),
        "min.compaction.lag.ms (9) is above",
    ),
    (("--alter",), "At least one of --add-config, --add-config-file, or --delete-config must be specified"),
    (("--alter", "--all", "--add-config", "flush.ms=1"), "--all is only valid with --describe"),
    (("--describe", "--delete-config", "retention.ms"), "--add-config, --add-config-file and --delete-config are only"),
]


@pytest.mark.parametrize(("args", "error"), ERRORS)
def test_refusals_change_nothing(
    logs: LogDirectory, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], error: str
) -> None:
    before = dict(logs.topics.get("orders").configs)
    assert main(["configs", "--log-dir", logs.path, "--entity-type", "topics", "--entity-name", "orders", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pysparklog configs: error: {error}") and err.count("\n") == 1
    assert dict(logs.topics.get("orders").configs) == before


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--entity-name", "orders", "--describe"), "At least one entity type must be specified"),
        (("--entity-type", "topics", "--alter", "--add-config", "flush.ms=1"), "An entity name must be specified"),
        (("--topic", "orders", "--entity-type", "topics", "--describe"), "--entity-{type,name} should not be used"),
        (("--entity-type", "topics", "--entity-name", "nope", "--describe"), "Topic 'nope' does not exist"),
    ],
)
def test_entity_errors(
    logs: LogDirectory, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], error: str
) -> None:
    assert main(["configs", "--log-dir", logs.path, *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pysparklog configs: error: {error}") and err.count("\n") == 1


def test_only_topics_are_an_entity_type(logs: LogDirectory) -> None:
    brokers = configs(logs, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert brokers.returncode == 2 and brokers.stderr.count("\n") == 1 and "invalid choice: 'brokers'" in brokers.stderr
