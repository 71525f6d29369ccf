"""A progress bar on stderr for long operations (deleting a topic of many partitions...), on a terminal only:
piped or redirected output stays exactly what the command prints."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from pysparklog.storage.topics import Progress

_WIDTH = 30
_REDRAW_S = 0.1


class _Bar:
    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.drawn_at: float | None = None

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and self.drawn_at is not None and now - self.drawn_at < _REDRAW_S:
            return
        filled = _WIDTH * done // max(total, 1)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {done}/{total}")
        self.stream.flush()
        self.drawn_at = now

    def clear(self) -> None:
        if self.drawn_at is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


@contextmanager
def progress_bar(label: str, stream: TextIO | None = None) -> Iterator[Progress | None]:
    """A callback drawing ``label [#####.....] done/total``, erased at the end; None when ``stream`` (default
    stderr) is not a terminal."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield None
        return
    bar = _Bar(label, stream)
    try:
        yield bar.update
    finally:
        bar.clear()
