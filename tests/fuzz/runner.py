"""Running mutants in worker processes, so that a hang fails its mutant instead of hanging the run.

Each worker (``python -m tests.fuzz.worker``) exercises the mutants whose indexes it reads on stdin, one
at a time, and answers each with a JSON line. A worker that does not answer within the timeout is
killed with its process group and replaced; its mutant is a failure ("hang"), its cause the innermost
pysparklog frame of the stack the worker dumped (``faulthandler``) shortly before.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.mutations import KINDS
from tests.fuzz.oracle import Failure, MutantReport, Outcome
from tests.fuzz.source import build_source

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SEED = 20260101
#: Seconds a mutant may take; normal ones take well under one.
DEFAULT_TIMEOUT = 10.0
STARTUP_TIMEOUT = 300.0  # importing pysparklog and loading its compiled kernels, on a busy machine
_FRAME = re.compile(r'File "(?P<file>[^"]*/pysparklog/[^"]*)", line (?P<line>\d+) in (?P<function>\S+)')


def scratch_root() -> str:
    """A new directory for the source and the mutants' copies: in memory when the machine has ``/dev/shm``."""
    shm = "/dev/shm"
    return tempfile.mkdtemp(prefix="pysparklog-fuzz-", dir=shm if os.access(shm, os.W_OK) else None)


@dataclass(slots=True)
class _Worker:
    process: subprocess.Popen[bytes]
    stderr_path: str
    buffer: bytes = b""
    index: int | None = None
    deadline: float = 0.0


def indexes_of(count: int, kinds: Iterable[str] | None = None) -> list[int]:
    """The mutant indexes of a run of ``count`` mutants, only of ``kinds`` when given."""
    wanted = set(KINDS if kinds is None else kinds)
    unknown = wanted - set(KINDS)
    if unknown:
        raise ValueError(f"unknown file kinds {sorted(unknown)}; accepted: {', '.join(KINDS)}")
    return [i for i in range(count) if KINDS[i % len(KINDS)] in wanted]


class FuzzSource:
    """The source directory, built once in a scratch directory, and mutants of it run on workers.

    Use it as a context manager: the scratch directory is removed on exit.
    """

    def __init__(self) -> None:
        self.root = scratch_root()
        self.source = os.path.join(self.root, "source")
        self.truth_path = os.path.join(self.root, "truth.pickle")
        try:
            self.truth = build_source(self.source)
            with open(self.truth_path, "wb") as f:
                pickle.dump(self.truth, f)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def __enter__(self) -> FuzzSource:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def run(
        self,
        seed: int,
        indexes: Sequence[int],
        *,
        workers: int = 2,
        timeout: float = DEFAULT_TIMEOUT,
        progress: bool = False,
    ) -> list[MutantReport]:
        """Mutants ``indexes`` of run ``seed``, on ``workers`` processes; a mutant taking longer than
        ``timeout`` seconds is a hang."""
        return _Pool(self.source, self.truth_path, seed, self.root, timeout, progress).run(indexes, workers)


class _Pool:
    def __init__(self, source: str, truth_path: str, seed: int, root: str, timeout: float, progress: bool) -> None:
        self.source = source
        self.truth_path = truth_path
        self.seed = seed
        self.root = root
        self.timeout = timeout
        self.progress = progress
        self.selector = selectors.DefaultSelector()
        self.started = 0

    def run(self, indexes: Sequence[int], workers: int) -> list[MutantReport]:
        pending = deque(indexes)
        reports: list[MutantReport] = []
        active = [self._start() for _ in range(min(workers, len(pending)))]
        for worker in active:
            self._wait_ready(worker)
            self._assign(worker, pending)
        try:
            while any(w.index is not None for w in active):
                now = time.monotonic()
                wait = min(w.deadline for w in active if w.index is not None) - now
                for key, _ in self.selector.select(max(wait, 0)):
                    worker = key.data
                    for line in self._lines(worker):
                        reports.append(MutantReport.from_json(json.loads(line)))
                        self._report_progress(reports, len(indexes))
                        worker.index = None
                        self._assign(worker, pending)
                    if worker.process.poll() is not None and worker.index is not None:
                        reports.append(self._lost(worker, "the worker died"))
                        active[active.index(worker)] = self._replace(worker, pending)
                now = time.monotonic()
                for worker in list(active):
                    if worker.index is not None and now > worker.deadline:
                        reports.append(self._lost(worker, f"no answer within {self.timeout:.0f} s"))
                        active[active.index(worker)] = self._replace(worker, pending)
        finally:
            for worker in active:
                self._stop(worker)
        return sorted(reports, key=lambda r: r.index)

    def _start(self) -> _Worker:
        self.started += 1
        stderr_path = os.path.join(self.root, f"worker-{self.started}.stderr")
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.fuzz.worker",
                    self.source,
                    self.truth_path,
                    str(self.seed),
                    os.path.join(self.root, f"work-{self.started}"),
                    str(max(self.timeout - 3, 1)),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=REPO,
                start_new_session=True,  # its own process group: killed whole, with anything it started
            )
        worker = _Worker(process, stderr_path)
        assert process.stdout is not None
        os.set_blocking(process.stdout.fileno(), False)
        self.selector.register(process.stdout, selectors.EVENT_READ, worker)
        return worker

    def _wait_ready(self, worker: _Worker) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.selector.select(1.0) and b"\n" in self._read(worker):
                worker.buffer = worker.buffer.split(b"\n", 1)[1]
                return
            if worker.process.poll() is not None:
                break
        raise RuntimeError(f"a fuzz worker did not start: {self._stderr(worker)[-3000:]}")

    def _read(self, worker: _Worker) -> bytes:
        assert worker.process.stdout is not None
        try:
            chunk = os.read(worker.process.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            chunk = b""
        worker.buffer += chunk
        return worker.buffer

    def _lines(self, worker: _Worker) -> list[str]:
        self._read(worker)
        *lines, worker.buffer = worker.buffer.split(b"\n")
        return [line.decode() for line in lines if line.strip()]

    def _assign(self, worker: _Worker, pending: deque[int]) -> None:
        if not pending:
            return
        worker.index = pending.popleft()
        worker.deadline = time.monotonic() + self.timeout
        assert worker.process.stdin is not None
        worker.process.stdin.write(f"{worker.index}\n".encode())
        worker.process.stdin.flush()

    def _replace(self, worker: _Worker, pending: deque[int]) -> _Worker:
        self._stop(worker)
        worker.index = None
        if not pending:
            return worker
        replacement = self._start()
        self._wait_ready(replacement)
        self._assign(replacement, pending)
        return replacement

    def _stop(self, worker: _Worker) -> None:
        try:
            self.selector.unregister(worker.process.stdout)  # type: ignore[arg-type]
        except (KeyError, ValueError):
            pass
        if worker.process.poll() is None:
            try:
                os.killpg(worker.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        worker.process.wait()
        for stream in (worker.process.stdin, worker.process.stdout):
            if stream is not None:
                stream.close()

    def _stderr(self, worker: _Worker) -> str:
        with open(worker.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _lost(self, worker: _Worker, why: str) -> MutantReport:
        """The report of the mutant a worker was on when it hung or died."""
        assert worker.index is not None
        text = self._stderr(worker)
        marker = f"mutant {worker.index}: "
        start = text.rfind(marker)
        description = text[start + len(marker) :].split("\n", 1)[0] if start >= 0 else f"mutant {worker.index}"
        stack = main_thread_stack(text[start:] if start >= 0 else text)
        frames = list(_FRAME.finditer(stack))
        where = "outside pysparklog"
        if frames:  # faulthandler prints the most recent call first
            innermost = frames[0]
            where = f"{innermost['file'][innermost['file'].rindex('/pysparklog/') + 1 :]} in {innermost['function']}"
        cause = f"hang in {where}" if "no answer" in why else f"worker died in {where}"
        # "mutant (seed=S, index=I): <kind>: <damage>", as the worker announced it; foreign copies have no
        # kind of their own index
        kind = description.split(": ", 2)[1] if start >= 0 else KINDS[worker.index % len(KINDS)]
        output = "\n".join(text.splitlines()[-5:])
        detail = f"{why}; the main thread's stack:\n{stack}\nthe worker's last output:\n{output}"
        return MutantReport(self.seed, worker.index, kind, description, Outcome.FAILURE, [Failure(cause, detail)])

    def _report_progress(self, reports: list[MutantReport], total: int) -> None:
        if self.progress and (len(reports) % 50 == 0 or len(reports) == total):
            failed = sum(r.outcome is Outcome.FAILURE for r in reports)
            print(f"{len(reports)}/{total} mutants, {failed} failures", file=sys.stderr, flush=True)


def main_thread_stack(text: str) -> str:
    """The main thread's stack from a ``faulthandler`` dump in ``text`` (the thread running the worker),
    else the last lines of ``text``."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text)
    for block in blocks:
        if "tests/fuzz/worker.py" in block and re.match(r"(?:Current thread|Thread) 0x", block):
            return "\n".join(line for line in block.splitlines() if line.startswith(("Thread", "Current", "  File")))
    return "\n".join(text.splitlines()[-20:])


# -- summaries ----------------------------------------------------------------------------------


def outcome_table(reports: Sequence[MutantReport]) -> str:
    """Counts per file kind and outcome, as a Markdown table."""
    outcomes = list(Outcome)
    counts = Counter((r.kind, r.outcome) for r in reports)
    lines = [
        "| File kind | " + " | ".join(o.value for o in outcomes) + " | mutants |",
        "| --- | " + " | ".join("---:" for _ in outcomes) + " | ---: |",
    ]
    for kind in KINDS:
        total = sum(counts[(kind, o)] for o in outcomes)
        if total:
            lines.append(f"| `{kind}` | " + " | ".join(str(counts[(kind, o)]) for o in outcomes) + f" | {total} |")
    lines.append(
        "| all | " + " | ".join(str(sum(counts[(k, o)] for k in KINDS)) for o in outcomes) + f" | {len(reports)} |"
    )
    return "\n".join(lines)


def failure_summary(reports: Sequence[MutantReport], examples: int = 1) -> str:
    """The failures grouped by cause, most frequent first, each with example mutants to replay."""
    by_cause: dict[str, list[tuple[MutantReport, Failure]]] = {}
    for report in reports:
        for cause in dict.fromkeys(f.cause for f in report.failures):
            failure = next(f for f in report.failures if f.cause == cause)
            by_cause.setdefault(cause, []).append((report, failure))
    lines = []
    for cause, found in sorted(by_cause.items(), key=lambda item: -len(item[1])):
        kinds = Counter(r.kind for r, _ in found)
        lines.append(f"{len(found)} mutants: {cause}  [{', '.join(f'{k} {n}' for k, n in kinds.most_common())}]")
        for report, failure in found[:examples]:
            lines.append(f"    {report.description}")
            lines.append("        " + failure.detail.replace("\n", "\n        ")[:1500])
    return "\n".join(lines)
