"""Review fixes: lazy pool files with repeated ids, threshold-free measures and curves on lazy
pools, ``LazyPool.to_dataset``, ``curve_band``'s argument checks and zero weights in the weighted
ROC/PR curves."""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner

import bayes_activeeval as bae
from bayes_activeeval import curves, io
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.datasets import make_classification_pool

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
da = pytest.importorskip("dask.array")

N = 3000
CHUNK = 700
RANK_MEASURES = ["roc_auc", "average_precision", "recall@fpr=0.1"]


@pytest.fixture(scope="module")
def pools():
    """The same two-model binary pool in memory and on dask (chunks of 700 items)."""
    sp = make_classification_pool(
        N, 0.05, separation=3.0, noise=0.4, threshold=0.3, n_models=2, rng=5
    )
    ds = sp.pool.to_dataset()
    preds = {m: ds["prediction"].sel(model=m).values for m in sp.pool.models}
    probs = {m: sp.pool.view(m).prob[:, 1] for m in sp.pool.models}
    mem = bae.Pool(predictions=preds, probs=probs)
    lazy = bae.Pool.from_dask(
        {m: da.from_array(v, chunks=CHUNK) for m, v in preds.items()},
        {m: da.from_array(v, chunks=CHUNK) for m, v in probs.items()},
    )
    draws = bae.passive_proposal(mem).draw(400, rng=1)
    return mem, lazy, draws, sp.labels[draws.indices]


def _write_ids(path, ids, groups):
    """A pool file with an ``id`` column, written in the given row groups."""
    ids = np.asarray(ids, dtype=object)
    schema = pa.schema([("id", pa.string()), ("pred", pa.int8()), ("p", pa.float64())])
    with pq.ParquetWriter(path, schema) as w:
        for lo, hi in groups:
            k = hi - lo
            w.write_table(
                pa.table(
                    {
                        "id": ids[lo:hi].tolist(),
                        "pred": np.zeros(k, np.int8),
                        "p": np.linspace(0.1, 0.9, k),
                    }
                )
            )
    return path


# -- 2. repeated ids in a lazy pool file --------------------------------------------------------
def test_lazy_pool_file_refuses_a_repeated_id_as_in_memory(tmp_path):
    """An id on two rows (in different row groups) is refused by the lazy lookup with the
    in-memory reader's message, even when the id asked for is another one."""
    path = _write_ids(tmp_path / "ids.parquet", ["a", "b", "c", "d", "b", "e"], [(0, 3), (3, 6)])
    with pytest.raises(ValueError) as mem_err:
        io.read_pool(path, io.PoolSpec(pred="pred", prob="p", id_col="id"))
    assert "(rows 2 and 5)" in str(mem_err.value)
    pf = io.read_pool(path, io.PoolSpec(pred="pred", prob="p", id_col="id", lazy=True))
    for asked in (["b"], ["a"], ["e", "c"]):
        with pytest.raises(ValueError) as lazy_err:
            pf.index_of(asked)
        assert str(lazy_err.value) == str(mem_err.value)


def test_lazy_ids_lookup_of_repeated_and_padded_requests(tmp_path):
    """On a file with unique ids a request may repeat an id (as in memory); without an id
    column only the row numbers as ``str(i)`` writes them are ids (``"03"`` is not)."""
    ids = [f"id{i}" for i in range(9)]
    path = _write_ids(tmp_path / "u.parquet", ids, [(0, 4), (4, 9)])
    lazy = io.read_pool(path, io.PoolSpec(pred="pred", prob="p", id_col="id", lazy=True))
    mem = io.read_pool(path, io.PoolSpec(pred="pred", prob="p", id_col="id"))
    asked = ["id6", "id2", "id6", " id0 "]
    np.testing.assert_array_equal(lazy.index_of(asked), [6, 2, 6, 0])
    np.testing.assert_array_equal(lazy.index_of(asked), mem.index_of(["id6", "id2", "id6", "id0"]))
    plain = io.read_pool(path, io.PoolSpec(pred="pred", prob="p", lazy=True))
    np.testing.assert_array_equal(plain.index_of(["3", "8"]), [3, 8])
    for bad in ("03", "+3", "9"):
        with pytest.raises(ValueError, match=re.escape(f"unknown item id '{bad}'")):
            plain.index_of([bad])


# -- 3. threshold-free measures and curves on a lazy pool ---------------------------------------
def _refused(measure):
    return pytest.raises(
        NotImplementedError,
        match=rf"threshold-free measure '{measure}' is not available on a lazy pool yet.*"
        r"in-memory pool",
    )


@pytest.mark.parametrize("measure", RANK_MEASURES)
def test_threshold_free_measures_refuse_a_lazy_pool_up_front(pools, measure):
    mem, lazy, draws, y = pools
    name = tf.rank_measure(measure).name
    with _refused(name):
        bae.optimal_proposal(lazy, measure, model="m0")
    with _refused(name):
        bae.estimate(lazy, measure, draws, y, model="m0")
    with _refused(name):
        tf.rank_estimate(lazy, measure, draws, y, model="m0")
    with _refused(name):
        tf.stacked_estimate(lazy, measure, draws, y, ("m0", "m1"))
    with _refused(name):
        bae.compare(lazy, measure, draws, y, models=("m0", "m1"))
    with _refused(name):
        bae.ActiveEvaluator(lazy, measure, model="m0", rng=0)
    # the threshold-free proposals called directly (they were not guarded)
    with _refused(name):
        tf.rank_proposal(lazy, measure, model="m0")
    with _refused(name):
        tf.comparison_rank_proposal(lazy, measure, ("m0", "m1"))
    with _refused(name):
        tf.adaptive_rank_proposal(lazy, measure, np.full(lazy.n_items, 0.5), model="m0")
    # the in-memory pool is unaffected, and the message's advice gives the same answer
    est = bae.estimate(mem, measure, draws, y, model="m0")
    inmem = lazy.take(np.arange(lazy.n_items))
    np.testing.assert_allclose(
        bae.estimate(inmem, measure, draws, y, model="m0").values, est.values, rtol=1e-12
    )


def test_cli_lazy_init_with_a_threshold_free_measure_is_one_line(tmp_path):
    rng = np.random.default_rng(0)
    p = rng.random(400)
    pq.write_table(
        pa.table({"id": [f"i{k}" for k in range(400)], "pred": (p > 0.5).astype(np.int8), "p": p}),
        tmp_path / "pool.parquet",
        row_group_size=100,
    )
    from bayes_activeeval.cli import main

    args = [str(tmp_path / "pool.parquet"), "--lazy", "--measure", "roc_auc"]
    args += ["--session", str(tmp_path / "s.bae"), "--id-col", "id"]
    args += ["--pred-col", "pred", "--prob-col", "p"]
    res = CliRunner().invoke(main, ["init", *args])
    assert res.exit_code == 2, (res.output, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "'roc_auc' is not available on a lazy pool" in lines[0]
    assert "without --lazy" in lines[0]


@pytest.mark.parametrize("curve", ["roc", "pr"])
def test_curve_band_refuses_a_lazy_pool_up_front(pools, curve):
    _, lazy, draws, y = pools
    what = "the ROC curve" if curve == "roc" else "the PR curve"
    with pytest.raises(NotImplementedError, match=rf"curve_band: .*'{what}'.*lazy pool"):
        curves.curve_band(lazy, draws, y, curve=curve, model="m0", n_boot=20, rng=0)


# -- 4. LazyPool.to_dataset ---------------------------------------------------------------------
def test_lazy_to_dataset_has_the_in_memory_layout(pools):
    mem, lazy, _, _ = pools
    dm, dl = mem.to_dataset(), lazy.to_dataset()
    assert sorted(dl.data_vars) == sorted(dm.data_vars)
    assert sorted(dl.coords) == sorted(dm.coords)
    assert dict(dl.sizes) == dict(dm.sizes)
    for v in dm.data_vars:
        assert isinstance(dl[v].data, da.Array), v  # nothing loaded
        assert dl[v].dims == dm[v].dims and dl[v].dtype == dm[v].dtype, v
        np.testing.assert_array_equal(dl[v].values, dm[v].values)
    assert isinstance(dl["item"].data, da.Array)
    for c in dm.coords:
        assert dl[c].dtype == dm[c].dtype, c
        np.testing.assert_array_equal(dl[c].values, dm[c].values)
    assert dl.attrs["task"] == dm.attrs["task"] and dl.attrs["pos_label"] == dm.attrs["pos_label"]


# -- 5. curve_band's grid and oracle ------------------------------------------------------------
@pytest.mark.parametrize(
    ("grid", "curve", "message"),
    [
        (np.array([0.5, 2.0]), "roc", r"grid\[1\] = 2\.0"),
        (np.array([np.nan, 0.5]), "roc", r"grid\[0\] = nan"),
        (np.array([-0.5, 0.5]), "pr", r"grid\[0\] = -0\.5"),
        (np.array([0.5, 1.5]), "pr", r"grid\[1\] = 1\.5"),
        (np.array([]), "roc", r"grid must be a non-empty one-dimensional array"),
        (np.array([[0.1, 0.2], [0.3, 0.4]]), "roc", r"grid must be a non-empty one-dimensional"),
        (2.7, "roc", r"grid must be a whole number of points .* got 2\.7"),
    ],
)
def test_curve_band_checks_the_grid(pools, grid, curve, message):
    mem, _, draws, y = pools
    with pytest.raises(ValueError, match=message):
        curves.curve_band(mem, draws, y, curve=curve, grid=grid, model="m0", n_boot=20, rng=0)


def test_curve_band_checks_the_oracle(pools):
    mem, _, draws, y = pools
    with pytest.raises(
        ValueError, match=r"oracle must be 'deterministic' or 'stochastic', got 'x'"
    ):
        curves.curve_band(mem, draws, y, oracle="x", model="m0", n_boot=20, rng=0)
    band = curves.curve_band(
        mem, draws, y, grid=np.array([0.0, 0.3, 1.0]), model="m0", n_boot=20, rng=0
    )
    assert band.x.tolist() == [0.0, 0.3, 1.0]


# -- 6. zero weights in the weighted curves -----------------------------------------------------
def test_weighted_curves_drop_zero_weights_as_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        n = int(rng.integers(6, 40))
        y = rng.integers(0, 2, n)
        y[:2] = 0, 1
        s = np.round(rng.normal(size=n), 1)  # ties
        w = rng.exponential(size=n)
        w[rng.random(n) < 0.3] = 0.0
        if w[y == 1].sum() == 0 or w[y == 0].sum() == 0 or w.all():
            continue
        checked += 1
        ours = curves.weighted_roc_curve(y, s, w)
        ref = metrics.roc_curve(y, s, sample_weight=w, drop_intermediate=False)
        ours_pr = curves.weighted_pr_curve(y, s, w)
        ref_pr = metrics.precision_recall_curve(y, s, sample_weight=w, drop_intermediate=False)
        for a, b in zip(ours + ours_pr, ref + ref_pr, strict=True):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b)
    assert checked > 10
    with pytest.raises(ValueError, match="sample_weight is 0 for every sample"):
        curves.weighted_roc_curve([0, 1], [0.1, 0.2], [0.0, 0.0])


# -- 7. the band's level is a lower bound -------------------------------------------------------
def test_band_level_is_documented_as_a_lower_bound():
    for doc in (curves.CurveBand.__doc__, curves.curve_band.__doc__):
        text = " ".join(doc.split())
        assert "conservative" in text and "lower bound" in text
