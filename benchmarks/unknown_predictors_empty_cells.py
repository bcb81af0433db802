"""The synthetic rate of empty cells under stratified sampling: a case where it is biased.

``benchmark.evaluate`` gives a cell (stratum × rule output) with no labeled item a synthetic
rate: its stratum's mean guess times the rule output's lift over the guess in the non-empty
cells. A reviewer (session 31) found it biased even for a random rule with an exactly calibrated
guess, against the docstring's claim: when few labels fall on the rule's positive side, the
non-empty rule-positive cells hold no positive, the lift is 0 and every empty rule-positive cell
gets rate 0. This reproduces that case: three strata of 15,000, 4,000 and 1,000 items with
positive rates 0.002, 0.03 and 0.3 and the guess equal to those rates; a rule that says
positive on 1 % of the items at random; the default design with 150 labels; ``--reps``
stratified samples. Writes ``results/unknown_predictors_empty_cells.{json,md}``.

Usage:
    python benchmarks/unknown_predictors_empty_cells.py [--reps 2000]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from bayes_activeeval import benchmark as bm

RESULTS = Path(__file__).resolve().parent / "results"
SIZES, RATES = (15_000, 4_000, 1_000), (0.002, 0.03, 0.3)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    y = np.concatenate(
        [(np.arange(n) < round(n * r)).astype(int) for n, r in zip(SIZES, RATES, strict=True)]
    )
    guess = np.concatenate([np.full(n, r) for n, r in zip(SIZES, RATES, strict=True)])
    rule = (rng.random(y.size) < 0.01).astype(np.int8)
    pm = bm.population_measures(y, rule)
    names = [str(m) for m in pm.coords["measure"].values]
    truth = pm.values[0]
    design = bm.design(guess, budget=150)
    est, cover, empty = [], [], []
    for r in range(args.reps):
        s = design.sample(rng=r)
        ev = bm.evaluate(y[s.indices], rule, s, posterior=None)
        est.append(ev.table["estimate"].values[0])
        ci = ev.confidence_interval(method="wilson")
        cover.append((ci.low.values[0] <= truth) & (truth <= ci.high.values[0]))
        empty.append(float(np.asarray(ev.table["collapsed_cells"]).ravel()[0]))
    est = np.array(est)
    err = est - truth
    se = est.std(0, ddof=1) / np.sqrt(len(est))
    rows = [
        {
            "measure": m,
            "truth": float(truth[k]),
            "bias": float(err[:, k].mean()),
            "z": float(err[:, k].mean() / se[k]),
            "wilson_coverage": float(np.mean(np.array(cover)[:, k])),
        }
        for k, m in enumerate(names)
    ]
    secs = time.perf_counter() - t0
    out = {"reps": args.reps, "seconds": secs, "mean_empty_cells": float(np.mean(empty)),
           "rows": rows}  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "unknown_predictors_empty_cells.json").write_text(json.dumps(out, indent=1))
    lines = [
        "# Empty cells under stratified sampling: the synthetic rate's bias",
        "",
        f"`benchmarks/unknown_predictors_empty_cells.py --reps {args.reps}` ({secs:.0f} s). "
        "Strata of 15,000 / 4,000 / 1,000 items with positive rates 0.002 / 0.03 / 0.3, the "
        "guess equal to them (exactly calibrated), a random rule positive on 1 % of the items, "
        f"`design(guess, budget=150)`; {args.reps} stratified samples; mean empty cells per "
        f"sample {np.mean(empty):.2f}. z = mean error / its Monte Carlo s.e.",
        "",
        "| measure | truth | bias | z | Wilson coverage |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['measure']} | {r['truth']:.4f} | {r['bias']:+.4f} | {r['z']:+.1f} | "
            f"{r['wilson_coverage']:.3f} |"
        )
    (RESULTS / "unknown_predictors_empty_cells.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
