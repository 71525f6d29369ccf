"""A reverse proxy in front of the S3 server: a real store's round trip, its failures, and a count of what was asked.

Run as ``python -m tests.storage.fault_proxy --target URL --port N [--seed S] [--fault-rate R] [--delay-ms D]``.
moto on loopback answers in about a millisecond and bills nothing; a real store answers in 10-30 ms (S3
Standard about 20, S3 Express about 5), bills every request and sometimes fails. The proxy puts those back:

- **Round trip**: every forwarded request waits ``D`` ms in all, half before it is forwarded and half after the
  server answered, as the way there and the way back; a write thus lands in the middle of its round trip, as on
  a real store, which matters to writers racing for a name. Requests on different connections wait at once.
- **Faults**: each request that writes (PUT, POST, DELETE) fails with probability R, one of three ways, chosen
  by a generator seeded with S:

  - ``503``: refused before it reaches the server (S3's SlowDown): nothing happened;
  - ``500 after``: forwarded, then answered 500: it happened, and the client cannot know;
  - ``dropped``: forwarded, then the connection closed without a reply: the same, as a timeout.

  Reads pass through, so the client can always find out what happened. Every fault is logged on stderr.
- **Ignored conditions** (``--drop-conditions``): writes are forwarded without ``If-None-Match`` and ``If-Match``,
  as some S3-compatible stores and gateways accept those headers and ignore them.
- **Requests**: every request received is recorded (method, path without the query string, percent-decoded,
  the raw query string, the status the client got; ``null`` for a dropped one) before it is answered, so a
  client that has its answer finds it recorded. ``GET /__pysparklog/requests`` returns them as a JSON list, in
  the order they were answered (``?since=N``: from the N-th on), and ``DELETE /__pysparklog/requests`` forgets
  them. ``PUT /__pysparklog/delay`` with a number of milliseconds as its body changes the round trip from the
  next request on, so that a benchmark sets its data up without delay and measures one store at several round
  trips. These paths are never forwarded, delayed, failed or recorded.

The proxy keeps clients' connections alive and forwards each client connection's requests on one connection
of its own to the server, opened again only when the server closed it. Its replies are buffered, headers and
body leaving in one write (a body over 1 MiB follows its headers as the server sends it), and sent with
``TCP_NODELAY``: a reply written as headers then body with Nagle's
algorithm on waited for the client's delayed ACK, about 40 ms per request on a kept-alive connection. Loops of
300 small GETs (100-byte objects) by obstore on one connection, on the 2-core machine, took p50 1.8-2.0 ms
straight to moto and 2.3-2.6 ms through this proxy with no delay: about half a millisecond per request, a
quarter of moto's own time. The earlier proxy, which wrote twice and opened a connection to the server per
request, took 44 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FAULTS = ("503", "500 after", "dropped")
#: The path of the recorded requests: answered by the proxy itself, never forwarded.
REQUESTS_PATH = "/__pysparklog/requests"
#: The path of the round trip's milliseconds (PUT): answered by the proxy itself, never forwarded.
DELAY_PATH = "/__pysparklog/delay"
# Hop-by-hop headers a proxy does not forward.
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
# The headers of a conditional write, which ``--drop-conditions`` strips as a store or gateway ignoring them would.
_CONDITIONS = {"if-none-match", "if-match"}
# A connection to the server that it closed while idle fails the next request with one of these, before the
# server read it: that request is sent again on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
#: The pieces a large reply's body is relayed in.
_RELAY_CHUNK = 1024 * 1024


class _Recorder:
    """The requests the proxy answered, shared by its handler threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []

    def add(self, method: str, path: str, query: str, status: int | None) -> None:
        with self._lock:
            self._requests.append({"method": method, "path": path, "query": query, "status": status})

    def since(self, first: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._requests[first:]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()


class _Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # see the module's docstring
    wbufsize = -1  # buffered: a reply's headers and body leave in one write
    target: tuple[str, int]
    rng: random.Random
    rate: float
    delay_s: float
    drop_conditions: bool
    recorder: _Recorder
    lock = threading.Lock()
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        """Requests are not logged, faults are (``_fault``)."""

    def finish(self) -> None:
        super().finish()
        if self._upstream is not None:
            self._upstream.close()

    def _fault(self) -> str | None:
        if self.command not in ("PUT", "POST", "DELETE"):
            return None
        with self.lock:
            if self.rng.random() >= self.rate:
                return None
            return self.rng.choice(FAULTS)

    def _forward(self, body: bytes) -> http.client.HTTPResponse:
        dropped = _HOP_BY_HOP | (_CONDITIONS if self.drop_conditions else set())
        headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
        reused = self._upstream is not None
        if self._upstream is None:
            self._upstream = http.client.HTTPConnection(*self.target, timeout=60)
        try:
            self._upstream.request(self.command, self.path, body=body, headers=headers)
            response = self._upstream.getresponse()
        except _STALE:
            self._upstream.close()
            if not reused:
                raise
            self._upstream.request(self.command, self.path, body=body, headers=headers)
            response = self._upstream.getresponse()
        return response

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        if split.path == REQUESTS_PATH:
            self._requests(split.query)
            return
        if split.path == DELAY_PATH and self.command == "PUT":
            _Proxy.delay_s = float(body) / 1000
            self._reply(204, "No Content", [], b"")
            return
        record = (self.command, unquote(split.path), split.query)
        fault = self._fault()
        if fault is not None:
            print(f"fault {fault}: {self.command} {self.path}", file=sys.stderr, flush=True)
        half_round_trip = self.delay_s / 2
        time.sleep(half_round_trip)
        if fault == "503":
            self.recorder.add(*record, 503)
            time.sleep(half_round_trip)
            self._reply(503, "Slow Down", [], b"<Error><Code>SlowDown</Code></Error>")
            return
        response = self._forward(body)
        time.sleep(half_round_trip)
        if fault == "500 after":
            response.read()
            self.recorder.add(*record, 500)
            self._reply(500, "Internal Error", [], b"<Error><Code>InternalError</Code></Error>")
        elif fault == "dropped":
            response.read()
            self.recorder.add(*record, None)
            self.close_connection = True
            self.connection.close()
        else:
            self.recorder.add(*record, response.status)
            self._relay(response)

    def _requests(self, query: str) -> None:
        """Answer a request for the recorded requests: the list (GET) or forgetting it (DELETE)."""
        if self.command == "DELETE":
            self.recorder.clear()
            self._reply(204, "No Content", [], b"")
        elif self.command == "GET":
            first = int(parse_qs(query).get("since", ["0"])[0])
            payload = json.dumps(self.recorder.since(first)).encode()
            self._reply(200, "OK", [("Content-Type", "application/json")], payload)
        else:
            self._reply(405, "Method Not Allowed", [], b"")

    def _relay(self, response: http.client.HTTPResponse) -> None:
        """Answer with the server's reply: a small one buffered whole (``_reply``); a large body of known length
        streamed in ``_RELAY_CHUNK`` pieces as the server sends it, as a store sends a large object's bytes once its
        first byte's round trip has passed, rather than held until it is whole and copied once more."""
        length = response.getheader("Content-Length")
        if self.command == "HEAD" or length is None or int(length) <= _RELAY_CHUNK:
            self._reply(response.status, response.reason, response.getheaders(), response.read())
            return
        self._head(response.status, response.reason, response.getheaders(), int(length))
        self.wfile.flush()
        chunk = bytearray(_RELAY_CHUNK)
        while got := response.readinto(chunk):
            self.wfile.write(memoryview(chunk)[:got])

    def _reply(self, status: int, reason: str, headers: list[tuple[str, str]], payload: bytes) -> None:
        """Answer, headers and body buffered together in ``wfile``, which the base class flushes after the request."""
        self._head(status, reason, headers, len(payload))
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _head(self, status: int, reason: str, headers: list[tuple[str, str]], length: int) -> None:
        """The status line and headers of a reply whose body is ``length`` bytes."""
        self.send_response(status, reason)
        # A HEAD's reply has no body but the object's length, which is what the client asks it for.
        for key, value in headers:
            if key.lower() == "content-length":
                length = int(value) if self.command == "HEAD" else length
            elif key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the S3 server's URL, http://host:port")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fault-rate", type=float, default=0.3)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="the round trip every request waits (ms)")
    parser.add_argument(
        "--drop-conditions", action="store_true", help="forward writes without If-None-Match and If-Match"
    )
    args = parser.parse_args()
    target = urlsplit(args.target)
    _Proxy.target = (target.hostname or "127.0.0.1", target.port or 80)
    _Proxy.rng = random.Random(args.seed)
    _Proxy.rate = args.fault_rate
    _Proxy.delay_s = args.delay_ms / 1000
    _Proxy.drop_conditions = args.drop_conditions
    _Proxy.recorder = _Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Proxy)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
