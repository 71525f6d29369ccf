"""Producer ids of one log directory: unique, never reused, also across crashes and processes.

An idempotent producer stamps every batch with its producer id, and a log tells a retried batch from
a new one by that id and the batch's sequence numbers. Two producers sharing an id would see each
other's batches as duplicates or gaps, so ids must never repeat. Kafka's controller guarantees that
by handing out blocks of ids from a record in its metadata log; here the log directory is the only
thing every producer shares, so the next free id lives in one small file there::

    pysparklog-producer-ids
    {"version": 1, "next_producer_id": 42}

Each allocation is a read-modify-write under the log directory's lock (``.lock``, the lock its
topic metadata is changed under; on an object store, a lease), so concurrent processes never get the
same id, and the file is replaced atomically and durably before the id is handed out: a crash leaves
the old content or the new, and an id handed out is stored first, so it is never handed out again.
The file is replaced only if it is still the version read, so an allocator that lost its lease while
it stalled fails instead of handing out an id another was given meanwhile. A crash may lose an id
that was reserved but not yet returned; ids are plentiful (int64), so that costs nothing.

Without the file (a new directory, or one whose file was lost: deleted, or restored without it) the
count starts above every id the directory still uses: the producer ids in each partition's latest
producer snapshot and in its active segment's batches (together, the producers whose batches a log
checks retries against) and in the transaction state files. Starting at 0 after a loss would hand
out ids that batches in the logs carry, and a new producer's batches would pass for retries of an
old one's, acknowledged and never written. A new directory holds no producer ids and starts at 0.
"""

from __future__ import annotations

import json
import os
import re

from pysparklog.errors import CorruptRecordError, InvalidLogDirectoryError, PySparkLogError
from pysparklog.storage.config import LONG_MAX
from pysparklog.storage.io import LOG_DIR_LOCK, FileSystemStorage, Storage, VersionedFile, storage_for
from pysparklog.storage.producer_state import SNAPSHOT_SUFFIX, decode_snapshot
from pysparklog.storage.segment import LogSegment, filename_prefix, parse_segment_name

PRODUCER_IDS_FILE = "pysparklog-producer-ids"
PRODUCER_IDS_VERSION = 1
_PARTITION_DIR = re.compile(r".+-\d+")
TXN_STATE_PREFIX = "pysparklog-txn."  # the transaction coordinator's state files (pysparklog.transactions)


def allocate_producer_id(log_dir: str | os.PathLike[str] | Storage) -> int:
    """A producer id no other call for this log directory has returned or will return; the first is 0.

    Args:
        log_dir: The log directory (its location or its storage); it must exist.

    Raises:
        InvalidLogDirectoryError: ``log_dir`` is not a directory, or a location no storage serves.
        CorruptRecordError: ``pysparklog-producer-ids`` is not this module's file (the message names it).
        PySparkLogError: Every id up to 2**63 - 1 has been handed out.
        MetadataChangedError: Another process changed the file while this one held the lock (it lost its lease
            while it stalled); no id was handed out.
    """
    storage = storage_for(log_dir)
    if not storage.is_directory(storage.join()):
        raise InvalidLogDirectoryError(f"log directory {storage.root} does not exist or is not a directory")
    path = storage.join(PRODUCER_IDS_FILE)
    lock = storage.lock(storage.join(LOG_DIR_LOCK))
    try:
        with lock.exclusive():
            storage.remove_interrupted_puts(path)
            stored = VersionedFile.read(storage, path)
            producer_id = _decode_next(stored.data, path)
            if producer_id is None:
                producer_id = _highest_in_use(storage) + 1
            if producer_id == LONG_MAX:
                raise PySparkLogError(f"every producer id up to {LONG_MAX} has been handed out ({path})")
            stored.write(json.dumps({"version": PRODUCER_IDS_VERSION, "next_producer_id": producer_id + 1}).encode())
            return producer_id
    finally:
        lock.close()


def _decode_next(data: bytes | None, path: str) -> int | None:
    """The next free id recorded in ``data``, the content of ``path``; None when there is no such file."""
    if data is None:
        return None
    try:
        document = json.loads(data)
        version, next_id = document["version"], document["next_producer_id"]
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptRecordError(f"not a pysparklog producer-id file: {error}", file=path, position=0) from None
    if version != PRODUCER_IDS_VERSION:
        raise CorruptRecordError(
            f"producer-id file version {version!r}, expected {PRODUCER_IDS_VERSION} (written by a newer pysparklog?)",
            file=path,
            position=0,
        )
    if isinstance(next_id, bool) or not isinstance(next_id, int) or not 0 <= next_id <= LONG_MAX:
        raise CorruptRecordError(
            f"next_producer_id {next_id!r} is not an integer from 0 to {LONG_MAX}", file=path, position=0
        )
    return next_id


def _highest_in_use(storage: Storage) -> int:
    """The largest producer id the directory's logs and transaction states use; -1 when none does."""
    highest = -1
    for name in storage.list(storage.join()):
        path = storage.join(name)
        if _PARTITION_DIR.fullmatch(name) and storage.is_directory(path):
            highest = max(highest, _highest_in_partition(storage, path))
        elif name.startswith(TXN_STATE_PREFIX) and name.endswith(".json"):
            try:
                highest = max(highest, int(json.loads(storage.read(path))["producer_id"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass  # an unreadable state is refused when its id is used; it hands out no id here
    return highest


def _highest_in_partition(storage: Storage, directory: str) -> int:
    """The largest producer id of a partition's latest readable snapshot and of its active segment's batches."""
    names = storage.list(directory)
    highest = -1
    snapshots = sorted(o for o in (parse_segment_name(n, SNAPSHOT_SUFFIX) for n in names) if o is not None)
    for offset in reversed(snapshots):
        path = storage.join(directory, filename_prefix(offset) + SNAPSHOT_SUFFIX)
        try:
            entries = decode_snapshot(storage.read(path), file=path)
        except (OSError, CorruptRecordError):
            continue
        highest = max((e.producer_id for e in entries), default=-1)
        break
    bases = sorted(b for b in (parse_segment_name(n) for n in names) if b is not None)
    if bases and isinstance(storage, FileSystemStorage):  # on an object store a partition is commits, not segments
        segment = LogSegment(directory, bases[-1], storage=storage)
        for chunk in segment.chunks(0, segment.size(), verify_crc=False, strict=False):
            if len(chunk.entries):
                highest = max(highest, int(chunk.entries.producer_ids.max()))
    return highest
