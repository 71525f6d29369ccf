"""The Kafka protocol's framing and message types, through kio (generated from Kafka's own message schemas).

Every request and response on the wire is a frame::

    0  size       int32   bytes that follow
    4  header     RequestHeader v1 (int16 api key, int16 api version, int32 correlation id, nullable string
                  client id), or v2 (the same and tagged fields) for a flexible version of the API
       body       the API's request at that version

    0  size       int32
    4  header     ResponseHeader v0 (int32 correlation id), or v1 (and tagged fields) for a flexible version;
                  ApiVersions answers with v0 whatever its version, so that a client can read the answer of a
                  version it guessed too high
       body       the API's response at that version

kio has one module per API and version (``kio.schema.<api>.v<N>.request``/``.response``) holding the message's
dataclasses, nested ones included: ``Message`` finds them, and ``Message.make`` builds one of its response
classes from the fields that version has, so that a handler written once serves every version it supports.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import struct
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.constants import EntityType
from kio.static.primitive import i32

from pysparklog.endpoint.bounds import OutOfBoundsError, check_bounds

#: The frame's length prefix.
SIZE = struct.Struct(">i")
#: The first two fields of every request header, enough to find its API and version.
API_KEY_AND_VERSION = struct.Struct(">hh")
API_VERSIONS_KEY = 18


class MalformedRequestError(Exception):
    """A frame that is not a request of an API and version the endpoint serves: the connection is closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header fields every version has."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Message:
    """One API at one version: its request and response classes and the module each is in."""

    api_key: int
    version: int
    request_type: type[Any]
    response_type: type[Any]

    @property
    def name(self) -> str:
        return api_key_map[self.api_key]

    @property
    def flexible(self) -> bool:
        return bool(self.request_type.__flexible__)

    def make(self, class_name: str, **fields: Any) -> Any:
        """An instance of the response class ``class_name`` of this version (the response itself or a nested one),
        from those of ``fields`` the class has: a handler passes every field any version has."""
        cls = (
            self.response_type if class_name == self.response_type.__name__ else _nested(self.response_type, class_name)
        )
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in fields.items() if name in names})

    def has_field(self, class_name: str, field_name: str) -> bool:
        """Whether the response class ``class_name`` of this version has ``field_name``."""
        cls = (
            self.response_type if class_name == self.response_type.__name__ else _nested(self.response_type, class_name)
        )
        return any(f.name == field_name for f in dataclasses.fields(cls))


def _nested(response_type: type[Any], class_name: str) -> type[Any]:
    module = importlib.import_module(response_type.__module__)
    try:
        return getattr(module, class_name)  # type: ignore[no-any-return]
    except AttributeError:
        raise AttributeError(f"{module.__name__} has no class {class_name}") from None


@cache
def message(api_key: int, version: int) -> Message:
    """The message types of ``api_key`` at ``version``.

    Raises:
        KeyError: kio has no such API or version.
    """
    versions = schema_name_map[api_key_map[api_key]]
    types = versions[version]

    def load(path: str) -> type[Any]:
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]

    return Message(api_key, version, load(types[EntityType.request]), load(types[EntityType.response]))


def known_versions(api_key: int) -> range:
    """The versions of ``api_key`` kio has types for (an empty range for an API it does not know)."""
    name = api_key_map.get(api_key)
    if name is None:
        return range(0)
    versions = sorted(schema_name_map[name])
    return range(versions[0], versions[-1] + 1)


#: What kio's decoder raises for bytes that are not the message: its own errors, and Python's for bad values.
#: KeyError is a tagged field whose tag the schema lacks: Kafka's readers skip those, kio 0.6.5's native reader
#: refuses them, so such a request closes its connection (found by tests/endpoint/test_fuzz_requests.py).
DECODE_ERRORS = (SerialError, ValueError, UnicodeDecodeError, OverflowError, TypeError, KeyError)

_READ_HEADER_V1 = entity_reader(RequestHeaderV1)
_READ_HEADER_V2 = entity_reader(RequestHeaderV2)
_WRITE_HEADER_V0 = entity_writer(ResponseHeaderV0)
_WRITE_HEADER_V1 = entity_writer(ResponseHeaderV1)


def peek_api(frame: bytes) -> tuple[int, int]:
    """(api key, api version) of a request frame (without its size prefix).

    Raises:
        MalformedRequestError: The frame is shorter than that.
    """
    if len(frame) < API_KEY_AND_VERSION.size:
        raise MalformedRequestError(f"a request of {len(frame)} bytes has no header")
    api_key, version = API_KEY_AND_VERSION.unpack_from(frame)
    return api_key, version


def decode_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """The request header and where the body starts.

    Raises:
        MalformedRequestError: The header does not decode.
    """
    try:
        header, size = (_READ_HEADER_V2 if flexible else _READ_HEADER_V1)(frame, 0)
    except DECODE_ERRORS as e:
        raise MalformedRequestError(f"the request header does not decode: {e}") from None
    return RequestHeader(
        header.request_api_key, header.request_api_version, header.correlation_id, header.client_id
    ), size


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(request_type: type[Any]) -> Any:
    if request_type not in _READERS:
        _READERS[request_type] = entity_reader(request_type)
    return _READERS[request_type]


def _writer(response_type: type[Any]) -> Any:
    if response_type not in _WRITERS:
        _WRITERS[response_type] = entity_writer(response_type)
    return _WRITERS[response_type]


def decode_request(message: Message, frame: bytes, offset: int) -> Any:
    """The request body of ``message`` starting at ``offset``.

    Bytes after the body are ignored, as a broker ignores them (its generated readers stop at the message's
    end and nothing checks what is left): librdkafka 2.x ends its Metadata v13 request with three bytes that
    version does not have, and a broker answers it all the same.

    Raises:
        MalformedRequestError: It does not decode within the frame.
    """
    try:
        check_bounds(message.request_type, frame, offset)  # before kio: it aborts on some lengths
    except OutOfBoundsError as e:
        raise MalformedRequestError(f"{message.name} v{message.version} does not decode: {e}") from None
    try:
        request, _size = _reader(message.request_type)(frame, offset)
    # KeyError: kio refuses a tagged field it has no schema for ("Unknown tagged field tag"), where Kafka skips it.
    except DECODE_ERRORS as e:
        raise MalformedRequestError(f"{message.name} v{message.version} does not decode: {e}") from None
    null = _first_null(request)
    if null is not None:
        raise MalformedRequestError(f"{message.name} v{message.version}: non-nullable field {null} was sent as null")
    return request


_FIELDS_TO_CHECK: dict[type[Any], tuple[tuple[str, bool, bool], ...]] = {}


def _fields_to_check(cls: type[Any]) -> tuple[tuple[str, bool, bool], ...]:
    """(name, nullable, holds entities) of the fields of a kio entity worth checking after decoding: those that
    must not be null, and those holding nested entities (which may have such fields themselves)."""
    known = _FIELDS_TO_CHECK.get(cls)
    if known is not None:
        return known
    checked = []
    for entity_field in dataclasses.fields(cls):
        kind = entity_field.type
        nullable = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
        inner = next((arg for arg in typing.get_args(kind) if arg is not type(None)), kind) if nullable else kind
        element = typing.get_args(inner)[0] if typing.get_origin(inner) is tuple else inner
        holds_entities = dataclasses.is_dataclass(element)
        if not nullable or holds_entities:
            checked.append((entity_field.name, nullable, holds_entities))
    _FIELDS_TO_CHECK[cls] = tuple(checked)
    return _FIELDS_TO_CHECK[cls]


def _first_null(entity: Any, path: str = "") -> str | None:
    """The first field of ``entity`` (nested ones included) that the schema says is not nullable but holds null.

    Kafka's readers refuse a null (length -1) array or string where the schema does not allow it; kio's decoder
    takes it as None, which a handler then trips on (found by tests/endpoint/test_fuzz_requests.py).
    """
    for name, nullable, holds_entities in _fields_to_check(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return path + name
            continue
        if holds_entities:
            for index, item in enumerate(value if isinstance(value, tuple) else (value,)):
                null = _first_null(item, f"{path}{name}[{index}].")
                if null is not None:
                    return null
    return None


def encode_response(message: Message, correlation_id: int, response: Any) -> bytes:
    """The response frame, size prefix included."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    if message.flexible and message.api_key != API_VERSIONS_KEY:
        _WRITE_HEADER_V1(buffer, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    else:
        _WRITE_HEADER_V0(buffer, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    _writer(message.response_type)(buffer, response)
    frame = buffer.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
    return bytes(frame)
