"""Coverage and width of every interval method near the boundary of the range (issue 13).

A binary pool of 20,000 items whose model has accuracy exactly 0.9, 0.99, 0.995, 0.999 or 1.0
(the wrong items are drawn with probability proportional to the model's own error probability, so
its probabilities are informative, as a good model's are). Designs: passive (``q = p``) and the
package's ``optimal_proposal(pool, "accuracy")``. Draws ``n`` = 20 … 2,000 with replacement,
``--reps`` repetitions per cell (default 4,000), all vectorised over repetitions with NumPy: the
estimate, its delta-method standard error and the Satterthwaite df are the closed forms of
:func:`bayes_activeeval.weighted_estimate` for a plain risk (checked against it on the first
repetitions of every cell), the intervals come from :func:`bayes_activeeval.intervals.interval`.

Beside them, the coverage of the 95% equal-tailed credible interval of the posterior that
``bae status`` prints (``Session.posterior()``: the conjugate contingency-table model with
design-weighted counts) and of the same model with ``prior_strength`` scaled to the labels, on
the first ``--post-reps`` repetitions of every cell (each one a posterior fit).

Usage: nice -n 5 python benchmarks/boundary_coverage.py [--reps 4000] [--post-reps 200] [--quick]
Writes benchmarks/results/boundary_coverage.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval import intervals as iv

OUT = Path(__file__).parent / "results"
N_ITEMS = 20_000
TRUTHS = (0.9, 0.99, 0.995, 0.999, 1.0)
SIZES = (20, 50, 100, 200, 500, 1000, 2000)
BELIEFS = ("calibrated", "underconfident")
#: sizes at which the posterior is fitted (each repetition is one fit)
POSTERIOR_SIZES = (50, 200, 1000)
LEVEL = 0.95
#: The column that is the package's default: ``Estimate.confidence_interval()`` applies the
#: modified Wilson interval with the weight-df adjustment (``n_df`` = weight df − 1)
DEFAULT_COL = "modified_wilson_hdf"
#: (column, method, options) of every interval compared
METHODS = (
    ("wald", "wald", {}),
    ("t", "t", {}),
    ("logit", "logit", {}),
    ("wilson", "wilson", {}),
    ("wilson_df", "wilson", {"n_df": "design"}),
    ("wilson_satt", "wilson", {"n_df": "satterthwaite"}),
    ("modified_wilson", "modified_wilson", {}),
    ("modified_wilson_df", "modified_wilson", {"n_df": "design"}),
    ("modified_wilson_cap", "modified_wilson", {"n_max": True}),
    ("modified_wilson_wdf", "modified_wilson", {"n_df": "weights"}),
    ("modified_wilson_hdf", "modified_wilson", {"n_df": "heterogeneity"}),
    ("jeffreys", "jeffreys", {}),
    ("clopper_pearson", "clopper_pearson", {}),
)


def make_pool(accuracy: float, rng: np.random.Generator, belief: str = "calibrated"):
    """A pool of N_ITEMS items whose model is right on exactly round(accuracy·N) of them.

    ``belief="calibrated"``: the model's mean error probability is the true error rate (0.001 at
    accuracy 1); ``"underconfident"``: it is 0.1 whatever the truth (a good model with cautious
    probabilities, the case of the issue's 219/219 session).
    """
    if belief == "calibrated":
        mean_err = max(1.0 - accuracy, 0.001)  # the model's belief: never certain
    else:
        mean_err = 0.1
    a = 0.5
    err = np.clip(rng.beta(a, a * (1.0 / mean_err - 1.0), N_ITEMS), 1e-6, 0.49)
    pred = (rng.random(N_ITEMS) < 0.3).astype(int)
    p1 = np.where(pred == 1, 1.0 - err, err)
    n_wrong = round((1.0 - accuracy) * N_ITEMS)
    wrong = np.zeros(N_ITEMS, dtype=bool)
    if n_wrong:
        wrong[rng.choice(N_ITEMS, n_wrong, replace=False, p=err / err.sum())] = True
    y = np.where(wrong, 1 - pred, pred)
    pool = bae.Pool(predictions=pred, probs=p1)
    return pool, y, (~wrong).astype(float)


def simulate(q, p, correct, n, reps, rng):
    """Vectorised draws: estimate, SE, Satterthwaite df and Kish size per repetition."""
    cq = np.cumsum(q)
    cq /= cq[-1]
    idx = np.minimum(np.searchsorted(cq, rng.random((reps, n)), side="right"), q.size - 1)
    v = p[idx] / q[idx]
    ell = correct[idx]
    W = v.sum(axis=1)
    R = (v * ell).sum(axis=1) / W
    r = ell - R[:, None]
    a = v * v * r * r
    var = a.sum(axis=1) / W**2
    den = (a * a).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0, a.sum(axis=1) ** 2 / den, np.inf)
    kish = W**2 / (v * v).sum(axis=1)
    wdf = (v * v).sum(axis=1) ** 2 / (v**4).sum(axis=1)
    return idx, v, R, np.sqrt(var), df, kish, wdf


def check_against_package(pool, y, idx, v, R, se, df, default):
    """The vectorised closed forms equal weighted_estimate, and the default column equals
    ``Estimate.confidence_interval()``, on a few repetitions."""
    m, views = pool.resolve("accuracy")
    for i in range(3):
        est = bae.weighted_estimate(m.loss(y[idx[i]], views(idx[i])), v[i], m)
        assert np.isclose(est.value, R[i]) and np.isclose(est.stderr, se[i], atol=1e-12)
        if se[i] > 1e-9:
            assert np.isclose(est.effective_df[0], df[i], rtol=1e-6)
        lo, hi = est.confidence_interval(LEVEL)
        assert np.isclose(lo, default[0][i], rtol=1e-9) and np.isclose(hi, default[1][i])


def intervals_for(R, se, df, kish, wdf, n):
    with np.errstate(divide="ignore"):
        excess = 1.0 / wdf - 1.0 / n
        hdf = np.where(excess > 1e-12, 1.0 / np.maximum(excess, 1e-300), np.inf)
    out = {}
    for col, method, opt in METHODS:
        n_df = None
        if opt.get("n_df") == "design":
            n_df = np.full(R.shape, n - 1.0)
        elif opt.get("n_df") == "satterthwaite":
            n_df = np.maximum(df - 1.0, 1.0)
        elif opt.get("n_df") == "weights":
            n_df = np.maximum(wdf - 1.0, 1.0)
        elif opt.get("n_df") == "heterogeneity":
            n_df = np.maximum(hdf - 1.0, 1.0)
        n_max = float(n) if opt.get("n_max") else None
        out[col] = iv.interval(
            R, se, (0.0, 1.0), LEVEL, method, df=df, kish=kish, n_df=n_df, n_max=n_max
        )
    return out


def credible(pool, idx, v, y, truth, reps, rng, ci, est):
    """The 95% equal-tailed interval of Session.posterior's model (the conjugate contingency
    table, design-weighted counts, ``prior_strength=0.5`` per cell) on the first ``reps``
    repetitions: coverage, mean width, the share of repetitions where it is disjoint from the
    confidence interval ``ci``, the share where the importance-weighted estimate ``est`` lies
    outside it, and the posterior's coverage among the repetitions not flagged by either."""
    from bayes_activeeval.oracles.contingency import contingency_posterior

    hit, width, apart, outside, mutual = [], [], [], [], []
    for i in range(reps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = contingency_posterior(
                pool,
                "accuracy",
                idx[i],
                y[idx[i]],
                v[i],
                draws=500,
                chains=1,
                rng=rng,
            )
        g = np.asarray(dt["posterior"]["measure"]).ravel()
        lo, hi = np.quantile(g, [0.025, 0.975])
        hit.append(lo <= truth <= hi)
        width.append(hi - lo)
        apart.append(hi < ci[0][i] or lo > ci[1][i])
        outside.append(not (lo <= est[i] <= hi))
        mean = float(g.mean())
        mutual.append(outside[-1] and not (ci[0][i] <= mean <= ci[1][i]))
    hit, apart, outside, mutual = (np.array(a) for a in (hit, apart, outside, mutual))
    return {
        "cov_posterior": float(hit.mean()),
        "width_posterior": float(np.mean(width)),
        "disjoint_posterior": float(apart.mean()),
        "cov_posterior_not_disjoint": float(hit[~apart].mean()) if (~apart).any() else np.nan,
        "outside_posterior": float(outside.mean()),
        "cov_posterior_not_outside": float(hit[~outside].mean()) if (~outside).any() else np.nan,
        "mutual_posterior": float(mutual.mean()),
        "cov_posterior_not_mutual": float(hit[~mutual].mean()) if (~mutual).any() else np.nan,
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--post-reps", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="boundary_coverage")
    ap.add_argument("--render", action="store_true", help="Only rewrite the .md from the .json.")
    ap.add_argument("--docs", action="store_true", help="Print the table of docs/estimation.md.")
    args = ap.parse_args(argv)
    if args.render or args.docs:
        rows = json.loads((OUT / f"{args.out}.json").read_text())
        if args.docs:
            print(docs_table(rows))
            return
        (OUT / f"{args.out}.md").write_text(render(rows))
        return
    sizes = (50, 200) if args.quick else SIZES
    reps = 500 if args.quick else args.reps
    post_reps = 20 if args.quick else args.post_reps
    rows = []
    OUT.mkdir(exist_ok=True)
    t0 = time.time()
    for b_i, belief in enumerate(BELIEFS):
        for t_i, truth in enumerate(TRUTHS):
            pool, y, correct = make_pool(truth, np.random.default_rng([b_i, t_i]), belief)
            assert np.isclose(correct.mean(), truth)
            p = pool.p
            designs = {"passive": p.copy(), "optimal": bae.optimal_proposal(pool, "accuracy").q}
            for d_i, (design, q) in enumerate(designs.items()):
                for n in sizes:
                    rng = np.random.default_rng([b_i, t_i, d_i, n])
                    idx, v, R, se, df, kish, wdf = simulate(q, p, correct, n, reps, rng)
                    row = {
                        "belief": belief,
                        "truth": truth,
                        "design": design,
                        "n": n,
                        "reps": reps,
                        "share_at_bound": float(np.mean(R >= 1.0 - 1e-12)),
                    }
                    ints = intervals_for(R, se, df, kish, wdf, n)
                    check_against_package(pool, y, idx, v, R, se, df, ints[DEFAULT_COL])
                    for col, (lo, hi) in ints.items():
                        row[f"cov_{col}"] = float(np.mean((lo <= truth) & (truth <= hi)))
                        row[f"width_{col}"] = float(np.mean(hi - lo))
                        row[f"zero_{col}"] = float(np.mean(hi - lo <= 0))
                    if post_reps and (args.quick or n in POSTERIOR_SIZES):
                        ci = ints[DEFAULT_COL]
                        row.update(credible(pool, idx, v, y, truth, post_reps, rng, ci, R))
                        row["post_reps"] = post_reps
                    rows.append(row)
                    print(
                        f"[{time.time() - t0:6.0f}s] {belief} truth={truth} {design:8s} n={n:5d} "
                        + " ".join(f"{c}={row['cov_' + c]:.3f}" for c, _, _ in METHODS)
                        + (f" posterior={row['cov_posterior']:.3f}" if "post_reps" in row else ""),
                        flush=True,
                    )
                    (OUT / f"{args.out}.partial.json").write_text(json.dumps(rows, indent=1))
    OUT.mkdir(exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps(rows, indent=1))
    (OUT / f"{args.out}.md").write_text(render(rows))
    (OUT / f"{args.out}.partial.json").unlink(missing_ok=True)
    print(render(rows))


def summary(rows) -> list[dict]:
    """Per method: worst coverage over the cells with n >= 50 (and over all), share of zero-width
    intervals, and the largest width ratio to Wald among the cells where Wald covers (>= 0.93)."""
    out = []
    for col, _, _ in METHODS:
        big = [r for r in rows if r["n"] >= 50]
        wald_ok = [r for r in rows if r["cov_wald"] >= 0.93 and r["width_wald"] > 0]
        out.append(
            {
                "method": col,
                "min_cov_n50": min(r["cov_" + col] for r in big),
                "min_cov_all": min(r["cov_" + col] for r in rows),
                "cells_below_093_n50": sum(r["cov_" + col] < 0.93 for r in big),
                "zero_width": max(r["zero_" + col] for r in rows if r["truth"] < 1.0),
                "zero_width_at_1": max(r["zero_" + col] for r in rows),
                "max_width_ratio_where_wald_covers": max(
                    r["width_" + col] / r["width_wald"] for r in wald_ok
                ),
            }
        )
    return out


def docs_table(rows) -> str:
    """The compact table of ``docs/estimation.md``: calibrated model probabilities, coverage of
    Wald, t, the default (with its mean width), Clopper-Pearson and the posterior."""
    d = DEFAULT_COL
    lines = [
        "| true accuracy | design | n | no error | Wald | t | default (mean width) | "
        "Clopper-Pearson | posterior |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["belief"] != "calibrated" or r["n"] not in (20, 50, 200, 1000, 2000):
            continue
        post = f"{r['cov_posterior']:.2f}" if "cov_posterior" in r else ""
        lines.append(
            f"| {r['truth']} | {r['design']} | {r['n']} | {r['share_at_bound']:.2f} | "
            f"{r['cov_wald']:.3f} | {r['cov_t']:.3f} | **{r['cov_' + d]:.3f}** "
            f"({r['width_' + d]:.3g}) | {r['cov_clopper_pearson']:.3f} | {post} |"
        )
    return "\n".join(lines)


def render(rows) -> str:
    reps = rows[0]["reps"]
    cols = [c for c, _, _ in METHODS]
    lines = [
        f"# 95% intervals near the boundary: accuracy, {N_ITEMS:,}-item pools, {reps} repetitions",
        "",
        "Generated by `benchmarks/boundary_coverage.py`. Monte Carlo SE of a coverage near 0.95: "
        f"{np.sqrt(0.95 * 0.05 / reps):.4f}. `belief`: whether the model's probabilities (which "
        "drive the optimal proposal and the posterior's prior) are calibrated or underconfident "
        "(mean error probability 0.1 whatever the truth). `at 1`: share of samples without a "
        "single error.",
        "",
        "Methods (`bayes_activeeval.intervals.interval`): `wald`; `t` (Satterthwaite df of the "
        "variance); `logit`; `wilson`: Wilson with the effective size n* = x̂(1−x̂)/SE² (Kish size "
        "of the draws at a bound); `_df`: Korn & Graubard's n*(z/t)² with the design df n − 1; "
        "`_satt`: the same with the Satterthwaite df of the variance; `modified_wilson`: one-sided "
        "Poisson bounds next to the boundary (Brown, Cai & DasGupta 2001); `_cap`: n* capped at "
        "n; `_wdf`: n*(z/t)² with the df of the carrying draws' squared weights; `_hdf`: the "
        "same with the df of their excess over equal weights (1/ν = Σv⁴/(Σv²)² − 1/n; ∞ for "
        "passive sampling) — the package default, `Estimate.confidence_interval()`; "
        "`jeffreys`, `clopper_pearson` on n*.",
        "",
        "## Summary per method",
        "",
        "| method | min coverage, n >= 50 | cells < 0.93, n >= 50 | min coverage, all n | "
        "zero-width share (truth < 1) | max width / Wald where Wald covers |",
        "|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        lines.append(
            f"| {s['method'] + (' (default)' if s['method'] == DEFAULT_COL else '')} | "
            f"{s['min_cov_n50']:.3f} | {s['cells_below_093_n50']} | "
            f"{s['min_cov_all']:.3f} | {s['zero_width']:.3f} | "
            f"{s['max_width_ratio_where_wald_covers']:.2f} |"
        )
    lines += [
        "",
        "## Coverage (mean width) per cell",
        "",
        "| belief | truth | design | n | at 1 | " + " | ".join(cols) + " |",
        "|" + "---|" * (len(cols) + 5),
    ]
    for r in rows:
        cells = [f"{r['cov_' + c]:.3f} ({r['width_' + c]:.3g})" for c in cols]
        lines.append(
            f"| {r['belief']} | {r['truth']} | {r['design']} | {r['n']} | "
            f"{r['share_at_bound']:.2f} | " + " | ".join(cells) + " |"
        )
    post = [r for r in rows if "post_reps" in r]
    if post:
        d = DEFAULT_COL
        lines += [
            "",
            f"## Credible intervals ({post[0]['post_reps']} repetitions per cell)",
            "",
            "The 95% equal-tailed interval of `Session.posterior()` (what `bae status` prints: the "
            "conjugate contingency-table model, design-weighted counts, `prior_strength=0.5` per "
            f"cell) beside the default confidence interval ({d}); `disjoint`: share of samples "
            "where the two intervals do not overlap, `estimate outside`: share where the "
            "importance-weighted estimate lies outside the credible interval, `flagged`: share "
            "where moreover the posterior mean lies outside the confidence interval (what `bae "
            "status` flags, with its 89% posterior interval), `cov. if …`: the posterior's coverage in the samples not flagged. A "
            "posterior with a density never "
            "puts an equal-tailed interval on the bound itself: at truth 1.0 its coverage is 0 "
            "by construction.",
            "",
            f"| belief | truth | design | n | {d} | posterior | disjoint | cov. if not disjoint "
            "| estimate outside | cov. if inside | flagged | cov. if not flagged |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in post:
            lines.append(
                f"| {r['belief']} | {r['truth']} | {r['design']} | {r['n']} | "
                f"{r['cov_' + d]:.3f} ({r['width_' + d]:.3g}) | "
                f"{r['cov_posterior']:.2f} ({r['width_posterior']:.3g}) | "
                f"{r['disjoint_posterior']:.2f} | {r['cov_posterior_not_disjoint']:.2f} | "
                f"{r.get('outside_posterior', np.nan):.2f} | "
                f"{r.get('cov_posterior_not_outside', np.nan):.2f} | "
                f"{r.get('mutual_posterior', np.nan):.2f} | "
                f"{r.get('cov_posterior_not_mutual', np.nan):.2f} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
