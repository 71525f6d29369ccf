"""A Kafka protocol endpoint over a log directory (``pysparklog serve``): any Kafka client writes and reads the
topics that Spark reads straight from storage.

The endpoint keeps no state of its own: every answer comes from the log directory, so any number of endpoints
may serve one directory at once, each answering Metadata as the leader of every partition. ``Endpoint`` runs one
in process; ``EndpointConfig`` says how it listens. It needs kio (``pip install pysparklog[serve]``), which
supports Python 3.11 and later.
"""

from __future__ import annotations

from pysparklog.endpoint.config import EndpointConfig
from pysparklog.endpoint.server import Endpoint

__all__ = ["Endpoint", "EndpointConfig"]
