"""A labeling session with a Bayesian report: the posterior of F1 beside the frequentist answer.

Runs an adaptive labeling session on a synthetic pool (the expert simulated by the held-back
truth), then writes an HTML report with the estimate, its interval, the proposal and the
posterior of F1 from the contingency-table model, and prints the ArviZ summary of that posterior
(mean, sd, 89% interval, ESS, r-hat).

Usage: ``python examples/bayesian_report.py [report.html]``. ``BAE_EXAMPLE_FAST=1`` labels less.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from arviz_stats import summary

from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.io import PoolSpec
from bayes_activeeval.report import write_report
from bayes_activeeval.session import Design, Session

FAST = bool(os.environ.get("BAE_EXAMPLE_FAST"))
STAGES, PER_STAGE = (3, 40) if FAST else (8, 50)


def main(out: str = "bayesian_report.html") -> None:
    start = time.perf_counter()
    data = make_classification_pool(30_000, 0.01, separation=4.0, noise=0.4, rng=2)
    view = data.pool.view()
    with tempfile.TemporaryDirectory() as tmp:
        pool_csv = Path(tmp) / "pool.csv"
        pd.DataFrame(
            {
                "id": [f"x{i}" for i in range(data.pool.n_items)],
                "pred": view.pred,
                "p": view.positive_prob(),
                "score": data.pool.scores["model"],
            }
        ).to_csv(pool_csv, index=False)
        spec = PoolSpec(pred="pred", prob="p", score="score", id_col="id")
        design = Design("f1", kind="adaptive", seed=0, budget=STAGES * PER_STAGE)
        with Session.create(Path(tmp) / "f1.bae", pool_csv, spec, design) as s:
            for _ in range(STAGES):
                items = s.next(PER_STAGE)
                s.record(s.pool_file.ids[items], data.labels[items])  # the expert's answers
            est = s.estimate()
            posterior = s.posterior()
            write_report(s, out)
    lo, hi = est.confidence_interval(0.95)
    print(f"frequentist: F1 = {est.value:.4f} ± {est.stderr:.4f}, 95% CI [{lo:.4f}, {hi:.4f}]")
    print("Bayesian (contingency-table model):")
    print(summary(posterior, var_names=["measure"]))
    print(f"report written to {out} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main(*sys.argv[1:2])
