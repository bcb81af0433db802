"""Benchmark label sets for predictors unknown at sampling time (issue 5; Valizadegan et al.).

Four studies, results in ``benchmarks/results/unknown_predictors*.json`` and ``.md``:

1. ``coverage``: 200 random and 200 informative rules on synthetic pools with 1%-4%
   prevalence; bias of the design-weighted estimates against Monte Carlo error and coverage of
   the 95% Wald, Wilson and Bayesian (conjugate) intervals.
2. ``mse``: 500 labels, 1% prevalence: MSE of sensitivity and precision averaged over rules,
   square-root design versus uniform random sampling (and the other allocations).
3. ``covtype``: the paper's experiment re-run on a covtype-like synthetic pool (prevalence 0.04,
   random rules of the paper's sizes, plus informative rules): random sampling with the plug-in
   estimator, the paper's active sampler with plug-in, blind-labeling and imputation estimators,
   and this package's designs with design-weighted estimates.
4. ``timing``: evaluating 10,000 rules on a 2,000-label benchmark.

Run: ``python benchmarks/unknown_predictors.py [--quick] [--only coverage,mse,covtype,timing]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from scipy import special

from bayes_activeeval import benchmark as bm
from bayes_activeeval.datasets import make_classification_pool

RESULTS = Path(__file__).parent / "results"
MEAS = list(bm.MEASURES)
IDX = {m: i for i, m in enumerate(MEAS)}


# ------------------------------------------------------------------------------------------------
# shared helpers
# ------------------------------------------------------------------------------------------------


def make_world(n, prevalence, n_random, n_informative, rng):
    """Pool, calibrated guess (the pool model's probability), random and informative rules.

    Random rules: each item positive with probability r ~ U[0.005, 0.1] independently of the
    label (the paper's testbed). Informative rules: a noisy copy of the true log-odds,
    ``logit(eta) + sigma * separation * e`` with ``sigma ~ U[0.4, 1.5]``, thresholded so the
    rule's positive rate is ``r ~ U[0.5, 4] * prevalence`` (features shared with the guess).
    """
    sp = make_classification_pool(n, prevalence, rng=rng)
    s = sp.pool.view().prob[:, 1]
    y = sp.labels.astype(np.int8)
    lo = special.logit(np.clip(sp.truth, 1e-12, 1 - 1e-12))
    r_rand = rng.uniform(0.005, 0.1, n_random)
    rand = (rng.random((n_random, n)) < r_rand[:, None]).astype(np.int8)
    sig = rng.uniform(0.4, 1.5, n_informative)
    rate = rng.uniform(0.5, 4.0, n_informative) * prevalence
    info = np.empty((n_informative, n), dtype=np.int8)
    for k in range(n_informative):
        score = lo + sig[k] * 2.5 * rng.standard_normal(n)
        thr = np.quantile(score, 1 - rate[k])
        info[k] = score > thr
    rules = np.vstack([rand, info])
    kinds = np.array(["random"] * n_random + ["informative"] * n_informative)
    return s, y, rules, kinds


def margins_of(rules, strata, H):
    return np.stack([np.bincount(strata, r, H) for r in rules])


def plug_in(P_L, y_L):
    """Unweighted cell counts on L -> measures (the paper's E2)."""
    yf = y_L.astype(float)
    Pf = P_L.astype(float)
    TP = Pf @ yf
    FP = Pf.sum(1) - TP
    FN = yf.sum() - TP
    TN = len(yf) - Pf.sum(1) - FN
    return TP, FP, FN, TN


def measures(TP, FP, FN, TN):
    vals, _ = bm._measures_and_grad(TP, FP, FN, TN)
    return vals


# ------------------------------------------------------------------------------------------------
# 1. coverage and bias
# ------------------------------------------------------------------------------------------------


def study_coverage(quick, reps=None, n_rules=None, draws=400, schemes=None, run="A"):
    configs = [(0.01, 500), (0.01, 2000), (0.02, 1000), (0.04, 500), (0.04, 2000)]
    wanted = schemes or ["stratified", "poisson"]
    if quick:
        configs = configs[:2]
    N = 50_000
    R = reps or (60 if quick else 200)
    n_rules = n_rules or (40 if quick else 200)
    out = []
    for pi, budget in configs:
        for scheme in [s_ for s_ in ("stratified", "poisson") if s_ in wanted]:
            if scheme == "poisson" and budget != 500:
                continue
            rng = np.random.default_rng(int(pi * 1e4) + budget)
            s, y, rules, kinds = make_world(N, pi, n_rules, n_rules, rng)
            truth = bm.population_measures(y, rules).values
            d = bm.design(s, budget=budget, scheme=scheme)
            marg = margins_of(rules, d.strata, d.n_strata)
            K = rules.shape[0]
            est = np.empty((R, K, 5))
            kinds_ci = ("wald", "t", "wilson", "bayes")
            hit = {k: np.zeros((K, 5)) for k in kinds_ci}
            width = {k: np.zeros((K, 5)) for k in kinds_ci}
            var_sum = np.zeros((K, 5))
            cov_rep = {
                k: {kind: np.zeros((R, 5)) for kind in ("random", "informative")} for k in kinds_ci
            }
            t0 = time.perf_counter()
            for i in range(R):
                smp = d.sample(rng)
                ev = bm.evaluate(
                    y[smp.indices],
                    rules[:, smp.indices],
                    smp,
                    pool_margins=marg,
                    draws=draws,
                    rng=rng,
                )
                t = ev.table
                est[i] = t.estimate.values
                var_sum += np.nan_to_num(t.stderr.values**2)
                post = ev.posterior["posterior"]
                b_lo = np.stack(
                    [post[m].quantile(0.025, ("chain", "draw")).values for m in MEAS], -1
                )
                b_hi = np.stack(
                    [post[m].quantile(0.975, ("chain", "draw")).values for m in MEAS], -1
                )
                for key, lo, hi in (
                    ("wald", t.wald_low.values, t.wald_high.values),
                    ("t", t.t_low.values, t.t_high.values),
                    ("wilson", t.wilson_low.values, t.wilson_high.values),
                    ("bayes", b_lo, b_hi),
                ):
                    h = (lo <= truth) & (truth <= hi)
                    hit[key] += h
                    for kind in ("random", "informative"):
                        cov_rep[key][kind][i] = h[kinds == kind].mean(0)
                    width[key] += hi - lo
            secs = time.perf_counter() - t0
            mean = np.nanmean(est, 0)
            sd = np.nanstd(est, 0, ddof=1)
            mc = sd / np.sqrt(R)
            z = (mean - truth) / np.where(mc > 0, mc, np.nan)
            # mean estimated variance / variance of the estimates over the samples
            vratio = (var_sum / R) / np.where(sd > 0, sd**2, np.nan)
            for kind in ("random", "informative"):
                sel = kinds == kind
                for m in MEAS:
                    j = IDX[m]
                    zz = z[sel, j]
                    rel = np.abs(mean[sel, j] - truth[sel, j]) / np.maximum(truth[sel, j], 1e-12)
                    out.append(
                        {
                            "run": run,
                            "prevalence": pi,
                            "budget": budget,
                            "scheme": scheme,
                            "rules": kind,
                            "measure": m,
                            "n_rules": int(sel.sum()),
                            "reps": R,
                            "mean_truth": float(np.mean(truth[sel, j])),
                            "mean_bias": float(np.mean(mean[sel, j] - truth[sel, j])),
                            # rules share the labels, so the MC error of the bias averaged
                            # over rules comes from the per-sample averages
                            "mc_se_of_mean_bias": float(
                                np.nanstd(np.nanmean(est[:, sel, j] - truth[sel, j], 1), ddof=1)
                                / np.sqrt(R)
                            ),
                            "mean_abs_z": float(np.nanmean(np.abs(zz))),
                            "frac_abs_z_gt_3": float(np.nanmean(np.abs(zz) > 3)),
                            "median_rel_bias": float(np.nanmedian(rel)),
                            "rmse": float(np.sqrt(np.mean((est[:, sel, j] - truth[sel, j]) ** 2))),
                            "undefined_frac": float(np.isnan(est[:, sel, j]).mean()),
                            "median_variance_ratio": float(np.nanmedian(vratio[sel, j])),
                            "mean_variance_ratio": float(np.nanmean(vratio[sel, j])),
                            **{f"coverage_{k}": float(hit[k][sel, j].mean() / R) for k in kinds_ci},
                            # MC error of the coverage averaged over rules (rules share labels:
                            # computed from the per-sample average over rules)
                            **{
                                f"coverage_mc_se_{k}": float(
                                    cov_rep[k][kind][:, j].std(ddof=1) / np.sqrt(R)
                                )
                                for k in kinds_ci
                            },
                            **{f"width_{k}": float(width[k][sel, j].mean() / R) for k in kinds_ci},
                        }
                    )
            print(f"coverage pi={pi} n={budget} {scheme}: {secs:.1f}s", flush=True)
    return out


# ------------------------------------------------------------------------------------------------
# 2. MSE against uniform random sampling
# ------------------------------------------------------------------------------------------------


def study_mse(quick, reps=None, only_designs=None, run="A"):
    N, pi, budget = 50_000, 0.01, 500
    R = reps or (60 if quick else 400)
    n_rules = 40 if quick else 200
    rng = np.random.default_rng(2024)
    s, y, rules, kinds = make_world(N, pi, n_rules, n_rules, rng)
    truth = bm.population_measures(y, rules).values
    designs = {
        "uniform random (SRS), post-stratified by rule output": bm.design(
            s, budget=budget, n_strata=1, method="proportional"
        ),
        "sqrt, stratified (default)": bm.design(s, budget=budget),
        "sqrt, Poisson": bm.design(s, budget=budget, scheme="poisson"),
        "proportional, stratified": bm.design(s, budget=budget, method="proportional"),
        "equal, stratified": bm.design(s, budget=budget, method="equal"),
        "paper (Eq. 3.23/3.29), stratified": bm.design(s, budget=budget, method="paper"),
    }
    if only_designs:
        # the baseline comes first, so its samples (and the ratios) match a full run
        keep = [next(iter(designs))] + [k for k in designs if k in only_designs]
        designs = {k: designs[k] for k in dict.fromkeys(keep)}
    res = {}
    srs_plugin = []
    for name, d in designs.items():
        marg = margins_of(rules, d.strata, d.n_strata)
        est = np.empty((R, rules.shape[0], 5))
        for i in range(R):
            smp = d.sample(rng)
            lab = y[smp.indices]
            ev = bm.evaluate(lab, rules[:, smp.indices], smp, pool_margins=marg, posterior=None)
            est[i] = ev.table.estimate.values
            if name.startswith("uniform"):
                srs_plugin.append(measures(*plug_in(rules[:, smp.indices], lab)))
        res[name] = est
    if not only_designs:
        res["uniform random (SRS), plain plug-in"] = np.array(srs_plugin)
    out = {"pool": N, "prevalence": pi, "budget": budget, "reps": R, "designs": {}}
    base = res["uniform random (SRS), post-stratified by rule output"]
    for name, est in res.items():
        row = {}
        for kind in ("random", "informative", "all"):
            sel = np.ones(len(kinds), bool) if kind == "all" else kinds == kind
            for m in ("sensitivity", "precision", "specificity", "f1"):
                j = IDX[m]
                # undefined estimates (no labeled positive at all) count as error 0.5^2 ... report both
                err = (est[:, sel, j] - truth[sel, j]) ** 2
                b_err = (base[:, sel, j] - truth[sel, j]) ** 2
                row[f"{kind}/{m}/mse"] = float(np.nanmean(err))
                row[f"{kind}/{m}/ratio_to_srs"] = float(np.nanmean(err) / np.nanmean(b_err))
                row[f"{kind}/{m}/undefined_frac"] = float(np.isnan(err).mean())
        row["run"] = run
        out["designs"][name] = row
        print(f"mse {name}: done", flush=True)
    return out


# ------------------------------------------------------------------------------------------------
# 3. the paper's experiment on a covtype-like pool
# ------------------------------------------------------------------------------------------------


def study_covtype(quick, reps=None):
    """Covtype-like: pi = 0.04, the paper's rule sizes as rates, budgets 50..5000."""
    N = 100_000 if quick else 250_000
    pi = 0.04
    rng = np.random.default_rng(581_012)
    sp = make_classification_pool(N, pi, separation=4.0, noise=0.4, rng=rng)
    y = sp.labels.astype(np.int8)
    s = sp.pool.view().prob[:, 1]
    Np = int(y.sum())
    guessed = sp.pool.view().pred == 1  # the guesser's predicted positives
    g_prec = float(y[guessed].mean())
    g_rec = float(y[guessed].sum() / Np)
    lo = special.logit(np.clip(sp.truth, 1e-12, 1 - 1e-12))
    sizes = np.array([10_000, 20_000, 30_000, 40_000, 50_000]) / 581_012  # paper's |S_R^+|/|S|
    n_per = 20 if quick else 100
    budgets = [50, 100, 200, 500, 1000, 2000, 5000]
    reps = reps or (4 if quick else 10)

    rule_sets = {}
    for r in sizes:
        rule_sets[f"random r={r:.3f}"] = (rng.random((n_per, N)) < r).astype(np.int8)
    # informative rules: a noisy oracle with Se .8 / Sp .99 (Valizadegan et al., Sec. 5) and thresholded noisy
    # scores sharing the guesser's features
    no = np.where(y[None, :] == 1, rng.random((n_per, N)) < 0.8, rng.random((n_per, N)) < 0.01)
    rule_sets["noisy oracle Se .8 / Sp .99"] = no.astype(np.int8)
    sc = lo[None, :] + 2.5 * rng.uniform(0.4, 1.2, (n_per, 1)) * rng.standard_normal((n_per, N))
    thr = np.quantile(sc, 1 - 0.05, axis=1)
    rule_sets["score rules r=0.05"] = (sc > thr[:, None]).astype(np.int8)

    designs = {"sqrt": bm.design(s, budget=100), "paper": bm.design(s, budget=100, method="paper")}
    out = {
        "pool": N,
        "positives": Np,
        "prevalence": Np / N,
        "guesser_precision": g_prec,
        "guesser_recall": g_rec,
        "budgets": budgets,
        "reps": reps,
        "rules_per_set": n_per,
        "curves": {},
    }
    found = {"random sampling": [], "paper active": [], "sqrt design": [], "paper design": []}
    truths = {k: bm.population_measures(y, v).values for k, v in rule_sets.items()}
    curves = {}
    for n in budgets:
        dsg = {k: bm.design(s, budget=n, method=k) for k in designs}
        margs = {
            (k, name): margins_of(rules, dsg[k].strata, dsg[k].n_strata)
            for k in dsg
            for name, rules in rule_sets.items()
        }
        pos_found = {k: [] for k in found}
        for _rep in range(reps):
            # random sampling
            L_rand = rng.choice(N, n, replace=False)
            # the paper's active sampler with a fixed guesser: 100 random, then random
            # predicted positives (Valizadegan et al., Sec. 5 protocol; a retrained tree is emulated by a guess)
            n0 = min(100, n)
            first = rng.choice(N, n0, replace=False)
            cand = np.setdiff1d(np.flatnonzero(guessed), first)
            more = rng.choice(cand, min(n - n0, cand.size), replace=False)
            L_act = np.concatenate([first, more])
            samples = {k: dsg[k].sample(rng) for k in dsg}
            pos_found["random sampling"].append(int(y[L_rand].sum()))
            pos_found["paper active"].append(int(y[L_act].sum()))
            pos_found["sqrt design"].append(int(y[samples["sqrt"].indices].sum()))
            pos_found["paper design"].append(int(y[samples["paper"].indices].sum()))
            for name, rules in rule_sets.items():
                tr = truths[name]
                K1 = rules.sum(1).astype(float)
                ests = {}
                ests["random + plug-in"] = measures(*plug_in(rules[:, L_rand], y[L_rand]))
                TP, FP, FN, TN = plug_in(rules[:, L_act], y[L_act])
                ests["active + plug-in"] = measures(TP, FP, FN, TN)
                # blind labeling (E3): |B| = (|L+| - |L| pi)/pi random unlabeled items as negatives
                nl = len(L_act)
                npos = int(y[L_act].sum())
                nb = round(max(npos - nl * pi, 0) / pi)
                mask = np.ones(N, bool)
                mask[L_act] = False
                B = rng.choice(np.flatnonzero(mask), min(nb, int(mask.sum())), replace=False)
                PB = rules[:, B].sum(1).astype(float)
                ests["active + blind labeling"] = measures(TP, FP + PB, FN, TN + len(B) - PB)
                # imputation (E1) with known pi
                p = (Np - npos) / (N - nl)
                KL = rules[:, L_act].sum(1).astype(float)
                U_pos = K1 - KL
                U_neg = (N - K1) - (nl - KL)
                pr = (U_pos * p + TP) / K1
                se = (U_pos * p + TP) / Np
                spc = (U_neg * (1 - p) + TN) / (N - Np)
                ests["active + imputation"] = np.stack(
                    [se, spc, pr, 2 * pr * se / (pr + se), np.full_like(se, np.nan)], -1
                )
                for k in ("sqrt", "paper"):
                    smp = samples[k]
                    ev = bm.evaluate(
                        y[smp.indices],
                        rules[:, smp.indices],
                        smp,
                        pool_margins=margs[(k, name)],
                        posterior=None,
                    )
                    ests[f"{k} design + design weights"] = ev.table.estimate.values
                for est_name, e in ests.items():
                    key = (name, est_name, n)
                    err = e - tr
                    curves.setdefault(key, []).append(err)
        for k, v in pos_found.items():
            found[k].append(float(np.mean(v)))
        print(f"covtype n={n} done", flush=True)
    for (name, est_name, _n), errs in curves.items():
        e = np.array(errs)  # (reps, rules, 5)
        d = out["curves"].setdefault(name, {}).setdefault(est_name, {})
        for m in ("sensitivity", "specificity", "precision"):
            j = IDX[m]
            d.setdefault(m, {"mae": [], "bias": [], "undefined": []})
            d[m]["mae"].append(float(np.nanmean(np.abs(e[..., j]))))
            d[m]["bias"].append(float(np.nanmean(e[..., j])))
            d[m]["undefined"].append(float(np.isnan(e[..., j]).mean()))
    out["positives_labeled"] = found
    out["labels_for_precision_error_0.025"] = {
        name: {
            est: _labels_needed(budgets, out["curves"][name][est]["precision"]["mae"], 0.025)
            for est in out["curves"][name]
        }
        for name in out["curves"]
    }
    return out


def _labels_needed(budgets, mae, target):
    """Smallest budget (log-linear interpolation) with mean abs error <= target; None if never."""
    b = np.log(np.asarray(budgets, float))
    e = np.asarray(mae, float)
    for i in range(len(e)):
        if np.isfinite(e[i]) and e[i] <= target:
            if i == 0:
                return float(budgets[0])
            e0, e1 = e[i - 1], e[i]
            if not np.isfinite(e0):
                return float(budgets[i])
            t = (e0 - target) / (e0 - e1)
            return float(np.exp(b[i - 1] + t * (b[i] - b[i - 1])))
    return None


# ------------------------------------------------------------------------------------------------
# 4. timing
# ------------------------------------------------------------------------------------------------


def study_timing(quick):
    N, pi, budget, K = 100_000, 0.01, 2000, 10_000
    rng = np.random.default_rng(7)
    sp = make_classification_pool(N, pi, rng=rng)
    s = sp.pool.view().prob[:, 1]
    y = sp.labels.astype(np.int8)
    lo = special.logit(np.clip(sp.truth, 1e-12, 1 - 1e-12))
    d = bm.design(s, budget=budget)
    smp = d.sample(rng)
    Ps = np.empty((K, budget), dtype=np.int8)
    marg = np.empty((K, d.n_strata))
    for a in range(0, K, 500):  # rules generated in blocks over the pool
        b = min(a + 500, K)
        sc = lo[None, :] + rng.uniform(0.5, 5, (b - a, 1)) * rng.standard_normal((b - a, N))
        thr = np.quantile(sc, 1 - rng.uniform(0.005, 0.05, b - a), axis=1).diagonal()
        blk = (sc > thr[:, None]).astype(np.int8)
        Ps[a:b] = blk[:, smp.indices]
        marg[a:b] = margins_of(blk, d.strata, d.n_strata)
    lab = y[smp.indices]
    out = {"pool": N, "labels": budget, "rules": K, "strata": d.n_strata}
    bm.evaluate(lab, Ps[:10], smp, pool_margins=marg[:10], posterior=None)  # warm-up
    for name, kw in (
        ("post-stratified (pool margins), no posterior", {"pool_margins": marg, "posterior": None}),
        ("Hajek within strata (labeled items only), no posterior", {"posterior": None}),
        (
            "post-stratified + conjugate posterior (200 draws)",
            {"pool_margins": marg, "draws": 200, "rng": 0},
        ),
    ):
        times = []
        for _ in range(1 if quick else 3):
            t0 = time.perf_counter()
            ev = bm.evaluate(lab, Ps, smp, **kw)
            times.append(time.perf_counter() - t0)
        out[name] = {"best_seconds": min(times), "all_seconds": times}
        print(f"timing {name}: {min(times):.2f}s", flush=True)
    out["estimate_shape"] = list(ev.table.estimate.shape)
    return out


# ------------------------------------------------------------------------------------------------
# reports
# ------------------------------------------------------------------------------------------------


def write_md_main(res, path):
    lines = ["# Benchmark label sets for unknown predictors — results", ""]
    head = "last run" if res.get("runs") and len(res["runs"]) > 1 else "run"
    lines.append(f"Machine: {res['meta']['machine']}; {head} took {res['meta']['seconds']:.0f} s.")
    if res.get("runs") and len(res["runs"]) > 1:
        lines.append(
            "Rows come from several runs (column `run` in section 1, `(run X)` in section 2): "
            + "; ".join(f"{r_['run']}: {r_['note']}" for r_ in res["runs"])
            + "."
        )
    if "coverage" in res:
        lines += [
            "",
            "## 1. Bias and 95% coverage (sqrt design; random + informative rules)",
            "",
            f"{res['coverage'][0]['n_rules']} rules of each kind, {res['coverage'][0]['reps']} "
            "samples per setting. mean |z| = mean over rules of |mean bias| / MC standard error "
            "(about 0.8 without bias); '|z|>3' = share of rules with a significant bias; "
            "var ratio = median over rules of (mean estimated variance) / (variance of the "
            "estimates over the samples); coverage MC se = Monte Carlo error of the Wald "
            "coverage averaged over rules (from the per-sample averages; rules share labels).",
            "",
        ]
        for r_ in res.get("runs", []):
            lines.append(f"- run {r_['run']}: {r_['note']}")
        lines += [
            "",
            "| run | prevalence | labels | scheme | rules | measure | mean bias | MC se | mean abs z | |z|>3 | var ratio | Wald | t | Wilson | Bayes | cov MC se | width Wilson |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in res["coverage"]:
            if r["measure"] == "accuracy":
                continue
            lines.append(
                f"| {r.get('run', 'A')} | {r['prevalence']} | {r['budget']} | {r['scheme']} | {r['rules']} | {r['measure']} "
                f"| {r['mean_bias']:+.4f} | {r['mc_se_of_mean_bias']:.4f} | {r['mean_abs_z']:.2f} "
                f"| {r['frac_abs_z_gt_3']:.3f} | {r.get('median_variance_ratio', float('nan')):.2f} "
                f"| {r['coverage_wald']:.3f} | {r.get('coverage_t', float('nan')):.3f} "
                f"| {r['coverage_wilson']:.3f} "
                f"| {r['coverage_bayes']:.3f} | {r.get('coverage_mc_se_wald', float('nan')):.4f} "
                f"| {r['width_wilson']:.3f} |"
            )
    if "mse" in res:
        m = res["mse"]
        lines += [
            "",
            f"## 2. MSE at {m['budget']} labels, prevalence {m['prevalence']} (pool {m['pool']}, {m['reps']} samples)",
            "",
            "Ratio = MSE / MSE of uniform random sampling with the same estimator.",
            "",
            "| design | Se MSE (all) | Se ratio | Pr MSE (all) | Pr ratio | Se ratio random/informative | Pr ratio random/informative |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, row in m["designs"].items():
            lines.append(
                f"| {name} (run {row.get('run', 'A')}) | {row['all/sensitivity/mse']:.2e} | {row['all/sensitivity/ratio_to_srs']:.3f} "
                f"| {row['all/precision/mse']:.2e} | {row['all/precision/ratio_to_srs']:.3f} "
                f"| {row['random/sensitivity/ratio_to_srs']:.3f} / {row['informative/sensitivity/ratio_to_srs']:.3f} "
                f"| {row['random/precision/ratio_to_srs']:.3f} / {row['informative/precision/ratio_to_srs']:.3f} |"
            )
    if "timing" in res:
        t = res["timing"]
        lines += [
            "",
            f"## 4. Timing: {t['rules']} rules, {t['labels']} labels, pool {t['pool']}",
            "",
            "| path | best seconds |",
            "|---|---|",
        ]
        for k, v in t.items():
            if isinstance(v, dict):
                lines.append(f"| {k} | {v['best_seconds']:.2f} |")
    path.write_text("\n".join(lines) + "\n")


def write_md_covtype(res, path):
    c = res["covtype"]
    lines = [
        "# The paper's experiment on a covtype-like synthetic pool — results",
        "",
        f"Pool {c['pool']} items, {c['positives']} positives (prevalence {c['prevalence']:.4f}); "
        f"guesser precision {c['guesser_precision']:.2f}, recall {c['guesser_recall']:.2f}; "
        f"{c['rules_per_set']} rules per set, {c['reps']} repetitions of the sampling.",
        "",
        "## Positives among the labels",
        "",
        "| sampler | " + " | ".join(str(b) for b in c["budgets"]) + " |",
        "|---|" + "---|" * len(c["budgets"]),
    ]
    for k, v in c["positives_labeled"].items():
        lines.append(f"| {k} | " + " | ".join(f"{x:.0f}" for x in v) + " |")
    for m in ("precision", "sensitivity", "specificity"):
        lines += [
            "",
            f"## {m}: mean absolute error (bias) by budget",
            "",
            "| rules | estimator | " + " | ".join(str(b) for b in c["budgets"]) + " |",
            "|---|---|" + "---|" * len(c["budgets"]),
        ]
        for name, ests in c["curves"].items():
            for est, d in ests.items():
                cells = " | ".join(
                    f"{a:.3f} ({b:+.3f})" if np.isfinite(a) else "n/a"
                    for a, b in zip(d[m]["mae"], d[m]["bias"], strict=True)
                )
                lines.append(f"| {name} | {est} | {cells} |")
    lines += [
        "",
        "## Labels needed for a mean absolute precision error of 0.025",
        "",
        "| rules | "
        + " | ".join(next(iter(c["labels_for_precision_error_0.025"].values())))
        + " |",
        "|---|" + "---|" * len(next(iter(c["labels_for_precision_error_0.025"].values()))),
    ]
    for name, d in c["labels_for_precision_error_0.025"].items():
        lines.append(
            f"| {name} | "
            + " | ".join("> 5000" if v is None else f"{v:.0f}" for v in d.values())
            + " |"
        )
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="coverage,mse,covtype,timing")
    ap.add_argument("--reps", type=int, default=None, help="coverage: samples per setting")
    ap.add_argument("--rules", type=int, default=None, help="coverage: rules of each kind")
    ap.add_argument("--draws", type=int, default=400, help="coverage: posterior draws")
    ap.add_argument("--mse-reps", type=int, default=None, help="mse: samples per design")
    ap.add_argument("--covtype-reps", type=int, default=None, help="covtype: repetitions")
    ap.add_argument(
        "--schemes",
        default="stratified,poisson",
        help="coverage: sampling schemes to (re-)run; rows of the other schemes are kept",
    )
    ap.add_argument(
        "--mse-designs",
        default="",
        help="mse: ;-separated design names to re-run (with the baseline); others are kept",
    )
    ap.add_argument("--run", default="A", help="label of this run in the tables")
    ap.add_argument("--run-note", default="", help="coverage: one-line description of this run")
    args = ap.parse_args()
    only = set(args.only.split(","))
    sel = [s_.strip() for s_ in args.mse_designs.split(";") if s_.strip()]
    schemes = args.schemes.split(",")
    RESULTS.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    res = {}
    if "timing" in only:
        res["timing"] = study_timing(args.quick)
    if "mse" in only:
        res["mse"] = study_mse(args.quick, args.mse_reps, sel, args.run)
    if "coverage" in only:
        res["coverage"] = study_coverage(
            args.quick, args.reps, args.rules, args.draws, schemes, args.run
        )
    cov = None
    if "covtype" in only:
        cov = {"covtype": study_covtype(args.quick, args.covtype_reps)}
    meta = {
        "machine": f"{platform.machine()} {platform.python_version()}",
        "seconds": time.perf_counter() - t0,
        "quick": args.quick,
        "args": vars(args),
    }
    suffix = "_quick" if args.quick else ""
    if res:
        res["meta"] = meta
        p = RESULTS / f"unknown_predictors{suffix}.json"
        note = f"{args.run_note} ({meta['seconds']:.0f} s, {meta['machine']})".strip()
        if p.exists() and (
            only != {"coverage", "mse", "covtype", "timing"}
            or args.schemes != "stratified,poisson"
            or sel
        ):
            old = json.loads(p.read_text())
            if sel and "mse" in res and "mse" in old:
                for name, row in old["mse"]["designs"].items():
                    row.setdefault("run", "A")
                    if name not in res["mse"]["designs"]:
                        res["mse"]["designs"][name] = row
                order_m = list(old["mse"]["designs"])
                res["mse"]["designs"] = {
                    k: res["mse"]["designs"][k]
                    for k in sorted(
                        res["mse"]["designs"],
                        key=lambda k: order_m.index(k) if k in order_m else len(order_m),
                    )
                }
            if "coverage" in res and "coverage" in old:
                # keep the rows of the schemes not re-run (they come from an earlier run)
                kept = [r for r in old["coverage"] if r["scheme"] not in schemes]
                for r in kept:
                    r.setdefault("run", "A")
                order = {"stratified": 0, "poisson": 1, "random": 0, "informative": 1}
                res["coverage"] = sorted(
                    kept + res["coverage"],
                    key=lambda r: (
                        r["prevalence"],
                        r["budget"],
                        order[r["scheme"]],
                        order[r["rules"]],
                        MEAS.index(r["measure"]),
                    ),
                )
            runs = old.get("runs") or [
                {"run": "A", "note": f"first run ({old['meta']['seconds']:.0f} s)"}
            ]
            if "coverage" in res or "mse" in res:
                runs = [r for r in runs if r["run"] != args.run] + [{"run": args.run, "note": note}]
            old.update(res)
            old["runs"] = runs
            res = old
        elif "coverage" in res:
            res["runs"] = [{"run": args.run, "note": note}]
        p.write_text(json.dumps(res, indent=1))
        write_md_main(res, RESULTS / f"unknown_predictors{suffix}.md")
    if cov is not None:
        cov["meta"] = meta
        (RESULTS / f"unknown_predictors_covtype{suffix}.json").write_text(json.dumps(cov, indent=1))
        write_md_covtype(cov, RESULTS / f"unknown_predictors_covtype{suffix}.md")


if __name__ == "__main__":
    main()
