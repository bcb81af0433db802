"""Pool files, the posterior and the report, second review (session 31): text columns shown to
labelers are read as written ("007" stays "007"); a text prediction's surrounding spaces do not
make a class of their own; ``tune`` and ``deterministic`` of the cell posterior, and the
report's ``level``, are checked by name."""

from __future__ import annotations

import numpy as np
import pytest
from cli_helpers import init_static, labeled_pool_csv, ok

from bayes_activeeval.io import PoolSpec, read_pool
from bayes_activeeval.posterior import contingency_posterior


def test_text_columns_are_read_as_written(tmp_path):
    f = tmp_path / "txt.csv"
    f.write_text("id,pred,p,zip,n\na1,1,0.9,007,7\na2,0,0.2,0123,\n")
    pf = read_pool(f, PoolSpec(pred="pred", prob="p", id_col="id", text_cols=("zip", "n")))
    assert pf.text["zip"].tolist() == ["007", "0123"]
    assert pf.text["n"].iloc[0] == "7"


def test_bae_next_shows_text_columns_as_written(tmp_path):
    path, _ = labeled_pool_csv(tmp_path / "pool.csv", seed=3, prefix="i")
    import pandas as pd

    frame = pd.read_csv(path)
    frame["zip"] = [f"{i:05d}" for i in range(len(frame))]
    frame.to_csv(path, index=False)
    sess = tmp_path / "s.bae"
    init_static(path, sess, "--text-col", "zip")
    out = tmp_path / "b.csv"
    ok("next", sess, "--n", 5, "--out", out, "--text-col", "zip")
    b = pd.read_csv(out, dtype=str)
    assert all(len(z) == 5 and z.isdigit() for z in b["zip"])
    assert b["zip"].tolist() == [f"{int(i[1:]):05d}" for i in b["id"]]


def test_a_predictions_spaces_do_not_make_a_class(tmp_path):
    f = tmp_path / "pred.csv"
    f.write_text("id,pred\n1,yes \n2,no\n3, yes\n")
    pf = read_pool(f, PoolSpec(pred="pred", id_col="id"))
    assert pf.pool.classes.tolist() == ["no", "yes"]


@pytest.mark.parametrize(
    ("kw", "err", "match"),
    [
        ({"tune": -5}, ValueError, "tune must be >= 0"),
        ({"tune": "x"}, TypeError, "tune must be an integer"),
        ({"deterministic": "no"}, TypeError, "deterministic must be True or False"),
    ],
)
def test_cell_posterior_arguments_are_checked(kw, err, match):
    from bayes_activeeval.datasets import make_classification_pool

    sp = make_classification_pool(500, 0.2, rng=0)
    idx = np.arange(100)
    with pytest.raises(err, match=match):
        contingency_posterior(
            sp.pool, "f1", idx, sp.labels[idx], draws=50, chains=1, rng=0, method="conjugate", **kw
        )


def test_report_level_is_checked(tmp_path):
    from bayes_activeeval.report import render_html
    from bayes_activeeval.session import Session

    path, _ = labeled_pool_csv(tmp_path / "pool.csv", seed=3, prefix="i")
    sess = tmp_path / "s.bae"
    init_static(path, sess)
    with Session.open(sess, readonly=True) as s:
        with pytest.raises(TypeError, match="level must be a number in"):
            render_html(s, "0.9")
        with pytest.raises(ValueError, match="level"):
            render_html(s, 1.5)
