"""Errors no label has seen (``bae.unseen_errors``): the hypergeometric count against scipy and a
simulation of the random placement it describes, the measure's value against scikit-learn on the
pool with those errors added, the evaluator's and the session's use of it, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, precision_score

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.estimators import weighted_estimate
from bayes_activeeval.unseen import max_hidden


@pytest.mark.parametrize(
    "n, lab, level",
    [(1000, 10, 0.95), (1000, 500, 0.9), (50_000, 1234, 0.95), (37, 36, 0.5), (203, 1, 0.99)],
)
def test_max_hidden_is_the_last_count_the_labels_would_miss_more_often_than_alpha(n, lab, level):
    k = max_hidden(n, lab, level)
    alpha = 1 - level
    # P(none of k errors among the lab labeled items) = hypergeom.pmf(0; N=n, K=k, n=lab)
    assert stats.hypergeom.pmf(0, n, k, lab) > alpha
    assert k == n - lab or stats.hypergeom.pmf(0, n, k + 1, lab) <= alpha


def test_max_hidden_edges_and_the_rule_of_three():
    assert max_hidden(500, 0) == 500  # nothing labeled rules nothing out
    assert max_hidden(500, 500) == 0
    assert max_hidden(0, 0) == 0
    k = max_hidden(10_000_000, 100_000, 0.95)  # f = 1 %: about ln(20)/f
    assert abs(k - np.log(20) / 0.01) < 0.01 * k


def test_random_placement_of_one_more_error_is_seen_at_least_one_minus_alpha_of_the_time():
    rng = np.random.default_rng(0)
    n, lab, level, reps = 3000, 60, 0.9, 20_000
    labeled = np.zeros(n, dtype=bool)
    labeled[rng.choice(n, lab, replace=False)] = True
    k = max_hidden(n, lab, level)
    for kk, above in ((k, True), (k + 1, False)):
        missed = np.mean([not labeled[rng.choice(n, kk, replace=False)].any() for _ in range(reps)])
        se = np.sqrt(missed * (1 - missed) / reps)
        if above:  # the labels miss k errors more often than alpha: k is not ruled out
            assert missed > (1 - level) - 4 * se
        else:  # k + 1 errors are seen at least 1 - alpha of the time
            assert missed <= (1 - level) + 4 * se


@pytest.fixture(scope="module")
def data():
    return make_classification_pool(20_000, 0.02, rng=3)


@pytest.mark.parametrize(
    "measure, metric",
    [
        ("f1", lambda y, f: f1_score(y, f)),
        ("accuracy", accuracy_score),
        ("precision", lambda y, f: precision_score(y, f)),
    ],
)
def test_values_are_the_measure_on_the_pool_with_the_hidden_errors(data, measure, metric):
    pool = data.pool
    y = data.labeler(np.arange(pool.n_items))
    f = pool.view().pred
    m, views = pool.resolve(measure)
    exact = weighted_estimate(m.loss(y, views(None)), np.ones(pool.n_items), m)  # R on the pool
    rng = np.random.default_rng(1)
    labeled = rng.choice(pool.n_items, 700, replace=False)
    seen = bae.unseen_errors(pool, measure, labeled, exact, level=0.9)
    assert np.asarray(exact.values)[0] == pytest.approx(metric(y, f), rel=1e-12)
    known = np.zeros(pool.n_items, dtype=bool)
    known[labeled] = True
    yy_all = y.copy()
    for r in seen.regions:
        c = int(r.predicted)
        assert r.n_items == int((f == c).sum()) and r.n_labeled == int(known[f == c].sum())
        assert r.max_hidden == max_hidden(r.n_items, r.n_labeled, 0.9)
        # k more errors among the unlabeled items of the class that the model gets right
        ok = np.flatnonzero((f == c) & (y == c) & ~known)
        hide = rng.choice(ok, r.max_hidden, replace=False)
        yy = y.copy()
        yy[hide] = 1 - c
        yy_all[hide] = 1 - c
        assert r.values[0] == pytest.approx(metric(yy, f), rel=1e-10)
    assert seen.values[0] == pytest.approx(metric(yy_all, f), rel=1e-10)


def test_weights_that_are_all_equal_change_nothing(data):
    pool = data.pool
    heavy = bae.Pool(
        predictions=pool.view().pred, probs=pool.view().prob, weights=np.full(pool.n_items, 3.0)
    )
    draws = bae.optimal_proposal(pool, "f1").draw(400, rng=2)
    y = data.labeler(draws.indices)
    a = bae.unseen_errors(pool, "f1", draws, bae.estimate(pool, "f1", draws, y))
    b = bae.unseen_errors(heavy, "f1", draws, bae.estimate(heavy, "f1", draws, y))
    assert [r.max_hidden for r in a.regions] == [r.max_hidden for r in b.regions]
    np.testing.assert_allclose(a.values, b.values, rtol=1e-12)


def test_active_evaluator_counts_its_labeled_items(data):
    ev = bae.ActiveEvaluator(data.pool, "f1", rng=0)
    ev.run(data.labeler, budget=300, progress=False)
    seen = ev.unseen_errors(level=0.95)
    assert sum(r.n_labeled for r in seen.regions) == int(ev.known.sum()) == 300
    est = float(ev.estimate().value)
    assert seen.estimate[0] == pytest.approx(est)
    assert all(r.values[0] <= est + 1e-12 for r in seen.regions)  # errors only lower F1
    assert seen.values[0] <= min(r.values[0] for r in seen.regions) + 1e-12
    frame = seen.to_frame()
    assert list(frame["max_hidden"]) == [r.max_hidden for r in seen.regions]
    assert "could hide among the" in str(seen)


def test_bad_input_names_the_argument(data):
    pool = data.pool
    draws = bae.optimal_proposal(pool, "f1").draw(100, rng=2)
    est = bae.estimate(pool, "f1", draws, data.labeler(draws.indices))
    with pytest.raises(ValueError, match="level"):
        bae.unseen_errors(pool, "f1", draws, est, level=1.5)
    with pytest.raises(ValueError, match=r"labeled\[1\] = 20000"):
        bae.unseen_errors(pool, "f1", [3, 20_000], est)
    with pytest.raises(ValueError, match="confusion matrix"):
        bae.unseen_errors(pool, "brier", draws, est)
    with pytest.raises(ValueError, match="estimate must be an Estimate of 'accuracy'"):
        bae.unseen_errors(pool, "accuracy", draws, est)
    with pytest.raises(ValueError, match="estimate must be an Estimate of 'recall'"):
        bae.unseen_errors(pool, "recall", draws, est)  # same length of R, another measure
    with pytest.raises(ValueError, match="n_labeled must be at most n_items"):
        max_hidden(10, 11)
    three = bae.Pool(predictions=np.arange(30) % 3, probs=np.full((30, 3), 1 / 3))
    with pytest.raises(ValueError, match="binary pool"):
        bae.unseen_errors(three, "accuracy", [0], est)
