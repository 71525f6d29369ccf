"""``pysparklog serve`` as a process of its own, as an operator runs it, so that a test can kill it with SIGKILL
(no shutdown, no cleanup: a crash) while another endpoint serves the same log directory::

    with EndpointProcess.started(log_dir, work_dir, "a") as a, EndpointProcess.started(log_dir, work_dir, "b") as b:
        bootstrap = f"{a.bootstrap},{b.bootstrap}"
        ...
        a.kill()
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.interop.client_process import ClientProcess

START_TIMEOUT_S = 60.0
#: What ``pysparklog serve`` prints once it listens: ``serving <dir> on <host>:<port> as <host>:<port>``, and the
#: security protocol in parentheses where the command says it.
LISTENING = re.compile(r"^serving .* as (?P<bootstrap>\S+:\d+)(?: \(\S+\))?$")
REPO_ROOT = Path(__file__).resolve().parents[2]


def _advertised(lines: list[str]) -> str | None:
    """The address the endpoint's listening line names, once it printed it."""
    for line in lines:
        found = LISTENING.match(line)
        if found is not None:
            return found.group("bootstrap")
    return None


class EndpointProcess:
    """One ``pysparklog serve --log-dir D --listen 127.0.0.1:0``; ``bootstrap`` is what it prints it serves as.

    Args:
        log_dir: The log directory served (a path or URL).
        work_dir: Where its log goes, as ``endpoint-<name>.log``.
        name: Tells the endpoints of a test apart.
        env: Variables added to its environment (an object store's settings).
        options: More of ``serve``'s options, as on its command line.
    """

    def __init__(
        self, log_dir: str, work_dir: Path, name: str, env: Mapping[str, str] | None = None, options: Sequence[str] = ()
    ) -> None:
        self.name = name
        environment = {**os.environ, **(env or {})}
        environment["PYTHONPATH"] = os.pathsep.join(
            part for part in (str(REPO_ROOT), environment.get("PYTHONPATH", "")) if part
        )
        command = [sys.executable, "-m", "pysparklog.cli.main", "serve", "--log-dir", log_dir]
        command += ["--listen", "127.0.0.1:0", *options]
        self.process = ClientProcess(command, work_dir / f"endpoint-{name}.log", parse=str, env=environment)
        self.bootstrap: str = self.process.wait_until(_advertised, START_TIMEOUT_S, "listening")
        self.port = int(self.bootstrap.rpartition(":")[2])

    def __repr__(self) -> str:
        return f"EndpointProcess({self.name}, {self.bootstrap})"

    @classmethod
    @contextmanager
    def started(
        cls, log_dir: str, work_dir: Path, name: str, env: Mapping[str, str] | None = None, options: Sequence[str] = ()
    ) -> Iterator[EndpointProcess]:
        """An endpoint serving until the block ends, killed then whatever happened."""
        endpoint = cls(log_dir, work_dir, name, env, options)
        try:
            yield endpoint
        finally:
            endpoint.process.close()

    def kill(self) -> None:
        """SIGKILL: the endpoint dies mid-request, its connections cut, nothing flushed or released."""
        self.process.kill()

    @property
    def alive(self) -> bool:
        return self.process.process.poll() is None

    def log(self) -> str:
        """What it logged (stderr), for a failure's message."""
        return self.process.stderr_tail()
