"""Small value types the clients share, named as Kafka's Java client names them."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of one topic; orders by topic, then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed position: the next offset to consume, the leader epoch of the record before it
    (-1 when unknown), and free-form metadata the committer attached."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
