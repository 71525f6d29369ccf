"""The engine's errors as Kafka's error codes, for the partitions (or topics) of a response."""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from pysparklog.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTopicIdError,
    ObjectStoreError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RecordTooLargeError,
    StorageConflictError,
    UnknownTopicError,
)

log = logging.getLogger("pysparklog.endpoint")

#: The engine's errors and Kafka's code for each, the most specific first (subclasses before their bases).
_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (UnknownTopicError, ErrorCode.unknown_topic_or_partition),
    (InvalidPartitionsError, ErrorCode.unknown_topic_or_partition),  # a partition beyond a topic's bound
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (InvalidTopicIdError, ErrorCode.unknown_topic_id),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (InvalidOffsetError, ErrorCode.invalid_request),
    (CorruptRecordError, ErrorCode.corrupt_message),  # a bad checksum, a torn batch, a magic other than 2
    (RecordTooLargeError, ErrorCode.message_too_large),  # a batch over the topic's max.message.bytes
    (InvalidTimestampError, ErrorCode.invalid_timestamp),  # outside message.timestamp.before/after.max.ms
    (InvalidRecordError, ErrorCode.invalid_record),
    (OutOfOrderSequenceError, ErrorCode.out_of_order_sequence_number),
    # An older epoch of an idempotent or transactional producer: Kafka's log raises InvalidProducerEpochException
    # for a produce (KIP-588), which the producer takes as fencing or bumps its epoch on.
    (ProducerFencedError, ErrorCode.invalid_producer_epoch),
    # The storage failed or another process's write raced this one: retriable, the client sends again (an
    # idempotent producer's retry is answered with its batch's offsets when the first attempt was written).
    (StorageConflictError, ErrorCode.kafka_storage_error),
    (ObjectStoreError, ErrorCode.kafka_storage_error),
    (OSError, ErrorCode.kafka_storage_error),
)


def error_code(error: BaseException, what: str) -> ErrorCode:
    """Kafka's code for ``error``, raised while serving ``what`` (logged when it is unexpected)."""
    for kind, code in _CODES:
        if isinstance(error, kind):
            if code is ErrorCode.kafka_storage_error:
                log.warning("storage error serving %s: %s", what, error)
            return code
    log.error("unexpected error serving %s", what, exc_info=error)
    return ErrorCode.unknown_server_error
