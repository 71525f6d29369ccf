"""kcat (Debian's package, fetched by ``kcat.py`` when not on PATH) proven against a real Kafka 4.2 broker: the
produce and consume round trip ``tests/endpoint/test_real_clients.py`` runs against two endpoints."""

from __future__ import annotations

import pytest

from tests.interop.kafka_broker import TOPIC_COMMAND, KafkaBroker
from tests.interop.kcat import KCAT, headers_of

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_kcat_produces_keys_and_headers_and_consumes_them_back(kafka_broker: KafkaBroker) -> None:
    kafka_broker.tool(TOPIC_COMMAND, "--create", "--topic", "kcat", "--partitions", "2")
    lines = "".join(f"k{i}:v{i}\n" for i in range(20)).encode()
    common = ("-b", kafka_broker.bootstrap_server, "-t", "kcat")
    KCAT.run(*common, "-P", "-K:", "-H", "origin=kcat", "-H", "empty=", "-X", "acks=all", stdin=lines)

    messages = KCAT.records(*common, "-C", "-o", "beginning", "-e")
    assert sorted(m["key"] for m in messages) == sorted(f"k{i}" for i in range(20))
    for message in messages:
        assert message["payload"] == "v" + message["key"][1:]
        assert headers_of(message) == [("origin", "kcat"), ("empty", "")]
        assert message["tstype"] == "create" and message["ts"] > 0
    for partition in (0, 1):
        offsets = [m["offset"] for m in messages if m["partition"] == partition]
        assert offsets == list(range(len(offsets)))
