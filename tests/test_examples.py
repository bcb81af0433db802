"""Every script in examples/ runs (quick mode: ``BAE_EXAMPLE_FAST=1``) and prints its answer."""

from __future__ import annotations

import runpy
import warnings
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXPECT = {
    "static_vs_adaptive_f1.py": "true F1 =",
    "compare_sklearn_classifiers.py": "better:",
    "benchmark_future_rules.py": "Wilson interval",
    "bayesian_report.py": "report written to",
    "compare_models.py": "power 0.8",
}


def test_every_example_is_tested():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_runs(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BAE_EXAMPLE_FAST", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    out = capsys.readouterr().out
    assert EXPECT[name] in out
    if name == "bayesian_report.py":
        html = (tmp_path / "bayesian_report.html").read_text()
        assert html.count("data:image/png;base64,") == 3 and "ess_bulk" in html
