"""The endpoint's settings, validated when built: a wrong value fails before anything listens."""

from __future__ import annotations

from dataclasses import dataclass

from pysparklog.endpoint.security import MECHANISMS, TlsSettings
from pysparklog.errors import InvalidConfigError

#: Kafka's ``socket.request.max.bytes`` default: a larger request is refused before it is read.
DEFAULT_MAX_REQUEST_BYTES = 104_857_600
#: Kafka's ``connections.max.idle.ms`` default: a connection that sends nothing for this long is closed.
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600_000
#: How long the rest of a request may take once its first bytes came: a client that stalls mid-frame holds its
#: connection this long at most (Kafka's clients give up on a request after ``request.timeout.ms``, 30 s).
DEFAULT_REQUEST_READ_TIMEOUT_MS = 30_000
#: Kafka's ``connection.failed.authentication.delay.ms`` default: a failed authentication is answered this late,
#: which slows a password guesser and not a user.
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100
DEFAULT_PORT = 9092
LOOPBACK = "127.0.0.1"
#: How long an endpoint's entry in the log directory's registry lives without renewal: a dead endpoint's groups move
#: to the others this long after it died.
DEFAULT_REGISTRY_LEASE_MS = 10_000
#: Kafka's ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms``.
DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS = 6_000
DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS = 1_800_000


def parse_host_port(text: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address) as (host, port).

    Raises:
        InvalidConfigError: It is not a host and a port from 0 to 65535.
    """
    host, sep, port_text = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidConfigError(
            f"{what} {text!r} is not HOST:PORT; accepted: a host name or address and a port 0-65535"
        )
    return host, int(port_text)


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """How one endpoint listens and what it answers.

    Attributes:
        host: The address it listens on; loopback unless told otherwise.
        port: The port it listens on; 0 takes a free one (``Endpoint.port`` says which).
        advertised_host: The host clients are told to connect to (Metadata's brokers); the listening host when
            None (and this machine's name when that is a wildcard address).
        advertised_port: The port clients are told; the listening port when None.
        max_request_bytes: Kafka's ``socket.request.max.bytes``: a larger request closes its connection unread.
        node_id: The broker id this endpoint gives itself in Metadata; derived from the advertised address when
            None, so that every endpoint of a log directory has its own.
        tls: The certificate (and CAs of client certificates) to speak TLS with; plain TCP when None.
        sasl_users: The SASL users file (``pysparklog.endpoint.security``); with it, a connection must
            authenticate before anything but ApiVersions, SaslHandshake and SaslAuthenticate.
        sasl_mechanisms: The SASL mechanisms offered when ``sasl_users`` is set.
        connections_max_idle_ms: Kafka's ``connections.max.idle.ms``: a connection that sends nothing for this
            long is closed.
        request_read_timeout_ms: How long the rest of a request may take once its first bytes came.
        failed_authentication_delay_ms: Kafka's ``connection.failed.authentication.delay.ms``.
    """

    host: str = LOOPBACK
    port: int = DEFAULT_PORT
    advertised_host: str | None = None
    advertised_port: int | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    node_id: int | None = None
    registry_lease_ms: int = DEFAULT_REGISTRY_LEASE_MS
    group_min_session_timeout_ms: int = DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS
    group_max_session_timeout_ms: int = DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS
    tls: TlsSettings | None = None
    sasl_users: str | None = None
    sasl_mechanisms: tuple[str, ...] = MECHANISMS
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    request_read_timeout_ms: int = DEFAULT_REQUEST_READ_TIMEOUT_MS
    failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS

    @property
    def security_protocol(self) -> str:
        """Kafka's name for what a client must set in ``security.protocol`` to connect."""
        return ("SASL_" if self.sasl_users else "") + ("SSL" if self.tls else "PLAINTEXT")

    def __post_init__(self) -> None:
        for name, port in (("port", self.port), ("advertised port", self.advertised_port)):
            if port is not None and not (isinstance(port, int) and 0 <= port <= 65535):
                raise InvalidConfigError(f"{name} {port!r} is out of range; accepted: 0 to 65535")
        if not (isinstance(self.max_request_bytes, int) and 1024 <= self.max_request_bytes <= 2**31 - 1):
            raise InvalidConfigError(
                f"socket.request.max.bytes {self.max_request_bytes!r} is out of range; accepted: 1024 to 2147483647"
            )
        if self.node_id is not None and not (isinstance(self.node_id, int) and 0 <= self.node_id <= 2**31 - 1):
            raise InvalidConfigError(f"node id {self.node_id!r} is out of range; accepted: 0 to 2147483647")
        if not (isinstance(self.registry_lease_ms, int) and 300 <= self.registry_lease_ms <= 3_600_000):
            raise InvalidConfigError(
                f"registry lease {self.registry_lease_ms!r} ms is out of range; accepted: 300 to 3600000"
            )
        minimum, maximum = self.group_min_session_timeout_ms, self.group_max_session_timeout_ms
        if not (isinstance(minimum, int) and isinstance(maximum, int) and 1 <= minimum <= maximum <= 2**31 - 1):
            raise InvalidConfigError(
                f"group session timeout bounds {minimum!r} to {maximum!r} ms are invalid; accepted: "
                "1 <= group.min.session.timeout.ms <= group.max.session.timeout.ms <= 2147483647"
            )
        for name, millis in (
            ("connections.max.idle.ms", self.connections_max_idle_ms),
            ("request read timeout (ms)", self.request_read_timeout_ms),
        ):
            if not (isinstance(millis, int) and 1 <= millis <= 2**31 - 1):
                raise InvalidConfigError(f"{name} {millis!r} is out of range; accepted: 1 to 2147483647")
        if not (isinstance(self.failed_authentication_delay_ms, int) and 0 <= self.failed_authentication_delay_ms):
            raise InvalidConfigError(
                f"connection.failed.authentication.delay.ms {self.failed_authentication_delay_ms!r} is out of range;"
                " accepted: 0 or more"
            )
        unknown = [name for name in self.sasl_mechanisms if name not in MECHANISMS]
        if unknown or not self.sasl_mechanisms:
            raise InvalidConfigError(
                f"SASL mechanisms {self.sasl_mechanisms!r} are not accepted; accepted: some of {', '.join(MECHANISMS)}"
            )
