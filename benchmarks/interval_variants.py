"""Why the default F1 intervals miss on the real pools, and what other variances would do (issue 12).

Each repetition is one run of the default, ``ActiveEvaluator(pool, "f1", rng=seed)`` through
``ev.run(labeler, budget=B)`` for B = 500, 1,000, 2,000, 5,000 (the ``default-run`` rows of
``real_pools.py``; the estimates are the same, seed for seed). On the *same* draws it records the
default estimate and interval and three alternatives:

- ``guard``: the same estimate, variance ``max(martingale, v_g)`` with the label-variance guard
  ``v_g = Σ_j u_j² π̂_j (1 − π̂_j) (Dg Δℓ_j)²``, ``u_j = a_j w_j / Σ a``, ``Δℓ_j`` the change of
  draw ``j``'s loss vector between its two labels and ``π̂`` the Bayesian calibration of the
  scores fitted to the labeled items (``posterior.calibration_map``, the belief of the guarded
  variance of the threshold-free measures): the design variance the estimate would have if
  every drawn label were a draw from ``π̂`` (Rao-Blackwellized over the labels).
- ``equal``: the difference estimate with every draw weighing the same (``draw_cov=None``)
  instead of the inverse of its stage belief's predicted variance (Cochran (1977), Sec. 5A.13).
- ``sqrt``: stage weights proportional to the inverse square root of the predicted variance
  (half-way between the two).

The interval is ``Estimate.confidence_interval(0.95)`` (modified Wilson for F1) in every case.
The guard and the stage weights read the evaluator's recorded draws through its private arrays:
this is a diagnostic, not an API.

Usage::

    python benchmarks/interval_variants.py --reps 100 --workers 2
    python benchmarks/interval_variants.py --trace   # the two runs docs/adaptive.md follows

writes ``results/interval_variants.jsonl`` (one line per repetition; a rerun skips the seeds
already there) and ``results/interval_variants.md``; ``--trace`` writes
``results/interval_variants_traces.md``: for two missed runs (``febrl3_given_name_lr`` seed 5,
``febrl4_sub100_state_svm`` seed 16), at each budget, the estimate's error and standard error,
the labels among the predicted negatives beyond rank 1,000 (by score) and the matches there,
drawn or not, the current belief's expected matches among them still unlabeled, and how many of
the pool's matches and false negatives are labeled (seconds).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import peer_adapter
import real_pools_data

import bayes_activeeval as bae
from bayes_activeeval.estimators import difference_estimate
from bayes_activeeval.posterior.calibration import calibration_map

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BUDGETS = [500, 1000, 2000, 5000]
POOLS = [
    "febrl3_given_name_lr",
    "febrl4_sub400_initial_svm",
    "febrl4_sub100_state_svm",
    "febrl4_sub30_full_gbt",
    "diamonds_ideal_svm",
    "tweets_web_svm",
]
VARIANTS = ("default", "guard", "equal", "sqrt")
_POOLS: dict[str, dict] = {}


def _interval(est) -> list[float]:
    ci = est.confidence_interval(0.95)
    return [float(est.value), float(est.cov[0, 0]), float(ci[0]), float(ci[1])]


def variants(ev, est) -> dict[str, list[float]]:
    """The four variants at the evaluator's current labels: [value, variance, lo, hi] each."""
    import dataclasses

    idx, w, L, _ = ev._arrays()
    A = ev._ma_arrays()
    d = L.shape[1]
    m = ev.measure
    J = m.jacobian(est.risk)
    out = {"default": _interval(est)}
    # the label-variance guard under the calibrated belief
    views = ev._views(idx)
    pos = ev.pool.pos
    delta = (
        m.loss(np.full(idx.size, pos), views) - m.loss(np.full(idx.size, 1 - pos), views)
    ) @ J.T
    known = np.flatnonzero(ev._label >= 0)
    pi = calibration_map(ev.pool, ev.pool.models_of(m, ev.model), known, ev._label[known])[idx]
    a = est.details["stage_weights"]
    u = a * w / a.sum()
    v_g = float(np.sum(u**2 * pi * (1 - pi) * delta[:, 0] ** 2))
    guarded = dataclasses.replace(est, cov=np.array([[max(float(est.cov[0, 0]), v_g)]]))
    out["guard"] = _interval(guarded)
    out["v_guard"] = v_g
    # other stage weights on the same draws
    mm, mv = ev._model_expectations(idx)
    V = A["V"].reshape(-1, d, d)
    pred = np.einsum("od,nde,oe->n", J, V, J)
    for name, dc in (
        ("equal", None),
        ("sqrt", V / np.sqrt(np.maximum(pred, 1e-300))[:, None, None]),
    ):
        e = difference_estimate(
            L, w, A["m"], A["M"], m, draw_cov=dc, n_labels=ev._n_labels,
            model_expected=mm, model_value=mv,
        )  # fmt: skip
        out[name] = _interval(e)
    return out


def run_default(task: tuple[str, int], row=None) -> dict:
    """One run of the default through ``ev.run`` to each budget: ``{"pool", "seed", "budgets",
    "rows", "secs"}`` with ``rows[j] = row(ev, est)`` at budget ``j`` (default: the variants)."""
    pool_name, seed = task
    if pool_name not in _POOLS:
        _POOLS[pool_name] = real_pools_data.load_pool(pool_name)
    d = _POOLS[pool_name]
    pool = peer_adapter.make_pool(d)
    labeler = peer_adapter._labeler(d)
    ev = bae.ActiveEvaluator(pool, "f1", rng=int(seed))
    rec = {"pool": pool_name, "seed": int(seed), "budgets": BUDGETS, "rows": []}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for B in BUDGETS:
            est = ev.run(labeler, budget=B, progress=False)
            rec["rows"].append((row or variants)(ev, est))
    rec["secs"] = time.perf_counter() - t0
    return rec


def run_one(task: tuple[str, int]) -> dict:
    return run_default(task)


def report(recs: list[dict]) -> str:
    truth = real_pools_data.true_f1s(POOLS)
    lines = [
        "# Interval variants of the default on the real pools (`benchmarks/interval_variants.py`)",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')}. F1, the default through `ev.run`, "
        "deterministic oracle; every variant on the same draws (the module docstring defines "
        "them). Coverage of the 95 % interval ± its Monte Carlo s.e.; width the mean width; "
        "`missed: SE` the median standard error of the default's missed runs against its "
        "covered ones, and where the missed runs' estimates sit (`+` above the truth).",
        "",
        "| pool | labels | n | "
        + " | ".join(f"{v}: MSE, coverage, width" for v in VARIANTS)
        + " | default missed: n (above), SE missed / covered |",
        "| --- | ---: | ---: | " + " | ".join("---" for _ in VARIANTS) + " | --- |",
    ]
    for p in POOLS:
        R = [r for r in recs if r["pool"] == p]
        if not R:
            continue
        t = truth[p]
        for j, B in enumerate(BUDGETS):
            cells = []
            for v in VARIANTS:
                X = np.array([r["rows"][j][v] for r in R], dtype=float)
                e, lo, hi = X[:, 0], X[:, 2], X[:, 3]
                cells.append(
                    f"{np.mean((e - t) ** 2):.2e}, {real_pools_data.coverage_cell(lo, hi, t)}"
                )
            X = np.array([r["rows"][j]["default"] for r in R], dtype=float)
            cov = (X[:, 2] <= t) & (t <= X[:, 3])
            above = int(np.sum(X[:, 2] > t))
            sd = np.sqrt(X[:, 1])
            miss = f"{int((~cov).sum())} ({above})"
            if (~cov).any():
                miss += f", {np.median(sd[~cov]):.4f} / {np.median(sd[cov]):.4f}"
            lines.append(f"| `{p}` | {B:,} | {len(R)} | " + " | ".join(cells) + f" | {miss} |")
    return "\n".join(lines) + "\n"


TRACES = (("febrl3_given_name_lr", 5), ("febrl4_sub100_state_svm", 16))


def trace(pool_name: str, seed: int) -> list[str]:
    """Table rows for one run of the default: see the module docstring (``--trace``)."""
    d = real_pools_data.load_pool(pool_name)
    y, f, s = d["labels"], d["preds"], d["scores"]
    truth = real_pools_data.f1_of(d)
    neg = np.flatnonzero(f == 0)
    tail = neg[np.argsort(-s[neg], kind="stable")][1000:]
    fn = np.flatnonzero((y == 1) & (f == 0))
    ev = bae.ActiveEvaluator(peer_adapter.make_pool(d), "f1", rng=int(seed))
    labeler = peer_adapter._labeler(d)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for B in BUDGETS:
            est = ev.run(labeler, budget=B, progress=False)
            known = ev.known
            pi = ev.oracle.belief().probs[:, ev.pool.pos]
            rows.append(
                f"| `{pool_name}` | {seed} | {B:,} | {float(est.value) - truth:+.4f} | "
                f"{float(est.stderrs[0]):.4f} | {int(known[tail].sum()):,} of {tail.size:,} | "
                f"{int((known[tail] & (y[tail] == 1)).sum())} of {int(y[tail].sum())} | "
                f"{float(pi[tail][~known[tail]].sum()):.1f} | "
                f"{int((known & (y == 1)).sum())} of {int(y.sum())} | "
                f"{int(known[fn].sum())} of {fn.size} |"
            )
    return rows


def write_traces() -> None:
    lines = [
        "# Two missed runs of the default, followed (`benchmarks/interval_variants.py --trace`)",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S')}. The default through `ev.run`; tail = the "
        "predicted negatives beyond the 1,000 highest-scored; belief = the oracle's belief "
        "after the labels (its expected matches among the tail's unlabeled items).",
        "",
        "| pool | seed | labels | error | SE | tail labeled | tail matches labeled | "
        "belief: expected tail matches unlabeled | matches labeled | false negatives labeled |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | --- |",
    ]
    for pool_name, seed in TRACES:
        lines += trace(pool_name, seed)
    (RESULTS / "interval_variants_traces.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--out", default=str(RESULTS / "interval_variants.jsonl"))
    ap.add_argument("--report", action="store_true", help="only write the report")
    ap.add_argument("--trace", action="store_true", help="only follow the two missed runs")
    args = ap.parse_args()
    if args.trace:
        write_traces()
        return
    out = Path(args.out)
    reps = 0 if args.report else args.reps
    recs = real_pools_data.run_pool_seeds(run_one, out, args.pools.split(","), reps, args.workers)
    (RESULTS / "interval_variants.md").write_text(report(recs))


if __name__ == "__main__":
    main()
