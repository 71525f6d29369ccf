"""A Kafka protocol endpoint over a log directory (``pysparklog serve``): any Kafka client writes and reads the
topics that Spark reads straight from storage.

The endpoint keeps no state of its own: every answer comes from the log directory, so any number of endpoints
may serve one directory at once, each answering Metadata as the leader of every partition. ``Endpoint`` runs one
in process; ``EndpointConfig`` says how it listens. It needs kio (``pip install pysparklog[serve]``), which
supports Python 3.11 and later; ``Endpoint`` and ``EndpointConfig`` are imported on first use, so that the
``pysparklog`` command reads ``pysparklog.endpoint.security``'s settings (stdlib only) wherever kio is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pysparklog._lazy import lazy_attributes

if TYPE_CHECKING:
    from pysparklog.endpoint.config import EndpointConfig
    from pysparklog.endpoint.server import Endpoint

__all__ = ["Endpoint", "EndpointConfig"]

__getattr__, __dir__ = lazy_attributes(
    __name__, globals(), {"Endpoint": "pysparklog.endpoint.server", "EndpointConfig": "pysparklog.endpoint.config"}
)
