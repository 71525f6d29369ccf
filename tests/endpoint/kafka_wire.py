"""A bare Kafka protocol client for the endpoint's tests: one request at a time over a socket, typed with kio, so
that a test can send what a real client never would (a truncated frame, a version not offered), over TLS or not,
with a SASL exchange (PLAIN, or SCRAM written from RFC 5802 here, apart from the endpoint's) before anything."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import secrets
import socket
import ssl
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader, entity_writer

SIZE = struct.Struct(">i")


class WireClient:
    """A connection to ``host:port``; ``send`` frames a request, ``receive`` reads the next response frame.

    Args:
        address: ``host:port``.
        timeout: Seconds any one socket operation may take.
        tls: The client's TLS context; plain TCP when None.
    """

    def __init__(self, address: str, timeout: float = 10, tls: ssl.SSLContext | None = None) -> None:
        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock = tls.wrap_socket(sock, server_hostname=host) if tls is not None else sock
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

    def handshake(self, mechanism: str) -> SaslHandshakeResponse:
        response: SaslHandshakeResponse = self.request(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse)
        return response

    def authenticate(self, token: bytes) -> SaslAuthenticateResponse:
        response: SaslAuthenticateResponse = self.request(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        return response

    def sasl_plain(self, user: str, password: str) -> SaslAuthenticateResponse:
        """The handshake and PLAIN's one round (RFC 4616); the last answer."""
        assert self.handshake("PLAIN").error_code == 0
        return self.authenticate(f"\0{user}\0{password}".encode())

    def sasl_scram(self, mechanism: str, user: str, password: str) -> SaslAuthenticateResponse:
        """The handshake and SCRAM's two rounds (RFC 5802, client side); the last answer, whose server signature
        is checked when the exchange succeeded."""
        hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        assert self.handshake(mechanism).error_code == 0
        client_first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={secrets.token_hex(16)}"
        first = self.authenticate(f"n,,{client_first_bare}".encode())
        if first.error_code != 0:
            return first
        server_first = first.auth_bytes.decode()
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.digest(salted, b"Client Key", hash_name)
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(hash_name, client_key).digest(), auth_message, hash_name)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        final = self.authenticate(f"{without_proof},p={proof}".encode())
        if final.error_code == 0:
            server_key = hmac.digest(salted, b"Server Key", hash_name)
            expected = b"v=" + base64.b64encode(hmac.digest(server_key, auth_message, hash_name))
            assert final.auth_bytes == expected, "the endpoint's server signature does not prove it knows the user"
        return final

    def _read(self, size: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < size:
            try:
                chunk = self.sock.recv(size - len(chunks))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)
