"""Sealed segments on an object store: each partition's sections of its topic's commits merged into Kafka's own
segment files, listed by numbered manifests, and the topic's seals (docs/object-storage.md).

Commits are small objects, one per append; readers that start late, and Kafka's tools, want segments. A
*sealer* (any process with a partition of the topic open: a writer past ``storage.seal.commits`` commits since
the topic's last seal, or a maintenance pass) seals every partition that changed since its own last manifest:
it builds the segments that follow that manifest from the partition's sections after it, in a scratch replica
primed with the manifest's producer state, so the engine's own append path writes the ``.log``, ``.index``,
``.timeindex`` and ``.txnindex`` files and the producer ``.snapshot`` at each segment's base. It uploads them
below ``sealed/<generation>-<writer id>/`` (a name no other sealer uses) and then creates
``manifests/<generation>`` only if absent: that create is the partition's seal. A sealer that loses deletes what
it uploaded and looks again. Once every partition is sealed through the commit, the sealer creates the topic's
``seals/<generation>`` below its chain, only if absent, and deletes the commits the seal before it covered (one
seal late, so that a reader in the middle of them finishes); a replica that finds a commit gone reads its
partition's sealed segments instead.

The log cleaner compacts the sealed segments the same way: in a scratch copy of them, downloaded, whose
compacted segments it uploads under the next manifest (same commits, same end), which is created only if
absent like any other.

A manifest: ``PSLM``, the CRC-32C of the JSON that follows (big-endian uint32), then the JSON::

    {"version": 0, "generation": G, "first_commit": <first commit it covers>, "commit": <last commit covered>,
     "end_offset": <offset after it>,
     "log_start_offset": L, "snapshot": "<sealed dir>/<end offset>.snapshot", "cleaned_through": <the
     cleaner's first dirty offset>,
     "segments": [{"base_offset": b, "end_offset": e, "directory": "sealed/<G>-<writer>"}, ...]}

A topic seal: ``PSLS``, the CRC-32C of the JSON that follows, then
``{"version": 0, "generation": S, "first_commit": <first commit it covers>, "commit": <last commit covered>,
"staged": [[<commit>, "<staged object name>"], ...]}``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import crc32c as _crc32c

from pysparklog.errors import CorruptRecordError, StorageConflictError
from pysparklog.storage.io import PutMode, Storage, read_if_exists
from pysparklog.storage.objects.commit_log import NUMBER_DIGITS
from pysparklog.storage.producer_state import SNAPSHOT_SUFFIX
from pysparklog.storage.segment import filename_prefix

MANIFESTS = "manifests"
_MAGIC = b"PSLM"
_SEAL_MAGIC = b"PSLS"
SEALS = "seals"
_CHECKED = struct.Struct(">4sI")  # magic, CRC-32C of the JSON body that follows
SEALED = "sealed"
_VERSION = 0


@dataclass(frozen=True, slots=True)
class SealedSegment:
    """One sealed segment: offsets ``base_offset`` to ``end_offset`` (exclusive), its files in ``directory``
    (below the partition's), named as Kafka names them."""

    base_offset: int
    end_offset: int
    directory: str

    def path(self, partition_dir: str, suffix: str, offset: int | None = None) -> str:
        name = filename_prefix(self.base_offset if offset is None else offset) + suffix
        return f"{partition_dir}/{self.directory}/{name}"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What is sealed: the segments, the last commit they cover and the log's start and end there."""

    generation: int
    first_commit: int
    commit: int
    end_offset: int
    log_start_offset: int
    snapshot: str
    segments: tuple[SealedSegment, ...]
    cleaned_through: int = 0

    def encode(self) -> bytes:
        body = json.dumps(
            {
                "version": _VERSION,
                "generation": self.generation,
                "first_commit": self.first_commit,
                "commit": self.commit,
                "end_offset": self.end_offset,
                "log_start_offset": self.log_start_offset,
                "snapshot": self.snapshot,
                "cleaned_through": self.cleaned_through,
                "segments": [
                    {"base_offset": s.base_offset, "end_offset": s.end_offset, "directory": s.directory}
                    for s in self.segments
                ],
            }
        ).encode()
        return _framed(_MAGIC, body)

    @classmethod
    def decode(cls, data: bytes, path: str) -> Manifest:
        """The manifest in ``data``.

        Raises:
            CorruptRecordError: It is not a manifest of this version, its checksum is wrong, or its segments do not
                follow each other.
        """
        body = _unframed(_MAGIC, data, path, "manifest")
        try:
            document = json.loads(body)
            if document["version"] != _VERSION:
                raise CorruptRecordError(
                    f"manifest version {document['version']!r}, expected {_VERSION} (written by a newer pysparklog?)",
                    file=path,
                )
            segments = tuple(
                SealedSegment(_offset(s["base_offset"]), _offset(s["end_offset"]), str(s["directory"]))
                for s in document["segments"]
            )
            manifest = cls(
                _offset(document["generation"]),
                _offset(document["first_commit"]),
                _offset(document["commit"]),
                _offset(document["end_offset"]),
                _offset(document["log_start_offset"]),
                str(document["snapshot"]),
                segments,
                _offset(document["cleaned_through"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptRecordError(f"not a pysparklog manifest: {error!r}", file=path) from None
        follows = all(a.end_offset == b.base_offset for a, b in zip(segments, segments[1:], strict=False))
        if not follows or (segments and segments[-1].end_offset != manifest.end_offset):
            raise CorruptRecordError("a manifest's segments do not follow each other to its end offset", file=path)
        return manifest


def _framed(magic: bytes, body: bytes) -> bytes:
    return _CHECKED.pack(magic, _crc32c.crc32c(body)) + body


def _unframed(magic: bytes, data: bytes, path: str, what: str) -> bytes:
    """The JSON body of a record framed by ``_framed``.

    Raises:
        CorruptRecordError: The magic or the CRC-32C is wrong.
    """
    if len(data) < _CHECKED.size or data[: len(magic)] != magic:
        raise CorruptRecordError(f"not a pysparklog {what} (no {magic.decode()} header)", file=path)
    _magic, crc = _CHECKED.unpack_from(data)
    body = data[_CHECKED.size :]
    if _crc32c.crc32c(body) != crc:
        raise CorruptRecordError(f"a {what} does not match its CRC-32C", file=path, position=_CHECKED.size)
    return body


@dataclass(frozen=True, slots=True)
class TopicSeal:
    """One sealing of a topic: every partition changed since its own last manifest was sealed through ``commit``,
    so the commits of the seal before it can go (``TopicSeals``), with the staged objects they refer to
    (``staged``: (commit, object name) pairs)."""

    generation: int
    first_commit: int
    commit: int
    staged: tuple[tuple[int, str], ...] = ()

    def encode(self) -> bytes:
        document: dict[str, object] = {"version": _VERSION, "generation": self.generation}
        document |= {"first_commit": self.first_commit, "commit": self.commit}
        document["staged"] = [list(pair) for pair in self.staged]
        return _framed(_SEAL_MAGIC, json.dumps(document).encode())

    @classmethod
    def decode(cls, data: bytes, path: str) -> TopicSeal:
        """The seal in ``data``.

        Raises:
            CorruptRecordError: It is not a topic seal of this version, or its checksum is wrong.
        """
        body = _unframed(_SEAL_MAGIC, data, path, "topic seal")
        try:
            document = json.loads(body)
            if document["version"] != _VERSION:
                raise ValueError(f"version {document['version']!r}, expected {_VERSION}")
            staged = tuple((_offset(number), str(name)) for number, name in document["staged"])
            seal = cls(
                _offset(document["generation"]),
                _offset(document["first_commit"]),
                _offset(document["commit"]),
                staged,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptRecordError(f"not a pysparklog topic seal: {error!r}", file=path) from None
        if seal.first_commit > seal.commit + 1:
            raise CorruptRecordError(f"a topic seal of commits {seal.first_commit} to {seal.commit}", file=path)
        return seal


def _offset(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a non-negative integer")
    return value


class _Generation(Protocol):
    @property
    def generation(self) -> int: ...

    def encode(self) -> bytes: ...


_Record = TypeVar("_Record", bound=_Generation)


class _Generations(Generic[_Record]):
    """Records numbered by generation below ``<directory>/<kind>/``, each created only if absent: the newest is
    the one in force.

    Args:
        storage: The log directory's storage.
        directory: Where the records' directory is, a path of ``storage``.
        kind: The records' directory name.
        decode: Reads one record.
    """

    def __init__(self, storage: Storage, directory: str, kind: str, decode: Callable[[bytes, str], _Record]) -> None:
        self.storage = storage
        self.directory = directory
        self._kind = kind
        self._decode = decode
        self._latest: _Record | None = None

    def path(self, generation: int) -> str:
        return f"{self.directory}/{self._kind}/{generation:0{NUMBER_DIGITS}d}"

    @property
    def known(self) -> _Record | None:
        """The newest record this object has seen, without asking the store."""
        return self._latest

    def latest(self) -> _Record | None:
        """The newest record (one listing, then a probe of the names after it)."""
        generations = [int(n) for n in self.storage.list(f"{self.directory}/{self._kind}") if n.isdigit()]
        generation = max(generations, default=-1)
        while generation >= 0 and (data := read_if_exists(self.storage, self.path(generation + 1))) is not None:
            generation += 1
            self._latest = self._decode(data, self.path(generation))
        if generation < 0:
            return None
        cached = self._latest
        if cached is None or cached.generation != generation:
            data = read_if_exists(self.storage, self.path(generation))
            if data is None:
                raise CorruptRecordError(f"a listed {self._kind} record is gone", file=self.path(generation))
            cached = self._latest = self._decode(data, self.path(generation))
        return cached

    def create(self, record: _Record) -> bool:
        """Create ``record`` if its generation is free; False when another process took it."""
        try:
            self.storage.put(self.path(record.generation), record.encode(), mode=PutMode.CREATE)
        except StorageConflictError:
            return False
        self._latest = record
        return True


class TopicSeals(_Generations[TopicSeal]):
    """The seals of one topic's chain, below its directory."""

    def __init__(self, storage: Storage, chain_directory: str) -> None:
        super().__init__(storage, chain_directory, SEALS, TopicSeal.decode)


class Manifests(_Generations[Manifest]):
    """The manifests of one partition directory on an object store.

    Args:
        storage: The log directory's storage.
        directory: The partition's directory, a path of ``storage``.
    """

    def __init__(self, storage: Storage, directory: str) -> None:
        super().__init__(storage, directory, MANIFESTS, Manifest.decode)

    def snapshot(self, manifest: Manifest, segment: SealedSegment | None = None) -> bytes | None:
        """The producer snapshot at ``segment``'s base (default: at the manifest's end), if there is one."""
        if segment is None:
            return read_if_exists(self.storage, f"{self.directory}/{manifest.snapshot}")
        return read_if_exists(self.storage, segment.path(self.directory, SNAPSHOT_SUFFIX))
