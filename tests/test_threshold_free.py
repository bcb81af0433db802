"""Threshold-free measures: ROC AUC, average precision, recall at a false-positive rate.

Point estimates equal scikit-learn with ``sample_weight``; the influence-function variance equals
DeLong's on uniform weights; Monte Carlo studies (fixed seeds) check unbiasedness, interval
coverage and the paired comparison's type-I error.
"""

import warnings

import numpy as np
import pytest
from pools import swapped_pool
from scipy import special
from sklearn import metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf


def _tied_sample(rng, n=300, prevalence=0.2):
    y = (rng.random(n) < prevalence).astype(int)
    s = np.round(rng.normal(y * 1.2, 1.0), 1)  # rounded: many ties
    v = rng.exponential(1.0, n)
    return y, s, v


@pytest.mark.parametrize("seed", range(4))
def test_point_estimates_equal_sklearn_with_sample_weight(seed):
    rng = np.random.default_rng(seed)
    y, s, v = _tied_sample(rng)
    assert tf.weighted_roc_auc(y, s, v) == pytest.approx(
        skm.roc_auc_score(y, s, sample_weight=v), abs=1e-12
    )
    assert tf.weighted_average_precision(y, s, v) == pytest.approx(
        skm.average_precision_score(y, s, sample_weight=v), abs=1e-12
    )
    fpr, tpr, _ = skm.roc_curve(y, s, sample_weight=v, drop_intermediate=False)
    for alpha in (0.01, 0.1, 0.5):
        val = tf.influence(f"recall@fpr={alpha}", s, v * y, v * (1 - y))[0]
        assert val == pytest.approx(np.interp(alpha, fpr, tpr), abs=1e-12)


def test_rank_estimate_on_draws_equals_sklearn(rare_pool):
    pool = rare_pool.pool
    d = tf.rank_proposal(pool, "roc_auc").draw(800, rng=3)
    y = rare_pool.labeler(d.indices)
    s = pool.scores["model"][d.indices]
    for name, fn in (("roc_auc", skm.roc_auc_score), ("ap", skm.average_precision_score)):
        est = tf.rank_estimate(pool, name, d, y)
        assert est.value == pytest.approx(fn(y, s, sample_weight=d.weights), abs=1e-12)


def _delong(y, s):
    """DeLong, DeLong & Clarke-Pearson (1988), directly from the m × n kernel matrix."""
    P, N = s[y == 1], s[y == 0]
    K = (P[:, None] > N[None, :]) + 0.5 * (P[:, None] == N[None, :])
    return K.mean(), K.mean(1).var(ddof=1) / P.size + K.mean(0).var(ddof=1) / N.size, K


def test_variance_equals_delong_on_uniform_weights(rng):
    y, s, _ = _tied_sample(rng, n=200, prevalence=0.3)
    est = tf.rank_estimate_arrays("roc_auc", s, y, np.ones(y.size))
    auc, var, _ = _delong(y, s)
    assert est.value == pytest.approx(auc, abs=1e-12)
    assert est.stderr**2 == pytest.approx(var, rel=1e-10)
    # the weights' scale does not matter
    est2 = tf.rank_estimate_arrays("roc_auc", s, y, np.full(y.size, 7.0))
    assert est2.stderr == pytest.approx(est.stderr, rel=1e-12)


def test_paired_variance_equals_delong_1988_on_uniform_weights(rng):
    n = 150
    y = (rng.random(n) < 0.35).astype(int)
    sa = np.round(rng.normal(y, 1.0), 1)
    sb = np.round(0.6 * sa + rng.normal(0.5 * y, 0.8), 1)
    m = tf.RankMeasure("roc_auc").bind(("a", "b"), difference=True)
    est = tf.rank_estimate_arrays(m, np.stack([sa, sb], 1), y, np.ones(n))
    aa, _, Ka = _delong(y, sa)
    ab, _, Kb = _delong(y, sb)
    d10 = Ka.mean(1) - Kb.mean(1)
    d01 = Ka.mean(0) - Kb.mean(0)
    var = d10.var(ddof=1) / d10.size + d01.var(ddof=1) / d01.size
    assert est.value == pytest.approx(aa - ab, abs=1e-12)
    assert est.stderr**2 == pytest.approx(var, rel=1e-10)


@pytest.mark.parametrize("kind", ["roc_auc", "average_precision", "recall@fpr=0.2"])
def test_influence_function_is_the_gateaux_derivative(kind, rng):
    n = 60
    y = (rng.random(n) < 0.4).astype(int)
    s = rng.normal(y, 1.0)
    v = rng.exponential(1.0, n)
    v /= v.sum()
    val, p1, p0 = tf.influence(kind, s, v * y, v * (1 - y), n_eff_neg=1e12)
    assert abs(v @ np.where(y == 1, p1, p0)) < 1e-10  # E[ψ] = 0
    if kind.startswith("recall"):
        return  # ψ uses a secant slope: only its mean is exact
    eps = 1e-7
    for i in (3, 17, 41):
        for lab in (0, 1):
            m1, m0 = v * y * (1 - eps), v * (1 - y) * (1 - eps)
            (m1 if lab else m0)[i] += eps
            deriv = (tf.influence(kind, s, m1, m0)[0] - val) / eps
            assert deriv == pytest.approx((p1 if lab else p0)[i], rel=1e-4, abs=1e-5)
    # ψ does not depend on the scale of the masses (importance weights are unnormalized)
    _, q1, q0 = tf.influence(kind, s, 37.0 * v * y, 37.0 * v * (1 - y), n_eff_neg=1e12)
    np.testing.assert_allclose(q1, p1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(q0, p0, rtol=1e-10, atol=1e-12)


def _study(synth, measure, design, n, reps, seed=0):
    pool = synth.pool
    s = pool.scores["model"]
    y = synth.labels
    truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
    prop = tf.rank_proposal(pool, measure) if design == "optimal" else bae.passive_proposal(pool)
    rng = np.random.default_rng(seed)
    vals, cover = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        for _ in range(reps):
            d = prop.draw(n, rng=rng)
            est = tf.rank_estimate_arrays(measure, s[d.indices], y[d.indices], d.weights)
            lo, hi = est.confidence_interval(0.95)
            vals.append(est.value)
            cover.append(lo <= truth <= hi)
    return truth, np.asarray(vals), np.asarray(cover)


@pytest.mark.parametrize(
    "measure,design",
    [
        ("roc_auc", "optimal"),
        ("roc_auc", "passive"),
        ("average_precision", "optimal"),
        ("recall@fpr=0.05", "optimal"),
    ],
)
def test_unbiased_and_covering(measure, design, balanced_pool):
    reps = 400
    truth, vals, cover = _study(balanced_pool, measure, design, 1000, reps)
    ok = np.isfinite(vals)
    assert ok.mean() > 0.99
    vals, cover = vals[ok], cover[ok]
    se = vals.std(ddof=1) / np.sqrt(vals.size)
    # self-normalized ratios are biased at O(1/n): allow it on top of 4 Monte Carlo SEs
    assert abs(vals.mean() - truth) < 4 * se + 0.1 * vals.std(), (vals.mean(), truth, se)
    mc = np.sqrt(0.95 * 0.05 / vals.size)
    assert 0.95 - 3 * mc - 0.015 <= cover.mean() <= 0.95 + 3 * mc, cover.mean()


@pytest.mark.parametrize("measure,gain", [("roc_auc", 1.3), ("average_precision", 5.0)])
def test_optimal_proposal_beats_passive(measure, gain, rare_pool):
    """The asymptotic gain ``Σ p u / (Σ p √u)²`` is about 2 for AUC and 12 for AP on this pool
    (AUC's variance comes from positives hidden among low scores, which no proposal can find
    cheaply; see docs/threshold-free.md)."""
    _, v_opt, _ = _study(rare_pool, measure, "optimal", 1000, 200, seed=1)
    truth, v_pas, _ = _study(rare_pool, measure, "passive", 1000, 200, seed=1)
    mse_opt = np.nanmean((v_opt - truth) ** 2)
    mse_pas = np.nanmean((v_pas - truth) ** 2)
    assert mse_opt * gain < mse_pas, (mse_opt, mse_pas)


def test_proposal_predicted_variance_matches_monte_carlo(rare_pool):
    """``Σ p² u / q`` from the influence function predicts the sampling variance."""
    pool = rare_pool.pool
    prop = tf.rank_proposal(pool, "roc_auc", belief=rare_pool.truth)
    _, vals, _ = _study(rare_pool, "roc_auc", "optimal", 2000, 300, seed=2)
    predicted = prop.predicted_variance() / 2000
    # the proposal here used the true η, the study the model's own probabilities: same order
    assert 0.3 < np.nanvar(vals) / predicted < 3.0


def test_paired_comparison_type_one_error():
    pool, y, _ = swapped_pool()
    sa, sb = pool.scores["a"], pool.scores["b"]
    assert tf.weighted_roc_auc(y, sa) == pytest.approx(tf.weighted_roc_auc(y, sb), abs=1e-12)
    m = tf.RankMeasure("roc_auc").bind(("a", "b"), difference=True)
    prop = tf.rank_proposal(pool, m)
    rng = np.random.default_rng(9)
    S = np.stack([sa, sb], 1)
    reps, rejected = 400, 0
    for _ in range(reps):
        d = prop.draw(1000, rng=rng)
        est = tf.rank_estimate_arrays(m, S[d.indices], y[d.indices], d.weights)
        lo, hi = est.confidence_interval(0.95)
        rejected += not (lo <= 0.0 <= hi)
    mc = np.sqrt(0.05 * 0.95 / reps)
    assert 0.05 - 3 * mc <= rejected / reps <= 0.05 + 3 * mc, rejected / reps


def test_compare_uses_the_paired_rank_estimate():
    pool, y, _ = swapped_pool(n=5000, prevalence=0.05, seed=2)
    d = tf.comparison_rank_proposal(pool, "roc_auc").draw(600, rng=1)
    res = bae.compare(pool, "roc_auc", d, y[d.indices])
    m = tf.RankMeasure("roc_auc").bind(("a", "b"), difference=True)
    S = np.stack([pool.scores["a"], pool.scores["b"]], 1)[d.indices]
    pi = 0.5 * (pool.view("a").positive_prob() + pool.view("b").positive_prob())[d.indices]
    est = tf.rank_estimate_arrays(m, S, y[d.indices], d.weights, belief=pi)
    assert res.estimate == pytest.approx(est.value, abs=1e-12)
    assert res.stderr == pytest.approx(est.stderr, rel=1e-9)
    assert 0.0 <= res.pvalue <= 1.0 and res.models == ("a", "b")
    assert res.estimates["a"] == pytest.approx(
        skm.roc_auc_score(y[d.indices], S[:, 0], sample_weight=d.weights)
    )


def test_adaptive_rank_proposal_loop_is_consistent(rare_pool):
    """A hand-written adaptive loop (belief refreshed from the labels so far) gives estimates
    centred on the truth; ActiveEvaluator runs the same proposal."""
    pool, y = rare_pool.pool, rare_pool.labels
    s = pool.scores["model"]
    truth = tf.weighted_roc_auc(y, s)
    p1 = pool.view().positive_prob()
    rng = np.random.default_rng(3)
    vals = []
    for _ in range(40):
        probs, known = p1.copy(), np.zeros(pool.n_items, dtype=bool)
        idx, w = [], []
        for _stage in range(5):
            prop = tf.adaptive_rank_proposal(pool, "roc_auc", probs, known=known, mix=0.05)
            d = prop.draw(100, rng=rng)
            idx.append(d.indices)
            w.append(d.weights)
            known[d.indices] = True
            probs[d.indices] = y[d.indices]
        i, v = np.concatenate(idx), np.concatenate(w)
        vals.append(tf.rank_estimate_arrays("roc_auc", s[i], y[i], v).value)
    vals = np.array(vals)
    assert abs(np.nanmean(vals) - truth) < 4 * np.nanstd(vals) / np.sqrt(vals.size) + 0.005


def test_guarded_variance(rare_pool):
    pool, y = rare_pool.pool, rare_pool.labels
    d = tf.rank_proposal(pool, "roc_auc").draw(1000, rng=5)
    lab = y[d.indices]
    emp = tf.rank_estimate(pool, "roc_auc", d, lab, variance="empirical")
    bel = tf.rank_estimate(pool, "roc_auc", d, lab, variance="belief")
    grd = tf.rank_estimate(pool, "roc_auc", d, lab)
    assert grd.stderr == pytest.approx(max(emp.stderr, bel.stderr))
    assert emp.value == bel.value == grd.value
    # the belief's variance is the empirical one with ψ² replaced by its expectation under π
    pi = pool.view().positive_prob()[d.indices]
    s = pool.scores["model"][d.indices]
    v = d.weights
    _, p1, p0 = tf.influence("roc_auc", s, v * lab, v * (1 - lab))
    expect = (v * v * (pi * p1**2 + (1 - pi) * p0**2)).sum() / v.sum() ** 2
    assert bel.stderr**2 == pytest.approx(expect, rel=1e-10)
    res = bae.compare(
        bae.Pool(
            predictions={"a": pool.view().pred, "b": pool.view().pred},
            probs={"a": pool.view().positive_prob(), "b": pool.view().positive_prob() ** 1.5},
            classes=[0, 1],
        ),
        "roc_auc",
        d,
        lab,
    )
    assert np.isfinite(res.stderr) and res.stderr >= 0


def test_precision_at_k(rare_pool):
    pool, y = rare_pool.pool, rare_pool.labels
    s = pool.scores["model"]
    m = tf.precision_at_k(pool, 150)
    top = s >= np.sort(s)[-150]
    assert top.sum() == 150
    prop = bae.optimal_proposal(pool, m)
    assert prop.q[~top].max() <= prop.q[top].min()  # only the mixture reaches the rest
    d = prop.draw(300, rng=2)
    est = bae.estimate(pool, m, d, y[d.indices])
    yy, tt = y[d.indices], top[d.indices]
    assert est.value == pytest.approx(
        skm.precision_score(yy, tt.astype(int), sample_weight=d.weights), abs=1e-12
    )
    with pytest.raises(ValueError, match="k must"):
        tf.precision_at_k(pool, 0)


def test_undefined_without_both_classes():
    with pytest.warns(bae.UndefinedEstimateWarning):
        est = tf.rank_estimate_arrays("roc_auc", np.arange(5.0), np.zeros(5), np.ones(5))
    assert np.isnan(est.value)


def test_names_and_errors(rare_pool):
    assert tf.rank_measure("AUC").kind == "roc_auc"
    assert tf.rank_measure("average_precision_score").kind == "average_precision"
    assert tf.rank_measure("recall@fpr=0.01").fpr == 0.01
    # a measure's name reads back as the measure, small rates (written 1e-05) included
    for fpr in (0.5, 0.01, 1e-3, 1e-5, 2.5e-7, 0.0123456789, 1 / 3):
        m = tf.RankMeasure("recall_at_fpr", fpr)
        assert tf.rank_measure(m.name) == m, m.name
    for spelling in (
        "recall@fpr=1e-3",
        "TPR@FPR=0.001",
        "recall_at_fpr_0.001",
        "recall-at-fpr-1e-3",
    ):
        assert tf.rank_measure(spelling).fpr == 1e-3, spelling
    assert tf.rank_measure("roc-auc").kind == "roc_auc"
    # labels other than 0/1 would silently weigh the classes wrongly
    with pytest.raises(ValueError, match=r"y_true\[0\] = -1"):
        tf.weighted_roc_auc([-1, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"y_true\[1\] = 2"):
        tf.weighted_average_precision(np.array([1, 2, 2], dtype=object), [0.1, 0.2, 0.3])
    from bayes_activeeval import curves

    with pytest.raises(ValueError, match=r"y_true\[0\] = -1"):
        curves.weighted_roc_curve([-1, 1, 1], [0.1, 0.2, 0.3])
    assert tf.rank_measure("recall_at-fpr=0.01").fpr == 0.01
    assert tf.rank_measure("f1") is None
    with pytest.raises(ValueError, match="fpr"):
        tf.rank_measure("recall@fpr=1.5")
    with pytest.raises(ValueError, match="binary"):
        tf.rank_proposal(bae.datasets.make_regression_pool(100, rng=0).pool, "roc_auc")
    with pytest.raises(TypeError, match="Draws"):
        tf.rank_estimate(rare_pool.pool, "roc_auc", np.arange(3), [0, 1, 0])


def test_curves_equal_sklearn(rng):
    from bayes_activeeval import curves

    y, s, v = _tied_sample(rng)
    ours = curves.weighted_roc_curve(y, s, v)
    theirs = skm.roc_curve(y, s, sample_weight=v, drop_intermediate=False)
    for a, b in zip(ours[:2], theirs[:2], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    ours = curves.weighted_pr_curve(y, s, v)
    theirs = skm.precision_recall_curve(y, s, sample_weight=v)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("curve,kind", [("roc", "roc_auc"), ("pr", "average_precision")])
def test_curve_band_covers_the_pool_curve(curve, kind, balanced_pool):
    from bayes_activeeval import curves

    pool, y = balanced_pool.pool, balanced_pool.labels
    s = pool.scores["model"]
    prop = tf.rank_proposal(pool, kind)
    rng = np.random.default_rng(4)
    hits = []
    for _ in range(30):
        d = prop.draw(1000, rng=rng)
        band = curves.curve_band(pool, d, y[d.indices], curve=curve, n_boot=200, rng=rng)
        tp, fp, _ = curves._cumulative(y, s, np.ones(y.size))
        hits.append(band.contains(curves._on_grid(curve, tp, fp, band.x)[0]))
        assert np.all(band.low <= band.y) and np.all(band.y <= band.high)
    # a 95% simultaneous band: at most 4 misses in 30 (P ≈ 0.06 at the nominal rate)
    assert np.mean(hits) >= 26 / 30, np.mean(hits)


def test_rank_intervals_are_the_package_interval(rare_pool):
    """Issue 13: one interval function per estimate. A rank estimate's interval is
    :func:`bayes_activeeval.intervals.interval` (Wilson by default) with the estimate's Kish size
    (of the scarcer class) and weight df, inside the measure's range."""
    from bayes_activeeval import intervals

    est = tf.RankEstimate(
        np.array([0.99888]), np.array([[0.00657**2]]), np.array([0.99888]), 1000, 955,
        ("roc_auc",), "roc_auc", (0.0, 1.0), kish=np.array([40.0]),
    )  # fmt: skip
    lo, hi = est.confidence_interval(0.95)
    elo, ehi = intervals.interval(0.99888, 0.00657, (0.0, 1.0), 0.95, "wilson", kish=40.0)
    assert (lo, hi) == pytest.approx((float(elo), float(ehi)))
    assert 0.8 < lo < 0.99888 < hi <= 1.0  # no logit blow-up, never above 1
    with pytest.raises(ValueError, match="method"):
        est.confidence_interval(0.95, "logit_t")
    # at the bound with SE = 0 (no discordant pair, empirical variance): the Kish size decides
    at_one = tf.RankEstimate(
        np.array([1.0]), np.array([[0.0]]), np.array([1.0]), 100, 100,
        ("roc_auc",), "roc_auc", (0.0, 1.0), kish=np.array([20.0]),
    )  # fmt: skip
    lo, hi = at_one.confidence_interval(0.95)
    assert hi == 1.0 and 0.7 < lo < 1.0
    # on draws: the Kish size of the scarcer class, the same interval as Estimate's
    pool, y = rare_pool.pool, rare_pool.labels
    d = tf.rank_proposal(pool, "roc_auc").draw(800, rng=11)
    lab = y[d.indices]
    for variance in ("empirical", "guarded"):
        est = tf.rank_estimate(pool, "roc_auc", d, lab, variance=variance)
        w1 = d.weights[lab == 1]
        w0 = d.weights[lab == 0]
        kish = min(w1.sum() ** 2 / (w1 @ w1), w0.sum() ** 2 / (w0 @ w0))
        assert est.kish[0] == pytest.approx(kish)
        ci = est.confidence_interval(0.95)
        assert ci == bae.Estimate.confidence_interval(est, 0.95, "wilson")
        assert 0.0 <= ci.low <= est.value <= ci.high <= 1.0
        frame = est.to_frame()
        assert frame["low"].iloc[0] == pytest.approx(ci.low)


def test_auto_floor_keeps_the_proposal_optimal_under_skew():
    """A fixed floor of 1e-6 adds ``sqrt(f)/π₁`` to every confident negative's integrand; at
    1:2,000 with a strong model that flattened the AUC proposal towards passive sampling. The
    scaled floor adds at most 1 % of the proposal's mass."""
    synth = bae.datasets.make_classification_pool(100_000, 0.0005, separation=6.0, noise=0.2, rng=3)
    pool, eta = synth.pool, synth.truth
    s, p = pool.scores["model"], pool.p
    _, e1, e0 = tf.influence("roc_auc", s, p * eta, p * (1 - eta))
    u_true = eta * e1**2 + (1 - eta) * e0**2

    def ratio(q):  # labels passive needs per label of q (asymptotic, under the true η)
        return float(p @ u_true) / float(np.sum(p**2 / q * u_true))

    auto = tf.rank_proposal(pool, "roc_auc")
    fixed = tf.rank_proposal(pool, "roc_auc", belief_floor=1e-6)
    assert 0 < auto.info.belief_floor < 1e-6
    assert ratio(auto.q) > 1.5 * ratio(fixed.q), (ratio(auto.q), ratio(fixed.q))
    assert bae.optimal_proposal(pool, "roc_auc").info.belief_floor == auto.info.belief_floor
    pi = pool.view().positive_prob()
    f = tf.scaled_rank_floor(pool, "roc_auc", pi)
    assert f == auto.info.belief_floor
    with pytest.raises(ValueError, match="belief_floor"):
        tf.rank_proposal(pool, "roc_auc", belief_floor="sometimes")


def test_model_assisted_rank_estimate(balanced_pool):
    """The control-variate form ``T(P̂) − λ(Σ v m/Σ v − M)`` with the belief's expected influence:
    consistent whatever the belief (here a badly distorted one), and with the true ``η`` as
    belief it is never worse than the plain estimate."""
    pool, y, eta = balanced_pool.pool, balanced_pool.labels, balanced_pool.truth
    s = pool.scores["model"]
    truth = tf.influence("roc_auc", s, pool.p * y, pool.p * (1 - y))[0]
    _, expected, _ = tf.expected_influence(pool, "roc_auc", eta)
    assert abs(pool.p @ expected[:, 0]) < 1e-10  # centred under the belief
    prop = tf.rank_proposal(pool, "roc_auc", belief=eta, estimator="model_assisted")
    assert prop.info.estimator == "model_assisted"
    rng = np.random.default_rng(21)
    plain, ma, bad, cover = [], [], [], []
    for _ in range(300):
        d = prop.draw(600, rng=rng)
        lab = y[d.indices]
        plain.append(tf.rank_estimate(pool, "roc_auc", d, lab, belief=eta).value)
        est = tf.rank_estimate(pool, "roc_auc", d, lab, belief=eta, estimator="model_assisted")
        assert est.estimator == "model_assisted" and "lambda" in est.details
        ma.append(est.value)
        lo, hi = est.confidence_interval(0.95)
        cover.append(lo <= truth <= hi)
        distorted = special.expit(3.0 * special.logit(np.clip(eta, 1e-9, 1 - 1e-9)) + 2.0)
        bad.append(
            tf.rank_estimate(
                pool, "roc_auc", d, lab, belief=distorted, estimator="model_assisted"
            ).value
        )
    plain, ma, bad = map(np.asarray, (plain, ma, bad))
    for vals in (ma, bad):
        assert abs(vals.mean() - truth) < 4 * vals.std() / np.sqrt(vals.size) + 0.002
    assert np.mean((ma - truth) ** 2) <= 1.05 * np.mean((plain - truth) ** 2)
    assert np.mean(cover) >= 0.9
    with pytest.raises(ValueError, match="estimator"):
        tf.rank_estimate(pool, "roc_auc", d, lab, estimator="aipw")


def test_adaptive_proposal_uses_the_scaled_floor():
    """The adaptive rank proposal floors the belief as the static one does (the scaled floor
    capped at ``belief_floor``), not at a fixed ``1e-6`` that spreads it over the bulk."""
    synth = bae.datasets.make_classification_pool(100_000, 0.0005, separation=6.0, noise=0.2, rng=3)
    pool, eta = synth.pool, synth.truth
    s, p = pool.scores["model"], pool.p
    _, e1, e0 = tf.influence("roc_auc", s, p * eta, p * (1 - eta))
    u_true = eta * e1**2 + (1 - eta) * e0**2

    def ratio(q):
        return float(p @ u_true) / float(np.sum(p**2 / q * u_true))

    pi = pool.view().positive_prob()
    kw = dict(deterministic=False)
    scaled = tf.adaptive_rank_proposal(pool, "roc_auc", pi, **kw)
    fixed = tf.adaptive_rank_proposal(pool, "roc_auc", pi, scale_floor=False, **kw)
    assert scaled.info["belief_floor"] == tf.scaled_rank_floor(pool, "roc_auc", pi) < 1e-6
    assert fixed.info["belief_floor"] == 1e-6
    assert ratio(scaled.q) > 1.5 * ratio(fixed.q), (ratio(scaled.q), ratio(fixed.q))
    # the evaluator's stage proposal goes through it
    ev = bae.ActiveEvaluator(pool, "roc_auc", rng=0)
    assert 0 < ev._proposal.info["belief_floor"] < 1e-6
    off = tf.adaptive_rank_proposal(pool, "roc_auc", pi, belief_floor=0.0, **kw)
    assert off.info["belief_floor"] == 0.0
