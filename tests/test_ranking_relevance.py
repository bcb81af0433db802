"""The PyMC graded-relevance model (ordered logistic with query effects) feeding the proposal."""

import numpy as np
import pytest
import xarray as xr

from bayes_activeeval import ranking
from bayes_activeeval.ranking.synthetic import ordered_logistic_probs

CUTS = np.array([-1.0, 0.5, 2.0])  # 4 grades


def _simulate(n_queries, docs, rng):
    q = np.repeat(np.arange(n_queries), docs)
    u = rng.normal(0.0, 0.8, n_queries)
    s = rng.normal(0.0, 1.0, q.size)
    P = ordered_logistic_probs(1.5 * s + u[q], CUTS)
    y = (rng.random((q.size, 1)) > np.cumsum(P, axis=1)).sum(axis=1)
    return s, np.minimum(y, 3), np.array([f"q{i}" for i in q]), P


@pytest.fixture(scope="module")
def fitted():
    # one NUTS fit for the whole module: building and compiling the model is most of the cost
    # (about 3.5 s of 5.5 s warm, 8.5 s on a cold PyTensor cache); 150 + 120 draws keep the
    # slope within 0.01 and the predictive log score within 0.002 of 300 + 200 draws
    rng = np.random.default_rng(0)
    s, y, q, _ = _simulate(30, 12, rng)
    model = ranking.GradedRelevanceModel(n_grades=4)
    model.fit(s, y, q, draws=120, tune=150, chains=1, rng=1)
    return model


def test_posterior_is_a_datatree_and_recovers_the_slope(fitted):
    post = fitted.posterior
    assert isinstance(post, xr.DataTree)
    p = post["posterior"]
    assert set(p["query_effect"].dims) >= {"chain", "draw", "query"}
    assert p["cutpoints"].sizes["cut"] == 3
    # the scores were standardized (sd ≈ 1), so the slope is near the true 1.5
    slope = float(p["slope"].mean())
    assert 0.9 < slope < 2.3
    cuts = np.asarray(p["cutpoints"]).reshape(-1, 3)
    assert np.all(np.diff(cuts, axis=1) > 0)


def test_posterior_predictive_beats_uniform_on_new_queries(fitted):
    rng = np.random.default_rng(5)
    s, y, q, P_true = _simulate(20, 12, rng)
    q = np.array([f"new{x}" for x in q])  # unseen queries: effects from the population
    P = fitted.predict_proba(s, q, rng=0)
    assert P.shape == (s.size, 4)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    ll_model = np.mean(np.log(P[np.arange(y.size), y]))
    ll_uniform = np.log(1 / 4)
    ll_true = np.mean(np.log(P_true[np.arange(y.size), y]))
    assert ll_model > ll_uniform + 0.2
    assert ll_model > ll_true - 0.25


def test_relevance_model_feeds_the_pool_and_proposal(fitted):
    data = ranking.make_ranking_pool(60, min_docs=5, max_docs=20, rng=2)
    frame = data.frame
    P = fitted.predict_proba(frame["score_a"], frame["qid"], rng=0)
    for k in range(4):
        frame[f"r{k}"] = P[:, k]
    pool = ranking.RankingPool.from_frame(
        frame,
        query="qid",
        item="doc",
        ranks={"a": "rank_a", "b": "rank_b"},
        relevance=[f"r{k}" for k in range(4)],
        cost="cost",
    )
    prop = ranking.proposal(pool, "err", models=("a", "b"))
    assert prop.q.sum() == pytest.approx(1.0)
    assert np.all(prop.q > 0)


def test_bad_grades_are_refused():
    model = ranking.GradedRelevanceModel(n_grades=3)
    with pytest.raises(ValueError, match=r"grades are whole numbers 0\.\.2"):
        model.pymc_model([0.1, 0.2], [0, 3], ["a", "a"])
    with pytest.raises(ValueError, match="fit the model"):
        model.predict_proba([0.1], ["a"])
