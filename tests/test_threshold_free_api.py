"""Threshold-free measures through the package's public API: names accepted by estimate,
optimal_proposal, ActiveEvaluator, compare, multiple_comparison and comparison_proposal."""

import numpy as np
import pytest
from scipy import special
from sklearn import metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf


@pytest.fixture(scope="module")
def three_models():
    sp = bae.datasets.make_classification_pool(20_000, 0.02, n_models=3, rng=21)
    return sp


def test_names_resolve_to_rank_measures():
    assert isinstance(bae.measures.get("roc_auc"), tf.RankMeasure)
    assert bae.measures.get("average_precision").kind == "average_precision"
    assert bae.measures.get("recall@fpr=0.05").fpr == 0.05
    d = bae.difference("roc_auc", "a", "b")
    assert d.difference and d.models == ("a", "b")
    assert bae.stack("roc_auc", ("a", "b", "c")).models == ("a", "b", "c")
    assert "roc_auc" in bae.measures.available()


def test_estimate_and_optimal_proposal_dispatch(rare_pool):
    pool, y = rare_pool.pool, rare_pool.labels
    prop = bae.optimal_proposal(pool, "roc_auc")
    np.testing.assert_allclose(prop.q, tf.rank_proposal(pool, "roc_auc").q)
    d = prop.draw(600, rng=1)
    est = bae.estimate(pool, "roc_auc", d, y[d.indices])
    ref = tf.rank_estimate(pool, "roc_auc", d, y[d.indices])
    assert est.value == ref.value and est.stderr == ref.stderr
    s = pool.scores["model"][d.indices]
    assert est.value == pytest.approx(skm.roc_auc_score(y[d.indices], s, sample_weight=d.weights))
    ap = bae.estimate(pool, "average_precision", d, y[d.indices])
    assert ap.value == pytest.approx(
        skm.average_precision_score(y[d.indices], s, sample_weight=d.weights)
    )


def test_active_evaluator_roc_auc(rare_pool):
    pool, y = rare_pool.pool, rare_pool.labels
    truth = tf.weighted_roc_auc(y, pool.scores["model"])
    ev = bae.ActiveEvaluator(pool, "roc_auc", rng=0)
    ev.run(rare_pool.labeler, budget=400, progress=False)
    est = ev.estimate()
    assert ev.n_labels == 400
    assert np.isfinite(est.value) and np.isfinite(est.stderr)
    lo, hi = est.confidence_interval(0.95)
    assert lo <= est.value <= hi
    assert abs(est.value - truth) < 5 * est.stderr + 0.01
    assert len(ev.history) >= 1


def test_active_evaluator_state_round_trip(rare_pool, tmp_path):
    pool = rare_pool.pool
    ev = bae.ActiveEvaluator(pool, "average_precision", rng=0)
    ev.run(rare_pool.labeler, budget=150, progress=False)
    path = ev.save(tmp_path / "ev.npz")
    ev2 = bae.ActiveEvaluator.load(path, pool)
    assert ev2.estimate().value == pytest.approx(ev.estimate().value)


def test_compare_and_multiple_comparison(three_models):
    pool, y = three_models.pool, three_models.labels
    prop = bae.comparison_proposal(pool, "roc_auc", models=("m0", "m1"))
    d = prop.draw(800, rng=3)
    res = bae.compare(pool, "roc_auc", d, y[d.indices], models=("m0", "m1"))
    ref = tf.compare_rank(pool, "roc_auc", d, y[d.indices], models=("m0", "m1"))
    assert res.estimate == pytest.approx(ref.estimate) and res.stderr == pytest.approx(ref.stderr)
    mc = bae.multiple_comparison(pool, "roc_auc", d, y[d.indices])
    assert mc.k == 3
    est = tf.stacked_estimate(pool, "roc_auc", d, y[d.indices], ("m0", "m1", "m2"))
    np.testing.assert_allclose(mc.estimates, est.values)
    assert np.isfinite(mc.pvalue[0, 1])


def test_comparison_proposal_is_the_power_optimal_one(three_models):
    pool = three_models.pool
    q = bae.comparison_proposal(pool, "average_precision", models=("m0", "m2")).q
    ref = tf.comparison_rank_proposal(pool, "average_precision", ("m0", "m2")).q
    np.testing.assert_allclose(q, ref)


def test_rank_measures_refuse_regression_and_multiclass():
    reg = bae.datasets.make_regression_pool(200, rng=0).pool
    with pytest.raises(ValueError, match="binary"):
        bae.optimal_proposal(reg, "roc_auc")
    rng = np.random.default_rng(0)
    probs = special.softmax(rng.normal(size=(50, 3)), axis=1)
    multi = bae.Pool(predictions=probs.argmax(1), probs=probs)
    with pytest.raises(ValueError, match="binary"):
        bae.optimal_proposal(multi, "roc_auc")
