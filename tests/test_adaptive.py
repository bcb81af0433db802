"""ActiveEvaluator (Marchant & Rubinstein (2021), Algorithm 1) and the contingency-table posterior."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval.adaptive import adaptive_proposal, epsilon_schedule
from bayes_activeeval.datasets import make_classification_pool, make_regression_pool
from bayes_activeeval.estimators import weighted_estimate
from bayes_activeeval.measures import difference
from bayes_activeeval.oracles import PluginOracle
from bayes_activeeval.oracles.contingency import contingency_posterior


def true_value(pool, labels, measure, model=None):
    m, views = pool.resolve(measure, model)
    L = m.loss(pool.encode_labels(labels), views(np.arange(pool.n_items)))
    return m.g(L.mean(axis=0))


@pytest.fixture(scope="module")
def small():
    return make_classification_pool(4000, 0.03, calibration="svm", rng=11)


@pytest.fixture(scope="module")
def medium():
    return make_classification_pool(20_000, 0.01, rng=5)


# -- bias and variance ----------------------------------------------------------------------------
def test_adaptive_f1_unbiased_within_mc_error(small):
    """Mean of adaptive F1 estimates over repetitions equals the pool F1 within MC error, and the
    Sec. 3.3.2 variance estimate matches the spread of the estimates."""
    truth = true_value(small.pool, small.labels, "f1")[0]
    vals, ses = [], []
    for seed in range(150):
        ev = bae.ActiveEvaluator(small.pool, "f1", rng=seed, batch_size=25)
        est = ev.run(small.labeler, budget=300, progress=False)
        vals.append(est.value)
        ses.append(est.stderr)
    vals = np.asarray(vals)
    mc_se = vals.std(ddof=1) / np.sqrt(vals.size)
    assert abs(vals.mean() - truth) < 4 * mc_se, (vals.mean(), truth, mc_se)
    # the CLT variance estimate is on the scale of the true sampling variance
    ratio = np.mean(np.square(ses)) / vals.var(ddof=1)
    assert 0.6 < ratio < 1.6, ratio
    cover = np.mean(np.abs(vals - truth) <= 1.96 * np.asarray(ses))
    assert cover > 0.85, cover


def test_variance_matches_marchant_formula_bruteforce(small):
    """For F1 (scale-invariant) the self-normalized estimate and its variance equal Marchant's
    plain AIS estimate (Eq. 1) and Sec. 3.3.2 variance exactly."""
    ev = bae.ActiveEvaluator(small.pool, "f1", rng=3, batch_size=20, estimator="ipw")
    ev.run(small.labeler, budget=200, progress=False)
    est = ev.estimate("clt")
    d = ev.draws()
    m, views = small.pool.resolve("f1")
    L = m.loss(small.pool.encode_labels(d["label"].to_numpy()), views(d["item"].to_numpy()))
    w = d["weight"].to_numpy()
    with np.errstate(divide="ignore"):
        winf = small.pool.p[d["item"]] / ev.proposal.q[d["item"]]
    winf[~np.isfinite(winf)] = 0.0
    N = len(d)
    R = (w[:, None] * L).mean(axis=0)  # Marchant's plain estimator
    J = m.jacobian(R)
    var = (np.mean(((L @ J.T) ** 2)[:, 0] * w * winf) - float((R @ J.T)[0] ** 2)) / N
    assert est.value == pytest.approx(m.g(R)[0], rel=1e-12)
    assert est.stderr**2 == pytest.approx(var, rel=1e-9)
    # the default martingale variance: Σ w² r² / (Σ w)² with the realized weights
    mart = ev.estimate()
    r_f1 = ((L - (w @ L) / w.sum()) @ m.jacobian((w @ L) / w.sum()).T)[:, 0]
    assert mart.value == est.value
    assert mart.stderr**2 == pytest.approx(np.sum(w**2 * r_f1**2) / w.sum() ** 2, rel=1e-9)
    # non-scale-invariant measure: the augmented-measure form Σ w w_inf r² / (Σ w)²
    ev2 = bae.ActiveEvaluator(small.pool, "accuracy", rng=4, batch_size=20, estimator="ipw")
    ev2.run(small.labeler, budget=150, progress=False)
    est2 = ev2.estimate("clt")
    d2 = ev2.draws()
    m2, views2 = small.pool.resolve("accuracy")
    L2 = m2.loss(small.pool.encode_labels(d2["label"].to_numpy()), views2(d2["item"].to_numpy()))
    w2 = d2["weight"].to_numpy()
    wi2 = small.pool.p[d2["item"]] / ev2.proposal.q[d2["item"]]
    R2 = (w2 @ L2) / w2.sum()
    r = (L2 - R2)[:, 0]
    assert est2.value == pytest.approx(R2[0], rel=1e-12)
    assert est2.stderr**2 == pytest.approx(np.sum(w2 * wi2 * r**2) / w2.sum() ** 2, rel=1e-9)


def test_proposal_is_prop2_form(small):
    """Deterministic form E_π max{||Dg(ℓ−R)||, ε 1[ℓ≠0]} against a direct computation."""
    pool = small.pool
    rng = np.random.default_rng(0)
    pi1 = rng.uniform(0.001, 0.5, pool.n_items)
    belief = np.column_stack([1 - pi1, pi1])
    prop = adaptive_proposal(pool, "f1", belief, epsilon=0.3, belief_floor=0.0)
    f = pool.view().pred.astype(float)
    R = np.array([np.mean(pi1 * f), np.mean((pi1 + f) / 2)])
    J = np.array([1 / R[1], -R[0] / R[1] ** 2])
    a = []
    for yv, pr in ((0.0, 1 - pi1), (1.0, pi1)):
        L = np.column_stack([yv * f, (yv + f) / 2])
        a.append((pr, np.abs(L @ J), np.any(L != 0, axis=1)))
    base = sum(pr * n for pr, n, _ in a)
    eps = 0.3 * base.mean()
    s = sum(pr * np.maximum(n, eps * nz) for pr, n, nz in a)
    np.testing.assert_allclose(prop.q, s / s.sum(), rtol=1e-10)
    # stochastic form: sqrt(E max{||.||², ε²})
    prop2 = adaptive_proposal(pool, "f1", belief, epsilon=0.0, deterministic=False, belief_floor=0)
    s2 = np.sqrt(sum(pr * n**2 for pr, n, _ in a))
    np.testing.assert_allclose(prop2.q, s2 / s2.sum(), rtol=1e-10)


def test_per_class_kernel_matches_brute_force(small):
    """class_deviation_norms (table path and generic path) against direct evaluation, and with
    power 2 its belief average is u(x) of the static kernel."""
    import copy

    from bayes_activeeval.beliefs import CategoricalBelief
    from bayes_activeeval.proposals import class_deviation_norms, expected_sq_deviation

    pool = small.pool
    probs = pool.view().prob
    for name in ("f1", "accuracy"):
        m, views = pool.resolve(name)
        generic = copy.copy(m)
        generic.tabular = False
        R = np.array([0.004, 0.01]) if name == "f1" else np.array([0.99])
        J = m.jacobian(R)
        offset = np.zeros(1) if m.scale_invariant else J @ R
        for power in (1, 2):
            for meas in (m, generic):
                n, nz = class_deviation_norms(pool, meas, views, R, J, power=power)
                for c in range(pool.n_classes):
                    L = m.loss(np.full(pool.n_items, c), views(None))
                    dev = np.abs(L @ J.T - offset)[:, 0]
                    np.testing.assert_allclose(n[:, c], dev**power, rtol=1e-12, atol=1e-300)
                    np.testing.assert_array_equal(nz[:, c], np.any(L != 0, axis=1))
        n2, _ = class_deviation_norms(pool, m, views, R, J, power=2)
        u = expected_sq_deviation(pool, m, views, CategoricalBelief(probs), R, J)
        np.testing.assert_allclose((probs * n2).sum(axis=1), u, rtol=1e-12, atol=1e-300)


# -- schedules ----------------------------------------------------------------------------------
def test_epsilon_schedules(small):
    assert epsilon_schedule(0.1, stage=3, unlabeled_fraction=0.25, deterministic=True) == 0.025
    assert epsilon_schedule(0.1, stage=3, unlabeled_fraction=0.25, deterministic=False) == 0.025
    assert epsilon_schedule(0.1, stage=4, unlabeled_fraction=0.5, deterministic=False) == 0.02
    M = small.pool.n_items
    ev = bae.ActiveEvaluator(small.pool, "f1", rng=0, epsilon=0.2)
    assert ev.epsilon == pytest.approx(0.2)
    ev.run(small.labeler, budget=100, batch_size=50, progress=False)
    assert ev.epsilon == pytest.approx(0.2 * (M - 100) / M)  # Prop. 3
    assert ev.proposal.info["epsilon_abs"] > 0
    evs = bae.ActiveEvaluator(small.pool, "f1", rng=0, epsilon=0.2, deterministic=False)
    for t in range(3):
        assert evs.epsilon == pytest.approx(0.2 / (t + 1))  # Prop. 5
        idx = evs.query(10)
        evs.update(idx, small.labeler(idx))
    assert list(evs.history["epsilon"]) == pytest.approx([0.1, 0.2 / 3, 0.05])


def test_epsilon_floor_bounds_weights(medium):
    """With the floor every item whose (augmented) loss can be non-zero keeps at least ε_t of the
    mean integrand: q(x) >= p(x) ε' / Σ p a, so w <= Σ p a / ε'. For accuracy (not scale-invariant)
    that is every item."""
    ev = bae.ActiveEvaluator(medium.pool, "accuracy", rng=0, epsilon=1.0)
    q, p = ev.proposal.q, medium.pool.p
    a = ev.proposal.info["a"]
    lower = p * ev.proposal.info["epsilon_abs"] / (p @ a)
    assert np.all(q >= lower * (1 - 1e-12))
    assert np.min(q / lower) < 1.3  # the floor (nearly) binds for confident items
    ev0 = bae.ActiveEvaluator(medium.pool, "accuracy", rng=0, epsilon=0.0)
    assert ev0.proposal.q.min() < 0.9 * lower.min()  # the floor raised the smallest q


def test_defensive_mix_bounds_weights(small):
    ev = bae.ActiveEvaluator(small.pool, "f1", rng=0, mix=0.1, estimator="ipw")
    ev.run(small.labeler, budget=150, progress=False)
    w = ev.draws()["weight"].to_numpy()
    assert w.max() <= 1 / 0.1 + 1e-9
    q = ev.proposal.q
    assert np.all(q >= 0.1 * small.pool.p * (1 - 1e-12))


# -- cache and budget -----------------------------------------------------------------------------
def test_cache_repeats_free_and_budget_counts_distinct():
    data = make_classification_pool(300, 0.05, rng=2)
    calls = []

    def labeler(idx):
        calls.append(np.asarray(idx).copy())
        return data.labeler(idx)

    ev = bae.ActiveEvaluator(data.pool, "f1", rng=1, batch_size=20, estimator="ipw")
    est = ev.run(labeler, budget=120, progress=False)
    asked = np.concatenate(calls)
    assert asked.size == 120 == np.unique(asked).size == ev.n_labels == est.n_labels
    d = ev.draws()
    assert len(d) == est.n_draws > 120  # repeats were drawn ...
    assert d["item"].nunique() == 120  # ... for free
    # every draw, repeats included, enters the estimate with its weight
    m, views = data.pool.resolve("f1")
    L = m.loss(data.pool.encode_labels(d["label"].to_numpy()), views(d["item"].to_numpy()))
    ref = weighted_estimate(L, d["weight"].to_numpy(), m)
    assert est.value == pytest.approx(ref.value, rel=1e-12)
    # a repeat never changes the label cache
    assert np.array_equal(ev.known, np.isin(np.arange(300), asked))


def test_query_update_contract(small):
    ev = bae.ActiveEvaluator(small.pool, "f1", rng=0)
    idx = ev.query(30)
    assert idx.size == np.unique(idx).size == 30
    with pytest.raises(ValueError, match="not returned by query"):
        other = np.setdiff1d(np.arange(small.pool.n_items), idx)[:1]
        ev.update(other, small.labeler(other))
    # partial update keeps the stage open
    ev.update(idx[:10], small.labeler(idx[:10]))
    assert ev.stage == 0 and ev.n_labels == 10
    ev.update(idx[10:], small.labeler(idx[10:]))
    assert ev.stage == 1 and ev.n_labels == 30 and len(ev.history) == 1
    with pytest.raises(ValueError, match="already has label"):
        ev.update(idx[:1], 1 - small.labeler(idx[:1]))


def test_costs_budget():
    data = make_classification_pool(2000, 0.05, rng=4)
    costs = np.random.default_rng(0).uniform(1.0, 3.0, 2000)
    pool = bae.Pool(
        predictions=data.pool.view().pred,
        probs=data.pool.view().prob[:, 1],
        costs=costs,
        classes=[0, 1],
    )
    ev = bae.ActiveEvaluator(pool, "f1", rng=0, batch_size=10)
    ev.run(data.labeler, budget=100.0, progress=False)
    lab = np.flatnonzero(ev.known)
    assert ev.cost == pytest.approx(costs[lab].sum())
    assert 100.0 <= ev.cost < 100.0 + 3.0
    # query(max_cost=): the new items' cost reaches the cap with the item that crosses it
    ev2 = bae.ActiveEvaluator(pool, "f1", rng=1, batch_size=10)
    idx = ev2.query(50, max_cost=20.0)
    c = np.cumsum(costs[idx])
    assert c[-1] >= 20.0 and (idx.size == 1 or c[-2] < 20.0)
    with pytest.raises(ValueError, match="max_cost"):
        ev2.query(5, max_cost=-1.0)


def test_stochastic_oracle_labels_every_draw(small):
    rng = np.random.default_rng(0)

    def noisy(idx):
        return rng.random(len(idx)) < small.truth[idx]

    ev = bae.ActiveEvaluator(small.pool, "f1", rng=0, deterministic=False, batch_size=25)
    est = ev.run(noisy, budget=100, progress=False)
    assert ev.n_labels == est.n_draws == 100
    assert np.isfinite(est.value)


# -- save and resume ------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_state_round_trip_identical_continuation(small, tmp_path, suffix):
    full = bae.ActiveEvaluator(small.pool, "f1", rng=42, batch_size=25)
    full.run(small.labeler, budget=250, progress=False)

    part = bae.ActiveEvaluator(small.pool, "f1", rng=42, batch_size=25)
    part.run(small.labeler, budget=100, progress=False)
    idx = part.query(25)  # save in the middle of a stage
    path = part.save(tmp_path / f"ev{suffix}")
    resumed = bae.ActiveEvaluator.load(path, small.pool)
    resumed.update(idx, small.labeler(idx))
    resumed.run(small.labeler, budget=250, progress=False)

    a, b = full.draws(), resumed.draws()
    assert a.equals(b)  # bit-identical draws, weights and q
    assert full.estimate().value == resumed.estimate().value
    assert full.estimate().stderr == resumed.estimate().stderr
    assert full.history.equals(resumed.history)


def test_state_round_trip_difference_measure(tmp_path):
    data = make_classification_pool(3000, 0.05, n_models=2, rng=8)
    meas = difference("f1", "m0", "m1")
    ev = bae.ActiveEvaluator(data.pool, meas, rng=1)
    ev.run(data.labeler, budget=100, progress=False)
    ev2 = bae.ActiveEvaluator.from_state(data.pool, ev.get_state())
    ev.run(data.labeler, budget=200, progress=False)
    ev2.run(data.labeler, budget=200, progress=False)
    assert ev.draws().equals(ev2.draws())
    truth = true_value(data.pool, data.labels, meas)[0]
    est = ev.estimate()
    assert abs(est.value - truth) < 5 * est.stderr + 1e-3
    post = ev.posterior(method="conjugate", draws=200, rng=0)
    assert post.posterior["measure"].sizes["output"] == 1
    preds = set(post.constant_data["cell_prediction"].values.tolist())
    assert preds <= {"0,0", "0,1", "1,0", "1,1"} and len(preds) >= 3
    # the item-level calibration posterior takes one model; a difference defaults to the cells
    post = ev.posterior(draws=200, rng=0)
    assert post.attrs["method"] == "conjugate"
    g = post.posterior["measure"].values.ravel()
    assert abs(g.mean() - truth) < 4 * g.std() + 1e-3
    with pytest.raises(ValueError, match="takes one model"):
        ev.posterior(method="calibration", draws=50, rng=0)


# -- contingency posterior ------------------------------------------------------------------------
def test_contingency_exact_when_everything_labeled():
    data = make_classification_pool(500, 0.1, rng=3)
    idx = np.arange(500)
    truth = true_value(data.pool, data.labels, "f1")[0]
    post = contingency_posterior(
        data.pool, "f1", idx, data.labels, np.ones(500), weighting="none", rng=0
    )
    assert post.attrs["finite_population"] == 1
    g = post.posterior["measure"].values
    assert np.allclose(g, truth, rtol=1e-12)
    # design weighting post-stratifies the superpopulation rates: centred on the truth, not exact
    post = contingency_posterior(data.pool, "f1", idx, data.labels, np.ones(500), rng=0)
    assert post.attrs["weighting"] == "design"
    g = post.posterior["measure"].values.ravel()
    assert g.std() > 1e-3 and abs(g.mean() - truth) < 2 * g.std()


def test_contingency_posterior_mean_near_truth(medium):
    pool = medium.pool
    rng = np.random.default_rng(1)
    prop = bae.optimal_proposal(pool, "f1")
    draws = prop.draw(3000, rng)
    post = contingency_posterior(
        pool, "f1", draws.indices, medium.labeler(draws.indices), draws.weights, rng=0
    )
    g = post.posterior["measure"].values.ravel()
    truth = true_value(pool, medium.labels, "f1")[0]
    assert abs(g.mean() - truth) < 3 * g.std() + 0.01, (g.mean(), g.std(), truth)
    summ = az.summary(post, var_names=["measure"])
    assert summ.shape[0] == 1


def test_contingency_credible_interval_coverage_tiny_mc(medium):
    pool = medium.pool
    truth = true_value(pool, medium.labels, "f1")[0]
    prop = bae.optimal_proposal(pool, "f1")
    hits = 0
    reps = 40
    for seed in range(reps):
        d = prop.draw(600, seed)
        post = contingency_posterior(
            pool, "f1", d.indices, medium.labeler(d.indices), d.weights, draws=400, rng=seed
        )
        lo, hi = np.quantile(post.posterior["measure"].values, [0.025, 0.975])
        hits += lo <= truth <= hi
    # P(hits <= 32 | coverage 0.95) ≈ 0.005
    assert hits / reps >= 0.8, hits / reps


def test_contingency_pymc_agrees(medium):
    pool = medium.pool
    prop = bae.optimal_proposal(pool, "f1")
    d = prop.draw(1500, 2)
    y = medium.labeler(d.indices)
    conj = contingency_posterior(pool, "f1", d.indices, y, d.weights, rng=0)
    hier = contingency_posterior(
        pool,
        "f1",
        d.indices,
        y,
        d.weights,
        method="pymc",
        n_strata=6,
        n_bins=4,
        draws=200,
        tune=250,
        rng=0,
    )
    gc = conj.posterior["measure"].values.ravel()
    gh = hier.posterior["measure"].values.ravel()
    truth = true_value(pool, medium.labels, "f1")[0]
    assert abs(gh.mean() - truth) < 3 * gh.std() + 0.01
    assert abs(gh.mean() - gc.mean()) < 3 * max(gc.std(), gh.std())
    summ = az.summary(hier, var_names=["b", "sigma", "measure"])
    assert (summ["r_hat"].astype(float) < 1.1).all()


def test_evaluator_posterior_is_datatree(small):
    ev = bae.ActiveEvaluator(small.pool, "f1", rng=0)
    ev.run(small.labeler, budget=200, progress=False)
    post = ev.posterior(method="conjugate", draws=300, rng=0)
    assert set(post.children) >= {"posterior", "observed_data", "constant_data"}
    assert post.posterior["theta"].dims == ("chain", "draw", "cell", "class")
    est = ev.estimate()
    g = post.posterior["measure"].values.ravel()
    assert abs(g.mean() - est.value) < 4 * max(est.stderr, g.std())
    # the default for a binary pool under a deterministic oracle: the calibration posterior
    post = ev.posterior(draws=300, rng=0)
    assert post.attrs["method"] == "calibration"
    assert post.posterior["unlabeled_positives"].dims == ("chain", "draw", "prediction")
    g = post.posterior["measure"].values.ravel()
    assert abs(g.mean() - est.value) < 4 * max(est.stderr, g.std())


# -- bad input --------------------------------------------------------------------------------------
def test_bad_input(small, tmp_path):
    pool = small.pool
    reg = make_regression_pool(100, rng=0).pool
    with pytest.raises(ValueError, match="classification pool"):
        bae.ActiveEvaluator(reg, "mse")
    with pytest.raises(ValueError, match="epsilon"):
        bae.ActiveEvaluator(pool, "f1", epsilon=-1)
    with pytest.raises(ValueError, match="mix"):
        bae.ActiveEvaluator(pool, "f1", mix=2.0)
    with pytest.raises(ValueError, match="batch_size"):
        bae.ActiveEvaluator(pool, "f1", batch_size=0)
    with pytest.raises(ValueError, match="unknown oracle"):
        bae.ActiveEvaluator(pool, "f1", oracle="nope")
    with pytest.raises(ValueError, match="deterministic"):
        bae.ActiveEvaluator(pool, "f1", oracle=PluginOracle(deterministic=False))
    with pytest.raises(TypeError, match="deterministic"):
        bae.ActiveEvaluator(pool, "f1", deterministic="yes")
    ev = bae.ActiveEvaluator(pool, "f1", rng=0)
    with pytest.raises(ValueError, match="budget"):
        ev.run(small.labeler, budget=pool.n_items + 1, progress=False)
    with pytest.raises(ValueError, match="budget"):
        ev.run(small.labeler, budget=-5, progress=False)
    with pytest.raises(TypeError, match="labeler"):
        ev.run("not callable", budget=10, progress=False)
    with pytest.raises(ValueError, match="n="):
        ev.query(pool.n_items + 1)
    idx = ev.query(5)
    with pytest.raises(ValueError, match="not one of the classes"):
        ev.update(idx, [7] * 5)
    with pytest.raises(ValueError, match="entries"):
        ev.update(idx, [0] * 4)
    with pytest.raises(ValueError, match="not an item"):
        ev.update([pool.n_items + 3], [0])
    with pytest.raises(ValueError, match=r"\.json or \.npz"):
        ev.save(tmp_path / "state.txt")
    other = make_classification_pool(100, 0.1, rng=0).pool
    with pytest.raises(ValueError, match="pool of"):
        bae.ActiveEvaluator.from_state(other, ev.get_state())
    with pytest.raises(ValueError, match="method"):
        contingency_posterior(pool, "f1", [0], [0], [1.0], method="gibbs")
    with pytest.raises(ValueError, match="weights"):
        contingency_posterior(pool, "f1", [0], [0], [-1.0])


def test_dirichlet_tree_oracle_round_trip(small, tmp_path):
    """The evaluator drives the Dirichlet-tree oracle model; a saved run resumes bit-identically."""
    opts = {"n_strata": 16, "depth": 4}
    full = bae.ActiveEvaluator(
        small.pool, "f1", oracle="dirichlet-tree", rng=5, oracle_options=opts
    )
    full.run(small.labeler, budget=200, progress=False)
    part = bae.ActiveEvaluator(
        small.pool, "f1", oracle="dirichlet-tree", rng=5, oracle_options=opts
    )
    part.run(small.labeler, budget=100, progress=False)
    resumed = bae.ActiveEvaluator.load(part.save(tmp_path / "dt.npz"), small.pool)
    resumed.run(small.labeler, budget=200, progress=False)
    assert full.draws().equals(resumed.draws())
    assert full.estimate().value == resumed.estimate().value
    truth = true_value(small.pool, small.labels, "f1")[0]
    est = full.estimate("martingale")
    assert abs(est.value - truth) < 5 * est.stderr
