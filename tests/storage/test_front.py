"""The storage engine's front (``pysparklog.storage``): every name it lists resolves, lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pysparklog.storage as storage


@pytest.mark.parametrize("name", storage.__all__)
def test_every_name_of_the_front_resolves_to_its_module(name: str) -> None:
    value = getattr(storage, name)
    assert value is getattr(sys.modules[storage._EXPORTS[name]], name)
    assert name in dir(storage)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'pysparklog.storage' has no attribute 'Segment'"):
        _ = storage.Segment


def test_the_front_imports_the_engine_only_when_a_name_is_used() -> None:
    probe = (
        "import sys, pysparklog.storage, pysparklog.storage.config; "
        "print('numpy' in sys.modules, 'pyarrow' in sys.modules); "
        "pysparklog.storage.PartitionLog; print('pyarrow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True"]
