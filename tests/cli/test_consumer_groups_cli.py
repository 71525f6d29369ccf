"""``pysparklog consumer-groups``: kafka-consumer-groups.sh's tables, messages and option checks on a log directory.

Run in-process (``main``); a group's live members are real ones, joined through its ``GroupCoordinator`` on the
test's log directory. One test runs the command in a new process as people run it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog import LogDirectory
from pysparklog.cli.consumer_groups import parse_datetime, parse_duration
from pysparklog.cli.main import main
from pysparklog.offsets import OffsetStore
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from tests.cli.test_dump_log import run_cli
from tests.test_offsets import join, leave, member, sessions_ago

TS = 1_700_000_000_000
ORDERS = [TopicPartition("orders", p) for p in range(3)]
C1 = member("consumer-1", "/10.0.0.1")
C2 = member("consumer-2", "/10.0.0.2", "instance-2")  # static: the range assignor gives it orders-0 and 1
NO_MEMBERS = "\nConsumer group 'billing' has no active members.\n"
DESCRIBE_HEADER = (
    "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     "
    "HOST            CLIENT-ID"
)


@pytest.fixture(autouse=True)
def _no_log_dir_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARKLOG_LOG_DIR", raising=False)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """orders: 3 partitions of 10, 20 and 30 records stamped TS + i; group billing at orders-0 4, orders-1 20."""
    logs = LogDirectory(tmp_path)
    logs.topics.create("orders", 3)
    for p in range(3):
        n = 10 * (p + 1)
        logs.partition("orders", p).append_arrow(
            pa.table({"value": [b"v"] * n, "timestamp": pa.array(range(TS, TS + n), pa.int64())})
        )
    with OffsetStore(logs) as store:
        store.commit("billing", {ORDERS[0]: OffsetAndMetadata(4), ORDERS[1]: OffsetAndMetadata(20)})
    return tmp_path


def groups(log_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["consumer-groups", "--log-dir", str(log_dir), *args])
    out, err = capsys.readouterr()
    return status, out, err


def committed(log_dir: Path, group: str = "billing") -> dict[TopicPartition, int]:
    with OffsetStore(log_dir) as store:
        return {tp: c.offset for tp, c in store.committed(group).items()}


def error(message: str) -> str:
    return f"pysparklog consumer-groups: error: {message}\n"


def test_list_and_list_with_states(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with OffsetStore(log_dir) as store:
        store.commit("audit", {ORDERS[2]: OffsetAndMetadata(1)})
    assert groups(log_dir, capsys, "--list") == (0, "audit\nbilling\n", "")
    header = "GROUP                     STATE               \n"
    assert groups(log_dir, capsys, "--list", "--state") == (
        0,
        header + "audit                     Empty               \nbilling                   Empty               \n",
        "",
    )
    assert groups(log_dir, capsys, "--list", "--state", "stable,PREPARINGREBALANCE") == (0, header, "")
    assert groups(log_dir, capsys, "--list", "--state", "busy") == (
        1,
        "",
        error(
            "Invalid state list 'busy'. Valid states are: PreparingRebalance, CompletingRebalance, Stable, Dead, "
            "Empty, Assigning, Reconciling"
        ),
    )


def test_list_includes_groups_known_only_by_their_members(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    join(LogDirectory(log_dir), "fresh", C1, C2)
    join(LogDirectory(log_dir), "gone", C1, clock=sessions_ago)  # its only member's session ran out
    assert groups(log_dir, capsys, "--list", "--state", "Stable") == (
        0,
        "GROUP                     STATE               \nfresh                     Stable              \n",
        "",
    )


def test_describe_an_empty_group(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = (
        f"\n{DESCRIBE_HEADER}\n"
        "billing         orders          0          4               10              6               -               "
        "-               -\n"
        "billing         orders          1          20              20              0               -               "
        "-               -\n"
    )
    assert groups(log_dir, capsys, "--describe", "--group", "billing") == (0, expected, NO_MEMBERS)
    assert groups(log_dir, capsys, "--describe", "--group", "billing", "--offsets") == (0, expected, NO_MEMBERS)
    assert groups(log_dir, capsys, "--describe", "--all-groups") == (0, expected, NO_MEMBERS)
    assert groups(log_dir, capsys, "--describe", "--group", "nope") == (
        1,
        "",
        error("Consumer group 'nope' does not exist."),
    )


def test_describe_a_group_with_members(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c1, c2 = join(LogDirectory(log_dir), "billing", C1, C2)
    assert re.fullmatch(r"consumer-1-[0-9a-f-]{36}", c1) and re.fullmatch(r"consumer-2-[0-9a-f-]{36}", c2)
    w = len(c2)  # the CONSUMER-ID column is as wide as the longest id
    assert groups(log_dir, capsys, "--describe", "--group", "billing") == (
        0,
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        f"{'CONSUMER-ID':<{w}} HOST            CLIENT-ID\n"
        "billing         orders          0          4               10              6               "
        f"{c2} /10.0.0.2       consumer-2\n"
        "billing         orders          1          20              20              0               "
        f"{c2} /10.0.0.2       consumer-2\n"
        "billing         orders          2          -               30              -               "
        f"{c1} /10.0.0.1       consumer-1\n",
        "",
    )
    members = (
        f"\nGROUP           {'CONSUMER-ID':<{w}} GROUP-INSTANCE-ID HOST            CLIENT-ID       "
        "#PARTITIONS     {}\n"
        f"billing         {c1}                   /10.0.0.1       consumer-1      "
        "1               {}\n"
        f"billing         {c2} instance-2        /10.0.0.2       consumer-2      "
        "2               {}\n"
    )
    assert groups(log_dir, capsys, "--describe", "--group", "billing", "--members") == (
        0,
        members.format("", "", ""),
        "",
    )
    assert groups(log_dir, capsys, "--describe", "--group", "billing", "--members", "--verbose") == (
        0,
        members.format("ASSIGNMENT", "orders(2)", "orders(0,1)"),
        "",
    )
    assert groups(log_dir, capsys, "--describe", "--group", "billing", "--state") == (
        0,
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS\n"
        "billing                   -                         range                Stable          2\n",
        "",
    )
    # consumer-2 leaves: consumer-1 is assigned every partition but owns orders-0 and 1 only at its next heartbeat.
    leave(LogDirectory(log_dir), "billing", c2)
    assert groups(log_dir, capsys, "--describe", "--group", "billing", "--state") == (
        0,
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS\n"
        "billing                   -                         range                CompletingRebalance 1\n",
        "\nWarning: Consumer group 'billing' is rebalancing.\n",
    )
    assert groups(log_dir, capsys, "--describe", "--group", "billing", "--members") == (
        0,
        f"\nGROUP           {'CONSUMER-ID':<{w}} HOST            CLIENT-ID       #PARTITIONS     \n"
        f"billing         {c1} /10.0.0.1       consumer-1      3               \n",
        "\nWarning: Consumer group 'billing' is rebalancing.\n",
    )


def test_reset_offsets_dry_run_then_execute(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = (
        "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n"
        "billing                        orders                         0          0              \n"
        "billing                        orders                         1          0              \n"
        "billing                        orders                         2          0              \n"
    )
    reset = ("--reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest")
    assert groups(log_dir, capsys, *reset, "--dry-run") == (0, plan, "")
    assert committed(log_dir) == {ORDERS[0]: 4, ORDERS[1]: 20}
    status, out, err = groups(log_dir, capsys, *reset)
    assert (status, out) == (0, plan) and err.startswith("WARN: No action will be performed as the --execute option")
    assert committed(log_dir) == {ORDERS[0]: 4, ORDERS[1]: 20}, "without --execute a reset is a dry run"
    assert groups(log_dir, capsys, *reset, "--execute") == (0, plan, "")
    assert committed(log_dir) == {ORDERS[0]: 0, ORDERS[1]: 0, ORDERS[2]: 0}


def test_reset_scenarios_and_scopes(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def reset(*args: str) -> dict[TopicPartition, int]:
        status, _, err = groups(log_dir, capsys, "--reset-offsets", "--group", "billing", "--execute", *args)
        assert status == 0, err
        return committed(log_dir)

    assert reset("--all-topics", "--to-latest") == {ORDERS[0]: 10, ORDERS[1]: 20}
    assert reset("--topic", "orders:0,2", "--to-offset", "3") == {ORDERS[0]: 3, ORDERS[1]: 20, ORDERS[2]: 3}
    assert reset("--all-topics", "--shift-by", "-2") == {ORDERS[0]: 1, ORDERS[1]: 18, ORDERS[2]: 1}
    assert reset("--topic", "orders:1", "--to-datetime", "2023-11-14T22:13:20.007Z") == {
        ORDERS[0]: 1,
        ORDERS[1]: 7,
        ORDERS[2]: 1,
    }
    status, out, err = groups(
        log_dir, capsys, "--reset-offsets", "--group", "billing", "--all-topics", "--to-offset", "25", "--dry-run"
    )
    assert status == 0 and "orders                         1          20             \n" in out
    assert err == (
        "WARN: New offset (25) is higher than latest offset for topic partition orders-0. Value will be set to 10\n"
        "WARN: New offset (25) is higher than latest offset for topic partition orders-1. Value will be set to 20\n"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-11-14T22:13:20.007", TS + 7),
        ("2023-11-14T22:13:20.007Z", TS + 7),
        ("2023-11-15T06:13:20.007+08", TS + 7),
        ("2023-11-15T06:13:20.007+0800", TS + 7),
        ("2023-11-15T06:13:20.007+08:00", TS + 7),
        ("2023-11-14T17:13:20.007-05:00", TS + 7),
    ],
)
def test_to_datetime_takes_kafkas_formats(value: str, expected: int) -> None:
    assert parse_datetime(value) == expected


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("PT15M", 900),
        ("pt6h", 6 * 3600),
        ("P2D", 2 * 86400),
        ("P1DT2H3M4S", 86400 + 2 * 3600 + 3 * 60 + 4),
        ("PT0.5S", 0.5),
        ("PT1,25S", 1.25),
        ("PT-0.5S", -0.5),
        ("-PT1H30M", -5400),
        ("PT1H-30M", 1800),
        ("+P0D", 0),
    ],
)
def test_by_duration_takes_javas_durations(value: str, seconds: float) -> None:
    assert parse_duration(value) == round(seconds * 10**9)


def test_reset_by_duration_goes_back_from_now(
    log_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    now_ms = TS + 86_400_000 + 3_600_000 + 5  # a day, an hour and 5 ms after the first records
    monkeypatch.setattr(time, "time_ns", lambda: now_ms * 1_000_000 + 999_999)
    reset = ("--reset-offsets", "--group", "billing", "--topic", "orders", "--dry-run")
    status, out, err = groups(log_dir, capsys, *reset, "--by-duration", "P1DT1H")
    assert (status, err) == (0, "")
    assert [line.split()[-1] for line in out.splitlines()[2:]] == ["5", "5", "5"]  # the records at TS + 5
    # A negative duration (after now: after every record) needs "=", as any value starting with "-" but a number.
    status, out, err = groups(log_dir, capsys, *reset, "--by-duration=-PT1S")
    assert status == 0 and [line.split()[-1] for line in out.splitlines()[2:]] == ["10", "20", "30"]
    assert err.count("Falling back to latest known offset.") == 3
    status, out, _ = groups(log_dir, capsys, *reset, "--by-duration", "P36500D")  # before the epoch: all after it
    assert status == 0 and [line.split()[-1] for line in out.splitlines()[2:]] == ["0", "0", "0"]


@pytest.mark.parametrize("value", ["P", "PT", "1D", "P1W", "P1M", "PT1.5", "P1DT", "PT1H2S3M", "P 1D", ""])
def test_by_duration_refuses_what_java_refuses(log_dir: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    status, out, err = groups(
        log_dir, capsys, "--reset-offsets", "--group", "billing", "--all-topics", "--by-duration", value
    )
    assert (status, out) == (1, "")
    assert err == error(
        f"Text cannot be parsed to a Duration: {value!r}; accepted: an ISO-8601 duration PnDTnHnMn.nS, as PT15M, "
        "PT6H, P1D, P1DT12H or PT0.5S (Java's Duration.parse; negative: after now)"
    )


def test_reset_to_current_keeps_committed_offsets(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reset = ("--reset-offsets", "--group", "billing", "--to-current", "--execute")
    status, out, err = groups(log_dir, capsys, *reset, "--topic", "orders")
    assert (status, err) == (0, "")
    assert [line.split()[-1] for line in out.splitlines()[2:]] == ["4", "20", "30"]  # orders-2 had none: its end
    assert committed(log_dir) == {ORDERS[0]: 4, ORDERS[1]: 20, ORDERS[2]: 30}


def test_reset_from_file(log_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with OffsetStore(log_dir) as store:
        store.commit("audit", {ORDERS[2]: OffsetAndMetadata(1)})
    single = tmp_path / "billing.csv"
    single.write_text("orders,0,7\norders,2,99\n\n")  # as Kafka's --export prints it: a blank line at the end
    status, out, err = groups(
        log_dir, capsys, "--reset-offsets", "--group", "billing", "--from-file", str(single), "--execute"
    )
    assert status == 0
    assert out == (
        "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n"
        "billing                        orders                         0          7              \n"
        "billing                        orders                         2          30             \n"
    )
    assert (
        err
        == "WARN: New offset (99) is higher than latest offset for topic partition orders-2. Value will be set to 30\n"
    )
    assert committed(log_dir) == {ORDERS[0]: 7, ORDERS[1]: 20, ORDERS[2]: 30}
    several = tmp_path / "groups.csv"
    several.write_text('billing,orders,1,-3\n"audit",orders,2,8\nother,orders,0,1\n')
    reset = ("--reset-offsets", "--from-file", str(several), "--execute")
    assert groups(log_dir, capsys, *reset, "--group", "billing", "--group", "audit")[0] == 0
    capsys.readouterr()
    assert committed(log_dir) == {ORDERS[0]: 7, ORDERS[1]: 0, ORDERS[2]: 30}
    assert committed(log_dir, "audit") == {ORDERS[2]: 8}
    status, _, err = groups(log_dir, capsys, *reset, "--all-groups")  # other is no group: the file's line is unused
    assert status == 0
    assert err == (
        "WARN: New offset (-3) is lower than earliest offset for topic partition orders-1. Value will be set to 0\n"
    )
    assert groups(log_dir, capsys, *reset, "--group", "billing")[0] == 0, "one group may take the group form"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("orders,0\n", "line 1 of {file} has 2 fields: 'orders,0'; accepted: topic,partition,offset"),
        (
            "orders,0,1\norders,1,2,3\n",
            "line 2 of {file} has 4 fields: 'orders,1,2,3'; accepted: topic,partition,offset",
        ),
        ("\norders,x,1\n", "line 2 of {file} has partition 'x'; accepted: an integer from 0 to 2147483647"),
        ("orders,-1,1\n", "line 1 of {file} has partition '-1'; accepted: an integer from 0 to 2147483647"),
        ("orders,0,1_000\n", "line 1 of {file} has offset '1_000'; accepted: an integer (a Java long)"),
        ("orders,0,9223372036854775808\n", "line 1 of {file} has offset '9223372036854775808'; accepted: an integer"),
        ("audit,orders,0,1\n", "No reset plan for group billing found in {file}"),
    ],
)
def test_reset_from_file_refuses_a_bad_file(
    log_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: str, message: str
) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text(lines)
    status, out, err = groups(
        log_dir, capsys, "--reset-offsets", "--group", "billing", "--from-file", str(plan), "--execute"
    )
    assert (status, out) == (1, "")
    assert err.startswith(error(message.format(file=plan)).rstrip("\n"))
    assert committed(log_dir) == {ORDERS[0]: 4, ORDERS[1]: 20}, "nothing is reset"


def test_reset_from_file_options(log_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    reset = ("--reset-offsets", "--group", "billing", "--execute", "--from-file")
    missing = tmp_path / "missing.csv"
    assert groups(log_dir, capsys, *reset, str(missing)) == (1, "", error(f"No such file or directory: {missing}"))
    assert groups(log_dir, capsys, *reset, str(missing), "--all-topics")[2] == error(
        'Option "[from-file]" can\'t be used with option "[all-topics]"'
    )
    assert groups(log_dir, capsys, *reset, str(missing), "--to-latest")[2] == error(
        'Option "[to-latest]" can\'t be used with option "[from-file]"'
    )


def test_reset_errors(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reset = ("--reset-offsets", "--group", "billing", "--execute")
    accepted = "accepted: yyyy-MM-ddTHH:mm:SS.sss, optionally followed by Z, +hh, +hhmm or +hh:mm (UTC when no zone"
    for bad in ("2023-11-14T22:13:20", "2023-13-14T22:13:20.007", "2023-11-14T22:13:20.007+25", "yesterday"):
        status, out, err = groups(log_dir, capsys, *reset, "--all-topics", "--to-datetime", bad)
        assert (status, out) == (1, "") and accepted in err, err
    assert (
        'Unparseable date: "2023-11-14T22:13:20"'
        in groups(log_dir, capsys, *reset, "--all-topics", "--to-datetime", "2023-11-14T22:13:20")[2]
    )
    assert groups(log_dir, capsys, *reset, "--topic", "nope", "--to-earliest") == (
        1,
        "",
        error("Topic 'nope' does not exist"),
    )
    assert groups(log_dir, capsys, *reset, "--topic", "orders:7", "--to-earliest") == (
        1,
        "",
        error("Partition 7 of topic 'orders' does not exist: the topic has 3 partitions"),
    )
    assert groups(log_dir, capsys, *reset, "--topic", "orders:x", "--to-earliest") == (
        1,
        "",
        error("Invalid partition 'x' specified in topic arg 'orders:x'"),
    )
    assert groups(log_dir, capsys, *reset, "--topic", "orders:1:2", "--to-earliest") == (
        1,
        "",
        error("Invalid topic arg 'orders:1:2', expected topic name and partitions"),
    )
    assert groups(log_dir, capsys, *reset, "--topic", "orders", "--shift-by", "1") == (
        1,
        "",
        error("Cannot shift offset for partition orders-2 since there is no current committed offset"),
    )
    join(LogDirectory(log_dir), "billing", C1, C2)
    assert groups(log_dir, capsys, *reset, "--all-topics", "--to-earliest") == (
        1,
        "",
        error("Assignments can only be reset if the group 'billing' is inactive, but the current state is Stable."),
    )
    assert committed(log_dir) == {ORDERS[0]: 4, ORDERS[1]: 20}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (),
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets",
        ),
        (
            ("--list", "--describe"),
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets",
        ),
        (("--describe",), "Option [describe] takes one of these options: [all-groups], [group]"),
        (
            ("--describe", "--group", "g", "--members", "--state"),
            "Option [describe] takes at most one of these options: [members], [offsets], [state]",
        ),
        (("--describe", "--group", "g", "--state", "Stable"), "Option [describe] does not take a value for [state]"),
        (("--describe", "--group", "g", "--all-groups"), 'Option "[group]" can\'t be used with option "[all-groups]"'),
        (("--describe", "--group", "g", "--topic", "t"), 'Option "[topic]" can\'t be used with option "[describe]"'),
        (("--list", "--group", "g"), 'Option "[group]" can\'t be used with option "[list]"'),
        (("--list", "--members"), "Option(s) [members] are unavailable given other options on the command line"),
        (("--delete",), "Option [delete] takes one of these options: [all-groups], [group]"),
        (
            ("--delete", "--group", "g", "--topic", "t"),
            "The consumer does not support topic-specific offset deletion from a consumer group.",
        ),
        (("--delete-offsets", "--group", "g"), "Option [delete-offsets] takes the following options: [group], [topic]"),
        (
            ("--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run", "--execute"),
            "Option [reset-offsets] only accepts one of [execute] and [dry-run]",
        ),
        (
            ("--reset-offsets", "--all-topics", "--to-latest"),
            "Option [reset-offsets] takes one of these options: [all-groups], [group]",
        ),
        (
            ("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--shift-by", "2"),
            'Option "[to-earliest]" can\'t be used with option "[shift-by]"',
        ),
        (
            ("--reset-offsets", "--group", "g", "--all-topics"),
            "Option '[reset-offsets]' requires one of the following scenarios: "
            "[[to-offset], [to-datetime], [by-duration], [to-earliest], [to-latest], [to-current], [shift-by], "
            "[from-file]]",
        ),
        (
            ("--reset-offsets", "--group", "g", "--to-latest"),
            "One of the reset scopes should be defined: --all-topics, --topic.",
        ),
        (
            ("--reset-offsets", "--group", "g", "--all-topics", "--topic", "orders", "--to-latest"),
            'Option "[all-topics]" can\'t be used with option "[topic]"',
        ),
    ],
)
def test_options_are_checked_as_kafka_checks_them(
    log_dir: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    assert groups(log_dir, capsys, *args) == (1, "", error(message))


def test_a_value_that_is_not_a_long_is_a_usage_error(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = groups(log_dir, capsys, "--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "x")
    assert (status, out) == (2, "") and "Cannot parse argument 'x' of option to-offset" in err


def test_delete_groups(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with OffsetStore(log_dir) as store:
        store.commit("audit", {ORDERS[2]: OffsetAndMetadata(1)})
        store.commit("reports", {ORDERS[2]: OffsetAndMetadata(2)})
    members = join(LogDirectory(log_dir), "billing", C1, C2)
    not_empty = (
        "* Group 'billing' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: The "
        "group is not empty."
    )
    assert groups(log_dir, capsys, "--delete", "--group", "billing") == (
        1,
        "",
        error(f"Deletion of some consumer groups failed: {not_empty}"),
    )
    assert groups(log_dir, capsys, "--delete", "--group", "audit", "--group", "billing", "--group", "nope") == (
        1,
        "These consumer groups were deleted successfully: 'audit'\n",
        error(
            f"Deletion of some consumer groups failed: {not_empty} * Group 'nope' could not be deleted due to: "
            "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist."
        ),
    )
    leave(LogDirectory(log_dir), "billing", *members)
    assert groups(log_dir, capsys, "--delete", "--group", "billing", "--group", "reports") == (
        0,
        "Deletion of requested consumer groups ('billing, reports') was successful.\n",
        "",
    )
    assert groups(log_dir, capsys, "--list") == (0, "", "")


def test_delete_offsets(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert groups(log_dir, capsys, "--delete-offsets", "--group", "billing", "--topic", "orders:1,2") == (
        0,
        "Request succeed for deleting offsets with topic orders:1,2 group billing\n"
        "\nTOPIC                          PARTITION       STATUS         \n"
        "orders                         1               Successful     \n"
        "orders                         2               Successful     \n",
        "",
    )
    assert committed(log_dir) == {ORDERS[0]: 4}
    assert groups(log_dir, capsys, "--delete-offsets", "--group", "nope", "--topic", "orders") == (
        1,
        "",
        error("Consumer group 'nope' does not exist."),
    )
    join(LogDirectory(log_dir), "billing", C1, C2)
    status, out, err = groups(log_dir, capsys, "--delete-offsets", "--group", "billing", "--topic", "orders")
    assert (status, out) == (1, "") and "actively subscribed to the topic(s) orders" in err
    assert committed(log_dir) == {ORDERS[0]: 4}


def test_runs_as_a_command_with_the_log_dir_from_the_environment(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_LOG_DIR", str(log_dir))
    proc = run_cli("consumer-groups", "--list")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "billing\n", "")
    missing = run_cli("consumer-groups", "--log-dir", str(log_dir / "nope"), "--list")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == error(f"log directory {log_dir / 'nope'} does not exist or is not a directory")


@pytest.mark.parametrize("view", [(), ("--members",), ("--state",)])
def test_the_state_notes_go_to_stderr_as_kafkas_do(log_dir: Path, view: tuple[str, ...]) -> None:
    """Kafka's ``ConsumerGroupCommand`` prints "has no active members" and "is rebalancing" with
    ``System.err``, the tables with ``System.out``: a script reading stdout gets the table alone."""
    proc = run_cli("consumer-groups", "--log-dir", str(log_dir), "--describe", "--group", "billing", *view)
    assert (proc.returncode, proc.stderr) == (0, NO_MEMBERS)
    assert proc.stdout.startswith("\nGROUP ") and "active members" not in proc.stdout
