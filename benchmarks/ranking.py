"""Active evaluation and comparison of rankers (Sawade (2012), Ch. 6) on a synthetic LETOR pool.

Pool: ``ranking.make_ranking_pool`` — 3,000 queries with 10-100 documents each (uniform), grades
0-4 with MSLR-like frequencies, a good but imperfect relevance model, two rankers, query costs
``∝ Σ log(1 + document length)`` normalized to mean 1 (so they grow with the list length).
The label budget is ``Λ`` cost units (default 200, about 7% of the pool's total cost). Ranker
``b`` is a new version of ``a`` that re-ranks ``--changed`` of the queries (default 40%) and
returns ``a``'s list on the others; ``--changed 1 --tag all_changed`` re-ranks every query.

Targets: DCG and ERR of ranker ``a`` (estimation, Eq. 6.10) and the DCG and ERR differences
``a − b`` (comparison, Eq. 6.11). Designs (estimator in brackets; ``IS`` is the plain
self-normalized estimate, ``MA`` the model-assisted one, the package default):
``passive`` (uniform queries, IS: the baseline), ``passive + MA`` (the estimator alone),
``optimal IS`` (the thesis: Eq. 6.10/6.11 with costs), ``optimal MA`` (the default of
``ranking.evaluate``/``compare``: the relevance model's exact expected loss per query as a control
variate, with the proposal optimal for that estimator), and ablations of the default:
``cost-blind MA`` (``λ ≡ 1`` in the proposal, the thesis's ``active_uniC``),
``uniform-relevance MA`` (the proposal under a uniform relevance model, ``active_uniD``; the
estimator keeps the pool's model) and ``cost-only MA`` (``q ∝ λ^(-1/2)``, ``active_λ``).
Each cell: ``--reps`` repetitions (default 2,000) of drawing queries until the budget is spent
and estimating with ``ranking.estimate`` / ``ranking.test``; bias, RMSE, MSE relative to passive
at equal cost (with its Monte Carlo standard error), 95% coverage of the default (t) interval and
of the Wald interval, and the mean standard error against the spread of the estimates.

Usage: python benchmarks/ranking.py [--reps 2000] [--queries 3000] [--budget 200]
       [--changed 0.4] [--tag NAME] [--quick]
Writes benchmarks/results/ranking[_NAME].json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bayes_activeeval import ranking

OUT = Path(__file__).parent / "results"

DESIGNS = {
    "passive": {"design": "passive", "estimator": "ipw"},
    "passive + MA": {"design": "passive", "estimator": "model_assisted"},
    "optimal IS": {"design": "optimal", "estimator": "ipw"},
    "optimal MA": {"design": "optimal", "estimator": "model_assisted"},
    "cost-blind MA": {"design": "optimal", "costs": False, "estimator": "model_assisted"},
    "uniform-relevance MA": {"design": "uniform-relevance", "estimator": "model_assisted"},
    "cost-only MA": {"design": "cost", "estimator": "model_assisted"},
}
TARGETS = [
    ("dcg", ("a",)),
    ("err", ("a",)),
    ("dcg", ("a", "b")),
    ("err", ("a", "b")),
]


def run_cell(data, measure, models, spec, budget, reps, seed):
    pool = data.pool
    kw = {"model": models[0]} if len(models) == 1 else {"models": models}
    estimator = spec.get("estimator", "ipw")
    prop = ranking.proposal(pool, measure, **kw, **spec)
    truth = data.true_value(measure, models[0])
    if len(models) == 2:
        truth -= data.true_value(measure, models[1])
    rng = np.random.default_rng(seed)
    vals, ses, cover_t, cover_w, n_q, n_d, spent, reject = [], [], [], [], [], [], [], []
    for _ in range(reps):
        d = ranking.draw(pool, prop, budget, rng=rng)
        if len(models) == 1:
            est = ranking.estimate(
                pool, measure, d, data.grades, model=models[0], estimator=estimator
            )
            v, se = est.value, est.stderr
            lo, hi = est.confidence_interval(0.95)
            wl, wh = est.confidence_interval(0.95, "wald")
        else:
            res = ranking.test(pool, measure, d, data.grades, models=models, estimator=estimator)
            v, se = res.estimate, res.stderr
            lo, hi = wl, wh = res.confidence_interval(0.95)
            reject.append(res.pvalue < 0.05)
        vals.append(v)
        ses.append(se)
        cover_t.append(lo <= truth <= hi)
        cover_w.append(wl <= truth <= wh)
        uq = np.unique(d.indices)
        n_q.append(uq.size)
        n_d.append(len(d))
        spent.append(pool.costs[uq].sum())
    vals = np.asarray(vals)
    sq = (vals - truth) ** 2
    mse = float(np.mean(sq))
    out = {
        "mse_mc_se": float(sq.std(ddof=1) / np.sqrt(reps)),
        "mean_stderr": float(np.mean(ses)),
        "sd": float(vals.std(ddof=1)),
        "truth": truth,
        "mean": float(vals.mean()),
        "bias": float(vals.mean() - truth),
        "bias_mc_se": float(vals.std(ddof=1) / np.sqrt(reps)),
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "coverage": float(np.mean(cover_t)),
        "coverage_wald": float(np.mean(cover_w)),
        "queries": float(np.mean(n_q)),
        "draws": float(np.mean(n_d)),
        "cost": float(np.mean(spent)),
        "expected_cost_per_draw": prop.expected_cost(pool.costs),
    }
    if reject:
        out["power"] = float(np.mean(reject))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--budget", type=float, default=200.0)
    ap.add_argument(
        "--changed",
        type=float,
        default=0.4,
        help="fraction of queries that ranker b re-ranks (elsewhere it returns a's list)",
    )
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.queries = 100, 600
    t0 = time.time()
    data = ranking.make_ranking_pool(args.queries, changed=args.changed, rng=2012)
    pool = data.pool
    rows = []
    for measure, models in TARGETS:
        base = None
        for name, spec in DESIGNS.items():
            t = time.time()
            r = run_cell(data, measure, models, spec, args.budget, args.reps, seed=1)
            if name == "passive":
                base, base_rel = r["mse"], r["mse_mc_se"] / r["mse"]
            # MC SE of the ratio of two independent MSEs (delta method on the log)
            rel = np.hypot(r["mse_mc_se"] / r["mse"], base_rel) if name != "passive" else 0.0
            r.update(
                measure=measure,
                target="estimate" if len(models) == 1 else "compare",
                models=list(models),
                design=name,
                mse_vs_passive=r["mse"] / base,
                mse_vs_passive_mc_se=float(r["mse"] / base * rel),
                seconds=round(time.time() - t, 1),
            )
            rows.append(r)
            print(
                f"{measure:4s} {'-'.join(models):4s} {name:20s} mse/passive={r['mse_vs_passive']:.3f} "
                f"bias={r['bias']:+.4g} (±{r['bias_mc_se']:.2g}) cov={r['coverage']:.3f} "
                f"queries={r['queries']:.0f} [{r['seconds']}s]",
                flush=True,
            )
    meta = {
        "queries": pool.n_queries,
        "documents": int(pool.n_docs.sum()),
        "docs_per_query": [int(pool.n_docs.min()), int(pool.n_docs.max())],
        "budget": args.budget,
        "changed": args.changed,
        "total_cost": float(pool.costs.sum()),
        "cost_range": [float(pool.costs.min()), float(pool.costs.max())],
        "corr_cost_docs": float(np.corrcoef(pool.costs, pool.n_docs)[0, 1]),
        "grade_frequencies": np.bincount(data.grades[data.grades >= 0], minlength=5).tolist(),
        "reps": args.reps,
        "command": " ".join(
            ["python benchmarks/ranking.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "seconds": round(time.time() - t0, 1),
    }
    OUT.mkdir(exist_ok=True)
    suffix = ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag else "")
    (OUT / f"ranking{suffix}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (OUT / f"ranking{suffix}.md").write_text(report(meta, rows))
    print(f"done in {meta['seconds']} s")


def report(meta, rows) -> str:
    lines = [
        "# Ranking evaluation and comparison (Sawade (2012), Ch. 6)",
        "",
        f"Synthetic LETOR-like pool: {meta['queries']:,} queries, {meta['documents']:,} documents "
        f"({meta['docs_per_query'][0]}-{meta['docs_per_query'][1]} per query), grade counts 0-4 "
        f"{meta['grade_frequencies']}; query costs {meta['cost_range'][0]:.2f}-"
        f"{meta['cost_range'][1]:.2f} (mean 1, correlation with the list length "
        f"{meta['corr_cost_docs']:.2f}). Ranker b re-ranks {meta['changed']:.0%} of the queries "
        "and returns a's list on the others. "
        f"Budget {meta['budget']:g} cost units per run; "
        f"{meta['reps']:,} runs per cell (`{meta['command']}`, {meta['seconds']:.0f} s).",
        "",
        "MSE/passive is at equal label cost, with its Monte Carlo standard error (treating the "
        "two MSEs as independent: conservative where they share draws, as passive and passive "
        "+ MA do). IS: the plain self-normalized estimate; MA: the "
        "model-assisted estimate (the default). Coverage: the default (t) interval of `Estimate` "
        "for estimation, the Wald interval of `ComparisonResult` for comparison; the Monte Carlo "
        f"standard error of a coverage near 0.95 is {np.sqrt(0.95 * 0.05 / meta['reps']):.4f}. "
        "Bias is in units of the measure, with its Monte Carlo standard error; SE/sd is the mean "
        "reported standard error over the spread of the estimates.",
        "",
        "| target | measure | design | MSE/passive (± MC se) | bias (± MC se) | RMSE | SE/sd "
        "| 95% coverage | queries | cost | power |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        target = "a" if r["target"] == "estimate" else "a − b"
        power = f"{r['power']:.3f}" if "power" in r else ""
        lines.append(
            f"| {target} | {r['measure'].upper()} | {r['design']} | {r['mse_vs_passive']:.3f} "
            f"(± {r['mse_vs_passive_mc_se']:.3f}) | "
            f"{r['bias']:+.3g} (± {r['bias_mc_se']:.2g}) | {r['rmse']:.4g} | "
            f"{r['mean_stderr'] / r['sd']:.3f} | {r['coverage']:.3f} | "
            f"{r['queries']:.0f} | {r['cost']:.1f} | {power} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
