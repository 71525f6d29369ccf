"""What the standard library of Python 3.11 has and that of 3.10, the oldest Python pysparklog supports, lacks."""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, enum.Enum):
        """Members that are their string values, as ``enum.StrEnum``'s: ``str()`` and f-strings give the value, not
        ``Class.NAME``."""

        def __str__(self) -> str:
            return str(self.value)


__all__ = ["StrEnum"]
