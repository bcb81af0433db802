"""Where the default adaptive design spends its labels on a real pool (issue 12 diagnosis).

One run of ``ActiveEvaluator(pool, "f1")`` (no options, 50-label stages, seed 0) on a pool of
``real_pools_data.py``; every 400 labels it records the share of the proposal ``q`` on the
predicted positives, on the 200 predicted negatives with the highest scores (just below the
threshold), on the next 19,800 and on the rest, next to the belief's expected number of
positives among the *unlabeled* items of each group and the true number, and, for the
``"auto"`` belief, the stacking weights of its members and each member's own expected number
of positives among the unlabeled items of the rest (the deepest group).

Usage::

    python benchmarks/default_allocation.py [--pool febrl4_sub400_initial_svm] [--seed 0]
    python benchmarks/default_allocation.py --oracle calibration   # calibration alone
    python benchmarks/default_allocation.py --oracle "auto:weights_by=prediction"  # with options

writes ``results/default_allocation.{json,md}`` (``default_allocation_<pool>_<oracle>.*`` for
another pool and with ``--oracle``, every character of ``<oracle>`` other than a letter, digit,
``-`` or ``_`` written as ``_``; seconds). With ``weights_by="prediction"`` the weights of each
cell are reported too (for a binary pool, cell 0 the predicted negatives and 1 the positives).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from peer_adapter import make_pool, parse_oracle
from real_pools_data import load_pool

import bayes_activeeval as bae

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default="febrl4_sub400_initial_svm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--labels", type=int, default=2000)
    ap.add_argument(
        "--oracle", default=None, help="name[:key=value;...] of an oracle (default: the default)"
    )
    args = ap.parse_args()
    stem = (
        "default_allocation"
        + (f"_{args.pool}" if args.pool != "febrl4_sub400_initial_svm" else "")
        + ("_" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in args.oracle)
           if args.oracle else "")
    )  # fmt: skip
    name, options = parse_oracle(args.oracle) if args.oracle else (None, {})
    kw = {"oracle": name, **({"oracle_options": options} if options else {})}
    call = "ActiveEvaluator(pool, 'f1'" + "".join(f", {k}={v!r}" for k, v in kw.items() if v) + ")"
    d = load_pool(args.pool)
    y, f, s = d["labels"], d["preds"], d["scores"]
    neg = np.flatnonzero(f == 0)
    order = neg[np.argsort(-s[neg], kind="stable")]
    groups = {"predicted positive": f == 1}
    for a, b, label in ((0, 200, "200 just below"), (200, 20_000, "next 19,800"),
                        (20_000, None, "the rest")):  # fmt: skip
        g = np.zeros(y.size, dtype=bool)
        g[order[a:b]] = True
        groups[label] = g
    deep = groups["the rest"]
    ev = bae.ActiveEvaluator(make_pool(d), "f1", rng=args.seed, **kw)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while True:
            if ev.n_labels % 400 == 0:
                q = ev._proposal.q / ev._proposal.q.sum()
                b = ev.oracle.belief().probs[:, 1]
                open_ = ev._label < 0
                rows.append(
                    {
                        "labels": int(ev.n_labels),
                        "q_share": {g: float(q[m].sum()) for g, m in groups.items()},
                        "belief_positives_unlabeled": {
                            g: float(b[m & open_].sum()) for g, m in groups.items()
                        },
                        "true_positives_unlabeled": {
                            g: int(y[m & open_].sum()) for g, m in groups.items()
                        },
                        # each member's expected positives among the unlabeled items of the
                        # deepest group (an "auto" belief; none for one oracle model)
                        "member_positives_rest": {
                            name: float(m.belief().probs[:, 1][deep & open_].sum())
                            for name, m in getattr(ev.oracle, "member_oracles", {}).items()
                        },
                        # the stacking weights of an "auto" belief (none for one oracle model)
                        "weights": dict(
                            zip(
                                getattr(ev.oracle, "member_names", []),
                                map(float, getattr(ev.oracle, "weights_", [])),
                                strict=True,
                            )
                        ),
                        # weights_by="prediction": the weights of each predicted class
                        "cell_weights": np.asarray(
                            getattr(ev.oracle, "cell_weights_", np.zeros((1, 0)))
                        ).tolist(),
                    }
                )
            if ev.n_labels >= args.labels:
                break
            idx = ev.query(50)
            ev.update(idx, y[idx])
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "pool": args.pool,
        "seed": args.seed,
        "oracle": ev.get_state()["oracle"],
        "oracle_options": options,
    }
    out["rows"] = rows
    (RESULTS / f"{stem}.json").write_text(json.dumps(out, indent=1))
    names = list(groups)
    lines = [
        f"# Where the default spends its labels: `{args.pool}`, seed {args.seed}",
        "",
        f"Generated {out['date']} by `benchmarks/default_allocation.py`: one run of "
        f"`{call}` (oracle `{out['oracle']}`, 50-label stages). Per group: share of the proposal q; "
        "expected positives among its unlabeled items under the belief / true number.",
        "",
        "| labels | "
        + " | ".join(f"q: {g}" for g in names)
        + " | "
        + " | ".join(f"belief / true positives: {g}" for g in names)
        + " | stacking weights (`auto`) | each member's expected positives in the rest |",
        "| ---: |" + " ---: |" * (2 * len(names)) + " --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['labels']:,} | "
            + " | ".join(f"{r['q_share'][g]:.3f}" for g in names)
            + " | "
            + " | ".join(
                f"{r['belief_positives_unlabeled'][g]:.1f} / {r['true_positives_unlabeled'][g]}"
                for g in names
            )
            + " | "
            + (", ".join(f"{k} {v:.3f}" for k, v in r["weights"].items()) or "—")
            + (
                "; by predicted class: "
                + "; ".join(
                    f"{c}: " + ", ".join(f"{w:.3f}" for w in row)
                    for c, row in enumerate(r["cell_weights"])
                )
                if len(r["cell_weights"]) > 1
                else ""
            )
            + " | "
            + (", ".join(f"{k} {v:.1f}" for k, v in r["member_positives_rest"].items()) or "—")
            + " |"
        )
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
