"""planning: labels for a target interval width or test power."""

from __future__ import annotations

import numpy as np
import pytest
from pools import binary_pool
from scipy import stats

import bayes_activeeval as bae
from bayes_activeeval import planning
from bayes_activeeval.proposals import Proposal


# ------------------------------------------------------------------------------------------------
# planning
# ------------------------------------------------------------------------------------------------
def test_power_formula():
    n = np.arange(1, 2000)
    pw = planning.power(n, 0.05, 0.2)
    assert np.all(np.diff(pw) > 0)
    assert planning.power(0, 0.05, 0.2) == pytest.approx(0.05)
    assert planning.power(500, 0.08, 0.2) > planning.power(500, 0.05, 0.2)
    assert planning.power(500, -0.05, 0.2) == pytest.approx(planning.power(500, 0.05, 0.2))
    mu = np.sqrt(500) * 0.05 / np.sqrt(0.2)
    z = stats.norm.ppf(0.975)
    ref = 1 - (stats.norm.cdf(z - mu) - stats.norm.cdf(-z - mu))
    assert planning.power(500, 0.05, 0.2) == pytest.approx(ref, rel=1e-12)
    assert planning.power(500, 0.05, 0.2, alternative="greater") > planning.power(500, 0.05, 0.2)
    with pytest.raises(ValueError, match="variance"):
        planning.power(10, 0.1, 0.0)


def test_planning_predictions_hold_when_belief_is_true():
    """Labels drawn from the mixture belief itself: planned n gives the planned power."""
    pool, _ = binary_pool(m=4000, seed=8)
    p1 = 0.5 * (pool.view("m0").prob[:, 1] + pool.view("m1").prob[:, 1])
    opt = planning.labels_for_power(pool, "error_rate", -0.02, power=0.8, design="optimal")
    pas = planning.labels_for_power(pool, "error_rate", -0.02, power=0.8, design="passive")
    assert opt.n_draws < pas.n_draws
    assert opt.expected_labels <= opt.n_draws
    # compare() post-stratifies the difference on D (where the models' losses can differ)
    opt_u = bae.comparison_proposal(pool, "error_rate")
    assert opt.variance == pytest.approx(
        planning.restricted_variance(pool, "error_rate", ("m0", "m1"), opt.proposal, opt_u),
        rel=1e-12,
    )
    # predicted variance per draw vs Monte Carlo (labels ~ belief, stochastic oracle)
    rng = np.random.default_rng(9)
    prop = opt.proposal
    ests = []
    for _ in range(400):
        d = prop.draw(300, rng)
        yl = (rng.random(300) < p1[d.indices]).astype(int)
        ests.append(bae.compare(pool, "error_rate", d, yl, oracle="stochastic").estimate)
    mc_var = np.var(ests) * 300
    assert mc_var == pytest.approx(opt.variance, rel=4 * np.sqrt(2 / 400))
    w = planning.labels_for_width(pool, "error_rate", 0.01, model="m0", design="optimal")
    wp = planning.labels_for_width(pool, "error_rate", 0.01, model="m0", design="passive")
    assert w.n_draws < wp.n_draws
    # passive, zero-one loss: σ² = Σ p E(ℓ − R)² = R(1 − R) with R the model's intrinsic risk
    pm = pool.view("m0").prob[np.arange(pool.n_items), pool.view("m0").pred]
    R = np.mean(1 - pm)
    assert wp.variance == pytest.approx(R * (1 - R), rel=1e-4)
    assert wp.n_draws == int(np.ceil((stats.norm.ppf(0.975) / 0.01) ** 2 * wp.variance))
    with pytest.raises(ValueError, match="non-zero"):
        planning.labels_for_power(pool, "error_rate", 0.0)
    with pytest.raises(ValueError, match="design"):
        planning.labels_for_power(pool, "error_rate", 0.02, design="clever")
    # a one-sided test against the direction of the difference never reaches the power (it
    # raised OverflowError from int(inf))
    with pytest.raises(ValueError, match=r"out of reach.*against the direction"):
        planning.labels_for_power(pool, "error_rate", 0.02, alternative="less")
    with pytest.raises(ValueError, match=r"out of reach.*more than 1e15 draws"):
        planning.labels_for_power(pool, "error_rate", 1e-9)
    with pytest.raises(ValueError, match="half_width"):
        planning.labels_for_width(pool, "error_rate", -1, model="m0")


def _restricted_pool(m=2000, seed=3):
    """a and b disagree on 200 items (s = 0.1): a alone wrong on 20, b alone wrong on 180;
    both wrong on 100 more. Δ = −0.08, Δ/s = −0.8 and δ ≡ 0 where they agree."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, m)
    perm = rng.permutation(m)
    pa, pb = y.copy(), y.copy()
    pa[np.r_[perm[:20], perm[200:300]]] ^= 1
    pb[np.r_[perm[20:200], perm[200:300]]] ^= 1
    probs = {
        k: np.clip(np.where(v == 1, 0.7, 0.3) + rng.normal(0, 0.1, m), 0.01, 0.99)
        for k, v in (("a", pa), ("b", pb))
    }
    return bae.Pool(predictions={"a": pa, "b": pb}, probs=probs, classes=[0, 1]), y


def test_planning_a_design_without_full_support():
    """active_neq with mix=0 (zero where the models agree, Sawade (2012), Sec. 5.2.2) used to be
    refused (u = Δ̌² > 0 where q = 0); for a plain risk its variance per draw is
    Σ_{q>0} p² E_π(δ − Δ̌/s)²/q: here, with the truth as the belief and q = p/s on the
    disagreement set, s² Var_S(δ) = 0.01 · 0.36."""
    pool, y = _restricted_pool()
    truth = np.eye(2)[y]
    pa, pb = pool.view("a").pred, pool.view("b").pred
    delta = (pa != y).astype(float) - (pb != y)
    S = pa != pb
    s = S.mean()
    expected = s**2 * np.var(delta[S])
    assert expected == pytest.approx(0.0036)
    kw = dict(design="active_neq", mix=0.0, belief=truth)
    plan = planning.labels_for_power(pool, "error_rate", -0.08, **kw)
    assert plan.proposal.info.support_mass == pytest.approx(0.1)
    assert plan.variance == pytest.approx(expected, rel=1e-4)
    wide = planning.labels_for_width(pool, "error_rate", 0.01, models=("a", "b"), **kw)
    assert wide.variance == pytest.approx(plan.variance, rel=1e-12)
    # what compare's estimate (rescaled by the support mass) does: n Var(Δ̂) over 400 runs
    rng = np.random.default_rng(4)
    n, reps = 100, 400
    est = []
    for _ in range(reps):
        d = plan.proposal.draw(n, rng)
        est.append(
            bae.compare(pool, "error_rate", d, y[d.indices], proposal=plan.proposal).estimate
        )
    assert n * np.var(est) == pytest.approx(plan.variance, rel=4 * np.sqrt(2 / reps))
    # the mixture belief (default) plans too, and a full-support design is unchanged
    assert np.isfinite(
        planning.labels_for_power(pool, "error_rate", -0.08, design="active_neq", mix=0.0).variance
    )
    # with full support (mix=0.1) compare() post-stratifies on D too: the same variance per
    # draw, Σ_D p² E(δ − Δ̌/s)²/q, and the realized n Var(Δ̂) agrees with it
    full = planning.labels_for_power(
        pool, "error_rate", -0.08, design="active_neq", mix=0.1, belief=truth
    )
    assert full.variance == pytest.approx(
        expected / (0.9 + 0.1 * s), rel=1e-4
    )  # q = p(0.9/s + 0.1) on D
    est = []
    for _ in range(reps):
        d = full.proposal.draw(n, rng)
        est.append(bae.compare(pool, "error_rate", d, y[d.indices]).estimate)
    assert n * np.var(est) == pytest.approx(full.variance, rel=4 * np.sqrt(2 / reps))
    # still refused where the difference is not identified: a ratio measure, or q = 0 on an
    # item where the two models disagree
    with pytest.raises(ValueError, match=r"zero mass to 1800 items.*non-linear measure 'f1'"):
        planning.labels_for_power(pool, "f1", -0.05, design="active_neq", mix=0.0)
    neq = plan.proposal
    q = np.where(np.arange(pool.n_items) == np.flatnonzero(neq.q > 0)[0], 0.0, neq.q)
    hole = Proposal(q / q.sum(), neq.p, "hole")
    opt = bae.comparison_proposal(pool, "error_rate", mix=0.0, belief=truth)
    with pytest.raises(
        ValueError,
        match=r"'hole' proposal gives zero mass to item \d+ \(and 0 more\) where the difference",
    ):
        planning.restricted_variance(pool, "error_rate", ("a", "b"), hole, opt, truth)


def test_planning_bad_inputs_name_the_argument():
    """power() returned NaN for a negative or NaN n or difference, expected_labels() counted
    negative labels for n < 0, and a non-numeric difference or half_width gave float()'s
    message, which does not name the argument."""
    pool, _ = binary_pool(m=500, seed=2)
    with pytest.raises(ValueError, match=r"n = -5\.0 is not a number of draws"):
        planning.power(-5, 0.05, 0.2)
    with pytest.raises(ValueError, match=r"n\[1\] = nan is not a number of draws"):
        planning.power([10, np.nan], 0.05, 0.2)
    with pytest.raises(ValueError, match=r"difference must be a finite number, got nan"):
        planning.power(100, np.nan, 0.2)
    with pytest.raises(TypeError, match=r"variance must be a number, got 'x'"):
        planning.power(100, 0.05, "x")
    with pytest.raises(ValueError, match=r"n must be >= 0, got -3"):
        planning.expected_labels(np.full(10, 0.1), -3)
    with pytest.raises(TypeError, match=r"n must be an integer, got 2\.5"):
        planning.expected_labels(np.full(10, 0.1), 2.5)
    assert planning.expected_labels(np.full(10, 0.1), 0) == 0.0
    with pytest.raises(TypeError, match=r"difference must be a number, got 'a'"):
        planning.labels_for_power(pool, "error_rate", "a")
    with pytest.raises(TypeError, match=r"half_width must be a number, got 'x'"):
        planning.labels_for_width(pool, "error_rate", "x", model="m0")
