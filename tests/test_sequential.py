"""sequential: group-sequential designs and sequential comparisons (Lan-DeMets spending)."""

from __future__ import annotations

import numpy as np
import pytest
from pools import binary_pool, permuted_null

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
