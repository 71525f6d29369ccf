"""The endpoint's network side: ApiVersions lists what is served, and what a client sends that the endpoint
cannot serve costs that client its connection, not the endpoint."""

from __future__ import annotations

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from pysparklog.endpoint import Endpoint
from pysparklog.endpoint.apis import served
from tests.endpoint.kafka_wire import SIZE, WireClient


def _ask_versions(client: WireClient) -> ApiVersionsResponse:
    request = ApiVersionsRequest(client_software_name="wire-test", client_software_version="1")
    response: ApiVersionsResponse = client.request(request, ApiVersionsResponse)
    return response


def test_api_versions_lists_exactly_the_apis_served(endpoint: Endpoint) -> None:
    with WireClient(endpoint.bootstrap) as client:
        response = _ask_versions(client)
    assert response.error_code == ErrorCode.none
    listed = {(v.api_key, v.min_version, v.max_version) for v in response.api_keys}
    assert listed == {(api.api_key, api.min_version, api.max_version) for api in served().values()}


def test_an_api_versions_request_newer_than_served_gets_the_list_in_v0(endpoint: Endpoint) -> None:
    """As a broker answers a client newer than itself: v0, UNSUPPORTED_VERSION, and the versions to pick from."""
    with WireClient(endpoint.bootstrap) as client:
        frame = bytearray(client.frame(ApiVersionsRequest(client_software_name="x", client_software_version="1")))
        frame[SIZE.size + 2 : SIZE.size + 4] = (99).to_bytes(2, "big")  # version 99
        client.send_raw(bytes(frame))
        answer = client.receive_frame()
    assert answer is not None
    from kio.serial import entity_reader

    response, _ = entity_reader(ApiVersionsResponseV0)(answer, 4)
    assert response.error_code == ErrorCode.unsupported_version
    assert 18 in {v.api_key for v in response.api_keys}


def test_a_frame_over_the_request_limit_or_of_an_unknown_api_closes_only_its_connection(endpoint: Endpoint) -> None:
    with WireClient(endpoint.bootstrap) as oversized, WireClient(endpoint.bootstrap) as unknown:
        oversized.send_raw(SIZE.pack(endpoint.config.max_request_bytes + 1) + b"\0" * 16)
        assert oversized.receive_frame() is None
        unknown.send_raw(SIZE.pack(8) + (999).to_bytes(2, "big") + bytes(6))
        assert unknown.receive_frame() is None
    with WireClient(endpoint.bootstrap) as healthy:
        assert _ask_versions(healthy).error_code == ErrorCode.none


def test_bytes_after_a_request_body_are_ignored_as_a_broker_ignores_them(endpoint: Endpoint) -> None:
    """librdkafka 2.x sends Metadata v13 with three bytes past its end; a broker answers it, so the endpoint does."""
    with WireClient(endpoint.bootstrap) as client:
        frame = client.frame(ApiVersionsRequest(client_software_name="x", client_software_version="1"))
        (size,) = SIZE.unpack_from(frame)
        client.send_raw(SIZE.pack(size + 3) + frame[SIZE.size :] + b"\x01\x00\x00")
        answer = client.receive_frame()
    assert answer is not None and int.from_bytes(answer[:4], "big") == client.correlation_id


def test_a_length_that_would_abort_the_decoder_closes_the_connection_only(endpoint: Endpoint) -> None:
    """Nine bytes of Metadata v12 claiming 0xC0000000 topics: kio 0.6.5's native reader would ask for 24 GiB at
    once and abort the process; the bounds walk refuses the count first (test_fuzz_requests.py found it)."""
    header = (3).to_bytes(2, "big") + (12).to_bytes(2, "big") + (7).to_bytes(4, "big") + b"\xff\xff\x00"
    body = bytes.fromhex("808080800c") + b"\x00\x00\x00"
    with WireClient(endpoint.bootstrap) as client:
        client.send_raw(SIZE.pack(len(header + body)) + header + body)
        assert client.receive_frame() is None
    with WireClient(endpoint.bootstrap) as healthy:
        assert _ask_versions(healthy).error_code == ErrorCode.none
