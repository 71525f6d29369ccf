"""``pysparklog.errors``: the errors about data are their own types, exported, and still ``ValueError``s."""

from __future__ import annotations

import pytest

import pysparklog
from pysparklog.errors import (
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    PySparkLogError,
    RecordTooLargeError,
)


@pytest.mark.parametrize("error", [InvalidRecordError, RecordTooLargeError, InvalidTimestampError])
def test_data_errors_are_exported_and_caught_where_value_errors_were(error: type[PySparkLogError]) -> None:
    assert getattr(pysparklog, error.__name__) is error and error.__name__ in pysparklog.__all__
    assert issubclass(error, ValueError)
    assert not issubclass(error, InvalidConfigError)  # bad data is not a bad setting
