"""The data source's ``storage.*`` options: an object store's settings for one query, beside the environment's.

Spark's Kafka source takes broker settings as ``kafka.*`` options; a log directory on an object store takes the
store's as ``storage.<key>`` (obstore's config keys: ``storage.aws_endpoint``, ``storage.aws_region``,
``storage.allow_http``, ``storage.google_service_account``...). They travel with the query's options to the
executors, where each task's first use of the log directory registers them for its root, so that every later
``storage_for(url)`` in that process (the engine's, the coordinators') gets the same store.
"""

from __future__ import annotations

from collections.abc import Mapping

from pysparklog.storage.io import Storage, storage_for
from pysparklog.storage.log_dir import LogDirectory

STORAGE_PREFIX = "storage."

#: Option settings of a store, as (key, value) pairs: hashable and picklable, like the options holding them.
StorageSettings = tuple[tuple[str, str], ...]


def is_storage_option(lower_name: str) -> bool:
    return lower_name.startswith(STORAGE_PREFIX) and len(lower_name) > len(STORAGE_PREFIX)


def storage_settings(options: Mapping[str, str]) -> StorageSettings:
    """The ``storage.<key>`` options, their keys without the prefix and in lower case (option names ignore case)."""
    return tuple(
        sorted(
            (key[len(STORAGE_PREFIX) :].lower(), value)
            for key, value in options.items()
            if is_storage_option(key.lower())
        )
    )


def log_storage(path: str, settings: StorageSettings) -> Storage:
    """The storage of the log directory at ``path`` with the query's store settings (none on a filesystem)."""
    return storage_for(path, dict(settings) if settings else None)


def open_logs(path: str, settings: StorageSettings) -> LogDirectory:
    """The log directory at ``path`` with the query's store settings."""
    return LogDirectory(log_storage(path, settings))
