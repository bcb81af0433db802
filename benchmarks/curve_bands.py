"""Simultaneous coverage of the ROC and precision-recall bands of ``curves.curve_band``.

For each cell (prevalence 1:10, 1:100, 1:1,000; ROC or PR curve; passive sampling or
``threshold_free.rank_proposal``), ``--reps`` samples of ``--labels`` draws from a 20,000-item
``datasets.make_classification_pool(separation=3.0, noise=0.3, rng=12)`` each get a band
(``curve_band(..., n_boot=--n-boot)``, default grid and level 0.95). A run covers when the band
contains the pool's true curve at every grid point (simultaneous coverage). Reported per cell:
coverage with its Monte Carlo standard error, the runs whose sample defines a curve (both classes
drawn), the runs on which ``curve_band`` warned of fewer than ``curves.MIN_POSITIVES`` effective
positives, the mean critical value ``c`` and the mean band width over the grid, and the lowest
pointwise coverage with its grid point. Every cell draws from its own ``default_rng(123)`` (the
draws and the bootstrap share it), so a cell's figures do not depend on which other cells run.

These are the figures of ``docs/threshold-free.md``, "Curves with simultaneous bands" (the
studentized band with the Agresti-Coull floor); they reproduce the review's scratch run cell for
cell.

Usage:
    nice -n 5 python benchmarks/curve_bands.py [--reps 300] [--n-boot 500] [--labels 1000]
        [--workers 2] [--quick]

Writes ``benchmarks/results/curve_bands.json`` (after each finished cell) and ``.md``. With
``--reps 300 --workers 2``: about 10 minutes on 2 cores. ``--quick`` is a smoke run (10
repetitions, ``n_boot=50``) written to ``curve_bands_quick.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval import curves
from bayes_activeeval import threshold_free as tf

RESULTS = Path(__file__).resolve().parent / "results"
PREVALENCES = (0.1, 0.01, 0.001)
CURVES = ("roc", "pr")
DESIGNS = ("passive", "optimal")
POOL_SIZE = 20_000
POOL_SEED = 12
DRAW_SEED = 123


def run_cell(prev: float, curve: str, design: str, reps: int, n_labels: int, n_boot: int) -> dict:
    """Coverage of one cell (see the module docstring)."""
    t0 = time.time()
    sp = bae.datasets.make_classification_pool(
        POOL_SIZE, prev, separation=3.0, noise=0.3, rng=POOL_SEED
    )
    pool, y = sp.pool, sp.labels
    s = tf.model_scores(pool, "model")
    kind = "roc_auc" if curve == "roc" else "average_precision"
    prop = tf.rank_proposal(pool, kind) if design == "optimal" else bae.passive_proposal(pool)
    rng = np.random.default_rng(DRAW_SEED)
    tp, fp, _ = curves._cumulative(y, s, pool.p)
    hits, pointwise, crit, width = [], [], [], []
    undefined = warned = 0
    grid = None
    for _ in range(reps):
        d = prop.draw(n_labels, rng=rng)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                band = curves.curve_band(pool, d, y[d.indices], curve=curve, n_boot=n_boot, rng=rng)
            warned += any("effective positives" in str(w.message) for w in caught)
        except ValueError:  # one class only among the draws: no curve
            undefined += 1
            continue
        grid = band.x
        truth = curves._on_grid(curve, tp, fp, band.x)[0]
        inside = (band.low - 1e-12 <= truth) & (truth <= band.high + 1e-12)
        hits.append(bool(inside.all()))
        pointwise.append(inside)
        crit.append(float(band.critical_value))
        width.append(float(np.mean(band.high - band.low)))
    n_def = len(hits)
    cov = float(np.mean(hits)) if n_def else float("nan")
    pw = np.mean(pointwise, axis=0) if n_def else None
    return {
        "prevalence": prev,
        "curve": curve,
        "design": design,
        "labels": n_labels,
        "n_boot": n_boot,
        "reps": reps,
        "defined": n_def,
        "undefined": undefined,
        "warned": warned,
        "coverage": cov,
        "mc_se": float(np.sqrt(cov * (1 - cov) / n_def)) if n_def else float("nan"),
        "critical_value": float(np.mean(crit)) if n_def else float("nan"),
        "mean_width": float(np.mean(width)) if n_def else float("nan"),
        "min_pointwise": float(pw.min()) if n_def else float("nan"),
        "min_pointwise_at": float(grid[pw.argmin()]) if n_def else float("nan"),
        "seconds": round(time.time() - t0, 1),
    }


def _ratio(prev: float) -> str:
    return f"1:{round(1 / prev):,}"


def report(meta: dict, rows: list[dict]) -> str:
    lines = [
        "# Simultaneous coverage of the ROC and PR bands (`curves.curve_band`)",
        "",
        f"`{meta['command']}` — {meta['date']}, {meta['seconds']:.0f} s wall clock "
        f"({meta['workers']} worker(s)), Python {meta['python']}, numpy {meta['numpy']}.",
        "",
        f"Pool: {POOL_SIZE:,}-item `datasets.make_classification_pool(prevalence, "
        f"separation=3.0, noise=0.3, rng={POOL_SEED})`; {meta['labels']:,} labels per sample, "
        f"`n_boot={meta['n_boot']}`, default grid (false-positive rates on [0, 1], recalls on "
        f"[0.01, 0.95]), level 0.95; {meta['reps']} samples per cell, draws and bootstrap from "
        f"`default_rng({DRAW_SEED})` in every cell. Design `optimal` is "
        "`threshold_free.rank_proposal(pool, 'roc_auc' | 'average_precision')`. Coverage: the "
        "band contains the pool's true curve at every grid point, over the samples that define a "
        "curve (both classes drawn). MC s.e.: `sqrt(cov (1 − cov)/defined)`. `c`: mean critical "
        "value; width: mean over the grid and the samples. Warned: samples with fewer than "
        "`curves.MIN_POSITIVES` effective positives.",
        "",
        "| prevalence | curve | design | coverage | MC s.e. | c | mean width | defined "
        "| warned | lowest pointwise coverage (at x) | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {_ratio(r['prevalence'])} | {r['curve'].upper()} | {r['design']} "
            f"| {r['coverage']:.3f} | {r['mc_se']:.3f} | {r['critical_value']:.2f} "
            f"| {r['mean_width']:.3f} | {r['defined']} of {r['reps']} | {r['warned']} "
            f"| {r['min_pointwise']:.3f} ({r['min_pointwise_at']:.3g}) | {r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def _order(r: dict) -> tuple:
    return (
        PREVALENCES.index(r["prevalence"]),
        CURVES.index(r["curve"]),
        DESIGNS.index(r["design"]),
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--n-boot", type=int, default=500)
    ap.add_argument("--labels", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="smoke run: 10 reps, n_boot 50")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.n_boot = 10, 50
    name = "curve_bands_quick" if args.quick else "curve_bands"
    path = RESULTS / f"{name}.json"
    argv_used = sys.argv[1:] if argv is None else list(argv)
    meta = {
        "command": shlex.join(["python", "benchmarks/curve_bands.py", *argv_used]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "reps": args.reps,
        "n_boot": args.n_boot,
        "labels": args.labels,
        "workers": args.workers,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "bayes_activeeval": getattr(bae, "__version__", "?"),
    }
    cells = [(p, c, d) for p in PREVALENCES for c in CURVES for d in DESIGNS]
    rows: list[dict] = []
    t0 = time.time()

    def save() -> None:
        rows.sort(key=_order)
        meta["seconds"] = round(time.time() - t0, 1)
        path.write_text(json.dumps({"meta": meta, "cells": rows}, indent=1) + "\n")

    with ProcessPoolExecutor(max_workers=args.workers) as ex:
        futures = [
            ex.submit(run_cell, p, c, d, args.reps, args.labels, args.n_boot) for p, c, d in cells
        ]
        for fut in as_completed(futures):
            r = fut.result()
            rows.append(r)
            print(
                f"{_ratio(r['prevalence'])} {r['curve']} {r['design']}: cover "
                f"{r['coverage']:.3f} ± {r['mc_se']:.3f} ({r['defined']} defined, "
                f"{r['warned']} warned) c {r['critical_value']:.2f} width "
                f"{r['mean_width']:.3f} {r['seconds']:.0f}s",
                flush=True,
            )
            save()
    save()
    path.with_suffix(".md").write_text(report(meta, rows))


if __name__ == "__main__":
    main()
