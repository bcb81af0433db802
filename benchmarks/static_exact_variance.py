"""The static default against Sawade's closed form on the real pools, without Monte Carlo error
(issue 12: "the static default's MSE <= Sawade's closed form").

With the true labels ``y*`` of a pool the asymptotic variance of the self-normalized estimate under
a proposal ``q`` is exactly ``V(q) = Σ_x p(x)²/q(x) (Dg(R)(ℓ(x, y*) − R))²`` (Sawade (2012),
Lemma 3.4 / Eq. 4.4 with the true conditional), so two proposals can be compared exactly where a
Monte Carlo run of 100 repetitions carries a ±15-30 % error on rare-event pools. Rows: the static
default ``optimal_proposal(pool, "f1")`` (scaled belief floor, δ = 0.05), its two components
switched off, Sawade's closed-form F1 proposal (Cor. 4.4, no floor, no mix; ``peer_adapter``) and
passive sampling; each as ``V(q) / V(Sawade)``.

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

OUT = HERE / "results" / "static_exact_variance"
ROWS = {
    "static default": {},
    "floor 0, δ = 0": {"belief_floor": 0.0, "mix": 0.0},
    "scaled floor, δ = 0": {"mix": 0.0},
    "floor 0, δ = 0.05": {"belief_floor": 0.0},
}


def exact_variance(pool: bae.Pool, labels: np.ndarray, q: np.ndarray) -> float:
    """``Σ p²/q (Dg(R)(ℓ(x, y*) − R))²`` for the true labels; ``inf`` if ``q`` misses an item
    whose term is non-zero."""
    m, views = pool.resolve("f1")
    L = m.loss(pool.encode_labels(labels), views(np.arange(pool.n_items)))
    R = L.mean(axis=0)
    dev = ((L - R) @ m.jacobian(R).T)[:, 0]
    p = pool.p
    if np.any((q <= 0) & (dev != 0)):
        return float("inf")
    ok = q > 0
    return float(np.sum(p[ok] ** 2 * dev[ok] ** 2 / q[ok]))


def main() -> None:
    warnings.simplefilter("ignore")
    res = {}
    for name in real_pools_data.pool_names():
        d = real_pools_data.load_pool(name)
        P = peer_adapter.make_pool(d)
        v = {row: exact_variance(P, d["labels"], bae.optimal_proposal(P, "f1", **kw).q)
             for row, kw in ROWS.items()}  # fmt: skip
        v["Sawade closed form"] = exact_variance(
            P, d["labels"], peer_adapter.sawade_f1_proposal(d["probs"], d["preds"]).q
        )
        v["passive"] = exact_variance(P, d["labels"], P.p)
        res[name] = {k: x / v["Sawade closed form"] for k, x in v.items()}
    OUT.with_suffix(".json").write_text(json.dumps(res, indent=1))
    cols = list(next(iter(res.values())))
    lines = [
        "# Static default vs Sawade's closed form: exact asymptotic variance (F1)",
        "",
        "`benchmarks/static_exact_variance.py`: `V(q) / V(Sawade)` with the pools' true labels "
        "(no Monte Carlo error).",
        "",
        "| pool | " + " | ".join(cols) + " |",
        "| --- |" + " ---: |" * len(cols),
    ]
    for name, row in res.items():
        lines.append(f"| `{name}` | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
