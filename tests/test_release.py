"""``release.dist``'s checks of the interpreters it is given, before anything is built: the builds themselves run
in ``make test-dist`` (tests/test_packaging.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from release.dist import DistError, Interpreter, build, interpreter, main


def fake_python(tmp_path: Path, version: str) -> str:
    """An executable that answers the version question as Python ``version`` would."""
    script = tmp_path / f"python{version}"
    script.write_text(f"#!/bin/sh\necho {version}\n")
    script.chmod(0o755)
    return str(script)


def test_the_running_python_is_a_supported_interpreter_with_its_wheel_tag() -> None:
    found = interpreter(sys.executable)
    assert found == Interpreter(sys.executable, f"{sys.version_info.major}.{sys.version_info.minor}")
    assert found.tag == f"cp{sys.version_info.major}{sys.version_info.minor}"


def test_a_python_a_release_does_not_support_is_refused_with_the_accepted_versions(tmp_path: Path) -> None:
    command = fake_python(tmp_path, "3.9")
    with pytest.raises(DistError, match=rf"^--python {command} is Python 3.9; accepted: 3.10, 3.11, 3.12, 3.13$"):
        interpreter(command)


def test_a_command_that_does_not_run_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "python3.12")
    with pytest.raises(DistError, match=rf"^--python {missing}: cannot run it \(No such file or directory\)$"):
        interpreter(missing)


def test_two_interpreters_of_one_version_are_refused_before_the_output_is_touched(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    out.mkdir()
    (out / "kept.whl").write_bytes(b"")
    twice = [Interpreter(fake_python(tmp_path, "3.12"), "3.12")] * 2
    with pytest.raises(DistError, match="^one interpreter per Python version, got 3.12, 3.12$"):
        build(twice, out)
    assert (out / "kept.whl").exists()


def test_the_command_line_says_a_refused_interpreter_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = fake_python(tmp_path, "3.14")
    assert main(["--python", command, "--out", str(tmp_path / "dist")]) == 1
    assert (
        capsys.readouterr().err
        == f"release.dist: --python {command} is Python 3.14; accepted: 3.10, 3.11, 3.12, 3.13\n"
    )
    assert not (tmp_path / "dist").exists()
