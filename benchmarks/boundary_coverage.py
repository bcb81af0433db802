"""Coverage and width of every interval method near the boundary of the range (issue 13).

A binary pool of 20,000 items whose model has accuracy exactly 0.9, 0.99, 0.995, 0.999 or 1.0
(the wrong items are drawn with probability proportional to the model's own error probability, so
its probabilities are informative, as a good model's are). Designs: passive (``q = p``) and the
package's ``optimal_proposal(pool, "accuracy")``. Draws ``n`` = 20 … 2,000 with replacement,
``--reps`` repetitions per cell (default 4,000), all vectorised over repetitions with NumPy: the
estimate, its delta-method standard error and the Satterthwaite df are the closed forms of
:func:`bayes_activeeval.weighted_estimate` for a plain risk (checked against it on the first
repetitions of every cell), the intervals come from :func:`bayes_activeeval.intervals.interval`.

Beside them, the coverage of the 95% equal-tailed credible interval of the posterior that
``bae status`` prints (``Session.posterior()``: the conjugate contingency-table model with
design-weighted counts) and of the same model with ``prior_strength`` scaled to the labels, on
the first ``--post-reps`` repetitions of every cell (each one a posterior fit).

Adaptive designs (``--part adaptive``): one ``ActiveEvaluator`` run per repetition, evaluated at
every budget on its way to 2,000 labels — the pinned former defaults (``adaptive``,
``adaptive_model_assisted``) and the package's default exactly as a user gets it
(``adaptive_default``: ``ActiveEvaluator(pool, "accuracy")``, no options), whose own interval is
the column ``package`` (for every adaptive design its ``confidence_interval()``: the gamma
interval of the difference estimate, issue 13, the capped modified Wilson interval of IPW) beside the
previous default computed on the estimate before its bound rule.

Usage: nice -n 5 python benchmarks/boundary_coverage.py [--reps 4000] [--post-reps 200] [--quick]
Writes benchmarks/results/boundary_coverage.{json,md}. The committed adaptive rows were run one
belief at a time (``B`` = ``calibrated``, ``underconfident``) and merged with the static rows::

    python benchmarks/boundary_coverage.py --part adaptive --adaptive-designs adaptive_default
        --adaptive-reps 600 --adaptive-post-reps 30 --beliefs B --adaptive-beliefs B --out ad_B
    python benchmarks/boundary_coverage.py --part adaptive --adaptive-designs adaptive
        adaptive_model_assisted --adaptive-reps 300 --adaptive-post-reps 30 --beliefs B
        --adaptive-beliefs B --out ipw_B
    python benchmarks/boundary_coverage.py --merge static ad_calibrated ad_underconfident
        ipw_calibrated ipw_underconfident --out boundary_coverage

(one command each; ``static`` holds the static designs' rows of the previous results file; the
intermediate files were removed after the merge). The anticipated variance on the gamma
interval's far side changed the difference estimate's interval only, so its two designs were
re-run without posterior fits (``--adaptive-post-reps 0``; ``ma_B``: ``adaptive_model_assisted``,
300 runs; ``ad_B``: ``adaptive_default``, 300 runs, was 600, for time) and merged with the
unchanged rows (``kept``: static and ``adaptive``) carrying the posterior columns over from the
previous results (:func:`carry_posterior`)::

    python benchmarks/boundary_coverage.py --merge kept ad_calibrated ad_underconfident
        ma_calibrated ma_underconfident --carry-posterior previous --out boundary_coverage
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

import bayes_activeeval as bae
from bayes_activeeval import intervals as iv

OUT = Path(__file__).parent / "results"
N_ITEMS = 20_000
TRUTHS = (0.9, 0.99, 0.995, 0.999, 1.0)
SIZES = (20, 50, 100, 200, 500, 1000, 2000)
BELIEFS = ("calibrated", "underconfident")
#: sizes at which the posterior is fitted (each repetition is one fit)
POSTERIOR_SIZES = (50, 200, 1000)
LEVEL = 0.95
#: The column that is the package's default: ``Estimate.confidence_interval()`` applies the
#: modified Wilson interval with the weight-df adjustment (``n_df`` = weight df − 1)
DEFAULT_COL = "modified_wilson_hdf"
DEFAULT_METHOD_NAME = "modified_wilson"
#: (column, method, options) of every interval compared
METHODS = (
    ("wald", "wald", {}),
    ("t", "t", {}),
    ("logit", "logit", {}),
    ("wilson", "wilson", {}),
    ("wilson_df", "wilson", {"n_df": "design"}),
    ("wilson_satt", "wilson", {"n_df": "satterthwaite"}),
    ("modified_wilson", "modified_wilson", {}),
    ("modified_wilson_df", "modified_wilson", {"n_df": "design"}),
    ("modified_wilson_cap", "modified_wilson", {"n_max": True}),
    ("modified_wilson_wdf", "modified_wilson", {"n_df": "weights"}),
    ("modified_wilson_hdf", "modified_wilson", {"n_df": "heterogeneity"}),
    ("modified_wilson_satt", "modified_wilson", {"n_df": "satterthwaite"}),
    ("jeffreys", "jeffreys", {}),
    ("clopper_pearson", "clopper_pearson", {}),
)


def make_pool(accuracy: float, rng: np.random.Generator, belief: str = "calibrated"):
    """A pool of N_ITEMS items whose model is right on exactly round(accuracy·N) of them.

    ``belief="calibrated"``: the model's mean error probability is the true error rate (0.001 at
    accuracy 1); ``"underconfident"``: it is 0.1 whatever the truth (a good model with cautious
    probabilities, the case of the issue's 219/219 session).
    """
    if belief == "calibrated":
        mean_err = max(1.0 - accuracy, 0.001)  # the model's belief: never certain
    else:
        mean_err = 0.1
    a = 0.5
    err = np.clip(rng.beta(a, a * (1.0 / mean_err - 1.0), N_ITEMS), 1e-6, 0.49)
    pred = (rng.random(N_ITEMS) < 0.3).astype(int)
    p1 = np.where(pred == 1, 1.0 - err, err)
    n_wrong = round((1.0 - accuracy) * N_ITEMS)
    wrong = np.zeros(N_ITEMS, dtype=bool)
    if n_wrong:
        wrong[rng.choice(N_ITEMS, n_wrong, replace=False, p=err / err.sum())] = True
    y = np.where(wrong, 1 - pred, pred)
    pool = bae.Pool(predictions=pred, probs=p1)
    return pool, y, (~wrong).astype(float)


def static_designs(pool, optimal_options: dict | None = None) -> dict[str, np.ndarray]:
    """The proposals of the static designs: passive, optimal (with ``optimal_options``, e.g.
    ``{"mix": 0, "defensive_floor": 0.1}``) and stratified (10 score strata, proportional and
    Neyman allocation) — i.i.d. draws from ``q`` as ``Proposal.draw`` makes."""
    return {
        "passive": pool.p.copy(),
        "optimal": bae.optimal_proposal(pool, "accuracy", **(optimal_options or {})).q,
        "stratified": bae.stratified_proposal(pool, "accuracy", allocation="proportional").q,
        "stratified_neyman": bae.stratified_proposal(pool, "accuracy", allocation="neyman").q,
    }


def simulate(q, p, correct, n, reps, rng):
    """Vectorised draws: estimate, SE, Satterthwaite df and Kish size per repetition."""
    cq = np.cumsum(q)
    cq /= cq[-1]
    idx = np.minimum(np.searchsorted(cq, rng.random((reps, n)), side="right"), q.size - 1)
    v = p[idx] / q[idx]
    ell = correct[idx]
    W = v.sum(axis=1)
    R = (v * ell).sum(axis=1) / W
    r = ell - R[:, None]
    a = v * v * r * r
    var = a.sum(axis=1) / W**2
    den = (a * a).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0, a.sum(axis=1) ** 2 / den, np.inf)
    kish = W**2 / (v * v).sum(axis=1)
    wdf = (v * v).sum(axis=1) ** 2 / (v**4).sum(axis=1)
    return idx, v, R, np.sqrt(var), df, kish, wdf


def check_against_package(pool, y, idx, v, R, se, df, default):
    """The vectorised closed forms equal weighted_estimate, and the default column equals
    ``Estimate.confidence_interval()``, on a few repetitions."""
    m, views = pool.resolve("accuracy")
    for i in range(3):
        est = bae.weighted_estimate(m.loss(y[idx[i]], views(idx[i])), v[i], m)
        assert np.isclose(est.value, R[i]) and np.isclose(est.stderr, se[i], atol=1e-12)
        if se[i] > 1e-9:
            assert np.isclose(est.effective_df[0], df[i], rtol=1e-6)
        lo, hi = est.confidence_interval(LEVEL)
        assert np.isclose(lo, default[0][i], rtol=1e-9) and np.isclose(hi, default[1][i])


def intervals_for(R, se, df, kish, wdf, n, hdf=None):
    """Every method's interval for the repetitions ``R ± se``; ``n`` the draws (scalar or per
    repetition). ``hdf``: the weights' heterogeneity df (default from ``wdf`` and ``n``, as
    :func:`~bayes_activeeval.intervals.carrying_sizes` computes it); ``wdf=None`` leaves the
    ``_wdf`` column out (NaN)."""
    n = np.broadcast_to(np.asarray(n, dtype=float), np.shape(R))
    if hdf is None:
        with np.errstate(divide="ignore"):
            excess = 1.0 / wdf - 1.0 / n
            hdf = np.where(excess > 1e-12, 1.0 / np.maximum(excess, 1e-300), np.inf)
    out = {}
    for col, method, opt in METHODS:
        n_df = None
        if opt.get("n_df") == "design":
            n_df = n - 1.0
        elif opt.get("n_df") == "satterthwaite":
            n_df = np.maximum(df - 1.0, 1.0)
        elif opt.get("n_df") == "weights":
            if wdf is None:
                out[col] = (np.full(np.shape(R), np.nan), np.full(np.shape(R), np.nan))
                continue
            n_df = np.maximum(wdf - 1.0, 1.0)
        elif opt.get("n_df") == "heterogeneity":
            n_df = np.maximum(hdf - 1.0, 1.0)
        n_max = n if opt.get("n_max") else None
        out[col] = iv.interval(
            R, se, (0.0, 1.0), LEVEL, method, df=df, kish=kish, n_df=n_df, n_max=n_max
        )
    return out


def credible_summary(truth, post_lo, post_hi, post_mean, ci, est) -> dict:
    """Coverage and width of credible intervals ``[post_lo, post_hi]`` (one per repetition),
    the share of repetitions where it is disjoint from the confidence interval ``ci``, the share
    where the estimate ``est`` lies outside it, the share where moreover the posterior mean lies
    outside ``ci`` (``mutual``), and the posterior's coverage among the repetitions not flagged
    by each."""
    lo, hi, mean = (np.asarray(a, dtype=float) for a in (post_lo, post_hi, post_mean))
    m = lo.size
    c_lo, c_hi, e = (np.asarray(a, dtype=float)[:m] for a in (ci[0], ci[1], est))
    hit = (lo <= truth) & (truth <= hi)
    apart = (hi < c_lo) | (lo > c_hi)
    outside = ~((lo <= e) & (e <= hi))
    mutual = outside & ~((c_lo <= mean) & (mean <= c_hi))

    def among(mask):
        return float(hit[mask].mean()) if mask.any() else np.nan

    return {
        "cov_posterior": float(hit.mean()),
        "width_posterior": float(np.mean(hi - lo)),
        "disjoint_posterior": float(apart.mean()),
        "cov_posterior_not_disjoint": among(~apart),
        "outside_posterior": float(outside.mean()),
        "cov_posterior_not_outside": among(~outside),
        "mutual_posterior": float(mutual.mean()),
        "cov_posterior_not_mutual": among(~mutual),
    }


def credible_intervals(pool, idx, v, y, reps, rng, **cells):
    """The 95% equal-tailed intervals and means of Session.posterior's model (the conjugate
    contingency table, design-weighted counts, ``prior_strength=0.5`` per cell) on the first
    ``reps`` repetitions; ``cells``: cell options of ``contingency_posterior`` (``n_strata``,
    ``n_bins``, ``labels_per_cell``, ``prior``; default: the package's, except the prior: the
    model's, ``prior="model"``, the default when the committed results were made)."""
    cells = {"prior": "model", **cells}
    from bayes_activeeval.oracles.contingency import contingency_posterior

    lo, hi, mean = [], [], []
    for i in range(reps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = contingency_posterior(
                pool,
                "accuracy",
                idx[i],
                y[idx[i]],
                v[i],
                draws=500,
                chains=1,
                rng=rng,
                **cells,
            )
        g = np.asarray(dt["posterior"]["measure"]).ravel()
        a, b = np.quantile(g, [0.025, 0.975])
        lo.append(a)
        hi.append(b)
        mean.append(float(g.mean()))
    return lo, hi, mean


def credible(pool, idx, v, y, truth, reps, rng, ci, est, **cells):
    """:func:`credible_intervals` summarized by :func:`credible_summary`."""
    lo, hi, mean = credible_intervals(pool, idx, v, y, reps, rng, **cells)
    return credible_summary(truth, lo, hi, mean, ci, est)


#: Adaptive designs: (row name, ``ActiveEvaluator`` options), defaults otherwise (ε-floor, stages
#: of 50 labels growing by 10 %). The recorded results were run when the defaults were the
#: calibration oracle and the IPW estimate; they are pinned here so the rows keep their meaning.
ADAPTIVE = (
    ("adaptive", {"oracle": "calibration", "estimator": "ipw"}),
    ("adaptive_model_assisted", {"oracle": "calibration", "estimator": "model_assisted"}),
    # the package's default adaptive design exactly as a user gets it: ``ActiveEvaluator(pool,
    # "accuracy")`` — oracle "auto", the model-assisted (difference) estimate, δ = 0.1
    ("adaptive_default", {}),
)
#: The column of the package's own ``confidence_interval()`` where it is not ``DEFAULT_COL``
#: (the adaptive difference estimate's default, the gamma interval; issue 13).
PACKAGE_COL = "package"
#: Label budgets of the adaptive runs (a run's first stage is 50 labels; each run is evaluated at
#: every budget on its way to 2,000).
ADAPTIVE_SIZES = (50, 100, 200, 500, 1000, 2000)


#: Extra columns of the adaptive rows, the changes proposed for ``estimators.py``: where no
#: labeled draw has an error the estimate is put on the bound with ``SE = 0`` (as the IPW
#: estimate is; the model-assisted one is then ``1 ± 1e-7`` by its control variate), so the
#: interval is the Kish-size one; ``_satt``: moreover the Korn & Graubard df from the
#: Satterthwaite df of the variance instead of the weights' heterogeneity.
SNAP_COLS = ("snap_hdf", "snap_satt")


def adaptive_cells(pool, y, truth, name, options, reps, post_reps, seed, sizes):
    """``reps`` runs of ``ActiveEvaluator(pool, "accuracy", **options)``, each evaluated at every
    budget in ``sizes``: the estimate, its fields for every interval method, the package's own
    ``confidence_interval()`` and, on the first ``post_reps`` runs at ``POSTERIOR_SIZES``, the
    95% interval of ``ev.posterior()`` (its default: the item-level calibration posterior)."""
    keys = (
        "R",
        "se",
        "df",
        "kish",
        "hdf",
        "nd",
        "lo",
        "hi",
        "err",
        "R0",
        "se0",
        "ew",
        "ewr",
        "ase",
        "nmax",
    )
    wrong = pool.view(None).pred != y
    acc = {n: {k: [] for k in keys} for n in sizes}
    post = {n: {"lo": [], "hi": [], "mean": []} for n in sizes}

    def labeler(i):
        return y[i]

    for i in range(reps):
        ev = bae.ActiveEvaluator(pool, "accuracy", rng=np.random.default_rng([*seed, i]), **options)
        for n in sizes:
            est = ev.run(labeler, budget=n, progress=False)
            lo, hi = est.confidence_interval(LEVEL)
            a = acc[n]
            # the estimate before the difference estimate's bound rule (issue 13) feeds the
            # other methods' columns; the package's own interval uses the estimate as it is
            un = est.details.get("unsnapped")
            a["R"].append(float(un["value"][0]) if un is not None else est.value)
            a["se"].append(float(un["stderr"][0]) if un is not None else est.stderr)
            a["R0"].append(est.value)
            a["se0"].append(est.stderr)
            a["ew"].append(np.nan if est.event_weight is None else float(est.event_weight[0]))
            a["ewr"].append(np.nan if est.event_weight is None else float(est.event_weight_rms[0]))
            ase = est.anticipated_stderr
            a["ase"].append(np.nan if ase is None else float(ase[0]))
            a["nmax"].append(np.nan if est.n_max is None else float(est.n_max))
            a["df"].append(float(est.effective_df[0]))
            a["kish"].append(float(est.kish[0]))
            a["hdf"].append(float(est.weight_df[0]))
            a["nd"].append(est.n_draws)
            a["lo"].append(lo)
            a["hi"].append(hi)
            a["err"].append(int(wrong[ev.draws()["item"].to_numpy()].sum()))
            if i < post_reps and n in POSTERIOR_SIZES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    dt = ev.posterior(draws=500, chains=1, rng=np.random.default_rng([*seed, i, n]))
                g = np.asarray(dt["posterior"]["measure"]).ravel()
                ql, qh = np.quantile(g, [0.025, 0.975])
                post[n]["lo"].append(ql)
                post[n]["hi"].append(qh)
                post[n]["mean"].append(float(g.mean()))
    rows = []
    for n in sizes:
        a = {k: np.asarray(v, dtype=float) for k, v in acc[n].items()}
        ints = intervals_for(a["R"], a["se"], a["df"], a["kish"], None, a["nd"], hdf=a["hdf"])
        # the package's own interval, ``confidence_interval()``, checked against its formula;
        # DEFAULT_COL is the modified Wilson interval on the estimate before the bound rule,
        # with the weight-heterogeneity df (the static designs' default)
        if np.all(np.isnan(a["ew"])):
            # IPW / model-assisted AIS: modified Wilson with n* capped at the draws (n_max)
            p_lo, p_hi = iv.interval(
                a["R0"],
                a["se0"],
                (0.0, 1.0),
                LEVEL,
                DEFAULT_METHOD_NAME,
                kish=a["kish"],
                n_max=a["nmax"],
            )
        else:
            # the difference estimate: the gamma interval on the estimate after the bound rule
            p_lo, p_hi = iv.interval(
                a["R0"],
                a["se0"],
                (0.0, 1.0),
                LEVEL,
                "gamma",
                event_weight=a["ew"],
                event_weight_rms=a["ewr"],
                anticipated_stderr=np.nan_to_num(a["ase"]),
            )
        assert np.allclose(p_lo, a["lo"], rtol=1e-9) and np.allclose(p_hi, a["hi"], rtol=1e-9)
        ints[PACKAGE_COL] = (a["lo"], a["hi"])
        clean = a["err"] == 0
        R0, se0 = np.where(clean, 1.0, a["R"]), np.where(clean, 0.0, a["se"])
        for col, dfs in zip(SNAP_COLS, (a["hdf"], a["df"]), strict=True):
            ints[col] = iv.interval(
                R0,
                se0,
                (0.0, 1.0),
                LEVEL,
                DEFAULT_METHOD_NAME,
                kish=a["kish"],
                n_df=np.maximum(dfs - 1.0, 1.0),
            )
        row = {
            "truth": truth,
            "design": name,
            "n": n,
            "reps": reps,
            "n_draws_mean": float(a["nd"].mean()),
            "share_at_bound": float(np.mean(a["R"] >= 1.0 - 1e-12)),
            "share_no_error": float(np.mean(a["err"] == 0)),
            **cell_stats(ints, truth),
        }
        if post[n]["lo"]:
            row.update(
                credible_summary(
                    truth,
                    post[n]["lo"],
                    post[n]["hi"],
                    post[n]["mean"],
                    ints.get(PACKAGE_COL, ints[DEFAULT_COL]),
                    a["R0"],
                )
            )
            row["post_reps"] = len(post[n]["lo"])
            row["posterior_model"] = "ev.posterior(): item-level calibration"
        rows.append(row)
    return rows


#: The posterior columns that depend only on the runs (the posterior and the point estimate),
#: not on the confidence interval: :func:`carry_posterior` copies them.
POSTERIOR_OWN = (
    "cov_posterior",
    "width_posterior",
    "outside_posterior",
    "cov_posterior_not_outside",
    "post_reps",
    "posterior_model",
)
#: The posterior columns that compare it with the confidence interval (not carried: NaN).
POSTERIOR_VS_CI = (
    "disjoint_posterior",
    "cov_posterior_not_disjoint",
    "mutual_posterior",
    "cov_posterior_not_mutual",
)


def carry_posterior(rows, old):
    """Rows re-run without posterior fits (``--adaptive-post-reps 0``, after a change of the
    interval only) get the posterior columns of ``old``'s row of the same cell — the posterior is
    fitted on a cell's first ``post_reps`` runs, and the same seeds give the same runs (checked
    where the number of runs is the same: the Wald and t columns, computed on the estimate, not
    the interval, agree to 1e-6: the oracle's Newton fits round differently in the last bits) — except those comparing the posterior with the interval, which
    are left NaN (not recomputed)."""
    key = ("belief", "truth", "design", "n")
    prev = {tuple(r[k] for k in key): r for r in old}
    out = []
    for r in rows:
        o = prev.get(tuple(r[k] for k in key))
        if "cov_posterior" not in r and o is not None and "cov_posterior" in o:
            same = r["reps"] != o["reps"] or all(
                np.isclose(r[c], o[c], rtol=1e-6, atol=0.0)
                for c in ("cov_wald", "width_wald", "cov_t", "width_t")
            )
            if not same:
                raise ValueError(f"the runs of {[r[k] for k in key]} differ from the old ones")
            r = {**r, **{c: o[c] for c in POSTERIOR_OWN if c in o}}
            r.update({c: np.nan for c in POSTERIOR_VS_CI})
            r["posterior_carried"] = True
        out.append(r)
    return out


def cell_stats(ints, truth) -> dict:
    row = {}
    for col, (lo, hi) in ints.items():
        if np.all(np.isnan(lo)):
            row[f"cov_{col}"] = row[f"width_{col}"] = row[f"zero_{col}"] = np.nan
            continue
        row[f"cov_{col}"] = float(np.mean((lo <= truth) & (truth <= hi)))
        row[f"width_{col}"] = float(np.mean(hi - lo))
        row[f"zero_{col}"] = float(np.mean(hi - lo <= 0))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--post-reps", type=int, default=100)
    ap.add_argument(
        "--part",
        choices=("all", "static", "adaptive"),
        default="all",
        help="static: passive, optimal, stratified (vectorised); adaptive: ActiveEvaluator runs.",
    )
    ap.add_argument("--designs", nargs="*", help="Only these static designs.")
    ap.add_argument(
        "--optimal-options",
        default="",
        help="optimal_proposal options of the optimal design, e.g. 'mix=0;defensive_floor=0.1'",
    )
    ap.add_argument("--adaptive-reps", type=int, default=200)
    ap.add_argument("--adaptive-post-reps", type=int, default=100)
    ap.add_argument("--adaptive-designs", nargs="*", help="Only these adaptive designs.")
    ap.add_argument("--beliefs", nargs="*", default=list(BELIEFS))
    ap.add_argument("--truths", nargs="*", type=float, default=list(TRUTHS))
    ap.add_argument("--adaptive-beliefs", nargs="*", default=list(BELIEFS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="boundary_coverage")
    ap.add_argument("--merge", nargs="*", help="Concatenate these result files into --out.")
    ap.add_argument(
        "--carry-posterior",
        help="With --merge: copy the posterior columns that do not depend on the interval from "
        "this result file's rows of the same cell (see carry_posterior).",
    )
    ap.add_argument("--render", action="store_true", help="Only rewrite the .md from the .json.")
    ap.add_argument("--docs", action="store_true", help="Print the table of docs/estimation.md.")
    args = ap.parse_args(argv)
    optimal_options = {
        k: float(v) for k, v in (o.split("=", 1) for o in args.optimal_options.split(";") if o)
    }
    if args.merge:
        rows = [r for name in args.merge for r in json.loads((OUT / f"{name}.json").read_text())]
        if args.carry_posterior:
            old = json.loads((OUT / f"{args.carry_posterior}.json").read_text())
            rows = carry_posterior(rows, old)
        (OUT / f"{args.out}.json").write_text(json.dumps(rows, indent=1))
        (OUT / f"{args.out}.md").write_text(render(rows))
        return
    if args.render or args.docs:
        rows = json.loads((OUT / f"{args.out}.json").read_text())
        if args.docs:
            print(docs_table(rows))
            print()
            print(adaptive_default_docs_table(rows))
            return
        (OUT / f"{args.out}.md").write_text(render(rows))
        return
    sizes = (50, 200) if args.quick else SIZES
    reps = 500 if args.quick else args.reps
    post_reps = 20 if args.quick else args.post_reps
    rows = []
    OUT.mkdir(exist_ok=True)
    t0 = time.time()

    def save():
        (OUT / f"{args.out}.partial.json").write_text(json.dumps(rows, indent=1))

    for b_i, belief in enumerate(BELIEFS):
        for t_i, truth in enumerate(TRUTHS):
            if truth not in args.truths:
                continue
            pool, y, correct = make_pool(truth, np.random.default_rng([b_i, t_i]), belief)
            assert np.isclose(correct.mean(), truth)
            p = pool.p
            if args.part in ("all", "static") and belief in args.beliefs:
                designs = static_designs(pool, optimal_options)
                for d_i, (design, q) in enumerate(designs.items()):
                    if args.designs and design not in args.designs:
                        continue
                    for n in sizes:
                        rng = np.random.default_rng([b_i, t_i, d_i, n])
                        idx, v, R, se, df, kish, wdf = simulate(q, p, correct, n, reps, rng)
                        ints = intervals_for(R, se, df, kish, wdf, n)
                        check_against_package(pool, y, idx, v, R, se, df, ints[DEFAULT_COL])
                        row = {
                            "belief": belief,
                            "truth": truth,
                            "design": design,
                            "n": n,
                            "reps": reps,
                            "share_at_bound": float(np.mean(R >= 1.0 - 1e-12)),
                            **cell_stats(ints, truth),
                        }
                        if design == "optimal" and optimal_options:
                            row["optimal_options"] = optimal_options
                        if post_reps and (args.quick or n in POSTERIOR_SIZES):
                            ci = ints[DEFAULT_COL]
                            row.update(credible(pool, idx, v, y, truth, post_reps, rng, ci, R))
                            row["post_reps"] = post_reps
                            row["posterior_model"] = (
                                "Session.posterior(): conjugate, design-weighted"
                            )
                        rows.append(row)
                        report(row, t0)
                        save()
            if args.part in ("all", "adaptive") and belief in args.adaptive_beliefs:
                a_sizes = (50, 200) if args.quick else ADAPTIVE_SIZES
                a_reps = 10 if args.quick else args.adaptive_reps
                a_post = 5 if args.quick else args.adaptive_post_reps
                for a_i, (name, options) in enumerate(ADAPTIVE):
                    if args.adaptive_designs and name not in args.adaptive_designs:
                        continue
                    seed = (b_i, t_i, 100 + a_i)
                    cells = adaptive_cells(
                        pool, y, truth, name, options, a_reps, a_post, seed, a_sizes
                    )
                    for row in cells:
                        rows.append({"belief": belief, **row})
                        report(rows[-1], t0)
                    save()
    (OUT / f"{args.out}.json").write_text(json.dumps(rows, indent=1))
    (OUT / f"{args.out}.md").write_text(render(rows))
    (OUT / f"{args.out}.partial.json").unlink(missing_ok=True)
    print(render(rows))


def report(row, t0) -> None:
    print(
        f"[{time.time() - t0:6.0f}s] {row['belief']} truth={row['truth']} {row['design']:8s} "
        f"n={row['n']:5d} reps={row['reps']} "
        + " ".join(f"{c}={row['cov_' + c]:.3f}" for c, _, _ in METHODS)
        + (f" posterior={row['cov_posterior']:.3f}" if "post_reps" in row else ""),
        flush=True,
    )


def _num(r, key) -> float:
    v = r.get(key, np.nan)
    return np.nan if v is None else float(v)


def _min(values) -> float:
    v = [x for x in values if np.isfinite(x)]
    return min(v) if v else np.nan


def _max(values) -> float:
    v = [x for x in values if np.isfinite(x)]
    return max(v) if v else np.nan


def _adaptive_default_section(rows) -> list[str]:
    """Before/after table of the package's default adaptive design (issue 13)."""
    ad = [r for r in rows if r["design"] == "adaptive_default"]
    if not ad:
        return []

    def cw(r, col):
        c = r["cov_" + col]
        return f"{c:.3f} ± {mc_se(c, r['reps']):.3f} ({r['width_' + col]:.3g})"

    lines = [
        "",
        "## The default adaptive design: `ActiveEvaluator(pool, 'accuracy')`",
        "",
        "No options: oracle `auto`, the model-assisted (difference) estimate with stage weights "
        "and the martingale variance, defensive mixture δ = 0.1. `default (gamma)`: the "
        f"package's own `confidence_interval()` (column `{PACKAGE_COL}`) — the estimate after "
        "the bound rule (on the bound with SE = 0 where every labeled draw is correct) and Fay & "
        "Feuer's gamma interval for the weighted error count with one more error of the draws' "
        "mean weight (and their mean squared weight as its variance once an error is labeled); "
        "`before`: the previous default, the modified Wilson interval on the Korn & "
        "Graubard effective size of the estimate without the rule (column "
        f"`{DEFAULT_COL}`); `Wald` on the estimate without the rule. Coverage ± Monte Carlo s.e. "
        "(mean width); `width / Wald` where Wald covers (>= 0.93); `zero`: share of zero-width "
        "intervals; `posterior`: `ev.posterior()` (coverage; repetitions), † truth on the bound.",
        "",
        "| belief | truth | n | reps | no error | default (gamma) | zero | before | Wald | "
        "width / Wald | posterior |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ad:
        ratio = (
            f"{r['width_' + PACKAGE_COL] / r['width_wald']:.2f}"
            if r["cov_wald"] >= 0.93 and r["width_wald"] > 0 and r["truth"] < 1.0
            else "—"
        )
        lines.append(
            f"| {r['belief']} | {r['truth']} | {r['n']} | {r['reps']} | "
            f"{r['share_no_error']:.2f} | **{cw(r, PACKAGE_COL)}** | "
            f"{r['zero_' + PACKAGE_COL]:.3f} | {cw(r, DEFAULT_COL)} | {cw(r, 'wald')} | {ratio} | "
            f"{_posterior_cell(r)} |"
        )
    return lines


def _default_tag(col: str) -> str:
    if col == DEFAULT_COL:
        return " (static designs' default)"
    if col == PACKAGE_COL:
        return " (adaptive designs: the estimate's own confidence_interval())"
    return ""


def default_col(row) -> str:
    """The column of the package's default interval in a row: ``PACKAGE_COL`` for the adaptive
    designs (the estimate's own interval), ``DEFAULT_COL`` for the static ones."""
    return PACKAGE_COL if f"cov_{PACKAGE_COL}" in row else DEFAULT_COL


def mc_se(cov: float, reps: int) -> float:
    """Binomial Monte Carlo standard error of a coverage (at least that of 0.95)."""
    p = min(max(cov, 0.0), 1.0) if np.isfinite(cov) else 0.95
    p = min(p, 0.95) if p > 0.5 else max(p, 0.05)
    return float(np.sqrt(p * (1 - p) / reps))


def summary(rows) -> list[dict]:
    """Per method: worst coverage over the cells with n >= 50 (and over all), share of zero-width
    intervals, and the largest width ratio to Wald among the cells where Wald covers (>= 0.93)."""
    out = []
    for col in [c for c, _, _ in METHODS] + [PACKAGE_COL]:
        have = [r for r in rows if np.isfinite(_num(r, "cov_" + col))]
        if not have:
            continue
        big = [r for r in have if r["n"] >= 50]
        wald_ok = [
            r for r in have if r["cov_wald"] >= 0.93 and r["width_wald"] > 0 and r["truth"] < 1.0
        ]
        out.append(
            {
                "method": col,
                "cells": len(have),
                "min_cov_n50": _min(r["cov_" + col] for r in big),
                "min_cov_all": _min(r["cov_" + col] for r in have),
                "cells_below_093_n50": sum(r["cov_" + col] < 0.93 for r in big),
                "zero_width": _max(r["zero_" + col] for r in have if r["truth"] < 1.0),
                "zero_width_at_1": _max(r["zero_" + col] for r in have),
                "max_width_ratio_where_wald_covers": _max(
                    r["width_" + col] / r["width_wald"] for r in wald_ok
                ),
            }
        )
    return out


def design_summary(rows) -> list[dict]:
    """Per design and n: the default interval's worst coverage over the true accuracies and
    beliefs (with its repetitions and Monte Carlo s.e.), the worst Wald coverage, the largest
    width ratio to Wald where Wald covers (>= 0.93), the largest zero-width share, and the worst
    credible-interval coverage over the cells with truth < 1 (where it is comparable)."""
    out = []
    for design in dict.fromkeys(r["design"] for r in rows):
        for n in sorted({r["n"] for r in rows if r["design"] == design}):
            cell = [r for r in rows if r["design"] == design and r["n"] == n]
            d = default_col(cell[0])
            worst = min(cell, key=lambda r: r["cov_" + d])
            wald_ok = [
                r
                for r in cell
                if r["cov_wald"] >= 0.93 and r["width_wald"] > 0 and r["truth"] < 1.0
            ]
            post = [r for r in cell if "cov_posterior" in r and r["truth"] < 1.0]
            wp = min(post, key=lambda r: r["cov_posterior"]) if post else None
            out.append(
                {
                    "design": design,
                    "n": n,
                    "reps": min(r["reps"] for r in cell),
                    "min_cov": worst["cov_" + d],
                    "min_cov_se": mc_se(worst["cov_" + d], worst["reps"]),
                    "at": f"{worst['belief']} {worst['truth']}",
                    "min_cov_wald": min(r["cov_wald"] for r in cell),
                    "width_ratio": _max(r["width_" + d] / r["width_wald"] for r in wald_ok),
                    "zero_width": max(r["zero_" + d] for r in cell),
                    "min_cov_posterior": wp["cov_posterior"] if wp else np.nan,
                    "posterior_at": f"{wp['belief']} {wp['truth']}" if wp else "",
                    "post_reps": wp["post_reps"] if wp else 0,
                }
            )
    return out


def _design_table(rows) -> list[str]:
    lines = [
        "| design | n | reps | default: min coverage ± MC s.e. (at belief, truth) | Wald: min "
        "coverage | max width / Wald where Wald covers | zero width | posterior: min coverage, "
        "truth < 1 (reps; at) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in design_summary(rows):
        post = (
            f"{s['min_cov_posterior']:.2f} ({s['post_reps']}; {s['posterior_at']})"
            if s["post_reps"]
            else "not fitted"
        )
        ratio = f"{s['width_ratio']:.2f}" if np.isfinite(s["width_ratio"]) else "—"
        lines.append(
            f"| {s['design']} | {s['n']} | {s['reps']} | **{s['min_cov']:.3f}** ± "
            f"{s['min_cov_se']:.3f} ({s['at']}) | {s['min_cov_wald']:.3f} | {ratio} | "
            f"{s['zero_width']:.3f} | {post} |"
        )
    return lines


def docs_table(rows) -> str:
    """The tables of ``docs/estimation.md``: per design and n the worst coverage of the default
    (and of Wald and the posterior); then the calibrated-belief cells of the passive and optimal
    designs with Wald, t, the default (mean width), Clopper-Pearson and the posterior."""
    d = DEFAULT_COL
    lines = [
        *_design_table(rows),
        "",
        "| true accuracy | design | n | no error | Wald | t | default (mean width) | "
        "Clopper-Pearson | posterior |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["belief"] != "calibrated" or r["n"] not in (20, 50, 200, 1000, 2000):
            continue
        if r["design"] not in ("passive", "optimal"):
            continue
        post = f"{r['cov_posterior']:.2f}" if "cov_posterior" in r else ""
        lines.append(
            f"| {r['truth']} | {r['design']} | {r['n']} | {r['share_at_bound']:.2f} | "
            f"{r['cov_wald']:.3f} | {r['cov_t']:.3f} | **{r['cov_' + d]:.3f}** "
            f"({r['width_' + d]:.3g}) | {r['cov_clopper_pearson']:.3f} | {post} |"
        )
    return "\n".join(lines)


def adaptive_default_docs_table(rows) -> str:
    """The table of ``docs/estimation.md`` for the default adaptive design: per true accuracy and
    labels, for each belief the coverage ± MC s.e. of the package's interval (mean width), of the
    previous default, and the posterior's coverage (repetitions)."""
    ad = {(r["belief"], r["truth"], r["n"]): r for r in rows if r["design"] == "adaptive_default"}
    if not ad:
        return ""
    lines = [
        "| true accuracy | n | reps | calibrated: default (width) | before | posterior | "
        "underconfident: default (width) | before | posterior |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for truth in TRUTHS:
        for n in ADAPTIVE_SIZES:
            cells = [ad.get((b, truth, n)) for b in BELIEFS]
            if not any(cells):
                continue
            reps = "/".join(sorted({str(r["reps"]) for r in cells if r}))
            parts = []
            for r in cells:
                if r is None:
                    parts += ["—", "—", "—"]
                    continue
                c, w = r["cov_" + PACKAGE_COL], r["width_" + PACKAGE_COL]
                b = r["cov_" + DEFAULT_COL]
                parts += [
                    f"**{c:.3f}** ± {mc_se(c, r['reps']):.3f} ({w:.3g})",
                    f"{b:.3f}",
                    _posterior_cell(r) if "cov_posterior" in r else "",
                ]
            lines.append(f"| {truth} | {n} | {reps} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def _cell(r, col) -> str:
    c = _num(r, "cov_" + col)
    return "—" if not np.isfinite(c) else f"{c:.3f} ({r['width_' + col]:.3g})"


def _posterior_cell(r) -> str:
    if "cov_posterior" not in r:
        return "—"
    flag = "†" if r["truth"] >= 1.0 else ""
    return f"{r['cov_posterior']:.2f}{flag} ({r['width_posterior']:.3g}; {r['post_reps']})"


def render(rows) -> str:
    reps = sorted({r["reps"] for r in rows}, reverse=True)
    cols = [c for c, _, _ in METHODS] + [PACKAGE_COL]
    designs = list(dict.fromkeys(r["design"] for r in rows))
    lines = [
        f"# 95% intervals near the boundary: accuracy, {N_ITEMS:,}-item pools",
        "",
        "Generated by `benchmarks/boundary_coverage.py` (static designs vectorised over "
        "repetitions; adaptive designs one `ActiveEvaluator` run per repetition, evaluated at "
        "every budget on its way to 2,000 labels). Designs: "
        + ", ".join(f"`{d}`" for d in designs)
        + ". Repetitions per cell: "
        + ", ".join(
            f"{d} {'/'.join(str(x) for x in sorted({r['reps'] for r in rows if r['design'] == d}))}"
            for d in designs
        )
        + "; the Monte Carlo s.e. of a coverage near 0.95 is "
        + ", ".join(f"{np.sqrt(0.95 * 0.05 / k):.4f} ({k} reps)" for k in reps)
        + ". `belief`: whether the model's probabilities (which drive the proposals, the "
        "adaptive oracle's prior and the posterior's prior) are calibrated or underconfident (mean "
        "error probability 0.1 whatever the truth). `at 1`: share of samples whose estimate is "
        "on the bound (for the adaptive designs the share without a labeled error is in the "
        "last table).",
        "",
        "Designs: `passive` (q = p); `optimal` (`optimal_proposal(pool, 'accuracy'"
        + "".join(
            sorted({f", {k}={v:g}" for r in rows for k, v in r.get("optimal_options", {}).items()})
        )
        + ")`); "
        "`stratified` and `stratified_neyman` (`stratified_proposal(pool, 'accuracy')`, 10 score "
        "strata, proportional — the same q as passive for i.i.d. draws, so the same numbers up "
        "to the random draws — and Neyman allocation); `adaptive` (`ActiveEvaluator(pool, "
        "'accuracy')` with its defaults: calibration oracle, ε-floor, stages of 50 labels growing "
        "by 10 %, IPW estimate with the martingale variance — the defaults when this was run, "
        "pinned as `oracle='calibration', estimator='ipw'`); `adaptive_model_assisted` (the same "
        "with `estimator='model_assisted'`, the difference estimate); `adaptive_default` "
        "(`ActiveEvaluator(pool, 'accuracy')` with no options — oracle `auto`, the difference "
        "estimate, δ = 0.1; issue 13). For every adaptive design the column `package` is the "
        "estimate's own `confidence_interval()` (IPW: the modified Wilson interval with n* capped "
        "at the draws; the difference estimate: the gamma interval after the bound rule), the "
        "other columns are computed on the estimate before the bound rule. `n` is the number of "
        "draws for the static designs and of labels (distinct items) for the adaptive ones.",
        "",
        "Methods (`bayes_activeeval.intervals.interval`): `wald`; `t` (Satterthwaite df of the "
        "variance); `logit`; `wilson`: Wilson with the effective size n* = x̂(1−x̂)/SE² (Kish size "
        "of the draws at a bound); `_df`: Korn & Graubard's n*(z/t)² with the design df n − 1; "
        "`_satt`: the same with the Satterthwaite df of the variance; `modified_wilson`: one-sided "
        "Poisson bounds next to the boundary (Brown, Cai & DasGupta 2001); `_cap`: n* capped at "
        "n; `_wdf`: n*(z/t)² with the df of the carrying draws' squared weights (not available "
        "from an adaptive `Estimate`: —); `_hdf`: the same with the df of their excess over equal "
        "weights (1/ν = Σv⁴/(Σv²)² − 1/n; ∞ for passive sampling) — the static designs' "
        "default, `Estimate.confidence_interval()`; `jeffreys`, `clopper_pearson` on n*; "
        "`package` (adaptive designs): the estimate's own interval.",
        "",
        *(
            [
                "Rows without the `modified_wilson_satt` column ("
                + ", ".join(
                    dict.fromkeys(r["design"] for r in rows if "cov_modified_wilson_satt" not in r)
                )
                + ") are from the earlier run of this script (same seeds and code path, merged "
                "with `--merge`); the later run added the other designs and that column.",
                "",
            ]
            if any("cov_modified_wilson_satt" not in r for r in rows)
            else []
        ),
        "Posterior: the 95 % equal-tailed credible interval of the posterior the package offers "
        "for the design — `Session.posterior()` for the static designs (the conjugate "
        "contingency-table model with design-weighted counts, what `bae status` prints) and "
        "`ActiveEvaluator.posterior()` for the adaptive ones (its default, the item-level "
        "calibration posterior) — fitted on the first repetitions at n = 50, 200, 1,000. "
        "† At truth 1.0 a posterior with a density never puts an equal-tailed interval on the "
        "bound itself: its coverage is 0 by construction, not comparable with the confidence "
        "intervals (which reach the bound).",
        "",
        "## Default interval per design and n",
        "",
        "Worst cell over the five true accuracies and both beliefs.",
        "",
        *_design_table(rows),
        "",
        "## Summary per method",
        "",
        "| method | cells | min coverage, n >= 50 | cells < 0.93, n >= 50 | min coverage, all n | "
        "zero-width share (truth < 1) | max width / Wald where Wald covers |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        lines.append(
            f"| {s['method'] + _default_tag(s['method'])} | "
            f"{s['cells']} | {s['min_cov_n50']:.3f} | {s['cells_below_093_n50']} | "
            f"{s['min_cov_all']:.3f} | {s['zero_width']:.3f} | "
            f"{s['max_width_ratio_where_wald_covers']:.2f} |"
        )
    lines += [
        "",
        "## Coverage (mean width) per cell",
        "",
        "`posterior`: coverage (mean width; repetitions) of the credible interval, — where not "
        "fitted.",
        "",
        "| belief | truth | design | n | reps | at 1 | " + " | ".join(cols) + " | posterior |",
        "|" + "---|" * (len(cols) + 7),
    ]
    for r in rows:
        cells = [_cell(r, c) for c in cols]
        lines.append(
            f"| {r['belief']} | {r['truth']} | {r['design']} | {r['n']} | {r['reps']} | "
            f"{r['share_at_bound']:.2f} | " + " | ".join(cells) + f" | {_posterior_cell(r)} |"
        )
    ad = [r for r in rows if "cov_snap_hdf" in r]
    if ad:
        cap = "modified_wilson_cap"
        lines += [
            "",
            "## Adaptive designs: the default interval and the changes proposed for them",
            "",
            "`cap`: the modified Wilson interval with n* capped at the number of draws (Korn & "
            "Graubard's cap, no df adjustment; column `modified_wilson_cap` above) — the change "
            "proposed for adaptive estimates. `snap`: where no labeled draw has an error, the "
            "estimate put on the bound with SE = 0 (the IPW estimate is exactly there already; "
            "the model-assisted one is `1 ± 1e-7` from its control variate, which makes its "
            "interval a sliver just below 1), so the interval is the Kish-size one; `snap_satt`: "
            "moreover Korn & Graubard's df from the Satterthwaite df of the variance instead of "
            "the weights' heterogeneity. Per design and n, worst cell over truths and beliefs "
            "(coverage ± Monte Carlo s.e.) and the largest width ratio to Wald where Wald covers "
            "(>= 0.93):",
            "",
            "| design | n | default: min coverage | width / Wald | cap: min coverage | "
            "width / Wald | snap: min coverage | snap_satt: min coverage |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for design in dict.fromkeys(r["design"] for r in ad):
            for n in sorted({r["n"] for r in ad if r["design"] == design}):
                cell = [r for r in ad if r["design"] == design and r["n"] == n]
                ok = [
                    r
                    for r in cell
                    if r["cov_wald"] >= 0.93 and r["width_wald"] > 0 and r["truth"] < 1.0
                ]
                parts = []
                for col in (default_col(cell[0]), cap, "snap_hdf", "snap_satt"):
                    w = min(cell, key=lambda r, col=col: r["cov_" + col])
                    c = w["cov_" + col]
                    parts.append(
                        f"{c:.3f} ± {mc_se(c, w['reps']):.3f} ({w['belief']} {w['truth']})"
                    )
                    if col in (default_col(cell[0]), cap):
                        ratio = _max(r["width_" + col] / r["width_wald"] for r in ok)
                        parts.append(f"{ratio:.2f}" if np.isfinite(ratio) else "—")
                lines.append(f"| {design} | {n} | " + " | ".join(parts) + " |")
        lines += [
            "",
            "Per cell: coverage ± Monte Carlo s.e. (mean width); `no error`: share of runs "
            "without a single labeled error.",
            "",
            "| belief | truth | design | n | reps | mean draws | no error | default | cap | snap | "
            "snap_satt | Wald |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in ad:

            def cw(col, r=r):
                c = r["cov_" + col]
                return f"{c:.3f} ± {mc_se(c, r['reps']):.3f} ({r['width_' + col]:.3g})"

            lines.append(
                f"| {r['belief']} | {r['truth']} | {r['design']} | {r['n']} | {r['reps']} | "
                f"{r['n_draws_mean']:.0f} | {r['share_no_error']:.2f} | {cw(default_col(r))} | "
                f"{cw(cap)} | "
                f"{cw('snap_hdf')} | {cw('snap_satt')} | {cw('wald')} |"
            )
    lines += _adaptive_default_section(rows)
    post = [r for r in rows if "post_reps" in r]
    if post:
        d = DEFAULT_COL
        lines += [
            "",
            "## Credible intervals beside the default confidence interval",
            "",
            f"The default confidence interval ({d}; for `adaptive_default` the package's own, "
            f"`{PACKAGE_COL}`) and the 95 % credible interval of the "
            "design's posterior (see above); `disjoint`: share of samples where the two "
            "intervals do not overlap, `estimate outside`: share where the importance-weighted "
            "estimate lies outside the credible interval, `flagged`: share where moreover the "
            "posterior mean lies outside the confidence interval (what `bae status` flags, with "
            "its 89% posterior interval), `cov. if …`: the posterior's coverage in the samples "
            "not flagged. † not comparable (truth on the bound).",
            *(
                [
                    "",
                    "Rows with `nan` in the comparison columns ("
                    + ", ".join(
                        dict.fromkeys(r["design"] for r in post if r.get("posterior_carried"))
                    )
                    + ") were re-run after a change of the interval alone, without posterior fits: "
                    "their posterior columns are those of the previous run of the same cells (the "
                    "posterior is fitted on a cell's first runs, the same seeds give the same runs "
                    "— checked where the number of runs is unchanged by the Wald and t columns "
                    "being identical — and it does not depend on the interval); the columns that "
                    "compare the posterior with the confidence interval were not recomputed.",
                ]
                if any(r.get("posterior_carried") for r in post)
                else []
            ),
            "",
            "| belief | truth | design | n | posterior reps | default | posterior | disjoint | "
            "cov. if not disjoint | estimate outside | cov. if inside | flagged | "
            "cov. if not flagged |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in post:
            flag = "†" if r["truth"] >= 1.0 else ""
            lines.append(
                f"| {r['belief']} | {r['truth']} | {r['design']} | {r['n']} | {r['post_reps']} | "
                f"{r['cov_' + default_col(r)]:.3f} ({r['width_' + default_col(r)]:.3g}) | "
                f"{r['cov_posterior']:.2f}{flag} ({r['width_posterior']:.3g}) | "
                f"{r['disjoint_posterior']:.2f} | {_num(r, 'cov_posterior_not_disjoint'):.2f} | "
                f"{_num(r, 'outside_posterior'):.2f} | "
                f"{_num(r, 'cov_posterior_not_outside'):.2f} | "
                f"{_num(r, 'mutual_posterior'):.2f} | "
                f"{_num(r, 'cov_posterior_not_mutual'):.2f} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
