"""SaslHandshake (key 17) and SaslAuthenticate (key 36): a connection proves who it is before anything else.

The exchange, as a broker's ``SaslServerAuthenticator`` runs it (KIP-152)::

    client                                   endpoint
    ApiVersions (optional)            ->     the APIs served
    SaslHandshake v1 {mechanism}      ->     NONE and the mechanisms enabled, or UNSUPPORTED_SASL_MECHANISM (closes)
    SaslAuthenticate {auth_bytes}     ->     the mechanism's answer; PLAIN takes one round, SCRAM two
                                             SASL_AUTHENTICATION_FAILED and a message on failure (closes)

Handshake v0 (SASL tokens sent bare, without Kafka's framing) is left out: every client since Kafka 1.0 sends v1,
and ApiVersions offering only v1 makes an older one refuse cleanly. The session lifetime answered is 0: the
endpoint asks no client to authenticate again (KIP-368's re-authentication is not served).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.apis import Api
from pysparklog.endpoint.context import EndpointState, RequestContext
from pysparklog.endpoint.security import AuthenticationError, SaslExchange, UserStore

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: The APIs a connection may send before it has authenticated, as a broker allows.
BEFORE_AUTHENTICATION = frozenset({18, SASL_HANDSHAKE, SASL_AUTHENTICATE})
NO_REAUTHENTICATION = timedelta(0)


class SaslUsers:
    """The endpoint's users file, read once at start (so that a malformed file stops it there) and whenever it
    changes afterwards."""

    def __init__(self, endpoint: EndpointState) -> None:
        path = endpoint.config.sasl_users
        if path is None:
            raise ValueError("SaslUsers needs an endpoint with sasl_users")
        self.users = UserStore(path)

    def close(self) -> None:
        """Nothing is held open between reads of the file."""


async def sasl_handshake(context: RequestContext, request: Any) -> Any:
    enabled = context.endpoint.config.sasl_mechanisms if context.endpoint.config.sasl_users else ()
    auth = context.auth
    if auth is None or not auth.required or auth.exchange is not None:
        # No SASL on this endpoint, or a second handshake on a connection: a broker's answer to both.
        if auth is not None and auth.required:
            auth.close_after_answer = True
        return context.message.make("SaslHandshakeResponse", error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    if request.mechanism not in enabled:
        auth.close_after_answer = True
        return context.message.make(
            "SaslHandshakeResponse", error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled
        )
    users = context.endpoint.state(SaslUsers).users
    auth.exchange = SaslExchange(users, request.mechanism)
    return context.message.make("SaslHandshakeResponse", error_code=ErrorCode.none, mechanisms=enabled)


async def sasl_authenticate(context: RequestContext, request: Any) -> Any:
    auth = context.auth
    if auth is None or not auth.required or auth.exchange is None or auth.authenticated:
        if auth is not None and auth.required:
            auth.close_after_answer = True
        return _answer(context, ErrorCode.illegal_sasl_state, "SaslAuthenticate needs a SaslHandshake first", b"")
    exchange = auth.exchange
    try:
        # PBKDF2 for PLAIN, and the users file's stat and read: off the event loop.
        challenge = await context.endpoint.run_blocking(exchange.step, bytes(request.auth_bytes))
    except AuthenticationError as e:
        auth.close_after_answer = True
        await asyncio.sleep(context.endpoint.config.failed_authentication_delay_ms / 1000)
        return _answer(context, ErrorCode.sasl_authentication_failed, str(e), b"")
    if exchange.principal is not None:
        auth.authenticated = True
        auth.principal = exchange.principal
    return _answer(context, ErrorCode.none, None, challenge)


def _answer(context: RequestContext, error: ErrorCode, message: str | None, challenge: bytes) -> Any:
    return context.message.make(
        "SaslAuthenticateResponse",
        error_code=error,
        error_message=message,
        auth_bytes=challenge,
        session_lifetime=NO_REAUTHENTICATION,
    )


APIS = (
    Api(SASL_HANDSHAKE, 1, 1, sasl_handshake),
    Api(SASL_AUTHENTICATE, 0, 2, sasl_authenticate),
)
