"""Merge ``shared/peers/peers.py`` checkpoints whose methods ran different numbers of repetitions.

``peers.py`` assembles its JSON only from one plan (the same ``-R`` for a method on every pool);
when a slow method (Ours-8, OASIS on a large skewed pool) could run only a few repetitions on some
pools, the runs are made in several invocations with their own checkpoints. This script reads
every checkpoint line (``{"key": "pool|measure|method|seed0", "budgets": [...], "recs": [...]}``),
keeps each (pool, measure, method, seed) once, summarizes with ``peers.summarize`` and writes the
same JSON and markdown as ``peers.py`` (``meta.reps`` then maps ``pool/measure/method`` to the
repetitions used; the markdown's R column shows them).

Run it with the peers' interpreter (it imports ``peers.py``)::

    ../peers-venv/bin/python benchmarks/peers_merge.py --peers-dir ../shared/peers \\
        --pool-dir benchmarks/pools --checkpoints a.jsonl b.jsonl \\
        --out benchmarks/results/peers.json --md benchmarks/results/peers.md

``--base peers.json`` keeps the pools of an earlier merged JSON whose checkpoints are gone and adds
(or replaces) the pools of the given checkpoints: how ``tweets_web_svm`` (checkpoint
``results/peers_tweets.jsonl``) joined the five earlier pools.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def _extend(recs: dict, base: dict, pools: set, keep) -> None:
    """Add the base's repetitions of every method of ``pools`` to ``recs`` (a seed already in
    ``recs`` wins). The base keeps no per-repetition wall time or draws: each repetition gets the
    method's mean (so the merged mean is exact and the merged standard deviation counts them as
    equal)."""
    for pool in pools:
        for measure, by_method in base["results"].get(pool, {}).items():
            for method, summary in by_method.items():
                if keep is not None and method not in keep:
                    continue
                got = recs.setdefault((pool, measure, method), {})
                for seed, est in zip(
                    summary.get("seeds", []), summary.get("estimates", []), strict=True
                ):
                    if seed in got:
                        continue
                    rec = {"seed": seed, "est": [np.nan if v is None else v for v in est]}
                    rec["wall_s"] = summary.get("wall_s_mean", np.nan)
                    if "draws_mean" in summary:
                        rec["draws"] = summary["draws_mean"]
                    got[seed] = rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers-dir", default=os.path.join("..", "shared", "peers"))
    ap.add_argument("--pool-dir", default=os.path.join("benchmarks", "pools"))
    ap.add_argument("--checkpoints", nargs="+", required=True)
    ap.add_argument(
        "--base",
        default=None,
        help="an earlier merged JSON whose pools are kept (a pool in the checkpoints replaces it)",
    )
    ap.add_argument(
        "--extend",
        action="store_true",
        help="with --base: a pool in the checkpoints keeps the base's repetitions of every method "
        "and adds the checkpoints' (a checkpoint's seed replaces the base's)",
    )
    ap.add_argument("--budgets", default="500,1000,2000,5000")
    ap.add_argument("--methods", default=None, help="keep only these (comma-separated)")
    ap.add_argument(
        "--max-reps",
        nargs="*",
        default=[],
        metavar="METHOD=R",
        help="use at most R repetitions (seeds 0..R-1) of a method",
    )
    ap.add_argument("--note", action="append", default=[], help="added to meta.notes")
    ap.add_argument("--out", required=True)
    ap.add_argument("--md", required=True)
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.peers_dir))
    import peers

    budgets = sorted(int(b) for b in args.budgets.split(","))
    keep = set(args.methods.split(",")) if args.methods else None
    cap = {k: int(v) for k, v in (o.rsplit("=", 1) for o in args.max_reps)}
    recs: dict = {}
    for path in args.checkpoints:
        with open(path) as fh:
            for line in fh:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                have = d.get("budgets") or []
                if not set(budgets) <= set(have):
                    continue
                cols = [have.index(b) for b in budgets]  # a run records every budget it passes
                pool, measure, method, _ = d["key"].split("|")
                if keep is not None and method not in keep:
                    continue
                for r in d["recs"]:
                    if method in cap and r["seed"] >= cap[method]:
                        continue
                    if "est" in r and r["est"] is not None:
                        r = {**r, "est": [r["est"][c] for c in cols]}
                    recs.setdefault((pool, measure, method), {})[r["seed"]] = r
    if args.extend and not args.base:
        raise SystemExit("--extend needs --base")
    pools_info, results, reps = {}, {}, {}
    base_from = []
    if args.base:
        with open(args.base) as fh:
            base = json.load(fh)
        if base["meta"]["budgets"] != budgets:
            raise SystemExit(f"--base has budgets {base['meta']['budgets']}, not {budgets}")
        new_pools = {k[0] for k in recs}
        if args.extend:
            _extend(recs, base, new_pools, keep)
        for pool, info in base["pools"].items():
            if pool in new_pools:
                continue
            pools_info[pool] = info
            results[pool] = base["results"][pool]
            for measure, by_method in results[pool].items():
                for method, summary in by_method.items():
                    reps[f"{pool}/{measure}/{method}"] = summary["n_reps"]
        base_from = [base["meta"]["host"]]
    order = {m: i for i, m in enumerate(peers.PEER_METHODS)}
    for pool, measure, method in sorted(
        recs, key=lambda k: (k[0], k[1], order.get(k[2], 99), k[2])
    ):
        if pool not in pools_info:
            path = os.path.join(args.pool_dir, pool + ".npz")
            p = peers.load_pool(path)
            pools_info[pool] = {
                "path": os.path.abspath(path),
                "M": int(p["labels"].size),
                "n_pos": int(p["labels"].sum()),
                "n_pred_pos": int(p["preds"].sum()),
                "true": {},
            }
        info = pools_info[pool]
        if measure not in info["true"]:
            info["true"][measure] = peers.true_measure(peers.load_pool(info["path"]), measure)
        rs = [recs[(pool, measure, method)][s] for s in sorted(recs[(pool, measure, method)])]
        results.setdefault(pool, {}).setdefault(measure, {})[method] = peers.summarize(
            rs, info["true"][measure], budgets
        )
        reps[f"{pool}/{measure}/{method}"] = len(rs)
    res = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "host": "; ".join(
                [
                    "merged by peers_merge.py from {}".format(
                        ", ".join(os.path.basename(c) for c in args.checkpoints)
                    ),
                    *(f"earlier pools from --base ({h})" for h in base_from),
                ]
            ),
            "cmdline": " ".join(sys.argv),
            "budgets": budgets,
            "reps": reps,
            "seed0": 0,
            "workers": 1,
            "versions": peers._versions(),
            "notes": [
                "probs = expit(scores) for all pools; preds from the npz",
                "MSE/bias/mean_est/var over reps whose estimate is finite; "
                "nan_frac = share of reps with undefined estimate",
                "wall_s = whole repetition, one worker per invocation, on a "
                "machine shared with other jobs (load 15-20 on 2 cores): "
                "compare seconds only within a pool",
                *args.note,
            ],
        },
        "pools": pools_info,
        "results": results,
    }
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    peers.write_markdown(res, args.md)
    print(f"wrote {args.out} and {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
