"""The stand-ins for Databricks' ``dbutils.widgets`` and ``display()`` that the notebooks use elsewhere."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from examples.notebook_shims import LocalDbutils, LocalDisplay, environment_variable

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def widgets(monkeypatch: pytest.MonkeyPatch) -> LocalDbutils:
    """A notebook's ``dbutils``, with no widget variable of the tests' names in the environment."""
    for name in ("base_dir", "orders", "mode"):
        monkeypatch.delenv(environment_variable(name), raising=False)
    return LocalDbutils()


def test_the_variable_of_a_widget_is_its_name_in_upper_case() -> None:
    assert environment_variable("base_dir") == "PYSPARKLOG_WIDGET_BASE_DIR"


def test_a_text_widget_is_its_default_unless_the_environment_sets_it(
    widgets: LocalDbutils, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_WIDGET_BASE_DIR", "s3://bucket/prefix")
    widgets.widgets.text("base_dir", "", "Base directory")
    widgets.widgets.text("orders", "12", "Orders")
    assert widgets.widgets.get("base_dir") == "s3://bucket/prefix"
    assert widgets.widgets.get("orders") == "12"


def test_an_empty_variable_sets_an_empty_value(widgets: LocalDbutils, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARKLOG_WIDGET_ORDERS", "")
    widgets.widgets.text("orders", "12")
    assert widgets.widgets.get("orders") == ""


def test_widgets_take_databricks_keyword_names(widgets: LocalDbutils) -> None:
    widgets.widgets.text(name="orders", defaultValue="12", label="Orders")
    widgets.widgets.dropdown(name="mode", defaultValue="b", choices=["a", "b"], label="Mode")
    assert (widgets.widgets.get("orders"), widgets.widgets.get("mode")) == ("12", "b")


def test_a_dropdown_takes_a_choice_from_the_environment(widgets: LocalDbutils, monkeypatch: pytest.MonkeyPatch) -> None:
    widgets.widgets.dropdown("mode", "true", ["true", "false"], "Mode")
    assert widgets.widgets.get("mode") == "true"
    monkeypatch.setenv("PYSPARKLOG_WIDGET_MODE", "false")
    widgets.widgets.dropdown("mode", "true", ["true", "false"], "Mode")
    assert widgets.widgets.get("mode") == "false"


def test_a_dropdown_refuses_a_value_that_is_not_a_choice(
    widgets: LocalDbutils, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARKLOG_WIDGET_MODE", "yes")
    with pytest.raises(ValueError, match=r"PYSPARKLOG_WIDGET_MODE='yes' is not a choice of widget 'mode'.*'true'"):
        widgets.widgets.dropdown("mode", "true", ["true", "false"])
    with pytest.raises(ValueError, match="no widget named 'mode'"):
        widgets.widgets.get("mode")


def test_a_dropdown_refuses_a_default_that_is_not_a_choice(widgets: LocalDbutils) -> None:
    with pytest.raises(ValueError, match=r"widget 'mode': the default 'maybe' is not one of \['true', 'false'\]"):
        widgets.widgets.dropdown("mode", "maybe", ["true", "false"])


def test_an_undefined_widget_is_an_error_naming_the_defined_ones(widgets: LocalDbutils) -> None:
    widgets.widgets.text("orders", "12")
    with pytest.raises(ValueError, match=r"no widget named 'order' is defined; defined: \['orders'\]"):
        widgets.widgets.get("order")


def test_widgets_belong_to_one_notebook(widgets: LocalDbutils) -> None:
    widgets.widgets.text("orders", "12")
    with pytest.raises(ValueError, match="no widget named 'orders'"):
        LocalDbutils().widgets.get("orders")


def test_display_prints_a_pandas_data_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    LocalDisplay(tmp_path)(pd.DataFrame({"topic": ["orders"] * 30, "offset": range(30)}))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["topic", "offset"]
    assert lines[1].split() == ["0", "orders", "0"]
    assert len(lines) == 1 + 20, "the first 20 rows"


def test_display_saves_each_figure_as_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    display = LocalDisplay(tmp_path)
    for _ in range(2):
        figure = Figure()
        figure.add_subplot().plot([0, 1], [1, 0])
        display(figure)
    saved = sorted(tmp_path.iterdir())
    assert [path.name for path in saved] == ["figure-1.png", "figure-2.png"]
    assert all(path.read_bytes().startswith(PNG_SIGNATURE) for path in saved)
    assert capsys.readouterr().out.splitlines() == [f"figure saved as {path}" for path in saved]


def test_display_prints_anything_else(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    LocalDisplay(tmp_path)({"orders": 12})
    assert capsys.readouterr().out == "{'orders': 12}\n"
    assert not any(tmp_path.iterdir())
