"""Endpoints serving a temporary log directory, for the endpoint's tests; skipped where kio is not installed
(Python 3.10: kio supports 3.11 and later)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("kio", reason="the endpoint needs kio (Python 3.11+, the serve extra)")

from pysparklog.endpoint import Endpoint, EndpointConfig  # noqa: E402
from pysparklog.storage.log_dir import LogDirectory  # noqa: E402


@pytest.fixture
def log_dir(tmp_path: Path) -> LogDirectory:
    return LogDirectory(str(tmp_path / "logs"))


@pytest.fixture
def endpoint(log_dir: LogDirectory) -> Iterator[Endpoint]:
    """One endpoint on a free loopback port."""
    with Endpoint(log_dir, EndpointConfig(port=0)) as started:
        yield started
