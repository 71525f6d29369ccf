"""Who may use the endpoint: SASL users (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) from a file, and TLS.

The users file holds SCRAM credentials salted as Kafka stores them (``ScramCredentialUtils.credentialToString``,
what ``kafka-configs --describe --entity-type users`` shows), never a password, one credential a line::

    # USER MECHANISM CREDENTIAL
    alice SCRAM-SHA-256 salt=c2FsdA==,stored_key=...,server_key=...,iterations=8192
    alice SCRAM-SHA-512 salt=...,stored_key=...,server_key=...,iterations=8192

``add_user`` (``pysparklog serve --sasl-users FILE --add-sasl-user NAME``) writes both SCRAM mechanisms' lines
for a password. PLAIN checks a password against the user's SCRAM credential (the salted password gives the
StoredKey), so one file serves the three mechanisms. The file is read again when it changes, as a broker takes
credential changes without a restart.

SCRAM is RFC 5802 with RFC 7677's hashes, as Kafka's ``ScramSaslServer`` implements it: messages in UTF-8, no
channel binding (``c=biws``, the base64 of ``n,,``), an authorization id accepted only when it names the user
itself, iterations from 4096 (Kafka's minimum) to 16384 (its maximum).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import secrets
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysparklog.errors import InvalidConfigError

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
#: The mechanism name and the hash each SCRAM mechanism uses (RFC 7677, and SHA-512 as Kafka adds it).
SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
#: Kafka's ``ScramMechanism`` bounds: fewer iterations are refused as too weak, more as a cost to the server.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192
ANONYMOUS = "User:ANONYMOUS"

log = logging.getLogger("pysparklog.endpoint")

_CREDENTIAL = re.compile(
    r"salt=(?P<salt>[A-Za-z0-9+/=]+),stored_key=(?P<stored_key>[A-Za-z0-9+/=]+),"
    r"server_key=(?P<server_key>[A-Za-z0-9+/=]+),iterations=(?P<iterations>[0-9]+)"
)
# RFC 5802's client-first-message: gs2-header (no channel binding, an optional authzid) then client-first-bare
# (the user name and the client's nonce; Kafka's extensions, e.g. tokenauth=true, may follow).
_SASL_NAME = r"(?:[^=,]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_EXTENSIONS = r"(?:,[A-Za-z]+=[\x01-\x2b\x2d-\x3c\x3e-\x7f]+)*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASL_NAME}))?,)(?P<bare>n=(?P<user>{_SASL_NAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS}))"
)
# client-final-message: channel binding, the combined nonce, extensions, then the proof over all before it.
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    r"p=(?P<proof>[A-Za-z0-9+/=]+)"
)


class AuthenticationError(Exception):
    """The client's SASL exchange failed; its message goes to the client as SaslAuthenticate's error message."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A user's salted SCRAM credential, as Kafka stores it: no password, only what checks a proof."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        """A new credential with a random salt (RFC 5802 section 3: StoredKey = H(ClientKey))."""
        salt = secrets.token_bytes(16)
        salted = _salted_password(mechanism, password, salt, iterations)
        return cls(salt, _stored_key(mechanism, salted), _hmac(mechanism, salted, b"Server Key"), iterations)

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Kafka's ``salt=...,stored_key=...,server_key=...,iterations=N``.

        Raises:
            ValueError: It is not in that form, or the iterations are outside Kafka's 4096 to 16384.
        """
        match = _CREDENTIAL.fullmatch(text)
        if match is None:
            raise ValueError("expected salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>")
        iterations = int(match["iterations"])
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations {iterations}; accepted: {MIN_ITERATIONS} to {MAX_ITERATIONS}")
        decoded = [base64.b64decode(match[name], validate=True) for name in ("salt", "stored_key", "server_key")]
        return cls(decoded[0], decoded[1], decoded[2], iterations)

    def __str__(self) -> str:
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    def accepts_password(self, mechanism: str, password: str) -> bool:
        """Whether ``password`` salted as this credential was gives its StoredKey (PLAIN's check)."""
        salted = _salted_password(mechanism, password, self.salt, self.iterations)
        return hmac.compare_digest(_stored_key(mechanism, salted), self.stored_key)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _hmac(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.digest(key, data, SCRAM_HASHES[mechanism])


def _stored_key(mechanism: str, salted_password: bytes) -> bytes:
    return hashlib.new(SCRAM_HASHES[mechanism], _hmac(mechanism, salted_password, b"Client Key")).digest()


def _salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC (Kafka uses the password's UTF-8)."""
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)


def _check_user_name(user: str) -> None:
    if not user or any(c.isspace() for c in user) or user.startswith("#"):
        raise InvalidConfigError(f"SASL user name {user!r} is not accepted; accepted: a name without spaces or #")


class UserStore:
    """The SASL users file, read again whenever it changes.

    Args:
        path: The file; it must exist (``add_user`` creates it).

    Raises:
        InvalidConfigError: The file is missing or a line is not ``USER MECHANISM CREDENTIAL``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._signature: tuple[int, int] | None = None
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        self._reload()

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The user's credential for a SCRAM mechanism, None for an unknown user. Reads the file if it changed."""
        self._reload()
        return self._credentials.get((user, mechanism))

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN's check: the password against the user's strongest SCRAM credential."""
        self._reload()
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = self._credentials.get((user, mechanism))
            if credential is not None:
                return credential.accepts_password(mechanism, password)
        return False

    def _reload(self) -> None:
        with self._lock:
            try:
                stat = self.path.stat()
            except OSError as e:
                self._keep_or_raise(InvalidConfigError(f"the SASL users file {self.path} cannot be read: {e.strerror}"))
                return
            signature = (stat.st_mtime_ns, stat.st_size)
            if signature == self._signature:
                return
            try:
                self._credentials = read_users(self.path)
            except InvalidConfigError as e:
                self._keep_or_raise(e)
            self._signature = signature  # a malformed version is reported once, not at every authentication

    def _keep_or_raise(self, error: InvalidConfigError) -> None:
        """At start the error stops the endpoint; later (a hand edit half done, the file moved away) the users
        read last stay in force and the error is logged."""
        if self._signature is None:
            raise error
        log.error("keeping the SASL users read last: %s", error)


def read_users(path: Path) -> dict[tuple[str, str], ScramCredential]:
    """Every (user, mechanism) credential of a users file.

    Raises:
        InvalidConfigError: A line is not ``USER MECHANISM CREDENTIAL``; the error names the file and the line.
    """
    credentials: dict[tuple[str, str], ScramCredential] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidConfigError(f"the SASL users file {path} cannot be read: {e}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        try:
            if len(parts) != 3:
                raise ValueError("expected USER MECHANISM CREDENTIAL separated by spaces")
            user, mechanism, credential = parts
            if mechanism not in SCRAM_HASHES:
                raise ValueError(f"mechanism {mechanism!r}; accepted: {', '.join(SCRAM_HASHES)}")
            credentials[(user, mechanism)] = ScramCredential.parse(credential)
        except ValueError as e:
            raise InvalidConfigError(f"{path} line {number}: {e}") from None
    return credentials


def add_user(path: str | os.PathLike[str], user: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> None:
    """Add ``user`` (or change its password) in a users file, with a credential for each SCRAM mechanism.

    The file is replaced in one rename, readable by its owner only, so a serving endpoint never reads it half
    written.

    Raises:
        InvalidConfigError: The name, the password or the iterations are not accepted, or the file is malformed.
    """
    _check_user_name(user)
    if not password:
        raise InvalidConfigError("a SASL user's password is empty; accepted: a non-empty password")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InvalidConfigError(
            f"SCRAM iterations {iterations} are not accepted; accepted: {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
    target = Path(path)
    kept = []
    if target.exists():
        read_users(target)  # a malformed file is refused rather than rewritten
        kept = [line for line in target.read_text(encoding="utf-8").splitlines() if line.split()[:1] != [user]]
    else:
        kept = ["# pysparklog SASL users: USER MECHANISM CREDENTIAL (Kafka's salted SCRAM form)"]
    added = [
        f"{user} {mechanism} {ScramCredential.from_password(mechanism, password, iterations)}"
        for mechanism in SCRAM_HASHES
    ]
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write("\n".join(kept + added) + "\n")
    os.replace(temporary, target)


@dataclass(slots=True)
class ConnectionAuth:
    """Where one connection stands in SASL authentication, shared by the server and the SASL handlers.

    Attributes:
        principal: Who the connection is: ``User:ANONYMOUS``, the client certificate's subject, or the SASL user
            once authenticated.
        required: Whether SASL is on, so that nothing but ApiVersions and the SASL APIs is served before it.
        exchange: The exchange the handshake started, None before it.
        authenticated: Whether the SASL exchange succeeded.
        close_after_answer: The handler's answer is the connection's last (a failed authentication).
    """

    principal: str
    required: bool
    exchange: SaslExchange | None = None
    authenticated: bool = False
    close_after_answer: bool = False


class SaslExchange:
    """One connection's SASL authentication, from the mechanism the handshake chose to the principal.

    Args:
        users: The users file.
        mechanism: The mechanism the client chose (one of those enabled).
    """

    def __init__(self, users: UserStore, mechanism: str) -> None:
        self.users = users
        self.mechanism = mechanism
        self.principal: str | None = None
        # SCRAM's state between its two rounds: what the server-first message was answering.
        self._scram: tuple[str, str, str, str, ScramCredential | None] | None = None

    def step(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; ``principal`` is set once the client is authenticated.

        Raises:
            AuthenticationError: The token is malformed or the credentials are wrong.
        """
        if self.principal is not None:
            raise AuthenticationError("the client is already authenticated")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError(f"the {self.mechanism} message is not UTF-8") from None
        if self.mechanism == PLAIN:
            return self._plain(text)
        return self._scram_first(text) if self._scram is None else self._scram_final(text)

    def _failed(self) -> AuthenticationError:
        return AuthenticationError(
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{self.mechanism}"
        )

    def _plain(self, text: str) -> bytes:
        """RFC 4616: ``authzid NUL authcid NUL passwd``; an authzid must name the user itself (as in Kafka)."""
        parts = text.split("\0")
        if len(parts) != 3:
            raise AuthenticationError("Invalid SASL/PLAIN message: expected authzid NUL user NUL password")
        authzid, user, password = parts
        if not user or not password:
            raise AuthenticationError("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise AuthenticationError("Authentication failed: Client requested an authorization id that is different")
        if not self.users.check_password(user, password):
            raise self._failed()
        self.principal = f"User:{user}"
        return b""

    def _scram_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise AuthenticationError("Invalid SCRAM client first message")
        user = _unescape(match["user"])
        if match["authzid"] is not None and _unescape(match["authzid"]) != user:
            raise AuthenticationError("Authentication failed: Client requested an authorization id that is different")
        credential = self.users.credential(user, self.mechanism)
        # An unknown user gets a salt and iterations as a known one would (RFC 5802 section 5.1's advice): the
        # answer does not tell who exists; the exchange fails at the proof.
        salt = credential.salt if credential else hashlib.sha256(b"pysparklog unknown user " + user.encode()).digest()
        iterations = credential.iterations if credential else DEFAULT_ITERATIONS
        nonce = match["nonce"] + secrets.token_urlsafe(24)
        server_first = f"r={nonce},s={_b64(salt)},i={iterations}"
        self._scram = (user, match["gs2"], match["bare"], server_first, credential)
        return server_first.encode()

    def _scram_final(self, text: str) -> bytes:
        assert self._scram is not None
        user, gs2_header, client_first_bare, server_first, credential = self._scram
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise AuthenticationError("Invalid SCRAM client final message")
        if match["nonce"] != server_first[2:].split(",", 1)[0]:
            raise AuthenticationError("Invalid client nonce in the final client message")
        if match["channel"] != _b64(gs2_header.encode()):
            raise AuthenticationError("Invalid channel binding in the final client message: none is supported")
        if credential is None:
            raise self._failed()
        auth_message = f"{client_first_bare},{server_first},{match['without_proof']}".encode()
        proof = base64.b64decode(match["proof"])
        client_signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed = hashlib.new(SCRAM_HASHES[self.mechanism], client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise self._failed()
        self.principal = f"User:{user}"
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


def _unescape(sasl_name: str) -> str:
    """RFC 5802's saslname: ``=2C`` is a comma and ``=3D`` an equals sign."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The endpoint's certificate and key (PEM) and, for client certificates (``ssl.client.auth=required``),
    the CAs that sign them."""

    certfile: str
    keyfile: str | None = None
    cafile: str | None = None

    def server_context(self) -> ssl.SSLContext:
        """A server context accepting TLS 1.2 and later, requiring a client certificate when a CA file is given.

        Raises:
            InvalidConfigError: A file cannot be read or does not hold what it should.
        """
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.certfile, self.keyfile)
            if self.cafile is not None:
                context.load_verify_locations(cafile=self.cafile)
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ssl.SSLError) as e:
            raise InvalidConfigError(
                f"TLS settings (certificate {self.certfile}, key {self.keyfile}, CA {self.cafile}) are not usable: {e}"
            ) from None
        return context


#: Python's names of a certificate subject's attributes and the short names RFC 2253 (and Java) prints.
_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def certificate_principal(certificate: dict[str, Any] | None) -> str | None:
    """Kafka's default principal for a client certificate: ``User:`` and the subject in RFC 2253 form, most
    specific attribute first (``User:CN=client,O=example``); None without a certificate."""
    if not certificate or "subject" not in certificate:
        return None
    rdns = [
        "+".join(f"{_RDN_NAMES.get(name, name)}={_escape_rdn(value)}" for name, value in rdn)
        for rdn in reversed(certificate["subject"])
    ]
    return "User:" + ",".join(rdns)


def _escape_rdn(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped
