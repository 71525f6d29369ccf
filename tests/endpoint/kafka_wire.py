"""A bare Kafka protocol client for the endpoint's tests: one request at a time over a socket, typed with kio, so
that a test can send what a real client never would (a truncated frame, a version not offered)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

SIZE = struct.Struct(">i")


class WireClient:
    """A connection to ``host:port``; ``send`` frames a request, ``receive`` reads the next response frame."""

    def __init__(self, address: str, timeout: float = 10) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def frame(self, request: Any, client_id: str | None = "wire-test") -> bytes:
        """``request`` with its header, size prefix included."""
        self.correlation_id += 1
        buffer = io.BytesIO()
        fields = {
            "request_api_key": request.__api_key__,
            "request_api_version": request.__version__,
            "correlation_id": self.correlation_id,
            "client_id": client_id,
        }
        if request.__flexible__:
            entity_writer(RequestHeaderV2)(buffer, RequestHeaderV2(**fields))
        else:
            entity_writer(RequestHeaderV1)(buffer, RequestHeaderV1(**fields))
        entity_writer(type(request))(buffer, request)
        body = buffer.getvalue()
        return SIZE.pack(len(body)) + body

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive_frame(self) -> bytes | None:
        """The next response frame without its size prefix; None when the endpoint closed the connection."""
        prefix = self._read(SIZE.size)
        if prefix is None:
            return None
        (size,) = SIZE.unpack(prefix)
        return self._read(size)

    def request(self, request: Any, response_type: type[Any]) -> Any:
        """Send ``request`` and decode its response as ``response_type``.

        Raises:
            ConnectionError: The endpoint closed the connection instead of answering.
        """
        self.send_raw(self.frame(request))
        frame = self.receive_frame()
        if frame is None:
            raise ConnectionError("the endpoint closed the connection")
        flexible = response_type.__flexible__ and response_type.__api_key__ != 18
        header: Any
        header, offset = entity_reader(ResponseHeaderV1 if flexible else ResponseHeaderV0)(frame, 0)
        assert header.correlation_id == self.correlation_id
        response, size = entity_reader(response_type)(frame, offset)
        assert offset + size == len(frame), "bytes left after the response"
        return response

    def _read(self, size: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)
