"""Regressions from a review of the core: binary Brier bounds, huge importance weights, and the
speed of ``Proposal.draw(n, unique=True)`` (with its draws unchanged)."""

import time
import warnings

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval import intervals
from bayes_activeeval.estimators import model_assisted_estimate, ratio_bias, weighted_estimate
from bayes_activeeval.kernel import inverse_cdf
from bayes_activeeval.proposals import Draws


# -- binary Brier: (p̂₁ − y)² ≤ 1 ---------------------------------------------------------------
def test_binary_brier_bounds_and_interval_within_unit_range():
    pool = bae.Pool(predictions=np.array([0, 1] * 5), probs=np.tile([0.9, 0.1], 5))
    m, _ = pool.resolve("brier")
    assert m.bounds == (0.0, 1.0)
    d = bae.passive_proposal(pool).draw(1, rng=1)
    e = bae.estimate(pool, "brier", d, np.array([1]))
    assert e.bounds == (0.0, 1.0)
    lo, hi = e.confidence_interval(0.95)
    assert 0.0 <= lo <= e.value <= hi <= 1.0
    # a multiclass Brier score Σ_c (p̂_c − 1[y=c])² keeps its range (0, 2)
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), 50)
    pool = bae.Pool(predictions=P.argmax(1), probs=P)
    assert pool.resolve("brier")[0].bounds == (0.0, 2.0)
    assert bae.measures.get("brier").bounds == (0.0, 2.0)  # unresolved: the general range


# -- huge importance weights: self-normalized quantities are scale-invariant ------------------
@pytest.mark.parametrize("scale", [1e160, 1e200, 1e300, 1e308])
def test_weighted_estimate_invariant_to_huge_weight_scale(scale):
    rng = np.random.default_rng(3)
    L = np.column_stack([rng.integers(0, 2, 40), rng.integers(0, 2, 40)]).astype(float)
    v = rng.gamma(1.0, 1.0, 40)
    v = 0.9 * v / v.max()  # max below 1 so v*scale stays finite
    m = bae.measures.get("f1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        a = weighted_estimate(L, v, m)
        b = weighted_estimate(L, v * scale, m)
        c = weighted_estimate(L, v * scale, m, variance_weights=v * scale)
    for e in (b, c):
        np.testing.assert_allclose(e.values, a.values, rtol=1e-12)
        np.testing.assert_allclose(e.cov, a.cov, rtol=1e-12)
        np.testing.assert_allclose(e.kish, a.kish, rtol=1e-12)
        np.testing.assert_allclose(e.confidence_interval(), a.confidence_interval(), rtol=1e-12)
    np.testing.assert_allclose(ratio_bias(L, v * scale, m), ratio_bias(L, v, m), rtol=1e-9)
    kish, wdf = intervals.carrying_sizes(v * scale, L, np.array([[1.0, 1.0]]))
    k0, w0 = intervals.carrying_sizes(v, L, np.array([[1.0, 1.0]]))
    np.testing.assert_allclose(kish, k0, rtol=1e-12)
    np.testing.assert_allclose(wdf, w0, rtol=1e-9)


def test_model_assisted_estimate_invariant_to_huge_weight_scale():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 60).astype(float)
    L = y[:, None]
    mm = np.clip(y + rng.normal(0, 0.3, 60), 0, 1)[:, None]
    v = rng.gamma(1.0, 1.0, 60) / 10.0
    m = bae.measures.get("error_rate")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        a = model_assisted_estimate(L, v, mm, np.array([0.5]), m)
        b = model_assisted_estimate(L, v * 1e200, mm, np.array([0.5]), m)
    np.testing.assert_allclose(b.values, a.values, rtol=1e-12)
    np.testing.assert_allclose(b.cov, a.cov, rtol=1e-12)
    np.testing.assert_allclose(b.confidence_interval(), a.confidence_interval(), rtol=1e-12)


def test_estimate_through_custom_proposal_with_huge_weights():
    pool = bae.Pool(predictions=np.array([0, 1, 0, 1]), probs=np.array([0.2, 0.8, 0.3, 0.6]))
    q = np.array([1e-170, 1e-170, 0.5, 0.5])
    prop = bae.Proposal(q, pool.p, "custom")
    d = Draws(np.array([0, 1]), prop.weights(np.array([0, 1])), q[[0, 1]])
    e = bae.estimate(pool, "error_rate", d, np.array([0, 0]))
    ref = bae.estimate(pool, "error_rate", Draws(d.indices, np.ones(2), d.q), np.array([0, 0]))
    assert e.value == pytest.approx(0.5, rel=1e-12)
    np.testing.assert_allclose(e.confidence_interval(), ref.confidence_interval(), rtol=1e-12)


# -- Proposal.draw(n, unique=True): same draws, incremental distinct count ---------------------
def _old_unique_draw(prop, n, rng):
    """The former algorithm: np.unique over all draws at every pass."""
    rng = np.random.default_rng(rng)
    cdf = np.cumsum(prop.q)
    idx = np.empty(0, dtype=np.int64)
    n_distinct = 0
    while n_distinct < n:
        k = max(n - n_distinct, 16)
        idx = np.concatenate([idx, inverse_cdf(cdf, rng.random(k) * cdf[-1])])
        _, first = np.unique(idx, return_index=True)
        n_distinct = first.size
    return idx[: np.sort(first)[n - 1] + 1], rng.random()


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_unique_draw_matches_former_algorithm(seed):
    ds = bae.datasets.make_classification_pool(400, 0.05, rng=seed)
    for prop in (bae.passive_proposal(ds.pool), bae.optimal_proposal(ds.pool, "f1")):
        support = int(np.count_nonzero(prop.q))
        for n in (1, 5, 16, 17, 100, support - 3, support):
            rng = np.random.default_rng(seed)
            d = prop.draw(n, rng=rng, unique=True)
            old, next_u = _old_unique_draw(prop, n, seed)
            np.testing.assert_array_equal(d.indices, old)
            assert d.indices.dtype == old.dtype
            assert d.n_distinct == n
            np.testing.assert_array_equal(d.weights, prop.weights(old))
            assert rng.random() == next_u  # the same random numbers were consumed


def test_unique_draw_near_support_is_fast():
    ds = bae.datasets.make_classification_pool(10_000, 0.01, rng=1)
    p = bae.optimal_proposal(ds.pool, "f1")
    t = time.perf_counter()
    d = p.draw(9_900, rng=0, unique=True)
    assert time.perf_counter() - t < 10.0  # was about 50 s
    assert d.n_distinct == 9_900
