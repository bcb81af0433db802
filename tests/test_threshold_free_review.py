"""Regression tests for the review of the threshold-free measures and curve bands: precision at
``k`` bound to its model, array-level validation, simultaneous-band calibration, literal plot
labels, one drawn positive, average precision under extreme weights, early argument checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import curves
from bayes_activeeval import threshold_free as tf

# ------------------------------------------------------------------------------------------------
# 1. precision at k records its model and refuses any other
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_model_pool():
    return bae.datasets.make_classification_pool(20_000, 0.05, n_models=2, rng=0)


def _true_precision_at_k(pool, y, model, k):
    s = tf.model_scores(pool, model)
    return float(y[s >= np.sort(s)[-k]].mean())


def test_precision_at_k_is_bound_to_its_model(two_model_pool):
    pool, y = two_model_pool.pool, two_model_pool.labels
    m1 = tf.precision_at_k(pool, 100, model="m1")
    assert m1.name == "precision@100[m1]"
    assert m1.models == ("m1",)
    d = bae.passive_proposal(pool).draw(2_000, rng=1)
    with pytest.raises(ValueError, match="bound to models"):
        bae.estimate(pool, m1, d, y[d.indices], model="m0")
    with pytest.raises(ValueError, match="bound to models"):
        bae.compare(pool, m1, d, y[d.indices], models=("m0", "m1"))
    with pytest.raises(ValueError, match="bound to models"):
        bae.measures.stack(m1, ("m0", "m1"))


def test_precision_at_k_per_model_on_a_census(two_model_pool):
    # every item drawn once with weight 1: the estimate is the pool's own precision at k
    pool, y = two_model_pool.pool, two_model_pool.labels
    n = pool.n_items
    d = bae.proposals.Draws(np.arange(n), np.ones(n), np.full(n, 1.0 / n))
    for model in ("m0", "m1"):
        m = tf.precision_at_k(pool, 100, model=model)
        est = bae.estimate(pool, m, d, y)
        assert est.value == pytest.approx(_true_precision_at_k(pool, y, model, 100), abs=1e-12)


# ------------------------------------------------------------------------------------------------
# 2. array-level validation
# ------------------------------------------------------------------------------------------------
Y = np.array([1, 0, 1, 0])
S = np.array([0.9, 0.1, 0.8, 0.3])
V = np.ones(4)
S_NAN = np.array([np.nan, 0.1, 0.8, 0.3])


@pytest.mark.parametrize(
    "call",
    [
        lambda: tf.weighted_roc_auc(Y, S_NAN),
        lambda: tf.weighted_average_precision(Y, S_NAN),
        lambda: curves.weighted_roc_curve(Y, S_NAN),
        lambda: curves.weighted_pr_curve(Y, S_NAN),
    ],
)
def test_nan_scores_are_refused(call):
    with pytest.raises(ValueError, match=r"y_score\[0\] = nan"):
        call()


def test_rank_estimate_arrays_validates_its_arrays():
    with pytest.raises(ValueError, match=r"scores\[0\] = nan"):
        tf.rank_estimate_arrays("roc_auc", S_NAN, Y, V)
    with pytest.raises(ValueError, match=r"scores\[2\] = inf"):
        tf.rank_estimate_arrays("roc_auc", np.array([0.9, 0.1, np.inf, 0.3]), Y, V)
    for labels, bad in (([0, 2, 2, 0], "2"), ([-1, 1, 1, -1], "-1"), ([0, 0.7, 1, 0], "0.7")):
        with pytest.raises(ValueError, match=rf"y\[\d\] = {bad}; expected 0 or 1"):
            tf.rank_estimate_arrays("roc_auc", S, np.array(labels), V)
    with pytest.raises(ValueError, match=r"weights\[1\] = -1.0"):
        tf.rank_estimate_arrays("roc_auc", S, Y, np.array([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"weights\[1\] = nan"):
        tf.rank_estimate_arrays("roc_auc", S, Y, np.array([1.0, np.nan, 1.0, 1.0]))
    with pytest.raises(ValueError, match="weights has 3 entries; expected 4"):
        tf.rank_estimate_arrays("roc_auc", S, Y, np.ones(3))
    with pytest.raises(ValueError, match="'rocauc' is not a threshold-free measure"):
        tf.rank_estimate_arrays("rocauc", S, Y, V)


@pytest.mark.parametrize(
    "func",
    [
        tf.weighted_roc_auc,
        tf.weighted_average_precision,
        curves.weighted_roc_curve,
        curves.weighted_pr_curve,
    ],
)
def test_bad_sample_weights_are_refused(func):
    with pytest.raises(ValueError, match=r"sample_weight\[1\] = -1.0"):
        func(Y, S, [1.0, -1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"sample_weight\[1\] = nan"):
        func(Y, S, [1.0, np.nan, 1.0, 1.0])
    with pytest.raises(ValueError, match="sample_weight has 3 entries"):
        func(Y, S, [1.0, 1.0, 1.0])


# ------------------------------------------------------------------------------------------------
# 3. simultaneous bands: calibrated within the Monte Carlo error
# ------------------------------------------------------------------------------------------------
def _band_coverage(prev, curve, n, reps, seed=0):
    sp = bae.datasets.make_classification_pool(5_000, prev, separation=3.0, noise=0.3, rng=12)
    pool, y = sp.pool, sp.labels
    s = tf.model_scores(pool, "model")
    tp, fp, _ = curves._cumulative(y, s, pool.p)
    prop = bae.passive_proposal(pool)
    rng = np.random.default_rng(seed)
    hits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            d = prop.draw(n, rng=rng)
            yy = y[d.indices]
            if yy.min() == yy.max():
                continue
            band = curves.curve_band(pool, d, yy, curve=curve, n_boot=100, grid=51, rng=rng)
            hits.append(band.contains(curves._on_grid(curve, tp, fp, band.x)[0]))
    return float(np.mean(hits)), len(hits)


@pytest.mark.parametrize(
    "prev, curve, n",
    [
        # 90 positives among 300 draws: the old band, studentized by a bootstrap SD near 0 next
        # to flat stretches, covered 0.993 here (1.000 at 1:10 and 1,000 labels)
        (0.3, "roc", 300),
        # about 7 positives among 700 draws: precision below the first drawn positive's recall
        (0.01, "pr", 700),
    ],
)
def test_band_coverage_is_nominal_within_monte_carlo_error(prev, curve, n):
    reps, level = 300, 0.95
    cover, r = _band_coverage(prev, curve, n, reps)
    se = np.sqrt(level * (1 - level) / r)
    # two-sided: over-coverage (a needlessly wide band) fails as under-coverage does
    assert abs(cover - level) <= 3 * se, (cover, r, se)


def test_band_warns_with_few_positives():
    sp = bae.datasets.make_classification_pool(5_000, 0.01, rng=3)
    pool, y = sp.pool, sp.labels
    d = bae.passive_proposal(pool).draw(300, rng=1)
    yy = y[d.indices]
    assert 1 <= yy.sum() < curves.MIN_POSITIVES
    with pytest.warns(UserWarning, match="effective positives"):
        curves.curve_band(pool, d, yy, n_boot=50, rng=0)


# ------------------------------------------------------------------------------------------------
# 4. plot labels are literal
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cost$\\frac$", "_hidden"])
def test_band_plot_shows_the_model_name_literally(name):
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    y = (rng.random(3_000) < 0.1).astype(int)
    s = rng.normal(2 * y, 1)
    pool = bae.Pool(predictions={name: (s > 1).astype(int)}, scores={name: s}, classes=[0, 1])
    d = bae.passive_proposal(pool).draw(500, rng=1)
    band = curves.curve_band(pool, d, y[d.indices], rng=0, n_boot=50)
    fig, ax = plt.subplots()
    try:
        band.plot(ax=ax)
        legend = ax.legend()
        fig.savefig(io.BytesIO(), format="png")
        (text,) = [t.get_text() for t in legend.get_texts()]
        assert text == curves.mpl_literal(name)
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------------------------
# 5. one drawn positive: the Kish-size fallback, with a warning
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("measure", ["roc_auc", "average_precision"])
def test_one_positive_gets_the_kish_fallback(measure):
    s = np.array([0.9, 0.1, 0.8, 0.3, 0.5])
    y = np.array([0, 0, 1, 0, 0])
    with pytest.warns(bae.UndefinedEstimateWarning, match="single draw"):
        est = tf.rank_estimate_arrays(measure, s, y, np.ones(5))
    assert np.isfinite(est.value) and np.isfinite(est.stderr)
    lo, hi = est.confidence_interval(0.95)
    assert np.isfinite(lo) and np.isfinite(hi) and lo < est.value <= hi
    assert est.details["variance"] == "kish"
    # the interval is the Wilson interval on the Kish size (1) of the scarcer class
    wl, wh = bae.intervals.wilson(est.value, 1.0, 0.95)
    assert (lo, hi) == pytest.approx((float(wl), float(wh)), abs=1e-9)


# ------------------------------------------------------------------------------------------------
# 6. average precision under weights spanning 1e12
# ------------------------------------------------------------------------------------------------
def test_average_precision_with_extreme_weights_matches_sklearn():
    y = np.array([0, 1, 1])
    s = np.array([0.0, 3.0, 0.0])
    v = np.array([8.38533855e03, 2.14777706e-08, 2.47441848e-08])
    ref = skm.average_precision_score(y, s, sample_weight=v)
    assert tf.weighted_average_precision(y, s, v) == pytest.approx(ref, abs=1e-12)
    with pytest.warns(bae.UndefinedEstimateWarning, match="single draw"):  # one negative
        est = tf.rank_estimate_arrays("average_precision", s, y, v)
    assert est.value == pytest.approx(ref, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# 7. variance= and belief= are checked before the undefined-sample return
# ------------------------------------------------------------------------------------------------
def test_bad_variance_is_refused_on_an_undefined_sample():
    y0 = np.zeros(4, dtype=int)
    with pytest.raises(ValueError, match="variance must be"):
        tf.rank_estimate_arrays("roc_auc", S, y0, V, variance="foo")
    with pytest.raises(ValueError, match="needs belief="):
        tf.rank_estimate_arrays("roc_auc", S, y0, V, variance="belief")
    with pytest.raises(ValueError, match="belief has shape"):
        tf.rank_estimate_arrays("roc_auc", S, y0, V, belief=np.full(3, 0.5))
