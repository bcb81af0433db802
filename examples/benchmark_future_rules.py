"""A benchmark label set for classification rules that do not exist yet (Valizadegan et al.).

Plan which items of a skewed pool (1% positives) an expert labels once — using only a rough class
guess (a model's scores) — then, later, evaluate any number of new rules (here: thresholds of a
better model trained afterwards) on that one label set, with design-weighted estimates, Wilson
intervals and Bayesian posteriors (``bayes_activeeval.benchmark``).

``BAE_EXAMPLE_FAST=1`` uses a smaller pool.
"""

from __future__ import annotations

import os
import time

import numpy as np

from bayes_activeeval import benchmark
from bayes_activeeval.datasets import make_classification_pool

FAST = bool(os.environ.get("BAE_EXAMPLE_FAST"))
N = 20_000 if FAST else 100_000


def main() -> None:
    start = time.perf_counter()
    data = make_classification_pool(N, 0.01, separation=4.0, noise=0.6, rng=3)
    pool, y = data.pool, data.labels

    # 1. Today: plan and draw the benchmark set from the current model's guess.
    plan = benchmark.design(pool, budget=600, method="sqrt")
    sample = plan.sample(rng=1)
    labels = y[sample.indices]  # the expert labels these items, once
    print(sample)

    # 2. Later: new rules arrive (thresholds of a better, retrained score).
    better = data.truth + 0.05 * np.random.default_rng(9).standard_normal(N)
    rules = {f"score>{t}": (better > t).astype(int) for t in (0.2, 0.4, 0.6)}
    ev = benchmark.evaluate(labels, rules, sample, rng=0)
    low, high = ev.confidence_interval(0.95, method="wilson")
    print("\nestimates from the benchmark set (95% Wilson interval) and the truth on the pool:")
    for name, f in rules.items():
        tp = np.sum((f == 1) & (y == 1))
        true = {
            "sensitivity": tp / y.sum(),
            "specificity": np.sum((f == 0) & (y == 0)) / np.sum(y == 0),
            "precision": tp / f.sum(),
        }
        cells = []
        for m, t in true.items():
            e = float(ev.table["estimate"].sel(rule=name, measure=m))
            lo = float(low.sel(rule=name, measure=m))
            hi = float(high.sel(rule=name, measure=m))
            cells.append(f"{m} {e:.3f} [{lo:.3f}, {hi:.3f}] (true {t:.3f})")
        print(f"{name:<10} " + "; ".join(cells))
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
