"""Who serves a log directory: a small shared object listing the live endpoints, so that every endpoint chooses the
same coordinator for a group.

A Kafka cluster elects one broker to coordinate each group. Endpoints are leaderless, so they agree instead: each
one lists itself in the log directory's ``pysparklog-endpoints.json`` with a lease, and a group's coordinator is
``crc32(group id) % n`` over the ``n`` live entries sorted by node id. Every endpoint reading the same registry
chooses the same one; when a coordinator dies, its lease runs out and its groups move to the others, whose members
find them through FindCoordinator (the old coordinator's members get NOT_COORDINATOR or lose their connection).

The file (``pysparklog.endpoints``, readable without kio) lists each endpoint's node id, address, lease expiry and
the Kafka-protocol groups with members it coordinates, which pysparklog's own consumers refuse to join.

Each endpoint registers at start and renews its entry every third of the lease, with a read-modify-write that is
conditional on the version read (create-if-absent for the first, replace-if-version after: ``Storage.put``), read
again and retried when another endpoint wrote in between; expired entries are dropped by whoever writes next, and an
endpoint removes its own entry on a clean stop. Leases go by wall-clock time: endpoints on several hosts need
synchronised clocks (NTP) with a skew well below the lease.
"""

from __future__ import annotations

import logging
import threading
import zlib
from typing import TYPE_CHECKING

from pysparklog.endpoints import REGISTRY_FILE, RegisteredEndpoint, decode_registry, encode_registry, now_ms
from pysparklog.errors import InvalidConfigError, PySparkLogError, StorageConflictError
from pysparklog.storage.io import PutMode, Storage

if TYPE_CHECKING:
    from pysparklog.endpoint.context import EndpointState

log = logging.getLogger("pysparklog.endpoint.registry")


def choose(key: str, live: list[RegisteredEndpoint]) -> RegisteredEndpoint:
    """The endpoint coordinating ``key`` among ``live`` (sorted by node id): a stable hash of the key, so that every
    endpoint reading the same entries chooses the same one."""
    return live[zlib.crc32(key.encode()) % len(live)]


class Registry:
    """This endpoint's entry in its log directory's registry, kept alive on a thread of its own while it serves.

    Made by the endpoint at start (``EndpointState.state(Registry)``), which registers it; ``close`` removes the
    entry.

    Raises:
        InvalidConfigError: Another live endpoint already answers as this node id at another address.
    """

    def __init__(self, endpoint: EndpointState) -> None:
        self._storage: Storage = endpoint.log_dir.storage
        self.path = self._storage.join(REGISTRY_FILE)
        self.node_id = endpoint.node_id
        self.host = endpoint.advertised_host
        self.port = endpoint.advertised_port
        self.lease_ms = endpoint.config.registry_lease_ms
        self._live: list[RegisteredEndpoint] = []
        #: The Kafka-protocol groups with members this endpoint coordinates, sorted, published at each renewal so
        #: that pysparklog's own consumers refuse their ids (set by the group coordinator, read by the renewer).
        self.active_groups: tuple[str, ...] = ()
        self._mutex = threading.Lock()
        self._stopping = threading.Event()
        self._storage.make_directory(self._storage.join())
        self.renew()
        self._renewer = threading.Thread(target=self._renew_until_stopped, name="pysparklog-registry", daemon=True)
        self._renewer.start()

    # -- the file -------------------------------------------------------------------------------

    def _change(self, keep_self: bool) -> list[RegisteredEndpoint]:
        """Write the registry without expired entries, with this endpoint's entry renewed (or removed); returns the
        entries written. Conditional on the version read, read again when another endpoint wrote first."""
        while True:
            found = self._storage.read_versioned(self.path)
            data, version = found if found is not None else (None, None)
            now = now_ms()
            # This endpoint's own entry goes, and so does an entry of its address under another node id: this
            # address's previous life, restarted with another node id, which no client can reach any more.
            entries = [
                e
                for e in decode_registry(data, self.path)
                if e.expires_ms > now and e.node_id != self.node_id and (e.host, e.port) != (self.host, self.port)
            ]
            if keep_self:
                entries.append(
                    RegisteredEndpoint(self.node_id, self.host, self.port, now + self.lease_ms, self.active_groups)
                )
            try:
                if version is None:
                    self._storage.put(self.path, encode_registry(entries), mode=PutMode.CREATE)
                else:
                    self._storage.put(self.path, encode_registry(entries), expected_version=version)
            except StorageConflictError:
                continue  # another endpoint wrote first: decide again on what it wrote
            return sorted(entries)

    def renew(self) -> None:
        """Register, or renew the lease of, this endpoint's entry.

        Raises:
            InvalidConfigError: Another live endpoint answers as this node id at another address.
        """
        found = self._storage.read_versioned(self.path)
        now = now_ms()
        for entry in decode_registry(found[0] if found else None, self.path):
            if entry.node_id == self.node_id and (entry.host, entry.port) != (self.host, self.port):
                if entry.expires_ms > now and not self._live:
                    raise InvalidConfigError(
                        f"node id {self.node_id} is already served by the live endpoint {entry.host}:{entry.port} "
                        f"of {self._storage.root}; accepted: a node id no other endpoint of the log directory uses"
                    )
        live = self._change(keep_self=True)
        with self._mutex:
            self._live = live

    def _renew_until_stopped(self) -> None:
        while not self._stopping.wait(self.lease_ms / 3000):
            try:
                self.renew()
            except (PySparkLogError, OSError) as error:
                # Without renewal the entry expires and the other endpoints take this one's groups; it keeps trying.
                log.warning("could not renew this endpoint's entry in %s: %s", self.path, error)

    def close(self) -> None:
        """Stop renewing and remove this endpoint's entry, so that its groups move at once."""
        self._stopping.set()
        self._renewer.join()
        try:
            self._change(keep_self=False)
        except (PySparkLogError, OSError) as error:
            log.warning(
                "could not remove this endpoint's entry from %s (it expires with its lease): %s", self.path, error
            )

    # -- choosing -------------------------------------------------------------------------------

    def live(self) -> list[RegisteredEndpoint]:
        """The endpoints whose lease had not run out at the last renewal and still has not, sorted by node id; empty
        when this endpoint's own lease ran out (it could not renew: it must not coordinate anything)."""
        now = now_ms()
        with self._mutex:
            return [e for e in self._live if e.expires_ms > now]

    def coordinator(self, key: str) -> RegisteredEndpoint | None:
        """The endpoint coordinating ``key`` (a group id), None when this endpoint's own lease has run out."""
        live = self.live()
        if not any(e.node_id == self.node_id for e in live):
            return None
        return choose(key, live)

    def coordinates(self, key: str) -> bool:
        """Whether this endpoint coordinates ``key``."""
        chosen = self.coordinator(key)
        return chosen is not None and chosen.node_id == self.node_id
