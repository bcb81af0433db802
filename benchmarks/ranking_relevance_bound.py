"""How much a better relevance model could save when comparing two rankers that differ on every
query (issue 15: target MSE <= 0.6x passive; the default reaches 0.68x DCG / 0.64x ERR).

Pool: ``benchmarks/ranking.py --changed 1`` (3,000 synthetic queries, 10-100 documents, seed
2012, budget 200 cost units). The default comparison (optimal proposal for the model-assisted
estimate, ``ranking.compare``) is run with four relevance models, each used for both the
proposal and the control variate:

- ``pool``: the pool's own model (``p0..p4``; the default of ``benchmarks/ranking.py``);
- ``refit: model``, ``refit: model + query mean``, ``refit: model + scores + query means``: an
  ordered logistic (maximum likelihood) of the grade on the pool model's latent
  ``logit(1 − p0)``, its mean over the query, both rankers' scores and their query means,
  **fitted on every grade of the pool**. No refit from labels as they arrive (stages, a PyMC or
  MAP ordered-logistic model on these features) can fit better than this, so it bounds what an
  adaptive refit of such a model can gain;
- ``true P``: the grade probabilities the pool was drawn from (unknowable; the ceiling).

Part 1 is analytic: the large-sample variance of one draw's term of the difference estimator
``M + w(δ − λ m)``, ``Σ_x q(x) (w(x)(δ_x − λ m_x) − (Δ − λ M))²`` with ``w = p/q``, times the
expected cost of a draw ``E_q[λ(x)]`` (Sawade (2012), Eq. 6.7-6.9: variance per unit of cost),
relative to passive sampling with the plain estimate, at ``λ = 1`` and at the best ``λ`` (which
the package's tuned ``λ`` approximates); also ``R²`` of ``m`` for the realized per-query
differences ``δ``, and the proposal built from the true conditional second moment
``E_true[(δ − m)²|x]`` (the best proposal for the pool model's control variate). Part 2 is the
Monte Carlo check: ``--reps`` runs of ``ranking.draw`` + ``ranking.test`` per cell, the same
seeds in every cell (MSE relative to passive with its Monte Carlo standard error).

Usage: python benchmarks/ranking_relevance_bound.py [--reps 1000] [--quick]
Writes benchmarks/results/ranking_relevance_bound.json and .md (after each cell, so an
interrupted run keeps what it finished).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, special

from bayes_activeeval import ranking
from bayes_activeeval.ranking.measures import get, loss_moments, query_losses
from bayes_activeeval.ranking.synthetic import CUTPOINTS, ordered_logistic_probs

OUT = Path(__file__).parent / "results"
SEED, BUDGET = 2012, 200.0


def true_probabilities(data, n_queries: int) -> np.ndarray:
    """The grade probabilities ``make_ranking_pool`` drew the grades from (its RNG replayed)."""
    rng = np.random.default_rng(SEED)
    n_d = rng.integers(10, 101, n_queries)
    qcode = np.repeat(np.arange(n_queries), n_d)
    u = rng.normal(0.0, 1.5, n_queries)
    t = u[qcode] + rng.normal(0.0, 2.0, qcode.size)
    P = ordered_logistic_probs(t, CUTPOINTS)
    # the replay is right if it redraws the same grades
    cdf = np.cumsum(P, axis=1)
    grade = np.minimum((rng.random((qcode.size, 1)) > cdf).sum(axis=1), 4)
    assert np.array_equal(grade, data.frame["grade"].to_numpy()), "RNG replay diverged"
    return P


def fit_ordered_logistic(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Maximum-likelihood ordered logistic ``P(y ≤ k) = σ(c_k − Xβ)``; returns ``P`` (n, 5)."""
    k = X.shape[1]

    def unpack(th):
        c = np.concatenate([[th[k]], th[k] + np.cumsum(np.exp(th[k + 1 :]))])
        return th[:k], c

    def nll(th):
        b, c = unpack(th)
        P = ordered_logistic_probs(X @ b, c)
        return -np.log(np.clip(P[np.arange(y.size), y], 1e-300, None)).sum()

    th0 = np.r_[1.0, np.zeros(k - 1), 0.0, np.log([2.0, 2.0, 1.5])]
    b, c = unpack(optimize.minimize(nll, th0, method="L-BFGS-B").x)
    return ordered_logistic_probs(X @ b, c)


def relevance_models(data, n_queries: int) -> dict[str, np.ndarray]:
    fr, pool = data.frame, data.pool
    slot = fr.groupby("qid", sort=False).cumcount().to_numpy()
    qi = pool.query_index(fr["qid"].unique())[pd.factorize(fr["qid"])[0]]

    def matrix(P):
        R = pool.relevance.copy()
        R[qi, slot] = P
        return R

    def qmean(x):
        return pd.Series(np.asarray(x, dtype=float)).groupby(fr["qid"].to_numpy()).transform(
            "mean"
        ).to_numpy()  # fmt: skip

    eta = special.logit(np.clip(1.0 - fr["p0"].to_numpy(), 1e-12, 1 - 1e-12))
    sa, sb = fr["score_a"].to_numpy(), fr["score_b"].to_numpy()
    feats = {
        "refit: model": np.c_[eta],
        "refit: model + query mean": np.c_[eta, qmean(eta)],
        "refit: model + scores + query means": np.c_[eta, sa, sb, qmean(eta), qmean(sa), qmean(sb)],
    }
    y = fr["grade"].to_numpy()
    out = {"pool": pool.relevance}
    for name, X in feats.items():
        out[name] = matrix(fit_ordered_logistic(X, y))
    out["true P"] = matrix(true_probabilities(data, n_queries))
    return out


def log_likelihood(data, R: np.ndarray) -> float:
    """Mean log-probability per document that the relevance model ``R`` gives the true grade."""
    G = data.grades
    real = G >= 0
    P = np.take_along_axis(R, np.where(real, G, 0)[..., None], axis=2)[..., 0]
    return float(np.log(np.clip(P[real], 1e-300, None)).mean())


def analytic(data, models) -> list[dict]:
    pool = data.pool
    m = pool.n_queries
    p, lam = np.full(m, 1.0 / m), pool.costs

    def proposal(var, mix=0.05):
        q = np.sqrt(var / lam)
        return (1 - mix) * q / q.sum() + mix * p

    def per_cost(q, delta, mcv, best=False):
        w = p / q
        a0 = w * delta - delta.mean()
        a1 = -(w * mcv - mcv.mean())
        coef = -(q * a0 * a1).sum() / (q * a1 * a1).sum() if best else 1.0
        return float((q * (a0 + coef * a1) ** 2).sum() * (q * lam).sum()), float(coef)

    rows = []
    for meas in ("dcg", "err"):
        rm = get(meas)
        G = data.grades
        L = np.concatenate([query_losses(pool, rm, r, G, np.arange(m)) for r in ("a", "b")], 1)
        delta = L[:, 0] - L[:, 1]
        passive = per_cost(p, delta, np.zeros(m))[0]
        moments = {}
        for name, R in models.items():
            mean, sec = loss_moments(pool, rm, ("a", "b"), R, rng=np.random.default_rng(0))
            mcv = mean[:, 0] - mean[:, 1]
            var = np.maximum(sec[:, 0, 0] + sec[:, 1, 1] - 2 * sec[:, 0, 1] - mcv**2, 0.0)
            moments[name] = (mcv, var)
            q = proposal(var)
            v1, _ = per_cost(q, delta, mcv)
            vb, coef = per_cost(q, delta, mcv, best=True)
            rows.append({"measure": meas, "relevance": name, "ratio_lambda1": v1 / passive,
                         "ratio_best_lambda": vb / passive, "best_lambda": coef,
                         "r2": float(np.corrcoef(mcv, delta)[0, 1] ** 2),
                         "loglik_per_doc": log_likelihood(data, R)})  # fmt: skip
        # the pool model's control variate with the proposal from the true second moment
        mt, vt = moments["true P"]
        mp, _ = moments["pool"]
        q = proposal(vt + (mt - mp) ** 2)
        rows.append({"measure": meas, "relevance": "pool, proposal from E_true[(δ − m)²]",
                     "ratio_lambda1": per_cost(q, delta, mp)[0] / passive,
                     "ratio_best_lambda": per_cost(q, delta, mp, best=True)[0] / passive,
                     "best_lambda": per_cost(q, delta, mp, best=True)[1],
                     "r2": float(np.corrcoef(mp, delta)[0, 1] ** 2)})  # fmt: skip
    return rows


def monte_carlo(data, models, reps: int, done: list[dict], save) -> list[dict]:
    base = data.pool
    for meas in ("dcg", "err"):
        truth = data.true_value(meas, "a") - data.true_value(meas, "b")
        cells = [("passive", "pool", {"design": "passive", "estimator": "ipw"})] + [
            (f"optimal MA, {name}", name, {}) for name in models
        ]
        for label, rel, spec in cells:
            if any(r["measure"] == meas and r["design"] == label for r in done):
                continue
            pool = ranking.RankingPool(
                base.query_ids, base.doc_ids, base.positions, models[rel], base.costs
            )
            t = time.time()
            prop = ranking.proposal(pool, meas, models=("a", "b"), **spec)
            est = spec.get("estimator", "model_assisted")
            rng = np.random.default_rng(1)
            vals, cover = [], []
            for _ in range(reps):
                d = ranking.draw(pool, prop, BUDGET, rng=rng)
                r = ranking.test(pool, meas, d, data.grades, models=("a", "b"), estimator=est)
                lo, hi = r.confidence_interval(0.95)
                vals.append(r.estimate)
                cover.append(lo <= truth <= hi)
            sq = (np.asarray(vals) - truth) ** 2
            done.append({"measure": meas, "design": label, "reps": reps,
                         "mse": float(sq.mean()), "mse_mc_se": float(sq.std(ddof=1) / np.sqrt(reps)),
                         "bias": float(np.mean(vals) - truth),
                         "bias_mc_se": float(np.std(vals, ddof=1) / np.sqrt(reps)),
                         "coverage": float(np.mean(cover)),
                         "seconds": round(time.time() - t, 1)})  # fmt: skip
            print(f"{meas} {label:45s} mse={sq.mean():.4g} [{time.time() - t:.0f}s]", flush=True)
            save()
    for r in done:
        b = next(x for x in done if x["measure"] == r["measure"] and x["design"] == "passive")
        rel = np.hypot(r["mse_mc_se"] / r["mse"], b["mse_mc_se"] / b["mse"])
        r["mse_vs_passive"] = r["mse"] / b["mse"]
        r["mse_vs_passive_mc_se"] = 0.0 if r is b else float(r["mse_vs_passive"] * rel)
    return done


def report(meta, rows_a, rows_mc) -> str:
    lines = [
        "# Comparing two rankers that differ on every query: what a better relevance model gives",
        "",
        f"Pool of `benchmarks/ranking.py --changed 1` ({meta['queries']:,} queries, seed {SEED}), "
        f"budget {BUDGET:g} cost units; `{meta['command']}` ({meta['seconds']:.0f} s for the last "
        "invocation; Monte Carlo cells finished by an earlier one are kept, each with its own "
        "seconds in the JSON). The "
        "`refit` models are ordered logistics fitted on **every grade of the pool**: an upper "
        "bound for refitting such a model on the labels as they arrive.",
        "",
        "## Analytic (large-sample variance per unit of cost, relative to passive)",
        "",
        "| measure | relevance model | λ = 1 | best λ (λ) | R² of m for δ | log-lik./document |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows_a:
        ll = f"{r['loglik_per_doc']:.4f}" if "loglik_per_doc" in r else ""
        lines.append(
            f"| {r['measure'].upper()} | {r['relevance']} | {r['ratio_lambda1']:.3f} | "
            f"{r['ratio_best_lambda']:.3f} ({r['best_lambda']:.2f}) | {r['r2']:.3f} | {ll} |"
        )
    lines += [
        "",
        f"## Monte Carlo ({meta['reps']:,} runs per cell, the same seeds in every cell)",
        "",
        "| measure | design | MSE/passive (± MC se) | bias (± MC se) | 95% coverage |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows_mc:
        if "mse_vs_passive" not in r:
            continue
        lines.append(
            f"| {r['measure'].upper()} | {r['design']} | {r['mse_vs_passive']:.3f} "
            f"(± {r['mse_vs_passive_mc_se']:.3f}) | {r['bias']:+.3g} (± {r['bias_mc_se']:.2g}) "
            f"| {r['coverage']:.3f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="600 queries, 50 runs")
    args = ap.parse_args(argv)
    n = 600 if args.quick else 3000
    reps = 50 if args.quick else args.reps
    t0 = time.time()
    data = ranking.make_ranking_pool(n, changed=1.0, rng=SEED)
    models = relevance_models(data, n)
    rows_a = analytic(data, models)
    for r in rows_a:
        print(f"{r['measure']} {r['relevance']:45s} λ=1 {r['ratio_lambda1']:.3f} "
              f"best {r['ratio_best_lambda']:.3f} R² {r['r2']:.3f}", flush=True)  # fmt: skip
    suffix = "_quick" if args.quick else ""
    path = OUT / f"ranking_relevance_bound{suffix}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    rows_mc = [r for r in old.get("monte_carlo", []) if r.get("reps") == reps]
    meta = {"queries": n, "reps": reps, "budget": BUDGET, "seed": SEED,
            "command": "python benchmarks/ranking_relevance_bound.py"
            + (" --quick" if args.quick else f" --reps {reps}")}  # fmt: skip

    def save():
        meta["seconds"] = round(time.time() - t0, 1)
        OUT.mkdir(exist_ok=True)
        path.write_text(
            json.dumps({"meta": meta, "analytic": rows_a, "monte_carlo": rows_mc}, indent=1)
        )

    rows_mc = monte_carlo(data, models, reps, rows_mc, save)
    save()
    path.with_suffix(".md").write_text(report(meta, rows_a, rows_mc))
    print(f"done in {meta['seconds']} s")


if __name__ == "__main__":
    main()
