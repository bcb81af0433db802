"""Errors no label has seen, on the real pools: what ``unseen_errors`` says beside the default's
interval, and how often the truth lies between its value and the interval.

Each repetition is one run of the default, ``ActiveEvaluator(pool, "f1", rng=seed)`` through
``ev.run(labeler, budget=B)`` for B = 500, 1,000, 2,000, 5,000 (the ``default-run`` rows of
``real_pools.py``, seed for seed). At each budget it records the estimate, the default 95 %
interval, and ``ev.unseen_errors(0.95)``: per predicted class the largest number of errors placed
at random among its unlabeled items that the labels cannot rule out, and F1 with every class's
at once. The report gives, per pool and budget, the coverage and mean width of the default
interval and of ``[min(low, unseen value), high]`` (the interval reaching down to F1 with both classes'
hidden errors at once), the median counts, and the median distance from the estimate to that value.

Usage::

    python benchmarks/unseen_errors.py --reps 100 --workers 2

writes ``results/unseen_errors.jsonl`` (a rerun skips the (pool, seed) pairs already there) and
``results/unseen_errors.md``.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import numpy as np
import real_pools_data
from interval_variants import BUDGETS, POOLS, run_default

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def row(ev, est) -> dict:
    """What one budget of a run records: the estimate, its interval and ``unseen_errors``."""
    lo, hi = est.confidence_interval(0.95)
    u = ev.unseen_errors(0.95)
    return {
        "est": float(est.value),
        "lo": float(lo),
        "hi": float(hi),
        "unseen": float(u.values[0]),
        "unseen_by_class": [float(r.values[0]) for r in u.regions],
        "hidden": [r.max_hidden for r in u.regions],
        "joint_hidden": [r.joint_hidden for r in u.regions],
        "labeled": [r.n_labeled for r in u.regions],
        "items": [r.n_items for r in u.regions],
    }


run_one = functools.partial(run_default, row=row)


def report(recs: list[dict]) -> str:
    truth = real_pools_data.true_f1s(POOLS)
    lines = [
        "# Errors no label has seen, on the real pools (`benchmarks/unseen_errors.py`)",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')}. F1, the default through `ev.run` "
        '(`ActiveEvaluator(pool, "f1", rng=seed)`, deterministic oracle), '
        "`ev.unseen_errors(0.95)` at each budget. `interval`: the default 95 % interval; "
        "`down to unseen`: `[min(low, unseen F1), high]`, the interval reaching F1 with both "
        "predicted classes' unseen errors added at once (each count at α^(1/2), "
        "`UnseenErrors.values`); coverage ± Monte Carlo s.e. and mean width; "
        "`hidden FN / FP`: median largest numbers of false negatives among the unlabeled "
        "predicted non-matches and false positives among the unlabeled predicted matches that "
        "the labels cannot rule out (95 %), with the median labeled fraction of the predicted "
        "non-matches (each count alone at 95 %); `estimate − unseen`: median distance from the "
        "estimate to that F1.",
        "",
        "| pool | labels | n | interval: coverage, width | down to unseen: coverage, width | "
        "hidden FN / FP (labeled share of predicted non-matches) | estimate − unseen |",
        "| --- | ---: | ---: | --- | --- | --- | ---: |",
    ]
    for p in POOLS:
        R = [r for r in recs if r["pool"] == p]
        if not R:
            continue
        t = truth[p]
        for j, B in enumerate(BUDGETS):
            rows = [r["rows"][j] for r in R]
            e = np.array([x["est"] for x in rows])
            lo = np.array([x["lo"] for x in rows])
            hi = np.array([x["hi"] for x in rows])
            un = np.array([x["unseen"] for x in rows])
            low2 = np.minimum(lo, un)
            cells = [real_pools_data.coverage_cell(a, hi, t) for a in (lo, low2)]
            fn = np.median([x["hidden"][0] for x in rows])
            fp = np.median([x["hidden"][1] for x in rows])
            share = np.median([x["labeled"][0] / x["items"][0] for x in rows])
            lines.append(
                f"| `{p}` | {B:,} | {len(R)} | {cells[0]} | {cells[1]} | "
                f"{fn:,.0f} / {fp:,.0f} ({share:.2%}) | {np.median(e - un):.4f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--out", default=str(RESULTS / "unseen_errors.jsonl"))
    ap.add_argument("--report", action="store_true", help="only write the report")
    args = ap.parse_args()
    out = Path(args.out)
    reps = 0 if args.report else args.reps
    recs = real_pools_data.run_pool_seeds(run_one, out, args.pools.split(","), reps, args.workers)
    out.with_suffix(".md").write_text(report(recs))


if __name__ == "__main__":
    main()
