"""Fixtures for tests that run Apache Kafka's own tools against our files."""

from __future__ import annotations

import pytest

from tests.interop.kafka_tools import (
    DumpLogSegments,
    kafka_classpath,
    missing_tools,
    run_dump_log_segments,
    unavailable_reason,
)


@pytest.fixture(scope="session")
def kafka_dump_log() -> DumpLogSegments:
    """``run_dump_log_segments``, once Kafka's classpath is resolved.

    Skips only when Java or Maven is absent (e.g. a developer laptop). With both present a
    resolution failure is a real failure: CI has both, and a silent skip would hide lost coverage.
    """
    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"Kafka interop tests need Java and Maven: {missing}")
    if kafka_classpath() is None:
        pytest.fail(f"Java and Maven are present but Kafka's tools could not be resolved:\n{unavailable_reason()}")
    return run_dump_log_segments
