"""Does a calibrated belief make a better static proposal? (issue 3, item 3)

For a synthetic pool (100,000 items, 1:1,000 positives) whose model reports probabilities that are
uncalibrated like SVM margins (``calibration="svm"``), stale (base rate ten times too high,
``"stale"``) or calibrated (control), every repetition:

1. draws a pilot of 200 items from a stratified proposal (10 cumulative-sqrt(F) score strata,
   Neyman allocation under the model's own probabilities);
2. fits each oracle model to the pilot labels (deterministic oracle);
3. builds the static optimal F1 proposal (``optimal_proposal(pool, "f1", belief=...)``) from the
   oracle's belief and draws the remaining 1,800 items;
4. estimates F1 from all 2,000 draws (pilot + main; each draw weighted by ``p/q`` of the proposal
   it came from).

Arms (all share the pilot): ``model`` (the plug-in: the model's own probabilities, point masses on
pilot items), ``calibration`` (the Bayesian calibration oracle, default belief = plug-in at the
posterior mode), ``calibration-mean`` (its posterior predictive), ``dirichlet-tree`` (fitted to the
pilot), ``truth`` (the true ``P(y=1|x)``: the best a static proposal can do) and ``passive``
(2,000 uniform draws, no pilot).

Budget accounting: 2,000 *draws* (with replacement); a repeated item is not re-labeled, so the
number of distinct labels is slightly smaller and is reported.

Run: ``python benchmarks/oracle_calibration.py [--reps 200]``. Writes
``benchmarks/results/oracle_calibration.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.oracles import make_oracle

HERE = Path(__file__).resolve().parent
N_ITEMS = 100_000
PREVALENCE = 0.001
SEPARATION, NOISE = 6.0, 0.2
PILOT, BUDGET = 200, 2_000
SETTINGS = ("svm", "stale", "calibrated")
ARMS = ("passive", "model", "calibration", "calibration-mean", "dirichlet-tree", "truth")
ORACLES = {
    "model": ("model", {}),
    "calibration": ("calibration", {}),
    "calibration-mean": ("calibration", {"predictive": "mean"}),
}


def true_f1(pool, labels) -> float:
    pred = pool.view().pred
    tp = np.sum((pred == 1) & (labels == 1))
    return float(2 * tp / (np.sum(pred == 1) + np.sum(labels == 1)))


def asymptotic_variance(pool, q, labels) -> float:
    """``Σ_x p(x)²/q(x) (Dg(R)(ℓ(x, y(x)) − R))²`` with the true labels: n × the variance of the
    F1 estimate from n draws of ``q`` (Marchant & Rubinstein (2021), Thm. 2), free of Monte Carlo
    noise."""
    m, views = pool.resolve("f1")
    L = m.loss(labels.astype(np.int32), views())
    R = pool.p @ L
    dev = (L - R) @ m.jacobian(R).T
    return float(np.sum(pool.p**2 / q * dev[:, 0] ** 2))


def belief_mse(belief, truth, unlabeled) -> float:
    return float(np.mean((belief.probs[unlabeled, 1] - truth[unlabeled]) ** 2))


def run_setting(calibration: str, reps: int, seed: int) -> dict:
    sp = make_classification_pool(
        N_ITEMS,
        PREVALENCE,
        separation=SEPARATION,
        noise=NOISE,
        calibration=calibration,
        rng=seed,
    )
    pool, labels, truth = sp.pool, sp.labels, sp.truth
    G = true_f1(pool, labels)
    pilot_prop = bae.stratified_proposal(pool, "f1", strata=10, method="csf", allocation="neyman")
    truth_belief = np.c_[1 - truth, truth]
    passive = bae.passive_proposal(pool)
    # Dirichlet-tree: initialize once, reset from its initial state each repetition
    dt = make_oracle("dirichlet-tree", deterministic=True)
    dt.initialize(pool)
    dt_state0 = dt.get_state()

    est = {a: np.empty(reps) for a in ARMS}
    se = {a: np.empty(reps) for a in ARMS}
    distinct = {a: np.empty(reps) for a in ARMS}
    bmse = {
        a: np.empty(reps) for a in ("model", "calibration", "calibration-mean", "dirichlet-tree")
    }
    t_fit = {"calibration": 0.0, "calibration-mean": 0.0, "dirichlet-tree": 0.0}
    avar = {a: np.empty(reps) for a in ARMS}
    for r in range(reps):
        rng = np.random.default_rng([seed, r])
        pilot = pilot_prop.draw(PILOT, rng)
        ypilot = labels[pilot.indices]
        lab = np.zeros(pool.n_items, bool)
        lab[pilot.indices] = True
        for arm in ARMS:
            if arm == "passive":
                draws = passive.draw(BUDGET, rng)
                avar[arm][r] = asymptotic_variance(pool, passive.q, labels)
            else:
                if arm == "truth":
                    belief = truth_belief
                else:
                    if arm == "dirichlet-tree":
                        oracle = dt
                        oracle.set_state(dt_state0)
                    else:
                        name, kw = ORACLES[arm]
                        oracle = make_oracle(name, deterministic=True, **kw)
                        oracle.initialize(pool)
                    t0 = time.perf_counter()
                    oracle.update(pilot.indices, ypilot, pilot.weights)
                    belief = oracle.belief()
                    if arm in t_fit:
                        t_fit[arm] += time.perf_counter() - t0
                    bmse[arm][r] = belief_mse(belief, truth, ~lab)
                prop = bae.optimal_proposal(pool, "f1", belief=belief)
                avar[arm][r] = asymptotic_variance(pool, prop.q, labels)
                draws = pilot + prop.draw(BUDGET - PILOT, rng)
            e = bae.estimate(pool, "f1", draws, labels[draws.indices])
            est[arm][r], se[arm][r] = e.value, e.stderr
            distinct[arm][r] = draws.n_distinct
    out = {
        "calibration": calibration,
        "true_f1": G,
        "n_positives": int(labels.sum()),
        "n_predicted_positive": int(pool.view().pred.sum()),
        "arms": {},
        "mean_fit_seconds": {k: v / reps for k, v in t_fit.items()},
    }
    sq = {a: (est[a] - G) ** 2 for a in ARMS}
    boot_rng = np.random.default_rng(seed + 1)
    boot = boot_rng.integers(0, reps, size=(2000, reps))
    for a in ARMS:
        finite = np.isfinite(est[a])
        cover = np.abs(est[a] - G) <= 1.959964 * se[a]
        row = {
            "mse": float(np.nanmean(sq[a])),
            "mse_se": float(np.nanstd(sq[a]) / np.sqrt(finite.sum())),
            "bias": float(np.nanmean(est[a]) - G),
            "sd": float(np.nanstd(est[a])),
            "wald95_coverage": float(np.mean(cover[finite])),
            "undefined_estimates": int((~finite).sum()),
            "mean_distinct_labels": float(distinct[a].mean()),
            "mse_ratio_to_model": float(np.nanmean(sq[a]) / np.nanmean(sq["model"])),
            "asymptotic_variance": float(avar[a].mean()),
            "asymptotic_variance_ratio_to_model": float(avar[a].mean() / avar["model"].mean()),
        }
        ratios = np.nanmean(sq[a][boot], axis=1) / np.nanmean(sq["model"][boot], axis=1)
        row["mse_ratio_to_model_ci95"] = [float(x) for x in np.quantile(ratios, [0.025, 0.975])]
        if a in bmse:
            row["belief_mse"] = float(bmse[a].mean())
        out["arms"][a] = row
    out["arms"]["truth"]["belief_mse"] = 0.0
    return out


def to_markdown(res: dict) -> str:
    lines = [
        "# Calibration oracle vs plug-in: static optimal F1 proposal",
        "",
        f"Pool: {res['config']['n_items']:,} items, prevalence {res['config']['prevalence']}, "
        f"separation {res['config']['separation']}, noise {res['config']['noise']}; "
        f"pilot {res['config']['pilot']} (stratified, Neyman) + "
        f"{res['config']['budget'] - res['config']['pilot']} draws from the optimal proposal "
        f"under each belief; {res['config']['reps']} repetitions per setting; "
        f"runtime {res['runtime_seconds']:.0f} s.",
        "",
        "| scores | true F1 | arm | MSE (± se) | MSE / plug-in [95% CI] | asympt. var. / plug-in | bias | Wald 95% coverage | belief MSE |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in res["settings"]:
        for a, row in s["arms"].items():
            lo, hi = row["mse_ratio_to_model_ci95"]
            bm = row.get("belief_mse")
            lines.append(
                f"| {s['calibration']} | {s['true_f1']:.3f} | {a} | "
                f"{row['mse']:.2e} (± {row['mse_se']:.1e}) | "
                f"{row['mse_ratio_to_model']:.2f} [{lo:.2f}, {hi:.2f}] | "
                f"{row['asymptotic_variance_ratio_to_model']:.2f} | {row['bias']:+.4f} | "
                f"{row['wald95_coverage']:.3f} | {'' if bm is None else f'{bm:.2e}'} |"
            )
    lines.append("")
    lines.append(
        "`MSE / plug-in`: ratio of the arm's MSE to the `model` arm's, with a paired bootstrap "
        "95% interval over repetitions. `asympt. var. / plug-in`: the same ratio for the "
        "asymptotic variance Σ p²/q (Dg(ℓ − R))² of the main-phase proposal evaluated with the "
        "true labels (no Monte Carlo noise from the draws; averaged over pilots). "
        "`belief MSE`: mean over unlabeled items of (belief P(y=1|x) − true P(y=1|x))² after "
        "the pilot. `passive`: 2,000 uniform draws, no pilot. `calibration`: the calibration "
        "oracle's default belief (plug-in at the posterior mode); `calibration-mean`: its "
        "posterior predictive (importance-corrected Laplace)."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "oracle_calibration")
    args = ap.parse_args()
    t0 = time.perf_counter()
    settings = []
    for k, cal in enumerate(SETTINGS):
        res = run_setting(cal, args.reps, args.seed + k)
        settings.append(res)
        print(
            cal, json.dumps({a: round(v["mse_ratio_to_model"], 3) for a, v in res["arms"].items()})
        )
    result = {
        "config": {
            "n_items": N_ITEMS,
            "prevalence": PREVALENCE,
            "separation": SEPARATION,
            "noise": NOISE,
            "pilot": PILOT,
            "budget": BUDGET,
            "reps": args.reps,
            "seed": args.seed,
        },
        "settings": settings,
        "runtime_seconds": time.perf_counter() - t0,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(to_markdown(result))
    print(to_markdown(result))


if __name__ == "__main__":
    main()
