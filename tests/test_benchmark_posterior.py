"""benchmark.posterior: the conjugate and hierarchical PyMC contingency posteriors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from bayes_activeeval import benchmark as bm
from bayes_activeeval.datasets import make_classification_pool

# ------------------------------------------------------------------------------------------------
# Bayesian posterior
# ------------------------------------------------------------------------------------------------


def test_conjugate_posterior_matches_beta_closed_form():
    """One stratum, superpopulation: precision = theta_+ ~ Beta(a + k, b + n - k) exactly."""
    N = 4000
    d = bm.design(np.full(N, 0.1), budget=400, n_strata=1, method="proportional")
    smp = d.sample(1)
    rng = np.random.default_rng(3)
    y = (rng.random(N) < 0.1).astype(int)
    rule = (rng.random(N) < 0.3).astype(int)
    ev = bm.evaluate(
        y[smp.indices], rule, smp, prior="jeffreys", finite_population=False, draws=20_000, rng=0
    )
    lab_pos = rule[smp.indices] == 1
    k, n = y[smp.indices][lab_pos].sum(), lab_pos.sum()
    draws = ev.posterior["posterior"]["precision"].values.ravel()
    mean = (0.5 + k) / (1 + n)
    sd = np.sqrt(mean * (1 - mean) / (n + 2))
    assert draws.mean() == pytest.approx(mean, abs=4 * sd / np.sqrt(draws.size))
    assert draws.std() == pytest.approx(sd, rel=0.03)
    # T1: posterior mean close to the design-based estimate, sd close to the standard error
    t = ev.table.sel(rule="0", measure="precision")
    assert draws.mean() == pytest.approx(float(t.estimate), abs=0.01)
    assert draws.std() == pytest.approx(float(t.stderr), rel=0.15)


def test_posterior_tree_shape(world):
    _, s, y, rules, truth = world
    d = bm.design(s, budget=400)
    smp = d.sample(2)
    ev = bm.evaluate(y[smp.indices], rules, smp, draws=500, rng=1)
    post = ev.posterior["posterior"]
    assert set(bm.MEASURES) <= set(post.data_vars)
    assert post["precision"].dims == ("chain", "draw", "rule")
    assert post.sizes["rule"] == rules.shape[0]
    # the posterior covers the truth for most rules (loose: a single sample)
    lo = post["f1"].quantile(0.005, ("chain", "draw")).values
    hi = post["f1"].quantile(0.995, ("chain", "draw")).values
    assert np.mean((lo <= truth[:, 3]) & (truth[:, 3] <= hi)) >= 0.66
    # the sample-only path gives a Dirichlet posterior of the same form
    ev2 = bm.evaluate(y[smp.indices], rules[:, smp.indices], smp, draws=200, rng=1)
    assert ev2.posterior["posterior"]["f1"].shape == (1, 200, rules.shape[0])


@pytest.fixture(scope="module")
def pymc_case():
    sp = make_classification_pool(8000, 0.05, rng=7)
    s = sp.pool.view().prob[:, 1]
    y = sp.labels.astype(np.int8)
    z = special.logit(s)
    rule = ((z + np.random.default_rng(1).normal(0, 1, y.size)) > -1.5).astype(np.int8)
    d = bm.design(s, budget=800, n_strata=3)
    smp = d.sample(3)
    return y[smp.indices], rule, smp


def test_conjugate_vs_pymc_posterior(pymc_case):
    """T5: the Beta-binomial cell model in PyMC reproduces the conjugate NumPy posterior."""
    lab, rule, smp = pymc_case
    kw = {"prior": "jeffreys", "finite_population": False, "rng": 0}
    conj = bm.evaluate(lab, rule, smp, posterior="conjugate", draws=4000, **kw)
    mc = bm.evaluate(
        lab, rule, smp, posterior="pymc", hierarchical=False, draws=300, tune=300, **kw
    )
    assert mc.posterior.attrs["method"] == "pymc"
    assert "sample_stats" in mc.posterior.children
    for m in ("sensitivity", "specificity", "precision"):
        a = conj.posterior["posterior"][m].values.ravel()
        b = mc.posterior["posterior"][m].values.ravel()
        # NUTS draws are autocorrelated: allow ~5 standard errors at an ESS of ~200
        assert b.mean() == pytest.approx(a.mean(), abs=5 * a.std() / np.sqrt(200))
        assert b.std() == pytest.approx(a.std(), rel=0.25)


def test_hierarchical_pymc_posterior(pymc_case):
    """The hierarchical contingency model agrees with the conjugate one
    where cells are well filled, and returns ArviZ-ready diagnostics."""
    lab, rule, smp = pymc_case
    conj = bm.evaluate(lab, rule, smp, draws=4000, rng=0)
    hier = bm.evaluate(lab, rule, smp, posterior="pymc", draws=150, tune=200, rng=0)
    post = hier.posterior["posterior"]
    assert {"gamma", "sigma_s", "theta", "precision"} <= set(post.data_vars)
    for m in ("sensitivity", "precision"):
        a = conj.posterior["posterior"][m].values.ravel()
        b = post[m].values.ravel()
        assert abs(b.mean() - a.mean()) < 1.5 * a.std()
    # the rule is informative: its precision is far above the prevalence (0.05)
    assert float((post["precision"] > 0.1).mean()) > 0.99
    assert "sample_stats" in hier.posterior.children
