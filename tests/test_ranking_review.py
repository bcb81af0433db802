"""Ranking evaluation review: argument checks of the measure, the ``relevance=`` and
``n_samples=`` arguments, and a proposal free of rounding noise when the relevance model is
certain."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_activeeval import ranking
from bayes_activeeval.ranking.measures import RankingMeasure, loss_moments, query_losses

POS = np.array([[1, 2, 3], [2, 1, 0], [1, 3, 2]])
DOCS = [["a", "b", "c"], ["a", "b"], ["a", "b", "c"]]


def small_pool(relevance=None, **kw):
    return ranking.RankingPool(["q1", "q2", "q3"], DOCS, {"r": POS}, relevance, **kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"threshold": -1}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": "1"}, "threshold"),
        ({"k": 2.5}, "cut-off k"),
        ({"k": "3"}, "cut-off k"),
        ({"k": np.nan}, "cut-off k"),
    ],
)
def test_measure_arguments_checked(kw, match):
    args = {"k": 2, **kw}
    with pytest.raises(ValueError, match=match):
        RankingMeasure("precision", **args)


def test_measure_arguments_whole_numbers_normalized():
    rm = RankingMeasure("precision", np.float64(3.0), threshold=np.int64(2))
    assert rm.k == 3 and isinstance(rm.k, int)
    assert rm.threshold == 2 and isinstance(rm.threshold, int)
    assert rm.name == "precision@3"


def test_threshold_zero_moments_match_losses():
    """threshold=0 counts every listed document: the exact moments agree with the losses."""
    pool = small_pool(max_grade=2)
    rm = RankingMeasure("precision", 2, threshold=0)
    mean, _ = loss_moments(pool, rm, ("r",), pool.relevance)
    L = query_losses(pool, rm, "r", np.zeros((3, 3), dtype=int), np.arange(3))
    np.testing.assert_allclose(mean, L)


def test_n_samples_checked():
    pool = small_pool(max_grade=2)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="n_samples"):
            ranking.proposal(pool, "ndcg@2", model="r", n_samples=bad)
    with pytest.raises(TypeError, match="n_samples"):
        ranking.proposal(pool, "ndcg@2", model="r", n_samples=2.5)


@pytest.fixture(scope="module")
def drawn():
    data = ranking.make_ranking_pool(50, min_docs=3, max_docs=6, rng=0)
    prop = ranking.proposal(data.pool, "dcg", models=("a", "b"), rng=0)
    return data, ranking.draw(data.pool, prop, 10.0, rng=1)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (lambda R: np.full(R.shape, np.nan), "finite and in"),
        (lambda R: -R, "finite and in"),
        (lambda R: 0.5 * R, "sums to"),
        (lambda R: R[:, :2], "relevance has shape"),
    ],
)
def test_relevance_argument_checked(drawn, bad, match):
    data, d = drawn
    pool = data.pool
    rel = bad(pool.relevance)
    with pytest.raises(ValueError, match=match):
        ranking.estimate(pool, "dcg", d, data.grades, model="a", relevance=rel)
    with pytest.raises(ValueError, match=match):
        ranking.test(pool, "dcg", d, data.grades, models=("a", "b"), relevance=rel)
    with pytest.raises(ValueError, match=match):
        ranking.proposal(pool, "dcg", model="a", relevance=rel)


def test_relevance_argument_valid_is_used(drawn):
    """A valid relevance model passed explicitly gives what the pool with it gives."""
    data, d = drawn
    pool = data.pool
    rel = pool.uniform_relevance()
    a = ranking.estimate(pool, "err", d, data.grades, model="a", relevance=rel)
    b = ranking.estimate(pool.with_relevance(rel), "err", d, data.grades, model="a")
    np.testing.assert_allclose(a.values, b.values)
    np.testing.assert_allclose(a.stderrs, b.stderrs)


@pytest.mark.parametrize("measure", ["dcg", "err", "dcg@2", "precision@2"])
def test_certain_relevance_proposal_not_rounding_noise(measure):
    """A relevance model certain of every grade leaves no variance: u = 0 and q uniform (it was
    set by rounding error, e.g. q = [0.49, 0.017, 0.49] for DCG)."""
    rel = np.zeros((3, 3, 3))
    rel[..., 1] = 1.0
    pool = small_pool(rel)
    prop = ranking.proposal(pool, measure, model="r")
    np.testing.assert_array_equal(prop.info["u"], 0.0)
    np.testing.assert_allclose(prop.q, 1.0 / 3.0)


def test_certain_query_gets_only_the_mixture():
    """One query whose loss the model knows (u = 0) gets only the defensive mixture δ/m; the
    others keep q ∝ sqrt(u)."""
    rel = np.full((3, 3, 3), 1.0 / 3.0)
    rel[0] = [0.0, 1.0, 0.0]
    pool = small_pool(rel)
    prop = ranking.proposal(pool, "dcg", model="r", mix=0.05)
    u = prop.info["u"]
    assert u[0] == 0.0 and np.all(u[1:] > 0.1)
    assert prop.q[0] == pytest.approx(0.05 / 3.0)
    w = np.sqrt(u[1:]) / np.sqrt(u[1:]).sum()
    np.testing.assert_allclose(prop.q[1:], 0.95 * w + 0.05 / 3.0)
