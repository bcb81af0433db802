"""The static default against Sawade's closed form on the real pools, with enough repetitions to
tell them apart (issue 12, "Done when": the static default's MSE <= Sawade's closed form).

``real_pools.py`` runs 100 repetitions of each configuration; for the static designs, whose
F1 errors at 500-5,000 labels are heavy-tailed (an estimate moves by 0.05-0.1 when one of a few
rare errors is drawn), 100 repetitions leave the MSE ratio uncertain by a factor of two. Static
runs are cheap (0.05-0.3 s), so this script runs ``static`` (``optimal_proposal(pool, "f1")``
with its defaults) and ``sawade`` (Sawade (2012), Cor. 4.4, from ``probs``, no floor and no mix)
through the same code (``real_pools.run_one`` → ``peer_adapter.run_config``) for ``--reps``
seeds per pool (``--reps-override pool=R`` for more), caches the repetitions as JSON lines in
``--parts`` (a local cache, not committed; a rerun skips seeds already there) and writes per pool
and budget: both MSEs, their ratio with a 90 % percentile-bootstrap interval (the two designs'
runs resampled independently: with different proposals the same seed gives unrelated draws),
and both coverages of the 95 % interval. The exact asymptotic ratio of their variances is in
``results/static_exact_variance.md``.

Run::

    PYTHONPATH=. nice -n 5 .venv/bin/python benchmarks/static_vs_sawade.py --reps 1000 \\
        --reps-override febrl4_sub100_state_svm=5000 febrl4_sub400_initial_svm=5000 \\
        diamonds_ideal_svm=5000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_pools  # noqa: E402
import real_pools_data  # noqa: E402

CONFIGS = ("static", "sawade")
BUDGETS = [500, 1000, 2000, 5000]
DEFAULT_PARTS = HERE / "pools" / "static_vs_sawade_parts"
DEFAULT_OUT = HERE / "results" / "static_vs_sawade.json"
N_BOOT = 2000


def _errors(recs: list[dict], truth: float) -> tuple[np.ndarray, np.ndarray]:
    """(errors, covered) arrays (reps, budgets); NaN error where the estimate is undefined."""
    E = np.array([real_pools._num(r["est"]) for r in recs]) - truth
    L = np.array([real_pools._num(r["lo"]) for r in recs])
    H = np.array([real_pools._num(r["hi"]) for r in recs])
    cov = np.isfinite(L) & np.isfinite(H) & (L <= truth) & (truth <= H)
    return E, cov


def compare(parts: Path, pool: str, n_reps: int, rng: np.random.Generator) -> dict:
    """Per budget: MSEs, their ratio and its bootstrap interval, coverages, repetitions."""
    truth = real_pools.true_f1(real_pools_data.load_pool(pool))
    runs = {}
    for c in CONFIGS:
        got = real_pools.read_part(real_pools.part_path(parts, pool, c), BUDGETS)
        recs = [got[s] for s in sorted(got) if s < n_reps and "est" in got[s]]
        runs[c] = _errors(recs, truth)
    out = {"true": truth, "budgets": {}}
    for j, b in enumerate(BUDGETS):
        e = {c: runs[c][0][:, j] for c in CONFIGS}
        e = {c: v[np.isfinite(v)] for c, v in e.items()}
        mse = {c: float(np.mean(v**2)) for c, v in e.items()}
        boot = np.empty(N_BOOT)
        for k in range(N_BOOT):
            s1 = rng.choice(e["static"], e["static"].size)
            s2 = rng.choice(e["sawade"], e["sawade"].size)
            boot[k] = np.mean(s1**2) / np.mean(s2**2)
        out["budgets"][str(b)] = {
            "n": {c: int(runs[c][0].shape[0]) for c in CONFIGS},
            "defined": {c: int(e[c].size) for c in CONFIGS},
            "mse": mse,
            "ratio": mse["static"] / mse["sawade"],
            "ratio_90": [float(np.percentile(boot, 5)), float(np.percentile(boot, 95))],
            "coverage": {c: float(runs[c][1][:, j].mean()) for c in CONFIGS},
        }
    return out


def markdown(res: dict) -> str:
    lines = [
        "# Static default vs Sawade's closed form, F1 on the real pools",
        "",
        f"`benchmarks/static_vs_sawade.py` ({res['meta']['date']}; {res['meta']['cmdline']}). "
        "Ratio = MSE of the static default / MSE of Sawade's closed form at the same budget "
        "(below 1: the default is better), with a 90 % percentile-bootstrap interval "
        f"({N_BOOT} resamples); coverage of the 95 % interval of each design; n repetitions "
        "(seeds 0..n-1) of each. The exact asymptotic variance ratio, with the pools' true "
        "labels, is in `static_exact_variance.md`.",
        "",
        "| pool | n | 500 labels | 1,000 | 2,000 | 5,000 | coverage at 2,000: static / Sawade |",
        "| --- | ---: | --- | --- | --- | --- | --- |",
    ]
    for pool, r in res["pools"].items():
        cells = []
        for b in BUDGETS:
            s = r["budgets"][str(b)]
            lo, hi = s["ratio_90"]
            cells.append(f"{s['ratio']:.2f} [{lo:.2f}, {hi:.2f}]")
        c = r["budgets"]["2000"]["coverage"]
        n = r["budgets"]["2000"]["n"]["static"]
        lines.append(
            f"| `{pool}` | {n} | "
            + " | ".join(cells)
            + f" | {c['static']:.3f} / {c['sawade']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pools", nargs="*", default=None)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--reps-override", nargs="*", default=[], metavar="POOL=R")
    ap.add_argument("--parts", default=str(DEFAULT_PARTS))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--report", action="store_true", help="only summarize the cached runs")
    args = ap.parse_args(argv)
    pools = args.pools or real_pools_data.pool_names()
    reps = {p: args.reps for p in pools}
    for o in args.reps_override:
        k, v = o.rsplit("=", 1)
        if k not in reps:
            raise SystemExit(f"--reps-override names unknown pool {k!r}; pools: {pools}")
        reps[k] = int(v)
    parts = Path(args.parts)
    t0 = time.time()
    if not args.report:
        with tempfile.TemporaryDirectory() as tmp:  # real_pools' own report is not wanted
            for p in pools:
                argv_p = ["--pools", p, "--reps", str(reps[p]), "--configs", ",".join(CONFIGS)]
                argv_p += ["--budgets", ",".join(map(str, BUDGETS)), "--parts", str(parts)]
                argv_p += ["--out", str(Path(tmp) / "real_pools.json")]
                real_pools.main(argv_p)
    rng = np.random.default_rng(20261126)
    res = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cmdline": "python " + " ".join(["benchmarks/static_vs_sawade.py", *sys.argv[1:]]),
            "seconds": round(time.time() - t0, 1),
        },
        "pools": {p: compare(parts, p, reps[p], rng) for p in pools},
    }
    out = Path(args.out)
    out.write_text(json.dumps(res, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(res))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
