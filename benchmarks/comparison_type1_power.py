"""Comparing models: type-I error, family-wise error, power, labels saved, model selection and
sequential stopping (issue 4, items 1, 2 and 4).

Setting (synthetic, no download): a balanced-ish binary pool (prevalence 0.3) with a latent
feature ``u``; model ``i`` sees ``u`` through noise ``σ_i`` and reports the *calibrated*
probability given what it sees (so the plug-in beliefs are honest). Labels are the pool's fixed
true labels (a deterministic oracle); the true risks are the pool risks.

H0 is enforced as in Sawade (2012), Sec. 5.4: each drawn item's predictions are swapped between
the models with probability 1/2 (k models: a uniformly random cyclic shift). This is exactly
drawing from ``q/k`` on a pool holding every item in its k cyclic permutations, where every model
has exactly the same pool risk.

Section ``f1``: the same type-I error and power for F1 (a ratio measure), ``compare``'s default
generalized score test against its Wald test on the same draws; recompute it alone with
``--sections f1`` (about 3 minutes; the other sections are read back from the JSON).

Section ``fwer_f1``: family-wise error of ``multiple_comparison`` on F1 with k = 3 and 5 of the
five models (complete null by the cyclic shift), its default generalized score tests with the
joint covariance of the pairs' restricted terms against the joint Wald covariance, and their
power on the five models' true differences, ``--fwer-f1-reps`` (default 1,000) repetitions per
cell; recompute it alone with ``--sections fwer_f1`` (about 11 minutes).

Section ``f1_planning``: ``planning.power`` for F1 on the pool of section 3 (the delta-method
variance per draw at the belief's risks) next to the per-draw variances the two tests estimate
at 2,000 draws, ``n Σ v² ψ² / (Σ v)²`` (the score test's, at the null-restricted point) and
``n SE²`` (the Wald test's); about 30 seconds.

Run: ``python benchmarks/comparison_type1_power.py [--reps 2000] [--quick] [--sections …]``;
writes ``benchmarks/results/comparison_type1_power.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import special, stats

import bayes_activeeval as bae
from bayes_activeeval import planning
from bayes_activeeval.datasets import _solve_intercept
from bayes_activeeval.measures import difference
from bayes_activeeval.proposals import Proposal
from bayes_activeeval.sequential import GroupSequentialDesign

OUT = Path(__file__).parent / "results"
ALPHA = 0.05


# ------------------------------------------------------------------------------------------------
# pools
# ------------------------------------------------------------------------------------------------
def make_pool(m, noises, *, prevalence=0.3, separation=2.5, seed=0):
    """Binary pool; model i observes ``u + σ_i ε`` and reports ``P(y = 1 | observation)``
    (probit approximation of the logistic-normal integral, so nearly calibrated)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(m)
    a = _solve_intercept(u, separation, prevalence)
    y = (rng.random(m) < special.expit(a + separation * u)).astype(np.int8)
    preds, probs = {}, {}
    for k, nz in enumerate(noises):
        obs = u + nz * rng.standard_normal(m)
        mean, var = obs / (1 + nz**2), nz**2 / (1 + nz**2)
        pr = special.expit((a + separation * mean) / np.sqrt(1 + np.pi * separation**2 * var / 8))
        probs[f"m{k}"], preds[f"m{k}"] = pr, (pr > 0.5).astype(np.int8)
    return bae.Pool(predictions=preds, probs=probs, classes=[0, 1]), y


def permuted_null(pool, y, models, q):
    """Every item in k copies with the models' predictions cyclically shifted (exact H0)."""
    k = len(models)
    preds = {
        nm: np.concatenate([pool.view(models[(i + s) % k]).pred for s in range(k)])
        for i, nm in enumerate(models)
    }
    probs = {
        nm: np.concatenate([pool.view(models[(i + s) % k]).prob for s in range(k)])
        for i, nm in enumerate(models)
    }
    null = bae.Pool(predictions=preds, probs=probs, classes=pool.classes)
    return null, np.tile(y, k), Proposal(np.tile(q, k) / k, null.p, "null")


def pool_errors(pool, y, models):
    return {m: float(np.mean(pool.view(m).pred != y)) for m in models}


def binom_se(p, n):
    return float(np.sqrt(max(p * (1 - p), 1e-12) / n))


# ------------------------------------------------------------------------------------------------
# 1. type-I error of the paired Wald test (two models)
# ------------------------------------------------------------------------------------------------
def type_one(pool, y, reps, budgets, rng):
    models = ("m0", "m1")
    designs = {
        "passive": dict(kind="passive"),
        "optimal": dict(kind="optimal"),  # default defensive mixture 0.05
        "optimal_mix0": dict(kind="optimal", mix=0.0),
        "active_neq": dict(kind="active_neq", mix=0.0),
        "active_risk": dict(kind="active_risk"),
    }
    out = {}
    for name, kw in designs.items():
        q = bae.comparison_proposal(pool, "error_rate", models, **kw).q
        null, yy, prop = permuted_null(pool, y, models, q)
        dm, views = null.resolve(difference("error_rate", *models))
        for n in budgets:
            rej = rej_printed = rej_wald = 0
            for _ in range(reps):
                d = prop.draw(n, rng)
                r = bae.compare(null, "error_rate", d, yy[d.indices], proposal=prop)
                rej += r.pvalue < ALPHA
                rw = bae.compare(
                    null, "error_rate", d, yy[d.indices], proposal=prop, variance="wald"
                )
                rej_wald += rw.pvalue < ALPHA
                # the variance printed in Sawade et al. (2012), Eq. 4: (1/W) Σ w² (δ − Δ̂)²
                L = dm.loss(yy[d.indices], views(d.indices))
                delta = L[:, 0] - L[:, 1]
                w = d.weights
                W = w.sum()
                est = w @ delta / W
                s2 = np.sum(w**2 * (delta - est) ** 2) / W
                t = np.sqrt(n) * est / np.sqrt(s2) if s2 > 0 else 0.0
                rej_printed += 2 * stats.norm.sf(abs(t)) < ALPHA
            rate = rej / reps
            out[f"{name}/n={n}"] = {
                "design": name,
                "n_draws": n,
                "type1": rate,
                "mc_se": binom_se(rate, reps),
                "type1_wald_variance": rej_wald / reps,
                "type1_printed_variance": rej_printed / reps,
            }
            print(
                f"type-I {name:13s} n={n:4d}: score {rate:.4f}  wald {rej_wald / reps:.4f}  "
                f"printed {rej_printed / reps:.4f}"
            )
    return out


# ------------------------------------------------------------------------------------------------
# 1b. family-wise error of the k = 5 procedures
# ------------------------------------------------------------------------------------------------
def fwer(pool5, y5, reps, n, rng):
    models = pool5.models
    out = {}
    for design in ("passive", "optimal"):
        q = bae.comparison_proposal(pool5, "error_rate", models, kind=design).q
        null, yy, prop = permuted_null(pool5, y5, models, q)
        keys = ("tukey", "studentized_range", "dunnett", "holm", "bonferroni", "none")
        counts = {f"{m}/{v}": 0 for m in keys for v in ("score", "wald")}
        for _ in range(reps):
            d = prop.draw(n, rng)
            lab = yy[d.indices]
            for key in counts:
                meth, var = key.split("/")
                kw = {"baseline": "m0"} if meth == "dunnett" else {}
                r = bae.multiple_comparison(
                    null,
                    "error_rate",
                    d,
                    lab,
                    method=meth,
                    variance=var,
                    n_points=1 << 14,
                    rng=rng,
                    **kw,
                )
                counts[key] += bool(r.reject.any())
        for key, c in counts.items():
            meth, var = key.split("/")
            rate = c / reps
            out[f"{design}/{key}"] = {
                "design": design,
                "method": meth,
                "variance": var,
                "n_draws": n,
                "fwer": rate,
                "mc_se": binom_se(rate, reps),
            }
            print(f"FWER k=5 {design:8s} {meth:18s} {var}: {rate:.4f}")
    return out


# ------------------------------------------------------------------------------------------------
# 2. power versus budget, labels to reach power 0.8
# ------------------------------------------------------------------------------------------------
def power_curves(pool, y, reps, budgets, rng):
    models = ("m0", "m1")
    err = pool_errors(pool, y, models)
    delta = err["m0"] - err["m1"]
    out = {"true_difference": delta, "pool_errors": err, "curves": {}, "n_for_power_0.8": {}}
    for design in ("passive", "optimal", "active_neq", "active_risk"):
        prop = bae.comparison_proposal(pool, "error_rate", models, kind=design)
        curve = []
        for n in budgets:
            rej = rej_wald = 0
            labels = 0
            for _ in range(reps):
                d = prop.draw(n, rng)
                r = bae.compare(pool, "error_rate", d, y[d.indices], models, proposal=prop)
                rej += r.pvalue < ALPHA
                rw = bae.compare(
                    pool, "error_rate", d, y[d.indices], models, proposal=prop, variance="wald"
                )
                rej_wald += rw.pvalue < ALPHA
                labels += r.n_labels
            curve.append(
                {
                    "n_draws": n,
                    "power": rej / reps,
                    "mc_se": binom_se(rej / reps, reps),
                    "power_wald": rej_wald / reps,
                    "mean_labels": labels / reps,
                }
            )
            print(
                f"power {design:12s} n={n:5d}: score {rej / reps:.4f} wald {rej_wald / reps:.4f}"
                f"  labels {labels / reps:.1f}"
            )
        out["curves"][design] = curve
        pw = np.array([c["power"] for c in curve])
        ns = np.array([c["n_draws"] for c in curve], dtype=float)
        labs = np.array([c["mean_labels"] for c in curve])
        n80 = l80 = None
        above = np.flatnonzero(pw >= 0.8)
        if above.size:
            i = above[0]
            if i == 0:
                n80, l80 = ns[0], labs[0]
            else:  # linear interpolation between the bracketing budgets
                f = (0.8 - pw[i - 1]) / (pw[i] - pw[i - 1])
                n80 = ns[i - 1] + f * (ns[i] - ns[i - 1])
                l80 = labs[i - 1] + f * (labs[i] - labs[i - 1])
        plan = planning.labels_for_power(pool, "error_rate", delta, models, design=design)
        out["n_for_power_0.8"][design] = {
            "empirical_draws": n80,
            "empirical_labels": l80,
            "planned_draws": plan.n_draws,
            "planned_labels": plan.expected_labels,
        }
    p = out["n_for_power_0.8"]
    if p["passive"]["empirical_labels"] and p["optimal"]["empirical_labels"]:
        out["label_saving_optimal_vs_passive"] = 1 - (
            p["optimal"]["empirical_labels"] / p["passive"]["empirical_labels"]
        )
        out["draw_saving_optimal_vs_passive"] = 1 - (
            p["optimal"]["empirical_draws"] / p["passive"]["empirical_draws"]
        )
    return out


# ------------------------------------------------------------------------------------------------
# 3. F1 (a ratio measure): type-I error under the swap protocol and power, default versus Wald
# ------------------------------------------------------------------------------------------------
def f1_cells(pool, y, reps, null_budgets, power_budgets, rng):
    """Type-I error (swap protocol) and power of ``compare`` on F1: the default generalized
    score test against the Wald test (``variance="wald"``), same draws for both."""
    models = ("m0", "m1")
    tp = {m: float(np.sum((pool.view(m).pred == 1) & (y == 1))) for m in models}
    f1 = {m: 2 * tp[m] / (np.sum(pool.view(m).pred == 1) + np.sum(y == 1)) for m in models}
    out = {"pool_f1": f1, "true_difference": f1["m0"] - f1["m1"], "type1": {}, "power": {}}
    for design in ("passive", "optimal"):
        q = bae.comparison_proposal(pool, "f1", models, kind=design).q
        null, yy, prop0 = permuted_null(pool, y, models, q)
        prop1 = Proposal(q, pool.p, design)
        for hyp, budgets in (("type1", null_budgets), ("power", power_budgets)):
            pl, yv, prop = (null, yy, prop0) if hyp == "type1" else (pool, y, prop1)
            for n in budgets:
                rej = rej_wald = 0
                for _ in range(reps):
                    d = prop.draw(n, rng)
                    lab = yv[d.indices]
                    r = bae.compare(pl, "f1", d, lab, models, proposal=prop)
                    rw = bae.compare(pl, "f1", d, lab, models, proposal=prop, variance="wald")
                    rej += r.pvalue < ALPHA
                    rej_wald += rw.pvalue < ALPHA
                out[hyp][f"{design}/n={n}"] = {
                    "design": design,
                    "n_draws": n,
                    "rate": rej / reps,
                    "mc_se": binom_se(rej / reps, reps),
                    "rate_wald": rej_wald / reps,
                }
                print(
                    f"f1 {hyp} {design:8s} n={n:4d}: default {rej / reps:.4f} "
                    f"wald {rej_wald / reps:.4f}"
                )
    return out


# ------------------------------------------------------------------------------------------------
# 3b. F1 with k models: family-wise error (complete null) and power, score versus Wald covariance
# ------------------------------------------------------------------------------------------------
FWER_F1_METHODS = ("tukey", "dunnett", "holm", "studentized_range")


def _f1(pred, y):
    return float(2 * np.sum((pred == 1) & (y == 1)) / (np.sum(pred == 1) + np.sum(y == 1)))


def fwer_f1(pool5, y5, reps, rng, ks=(3, 5), budgets=(100, 500)):
    """Family-wise error of ``multiple_comparison`` on F1 under the complete null (each drawn
    item's predictions cyclically shifted among the k models) for the default generalized
    score tests (``variance="auto"``) and the joint Wald covariance (``variance="wald"``), on
    the same draws; Holm's any-rejection event is Bonferroni's (its first step), so
    Bonferroni's family-wise error is Holm's. Then Tukey's power on the five models' true
    differences: the rate of rejecting any pair, the mean share of the ten pairs rejected and
    the rate of rejecting the pair with the largest difference."""
    f1 = {m: _f1(pool5.view(m).pred, y5) for m in pool5.models}
    out = {"pool_f1": f1, "reps": reps, "fwer": {}, "power": {}}
    for k in ks:
        models = pool5.models[:k]
        for design in ("optimal", "passive"):
            q = bae.comparison_proposal(pool5, "f1", models, kind=design).q
            null, yy, prop = permuted_null(pool5, y5, models, q)
            for n in budgets:
                counts = {f"{m}/{v}": 0 for m in FWER_F1_METHODS for v in ("score", "wald")}
                undefined = 0
                for _ in range(reps):
                    d = prop.draw(n, rng)
                    lab = yy[d.indices]
                    for key in counts:
                        meth, var = key.split("/")
                        kw = {"baseline": models[0]} if meth == "dunnett" else {}
                        try:
                            r = bae.multiple_comparison(
                                null,
                                "f1",
                                d,
                                lab,
                                models,
                                method=meth,
                                variance="auto" if var == "score" else var,
                                n_points=1 << 12,
                                rng=rng,
                                **kw,
                            )
                        except ValueError:  # F1 of some model not defined on the sample yet
                            undefined += 1
                            continue
                        counts[key] += bool(r.reject.any())
                for key, c in counts.items():
                    meth, var = key.split("/")
                    rate = c / reps
                    out["fwer"][f"k={k}/{design}/n={n}/{key}"] = {
                        "k": k,
                        "design": design,
                        "n_draws": n,
                        "method": meth,
                        "variance": var,
                        "fwer": rate,
                        "mc_se": binom_se(rate, reps),
                    }
                    print(f"FWER F1 k={k} {design:8s} n={n:4d} {meth:18s} {var}: {rate:.4f}")
                out["fwer"][f"k={k}/{design}/n={n}/undefined"] = undefined
    models = pool5.models
    k = len(models)
    truth = np.array([f1[m] for m in models])
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    top = max(pairs, key=lambda p: abs(truth[p[0]] - truth[p[1]]))
    out["largest_pair"] = [models[top[0]], models[top[1]]]
    for design in ("optimal", "passive"):
        prop = bae.comparison_proposal(pool5, "f1", models, kind=design)
        for n in budgets:
            acc = {v: {"any": 0, "share": 0.0, "largest": 0} for v in ("score", "wald")}
            for _ in range(reps):
                d = prop.draw(n, rng)
                lab = y5[d.indices]
                for var in acc:
                    r = bae.multiple_comparison(
                        pool5,
                        "f1",
                        d,
                        lab,
                        models,
                        variance="auto" if var == "score" else var,
                        n_points=1 << 12,
                        rng=rng,
                    )
                    rej = np.array([r.reject[i, j] for i, j in pairs])
                    acc[var]["any"] += bool(rej.any())
                    acc[var]["share"] += float(rej.mean())
                    acc[var]["largest"] += bool(r.reject[top])
            for var, a in acc.items():
                row = {
                    "design": design,
                    "n_draws": n,
                    "variance": var,
                    "any_pair": a["any"] / reps,
                    "mean_share_of_pairs": a["share"] / reps,
                    "largest_pair": a["largest"] / reps,
                    "mc_se_largest": binom_se(a["largest"] / reps, reps),
                }
                out["power"][f"{design}/n={n}/{var}"] = row
                print(
                    f"power F1 k=5 tukey {design:8s} n={n:4d} {var}: any {row['any_pair']:.4f} "
                    f"share {row['mean_share_of_pairs']:.4f} largest {row['largest_pair']:.4f}"
                )
    return out


def f1_planning(pool, y, rng, budgets=(50, 100, 200, 400, 800), n_var=2000, reps=200):
    """What ``planning`` predicts for the F1 comparison of section 3 (power at the section's
    true difference and budgets from the delta-method variance per draw ``Σ p² u/q``), and the
    mean per-draw variances of the score test (``n Σ v² ψ² / (Σ v)²``, its terms at the
    null-restricted point) and of the Wald test (``n SE²``) over ``reps`` samples of ``n_var``
    draws."""
    from bayes_activeeval.comparison.pairwise import restricted_score_test
    from bayes_activeeval.estimators import weighted_estimate

    models = ("m0", "m1")
    f1 = {m: _f1(pool.view(m).pred, y) for m in models}
    delta = f1["m0"] - f1["m1"]
    dm, views = pool.resolve(difference("f1", *models))
    out = {"true_difference": delta, "n_variance": n_var, "reps_variance": reps, "designs": {}}
    for design in ("optimal", "passive"):
        plan = planning.labels_for_power(pool, "f1", delta, models, design=design)
        prop = bae.comparison_proposal(pool, "f1", models, kind=design)
        s0 = s1 = 0.0
        for _ in range(reps):
            d = prop.draw(n_var, rng)
            L = dm.loss(y[d.indices], views(d.indices))
            _, sums, _, _ = restricted_score_test(L, d.weights, dm, "f1", models, pool.n_classes)
            s0 += n_var * sums.B / sums.W**2
            s1 += n_var * float(weighted_estimate(L, d.weights, dm).stderrs[0]) ** 2
        out["designs"][design] = {
            "planned_variance": plan.variance,
            "planned_draws_for_power_0.8": plan.n_draws,
            "score_variance": s0 / reps,
            "wald_variance": s1 / reps,
            "planned_power": {str(n): planning.power(n, delta, plan.variance) for n in budgets},
        }
        print(f"f1 planning {design}: {out['designs'][design]}")
    return out


# ------------------------------------------------------------------------------------------------
# 4. model selection with five models
# ------------------------------------------------------------------------------------------------
def selection(pool5, y5, reps, budgets, rng):
    models = pool5.models
    err = pool_errors(pool5, y5, models)
    best = min(err, key=err.get)
    out = {"pool_errors": err, "best": best, "curves": {}}
    for design in ("passive", "optimal", "active_neq", "active_risk"):
        prop = bae.comparison_proposal(pool5, "error_rate", models, kind=design)
        curve = []
        for n in budgets:
            wrong = 0.0
            for _ in range(reps):
                d = prop.draw(n, rng)
                r = bae.multiple_comparison(pool5, "error_rate", d, y5[d.indices], method="none")
                e = r.estimates
                tied = np.flatnonzero(e == e.min())
                wrong += 1 - (models.index(best) in tied) / tied.size
            curve.append(
                {
                    "n_draws": n,
                    "selection_error": wrong / reps,
                    "mc_se": binom_se(wrong / reps, reps),
                }
            )
            print(f"selection {design:12s} n={n:4d}: {wrong / reps:.4f}")
        out["curves"][design] = curve
    return out


# ------------------------------------------------------------------------------------------------
# sequential stopping (Table 5.1 protocol): naive versus alpha spending
# ------------------------------------------------------------------------------------------------
def _z_path(pool_, yy, prop, looks, rng, models):
    """Test statistics at every look from one run of draws (cumulative sums of the same
    quantities :func:`bae.compare` computes; checked against it below)."""
    dm, views = pool_.resolve(difference("error_rate", *models))
    d = prop.draw(looks[-1], rng)
    L = dm.loss(yy[d.indices], views(d.indices))
    delta, w = L[:, 0] - L[:, 1], d.weights
    idx = np.asarray(looks) - 1
    S1, V2 = np.cumsum(w * delta)[idx], np.cumsum(w**2 * delta**2)[idx]
    # the score statistic compare() uses by default for plain risks: Σ v δ / sqrt(Σ v² δ²)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(V2 > 0, S1 / np.sqrt(V2), np.where(S1 == 0, 0.0, np.sign(S1) * np.inf))
    _, first = np.unique(d.indices, return_index=True)
    new = np.zeros(d.indices.size)
    new[first] = 1
    labels = np.cumsum(new)[idx]
    return z, labels, d


def sequential(pool, y, reps, rng, max_draws=800, batch=50):
    models = ("m0", "m1")
    looks = tuple(range(batch, max_draws + 1, batch))
    bounds = {
        sp: GroupSequentialDesign(looks, ALPHA, sp).boundaries
        for sp in ("naive", "pocock", "obrien-fleming")
    }
    err = pool_errors(pool, y, models)
    truth_sign = np.sign(err["m0"] - err["m1"])
    out = {"looks": list(looks), "boundaries": {k: v.tolist() for k, v in bounds.items()}}
    for design in ("passive", "optimal"):
        q = bae.comparison_proposal(pool, "error_rate", models, kind=design).q
        null, yy0, prop0 = permuted_null(pool, y, models, q)
        prop1 = Proposal(q, pool.p, design)
        # consistency of the vectorised path with sequential_compare on a few runs
        for s in range(3):
            z, _, _ = _z_path(null, yy0, prop0, looks, np.random.default_rng(1000 + s), models)
            r = bae.sequential_compare(
                null,
                "error_rate",
                lambda i, yy0=yy0: yy0[i],
                proposal=prop0,
                max_draws=max_draws,
                batch=batch,
                spending="naive",
                rng=np.random.default_rng(1000 + s),
            )
            np.testing.assert_allclose(
                r.history["statistic"], z[: len(r.history)], rtol=1e-9, atol=1e-12
            )
        for hyp, (pl, yy, prop) in {"H0": (null, yy0, prop0), "H1": (pool, y, prop1)}.items():
            res = {sp: {"reject": 0, "wrong": 0, "labels": 0.0, "draws": 0.0} for sp in bounds}
            for _ in range(reps):
                z, labels, _ = _z_path(pl, yy, prop, looks, rng, models)
                for sp, c in bounds.items():
                    hit = np.flatnonzero(np.abs(z) >= c)
                    k = hit[0] if hit.size else len(looks) - 1
                    res[sp]["labels"] += labels[k]
                    res[sp]["draws"] += looks[k]
                    if hit.size:
                        res[sp]["reject"] += 1
                        res[sp]["wrong"] += hyp == "H1" and np.sign(z[k]) != truth_sign
            for sp, v in res.items():
                row = {
                    "design": design,
                    "hypothesis": hyp,
                    "spending": sp,
                    "rejection_rate": v["reject"] / reps,
                    "mc_se": binom_se(v["reject"] / reps, reps),
                    "false_decisions": v["wrong"] / reps,
                    "mean_labels_at_stop": v["labels"] / reps,
                    "mean_draws_at_stop": v["draws"] / reps,
                }
                out[f"{design}/{hyp}/{sp}"] = row
                print(
                    f"sequential {design:8s} {hyp} {sp:15s}: reject {row['rejection_rate']:.4f} "
                    f"labels {row['mean_labels_at_stop']:.1f} wrong {row['false_decisions']:.4f}"
                )
    return out


# ------------------------------------------------------------------------------------------------
def write_markdown(res, path):
    lines = ["# Comparing models — type-I error, FWER, power, selection, sequential", ""]
    s = res["setup"]
    lines += [
        f"Pools: two models (noise {s['two_noises']}), {s['m']} items; five models (noise "
        f"{s['five_noises']}), {s['m5']} items; prevalence 0.3; {s['reps']} repetitions per cell; "
        f"α = {ALPHA}; runtime {res['runtime_s']:.0f} s.",
        "",
        "## 1. Type-I error under H0 (swap protocol), two-sided Wald test",
        "",
        "`score` = compare()'s default for plain risks (variance centred at the null), `wald` ="
        " thesis Eq. 3.22 (centred at the estimate), `printed` = Sawade et al. (2012), Eq. 4.",
        "",
        "| design | n draws | type-I score | MC s.e. | type-I wald | type-I printed |",
        "|---|---|---|---|---|---|",
    ]
    for v in res["type1"].values():
        lines.append(
            f"| {v['design']} | {v['n_draws']} | {v['type1']:.4f} | {v['mc_se']:.4f} | "
            f"{v['type1_wald_variance']:.4f} | {v['type1_printed_variance']:.4f} |"
        )
    lines += ["", "## 1b. Family-wise error, k = 5 models, complete null", ""]
    lines += [
        "| design | method | variance | n draws | FWER | MC s.e. |",
        "|---|---|---|---|---|---|",
    ]
    for v in res["fwer"].values():
        lines.append(
            f"| {v['design']} | {v['method']} | {v.get('variance', 'wald')} | {v['n_draws']} | "
            f"{v['fwer']:.4f} | {v['mc_se']:.4f} |"
        )
    p = res["power"]
    lines += [
        "",
        "## 2. Power versus budget (true difference "
        f"Δ = {p['true_difference']:.4f}; pool errors {p['pool_errors']})",
        "",
    ]
    designs = list(p["curves"])
    lines += ["Power with the default (score) test, [Wald thesis form], (mean labels):", ""]
    lines.append("| n draws | " + " | ".join(designs) + " |")
    lines.append("|---" * (len(designs) + 1) + "|")
    for i, c in enumerate(p["curves"]["passive"]):
        row = [
            f"{p['curves'][d][i]['power']:.3f} [{p['curves'][d][i]['power_wald']:.3f}] "
            f"({p['curves'][d][i]['mean_labels']:.0f} lab.)"
            for d in designs
        ]
        lines.append(f"| {c['n_draws']} | " + " | ".join(row) + " |")
    lines += [
        "",
        "Labels (and draws) to reach power 0.8 — empirical (interpolated) and planned:",
        "",
    ]
    lines += [
        "| design | empirical draws | empirical labels | planned draws | planned labels |",
        "|---|---|---|---|---|",
    ]
    for d, v in p["n_for_power_0.8"].items():

        def f(x):
            return "—" if x is None else f"{x:.0f}"

        lines.append(
            f"| {d} | {f(v['empirical_draws'])} | {f(v['empirical_labels'])} | "
            f"{v['planned_draws']} | {v['planned_labels']:.0f} |"
        )
    if "label_saving_optimal_vs_passive" in p:
        lines += [
            "",
            f"Optimal vs passive: {100 * p['label_saving_optimal_vs_passive']:.0f}% fewer labels "
            f"({100 * p['draw_saving_optimal_vs_passive']:.0f}% fewer draws) for power 0.8.",
        ]
    if "f1" in res:
        f = res["f1"]
        lines += [
            "",
            "## 3. F1: type-I error (swap protocol) and power, default test versus Wald",
            "",
            f"Pool F1 {{{', '.join(f'{m}: {v:.4f}' for m, v in f['pool_f1'].items())}}}, true "
            f"difference {f['true_difference']:.4f}. `default` = compare()'s generalized score "
            "test (influence terms at a null-restricted point), `wald` = the delta-method Wald "
            'test (`variance="wald"`); the same draws for both.',
            "",
            "| hypothesis | design | n draws | default | MC s.e. | wald |",
            "|---|---|---|---|---|---|",
        ]
        for hyp in ("type1", "power"):
            for v in f[hyp].values():
                lines.append(
                    f"| {'H0' if hyp == 'type1' else 'H1'} | {v['design']} | {v['n_draws']} | "
                    f"{v['rate']:.4f} | {v['mc_se']:.4f} | {v['rate_wald']:.4f} |"
                )
    if "fwer_f1" in res:
        f = res["fwer_f1"]
        lines += [
            "",
            "## 3b. F1 with k models: family-wise error (complete null) and Tukey's power",
            "",
            f"Pool F1 {{{', '.join(f'{m}: {v:.4f}' for m, v in f['pool_f1'].items())}}}; "
            f"{f['reps']} repetitions per cell; k = 3 "
            "takes m0-m2. `score` = multiple_comparison()'s default for F1 (each pair's "
            "generalized score test at its own null-restricted point, jointly through "
            'Σ v² ψ_p ψ_q), `wald` = the joint delta-method covariance (`variance="wald"`); '
            "the same draws for both. Holm's family-wise error equals Bonferroni's (its first "
            "step).",
            "",
            "| k | design | n draws | method | FWER score | FWER wald | MC s.e. (score) |",
            "|---|---|---|---|---|---|---|",
        ]
        for key, v in f["fwer"].items():
            if not isinstance(v, dict) or v["variance"] != "score":
                continue
            w = f["fwer"][key[: -len("score")] + "wald"]
            lines.append(
                f"| {v['k']} | {v['design']} | {v['n_draws']} | {v['method']} | "
                f"{v['fwer']:.4f} | {w['fwer']:.4f} | {v['mc_se']:.4f} |"
            )
        lines += [
            "",
            f"Tukey's power, five models (largest difference: {' vs '.join(f['largest_pair'])}):",
            "",
            "| design | n draws | variance | any pair | mean share of pairs | largest pair |",
            "|---|---|---|---|---|---|",
        ]
        for v in f["power"].values():
            lines.append(
                f"| {v['design']} | {v['n_draws']} | {v['variance']} | {v['any_pair']:.4f} | "
                f"{v['mean_share_of_pairs']:.4f} | {v['largest_pair']:.4f} |"
            )
    if "f1_planning" in res and "f1" in res:
        fp = res["f1_planning"]
        lines += [
            "",
            "## 3c. F1: planned power against the empirical power of section 3",
            "",
            "`planning.power` from the delta-method variance per draw (`Σ p² u/q`, at the "
            "belief's risks; `planning.labels_for_power`); the tests' mean per-draw variance "
            f"estimates over {fp['reps_variance']} samples of {fp['n_variance']} draws: score "
            "`n Σ v² ψ² / (Σ v)²` (terms at the null-restricted point), Wald `n SE²`.",
            "",
            "| design | planned variance | score variance | Wald variance | n draws | planned "
            "power | empirical power, default (score) | empirical power, Wald |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for design, v in fp["designs"].items():
            for n, pw in v["planned_power"].items():
                e = res["f1"]["power"].get(f"{design}/n={n}")
                if e is None:
                    continue
                lines.append(
                    f"| {design} | {v['planned_variance']:.4f} | {v['score_variance']:.4f} | "
                    f"{v['wald_variance']:.4f} | {n} | {pw:.3f} | {e['rate']:.3f} | "
                    f"{e['rate_wald']:.3f} |"
                )
    sel = res["selection"]
    lines += [
        "",
        f"## 4. Model-selection error, five models (pool errors {sel['pool_errors']}, best "
        f"{sel['best']})",
        "",
    ]
    designs = list(sel["curves"])
    lines.append("| n draws | " + " | ".join(designs) + " |")
    lines.append("|---" * (len(designs) + 1) + "|")
    for i, c in enumerate(sel["curves"]["passive"]):
        row = [f"{sel['curves'][d][i]['selection_error']:.4f}" for d in designs]
        lines.append(f"| {c['n_draws']} | " + " | ".join(row) + " |")
    sq = res["sequential"]
    lines += [
        "",
        "## Sequential stopping (Table 5.1 protocol: look every 50 draws up to 800)",
        "",
        "| design | hypothesis | spending | rejection rate | false decisions | mean labels | mean draws |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in sq.values():
        if not isinstance(v, dict) or "design" not in v:
            continue
        lines.append(
            f"| {v['design']} | {v['hypothesis']} | {v['spending']} | {v['rejection_rate']:.4f} | "
            f"{v['false_decisions']:.4f} | {v['mean_labels_at_stop']:.1f} | {v['mean_draws_at_stop']:.1f} |"
        )
    path.write_text("\n".join(lines) + "\n")


SECTIONS = ("type1", "fwer", "power", "selection", "sequential", "f1", "fwer_f1", "f1_planning")
POWER_BUDGETS = (50, 100, 200, 300, 400, 600, 800, 1200, 1600, 2400, 3200, 4000)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="few repetitions (smoke run)")
    ap.add_argument("--fwer-f1-reps", type=int, default=1000, help="repetitions of fwer_f1")
    ap.add_argument("--seed", type=int, default=20121203)
    ap.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="comma-separated subset to (re)compute; the others are kept from the existing JSON",
    )
    args = ap.parse_args(argv)
    reps = 100 if args.quick else args.reps
    todo = [x for x in args.sections.split(",") if x]
    bad = set(todo) - set(SECTIONS)
    if bad:
        raise SystemExit(f"unknown sections {sorted(bad)}; choose from {SECTIONS}")
    t0 = time.time()
    m, m5 = 20_000, 10_000
    two_noises, five_noises = (0.4, 0.6), (0.35, 0.4, 0.45, 0.5, 0.55)
    pool, y = make_pool(m, two_noises, seed=1)
    pool5, y5 = make_pool(m5, five_noises, seed=2)
    OUT.mkdir(exist_ok=True)
    name = "comparison_type1_power" + ("_quick" if args.quick else "")
    path = OUT / f"{name}.json"
    res = json.loads(path.read_text()) if path.exists() and set(todo) != set(SECTIONS) else {}
    res["setup"] = {
        "m": m,
        "m5": m5,
        "two_noises": two_noises,
        "five_noises": five_noises,
        "reps": reps,
        "alpha": ALPHA,
        "seed": args.seed,
    }
    runtimes = res.get("section_runtime_s", {})
    # each section has its own stream (seed, index), so sections can be recomputed separately
    jobs = {
        "type1": lambda r: type_one(pool, y, reps, (100, 300, 800), r),
        "fwer": lambda r: fwer(pool5, y5, reps, 500, r),
        "power": lambda r: power_curves(pool, y, reps, POWER_BUDGETS, r),
        "selection": lambda r: selection(pool5, y5, reps, (100, 200, 400, 800), r),
        "sequential": lambda r: sequential(pool, y, reps, r),
        "f1": lambda r: f1_cells(pool, y, reps, (50, 100, 300, 800), (50, 100, 200, 400, 800), r),
        "fwer_f1": lambda r: fwer_f1(pool5, y5, 50 if args.quick else args.fwer_f1_reps, r),
        "f1_planning": lambda r: f1_planning(pool, y, r),
    }
    for i, sec in enumerate(SECTIONS):
        if sec in todo:
            ts = time.time()
            res[sec] = jobs[sec](np.random.default_rng([args.seed, i]))
            runtimes[sec] = time.time() - ts
    res["section_runtime_s"] = runtimes
    res["runtime_s"] = float(sum(runtimes.values()))
    path.write_text(json.dumps(res, indent=1, default=float))
    if all(sec in res for sec in SECTIONS):
        write_markdown(res, OUT / f"{name}.md")
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
