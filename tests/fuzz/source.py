"""The log directory the fuzz test damages, built once with the public APIs, and its ground truth.

The directory holds every kind of file a log directory can hold: segments of every codec rolled into
several segments each (so ``.index``, ``.timeindex`` and producer ``.snapshot`` files), transactions
committed and aborted (``.txnindex``, ``pysparklog-txn.*.json``), a compacted topic after a cleaner pass
(``cleaner-offset-checkpoint``), a partition whose log start was raised by delete-records and retention
(``log-start-offset-checkpoint``), committed offsets in ``__consumer_offsets`` (rolled and compacted
once), consumer-group files and the log directory's own files.

The ground truth is every record acknowledged while building (topic, partition, offset, key, value,
headers, timestamp, whether its transaction aborted), checked against a read of the finished directory,
plus where each batch lies in each segment file, so that the oracle knows which offsets a damaged
byte range covers.
"""

from __future__ import annotations

import bisect
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from pysparklog import LogConfig, LogDirectory, OffsetStore, Producer, ProducerConfig
from pysparklog.group import GroupCoordinator, JoinRequest
from pysparklog.offsets import OFFSETS_TOPIC, CommittedOffset, encode_offset_commit_key, encode_offset_commit_value
from pysparklog.storage.cleaner import run_cleaner
from pysparklog.storage.log_protocol import Log
from pysparklog.storage.records.arrow_records import decode_entries
from pysparklog.storage.retention import run_retention
from pysparklog.structs import OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000
#: The settings every topic without its own gets: small segments (several per partition) and dense indexes.
LOG_CONFIG = LogConfig(segment_bytes=9000, index_interval_bytes=400)
#: The least the active segments of ``events`` hold: more than the 4 KiB a writer first reads of one.
ACTIVE_SEGMENT_BYTES = 5000
SERVER_PROPERTIES = "offsets.topic.num.partitions=3\noffsets.topic.segment.bytes=1048576\n"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
EVENTS, TXN, COMPACTED = "events", "txn", "compacted"
#: Rolled by hand: both partitions have segments at the same bases, and partition 0 an empty active segment,
#: so that another partition's copy of a file has the name and bases of this partition's, or fills its
#: empty segment with batches that continue from its log end or do not.
ROLLED = "rolled"
ROLLED_SEGMENT_RECORDS = 10
TRANSACTIONAL_IDS = ("fuzz-txn-a", "fuzz-txn-b")
GROUPS = ("billing", "audit", "reports")
#: A group that commits many partitions at once, so that its ``__consumer_offsets`` partition rolls and is compacted.
BULK_GROUP = "bulk-loader"
MEMBER_GROUPS = ("billing", "audit")  # groups with a member, hence a pysparklog-group.<group>.json

Headers = tuple[tuple[str, bytes | None], ...] | None
TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a reader returns it (``timestamp`` in milliseconds)."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    aborted: bool = False


@dataclass(frozen=True, slots=True)
class Batch:
    """Where one record batch lies in a segment file of the source directory."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    control: bool


@dataclass(frozen=True, slots=True)
class Transaction:
    """A transaction's records in one partition, and the offset of the COMMIT or ABORT marker ending it."""

    first_offset: int
    last_offset: int
    marker: int | None


@dataclass(slots=True)
class PartitionTruth:
    """What one partition of the source directory holds.

    Attributes:
        written: Every data record acknowledged at each offset while building, also those compaction or
            retention removed since: a reader may return these and nothing else.
        present: The data records a read of the finished directory returns (from ``log_start`` on).
        controls: Offset and timestamp of every control record (transaction marker) in the log; a
            timestamp lookup may return them, as Kafka's does.
        segments: Per segment file name (``<base>.log``), its batches in file order.
        transactions: The transactions written here, and ``transaction_at`` the one each of their
            records belongs to.
    """

    topic: str
    partition: int
    log_start: int
    log_end: int
    written: dict[int, Record] = field(default_factory=dict)
    present: dict[int, Record] = field(default_factory=dict)
    controls: dict[int, int] = field(default_factory=dict)
    segments: dict[str, list[Batch]] = field(default_factory=dict)
    transactions: list[Transaction] = field(default_factory=list)
    transaction_at: dict[int, Transaction] = field(default_factory=dict)

    @property
    def directory(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class TopicTruth:
    partitions: int
    configs: dict[str, str]
    topic_id: str


@dataclass(slots=True)
class Truth:
    """The source directory's ground truth.

    Attributes:
        partitions: Per ``(topic, partition)``.
        topics: Partition count, config overrides and id of each topic.
        committed: Each group's committed offsets.
        commit_history: Every offset ever committed per group and partition, in commit order.
        compacted_topics: Topics whose ``cleanup.policy`` includes compact.
    """

    partitions: dict[TopicPartitionKey, PartitionTruth] = field(default_factory=dict)
    topics: dict[str, TopicTruth] = field(default_factory=dict)
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    commit_history: dict[tuple[str, TopicPartition], list[int]] = field(default_factory=dict)
    compacted_topics: frozenset[str] = frozenset()


def records_table(records: list[Record], partitions: list[int]) -> pa.Table:
    """The input of ``Producer.send_arrow`` for ``records``, each to its partition."""
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.table(
        {
            "key": pa.array([r.key for r in records], pa.binary()),
            "value": pa.array([r.value for r in records], pa.binary()),
            "timestamp": pa.array([r.timestamp for r in records], pa.int64()),
            "headers": pa.array(
                [None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers] for r in records],
                header_type,
            ),
            "partition": pa.array(partitions, pa.int32()),
        }
    )


def open_logs(path: str) -> LogDirectory:
    """The log directory with the settings it was built with: appends after damage roll the same way."""
    return LogDirectory(path, LOG_CONFIG)


def build_source(path: str) -> Truth:
    """Build the source log directory at ``path`` (which must not exist) and return its ground truth."""
    os.makedirs(path)
    with open(os.path.join(path, "server.properties"), "w", encoding="ascii") as f:
        f.write(SERVER_PROPERTIES)
    logs = open_logs(path)
    builder = _Builder(logs, random.Random(0))
    builder.build()
    return builder.finish()


class _Builder:
    def __init__(self, logs: LogDirectory, rng: random.Random) -> None:
        self.logs = logs
        self.rng = rng
        self.written: dict[TopicPartitionKey, dict[int, Record]] = {}
        self.truth = Truth()
        self.next_ts = T0
        self.serial = 0
        self.transaction_of: dict[TopicPartitionKey, dict[int, int]] = {(TXN, 0): {}, (TXN, 1): {}}

    # -- records ------------------------------------------------------------------------------

    def _record(self, key: bytes | None, *, tombstone: bool = False) -> Record:
        """A new record: unique value, increasing timestamps with a few out of order, headers on some."""
        self.serial += 1
        self.next_ts += self.rng.choice((0, 1, 1, 2, 7))
        timestamp = self.next_ts - (50 if self.rng.random() < 0.05 else 0)
        headers: Headers = None
        if self.rng.random() < 0.3:
            headers = (("trace", f"t{self.serial}".encode()), ("empty", None))[: self.rng.choice((1, 2))]
        filler = self.rng.randbytes(self.rng.choice((4, 20, 60))).hex()  # incompressible: several segments
        value = None if tombstone else f"value-{self.serial}:{filler}".encode()
        return Record(key, value, headers, timestamp)

    def _note(self, topic: str, partition: int, offset: int, record: Record) -> None:
        known = self.written.setdefault((topic, partition), {})
        assert offset not in known, f"offset {offset} of {topic}-{partition} acknowledged twice"
        known[offset] = record

    def _send_arrow(self, producer: Producer, topic: str, records: list[Record], partitions: list[int]) -> None:
        appended = producer.send_arrow(topic, records_table(records, partitions))
        for partition, info in appended.items():
            rows = [r for r, p in zip(records, partitions, strict=True) if p == partition]
            assert info.last_offset - info.first_offset + 1 == len(rows)
            for offset, record in enumerate(rows, info.first_offset):
                self._note(topic, partition, offset, record)

    # -- the directory ------------------------------------------------------------------------

    def build(self) -> None:
        topics = self.logs.topics
        never = {"retention.ms": "-1"}
        topics.create(EVENTS, 2, never)
        topics.create(TXN, 2, never)
        compact = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "retention.ms": "-1"}
        topics.create(COMPACTED, 2, compact)
        topics.create(ROLLED, 2, never)
        self._events()
        self._rolled()
        self._transactions()
        self._compacted()
        self._offsets()
        for group in MEMBER_GROUPS:
            coordinator = GroupCoordinator(self.logs, group)
            try:
                coordinator.join(JoinRequest(f"fuzz-{group}", ("range", "cooperative-sticky"), 45_000), [EVENTS, TXN])
            finally:
                coordinator.close()

    def _events(self) -> None:
        """Every codec in both partitions, several segments each; then delete-records and retention on one."""
        for codec in CODECS * 2:
            config = ProducerConfig.from_properties({"compression.type": codec, "batch.size": "1500"})
            with Producer(self.logs, config) as producer:
                partitions = [self.rng.randrange(2) for _ in range(50)]
                records = [self._record(f"user-{self.rng.randrange(30)}".encode()) for _ in partitions]
                self._send_arrow(producer, EVENTS, records, partitions)
        with Producer(self.logs, ProducerConfig.from_properties({"batch.size": "1500"})) as producer:
            for partition in range(2):  # an active segment of several batches, longer than a first read of it
                while self.logs.partition(EVENTS, partition).view().active_size < ACTIVE_SEGMENT_BYTES:
                    records = [self._record(f"user-{self.rng.randrange(30)}".encode()) for _ in range(10)]
                    self._send_arrow(producer, EVENTS, records, [partition] * len(records))
        log = self.logs.partition(EVENTS, 0)
        bases = log.view().segment_bases
        log.raise_log_start_offset(bases[1] + 3)  # inside the second segment: the first goes, the second stays partly
        run_retention(log)
        log.close()

    def _rolled(self) -> None:
        """Segments at bases 0, 10 and 20 in both partitions, partition 0's last one empty, and partition 1's
        at 30 too: its segments hold offsets that an append to partition 0 would give, and others."""
        with Producer(self.logs) as producer:
            for partition, segments in ((0, 2), (1, 4)):
                log = self.logs.partition(ROLLED, partition)
                try:
                    for segment in range(segments):
                        keys = [f"roll-{self.rng.randrange(5)}".encode() for _ in range(ROLLED_SEGMENT_RECORDS)]
                        records = [self._record(key) for key in keys]
                        self._send_arrow(producer, ROLLED, records, [partition] * len(records))
                        if segment < segments - 1 or partition == 0:
                            assert log.roll(), f"{ROLLED}-{partition} did not roll"
                finally:
                    log.close()

    def _transactions(self) -> None:
        """Committed and aborted transactions of two transactional ids, between non-transactional appends."""
        producers = [
            Producer(
                self.logs,
                ProducerConfig.from_properties(
                    {"transactional.id": txn_id, "compression.type": codec, "batch.size": "1200"}
                ),
            )
            for txn_id, codec in zip(TRANSACTIONAL_IDS, ("zstd", "none"), strict=True)
        ]
        plain = Producer(self.logs, ProducerConfig.from_properties({"compression.type": "gzip"}))
        try:
            for producer in producers:
                producer.init_transactions()
            for round_ in range(12):
                producer = producers[round_ % 2]
                abort = round_ % 3 == 1
                producer.begin_transaction()
                sent = []
                for _ in range(self.rng.randrange(5, 25)):
                    partition = self.rng.randrange(2)
                    record = self._record(f"order-{self.rng.randrange(50)}".encode())
                    record = Record(record.key, record.value, record.headers, record.timestamp, aborted=abort)
                    future = producer.send(
                        TXN,
                        record.value,
                        key=record.key,
                        headers=list(record.headers) if record.headers is not None else None,
                        partition=partition,
                        timestamp_ms=record.timestamp,
                    )
                    sent.append((future, partition, record))
                producer.flush()
                if abort:
                    producer.abort_transaction()
                else:
                    producer.commit_transaction()
                for future, partition, record in sent:
                    offset = future.get(timeout=30).offset
                    self._note(TXN, partition, offset, record)
                    self.transaction_of[(TXN, partition)][offset] = round_
                partitions = [self.rng.randrange(2) for _ in range(8)]
                self._send_arrow(plain, TXN, [self._record(b"plain") for _ in partitions], partitions)
        finally:
            for producer in (*producers, plain):
                producer.close()

    def _compacted(self) -> None:
        """Few keys written many times, tombstones, a cleaner pass, then more (dirty) records."""
        keys = [f"account-{i}".encode() for i in range(12)]
        for round_ in range(6):
            codec = ("lz4", "snappy", "none")[round_ % 3]
            config = ProducerConfig.from_properties({"compression.type": codec, "batch.size": "900"})
            with Producer(self.logs, config) as producer:
                partitions = [self.rng.randrange(2) for _ in range(40)]
                records = [self._record(self.rng.choice(keys), tombstone=self.rng.random() < 0.1) for _ in partitions]
                self._send_arrow(producer, COMPACTED, records, partitions)
            if round_ == 3:
                reports = run_cleaner(self.logs, COMPACTED)
                assert all(r.error is None for r in reports), reports

    def _offsets(self) -> None:
        """Commits of several groups, one record batch each; the bulk group's partition rolls and is compacted."""
        store = OffsetStore(self.logs)
        try:
            for round_ in range(6):
                for group in GROUPS:
                    offsets = {
                        TopicPartition(topic, p): 10 * round_ + self.rng.randrange(10)
                        for topic in (EVENTS, TXN, COMPACTED)
                        for p in range(2)
                        if self.rng.random() < 0.7
                    }
                    self._commit(store, group, offsets)
            bulk = [TopicPartition("archive", p) for p in range(200)]
            for round_ in range(91):  # the 89th rolls the 1 MiB segment
                self._commit(store, BULK_GROUP, {tp: round_ * 1000 + tp.partition for tp in bulk})
        finally:
            store.close()

    def _commit(self, store: OffsetStore, group: str, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        self.serial += 1
        timestamp = T0 + 1_000_000 + self.serial
        partition = store.partition_for(group)
        before = 0
        if os.path.isdir(os.path.join(self.logs.path, f"{OFFSETS_TOPIC}-{partition}")):
            with self.logs.partition(OFFSETS_TOPIC, partition) as log:
                before = log.log_end_offset
        store.commit(group, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}, commit_timestamp_ms=timestamp)
        log = self.logs.partition(OFFSETS_TOPIC, partition)
        assert log.log_end_offset == before + len(offsets), "a commit is one batch of one record per partition"
        for offset, (tp, committed) in enumerate(offsets.items(), before):
            key = encode_offset_commit_key(group, tp)
            value = encode_offset_commit_value(CommittedOffset(committed, "", -1, timestamp))
            self._note(OFFSETS_TOPIC, partition, offset, Record(key, value, None, timestamp))
            self.truth.committed.setdefault(group, {})[tp] = committed
            self.truth.commit_history.setdefault((group, tp), []).append(committed)
        log.close()

    # -- the truth ----------------------------------------------------------------------------

    def finish(self) -> Truth:
        truth = self.truth
        topics = self.logs.topics
        for name in topics.names():
            metadata = topics.get(name)
            truth.topics[name] = TopicTruth(metadata.partitions, dict(metadata.configs), metadata.topic_id)
        truth.compacted_topics = frozenset(
            name for name, topic in truth.topics.items() if "compact" in topic.configs.get("cleanup.policy", "")
        )
        for topic, partition in self.logs.topic_partitions():
            log = self.logs.partition(topic, partition)
            try:
                truth.partitions[(topic, partition)] = _partition_truth(
                    log,
                    self.written.get((topic, partition), {}),
                    self.transaction_of.get((topic, partition), {}),
                    topic in truth.compacted_topics,
                )
            finally:
                log.close()
        return truth


def _partition_truth(
    log: Log, written: dict[int, Record], transaction_of: dict[int, int], compacted: bool
) -> PartitionTruth:
    view = log.view()
    truth = PartitionTruth(log.topic, log.partition, view.log_start_offset, view.log_end_offset, written=written)
    for record_offset, record in read_records(log, include_aborted=True):
        expected = written.get(record_offset)
        assert expected is not None and _same(record, expected), (
            f"{log.directory} offset {record_offset}: read {record}, acknowledged {expected}"
        )
        truth.present[record_offset] = expected
    if not compacted:
        kept = {o for o in written if view.log_start_offset <= o < view.log_end_offset}
        assert kept == set(truth.present), f"{log.directory}: records lost while building"
    committed = {o for o, _ in read_records(log, include_aborted=False)}
    assert committed == {o for o, r in truth.present.items() if not r.aborted}, f"{log.directory}: read_committed"
    for base in view.segment_bases:
        segment = log.segment(base)
        batches = truth.segments[os.path.basename(segment.log_path)] = []
        for chunk in segment.chunks(0, view.end_of(base, segment)):
            entries = chunk.entries
            for position, size, first, last, control in zip(
                (entries.positions + chunk.position).tolist(),
                entries.sizes.tolist(),
                entries.base_offsets.tolist(),
                entries.last_offsets.tolist(),
                entries.is_control.tolist(),
                strict=True,
            ):
                batches.append(Batch(position, size, first, last, control))
            if entries.is_control.any():
                for batch in decode_entries(chunk.buf, entries.select(entries.is_control), topic="", partition=0):
                    stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
                    for control_offset, stamp in zip(batch.column("offset").to_pylist(), stamps, strict=True):
                        truth.controls[control_offset] = stamp
    markers = sorted(truth.controls)
    members: dict[int, list[int]] = {}
    for offset, serial in transaction_of.items():
        members.setdefault(serial, []).append(offset)
    for offsets in members.values():
        after = bisect.bisect_right(markers, max(offsets))
        transaction = Transaction(min(offsets), max(offsets), markers[after] if after < len(markers) else None)
        truth.transactions.append(transaction)
        for offset in offsets:
            truth.transaction_at[offset] = transaction
    return truth


def _same(read: Record, written: Record) -> bool:
    return (read.key, read.value, read.headers, read.timestamp) == (
        written.key,
        written.value,
        written.headers,
        written.timestamp,
    )


def read_records(
    log: Log,
    start: int | None = None,
    end: int | None = None,
    *,
    include_aborted: bool,
) -> Iterator[tuple[int, Record]]:
    """``(offset, record)`` of a ``read_arrow`` with headers; read_committed unless ``include_aborted``."""
    level = "read_uncommitted" if include_aborted else "read_committed"
    for batch in log.read_arrow(start, end, include_headers=True, isolation_level=level):
        headers = (
            None if row is None else tuple((h["key"], h["value"]) for h in row)
            for row in batch.column("headers").to_pylist()
        )
        records = map(
            Record,
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            headers,
            batch.column("timestamp").cast(pa.int64()).to_pylist(),
        )
        yield from zip(batch.column("offset").to_pylist(), records, strict=True)
