"""SASL and TLS on the endpoint: librdkafka (confluent-kafka) authenticating with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 over plain TCP and TLS, client certificates, and what a client may and may not do before it has
authenticated, through the bare wire client; certificates are made at test time, users with ``add_user``."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.security import ScramCredential, TlsSettings, add_user, certificate_principal
from pysparklog.errors import InvalidConfigError
from pysparklog.storage.log_dir import LogDirectory
from tests.endpoint.kafka_wire import SIZE, WireClient

PASSWORD = "alice-secret"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Pki:
    """PEM files: a CA, the endpoint's certificate for 127.0.0.1 signed by it, and a client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _issue(
    directory: Path, name: str, subject: x509.Name, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None
) -> tuple[Path, Path, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    issuer_name, signing_key = issuer if issuer is not None else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
        # The key identifiers, and a CA's key usage: Python 3.13 verifies strictly (VERIFY_X509_STRICT) and refuses
        # a chain without them ("Missing Authority Key Identifier").
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()), critical=False)
    )
    if issuer is None:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if issuer is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    certificate = builder.sign(signing_key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path, key


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pysparklog tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca_cert, _, ca_key = _issue(directory, "ca", _name("test CA"), None)
    server_cert, server_key, _ = _issue(directory, "server", _name("localhost"), (_name("test CA"), ca_key))
    client_cert, client_key, _ = _issue(directory, "client", _name("service-a"), (_name("test CA"), ca_key))
    return Pki(ca_cert, server_cert, server_key, client_cert, client_key)


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("users") / "users.txt"
    add_user(path, "alice", PASSWORD, iterations=4096)
    return path


def _serve(log_dir: LogDirectory, **settings: Any) -> Endpoint:
    return Endpoint(log_dir, EndpointConfig(port=0, failed_authentication_delay_ms=0, **settings))


@pytest.fixture
def sasl_endpoint(log_dir: LogDirectory, users: Path) -> Iterator[Endpoint]:
    with _serve(log_dir, sasl_users=str(users)) as started:
        yield started


def _metadata(client: WireClient) -> MetadataResponse:
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    response: MetadataResponse = client.request(request, MetadataResponse)
    return response


def _api_versions(client: WireClient) -> ApiVersionsResponse:
    request = ApiVersionsRequest(client_software_name="wire-test", client_software_version="1")
    response: ApiVersionsResponse = client.request(request, ApiVersionsResponse)
    return response


# -- SASL through the wire -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAM])
def test_an_authenticated_connection_is_served(sasl_endpoint: Endpoint, mechanism: str) -> None:
    with WireClient(sasl_endpoint.bootstrap) as client:
        assert _api_versions(client).error_code == ErrorCode.none  # allowed before authenticating
        answer = (
            client.sasl_plain("alice", PASSWORD)
            if mechanism == "PLAIN"
            else client.sasl_scram(mechanism, "alice", PASSWORD)
        )
        assert answer.error_code == ErrorCode.none, answer.error_message
        assert [broker.port for broker in _metadata(client).brokers] == [sasl_endpoint.port]


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAM])
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", PASSWORD)])
def test_wrong_credentials_are_refused_and_the_connection_closed(
    sasl_endpoint: Endpoint, mechanism: str, user: str, password: str
) -> None:
    """A wrong password and an unknown user get the same answer: the endpoint does not say who exists."""
    with WireClient(sasl_endpoint.bootstrap) as client:
        answer = (
            client.sasl_plain(user, password) if mechanism == "PLAIN" else client.sasl_scram(mechanism, user, password)
        )
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == (
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
        )
        assert client.receive_frame() is None


def test_nothing_but_api_versions_and_sasl_is_served_before_authentication(sasl_endpoint: Endpoint) -> None:
    with WireClient(sasl_endpoint.bootstrap) as client:
        with pytest.raises(ConnectionError):
            _metadata(client)
    with WireClient(sasl_endpoint.bootstrap) as client:
        answer = client.authenticate(b"\0alice\0" + PASSWORD.encode())  # no handshake first
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert client.receive_frame() is None


def test_a_mechanism_not_enabled_is_refused_with_those_that_are(log_dir: LogDirectory, users: Path) -> None:
    with _serve(log_dir, sasl_users=str(users), sasl_mechanisms=("SCRAM-SHA-512",)) as endpoint:
        with WireClient(endpoint.bootstrap) as client:
            answer = client.handshake("PLAIN")
            assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
            assert list(answer.mechanisms) == ["SCRAM-SHA-512"]
            assert client.receive_frame() is None
        with WireClient(endpoint.bootstrap) as client:
            assert client.sasl_scram("SCRAM-SHA-512", "alice", PASSWORD).error_code == ErrorCode.none


def test_a_large_frame_before_authentication_is_refused_unread(sasl_endpoint: Endpoint) -> None:
    """Kafka's sasl.server.max.receive.size: 512 KiB before authentication, whatever socket.request.max.bytes."""
    with WireClient(sasl_endpoint.bootstrap) as client:
        client.send_raw(SIZE.pack(524_289))
        assert client.receive_frame() is None
    with WireClient(sasl_endpoint.bootstrap) as client:
        assert client.sasl_plain("alice", PASSWORD).error_code == ErrorCode.none
        client.send_raw(SIZE.pack(524_289) + bytes(524_289))  # read now: it does not decode, and closes
        assert client.receive_frame() is None


def test_a_sasl_handshake_without_sasl_is_an_illegal_state_and_costs_nothing(endpoint: Endpoint) -> None:
    with WireClient(endpoint.bootstrap) as client:
        assert client.handshake("PLAIN").error_code == ErrorCode.illegal_sasl_state
        assert _metadata(client).brokers


def test_a_user_added_while_serving_authenticates(log_dir: LogDirectory, tmp_path: Path) -> None:
    users = tmp_path / "users.txt"
    add_user(users, "alice", PASSWORD, iterations=4096)
    with _serve(log_dir, sasl_users=str(users)) as endpoint:
        with WireClient(endpoint.bootstrap) as client:
            assert client.sasl_plain("bob", "bob-secret").error_code == ErrorCode.sasl_authentication_failed
        add_user(users, "bob", "bob-secret", iterations=4096)
        add_user(users, "alice", "changed", iterations=4096)
        with WireClient(endpoint.bootstrap) as client:
            assert client.sasl_scram("SCRAM-SHA-256", "bob", "bob-secret").error_code == ErrorCode.none
        with WireClient(endpoint.bootstrap) as client:
            assert client.sasl_plain("alice", PASSWORD).error_code == ErrorCode.sasl_authentication_failed


def test_a_users_file_spoiled_while_serving_keeps_the_users_read_last(
    log_dir: LogDirectory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    users = tmp_path / "users.txt"
    add_user(users, "alice", PASSWORD, iterations=4096)
    with _serve(log_dir, sasl_users=str(users)) as endpoint:
        users.write_text(users.read_text() + "bob SCRAM-SHA-256 half-written\n")
        with WireClient(endpoint.bootstrap) as client:
            assert client.sasl_scram("SCRAM-SHA-256", "alice", PASSWORD).error_code == ErrorCode.none
        users.unlink()
        with WireClient(endpoint.bootstrap) as client:
            assert client.sasl_plain("alice", PASSWORD).error_code == ErrorCode.none
    logged = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert len(logged) == 2 and all(message.startswith("keeping the SASL users read last") for message in logged)
    assert "line 4" in logged[0] and "cannot be read" in logged[1]


def test_a_malformed_users_file_stops_the_endpoint_before_it_listens(log_dir: LogDirectory, tmp_path: Path) -> None:
    users = tmp_path / "users.txt"
    credential = ScramCredential.from_password("SCRAM-SHA-256", PASSWORD, 4096)
    users.write_text(f"# users\nalice SCRAM-SHA-256 {credential}\nbob SCRAM-SHA-1 {credential}\n")
    with pytest.raises(InvalidConfigError, match=r"users.txt line 3: mechanism 'SCRAM-SHA-1'; accepted: SCRAM-SHA-256"):
        _serve(log_dir, sasl_users=str(users)).start()
    weak = ScramCredential(credential.salt, credential.stored_key, credential.server_key, 1000)
    users.write_text(f"alice SCRAM-SHA-256 {weak}\n")
    with pytest.raises(InvalidConfigError, match="line 1: iterations 1000; accepted: 4096 to 16384"):
        _serve(log_dir, sasl_users=str(users)).start()


def test_credentials_are_stored_salted_in_kafkas_form(users: Path) -> None:
    lines = [line.split() for line in users.read_text().splitlines() if not line.startswith("#")]
    assert [(user, mechanism) for user, mechanism, _ in lines] == [("alice", m) for m in SCRAM]
    assert all(PASSWORD not in line for line in users.read_text().splitlines())
    assert ScramCredential.parse(lines[0][2]).accepts_password("SCRAM-SHA-256", PASSWORD)
    assert os.stat(users).st_mode & 0o077 == 0, "the users file must be readable by its owner only"


# -- TLS ----------------------------------------------------------------------------------------------------


def _client_tls(pki: Pki, with_certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if with_certificate:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def test_tls_serves_kafka_and_refuses_plain_tcp(log_dir: LogDirectory, pki: Pki) -> None:
    with _serve(log_dir, tls=TlsSettings(str(pki.server_cert), str(pki.server_key))) as endpoint:
        with WireClient(endpoint.bootstrap, tls=_client_tls(pki, with_certificate=False)) as client:
            assert client.sock.version() in ("TLSv1.2", "TLSv1.3")  # type: ignore[attr-defined]
            assert _api_versions(client).error_code == ErrorCode.none
            peer = certificate_principal(client.sock.getpeercert())  # type: ignore[attr-defined]
            assert peer == "User:CN=localhost,O=pysparklog tests"
        with WireClient(endpoint.bootstrap, timeout=5) as plain:
            with pytest.raises(ConnectionError):
                _api_versions(plain)


def test_client_certificates_are_required_when_a_ca_is_given(log_dir: LogDirectory, pki: Pki) -> None:
    tls = TlsSettings(str(pki.server_cert), str(pki.server_key), str(pki.ca))
    with _serve(log_dir, tls=tls) as endpoint:
        with WireClient(endpoint.bootstrap, tls=_client_tls(pki, with_certificate=True)) as client:
            assert _api_versions(client).error_code == ErrorCode.none
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with WireClient(endpoint.bootstrap, tls=_client_tls(pki, with_certificate=False)) as client:
                _api_versions(client)  # TLS 1.3 reports the missing certificate at the first read


def test_unusable_tls_files_are_refused_naming_them(log_dir: LogDirectory, pki: Pki) -> None:
    with pytest.raises(InvalidConfigError, match="TLS settings .* are not usable"):
        _serve(log_dir, tls=TlsSettings(str(pki.ca), str(pki.server_key))).start()  # a key of another certificate


# -- librdkafka ---------------------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, value: bytes, **settings: Any) -> list[KafkaError]:
    """Produce ``value`` with librdkafka and wait for it: the errors its connections reported (empty when the
    record was acknowledged)."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "error_cb": errors.append, **settings})
    producer.produce(topic, value, on_delivery=lambda error, _: errors.append(error) if error else None)
    deadline = time.monotonic() + 10
    while len(producer) and not errors and time.monotonic() < deadline:
        producer.poll(0.05)
    return errors


def _values(log_dir: LogDirectory, topic: str) -> list[bytes]:
    with log_dir.partition(topic, 0) as log:
        return [row["value"] for batch in log.read_arrow() for row in batch.to_pylist()]


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAM])
@pytest.mark.parametrize("over_tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
def test_librdkafka_authenticates_and_is_refused_with_a_wrong_password(
    log_dir: LogDirectory, users: Path, pki: Pki, mechanism: str, over_tls: bool
) -> None:
    tls = TlsSettings(str(pki.server_cert), str(pki.server_key)) if over_tls else None
    settings = {
        "security.protocol": "SASL_SSL" if over_tls else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        **({"ssl.ca.location": str(pki.ca)} if over_tls else {}),
    }
    log_dir.topics.create("secured", 1)
    with _serve(log_dir, sasl_users=str(users), tls=tls) as endpoint:
        assert (
            _produce(endpoint.bootstrap, "secured", b"authenticated", **settings, **{"sasl.password": PASSWORD}) == []
        )
        refused = _produce(endpoint.bootstrap, "secured", b"refused", **settings, **{"sasl.password": "wrong"})
        assert refused and refused[0].code() == KafkaError._AUTHENTICATION, refused
    assert _values(log_dir, "secured") == [b"authenticated"]


def test_librdkafka_produces_with_a_client_certificate(log_dir: LogDirectory, pki: Pki) -> None:
    tls = TlsSettings(str(pki.server_cert), str(pki.server_key), str(pki.ca))
    with _serve(log_dir, tls=tls) as endpoint:
        log_dir.topics.create("secured", 1)
        settings = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
        certificate = {"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
        assert _produce(endpoint.bootstrap, "secured", b"over TLS", **settings, **certificate) == []
        refused = _produce(endpoint.bootstrap, "secured", b"no certificate", **settings)
        assert refused, "a client without a certificate was served"
    assert _values(log_dir, "secured") == [b"over TLS"]


# -- the command --------------------------------------------------------------------------------------------


def test_the_serve_command_adds_a_user_and_serves_sasl_ssl(tmp_path: Path, pki: Pki) -> None:
    """``pysparklog serve`` as an operator runs it: a user added from standard input, then SASL_SSL."""
    command = [sys.executable, "-m", "pysparklog.cli.main", "serve", "--log-dir", str(tmp_path / "logs")]
    users = tmp_path / "users.txt"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    added = subprocess.run(
        [*command, "--sasl-users", str(users), "--add-sasl-user", "svc"],
        input="svc-secret\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    tls = ["--ssl-certfile", str(pki.server_cert), "--ssl-keyfile", str(pki.server_key)]
    sasl = ["--sasl-users", str(users), "--sasl-mechanisms", "SCRAM-SHA-512"]
    server = subprocess.Popen(
        [*command, "--listen", "127.0.0.1:0", *tls, *sasl], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None
        started = server.stdout.readline()
        assert started.endswith("(SASL_SSL)\n"), started
        bootstrap = started.split(" as ")[1].split()[0]
        LogDirectory(str(tmp_path / "logs")).topics.create("events", 1)
        settings = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca)}
        sasl_settings = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "svc", "sasl.password": "svc-secret"}
        assert _produce(bootstrap, "events", b"from a service", **settings, **sasl_settings) == []
    finally:
        server.terminate()
        server.wait(10)
        assert server.stdout is not None
        server.stdout.close()
