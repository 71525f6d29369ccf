"""Run Apache Kafka's own ``DumpLogSegments`` tool (what ``kafka-dump-log.sh`` runs) from tests, and resolve
Kafka's jars for the broker the interop tests start (``kafka_broker.py``).

Why: the strongest evidence that our segment files are byte-compatible with Kafka is Kafka itself
reading them. The jars come from Maven Central through ``kafka-tools/pom.xml`` and ``kafka-broker/pom.xml``
(cached in ``~/.m2``); only the resolved classpath strings are cached, under ``.cache/kafka-tools/``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
POM = Path(__file__).resolve().parent / "kafka-tools" / "pom.xml"
CACHE_DIR = REPO_ROOT / ".cache" / "kafka-tools"
MAIN_CLASS = "kafka.tools.DumpLogSegments"

#: First resolution downloads ~45 jars from Maven Central; later ones hit ~/.m2 and take seconds.
RESOLVE_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 120.0

# Pin the JVM's stdout/stderr encoding (JDK 17 otherwise follows the locale) so the tool's output
# is UTF-8 whatever the CI locale is; keep SLF4J (slf4j-simple, see the pom) on stderr.
JVM_OPTIONS = (
    "-Dfile.encoding=UTF-8",
    "-Dsun.stdout.encoding=UTF-8",
    "-Dsun.stderr.encoding=UTF-8",
    "-Dstdout.encoding=UTF-8",
    "-Dstderr.encoding=UTF-8",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)

#: The type of the ``kafka_dump_log`` fixture (i.e. of :func:`run_dump_log_segments`).
DumpLogSegments = Callable[..., subprocess.CompletedProcess[str]]


def missing_tools() -> str | None:
    """Say which of ``java``/``mvn`` is not on PATH (the only acceptable reason to skip), else None."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found on PATH" if missing else None


class MavenClasspath:
    """The runtime classpath of a pom's dependencies: resolved by Maven once per process (a failure is not retried:
    one slow ``mvn`` per session), and cached on disk keyed by the pom's bytes, so only the first run on a machine
    pays for Maven.

    Args:
        pom: The pom naming the dependencies (nothing is built from it).
    """

    def __init__(self, pom: Path) -> None:
        self.pom = pom
        self.reason: str | None = None  # why the last resolve() returned None
        self._classpath: str | None = None
        self._attempted = False

    def resolve(self) -> str | None:
        """The classpath, or None (see ``reason``)."""
        if self._attempted:
            return self._classpath
        self._attempted = True
        self.reason = missing_tools()
        if self.reason is not None:
            return None
        cache = self._cache_file()
        if cache.is_file():
            cached = cache.read_text(encoding="utf-8").strip()
            if _usable(cached):
                self._classpath = cached
                return self._classpath
        self._classpath = self._resolve(cache)
        return self._classpath

    def _cache_file(self) -> Path:
        """Cache key = the pom's bytes: bumping the Kafka version must never reuse an old classpath."""
        digest = hashlib.sha256(self.pom.read_bytes()).hexdigest()[:16]
        return CACHE_DIR / f"classpath-{digest}.txt"

    def _resolve(self, target: Path) -> str | None:
        """Ask Maven for the runtime classpath; sets ``reason`` and returns None on failure."""
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")  # atomic publish: safe with pytest-xdist
        cmd = [
            "mvn", "-B", "-q", "-Dstyle.color=never", "-f", str(self.pom),
            "dependency:build-classpath", "-Dmdep.includeScope=runtime", f"-Dmdep.outputFile={partial}",
        ]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.reason = f"{' '.join(cmd)} failed: {exc}"
            return None
        classpath = partial.read_text(encoding="utf-8").strip() if partial.is_file() else ""
        if proc.returncode != 0 or not _usable(classpath):
            partial.unlink(missing_ok=True)
            self.reason = (
                f"{' '.join(cmd)} exited {proc.returncode} without a usable classpath\n"
                f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
            )
            return None
        partial.replace(target)
        return classpath


def _usable(classpath: str) -> bool:
    """A cached classpath is stale if ~/.m2 was purged since it was written."""
    entries = classpath.split(os.pathsep)
    return bool(classpath) and all(Path(entry).is_file() for entry in entries)


#: DumpLogSegments' classpath (``kafka-tools/pom.xml``).
TOOLS = MavenClasspath(POM)
#: A broker's and Kafka's command-line tools' classpath (``kafka-broker/pom.xml``, see ``kafka_broker.py``).
BROKER = MavenClasspath(Path(__file__).resolve().parent / "kafka-broker" / "pom.xml")


def kafka_classpath() -> str | None:
    """The Kafka tools' runtime classpath, or None (see :func:`unavailable_reason`)."""
    return TOOLS.resolve()


def unavailable_reason() -> str | None:
    """Why the last :func:`kafka_classpath` call returned None (None if it succeeded or never ran)."""
    return TOOLS.reason


def run_dump_log_segments(
    files: Sequence[str | os.PathLike[str]], *extra_args: str, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run ``DumpLogSegments --files f1,f2 <extra_args>`` and return the completed process.

    The exit code is not checked (callers assert on it). stdout/stderr are decoded as UTF-8
    WITHOUT newline translation (unlike ``text=True``), so a ``\\r`` inside a printed payload
    survives and outputs can be compared byte-for-byte with our own ``dump-log``.

    Note the tool opens sibling files (``.timeindex`` opens ``.index`` and ``.log``) and creates
    a missing sibling ``.index``: point it at copies, never at read-only fixtures.
    """
    names = [os.fspath(f) for f in files]
    if not names or any("," in name for name in names):
        raise ValueError(f"--files takes a non-empty comma-separated list; got {names!r}")
    classpath = kafka_classpath()
    if classpath is None:
        raise RuntimeError(f"Kafka tools unavailable: {unavailable_reason()}")
    cmd = ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, "--files", ",".join(names), *extra_args]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    return subprocess.CompletedProcess(
        args=cmd,
        returncode=proc.returncode,
        stdout=proc.stdout.decode("utf-8"),
        stderr=proc.stderr.decode("utf-8", errors="replace"),
    )
