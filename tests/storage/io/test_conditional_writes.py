"""A store must honour conditional writes, or writers of one log directory overwrite each other's commits: checked
once per log directory in a process, before its first write, against the real S3 server, straight and behind a
proxy that drops the conditions as some S3-compatible stores and gateways do (``tests.storage.fault_proxy``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from pysparklog.errors import ConditionalWritesUnsupportedError
from pysparklog.storage.io import storage_for
from pysparklog.storage.io.object_store import PROBE_DIRECTORY, ObjectStorage
from pysparklog.storage.log_dir import LogDirectory
from tests.conftest import BUCKET, CountedS3
from tests.s3_server import store_proxy


def test_a_store_ignoring_conditions_is_refused_before_anything_is_written(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_CACHE_DIR", str(tmp_path / "replicas"))
    root = f"s3://{BUCKET}/{tmp_path.name}-ignoring"
    with store_proxy(s3_endpoint, tmp_path / "proxy.log", drop_conditions=True) as proxy:
        ignoring = ObjectStorage(root, {"aws_endpoint": proxy.endpoint})
        with pytest.raises(ConditionalWritesUnsupportedError, match=rf"{root}.*If-None-Match") as refused:
            LogDirectory(ignoring).topics.create("t", 3)
        assert "\n" not in str(refused.value)
        with pytest.raises(ConditionalWritesUnsupportedError):  # asked again: refused again, not remembered as fine
            ignoring.put(ignoring.join("anything"), b"v")
    straight = ObjectStorage(root, {"aws_endpoint": s3_endpoint})
    assert straight.list(straight.join()) == [], "nothing, not even the probe, is left in the log directory"


def test_a_store_honouring_conditions_is_checked_once_per_log_directory(counted_s3: CountedS3) -> None:
    storage = storage_for(counted_s3.root, counted_s3.storage_options)
    proxy = counted_s3.proxy
    before = proxy.mark()
    storage.put(storage.join("first"), b"1")
    # The probe created, created again (refused), replaced with a wrong version (refused, then looked at to say
    # why) and deleted; then the write itself.
    assert proxy.count(since=before, method="PUT", path_contains=PROBE_DIRECTORY) == 3, proxy.summary(since=before)
    assert proxy.count(since=before) == 6, proxy.summary(since=before)
    assert proxy.count(since=before, method="PUT", path_contains="/first") == 1
    before = proxy.mark()
    storage.put(storage.join("second"), b"2")
    storage_for(counted_s3.root).put(storage.join("third"), b"3")  # the same log directory, looked up again
    assert proxy.count(since=before) == 2, proxy.summary(since=before)
    assert storage.list(storage.join()) == ["first", "second", "third"]


def test_a_checked_store_goes_to_another_process_with_its_answer(counted_s3: CountedS3) -> None:
    """A store travels to Spark's executors pickled, inside a reader or a writer."""
    storage = ObjectStorage(counted_s3.root, counted_s3.storage_options)
    storage.put(storage.join("first"), b"1")
    before = counted_s3.proxy.mark()
    copy = pickle.loads(pickle.dumps(storage))
    copy.put(copy.join("second"), b"2")
    assert counted_s3.proxy.count(since=before) == 1, counted_s3.proxy.summary(since=before)
    assert copy.read(copy.join("first")) == b"1"
