"""What a handler works with: the endpoint's shared state and the request it answers."""

from __future__ import annotations

import asyncio
import socket
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pysparklog.endpoint.config import EndpointConfig
from pysparklog.endpoint.protocol import Message, RequestHeader
from pysparklog.endpoint.security import ANONYMOUS, ConnectionAuth
from pysparklog.storage.log_dir import LogDirectory

T = TypeVar("T")


class FamilyState(Protocol):
    """State an API family keeps for the endpoint's life (``EndpointState.state``)."""

    def close(self) -> None: ...


S = TypeVar("S", bound=FamilyState)


class EndpointState:
    """The endpoint's shared state: the log directory, its settings and address, the threads that run the engine's
    blocking calls, and each API family's own state.

    Args:
        log_dir: The log directory served.
        config: The endpoint's settings.
        loop: The event loop the endpoint runs on.
    """

    def __init__(self, log_dir: LogDirectory, config: EndpointConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.log_dir = log_dir
        self.config = config
        self.loop = loop
        wildcard = config.host in ("", "0.0.0.0", "::")
        self.advertised_host = config.advertised_host or (socket.getfqdn() if wildcard else config.host)
        self.advertised_port = config.advertised_port or config.port
        self.node_id = config.node_id if config.node_id is not None else 0
        # The engine blocks (file locks, fsync, an object store's round trips): it runs here, off the event loop.
        self._executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="pysparklog-endpoint")
        self._states: dict[Callable[[EndpointState], Any], Any] = {}
        # Reentrant: a family's state may take another's while it is made (the groups' coordinator takes the registry).
        self._states_lock = threading.RLock()

    def bind(self, port: int) -> None:
        """Take the port the listener got (``port`` 0 asks for a free one) and the node id derived from it."""
        if self.config.advertised_port is None:
            self.advertised_port = port
        if self.config.node_id is None:
            self.node_id = zlib.crc32(f"{self.advertised_host}:{self.advertised_port}".encode()) & 0x7FFFFFFF

    async def run_blocking(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on the engine's threads."""
        return await self.loop.run_in_executor(self._executor, function, *args)

    def state(self, factory: Callable[[EndpointState], S]) -> S:
        """The state ``factory`` makes for this endpoint, made on first use and closed when the endpoint stops."""
        with self._states_lock:
            if factory not in self._states:
                self._states[factory] = factory(self)
            return self._states[factory]  # type: ignore[no-any-return]

    def close(self) -> None:
        for state in reversed(list(self._states.values())):
            state.close()
        self._states.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request being answered.

    Attributes:
        endpoint: The endpoint's shared state.
        message: The API and version of the request, whose ``make`` builds the response.
        header: The request's header.
        peer: The client's address, ``host:port``.
        principal: Who the connection authenticated as (``User:ANONYMOUS`` without SASL or a client certificate).
        auth: The connection's SASL state, which the SASL handlers advance.
    """

    endpoint: EndpointState
    message: Message
    header: RequestHeader
    peer: str
    principal: str = ANONYMOUS
    auth: ConnectionAuth | None = None
