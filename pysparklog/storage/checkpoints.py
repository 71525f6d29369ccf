"""Kafka's small text files, read and written in Kafka's own formats.

Checkpoint files (``CheckpointFile.java``)::

    <version>\\n<count>\\n<entry>\\n...      entries split on whitespace

    recovery-point-offset-checkpoint, log-start-offset-checkpoint, cleaner-offset-checkpoint,
    replication-offset-checkpoint: version 0, entry "<topic> <partition> <offset>"
    leader-epoch-checkpoint (per partition): version 0, entry "<epoch> <startOffset>"

``partition.metadata`` (``PartitionMetadata.encode``)::

    version: 0\\ntopic_id: <22-char base64url Uuid>        (no trailing newline)

Every file is read and written whole through the log directory's storage (``Storage.put`` is atomic
and durable), so a crash leaves the old or the new content, never a mix. Every reader refuses a file
it cannot parse with ``CorruptRecordError`` naming it (bytes that are not UTF-8, a wrong header, count or entry); what
the storage engine does then is in ``docs/guarantees.md`` ("What recovery does").
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.io import Storage, read_if_exists

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
PARTITION_METADATA_VERSION = 0


def _read_text(storage: Storage, path: str) -> str | None:
    """The file's text; None when it is absent.

    Raises:
        CorruptRecordError: The bytes are not UTF-8.
    """
    data = read_if_exists(storage, path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptRecordError(
            f"bytes that are not UTF-8 text ({error.reason})", file=path, position=error.start
        ) from None


def _read_lines(storage: Storage, path: str) -> list[list[str]] | None:
    """The entry lines of a checkpoint file split on whitespace; None when the file is absent or empty."""
    text = _read_text(storage, path)
    if text is None:
        return None
    lines = text.split("\n")
    if not text.strip():
        return None
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (ValueError, IndexError):
        raise CorruptRecordError("checkpoint header is not '<version>\\n<count>\\n'", file=path, position=0) from None
    if version != CHECKPOINT_VERSION:
        raise CorruptRecordError(f"checkpoint version {version}, expected {CHECKPOINT_VERSION}", file=path, position=0)
    entries = [line.split() for line in lines[2 : 2 + count]]
    if len(entries) != count or any(not e for e in entries):
        raise CorruptRecordError(f"checkpoint declares {count} entries but holds {len(entries)}", file=path)
    return entries


def _format(entries: list[str]) -> bytes:
    return f"{CHECKPOINT_VERSION}\n{len(entries)}\n{''.join(e + chr(10) for e in entries)}".encode()


def _integers(path: str, fields: list[str], what: str) -> list[int]:
    """The fields as integers, or CorruptRecordError naming the entry and the form ``what`` expected."""
    try:
        return [int(field) for field in fields]
    except ValueError:
        raise CorruptRecordError(f"checkpoint entry {' '.join(fields)!r} is not '{what}'", file=path) from None


def read_offset_checkpoint(storage: Storage, path: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from a log-dir level checkpoint file; empty when absent.

    Raises:
        CorruptRecordError: The file is not a checkpoint of that form.
    """
    result = {}
    for fields in _read_lines(storage, path) or []:
        what = "<topic> <partition> <offset>"
        if len(fields) != 3:
            raise CorruptRecordError(f"checkpoint entry {' '.join(fields)!r} is not '{what}'", file=path)
        partition, offset = _integers(path, fields[1:], what)
        result[(fields[0], partition)] = offset
    return result


def write_offset_checkpoint(storage: Storage, path: str, offsets: Mapping[tuple[str, int], int]) -> None:
    storage.put(path, _format([f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]))


def read_leader_epoch_checkpoint(storage: Storage, path: str) -> list[tuple[int, int]]:
    """``[(epoch, start offset)]`` of a partition's ``leader-epoch-checkpoint``; empty when absent.

    Raises:
        CorruptRecordError: The file is not a checkpoint of that form.
    """
    entries = []
    for fields in _read_lines(storage, path) or []:
        what = "<epoch> <start offset>"
        if len(fields) != 2:
            raise CorruptRecordError(f"checkpoint entry {' '.join(fields)!r} is not '{what}'", file=path)
        epoch, start = _integers(path, fields, what)
        entries.append((epoch, start))
    return entries


def write_leader_epoch_checkpoint(storage: Storage, path: str, entries: list[tuple[int, int]]) -> None:
    storage.put(path, _format([f"{e} {o}" for e, o in entries]))


def topic_id_text(raw: bytes) -> str:
    """A topic id's 16 bytes in Kafka's ``Uuid.toString`` form: 22 base64url characters, no padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def new_topic_id() -> str:
    """A random topic id in Kafka's ``Uuid.toString`` form."""
    while True:
        raw = uuid.uuid4().bytes
        text = topic_id_text(raw)
        # Kafka reserves the zero UUID and ids starting with '-' (they read as command-line flags).
        if not text.startswith("-") and raw != bytes(16):
            return text


def read_partition_metadata(storage: Storage, path: str) -> str | None:
    """The topic id in ``partition.metadata``, or None when the file is absent.

    Raises:
        CorruptRecordError: The file is not of that form.
    """
    text = _read_text(storage, path)
    if text is None:
        return None
    fields = dict(line.split(": ", 1) for line in text.split("\n") if ": " in line)
    if fields.get("version") != str(PARTITION_METADATA_VERSION) or "topic_id" not in fields:
        raise CorruptRecordError(
            f"expected 'version: {PARTITION_METADATA_VERSION}\\ntopic_id: <id>', found {text!r}", file=path, position=0
        )
    return fields["topic_id"].strip()


def write_partition_metadata(storage: Storage, path: str, topic_id: str) -> None:
    storage.put(path, f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id}".encode())
