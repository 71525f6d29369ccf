"""Run Apache Kafka's own ``DumpLogSegments`` tool (what ``kafka-dump-log.sh`` runs) from tests.

Why: the strongest evidence that our segment files are byte-compatible with Kafka is Kafka itself
reading them. The tool's jars come from Maven Central through ``kafka-tools/pom.xml`` (cached in
``~/.m2``); only the resolved classpath string is cached, under ``.cache/kafka-tools/``.
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

_classpath: str | None = None
_reason: str | None = None
_attempted = False  # a failed resolution is not retried within the process (one slow mvn per session)


def missing_tools() -> str | None:
    """Say which of ``java``/``mvn`` is not on PATH (the only acceptable reason to skip), else None."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found on PATH" if missing else None


def unavailable_reason() -> str | None:
    """Why the last :func:`kafka_classpath` call returned None (None if it succeeded or never ran)."""
    return _reason


def _cache_file() -> Path:
    """Cache key = the pom's bytes: bumping the Kafka version must never reuse an old classpath."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return CACHE_DIR / f"classpath-{digest}.txt"


def _usable(classpath: str) -> bool:
    """A cached classpath is stale if ~/.m2 was purged since it was written."""
    entries = classpath.split(os.pathsep)
    return bool(classpath) and all(Path(entry).is_file() for entry in entries)


def _resolve(target: Path) -> str | None:
    """Ask Maven for the runtime classpath; sets ``_reason`` and returns None on failure."""
    global _reason
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")  # atomic publish: safe with pytest-xdist
    cmd = [
        "mvn", "-B", "-q", "-Dstyle.color=never", "-f", str(POM),
        "dependency:build-classpath", "-Dmdep.includeScope=runtime", f"-Dmdep.outputFile={partial}",
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _reason = f"{' '.join(cmd)} failed: {exc}"
        return None
    classpath = partial.read_text(encoding="utf-8").strip() if partial.is_file() else ""
    if proc.returncode != 0 or not _usable(classpath):
        partial.unlink(missing_ok=True)
        _reason = (
            f"{' '.join(cmd)} exited {proc.returncode} without a usable classpath\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
        return None
    partial.replace(target)
    return classpath


def kafka_classpath() -> str | None:
    """The Kafka tools' runtime classpath, or None (see :func:`unavailable_reason`).

    Resolved once per process and cached on disk keyed by the pom, so only the first run on a
    machine pays for Maven.
    """
    global _classpath, _reason, _attempted
    if _attempted:
        return _classpath
    _attempted = True
    _reason = missing_tools()
    if _reason is not None:
        return None
    cache = _cache_file()
    if cache.is_file():
        cached = cache.read_text(encoding="utf-8").strip()
        if _usable(cached):
            _classpath = cached
            return _classpath
    _classpath = _resolve(cache)
    return _classpath


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
