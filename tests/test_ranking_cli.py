"""``bae init --task ranking``, ``next``, ``record``, ``status``, ``report`` on a ranking session."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_activeeval import ranking
from bayes_activeeval.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args):
    res = run(*args)
    assert res.exit_code == 0, (res.output, res.stderr)
    return res


@pytest.fixture
def pool_csv(tmp_path):
    data = ranking.make_ranking_pool(120, min_docs=5, max_docs=15, changed=0.5, rng=4)
    path = tmp_path / "runs.csv"
    data.frame.drop(columns=["grade"]).to_csv(path, index=False)
    truth = {
        (q, d): int(g)
        for q, d, g in zip(data.frame.qid, data.frame.doc, data.frame.grade, strict=True)
    }
    return path, truth


def _grade(batch_csv, truth, out):
    b = pd.read_csv(batch_csv, dtype={"qid": str, "doc": str})
    b["grade"] = [truth[(q, d)] for q, d in zip(b.qid, b.doc, strict=True)]
    b[["qid", "doc", "grade"]].to_csv(out, index=False)
    return out


@pytest.mark.parametrize("rankers", [("a",), ("a", "b")])
def test_ranking_session_end_to_end(pool_csv, tmp_path, rankers):
    path, truth = pool_csv
    sess = tmp_path / "r.bae"
    models = [x for m in rankers for x in ("--model", m)]
    res = ok("init", path, "--task", "ranking", "--measure", "err", "--session", sess,
             "--rank", "a=rank_a", "--rank", "b=rank_b", "--relevance-cols", "p0,p1,p2,p3,p4",
             "--cost-col", "cost", "--budget", 12, *models)  # fmt: skip
    assert "queries drawn" in res.output
    res = ok("status", sess)
    assert "no estimate yet" in res.output
    for k in range(100):
        batch = tmp_path / f"b{k}.csv"
        res = run("next", sess, "--n", 3, "--out", batch)
        if res.exit_code != 0:
            assert "every query of the budget is graded" in res.stderr
            break
        frame = pd.read_csv(batch, dtype={"qid": str, "doc": str})
        # a batch lists every document of each query
        for q, grp in frame.groupby("qid"):
            assert len(grp) == sum(1 for (qq, _) in truth if qq == q)
        graded = _grade(batch, truth, tmp_path / f"g{k}.csv")
        ok("record", sess, graded)
        ok("record", sess, graded)  # idempotent
    st = json.loads(ok("status", sess, "--json").output)
    assert st["queries_graded"] == st["queries_in_sample"] > 0
    assert st["cost_graded"] <= 12
    out = tmp_path / "report.txt"
    res = ok("report", sess, "--out", out)
    assert "interval" in res.output and out.exists()
    # the session's estimate equals the Python API on the same draws
    from bayes_activeeval.ranking_session import RankingSession

    with RankingSession.open(str(sess)) as rs:
        r = rs.result()
    value = r.value if len(rankers) == 1 else r.estimate
    assert np.isfinite(value)
    assert st["estimate"] == pytest.approx(value)


def test_ranking_session_errors_are_one_line(pool_csv, tmp_path):
    path, _ = pool_csv
    sess = tmp_path / "r.bae"
    res = run("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
              "--rank", "a=nope", "--budget", 5)  # fmt: skip
    assert res.exit_code == 2 and "ranks['a']='nope' is not a column" in res.stderr
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--budget", 5)  # fmt: skip
    batch = tmp_path / "b.csv"
    ok("next", sess, "--n", 2, "--out", batch)
    b = pd.read_csv(batch, dtype={"qid": str, "doc": str})
    b["grade"] = 7
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "bad.csv", index=False)
    res = run("record", sess, tmp_path / "bad.csv")
    assert res.exit_code == 2 and "grades are whole numbers 0..4" in res.stderr
