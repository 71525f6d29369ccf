"""Exercise a damaged copy of the source directory and judge every answer against the ground truth.

In order:

1. reads only (**before recovery**): ``read_arrow`` read_uncommitted and read_committed from the log
   start and from an offset inside each segment, ``offset_for_timestamp``, the log start and end, the
   committed offsets of every group (``OffsetStore``), topic listing and description, transaction and
   group state;
2. **appends**: an idempotent producer into every data partition, a committed and an aborted
   transaction, an offset commit, each read back. A writer that finds its partition damaged runs
   recovery itself (``PartitionLog._sync_for_write``);
3. ``PartitionLog.recover()`` on every partition, then a cleaner pass (``run_cleaner``: retention and
   compaction);
4. the checks of step 1 again (**after appends, recovery and a cleaner pass**).

Partitions the damage is not in get the log start and end checked at step 1 and a read of all their
records at step 4; the others (and all of them when the damaged file is the log directory's) every check.

An operation may answer correctly or raise a typed error (``pysparklog.errors.PySparkLogError``).
Anything else is a failure: an untyped exception, a record that was not written at that offset, a
read_committed read returning a record of an aborted transaction, offsets out of order, a log end past
the records written, a timestamp lookup answering past the log end or later than the first record that
matches, or acknowledged records missing although the damage did not cover them.

What damage may cost, and nothing more (``Damage``):

- a ``.log`` (or ``__consumer_offsets`` segment) loses, to readers, the batches from its first damaged
  byte to its end; once recovery ran, everything from there on (recovery truncates at the first invalid
  batch and deletes the later segments, as Kafka's does);
- a ``.log`` replaced by (or swapped with) another partition's copy holds that partition's valid
  batches: records equal to that partition's at the same offset cannot be told apart, and are accepted
  at the offsets the segment may hold (up to the next segment's base or the log end; past the log end
  only once recovery kept a last segment it could not tell apart: one that held batches, or an empty one
  the copied-in batches continue from its log end). Anywhere else they are another partition's records;
  once such a partition is compacted, their keys may remove its own earlier records with those keys;
- a COMMIT or ABORT marker in damaged bytes leaves its transaction open: read_committed readers may
  stop at its first offset, and a later marker of its producer may end it either way, as in Kafka;
- records the exercise appends count as the others once recovery runs after them, which truncates at
  the damage whatever came after it; until then, an acknowledged append must read back;
- compaction (the cleaner, and a commit that rolls a ``__consumer_offsets`` segment) removes records
  whose key comes again later, tombstones, aborted records and markers;
- ``log-start-offset-checkpoint`` decides the log start when recovery runs: records below it may go;
- ``pysparklog-topics.json`` holds the topic configs and partition counts without a checksum: a changed
  value is taken at its word (what the cleaner then removes, which ``__consumer_offsets`` partition a
  group's offsets are in), so only wrong records, hangs and untyped errors count there;
- a ``.txnindex`` or ``.snapshot`` replaced by another well-formed one (a swap, another partition's copy,
  or a ``.txnindex`` cut to no entries) is taken at its word, as Kafka takes it: read_committed reads of
  its partition may then return aborted records or stop early (``recover()`` rebuilds both from the log);
- text files without a checksum (``partition.metadata``, the JSON state files) may be read as other
  valid values; their contents are only checked when other files are damaged;
- a ``pysparklog.state`` replaced by another partition's that names the same active segment and ends at
  one of its batch boundaries is, byte for byte, what a writer that died between writing its batches and
  acknowledging them leaves: until recovery (or the next writer) takes the batches back, readers may stop
  at that record's log end, which ``log_end_offset`` then says too.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pysparklog import (
    LogDirectory,
    OffsetStore,
    PartitionLog,
    Producer,
    ProducerConfig,
    PySparkLogError,
)
from pysparklog._compat import StrEnum
from pysparklog.group import describe_group, list_group_ids
from pysparklog.offsets import (
    OFFSETS_TOPIC,
    CommittedOffset,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from pysparklog.storage.cleaner import run_cleaner
from pysparklog.storage.log_protocol import Log
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from pysparklog.transactions import TransactionCoordinator, TransactionState
from tests.fuzz.mutations import Mutation, apply, partition_of
from tests.fuzz.source import (
    COMPACTED,
    EVENTS,
    GROUPS,
    LOG_CONFIG,
    MEMBER_GROUPS,
    TRANSACTIONAL_IDS,
    TXN,
    PartitionTruth,
    Record,
    TopicPartitionKey,
    Transaction,
    Truth,
    open_logs,
    read_records,
    records_table,
)

T = TypeVar("T")
DATA_TOPICS = (EVENTS, TXN, COMPACTED)
#: Timestamps of the records the exercise appends: above every record of the source directory.
APPEND_T0 = 1_800_000_000_000
COMMITTED = 987_654  # the offset the exercise commits
#: The producer retries an append that failed with an ``OSError`` until ``delivery.timeout.ms`` (2 minutes by
#: default), as Kafka's does: cut short, so that such an error is reported as what it is, not as a hang.
PRODUCER_CONFIGS = {"delivery.timeout.ms": "1500", "retry.backoff.ms": "100"}
_COMPLETE = (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
_VIEW, _READ, _FULL = range(3)  # how much ``check_partition`` checks


class Outcome(StrEnum):
    """What became of one mutant (the worst over its operations)."""

    CLEAN = "clean"  # every answer right, and nothing repaired
    RECOVERED = "recovered"  # noticed by readers or repaired by recover(); from the appends on, right and no error
    TYPED = "typed error"  # every answer right, and a typed error from the appends on
    FAILURE = "FAILURE"  # a hang, an untyped exception or a wrong answer


@dataclass(frozen=True, slots=True)
class Failure:
    """One wrong behaviour: ``cause`` groups failures of the same kind, ``detail`` says what happened."""

    cause: str
    detail: str


@dataclass(slots=True)
class MutantReport:
    seed: int
    index: int
    kind: str
    description: str
    outcome: Outcome
    failures: list[Failure] = field(default_factory=list)
    typed_errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "seed": self.seed,
            "index": self.index,
            "kind": self.kind,
            "description": self.description,
            "outcome": self.outcome.value,
            "failures": [[f.cause, f.detail] for f in self.failures],
            "typed_errors": self.typed_errors,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MutantReport:
        return cls(
            int(data["seed"]),
            int(data["index"]),
            str(data["kind"]),
            str(data["description"]),
            Outcome(data["outcome"]),
            [Failure(str(cause), str(detail)) for cause, detail in data["failures"]],
            [str(error) for error in data["typed_errors"]],
        )


def exercise(truth: Truth, source: str, mutation: Mutation | None, work: str) -> MutantReport:
    """Copy ``source`` to ``work``, apply ``mutation`` (None: the undamaged directory) and judge it."""
    shutil.copytree(source, work)
    try:
        if mutation is not None:
            apply(mutation, work)
        return _Exercise(truth, source, mutation, work).run()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pysparklog_frame(error: BaseException) -> str:
    """The innermost frame of pysparklog's own code in the traceback: where the error came from."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f"{os.sep}pysparklog{os.sep}" in f.filename]
    if not frames:
        return "outside pysparklog"
    frame = frames[-1]
    path = frame.filename[frame.filename.rindex(f"{os.sep}pysparklog{os.sep}") + 1 :]
    return f"{path}:{frame.lineno} in {frame.name}"


def untyped_cause(error: BaseException) -> str:
    return f"untyped {type(error).__name__} at {_pysparklog_frame(error)}"


def _typed_names() -> set[str]:
    """Names of every ``PySparkLogError`` subclass (the cleaner reports errors by name)."""
    found = set()
    pending: list[type] = [PySparkLogError]
    while pending:
        cls = pending.pop()
        found.add(cls.__name__)
        pending += cls.__subclasses__()
    return found


_TXN_STATE_KINDS = ("txnindex", "snapshot")
_WELL_FORMED_DAMAGE = ("swap", "replace-with-other-copy", "truncate-to-zero")


class Damage:
    """What the mutation may legitimately cost each partition (see the module's docstring)."""

    def __init__(self, truth: Truth, source: str, mutation: Mutation | None) -> None:
        self.kind = mutation.kind if mutation is not None else None
        # The partitions holding the damaged files; None when the damage is to a file of the log directory.
        self.focus = None if mutation is None else {partition_of(p) for p in mutation.touched()} - {None}
        if not self.focus:
            self.focus = None
        # Per partition: (first damaged offset, last offset of the damaged segment) of each damaged segment.
        self.segments: dict[TopicPartitionKey, list[tuple[int, int]]] = {}
        # Per partition: the partitions whose records a copied-in segment brought, and their largest end.
        self.donors: dict[TopicPartitionKey, set[TopicPartitionKey]] = {}
        # Per partition: each donor with the offsets [base, next base or log end) of the segment it was
        # copied over. Only there can its batches pass for this partition's: recovery and readers refuse
        # batches outside the segment's offsets, or not continuing from the log end in the active one.
        self.donor_ranges: dict[TopicPartitionKey, list[tuple[TopicPartitionKey, int, int, bool]]] = {}
        self.donor_end: dict[TopicPartitionKey, int] = {}
        # Partitions whose transaction state the damage replaced with well-formed content: another .txnindex
        # or .snapshot, or a .txnindex cut to no entries. No checksum or size tells such a file from the real
        # one (Kafka trusts them too), so read_committed there may return aborted records or stop early.
        self.replaced_txn_state: set[TopicPartitionKey] = set()
        if mutation is not None and mutation.kind in _TXN_STATE_KINDS and mutation.operation in _WELL_FORMED_DAMAGE:
            self.replaced_txn_state = {p for p in (partition_of(path) for path in mutation.touched()) if p is not None}
        # Per partition: the log end of another partition's state record that readers may take as a crashed
        # writer's (see the module's docstring), before recovery.
        self.state_cut: dict[TopicPartitionKey, int] = {}
        if (
            mutation is not None
            and mutation.kind == "state"
            and mutation.operation in ("swap", "replace-with-other-copy")
        ):
            self._note_foreign_states(truth, mutation)
        if mutation is None or mutation.kind not in ("log", "consumer-offsets"):
            return
        moved = {mutation.path: mutation.other} if mutation.operation == "replace-with-other-copy" else {}
        if mutation.operation == "swap":
            assert mutation.other is not None
            moved = {mutation.path: mutation.other, mutation.other: mutation.path}
        for path in mutation.touched():
            where = partition_of(path)
            assert where is not None
            batches = truth.partitions[where].segments.get(os.path.basename(path), [])
            size = os.path.getsize(os.path.join(source, path))
            first = mutation.first_damaged_byte(size) if path == mutation.path else 0
            damaged = [b for b in batches if b.position + b.size > first]
            if damaged:
                self.segments.setdefault(where, []).append((damaged[0].base_offset, batches[-1].last_offset))
            donor_path = moved.get(path)
            if donor_path is not None:
                donor = partition_of(donor_path)
                assert donor is not None
                self.donors.setdefault(where, set()).add(donor)
                donor_batches = truth.partitions[donor].segments.get(os.path.basename(donor_path), [])
                low, high = segment_bounds(truth.partitions[where], path)
                # A last segment recovery keeps whole, beyond its log end: one the state record no longer
                # describes (it held batches: full recovery keeps every batch from its base on), or an empty
                # one whose copied-in batches continue from the log end as an append's would.
                continues = bool(donor_batches) and donor_batches[0].base_offset == high
                extends = high == truth.partitions[where].log_end and (bool(batches) or continues)
                self.donor_ranges.setdefault(where, []).append((donor, low, high, extends))
                if donor_batches:
                    self.donor_end[where] = max(self.donor_end.get(where, 0), donor_batches[-1].last_offset + 1)

    def _note_foreign_states(self, truth: Truth, mutation: Mutation) -> None:
        assert mutation.other is not None
        moved = {mutation.path: mutation.other}
        if mutation.operation == "swap":
            moved[mutation.other] = mutation.path
        for path, donor_path in moved.items():
            where, donor = partition_of(path), partition_of(donor_path)
            assert where is not None and donor is not None
            own, theirs = truth.partitions[where], truth.partitions[donor]
            if set(theirs.segments) <= set(own.segments) and any(
                b.last_offset + 1 == theirs.log_end for batches in own.segments.values() for b in batches
            ):
                self.state_cut[where] = theirs.log_end

    def may_lose(self, tp: TopicPartitionKey, offset: int, recovered: bool) -> bool:
        """Whether the record at ``offset`` may be gone: in the damaged part of its segment, or (once
        recovery ran) anywhere after the first damaged batch; before recovery, past a foreign state record's
        log end."""
        if not recovered and tp in self.state_cut and offset >= self.state_cut[tp]:
            return True
        for first, last in self.segments.get(tp, ()):
            if offset >= first and (recovered or offset <= last):
                return True
        return False


def segment_bounds(truth: PartitionTruth, path: str) -> tuple[int, int]:
    """The offsets the segment ``path`` (``<base>.log``) of a partition may hold: from its base to the next
    segment's base, or to the log end for the last one."""
    base = int(os.path.basename(path).partition(".")[0])
    later = [b for b in (int(name.partition(".")[0]) for name in truth.segments) if b > base]
    return base, max(min(later, default=truth.log_end), base)


class _Exercise:
    def __init__(self, truth: Truth, source: str, mutation: Mutation | None, work: str) -> None:
        self.truth = truth
        self.mutation = mutation
        self.work = work
        self.damage = Damage(truth, source, mutation)
        self.kind = self.damage.kind
        self.phase = "before recovery"
        self.recovered = False  # recovery may have run: losses past the first damaged batch are allowed
        self.recovered_after_appends = False
        self.cleaned = False  # the cleaner ran: it followed the topic configs, and compacted
        # Topics compaction may have run on: a commit that rolls a segment of __consumer_offsets compacts it.
        self.compacted: set[str] = set()
        self.failures: list[Failure] = []
        self.typed: list[tuple[str, str]] = []  # (phase, "operation: ErrorClass")
        self.appended: dict[TopicPartitionKey, dict[int, Record]] = {}
        self.tentative: dict[TopicPartitionKey, list[Record]] = {}  # appends that failed: may or may not be there
        self.txn_uncertain = False  # a transaction of the exercise failed: it may be left open
        self.lost_to_damage = False  # records the damage accounts for were missing
        self.run_commits: dict[tuple[str, TopicPartition], int] = {}  # the exercise's acknowledged commits
        self.tentative_commits: dict[tuple[str, TopicPartition], int] = {}  # and those it tried
        self.markers: dict[TopicPartitionKey, set[int]] = {}  # offsets of the exercise's transaction markers
        self.typed_names = _typed_names()
        self.latest_commit_offsets = self._latest_commit_offsets()
        self.serial = 0
        self._expected: dict[TopicPartitionKey, dict[int, Record]] = {}
        self._compactable_offsets: dict[tuple[TopicPartitionKey, int], set[int]] = {}

    # -- running ------------------------------------------------------------------------------

    def run(self) -> MutantReport:
        previous_hook = threading.excepthook
        threading.excepthook = self._thread_exception
        try:
            self.check_all()
            # Writers run recovery themselves when they find the partition damaged (``_sync_for_write``).
            self.recovered = True
            self.compacted.add(OFFSETS_TOPIC)
            self.phase = "appends"
            self.append_all()
            before = self._fingerprint()
            self.phase = "recover()"
            self.recover_all()
            self.recovered_after_appends = True
            repaired = self._fingerprint() != before
            self.phase = "cleaner pass"
            self.clean()
            self.cleaned = True
            self.compacted.update(self.truth.compacted_topics)
            self.phase = "after appends, recovery and a cleaner pass"
            self.check_all(final=True)
        finally:
            threading.excepthook = previous_hook
        late_typed = [t for phase, t in self.typed if phase != "before recovery"]
        if self.failures:
            outcome = Outcome.FAILURE
        elif late_typed:
            outcome = Outcome.TYPED
        elif repaired or self.typed or self.lost_to_damage:
            outcome = Outcome.RECOVERED
        else:
            outcome = Outcome.CLEAN
        mutation = self.mutation
        return MutantReport(
            mutation.seed if mutation else -1,
            mutation.index if mutation else -1,
            mutation.kind if mutation else "none",
            mutation.describe() if mutation else "the undamaged directory",
            outcome,
            _distinct(self.failures),
            sorted({f"{phase}: {t}" for phase, t in self.typed}),
        )

    def _thread_exception(self, args: threading.ExceptHookArgs) -> None:
        error = args.exc_value
        if error is not None and not isinstance(error, PySparkLogError):
            self.fail(untyped_cause(error), f"in thread {args.thread.name if args.thread else '?'}: {error!r}")

    def fail(self, cause: str, detail: str) -> None:
        self.failures.append(Failure(cause, f"{self.phase}: {detail}"))

    def attempt(self, label: str, operation: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[bool, T | None]:
        """Run one operation: (True, its result), or (False, None) after a typed error (noted) or an
        untyped one (a failure)."""
        try:
            return True, operation(*args, **kwargs)
        except PySparkLogError as error:
            self.typed.append((self.phase, f"{label}: {type(error).__name__}"))
        except Exception as error:
            self.fail(untyped_cause(error), f"{label}: {type(error).__name__}: {error}")
        return False, None

    def _fingerprint(self) -> dict[str, str | None]:
        """The content of the damaged files, to tell whether recovery repaired them."""
        if self.mutation is None:
            return {}
        found: dict[str, str | None] = {}
        for path in self.mutation.touched():
            try:
                with open(os.path.join(self.work, path), "rb") as f:
                    found[path] = hashlib.sha256(f.read()).hexdigest()
            except FileNotFoundError:
                found[path] = None
        return found

    def logs(self) -> LogDirectory:
        return open_logs(self.work)

    def open_partition(self, logs: LogDirectory, tp: TopicPartitionKey) -> Log:
        """The partition through ``LogDirectory``; when that refuses (its topic metadata is damaged), the
        partition directory directly, so that its data is still checked."""
        _, log = self.attempt(f"open {tp[0]}-{tp[1]}", logs.partition, *tp)
        if log is None:
            log = PartitionLog(os.path.join(self.work, f"{tp[0]}-{tp[1]}"), LOG_CONFIG, checkpoint_dir=self.work)
        return log

    # -- expectations -------------------------------------------------------------------------

    def allowed(self, tp: TopicPartitionKey, offset: int) -> list[Record]:
        """The records a reader may return at ``offset``."""
        appended = self.appended.get(tp, {})
        if offset in appended:
            return [appended[offset]]
        found = list(self.tentative.get(tp, ()))
        own = self.truth.partitions[tp].written.get(offset)
        if own is not None:
            found.append(own)
        for donor, low, high, extends in self.damage.donor_ranges.get(tp, ()):
            record = self.truth.partitions[donor].written.get(offset)
            if record is not None and low <= offset and (offset < high or (extends and self.recovered)):
                found.append(record)
        return found

    def allowed_timestamp(self, tp: TopicPartitionKey, offset: int, stamp: int) -> bool:
        """Whether a record at ``offset`` may have timestamp ``stamp`` (the exercise's markers have the time
        they were written)."""
        return offset in self.markers.get(tp, ()) or stamp in self._timestamps(tp, offset)

    def _timestamps(self, tp: TopicPartitionKey, offset: int) -> set[int]:
        stamps = {r.timestamp for r in self.allowed(tp, offset)}
        for source in (tp, *self.damage.donors.get(tp, ())):
            control = self.truth.partitions[source].controls.get(offset)
            if control is not None and offset not in self.appended.get(tp, {}):
                stamps.add(control)
        return stamps

    def expected_records(self, tp: TopicPartitionKey) -> dict[int, Record]:
        """The data records that must still be there now (``present`` plus the exercise's appends)."""
        expected = self._expected.get(tp)
        if expected is None:
            expected = self._expected[tp] = {**self.truth.partitions[tp].present, **self.appended.get(tp, {})}
        return expected

    def required(self, tp: TopicPartitionKey, offsets: Iterable[int], log_start: int) -> set[int]:
        """Of ``offsets`` (records there when the directory was built or appended since), those no damage
        accounts for: they must be returned."""
        if self.kind == "topics" and self.cleaned:
            return set()  # the cleaner followed configs the damage may have changed
        compactable = self._compactable(tp) if tp[0] in self.compacted else ()
        return {
            o
            for o in offsets
            if not self.may_lose(tp, o)
            and not (self.kind == "log-start-offset-checkpoint" and o < log_start)
            and o not in compactable
        }

    def may_lose(self, tp: TopicPartitionKey, offset: int) -> bool:
        """Whether the damage accounts for the record at ``offset`` missing. A record the exercise appended
        counts once recovery ran after the append: it truncates at the damage, whatever came after."""
        if offset in self.appended.get(tp, {}) and not self.recovered_after_appends:
            return False
        if tp in self.damage.donors and tp[0] in self.compacted:
            return True  # the copied-in batches' keys come again later than this partition's own records
        return self.damage.may_lose(tp, offset, self.recovered)

    def _compactable(self, tp: TopicPartitionKey) -> set[int]:
        """Offsets compaction may remove: records whose key comes again later, tombstones, aborted records
        and transaction markers."""
        key = (tp, len(self.appended.get(tp, ())))
        if key in self._compactable_offsets:
            return self._compactable_offsets[key]
        expected = self.expected_records(tp)
        last: dict[bytes | None, int] = {}
        for offset in sorted(expected):
            last[expected[offset].key] = offset
        kept = set(last.values())
        removable = {o for o, r in expected.items() if o not in kept or r.value is None or r.aborted}
        found = self._compactable_offsets[key] = removable | set(self.truth.partitions[tp].controls)
        return found

    def max_end(self, tp: TopicPartitionKey) -> int:
        truth = self.truth.partitions[tp]
        ends = [truth.log_end, self.damage.donor_end.get(tp, 0)]
        appended = self.appended.get(tp)
        if appended:
            ends.append(max(appended) + 1)
        return max(ends) + len(self.tentative.get(tp, ())) + len(self.markers.get(tp, ()))

    def _latest_commit_offsets(self) -> dict[tuple[str, TopicPartition], tuple[TopicPartitionKey, int]]:
        """Where the latest commit of each group and partition lies in ``__consumer_offsets``."""
        keys = {
            encode_offset_commit_key(group, tp): (group, tp)
            for group, offsets in self.truth.committed.items()
            for tp in offsets
        }
        found: dict[tuple[str, TopicPartition], tuple[TopicPartitionKey, int]] = {}
        for tp, truth in self.truth.partitions.items():
            if tp[0] != OFFSETS_TOPIC:
                continue
            for offset in sorted(truth.written):
                which = keys.get(truth.written[offset].key or b"")
                if which is not None:
                    found[which] = (tp, offset)
        return found

    # -- checks -------------------------------------------------------------------------------

    def check_all(self, final: bool = False) -> None:
        """Every check of the partitions the damage is in (``Damage.focus``); of the others, their log
        start and end, and at the end a read of all their records."""
        logs = self.logs()
        for tp in sorted(self.truth.partitions):
            log = self.open_partition(logs, tp)
            try:
                focused = self.damage.focus is None or tp in self.damage.focus
                self.check_partition(log, tp, _FULL if focused else _READ if final else _VIEW)
            finally:
                log.close()
        self.check_offsets(logs)
        self.check_topics(logs)
        self.check_transactions_and_groups(logs)

    def check_partition(self, log: Log, tp: TopicPartitionKey, depth: int) -> None:
        name = f"{tp[0]}-{tp[1]}"
        _, view = self.attempt(f"view {name}", log.view)
        if view is None:
            return
        start, end = view.log_start_offset, view.log_end_offset
        if start > end:
            self.fail("log start past the log end", f"{name}: log start {start} > log end {end}")
        if end > self.max_end(tp):
            self.fail(
                "log end past the records written", f"{name}: log end {end}, records written up to {self.max_end(tp)}"
            )
        if depth == _VIEW:
            return
        expected = self.expected_records(tp)
        for committed in (False, True) if depth == _FULL else (False,):
            level = "read_committed" if committed else "read_uncommitted"
            _, rows = self.attempt(f"{level} {name}", read_list, log, None, None, committed)
            if rows is not None:
                label = f"{level} {name} from the log start"
                self.check_records(label, tp, rows, start, None, committed)
                self.check_complete(label, tp, rows, self.wanted(tp, expected, committed), start)
        if depth != _FULL:
            return
        self.check_point_reads(log, tp, start, end)
        self.check_timestamps(log, tp, start, end)
        _, topic_id = self.attempt(f"topic id of {name}", lambda: log.topic_id)
        if self.kind != "partition.metadata" and topic_id is not None and tp[0] in self.truth.topics:
            if topic_id != self.truth.topics[tp[0]].topic_id:
                self.fail(
                    "wrong topic id", f"{name}: topic id {topic_id}, the topic's is {self.truth.topics[tp[0]].topic_id}"
                )

    def check_records(
        self,
        label: str,
        tp: TopicPartitionKey,
        rows: list[tuple[int, Record]],
        start: int,
        end: int | None,
        committed: bool,
    ) -> None:
        previous = None
        for offset, record in rows:
            if previous is not None and offset <= previous:
                self.fail("offsets out of order", f"{label}: offset {offset} after {previous}")
                return
            previous = offset
            if offset < start or (end is not None and offset >= end):
                self.fail("record outside the range read", f"{label}: offset {offset} outside [{start}, {end})")
                return
            allowed = self.allowed(tp, offset)
            match = next((a for a in allowed if _same(a, record)), None)
            if match is None:
                shown = allowed[0] if allowed else "nothing"
                self.fail("records that were not written", f"{label}: offset {offset} is {record}, written: {shown}")
                return
            if committed and match.aborted and self._known_aborted(tp, offset, match):
                self.fail("read_committed returned an aborted record", f"{label}: offset {offset} {record}")
                return

    def _known_aborted(self, tp: TopicPartitionKey, offset: int, record: Record) -> bool:
        """Whether the log still says that ``record`` at ``offset`` was aborted: it is this partition's own
        record (not one a copied-in segment brought) and the ABORT marker that follows it is not in damaged
        bytes (recovery truncating the marker leaves the transaction open, and a later marker of its
        producer may commit it, as in Kafka)."""
        if tp in self.damage.replaced_txn_state:
            return False
        if offset not in self.appended.get(tp, {}):
            truth = self.truth.partitions[tp]
            if truth.written.get(offset) != record:
                return False
            transaction = truth.transaction_at.get(offset)
            if transaction is None or not self._marker_kept(tp, transaction):
                return False
        return record not in self.tentative.get(tp, ())

    def _marker_kept(self, tp: TopicPartitionKey, transaction: Transaction) -> bool:
        marker = transaction.marker
        return marker is not None and not self.damage.may_lose(tp, marker, self.recovered)

    def committed_bound(self, tp: TopicPartitionKey) -> float:
        """Where read_committed reads may stop: at the first transaction whose marker the damage may have
        taken (the transaction is then open, and holds readers at its first offset)."""
        if (self.txn_uncertain and tp[0] == TXN) or tp in self.damage.replaced_txn_state:
            return float("-inf")
        open_ = [t.first_offset for t in self.truth.partitions[tp].transactions if not self._marker_kept(tp, t)]
        return min(open_, default=float("inf"))

    def wanted(self, tp: TopicPartitionKey, offsets: Iterable[int], committed: bool) -> set[int]:
        """Of ``offsets``, those a read should return (before damage is accounted for): records there, and
        for read_committed, committed ones below any transaction the damage may have left open."""
        expected = self.expected_records(tp)
        if not committed:
            return {o for o in offsets if o in expected}
        bound = self.committed_bound(tp)
        return {o for o in offsets if o in expected and not expected[o].aborted and o < bound}

    def check_complete(
        self, label: str, tp: TopicPartitionKey, rows: list[tuple[int, Record]], wanted: set[int], log_start: int
    ) -> None:
        """Every record of ``wanted`` that no damage accounts for is in ``rows``."""
        returned = {o for o, _ in rows}
        required = self.required(tp, wanted, log_start)
        if any(self.may_lose(tp, o) for o in wanted - returned - required):
            self.lost_to_damage = True
        missing = sorted(required - returned)
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
            self.fail("acknowledged records lost", f"{label}: {len(missing)} records missing (offsets {shown})")

    def check_point_reads(self, log: Log, tp: TopicPartitionKey, start: int, end: int) -> None:
        """Reads from an offset inside each segment: they start from the segment's offset index."""
        name = f"{tp[0]}-{tp[1]}"
        for batches in self.truth.partitions[tp].segments.values():
            data = [b for b in batches if not b.control]
            if not data:
                continue
            batch = data[len(data) // 2]
            first = min(batch.base_offset + 1, batch.last_offset)
            if not start <= first < end:
                continue
            for committed in (False, True):
                level = "read_committed" if committed else "read_uncommitted"
                label = f"{level} {name} [{first}, {first + 3})"
                _, rows = self.attempt(label, read_list, log, first, first + 3, committed)
                if rows is None:
                    continue
                self.check_records(label, tp, rows, first, first + 3, committed)
                self.check_complete(label, tp, rows, self.wanted(tp, range(first, first + 3), committed), start)

    def check_timestamps(self, log: Log, tp: TopicPartitionKey, start: int, end: int) -> None:
        """``offset_for_timestamp`` for timestamps of records across the log, between them and past them."""
        name = f"{tp[0]}-{tp[1]}"
        truth = self.truth.partitions[tp]
        stamps = {o: r.timestamp for o, r in self.expected_records(tp).items()}
        stamps.update({o: t for o, t in truth.controls.items() if o not in self.appended.get(tp, {})})
        if not stamps:
            return
        ordered = [stamps[o] for o in sorted(stamps)]
        targets = sorted({0, *(ordered[i * (len(ordered) - 1) // 4] for i in range(5)), ordered[len(ordered) // 2] + 1})
        targets.append(max(ordered) + 1)
        required = sorted(self.required(tp, (o for o in stamps if o >= start), start))
        for target in targets:
            label = f"offset_for_timestamp({target}) of {name}"
            ok, found = self.attempt(label, log.offset_for_timestamp, target)
            if not ok:
                continue
            first_match = next((o for o in required if stamps[o] >= target), None)
            if found is None:
                if first_match is not None:
                    self.fail(
                        "offset_for_timestamp found nothing although a record matches",
                        f"{label}: None, but offset {first_match} has timestamp {stamps[first_match]}",
                    )
                continue
            offset, stamp = found
            if offset >= end or offset < start:
                self.fail("offset_for_timestamp answered outside the log", f"{label}: {found}, log [{start}, {end})")
            elif stamp < target or not self.allowed_timestamp(tp, offset, stamp):
                self.fail("offset_for_timestamp answered a record that is not there", f"{label}: {found}")
            elif first_match is not None and offset > first_match:
                self.fail(
                    "offset_for_timestamp answered later than the first match",
                    f"{label}: {found}, but offset {first_match} has timestamp {stamps[first_match]}",
                )

    def check_offsets(self, logs: LogDirectory) -> None:
        _, store = self.attempt("OffsetStore", OffsetStore, logs)
        if store is None:
            return
        try:
            known_groups = set(self.truth.committed) | {g for g, _ in self.run_commits}
            _, groups = self.attempt("OffsetStore.groups", store.groups)
            if groups is not None and not set(groups) <= known_groups:
                self.fail("committed offsets of groups that never committed", f"groups() = {groups}")
            for group in sorted(known_groups):
                _, committed = self.attempt(f"committed offsets of {group}", store.committed, group)
                if group in MEMBER_GROUPS:
                    self.attempt(f"describe group {group}", store.describe, group)
                if committed is not None:
                    self.check_committed(group, committed)
        finally:
            store.close()

    def check_committed(self, group: str, committed: dict[TopicPartition, OffsetAndMetadata]) -> None:
        history = self.truth.commit_history
        for tp, value in committed.items():
            allowed = set(history.get((group, tp), ()))
            if (group, tp) in self.tentative_commits:
                allowed.add(self.tentative_commits[(group, tp)])
            if value.offset not in allowed:
                self.fail(
                    "committed offsets that were never committed",
                    f"{group} {tp}: {value.offset}, committed: {sorted(allowed)}",
                )
        for tp in sorted(set(self.truth.committed.get(group, {})) | {t for g, t in self.run_commits if g == group}):
            if (group, tp) in self.run_commits:
                latest = {self.run_commits[(group, tp)]}
            else:
                if self.kind == "topics":
                    continue  # the partition count of __consumer_offsets, so where a group's offsets are, may differ
                where, offset = self.latest_commit_offsets[(group, tp)]
                if not self.required(where, [offset], 0):
                    continue
                # A commit of the exercise that failed may have been written all the same.
                latest = {self.truth.committed[group][tp], *self._tentative_commit(group, tp)}
            got = committed.get(tp)
            if got is None or got.offset not in latest:
                self.fail(
                    "committed offset lost",
                    f"{group} {tp}: {None if got is None else got.offset}, last committed {sorted(latest)}",
                )

    def _tentative_commit(self, group: str, tp: TopicPartition) -> list[int]:
        value = self.tentative_commits.get((group, tp))
        return [] if value is None else [value]

    def check_topics(self, logs: LogDirectory) -> None:
        topics = logs.topics
        _, names = self.attempt("topics.names", topics.names)
        if names is not None and self.kind != "topics" and names != sorted(self.truth.topics):
            self.fail("wrong topic list", f"{names}, created: {sorted(self.truth.topics)}")
        for name, expected in sorted(self.truth.topics.items()):
            _, metadata = self.attempt(f"topics.get({name})", topics.get, name)
            self.attempt(f"topics.describe_configs({name})", topics.describe_configs, name)
            if metadata is None or self.kind == "topics":
                continue
            if (metadata.partitions, dict(metadata.configs)) != (expected.partitions, expected.configs):
                self.fail("wrong topic metadata", f"{name}: {metadata}, created with {expected}")

    def check_transactions_and_groups(self, logs: LogDirectory) -> None:
        coordinator = TransactionCoordinator(logs)
        try:
            _, ids = self.attempt("transactional_ids", coordinator.transactional_ids)
            if ids is not None and self.kind != "txn-state" and ids != sorted(TRANSACTIONAL_IDS):
                self.fail("wrong transactional ids", f"{ids}")
            for txn_id in TRANSACTIONAL_IDS:
                _, meta = self.attempt(f"describe transaction {txn_id}", coordinator.describe, txn_id)
                if (
                    meta is not None
                    and self.kind != "txn-state"
                    and not self.txn_uncertain
                    and meta.state not in _COMPLETE
                ):
                    self.fail("wrong transaction state", f"{txn_id}: {meta.state}")
        finally:
            coordinator.close()
        self.attempt("list groups", list_group_ids, logs)
        for group in MEMBER_GROUPS:
            self.attempt(f"describe_group {group}", describe_group, logs, group)

    # -- recovery, appends, cleaner -------------------------------------------------------------

    def recover_all(self) -> None:
        logs = self.logs()
        for tp in sorted(self.truth.partitions):
            log = self.open_partition(logs, tp)
            try:
                self.attempt(f"recover {tp[0]}-{tp[1]}", log.local.recover)
            finally:
                log.close()

    def _new_records(self, n: int) -> list[Record]:
        records = []
        for _ in range(n):
            self.serial += 1
            headers = (("fuzz", str(self.serial).encode()),) if self.serial % 2 else None
            records.append(
                Record(
                    f"fuzz-key-{self.serial}".encode(),
                    f"appended-{self.serial}".encode(),
                    headers,
                    APPEND_T0 + self.serial,
                )
            )
        return records

    def _note_append(self, tp: TopicPartitionKey, first: int, records: list[Record]) -> None:
        appended = self.appended.setdefault(tp, {})
        self._expected.pop(tp, None)
        for offset, record in enumerate(records, first):
            appended[offset] = record

    def append_all(self) -> None:
        logs = self.logs()
        config = ProducerConfig.from_properties({**PRODUCER_CONFIGS, "compression.type": "lz4"})
        _, producer = self.attempt("Producer", Producer, logs, config)
        if producer is not None:
            try:
                for tp in sorted(self.truth.partitions):
                    if tp[0] in DATA_TOPICS:
                        self.append_one(logs, producer, tp)
            finally:
                self.attempt("Producer.close", producer.close)
        self.transactions(logs)
        self.commit(logs)

    def commit(self, logs: LogDirectory) -> None:
        """A commit of the first group, read back; once acknowledged it must be what the group reads."""
        _, store = self.attempt("OffsetStore", OffsetStore, logs)
        if store is None:
            return
        group, tp = GROUPS[0], TopicPartition(EVENTS, 0)
        self.serial += 1
        stamp = APPEND_T0 + self.serial
        # Where the commit lands is the log's to say: its record may appear at any offset past the old end.
        record = Record(
            encode_offset_commit_key(group, tp),
            encode_offset_commit_value(CommittedOffset(COMMITTED, "", -1, stamp)),
            None,
            stamp,
        )
        for where in self.truth.partitions:  # damaged topic metadata may move the group to another partition
            if where[0] == OFFSETS_TOPIC:
                self.tentative.setdefault(where, []).append(record)
        self.tentative_commits[(group, tp)] = COMMITTED
        try:
            commit = {tp: OffsetAndMetadata(COMMITTED)}
            ok, _ = self.attempt(f"commit {group}", store.commit, group, commit, commit_timestamp_ms=stamp)
            if ok:
                self.run_commits[(group, tp)] = COMMITTED
                _, committed = self.attempt(f"committed offsets of {group}", store.committed, group)
                if committed is not None:
                    self.check_committed(group, committed)
        finally:
            store.close()

    def append_one(self, logs: LogDirectory, producer: Producer, tp: TopicPartitionKey) -> None:
        name = f"{tp[0]}-{tp[1]}"
        records = self._new_records(3)
        table = records_table(records, [tp[1]] * len(records))
        _, result = self.attempt(f"send_arrow {name}", producer.send_arrow, tp[0], table)
        if result is None or tp[1] not in result:
            self.tentative.setdefault(tp, []).extend(records)
            return
        info = result[tp[1]]
        if info.last_offset - info.first_offset + 1 != len(records):
            self.fail("append acknowledged a wrong number of records", f"{name}: {info}")
            self.tentative.setdefault(tp, []).extend(records)
            return
        self._note_append(tp, info.first_offset, records)
        self.read_back(logs, tp, info.first_offset, records)

    def read_back(self, logs: LogDirectory, tp: TopicPartitionKey, first: int, records: list[Record]) -> None:
        log = self.open_partition(logs, tp)
        name = f"{tp[0]}-{tp[1]}"
        try:
            label = f"read back {name} [{first}, {first + len(records)})"
            _, rows = self.attempt(label, read_list, log, first, first + len(records), False)
            if rows is not None:
                self.check_records(label, tp, rows, first, first + len(records), False)
                self.check_complete(label, tp, rows, set(range(first, first + len(records))), 0)
        finally:
            log.close()

    def transactions(self, logs: LogDirectory) -> None:
        """A committed transaction of the first transactional id, an aborted one of the second."""
        for txn_id, commit in zip(TRANSACTIONAL_IDS, (True, False), strict=True):
            config = ProducerConfig.from_properties({**PRODUCER_CONFIGS, "transactional.id": txn_id})
            _, producer = self.attempt(f"Producer {txn_id}", Producer, logs, config)
            if producer is None:
                continue
            sent = []
            try:
                started = (
                    self.attempt(f"init_transactions {txn_id}", producer.init_transactions)[0]
                    and self.attempt(f"begin_transaction {txn_id}", producer.begin_transaction)[0]
                )
                if not started:
                    self.txn_uncertain = True  # a transaction of the id may be left open
                    continue
                for partition in (0, 1):
                    (record,) = self._new_records(1)
                    if not commit:
                        record = Record(record.key, record.value, record.headers, record.timestamp, aborted=True)
                    _, future = self.attempt(
                        f"send {txn_id}",
                        producer.send,
                        TXN,
                        record.value,
                        key=record.key,
                        headers=list(record.headers or ()) or None,
                        partition=partition,
                        timestamp_ms=record.timestamp,
                    )
                    if future is not None:
                        sent.append((future, (TXN, partition), record))
                end = producer.commit_transaction if commit else producer.abort_transaction
                if not self.attempt(f"{'commit' if commit else 'abort'} {txn_id}", end)[0]:
                    self.txn_uncertain = True
                for future, tp, record in sent:
                    _, metadata = self.attempt(f"result of send {txn_id}", future.get, timeout=30)
                    if metadata is None:
                        self.tentative.setdefault(tp, []).append(record)
                    else:  # acknowledged: in the log whatever became of its transaction
                        self._note_append(tp, metadata.offset, [record])
                        self.markers.setdefault(tp, set()).add(metadata.offset + 1)  # its COMMIT or ABORT marker
            finally:
                self.attempt(f"close producer {txn_id}", producer.close)

    def clean(self) -> None:
        _, reports = self.attempt("run_cleaner", run_cleaner, self.logs())
        for report in reports or ():
            if report.error is None:
                continue
            error_name = report.error.split(":", 1)[0]
            if error_name in self.typed_names:
                self.typed.append((self.phase, f"cleaner {report.topic}-{report.partition}: {error_name}"))
            else:
                self.fail(
                    f"untyped {error_name} reported by the cleaner",
                    f"{report.topic}-{report.partition}: {report.error}",
                )


def read_list(log: Log, start: int | None, end: int | None, committed: bool) -> list[tuple[int, Record]]:
    return list(read_records(log, start, end, include_aborted=not committed))


def _same(a: Record, b: Record) -> bool:
    return (a.key, a.value, a.headers, a.timestamp) == (b.key, b.value, b.headers, b.timestamp)


def _distinct(failures: list[Failure]) -> list[Failure]:
    seen: set[tuple[str, str]] = set()
    found = []
    for failure in failures:
        if (failure.cause, failure.detail) not in seen:
            seen.add((failure.cause, failure.detail))
            found.append(failure)
    return found
