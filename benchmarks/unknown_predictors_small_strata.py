"""Ratio bias of sensitivity and F1 when strata holding many positives get one or two labels.

A reviewer found that ``design(g, budget=300, method="paper", defensive=0, min_per_stratum=1)``
on a pool of 20,000 items with 2% positives overestimates a random rule's sensitivity by about
half its value. This study measures the bias (± Monte Carlo s.e.), the sampling SD and 95%
Wilson coverage of random and informative rules under that design, the package defaults, and
the other allocations, next to the design's predicted coefficient of variation of the
estimated positive total (``BenchmarkDesign.positives_cv``), which bounds the ratio bias in
standard errors (Hartley & Ross, 1954).

Pool: ``g ~ Beta(0.3, 15)`` (mean 0.02), labels ``y ~ Bernoulli(g)`` (a calibrated guess);
40 random rules (rate 0.05, independent of ``y``) and 40 informative rules (``logit g`` plus
noise, thresholded at rates 1-8%). 200 stratified samples of 300 labels per design.

Run: ``python benchmarks/unknown_predictors_small_strata.py`` (about a minute);
results in ``benchmarks/results/unknown_predictors_small_strata.{json,md}``.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import special

from bayes_activeeval import benchmark as bm

RESULTS = Path(__file__).parent / "results"
R = 200
N, BUDGET, K = 20_000, 300, 40
SETTINGS = {
    "paper, defensive=0, min_per_stratum=1": dict(method="paper", defensive=0.0, min_per_stratum=1),
    "paper, defensive=0, min_per_stratum=2": dict(method="paper", defensive=0.0, min_per_stratum=2),
    "paper (defaults: defensive=0.1, min_per_stratum=2)": dict(method="paper"),
    "sqrt (package default)": dict(),
    "sqrt, Poisson": dict(scheme="poisson"),
    "proportional": dict(method="proportional"),
    "equal": dict(method="equal"),
}


def world(seed=0):
    rng = np.random.default_rng(seed)
    g = rng.beta(0.3, 15, N)
    y = (rng.random(N) < g).astype(np.int8)
    rand = (rng.random((K, N)) < 0.05).astype(np.int8)
    lo = special.logit(np.clip(g, 1e-9, 1 - 1e-9))
    info = np.empty((K, N), np.int8)
    for k in range(K):
        sc = lo + rng.uniform(0.5, 2.0) * rng.standard_normal(N)
        info[k] = sc > np.quantile(sc, 1 - rng.uniform(0.01, 0.08))
    return g, y, {"random": rand, "informative": info}


def study(d, y, rules, bias_correction=True):
    truth = bm.population_measures(y, rules).values
    est = np.empty((R, rules.shape[0], 5))
    cov = np.empty_like(est)
    for r in range(R):
        s = d.sample(rng=r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = bm.evaluate(
                y[s.indices], rules, s, posterior=None, bias_correction=bias_correction
            ).table
        est[r] = t["estimate"].values
        cov[r] = (t["wilson_low"].values <= truth) & (truth <= t["wilson_high"].values)
    err = est - truth
    return {
        "truth": truth.mean(0),
        "bias": np.nanmean(err, (0, 1)),
        "mc_se": np.nanstd(np.nanmean(err, 1), 0, ddof=1) / np.sqrt(R),
        "sd": np.nanmean(np.nanstd(est, 0, ddof=1), 0),
        "wilson": np.nanmean(cov, (0, 1)),
    }


def main():
    t0 = time.time()
    g, y, rules = world()
    rows = []
    for name, kw in SETTINGS.items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            d = bm.design(g, budget=BUDGET, **kw)
        warned = any("coefficient of variation" in str(x.message) for x in w)
        variants = [("on", True)] + ([("off", False)] if "min_per_stratum=1" in name else [])
        for kind, P in rules.items():
            for bc_name, bc in variants:
                o = study(d, y, P, bc)
                for j, m in enumerate(bm.MEASURES[:4]):
                    rows.append(
                        {
                            "design": name,
                            "allocation": [float(a) for a in d.allocation],
                            "positives_cv": d.positives_cv(),
                            "warns": warned,
                            "bias_correction": bc_name,
                            "rules": kind,
                            "measure": m,
                            **{k: float(v[j]) for k, v in o.items()},
                        }
                    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "unknown_predictors_small_strata.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "# Ratio bias with one or two labels in strata that hold many positives",
        "",
        f"Pool {N} items, prevalence {y.mean():.4f} (calibrated Beta(0.3, 15) guess), {BUDGET} "
        f"labels, {K} random rules (rate 0.05) and {K} informative rules, {R} stratified "
        "samples per design (`benchmarks/unknown_predictors_small_strata.py`, "
        f"{time.time() - t0:.0f} s). Bias = mean over rules and samples of estimate − truth "
        "(± Monte Carlo s.e.); SD = mean over rules of the sampling SD; `CV` = the design's "
        "predicted coefficient of variation of the estimated positive total "
        "(`positives_cv()`), a bound on |bias| / SD for sensitivity (Hartley & Ross, 1954); "
        "`warns`: `design` warns (CV > 0.5).",
        "",
        "| design | allocation | CV | warns | bias corr. | rules | measure | truth | bias ± MC s.e. "
        "| SD | bias / SD | Wilson 95% coverage |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        alloc = " ".join(f"{a:.0f}" for a in r["allocation"])
        lines.append(
            f"| {r['design']} | {alloc} | {r['positives_cv']:.2f} | {'yes' if r['warns'] else 'no'} "
            f"| {r['bias_correction']} | {r['rules']} | {r['measure']} | {r['truth']:.4f} "
            f"| {r['bias']:+.4f} ± {r['mc_se']:.4f} | {r['sd']:.4f} "
            f"| {r['bias'] / r['sd']:+.2f} | {r['wilson']:.3f} |"
        )
    (RESULTS / "unknown_predictors_small_strata.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
