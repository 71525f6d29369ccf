"""Damage to one file of a log directory, drawn from ``(seed, index)`` so that every mutant can be replayed.

Mutant ``index`` damages a file of kind ``KINDS[index % len(KINDS)]``, so every kind gets the same share
of any run and ``-k <kind>`` runs exactly the mutants of that kind that a full run has. The rest (which
file, which damage, where) comes from ``random.Random(f"{seed}:{index}")`` over the source directory's
files, listed in sorted order.

Negative indexes are the foreign copies (``foreign_copies``), the same in every run: each segment and
state record replaced by the file of the same name from another partition of its topic, records that
are well formed but not this partition's, which random draws reach too rarely.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tests.fuzz.source import Batch, Truth

#: File kinds, each with the files of the source directory that belong to it.
KINDS = (
    "log",
    "index",
    "timeindex",
    "txnindex",
    "snapshot",
    "state",
    "leader-epoch-checkpoint",
    "partition.metadata",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "topics",
    "producer-ids",
    "txn-state",
    "group-state",
    "consumer-offsets",
)
OFFSETS_DIR_PREFIX = "__consumer_offsets-"
_ROOT_FILES = {
    "recovery-point-offset-checkpoint": "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint": "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint": "cleaner-offset-checkpoint",
    "pysparklog-topics.json": "topics",
    "pysparklog-producer-ids": "producer-ids",
}
_PARTITION_FILES = {
    "pysparklog.state": "state",
    "leader-epoch-checkpoint": "leader-epoch-checkpoint",
    "partition.metadata": "partition.metadata",
}
_SUFFIXES = {".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex", ".snapshot": "snapshot"}
#: Bytes of a v2 batch header; its first 21 (base offset, length, leader epoch, magic, CRC) are outside the CRC.
BATCH_HEADER_BYTES = 61

#: Damage applicable to every file, and what needs another file of the kind.
OPERATIONS = (
    "bit-flip",
    "overwrite",
    "truncate-to-zero",
    "truncate-inside",
    "truncate-boundary-minus-one",
    "append-garbage",
    "prepend-garbage",
    "delete",
    "zero-range",
    "replace-with-other-copy",
    "swap",
)
_NEEDS_ANOTHER = ("replace-with-other-copy", "swap")


def kind_of(path: str) -> str | None:
    """The kind of a file (its path relative to the log directory), None for files not damaged."""
    parts = path.split("/")
    name = parts[-1]
    if len(parts) == 1:
        if name.startswith("pysparklog-txn.") and name.endswith(".json"):
            return "txn-state"
        if name.startswith("pysparklog-group.") and name.endswith(".json"):
            return "group-state"
        return _ROOT_FILES.get(name)
    if len(parts) != 2:
        return None
    if name in _PARTITION_FILES:
        return _PARTITION_FILES[name]
    stem, suffix = os.path.splitext(name)
    if not (len(stem) == 20 and stem.isdigit()):
        return None  # .deleted leftovers, locks
    if suffix == ".log":
        return "consumer-offsets" if parts[0].startswith(OFFSETS_DIR_PREFIX) else "log"
    return _SUFFIXES.get(suffix)


def sizes_of(log_dir: str, files: dict[str, list[str]]) -> dict[str, int]:
    """The size of each of ``files`` (as ``catalogue`` lists them)."""
    return {path: os.path.getsize(os.path.join(log_dir, path)) for paths in files.values() for path in paths}


def catalogue(log_dir: str) -> dict[str, list[str]]:
    """The files of each kind in ``log_dir`` (relative paths, sorted)."""
    found: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for root, _dirs, files in os.walk(log_dir):
        for name in files:
            path = os.path.relpath(os.path.join(root, name), log_dir)
            kind = kind_of(path)
            if kind is not None:
                found[kind].append(path)
    for paths in found.values():
        paths.sort()
    return found


def partition_of(path: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a file inside a partition directory."""
    if "/" not in path:
        return None
    topic, _, partition = path.split("/")[0].rpartition("-")
    return topic, int(partition)


@dataclass(frozen=True, slots=True)
class Mutation:
    """One damage: ``operation`` on ``path`` (relative to the log directory).

    Attributes:
        other: The file swapped with ``path``, or copied over it.
        position: Where bytes were flipped, overwritten or zeroed, or the length truncated to.
        data: The bytes written (overwrite, garbage), or the bit masks of a flip.
        length: How many bytes were zeroed.
    """

    seed: int
    index: int
    kind: str
    operation: str
    path: str
    other: str | None = None
    position: int = 0
    data: bytes = b""
    length: int = 0

    def describe(self) -> str:
        where = {
            "bit-flip": f" at {self.position} (masks {self.data.hex()})",
            "overwrite": f" at {self.position} with {self.data.hex()}",
            "truncate-to-zero": "",
            "truncate-inside": f" to {self.position} bytes",
            "truncate-boundary-minus-one": f" to {self.position} bytes",
            "append-garbage": f" ({len(self.data)} bytes)",
            "prepend-garbage": f" ({len(self.data)} bytes)",
            "delete": "",
            "zero-range": f" [{self.position}, {self.position + self.length})",
            "replace-with-other-copy": f" by {self.other}",
            "swap": f" with {self.other}",
        }[self.operation]
        return f"mutant (seed={self.seed}, index={self.index}): {self.kind}: {self.operation} {self.path}{where}"

    def first_damaged_byte(self, size: int) -> int:
        """The first byte of the original ``path`` whose content the damage changed (``size``: none)."""
        if self.operation in ("bit-flip", "overwrite", "zero-range"):
            return self.position
        if self.operation in ("truncate-inside", "truncate-boundary-minus-one"):
            return self.position
        if self.operation == "append-garbage":
            return size
        return 0  # truncate to zero, prepend, delete, replace, swap: the whole file

    def touched(self) -> tuple[str, ...]:
        """The files whose content the damage changed."""
        return (self.path,) if self.other is None or self.operation != "swap" else (self.path, self.other)


#: Kinds whose files carry a partition's records or its view of them, damaged by ``foreign_copies``.
FOREIGN_KINDS = ("log", "consumer-offsets", "state")


def foreign_copies(files: dict[str, list[str]], sizes: dict[str, int]) -> list[Mutation]:
    """Every file of ``FOREIGN_KINDS`` replaced by the same-named file of another partition of its topic,
    and an empty segment by each of another partition's segments, as mutants ``-1``, ``-2``, ... (the
    order of ``files``)."""
    found: list[Mutation] = []
    for kind in FOREIGN_KINDS:
        paths = files[kind]
        for path in paths:
            where = partition_of(path)
            assert where is not None
            for other in paths:
                other_where = partition_of(other)
                if (
                    other_where is not None
                    and other_where[0] == where[0]
                    and other_where != where
                    and (os.path.basename(other) == os.path.basename(path) or (sizes[path] == 0 < sizes[other]))
                ):
                    index = -len(found) - 1
                    found.append(Mutation(0, index, kind, "replace-with-other-copy", path, other=other))
    return found


def foreign_indexes(
    files: dict[str, list[str]], sizes: dict[str, int], kinds: Iterable[str] | None = None
) -> list[int]:
    """The indexes of the foreign copies, only of ``kinds`` when given."""
    wanted = set(KINDS if kinds is None else kinds)
    return [m.index for m in foreign_copies(files, sizes) if m.kind in wanted]


def draw(seed: int, index: int, files: dict[str, list[str]], sizes: dict[str, int], truth: Truth) -> Mutation:
    """Mutant ``index`` of run ``seed`` over the source directory's ``files`` (by kind) and their ``sizes``;
    a negative ``index`` is a foreign copy, whatever the seed."""
    if index < 0:
        return replace(foreign_copies(files, sizes)[-index - 1], seed=seed)
    rng = random.Random(f"{seed}:{index}")
    kind = KINDS[index % len(KINDS)]
    paths = files[kind]
    path = rng.choice(paths)
    size = sizes[path]
    swappable = [p for p in paths if p != path]
    # "Another partition's copy": for files of the log directory itself, another file of the kind.
    donors = [p for p in swappable if partition_of(path) is None or partition_of(p) != partition_of(path)]
    candidates = {"swap": swappable, "replace-with-other-copy": donors}
    operations = [op for op in OPERATIONS if candidates.get(op, True)]
    if size == 0:
        operations = [op for op in operations if op in ("append-garbage", "prepend-garbage", "delete", *_NEEDS_ANOTHER)]
    operation = rng.choice(operations)
    base = Mutation(seed, index, kind, operation, path)
    batches = _batches_of(path, truth)
    if operation == "bit-flip":
        position = _position(rng, size, batches)
        count = min(rng.choice((1, 1, 2, 3)), size - position)
        masks = bytes(1 << rng.randrange(8) for _ in range(count))
        return replace(base, position=position, data=masks)
    if operation == "overwrite":
        position = _position(rng, size, batches)
        return replace(base, position=position, data=rng.randbytes(min(rng.randint(1, 16), size - position)))
    if operation == "truncate-inside":
        if batches:
            batch = rng.choice(batches)
            position = batch.position + rng.randrange(1, min(BATCH_HEADER_BYTES, batch.size))
        else:
            position = rng.randrange(1, size) if size > 1 else 0
        return replace(base, position=position)
    if operation == "truncate-boundary-minus-one":
        if batches:
            batch = rng.choice(batches)
            position = batch.position + batch.size - 1
        else:
            entry = _entry_size(path)
            position = rng.randrange(entry, size + 1, entry) - 1 if size >= entry else size - 1
        return replace(base, position=max(position, 0))
    if operation in ("append-garbage", "prepend-garbage"):
        return replace(base, data=rng.randbytes(rng.choice((1, 7, 12, 61, 200))))
    if operation == "zero-range":
        position = _position(rng, size, batches)
        return replace(base, position=position, length=min(rng.choice((1, 8, 12, 34, 64, 512)), size - position))
    if operation in _NEEDS_ANOTHER:
        return replace(base, other=rng.choice(candidates[operation]))
    return base  # truncate-to-zero, delete


def _batches_of(path: str, truth: Truth) -> list[Batch]:
    where = partition_of(path)
    if where is None or not path.endswith(".log"):
        return []
    partition = truth.partitions.get(where)
    return partition.segments.get(os.path.basename(path), []) if partition is not None else []


def _entry_size(path: str) -> int:
    return {".index": 8, ".timeindex": 12, ".txnindex": 34}.get(os.path.splitext(path)[1], 1)


def _position(rng: random.Random, size: int, batches: list[Batch]) -> int:
    """A byte to damage: in a segment, half the time inside a batch header (its fields outside the CRC
    are the interesting ones); else anywhere."""
    if batches and rng.random() < 0.5:
        batch = rng.choice(batches)
        return batch.position + rng.randrange(min(BATCH_HEADER_BYTES, batch.size))
    return rng.randrange(size)


def apply(mutation: Mutation, log_dir: str) -> None:
    """Damage the copy of the source directory at ``log_dir``."""
    path = os.path.join(log_dir, mutation.path)
    operation = mutation.operation
    if operation == "delete":
        os.remove(path)
        return
    if operation == "swap":
        assert mutation.other is not None
        other = os.path.join(log_dir, mutation.other)
        os.replace(path, path + ".swapping")
        os.replace(other, path)
        os.replace(path + ".swapping", other)
        return
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if operation == "bit-flip":
        for i, mask in enumerate(mutation.data):
            data[mutation.position + i] ^= mask
    elif operation == "overwrite":
        data[mutation.position : mutation.position + len(mutation.data)] = mutation.data
    elif operation == "truncate-to-zero":
        data = bytearray()
    elif operation in ("truncate-inside", "truncate-boundary-minus-one"):
        del data[mutation.position :]
    elif operation == "append-garbage":
        data += mutation.data
    elif operation == "prepend-garbage":
        data[:0] = mutation.data
    elif operation == "zero-range":
        data[mutation.position : mutation.position + mutation.length] = bytes(mutation.length)
    elif operation == "replace-with-other-copy":
        assert mutation.other is not None
        with open(os.path.join(log_dir, mutation.other), "rb") as f:
            data = bytearray(f.read())
    with open(path, "wb") as f:
        f.write(data)
