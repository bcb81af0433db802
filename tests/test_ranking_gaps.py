"""Ranking gaps: ``bae init --task ranking --max-grade``, no ``± 0`` from a single graded
query, and independent random streams for a ranking session's proposal and draws."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from cli_helpers import ok, run

from bayes_activeeval import ranking
from bayes_activeeval.proposals import Draws
from bayes_activeeval.ranking_session import RankingSession

READ = {"query": "qid", "item": "doc", "ranks": {"a": "rank_a", "b": "rank_b"}}


@pytest.fixture
def runs(tmp_path):
    """A ranking pool file of 40 queries of 2-5 documents, and the true grades (0..4)."""
    data = ranking.make_ranking_pool(40, min_docs=2, max_docs=5, changed=0.5, rng=4)
    path = tmp_path / "runs.csv"
    data.frame.drop(columns=["grade"]).to_csv(path, index=False)
    truth = {
        (q, d): int(g)
        for q, d, g in zip(data.frame.qid, data.frame.doc, data.frame.grade, strict=True)
    }
    return path, truth, data


def _batch(sess, tmp_path, name="b.csv", n=1):
    out = tmp_path / name
    ok("next", sess, "--n", n, "--out", out, "--overwrite")
    return pd.read_csv(out, dtype={"qid": str, "doc": str})


# -- (a) --max-grade ------------------------------------------------------------------------------
def test_init_max_grade_sets_the_grade_scale(runs, tmp_path):
    path, _, _ = runs
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--budget", 5, "--max-grade", 2)  # fmt: skip
    with RankingSession.open(str(sess), readonly=True) as rs:
        assert rs.pool.max_grade == 2 and rs.pool.relevance.shape[2] == 3
        assert rs.meta["read"]["max_grade"] == 2
    b = _batch(sess, tmp_path)
    b["grade"] = 3  # above the scale
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "bad.csv", index=False)
    res = run("record", sess, tmp_path / "bad.csv")
    assert res.exit_code == 2 and "0..2" in res.stderr
    b["grade"] = 2
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "good.csv", index=False)
    ok("record", sess, tmp_path / "good.csv")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-grade", "0"], "--max-grade must be at least 1"),
        (["--max-grade", "-3"], "got -3"),
        (["--max-grade", "3", "--relevance-cols", "p0,p1,p2,p3,p4"],
         "--max-grade 3 needs 4 --relevance-cols"),
        (["--max-grade", "two"], "'--max-grade'"),
    ],
)  # fmt: skip
def test_init_max_grade_is_checked(runs, tmp_path, extra, message):
    path, _, _ = runs
    sess = tmp_path / "r.bae"
    res = run("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
              "--rank", "a=rank_a", "--budget", 5, *extra)  # fmt: skip
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert not sess.exists()


def test_max_grade_needs_a_ranking_task(runs, tmp_path):
    path, _, _ = runs
    res = run("init", path, "--pred-col", "rank_a", "--measure", "accuracy", "--session",
              tmp_path / "s.bae", "--max-grade", 2)  # fmt: skip
    assert res.exit_code == 2 and "--max-grade 2 is for ranking pools" in res.stderr


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", float("nan")])
def test_ranking_pool_refuses_a_bad_max_grade(runs, bad):
    frame = runs[2].frame
    with pytest.raises(ValueError, match="max_grade must be a whole number >= 1"):
        ranking.RankingPool.from_frame(frame, **READ, max_grade=bad)
    pool = ranking.RankingPool.from_frame(frame, **READ, max_grade=3.0)
    assert pool.max_grade == 3


# -- (b) no standard error from one graded query --------------------------------------------------
@pytest.mark.parametrize("estimator", ["model_assisted", "ipw"])
@pytest.mark.parametrize("indices", [[3], [3, 3, 3]])
def test_one_query_has_no_standard_error(runs, estimator, indices):
    data = runs[2]
    pool = data.pool
    idx = np.asarray(indices)
    d = Draws(idx, np.full(idx.size, 0.7), np.full(idx.size, 1 / pool.n_queries))
    labels = data.labeler([pool.query_ids[3]])
    est = ranking.estimate(pool, "dcg", d, labels, model="a", estimator=estimator)
    assert np.isfinite(est.value) and np.isnan(est.stderr)
    assert all(np.isnan(est.confidence_interval(0.95)))
    res = ranking.test(pool, "err", d, labels, models=("a", "b"), estimator=estimator)
    assert np.isfinite(res.estimate) and np.isnan(res.stderr) and np.isnan(res.pvalue)
    # two queries: a standard error again
    d2 = Draws(np.array([3, 5]), np.full(2, 0.7), np.full(2, 1 / pool.n_queries))
    labels2 = data.labeler([pool.query_ids[3], pool.query_ids[5]])
    est2 = ranking.estimate(pool, "dcg", d2, labels2, model="a", estimator=estimator)
    assert np.isfinite(est2.stderr) and est2.stderr > 0


def test_status_after_one_graded_query_shows_no_plus_minus_zero(runs, tmp_path):
    path, truth, _ = runs
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--relevance-cols", "p0,p1,p2,p3,p4", "--budget", 10)  # fmt: skip
    b = _batch(sess, tmp_path)
    assert b["qid"].nunique() == 1
    b["grade"] = [truth[(q, d)] for q, d in zip(b.qid, b.doc, strict=True)]
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "g.csv", index=False)
    ok("record", sess, tmp_path / "g.csv")
    with RankingSession.open(str(sess), readonly=True) as rs:
        res = rs.result()  # the graded prefix: the first query, maybe drawn more than once
    assert res.n_labels == 1 and np.isfinite(res.value) and np.isnan(res.stderr)
    out = ok("status", sess).output
    assert "± 0.0000" not in out and "standard error undefined" in out
    st = json.loads(ok("status", sess, "--json").output.replace("NaN", "null"))
    assert st["stderr"] is None and st["low"] is None and st["high"] is None


# -- (c) independent streams for the proposal and the draws ---------------------------------------
def test_session_seeds_proposal_and_draws_independently(runs, tmp_path):
    path, _, _ = runs
    read = {**READ, "relevance": [f"p{k}" for k in range(5)], "cost": "cost"}
    f = str(tmp_path / "n.bae")
    with RankingSession.create(f, str(path), read, measure="ndcg@3", models=("a",), budget=8.0,
                               seed=7) as rs:  # fmt: skip
        assert rs.meta["seeding"] == 2
        stored = rs.store.rows("SELECT item, q FROM draws ORDER BY seq")
        pool = rs.pool
    items = np.array([r[0] for r in stored])
    q_stored = np.array([r[1] for r in stored])
    from bayes_activeeval.ranking_session import seeded_streams

    prop_rng, draw_rng = seeded_streams(7)
    prop = ranking.proposal(pool, "ndcg@3", model="a", rng=prop_rng)
    np.testing.assert_array_equal(prop.q[items], q_stored)
    np.testing.assert_array_equal(ranking.draw(pool, prop, 8.0, rng=draw_rng).indices, items)
    # the Monte Carlo no longer reads the draws' stream (seeding 1 did: rng=seed for both)
    old = ranking.proposal(pool, "ndcg@3", model="a", rng=7)
    assert not np.array_equal(old.q, prop.q)


def test_old_seeding_sessions_stay_valid(runs, tmp_path):
    """A session stores its draws, so one created with seeding 1 (no ``seeding`` key) opens and
    answers as it did; DCG draws nothing for its proposal, so both seedings draw alike."""
    from bayes_activeeval.ranking_session import seeded_streams

    path, truth, _ = runs
    read = {**READ, "relevance": [f"p{k}" for k in range(5)], "cost": "cost"}
    f = str(tmp_path / "d.bae")
    with RankingSession.create(f, str(path), read, measure="dcg", models=("a",), budget=8.0,
                               seed=3) as rs:  # fmt: skip
        items = [r[0] for r in rs.store.rows("SELECT item FROM draws ORDER BY seq")]
        pool = rs.pool
    streams = {s: seeded_streams(3, s) for s in (1, 2)}
    got = {
        s: ranking.draw(pool, ranking.proposal(pool, "dcg", model="a", rng=p), 8.0, rng=d)
        for s, (p, d) in streams.items()
    }
    np.testing.assert_array_equal(got[1].indices, items)
    np.testing.assert_array_equal(got[2].indices, items)
    # grade everything, then make it look like a session of the old seeding
    b = _batch(tmp_path / "d.bae", tmp_path, n=len(set(items)))
    b["grade"] = [truth[(q, d)] for q, d in zip(b.qid, b.doc, strict=True)]
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "g.csv", index=False)
    ok("record", tmp_path / "d.bae", tmp_path / "g.csv")
    with RankingSession.open(f, readonly=True) as rs:
        before = rs.summary()
    con = sqlite3.connect(f)
    con.execute("DELETE FROM meta WHERE key = 'seeding'")
    con.commit()
    con.close()
    with RankingSession.open(f, readonly=True) as rs:
        assert "seeding" not in rs.meta
        after = rs.summary()
    assert after["estimate"] == before["estimate"] and after["stderr"] == before["stderr"]
    assert after["queries_graded"] == before["queries_graded"] == len(set(items))
    with pytest.raises(ValueError, match="seeding must be 1 or 2"):
        seeded_streams(3, 3)
