"""The package's build: pyproject.toml holds its metadata; this adds the extension of its kernels, compiled
ahead of time by numba (``pysparklog/compiled.py``), so that a fresh process does not wait for numba's JIT."""

from __future__ import annotations

import os
import sys
import tempfile

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the kernels' sources, not an installed copy
# The build compiles the sources; an extension already beside them (an earlier in-place build) stays unloaded.
os.environ["PYSPARKLOG_KERNELS"] = "jit"

from pysparklog.compiled import extension  # noqa: E402 - needs the path above

# Intermediate files go to a temporary directory, not to build/ in the checkout, where the linters would see
# a second copy of the package. Its data file (py.typed) is declared in pyproject.toml; without
# include_package_data, setuptools does not look for more among the extension's sources, which are numba's C
# files at absolute paths.
with tempfile.TemporaryDirectory(prefix="pysparklog-build-") as build_base:
    setup(
        ext_modules=[extension()],
        include_package_data=False,
        options={"build": {"build_base": build_base}},
    )
