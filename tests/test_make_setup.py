"""``make setup``'s install of the checkout: quiet, and still what its comment promises.

The Makefile installs the package in setuptools' compat editable mode, which lets Spark find ``format("pysparklog")``
from any working directory (``pkgutil.iter_modules()`` lists ``pyspark_pysparklog``) and imports a module added to
the checkout without a reinstall; setuptools warns on every such install that the mode is transitional, a banner
``make run`` showed. The test runs the Makefile's own install command, read from it, into a new environment.

It installs a copy of the checkout's packages whose build needs setuptools only: the real build compiles the kernels
(minutes), which neither the banner nor the editable mode depends on.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

#: The recipe line of the Makefile that installs the checkout in editable mode.
INSTALL_LINE = re.compile(r"^\t(?P<command>.*-m pip install .*-e \..*)$", re.M)
BANNER_WORDS = ("Compat editable installs", "transitional")
COMMAND_TIMEOUT_S = 120


def makefile_install_command() -> str:
    """The Makefile's install of the checkout, its continuation lines joined, as the shell runs it."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    match = INSTALL_LINE.search(text)
    assert match is not None, "the Makefile has no `pip install ... -e .` recipe line"
    return match["command"]


def scratch_checkout(root: Path) -> Path:
    """The checkout's packages and metadata, with a build that needs setuptools only (no compiled kernels)."""
    checkout = root / "checkout"
    checkout.mkdir()
    for package in ("pysparklog", "pyspark_pysparklog"):
        shutil.copytree(REPO / package, checkout / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(REPO / "README.md", checkout)
    pyproject = (REPO / "pyproject.toml").read_text()
    requires = re.compile(r"^requires = \[.*\]$", re.M)
    assert requires.search(pyproject), "pyproject.toml has no build-system requires line"
    (checkout / "pyproject.toml").write_text(requires.sub('requires = ["setuptools>=77"]', pyproject, count=1))
    return checkout


def test_the_makefile_install_is_quiet_and_spark_finds_the_source_from_anywhere(tmp_path: Path) -> None:
    checkout = scratch_checkout(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=COMMAND_TIMEOUT_S)
    python = venv / "bin" / "python"
    # The suite's interpreter brings pip (`--python` installs into the new environment); the PYTHONPATH of the suite,
    # which names the checkout, would find the packages without the install, so it is left out.
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "PYTHONWARNINGS")}
    command = makefile_install_command().replace("$(PY) -m pip", f"{sys.executable} -m pip --python {python}")
    install = subprocess.run(
        command, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    output = install.stdout + install.stderr
    assert install.returncode == 0, output
    assert not [words for words in BANNER_WORDS if words in output], output

    (checkout / "pysparklog" / "added_after_install.py").write_text("ADDED = True\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "import pkgutil, pysparklog.added_after_install as added; "
        "print(added.ADDED, any(module.name == 'pyspark_pysparklog' for module in pkgutil.iter_modules()))"
    )
    found = subprocess.run(
        [python, "-c", probe], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == ["True", "True"]
