"""Coverage of the 95 % intervals of F1, MCC and F2 when a sample holds no labeled true positive.

Where no draw is a true positive (``TP̂ = 0``) F1 is 0 and its delta-method standard error is 0;
the default interval (modified Wilson) then rested on the Kish size of the carrying draws
(labeled or predicted positive) as binomial trials for F1 itself, and MCC's interval on a
standard error with no term for the true-positive count. Now the upper limit is the measure at
the upper limit ``J_U`` of the true positives' share of the carrying draws, the other cells at
their estimates (``intervals.true_positive_substitution``; exact for F1 = 2J/(1 + J)).

**before**: the previous interval, ``Estimate.confidence_interval()`` of the same estimate with
``details["no_true_positive"]`` removed (the change only adds that step, so this is the previous
code's interval bit for bit; the script checks that before and after agree on every sample with a
labeled true positive). **after**: ``Estimate.confidence_interval()``.

Pools: ``make_classification_pool(200_000, rate, rng=seed)`` with the generator's default model
(separation 2.5, noise 0.4, threshold 0.5) at positive rates 0.1 %, 1 % and 5 % (seeds 1, 2, 3).
Designs: passive (``passive_proposal``, uniform draws with replacement) and the optimal F1
proposal (``optimal_proposal(pool, "f1")``); n = 200, 500 and 2,000 draws; ``--reps`` samples per
cell (2,000 by default), each cell with its own generator (``default_rng([seed, design, n])``).
F1, MCC and F2 are estimated from the same draws (``bae.weighted_estimate``, the IPW estimate);
coverage is over the samples where the measure is defined (MCC needs a labeled and a predicted
positive), the truth the measure on the whole pool.

Usage:
    nice -n 5 python benchmarks/no_tp_intervals.py [--reps 2000] [--quick]
Writes benchmarks/results/no_tp_intervals.{json,md}; about 5 minutes on one core.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shlex
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool

RESULTS = Path(__file__).resolve().parent / "results"
RATES = ((0.001, 1), (0.01, 2), (0.05, 3))
DESIGNS = ("passive", "optimal")
SIZES = (200, 500, 2000)
MEASURES = ("f1", "mcc", "f2")
LEVEL = 0.95


def before_interval(est) -> tuple[float, float]:
    """The previous default interval: the same estimate without the no-true-positive step."""
    details = {k: v for k, v in est.details.items() if k != "no_true_positive"}
    return dataclasses.replace(est, details=details).confidence_interval(LEVEL)


class Cell:
    """Tallies of one (measure, rate, design, n) cell."""

    def __init__(self, truth: float):
        self.truth = truth
        self.defined = 0
        self.no_tp = 0
        self.hits = {"before": 0, "after": 0}
        self.hits_no_tp = {"before": 0, "after": 0}
        self.above_no_tp = {"before": 0, "after": 0}  # truth above the interval
        self.width_no_tp = {"before": 0.0, "after": 0.0}
        self.mismatch_with_tp = 0  # before != after on a sample with a labeled true positive

    def add(self, est, tp: int) -> None:
        if not (np.isfinite(est.value) and np.isfinite(est.stderr)):
            return
        self.defined += 1
        after = est.confidence_interval(LEVEL)
        before = before_interval(est)
        if tp == 0:
            self.no_tp += 1
        elif tuple(after) != tuple(before):
            self.mismatch_with_tp += 1
        for key, (lo, hi) in (("before", before), ("after", after)):
            hit = bool(lo <= self.truth <= hi)
            self.hits[key] += hit
            if tp == 0:
                self.hits_no_tp[key] += hit
                self.above_no_tp[key] += bool(self.truth > hi)
                self.width_no_tp[key] += hi - lo

    def row(self, **cell) -> dict:
        out = dict(cell, truth=self.truth, defined=self.defined, no_tp=self.no_tp)
        out["no_tp_share"] = self.no_tp / self.defined if self.defined else None
        out["mismatch_with_tp"] = self.mismatch_with_tp
        for key in ("before", "after"):
            cov = self.hits[key] / self.defined if self.defined else None
            out[f"{key}_coverage"] = cov
            out[f"{key}_mc_se"] = (
                float(np.sqrt(cov * (1 - cov) / self.defined)) if self.defined else None
            )
            k = self.no_tp
            out[f"{key}_coverage_no_tp"] = self.hits_no_tp[key] / k if k else None
            out[f"{key}_above_no_tp"] = self.above_no_tp[key] / k if k else None
            out[f"{key}_width_no_tp"] = self.width_no_tp[key] / k if k else None
        with_tp = self.defined - self.no_tp
        out["coverage_with_tp"] = (
            (self.hits["after"] - self.hits_no_tp["after"]) / with_tp if with_tp else None
        )
        return out


def run(reps: int) -> list[dict]:
    rows = []
    for rate, seed in RATES:
        synth = make_classification_pool(200_000, rate, rng=seed)
        pool = synth.pool
        y = pool.encode_labels(synth.labels)
        resolved = {name: pool.resolve(name) for name in MEASURES}
        truths = {
            name: float(m.g(pool.p @ m.loss(y, views(None)))[0])
            for name, (m, views) in resolved.items()
        }
        pred = resolved["mcc"][0].loss(y, resolved["mcc"][1](None))
        props = {"passive": bae.passive_proposal(pool), "optimal": bae.optimal_proposal(pool, "f1")}
        for d_i, design in enumerate(DESIGNS):
            for n in SIZES:
                t0 = time.time()
                rng = np.random.default_rng([seed, d_i, n])
                cells = {name: Cell(truths[name]) for name in MEASURES}
                for _ in range(reps):
                    d = props[design].draw(n, rng=rng)
                    tp = int(np.sum(pred[d.indices, 0] * (d.weights > 0)))
                    for name, (m, views) in resolved.items():
                        L = m.loss(y[d.indices], views(d.indices))
                        cells[name].add(bae.weighted_estimate(L, d.weights, m), tp)
                seconds = time.time() - t0
                for name in MEASURES:
                    r = cells[name].row(
                        measure=name, rate=rate, design=design, n=n, reps=reps, seconds=seconds
                    )
                    rows.append(r)
                    print(
                        f"{name:4s} rate={rate:<6} {design:8s} n={n:5d} truth={r['truth']:.3f} "
                        f"TP=0 {r['no_tp']}/{r['defined']}  overall {r['before_coverage']} -> "
                        f"{r['after_coverage']}  at TP=0 {r['before_coverage_no_tp']} -> "
                        f"{r['after_coverage_no_tp']}  mismatches {r['mismatch_with_tp']}",
                        flush=True,
                    )
    return rows


def _f(x, fmt=".3f") -> str:
    return "—" if x is None else format(x, fmt)


def _joint(r: dict, key: str) -> float | None:
    """P(no true positive and the truth above the interval), over the defined samples."""
    above = r[f"{key}_above_no_tp"]
    return None if above is None else above * r["no_tp"] / r["defined"]


def report(meta: dict, rows: list[dict]) -> str:
    lines = [
        "# F1, MCC and F2 intervals with no labeled true positive",
        "",
        f"`{meta['command']}` — {meta['date']}, {meta['seconds']:.0f} s, Python "
        f"{meta['python']}, numpy {meta['numpy']}.",
        "",
        "Coverage of the 95 % interval. **before**: the previous default (modified Wilson on the "
        "delta-method effective size; at TP̂ = 0 the Kish size of the carrying draws as trials "
        "for the measure itself); **after**: the default now (at TP̂ = 0 the upper limit is the "
        "measure at the upper limit of the true positives' share of the carrying draws, the other "
        "cells at their estimates; `intervals.true_positive_substitution`). Both on the same "
        "draws and estimates. Pools: `make_classification_pool(200_000, rate)` with its default "
        "model; designs: passive and `optimal_proposal(pool, 'f1')` (F1, MCC and F2 from the same "
        f"draws); {meta['reps']} samples per cell. `defined`: samples where the measure is defined "
        "(coverage is over them); `TP = 0`: their share with no labeled true positive (and their "
        "number); coverage overall ± its Monte Carlo s.e., and at TP = 0; `TP = 0, truth above`: "
        "the share of the defined samples with no true positive whose interval lies below the "
        "truth (the new upper limit keeps it below about α/2 = 0.025: given the carrying draws, "
        "no true positive among them is that unlikely once the share exceeds its upper limit); "
        "the mean width at TP = 0; coverage on the samples with a true positive. With a labeled true positive the two intervals are "
        "the same on every sample (`mismatch_with_tp` = "
        f"{sum(r['mismatch_with_tp'] for r in rows)} in the JSON).",
        "",
    ]
    for name in MEASURES:
        lines += [
            f"## {name.upper()}",
            "",
            "| positives | design | n | truth | defined | TP = 0 | coverage before | after "
            "| at TP = 0: before | after | TP = 0, truth above: before | after "
            "| width at TP = 0: before | after | coverage with TP > 0 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            if r["measure"] != name:
                continue
            lines.append(
                f"| {r['rate']:.1%} | {r['design']} | {r['n']:,} | {r['truth']:.3f} "
                f"| {r['defined']} | {_f(r['no_tp_share'], '.3f')} ({r['no_tp']}) "
                f"| {_f(r['before_coverage'])} ± {_f(r['before_mc_se'])} "
                f"| **{_f(r['after_coverage'])}** ± {_f(r['after_mc_se'])} "
                f"| {_f(r['before_coverage_no_tp'])} | **{_f(r['after_coverage_no_tp'])}** "
                f"| {_f(_joint(r, 'before'))} | {_f(_joint(r, 'after'))} "
                f"| {_f(r['before_width_no_tp'])} | {_f(r['after_width_no_tp'])} "
                f"| {_f(r['coverage_with_tp'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="smoke run: 50 repetitions")
    ap.add_argument("--report", action="store_true", help="rewrite the .md from the JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 50
    name = "no_tp_intervals_quick" if args.quick else "no_tp_intervals"
    path = RESULTS / f"{name}.json"
    if args.report:
        data = json.loads(path.read_text())
        path.with_suffix(".md").write_text(report(data["meta"], data["rows"]) + "\n")
        return
    argv_used = sys.argv[1:] if argv is None else list(argv)
    meta = {
        "command": shlex.join(["python", "benchmarks/no_tp_intervals.py", *argv_used]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "reps": args.reps,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        rows = run(args.reps)
    meta["seconds"] = round(time.time() - t0, 1)
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    path.with_suffix(".md").write_text(report(meta, rows) + "\n")
    print(report(meta, rows))


if __name__ == "__main__":
    main()
