"""Type-I error of ``bae.compare`` and ``bae.sequential_compare`` with very few draws.

On an exact null (every item of ``make_classification_pool(3000, 0.3, n_models=2, rng=0)`` in two
copies with the models' predictions swapped, ``permuted_null`` of
``benchmarks/comparison_type1_power.py``: both models' pool risks are equal), the two-sided test
at α = 0.05 of the fixed-sample ``compare`` (F1, error rate and the other ratio and non-linear
measures precision, recall, F2, MCC, balanced accuracy; the comparison proposal and passive
sampling; 3-300 draws; ``--reps`` samples per cell, 1,000 by default) with its default test —
and, for the non-linear measures under both designs, the Wald test
(``variance="wald"``, the default for them before the generalized score test) — and a Pocock
group-sequential design of ``sequential_compare`` on F1 with its first look at 3 draws against
one with its first look at 20 (``--seq-reps`` runs each, 300 by default). Writes
``results/compare_small_n.{json,md}``; about 15 minutes on a shared core.

Usage:
    nice -n 5 python benchmarks/compare_small_n.py [--reps 1000] [--seq-reps 300]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from comparison_type1_power import permuted_null

import bayes_activeeval as bae
from bayes_activeeval.sequential import GroupSequentialDesign

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (3, 6, 10, 20, 50, 100, 200, 300)
MEASURES = ("f1", "error_rate", "precision", "recall", "f2", "mcc", "balanced_accuracy")
LOOKS = {"first look at 3": (3, 6, 10, 20, 50, 100, 400), "first look at 20": (20, 50, 100, 400)}


def cells():
    """(measure, design, variance) of the table: the default test of every measure under both
    designs, and the Wald test of the non-linear measures under both."""
    out = []
    for measure in MEASURES:
        for design in ("optimal", "passive"):
            out.append((measure, design, "auto"))
            if measure != "error_rate":
                out.append((measure, design, "wald"))
    return out


def fixed_n(pool, y, reps: int) -> list[dict]:
    rows = []
    for measure, design, variance in cells():
        prop = (
            bae.comparison_proposal(pool, measure, ("m0", "m1"))
            if design == "optimal"
            else bae.passive_proposal(pool)
        )
        null, yy, nprop = permuted_null(pool, y, ("m0", "m1"), prop.q)
        rng = np.random.default_rng(1)  # every cell of a row sees the same draws
        for n in SIZES:
            rej = undefined = 0
            for _ in range(reps):
                d = nprop.draw(n, rng)
                s = bae.compare(
                    null,
                    measure,
                    d,
                    yy[d.indices],
                    ("m0", "m1"),
                    proposal=nprop,
                    variance=variance,
                ).statistic
                undefined += not np.isfinite(s)
                rej += bool(np.isfinite(s) and abs(s) >= 1.959964)
            rows.append(
                {
                    "measure": measure,
                    "design": design,
                    "variance": variance,
                    "n": n,
                    "reps": reps,
                    "reject": rej / reps,
                    "mc_se": float(np.sqrt(0.05 * 0.95 / reps)),
                    "undefined": undefined / reps,
                }
            )
            print(rows[-1], flush=True)
    return rows


def sequential(pool, y, reps: int) -> list[dict]:
    prop = bae.comparison_proposal(pool, "f1", ("m0", "m1"))
    null, yy, nprop = permuted_null(pool, y, ("m0", "m1"), prop.q)
    rows = []
    for name, looks in LOOKS.items():
        design = GroupSequentialDesign(looks, 0.05, "pocock")
        rng = np.random.default_rng(123)
        rej = 0
        for _ in range(reps):
            res = bae.sequential_compare(
                null, "f1", lambda i: yy[i], ("m0", "m1"), proposal=nprop, design=design, rng=rng
            )
            rej += bool(res.reject)
        rows.append({"design": name, "looks": list(looks), "reps": reps, "reject": rej / reps})
        print(rows[-1], flush=True)
    return rows


def report(res: dict) -> str:
    m = res["meta"]
    lines = [
        "# `compare` and `sequential_compare` with very few draws: type-I error",
        "",
        f"`benchmarks/compare_small_n.py` ({m['date']}, {m['seconds']:.0f} s). Exact null: "
        "`make_classification_pool(3000, 0.3, n_models=2, rng=0)`, every item in two copies with "
        "the models' predictions swapped; two-sided test at α = 0.05; rejection rate over "
        f"{m['reps']} samples per cell (Monte Carlo s.e. at 0.05: "
        f"{res['fixed'][0]['mc_se']:.3f}); `undefined`: the statistic is NaN or infinite (no "
        "rejection).",
        "",
        "`test`: the default of `compare` (the score test: for a plain risk Σ v δ / sqrt(Σ v² δ²), "
        "for a ratio or non-linear measure the generalized score test at a null-restricted "
        'point), or the Wald test (`variance="wald"`, the default for non-linear measures '
        "before).",
        "",
        "| measure | design | test | " + " | ".join(f"n = {n}" for n in SIZES) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in SIZES) + " |",
    ]
    for measure, design, variance in cells():
        row = [
            r
            for r in res["fixed"]
            if r["measure"] == measure
            and r["design"] == design
            and r.get("variance", "auto") == variance
        ]
        test = "default" if variance == "auto" else variance
        lines.append(
            f"| {measure} | {design} | {test} | "
            + " | ".join(
                f"{r['reject']:.3f}" + (f" ({r['undefined']:.2f} undef.)" if r["undefined"] else "")
                for r in row
            )
            + " |"
        )
    lines += [
        "",
        f"`sequential_compare` on F1, comparison proposal, Pocock spending, {m['seq_reps']} runs:",
        "",
        "| looks | rejection rate |",
        "| --- | --- |",
    ]
    for r in res["sequential"]:
        lines.append(f"| {', '.join(map(str, r['looks']))} | {r['reject']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--seq-reps", type=int, default=300)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.time()
    sp = bae.datasets.make_classification_pool(3000, 0.3, n_models=2, rng=0)
    pool, y = sp.pool, np.asarray(sp.labels)
    res = {
        "fixed": fixed_n(pool, y, args.reps),
        "sequential": sequential(pool, y, args.seq_reps),
    }
    res["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": time.time() - t0,
        "reps": args.reps,
        "seq_reps": args.seq_reps,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compare_small_n.json").write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "compare_small_n.md").write_text(report(res))


if __name__ == "__main__":
    main()
