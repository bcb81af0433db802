import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval.datasets import load_demo, make_classification_pool


def test_class_inference_and_encoding():
    pool = bae.Pool(predictions=np.array([0, 1, 1]), probs=np.array([0.2, 0.6, 0.9]))
    assert pool.task == "binary" and list(pool.classes) == [0, 1] and pool.pos == 1
    np.testing.assert_allclose(pool.view().prob[:, 1], [0.2, 0.6, 0.9])
    # all-negative predictions still give a binary pool when probs are a vector
    pool0 = bae.Pool(predictions=np.zeros(3, dtype=int), probs=np.array([0.2, 0.3, 0.1]))
    assert list(pool0.classes) == [0, 1]
    # -1 / 1 labels
    pm = bae.Pool(predictions=np.array([-1, 1]), probs=np.array([0.2, 0.9]))
    assert list(pm.classes) == [-1, 1] and pm.pos_label == 1
    np.testing.assert_array_equal(pm.encode_labels([1, -1, 1]), [1, 0, 1])
    np.testing.assert_array_equal(pm.decode_labels(np.array([0, 1])), [-1, 1])
    # multiclass with strings
    mc = bae.Pool(predictions=np.array(["b", "a", "c"]), probs=np.eye(3))
    assert mc.task == "multiclass" and list(mc.classes) == ["a", "b", "c"]
    np.testing.assert_array_equal(mc.view().pred, [1, 0, 2])


def test_regression_inference_and_dataset():
    pool = bae.Pool(
        predictions=np.array([0.5, 1.2, -0.3]), predictive_std=np.array([1.0, 0.5, 2.0])
    )
    assert pool.task == "regression" and pool.n_classes == 0
    ds = pool.to_dataset()
    assert set(ds.dims) == {"item", "model"} and "predictive_std" in ds


def test_weights_costs_and_dataset(rng):
    n = 50
    pool = bae.Pool(
        predictions={"a": rng.integers(0, 2, n), "b": rng.integers(0, 2, n)},
        probs={"a": rng.random(n), "b": rng.random(n)},
        costs=rng.uniform(1, 2, n),
        weights=rng.uniform(0, 1, n),
        item_ids=[f"id{i}" for i in range(n)],
    )
    assert pool.p.sum() == pytest.approx(1.0)
    ds = pool.to_dataset()
    assert ds["prob"].dims == ("item", "model", "class")
    assert list(ds["model"].values) == ["a", "b"]
    assert ds["cost"].shape == (n,)
    with pytest.raises(ValueError, match="item_ids contains duplicates"):
        bae.Pool(predictions=np.zeros(2, dtype=int), probs=[0.1, 0.2], item_ids=["x", "x"])


def test_weighted_pool_targets_weighted_measure(rng):
    """With item weights p(x), passive draws estimate the p-weighted measure."""
    n = 2000
    y = rng.integers(0, 2, n)
    f = np.where(rng.random(n) < 0.8, y, 1 - y)
    w = rng.uniform(0, 3, n)
    pool = bae.Pool(predictions=f, probs=np.full(n, 0.5), weights=w)
    truth = np.sum(w * (f == y)) / np.sum(w)
    prop = bae.optimal_proposal(pool, "accuracy")
    vals = []
    for seed in range(200):
        d = prop.draw(300, rng=seed)
        vals.append(bae.estimate(pool, "accuracy", d, y[d.indices], oracle="stochastic").value)
    assert np.mean(vals) == pytest.approx(truth, abs=4 * np.std(vals) / np.sqrt(200))


def test_synthetic_generators_are_deterministic():
    a = make_classification_pool(1000, 0.05, rng=3)
    b = make_classification_pool(1000, 0.05, rng=3)
    np.testing.assert_array_equal(a.labels, b.labels)
    demo = load_demo()
    assert demo.pool.n_items >= 50_000 and demo.labels.mean() <= 0.01
    assert np.array_equal(demo.labels, load_demo().labels)
    with pytest.raises(ValueError, match="calibration must be"):
        make_classification_pool(100, 0.1, calibration="bad")
