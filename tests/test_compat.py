"""The standard library's newer parts that pysparklog brings to Python 3.10."""

from __future__ import annotations

import json

from pysparklog._compat import StrEnum


class Colour(StrEnum):
    RED = "red"
    DARK_BLUE = "dark-blue"


def test_a_str_enum_member_is_its_value_wherever_it_becomes_text() -> None:
    assert isinstance(Colour.RED, str)
    assert Colour("dark-blue") is Colour.DARK_BLUE
    assert str(Colour.DARK_BLUE) == "dark-blue"
    assert f"{Colour.RED} {Colour.RED:>5}" == "red   red"
    assert "/".join(Colour) == "red/dark-blue"
    assert json.dumps({"colour": Colour.RED}) == '{"colour": "red"}'
