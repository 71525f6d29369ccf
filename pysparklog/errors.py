"""Exceptions raised by pysparklog.

Every error that is about bytes on disk names the file and the byte position, and says what was
expected, so that a corrupt segment can be found and inspected with ``pysparklog dump-log``.
"""

from __future__ import annotations

import os


class PySparkLogError(Exception):
    """Base class of every error raised by pysparklog."""


class CorruptRecordError(PySparkLogError):
    """Bytes that do not form a valid record batch, index entry or state file.

    Args:
        message: What is wrong and what was expected.
        file: The file the bytes came from, when known.
        position: The byte position in that file, when known.
    """

    def __init__(self, message: str, *, file: str | os.PathLike[str] | None = None, position: int | None = None):
        self.file = os.fspath(file) if file is not None else None
        self.position = position
        self.detail = message
        where = []
        if self.file is not None:
            where.append(f"file {self.file}")
        if position is not None:
            where.append(f"position {position}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class UnsupportedCodecError(CorruptRecordError):
    """A compression codec id or name that Kafka does not define."""


class InvalidConfigError(PySparkLogError, ValueError):
    """A configuration key or value that is not accepted; the message names both and what is accepted."""


class InvalidTimestampError(PySparkLogError, ValueError):
    """A record timestamp outside the topic's ``message.timestamp.before.max.ms`` / ``after.max.ms`` window."""


class InvalidRecordError(PySparkLogError, ValueError):
    """Records that cannot be written as given (Kafka's ``InvalidRecordException``): the data lacks a column a
    record needs (``value``), or a column holds a type no record field takes (a ``key`` that is not bytes or text,
    a ``timestamp`` that is no time, ``headers`` that are not key-value pairs). The data is wrong, not a setting."""


class RecordTooLargeError(PySparkLogError, ValueError):
    """A record or record batch larger than a limit allows (Kafka's ``RecordTooLargeException``): the topic's
    ``max.message.bytes`` for a batch appended to a log, the producer's ``max.request.size`` for a record sent."""


class InvalidOffsetError(PySparkLogError, ValueError):
    """An offset that is negative, overflows, or lies outside what the log holds."""


class OffsetOutOfRangeError(InvalidOffsetError):
    """A read or seek to an offset outside [log start offset, log end offset]."""


class InvalidLogDirectoryError(PySparkLogError, ValueError):
    """A directory that is not a ``<topic>-<partition>`` partition directory or a log directory."""


class InvalidTopicError(InvalidLogDirectoryError):
    """A topic name Kafka refuses (characters, length, ``.``/``..``, a collision); it cannot name a partition
    directory either, hence the base class."""


class InvalidTopicIdError(PySparkLogError, ValueError):
    """A topic id that is not a Kafka ``Uuid`` in a form accepted, is one Kafka reserves, or is another topic's."""


class TransactionInProgressError(PySparkLogError):
    """An operation refused while a transaction is open on a partition it concerns (its outcome would be lost)."""


class UnknownTopicError(PySparkLogError, LookupError):
    """A topic, or a partition of one, that does not exist (Kafka's ``UnknownTopicOrPartitionException``)."""


class TopicExistsError(PySparkLogError):
    """A topic that already exists, created by ``topics --create`` or by an append to one of its partitions."""


class InvalidPartitionsError(PySparkLogError, ValueError):
    """A partition count below 1, or an alteration that would not add partitions."""


class PolicyViolationError(PySparkLogError):
    """A request a topic's configs forbid (Kafka's ``PolicyViolationException``): deleting records of a topic whose
    ``cleanup.policy`` lacks ``delete``."""


class OutOfOrderSequenceError(PySparkLogError):
    """An idempotent batch whose sequence does not follow the producer's last one (Kafka's
    ``OutOfOrderSequenceException``): a batch was lost in between, so appending it would leave a gap."""


class ProducerFencedError(PySparkLogError):
    """A batch from a producer epoch older than the one the log has seen (Kafka's
    ``InvalidProducerEpochException`` / ``ProducerFencedException``): a newer instance took over."""


class CommitFailedError(PySparkLogError):
    """An offset commit refused because the committing member no longer owns the partition in the
    group's current generation (Kafka's ``CommitFailedException``): a rebalance moved it."""


class FencedInstanceIdError(PySparkLogError):
    """A static member (``group.instance.id``) replaced by a newer member with the same instance id."""


class GroupNotEmptyError(PySparkLogError):
    """An operation that needs a group without live members (delete, reset offsets) on an active group."""


class GroupIdNotFoundError(PySparkLogError, LookupError):
    """A consumer group with neither committed offsets nor members."""


class UnknownMemberIdError(PySparkLogError):
    """A consumer-group member the group no longer knows: it left, or missed heartbeats for longer than
    its session timeout and was removed. It must rejoin; its partitions may already be elsewhere."""


class InconsistentGroupProtocolError(PySparkLogError):
    """A member whose ``partition.assignment.strategy`` shares no assignor with the group's members."""


class StorageConflictError(PySparkLogError):
    """A conditional write that lost: the file it would create exists, or it changed since the version the
    writer read (an object store's 412 Precondition Failed). The writer re-reads and decides again."""


class MetadataChangedError(StorageConflictError):
    """A metadata file (topics, producer ids, a group's or a transactional id's state, a sink's decision) changed
    between its holder's read and its write, although the holder held its lock: the lock lapsed (a lease that ran
    out while its holder stalled) and another process took it and wrote. Nothing was written; the operation can
    be run again, and then reads the newer state."""


class LogEndChangedError(StorageConflictError):
    """An append conditional on the log end (``append_arrow(..., expected_end_offset=...)``) found records appended
    after the end its caller read: the caller's decision rests on a state that is no longer the latest. Nothing was
    appended; read what was appended since and decide again."""


class ObjectStoreError(PySparkLogError):
    """An object store that cannot serve a log directory as it is set up: its bucket, its credentials, its endpoint
    or what it honours. The message names the setting to check."""


class NoSuchBucketError(ObjectStoreError, LookupError):
    """The bucket (container) a log directory's URL names does not exist where the store is asked."""


class StoreAccessDeniedError(ObjectStoreError, PermissionError):
    """The store refused the credentials, or the bucket's policy refused the request."""


class StoreUnreachableError(ObjectStoreError, ConnectionError):
    """The store's endpoint did not answer, after the client's retries."""


class ConditionalWritesUnsupportedError(ObjectStoreError):
    """An object store that accepts a conditional write and ignores its condition (``If-None-Match: *`` or
    ``If-Match``), as some S3-compatible stores and gateways do: every writer would win every name, so writers
    would overwrite each other's commits and acknowledged records would be lost without an error. Found by
    ``ObjectStorage``'s check before its first write; nothing is written to such a store."""


class DataLossError(PySparkLogError):
    """Offsets a query was to read are gone (retention, delete-records, a deleted topic or partition)
    and ``failOnDataLoss`` is true, Spark's Kafka source's default."""


class SinkCommitError(PySparkLogError):
    """A micro-batch cannot be committed exactly once; Spark fails the query, and the batch is written
    again when it restarts."""


class PythonWorkerEnvironmentWarning(UserWarning):
    """The Python Spark starts for its Python workers does not have pysparklog, so ``format("pysparklog")`` fails
    with ``DATA_SOURCE_NOT_FOUND``: Spark looks the source up in such a worker, not in the driver's interpreter.
    A warning, not an error, because the driver cannot be sure (Spark's ``conf/spark-env.sh`` may set the variable
    anew); ``warnings.filterwarnings("ignore", category=PythonWorkerEnvironmentWarning)`` silences it."""
