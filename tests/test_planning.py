"""planning: labels for a target interval width or test power."""

from __future__ import annotations

import numpy as np
import pytest
from pools import binary_pool
from scipy import stats

import bayes_activeeval as bae
from bayes_activeeval import planning


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
    assert opt.variance == pytest.approx(opt.proposal.predicted_variance(), rel=1e-12)
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
