"""A progress bar on stderr for long operations (deleting a topic of many partitions...), drawn by tqdm on a terminal
only: piped or redirected output stays exactly what the command prints."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from tqdm import tqdm

from pysparklog.storage.topics import Progress

_REDRAW_S = 0.1
#: The size assumed of a terminal that does not tell its own (a pseudo-terminal whose size was never set), where
#: tqdm would draw nothing.
_DEFAULT_SIZE = os.terminal_size((80, 24))
#: tqdm's default layout without the rate, whose unit (steps of the operation) says nothing.
_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]"


class _Bar:
    """A tqdm bar made at the first report, once the total is known, and started again when the total changes (an
    operation in several phases, as deleting a topic's directories after renaming them)."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self._label = label
        self._stream = stream
        self.bar: tqdm[None] | None = None

    def update(self, done: int, total: int) -> None:
        if self.bar is None:
            size = _terminal_size(self._stream)
            self.bar = tqdm(
                desc=self._label,
                total=total,
                file=self._stream,
                leave=False,
                mininterval=_REDRAW_S,
                bar_format=_FORMAT,
                ncols=size.columns or _DEFAULT_SIZE.columns,
                nrows=size.lines or _DEFAULT_SIZE.lines,
            )
        elif self.bar.total != total:
            self.bar.reset(total=total)
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.bar.refresh()  # the last step is always shown, whenever the one before was drawn


def _terminal_size(stream: TextIO) -> os.terminal_size:
    try:
        return os.get_terminal_size(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # not a file descriptor's terminal
        return _DEFAULT_SIZE


@contextmanager
def progress_bar(label: str, stream: TextIO | None = None) -> Iterator[Progress | None]:
    """A ``(done, total)`` callback drawing ``label``, a bar and ``done/total``, erased at the end; None when
    ``stream`` (default stderr) is not a terminal."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield None
        return
    bar = _Bar(label, stream)
    try:
        yield bar.update
    finally:
        if bar.bar is not None:
            bar.bar.close()
