"""ApiVersions (key 18): the APIs and versions the endpoint serves, nothing more."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from pysparklog.endpoint.apis import Api, served
from pysparklog.endpoint.context import RequestContext

API_VERSIONS = 18
#: Every response's throttle time: the endpoint has no quotas.
NO_THROTTLE = timedelta(0)


def version_list(context: RequestContext) -> list[Any]:
    return [
        context.message.make(
            "ApiVersion", api_key=api.api_key, min_version=api.min_version, max_version=api.max_version
        )
        for api in sorted(served().values(), key=lambda api: api.api_key)
    ]


async def api_versions(context: RequestContext, request: Any) -> Any:
    return context.message.make(
        "ApiVersionsResponse",
        error_code=ErrorCode.none,
        api_keys=tuple(version_list(context)),
        throttle_time=NO_THROTTLE,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )


APIS = (Api(API_VERSIONS, 0, 4, api_versions),)
