"""Adaptive evaluation of ROC AUC (issue 17): coverage of the guarded interval with the calibrated
label model's belief against the models' own probabilities.

``ActiveEvaluator(pool, "roc_auc")`` with no options (the default oracle) runs to ``--budget``
labels; on the same draws the 95% interval (``RankEstimate.confidence_interval``: Wilson on
``n*``) is computed with three variances:

- ``calibrated`` (the default since this benchmark): the guard ``max(empirical, belief)``, the
  belief term averaging each draw's squared influence over the calibration posterior's label
  model at its mode, fitted to all labeled items (``bae.posterior.calibration_map``);
- ``model``: the same guard over the models' own probabilities (the default before);
- ``empirical``: the influence-function variance alone.

Pools: synthetic (``make_classification_pool``, 100,000 items at 1:100, seed 17) with calibrated
probabilities and with SVM-like ones (``calibration="svm"``: right ordering, wrong scale), and the
real-pool benchmark's cached pools named with ``--real``. Writes
``benchmarks/results/adaptive_rank.json`` and ``.md``; ``--part NAME`` runs one pool and
checkpoints ``adaptive_rank.part-NAME.json`` in ``--out``, ``--merge`` joins the parts.

Usage: python benchmarks/adaptive_rank.py --part calibrated [--reps 100] [--budget 1000]
       python benchmarks/adaptive_rank.py --part diamonds_ideal_svm --real benchmarks/pools
       python benchmarks/adaptive_rank.py --merge
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
from bayes_activeeval.datasets import make_classification_pool

sys.path.insert(0, str(Path(__file__).parent))
from threshold_free import error_stats, interval_stats

OUT = Path(__file__).parent / "results"
SYNTHETIC = {"calibrated": {}, "svm": {"calibration": "svm"}}
VARIANTS = ("calibrated", "model", "empirical")


def load_pool(name, real):
    if name in SYNTHETIC:
        sp = make_classification_pool(100_000, 0.01, rng=17, **SYNTHETIC[name])
        return sp.pool, sp.labels.astype(int)
    d = np.load(Path(real) / f"{name}.npz")
    pool = bae.Pool(
        predictions=d["preds"].astype(int), probs=d["probs"], scores=d["scores"], classes=[0, 1]
    )
    return pool, d["labels"].astype(int)


def run(name, pool, y, measure, budget, reps, seed):
    s = tf.model_scores(pool, "model")
    own = pool.view().positive_prob()
    truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
    vals = np.full(reps, np.nan)
    cover = {k: np.zeros(reps, dtype=bool) for k in VARIANTS}
    width = {k: np.full(reps, np.nan) for k in VARIANTS}
    secs = []
    for r in range(reps):
        t0 = time.perf_counter()
        ev = bae.ActiveEvaluator(pool, measure, rng=seed + r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev.run(lambda i: y[i], budget=budget, progress=False)
            est = ev.estimate()
            d = ev.draws()
            i = d["item"].to_numpy()
            yy = y[i]
            kw = {"variance_weights": None, "n_labels": ev.n_labels}
            by_model = tf.rank_estimate_arrays(
                measure, s[i], yy, d["weight"].to_numpy(), belief=own[i], **kw
            )
            emp = tf.rank_estimate_arrays(
                measure, s[i], yy, d["weight"].to_numpy(), variance="empirical", **kw
            )
        secs.append(time.perf_counter() - t0)
        vals[r] = est.value
        if not np.isfinite(est.value):
            continue
        for k, e in (("calibrated", est), ("model", by_model), ("empirical", emp)):
            lo, hi = e.confidence_interval(0.95)
            cover[k][r] = lo <= truth <= hi
            width[k][r] = hi - lo
    row = {
        "pool": name,
        "prevalence": float(y.mean()),
        "pool_size": pool.n_items,
        "measure": measure,
        "truth": truth,
        "budget": budget,
        "reps": reps,
        **error_stats(vals, truth),
        "seconds_per_run": float(np.mean(secs)),
        **interval_stats(cover, width, np.isfinite(vals)),
    }
    print(json.dumps(row), flush=True)
    return row


def write_md(rows, path, meta):
    lines = [
        "# Adaptive ROC AUC: the guard's belief (issue 17)",
        "",
        f"`python benchmarks/adaptive_rank.py` in parts ({', '.join(meta['parts'])}), "
        f"{meta['reps']} runs each, seed {meta['seed']} + run. `ActiveEvaluator(pool, "
        '"roc_auc")` with the default oracle to the budget; coverage of the 95% interval '
        "(Wilson on `n*`) of the pool's AUC on the same draws with the guard over the calibrated "
        "label model (`calibrated`, the default), over the models' own probabilities (`model`, "
        "the default before) and with the empirical variance alone (`empirical`). MC s.e. of a "
        f"coverage near 0.95: {np.sqrt(0.95 * 0.05 / meta['reps']):.3f}.",
        "",
        "| pool | skew | budget | runs | bias | MSE | coverage calibrated | coverage model "
        "| coverage empirical | width calibrated | width model | width empirical | s/run |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['pool']} | 1:{round(1 / r['prevalence']):,} | {r['budget']:,} | {r['reps']} "
            f"| {r['bias']:+.2g} | {r['mse']:.3g} | {r['coverage_calibrated']:.3f} "
            f"| {r['coverage_model']:.3f} | {r['coverage_empirical']:.3f} "
            f"| {r['width_calibrated']:.3g} | {r['width_model']:.3g} | {r['width_empirical']:.3g} "
            f"| {r['seconds_per_run']:.1f} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", default=None, help="a pool: calibrated, svm or a real pool's name")
    ap.add_argument("--real", default="benchmarks/pools")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--measure", default="roc_auc")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.merge:
        parts = sorted(out.glob("adaptive_rank.part-*.json"))
        rows = [json.loads(p.read_text()) for p in parts]
        meta = {
            "parts": [p.stem.split("part-")[1] for p in parts],
            "reps": rows[0]["reps"],
            "seed": args.seed,
        }
        (out / "adaptive_rank.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
        write_md(rows, out / "adaptive_rank.md", meta)
        return
    if args.part is None:
        ap.error("give --part POOL or --merge")
    pool, y = load_pool(args.part, args.real)
    row = run(args.part, pool, y, args.measure, args.budget, args.reps, args.seed)
    (out / f"adaptive_rank.part-{args.part}.json").write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
