"""Arrow in, Arrow out: record batches on disk to ``pyarrow.RecordBatch`` and back.

The columns are those of Spark's Kafka source (key, value, topic, partition, offset, timestamp,
timestampType, and headers on request), so the Spark adapter only renames nothing and casts the
timestamp unit. Decoding and encoding run in ``kernels``; Python works per batch, never per record.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import crc32c as _crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pysparklog.errors import CorruptRecordError, InvalidConfigError, InvalidRecordError
from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.codecs import CODEC_MASK, Codec, compress, decompress
from pysparklog.storage.records.default_records import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    TimestampType,
)
from pysparklog.storage.records.legacy_records import read_legacy_entry
from pysparklog.storage.records.memory_records import EntryTable, iter_runs, pool_empty

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
RECORD_SCHEMA = pa.schema(_BASE_FIELDS)
RECORD_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADER_TYPE)])

# The smallest v2 record: length, attributes, timestampDelta, offsetDelta, keyLength, valueLength,
# headerCount, one byte each. Bounds a batch's claimed record count before anything is allocated.
_MIN_RECORD_SIZE = 7

_DECODE_ERRORS = {
    k.ERR_VARINT: "a varint runs past its record or is longer than 10 bytes",
    k.ERR_RECORD_LENGTH: "a record length is negative or runs past the end of its batch",
    k.ERR_FIELD_LENGTH: "a key, value or header length is invalid or runs past the end of its record",
    k.ERR_COUNT: "the batch holds fewer records than its header's recordsCount",
    k.ERR_TRAILING: "bytes are left after the last record the batch header counts",
    k.ERR_RECORD_SIZE: "a record's fields do not add up to its length",
}


def record_schema(include_headers: bool) -> pa.Schema:
    return RECORD_SCHEMA_WITH_HEADERS if include_headers else RECORD_SCHEMA


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _binary(offsets: np.ndarray, valid: np.ndarray, data: np.ndarray, n: int, typ: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [_bitmap(valid[:n]), pa.py_buffer(offsets[: n + 1]), pa.py_buffer(data)])


def constant_string(value: str, n: int) -> pa.Array:
    """A string column holding ``value`` n times, built without a Python list."""
    raw = value.encode()
    offsets = pool_empty(n + 1, np.int32)
    np.multiply(np.arange(n + 1, dtype=np.int32), len(raw), out=offsets)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _constant_int32(value: int, n: int) -> pa.Array:
    column = pool_empty(n, np.int32)
    column.fill(value)
    return _fixed_width(column, pa.int32())


def _fixed_width(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """An Arrow column over ``values``' memory, without nulls. ``pa.array`` of a NumPy array would give the same
    column but imports pandas the first time (0.4 s, paid by every fresh Spark Python worker's first read)."""
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])


@dataclass(frozen=True, slots=True)
class _Sections:
    """Uncompressed record sections the kernel decodes, one per batch."""

    buf: np.ndarray
    start: np.ndarray
    end: np.ndarray
    entry_index: np.ndarray  # which entry each section came from, for error positions


def _record_sections(buf: np.ndarray, entries: EntryTable, file: str | None, base_position: int) -> _Sections:
    positions = entries.positions
    start = positions + RECORD_BATCH_OVERHEAD
    end = positions + entries.sizes
    codecs = entries.codecs
    compressed = np.flatnonzero(codecs != Codec.NONE)
    index = np.arange(len(entries))
    if len(compressed) == 0:
        return _Sections(buf, start, end, index)
    # Decompress each compressed batch and lay every section end to end in one new buffer.
    pieces: list[np.ndarray | bytes] = []
    new_start = np.empty(len(entries), dtype=np.int64)
    cursor = 0
    view = buf.data
    compressed_set = set(compressed.tolist())
    for i, (a, b) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        if i in compressed_set:
            where = base_position + int(positions[i])
            codec = Codec.from_attributes(int(entries.attributes[i]), file=file, position=where)
            piece: np.ndarray | bytes = decompress(codec, view[a:b], file=file, position=where)
        else:
            piece = buf[a:b]
        pieces.append(piece)
        new_start[i] = cursor
        cursor += len(piece)
    joined = np.frombuffer(b"".join(p.tobytes() if isinstance(p, np.ndarray) else p for p in pieces), np.uint8)
    new_end = np.append(new_start[1:], cursor)
    return _Sections(joined, new_start, new_end, index)


def _decode_v2(
    buf: np.ndarray,
    entries: EntryTable,
    *,
    topic: str,
    partition: int,
    include_headers: bool,
    file: str | None,
    base_position: int,
) -> pa.RecordBatch:
    sections = _record_sections(buf, entries, file, base_position)
    counts = entries.record_counts
    section_bytes = sections.end - sections.start
    bad = (counts < 0) | (counts * _MIN_RECORD_SIZE > section_bytes)
    if bad.any():
        i = int(np.argmax(bad))
        raise CorruptRecordError(
            f"recordsCount {int(counts[i])} cannot fit in {int(section_bytes[i])} bytes of records",
            file=file,
            position=base_position + int(entries.positions[i]),
        )
    n = int(counts.sum())
    data_bytes = int(section_bytes.sum())
    offsets = pool_empty(n, np.int64)
    timestamps = pool_empty(n, np.int64)
    key_offsets = pool_empty(n + 1, np.int32)
    key_valid = pool_empty(n, np.uint8)
    key_data = pool_empty(data_bytes, np.uint8)
    value_offsets = pool_empty(n + 1, np.int32)
    value_valid = pool_empty(n, np.uint8)
    value_data = pool_empty(data_bytes, np.uint8)
    if include_headers:
        n_headers, header_bytes = k.count_headers(sections.buf, sections.start, sections.end, counts)
        if n_headers < 0:
            # Malformed sections are reported by the decoder itself, which may first write the headers of
            # the records before the bad one: size for the most the sections can hold (2 bytes a header).
            n_headers, header_bytes = data_bytes // 2, data_bytes
    else:
        n_headers, header_bytes = 0, 0
    header_list_offsets = pool_empty(n + 1 if include_headers else 1, np.int32)
    header_key_offsets = pool_empty(n_headers + 1, np.int32)
    header_key_data = pool_empty(header_bytes, np.uint8)
    header_value_offsets = pool_empty(n_headers + 1, np.int32)
    header_value_valid = pool_empty(n_headers, np.uint8)
    header_value_data = pool_empty(header_bytes, np.uint8)
    decoded, error, section, position = k.decode_v2_records(
        sections.buf,
        sections.start,
        sections.end,
        counts,
        entries.base_offsets,
        entries.base_timestamps,
        entries.max_timestamps,
        entries.log_append_time,
        offsets,
        timestamps,
        key_offsets,
        key_valid,
        key_data,
        value_offsets,
        value_valid,
        value_data,
        include_headers,
        header_list_offsets,
        header_key_offsets,
        header_key_data,
        header_value_offsets,
        header_value_valid,
        header_value_data,
    )
    if error != k.OK:
        entry_pos = base_position + int(entries.positions[section])
        where = (
            f"byte {position - int(sections.start[section])} of its records"
            if sections.buf is not buf
            else f"file position {base_position + position}"
        )
        raise CorruptRecordError(
            f"{_DECODE_ERRORS[error]} (batch at offset {int(entries.base_offsets[section])}, {where})",
            file=file,
            position=entry_pos,
        )
    ts_types = np.where(entries.log_append_time, TimestampType.LOG_APPEND_TIME, TimestampType.CREATE_TIME)
    if len(ts_types) and (ts_types == ts_types[0]).all():
        ts_type = _constant_int32(int(ts_types[0]), n)  # the usual case: one type throughout
    else:
        ts_type = _fixed_width(np.repeat(ts_types.astype(np.int32), counts), pa.int32())
    columns = [
        _binary(key_offsets, key_valid, key_data[: key_offsets[n]], n, pa.binary()),
        _binary(value_offsets, value_valid, value_data[: value_offsets[n]], n, pa.binary()),
        constant_string(topic, n),
        _constant_int32(partition, n),
        _fixed_width(offsets, pa.int64()),
        _fixed_width(timestamps, TIMESTAMP_TYPE),
        ts_type,
    ]
    if include_headers:
        header_keys = _binary(
            header_key_offsets,
            np.ones(n_headers, np.uint8),
            header_key_data[: header_key_offsets[n_headers]],
            n_headers,
            pa.string(),
        )
        header_values = _binary(
            header_value_offsets,
            header_value_valid,
            header_value_data[: header_value_offsets[n_headers]],
            n_headers,
            pa.binary(),
        )
        structs = pa.StructArray.from_arrays([header_keys, header_values], fields=list(HEADER_TYPE.value_type))
        has_headers = np.diff(header_list_offsets) > 0
        columns.append(
            pa.Array.from_buffers(
                HEADER_TYPE, n, [_bitmap(has_headers), pa.py_buffer(header_list_offsets)], children=[structs]
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=record_schema(include_headers))


def _decode_legacy(
    buf: np.ndarray,
    entries: EntryTable,
    *,
    topic: str,
    partition: int,
    include_headers: bool,
    file: str | None,
    base_position: int,
) -> pa.RecordBatch:
    """Legacy messages are decoded per message: they exist only in segments written by old brokers."""
    view = buf.data
    records = [
        record
        for pos in entries.positions.tolist()
        for record in read_legacy_entry(view, pos, file=file, verify_crc=False, base_position=base_position).records
    ]
    n = len(records)
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        constant_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp if r.timestamp >= 0 else None for r in records], pa.int64()).cast(TIMESTAMP_TYPE),
        pa.array([int(r.timestamp_type) for r in records], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.nulls(n, HEADER_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=record_schema(include_headers))


def decode_entries(
    buf: np.ndarray,
    entries: EntryTable,
    *,
    topic: str,
    partition: int,
    include_headers: bool = False,
    file: str | None = None,
    base_position: int = 0,
) -> Iterator[pa.RecordBatch]:
    """Decode entries into Arrow record batches, in log order.

    A control batch decodes like a data batch, its control records' keys and values in ``key`` and
    ``value``; they are not user records, so readers of user records filter control batches out
    first (``EntryTable.is_control``). Checksums are the caller's to verify first
    (``memory_records.verify_crcs``).
    """
    for a, b, is_v2 in iter_runs(entries.magics):
        run = entries.select(slice(a, b))
        decode = _decode_v2 if is_v2 else _decode_legacy
        batch = decode(
            buf,
            run,
            topic=topic,
            partition=partition,
            include_headers=include_headers,
            file=file,
            base_position=base_position,
        )
        if batch.num_rows:
            yield batch


# ---------------------------------------------------------------------------------------------
# Encoding


@dataclass(frozen=True, slots=True)
class EncodedBatches:
    """Complete v2 batches laid end to end, ready to append.

    Attributes:
        data: The batches' bytes (base offsets 0: the log assigns offsets on append).
        positions: Start of each batch in ``data``.
        sizes: Size of each batch.
        record_counts: Records in each batch.
    """

    data: np.ndarray
    positions: np.ndarray
    sizes: np.ndarray
    record_counts: np.ndarray

    @property
    def num_records(self) -> int:
        return int(self.record_counts.sum())

    @property
    def num_batches(self) -> int:
        return len(self.positions)

    def __len__(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class _Columns:
    """Arrow columns reduced to the buffers the encoder kernel takes."""

    key_offsets: np.ndarray
    key_valid: np.ndarray
    key_data: np.ndarray
    value_offsets: np.ndarray
    value_valid: np.ndarray
    value_data: np.ndarray
    timestamps: np.ndarray
    has_headers: bool
    header_list_offsets: np.ndarray
    header_key_offsets: np.ndarray
    header_key_data: np.ndarray
    header_value_offsets: np.ndarray
    header_value_valid: np.ndarray
    header_value_data: np.ndarray

    def encode(
        self,
        start_row: int,
        end_row: int,
        max_batch_bytes: int,
        max_batch_records: int,
        attributes: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        plan: np.ndarray,
        offset_deltas: np.ndarray,
        out: np.ndarray,
        table: np.ndarray,
    ) -> tuple[int, int, int]:
        """``kernels.encode_v2_batches`` over these columns: the one place that lists them for it."""
        return k.encode_v2_batches(
            self.key_offsets,
            self.key_valid,
            self.key_data,
            self.value_offsets,
            self.value_valid,
            self.value_data,
            self.timestamps,
            self.has_headers,
            self.header_list_offsets,
            self.header_key_offsets,
            self.header_key_data,
            self.header_value_offsets,
            self.header_value_valid,
            self.header_value_data,
            start_row,
            end_row,
            max_batch_bytes,
            max_batch_records,
            attributes,
            producer_id,
            producer_epoch,
            base_sequence,
            plan,
            offset_deltas,
            out,
            table,
        )


_BINARY_TYPES = (pa.binary(), pa.string(), pa.large_binary(), pa.large_string())


def binary_buffers(arr: pa.Array, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, validity bytes, data) of a binary or string column, without copying the data.

    Raises:
        InvalidRecordError: The column is of another type.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type not in _BINARY_TYPES:
        raise InvalidRecordError(
            f"column {name!r} has type {arr.type}; accepted types are binary, string, large_binary, large_string"
        )
    offset_type = np.int64 if arr.type in (pa.large_binary(), pa.large_string()) else np.int32
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
    if arr.null_count == 0:
        valid = np.ones(len(arr), dtype=np.uint8)
    else:
        valid = np.asarray(arr.is_valid()).astype(np.uint8)
    return offsets, valid, data


def _timestamps_ms(column: pa.Array | None, n: int, now_ms: int) -> np.ndarray:
    if column is None:
        return np.full(n, now_ms, dtype=np.int64)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.timestamp("ms", tz=column.type.tz), safe=False).view(pa.int64())
    elif pa.types.is_integer(column.type):
        column = column.cast(pa.int64())
    else:
        raise InvalidRecordError(
            f"column 'timestamp' has type {column.type}; accepted types are timestamp (any unit) and "
            "integers holding milliseconds since the epoch"
        )
    return np.asarray(column.fill_null(now_ms), dtype=np.int64)


def _columns(batch: pa.RecordBatch, now_ms: int) -> _Columns:
    names = batch.schema.names
    n = batch.num_rows
    if "value" not in names:
        raise InvalidRecordError(f"a 'value' column is required; the columns given are {names}")
    value_offsets, value_valid, value_data = binary_buffers(batch.column("value"), "value")
    if "key" in names:
        key_offsets, key_valid, key_data = binary_buffers(batch.column("key"), "key")
    else:
        key_offsets, key_valid, key_data = np.zeros(n + 1, np.int32), np.zeros(n, np.uint8), np.empty(0, np.uint8)
    timestamps = _timestamps_ms(batch.column("timestamp") if "timestamp" in names else None, n, now_ms)
    empty32 = np.zeros(1, np.int32)
    empty8 = np.empty(0, np.uint8)
    if "headers" not in names or batch.column("headers").null_count == n:
        return _Columns(
            key_offsets,
            key_valid,
            key_data,
            value_offsets,
            value_valid,
            value_data,
            timestamps,
            False,
            empty32,
            empty32,
            empty8,
            empty32,
            empty8,
            empty8,
        )
    headers = batch.column("headers")
    if not (pa.types.is_list(headers.type) and pa.types.is_struct(headers.type.value_type)):
        raise InvalidRecordError(
            f"column 'headers' has type {headers.type}; accepted type is array<struct<key:string,value:binary>>"
        )
    # Nulls become empty lists; flatten() then honours the list array's own offset.
    list_offsets = np.asarray(pc.list_value_length(headers).fill_null(0), dtype=np.int32)
    header_list_offsets = np.concatenate(([0], np.cumsum(list_offsets, dtype=np.int32))).astype(np.int32)
    entries = headers.flatten()
    hk_offsets, _hk_valid, hk_data = binary_buffers(entries.field("key"), "headers.key")
    hv_offsets, hv_valid, hv_data = binary_buffers(entries.field("value"), "headers.value")
    return _Columns(
        key_offsets,
        key_valid,
        key_data,
        value_offsets,
        value_valid,
        value_data,
        timestamps,
        True,
        header_list_offsets,
        hk_offsets,
        hk_data,
        hv_offsets,
        hv_valid,
        hv_data,
    )


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """How the encoder groups and marks records.

    Attributes:
        codec: Compression of each batch's records.
        max_batch_bytes: A batch closes before the record that would take it past this (Kafka's
            ``batch.size``; a single larger record still gets a batch). A compressed batch is measured
            by its estimated compressed size, as Kafka's producer measures it (``CompressionEstimate``).
        batch_bytes_limit: The most a compressed batch's records may take before compression, whatever
            the estimate, so that no batch can pass the limits on a request or a batch (Kafka's
            ``max.request.size``, ``message.max.bytes``); a compressed batch that still comes out
            larger is cut again by its uncompressed size. Never below ``max_batch_bytes``.
        max_batch_records: At most this many records per batch.
        timestamp_type: CreateTime keeps the given timestamps; LogAppendTime marks the batch so
            the log stamps it on append.
        producer_id: Idempotent producer id, or -1.
        producer_epoch: Its epoch, or -1.
        base_sequence: Sequence of the first record, or -1; later batches continue from it.
        transactional: Mark the batches as part of a transaction.
        control: Mark the batches as control batches; ``encode_control_batch`` writes them as
            Kafka does, one control record each. A control batch carries no sequence.
    """

    codec: Codec = Codec.NONE
    max_batch_bytes: int = 1024 * 1024
    batch_bytes_limit: int = 1024 * 1024
    max_batch_records: int = 1 << 20
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    transactional: bool = False
    control: bool = False

    def __post_init__(self) -> None:
        if self.max_batch_bytes < RECORD_BATCH_OVERHEAD:
            raise InvalidConfigError(
                f"max_batch_bytes is {self.max_batch_bytes}; it must be at least {RECORD_BATCH_OVERHEAD}"
            )
        if not 1 <= self.max_batch_records <= 2**31 - 1:
            raise InvalidConfigError(f"max_batch_records is {self.max_batch_records}; accepted: 1 to 2147483647")
        if self.transactional and self.producer_id < 0:
            raise InvalidConfigError("a transactional batch needs a producer id >= 0")
        if self.control and self.base_sequence != NO_SEQUENCE:
            raise InvalidConfigError(f"a control batch carries no sequence; base_sequence is {self.base_sequence}")

    @property
    def attributes(self) -> int:
        attributes = int(self.codec)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.control:
            attributes |= CONTROL_FLAG_MASK
        return attributes


_ENCODE_CHUNK_BYTES = 16 * 1024 * 1024
_NO_PLAN = np.empty((0, k.PLAN_FIELDS), dtype=np.int64)  # the encoder groups the rows itself
_NO_OFFSET_DELTAS = np.empty(0, dtype=np.int64)
_PER_RECORD_OVERHEAD = 36  # the largest varints a record can carry besides its data
_PER_HEADER_OVERHEAD = 10  # the largest key and value length varints of a header


def _max_batches(rows: int, records_bytes: int, batch_bytes: int, settings: BatchSettings) -> int:
    """At most how many batches ``rows`` records of at most ``records_bytes`` bytes in all make.

    A batch ends after ``max_batch_records`` records, after the last row, or when its next record
    would take it past ``batch_bytes``: then its records and that next one hold more than
    ``batch_bytes`` less a header, and as no record counts more than twice, fewer than
    ``2 * records_bytes`` / that many batches end so.
    """
    room = batch_bytes - RECORD_BATCH_OVERHEAD
    if room <= 0:
        return rows
    return min(rows, rows // settings.max_batch_records + 2 * records_bytes // room + 1)


def _finish(out: np.ndarray, table: np.ndarray, used: int) -> EncodedBatches:
    """Compress and checksum the batches the kernel wrote.

    Each batch is compressed with the codec its attributes name, so batches of different codecs (a
    segment the cleaner rewrites) are finished together.
    """
    positions, sizes, counts = table[:, 0].copy(), table[:, 1].copy(), table[:, 3].copy()
    # The codec bits are in the low byte of the big-endian attributes.
    codecs = out[positions + ATTRIBUTES_OFFSET + 1] & CODEC_MASK
    if codecs.any():
        pieces: list[bytes | bytearray | memoryview] = []
        cursor = 0
        for i, (pos, size, codec) in enumerate(zip(positions.tolist(), sizes.tolist(), codecs.tolist(), strict=True)):
            header = bytearray(out[pos : pos + RECORD_BATCH_OVERHEAD].tobytes())
            records = out.data[pos + RECORD_BATCH_OVERHEAD : pos + size]
            body = compress(Codec(codec), records) if codec != Codec.NONE else records
            new_size = RECORD_BATCH_OVERHEAD + len(body)
            header[LENGTH_OFFSET : LENGTH_OFFSET + 4] = (new_size - LOG_OVERHEAD).to_bytes(4, "big")
            pieces += [header, body]
            positions[i] = cursor
            sizes[i] = new_size
            cursor += new_size
        out = np.frombuffer(bytearray().join(pieces), dtype=np.uint8)
        used = cursor
    else:
        out = out[:used]
    view = out.data
    for pos, size in zip(positions.tolist(), sizes.tolist(), strict=True):
        crc = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
        view[pos + CRC_OFFSET : pos + CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return EncodedBatches(out, positions, sizes, counts)


#: Kafka's ``MemoryRecordsBuilder.COMPRESSION_RATE_ESTIMATION_FACTOR``: the margin its estimate of a
#: compressed batch's size adds to the estimated ratio.
_COMPRESSION_MARGIN = 1.05


@dataclass(slots=True)
class CompressionEstimate:
    """How much a codec shrinks a stream's records: compressed / uncompressed bytes of a batch's records.

    Kafka's producer keeps such an estimate per topic and codec (``CompressionRatioEstimator``) and
    closes a compressed batch once its records, at that ratio plus 5 %, would fill ``batch.size``, so
    its batches hold about ``batch.size`` compressed bytes. ``encode_arrow`` does the same with whole
    chunks: before the first, the ratio is measured on a sample of the records (a batch of them
    compressed); each chunk encoded then sets it to the ratio its batches had. A caller that keeps
    the estimate across calls (the producer, per topic) spares the sample.

    Attributes:
        ratio: The estimate, or None before anything was measured.
    """

    ratio: float | None = None

    def batch_bytes(self, max_batch_bytes: int, limit: int) -> int:
        """The uncompressed size at which a batch's estimated compressed size reaches ``max_batch_bytes``
        (``batch.size``), within ``limit``; ``max_batch_bytes`` itself before anything was measured."""
        if self.ratio is None:
            return max_batch_bytes
        records = (max_batch_bytes - RECORD_BATCH_OVERHEAD) / max(self.ratio * _COMPRESSION_MARGIN, 1e-6)
        return min(RECORD_BATCH_OVERHEAD + int(records), max(limit, max_batch_bytes))

    def observe(self, records_bytes: np.ndarray, compressed_bytes: np.ndarray) -> None:
        """Take the ratio of batches just compressed (their records' sizes before and after); the last
        batch counts only when it is the only one, as a short last batch compresses worse."""
        if len(records_bytes) > 1:
            records_bytes, compressed_bytes = records_bytes[:-1], compressed_bytes[:-1]
        total = int(records_bytes.sum())
        if total > 0:
            self.ratio = int(compressed_bytes.sum()) / total


def _sample_ratio(cols: _Columns, row: int, end_row: int, settings: BatchSettings, batch_bytes: int) -> float:
    """The compression ratio of one batch of ``batch_bytes`` from ``row`` on, encoded and compressed
    (and dropped): what a batch of that size makes of these records."""
    out, _table, _next, used = _encode_batches(
        cols, row, end_row, settings, batch_bytes, NO_SEQUENCE, batch_bytes + RECORD_BATCH_OVERHEAD, 1
    )
    records = out.data[RECORD_BATCH_OVERHEAD:used]
    return len(compress(settings.codec, records)) / max(len(records), 1)


def _measure(estimate: CompressionEstimate, cols: _Columns, row: int, end_row: int, settings: BatchSettings) -> None:
    """A first estimate from the records themselves: a batch of ``batch.size`` uncompressed bytes, then
    one of the size that ratio gives (a larger batch compresses better), each compressed once."""
    estimate.ratio = _sample_ratio(cols, row, end_row, settings, settings.max_batch_bytes)
    larger = estimate.batch_bytes(settings.max_batch_bytes, settings.batch_bytes_limit)
    if larger > settings.max_batch_bytes:
        estimate.ratio = _sample_ratio(cols, row, end_row, settings, larger)


def _records_bytes(cols: _Columns, row: int, end_row: int) -> int:
    """At most how many bytes rows ``[row, end_row)`` take as records, before compression."""
    data_bytes = (
        int(cols.key_offsets[end_row] - cols.key_offsets[row])
        + int(cols.value_offsets[end_row] - cols.value_offsets[row])
        + (len(cols.header_key_data) + len(cols.header_value_data) if cols.has_headers else 0)
    )
    lists = cols.header_list_offsets
    n_headers = int(lists[end_row] - lists[row]) if cols.has_headers else 0
    return data_bytes + (end_row - row) * _PER_RECORD_OVERHEAD + n_headers * _PER_HEADER_OVERHEAD


def _encode_chunk(
    cols: _Columns, row: int, end_row: int, settings: BatchSettings, batch_bytes: int, sequence: int
) -> tuple[EncodedBatches, np.ndarray, int]:
    """Rows from ``row`` on as batches of at most ``batch_bytes`` before compression, up to about 16 MiB.

    Returns:
        (the batches, each one's size before compression, the first row left).
    """
    remaining = end_row - row
    records_bytes = _records_bytes(cols, row, end_row)
    # Room for every batch's header, so that a chunk ends early only at _ENCODE_CHUNK_BYTES.
    max_batches = _max_batches(remaining, records_bytes, batch_bytes, settings)
    estimate = records_bytes + max_batches * RECORD_BATCH_OVERHEAD
    capacity = max(min(estimate, _ENCODE_CHUNK_BYTES), batch_bytes + RECORD_BATCH_OVERHEAD)
    out, table, next_row, used = _encode_batches(
        cols, row, end_row, settings, batch_bytes, sequence, capacity, max_batches
    )
    uncompressed = table[:, 1].copy()
    return _finish(out, table, used), uncompressed, next_row


def _encode_batches(
    cols: _Columns,
    row: int,
    end_row: int,
    settings: BatchSettings,
    batch_bytes: int,
    sequence: int,
    capacity: int,
    max_batches: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The kernel's uncompressed batches from ``row`` on into a buffer of ``capacity`` bytes (more when a
    record does not fit in it), at most ``max_batches`` of them.

    Returns:
        (the buffer, the table of its batches, the first row left, the bytes used).
    """
    while True:
        out = pool_empty(capacity, np.uint8)
        table = np.empty((min(max_batches, capacity // RECORD_BATCH_OVERHEAD), 4), dtype=np.int64)
        next_row, n_batches, used = cols.encode(
            row,
            end_row,
            batch_bytes,
            settings.max_batch_records,
            settings.attributes,
            settings.producer_id,
            settings.producer_epoch,
            sequence,
            _NO_PLAN,
            _NO_OFFSET_DELTAS,
            out,
            table,
        )
        if n_batches:
            return out, table[:n_batches], next_row, used
        capacity *= 2  # one record larger than the buffer: make room for it


def encode_arrow(
    data: pa.Table | pa.RecordBatch,
    settings: BatchSettings | None = None,
    *,
    now_ms: int | None = None,
    estimate: CompressionEstimate | None = None,
) -> Iterator[EncodedBatches]:
    """Encode Arrow rows as v2 record batches.

    Columns: ``value`` (binary or string, required), ``key``, ``timestamp`` (timestamp or int64
    milliseconds; null means now), ``headers`` (list of struct<key: string, value: binary>).
    Other columns are ignored. Output comes in chunks of about 16 MiB so memory stays bounded.

    Args:
        data: The rows.
        settings: How batches are made.
        now_ms: The timestamp of rows without one (default: now).
        estimate: The codec's compression ratio on these records, kept by a caller that encodes
            more of them later and updated here (default: measured on a sample); unused without
            compression.

    Raises:
        InvalidRecordError: A column is missing or has a type the encoder does not accept.
    """
    settings = settings or BatchSettings()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    compressed = settings.codec != Codec.NONE
    estimate = estimate or CompressionEstimate()
    sequence = settings.base_sequence
    batches = data.to_batches() if isinstance(data, pa.Table) else [data]
    for batch in batches:
        if batch.num_rows == 0:
            continue
        cols = _columns(batch, now)
        row, end_row = 0, batch.num_rows
        while row < end_row:
            if not compressed:
                encoded, _sizes, next_row = _encode_chunk(
                    cols, row, end_row, settings, settings.max_batch_bytes, sequence
                )
            else:
                room = settings.max_batch_bytes - RECORD_BATCH_OVERHEAD
                if estimate.ratio is None and _records_bytes(cols, row, end_row) > room:
                    _measure(estimate, cols, row, end_row, settings)  # else they make one batch whatever the ratio
                batch_bytes = estimate.batch_bytes(settings.max_batch_bytes, settings.batch_bytes_limit)
                encoded, sizes, next_row = _encode_chunk(cols, row, end_row, settings, batch_bytes, sequence)
                if batch_bytes > settings.max_batch_bytes and int(encoded.sizes.max()) > settings.batch_bytes_limit:
                    # The records compressed far worse than the estimate said: cut them by their own size.
                    batch_bytes = settings.max_batch_bytes
                    encoded, sizes, next_row = _encode_chunk(cols, row, end_row, settings, batch_bytes, sequence)
                estimate.observe(sizes - RECORD_BATCH_OVERHEAD, encoded.sizes - RECORD_BATCH_OVERHEAD)
            if sequence >= 0:
                sequence = (sequence + encoded.num_records) % 2**31
            row = next_row
            yield encoded


def encode_planned(records: pa.RecordBatch, plan: np.ndarray, offsets: np.ndarray) -> EncodedBatches:
    """Encode batches whose layout the caller decides, as the cleaner rewrites the batches it filtered.

    Each row of ``plan`` (columns ``kernels.P_*``) is one batch: its base offset, last offset delta,
    base and max timestamps, attributes (codec included: the batch is compressed with it), producer
    fields and partition leader epoch, and how many of ``records`` it holds. The plan's rows take
    the records in order, so the first row of each batch is where the previous one ended; a batch
    of 0 records is a header-only batch. ``offsets`` gives each record's absolute offset, which
    becomes its offset delta from its batch's base offset: offsets are kept, never renumbered.

    Args:
        records: The records (``key``, ``value``, ``timestamp``, ``headers``), as ``decode_entries``
            gives them.
        plan: int64 array of shape (batches, ``kernels.PLAN_FIELDS``).
        offsets: int64 offset of each record.

    Returns:
        The batches, checksummed, in plan order.
    """
    counts = plan[:, k.P_RECORDS]
    if int(counts.sum()) != records.num_rows or len(offsets) != records.num_rows:
        raise ValueError(f"the plan holds {int(counts.sum())} records for {records.num_rows} rows")
    plan = plan.copy()
    plan[:, k.P_FIRST_ROW] = np.cumsum(counts) - counts
    offset_deltas = offsets - np.repeat(plan[:, k.P_BASE_OFFSET], counts)
    cols = _columns(records, 0)  # decoded records always carry their timestamps
    data_bytes = len(cols.key_data) + len(cols.value_data) + len(cols.header_key_data) + len(cols.header_value_data)
    n_headers = int(cols.header_list_offsets[-1]) if cols.has_headers else 0
    capacity = (
        data_bytes
        + records.num_rows * _PER_RECORD_OVERHEAD
        + n_headers * _PER_HEADER_OVERHEAD
        + len(plan) * RECORD_BATCH_OVERHEAD
    )
    out = pool_empty(capacity, np.uint8)
    table = np.empty((len(plan), 4), dtype=np.int64)
    _next, n_batches, used = cols.encode(
        0,
        len(plan),
        0,
        0,
        0,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        plan,
        offset_deltas,
        out,
        table,
    )
    assert n_batches == len(plan), "the capacity is an upper bound of the encoded size"
    return _finish(out, table, used)


def encode_control_batch(
    key: bytes, value: bytes, settings: BatchSettings | None = None, *, now_ms: int | None = None
) -> EncodedBatches:
    """One control batch holding one control record, as a broker writes it.

    Kafka gives each control record (an end-transaction marker from
    ``default_records.end_txn_marker``, a KRaft leader change...) a batch of its own, marked
    control and without a sequence (``MemoryRecords.withEndTransactionMarker``). ``settings``
    gives the producer id and epoch and whether the batch is transactional, as an end-transaction
    marker's is; the record's timestamp is ``now_ms`` (default: now).

    Raises:
        InvalidConfigError: ``settings`` has a base sequence.
    """
    record = pa.table(
        {
            "key": pa.array([key], pa.binary()),
            "value": pa.array([value], pa.binary()),
            "timestamp": pa.array([now_ms], pa.int64()),
        }
    )
    (encoded,) = encode_arrow(record, replace(settings or BatchSettings(), control=True), now_ms=now_ms)
    return encoded
