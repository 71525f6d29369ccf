"""What a user sees when the store cannot serve a log directory as it is set up: one line naming the log directory,
the endpoint asked and the setting to check (``pysparklog.errors``), not obstore's error and its debug dump. Against
the real S3 server; refused credentials against one of its own that checks them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from pysparklog.errors import NoSuchBucketError, ObjectStoreError, StoreAccessDeniedError, StoreUnreachableError
from pysparklog.storage.io.object_store import ObjectStorage
from pysparklog.storage.log_dir import LogDirectory
from tests.cli.test_dump_log import run_cli
from tests.s3_server import ENVIRONMENT, environment, free_port, running

MISSING = "s3://pysparklog-no-such-bucket/logs"


def test_a_missing_bucket_is_named_before_anything_is_created_and_when_read(s3_endpoint: str) -> None:
    logs = LogDirectory(ObjectStorage(MISSING, {"aws_endpoint": s3_endpoint}))
    with pytest.raises(NoSuchBucketError, match=rf"{MISSING} does not exist at {s3_endpoint}: check") as created:
        logs.topics.create("t", 1)
    with pytest.raises(NoSuchBucketError, match="AWS_ENDPOINT_URL") as read:
        logs.topics.names()
    for error in (created.value, read.value):
        assert "\n" not in str(error) and "Debug" not in str(error)


def test_an_endpoint_that_does_not_answer_is_named(s3_endpoint: str) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    storage = ObjectStorage("s3://pysparklog/logs", {"aws_endpoint": endpoint})
    with pytest.raises(StoreUnreachableError, match=rf"did not answer at {endpoint}, after its retries: check") as down:
        storage.stat(storage.join("pysparklog-topics.json"))
    assert isinstance(down.value, ObjectStoreError) and "\n" not in str(down.value)


def test_the_cli_says_a_missing_bucket_in_one_line(s3_endpoint: str) -> None:
    done = run_cli("topics", "--create", "--topic", "t", "--partitions", "1", "--log-dir", MISSING)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0] and "NoSuchBucket" not in lines[0], done.stderr


def test_refused_credentials_are_named_with_the_settings_that_hold_them(tmp_path: Path) -> None:
    """moto checks signatures against its IAM users once ``INITIAL_NO_AUTH_ACTION_COUNT`` requests went unchecked:
    the bucket is created by the first, and the log directory's keys, which no IAM user has, are refused."""
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    assert server is not None, "moto_server is installed with the dev extras"
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    checking = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="1")
    with running([server, "-H", "127.0.0.1", "-p", str(port)], port, tmp_path / "moto.log", env=checking):
        with environment({key: value.format(endpoint=endpoint) for key, value in ENVIRONMENT.items()}):
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="pysparklog")
            logs = LogDirectory(ObjectStorage("s3://pysparklog/logs", {"aws_endpoint": endpoint}))
            with pytest.raises(StoreAccessDeniedError, match="AWS_SECRET_ACCESS_KEY") as created:
                logs.topics.create("t", 1)
            with pytest.raises(StoreAccessDeniedError, match=rf"at {endpoint} refused the credentials") as read:
                logs.topics.names()
    for error in (created.value, read.value):
        assert "s3://pysparklog/logs" in str(error) and "\n" not in str(error)
