"""A real Kafka 4.2 broker shared by the tests that prove the client harnesses against Kafka itself (the Java
clients, kcat): started once per test run, at first use, each test using topics of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.kafka_broker import KafkaBroker
from tests.interop.kafka_tools import missing_tools


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Skipped only without Java or Maven (as the ``kafka_dump_log`` fixture)."""
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"Kafka interop tests need Java and Maven: {missing}")
    with KafkaBroker.started(tmp_path_factory.mktemp("kafka-broker")) as started:
        yield started
