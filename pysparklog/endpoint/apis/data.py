"""The data plane's APIs: Metadata, Produce, Fetch and ListOffsets (``pysparklog.endpoint.data`` has each)."""

from __future__ import annotations

from pysparklog.endpoint.apis import Api
from pysparklog.endpoint.data.fetch import FETCH, fetch
from pysparklog.endpoint.data.list_offsets import LIST_OFFSETS, list_offsets
from pysparklog.endpoint.data.metadata import METADATA, metadata
from pysparklog.endpoint.data.produce import PRODUCE, produce

APIS = (
    # v13 names topics by id only.
    Api(PRODUCE, 3, 12, produce),
    # v13 and later name topics by id only.
    Api(FETCH, 4, 12, fetch),
    # v11 adds -5 (earliest pending upload to a remote tier), which a log without tiers has no answer for.
    Api(LIST_OFFSETS, 1, 10, list_offsets),
    Api(METADATA, 0, 13, metadata),
)
