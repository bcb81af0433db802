"""The post-stratified paired difference of ``bae.compare`` against the self-normalized one.

For a plain risk (error rate, accuracy, …) the paired loss difference ``δ`` is 0 wherever the
two models' losses cannot differ, and the pool knows the mass ``P(D)`` of the set ``D`` where
they can. ``compare`` estimates ``Δ = P(D)·E[δ | D]`` from the draws in ``D`` alone under an
active proposal (post-stratification); before, it used every draw, ``Σ v δ / Σ v`` (Sawade
(2012), Eq. 3.21), whose denominator moves with how many of the few heavy draws where the models
agree a sample happens to hold. Here, for the default ``comparison_proposal`` on three pools,
``--reps`` samples of 20-1,000 draws (1,000 by default): bias, MSE, coverage and mean width of
the 95 % interval of both:

- ``before``: ``Σ v δ / Σ v`` over every draw and the interval dual to the score test on every
  draw (``invert_score_test`` of the sums over all draws, clipped to ``[-1, 1]``), the default
  interval under active proposals before;
- ``after``: ``bae.compare(...)`` and its default ``confidence_interval(0.95)``.

Pools: ``make_classification_pool(20_000, 0.3, n_models=2, rng=0)``; the same with 1 %
positives (``50_000`` items, ``rng=1``); and ``one_sided``: 5,000 items, 30 % positives, model
``a`` right everywhere and ``b`` wrong on a random 10 % (``δ = +1`` on all of ``D``, the
boundary case of ``tests/test_comparison.py``). Writes ``results/compare_post_stratified.{json,md}``;
about 3 minutes.

Usage:
    nice -n 5 python benchmarks/compare_post_stratified.py [--reps 1000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.comparison import ScoreSums, invert_score_test

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (20, 50, 200, 1000)
Z = 1.959963984540054


def pools() -> dict:
    out = {}
    for name, n, prev, seed in (("prev 0.3", 20_000, 0.3, 0), ("prev 0.01", 50_000, 0.01, 1)):
        sp = bae.datasets.make_classification_pool(n, prev, n_models=2, rng=seed)
        out[name] = (sp.pool, np.asarray(sp.labels))
    pool, y, _ = one_sided_pool()
    out["one_sided"] = (pool, y)
    return out


def one_sided_pool():
    """5,000 items, 30 % positives: ``m0`` right everywhere, ``m1`` wrong on a random 10 %
    (the paired difference of the error rate is −1 on all of ``D``); returns the pool, the labels
    and ``m1``'s predictions."""
    rng = np.random.default_rng(3)
    y = (rng.random(5_000) < 0.3).astype(int)
    fb = np.where(rng.random(5_000) < 0.1, 1 - y, y)
    pool = bae.Pool(
        predictions={"m0": y, "m1": fb},
        probs={"m0": np.where(y == 1, 0.9, 0.1), "m1": np.where(fb == 1, 0.8, 0.2)},
        classes=[0, 1],
    )
    return pool, y, fb


def before(delta: np.ndarray, v: np.ndarray) -> tuple[float, float, float]:
    """The self-normalized estimate over every draw and the interval dual to the score test."""
    sums = ScoreSums(A=v @ delta, W=v.sum(), B=(v * v) @ delta**2, C=(v * v) @ delta, D=v @ v)
    lo, hi = invert_score_test(sums, Z)
    return float(sums.A / sums.W), float(np.clip(lo, -1, 1)), float(np.clip(hi, -1, 1))


def run(reps: int) -> list[dict]:
    rows = []
    for name, (pool, y) in pools().items():
        err = {m: (pool.view(m).pred != y).astype(float) for m in ("m0", "m1")}
        truth = float(pool.p @ (err["m0"] - err["m1"]))
        prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"))
        rng = np.random.default_rng(7)
        for n in SIZES:
            rec = {k: [] for k in ("b_est", "b_lo", "b_hi", "a_est", "a_lo", "a_hi")}
            for _ in range(reps):
                d = prop.draw(n, rng)
                delta = err["m0"][d.indices] - err["m1"][d.indices]
                e, lo, hi = before(delta, np.asarray(d.weights, dtype=float))
                rec["b_est"].append(e)
                rec["b_lo"].append(lo)
                rec["b_hi"].append(hi)
                r = bae.compare(pool, "error_rate", d, y[d.indices], ("m0", "m1"))
                lo, hi = r.confidence_interval(0.95)
                rec["a_est"].append(r.estimate)
                rec["a_lo"].append(lo)
                rec["a_hi"].append(hi)
            row = {"pool": name, "n": n, "reps": reps, "truth": truth, "P(D)": r.support_mass}
            for side, tag in (("b", "before"), ("a", "after")):
                est, lo, hi = (np.array(rec[f"{side}_{k}"]) for k in ("est", "lo", "hi"))
                cov = (lo <= truth) & (truth <= hi)
                row[tag] = {
                    "bias": float(est.mean() - truth),
                    "mse": float(np.mean((est - truth) ** 2)),
                    "coverage": float(cov.mean()),
                    "coverage_se": float(np.sqrt(cov.mean() * (1 - cov.mean()) / reps)),
                    "width": float(np.mean(hi - lo)),
                }
            rows.append(row)
            print(name, n, row["before"], row["after"], flush=True)
    return rows


def markdown(rows: list[dict], secs: float, reps: int) -> str:
    out = [
        "# Post-stratified paired difference (`benchmarks/compare_post_stratified.py`)",
        "",
        f"Error-rate difference of two models, default `comparison_proposal`, {reps} samples per "
        f"cell; runtime {secs:.0f} s. `before`: `Σ v δ / Σ v` over every draw, interval dual to "
        "the score test on every draw; `after`: `bae.compare` (post-stratified on `D`) and its "
        "default interval. `MSE gain` = MSE before / after.",
        "",
        "| pool | P(D) | truth | n | bias before | bias after | MSE before | MSE after | MSE gain "
        "| coverage before | coverage after | ± MC s.e. | width before | width after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b, a = r["before"], r["after"]
        gain = f"{b['mse'] / a['mse']:.1f}" if a["mse"] > 1e-20 else "exact after"
        out.append(
            f"| {r['pool']} | {r['P(D)']:.4f} | {r['truth']:+.4f} | {r['n']} | {b['bias']:+.2e} "
            f"| {a['bias']:+.2e} | {b['mse']:.2e} | {a['mse']:.2e} | {gain} "
            f"| {b['coverage']:.3f} | {a['coverage']:.3f} | {a['coverage_se']:.3f} "
            f"| {b['width']:.3g} | {a['width']:.3g} |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args()
    t0 = time.time()
    rows = run(args.reps)
    secs = time.time() - t0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compare_post_stratified.json").write_text(
        json.dumps({"reps": args.reps, "seconds": secs, "rows": rows}, indent=1)
    )
    (RESULTS / "compare_post_stratified.md").write_text(markdown(rows, secs, args.reps))


if __name__ == "__main__":
    main()
