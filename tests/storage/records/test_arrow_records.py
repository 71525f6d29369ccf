"""The Arrow encoder and decoder: column types, batching, sequence numbers, chunks and a round-trip property."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysparklog.errors import InvalidConfigError, InvalidRecordError
from pysparklog.storage.records import kernels
from pysparklog.storage.records.arrow_records import (
    _ENCODE_CHUNK_BYTES,
    HEADER_TYPE,
    RECORD_SCHEMA,
    RECORD_SCHEMA_WITH_HEADERS,
    TIMESTAMP_TYPE,
    BatchSettings,
    CompressionEstimate,
    EncodedBatches,
    encode_arrow,
)
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import RECORD_BATCH_OVERHEAD, BatchHeader, TimestampType
from pysparklog.storage.records.memory_records import as_uint8, scan
from tests.storage.records.helpers import NOW_MS, TOPIC, decode, encode, zigzag

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results


def encode_chunks(data: pa.Table | pa.RecordBatch, batch_settings: BatchSettings | None = None) -> list[EncodedBatches]:
    return list(encode_arrow(data, batch_settings, now_ms=NOW_MS))


def headers_of(buf: bytes) -> list[BatchHeader]:
    return [BatchHeader.parse(buf, p) for p in scan(as_uint8(buf)).positions.tolist()]


def column(table: pa.Table, name: str) -> list[Any]:
    values: list[Any] = table.column(name).to_pylist()
    return values


def timestamps_ms(table: pa.Table) -> list[int | None]:
    values: list[int | None] = table.column("timestamp").cast(pa.int64()).to_pylist()
    return values


def values_table(n: int, size: int = 10, **columns: Any) -> pa.Table:
    return pa.table({"value": [bytes([i % 256]) * size for i in range(n)], **columns})


# Schema and columns


def test_decoded_schema_is_sparks_kafka_source() -> None:
    table = decode(encode(values_table(3)), include_headers=False)
    assert table.schema == RECORD_SCHEMA
    assert RECORD_SCHEMA.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert RECORD_SCHEMA.field("timestamp").type == TIMESTAMP_TYPE == pa.timestamp("ms", tz="UTC")
    assert decode(encode(values_table(3))).schema == RECORD_SCHEMA_WITH_HEADERS
    assert column(table, "topic") == [TOPIC] * 3 and column(table, "partition") == [0] * 3


def test_empty_input_writes_no_batches() -> None:
    assert encode_chunks(pa.table({"value": pa.array([], pa.binary())})) == []
    assert encode_chunks(pa.RecordBatch.from_pydict({"value": pa.array([], pa.binary())})) == []
    assert encode_chunks(pa.Table.from_batches([], pa.schema([("value", pa.binary())]))) == []


def test_value_column_alone() -> None:
    table = decode(encode(pa.table({"value": [b"a", b"", None]})))
    assert column(table, "key") == [None, None, None]
    assert column(table, "value") == [b"a", b"", None]
    assert column(table, "headers") == [None, None, None]
    assert timestamps_ms(table) == [NOW_MS] * 3
    assert column(table, "offset") == [0, 1, 2]
    assert column(table, "timestampType") == [0, 0, 0]


def test_other_columns_are_ignored() -> None:
    data = pa.table({"value": [b"a"], "topic": ["elsewhere"], "partition": [7], "offset": [99]})
    table = decode(encode(data))
    assert (column(table, "topic"), column(table, "partition"), column(table, "offset")) == ([TOPIC], [0], [0])


@pytest.mark.parametrize("typ", [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()])
def test_key_and_value_types(typ: pa.DataType) -> None:
    raw = ["k\u00e9y", None, "", "x" * 1000]
    data = pa.table({"key": pa.array(raw, typ), "value": pa.array(list(reversed(raw)), typ)})
    table = decode(encode(data))
    as_bytes = [None if s is None else s.encode() for s in raw]
    assert column(table, "key") == as_bytes
    assert column(table, "value") == list(reversed(as_bytes))
    assert table.schema.field("key").type == pa.binary()


def test_sliced_input_starts_at_its_offset() -> None:
    full = pa.table(
        {
            "key": pa.array([b"k0", None, b"k2", b"k3", None, b"k5"]),
            "value": pa.array([b"v0", b"v1", None, b"", b"v4", b"v5"], pa.large_binary()),
            "headers": pa.array(
                [[{"key": f"h{i}", "value": bytes([i])}] if i % 2 else None for i in range(6)], HEADER_TYPE
            ),
            "timestamp": pa.array(range(1000, 1006), pa.timestamp("ms")),
        }
    )
    sliced = full.slice(2, 3)
    [batch] = sliced.to_batches()
    assert {c.offset for c in batch.columns} == {2}
    for data in (sliced, batch):
        table = decode(encode(data))
        assert column(table, "key") == [b"k2", b"k3", None]
        assert column(table, "value") == [None, b"", b"v4"]
        assert column(table, "headers") == [None, [{"key": "h3", "value": b"\x03"}], None]
        assert timestamps_ms(table) == [1002, 1003, 1004]


def test_header_entries_under_a_null_list_slot_are_ignored() -> None:
    # A null list slot may still span values; they belong to no record.
    offsets = pa.array([0, 1, 3, 4], pa.int32())
    entries = [("a", b"1"), ("b", b"2"), ("c", None), ("d", b"4")]
    structs = pa.array([{"key": k, "value": v} for k, v in entries], HEADER_TYPE.value_type)
    headers = pa.ListArray.from_arrays(offsets, structs, type=HEADER_TYPE, mask=pa.array([False, True, False]))
    table = decode(encode(pa.table({"value": [b"x", b"y", b"z"], "headers": headers})))
    assert column(table, "headers") == [[{"key": "a", "value": b"1"}], None, [{"key": "d", "value": b"4"}]]


# Timestamps


@pytest.mark.parametrize(
    ("values", "typ"),
    [
        ([1_600_000_000, None], pa.timestamp("s")),
        ([1_600_000_000_123, None], pa.timestamp("ms")),
        ([1_600_000_000_123_456, None], pa.timestamp("us", tz="Europe/Paris")),
        ([1_600_000_000_123_456_789, None], pa.timestamp("ns", tz="UTC")),
        ([1_600_000_000_123, None], pa.int64()),
    ],
    ids=["s", "ms", "us-paris", "ns-utc", "int64-ms"],
)
def test_timestamp_units(values: list[int | None], typ: pa.DataType) -> None:
    table = decode(encode(pa.table({"value": [b"a", b"b"], "timestamp": pa.array(values, typ)})))
    expected = 1_600_000_000_000 if typ == pa.timestamp("s") else 1_600_000_000_123
    assert timestamps_ms(table) == [expected, NOW_MS]


def test_null_timestamps_take_now_and_keep_the_batch_header_consistent() -> None:
    buf = encode(pa.table({"value": [b"a", b"b", b"c"], "timestamp": pa.array([None, 5, None], pa.int64())}))
    assert timestamps_ms(decode(buf)) == [NOW_MS, 5, NOW_MS]
    [header] = headers_of(buf)
    assert (header.base_timestamp, header.max_timestamp) == (NOW_MS, NOW_MS)


def test_log_append_time_reads_as_the_batch_max_timestamp() -> None:
    data = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([30, 10], pa.int64())})
    table = decode(encode(data, BatchSettings(timestamp_type=TimestampType.LOG_APPEND_TIME)))
    assert timestamps_ms(table) == [30, 30]
    assert column(table, "timestampType") == [1, 1]


# Headers


def test_no_headers_decodes_as_null_whether_null_or_empty() -> None:
    # A batch cannot tell an empty list from none (headerCount 0); Spark's Kafka source gives null.
    headers = pa.array([None, [], [{"key": "k", "value": None}, {"key": "", "value": b""}]], HEADER_TYPE)
    data = pa.table({"value": [b"a", b"b", b"c"], "headers": headers})
    table = decode(encode(data))
    assert column(table, "headers") == [None, None, [{"key": "k", "value": None}, {"key": "", "value": b""}]]
    nulls_only = pa.table({"value": [b"a", b"b"], "headers": pa.array([None, None], HEADER_TYPE)})
    empty_only = pa.table({"value": [b"a", b"b"], "headers": pa.array([[], []], HEADER_TYPE)})
    assert encode(nulls_only) == encode(empty_only) == encode(pa.table({"value": [b"a", b"b"]}))


def test_header_keys_and_values_may_be_binary_or_string() -> None:
    typ = pa.list_(pa.struct([("key", pa.binary()), ("value", pa.string())]))
    data = pa.table({"value": [b"v"], "headers": pa.array([[{"key": b"k", "value": "\u00e9"}]], typ)})
    assert column(decode(encode(data)), "headers") == [[{"key": "k", "value": "\u00e9".encode()}]]


# Batching


def test_max_batch_records_splits() -> None:
    buf = encode(values_table(10), BatchSettings(max_batch_records=4))
    assert [h.records_count for h in headers_of(buf)] == [4, 4, 2]
    assert [h.last_offset_delta for h in headers_of(buf)] == [3, 3, 1]
    assert column(decode(buf), "offset") == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]


def test_a_record_larger_than_max_batch_bytes_gets_its_own_batch() -> None:
    data = pa.table({"value": [b"small", b"L" * 1000, b"small", b"small"]})
    buf = encode(data, BatchSettings(max_batch_bytes=200))
    headers = headers_of(buf)
    assert [h.records_count for h in headers] == [1, 1, 2]
    assert [h.size_in_bytes > 200 for h in headers] == [False, True, False]
    assert column(decode(buf), "value") == data.column("value").to_pylist()


def greedy_batches(values: list[bytes], max_batch_bytes: int, max_batch_records: int) -> list[int]:
    """Record counts of Kafka's batching rule, from the record sizes a value-only record has."""

    def record_size(offset_delta: int, value: bytes) -> int:
        body = len(b"\0" + zigzag(0) + zigzag(offset_delta) + zigzag(-1) + zigzag(len(value)) + value + b"\0")
        return len(zigzag(body)) + body

    counts, size, count = [], RECORD_BATCH_OVERHEAD, 0
    for value in values:
        if count and (count == max_batch_records or size + record_size(count, value) > max_batch_bytes):
            counts.append(count)
            size, count = RECORD_BATCH_OVERHEAD, 0
        size += record_size(count, value)
        count += 1
    return [*counts, count]


@pytest.mark.parametrize("max_batch_records", [7, 1 << 20])
@pytest.mark.parametrize("max_batch_bytes", [RECORD_BATCH_OVERHEAD, 100, 1000, 4096])
def test_batches_fill_up_to_max_batch_bytes(max_batch_bytes: int, max_batch_records: int) -> None:
    rng = np.random.default_rng(max_batch_bytes)
    values = [bytes(int(n)) for n in rng.integers(0, 40, 500)]
    batch_settings = BatchSettings(max_batch_bytes=max_batch_bytes, max_batch_records=max_batch_records)
    [chunk] = encode_chunks(pa.table({"value": values}), batch_settings)
    assert chunk.record_counts.tolist() == greedy_batches(values, max_batch_bytes, max_batch_records)
    assert all(size <= max_batch_bytes for size, n in zip(chunk.sizes, chunk.record_counts, strict=True) if n > 1)
    assert column(decode(chunk.data.tobytes()), "value") == values


def test_records_of_many_empty_headers_fit_one_chunk() -> None:
    # Two length varints a header and no data: the encoder's buffer must count them.
    headers = [[{"key": "", "value": None}] * 50] * 200
    data = pa.table({"value": [b""] * 200, "headers": pa.array(headers, HEADER_TYPE)})
    chunks = encode_chunks(data, BatchSettings(max_batch_bytes=5000))
    assert len(chunks) == 1 and all(size <= 5000 for size in chunks[0].sizes.tolist())
    assert column(decode(chunks[0].data.tobytes()), "headers") == headers


def test_sequence_numbers_continue_across_batches_and_wrap() -> None:
    start = 2**31 - 3
    batch_settings = BatchSettings(max_batch_records=2, producer_id=9, producer_epoch=1, base_sequence=start)
    # Two Arrow record batches, so the sequence also carries from one input batch to the next.
    data = pa.Table.from_batches([values_table(5).to_batches()[0], values_table(4).to_batches()[0]])
    headers = headers_of(encode(data, batch_settings))
    assert [h.records_count for h in headers] == [2, 2, 1, 2, 2]
    assert [h.base_sequence for h in headers] == [start, start + 2, 1, 2, 4]
    assert [h.last_sequence for h in headers] == [start + 1, 0, 1, 3, 5]
    assert {(h.producer_id, h.producer_epoch) for h in headers} == {(9, 1)}


def test_no_producer_leaves_sequence_unset() -> None:
    headers = headers_of(encode(values_table(5), BatchSettings(max_batch_records=2)))
    assert {(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) for h in headers} == {(-1, -1, -1, -1)}


def test_encoded_batches_describe_their_data() -> None:
    [chunk] = encode_chunks(values_table(10), BatchSettings(max_batch_records=3, codec=Codec.GZIP))
    entries = scan(chunk.data)
    assert (chunk.num_batches, chunk.num_records, len(chunk)) == (4, 10, len(chunk.data))
    assert chunk.positions.tolist() == entries.positions.tolist()
    assert chunk.sizes.tolist() == entries.sizes.tolist()
    assert chunk.record_counts.tolist() == [3, 3, 3, 1] == entries.column(kernels.E_RECORDS_COUNT).tolist()
    assert entries.stop_position == len(chunk.data) and not entries.incomplete_tail


def compressible_table(n: int) -> pa.Table:
    """Values of 100 bytes that repeat but for a few digits, as JSON records do: zstd takes them 5-10:1."""
    rng = np.random.default_rng(3)
    values = [
        b'{"id": %010d, "kind": "click", "page": "/products/%06d", "ok": true}' % (i, rng.integers(10**6))
        for i in range(n)
    ]
    return pa.table({"key": [b"%010d" % i for i in range(n)], "value": values})


@pytest.mark.parametrize("codec", [Codec.ZSTD, Codec.LZ4, Codec.GZIP, Codec.SNAPPY])
def test_compressed_batches_fill_max_batch_bytes_once_compressed(codec: Codec) -> None:
    # Kafka's producer closes a compressed batch when its estimated compressed size reaches batch.size.
    table = compressible_table(20_000)
    settings = BatchSettings(codec=codec, max_batch_bytes=16384, batch_bytes_limit=1 << 20)
    chunks = encode_chunks(table, settings)
    sizes = np.concatenate([chunk.sizes for chunk in chunks])
    assert 0.7 * 16384 <= np.median(sizes) <= 16384
    assert sizes.max() <= 1 << 20
    assert sum(chunk.num_records for chunk in chunks) == 20_000
    # Every batch holds far more records than batch.size bytes of them uncompressed would.
    assert np.median(np.concatenate([chunk.record_counts for chunk in chunks])) > 16384 // 110 * 2
    assert column(decode(b"".join(chunk.data.tobytes() for chunk in chunks)), "value") == column(table, "value")


def test_uncompressed_batches_keep_to_max_batch_bytes() -> None:
    chunks = encode_chunks(compressible_table(2000), BatchSettings(max_batch_bytes=4096))
    sizes = np.concatenate([chunk.sizes for chunk in chunks])
    assert sizes.max() <= 4096 and (sizes[:-1] > 4096 - 120).all()


def test_compressed_batches_keep_within_the_limit_whatever_the_estimate() -> None:
    table = pa.table({"value": [np.random.default_rng(i).bytes(100) for i in range(5000)]})  # incompressible
    settings = BatchSettings(codec=Codec.ZSTD, max_batch_bytes=1024, batch_bytes_limit=8192)
    wrong = CompressionEstimate(ratio=0.01)  # an estimate from records that compressed 100:1
    chunks = list(encode_arrow(table, settings, now_ms=NOW_MS, estimate=wrong))
    sizes = np.concatenate([chunk.sizes for chunk in chunks])
    assert sizes.max() <= 8192
    assert wrong.ratio is not None and wrong.ratio > 0.9  # learned from the batches just compressed
    later = np.concatenate([chunk.sizes for chunk in encode_arrow(table, settings, now_ms=NOW_MS, estimate=wrong)])
    assert later.max() <= 1024 < later.max() + 200


def test_very_compressible_batches_stop_at_the_limit() -> None:
    table = pa.table({"value": [bytes(1000)] * 5000})  # zeros: thousands to one
    settings = BatchSettings(codec=Codec.GZIP, max_batch_bytes=16384, batch_bytes_limit=65536)
    chunks = encode_chunks(table, settings)
    counts = np.concatenate([chunk.record_counts for chunk in chunks])
    assert counts.max() <= 65536 // 1000 and len(counts) < 5000 // 50


def test_more_rows_than_one_encoder_chunk() -> None:
    value_size = 256 * 1024
    n = 3 * _ENCODE_CHUNK_BYTES // value_size // 2  # about 1.5 chunks of data
    data = pa.table({"value": pa.array([bytes([i]) * value_size for i in range(n)])})
    chunks = encode_chunks(data, BatchSettings(producer_id=1, producer_epoch=0, base_sequence=0))
    assert len(chunks) == 2
    assert all(len(c.data) <= _ENCODE_CHUNK_BYTES for c in chunks)
    assert sum(c.num_records for c in chunks) == n
    buf = b"".join(c.data.tobytes() for c in chunks)
    headers = headers_of(buf)
    assert [h.base_sequence for h in headers] == np.cumsum([0] + [h.records_count for h in headers[:-1]]).tolist()
    values = decode(buf).column("value")
    assert [v.as_py()[:1] for v in values] == [bytes([i]) for i in range(n)]
    assert {len(v.as_py()) for v in values} == {value_size}


# Invalid input


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (pa.table({"key": [b"k"]}), "a 'value' column is required; the columns given are ['key']"),
        (pa.table({"value": [1]}), "column 'value' has type int64; accepted types are binary, string, large_binary"),
        (pa.table({"value": [None]}), "column 'value' has type null; accepted types are binary, string"),
        (
            pa.table({"value": [b"v"], "key": pa.array([1], pa.int32())}),
            "column 'key' has type int32; accepted types are binary, string, large_binary, large_string",
        ),
        (
            pa.table({"value": [b"v"], "timestamp": ["2020-01-01"]}),
            "column 'timestamp' has type string; accepted types are timestamp (any unit) and integers",
        ),
        (
            pa.table({"value": [b"v"], "headers": [["a"]]}),
            "column 'headers' has type list<item: string>; accepted type is array<struct<key:string,value:binary>>",
        ),
        (
            pa.table({"value": [b"v"], "headers": [[{"key": 1, "value": b"x"}]]}),
            "column 'headers.key' has type int64; accepted types are binary, string",
        ),
    ],
    ids=["no-value", "value-int", "value-null-type", "key-int", "timestamp-string", "headers-list", "header-key-int"],
)
def test_invalid_columns_are_invalid_records_naming_the_column_and_types(data: pa.Table, expected: str) -> None:
    with pytest.raises(InvalidRecordError) as info:
        encode(data)
    assert expected in str(info.value)
    assert isinstance(info.value, ValueError) and not isinstance(info.value, InvalidConfigError)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max_batch_bytes": RECORD_BATCH_OVERHEAD - 1}, "max_batch_bytes is 60; it must be at least 61"),
        ({"max_batch_records": 0}, "max_batch_records is 0; accepted: 1 to 2147483647"),
        ({"max_batch_records": 2**31}, "max_batch_records is 2147483648; accepted: 1 to 2147483647"),
        ({"transactional": True}, "a transactional batch needs a producer id >= 0"),
    ],
)
def test_invalid_batch_settings(kwargs: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidConfigError, match=expected.replace("(", r"\(")):
        BatchSettings(**kwargs)


# Round-trip property

optional_bytes = st.none() | st.binary(max_size=40)
header_lists = st.none() | st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)
rows = st.lists(
    st.tuples(optional_bytes, optional_bytes, header_lists, st.none() | st.integers(0, 2**42)), min_size=1, max_size=60
)


@settings(max_examples=150, deadline=None)
@given(
    rows=rows,
    codec=st.sampled_from(list(Codec)),
    max_batch_records=st.integers(1, 8),
    max_batch_bytes=st.integers(RECORD_BATCH_OVERHEAD, 600),
    split=st.integers(0, 60),
    offset=st.integers(0, 3),
    large_values=st.booleans(),
)
def test_round_trip(
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int | None]],
    codec: Codec,
    max_batch_records: int,
    max_batch_bytes: int,
    split: int,
    offset: int,
    large_values: bool,
) -> None:
    padded = [(b"pad", b"pad", None, 0)] * offset + rows  # sliced away below: a non-zero array offset
    value_type = pa.large_binary() if large_values else pa.binary()
    table = pa.table(
        {
            "key": pa.array([r[0] for r in padded], pa.binary()),
            "value": pa.array([r[1] for r in padded], value_type),
            "headers": pa.array(
                [None if r[2] is None else [{"key": k, "value": v} for k, v in r[2]] for r in padded], HEADER_TYPE
            ),
            "timestamp": pa.array([r[3] for r in padded], pa.int64()),
        }
    ).slice(offset)
    split = min(split, len(rows))
    data = pa.Table.from_batches([*table.slice(0, split).to_batches(), *table.slice(split).to_batches()])
    batch_settings = BatchSettings(codec=codec, max_batch_records=max_batch_records, max_batch_bytes=max_batch_bytes)
    buf = encode(data, batch_settings)
    decoded = decode(buf)
    assert column(decoded, "key") == [r[0] for r in rows]
    assert column(decoded, "value") == [r[1] for r in rows]
    assert column(decoded, "headers") == [[{"key": k, "value": v} for k, v in r[2]] if r[2] else None for r in rows]
    assert timestamps_ms(decoded) == [NOW_MS if r[3] is None else r[3] for r in rows]
    headers = headers_of(buf)
    assert column(decoded, "offset") == [i for h in headers for i in range(h.records_count)]
    assert all(h.records_count <= max_batch_records and h.codec is codec for h in headers)
    if codec is Codec.NONE:
        assert all(h.size_in_bytes <= max_batch_bytes or h.records_count == 1 for h in headers)
