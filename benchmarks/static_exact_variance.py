"""The static default against Sawade's closed form, without Monte Carlo error (issue 12: "the
static default's MSE <= Sawade's closed form").

With the true labels ``y*`` of a pool the asymptotic variance of the self-normalized estimate under
a proposal ``q`` is exactly ``V(q) = Σ_x p(x)²/q(x) (Dg(R)(ℓ(x, y*) − R))²`` (Sawade (2012),
Lemma 3.4 / Eq. 4.4 with the true conditional), so two proposals can be compared exactly where a
Monte Carlo run of 100 repetitions carries a ±15-30 % error on rare-event pools. Rows: the static
default ``optimal_proposal(pool, "f1")`` (scaled belief floor, defensive floor ``λ = 0.1``), the
5 % defensive mixture in its place (the default before), the defensive floor at two other ``λ``,
the closed form's own parts, Sawade's closed-form F1 proposal (Cor. 4.4, no floor, no mix; ``peer_adapter``) and
passive sampling; each as ``V(q) / V(Sawade)``. On the real pools of ``real_pools_data.py`` and
on synthetic pools (``make_classification_pool``, separation 8, noise 0.3, 1:100 to 1:10,000,
with calibrated, SVM-like and over-confident probabilities), where the closed form is the
proposal under the model's probabilities with no floor and no mixture.

Run::

    PYTHONPATH=. .venv/bin/python benchmarks/static_exact_variance.py
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peer_adapter  # noqa: E402
import real_pools_data  # noqa: E402

import bayes_activeeval as bae  # noqa: E402
from bayes_activeeval.datasets import make_classification_pool  # noqa: E402
from bayes_activeeval.kernel import deviation_integrand  # noqa: E402

OUT = HERE / "results" / "static_exact_variance"
ROWS = {
    "static default (λ = 0.1)": {},
    "δ = 0.05 (before)": {"mix": 0.05},
    "λ = 0.05": {"mix": 0.0, "defensive_floor": 0.05},
    "λ = 0.2": {"mix": 0.0, "defensive_floor": 0.2},
    "floor 0, no defence": {"belief_floor": 0.0, "mix": 0.0},
    "scaled floor, no defence": {"mix": 0.0},
}
SYNTHETIC = [
    (prevalence, n, calibration)
    for prevalence, n in ((0.01, 100_000), (0.001, 100_000), (0.0001, 200_000))
    for calibration in ("calibrated", "svm", "overconfident")
]


def true_integrand(pool: bae.Pool, labels: np.ndarray) -> np.ndarray:
    """``(Dg(R)(ℓ(x, y*) − R))²`` of every item: the optimal proposal's integrand under the
    belief that knows the true labels (``R`` the pool's true risk), so that a proposal's
    ``predicted_variance`` of it is the exact asymptotic variance."""
    onehot = np.eye(2)[pool.encode_labels(labels)]
    return deviation_integrand(pool, "f1", belief=onehot, belief_floor=0.0).u


def ratios(P: bae.Pool, labels: np.ndarray, closed_form: bae.Proposal) -> dict[str, float]:
    """``V(q) / V(Sawade)`` of every row, the closed form and passive sampling."""
    u = true_integrand(P, labels)
    v = {row: bae.optimal_proposal(P, "f1", **kw).predicted_variance(u)
         for row, kw in ROWS.items()}  # fmt: skip
    v["Sawade closed form"] = closed_form.predicted_variance(u)
    v["passive"] = bae.passive_proposal(P).predicted_variance(u)
    return {k: x / v["Sawade closed form"] for k, x in v.items()}


def table(title: str, res: dict) -> list[str]:
    cols = list(next(iter(res.values())))
    lines = [title, "", "| pool | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    for name, row in res.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    return lines


def main() -> None:
    warnings.simplefilter("ignore")
    res = {}
    for name in real_pools_data.pool_names():
        d = real_pools_data.load_pool(name)
        P = peer_adapter.make_pool(d)
        closed = peer_adapter.sawade_f1_proposal(d["probs"], d["preds"])
        res[f"`{name}`"] = ratios(P, d["labels"], closed)
    syn = {}
    for prevalence, n, calibration in SYNTHETIC:
        data = make_classification_pool(
            n, prevalence, separation=8.0, noise=0.3, calibration=calibration, rng=1
        )
        P = data.pool
        closed = bae.optimal_proposal(P, "f1", belief_floor=0.0, mix=0.0)
        syn[f"1:{round(1 / prevalence):,}, {calibration}"] = ratios(P, data.labels, closed)
    OUT.with_suffix(".json").write_text(json.dumps({"real": res, "synthetic": syn}, indent=1))
    lines = [
        "# Static default vs Sawade's closed form: exact asymptotic variance (F1)",
        "",
        "`benchmarks/static_exact_variance.py`: `V(q) / V(Sawade)` with the pools' true labels "
        "(no Monte Carlo error). `λ`: the defensive floor `q ← max(q, λ p)/Z`; `δ`: the "
        "defensive mixture `(1 − δ) q + δ p`.",
        "",
        *table("## Real pools", res),
        "",
        *table(
            "## Synthetic pools (`make_classification_pool`, separation 8, noise 0.3, rng 1)", syn
        ),
    ]
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
