"""What a Databricks notebook finds in its namespace, for running the notebooks of ``examples/notebooks/`` elsewhere.

On Databricks a notebook has ``dbutils`` and ``display``; anywhere else each notebook makes these stand-ins instead
(``if "dbutils" not in globals(): ...``), so the same cells run on a laptop and in the test suite:

* ``LocalDbutils().widgets``: ``text``, ``dropdown`` and ``get``, as ``dbutils.widgets`` has them. A widget's value
  is the environment variable ``PYSPARKLOG_WIDGET_<NAME>`` (the widget's name in upper case) when it is set, its
  default otherwise, as a job's parameters override a notebook's defaults on Databricks.
* ``LocalDisplay(figures_dir)``: ``display(...)``. It prints a Spark or pandas DataFrame and saves a matplotlib
  figure as a PNG in ``figures_dir``, where Databricks would render them in the notebook.

And ``temporary_base_dir(prefix)``, the ``base_dir`` of a notebook whose widget is empty: a new temporary directory
that goes when the notebook's Python process ends, as a notebook's scratch files go with its session, instead of
one more ``pysparklog-*`` directory left in the temporary directory by every run.

Nothing else of ``dbutils`` is here: a notebook that needs more runs only on Databricks.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame

#: A widget ``name``'s value comes from the environment variable ``ENVIRONMENT_PREFIX + name.upper()``.
ENVIRONMENT_PREFIX = "PYSPARKLOG_WIDGET_"
#: The rows ``LocalDisplay`` prints of a DataFrame (Spark's ``show`` default).
ROWS = 20


def environment_variable(name: str) -> str:
    """The environment variable that sets widget ``name``."""
    return ENVIRONMENT_PREFIX + name.upper()


class LocalWidgets:
    """``dbutils.widgets``: text and dropdown widgets, their values strings, set by the environment. The parameters
    keep Databricks' names (``defaultValue``), so a call with keywords runs on both."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def text(self, name: str, defaultValue: str, label: str | None = None) -> None:
        """Define a text widget; its value is ``PYSPARKLOG_WIDGET_<NAME>`` if set, else ``defaultValue``."""
        self._values[name] = os.environ.get(environment_variable(name), defaultValue)

    def dropdown(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:
        """Define a dropdown widget; its value is ``PYSPARKLOG_WIDGET_<NAME>`` if set, else ``defaultValue``.

        Raises:
            ValueError: The default or the environment's value is not one of ``choices``.
        """
        if defaultValue not in choices:
            raise ValueError(f"widget {name!r}: the default {defaultValue!r} is not one of {list(choices)}")
        value = os.environ.get(environment_variable(name), defaultValue)
        if value not in choices:
            raise ValueError(
                f"{environment_variable(name)}={value!r} is not a choice of widget {name!r}; accepted: {list(choices)}"
            )
        self._values[name] = value

    def get(self, name: str) -> str:
        """The value of widget ``name``.

        Raises:
            ValueError: No widget of that name was defined.
        """
        if name not in self._values:
            raise ValueError(f"no widget named {name!r} is defined; defined: {sorted(self._values)}")
        return self._values[name]


class LocalDbutils:
    """The part of Databricks' ``dbutils`` the notebooks use outside Databricks: ``widgets``."""

    def __init__(self) -> None:
        self.widgets = LocalWidgets()


class LocalDisplay:
    """Databricks' ``display()``: a Spark DataFrame printed with ``show``, a pandas DataFrame as its first rows, a
    matplotlib figure (anything with ``savefig``) saved as ``figure-<n>.png`` in ``figures_dir``, anything else
    printed."""

    def __init__(self, figures_dir: str | os.PathLike[str]) -> None:
        self.figures_dir = Path(figures_dir)
        self.figures = 0

    def __call__(self, content: object) -> None:
        if isinstance(content, DataFrame):
            content.show(ROWS, truncate=False)
        elif isinstance(content, pd.DataFrame):
            print(content.head(ROWS).to_string())
        elif hasattr(content, "savefig"):
            self.figures += 1
            path = self.figures_dir / f"figure-{self.figures}.png"
            content.savefig(path)
            print(f"figure saved as {path}")
        else:
            print(content)


def temporary_base_dir(prefix: str) -> str:
    """A new directory in the temporary directory (``$TMPDIR``), named ``prefix`` and a random part, removed with
    everything in it when this Python process ends. Only the directory made here goes: a ``base_dir`` the user gives
    stays."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
