"""The endpoint's network side: an asyncio server reading Kafka request frames and answering them in order.

Each connection is served one request at a time, as a Kafka broker serves it (a client may send several; they
are answered in the order sent). What a client sends can cost that client its connection, never the process:

- a frame over ``max_request_bytes`` (over 512 KiB before SASL authentication, Kafka's
  ``sasl.server.max.receive.size``) is refused before it is read;
- a frame that does not decode, or names an API or version the endpoint does not serve, closes the connection;
- with SASL on, anything but ApiVersions, SaslHandshake and SaslAuthenticate before authentication closes it,
  and so does a failed authentication once answered;
- a connection silent for ``connections.max.idle.ms`` is closed, and so is one that starts a frame and does not
  finish it within the request read timeout, while the others are answered meanwhile;
- a handler's unexpected error is logged and closes the connection (handlers answer the errors they expect with
  Kafka's error codes).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.apis import served
from pysparklog.endpoint.apis.sasl import BEFORE_AUTHENTICATION, SaslUsers
from pysparklog.endpoint.apis.transactions import TransactionsState
from pysparklog.endpoint.apis.versions import API_VERSIONS, version_list
from pysparklog.endpoint.config import EndpointConfig
from pysparklog.endpoint.context import EndpointState, RequestContext
from pysparklog.endpoint.protocol import (
    SIZE,
    MalformedRequestError,
    RequestHeader,
    decode_header,
    decode_request,
    encode_response,
    message,
    peek_api,
)
from pysparklog.endpoint.registry import Registry
from pysparklog.endpoint.security import ANONYMOUS, ConnectionAuth, certificate_principal
from pysparklog.storage.log_dir import LogDirectory

log = logging.getLogger("pysparklog.endpoint")

#: Kafka's ``sasl.server.max.receive.size``: the largest frame read from a client that has not authenticated.
MAX_BYTES_BEFORE_AUTHENTICATION = 524_288


class Endpoint:
    """A Kafka protocol endpoint over one log directory.

    Use it as a context manager, or ``start()`` and ``stop()``: it serves on a thread of its own meanwhile. The
    ``pysparklog serve`` command runs ``serve_forever`` instead.

    Args:
        log_dir: The log directory served: a path or URL, or a ``LogDirectory``.
        config: How it listens; loopback, port 9092 by default.
    """

    def __init__(self, log_dir: LogDirectory | str, config: EndpointConfig | None = None) -> None:
        self.log_dir = log_dir if isinstance(log_dir, LogDirectory) else LogDirectory(log_dir)
        self.config = config or EndpointConfig()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._listening: Future[int] = Future()
        self.state: EndpointState | None = None

    @property
    def port(self) -> int:
        """The port it listens on (once started)."""
        return self._listening.result()

    @property
    def bootstrap(self) -> str:
        """``host:port`` for a client's ``bootstrap.servers``."""
        state = self.state
        assert state is not None, "the endpoint is not started"
        return f"{state.advertised_host}:{state.advertised_port}"

    # -- running ------------------------------------------------------------------------------

    def start(self, timeout: float = 30) -> Endpoint:
        """Serve on a thread of its own; returns once it listens.

        Raises:
            OSError: It cannot listen (the port is taken).
            InvalidConfigError: A setting of the log directory's ``server.properties`` is refused.
        """
        self._thread = threading.Thread(target=self._serve_on_thread, name="pysparklog-endpoint")
        self._thread.daemon = True
        self._thread.start()
        self._listening.result(timeout)
        return self

    def _serve_on_thread(self) -> None:
        try:
            asyncio.run(self.serve_forever())
        except BaseException:
            if not self._listening.done() or self._listening.exception() is None:
                raise
            # It could not start: start() raises the error in the caller's thread.

    def stop(self) -> None:
        """Stop listening, close every connection and wait for the thread to end."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    async def serve_forever(self, on_listening: Callable[[Endpoint], Awaitable[None] | None] | None = None) -> None:
        """Serve until ``stop()`` (or the task is cancelled)."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        state = EndpointState(self.log_dir, self.config, self._loop)
        try:
            tls = self.config.tls.server_context() if self.config.tls is not None else None
            if self.config.sasl_users is not None:
                state.state(SaslUsers)  # a missing or malformed users file stops the endpoint before it listens
        except BaseException as e:
            self._listening.set_exception(e)
            state.close()
            raise
        connections: set[asyncio.Task[None]] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await _Connection(state, reader, writer).serve()
            except asyncio.CancelledError:
                pass  # the endpoint is stopping: asyncio would log a cancelled connection task as an error
            finally:
                connections.discard(task)

        try:
            server = await asyncio.start_server(
                accept,
                self.config.host,
                self.config.port,
                ssl=tls,
                ssl_handshake_timeout=self.config.request_read_timeout_ms / 1000 if tls else None,
            )
        except BaseException as e:
            if not self._listening.done():
                self._listening.set_exception(e)
            state.close()
            raise
        try:
            state.bind(server.sockets[0].getsockname()[1])
            try:
                # Listed in the log directory's registry before the first client comes: coordinators are chosen
                # over the endpoints listed there.
                await state.run_blocking(state.state, Registry)
                # Its timer aborts transactions open past their timeout, whether or not a producer comes here.
                await state.run_blocking(state.state, TransactionsState)
            except BaseException as e:
                self._listening.set_exception(e)
                raise
            self.state = state
            self._listening.set_result(server.sockets[0].getsockname()[1])
            protocol = self.config.security_protocol
            log.info("serving %s on %s:%d (%s)", self.log_dir.path, self.config.host, self.port, protocol)
            if on_listening is not None:
                started = on_listening(self)
                if started is not None:
                    await started
            await self._stopped.wait()
        finally:
            server.close()
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)
            await server.wait_closed()
            await asyncio.get_running_loop().run_in_executor(None, state.close)


class _Connection:
    """One client's connection: frames in, responses out, one request at a time."""

    def __init__(self, state: EndpointState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.state = state
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        # A client certificate names the connection (Kafka's default principal for SSL) until SASL names it.
        principal = certificate_principal(writer.get_extra_info("peercert")) or ANONYMOUS
        self.auth = ConnectionAuth(principal=principal, required=state.config.sasl_users is not None)

    async def serve(self) -> None:
        try:
            while True:
                frame = await self._read_frame()
                if frame is None:
                    return
                response = await self._answer(frame)
                if response is not None:
                    self.writer.write(response)
                    await self.writer.drain()
                if self.auth.close_after_answer:
                    log.warning("closing the connection of %s: its SASL authentication failed", self.peer)
                    return
        except MalformedRequestError as e:
            log.warning("closing the connection of %s: %s", self.peer, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing the connection of %s after an unexpected error", self.peer)
        finally:
            self.writer.close()

    async def _read_frame(self) -> bytes | None:
        """The next request frame, None at a clean end of the connection.

        Raises:
            MalformedRequestError: The connection was idle for ``connections.max.idle.ms``, a frame's size is out
                of bounds, or the rest of a frame did not come within the request read timeout.
        """
        config = self.state.config
        try:
            first = await asyncio.wait_for(self.reader.readexactly(1), config.connections_max_idle_ms / 1000)
        except asyncio.IncompleteReadError:
            return None
        except TimeoutError:
            raise MalformedRequestError(
                f"idle for connections.max.idle.ms ({config.connections_max_idle_ms} ms)"
            ) from None
        try:
            return await asyncio.wait_for(self._read_rest(first), config.request_read_timeout_ms / 1000)
        except TimeoutError:
            raise MalformedRequestError(
                f"a request was not received whole within {config.request_read_timeout_ms} ms of its first byte"
            ) from None

    async def _read_rest(self, first: bytes) -> bytes:
        (size,) = SIZE.unpack(first + await self.reader.readexactly(SIZE.size - 1))
        limit = self.state.config.max_request_bytes
        what = "socket.request.max.bytes"
        if self.auth.required and not self.auth.authenticated and limit > MAX_BYTES_BEFORE_AUTHENTICATION:
            limit, what = MAX_BYTES_BEFORE_AUTHENTICATION, "sasl.server.max.receive.size (before authentication)"
        if not 0 < size <= limit:
            raise MalformedRequestError(f"a request of {size} bytes is outside {what} (1 to {limit}); it was not read")
        return await self.reader.readexactly(size)

    async def _answer(self, frame: bytes) -> bytes | None:
        api_key, version = peek_api(frame)
        if self.auth.required and not self.auth.authenticated and api_key not in BEFORE_AUTHENTICATION:
            raise MalformedRequestError(
                f"API key {api_key} before SASL authentication; accepted first: ApiVersions, SaslHandshake, "
                "SaslAuthenticate"
            )
        api = served().get(api_key)
        if api is None:
            raise MalformedRequestError(f"API key {api_key} is not served (ApiVersions lists what is)")
        if not api.min_version <= version <= api.max_version:
            if api_key == API_VERSIONS:
                return self._unsupported_api_versions(frame)
            raise MalformedRequestError(
                f"API key {api_key} v{version} is not served; accepted: v{api.min_version} to v{api.max_version}"
            )
        types = message(api_key, version)
        header, offset = decode_header(frame, types.flexible)
        request = decode_request(types, frame, offset)
        context = RequestContext(self.state, types, header, self.peer, self.auth.principal, self.auth)
        response = await api.handle(context, request)
        return None if response is None else encode_response(types, header.correlation_id, response)

    def _unsupported_api_versions(self, frame: bytes) -> bytes:
        """Kafka's answer to an ApiVersions request of a version too new: a v0 response with
        UNSUPPORTED_VERSION and the versions served, from which the client picks one and asks again."""
        types = message(API_VERSIONS, 0)
        header = _fixed_header(frame)
        context = RequestContext(self.state, types, header, self.peer)
        response: Any = types.make(
            "ApiVersionsResponse", error_code=ErrorCode.unsupported_version, api_keys=tuple(version_list(context))
        )
        return encode_response(types, header.correlation_id, response)


def _fixed_header(frame: bytes) -> RequestHeader:
    """The header of a request of a version the endpoint does not know, as far as its fixed part goes (key,
    version, correlation id; the client id's encoding may be that version's own)."""
    api_key, version = peek_api(frame)
    correlation_id = int.from_bytes(frame[4:8], "big", signed=True) if len(frame) >= 8 else 0
    return RequestHeader(api_key, version, correlation_id, None)
