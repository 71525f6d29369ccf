"""The registry of the Kafka protocol endpoints serving a log directory, as a file: readable without the endpoint
(which needs kio), so that pysparklog's own consumers can see the groups Kafka clients hold through an endpoint.

``pysparklog-endpoints.json`` in the log directory::

    {"version": 1, "endpoints": [{"node_id": 1, "host": "a", "port": 9092, "expires_ms": 1700000000000,
                                  "groups": ["billing"]}, ...]}

Each live endpoint (``expires_ms`` still ahead) lists where clients reach it and the Kafka-protocol groups it
coordinates that have members. ``pysparklog.endpoint.registry`` writes it; see there how.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from pysparklog.errors import CorruptRecordError
from pysparklog.storage.io import read_if_exists
from pysparklog.storage.log_dir import LogDirectory

REGISTRY_FILE = "pysparklog-endpoints.json"
_REGISTRY_VERSION = 1


@dataclass(frozen=True, slots=True, order=True)
class RegisteredEndpoint:
    """One endpoint's entry: the node id it answers as, where clients reach it, when its lease ends, and the groups
    with members it coordinates (as of its last renewal)."""

    node_id: int
    host: str
    port: int
    expires_ms: int
    groups: tuple[str, ...] = ()


def now_ms() -> int:
    """Wall-clock milliseconds: leases are compared across hosts."""
    return int(time.time() * 1000)


def decode_registry(data: bytes | None, path: str) -> list[RegisteredEndpoint]:
    """The entries of the registry's content (none when it does not exist).

    Raises:
        CorruptRecordError: It is not a registry.
    """
    if data is None:
        return []
    try:
        raw = json.loads(data)
        if raw["version"] != _REGISTRY_VERSION:
            raise ValueError(f"version {raw['version']}, expected {_REGISTRY_VERSION}")
        return [
            RegisteredEndpoint(e["node_id"], e["host"], e["port"], e["expires_ms"], tuple(e.get("groups", ())))
            for e in raw["endpoints"]
        ]
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptRecordError(f"the registry of endpoints is unreadable: {error}", file=path) from None


def encode_registry(entries: list[RegisteredEndpoint]) -> bytes:
    return json.dumps(
        {"version": _REGISTRY_VERSION, "endpoints": [{**asdict(e), "groups": list(e.groups)} for e in sorted(entries)]}
    ).encode()


def kafka_protocol_groups(log_dir: LogDirectory) -> set[str]:
    """The groups with members that live endpoints of ``log_dir`` coordinate for Kafka clients."""
    storage = log_dir.storage
    path = storage.join(REGISTRY_FILE)
    now = now_ms()
    return {g for e in decode_registry(read_if_exists(storage, path), path) if e.expires_ms > now for g in e.groups}
