"""Coverage of the contingency-table posterior's 95 % credible intervals (issue 3, item 5).

Same pools as ``adaptive_f1.py``; each repetition runs the adaptive evaluator (2,000 labels, plug-in
or Dirichlet-tree oracle, deterministic labeler) and computes 95 % intervals for the pool F1 from:

- ``wald_clt`` / ``wald_martingale``: the Wald intervals of the same run;
- ``conjugate``: the conjugate cell model with ``weighting="none"`` (finite population: the
  unlabeled items' labels are drawn per cell from the posterior predictive);
- ``conjugate_design``: the conjugate cell model with design-weighted pseudo-counts;
- ``pymc``: the hierarchical PyMC cell model (``weighting="none"``; 300 draws, 500 tuning steps);
- ``calibration``: the item-level finite-population posterior (``method="calibration"``: the
  Bayesian calibration of the model's log-odds fitted to the labeled items, unlabeled items'
  labels drawn from its posterior predictive);
- ``conjugate_recal`` / ``conjugate_design_recal``: ``conjugate`` / ``conjugate_design`` with the
  recalibrated cell prior (``prior="recalibrated"``: a Platt map of the model's log-odds and a
  prior strength, integrated over their grid posterior given all cells' counts — the
  hierarchical beta-binomial model of Gelman et al., *Bayesian Data Analysis*, Sec. 5.3).

``--methods`` (comma list, default all) restricts a run to some of them (the adaptive run and
the Wald intervals are always computed).

Each run handles one oracle (``--oracle``) and writes its raw records to
``results/contingency_coverage_<oracle>.json`` (``--tag recal``:
``results/contingency_coverage_recal_<oracle>.json``); ``--report`` merges the runs into
``results/contingency_coverage.json`` and ``.md`` (coverage ± its binomial Monte Carlo standard
error, mean width). The untagged runs make the main table; the ``recal`` runs (the adaptive runs
of the same seeds under the current code, with ``conjugate`` and ``conjugate_design`` again next
to their recalibrated versions, for a paired comparison) a second table of their own, with the
paired differences: no repetition is counted twice. An interval covers when
``lo − 1e-9 ≤ F1 ≤ hi + 1e-9``: once every positive is labeled the pool F1 is the upper end of
the finite-population posteriors, reached up to the last bit of floating point.

Run (each run ≤ 20 min on the shared machine):
    PYTHONPATH=. python benchmarks/contingency_coverage.py --oracle model --minutes 20 --max-reps 40
    PYTHONPATH=. python benchmarks/contingency_coverage.py --oracle dirichlet-tree --minutes 20
    (more runs with --seed0 100, 200, … are merged by the report)
    PYTHONPATH=. python benchmarks/contingency_coverage.py --report
The paired model-prior / recalibrated-prior runs (the seeds of the untagged runs):
    M=wald_martingale,conjugate,conjugate_design,conjugate_recal,conjugate_design_recal
    PYTHONPATH=. python benchmarks/contingency_coverage.py --oracle model --tag recal \
        --seeds 0-10,100-110,200-212,300-315 --max-reps 51 --minutes 35 --methods $M
    PYTHONPATH=. python benchmarks/contingency_coverage.py --oracle dirichlet-tree --tag recal \
        --seeds 0-9,100-111,200-212,300-315 --max-reps 51 --minutes 35 --methods $M
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from adaptive_f1 import BUDGET, SETTINGS, make, truth_f1

import bayes_activeeval as bae
from bayes_activeeval.estimators import UndefinedEstimateWarning

OUT = Path(__file__).parent / "results"
METHODS = (
    "wald_clt",
    "wald_martingale",
    "conjugate",
    "conjugate_design",
    "pymc",
    "calibration",
)
#: the columns of the recalibrated-prior runs (``--tag recal``): the model's prior and the
#: recalibrated one on the same adaptive runs
RECAL_METHODS = (
    "wald_martingale",
    "conjugate",
    "conjugate_recal",
    "conjugate_design",
    "conjugate_design_recal",
)
ALL_METHODS = (*METHODS, "conjugate_recal", "conjugate_design_recal")
LABELS = {
    "wald_clt": "Wald CLT",
    "wald_martingale": "Wald martingale",
    "conjugate": "finite-pop. cells",
    "conjugate_design": "design cells",
    "pymc": "pymc cells",
    "calibration": "calibration (new)",
    "conjugate_recal": "finite-pop. cells, recalibrated prior",
    "conjugate_design_recal": "design cells, recalibrated prior",
}
CALLS = {
    # the model's prior, named: the default became prior="auto" (recalibrated for the design
    # cells) on 2026-11-27, and these columns measured the model's prior
    "conjugate": dict(method="conjugate", draws=500, weighting="none", prior="model"),
    "conjugate_design": dict(method="conjugate", draws=500, prior="model"),
    "pymc": dict(method="pymc", draws=300, tune=500),
    "calibration": dict(method="calibration", draws=500),
    "conjugate_recal": dict(method="conjugate", draws=500, weighting="none", prior="recalibrated"),
    "conjugate_design_recal": dict(method="conjugate", draws=500, prior="recalibrated"),
}


def interval(post):
    g = post.posterior["measure"].values.ravel()
    g = g[np.isfinite(g)]
    lo, hi = np.quantile(g, [0.025, 0.975])
    return float(lo), float(hi), float(g.mean())


def parse_seeds(text: str) -> list[int]:
    """``"0-10,100-111"`` -> ``[0, …, 10, 100, …, 111]`` (inclusive ranges)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def run(args) -> None:
    warnings.simplefilter("ignore", UndefinedEstimateWarning)
    methods = ALL_METHODS if args.methods is None else tuple(args.methods.split(","))
    bad = [m for m in methods if m not in ALL_METHODS]
    if bad:
        raise ValueError(f"--methods: unknown method(s) {bad}; choose from {list(ALL_METHODS)}")
    seeds = (
        list(range(args.seed0, args.seed0 + args.max_reps))
        if args.seeds is None
        else parse_seeds(args.seeds)[: args.max_reps]
    )
    datas = [make(s) for s in SETTINGS]
    truths = [truth_f1(d) for d in datas]
    names = [s["name"] for s in SETTINGS]
    rec: dict[str, list] = {n: [] for n in names}
    secs: dict[str, list] = {m: [] for m in CALLS if m in methods}
    t0 = time.time()
    t_end = t0 + 60 * args.minutes
    done: list[int] = []
    for seed in seeds:
        if time.time() >= t_end:
            break
        for name, d in zip(names, datas, strict=True):
            ev = bae.ActiveEvaluator(d.pool, "f1", oracle=args.oracle, rng=seed)
            est = ev.run(d.labeler, budget=BUDGET, progress=False)
            r = {
                "positives_found": int((ev.known & (d.labels == 1)).sum()),
                "version": 3,
                "seed": seed,
            }
            # the CLT variance is the AIS estimate's (estimator="ipw"); the model-assisted
            # default has the martingale one only (asking it for "clt" raises)
            walds = [("wald_martingale", est)]
            if ev.estimator == "ipw" and "wald_clt" in methods:
                walds.insert(0, ("wald_clt", ev.estimate("clt")))
            for key, e in walds:
                lo, hi = e.confidence_interval(0.95, "wald")
                r[key] = (lo, hi, e.value)
            for key, kw in CALLS.items():
                if key not in methods:
                    continue
                t = time.perf_counter()
                r[key] = interval(ev.posterior(rng=seed, **kw))
                secs[key].append(time.perf_counter() - t)
            rec[name].append(r)
        done.append(seed)
        print(
            f"seed {seed}: {len(done)} reps, {(t_end - time.time()) / 60:.1f} min left", flush=True
        )
    OUT.mkdir(exist_ok=True)
    out = {
        "oracle": args.oracle,
        "budget": BUDGET,
        "seed0": seeds[0],
        "seeds": done,
        "methods": list(methods),
        "repetitions": len(done),
        "wall_minutes": (time.time() - t0) / 60,
        "truths": dict(zip(names, truths, strict=True)),
        "seconds_per_posterior": {k: float(np.median(v)) for k, v in secs.items() if v},
        "records": rec,
    }
    tag = f"_s{seeds[0]}" if seeds[0] else ""
    prefix = f"contingency_coverage_{args.tag}_" if args.tag else "contingency_coverage_"
    (OUT / f"{prefix}{args.oracle}{tag}.json").write_text(json.dumps(out, indent=1))


def merge(paths) -> dict[str, dict]:
    """The runs of each oracle merged (several runs with different seeds)."""
    runs: dict[str, dict] = {}
    for p in paths:
        part = json.loads(p.read_text())
        run_ = runs.setdefault(
            part["oracle"],
            {
                **part,
                "records": {k: [] for k in part["records"]},
                "repetitions": 0,
                "wall_minutes": 0,
                "seeds": [],
            },
        )
        run_["seeds"] += part.get("seeds", [])
        run_["repetitions"] += part["repetitions"]
        run_["wall_minutes"] += part["wall_minutes"]
        for k, v in part["records"].items():
            run_["records"][k].extend(v)
    return runs


def covers(interval_, truth: float) -> bool:
    # floating-point tolerance: when every positive is labeled, the truth is the upper end of
    # the posterior and g(R) may differ from it in the last bit
    tol = 1e-9 * max(1.0, abs(truth))
    return interval_[0] - tol <= truth <= interval_[1] + tol


def recal_rows(recal_runs: dict[str, dict]) -> list[dict]:
    """Rows of the recalibrated-prior runs: every column on the same adaptive runs, and the
    paired differences (recalibrated − model prior) of coverage and width with their s.e."""
    rows = []
    for oracle, run_ in recal_runs.items():
        for name, rs in run_["records"].items():
            truth = run_["truths"][name]
            row = {"setting": name, "oracle": oracle, "true_f1": truth, "n": len(rs)}
            row["mean_positives_found"] = float(np.mean([r["positives_found"] for r in rs]))
            for key in RECAL_METHODS:
                vals = [r[key] for r in rs]
                c = np.array([covers(v, truth) for v in vals], dtype=float)
                w = np.array([v[1] - v[0] for v in vals])
                centre = np.array([v[2] for v in vals])
                row[key] = {
                    "coverage": float(c.mean()),
                    "coverage_mc_se": float(np.sqrt(c.mean() * (1 - c.mean()) / len(c))),
                    "mean_width": float(w.mean()),
                    "rmse_center": float(np.sqrt(np.mean((centre - truth) ** 2))),
                    "bias_center": float(np.mean(centre - truth)),
                    "n": len(c),
                }
            for new, old in (
                ("conjugate_recal", "conjugate"),
                ("conjugate_design_recal", "conjugate_design"),
            ):
                dc = np.array([covers(r[new], truth) - covers(r[old], truth) for r in rs], float)
                dw = np.array([(r[new][1] - r[new][0]) - (r[old][1] - r[old][0]) for r in rs])
                row[f"{new}_minus_{old}"] = {
                    "coverage_diff": float(dc.mean()),
                    "coverage_diff_se": float(dc.std(ddof=1) / np.sqrt(len(dc))),
                    "width_diff": float(dw.mean()),
                    "width_diff_se": float(dw.std(ddof=1) / np.sqrt(len(dw))),
                }
            rows.append(row)
    return rows


def report() -> None:
    # the untagged runs make the main table; the recal runs (current code, the model's and the
    # recalibrated prior on the same adaptive runs) a table of their own: no run counted twice
    recal = sorted(OUT.glob("contingency_coverage_recal_*.json"))
    base = sorted(set(OUT.glob("contingency_coverage_*.json")) - set(recal))
    recal_runs = merge(recal)
    runs = list(merge(base).values())
    rows = []
    for run_ in runs:
        for name, rs in run_["records"].items():
            truth = run_["truths"][name]
            row = {"setting": name, "oracle": run_["oracle"], "true_f1": truth, "n": len(rs)}
            row["mean_positives_found"] = float(np.mean([r["positives_found"] for r in rs]))
            for key in METHODS:
                # the first runs (no "version") took the CLT interval from ev.run(), whose
                # default variance is the martingale one: their CLT column is dropped
                # version 2 (seeds 200-): the cell models were called without method= and got
                # the new default of ActiveEvaluator.posterior() (calibration): dropped
                vals = [
                    r[key]
                    for r in rs
                    if key in r
                    and (key != "wald_clt" or r.get("version", 1) >= 2)
                    and (key not in ("conjugate", "conjugate_design") or r.get("version", 1) != 2)
                ]
                if not vals:
                    continue
                cov = float(np.mean([covers(v, truth) for v in vals]))
                row[key] = {
                    "coverage": cov,
                    "coverage_mc_se": float(np.sqrt(cov * (1 - cov) / len(vals))),
                    "mean_width": float(np.mean([hi - lo for lo, hi, _ in vals])),
                    "rmse_center": float(np.sqrt(np.mean([(c - truth) ** 2 for _, _, c in vals]))),
                    "n": len(vals),
                }
            rows.append(row)
    meta = {
        r["oracle"]: {
            "repetitions": r["repetitions"],
            "wall_minutes": r["wall_minutes"],
            "seconds_per_posterior": r["seconds_per_posterior"],
        }
        for r in runs
    }
    meta_recal = {
        o: {
            "repetitions": r["repetitions"],
            "seeds": sorted(r["seeds"]),
            "wall_minutes": r["wall_minutes"],
            "seconds_per_posterior": r["seconds_per_posterior"],
        }
        for o, r in recal_runs.items()
    }
    rrows = recal_rows(recal_runs)
    out = {"runs": meta, "rows": rows}
    if recal_runs:
        out |= {"recal_runs": meta_recal, "recal_rows": rrows}
    (OUT / "contingency_coverage.json").write_text(json.dumps(out, indent=2))
    lines = [
        f"# Coverage of 95 % intervals for the pool F1 at {BUDGET} labels",
        "",
        "**Recorded with old code.** The runs of this table were made with the code of commit "
        "cf558fe (the AIS estimate was then the evaluator's default, and the plug-in oracle's "
        "proposal re-drew the same items: 344,967 draws for 2,000 items in one run); they do "
        "not describe the "
        "current code, whose figures are in the paired re-run below. "
        "Coverage ± binomial Monte Carlo s.e. (mean width, repetitions). Every method runs on "
        "the same adaptive runs; the CLT column lacks the first run (its interval was the "
        "martingale one) and the two cell columns lack the seed-200 run (they were called with "
        "the evaluator's new default, the calibration posterior). Columns: Wald intervals of the adaptive estimate "
        "(CLT and martingale variance); conjugate cell model with finite-population inference "
        "(`weighting='none'`) and with design-weighted counts; the hierarchical PyMC cell model "
        "(`method='pymc'`); the item-level calibration posterior (`method='calibration'`).",
        "",
        "| setting | oracle | runs | positives found | "
        + " | ".join(LABELS[m] for m in METHODS)
        + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in METHODS) + " |",
    ]
    for r in rows:
        cells = []
        for m in METHODS:
            c = r.get(m)
            cells.append(
                ""
                if c is None
                else f"{c['coverage']:.2f} ± {c['coverage_mc_se']:.2f} "
                f"({c['mean_width']:.3f}, n={c['n']})"
            )
        lines.append(
            f"| {r['setting']} | {r['oracle']} | {r['n']} | {r['mean_positives_found']:.1f} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "Median seconds per posterior call in the first run of each oracle (pools of 100,000 and "
        "200,000 items; shared 2-core machine under load; PyMC: 2 chains × (500 tune + 300 "
        "draws), compilation included):",
        "",
    ]
    for o, m in meta.items():
        s = ", ".join(f"{k} {v:.2f}" for k, v in m["seconds_per_posterior"].items())
        lines.append(f"- {o}: {m['repetitions']} repetitions in {m['wall_minutes']:.0f} min; {s}")
    if recal_runs:
        lines += recal_lines(rrows, meta_recal)
    (OUT / "contingency_coverage.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def recal_lines(rows: list[dict], meta: dict) -> list[str]:
    """The markdown section of the recalibrated-prior runs."""
    lines = [
        "",
        "## The cells' prior: the model's probabilities or recalibrated (paired re-run)",
        "",
        "A separate run per oracle (`--tag recal`, files `contingency_coverage_recal_<oracle>.json`) "
        "of the code of 2026-11-27 (b5204f4) on the seeds of the runs above. It repeats the "
        "adaptive runs and computes on each the martingale Wald interval and both conjugate cell "
        "models with the model's prior (`prior='model'`, then the default) and with the "
        "recalibrated one (`prior='recalibrated'`, since then the default with design-weighted "
        "counts), so the two priors are compared on the same runs. The adaptive "
        "runs are those of the current evaluator, not of the runs above (its defaults have "
        "changed since), so its model-prior columns are not the ones above. Coverage ± binomial "
        "Monte Carlo s.e. (mean width; mean bias of the centre); Δ = recalibrated − model "
        "prior, mean paired difference of coverage ± its s.e. (mean paired difference of width "
        "in brackets).",
        "",
        "| setting | oracle | runs | positives found | "
        + " | ".join(LABELS[m] for m in RECAL_METHODS)
        + " | Δ finite-pop. | Δ design |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in RECAL_METHODS) + " | --- | --- |",
    ]
    for r in rows:
        cells = [
            f"{r[m]['coverage']:.2f} ± {r[m]['coverage_mc_se']:.2f} "
            f"({r[m]['mean_width']:.3f}; {r[m]['bias_center']:+.3f})"
            for m in RECAL_METHODS
        ]
        for key in (
            "conjugate_recal_minus_conjugate",
            "conjugate_design_recal_minus_conjugate_design",
        ):
            d = r[key]
            cells.append(
                f"{d['coverage_diff']:+.2f} ± {d['coverage_diff_se']:.2f} ({d['width_diff']:+.3f})"
            )
        lines.append(
            f"| {r['setting']} | {r['oracle']} | {r['n']} | {r['mean_positives_found']:.1f} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "Median seconds per posterior call in these runs:", ""]
    for o, m in meta.items():
        s = ", ".join(f"{k} {v:.2f}" for k, v in m["seconds_per_posterior"].items())
        lines.append(
            f"- {o}: {m['repetitions']} repetitions (seeds {seed_ranges(m['seeds'])}) in "
            f"{m['wall_minutes']:.0f} min; {s}"
        )
    return lines


def seed_ranges(seeds: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    parts: list[str] = []
    for s in sorted(seeds):
        if parts and s == parts[-1][1] + 1:
            parts[-1][1] = s
        else:
            parts.append([s, s])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default="model")
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--max-reps", type=int, default=40)
    ap.add_argument("--seed0", type=int, default=0, help="first seed (runs to be merged)")
    ap.add_argument(
        "--seeds", default=None, help="explicit seeds, e.g. 0-10,100-111 (overrides --seed0)"
    )
    ap.add_argument(
        "--methods",
        default=None,
        help=f"comma list of columns to compute (default all: {','.join(ALL_METHODS)})",
    )
    ap.add_argument("--tag", default="", help="file name tag: contingency_coverage_<tag>_<oracle>")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()
    if args.report:
        report()
    else:
        run(args)


if __name__ == "__main__":
    main()
