"""ActiveEvaluator, second review (session 31): a refused stochastic ``update`` changes nothing
(it kept the labels before the bad entry, so the stage later closed with fewer labels than draws);
``from_state`` copies the pending draws, so one state restores the same evaluator twice; the
oracle models count an update only once its labels are accepted; refusals name labels in the
pool's classes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.oracles import make_oracle


@pytest.fixture(scope="module")
def data():
    return make_classification_pool(3000, 0.05, rng=1)


def test_refused_stochastic_update_changes_nothing(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = bae.ActiveEvaluator(data.pool, "f1", oracle="model", rng=0, deterministic=False)
        idx = ev.query(10)
        before = {k: v.copy() for k, v in ev.get_state()["pending"].items()}
        stray = next(i for i in range(3000) if i not in set(idx.tolist()))
        bad = np.r_[idx[:3], stray]
        with pytest.raises(ValueError, match=f"item {stray} has no pending draw"):
            ev.update(bad, data.labeler(bad))
        after = ev.get_state()["pending"]
        for k in before:
            np.testing.assert_array_equal(after[k], before[k])
        assert ev.n_labels == 0
        ev.update(idx, data.labeler(idx))  # the right update still closes the stage
        assert ev.stage == 1 and ev.n_labels == 10 and ev.n_draws == 10


def test_one_state_restores_the_same_evaluator_twice(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = bae.ActiveEvaluator(data.pool, "f1", oracle="model", rng=0, deterministic=False)
        idx = ev.query(10)
        state = ev.get_state()
        snapshot = state["pending"]["y"].copy()
        a = bae.ActiveEvaluator.from_state(data.pool, state)
        a.update(idx[:4], data.labeler(idx[:4]))
        np.testing.assert_array_equal(state["pending"]["y"], snapshot)
        b = bae.ActiveEvaluator.from_state(data.pool, state)
        b.update(idx, data.labeler(idx))
        assert b.stage == 1 and b.n_labels == 10


@pytest.mark.parametrize("name", ["dirichlet-tree", "calibration", "auto"])
def test_a_refused_oracle_update_is_not_counted(data, name):
    y = data.pool.encode_labels(data.labels)
    o = make_oracle(name)
    o.initialize(data.pool)
    o.update(np.arange(100), y[:100], np.ones(100))
    keys = [k for k in ("n_updates", "n_draws") if k in o.get_state()]
    before = {k: o.get_state()[k] for k in keys}
    with pytest.raises(ValueError, match="labeled"):
        o.update(np.array([200, 0]), np.array([0, 1 - y[0]]), np.ones(2))
    assert {k: o.get_state()[k] for k in keys} == before


def test_refusals_name_labels_in_the_pools_classes():
    sp = make_classification_pool(500, 0.3, rng=2)
    names = np.array(["ham", "spam"])
    pred = names[sp.pool.view().pred]
    pool = bae.Pool(predictions=pred, probs=sp.pool.view().positive_prob(), pos_label="spam")
    ev = bae.ActiveEvaluator(pool, "accuracy", oracle="model", rng=0)
    idx = ev.query(5)
    i = int(idx[0])
    with pytest.raises(
        ValueError, match=rf"item {i} has two different labels \('ham' and 'spam'\)"
    ):
        ev.update([i, i], ["ham", "spam"])
    ev.update(idx, names[sp.labels[idx]])
    with pytest.raises(ValueError, match=rf"item {i} already has label '{names[sp.labels[i]]}';"):
        ev.update([i], [names[1 - sp.labels[i]]])


def test_max_cost_without_label_costs_is_refused(data):
    ev = bae.ActiveEvaluator(data.pool, "f1", oracle="model", rng=0)
    with pytest.raises(ValueError, match="max_cost=3 needs a pool with label costs"):
        ev.query(20, max_cost=3)
    assert ev.pending_draws.indices.size == 0


def test_from_state_refuses_another_measure(data):
    ev = bae.ActiveEvaluator(data.pool, "precision", oracle="model", rng=0)
    idx = ev.query(10)
    ev.update(idx, data.labeler(idx))
    state = ev.get_state()
    with pytest.raises(
        ValueError, match="measure='recall' but the state was saved for 'precision'"
    ):
        bae.ActiveEvaluator.from_state(data.pool, state, measure="recall")
    same = bae.ActiveEvaluator.from_state(data.pool, state, measure="precision")
    assert same.estimate().value == ev.estimate().value
