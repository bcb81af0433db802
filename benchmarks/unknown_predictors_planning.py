"""The planning formula of the benchmark designs against Monte Carlo (docs/benchmark.md, Sec. 2).

``BenchmarkDesign.predicted_variance_ratio()`` predicts, for rules not known at sampling time,
the variance of the default ``"sqrt"`` design's estimates relative to simple random sampling of
the same size. This script checks it on a synthetic pool (``make_classification_pool(20000,
0.02, rng=5)``, the model's probabilities as the guess, 500 labels) with 60 random rules of
positive rate ``r̄ = π``: the MSE of sensitivity, specificity and precision under the design and
under simple random sampling (``n_strata=1``), over ``--reps`` samples of each, and their ratio
next to the predicted one.

Run::

    PYTHONPATH=. nice -n 5 .venv/bin/python benchmarks/unknown_predictors_planning.py --reps 400
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bayes_activeeval import benchmark as bm
from bayes_activeeval.datasets import make_classification_pool

OUT = Path(__file__).resolve().parent / "results" / "unknown_predictors_planning.json"
TARGETS = ("sensitivity", "specificity", "precision")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--rules", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="20 samples, 10 rules, no files")
    args = ap.parse_args(argv)
    reps, K = (20, 10) if args.quick else (args.reps, args.rules)
    t0 = time.time()
    sp = make_classification_pool(20000, 0.02, rng=5)
    s = sp.pool.view().prob[:, 1]
    y = sp.labels.astype(np.int8)
    rng = np.random.default_rng(1)
    pi = float(s.mean())
    rules = (rng.random((K, s.size)) < pi).astype(np.int8)
    truth = bm.population_measures(y, rules).sel(measure=list(TARGETS)).values
    designs = {"sqrt": bm.design(s, budget=500), "srs": bm.design(s, budget=500, n_strata=1)}
    predicted = designs["sqrt"].predicted_variance_ratio()
    mse = {}
    for name, d in designs.items():
        err2 = np.zeros((K, len(TARGETS)))
        count = np.zeros((K, len(TARGETS)))
        for _ in range(reps):
            smp = d.sample(rng)
            ev = bm.evaluate(y[smp.indices], rules, smp, posterior=None)
            est = ev.table["estimate"].sel(measure=list(TARGETS)).values
            ok = np.isfinite(est)
            err2 += np.where(ok, (est - truth) ** 2, 0.0)
            count += ok
        mse[name] = (err2.sum(axis=0) / count.sum(axis=0)).tolist()
    res = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cmdline": "python "
            + " ".join(["benchmarks/unknown_predictors_planning.py", *sys.argv[1:]]),
            "seconds": round(time.time() - t0, 1),
            "reps": reps,
            "rules": K,
            "prevalence_guess": pi,
        },
        "predicted_ratio": {t: float(predicted[t]) for t in TARGETS},
        "mse": {k: dict(zip(TARGETS, v, strict=True)) for k, v in mse.items()},
        "mc_ratio": {t: mse["sqrt"][j] / mse["srs"][j] for j, t in enumerate(TARGETS)},
    }
    lines = [
        "# Benchmark designs: predicted against Monte Carlo variance ratio",
        "",
        f"`{res['meta']['cmdline']}` ({res['meta']['date']}, {res['meta']['seconds']} s): "
        f"{K} random rules at r̄ = π = {pi:.4f}, {reps} samples of each design, 500 labels.",
        "",
        "| target | predicted ratio | MSE sqrt design | MSE random sampling | Monte Carlo ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for t in TARGETS:
        lines.append(
            f"| {t} | {res['predicted_ratio'][t]:.3f} | {res['mse']['sqrt'][t]:.3g} | "
            f"{res['mse']['srs'][t]:.3g} | {res['mc_ratio'][t]:.3f} |"
        )
    md = "\n".join(lines) + "\n"
    if args.quick:
        print(md)
        return 0
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
