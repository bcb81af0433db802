"""Which belief should the static threshold-free estimate's guarded variance use (issue 17)?

``rank_estimate`` guards its variance with the larger of the empirical variance and the variance
the belief predicts (``variance="guarded"``), and by default the belief is the model's own
probabilities. The adaptive evaluator's guard uses instead the calibrated label model at its
mode, fitted to the labeled items (``bae.posterior.calibration_map``); a third candidate is the
Bayesian model average of the two (``calibration_map(..., with_probabilities=True)``). This script
measures all three
on the real pools of ``real_pools_data.py`` (or, with ``--synthetic``, the synthetic pools of
``threshold_free.py``) for the static optimal design (``threshold_free.rank_proposal``): 95 %
coverage and mean width of the default interval (``RankEstimate.confidence_interval``) over
``--reps`` samples per cell (those that define the measure), ROC AUC and average precision, 500
and 2,000 draws (with replacement, as ``threshold_free.py``).

Usage::

    python benchmarks/threshold_free_map_guard.py [--reps 400]
    python benchmarks/threshold_free_map_guard.py --synthetic --reps 200   # threshold_free.py's pools
    python benchmarks/threshold_free_map_guard.py --diagnose febrl3_given_name_lr average_precision 2000

writes ``results/threshold_free_map_guard{,_synthetic}.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from peer_adapter import make_pool
from real_pools_data import load_pool, pool_names
from threshold_free import interval_stats, synthetic_pools

import bayes_activeeval as bae
import bayes_activeeval.threshold_free as tf

RESULTS = Path(__file__).resolve().parent / "results"
GUARDS = ("model", "calibration_map", "bma")


def real(_args):
    for name in pool_names():
        d = load_pool(name)
        yield name, make_pool(d), d["labels"]


def synthetic(args):
    prevalences = [float(v) for v in args.prevalences.split(",")]
    for prev, mname, pool, y, _ in synthetic_pools(prevalences, ("default", "strong")):
        yield f"1:{round(1 / prev):,} {mname}", pool, y


def run(pools, reps: int, budgets, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for name, pool, y in pools:
        s = tf.model_scores(pool, "model")
        pi = pool.view().positive_prob()
        for measure in ("roc_auc", "average_precision"):
            truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
            prop = tf.rank_proposal(pool, measure)
            for n in budgets:
                cover = {g: np.zeros(reps, dtype=bool) for g in GUARDS}
                width = {g: np.full(reps, np.nan) for g in GUARDS}
                ok = np.zeros(reps, dtype=bool)
                for r in range(reps):
                    dr = prop.draw(n, rng=rng)
                    i, yy = dr.indices, y[dr.indices]
                    beliefs = {
                        "model": pi[i],
                        "calibration_map": bae.posterior.calibration_map(pool, "model", i, yy)[i],
                        "bma": bae.posterior.calibration_map(
                            pool, "model", i, yy, with_probabilities=True
                        )[i],
                    }
                    for g, b in beliefs.items():
                        e = tf.rank_estimate_arrays(measure, s[i], yy, dr.weights, belief=b)
                        ok[r] = np.isfinite(e.value)  # the same estimate under either belief
                        if ok[r]:
                            lo, hi = e.confidence_interval(0.95)
                            cover[g][r], width[g][r] = lo <= truth <= hi, hi - lo
                row = {"pool": name, "measure": measure, "n": n, "truth": float(truth)}
                row |= {"defined": int(ok.sum()), **interval_stats(cover, width, ok)}
                rows.append(row)
                print(name, measure, n, {g: round(row[f"coverage_{g}"], 3) for g in GUARDS})
    return rows


def diagnose(pool_name: str, measure: str, n: int, reps: int, seed: int) -> None:
    """Where the fitted map's interval misses and the models' probabilities' does not: per
    sample the error and both widths; among the largest overestimates (the samples that missed
    low-scored positives), how often the map's interval is the narrower. Writes
    ``results/threshold_free_map_guard_diagnosis.md``."""
    d = load_pool(pool_name)
    pool, y = make_pool(d), d["labels"]
    s, pi = tf.model_scores(pool, "model"), pool.view().positive_prob()
    truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
    prop, rng = tf.rank_proposal(pool, measure), np.random.default_rng(seed)
    err, cover, width = np.empty(reps), np.empty((reps, 2), bool), np.empty((reps, 2))
    for r in range(reps):
        dr = prop.draw(n, rng=rng)
        i, yy = dr.indices, y[dr.indices]
        for k, b in enumerate((pi[i], bae.posterior.calibration_map(pool, "model", i, yy)[i])):
            e = tf.rank_estimate_arrays(measure, s[i], yy, dr.weights, belief=b)
            lo, hi = e.confidence_interval(0.95)
            cover[r, k], width[r, k] = lo <= truth <= hi, hi - lo
        err[r] = e.value - truth
    top = err > np.quantile(err, 0.9)
    over = err > 0
    ratio = width[:, 1] / width[:, 0]
    lines = [
        "# Why the fitted map's guard under-covers where the models' probabilities' does not",
        "",
        f"`python benchmarks/threshold_free_map_guard.py --diagnose {pool_name} {measure} {n} "
        f"--reps {reps} --seed {seed}`: the static optimal design, {reps} samples of {n:,} draws; "
        "the default interval with the guard over the models' probabilities (`model`) and over "
        "`calibration_map` fitted to the sample (`map`).",
        "",
        "| | model | map |",
        "| --- | ---: | ---: |",
        f"| coverage | {cover[:, 0].mean():.3f} | {cover[:, 1].mean():.3f} |",
        f"| misses above the truth | {np.sum(~cover[:, 0] & over)} | {np.sum(~cover[:, 1] & over)} |",
        f"| misses below the truth | {np.sum(~cover[:, 0] & ~over)} "
        f"| {np.sum(~cover[:, 1] & ~over)} |",
        f"| mean width, all overestimates ({over.sum()}) | {width[over, 0].mean():.4f} "
        f"| {width[over, 1].mean():.4f} |",
        f"| mean width, the 10 % largest overestimates ({top.sum()}) | {width[top, 0].mean():.4f} "
        f"| {width[top, 1].mean():.4f} |",
        "",
        f"Among the 10 % largest overestimates the map's interval is the narrower in "
        f"{np.mean(ratio[top] < 1):.0%} of the samples; the correlation of the overestimate with "
        f"the width ratio map/model over all overestimates is {np.corrcoef(err[over], ratio[over])[0, 1]:.2f}.",
    ]
    (RESULTS / "threshold_free_map_guard_diagnosis.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--budgets", default="500,2000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--synthetic", action="store_true", help="the synthetic pools of threshold_free.py instead"
    )
    ap.add_argument("--prevalences", default="0.01,0.001", help="with --synthetic")
    ap.add_argument(
        "--diagnose", nargs=3, metavar=("POOL", "MEASURE", "DRAWS"), default=None,
        help="one real-pool cell: where the map's interval misses (writes *_diagnosis.md)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.diagnose:
        pool_name, measure, n = args.diagnose
        diagnose(pool_name, measure, int(n), args.reps, args.seed)
        return
    stem = "threshold_free_map_guard" + ("_synthetic" if args.synthetic else "")
    budgets = [int(b) for b in args.budgets.split(",")]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        rows = run((synthetic if args.synthetic else real)(args), args.reps, budgets, args.seed)
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps, "seed": args.seed,
           "seconds": time.perf_counter() - t0, "rows": rows}  # fmt: skip
    (RESULTS / f"{stem}.json").write_text(json.dumps(out, indent=1))
    lines = [
        "# The static threshold-free guard: the model's probabilities or the calibrated label model",
        "",
        f"Generated {out['date']} by `python benchmarks/threshold_free_map_guard.py --reps "
        f"{args.reps}"
        + (f" --synthetic --prevalences {args.prevalences}" if args.synthetic else "")
        + f"` ({out['seconds'] / 60:.1f} min, seed {args.seed}): the static optimal "
        "design (`rank_proposal`) on "
        + (
            "the synthetic pools of `threshold_free.py` (`make_classification_pool`, seed 17; "
            "`default`: separation 2.5, noise 0.4; `strong`: separation 6, noise 0.2)"
            if args.synthetic
            else "the real pools"
        )
        + "; 95 % coverage ± MC s.e. over the samples that define the measure and mean width of "
        "the default interval with the guarded variance, its belief the model's own "
        "probabilities (`model`, the default) or `bae.posterior.calibration_map` fitted to the "
        "sample (`calibration_map`, what the adaptive evaluator's guard uses), or the Bayesian "
        "model average of the two weighted by their marginal likelihoods of the sample's labels "
        "(`bma`: `calibration_map(..., with_probabilities=True)`).",
        "",
        "| pool | measure | draws | defined samples | model: coverage | model: width | "
        "calibration_map: coverage | calibration_map: width | bma: coverage | bma: width |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = []
        for g in GUARDS:
            c = r[f"coverage_{g}"]
            se = np.sqrt(c * (1 - c) / max(r["defined"], 1))
            cells.append(f"{c:.3f} ± {se:.3f} | {r[f'width_{g}']:.4f}")
        lines.append(
            f"| `{r['pool']}` | {r['measure']} | {r['n']:,} | {r['defined']} | {' | '.join(cells)} |"
        )
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
