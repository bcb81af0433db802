"""Comparisons, second review (session 31): the generalized score test does not reject on the
rounding noise of two precisions of exactly 1; the studentized range with a pooled standard
error of 0 does not reject a difference of 0; under ``variance="wald"`` a pair whose standard
error is 0 (or undefined) gets the interval dual to the score statistic its p-value came from."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayes_activeeval as bae


def precision_pool():
    y = np.array([1] * 30 + [0] * 30)
    ya = np.array([1] * 20 + [0] * 10 + [0] * 30)  # no false positive
    yb = np.array([0] * 10 + [1] * 20 + [0] * 30)  # none either, on other items
    return bae.Pool(predictions={"a": ya, "b": yb}), y


def test_two_precisions_of_one_are_no_evidence():
    pool, y = precision_pool()
    draws = bae.passive_proposal(pool).draw(60, rng=0)
    res = bae.compare(pool, "precision", draws, y[draws.indices], models=("a", "b"))
    assert res.estimates == {"a": 1.0, "b": 1.0} and res.estimate == 0.0
    assert res.statistic == 0.0 and res.pvalue == 1.0
    lo, hi = res.confidence_interval(method="test")
    assert lo <= 0.0 <= hi
    mc = bae.multiple_comparison(pool, "precision", draws, y[draws.indices])
    assert mc.pvalue[0, 1] == 1.0 and not mc.reject[0, 1]


def test_precision_score_test_type_one_error_under_an_exact_null():
    """Both models have precision 200/203 on the pool (an exact null); with the rounding noise
    the test rejected 0.088 of 1,000 passive samples of 100 (16 % of those without a drawn false
    positive). Tolerance: 3 Monte Carlo s.e. of 0.05 over 600 runs."""
    rng = np.random.default_rng(7)
    n_pool = 1_000
    y = (rng.random(n_pool) < 0.3).astype(int)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    ya, yb = np.zeros(n_pool, int), np.zeros(n_pool, int)
    ya[pos[:200]] = 1
    ya[neg[:3]] = 1
    yb[pos[-200:]] = 1
    yb[neg[-3:]] = 1
    pool = bae.Pool(predictions={"a": ya, "b": yb})
    prop = bae.passive_proposal(pool)
    reps, rejected = 600, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(reps):
            d = prop.draw(100, rng=r)
            res = bae.compare(pool, "precision", d, y[d.indices], models=("a", "b"))
            rejected += bool(res.pvalue < 0.05)
    assert rejected / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


def test_studentized_range_with_no_discordant_draw_rejects_nothing():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    ya = y.copy()
    ya[:40] ^= 1
    pool = bae.Pool(predictions={"a": ya, "b": ya.copy(), "c": ya.copy()})  # identical models
    d = bae.passive_proposal(pool).draw(15, rng=0)
    mc = bae.multiple_comparison(pool, "error_rate", d, y[d.indices], method="studentized_range")
    off = ~np.eye(3, dtype=bool)
    assert np.all(mc.pvalue[off] == 1.0) and not mc.reject[off].any()
    assert np.all(mc.statistic[off] == 0.0)


def wald_flat_case():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.integers(0, 2, n)
    ya = y.copy()
    ya[:60] ^= 1
    yb = y.copy()
    yb[:40] ^= 1
    yb[60:80] ^= 1  # equal error rates
    pool = bae.Pool(predictions={"a": ya, "b": yb})
    prop = bae.comparison_proposal(pool, "error_rate", models=("a", "b"), kind="active_neq")
    dr = prop.draw(400, rng=1)
    a_only = (ya != y)[dr.indices] & (yb == y)[dr.indices]
    agree = (ya == yb)[dr.indices]
    flat = dr[np.r_[np.flatnonzero(a_only)[:2], np.flatnonzero(agree)[:8]]]  # two draws in D
    none = dr[np.flatnonzero(agree)[:8]]  # no draw in D
    return pool, y, prop, flat, none


@pytest.mark.parametrize("which", ["flat", "none"])
def test_wald_flat_pair_gets_the_interval_dual_to_its_p_value(which):
    pool, y, prop, flat, none = wald_flat_case()
    d = flat if which == "flat" else none
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = bae.compare(pool, "error_rate", d, y[d.indices], models=("a", "b"), proposal=prop,
                        variance="wald")  # fmt: skip
        s = bae.compare(pool, "error_rate", d, y[d.indices], models=("a", "b"), proposal=prop,
                        variance="score")  # fmt: skip
        mc = bae.multiple_comparison(pool, "error_rate", d, y[d.indices], proposal=prop,
                                     variance="wald", method="none")  # fmt: skip
    assert r.pvalue == pytest.approx(s.pvalue)
    lo, hi = r.confidence_interval(method="test")
    assert np.isfinite(lo) and np.isfinite(hi)
    assert (lo <= 0.0 <= hi) == (r.pvalue >= 0.05)
    assert (lo, hi) == pytest.approx(tuple(s.confidence_interval(method="test")))
    mlo, mhi = (x[0, 1] for x in mc.confidence_interval(method="test"))
    assert (mlo, mhi) == pytest.approx((lo, hi))
    assert (mlo <= 0.0 <= mhi) == (not mc.reject[0, 1])
    one = bae.compare(pool, "error_rate", d, y[d.indices], models=("a", "b"), proposal=prop,
                      variance="wald", alternative="less")  # fmt: skip
    assert not np.isnan(one.confidence_interval()).any()
