"""Coverage of the contingency-table posterior's 95 % credible intervals (issue 3, item 5).

Same pools as ``adaptive_f1.py``; each repetition runs the adaptive evaluator (2,000 labels, plug-in
and Dirichlet-tree oracles) and computes the posterior of F1 with the conjugate model (20 strata ×
4 score bins, s0 = 0.5) with design-weighted counts (the default) and with unweighted counts and
finite-population inference (``weighting="none"``), and, for the first ``--pymc-reps``
repetitions, the hierarchical PyMC model (defaults). Reported beside each: the Wald coverage (CLT and martingale variances) of the same runs.

Run: PYTHONPATH=. python benchmarks/contingency_coverage.py --minutes 12
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from adaptive_f1 import BUDGET, SETTINGS, make, truth_f1

import bayes_activeeval as bae
from bayes_activeeval.estimators import UndefinedEstimateWarning

OUT = Path(__file__).parent / "results"


def interval(post):
    g = post.posterior["measure"].values.ravel()
    lo, hi = np.quantile(g, [0.025, 0.975])
    return float(lo), float(hi), float(g.mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--pymc-reps", type=int, default=2)
    args = ap.parse_args()
    warnings.simplefilter("ignore", UndefinedEstimateWarning)
    datas = [make(s) for s in SETTINGS]
    truths = [truth_f1(d) for d in datas]
    oracles = ("model", "dirichlet-tree")
    rec = {(s["name"], o): [] for s in SETTINGS for o in oracles}
    t_end = time.time() + 60 * args.minutes
    seed = 0
    while time.time() < t_end:
        for s, d in zip(SETTINGS, datas, strict=True):
            for o in oracles:
                ev = bae.ActiveEvaluator(d.pool, "f1", oracle=o, rng=seed)
                est = ev.run(d.labeler, budget=BUDGET, progress=False)
                r = {}
                for name, e in (("wald_clt", est), ("wald_martingale", ev.estimate("martingale"))):
                    lo, hi = e.confidence_interval(0.95, "wald")
                    r[name] = (lo, hi, e.value)
                r["conjugate"] = interval(ev.posterior(draws=500, rng=seed, weighting="none"))
                r["conjugate_design"] = interval(ev.posterior(draws=500, rng=seed))
                if seed < args.pymc_reps:
                    r["pymc"] = interval(ev.posterior(method="pymc", draws=300, tune=500, rng=seed))
                rec[(s["name"], o)].append(r)
        seed += 1
        print(f"{seed} reps, {(t_end - time.time()) / 60:.1f} min left", flush=True)
    rows = []
    for (name, o), rs in rec.items():
        truth = truths[[s["name"] for s in SETTINGS].index(name)]
        row = {"setting": name, "oracle": o, "true_f1": truth, "repetitions": len(rs)}
        for key in ("wald_clt", "wald_martingale", "conjugate", "conjugate_design", "pymc"):
            vals = [r[key] for r in rs if key in r]
            if vals:
                row[f"{key}_coverage"] = float(np.mean([lo <= truth <= hi for lo, hi, _ in vals]))
                row[f"{key}_width"] = float(np.mean([hi - lo for lo, hi, _ in vals]))
                row[f"{key}_n"] = len(vals)
        rows.append(row)
    OUT.mkdir(exist_ok=True)
    (OUT / "contingency_coverage.json").write_text(json.dumps(rows, indent=2))
    lines = [
        f"# Coverage of 95 % intervals at {BUDGET} labels ({seed} repetitions; PyMC on the first "
        f"{args.pymc_reps})",
        "",
        "Coverage (mean width). `design`: the default conjugate contingency posterior "
        "(design-weighted counts); `finite-pop.`: conjugate with `weighting='none'`; `pymc`: "
        "hierarchical model.",
        "",
        "| setting | oracle | Wald CLT | Wald martingale | finite-pop. | design | pymc |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:

        def c(key, r=r):
            if f"{key}_coverage" not in r:
                return ""
            return f"{r[f'{key}_coverage']:.2f} ({r[f'{key}_width']:.3f}, n={r[f'{key}_n']})"

        lines.append(
            f"| {r['setting']} | {r['oracle']} | {c('wald_clt')} | {c('wald_martingale')} | "
            f"{c('conjugate')} | {c('conjugate_design')} | {c('pymc')} |"
        )
    (OUT / "contingency_coverage.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
