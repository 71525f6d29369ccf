"""The storage backends the engine's tests run on, the object store's against a real S3-compatible server:
moto's standalone server, a process on loopback started once per test session (docs/object-storage.md
says why moto). A backend joins the tests that take the ``storage`` fixture by adding itself to
``BACKENDS`` (a function of a root no other test uses)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pysparklog.storage.io import PosixStorage, Storage
from pysparklog.storage.io.object_store import ObjectStorage

BUCKET = "pysparklog-tests"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _started(command: list[str], port: int, log: Path | None = None) -> subprocess.Popen[bytes]:
    """``command`` started (from the repository, its stderr in ``log``), once it listens on ``port`` of loopback."""
    with open(log if log is not None else os.devnull, "wb") as stderr:  # the child keeps its own descriptor
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=Path(__file__).parents[2])
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"{command[0]} did not start on port {port}")
            time.sleep(0.1)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The endpoint of a moto server with the bucket ``BUCKET``; the AWS_* variables point obstore at it."""
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    if server is None:
        pytest.fail("moto_server is not installed: make setup installs moto[server] with the dev extras")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = _started([server, "-H", "127.0.0.1", "-p", str(port)], port)
    saved = {key: os.environ.get(key) for key in _ENVIRONMENT}
    try:
        os.environ.update({key: value.format(endpoint=endpoint) for key, value in _ENVIRONMENT.items()})
        import boto3  # moto's own dependency: obstore cannot create buckets

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        process.terminate()
        process.wait(30)


@pytest.fixture
def faulty_s3_endpoint(s3_endpoint: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A proxy in front of the S3 server failing 30% of the writes (``fault_proxy``), seeded: its endpoint,
    and the file where it lists the faults it made."""
    port = _free_port()
    log = tmp_path / "faults.log"
    command = [sys.executable, "-m", "tests.storage.fault_proxy", "--target", s3_endpoint, "--port", str(port)]
    process = _started([*command, "--seed", "7", "--fault-rate", "0.3"], port, log)
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(30)


_ENVIRONMENT = {
    "AWS_ENDPOINT_URL": "{endpoint}",
    "AWS_ALLOW_HTTP": "true",
    "AWS_ACCESS_KEY_ID": "pysparklog",
    "AWS_SECRET_ACCESS_KEY": "pysparklog",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


BACKENDS: dict[str, Callable[[str], Storage]] = {
    "posix": PosixStorage,
    "s3": lambda root: ObjectStorage(f"s3://{BUCKET}/{root.strip('/')}"),
}
#: The backends that need the S3 server running.
_ON_S3 = {"s3"}


def _root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A root of its own for the test: a local directory, or the same path as a prefix of the bucket."""
    if request.param in _ON_S3:
        request.getfixturevalue("s3_endpoint")
    return str(tmp_path / "logs")


@pytest.fixture(params=sorted(BACKENDS))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return BACKENDS[request.param](_root(request, tmp_path))


@pytest.fixture(params=sorted(BACKENDS))
def backend_and_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A backend's name and a root, for tests whose other processes open the storage themselves."""
    return request.param, _root(request, tmp_path)
