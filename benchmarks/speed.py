"""Speed and memory of the static engine on large pools (issue 2, item 4).

Times `optimal_proposal(pool, measure)` followed by `proposal.draw(1000)` on binary pools of
10^5 to 10^7 items, and records the peak memory this step allocates (tracemalloc, which sees
NumPy's buffers). Pool construction is timed separately.

Usage: python benchmarks/speed.py [--sizes 100000,1000000,10000000] [--repeat 3]
Writes benchmarks/results/speed.json and .md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc
from pathlib import Path

import numpy as np

import bayes_activeeval as bae

OUT = Path(__file__).parent / "results"


def make_pool(n: int, rng: np.random.Generator) -> bae.Pool:
    p1 = 1.0 / (1.0 + np.exp(-(rng.standard_normal(n) * 2.5 - 7.0)))  # ~0.5% positives
    return bae.Pool(predictions=(p1 > 0.3).astype(np.int8), probs=p1, classes=[0, 1])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--measures", default="f1,accuracy")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        t0 = time.perf_counter()
        pool = make_pool(n, rng)
        build = time.perf_counter() - t0
        for measure in args.measures.split(","):
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                prop = bae.optimal_proposal(pool, measure)
                prop.draw(1000, rng=rng)
                times.append(time.perf_counter() - t0)
            tracemalloc.start()
            prop = bae.optimal_proposal(pool, measure)
            prop.draw(1000, rng=rng)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            del prop
            row = {
                "n_items": n,
                "measure": measure,
                "pool_build_s": build,
                "proposal_plus_draw_s_best": min(times),
                "proposal_plus_draw_s_median": float(np.median(times)),
                "peak_alloc_mb": peak / 2**20,
            }
            rows.append(row)
            print(row, flush=True)
        del pool
    OUT.mkdir(exist_ok=True)
    meta = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    (OUT / "speed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# Speed: `optimal_proposal` + `draw(1000)` on binary pools",
        "",
        f"Machine: 2 cores ({meta['machine']}), Python {meta['python']}. Median of {args.repeat} runs;"
        " peak memory is what the step allocates (tracemalloc), excluding the pool itself.",
        "",
        "| items | measure | pool build (s) | proposal + 1000 draws (s) | peak allocation (MB) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n_items']:,} | {r['measure']} | {r['pool_build_s']:.2f} | "
            f"{r['proposal_plus_draw_s_median']:.3f} | {r['peak_alloc_mb']:.0f} |"
        )
    (OUT / "speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
