"""The package's build: pyproject.toml holds its metadata; this adds the extension of its kernels, compiled
ahead of time by numba (``pysparklog/compiled.py``), so that a fresh process does not wait for numba's JIT."""

from __future__ import annotations

import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the kernels' sources, not an installed copy
os.environ["PYSPARKLOG_KERNELS"] = "jit"  # the build compiles the sources, whatever extension lies beside them

from pysparklog.compiled import extension  # noqa: E402 - needs the path above

setup(ext_modules=[extension()])
