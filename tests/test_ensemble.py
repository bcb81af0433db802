"""The default oracle model (prequential stacking of plug-in, calibration and Dirichlet tree) and
the static proposal's scaled belief floor."""

import numpy as np
import pytest
from scipy.special import expit

import bayes_activeeval as bae
from bayes_activeeval.beliefs import as_belief
from bayes_activeeval.oracles import CalibrationOracle, EnsembleOracle, make_oracle
from bayes_activeeval.oracles.ensemble import stacking_weights
from bayes_activeeval.proposals import FLOOR_MASS, scaled_belief_floor


def _candidates(rng, n):
    """Three predictive probabilities of y = 1 that disagree: calibrated, too sharp, too flat."""
    s = rng.normal(0.0, 2.0, n)
    return np.stack([expit(s), expit(3.0 * s - 1.0), expit(0.3 * s + 0.5)], axis=1)


@pytest.mark.parametrize("method", ["stacking", "bma"])
@pytest.mark.parametrize("truth", [0, 1, 2])
def test_weights_go_to_the_model_that_generated_the_labels(method, truth):
    # 2,000 labels from member `truth`: its log score beats the others' by O(n) (the KL
    # divergences here are > 0.05 nats per label), so the posterior weight (BMA) is near 1 far
    # beyond Monte Carlo error; stacking may keep some of a mixture of the wrong members that
    # mimics the right one, but the right member keeps most of the weight; 5 seeds
    for seed in range(5):
        rng = np.random.default_rng(seed)
        p1 = _candidates(rng, 2000)
        y = rng.random(2000) < p1[:, truth]
        P = np.where(y[:, None], p1, 1.0 - p1)
        w = stacking_weights(P, method=method, max_iter=5000)
        assert w.shape == (3,) and np.isclose(w.sum(), 1.0) and np.all(w >= 0)
        assert w[truth] > (0.9 if method == "bma" else 0.75), (seed, w)


def test_stacking_keeps_a_mixture_when_the_truth_is_one():
    # labels from the 50/50 mixture of two members: stacking (M-open) keeps both
    rng = np.random.default_rng(0)
    p1 = _candidates(rng, 5000)
    mix = 0.5 * p1[:, 1] + 0.5 * p1[:, 2]
    y = rng.random(5000) < mix
    P = np.where(y[:, None], p1, 1.0 - p1)
    w = stacking_weights(P, prior=0.0)
    assert 0.3 < w[1] < 0.7 and 0.3 < w[2] < 0.7, w


def _pool(rng, n, truth):
    s = rng.normal(-1.0, 2.0, n)
    p_model = expit(s)
    p_true = p_model if truth == "model" else expit(-3.0 + 2.5 * s)
    y = (rng.random(n) < p_true).astype(int)
    return bae.Pool(predictions=(s >= 0).astype(int), probs=p_model, scores=s), y


@pytest.mark.parametrize("truth,best", [("model", "model"), ("recalibrated", "calibration")])
def test_ensemble_weights_follow_the_labels(truth, best):
    rng = np.random.default_rng(1)
    pool, y = _pool(rng, 5000, truth)
    o = make_oracle("auto")
    o.initialize(pool)
    order = rng.permutation(pool.n_items)
    for b in range(20):
        idx = order[b * 50 : (b + 1) * 50]
        o.update(idx, y[idx], np.ones(idx.size))
    w = o.member_weights
    assert set(w) == {"model", "calibration", "dirichlet-tree"}
    assert max(w, key=w.get) == best or (best == "model" and w["model"] > 0.3), w
    if truth == "recalibrated":
        assert w["model"] < 0.1, w


def test_ensemble_belief_is_a_distribution_with_point_masses():
    rng = np.random.default_rng(2)
    pool, y = _pool(rng, 3000, "recalibrated")
    o = EnsembleOracle()
    o.initialize(pool)
    b0 = o.belief().probs
    assert np.allclose(b0.sum(axis=1), 1.0) and np.all(b0 >= 0)
    idx = rng.choice(pool.n_items, 300, replace=False)
    o.update(idx, y[idx], np.full(idx.size, 2.0))
    b = o.belief().probs
    assert np.allclose(b.sum(axis=1), 1.0) and np.all(b >= 0) and np.all(b <= 1)
    assert np.all(b[idx, y[idx]] == 1.0)
    assert np.isclose(sum(o.member_weights.values()), 1.0)
    # away from the labeled items the belief is the weighted mixture of the members' beliefs
    mix = sum(o.member_weights[k] * m.belief().probs for k, m in o.member_oracles.items())
    unl = np.setdiff1d(np.arange(pool.n_items), idx)
    np.testing.assert_allclose(b[unl], mix[unl], rtol=1e-12)


def test_ensemble_drops_members_that_cannot_handle_the_pool():
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(3), 500)
    pool = bae.Pool(predictions=probs.argmax(axis=1), probs=probs)
    o = EnsembleOracle()
    o.initialize(pool)
    assert "calibration" not in o.member_names and "model" in o.member_names
    assert np.allclose(o.belief().probs.sum(axis=1), 1.0)


def test_ensemble_options_are_checked():
    with pytest.raises(ValueError, match="weighting"):
        EnsembleOracle(weighting="vote")
    with pytest.raises(ValueError, match="itself"):
        EnsembleOracle(members=("model", "auto"))
    with pytest.raises(ValueError, match="member_options"):
        EnsembleOracle(member_options={"nope": {}})


def test_default_is_auto_and_calibration_runs_by_name():
    rng = np.random.default_rng(4)
    pool, y = _pool(rng, 4000, "recalibrated")
    ev = bae.ActiveEvaluator(pool, "f1", oracle="calibration", rng=0)
    assert isinstance(ev.oracle, CalibrationOracle)
    assert ev.get_state()["oracle"] == "calibration"
    ev = bae.ActiveEvaluator(pool, "f1", rng=0)
    assert isinstance(ev.oracle, EnsembleOracle) and ev.estimator == "model_assisted"
    est = ev.run(lambda i: y[i], budget=400, progress=False)
    assert est.n_labels == 400 and np.isfinite(est.value) and est.stderr > 0
    assert ev.get_state()["oracle"] == "auto"


def test_default_on_a_multiclass_pool_is_the_plugin():
    rng = np.random.default_rng(11)
    probs = rng.dirichlet(np.ones(3), size=300)
    pool = bae.Pool(predictions=probs.argmax(axis=1), probs=probs)
    ev = bae.ActiveEvaluator(pool, "accuracy", rng=0)
    assert ev.get_state()["oracle"] == "model"


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_ensemble_state_round_trip_is_exact(tmp_path, suffix):
    rng = np.random.default_rng(5)
    pool, y = _pool(rng, 4000, "recalibrated")
    a = bae.ActiveEvaluator(pool, "f1", oracle="auto", rng=7, batch_size=40)
    a.run(lambda i: y[i], budget=360, progress=False)  # crosses several refits of the members
    path = a.save(tmp_path / f"s{suffix}")
    b = bae.ActiveEvaluator.load(path, pool)
    assert np.array_equal(a.proposal.q, b.proposal.q)
    assert a.oracle.member_weights == b.oracle.member_weights
    ea = a.run(lambda i: y[i], budget=600, progress=False)
    eb = b.run(lambda i: y[i], budget=600, progress=False)
    assert ea.value == eb.value and ea.stderr == eb.stderr
    assert np.array_equal(a.draws()["item"], b.draws()["item"])


def test_stochastic_ensemble_runs():
    rng = np.random.default_rng(6)
    pool, y = _pool(rng, 2000, "model")
    ev = bae.ActiveEvaluator(pool, "f1", oracle="auto", deterministic=False, rng=0)
    est = ev.run(lambda i: y[i], budget=300, progress=False)
    assert np.isfinite(est.value)


# -- the static proposal's scaled floor ------------------------------------------------------------
def _skewed_pool(n=20_000, n_pos=8, seed=0):
    """Confident negatives (probabilities ~1e-6) and a handful of predicted positives."""
    rng = np.random.default_rng(seed)
    s = rng.normal(-14.0, 2.0, n)
    s[:n_pos] = rng.normal(1.5, 0.7, n_pos)
    return bae.Pool(predictions=(s >= 0).astype(int), probs=expit(s))


@pytest.mark.parametrize("measure", ["f1", "precision", "recall", "error_rate"])
def test_scaled_floor_never_worse_than_closed_form(measure):
    # Sawade (2012), Cor. 4.4 / Thm. 4.1 closed form = the unfloored optimal proposal under the
    # model's probabilities, with the same defensive mixture. The scaled floor's predicted
    # variance under that belief is within the bound (1 + FLOOR_MASS) sqrt(1 + C f), exactly.
    pool = _skewed_pool()
    closed = bae.optimal_proposal(pool, measure, belief_floor=0.0)
    auto = bae.optimal_proposal(pool, measure)
    u = closed.info["u"]
    f = auto.info["belief_floor"]
    assert 0 < f <= 1e-6
    bound = (1 + FLOOR_MASS) * np.sqrt(1 + 2 * f)
    assert auto.predicted_variance(u) <= bound * closed.predicted_variance(u) * (1 + 1e-12)


def test_fixed_floor_is_worse_on_a_large_skewed_pool():
    # the issue's case: a fixed 1e-6 floor adds ~N sqrt(1e-6) items' worth of mass
    pool = _skewed_pool(54_000, 18)
    closed = bae.optimal_proposal(pool, "f1", belief_floor=0.0)
    fixed = bae.optimal_proposal(pool, "f1", belief_floor=1e-6)
    auto = bae.optimal_proposal(pool, "f1")
    u = closed.info["u"]
    pos = np.arange(18)
    assert fixed.q[pos].sum() < 0.9 * closed.q[pos].sum()
    assert auto.q[pos].sum() > 0.98 * closed.q[pos].sum()
    assert auto.predicted_variance(u) < fixed.predicted_variance(u)


def test_scaled_floor_keeps_support_without_mixing():
    pool = _skewed_pool(5000, 5)
    q = bae.optimal_proposal(pool, "f1", mix=0.0)
    assert np.all(q.q > 0)
    m, views = pool.resolve("f1")
    b = as_belief(pool, None, pool.models_of(m, None))
    assert scaled_belief_floor(pool, m, views, b) == q.info["belief_floor"]
    with pytest.raises(ValueError, match="auto"):
        bae.optimal_proposal(pool, "f1", belief_floor="big")


def test_prior_weights_set_the_starting_mixture():
    rng = np.random.default_rng(8)
    pool, _y = _pool(rng, 2000, "model")
    o = EnsembleOracle(prior_weights={"calibration": 3.0, "model": 1.0})
    o.initialize(pool)
    assert o.member_weights == pytest.approx(
        {"model": 0.25, "calibration": 0.75, "dirichlet-tree": 0.0}
    )
    with pytest.raises(ValueError, match="prior_weights"):
        EnsembleOracle(prior_weights={"model": -1.0}).initialize(pool)


def test_log_pool_weights_fit_the_generating_family():
    # members with logits s, 3s - 1 and 0.3s + 0.5: a log pool spans their affine family, so the
    # fitted pool must predict like the generating member (weights need not be unique)
    from bayes_activeeval.oracles.ensemble import log_pool_weights

    rng = np.random.default_rng(9)
    p1 = _candidates(rng, 4000)
    y = (rng.random(4000) < p1[:, 1]).astype(int)
    lp = np.log(np.stack([1 - p1, p1], axis=2))
    w = log_pool_weights(lp, y, prior=1.0)
    assert np.isclose(w.sum(), 1.0) and np.all(w >= 0)
    pooled = np.exp(np.einsum("ikc,k->ic", lp, w))
    pooled /= pooled.sum(axis=1, keepdims=True)
    assert np.mean(np.abs(pooled[:, 1] - p1[:, 1])) < 0.05


def test_log_pooling_belief_and_state():
    rng = np.random.default_rng(10)
    pool, y = _pool(rng, 3000, "recalibrated")
    a = bae.ActiveEvaluator(pool, "f1", oracle="auto", rng=2, oracle_options={"pooling": "log"})
    a.run(lambda i: y[i], budget=300, progress=False)
    b = a.oracle.belief().probs
    assert np.allclose(b.sum(axis=1), 1.0) and np.all(b >= 0)
    r = bae.ActiveEvaluator.from_state(pool, a.get_state())
    assert np.array_equal(r.proposal.q, a.proposal.q)
    ea = a.run(lambda i: y[i], budget=400, progress=False)
    er = r.run(lambda i: y[i], budget=400, progress=False)
    assert ea.value == er.value
    with pytest.raises(ValueError, match="pooling"):
        EnsembleOracle(pooling="max")


# -- weights by cell of the predictions (hierarchical stacking) -----------------------------------
def _two_faced_pool(rng, n):
    """The model's probabilities are right on its predicted positives and far too high on its
    predicted negatives (an SVM margin through expit on a skewed pool)."""
    s = rng.normal(-1.0, 2.0, n)
    p_true = np.where(s >= 0, expit(s), expit(-4.0 + 2.5 * s))
    y = (rng.random(n) < p_true).astype(int)
    return bae.Pool(predictions=(s >= 0).astype(int), probs=expit(s), scores=s), y


@pytest.mark.parametrize("pooling", ["linear", "log"])
def test_cell_weights_are_the_stacking_map_of_each_cell(pooling):
    from bayes_activeeval.oracles.ensemble import log_pool_weights

    rng = np.random.default_rng(12)
    pool, y = _two_faced_pool(rng, 6000)
    o = EnsembleOracle(weights_by="prediction", pooling=pooling)
    o.initialize(pool)
    order = rng.permutation(pool.n_items)
    for b in range(30):
        idx = order[b * 50 : (b + 1) * 50]
        # unequal importance weights, and every stage repeats two items already labeled
        rep = order[max(0, b * 50 - 2) : b * 50]
        n = idx.size + rep.size
        w = np.where(rng.random(n) < 0.02, 500.0, rng.uniform(0.5, 2.0, n))  # some capped
        o.update(np.r_[idx, rep], np.r_[y[idx], y[rep]], w)
    cells = np.asarray(pool.view().pred)[order[:1500]]
    W = o.cell_weights_
    assert W.shape == (2, 3) and np.allclose(W.sum(axis=1), 1.0)
    v = o._score_weights()
    assert v.max() == o.v_cap  # the cap is active: a cell must use the capped pool-wide v
    # each row is the MAP of its cell's prequential scores (the cell's items, their pool-wide
    # normalized and capped importance weights) under the Dirichlet prior centred on the
    # pool-wide weights (3 pseudo-items), found again from a cold start
    for c in (0, 1):
        m = cells == c
        if pooling == "linear":
            ref = stacking_weights(
                o._scores[m], v[m], prior=3.0 * o.weights_, max_iter=20_000, tol=1e-12
            )
            np.testing.assert_allclose(W[c], ref, atol=2e-3)
        else:  # the log pool's weights need not be unique: compare the pooled predictions
            ref = log_pool_weights(o._logp[m], o._ys[m], v[m], prior=3.0 * o.weights_)
            lp = o._logp[m]
            pa, pb = (np.exp(np.einsum("ikc,k->ic", lp, w)) for w in (W[c], ref))
            pa, pb = pa / pa.sum(1, keepdims=True), pb / pb.sum(1, keepdims=True)
            assert np.max(np.abs(pa - pb)) < 1e-3
    # the plug-in predicts the predicted positives and not the predicted negatives
    if pooling == "linear":
        k = o.member_names.index("model")
        assert W[1, k] > 0.3 and W[0, k] < 0.05, W
        # away from the labeled items each item's belief is its cell's mixture of the members'
        Wi = W[np.asarray(pool.view().pred)]
        mix = sum(Wi[:, [j]] * m.belief().probs for j, m in enumerate(o.member_oracles.values()))
        unl = np.setdiff1d(np.arange(pool.n_items), order[:1500])
        np.testing.assert_allclose(o.belief().probs[unl], mix[unl], rtol=1e-12)


def test_a_cell_without_labels_has_the_pool_wide_weights():
    rng = np.random.default_rng(15)
    pool, y = _two_faced_pool(rng, 3000)
    o = EnsembleOracle(weights_by="prediction")
    o.initialize(pool)
    neg = np.flatnonzero(np.asarray(pool.view().pred) == 0)
    for b in range(4):
        idx = neg[b * 100 : (b + 1) * 100]
        o.update(idx, y[idx], np.ones(idx.size))
    np.testing.assert_array_equal(o.cell_weights_[1], o.weights_)
    assert not np.allclose(o.cell_weights_[0], o._w0)


def test_one_cell_for_pool_wide_weights_and_joint_cells_for_two_models():
    rng = np.random.default_rng(13)
    pool, y = _two_faced_pool(rng, 2000)
    o = EnsembleOracle()
    o.initialize(pool)
    idx = rng.choice(pool.n_items, 200, replace=False)
    o.update(idx, y[idx], np.ones(idx.size))
    assert o.cell_weights_.shape == (1, 3) and np.array_equal(o.cell_weights_[0], o.weights_)
    s = np.asarray(pool.view().score)
    two = bae.Pool(
        predictions={"a": (s >= 0).astype(int), "b": (s >= 1).astype(int)},
        probs={"a": expit(s), "b": expit(s - 1)},
        scores={"a": s, "b": s - 1},
    )
    o2 = EnsembleOracle(weights_by="prediction")
    o2.initialize(two)
    # cells: both predict 0, a only, both predict 1 (b never predicts 1 without a)
    assert o2.cell_weights_.shape == (3, 3)
    with pytest.raises(ValueError, match="weights_by"):
        EnsembleOracle(weights_by="score")
    with pytest.raises(ValueError, match="bma"):
        EnsembleOracle(weights_by="prediction", weighting="bma")


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_cell_weights_state_round_trip_is_exact(tmp_path, suffix):
    rng = np.random.default_rng(14)
    pool, y = _two_faced_pool(rng, 4000)
    opts = {"oracle": "auto", "oracle_options": {"weights_by": "prediction"}}
    a = bae.ActiveEvaluator(pool, "f1", rng=3, batch_size=40, **opts)
    a.run(lambda i: y[i], budget=360, progress=False)
    path = a.save(tmp_path / f"s{suffix}")
    b = bae.ActiveEvaluator.load(path, pool)
    assert b.oracle.weights_by == "prediction"
    np.testing.assert_array_equal(a.oracle.cell_weights_, b.oracle.cell_weights_)
    assert np.array_equal(a.proposal.q, b.proposal.q)
    ea = a.run(lambda i: y[i], budget=600, progress=False)
    eb = b.run(lambda i: y[i], budget=600, progress=False)
    assert ea.value == eb.value and ea.stderr == eb.stderr


@pytest.mark.parametrize("weights_by", ["pool", "prediction"])
def test_a_state_saved_before_weights_by_loads(weights_by):
    # a state from before the option has no weights_by, cell_weights or scored_cell: it loads
    # as one cell (pool-wide weights) and continues as it would have; a "prediction" oracle
    # refuses it instead of mixing its labels into the wrong cell
    rng = np.random.default_rng(16)
    pool, y = _two_faced_pool(rng, 3000)
    a = bae.ActiveEvaluator(pool, "f1", rng=4, batch_size=40)
    a.run(lambda i: y[i], budget=240, progress=False)
    state = a.oracle.get_state()
    for key in ("cell_weights", "scored_cell"):
        del state[key]
    del state["config"]["weights_by"]
    o = EnsembleOracle(weights_by=weights_by)
    o.initialize(pool)
    if weights_by == "prediction":
        with pytest.raises(ValueError, match="weights_by"):
            o.set_state(state)
        return
    o.set_state(state)
    np.testing.assert_array_equal(o.cell_weights_, a.oracle.weights_[None, :])
    np.testing.assert_array_equal(o.belief().probs, a.oracle.belief().probs)
    idx = np.arange(240, 300)
    o.update(idx, y[idx], np.ones(idx.size))
    a.oracle.update(idx, y[idx], np.ones(idx.size))
    np.testing.assert_array_equal(o.weights_, a.oracle.weights_)
