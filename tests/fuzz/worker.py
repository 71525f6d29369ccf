"""A fuzz worker: ``python -m tests.fuzz.worker SOURCE TRUTH SEED SCRATCH DUMP_AFTER``.

Reads mutant indexes on stdin, one per line, and answers each with its report as a JSON line on
stdout (after a first ``ready`` line). Before each mutant it names it on stderr and arms
``faulthandler`` to dump every thread's stack after ``DUMP_AFTER`` seconds, so that the stack of a
hang is there when the parent kills the worker.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import sys

from tests.fuzz.mutations import catalogue, draw, sizes_of
from tests.fuzz.oracle import exercise
from tests.fuzz.source import Truth


def main(argv: list[str]) -> None:
    source, truth_path, seed_text, scratch, dump_after = argv
    with open(truth_path, "rb") as f:
        truth: Truth = pickle.load(f)
    files = catalogue(source)
    sizes = sizes_of(source, files)
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not garble the answers
    exercise(truth, source, None, scratch)  # loads the compiled kernels before the first timed mutant
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:
        index = int(line)
        mutation = draw(int(seed_text), index, files, sizes, truth)
        print(f"mutant {index}: {mutation.describe()}", file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(float(dump_after), file=sys.stderr)
        report = exercise(truth, source, mutation, scratch)
        faulthandler.cancel_dump_traceback_later()
        answers.write(json.dumps(report.to_json()) + "\n")
        answers.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
