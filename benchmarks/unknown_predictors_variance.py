"""Variance estimator and point-estimate options of ``benchmark.evaluate`` (issue 5, item 1).

For the settings of ``unknown_predictors.py`` (synthetic pools, 1%-4% prevalence, the default
sqrt design; random and informative rules), compares the textbook per-cell variance
(``smoothing=0``) with the default smoothed one (``smoothing=2``), with and without the
second-order bias correction, on both evaluation paths (post-stratified with pool margins;
labeled items only). Reports bias, the ratio of the mean estimated variance to the variance of
the estimates over repeated samples, and 95% Wald / t / Wilson coverage.

Run: ``python benchmarks/unknown_predictors_variance.py [--reps 150] [--rules 100]``; results
in ``benchmarks/results/unknown_predictors_variance.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from unknown_predictors import make_world, margins_of

from bayes_activeeval import benchmark as bm

RESULTS = Path(__file__).parent / "results"
MEAS = list(bm.MEASURES)[:4]
VARIANTS = {
    "smoothing=2 (default), bias-corrected": ({}, True),
    "smoothing=2, no bias correction": ({"bias_correction": False}, True),
    "smoothing=0 (textbook s^2), bias-corrected": ({"smoothing": 0.0}, True),
    "labeled items only, smoothing=2": ({}, False),
    "labeled items only, smoothing=0": ({"smoothing": 0.0}, False),
}


def run(reps, n_rules):
    configs = [
        (0.01, 500, "stratified"),
        (0.02, 1000, "stratified"),
        (0.04, 500, "stratified"),
        (0.01, 500, "poisson"),
    ]
    out = []
    for pi, budget, scheme in configs:
        rng = np.random.default_rng(int(pi * 1e4) + budget)
        s, y, rules, kinds = make_world(50_000, pi, n_rules, n_rules, rng)
        truth = bm.population_measures(y, rules).values[:, :4]
        d = bm.design(s, budget=budget, scheme=scheme)
        marg = margins_of(rules, d.strata, d.n_strata)
        K = rules.shape[0]
        est = {v: np.empty((reps, K, 4)) for v in VARIANTS}
        var = {v: np.empty((reps, K, 4)) for v in VARIANTS}
        hit = {v: {k: np.zeros((K, 4)) for k in ("wald", "t", "wilson")} for v in VARIANTS}
        t0 = time.perf_counter()
        for i in range(reps):
            smp = d.sample(rng)
            for v, (kw, use_margins) in VARIANTS.items():
                t = bm.evaluate(
                    y[smp.indices],
                    rules[:, smp.indices],
                    smp,
                    pool_margins=marg if use_margins else None,
                    posterior=None,
                    **kw,
                ).table
                est[v][i] = t.estimate.values[:, :4]
                var[v][i] = t.stderr.values[:, :4] ** 2
                for k in hit[v]:
                    lo, hi = t[f"{k}_low"].values[:, :4], t[f"{k}_high"].values[:, :4]
                    hit[v][k] += (lo <= truth) & (truth <= hi)
        print(f"pi={pi} n={budget} {scheme}: {time.perf_counter() - t0:.0f}s", flush=True)
        for v in VARIANTS:
            e = est[v]
            mean = np.nanmean(e, 0)
            sd = np.nanstd(e, 0, ddof=1)
            z = (mean - truth) / np.where(sd > 0, sd / np.sqrt(reps), np.nan)
            for kind in ("random", "informative"):
                sel = kinds == kind
                for j, m in enumerate(MEAS):
                    per_sample = np.nanmean(e[:, sel, j] - truth[sel, j], 1)
                    out.append(
                        {
                            "prevalence": pi,
                            "budget": budget,
                            "scheme": scheme,
                            "variant": v,
                            "rules": kind,
                            "measure": m,
                            "reps": reps,
                            "n_rules": int(sel.sum()),
                            "mean_bias": float(np.nanmean(mean[sel, j] - truth[sel, j])),
                            "mc_se_of_mean_bias": float(
                                np.nanstd(per_sample, ddof=1) / np.sqrt(reps)
                            ),
                            "mean_abs_z": float(np.nanmean(np.abs(z[sel, j]))),
                            "variance_ratio": float(
                                np.nansum(np.nanmean(var[v][:, sel, j], 0))
                                / np.nansum(sd[sel, j] ** 2)
                            ),
                            **{
                                f"coverage_{k}": float(hit[v][k][sel, j].mean() / reps)
                                for k in hit[v]
                            },
                        }
                    )
    return out


def write_md(rows, meta, path):
    lines = [
        "# Variance estimator options of `benchmark.evaluate` — results",
        "",
        f"{rows[0]['n_rules']} random + {rows[0]['n_rules']} informative rules, "
        f"{rows[0]['reps']} samples per setting; run took {meta['seconds']:.0f} s. "
        "var ratio = (sum over rules of the mean estimated variance) / (sum over rules of the "
        "variance of the estimates over the samples).",
        "",
        "| prevalence | labels | scheme | variant | rules | measure | mean bias (z) | mean abs z "
        "| var ratio | Wald | t | Wilson |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        zb = r["mean_bias"] / r["mc_se_of_mean_bias"] if r["mc_se_of_mean_bias"] > 0 else 0.0
        lines.append(
            f"| {r['prevalence']} | {r['budget']} | {r['scheme']} | {r['variant']} | {r['rules']} "
            f"| {r['measure']} | {r['mean_bias']:+.4f} ({zb:+.1f}) | {r['mean_abs_z']:.2f} "
            f"| {r['variance_ratio']:.2f} | {r['coverage_wald']:.3f} | {r['coverage_t']:.3f} "
            f"| {r['coverage_wilson']:.3f} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=150)
    ap.add_argument("--rules", type=int, default=100)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run(args.reps, args.rules)
    meta = {"seconds": time.perf_counter() - t0, "args": vars(args)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "unknown_predictors_variance.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1)
    )
    write_md(rows, meta, RESULTS / "unknown_predictors_variance.md")


if __name__ == "__main__":
    main()
