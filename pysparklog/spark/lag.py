"""How far a running query is behind the log: Kafka's ``min/max/avgOffsetsBehindLatest``.

Spark's Kafka source reports these as source metrics; a Python data source cannot add metrics to
the progress, but each progress event carries the source's end offset of the micro-batch and its
latest offset (``reportLatestOffset``). ``OffsetsBehindLatestListener`` turns the two into the same
three numbers, per query and source, as a ``StreamingQueryListener``. A pysparklog source reports its
latest offset with ``driverReadMaxOffsets=0`` only: PySpark does not ask a source that reads small
micro-batches on the driver.

Example:
    >>> listener = OffsetsBehindLatestListener()
    >>> spark.streams.addListener(listener)
    >>> ...
    >>> listener.latest(query.id)   # {source description: OffsetsBehindLatest(min=0, max=12, avg=4.0)}
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from pyspark.sql.streaming.listener import StreamingQueryListener

_log = logging.getLogger(__name__)


class OffsetsBehindLatest(NamedTuple):
    """Per partition ``latest - end`` of a micro-batch: the smallest, the largest and the mean."""

    min: int
    max: int
    avg: float


def offsets_behind_latest(
    end: Mapping[str, Mapping[str, int]], latest: Mapping[str, Mapping[str, int]]
) -> OffsetsBehindLatest | None:
    """Kafka's offsets-behind-latest metrics from a progress's end and latest offsets (``{"topic":
    {"partition": offset}}``); None when there are no partitions. A partition the batch has not
    reached yet counts from 0, as it will be read from its earliest offset."""
    behind = [
        max(int(offset) - int(end.get(topic, {}).get(partition, 0)), 0)
        for topic, partitions in latest.items()
        for partition, offset in partitions.items()
    ]
    if not behind:
        return None
    return OffsetsBehindLatest(min(behind), max(behind), sum(behind) / len(behind))


def _offsets(text: str | None) -> dict[str, dict[str, int]] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        return None  # not a Kafka-shaped offset: another kind of source
    return value


class OffsetsBehindLatestListener(StreamingQueryListener):
    """Keeps each query's latest offsets-behind-latest per source, and hands them to ``on_progress``.

    Args:
        on_progress: Called with (query id, source description, metrics) at every progress of a
            source with Kafka-shaped offsets (``format("pysparklog")``, ``format("kafka")``); by
            default the metrics are logged at INFO.
    """

    def __init__(self, on_progress: Callable[[str, str, OffsetsBehindLatest], None] | None = None) -> None:
        self._on_progress = on_progress or _log_progress
        self._lock = threading.Lock()
        self._latest: dict[str, dict[str, OffsetsBehindLatest]] = {}
        self._unreported: set[tuple[str, str]] = set()

    def latest(self, query_id: Any) -> dict[str, OffsetsBehindLatest]:
        """The last metrics of each source of the query (by its id), by source description."""
        with self._lock:
            return dict(self._latest.get(str(query_id), {}))

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        for source in progress.sources:
            end, latest = _offsets(source.endOffset), _offsets(source.latestOffset)
            if end is not None and latest is None:
                self._warn_unreported(str(progress.id), source.description)
            if end is None or latest is None:
                continue
            metrics = offsets_behind_latest(end, latest)
            if metrics is None:
                continue
            with self._lock:
                self._latest.setdefault(str(progress.id), {})[source.description] = metrics
            self._on_progress(str(progress.id), source.description, metrics)

    def _warn_unreported(self, query_id: str, description: str) -> None:
        """Once per query and source: Kafka-shaped offsets without a latest offset to compare them with."""
        with self._lock:
            if (query_id, description) in self._unreported:
                return
            self._unreported.add((query_id, description))
        _log.warning(
            "query %s, %s: no latestOffset in its progress, so no offsets behind latest; a pysparklog source "
            "reports it with option driverReadMaxOffsets=0 (PySpark does not ask a source that reads small "
            "micro-batches on the driver)",
            query_id,
            description,
        )

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def _log_progress(query_id: str, source: str, metrics: OffsetsBehindLatest) -> None:
    _log.info(
        "query %s, %s: offsets behind latest min %d, max %d, avg %.1f",
        query_id,
        source,
        metrics.min,
        metrics.max,
        metrics.avg,
    )
