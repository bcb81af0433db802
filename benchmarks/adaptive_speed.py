"""Speed of the adaptive loop (issue 3, item 6).

1. One stage (50 labels) on a 10^6-item pool: the oracle-model update plus the new proposal
   (Marchant & Rubinstein (2021), Algorithm 1, 'update q_t'), timed separately from the draws.
2. A whole 5,000-label run (100 stages of 50) on a 150,000-item pool, start to finish.

Targets: (1) < 0.5 s, (2) < 60 s. Results: benchmarks/results/adaptive_speed.{json,md}.
Run: PYTHONPATH=. python benchmarks/adaptive_speed.py [--oracle model|dirichlet-tree]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool

OUT = Path(__file__).parent / "results"


def stage_time(oracle: str, n: int, reps: int = 5) -> dict:
    data = make_classification_pool(n, 0.001, calibration="svm", rng=0)
    t0 = time.perf_counter()
    ev = bae.ActiveEvaluator(data.pool, "f1", oracle=oracle, rng=0)
    init = time.perf_counter() - t0
    times, q_times, d_times = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        idx = ev.query(50)
        t1 = time.perf_counter()
        y = data.labeler(idx)
        t2 = time.perf_counter()
        ev.update(idx, y)  # oracle update + belief + new proposal + estimate
        t3 = time.perf_counter()
        q_times.append(t1 - t0)
        times.append(t3 - t2)
        d_times.append(t3 - t0 - (t2 - t1))
    return {
        "pool_size": n,
        "oracle": oracle,
        "init_seconds": init,
        "update_seconds_median": float(np.median(times)),
        "update_seconds_max": float(np.max(times)),
        "query_seconds_median": float(np.median(q_times)),
        "stage_seconds_median": float(np.median(d_times)),
        "reps": reps,
    }


def run_time(oracle: str, n: int, budget: int) -> dict:
    data = make_classification_pool(n, 0.001, calibration="svm", rng=1)
    t0 = time.perf_counter()
    ev = bae.ActiveEvaluator(data.pool, "f1", oracle=oracle, rng=0)
    est = ev.run(data.labeler, budget=budget, batch_size=50, progress=False)
    return {
        "pool_size": n,
        "oracle": oracle,
        "budget": budget,
        "seconds": time.perf_counter() - t0,
        "stages": ev.stage,
        "n_draws": est.n_draws,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default="model")
    args = ap.parse_args()
    res = {
        "machine": f"{platform.processor() or platform.machine()}, shared 2-core box",
        "one_stage": stage_time(args.oracle, 1_000_000),
        "whole_run": run_time(args.oracle, 150_000, 5000),
    }
    print(json.dumps(res, indent=2))
    OUT.mkdir(exist_ok=True)
    name = "adaptive_speed" if args.oracle == "model" else f"adaptive_speed_{args.oracle}"
    (OUT / f"{name}.json").write_text(json.dumps(res, indent=2))
    s, r = res["one_stage"], res["whole_run"]
    md = [
        f"# Adaptive loop speed (oracle `{args.oracle}`)",
        "",
        "| what | pool | time (s) | target |",
        "| --- | --- | --- | --- |",
        f"| one stage: oracle update + new proposal (median of {s['reps']}) | 10^6 | "
        f"{s['update_seconds_median']:.3f} (max {s['update_seconds_max']:.3f}) | < 0.5 |",
        f"| one stage incl. drawing 50 new labels | 10^6 | {s['stage_seconds_median']:.3f} | |",
        f"| whole run, {r['budget']} labels ({r['stages']} stages) | 150,000 | "
        f"{r['seconds']:.1f} | < 60 |",
        "",
    ]
    (OUT / f"{name}.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
