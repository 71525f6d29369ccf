"""``pysparklog console-consumer``: Kafka's ``kafka-console-consumer.sh``, printing the records of a topic.

It reads every partition of ``--topic`` (or of each topic ``--include``, Kafka's topic filter, matches: a
regular expression of whole names, commas separating alternatives, internal topics left out), or ``--partition``
alone, from the log end (new records only)
unless ``--from-beginning`` or ``--offset`` (with ``--partition``: a number, ``earliest`` or
``latest``) says otherwise, and prints each record as Kafka's ``DefaultMessageFormatter`` does: the
value alone by default; with the ``print.*`` properties, the fields in this order::

    CreateTime:1700000000000<TAB>Partition:0<TAB>Offset:5<TAB>h1:v1,h2:v2<TAB>key<TAB>value

each followed by ``key.separator`` (a tab), the last by ``line.separator`` (a newline). The headers
(``print.headers``) are ``key:value`` pairs separated by ``headers.separator`` (``,``), a null value printed as
``null.literal``, or ``NO_HEADERS`` for a record without any. The timestamp
is ``LogAppendTime:<ms>`` for a broker-stamped record and ``NO_TIMESTAMP`` for a legacy one without
a timestamp; a null key or value prints as ``null.literal`` (``null``). Keys and values are printed
as their bytes. A start offset outside the log is reset as Kafka's ``auto.offset.reset`` resets it:
to the log start with ``--from-beginning``, else to the log end.

It then waits for records, polling the partitions in partition order (one chunk of at most 1 MiB of
each, Kafka's ``max.partition.fetch.bytes``, per poll, so a partition with a backlog does not starve
the others) until ``--max-messages`` records are printed, no record came for ``--timeout-ms``, or
Ctrl-C (status 130), and then prints Kafka's ``Processed a total of N messages`` on stderr. Records
are formatted a whole Arrow batch at a time by Arrow kernels, not one by one.

With ``--group G`` it consumes as a member of consumer group ``G`` (``pysparklog.consumer``): the
group's assignor shares the topic's partitions among the members, each starts at the group's
committed offset (``--from-beginning`` only matters for partitions without one, as Kafka's
``auto.offset.reset=earliest``), and what it prints is committed every 5 seconds and when it
exits, so the next run of the group goes on where this one stopped. ``--partition`` and
``--offset`` cannot be combined with it.

``--consumer-property NAME=VALUE`` (repeatable) sets a consumer config (``pysparklog.consumer.ConsumerConfig``,
Kafka's names) as Kafka's tool does: ``group.id`` is ``--group`` (the two must agree), ``auto.offset.reset`` may
not contradict ``--from-beginning``, ``--isolation-level`` wins over ``isolation.level``, ``client.id`` is
``console-consumer`` unless given. The broker connection's configs (``bootstrap.servers``, ``security.protocol``,
``sasl.*``, ``ssl.*``...) are accepted and ignored with a warning.

Where Kafka's tool differs:

* ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces ``--bootstrap-server``, and the topic must
  exist. Without ``--group`` no group is joined and nothing is committed (Kafka's tool joins a
  random ``console-consumer-NNNNN`` group instead), and partitions added to the topic while it runs
  are not read.
* The formatter properties are ``print.timestamp``, ``print.partition``, ``print.offset``,
  ``print.headers``, ``print.key``, ``print.value``, ``key.separator``, ``line.separator``,
  ``headers.separator`` and ``null.literal``; ``print.delivery``, ``print.epoch`` and the deserializers
  (``headers.deserializer``...: bytes are printed as they are) are refused, as are unknown names, which Kafka
  ignores. ``--property`` and ``--formatter-property`` (Kafka 4.2's new name for it) are the same option here.
* ``--include`` is a Python regular expression where Kafka's is Java's (they agree on the usual constructs);
  without ``--group`` its topics are those matching when the command starts.
* Reaching ``--timeout-ms`` is not reported as an error on stderr; the status is 0 in both tools.
* A reader of stdout that went away (``| head``) ends it, after Kafka's ``Unable to write to standard out,
  closing consumer.`` and the count, with status 1 (Kafka's tool ends with 0).
* ``--isolation-level`` is Kafka's: ``read_committed`` stops at the last stable offset and skips
  aborted transactions.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from pysparklog.cli._common import (
    StopSignals,
    UsageError,
    add_log_dir_argument,
    open_log_dir,
    topic_filter,
)
from pysparklog.cli._console import (
    add_client_property_argument,
    add_property_argument,
    client_properties,
    is_true,
    parse_properties,
)
from pysparklog.cli.main import EXIT_INTERRUPTED
from pysparklog.consumer import AutoOffsetReset, Consumer, ConsumerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.log_reads import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from pysparklog.storage.records.arrow_records import binary_buffers
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.topics import INTERNAL_TOPICS
from pysparklog.storage.transaction_index import READ_COMMITTED, READ_UNCOMMITTED
from pysparklog.structs import TopicPartition

FETCH_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes
POLL_INTERVAL_S = 0.1  # the pause between polls that found nothing
_MAX_POLL_RECORDS = 2**31 - 1  # a poll takes one chunk of each partition, however many records it holds

_FORMATTER_PROPERTIES: Mapping[str, str] = {
    "print.timestamp": "true to print CreateTime:<ms> first (default false)",
    "print.partition": "true to print Partition:<p> (default false)",
    "print.offset": "true to print Offset:<o> (default false)",
    "print.headers": "true to print the headers, h1:v1,h2:v2, or NO_HEADERS (default false)",
    "print.key": "true to print the key (default false)",
    "print.value": "false to leave the value out (default true)",
    "key.separator": "what follows each field but the last (default a tab)",
    "line.separator": "what follows the last field (default a newline)",
    "headers.separator": "what separates two headers (default ,)",
    "null.literal": "what a null key or value prints as (default null)",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``console-consumer`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "console-consumer",
        help="print the records of a topic, as Kafka's kafka-console-consumer.sh does",
        description="Print the records of a topic on standard output and wait for new ones, in the format of "
        "Kafka's kafka-console-consumer.sh (DefaultMessageFormatter).",
    )
    add_log_dir_argument(parser)
    topics = parser.add_mutually_exclusive_group(required=True)
    topics.add_argument("--topic", help="the topic to read; it must exist")
    topics.add_argument(
        "--include",
        metavar="REGEX",
        help="read the topics this regular expression matches (whole names; commas separate alternatives), "
        "internal topics left out",
    )
    parser.add_argument(
        "--partition", type=_non_negative, metavar="P", help="read partition P only, from its end unless --offset"
    )
    parser.add_argument(
        "--offset", metavar="OFFSET", help="with --partition: where to start, a number, earliest or latest"
    )
    parser.add_argument(
        "--from-beginning", action="store_true", help="start at the log start offset rather than the log end"
    )
    parser.add_argument(
        "--group",
        metavar="GROUP",
        help="consume as a member of consumer group GROUP, from its committed offsets, and commit what is printed",
    )
    parser.add_argument("--max-messages", type=_non_negative, metavar="N", help="exit after printing N records")
    parser.add_argument(
        "--timeout-ms", type=int, metavar="MS", help="exit when no record came for MS milliseconds (negative: never)"
    )
    parser.add_argument(
        "--isolation-level",
        choices=(READ_UNCOMMITTED, READ_COMMITTED),
        help="read_committed: only records of committed transactions, up to the last stable offset "
        "(default: read_uncommitted, all records)",
    )
    add_property_argument(parser, "--property", "--formatter-property", accepted=_FORMATTER_PROPERTIES)
    add_client_property_argument(parser, "--consumer-property", "consumer")
    parser.set_defaults(run=run)


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"invalid value {text!r}; accepted: an integer >= 0")
    return int(text)


def _start_offset(args: argparse.Namespace) -> int:
    """Where reading starts, as Kafka's ``ConsoleConsumerOptions`` decides it: an offset, or
    ``EARLIEST_TIMESTAMP``/``LATEST_TIMESTAMP``.

    Raises:
        UsageError: ``--offset`` without ``--partition`` or with ``--from-beginning``, or not an offset.
    """
    if args.offset is None:
        return EARLIEST_TIMESTAMP if args.from_beginning else LATEST_TIMESTAMP
    if args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if args.from_beginning:
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    named = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}.get(args.offset.lower())
    if named is not None:
        return named
    if not args.offset.isdigit():
        raise UsageError(
            f"The provided offset value '{args.offset}' is incorrect. Valid values are 'earliest', 'latest', or a "
            "non-negative long."
        )
    return int(args.offset)


def _config(args: argparse.Namespace, formatter: _Formatter) -> ConsumerConfig:
    """The consumer's config as Kafka's ``ConsoleConsumerOptions`` builds it: ``--consumer-property`` over the
    console consumer's defaults, then its options.

    Raises:
        UsageError: ``--group`` and ``group.id`` disagree, ``auto.offset.reset`` contradicts ``--from-beginning``,
            or a group with ``--partition``.
    """
    given = client_properties(args.consumer_property, "consumer")
    groups = {group for group in (args.group, given.get("group.id")) if group is not None}
    if len(groups) > 1:
        raise UsageError(
            "The group ids provided in different places (directly using '--group', via '--consumer-property') do "
            f"not match. Detected group ids: {', '.join(repr(group) for group in sorted(groups))}"
        )
    if groups and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    reset = given.get("auto.offset.reset")
    if reset is not None and args.from_beginning and reset != AutoOffsetReset.EARLIEST:
        raise UsageError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', please remove one option"
        )
    properties: dict[str, object] = {
        "client.id": "console-consumer",
        "max.poll.records": _MAX_POLL_RECORDS,
        "max.partition.fetch.bytes": FETCH_BYTES,
        "isolation.level": READ_UNCOMMITTED,
        **given,
        "auto.offset.reset": reset or (AutoOffsetReset.EARLIEST if args.from_beginning else AutoOffsetReset.LATEST),
        "include.headers": formatter.print_headers,  # decoding headers costs; only for printing them
    }
    if groups:
        properties["group.id"] = groups.pop()
    if args.isolation_level is not None:
        properties["isolation.level"] = args.isolation_level
    return ConsumerConfig.from_properties(properties)


def run(args: argparse.Namespace) -> int:
    formatter = _Formatter.from_properties(parse_properties(args.property, _FORMATTER_PROPERTIES))
    if args.partition is not None and args.topic is None:
        raise UsageError("The topic is required when partition is specified.")
    start = _start_offset(args)
    config = _config(args, formatter)
    logs = open_log_dir(args.log_dir)
    consumer = Consumer(logs, config)
    include = None if args.include is None else topic_filter(args.include)
    if config.group_id is not None:
        if include is None:
            consumer.subscribe([args.topic])
        else:
            consumer.subscribe(pattern=include.pattern)
    else:
        topics = [args.topic] if include is None else _included(logs, include, config.exclude_internal_topics)
        partitions = [
            TopicPartition(topic, p)
            for topic in topics
            for p in (range(logs.topics.get(topic).partitions) if args.partition is None else [args.partition])
        ]
        consumer.assign(partitions)
        _seek(consumer, partitions, start)
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None and args.timeout_ms >= 0 else None
    # Ctrl-C sets a flag the loop checks between polls, so a record is never printed without being counted.
    interrupted = StopSignals(signal.SIGINT)
    printed = _Printed()
    try:
        with interrupted:
            _consume(consumer, formatter, sys.stdout.buffer, args.max_messages, timeout_s, interrupted, printed)
    except BrokenPipeError:  # the reader went away (``| head``): Kafka's tool stops with this line
        print("Unable to write to standard out, closing consumer.", file=sys.stderr)
        raise
    finally:
        consumer.close()
        print(f"Processed a total of {printed.records} messages", file=sys.stderr)
    return EXIT_INTERRUPTED if interrupted.requested else 0


def _included(logs: LogDirectory, include: re.Pattern[str], exclude_internal: bool) -> list[str]:
    """The topics ``--include`` matches now, as a consumer's pattern subscription matches them."""
    return [
        name
        for name in logs.topics.names()
        if include.fullmatch(name) and not (exclude_internal and name in INTERNAL_TOPICS)
    ]


@dataclass(slots=True)
class _Printed:
    """How many records were printed, known also when printing stops with an error."""

    records: int = 0


def _seek(consumer: Consumer, partitions: list[TopicPartition], start: int) -> None:
    """Position manually assigned partitions where the options say; an offset outside the log is reset
    at the first poll (to the log start with ``--from-beginning``, else to the end)."""
    if start == EARLIEST_TIMESTAMP:
        consumer.seek_to_beginning(partitions)
    elif start == LATEST_TIMESTAMP:
        consumer.seek_to_end(partitions)
    else:
        for tp in partitions:
            consumer.seek(tp, start)


def _consume(
    consumer: Consumer,
    formatter: _Formatter,
    out: BinaryIO,
    max_messages: int | None,
    timeout_s: float | None,
    stop: StopSignals,
    printed: _Printed,
) -> None:
    """Poll and print until ``max_messages`` records are printed, none came for ``timeout_s``, or
    ``stop`` is requested, counting them in ``printed``."""
    last_record = time.monotonic()
    while not stop.requested and (max_messages is None or printed.records < max_messages):
        limit = _MAX_POLL_RECORDS if max_messages is None else max_messages - printed.records
        records = consumer.poll_arrow(max_records=limit)
        if records.num_rows:
            printed.records += records.num_rows  # before they are written, as Kafka's tool counts them
            for batch in records.to_batches():
                out.write(formatter.format(batch))
            out.flush()
            last_record = time.monotonic()
            continue
        idle = time.monotonic() - last_record
        if timeout_s is not None and idle >= timeout_s:
            break
        stop.wait(POLL_INTERVAL_S if timeout_s is None else min(POLL_INTERVAL_S, timeout_s - idle))


@dataclass(frozen=True, slots=True)
class _Formatter:
    """Kafka's ``DefaultMessageFormatter``, over whole Arrow batches."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> _Formatter:
        """From ``_FORMATTER_PROPERTIES``: the ``print.*`` ones are flags, the others bytes as typed."""
        fields: dict[str, Any] = {
            name.replace(".", "_"): is_true(value) if name.startswith("print.") else os.fsencode(value)
            for name, value in properties.items()
        }
        return cls(**fields)

    def format(self, batch: pa.RecordBatch) -> memoryview:
        """The printed lines of a batch's records, end to end."""
        fields: list[pa.Array] = []
        if self.print_timestamp:
            fields.append(_timestamps(batch))
        if self.print_partition:
            fields.append(_labelled(b"Partition:", batch.column("partition")))
        if self.print_offset:
            fields.append(_labelled(b"Offset:", batch.column("offset")))
        if self.print_headers:
            fields.append(self._headers(batch.column("headers")))
        if self.print_key:
            fields.append(batch.column("key").fill_null(self.null_literal))
        if self.print_value:
            fields.append(batch.column("value").fill_null(self.null_literal))
        if not fields:
            return memoryview(b"")
        joined = pc.binary_join_element_wise(*fields, self.key_separator)
        lines = pc.binary_join_element_wise(joined, b"", self.line_separator)
        offsets, _valid, data = binary_buffers(lines, "lines")
        return data[offsets[0] : offsets[-1]].data

    def _headers(self, headers: pa.ListArray) -> pa.Array:
        """``key:value`` pairs joined by ``headers.separator``, a null value as ``null.literal``; ``NO_HEADERS``
        for a record without headers."""
        entries = headers.values  # every entry of the column, which a slice's offsets index into
        keys = pc.struct_field(entries, "key").cast(pa.binary())
        values = pc.struct_field(entries, "value").fill_null(self.null_literal)
        pairs = pc.binary_join_element_wise(keys, values, b":")
        joined = pc.binary_join(pa.ListArray.from_arrays(headers.offsets, pairs), self.headers_separator)
        none = pc.equal(pc.list_value_length(headers).fill_null(0), 0)
        return pc.if_else(none, b"NO_HEADERS", joined)


def _labelled(label: bytes | pa.Array, numbers: pa.Array) -> pa.Array:
    """``<label><number>`` for each number, as ``Partition:0``; one label for all, or one each."""
    return pc.binary_join_element_wise(label, numbers.cast(pa.string()).cast(pa.binary()), b"")


def _timestamps(batch: pa.RecordBatch) -> pa.Array:
    """``<TimestampType>:<ms>``, or ``NO_TIMESTAMP`` for a record without a timestamp type."""
    types = batch.column("timestampType")
    names = pc.if_else(
        pc.equal(types, int(TimestampType.LOG_APPEND_TIME)),
        f"{TimestampType.LOG_APPEND_TIME.kafka_name}:".encode(),
        f"{TimestampType.CREATE_TIME.kafka_name}:".encode(),
    )
    stamped = _labelled(names, batch.column("timestamp").cast(pa.int64()))
    return pc.if_else(pc.equal(types, int(TimestampType.NO_TIMESTAMP_TYPE)), b"NO_TIMESTAMP", stamped)
