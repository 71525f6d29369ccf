"""What one client can cost the endpoint: its own connection, never the others' answers. Idle connections closed
after connections.max.idle.ms, a frame left half sent closed after the read deadline while others are answered,
socket.request.max.bytes to the byte, and hundreds of connections at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.storage.log_dir import LogDirectory
from tests.endpoint.kafka_wire import SIZE, WireClient

IDLE_MS = 400
READ_TIMEOUT_MS = 600


@pytest.fixture
def strict_endpoint(log_dir: LogDirectory) -> Iterator[Endpoint]:
    """Limits short enough to watch: idle connections closed after IDLE_MS, half-sent frames after
    READ_TIMEOUT_MS, requests of 1024 bytes at most."""
    config = EndpointConfig(
        port=0, connections_max_idle_ms=IDLE_MS, request_read_timeout_ms=READ_TIMEOUT_MS, max_request_bytes=1024
    )
    with Endpoint(log_dir, config) as started:
        yield started


@pytest.fixture
def patient_endpoint(log_dir: LogDirectory) -> Iterator[Endpoint]:
    """The read deadline of ``strict_endpoint`` and Kafka's idle limit, so that only half-sent frames are closed."""
    with Endpoint(log_dir, EndpointConfig(port=0, request_read_timeout_ms=READ_TIMEOUT_MS)) as started:
        yield started


def _versions_request(name: str = "wire-test") -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name=name, client_software_version="1")


def _ask(client: WireClient) -> None:
    response: ApiVersionsResponse = client.request(_versions_request(), ApiVersionsResponse)
    assert response.error_code == ErrorCode.none


def _closed_within(client: WireClient, seconds: float) -> float:
    """Seconds until the endpoint closed ``client``'s connection (fails if it answers or outlasts ``seconds``)."""
    client.sock.settimeout(seconds)
    started = time.monotonic()
    assert client.receive_frame() is None
    return time.monotonic() - started


def test_an_idle_connection_is_closed_and_a_busy_one_kept(strict_endpoint: Endpoint) -> None:
    with WireClient(strict_endpoint.bootstrap) as idle, WireClient(strict_endpoint.bootstrap) as busy:
        _ask(idle)
        started = time.monotonic()
        while time.monotonic() - started < 3 * IDLE_MS / 1000:
            _ask(busy)  # requests more often than the idle limit: never closed
            time.sleep(IDLE_MS / 4000)
        assert _closed_within(idle, 0.1) < 0.1  # closed long ago
        _ask(busy)


def test_a_frame_left_half_sent_costs_its_connection_only(patient_endpoint: Endpoint) -> None:
    """A slow client (slowloris) that starts frames and never finishes them: each connection is closed once the
    read deadline passes, and meanwhile every other client is answered at once."""
    with WireClient(patient_endpoint.bootstrap) as healthy:
        stalled = [WireClient(patient_endpoint.bootstrap) for _ in range(20)]
        try:
            started = time.monotonic()
            for index, client in enumerate(stalled):
                frame = client.frame(_versions_request())
                client.send_raw(frame[: 1 + index % (len(frame) - 1)])  # from a byte of the size to all but one
            for _ in range(10):
                asked = time.monotonic()
                _ask(healthy)
                assert time.monotonic() - asked < 0.2
            for client in stalled:
                _closed_within(client, READ_TIMEOUT_MS / 1000 + 2)
            assert time.monotonic() - started >= READ_TIMEOUT_MS / 1000 * 0.9
        finally:
            for client in stalled:
                client.close()
        _ask(healthy)


def test_socket_request_max_bytes_to_the_byte(strict_endpoint: Endpoint) -> None:
    with WireClient(strict_endpoint.bootstrap) as client:
        # A name padded so that the frame is exactly 1024 bytes (its length's varint takes two): read and answered.
        base = len(client.frame(_versions_request(""))) - SIZE.size
        frame = client.frame(_versions_request("n" * (1024 - base - 1)))
        assert len(frame) - SIZE.size == 1024
        client.send_raw(frame)
        assert client.receive_frame() is not None
    with WireClient(strict_endpoint.bootstrap) as client:
        client.send_raw(SIZE.pack(1025))  # refused from its size alone, before a byte of it is read
        assert _closed_within(client, 2) < 1


def test_hundreds_of_connections_at_once_are_all_answered(patient_endpoint: Endpoint) -> None:
    count = 300
    clients = [WireClient(patient_endpoint.bootstrap) for _ in range(count)]
    answered: list[int] = []
    try:
        for client in clients:
            client.send_raw(client.frame(_versions_request()))  # all requests in flight before any answer is read

        def read(group: list[WireClient]) -> None:
            answered.extend(1 for client in group if client.receive_frame() is not None)

        readers = [threading.Thread(target=read, args=(clients[i::8],)) for i in range(8)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(30)
    finally:
        for client in clients:
            client.close()
    assert len(answered) == count


def test_a_client_that_connects_and_sends_nothing_is_closed(strict_endpoint: Endpoint) -> None:
    host, port = strict_endpoint.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as silent:
        started = time.monotonic()
        assert silent.recv(1) == b""
        assert IDLE_MS / 1000 * 0.9 <= time.monotonic() - started < IDLE_MS / 1000 + 2
