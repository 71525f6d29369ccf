"""``storage_for``: which backend serves a location, object stores kept per root and options, and the errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pysparklog.errors import InvalidLogDirectoryError
from pysparklog.storage.io import FileSystemStorage, PosixStorage, storage_for
from pysparklog.storage.io.object_store import ObjectStorage
from tests.conftest import BUCKET


def test_a_path_or_file_url(tmp_path: Path) -> None:
    assert storage_for(tmp_path).root == str(tmp_path)
    assert storage_for(f"file://{tmp_path}").root == str(tmp_path)
    storage = PosixStorage(tmp_path)
    assert storage_for(storage) is storage


@pytest.mark.parametrize(
    ("location", "root"),
    [
        ("s3://parse-only/logs", "s3://parse-only/logs"),
        ("s3a://parse-only/a/b/", "s3://parse-only/a/b"),
        ("S3://parse-only/upper", "s3://parse-only/upper"),
        ("gs://parse-only/logs", "gs://parse-only/logs"),
        ("abfss://c@account.dfs.core.windows.net/logs", "abfss://c@account.dfs.core.windows.net/logs"),
        ("abfs://c@account.dfs.core.windows.net/logs", "abfs://c@account.dfs.core.windows.net/logs"),
    ],
)
def test_an_object_store_url(location: str, root: str) -> None:
    storage = storage_for(location)
    assert isinstance(storage, ObjectStorage)
    assert storage.root == root
    assert not isinstance(storage, FileSystemStorage)


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("ftp://host/logs", "unknown scheme 'ftp'; accepted: a filesystem path, a file:// URL, or an object-store URL"),
        ("s3://", "names no bucket or container; accepted: .*s3://<bucket>"),
        ("gs:///logs", "names no bucket or container"),
        ("az://container/logs", "Account must be specified"),  # nor AZURE_STORAGE_ACCOUNT_NAME in the environment
    ],
)
def test_a_location_no_store_serves(location: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    with pytest.raises(InvalidLogDirectoryError, match=message):
        storage_for(location)


def test_options_the_store_does_not_know() -> None:
    with pytest.raises(InvalidLogDirectoryError, match="'no_such_option' is not valid for store 'S3'"):
        storage_for("s3://parse-only/bad-options", {"no_such_option": "1"})


def test_a_filesystem_path_does_not_load_obstore(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from pysparklog import LogDirectory\n"
        "from pysparklog.storage.io import storage_for\n"
        f"storage_for({str(tmp_path)!r}); storage_for('file://' + {str(tmp_path)!r})\n"
        f"LogDirectory({str(tmp_path)!r}).topics.create('t')\n"
        "print('obstore' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.split() == ["False"]


def test_a_store_is_kept_per_root(tmp_path: Path) -> None:
    root = f"s3://{BUCKET}{tmp_path}"
    storage = storage_for(root)
    assert storage_for(root + "/") is storage
    assert storage_for(root.replace("s3://", "s3a://")) is storage
    assert storage_for(root + "-other") is not storage


def test_the_options_first_given_for_a_root_serve_later_calls(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The environment no longer lets a store speak plain HTTP to the server: only the options do.
    monkeypatch.setenv("AWS_ALLOW_HTTP", "false")
    root = f"s3://{BUCKET}{tmp_path}"
    configured = storage_for(root, {"aws_allow_http": "true", "aws_endpoint": s3_endpoint})
    configured.put(configured.join("t-0", "partition.metadata"), b"x")
    again = storage_for(root)  # as the modules finding a log directory's storage from its URL ask
    assert again is configured
    below = storage_for(root + "/t-0")  # a partition's directory: the options of the root above it
    assert below.read(below.join("partition.metadata")) == b"x"
    assert storage_for(root, {"aws_allow_http": "true", "aws_endpoint": s3_endpoint}) is configured
