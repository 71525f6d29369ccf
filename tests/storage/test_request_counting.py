"""The request counting that request budgets rest on: the proxy in front of the S3 server (``tests.storage.fault_proxy``
through ``tests.s3_server.store_proxy``) records what the store was asked, exactly, and delays it as asked.

On a real store requests are billed and each takes a round trip, so budget tests count them where the store
would: these tests check that the count is exact, request for request, and that the delay is applied.
"""

from __future__ import annotations

import http.client
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pysparklog import LogDirectory
from pysparklog.storage.io import PutMode, storage_for
from pysparklog.storage.io.object_store import ObjectStorage
from tests.conftest import BUCKET, CountedS3, s3_store_options
from tests.s3_server import Request, StoreProxy, select, store_proxy, summarise
from tests.storage.fault_proxy import FAULTS

DELAY_MS = 50
_COMMIT = "t-0/00000000000000000007.commit"


def _path(counted_s3: CountedS3, name: str) -> str:
    """The path the proxy records for ``name`` below the test's root: ``/<bucket>/<prefix>/<name>``."""
    return f"/{counted_s3.root.removeprefix('s3://')}/{name}"


def _checked(storage: ObjectStorage, proxy: StoreProxy) -> ObjectStorage:
    """``storage`` once its conditional writes were checked (before its first write), with the proxy's record of the
    check forgotten: what these tests count is each call's own requests."""
    storage.check_conditional_writes()
    proxy.clear()
    return storage


def test_each_storage_call_is_counted_as_the_requests_it_made(counted_s3: CountedS3) -> None:
    storage = _checked(ObjectStorage(counted_s3.root, counted_s3.storage_options), counted_s3.proxy)
    commit = storage.join(_COMMIT)
    storage.put(commit, b"0123456789", mode=PutMode.CREATE)
    assert storage.read(commit) == b"0123456789"
    stat = storage.stat(commit)
    assert stat is not None and stat.size == 10, "a HEAD's length passes through the proxy"
    assert storage.read(commit, 2, 3) == b"234"
    assert storage.stat(storage.join("absent")) is None

    path = _path(counted_s3, _COMMIT)
    assert counted_s3.proxy.requests() == [
        Request("PUT", path, "", 200),
        Request("GET", path, "", 200),
        Request("HEAD", path, "", 200),
        Request("GET", path, "", 206),
        Request("HEAD", _path(counted_s3, "absent"), "", 404),
    ]


def test_counts_select_by_method_path_and_mark(counted_s3: CountedS3) -> None:
    storage = _checked(ObjectStorage(counted_s3.root, counted_s3.storage_options), counted_s3.proxy)
    storage.put(storage.join(_COMMIT), b"x", mode=PutMode.CREATE)
    before = counted_s3.proxy.mark()
    storage.put(storage.join("t-1/00000000000000000000.commit"), b"y", mode=PutMode.CREATE)
    storage.read(storage.join(_COMMIT))

    proxy = counted_s3.proxy
    assert (before, proxy.count(), proxy.count(since=before)) == (1, 3, 2)
    assert (proxy.count(method="PUT"), proxy.count(since=before, method="PUT")) == (2, 1)
    assert proxy.count(path_contains="/t-0/") == 2
    assert proxy.count(since=before, method="GET", path_contains="/t-1/") == 0
    proxy.clear()
    assert proxy.requests() == [] and proxy.mark() == 0


def test_a_summary_names_each_kind_of_request_with_its_numbers_elided(counted_s3: CountedS3) -> None:
    storage = _checked(ObjectStorage(counted_s3.root, counted_s3.storage_options), counted_s3.proxy)
    for number in range(3):
        storage.put(storage.join(f"t-0/{number:020d}.commit"), b"x", mode=PutMode.CREATE)
    assert storage.list(storage.join("t-0")) == [f"{number:020d}.commit" for number in range(3)]
    storage.delete_tree(storage.join("t-0"))  # a listing, then one bulk delete of what it found

    prefix = counted_s3.root.removeprefix(f"s3://{BUCKET}/")
    assert summarise(counted_s3.proxy.requests()).splitlines() == [
        "6 requests: 2 GET, 1 POST, 3 PUT",
        f"  3 PUT  {prefix}/t-0/<n>.commit [200]",
        f"  2 GET  list {prefix}/t-0/ [200]",
        "  1 POST ?delete [200]",
    ]
    assert counted_s3.proxy.summary(since=3).splitlines()[0] == "3 requests: 2 GET, 1 POST"


def test_the_options_given_first_for_a_root_route_every_later_store_of_it_through_the_proxy(
    counted_s3: CountedS3,
) -> None:
    storage_for(counted_s3.root, counted_s3.storage_options)
    LogDirectory(counted_s3.root).topics.create("t", 2)
    requests = counted_s3.proxy.requests()
    assert select(requests, method="PUT", path_contains="/t-1/"), summarise(requests)
    on_objects = [r for r in requests if r.key]  # not those on the bucket: listings, bulk deletes
    assert all(r.path.startswith(_path(counted_s3, "")) for r in on_objects), summarise(requests)


@pytest.mark.parametrize("set_later", [False, True], ids=["started-with-it", "set-later"])
def test_every_request_waits_the_delay(s3_endpoint: str, tmp_path: Path, set_later: bool) -> None:
    with store_proxy(s3_endpoint, tmp_path / "proxy.log", delay_ms=0 if set_later else DELAY_MS) as proxy:
        if set_later:
            proxy.set_delay(DELAY_MS)
        storage = _checked(
            ObjectStorage(f"s3://{BUCKET}/{tmp_path.name}-delayed", s3_store_options(proxy.endpoint)), proxy
        )
        path = storage.join("object")
        storage.put(path, b"x")  # the client's connection is open: the HEAD below is one round trip
        started = time.perf_counter()
        assert storage.stat(path) is not None
        assert time.perf_counter() - started >= DELAY_MS / 1000
        assert [r.method for r in proxy.requests()] == ["PUT", "HEAD"]


def test_a_failed_write_is_recorded_with_the_status_its_client_got(s3_endpoint: str, tmp_path: Path) -> None:
    with store_proxy(s3_endpoint, tmp_path / "faults.log", fault_rate=1.0, seed=3) as proxy:
        seen: list[int | None] = []
        for n in range(12):
            connection = http.client.HTTPConnection(urlsplit(proxy.endpoint).netloc, timeout=30)
            try:
                connection.request("PUT", f"/{BUCKET}/{tmp_path.name}-faults/{n}", body=b"x")
                seen.append(connection.getresponse().status)
            except http.client.RemoteDisconnected:
                seen.append(None)
            finally:
                connection.close()
        assert [r.status for r in proxy.requests()] == seen
    assert {line.split(":")[0] for line in (tmp_path / "faults.log").read_text().splitlines()} == {
        f"fault {kind}" for kind in FAULTS
    }, "every kind of fault, each logged"
    assert set(seen) == {503, 500, None}


def test_a_kind_elides_numbers_and_ids_and_can_elide_partitions() -> None:
    commits = [Request("PUT", f"/{BUCKET}/root/t-{p}/{p:020d}.commit", "", 200) for p in (0, 12)]
    assert [r.kind for r in commits] == ["root/t-0/<n>.commit", "root/t-12/<n>.commit"]
    assert {r.partitionless_kind for r in commits} == {"root/t-<p>/<n>.commit"}
    sink = Request(
        "GET", f"/{BUCKET}/root/pysparklog-sink.pysparklog-sink-c49801d2-da63-4046-a832-581518c4df44.json", "", 200
    )
    assert sink.kind == "root/pysparklog-sink.pysparklog-sink-<id>.json"
    listing = Request("GET", f"/{BUCKET}", "delimiter=%2F&list-type=2&prefix=root%2Ft-3%2F", 200)
    assert (listing.kind, listing.partitionless_kind) == ("list root/t-3/", "list root/t-<p>/")
    assert summarise([*commits, listing], by_partition=False).splitlines() == [
        "3 requests: 1 GET, 2 PUT",
        "  2 PUT  root/t-<p>/<n>.commit [200]",
        "  1 GET  list root/t-<p>/ [200]",
    ]
