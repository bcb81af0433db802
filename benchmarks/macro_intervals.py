"""Coverage of the 95 % intervals of balanced accuracy and the macro averages: the delta method of
the average ("before") against per-class score intervals combined by MOVER ("after", the default).

``Estimate.confidence_interval()`` with its default method (``"modified_wilson"``) builds a
modified Wilson interval for each class's ratio on the class's own effective size and combines
them by MOVER (``intervals.mover``). Before that change, the default was the modified Wilson
interval of the average itself, on the effective size from the delta-method standard error of the
average and the Kish size of the draws. The current API no longer offers that interval for an
estimate with per-class parts (every score-type method goes through MOVER; ``"wald"``, ``"t"``,
``"logit"`` keep the delta method but are other intervals), so ``before_interval`` below computes
it explicitly with the previous code's call: ``intervals.interval(est.values, est.stderrs,
est.bounds, 0.95, "modified_wilson", df=est.effective_df, kish=est.kish, n_df=max(weight_df − 1,
1), ...)``. Both columns use the same draws and the same estimate.

Settings (the figures of ``docs/estimation.md``, "Balanced accuracy and macro averages"):

- ``skewed``: a 200,000-item binary pool, 1.5 % positives, a model with recall 0.9 and
  specificity 0.964 (pool seed 0); uniform draws with replacement (passive sampling, equal
  weights, ``bae.weighted_estimate`` on the measure's losses) of n = 100, 400, 1,000, for
  balanced accuracy, macro recall, macro F1 and macro precision; one generator (seed 0, after the
  pool) runs through all cells in that order.
- ``other``: 100,000-item pools drawn one after the other from seed 1: balanced binary classes
  (model accuracy 0.85; balanced accuracy, macro F1), skewed binary (1.5 %, 0.9/0.964) under
  ``optimal_proposal(pool, measure)`` (balanced accuracy, macro recall, macro F1, with the
  binary ``recall`` interval of the positive class on the balanced-accuracy draws), three classes
  at 90/8/2 % (a model right 92 % of the time, else a uniform class; balanced accuracy, macro
  recall, precision, F1 in that order: the draws run on through the measures); 400
  draws through ``bae.estimate``, each setting's draws from ``default_rng(0)``. Plus
  ``skewed binary, pool 2``: a second skewed pool (seed 1, the pool's generator continuing for the
  draws), balanced accuracy under its optimal proposal. Pool probabilities are ``0.8`` on the
  predicted class plus ``0.2/C`` (they shape only the optimal proposals).

Usage:
    nice -n 5 python benchmarks/macro_intervals.py [--reps 400] [--quick]

Writes ``benchmarks/results/macro_intervals.{json,md}`` (``--quick``: 40 repetitions, written to
``macro_intervals_quick.{json,md}``; ``--report`` rewrites the ``.md`` from the JSON).
``--reps 400``: 0.5-2 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
import warnings
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import sklearn.metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import intervals
from bayes_activeeval.measures import ModelView, get

RESULTS = Path(__file__).resolve().parent / "results"
MEASURES = ("balanced_accuracy", "recall_macro", "f1_macro", "precision_macro")
LABELS = {
    "balanced_accuracy": "balanced accuracy",
    "recall_macro": "macro recall",
    "f1_macro": "macro F1",
    "precision_macro": "macro precision",
    "recall": "binary recall (positive class)",
    "f1": "binary F1 (positive class)",
}
F1 = get("f1").resolve(2)


def truth_of(name: str, y: np.ndarray, f: np.ndarray) -> float:
    """The pool's value of the measure (scikit-learn, ``zero_division=0``)."""
    if name == "balanced_accuracy":
        return float(skm.balanced_accuracy_score(y, f))
    if name == "recall":
        return float(skm.recall_score(y, f, zero_division=0))
    if name == "f1":
        return float(skm.f1_score(y, f, zero_division=0))
    fn = {"recall_macro": skm.recall_score, "f1_macro": skm.f1_score}.get(name, skm.precision_score)
    return float(fn(y, f, average="macro", zero_division=0))


def before_interval(est, level: float = 0.95) -> tuple[float, float]:
    """The previous default: modified Wilson interval of the average on its delta-method
    effective size (the pre-MOVER ``Estimate.confidence_interval`` call, verbatim)."""
    kish = est.kish if est.kish is not None else np.full(est.values.shape, est.n_draws)
    wdf = est.weight_df if est.weight_df is not None else np.full(kish.shape, np.inf)
    low, high = intervals.interval(
        est.values,
        est.stderrs,
        est.bounds,
        level,
        "modified_wilson",
        df=est.effective_df,
        kish=kish,
        n_df=None if est.n_max is not None else np.maximum(wdf - 1.0, 1.0),
        n_max=est.n_max,
        event_weight=est.event_weight,
        event_weight_rms=est.event_weight_rms,
        anticipated_stderr=est.anticipated_stderr,
    )
    return float(np.atleast_1d(low)[0]), float(np.atleast_1d(high)[0])


class Tally:
    """Coverage and mean width of the two intervals over the replications of one cell."""

    def __init__(self, truth: float):
        self.truth = truth
        self.hits = {"before": 0, "after": 0}
        self.widths: dict[str, list[float]] = {"before": [], "after": []}
        self.reps = 0

    def add(self, est) -> None:
        self.reps += 1
        after = est.confidence_interval()
        for key, (lo, hi) in (("before", before_interval(est)), ("after", after)):
            self.hits[key] += bool(lo <= self.truth <= hi)
            self.widths[key].append(hi - lo)

    def row(self, **cell) -> dict:
        out = dict(cell, truth=self.truth, reps=self.reps)
        for key in ("before", "after"):
            cov = self.hits[key] / self.reps
            out[f"{key}_coverage"] = cov
            out[f"{key}_mc_se"] = float(np.sqrt(cov * (1 - cov) / self.reps))
            out[f"{key}_width"] = float(np.nanmean(self.widths[key]))
        return out


def skewed_table(reps: int, ns=(100, 400, 1000)) -> list[dict]:
    """Passive sampling on the 200,000-item skewed pool, every measure and n (one generator)."""
    rng = np.random.default_rng(0)
    N = 200_000
    y = (rng.random(N) < 0.015).astype(int)
    f = np.where(y == 1, rng.random(N) < 0.9, rng.random(N) > 0.964).astype(int)
    rows = []
    for name in MEASURES:
        m = get(name).resolve(2)
        for n in ns:
            t0 = time.time()
            tally = Tally(truth_of(name, y, f))
            # macro F1: also the binary F1 of the positive class on the same draws, and how many
            # draws carry that class (labeled or predicted positive)
            f1 = Tally(truth_of("f1", y, f)) if name == "f1_macro" else None
            carrying = []
            for _ in range(reps):
                idx = rng.integers(0, N, n)
                view = ModelView(pred=f[idx], n_classes=2, pos=1)
                losses = m.loss(y[idx], view)
                tally.add(bae.weighted_estimate(losses, np.ones(n), m))
                if f1 is not None:
                    f1.add(bae.weighted_estimate(F1.loss(y[idx], view), np.ones(n), F1))
                    carrying.append(int(np.sum((y[idx] == 1) | (f[idx] == 1))))
            cell = {"setting": "skewed", "design": "passive", "n": n}
            rows.append(tally.row(measure=name, seconds=time.time() - t0, **cell))
            if f1 is not None:
                rows[-1]["mean_positive_carrying"] = float(np.mean(carrying))
                rows.append(f1.row(measure="f1", **cell))
            _show(rows[-1])
    return rows


def _run_pool(setting, y, f, C, names, n, reps, design, rng=None, binary_recall=False):
    """``bae.estimate`` on draws from the pool's passive or optimal proposal."""
    rng = np.random.default_rng(0) if rng is None else rng
    pool = bae.Pool(predictions=f, probs=np.eye(C)[f] * 0.8 + 0.2 / C, classes=list(range(C)))
    rows = []
    for name in names:
        t0 = time.time()
        prop = (
            bae.passive_proposal(pool) if design == "passive" else bae.optimal_proposal(pool, name)
        )
        tally = Tally(truth_of(name, y, f))
        with_recall = binary_recall and name == "balanced_accuracy"
        rec = Tally(truth_of("recall", y, f)) if with_recall else None
        for _ in range(reps):
            d = prop.draw(n, rng=rng)
            tally.add(bae.estimate(pool, name, d, y[d.indices]))
            if rec is not None:
                rec.add(bae.estimate(pool, "recall", d, y[d.indices]))
        rows.append(tally.row(setting=setting, design=design, measure=name, n=n))
        if rec is not None:  # binary recall has no class parts: before == after
            rows.append(rec.row(setting=setting, design=design, measure="recall", n=n))
        rows[-1]["seconds"] = time.time() - t0
        for r in rows[-2 if rec is not None else -1 :]:
            _show(r)
    return rows


def other_settings(reps: int, n: int = 400) -> list[dict]:
    rng = np.random.default_rng(1)
    N = 100_000
    rows = []
    y = (rng.random(N) < 0.5).astype(int)
    f = np.where(rng.random(N) < 0.85, y, 1 - y)
    rows += _run_pool(
        "balanced binary", y, f, 2, ["balanced_accuracy", "f1_macro"], n, reps, "passive"
    )
    y = (rng.random(N) < 0.015).astype(int)
    f = np.where(y == 1, rng.random(N) < 0.9, rng.random(N) > 0.964).astype(int)
    rows += _run_pool(
        "skewed binary",
        y,
        f,
        2,
        ["balanced_accuracy", "recall_macro", "f1_macro"],
        n,
        reps,
        "optimal",
        binary_recall=True,
    )
    y = rng.choice(3, N, p=[0.9, 0.08, 0.02])
    f = np.where(rng.random(N) < 0.92, y, rng.choice(3, N))
    names = ["balanced_accuracy", "recall_macro", "precision_macro", "f1_macro"]
    rows += _run_pool("3 classes 90/8/2", y, f, 3, names, n, reps, "passive")
    rng = np.random.default_rng(1)  # a second skewed pool; its generator then draws
    y = (rng.random(N) < 0.015).astype(int)
    f = np.where(y == 1, rng.random(N) < 0.9, rng.random(N) > 0.964).astype(int)
    rows += _run_pool(
        "skewed binary, pool 2",
        y,
        f,
        2,
        ["balanced_accuracy"],
        n,
        reps,
        "optimal",
        rng=rng,
        binary_recall=True,
    )
    return rows


def _show(r: dict) -> None:
    print(
        f"{r['setting']:22s} {r['design']:8s} {r['measure']:18s} n={r['n']:5d} "
        f"truth={r['truth']:.3f} before {r['before_coverage']:.3f} ({r['before_width']:.4f}) "
        f"after {r['after_coverage']:.3f} ({r['after_width']:.4f})",
        flush=True,
    )


def _cov(r: dict, key: str) -> str:
    """Coverage ``hits/reps`` to three decimals, ties rounded half up (0.2875 -> 0.288)."""
    hits = round(r[f"{key}_coverage"] * r["reps"])
    exact = Decimal(hits) / Decimal(r["reps"])
    return str(exact.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def report(meta: dict, skewed: list[dict], other: list[dict]) -> str:
    truths = {r["measure"]: r["truth"] for r in skewed if r["measure"] in MEASURES}
    carrying = {
        r["n"]: r["mean_positive_carrying"] for r in skewed if "mean_positive_carrying" in r
    }
    lines = [
        "# Balanced accuracy and macro averages: delta method of the average against MOVER",
        "",
        f"`{meta['command']}` — {meta['date']}, {meta['seconds']:.0f} s, Python "
        f"{meta['python']}, numpy {meta['numpy']}.",
        "",
        "Coverage of the 95 % interval (mean width in parentheses). **before**: the modified "
        "Wilson interval of the average on its delta-method effective size, the default before "
        "the MOVER change; the current API has no method for it on an estimate with class parts, "
        "so the script computes it with the previous code's `intervals.interval` call "
        "(`before_interval`). **after**: `Estimate.confidence_interval()` (default, per-class "
        "modified Wilson intervals combined by MOVER). Both on the same draws and estimates. "
        "Coverages are `hits/reps` rounded half up to three decimals (exact values in the JSON); "
        "MC s.e. `sqrt(cov (1 − cov)/reps)`.",
        "",
        "## Skewed binary pool, passive sampling",
        "",
        "200,000 items, 1.5 % positives, recall 0.9, specificity 0.964 (pool values: "
        + ", ".join(f"{LABELS[k]} {v:.3f}" for k, v in truths.items())
        + f"); {meta['reps']} replications per cell, uniform draws with replacement.",
        "",
        "`binary F1` is the package's F1 interval of the positive class on the macro-F1 draws "
        "(no class parts: before and after are the same interval); draws carrying the positive "
        "class (labeled or predicted positive), mean per sample: "
        + ", ".join(f"{v:.1f} at n = {k:,}" for k, v in carrying.items())
        + ".",
        "",
        "| measure | n | before | after | MC s.e. before / after |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in skewed:
        lines.append(
            f"| {LABELS[r['measure']]} | {r['n']:,} "
            f"| {_cov(r, 'before')} ({r['before_width']:.3f}) "
            f"| {_cov(r, 'after')} ({r['after_width']:.3f}) "
            f"| {r['before_mc_se']:.3f} / {r['after_mc_se']:.3f} |"
        )
    lines += [
        "",
        "## Other settings",
        "",
        f"100,000-item pools, {meta['reps']} replications of 400 draws each. `recall` is the "
        "package's binary recall interval of the positive class on the balanced-accuracy draws "
        "(no class parts: before and after are the same interval).",
        "",
        "| setting | design | measure | truth | before | after | MC s.e. before / after |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in other:
        lines.append(
            f"| {r['setting']} | {r['design']} | {LABELS[r['measure']]} | {r['truth']:.3f} "
            f"| {_cov(r, 'before')} ({r['before_width']:.4f}) "
            f"| {_cov(r, 'after')} ({r['after_width']:.4f}) "
            f"| {r['before_mc_se']:.3f} / {r['after_mc_se']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="smoke run: 40 repetitions")
    ap.add_argument("--report", action="store_true", help="rewrite the .md from the JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 40
    name = "macro_intervals_quick" if args.quick else "macro_intervals"
    path = RESULTS / f"{name}.json"
    if args.report:
        data = json.loads(path.read_text())
        path.with_suffix(".md").write_text(report(data["meta"], data["skewed"], data["other"]))
        return
    argv_used = sys.argv[1:] if argv is None else list(argv)
    meta = {
        "command": shlex.join(["python", "benchmarks/macro_intervals.py", *argv_used]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "reps": args.reps,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined per-class ratios at small n
        skewed = skewed_table(args.reps)
        other = other_settings(args.reps)
    meta["seconds"] = round(time.time() - t0, 1)
    path.write_text(json.dumps({"meta": meta, "skewed": skewed, "other": other}, indent=1) + "\n")
    path.with_suffix(".md").write_text(report(meta, skewed, other))


if __name__ == "__main__":
    main()
