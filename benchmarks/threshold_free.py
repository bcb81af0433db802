"""Threshold-free measures (issue 17): ROC AUC and average precision from few labels.

For each synthetic pool (prevalence 1:100, 1:1,000, 1:10,000; the package's default model and a
strong one) and label budget (500-5,000 draws), the static designs draw ``--reps`` independent
samples:

- ``passive``: uniform draws;
- ``f1-optimal``: the optimal proposal for F1 (what a user of the package would have used);
- ``optimal``: the influence-function proposal for the measure itself
  (:func:`bayes_activeeval.threshold_free.rank_proposal`: the model's own probabilities as belief,
  the scaled ``"auto"`` belief floor, for AUC the positive-seeking component ``positive_mix=0.2``);
- ``optimal-ma`` (ROC AUC only): the model-assisted estimate (the belief's expected influence as
  control variate, ``rank_estimate(..., estimator="model_assisted")``) with its proposal
  ``q ∝ p sqrt(Var_π ψ)`` (``rank_proposal(..., estimator="model_assisted")``).

Each sample gives the weighted estimate (= scikit-learn with ``sample_weight``) and its 95%
interval from the package's one interval function (``RankEstimate.confidence_interval``: the
intervals module's Wilson interval on the effective sample size) with the default ``guarded`` variance (the larger of the
empirical influence-function variance and its expectation under the model's belief) and, beside
it, the same interval with the empirical variance alone, the belief's alone, their mean and three
exploratory candidates (:func:`_candidates`; none is the package's default, see
``docs/threshold-free.md``).
Recorded: bias, SD, MSE, coverage, the fraction of samples that cannot define the measure (no
positive drawn), and ``needle``: the share of the design variance ``Σ p²/q ψ(x, y_x)²`` (realized
labels) carried by the single largest item — near 1, the sampling distribution is a two-point
mixture (that item drawn or not) and no variance-based interval can have its nominal coverage.

The ``bounds`` table gives the asymptotic labels passive sampling needs per label of a design,
``V_passive / V_design`` with ``V = Σ p²/q E_η(ψ − h)²`` under the true ``η``, for the package's
proposals and for the best possible ones: ``q ∝ p sqrt(E_η ψ²)`` (plain estimate, ``h = 0``) and
``q ∝ p sqrt(Var_η ψ)`` with ``h = E_η ψ`` (the best control variate of any design-consistent
linear estimate). A second section checks the paired comparison of two AUCs on one sample
(type-I error under an exact null, two designs).

A third section (``--real DIR``) runs the same static designs on the real pools of the real-pool
benchmark (``benchmarks/real_pools_data.py`` caches them as ``.npz`` with ``labels``, ``preds``,
``scores``, ``probs``; FEBRL record linkage at 1:11 to 1:6,000 and a balanced diamonds pool).

Usage: python benchmarks/threshold_free.py [--reps 1000] [--budgets 500,2000,5000] [--quick]
       python benchmarks/threshold_free.py --reps 1000 --part 0.01   (and 0.001, 0.0001, paired:
           each part checkpointed as threshold_free.part-PART.json in --out), then --merge
       python benchmarks/threshold_free.py --real benchmarks/pools [--reps 1000]
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
from bayes_activeeval import intervals
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.datasets import make_classification_pool

OUT = Path(__file__).parent / "results"
POOLS = {  # prevalence -> pool size (about 100 or more positives)
    0.01: 100_000,
    0.001: 300_000,
    0.0001: 1_000_000,
}
MODELS = {"default": {}, "strong": {"separation": 6.0, "noise": 0.2}}
BUDGETS = (500, 2000, 5000)
MEASURES = ("roc_auc", "average_precision")
VARIANCES = ("guarded", "empirical", "belief", "mean", "calibrated", "max-calibrated", "df100")


def error_stats(vals, truth) -> dict:
    """Over the repetitions: the share whose estimate is undefined, and the defined estimates'
    bias, standard deviation, MSE and its Monte Carlo standard error."""
    vals = np.asarray(vals, dtype=float)
    ok = np.isfinite(vals)
    err = vals[ok] - truth
    m = err.size
    return {
        "undefined": float(1 - ok.mean()),
        "bias": float(err.mean()) if m else np.nan,
        "sd": float(err.std(ddof=1)) if m > 1 else np.nan,
        "mse": float(np.mean(err**2)) if m else np.nan,
        "mse_se": float(np.std(err**2, ddof=1) / np.sqrt(m)) if m > 1 else np.nan,
    }


def interval_stats(cover, width, ok) -> dict:
    """Coverage and mean width of each interval (``cover[k]``, ``width[k]`` per repetition) over
    the repetitions ``ok`` whose estimate is defined."""
    out = {}
    for k in cover:
        out[f"coverage_{k}"] = float(cover[k][ok].mean()) if ok.any() else np.nan
        out[f"width_{k}"] = float(np.nanmean(width[k][ok])) if ok.any() else np.nan
    return out


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


def label_ratios(pool, measure, eta, proposals):
    """Asymptotic labels passive needs per label of each design under the true η, and the best
    possible designs (see the module docstring)."""
    p, s = pool.p, pool.scores["model"]
    _, e1, e0 = tf.influence(measure, s, p * eta, p * (1 - eta))
    second = eta * e1**2 + (1 - eta) * e0**2
    var = eta * (1 - eta) * (e1 - e0) ** 2
    v_pass = float(p @ second)
    out = {
        "best_plain": v_pass / float(p @ np.sqrt(second)) ** 2,
        "best_control_variate": v_pass / float(p @ np.sqrt(var)) ** 2,
    }
    pi = pool.view().positive_prob()
    _, m_pi, _ = tf.expected_influence(pool, measure, pi)
    m_pi = m_pi[:, 0] - float(p @ m_pi[:, 0])
    resid = eta * (e1 - m_pi) ** 2 + (1 - eta) * (e0 - m_pi) ** 2
    for name, q in proposals.items():
        r2 = resid if name == "optimal-ma" else second
        out[name] = v_pass / float(np.sum(p * p / q * r2))
    return out


def needle_share(pool, measure, y, q):
    """Share of the design variance ``Σ p²/q ψ(x, y_x)²`` (realized labels) of the largest item."""
    p, s = pool.p, pool.scores["model"]
    _, r1, r0 = tf.influence(measure, s, p * y, p * (1 - y))
    a = p * p / q * np.where(y == 1, r1, r0) ** 2
    return float(a.max() / a.sum()) if a.sum() > 0 else np.nan


def _calib(pi, y, v, prior=1.0):
    """Posterior-mode Platt recalibration ``logit π' = a + b logit π`` of the belief on the
    draws (exploratory variance candidate): the importance-weighted Bernoulli log-likelihood
    scaled to the Kish size, a ``N((0, 1), I/prior)`` prior on ``(a, b)`` (identity = the
    model calibrated). Returns ``(a, b)``."""
    t = special.logit(np.clip(pi, 1e-15, 1 - 1e-15))
    w = v * (v.sum() / (v @ v))
    X = np.stack([np.ones_like(t), t], 1)
    beta = np.array([0.0, 1.0])
    for _ in range(50):
        p = special.expit(X @ beta)
        g = X.T @ (w * (y - p)) - prior * (beta - [0, 1])
        H = (X * (w * p * (1 - p))[:, None]).T @ X + prior * np.eye(2)
        step = np.linalg.solve(H, g)
        beta = beta + step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def _designs(pool, measure):
    designs = {"passive": bae.passive_proposal(pool)}
    try:
        designs["f1-optimal"] = bae.optimal_proposal(pool, "f1")
    except ValueError as err:  # no item predicted positive
        print("f1-optimal skipped:", err)
    designs["optimal"] = tf.rank_proposal(pool, measure)
    if measure == "roc_auc":
        designs["optimal-ma"] = tf.rank_proposal(pool, measure, estimator="model_assisted")
    return designs


def _interval(est, var, empirical=False, level=0.95):
    """The rank estimates' default interval (``RankEstimate.confidence_interval``: Wilson on
    ``n*``) for another variance of the same estimate (with the design's weight df where the
    variance is the empirical one, as ``rank_estimate_arrays(variance="empirical")`` sets it)."""
    wdf = est.details["design_weight_df"] if empirical else np.inf
    lo, hi = intervals.interval(
        est.value,
        np.sqrt(var),
        est.bounds,
        level,
        "wilson",
        kish=est.kish[0],
        n_df=max(wdf - 1.0, 1.0),
    )
    return float(lo), float(hi)


def _candidates(measure, s, y, d, pi, grd, v_e, v_b, kw):
    """Intervals with the exploratory variance candidates (``docs/threshold-free.md``, "Why the
    guard over-covers"): ``calibrated`` = the belief variance with the belief recalibrated on
    the draws (:func:`_calib`); ``max-calibrated`` = the guard with that belief;
    ``df100`` = the empirical variance alone where each class's Satterthwaite df
    ``(Σ_c a)²/Σ_c a²``, ``a = v² ψ̂²``, is at least 100, else the guard."""
    a, b = _calib(pi, y, d.weights)
    pc = special.expit(a + b * special.logit(np.clip(pi, 1e-15, 1 - 1e-15)))
    ec = tf.rank_estimate_arrays(measure, s, y, d.weights, belief=pc, variance="belief", **kw)
    v_c = float(ec.details["cov_belief"][0, 0])
    fin = np.isfinite(v_e)
    terms = d.weights**2 * grd.details["influence"][:, 0] ** 2
    dfs = []
    for c in (0, 1):
        t = terms[y == c]
        dfs.append(t.sum() ** 2 / (t @ t) if (t @ t) > 0 else 0.0)
    guard = max(v_b, v_e) if fin else v_b
    return {
        "calibrated": _interval(grd, v_c),
        "max-calibrated": _interval(grd, max(v_c, v_e) if fin else v_c),
        "df100": _interval(grd, v_e if fin and min(dfs) >= 100 else guard),
    }


def run_static(reps, budgets, pools, rng):
    rows, bounds = [], []
    for prev, mname, pool, y, eta in pools:
        s = pool.scores["model"]
        pi = pool.view().positive_prob()
        for measure in MEASURES:
            truth = tf.influence(measure, s, pool.p * y, pool.p * (1 - y))[0]
            designs = _designs(pool, measure)
            control = tf.expected_influence(pool, measure, pi)[1][:, 0]
            ratios = {}
            if eta is not None:
                ratios = label_ratios(pool, measure, eta, {k: d.q for k, d in designs.items()})
                bounds.append({"prevalence": prev, "model": mname, "measure": measure, **ratios})
                print("label ratios", prev, mname, measure, ratios, flush=True)
            for design, prop in designs.items():
                needle = needle_share(pool, measure, y, prop.q)
                ma = design == "optimal-ma"
                for n in budgets:
                    vals = np.full(reps, np.nan)
                    cover = {k: np.zeros(reps, dtype=bool) for k in VARIANCES}
                    width = {k: np.full(reps, np.nan) for k in VARIANCES}
                    npos = np.zeros(reps)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
                        for r in range(reps):
                            d = prop.draw(n, rng=rng)
                            i = d.indices
                            yy = y[i]
                            npos[r] = yy.sum()
                            kw = {"control": control[i]} if ma else {}
                            grd = tf.rank_estimate_arrays(
                                measure, s[i], yy, d.weights, belief=pi[i], **kw
                            )
                            vals[r] = grd.value
                            if not np.isfinite(grd.value):
                                continue
                            v_e = float(grd.details["cov_empirical"][0, 0])
                            v_b = float(grd.details["cov_belief"][0, 0])
                            nan = (np.nan, np.nan)
                            cis = {
                                "guarded": tuple(grd.confidence_interval(0.95)),
                                "empirical": _interval(grd, v_e, True) if np.isfinite(v_e) else nan,
                                "belief": _interval(grd, v_b),
                                "mean": _interval(grd, 0.5 * (v_b + v_e))
                                if np.isfinite(v_e)
                                else nan,
                            }
                            cis.update(_candidates(measure, s[i], yy, d, pi[i], grd, v_e, v_b, kw))
                            for k, (lo, hi) in cis.items():
                                cover[k][r] = lo <= truth <= hi
                                width[k][r] = hi - lo
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
                        "mean_positives": float(npos.mean()),
                        **error_stats(vals, truth),
                        "needle": needle,
                        "label_ratio_true_eta": ratios.get(design, np.nan),
                        "seconds": time.perf_counter() - t0,
                        **interval_stats(cover, width, np.isfinite(vals)),
                    }
                    rows.append(row)
                    print(
                        f"1:{round(1 / prev)} {mname[:12]:12s} {measure:17s} {design:10s} n={n:5d} "
                        f"undef={row['undefined']:.3f} bias={row['bias']:+.4f} "
                        f"mse={row['mse']:.3g} cov={row['coverage_guarded']:.3f}/"
                        f"{row['coverage_empirical']:.3f}/{row['coverage_belief']:.3f}/"
                        f"{row['coverage_mean']:.3f} needle={needle:.2f} "
                        f"({row['seconds']:.0f}s)",
                        flush=True,
                    )
    return rows, bounds


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


def _cov_se(r, k="guarded"):
    """Monte Carlo standard error of a cell's coverage, ``sqrt(c(1 − c)/m)`` over the ``m``
    samples that define the measure."""
    c, m = r[f"coverage_{k}"], r["reps"] * (1.0 - r["undefined"])
    return float(np.sqrt(c * (1 - c) / m)) if m > 0 and np.isfinite(c) else np.nan


def _in_range(rows, k="guarded"):
    pairs = [(r[f"coverage_{k}"], _cov_se(r, k)) for r in rows]
    pairs = [(c, e) for c, e in pairs if np.isfinite(c)]
    v = np.asarray([c for c, _ in pairs])
    e = np.asarray([x for _, x in pairs])
    near = np.sum((v >= 0.93 - 2 * e) & (v <= 0.97 + 2 * e))
    return (
        f"{np.sum((v >= 0.93) & (v <= 0.97))} of {v.size} in [0.93, 0.97], "
        f"{np.sum(v < 0.93)} below, {np.sum(v > 0.97)} above"
        + (f" (range {v.min():.3f}-{v.max():.3f})" if v.size else "")
        + f"; {near} within 2 MC s.e. of it, {np.sum(v < 0.93 - 2 * e)} below by more"
    )


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
        f"{' --real benchmarks/pools' if real else ''}`"
        + (
            f" in parts (`--part` {', '.join(p[20:-5] for p in res['parts'])}, then `--merge`)"
            if res.get("parts")
            else ""
        )
        + " "
        f"({res['seconds'] / 60:.1f} min, seed {res['seed']}). " + pools + "Coverage of the "
        "95% interval (the package's one interval function, `RankEstimate.confidence_interval`: "
        "Wilson on the effective sample size) over the samples that define the "
        "measure, with the default `guarded` variance and, beside it, the `empirical` variance "
        "alone, the `belief`'s alone, their `mean`, and three exploratory candidates "
        "(`calibrated`: the belief variance with the belief recalibrated on the draws; "
        "`max-calibrated`: the guard with that belief; `df100`: the empirical variance alone "
        "where both classes' Satterthwaite df reach 100, else the guard; see "
        "`docs/threshold-free.md`); `± MC s.e.` = `sqrt(c(1 − c)/m)` of the default's "
        "coverage over `m` defined samples; `undef` = fraction of samples without a "
        "positive (or without a negative); `pos` = mean positives drawn; `needle` = share of the "
        "design variance `Σ p²/q ψ(x, y_x)²` (realized labels) carried by the single largest "
        "item. `MSE gain` = MSE of passive (or F1-optimal) over MSE of the design at the same "
        "budget (for ratios, MSE ∝ 1/n: the labels saved); `ratio η` = asymptotic labels passive "
        "needs per label of the design under the true η.",
        "",
        "## Coverage of the default interval, by design",
        "",
        "| design | cells | all cells | cells with needle < 0.1 |",
        "| --- | --- | --- | --- |",
    ]
    rows = res["static"]
    for design in ("optimal", "optimal-ma", "f1-optimal", "passive"):
        sel = [r for r in rows if r["design"] == design]
        if not sel:
            continue
        clt = [r for r in sel if r["needle"] < 0.1]
        lines.append(f"| {design} | {len(sel)} | {_in_range(sel)} | {_in_range(clt)} |")
    lines += ["", "The same cells of the `optimal` design with the other variances:", ""]
    opt = [r for r in rows if r["design"] == "optimal"]
    for k in VARIANCES:
        lines.append(f"- `{k}`: {_in_range(opt, k)}")
    lines.append("")
    if res.get("bounds"):
        lines += [
            "## Label ratios: asymptotic labels passive needs per label of a design (true η)",
            "",
            "| skew | model | measure | best plain `p sqrt(E_η ψ²)` | best control variate "
            "`p sqrt(Var_η ψ)` | optimal | optimal-ma | f1-optimal |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for b in res["bounds"]:
            lines.append(
                f"| 1:{round(1 / b['prevalence']):,} | {b['model']} | {b['measure']} | "
                f"{b['best_plain']:.2f} | {b['best_control_variate']:.2f} | "
                f"{b.get('optimal', np.nan):.2f} | {b.get('optimal-ma', np.nan):.2f} | "
                f"{b.get('f1-optimal', np.nan):.2f} |"
            )
        lines.append("")
    key = {(r["prevalence"], r["model"], r["measure"], r["design"], r["n"]): r for r in rows}
    for measure in MEASURES:
        lines += [
            f"## {measure}",
            "",
            "| skew | model | n | truth | design | undef | pos | bias | SD | MSE | needle | "
            "cov guarded | ± MC s.e. | width | cov emp | cov belief | cov mean | cov calibrated | "
            "cov max-calibrated | cov df100 | MSE gain vs passive | MSE gain vs F1-opt | ratio η |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            if r["measure"] != measure:
                continue
            k = (r["prevalence"], r["model"], measure)
            pas = key.get((*k, "passive", r["n"]))
            f1 = key.get((*k, "f1-optimal", r["n"]))
            gain_p = gain_f = ""
            if r["design"] in ("optimal", "optimal-ma"):
                if pas and np.isfinite(pas["mse"]) and pas["undefined"] < 0.01:
                    gain_p = f"{pas['mse'] / r['mse']:.1f}"
                elif pas:
                    gain_p = f"(passive undefined in {pas['undefined']:.0%})"
                if f1 and np.isfinite(f1["mse"]):
                    gain_f = f"{f1['mse'] / r['mse']:.1f}"
            lines.append(
                f"| 1:{round(1 / r['prevalence']):,} | {r['model']} | {r['n']} | "
                f"{r['truth']:.4f} | {r['design']} | {r['undefined']:.3f} | "
                f"{r['mean_positives']:.1f} | {r['bias']:+.2e} | "
                f"{r['sd']:.2e} | {r['mse']:.2e} | {r['needle']:.2f} | "
                f"{r['coverage_guarded']:.3f} | {_cov_se(r):.3f} | {r['width_guarded']:.3g} | "
                f"{r['coverage_empirical']:.3f} | {r['coverage_belief']:.3f} | "
                f"{r['coverage_mean']:.3f} | {r['coverage_calibrated']:.3f} | "
                f"{r['coverage_max-calibrated']:.3f} | {r['coverage_df100']:.3f} | "
                f"{gain_p} | {gain_f} | "
                f"{r['label_ratio_true_eta']:.2f} |"
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


def _merge(out):
    """Merge the parts (``--part``) into ``threshold_free.json`` and its Markdown."""
    parts = sorted(out.glob("threshold_free.part-*.json"))
    res = None
    for path in parts:
        part = json.loads(path.read_text())
        if res is None:
            res = {**part, "static": [], "bounds": [], "paired": [], "seconds": 0.0, "parts": []}
        for key in ("static", "bounds", "paired"):
            res[key] += part.get(key, [])
        res["seconds"] += part["seconds"]
        res["parts"].append(path.name)
    for key in ("static", "bounds", "paired"):  # the tables from the mildest skew on
        res[key].sort(key=lambda r: -r["prevalence"])
    (out / "threshold_free.json").write_text(json.dumps(res, indent=1))
    write_md(res, out / "threshold_free.md")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--real", help="directory of real pools (.npz) to run instead")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="label budgets")
    ap.add_argument("--out", default=str(OUT), help="directory of the results")
    ap.add_argument(
        "--part",
        help="run one part and checkpoint it as threshold_free.part-PART.json: a prevalence "
        "(0.01, 0.001, 0.0001) or 'paired'; --merge writes the tables from the parts",
    )
    ap.add_argument("--merge", action="store_true", help="merge the parts in --out")
    args = ap.parse_args()
    out = Path(args.out)
    if args.merge:
        _merge(out)
        return
    # each part its own stream, so parts run in any order (or again) reproduce
    tag = 0 if args.part in (None, "paired") else round(1 / float(args.part))
    rng = np.random.default_rng([args.seed, tag] if args.part else args.seed)
    t0 = time.perf_counter()
    if args.real:
        static, _ = run_static(args.reps, (500, 2000), real_pools(args.real), rng)
        res = {"reps": args.reps, "seed": args.seed, "seconds": time.perf_counter() - t0}
        res.update(static=static, paired=[])
        out.mkdir(exist_ok=True)
        (out / "threshold_free_real.json").write_text(json.dumps(res, indent=1))
        write_md(res, out / "threshold_free_real.md", real=True)
        return
    budgets = tuple(int(b) for b in args.budgets.split(","))
    static, bounds, paired = [], [], []
    if args.quick:
        static, bounds = run_static(20, (500,), synthetic_pools((0.01,), ("default",)), rng)
        paired = run_paired(20, rng)
    elif args.part == "paired":
        paired = run_paired(args.reps, rng)
    elif args.part:
        prevs = (float(args.part),)
        static, bounds = run_static(args.reps, budgets, synthetic_pools(prevs, tuple(MODELS)), rng)
    else:
        static, bounds = run_static(
            args.reps, budgets, synthetic_pools(tuple(POOLS), tuple(MODELS)), rng
        )
        paired = run_paired(args.reps, rng)
    res = {
        "budgets": args.budgets,
        "reps": 20 if args.quick else args.reps,
        "seed": args.seed,
        "seconds": time.perf_counter() - t0,
        "static": static,
        "bounds": bounds,
        "paired": paired,
    }
    if args.quick:
        return
    out.mkdir(exist_ok=True)
    if args.part:
        (out / f"threshold_free.part-{args.part}.json").write_text(json.dumps(res, indent=1))
        return
    (out / "threshold_free.json").write_text(json.dumps(res, indent=1))
    write_md(res, out / "threshold_free.md")


if __name__ == "__main__":
    main()
