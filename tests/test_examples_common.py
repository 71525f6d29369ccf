"""What the examples and notebooks share (``examples.common``): where they may write."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.common import fresh_dir


def test_fresh_dir_refuses_a_url_instead_of_making_a_local_directory_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook given ``s3://...`` where only a directory will do (a broker's log directory is copied file by
    file) stops with the reason; it does not make ``./s3:/bucket/...`` and carry on there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="s3://bucket/prefix/logs is a URL: a directory is needed here"):
        fresh_dir("s3://bucket/prefix/logs")
    assert not any(tmp_path.iterdir())
