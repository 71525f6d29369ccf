"""Compiled kernels for the bulk paths: walking entries, decoding v2 records into Arrow buffers and
encoding Arrow buffers into v2 records.

Per-record Python objects and the garbage collector dominate any Python decoder, so these loops
are numba kernels (compiled ahead of time into the package's extension, see ``pysparklog.compiled``)
and write straight into preallocated NumPy arrays that become Arrow buffers.
Every read checks its bounds: corrupt input yields an error code and a position, never a crash.
The layouts are documented in ``default_records.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from pysparklog.compiled import bind, intrinsic, kernel

if TYPE_CHECKING:
    from numba import types

# Columns of the entry table ``scan_entries`` fills, one row per entry (batch or legacy message).
E_POSITION = 0
E_SIZE = 1  # whole entry, LOG_OVERHEAD included
E_BASE_OFFSET = 2
E_MAGIC = 3
E_ATTRIBUTES = 4
E_LAST_OFFSET_DELTA = 5
E_BASE_TIMESTAMP = 6
E_MAX_TIMESTAMP = 7
E_PRODUCER_ID = 8
E_PRODUCER_EPOCH = 9
E_BASE_SEQUENCE = 10
E_RECORDS_COUNT = 11
E_PARTITION_LEADER_EPOCH = 12
E_CRC = 13
ENTRY_FIELDS = 14

# Why ``scan_entries`` stopped.
STOP_END = 0  # every byte up to ``end`` belongs to a complete entry
STOP_INCOMPLETE = 1  # the bytes after the last complete entry do not hold a whole entry
STOP_BAD_SIZE = 2  # an entry's size field is below Kafka's minimum
STOP_MAX_ENTRIES = 3  # the table is full; call again from the returned position

# Error codes of the record decoder.
OK = 0
ERR_VARINT = 1  # a varint runs past its record or is longer than 10 bytes
ERR_RECORD_LENGTH = 2  # a record's length is negative or runs past its batch
ERR_FIELD_LENGTH = 3  # a key, value or header length is invalid or runs past its record
ERR_COUNT = 4  # the batch holds fewer records than its header says
ERR_TRAILING = 5  # bytes are left in a batch after its last record
ERR_RECORD_SIZE = 6  # a record's fields do not add up to its length

_HEADER_SIZE_UP_TO_MAGIC = 17
_LOG_OVERHEAD = 12
_MIN_ENTRY_SIZE_FIELD = 14
_V2_HEADER = 61


@intrinsic
def _memcpy(
    typingctx: Any, dst: types.Type, dst_pos: types.Type, src: types.Type, src_pos: types.Type, n: types.Type
) -> tuple[Any, Callable[..., Any]] | None:
    """``memcpy`` between contiguous uint8 arrays; no bounds checks (``_copy`` makes them)."""
    from numba import types  # only where kernels are compiled: a process that runs the extension has no numba
    from numba.core import cgutils

    for arr in (dst, src):
        if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1 and arr.layout == "C"):
            return None
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        dst_data = context.make_array(signature.args[0])(context, builder, args[0]).data
        src_data = context.make_array(signature.args[2])(context, builder, args[2]).data
        cgutils.raw_memcpy(  # type: ignore[no-untyped-call]
            builder, builder.gep(dst_data, [args[1]]), builder.gep(src_data, [args[3]]), args[4], 1
        )
        return context.get_dummy_value()

    return sig, codegen


@kernel(cache=True, inline="always")
def _copy(dst: np.ndarray, dst_pos: int, src: np.ndarray, src_pos: int, n: int) -> None:
    """``dst[dst_pos:dst_pos+n] = src[src_pos:src_pos+n]``: slice assignment costs more than the
    copy itself for the short keys and values of records, so this is a checked ``memcpy``."""
    if n < 0 or dst_pos < 0 or src_pos < 0 or n > dst.shape[0] - dst_pos or n > src.shape[0] - src_pos:
        raise IndexError("copy out of the bounds of its arrays")
    _memcpy(dst, dst_pos, src, src_pos, n)


@kernel(cache=True, inline="always")
def _be64(buf: np.ndarray, p: int) -> int:
    v = 0
    for i in range(8):
        v = (v << 8) | np.int64(buf[p + i])
    return v


@kernel(cache=True, inline="always")
def _be32(buf: np.ndarray, p: int) -> int:
    v = (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])
    return v - (1 << 32) if v >= (1 << 31) else v


@kernel(cache=True, inline="always")
def _be32u(buf: np.ndarray, p: int) -> int:
    return (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])


@kernel(cache=True, inline="always")
def _be16(buf: np.ndarray, p: int) -> int:
    v = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    return v - (1 << 16) if v >= (1 << 15) else v


@kernel("u1[::1], i8, i8, i8[:, ::1]", cache=True)
def scan_entries(buf: np.ndarray, start: int, end: int, table: np.ndarray) -> tuple[int, int, int]:
    """Walk the entries in ``buf[start:end]`` and describe each in a row of ``table``.

    Follows Kafka's ``FileLogInputStream.nextBatch``: fewer than 17 bytes left, or an entry that
    runs past ``end``, is an incomplete tail; a size field under 14 is corrupt.

    Returns:
        (entries found, position where the walk stopped, STOP_* reason)
    """
    pos = start
    n = 0
    capacity = table.shape[0]
    while True:
        if pos >= end:
            return n, pos, STOP_END
        if end - pos <= _HEADER_SIZE_UP_TO_MAGIC:  # Kafka: position >= end - 17 ends the walk
            return n, pos, STOP_INCOMPLETE
        if n >= capacity:
            return n, pos, STOP_MAX_ENTRIES
        size_field = _be32(buf, pos + 8)
        if size_field < _MIN_ENTRY_SIZE_FIELD:
            return n, pos, STOP_BAD_SIZE
        size = size_field + _LOG_OVERHEAD
        if size > end - pos:
            return n, pos, STOP_INCOMPLETE
        magic = np.int64(buf[pos + 16])
        row = table[n]
        row[E_POSITION] = pos
        row[E_SIZE] = size
        row[E_BASE_OFFSET] = _be64(buf, pos)
        row[E_MAGIC] = magic
        if magic >= 2 and size >= _V2_HEADER:
            row[E_PARTITION_LEADER_EPOCH] = _be32(buf, pos + 12)
            row[E_CRC] = _be32u(buf, pos + 17)
            row[E_ATTRIBUTES] = _be16(buf, pos + 21)
            row[E_LAST_OFFSET_DELTA] = _be32(buf, pos + 23)
            row[E_BASE_TIMESTAMP] = _be64(buf, pos + 27)
            row[E_MAX_TIMESTAMP] = _be64(buf, pos + 35)
            row[E_PRODUCER_ID] = _be64(buf, pos + 43)
            row[E_PRODUCER_EPOCH] = _be16(buf, pos + 51)
            row[E_BASE_SEQUENCE] = _be32(buf, pos + 53)
            row[E_RECORDS_COUNT] = _be32(buf, pos + 57)
        else:
            # Legacy message (or a v2 entry too short to hold its header, which the caller rejects).
            row[E_PARTITION_LEADER_EPOCH] = -1
            row[E_CRC] = _be32u(buf, pos + 12)
            row[E_ATTRIBUTES] = np.int64(buf[pos + 17]) if size > 17 else 0
            row[E_LAST_OFFSET_DELTA] = 0  # a legacy wrapper's offset is its last inner offset
            # magic 1 carries a timestamp after the attributes; a wrapper's is its inner maximum
            row[E_BASE_TIMESTAMP] = _be64(buf, pos + 18) if magic == 1 and size >= 26 else -1
            row[E_MAX_TIMESTAMP] = row[E_BASE_TIMESTAMP]
            row[E_PRODUCER_ID] = -1
            row[E_PRODUCER_EPOCH] = -1
            row[E_BASE_SEQUENCE] = -1
            row[E_RECORDS_COUNT] = 1
        n += 1
        pos += size


@kernel(cache=True, inline="always")
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag varint (or varlong) at ``pos``; returns (value, next position), next = -1 on error.

    Lengths and deltas of ordinary records take one or two bytes: those skip the general loop.
    """
    if end - pos >= 2:
        b0 = int(buf[pos])
        if b0 < 0x80:
            return (b0 >> 1) ^ -(b0 & 1), pos + 1
        b1 = int(buf[pos + 1])
        if b1 < 0x80:
            raw = (b0 & 0x7F) | (b1 << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    return _varint_long(buf, pos, end)


@kernel(cache=True)
def _varint_long(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """``_varint`` of any length up to 10 bytes."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    while True:
        if pos >= end or shift > np.uint64(63):
            return 0, -1
        b = np.uint64(buf[pos])
        pos += 1
        raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            break
        shift += np.uint64(7)
    value = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
    return value, pos


@kernel("u1[::1], i8[:], i8[:], i8[:]", cache=True)
def count_headers(
    buf: np.ndarray, sec_start: np.ndarray, sec_end: np.ndarray, sec_count: np.ndarray
) -> tuple[int, int]:
    """Count the headers in the given record sections, to size the header buffers exactly.

    Returns:
        (number of headers, or -1 when the sections are malformed; bytes of header keys and values)
    """
    headers = 0
    header_bytes = 0
    for b in range(sec_start.shape[0]):
        pos = sec_start[b]
        end = sec_end[b]
        for _ in range(sec_count[b]):
            length, pos = _varint(buf, pos, end)
            if pos < 0 or length < 0 or length > end - pos:
                return -1, 0
            rec_end = pos + length
            p = pos + 1
            _, p = _varint(buf, p, rec_end)  # timestamp delta
            if p < 0:
                return -1, 0
            _, p = _varint(buf, p, rec_end)  # offset delta
            if p < 0:
                return -1, 0
            for _field in range(2):  # key, value
                flen, p = _varint(buf, p, rec_end)
                if p < 0 or flen > rec_end - p:
                    return -1, 0
                if flen > 0:
                    p += flen
            hcount, p = _varint(buf, p, rec_end)
            # Each header takes at least two bytes (key and value lengths): this bounds the allocation.
            if p < 0 or hcount < 0 or hcount > (rec_end - p) // 2:
                return -1, 0
            headers += hcount
            header_bytes += rec_end - p
            pos = rec_end
    return headers, header_bytes


@kernel(cache=True, inline="always")
def _take_field(
    buf: np.ndarray, pos: int, end: int, out_valid: np.ndarray, out_data: np.ndarray, out_pos: int, i: int
) -> tuple[int, int]:
    """Read the nullable length-prefixed field at ``pos`` into row ``i`` of (validity, data).

    Returns:
        (position after the field, or -1 when its length is invalid or runs past ``end``; next data position)
    """
    length, pos = _varint(buf, pos, end)
    if pos < 0 or length < -1 or length > end - pos:
        return -1, out_pos
    if length < 0:
        out_valid[i] = 0
        return pos, out_pos
    out_valid[i] = 1
    _copy(out_data, out_pos, buf, pos, length)
    return pos + length, out_pos + length


@kernel(
    "u1[::1], i8[:], i8[:], i8[:], i8[:], i8[:], i8[:], b1[:], i8[::1], i8[::1], i4[::1], u1[::1], u1[::1], i4[::1], "
    "u1[::1], u1[::1], b1, i4[::1], i4[::1], u1[::1], i4[::1], u1[::1], u1[::1]",
    cache=True,
    nogil=True,
)
def decode_v2_records(
    buf: np.ndarray,
    sec_start: np.ndarray,
    sec_end: np.ndarray,
    sec_count: np.ndarray,
    sec_base_offset: np.ndarray,
    sec_base_timestamp: np.ndarray,
    sec_max_timestamp: np.ndarray,
    sec_log_append_time: np.ndarray,
    out_offset: np.ndarray,
    out_timestamp: np.ndarray,
    key_offsets: np.ndarray,
    key_valid: np.ndarray,
    key_data: np.ndarray,
    value_offsets: np.ndarray,
    value_valid: np.ndarray,
    value_data: np.ndarray,
    want_headers: bool,
    header_list_offsets: np.ndarray,
    header_key_offsets: np.ndarray,
    header_key_data: np.ndarray,
    header_value_offsets: np.ndarray,
    header_value_valid: np.ndarray,
    header_value_data: np.ndarray,
) -> tuple[int, int, int, int]:
    """Decode the records of uncompressed v2 record sections into Arrow-layout buffers.

    Each section ``b`` is ``buf[sec_start[b]:sec_end[b]]`` holding ``sec_count[b]`` records. Keys and
    values go to (offsets, validity bytes, data) triples; headers, when wanted, to a list of
    (key, value) structs.

    Returns:
        (records decoded, error code, index of the failing section, position of the failure)
    """
    n = 0
    kp = 0
    vp = 0
    h = 0
    hkp = 0
    hvp = 0
    key_offsets[0] = 0
    value_offsets[0] = 0
    if want_headers:
        header_list_offsets[0] = 0
        header_key_offsets[0] = 0
        header_value_offsets[0] = 0
    for b in range(sec_start.shape[0]):
        pos = sec_start[b]
        end = sec_end[b]
        base_offset = sec_base_offset[b]
        base_ts = sec_base_timestamp[b]
        append_time = sec_log_append_time[b]
        max_ts = sec_max_timestamp[b]
        for _ in range(sec_count[b]):
            if pos >= end:
                return n, ERR_COUNT, b, pos
            record_start = pos
            length, pos = _varint(buf, pos, end)
            if pos < 0:
                return n, ERR_VARINT, b, record_start
            if length < 1 or length > end - pos:
                return n, ERR_RECORD_LENGTH, b, record_start
            rec_end = pos + length
            pos += 1  # record attributes, unused
            ts_delta, pos = _varint(buf, pos, rec_end)
            if pos < 0:
                return n, ERR_VARINT, b, record_start
            offset_delta, pos = _varint(buf, pos, rec_end)
            if pos < 0:
                return n, ERR_VARINT, b, record_start
            out_offset[n] = base_offset + offset_delta
            out_timestamp[n] = max_ts if append_time else base_ts + ts_delta

            pos, kp = _take_field(buf, pos, rec_end, key_valid, key_data, kp, n)
            if pos < 0:
                return n, ERR_FIELD_LENGTH, b, record_start
            key_offsets[n + 1] = kp
            pos, vp = _take_field(buf, pos, rec_end, value_valid, value_data, vp, n)
            if pos < 0:
                return n, ERR_FIELD_LENGTH, b, record_start
            value_offsets[n + 1] = vp

            hcount, pos = _varint(buf, pos, rec_end)
            if pos < 0 or hcount < 0:
                return n, ERR_FIELD_LENGTH, b, record_start
            if want_headers:
                for _h in range(hcount):
                    hk, pos = _varint(buf, pos, rec_end)
                    if pos < 0 or hk < 0 or hk > rec_end - pos:
                        return n, ERR_FIELD_LENGTH, b, record_start
                    _copy(header_key_data, hkp, buf, pos, hk)
                    hkp += hk
                    pos += hk
                    header_key_offsets[h + 1] = hkp
                    pos, hvp = _take_field(buf, pos, rec_end, header_value_valid, header_value_data, hvp, h)
                    if pos < 0:
                        return n, ERR_FIELD_LENGTH, b, record_start
                    header_value_offsets[h + 1] = hvp
                    h += 1
                header_list_offsets[n + 1] = h
                if pos != rec_end:
                    return n, ERR_RECORD_SIZE, b, record_start
            pos = rec_end
            n += 1
        if pos != end:
            return n, ERR_TRAILING, b, pos
    return n, OK, 0, 0


@kernel(cache=True, inline="always")
def _varint_size(v: int) -> int:
    raw = np.uint64((v << 1) ^ (v >> 63))
    size = 1
    while raw >= np.uint64(0x80):
        raw >>= np.uint64(7)
        size += 1
    return size


@kernel(cache=True, inline="always")
def _put_varint(out: np.ndarray, pos: int, v: int) -> int:
    raw = np.uint64((v << 1) ^ (v >> 63))
    while raw >= np.uint64(0x80):
        out[pos] = np.uint8((raw & np.uint64(0x7F)) | np.uint64(0x80))
        raw >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(raw)
    return pos + 1


@kernel(cache=True, inline="always")
def _put_be(out: np.ndarray, pos: int, v: int, width: int) -> None:
    for i in range(width):
        out[pos + width - 1 - i] = np.uint8((v >> (8 * i)) & 0xFF)


@kernel(cache=True, inline="always")
def _field_size(length: int) -> int:
    """Bytes of a length-prefixed field; -1 is null (the length alone)."""
    return 1 if length < 0 else _varint_size(length) + length


@kernel(cache=True, inline="always")
def _headers_size(
    row: int,
    header_list_offsets: np.ndarray,
    header_key_offsets: np.ndarray,
    header_value_offsets: np.ndarray,
    header_value_valid: np.ndarray,
) -> int:
    """Bytes of a record's header count and headers."""
    first = header_list_offsets[row]
    last = header_list_offsets[row + 1]
    size = _varint_size(last - first)
    for h in range(first, last):
        size += _field_size(header_key_offsets[h + 1] - header_key_offsets[h])
        size += _field_size(header_value_offsets[h + 1] - header_value_offsets[h] if header_value_valid[h] else -1)
    return size


# Columns of an encoding plan (``encode_v2_batches`` with ``plan``): one row per batch whose offsets,
# timestamps and producer fields are given, as the cleaner rewrites a batch it removed records from.
P_FIRST_ROW = 0  # first row of the batch's records
P_RECORDS = 1  # records in the batch; 0 writes a header-only (empty) batch
P_BASE_OFFSET = 2
P_LAST_OFFSET_DELTA = 3  # kept from the original batch even when records are gone
P_BASE_TIMESTAMP = 4  # the records' timestamp deltas are taken from it
P_MAX_TIMESTAMP = 5
P_ATTRIBUTES = 6
P_PRODUCER_ID = 7
P_PRODUCER_EPOCH = 8
P_BASE_SEQUENCE = 9
P_PARTITION_LEADER_EPOCH = 10
PLAN_FIELDS = 11


#: The offset types of binary columns: int32 (binary, string) and int64 (large_binary, large_string).
_OFFSETS = ("i4[::1]", "i8[::1]")


def _encode_signature(key_offsets: str, value_offsets: str, header_offsets: str) -> str:
    """The argument types of ``encode_v2_batches`` for columns with these offset types (header keys and values
    share theirs)."""
    columns = f"{key_offsets}, u1[::1], u1[::1], {value_offsets}, u1[::1], u1[::1], i8[::1], b1"
    headers = f"i4[::1], {header_offsets}, u1[::1], {header_offsets}, u1[::1], u1[::1]"
    return f"{columns}, {headers}, i8, i8, i8, i8, i8, i8, i8, i8, i8[:, ::1], i8[::1], u1[::1], i8[:, ::1]"


@kernel(
    *(_encode_signature(k, v, h) for k in _OFFSETS for v in _OFFSETS for h in _OFFSETS),
    cache=True,
    nogil=True,
)
def encode_v2_batches(
    key_offsets: np.ndarray,
    key_valid: np.ndarray,
    key_data: np.ndarray,
    value_offsets: np.ndarray,
    value_valid: np.ndarray,
    value_data: np.ndarray,
    timestamps: np.ndarray,
    has_headers: bool,
    header_list_offsets: np.ndarray,
    header_key_offsets: np.ndarray,
    header_key_data: np.ndarray,
    header_value_offsets: np.ndarray,
    header_value_valid: np.ndarray,
    header_value_data: np.ndarray,
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
    batch_table: np.ndarray,
) -> tuple[int, int, int]:
    """Encode rows ``[start_row, end_row)`` as uncompressed v2 batches into ``out``.

    Without a plan (``plan`` has no rows), the encoder groups the rows: a batch closes before a record
    that would take it past ``max_batch_bytes`` (a record larger than that gets a batch of its own) or
    past ``max_batch_records``; record ``i`` of a batch gets offset delta ``i``, the base offset is 0
    (the log assigns offsets on append) and every batch gets ``attributes`` and the producer fields.

    With a plan, ``start_row``/``end_row`` index its rows instead: each plan row (``P_*`` columns) is
    one batch holding exactly the rows it names, at the base offset, timestamps and producer fields
    it gives, and each record's offset delta is ``offset_deltas[row]``. The grouping arguments are
    then unused.

    Headers are filled in except the CRC, which the caller computes with the hardware CRC-32C.
    ``batch_table`` receives (position, size, first row, record count) per batch.

    Returns:
        (first row, or plan row, not encoded; number of batches; bytes used in ``out``): the encoder
        stops early when ``out`` or ``batch_table`` is full, and the caller continues from there.
    """
    planned = plan.shape[0] > 0
    batch_bytes = out.shape[0] if planned else max_batch_bytes  # a planned batch is never split
    out_pos = 0
    n_batches = 0
    unit = start_row  # the next row, or the next plan row
    capacity = out.shape[0]
    seq = base_sequence
    while unit < end_row and n_batches < batch_table.shape[0]:
        batch_start = out_pos
        if capacity - out_pos < _V2_HEADER:
            break
        pos = batch_start + _V2_HEADER
        if planned:
            row = plan[unit, P_FIRST_ROW]
            last_row = row + plan[unit, P_RECORDS]
            batch_records = plan[unit, P_RECORDS]
            base_ts = plan[unit, P_BASE_TIMESTAMP]
            max_ts = plan[unit, P_MAX_TIMESTAMP]
        else:
            row = unit
            last_row = end_row
            batch_records = max_batch_records
            base_ts = timestamps[row]
            max_ts = base_ts
        first_row = row
        count = 0
        while row < last_row and count < batch_records:
            ts = timestamps[row]
            offset_delta = offset_deltas[row] if planned else count
            # Only scalars go into the size helpers unless there are headers: numba keeps a reference count on
            # each array passed to an inlined helper that loops, two atomic operations per array and record
            # that its pruning does not remove, and they cost more than the rest of the encoder.
            klen = key_offsets[row + 1] - key_offsets[row] if key_valid[row] else -1
            vlen = value_offsets[row + 1] - value_offsets[row] if value_valid[row] else -1
            body = 1 + _varint_size(ts - base_ts) + _varint_size(offset_delta) + _field_size(klen) + _field_size(vlen)
            if has_headers:
                body += _headers_size(
                    row, header_list_offsets, header_key_offsets, header_value_offsets, header_value_valid
                )
            else:
                body += 1
            rec_size = _varint_size(body) + body
            if count > 0 and pos - batch_start + rec_size > batch_bytes:
                break
            if capacity - pos < rec_size:
                break
            pos = _put_varint(out, pos, body)
            out[pos] = 0
            pos += 1
            pos = _put_varint(out, pos, ts - base_ts)
            pos = _put_varint(out, pos, offset_delta)
            if key_valid[row]:
                k0 = key_offsets[row]
                klen = key_offsets[row + 1] - k0
                pos = _put_varint(out, pos, klen)
                _copy(out, pos, key_data, k0, klen)
                pos += klen
            else:
                pos = _put_varint(out, pos, -1)
            if value_valid[row]:
                v0 = value_offsets[row]
                vlen = value_offsets[row + 1] - v0
                pos = _put_varint(out, pos, vlen)
                _copy(out, pos, value_data, v0, vlen)
                pos += vlen
            else:
                pos = _put_varint(out, pos, -1)
            if has_headers:
                first = header_list_offsets[row]
                last = header_list_offsets[row + 1]
                pos = _put_varint(out, pos, last - first)
                for hh in range(first, last):
                    hk0 = header_key_offsets[hh]
                    hk = header_key_offsets[hh + 1] - hk0
                    pos = _put_varint(out, pos, hk)
                    _copy(out, pos, header_key_data, hk0, hk)
                    pos += hk
                    if header_value_valid[hh]:
                        hv0 = header_value_offsets[hh]
                        hv = header_value_offsets[hh + 1] - hv0
                        pos = _put_varint(out, pos, hv)
                        _copy(out, pos, header_value_data, hv0, hv)
                        pos += hv
                    else:
                        pos = _put_varint(out, pos, -1)
            else:
                out[pos] = 0
                pos += 1
            if ts > max_ts:
                max_ts = ts
            count += 1
            row += 1
        if (row < last_row) if planned else (count == 0):
            break  # the planned batch, or not even one record, fits in what is left of ``out``
        size = pos - batch_start
        _put_be(out, batch_start + 8, size - _LOG_OVERHEAD, 4)
        out[batch_start + 16] = 2
        _put_be(out, batch_start + 17, 0, 4)  # crc: the caller's
        _put_be(out, batch_start + 27, base_ts, 8)
        _put_be(out, batch_start + 35, max_ts, 8)
        _put_be(out, batch_start + 57, count, 4)
        if planned:
            _put_be(out, batch_start + 0, plan[unit, P_BASE_OFFSET], 8)
            _put_be(out, batch_start + 12, plan[unit, P_PARTITION_LEADER_EPOCH], 4)
            _put_be(out, batch_start + 21, plan[unit, P_ATTRIBUTES], 2)
            _put_be(out, batch_start + 23, plan[unit, P_LAST_OFFSET_DELTA], 4)
            _put_be(out, batch_start + 43, plan[unit, P_PRODUCER_ID], 8)
            _put_be(out, batch_start + 51, plan[unit, P_PRODUCER_EPOCH], 2)
            _put_be(out, batch_start + 53, plan[unit, P_BASE_SEQUENCE], 4)
            unit += 1
        else:
            _put_be(out, batch_start + 0, 0, 8)  # baseOffset: assigned by the log
            _put_be(out, batch_start + 12, -1, 4)  # partitionLeaderEpoch: set by the log
            _put_be(out, batch_start + 21, attributes, 2)
            _put_be(out, batch_start + 23, count - 1, 4)
            _put_be(out, batch_start + 43, producer_id, 8)
            _put_be(out, batch_start + 51, producer_epoch, 2)
            _put_be(out, batch_start + 53, seq, 4)
            if seq >= 0:
                seq = (seq + count) % 2147483648
            unit = row
        batch_table[n_batches, 0] = batch_start
        batch_table[n_batches, 1] = size
        batch_table[n_batches, 2] = first_row
        batch_table[n_batches, 3] = count
        n_batches += 1
        out_pos = pos
    return unit, n_batches, out_pos


@kernel("u1[::1], i8[:], u1[::1], i8[:], i8[:]", cache=True, nogil=True)
def copy_ranges(
    dst: np.ndarray, dst_positions: np.ndarray, src: np.ndarray, src_positions: np.ndarray, sizes: np.ndarray
) -> None:
    """``dst[dst_positions[i]:+sizes[i]] = src[src_positions[i]:+sizes[i]]`` for every ``i``: gathers whole
    entries from one buffer into another without a Python step per entry."""
    for i in range(sizes.shape[0]):
        _copy(dst, dst_positions[i], src, src_positions[i], sizes[i])


#: Which compiled kernels this module uses: ``"aot"`` (the package's extension) or ``"jit"`` (numba's).
KERNELS = bind(globals())
