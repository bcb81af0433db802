"""The lazy (dask-backed) pool gives the in-memory results: q to 1e-12 relative, the same draws from
the same rng, identical estimates from the same draws; on a LocalCluster too."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool, make_regression_pool
from bayes_activeeval.lazy import LazyPool, LazyProposal

da = pytest.importorskip("dask.array")

N = 30_000
CHUNK = 4_096  # several chunks, the last one short


@pytest.fixture(scope="module")
def two_model():
    return make_classification_pool(
        N, 0.02, separation=4.0, noise=0.4, threshold=0.3, n_models=2, rng=5
    )


@pytest.fixture(scope="module")
def frame(two_model):
    pool = two_model.pool
    ds = pool.to_dataset()
    return pd.DataFrame(
        {
            "pred_a": ds["prediction"].sel(model="m0").values,
            "pred_b": ds["prediction"].sel(model="m1").values,
            "p_a": pool.view("m0").prob[:, 1],
            "p_b": pool.view("m1").prob[:, 1],
            "score_a": pool.scores["m0"],
            "cost": 1.0 + (np.arange(N) % 7),
            "w": 0.5 + (np.arange(N) % 3),
        }
    )


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory, frame):
    path = tmp_path_factory.mktemp("lazy") / "pool.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=CHUNK)
    return path


def lazy_pair(parquet_path, frame, **kw):
    lazy = bae.Pool.from_parquet(
        parquet_path,
        predictions={"a": "pred_a", "b": "pred_b"},
        probs={"a": "p_a", "b": "p_b"},
        chunk_size=CHUNK,
        **kw,
    )
    mem = bae.Pool(
        predictions={"a": frame["pred_a"].to_numpy(), "b": frame["pred_b"].to_numpy()},
        probs={"a": frame["p_a"].to_numpy(), "b": frame["p_b"].to_numpy()},
        costs=frame["cost"].to_numpy() if "costs" in kw else None,
        weights=frame["w"].to_numpy() if "weights" in kw else None,
    )
    return lazy, mem


def lock_step(ev_l, ev_m, labels, stages=3, n=40):
    """Run a lazy and an in-memory evaluator side by side: the same queries, and the same
    proposal after every update."""
    for _ in range(stages):
        il, im = ev_l.query(n), ev_m.query(n)
        np.testing.assert_array_equal(il, im)
        ev_l.update(il, labels[il])
        ev_m.update(im, labels[im])
        assert rel(ev_l.proposal.q.compute(), ev_m.proposal.q) < 1e-10


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def test_from_parquet_reads_metadata_only(parquet_path, frame):
    lazy, mem = lazy_pair(parquet_path, frame)
    assert isinstance(lazy, LazyPool) and isinstance(lazy, bae.Pool)
    assert lazy.n_items == N and len(lazy) == N
    assert lazy.n_chunks == -(-N // CHUNK)
    assert lazy.task == "binary" and list(lazy.classes) == [0, 1] and lazy.pos == 1
    assert lazy.models == ("a", "b")
    ds = lazy.to_dataset()
    assert ds["prediction"].chunks is not None  # dask-backed, nothing loaded
    np.testing.assert_array_equal(
        ds["prediction"].sel(model="a").values, mem.to_dataset()["prediction"].sel(model="a")
    )


@pytest.mark.parametrize(
    "measure, model, kw",
    [
        ("f1", "a", {}),
        ("error_rate", "b", {}),
        ("recall", "a", {"costs": "cost"}),
        ("precision", "a", {"weights": "w"}),
        (bae.difference("f1", "a", "b"), None, {}),
        ("brier", "a", {}),  # not tabular: the generic per-chunk path
    ],
)
def test_optimal_proposal_matches_in_memory(parquet_path, frame, measure, model, kw):
    lazy, mem = lazy_pair(parquet_path, frame, **kw)
    lp = bae.optimal_proposal(lazy, measure, model=model)  # belief_floor="auto": the scaled floor
    mp = bae.optimal_proposal(mem, measure, model=model)
    assert isinstance(lp, LazyProposal) and lp.kind == "optimal"
    assert lp.info["belief_floor"] == pytest.approx(mp.info["belief_floor"], rel=1e-12)
    assert rel(lp.q.compute(), mp.q) < 1e-12
    fixed = bae.optimal_proposal(lazy, measure, model=model, belief_floor=1e-6)
    ref = bae.optimal_proposal(mem, measure, model=model, belief_floor=1e-6)
    assert rel(fixed.q.compute(), ref.q) < 1e-12
    assert rel(lp.info["risk"], mp.info["risk"]) < 1e-12
    np.testing.assert_allclose(lp.chunk_mass.sum(), 1.0, rtol=1e-12)
    # the same rng gives the same items; weights and q agree to rounding
    ld = lp.draw(2_000, rng=7)
    md = mp.draw(2_000, rng=7)
    np.testing.assert_array_equal(ld.indices, md.indices)
    assert rel(ld.weights, md.weights) < 1e-12
    assert rel(lp.predicted_variance(), mp.predicted_variance()) < 1e-10
    if "costs" in kw:
        assert rel(lp.expected_cost(), mp.expected_cost(mem.costs)) < 1e-12


@pytest.mark.parametrize("mix", [0.0, 0.05])
def test_defensive_floor_matches_in_memory(parquet_path, frame, mix):
    lazy, mem = lazy_pair(parquet_path, frame)
    lp = bae.optimal_proposal(lazy, "f1", model="a", mix=mix, defensive_floor=0.5)
    mp = bae.optimal_proposal(mem, "f1", model="a", mix=mix, defensive_floor=0.5)
    assert lp.info["defensive_floor"] == mp.info["defensive_floor"] == 0.5
    assert rel(lp.q.compute(), mp.q) < 1e-12
    raw = bae.optimal_proposal(mem, "f1", model="a", mix=mix).q
    assert np.maximum(raw, 0.5 * mem.p).sum() > 1.01  # the floor acts on this pool
    np.testing.assert_allclose(lp.chunk_mass.sum(), 1.0, rtol=1e-12)
    ld, md = lp.draw(2_000, rng=7), mp.draw(2_000, rng=7)
    np.testing.assert_array_equal(ld.indices, md.indices)
    assert rel(ld.weights, md.weights) < 1e-12


def test_estimates_identical_from_the_same_draws(parquet_path, frame, two_model):
    lazy, mem = lazy_pair(parquet_path, frame)
    draws = bae.optimal_proposal(mem, "f1", model="a").draw(1_500, rng=3)
    labels = two_model.labels[draws.indices]
    for kw in ({}, {"bias_correction": True}, {"estimator": "model_assisted"}):
        le = bae.estimate(lazy, "f1", draws, labels, model="a", **kw)
        me = bae.estimate(mem, "f1", draws, labels, model="a", **kw)
        if kw.get("estimator") == "model_assisted":  # M is a sum over chunks: rounding only
            np.testing.assert_allclose(le.values, me.values, rtol=1e-12)
            np.testing.assert_allclose(le.cov, me.cov, rtol=1e-10)
        else:
            np.testing.assert_array_equal(le.values, me.values)
            np.testing.assert_array_equal(le.cov, me.cov)
    lc = bae.compare(lazy, "error_rate", draws, labels, models=("a", "b"))
    mc = bae.compare(mem, "error_rate", draws, labels, models=("a", "b"))
    assert lc.estimate == pytest.approx(mc.estimate, rel=1e-12)  # P(D): a sum per chunk
    assert lc.pvalue == mc.pvalue


def test_unique_draws_and_passive(parquet_path, frame):
    lazy, mem = lazy_pair(parquet_path, frame, weights="w")
    lp = bae.optimal_proposal(lazy, "f1", model="a")
    mp = bae.optimal_proposal(mem, "f1", model="a")
    ld, md = lp.draw(300, rng=11, unique=True), mp.draw(300, rng=11, unique=True)
    np.testing.assert_array_equal(ld.indices, md.indices)
    assert ld.n_distinct == 300
    lpas, mpas = bae.passive_proposal(lazy), bae.passive_proposal(mem)
    assert rel(lpas.q.compute(), mpas.q) < 1e-12
    np.testing.assert_array_equal(lpas.draw(500, rng=1).indices, mpas.draw(500, rng=1).indices)
    np.testing.assert_allclose(lp.weights(md.indices[:50]), mp.weights(md.indices[:50]), rtol=1e-12)


def test_from_dask_zarr_and_dataframe_agree(tmp_path, frame):
    import dask.dataframe as dd
    import zarr

    pa_, pb_ = frame["p_a"].to_numpy(), frame["pred_a"].to_numpy()
    ref = bae.optimal_proposal(bae.Pool(predictions=pb_, probs=pa_), "f1")
    via_dask = bae.Pool.from_dask(
        da.from_array(pb_, chunks=5_000), da.from_array(pa_, chunks=3_000)
    )
    assert via_dask.n_chunks == 6
    group = zarr.open_group(str(tmp_path / "pool.zarr"), mode="w")
    group.create_array("pred", data=pb_, chunks=(2_000,))
    group.create_array("p", data=pa_, chunks=(2_000,))
    via_zarr = bae.Pool.from_zarr(str(tmp_path / "pool.zarr"), chunk_size=8_000)
    via_frame = bae.Pool.from_dask_dataframe(
        dd.from_pandas(frame.rename(columns={"pred_a": "pred", "p_a": "p"}), npartitions=4)
    )
    for lazy in (via_dask, via_zarr, via_frame):
        q = bae.optimal_proposal(lazy, "f1").q.compute()
        assert rel(q, ref.q) < 1e-12


def test_regression_and_multiclass(tmp_path):
    sp = make_regression_pool(5_000, rng=2)
    v = sp.pool.view()
    lazy = bae.Pool.from_dask(
        da.from_array(v.pred, chunks=1_500), predictive_std=da.from_array(v.std, chunks=1_500)
    )
    assert lazy.task == "regression"
    assert (
        rel(bae.optimal_proposal(lazy, "mse").q.compute(), bae.optimal_proposal(sp.pool, "mse").q)
        < 1e-12
    )
    rng = np.random.default_rng(0)
    probs = rng.dirichlet([1, 1, 1], 5_000)
    pred = np.array(["x", "y", "z"])[probs.argmax(1)]
    mem = bae.Pool(predictions=pred, probs=probs)
    path = tmp_path / "mc.parquet"
    pq.write_table(
        pa.table({"pred": pred, "p0": probs[:, 0], "p1": probs[:, 1], "p2": probs[:, 2]}),
        path,
        row_group_size=1_000,
    )
    lazy = bae.Pool.from_parquet(path, probs=["p0", "p1", "p2"], chunk_size=2_000)
    assert list(lazy.classes) == ["x", "y", "z"]
    lq = bae.optimal_proposal(lazy, "accuracy").q.compute()
    assert rel(lq, bae.optimal_proposal(mem, "accuracy").q) < 1e-12


def test_task_is_read_from_every_chunk_as_in_memory():
    # regression predictions whose first chunk happens to hold whole numbers only: the lazy pool
    # took them for classes, the in-memory pool (which reads all of them) for regression
    pred = np.r_[np.arange(1_000.0) % 7, np.linspace(0.5, 9.5, 4_000)]
    mem = bae.Pool(predictions=pred)
    lazy = bae.Pool.from_dask(da.from_array(pred, chunks=1_000))
    assert mem.task == lazy.task == "regression"
    whole = np.arange(5_000.0) % 3  # whole numbers everywhere: classes 0, 1, 2 in both
    lazy_whole = bae.Pool.from_dask(da.from_array(whole, chunks=1_000))
    assert lazy_whole.task == bae.Pool(predictions=whole).task == "multiclass"


def test_bad_input_names_the_item(tmp_path):
    path = tmp_path / "bad.parquet"
    p = np.full(3_000, 0.2)
    p[2_345] = 1.5
    pq.write_table(pa.table({"pred": np.zeros(3_000, np.int8), "p": p}), path, row_group_size=1_000)
    lazy = bae.Pool.from_parquet(path, classes=[0, 1], chunk_size=1_000)
    with pytest.raises(ValueError, match=r"items 2000\.\.2999"):
        bae.optimal_proposal(lazy, "error_rate")
    with pytest.raises(ValueError, match="no column 'q'"):
        bae.Pool.from_parquet(path, probs="q")
    with pytest.raises(ValueError, match="outside the pool"):
        lazy.take([3_000])


def test_local_cluster(parquet_path, frame, two_model):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        lazy, mem = lazy_pair(parquet_path, frame, client=client)
        lp = bae.optimal_proposal(lazy, "f1", model="a")
        mp = bae.optimal_proposal(mem, "f1", model="a")
        assert rel(lp.q.compute(), mp.q) < 1e-12
        draws = lp.draw(1_000, rng=4)
        np.testing.assert_array_equal(draws.indices, mp.draw(1_000, rng=4).indices)
        labels = two_model.labels[draws.indices]
        le = bae.estimate(lazy, "f1", draws, labels, model="a")
        me = bae.estimate(mem, "f1", draws, labels, model="a")
        np.testing.assert_array_equal(le.values, me.values)
        # the ambient client is used when none is passed
        ambient, _ = lazy_pair(parquet_path, frame)
        assert rel(bae.optimal_proposal(ambient, "f1", model="a").q.compute(), mp.q) < 1e-12
        assert sum(client.run(lambda: 1).values()) == 2  # two workers


@pytest.mark.parametrize(
    "measure, kw, pool_kw",
    [
        ("f1", {"model": "a"}, {}),
        ("recall", {"model": "b", "mix": 0.1, "epsilon": 0.0}, {"weights": "w"}),
        ("precision", {"model": "a"}, {"costs": "cost"}),
        (bae.difference("f1", "a", "b"), {}, {}),
    ],
)
def test_active_evaluator_matches_in_memory(parquet_path, frame, two_model, measure, kw, pool_kw):
    from bayes_activeeval.adaptive.lazy import LazyActiveEvaluator

    lazy, mem = lazy_pair(parquet_path, frame, **pool_kw)
    ev_l = bae.ActiveEvaluator(lazy, measure, oracle="model", rng=0, draws="exact", **kw)
    ev_m = bae.ActiveEvaluator(mem, measure, oracle="model", rng=0, estimator="ipw", **kw)
    assert isinstance(ev_l, LazyActiveEvaluator)
    labels = two_model.labels
    assert ev_l.available() == ev_m.available()
    for _ in range(3):
        il, im = ev_l.query(40), ev_m.query(40)
        np.testing.assert_array_equal(il, im)
        ev_l.update(il, labels[il])
        ev_m.update(im, labels[im])
        assert ev_l.available() == ev_m.available()
    assert rel(ev_l.proposal.q.compute(), ev_m.proposal.q) < 1e-12
    budget = ev_m.cost + (120.0 if "costs" in pool_kw else 60)
    el = ev_l.run(lambda i: labels[i], budget=budget, progress=False)
    em = ev_m.run(lambda i: labels[i], budget=budget, progress=False)
    np.testing.assert_array_equal(ev_l.draws()["item"], ev_m.draws()["item"])
    np.testing.assert_allclose(el.values, em.values, rtol=1e-12)
    np.testing.assert_allclose(el.cov, em.cov, rtol=1e-10)
    ec_l, ec_m = ev_l.estimate(variance="clt"), ev_m.estimate(variance="clt")
    np.testing.assert_allclose(ec_l.cov, ec_m.cov, rtol=1e-10)
    assert ev_l.cost == pytest.approx(ev_m.cost, rel=1e-12)
    h_l, h_m = ev_l.history, ev_m.history
    np.testing.assert_allclose(h_l["value"], h_m["value"], rtol=1e-12)
    np.testing.assert_allclose(h_l["epsilon"], h_m["epsilon"], rtol=1e-12)


@pytest.mark.parametrize(
    "measure, kw, pool_kw",
    [
        ("f1", {"model": "a"}, {}),
        ("recall", {"model": "b", "mix": 0.1}, {"weights": "w"}),
        ("precision", {"model": "a", "oracle_options": {"n_strata": 0}}, {"costs": "cost"}),
        (bae.difference("f1", "a", "b"), {}, {}),
        # the calibration oracle's own model (the lazy evaluator recalibrated "a" regardless)
        (bae.difference("f1", "a", "b"), {"oracle_options": {"model": "b"}}, {}),
        (
            "f1",
            {"model": "a", "oracle_options": {"upper_asymptote": 0.5, "lower_asymptote": 0.5}},
            {},
        ),
    ],
)
def test_calibration_evaluator_matches_in_memory(
    parquet_path, frame, two_model, measure, kw, pool_kw
):
    """The default oracle on a lazy binary pool is the calibration oracle: fitted on the labeled
    items, its belief evaluated chunk by chunk, the same q, draws and estimates as in memory."""
    from bayes_activeeval.adaptive.lazy import LazyActiveEvaluator
    from bayes_activeeval.oracles import CalibrationOracle

    lazy, mem = lazy_pair(parquet_path, frame, **pool_kw)
    ev_l = bae.ActiveEvaluator(lazy, measure, rng=0, **kw)
    ev_m = bae.ActiveEvaluator(mem, measure, oracle="calibration", estimator="ipw", rng=0, **kw)
    assert isinstance(ev_l, LazyActiveEvaluator) and ev_l.draws_mode == "exact"
    assert isinstance(ev_l.oracle, CalibrationOracle) and isinstance(ev_m.oracle, CalibrationOracle)
    labels = two_model.labels
    lock_step(ev_l, ev_m, labels)
    np.testing.assert_allclose(ev_l.oracle.params, ev_m.oracle.params, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ev_l.oracle.lam, ev_m.oracle.lam, rtol=1e-9, atol=1e-12)
    if ev_m.oracle.has_asymptotes:  # the asymptotes reach the lazy belief
        assert ev_m.oracle.lam.min() > 0
    assert rel(ev_l.proposal.info["risk"], ev_m.proposal.info["risk"]) < 1e-10
    budget = ev_m.cost + (120.0 if "costs" in pool_kw else 60)
    el = ev_l.run(lambda i: labels[i], budget=budget, progress=False)
    em = ev_m.run(lambda i: labels[i], budget=budget, progress=False)
    np.testing.assert_array_equal(ev_l.draws()["item"], ev_m.draws()["item"])
    np.testing.assert_allclose(el.values, em.values, rtol=1e-10)
    np.testing.assert_allclose(el.cov, em.cov, rtol=1e-9)
    assert rel(ev_l.proposal.q.compute(), ev_m.proposal.q) < 1e-10
    with pytest.raises(ValueError, match="draws='reservoir' needs the plug-in oracle"):
        bae.ActiveEvaluator(lazy, measure, draws="reservoir", **kw)
    # the relative floor belongs to the model-assisted estimate, which a lazy pool does not use
    assert ev_l.relative_floor == 0.0
    with pytest.raises(ValueError, match=r"relative_floor=0\.01 applies to estimator='model_as"):
        bae.ActiveEvaluator(lazy, measure, relative_floor=0.01, **kw)
    with pytest.raises(TypeError, match="relative_floor must be a number, got 'x'"):
        bae.ActiveEvaluator(lazy, measure, relative_floor="x", **kw)


def test_calibration_on_raw_scores_matches_in_memory(parquet_path, frame):
    """A pool with scores only: the calibration oracle fits its map to the standardized score
    (median and IQR / 1.349) in memory, and lazily with the pool's exact quartiles, so the lazy
    belief, draws and estimates stay the in-memory ones."""
    from bayes_activeeval.adaptive.lazy import LazyActiveEvaluator

    lazy = bae.Pool.from_parquet(
        parquet_path,
        predictions={"a": "pred_a"},
        probs=None,
        scores={"a": "score_a"},
        chunk_size=CHUNK,
    )
    mem = bae.Pool(
        predictions={"a": frame["pred_a"].to_numpy()}, scores={"a": frame["score_a"].to_numpy()}
    )
    ev_l = bae.ActiveEvaluator(lazy, "f1", rng=0)
    ev_m = bae.ActiveEvaluator(mem, "f1", oracle="calibration", estimator="ipw", rng=0)
    assert isinstance(ev_l, LazyActiveEvaluator)
    s = frame["score_a"].to_numpy()
    q1, med, q3 = np.quantile(s, [0.25, 0.5, 0.75])
    assert ev_l._belief.x_shift == med == ev_m.oracle.x_shift
    assert ev_l._belief.x_scale == ev_m.oracle.x_scale != 1.0
    assert np.isclose(ev_m.oracle.x_scale, (q3 - q1) / 1.3489795003921634)
    labels = (np.random.default_rng(3).random(N) < 1 / (1 + np.exp(-(s - 1)))).astype(int)
    lock_step(ev_l, ev_m, labels)
    np.testing.assert_allclose(ev_l.oracle.params, ev_m.oracle.params, rtol=1e-9, atol=1e-12)
    assert ev_l.oracle.coef_ == pytest.approx(ev_m.oracle.coef_, rel=1e-9)
    el = ev_l.run(lambda i: labels[i], budget=ev_m.cost + 60, progress=False)
    em = ev_m.run(lambda i: labels[i], budget=ev_m.cost + 60, progress=False)
    np.testing.assert_array_equal(ev_l.draws()["item"], ev_m.draws()["item"])
    np.testing.assert_allclose(el.values, em.values, rtol=1e-10)


@pytest.mark.parametrize("method", ["quantile", "csf"])
@pytest.mark.parametrize("allocation", ["proportional", "neyman"])
def test_stratified_proposal_matches_in_memory(parquet_path, frame, method, allocation):
    lazy, mem = lazy_pair(parquet_path, frame, weights="w")
    kw = {"strata": 7, "model": "a", "method": method, "allocation": allocation, "mix": 0.05}
    lp = bae.stratified_proposal(lazy, "f1", **kw)
    mp = bae.stratified_proposal(mem, "f1", **kw)
    np.testing.assert_array_equal(lp.info["stratum_mass"] > 0, mp.info["stratum_mass"] > 0)
    assert rel(lp.info["stratum_mass"], mp.info["stratum_mass"]) < 1e-12
    assert rel(lp.q.compute(), mp.q) < 1e-12
    np.testing.assert_array_equal(lp.draw(500, rng=2).indices, mp.draw(500, rng=2).indices)


def test_exact_quantiles_with_ties_and_gathering(monkeypatch):
    from bayes_activeeval import lazy as lz

    monkeypatch.setattr(lz, "GATHER_LIMIT", 50)  # force histogram passes
    monkeypatch.setattr(lz, "QUANTILE_BINS", 8)
    rng = np.random.default_rng(1)
    for p in (np.round(rng.beta(0.5, 3, 20_000), 3), rng.beta(0.5, 3, 20_000)):  # ties, none
        pool = bae.Pool.from_dask(
            da.from_array((p > 0.5).astype(int), chunks=3_000), da.from_array(p, chunks=3_000)
        )
        inner, _, _ = lz.lazy_score_strata(pool, 9, method="quantile", model=None)
        ref = np.quantile(p, np.linspace(0, 1, 10))
        expect = np.unique(ref[1:-1])
        np.testing.assert_array_equal(inner, expect[(expect > p.min()) & (expect <= p.max())])


@pytest.mark.parametrize("pool_kw", [{}, {"costs": "cost"}])
def test_reservoir_draws_follow_q(parquet_path, frame, two_model, pool_kw):
    """The default lazy draws (a mixture of pre-drawn fixed distributions, rejection at labeled
    items) follow q_t exactly: chi-square over q-quantile groups, and labeled items' rates."""
    from scipy import stats

    lazy, _ = lazy_pair(parquet_path, frame, **pool_kw)
    ev = bae.ActiveEvaluator(
        lazy, "f1", oracle="model", model="a", rng=1, reservoir=2_000, mix=0.02
    )
    labels = two_model.labels
    for _ in range(3):
        idx = ev.query(60)
        ev.update(idx, labels[idx])
    q = ev.proposal.q.compute()
    n = 400_000
    idx, qd, _, _ = ev._sample_reservoir(n)
    np.testing.assert_allclose(qd, q[idx], rtol=1e-12)  # q at the draws is the proposal's
    groups = np.minimum((np.argsort(np.argsort(q)) * 20) // q.size, 19)
    known = ev.known
    groups[known] = 20  # the labeled items (point-mass belief) as their own group
    expected = n * np.bincount(groups, weights=q, minlength=21)
    observed = np.bincount(groups[idx], minlength=21)
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    assert chi2 < stats.chi2.ppf(0.999, 20), (chi2, observed, expected)
    assert ev.n_labels == 180 and len(ev._res) > 0
    budget = ev.cost + 200
    est = ev.run(lambda i: labels[i], budget=budget, progress=False)
    assert ev.cost >= budget and np.isfinite(est.value)


@pytest.mark.parametrize(
    ("kind", "mix"), [("optimal", 0.05), ("active_neq", 0.0), ("active_neq", 0.1)]
)
def test_comparison_proposal_and_tests_on_a_lazy_pool(parquet_path, frame, two_model, kind, mix):
    # the optimal proposal is a LazyProposal; Sawade's active_≠ (uniform on the items where the
    # two models disagree) raised a dask NotImplementedError on a lazy pool. Both equal the
    # in-memory proposal, and compare() on them (the zero-mass check of mix=0 included) gives
    # the in-memory result
    lazy, mem = lazy_pair(parquet_path, frame)
    lp = bae.comparison_proposal(lazy, "error_rate", ("a", "b"), kind=kind, mix=mix)
    mp = bae.comparison_proposal(mem, "error_rate", ("a", "b"), kind=kind, mix=mix)
    assert isinstance(lp, LazyProposal) == (kind == "optimal")
    lq = np.asarray(lp.q)
    assert rel(lq, mp.q) < 1e-12 and (mix > 0 or (lq == 0).any())
    d = mp.draw(800, rng=3)
    y = two_model.labels[d.indices]
    lr = bae.compare(lazy, "error_rate", d, y, models=("a", "b"), proposal=lp)
    mr = bae.compare(mem, "error_rate", d, y, models=("a", "b"), proposal=mp)
    assert lr.support_mass == pytest.approx(mr.support_mass, rel=1e-12)
    assert lr.estimate == pytest.approx(mr.estimate, rel=1e-12)
    assert lr.pvalue == pytest.approx(mr.pvalue, rel=1e-9)
    if kind == "optimal":
        lm = bae.multiple_comparison(lazy, "accuracy", d, y)
        mm = bae.multiple_comparison(mem, "accuracy", d, y)
        assert repr(lm) == repr(mm)


def test_active_risk_comparison_proposal_refused_on_a_lazy_pool(parquet_path, frame):
    lazy, _ = lazy_pair(parquet_path, frame)
    with pytest.raises(NotImplementedError, match="active_risk"):
        bae.comparison_proposal(lazy, "error_rate", ("a", "b"), kind="active_risk")


@pytest.mark.parametrize("method", ["sqrt", "paper", "proportional"])
def test_benchmark_design_matches_in_memory(parquet_path, frame, two_model, method):
    from bayes_activeeval.benchmark.lazy import LazyBenchmarkDesign

    lazy, mem = lazy_pair(parquet_path, frame)
    ld = bae.benchmark.design(lazy, budget=300, model="a", method=method)
    md = bae.benchmark.design(mem, budget=300, model="a", method=method)
    assert isinstance(ld, LazyBenchmarkDesign)
    np.testing.assert_array_equal(ld.stratum_sizes, md.stratum_sizes)
    np.testing.assert_array_equal(ld.allocation, md.allocation)
    np.testing.assert_array_equal(ld.strata.compute(), md.strata)
    pd.testing.assert_frame_equal(ld.summary(), md.summary(), rtol=1e-12)
    lr, mr = ld.predicted_variance_ratio(), md.predicted_variance_ratio()
    for t in mr:
        assert lr[t] == pytest.approx(mr[t], rel=1e-10)
    s = ld.sample(rng=0)
    assert len(s) == md.allocation.sum() and np.unique(s.indices).size == len(s)
    np.testing.assert_array_equal(s.strata, md.strata[s.indices])
    np.testing.assert_array_equal(np.bincount(s.strata, minlength=md.n_strata), md.allocation)
    ms = md.sample_at(s.indices)
    np.testing.assert_array_equal(s.inclusion, ms.inclusion)
    y = two_model.labels[s.indices]
    rule = frame["pred_b"].to_numpy()[s.indices]
    le = bae.benchmark.evaluate(y, rule, s, posterior=None)
    me = bae.benchmark.evaluate(y, rule, ms, posterior=None)
    assert le.table.identical(me.table)


def _session_pool_file(tmp_path):
    """A 12,000-item Parquet pool (row groups of 2,500) for the CLI session tests, and its truth
    ``{id: label}``."""
    rng = np.random.default_rng(3)
    n = 12_000
    p = 1 / (1 + np.exp(-(rng.standard_normal(n) * 2.5 - 4)))
    y = (rng.random(n) < p).astype(int)
    ids = np.array([f"x{i}" for i in range(n)])
    pool_path = tmp_path / "pool.parquet"
    pq.write_table(
        pa.table({"id": ids, "pred": (p > 0.3).astype(np.int8), "p": p}),
        pool_path,
        row_group_size=2_500,
    )
    return pool_path, dict(zip(ids.tolist(), y.tolist(), strict=True))


def _cli_sessions(tmp_path, extra):
    """The same session in memory and with ``--lazy`` (three stages of 20 labels): the status of
    each."""
    from click.testing import CliRunner

    from bayes_activeeval.cli import main

    pool_path, truth = _session_pool_file(tmp_path)
    runner = CliRunner()
    out = {}
    for lazy in (False, True):
        session = str(tmp_path / f"s{int(lazy)}.bae")
        args = ["init", str(pool_path), "--id-col", "id", "--pred-col", "pred", "--prob-col", "p"]
        args += ["--measure", "f1", "--session", session, "--budget", "60", *extra]
        r = runner.invoke(main, [*args, "--lazy"] if lazy else args)
        assert r.exit_code == 0, r.output
        for _ in range(3):
            r = runner.invoke(main, ["next", session, "--n", "20"])
            assert r.exit_code == 0, r.output
            got = pd.read_csv(__import__("io").StringIO(r.output))["id"].astype(str)
            labels = tmp_path / "labels.csv"
            pd.DataFrame({"id": got, "label": [truth[i] for i in got]}).to_csv(labels, index=False)
            r = runner.invoke(main, ["record", session, str(labels)])
            assert r.exit_code == 0, r.output
        r = runner.invoke(main, ["status", session, "--json"])
        assert r.exit_code == 0, r.output
        out[lazy] = __import__("json").loads(r.output)
        r = runner.invoke(main, ["report", session, "--out", str(tmp_path / f"r{int(lazy)}.html")])
        assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("design", ["static", "adaptive"])
def test_cli_session_on_a_lazy_pool_matches_the_in_memory_one(tmp_path, design):
    """`bae init pool.parquet --lazy`: the same design, draws and estimates as without; for the
    adaptive design the calibration oracle draws exactly as in memory."""
    # lazily the adaptive default is calibration with the AIS estimate: ask the same in memory
    same = ["--oracle", "calibration", "--estimator", "ipw"] if design == "adaptive" else []
    out = _cli_sessions(tmp_path, ["--design", design, *same])
    assert out[True]["labels"] == out[False]["labels"] >= 55
    e_l, e_m = out[True]["estimates"][0], out[False]["estimates"][0]
    tol = 1e-12 if design == "static" else 1e-10  # the adaptive oracle's fit adds rounding
    assert e_l["estimate"] == pytest.approx(e_m["estimate"], rel=tol)
    assert e_l["stderr"] == pytest.approx(e_m["stderr"], rel=100 * tol)
    # errors no label has seen: in memory only (a pool on dask gets no line, and no error)
    assert e_l["unseen"] is None and e_m["unseen"]["regions"][0]["max_hidden"] > 0


def test_compare_is_post_stratified_on_a_large_lazy_pool(tmp_path):
    """The post-stratified difference needs P(D) over the whole pool: on a lazy pool it is a
    sum per chunk (a pool-wide slice is refused above 65,536 items) and only the drawn items
    are read for their membership of D; results equal the in-memory pool's."""
    n = 70_000
    sp = make_classification_pool(n, 0.05, separation=3.0, n_models=2, rng=11)
    pool = sp.pool
    ds = pool.to_dataset()
    frame = pd.DataFrame(
        {
            "pred_a": ds["prediction"].sel(model="m0").values,
            "pred_b": ds["prediction"].sel(model="m1").values,
            "p_a": pool.view("m0").prob[:, 1],
            "p_b": pool.view("m1").prob[:, 1],
        }
    )
    path = tmp_path / "big.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=16_384)
    lazy, mem = lazy_pair(path, frame)
    draws = bae.comparison_proposal(mem, "error_rate", models=("a", "b")).draw(400, rng=2)
    y = sp.labels[draws.indices]
    for measure in ("error_rate", "accuracy"):
        lc = bae.compare(lazy, measure, draws, y, models=("a", "b"))
        mc = bae.compare(mem, measure, draws, y, models=("a", "b"))
        assert mc.support_mass < 1 and lc.support_mass == pytest.approx(mc.support_mass, rel=1e-12)
        assert lc.estimate == pytest.approx(mc.estimate, rel=1e-12)
        assert lc.pvalue == pytest.approx(mc.pvalue, rel=1e-9)
        assert tuple(lc.confidence_interval()) == pytest.approx(tuple(mc.confidence_interval()))
    lm = bae.multiple_comparison(lazy, "error_rate", draws, y, models=("a", "b"), rng=0)
    mm = bae.multiple_comparison(mem, "error_rate", draws, y, models=("a", "b"), rng=0)
    np.testing.assert_allclose(lm.difference, mm.difference, rtol=1e-12)
    np.testing.assert_allclose(lm.pvalue, mm.pvalue, rtol=1e-9)


@pytest.mark.parametrize(
    ("pred", "column"),
    [
        (np.arange(4_000) % 2, "probs"),
        (np.linspace(0.5, 9.5, 4_000), "predictive_std"),
    ],
)
def test_missing_belief_input_is_named_as_in_memory(pred, column):
    """Without the pool's probabilities (or predictive sd) and without a belief, the lazy
    proposal names the missing column with the in-memory pool's message."""
    mem = bae.Pool(predictions=pred)
    lazy = bae.Pool.from_dask(da.from_array(pred, chunks=1_000))
    measure = "mse" if column == "predictive_std" else "error_rate"
    with pytest.raises(ValueError) as mem_err:
        bae.optimal_proposal(mem, measure)
    with pytest.raises(ValueError) as lazy_err:
        bae.optimal_proposal(lazy, measure)
    assert f"the pool has no {column}, so there is no belief" in str(lazy_err.value)
    assert str(lazy_err.value) == str(mem_err.value)


def test_lazy_adaptive_correction_that_cannot_replay_is_refused_before_writing(tmp_path):
    """Session 31 review: on a lazy pool an adaptive session replays its stages from the seed, so
    a correction that makes a later stage draw other items was accepted and then every
    ``status`` and ``next`` failed. It is refused before anything is written; an item of the
    last stage drawn can be corrected."""
    from click.testing import CliRunner

    from bayes_activeeval.cli import main

    pool_path, truth = _session_pool_file(tmp_path)
    runner = CliRunner()
    session = str(tmp_path / "s.bae")
    r = runner.invoke(main, ["init", str(pool_path), "--id-col", "id", "--pred-col", "pred",
                             "--prob-col", "p", "--measure", "f1", "--session", session,
                             "--budget", "100", "--design", "adaptive", "--lazy"])  # fmt: skip
    assert r.exit_code == 0, r.output
    stages = []
    for _ in range(3):
        r = runner.invoke(main, ["next", session, "--n", "20"])
        assert r.exit_code == 0, r.output
        got = pd.read_csv(__import__("io").StringIO(r.output))["id"].astype(str).tolist()
        stages.append(got)
        labels = tmp_path / "labels.csv"
        pd.DataFrame({"id": got, "label": [truth[i] for i in got]}).to_csv(labels, index=False)
        assert runner.invoke(main, ["record", session, str(labels)]).exit_code == 0
    before = runner.invoke(main, ["status", session, "--json"]).output
    # flip the label of a positive of the first stage: the oracle model refits, stage 1 moves
    first = next(i for i in stages[0] if truth[i] == 1)
    r = runner.invoke(main, ["relabel", session, first, "0", "--reason", "test"])
    assert r.exit_code == 2 and "cannot replay" in r.stderr and "nothing was written" in r.stderr
    assert runner.invoke(main, ["status", session, "--json"]).output == before
    # an item of the last stage can be corrected, and the session goes on
    last = stages[-1][0]
    r = runner.invoke(main, ["relabel", session, last, str(1 - truth[last]), "--reason", "test"])
    assert r.exit_code == 0, r.stderr
    assert runner.invoke(main, ["status", session]).exit_code == 0
    r = runner.invoke(main, ["next", session, "--n", "5"])
    assert r.exit_code == 0, r.stderr
