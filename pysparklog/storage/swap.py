"""The crash-safe swap of compacted segments into a partition (Kafka's ``replaceSegments``).

The cleaner writes ``<base>.log.cleaned`` (and ``.index.cleaned``, ``.timeindex.cleaned``, ``.txnindex.cleaned``).
Under the partition's write lock a marker, ``pysparklog.swap``, records the swap; the ``.cleaned``
files become ``.swap``, the old segments become ``.deleted``, and the ``.swap`` files take the final
names. Whoever takes the lock next finishes a swap a crash interrupted, from the marker, or from the
``.swap`` files when the marker cannot be read (as Kafka's ``LogLoader`` does).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pysparklog.storage.io import read_if_exists
from pysparklog.storage.log_segments import LogSegments
from pysparklog.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
    parse_segment_name,
)

SWAP_MARKER = "pysparklog.swap"  # present while a compaction swaps segments in
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SwapMarker:
    """``pysparklog.swap``: the cleaned segment ``new`` replaces the segments ``old``; ``phase`` says
    how far the swap got ("swap": renames may be under way; "finish": only the ``.swap`` files are left)."""

    new: int
    old: list[int]
    phase: str

    def encode(self) -> bytes:
        return json.dumps({"old": self.old, "new": self.new, "phase": self.phase}).encode()

    @classmethod
    def decode(cls, data: bytes) -> SwapMarker | None:
        """The swap marker in ``data``; None when it is not one."""
        try:
            marker = json.loads(data)
            new, old, phase = marker["new"], marker["old"], marker["phase"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(old, list) or phase not in ("swap", "finish"):
            return None
        if any(isinstance(b, bool) or not isinstance(b, int) for b in [new, *old]):
            return None
        return cls(new, old, phase)


def swap_pending(segments: LogSegments) -> bool:
    """Whether a swap's marker is there (a process died in it, or one is under way)."""
    return segments.storage.stat(segments.path(SWAP_MARKER)) is not None


def cleaned_files_ready(segments: LogSegments, cleaned_base: int) -> bool:
    """Whether the cleaner's ``.cleaned`` files of ``cleaned_base`` are all there."""
    cleaned = LogSegment(segments.directory, cleaned_base, CLEANED_SUFFIX, storage=segments.storage)
    return all(
        segments.storage.stat(path) is not None
        for path in (cleaned.log_path, cleaned.index_path, cleaned.time_index_path)
    )


def discard_cleaned(segments: LogSegments, cleaned_base: int) -> None:
    """Remove the ``.cleaned`` files of ``cleaned_base`` (a swap that cannot happen)."""
    LogSegment(segments.directory, cleaned_base, CLEANED_SUFFIX, storage=segments.storage).delete_files()


def begin_swap(segments: LogSegments, cleaned_base: int, old_bases: Sequence[int]) -> None:
    """Record the swap of ``cleaned_base`` in for ``old_bases``; ``complete_pending_swap`` then does it."""
    marker = SwapMarker(int(cleaned_base), [int(b) for b in old_bases], "swap")
    segments.storage.put(segments.path(SWAP_MARKER), marker.encode())


def complete_pending_swap(segments: LogSegments) -> bool:
    """Finish a segment swap from its marker; every step is idempotent. Runs under the write lock.

    Returns:
        Whether there was a swap to finish (the segments then changed: the caller records a new
        segments generation).
    """
    path = segments.path(SWAP_MARKER)
    data = read_if_exists(segments.storage, path)
    if data is None:
        return False
    marker = SwapMarker.decode(data)
    if marker is None:
        _log.warning("%s cannot be read; finishing the swap from the files", path)
        marker = _swap_from_files(segments)
    if marker is not None:
        storage, directory = segments.storage, segments.directory
        if marker.phase == "swap":
            LogSegment(directory, marker.new, CLEANED_SUFFIX, storage=storage).rename_files(SWAP_SUFFIX)
            for base in marker.old:
                LogSegment(directory, base, storage=storage).rename_files(DELETED_SUFFIX)
            marker = replace(marker, phase="finish")
            storage.put(path, marker.encode())
        LogSegment(directory, marker.new, SWAP_SUFFIX, storage=storage).rename_files("")
        for base in marker.old:
            segments.forget(base)
        segments.forget(marker.new)
    segments.storage.delete(path)
    segments.bases = []
    return True


def _swap_from_files(segments: LogSegments) -> SwapMarker | None:
    """The swap the files show, for a marker that cannot be read; None when no file was swapped yet.

    With ``<new>.log.swap`` there, the segments it replaces are the live ones in its offset range
    (Kafka: those overlapping [its base, its next offset)), and the swap is redone from its first
    phase; with only index files left as ``.swap``, only its last step is.
    """
    swapped = sorted(
        {
            base
            for name in segments.names()
            for suffix in SEGMENT_SUFFIXES
            if (base := parse_segment_name(name, suffix + SWAP_SUFFIX)) is not None
        }
    )
    if not swapped:
        return None
    new = swapped[0]
    incoming = LogSegment(segments.directory, new, SWAP_SUFFIX, storage=segments.storage)
    try:
        end = incoming.end_offset(incoming.size())
    except FileNotFoundError:
        return SwapMarker(new, [], "finish")
    return SwapMarker(new, [b for b in segments.list() if new <= b < max(end, new + 1)], "swap")
