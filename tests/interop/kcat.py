"""kcat, Debian's package (librdkafka's command-line client), for the interop tests, on any Debian-like machine
without root: the ``kcat`` on PATH when there is one, else Debian's packages fetched by the project's own set-up::

    apt-get download <kcat and each package of its dependency closure that dpkg does not have installed>
    dpkg -x <each .deb> .cache/kcat/<architecture>/root

and run with ``LD_LIBRARY_PATH`` pointing into that tree. ``apt-get download`` needs no root, only apt's package
lists: a container image ships without them until ``apt-get update`` (as root) fetches them, and the failure says
so. Before the tree is
published, ``ldd`` must find every library kcat links; a library still missing is named in the error.

On Debian 12 kcat 1.7.1 links librdkafka1 (2.0.2) and libyajl2, and through librdkafka libssl3, libsasl2-2,
libzstd1, liblz4-1 and zlib1g. The machine these tests were written on lacked only kcat, librdkafka1 and libyajl2;
a minimal Debian 12 image may lack libsasl2-2 (and libssl3 where no Debian Python pulled it in), which the closure
then fetches too (not tried on such an image: no container runtime was at hand).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.interop.client_process import ClientProcess
from tests.interop.kafka_tools import REPO_ROOT

CACHE_DIR = REPO_ROOT / ".cache" / "kcat"
PACKAGE = "kcat"
FETCH_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 120.0
#: apt-cache depends options that keep the closure to what must be installed for kcat to run.
DEPENDS_ONLY = (
    "--recurse",
    "--no-recommends",
    "--no-suggests",
    "--no-conflicts",
    "--no-breaks",
    "--no-replaces",
    "--no-enhances",
)


class KcatUnavailable(RuntimeError):
    """kcat is not on PATH and Debian's package could not be fetched; the message says which step failed."""


def _run(command: Sequence[str], cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise KcatUnavailable(f"{' '.join(command)} failed: {error}") from error
    if proc.returncode != 0:
        raise KcatUnavailable(
            f"{' '.join(command)} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
            "\n(apt-get download needs apt's package lists: run apt-get update once)"
        )
    return proc.stdout


def _not_installed(packages: Sequence[str]) -> list[str]:
    """The packages dpkg does not have installed."""
    missing = []
    for package in packages:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
        ).stdout
        if not status.endswith(" installed"):
            missing.append(package)
    return missing


def _library_dirs(root: Path) -> list[Path]:
    """The directories of the extracted tree that hold shared libraries."""
    return sorted({library.parent for library in root.rglob("*.so*") if library.is_file()})


class Kcat:
    """Where kcat is and the environment it runs in, resolved at first use (the fetch is not retried)."""

    def __init__(self) -> None:
        self._resolved: tuple[str, dict[str, str]] | None = None
        self._failure: KcatUnavailable | None = None

    def resolve(self) -> tuple[str, dict[str, str]]:
        """kcat's path and its environment.

        Raises:
            KcatUnavailable: It is not on PATH and could not be fetched.
        """
        if self._failure is not None:
            raise self._failure
        if self._resolved is None:
            try:
                self._resolved = self._find()
            except KcatUnavailable as failure:
                self._failure = failure
                raise
        return self._resolved

    def _find(self) -> tuple[str, dict[str, str]]:
        on_path = shutil.which(PACKAGE)
        if on_path is not None:
            return on_path, dict(os.environ)
        for tool in ("apt-get", "apt-cache", "dpkg", "dpkg-query", "ldd"):
            if shutil.which(tool) is None:
                raise KcatUnavailable(f"kcat is not on PATH, and {tool} (to fetch Debian's package) is not either")
        architecture = _run(["dpkg", "--print-architecture"]).strip()
        root = CACHE_DIR / architecture / "root"
        binary = root / "usr" / "bin" / PACKAGE
        if not binary.is_file():
            self._fetch(root)
        environment = dict(os.environ)
        library_path = os.pathsep.join(str(directory) for directory in _library_dirs(root))
        environment["LD_LIBRARY_PATH"] = os.pathsep.join(
            part for part in (library_path, os.environ.get("LD_LIBRARY_PATH", "")) if part
        )
        return str(binary), environment

    @staticmethod
    def _fetch(root: Path) -> None:
        """Debian's kcat and the packages of its closure not installed here, extracted into ``root``."""
        closure = _run(["apt-cache", "depends", *DEPENDS_ONLY, PACKAGE])
        packages = sorted({line.strip() for line in closure.splitlines() if line and not line[0].isspace()})
        packages = [package for package in packages if not package.startswith("<")]  # virtual packages
        wanted = _not_installed(packages)
        staging = root.parent / f"staging.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        debs = staging / "debs"
        debs.mkdir(parents=True)
        _run(["apt-get", "download", *wanted], cwd=debs)
        tree = staging / "root"
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(tree)])
        binary = tree / "usr" / "bin" / PACKAGE
        library_path = os.pathsep.join(str(directory) for directory in _library_dirs(tree))
        linked = subprocess.run(
            ["ldd", str(binary)],
            capture_output=True,
            text=True,
            env={**os.environ, "LD_LIBRARY_PATH": library_path},
            check=False,
        ).stdout
        unresolved = [line.split()[0] for line in linked.splitlines() if "not found" in line]
        if unresolved:
            raise KcatUnavailable(
                f"kcat fetched with {', '.join(wanted)} still misses {', '.join(unresolved)} (ldd {binary})"
            )
        shutil.rmtree(root, ignore_errors=True)
        tree.replace(root)  # published whole: the next run finds a kcat that links
        shutil.rmtree(staging, ignore_errors=True)

    # -- running ------------------------------------------------------------------------------------------------------

    def run(self, *arguments: str, stdin: bytes | None = None, timeout: float = RUN_TIMEOUT_S) -> str:
        """Run kcat to its end and return its stdout.

        Raises:
            AssertionError: It exited with another status than 0, or ran over ``timeout``.
        """
        binary, environment = self.resolve()
        proc = subprocess.run(
            [binary, *arguments], input=stdin, capture_output=True, env=environment, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            stdout, stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
            raise AssertionError(
                f"kcat {' '.join(arguments)} exited {proc.returncode}\n--- stdout\n{stdout[-2000:]}\n"
                f"--- stderr\n{stderr[-4000:]}"
            )
        return proc.stdout.decode()

    def records(self, *arguments: str, timeout: float = RUN_TIMEOUT_S) -> list[dict[str, Any]]:
        """The messages ``kcat -C -J ...`` prints, one JSON object each (``-J`` is added)."""
        return [json.loads(line) for line in self.run("-J", *arguments, timeout=timeout).splitlines() if line.strip()]

    def start(self, work_dir: Path, name: str, *arguments: str, stdin: bytes | None = None) -> ClientProcess:
        """kcat as a process of its own (a group member that runs until stopped), its stdout JSON lines (``-J``),
        unbuffered (``-u``: into a pipe, stdio would hold the last messages back until kcat exits)."""
        binary, environment = self.resolve()
        command = [binary, "-J", "-u", *arguments]
        return ClientProcess(command, work_dir / f"{name}.stderr", env=environment, stdin=stdin)


def headers_of(message: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The headers of a message kcat printed with ``-J``: a flat list, name then value, as pairs."""
    flat = message.get("headers") or []
    return list(zip(flat[0::2], flat[1::2], strict=True))


#: kcat, resolved at first use.
KCAT = Kcat()
