"""Re-run chosen repetitions of ``real_pools.py`` and read their estimates in pool units.

An F1 estimate is ``g(R̂)`` of two pool averages, ``R̂ = (TP, (PP + P)/2) / N`` (true positives;
predicted plus actual positives over two). A run that went far wrong shows in which of them
moved: a non-match found among the predicted matches lowers both (true positives by ``k``,
the second by ``k/2``), a match found among the predicted non-matches raises only the second.
Each (configuration, seed) is re-run exactly as ``real_pools.py`` ran it (same budgets, same
seed), so its estimates are those of the part file.

Usage::

    python benchmarks/real_pools_counts.py febrl4_sub400_initial_svm \\
        "auto:weighting=bma-run:20,47" "calibration-run:46,77"

writes ``results/real_pools_counts.{json,md}`` (``--out NAME``: ``results/NAME.{json,md}``, so a
new set of runs does not replace the one the docs follow).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import peer_adapter
from real_pools import DEFAULT_BUDGETS
from real_pools_data import load_pool

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pool")
    ap.add_argument("runs", nargs="+", help="CONFIG:SEED[,SEED…] (the config may contain ':')")
    ap.add_argument("--out", default="real_pools_counts", help="stem of the results files")
    args = ap.parse_args(argv)
    d = load_pool(args.pool)
    y, f = d["labels"], d["preds"]
    n = y.size
    tp, pp, pos = int(np.sum((f == 1) & (y == 1))), int(f.sum()), int(y.sum())
    truth = {"tp": tp, "half_pp_p": (pp + pos) / 2, "f1": 2 * tp / (pp + pos)}
    budgets = list(DEFAULT_BUDGETS)
    rows = []
    for spec in args.runs:
        config, _, seeds = spec.rpartition(":")
        for seed in (int(s) for s in seeds.split(",")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ests = peer_adapter.run_config(d, "f1", budgets, seed, config)
            for b, e in zip(budgets, ests, strict=True):
                counts = np.asarray(e.risk, dtype=float) * n
                row = {"config": config, "seed": seed, "labels": b, "f1": float(e.value)}
                rows.append(row | {"tp": float(counts[0]), "half_pp_p": float(counts[1])})
    command = "python benchmarks/real_pools_counts.py " + " ".join(
        [args.pool]
        + [f'"{r}"' for r in args.runs]
        + ([f"--out {args.out}"] if args.out != "real_pools_counts" else [])
    )
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "pool": args.pool, "truth": truth}
    out["command"] = command
    out["rows"] = rows
    (RESULTS / f"{args.out}.json").write_text(json.dumps(out, indent=1))
    lines = [
        f"# F1 estimates in pool units: `{args.pool}`",
        "",
        f"Generated {out['date']} by `benchmarks/real_pools_counts.py`: chosen repetitions of "
        "`real_pools.py` re-run exactly (same budgets and seeds); the estimated true positives "
        "and (predicted + actual positives)/2, in items. Truth: TP "
        f"{tp:,}, (PP + P)/2 {truth['half_pp_p']:,.1f}, F1 {truth['f1']:.4f}.",
        "",
        f"Command: `{command}`",
        "",
        "| configuration | seed | labels | F1 | TP | (PP + P)/2 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| `{r['config']}` | {r['seed']} | {r['labels']:,} | {r['f1']:.4f} | "
            f"{r['tp']:,.1f} | {r['half_pp_p']:,.1f} |"
        )
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
