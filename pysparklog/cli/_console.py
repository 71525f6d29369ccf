"""What the console producer and consumer share: Kafka's ``--property KEY=VALUE`` options."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from pysparklog.errors import InvalidConfigError


def add_property_argument(parser: argparse.ArgumentParser, *flags: str, accepted: Mapping[str, str]) -> None:
    """A repeatable ``--property KEY=VALUE`` option; ``accepted`` maps each name to its help."""
    listed = "; ".join(f"{name}: {meaning}" for name, meaning in accepted.items())
    parser.add_argument(
        *flags, dest="property", action="append", default=[], metavar="KEY=VALUE", help=f"repeatable. {listed}"
    )


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
