"""Intervals near the boundary (issue 13): closed forms, exact and Monte Carlo coverage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import bayes_activeeval as bae
from bayes_activeeval import intervals as iv

statsmodels_prop = pytest.importorskip("statsmodels.stats.proportion")


# ------------------------------------------------------------------------------------------------
# closed forms
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 20, 50, 333])
def test_unit_intervals_equal_statsmodels(n):
    k = np.arange(n + 1)
    for level in (0.9, 0.95):
        lo, hi = iv.wilson(k / n, n, level)
        ref = statsmodels_prop.proportion_confint(k, n, alpha=1 - level, method="wilson")
        np.testing.assert_allclose(lo, ref[0], atol=1e-12)
        np.testing.assert_allclose(hi, ref[1], atol=1e-12)
        lo, hi = iv.clopper_pearson(k / n, n, level)
        ref = statsmodels_prop.proportion_confint(k, n, alpha=1 - level, method="beta")
        np.testing.assert_allclose(lo, ref[0], atol=1e-12)
        np.testing.assert_allclose(hi, ref[1], atol=1e-12)
        # Jeffreys: statsmodels has no boundary modification; compare where none applies
        inner = (k > 1) & (k < n - 1)
        lo, hi = iv.jeffreys(k / n, n, level)
        ref = statsmodels_prop.proportion_confint(k, n, alpha=1 - level, method="jeffreys")
        np.testing.assert_allclose(lo[inner], np.asarray(ref[0])[inner], atol=1e-12)
        np.testing.assert_allclose(hi[inner], np.asarray(ref[1])[inner], atol=1e-12)


def test_modified_wilson_is_brown_cai_dasgupta():
    """Lower bound ½χ²_{2x,α}/n for x = 1, 2 (n ≤ 50) and x = 1, 2, 3 (n > 50); Wilson else;
    the upper bound mirrored (Brown, Cai & DasGupta (2001), Sec. 4.1.1)."""
    a = 0.05
    for n, xstar in ((40, 2), (50, 2), (51, 3), (100, 3)):
        k = np.arange(n + 1)
        lo, hi = iv.modified_wilson(k / n, n, 1 - a)
        wl, wh = iv.wilson(k / n, n, 1 - a)
        for x in range(1, xstar + 1):
            assert lo[x] == pytest.approx(0.5 * stats.chi2.ppf(a, 2 * x) / n, rel=1e-10)
            assert hi[n - x] == pytest.approx(1 - 0.5 * stats.chi2.ppf(a, 2 * x) / n, rel=1e-10)
        np.testing.assert_allclose(lo[xstar + 1 :], wl[xstar + 1 :])
        np.testing.assert_allclose(hi[: n - xstar], wh[: n - xstar])
        assert lo[0] == 0.0 and hi[n] == 1.0


def test_passive_effective_size_is_n_and_wilson_matches_statsmodels():
    """Passive sampling of a proportion: the self-normalized estimate has SE² = x̂(1−x̂)/n, so
    n* = n and the score interval is statsmodels' Wilson interval — also at 0 and n."""
    n = 60
    for k in (0, 1, 7, 59, 60):
        ell = np.r_[np.ones(k), np.zeros(n - k)]
        est = bae.weighted_estimate(ell[:, None], np.full(n, 2.5), bae.measures.get("accuracy"))
        kish = iv.carrying_kish(np.full(n, 2.5), ell[:, None], np.ones((1, 1)))
        assert kish[0] == pytest.approx(n)
        assert iv.effective_size(est.value, est.stderr, (0, 1), kish)[0] == pytest.approx(n)
        lo, hi = iv.interval(est.value, est.stderr, (0.0, 1.0), 0.95, "wilson", kish=kish)
        ref = statsmodels_prop.proportion_confint(k, n, method="wilson")
        assert lo[0] == pytest.approx(ref[0], abs=1e-12) and hi[0] == pytest.approx(
            ref[1], abs=1e-12
        )
        assert hi[0] - lo[0] > 0


def test_interval_rescales_and_falls_back():
    # a measure on [-1, 1] (MCC, differences): the unit-scale interval mapped back
    lo, hi = iv.interval(0.5, 0.1, (-1.0, 1.0), 0.95, "wilson", kish=30.0)
    ul, uh = iv.wilson(0.75, 0.75 * 0.25 / 0.05**2)
    assert lo == pytest.approx(-1 + 2 * ul) and hi == pytest.approx(-1 + 2 * uh)
    # unbounded measures (MSE) keep the t interval
    t = iv.interval(2.0, 0.5, (0.0, np.inf), 0.95, "modified_wilson", df=12.0, kish=12.0)
    ref = iv.interval(2.0, 0.5, (0.0, np.inf), 0.95, "t", df=12.0)
    assert t == ref
    # no draw carries the measure: the whole range, never a point
    lo, hi = iv.interval(1.0, 0.0, (0.0, 1.0), 0.95, "modified_wilson", kish=0.0)
    assert (lo, hi) == (0.0, 1.0)
    # floating-point 1 − 1e-16 counts as the bound (the truth 1.0 stays inside)
    lo, hi = iv.interval(1 - 1e-16, 1e-17, (0.0, 1.0), 0.95, "modified_wilson", kish=40.0)
    assert hi == 1.0 and lo < 0.95
    with pytest.raises(ValueError, match="method must be one of"):
        iv.interval(0.5, 0.1, (0, 1), 0.95, "nope", kish=3.0)


# ------------------------------------------------------------------------------------------------
# coverage
# ------------------------------------------------------------------------------------------------
def _exact_passive_coverage(p, n, method):
    """Exact coverage of a method for passive sampling of a proportion (binomial sum)."""
    k = np.arange(n + 1)
    x = k / n
    lo, hi = iv.interval(x, np.sqrt(x * (1 - x) / n), (0.0, 1.0), 0.95, method, kish=float(n))
    return float(stats.binom.pmf(k, n, p) @ ((lo <= p) & (p <= hi)))


@pytest.mark.parametrize("n", [50, 100, 200, 500, 1000, 2000])
def test_default_exact_passive_coverage(n):
    """The default keeps 0.93 in every boundary cell of the benchmark (exact, no Monte Carlo),
    where the Wald interval collapses and plain Wilson dips (n·p ≈ 0.1-0.2)."""
    for truth in (0.9, 0.99, 0.995, 0.999, 1.0):
        assert _exact_passive_coverage(truth, n, iv.DEFAULT_METHOD) >= 0.93, truth
    assert _exact_passive_coverage(0.995, 50, "wald") < 0.3
    # plain Wilson's dip (Brown, Cai & DasGupta (2001), Fig. 5): one error excludes the truth
    assert _exact_passive_coverage(0.999, 100, "wilson") < 0.92
    assert _exact_passive_coverage(0.999, 100, iv.DEFAULT_METHOD) >= 0.99


def _is_draws(q, p, correct, n, reps, rng):
    cq = np.cumsum(q) / q.sum()
    idx = np.minimum(np.searchsorted(cq, rng.random((reps, n)), side="right"), q.size - 1)
    v = p[idx] / q[idx]
    ell = correct[idx]
    W = v.sum(axis=1)
    R = (v * ell).sum(axis=1) / W
    se = np.sqrt((v * v * (ell - R[:, None]) ** 2).sum(axis=1)) / W
    return R, se, W**2 / (v * v).sum(axis=1)


def test_default_coverage_optimal_proposal_near_one():
    """The optimal accuracy proposal on a pool with accuracy 0.995, n = 200 (the issue's 64%):
    Monte Carlo coverage within 3 MC standard errors of 0.95 or above, never zero width."""
    rng = np.random.default_rng(3)
    N = 20_000
    err = np.clip(rng.beta(0.5, 0.5 * (1 / 0.005 - 1), N), 1e-6, 0.49)
    pred = (rng.random(N) < 0.3).astype(int)
    wrong = np.zeros(N, bool)
    wrong[rng.choice(N, 100, replace=False, p=err / err.sum())] = True
    pool = bae.Pool(predictions=pred, probs=np.where(pred == 1, 1 - err, err))
    q = bae.optimal_proposal(pool, "accuracy").q
    reps = 2000
    R, se, kish = _is_draws(q, pool.p, (~wrong).astype(float), 200, reps, rng)
    lo, hi = iv.interval(R, se, (0.0, 1.0), 0.95, iv.DEFAULT_METHOD, kish=kish)
    cover = np.mean((lo <= 0.995) & (0.995 <= hi))
    assert cover >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)
    assert np.all(hi > lo)
    wl, wh = iv.interval(R, se, (0.0, 1.0), 0.95, "wald")
    assert np.mean((wl <= 0.995) & (0.995 <= wh)) < 0.85  # what the issue reported


# ------------------------------------------------------------------------------------------------
# paired differences
# ------------------------------------------------------------------------------------------------
def _paired(cells, n, reps, rng):
    """Passive paired samples: counts of (both right, only a right, only b right, both wrong)."""
    c = rng.multinomial(n, cells, size=reps).astype(float)
    pa, pb = (c[:, 0] + c[:, 1]) / n, (c[:, 0] + c[:, 2]) / n
    cov = (c[:, 0] / n - pa * pb) / n
    sa, sb = np.sqrt(pa * (1 - pa) / n), np.sqrt(pb * (1 - pb) / n)
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where((sa > 0) & (sb > 0), cov / (sa * sb), 0.0)
    return c, pa, pb, sa, sb, phi


def test_newcombe_phi_is_the_correlation_of_the_estimates():
    rng = np.random.default_rng(0)
    c, *_, phi = _paired([0.7, 0.1, 0.15, 0.05], 80, 50, rng)
    A, B, C, D = c.T
    ref = (A * D - B * C) / np.sqrt((A + B) * (C + D) * (A + C) * (B + D))
    np.testing.assert_allclose(phi, ref, rtol=1e-10)


def test_newcombe_difference_at_the_boundary_and_coverage():
    # every draw: both models right; the interval keeps width and contains 0
    n = 50
    ia = iv.interval(1.0, 0.0, (0.0, 1.0), 0.95, iv.DEFAULT_METHOD, kish=float(n))
    lo, hi = iv.newcombe_difference((1.0, 1.0), (ia, ia), 0.0, (-1.0, 1.0))
    assert lo < 0 < hi and hi - lo > 0.05 and -1 <= lo and hi <= 1
    # coverage for two good models on paired passive samples (truth Δ = 0.995 − 0.99)
    rng = np.random.default_rng(1)
    cells = np.array([0.988, 0.007, 0.002, 0.003])  # both right, only a, only b, both wrong
    truth = (cells[0] + cells[1]) - (cells[0] + cells[2])
    reps = 3000
    for n in (50, 200, 1000):
        _, pa, pb, sa, sb, phi = _paired(cells, n, reps, rng)
        ca = iv.interval(pa, sa, (0.0, 1.0), 0.95, iv.DEFAULT_METHOD, kish=float(n))
        cb = iv.interval(pb, sb, (0.0, 1.0), 0.95, iv.DEFAULT_METHOD, kish=float(n))
        lo, hi = iv.newcombe_difference((pa, pb), (ca, cb), phi, (-1.0, 1.0))
        cover = np.mean((lo <= truth) & (truth <= hi))
        assert cover >= 0.93 - 3 * np.sqrt(0.95 * 0.05 / reps), (n, cover)
        assert np.all(hi > lo) and np.all(lo >= -1) and np.all(hi <= 1)


def test_estimate_api_passive_is_wilson_and_modified_wilson():
    """Through bae.estimate on passive draws (equal weights: no df adjustment, n* = n):
    ``method="wilson"`` is statsmodels' Wilson interval and the default is the modified Wilson
    interval of Brown, Cai & DasGupta (2001) with n trials — also for 20 of 20 correct."""
    rng = np.random.default_rng(2)
    N = 5000
    pred = (rng.random(N) < 0.4).astype(int)
    y = np.where(rng.random(N) < 0.02, 1 - pred, pred)
    pool = bae.Pool(predictions=pred, probs=np.where(pred == 1, 0.9, 0.1))
    for n, seed in ((20, 0), (20, 5), (80, 1), (300, 2)):
        d = bae.passive_proposal(pool).draw(n, rng=seed)
        est = bae.estimate(pool, "accuracy", d, y[d.indices])
        k = round(est.value * n)
        ref = statsmodels_prop.proportion_confint(k, n, method="wilson")
        assert est.confidence_interval(0.95, "wilson") == pytest.approx(ref, abs=1e-12)
        mw = iv.modified_wilson(k / n, n, 0.95)
        assert est.confidence_interval(0.95) == pytest.approx(tuple(map(float, mw)), abs=1e-12)
    # 20 of 20 correct: not the zero-width [1, 1] of the t and Wald intervals
    ell = np.ones((20, 1))
    est = bae.weighted_estimate(ell, np.ones(20), bae.measures.get("accuracy"))
    assert est.confidence_interval(0.95, "t") == (1.0, 1.0)
    lo, hi = est.confidence_interval(0.95)
    assert hi == 1.0 and lo == pytest.approx(20 / (20 + stats.norm.ppf(0.975) ** 2))


@pytest.mark.parametrize("level", [95, 1.0, 0.0, -0.5, float("nan")])
def test_every_interval_refuses_a_level_outside_0_1(level):
    # 95 (a percentage) gave NaN or, with "gamma", the whole range; -0.5 an inverted interval
    from bayes_activeeval import intervals as iv

    for method in ("modified_wilson", "wald", "t", "gamma", "logit"):
        with pytest.raises(ValueError, match="level"):
            iv.interval(0.9, 0.03, (0, 1), level, method, kish=100.0, df=50.0)
    for f in (iv.wilson, iv.modified_wilson, iv.jeffreys, iv.clopper_pearson):
        with pytest.raises(ValueError, match="level"):
            f(0.3, 20.0, level)


def test_undefined_or_negative_stderr():
    # a NaN standard error gave a finite interval from the Kish size; a negative one too
    from bayes_activeeval import intervals as iv

    lo, hi = iv.interval(0.7, np.nan, (0, 1), kish=50.0)
    assert np.isnan(lo) and np.isnan(hi)
    with pytest.raises(ValueError, match="stderr must be >= 0"):
        iv.interval(0.7, -0.05, (0, 1), kish=50.0)
    lo, hi = iv.interval(np.array([0.7, 0.6]), np.array([0.05, np.nan]), (0, 1), kish=50.0)
    assert np.isfinite(lo[0]) and np.isnan(lo[1]) and np.isnan(hi[1])


def test_infinite_stderr_gives_the_whole_range():
    from bayes_activeeval import intervals as iv

    for method in ("modified_wilson", "wald", "t"):
        lo, hi = iv.interval(0.7, np.inf, (0, 1), method=method, kish=50.0, df=10.0)
        assert (float(lo), float(hi)) == (0.0, 1.0)
