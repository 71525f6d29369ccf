"""What the console producer and consumer share: Kafka's ``--property KEY=VALUE`` options, and its
``--producer-property``/``--consumer-property`` ones."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence

from pysparklog.errors import InvalidConfigError


def add_property_argument(parser: argparse.ArgumentParser, *flags: str, accepted: Mapping[str, str]) -> None:
    """A repeatable ``--property KEY=VALUE`` option; ``accepted`` maps each name to its help."""
    listed = "; ".join(f"{name}: {meaning}" for name, meaning in accepted.items())
    parser.add_argument(
        *flags, dest="property", action="append", default=[], metavar="KEY=VALUE", help=f"repeatable. {listed}"
    )


def add_client_property_argument(parser: argparse.ArgumentParser, flag: str, client: str) -> None:
    """Kafka's repeatable ``--producer-property``/``--consumer-property NAME=VALUE``: a config of the client."""
    parser.add_argument(
        flag,
        dest=flag.removeprefix("--").replace("-", "_"),
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a {client} config, as Kafka's {client} configs are named (repeatable); the broker connection's "
        "(bootstrap.servers, security.protocol, sasl.*, ssl.*...) are ignored with a warning",
    )


def client_properties(pairs: Sequence[str], client: str) -> dict[str, str]:
    """``--producer-property``/``--consumer-property`` pairs, split as ``--property``'s; the last value of a name
    wins. The client's config checks the names and values, and leaves out the broker connection's configs with
    a warning, shown as a ``WARN:`` line.

    Raises:
        InvalidConfigError: A pair without ``=``.
    """
    _show_broker_config_warnings()
    properties: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise InvalidConfigError(f"Invalid {client} property {pair!r}; accepted: NAME=VALUE")
        properties[name] = value
    return properties


class _WarnLine(logging.Handler):
    """A log record as the CLI's warnings are printed: ``WARN: <message>`` on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"WARN: {record.getMessage()}", file=sys.stderr)


def _show_broker_config_warnings() -> None:
    """pysparklog's loggers print nothing unless asked to (a library's NullHandler); the warning that broker
    configs are ignored is the CLI's to show."""
    logger = logging.getLogger("pysparklog.broker_configs")
    if not any(isinstance(handler, _WarnLine) for handler in logger.handlers):
        logger.addHandler(_WarnLine(logging.WARNING))


def parse_properties(pairs: Sequence[str], accepted: Mapping[str, str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs split at the first ``=``, as Kafka's ``CommandLineUtils.parseKeyValueArgs`` splits them;
    the last value of a name wins.

    Kafka's tools ignore names their reader or formatter does not know; these are refused, so that a
    mistyped name does not silently leave its default in force.

    Raises:
        InvalidConfigError: A pair without ``=``, or a name not in ``accepted``.
    """
    properties: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise InvalidConfigError(f"Invalid command line properties: {pair!r}; accepted: KEY=VALUE")
        if name not in accepted:
            raise InvalidConfigError(f"property {name!r} is not supported; accepted: {', '.join(accepted)}")
        properties[name] = value
    return properties


def is_true(value: str) -> bool:
    """A boolean property as Kafka's console tools read one: ``true`` in any case, spaces around it ignored;
    anything else is false."""
    return value.strip().lower() == "true"
