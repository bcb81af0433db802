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
