"""Review fixes of the lazy pool and the draws: distinct draws that could never end, dask beliefs
computed whole for every chunk, beliefs of the wrong length, NaN risks, unreachable items, and
smaller input checks. A hang on the old code fails here under a time limit instead of hanging."""

import signal
from contextlib import contextmanager

import numpy as np
import pytest

import bayes_activeeval as bae
import bayes_activeeval.lazy.chunks as lazy_chunks
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.kernel import check_risk
from bayes_activeeval.lazy import LazyProposal, model_assisted_terms

da = pytest.importorskip("dask.array")

N = 5_000
CHUNK = 1_000


@contextmanager
def time_limit(seconds: float):
    """Raise TimeoutError in the block after ``seconds`` (a hang becomes a failure)."""

    def handler(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a draw that never ends")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def pair(n=N, chunks=CHUNK, weights=None):
    d = make_classification_pool(n, 0.05, separation=3.0, noise=0.4, threshold=0.3, rng=5)
    pool = d.pool
    pred = np.asarray(pool.to_dataset()["prediction"].sel(model=pool.models[0]).values)
    prob = pool.view(pool.models[0]).prob[:, 1]
    kw, mkw = {}, {}
    if weights is not None:
        kw["weights"] = da.from_array(weights, chunks=chunks)
        mkw["weights"] = weights
    lazy = bae.Pool.from_dask(
        da.from_array(pred, chunks=chunks), da.from_array(prob, chunks=chunks), **kw
    )
    mem = bae.Pool(predictions=pred, probs=prob, **mkw)
    return lazy, mem, d.labels


@pytest.fixture(scope="module")
def pools():
    return pair()


# -- 1. distinct draws beyond the items with q > 0 --------------------------------------------------
def test_unique_draw_beyond_support_raises_as_in_memory(pools):
    lazy, mem, _ = pools
    mp = bae.optimal_proposal(mem, "precision", mix=0.0)
    lp = bae.optimal_proposal(lazy, "precision", mix=0.0)
    support = int(np.count_nonzero(mp.q))
    assert support < N  # items with q = 0: predicted negatives carry no precision loss
    msg = f"only {support} items with positive probability"
    with pytest.raises(ValueError, match=msg):
        mp.draw(support + 1, rng=0, unique=True)
    with time_limit(5), pytest.raises(ValueError, match=msg):
        lp.draw(support + 1, rng=0, unique=True)
    assert lp.support == support
    # below the support the lazy draw is still the in-memory one
    a, b = mp.draw(40, rng=3, unique=True), lp.draw(40, rng=3, unique=True)
    np.testing.assert_array_equal(a.indices, b.indices)


def test_support_of_mixed_passive_and_stratified_proposals():
    w = np.ones(3_000)
    w[:700] = 0.0  # items outside the test distribution: q = 0 under q = p
    lazy, mem, _ = pair(3_000, 1_000, weights=w)
    for build in (
        lambda P: bae.passive_proposal(P),
        lambda P: bae.optimal_proposal(P, "f1", mix=0.05),
        lambda P: bae.stratified_proposal(P, "f1", strata=4),
        lambda P: bae.stratified_proposal(P, "f1", strata=4, mix=0.1),
    ):
        mp, lp = build(mem), build(lazy)
        k = int(np.count_nonzero(mp.q))
        with pytest.raises(ValueError, match=f"only {k} items with positive"):
            mp.draw(k + 1, rng=0, unique=True)
        with time_limit(5), pytest.raises(ValueError, match=f"only {k} items with positive"):
            lp.draw(k + 1, rng=0, unique=True)
        assert lp.support == k


# -- 2. a dask belief is cut per chunk, not computed whole for every chunk --------------------------
def test_dask_belief_is_one_block_per_chunk_task(pools, monkeypatch):
    lazy, mem, y = pools
    prob = mem.view(mem.models[0]).prob
    calls = []

    def tag(block, block_info=None):
        calls.append(block_info[0]["chunk-location"][0])
        return block

    bel = da.from_array(prob, chunks=(CHUNK, 2)).map_blocks(tag, dtype=float)
    rows = []
    orig = lazy_chunks.chunk_belief

    def spy(cp, offset, measure, model, belief, floor):
        rows.append(np.shape(belief)[0] if belief is not None else 0)
        return orig(cp, offset, measure, model, belief, floor)

    monkeypatch.setattr(lazy_chunks, "chunk_belief", spy)
    m = lazy.resolve("f1", None)[0]
    R = lazy.intrinsic_risk(m, None, bel, 0.0)
    assert len(calls) <= lazy.n_chunks  # one pass: one block per chunk
    assert rows and max(rows) <= CHUNK
    np.testing.assert_allclose(R, lazy.intrinsic_risk(m, None, prob, 0.0), rtol=1e-14)

    calls.clear()
    rows.clear()
    lp = bae.optimal_proposal(lazy, "f1", belief=bel, belief_floor=1e-6)
    assert len(calls) <= 3 * lazy.n_chunks  # the risk, the mass and the defensive floor pass
    assert max(rows) <= CHUNK
    mp = bae.optimal_proposal(mem, "f1", belief=prob, belief_floor=1e-6)
    np.testing.assert_allclose(lp.q.compute(), mp.q, rtol=1e-12)

    draws = lp.draw(5, rng=1)
    held = np.unique(lazy.chunk_of(draws.indices)).size
    calls.clear()
    est = bae.estimate(lazy, "f1", draws, y[draws.indices], belief=bel, estimator="model_assisted")
    assert len(calls) <= lazy.n_chunks + held  # the M pass, then the drawn rows only
    ref = bae.estimate(mem, "f1", draws, y[draws.indices], belief=prob, estimator="model_assisted")
    assert est.value == pytest.approx(ref.value, rel=1e-10)


def test_chunk_belief_takes_a_block_as_it_is(pools):
    _, mem, _ = pools
    prob = mem.view(mem.models[0]).prob
    cp = bae.Pool(predictions=np.asarray(mem.view(mem.models[0]).pred[:CHUNK]), probs=prob[:CHUNK])
    m = cp.resolve("f1", None)[0]
    block = lazy_chunks.ChunkBlock(prob[2 * CHUNK : 3 * CHUNK])
    b = lazy_chunks.chunk_belief(cp, 2 * CHUNK, m, None, block, 0.0)
    np.testing.assert_array_equal(b.probs, prob[2 * CHUNK : 3 * CHUNK])
    with pytest.raises(ValueError, match="expected 1000 rows"):
        lazy_chunks.chunk_belief(cp, 0, m, None, lazy_chunks.ChunkBlock(prob[:10]), 0.0)


# -- 3. a belief of the wrong length ----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_belief_length_is_checked_up_front(kind):
    lazy, mem, _ = pair(3_000, 1_000)
    prob = mem.view(mem.models[0]).prob
    longer = np.vstack([np.full((10, 2), 0.5), prob])
    bel = longer if kind == "numpy" else da.from_array(longer, chunks=(1_000, 2))
    msg = "belief covers 3010 items but the pool has 3000"
    with pytest.raises(ValueError, match=msg):
        bae.optimal_proposal(mem, "f1", belief=longer)
    with pytest.raises(ValueError, match=msg):
        bae.optimal_proposal(lazy, "f1", belief=bel)
    with pytest.raises(ValueError, match=msg):
        bae.optimal_proposal(lazy, "f1", belief=bel, belief_floor=1e-6)
    m = lazy.resolve("f1", None)[0]
    with pytest.raises(ValueError, match=msg):
        lazy.intrinsic_risk(m, None, bel, 0.0)
    with pytest.raises(ValueError, match=msg):
        bae.stratified_proposal(lazy, "f1", strata=3, allocation="neyman", belief=bel)
    with pytest.raises(ValueError, match=msg):
        model_assisted_terms(lazy, m, None, bel, np.array([0, 5, 2_500]))
    with pytest.raises(ValueError, match="belief covers 2500 items but the pool has 3000"):
        bae.optimal_proposal(lazy, "f1", belief=prob[:2_500])


# -- 4. a NaN risk, NaN chunk masses ----------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_risk_must_be_finite(pools, bad):
    lazy, mem, _ = pools
    msg = f"risk\\[0\\] = {bad}; risk must be finite"
    for P in (mem, lazy):
        with pytest.raises(ValueError, match=msg):
            bae.optimal_proposal(P, "error_rate", risk=[bad])
    with pytest.raises(ValueError, match="risk\\[1\\] = nan"):
        check_risk([0.1, np.nan], bae.measures.get("precision"))


def test_lazy_proposal_checks_its_chunk_masses(pools):
    lazy, _, _ = pools
    good = bae.passive_proposal(lazy)
    for mass, msg in (
        ([np.nan] * lazy.n_chunks, "chunk_mass\\[0\\] = nan"),
        ([0.2, -0.1, 0.3, 0.3, 0.3], "chunk_mass\\[1\\] = -0.1"),
        ([0.0] * lazy.n_chunks, "q has no mass"),
        ([1.0], "chunk_mass has 1 entries"),
    ):
        with pytest.raises(ValueError, match=msg):
            LazyProposal(lazy, "passive", good.qfn, None, np.array(mass))


# -- 5. items with q > 0 that a draw never reaches --------------------------------------------------
@pytest.mark.parametrize("q", [[0.5, 1e-300, 0.5], [1e-300, 0.5, 0.5], [0.5, 0.5, 3e-17]])
def test_unique_draw_of_unreachable_items_raises(q):
    prop = bae.Proposal(np.array(q), np.full(3, 1 / 3), "x")
    with time_limit(3), pytest.raises(ValueError, match="only 2 items can be drawn"):
        prop.draw(3, rng=0, unique=True)
    with time_limit(5):
        got = prop.draw(2, rng=0, unique=True)
    assert np.unique(got.indices).size == 2
    from bayes_activeeval.kernel import drawable

    assert np.count_nonzero(drawable(np.cumsum(prop.q))) == 2


_Q = np.array([0.25, 1e-300, 0.25, 0.25, 0.25, 0.0])


def _fixed_q(cp, offset, prm):
    return _Q[offset : offset + cp.n_items].copy()


def test_lazy_unique_draw_of_unreachable_items_raises():
    pred = np.array([0, 1, 0, 1, 0, 1])
    prob = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7])
    lazy = bae.Pool.from_dask(da.from_array(pred, chunks=3), da.from_array(prob, chunks=3))
    # support unknown (None): the stall check must stop the draw
    prop = LazyProposal(lazy, "x", _fixed_q, None, np.array([0.5, 0.5]))
    with time_limit(5), pytest.raises(ValueError, match="only 4 items can be drawn"):
        prop.draw(5, rng=0, unique=True)
    assert prop.drawable_count() == 4
    mem = bae.Proposal(_Q.copy(), np.full(6, 1 / 6), "x")
    a, b = mem.draw(4, rng=2, unique=True), prop.draw(4, rng=2, unique=True)
    np.testing.assert_array_equal(a.indices, b.indices)
    with pytest.raises(ValueError, match="only 4 items can be drawn"):
        mem.draw(5, rng=0, unique=True)


# -- minor: input checks and the reservoir's top edge -----------------------------------------------
def test_in_memory_weights_refuse_negative_indices(pools):
    _, mem, _ = pools
    prop = bae.passive_proposal(mem)
    with pytest.raises(ValueError, match="item index -1 is outside the pool"):
        prop.weights(np.array([-1]))
    with pytest.raises(ValueError, match=f"item index {N} is outside the pool"):
        prop.weights(np.array([0, N]))
    np.testing.assert_allclose(prop.weights(np.array([0, N - 1])), [1.0, 1.0])


def test_proposal_error_names_the_bad_item():
    with pytest.raises(ValueError, match=r"q\[0\] = -1.0; q must be finite and non-negative"):
        bae.Proposal(np.array([-1.0, 2.0]), np.array([0.5, 0.5]), "x")
    with pytest.raises(ValueError, match=r"q\[1\] = nan"):
        bae.Proposal(np.array([1.0, np.nan]), np.array([0.5, 0.5]), "x")


def test_lazy_stratified_names_bad_strata(pools):
    lazy, _, _ = pools
    with pytest.raises(ValueError, match="strata must be a positive number of strata, got True"):
        bae.stratified_proposal(lazy, "f1", strata=True)
    with pytest.raises(ValueError, match="strata must be a positive number of strata, got 0"):
        bae.stratified_proposal(lazy, "f1", strata=0)
    with pytest.raises(ValueError, match="not a label per item"):
        bae.stratified_proposal(lazy, "f1", strata=np.zeros(N, dtype=int))
    with pytest.raises(ValueError, match="scores=None"):
        bae.stratified_proposal(lazy, "f1", scores=np.zeros(N))


def test_reservoir_target_at_the_top_goes_to_a_positive_mass_item(monkeypatch):
    from bayes_activeeval.adaptive import lazy as adaptive_lazy
    from bayes_activeeval.adaptive.lazy_belief import PluginBelief

    w = np.array([1.0, 2.0, 1.0, 0.0, 0.0])  # the last items are outside p
    cp = bae.Pool(
        predictions=np.array([0, 1, 1, 0, 1]),
        probs=np.array([0.2, 0.8, 0.6, 0.1, 0.9]),
        weights=w,
    )

    class Top:  # a uniform number that rounds the target up to the total
        def random(self, m):
            return np.ones(m)

    monkeypatch.setattr(adaptive_lazy.np.random, "default_rng", lambda seed=None: Top())
    out = adaptive_lazy._reservoir_chunk(
        cp, 0, "f1", None, PluginBelief(tuple(cp.models), 1e-6), {"p": 4}, 0
    )
    idx, _, _, p, _ = out["p"]
    np.testing.assert_array_equal(idx, [2, 2, 2, 2])  # the last item with p > 0
    assert np.all(p > 0)
