"""Ranking evaluation, second review (session 31): a comparison whose draws all fall where the
two lists are the same has an undefined standard error (not ``± 0``); the relevance padding is
never read (NaN there changes nothing); a query cannot repeat a document; ``relevance=`` is
checked whatever the design or estimator; an infinite rank is refused by name."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_activeeval import UndefinedEstimateWarning, ranking
from bayes_activeeval.proposals import Draws


@pytest.fixture(scope="module")
def two_rankers():
    return ranking.make_ranking_pool(300, min_docs=5, max_docs=20, changed=0.3, rng=0)


@pytest.mark.parametrize("estimator", ["model_assisted", "ipw"])
@pytest.mark.parametrize("measure", ["err", "dcg"])
def test_only_same_list_draws_leave_the_difference_undefined(two_rankers, measure, estimator):
    pool = two_rankers.pool
    same = np.all(pool.positions["a"] == pool.positions["b"], axis=1)
    assert same.any() and (~same).any()
    prop = ranking.proposal(pool, measure, models=("a", "b"))
    idx = np.flatnonzero(same)[:5]
    d = Draws(idx, prop.weights(idx), prop.q[idx])
    with pytest.warns(UndefinedEstimateWarning, match="different"):
        res = ranking.test(pool, measure, d, two_rankers.grades, models=("a", "b"),
                           estimator=estimator)  # fmt: skip
    assert np.isnan(res.stderr) and np.isnan(res.statistic) and np.isnan(res.pvalue)
    lo, hi = res.confidence_interval(0.95)
    assert np.isnan(lo) and np.isnan(hi)
    # one draw where the lists differ defines it again
    j = np.flatnonzero(~same)[:1]
    idx2 = np.concatenate([idx, j, np.flatnonzero(~same)[1:2]])
    d2 = Draws(idx2, prop.weights(idx2), prop.q[idx2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndefinedEstimateWarning)
        res2 = ranking.test(pool, measure, d2, two_rankers.grades, models=("a", "b"),
                            estimator=estimator)  # fmt: skip
    assert np.isfinite(res2.stderr) and res2.stderr > 0


def _padded(pad):
    pos = {"a": np.array([[1, 2, 3], [2, 1, 0]])}  # the second query has 2 documents
    rel = np.array([[[0.5, 0.3, 0.2]] * 3, [[0.2, 0.3, 0.5]] * 3])
    rel[1, 2] = pad
    return ranking.RankingPool(["q1", "q2"], [["a", "b", "c"], ["d", "e"]], pos, rel, [1.0, 4.0])


@pytest.mark.parametrize("measure", ["dcg", "precision@2", "err", "ndcg@2"])
def test_relevance_padding_is_not_read(measure):
    clean, bad = _padded([1.0, 0.0, 0.0]), _padded([np.nan, 7.0, -1.0])
    assert np.array_equal(clean.relevance, bad.relevance)
    q0 = ranking.proposal(clean, measure, model="a", mix=0, rng=0).q
    q1 = ranking.proposal(bad, measure, model="a", mix=0, rng=0).q
    np.testing.assert_allclose(q1, q0)
    assert np.all(np.isfinite(q1))
    grades = np.array([[1, 2, 0], [2, 1, -1]])
    d = ranking.draw(clean, ranking.proposal(clean, measure, model="a", design="passive"), 5.0,
                     rng=0)  # fmt: skip
    e0 = ranking.estimate(clean, measure, d, grades, model="a")
    e1 = ranking.estimate(bad, measure, d, grades, model="a")
    assert np.isfinite(e1.value) and e1.value == pytest.approx(e0.value)
    # a relevance= argument's padding is not read either
    e2 = ranking.estimate(clean, measure, d, grades, model="a", relevance=_padded(np.nan).relevance)
    assert e2.value == pytest.approx(e0.value)


def test_pool_keeps_the_callers_relevance_unchanged():
    rel = np.array([[[0.5, 0.5]] * 2, [[0.5, 0.5], [np.nan, np.nan]]])
    ranking.RankingPool(["q1", "q2"], [["a", "b"], ["c"]], {"r": np.array([[1, 2], [1, 0]])}, rel)
    assert np.isnan(rel[1, 1]).all()


def test_repeated_document_refused():
    with pytest.raises(ValueError, match=r"doc_ids of query 'q1' repeat document 'a'"):
        ranking.RankingPool(["q1"], [["a", "a", "c"]], {"a": np.array([[1, 2, 3]])}, max_grade=2)


@pytest.mark.parametrize("call", ["proposal-passive", "estimate-ipw", "test-ipw", "estimate-ma"])
def test_relevance_argument_checked_on_every_path(call):
    data = ranking.make_ranking_pool(50, min_docs=3, max_docs=6, rng=0)
    pool = data.pool
    d = ranking.draw(pool, ranking.proposal(pool, "dcg", model="a"), 10.0, rng=0)
    junk = np.full((3, 3), -7.0)
    with pytest.raises(ValueError, match="relevance has shape"):
        if call == "proposal-passive":
            ranking.proposal(pool, "dcg", model="a", design="passive", relevance=junk)
        elif call == "estimate-ipw":
            ranking.estimate(pool, "dcg", d, data.grades, model="a", estimator="ipw",
                             relevance=junk)  # fmt: skip
        elif call == "test-ipw":
            ranking.test(pool, "dcg", d, data.grades, models=("a", "b"), estimator="ipw",
                         relevance=junk)  # fmt: skip
        else:
            ranking.estimate(pool, "dcg", d, data.grades, model="a", relevance=junk)


def test_infinite_rank_refused_by_name():
    fr = pd.DataFrame({"qid": ["q1"] * 3, "doc": ["a", "b", "c"], "ra": [1.0, 2.0, np.inf]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"ranks\['a'\] \(column 'ra'\) has inf"):
            ranking.RankingPool.from_frame(fr, ranks={"a": "ra"})


def test_precision_threshold_above_the_grade_scale_refused():
    data = ranking.make_ranking_pool(20, min_docs=3, max_docs=5, rng=0)
    pool = data.pool
    rm = ranking.RankingMeasure("precision", 2, threshold=pool.max_grade + 1)
    with pytest.raises(ValueError, match=r"threshold=.* above the pool.s max_grade"):
        ranking.proposal(pool, rm, model="a")
    d = ranking.draw(pool, ranking.proposal(pool, "precision@2", model="a"), 5.0, rng=0)
    with pytest.raises(ValueError, match="max_grade"):
        ranking.estimate(pool, rm, d, data.grades, model="a")
    ok = ranking.RankingMeasure("precision", 2, threshold=pool.max_grade)
    assert np.isfinite(ranking.estimate(pool, ok, d, data.grades, model="a").value)
