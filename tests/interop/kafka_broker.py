"""A real Apache Kafka broker on loopback: one KRaft node, broker and controller in one process, on free ports,
in a directory of the caller's, for the interop tests and the benchmarks (nothing here needs pytest)::

    with KafkaBroker.started(work_dir) as broker:   # storage formatted, started, serving
        broker.tool(TOPIC_COMMAND, "--create", "--topic", "t", "--partitions", "3")
        with broker.stopped():                        # a clean shutdown; started again on exit
            ...                                       # its log directory, broker.log_dir, is the caller's now
    # stopped on exit whatever happened: its process group is killed if it does not stop in time

The jars come from Maven Central through ``kafka-broker/pom.xml`` (``kafka_tools.BROKER``, cached in ``~/.m2``).
The broker logs to ``<work_dir>/broker.log``, whose tail every failure quotes.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.interop.kafka_tools import BROKER, JVM_OPTIONS
from tests.s3_server import free_port

KAFKA_MAIN = "kafka.Kafka"  # what kafka-server-start.sh runs
STORAGE_TOOL = "kafka.tools.StorageTool"  # kafka-storage.sh
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"  # kafka-topics.sh
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"  # kafka-console-consumer.sh
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"  # kafka-console-producer.sh
#: What KafkaRaftServer logs once its broker and controller serve.
READY_LINE = b"Kafka Server started"
#: The file a broker leaves in its log directory when it shut down cleanly (LogLoader then skips recovery).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
NODE_ID = 1
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
TOOL_TIMEOUT_S = 120.0
LOG_TAIL_LINES = 40
# The broker logs at INFO (its readiness line is one); a tool's log stays at WARN on stderr. Short-lived tools
# start faster without the optimising compiler.
BROKER_JVM_OPTIONS = (
    *(option for option in JVM_OPTIONS if not option.startswith("-Dorg.slf4j.simpleLogger.defaultLogLevel=")),
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
    "-Xms256m",
    "-Xmx512m",
)
TOOL_JVM_OPTIONS = (*JVM_OPTIONS, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")


class BrokerError(RuntimeError):
    """A broker that did not start or stop, or a Kafka tool that failed; the message quotes the broker's log."""


class KafkaBroker:
    """One single-node KRaft broker; ``started`` is the way to have one.

    Args:
        work_dir: Its directory (made if missing): ``server.properties``, ``broker.log`` and the log directory.
        classpath: Kafka's jars (``kafka_tools.BROKER.resolve()``).
        properties: Settings added to (or replacing) the broker's ``server.properties``.

    Attributes:
        bootstrap_server: ``127.0.0.1:<port>``, for clients and tools.
        log_dir: Its ``log.dirs`` (which holds the KRaft metadata log too).
    """

    def __init__(self, work_dir: Path, classpath: str, properties: Mapping[str, str] | None = None) -> None:
        self.work_dir = work_dir
        self.classpath = classpath
        self.log_dir = work_dir / "logs"
        self.log_file = work_dir / "broker.log"
        self.config_file = work_dir / "server.properties"
        port, controller_port = free_port(), free_port()
        self.bootstrap_server = f"127.0.0.1:{port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            # One node: every internal topic has one replica, and few partitions keep their creation quick.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **(properties or {}),
        }
        work_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"KafkaBroker({self.bootstrap_server}, {self.work_dir})"

    @classmethod
    @contextmanager
    def started(
        cls, work_dir: Path, classpath: str | None = None, properties: Mapping[str, str] | None = None
    ) -> Iterator[KafkaBroker]:
        """A new broker, its storage formatted, serving until the block ends (then stopped, or killed).

        Raises:
            BrokerError: Kafka's jars could not be resolved, or the broker did not start.
        """
        if classpath is None:
            classpath = BROKER.resolve()
            if classpath is None:
                raise BrokerError(f"Kafka's jars could not be resolved: {BROKER.reason}")
        broker = cls(work_dir, classpath, properties)
        broker.format()
        try:
            broker.start()
            yield broker
        finally:
            broker.stop()

    def format(self) -> None:
        """Format the log directory for a new cluster (``kafka-storage.sh format``), as every KRaft node must be."""
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # One id in 64 starts with "-": as a separate argument the tool would read it as an option.
        self._java(STORAGE_TOOL, "format", "--config", str(self.config_file), f"--cluster-id={cluster_id}")

    def start(self) -> None:
        """Start it and wait until it serves.

        Raises:
            BrokerError: It exited, or did not serve within ``START_TIMEOUT_S`` (it is killed then).
        """
        if self._process is not None:
            raise BrokerError(f"{self} is already running")
        start = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.log_file, "ab") as log:  # the child keeps its own descriptor
            self._process = subprocess.Popen(
                ["java", *BROKER_JVM_OPTIONS, "-cp", self.classpath, KAFKA_MAIN, str(self.config_file)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # its own process group, killed whole
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._logged_since(start, READY_LINE):
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise BrokerError(f"the broker exited with status {code} while starting\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self._kill()
                raise BrokerError(f"the broker did not start within {START_TIMEOUT_S:.0f} s\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> bool:
        """Stop it as ``kafka-server-stop.sh`` does (SIGTERM: a clean shutdown), killing its process group if it
        has not stopped within ``STOP_TIMEOUT_S``; nothing when it is not running. Returns whether it shut down
        cleanly."""
        process = self._process
        if process is None:
            return True
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # it had exited already
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            return False
        self._process = None
        return (self.log_dir / CLEAN_SHUTDOWN_FILE).is_file()

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """The broker shut down cleanly for the block (its log directory is the caller's), started again after.

        Raises:
            BrokerError: It did not shut down cleanly, or did not start again.
        """
        if not self.stop():
            raise BrokerError(f"the broker did not shut down cleanly\n{self.log_tail()}")
        yield
        self.start()

    def _kill(self) -> None:
        process = self._process
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        self._process = None

    def _logged_since(self, position: int, text: bytes) -> bool:
        with open(self.log_file, "rb") as log:
            log.seek(position)
            return text in log.read()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the broker's log, for a failure's message."""
        if not self.log_file.exists():
            return f"--- {self.log_file}: none"
        tail = self.log_file.read_bytes().decode("utf-8", errors="replace").splitlines()[-lines:]
        return f"--- last {len(tail)} lines of {self.log_file}\n" + "\n".join(tail)

    def logged(self, pattern: str) -> list[str]:
        """The lines of the broker's log that match a regular expression."""
        text = self.log_file.read_bytes().decode("utf-8", errors="replace")
        return [line for line in text.splitlines() if re.search(pattern, line)]

    # -- Kafka's tools --------------------------------------------------------------------------------------------

    def tool(self, main_class: str, *args: str, stdin: str | None = None) -> str:
        """Run a Kafka tool against this broker (``--bootstrap-server`` added) and return its stdout.

        Raises:
            BrokerError: It exited with another status than 0, or ran longer than ``TOOL_TIMEOUT_S``.
        """
        return self._java(main_class, "--bootstrap-server", self.bootstrap_server, *args, stdin=stdin)

    def _java(self, main_class: str, *args: str, stdin: str | None = None) -> str:
        command = ["java", *TOOL_JVM_OPTIONS, "-cp", self.classpath, main_class, *args]
        try:
            proc = subprocess.run(
                command, input=stdin, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as error:
            raise BrokerError(
                f"{main_class} {' '.join(args)} ran over {TOOL_TIMEOUT_S:.0f} s\n{self.log_tail()}"
            ) from error
        if proc.returncode != 0:
            raise BrokerError(
                f"{main_class} {' '.join(args)} exited with status {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
                f"\n--- stderr\n{proc.stderr[-4000:]}\n{self.log_tail()}"
            )
        return proc.stdout

    def topic_id(self, topic: str) -> str:
        """A topic's id, as ``kafka-topics.sh --describe`` prints it (``TopicId: ...``)."""
        described = self.tool(TOPIC_COMMAND, "--describe", "--topic", topic)
        found = re.search(r"\bTopicId: (\S+)", described)
        if found is None:
            raise BrokerError(f"kafka-topics.sh --describe --topic {topic} printed no TopicId:\n{described}")
        return found.group(1)
