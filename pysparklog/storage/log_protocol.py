"""What a partition's log offers its callers, on whichever storage the log directory lives (``Log``).

``LogDirectory.partition`` returns a ``PartitionLog`` on a filesystem (Kafka's log: segments and indexes changed in
place under a lock) and an ``ObjectPartitionLog`` on an object store (commits read through a local replica,
``pysparklog.storage.objects``). The consumer, the offsets and transaction coordinators, the Spark data source, the
command line, retention and the cleaner hold either through this protocol, as Kafka's callers hold a
``UnifiedLog`` whatever tiers lie behind it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from pysparklog.storage.config import LogConfig
    from pysparklog.storage.log import PartitionLog
    from pysparklog.storage.log_reads import SegmentInfo
    from pysparklog.storage.log_state import LogView
    from pysparklog.storage.log_writer import AppendInfo
    from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches
    from pysparklog.storage.segment import LogSegment
    from pysparklog.storage.transaction_index import AbortedTxn


class Log(Protocol):
    """One partition's log (``PartitionLog`` documents each method; ``ObjectPartitionLog`` says where it differs)."""

    topic: str
    partition: int
    directory: str
    """Where its segments are on this host: the partition's directory, or on an object store its replica's."""

    @property
    def local(self) -> PartitionLog:
        """The filesystem log holding its segments on this host: itself, or on an object store its replica, as
        the last follow left it (maintenance reads its files there)."""
        ...

    @property
    def config(self) -> LogConfig:
        """The topic's configs in force now."""
        ...

    @property
    def topic_id(self) -> str | None:
        """The topic's id, from ``partition.metadata`` or the topics' metadata; None when none is known."""
        ...

    def close(self) -> None:
        """Release what the log keeps open between uses."""
        ...

    def __enter__(self) -> Log: ...

    def __exit__(self, *exc: object) -> None: ...

    # -- reading ------------------------------------------------------------------------------

    def view(self) -> LogView:
        """The acknowledged extent of the log."""
        ...

    def segments(self) -> list[LogSegment]:
        """The segments of the acknowledged view, oldest first (on an object store, the replica's)."""
        ...

    def segment(self, base: int) -> LogSegment:
        """The segment at ``base`` (on an object store, the replica's)."""
        ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def offsets(self) -> tuple[int, int]:
        """The log start offset and the log end offset, from one look at the log (on an object store, at its chain's
        last commit: one probe, without following the commits)."""
        ...

    @property
    def last_stable_offset(self) -> int: ...

    def read_arrow(
        self,
        start_offset: int | None = None,
        end_offset: int | None = None,
        *,
        include_headers: bool = False,
        max_chunk_bytes: int = ...,
        isolation_level: str = ...,
    ) -> Iterator[pa.RecordBatch]:
        """Records of ``[start_offset, end_offset)`` as Arrow batches with Spark's Kafka columns."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """Kafka's ListOffsets for this partition."""
        ...

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions with records in ``[start_offset, end_offset)``."""
        ...

    # -- writing ------------------------------------------------------------------------------

    def append_arrow(
        self,
        data: pa.Table | pa.RecordBatch,
        settings: BatchSettings | None = None,
        *,
        expected_end_offset: int | None = None,
    ) -> AppendInfo:
        """Encode Arrow rows and append them as one append; with ``expected_end_offset``, only if the log still
        ends there when the append is made (``LogEndChangedError`` otherwise, with nothing appended)."""
        ...

    def append(self, batches: EncodedBatches | bytes | bytearray | memoryview) -> AppendInfo:
        """Append complete v2 record batches, numbered from the log end."""
        ...

    def flush(self) -> None:
        """Make everything appended durable (nothing to do where an append is durable when it returns)."""
        ...

    # -- maintenance: retention, delete-records, compaction ------------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        """What retention and the cleaner decide on, for every segment."""
        ...

    def roll(self) -> bool:
        """Roll the active segment now if it holds data."""
        ...

    def raise_log_start_offset(self, offset: int) -> int:
        """Kafka's DeleteRecords; returns the log start."""
        ...

    def delete_segments(self, bases: Sequence[int]) -> int:
        """Retire the oldest segments; returns the log start."""
        ...

    def remove_deleted_files(self, now_ms: int | None = None) -> int:
        """Remove retired files whose delay has passed; returns how many."""
        ...

    def compaction_scope(self) -> AbstractContextManager[PartitionLog]:
        """The local log a compaction round works on and swaps its cleaned segments into."""
        ...
