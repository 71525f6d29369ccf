"""Real server processes on loopback for the object-store backend: moto's standalone S3 server (from the
dev extras) and the fault-injecting proxy (``tests.storage.fault_proxy``). Used by the storage tests'
fixtures and by the object-store benchmark; docs/object-storage.md says why moto."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
    saved = {key: os.environ.get(key) for key in ENVIRONMENT}
    with running([server, "-H", "127.0.0.1", "-p", str(port)], port, log):
        try:
            os.environ.update({key: value.format(endpoint=endpoint) for key, value in ENVIRONMENT.items()})
            import boto3  # moto's own dependency: obstore cannot create buckets

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
            yield endpoint
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@contextmanager
def fault_proxy(target: str, log: Path, *, seed: int, fault_rate: float) -> Iterator[str]:
    """``tests.storage.fault_proxy`` in front of ``target``, listing its faults in ``log``; yields its endpoint."""
    port = free_port()
    command = [sys.executable, "-m", "tests.storage.fault_proxy", "--target", target, "--port", str(port)]
    with running([*command, "--seed", str(seed), "--fault-rate", str(fault_rate)], port, log):
        yield f"http://127.0.0.1:{port}"
