"""Comparing models: closed forms, paired Wald test, simultaneous tests. Monte Carlo tolerances
are derived from binomial / normal Monte Carlo error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pools import binary_pool, overlap_pool, permuted_null
from scipy import stats

import bayes_activeeval as bae
from bayes_activeeval import intervals
from bayes_activeeval.beliefs import GaussianBelief, pool_belief
from bayes_activeeval.comparison import ScoreSums, disagreement, invert_score_test, wald_test
from bayes_activeeval.proposals import Draws, optimal_proposal


@pytest.fixture(scope="module")
def two():
    pool, y = binary_pool()
    return pool, y


# ------------------------------------------------------------------------------------------------
# closed forms reproduced by the general proposal (to 1e-10)
# ------------------------------------------------------------------------------------------------
def test_cor_5_1_zero_one_binary(two):
    pool, _ = two
    prop = bae.comparison_proposal(
        pool, "error_rate", ("m0", "m1"), kind="optimal", mix=0.0, belief_floor=0.0
    )
    f1, f2 = pool.view("m0").pred, pool.view("m1").pred
    p1 = 0.5 * (pool.view("m0").prob[:, 1] + pool.view("m1").prob[:, 1])  # Eq. 5.11
    m = pool.n_items
    D = (
        np.sum((1 - 2 * p1)[(f1 == 1) & (f2 == 0)]) + np.sum((2 * p1 - 1)[(f1 == 0) & (f2 == 1)])
    ) / m
    s = np.where(
        f1 > f2,
        np.sqrt(1 - 2 * D * (1 - 2 * p1) + D**2),
        np.where(f1 < f2, np.sqrt(1 + 2 * D * (1 - 2 * p1) + D**2), abs(D)),
    )
    np.testing.assert_allclose(prop.q, s / s.sum(), rtol=0, atol=1e-10 / m)
    np.testing.assert_allclose(prop.q / (s / s.sum()), 1.0, atol=1e-10)
    assert prop.info["intrinsic_difference"] == pytest.approx(D, abs=1e-12)
    # accuracy differences give the same proposal (δ → −δ)
    acc = bae.comparison_proposal(pool, "accuracy", ("m0", "m1"), mix=0.0, belief_floor=0.0)
    np.testing.assert_allclose(acc.q, prop.q, rtol=1e-10)


def test_multiclass_zero_one_closed_form():
    rng = np.random.default_rng(3)
    n, C = 3000, 4
    pa, pb = rng.dirichlet(np.ones(C), n), rng.dirichlet(np.ones(C), n)
    fa, fb = pa.argmax(1), rng.integers(0, C, n)
    pool = bae.Pool(predictions={"a": fa, "b": fb}, probs={"a": pa, "b": pb})
    prop = bae.comparison_proposal(pool, "error_rate", mix=0.0, belief_floor=0.0)
    mixp = (pa + pb) / 2
    Pa, Pb = mixp[np.arange(n), fa], mixp[np.arange(n), fb]
    D = np.mean((1 - Pa) - (1 - Pb))
    v = np.where(fa != fb, Pb * (1 - D) ** 2 + Pa * (1 + D) ** 2 + (1 - Pa - Pb) * D**2, D**2)
    s = np.sqrt(v)
    np.testing.assert_allclose(prop.q / (s / s.sum()), 1.0, atol=1e-10)


def _regression_pair(n=2000, seed=1):
    rng = np.random.default_rng(seed)
    f1, f2 = rng.normal(size=n), rng.normal(size=n)
    t1, t2 = rng.uniform(0.2, 1.5, n), rng.uniform(0.2, 1.5, n)
    pool = bae.Pool(predictions={"a": f1, "b": f2}, predictive_std={"a": t1, "b": t2})
    return pool, f1, f2, t1, t2


def test_cor_5_2_squared_loss():
    pool, f1, f2, _, _ = _regression_pair()
    rng = np.random.default_rng(2)
    mu, sig = rng.normal(size=pool.n_items), rng.uniform(0.3, 2.0, pool.n_items)
    prop = bae.comparison_proposal(
        pool, "mse", kind="optimal", belief=GaussianBelief(mu, sig), mix=0.0
    )
    F1, F2 = f1 - f2, f1**2 - f2**2
    D = np.mean(F2 - 2 * F1 * mu)
    s = np.sqrt(4 * F1**2 * (mu**2 + sig**2) - 4 * F1 * (F2 - D) * mu + (F2 - D) ** 2)
    np.testing.assert_allclose(prop.q / (s / s.sum()), 1.0, atol=1e-10)
    assert prop.info["intrinsic_difference"] == pytest.approx(D, abs=1e-10)


def test_sec_5_2_2_regression_mixture():
    pool, f1, f2, t1, t2 = _regression_pair()
    prop = bae.comparison_proposal(pool, "mse", kind="optimal", mix=0.0)
    F1 = f1 - f2
    s = np.abs(F1) * np.sqrt(F1**2 + 2 * (t1**2 + t2**2))
    np.testing.assert_allclose(prop.q / (s / s.sum()), 1.0, atol=1e-10)
    assert abs(prop.info["intrinsic_difference"]) < 1e-10  # Eqs. 5.14-5.15


def test_eq_5_16_k_models_regression_closed_form():
    rng = np.random.default_rng(4)
    n, k = 1500, 3
    f = rng.normal(size=(n, k))
    tau = rng.uniform(0.3, 1.2, (n, k))
    names = ["a", "b", "c"]
    pool = bae.Pool(
        predictions={nm: f[:, i] for i, nm in enumerate(names)},
        predictive_std={nm: tau[:, i] for i, nm in enumerate(names)},
    )
    prop = bae.comparison_proposal(pool, "mse", kind="optimal", mix=0.0)
    M1 = f.mean(1)
    M2 = (tau**2 + f**2).mean(1)  # moments of the equal k-mixture
    q = np.zeros(n)
    for i in range(k):
        for j in range(i + 1, k):
            a, b = f[:, i] - f[:, j], f[:, i] + f[:, j]
            Ed, Ed2 = a * (b - 2 * M1), a**2 * (b**2 - 4 * b * M1 + 4 * M2)
            D = Ed.mean()
            s = np.sqrt(Ed2 - 2 * D * Ed + D**2)
            q += s / s.sum()
    q /= 3
    np.testing.assert_allclose(prop.q / q, 1.0, atol=1e-10)


def test_eq_5_16_equals_mixture_of_general_pairwise(two):
    pool, _ = binary_pool(m=2000, noises=(0.3, 0.5, 0.8))
    models = ("m0", "m1", "m2")
    prop = bae.comparison_proposal(pool, "f1", models, mix=0.0, belief_floor=0.0)
    belief = pool_belief(pool, models)
    q = np.zeros(pool.n_items)
    for i in range(3):
        for j in range(i + 1, 3):
            d = bae.difference("f1", models[i], models[j])
            q += optimal_proposal(pool, d, belief=belief, mix=0.0, belief_floor=0.0).q
    np.testing.assert_allclose(prop.q, q / 3, rtol=1e-10)


def test_baselines(two):
    pool, _ = two
    f1, f2 = pool.view("m0").pred, pool.view("m1").pred
    neq = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="active_neq", mix=0.0)
    dis = f1 != f2
    np.testing.assert_allclose(neq.q, dis / dis.sum(), atol=1e-15)
    assert neq.info["support_mass"] == pytest.approx(dis.mean())
    np.testing.assert_array_equal(disagreement(pool, "error_rate", "m0", "m1"), dis)
    mixed = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="active_neq", mix=0.1)
    np.testing.assert_allclose(mixed.q, 0.9 * dis / dis.sum() + 0.1 / pool.n_items)
    # active_risk: the average of the two single-model optimal proposals
    risk = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="active_risk", mix=0.0)
    qa = optimal_proposal(pool, "error_rate", model="m0", mix=0.0).q
    qb = optimal_proposal(pool, "error_rate", model="m1", mix=0.0).q
    np.testing.assert_allclose(risk.q, (qa + qb) / 2, rtol=1e-10)
    # regression baselines
    rpool, g1, g2, _, _ = _regression_pair()
    a0 = bae.comparison_proposal(rpool, "mse", kind="active_0", mix=0.0)
    ai = bae.comparison_proposal(rpool, "mse", kind="active_inf", mix=0.0)
    np.testing.assert_allclose(a0.q, (g1 - g2) ** 2 / np.sum((g1 - g2) ** 2))
    np.testing.assert_allclose(ai.q, np.abs(g1 - g2) / np.sum(np.abs(g1 - g2)))
    with pytest.raises(ValueError, match="regression baseline"):
        bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="active_0")


# ------------------------------------------------------------------------------------------------
# the paired Wald test
# ------------------------------------------------------------------------------------------------
def test_passive_compare_is_the_paired_z_test(two):
    pool, y = two
    draws = bae.passive_proposal(pool).draw(400, rng=5)
    idx = draws.indices
    la = (pool.view("m0").pred[idx] != y[idx]).astype(float)
    lb = (pool.view("m1").pred[idx] != y[idx]).astype(float)
    d, n = la - lb, idx.size
    res = bae.compare(pool, "error_rate", draws, y[idx], models=("m0", "m1"), variance="wald")
    assert res.estimate == pytest.approx(d.mean(), abs=1e-14)
    assert res.stderr == pytest.approx(d.std() / np.sqrt(n), rel=1e-12)  # Eq. 3.22 with v = 1
    t = stats.ttest_rel(la, lb)
    assert res.statistic == pytest.approx(t.statistic * np.sqrt(n / (n - 1)), rel=1e-10)
    assert res.pvalue == pytest.approx(2 * stats.norm.sf(abs(res.statistic)), rel=1e-12)
    # one-sided p-values and interval duality (Wald)
    kw = dict(models=("m0", "m1"), variance="wald")
    less = bae.compare(pool, "error_rate", draws, y[idx], alternative="less", **kw)
    greater = bae.compare(pool, "error_rate", draws, y[idx], alternative="greater", **kw)
    assert less.pvalue + greater.pvalue == pytest.approx(1.0)
    assert res.pvalue == pytest.approx(2 * min(less.pvalue, greater.pvalue))
    lo, hi = res.confidence_interval(1 - res.pvalue, method="test")
    assert min(abs(lo), abs(hi)) == pytest.approx(0.0, abs=1e-12)
    assert less.confidence_interval(0.95).low == -np.inf
    # the default for plain risks: the null-centred (score) variance, Σδ / sqrt(Σδ²)
    sc = bae.compare(pool, "error_rate", draws, y[idx], models=("m0", "m1"))
    assert sc.variance == "score" and sc.stderr == res.stderr
    assert sc.statistic == pytest.approx(d.sum() / np.sqrt(np.sum(d * d)), rel=1e-12)
    lo, hi = sc.confidence_interval(1 - sc.pvalue, method="test")  # dual to the score test
    assert min(abs(lo), abs(hi)) == pytest.approx(0.0, abs=1e-10)
    lo, hi = sc.confidence_interval(0.95, method="test")
    wlo, whi = res.confidence_interval(0.95, method="test")
    assert lo < sc.estimate < hi and abs(lo - wlo) < 0.2 * (whi - wlo)
    assert sc.estimate < 0  # so the one-sided "less" test has p < 0.5
    one = bae.compare(pool, "error_rate", draws, y[idx], models=("m0", "m1"), alternative="less")
    assert one.confidence_interval(1 - one.pvalue).high == pytest.approx(0.0, abs=1e-10)
    # F1 (a ratio): the generalized score test by default (tests/test_comparison_nonlinear.py)
    f1 = bae.compare(pool, "f1", draws, y[idx], models=("m0", "m1"))
    assert f1.variance == "score" and f1.sums is not None
    f1s = bae.compare(pool, "f1", draws, y[idx], models=("m0", "m1"), variance="score")
    assert f1s.statistic == f1.statistic
    # per-model estimates match single-model estimates
    e0 = bae.estimate(pool, "error_rate", draws, y[idx], model="m0")
    assert res.estimates["m0"] == pytest.approx(e0.value)
    assert res.stderrs["m0"] == pytest.approx(e0.stderr)
    assert "ComparisonResult(" in repr(res) and "pvalue=" in repr(res)


@pytest.mark.parametrize(
    ("kind", "variance"),
    [("passive", "wald"), ("optimal", "wald"), ("optimal", "score"), ("active_neq", "score")],
)
def test_type_one_error_swap_protocol(two, kind, variance):
    """H0 enforced by swapping the models' predictions with prob. 1/2 per draw; the calibrated
    (thesis Eq. 3.22) variance keeps the rejection rate near α for every design (the printed
    NIPS form rejects about half the time under active_≠, Sawade (2012), Eq. 3.22 vs Sawade et al. (2012), Eq. 4)."""
    pool, y = two
    # active_neq without mixing (never draws agreement items, rescaled by |D≠|/|D|); the optimal
    # proposal with the default defensive mixture (without it, rare agreement items with huge
    # weights make the Wald test conservative at small n)
    mix = 0.0 if kind == "active_neq" else 0.05
    prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind=kind, mix=mix)
    null, yy, nprop = permuted_null(pool, y, ("m0", "m1"), prop.q)
    rng = np.random.default_rng(11)
    reps, n = 500, 300
    rej = 0
    for _ in range(reps):
        d = nprop.draw(n, rng)
        r = bae.compare(null, "error_rate", d, yy[d.indices], proposal=nprop, variance=variance)
        rej += r.pvalue < 0.05
    rate = rej / reps
    se = np.sqrt(0.05 * 0.95 / reps)
    assert 0.05 - 3.5 * se < rate < 0.05 + 3.5 * se, rate


def test_active_neq_rescaling_is_consistent(two):
    pool, y = two
    true = np.mean(pool.view("m0").pred != y) - np.mean(pool.view("m1").pred != y)
    prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="active_neq", mix=0.0)
    rng = np.random.default_rng(12)
    ests, ses, raw = [], [], []
    for _ in range(300):
        d = prop.draw(200, rng)
        r = bae.compare(pool, "error_rate", d, y[d.indices], models=("m0", "m1"), proposal=prop)
        r0 = bae.compare(pool, "error_rate", d, y[d.indices], models=("m0", "m1"))
        ests.append(r.estimate)
        ses.append(r.stderr)
        raw.append(r0.estimate)
        assert r.statistic == pytest.approx(r0.statistic)
        assert np.isnan(r.estimates["m0"])
        # without proposal= the difference is post-stratified on D from the pool itself: the
        # same estimate (the draws' weights p/q ≠ 1 say the design is not passive)
        assert r0.estimate == pytest.approx(r.estimate)
    ests = np.array(ests)
    mc_se = ests.std() / np.sqrt(ests.size)
    assert abs(ests.mean() - true) < 4 * mc_se
    assert np.mean(ses) == pytest.approx(ests.std(), rel=0.15)
    # non-linear measures cannot use a restricted proposal
    d = prop.draw(200, rng)
    with pytest.raises(ValueError, match="non-linear"):
        bae.compare(pool, "f1", d, y[d.indices], models=("m0", "m1"), proposal=prop)


def test_f1_difference_coverage(two):
    """Ratio measure (F1) by the delta method: interval coverage under the optimal proposal."""
    pool, y = two

    def f1(pred):
        tp = np.sum((pred == 1) & (y == 1))
        return 2 * tp / (np.sum(pred == 1) + np.sum(y == 1))

    true = f1(pool.view("m0").pred) - f1(pool.view("m1").pred)
    prop = bae.comparison_proposal(pool, "f1", ("m0", "m1"))
    rng = np.random.default_rng(13)
    reps = 300
    cover = 0
    for _ in range(reps):
        d = prop.draw(400, rng)
        lo, hi = bae.compare(pool, "f1", d, y[d.indices], ("m0", "m1")).confidence_interval(0.9)
        cover += lo <= true <= hi
    se = np.sqrt(0.9 * 0.1 / reps)
    assert cover / reps > 0.9 - 3.5 * se


def test_active_more_powerful_than_passive(two):
    pool, y = two
    rng = np.random.default_rng(14)
    opt = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"))
    pas = bae.passive_proposal(pool)
    rej = {"opt": 0, "pas": 0}
    for _ in range(200):
        for key, prop in (("opt", opt), ("pas", pas)):
            d = prop.draw(150, rng)
            rej[key] += bae.compare(pool, "error_rate", d, y[d.indices], ("m0", "m1")).pvalue < 0.05
    assert rej["opt"] > rej["pas"] + 20


def test_compare_bad_input(two):
    pool, y = two
    d = bae.passive_proposal(pool).draw(50, rng=0)
    with pytest.raises(TypeError, match="draws"):
        bae.compare(pool, "error_rate", d.indices, y[d.indices], ("m0", "m1"))
    with pytest.raises(ValueError, match="alternative"):
        bae.compare(pool, "error_rate", d, y[d.indices], ("m0", "m1"), alternative="both")
    with pytest.raises(ValueError, match="not in the pool"):
        bae.compare(pool, "error_rate", d, y[d.indices], ("m0", "zz"))
    with pytest.raises(ValueError, match="distinct"):
        bae.compare(pool, "error_rate", d, y[d.indices], ("m0", "m0"))
    with pytest.raises(ValueError, match="labels has 49 entries"):
        bae.compare(pool, "error_rate", d, y[d.indices][:-1], ("m0", "m1"))
    with pytest.raises(ValueError, match="already bound"):
        bae.compare(pool, bae.difference("error_rate", "m0", "m1"), d, y[d.indices], ("m0", "m1"))
    three, y3 = binary_pool(m=100, noises=(0.3, 0.5, 0.8))
    d3 = bae.passive_proposal(three).draw(20, rng=0)
    with pytest.raises(ValueError, match="name the two"):
        bae.compare(three, "error_rate", d3, y3[d3.indices])
    with pytest.raises(ValueError, match="the draws are of another pool"):  # d: of `pool`
        bae.compare(three, "error_rate", d, y[d.indices], ("m0", "m1"))
    with pytest.raises(ValueError, match="kind must be"):
        bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="best")
    with pytest.raises(ValueError, match="mix"):
        bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), mix=1.5)


# ------------------------------------------------------------------------------------------------
# k models
# ------------------------------------------------------------------------------------------------
def _orthogonal_groups(n=2000, means=(3.0, 3.04, 3.09, 3.1), sd=0.5, seed=0):
    """k independent equal-variance groups mapped onto a pool: model i's absolute error on item
    x is ``e_i(x)`` (labels 0, measure MAE), with exactly uncorrelated, equal-variance columns,
    so the estimated joint covariance is ``σ²/n · I`` as the ANOVA model assumes."""
    rng = np.random.default_rng(seed)
    k = len(means)
    Z = rng.standard_normal((n, k))
    Z -= Z.mean(0)
    Q, _ = np.linalg.qr(Z)
    E = np.asarray(means)[None, :] + sd * np.sqrt(n) * Q
    assert E.min() > 0
    names = [f"g{i}" for i in range(k)]
    pool = bae.Pool(
        predictions={nm: E[:, i] for i, nm in enumerate(names)},
        predictive_std={nm: np.ones(n) for nm in names},
    )
    draws = Draws(np.arange(n), np.ones(n), np.full(n, 1.0 / n))
    return pool, draws, np.zeros(n), E, names


def test_tukey_agrees_with_statsmodels_and_scipy():
    from statsmodels.stats.multicomp import pairwise_tukeyhsd

    pool, draws, labels, E, names = _orthogonal_groups()
    n, k = E.shape
    # the ANOVA model behind statsmodels/scipy is the Wald (estimate-centred) variance
    kw = dict(variance="wald")
    sr = bae.multiple_comparison(
        pool, "mae", draws, labels, method="studentized_range", df=k * (n - 1), **kw
    )
    tk = bae.multiple_comparison(pool, "mae", draws, labels, method="tukey", rng=0, **kw)
    np.testing.assert_allclose(np.diag(tk.cov), np.full(k, E.var(0)[0] / n), rtol=1e-10)
    sm = pairwise_tukeyhsd(E.T.ravel(), np.repeat(names, n), alpha=0.05)
    sc = stats.tukey_hsd(*E.T)
    sc_ci = sc.confidence_interval(0.95)
    r = 0
    for i in range(k):
        for j in range(i + 1, k):
            # statsmodels reports mean(j) - mean(i); SE differs by sqrt((n-1)/n) (biased variance)
            assert sr.pvalue[i, j] == pytest.approx(sm.pvalues[r], abs=2e-3)
            assert tk.pvalue[i, j] == pytest.approx(sm.pvalues[r], abs=2e-3)
            assert -sr.difference[i, j] == pytest.approx(sm.meandiffs[r], rel=1e-10)
            lo, hi = sr.confidence_interval()
            np.testing.assert_allclose([-hi[i, j], -lo[i, j]], sm.confint[r], atol=2e-4)
            assert sr.pvalue[i, j] == pytest.approx(sc.pvalue[i, j], abs=2e-3)
            assert sr.difference[i, j] == pytest.approx(sc.statistic[i, j], rel=1e-10)
            lo, hi = tk.confidence_interval()
            np.testing.assert_allclose(
                [lo[i, j], hi[i, j]], [sc_ci.low[i, j], sc_ci.high[i, j]], atol=4e-4
            )
            r += 1
    assert np.array_equal(sr.reject, tk.reject)


def test_max_abs_z_engines_match_studentized_range():
    pool, draws, labels, E, _ = _orthogonal_groups(n=500, means=(3.0, 3.05, 3.08, 3.12))
    k = E.shape[1]
    kw = dict(variance="wald")
    a = bae.multiple_comparison(pool, "mae", draws, labels, method="tukey", rng=1, **kw)
    b = bae.multiple_comparison(
        pool, "mae", draws, labels, method="tukey", engine="scipy", rng=1, **kw
    )
    c = bae.multiple_comparison(pool, "mae", draws, labels, method="studentized_range", **kw)
    iu = np.triu_indices(k, 1)
    np.testing.assert_allclose(a.pvalue[iu], c.pvalue[iu], atol=1e-3)
    np.testing.assert_allclose(b.pvalue[iu], c.pvalue[iu], atol=1.5e-3)
    assert a.critical_value == pytest.approx(
        stats.studentized_range.ppf(0.95, k, np.inf) / np.sqrt(2), abs=5e-3
    )


def test_dunnett_agrees_with_scipy():
    pool, draws, labels, E, _ = _orthogonal_groups()
    res = bae.multiple_comparison(
        pool, "mae", draws, labels, method="dunnett", baseline="g0", rng=0, variance="wald"
    )
    ref = stats.dunnett(*E.T[1:], control=E[:, 0])
    for i in range(1, E.shape[1]):
        assert res.pvalue[i, 0] == pytest.approx(ref.pvalue[i - 1], abs=2e-3)
        assert res.difference[i, 0] == pytest.approx(E[:, i].mean() - E[:, 0].mean(), rel=1e-10)
    assert np.isnan(res.pvalue[1, 2])
    ci = ref.confidence_interval(0.95)
    lo, hi = res.confidence_interval()
    np.testing.assert_allclose(lo[1:, 0], ci.low, atol=5e-4)
    np.testing.assert_allclose(hi[1:, 0], ci.high, atol=5e-4)


def test_holm_bonferroni_match_statsmodels(two):
    from statsmodels.stats.multitest import multipletests

    pool, y = binary_pool(m=3000, noises=(0.3, 0.5, 0.6, 0.9))
    prop = bae.comparison_proposal(pool, "accuracy")
    d = prop.draw(600, rng=3)
    none = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method="none")
    iu = np.triu_indices(4, 1)
    raw = none.pvalue[iu]
    for meth in ("holm", "bonferroni"):
        res = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method=meth)
        np.testing.assert_allclose(res.pvalue[iu], multipletests(raw, method=meth)[1], rtol=1e-12)
    tk = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], rng=0)
    # single-step max-|z| is between the unadjusted and the Bonferroni p-values
    bon = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method="bonferroni")
    assert np.all(tk.pvalue[iu] >= raw - 1e-12) and np.all(tk.pvalue[iu] <= bon.pvalue[iu] + 1e-12)
    # tables, text, ranking
    ds = tk.to_dataset()
    assert set(ds.data_vars) >= {"statistic", "pvalue", "lower", "upper", "reject"}
    assert len(tk.to_frame()) == 6
    txt = str(tk)
    assert "ranking" in txt and "m0" in txt
    assert tk.ranking().index[0] == tk.best(rng=0).model


def test_familywise_error_k4():
    pool, y = binary_pool(m=3000, noises=(0.3, 0.5, 0.6, 0.9), seed=5)
    models = ("m0", "m1", "m2", "m3")
    q = bae.comparison_proposal(pool, "error_rate", models, mix=0.1).q
    null, yy, nprop = permuted_null(pool, y, models, q)
    rng = np.random.default_rng(21)
    reps = 250
    fw = {"tukey": 0, "tukey_wald": 0, "holm": 0, "none": 0}
    for _ in range(reps):
        d = nprop.draw(400, rng)
        for key in fw:
            meth, _, var = key.partition("_")
            r = bae.multiple_comparison(
                null,
                "error_rate",
                d,
                yy[d.indices],
                method=meth,
                variance=var or "auto",
                n_points=4096,
                rng=rng,
            )
            fw[key] += bool(r.reject.any())
            if meth != "holm":  # the "test" intervals are dual to the single-step tests
                lo, hi = r.confidence_interval(method="test")
                iu = np.triu_indices(4, 1)
                np.testing.assert_array_equal((lo[iu] > 0) | (hi[iu] < 0), r.reject[iu])
    se = np.sqrt(0.05 * 0.95 / reps)
    assert fw["tukey"] / reps < 0.05 + 3 * se
    assert fw["tukey_wald"] / reps < 0.05 + 3 * se
    assert fw["holm"] <= fw["tukey"] + 3
    assert fw["none"] / reps > 0.1  # six uncorrected tests inflate the family-wise error


def test_best_model_probability():
    pool, y = binary_pool(m=3000, noises=(0.2, 0.9, 1.5))
    d = bae.comparison_proposal(pool, "error_rate").draw(800, rng=4)
    res = bae.multiple_comparison(pool, "error_rate", d, y[d.indices])
    best = res.best(rng=0)
    assert best.model == "m0" and best.probability > 0.9
    assert best.probabilities.sum() == pytest.approx(1.0)
    post = np.random.default_rng(0).normal(res.estimates, res.stderrs, size=(4000, 3))
    pb = res.best(posterior=post)
    assert pb.source == "posterior" and pb.probability == pytest.approx(best.probability, abs=0.05)
    import xarray as xr

    da = xr.DataArray(
        post.reshape(2, 2000, 3),
        dims=("chain", "draw", "model"),
        coords={"model": ["m0", "m1", "m2"]},
    )
    assert res.best(posterior=da).probability == pytest.approx(pb.probability)
    with pytest.raises(ValueError, match="shape"):
        res.best(posterior=post[:, :2])
    rp = res.rank_probabilities(rng=1)
    np.testing.assert_allclose(rp.sum(axis=0), 1.0)
    np.testing.assert_allclose(rp.sum(axis=1), 1.0)
    assert rp.loc["m0", 1] == pytest.approx(best.probability, abs=0.02)


def test_multiple_comparison_bad_input(two):
    pool, y = binary_pool(m=500, noises=(0.3, 0.5, 0.8))
    d = bae.passive_proposal(pool).draw(100, rng=0)
    with pytest.raises(ValueError, match="method must be"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method="scheffe")
    with pytest.raises(ValueError, match="needs baseline"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method="dunnett")
    with pytest.raises(ValueError, match="not one of the models"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method="holm", baseline="x")
    with pytest.raises(ValueError, match="compares all pairs"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], baseline="m0")
    with pytest.raises(ValueError, match="level"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], level=95)
    with pytest.raises(ValueError, match="engine"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], engine="genz")
    neq = bae.comparison_proposal(pool, "accuracy", kind="active_neq", mix=0.0)
    with pytest.raises(ValueError, match="full support"):
        bae.multiple_comparison(pool, "accuracy", d, y[d.indices], proposal=neq)


def test_regression_comparison_unbiased_and_calibrated():
    from bayes_activeeval.datasets import make_regression_pool

    data = make_regression_pool(5000, n_models=2, rng=7)
    pool, y = data.pool, data.labels
    true = np.mean((pool.view("m0").pred - y) ** 2) - np.mean((pool.view("m1").pred - y) ** 2)
    rng = np.random.default_rng(17)
    for kind in ("optimal", "active_inf"):
        prop = bae.comparison_proposal(pool, "mse", kind=kind)
        ests, cover = [], 0
        for _ in range(200):
            d = prop.draw(300, rng)
            r = bae.compare(pool, "mse", d, y[d.indices], proposal=prop)
            ests.append(r.estimate)
            lo, hi = r.confidence_interval(0.9)
            cover += lo <= true <= hi
        ests = np.array(ests)
        assert abs(ests.mean() - true) < 4 * ests.std() / np.sqrt(ests.size), kind
        assert cover / 200 > 0.9 - 3.5 * np.sqrt(0.09 / 200), kind


def test_adaptive_comparison_with_active_evaluator(two):
    """A difference is an ordinary measure for ActiveEvaluator (Marchant & Rubinstein (2021),
    Alg. 1): the adaptive estimate of Δ is unbiased within Monte Carlo error and its interval
    covers — with a defensive mixture (with the default ε-floor only, rare agreement items get
    huge weights and the 90% interval covered about 0.78 at 200 labels)."""
    pool, y = two
    true = np.mean(pool.view("m0").pred != y) - np.mean(pool.view("m1").pred != y)
    diff = bae.difference("error_rate", "m0", "m1")
    ests, cover = [], 0
    reps = 80
    for r in range(reps):
        ev = bae.ActiveEvaluator(pool, diff, mix=0.05, rng=r)
        est = ev.run(lambda i: y[i], budget=200, progress=False)
        ests.append(est.value)
        lo, hi = est.confidence_interval(0.9)
        cover += lo <= true <= hi
    ests = np.array(ests)
    assert abs(ests.mean() - true) < 4 * ests.std() / np.sqrt(reps)
    assert cover / reps > 0.9 - 3.5 * np.sqrt(0.09 / reps)


# ------------------------------------------------------------------------------------------------
# result objects: one sums type, one inversion, data not closures
# ------------------------------------------------------------------------------------------------
def test_multiple_comparison_result_pickles(two):
    import pickle

    pool, y = two
    d = bae.comparison_proposal(pool, "error_rate").draw(400, rng=2)
    for method, baseline in (("tukey", None), ("dunnett", "m0"), ("studentized_range", None)):
        mc = bae.multiple_comparison(
            pool, "error_rate", d, y[d.indices], method=method, baseline=baseline, rng=0
        )
        back = pickle.loads(pickle.dumps(mc))
        for level in (None, 0.9):
            a, b = mc.confidence_interval(level), back.confidence_interval(level)
            np.testing.assert_array_equal(a.low, b.low)
            np.testing.assert_array_equal(a.high, b.high)


def test_score_sums_agree_between_two_and_k_models(two):
    pool, y = two
    d = bae.comparison_proposal(pool, "error_rate").draw(400, rng=3)
    pair = bae.compare(pool, "error_rate", d, y[d.indices], models=("m0", "m1"), variance="score")
    mc = bae.multiple_comparison(
        pool, "error_rate", d, y[d.indices], method="none", variance="score"
    )
    for f in ("A", "W", "B", "C", "D"):
        k_models = getattr(mc.sums, f)  # k × k tables, or scalars shared by every pair
        got = np.ravel(k_models)[1] if np.ndim(k_models) else k_models
        np.testing.assert_allclose(got, getattr(pair.sums, f), rtol=1e-9)
    lo, hi = mc.confidence_interval(0.95, method="test")
    np.testing.assert_allclose(
        [lo[0, 1], hi[0, 1]], list(pair.confidence_interval(0.95, method="test")), rtol=1e-9
    )
    # method "none" with k = 2: the default interval is compare's (Newcombe's hybrid)
    lo, hi = mc.confidence_interval(0.95)
    np.testing.assert_allclose([lo[0, 1], hi[0, 1]], list(pair.confidence_interval(0.95)))
    np.testing.assert_allclose([lo[1, 0], hi[1, 0]], [-hi[0, 1], -lo[0, 1]])


def test_multiple_comparison_resolves_variance_as_compare(two):
    """Issue 13, item 4: one resolution of ``variance`` for compare and multiple_comparison —
    checked through the variance each actually used (its statistic), not only the label."""
    pool, y = two
    d = bae.comparison_proposal(pool, "error_rate", mix=0.1).draw(300, rng=2)
    lab = y[d.indices]
    # a ratio measure takes the generalized score test in both (its influence terms at a
    # null-restricted point; multiple_comparison used the joint Wald covariance before)
    for measure, auto in (("error_rate", "score"), ("accuracy", "score"), ("f1", "score")):
        for variance in ("auto", "wald"):
            c = bae.compare(pool, measure, d, lab, models=("m0", "m1"), variance=variance)
            mc = bae.multiple_comparison(
                pool, measure, d, lab, models=("m0", "m1"), variance=variance, rng=0
            )
            used = auto if variance == "auto" else variance
            assert mc.variance == used
            assert c.variance == used
            # k = 2: the pair's statistic is compare's (the score form Σvδ/sqrt(Σv²δ²) or the
            # Wald Δ̂/SE), so the two functions used the same variance
            assert mc.statistic[0, 1] == pytest.approx(c.statistic, rel=1e-10)
            assert mc.raw_pvalue[0, 1] == pytest.approx(c.pvalue, rel=1e-8)
    # the score and the Wald forms differ on this sample (so the check above can tell them apart)
    s = bae.multiple_comparison(pool, "error_rate", d, lab, models=("m0", "m1"), rng=0)
    w = bae.multiple_comparison(
        pool, "error_rate", d, lab, models=("m0", "m1"), variance="wald", rng=0
    )
    assert abs(s.statistic[0, 1] - w.statistic[0, 1]) > 1e-3
    f = bae.multiple_comparison(pool, "f1", d, lab, models=("m0", "m1"), variance="score", rng=0)
    fw = bae.multiple_comparison(pool, "f1", d, lab, models=("m0", "m1"), variance="wald", rng=0)
    assert f.variance == "score" and abs(f.statistic[0, 1] - fw.statistic[0, 1]) > 1e-3


def test_compare_interval_is_newcombe_inside_the_range(two):
    """Issue 13: Newcombe's hybrid of the two models' own intervals for a difference of a
    bounded measure — inside [-1, 1], not a point when every draw agrees; the default under
    passive sampling (under an active proposal the default is the test's interval)."""
    pool, y = two
    d = bae.comparison_proposal(pool, "accuracy", mix=0.1).draw(200, rng=4)
    lab = y[d.indices]
    res = bae.compare(pool, "accuracy", d, lab, models=("m0", "m1"))
    assert not res.equal_weights
    assert res.confidence_interval(0.95) == res.confidence_interval(0.95, method="test")
    ci = res.model_intervals(0.95)
    lo, hi = res.confidence_interval(0.95, method="newcombe")
    ref = bae.intervals.newcombe_difference(
        (res.estimates["m0"], res.estimates["m1"]),
        (tuple(ci["m0"]), tuple(ci["m1"])),
        res.per_model.cov[0, 1] / np.prod(res.per_model.stderrs),
        (-1.0, 1.0),
    )
    assert (lo, hi) == pytest.approx((float(ref[0]), float(ref[1])), rel=1e-12)
    # the models' own intervals are the estimates' default intervals (what `bae status` prints)
    for m in ("m0", "m1"):
        own = bae.estimate(pool, "accuracy", d, lab, model=m).confidence_interval(0.95)
        assert tuple(ci[m]) == pytest.approx(tuple(own), rel=1e-12)
    test_lo, test_hi = res.confidence_interval(0.95, method="test")
    assert test_lo < res.estimate < test_hi
    # every draw agrees (both models right): the test's interval is the point 0, Newcombe's not
    same = bae.Pool(
        predictions={"a": pool.view("m0").pred, "b": pool.view("m0").pred},
        probs={"a": pool.view("m0").prob, "b": pool.view("m0").prob},
        classes=[0, 1],
    )
    dd = bae.passive_proposal(same).draw(30, rng=1)
    yy = same.view("a").pred[dd.indices]
    r = bae.compare(same, "accuracy", dd, yy, models=("a", "b"))
    assert r.equal_weights
    lo, hi = r.confidence_interval(0.95)
    assert -1.0 <= lo < 0.0 < hi <= 1.0
    assert r.confidence_interval(0.95, method="test") == (0.0, 0.0)
    # F1: every interval inside [-1, 1]; one-sided tests keep their one-sided interval
    f1 = bae.compare(pool, "f1", d, lab, models=("m0", "m1"))
    lo, hi = f1.confidence_interval(0.95)
    assert -1.0 <= lo < f1.estimate < hi <= 1.0
    less = bae.compare(pool, "accuracy", d, lab, models=("m0", "m1"), alternative="less")
    assert less.confidence_interval(0.95).low == -np.inf
    with pytest.raises(ValueError, match="method must be"):
        res.confidence_interval(0.95, method="wald")


def _sparse_error_pool(m=5000, errors=(5, 15, 25, 50), seed=0):
    """Four models right on all but ``errors`` items each: accuracies 0.999 … 0.99."""
    rng = np.random.default_rng(seed)
    y = (rng.random(m) < 0.3).astype(int)
    preds, probs = {}, {}
    for j, e in enumerate(errors):
        pred = y.copy()
        w = rng.choice(m, e, replace=False)
        pred[w] = 1 - pred[w]
        preds[f"m{j}"] = pred
        probs[f"m{j}"] = np.where(pred == 1, 0.97, 0.03)
    return bae.Pool(predictions=preds, probs=probs, classes=[0, 1]), y


@pytest.mark.parametrize("case", ["boundary", "moderate"])
def test_simultaneous_intervals_familywise_coverage(case):
    """k = 4 models: the default simultaneous intervals (Newcombe's hybrid per pair at the
    max-|z| critical value of the joint covariance) cover all six true differences at once with
    probability >= level, inside [-1, 1] and never a point — also near the bound, where the
    intervals dual to the tests collapse (every draw agrees on most pairs) and under-cover."""
    if case == "boundary":
        pool, y = _sparse_error_pool()
        prop, n = bae.passive_proposal(pool), 150
    else:
        pool, y = binary_pool(m=3000, noises=(0.3, 0.5, 0.6, 0.9), seed=5)
        prop, n = bae.comparison_proposal(pool, "accuracy", mix=0.1), 300
    acc = np.array([np.mean(pool.view(f"m{j}").pred == y) for j in range(4)])
    true = acc[:, None] - acc[None, :]
    iu = np.triu_indices(4, 1)
    rng = np.random.default_rng(7)
    reps = 300
    hit = {"newcombe": 0, "test": 0}
    for _ in range(reps):
        d = prop.draw(n, rng)
        mc = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], n_points=4096, rng=rng)
        for method in hit:
            lo, hi = mc.confidence_interval(method=method)
            hit[method] += bool(np.all((lo[iu] <= true[iu]) & (true[iu] <= hi[iu])))
        lo, hi = mc.confidence_interval()
        assert np.all((-1.0 <= lo[iu]) & (lo[iu] < hi[iu]) & (hi[iu] <= 1.0))
        np.testing.assert_allclose(lo.T[iu], -hi[iu])  # (j, i) mirrors (i, j)
    se = np.sqrt(0.05 * 0.95 / reps)
    assert hit["newcombe"] / reps >= 0.95 - 3 * se
    if case == "boundary":
        assert hit["test"] / reps < 0.5  # the Wald/score intervals collapse near the bound


def test_simultaneous_interval_critical_value():
    """The default intervals' critical value: the max-|z| quantile of the family under the
    estimates' covariance, between the per-pair and the Bonferroni quantile; Bonferroni's where
    a contrast has SE = 0; with method="none" the per-pair z, with k = 2 compare's interval."""
    pool, y = binary_pool(m=3000, noises=(0.3, 0.5, 0.6, 0.9), seed=5)
    d = bae.comparison_proposal(pool, "accuracy", mix=0.1).draw(300, rng=1)
    for variance in ("auto", "wald"):
        mc = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], variance=variance, rng=0)
        c = mc.interval_critical_value()
        assert stats.norm.ppf(0.975) < c < stats.norm.ppf(1 - 0.025 / 6)
        if variance == "wald":
            assert c == pytest.approx(mc.critical_value)
    none = bae.multiple_comparison(pool, "accuracy", d, y[d.indices], method="none")
    assert none.interval_critical_value() == pytest.approx(stats.norm.ppf(0.975))
    # every draw agrees on every pair: Bonferroni, and intervals of positive width
    pool0, y0 = _sparse_error_pool(errors=(1, 1, 1, 1))
    d0 = bae.passive_proposal(pool0).draw(20, rng=0)
    y_d = y0[d0.indices]
    assert all(np.all(pool0.view(f"m{j}").pred[d0.indices] == y_d) for j in range(4))
    mc0 = bae.multiple_comparison(pool0, "accuracy", d0, y_d, rng=0)
    assert mc0.interval_critical_value() == pytest.approx(stats.norm.ppf(1 - 0.025 / 6))
    lo, hi = mc0.confidence_interval()
    iu = np.triu_indices(4, 1)
    assert np.all((lo[iu] < 0) & (hi[iu] > 0))
    assert np.all(mc0.pvalue[iu] == 1.0)
    with pytest.raises(ValueError, match="method must be"):
        mc0.confidence_interval(method="wald")
    auc = bae.multiple_comparison(pool, "roc_auc", d, y[d.indices], rng=0)
    assert auc.per_model is None
    with pytest.raises(ValueError, match="needs a measure with a bounded range"):
        auc.confidence_interval(method="newcombe")


# ------------------------------------------------------------------------------------------------
# the default interval, the score-test inversion and the checks of compare agree with the test
# ------------------------------------------------------------------------------------------------
def _nested_pools():
    """b's errors are a's plus 150 more (Δ = −0.03 on 5000 items); three models for k > 2."""
    pool, y = overlap_pool(errors=(500, 650), overlap=500)
    rng = np.random.default_rng(0)
    perm = rng.permutation(y.size)
    preds = {}
    for name, extra in (("m0", 0), ("m1", 150), ("m2", 75)):
        pred = y.copy()
        pred[perm[: 500 + extra]] ^= 1
        preds[name] = pred
    probs = {
        k: np.clip(np.where(v == 1, 0.7, 0.3) + rng.normal(0, 0.1, y.size), 0.01, 0.99)
        for k, v in preds.items()
    }
    return (pool, y), (bae.Pool(predictions=preds, probs=probs, classes=[0, 1]), y)


def test_default_interval_agrees_with_the_test_under_an_active_proposal():
    """Under the default (active) comparison proposal the default interval is the one dual to
    the test: Newcombe's, built from the two models' wide and skewed own intervals, contained 0
    in every run although p < 0.01 (correlation of the two estimates ~0.99). Passive draws (equal
    weights) keep Newcombe's interval as the default."""
    (pool, y), (pool3, y3) = _nested_pools()
    prop = bae.comparison_proposal(pool, "error_rate")
    newcombe_has_0 = 0
    for r in range(20):
        d = prop.draw(200, rng=r)
        res = bae.compare(pool, "error_rate", d, y[d.indices])
        assert not res.equal_weights and res.pvalue < 0.01
        lo, hi = res.confidence_interval(0.95)
        tlo, thi = res.confidence_interval(0.95, method="test")
        if thi - tlo > 1e-6 * 2 * res.support_mass:
            assert (lo, hi) == (tlo, thi)
        else:  # m0 loses on every drawn item of D: Wilson on D's draws, never a point
            assert tlo == pytest.approx(res.estimate) and hi - lo > 1e-3
        assert -1.0 <= lo <= res.estimate < hi < 0.0
        nlo, nhi = res.confidence_interval(0.95, method="newcombe")
        newcombe_has_0 += bool(nlo <= 0.0 <= nhi)
    assert newcombe_has_0 >= 15  # what the default interval used to be
    d = bae.passive_proposal(pool).draw(400, rng=0)
    res = bae.compare(pool, "error_rate", d, y[d.indices])
    assert res.equal_weights
    assert res.confidence_interval(0.95) == res.confidence_interval(0.95, method="newcombe")
    # k models: the table's intervals exclude 0 exactly for the rejected pairs
    prop3 = bae.comparison_proposal(pool3, "error_rate")
    for r in range(2):
        d = prop3.draw(300, rng=r)
        for method, baseline in (("tukey", None), ("dunnett", "m0"), ("none", None)):
            mc = bae.multiple_comparison(
                pool3, "error_rate", d, y3[d.indices], method=method, baseline=baseline,
                n_points=4096, rng=0,
            )  # fmt: skip
            assert not mc.equal_weights
            f = mc.to_frame()
            assert f.reject.all()  # every pair differs clearly (p < 1e-6)
            assert np.all((f.lower > 0) | (f.upper < 0))
    d = bae.passive_proposal(pool3).draw(300, rng=0)
    mc = bae.multiple_comparison(pool3, "error_rate", d, y3[d.indices], n_points=4096, rng=0)
    assert mc.equal_weights
    np.testing.assert_array_equal(
        mc.confidence_interval().low, mc.confidence_interval(method="newcombe").low
    )


def _score_stat(sums, d0):
    return (sums.A - sums.W * d0) / np.sqrt(sums.B - 2 * sums.C * d0 + sums.D * d0 * d0)


def test_score_interval_is_dual_when_the_effective_size_is_below_z2():
    """When W²/D < z² the Δ0 the score test accepts are two rays; the interval used to be the
    whole line even where the test rejected Δ = 0. It is now the whole range when the test does
    not reject and the ray on the estimate's side when it does."""
    z = stats.norm.ppf(0.975)
    # two heavy draws where the models agree, six light ones where a is worse: ESS ≈ 2.2
    v = np.array([10.0, 10.0] + [0.5] * 6)
    delta = np.array([0.0, 0.0] + [1.0] * 6)
    sums = ScoreSums(
        A=v @ delta, W=v.sum(), B=(v * v) @ delta**2, C=(v * v) @ delta, D=(v * v).sum()
    )
    assert sums.W**2 / sums.D < z * z and abs(_score_stat(sums, 0.0)) > z
    lo, hi = invert_score_test(sums, z)
    assert 0.0 < lo <= sums.A / sums.W and hi == np.inf
    grid = np.linspace(lo, lo + 5, 200)
    assert np.all(np.abs(_score_stat(sums, grid)) <= z + 1e-9)  # inside: accepted
    assert abs(_score_stat(sums, lo * (1 - 1e-6))) > z - 1e-6  # lo is the boundary
    neg = ScoreSums(A=-sums.A, W=sums.W, B=sums.B, C=-sums.C, D=sums.D)
    assert invert_score_test(neg, z) == pytest.approx((-np.inf, -lo))
    # the test does not reject Δ = 0: the whole line, even where two rays are accepted
    assert invert_score_test(sums, 3.0) == (-np.inf, np.inf)
    # end to end: 50 draws of the default proposal on a pool without difference
    pool, y = overlap_pool()
    prop = bae.comparison_proposal(pool, "error_rate")
    thin = 0
    for r in range(100):
        d = prop.draw(50, rng=r)
        res = bae.compare(pool, "error_rate", d, y[d.indices])
        for level in (0.95, 0.99):
            lo, hi = res.confidence_interval(level, method="test")
            assert (res.pvalue < 1 - level) == (not lo <= 0.0 <= hi)
        thin += res.pvalue < 0.05 and res.sums.W**2 / res.sums.D < z * z
        for alt in ("less", "greater"):
            one = bae.compare(pool, "error_rate", d, y[d.indices], alternative=alt)
            lo, hi = one.confidence_interval(0.95)
            assert (one.pvalue < 0.05) == (not lo <= 0.0 <= hi)
        mc = bae.multiple_comparison(pool, "error_rate", d, y[d.indices], method="none")
        lo, hi = mc.confidence_interval(method="test")
        assert mc.reject[0, 1] == (not lo[0, 1] <= 0.0 <= hi[0, 1])
    # with every draw in the sums the case arose in 5 of these 100 runs (heavy draws where the
    # models agree); post-stratified on D those draws no longer enter the sums
    assert thin == 0


def test_compare_threshold_free_checks_the_proposal_and_clips(two):
    pool, y = two
    pair = ("m0", "m1")
    neq = bae.comparison_proposal(pool, "error_rate", pair, kind="active_neq", mix=0.0)
    d = neq.draw(300, rng=0)
    with pytest.raises(ValueError, match=r"zero mass.*'roc_auc'.*full support"):
        bae.compare(pool, "roc_auc", d, y[d.indices], pair, proposal=neq)
    with pytest.raises(ValueError, match=r"zero mass.*'average_precision'.*full support"):
        bae.compare(pool, "average_precision", d, y[d.indices], pair, proposal=neq)
    small = bae.passive_proposal(binary_pool(m=100)[0])
    d = bae.passive_proposal(pool).draw(20, rng=3)
    with pytest.raises(ValueError, match="proposal covers 100 items but the pool has 4000"):
        bae.compare(pool, "roc_auc", d, y[d.indices], pair, proposal=small)
    # a good and a nearly random scorer on 30 draws: the Wald interval leaves [-1, 1]
    pool, y = binary_pool(m=2000, noises=(0.1, 10.0), seed=2)
    d = bae.passive_proposal(pool).draw(30, rng=0)
    res = bae.compare(pool, "roc_auc", d, y[d.indices], pair, proposal=bae.passive_proposal(pool))
    assert res.difference_bounds == (-1.0, 1.0)
    level = 1 - 1e-12
    h = stats.norm.ppf(0.5 + level / 2) * res.stderr
    assert res.estimate + h > 1.0 or res.estimate - h < -1.0  # the Wald interval leaves [-1, 1]
    lo, hi = res.confidence_interval(level)
    assert -1.0 <= lo < res.estimate < hi <= 1.0


def test_wald_test_refuses_a_negative_standard_error():
    with pytest.raises(ValueError, match=r"stderr must be non-negative, got -0\.1"):
        wald_test(0.3, -0.1)
    with pytest.raises(ValueError, match="stderr must be non-negative"):
        wald_test(0.0, -5.0, "less")
    z, p = wald_test(0.3, np.nan)
    assert np.isnan(z) and np.isnan(p)
    assert wald_test(0.0, 0.0) == (0.0, 1.0)
    assert wald_test(0.3, 0.1) == pytest.approx((3.0, 2 * stats.norm.sf(3.0)))


def test_passive_design_is_read_from_the_proposal_not_the_draws():
    """A proposal with two levels of q can draw items of one level only: the draws' weights are
    then equal, but the design is not passive, and the default interval must be the test-dual
    one (it defaulted to Newcombe's in 45 of 300 such runs)."""
    from bayes_activeeval.comparison.results import has_equal_weights
    from bayes_activeeval.proposals import Proposal

    p = np.full(10, 0.1)
    q = np.r_[np.full(5, 0.19), np.full(5, 0.01)]
    prop = Proposal(q, p, "two-levels")
    w = np.full(4, 0.1 / 0.19)  # four draws, all from the first level
    assert has_equal_weights(w) and not has_equal_weights(w, prop)
    assert has_equal_weights(w, Proposal(p.copy(), p, "passive"))
    assert not has_equal_weights(w, Proposal(np.r_[np.zeros(1), np.full(9, 1 / 9)], p, "gap"))


def test_default_interval_is_never_a_point_when_every_draw_is_discordant_one_way():
    # a comparison proposal's first draws may all fall where the models disagree, every paired
    # difference +1. Before, the self-normalized estimate was then 1.0 (the difference on D, not
    # on the pool) for a truth of P(D) = 0.121; post-stratified it is P(D)·1. The test's interval
    # is the point Δ̂; the default is Wilson's on the Kish size of D's draws, times P(D)
    from bayes_activeeval.proposals import Draws

    rng = np.random.default_rng(3)
    n = 2000
    y = (rng.random(n) < 0.3).astype(int)
    fb = np.where(rng.random(n) < 0.1, 1 - y, y)
    pool = bae.Pool(
        predictions={"a": y, "b": fb},
        probs={"a": np.where(y == 1, 0.9, 0.1), "b": np.where(fb == 1, 0.8, 0.2)},
        classes=[0, 1],
    )
    truth = float(np.mean(fb != y))
    prop = bae.comparison_proposal(pool, "accuracy", models=("a", "b"))
    dis = np.flatnonzero(fb != y)[:20]
    d = Draws(indices=dis, weights=prop.p[dis] / prop.q[dis], q=prop.q[dis])
    for kw in ({"proposal": prop}, {}):  # the weights p/q ≠ 1 say it is not passive
        res = bae.compare(pool, "accuracy", d, y[dis], models=("a", "b"), **kw)
        assert res.estimate == pytest.approx(truth) and res.support_mass == pytest.approx(truth)
        test_ci = res.confidence_interval(method="test")
        assert test_ci.low == pytest.approx(test_ci.high)  # dual to the test: the point
        lo, hi = res.confidence_interval()
        kish = res.stratum_size
        assert kish == pytest.approx(20.0)  # equal weights on D
        w_lo, _ = intervals.wilson(1.0, kish)
        assert (lo, hi) == pytest.approx((truth * (2 * w_lo - 1), truth))
        assert 0 < lo < hi == pytest.approx(truth)  # excludes 0, as the test (p < 1e-4) does
        assert res.pvalue < 1e-4
    # no draw in D: no evidence, the whole range P(D)·[-1, 1]
    agree = np.flatnonzero(fb == y)[:20]
    d0 = Draws(indices=agree, weights=prop.p[agree] / prop.q[agree], q=prop.q[agree])
    res = bae.compare(pool, "accuracy", d0, y[agree], models=("a", "b"))
    assert res.estimate == 0.0 and res.pvalue == 1.0 and res.stratum_size == 0.0
    assert tuple(res.confidence_interval()) == pytest.approx((-truth, truth))


def _one_sided_pool():
    """The one-sided pool of ``benchmarks/compare_post_stratified.py``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import compare_post_stratified

    return compare_post_stratified.one_sided_pool()


def test_post_stratified_degenerate_draws_keep_test_and_interval_consistent():
    """Every draw in D with the same δ: the Wald SE is 0 and rejected with p = 0 from two draws
    (its interval contained 0); the score statistic measures them instead. The interval of a
    post-stratified difference stays inside P(D)·[−1, 1], and multiple_comparison's k = 2
    default interval is compare()'s in these cases too."""
    pool, y, fb = _one_sided_pool()
    prop = bae.comparison_proposal(pool, "error_rate", models=("m0", "m1"), mix=0.9)
    in_d, off_d = np.flatnonzero(fb != y), np.flatnonzero(fb == y)
    mass = in_d.size / y.size
    for idx in (np.r_[in_d[:2], off_d[:3]], in_d[:20], off_d[:5]):
        d = Draws(indices=idx, weights=prop.p[idx] / prop.q[idx], q=prop.q[idx])
        for variance in ("wald", "score"):
            r = bae.compare(pool, "error_rate", d, y[idx], ("m0", "m1"), variance=variance)
            lo, hi = r.confidence_interval()
            assert -mass - 1e-12 <= lo <= r.estimate <= hi <= mass + 1e-12
            assert hi - lo > 1e-3  # never a point
            n_d = int(np.isin(idx, in_d).sum())
            if n_d <= 2:  # two draws or none: no evidence at the 5 % level
                assert r.pvalue > 0.05 and lo <= 0.0 <= hi
            else:
                assert r.pvalue < 0.05 and not lo <= 0.0 <= hi
            m = bae.multiple_comparison(
                pool, "error_rate", d, y[idx], ("m0", "m1"), method="none", variance=variance
            )
            ci = m.confidence_interval()
            assert (ci.low[0, 1], ci.high[0, 1]) == pytest.approx((lo, hi), abs=1e-12)
            assert m.pvalue[0, 1] == pytest.approx(r.pvalue, abs=1e-12)


def test_post_stratified_mass_is_computed_once_per_measure(monkeypatch):
    """sequential_compare calls compare() at every look: P(D) is one pool-wide pass per measure
    object and models, not one per look."""
    from bayes_activeeval.comparison import pairwise

    sp = bae.datasets.make_classification_pool(5_000, 0.3, n_models=2, rng=0)
    pool, y = sp.pool, np.asarray(sp.labels)
    calls = []
    real = pairwise._disagreement_any
    monkeypatch.setattr(
        pairwise, "_disagreement_any", lambda p, *a: calls.append(p.n_items) or real(p, *a)
    )
    res = bae.sequential_compare(
        pool, "error_rate", lambda i: y[i], ("m0", "m1"), max_draws=400, batch=50, rng=0
    )
    assert len(res.history) >= 2  # several looks, each a compare() call
    assert calls.count(pool.n_items) == 1


def test_sequential_compare_of_a_registered_ratio_measure_pickles():
    """sequential_compare resolved the measure once so that compare()'s P(D) cache hit; the
    resolved F1 (a local loss) then went into the result, which no longer pickled. The cache is
    keyed by the registered name instead, and the result pickles."""
    import pickle

    sp = bae.datasets.make_classification_pool(3_000, 0.3, n_models=2, rng=0)
    pool, y = sp.pool, np.asarray(sp.labels)
    res = bae.sequential_compare(
        pool, "f1", lambda i: y[i], ("m0", "m1"), max_draws=200, batch=50, rng=0
    )
    back = pickle.loads(pickle.dumps(res))
    assert back.reject == res.reject and len(back.history) == len(res.history)


def test_disagreement_cache_is_read_only_computed_once_and_does_not_stop_pickling(monkeypatch):
    """The disagreement set ``D`` is computed once per pool, measure and pair and shared by the
    ``active_neq`` proposal, ``compare``'s zero-mass check and its post-stratification (a plain
    risk under ``mix=0`` reads all three); the shared mask is read-only, and a pool that holds
    an F1 entry (whose loss is a local function) still pickles."""
    import pickle

    from bayes_activeeval.comparison import pairwise

    pool, y = binary_pool(4000, seed=3)
    calls = []
    real = pairwise.disagreement  # every computation of D goes through it
    monkeypatch.setattr(pairwise, "disagreement", lambda *a: calls.append(1) or real(*a))
    prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind="active_neq", mix=0.0)
    d = prop.draw(200, rng=1)
    for _ in range(3):
        r = bae.compare(pool, "error_rate", d, y[d.indices], models=("m0", "m1"), proposal=prop)
        assert r.support_mass < 1  # post-stratified on D
    assert len(calls) == 1
    mask = pairwise.pair_disagreement(pool, bae.measures.get("error_rate"), "m0", "m1")
    assert len(calls) == 1  # a measure from get() is keyed by its registered name
    with pytest.raises(ValueError, match="read-only"):
        mask[0] = not mask[0]
    bae.comparison_proposal(pool, "f1", ("m0", "m1"), kind="active_neq", mix=0.1)
    assert len(calls) == 2  # another measure, another entry
    again = pickle.loads(pickle.dumps(pool))
    np.testing.assert_array_equal(again.p, pool.p)
    assert "_disagreement_mass" not in again.__dict__
