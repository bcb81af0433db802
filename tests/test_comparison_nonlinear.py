"""The paired test of ratio and non-linear measures (F1, precision, MCC, …): the generalized
score test at a null-restricted point (``compare``'s default for them). Monte Carlo tolerances
are 3.5 binomial standard errors of the rejection rate at α = 0.05."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pools import permuted_null

import bayes_activeeval as bae
from bayes_activeeval.comparison.pairwise import restricted_influence
from bayes_activeeval.measures import difference

ALPHA = 0.05


@pytest.fixture(scope="module")
def small():
    """The pool of ``benchmarks/compare_small_n.py``."""
    sp = bae.datasets.make_classification_pool(3000, 0.3, n_models=2, rng=0)
    return sp.pool, np.asarray(sp.labels)


def _rejections(pool, y, prop, measure, n, reps, rng, models=("m0", "m1"), **kw):
    rej = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            d = prop.draw(n, rng)
            rej += (
                bae.compare(pool, measure, d, y[d.indices], models, proposal=prop, **kw).pvalue
                < ALPHA
            )
    return rej / reps


@pytest.mark.parametrize(("measure", "n"), [("f1", 50), ("f1", 100), ("precision", 100)])
def test_type_one_error_of_ratio_measures_under_the_comparison_proposal(small, measure, n):
    """Exact null (the swap protocol): the Wald test of F1 under the comparison proposal
    rejected 0.012 / 0.005 of the time at 50 / 100 draws (its variance grew with |Δ̂| through
    the heavy draws where the models agree); the generalized score test is at α."""
    pool, y = small
    prop = bae.comparison_proposal(pool, measure, ("m0", "m1"))
    null, yy, nprop = permuted_null(pool, y, ("m0", "m1"), prop.q)
    reps = 1000
    rate = _rejections(null, yy, nprop, measure, n, reps, np.random.default_rng(21))
    se = np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert ALPHA - 3.5 * se < rate < ALPHA + 3.5 * se, rate


def test_type_one_error_when_f1_is_equal_but_positive_rates_differ():
    """A null that is not exchangeable: equal pool F1 (to 1e-4) with positive rates 0.39 and
    0.33, so that the items where the models agree move the difference (the F1 denominators
    differ). The restricted point keeps that term; the test stays at α under the comparison
    proposal (the Wald test rejected about 0.02 of the time at 100 draws)."""
    sp = bae.datasets.make_classification_pool(20_000, 0.3, n_models=2, rng=0)
    y = np.asarray(sp.labels)
    pa, pb = sp.pool.view("m0").prob[:, 1], sp.pool.view("m1").prob[:, 1]

    def f1(f):
        return 2 * np.sum(y * f) / (np.sum(y) + np.sum(f))

    fa = (pa > 0.3).astype(int)
    # thresholds of b that predict at least 5 points fewer positives than a; the closest F1
    grid = np.unique(np.quantile(pb, np.linspace(1.05 - fa.mean(), 0.95, 2000)))
    t = grid[np.argmin([abs(f1((pb > t).astype(int)) - f1(fa)) for t in grid])]
    fb = (pb > t).astype(int)
    assert abs(f1(fa) - f1(fb)) < 1e-4 and fa.mean() - fb.mean() > 0.05
    pool = bae.Pool(
        predictions={"a": fa, "b": fb},
        probs={"a": np.c_[1 - pa, pa], "b": np.c_[1 - pb, pb]},
        classes=[0, 1],
    )
    prop = bae.comparison_proposal(pool, "f1", ("a", "b"))
    reps = 1000
    rate = _rejections(pool, y, prop, "f1", 100, reps, np.random.default_rng(7), ("a", "b"))
    se = np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert ALPHA - 3.5 * se < rate < ALPHA + 3.5 * se, rate


def test_f1_score_test_never_rejects_from_three_draws(small):
    """Three draws: the Wald test rejected 0.29 of the time on the exact null (a near-zero
    standard error); the score statistic Σ v ψ / sqrt(Σ v² ψ²) is at most √3 < z_{0.975}
    (Cauchy-Schwarz)."""
    pool, y = small
    prop = bae.comparison_proposal(pool, "f1", ("m0", "m1"))
    null, yy, nprop = permuted_null(pool, y, ("m0", "m1"), prop.q)
    assert _rejections(null, yy, nprop, "f1", 3, 300, np.random.default_rng(3)) == 0.0


def test_restricted_influence_of_f1_closed_form(small):
    """For F1 the terms are ``(tp_a − F̄⁰_a w_a)/W⁰_a − (tp_b − F̄⁰_b w_b)/W⁰_b`` at the restricted
    point; their weighted mean is the difference linearized at the pooled point,
    ``(T̂_a Ŵ_b − T̂_b Ŵ_a)/W̄²`` to first order, and the interval dual to the test excludes 0
    exactly when p < 0.05."""
    pool, y = small
    prop = bae.comparison_proposal(pool, "f1", ("m0", "m1"))
    dm, views = pool.resolve(difference("f1", "m0", "m1"))
    for seed in range(5):
        d = prop.draw(200, rng=seed)
        L = dm.loss(y[d.indices], views(d.indices))
        v = d.weights
        psi = restricted_influence(L, v, dm)
        Ta, Wa, Tb, Wb = v @ L / v.sum()
        Wbar = 0.5 * (Wa + Wb)
        lin = (Ta * Wb - Tb * Wa) / Wbar**2
        assert v @ psi / v.sum() == pytest.approx(lin, rel=0.05, abs=1e-4)
        # off D (both models predict alike) the term is first order in the difference of the
        # restricted W's, not in Δ̂: the same for every draw with the same (y, f)
        off = L[:, 0] == L[:, 2]
        assert np.all(off[L[:, 1] == L[:, 3]])
        res = bae.compare(pool, "f1", d, y[d.indices], ("m0", "m1"))
        assert res.variance == "score"
        assert res.statistic == pytest.approx(v @ psi / np.sqrt(v**2 @ psi**2), rel=1e-9)
        lo, hi = res.confidence_interval(0.95)
        assert (lo <= 0.0 <= hi) == (res.pvalue >= 0.05)


def test_wald_variance_still_available_and_unchanged(small):
    """``variance="wald"`` keeps the delta-method Wald test (statistic Δ̂/SE)."""
    pool, y = small
    d = bae.comparison_proposal(pool, "f1", ("m0", "m1")).draw(150, rng=4)
    w = bae.compare(pool, "f1", d, y[d.indices], ("m0", "m1"), variance="wald")
    assert w.variance == "wald" and w.statistic == pytest.approx(w.estimate / w.stderr)
    s = bae.compare(pool, "f1", d, y[d.indices], ("m0", "m1"), variance="score")
    assert s.estimate == w.estimate and s.stderr == w.stderr and s.statistic != w.statistic
