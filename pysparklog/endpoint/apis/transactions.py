"""Idempotent and transactional producers: InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26) and TxnOffsetCommit (28), over the log directory's transaction coordinator
(``pysparklog.transactions.TransactionCoordinator``).

Every endpoint coordinates every transactional id: an id's state is one file in the log directory, changed under
its lock and replaced only if still the version read, so two endpoints answering requests of one id at once are
serialised by the storage, and FindCoordinator may name whichever endpoint was asked.

Versions served, the highest of each that Kafka 4's clients send without transactions v2 (KIP-890 part 2, which
clients use only when the broker finalises the ``transaction.version`` feature; ApiVersions finalises none):

    InitProducerId     v0-v5   v3+ carry the producer's session for a bump (KIP-360); v6 (KIP-939's 2PC) is not
                               served
    AddPartitionsToTxn v0-v5   v0-v3 from clients; v4+ the batched form with ``verify_only`` (brokers send it)
    AddOffsetsToTxn    v0-v4
    EndTxn             v0-v4   v5 belongs to transactions v2 (an epoch bump at every end)
    TxnOffsetCommit    v0-v4   v5 belongs to transactions v2 (offsets added without AddOffsetsToTxn)

TxnOffsetCommit comes to the group's coordinator, as in Kafka, which checks the member and generation it names.

Errors, as Kafka's coordinator answers them: a newer session of the id fences the request with PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH below InitProducerId v4 and the others' v2, which predate KIP-588); an id never initialised
is INVALID_PRODUCER_ID_MAPPING; a transaction being ended, or offsets of a group the transaction did not add, is
INVALID_TXN_STATE; a timeout above ``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT. A change of the
id's state that another endpoint made while this one held its lock (a lease that lapsed), or a storage failure, is
answered COORDINATOR_NOT_AVAILABLE, which clients retry.

Transactions open longer than their ``transaction.timeout.ms`` are aborted, with the producer fenced, every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (Kafka's broker setting, 10 s by default; both
settings are read from the log directory's ``server.properties``), by every endpoint from its start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from pysparklog.endpoint.apis import Api
from pysparklog.endpoint.apis.versions import NO_THROTTLE
from pysparklog.endpoint.context import EndpointState, RequestContext
from pysparklog.endpoint.group_coordinator import GroupCoordinator, GroupError
from pysparklog.errors import (
    InvalidConfigError,
    InvalidOffsetError,
    InvalidTopicError,
    ObjectStoreError,
    ProducerFencedError,
    StorageConflictError,
    UnknownTopicError,
)
from pysparklog.offsets import checked_offsets
from pysparklog.storage.producer_ids import allocate_producer_id
from pysparklog.storage.topic_config import ConfigKey, ConfigType, ServerProperties
from pysparklog.structs import OffsetAndMetadata, TopicPartition
from pysparklog.transactions import (
    InvalidPidMappingError,
    InvalidTxnStateError,
    ProducerSession,
    TransactionCoordinator,
    TransactionState,
)

log = logging.getLogger("pysparklog.endpoint.transactions")

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28

#: Kafka's broker settings, read from the log directory's ``server.properties``.
TRANSACTION_MAX_TIMEOUT_MS = ConfigKey("transaction.max.timeout.ms", ConfigType.INT, "900000", minimum=1)
ABORT_INTERVAL_MS = ConfigKey(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms", ConfigType.INT, "10000", minimum=1
)

#: The first version of each API whose clients know PRODUCER_FENCED (KIP-588); older ones get
#: INVALID_PRODUCER_EPOCH, as Kafka's KafkaApis answers them.
_PRODUCER_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}
#: The first AddPartitionsToTxn version of the batched, broker-to-broker form.
_BATCHED_ADD_PARTITIONS = 4
_NO_PRODUCER_ID = -1

T = TypeVar("T")


def _broker_int(server: ServerProperties, key: ConfigKey) -> int:
    """An int broker setting of ``server.properties``, else Kafka's default."""
    value = server.get(key)
    assert value is None or isinstance(value, int)
    return int(str(key.default)) if value is None else value


class TransactionsState:
    """The endpoint's transaction coordinator and the timer that aborts expired transactions.

    Raises:
        InvalidConfigError: ``server.properties`` sets one of the two transaction settings to a value Kafka refuses.
    """

    def __init__(self, endpoint: EndpointState) -> None:
        server = endpoint.log_dir.topics.server_properties()
        self.max_timeout_ms = _broker_int(server, TRANSACTION_MAX_TIMEOUT_MS)
        self.abort_interval_ms = _broker_int(server, ABORT_INTERVAL_MS)
        self.coordinator = TransactionCoordinator(endpoint.log_dir)
        self._stopping = threading.Event()
        # A thread rather than a task of the event loop: close() waits for a round under way before the coordinator
        # closes the logs that round writes markers to.
        self._timer = threading.Thread(target=self._abort_expired, name="pysparklog-txn-timeouts", daemon=True)
        self._timer.start()

    def _abort_expired(self) -> None:
        while not self._stopping.wait(self.abort_interval_ms / 1000):
            try:
                aborted = self.coordinator.abort_expired()
            except Exception:  # the next round tries again; a damaged state file is named in the log
                log.exception("aborting the transactions open past their timeout failed")
                continue
            for transactional_id in aborted:
                log.info("aborted the transaction of %r, open past its timeout", transactional_id)

    def close(self) -> None:
        self._stopping.set()
        self._timer.join()
        self.coordinator.close()


def _fenced(context: RequestContext) -> ErrorCode:
    """PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for a version that predates it."""
    since = _PRODUCER_FENCED_SINCE.get(context.message.api_key, 0)
    return ErrorCode.producer_fenced if context.message.version >= since else ErrorCode.invalid_producer_epoch


async def _coordinate(context: RequestContext, call: Callable[..., T], *args: Any) -> tuple[T | None, ErrorCode]:
    """``call(*args)`` on the engine's threads, and the error code of the coordinator's refusal (NONE: done)."""
    try:
        return await context.endpoint.run_blocking(call, *args), ErrorCode.none
    except ProducerFencedError:
        return None, _fenced(context)
    except InvalidPidMappingError:
        return None, ErrorCode.invalid_producer_id_mapping
    except InvalidTxnStateError:
        return None, ErrorCode.invalid_txn_state
    except InvalidConfigError:  # the one the coordinator's calls raise here: an empty transactional id
        return None, ErrorCode.invalid_request
    except (StorageConflictError, ObjectStoreError, OSError) as error:
        # As Kafka's coordinator answers a failed write of its state: the client finds a coordinator and retries
        # (the id's recorded decision, if any, is finished by the retry).
        log.warning("the transaction coordinator's storage failed: %s", error)
        return None, ErrorCode.coordinator_not_available


def _each(array: Iterable[T] | None) -> Iterable[T]:
    """A request's array; kio reads a null one (length -1) as None even where the schema allows no null: nothing."""
    return () if array is None else array


def _state(context: RequestContext) -> TransactionsState:
    return context.endpoint.state(TransactionsState)


def _session(request: Any) -> ProducerSession:
    return ProducerSession(int(request.producer_id), int(request.producer_epoch))


# -- InitProducerId -----------------------------------------------------------------------------------------------
#
# InitProducerIdRequest: transactional_id (nullable), transaction_timeout (ms); v3+ producer_id, producer_epoch
# (-1: none). Response: error_code, producer_id, producer_epoch.


async def init_producer_id(context: RequestContext, request: Any) -> Any:
    """An idempotent producer (no transactional id) gets a producer id of its own at epoch 0, as Kafka hands one out
    blindly; a transactional producer a new session of its id, which fences the older ones (Kafka's
    ``TransactionCoordinator.handleInitProducerId``)."""
    state = _state(context)
    transactional_id = request.transactional_id
    timeout_ms = request.transaction_timeout // timedelta(milliseconds=1)
    error = ErrorCode.none
    session: ProducerSession | None = None
    if transactional_id is None:
        producer_id, error = await _coordinate(context, allocate_producer_id, context.endpoint.log_dir.storage)
        session = None if producer_id is None else ProducerSession(producer_id, 0)
    elif not transactional_id:
        error = ErrorCode.invalid_request  # as Kafka answers an empty id, consistent with its producer's check
    elif not 1 <= timeout_ms <= state.max_timeout_ms:
        error = ErrorCode.invalid_transaction_timeout
    else:
        expected = _session(request) if getattr(request, "producer_id", _NO_PRODUCER_ID) != _NO_PRODUCER_ID else None
        session, error = await _coordinate(
            context, state.coordinator.init_producer_id, transactional_id, timeout_ms, expected
        )
    return context.message.make(
        "InitProducerIdResponse",
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=ProducerId(session.producer_id if session is not None else _NO_PRODUCER_ID),
        producer_epoch=i16(session.producer_epoch if session is not None else -1),
    )


# -- AddPartitionsToTxn -------------------------------------------------------------------------------------------
#
# v0-v3: v3_and_below_transactional_id, _producer_id, _producer_epoch, _topics [name, partitions[]];
#        response results_by_topic_v3_and_below [name, results_by_partition [partition_index, partition_error_code]].
# v4+:   transactions [transactional_id, producer_id, producer_epoch, verify_only, topics]; response error_code and
#        results_by_transaction [transactional_id, topic_results].


def _topic_results(context: RequestContext, errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            context.message.make(
                "AddPartitionsToTxnPartitionResult", partition_index=tp.partition, partition_error_code=error
            )
        )
    return tuple(
        context.message.make("AddPartitionsToTxnTopicResult", name=name, results_by_partition=tuple(results))
        for name, results in by_topic.items()
    )


def _requested(topics: Iterable[Any]) -> list[TopicPartition]:
    return list(dict.fromkeys(TopicPartition(t.name, int(p)) for t in _each(topics) for p in _each(t.partitions)))


def _missing_partitions(context: RequestContext, partitions: list[TopicPartition]) -> set[TopicPartition]:
    """Those of ``partitions`` whose topic or partition does not exist."""
    counts: dict[str, int] = {}
    for topic in {tp.topic for tp in partitions}:
        try:
            counts[topic] = context.endpoint.log_dir.topics.get(topic).partitions
        except (UnknownTopicError, InvalidTopicError):
            counts[topic] = 0
    return {tp for tp in partitions if not 0 <= tp.partition < counts[tp.topic]}


async def _add_partitions(
    context: RequestContext, transactional_id: str, session: ProducerSession, partitions: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """Kafka's rule: partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION and the others
    OPERATION_NOT_ATTEMPTED, nothing added; otherwise the coordinator's answer for each."""
    missing, error = await _coordinate(context, _missing_partitions, context, partitions)
    if missing is None:
        return dict.fromkeys(partitions, error)
    if missing:
        return {
            tp: ErrorCode.unknown_topic_or_partition if tp in missing else ErrorCode.operation_not_attempted
            for tp in partitions
        }
    _, error = await _coordinate(
        context, _state(context).coordinator.add_partitions, transactional_id, session, partitions
    )
    return dict.fromkeys(partitions, error)


def _verify_partitions(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    session: ProducerSession,
    partitions: list[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4+ with ``verify_only``: whether each partition is in the session's open transaction
    (Kafka's ``handleVerifyPartitionsInTransaction``), nothing changed."""
    meta = coordinator.describe(transactional_id)
    if meta is None or meta.producer_id != session.producer_id:
        return dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
    if meta.producer_epoch != session.producer_epoch:
        return dict.fromkeys(partitions, ErrorCode.producer_fenced)
    if meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
        return dict.fromkeys(partitions, ErrorCode.concurrent_transactions)
    ongoing = meta.state == TransactionState.ONGOING
    return {
        tp: ErrorCode.none if ongoing and tp in meta.partitions else ErrorCode.invalid_txn_state for tp in partitions
    }


async def add_partitions_to_txn(context: RequestContext, request: Any) -> Any:
    """Register partitions in a transaction before the producer's first write to each."""
    make = context.message.make
    if context.message.version < _BATCHED_ADD_PARTITIONS:
        partitions = _requested(request.v3_and_below_topics)
        errors = await _add_partitions(
            context,
            request.v3_and_below_transactional_id,
            ProducerSession(int(request.v3_and_below_producer_id), int(request.v3_and_below_producer_epoch)),
            partitions,
        )
        return make(
            "AddPartitionsToTxnResponse",
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=_topic_results(context, errors),
        )
    results = []
    for transaction in _each(request.transactions):
        partitions = _requested(transaction.topics)
        session = _session(transaction)
        if transaction.verify_only:
            verified, error = await _coordinate(
                context,
                _verify_partitions,
                _state(context).coordinator,
                transaction.transactional_id,
                session,
                partitions,
            )
            errors = dict.fromkeys(partitions, error) if verified is None else verified
        else:
            errors = await _add_partitions(context, transaction.transactional_id, session, partitions)
        results.append(
            make(
                "AddPartitionsToTxnResult",
                transactional_id=transaction.transactional_id,
                topic_results=_topic_results(context, errors),
            )
        )
    return make(
        "AddPartitionsToTxnResponse",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(results),
    )


# -- AddOffsetsToTxn ----------------------------------------------------------------------------------------------
#
# AddOffsetsToTxnRequest: transactional_id, producer_id, producer_epoch, group_id. Response: error_code.


async def add_offsets_to_txn(context: RequestContext, request: Any) -> Any:
    """Let the transaction commit offsets of a consumer group (Kafka adds the group's ``__consumer_offsets``
    partition to the transaction; here the coordinator holds the offsets until the transaction ends)."""
    if not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        coordinator = _state(context).coordinator
        _, error = await _coordinate(
            context, coordinator.add_offsets, request.transactional_id, _session(request), request.group_id
        )
    return context.message.make("AddOffsetsToTxnResponse", throttle_time=NO_THROTTLE, error_code=error)


# -- TxnOffsetCommit ----------------------------------------------------------------------------------------------
#
# TxnOffsetCommitRequest: transactional_id, group_id, producer_id, producer_epoch, (v3+ generation_id, member_id,
# group_instance_id), topics [name, partitions [partition_index, committed_offset, (v2+ committed_leader_epoch),
# committed_metadata]]. Response: topics [name, partitions [partition_index, error_code]].


def _offset_error(group_id: str, tp: TopicPartition, committed: OffsetAndMetadata) -> ErrorCode:
    """What Kafka answers for a partition's offset that ``OffsetStore.commit`` would refuse (NONE: accepted)."""
    try:
        checked_offsets(group_id, {tp: committed})
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    except InvalidOffsetError:
        return ErrorCode.invalid_commit_offset_size
    except InvalidConfigError:
        return ErrorCode.offset_metadata_too_large  # the one partition-level config check: the metadata's size
    return ErrorCode.none


async def _group_refusal(context: RequestContext, request: Any) -> ErrorCode:
    """The group coordinator's checks of a TxnOffsetCommit (Kafka's ``GroupCoordinator.doTxnCommitOffsets``): the
    client sends it to the group's coordinator (NOT_COORDINATOR elsewhere, and it looks the coordinator up again);
    from v3 on, a member id must be a member of the group (UNKNOWN_MEMBER_ID), a static member's instance id its own
    (FENCED_INSTANCE_ID) and a generation the group's (ILLEGAL_GENERATION). A commit without them (v0-v2, or a
    producer outside any group) is not checked, as Kafka does not check it. NONE: accepted."""
    try:
        group = await context.endpoint.state(GroupCoordinator).group(request.group_id, create=False)
    except GroupError as error:
        return error.code
    member_id: str = getattr(request, "member_id", "")
    generation: int = getattr(request, "generation_id", -1)
    instance_id: str | None = getattr(request, "group_instance_id", None)
    members = {} if group is None else group.members
    if instance_id is not None and group is not None:
        static = group.static_member(instance_id)
        if static is not None and static.member_id != member_id:
            return ErrorCode.fenced_instance_id
    if member_id and member_id not in members:
        return ErrorCode.unknown_member_id
    if generation >= 0 and (group is None or generation != group.generation):
        return ErrorCode.illegal_generation
    return ErrorCode.none


async def txn_offset_commit(context: RequestContext, request: Any) -> Any:
    """Offsets committed in the transaction: the group's committed offsets once it commits. Partitions whose offset
    is refused get their error and are left out; the others share the group's and then the transaction
    coordinator's answer."""
    make = context.message.make
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic in _each(request.topics):
        for partition in _each(topic.partitions):
            tp = TopicPartition(topic.name, int(partition.partition_index))
            committed = OffsetAndMetadata(
                int(partition.committed_offset),
                partition.committed_metadata or "",
                int(getattr(partition, "committed_leader_epoch", -1)),
            )
            errors[tp] = (
                ErrorCode.invalid_group_id if not request.group_id else _offset_error(request.group_id, tp, committed)
            )
            if errors[tp] == ErrorCode.none:
                offsets[tp] = committed
    if offsets:
        error = await _group_refusal(context, request)
        if error == ErrorCode.none:
            coordinator = _state(context).coordinator
            _, error = await _coordinate(
                context,
                coordinator.commit_offsets,
                request.transactional_id,
                _session(request),
                request.group_id,
                offsets,
            )
        errors.update(dict.fromkeys(offsets, error))
    by_topic: dict[str, list[Any]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            make("TxnOffsetCommitResponsePartition", partition_index=tp.partition, error_code=error)
        )
    return make(
        "TxnOffsetCommitResponse",
        throttle_time=NO_THROTTLE,
        topics=tuple(
            make("TxnOffsetCommitResponseTopic", name=name, partitions=tuple(p)) for name, p in by_topic.items()
        ),
    )


# -- EndTxn -------------------------------------------------------------------------------------------------------
#
# EndTxnRequest: transactional_id, producer_id, producer_epoch, committed. Response: error_code.


async def end_txn(context: RequestContext, request: Any) -> Any:
    """Commit or abort: the decision recorded, a COMMIT or ABORT marker in every partition of the transaction, the
    offsets it carries committed (on commit), then the transaction complete; a retry of a completed end succeeds."""
    end = partial(_state(context).coordinator.end_transaction, commit=bool(request.committed))
    _, error = await _coordinate(context, end, request.transactional_id, _session(request))
    return context.message.make("EndTxnResponse", throttle_time=NO_THROTTLE, error_code=error)


APIS = (
    Api(INIT_PRODUCER_ID, 0, 5, init_producer_id),
    Api(ADD_PARTITIONS_TO_TXN, 0, 5, add_partitions_to_txn),
    Api(ADD_OFFSETS_TO_TXN, 0, 4, add_offsets_to_txn),
    Api(END_TXN, 0, 4, end_txn),
    Api(TXN_OFFSET_COMMIT, 0, 4, txn_offset_commit),
)
