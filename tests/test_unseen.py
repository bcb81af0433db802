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


def test_max_hidden_against_exact_fractions_ties_included():
    # H(k) = C(N − L, k)/C(N, k) in exact arithmetic; a tie H(k) = α is not above α
    from fractions import Fraction
    from math import comb

    for n in range(1, 41):
        for lab in range(0, n + 1):
            for level in (Fraction(1, 2), Fraction(9, 10), Fraction(19, 20)):
                alpha = 1 - level
                want = max(
                    k for k in range(n - lab + 1) if Fraction(comb(n - lab, k), comb(n, k)) > alpha
                )
                assert max_hidden(n, lab, float(level)) == want, (n, lab, level)


def test_max_hidden_edges_and_the_rule_of_three():
    assert max_hidden(500, 0) == 500  # nothing labeled rules nothing out
    assert max_hidden(500, 500) == 0
    assert max_hidden(0, 0) == 0
    k = max_hidden(10_000_000, 100_000, 0.95)  # f = 1 %: about ln(20)/f
    assert abs(k - np.log(20) / 0.01) < 0.01 * k


def test_random_placement_is_missed_as_often_as_the_count_says():
    # N = 60, L = 20, level 0.9: k = 5 (H = 0.118) and k + 1 = 6 (H = 0.076) straddle α = 0.1 by
    # 0.018 and 0.024, more than 4 Monte Carlo s.e. of 20,000 placements (4 × 0.0021 = 0.0085),
    # so the test fails if the count is off by one either way
    rng = np.random.default_rng(0)
    n, lab, level, reps = 60, 20, 0.9, 20_000
    labeled = np.zeros(n, dtype=bool)
    labeled[rng.choice(n, lab, replace=False)] = True
    k = max_hidden(n, lab, level)
    assert k == 5
    se = np.sqrt(0.1 * 0.9 / reps)
    for kk, above in ((k, True), (k + 1, False)):
        missed = np.mean([not labeled[rng.choice(n, kk, replace=False)].any() for _ in range(reps)])
        if above:  # the labels miss k errors more often than α: k is not ruled out
            assert missed > (1 - level) + 4 * se
        else:  # k + 1 errors are seen at least 1 − α of the time
            assert missed < (1 - level) - 4 * se


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
        yy_all[hide[: r.joint_hidden]] = 1 - c  # all at once: each class's joint share
        assert r.values[0] == pytest.approx(metric(yy, f), rel=1e-10)
    assert seen.values[0] == pytest.approx(metric(yy_all, f), rel=1e-10)


def test_unequal_weights_shift_by_the_mean_weight_of_a_random_placement(data):
    # p not uniform: the value is g(R̂ + k p̄ Δℓ), p̄ the mean p of the class's unlabeled items,
    # which is the mean over random placements of the shift the k errors make
    pool = data.pool
    rng = np.random.default_rng(5)
    w = rng.gamma(0.5, 2.0, pool.n_items)
    heavy = bae.Pool(predictions=pool.view().pred, probs=pool.view().prob, weights=w)
    y = data.labeler(np.arange(pool.n_items))
    m, views = heavy.resolve("accuracy")
    exact = weighted_estimate(m.loss(y, views(None)), heavy.p * heavy.n_items, m)
    labeled = rng.choice(pool.n_items, 2000, replace=False)
    seen = bae.unseen_errors(heavy, "accuracy", labeled, exact, level=0.9)
    known = np.zeros(pool.n_items, dtype=bool)
    known[labeled] = True
    f = pool.view().pred
    for r in seen.regions:
        c = int(r.predicted)
        open_ = np.flatnonzero((f == c) & ~known)
        # accuracy falls by the p-mass of the k items made wrong: its mean over placements
        drops = [heavy.p[rng.choice(open_, r.max_hidden, replace=False)].sum() for _ in range(4000)]
        se = np.std(drops) / np.sqrt(len(drops))
        assert float(exact.values[0] - r.values[0]) == pytest.approx(np.mean(drops), abs=4 * se)


def test_no_room_for_the_errors_is_nan_not_a_clipped_value():
    # 200 predicted positives of which 3 of the 20 labeled are right: the count of hidden false
    # positives exceeds the true positives the estimate counts, so no pool has that many
    n = 2000
    pred = np.r_[np.ones(200, int), np.zeros(n - 200, int)]
    pool = bae.Pool(predictions=pred, probs=np.where(pred == 1, 0.9, 0.01))
    lab = np.r_[np.arange(20), np.arange(200, 1200)]
    ylab = np.r_[np.ones(3, int), np.zeros(17, int), np.zeros(1000, int)]
    for measure in ("f1", "mcc", "precision"):
        m, views = pool.resolve(measure)
        est = weighted_estimate(m.loss(ylab, views(lab)), np.full(lab.size, n / lab.size), m)
        seen = bae.unseen_errors(pool, measure, lab, est)
        fp = next(r for r in seen.regions if r.kind == "false positives")
        if measure == "f1":  # R = (TP, (PP + P)/2)/N: more hidden than true positives counted
            assert fp.max_hidden > est.risk[0] * n
        assert np.isnan(fp.values[0]) and np.isnan(seen.values[0])
        fn = next(r for r in seen.regions if r.kind == "false negatives")
        assert np.isfinite(fn.values[0])


def test_all_at_once_is_at_the_level_jointly(data):
    draws = bae.optimal_proposal(data.pool, "f1").draw(600, rng=4)
    est = bae.estimate(data.pool, "f1", draws, data.labeler(draws.indices))
    seen = bae.unseen_errors(data.pool, "f1", draws, est, level=0.95)
    h = [stats.hypergeom.pmf(0, r.n_items, r.joint_hidden, r.n_labeled) for r in seen.regions]
    assert np.prod(h) > 0.05  # the labels miss all of them together more often than α
    h1 = [stats.hypergeom.pmf(0, r.n_items, r.joint_hidden + 1, r.n_labeled) for r in seen.regions]
    assert all(b <= np.sqrt(0.05) < a for a, b in zip(h, h1, strict=True))  # each at sqrt(α)
    assert all(r.joint_hidden <= r.max_hidden for r in seen.regions)


def test_active_evaluator_counts_its_labeled_items(data):
    ev = bae.ActiveEvaluator(data.pool, "f1", rng=0)
    ev.run(data.labeler, budget=300, progress=False)
    seen = ev.unseen_errors(level=0.95)
    assert sum(r.n_labeled for r in seen.regions) == int(ev.known.sum()) == 300
    est = float(ev.estimate().value)
    assert seen.estimate[0] == pytest.approx(est)
    assert all(r.values[0] <= est + 1e-12 for r in seen.regions)  # errors only lower F1
    assert seen.values[0] <= est + 1e-12
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


def test_a_pool_on_dask_is_refused_with_a_clear_error(tmp_path, data):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    pool = data.pool
    frame = pd.DataFrame({"pred": pool.view().pred, "p": pool.view().prob[:, 1]})
    path = tmp_path / "pool.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=4096)
    lazy = bae.Pool.from_parquet(path, predictions="pred", probs="p", chunk_size=4096)
    draws = bae.optimal_proposal(pool, "f1").draw(100, rng=2)
    est = bae.estimate(pool, "f1", draws, data.labeler(draws.indices))
    with pytest.raises(ValueError, match="pool in memory, not one on dask"):
        bae.unseen_errors(lazy, "f1", draws, est)


def test_applies_to_says_where_unseen_errors_runs(data):
    from bayes_activeeval.unseen import applies_to

    pool = data.pool
    three = bae.Pool(predictions=np.arange(30) % 3, probs=np.full((30, 3), 1 / 3))
    assert applies_to(pool, "f1") and applies_to(pool, "mcc")
    assert not applies_to(pool, "brier") and not applies_to(pool, "roc_auc")
    assert not applies_to(three, "accuracy")
    draws = bae.optimal_proposal(pool, "f1").draw(100, rng=2)
    est = bae.estimate(pool, "brier", draws, data.labeler(draws.indices))
    with pytest.raises(ValueError, match="confusion matrix"):  # the same reason, raised
        bae.unseen_errors(pool, "brier", draws, est)
