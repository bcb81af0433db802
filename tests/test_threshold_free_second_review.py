"""Threshold-free measures, second review (session 31): the PR band does not depend on the order
of the draws; a class present only with weight 0 is refused; draws of another pool and bad
weights are refused by name (rank estimates, ``compare``, ``curve_band``); ``probs`` and a
``belief_floor`` of one half or more are refused by ``adaptive_rank_proposal`` /
``rank_proposal``."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval import curves
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.proposals import Draws


@pytest.fixture(scope="module")
def coarse():
    """A pool whose scores take few values (many ties)."""
    rng = np.random.default_rng(4)
    n = 3000
    s = np.round(rng.standard_normal(n), 1)
    p = 1 / (1 + np.exp(-(2 * s - 2)))
    y = (rng.random(n) < p).astype(int)
    pool = bae.Pool(predictions=(s > 0.5).astype(int), probs=p, scores=s)
    return pool, y


def test_pr_band_does_not_depend_on_the_order_of_the_draws(coarse):
    pool, y = coarse
    d = bae.passive_proposal(pool).draw(300, rng=1)
    s = pool.scores["model"][d.indices]
    order = np.lexsort((-y[d.indices], -s))  # positives first within ties
    other = np.lexsort((y[d.indices], -s))  # negatives first
    bands = []
    for o in (order, other):
        dd = Draws(d.indices[o], d.weights[o], d.q[o])
        bands.append(
            curves.curve_band(pool, dd, y[dd.indices], curve="pr", n_boot=200, grid=11, rng=0)
        )
    np.testing.assert_array_equal(bands[0].low, bands[1].low)
    np.testing.assert_array_equal(bands[0].high, bands[1].high)


def test_effective_counts_take_the_whole_tie_group():
    s = np.array([2.0, 2, 2, 2, 1, 1, 0, 0])
    y = np.array([1, 0, 0, 0, 1, 0, 1, 0])
    v, xs = np.ones(8), np.array([0.2, 0.5, 0.9])
    perm = np.array([3, 1, 2, 0, 5, 4, 7, 6])
    a = curves._effective_counts("pr", y, s, v, xs)
    b = curves._effective_counts("pr", y[perm], s[perm], v[perm], xs)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, [4.0, 6.0, 8.0])


def test_a_class_with_zero_weight_only_is_refused():
    sp = make_classification_pool(3000, 0.05, rng=0)
    d = bae.passive_proposal(sp.pool).draw(200, rng=0)
    lab = sp.labels[d.indices]
    pos = np.flatnonzero(lab == 1)
    keep = np.r_[np.flatnonzero(lab == 0)[:19], pos[:1]]
    w = np.ones(keep.size)
    w[-1] = 0.0  # the only positive has weight 0
    dd = Draws(d.indices[keep], w, d.q[keep])
    for curve in ("roc", "pr"):
        with pytest.raises(ValueError, match="positive weight"):
            curves.curve_band(sp.pool, dd, lab[keep], curve=curve, n_boot=50, rng=0)


def test_draws_of_another_pool_and_bad_weights_are_refused():
    sp = make_classification_pool(3000, 0.05, n_models=2, rng=0)
    pool = sp.pool
    lab = np.array([0, 1, 0, 1])
    for bad in (-1, 5000):
        d = Draws(np.array([0, 1, bad, 3]), np.ones(4), np.full(4, 1 / 3000))
        with pytest.raises(ValueError, match="is not an item of the pool"):
            tf.rank_estimate(pool, "roc_auc", d, lab, model="m0")
        with pytest.raises(ValueError, match="is not an item of the pool"):
            bae.compare(pool, "roc_auc", d, lab, models=("m0", "m1"))
        with pytest.raises(ValueError, match="is not an item of the pool"):
            bae.compare(pool, "error_rate", d, lab, models=("m0", "m1"))
        with pytest.raises(ValueError, match="is not an item of the pool"):
            curves.curve_band(pool, d, lab, model="m0", n_boot=50, rng=0)
    for w in ([1, -1, 1, 1], [1, np.nan, 1, 1]):
        d = Draws(np.array([0, 1, 2, 3]), np.array(w, dtype=float), np.full(4, 1 / 3000))
        with pytest.raises(ValueError, match=r"draws\.weights"):
            curves.curve_band(pool, d, lab, model="m0", n_boot=50, rng=0)


def test_rank_proposal_arguments_are_checked():
    sp = make_classification_pool(3000, 0.05, rng=0)
    pool = sp.pool
    with pytest.raises(ValueError, match="probs"):
        tf.adaptive_rank_proposal(pool, "roc_auc", np.full(3000, 1.5))
    with pytest.raises(ValueError, match="probs has shape"):
        tf.adaptive_rank_proposal(pool, "roc_auc", np.full(30, 0.1))
    with pytest.raises(ValueError, match=r"belief_floor must be below 0\.5"):
        tf.rank_proposal(pool, "roc_auc", belief_floor=0.7)
    with pytest.raises(ValueError, match=r"belief_floor must be below 0\.5"):
        tf.adaptive_rank_proposal(pool, "roc_auc", np.full(3000, 0.2), belief_floor=0.6)
