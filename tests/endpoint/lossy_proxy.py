"""A TCP proxy between a Kafka client and the endpoint that loses answers: it forwards every request, and for the
requests of one API it chooses, drops the connection instead of relaying every n-th response. The request was
served (a produce appended), the client never hears so and sends it again on a new connection: the lost
acknowledgement a real network causes, for the idempotence tests."""

from __future__ import annotations

import collections
import socket
import struct
import threading
from types import TracebackType

SIZE = struct.Struct(">i")
API_KEY = struct.Struct(">h")


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            chunk = sock.recv(size - len(chunks))
        except OSError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    """A whole frame, size prefix included; None once the socket is closed."""
    prefix = _read_exactly(sock, SIZE.size)
    if prefix is None:
        return None
    body = _read_exactly(sock, SIZE.unpack(prefix)[0])
    return None if body is None else prefix + body


def _cut(*sockets: socket.socket) -> None:
    """End the connection both ways now: ``shutdown`` sends the FIN and wakes the other pump's ``recv``, which a
    bare ``close`` would leave blocked, with the connection open."""
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already ended
        sock.close()


class LossyProxy:
    """Listens on a free loopback port (``port``, which the endpoint advertises so that the client's every
    connection goes through here) and forwards to the address given to ``forward_to``.

    Args:
        api_key: The API whose responses are lost.
        every: Every ``every``-th response of that API (counted over all connections) is lost.
        limit: At most this many responses are lost in all.
    """

    def __init__(self, api_key: int, every: int, limit: int) -> None:
        self.target = ("127.0.0.1", 0)
        self.api_key, self.every, self.limit = api_key, every, limit
        self.seen = 0
        self.lost = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def forward_to(self, address: str) -> None:
        """Where connections go: the endpoint's ``host:port``."""
        host, _, port = address.rpartition(":")
        self.target = (host, int(port))

    def __enter__(self) -> LossyProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            _cut(*self._sockets)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:  # the endpoint is gone (stopped at the end of a test): the client's connection too
                _cut(client)
                continue
            with self._lock:
                self._sockets += [client, server]
            pending: collections.deque[int] = collections.deque()
            threading.Thread(target=self._requests, args=(client, server, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, pending), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, pending: collections.deque[int]) -> None:
        while (frame := _read_frame(client)) is not None:
            pending.append(API_KEY.unpack_from(frame, SIZE.size)[0])
            try:
                server.sendall(frame)
            except OSError:
                break
        _cut(client, server)

    def _responses(self, server: socket.socket, client: socket.socket, pending: collections.deque[int]) -> None:
        while (frame := _read_frame(server)) is not None:
            if pending.popleft() == self.api_key and self._lose():
                break
            try:
                client.sendall(frame)
            except OSError:
                break
        _cut(client, server)

    def _lose(self) -> bool:
        with self._lock:
            self.seen += 1
            if self.lost < self.limit and self.seen % self.every == 0:
                self.lost += 1
                return True
            return False
