"""``pysparklog consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``) on a log directory.

Committed offsets are those of the log directory's ``__consumer_offsets`` (``pysparklog.offsets``); a group's
state and live members are its membership (``pysparklog.offsets._membership``). Exactly one action::

    --list [--state [STATES]]
    --describe (--group G ... | --all-groups) [--members [--verbose] | --offsets | --state]
    --reset-offsets (--group G ... | --all-groups) (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime DATETIME | --shift-by N) [--dry-run | --execute]
    --delete (--group G ... | --all-groups)
    --delete-offsets --group G --topic T[:P,P...] ...

Options, their mutual exclusions, messages and tables are Kafka's: ``--describe`` prints ``GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID`` with Kafka's column widths (``-`` where a value is
unknown: no committed offset, no member), a reset prints the ``GROUP TOPIC PARTITION NEW-OFFSET`` plan, and a group
with active members is refused a reset (``Assignments can only be reset if the group 'G' is inactive, but the
current state is Stable.``) or a deletion. Without ``--execute`` a reset is a dry run, after Kafka's warning.
``--to-datetime`` takes Kafka's ``yyyy-MM-ddTHH:mm:SS.sss`` with an optional zone (``Z``, ``+hh``, ``+hhmm``,
``+hh:mm``; UTC without one); ``--to-offset`` and ``--shift-by`` are moved into [log start, log end] as Kafka
moves them, and ``--to-datetime`` falls back to the log end for a partition with no record at or after it.

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
* ``--from-file``, ``--export``, ``--to-current``, ``--by-duration`` and ``--type`` are not supported, and
  ``--all-topics`` with ``--topic`` is refused (Kafka's tool ignores ``--topic`` then).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone

from pysparklog.cli._common import UsageError, add_log_dir_argument, open_log_dir
from pysparklog.errors import GroupIdNotFoundError, GroupNotEmptyError, PySparkLogError
from pysparklog.group import MemberDescription
from pysparklog.offsets import ConsumerGroupDescription, OffsetStore, ResetPlan, ResetStrategy
from pysparklog.storage.config import LONG_MAX
from pysparklog.structs import TopicPartition

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
SCENARIOS = ("to-offset", "to-datetime", "to-earliest", "to-latest", "shift-by")
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
_DATETIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\.(?P<ms>\d{3})"
    r"(?:(?P<utc>Z)|(?P<sign>[+-])(?P<hh>\d{2})(?::?(?P<mm>\d{2}))?)?"
)
_DATETIME_ACCEPTED = (
    "yyyy-MM-ddTHH:mm:SS.sss, optionally followed by Z, +hh, +hhmm or +hh:mm (UTC when no zone is given)"
)


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
        "--shift-by", type=_long("shift-by"), metavar="N", help="shift the committed offset by N (may be negative)"
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
        if not args.topic and not args.all_topics:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    _conflict(args, "group", ["all-groups", "list"])
    _conflict(args, "topic", ["list", "describe"])
    return action


def parse_datetime(value: str) -> int:
    """Kafka's ``Utils.getDateTime``: milliseconds since the epoch of ``yyyy-MM-ddTHH:mm:SS.sss[zone]``.

    Raises:
        UsageError: Another format, or a date or time that does not exist.
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
        zone = timezone.utc
        if match["sign"]:
            sign = 1 if match["sign"] == "+" else -1
            zone = timezone(sign * timedelta(hours=int(match["hh"]), minutes=int(match["mm"] or 0)))
        moment = datetime.strptime(match["date"], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=zone)
    except ValueError:
        raise UsageError(f'Unparseable date: "{value}"; accepted: {_DATETIME_ACCEPTED}') from None
    return int(moment.timestamp()) * 1000 + int(match["ms"])


def _strategy(args: argparse.Namespace) -> ResetStrategy:
    if args.to_earliest:
        return ResetStrategy.to_earliest()
    if args.to_latest:
        return ResetStrategy.to_latest()
    if args.to_offset is not None:
        return ResetStrategy.to_offset(args.to_offset)
    if args.to_datetime is not None:
        return ResetStrategy.to_datetime(parse_datetime(args.to_datetime))
    return ResetStrategy.shift_by(args.shift_by)


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
    strategy = _strategy(args)
    if not args.dry_run and not args.execute:
        print(NO_EXECUTE_WARNING, file=sys.stderr)
    groups = _groups(store, args)
    explicit = None if args.all_topics else parse_topics(store, args.topic)
    plans = []
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
