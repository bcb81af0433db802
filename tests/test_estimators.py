"""Importance-weighted estimates: unbiased (within Monte Carlo error), calibrated intervals.

Smaller versions of benchmarks/static_estimation.py (which runs 2,000 repetitions at n = 1,000).
"""

import warnings

import numpy as np
import pytest
from scipy import stats

import bayes_activeeval as bae

REPS = 400


def _study(synth, measure, design, n, reps=REPS, seed=0):
    pool = synth.pool
    y = pool.encode_labels(synth.labels)
    m, views = pool.resolve(measure)
    truth = float(m.g(pool.p @ m.loss(y, views(None)))[0])
    prop = (
        bae.optimal_proposal(pool, measure) if design == "optimal" else bae.passive_proposal(pool)
    )
    rng = np.random.default_rng(seed)
    vals, cover = [], []
    for _ in range(reps):
        d = prop.draw(n, rng=rng)
        est = bae.weighted_estimate(m.loss(y[d.indices], views(d.indices)), d.weights, m)
        lo, hi = est.confidence_interval(0.95)
        vals.append(est.value)
        cover.append(lo <= truth <= hi)
    return truth, np.asarray(vals), np.mean(cover)


def _check(truth, vals, coverage, reps=REPS):
    se = vals.std(ddof=1) / np.sqrt(reps)
    assert abs(vals.mean() - truth) < 4 * se, (vals.mean(), truth, se)
    mc = np.sqrt(0.95 * 0.05 / reps)
    # asymptotic intervals may undercover a little at small n; the benchmark records exact figures
    assert 0.95 - 0.03 - 3 * mc <= coverage <= 0.95 + 3 * mc, coverage


@pytest.mark.parametrize("measure", ["f1", "precision", "recall", "accuracy"])
def test_optimal_static_unbiased_and_covers_rare(rare_pool, measure):
    _check(*_study(rare_pool, measure, "optimal", n=600))


@pytest.mark.parametrize("measure", ["f1", "recall", "accuracy"])
def test_optimal_and_passive_unbiased_balanced(balanced_pool, measure):
    for design in ("optimal", "passive"):
        _check(*_study(balanced_pool, measure, design, n=500, reps=300))


def test_regression_mse_unbiased_and_covers(regression_pool):
    _check(*_study(regression_pool, "mse", "optimal", n=500))


def test_optimal_beats_passive_mse_rare(rare_pool):
    truth, opt, _ = _study(rare_pool, "f1", "optimal", n=500, reps=200, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        _, pas, _ = _study(rare_pool, "f1", "passive", n=500, reps=200, seed=2)
    pas = pas[np.isfinite(pas)]
    assert np.mean((opt - truth) ** 2) < 0.5 * np.mean((pas - truth) ** 2)


def test_stderr_is_thesis_eq_3_14(rng):
    """S²/n = Σ v² (ℓ − R̂)² / (Σ v)² for a plain risk (Sawade (2012), Eq. 3.14)."""
    n = 200
    loss = rng.random(n)
    v = rng.uniform(0.5, 3, n)
    m = bae.measures.get("mse")
    est = bae.weighted_estimate(loss[:, None], v, m)
    R = np.sum(v * loss) / np.sum(v)
    assert est.value == pytest.approx(R)
    assert est.stderr**2 == pytest.approx(np.sum(v**2 * (loss - R) ** 2) / np.sum(v) ** 2)


def test_interval_methods(rare_pool):
    pool = rare_pool.pool
    d = bae.optimal_proposal(pool, "f1").draw(300, rng=4)
    est = bae.estimate(pool, "f1", d, rare_pool.labeler(d.indices))
    wald, t, logit = (est.confidence_interval(0.9, m) for m in ("wald", "t", "logit"))
    z = stats.norm.ppf(0.95)
    assert wald.high - wald.low == pytest.approx(2 * z * est.stderr)
    assert t.high - t.low > wald.high - wald.low
    assert 0 <= logit.low < est.value < logit.high <= 1
    # the logit interval is the Wald interval on the logit scale
    lg = np.log(est.value / (1 - est.value))
    s = est.stderr / (est.value * (1 - est.value))
    assert np.log(logit.high / (1 - logit.high)) == pytest.approx(lg + z * s)
    assert est.confidence_interval(0.99).high > est.confidence_interval(0.9).high
    with pytest.raises(ValueError, match="method must be"):
        est.confidence_interval(0.95, "bootstrap")
    with pytest.raises(ValueError, match="level must be in"):
        est.confidence_interval(1.5)


def test_repeated_draws_reuse_labels_and_count_once(rare_pool):
    pool = rare_pool.pool
    prop = bae.optimal_proposal(pool, "f1")
    d = prop.draw(400, rng=5, unique=True)
    assert len(d) > 400  # some repeats
    labels_aligned = rare_pool.labeler(d.indices)
    mapping = {int(i): int(rare_pool.labels[i]) for i in d.unique()}
    a = bae.estimate(pool, "f1", d, labels_aligned)
    b = bae.estimate(pool, "f1", d, mapping)
    assert a.value == b.value and a.stderr == b.stderr
    assert a.n_labels == 400 and a.n_draws == len(d)
    # inconsistent labels for a repeated item are refused under a deterministic oracle
    rep = np.flatnonzero(np.bincount(d.indices) > 1)[0]
    bad = labels_aligned.copy()
    bad[np.flatnonzero(d.indices == rep)[0]] = 1 - bad[np.flatnonzero(d.indices == rep)[0]]
    with pytest.raises(ValueError, match=f"item {rep} was drawn more than once"):
        bae.estimate(pool, "f1", d, bad)
    st = bae.estimate(pool, "f1", d, bad, oracle="stochastic")
    assert st.n_labels == len(d)
    with pytest.raises(ValueError, match="no label for drawn item"):
        bae.estimate(pool, "f1", d, dict(list(mapping.items())[:-1]))


def test_undefined_estimate_warns_and_is_nan():
    pool = bae.Pool(predictions=np.array([0, 0, 1, 0]), probs=np.array([0.1, 0.2, 0.9, 0.1]))
    d = bae.Draws(np.array([0, 1]), np.ones(2), np.full(2, 0.25))
    with pytest.warns(bae.UndefinedEstimateWarning, match="does not define 'recall'"):
        est = bae.estimate(pool, "recall", d, [0, 0])
    assert np.isnan(est.value)


def test_repr_and_frame(balanced_pool):
    pool = balanced_pool.pool
    d = bae.passive_proposal(pool).draw(200, rng=1)
    est = bae.estimate(pool, "accuracy", d, balanced_pool.labeler(d.indices))
    assert "accuracy=" in repr(est) and "n_draws=200" in repr(est)
    frame = est.to_frame()
    assert list(frame.columns) == ["value", "stderr", "low", "high"]


def _ma_study(synth, measure, belief, reps=300, n=400, seed=3):
    pool = synth.pool
    y = pool.encode_labels(synth.labels)
    m, views = pool.resolve(measure)
    truth = float(m.g(pool.p @ m.loss(y, views(None)))[0])
    prop = bae.optimal_proposal(pool, measure, belief=belief, estimator="model_assisted")
    rng = np.random.default_rng(seed)
    ipw, ma, lam = [], [], []
    for _ in range(reps):
        d = prop.draw(n, rng=rng)
        labels = y[d.indices]
        ipw.append(bae.estimate(pool, measure, d, labels, oracle="stochastic").value)
        e = bae.estimate(
            pool, measure, d, labels, oracle="stochastic", estimator="model_assisted", belief=belief
        )
        ma.append(e.value)
        lam.append(e.details["lambda"])
    return truth, np.asarray(ipw), np.asarray(ma), np.asarray(lam)


def test_model_assisted_consistent_even_with_a_wrong_belief(balanced_pool):
    """The control variate has mean zero whatever the belief: unbiased for a stale belief."""
    stale = np.clip(balanced_pool.pool.view().prob * 3.0, 0, 0.999)[:, 1]
    belief = np.column_stack([1 - stale, stale])
    truth, ipw, ma, _ = _ma_study(balanced_pool, "f1", belief)
    se = ma.std(ddof=1) / np.sqrt(ma.size)
    assert abs(ma.mean() - truth) < 4 * se
    # a wrong belief is down-weighted: never much worse than plain IS
    assert np.mean((ma - truth) ** 2) < 1.15 * np.mean((ipw - truth) ** 2)


def test_model_assisted_gains_with_a_good_belief(balanced_pool):
    truth_probs = balanced_pool.truth
    belief = np.column_stack([1 - truth_probs, truth_probs])
    truth, ipw, ma, lam = _ma_study(balanced_pool, "accuracy", belief)
    assert np.mean((ma - truth) ** 2) < 0.9 * np.mean((ipw - truth) ** 2)
    assert 0.7 < lam.mean() < 1.3  # a calibrated belief gets λ ≈ 1


def test_model_assisted_exact_with_known_labels(rare_pool):
    """If the belief is the labeling itself, ℓ = m(x) and the estimate is exact."""
    pool, y = rare_pool.pool, rare_pool.labels
    onehot = np.eye(2)[y]
    d = bae.passive_proposal(pool).draw(200, rng=0)
    est = bae.estimate(pool, "accuracy", d, y[d.indices], estimator="model_assisted", belief=onehot)
    assert est.value == pytest.approx(np.mean(pool.view().pred == y), abs=1e-12)
    assert est.stderr == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="estimator must be"):
        bae.estimate(pool, "accuracy", d, y[d.indices], estimator="aipw")


def test_satterthwaite_df_and_t_interval(rng):
    """Equal contributions give ν = n; one dominant draw gives ν ≈ 1 and a much wider interval."""
    m = bae.measures.get("mse")
    even = bae.weighted_estimate(np.r_[np.zeros(50), np.ones(50)][:, None], np.ones(100), m)
    assert even.effective_df[0] == pytest.approx(100.0)
    lumpy = rng.random(100)
    lumpy[0] = 60.0
    w = np.ones(100)
    w[0] = 3.0
    est = bae.weighted_estimate(lumpy[:, None], w, m)
    assert est.effective_df[0] < 3
    t, z = est.confidence_interval(0.95, "t"), est.confidence_interval(0.95, "wald")
    nu = est.effective_df[0]
    # upper half-widths (the lower ends are clipped at MSE's bound 0)
    assert (t.high - est.value) / (z.high - est.value) == pytest.approx(
        stats.t.ppf(0.975, max(nu - 1, 1)) / stats.norm.ppf(0.975)
    )
    assert est.confidence_interval(0.95) == t  # the default


# -- second-order bias correction ---------------------------------------------------------------


def test_ratio_bias_is_cochran_ratio_bias(rng):
    """For a ratio of means g = R_a / R_b on uniform draws, the general code (Hessian of g by
    differences of the Jacobian) is the textbook bias (R̂ s_b² − s_ab) / (n b̄²), moments about
    the mean (Cochran (1977), Sec. 6.8)."""
    n = 300
    ab = np.column_stack([rng.gamma(2.0, 1.0, n), rng.gamma(3.0, 1.0, n)])
    ratio = bae.Measure(
        "ratio",
        lambda y, view: ab[np.asarray(y)],
        lambda R: np.array([R[0] / R[1]]),
        lambda R: np.array([[1 / R[1], -R[0] / R[1] ** 2]]),
        components=("a", "b"),
    )
    L = ab
    a_bar, b_bar = L.mean(axis=0)
    R = a_bar / b_bar
    s_bb = np.mean((L[:, 1] - b_bar) ** 2)
    s_ab = np.mean((L[:, 0] - a_bar) * (L[:, 1] - b_bar))
    expected = (R * s_bb - s_ab) / (n * b_bar**2)
    assert bae.ratio_bias(L, np.ones(n), ratio)[0] == pytest.approx(expected, rel=1e-6)
    # for 0/1 indicators (recall = TP/P) on uniform draws that bias vanishes exactly, and a
    # linear measure under uniform weights has none either
    y = (rng.random(n) < 0.3).astype(int)
    pred = (rng.random(n) < np.where(y == 1, 0.7, 0.2)).astype(int)
    pool = bae.Pool(predictions=pred, probs=np.where(pred == 1, 0.8, 0.2))
    for name in ("recall", "accuracy"):
        m, views = pool.resolve(name)
        assert bae.ratio_bias(m.loss(y, views(None)), np.ones(n), m)[0] == pytest.approx(
            0, abs=1e-9
        )


def test_ratio_bias_of_self_normalization(rng):
    """A plain risk (linear g) under varying weights: only the ratio bias −Σ w²(ℓ − R̂) remains."""
    n = 200
    loss = rng.random(n)
    v = rng.uniform(0.5, 3, n)
    m = bae.measures.get("mse")
    w = v / v.sum()
    R = w @ loss
    assert bae.ratio_bias(loss[:, None], v, m)[0] == pytest.approx(-np.sum(w**2 * (loss - R)))
    est = bae.weighted_estimate(loss[:, None], v, m, bias_correction=True)
    assert est.details["uncorrected"][0] == pytest.approx(R)
    assert est.value == pytest.approx(R + np.sum(w**2 * (loss - R)))
    # off by default: the plain estimate (Sawade (2012), Eq. 3.31)
    assert bae.weighted_estimate(loss[:, None], v, m).value == pytest.approx(R)


def test_hessian_by_differences_matches_second_differences_of_g():
    from bayes_activeeval.estimators import _hessian

    for name in ("f1", "mcc", "fowlkes_mallows", "balanced_accuracy"):
        m = bae.measures.get(name).resolve(2)
        R = np.linspace(0.15, 0.35, len(m.components))
        H = _hessian(m, R)
        d, h = R.size, 1e-4
        for j in range(d):
            for k in range(d):
                ej, ek = np.eye(d)[j] * h, np.eye(d)[k] * h
                fd = (m.g(R + ej + ek) - m.g(R + ej - ek) - m.g(R - ej + ek) + m.g(R - ej - ek)) / (
                    4 * h * h
                )
                np.testing.assert_allclose(H[:, j, k], fd, rtol=1e-4, atol=1e-5)


def test_bias_correction_removes_recall_bias_under_skew():
    """Recall at 1% positives, 200 optimal draws: the plain ratio is biased by ~6 Monte Carlo
    standard errors over 3,000 runs; the corrected estimate is within MC error."""
    synth = bae.datasets.make_classification_pool(
        20_000, 0.01, separation=4.0, noise=0.4, threshold=0.3, rng=3
    )
    pool = synth.pool
    y = pool.encode_labels(synth.labels)
    m, views = pool.resolve("recall")
    L_all = m.loss(y, views(None))
    truth = float(m.g(pool.p @ L_all)[0])
    prop = bae.optimal_proposal(pool, "recall")
    rng = np.random.default_rng(0)
    plain, corrected = [], []
    for _ in range(3000):
        d = prop.draw(200, rng=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
            est = bae.weighted_estimate(L_all[d.indices], d.weights, m, bias_correction=True)
        if np.isfinite(est.value):
            plain.append(est.details["uncorrected"][0])
            corrected.append(est.value)
    plain, corrected = np.asarray(plain), np.asarray(corrected)
    se = plain.std(ddof=1) / np.sqrt(plain.size)
    assert (plain.mean() - truth) / se > 4
    assert abs(corrected.mean() - truth) / se < 3
    assert np.all((corrected >= 0) & (corrected <= 1))


def test_intervals_stay_in_the_measure_range(rare_pool):
    """A few passive draws give a wide F1 interval; it is clipped to [0, 1] (never loses coverage)."""
    pool = rare_pool.pool
    d = bae.passive_proposal(pool).draw(300, rng=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        est = bae.estimate(pool, "f1", d, rare_pool.labeler(d.indices))
    for method in ("t", "wald"):
        lo, hi = est.confidence_interval(0.95, method)
        assert 0.0 <= lo <= hi <= 1.0
    mse = bae.measures.get("mse")
    e = bae.weighted_estimate(np.array([[0.1], [5.0], [0.2]]), np.ones(3), mse)
    assert e.confidence_interval(0.95).low >= 0.0


def test_ratio_with_no_true_positive_is_carried_by_its_own_draws():
    """Precision 0 of 5 predicted positives among 1,000 passive draws: the interval is that of
    0 out of 5 (modified Wilson, n = 5), not of 0 out of 1,000 — ``Dg`` at ``R̂`` has an exact 0
    in the column of the predicted positives when no true positive is labeled, which made the
    output count as read from one column and carried by every draw."""
    from bayes_activeeval.intervals import modified_wilson
    from bayes_activeeval.measures import get

    n = 1000
    f = np.zeros(n)
    f[:5] = 1
    e = bae.weighted_estimate(np.c_[np.zeros(n), f], np.ones(n), get("precision"))
    assert e.value == 0.0 and float(e.kish[0]) == 5.0
    lo, hi = e.confidence_interval()
    assert float(lo) == 0.0
    assert float(hi) == pytest.approx(float(modified_wilson(0.0, 5.0)[1]), rel=1e-12)
    y = np.zeros(n)
    y[-5:] = 1  # 5 positives, none predicted: recall 0 of 5
    er = bae.weighted_estimate(np.c_[np.zeros(n), y], np.ones(n), get("recall"))
    assert float(er.kish[0]) == 5.0


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([1.0, -0.9, 1.0, 1.0], r"weights\[1\] = -0.9"),
        ([1.0, np.nan, 1.0, 1.0], r"weights\[1\]"),
        ([1.0, 1.0, 1.0], "one row per weight"),
    ],
)
def test_weighted_estimates_refuse_bad_weights(weights, match):
    # a negative weight put an accuracy at 1.43, outside its own interval; a NaN weight said
    # "the labeled sample does not define 'accuracy' yet"
    from bayes_activeeval.measures import get

    L = np.array([[1.0], [0.0], [1.0], [1.0]])
    w = np.asarray(weights, dtype=float)
    with pytest.raises(ValueError, match=match):
        bae.weighted_estimate(L, w, get("accuracy"))
    with pytest.raises(ValueError, match=match):
        bae.estimators.model_assisted_estimate(
            L, w, np.full((4, 1), 0.7), np.array([0.7]), get("accuracy")
        )


def test_model_assisted_does_not_tune_on_a_handful_of_draws():
    """Two draws: a tuned λ makes both residuals 0 and the standard error 0; below
    MIN_TUNE_DRAWS the estimate is the difference estimate (λ = 1) with a positive error."""
    from bayes_activeeval.estimators import MIN_TUNE_DRAWS, model_assisted_estimate
    from bayes_activeeval.measures import get

    L = np.array([[0.223], [0.549]])
    mm = np.array([[0.30], [0.41]])
    e = model_assisted_estimate(L, np.array([1.2, 0.8]), mm, np.array([0.35]), get("mse"))
    assert e.details["lambda"] == 1.0 and float(e.stderrs[0]) > 0
    # repeats add no information: ten draws of the same two items do not tune λ either
    Lr, mr = np.repeat(L, 5, axis=0), np.repeat(np.array([[0.30], [0.41]]), 5, axis=0)
    e = model_assisted_estimate(Lr, np.ones(10), mr, np.array([0.35]), get("mse"))
    assert e.details["lambda"] == 1.0 and float(e.stderrs[0]) > 0
    rng = np.random.default_rng(0)
    n = MIN_TUNE_DRAWS
    mm = rng.uniform(0, 1, (n, 1))
    L = mm + rng.normal(0, 0.1, (n, 1))
    assert (
        model_assisted_estimate(L, np.ones(n), mm, np.array([0.5]), get("mse")).details["lambda"]
        != 1.0
    )
