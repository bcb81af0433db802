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


# ------------------------------------------------------------------------------------------------
# the interval dual to the generalized score test
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rare():
    """Two models that differ only on the rare class (``minority 30 %`` of
    ``benchmarks/macro_intervals.py``, 40,000 items): 1.5 % positives, model a with recall 0.9
    and specificity 0.964, model b a with 30 % of a's true positives turned into false
    negatives."""
    rng = np.random.default_rng(5)
    N = 40_000
    y = (rng.random(N) < 0.015).astype(int)
    fa = np.where(y == 1, rng.random(N) < 0.9, rng.random(N) > 0.964).astype(int)
    fb = np.where((y == 1) & (fa == 1) & (rng.random(N) < 0.3), 0, fa)
    pool = bae.Pool(
        predictions={"a": fa, "b": fb},
        probs={"a": np.where(fa == 1, 0.8, 0.2), "b": np.where(fb == 1, 0.8, 0.2)},
    )
    return pool, y, fa, fb


def _truth(measure, y, fa, fb):
    def value(f):
        tp, pos, pred = np.sum(y * f), np.sum(y), np.sum(f)
        if measure == "f1":
            return 2 * tp / (pos + pred)
        tn = np.sum((1 - y) * (1 - f))
        return 0.5 * (tp / pos + tn / (y.size - pos))

    return value(fa) - value(fb)


@pytest.mark.parametrize("measure", ["f1", "balanced_accuracy"])
def test_default_interval_covers_a_difference_on_the_rare_class(rare, measure):
    """The interval inverted ``Σ v (ψ − Δ0)`` with ``ψ`` at the point restricted to ``Δ = 0``,
    whose variance misses how ``Δ0`` weighs the draws of the rare class: under the comparison
    proposal, 1,000 draws, it covered the true difference 0.43 of the time for balanced
    accuracy and 0.83 for F1. Each ``Δ0`` now gets its own restricted point: coverage at
    0.95 within 3.5 binomial standard errors."""
    pool, y, fa, fb = rare
    truth = _truth(measure, y, fa, fb)
    assert truth > 0.1
    prop = bae.comparison_proposal(pool, measure, ("a", "b"))
    reps, hits = 200, 0
    for r in range(reps):
        d = prop.draw(1000, rng=1000 + r)
        res = bae.compare(pool, measure, d, y[d.indices], ("a", "b"), proposal=prop)
        assert res.variance == "score"
        lo, hi = res.confidence_interval(0.95)
        hits += lo <= truth <= hi
    se = np.sqrt(0.95 * 0.05 / reps)
    assert 0.95 - 3.5 * se < hits / reps <= 1.0, hits / reps


def test_restricted_point_of_balanced_accuracy_for_any_null_value(rare):
    """Balanced accuracy of two models that differ only on the positives: at ``R⁰(Δ0)`` the
    terms are ``(tp_a − tp_b)/(2 t) − Δ0 y/t`` (``t`` the positives' share), the draws of the
    positive class weighed by ``Δ0/t`` — not the terms at ``R⁰(0)`` minus ``Δ0``."""
    pool, y, _, _ = rare
    prop = bae.comparison_proposal(pool, "balanced_accuracy", ("a", "b"))
    dm, views = pool.resolve(difference("balanced_accuracy", "a", "b"))
    d = prop.draw(300, rng=3)
    L = dm.loss(y[d.indices], views(d.indices))
    v = np.asarray(d.weights, dtype=float)
    yy = y[d.indices]
    t = v @ yy / v.sum()
    lin = (L[:, 1] - L[:, 5]) / (2 * t)
    for delta0 in (-0.3, 0.0, 0.05, 0.2):
        psi = restricted_influence(L, v, dm, delta0)
        np.testing.assert_allclose(psi, lin - delta0 * yy / t, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("measure", "design", "n"),
    [
        ("f1", "optimal", 8),
        ("f1", "optimal", 200),
        ("balanced_accuracy", "optimal", 60),
        ("mcc", "optimal", 150),
        ("precision", "passive", 300),
        ("recall", "optimal", 100),
    ],
)
def test_interval_excludes_zero_exactly_when_the_test_rejects(rare, measure, design, n):
    """Duality at several levels and for each alternative: the two-sided interval excludes 0
    exactly when p < 1 − level, a one-sided one when its p-value is; its statistic at
    ``Δ0 = 0`` is the reported one, bit for bit."""
    pool, y, _, _ = rare
    prop = (
        bae.comparison_proposal(pool, measure, ("a", "b"))
        if design == "optimal"
        else bae.passive_proposal(pool)
    )
    seen = set()
    for r in range(25):
        d = prop.draw(n, rng=r)
        for alt in ("two-sided", "less", "greater"):
            res = bae.compare(
                pool,
                measure,
                d,
                y[d.indices],
                ("a", "b"),
                proposal=prop,
                alternative=alt,
                variance="score",
            )
            if res.restricted is None:
                continue
            assert res.restricted.statistic(0.0) == res.statistic
            for level in (0.8, 0.95, 0.99):
                lo, hi = res.confidence_interval(level, method="test")
                assert lo - 1e-12 <= res.estimate <= hi + 1e-12 or res.pvalue < 1 - level
                reject = res.pvalue < 1 - level
                seen.add(reject)
                assert (not lo <= 0.0 <= hi) == reject, (alt, level, lo, hi, res.pvalue)
    assert seen == {True, False}


def test_plain_risk_interval_is_the_quadratic_inversion(small):
    """Plain risks keep their closed-form inversion (``invert_score_test`` of the sums,
    times ``P(D)``): no restricted point is stored."""
    from scipy import stats

    from bayes_activeeval.comparison import invert_score_test

    pool, y = small
    prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"))
    for seed in range(3):
        d = prop.draw(120, rng=seed)
        res = bae.compare(pool, "error_rate", d, y[d.indices], ("m0", "m1"), proposal=prop)
        assert res.restricted is None and res.sums is not None
        lo, hi = invert_score_test(res.sums, stats.norm.ppf(0.975))
        got = res.confidence_interval(0.95, method="test")
        m = res.support_mass
        assert (got.low, got.high) == (
            float(np.clip(lo * m, -m, m)),
            float(np.clip(hi * m, -m, m)),
        )


def test_nonlinear_result_pickles_with_its_interval(small):
    """The stored draws rebuild the measure after unpickling (the difference measure holds
    closures); the interval is the same."""
    import pickle

    pool, y = small
    for measure in ("f1", "balanced_accuracy", bae.measures.get("mcc")):
        prop = bae.comparison_proposal(pool, measure, ("m0", "m1"))
        d = prop.draw(150, rng=5)
        res = bae.compare(pool, measure, d, y[d.indices], ("m0", "m1"), proposal=prop)
        back = pickle.loads(pickle.dumps(res))
        assert "_path" not in back.restricted.__dict__
        assert tuple(back.confidence_interval(0.9)) == tuple(res.confidence_interval(0.9))


def test_no_discordant_draw_gives_no_evidence(rare):
    """Passive draws where the two models' losses agree on every draw: ``Δ̂ = 0`` and the
    statistic is 0; the terms at ``R_a⁰ = R_b⁰`` were rounding noise (the exact null of
    balanced accuracy in ``benchmarks/compare_small_n.py`` was rejected 0.093 of the time at
    10 passive draws)."""
    pool, y, fa, fb = rare
    prop = bae.passive_proposal(pool)
    n_agree = 0
    for r in range(40):
        d = prop.draw(100, rng=r)
        if np.any((fa != fb)[d.indices] & (y[d.indices] == 1)):
            continue
        n_agree += 1
        for measure in ("balanced_accuracy", "f1"):
            res = bae.compare(pool, measure, d, y[d.indices], ("a", "b"), variance="score")
            assert res.statistic == 0.0 and res.pvalue == 1.0, (measure, res.statistic)
    assert n_agree >= 20


# ------------------------------------------------------------------------------------------------
# k models: multiple_comparison tests ratio measures pair by pair with the same score test
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("measure", ["f1", "mcc", "balanced_accuracy", "precision"])
@pytest.mark.parametrize("design", ["optimal", "passive"])
def test_two_models_multiple_comparison_equals_compare(small, measure, design):
    """k = 2: the pair's generalized score test, its p-value and its intervals (default and
    dual to the test, at two levels) are compare()'s, bit for bit — Tukey's and Dunnett's
    adjusted p-value of a family of one pair is the raw one; Holm, Bonferroni and "none" test at
    ``z_{1−α/2}``. With the joint Wald covariance multiple_comparison's F1 p-value was the Wald
    test's, not compare()'s."""
    pool, y = small
    models = ("m0", "m1")
    prop = (
        bae.comparison_proposal(pool, measure, models)
        if design == "optimal"
        else bae.passive_proposal(pool)
    )
    checked = 0
    for seed in range(6):
        d = prop.draw((40, 150, 400)[seed % 3], rng=seed)
        lab = y[d.indices]
        c = bae.compare(pool, measure, d, lab, models, proposal=prop)
        assert c.variance == "score" and c.restricted is not None
        for method in ("none", "holm", "bonferroni", "tukey", "dunnett"):
            kw = {"baseline": "m1"} if method == "dunnett" else {}
            m = bae.multiple_comparison(
                pool, measure, d, lab, models, proposal=prop, method=method, rng=0, **kw
            )
            assert m.variance == "score"
            assert m.statistic[0, 1] == c.statistic and m.statistic[1, 0] == -c.statistic
            assert m.pvalue[0, 1] == c.pvalue == m.raw_pvalue[0, 1]
            if method in ("tukey", "dunnett"):
                continue  # their critical value is a quantile of the simulated max-|z|
            for level, how in ((0.95, None), (0.95, "test"), (0.9, "test"), (0.9, None)):
                got = m.confidence_interval(level, method=how)
                want = c.confidence_interval(level, method=how)
                pair = (got.low[0, 1], got.high[0, 1])
                if design == "passive" and how is None:
                    # Newcombe's hybrid, built k × k at the marginal level 2Φ(c) − 1: equal to
                    # rounding (as for plain risks)
                    assert pair == pytest.approx(tuple(want), rel=1e-12, abs=1e-15)
                else:
                    assert pair == tuple(want), (method, level, how)
                    assert (got.low[1, 0], got.high[1, 0]) == (-want.high, -want.low)
                checked += 1
    assert checked == 6 * 3 * 4


def test_pairs_of_k_models_are_compare_tests(small):
    """k = 3: every pair's statistic is compare()'s on that pair (its own restricted point),
    the joint covariance of the tests is ``Σ v² ψ_p ψ_q`` (its diagonal gives the pairs' own
    tests), and ``variance="wald"`` keeps the joint delta-method covariance."""
    from bayes_activeeval.comparison.pairwise import restricted_influence

    sp = bae.datasets.make_classification_pool(3000, 0.3, n_models=3, rng=1)
    pool, y = sp.pool, np.asarray(sp.labels)
    models = pool.models
    prop = bae.comparison_proposal(pool, "f1", models)
    d = prop.draw(300, rng=2)
    lab = y[d.indices]
    mc = bae.multiple_comparison(pool, "f1", d, lab, rng=0)
    assert mc.variance == "score"
    pairs = [(0, 1), (0, 2), (1, 2)]
    psi = []
    for i, j in pairs:
        c = bae.compare(pool, "f1", d, lab, (models[i], models[j]))
        assert mc.statistic[i, j] == c.statistic
        dm, views = pool.resolve(difference("f1", models[i], models[j]))
        psi.append(restricted_influence(dm.loss(lab, views(d.indices)), d.weights, dm))
    psi = np.array(psi).T
    S = (psi * d.weights[:, None] ** 2).T @ psi
    R = S / np.sqrt(np.outer(np.diag(S), np.diag(S)))
    np.testing.assert_allclose(mc.critical.max_abs_z.R, R, rtol=1e-9)
    w = bae.multiple_comparison(pool, "f1", d, lab, variance="wald", rng=0)
    assert w.variance == "wald"
    for i, j in pairs:
        assert w.statistic[i, j] == pytest.approx(w.difference[i, j] / w.stderr[i, j])


def test_familywise_error_of_f1_with_three_models():
    """Complete null of three models (each drawn item's predictions cyclically shifted), 100
    draws of the comparison proposal: with the joint Wald covariance Tukey's family-wise error
    was far below α (0.005 on the five-model pool of ``benchmarks/comparison_type1_power.py``,
    section 3b; the Wald terms of the heavy draws where the models agree carry the estimated
    differences); with the pairs' generalized score tests it is α within 3.5 binomial
    standard errors."""
    sp = bae.datasets.make_classification_pool(3000, 0.3, n_models=3, rng=1)
    pool, y = sp.pool, np.asarray(sp.labels)
    models = pool.models
    q = bae.comparison_proposal(pool, "f1", models).q
    null, yy, prop = permuted_null(pool, y, models, q)
    rng = np.random.default_rng(11)
    reps, hits = 800, 0
    for _ in range(reps):
        d = prop.draw(100, rng)
        mc = bae.multiple_comparison(null, "f1", d, yy[d.indices], n_points=4096, rng=rng)
        hits += bool(mc.reject.any())
    se = np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert ALPHA - 3.5 * se < hits / reps < ALPHA + 3.5 * se, hits / reps
