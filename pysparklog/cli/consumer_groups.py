"""``pysparklog consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``) on a log directory.

Committed offsets are those of the log directory's ``__consumer_offsets`` (``pysparklog.offsets``); a group's
state and live members are its membership (``pysparklog.offsets._membership``). Exactly one action::

    --list [--state [STATES]]
    --describe (--group G ... | --all-groups) [--members [--verbose] | --offsets | --state]
    --reset-offsets (--group G ... | --all-groups) [--dry-run | --execute]
        (--topic T[:P,P...] ... | --all-topics) (--to-earliest | --to-latest | --to-current | --to-offset N
            | --to-datetime DATETIME | --by-duration DURATION | --shift-by N)
        | --from-file FILE
    --delete (--group G ... | --all-groups)
    --delete-offsets --group G --topic T[:P,P...] ...

Options, their mutual exclusions, messages and tables are Kafka's: ``--describe`` prints ``GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID`` with Kafka's column widths (``-`` where a value is
unknown: no committed offset, no member), a reset prints the ``GROUP TOPIC PARTITION NEW-OFFSET`` plan, and a group
with active members is refused a reset (``Assignments can only be reset if the group 'G' is inactive, but the
current state is Stable.``) or a deletion. Without ``--execute`` a reset is a dry run, after Kafka's warning.
``--to-datetime`` takes Kafka's ``yyyy-MM-ddTHH:mm:SS.sss`` with an optional zone (``Z``, ``+hh``, ``+hhmm``,
``+hh:mm``; UTC without one), ``--by-duration`` an ISO-8601 duration (``PnDTnHnMn.nS``, Java's ``Duration.parse``)
back from now; both fall back to the log end for a partition with no record at or after the time. ``--to-current``
keeps each committed offset (the log end for a partition without one). ``--from-file`` reads the offsets from
Kafka's CSV (``topic,partition,offset`` lines for one ``--group``, ``group,topic,partition,offset`` lines
otherwise, as ``--export`` writes them); those, ``--to-offset`` and ``--shift-by`` are moved into [log start, log
end] as Kafka moves them.

Where Kafka's tool differs:

* ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces ``--bootstrap-server``, ``--command-config`` and
  ``--timeout``.
* An error (a group that does not exist, an active group, an unknown topic, conflicting options) is one line on
  stderr and status 1, nothing being changed for the group refused; Kafka prints most of them as ``Error: ...``
  on stdout and ends with 0. Kafka's warnings (an offset moved into the log's range, a partition falling back to
  its log end) are ``WARN: ...`` lines on stderr.
* Rows are sorted by group, topic and partition (Kafka's follow hash maps), members with the most partitions
  first in ``--describe``.
* ``--state``'s ``COORDINATOR (ID)`` column shows ``-``: there is no coordinator broker.
* ``--members --verbose`` shows each topic's partitions as ``topic(0,1)``.
* ``--export`` and ``--type`` are not supported, and ``--all-topics`` with ``--topic`` is refused (Kafka's tool
  ignores ``--topic`` then), as are ``--topic`` and ``--all-topics`` with ``--from-file`` (which Kafka's tool
  ignores: the file names the partitions).
* ``--from-file`` refuses a malformed line, naming it, and a ``--group`` the file has no line for; Kafka's tool
  fails with Jackson's message on the first and resets nothing for that group on the second. With
  ``--all-groups``, a group the file does not name is left alone with a warning.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pysparklog.cli._common import UsageError, add_log_dir_argument, open_log_dir
from pysparklog.errors import GroupIdNotFoundError, GroupNotEmptyError, PySparkLogError
from pysparklog.group import MemberDescription
from pysparklog.offsets import ConsumerGroupDescription, OffsetStore, ResetPlan, ResetStrategy
from pysparklog.storage.config import LONG_MAX
from pysparklog.structs import TopicPartition

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
SCENARIOS = (
    "to-offset",
    "to-datetime",
    "by-duration",
    "to-earliest",
    "to-latest",
    "to-current",
    "shift-by",
    "from-file",
)
# ConsumerGroupState's names (but UNKNOWN), as --list --state accepts them.
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting."
)
# What a Kafka client shows for the errors of a group deletion (Errors.exception().toString()).
DELETE_ERRORS: dict[type[PySparkLogError], str] = {
    GroupIdNotFoundError: "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.",
    GroupNotEmptyError: "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.",
}
# joptsimple's availableIf: the actions an option goes with.
_AVAILABLE_WITH = {
    "members": ("describe",),
    "offsets": ("describe",),
    "verbose": ("describe",),
    "state": ("describe", "list"),
}
#: Kafka's form of a date and time (``Utils.getDateTime``), which ``datetime.fromisoformat`` reads once its zone is
#: written ``+hh:mm``: it reads more forms than Kafka, and before Python 3.11 no ``Z``, ``+hh`` or ``+hhmm``.
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?", re.ASCII)
_DATETIME_ACCEPTED = (
    "yyyy-MM-ddTHH:mm:SS.sss, optionally followed by Z, +hh, +hhmm or +hh:mm (UTC when no zone is given)"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MILLISECOND = timedelta(milliseconds=1)
#: Java's ``Duration.parse``: days, hours, minutes and seconds (with up to 9 decimals), each signed, in any case.
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?P<time>T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?(?:(?P<seconds>[-+]?\d+)(?:[.,](?P<nanos>\d{0,9}))?S)?)?",
    re.ASCII | re.IGNORECASE,
)
_DURATION_ACCEPTED = (
    "an ISO-8601 duration PnDTnHnMn.nS, as PT15M, PT6H, P1D, P1DT12H or PT0.5S (Java's Duration.parse; "
    "negative: after now)"
)
#: ``--from-file``'s lines (Kafka's ``CsvUtils``): for one ``--group``, and with the group first.
_CSV_FIELDS = ("topic", "partition", "offset")
_CSV_GROUP_FIELDS = ("group", *_CSV_FIELDS)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_INT_MAX = 2**31 - 1


def _option(name: str) -> str:
    """An option as Kafka's messages name it (joptsimple's ``[name]``)."""
    return f"[{name}]"


def _long(name: str) -> Callable[[str], int]:
    """An argparse type for a Java long option, refused as joptsimple refuses it."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = LONG_MAX + 1
        if not -LONG_MAX - 1 <= value <= LONG_MAX:
            raise argparse.ArgumentTypeError(f"Cannot parse argument '{text}' of option {name}")
        return value

    return parse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``consumer-groups`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "consumer-groups",
        help="list, describe, reset and delete consumer groups' offsets, as Kafka's kafka-consumer-groups.sh does",
        description="List all consumer groups, describe a consumer group, delete consumer group info, or reset "
        "consumer group offsets, as Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand) does.",
    )
    add_log_dir_argument(parser)
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument(
        "--describe", action="store_true", help="describe a consumer group and list its offset lag per partition"
    )
    actions.add_argument("--delete", action="store_true", help="delete consumer groups' committed offsets")
    actions.add_argument(
        "--reset-offsets",
        action="store_true",
        help="reset offsets of consumer groups; groups must be inactive; a dry run unless --execute",
    )
    actions.add_argument(
        "--delete-offsets", action="store_true", help="delete offsets of one consumer group for some topics"
    )
    parser.add_argument("--group", action="append", metavar="GROUP", help="the consumer group; repeatable")
    parser.add_argument("--all-groups", action="store_true", help="apply to all consumer groups")
    parser.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="a topic, or topic:0,1,2 for some of its partitions; repeatable (--reset-offsets, --delete-offsets)",
    )
    parser.add_argument(
        "--all-topics", action="store_true", help="reset every partition the group has committed offsets for"
    )
    parser.add_argument("--members", action="store_true", help="describe the members of the group (--describe)")
    parser.add_argument("--offsets", action="store_true", help="describe offsets and lag (--describe's default)")
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="with --describe: the group's state; with --list: each group's state, only those of the "
        f"comma-separated STATES when given ({', '.join(STATES)})",
    )
    parser.add_argument("--verbose", action="store_true", help="with --describe --members: each member's partitions")
    scenarios = parser.add_argument_group("reset scenarios (exactly one, with --reset-offsets)")
    scenarios.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    scenarios.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    scenarios.add_argument("--to-offset", type=_long("to-offset"), metavar="N", help="reset to offset N")
    scenarios.add_argument(
        "--to-datetime", metavar="DATETIME", help=f"reset to the first record at or after it: {_DATETIME_ACCEPTED}"
    )
    scenarios.add_argument(
        "--by-duration",
        metavar="DURATION",
        help=f"reset to the first record at or after now - DURATION: {_DURATION_ACCEPTED}",
    )
    scenarios.add_argument(
        "--to-current", action="store_true", help="keep the committed offsets (the log end where there is none)"
    )
    scenarios.add_argument(
        "--shift-by", type=_long("shift-by"), metavar="N", help="shift the committed offset by N (may be negative)"
    )
    scenarios.add_argument(
        "--from-file",
        metavar="FILE",
        help="reset to the offsets of a CSV file: topic,partition,offset lines for one --group, "
        "group,topic,partition,offset lines otherwise (what Kafka's --export writes)",
    )
    parser.add_argument("--dry-run", action="store_true", help="only show the offsets a reset would commit")
    parser.add_argument("--execute", action="store_true", help="commit the reset offsets")
    parser.set_defaults(run=run)


# -- options ----------------------------------------------------------------------------------------------------


def _given(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name.replace("-", "_"))
    return value is not None and value is not False


def _conflict(args: argparse.Namespace, used: str, others: Sequence[str]) -> None:
    """Kafka's ``CommandLineUtils.checkInvalidArgs``."""
    if _given(args, used):
        for other in others:
            if _given(args, other):
                raise UsageError(f'Option "{_option(used)}" can\'t be used with option "{_option(other)}"')


def _needs_group(args: argparse.Namespace, action: str) -> None:
    if not args.group and not args.all_groups:
        raise UsageError(
            f"Option {_option(action)} takes one of these options: {_option('all-groups')}, {_option('group')}"
        )


def check_options(args: argparse.Namespace) -> str:
    """The action, once the options are checked as Kafka's ``ConsumerGroupCommandOptions.checkArgs`` checks them.

    Raises:
        UsageError: Not exactly one action, or options that do not go with it or with each other.
    """
    chosen = [action for action in ACTIONS if _given(args, action)]
    if len(chosen) != 1:
        raise UsageError(f"Command must include exactly one action: {', '.join('--' + a for a in ACTIONS)}")
    action = chosen[0]
    for option, allowed in _AVAILABLE_WITH.items():
        if _given(args, option) and action not in allowed:
            raise UsageError(f"Option(s) {_option(option)} are unavailable given other options on the command line")
    if action == "describe":
        _needs_group(args, action)
        views = [view for view in ("members", "offsets", "state") if _given(args, view)]
        if len(views) > 1:
            raise UsageError(
                f"Option {_option('describe')} takes at most one of these options: "
                + ", ".join(_option(v) for v in ("members", "offsets", "state"))
            )
        if args.state:
            raise UsageError(f"Option {_option('describe')} does not take a value for {_option('state')}")
    elif action == "delete":
        _needs_group(args, action)
        if args.topic:
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    elif action == "delete-offsets":
        if not args.group or not args.topic:
            raise UsageError(
                f"Option {_option('delete-offsets')} takes the following options: {_option('group')}, "
                f"{_option('topic')}"
            )
        if len(args.group) > 1:
            raise UsageError("Found multiple arguments for option group, but you asked for only one")
    elif action == "reset-offsets":
        if args.dry_run and args.execute:
            raise UsageError(
                f"Option {_option('reset-offsets')} only accepts one of {_option('execute')} and {_option('dry-run')}"
            )
        _needs_group(args, action)
        for scenario in SCENARIOS:
            _conflict(args, scenario, [s for s in SCENARIOS if s != scenario])
        if not any(_given(args, s) for s in SCENARIOS):
            raise UsageError(
                f"Option '{_option('reset-offsets')}' requires one of the following scenarios: "
                f"[{', '.join(_option(s) for s in SCENARIOS)}]"
            )
        _conflict(args, "all-topics", ["topic"])
        _conflict(args, "from-file", ["topic", "all-topics"])
        if not args.topic and not args.all_topics and not args.from_file:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    _conflict(args, "group", ["all-groups", "list"])
    _conflict(args, "topic", ["list", "describe"])
    return action


def parse_datetime(value: str) -> int:
    """Kafka's ``Utils.getDateTime``: milliseconds since the epoch of ``yyyy-MM-ddTHH:mm:SS.sss[zone]``.

    Raises:
        UsageError: Another format, or a date, time or zone that does not exist.
    """
    if "T" not in value:
        raise UsageError(
            f"Error parsing timestamp {value!r}. It does not contain a 'T' according to ISO8601 format; "
            f"accepted: {_DATETIME_ACCEPTED}"
        )
    match = _DATETIME.fullmatch(value)
    try:
        if match is None:
            raise ValueError(value)
        zone = match["zone"] or "Z"
        offset = "+00:00" if zone == "Z" else f"{zone[:3]}:{zone[-2:] if len(zone) > 3 else '00'}"
        moment = datetime.fromisoformat(value[: len(value) - len(match["zone"] or "")] + offset)
    except ValueError:
        raise UsageError(f'Unparseable date: "{value}"; accepted: {_DATETIME_ACCEPTED}') from None
    return (moment - _EPOCH) // _MILLISECOND


def parse_duration(value: str) -> int:
    """Java's ``Duration.parse`` of ``PnDTnHnMn.nS``, in nanoseconds (negative for a negative duration).

    Raises:
        UsageError: Another format, or more seconds than a Java long holds.
    """
    match = _DURATION.fullmatch(value)
    units = (match["days"], match["hours"], match["minutes"], match["seconds"]) if match else ()
    if match is None or match["time"] in ("T", "t") or not any(units):
        raise UsageError(f"Text cannot be parsed to a Duration: {value!r}; accepted: {_DURATION_ACCEPTED}")
    days, hours, minutes, seconds = (int(unit or 0) for unit in units)
    total_seconds = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if abs(total_seconds) > LONG_MAX:
        raise UsageError(
            f"Text cannot be parsed to a Duration: {value!r} is out of range; accepted: {_DURATION_ACCEPTED}"
        )
    fraction = int((match["nanos"] or "0").ljust(9, "0"))
    nanos = total_seconds * 10**9 + (-fraction if (match["seconds"] or "").startswith("-") else fraction)
    return -nanos if match["sign"] == "-" else nanos


def _strategy(args: argparse.Namespace) -> ResetStrategy:
    if args.to_earliest:
        return ResetStrategy.to_earliest()
    if args.to_latest:
        return ResetStrategy.to_latest()
    if args.to_current:
        return ResetStrategy.to_current()
    if args.to_offset is not None:
        return ResetStrategy.to_offset(args.to_offset)
    if args.to_datetime is not None:
        return ResetStrategy.to_datetime(parse_datetime(args.to_datetime))
    if args.by_duration is not None:
        # Kafka's now minus the duration, in milliseconds; before the epoch every record is after it.
        timestamp = (time.time_ns() - parse_duration(args.by_duration)) // 1_000_000
        return ResetStrategy.to_datetime(min(max(timestamp, 0), LONG_MAX))
    return ResetStrategy.shift_by(args.shift_by)


def read_reset_file(path: str, single_group: str | None) -> dict[str, dict[TopicPartition, int]]:
    """The offsets of ``--from-file``, per group: Kafka's CSV, ``topic,partition,offset`` lines for ``single_group``
    (the one ``--group``) unless its first line has four fields, ``group,topic,partition,offset`` lines
    otherwise. Blank lines are skipped; a partition given twice gets its last offset.

    Raises:
        UsageError: A line that is not such a line, naming it.
        OSError: The file cannot be read.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    rows = [(number, row) for number, row in enumerate(csv.reader(lines), 1) if row]
    group_first = single_group is None or (bool(rows) and len(rows[0][1]) == len(_CSV_GROUP_FIELDS))
    fields = _CSV_GROUP_FIELDS if group_first else _CSV_FIELDS
    plans: dict[str, dict[TopicPartition, int]] = {}
    for number, row in rows:
        where = f"line {number} of {path}"
        if len(row) != len(fields):
            raise UsageError(f"{where} has {len(row)} fields: {lines[number - 1]!r}; accepted: {','.join(fields)}")
        record = dict(zip(fields, row, strict=True))
        group = record.get("group", single_group)
        assert group is not None
        partition, offset = record["partition"], record["offset"]
        if not _INTEGER.fullmatch(partition) or not 0 <= int(partition) <= _INT_MAX:
            raise UsageError(f"{where} has partition {partition!r}; accepted: an integer from 0 to {_INT_MAX}")
        if not _INTEGER.fullmatch(offset) or not -LONG_MAX - 1 <= int(offset) <= LONG_MAX:
            raise UsageError(f"{where} has offset {offset!r}; accepted: an integer (a Java long)")
        plans.setdefault(group, {})[TopicPartition(record["topic"], int(partition))] = int(offset)
    return plans


def _plan_from_file(store: OffsetStore, group_id: str, offsets: dict[TopicPartition, int]) -> ResetPlan:
    """The reset plan of the offsets a file gives a group, each moved into its log's range as ``--to-offset`` is."""
    by_offset: dict[int, list[TopicPartition]] = {}
    for tp, offset in offsets.items():
        by_offset.setdefault(offset, []).append(tp)
    plans = [
        store.plan_reset(group_id, tps, ResetStrategy.to_offset(offset)) for offset, tps in sorted(by_offset.items())
    ]
    merged = dict(sorted(item for plan in plans for item in plan.offsets.items()))
    return ResetPlan(group_id, merged, tuple(warning for plan in plans for warning in plan.warnings))


def parse_topics(store: OffsetStore, specs: Sequence[str]) -> list[TopicPartition]:
    """``--topic`` values: ``topic`` (all its partitions) or ``topic:0,1,2``.

    Raises:
        UsageError: A malformed value.
        UnknownTopicError: A topic without partitions given that does not exist.
    """
    found: list[TopicPartition] = []
    for spec in specs:
        if ":" not in spec:
            found += [TopicPartition(spec, p) for p in range(store.log_dir.topics.get(spec).partitions)]
            continue
        parts = spec.split(":")
        if len(parts) != 2 or not parts[0]:
            raise UsageError(f"Invalid topic arg '{spec}', expected topic name and partitions")
        for partition in parts[1].split(","):
            if not partition.strip().isdigit():
                raise UsageError(f"Invalid partition '{partition}' specified in topic arg '{spec}'")
            found.append(TopicPartition(parts[0], int(partition)))
    return found


# -- output -----------------------------------------------------------------------------------------------------


def _line(widths: Sequence[int], values: Sequence[object]) -> str:
    """Values left-justified to their widths and separated by a space, as Kafka's ``%-Ns %-Ms ...`` formats
    print them; a width of 0 leaves a value unpadded."""
    return " ".join(f"{value!s:<{width}}" if width else str(value) for value, width in zip(values, widths, strict=True))


def _table(widths: Sequence[int], header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Kafka's tables: every line starts with a newline (``%n`` first in the format), and one ends them."""
    return "".join("\n" + _line(widths, row) for row in [header, *rows]) + "\n"


def _or_missing(value: object) -> object:
    return MISSING if value is None else value


def _note_state(group: ConsumerGroupDescription) -> None:
    """Kafka's remarks on a group's state, on stderr, before its table."""
    if group.state == "Empty":
        print(f"\nConsumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in REBALANCING:
        print(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)


def format_offsets(group: ConsumerGroupDescription) -> str:
    """``--describe`` (``--offsets``): one row per assigned or committed partition; nothing without rows."""
    rows = []
    for row in group.rows:
        member = row.member
        position = row.position
        rows.append(
            (
                group.group_id,
                position.partition.topic,
                position.partition.partition,
                _or_missing(position.committed),
                _or_missing(position.log_end_offset),
                _or_missing(position.lag),
                MISSING if member is None else member.member_id,
                MISSING if member is None else member.host,
                MISSING if member is None else member.client_id,
            )
        )
    if not rows:
        return ""
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    widths = [max([15, *(len(str(r[i])) for r in rows)]) for i in (0, 1)] + [10, 15, 15, 15]
    widths += [max([15, *(len(str(r[i])) for r in rows)]) for i in (6, 7)] + [0]
    return _table(widths, header, rows)


def _assignment(member: MemberDescription) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in member.assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or MISSING


def format_members(group: ConsumerGroupDescription, verbose: bool) -> str:
    """``--describe --members``: Kafka prints the header even for a group without members."""
    members = group.members
    with_instance_id = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance_id else []), "HOST", "CLIENT-ID"]
    rows = [
        [
            group.group_id,
            m.member_id,
            *([m.group_instance_id or ""] if with_instance_id else []),
            m.host,
            m.client_id,
        ]
        for m in members
    ]
    minimums = [15, 15, *([17] if with_instance_id else []), 15, 15]
    widths = [max([minimum, *(len(r[i]) for r in rows)]) for i, minimum in enumerate(minimums)]
    # Kafka's format ends with "%-15s " (the partition count and a space), then ASSIGNMENT with --verbose.
    lines = [_line([*widths, 15], [*header, "#PARTITIONS"]) + " " + ("ASSIGNMENT" if verbose else "")]
    for member, row in zip(members, rows, strict=True):
        line = _line([*widths, 15], [*row, len(member.assignment)]) + " "
        lines.append(line + (_assignment(member) if verbose else ""))
    return "\n" + "\n".join(lines) + "\n"


def format_state(group: ConsumerGroupDescription) -> str:
    """``--describe --state``."""
    header = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    row = (group.group_id, MISSING, group.assignor, group.state, len(group.members))
    return _table([max(25, len(group.group_id)), 25, 20, 15, 0], header, [row])


def format_reset_plans(plans: Sequence[ResetPlan]) -> str:
    """The ``GROUP TOPIC PARTITION NEW-OFFSET`` table of a reset (Kafka's ``printOffsetsToReset``)."""
    rows = [(plan.group_id, tp.topic, tp.partition, offset) for plan in plans for tp, offset in plan.offsets.items()]
    return _table([30, 30, 10, 15], ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows)


# -- actions ----------------------------------------------------------------------------------------------------


def _groups(store: OffsetStore, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [listing.group_id for listing in store.list_groups()]
    return list(dict.fromkeys(args.group))


def _list(store: OffsetStore, args: argparse.Namespace) -> int:
    listings = store.list_groups()
    if args.state is None:
        for listing in listings:
            print(listing.group_id)
        return 0
    wanted = {s.strip().lower() for s in args.state.split(",")} if args.state else set()
    unknown = wanted - {s.lower() for s in STATES}
    if unknown:
        raise UsageError(f"Invalid state list '{args.state}'. Valid states are: {', '.join(STATES)}")
    shown = [g for g in listings if not wanted or g.state.lower() in wanted]
    width = max([15, *(len(g.group_id) for g in shown)]) + 10
    print(_line([width, 20], ("GROUP", "STATE")))
    for listing in shown:
        print(_line([width, 20], (listing.group_id, listing.state)))
    return 0


def _describe(store: OffsetStore, args: argparse.Namespace) -> int:
    described = []
    for group_id in sorted(_groups(store, args)):
        group = store.describe(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
        described.append(group)
    for group in described:
        _note_state(group)
        if args.members:
            output = format_members(group, args.verbose)
        elif args.state is not None:
            output = format_state(group)
        else:
            output = format_offsets(group)
        print(output, end="", flush=True)
    return 0


def _reset(store: OffsetStore, args: argparse.Namespace) -> int:
    strategy = None if args.from_file else _strategy(args)
    if not args.dry_run and not args.execute:
        print(NO_EXECUTE_WARNING, file=sys.stderr)
    groups = _groups(store, args)
    plans = []
    if strategy is None:
        from_file = read_reset_file(args.from_file, args.group[0] if args.group and len(groups) == 1 else None)
        unnamed = [group_id for group_id in groups if group_id not in from_file]
        if unnamed and not args.all_groups:
            raise UsageError(f"No reset plan for group {', '.join(unnamed)} found in {args.from_file}")
        for group_id in unnamed:
            print(f"WARN: No reset plan for group {group_id} found", file=sys.stderr)
        plans = [_plan_from_file(store, group_id, from_file[group_id]) for group_id in groups if group_id in from_file]
    else:
        explicit = None if args.all_topics else parse_topics(store, args.topic)
        for group_id in groups:
            partitions = store.committed(group_id).keys() if explicit is None else explicit
            plans.append(store.plan_reset(group_id, partitions, strategy))
    for plan in plans:
        for warning in plan.warnings:
            print(f"WARN: {warning}", file=sys.stderr)
    if args.execute:
        for plan in plans:
            store.execute_reset(plan)
    print(format_reset_plans(plans), end="")
    return 0


def _delete(store: OffsetStore, args: argparse.Namespace) -> int:
    deleted, failed = [], []
    for group_id in _groups(store, args):
        try:
            store.delete_group(group_id)
            deleted.append(group_id)
        except (GroupIdNotFoundError, GroupNotEmptyError) as error:
            failed.append((group_id, error))
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(deleted)}') was successful.")
        return 0
    if deleted:
        print(f"These consumer groups were deleted successfully: {', '.join(repr(g) for g in deleted)}")
    reasons = " ".join(f"* Group '{g}' could not be deleted due to: {DELETE_ERRORS[type(e)]}" for g, e in failed)
    raise type(failed[0][1])(f"Deletion of some consumer groups failed: {reasons}")


def _delete_offsets(store: OffsetStore, args: argparse.Namespace) -> int:
    group_id = args.group[0]
    partitions = parse_topics(store, args.topic)
    store.delete_offsets(group_id, partitions)
    print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group_id}")
    rows = [(tp.topic, tp.partition, "Successful") for tp in sorted(set(partitions), key=lambda tp: f"{tp[0]}{tp[1]}")]
    print(_table([30, 15, 15], ("TOPIC", "PARTITION", "STATUS"), rows), end="")
    return 0


_RUN: dict[str, Callable[[OffsetStore, argparse.Namespace], int]] = {
    "list": _list,
    "describe": _describe,
    "reset-offsets": _reset,
    "delete": _delete,
    "delete-offsets": _delete_offsets,
}


def run(args: argparse.Namespace) -> int:
    action = check_options(args)
    with OffsetStore(open_log_dir(args.log_dir)) as store:
        return _RUN[action](store, args)
