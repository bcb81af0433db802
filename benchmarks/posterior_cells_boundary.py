"""Coverage of ``Session.posterior()`` near the boundary: the cells' priors and granularities.

``Session.posterior()`` (what ``bae status`` prints for a static design) is the conjugate
contingency-table posterior with design-weighted pseudo-counts. ``posterior_cells_coverage.py``
measured its cells under an adaptive design with a stochastic labeler; this script measures the
static designs near the boundary of the range, the cells of ``boundary_coverage.py``, with the same
code: its pools (``make_pool``: 20,000 items, true accuracy 0.9 … 1.0, calibrated or underconfident
model probabilities), its static designs (passive, optimal, stratified, Neyman-stratified), its
vectorised draws (``simulate``, 4,000 repetitions, the same seeds) and its posterior fits
(``credible_intervals``: ``contingency_posterior(pool, "accuracy", ..., draws=500, chains=1)``) on
the first ``--post-reps`` repetitions at 50, 200 and 1,000 labels. Variants: 20 × 4 cells and
``labels_per_cell=30`` with the model's prior ``Dir(0.5 π̄)`` (``prior="model"``, the
default until 2026-11-27), and the recalibrated prior (``prior="recalibrated"``, 20 × 4 cells). Every variant is fitted to the same repetitions from the same random state, so the
differences are paired; the variant ``20 x 4 cells`` repeats the posterior column of
``boundary_coverage.json`` exactly (its coverage is
printed beside it, ``committed``).

Usage (all variants: about 10 minutes per variant on one core of the shared 2-core machine with
the defaults, the recalibrated prior about twice that)::

    nice -n 5 python benchmarks/posterior_cells_boundary.py [--post-reps 100]
        [--beliefs calibrated underconfident] [--truths 0.9 0.99 0.995 0.999 1.0]
        [--designs optimal stratified_neyman]
    python benchmarks/posterior_cells_boundary.py --render   # the .md from the .json

The committed results add the recalibrated prior to the previous run (truths below 1, the
reference refitted for the paired differences), one process per belief::

    python benchmarks/posterior_cells_boundary.py --beliefs B --truths 0.9 0.99 0.995 0.999
        --only "20 x 4 cells" "recalibrated" --tag _B
    python benchmarks/posterior_cells_boundary.py --merge _calibrated _underconfident

(the ``_B`` files were removed after the merge). When the static default changed (8702ddc: the
defensive floor) the optimal and Neyman rows were re-run whole, ``--designs optimal
stratified_neyman --tag _B`` per belief, then ``--merge``: a tagged row with every variant of the
old row replaces it. Writes
``benchmarks/results/posterior_cells_boundary.{json,md}``.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import boundary_coverage as bc
import numpy as np

from bayes_activeeval.posterior import contingency_table

OUT = Path(__file__).parent / "results"
#: (column, cell options of ``contingency_posterior``); the first is the reference of the paired
#: differences
VARIANTS = (
    ("20 x 4 cells", {"labels_per_cell": None, "prior": "model"}),
    ("labels_per_cell=30", {"labels_per_cell": 30, "prior": "model"}),
    ("recalibrated", {"labels_per_cell": None, "prior": "recalibrated"}),
)
LOW, HIGH = 0.93, 0.97
#: the repetitions of every cell's draws (``boundary_coverage.py --reps``, default 4,000: the
#: posterior's random state follows them)
REPS = 4000


def mean_cells(pool, idx, v, y, cells, k=3) -> float:
    """The non-empty cells of the first ``k`` repetitions' tables (mean)."""
    return float(
        np.mean(
            [
                contingency_table(
                    pool,
                    "accuracy",
                    idx[i],
                    y[idx[i]],
                    v[i],
                    **{k: c for k, c in cells.items() if k != "prior"},
                )["P_all"].size
                for i in range(k)
            ]
        )
    )


def run(args) -> list[dict]:
    committed = {
        (r["belief"], r["truth"], r["design"], r["n"]): r.get("cov_posterior")
        for r in json.loads((OUT / "boundary_coverage.json").read_text())
    }
    rows = []
    t0 = time.time()
    for b_i, belief in enumerate(bc.BELIEFS):
        if belief not in args.beliefs:
            continue
        for t_i, truth in enumerate(bc.TRUTHS):
            if truth not in args.truths:
                continue
            pool, y, correct = bc.make_pool(truth, np.random.default_rng([b_i, t_i]), belief)
            for d_i, (design, q) in enumerate(bc.static_designs(pool).items()):
                if args.designs and design not in args.designs:
                    continue
                for n in bc.POSTERIOR_SIZES:
                    # the seeds and draws of boundary_coverage.main()
                    rng = np.random.default_rng([b_i, t_i, d_i, n])
                    idx, v, R, se, df, kish, wdf = bc.simulate(q, pool.p, correct, n, REPS, rng)
                    ci = bc.intervals_for(R, se, df, kish, wdf, n)[bc.DEFAULT_COL]
                    row = {
                        "belief": belief,
                        "truth": truth,
                        "design": design,
                        "n": n,
                        "post_reps": args.post_reps,
                        "share_no_error": float(np.mean(R >= 1.0 - 1e-12)),
                        "committed_cov_20x4": committed.get((belief, truth, design, n)),
                        "variants": {},
                    }
                    hits = {}
                    for name, cells in VARIANTS:
                        if args.only and name not in args.only:
                            continue
                        state = copy.deepcopy(rng)  # every variant from the same random state
                        lo, hi, mean = bc.credible_intervals(
                            pool, idx, v, y, args.post_reps, state, **cells
                        )
                        s = bc.credible_summary(truth, lo, hi, mean, ci, R)
                        lo, hi = np.asarray(lo), np.asarray(hi)
                        hits[name] = (lo <= truth) & (truth <= hi)
                        cov = s["cov_posterior"]
                        row["variants"][name] = {
                            "coverage": cov,
                            "mc_se": float(np.sqrt(cov * (1 - cov) / args.post_reps)),
                            "width": s["width_posterior"],
                            "mean_cells": mean_cells(pool, idx, v, y, cells),
                        }
                    ref = hits.get(VARIANTS[0][0])
                    for name in [n for n, _ in VARIANTS[1:] if ref is not None and n in hits]:
                        dlt = hits[name].astype(float) - ref.astype(float)
                        row["variants"][name]["diff"] = float(dlt.mean())
                        row["variants"][name]["diff_se"] = float(
                            dlt.std(ddof=1) / np.sqrt(dlt.size)
                        )
                    rows.append(row)
                    print(
                        f"{belief} {truth} {design} {n}: "
                        + ", ".join(f"{k} {c['coverage']:.2f}" for k, c in row["variants"].items())
                        + f" (committed {row['committed_cov_20x4']}; {time.time() - t0:.0f} s)",
                        flush=True,
                    )
    return rows


def render(meta: dict) -> str:
    rows = meta["rows"]
    names = [n for n, _ in VARIANTS]
    ref, alts = names[0], names[1:]
    lines = [
        "# Session.posterior() near the boundary: 20 × 4 cells, labels_per_cell=30 and the "
        "recalibrated prior",
        "",
        "`benchmarks/posterior_cells_boundary.py`: the static designs of "
        "`boundary_coverage.py` (pools of 20,000 items, true accuracy 0.9-1.0, calibrated or "
        "underconfident model probabilities; passive, optimal, stratified and Neyman-stratified "
        "proposals; the same seeds and draws), the 95 % equal-tailed interval of the conjugate "
        "design-weighted cell posterior (`contingency_posterior(pool, 'accuracy', ..., "
        f"draws=500, chains=1)`) on the first {meta['post_reps']} repetitions of "
        "every cell, every variant fitted to the same repetitions from the same random state. "
        "Variants: `20 x 4 cells` and `labels_per_cell=30`, the model's prior `Dir(s0 π̄)` "
        "(`prior='model'`, `s0 = 0.5`, the default until 2026-11-27); "
        "`recalibrated`, the option `prior='recalibrated'` (per "
        "prediction a calibration map of the model's log-odds and a prior strength, integrated "
        "over their posterior; 20 × 4 cells). "
        "Cells: coverage ± binomial Monte Carlo s.e. (mean width; mean non-empty cells); "
        "`Δ`: the paired difference of coverage (the variant minus 20 × 4) ± its s.e.; "
        "`committed`: the posterior column of `boundary_coverage.json` (20 × 4 cells with "
        "the model's prior, the computation of the first column). At true accuracy 1.0 a "
        "posterior with a density never covers (its upper "
        'end is below 1); where `labels_per_cell=30` "covers" it there (1,000 labels) its '
        "draws of the error rate are below 1e-14 and the accuracy's upper end exceeds 1 by "
        "floating-point rounding — an artefact, not coverage."
        + (
            " The rows at true accuracy 1.0 were not re-run with the recalibrated prior "
            "(`—`): they are those of the previous run."
            if any(len(r["variants"]) < len(names) for r in rows)
            else ""
        ),
        "",
        "| belief | true accuracy | design | n | no error | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"Δ {a}" for a in alts)
        + " | committed |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in names + alts) + " | --- |",
    ]
    for r in rows:
        cells = []
        for name in names:
            c = r["variants"].get(name)
            cells.append(
                "—"
                if c is None
                else f"{c['coverage']:.2f} ± {c['mc_se']:.2f} ({c['width']:.4f}; "
                f"{c['mean_cells']:.0f})"
            )
        for name in alts:
            d = r["variants"].get(name)
            cells.append("—" if d is None else f"{d['diff']:+.2f} ± {d['diff_se']:.2f}")
        com = r["committed_cov_20x4"]
        lines.append(
            f"| {r['belief']} | {r['truth']} | {r['design']} | {r['n']} | "
            f"{r['share_no_error']:.2f} | "
            + " | ".join(cells)
            + " | "
            + ("" if com is None else f"{com:.2f}")
            + " |"
        )
    lines += ["", "## Summary", ""]
    lines += summary(rows, ref, alts)
    merged = meta.get("merged")
    if merged and "previous" in merged:  # a re-run of whole cells after a re-run of variants
        prev = merged["previous"]
        lines += [
            "",
            f"The rows of {', '.join(merged['designs'])} re-run with every variant (`--designs`, "
            f"one process per belief, `--tag` {' '.join(merged['tags'])}, then `--merge`): "
            f"{meta['seconds']:.0f} s summed over the processes on the shared 2-core machine. In "
            f"the other rows {', '.join(prev['fitted'])} are from an earlier re-run of those "
            f"variants ({prev['seconds']:.0f} s) and the rest from the run before it (the same "
            "computation on the same seeds: its `20 x 4 cells` column, re-fitted for the paired "
            "differences, came out identical).",
            "",
        ]
    elif merged:
        lines += [
            "",
            f"Re-run of {', '.join(merged['fitted'])} (`--only`, one process per belief, "
            f"`--tag` {' '.join(merged['tags'])}, then `--merge`): {meta['seconds']:.0f} s summed "
            "over the processes on the shared 2-core machine; the other columns are those of the "
            "previous run (the same computation on the same seeds: its `20 x 4 cells` column, "
            "re-fitted for the paired differences, came out identical).",
            "",
        ]
    else:
        lines += [
            "",
            f"Run time {meta['seconds']:.0f} s on one core of the shared 2-core machine.",
            "",
        ]
    return "\n".join(lines)


def summary(rows, ref, alts) -> list[str]:
    out = []
    names = [ref, *alts]
    for belief in dict.fromkeys(r["belief"] for r in rows):
        for n in dict.fromkeys(r["n"] for r in rows):
            rs = [r for r in rows if r["belief"] == belief and 0.9 < r["truth"] < 1.0]
            rs = [r for r in rs if r["n"] == n and all(k in r["variants"] for k in names)]
            if not rs:
                continue
            rng_ = {
                k: (
                    min(r["variants"][k]["coverage"] for r in rs),
                    max(r["variants"][k]["coverage"] for r in rs),
                )
                for k in names
            }
            out.append(
                f"- {belief}, true accuracy 0.99-0.999, {n} labels ({len(rs)} cells): coverage "
                + ", ".join(f"{a:.2f}-{b:.2f} ({k})" for k, (a, b) in rng_.items())
                + "."
            )
    for belief in dict.fromkeys(r["belief"] for r in rows):
        rs = [r for r in rows if r["belief"] == belief and r["truth"] < 1.0]
        rs = [r for r in rs if all(k in r["variants"] for k in names)]
        a = np.array([r["variants"][ref]["coverage"] for r in rs])
        wa = np.array([r["variants"][ref]["width"] for r in rs])
        ok = (a >= LOW) & (a <= HIGH)
        for alt in alts:
            b = np.array([r["variants"][alt]["coverage"] for r in rs])
            wb = np.array([r["variants"][alt]["width"] for r in rs])
            d = np.array([r["variants"][alt]["diff"] for r in rs])
            dse = np.array([r["variants"][alt]["diff_se"] for r in rs])
            worse = d < -2 * np.where(dse > 0, dse, np.inf)
            better = d > 2 * np.where(dse > 0, dse, np.inf)
            out.append(
                f"- {belief}, true accuracy < 1 ({len(rs)} cells): mean coverage "
                f"{a.mean():.3f} ({ref}) and {b.mean():.3f} ({alt}), range {b.min():.2f}-"
                f"{b.max():.2f}, below 0.90 in {int((b < 0.9).sum())} cells; {alt} lower by "
                f"more than two paired s.e. in {int(worse.sum())} cells, higher by more than "
                f"two in {int(better.sum())}; of the {int(ok.sum())} cells where {ref} covers "
                f"within [{LOW}, {HIGH}], {alt} falls below {LOW} in "
                f"{int((ok & (b < LOW)).sum())}; mean width ratio to {ref} "
                f"{np.mean(wb / wa):.2f} (range {np.min(wb / wa):.2f}-{np.max(wb / wa):.2f})."
            )
    return out


KEY = ("belief", "truth", "design", "n")


def merge(old: dict, parts: list[dict], tags: list[str]) -> dict:
    """The results ``old`` with the rows of ``parts`` (the first part wins for a cell in several):
    a part's row that re-fits every variant of the old row replaces it whole (a re-run of the
    cell: its share without an error and its committed column too); otherwise its variants
    replace the old row's of the same name. Cells only in ``parts`` are not added."""
    new = {}
    for part in parts:
        for r in part["rows"]:
            new.setdefault(tuple(r[k] for k in KEY), r)
    rows = []
    for r in old["rows"]:
        n = new.get(tuple(r[k] for k in KEY))
        if n is not None and set(r["variants"]) <= set(n["variants"]):
            r = n
        elif n is not None:
            r = {**r, "variants": {**r["variants"], **n["variants"]}}
        rows.append(r)
    meta = {
        "post_reps": old["post_reps"],
        "seconds": sum(p["seconds"] for p in parts),
        "merged": {
            "tags": tags,
            "fitted": sorted({v for p in parts for r in p["rows"] for v in r["variants"]}),
            "designs": sorted({r["design"] for p in parts for r in p["rows"]}),
        },
        "rows": rows,
    }
    if "merged" in old:
        prev = {k: v for k, v in old["merged"].items() if k != "previous"}
        meta["merged"]["previous"] = prev | {"seconds": old["seconds"]}
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--post-reps", type=int, default=100)
    ap.add_argument("--beliefs", nargs="*", default=list(bc.BELIEFS))
    ap.add_argument("--truths", nargs="*", type=float, default=list(bc.TRUTHS))
    ap.add_argument(
        "--designs", nargs="*", default=None, help="Only these static designs (default: all)."
    )
    ap.add_argument("--render", action="store_true", help="Only rewrite the .md from the .json.")
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="Fit only these variants (with --tag; --merge adds them to the rows' others).",
    )
    ap.add_argument("--tag", default="", help="Write posterior_cells_boundary<tag>.json only.")
    ap.add_argument(
        "--merge",
        nargs="*",
        default=None,
        help="Merge the rows of posterior_cells_boundary<tag>.json for these tags (the first "
        "wins for a cell in several) with the rows of the results file not in any of them, "
        "and write the results.",
    )
    args = ap.parse_args(argv)
    path = OUT / "posterior_cells_boundary.json"
    if args.merge is not None:
        old = json.loads(path.read_text())
        parts = [
            json.loads((OUT / f"posterior_cells_boundary{t}.json").read_text()) for t in args.merge
        ]
        meta = merge(old, parts, args.merge)
        path.write_text(json.dumps(meta, indent=1))
    elif args.render:
        meta = json.loads(path.read_text())
    else:
        t0 = time.time()
        rows = run(args)
        meta = {"post_reps": args.post_reps, "seconds": time.time() - t0, "rows": rows}
        OUT.mkdir(exist_ok=True)
        if args.tag:
            (OUT / f"posterior_cells_boundary{args.tag}.json").write_text(
                json.dumps(meta, indent=1)
            )
            return
        path.write_text(json.dumps(meta, indent=1))
    md = render(meta)
    (OUT / "posterior_cells_boundary.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
