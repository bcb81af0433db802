"""Wald (z), t (Satterthwaite df) and the score-type default interval at small label budgets.

Demo pool (100,000 items, 0.5% positives), optimal static proposal, 1,000 repetitions per
(measure, n); repetitions where the estimate is undefined are skipped (reported).

Usage: python benchmarks/small_budget_intervals.py [--reps 1000]
Writes benchmarks/results/small_budget_intervals.json and .md.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.datasets import load_demo

OUT = Path(__file__).parent / "results"
METHODS = ("wald", "t", "wilson", "modified_wilson")
LABELS = {
    "wald": "Wald (z)",
    "t": "t, Satterthwaite df",
    "wilson": "Wilson, n* (no df)",
    "modified_wilson": "modified Wilson, n* (default)",
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args(argv)
    demo = load_demo()
    pool = demo.pool
    y = pool.encode_labels(demo.labels)
    rows = []
    for measure in ("f1", "recall", "accuracy"):
        m, views = pool.resolve(measure)
        truth = float(m.g(pool.p @ m.loss(y, views(None)))[0])
        prop = bae.optimal_proposal(pool, measure)
        for n in (100, 250, 1000):
            rng = np.random.default_rng(5)
            cover = {m: [] for m in METHODS}
            width = {m: [] for m in METHODS}
            for _ in range(args.reps):
                d = prop.draw(n, rng=rng)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
                    est = bae.weighted_estimate(
                        m.loss(y[d.indices], views(d.indices)), d.weights, m
                    )
                if not np.isfinite(est.stderr):
                    continue
                for method in cover:
                    lo, hi = (
                        bae.intervals.interval(
                            est.values, est.stderrs, est.bounds, 0.95, method, kish=est.kish
                        )
                        if method == "wilson"  # without the weight-df adjustment of the default
                        else est.confidence_interval(0.95, method)
                    )
                    lo, hi = float(np.asarray(lo).ravel()[0]), float(np.asarray(hi).ravel()[0])
                    cover[method].append(lo <= truth <= hi)
                    width[method].append(hi - lo)
            row = {"measure": measure, "n_draws": n, "reps": args.reps, "defined": len(cover["t"])}
            for method in cover:
                row[f"coverage_{method}"] = float(np.mean(cover[method]))
                row[f"width_{method}"] = float(np.mean(width[method]))
            rows.append(row)
            print(row, flush=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "small_budget_intervals.json").write_text(json.dumps(rows, indent=1))
    head = " | ".join(f"{LABELS[m]}: coverage | mean width" for m in METHODS)
    lines = [
        f"# 95% intervals at small budgets: demo pool (0.5% positives), {args.reps} repetitions",
        "",
        f"| measure | draws | {head} | defined |",
        "|---|---|" + "---|---|" * len(METHODS) + "---|",
    ]
    for r in rows:
        cells = " | ".join(f"{r['coverage_' + m]:.3f} | {r['width_' + m]:.3f}" for m in METHODS)
        lines.append(f"| {r['measure']} | {r['n_draws']} | {cells} | {r['defined']}/{r['reps']} |")
    (OUT / "small_budget_intervals.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
