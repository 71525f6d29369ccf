"""Real server processes on loopback for the object-store backend: moto's standalone S3 server (from the
dev extras) and the proxy in front of it (``tests.storage.fault_proxy``) that delays every request by a real
store's round trip, fails a share of the writes and records every request. Used by the storage tests'
fixtures and by the object-store benchmarks; docs/object-storage.md says why moto.

The requests a proxy recorded are what a real store would have billed, counted where the store counts them:
``StoreProxy.count`` checks a budget, ``summarise`` says which requests they were when a budget is exceeded.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.storage.fault_proxy import DELAY_PATH, REQUESTS_PATH

REPO = Path(__file__).resolve().parents[1]
#: What points obstore (and boto3) at the server; ``{endpoint}`` is filled in.
ENVIRONMENT = {
    "AWS_ENDPOINT_URL": "{endpoint}",
    "AWS_ALLOW_HTTP": "true",
    "AWS_ACCESS_KEY_ID": "pysparklog",
    "AWS_SECRET_ACCESS_KEY": "pysparklog",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class ServerError(RuntimeError):
    """A server process that is not installed or did not start."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running(
    command: list[str], port: int, log: Path | None = None, *, timeout: float = 60, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` running (from the repository, in ``env`` or this process's environment, its stderr in
    ``log``) once it listens on ``port`` of loopback; stopped on exit.

    Raises:
        ServerError: It exited or did not listen within ``timeout`` seconds.
    """
    with open(log if log is not None else os.devnull, "wb") as stderr:  # the child keeps its own descriptor
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise ServerError(f"{command[0]} did not start on port {port}") from None
                time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:  # a busy server may not stop on SIGTERM in time: it holds nothing to keep
            process.kill()
            process.wait(30)


@contextmanager
def s3_server(bucket: str, log: Path | None = None) -> Iterator[str]:
    """A moto server with ``bucket``, the ``AWS_*`` variables pointing at it meanwhile; yields its endpoint.

    Raises:
        ServerError: ``moto_server`` is not installed, or did not start.
    """
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    if server is None:
        raise ServerError("moto_server is not installed: make setup installs moto[server] with the dev extras")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with running([server, "-H", "127.0.0.1", "-p", str(port)], port, log):
        with environment({key: value.format(endpoint=endpoint) for key, value in ENVIRONMENT.items()}):
            import boto3  # moto's own dependency: obstore cannot create buckets

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
            yield endpoint


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """The environment variables ``values`` set meanwhile, each restored (or removed) afterwards."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def fault_proxy(target: str, log: Path, *, seed: int, fault_rate: float) -> Iterator[str]:
    """``tests.storage.fault_proxy`` in front of ``target``, listing its faults in ``log``; yields its endpoint."""
    with store_proxy(target, log, seed=seed, fault_rate=fault_rate) as proxy:
        yield proxy.endpoint


_NUMBER = re.compile(r"\d{20}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PARTITION = re.compile(r"-\d+(?=/)")  # a topic-partition directory's number


@dataclass(frozen=True, slots=True)
class Request:
    """One request the proxy answered.

    Attributes:
        method: ``GET``, ``PUT``, ``HEAD``, ``POST`` or ``DELETE``.
        path: Its path without the query string, percent-decoded: ``/<bucket>/<key>``.
        query: Its query string as sent (a listing's ``list-type=2&prefix=...``).
        status: The status the client got; None when the proxy dropped the connection instead (a fault).
    """

    method: str
    path: str
    query: str
    status: int | None

    @property
    def key(self) -> str:
        """The object's key below the bucket (empty for a request on the bucket, as a listing is)."""
        return self.path.lstrip("/").partition("/")[2]

    @property
    def kind(self) -> str:
        """What the request was on, comparable between runs: its key; on the bucket itself ``list <prefix>`` for a
        listing and ``?<parameters>`` otherwise (``?delete``: a bulk delete, whose keys are in its body); with the
        20-digit numbers of commit and segment names as ``<n>`` and UUIDs (a sink's or a writer's) as ``<id>``.
        Topic-partition directories are kept."""
        target = self.key
        if not target:
            parameters = parse_qs(self.query, keep_blank_values=True)
            if "list-type" in parameters:
                target = "list " + parameters.get("prefix", [""])[0]
            elif parameters:
                target = "?" + "&".join(sorted(parameters))
        return _UUID.sub("<id>", _NUMBER.sub("<n>", target))

    @property
    def partitionless_kind(self) -> str:
        """``kind`` with the partition of a topic-partition directory as ``<p>``: one kind for every partition."""
        return _PARTITION.sub("-<p>", self.kind)


@dataclass(frozen=True, slots=True)
class StoreProxy:
    """A running proxy (``store_proxy``): its endpoint, and the requests it recorded, read from it over HTTP, so
    that requests from every process (Spark's workers, spawned writers) are counted.

    Attributes:
        endpoint: Its URL, ``http://127.0.0.1:<port>``: an S3 endpoint.
    """

    endpoint: str

    def requests(self, since: int | None = None) -> list[Request]:
        """The requests recorded since the last ``clear``, in the order they were answered; with ``since`` (a
        ``mark``), only those after it."""
        return [Request(**record) for record in json.loads(self._ask("GET", f"{REQUESTS_PATH}?since={since or 0}"))]

    def mark(self) -> int:
        """Where the requests recorded so far end: ``since`` for the requests after this point."""
        return len(self.requests())

    def clear(self) -> None:
        """Forget the requests recorded so far (``mark`` starts again from 0)."""
        self._ask("DELETE", REQUESTS_PATH)

    def count(self, since: int | None = None, method: str | None = None, path_contains: str | None = None) -> int:
        """The requests (after ``since``, if given) of ``method`` and whose path contains ``path_contains``."""
        return len(select(self.requests(since), method=method, path_contains=path_contains))

    def set_delay(self, milliseconds: float) -> None:
        """Delay every request from the next on by ``milliseconds`` in all (``store_proxy``'s ``delay_ms``)."""
        self._ask("PUT", DELAY_PATH, str(milliseconds).encode())

    def summary(self, since: int | None = None) -> str:
        """``summarise`` of the requests (after ``since``, if given): for an assertion's message."""
        return summarise(self.requests(since))

    def _ask(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """The proxy's own answer to ``method`` on ``path`` (straight, whatever HTTP proxy the environment names)."""
        connection = http.client.HTTPConnection(urlsplit(self.endpoint).netloc, timeout=30)
        try:
            connection.request(method, path, body)
            reply = connection.getresponse()
            body = reply.read()
            if reply.status >= 300:
                raise ServerError(f"the proxy answered {method} {path} with {reply.status}: {body[:200]!r}")
            return body
        finally:
            connection.close()


def select(requests: Iterable[Request], method: str | None = None, path_contains: str | None = None) -> list[Request]:
    """The ``requests`` of ``method`` (any, if None) whose path contains ``path_contains`` (any, if None)."""
    return [
        r
        for r in requests
        if (method is None or r.method == method) and (path_contains is None or path_contains in r.path)
    ]


def summarise(requests: Iterable[Request], *, by_partition: bool = True) -> str:
    """Requests counted by method, then by method and kind (``Request.kind``, or ``Request.partitionless_kind``
    unless ``by_partition``) with their statuses, most first: which requests a piece of work made, in a few lines.

    For example::

        3 requests: 2 GET, 1 PUT
          1 GET  t-0/<n>.commit [200]
          1 GET  t-0/<n>.commit [404]
          1 PUT  t-0/<n>.commit [200]
    """
    requests = list(requests)
    methods = Counter(r.method for r in requests)
    kinds = Counter((r.method, r.kind if by_partition else r.partitionless_kind, r.status) for r in requests)
    lines = [f"{len(requests)} requests: " + ", ".join(f"{n} {m}" for m, n in sorted(methods.items()))]
    for (method, kind, status), n in sorted(kinds.items(), key=lambda item: (-item[1], item[0][:2], str(item[0][2]))):
        lines.append(f"  {n} {method:<4} {kind} [{status}]")
    return "\n".join(lines)


@contextmanager
def store_proxy(
    target: str,
    log: Path | None = None,
    *,
    delay_ms: float = 0,
    fault_rate: float = 0.0,
    seed: int = 0,
    drop_conditions: bool = False,
) -> Iterator[StoreProxy]:
    """``tests.storage.fault_proxy`` in front of ``target`` (an S3 endpoint): every request delayed by ``delay_ms``
    in all, a seeded ``fault_rate`` of the writes failed (listed in ``log``), the conditions of writes dropped if
    ``drop_conditions``, every request recorded.

    Raises:
        ServerError: It did not start.
    """
    port = free_port()
    command = [sys.executable, "-m", "tests.storage.fault_proxy", "--target", target, "--port", str(port)]
    options = ["--seed", str(seed), "--fault-rate", str(fault_rate), "--delay-ms", str(delay_ms)]
    options += ["--drop-conditions"] if drop_conditions else []
    with running([*command, *options], port, log):
        yield StoreProxy(f"http://127.0.0.1:{port}")
