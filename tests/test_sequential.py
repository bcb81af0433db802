"""sequential: group-sequential designs and sequential comparisons (Lan-DeMets spending)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pools import binary_pool, overlap_pool, permuted_null

import bayes_activeeval as bae
from bayes_activeeval.sequential import GroupSequentialDesign


@pytest.fixture(scope="module")
def two():
    pool, y = binary_pool()
    return pool, y


# ------------------------------------------------------------------------------------------------
# sequential
# ------------------------------------------------------------------------------------------------
def test_group_sequential_boundaries():
    # Lan-DeMets Pocock-type spending, 5 equally spaced looks, two-sided α = 0.05
    # (reference values of R's ldbounds / gsDesign)
    poc = GroupSequentialDesign((1, 2, 3, 4, 5), 0.05, "pocock").boundaries
    np.testing.assert_allclose(poc, [2.4380, 2.4268, 2.4101, 2.3966, 2.3859], atol=2e-3)
    looks = tuple(range(50, 801, 50))
    rng = np.random.default_rng(0)
    S = np.cumsum(rng.standard_normal((100_000, len(looks))), axis=1)
    Z = S / np.sqrt(np.arange(1, len(looks) + 1))
    for sp in ("obrien-fleming", "pocock"):
        c = GroupSequentialDesign(looks, 0.05, sp).boundaries
        rate = np.mean((np.abs(Z) >= c).any(axis=1))
        assert rate == pytest.approx(0.05, abs=3.5 * np.sqrt(0.05 * 0.95 / 1e5))
    naive = GroupSequentialDesign(looks, 0.05, "naive").boundaries
    assert np.mean((np.abs(Z) >= naive).any(axis=1)) > 0.15
    with pytest.raises(ValueError, match="looks"):
        GroupSequentialDesign((5, 3))
    with pytest.raises(ValueError, match="spending"):
        GroupSequentialDesign((1, 2), spending="haybittle")


def test_sequential_compare_h0_and_h1(two):
    pool, y = two
    prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"))
    null, yy, nprop = permuted_null(pool, y, ("m0", "m1"), prop.q)

    def lab(idx):
        return yy[idx]

    rng = np.random.default_rng(31)
    rej = {"naive": 0, "obrien-fleming": 0}
    for _ in range(120):
        for sp in rej:
            r = bae.sequential_compare(
                null,
                "error_rate",
                lab,
                proposal=nprop,
                max_draws=400,
                batch=40,
                spending=sp,
                rng=rng,
            )
            rej[sp] += r.reject
    assert rej["naive"] > rej["obrien-fleming"]
    assert rej["obrien-fleming"] / 120 < 0.05 + 3.5 * np.sqrt(0.05 * 0.95 / 120)
    # a clear difference stops early
    r = bae.sequential_compare(
        pool, "error_rate", lambda i: y[i], ("m0", "m1"), max_draws=800, batch=50, rng=1
    )
    assert r.reject and r.better == "m0" and r.n_draws < 800
    _, hi = r.confidence_interval()
    assert hi < 0 and "SequentialResult(" in repr(r)
    assert len(r.history) == r.look + 1


def test_repeated_interval_is_dual_to_the_stop_and_warns_for_naive():
    """The RCI excludes 0 exactly when the run rejected — also when it stopped at a look with an
    effective sample size below c_k² (it used to be (-1, 1) there) — and the naive design, whose
    intervals do not cover simultaneously over the looks, says so."""
    pool, y = overlap_pool()
    prop = bae.comparison_proposal(pool, "error_rate")
    rejected = 0
    for r in range(60):
        res = bae.sequential_compare(
            pool, "error_rate", lambda i: y[i], proposal=prop, max_draws=400, batch=50,
            spending="naive", rng=r,
        )  # fmt: skip
        with pytest.warns(UserWarning, match=r"spending='naive'.*coverage over the 8 looks"):
            lo, hi = res.confidence_interval()
        assert res.reject == (not lo <= 0.0 <= hi)
        rejected += res.reject
    assert rejected >= 2  # seeds 43 and 59 stop at the first look with W²/D < z²
    res = bae.sequential_compare(
        pool, "error_rate", lambda i: y[i], proposal=prop, max_draws=400, batch=50,
        spending="pocock", rng=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = res.confidence_interval()
    assert res.reject == (not lo <= 0.0 <= hi)


def test_design_refuses_bad_looks():
    with pytest.raises(ValueError, match=r"looks\[0\] = 10\.7 is not a whole number of draws"):
        GroupSequentialDesign((10.7, 20.9))
    with pytest.raises(TypeError, match=r"looks\[1\] = '20' is not a draw count"):
        GroupSequentialDesign((10, "20"))
    assert GroupSequentialDesign((10.0, np.int64(20))).looks == (10, 20)
    with pytest.raises(ValueError, match=r"strictly increasing positive draw counts"):
        GroupSequentialDesign((10, 10))
    equally = GroupSequentialDesign.equally_spaced
    with pytest.raises(ValueError, match=r"n_looks=10 looks need at least 10 draws.*max_draws=5"):
        equally(5, 10)
    with pytest.raises(ValueError, match=r"from first=18 to max_draws=20 are not distinct"):
        equally(20, 10, first=18)  # used to merge them silently into 3 looks
    with pytest.raises(ValueError, match=r"first=30 is larger than max_draws=20"):
        equally(20, 2, first=30)
    with pytest.raises(ValueError, match=r"n_looks=1.*first=5"):
        equally(20, 1, first=5)
    assert equally(100, 4).looks == (25, 50, 75, 100)
    assert equally(10, 10).looks == tuple(range(1, 11))
    assert equally(20, 1).looks == (20,)


def test_a_degenerate_look_never_stops_the_run():
    """F1 of a perfect model a against a model b with no true positive: every sample holding
    item 0 gives Δ̂ = 1 with a Wald standard error that is zero — exactly (T = inf, the look was
    skipped) or up to rounding (T ~ 1e16, the run stopped). The same evidence decided
    differently by rounding; such a Wald look never stops the run. F1 is now tested with the
    generalized score statistic Σ v ψ / sqrt(Σ v² ψ²), which is at most sqrt(n) (Cauchy-Schwarz):
    its looks are finite, and a run that stops names a, the better model (F1 1 against 0)."""
    from bayes_activeeval.sequential import _informative

    y = np.array([1, 0, 0])
    pool = bae.Pool(
        predictions={"a": np.array([1, 0, 0]), "b": np.array([0, 1, 1])},
        probs={"a": np.array([0.9, 0.2, 0.2]), "b": np.array([0.3, 0.7, 0.7])},
        classes=[0, 1],
    )
    prop = bae.proposals.Proposal(np.array([0.5, 0.3, 0.2]), pool.p, "uneven")
    rounded = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(10):
            d = prop.draw(10, rng=seed)
            wald = bae.compare(pool, "f1", d, y[d.indices], proposal=prop, variance="wald")
            degenerate = not np.isfinite(wald.statistic) or abs(wald.statistic) > 1e12
            rounded += bool(np.isfinite(wald.statistic) and abs(wald.statistic) > 1e12)
            assert not (degenerate and _informative(wald))
            res = bae.sequential_compare(
                pool, "f1", lambda i: y[i], proposal=prop, max_draws=40, batch=10, rng=seed
            )
            h = res.history
            stat = h["statistic"].to_numpy()
            assert np.all(np.isfinite(stat))
            assert np.all(np.abs(stat) <= np.sqrt(h["n_draws"].to_numpy()) + 1e-9)
            assert not res.reject or res.result.estimate > 0
    assert rounded >= 1  # Wald looks with T ~ 1e16 from rounding


def test_sequential_compare_refuses_conflicting_arguments(two):
    pool, y = two

    def lab(i):
        return y[i]

    with pytest.raises(
        ValueError, match=r"batch=50 \(the first look\) is larger than max_draws=30"
    ):
        bae.sequential_compare(pool, "error_rate", lab, max_draws=30, rng=0)
    design = GroupSequentialDesign((50, 100))
    # a design's level and spending used to win silently over alpha= and spending=
    with pytest.raises(ValueError, match=r"alpha=0\.01 differs from design\.alpha=0\.05"):
        bae.sequential_compare(pool, "error_rate", lab, design=design, alpha=0.01, rng=0)
    with pytest.raises(ValueError, match=r"spending='pocock' differs.*'obrien-fleming'"):
        bae.sequential_compare(pool, "error_rate", lab, design=design, spending="pocock", rng=0)
    with pytest.raises(ValueError, match=r"fixes the looks \(50, 100\); max_draws=400 only"):
        bae.sequential_compare(pool, "error_rate", lab, design=design, max_draws=400, rng=0)
    res = bae.sequential_compare(
        pool, "error_rate", lab, design=design, alpha=0.05, spending="obrien-fleming", rng=0
    )
    assert res.design == design
    with pytest.raises(ValueError, match=r"labeler returned a scalar for \d+ items"):
        bae.sequential_compare(pool, "error_rate", lambda i: 1, max_draws=100, rng=0)
