"""Wilson coverage under a calibrated and an over-confident guess, with and without the pooled floor.

``benchmark.evaluate`` smooths each cell's variance towards its stratum's positive rate, and
that rate is itself floored by one pseudo-label at the pool's estimated rate (the "pooled floor
of the target", ``docs/benchmark.md`` §3). This study measures what the floor does to the 95%
Wilson intervals when the design's guess under-rates strata. Setup (the review's check): a
synthetic pool of 20,000 items at prevalence 0.02 (``make_classification_pool``, seed 1), 40
random rules (positive rate 0.005-0.1, independent of the label) and 40 informative rules
(thresholded noisy true log-odds, positive rate 0.5-4x the prevalence), the default stratified
sqrt design at 500 labels, post-stratified evaluation with the rules known on the whole pool.
The design is built from

- the calibrated guess ``s`` (the pool's own probabilities), and
- an over-confident guess ``expit(2 logit(s))`` (logit doubled),

and every sample is evaluated twice, with the floor (the default, one pseudo-label) and without
it (``evaluate._TARGET_PSEUDO = 0``), so the two are compared on the same samples. Reported per
guess, rule group and measure (accuracy, sensitivity, specificity, precision): Wilson coverage
and mean width (averaged over rules and samples), with Monte Carlo standard errors taken from
the spread of the per-sample rule averages over the samples.

Run: ``nice -n 5 python benchmarks/unknown_predictors_guess.py [--samples 300] [--quick]``;
results in ``benchmarks/results/unknown_predictors_guess.{json,md}`` (``--quick``: 10 samples,
written with a ``_quick`` suffix).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

from bayes_activeeval import benchmark as bm
from bayes_activeeval.datasets import make_classification_pool

# the module (the package re-exports a function of the same name)
ev_mod = importlib.import_module("bayes_activeeval.benchmark.evaluate")

RESULTS = Path(__file__).parent / "results"
MEASURES = ["accuracy", "sensitivity", "specificity", "precision"]
N_ITEMS, PREVALENCE, BUDGET, N_RANDOM, N_INFORMATIVE = 20_000, 0.02, 500, 40, 40
WORLD_SEED = 1
GUESSES = {"calibrated": 7, "over-confident": 3}  # guess -> seed of the samples
FLOORS = {"with floor": 1.0, "without floor": 0.0}  # -> evaluate._TARGET_PSEUDO


def world(seed=WORLD_SEED):
    """The pool's guess ``s``, labels ``y`` and rules (K, N): random first, then informative."""
    rng = np.random.default_rng(seed)
    sp = make_classification_pool(N_ITEMS, PREVALENCE, rng=rng)
    s = sp.pool.view().prob[:, 1]
    y = sp.labels.astype(np.int8)
    lo = special.logit(np.clip(sp.truth, 1e-12, 1 - 1e-12))
    r = rng.uniform(0.005, 0.1, N_RANDOM)
    rand = (rng.random((N_RANDOM, N_ITEMS)) < r[:, None]).astype(np.int8)
    info = []
    for _ in range(N_INFORMATIVE):
        sc = lo + rng.uniform(0.4, 1.5) * 2.5 * rng.standard_normal(N_ITEMS)
        rate = rng.uniform(0.5, 4) * PREVALENCE
        info.append((sc > np.quantile(sc, 1 - rate)).astype(np.int8))
    return s, y, np.vstack([rand, np.array(info)])


def guess_of(s, name):
    if name == "calibrated":
        return s
    return special.expit(2.0 * special.logit(np.clip(s, 1e-12, 1 - 1e-12)))


def run(samples):
    s, y, rules = world()
    truth = bm.population_measures(y, rules).sel(measure=MEASURES).values  # (K, M)
    groups = {"random": np.arange(N_RANDOM), "informative": np.arange(N_RANDOM, len(rules))}
    rows = []
    saved = ev_mod._TARGET_PSEUDO
    for gname, seed in GUESSES.items():
        dsg = bm.design(guess_of(s, gname), budget=BUDGET)
        rng = np.random.default_rng(seed)
        # per sample x floor: group-mean coverage and width (S, F, G, M)
        cov = np.full((samples, len(FLOORS), len(groups), len(MEASURES)), np.nan)
        wid = cov.copy()
        for i in range(samples):
            smp = dsg.sample(rng)
            for f, pseudo in enumerate(FLOORS.values()):
                ev_mod._TARGET_PSEUDO = pseudo
                try:
                    t = bm.evaluate(y[smp.indices], rules, smp, posterior=None).table
                finally:
                    ev_mod._TARGET_PSEUDO = saved
                lo = t["wilson_low"].sel(measure=MEASURES).values
                hi = t["wilson_high"].sel(measure=MEASURES).values
                c = ((lo <= truth) & (truth <= hi)).astype(float)
                c[np.isnan(lo) | np.isnan(hi)] = np.nan
                for g, idx in enumerate(groups.values()):
                    cov[i, f, g] = np.nanmean(c[idx], 0)
                    wid[i, f, g] = np.nanmean((hi - lo)[idx], 0)
        for f, fname in enumerate(FLOORS):
            for g, grp in enumerate(groups):
                for m, meas in enumerate(MEASURES):
                    cv, wd = cov[:, f, g, m], wid[:, f, g, m]
                    n = np.isfinite(cv).sum()
                    rows.append(
                        {
                            "guess": gname,
                            "floor": fname,
                            "rules": grp,
                            "measure": meas,
                            "coverage": float(np.nanmean(cv)),
                            "coverage_se": float(np.nanstd(cv, ddof=1) / np.sqrt(n)),
                            "width": float(np.nanmean(wd)),
                            "width_se": float(np.nanstd(wd, ddof=1) / np.sqrt(n)),
                            "samples": int(n),
                        }
                    )
    return rows


def write_md(path, rows, meta):
    lines = [
        "# Wilson coverage under a calibrated and an over-confident guess — results",
        "",
        f"Command: `{meta['command']}`; run {meta['date']}, took {meta['seconds']:.0f} s.",
        "",
        f"Pool of {N_ITEMS:,} items, prevalence {PREVALENCE}, {BUDGET} labels (default stratified "
        f"sqrt design), {N_RANDOM} random + {N_INFORMATIVE} informative rules, "
        f"{meta['samples']} samples per guess; each sample evaluated with and without the pooled "
        "floor of the smoothing target. Over-confident guess: `expit(2 logit(s))`. Coverage and "
        "width: 95% Wilson interval, averaged over the group's rules and the samples; ± is the "
        "Monte Carlo standard error over samples.",
        "",
        "| guess | rules | measure | coverage with floor | coverage without | "
        "width with floor | width without | width ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    key = {(r["guess"], r["floor"], r["rules"], r["measure"]): r for r in rows}
    for g in GUESSES:
        for grp in ("random", "informative"):
            for m in MEASURES:
                a, b = key[(g, "with floor", grp, m)], key[(g, "without floor", grp, m)]
                lines.append(
                    f"| {g} | {grp} | {m} | {a['coverage']:.3f} ± {a['coverage_se']:.3f} | "
                    f"{b['coverage']:.3f} ± {b['coverage_se']:.3f} | {a['width']:.4f} | "
                    f"{b['width']:.4f} | {a['width'] / b['width']:.3f} |"
                )
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=300, help="samples per guess")
    ap.add_argument("--quick", action="store_true", help="10 samples, smoke run")
    a = ap.parse_args()
    samples = 10 if a.quick else a.samples
    t0 = time.time()
    rows = run(samples)
    meta = {
        "command": "nice -n 5 python "
        + " ".join(["benchmarks/unknown_predictors_guess.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": time.time() - t0,
        "samples": samples,
        "n_items": N_ITEMS,
        "prevalence": PREVALENCE,
        "budget": BUDGET,
        "rules": {"random": N_RANDOM, "informative": N_INFORMATIVE},
        "seeds": {"world": WORLD_SEED, "samples": GUESSES},
    }
    tag = "_quick" if a.quick else ""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"unknown_predictors_guess{tag}.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1)
    )
    write_md(RESULTS / f"unknown_predictors_guess{tag}.md", rows, meta)
    print((RESULTS / f"unknown_predictors_guess{tag}.md").read_text())


if __name__ == "__main__":
    main()
