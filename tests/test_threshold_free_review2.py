"""Regression tests for the second review of the threshold-free measures and curves: recall at a
false-positive rate on an exact ROC step and below the sample's resolution, bootstrap resamples
without a class, a single positive item drawn twice, shape checks, proposals with zero mass,
the docs' ``variance=`` advice, the unknown-measure message, zero-weight draws and single-class
curves."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval import curves
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.proposals import Draws

DOCS = Path(__file__).resolve().parents[1] / "docs" / "threshold-free.md"


def _caught(fn):
    """Run ``fn`` recording every warning; return its result and the warnings."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, w


# ------------------------------------------------------------------------------------------------
# 1. recall@FPR: α on an exact ROC step followed by a vertical segment
# ------------------------------------------------------------------------------------------------
# scores descending: two negatives, three positives, eight negatives, one positive. FPR 0.2 is
# reached exactly after the second negative, and the three positives above the third negative
# make a vertical segment there; np.interp reads the top of it (TPR 0.75)
Y_STEP = np.array([0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1])
S_STEP = np.arange(Y_STEP.size, dtype=float)[::-1]


def _mean_influence(measure, s, y, w):
    """``E_P̂[ψ]`` under the weighted empirical distribution (0 for an influence function)."""
    _, p1, p0 = tf.influence(measure, s, w * y, w * (1 - y))
    return float((w * y) @ p1 + (w * (1 - y)) @ p0) / float(w.sum())


def test_recall_at_fpr_on_an_exact_step_has_a_centred_influence():
    y, s, w = Y_STEP, S_STEP, np.ones(Y_STEP.size)
    value = tf.influence("recall@fpr=0.2", s, w * y, w * (1 - y))[0]
    assert value == 0.75  # the top of the vertical segment, as np.interp reads it
    # the old threshold (side="left") took the bottom of the segment: mean ψ = −0.75
    assert abs(_mean_influence("recall@fpr=0.2", s, y, w)) < 1e-12
    # and the standard error is continuous in α just above the step (0.661 against 0.559)
    se = [
        float(tf.rank_estimate_arrays(f"recall@fpr={a!r}", s, y, w, variance="empirical").stderr)
        for a in (0.2, 0.2 + 1e-9)
    ]
    assert se[0] == pytest.approx(se[1], rel=1e-6)


def test_recall_at_fpr_influence_is_centred_on_random_tied_samples():
    rng = np.random.default_rng(0)
    worst, on_step = 0.0, 0
    for it in range(400):
        n = int(rng.integers(5, 40))
        y = rng.integers(0, 2, n)
        if y.min() == y.max():
            continue
        s = rng.integers(0, 6, n).astype(float)  # heavy ties
        w = np.ones(n) if it % 3 else rng.integers(1, 4, n).astype(float)
        n0 = w[y == 0].sum()
        if it % 2 == 0 and n0 > 1:  # α on a step of the sample's ROC curve
            a = float(rng.integers(1, int(n0)) / n0)
            on_step += 1
        else:
            a = float(rng.uniform(0.01, 0.99))
        worst = max(worst, abs(_mean_influence(f"recall@fpr={a!r}", s, y, w)))
    assert on_step > 150
    assert worst < 1e-12, worst


# ------------------------------------------------------------------------------------------------
# 2. recall@FPR below the sample's false-positive-rate resolution warns
# ------------------------------------------------------------------------------------------------
def test_recall_at_fpr_below_resolution_warns():
    rng = np.random.default_rng(1)
    y = np.r_[np.ones(10, int), np.zeros(40, int)]
    s = rng.normal(size=y.size) + y
    w = np.ones(y.size)  # Kish size of the negatives: 40
    for a, warns in ((0.02, True), (0.024, True), (0.025, False), (0.1, False)):
        _, caught = _caught(lambda a=a: tf.rank_estimate_arrays(f"recall@fpr={a}", s, y, w))
        hit = [c for c in caught if "resolution" in str(c.message)]
        assert bool(hit) == warns, (a, [str(c.message) for c in caught])
        if warns:
            assert issubclass(hit[0].category, UserWarning)
            assert "Kish size 40" in str(hit[0].message)
    # the other measures never warn of it
    _, caught = _caught(lambda: tf.rank_estimate_arrays("roc_auc", s, y, w))
    assert not [c for c in caught if "resolution" in str(c.message)]


def test_recall_at_fpr_below_resolution_is_biased_and_warned_in_every_sample():
    """Why it warns: passive 1:100, 1,000 labels (n₀ ≈ 990), α = 1e-4 (α n₀ ≈ 0.1). The estimate
    is the share of positives above the sample's top negative, the recall at an FPR near 1e-3."""
    sp = bae.datasets.make_classification_pool(100_000, 0.01, rng=11)
    pool, y = sp.pool, sp.labels
    s = tf.model_scores(pool, "model")
    meas = "recall@fpr=0.0001"
    truth = tf.influence(meas, s, y * 1.0, 1.0 - y)[0]
    prop = bae.passive_proposal(pool)
    rng = np.random.default_rng(5)
    vals, warned = [], 0
    for _ in range(150):
        d = prop.draw(1_000, rng=rng)
        est, caught = _caught(
            lambda d=d: tf.rank_estimate_arrays(meas, s[d.indices], y[d.indices], d.weights)
        )
        warned += any("resolution" in str(c.message) for c in caught)
        if np.isfinite(est.value):
            vals.append(est.value)
    vals = np.asarray(vals)
    assert warned == 150
    mc_se = vals.std(ddof=1) / np.sqrt(vals.size)
    assert vals.mean() - truth > 3 * mc_se, (vals.mean(), truth, mc_se)


# ------------------------------------------------------------------------------------------------
# 3. bootstrap resamples without a class define no curve
# ------------------------------------------------------------------------------------------------
def test_on_grid_rows_without_a_class_are_nan():
    y = np.array([0, 1, 0, 0, 1])
    s = np.array([5.0, 4, 3, 2, 1])
    W = np.array([[1, 0, 1, 1, 0.0], [1, 1, 1, 1, 1.0], [0, 1, 0, 0, 1.0]])
    tp, fp, _ = curves._cumulative(y, s, W)
    grid = np.array([0.1, 0.5, 0.9])
    pr = curves._on_grid("pr", tp, fp, grid)
    roc = curves._on_grid("roc", tp, fp, grid)
    assert np.isnan(pr[0]).all()  # no positives: was precision 0 everywhere
    assert np.isnan(roc[0]).all() and np.isnan(roc[2]).all()  # no positives / no negatives
    assert np.array_equal(pr[2], np.ones(3))  # no negatives: precision 1, a curve
    assert np.isfinite(pr[1]).all() and np.isfinite(roc[1]).all()


def test_curve_band_drops_resamples_without_positives():
    n = 40
    y = np.r_[np.ones(3, int), np.zeros(n - 3, int)]
    s = np.r_[[3.0, 1.0, -0.5], np.random.default_rng(0).normal(-1, 1, n - 3)]
    s[3] = 4.0
    pr = 1 / (1 + np.exp(-s))
    pool = bae.Pool((pr > 0.5).astype(int), pr)
    d = Draws(np.arange(n), np.ones(n), np.full(n, 1 / n))
    n_boot = 2000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fewer than 5 positives
        band = curves.curve_band(pool, d, y, curve="pr", n_boot=n_boot, rng=0)
    # the same resamples (one chunk of multinomial counts from the same generator), over the
    # draws in curve_band's order (score descending, then item)
    counts = np.random.default_rng(0).multinomial(n, np.full(n, 1 / n), size=n_boot)
    from bayes_activeeval.threshold_free.estimates import model_scores

    canon = np.lexsort((d.indices, -model_scores(pool, "model")[d.indices]))
    with_pos = int(np.count_nonzero(counts[:, y[canon] == 1].sum(axis=1) > 0))
    assert with_pos < n_boot - 50  # P(no positive) = (37/40)^40 ≈ 0.044
    assert band.n_boot == with_pos


# ------------------------------------------------------------------------------------------------
# 4. a single positive item drawn twice takes the single-draw fallback
# ------------------------------------------------------------------------------------------------
def _one_positive_pool():
    rng = np.random.default_rng(0)
    s = np.r_[1.0, rng.normal(0, 1, 30)]
    y = np.r_[1, np.zeros(30, int)]
    p = 1 / (1 + np.exp(-s))
    return bae.Pool((p > 0.5).astype(int), p, scores=s), y


@pytest.mark.parametrize("measure", ["roc_auc", "average_precision"])
def test_one_positive_item_drawn_twice_is_one_item(measure):
    pool, y = _one_positive_pool()
    n = y.size
    once = Draws(np.arange(n), np.ones(n), np.full(n, 1 / n))
    twice = Draws(np.r_[0, np.arange(n)], np.ones(n + 1), np.full(n + 1, 1 / n))
    est = {}
    for name, d in (("twice", twice), ("once", once)):  # the repeat first
        est[name], caught = _caught(
            lambda d=d: tf.rank_estimate(pool, measure, d, y[d.indices], variance="empirical")
        )
        msgs = [str(c.message) for c in caught if c.category is bae.UndefinedEstimateWarning]
        assert est[name].details["variance"] == "kish", (name, est[name].details["variance"])
        want = "single draw with positive weight" if name == "once" else "single item drawn 2"
        assert any(want in m for m in msgs), msgs
    # the Kish size counts the item once: a proportion's SD on one item, as for one draw (the
    # AUC is the same on both samples; AP weighs the repeated positive twice)
    for e in est.values():
        assert e.kish[0] == pytest.approx(1.0)
        x = e.value
        assert float(np.atleast_1d(e.stderr)[0]) == pytest.approx(np.sqrt(x * (1 - x)), rel=1e-12)
    if measure == "roc_auc":
        assert est["twice"].value == est["once"].value


def test_items_argument_of_the_array_function():
    pool, y = _one_positive_pool()
    s = tf.model_scores(pool, "model")
    idx = np.r_[0, np.arange(y.size)]
    w = np.ones(idx.size)
    plain = tf.rank_estimate_arrays("roc_auc", s[idx], y[idx], w, variance="empirical")
    assert plain.details["variance"] == "empirical"  # draws counted: unchanged default
    with pytest.warns(bae.UndefinedEstimateWarning, match="single item drawn 2 times"):
        by_item = tf.rank_estimate_arrays(
            "roc_auc", s[idx], y[idx], w, variance="empirical", items=idx
        )
    assert by_item.details["variance"] == "kish"
    with pytest.raises(ValueError, match=r"items has shape \(3,\); expected \(32,\)"):
        tf.rank_estimate_arrays("roc_auc", s[idx], y[idx], w, items=[0, 1, 2])


# ------------------------------------------------------------------------------------------------
# 5. shapes checked up front
# ------------------------------------------------------------------------------------------------
S2 = np.c_[[1, 2, 3, 4, 5, 6.0], [6, 5, 4, 3, 2, 1.0]]


@pytest.mark.parametrize("measure", ["roc_auc", "recall@fpr=0.1", "average_precision"])
@pytest.mark.parametrize("y", [[0, 1, 0, 1, 1, 0], [0, 0, 0, 1, 0, 0]])
def test_unbound_measure_refuses_several_score_columns(measure, y):
    with pytest.raises(ValueError, match=r"scores has shape \(6, 2\).*\(6,\) or \(6, 1\)"):
        tf.rank_estimate_arrays(measure, S2, y, np.ones(6))


def test_bound_measure_needs_one_column_per_model():
    m = tf.RankMeasure("roc_auc").bind(("a", "b"), difference=True)
    with pytest.raises(ValueError, match=r"scores has shape \(6,\).*\(6, 2\)"):
        tf.rank_estimate_arrays(m, S2[:, 0], [0, 1, 0, 1, 1, 0], np.ones(6))
    est = tf.rank_estimate_arrays(m, S2, [0, 1, 0, 1, 1, 0], np.ones(6))
    assert est.values.shape == (1,) and est.outputs == (m.name,)


def test_control_shape_is_checked_up_front():
    y, s = [0, 1, 0, 1], [1.0, 2, 3, 4]
    with pytest.raises(ValueError, match=r"control has shape \(3,\); expected \(4,\) or \(4, 1\)"):
        tf.rank_estimate_arrays("roc_auc", s, y, np.ones(4), control=np.ones(3))
    with pytest.raises(ValueError, match=r"control has shape \(4, 2\); expected \(4,\) or"):
        tf.rank_estimate_arrays("roc_auc", s, y, np.ones(4), control=np.ones((4, 2)))
    # checked before the sample is found undefined
    with pytest.raises(ValueError, match="control has shape"):
        tf.rank_estimate_arrays("roc_auc", s, [0, 0, 0, 0], np.ones(4), control=np.ones(5))


# ------------------------------------------------------------------------------------------------
# 6. proposals that put q = 0 where p > 0
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hard_belief():
    sp = bae.datasets.make_classification_pool(5_000, 0.02, rng=0)
    pi = sp.pool.view("model").positive_prob().copy()
    pi[pi < 0.02] = 0.0  # the bulk "cannot" be positive
    return sp, pi


def test_rank_proposal_refuses_zero_mass_where_needed(hard_belief):
    sp, pi = hard_belief
    pool = sp.pool
    with pytest.raises(ValueError, match=r"zero mass to item \d+ .*use mix > 0 or belief_floor"):
        tf.rank_proposal(pool, "average_precision", belief=pi, belief_floor=0, mix=0)
    with pytest.raises(ValueError, match="zero mass to item"):
        bae.optimal_proposal(pool, "average_precision", belief=pi, belief_floor=0, mix=0)
    # either remedy works, as for optimal_proposal's other measures
    assert np.all(tf.rank_proposal(pool, "average_precision", belief=pi, mix=0).q > 0)
    q = tf.rank_proposal(pool, "average_precision", belief=pi, belief_floor=0, mix=0.05).q
    assert np.all(q > 0)


def test_adaptive_rank_proposal_warns_of_zero_mass(hard_belief):
    sp, pi = hard_belief
    pool = sp.pool
    with pytest.warns(UserWarning, match=r"zero mass to unlabeled item .* never drawn"):
        q = tf.adaptive_rank_proposal(pool, "average_precision", pi, belief_floor=0.0).q
    assert np.any(q == 0)
    _, caught = _caught(lambda: tf.adaptive_rank_proposal(pool, "average_precision", pi))
    assert not [c for c in caught if "zero mass" in str(c.message)]
    # labeled items are excluded: with every zero-mass item known, no warning
    known = q == 0
    probs = np.where(known, sp.labels, pi)
    _, caught = _caught(
        lambda: tf.adaptive_rank_proposal(
            pool, "average_precision", probs, known=known, belief_floor=0.0
        )
    )
    assert not [c for c in caught if "zero mass to unlabeled" in str(c.message)]


# ------------------------------------------------------------------------------------------------
# 7. the docs name rank_estimate for variance=
# ------------------------------------------------------------------------------------------------
def test_docs_name_rank_estimate_for_the_variance_choice():
    """``bae.estimate`` takes no ``variance=``: the paragraph that tells how to choose the
    variance must name ``rank_estimate`` (it followed the ``bae.estimate`` example alone)."""
    paragraphs = re.split(r"\n\s*\n", DOCS.read_text(encoding="utf-8"))
    hits = [p for p in paragraphs if re.search(r'variance="(empirical|belief)"', p)]
    assert hits
    for p in hits:
        assert "rank_estimate(" in p, p[:300]


# ------------------------------------------------------------------------------------------------
# 8. hygiene
# ------------------------------------------------------------------------------------------------
def test_unknown_measure_lists_the_threshold_free_ones():
    pool = bae.datasets.make_classification_pool(500, 0.1, rng=0).pool
    with pytest.raises(ValueError, match="unknown measure") as err:
        bae.optimal_proposal(pool, "recall@fpr=abc")
    msg = str(err.value)
    for name in ("accuracy", "roc_auc", "average_precision", "recall@fpr=α", "precision_at_k"):
        assert name in msg, (name, msg)


def test_zero_weight_draws_are_not_draws():
    est, caught = _caught(
        lambda: tf.rank_estimate_arrays("roc_auc", [1.0, 2, 3, 4], [0, 1, 0, 1], [1, 1, 1, 0])
    )
    assert not [c for c in caught if issubclass(c.category, RuntimeWarning)], [
        str(c.message) for c in caught
    ]
    msgs = [str(c.message) for c in caught if c.category is bae.UndefinedEstimateWarning]
    assert any(
        "positives are a single draw with positive weight (2 drawn, 1 with weight 0)" in m
        for m in msgs
    ), msgs
    assert est.details["variance"] == "kish"
    # two positive-weight draws of each class: no fallback, and the zero-weight draw adds nothing
    est2, caught = _caught(
        lambda: tf.rank_estimate_arrays(
            "roc_auc", [1.0, 2, 3, 4, 5], [0, 1, 0, 1, 1], [1, 1, 1, 0, 1], variance="empirical"
        )
    )
    ref = tf.rank_estimate_arrays(
        "roc_auc", [1.0, 2, 3, 5], [0, 1, 0, 1], [1, 1, 1, 1], variance="empirical"
    )
    assert not [c for c in caught if issubclass(c.category, RuntimeWarning)]
    assert est2.value == ref.value
    assert float(np.atleast_1d(est2.stderr)[0]) == pytest.approx(
        float(np.atleast_1d(ref.stderr)[0]), rel=1e-12
    )


def test_single_class_curves_raise():
    with pytest.raises(ValueError, match="no negative label of positive weight; the ROC"):
        curves.weighted_roc_curve([1, 1], [1, 2])
    with pytest.raises(ValueError, match="no positive label of positive weight; the ROC"):
        curves.weighted_roc_curve([0, 0], [1, 2])
    with pytest.raises(ValueError, match="no positive label of positive weight; the prec"):
        curves.weighted_pr_curve([0, 0], [1, 2])
    # a positive of weight 0 does not count
    with pytest.raises(ValueError, match="no positive label of positive weight"):
        curves.weighted_pr_curve([0, 1], [1, 2], [1, 0])
    # a PR curve without negatives is defined: precision 1
    prec, rec, _ = curves.weighted_pr_curve([1, 1], [1, 2])
    assert np.array_equal(prec, [1.0, 1.0, 1.0]) and np.array_equal(rec, [1.0, 0.5, 0.0])
