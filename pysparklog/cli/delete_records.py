"""``pysparklog delete-records``: Kafka's ``kafka-delete-records.sh`` (``DeleteRecordsCommand``) on a log directory.

Reads Kafka's offset JSON file::

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 3}], "version": 1}

and raises each partition's log start offset to ``offset`` (``-1``: the high watermark, which is
the log end offset here), so records below it can no longer be read; the next retention pass
(``pysparklog.storage.retention.run_retention``) deletes the segments wholly below it. It prints
what Kafka's tool prints::

    Executing records delete operation
    Records delete operation completed:
    partition: orders-0	low_watermark: 3

or, for a partition that failed, ``partition: orders-0<TAB>error: <Kafka's exception and message>``:
an offset above the high watermark (or negative) is ``OffsetOutOfRangeException``, a partition
that is not in the log directory ``UnknownTopicOrPartitionException``, a topic whose
``cleanup.policy`` lacks ``delete`` ``PolicyViolationException``, each with the message a Kafka
client shows for that error code.

Where Kafka's tool differs:

* ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces ``--bootstrap-server`` and
  ``--command-config``.
* Partitions are reported in the order of the JSON file (Kafka's tool follows a hash map).
* The command ends with status 1 when a partition failed (Kafka's tool ends with 0).
* A malformed entry is reported as ``Expected `<field>` to be <type>, found <value>``, not with
  Jackson's message.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from pysparklog.cli._common import UsageError, add_log_dir_argument, open_log_dir
from pysparklog.errors import InvalidOffsetError, PolicyViolationError, UnknownTopicError
from pysparklog.storage.log_dir import LogDirectory

# What a Kafka client shows for each error code (ExecutionException.getMessage of Errors.exception()).
OFFSET_OUT_OF_RANGE = (
    "org.apache.kafka.common.errors.OffsetOutOfRangeException: "
    "The requested offset is not within the range of offsets maintained by the server."
)
UNKNOWN_TOPIC_OR_PARTITION = (
    "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic-partition."
)
POLICY_VIOLATION = (
    "org.apache.kafka.common.errors.PolicyViolationException: Request parameters do not satisfy the configured policy."
)
_SUPPORTED_VERSION = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``delete-records`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "delete-records",
        help="delete records below an offset, as Kafka's kafka-delete-records.sh does",
        description="Raise the log start offset of the given partitions to the given offsets, as Kafka's "
        "kafka-delete-records.sh (DeleteRecordsCommand) does; retention then deletes the segments below it.",
    )
    add_log_dir_argument(parser)
    parser.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='the partitions and offsets: {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], '
        '"version": 1}; offset -1 means the high watermark',
    )
    parser.set_defaults(run=run)


def _field(entry: dict[str, Any], name: str, kind: type, kind_name: str) -> Any:
    """A field of the offset file, checked as Kafka's typed JSON decoders check it (no bool for an integer)."""
    if name not in entry:
        raise UsageError(f"No such field exists: `{name}`")
    value = entry[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UsageError(f"Expected `{name}` to be {kind_name}, found {json.dumps(value)}")
    return value


def parse_offset_json(text: str) -> list[tuple[str, int, int]]:
    """``(topic, partition, offset)`` of each entry of Kafka's offset JSON, in file order.

    Raises:
        UsageError: The file is not valid JSON, not version 1, lacks ``partitions``, has a malformed
            entry or names a partition twice.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise UsageError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise UsageError(f"Expected a JSON object, found {json.dumps(data)}")
    version = _field(data, "version", int, "an integer") if "version" in data else _SUPPORTED_VERSION
    if version != _SUPPORTED_VERSION:
        raise UsageError(f"Not supported version field value {version}")
    if "partitions" not in data:
        raise UsageError("Missing partitions field")
    partitions = _field(data, "partitions", list, "an array")
    entries = []
    for entry in partitions:
        if not isinstance(entry, dict):
            raise UsageError(f"Expected a partition object, found {json.dumps(entry)}")
        topic = _field(entry, "topic", str, "a string")
        entries.append(
            (topic, _field(entry, "partition", int, "an integer"), _field(entry, "offset", int, "an integer"))
        )
    duplicates = [f"{t}-{p}" for (t, p), n in Counter((t, p) for t, p, _ in entries).items() if n > 1]
    if duplicates:
        raise UsageError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return entries


def delete_records(logs: LogDirectory, topic: str, partition: int, offset: int) -> str:
    """Kafka's DeleteRecords for one partition: ``low_watermark: N`` or ``error: <Kafka's error>``."""
    try:
        low_watermark = logs.delete_records(topic, partition, offset)
    except UnknownTopicError:
        return f"error: {UNKNOWN_TOPIC_OR_PARTITION}"
    except PolicyViolationError:
        return f"error: {POLICY_VIOLATION}"
    except InvalidOffsetError:
        return f"error: {OFFSET_OUT_OF_RANGE}"
    return f"low_watermark: {low_watermark}"


def run(args: argparse.Namespace) -> int:
    # Bytes that are not UTF-8 read as U+FFFD, as Java reads them, and fail the JSON parse with Kafka's message.
    with open(args.offset_json_file, encoding="utf-8", errors="replace") as f:
        entries = parse_offset_json(f.read())
    logs = open_log_dir(args.log_dir)
    print("Executing records delete operation")
    results = [
        (f"{topic}-{partition}", delete_records(logs, topic, partition, offset)) for topic, partition, offset in entries
    ]
    print("Records delete operation completed:")
    for name, result in results:
        print(f"partition: {name}\t{result}")
    return 1 if any(result.startswith("error: ") for _, result in results) else 0
