"""The storage engine: Kafka's log, embedded, reaching its bytes only through a ``Storage``.

It knows nothing of Spark or of the clients. The names below are its front; the modules behind them
(``segment``, ``loader``, ``validator``, ``records``...) are the engine's parts, documented in
``docs/architecture.md``. Like the package root, the front imports its modules on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pysparklog._lazy import lazy_attributes

if TYPE_CHECKING:
    from pysparklog.storage.cleaner import clean_log, run_cleaner
    from pysparklog.storage.config import LogConfig
    from pysparklog.storage.io import Storage, storage_for
    from pysparklog.storage.log import PartitionLog
    from pysparklog.storage.log_dir import LogDirectory
    from pysparklog.storage.log_reads import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, SegmentInfo
    from pysparklog.storage.log_state import LogView
    from pysparklog.storage.log_writer import AppendInfo
    from pysparklog.storage.records.arrow_records import BatchSettings, EncodedBatches
    from pysparklog.storage.records.codecs import Codec
    from pysparklog.storage.records.default_records import TimestampType
    from pysparklog.storage.retention import run_retention
    from pysparklog.storage.topics import TopicMetadata, TopicStore
    from pysparklog.storage.transaction_index import READ_COMMITTED, READ_UNCOMMITTED

_EXPORTS: dict[str, str] = {
    "AppendInfo": "pysparklog.storage.log_writer",
    "BatchSettings": "pysparklog.storage.records.arrow_records",
    "Codec": "pysparklog.storage.records.codecs",
    "EARLIEST_TIMESTAMP": "pysparklog.storage.log_reads",
    "EncodedBatches": "pysparklog.storage.records.arrow_records",
    "LATEST_TIMESTAMP": "pysparklog.storage.log_reads",
    "LogConfig": "pysparklog.storage.config",
    "LogDirectory": "pysparklog.storage.log_dir",
    "LogView": "pysparklog.storage.log_state",
    "MAX_TIMESTAMP": "pysparklog.storage.log_reads",
    "PartitionLog": "pysparklog.storage.log",
    "READ_COMMITTED": "pysparklog.storage.transaction_index",
    "READ_UNCOMMITTED": "pysparklog.storage.transaction_index",
    "SegmentInfo": "pysparklog.storage.log_reads",
    "Storage": "pysparklog.storage.io",
    "TimestampType": "pysparklog.storage.records.default_records",
    "TopicMetadata": "pysparklog.storage.topics",
    "TopicStore": "pysparklog.storage.topics",
    "clean_log": "pysparklog.storage.cleaner",
    "run_cleaner": "pysparklog.storage.cleaner",
    "run_retention": "pysparklog.storage.retention",
    "storage_for": "pysparklog.storage.io",
}

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _EXPORTS)

__all__ = [
    "AppendInfo",
    "BatchSettings",
    "Codec",
    "EARLIEST_TIMESTAMP",
    "EncodedBatches",
    "LATEST_TIMESTAMP",
    "LogConfig",
    "LogDirectory",
    "LogView",
    "MAX_TIMESTAMP",
    "PartitionLog",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "SegmentInfo",
    "Storage",
    "TimestampType",
    "TopicMetadata",
    "TopicStore",
    "clean_log",
    "run_cleaner",
    "run_retention",
    "storage_for",
]
