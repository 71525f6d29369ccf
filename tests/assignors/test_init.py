"""``pysparklog.assignors``: looking assignors up by Kafka's protocol and class names."""

from __future__ import annotations

import pytest

from pysparklog.assignors import (
    ASSIGNOR_NAMES,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
)
from pysparklog.errors import InvalidConfigError


@pytest.mark.parametrize(
    ("name", "java_class", "assignor_class", "protocol"),
    [
        ("range", "RangeAssignor", RangeAssignor, RebalanceProtocol.EAGER),
        ("roundrobin", "RoundRobinAssignor", RoundRobinAssignor, RebalanceProtocol.EAGER),
        ("sticky", "StickyAssignor", StickyAssignor, RebalanceProtocol.EAGER),
        ("cooperative-sticky", "CooperativeStickyAssignor", CooperativeStickyAssignor, RebalanceProtocol.COOPERATIVE),
    ],
)
def test_assignor_for_short_and_class_names(
    name: str, java_class: str, assignor_class: type, protocol: RebalanceProtocol
) -> None:
    assert type(assignor_for(name)) is assignor_class
    assert type(assignor_for(f"org.apache.kafka.clients.consumer.{java_class}")) is assignor_class
    assert assignor_class.name == name
    assert assignor_class.protocol is protocol


def test_assignor_names_in_kafkas_order() -> None:
    assert ASSIGNOR_NAMES == ("range", "roundrobin", "sticky", "cooperative-sticky")


@pytest.mark.parametrize(
    "name", ["Range", "round-robin", "RangeAssignor", "org.apache.kafka.clients.consumer.Foo", "", 3]
)
def test_unknown_assignor_names_the_accepted_ones(name: object) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        assignor_for(name)  # type: ignore[arg-type]
    message = str(raised.value)
    assert repr(name) in message
    for accepted in (*ASSIGNOR_NAMES, "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"):
        assert accepted in message
