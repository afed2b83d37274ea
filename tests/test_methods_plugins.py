"""Plug in your own memory system: a package that declares an entry point in the ``filegram_ray.methods`` group
is registered by name with no fork. The example package in tests/fixtures/example_method_plugin is installed
(pip, into a temporary folder on sys.path) and evaluated by name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from evaluate_fixtures import make_run

from filegram_ray.config import load_config
from filegram_ray.methods import load_plugins, make_method, method_names
from filegram_ray.methods.base import METHODS

PLUGIN = Path(__file__).parent / "fixtures" / "example_method_plugin"


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(PLUGIN)], check=True, timeout=300)
    monkeypatch.syspath_prepend(str(target))
    yield
    METHODS.pop("recent_events", None)
    sys.modules.pop("filegram_recent_method", None)


def test_installed_plugin_is_evaluated_by_name(installed_plugin, tmp_path):
    from filegram_ray.evaluate.stage import run_evaluate

    assert "recent_events" in load_plugins()
    assert "recent_events" in method_names()
    assert make_method("recent_events", n=2).display == "Recent events"
    root = tmp_path / "run"
    make_run(root)
    cfg = load_config(overrides={"run_dir": str(root), "evaluate": {
        "methods": ["recent_events"], "executor": "serial", "plots": False, "sample_per_sub_task": None,
        "validity": False}})
    info = run_evaluate(cfg)
    assert info["methods"] == ["recent_events"] and info["n_error_rows"] == 0
    report = (root / "results" / "report.md").read_text()
    assert "| Recent events |" in report


def test_a_plugin_cannot_replace_a_builtin(monkeypatch):
    from importlib import metadata

    class EP:
        name, value, group = "mma", "evil:Evil", "filegram_ray.methods"

        def load(self):  # pragma: no cover - must not be called
            raise AssertionError("built-in replaced")

    method_names()
    monkeypatch.setattr(metadata, "entry_points", lambda group=None: [EP()])
    assert load_plugins() == []
    assert METHODS["mma"].__module__ == "filegram_ray.methods.mma"


def test_every_builtin_method_names_the_mechanism_that_runs():
    """The report lists, under its table, which mechanism ran for each method (README): every built-in method says
    it, with and without an LLM backbone — Eager Summ. and FileGramOS said nothing, so the report left them out."""
    from filegram_ray.methods import make_method, method_names

    for name in method_names():
        m = make_method(name)
        if not type(m).__module__.startswith("filegram_ray."):
            continue
        assert m.mode(False) and m.mode(True), name
    eager = make_method("eager_summarization")
    assert "LLM" in eager.mode(True) and "no LLM backbone" in eager.mode(False)
    assert "channels: procedural, episodic" in make_method("filegramos_no_semantic").mode(False)
