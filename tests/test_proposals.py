"""The general optimal proposal reproduces every closed form of the papers to 1e-10.

Each closed form is written out independently here from Sawade (2012) and compared with
`optimal_proposal(..., mix=0, belief_floor=0)` on random pools.
"""

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval.beliefs import GaussianBelief

EXACT = {"mix": 0.0, "belief_floor": 0.0}


def _norm(s):
    return s / s.sum()


@pytest.fixture(params=[0, 1, 2])
def binary(request):
    rng = np.random.default_rng(100 + request.param)
    n = 3000
    p1 = rng.beta(0.5, 2.0, n)
    f = (rng.random(n) < 0.5 * p1 + 0.25).astype(int)  # predictions not always argmax
    return bae.Pool(predictions=f, probs=p1), p1, f


def test_cor_4_2_zero_one_loss(binary):
    """Sawade (2012), Cor. 4.2, Eq. 4.14: q ∝ sqrt((1 − 2R)(1 − π(f|x)) + R²), R = Ř01 (4.22)."""
    pool, p1, f = binary
    one_minus_pi = np.where(f == 1, 1 - p1, p1)
    R = np.mean(one_minus_pi)
    q = _norm(np.sqrt((1 - 2 * R) * one_minus_pi + R**2))
    for name in ("error_rate", "accuracy"):
        np.testing.assert_allclose(bae.optimal_proposal(pool, name, **EXACT).q, q, rtol=1e-10)


def test_cor_4_2_multiclass(rng):
    n, C = 2000, 4
    probs = rng.dirichlet(np.ones(C), n)
    f = rng.integers(0, C, n)
    pool = bae.Pool(predictions=f, probs=probs, classes=np.arange(C))
    pi_f = probs[np.arange(n), f]
    R = np.mean(1 - pi_f)
    q = _norm(np.sqrt((1 - 2 * R) * (1 - pi_f) + R**2))
    np.testing.assert_allclose(bae.optimal_proposal(pool, "error_rate", **EXACT).q, q, rtol=1e-10)


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_cor_4_4_f_eta(binary, beta):
    """Sawade (2012), Cor. 4.4, Eq. 4.18 with η = 1/(1+β²) and Ǧ from Eq. 4.21."""
    pool, p1, f = binary
    eta = 1 / (1 + beta**2)
    G = np.sum(f * p1) / np.sum(eta * f + (1 - eta) * p1)
    pi = np.where(f == 1, p1, 1 - p1)
    one_minus_pi = np.where(f == 1, 1 - p1, p1)  # formed without cancellation
    s = np.where(
        f == 1,
        np.sqrt(pi * (1 - G) ** 2 + eta**2 * one_minus_pi * G**2),
        (1 - eta) * np.sqrt(one_minus_pi * G**2),
    )
    np.testing.assert_allclose(
        bae.optimal_proposal(pool, bae.FBeta(beta), **EXACT).q, _norm(s), rtol=1e-10
    )


def test_cor_4_4_recall_and_precision(binary):
    """Sawade (2012), Eq. 4.19 (recall) and Eq. 4.20 (precision)."""
    pool, p1, f = binary
    pi = np.where(f == 1, p1, 1 - p1)
    one_minus_pi = np.where(f == 1, 1 - p1, p1)
    G_rec = np.sum(f * p1) / np.sum(p1)
    rec = np.where(f == 1, np.sqrt(pi) * (1 - G_rec), np.sqrt(one_minus_pi) * G_rec)
    np.testing.assert_allclose(
        bae.optimal_proposal(pool, "recall", **EXACT).q, _norm(rec), rtol=1e-10
    )
    G_prec = np.mean(p1[f == 1])
    prec = f * np.sqrt(np.clip((1 - 2 * G_prec) * pi + G_prec**2, 0, None))
    np.testing.assert_allclose(
        bae.optimal_proposal(pool, "precision", **EXACT).q, _norm(prec), rtol=1e-10, atol=0
    )


def test_thm_4_2_label_costs(binary, rng):
    """Sawade (2012), Thm. 4.2, Eq. 4.25: the same q divided by sqrt(c(x))."""
    pool, p1, f = binary
    costs = rng.uniform(0.2, 5.0, pool.n_items)
    pooled = bae.Pool(predictions=f, probs=p1, costs=costs)
    base = bae.optimal_proposal(pool, "f1", **EXACT).q
    np.testing.assert_allclose(
        bae.optimal_proposal(pooled, "f1", **EXACT).q, _norm(base / np.sqrt(costs)), rtol=1e-10
    )
    # costs=False ignores them; an explicit vector overrides the pool's
    np.testing.assert_allclose(
        bae.optimal_proposal(pooled, "f1", costs=False, **EXACT).q, base, rtol=1e-10
    )


def test_cor_4_3_squared_loss_gaussian(rng):
    """Sawade (2012), Cor. 4.3, Eq. 4.17, with a belief mean μ ≠ f(x) (d ≠ 0)."""
    n = 2500
    f = rng.standard_normal(n)
    mu = f + 0.7 * rng.standard_normal(n)
    sig = rng.uniform(0.2, 2.0, n)
    pool = bae.Pool(predictions=f, predictive_std=sig)
    d = f - mu
    R2 = np.mean(d**2 + sig**2)
    s = np.sqrt(d**2 * (6 * sig**2 - 2 * R2 + d**2) + (3 * sig**2 - 2 * R2) * sig**2 + R2**2)
    q = bae.optimal_proposal(pool, "mse", belief=GaussianBelief(mu, sig), **EXACT).q
    np.testing.assert_allclose(q, _norm(s), rtol=1e-10)


def test_eq_4_23_regression_plugin(regression_pool):
    """Sawade (2012), Eq. 4.23: q ∝ sqrt((3τ² − 2Ř)τ² + Ř²), Ř = mean τ²."""
    pool = regression_pool.pool
    tau2 = pool.view().std ** 2
    R = tau2.mean()
    s = np.sqrt((3 * tau2 - 2 * R) * tau2 + R**2)
    np.testing.assert_allclose(bae.optimal_proposal(pool, "mse", **EXACT).q, _norm(s), rtol=1e-10)


def test_cor_5_1_comparison_zero_one(rng):
    """Sawade (2012), Cor. 5.1, Eq. 5.8 with the mixture belief (5.11) and Δ̌ (5.12)."""
    n = 3000
    pa, pb = rng.beta(2, 2, n), rng.beta(2, 2, n)
    fa, fb = (pa > 0.5).astype(int), (rng.random(n) < pb).astype(int)
    pool = bae.Pool(predictions={"a": fa, "b": fb}, probs={"a": pa, "b": pb})
    p1 = (pa + pb) / 2
    loss_a = lambda y: (fa != y).astype(float)  # noqa: E731
    loss_b = lambda y: (fb != y).astype(float)  # noqa: E731
    delta = np.mean(p1 * (loss_a(1) - loss_b(1)) + (1 - p1) * (loss_a(0) - loss_b(0)))
    F = fa - fb
    s = np.sqrt(F**2 - 2 * delta * F * (1 - 2 * p1) + delta**2)
    q = bae.optimal_proposal(pool, bae.difference("error_rate", "a", "b"), **EXACT).q
    np.testing.assert_allclose(q, _norm(s), rtol=1e-10)


def test_cor_5_2_and_sec_5_2_2_comparison_squared_loss(rng):
    """Sawade (2012), Sec. 5.2.2: with the Gaussian mixture predictive Δ̌ = 0 and
    q ∝ sqrt(F1² (F1² + 2(τ_a² + τ_b²))), F1 = f_a − f_b (src line ~6030)."""
    n = 2000
    fa, fb = rng.standard_normal(n), rng.standard_normal(n)
    ta, tb = rng.uniform(0.3, 1.5, n), rng.uniform(0.3, 1.5, n)
    pool = bae.Pool(predictions={"a": fa, "b": fb}, predictive_std={"a": ta, "b": tb})
    F1 = fa - fb
    # Cor. 5.2 general form with mixture moments (5.13): μ = (fa+fb)/2, E[y²] = ½(fa²+fb²+τa²+τb²)
    mu = (fa + fb) / 2
    Ey2 = (fa**2 + fb**2 + ta**2 + tb**2) / 2
    F2 = fa**2 - fb**2
    delta = np.mean(F2 - 2 * F1 * mu)
    s_general = np.sqrt(4 * F1**2 * Ey2 - 4 * F1 * (F2 - delta) * mu + (F2 - delta) ** 2)
    s_simple = np.sqrt(F1**2 * (F1**2 + 2 * (ta**2 + tb**2)))
    q = bae.optimal_proposal(pool, bae.difference("mse", "a", "b"), **EXACT).q
    np.testing.assert_allclose(q, _norm(s_general), rtol=1e-10)
    np.testing.assert_allclose(q, _norm(s_simple), rtol=1e-10)


def test_deterministic_oracle_optimum_for_f1(rare_pool):
    """Known labels as the belief: the optimal per-draw variance of F1 is 4F²(1−F)²
    (Marchant & Rubinstein (2021), Prop. 4)."""
    pool, y = rare_pool.pool, rare_pool.labels
    onehot = np.eye(2)[y]
    f = pool.view().pred
    F = 2 * np.sum(f * y) / (np.sum(f) + np.sum(y))
    # known true negatives need no mass, but the support check rightly refuses q = 0 for them
    # without mixing (the belief could be wrong); a negligible mixture keeps the optimum
    with pytest.raises(ValueError, match="zero mass"):
        bae.optimal_proposal(pool, "f1", belief=onehot, **EXACT)
    near = {"mix": 1e-12, "belief_floor": 0.0}
    prop = bae.optimal_proposal(pool, "f1", belief=onehot, **near)
    assert prop.predicted_variance() == pytest.approx(4 * F**2 * (1 - F) ** 2, rel=1e-8)
    # Accuracy: Marchant's zero-variance optimum (Example 4) holds for the plain IS estimator;
    # the self-normalized one, centred at R, attains (Σ p |ℓ − R|)² = (2R(1 − R))² instead.
    R = np.mean(f == y)
    acc = bae.optimal_proposal(pool, "accuracy", belief=onehot, **near)
    assert acc.predicted_variance() == pytest.approx((2 * R * (1 - R)) ** 2, rel=1e-8)


def test_mixing_bounds_weights_and_costs_at_most_its_share(rare_pool):
    pool = rare_pool.pool
    raw = bae.optimal_proposal(pool, "f1", mix=0.0)
    mixed = bae.optimal_proposal(pool, "f1", mix=0.1)
    np.testing.assert_allclose(mixed.q, 0.9 * raw.q + 0.1 * pool.p, rtol=1e-12)
    assert np.max(pool.p / mixed.q) <= 1 / 0.1 + 1e-9
    # variance penalty at most 1/(1 − δ)
    assert mixed.predicted_variance() <= raw.predicted_variance() / 0.9 + 1e-15


@pytest.mark.parametrize("lam", [0.05, 0.5])
def test_defensive_floor_bounds_weights_and_costs_only_where_it_acts(rare_pool, lam, rng):
    pool = rare_pool.pool
    raw = bae.optimal_proposal(pool, "f1", mix=0.0)
    fl = bae.optimal_proposal(pool, "f1", mix=0.0, defensive_floor=lam)
    assert fl.info["defensive_floor"] == lam
    Z = float(np.maximum(raw.q, lam * pool.p).sum())
    np.testing.assert_allclose(fl.q, np.maximum(raw.q, lam * pool.p) / Z, rtol=1e-12)
    assert Z - 1 <= lam * float(pool.p[raw.q < lam * pool.p].sum()) + 1e-12
    assert np.max(pool.p / fl.q) <= Z / lam * (1 + 1e-12)
    # the variance is at most Z times the unfloored one for any integrand, the true labels' too
    for v in (raw.info["u"], rng.exponential(size=pool.n_items), (rare_pool.labels == 1) * 1.0):
        assert fl.predicted_variance(v) <= Z * raw.predicted_variance(v) * (1 + 1e-12)
    # where the proposal already gives every item λ p, the floor changes nothing
    tiny = float(np.min(raw.q / pool.p)) * 0.99
    same = bae.optimal_proposal(pool, "f1", mix=0.0, defensive_floor=tiny)
    np.testing.assert_allclose(same.q, raw.q, rtol=1e-12)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_defensive_floor_rejects_bad_values(rare_pool, bad):
    with pytest.raises(ValueError, match="defensive_floor"):
        bae.optimal_proposal(rare_pool.pool, "f1", defensive_floor=bad)
    with pytest.raises(ValueError, match="defensive_floor"):
        bae.optimal_proposal(rare_pool.pool, "roc_auc", defensive_floor=bad)


def test_defensive_floor_of_a_threshold_free_proposal(rare_pool):
    pool = rare_pool.pool
    raw = bae.optimal_proposal(pool, "roc_auc")
    fl = bae.optimal_proposal(pool, "roc_auc", defensive_floor=0.5)
    Z = float(np.maximum(raw.q, 0.5 * pool.p).sum())
    np.testing.assert_allclose(fl.q, np.maximum(raw.q, 0.5 * pool.p) / Z, rtol=1e-12)
    assert np.max(pool.p / fl.q) <= Z / 0.5 * (1 + 1e-12)


def test_optimal_beats_passive_in_predicted_variance(rare_pool):
    pool = rare_pool.pool
    prop = bae.optimal_proposal(pool, "f1", mix=0.0)
    u = prop.info["u"]
    passive_var = float(pool.p @ u)
    assert prop.predicted_variance() <= passive_var
    # Cauchy-Schwarz: the optimum is (Σ p sqrt(u))²
    assert prop.predicted_variance() == pytest.approx(float(pool.p @ np.sqrt(u)) ** 2, rel=1e-10)


def test_predicted_variance_matches_monte_carlo(balanced_pool):
    """The proposal's predicted per-draw variance agrees with the empirical variance of the
    estimates when the belief is the truth (Sawade (2012), Lemma 3.4)."""
    pool, truth = balanced_pool.pool, balanced_pool.truth
    belief = np.column_stack([1 - truth, truth])
    prop = bae.optimal_proposal(pool, "f1", belief=belief, mix=0.0, belief_floor=0.0)
    m, views = pool.resolve("f1")
    rng = np.random.default_rng(5)
    n, reps = 400, 400
    vals = []
    for _ in range(reps):
        d = prop.draw(n, rng=rng)
        yy = (rng.random(n) < truth[d.indices]).astype(
            int
        )  # a stochastic oracle with p(y|x) = truth
        vals.append(bae.weighted_estimate(m.loss(yy, views(d.indices)), d.weights, m).value)
    emp = np.var(vals, ddof=1) * n
    pred = prop.predicted_variance()
    # the variance of a sample variance from 400 reps has relative sd ≈ sqrt(2/399) ≈ 7%
    assert emp == pytest.approx(pred, rel=0.25)


def test_stratified_proposals(balanced_pool):
    pool = balanced_pool.pool
    prop = bae.stratified_proposal(pool, strata=10)
    np.testing.assert_allclose(prop.q, pool.p)  # proportional allocation = passive
    ney = bae.stratified_proposal(pool, "f1", strata=10, allocation="neyman", method="quantile")
    u = ney.info["u"]
    # Neyman allocation is between passive and the unconstrained optimum
    opt = bae.optimal_proposal(pool, "f1", mix=0.0).predicted_variance()
    passive = float(pool.p @ u)
    assert opt <= ney.predicted_variance() <= passive
    # constant within strata
    labels = ney.info["strata"]
    for h in np.unique(labels)[:3]:
        assert np.ptp(ney.q[labels == h]) < 1e-15


def test_draw_unique_reaches_exact_budget(rare_pool):
    prop = bae.optimal_proposal(rare_pool.pool, "f1")
    d = prop.draw(300, rng=1, unique=True)
    assert d.n_distinct == 300
    assert len(d) >= 300
    assert d.indices[-1] not in set(d.indices[:-1].tolist())  # stopped at the 300th new item
    np.testing.assert_allclose(d.weights, prop.p[d.indices] / prop.q[d.indices])


def test_draws_follow_q(rng):
    q = np.array([0.1, 0.0, 0.6, 0.3])
    prop = bae.Proposal(q, np.full(4, 0.25), "custom")
    d = prop.draw(200_000, rng=rng)
    freq = np.bincount(d.indices, minlength=4) / 200_000
    np.testing.assert_allclose(freq, q, atol=4 * np.sqrt(0.25 / 200_000))
    assert freq[1] == 0
    # reproducible with the same seed
    np.testing.assert_array_equal(prop.draw(50, rng=3).indices, prop.draw(50, rng=3).indices)


def _generic(measure):
    import copy

    m = copy.copy(bae.measures.get(measure))
    m.tabular = False
    return m


@pytest.mark.parametrize(
    "name", [n for n in bae.measures.available() if bae.measures.get(n).tabular]
)
def test_tabular_fast_path_equals_generic_path(name, rng):
    n = 1500
    multi = name.endswith(("_macro", "_micro")) or name in ("balanced_accuracy", "accuracy")
    C = 3 if multi else 2
    probs = rng.dirichlet(np.ones(C), n)
    f = rng.integers(0, C, n)
    pool = bae.Pool(predictions=f, probs=probs, classes=np.arange(C))
    fast = bae.optimal_proposal(pool, name, mix=0.01)
    slow = bae.optimal_proposal(pool, _generic(name), mix=0.01)
    np.testing.assert_allclose(fast.info["risk"], slow.info["risk"], rtol=1e-12)
    np.testing.assert_allclose(fast.q, slow.q, rtol=1e-10)


def test_tabular_fast_path_for_two_model_difference(rng):
    n, C = 1500, 3
    preds = {m: rng.integers(0, C, n) for m in ("a", "b")}
    probs = {m: rng.dirichlet(np.ones(C), n) for m in ("a", "b")}
    pool = bae.Pool(predictions=preds, probs=probs, classes=np.arange(C))
    for base in ("accuracy", "f1_macro"):
        fast = bae.optimal_proposal(pool, bae.difference(base, "a", "b"), mix=0.0)
        slow = bae.optimal_proposal(pool, bae.difference(_generic(base), "a", "b"), mix=0.0)
        np.testing.assert_allclose(fast.q, slow.q, rtol=1e-10)


def test_draws_slice_keeps_indices_weights_and_q_aligned():
    d = bae.Draws(
        np.array([3, 1, 3, 7]), np.array([0.5, 2.0, 0.5, 1.5]), np.array([0.4, 0.1, 0.4, 0.2])
    )
    head = d[:3]
    assert isinstance(head, bae.Draws)
    np.testing.assert_array_equal(head.indices, [3, 1, 3])
    np.testing.assert_array_equal(head.weights, [0.5, 2.0, 0.5])
    np.testing.assert_array_equal(head.q, [0.4, 0.1, 0.4])
    assert d[d.indices == 3].n_distinct == 1


def test_predicted_variance_under_another_u(rare_pool):
    """predicted_variance(u) evaluates Σ p² u / q for any u: the optimal proposal's own u gives its
    stored value, and a passive proposal (which stores none) gives Σ p² u / p = Σ p u."""
    pool = rare_pool.pool
    opt = bae.optimal_proposal(pool, "f1", mix=0.0)
    u = opt.info["u"]
    assert opt.predicted_variance(u) == pytest.approx(opt.predicted_variance())
    passive = bae.passive_proposal(pool)
    assert passive.predicted_variance(u) == pytest.approx(float(pool.p @ u))
    assert passive.predicted_variance(u) >= opt.predicted_variance()


def test_resolve_defences_is_the_one_rule_of_the_defaults():
    """The defence's defaults (``kernel.resolve_defences``): the floor and no mixture unless a
    mixture is given; the mixture and no floor where the design keeps it; given values kept."""
    from bayes_activeeval.kernel import DEFAULT_DEFENSIVE_FLOOR, DEFAULT_MIX, resolve_defences

    assert resolve_defences(None, None) == (0.0, DEFAULT_DEFENSIVE_FLOOR)
    assert resolve_defences(0.05, None) == (0.05, 0.0)
    assert resolve_defences(0.05, 0.2) == (0.05, 0.2)
    assert resolve_defences(None, 0.0) == (0.0, 0.0)
    assert resolve_defences(None, None, keeps_mixture=True) == (DEFAULT_MIX, 0.0)
    assert resolve_defences(0.0, 0.1, keeps_mixture=True) == (0.0, 0.1)
    pool = bae.datasets.make_classification_pool(2_000, 0.05, rng=3).pool
    assert optimal_info(bae.optimal_proposal(pool, "f1")) == (0.0, DEFAULT_DEFENSIVE_FLOOR)
    assert optimal_info(bae.optimal_proposal(pool, "f1", mix=0.05)) == (0.05, 0.0)
    assert optimal_info(bae.optimal_proposal(pool, "roc_auc")) == (DEFAULT_MIX, 0.0)


def optimal_info(prop):
    info = prop.info
    get = info.get if isinstance(info, dict) else lambda k: getattr(info, k, None)
    return get("mix"), get("defensive_floor")
