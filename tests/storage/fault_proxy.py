"""A reverse proxy in front of the S3 server that makes requests fail as a real store's sometimes do.

Run as ``python -m tests.storage.fault_proxy --target URL --port N --seed S --fault-rate R``. Each
request that writes (PUT, POST, DELETE) fails with probability R, one of three ways, chosen by a
seeded random generator:

- ``503``: refused before it reaches the server (S3's SlowDown): nothing happened;
- ``500 after``: forwarded, then answered 500: it happened, and the client cannot know;
- ``dropped``: forwarded, then the connection closed without a reply: the same, as a timeout.

Reads pass through, so the client can always find out what happened. Every fault is logged on stderr.
"""

from __future__ import annotations

import argparse
import http.client
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("503", "500 after", "dropped")
# Hop-by-hop headers a proxy does not forward.
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class _Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    target: tuple[str, int]
    rng: random.Random
    rate: float
    lock = threading.Lock()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        """Requests are not logged, faults are (``_fault``)."""

    def _fault(self) -> str | None:
        if self.command not in ("PUT", "POST", "DELETE"):
            return None
        with self.lock:
            if self.rng.random() >= self.rate:
                return None
            return self.rng.choice(FAULTS)

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self.target, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            connection.close()

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = self._fault()
        if fault is not None:
            print(f"fault {fault}: {self.command} {self.path}", file=sys.stderr, flush=True)
        if fault == "503":
            self._reply(503, "Slow Down", [], b"<Error><Code>SlowDown</Code></Error>")
            return
        status, reason, headers, payload = self._forward(body)
        if fault == "500 after":
            self._reply(500, "Internal Error", [], b"<Error><Code>InternalError</Code></Error>")
        elif fault == "dropped":
            self.close_connection = True
            self.connection.close()
        else:
            self._reply(status, reason, headers, payload)

    def _reply(self, status: int, reason: str, headers: list[tuple[str, str]], payload: bytes) -> None:
        self.send_response(status, reason)
        for key, value in headers:
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the S3 server's URL, http://host:port")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fault-rate", type=float, default=0.3)
    args = parser.parse_args()
    target = urlsplit(args.target)
    _Proxy.target = (target.hostname or "127.0.0.1", target.port or 80)
    _Proxy.rng = random.Random(args.seed)
    _Proxy.rate = args.fault_rate
    ThreadingHTTPServer(("127.0.0.1", args.port), _Proxy).serve_forever()


if __name__ == "__main__":
    main()
