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
from pysparklog.endpoint.security import DEFAULT_ITERATIONS, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, add_user

#: kio supports Python 3.11 and later (a variable, not a condition mypy would settle for the version it checks).
KIO_SUPPORTED: bool = sys.version_info >= (3, 11)

DESCRIPTION = """\
Serve a log directory (a path or s3://, gs://, abfss:// URL) to Kafka clients: producers, consumers in groups,
transactions and the admin API, as a broker would, with no broker, ZooKeeper or KRaft quorum. Any number of
endpoints may serve one log directory, on one host or many; each answers as the leader of every partition.

Exposure: it listens on 127.0.0.1 unless --listen names another address. Without --sasl-users the log directory
is served to anyone who can connect, with every right a Kafka client has (create and delete topics, delete
records, commit any group's offsets). With --sasl-users a client must authenticate first (PLAIN or SCRAM, Kafka's
SASL_PLAINTEXT), and every authenticated user has all those rights too: there are no ACLs. Without
--ssl-certfile everything, PLAIN's passwords included, crosses the network in the clear: beyond loopback or a
network you trust, serve with --ssl-certfile and --sasl-users (SASL_SSL), or --ssl-cafile for client
certificates (SSL with ssl.client.auth=required). A client costs at most its connection: requests over
--socket-request-max-bytes, malformed frames, frames left unfinished for --request-read-timeout-ms and
connections idle for --connections-max-idle-ms are closed; the number of connections is bounded only by the
process's open-file limit.

Users: pysparklog serve --sasl-users FILE --add-sasl-user NAME reads a password from standard input and stores
it salted (SCRAM-SHA-256 and SCRAM-SHA-512 credentials, as Kafka stores them) in FILE, created if missing; a
running endpoint takes the change without a restart.
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
    parser.add_argument(
        "--connections-max-idle-ms",
        type=int,
        default=None,
        metavar="MS",
        help="close a connection that sends nothing for this long (default 600000, Kafka's)",
    )
    parser.add_argument(
        "--request-read-timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="close a connection that starts a request and does not finish it within this time (default 30000)",
    )
    security = parser.add_argument_group("security (see Exposure above)")
    security.add_argument(
        "--sasl-users",
        metavar="FILE",
        help="require SASL authentication by the users in FILE (USER MECHANISM SALTED-SCRAM-CREDENTIAL lines)",
    )
    security.add_argument(
        "--sasl-mechanisms",
        default=",".join(MECHANISMS),
        metavar="LIST",
        help=f"the SASL mechanisms offered, comma-separated (default {','.join(MECHANISMS)})",
    )
    security.add_argument(
        "--add-sasl-user",
        metavar="NAME",
        help="add NAME to --sasl-users (or change its password) with a password read from standard input, and exit",
    )
    security.add_argument(
        "--sasl-iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help=f"SCRAM iterations for --add-sasl-user ({MIN_ITERATIONS}-{MAX_ITERATIONS}, default {DEFAULT_ITERATIONS})",
    )
    security.add_argument("--ssl-certfile", metavar="PEM", help="serve TLS with this certificate (chain)")
    security.add_argument(
        "--ssl-keyfile", metavar="PEM", help="the certificate's private key (default: in the certfile)"
    )
    security.add_argument(
        "--ssl-cafile",
        metavar="PEM",
        help="require client certificates signed by these CAs (Kafka's ssl.client.auth=required)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not KIO_SUPPORTED:
        raise UsageError("serve needs Python 3.11 or later: kio, the Kafka protocol's types it uses, supports 3.11+")
    try:
        from pysparklog.endpoint import Endpoint, EndpointConfig
        from pysparklog.endpoint import config as defaults
        from pysparklog.endpoint.config import parse_host_port
        from pysparklog.endpoint.security import TlsSettings
    except ImportError as e:
        raise UsageError(f"serve needs the serve extra: pip install 'pysparklog[serve]' ({e})") from None
    if args.add_sasl_user is not None:
        return _add_sasl_user(args)
    if (args.ssl_keyfile or args.ssl_cafile) and not args.ssl_certfile:
        raise UsageError("--ssl-keyfile and --ssl-cafile need --ssl-certfile, the endpoint's certificate")
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
        max_request_bytes=args.socket_request_max_bytes or defaults.DEFAULT_MAX_REQUEST_BYTES,
        connections_max_idle_ms=args.connections_max_idle_ms or defaults.DEFAULT_CONNECTIONS_MAX_IDLE_MS,
        request_read_timeout_ms=args.request_read_timeout_ms or defaults.DEFAULT_REQUEST_READ_TIMEOUT_MS,
        tls=TlsSettings(args.ssl_certfile, args.ssl_keyfile, args.ssl_cafile) if args.ssl_certfile else None,
        sasl_users=args.sasl_users,
        sasl_mechanisms=tuple(name.strip().upper() for name in args.sasl_mechanisms.split(",") if name.strip()),
        registry_lease_ms=args.registry_lease_ms or defaults.DEFAULT_REGISTRY_LEASE_MS,
        group_min_session_timeout_ms=args.group_min_session_timeout_ms or defaults.DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    endpoint = Endpoint(args.log_dir, config)

    def listening(started: Endpoint) -> None:
        print(
            f"serving {started.log_dir.path} on {host}:{started.port} as {started.bootstrap}"
            f" ({config.security_protocol})",
            flush=True,
        )

    asyncio.run(endpoint.serve_forever(listening))
    return 0


def _add_sasl_user(args: argparse.Namespace) -> int:
    """``--add-sasl-user``: the password from standard input (a prompt, asked twice, on a terminal)."""
    if args.sasl_users is None:
        raise UsageError("--add-sasl-user needs --sasl-users, the file to add the user to")
    if sys.stdin.isatty():
        import getpass

        password = getpass.getpass(f"password for {args.add_sasl_user}: ")
        if getpass.getpass("again: ") != password:
            raise UsageError("the two passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    add_user(args.sasl_users, args.add_sasl_user, password, args.sasl_iterations)
    print(f"{args.add_sasl_user} can authenticate with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN ({args.sasl_users})")
    return 0
