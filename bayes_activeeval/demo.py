"""The main job: an active evaluation of the embedded demo pool, against passive sampling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .datasets import load_demo
from .estimators import UndefinedEstimateWarning, estimate
from .proposals import optimal_proposal, passive_proposal

__all__ = ["DemoResult", "export_demo", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    """True values of the demo pool and a table of estimates (one row per measure, design, budget).

    Returned by :func:`run_demo`.

    Parameters
    ----------
    truth : dict
        The true value of each measure on the whole pool, by measure name.
    table : pandas.DataFrame
        One row per measure, budget and design (``"optimal"``, ``"passive"``): the estimate, its
        standard error, the interval (``low``, ``high``), whether it covers the truth and the
        number of positives labeled.
    n_items : int
        The number of pool items.
    prevalence : float
        The fraction of positive labels in the pool.
    """

    truth: dict[str, float]
    table: pd.DataFrame
    n_items: int
    prevalence: float


def run_demo(
    budgets=(250, 1000), measures=("f1", "accuracy"), level: float = 0.95, seed: int = 0
) -> DemoResult:
    """Estimate F1 and accuracy on the demo pool with the optimal and the passive proposal.

    Each budget is a number of distinct labels (a deterministic oracle: repeated draws are free);
    the oracle is simulated from the pool's held-back labels.

    Parameters
    ----------
    budgets : sequence of int, optional
        The numbers of distinct labels to try (default ``(250, 1000)``).
    measures : sequence of str, optional
        Measures to estimate, among ``"f1"`` and ``"accuracy"`` (the two whose true value is
        computed; default both).
    level : float, optional
        Confidence level of the intervals (default 0.95).
    seed : int, optional
        Seed of the one generator behind all the draws (default 0).

    Returns
    -------
    DemoResult
    """
    import warnings

    measures = (measures,) if isinstance(measures, str) else tuple(measures)
    unknown = [m for m in measures if m not in ("f1", "accuracy")]
    if unknown:
        raise ValueError(
            f"measures must be 'f1' or 'accuracy' (the demo's true values), got {unknown!r}"
        )
    demo = load_demo()
    pool, y = demo.pool, demo.labels
    f = pool.view().pred
    tp = float(np.sum((f == 1) & (y == 1)))
    truth = {
        "f1": 2 * tp / (np.sum(f == 1) + np.sum(y == 1)),
        "accuracy": float(np.mean(f == y)),
    }
    rows = []
    rng = np.random.default_rng(seed)
    for measure in measures:
        designs = {"optimal": optimal_proposal(pool, measure), "passive": passive_proposal(pool)}
        for budget in budgets:
            for design, proposal in designs.items():
                draws = proposal.draw(budget, rng=rng, unique=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UndefinedEstimateWarning)
                    est = estimate(pool, measure, draws, demo.labeler(draws.indices))
                low, high = est.confidence_interval(level)
                rows.append(
                    {
                        "measure": measure,
                        "budget": budget,
                        "design": design,
                        "estimate": est.value,
                        "stderr": est.stderr,
                        "low": low,
                        "high": high,
                        "covers": bool(low <= truth[measure] <= high),
                        "positives_labeled": int(np.sum(y[draws.unique()] == 1)),
                    }
                )
    return DemoResult(truth, pd.DataFrame(rows), pool.n_items, float(y.mean()))


def format_demo(result: DemoResult, level: float = 0.95) -> str:
    """Human-readable report of :func:`run_demo`."""
    lines = [
        f"Demo pool: {result.n_items:,} items, {result.prevalence:.2%} positives "
        "(labels simulated from the pool's held-back truth).",
        "True values: " + ", ".join(f"{k} = {v:.4f}" for k, v in result.truth.items()),
        "",
        f"{'measure':<9} {'budget':>6}  {'design':<8} {'estimate':>9}  {f'{level:.0%} interval':<20} "
        f"{'covers':<6} {'positives':>9}",
    ]
    for r in result.table.itertuples():
        if np.isfinite(r.estimate) and np.isfinite(r.stderr):
            est, ci = f"{r.estimate:9.4f}", f"[{r.low:.4f}, {r.high:.4f}]"
            cov = "yes" if r.covers else "no"
        else:
            est, ci, cov = f"{'undefined':>9}", "(no positive labeled)", "-"
        lines.append(
            f"{r.measure:<9} {r.budget:>6}  {r.design:<8} {est}  {ci:<20} {cov:<6} {r.positives_labeled:>9}"
        )
    return "\n".join(lines)


def export_demo(path) -> tuple[str, str]:
    """Write the demo pool to a CSV file (columns ``id, pred, p, score, text``) and its true labels
    beside it (``<name>-truth.csv``, columns ``id, label``), to try a labeling session.

    Parameters
    ----------
    path : str or os.PathLike
        Where to write the pool CSV (an existing file is overwritten); the truth file takes its
        name with ``-truth`` before the extension (``.csv`` when it has none).

    Returns
    -------
    (pool_csv, truth_csv) : tuple of str
    """
    import os

    d = load_demo()
    v = d.pool.view()
    ids = [f"d{i}" for i in range(d.pool.n_items)]
    pd.DataFrame(
        {
            "id": ids,
            "pred": v.pred,
            "p": v.positive_prob(),
            "score": d.pool.scores["model"],
            "text": [f"demo item {i}" for i in range(d.pool.n_items)],
        }
    ).to_csv(path, index=False)
    root, ext = os.path.splitext(str(path))
    truth = f"{root}-truth{ext or '.csv'}"
    pd.DataFrame({"id": ids, "label": d.labels}).to_csv(truth, index=False)
    return str(path), truth
