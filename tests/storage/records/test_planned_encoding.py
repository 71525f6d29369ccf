"""``encode_planned``: batches laid out by the caller (the cleaner's rewrites), read back by kafka-python."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pysparklog.storage.records import kernels as k
from pysparklog.storage.records.arrow_records import HEADER_TYPE, encode_planned
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import DELETE_HORIZON_FLAG_MASK, TRANSACTIONAL_FLAG_MASK
from tests.storage.records.helpers import DefaultRecordBatch, MemoryRecords

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results

T0 = 1_700_000_000_000


def plan_row(**fields: int) -> np.ndarray:
    row = np.zeros(k.PLAN_FIELDS, dtype=np.int64)
    for name, value in fields.items():
        row[getattr(k, f"P_{name.upper()}")] = value
    return row


RECORDS = pa.table(
    {
        "key": pa.array([b"a", b"c", None], pa.binary()),
        "value": pa.array([b"1", None, b"3"], pa.binary()),
        "timestamp": pa.array([T0, T0 + 5, T0 + 9], pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": b"v"}], None, None], HEADER_TYPE),
    }
).to_batches()[0]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD, Codec.GZIP])
def test_batches_take_the_offsets_timestamps_and_fields_of_the_plan(codec: Codec) -> None:
    horizon = T0 + 86_400_000
    plan = np.stack(
        [
            # Two records kept of offsets 100..104, with a delete horizon as base timestamp.
            plan_row(
                records=2,
                base_offset=100,
                last_offset_delta=4,
                base_timestamp=horizon,
                max_timestamp=T0 + 5,
                attributes=int(codec) | DELETE_HORIZON_FLAG_MASK | TRANSACTIONAL_FLAG_MASK,
                producer_id=7,
                producer_epoch=3,
                base_sequence=40,
                partition_leader_epoch=2,
            ),
            # An empty batch: a header keeping offsets 105..106 and the producer's sequence.
            plan_row(
                records=0,
                base_offset=105,
                last_offset_delta=1,
                base_timestamp=T0 + 7,
                max_timestamp=T0 + 7,
                producer_id=8,
                producer_epoch=0,
                base_sequence=9,
                partition_leader_epoch=2,
            ),
            plan_row(
                records=1,
                base_offset=107,
                last_offset_delta=0,
                base_timestamp=T0 + 9,
                max_timestamp=T0 + 9,
                attributes=int(codec),
                producer_id=-1,
                producer_epoch=-1,
                base_sequence=-1,
            ),
        ]
    )
    encoded = encode_planned(RECORDS, plan, np.array([101, 104, 107], dtype=np.int64))
    assert encoded.num_batches == 3 and encoded.record_counts.tolist() == [2, 0, 1]
    records = MemoryRecords(encoded.data.tobytes())
    batches: list[DefaultRecordBatch] = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "CRC-32C mismatch"
        batches.append(batch)
    first, empty, last = batches
    assert (first.base_offset, first.last_offset, first.records_count) == (100, 104, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.leader_epoch) == (7, 3, 40, 2)
    assert first.attributes == int(codec) | DELETE_HORIZON_FLAG_MASK | TRANSACTIONAL_FLAG_MASK
    assert (first.first_timestamp, first.max_timestamp) == (horizon, T0 + 5)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in first] == [
        (101, T0, b"a", b"1", [("h", b"v")]),
        (104, T0 + 5, b"c", None, []),
    ], "offsets and timestamps survive the rebasing on the horizon"
    assert (empty.base_offset, empty.last_offset, empty.records_count, empty.base_sequence) == (105, 106, 0, 9)
    assert len(encoded.data) == sum(encoded.sizes.tolist())
    assert encoded.sizes[1] == 61, "an empty batch is its header"
    assert [(r.offset, r.key, r.value) for r in last] == [(107, None, b"3")]


def test_a_plan_that_does_not_hold_the_records_is_refused() -> None:
    plan = plan_row(records=2, base_offset=0)[None, :]
    with pytest.raises(ValueError, match="holds 2 records for 3 rows"):
        encode_planned(RECORDS, plan, np.arange(3, dtype=np.int64))
