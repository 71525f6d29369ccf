"""How every ``pysparklog`` command ends when something goes wrong: one line on stderr and a non-zero status,
never a traceback, whatever the error (``pysparklog.cli.main``)."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pysparklog import LogDirectory, OffsetStore
from pysparklog.cli import main as cli_main
from pysparklog.cli.main import COMMANDS, DEBUG_ENV, build_parser, main
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from tests.cli.test_dump_log import CLI
from tests.conftest import keyed_table

SEGMENT = "00000000000000000000"
NOT_UTF8 = b"\xff\xfe\n"
UNEXPECTED = f" (an unexpected error: {DEBUG_ENV}=1 shows where it happened)"

# Each subcommand with arguments that reach damaged files (checkpoints and partition metadata that are not
# text) or that are odd themselves (an id that is not UTF-8), in a log directory taken from the environment.
DAMAGED_RUNS: dict[str, list[str | bytes]] = {
    "dump-log": ["dump-log", "--files", f"{{log_dir}}/t-0/{SEGMENT}.log", "--deep-iteration", "--print-data-log"],
    "delete-records": ["delete-records", "--offset-json-file", "{log_dir}/../offsets.json"],
    "get-offsets": ["get-offsets", "--time", "-2"],
    "topics": ["topics", "--delete", "--topic", "t"],
    "configs": ["configs", "--alter", "--topic", "t", "--add-config", "retention.ms=1000"],
    "console-producer": ["console-producer", "--topic", "t"],
    "console-consumer": [
        "console-consumer",
        "--topic",
        "t",
        "--group",
        "g2",
        "--from-beginning",
        "--timeout-ms",
        "200",
    ],
    "log-cleaner": ["log-cleaner", "--once"],
    "consumer-groups": ["consumer-groups", "--describe", "--group", b"\xff"],
    "transactions": ["transactions", "describe", "--transactional-id", b"\xff"],
    # The endpoint reads the directory per request (tests/endpoint has its damage); here it cannot listen.
    "serve": ["serve", "--listen", "192.0.2.1:0"],
}


def subcommand_names() -> set[str]:
    parser = cli_main.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(subparsers.choices)


def test_every_subcommand_is_run_against_damage() -> None:
    assert set(DAMAGED_RUNS) == subcommand_names()


@pytest.fixture(scope="module")
def healthy_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic ``t`` (2 partitions, 5 records each) and group ``g`` with committed offsets."""
    path = tmp_path_factory.mktemp("healthy") / "logs"
    logs = LogDirectory(path)
    logs.topics.create("t", 2)
    for partition in (0, 1):
        with logs.partition("t", partition) as log:
            log.append_arrow(keyed_table(5))
    with OffsetStore(logs) as store:
        store.commit("g", {TopicPartition("t", 0): OffsetAndMetadata(2)})
    return path


@pytest.fixture
def damaged_log_dir(healthy_log_dir: Path, tmp_path: Path) -> Path:
    """A copy of ``healthy_log_dir`` whose checkpoint files and one ``partition.metadata`` are not text."""
    path = tmp_path / "logs"
    shutil.copytree(healthy_log_dir, path)
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        (path / name).write_bytes(NOT_UTF8)
    (path / "t-0" / "partition.metadata").write_bytes(NOT_UTF8)
    (tmp_path / "offsets.json").write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 1}]}))
    return path


@pytest.mark.parametrize("command", sorted(DAMAGED_RUNS))
def test_no_command_prints_a_traceback_on_damage(command: str, damaged_log_dir: Path) -> None:
    args = [
        arg.replace("{log_dir}", str(damaged_log_dir)) if isinstance(arg, str) else arg for arg in DAMAGED_RUNS[command]
    ]
    env = {**os.environ, "PYSPARKLOG_LOG_DIR": str(damaged_log_dir)}
    env.pop(DEBUG_ENV, None)
    proc = subprocess.run([*CLI, *args], input=b"a\nb\n", capture_output=True, timeout=300, check=False, env=env)
    stderr = proc.stderr.decode(errors="replace")
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    if proc.returncode != 0:
        assert proc.returncode == 1, stderr
        assert stderr.endswith("\n") and stderr.splitlines()[-1].startswith(f"pysparklog {command}: error: "), stderr


# -- the mechanism, in process ------------------------------------------------------------------------------------

# Arguments each subcommand parses without error (the run itself is replaced in these tests).
PARSED_RUNS: dict[str, list[str]] = {
    "dump-log": ["dump-log", "--files", f"{SEGMENT}.log"],
    "delete-records": ["delete-records", "--offset-json-file", "offsets.json"],
    "get-offsets": ["get-offsets"],
    "topics": ["topics", "--list"],
    "configs": ["configs", "--describe"],
    "console-producer": ["console-producer", "--topic", "t"],
    "console-consumer": ["console-consumer", "--topic", "t"],
    "log-cleaner": ["log-cleaner", "--once"],
    "consumer-groups": ["consumer-groups", "--list"],
    "transactions": ["transactions", "list"],
    "serve": ["serve"],
}


def run_raising(monkeypatch: pytest.MonkeyPatch, command: str, raise_it: Callable[[argparse.Namespace], int]) -> int:
    """``main`` on ``PARSED_RUNS[command]``, the subcommand's ``run`` replaced by ``raise_it``."""
    monkeypatch.setenv("PYSPARKLOG_LOG_DIR", "logs")
    module = next(m for m in COMMANDS if m.replace("_", "-") == command)
    monkeypatch.setattr(f"pysparklog.cli.{module}.run", raise_it)
    return main(PARSED_RUNS[command])


def test_every_subcommand_is_run_with_an_error() -> None:
    assert set(PARSED_RUNS) == subcommand_names()


def fail_with(error: BaseException) -> Callable[[argparse.Namespace], int]:
    def run(_args: argparse.Namespace) -> int:
        raise error

    return run


@pytest.mark.parametrize("command", sorted(PARSED_RUNS))
def test_an_unexpected_error_is_one_line_naming_its_type_and_message(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    status = run_raising(monkeypatch, command, fail_with(ValueError("not what\nwas expected")))
    assert (status, capsys.readouterr().err) == (
        1,
        f"pysparklog {command}: error: ValueError: not what was expected{UNEXPECTED}\n",
    )


def test_an_unexpected_error_without_a_message_is_named_by_its_type(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert run_raising(monkeypatch, "topics", fail_with(AssertionError())) == 1
    assert capsys.readouterr().err == f"pysparklog topics: error: AssertionError{UNEXPECTED}\n"


def test_the_debug_variable_adds_the_traceback_before_the_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert run_raising(monkeypatch, "get-offsets", fail_with(KeyError("x"))) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("\nKeyError: 'x'\npysparklog get-offsets: error: KeyError: 'x'\n")


def test_ctrl_c_ends_a_command_with_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert run_raising(monkeypatch, "topics", fail_with(KeyboardInterrupt())) == 130
    assert capsys.readouterr().err == "pysparklog topics: interrupted\n"


def test_ctrl_c_while_the_subcommands_load_ends_the_command_with_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(_name: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("pysparklog.cli.main.importlib.import_module", interrupted)
    assert main(["topics", "--list"]) == 130
    assert capsys.readouterr().err == "pysparklog: interrupted\n"


def test_the_command_module_loads_without_the_engine() -> None:
    """So that the rules above are in force before anything slow (the engine's modules) is imported."""
    heavy = ["numpy", "pyarrow", "numba", "pysparklog.storage", "pysparklog.consumer", "pysparklog.cli.topics"]
    probe = f"import sys, pysparklog.cli.main; print([m for m in {heavy!r} if m in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout == "[]\n"


def test_a_reader_that_went_away_ends_the_command_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_raising(monkeypatch, "topics", fail_with(BrokenPipeError(32, "Broken pipe"))) == 1
    assert capsys.readouterr().err == ""


def test_an_error_ending_a_background_thread_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    previous = threading.excepthook

    def run(_args: argparse.Namespace) -> int:
        thread = threading.Thread(target=fail_with(RuntimeError("lost")), args=(None,), name="sender")
        thread.start()
        thread.join()
        return 0

    assert run_raising(monkeypatch, "console-producer", run) == 0
    assert capsys.readouterr().err == f"pysparklog console-producer: error: in sender: RuntimeError: lost{UNEXPECTED}\n"
    assert threading.excepthook is previous


# -- a closed stdout ------------------------------------------------------------------------------------------------


def run_into_closed_pipe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``pysparklog <args>`` with a stdout whose reader is gone, as ``| head`` leaves it."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*CLI, *args], stdout=write_end, stderr=subprocess.PIPE, timeout=300, check=False, env=env
        )
    finally:
        os.close(write_end)


def test_the_console_consumer_into_a_closed_pipe_stops_as_kafkas_does(healthy_log_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "logs"
    shutil.copytree(healthy_log_dir, path)
    proc = run_into_closed_pipe(
        "console-consumer", "--log-dir", str(path), "--topic", "t", "--from-beginning", "--timeout-ms", "200"
    )
    assert (proc.returncode, proc.stderr) == (
        1,
        b"Unable to write to standard out, closing consumer.\nProcessed a total of 10 messages\n",
    )


@pytest.mark.parametrize("args", [["topics", "--list"], ["get-offsets"], ["topics", "--describe"]])
def test_other_commands_into_a_closed_pipe_end_quietly(args: list[str], healthy_log_dir: Path) -> None:
    proc = run_into_closed_pipe(*args, "--log-dir", str(healthy_log_dir))
    assert (proc.returncode, proc.stderr) == (1, b"")


# -- usage errors a Kafka user meets ---------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--bootstrap-server", "--bootstrap-server=localhost:9092"])
def test_a_broker_option_is_named_with_what_to_give_instead(
    option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["topics", option] + ([] if "=" in option else ["localhost:9092"]) + ["--list"]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "pysparklog topics: error: --bootstrap-server names a broker, and pysparklog has none: give the log "
        "directory with --log-dir (or $PYSPARKLOG_LOG_DIR)\n"
    )


def commands_taking_a_log_dir() -> list[str]:
    parser = cli_main.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(
        name
        for name, subparser in subparsers.choices.items()
        if any("--log-dir" in action.option_strings for action in subparser._actions)
    )


@pytest.mark.parametrize("command", commands_taking_a_log_dir())
def test_a_missing_log_dir_names_both_ways_to_give_it(command: str) -> None:
    env = {name: value for name, value in os.environ.items() if name != "PYSPARKLOG_LOG_DIR"}
    proc = subprocess.run([*CLI, *PARSED_RUNS[command]], capture_output=True, timeout=300, check=False, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr.decode()) == (
        2,
        b"",
        f"pysparklog {command}: error: --log-dir is required (or set PYSPARKLOG_LOG_DIR)\n",
    )


@pytest.mark.parametrize("command", commands_taking_a_log_dir())
def test_the_environment_gives_every_command_its_log_dir(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARKLOG_LOG_DIR", "from-the-environment")
    assert build_parser().parse_command(PARSED_RUNS[command]).log_dir == "from-the-environment"


def test_an_unrecognized_argument_is_reported_by_its_subcommand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["topics", "--log-dir", str(tmp_path), "--list", "--bogus"]) == 2
    assert capsys.readouterr().err == "pysparklog topics: error: unrecognized arguments: --bogus\n"


def test_an_option_is_never_taken_for_a_longer_one_it_begins(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """argparse would read ``--formatter`` as ``--formatter-property``; Kafka's tools would refuse it."""
    assert main(["console-consumer", "--log-dir", str(tmp_path), "--topic", "t", "--formatter", "X"]) == 2
    assert capsys.readouterr().err == "pysparklog console-consumer: error: unrecognized arguments: --formatter X\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_command(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"pysparklog {importlib.metadata.version('pysparklog')}\n"
