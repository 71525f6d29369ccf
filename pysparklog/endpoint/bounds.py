"""A walk over a request's bytes before kio decodes them: every array's length must fit in the bytes left.

kio 0.6.5's native reader sizes an array's memory from the length on the wire before reading an element: a
compact array of length 0xC0000000 (``80 80 80 80 0C``, five bytes) asks for 24 GiB and the allocation failure
aborts the whole process, whatever catches exceptions around it (found by tests/endpoint/test_fuzz_requests.py;
any client that can connect could stop the endpoint with a nine-byte Metadata request). Kafka's generated readers
refuse such a length first ("Tried to allocate a collection of size N, but there are only M bytes remaining"),
and so does this walk, with the message's schema as kio describes it: each dataclass field's ``kafka_type``, its
annotation (a tuple for an array, a dataclass for a nested struct) and its tag (a tagged field).

The walk only measures: strings and bytes are skipped by their length, and nothing is allocated by a length read
from the wire. kio then decodes the same bytes.

Wire forms (Kafka's protocol guide)::

    fixed       bool int8 1, int16 uint16 2, int32 timedelta_i32 4, int64 timedelta_i64 float64 8, uuid 16
    string      int16 length (-1 null) | flexible: uvarint length+1 (0 null)
    bytes       int32 length (-1 null) | flexible: uvarint length+1 (0 null)   (records the same)
    array       int32 count (-1 null)  | flexible: uvarint count+1 (0 null)
    struct      its fields in order    | flexible: then uvarint n tagged fields: uvarint tag, uvarint size, bytes
    struct?     a nullable struct: int8 -1 for null, 1 then the struct
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "float64": 8,
    "uuid": 16,
}
LENGTH_PREFIXED = ("string", "bytes", "records")
#: A uvarint of Kafka's is at most 5 bytes (32 bits).
MAX_UVARINT_BYTES = 5


class OutOfBoundsError(Exception):
    """A length or count in a request that the bytes left cannot hold."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kafka_type: str | None  # None for a struct
    array: bool
    struct: type[Any] | None
    nullable: bool
    tag: int | None


_PLANS: dict[type[Any], tuple[tuple[_Field, ...], dict[int, _Field]]] = {}


def _plan(cls: type[Any]) -> tuple[tuple[_Field, ...], dict[int, _Field]]:
    """The fields of a kio entity in wire order, and its tagged fields by tag."""
    known = _PLANS.get(cls)
    if known is not None:
        return known
    regular: list[_Field] = []
    tagged: dict[int, _Field] = {}
    for entity_field in dataclasses.fields(cls):
        kind = entity_field.type
        nullable = isinstance(kind, types.UnionType)
        if nullable:
            kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        array = typing.get_origin(kind) is tuple
        element = typing.get_args(kind)[0] if array else kind
        struct = element if dataclasses.is_dataclass(element) else None
        assert isinstance(struct, type) or struct is None
        kafka_type, tag = entity_field.metadata.get("kafka_type"), entity_field.metadata.get("tag")
        described = _Field(entity_field.name, kafka_type, array, struct, nullable, tag)
        if described.tag is None:
            regular.append(described)
        else:
            tagged[described.tag] = described
    _PLANS[cls] = (tuple(regular), tagged)
    return _PLANS[cls]


def check_bounds(cls: type[Any], frame: bytes, offset: int) -> None:
    """Walk the kio entity ``cls`` encoded in ``frame`` from ``offset``.

    Raises:
        OutOfBoundsError: A length or count runs past the frame's end.
    """
    _struct(cls, frame, offset, len(frame), bool(cls.__flexible__))


def _struct(cls: type[Any], frame: bytes, position: int, end: int, flexible: bool) -> int:
    regular, tagged = _plan(cls)
    for described in regular:
        position = _field(described, frame, position, end, flexible)
    if flexible:
        count, position = _uvarint(frame, position, end)
        _fits(count, position, end, "tagged fields")
        for _ in range(count):
            tag, position = _uvarint(frame, position, end)
            size, position = _uvarint(frame, position, end)
            _fits(size, position, end, f"tagged field {tag}")
            described_tag = tagged.get(tag)
            if described_tag is not None:
                _field(described_tag, frame, position, position + size, flexible)
            position += size
    return position


def _field(described: _Field, frame: bytes, position: int, end: int, flexible: bool) -> int:
    if not described.array:
        if described.struct is not None and described.nullable and described.tag is None:
            _fits(1, position, end, described.name)
            if frame[position] == 0xFF:
                return position + 1  # null
            position += 1
        return _value(described, frame, position, end, flexible)
    count, position = _length(frame, position, end, flexible, wide=True)
    if count < 0:
        return position  # null (kio refuses a negative count other than -1)
    # Kafka's rule: a collection may not claim more elements than bytes remain (each element takes one at least).
    element_size = FIXED_SIZES.get(described.kafka_type or "", 1)
    _fits(count * element_size, position, end, f"array {described.name} of {count}")
    for _ in range(count):
        position = _value(described, frame, position, end, flexible)
    return position


def _value(described: _Field, frame: bytes, position: int, end: int, flexible: bool) -> int:
    if described.struct is not None:
        return _struct(described.struct, frame, position, end, flexible)
    kafka_type = described.kafka_type or ""
    fixed = FIXED_SIZES.get(kafka_type)
    if fixed is not None:
        _fits(fixed, position, end, described.name)
        return position + fixed
    if kafka_type not in LENGTH_PREFIXED:
        raise OutOfBoundsError(f"field {described.name} has kafka_type {kafka_type!r}, which this walk does not know")
    size, position = _length(frame, position, end, flexible, wide=kafka_type != "string")
    if size > 0:
        _fits(size, position, end, described.name)
        position += size
    return position


def _length(frame: bytes, position: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length or count: uvarint+1 when flexible, else int32 (``wide``) or int16; -1 is null."""
    if flexible:
        value, position = _uvarint(frame, position, end)
        return value - 1, position
    size = 4 if wide else 2
    _fits(size, position, end, "a length")
    return int.from_bytes(frame[position : position + size], "big", signed=True), position + size


def _uvarint(frame: bytes, position: int, end: int) -> tuple[int, int]:
    value = 0
    for index in range(MAX_UVARINT_BYTES):
        if position >= end:
            raise OutOfBoundsError("a varint runs past the end of the request")
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, position
    raise OutOfBoundsError(f"a varint longer than {MAX_UVARINT_BYTES} bytes")


def _fits(size: int, position: int, end: int, what: str) -> None:
    if size > end - position:
        raise OutOfBoundsError(f"{what} needs {size} bytes, but only {end - position} remain")
