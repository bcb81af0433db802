"""The default adaptive design's interval near the bound (issue 13): the gamma interval for a
weighted count (Fay & Feuer 1997) and the difference estimate's bound rule."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import bayes_activeeval as bae
from bayes_activeeval import intervals as iv
from bayes_activeeval.estimators import difference_estimate
from bayes_activeeval.measures import get as get_measure

LEVEL = 0.95


# -- the gamma interval ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 2, 5, 40])
def test_weighted_gamma_with_equal_weights_is_garwood(k):
    """Equal weights ``u``: ``y = k u``, ``v = k u²``; the gamma interval is Garwood's exact
    Poisson interval ``u·[G⁻¹(α/2; k), G⁻¹(1 − α/2; k + 1)]``."""
    u = 0.003
    lo, hi = iv.weighted_gamma(k * u, k * u * u, u, LEVEL)
    a = (1 - LEVEL) / 2
    want_lo = u * stats.gamma.ppf(a, k) if k else 0.0
    assert float(lo) == pytest.approx(want_lo, rel=1e-9, abs=1e-15)
    assert float(hi) == pytest.approx(u * stats.gamma.ppf(1 - a, k + 1), rel=1e-9)


def test_weighted_gamma_at_zero_is_the_rule_of_three():
    lo, hi = iv.weighted_gamma(0.0, 0.0, 0.01, LEVEL)
    assert float(lo) == 0.0
    assert float(hi) == pytest.approx(0.01 * np.log(2 / (1 - LEVEL)), rel=1e-12)


def test_gamma_method_inside_the_range_never_zero_width_and_mirrored():
    x = np.linspace(0.0, 1.0, 40)  # not 0.5: there the rare side switches
    se = np.where((x > 0) & (x < 1), 0.05 * np.sqrt(x * (1 - x)), 0.0)
    lo, hi = iv.interval(x, se, (0.0, 1.0), LEVEL, "gamma", event_weight=0.004)
    assert np.all((0 <= lo) & (lo <= x) & (x <= hi) & (hi <= 1))
    assert np.all(hi - lo > 0)
    # the lower side of the range is the mirror image of the upper side
    lo2, hi2 = iv.interval(1 - x, se, (0.0, 1.0), LEVEL, "gamma", event_weight=0.004)
    np.testing.assert_allclose(lo2, 1 - hi, atol=1e-12)
    np.testing.assert_allclose(hi2, 1 - lo, atol=1e-12)
    # a range [lo, hi] is the unit scale stretched; an unbounded one falls back to "t"
    l3, h3 = iv.interval(2 * x - 1, 2 * se, (-1.0, 1.0), LEVEL, "gamma", event_weight=0.004)
    np.testing.assert_allclose(l3, 2 * lo - 1, atol=1e-12)
    np.testing.assert_allclose(h3, 2 * hi - 1, atol=1e-12)
    assert iv.interval(0.3, 0.1, method="gamma") == iv.interval(0.3, 0.1, method="t")


# -- the difference estimate near the bound -------------------------------------------------------
def _accuracy_terms(rng, n, err_rate):
    acc = get_measure("accuracy")
    mu = rng.beta(0.5, 50, n)  # the belief's error probability of each draw
    e = (rng.random(n) < err_rate).astype(float)
    L = (1.0 - e)[:, None]
    w = rng.uniform(0.2, 10.0, n)
    m = (1.0 - mu)[:, None]
    M = np.full((n, 1), 1.0 - 0.01)
    V = (w * w * mu * (1 - mu))[:, None, None] + 1e-4
    return acc, L, w, m, M, V, e


def test_difference_estimate_is_a_weighted_error_count_plus_a_control_variate():
    """``1 − R̂ = Σ u_j e_j − (b̄ − 1)``, ``u_j = a_j w_j/Σa``, ``b_j = M_j + w_j(1 − m_j)``."""
    rng = np.random.default_rng(3)
    acc, L, w, m, M, V, e = _accuracy_terms(rng, 300, 0.02)
    est = difference_estimate(L, w, m, M, acc, draw_cov=V)
    a = est.details["stage_weights"]
    u = a * w / a.sum()
    b = M[:, 0] + w * (1 - m[:, 0])
    assert 1 - est.value == pytest.approx(u @ e - (a @ b / a.sum() - 1), abs=1e-12)
    # one more event at a draw taken at random: its mean weight and root-mean-square weight
    assert est.event_weight[0] == pytest.approx(u.mean(), rel=1e-12)
    assert est.event_weight_rms[0] == pytest.approx(np.sqrt(np.mean(u * u)), rel=1e-12)
    assert not est.details["at_bound"][0]


def test_no_labeled_error_puts_the_estimate_on_the_bound_with_a_rule_of_three_interval():
    rng = np.random.default_rng(4)
    acc, L, w, m, M, V, _ = _accuracy_terms(rng, 200, 0.0)
    est = difference_estimate(L, w, m, M, acc, draw_cov=V)
    assert est.details["at_bound"][0]
    assert est.details["unsnapped"]["value"][0] < 1.0  # the control variate alone
    assert est.value == 1.0 and est.stderr == 0.0
    lo, hi = est.confidence_interval(LEVEL)
    assert hi == 1.0
    assert 1 - lo == pytest.approx(est.event_weight[0] * np.log(2 / (1 - LEVEL)), rel=1e-9)
    # the previous default is still there by name
    lo_w, hi_w = est.confidence_interval(LEVEL, method="modified_wilson")
    assert lo_w < hi_w == 1.0


# -- coverage of the default adaptive design near the bound ---------------------------------------
N_ITEMS = 3000
RUNS = 60
BUDGETS = (100, 200)


def _pool(accuracy, seed):
    """A pool whose model is right on exactly ``accuracy`` of the items, errors drawn where the
    model's (calibrated) error probability is high (as ``benchmarks/boundary_coverage.py``)."""
    rng = np.random.default_rng(seed)
    err = np.clip(rng.beta(0.5, 0.5 * (1 / max(1 - accuracy, 1e-3) - 1), N_ITEMS), 1e-6, 0.49)
    pred = (rng.random(N_ITEMS) < 0.3).astype(int)
    wrong = np.zeros(N_ITEMS, dtype=bool)
    k = round((1 - accuracy) * N_ITEMS)
    if k:
        wrong[rng.choice(N_ITEMS, k, replace=False, p=err / err.sum())] = True
    y = np.where(wrong, 1 - pred, pred)
    return bae.Pool(predictions=pred, probs=np.where(pred == 1, 1 - err, err)), y


@pytest.fixture(scope="module")
def default_runs():
    """``RUNS`` runs of ``ActiveEvaluator(pool, "accuracy")`` with no options, at true accuracy
    0.995 and 1.0, evaluated at each budget: (truth, budget) -> list of Estimates."""
    out = {}
    for truth, seed in ((0.995, 1), (1.0, 2)):
        pool, y = _pool(truth, seed)
        for r in range(RUNS):
            ev = bae.ActiveEvaluator(pool, "accuracy", rng=1000 * seed + r)
            for n in BUDGETS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = ev.run(lambda i, y=y: y[i], budget=n, progress=False)
                out.setdefault((truth, n), []).append(est)
    return out


@pytest.mark.parametrize("truth", [0.995, 1.0])
@pytest.mark.parametrize("n", BUDGETS)
def test_default_adaptive_interval_covers_near_the_bound(default_runs, truth, n):
    """Coverage of the default 95 % interval >= 0.93 (the issue's target) up to three Monte Carlo
    standard errors of a coverage of 0.93 with ``RUNS`` runs (0.83); never zero width. On these
    runs the previous default, the modified Wilson interval without the bound rule, covered 0.72
    at truth 1.0 (it fails here) and 0.87-0.92 at 0.995; the gamma interval 0.97-1.00."""
    ests = default_runs[(truth, n)]
    ci = np.array([e.confidence_interval(LEVEL) for e in ests])
    cover = np.mean((ci[:, 0] <= truth) & (truth <= ci[:, 1]))
    tol = 3 * np.sqrt(0.93 * 0.07 / len(ests))
    assert cover >= 0.93 - tol, cover
    assert np.all(ci[:, 1] - ci[:, 0] > 0)
    assert all(e.estimator == "difference" for e in ests)


def test_status_and_report_use_the_estimates_interval(default_runs):
    """``Estimate.to_frame`` (the report's tables) gives the interval ``confidence_interval``
    gives: one interval function per estimate."""
    est = default_runs[(0.995, 200)][0]
    f = est.to_frame(LEVEL)
    lo, hi = est.confidence_interval(LEVEL)
    assert (f["low"].iloc[0], f["high"].iloc[0]) == (lo, hi)


def test_ratio_measures_keep_the_clipped_estimate_and_the_wilson_interval():
    """F1 (a ratio, ``Dg`` depends on ``R``): no bound rule and no gamma interval. With no labeled
    false positive or negative on a rare-class pool the gamma event weight would be ~1/R and the
    interval the whole range; the estimate keeps its martingale variance and a non-zero width."""
    from bayes_activeeval.estimators import difference_estimate
    from bayes_activeeval.measures import get as get_measure

    m = get_measure("f1")
    rng = np.random.default_rng(0)
    n = 400
    # ℓ = (y f, (y + f)/2): labeled draws are true positives or true negatives only
    y = (rng.random(n) < 0.3).astype(float)
    L = np.column_stack([y, y])
    w = rng.uniform(0.5, 2.0, n)
    mexp = np.column_stack([0.25 * np.ones(n), 0.26 * np.ones(n)])
    M = np.tile([0.003, 0.0032], (n, 1))
    e = difference_estimate(L, w, mexp, M, m)
    assert e.event_weight is None
    assert "at_bound" not in e.details
    lo, hi = e.confidence_interval()
    assert float(np.ravel(hi)[0]) > float(np.ravel(lo)[0])
    # accuracy keeps the bound rule and the gamma interval
    acc = get_measure("accuracy")
    La = np.ones((n, 1))
    ea = difference_estimate(La, w, np.full((n, 1), 0.99), np.full((n, 1), 0.99), acc)
    assert ea.event_weight is not None and ea.value == 1.0


def test_difference_of_accuracies_keeps_the_wilson_interval():
    """A difference of two models' accuracies reads two loss columns: no weighted count of
    events. With the gamma interval a near-0 difference got one side stretched about 20 times
    and never excluded 0 (30 runs below: 0 of 30, Wald 30 of 30); the default interval now is
    the modified Wilson one, nearly symmetric about the estimate, and mirrored when the models
    swap. A stack of accuracies keeps the gamma interval."""
    from bayes_activeeval.measures import difference, stack

    rng = np.random.default_rng(0)
    N = 5000
    p = rng.beta(2, 2, N)
    y = (rng.random(N) < p).astype(int)
    fa = (p > 0.5).astype(int)
    fb = fa.copy()
    flip = rng.random(N) < 0.05
    fb[flip] = 1 - fb[flip]
    probs = np.c_[1 - p, p]
    pool = bae.Pool(predictions={"a": fa, "b": fb}, probs={"a": probs, "b": probs})
    truth = float((fa == y).mean() - (fb == y).mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = bae.ActiveEvaluator(pool, difference("accuracy", "a", "b"), rng=3).run(
            lambda i: y[i], budget=200, progress=False
        )
        s = bae.ActiveEvaluator(pool, difference("accuracy", "b", "a"), rng=3).run(
            lambda i: y[i], budget=200, progress=False
        )
    assert e.event_weight is None
    lo, hi = (float(np.ravel(v)[0]) for v in e.confidence_interval())
    g, se = float(e.value), float(e.stderrs[0])
    assert lo <= truth <= hi and lo > 0  # the models differ by 0.018; 200 labels show it
    assert 0.5 < (hi - g) / (g - lo) < 2.0  # not one-sided
    slo, shi = (float(np.ravel(v)[0]) for v in s.confidence_interval())
    assert slo == pytest.approx(-hi, abs=1e-12) and shi == pytest.approx(-lo, abs=1e-12)
    assert hi - lo < 10 * se
    st = bae.ActiveEvaluator(pool, stack("accuracy", ["a", "b"]), rng=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert st.run(lambda i: y[i], budget=100, progress=False).event_weight is not None


def test_gamma_increment_is_moment_matched_where_an_event_was_seen():
    """With ``y > 0`` the added event has mean ``u`` and variance ``u₂²``; with ``y = 0`` the
    rule of three on the mean weight, whatever ``u₂``; ``u₂ = u`` is the plain interval."""
    y, v, u, u2 = np.array([0.0, 0.004]), np.array([0.0, 4e-6]), 0.0005, 0.001
    lo, hi = iv.weighted_gamma(y, v, u, LEVEL, u2)
    lo0, hi0 = iv.weighted_gamma(y, v, u, LEVEL)
    assert hi[0] == pytest.approx(u * np.log(2 / (1 - LEVEL)), rel=1e-9) == hi0[0]
    vu = v[1] + u2 * u2
    shape, scale = (y[1] + u) ** 2 / vu, vu / (y[1] + u)
    assert hi[1] == pytest.approx(stats.gamma.ppf(1 - (1 - LEVEL) / 2, shape, scale=scale))
    assert hi[1] > hi0[1] and np.array_equal(lo, lo0)


def test_difference_estimate_without_draws_is_nan_not_an_error():
    acc = get_measure("accuracy")
    empty = np.zeros((0, 1))
    with pytest.warns(UserWarning, match="does not define"):
        est = difference_estimate(empty, np.zeros(0), empty, empty, acc)
    assert np.isnan(est.value) and est.event_weight is None


@pytest.mark.parametrize("sigma", [0.5, 1.2])
@pytest.mark.parametrize("expected_events", [10, 50])
def test_weighted_gamma_covers_a_weighted_event_count(sigma, expected_events):
    """Monte Carlo coverage of the moment-matched gamma interval for ``E Y``, ``Y = Σ u_j e_j``
    with independent events ``e_j`` more likely where the weight is small (as under an
    importance-sampling proposal that oversamples likely errors): at least the nominal 0.95 up
    to three Monte Carlo s.e., and never narrower than with the mean weight alone."""
    rng = np.random.default_rng(17)
    n, reps = 2000, 4000
    u = np.exp(rng.normal(0.0, sigma, n))
    u /= u.sum()
    pi = np.clip(expected_events * (1 / u) / (1 / u).sum(), 0.0, 1.0)
    mu = float(u @ pi)
    e = rng.random((reps, n)) < pi
    y, v = e @ u, e @ (u * u)
    ubar, urms = np.full(reps, u.mean()), np.full(reps, np.sqrt(np.mean(u * u)))
    lo, hi = iv.weighted_gamma(y, v, ubar, LEVEL, urms)
    lo0, hi0 = iv.weighted_gamma(y, v, ubar, LEVEL)
    cover = np.mean((lo <= mu) & (mu <= hi))
    assert cover >= LEVEL - 3 * np.sqrt(LEVEL * (1 - LEVEL) / reps), cover
    assert np.all(hi >= hi0 - 1e-15) and np.array_equal(lo, lo0)


# -- the far side's anticipated variance ---------------------------------------------------------
def test_far_variance_covers_heavy_events_the_sample_has_not_seen():
    """A tenth of the draws sit at the defensive floor (weight 8.3× the mean) where about 0.9
    events are expected in all: the runs that drew none have a small count *and* a small
    variance. The moment-matched interval misses above (0.79 here); with the far side's variance
    at least the anticipated one — the working model's shape at the data's level,
    ``(y/μ_b) Σ u² π(1 − π)`` — it covers, and where the heavy draws hold almost no events it
    widens the interval by under a tenth."""
    rng = np.random.default_rng(5)
    n, reps = 2000, 4000
    heavy = np.arange(n) < 200
    w = np.where(heavy, 8.3, rng.uniform(0.02, 0.3, n))
    u = w / w.mean() / n
    ub, ur = np.full(reps, u.mean()), np.full(reps, np.sqrt(np.mean(u * u)))
    tol = 3 * np.sqrt(LEVEL * (1 - LEVEL) / reps)
    out = []
    for heavy_events in (0.9, 0.04):
        pi = np.where(heavy, heavy_events / heavy.sum(), 0.04)
        mu = float(u @ pi)
        e = rng.random((reps, n)) < pi
        y, v = e @ u, e @ (u * u)
        va = (y / mu) * ((u * u) @ (pi * (1 - pi)))
        lo0, hi0 = iv.weighted_gamma(y, v, ub, LEVEL, ur)
        lo, hi = iv.weighted_gamma(y, v, ub, LEVEL, ur, va)
        assert np.array_equal(lo, lo0) and np.all(hi >= hi0)  # the far side only
        out.append(
            (
                np.mean((lo0 <= mu) & (mu <= hi0)),
                np.mean((lo <= mu) & (mu <= hi)),
                np.mean(hi - lo) / np.mean(hi0 - lo0),
            )
        )
    (c0, c1, _), (d0, d1, ratio) = out
    assert c0 < LEVEL - 0.1 and c1 >= LEVEL - tol, out
    assert d0 >= LEVEL - tol and d1 >= LEVEL - tol and ratio < 1.1, out


def _gamma(est, **kw):
    """The gamma interval of an accuracy estimate from its fields."""
    return iv.interval(
        est.values,
        est.stderrs,
        (0.0, 1.0),
        LEVEL,
        "gamma",
        event_weight=est.event_weight,
        event_weight_rms=est.event_weight_rms,
        **kw,
    )


def test_anticipated_stderr_is_the_models_variance_at_the_datas_level():
    """``ActiveEvaluator(pool, "accuracy")``: ``Estimate.anticipated_stderr²`` is
    ``ω Σ_j u_j² b_j(1 − b_j)``, ``b_j = min(1, (1 − Ĝ)/ē · e_j)`` with ``e`` the model's own
    error probability of each draw, ``ē`` its pool mean, ``u_j = a_j w_j/Σa`` and ``ω`` the
    posterior probability of that working model against the stage beliefs' predictions of the
    labeled errors; the interval is ``intervals.interval(..., "gamma", anticipated_stderr=...)``.
    F1 has none."""
    from scipy import special

    pool, y = _pool(0.99, 3)
    ev = bae.ActiveEvaluator(pool, "accuracy", rng=5)
    est = ev.run(lambda i: y[i], budget=300, progress=False)
    idx, w, _, _ = ev._arrays()
    p1 = pool.view(None).prob[:, 1]
    pred = pool.view(None).pred
    err = np.where(pred == 1, 1 - p1, p1)
    event = (pred != y)[idx]
    a = est.details["stage_weights"]
    u = a * w / a.sum()
    raw = float(est.details["raw"][0])
    b = np.clip((1 - raw) / err.mean() * err[idx], 0, 1)
    stage = 1 - ev._ma_arrays()["m"][:, 0]

    def loglik(p):
        p = np.clip(p, 1e-12, 1 - 1e-12)
        return np.sum(np.where(event, np.log(p), np.log1p(-p)))

    omega = special.expit(loglik(b) - loglik(stage))
    assert est.details["anticipated"]["model_weight"][0] == pytest.approx(omega, rel=1e-9)
    want = omega * np.sum(u * u * b * (1 - b))
    assert est.anticipated_stderr[0] ** 2 == pytest.approx(want, rel=1e-9)
    # the model's probabilities are the truth's here: they are not discredited, and they
    # anticipate about the variance the draws show
    assert omega > 0.05
    assert 0.3 < est.anticipated_stderr[0] / (np.sqrt(omega) * est.stderr) < 3
    lo, hi = _gamma(est, anticipated_stderr=est.anticipated_stderr)
    assert est.confidence_interval(LEVEL) == (float(lo[0]), float(hi[0]))
    f1 = bae.ActiveEvaluator(pool, "f1", rng=5).run(lambda i: y[i], budget=100, progress=False)
    assert f1.anticipated_stderr is None


def test_flat_model_probabilities_are_discredited_and_do_not_widen():
    """A model whose probabilities say little about where its errors are (every item's error
    probability about 0.2, the errors all near the threshold): the stage beliefs predict the
    labeled errors far better, ``ω ≈ 0``, and the interval is the one without the anticipated
    variance; the two answers of a calibrated model are compared in the test above."""
    rng = np.random.default_rng(0)
    n_items = 4000
    y = (rng.random(n_items) < 0.3).astype(int)
    p = np.clip(np.where(y == 1, 0.8, 0.2) + rng.normal(0, 0.15, n_items), 0.01, 0.99)
    pool = bae.Pool(predictions=(p > 0.5).astype(int), probs=np.c_[1 - p, p])
    ev = bae.ActiveEvaluator(pool, "accuracy", rng=2)
    est = ev.run(lambda i: y[i], budget=600, progress=False)
    assert est.details["anticipated"]["model_weight"][0] < 1e-3
    plain = _gamma(est)
    ci = est.confidence_interval(LEVEL)
    assert ci.low == pytest.approx(float(plain[0][0]), abs=1e-6) and ci.high == float(plain[1][0])
