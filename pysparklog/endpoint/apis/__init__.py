"""The APIs the endpoint serves: one module per family, each listing its ``Api`` handlers in ``APIS``.

A handler serves a range of versions of one API; ApiVersions answers exactly what is listed here (within what
kio has types for), so a client never sends a version the endpoint cannot answer, and an API left out is
refused cleanly by the client rather than misunderstood.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from pysparklog.endpoint.protocol import known_versions

if TYPE_CHECKING:
    from pysparklog.endpoint.context import RequestContext

#: The modules of this package with an ``APIS`` tuple.
FAMILIES: tuple[str, ...] = ("versions", "data", "admin", "groups", "transactions", "sasl")

Handle = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Api:
    """The handler of versions ``min_version`` to ``max_version`` of API ``api_key``.

    ``handle(context, request)`` returns the response (built with ``context.message.make``), or None for a
    request that gets no response (Produce with acks=0).
    """

    api_key: int
    min_version: int
    max_version: int
    handle: Handle

    def __post_init__(self) -> None:
        known = known_versions(self.api_key)
        if not (known.start <= self.min_version <= self.max_version < known.stop):
            raise ValueError(f"API {self.api_key} v{self.min_version}-{self.max_version} is outside kio's {known}")


@cache
def served() -> Mapping[int, Api]:
    """Every API served, by key."""
    apis: dict[int, Api] = {}
    for family in FAMILIES:
        for api in importlib.import_module(f"{__name__}.{family}").APIS:
            if api.api_key in apis:
                raise ValueError(f"API {api.api_key} is served twice")
            apis[api.api_key] = api
    return apis
