"""Labels saved for the ROC AUC at 1:1,000, by how strong the model is (issue 17).

Issue 17 asks that the optimal proposal need at least 5 times fewer labels than passive sampling
for the same AUC MSE at 1:1,000 skew. ``docs/threshold-free.md`` ("What it buys, and the bound")
shows that no importance-sampling design can do that for every model: the asymptotic labels
passive sampling needs per label of the best possible design,
``Σ p E_η ψ² / (Σ p sd_η ψ)²``, depends only on the two classes' score distributions, and it is
large only where the positives that carry the AUC's variance sit where the model's lift is high.
This study measures the saving at finite budgets, with the package's default design, on pools
from ``make_classification_pool`` at 1:1,000 (300,000 items, seed 17) that differ only in the
model's strength (``separation`` of the true log-odds, ``noise`` of the model's latent feature):
the generator's default model (2.5, 0.4), the ``strong`` one of ``threshold_free.py`` (6, 0.2)
and a ``sharp`` one (8, 0.2).

For each model:

- ``bound``: the asymptotic ratio of the best design with the best control variate
  (``threshold_free.label_ratios``, true ``η``), and ``optimal (asymptotic)``: the same ratio of
  the package's proposal, ``tf.rank_proposal(pool, "roc_auc")`` (the model's own probabilities as
  belief, ``positive_mix=0.2``);
- the MSE of ``bae.estimate(pool, "roc_auc", draws, labels)`` (= scikit-learn's
  ``roc_auc_score`` with ``sample_weight=`` the importance weights) over ``--reps`` independent
  samples, for the optimal proposal at 500, 1,000 and 2,000 labels and for passive sampling at
  1,000-20,000 labels, each with its Monte Carlo standard error (the SD of the squared errors over
  ``sqrt(reps)``) and the share of samples that drew no positive (the AUC undefined; the MSE is
  over the others);
- ``optimal, this pool's labels``: the same ratio at first order with the pool's realized labels,
  ``Σ p ψ(x, y_x)² / Σ (p²/q) ψ(x, y_x)²``, beside the first-order MSE ``Σ (p²/q) ψ² / n`` and
  ``needle``, the share of that sum its largest item carries: where one discordant positive
  carries it, the measured MSE over ``--reps`` samples misses the rare samples that draw it and
  understates the design's MSE (see the docs);
- ``labels passive needs``: the passive budget with the same MSE as the optimal design at ``n``,
  on the line ``log MSE = a − β log n`` fitted to the passive budgets (weighted by each MSE's
  relative Monte Carlo precision; ``β = 1`` is the ``1/n`` of a mean), and its ratio to ``n`` —
  the "times fewer labels" — with the range the optimal design's MSE ± 2 s.e. gives.

Usage: python benchmarks/threshold_free_labels.py [--reps 2000]
Writes benchmarks/results/threshold_free_labels.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.datasets import make_classification_pool

sys.path.insert(0, str(Path(__file__).parent))
from threshold_free import label_ratios

OUT = Path(__file__).parent / "results"
MODELS = {"default": (2.5, 0.4), "strong": (6.0, 0.2), "sharp": (8.0, 0.2)}
OPTIMAL = (500, 1000, 2000)
PASSIVE = (1000, 2500, 5000, 10000, 20000)


def mse_cell(pool, y, truth, proposal, n, reps, rng) -> dict:
    """MSE (over the samples that define the AUC), its Monte Carlo s.e., the undefined share."""
    err = np.full(reps, np.nan)
    for r in range(reps):
        draws = proposal.draw(n, rng=rng)
        est = bae.estimate(pool, "roc_auc", draws, y[draws.indices])
        err[r] = float(np.ravel(est.value)[0]) - truth
    ok = np.isfinite(err)
    sq = err[ok] ** 2
    return {
        "n": n,
        "mse": float(sq.mean()) if ok.any() else None,
        "mse_se": float(sq.std(ddof=1) / np.sqrt(sq.size)) if sq.size > 1 else None,
        "bias": float(err[ok].mean()) if ok.any() else None,
        "undefined": float(1.0 - ok.mean()),
    }


def passive_fit(passive: list[dict]) -> tuple[float, float]:
    """``(a, β)`` of ``log MSE = a − β log n`` fitted to the passive budgets where passive
    sampling defined the AUC in at least 99 % of the samples, each point weighted by the inverse
    square of its MSE's relative Monte Carlo s.e. (so one heavy-tailed cell does not pull the
    line)."""
    pts = [c for c in passive if c["mse"] and c["mse_se"] and c["undefined"] <= 0.01]
    if len(pts) < 2:
        return float("nan"), float("nan")
    x = np.log([c["n"] for c in pts])
    z = np.log([c["mse"] for c in pts])
    w = np.array([(c["mse"] / c["mse_se"]) ** 2 for c in pts])
    X = np.stack([np.ones_like(x), -x], axis=1)
    a, beta = np.linalg.solve((X * w[:, None]).T @ X, (X * w[:, None]).T @ z)
    return float(a), float(beta)


def passive_equivalent(mse: float, fit: tuple[float, float]) -> float:
    """The passive budget whose fitted MSE (:func:`passive_fit`) equals ``mse``."""
    a, beta = fit
    if not (mse and mse > 0 and np.isfinite(beta) and beta > 0):
        return float("nan")
    return float(np.exp((a - np.log(mse)) / beta))


def run(reps: int, seed: int) -> list[dict]:
    rows = []
    for k, (name, (sep, noise)) in enumerate(MODELS.items()):
        rng = np.random.default_rng([seed, k])
        synth = make_classification_pool(300_000, 0.001, separation=sep, noise=noise, rng=17)
        pool, y = synth.pool, synth.labels
        s = pool.scores["model"]
        # the pool's AUC and, to first order with its own labels, V(q) = Σ p²/q ψ(x, y_x)²
        # (passive sampling: Σ p ψ²)
        auc, e1, e0 = tf.influence("roc_auc", s, pool.p * y, pool.p * (1 - y))
        truth = float(auc)
        optimal = tf.rank_proposal(pool, "roc_auc")
        ratios = label_ratios(pool, "roc_auc", synth.truth, {"optimal": optimal.q})
        psi2 = np.where(y == 1, e1, e0) ** 2
        terms = pool.p**2 / optimal.q * psi2
        v_opt, v_pas = float(terms.sum()), float(pool.p @ psi2)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # undefined AUCs (no positive drawn) are counted
            opt = [mse_cell(pool, y, truth, optimal, n, reps, rng) for n in OPTIMAL]
            passive = bae.passive_proposal(pool)
            pas = [mse_cell(pool, y, truth, passive, n, reps, rng) for n in PASSIVE]
        fit = passive_fit(pas)
        for c in opt:
            c["first_order_mse"] = v_opt / c["n"]
            c["passive_equivalent"] = passive_equivalent(c["mse"], fit)
            c["times_fewer"] = c["passive_equivalent"] / c["n"]
            # the range from the optimal design's MSE + 2 and − 2 Monte Carlo s.e.
            worse, better = (passive_equivalent(c["mse"] + t * c["mse_se"], fit) for t in (2, -2))
            c["times_fewer_range"] = [worse / c["n"], better / c["n"]]
        rows.append(
            {
                "model": name,
                "separation": sep,
                "noise": noise,
                "positives": int(y.sum()),
                "auc": truth,
                "bound": ratios["best_control_variate"],
                "bound_plain": ratios["best_plain"],
                "optimal_asymptotic": ratios["optimal"],
                "optimal_realized": v_pas / v_opt,
                "needle": float(terms.max() / v_opt),
                "passive_fit": {"log_mse_at_n1": fit[0], "beta": fit[1]},
                "optimal": opt,
                "passive": pas,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(name, f"{rows[-1]['seconds']:.0f}s", [round(c["times_fewer"], 1) for c in opt])
    return rows


def _r(rng) -> str:
    lo, hi = rng
    hi_s = "∞" if not np.isfinite(hi) else f"{hi:.1f}"
    return f"{lo:.1f}-{hi_s}"


def _f(x, digits=2):
    return "—" if x is None or not np.isfinite(x) else f"{x:.{digits}e}"


def write_md(res: dict, path: Path) -> None:
    lines = [
        "# Labels saved for the ROC AUC at 1:1,000, by model strength (issue 17)",
        "",
        f"`python benchmarks/threshold_free_labels.py --reps {res['reps']}` (seed {res['seed']}, "
        f"{res['seconds'] / 60:.1f} min, code {res['code']}). Pools: "
        "`make_classification_pool(300_000, 0.001, separation=b, noise=σ, rng=17)`. "
        'Estimate: `bae.estimate(pool, "roc_auc", draws, labels)`; optimal design: '
        '`tf.rank_proposal(pool, "roc_auc")`. MSE over the samples that drew a positive, '
        "± its Monte Carlo s.e.; `undef`: share of samples with no positive. `bound`: asymptotic "
        "labels passive needs per label of the best design with the best control variate (true "
        "η); `optimal (asymptotic)`: the same for the package's proposal; `optimal, this pool's "
        "labels`: `Σ p ψ² / Σ (p²/q) ψ²` with `ψ = ψ(x, y_x)` at the pool's realized labels (the "
        "first-order MSE ratio of passive sampling to the design at equal budgets on this pool), "
        "and `needle` the share of `Σ (p²/q) ψ²` that its largest item carries; `first-order "
        "MSE`: `Σ (p²/q) ψ² / n`. `passive needs`: the "
        "passive budget with the optimal design's MSE on the line `log MSE = a − β log n` fitted "
        "to the passive budgets with at most 1 % undefined samples (weighted by the inverse "
        "square of each MSE's relative s.e.; β below), and `× fewer` its ratio to the optimal "
        "design's budget, in brackets with the optimal design's MSE ± 2 s.e.",
        "",
        "| model (b, σ) | positives | AUC | bound | optimal (asymptotic) | optimal, this pool's "
        "labels | needle | optimal n | first-order MSE | MSE ± s.e. | passive needs | "
        "× fewer (± 2 s.e.) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for r in res["rows"]:
        for c in r["optimal"]:
            lines.append(
                f"| {r['model']} ({r['separation']:g}, {r['noise']:g}) | {r['positives']} | "
                f"{r['auc']:.5f} | {r['bound']:.2f} | {r['optimal_asymptotic']:.2f} | "
                f"{r['optimal_realized']:.2f} | {r['needle']:.2f} | {c['n']:,} | "
                f"{_f(c['first_order_mse'])} | {_f(c['mse'])} ± {_f(c['mse_se'], 1)} | "
                f"{c['passive_equivalent']:,.0f} | "
                f"{c['times_fewer']:.1f} ({_r(c['times_fewer_range'])}) |"
            )
    lines += [
        "",
        "Passive sampling (fitted β: "
        + ", ".join(f"{r['model']} {r['passive_fit']['beta']:.2f}" for r in res["rows"])
        + "):",
        "",
        "| model | n | undef | MSE ± s.e. | bias |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for r in res["rows"]:
        for c in r["passive"]:
            lines.append(
                f"| {r['model']} | {c['n']:,} | {c['undefined']:.3f} | {_f(c['mse'])} ± "
                f"{_f(c['mse_se'], 1)} | {_f(c['bias'], 1)} |"
            )
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--code", default="", help="the commit of the code, recorded in the table")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(args.reps, args.seed)
    res = {
        "reps": args.reps,
        "seed": args.seed,
        "code": args.code,
        "seconds": time.perf_counter() - t0,
        "rows": rows,
    }
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    (out / "threshold_free_labels.json").write_text(json.dumps(res, indent=1))
    write_md(res, out / "threshold_free_labels.md")


if __name__ == "__main__":
    main()
