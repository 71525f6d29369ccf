"""A client in a process of its own (a Java client, kcat, an endpoint), its stdout read on a thread as it comes,
so that a test can wait for what the client said so far, stop it cleanly (SIGTERM) or kill it (SIGKILL).

Whatever the client writes on stderr goes to a file whose tail every failure quotes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
STDERR_TAIL_CHARS = 4000
STOP_TIMEOUT_S = 60.0


class ClientProcessError(AssertionError):
    """A client process that failed, or did not say what was waited for in time; quotes its stderr."""


class ClientProcess:
    """One process, its stdout lines collected as they come.

    Args:
        command: The command line.
        stderr_file: Where its stderr goes.
        parse: How a line of stdout becomes what ``lines`` holds (``json.loads`` for the JSON-lines clients).
        env: Its environment (the caller's when None).
        stdin: Bytes written to its stdin, which is then closed; its stdin is empty when None.
    """

    def __init__(
        self,
        command: Sequence[str],
        stderr_file: Path,
        parse: Callable[[str], Any] = json.loads,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> None:
        self.command = list(command)
        self.stderr_file = stderr_file
        self._parse = parse
        self.lines: list[Any] = []
        self._changed = threading.Condition()
        stderr_file.parent.mkdir(parents=True, exist_ok=True)
        with open(stderr_file, "ab") as stderr:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=None if env is None else dict(env),
                start_new_session=True,  # its own process group: a JVM's or a shell's children go with it
            )
        if stdin is not None:
            assert self.process.stdin is not None
            self.process.stdin.write(stdin)
            self.process.stdin.close()
        self._reader = threading.Thread(target=self._read, name=f"stdout of {Path(self.command[0]).name}", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        return f"ClientProcess(pid {self.process.pid}: {' '.join(self.command)[:200]})"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not text.strip():
                continue
            try:
                parsed = self._parse(text)
            except ValueError:
                parsed = {"unparsed": text}  # kept, so a failure shows what the client printed
            with self._changed:
                self.lines.append(parsed)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    # -- waiting ---------------------------------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[list[Any]], T | None], timeout: float, what: str) -> T:
        """Wait until ``condition(lines so far)`` is truthy and return it.

        Raises:
            ClientProcessError: The process ended, or ``timeout`` passed, before it was.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = condition(list(self.lines))
                if result:
                    return result
                if not self._reader.is_alive():
                    raise self.error(f"exited with status {self.process.poll()} before {what}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.error(f"did not reach {what} within {timeout:.0f} s")
                self._changed.wait(min(remaining, 0.5))

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The JSON lines so far whose ``event`` is ``kind``."""
        with self._changed:
            return [line for line in self.lines if isinstance(line, dict) and line.get("event") == kind]

    def wait(self, timeout: float = STOP_TIMEOUT_S, expect_status: int | None = 0) -> int:
        """Wait for it to exit (killed if it does not in time) and for its stdout to be read; returns its status.

        Raises:
            ClientProcessError: It ran over ``timeout``, or exited with another status than ``expect_status``.
        """
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise self.error(f"ran over {timeout:.0f} s") from None
        self._reader.join(timeout)
        if expect_status is not None and status != expect_status:
            raise self.error(f"exited with status {status}, expected {expect_status}")
        return status

    # -- ending ----------------------------------------------------------------------------------------------------

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (a Java consumer leaves its group; an endpoint stops) and wait; killed if it lingers."""
        self._signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise self.error(f"did not stop within {timeout:.0f} s of SIGTERM") from None
        self._reader.join(timeout)
        return status

    def kill(self) -> None:
        """SIGKILL to its whole process group: no shutdown, no cleanup, as a crash."""
        self._signal(signal.SIGKILL)
        self.process.wait()
        self._reader.join(STOP_TIMEOUT_S)

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass  # it had exited already

    def close(self) -> None:
        """Killed if still running: for a test's cleanup, whatever happened."""
        if self.process.poll() is None:
            self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stderr_tail(self) -> str:
        text = self.stderr_file.read_bytes().decode("utf-8", errors="replace") if self.stderr_file.exists() else ""
        return text[-STDERR_TAIL_CHARS:]

    def error(self, problem: str) -> ClientProcessError:
        printed = "\n".join(json.dumps(line) if not isinstance(line, str) else line for line in self.lines[-20:])
        return ClientProcessError(
            f"{self!r} {problem}\n--- last lines of its stdout\n{printed}\n--- its stderr ({self.stderr_file})\n"
            f"{self.stderr_tail()}"
        )
