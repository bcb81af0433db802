"""The static default against Sawade's closed form on the real pools, on coupled draws.

``static_vs_sawade.py`` runs the two designs on independent draws, and on the rare-event pools
1,000 repetitions of each still leave their MSE ratio uncertain by ±30 %. The two proposals
differ little (the default is the closed form with the scaled belief floor and the defensive
floor ``λ = 0.1``; ``--design mix=0.05`` puts the 5 % mixture, the default before, in its place), so
this script draws both from one *maximal coupling* (Lindvall 1992, Ch. I.5; Thorisson 2000):
with probability ``α = Σ min(q₁, q₂)`` a draw takes one item from ``min(q₁, q₂)/α`` for both
designs, otherwise each design takes its own item from its residual ``(q_k − min)/(1 − α)``.
Each design's draws are then exactly i.i.d. from its own proposal, the two share a fraction
``α`` of them, and their errors are strongly correlated: the ratio of their MSEs is estimated
from the same repetitions with a paired (seed-resampling) bootstrap interval.

Per repetition and design: draws until the largest budget's distinct items; at each budget the
estimate ``bae.estimate(pool, "f1", draws, labels)`` on the prefix that ends at the budget's
distinct item (as ``peer_adapter.run_static``) and its default 95 % interval. Written per pool
and budget: both MSEs, their ratio with its 90 % paired percentile-bootstrap interval, the mean
error of each, both coverages and ``α``.

Run (the default, and the 5 % mixture in place of the defensive floor)::

    PYTHONPATH=. .venv/bin/python benchmarks/static_vs_sawade_coupled.py --reps 2000
    PYTHONPATH=. .venv/bin/python benchmarks/static_vs_sawade_coupled.py --reps 2000 \
        --design mix=0.05 --out benchmarks/results/static_vs_sawade_coupled_mix005
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peer_adapter  # noqa: E402
import real_pools_data  # noqa: E402

import bayes_activeeval as bae  # noqa: E402
from bayes_activeeval.kernel import inverse_cdf  # noqa: E402
from bayes_activeeval.proposals import Draws  # noqa: E402

BUDGETS = (500, 1000, 2000, 5000)
DESIGNS = ("design", "sawade")
OUT = HERE / "results" / "static_vs_sawade_coupled"
N_BOOT = 2000


class Coupling:
    """Maximal coupling of two distributions ``q1``, ``q2`` over the same items."""

    def __init__(self, q1: np.ndarray, q2: np.ndarray) -> None:
        q1, q2 = q1 / q1.sum(), q2 / q2.sum()
        m = np.minimum(q1, q2)
        self.alpha = float(m.sum())
        self.shared = np.cumsum(m)
        self.own = [np.cumsum(np.maximum(q - m, 0.0)) for q in (q1, q2)]

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` coupled draws: (items of design 1, items of design 2)."""
        same = rng.random(n) < self.alpha
        common = inverse_cdf(self.shared, rng.random(n) * self.shared[-1])
        out = []
        for cdf in self.own:
            own = inverse_cdf(cdf, rng.random(n) * cdf[-1]) if cdf[-1] > 0 else common
            out.append(np.where(same, common, own))
        return out[0], out[1]


def _cuts(idx: np.ndarray) -> np.ndarray | None:
    """Per budget, the length of the prefix of ``idx`` that ends at its ``B``-th distinct item
    (as ``peer_adapter.run_static``); ``None`` while ``idx`` has fewer distinct items than the
    largest budget."""
    first = np.sort(np.unique(idx, return_index=True)[1])
    if first.size < max(BUDGETS):
        return None
    return first[np.asarray(BUDGETS) - 1] + 1


def one_rep(pool, labels, coupling, qs, seed: int) -> dict:
    """One coupled repetition: per design and budget the estimate and its 95 % interval."""
    rng = np.random.default_rng(seed)
    streams = [np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)]
    cuts = [None, None]
    while any(c is None for c in cuts):
        new = coupling.draw(2 * max(BUDGETS), rng)
        streams = [np.concatenate([s, a]) for s, a in zip(streams, new, strict=True)]
        cuts = [_cuts(s) for s in streams]
    p = pool.p
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, q, idx, ends in zip(DESIGNS, qs, streams, cuts, strict=True):
            rows = []
            for end in ends:
                cut = idx[:end]
                est = bae.estimate(pool, "f1", Draws(cut, p[cut] / q[cut], q[cut]), labels[cut])
                lo, hi = est.confidence_interval(0.95)
                rows.append([float(est.value), float(lo), float(hi)])
            out[name] = rows
    return out


def design_q(pool, spec: str) -> np.ndarray:
    """The proposal ``spec`` names: ``"static"`` (``optimal_proposal(pool, "f1")`` with its
    defaults) or ``"key=value;..."`` options of ``optimal_proposal`` (``"mix=0.05"``: the 5 %
    mixture in place of the defensive floor, the default before)."""
    if spec == "static":
        return bae.optimal_proposal(pool, "f1").q
    opts = {k: peer_adapter._option(v) for k, v in (o.split("=", 1) for o in spec.split(";"))}
    return bae.optimal_proposal(pool, "f1", **opts).q


def run_pool(name: str, spec: str, reps: int) -> dict:
    d = real_pools_data.load_pool(name)
    pool = peer_adapter.make_pool(d)
    labels = np.asarray(d["labels"], dtype=np.int64)
    qs = [design_q(pool, spec), peer_adapter.sawade_f1_proposal(d["probs"], d["preds"]).q]
    qs = [q / q.sum() for q in qs]
    coupling = Coupling(*qs)
    truth = real_pools_data.f1_of(d)
    recs = [one_rep(pool, labels, coupling, qs, s) for s in range(reps)]
    return {"true": truth, "alpha": coupling.alpha, "reps": recs}


def summarize(res: dict, rng: np.random.Generator) -> dict:
    truth = res["true"]
    out = {"true": truth, "alpha": res["alpha"], "n": len(res["reps"]), "budgets": {}}
    for j, b in enumerate(BUDGETS):
        est = {k: np.array([r[k][j] for r in res["reps"]]) for k in DESIGNS}
        ok = np.isfinite(est["design"][:, 0]) & np.isfinite(est["sawade"][:, 0])
        e = {k: v[ok, 0] - truth for k, v in est.items()}
        cov = {k: float(np.mean((v[ok, 1] <= truth) & (truth <= v[ok, 2]))) for k, v in est.items()}
        mse = {k: float(np.mean(v**2)) for k, v in e.items()}
        n = int(ok.sum())
        boot = np.empty(N_BOOT)
        for t in range(N_BOOT):
            i = rng.integers(0, n, n)
            boot[t] = np.mean(e["design"][i] ** 2) / np.mean(e["sawade"][i] ** 2)
        out["budgets"][str(b)] = {
            "defined": n,
            "mse": mse,
            "ratio": mse["design"] / mse["sawade"],
            "ratio_90": [float(np.percentile(boot, 5)), float(np.percentile(boot, 95))],
            "mean_error": {k: float(np.mean(v)) for k, v in e.items()},
            "coverage": cov,
            "corr": float(np.corrcoef(e["design"], e["sawade"])[0, 1]),
        }
    return out


def markdown(meta: dict, summ: dict) -> str:
    lines = [
        "# Static default vs Sawade's closed form on coupled draws, F1 on the real pools",
        "",
        f"`benchmarks/static_vs_sawade_coupled.py` ({meta['date']}, {meta['seconds']:.0f} s; "
        f"{meta['cmdline']}; code {meta['code']}). Both designs draw from one maximal coupling "
        f"(a share `α` of the draws is common to both); ratio = MSE of the design "
        f"(`{meta['design']}`) / MSE of Sawade's closed form on the same repetitions (below 1: "
        "the design is better), with "
        f"a 90 % paired percentile-bootstrap interval ({N_BOOT} resamples of the seeds); `corr` "
        "= correlation of the two designs' errors; coverage of each design's default 95 % "
        "interval at 2,000 labels. The exact asymptotic variance ratio is in "
        "`static_exact_variance.md`.",
        "",
        "| pool | α | n | 500 labels | 1,000 | 2,000 | 5,000 | corr at 2,000 | coverage at "
        "2,000: design / Sawade |",
        "| --- | ---: | ---: | --- | --- | --- | --- | ---: | --- |",
    ]
    for pool, s in summ.items():
        cells = []
        for b in BUDGETS:
            r = s["budgets"][str(b)]
            lo, hi = r["ratio_90"]
            cells.append(f"{r['ratio']:.3f} [{lo:.3f}, {hi:.3f}]")
        r = s["budgets"]["2000"]
        c = r["coverage"]
        lines.append(
            f"| `{pool}` | {s['alpha']:.3f} | {s['n']} | "
            + " | ".join(cells)
            + f" | {r['corr']:.3f} | {c['design']:.3f} / {c['sawade']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pools", nargs="*", default=None)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--design", default="static", help="'static' or optimal_proposal options")
    ap.add_argument("--code", default="unknown", help="the commit of the package being run")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    pools = args.pools or real_pools_data.pool_names()
    t0 = time.time()
    raw = {p: run_pool(p, args.design, args.reps) for p in pools}
    rng = np.random.default_rng(20261127)
    summ = {p: summarize(r, rng) for p, r in raw.items()}
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cmdline": "python " + " ".join(["benchmarks/static_vs_sawade_coupled.py", *sys.argv[1:]]),
        "code": args.code,
        "design": args.design,
        "seconds": time.time() - t0,
    }
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "pools": summ}, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(meta, summ))
    print(f"wrote {out}.json and {out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
