"""Second review of ``bayes_activeeval.benchmark``: input checks, memory, zero-inclusion strata,
the labeled-only posterior warning (Valizadegan et al., Eqs. 3.1-3.3 are the targets)."""

import dataclasses
import tracemalloc
import warnings

import numpy as np
import pytest

from bayes_activeeval import benchmark as bm
from bayes_activeeval.benchmark.cells import pool_output_counts


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(0)
    N = 3000
    g = rng.beta(0.5, 20, N)
    y = (rng.random(N) < g).astype(np.int8)
    d = bm.design(g, budget=200)
    smp = d.sample(rng=1)
    rules = (rng.random((3, N)) < 0.05).astype(np.int8)
    return g, y, d, smp, rules


def _estimates(ev):
    return ev.table["estimate"].values


# --- item 1: a single rule given as a Python list / tuple --------------------------------------
@pytest.mark.parametrize("kind", [list, tuple])
def test_single_rule_as_sequence_is_one_rule(world, kind):
    _, y, _, smp, rules = world
    rule = rules[0]
    lab = y[smp.indices]
    ref = bm.evaluate(lab, rule, smp, posterior=None)
    for r in (rule, rule[smp.indices]):  # on the pool, and on the labeled items
        got = bm.evaluate(lab, kind(r.tolist()), smp, posterior=None)
        assert got.table.sizes["rule"] == 1
    got = bm.evaluate(lab, kind(rule.tolist()), smp, posterior=None)
    np.testing.assert_array_equal(_estimates(got), _estimates(ref))
    pm = bm.population_measures(y, kind(rule.tolist()))
    np.testing.assert_array_equal(pm.values, bm.population_measures(y, rule).values)


# --- item 2: pool_margins checks ----------------------------------------------------------------
def _margins(d, rules):
    return pool_output_counts(rules, d.strata, d.n_strata)[..., 1]


def test_pool_margins_refuses_nan_fraction_and_impossible_counts(world):
    _, y, d, smp, rules = world
    lab, Ps = y[smp.indices], rules[:, smp.indices]
    pm = _margins(d, rules)
    ok = bm.evaluate(lab, Ps, smp, pool_margins=pm, posterior=None)
    full = bm.evaluate(lab, rules, smp, posterior=None)
    np.testing.assert_allclose(_estimates(ok), _estimates(full), equal_nan=True)

    bad = pm.copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match=r"pool_margins\[0, 3\] = nan"):
        bm.evaluate(lab, Ps, smp, pool_margins=bad, posterior=None)
    bad = pm + 0.5
    with pytest.raises(ValueError, match=r"pool_margins\[0, 0\] = .*whole number"):
        bm.evaluate(lab, Ps, smp, pool_margins=bad, posterior=None)
    bad = pm.copy()
    bad[1, 2] = -3
    with pytest.raises(ValueError, match=r"pool_margins\[1, 2\] = -3"):
        bm.evaluate(lab, Ps, smp, pool_margins=bad, posterior=None)

    # below the labeled items the rule calls positive in the stratum
    n_pos = np.array([[Ps[k, smp.strata == h].sum() for h in range(d.n_strata)] for k in range(3)])
    k, h = np.argwhere(n_pos > 0)[0]
    bad = pm.copy()
    bad[k, h] = n_pos[k, h] - 1
    with pytest.raises(ValueError, match=rf"pool_margins\[{k}, {h}\] = {n_pos[k, h] - 1}\b"):
        bm.evaluate(lab, Ps, smp, pool_margins=bad, posterior=None)
    # leaving no room for the labeled items it calls negative
    n_neg = np.array(
        [[(Ps[k, smp.strata == h] == 0).sum() for h in range(d.n_strata)] for k in range(3)]
    )
    bad = pm.copy()
    bad[0, 1] = d.stratum_sizes[1] - n_neg[0, 1] + 1
    with pytest.raises(ValueError, match=r"pool_margins\[0, 1\].*impossible"):
        bm.evaluate(lab, Ps, smp, pool_margins=bad, posterior=None)


def test_pool_margins_with_pool_wide_rules_must_agree(world):
    _, y, d, smp, rules = world
    lab = y[smp.indices]
    pm = _margins(d, rules)
    same = bm.evaluate(lab, rules, smp, pool_margins=pm, posterior=None)
    ref = bm.evaluate(lab, rules, smp, posterior=None)
    np.testing.assert_array_equal(_estimates(same), _estimates(ref))
    bad = pm.copy()
    bad[2, 0] += 1
    with pytest.raises(ValueError, match=r"pool_margins\[2, 0\] = .*contradicts"):
        bm.evaluate(lab, rules, smp, pool_margins=bad, posterior=None)


# --- item 3: pool_output_counts in integers, without a float copy of the rules ------------------
def _cumsum_counts(P, strata, H):
    """The former implementation (float64 cumulative sums), the reference for the new one."""
    sizes = np.bincount(strata, minlength=H)
    order = np.argsort(strata, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    csum = np.concatenate(
        [np.zeros((P.shape[0], 1)), np.cumsum(P[:, order], axis=1, dtype=np.float64)], axis=1
    )
    pos = csum[:, bounds[1:]] - csum[:, bounds[:-1]]
    return np.stack([sizes[None, :] - pos, pos], axis=-1)


def test_pool_output_counts_exact_and_memory_light():
    rng = np.random.default_rng(3)
    N, H = 4000, 6
    strata = rng.integers(0, H - 1, N)  # the last stratum is empty
    P = (rng.random((40, N)) < 0.07).astype(np.int8)
    got = pool_output_counts(P, strata, H)
    np.testing.assert_array_equal(got, _cumsum_counts(P, strata, H))
    assert got.dtype == np.float64 and got.shape == (40, H, 2)

    # memory: the former version held a float64 (rules, N + 1) block, 8 K N bytes; the
    # integer per-stratum sums need one small block of gathered int8 outputs
    K, N = 100, 200_000
    P = (rng.random((K, N)) < 0.05).astype(np.int8)
    strata = rng.integers(0, 8, N)
    tracemalloc.start()
    try:
        out = pool_output_counts(P, strata, 8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < K * N  # one eighth of the 8 K N bytes of a float64 copy
    np.testing.assert_array_equal(out[..., 1].sum(-1), P.sum(axis=1))


# --- item 4: no stratum without labels under stratified sampling --------------------------------
def test_stratified_design_refuses_min_per_stratum_zero(world):
    g = world[0]
    with pytest.raises(ValueError, match=r"min_per_stratum must be >= 1.*got 0"):
        bm.design(g, budget=300, method="paper", defensive=0.0, min_per_stratum=0)
    # Poisson inclusion probabilities stay above 0 with a zero floor: still allowed
    dp = bm.design(g, budget=300, scheme="poisson", min_per_stratum=0)
    assert dp.inclusion.min() > 0
    # the paper's allocation with a floor of 1 labels every stratum
    d1 = bm.design(g, budget=300, method="paper", defensive=0.0, min_per_stratum=1)
    assert np.all(d1.allocation >= 1)


def test_lazy_design_refuses_min_per_stratum_zero():
    da = pytest.importorskip("dask.array")
    import bayes_activeeval as bae

    rng = np.random.default_rng(2)
    p = 1 / (1 + np.exp(-rng.normal(-4.0, 1.5, 4000)))
    lazy = bae.Pool.from_dask(
        da.from_array((p > 0.3).astype(np.int64), chunks=2000), da.from_array(p, chunks=2000)
    )
    with pytest.raises(ValueError, match=r"min_per_stratum must be >= 1"):
        bm.design(lazy, budget=200, min_per_stratum=0)


def test_evaluate_refuses_unsampled_stratum_and_warns_on_unlabeled(world):
    _, y, d, smp, rules = world
    # a stratified design that never samples stratum 0 (as min_per_stratum=0 used to make)
    alloc = d.allocation.copy()
    alloc[1] += alloc[0]
    alloc[0] = 0
    incl = (alloc / d.stratum_sizes)[d.strata]
    d0 = dataclasses.replace(d, allocation=alloc, inclusion=incl)
    s0 = d0.sample(rng=2)
    with pytest.raises(ValueError, match=r"stratum 0 .*allocation\[0\] = 0"):
        bm.evaluate(y[s0.indices], rules, s0, posterior=None)
    # a sampled stratum without any label in the labels given: warned, not silent
    keep = smp.indices[smp.strata != 0]
    with pytest.warns(UserWarning, match=r"strata \[0\].*no labeled item"):
        bm.evaluate(y[keep], rules, d, indices=keep, posterior=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        bm.evaluate(y[smp.indices], rules, smp, posterior=None)


# --- item 5: the labeled-only (Dirichlet) posterior warns ---------------------------------------
def test_labeled_only_posterior_warns(world):
    _, y, d, smp, rules = world
    lab, Ps = y[smp.indices], rules[:, smp.indices]
    with pytest.warns(UserWarning, match=r"under-covers.*pool_margins"):
        bm.evaluate(lab, Ps, smp, draws=20, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        bm.evaluate(lab, Ps, smp, pool_margins=_margins(d, rules), draws=20, rng=0)
        bm.evaluate(lab, rules, smp, draws=20, rng=0)


# --- item 6: the design owns read-only copies of its arrays -------------------------------------
def test_design_copies_guess_and_is_read_only():
    rng = np.random.default_rng(0)
    g = rng.beta(0.5, 20, 5000)
    d = bm.design(g, budget=200)
    before = d.summary().copy()
    ratio = d.predicted_variance_ratio()
    assert not np.shares_memory(d.guess, g)
    g *= 0.1  # the caller re-uses its buffer
    assert d.summary().equals(before)
    assert d.predicted_variance_ratio() == ratio
    for name in ("strata", "inclusion", "allocation", "stratum_sizes", "guess"):
        arr = getattr(d, name)
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 0


# --- item 7: an impossible hard guess -----------------------------------------------------------
def test_hard_guess_with_impossible_precision_is_refused():
    N = 5000
    hard = (np.arange(N) < 1000).astype(float)  # 1,000 guessed positives
    with pytest.raises(ValueError, match=r"guess_precision=0\.9 and prevalence=0\.01"):
        bm.design(hard, budget=100, prevalence=0.01, guess_precision=0.9)
    # 1,000 x 0.05 = 50 = 0.01 x 5,000: possible (recall 1)
    d = bm.design(hard, budget=100, prevalence=0.01, guess_precision=0.05)
    assert d.summary()["mean_guess"].min() == 0.0


# --- item 8: saturation_budget checks its rate --------------------------------------------------
@pytest.mark.parametrize("p", [np.nan, -1.0, 2.0])
def test_saturation_budget_checks_unlabeled_rate(p):
    with pytest.raises(ValueError, match="unlabeled_rate must be in"):
        bm.saturation_budget(0.01, 1000, p)


# --- item 9: empty sample repr, chains --------------------------------------------------------
def test_empty_sample_repr():
    rng = np.random.default_rng(0)
    d = bm.design(rng.beta(0.5, 20, 1000), budget=2, scheme="poisson", min_per_stratum=1)
    s = d.sample_at(np.array([], dtype=np.int64))
    assert repr(s) == "BenchmarkSample(0 items to label, scheme='poisson')"


@pytest.mark.parametrize(("chains", "exc"), [(-1, ValueError), (0, ValueError), (1.5, TypeError)])
def test_chains_checked(world, chains, exc):
    _, y, _, smp, rules = world
    with pytest.raises(exc, match="chains"):
        bm.evaluate(y[smp.indices], rules, smp, chains=chains, draws=10)


def test_a_stratified_design_with_zero_target_strata_fills_the_budget():
    """Session 31 review: with a 0/1 guess and no defensive share, the strata with a positive
    target could not hold the budget and the allocation failed inside brentq ("f(a) and f(b)
    must have different signs"); the strata with no target now take the rest."""
    guess = np.r_[np.ones(100), np.zeros(900)]
    for budget, want in ((100, [2, 98]), (150, [50, 100]), (1000, [900, 100])):
        d = bm.design(guess, budget=budget, prevalence=0.05, guess_precision=0.5, defensive=0.0)
        assert d.allocation.tolist() == want and d.allocation.sum() == budget
    d = bm.design(np.r_[np.zeros(900), np.full(100, 0.5)], budget=500, defensive=0.0)
    assert d.allocation.sum() == 500 and np.all(d.allocation <= [900, 100])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda bm, g: bm.design(g, budget=200, prevalence=[0.1, 0.2]), "prevalence must be one"),
        (lambda bm, g: bm.design(g, budget=200, rule_rate=[0.1, 0.2]), "rule_rate must be one"),
        (lambda bm, g: bm.design(g, budget=200, targets={"precision": "x"}), "weight of"),
        (lambda bm, g: bm.minority_share(0.1, {"precision": None}), "weight of"),
        (lambda bm, g: bm.positives_needed(0.1, 100, 10, "x"), "unlabeled_rate"),
        (lambda bm, g: bm.error_bound("precision", 0.1, 0.1, "x", 100, 10), "unlabeled_rate"),
    ],
)
def test_bad_benchmark_arguments_are_named(call, match):
    g = np.random.default_rng(0).beta(0.3, 10, 2000)
    with pytest.raises((ValueError, TypeError), match=match):
        call(bm, g)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"smoothing": "x"}, "smoothing must be a number"),
        ({"smoothing": None}, "smoothing must be a number"),
        ({"prior_strength": "x"}, "prior_strength must be a number"),
        ({"prior": (np.inf, 1)}, "positive and finite"),
    ],
)
def test_bad_evaluate_arguments_are_named(kw, match):
    rng = np.random.default_rng(0)
    g = rng.beta(0.3, 10, 2000)
    y = (rng.random(2000) < g).astype(int)
    s = bm.design(g, budget=200).sample(rng=0)
    with pytest.raises(ValueError, match=match):
        bm.evaluate(y[s.indices], (g > 0.05).astype(int), s, **kw)
