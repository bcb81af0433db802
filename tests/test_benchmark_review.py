"""Review of ``bayes_activeeval.benchmark``: planning, variance floor, priors, lazy designs, census.

Each test failed on the code before the review; the Monte Carlo ones use tolerances of several
Monte Carlo standard errors.
"""

import numpy as np
import pytest
from scipy import special

from bayes_activeeval import benchmark as bm
from bayes_activeeval.benchmark.cells import pool_output_counts

TARGETS = ("sensitivity", "specificity", "precision")


def _margins(rules, d):
    """Pool counts of rule positives per stratum: lets evaluate post-stratify from the labeled
    items' outputs alone (fast repeated sampling)."""
    return pool_output_counts(rules, d.strata, d.n_strata)[..., 1]


@pytest.fixture(scope="module")
def calibrated():
    """A pool of 20,000 items whose labels are drawn from the guess itself (a calibrated guess)."""
    rng = np.random.default_rng(11)
    s = special.expit(rng.normal(-5.0, 1.8, 20_000))
    y = (rng.random(s.size) < s).astype(np.int8)
    return s, y


def test_influence_is_the_label_variance_times_a_target_coefficient():
    # post-stratified on the rule output, a random rule adds no noise of its own: every target's
    # influence is c_t (s(1-s) + (s - centre)^2), whose stratum sum is c_t N_h sbar(1 - sbar)
    from bayes_activeeval.benchmark.design import influence_coefficient, target_influence

    s = np.array([0.0, 0.01, 0.2, 0.7])
    pi, rbar = 0.05, 0.03
    c = {
        "sensitivity": rbar * (1 - rbar) / pi**2,
        "specificity": rbar * (1 - rbar) / (1 - pi) ** 2,
        "precision": 1 / rbar,
    }
    sb = s.mean()
    for t in TARGETS:
        assert influence_coefficient(t, pi, rbar) == pytest.approx(c[t], rel=1e-14)
        a = target_influence(t, s, pi, rbar, center=sb)
        assert a.sum() == pytest.approx(c[t] * s.size * sb * (1 - sb), rel=1e-12)
        np.testing.assert_allclose(target_influence(t, s, pi, rbar), c[t] * s * (1 - s))


def test_targets_ask_for_the_same_sqrt_allocation(calibrated):
    s, _ = calibrated
    d = bm.design(s, budget=500)
    ratio = d.predicted_variance_ratio()
    assert max(ratio.values()) - min(ratio.values()) < 1e-12
    for tg in ("specificity", {"sensitivity": 1, "specificity": 3, "precision": 1}):
        np.testing.assert_array_equal(bm.design(s, budget=500, targets=tg).allocation, d.allocation)
    # a perfect hard guess claims to know every label: proportional, not NaN
    hard = bm.design((s > 0.5).astype(float), budget=200, prevalence=float((s > 0.5).mean()),
                     guess_precision=1.0)  # fmt: skip
    assert hard.allocation.sum() == 200 and np.all(np.isfinite(hard.inclusion))


def test_predicted_variance_ratio_matches_repeated_sampling(calibrated):
    # random rules at the prevalence; MSE of the default design / MSE of simple random sampling
    # (one stratum) over repeated samples, against BenchmarkDesign.predicted_variance_ratio
    s, y = calibrated
    rng = np.random.default_rng(5)
    K, reps = 20, 150
    rules = (rng.random((K, s.size)) < y.mean()).astype(np.int8)
    truth = bm.population_measures(y, rules).values[:, :3]
    d = bm.design(s, budget=500)
    srs = bm.design(s, budget=500, n_strata=1)
    sq = {}
    for name, dd in (("sqrt", d), ("srs", srs)):
        e = np.empty((reps, 3))
        pm = _margins(rules, dd)
        for i in range(reps):
            smp = dd.sample(rng)
            est = bm.evaluate(
                y[smp.indices], rules[:, smp.indices], smp, pool_margins=pm,
                posterior=None, bias_correction=False,
            )  # fmt: skip
            e[i] = np.nanmean((est.table["estimate"].values[:, :3] - truth) ** 2, axis=0)
        sq[name] = e
    pred = d.predicted_variance_ratio()
    for j, t in enumerate(TARGETS):
        a, b = sq["sqrt"][:, j], sq["srs"][:, j]
        mc = a.mean() / b.mean()
        # Monte Carlo standard error of the log ratio of two independent means
        se = np.sqrt(a.var() / a.mean() ** 2 / reps + b.var() / b.mean() ** 2 / reps)
        # the prediction ignores finite-population corrections (the top stratum's f_h ~ 0.1)
        assert abs(np.log(mc / pred[t])) < 3 * se + 0.15, (t, mc, pred[t], se)


def test_overconfident_guess_keeps_interval_coverage():
    # a stratum whose labels are all 0 must still add variance: with an over-confident guess
    # (logit doubled) the sparse low strata hold the missed positives; the Hajek stratum rate
    # 0 as smoothing target made those strata add none (Wilson coverage of accuracy ~0.83)
    rng = np.random.default_rng(1)
    N = 20_000
    truth_p = special.expit(rng.normal(-5.0, 1.8, N))
    y = (rng.random(N) < truth_p).astype(np.int8)
    guess = special.expit(2.0 * special.logit(truth_p))
    K, reps = 30, 160
    rules = (rng.random((K, N)) < rng.uniform(0.005, 0.1, (K, 1))).astype(np.int8)
    truth = bm.population_measures(y, rules).values
    d = bm.design(guess, budget=500)
    cover = np.zeros((K, 5))
    pm = _margins(rules, d)
    for _ in range(reps):
        smp = d.sample(rng)
        t = bm.evaluate(
            y[smp.indices], rules[:, smp.indices], smp, pool_margins=pm, posterior=None
        ).table
        cover += (t["wilson_low"].values <= truth) & (truth <= t["wilson_high"].values)
    cover /= reps
    acc = cover[:, 4].mean()
    # Monte Carlo error of a rule-averaged coverage: < 0.015 (0.95 x 0.05 / 160 per rule)
    assert acc > 0.90, cover.mean(0)
    assert cover[:, :3].mean() > 0.90, cover.mean(0)


def test_variance_floor_keeps_calibrated_intervals_reasonable(calibrated):
    # one pseudo-label at the pooled rate: strata with labels barely change
    s, y = calibrated
    rng = np.random.default_rng(3)
    rules = (rng.random((5, s.size)) < 0.03).astype(np.int8)
    d = bm.design(s, budget=500)
    smp = d.sample(4)
    t0 = bm.evaluate(y[smp.indices], rules, smp, posterior=None, smoothing=0.0).table
    t2 = bm.evaluate(y[smp.indices], rules, smp, posterior=None).table
    ratio = (t2["stderr"] / t0["stderr"]).values[:, :3]
    assert np.all(ratio < 2.0)


def test_labels_only_posterior_uses_both_prior_pseudo_counts():
    rng = np.random.default_rng(0)
    N = 5_000
    s = rng.beta(0.5, 20, N)
    y = (rng.random(N) < s).astype(np.int8)
    rule = (rng.random(N) < 0.05).astype(np.int8)
    smp = bm.design(s, budget=200).sample(1)
    means = {}
    for pr in [(1, 1), (1, 1000), (1000, 1)]:
        ev = bm.evaluate(y[smp.indices], rule[smp.indices], smp, prior=pr, rng=0, draws=2000)
        post = ev.posterior["posterior"]
        means[pr] = float(post["precision"].mean())
        assert ev.posterior.attrs["model"].startswith("Dirichlet")
    # b0 counts label-0 pseudo-items: (1, 1000) pulls every positive rate to ~0, (1000, 1) to ~1
    assert means[(1, 1000)] < 0.01 < means[(1, 1)] < 0.99 < means[(1000, 1)]


def test_evaluate_accepts_a_lazy_design_with_indices():
    da = pytest.importorskip("dask.array")
    import bayes_activeeval as bae

    rng = np.random.default_rng(2)
    N = 6_000
    p = special.expit(rng.normal(-4.0, 1.5, N))
    y = (rng.random(N) < p).astype(np.int8)
    pred = (p > 0.3).astype(np.int64)
    lazy = bae.Pool.from_dask(da.from_array(pred, chunks=2_000), da.from_array(p, chunks=2_000))
    ld = bm.design(lazy, budget=200)
    smp = ld.sample(rng=0)
    rule = (rng.random(N) < 0.04).astype(np.int8)
    via_sample = bm.evaluate(y[smp.indices], rule, smp, posterior=None)
    via_design = bm.evaluate(y[smp.indices], rule, ld, indices=smp.indices, posterior=None)
    assert via_design.table.identical(via_sample.table)
    with pytest.raises(TypeError, match="design must be"):
        bm.evaluate(y[:10], rule, object(), indices=np.arange(10))


@pytest.mark.parametrize("scheme", ["stratified", "poisson"])
@pytest.mark.parametrize("on_pool", [True, False])
def test_census_gives_point_intervals(scheme, on_pool):
    rng = np.random.default_rng(0)
    N = 300
    s = np.clip(rng.beta(0.5, 20, N), 0, 1)
    y = (rng.random(N) < s).astype(np.int8)
    y[:3] = 1
    rule = (rng.random(N) < 0.1).astype(np.int8)
    rule[:2] = 1
    d = bm.design(s, budget=N, scheme=scheme)
    smp = d.sample(0)
    assert len(smp) == N
    rules = rule if on_pool else rule[smp.indices]
    ev = bm.evaluate(y[smp.indices], rules, smp, posterior=None)
    truth = bm.population_measures(y, rule).values
    t = ev.table
    np.testing.assert_allclose(t["estimate"].values, truth, atol=1e-12)
    for m in ("wald", "t", "wilson"):
        np.testing.assert_allclose(t[f"{m}_low"].values, truth, atol=1e-12)
        np.testing.assert_allclose(t[f"{m}_high"].values, truth, atol=1e-12)
        lo, hi = ev.confidence_interval(0.9, method=m)
        np.testing.assert_allclose(lo.values, truth, atol=1e-12)
        np.testing.assert_allclose(hi.values, truth, atol=1e-12)


def test_a_poisson_sample_holding_every_item_is_not_a_census():
    """Under Poisson sampling with inclusion probabilities below 1 the labels are weighted by
    1/pi_i, so a sample that happens to hold every item is not exact: its intervals keep their
    width (they collapsed to the point, 0.3754 for a truth of 0.3704)."""
    rng = np.random.default_rng(0)
    N = 400
    y = (rng.random(N) < 0.2).astype(int)
    s = np.clip(0.2 + 0.5 * (y - 0.2) + 0.1 * rng.standard_normal(N), 0.01, 0.99)
    rules = np.stack([(rng.random(N) < 0.3).astype(int), np.where(rng.random(N) < 0.8, y, 1 - y)])
    d = bm.design(guess=s, budget=200, scheme="poisson", prevalence=0.2)
    assert d.inclusion.max() < 1
    ev = bm.evaluate(y, rules, d, indices=np.arange(N), posterior=None)
    ci = ev.confidence_interval()
    width = (ci.high - ci.low).sel(measure="sensitivity").to_numpy()
    assert np.all(width > 1e-3)
    truth = [(r[y == 1] == 1).mean() for r in rules]
    lo = ci.low.sel(measure="sensitivity").to_numpy()
    hi = ci.high.sel(measure="sensitivity").to_numpy()
    assert np.all((lo <= truth) & (np.asarray(truth) <= hi))
