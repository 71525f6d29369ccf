"""Every version of the group APIs that ApiVersions offers is answered, and the answer decodes with kio's types of
that version: a field one version lacks or a string it does not let be null would otherwise cost the client its
connection."""

from __future__ import annotations

import dataclasses
import typing
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from pysparklog.endpoint import Endpoint
from pysparklog.endpoint.apis import served
from pysparklog.endpoint.apis.groups import APIS
from pysparklog.endpoint.protocol import message
from tests.endpoint.kafka_wire import WireClient

#: A value of each of the protocol's primitive types: "g" is a group id, a member id, a topic name, a protocol name.
_PRIMITIVES: dict[str, Any] = {
    "string": "g",
    "bytes": b"",
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "timedelta_i32": timedelta(0),
    "timedelta_i64": timedelta(0),
}


def _example(cls: type[Any]) -> Any:
    """An instance of a request class with one element in each array and a plain value in each field."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        kafka_type = field.metadata.get("kafka_type")
        is_array = typing.get_origin(hint) is tuple or any(
            typing.get_origin(arm) is tuple for arm in typing.get_args(hint)
        )
        if is_array:
            array = next(h for h in (hint, *typing.get_args(hint)) if typing.get_origin(h) is tuple)
            element = typing.get_args(array)[0]
            fields[field.name] = (_PRIMITIVES[kafka_type] if kafka_type else _example(element),)
        elif kafka_type in _PRIMITIVES:
            fields[field.name] = _PRIMITIVES[kafka_type]
        else:
            fields[field.name] = _example(hint)
    return cls(**fields)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(api.api_key, v) for api in APIS for v in range(api.min_version, api.max_version + 1)],
)
def test_every_version_served_is_answered_in_that_version(endpoint: Endpoint, api_key: int, version: int) -> None:
    assert served()[api_key].handle is next(api.handle for api in APIS if api.api_key == api_key)
    types = message(api_key, version)
    with WireClient(endpoint.bootstrap) as client:
        response = client.request(_example(types.request_type), types.response_type)
    codes = [value for value in _walk(response) if isinstance(value, ErrorCode)]
    assert codes, response
    assert ErrorCode.unknown_server_error not in codes


def _walk(entity: Any) -> list[Any]:
    """Every value of a response, nested entities' included."""
    values: list[Any] = []
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        for item in value if isinstance(value, tuple) else (value,):
            values += _walk(item) if dataclasses.is_dataclass(item) else [item]
    return values
