"""Apache Kafka's Java clients (kafka-clients 4.2) as processes for the interop tests: ``java/KafkaClients.java``
compiled once per source (javac at first use, cached under ``.cache/interop-java/<hash of the source and the
classpath>/``) against the broker's classpath (``kafka-broker/pom.xml``, the jars in ``~/.m2``: no second
download), each client run as its own JVM printing JSON lines (see the comment atop ``KafkaClients.java``)::

    producer = JAVA_CLIENTS.start(work_dir, "produce", bootstrap=b, topic="t", count=100)
    producer.wait()
    acks = producer.events("ack")
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.interop.client_process import ClientProcess
from tests.interop.kafka_broker import TOOL_JVM_OPTIONS
from tests.interop.kafka_tools import BROKER, REPO_ROOT

SOURCE = Path(__file__).resolve().parent / "java" / "KafkaClients.java"
MAIN_CLASS = "KafkaClients"
CLASSES_DIR = REPO_ROOT / ".cache" / "interop-java"
COMPILE_TIMEOUT_S = 300.0
#: The CreateTime of record ``i`` is ``BASE_TIMESTAMP + i`` (``KafkaClients.BASE_TIMESTAMP``).
BASE_TIMESTAMP = 1_700_000_000_000
#: Clients run longer than a tool: the JIT's full tiers, a heap that holds a consumer's fetches.
CLIENT_JVM_OPTIONS = tuple(option for option in TOOL_JVM_OPTIONS if option != "-XX:TieredStopAtLevel=1")
MODES = ("produce", "produce-transactional", "consume")


class JavaClientsUnavailable(RuntimeError):
    """Kafka's jars could not be resolved, or the harness did not compile; the message says why."""


class JavaClients:
    """The compiled harness and the classpath it runs with; ``start`` runs one client."""

    def __init__(self) -> None:
        self._classpath: str | None = None

    def classpath(self) -> str:
        """The classpath that runs ``KafkaClients``: its compiled class, then Kafka's jars.

        Raises:
            JavaClientsUnavailable: Kafka's jars could not be resolved, or javac failed.
        """
        if self._classpath is None:
            jars = BROKER.resolve()
            if jars is None:
                raise JavaClientsUnavailable(f"Kafka's jars could not be resolved: {BROKER.reason}")
            self._classpath = f"{self._compiled(jars)}{os.pathsep}{jars}"
        return self._classpath

    @staticmethod
    def _compiled(jars: str) -> Path:
        """The directory of the compiled class, compiled now unless a run compiled this source already."""
        digest = hashlib.sha256(SOURCE.read_bytes() + jars.encode()).hexdigest()[:16]
        target = CLASSES_DIR / digest
        if (target / f"{MAIN_CLASS}.class").is_file():
            return target
        javac = shutil.which("javac")
        if javac is None:
            raise JavaClientsUnavailable("javac is not on PATH (a JDK 17 or later compiles the Java harness)")
        partial = CLASSES_DIR / f"{digest}.{os.getpid()}.part"  # published whole: another process may compile too
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        proc = subprocess.run(
            [javac, "-encoding", "UTF-8", "-d", str(partial), "-cp", jars, str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise JavaClientsUnavailable(f"javac {SOURCE} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        try:
            partial.replace(target)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)  # another process published it first
        return target

    def start(self, work_dir: Path, mode: str, name: str | None = None, **options: object) -> ClientProcess:
        """One client: ``mode`` with ``--<option> value`` for each keyword (``_`` in a name becomes ``-``).

        Args:
            work_dir: Where its stderr goes, as ``<name>.stderr``.
            mode: ``produce``, ``produce-transactional`` or ``consume``.
            name: Its stderr file's name; the mode when None.
        """
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        arguments = [item for key, value in options.items() for item in (f"--{key.replace('_', '-')}", str(value))]
        command = ["java", *CLIENT_JVM_OPTIONS, "-cp", self.classpath(), MAIN_CLASS, mode, *arguments]
        return ClientProcess(command, work_dir / f"{name or mode}.stderr")


#: The harness, compiled at first use.
JAVA_CLIENTS = JavaClients()
