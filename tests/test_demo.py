import time

import pandas as pd
from click.testing import CliRunner

from bayes_activeeval.cli import main
from bayes_activeeval.demo import format_demo, run_demo


def test_run_demo_names_the_measures_it_knows():
    import pytest

    with pytest.raises(ValueError, match="'f1' or 'accuracy'"):
        run_demo(measures=("precision",))
    with pytest.raises(ValueError, match=r"\['precision'\]"):  # a string is one measure
        run_demo(measures="precision")


def test_run_demo_covers_and_beats_passive():
    res = run_demo(budgets=(250, 1000), seed=0)
    t = res.table
    assert set(t.design) == {"optimal", "passive"} and set(t.budget) == {250, 1000}
    # every interval of the optimal design (fixed seed) contains the true value
    optimal = t[t.design == "optimal"]
    truth = optimal.measure.map(res.truth)
    assert ((optimal.low <= truth) & (truth <= optimal.high)).all() and optimal.covers.all()
    opt = optimal[optimal.measure == "f1"]
    assert (opt.high - opt.low).max() < 0.3
    # the optimal design labels far more positives than passive at the same budget
    assert (
        opt.positives_labeled.values
        > 5 * t[(t.design == "passive") & (t.measure == "f1")].positives_labeled.values
    ).all()
    text = format_demo(res)
    assert "True values: f1 =" in text and "optimal" in text


def test_bae_demo_command_is_fast():
    start = time.perf_counter()
    out = CliRunner().invoke(main, ["demo"])
    assert out.exit_code == 0, out.output
    assert "True values" in out.output and "1000" in out.output
    assert time.perf_counter() - start < 60


def test_bae_demo_bad_budget():
    out = CliRunner().invoke(main, ["demo", "--budgets", "abc"])
    assert out.exit_code == 2
    assert "error: --budgets must be positive integers" in out.output


def test_bae_demo_export(tmp_path):
    out = CliRunner().invoke(main, ["demo", "--export", str(tmp_path / "pool.csv")])
    assert out.exit_code == 0, out.output
    assert "(100,000 items)" in out.output
    pool = pd.read_csv(tmp_path / "pool.csv")
    truth = pd.read_csv(tmp_path / "pool-truth.csv")
    assert list(pool.columns) == ["id", "pred", "p", "score", "text"] and len(pool) == 100_000
    assert list(truth.columns) == ["id", "label"] and (truth.id == pool.id).all()
