"""Kafka's consumer partition assignors, in pure Python: ``range``, ``roundrobin``, ``sticky`` and
``cooperative-sticky``.

Each gives the same assignment as the Java class of the same name for the same group, so the group
coordinator can act as leader for groups that mix pysparklog and Java consumers. Pick one with
:func:`assignor_for`, by the protocol name members advertise or by the class name Java consumers
configure in ``partition.assignment.strategy``.
"""

from __future__ import annotations

from pysparklog.assignors.base import (
    NO_GENERATION,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    Subscription,
    member_sort_key,
    sorted_members,
)
from pysparklog.assignors.range import RangeAssignor
from pysparklog.assignors.round_robin import RoundRobinAssignor
from pysparklog.assignors.sticky import (
    AbstractStickyAssignor,
    CooperativeStickyAssignor,
    StickyAssignor,
    partitions_transferring,
    revoked_partitions,
)
from pysparklog.errors import InvalidConfigError

_JAVA_PACKAGE = "org.apache.kafka.clients.consumer"
_ASSIGNOR_CLASSES: tuple[type[ConsumerPartitionAssignor], ...] = (
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    CooperativeStickyAssignor,
)

#: The protocol names of the assignors, as Kafka's consumers advertise them in JoinGroup.
ASSIGNOR_NAMES: tuple[str, ...] = tuple(assignor.name for assignor in _ASSIGNOR_CLASSES)

_BY_NAME: dict[str, type[ConsumerPartitionAssignor]] = {
    **{assignor.name: assignor for assignor in _ASSIGNOR_CLASSES},
    **{f"{_JAVA_PACKAGE}.{assignor.__name__}": assignor for assignor in _ASSIGNOR_CLASSES},
}


def assignor_for(name: str) -> ConsumerPartitionAssignor:
    """The assignor a name refers to: a protocol name (``"range"``) or a Java class name
    (``"org.apache.kafka.clients.consumer.RangeAssignor"``), as ``partition.assignment.strategy`` lists them.

    Raises:
        InvalidConfigError: The name is neither; the message lists the accepted names.
    """
    assignor = _BY_NAME.get(name) if isinstance(name, str) else None
    if assignor is None:
        raise InvalidConfigError(
            f"partition.assignment.strategy {name!r} is not a known assignor; accepted: {', '.join(_BY_NAME)}"
        )
    return assignor()


__all__ = [
    "ASSIGNOR_NAMES",
    "NO_GENERATION",
    "AbstractStickyAssignor",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for",
    "member_sort_key",
    "partitions_transferring",
    "revoked_partitions",
    "sorted_members",
]
