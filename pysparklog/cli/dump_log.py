"""``pysparklog dump-log``: what Kafka's ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``) prints.

People and scripts that debug Kafka logs know that tool's lines, so this command prints the same
lines, byte for byte, for the same files (``tests/cli`` compares it with Kafka 4.2.0's tool) and
works alike on a broker's log directory and on pysparklog's. Everything is read through the
storage engine, so a file this command dumps is a file the engine reads.

Files are dumped by suffix: ``.log`` (batches, and records with ``--deep-iteration``),
``.index`` and ``.timeindex`` (entries, each checked against the ``.log`` next to it),
``.snapshot`` (producer state) and ``.txnindex`` (aborted transactions). Like Kafka's tool it
reports index mismatches and offset gaps on stderr after the last file.

Where Kafka's tool differs:

* Control records of the KRaft snapshot and voter types (SnapshotHeader, SnapshotFooter,
  KRaftVersion, KRaftVoters) print ``controlType: NAME(id)``, not Kafka's JSON; end-transaction
  markers and LeaderChange records print as Kafka prints them.
* KRaft snapshots (``.checkpoint``) are not dumped: they are reported as unknown files.
* ``.log``, ``.index`` and ``.timeindex`` files must have Kafka's names, ``<20-digit base
  offset><suffix>``; Kafka's tool takes any number before the first dot.
* Where Kafka's tool dies with a Java exception (a corrupt size field, a missing ``.log``, an index
  entry past the end of the log), this command prints the same lines up to that point and then
  one error line. A batch with a magic above 2, which Kafka reads as magic 2, is such an error.
* A ``.timeindex`` without its ``.index`` is checked as if the ``.index`` were empty; Kafka's tool
  creates the missing file. This command never writes.
* Findings about several files are reported in the order of ``--files``; Kafka's follow a hash map.
* A ``.txnindex`` entry's version is read as the int16 Kafka writes; Kafka's tool reads its first
  byte only (``AbortedTxn.version()``), so it prints 0 for version 1.
* A ``.log`` ending in exactly 17 bytes whose size field is below 14: Kafka's tool counts them as
  invalid trailing bytes, the engine's walk (``kernels.scan_entries``) as a corrupt entry.
* Not implemented: ``--offsets-decoder``, ``--cluster-metadata-decoder``,
  ``--transaction-log-decoder``, ``--remote-log-metadata-decoder``, ``--key-decoder-class``,
  ``--value-decoder-class``, ``--skip-record-metadata`` and ``--max-message-size``.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.config import INT_MAX
from pysparklog.storage.index import OffsetIndex, TimeIndex, TransactionIndex
from pysparklog.storage.io import read_if_exists
from pysparklog.storage.producer_state import SNAPSHOT_SUFFIX, ProducerSnapshotEntry, decode_snapshot
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import (
    MAGIC_V2,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlRecordType,
    TimestampType,
    control_record_type,
    control_record_type_id,
    parse_end_txn_marker_value,
    parse_leader_change_value,
)
from pysparklog.storage.records.legacy_records import entry_timestamp_type, read_legacy_entry
from pysparklog.storage.records.memory_records import entry_crc_error
from pysparklog.storage.segment import LOG_SUFFIX, Chunk, LogSegment, parse_segment_name
from pysparklog.storage.segment_indexes import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX

RECORD_INDENT = "|"
#: Sequence numbers are Java ints that wrap from Int.MaxValue to 0.
_SEQUENCE_MODULUS = 2**31
#: Bytes read at an index entry's position to find the batch there (a larger batch is read whole).
_BATCH_PROBE_BYTES = 64 * 1024
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
_JAVA_UTF8_ERRORS = "pysparklog.java-utf8"


def _java_utf8_replace(error: UnicodeError) -> tuple[str, int]:
    """Replace undecodable bytes with U+FFFD where Java's ``new String(bytes, UTF_8)`` does.

    Python and Java agree on every malformed sequence but an encoded surrogate (``ED A0..BF``,
    then a continuation byte or not): Java replaces it as one sequence, Python byte by byte.
    """
    if not isinstance(error, UnicodeDecodeError):
        raise error
    data, start, end = error.object, error.start, error.end
    if data[start] == 0xED and start + 1 < len(data) and 0xA0 <= data[start + 1] <= 0xBF:
        end = start + 3 if start + 2 < len(data) and 0x80 <= data[start + 2] <= 0xBF else start + 2
    return "\ufffd", end


codecs.register_error(_JAVA_UTF8_ERRORS, _java_utf8_replace)


def _java_string(data: bytes) -> str:
    """Bytes as Kafka's ``StringDecoder`` prints them."""
    return data.decode("utf-8", _JAVA_UTF8_ERRORS)


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _java_optional_long(value: int, present: bool) -> str:
    return f"OptionalLong[{value}]" if present else "OptionalLong.empty"


def _java_path(name: str) -> str:
    """A path as Java's ``File`` prints it: repeated slashes collapsed, no trailing slash."""
    collapsed = re.sub("/+", "/", name)
    return collapsed.rstrip("/") or collapsed


def _absolute(path: str) -> str:
    """Java's ``File.getAbsolutePath``: relative paths joined to the working directory, not normalised."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _suffix(path: str) -> str:
    """From the last dot of the file name on, which is what Kafka's tool dispatches on."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 else ""


def _segment(path: str) -> LogSegment:
    """The segment a ``.log``, ``.index`` or ``.timeindex`` file belongs to (``_file_list`` checked its name)."""
    base_offset = parse_segment_name(os.path.basename(path), _suffix(path))
    assert base_offset is not None
    return LogSegment(os.path.dirname(path), base_offset)


# -- arguments -----------------------------------------------------------------------------------


def _file_list(value: str) -> list[str]:
    """``--files``: comma-separated, a trailing comma ignored as Java's ``split`` ignores it."""
    names = value.split(",")
    while names and not names[-1]:
        names.pop()
    if not names or not all(names):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of file names, got {value!r}")
    for name in names:
        suffix = _suffix(name)
        if suffix in _SEGMENT_SUFFIXES and parse_segment_name(os.path.basename(name), suffix) is None:
            raise argparse.ArgumentTypeError(
                f"{name} is not a segment file name: expected <20-digit base offset>{suffix}"
            )
    return [_java_path(name) for name in names]


def _max_bytes(value: str) -> int:
    try:
        limit = int(value)
    except ValueError:
        limit = -1
    if not 0 <= limit <= INT_MAX:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {INT_MAX}, got {value!r}")
    return limit


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dump-log`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "dump-log",
        help="print log segments, indexes and producer snapshots as Kafka's kafka-dump-log.sh does",
        description="Print the contents of log segment, index, time index, transaction index and producer "
        "snapshot files in the format of Kafka's kafka-dump-log.sh (DumpLogSegments).",
    )
    parser.add_argument(
        "--files",
        required=True,
        type=_file_list,
        metavar="FILE[,FILE...]",
        help="comma-separated .log, .index, .timeindex, .txnindex and .snapshot files",
    )
    parser.add_argument(
        "--print-data-log", action="store_true", help="print record keys and values (implies --deep-iteration)"
    )
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the check a broker runs on startup to decide whether to rebuild an index",
    )
    parser.add_argument(
        "--verify-index-only", action="store_true", help="check index entries against the log without printing them"
    )
    parser.add_argument(
        "--max-bytes", type=_max_bytes, default=INT_MAX, metavar="N", help="read at most N bytes of each .log file"
    )
    parser.set_defaults(run=run)


@dataclass(frozen=True, slots=True)
class _Options:
    """The command line, with ``--print-data-log`` implying ``--deep-iteration`` as in Kafka's tool."""

    print_data: bool
    deep_iteration: bool
    index_sanity_check: bool
    verify_index_only: bool
    max_bytes: int


@dataclass(slots=True)
class _Findings:
    """What Kafka's tool reports on stderr once every file is dumped, by absolute file path."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offset_gaps: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @staticmethod
    def add(by_file: dict[str, list[tuple[int, int]]], path: str, pair: tuple[int, int]) -> None:
        """Note ``pair`` under ``path`` as Kafka's tool names files in its report: absolute."""
        by_file.setdefault(_absolute(path), []).append(pair)

    def report(self) -> None:
        """Print the findings in Kafka's order and words; it prepends index mismatches and offset gaps to
        lists, so those come out last first."""
        for path, pairs in self.index_mismatches.items():
            _error(f"Mismatches in :{path}")
            for index_offset, log_offset in reversed(pairs):
                _error(f"  Index offset: {index_offset}, log offset: {log_offset}")
        for path, pairs in self.time_mismatches.items():
            _error(f"Found timestamp mismatch in :{path}")
            for index_timestamp, log_timestamp in pairs:
                _error(f"  Index timestamp: {index_timestamp}, log timestamp: {log_timestamp}")
        for path, pairs in self.time_out_of_order.items():
            _error(f"Found out of order timestamp in :{path}")
            for index_timestamp, previous in pairs:
                _error(f"  Index timestamp: {index_timestamp}, Previously indexed timestamp: {previous}")
        for pairs in self.time_not_found.values():
            _error("The following indexed offsets are not found in the log.")
            for index_offset, log_offset in pairs:
                _error(f"Indexed offset: {index_offset}, found log offset: {log_offset}")
        for path, pairs in self.offset_gaps.items():
            _error(f"Non-consecutive offsets in {path}")
            for first, second in reversed(pairs):
                _error(f"  {first} is followed by {second}")


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _error(line: str) -> None:
    sys.stderr.write(line + "\n")


def run(args: argparse.Namespace) -> int:
    """Dump each file in turn, then report what the index checks and deep iteration found."""
    options = _Options(
        print_data=args.print_data_log,
        deep_iteration=args.deep_iteration or args.print_data_log,
        index_sanity_check=args.index_sanity_check,
        verify_index_only=args.verify_index_only,
        max_bytes=args.max_bytes,
    )
    findings = _Findings()
    for path in args.files:
        _out(f"Dumping {path}")
        dump = _DUMPERS.get(_suffix(path))
        if dump is None:
            _error(f"Ignoring unknown file {path}")
            continue
        dump(path, options, findings)
    findings.report()
    return 0


# -- .log ----------------------------------------------------------------------------------------


class _Batch(NamedTuple):
    """What the record lines of a batch need from it."""

    magic: int
    timestamp_type: TimestampType
    base_offset: int
    base_sequence: int
    is_control: bool


class _Record(NamedTuple):
    """One record as the dump prints it; ``legacy_check`` is a magic 0/1 message's (is valid, CRC)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    header_keys: list[bytes]
    legacy_check: tuple[bool, int] | None


def _chunks(segment: LogSegment, end: int) -> Iterator[Chunk]:
    """The segment's entries up to ``end``; at a corrupt entry, every entry before it, then the error.

    ``LogSegment.chunks`` raises at the first chunk holding a corrupt entry; Kafka's tool prints
    the batches before it first, so the entries between the last whole chunk and the corrupt one
    are walked again.
    """
    position = 0
    try:
        for chunk in segment.chunks(0, end, verify_crc=False):
            yield chunk
            position = chunk.position + chunk.entries.stop_position
    except CorruptRecordError as error:
        if error.position is not None and error.position > position:
            yield from segment.chunks(position, error.position, verify_crc=False)
        raise


def _crc_failures(chunk: Chunk) -> set[int]:
    """The chunk's entries whose checksum is wrong: Kafka's tool prints them ``isvalid: false`` and goes on."""
    failures = set()
    start = 0
    while (bad := entry_crc_error(chunk.buf, chunk.entries.select(slice(start, None)))) >= 0:
        failures.add(start + bad)
        start += bad + 1
    return failures


def _records(chunk: Chunk, i: int, path: str) -> list[_Record]:
    """The records of entry ``i`` of ``chunk``: a v2 batch's through the Arrow decoder (control records
    included), a legacy entry's through the legacy reader (a wrapper's inner messages)."""
    position = int(chunk.entries.positions[i])
    if int(chunk.entries.magics[i]) < MAGIC_V2:
        entry = read_legacy_entry(chunk.buf.data, position, file=path, verify_crc=False, base_position=chunk.position)
        return [_Record(r.offset, r.timestamp, r.key, r.value, [], (r.is_valid, r.crc)) for r in entry.records]
    records = []
    for batch in decode_entries(
        chunk.buf,
        chunk.entries.select(slice(i, i + 1)),
        topic="",
        partition=0,
        include_headers=True,
        file=path,
        base_position=chunk.position,
    ):
        headers = batch.column("headers")
        header_counts = pc.list_value_length(headers).fill_null(0).to_pylist()
        header_keys = iter(pc.struct_field(headers.flatten(), "key").cast(pa.binary()).to_pylist())
        columns = zip(
            batch.column("offset").to_pylist(),
            batch.column("timestamp").cast(pa.int64()).to_pylist(),
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            header_counts,
            strict=True,
        )
        for offset, timestamp, key, value, count in columns:
            records.append(_Record(offset, timestamp, key, value, [next(header_keys) for _ in range(count)], None))
    return records


def _batch_line(chunk: Chunk, i: int, position: int, valid: bool, path: str) -> tuple[str, _Batch]:
    """Kafka's ``printBatchLevel`` line for entry ``i``, and what its record lines need."""
    entries = chunk.entries
    magic, attributes = int(entries.magics[i]), int(entries.attributes[i])
    codec = Codec.from_attributes(attributes, file=path, position=position)
    if magic >= MAGIC_V2:
        header = BatchHeader.parse(chunk.buf.data, int(entries.positions[i]))
        batch = _Batch(magic, header.timestamp_type, header.base_offset, header.base_sequence, header.is_control)
        head = (
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {_java_bool(header.is_transactional)} isControl: {_java_bool(header.is_control)} "
            f"deleteHorizonMs: {_java_optional_long(header.delete_horizon_ms, header.has_delete_horizon)}"
        )
    else:
        batch = _Batch(magic, entry_timestamp_type(magic, attributes), int(entries.base_offsets[i]), NO_SEQUENCE, False)
        head = f"offset: {int(entries.base_offsets[i])}"  # a legacy entry's offset is its last offset
    line = (
        f"{head} position: {position} {batch.timestamp_type.kafka_name}: {int(entries.max_timestamps[i])} "
        f"size: {int(entries.sizes[i])} magic: {magic} compresscodec: {codec.kafka_name} crc: {int(entries.crcs[i])} "
        f"isvalid: {_java_bool(valid)}"
    )
    return line, batch


def _control_record(record: _Record) -> str:
    """What Kafka's tool prints about a control record, after its metadata."""
    control_type = control_record_type(record.key)
    if control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        coordinator_epoch = parse_end_txn_marker_value(record.value)
        return f" endTxnMarker: {control_type.name} coordinatorEpoch: {coordinator_epoch}"
    if control_type is ControlRecordType.LEADER_CHANGE:
        change = parse_leader_change_value(record.value)
        message = {
            "version": change.version,
            "leaderId": change.leader_id,
            "voters": [{"voterId": voter} for voter in change.voters],
            "grantingVoters": [{"voterId": voter} for voter in change.granting_voters],
        }
        return f" LeaderChange: {json.dumps(message, separators=(',', ':'))}"
    return f" controlType: {control_type.name}({control_record_type_id(record.key)})"


def _record_line(batch: _Batch, record: _Record, print_data: bool) -> str:
    """Kafka's record line: metadata, then the sequence (v2), CRC (legacy), control record or data."""
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    parts = [
        f"{RECORD_INDENT} offset: {record.offset} {batch.timestamp_type.kafka_name}: {record.timestamp} "
        f"keySize: {key_size} valueSize: {value_size}"
    ]
    if batch.magic >= MAGIC_V2:
        sequence = (
            NO_SEQUENCE
            if batch.base_sequence == NO_SEQUENCE
            else (batch.base_sequence + record.offset - batch.base_offset) % _SEQUENCE_MODULUS
        )
        header_keys = ",".join(_java_string(key) for key in record.header_keys)
        parts.append(f" sequence: {sequence} headerKeys: [{header_keys}]")
    if record.legacy_check is not None:
        is_valid, crc = record.legacy_check
        parts.append(f" isValid: {_java_bool(is_valid)} crc: {crc}}}")  # Kafka's stray brace
    if batch.is_control:
        parts.append(_control_record(record))
    elif print_data:
        if record.key is not None:
            parts.append(f" key: {_java_string(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {_java_string(record.value)}")
    return "".join(parts)


def _dump_log(path: str, options: _Options, findings: _Findings) -> None:
    segment = _segment(path)
    _out(f"Log starting offset: {segment.base_offset}")
    end = min(segment.size(), options.max_bytes)
    valid_bytes = 0
    last_offset = -1
    for chunk in _chunks(segment, end):
        crc_failures = _crc_failures(chunk)
        for i, size in enumerate(chunk.entries.sizes.tolist()):
            line, batch = _batch_line(chunk, i, valid_bytes, i not in crc_failures, path)
            _out(line)
            if options.deep_iteration:
                for record in _records(chunk, i, path):
                    if last_offset != -1 and record.offset != last_offset + 1:
                        findings.add(findings.offset_gaps, path, (last_offset, record.offset))
                    last_offset = record.offset
                    _out(_record_line(batch, record, options.print_data))
            valid_bytes += size
    trailing = end - valid_bytes
    if trailing > 0 and options.max_bytes == INT_MAX:
        _out(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")


# -- indexes -------------------------------------------------------------------------------------


def _batch_at(segment: LogSegment, position: int, end: int) -> Chunk:
    """The entry that starts at ``position`` (an index entry's), alone or with those after it.

    Raises:
        CorruptRecordError: No whole entry starts there.
    """
    chunk = next(segment.chunks(position, end, max_bytes=_BATCH_PROBE_BYTES, verify_crc=False), None)
    if chunk is None:
        raise CorruptRecordError(
            f"an index entry points to position {position}, where no record batch starts (the log has {end} bytes)",
            file=segment.log_path,
            position=position,
        )
    return chunk


def _dump_offset_index(path: str, options: _Options, findings: _Findings) -> None:
    segment = _segment(path)
    log_size = segment.size()  # Kafka's tool opens the log first: a missing one fails here
    index = OffsetIndex.parse(read_if_exists(segment.storage, path), segment.base_offset)
    if len(index) == 0:
        _out(f"{path} is empty.")
        return
    if options.index_sanity_check:
        OffsetIndex.sanity_check(read_if_exists(segment.storage, path), _absolute(path), segment.base_offset)
        _out(f"{path} passed sanity check.")
        return
    for offset, position in zip(index.offsets.tolist(), index.positions.tolist(), strict=True):
        log_offset = int(_batch_at(segment, position, log_size).entries.last_offsets[0])
        if log_offset != offset:
            findings.add(findings.index_mismatches, path, (offset, log_offset))
        if not options.verify_index_only:
            _out(f"offset: {offset} position: {position}")


def _dump_time_index(path: str, options: _Options, findings: _Findings) -> None:
    segment = _segment(path)
    log_size = segment.size()
    if options.index_sanity_check:
        TimeIndex.sanity_check(read_if_exists(segment.storage, path), _absolute(path), segment.base_offset)
        _out(f"{path} passed sanity check.")
        return
    time_index = TimeIndex.parse(read_if_exists(segment.storage, path), segment.base_offset, keep_zero_entry=True)
    previous = NO_TIMESTAMP
    for timestamp, offset in zip(time_index.timestamps.tolist(), time_index.offsets.tolist(), strict=True):
        found = segment.translate_offset(offset, log_size)
        if found is None:
            findings.add(findings.time_not_found, path, (offset, -1))
        elif found[1] != offset:
            findings.add(findings.time_not_found, path, (offset, found[1]))
        else:
            records = _records(_batch_at(segment, found[0], log_size), 0, segment.log_path)
            log_timestamp = max([NO_TIMESTAMP, *(record.timestamp for record in records)])
            if log_timestamp != timestamp:
                findings.add(findings.time_mismatches, path, (timestamp, log_timestamp))
            if previous >= timestamp:
                findings.add(findings.time_out_of_order, path, (timestamp, previous))
        if not options.verify_index_only:
            _out(f"timestamp: {timestamp} offset: {offset}")
        previous = timestamp


def _dump_txn_index(path: str, options: _Options, findings: _Findings) -> None:
    index = TransactionIndex.parse(read_if_exists(_segment(path).storage, path), _absolute(path))
    rows = zip(
        index.versions.tolist(),
        index.producer_ids.tolist(),
        index.first_offsets.tolist(),
        index.last_offsets.tolist(),
        index.last_stable_offsets.tolist(),
        strict=True,
    )
    for version, producer_id, first_offset, last_offset, last_stable_offset in rows:
        _out(
            f"version: {version} producerId: {producer_id} firstOffset: {first_offset} lastOffset: {last_offset} "
            f"lastStableOffset: {last_stable_offset}"
        )


# -- producer snapshots --------------------------------------------------------------------------


def _snapshot_line(entry: ProducerSnapshotEntry) -> str:
    """Kafka's line for a ``ProducerStateEntry``; the batch part only when the producer wrote a batch."""
    has_txn = entry.current_txn_first_offset >= 0
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} "
        f"currentTxnFirstOffset: {_java_optional_long(entry.current_txn_first_offset, has_txn)} "
        f"lastTimestamp: {entry.timestamp} "
    )
    if entry.last_offset >= 0:
        first_sequence = (entry.last_sequence - entry.offset_delta) % _SEQUENCE_MODULUS
        line += (
            f"firstSequence: {first_sequence} lastSequence: {entry.last_sequence} lastOffset: {entry.last_offset} "
            f"offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}"
        )
    return line


def _dump_snapshot(path: str, options: _Options, findings: _Findings) -> None:
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = decode_snapshot(data, file=path)
    except CorruptRecordError as error:
        _error(error.detail)  # Kafka's tool reports a corrupt snapshot and goes on
        return
    for entry in entries:
        _out(_snapshot_line(entry))


_DUMPERS: dict[str, Callable[[str, _Options, _Findings], None]] = {
    LOG_SUFFIX: _dump_log,
    INDEX_SUFFIX: _dump_offset_index,
    TIME_INDEX_SUFFIX: _dump_time_index,
    TXN_INDEX_SUFFIX: _dump_txn_index,
    SNAPSHOT_SUFFIX: _dump_snapshot,
}
