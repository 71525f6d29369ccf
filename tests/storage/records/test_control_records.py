"""Control batches: written by ``encode_control_batch`` as Kafka writes them, read back by kafka-python and by us;
control record keys and LEADER_CHANGE values parsed as Kafka parses them."""

from __future__ import annotations

import re

import pytest

from pysparklog import BatchSettings, CorruptRecordError, InvalidConfigError
from pysparklog.storage.records.arrow_records import encode_control_batch
from pysparklog.storage.records.default_records import (
    ControlRecordType,
    LeaderChange,
    control_record_type,
    control_record_type_id,
    end_txn_marker,
    first_control_record,
    parse_end_txn_marker_value,
    parse_leader_change_value,
)
from pysparklog.storage.records.memory_records import as_uint8, scan
from tests.storage.records.helpers import MemoryRecords, decode

pytestmark = pytest.mark.usefixtures("kernel_implementation")  # each test with both kernels: same results

MARKER_SETTINGS = BatchSettings(producer_id=3, producer_epoch=2, transactional=True)
# The LEADER_CHANGE value of __cluster_metadata-0's first record in the broker fixture: version 0,
# leader 1, voters [1], granting voters [1], each struct and the message with no tagged fields.
BROKER_LEADER_CHANGE = bytes.fromhex("00000000000102000000010002000000010000")


@pytest.mark.parametrize("marker", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_an_end_transaction_marker_batch_is_what_kafka_writes(marker: ControlRecordType) -> None:
    key, value = end_txn_marker(marker, coordinator_epoch=5)
    encoded = encode_control_batch(key, value, MARKER_SETTINGS, now_ms=77)
    assert (encoded.num_batches, encoded.num_records) == (1, 1)
    [batch] = list(MemoryRecords(encoded.data.tobytes()))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (3, 2, -1)
    assert (batch.compression_type, batch.max_timestamp) == (0, 77)
    [record] = list(batch)
    assert (record.key, record.value, record.type) == (key, value, int(marker))


def test_a_control_batch_decodes_to_its_control_record() -> None:
    key, value = end_txn_marker(ControlRecordType.COMMIT, coordinator_epoch=9)
    buf = encode_control_batch(key, value, MARKER_SETTINGS, now_ms=77).data.tobytes()
    assert scan(as_uint8(buf)).is_control.tolist() == [True]
    table = decode(buf)
    assert table.column("key").to_pylist() == [key]
    assert control_record_type(table.column("key")[0].as_py()) is ControlRecordType.COMMIT
    assert parse_end_txn_marker_value(table.column("value")[0].as_py()) == 9


def test_a_control_batch_carries_no_sequence() -> None:
    key, value = end_txn_marker(ControlRecordType.ABORT, coordinator_epoch=0)
    with pytest.raises(InvalidConfigError, match="a control batch carries no sequence; base_sequence is 4"):
        encode_control_batch(key, value, BatchSettings(producer_id=3, producer_epoch=0, base_sequence=4))


def test_control_record_type_ids_known_or_not() -> None:
    assert control_record_type_id(b"\x00\x00\x00\x02") == 2
    assert control_record_type(b"\x00\x00\x00\x02") is ControlRecordType.LEADER_CHANGE
    assert control_record_type_id(b"\x00\x00\x00\x09") == 9
    assert control_record_type(b"\x00\x00\x00\x09") is ControlRecordType.UNKNOWN
    with pytest.raises(CorruptRecordError, match="control record key of 3 bytes, expected at least 4"):
        control_record_type_id(b"\x00\x00\x00")


def test_leader_change_values() -> None:
    assert parse_leader_change_value(BROKER_LEADER_CHANGE) == LeaderChange(0, 1, (1,), (1,))
    # Tagged fields a newer writer adds (one on a voter, one on the message) are skipped.
    tagged = bytes.fromhex("0000000000070300000007010002abcd0000000800020000000700")
    assert parse_leader_change_value(tagged + bytes.fromhex("010501ff")) == LeaderChange(0, 7, (7, 8), (7,))
    for broken, detail in [
        (BROKER_LEADER_CHANGE[:-3], "a 4-byte field runs past the end at byte 13"),
        (bytes.fromhex("00000000000100"), "a non-nullable array is null at byte 7"),
        (bytes.fromhex("000000000001ffffffffff"), "an unsigned varint is longer than 5 bytes at byte 11"),
        (BROKER_LEADER_CHANGE[:-1] + bytes.fromhex("010009"), "a tagged field of 9 bytes runs past the end"),
    ]:
        message = f"leader change control record value of {len(broken)} bytes: {detail}"
        with pytest.raises(CorruptRecordError, match=re.escape(message)):
            parse_leader_change_value(broken)
    with pytest.raises(CorruptRecordError, match="null value"):
        parse_leader_change_value(None)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        end_txn_marker(ControlRecordType.COMMIT, coordinator_epoch=7),
        end_txn_marker(ControlRecordType.ABORT, coordinator_epoch=2**31 - 1),
        (end_txn_marker(ControlRecordType.COMMIT, 0)[0], b"v" * 300),  # a value length of two varint bytes
    ],
)
def test_a_control_record_is_read_in_place_as_decoding_reads_it(key: bytes, value: bytes) -> None:
    """``first_control_record`` (what a producer-state replay uses for every marker) agrees with the decoder."""
    data = encode_control_batch(key, value, MARKER_SETTINGS, now_ms=77).data.tobytes()
    assert first_control_record(data) == (key, value)
    (record,) = decode(data).to_pylist()
    assert (record["key"], record["value"]) == (key, value)


def test_a_damaged_control_record_is_refused_in_place() -> None:
    key, value = end_txn_marker(ControlRecordType.COMMIT, coordinator_epoch=7)
    data = encode_control_batch(key, value, MARKER_SETTINGS, now_ms=77).data.tobytes()
    with pytest.raises(CorruptRecordError, match="runs past the end"):
        first_control_record(data[:-8])  # the value cut short
    with pytest.raises(CorruptRecordError, match="shorter than its header"):
        first_control_record(data[:40])
    looping = data[:61] + b"\xff" * 12  # a varint that never ends
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        first_control_record(looping)
    compressed = bytearray(data)
    compressed[22] |= 0x04  # attributes' low byte: lz4
    with pytest.raises(CorruptRecordError, match="compressed"):
        first_control_record(bytes(compressed))
    empty = bytearray(data)
    empty[57:61] = (0).to_bytes(4, "big")
    assert first_control_record(bytes(empty)) is None
