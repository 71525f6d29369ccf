"""pysparklog: a broker-less, Kafka-byte-compatible partitioned log, with Spark as the runtime.

The storage engine (``pysparklog.storage``) keeps topics as Kafka keeps them on disk; this module
re-exports the small API most programs need.
"""

from pysparklog.consumer import Consumer, ConsumerConfig, ConsumerRecord
from pysparklog.errors import (
    CommitFailedError,
    CorruptRecordError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidLogDirectoryError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    PySparkLogError,
    TopicExistsError,
    UnknownMemberIdError,
    UnknownTopicError,
    UnsupportedCodecError,
)
from pysparklog.offsets import OffsetStore
from pysparklog.producer import Producer, ProducerConfig, RecordMetadata
from pysparklog.storage.config import LogConfig
from pysparklog.storage.log import AppendInfo, PartitionLog
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings
from pysparklog.storage.records.codecs import Codec
from pysparklog.storage.records.default_records import TimestampType
from pysparklog.storage.topics import TopicMetadata, TopicStore
from pysparklog.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "AppendInfo",
    "BatchSettings",
    "Codec",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "CommitFailedError",
    "CorruptRecordError",
    "FencedInstanceIdError",
    "GroupIdNotFoundError",
    "GroupNotEmptyError",
    "InconsistentGroupProtocolError",
    "InvalidConfigError",
    "InvalidLogDirectoryError",
    "InvalidOffsetError",
    "InvalidPartitionsError",
    "InvalidTopicError",
    "LogConfig",
    "LogDirectory",
    "OffsetAndMetadata",
    "OffsetOutOfRangeError",
    "OffsetStore",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "Producer",
    "ProducerConfig",
    "ProducerFencedError",
    "PySparkLogError",
    "RecordMetadata",
    "TimestampType",
    "TopicExistsError",
    "TopicMetadata",
    "TopicPartition",
    "TopicStore",
    "UnknownMemberIdError",
    "UnknownTopicError",
    "UnsupportedCodecError",
]
