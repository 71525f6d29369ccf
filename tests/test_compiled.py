"""``pysparklog.compiled``: the kernels come from the package's extension, compiled ahead of time, and from numba's
JIT where it is missing or stale; a call the extension cannot take goes to the JIT, never to the wrong code.

That both implementations give the same results is what the kernel tests check, run once with each
(the ``kernel_implementation`` fixture)."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from pysparklog import LogDirectory, compiled
from pysparklog.compiled import IMPLEMENTATION_VARIABLE, JitFallbackWarning, bind, kernel
from pysparklog.errors import InvalidConfigError
from pysparklog.storage import offset_map
from pysparklog.storage.records import kernels

REPO = Path(__file__).resolve().parents[1]


@kernel("i8[::1]", cache=False)
def _doubled_sum(values: np.ndarray) -> int:
    """A kernel of this module, which the extension does not hold."""
    total = 0
    for v in values:
        total += 2 * v
    return total


@pytest.mark.parametrize("module", compiled.KERNEL_MODULES)
def test_the_kernel_modules_use_the_built_extension(module: str) -> None:
    # The project's set-up (make setup: pip install -e .) builds the extension beside the sources.
    kernels_module = importlib.import_module(module)
    assert kernels_module.KERNELS == compiled.AOT, compiled.jit_reasons.get(module)


def test_a_fresh_process_reads_with_the_compiled_kernels_and_without_numba(tmp_path: Path) -> None:
    logs = LogDirectory(str(tmp_path / "logs"))
    table = pa.table({"key": [b"k%d" % i for i in range(100)], "value": [b"v%d" % i for i in range(100)]})
    logs.partition("t", 0).append_arrow(table)
    child = textwrap.dedent(
        """
        import json, sys
        from pysparklog import LogDirectory
        from pysparklog.storage.records import kernels

        batches = list(LogDirectory(sys.argv[1]).partition("t", 0).read_arrow(0, include_headers=True))
        values = [v.decode() for b in batches for v in b.column("value").to_pylist()]
        print(json.dumps({"kernels": kernels.KERNELS, "numba": "numba" in sys.modules, "values": values}))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != IMPLEMENTATION_VARIABLE}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "empty-numba-cache")
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "logs")], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"kernels": "aot", "numba": False, "values": [f"v{i}" for i in range(100)]}


def test_jit_when_asked(tmp_path: Path) -> None:
    child = "from pysparklog.storage.records import kernels; print(kernels.KERNELS)"
    env = dict(os.environ, **{IMPLEMENTATION_VARIABLE: "jit"})
    done = subprocess.run([sys.executable, "-c", child], env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "jit"


def _namespace() -> dict[str, Any]:
    """This module's globals as ``bind`` finds them at the end of a kernel module."""
    return dict(globals())


def test_a_module_the_extension_was_not_built_from_gets_the_jit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMPLEMENTATION_VARIABLE, raising=False)
    namespace = _namespace()
    assert bind(namespace) == compiled.JIT
    assert "holds no kernels of tests.test_compiled" in compiled.jit_reasons[__name__]
    assert namespace["_doubled_sum"](np.arange(4, dtype=np.int64)) == 12


def test_an_extension_built_from_other_sources_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMPLEMENTATION_VARIABLE, raising=False)
    monkeypatch.setattr(compiled, "jit_reasons", {})
    namespace = dict(vars(offset_map), EMPTY=-2)  # a constant its kernels read, changed since the build
    assert bind(namespace) == compiled.JIT
    assert "was built from other sources of pysparklog.storage.offset_map" in compiled.jit_reasons[offset_map.__name__]


def test_asking_for_the_extension_where_it_does_not_fit_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMPLEMENTATION_VARIABLE, "aot")
    with pytest.raises(InvalidConfigError, match="KERNELS=aot, but the extension .* holds no kernels of tests.test_c"):
        bind(_namespace())


def test_an_unknown_choice_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMPLEMENTATION_VARIABLE, "llvm")
    with pytest.raises(InvalidConfigError, match="PYSPARKLOG_KERNELS='llvm' is invalid; accepted: aot, jit, unset"):
        bind(_namespace())


def test_arguments_no_compiled_variant_takes_go_to_the_jit() -> None:
    entry = bytes.fromhex("00000000000000000000000e") + bytes(14)  # one entry of the minimum size (magic 0)
    contiguous = np.frombuffer(entry * 2, np.uint8)
    strided = np.repeat(contiguous, 2)[::2]  # the same bytes, not contiguous: the extension's scan takes u1[::1]
    expected_table = np.empty((4, kernels.ENTRY_FIELDS), np.int64)
    expected = kernels.scan_entries(contiguous, 0, len(contiguous), expected_table)
    table = np.empty((4, kernels.ENTRY_FIELDS), np.int64)
    with pytest.warns(JitFallbackWarning, match=r"scan_entries has no compiled variant .*uint8\[1-D strided\]"):
        assert kernels.scan_entries(strided, 0, len(strided), table) == expected == (2, 52, kernels.STOP_END)
    assert (table[:2] == expected_table[:2]).all()


def test_a_compiled_kernel_pickles_by_name() -> None:
    # As a numba dispatcher does, so that closures shipped to Spark's workers may refer to kernels.
    assert pickle.loads(pickle.dumps(kernels.decode_v2_records)) is kernels.decode_v2_records


#: Run in a child whose numba cannot be imported, as in an installed wheel without the ``jit`` extra.
_WITHOUT_NUMBA = """
import sys
sys.modules["numba"] = None  # import numba raises ImportError
"""


def _run_without_numba(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in os.environ.items() if k != IMPLEMENTATION_VARIABLE} | env
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_NUMBA + textwrap.dedent(code)],
        env=child_env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def test_without_numba_the_extension_reads_and_a_call_it_cannot_take_names_the_jit_extra() -> None:
    done = _run_without_numba(
        """
        import numpy as np
        from pysparklog.compiled import KernelsUnavailableError
        from pysparklog.storage.records import kernels

        entry = np.frombuffer(bytes.fromhex("00000000000000000000000e") + bytes(14), np.uint8)
        table = np.empty((4, kernels.ENTRY_FIELDS), np.int64)
        print(kernels.KERNELS, kernels.scan_entries(entry, 0, len(entry), table))
        try:
            kernels.scan_entries(np.repeat(entry, 2)[::2], 0, len(entry), table)
        except KernelsUnavailableError as error:
            print(error)
        """
    )
    assert done.returncode == 0, done.stderr
    compiled_call, refused = done.stdout.splitlines()
    assert compiled_call == f"aot (1, 26, {kernels.STOP_END})"
    assert refused.startswith(
        "pysparklog.storage.records.kernels needs numba's JIT (pysparklog.storage.records.kernels"
    )
    assert "scan_entries has no compiled variant for arguments (uint8[1-D strided], int, int, int64[2-D C])" in refused
    assert refused.endswith(
        "and numba is not installed: install the pysparklog wheel built for this Python "
        f"(cp{sys.version_info.major}{sys.version_info.minor}) and platform, or the JIT with "
        "pip install 'pysparklog[jit]'"
    )


def test_without_numba_a_module_that_needs_the_jit_fails_to_import_naming_the_extra() -> None:
    done = _run_without_numba("from pysparklog.storage.records import kernels", **{IMPLEMENTATION_VARIABLE: "jit"})
    assert done.returncode == 1
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line.startswith("pysparklog.compiled.KernelsUnavailableError: pysparklog.")
    assert "needs numba's JIT (PYSPARKLOG_KERNELS=jit), and numba is not installed" in last_line
    assert "pip install 'pysparklog[jit]'" in last_line
