"""Damaged log directories: a seeded fuzz test of every kind of file a log directory holds.

A log directory built with every codec, transactions, compaction and committed offsets
(``tests/fuzz/source.py``) is damaged one file at a time (``tests/fuzz/mutations.py``: bit flips,
overwrites, truncations, garbage, deletion, another partition's copy, swaps, zeroed ranges), and every
mutant must give right answers or typed errors, before and after recovery (``tests/fuzz/oracle.py``),
never a hang (each runs in a worker process with a timeout), an untyped exception or records that were
not written. Beside the seeded mutants, every run has the foreign copies: each segment and state record
replaced by the same-named file of another partition of its topic. ``docs/guarantees.md`` reports a
long run.

- ``PYSPARKLOG_FUZZ_MUTANTS`` (default 256, about a minute on two cores) and ``PYSPARKLOG_FUZZ_SEED``
  change the run; ``PYSPARKLOG_FUZZ_KINDS=txnindex,snapshot`` or ``-k`` on the test ids
  (``-k 'damaged_files and txnindex'``) run the mutants of some file kinds only, the same ones a full
  run has.
- A failure names its mutants; ``python -m tests.fuzz --seed S --index I`` replays one.
- The long run: ``python -m tests.fuzz --mutants 5000``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fuzz.mutations import KINDS, catalogue, foreign_indexes, sizes_of
from tests.fuzz.oracle import MutantReport, Outcome, exercise
from tests.fuzz.runner import DEFAULT_SEED, DEFAULT_TIMEOUT, FuzzSource, failure_summary, indexes_of, outcome_table

SEED = int(os.environ.get("PYSPARKLOG_FUZZ_SEED", DEFAULT_SEED))
MUTANTS = int(os.environ.get("PYSPARKLOG_FUZZ_MUTANTS", 256))
WORKERS = int(os.environ.get("PYSPARKLOG_FUZZ_WORKERS", 2))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def source() -> Iterator[FuzzSource]:
    with FuzzSource() as built:
        yield built


def _selected_kinds(request: pytest.FixtureRequest) -> list[str]:
    """The kinds of the ``test_damaged_files`` cases this session runs (``-k`` may have left out some),
    narrowed by ``PYSPARKLOG_FUZZ_KINDS``."""
    selected = [
        str(item.callspec.params["kind"])
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_damaged_files"
    ]
    wanted = os.environ.get("PYSPARKLOG_FUZZ_KINDS")
    return [k for k in selected if wanted is None or k in wanted.split(",")]


@pytest.fixture(scope="module")
def reports(source: FuzzSource, request: pytest.FixtureRequest) -> dict[str, list[MutantReport]]:
    """The mutants of every selected kind, run once for all the cases (the workers share them out)."""
    kinds = _selected_kinds(request)
    files = catalogue(source.source)
    indexes = indexes_of(MUTANTS, kinds) + foreign_indexes(files, sizes_of(source.source, files), kinds)
    found = source.run(SEED, indexes, workers=WORKERS, timeout=DEFAULT_TIMEOUT)
    print(f"\nseed {SEED}, {len(found)} mutants\n{outcome_table(found)}")
    by_kind: dict[str, list[MutantReport]] = {kind: [] for kind in kinds}
    for report in found:
        by_kind[report.kind].append(report)
    return by_kind


def test_the_undamaged_directory_passes_every_check(
    source: FuzzSource, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The oracle against the directory as built: any failure or typed error here is the oracle's, or
    a defect that needs no damage."""
    report = exercise(source.truth, source.source, None, str(tmp_path_factory.mktemp("undamaged") / "logs"))
    assert (report.outcome, report.failures, report.typed_errors) == (Outcome.CLEAN, [], [])


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_files(kind: str, reports: dict[str, list[MutantReport]]) -> None:
    if kind not in reports:
        pytest.skip(f"PYSPARKLOG_FUZZ_KINDS leaves out {kind}")
    found = reports[kind]
    assert found, f"no mutant of kind {kind} among the first {MUTANTS}"
    failed = [r for r in found if r.outcome is Outcome.FAILURE]
    if failed:  # the summary, not the reports' repr, which runs to megabytes
        pytest.fail(
            f"{len(failed)} of {len(found)} mutants of {kind} failed (replay one with "
            f"`python -m tests.fuzz --seed {SEED} --index I`):\n{failure_summary(failed, examples=3)}",
            pytrace=False,
        )
