"""How low can the MSE of an unbiased, score-based design go on the real pools? (issue 12)

A design that sees only the model's scores can, at best, stratify the pool by score and give each
stratum the Neyman allocation computed from the *true* within-stratum variances of the
linearized measure. For F1, ``G = R1 / R2`` with ``ℓ = (y f, (y + f)/2)``, the linearized
per-item value is ``z = Dg(R) ℓ = y f / R2 − R1 (y + f) / (2 R2²)`` and the stratified
estimator sampled without replacement has variance (Cochran (1977), Eq. 5.6 with Thm. 5.10 for
the allocation, capped at the stratum sizes)

    V_K(n) = Σ_h (N_h / N)² (1 − n_h / N_h) S_h² / n_h,    n_h ∝ N_h S_h,  n_h <= N_h.

No practical design attains it: it needs the strata variances ``S_h²``, which depend on the labels.
It is the variance such a design would have *if the belief were exact at the stratum level*,
and it separates two questions: whether a target is reachable by any unbiased estimator that only
knows the scores, and how far a method is from that. ``K`` ranges over 16-1,024 score-quantile
strata (``K <= n / 2``: at least two labels per stratum on average); with finer strata the oracle
would locate individual positives, which no score-based design can do, so the smallest ``V_K`` over
this range is reported as the floor, and its dependence on ``K`` beside it.

**The bulk bound.** The floor above lets the strata locate the positives the model scores deep
among its predicted negatives. Where the scores say nothing about *which* of the deep items they
are, no design can. Let the bulk ``B`` be the predicted negatives below the ``near = 1,000``
highest-scored ones and the predicted positives above the ``near`` lowest-scored ones (each side
one stratum ``B_s``), and *assume* the labels there follow the model that says nothing about where
the errors are: independent, each item of ``B_s`` an error with probability ``k_s / N_s`` (``k_s``
its number of errors), so the linearized value ``z`` has variance ``σ_s²`` on every item of the
side. For a design-unbiased estimator of a total whose inclusion probabilities ``π_i`` are fixed
in advance (they do not depend on the labels), the anticipated variance — the design variance
averaged over that model — is at least ``Σ_i (1/π_i − 1) σ_i²`` (the Godambe-Joshi lower bound;
Godambe & Joshi (1965), "Admissibility and Bayes estimation in sampling finite populations I",
Ann. Math. Statist. 36), and with ``n_s = Σ_{B_s} π_i`` labels in ``B_s`` the sum
``σ_s² Σ_{B_s} 1/π_i`` is smallest at equal ``π_i = n_s / N_s`` (Cauchy-Schwarz). For F1, a ratio,
this bounds the *first-order* (linearized) variance ``Dg(R)·R̂`` of an estimate built from
design-unbiased estimates of its totals, on the scale of the measure:

    V_B(n) = Σ_s (N_s / N)² (1 − n_s / N_s) σ_s² / n_s,    n_s ∝ N_s σ_s,  Σ_s n_s = n,

with ``σ_s²`` the population variance of ``z`` within ``B_s`` (the model's variance). It gives the
bulk every label, so it is a lower bound for a design that must also label the items near the
threshold. What it is not:

- A bound on the F1 estimate itself: the ratio's second-order terms can take it below. The table
  therefore also gives the exact MSE of the F1 ratio estimate of the design that attains ``V_B`` —
  everything outside the bulk known, each side of the bulk sampled by simple random sampling with
  the Neyman sizes (hypergeometric numbers of errors found; :func:`srs_bulk_mse`).
- Proved for adaptive designs: it holds stage by stage for stages of sizes and combination
  weights fixed in advance; where a design chooses how many labels go to the bulk, or how to weigh
  the stages, from the labels it has seen (``ev.run``, Ours-8) it is a heuristic.
- Checked: the exchangeable model is an assumption. The table gives the bulk errors' score
  percentiles within their side (0.5 where the scores carry no information; near 1 where the model
  still ranks them at the top of the bulk); with a few errors that check has no power.

Beside it, ``bias²`` of the design that never samples the bulk (its errors counted as correct
predictions): what a method that ignores the bulk pays instead.

Compared with: the peers (``results/peers.json``) and this package's default
(``results/real_pools.json``), both measured by Monte Carlo. A biased method (one that never finds
the positives the model scores far below its threshold) can sit below the floor: its MSE is then
mostly squared bias.

Usage::

    python benchmarks/score_design_floor.py      # writes results/score_design_floor.{json,md}
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import real_pools  # noqa: E402
import real_pools_data  # noqa: E402

POOLS = HERE / "pools"
RESULTS = HERE / "results"
BUDGETS = (500, 1000, 2000)
BULK_BUDGETS = (500, 1000, 2000, 5000)
#: The bulk starts this many items from the threshold on each side (as ``real_pools_data.error_ranks``).
NEAR = 1000
STRATA = (16, 64, 256, 1024)


def neyman_allocation(sizes: np.ndarray, sds: np.ndarray, n: int) -> np.ndarray:
    """Neyman allocation ``n_h ∝ N_h S_h`` of ``n`` labels, capped at ``N_h`` (Cochran (1977),
    Sec. 5.5: strata that would get more than their size are taken whole and the rest
    re-allocated)."""
    nb = np.zeros(sizes.size)
    free = np.ones(sizes.size, dtype=bool)
    remaining = float(n)
    for _ in range(sizes.size + 1):
        w = np.where(free, sizes * sds, 0.0)
        if w.sum() <= 0:
            break
        alloc = remaining * w / w.sum()
        over = free & (alloc >= sizes)
        if not over.any():
            nb[free] = alloc[free]
            break
        nb[over] = sizes[over]
        free &= ~over
        remaining = n - nb[~free].sum()
    return nb


def stratified_floor(scores: np.ndarray, z: np.ndarray, n: int, k: int) -> float:
    """``V_K(n)`` for ``k`` score-quantile strata (ties stay in one stratum)."""
    cuts = np.unique(np.quantile(scores, np.linspace(0, 1, k + 1)[1:-1], method="inverted_cdf"))
    h = np.searchsorted(cuts, scores, side="right")
    H = int(h.max()) + 1
    N = scores.size
    sizes = np.bincount(h, minlength=H).astype(float)
    means = np.bincount(h, z, minlength=H) / np.maximum(sizes, 1)
    s2 = np.bincount(h, (z - means[h]) ** 2, minlength=H) / np.maximum(sizes - 1, 1)
    return neyman_variance(sizes, s2, n, N)


def neyman_variance(sizes: np.ndarray, s2: np.ndarray, n: int, N: int) -> float:
    """``Σ_h (N_h/N)² (1 − n_h/N_h) S_h²/n_h`` at the Neyman allocation of ``n`` labels
    (Cochran (1977), Eq. 5.6); strata with no label or no variance add nothing."""
    nb = neyman_allocation(sizes, np.sqrt(s2), n)
    ok = (nb > 0) & (s2 > 0)
    return float(np.sum((sizes[ok] / N) ** 2 * (1 - nb[ok] / sizes[ok]) * s2[ok] / nb[ok]))


def bulk_sides(scores: np.ndarray, preds: np.ndarray, near: int = NEAR) -> list[np.ndarray]:
    """The bulk's two sides (pool indices): the predicted negatives below the ``near``
    highest-scored ones and the predicted positives above the ``near`` lowest-scored ones
    (ties broken by position, as ``real_pools_data.error_ranks``)."""
    neg = np.flatnonzero(preds == 0)
    pos = np.flatnonzero(preds == 1)
    neg = neg[np.argsort(-scores[neg], kind="stable")][near:]
    pos = pos[np.argsort(scores[pos], kind="stable")][near:]
    return [side for side in (neg, pos) if side.size > 1]


def bulk_bound(sides: list[np.ndarray], z: np.ndarray, n: int) -> float:
    """``V_B(n)``: the Godambe-Joshi bound with exchangeable labels within each side of the bulk
    (``σ_s²`` the population variance of ``z`` there) and all ``n`` labels given to the bulk
    (Neyman allocation over the sides, capped)."""
    sizes, s2 = _side_moments(sides, z)
    return neyman_variance(sizes, s2, n, z.size)


def _side_moments(sides: list[np.ndarray], z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bulk sides' sizes and population variances of ``z`` (the model's ``σ_s²``)."""
    sizes = np.array([side.size for side in sides], dtype=float)
    return sizes, np.array([np.var(z[side]) for side in sides])


def error_percentiles(
    sides: list[np.ndarray], labels: np.ndarray, preds: np.ndarray, scores: np.ndarray
) -> np.ndarray:
    """The percentile, within its side of the bulk, of each bulk error's score oriented towards
    the threshold (1 = the side's item closest to the threshold, 0 = the farthest; mid-ranks for
    ties)."""
    from scipy.stats import rankdata

    out = []
    for side in sides:
        toward = scores[side] if preds[side[0]] == 0 else -scores[side]
        pct = (rankdata(toward) - 0.5) / side.size
        out.append(pct[labels[side] != preds[side]])
    return np.concatenate(out) if out else np.empty(0)


def srs_bulk_mse(
    sides: list[np.ndarray], labels: np.ndarray, preds: np.ndarray, z: np.ndarray, n: int
) -> float:
    """Exact MSE of the F1 ratio estimate when every label outside the bulk is known and each side
    ``s`` of the bulk is sampled by simple random sampling of ``n_s`` items (the Neyman sizes of
    :func:`bulk_bound`, rounded): the number of errors found on a side is hypergeometric and
    ``N_s x_s / n_s`` estimates its errors (false negatives on the predicted-negative side, false
    positives on the other)."""
    from scipy.stats import hypergeom

    sizes, s2 = _side_moments(sides, z)
    alloc = np.round(neyman_allocation(sizes, np.sqrt(s2), n)).astype(int)
    y, f = labels.astype(bool), preds.astype(bool)
    outside = np.ones(labels.size, dtype=bool)
    # per kind of error (false negatives, false positives): the estimated counts on its side of
    # the bulk and their probabilities, or no error with probability 1 where there is no side
    est = {False: (np.zeros(1), np.ones(1)), True: (np.zeros(1), np.ones(1))}
    for side, m in zip(sides, alloc, strict=True):
        outside[side] = False
        k = int(np.sum(y[side] != f[side]))
        m = int(min(max(m, 1), side.size))
        x = np.arange(min(k, m) + 1)
        est[bool(f[side[0]])] = (side.size * x / m, hypergeom.pmf(x, side.size, k, m))
    (fn_b, p_fn), (fp_b, p_fp) = est[False], est[True]
    tp = np.sum(y & f & outside) + np.sum(f & ~outside) - fp_b[None, :]  # bulk predicted positives
    fp = np.sum(~y & f & outside) + fp_b[None, :]
    fn = np.sum(y & ~f & outside) + fn_b[:, None]
    f1 = 2 * tp / (2 * tp + fp + fn)
    true = real_pools_data.f1_of({"labels": labels, "preds": preds})
    return float(p_fn @ (f1 - true) ** 2 @ p_fp)


def ignore_bulk_bias(sides: list[np.ndarray], labels: np.ndarray, preds: np.ndarray) -> float:
    """F1 with every bulk label taken to be the prediction, minus the true F1: the bias of a
    design that never samples the bulk."""
    y = labels.copy()
    for side in sides:
        y[side] = preds[side]
    f1 = real_pools_data.f1_of
    return f1({"labels": y, "preds": preds}) - f1({"labels": labels, "preds": preds})


def f1_linearized(labels: np.ndarray, preds: np.ndarray) -> tuple[float, np.ndarray]:
    """True F1 and the per-item ``Dg(R) ℓ`` at the true ``R``."""
    y = labels.astype(float)
    f = preds.astype(float)
    r1 = float(np.mean(y * f))
    r2 = float(np.mean((y + f) / 2))
    return r1 / r2, y * f / r2 - r1 / r2**2 * (y + f) / 2


def _few(pct: np.ndarray, most: int = 5) -> dict:
    """The errors' percentiles in the JSON: their mean and count, and each one if there are at
    most ``most``."""
    out = {"mean": float(pct.mean()) if pct.size else None, "count": int(pct.size)}
    if 0 < pct.size <= most:
        out["each"] = pct.tolist()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(RESULTS / "score_design_floor.json"))
    args = ap.parse_args()
    peers = json.loads((RESULTS / "peers.json").read_text())
    ours = json.loads((RESULTS / "real_pools.json").read_text())["results"]
    best_peer = real_pools.best_peers(RESULTS / "peers.json", "f1")  # real_pools.md's rule
    ours8 = real_pools.peer_mse(RESULTS / "peers.json", "f1", "Ours-8")
    out: dict = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "strata": list(STRATA)}}
    rows = []
    for name in sorted(peers["results"]):
        d = np.load(POOLS / f"{name}.npz")
        F, z = f1_linearized(d["labels"], d["preds"])
        pr = peers["results"][name]["f1"]
        budgets = peers["meta"]["budgets"]
        out[name] = {}
        for n in BUDGETS:
            by_k = {k: stratified_floor(d["scores"], z, n, k) for k in STRATA if k <= n // 2}
            floor = min(by_k.values())
            j = budgets.index(n)
            rec = {"true": F, "floor": floor, "floor_by_strata": by_k}
            for meth in ("IS", "OASIS", "Ours-8"):
                e = np.asarray(pr[meth]["estimates"], dtype=float)[:, j]
                e = e[np.isfinite(e)]
                rec[meth] = {
                    "mse": float(np.mean((e - F) ** 2)),
                    "bias": float(np.mean(e) - F),
                    "n": int(e.size),
                }
            dflt = ours[name]["default"]["budgets"].get(str(n))
            if dflt is not None:
                rec["default"] = {"mse": dflt["mse"], "bias": dflt["bias"], "n": dflt["n"]}
            out[name][str(n)] = rec
            rows.append((name, n, rec))
        sides = bulk_sides(d["scores"], d["preds"])
        errors = [int(np.sum(d["labels"][side] != d["preds"][side])) for side in sides]
        bulk = {
            "sizes": [int(side.size) for side in sides],
            "errors": errors,
            "error_percentiles": _few(
                error_percentiles(sides, d["labels"], d["preds"], d["scores"])
            ),
            "ignore_bias": ignore_bulk_bias(sides, d["labels"], d["preds"]),
            "budgets": {},
        }
        run = ours[name].get("default-run", {}).get("budgets", {})
        for n in BULK_BUDGETS:
            dr = run.get(str(n), {})
            best, best_mse, best_n = best_peer[name][str(n)]
            o8_mse, o8_n = ours8[name][str(n)]
            bulk["budgets"][str(n)] = {
                "bound": bulk_bound(sides, z, n),
                "srs_mse": srs_bulk_mse(sides, d["labels"], d["preds"], z, n),
                "best_peer": {"method": best, "mse": best_mse, "n": best_n},
                "ours8": {"mse": o8_mse, "n": o8_n},
                "default_run": {"mse": dr.get("mse"), "mse_se": dr.get("mse_se"), "n": dr.get("n")},
            }
        out[name]["bulk"] = bulk
    Path(args.out).write_text(json.dumps(out, indent=1))
    lines = [
        "# The floor of unbiased score-based designs on the real pools (F1)",
        "",
        f"Generated {out['meta']['date']} by `benchmarks/score_design_floor.py`. Floor = the "
        "variance of a stratified sample with Neyman allocation from the *true* stratum "
        "variances (an oracle no practical method has), minimized over 16-1,024 score-quantile "
        "strata with at least two labels per stratum on average; MSE of the peers "
        "(`peers.json`) and of the default (`real_pools.json`) by Monte Carlo, n = runs; "
        "bias² = squared mean error.",
        "",
        "| pool | labels | floor | floor by strata (16 / 64 / 256 / 1,024) | Ours-8: MSE "
        "(bias², n) | default: MSE (bias², n) | 0.7 × best peer / floor |",
        "| --- | ---: | ---: | --- | --- | --- | ---: |",
    ]
    for name, n, rec in rows:
        best = min(rec[m]["mse"] for m in ("IS", "OASIS", "Ours-8"))
        byk = " / ".join(f"{v:.1e}" for v in rec["floor_by_strata"].values())
        o8 = rec["Ours-8"]
        dd = rec.get("default")
        dtxt = f"{dd['mse']:.2e} ({dd['bias'] ** 2:.1e}, {dd['n']})" if dd else "—"
        ratio = 0.7 * best / rec["floor"] if rec["floor"] > 0 else float("inf")
        lines.append(
            f"| `{name}` | {n:,} | {rec['floor']:.2e} | {byk} | {o8['mse']:.2e} "
            f"({o8['bias'] ** 2:.1e}, {o8['n']}) | {dtxt} | {ratio:.2f} |"
        )
    lines += [
        "",
        "Reading. The floor is informative where the label noise at a given score is spread "
        "over many items, so that it hardly moves with the number of strata (the balanced "
        "pool): there, where the last column is below 1, an MSE of 0.7 × the best peer is "
        "below what any unbiased design that knows only the scores could reach even with the "
        "true stratum variances. On the skewed pools the floor falls towards 0 as the strata "
        "get finer, because the oracle strata know which few strata hold the positives the "
        "model scores below its threshold; a practical design must find them by sampling, so "
        "there the floor is no bound, only a measure of how much a perfect stratum-level "
        "belief would save. The bias² column shows how much of each MSE is systematic: "
        "Ours-8's MSE on the record-linkage pools is largely the squared bias of missing "
        "positives scored far below the threshold.",
    ]
    lines += [
        "",
        "## The bulk bound",
        "",
        f"The bulk: the predicted negatives below the {NEAR:,} highest-scored ones and the "
        f"predicted positives above the {NEAR:,} lowest-scored ones. Bound = `V_B(n)`, the "
        "Godambe-Joshi lower bound on the first-order (linearized) variance of an F1 estimate "
        "built from design-unbiased estimates of its totals, under the *assumption* that the "
        "scores say nothing about where in the bulk its errors are, for a design fixed in "
        "advance, with every label given to the bulk (module docstring). SRS MSE = the exact MSE "
        "of the F1 ratio estimate of the design that attains it (everything outside the bulk "
        "known, simple random samples of the bulk; second-order terms can take it below the "
        "bound). Percentiles = the score percentiles of the bulk's errors within their side, "
        "oriented towards the threshold (0.5: the scores carry no information about them; their "
        "mean, and each one where there are at most five). Ignore-bulk bias² = the squared bias of "
        "a design that never samples the bulk. Best peer: the lowest MSE of Passive, IS, OASIS and "
        "Ours-8 "
        "in `peers.json` with at least 5 runs and no undefined estimate, as in `real_pools.md` "
        "(method, runs); default: `ev.run` (`default-run` in `real_pools.json`), "
        "MSE ± its Monte Carlo standard error over the bound.",
        "",
        "| pool | bulk items (neg / pos) | bulk errors (neg / pos) | percentiles | ignore-bulk "
        "bias² | labels | bound | SRS MSE | best peer (method, n) | Ours-8 (n) | 0.7 × best "
        "peer / bound | default / bound |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for name in sorted(peers["results"]):
        b = out[name]["bulk"]
        pct = b["error_percentiles"]
        ptxt = "—" if pct["mean"] is None else f"{pct['mean']:.2f}"
        if "each" in pct:
            ptxt += " (" + ", ".join(f"{v:.2f}" for v in pct["each"]) + ")"
        for n, rec in b["budgets"].items():
            bound = rec["bound"]
            bp, o8, dr = rec["best_peer"], rec["ours8"], rec["default_run"]
            ratio = f"{0.7 * bp['mse'] / bound:.2f}" if bound > 0 else "∞"
            if dr["mse"] is None:
                dtxt = "—"
            elif bound > 0:
                dtxt = f"{dr['mse'] / bound:.2f} ± {dr['mse_se'] / bound:.2f}"
            else:
                dtxt = "∞"
            lines.append(
                f"| `{name}` | {' / '.join(f'{v:,}' for v in b['sizes'])} | "
                f"{' / '.join(str(v) for v in b['errors'])} | {ptxt} | "
                f"{b['ignore_bias'] ** 2:.1e} | {int(n):,} | {bound:.2e} | {rec['srs_mse']:.2e} | "
                f"{bp['mse']:.2e} ({bp['method']}, {bp['n']}) | {o8['mse']:.2e} ({o8['n']}) | "
                f"{ratio} | {dtxt} |"
            )
    lines += [
        "",
        "Reading. Where `0.7 × best peer / bound` is below 1 and the errors' percentiles are near "
        "0.5, the issue's target is below what a design-unbiased estimate can expect at that "
        "budget, to first order and under the assumption above: a peer gets there by not finding "
        "the bulk's errors (its squared bias is then about the ignore-bulk bias²), and an "
        "unbiased design only in the runs that are lucky enough not to draw one. With 5-30 runs a "
        "peer's MSE is itself noisy (one run that draws a bulk error moves it several-fold), and "
        "the best of four noisy peers is biased low. Where the bulk has no error the bound is 0 "
        "and says nothing; where the percentiles are well above 0.5 the scores do locate the "
        "errors and the stratified floor above is the one to read.",
    ]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
