"""Bias of the static design's estimate under four rules for cutting a label-cost budget.

The figures of ``docs/cli.md`` ("A label-cost budget, static design") and of the docstring of
``bayes_activeeval.session.designs.budget_cut``. A 300-item binary pool (pool seed 5) whose wrong
predictions cost 4 to label and the right ones 1 (cost follows the error), ``q = p``
(``mix=1``: every weight is one, the estimate is the plain mean of the drawn losses, so any bias
is the rule's), stages of 10 distinct items drawn from ``stage_rng(seed, stage)`` with run ``r``
using design seed ``r``, every stage labeled at once. Rules, all on the same draw streams:

- ``cut_then_stop`` (the current rule): ``StaticDesign.propose`` driven as
  ``Session._draw_stage`` drives it; the stage keeps its draws while the cost of its new items
  fits in the budget left, and the session's drawing ends at the first new item that does not
  fit.
- ``stop_before_dearest``: draw by draw, stop before a draw once the budget left is below the
  dearest label (4), so keeping a draw never depends on which item it is.
- ``cut_then_draw_on`` (the rule before): the same cut, but the session draws a new stage after
  a cut one, until the budget left is below the cheapest label.
- ``keep_crossing`` (the adaptive design's rule): draw by draw, stop after the label that
  reaches the budget, keeping it (it may pass the budget by less than one label's cost).

A repeat of an item labeled already is charged nothing. Reported per budget and rule: bias
(mean estimate − truth) with its Monte Carlo standard error, the paired difference from the
current rule with its s.e., mean draws and mean cost spent, and the first-order term
``Cov_p(c, ℓ)/B``.

Run (the defaults take about a minute on one core)::

    nice -n 5 .venv/bin/python benchmarks/session_cost_cut.py            # 6,000 runs, B = 40, 120
    .venv/bin/python benchmarks/session_cost_cut.py --quick              # smoke run, not written
    .venv/bin/python benchmarks/session_cost_cut.py --runs 2000 --budgets 40

Results in ``benchmarks/results/session_cost_cut.{json,md}`` (not written with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.session import Design, SessionError, stage_rng
from bayes_activeeval.session.designs import StaticDesign
from bayes_activeeval.session.store import first_new

CHEAP, DEAR = 1.0, 4.0
POOL_SIZE, POOL_SEED = 300, 5
STAGE_SIZE = 10
RULES = ("cut_then_stop", "stop_before_dearest", "cut_then_draw_on", "keep_crossing")
RESULTS = Path(__file__).resolve().parent / "results"


def costly_pool(m: int = POOL_SIZE, seed: int = POOL_SEED, dear: float = DEAR):
    """A binary pool whose wrong predictions cost ``dear`` to label, the right ones ``CHEAP``
    (also the pool of ``tests/test_static_cost_cut.py``)."""
    rng = np.random.default_rng(seed)
    pred = (rng.random(m) < 0.5).astype(int)
    probs = rng.uniform(0.1, 0.9, m)
    y = (rng.random(m) < probs).astype(int)
    loss = (y != pred).astype(float)
    costs = np.where(loss > 0, dear, CHEAP)
    return pred, probs, y, loss, costs


class FakeSession:
    """What ``StaticDesign.propose`` reads from a session: labels, pending items and stored
    stages (every stage is labeled at once here, so nothing is pending)."""

    def __init__(self) -> None:
        self.labels: dict[int, int] = {}
        self.stages: list[tuple[int, np.ndarray, dict]] = []

    def label_map(self) -> dict[int, int]:
        return self.labels

    def stage_rows(self):
        return self.stages

    def pending_items(self) -> np.ndarray:
        return np.empty(0, dtype=np.int64)


def cut_then_stop(design: StaticDesign, budget: float, stage_size: int, costs) -> np.ndarray:
    """The current rule: ``propose`` as ``Session._draw_stage`` drives it (stages labeled at
    once)."""
    s, spent, out = FakeSession(), 0.0, []
    while True:
        left = budget - spent
        if left < costs.min():
            break
        try:
            draws, info, _ = design.propose(s, len(s.stages), stage_size, left)
        except SessionError:
            break
        idx = draws.indices
        new = first_new(idx, set(s.labels))
        spent += float(costs[idx[new]].sum())
        s.labels.update(dict.fromkeys(idx.tolist(), 0))
        s.stages.append((int(info["n"]), idx, info))
        out.append(idx)
    return np.concatenate(out)


def cut_then_draw_on(design: StaticDesign, budget: float, stage_size: int, costs) -> np.ndarray:
    """The rule before: the same cut, but the session drew a new stage after a cut one."""
    labels: set[int] = set()
    spent, out, stage = 0.0, [], 0
    while budget - spent >= costs.min():
        rng = stage_rng(design.design.seed, stage)
        idx = design.proposal.draw(stage_size, rng=rng, unique=True).indices
        new = first_new(idx, labels)
        keep = int(
            np.searchsorted(np.cumsum(np.where(new, costs[idx], 0.0)), budget - spent, "right")
        )
        if keep == 0:
            break
        idx = idx[:keep]
        spent += float(costs[idx[new[:keep]]].sum())
        labels.update(idx.tolist())
        out.append(idx)
        stage += 1
    return np.concatenate(out)


def draw_by_draw(design: StaticDesign, budget: float, stage_size: int, costs, rule: str):
    """``stop_before_dearest`` or ``keep_crossing`` on the same stage streams, draw by draw."""
    labels: set[int] = set()
    spent, out, stage, dearest = 0.0, [], 0, float(costs.max())
    while True:
        rng = stage_rng(design.design.seed, stage)
        for i in design.proposal.draw(stage_size, rng=rng, unique=True).indices.tolist():
            if rule == "stop_before_dearest" and budget - spent < dearest:
                return np.asarray(out)
            if i not in labels:
                spent += float(costs[i])
                labels.add(i)
            out.append(i)
            if rule == "keep_crossing" and spent >= budget:
                return np.asarray(out)
        stage += 1


def run_budget(pool, loss, costs, budget: float, runs: int, stage_size: int) -> dict:
    truth = float(loss.mean())
    est = {r: np.empty(runs) for r in RULES}
    n_draws = {r: np.empty(runs) for r in RULES}
    cost = {r: np.empty(runs) for r in RULES}
    for k in range(runs):
        design = StaticDesign(pool, Design("error_rate", seed=k, budget=budget, mix=1.0))
        if k == 0:  # q = p: the estimate is a plain mean
            assert np.allclose(design.proposal.q, 1 / pool.n_items)
        for r in RULES:
            if r == "cut_then_stop":
                idx = cut_then_stop(design, budget, stage_size, costs)
            elif r == "cut_then_draw_on":
                idx = cut_then_draw_on(design, budget, stage_size, costs)
            else:
                idx = draw_by_draw(design, budget, stage_size, costs, r)
            est[r][k] = loss[idx].mean()
            n_draws[r][k] = idx.size
            cost[r][k] = costs[np.unique(idx)].sum()
    first_order = float(np.mean(costs * (loss - truth))) / budget  # Cov_p(c, ℓ)/B
    rows = {}
    for r in RULES:
        d = est[r] - est["cut_then_stop"]
        rows[r] = {
            "bias": float(est[r].mean() - truth),
            "se": float(est[r].std(ddof=1) / np.sqrt(runs)),
            "diff_vs_current": float(d.mean()),
            "diff_se": float(d.std(ddof=1) / np.sqrt(runs)),
            "mean_draws": float(n_draws[r].mean()),
            "mean_cost": float(cost[r].mean()),
            "max_cost": float(cost[r].max()),
        }
    return {
        "budget": budget,
        "runs": runs,
        "truth": truth,
        "first_order_cov_over_B": first_order,
        "rules": rows,
    }


def markdown(meta: dict, results: list[dict]) -> str:
    lines = [
        "# Static design: bias of the estimate under four label-cost budget rules",
        "",
        f"`{meta['command']}` — {meta['date']}, {meta['seconds']:.0f} s, Python {meta['python']}",
        "",
        f"{meta['pool_size']}-item binary pool (seed {meta['pool_seed']}), label cost "
        f"{meta['cheap']:g} for right and {meta['dear']:g} for wrong predictions, `q = p` "
        f"(`mix=1`), stages of {meta['stage_size']} distinct items, run r with design seed r; "
        "bias = mean estimate − truth ± Monte Carlo s.e.; difference from the current rule "
        "paired on the same draw streams.",
        "",
    ]
    for res in results:
        lines += [
            f"## Budget {res['budget']:g} ({res['runs']:,} runs per rule; truth "
            f"{res['truth']:.4f}; first order Cov_p(c, ℓ)/B = "
            f"{res['first_order_cov_over_B']:+.4f})",
            "",
            "| rule | bias ± s.e. | − current rule ± s.e. | mean draws | mean cost | max cost |",
            "|---|---|---|---|---|---|",
        ]
        for r, row in res["rules"].items():
            diff = (
                "—"
                if r == "cut_then_stop"
                else f"{row['diff_vs_current']:+.4f} ± {row['diff_se']:.4f}"
            )
            lines.append(
                f"| `{r}` | {row['bias']:+.4f} ± {row['se']:.4f} | {diff} | "
                f"{row['mean_draws']:.1f} | {row['mean_cost']:.1f} | {row['max_cost']:g} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6000, help="runs per rule and budget")
    ap.add_argument("--budgets", default="40,120", help="comma-separated cost budgets")
    ap.add_argument("--quick", action="store_true", help="200 runs, results not written")
    args = ap.parse_args(argv)
    runs = 200 if args.quick else args.runs
    budgets = [float(b) for b in args.budgets.split(",") if b]
    pred, probs, _, loss, costs = costly_pool()
    pool = bae.Pool(predictions=pred, probs=probs, costs=costs)
    t0 = time.perf_counter()
    results = []
    for b in budgets:
        results.append(run_budget(pool, loss, costs, b, runs, STAGE_SIZE))
        print(f"budget {b:g} done, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    meta = {
        "command": shlex.join(["python", "benchmarks/session_cost_cut.py", *argv_used]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": time.perf_counter() - t0,
        "python": sys.version.split()[0],
        "pool_size": POOL_SIZE,
        "pool_seed": POOL_SEED,
        "cheap": CHEAP,
        "dear": DEAR,
        "stage_size": STAGE_SIZE,
        "seeds": f"design seed r for run r = 0..{runs - 1}",
    }
    md = markdown(meta, results)
    print(md)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "session_cost_cut.json").write_text(
            json.dumps({"meta": meta, "results": results}, indent=2) + "\n"
        )
        (RESULTS / "session_cost_cut.md").write_text(md + "\n")


if __name__ == "__main__":
    main()
