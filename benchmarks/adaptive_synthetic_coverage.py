"""Coverage and bias of the adaptive F1 estimate on a calibrated synthetic pool with known truth.

The pool is ``make_classification_pool(20_000, 0.01, rng=123)`` (1% positives, the model's own
probabilities calibrated; true F1 0.21053). Designs, each exactly as a user gets it apart from the
named option: ``default`` (``ActiveEvaluator(pool, "f1")``: the ensemble oracle and the
model-assisted difference estimate), ``dirichlet-tree`` (``oracle="dirichlet-tree"``) and ``ipw``
(``estimator="ipw"``: Marchant & Rubinstein's AIS estimate). Run ``s`` uses ``rng=1000 + s``; it is
evaluated at 300 labels and then, for the first ``--reps-1000`` runs, continued (``run`` to the
larger budget, as a resumed evaluation is) to 1,000 labels and evaluated again. At each budget two
estimates of the same draws: the plain one (``estimate()``) and the bias-corrected one
(``estimate(bias_correction=True)``: for the difference estimate the second-order correction
``½ Σ H Ŝ`` of ``g`` at its own covariance, for IPW :func:`~bayes_activeeval.estimators.ratio_bias`;
Cochran (1977), Sec. 6.8), each with its own default 95% interval (``confidence_interval()``).

Reported per design, budget and estimate: coverage of the 95% interval with its binomial Monte
Carlo s.e., the share of runs whose interval lies wholly below the truth (``miss low``) or above it
(``miss high``), the mean error ``Ĝ − G`` with its Monte Carlo s.e., the RMSE, the mean standard
error, and the SD of ``z = (Ĝ − G)/se`` (1 for an honest standard error).

Usage: PYTHONPATH=. python benchmarks/adaptive_synthetic_coverage.py [--reps-300 400]
[--reps-1000 150] [--designs default dirichlet-tree ipw]
Writes benchmarks/results/adaptive_synthetic_coverage.{json,md}. About 8 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool

OUT = Path(__file__).parent / "results"
DESIGNS = {
    "default": {},
    "dirichlet-tree": {"oracle": "dirichlet-tree"},
    "ipw": {"estimator": "ipw"},
}
BUDGETS = (300, 1000)
ESTIMATES = ("plain", "bias_corrected")


def record(ev) -> dict[str, list[float]]:
    out = {}
    for key, kw in (("plain", {}), ("bias_corrected", {"bias_correction": True})):
        e = ev.estimate(**kw)
        lo, hi = e.confidence_interval(0.95)
        out[key] = [float(e.value), float(e.stderr), float(np.ravel(lo)[0]), float(np.ravel(hi)[0])]
    return out


def summarize(rows: list[list[float]], truth: float) -> dict[str, float]:
    a = np.asarray(rows, dtype=float)
    v, se, lo, hi = a.T
    n = len(v)
    err = v - truth
    cov = float(np.mean((lo <= truth) & (truth <= hi)))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = err / se
    z = z[np.isfinite(z)]
    return {
        "runs": n,
        "coverage": cov,
        "coverage_mc_se": float(np.sqrt(cov * (1 - cov) / n)),
        "miss_low": float(np.mean(hi < truth)),
        "miss_high": float(np.mean(lo > truth)),
        "mean_error": float(err.mean()),
        "mean_error_mc_se": float(err.std(ddof=1) / np.sqrt(n)),
        "rmse": float(np.sqrt(np.mean(err**2))),
        "mean_stderr": float(se.mean()),
        "sd_z": float(z.std(ddof=1)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps-300", type=int, default=400)
    ap.add_argument("--reps-1000", type=int, default=150)
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--out", default="adaptive_synthetic_coverage")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    data = make_classification_pool(20_000, 0.01, rng=123)
    pool = data.pool
    m, views = pool.resolve("f1", None)
    R = m.loss(data.labels.astype(np.int64), views(np.arange(pool.n_items))).mean(axis=0)
    truth = float(m.g(R)[0])
    records: dict[str, dict[str, list]] = {}
    seconds: dict[str, float] = {}
    for name in args.designs:
        t0 = time.time()
        recs: dict[str, list] = {str(b): [] for b in BUDGETS}
        for s in range(max(args.reps_300, args.reps_1000)):
            ev = bae.ActiveEvaluator(pool, "f1", rng=1000 + s, **DESIGNS[name])
            ev.run(data.labeler, budget=BUDGETS[0], progress=False)
            if s < args.reps_300:
                recs[str(BUDGETS[0])].append(record(ev))
            if s < args.reps_1000:
                ev.run(data.labeler, budget=BUDGETS[1], progress=False)
                recs[str(BUDGETS[1])].append(record(ev))
        records[name] = recs
        seconds[name] = time.time() - t0
        print(f"{name}: {seconds[name]:.0f} s", flush=True)
    summary = {
        name: {
            b: {k: summarize([r[k] for r in rs], truth) for k in ESTIMATES}
            for b, rs in recs.items()
        }
        for name, recs in records.items()
    }
    result = {
        "pool": "make_classification_pool(20_000, 0.01, rng=123)",
        "true_f1": truth,
        "true_risk": R.tolist(),
        "seconds": seconds,
        "summary": summary,
        "records": records,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps(result, indent=1))
    lines = [
        "# Adaptive F1 on a calibrated synthetic pool: coverage and bias",
        "",
        f"`benchmarks/adaptive_synthetic_coverage.py`: pool "
        f"`make_classification_pool(20_000, 0.01, rng=123)` (1% positives, calibrated model "
        f"probabilities), true F1 {truth:.5f}. Run `s` uses `rng=1000 + s`, is evaluated at 300 "
        "labels and (the first runs) continued to 1,000. `plain`: `estimate()`; "
        "`bias-corrected`: `estimate(bias_correction=True)`. Coverage of the default 95% "
        "interval ± binomial Monte Carlo s.e.; misses: interval wholly below (low) or above "
        "(high) the truth; mean error `Ĝ − G` ± Monte Carlo s.e.; `sd z`: SD of `(Ĝ − G)/se` "
        "(1 for an honest standard error).",
        "",
        "| design | labels | estimate | runs | coverage | miss low | miss high | mean error "
        "| RMSE | mean se | sd z |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, by_b in summary.items():
        for b, by_k in by_b.items():
            for k, r in by_k.items():
                lines.append(
                    f"| {name} | {b} | {k.replace('_', '-')} | {r['runs']} | "
                    f"{r['coverage']:.3f} ± {r['coverage_mc_se']:.3f} | {r['miss_low']:.3f} | "
                    f"{r['miss_high']:.3f} | {r['mean_error']:+.4f} ± {r['mean_error_mc_se']:.4f} | "
                    f"{r['rmse']:.4f} | {r['mean_stderr']:.4f} | {r['sd_z']:.2f} |"
                )
    lines += [
        "",
        "Seconds per design (all runs): "
        + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items())
        + ".",
        "",
    ]
    (OUT / f"{args.out}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
