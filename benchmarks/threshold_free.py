"""Threshold-free measures (issue 17): ROC AUC and average precision from few labels.

For each synthetic pool (prevalence 1:100, 1:1,000, 1:10,000; the package's default model and a
strong one) and label budget (500-5,000 draws), three static designs draw ``--reps`` independent
samples:

- ``passive``: uniform draws;
- ``f1-optimal``: the optimal proposal for F1 (what a user of the package would have used);
- ``optimal``: the influence-function proposal for the measure itself (for AUC with its default
  positive-seeking component, ``positive_mix=0.2``)
  (:func:`bayes_activeeval.threshold_free.rank_proposal`, the model's own probabilities as belief).

Each sample gives the weighted estimate (= scikit-learn with ``sample_weight``) and its 95%
interval: the default (``guarded`` variance — the larger of the empirical influence-function
variance and its expectation under the model's belief — on the logit scale) and, beside it, the
empirical variance alone with the ``logit_t``, ``logit`` and ``t`` intervals. Recorded: bias, SD, MSE,
coverage, the fraction of samples that cannot define the measure (no positive drawn), and the
asymptotic label ratio ``Σ p u / (Σ p √u)²`` of passive to optimal under the model's belief and
under the true ``η``. A second section checks the paired comparison of two AUCs on one sample
(type-I error under an exact null, two designs).

A third section (``--real DIR``) runs the same static designs on the real pools of the real-pool
benchmark (``benchmarks/real_pools_data.py`` caches them as ``.npz`` with ``labels``, ``preds``,
``scores``, ``probs``; FEBRL record linkage at 1:11 to 1:6,000 and a balanced diamonds pool).

Usage: python benchmarks/threshold_free.py [--reps 1000] [--budgets 500,1000,2000,5000] [--quick]
       python benchmarks/threshold_free.py --real benchmarks/pools [--reps 500]
Writes benchmarks/results/threshold_free.json and .md (``--real``: threshold_free_real.*).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import special

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.datasets import make_classification_pool

OUT = Path(__file__).parent / "results"
POOLS = {  # prevalence -> pool size (about 100 or more positives)
    0.01: 100_000,
    0.001: 300_000,
    0.0001: 1_000_000,
}
MODELS = {"default": {}, "strong": {"separation": 6.0, "noise": 0.2}}
BUDGETS = (500, 1000, 2000, 5000)
MEASURES = ("roc_auc", "average_precision")
METHODS = ("logit_t", "logit", "t")  # with the empirical variance


def asymptotic_ratio(pool, measure, probs):
    u, _ = tf.expected_sq_influence(pool, measure, probs)
    p = pool.p
    return float((p @ u) / (p @ np.sqrt(u)) ** 2)


def synthetic_pools(prevalences, models):
    for prev in prevalences:
        for mname in models:
            synth = make_classification_pool(POOLS[prev], prev, rng=17, **MODELS[mname])
            yield prev, mname, synth.pool, synth.labels, synth.truth


def real_pools(directory):
    for path in sorted(Path(directory).glob("*.npz")):
        d = np.load(path)
        y = d["labels"].astype(int)
        pool = bae.Pool(
            predictions=d["preds"].astype(int), probs=d["probs"], scores=d["scores"], classes=[0, 1]
        )
        yield float(y.mean()), path.stem, pool, y, None


def run_static(reps, budgets, pools, rng):
    rows = []
    for prev, mname, pool, y, eta in pools:
        s = pool.scores["model"]
        pi = pool.view().positive_prob()
        designs = {"passive": bae.passive_proposal(pool)}
        try:
            designs["f1-optimal"] = bae.optimal_proposal(pool, "f1")
        except ValueError as err:  # no item predicted positive
            print("f1-optimal skipped:", err)
        for measure in MEASURES:
            truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
            designs["optimal"] = tf.rank_proposal(pool, measure)
            ratio_model = asymptotic_ratio(pool, measure, pi)
            ratio_true = asymptotic_ratio(pool, measure, eta) if eta is not None else np.nan
            for design, prop in designs.items():
                for n in budgets:
                    vals = np.full(reps, np.nan)
                    cover = {
                        k: np.zeros(reps, dtype=bool)
                        for k in (*METHODS, "guarded", "guarded_wald", "guarded_wilson")
                    }
                    width = np.full(reps, np.nan)
                    width_w = np.full(reps, np.nan)
                    npos = np.zeros(reps)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
                        for r in range(reps):
                            d = prop.draw(n, rng=rng)
                            yy = y[d.indices]
                            npos[r] = yy.sum()
                            est = tf.rank_estimate_arrays(
                                measure, s[d.indices], yy, d.weights, variance="empirical"
                            )
                            vals[r] = est.value
                            if not np.isfinite(est.value):
                                continue
                            if np.isfinite(est.stderr):  # no empirical SE with one positive
                                for k in METHODS:
                                    lo, hi = est.confidence_interval(0.95, k)
                                    cover[k][r] = lo <= truth <= hi
                            grd = tf.rank_estimate_arrays(
                                measure, s[d.indices], yy, d.weights, belief=pi[d.indices]
                            )
                            lo, hi = grd.confidence_interval(0.95, "logit_t")
                            cover["guarded"][r] = lo <= truth <= hi
                            width[r] = hi - lo
                            lo, hi = grd.confidence_interval(0.95, "wald")
                            cover["guarded_wald"][r] = lo <= truth <= hi
                            lo, hi = grd.confidence_interval(0.95, "wilson")
                            cover["guarded_wilson"][r] = lo <= truth <= hi
                            width_w[r] = hi - lo
                    ok = np.isfinite(vals)
                    err = vals[ok] - truth
                    row = {
                        "prevalence": prev,
                        "model": mname,
                        "pool_size": pool.n_items,
                        "pool_positives": int(y.sum()),
                        "measure": measure,
                        "truth": truth,
                        "design": design,
                        "n": n,
                        "reps": reps,
                        "undefined": float(1 - ok.mean()),
                        "mean_positives": float(npos.mean()),
                        "bias": float(err.mean()) if ok.any() else np.nan,
                        "sd": float(err.std(ddof=1)) if ok.sum() > 1 else np.nan,
                        "mse": float(np.mean(err**2)) if ok.any() else np.nan,
                        "mse_se": float(np.std(err**2, ddof=1) / np.sqrt(ok.sum()))
                        if ok.sum() > 1
                        else np.nan,
                        "asymptotic_ratio_model_belief": ratio_model,
                        "asymptotic_ratio_true_eta": ratio_true,
                        "seconds": time.perf_counter() - t0,
                    }
                    row["width_guarded"] = float(np.nanmean(width[ok])) if ok.any() else np.nan
                    row["width_guarded_wilson"] = (
                        float(np.nanmean(width_w[ok])) if ok.any() else np.nan
                    )
                    for k in (*METHODS, "guarded", "guarded_wald", "guarded_wilson"):
                        row[f"coverage_{k}"] = float(cover[k][ok].mean()) if ok.any() else np.nan
                    rows.append(row)
                    print(
                        f"1:{round(1 / prev)} {mname[:12]:12s} {measure:17s} {design:10s} n={n:5d} "
                        f"undef={row['undefined']:.3f} bias={row['bias']:+.4f} "
                        f"mse={row['mse']:.3g} cov={row['coverage_guarded']:.3f}/"
                        f"{row['coverage_guarded_wilson']:.3f}/{row['coverage_logit_t']:.3f} "
                        f"ratio={ratio_model:.2f}/{ratio_true:.2f}",
                        flush=True,
                    )
    return rows


def swapped_pool(n, prevalence, seed):
    """Two models with exactly equal AUC on the pool (scores of label-identical neighbours
    swapped), as in tests/test_threshold_free.py."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(n)
    a0 = np.log(prevalence / (1 - prevalence)) - 2.0
    y = (rng.random(n) < special.expit(a0 + 2.5 * u)).astype(int)
    sa = a0 + 2.5 * (u + 0.5 * rng.standard_normal(n))
    order = np.lexsort((u, y))
    partner = order.copy()
    partner[order] = order
    pairs = order[: n - n % 2].reshape(-1, 2)
    same = y[pairs[:, 0]] == y[pairs[:, 1]]
    partner[pairs[same, 0]], partner[pairs[same, 1]] = pairs[same, 1], pairs[same, 0]
    sb = sa[partner]
    pa, pb = special.expit(sa), special.expit(sb)
    pool = bae.Pool(
        predictions={"a": (pa > 0.5).astype(int), "b": (pb > 0.5).astype(int)},
        probs={"a": pa, "b": pb},
        scores={"a": sa, "b": sb},
        classes=[0, 1],
    )
    return pool, y


def run_paired(reps, rng):
    rows = []
    for prev, size, n in ((0.01, 100_000, 1000), (0.001, 300_000, 2000)):
        pool, y = swapped_pool(size, prev, seed=5)
        S = np.stack([pool.scores["a"], pool.scores["b"]], 1)
        pi = 0.5 * (pool.view("a").positive_prob() + pool.view("b").positive_prob())
        m = tf.RankMeasure("roc_auc").bind(("a", "b"), difference=True)
        for design, prop in (
            ("passive", bae.passive_proposal(pool)),
            ("optimal", tf.rank_proposal(pool, m)),
        ):
            rej, rej_emp, undef = 0, 0, 0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
                for _ in range(reps):
                    d = prop.draw(n, rng=rng)
                    i = d.indices
                    est = tf.rank_estimate_arrays(m, S[i], y[i], d.weights, belief=pi[i])
                    emp = tf.rank_estimate_arrays(m, S[i], y[i], d.weights, variance="empirical")
                    if not np.isfinite(est.stderr):
                        undef += 1
                        continue
                    lo, hi = est.confidence_interval(0.95)
                    rej += not (lo <= 0.0 <= hi)
                    lo, hi = emp.confidence_interval(0.95)
                    rej_emp += not (lo <= 0.0 <= hi)
            ok = reps - undef
            row = {
                "prevalence": prev,
                "n": n,
                "design": design,
                "reps": reps,
                "undefined": undef / reps,
                "type_one_error": rej / ok if ok else np.nan,
                "type_one_error_empirical": rej_emp / ok if ok else np.nan,
            }
            rows.append(row)
            print("paired", row, flush=True)
    return rows


def write_md(res, path, real=False):
    pools = (
        "Real pools of the real-pool benchmark (`benchmarks/real_pools_data.py`; the model column "
        "names the pool; the skew column is the pool's prevalence). "
        if real
        else "Synthetic pools from `make_classification_pool` (seed 17): `default` = the "
        "generator's defaults (separation 2.5, noise 0.4), `strong` = separation 6, noise 0.2. "
    )
    lines = [
        "# Threshold-free measures: ROC AUC and average precision (issue 17)",
        "",
        f"`python benchmarks/threshold_free.py --reps {res['reps']}"
        f"{' --budgets ' + res['budgets'] if res.get('budgets') else ''}"
        f"{' --real benchmarks/pools' if real else ''}` "
        f"({res['seconds'] / 60:.1f} min). " + pools + "Coverage of the "
        "default `logit_t` 95% interval over the samples that define the measure; `undef` = "
        "fraction of samples without a positive (or without a negative); a sample with a single "
        "positive has no empirical variance and counts as not covered in the `emp` columns. "
        "`cov guarded` is the "
        "guarded variance (the default) with the logit interval, `cov guarded Wald` with the Wald "
        "interval, `cov guarded Wilson` with the Wilson interval (the default interval); "
        "the `emp` columns use the empirical variance alone. `ratio` = asymptotic "
        "labels passive needs per label of the optimal proposal, `Σ p u / (Σ p √u)²`, under the "
        "model's belief / under the true η. `MSE gain` = MSE of passive (or F1-optimal) over MSE "
        "of the optimal proposal at the same budget (for ratios, MSE ∝ 1/n: the labels saved).",
        "",
    ]
    rows = res["static"]
    key = {(r["prevalence"], r["model"], r["measure"], r["design"], r["n"]): r for r in rows}
    for measure in MEASURES:
        lines += [
            f"## {measure}",
            "",
            "| skew | model | n | truth | design | undef | bias | SD | MSE | cov guarded | "
            "cov guarded Wald | width | cov guarded Wilson | width Wilson | "
            "cov emp logit_t | cov emp logit | cov emp t | MSE gain vs passive | "
            "MSE gain vs F1-opt | ratio |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            if r["measure"] != measure:
                continue
            k = (r["prevalence"], r["model"], measure)
            pas = key.get((*k, "passive", r["n"]))
            f1 = key.get((*k, "f1-optimal", r["n"]))
            gain_p = gain_f = ""
            if r["design"] == "optimal":
                if pas and np.isfinite(pas["mse"]) and pas["undefined"] < 0.01:
                    gain_p = f"{pas['mse'] / r['mse']:.1f}"
                elif pas:
                    gain_p = f"(passive undefined in {pas['undefined']:.0%})"
                if f1 and np.isfinite(f1["mse"]):
                    gain_f = f"{f1['mse'] / r['mse']:.1f}"
            lines.append(
                f"| 1:{round(1 / r['prevalence']):,} | {r['model']} | {r['n']} | "
                f"{r['truth']:.4f} | {r['design']} | {r['undefined']:.3f} | {r['bias']:+.2e} | "
                f"{r['sd']:.2e} | {r['mse']:.2e} | {r['coverage_guarded']:.3f} | "
                f"{r['coverage_guarded_wald']:.3f} | {r['width_guarded']:.3g} | "
                f"{r['coverage_guarded_wilson']:.3f} | {r['width_guarded_wilson']:.3g} | "
                f"{r['coverage_logit_t']:.3f} | "
                f"{r['coverage_logit']:.3f} | {r['coverage_t']:.3f} | {gain_p} | {gain_f} | "
                f"{r['asymptotic_ratio_model_belief']:.2f} / "
                f"{r['asymptotic_ratio_true_eta']:.2f} |"
            )
        lines.append("")
    if real:
        path.write_text("\n".join(lines) + "\n")
        return
    lines += [
        "## Paired comparison of two AUCs on one sample (exact null, 95% level)",
        "",
        "| skew | n | design | undef | type-I error (guarded) | type-I error (empirical) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in res["paired"]:
        lines.append(
            f"| 1:{round(1 / r['prevalence']):,} | {r['n']} | {r['design']} | "
            f"{r['undefined']:.3f} | {r['type_one_error']:.3f} | "
            f"{r['type_one_error_empirical']:.3f} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--real", help="directory of real pools (.npz) to run instead")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="label budgets")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    if args.real:
        static = run_static(args.reps, (500, 2000), real_pools(args.real), rng)
        res = {"reps": args.reps, "seed": args.seed, "seconds": time.perf_counter() - t0}
        res.update(static=static, paired=[])
        OUT.mkdir(exist_ok=True)
        (OUT / "threshold_free_real.json").write_text(json.dumps(res, indent=1))
        write_md(res, OUT / "threshold_free_real.md", real=True)
        return
    if args.quick:
        static = run_static(20, (500,), synthetic_pools((0.01,), ("default",)), rng)
        paired = run_paired(20, rng)
    else:
        budgets = tuple(int(b) for b in args.budgets.split(","))
        static = run_static(args.reps, budgets, synthetic_pools(tuple(POOLS), tuple(MODELS)), rng)
        paired = run_paired(args.reps, rng)
    res = {
        "budgets": args.budgets,
        "reps": 20 if args.quick else args.reps,
        "seed": args.seed,
        "seconds": time.perf_counter() - t0,
        "static": static,
        "paired": paired,
    }
    if args.quick:
        return
    OUT.mkdir(exist_ok=True)
    (OUT / "threshold_free.json").write_text(json.dumps(res, indent=1))
    write_md(res, OUT / "threshold_free.md")


if __name__ == "__main__":
    main()
