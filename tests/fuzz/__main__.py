"""The long fuzz run: ``python -m tests.fuzz --mutants 5000`` prints the outcomes per file kind and the
failures grouped by cause; ``--index I`` replays one mutant of ``--seed`` in this process."""

from __future__ import annotations

import argparse
import os
import sys
import time

from tests.fuzz.mutations import KINDS, catalogue, draw, foreign_indexes, sizes_of
from tests.fuzz.oracle import exercise
from tests.fuzz.runner import (
    DEFAULT_SEED,
    DEFAULT_TIMEOUT,
    FuzzSource,
    failure_summary,
    indexes_of,
    outcome_table,
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--mutants", type=int, default=5000, help="mutants in the run (default 5000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"the run's seed (default {DEFAULT_SEED})")
    parser.add_argument("--kinds", help=f"comma-separated file kinds, of: {', '.join(KINDS)}")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before a mutant is a hang")
    parser.add_argument(
        "--index", type=int, help="replay this mutant (negative: a foreign copy) in this process and print its report"
    )
    parser.add_argument("--examples", type=int, default=2, help="example mutants shown per failure cause")
    args = parser.parse_args()
    if args.index is not None:
        replay(args.seed, args.index)
        return
    kinds = args.kinds.split(",") if args.kinds else None
    started = time.monotonic()
    with FuzzSource() as source:
        files = catalogue(source.source)
        reports = source.run(
            args.seed,
            indexes_of(args.mutants, kinds) + foreign_indexes(files, sizes_of(source.source, files), kinds),
            workers=args.workers,
            timeout=args.timeout,
            progress=True,
        )
    command = f"python -m tests.fuzz --mutants {args.mutants} --seed {args.seed}"
    print(f"{command}: {len(reports)} mutants in {time.monotonic() - started:.0f} s\n")
    print(outcome_table(reports))
    print()
    print(failure_summary(reports, args.examples) or "no failures")


def replay(seed: int, index: int) -> None:
    """Mutant ``index`` of run ``seed``, exercised in this process (a hang hangs here: interrupt it)."""
    with FuzzSource() as source:
        files = catalogue(source.source)
        sizes = sizes_of(source.source, files)
        mutation = draw(seed, index, files, sizes, source.truth)
        print(mutation.describe(), file=sys.stderr, flush=True)
        report = exercise(source.truth, source.source, mutation, os.path.join(source.root, "work"))
    print(f"{report.outcome.value}")
    for error in report.typed_errors:
        print(f"  typed: {error}")
    for failure in report.failures:
        print(f"  {failure.cause}: {failure.detail}")


if __name__ == "__main__":
    main()
