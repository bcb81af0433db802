"""posterior: the recalibrated prior of the conjugate cells (``prior="recalibrated"``, binary pools
with probabilities) — honest near the boundary when the model's probabilities are underconfident;
the default ``prior="auto"`` picks it for design-weighted counts and one model, and the model's
prior ``Dir(s0 π̄)`` (``prior="model"``) otherwise."""

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval.posterior import CellOptions, contingency_posterior, contingency_table


def boundary_pool(accuracy, belief, n_items=5000, seed=0):
    """A pool whose model is right on exactly ``round(accuracy · n_items)`` items, the wrong ones
    drawn in proportion to the model's error probability (``benchmarks/boundary_coverage.py``);
    ``"underconfident"``: the mean error probability is 0.1 whatever the truth."""
    rng = np.random.default_rng(seed)
    mean_err = 1.0 - accuracy if belief == "calibrated" else 0.1
    err = np.clip(rng.beta(0.5, 0.5 * (1.0 / mean_err - 1.0), n_items), 1e-6, 0.49)
    pred = (rng.random(n_items) < 0.3).astype(int)
    p1 = np.where(pred == 1, 1.0 - err, err)
    wrong = np.zeros(n_items, dtype=bool)
    wrong[
        rng.choice(n_items, round((1 - accuracy) * n_items), replace=False, p=err / err.sum())
    ] = True
    return bae.Pool(predictions=pred, probs=p1), np.where(wrong, 1 - pred, pred)


@pytest.mark.parametrize("belief", ["underconfident", "calibrated"])
def test_recalibrated_posterior_covers_near_the_boundary(belief):
    """True accuracy 0.995, 200 passive labels: the model's prior (20 × 4 cells, ``s0 = 0.5``)
    carried the underconfident model's error rate of 0.1 and its 95 % interval of accuracy never
    covered (0 of 40 here; 0.00 in ``benchmarks/results/posterior_cells_boundary.md``); the
    recalibrated prior covers within the Monte Carlo error of 0.95 with either belief."""
    truth, reps, n = 0.995, 40, 200
    pool, y = boundary_pool(truth, belief)
    rng = np.random.default_rng(1)
    hits = 0
    for r in range(reps):
        idx = rng.choice(pool.n_items, n)
        post = contingency_posterior(
            pool, "accuracy", idx, y[idx], prior="recalibrated", draws=300, chains=1, rng=r
        )
        lo, hi = np.quantile(post.posterior["measure"].values.ravel(), [0.025, 0.975])
        hits += bool(lo <= truth <= hi)
    # three binomial standard errors below the nominal level
    assert hits / reps >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps), hits


def test_model_prior_unchanged_and_the_default_where_auto_picks_it():
    """``prior="model"``: the independent rows ``Dir(s0 π̄ + n)`` drawn as before, bit for
    bit. ``prior="auto"`` (the default) is the recalibrated prior for design-weighted counts on
    a binary pool with probabilities (the same draws as asking for it) and the model's prior
    for unweighted (finite-population) counts."""
    pool, y = boundary_pool(0.99, "underconfident", n_items=2000)
    idx = np.random.default_rng(0).choice(pool.n_items, 100)
    w = np.random.default_rng(1).uniform(0.5, 2.0, 100)
    post = contingency_posterior(pool, "accuracy", idx, y[idx], w, prior="model", draws=50, rng=3)
    assert post.attrs["prior"] == "model"
    table = contingency_table(pool, "accuracy", idx, y[idx], w)
    pm = np.clip(table["prior"], 1e-6, None)
    pm = pm / pm.sum(axis=1, keepdims=True)
    g = np.random.default_rng(3).standard_gamma(
        np.broadcast_to(0.5 * pm + table["pseudo"], (2, 50, *pm.shape))
    )
    np.testing.assert_array_equal(post.posterior["theta"].values, g / g.sum(-1, keepdims=True))

    auto = contingency_posterior(pool, "accuracy", idx, y[idx], w, draws=50, rng=3)
    rec = contingency_posterior(
        pool, "accuracy", idx, y[idx], w, prior="recalibrated", draws=50, rng=3
    )
    assert auto.attrs["prior"] == "recalibrated"
    np.testing.assert_array_equal(auto.posterior["theta"].values, rec.posterior["theta"].values)
    fp = contingency_posterior(pool, "accuracy", idx, y[idx], w, weighting="none", draws=50, rng=3)
    assert fp.attrs["prior"] == "model"


def test_recalibrated_prior_learns_the_map_and_is_refused_where_it_has_none():
    pool, y = boundary_pool(0.999, "underconfident", n_items=3000)
    idx = np.random.default_rng(0).choice(pool.n_items, 500)
    post = contingency_posterior(
        pool, "accuracy", idx, y[idx], prior="recalibrated", draws=200, rng=0
    )
    assert post.attrs["prior"] == "recalibrated"
    assert post.posterior["prior_shift"].sizes["prediction"] == 2
    # the model says an error rate of 0.1 where it is 0.001: the posterior moves far from it
    acc = post.posterior["measure"].values.ravel()
    assert np.quantile(acc, 0.025) > 0.97
    # the hyperparameters: shift and slope on their grid, strengths from s0 = 0.5 up
    assert np.all(post.posterior["prior_slope"].values > 0)
    assert post.posterior["prior_strength"].values.min() >= 0.5
    with pytest.raises(ValueError, match="prior must be 'auto', 'model' or 'recalibrated'"):
        CellOptions(prior="flat")
    with pytest.raises(ValueError, match="prior='recalibrated' needs method='conjugate'"):
        contingency_posterior(
            pool, "accuracy", idx, y[idx], method="pymc", prior="recalibrated", draws=5
        )
    # multiclass pools have only the model's prior (no log-odds of one class to recalibrate)
    g = np.random.default_rng(1)
    probs = g.dirichlet(np.ones(3), 600)
    mpool = bae.Pool(predictions=probs.argmax(axis=1), probs=probs)
    i3 = g.choice(600, 60, replace=False)
    y3 = np.array([g.choice(3, p=pr) for pr in probs[i3]])
    mc = contingency_posterior(mpool, "accuracy", i3, y3, draws=20, rng=0)
    assert mc.attrs["prior"] == "model"
    with pytest.raises(ValueError, match="binary pool with probabilities"):
        contingency_posterior(mpool, "accuracy", i3, y3, prior="recalibrated", draws=20)


def test_auto_prior_keeps_the_model_prior_for_several_models_and_multiclass_pools():
    """``prior="auto"`` takes the recalibrated prior only where it was measured: one model, a
    binary pool with probabilities, design-weighted conjugate cells."""
    rng = np.random.default_rng(0)
    n = 3000
    y = (rng.random(n) < 0.2).astype(int)
    pa = np.clip(np.where(y == 1, 0.7, 0.2) + rng.normal(0, 0.1, n), 0.01, 0.99)
    pb = np.clip(np.where(y == 1, 0.6, 0.3) + rng.normal(0, 0.1, n), 0.01, 0.99)
    pool = bae.Pool(
        predictions={"a": (pa > 0.5).astype(int), "b": (pb > 0.5).astype(int)},
        probs={"a": pa, "b": pb},
    )
    idx = rng.choice(n, 300, replace=False)
    kw = dict(draws=20, chains=1, rng=0)
    one = contingency_posterior(pool, "f1", idx, y[idx], model="a", **kw)
    assert one.attrs["prior"] == "recalibrated"
    for measure in (bae.measures.stack("f1", ["a", "b"]), bae.measures.difference("f1", "a", "b")):
        assert contingency_posterior(pool, measure, idx, y[idx], **kw).attrs["prior"] == "model"
    y3 = rng.integers(0, 3, n)
    p3 = rng.dirichlet(np.ones(3), n)
    multi = bae.Pool(predictions=p3.argmax(1), probs=p3)
    assert contingency_posterior(multi, "accuracy", idx, y3[idx], **kw).attrs["prior"] == "model"
