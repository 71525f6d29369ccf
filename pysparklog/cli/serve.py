"""``pysparklog serve``: a Kafka protocol endpoint over a log directory, for services that write and read with a
Kafka client while Spark reads the same topics straight from storage.

What is safe to expose is in ``--help``: by default the endpoint listens on loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from pysparklog.cli._common import UsageError, add_log_dir_argument

#: kio supports Python 3.11 and later (a variable, not a condition mypy would settle for the version it checks).
KIO_SUPPORTED: bool = sys.version_info >= (3, 11)

DESCRIPTION = """\
Serve a log directory (a path or s3://, gs://, abfss:// URL) to Kafka clients: producers, consumers in groups,
transactions and the admin API, as a broker would, with no broker, ZooKeeper or KRaft quorum. Any number of
endpoints may serve one log directory, on one host or many; each answers as the leader of every partition.

Exposure: it listens on 127.0.0.1 unless --listen names another address. The log directory is served to anyone
who can connect, with every right a Kafka client has (create and delete topics, delete records, commit any
group's offsets): listen beyond loopback only on a network you trust, or behind SASL and TLS.
"""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a log directory to Kafka clients (the Kafka protocol)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_log_dir_argument(parser)
    parser.add_argument(
        "--listen",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1:9092; port 0 takes a free one, printed at start)",
    )
    parser.add_argument(
        "--advertised",
        metavar="HOST:PORT",
        help="the address clients are told to connect to (default: --listen's)",
    )
    parser.add_argument(
        "--socket-request-max-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="the largest request read; a larger one closes its connection (default 104857600, Kafka's)",
    )
    parser.add_argument(
        "--registry-lease-ms",
        type=int,
        default=None,
        metavar="MS",
        help="how long this endpoint stays in the log directory's registry of endpoints without renewing it: when it "
        "dies, the consumer groups it coordinates move to the other endpoints after this long (default 10000)",
    )
    parser.add_argument(
        "--group-min-session-timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="Kafka's group.min.session.timeout.ms: shorter consumer session timeouts are refused (default 6000)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not KIO_SUPPORTED:
        raise UsageError("serve needs Python 3.11 or later: kio, the Kafka protocol's types it uses, supports 3.11+")
    try:
        from pysparklog.endpoint import Endpoint, EndpointConfig
        from pysparklog.endpoint.config import (
            DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
            DEFAULT_MAX_REQUEST_BYTES,
            DEFAULT_REGISTRY_LEASE_MS,
            parse_host_port,
        )
    except ImportError as e:
        raise UsageError(f"serve needs the serve extra: pip install 'pysparklog[serve]' ({e})") from None
    host, port = parse_host_port(args.listen, "--listen")
    advertised_host: str | None = None
    advertised_port: int | None = None
    if args.advertised is not None:
        advertised_host, advertised_port = parse_host_port(args.advertised, "--advertised")
    config = EndpointConfig(
        host=host,
        port=port,
        advertised_host=advertised_host,
        advertised_port=advertised_port,
        max_request_bytes=args.socket_request_max_bytes or DEFAULT_MAX_REQUEST_BYTES,
        registry_lease_ms=args.registry_lease_ms or DEFAULT_REGISTRY_LEASE_MS,
        group_min_session_timeout_ms=args.group_min_session_timeout_ms or DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    endpoint = Endpoint(args.log_dir, config)

    def listening(started: Endpoint) -> None:
        print(f"serving {started.log_dir.path} on {host}:{started.port} as {started.bootstrap}", flush=True)

    asyncio.run(endpoint.serve_forever(listening))
    return 0
