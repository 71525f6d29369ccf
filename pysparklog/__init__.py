"""pysparklog: a broker-less, Kafka-byte-compatible partitioned log, with Spark as the runtime.

The storage engine (``pysparklog.storage``) keeps topics as Kafka keeps them on disk; this module
re-exports the small API most programs need.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import TYPE_CHECKING

from pysparklog._lazy import lazy_attributes
from pysparklog.errors import (
    CommitFailedError,
    CorruptRecordError,
    DataLossError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidLogDirectoryError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTopicIdError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    PySparkLogError,
    PythonWorkerEnvironmentWarning,
    RecordTooLargeError,
    SinkCommitError,
    TopicExistsError,
    TransactionInProgressError,
    UnknownMemberIdError,
    UnknownTopicError,
    UnsupportedCodecError,
)
from pysparklog.spark.python_workers import check_python_workers
from pysparklog.structs import OffsetAndMetadata, TopicPartition

#: The environment variable that makes pysparklog's loggers print at a level (``INFO`` shows each micro-batch's
#: task assignment) to stderr, in every process that inherits it: Spark's Python workers do, which an
#: application's own logging configuration never reaches.
LOG_LEVEL_VARIABLE = "PYSPARKLOG_LOG_LEVEL"


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _configure_logging() -> None:
    """A library's convention: no handler of its own (a ``NullHandler``), unless ``$PYSPARKLOG_LOG_LEVEL`` asks."""
    logger = logging.getLogger(__name__)
    logger.addHandler(logging.NullHandler())
    level = os.environ.get(LOG_LEVEL_VARIABLE, "").strip().upper()
    if level and level not in _LEVELS:
        warnings.warn(
            f"{LOG_LEVEL_VARIABLE}={level!r} is not a logging level; accepted: {', '.join(_LEVELS)}", stacklevel=2
        )
    elif level:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%y/%m/%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(level)


_configure_logging()
# format("pysparklog") is found in Spark's Python workers, not in this interpreter: warn when Spark would start a
# Python without pysparklog (pysparklog.spark.python_workers says when and how it checks).
check_python_workers()

if TYPE_CHECKING:
    from pysparklog.consumer import Consumer, ConsumerConfig, ConsumerRecord
    from pysparklog.offsets import OffsetStore
    from pysparklog.producer import Producer, ProducerConfig, RecordMetadata
    from pysparklog.storage.config import LogConfig
    from pysparklog.storage.log import PartitionLog
    from pysparklog.storage.log_dir import LogDirectory
    from pysparklog.storage.log_writer import AppendInfo
    from pysparklog.storage.records.arrow_records import BatchSettings
    from pysparklog.storage.records.codecs import Codec
    from pysparklog.storage.records.default_records import TimestampType
    from pysparklog.storage.topics import TopicMetadata, TopicStore

# The classes that need the engine (numpy, pyarrow, compiled kernels), imported on first use: importing
# ``pysparklog`` stays instant, so that the ``pysparklog`` command is in charge before they load.
_LAZY: dict[str, str] = {
    "Consumer": "pysparklog.consumer",
    "ConsumerConfig": "pysparklog.consumer",
    "ConsumerRecord": "pysparklog.consumer",
    "OffsetStore": "pysparklog.offsets",
    "Producer": "pysparklog.producer",
    "ProducerConfig": "pysparklog.producer",
    "RecordMetadata": "pysparklog.producer",
    "LogConfig": "pysparklog.storage.config",
    "AppendInfo": "pysparklog.storage.log_writer",
    "PartitionLog": "pysparklog.storage.log",
    "LogDirectory": "pysparklog.storage.log_dir",
    "BatchSettings": "pysparklog.storage.records.arrow_records",
    "Codec": "pysparklog.storage.records.codecs",
    "TimestampType": "pysparklog.storage.records.default_records",
    "TopicMetadata": "pysparklog.storage.topics",
    "TopicStore": "pysparklog.storage.topics",
}


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = [
    "AppendInfo",
    "BatchSettings",
    "Codec",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "CommitFailedError",
    "CorruptRecordError",
    "DataLossError",
    "FencedInstanceIdError",
    "GroupIdNotFoundError",
    "GroupNotEmptyError",
    "InconsistentGroupProtocolError",
    "InvalidConfigError",
    "InvalidLogDirectoryError",
    "InvalidOffsetError",
    "InvalidPartitionsError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTopicIdError",
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
    "PythonWorkerEnvironmentWarning",
    "RecordTooLargeError",
    "SinkCommitError",
    "RecordMetadata",
    "TimestampType",
    "TopicExistsError",
    "TopicMetadata",
    "TopicPartition",
    "TopicStore",
    "TransactionInProgressError",
    "UnknownMemberIdError",
    "UnknownTopicError",
    "UnsupportedCodecError",
]
