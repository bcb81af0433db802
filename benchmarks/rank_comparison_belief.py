"""The paired test of two AUCs with a user's belief: ``bae.compare(pool, "roc_auc", ..., belief=)``.

``compare`` tests ``AUC_a = AUC_b`` with DeLong, DeLong & Clarke-Pearson's (1988) paired test with
importance weights and the *guarded* variance of ``threshold_free.rank_estimate``: the larger of
the empirical influence-function variance and its expectation under a label belief. The default
belief is the equal mixture of the two models' probabilities; ``belief=`` passes another one
(here the true ``η(x) = P(y = 1 | x)`` the labels were drawn from, and what a user can have: the
equal mixture of the two models' ``"calibration"`` oracle beliefs, each fitted to the same
labeled draws). For each pool, design (``passive``, ``optimal`` =
``comparison_proposal(pool, "roc_auc")``) and number of draws, the same samples are tested under
the three beliefs.

Pools (synthetic; latent ``u``, ``y ∼ Bernoulli(η)``, ``η = expit(a0 + 2.5 u)``, model scores
``s = a0 + 2.5 (u + 0.5 ε)`` and probabilities ``expit(s)``, over-dispersed against ``η``):

- ``swapped``: exact null on the pool — model b's scores are model a's with the scores of
  label-identical neighbours (in ``u``) swapped (the construction of ``benchmarks/threshold_free.py``
  and the tests), so the AUCs are equal; b's scores depend on the realized labels.
- ``mirror``: exact null on the pool — every item twice, the two models' (independently noisy)
  scores exchanged in the copy, so the pool's score distributions per class are the same for
  both; no score depends on a label, and ``η`` is the labels' true model item by item.
- power: the same ``u``, labels and model a, model b with more noise (``0.5 → τ``), so
  ``AUC_a > AUC_b`` (the true difference on the pool is recorded).

Recorded per cell: the two-sided 5% rejection rate with its Monte Carlo standard error, and
``se/sd``: the root-mean-square standard error over the standard deviation of ``Δ̂`` across the
samples (1 is an honest variance; the guard, a maximum of two estimates, is above 1 by design).

Usage: python benchmarks/rank_comparison_belief.py [--reps 600] [--power-reps 300] [--quick]
Writes benchmarks/results/rank_comparison_belief.json and .md (about 8 minutes on one core).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import special

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf

OUT = Path(__file__).parent / "results"
ALPHA = 0.05
SIZES = (500, 1000, 2000)
# name -> (kind, latent items, prevalence parameter, τ of the power pool)
POOLS = {
    "swapped 1:35": ("swapped", 20_000, 0.02, 0.6),
    "mirror 1:35": ("mirror", 10_000, 0.02, 0.6),
    "swapped 1:100": ("swapped", 100_000, 0.005, 0.8),
}


def _latent(n, prevalence, seed):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(n)
    a0 = np.log(prevalence / (1 - prevalence)) - 2.0
    eta = special.expit(a0 + 2.5 * u)
    y = (rng.random(n) < eta).astype(int)
    e1, e2 = rng.standard_normal((2, n))
    return u, a0, eta, y, e1, e2


def _pool(sa, sb):
    pa, pb = special.expit(sa), special.expit(sb)
    return bae.Pool(
        predictions={"a": (pa > 0.5).astype(int), "b": (pb > 0.5).astype(int)},
        probs={"a": pa, "b": pb},
        scores={"a": sa, "b": sb},
        classes=[0, 1],
    )


def null_pool(kind, n, prevalence, seed=5):
    """``(pool, y, η)`` with exactly equal AUCs of models a and b on the pool."""
    u, a0, eta, y, e1, e2 = _latent(n, prevalence, seed)
    sa = a0 + 2.5 * (u + 0.5 * e1)
    if kind == "mirror":
        sb = a0 + 2.5 * (u + 0.5 * e2)
        return _pool(np.r_[sa, sb], np.r_[sb, sa]), np.r_[y, y], np.r_[eta, eta]
    order = np.lexsort((u, y))
    partner = np.empty(n, dtype=np.int64)
    pairs = order[: n - n % 2].reshape(-1, 2)
    same = y[pairs[:, 0]] == y[pairs[:, 1]]
    partner[order] = order
    partner[pairs[same, 0]], partner[pairs[same, 1]] = pairs[same, 1], pairs[same, 0]
    return _pool(sa, sa[partner]), y, eta


def power_pool(n, prevalence, tau, seed=5):
    """``(pool, y, η)``: model b sees ``u`` through noise ``τ > 0.5``, so its AUC is lower."""
    u, a0, eta, y, e1, e2 = _latent(n, prevalence, seed)
    return _pool(a0 + 2.5 * (u + 0.5 * e1), a0 + 2.5 * (u + tau * e2)), y, eta


BELIEFS = ("default", "eta", "calibration")


def calibration_oracles(pool):
    """The two models' ``"calibration"`` oracles (Bayesian Platt scaling with score strata,
    ``bae.make_oracle("calibration", model=m)``), initialized on the pool and not yet fitted."""
    out = []
    for model in ("a", "b"):
        oracle = bae.make_oracle("calibration", model=model)
        oracle.initialize(pool)
        out.append(oracle)
    return out


def calibrated_belief(oracles, pool, draws, labels):
    """The equal mixture of the oracles' beliefs, each fitted (a fresh copy) to the draws."""
    probs = []
    for fresh in oracles:
        oracle = copy.deepcopy(fresh)
        oracle.update(draws.indices, labels, draws.weights)
        probs.append(oracle.belief().probs[:, pool.pos])
    return 0.5 * (probs[0] + probs[1])


def run_cells(pool, y, eta, reps, rng, label, hypothesis):
    truth = tf.weighted_roc_auc(y, pool.scores["a"]) - tf.weighted_roc_auc(y, pool.scores["b"])
    rows = []
    oracles = calibration_oracles(pool)
    designs = {
        "passive": bae.passive_proposal(pool),
        "optimal": bae.comparison_proposal(pool, "roc_auc"),
    }
    for design, prop in designs.items():
        for n in SIZES:
            rej = dict.fromkeys(BELIEFS, 0)
            se2 = {key: [] for key in BELIEFS}
            vals = []
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
                for _ in range(reps):
                    d = prop.draw(n, rng=rng)
                    lab = y[d.indices]
                    beliefs = {"default": None, "eta": eta}
                    beliefs["calibration"] = calibrated_belief(oracles, pool, d, lab)
                    for key, belief in beliefs.items():
                        res = bae.compare(pool, "roc_auc", d, lab, belief=belief)
                        if not np.isfinite(res.pvalue):
                            continue
                        rej[key] += res.pvalue < ALPHA
                        se2[key].append(res.stderr**2)
                    vals.append(res.estimate)
            vals = np.asarray(vals, dtype=float)
            sd = float(np.nanstd(vals))
            row = {
                "pool": label,
                "hypothesis": hypothesis,
                "true_difference": float(truth),
                "design": design,
                "n": n,
                "reps": reps,
                "seconds": time.perf_counter() - t0,
            }
            for key in BELIEFS:
                m = len(se2[key])
                rate = rej[key] / m if m else np.nan
                row[f"reject_{key}"] = rate
                row[f"mc_se_{key}"] = float(np.sqrt(rate * (1 - rate) / m)) if m else np.nan
                row[f"se_over_sd_{key}"] = float(np.sqrt(np.mean(se2[key])) / sd) if m else np.nan
                row[f"defined_{key}"] = m / reps
            rows.append(row)
            print(
                f"{label:14s} {hypothesis} {design:7s} n={n:5d}: reject default "
                f"{row['reject_default']:.3f} eta {row['reject_eta']:.3f} calibration "
                f"{row['reject_calibration']:.3f}  se/sd {row['se_over_sd_default']:.2f} / "
                f"{row['se_over_sd_eta']:.2f} / {row['se_over_sd_calibration']:.2f}  "
                f"({row['seconds']:.0f} s)",
                flush=True,
            )
    return rows


def _cells(r):
    ratios = " / ".join(f"{r[f'se_over_sd_{k}']:.2f}" for k in BELIEFS)
    rates = " | ".join(f"{r[f'reject_{k}']:.3f}" for k in BELIEFS)
    return f"{r['design']} | {r['n']} | {rates} | {r['mc_se_eta']:.3f} | {ratios} |"


def write_md(res, path):
    lines = [
        "# Paired AUC test with a belief: `compare(..., belief=)`",
        "",
        f"`benchmarks/rank_comparison_belief.py`: {res['reps']} samples per null cell, "
        f"{res['power_reps']} per power cell, two-sided test at α = {ALPHA}, seed {res['seed']}, "
        f"runtime {res['seconds']:.0f} s. `default` = `compare(pool, 'roc_auc', draws, labels)` "
        "(guarded variance under the equal mixture of the two models' probabilities); `η` = the "
        "same with `belief=η`, the true positive-class probabilities; `cal.` = with the equal "
        "mixture of the two models' `calibration` oracle beliefs fitted to the same draws. "
        "`se/sd` = root-mean-square standard error over the standard deviation of the estimated "
        "difference across samples (default / η / cal.).",
        "",
        "## Type-I error (exact null on the pool)",
        "",
        "| pool | design | n | default | η | cal. | MC s.e. (η) | se/sd |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in res["null"]:
        lines.append(f"| {r['pool']} | " + _cells(r))
    lines += [
        "",
        "## Power (the null pool's `u`, labels and model a; model b with noise τ; true Δ on the pool)",
        "",
        "| pool (true Δ) | design | n | default | η | cal. | MC s.e. (η) | se/sd |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in res["power"]:
        lines.append(f"| {r['pool']} (Δ = {r['true_difference']:.3f}) | " + _cells(r))
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=600, help="samples per null cell")
    ap.add_argument("--power-reps", type=int, default=300, help="samples per power cell")
    ap.add_argument("--seed", type=int, default=20260601)
    ap.add_argument("--quick", action="store_true", help="20 samples per cell, nothing written")
    args = ap.parse_args(argv)
    reps, power_reps = (20, 20) if args.quick else (args.reps, args.power_reps)
    t0 = time.perf_counter()
    null, power = [], []
    for i, (label, (kind, n, prev, tau)) in enumerate(POOLS.items()):
        # each pool its own streams, so a pool's rows do not depend on the others
        pool, y, eta = null_pool(kind, n, prev)
        null += run_cells(pool, y, eta, reps, np.random.default_rng([args.seed, i, 0]), label, 0)
        if kind == "swapped":
            pool, y, eta = power_pool(n, prev, tau)
            rng = np.random.default_rng([args.seed, i, 1])
            power += run_cells(pool, y, eta, power_reps, rng, f"b noisier {label.split()[1]}", 1)
    res = {
        "reps": reps,
        "power_reps": power_reps,
        "seed": args.seed,
        "sizes": list(SIZES),
        "pools": {k: list(v) for k, v in POOLS.items()},
        "seconds": time.perf_counter() - t0,
        "null": null,
        "power": power,
    }
    if args.quick:
        return
    OUT.mkdir(exist_ok=True)
    (OUT / "rank_comparison_belief.json").write_text(json.dumps(res, indent=1))
    write_md(res, OUT / "rank_comparison_belief.md")


if __name__ == "__main__":
    main()
