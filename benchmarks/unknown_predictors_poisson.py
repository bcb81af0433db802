"""Poisson sampling: where the small-cell bias came from, and the estimators compared.

Side study for issue 5 (benchmark label sets; ``docs/benchmark.md`` Sec. 3-4). On the coverage
study's worlds (pool 50,000, prevalence 0.01 and 0.04, 500 labels, square-root Poisson design,
200 random + 200 informative rules), for ``--reps`` Poisson samples:

1. design facts: the spread of the inclusion probabilities inside each stratum and the
   size-biased positive rate ``sum pi y / sum pi`` against the stratum's rate (what a cell with
   one label estimates under the Hajek ratio), and the share of empty rule-positive cells;
2. four estimators of the cell totals, all from one ``evaluate`` call per sample:

   - ``difference + ratio correction (default)``: the package's estimator under Poisson
     sampling; ``difference, no ratio correction``; ``default clipped to [0, 1]`` (what the
     previous code did to every estimate after the correction);
   - ``Hajek cell ratio`` (the previous estimator's cell rates ``sum w y / sum w``; an empty
     cell gets its stratum's Hajek rate here rather than the previous guess-based synthetic
     rate), recomputed from ``ev.cells``;
   - ``SRS within strata`` (conditional on the realised ``n_h``: weights ``N_h / n_h``);

   bias averaged over rules with its Monte Carlo error (from the per-sample averages), the
   median variance ratio and Wald / Wilson coverage where the estimator has a variance.

Run: ``python benchmarks/unknown_predictors_poisson.py [--reps 600]``; writes
``results/unknown_predictors_poisson.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import numpy as np
from unknown_predictors import MEAS, make_world, margins_of

from bayes_activeeval import benchmark as bm

RESULTS = Path(__file__).parent / "results"
SHOW = ["sensitivity", "specificity", "precision", "f1"]


def hajek_cells(ev, margins):
    """Measures from the Hajek cell ratios (empty cell: its stratum's Hajek rate)."""
    W = ev.cells["weight"].values  # (K, H, r, y)
    Wc = W.sum(-1)
    Ws = Wc.sum(-1)
    # a stratum without labels (Poisson: the bottom stratum expects ~4) gets 0, as in evaluate
    m_h = np.where(Ws > 0, W[..., 1].sum(-1) / np.where(Ws > 0, Ws, 1), 0.0)
    th = np.where(Wc > 0, W[..., 1] / np.where(Wc > 0, Wc, 1), m_h[..., None])
    TP = (margins[..., 1] * th[..., 1]).sum(-1)
    FN = (margins[..., 0] * th[..., 0]).sum(-1)
    FP = margins[..., 1].sum(-1) - TP
    TN = margins[..., 0].sum(-1) - FN
    return bm._measures_and_grad(TP, FP, FN, TN)[0]


def run(pi, reps, n_rules=200, budget=500, N=50_000):
    rng = np.random.default_rng(int(pi * 1e4) + budget)  # the coverage study's world
    s, y, rules, kinds = make_world(N, pi, n_rules, n_rules, rng)
    truth = bm.population_measures(y, rules).values
    d = bm.design(s, budget=budget, scheme="poisson")
    H = d.n_strata
    marg = margins_of(rules, d.strata, H)
    margins = np.stack([d.stratum_sizes[None, :] - marg, marg], axis=-1)
    facts = []
    for h in range(H):
        inh = d.strata == h
        p, yy = d.inclusion[inh], y[inh]
        facts.append(
            {
                "stratum": h,
                "size": int(inh.sum()),
                "expected_labels": float(p.sum()),
                "inclusion_cv": float(p.std() / p.mean()),
                "rate": float(yy.mean()),
                "size_biased_rate": float((p * yy).sum() / p.sum()),
            }
        )
    names = [
        "difference + ratio correction (default)",
        "difference, no ratio correction",
        "default clipped to [0, 1]",
        "Hajek cell ratio",
        "SRS within strata",
    ]
    with_var = (names[0], names[4])
    K = rules.shape[0]
    est = {k: np.empty((reps, K, 5)) for k in names}
    var = {k: np.zeros((K, 5)) for k in names}
    hit = {k: {c: np.zeros((reps, K, 5)) for c in ("wald", "wilson")} for k in names}
    empty = np.zeros((K, H))
    for i in range(reps):
        smp = d.sample(rng)
        lab, Ps = y[smp.indices], rules[:, smp.indices]
        ev = bm.evaluate(lab, Ps, smp, pool_margins=marg, posterior=None)
        t = ev.table
        est[names[0]][i] = t.estimate.values
        est[names[1]][i] = bm.evaluate(
            lab, Ps, smp, pool_margins=marg, posterior=None, bias_correction=False
        ).table.estimate.values
        est[names[2]][i] = np.clip(t.estimate.values, 0, 1)
        est[names[3]][i] = hajek_cells(ev, margins)
        empty += ev.cells["count"].values[:, :, 1].sum(-1) == 0
        nh = np.bincount(smp.strata, minlength=H)
        inc = (nh / d.stratum_sizes)[smp.strata]
        srs = dataclasses.replace(smp, inclusion=inc, weights=1 / inc)
        ts = bm.evaluate(lab, Ps, srs, pool_margins=marg, posterior=None).table
        est[names[4]][i] = ts.estimate.values
        for k, tt in zip(with_var, (t, ts), strict=True):
            var[k] += np.nan_to_num(tt.stderr.values**2)
            for c in ("wald", "wilson"):
                hit[k][c][i] = (tt[f"{c}_low"].values <= truth) & (truth <= tt[f"{c}_high"].values)
    rows = []
    for kind in ("random", "informative"):
        sel = kinds == kind
        for k in names:
            for m in SHOW:
                j = MEAS.index(m)
                b = np.nanmean(est[k][:, sel, j] - truth[sel, j], 1)
                sd = np.nanstd(est[k][:, sel, j], 0, ddof=1)
                row = {
                    "prevalence": pi,
                    "rules": kind,
                    "estimator": k,
                    "measure": m,
                    "mean_bias": float(np.nanmean(b)),
                    "mc_se": float(np.nanstd(b, ddof=1) / np.sqrt(reps)),
                    "mse": float(np.nanmean((est[k][:, sel, j] - truth[sel, j]) ** 2)),
                }
                if k in with_var:
                    row["median_variance_ratio"] = float(
                        np.nanmedian((var[k][sel, j] / reps) / sd**2)
                    )
                    for c in ("wald", "wilson"):
                        row[f"coverage_{c}"] = float(hit[k][c][:, sel, j].mean())
                rows.append(row)
    facts_empty = {
        kind: (empty[kinds == kind] / reps).mean(0).tolist() for kind in ("random", "informative")
    }
    return {"strata": facts, "empty_rule_positive_cell_share": facts_empty, "rows": rows}


def write_md(res, path):
    lines = [
        "# Poisson sampling: the small-cell bias and the estimators compared",
        "",
        f"Machine: {res['meta']['machine']}; {res['meta']['seconds']:.0f} s; "
        f"{res['meta']['reps']} Poisson samples per prevalence, 200 random + 200 informative "
        "rules, pool 50,000, 500 labels (square-root design). MC se: Monte Carlo error of the "
        "bias averaged over rules (from the per-sample averages).",
    ]
    for key, r in res["settings"].items():
        lines += [
            "",
            f"## prevalence {key}",
            "",
            "| stratum | size | expected labels | CV of pi | positive rate | size-biased rate |",
            "|---|---|---|---|---|---|",
        ]
        for f in r["strata"]:
            lines.append(
                f"| {f['stratum']} | {f['size']} | {f['expected_labels']:.1f} "
                f"| {f['inclusion_cv']:.3f} | {f['rate']:.4f} | {f['size_biased_rate']:.4f} |"
            )
        e = r["empty_rule_positive_cell_share"]
        lines += [
            "",
            "Share of samples with an empty rule-positive cell, by stratum: random "
            + ", ".join(f"{x:.2f}" for x in e["random"])
            + "; informative "
            + ", ".join(f"{x:.2f}" for x in e["informative"])
            + ".",
            "",
            "| rules | estimator | measure | mean bias | MC se | z | MSE | var ratio | Wald | Wilson |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in r["rows"]:
            z = row["mean_bias"] / row["mc_se"] if row["mc_se"] > 0 else float("nan")
            lines.append(
                f"| {row['rules']} | {row['estimator']} | {row['measure']} "
                f"| {row['mean_bias']:+.5f} | {row['mc_se']:.5f} | {z:+.1f} | {row['mse']:.2e} "
                f"| {row.get('median_variance_ratio', float('nan')):.2f} "
                f"| {row.get('coverage_wald', float('nan')):.3f} "
                f"| {row.get('coverage_wilson', float('nan')):.3f} |"
            )
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=600)
    ap.add_argument("--prevalences", default="0.01,0.04")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = {"settings": {}}
    for pi in (float(x) for x in args.prevalences.split(",")):
        res["settings"][str(pi)] = run(pi, args.reps)
        print(f"pi={pi}: {time.perf_counter() - t0:.0f}s", flush=True)
    res["meta"] = {
        "machine": f"{platform.machine()} {platform.python_version()}",
        "seconds": time.perf_counter() - t0,
        "reps": args.reps,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "unknown_predictors_poisson.json").write_text(json.dumps(res, indent=1))
    write_md(res, RESULTS / "unknown_predictors_poisson.md")


if __name__ == "__main__":
    main()
