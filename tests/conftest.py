"""Shared test helpers: where the real broker fixtures live, Kafka's own dump tool, an S3-compatible server (and a
proxy in front of it that counts the requests, for tests of request budgets), and small table builders."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pysparklog import compiled
from pysparklog.spark.storage_options import STORAGE_PREFIX
from pysparklog.storage.objects.log import CACHE_DIR_VARIABLE
from tests.interop.kafka_tools import (
    DumpLogSegments,
    kafka_classpath,
    missing_tools,
    run_dump_log_segments,
    unavailable_reason,
)
from tests.s3_server import ServerError, StoreProxy, s3_server, store_proxy

REPO = Path(__file__).resolve().parents[1]
# Real broker-written segments, kept outside the project (../shared/fixtures) and never copied into it.
BROKER_LOG_DIR = REPO / "tests" / "fixtures" / "kafka-broker-logdir"
#: The bucket of the S3 server (``s3_endpoint``).
BUCKET = "pysparklog-tests"


@pytest.fixture(params=[compiled.AOT, compiled.JIT])
def kernel_implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every kernel module's kernels as the extension compiled them ahead of time, then as numba's JIT compiles
    them: a test that uses this runs once with each, and must get the same results."""
    with compiled.using(request.param):
        yield str(request.param)


@pytest.fixture
def broker_log_dir() -> Path:
    if not BROKER_LOG_DIR.is_dir():
        pytest.fail(f"the broker fixture directory {BROKER_LOG_DIR} is missing")
    return BROKER_LOG_DIR


@pytest.fixture
def broker_log_dir_copy(broker_log_dir: Path, tmp_path: Path) -> Path:
    """A writable copy, for tests that recover or rebuild indexes."""
    target = tmp_path / "broker-logdir"
    shutil.copytree(broker_log_dir, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The endpoint of a moto server with the bucket ``BUCKET``, started once per session (docs/object-storage.md
    says why moto); the AWS_* variables point obstore, and so ``storage_for("s3://...")``, at it meanwhile, and the
    local replicas of its partitions go to a directory of the session (``$PYSPARKLOG_CACHE_DIR``)."""
    saved = os.environ.get(CACHE_DIR_VARIABLE)
    os.environ[CACHE_DIR_VARIABLE] = str(tmp_path_factory.mktemp("replicas"))
    try:
        with s3_server(BUCKET) as endpoint:
            yield endpoint
    except ServerError as error:
        pytest.fail(str(error))
    finally:
        if saved is None:
            os.environ.pop(CACHE_DIR_VARIABLE, None)
        else:
            os.environ[CACHE_DIR_VARIABLE] = saved


def s3_storage_options(endpoint: str) -> dict[str, str]:
    """The data source's ``storage.*`` options that reach the S3 server without the environment's AWS_* settings."""
    return {
        "storage.aws_endpoint": endpoint,
        "storage.allow_http": "true",
        "storage.aws_access_key_id": "pysparklog",
        "storage.aws_secret_access_key": "pysparklog",
        "storage.aws_region": "us-east-1",
    }


def s3_store_options(endpoint: str) -> dict[str, str]:
    """``s3_storage_options`` as obstore's options, ``storage_for``'s and ``ObjectStorage``'s (no ``storage.``)."""
    return {key.removeprefix(STORAGE_PREFIX): value for key, value in s3_storage_options(endpoint).items()}


@dataclass(frozen=True, slots=True)
class CountedS3:
    """The S3 server behind a proxy that records every request (``counted_s3``).

    Attributes:
        proxy: The proxy: its ``endpoint``, and its requests (``requests``, ``count``, ``summary``, ``mark``).
        root: An ``s3://`` URL of the bucket no other test uses, for the test's log directory.
        storage_options: obstore's options that reach the server through the proxy (``storage_for``'s).
        spark_options: The same as the data source's ``storage.*`` options.
    """

    proxy: StoreProxy
    root: str
    storage_options: dict[str, str]
    spark_options: dict[str, str]


@pytest.fixture(scope="session")
def _counting_proxy(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreProxy]:
    """One proxy in front of the session's S3 server, without delay or faults, for every ``counted_s3``."""
    try:
        with store_proxy(s3_endpoint, tmp_path_factory.mktemp("proxy") / "proxy.log") as proxy:
            yield proxy
    except ServerError as error:
        pytest.fail(str(error))


@pytest.fixture
def counted_s3(_counting_proxy: StoreProxy) -> CountedS3:
    """The session's S3 server through a proxy that counts every request, its count cleared for the test.

    Every store made for ``root`` (or below it) in this process goes through the proxy once the test's first call
    is ``storage_for(counted_s3.root, counted_s3.storage_options)``: later calls without options get the options
    first given for the root. Spark queries take ``spark_options``. A budget test::

        storage = storage_for(counted_s3.root, counted_s3.storage_options)
        ...  # set-up
        before = counted_s3.proxy.mark()
        ...  # the work whose requests are budgeted
        assert counted_s3.proxy.count(since=before, method="PUT") <= 1, counted_s3.proxy.summary(since=before)
    """
    _counting_proxy.clear()
    return CountedS3(
        _counting_proxy,
        f"s3://{BUCKET}/counted-{uuid.uuid4().hex[:12]}",
        s3_store_options(_counting_proxy.endpoint),
        s3_storage_options(_counting_proxy.endpoint),
    )


@pytest.fixture(scope="session")
def kafka_dump_log() -> DumpLogSegments:
    """``run_dump_log_segments``, once Kafka's classpath is resolved (for ``interop`` tests anywhere).

    Skips only when Java or Maven is absent (e.g. a developer laptop). With both present a
    resolution failure is a real failure: CI has both, and a silent skip would hide lost coverage.
    """
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"Kafka interop tests need Java and Maven: {missing}")
    if kafka_classpath() is None:
        pytest.fail(f"Java and Maven are present but Kafka's tools could not be resolved:\n{unavailable_reason()}")
    return run_dump_log_segments


def keyed_table(n: int, *, start: int = 0, value_size: int = 100, ts_start: int = 1_700_000_000_000) -> pa.Table:
    """``n`` rows with keys ``k<i>``, values of ``value_size`` bytes naming their row, increasing timestamps."""
    rows = range(start, start + n)
    return pa.table(
        {
            "key": pa.array([f"k{i}".encode() for i in rows], pa.binary()),
            "value": pa.array([f"v{i}:".encode().ljust(value_size, b".") for i in rows], pa.binary()),
            "timestamp": pa.array(np.arange(ts_start + start, ts_start + start + n), pa.int64()),
        }
    )


def read_all(log: object, *args: object, **kwargs: object) -> pa.Table:
    batches = list(log.read_arrow(*args, **kwargs))  # type: ignore[attr-defined]
    if not batches:
        return pa.table({"offset": pa.array([], pa.int64())})
    return pa.Table.from_batches(batches)
