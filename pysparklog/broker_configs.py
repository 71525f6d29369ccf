"""Kafka client configs that only reach a broker: the producer and the consumer accept them and ignore them, with a
warning, as the Spark source accepts ``kafka.bootstrap.servers``, so that code written for kafka-python or
confluent-kafka ports by giving the log directory instead of the brokers, its configs left as they are."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypeVar

_log = logging.getLogger(__name__)

#: Kafka's configs of the connection to the brokers (``CommonClientConfigs``), which a log directory replaces.
BROKER_CONNECTION_CONFIGS = frozenset(
    {
        "bootstrap.servers",
        "client.dns.lookup",
        "connections.max.idle.ms",
        "metadata.recovery.strategy",
        "receive.buffer.bytes",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "request.timeout.ms",
        "retry.backoff.max.ms",
        "security.protocol",
        "send.buffer.bytes",
        "socket.connection.setup.timeout.max.ms",
        "socket.connection.setup.timeout.ms",
    }
)
#: Prefixes of Kafka's security configs (``sasl.mechanism``, ``ssl.truststore.location``...).
BROKER_CONFIG_PREFIXES = ("sasl.", "ssl.")

_V = TypeVar("_V")


def is_broker_config(name: str) -> bool:
    return name in BROKER_CONNECTION_CONFIGS or name.startswith(BROKER_CONFIG_PREFIXES)


def without_broker_configs(properties: Mapping[str, _V], client: str) -> dict[str, _V]:
    """``properties`` without the broker connection's configs, a warning naming those it leaves out.

    Args:
        properties: Kafka-named configs.
        client: What they configure (``producer``, ``consumer``), for the warning.
    """
    ignored = sorted(name for name in properties if is_broker_config(name))
    if ignored:
        _log.warning(
            "pysparklog %s: ignoring %s: there is no broker to connect to (the log directory takes the place of "
            "bootstrap.servers)",
            client,
            ", ".join(ignored),
        )
    return {name: value for name, value in properties.items() if name not in ignored}
