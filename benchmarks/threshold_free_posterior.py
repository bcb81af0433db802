"""Credible coverage of the threshold-free measures' posterior beside the design-based interval
(issue 17).

For the pools of ``benchmarks/threshold_free.py`` (synthetic: ``make_classification_pool`` at
1:100, 1:1,000 and 1:10,000, the generator's default model and a strong one; ``--real DIR``: the
cached real pools of the real-pool benchmark) each sample draws ``n`` labels from the
influence-function proposal (``tf.rank_proposal``, the package's default for the measure) or
uniformly (``passive``) and gives

- the design-based estimate with its default interval (guarded variance, Wilson on ``n*``:
  ``RankEstimate.confidence_interval``), and
- the item-level calibration posterior of the pool's measure
  (``bae.posterior.calibration_posterior``: a logistic calibration of the model's scores fitted to
  the labeled items, every unlabeled item's label drawn from its posterior predictive), its
  posterior mean and 95% equal-tailed credible interval.

Recorded per cell: coverage of both intervals of the pool's realized value (finite population),
their mean widths, the bias and MSE of the design estimate and of the posterior mean, and the
seconds per posterior. Writes ``benchmarks/results/threshold_free_posterior<tag>.json`` and
``.md`` (``--real``: ``threshold_free_posterior_real<tag>.*``). The committed synthetic tables were
run one skew at a time (``--prevalences 0.01 --tag _100``, ``0.001 --tag _1000``, ``0.0001 --tag
_10000``; the seed stream differs from a run of all three at once); each file's header holds its
command line.

Usage: python benchmarks/threshold_free_posterior.py [--reps 100] [--budgets 500,2000,5000]
           [--passive-budgets 2000]
       python benchmarks/threshold_free_posterior.py --real benchmarks/pools [--reps 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf

sys.path.insert(0, str(Path(__file__).parent))
from threshold_free import (
    MEASURES,
    MODELS,
    POOLS,
    error_stats,
    interval_stats,
    real_pools,
    synthetic_pools,
)

OUT = Path(__file__).parent / "results"
DESIGNS = ("optimal", "passive")


def run(pools, measures, budgets, reps, draws, rng):
    """``budgets``: ``{design: (n, …)}``."""
    rows = []
    for prev, mname, pool, y, _ in pools:
        s = tf.model_scores(pool, "model")
        pi = pool.view().positive_prob()
        for measure in measures:
            truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
            props = {
                "optimal": tf.rank_proposal(pool, measure),
                "passive": bae.passive_proposal(pool),
            }
            for design in DESIGNS:
                for n in budgets[design]:
                    est = np.full(reps, np.nan)
                    pm = np.full(reps, np.nan)
                    cov = np.zeros((reps, 2), dtype=bool)
                    wid = np.full((reps, 2), np.nan)
                    secs = []
                    for r in range(reps):
                        d = props[design].draw(n, rng=rng)
                        i = d.indices
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
                            e = tf.rank_estimate_arrays(
                                measure, s[i], y[i], d.weights, belief=pi[i]
                            )
                        if np.isfinite(e.value):
                            lo, hi = e.confidence_interval(0.95)
                            est[r], cov[r, 0], wid[r, 0] = e.value, lo <= truth <= hi, hi - lo
                        t0 = time.perf_counter()
                        post = bae.posterior.calibration_posterior(
                            pool, measure, i, y[i], draws=draws, rng=rng
                        )
                        secs.append(time.perf_counter() - t0)
                        g = post.posterior["measure"].values.ravel()
                        g = g[np.isfinite(g)]
                        lo, hi = np.quantile(g, [0.025, 0.975])
                        pm[r], cov[r, 1], wid[r, 1] = g.mean(), lo <= truth <= hi, hi - lo
                    ok = np.isfinite(est)
                    row = {
                        "prevalence": prev,
                        "model": mname,
                        "pool_size": pool.n_items,
                        "measure": measure,
                        "truth": truth,
                        "design": design,
                        "n": n,
                        "reps": reps,
                        "undefined": float(1 - ok.mean()),
                        **interval_stats({"design": cov[:, 0]}, {"design": wid[:, 0]}, ok),
                        **interval_stats(
                            {"credible": cov[:, 1]}, {"credible": wid[:, 1]}, np.isfinite(pm)
                        ),
                        **{f"{k}_design": v for k, v in error_stats(est, truth).items()},
                        **{f"{k}_posterior": v for k, v in error_stats(pm, truth).items()},
                        "seconds_posterior": float(np.mean(secs)),
                    }
                    rows.append(row)
                    print(
                        f"1:{round(1 / prev)} {mname[:22]:22s} {measure:17s} {design:8s} n={n:5d} "
                        f"cov design={row['coverage_design']:.3f} "
                        f"credible={row['coverage_credible']:.3f} "
                        f"mse design={row['mse_design']:.3g} post={row['mse_posterior']:.3g} "
                        f"({row['seconds_posterior']:.2f}s/posterior)",
                        flush=True,
                    )
    return rows


def write_md(res, path, real):
    rows = res["rows"]
    cmd = (
        f"`python benchmarks/threshold_free_posterior.py --reps {res['reps']} --budgets "
        f"{res['budgets'] or '""'} --passive-budgets {res['passive_budgets']}"
        f"{' --real benchmarks/pools' if real else ''}"
        f"{' --prevalences ' + res['prevalences'] if res.get('prevalences') else ''}"
        f"{' --tag ' + res['tag'] if res.get('tag') else ''}`"
    )
    pools = (
        "the cached real pools of the real-pool benchmark (the model column names the pool)"
        if real
        else "synthetic pools from `make_classification_pool` (seed 17; `default` = separation "
        "2.5, noise 0.4; `strong` = separation 6, noise 0.2)"
    )
    lines = [
        "# Threshold-free measures: credible coverage beside the design-based interval (issue 17)",
        "",
        f"{cmd} ({res['seconds'] / 60:.1f} min, seed {res['seed']}, {res['draws']} posterior "
        f"draws per chain, 2 chains) on {pools}. Each sample draws `n` labels from the "
        "influence-function proposal (`optimal`) or uniformly (`passive`). `design` = the "
        "estimate and its default 95% interval (guarded variance, Wilson on `n*`); `credible` = "
        "the item-level calibration posterior's mean and 95% equal-tailed interval "
        "(`bae.posterior.calibration_posterior`). Coverage is of the pool's realized value; "
        "MC s.e. of a coverage near 0.95 over "
        f"{res['reps']} samples: {np.sqrt(0.95 * 0.05 / res['reps']):.3f}. `undef` = share of "
        "samples where the design estimate is undefined (one class not drawn); the posterior is "
        "always defined. `MSE ratio` = MSE of the design estimate over MSE of the posterior mean.",
        "",
        "| skew | model | measure | design | n | undef | coverage design | coverage credible "
        "| width design | width credible | bias design | bias posterior | MSE design "
        "| MSE posterior | MSE ratio | s/posterior |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| 1:{round(1 / r['prevalence']):,} | {r['model']} | {r['measure']} | {r['design']} "
            f"| {r['n']:,} | {r['undefined']:.2f} | {r['coverage_design']:.3f} "
            f"| {r['coverage_credible']:.3f} | {r['width_design']:.3g} "
            f"| {r['width_credible']:.3g} | {r['bias_design']:+.2g} | {r['bias_posterior']:+.2g} "
            f"| {r['mse_design']:.3g} | {r['mse_posterior']:.3g} "
            f"| {r['mse_design'] / r['mse_posterior']:.2f} | {r['seconds_posterior']:.2f} |"
        )
    lines += ["", "## Summary", ""]
    for design in DESIGNS:
        sel = [r for r in rows if r["design"] == design]
        for k in ("design", "credible"):
            v = np.array([r[f"coverage_{k}"] for r in sel])
            v = v[np.isfinite(v)]
            if not v.size:
                continue
            lines.append(
                f"- {design}, {k} interval: {np.sum((v >= 0.93) & (v <= 0.97))} of {v.size} "
                f"cells in [0.93, 0.97], {np.sum(v < 0.93)} below, {np.sum(v > 0.97)} above "
                f"(range {v.min():.3f}-{v.max():.3f})"
            )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--budgets", default="500,2000,5000", help="budgets of the optimal design")
    ap.add_argument("--passive-budgets", default="2000")
    ap.add_argument("--draws", type=int, default=250, help="posterior draws per chain")
    ap.add_argument("--real", default=None, help="directory of cached real pools (.npz)")
    ap.add_argument("--prevalences", default=None, help="synthetic pools only at these, e.g. 0.001")
    ap.add_argument("--tag", default="", help="suffix of the output files' names")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    budgets = {
        "optimal": tuple(int(b) for b in args.budgets.split(",") if b),
        "passive": tuple(int(b) for b in args.passive_budgets.split(",") if b),
    }
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    if args.real:
        pools = real_pools(args.real)
    else:
        prevs = sorted(POOLS, reverse=True)
        if args.prevalences:
            prevs = [float(v) for v in args.prevalences.split(",")]
        pools = synthetic_pools(prevs, MODELS)
    rows = run(pools, MEASURES, budgets, args.reps, args.draws, rng)
    res = {
        "reps": args.reps,
        "budgets": args.budgets,
        "passive_budgets": args.passive_budgets,
        "prevalences": args.prevalences,
        "tag": args.tag,
        "draws": args.draws,
        "seed": args.seed,
        "seconds": time.perf_counter() - t0,
        "rows": rows,
    }
    stem = "threshold_free_posterior" + ("_real" if args.real else "") + args.tag
    out = Path(args.out)
    (out / f"{stem}.json").write_text(json.dumps(res, indent=1))
    write_md(res, out / f"{stem}.md", real=bool(args.real))


if __name__ == "__main__":
    main()
