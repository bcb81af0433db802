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

Declared classes the model never predicts, and ``compare()`` (the same section of the docs and its
paragraph on differences; no "before" column):

- ``absent widths``: a 100,000-item pool (seed 7) with classes ``[0, 1, 2]``, labels 0/1 at
  70/30 %, a model right 85 % of the time (else the other of 0/1); class 2 neither occurs nor is
  predicted. One passive draw of 300, 3,000 and 30,000 items (``draw(n, rng=0)``), balanced
  accuracy, macro precision and macro recall through ``bae.estimate`` (truths from scikit-learn
  with ``labels=[0, 1, 2]``).
- ``absent coverage``: a 100,000-item pool (seed 7), classes at 70/29/1 %, a model right 85 % of
  the time (else a uniform class of 0/1; it never predicts class 2); replication ``r`` draws 300
  passive items with ``rng=r``: macro precision, macro F1, balanced accuracy; then the same pool
  with class 2 relabeled 0 (declared, never occurring), balanced accuracy.
- ``compare``: a 100,000-item binary pool (seed 5), 1.5 % positives, model ``a`` with recall 0.9
  and specificity 0.964, model ``b`` either ``a`` with 2 % of its predictions flipped (``flip 2
  %``) or ``a`` with 30 % of its true positives turned into false negatives (``minority 30 %``);
  and a pool from seed 6 (``recall 0.5``: 2 % positives, ``a`` with recall 0.5 and specificity
  0.95, ``b`` missing 40 % of ``a``'s true positives). Replication ``r`` draws ``n`` = 400 or
  2,000 items with ``rng=1000 + r`` from ``passive_proposal`` or (the first two pools)
  ``comparison_proposal(pool, "balanced_accuracy")``; ``bae.compare(..., "balanced_accuracy")``:
  coverage and width of the default interval, of ``method="newcombe"`` and ``"test"``, how
  often ``p < 0.05`` (the default test and, on the same draws, the Wald test), how often each
  interval excludes 0, and how often that agrees with ``p < 0.05``; and the exact null of the
  ``minority 30 %`` and ``recall 0.5`` pools (``, null``: every item in two copies with the
  models' predictions swapped), passive, for the type-I error of both tests. The first cell (``flip 2 %``, passive, 400) is the one committed before the
  other cells were added, with the same draws.
  ``--reps`` sets the replications of ``absent coverage`` (300 at the default 400) and
  ``compare`` (400).

Usage:
    nice -n 5 python benchmarks/macro_intervals.py [--reps 400] [--quick] [--only compare]

Writes ``benchmarks/results/macro_intervals.{json,md}`` (``--quick``: 40 repetitions, written to
``macro_intervals_quick.{json,md}``; ``--report`` rewrites the ``.md`` from the JSON;
``--only compare`` re-runs the ``compare`` section alone, about 30 s, and merges it into the
JSON, keeping the other sections and their metadata). ``--reps 400``: 1-2 minutes on one core.
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
EXTRA = ("absent_widths", "absent_coverage", "compare")


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


def absent_widths(draws=(300, 3_000, 30_000)) -> list[dict]:
    """Class 2 declared, never occurring, never predicted: one passive draw per size."""
    rng = np.random.default_rng(7)
    N = 100_000
    y = rng.choice(2, N, p=[0.7, 0.3])
    f = np.where(rng.random(N) < 0.85, y, 1 - y)
    probs = np.full((N, 3), 0.05)
    probs[np.arange(N), f] = 0.9
    pool = bae.Pool(predictions=f, probs=probs, classes=[0, 1, 2])
    prop = bae.passive_proposal(pool)
    truths = {
        "balanced_accuracy": skm.balanced_accuracy_score(y, f),
        "precision_macro": skm.precision_score(
            y, f, average="macro", labels=[0, 1, 2], zero_division=0
        ),
        "recall_macro": skm.recall_score(y, f, average="macro", labels=[0, 1, 2], zero_division=0),
    }
    rows = []
    for n in draws:
        d = prop.draw(n, rng=0)
        for name, truth in truths.items():
            est = bae.estimate(pool, name, d, y[d.indices])
            lo, hi = est.confidence_interval()
            row = {"setting": "absent widths", "measure": name, "n": n, "truth": float(truth)}
            row.update(estimate=float(est.value), stderr=float(est.stderr), low=float(lo))
            row.update(high=float(hi), width=float(hi - lo))
            rows.append(row)
            print(
                f"absent widths {name:18s} n={n:6d} truth={truth:.4f} "
                f"CI [{lo:.4f}, {hi:.4f}] width {hi - lo:.4f}",
                flush=True,
            )
    return rows


def _coverage_row(setting, name, truth, hits, widths, n, seconds) -> dict:
    cov = float(np.mean(hits))
    row = {"setting": setting, "measure": name, "n": n, "truth": float(truth), "reps": len(hits)}
    row.update(coverage=cov, mc_se=float(np.sqrt(cov * (1 - cov) / len(hits))))
    row.update(width=float(np.nanmean(widths)), seconds=seconds)
    print(
        f"{setting:15s} {name:18s} n={n:5d} truth={truth:.4f} coverage {cov:.3f} "
        f"(s.e. {row['mc_se']:.3f}) width {row['width']:.4f}",
        flush=True,
    )
    return row


def absent_coverage(reps: int, n: int = 300) -> list[dict]:
    """Classes at 70/29/1 %, class 2 never predicted; then class 2 declared but never occurring."""
    rng = np.random.default_rng(7)
    N = 100_000
    y = rng.choice(3, N, p=[0.70, 0.29, 0.01])
    f = np.where(rng.random(N) < 0.85, y, rng.choice(2, N))
    f = np.where(f == 2, 0, f)
    probs = np.full((N, 3), 0.05)
    probs[np.arange(N), f] = 0.9
    kw = {"average": "macro", "zero_division": 0, "labels": [0, 1, 2]}
    truths = {
        "precision_macro": skm.precision_score(y, f, **kw),
        "f1_macro": skm.f1_score(y, f, **kw),
        "balanced_accuracy": skm.balanced_accuracy_score(y, f),
    }
    y2 = np.where(y == 2, 0, y)
    settings = [
        ("class 2 at 1 %", y, truths),
        ("class 2 absent", y2, {"balanced_accuracy": skm.balanced_accuracy_score(y2, f)}),
    ]
    rows = []
    for setting, labels, tr in settings:
        pool = bae.Pool(predictions=f, probs=probs, classes=[0, 1, 2])
        prop = bae.passive_proposal(pool)
        for name, truth in tr.items():
            t0 = time.time()
            hits, widths = [], []
            for r in range(reps):
                d = prop.draw(n, rng=r)
                lo, hi = bae.estimate(pool, name, d, labels[d.indices]).confidence_interval()
                hits.append(lo <= truth <= hi)
                widths.append(hi - lo)
            rows.append(_coverage_row(setting, name, truth, hits, widths, n, time.time() - t0))
    return rows


#: ``compare()`` cells: (pool, design, draws). ``flip 2 %``: b is a with 2 % of its predictions
#: flipped (the first cell is the one committed before, with the same draws); ``minority 30 %``:
#: b is a with 30 % of a's true positives turned into false negatives (the models differ only on
#: the rare class); ``recall 0.5``: 2 % positives, a with recall 0.5 and specificity 0.95, b a
#: with 40 % of a's true positives turned into false negatives (recall near 0.5, where the two
#: models' score intervals of the class are symmetric and cancel in Newcombe's hybrid)
COMPARE_CELLS = (
    ("flip 2 %", "passive", 400),
    ("flip 2 %", "passive", 2000),
    ("minority 30 %", "passive", 400),
    ("minority 30 %", "passive", 2000),
    ("flip 2 %", "optimal", 400),
    ("flip 2 %", "optimal", 2000),
    ("minority 30 %", "optimal", 400),
    ("minority 30 %", "optimal", 2000),
    ("recall 0.5", "passive", 400),
    ("recall 0.5", "passive", 2000),
    ("minority 30 %, null", "passive", 400),
    ("minority 30 %, null", "passive", 2000),
    ("recall 0.5, null", "passive", 400),
    ("recall 0.5, null", "passive", 2000),
)
#: the intervals of the ``compare()`` section: key suffix and ``method=``
COMPARE_METHODS = (("", None), ("_newcombe", "newcombe"), ("_test", "test"))


def _compare_pools() -> dict:
    rng = np.random.default_rng(5)
    N = 100_000
    y = (rng.random(N) < 0.015).astype(int)
    fa = np.where(y == 1, rng.random(N) < 0.9, rng.random(N) > 0.964).astype(int)
    out = {}
    for name in ("flip 2 %", "minority 30 %"):
        if name == "flip 2 %":
            fb = np.where(rng.random(N) < 0.02, 1 - fa, fa)
        else:
            fb = np.where((y == 1) & (fa == 1) & (rng.random(N) < 0.3), 0, fa)
        pool = bae.Pool(
            predictions={"a": fa, "b": fb},
            probs={"a": np.where(fa == 1, 0.8, 0.2), "b": np.where(fb == 1, 0.8, 0.2)},
        )
        truth = skm.balanced_accuracy_score(y, fa) - skm.balanced_accuracy_score(y, fb)
        out[name] = (pool, y, float(truth))
    rng = np.random.default_rng(6)
    y = (rng.random(N) < 0.02).astype(int)
    fa = np.where(y == 1, rng.random(N) < 0.5, rng.random(N) > 0.95).astype(int)
    fb = np.where((y == 1) & (fa == 1) & (rng.random(N) < 0.4), 0, fa)
    pool = bae.Pool(
        predictions={"a": fa, "b": fb},
        probs={"a": np.where(fa == 1, 0.8, 0.2), "b": np.where(fb == 1, 0.8, 0.2)},
    )
    truth = skm.balanced_accuracy_score(y, fa) - skm.balanced_accuracy_score(y, fb)
    out["recall 0.5"] = (pool, y, float(truth))
    for name in ("minority 30 %", "recall 0.5"):
        # the exact null of the same pool: every item in two copies with the two models'
        # predictions swapped (the protocol of benchmarks/comparison_type1_power.py)
        pool, y, _ = out[name]
        fa, fb = pool.view("a").pred, pool.view("b").pred
        null = bae.Pool(
            predictions={"a": np.r_[fa, fb], "b": np.r_[fb, fa]},
            probs={
                "a": np.where(np.r_[fa, fb] == 1, 0.8, 0.2),
                "b": np.where(np.r_[fb, fa] == 1, 0.8, 0.2),
            },
        )
        out[name + ", null"] = (null, np.r_[y, y], 0.0)
    return out


def compare_ba(reps: int, cells=COMPARE_CELLS) -> list[dict]:
    """``bae.compare`` of two models on balanced accuracy: the default interval, Newcombe's
    hybrid and the test's, on the same draws."""
    pools = _compare_pools()
    rows = []
    for setting, design, n in cells:
        pool, y, truth = pools[setting]
        prop = (
            bae.passive_proposal(pool)
            if design == "passive"
            else bae.comparison_proposal(pool, "balanced_accuracy", models=("a", "b"))
        )
        t0 = time.time()
        rec: dict[str, list] = {"p": [], "p_wald": []}
        for key, _ in COMPARE_METHODS:
            for what in ("cover", "width", "excl"):
                rec[what + key] = []
        for r in range(reps):
            d = prop.draw(n, rng=1000 + r)
            c = bae.compare(
                pool, "balanced_accuracy", d, y[d.indices], models=("a", "b"), proposal=prop
            )
            rec["p"].append(float(c.pvalue))
            w = bae.compare(
                pool,
                "balanced_accuracy",
                d,
                y[d.indices],
                models=("a", "b"),
                proposal=prop,
                variance="wald",
            )
            rec["p_wald"].append(float(w.pvalue))
            for key, method in COMPARE_METHODS:
                lo, hi = c.confidence_interval(method=method)
                rec["cover" + key].append(lo <= truth <= hi)
                rec["width" + key].append(hi - lo)
                rec["excl" + key].append(lo > 0 or hi < 0)
        p = np.array(rec["p"])
        out = {
            "setting": setting,
            "design": design,
            "measure": "balanced_accuracy",
            "n": n,
            "reps": reps,
            "truth": truth,
            "reject_05": float(np.mean(p < 0.05)),
            "reject_05_wald": float(np.mean(np.array(rec["p_wald"]) < 0.05)),
            "mean_positive_draws": float(n * np.mean(y)),
        }
        for key, _ in COMPARE_METHODS:
            cov = float(np.mean(rec["cover" + key]))
            out["coverage" + key] = cov
            out["mc_se" + key] = float(np.sqrt(cov * (1 - cov) / reps))
            out["width" + key] = float(np.nanmean(rec["width" + key]))
            out["excludes_0" + key] = float(np.mean(rec["excl" + key]))
            out["agrees_with_p" + key] = float(np.mean(np.array(rec["excl" + key]) == (p < 0.05)))
        out["seconds"] = time.time() - t0
        print(
            f"compare {setting} {design} n={n} truth={truth:.4f} p<0.05 {out['reject_05']:.3f}; "
            + "; ".join(
                f"{m or 'default'} {out['coverage' + k]:.3f} ({out['width' + k]:.4f})"
                for k, m in COMPARE_METHODS
            ),
            flush=True,
        )
        rows.append(out)
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
    field = f"{key}_coverage" if key in ("before", "after") else f"coverage{key}"
    hits = round(r[field] * r["reps"])
    exact = Decimal(hits) / Decimal(r["reps"])
    return str(exact.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def report(meta: dict, skewed: list[dict], other: list[dict], extra: dict | None = None) -> str:
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
        "(no class parts; `before_interval` omits the no-true-positive step, so the two differ "
        "only on samples without a labeled true positive); draws carrying the positive "
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
    if extra:
        lines += _report_extra(extra)
    return "\n".join(lines) + "\n"


def _report_extra(extra: dict) -> list[str]:
    """The sections on never-predicted classes and on ``compare()`` (default intervals only)."""
    lines = [
        "",
        "## A declared class never predicted: interval widths",
        "",
        "100,000 items, classes `[0, 1, 2]`, labels 0/1 at 70/30 %, the model right 85 % of the "
        "time; class 2 neither occurs nor is predicted. One passive draw per size "
        "(`draw(n, rng=0)`), the default interval.",
        "",
        "| measure | draws | truth | estimate | interval | width |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in extra["absent_widths"]:
        lines.append(
            f"| {LABELS[r['measure']]} | {r['n']:,} | {r['truth']:.4f} | {r['estimate']:.4f} "
            f"| [{r['low']:.4f}, {r['high']:.4f}] | {r['width']:.4f} |"
        )
    cov_rows = extra["absent_coverage"]
    lines += [
        "",
        "## A declared class never predicted: coverage",
        "",
        f"100,000 items, classes at 70/29/1 %, the model right 85 % of the time (else a uniform "
        f"class of 0/1), never predicting class 2; {cov_rows[0]['reps']} replications of "
        f"{cov_rows[0]['n']} passive draws (replication `r`: `rng=r`). `class 2 absent`: the same "
        "pool with class 2 relabeled 0 (declared, never occurring). Default interval; coverage "
        "`hits/reps` rounded half up.",
        "",
        "| setting | measure | truth | coverage (width) | MC s.e. |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in cov_rows:
        lines.append(
            f"| {r['setting']} | {LABELS[r['measure']]} | {r['truth']:.4f} "
            f"| {_cov(r, '')} ({r['width']:.3f}) | {r['mc_se']:.3f} |"
        )
    cells = extra["compare"]
    if isinstance(cells, dict):  # a results file from before the other cells: one cell
        cells = [{"setting": "flip 2 %", "design": "passive", **cells}]
    meta = extra.get("compare_meta")
    c = cells[0]
    lines += [
        "",
        "## `compare()` on balanced accuracy",
        "",
    ]
    if meta:
        lines += [
            f"Re-run on its own: `{meta['command']}` — {meta['date']}, {meta['seconds']:.0f} s, "
            f"Python {meta['python']}, numpy {meta['numpy']}.",
            "",
        ]
    lines += [
        "100,000 items, 1.5 % positives; model a: recall 0.9, specificity 0.964. `flip 2 %`: "
        "model b is a with 2 % of its predictions flipped; `minority 30 %`: model b is a with "
        "30 % of a's true positives turned into false negatives (the two models differ only on "
        "the rare class); `recall 0.5`: another pool (seed 6), 2 % positives, model a with "
        "recall 0.5 and specificity 0.95, model b a with 40 % of a's true positives turned into "
        f"false negatives. {c['reps']} replications per cell (replication `r`: "
        '`draw(n, rng=1000 + r)`), `bae.compare(pool, "balanced_accuracy", ...)` on draws from '
        '`passive_proposal` or from `comparison_proposal(pool, "balanced_accuracy")` '
        "(`optimal`). Intervals on the same draws: the default of "
        "`ComparisonResult.confidence_interval()`, Newcombe's hybrid "
        '(`method="newcombe"`, the default for passive draws) and the test\'s '
        '(`method="test"`, the default under active proposals except where some class has no '
        "discordant draw: there the default widens it by a bound on that class's difference). "
        "Coverage `hits/reps` rounded "
        "half up (mean width), MC s.e. `sqrt(cov (1 − cov)/reps)`; `excl. 0` how often the "
        "interval excludes 0 and, after the slash, how often that agrees with p < 0.05. "
        "`p < 0.05`: the default test (the generalized score test), then the Wald test "
        '(`variance="wald"`) on the same draws. `, null`: the exact null of the pool above it '
        "(every item in two copies with the models' predictions swapped; truth 0, so `p < 0.05` "
        "is the type-I error and the coverage that of 0).",
        "",
        "| pool | design | n | positives drawn | truth | p < 0.05: default / Wald | default "
        "| newcombe | test | MC s.e. (newcombe / test) | excl. 0: newcombe / test |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        if "coverage_newcombe" not in c:  # the first cell alone: default was Newcombe's
            lines.append(
                f"| {c['setting']} | {c['design']} | {c['n']:,} | | {c['truth']:.4f} "
                f"| {c['reject_05']:.3f} | {_cov(c, '')} ({c['width']:.3f}) | — "
                f"| {_cov(c, '_test')} ({c['width_test']:.3f}) | — | — |"
            )
            continue
        cols = " | ".join(
            f"{_cov(c, k)} ({c['width' + k]:.3f})" for k in ("", "_newcombe", "_test")
        )
        wald = f"{c['reject_05_wald']:.3f}" if "reject_05_wald" in c else "—"
        lines.append(
            f"| {c['setting']} | {c['design']} | {c['n']:,} | {c['mean_positive_draws']:.0f} "
            f"| {c['truth']:.4f} | {c['reject_05']:.3f} / {wald} | {cols} "
            f"| {c['mc_se_newcombe']:.3f} / {c['mc_se_test']:.3f} "
            f"| {c['excludes_0_newcombe']:.3f}/{c['agrees_with_p_newcombe']:.3f} / "
            f"{c['excludes_0_test']:.3f}/{c['agrees_with_p_test']:.3f} |"
        )
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="smoke run: 40 repetitions")
    ap.add_argument("--report", action="store_true", help="rewrite the .md from the JSON")
    ap.add_argument(
        "--only",
        choices=["compare"],
        help="re-run one section and merge it into the existing JSON (the others are kept)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 40
    name = "macro_intervals_quick" if args.quick else "macro_intervals"
    path = RESULTS / f"{name}.json"
    if args.report:
        data = json.loads(path.read_text())
        extra = {k: data[k] for k in (*EXTRA, "compare_meta") if k in data} or None
        md = report(data["meta"], data["skewed"], data["other"], extra)
        path.with_suffix(".md").write_text(md)
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
    if args.only == "compare":
        data = json.loads(path.read_text())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data["compare"] = compare_ba(args.reps)
        meta["seconds"] = round(time.time() - t0, 1)
        data["compare_meta"] = meta
        extra = {k: data[k] for k in (*EXTRA, "compare_meta") if k in data}
        path.write_text(json.dumps(data, indent=1) + "\n")
        path.with_suffix(".md").write_text(
            report(data["meta"], data["skewed"], data["other"], extra)
        )
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined per-class ratios at small n
        skewed = skewed_table(args.reps)
        other = other_settings(args.reps)
        extra = {
            "absent_widths": absent_widths(),
            "absent_coverage": absent_coverage(max(round(args.reps * 3 / 4), 1)),
            "compare": compare_ba(args.reps),
        }
    meta["seconds"] = round(time.time() - t0, 1)
    data = {"meta": meta, "skewed": skewed, "other": other, **extra}
    path.write_text(json.dumps(data, indent=1) + "\n")
    path.with_suffix(".md").write_text(report(meta, skewed, other, extra))


if __name__ == "__main__":
    main()
