"""The storage backends the engine's tests run on, the object store's against a real S3-compatible server
(``s3_endpoint`` of tests/conftest.py: moto's standalone server, a process on loopback started once per test
session). A backend joins the tests that take the ``storage`` fixture by adding itself to ``BACKENDS`` (a
function of a root no other test uses)."""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pysparklog.storage.io import PosixStorage, Storage
from pysparklog.storage.io.object_store import ObjectStorage
from tests.conftest import BUCKET
from tests.s3_server import fault_proxy


@pytest.fixture
def faulty_s3_endpoint(s3_endpoint: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A proxy in front of the S3 server failing 30% of the writes (``fault_proxy``), seeded: its endpoint,
    and the file where it lists the faults it made."""
    log = tmp_path / "faults.log"
    with fault_proxy(s3_endpoint, log, seed=7, fault_rate=0.3) as endpoint:
        yield endpoint, log


BACKENDS: dict[str, Callable[[str], Storage]] = {
    "posix": PosixStorage,
    "s3": lambda root: ObjectStorage(f"s3://{BUCKET}/{root.strip('/')}"),
}
#: The backends that need the S3 server running.
_ON_S3 = {"s3"}


def _root(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A root of its own for the test: a local directory, or the same path as a prefix of the bucket."""
    if backend in _ON_S3:
        request.getfixturevalue("s3_endpoint")
    return str(tmp_path / "logs")


def storage_on(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """A storage of its own for the test on ``backend``: what ``storage`` gives, for the fixtures of tests outside
    this directory, which its fixtures do not reach."""
    return BACKENDS[backend](_root(backend, request, tmp_path))


@pytest.fixture(params=sorted(BACKENDS))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return storage_on(request.param, request, tmp_path)


@pytest.fixture(params=sorted(BACKENDS))
def backend_and_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A backend's name and a root, for tests whose other processes open the storage themselves."""
    return request.param, _root(request.param, request, tmp_path)


def run_processes(target: Callable[..., None], args: list[tuple[object, ...]], timeout: float = 300) -> None:
    """Run ``target`` in a process per tuple of ``args``, all at once, and check that each ended well. Spawned,
    not forked: a forked child inherits obstore's runtime without its threads."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=one) for one in args]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout)
        assert process.exitcode == 0, f"{target.__name__}{process.name} exited with {process.exitcode}"


def run_with_a_poller(
    poll: Callable[..., None],
    poll_args: tuple[object, ...],
    target: Callable[..., None],
    args: list[tuple[object, ...]],
) -> list[Any]:
    """``run_processes(target, args)`` while another process runs ``poll(*poll_args, seen, stop)``, which puts what
    it observes in the queue ``seen`` until the event ``stop`` is set (once the others ended); returns what it put
    there, in order."""
    context = multiprocessing.get_context("spawn")
    seen, stop = context.Queue(), context.Event()
    poller = context.Process(target=poll, args=(*poll_args, seen, stop))
    poller.start()
    try:
        run_processes(target, args)
    finally:
        stop.set()
    observed = []
    while poller.is_alive() or not seen.empty():
        try:
            observed.append(seen.get(timeout=1))
        except queue.Empty:
            poller.join(1)
    return observed


class NoLock:
    """A lock that excludes nothing: what a holder whose lease ran out while it stalled holds, for the tests of
    the conditional writes that keep such a holder from overwriting the next one's change."""

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        yield None

    def close(self) -> None:
        pass
