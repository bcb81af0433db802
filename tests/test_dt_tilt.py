"""The within-leaf belief of the Dirichlet-tree oracle (``within_leaf="tilt"``): each leaf's
predictive mass ``|U_k| π(y | k)`` (Marchant & Rubinstein (2021), Eq. 13) is shared among the
leaf's unlabeled items in proportion to the model's probabilities. Fixed seeds; tolerances from
the Monte Carlo error."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.oracles import DirichletTreeOracle
from bayes_activeeval.oracles.dirichlet_tree import tilt_offsets, tilt_offsets_binary


@pytest.fixture(scope="module")
def cal_pool():
    return make_classification_pool(20_000, 0.02, calibration="calibrated", rng=3)


@pytest.fixture(scope="module")
def multi_pool():
    rng = np.random.default_rng(0)
    n, C = 6000, 3
    probs = special.softmax(rng.normal(size=(n, C)) * 2, axis=1)
    labels = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    pool = bae.Pool(predictions=probs.argmax(1), probs=probs, classes=[0, 1, 2])
    return pool, labels


def _leaf_totals(o, probs):
    """``Σ_{i ∈ U_k} π_i(y)`` and ``|U_k|`` per leaf."""
    C = probs.shape[1]
    unl = np.ones(o.n_items)
    if o.deterministic:
        unl[o.cache.items] = 0.0
    flat = (o.strata[:, None] * C + np.arange(C)[None, :]).ravel()
    tot = np.bincount(flat, weights=(probs * unl[:, None]).ravel(), minlength=o.K * C)
    return tot.reshape(o.K, C), np.bincount(o.strata, weights=unl, minlength=o.K)


def _labeled_run(o, pool, labels, rng, n=300):
    idx = rng.choice(pool.n_items, n, replace=False)
    o.update(idx, labels[idx], np.full(n, 2.0))
    return idx


# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("deterministic", [True, False])
def test_tilt_preserves_leaf_totals_binary(cal_pool, deterministic):
    o = DirichletTreeOracle(n_strata=64, depth=6, deterministic=deterministic, within_leaf="tilt")
    o.initialize(cal_pool.pool)
    rng = np.random.default_rng(1)
    for _ in range(2):
        _labeled_run(o, cal_pool.pool, cal_pool.labels, rng)
        probs = o.belief().probs
        tot, u = _leaf_totals(o, probs)
        expect = u[:, None] * o.stratum_probs
        assert np.allclose(tot, expect, rtol=1e-8, atol=1e-12)
        assert np.allclose(probs.sum(axis=1), 1.0)
    # the flat belief has the same leaf totals, but is constant within a leaf
    f = DirichletTreeOracle(n_strata=64, depth=6, deterministic=deterministic, within_leaf="flat")
    f.initialize(cal_pool.pool)
    f.set_state(o.get_state())
    assert np.array_equal(f.stratum_probs, o.stratum_probs)
    ftot, _ = _leaf_totals(f, f.belief().probs)
    assert np.allclose(ftot, tot, rtol=1e-8, atol=1e-12)
    assert not np.allclose(f.belief().probs, o.belief().probs, atol=1e-3)


@pytest.mark.parametrize("deterministic", [True, False])
def test_tilt_preserves_leaf_totals_multiclass(multi_pool, deterministic):
    pool, labels = multi_pool
    o = DirichletTreeOracle(n_strata=16, depth=4, deterministic=deterministic, within_leaf="tilt")
    o.initialize(pool)
    _labeled_run(o, pool, labels, np.random.default_rng(2), n=200)
    probs = o.belief().probs
    tot, u = _leaf_totals(o, probs)
    assert np.allclose(tot, u[:, None] * o.stratum_probs, rtol=1e-8, atol=1e-10)
    unl = np.ones(pool.n_items, bool)
    if deterministic:
        unl[o.cache.items] = False
    assert np.allclose(probs.sum(axis=1), 1.0) and np.all(probs[unl] > 0)
    # within a leaf, π_i(y)/π_i(y') ∝ s_i(y)/s_i(y') (a per-leaf, per-class tilt of the model)
    s = pool.view().prob
    r = np.log(probs[unl, 1] / probs[unl, 0]) - np.log(s[unl, 1] / s[unl, 0])
    for k in (0, o.K // 2, o.K - 1):
        rk = r[o.strata[unl] == k]
        assert np.ptp(rk) < 1e-8


def test_tilt_reduces_to_flat_when_scores_constant_within_leaf():
    rng = np.random.default_rng(4)
    n, K = 4000, 8
    stratum_score = np.sort(rng.random(K))
    k = np.repeat(np.arange(K), n // K)  # equal groups: the quantile cuts fall between them
    p1 = special.expit(4 * stratum_score - 2)[k]  # the model's probability is constant per leaf
    labels = (rng.random(n) < p1).astype(int)
    pool = bae.Pool(predictions=(p1 > 0.5).astype(int), probs=p1, scores=stratum_score[k])
    for det in (True, False):
        t = DirichletTreeOracle(
            n_strata=K, depth=3, method="quantile", deterministic=det, within_leaf="tilt"
        )
        f = DirichletTreeOracle(
            n_strata=K, depth=3, method="quantile", deterministic=det, within_leaf="flat"
        )
        t.initialize(pool)
        f.initialize(pool)
        # every leaf holds items of one model probability (so the tilt has nothing to share)
        lo = np.bincount(t.strata, weights=p1) / t.sizes
        assert np.allclose(p1, lo[t.strata], rtol=1e-12)
        assert np.allclose(t.belief().probs, f.belief().probs, rtol=1e-12, atol=1e-14)
        idx = rng.choice(n, 150, replace=False)
        for o in (t, f):
            o.update(idx, labels[idx], np.full(150, 3.0))
        assert np.allclose(t.belief().probs, f.belief().probs, rtol=1e-12, atol=1e-14)


def test_tilt_without_labels_is_the_model_up_to_prior_smoothing(cal_pool):
    pool = cal_pool.pool
    s = pool.view().prob[:, 1]
    # when the leaf level equals the model's mean over the leaf, the tilt is the identity
    o = DirichletTreeOracle(n_strata=64, depth=6, within_leaf="tilt")
    o.initialize(pool)
    logit = special.logit(s)
    mean_s = np.bincount(o.strata, weights=s, minlength=o.K) / o.sizes
    lo = np.bincount(o.strata, weights=logit, minlength=o.K) * 0 - 50
    c = tilt_offsets_binary(logit, o.strata, None, mean_s, lo, lo + 100, start=np.ones(o.K))
    assert np.max(np.abs(c)) < 1e-8
    # the oracle's no-label belief is the model's probabilities, tilted per leaf by the prior's
    # smoothing: the log-odds shift is constant within each leaf and vanishes as the prior
    # weight of the model's probabilities grows
    gaps = []
    for strength in (64.0, 64e2, 64e5):
        o = DirichletTreeOracle(
            n_strata=64, depth=6, prior_strength=strength, tree_smoothing=1.0, within_leaf="tilt"
        )
        o.initialize(pool)
        b = o.belief().probs[:, 1]
        shift = special.logit(b) - logit
        per_leaf = np.bincount(o.strata, weights=shift, minlength=o.K) / o.sizes
        assert np.allclose(shift, per_leaf[o.strata], atol=1e-8)
        gaps.append(np.max(np.abs(b - s)))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 1e-3, gaps
    # and its ranking of items is the model's
    assert np.array_equal(np.argsort(b, kind="stable")[-200:], np.argsort(s, kind="stable")[-200:])


def test_tilt_belief_is_closer_to_the_truth_than_flat():
    """With calibrated scores (labels drawn from the model's own probabilities) and the same
    leaf-level model, the tilt keeps the model's information inside each leaf: before labels its
    belief is much closer to the true P(y=1|x) than the flat one, and after labels no farther."""
    rng = np.random.default_rng(6)
    n = 20_000
    truth = special.expit(rng.normal(-5, 2.5, n))
    labels = (rng.random(n) < truth).astype(int)
    pool = bae.Pool(predictions=(truth > 0.5).astype(int), probs=truth)
    idx = rng.choice(n, 400, replace=False)
    unl = np.ones(n, bool)
    unl[idx] = False
    out = {}
    for wl in ("tilt", "flat"):
        o = DirichletTreeOracle(n_strata=16, depth=4, tree_smoothing=0.01, within_leaf=wl)
        o.initialize(pool)
        before = np.mean((o.belief().probs[:, 1] - truth) ** 2)
        o.update(idx, labels[idx], np.ones(idx.size))
        after = np.mean((o.belief().probs[unl, 1] - truth[unl]) ** 2)
        out[wl] = (before, after)
    assert out["tilt"][0] < 0.5 * out["flat"][0], out
    assert out["tilt"][1] < out["flat"][1], out


@pytest.mark.parametrize("deterministic", [True, False])
def test_tilt_state_round_trip(cal_pool, deterministic, json_round_trip):
    pool, labels = cal_pool.pool, cal_pool.labels
    rng = np.random.default_rng(8)
    o = DirichletTreeOracle(n_strata=64, depth=6, deterministic=deterministic, within_leaf="tilt")
    o.initialize(pool)
    _labeled_run(o, pool, labels, rng, n=120)
    state = json_round_trip(o.get_state())
    assert state["config"]["within_leaf"] == "tilt"
    o2 = DirichletTreeOracle(n_strata=64, depth=6, deterministic=deterministic, within_leaf="tilt")
    o2.initialize(pool)
    o2.set_state(state)
    assert np.array_equal(o2.belief().probs, o.belief().probs)
    idx = rng.choice(pool.n_items, 80, replace=False)
    o.update(idx, labels[idx], np.ones(80))
    o2.update(idx, labels[idx], np.ones(80))
    assert np.array_equal(o2.belief().probs, o.belief().probs)
    # a state without offsets (saved by a flat oracle) is restored by solving the tilt afresh
    f = DirichletTreeOracle(n_strata=64, depth=6, deterministic=deterministic, within_leaf="flat")
    f.initialize(pool)
    f.set_state(o.get_state())
    fs = f.get_state()
    assert "within_offsets" not in fs
    o3 = DirichletTreeOracle(n_strata=64, depth=6, deterministic=deterministic, within_leaf="tilt")
    o3.initialize(pool)
    o3.set_state(fs)
    assert np.allclose(o3.belief().probs, o.belief().probs, rtol=1e-7, atol=1e-12)


def test_within_leaf_validation():
    with pytest.raises(ValueError, match="within_leaf"):
        DirichletTreeOracle(within_leaf="smooth")
    assert "within_leaf='tilt'" in repr(DirichletTreeOracle(within_leaf="tilt"))


def test_tilt_solvers_bracket_extreme_targets():
    rng = np.random.default_rng(9)
    n, K = 5000, 5
    strata = rng.integers(0, K, n)
    logit = np.clip(rng.normal(0, 8, n), -35, 35)
    target = np.array([1e-9, 1e-3, 0.5, 0.999, 1 - 1e-9])
    lo = np.array([logit[strata == k].min() for k in range(K)])
    hi = np.array([logit[strata == k].max() for k in range(K)])
    c = tilt_offsets_binary(logit, strata, None, target, lo, hi, start=np.full(K, 40.0))
    mean = np.bincount(strata, weights=special.expit(c[strata] + logit)) / np.bincount(strata)
    assert np.allclose(mean, target, rtol=1e-8)
    # the multiclass solver with two classes gives the same belief
    log_s = np.c_[np.zeros(n), logit]
    cm = tilt_offsets(log_s, strata, None, np.c_[1 - target, target])
    assert np.allclose(cm[:, 1] - cm[:, 0], c, atol=1e-6 * (1 + np.abs(c)))


def test_adaptive_tilt_is_unbiased_small_pool():
    """Adaptive F1 with the tilted Dirichlet-tree belief: the mean over repetitions equals the
    pool F1 within Monte Carlo error, and martingale-variance Wald intervals cover."""
    data = make_classification_pool(3000, 0.03, calibration="svm", rng=21)
    pool, labels = data.pool, data.labels
    m, views = pool.resolve("f1")
    truth = float(m.g(m.loss(labels, views(np.arange(pool.n_items))).mean(axis=0))[0])
    vals, cover = [], []
    for seed in range(80):
        ev = bae.ActiveEvaluator(
            pool,
            "f1",
            oracle="dirichlet-tree",
            rng=seed,
            batch_size=25,
            oracle_options={"n_strata": 32, "depth": 5, "within_leaf": "tilt"},
        )
        est = ev.run(data.labeler, budget=150, progress=False)
        vals.append(est.value)
        lo, hi = est.confidence_interval(0.95)
        cover.append(lo <= truth <= hi)
    vals = np.asarray(vals)
    mc_se = vals.std(ddof=1) / np.sqrt(vals.size)
    assert abs(vals.mean() - truth) < 4 * mc_se, (vals.mean(), truth, mc_se)
    # 80 reps: the binomial sd of the coverage at 0.95 is 0.024
    assert np.mean(cover) > 0.85, np.mean(cover)


@pytest.mark.parametrize(
    "kw, option",
    [
        ({"tree_smoothing": 1.0}, "tree_smoothing"),
        ({"prior_strength": 10.0}, "prior_strength"),
        ({"method": "quantile"}, "method"),
        ({"histogram": "fd"}, "histogram"),
    ],
)
def test_state_saved_with_other_priors_is_refused(cal_pool, kw, option, json_round_trip):
    """A state saved with other priors or strata was restored silently into a model that then
    continued under its own (a ``tree_smoothing=1, prior_strength=10`` state in a default model:
    equal beliefs at once, different after the next update); now it is refused with the option
    named. ``within_leaf`` may differ (the saved leaf-level fit is the same for both), an explicit
    ``prior_strength`` equal to the default ``K`` matches ``None``, and a state saved without the
    options (before they were checked) still loads."""
    i = np.arange(0, cal_pool.pool.n_items, 50)
    a = DirichletTreeOracle(n_strata=64, depth=6, **kw)
    a.initialize(cal_pool.pool)
    a.update(i, cal_pool.labels[i])
    state = json_round_trip(a.get_state())
    b = DirichletTreeOracle(n_strata=64, depth=6)
    b.initialize(cal_pool.pool)
    with pytest.raises(ValueError, match=rf"state has {option}="):
        b.set_state(state)
    assert b.cache.n_labeled == 0  # refused before anything was restored
    for key in ("tree_smoothing", "prior_strength", "method", "histogram"):
        state["config"].pop(key)
    if a.K != b.K:  # other strata: refused whatever the config says
        with pytest.raises(ValueError, match="state has n_leaves="):
            b.set_state(state)
        return
    b.set_state(state)  # an old state: nothing to check against
    assert b.cache.n_labeled == i.size


def test_paper_histogram_is_an_option_and_its_leaves_differ(cal_pool):
    """``histogram="fd"`` cuts the leaves as the paper's experiments do (tests/test_strata.py
    checks the rule); the default stays the fine histogram, whose leaves differ on this pool."""
    a = DirichletTreeOracle(n_strata=64, depth=6)
    b = DirichletTreeOracle(n_strata=64, depth=6, histogram="fd")
    a.initialize(cal_pool.pool)
    b.initialize(cal_pool.pool)
    assert a.config()["histogram"] == "fine" and b.config()["histogram"] == "fd"
    from bayes_activeeval.oracles._common import stratification_scores

    fd, _ = bae.score_strata(stratification_scores(cal_pool.pool, None), 64, histogram="fd")
    np.testing.assert_array_equal(b.strata, fd)
    assert b.K == fd.max() + 1 and a.K != b.K
    with pytest.raises(ValueError, match="histogram must be 'fine' or 'fd'"):
        DirichletTreeOracle(histogram="auto")


def test_state_of_the_same_priors_is_accepted(cal_pool, json_round_trip):
    i = np.arange(0, cal_pool.pool.n_items, 50)
    a = DirichletTreeOracle(n_strata=64, depth=6, within_leaf="flat", prior_strength=64.0)
    a.initialize(cal_pool.pool)
    a.update(i, cal_pool.labels[i])
    b = DirichletTreeOracle(n_strata=64, depth=6)  # prior_strength None: K = 64
    b.initialize(cal_pool.pool)
    b.set_state(json_round_trip(a.get_state()))
    np.testing.assert_array_equal(b.stratum_probs, a.stratum_probs)
