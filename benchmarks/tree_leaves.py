"""The Dirichlet tree's leaves on the real pools: how many hold predicted matches, and whether
one straddles the decision threshold (``docs/oracles.md``, "Partition").

For each cached pool of ``benchmarks/real_pools_data.py`` (built on first use) the tree
oracle's partition is computed as ``DirichletTreeOracle`` does (``stratification_scores``, then
``score_strata`` with its default 256 strata) for both histograms: ``"fine"`` (the default) and
``"fd"`` (the Freedman–Diaconis histogram of Marchant & Rubinstein (2021), Sec. 5.2). Reported
per pool and histogram: the number of leaves, the number holding a predicted positive, those
holding both a predicted positive and a predicted negative ("straddling"), and the items in the
leaves that hold predicted positives.

Run::

    PYTHONPATH=. python benchmarks/tree_leaves.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import real_pools_data
from peer_adapter import make_pool

from bayes_activeeval.oracles._common import stratification_scores
from bayes_activeeval.strata import score_strata

OUT = Path(__file__).parent / "results"
N_STRATA = 256  # DirichletTreeOracle's default


def leaves(pool: dict, histogram: str) -> dict:
    """Leaf counts of the tree oracle's partition of one pool."""
    bp = make_pool(pool)
    strata, _ = score_strata(stratification_scores(bp, None), N_STRATA, histogram=histogram)
    pred = np.asarray(pool["preds"]) == 1
    K = int(strata.max()) + 1
    n_pos = np.bincount(strata, weights=pred, minlength=K)
    n_all = np.bincount(strata, minlength=K)
    with_pos = n_pos > 0
    return {
        "leaves": K,
        "leaves_with_predicted_positive": int(with_pos.sum()),
        "straddling": int(np.sum(with_pos & (n_pos < n_all))),
        "items_in_those_leaves": int(n_all[with_pos].sum()),
        "predicted_positives": int(pred.sum()),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    rows = []
    for name in real_pools_data.pool_names():
        pool = real_pools_data.load_pool(name)
        for histogram in ("fine", "fd"):
            rows.append({"pool": name, "histogram": histogram, **leaves(pool, histogram)})
    out = Path(args.out)
    (out / "tree_leaves.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# The Dirichlet tree's leaves on the real pools",
        "",
        "`PYTHONPATH=. python benchmarks/tree_leaves.py`: the partition of "
        '`DirichletTreeOracle(n_strata=256)` with `histogram="fine"` (default) and `"fd"` on '
        "each cached pool of `benchmarks/real_pools_data.py`. *Straddling*: leaves holding both a "
        "predicted positive and a predicted negative.",
        "",
        "| pool | histogram | leaves | leaves with a predicted positive | straddling | items in "
        "those leaves | predicted positives |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| `{r['pool']}` | `{r['histogram']}` | {r['leaves']} | "
            f"{r['leaves_with_predicted_positive']} | {r['straddling']} | "
            f"{r['items_in_those_leaves']:,} | {r['predicted_positives']:,} |"
        )
    (out / "tree_leaves.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
