"""Reports: plots and a self-contained HTML page for a labeling session.

The page shows the frequentist answer — the estimate the session gives (for a static design the
self-normalized importance-weighted estimate with its delta-method standard error, Sawade (2012),
Eq. 3.14; for an adaptive one the evaluator's own estimate, by default the model-assisted one with
the martingale standard error; :func:`estimate_note` words it from the session's design) and
:meth:`Estimate.confidence_interval`, the one interval the API, ``bae status`` and
``bae compare`` print too — beside the Bayesian one (the posterior of the measure
and its ArviZ diagnostics, when the design has a posterior), a note where the two disagree
(:func:`posterior_conflicts`), and figures:

- the estimate against the labels spent, with its interval band (one point per completed stage);
- the proposal ``q`` against the model's score (the optimal proposal, Sawade (2012), Thm. 4.1);
- the posterior of the measure, with the frequentist interval marked;
- for ROC AUC and average precision, the ROC and precision-recall curves with simultaneous bands
  (:func:`~bayes_activeeval.curves.curve_band`).

Figures are rendered with Matplotlib's Agg backend and embedded as base64 PNG, so the HTML file
needs nothing else.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import os
import warnings
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from .curves import curve_band
from .curves import mpl_literal as _lit
from .estimators import UndefinedEstimateWarning
from .measures import get as get_measure
from .threshold_free import RankMeasure

__all__ = [
    "comparison_table",
    "estimate_path",
    "posterior_conflicts",
    "posterior_note",
    "posterior_summary",
    "render_html",
    "write_report",
]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def posterior_summary(posterior) -> pd.DataFrame | None:
    """``arviz.summary`` of the measure in a posterior :class:`xarray.DataTree` (mean, sd,
    equal-tailed interval, ESS, r-hat), or ``None`` when there is no posterior.

    Parameters
    ----------
    posterior : xarray.DataTree or None
        A posterior with a ``"posterior"`` group (e.g. ``Session.posterior()``); only its
        ``measure`` variable is summarized when it has one. Its ``method`` attribute (default
        ``"conjugate"``) names the label model.

    Returns
    -------
    pandas.DataFrame or None
        One row per element of the summarized variables (``measure[<output>]``, one per
        output); ``attrs["method"]`` and ``attrs["model"]`` (the label
        model's short name) describe the posterior.
    """
    if posterior is None:
        return None
    from arviz_stats import summary  # what arviz.summary is, without importing the plotting stack

    names = list(posterior["posterior"].data_vars)
    var_names = ["measure"] if "measure" in names else None
    out = pd.DataFrame(summary(posterior, var_names=var_names))
    method = str(posterior.attrs.get("method", "conjugate"))
    out.attrs["method"] = method
    out.attrs["model"] = _posterior_model(method)[0]
    return out


#: What ``bae status`` and the report say about a cell-model posterior beside the confidence
#: interval.
POSTERIOR_NOTE = (
    "The posterior is model-based: where labels are few its contingency cells follow their "
    "prior — for one model on a binary pool with probabilities a calibration of its "
    "probabilities learned from the labels, otherwise the models' own probabilities (uniform "
    "without them) — so its credible interval is only as calibrated as that prior; the "
    "confidence interval is design-based and does not depend on it."
)


#: The same for the item-level calibration posterior.
CALIBRATION_NOTE = (
    "The posterior is model-based: the unlabeled items' labels are drawn from a logistic "
    "calibration of the model's scores fitted to the labels, so its credible interval is only as "
    "calibrated as that label model is (positives where the scores do not predict them are "
    "missed); the confidence interval is design-based and does not depend on it."
)


#: Each posterior method's label model: the short name ``bae status`` prints, the report's
#: description, and the note beside the confidence interval.
_POSTERIOR_MODELS = {
    "conjugate": (
        "contingency-table model",
        "Contingency-table model (score stratum × prediction × label, design-weighted "
        "pseudo-counts), conjugate Dirichlet posterior",
        POSTERIOR_NOTE,
    ),
    "pymc": (
        "contingency-table model, PyMC",
        "Contingency-table model (score stratum × prediction × label) with a hierarchical "
        "recalibration across cells, NUTS",
        POSTERIOR_NOTE,
    ),
    "calibration": (
        "item-level calibration model",
        "Item-level calibration model (a logistic calibration of the scores fitted to the "
        "labeled items; every unlabeled item's label drawn from its posterior predictive)",
        CALIBRATION_NOTE,
    ),
}


def _posterior_model(method: str) -> tuple[str, str, str]:
    return _POSTERIOR_MODELS.get(method, (method, method, POSTERIOR_NOTE))


def posterior_note(method: str) -> str:
    """What to say beside a posterior of ``method`` (:data:`POSTERIOR_NOTE` for the cell
    models, :data:`CALIBRATION_NOTE` for ``"calibration"``).

    Parameters
    ----------
    method : str
        The posterior's method: ``"conjugate"``, ``"pymc"`` or ``"calibration"`` (any other
        value gets :data:`POSTERIOR_NOTE`).

    Returns
    -------
    str
        The note, one paragraph of plain text.
    """
    return _posterior_model(method)[2]


def posterior_conflicts(rows: list[dict], summary: pd.DataFrame | None, measure: str) -> list[str]:
    """One sentence for every model where the two answers contradict each other: the
    design-based estimate lies outside the posterior's interval *and* the posterior mean outside
    the confidence interval — the issue-13 case: 219 of 219 labels correct, the estimate 1 and its
    confidence interval reaching 1, the posterior 89% interval [0.932, 0.975].

    The two answers are not the same kind of statement. The confidence interval is design-based:
    it uses the model's probabilities only through the proposal, and covers at its level whatever
    they are (``benchmarks/results/boundary_coverage.md``). The posterior is model-based: where
    few labels fall its contingency cells report their prior. With the model's mean probability
    as that prior (``prior="model"``, the default before 2026-11-27; ``prior_strength=0.5``
    pseudo-labels per cell, about 80 in all) a miscalibrated model made its credible intervals
    miss (coverage 0-0.4 for an underconfident model near accuracy 1 in the same benchmark); the
    recalibrated prior, the default now on binary pools with probabilities, covered 0.84-0.98
    there (``benchmarks/results/posterior_cells_boundary.md``), so conflicts are rarer, but a
    prior is still a model of the labels nobody has seen. Each answer's point outside the
    other's interval is the visible sign of that prior-data conflict. The estimate alone outside
    the posterior's interval is not enough: at a bound (no error among the labels) it is outside
    any posterior with a density, and flagged 65-100% of the samples where the posterior covered;
    the two conditions together flagged at most 2% of the samples with calibrated probabilities,
    and 31% on average (up to all) of those where the posterior missed
    (``benchmarks/results/boundary_coverage.md``, "flagged").

    Parameters
    ----------
    rows : list of dict
        ``Session.status()["estimates"]``: ``model``, ``estimate``, ``low``, ``high`` per model
        (in the order of the posterior's outputs).
    summary : pandas.DataFrame or None
        :func:`posterior_summary` (rows ``measure[...]`` with ``mean``, ``eti89_lb``,
        ``eti89_ub``).
    measure : str
    """
    if summary is None or not rows:
        return []
    post = summary.loc[[i for i in summary.index if str(i).startswith("measure")]]
    lo_col = next((c for c in post.columns if str(c).startswith("eti") and "lb" in str(c)), None)
    hi_col = next((c for c in post.columns if str(c).startswith("eti") and "ub" in str(c)), None)
    if lo_col is None or hi_col is None:
        return []
    pct = str(lo_col)[3:].split("_")[0]
    out = []
    for r, (_, p) in zip(rows, post.iterrows(), strict=False):
        plo, phi = float(p[lo_col]), float(p[hi_col])
        est, mean = float(r["estimate"]), float(p.get("mean", np.nan))
        if not np.isfinite(est) or plo <= est <= phi or r["low"] <= mean <= r["high"]:
            continue
        how = (
            "do not overlap"
            if phi < r["low"] or plo > r["high"]
            else f"contradict each other (the estimate {est:.4f} is outside the posterior's "
            f"interval, the posterior mean {mean:.4f} outside the confidence interval)"
        )
        out.append(
            f"note: for {measure} [{r['model']}] the posterior's {pct}% interval "
            f"[{plo:.4f}, {phi:.4f}] and the confidence interval [{r['low']:.4f}, "
            f"{r['high']:.4f}] {how}. The labels disagree with the model's own probabilities, "
            "which the posterior takes as its prior where labels are few: they look "
            "miscalibrated. Trust the confidence interval; it does not depend on them."
        )
    return out


def estimate_path(session, level: float = 0.95) -> pd.DataFrame:
    """The estimate after each completed stage: one row per (stage, model) with the labels spent
    so far, the estimate, its standard error and interval (the data of the first figure).

    Each row is the estimate the session gave after that stage (``Session.estimates(stages=k)``)
    with its own interval, so the last row is what `bae status` prints — for an adaptive design
    the evaluator's estimate (the difference estimate by default), not a re-weighting of its
    draws.

    Parameters
    ----------
    session : Session
        The labeling session (:class:`bayes_activeeval.session.Session`).
    level : float
        Confidence level of the intervals, in ``(0, 1)`` (default 0.95).

    Returns
    -------
    pandas.DataFrame
        Columns ``stage``, ``labels`` (distinct labeled items so far), ``model``, ``estimate``,
        ``stderr``, ``low``, ``high``; empty before the first completed stage.
    """
    draws, _ = session.labeled_draws()
    done = _completed(session)  # in stage order
    d = session.draws()
    stage = d.loc[d["stage"].isin(done), "stage"].to_numpy()  # aligned with labeled_draws()
    models = set(session.design.models)
    rows = []
    for k, s in enumerate(done):
        upto = stage <= s
        sub = draws[upto]
        per_model = session.estimates(stages=k + 1)
        for m, est in per_model.items():
            if m not in models:  # the adaptive target of several models (a difference)
                continue
            low, high = est.confidence_interval(level)
            rows.append(
                {
                    "stage": s,
                    "labels": sub.n_distinct,
                    "model": m,
                    "estimate": est.value,
                    "stderr": est.stderr,
                    "low": low,
                    "high": high,
                }
            )
    return pd.DataFrame(
        rows, columns=["stage", "labels", "model", "estimate", "stderr", "low", "high"]
    )


def _completed(session) -> list[int]:
    done, _ = session.stage_progress()
    return done


def comparison_table(session, level: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-model estimates and pairwise tests of their differences, on the shared labeled draws.

    Two models: the paired Wald test of :func:`~bayes_activeeval.compare` (Sawade (2012),
    Eqs. 3.21-3.24). More: the simultaneous all-pairs test of
    :func:`~bayes_activeeval.multiple_comparison` (``method="tukey"``, single-step max-|z|;
    Sawade (2012), Sec. 3.2.3), whose ``pvalue`` is adjusted for the ``k(k−1)/2`` pairs.

    Parameters
    ----------
    session : Session
        The labeling session (:class:`bayes_activeeval.session.Session`), with at least one
        completed stage.
    level : float
        Confidence level of the intervals, in ``(0, 1)`` (default 0.95).

    Returns
    -------
    estimates, tests : pandas.DataFrame
    """
    from .comparison import compare, multiple_comparison

    draws, labels = session.labeled_draws()
    if len(draws) == 0:
        raise ValueError("no completed stage yet: label the items of bae next first")
    models = list(session.design.models)
    measure = session.design.measure
    # the models' rows are the estimates `bae status` shows, with the same interval
    per_model = session.estimates()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedEstimateWarning)
        if len(models) == 2:
            res = compare(session.pool, measure, draws, labels, models=tuple(models))
            low, high = res.confidence_interval(level)
            tests = pd.DataFrame(
                [
                    {
                        "a": models[0],
                        "b": models[1],
                        "difference": res.estimate,
                        "stderr": res.stderr,
                        "low": low,
                        "high": high,
                        "statistic": res.statistic,
                        "pvalue": res.pvalue,
                        "better": res.better or "-",
                    }
                ]
            )
        else:
            mc = multiple_comparison(
                session.pool, measure, draws, labels, models=models, level=level, rng=0
            )
            ci = mc.confidence_interval()
            rows = []
            for i, j in itertools.combinations(range(len(models)), 2):
                rows.append(
                    {
                        "a": models[i],
                        "b": models[j],
                        "difference": mc.difference[i, j],
                        "stderr": mc.stderr[i, j],
                        "low": ci.low[i, j],
                        "high": ci.high[i, j],
                        "statistic": mc.statistic[i, j],
                        "raw_pvalue": mc.raw_pvalue[i, j],
                        "pvalue": mc.pvalue[i, j],
                    }
                )
            tests = pd.DataFrame(rows)
    rows = []
    for m in models:
        e = per_model[m]
        lo, hi = e.confidence_interval(level)
        rows.append({"model": m, measure: e.value, "stderr": e.stderr, "low": lo, "high": hi})
    return pd.DataFrame(rows), tests


# -- figures --------------------------------------------------------------------------------------
def _fig_path(path: pd.DataFrame, measure: str, level: float) -> str | None:
    if path.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for m, g in path.groupby("model", sort=False):
        x = g["labels"].to_numpy()
        (line,) = ax.plot(x, g["estimate"], marker="o", ms=3, label=_lit(m))
        ax.fill_between(x, g["low"], g["high"], alpha=0.2, color=line.get_color())
    ax.set_xlabel("labels")
    ax.set_ylabel(_lit(measure))
    ax.set_title(f"estimate with {level:.0%} interval, by labels spent")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def _score_for_plot(pool, model: str):
    """The per-item score the proposal is plotted against, and its axis label."""
    if pool.scores is not None:
        return pool.scores[model], f"score ({model})"
    if pool.has_std():
        return pool.view(model).std, f"predictive std ({model})"
    if pool.has_probs() and pool.task == "binary":
        return pool.view(model).positive_prob(), f"P(positive) ({model})"
    if pool.has_probs():
        return pool.view(model).prob.max(axis=1), f"max class probability ({model})"
    return pool.view(model).pred, f"prediction ({model})"


def _fig_curves(session, level: float) -> str | None:
    """ROC and PR curves with simultaneous bands, one line per model (threshold-free measures)."""
    draws, labels = session.labeled_draws()
    if len(draws) == 0:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    drawn = False
    for model in session.design.models:
        for ax, curve in zip(axes, ("roc", "pr"), strict=True):
            try:
                band = curve_band(
                    session.pool, draws, labels, curve=curve, model=model, level=level, rng=0
                )
            except ValueError:  # no positive (or no negative) labeled yet
                continue
            band.plot(ax=ax)
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    for ax in axes:
        ax.legend(loc="lower left" if ax is axes[1] else "lower right", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _fig_proposal(session, q: np.ndarray) -> str:
    plt = _pyplot()
    pool = session.pool
    model = session.design.models[0]
    n = q.size
    rng = np.random.default_rng(0)
    show = rng.choice(n, size=min(n, 20_000), replace=False) if n > 20_000 else np.arange(n)
    lab = session.labels()["item"].to_numpy(np.int64)
    if getattr(pool, "is_lazy", False):  # read only the plotted items (and their q)
        sel = np.concatenate([show, lab])
        score_sel, xlabel = _score_for_plot(pool.take(sel), model)
        q_sel = np.asarray(q[sel])
        score, qq = score_sel[: show.size], q_sel[: show.size]
        score_lab, q_lab = score_sel[show.size :], q_sel[show.size :]
    else:
        full, xlabel = _score_for_plot(pool, model)
        score, qq, score_lab, q_lab = full[show], q[show], full[lab], q[lab]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.scatter(score, qq * n, s=3, alpha=0.35, label="pool items", rasterized=True)
    if lab.size:
        ax.scatter(score_lab, q_lab * n, s=10, color="C3", label="labeled items")
    ax.set_yscale("log")
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="passive (q = 1/n)")
    ax.set_xlabel(_lit(xlabel))
    ax.set_ylabel("n · q(x)")
    ax.set_title("proposal against the score")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def estimator_kind(session, name: str) -> str:
    """How the session estimated the output ``name`` (a model, or an adaptive design's target):
    ``"is"`` (self-normalized importance weighting: a static design, and the per-model rows of an
    adaptive design of several models), ``"model_assisted"`` or ``"ipw"`` (an adaptive design's
    evaluator, :meth:`bayes_activeeval.ActiveEvaluator.estimate`), ``"rank"`` / ``"rank_adaptive"``
    (a threshold-free measure, from the weighted ranking of the draws)."""
    d = session.design
    rank = isinstance(get_measure(d.measure), RankMeasure)
    evaluator = d.kind == "adaptive" and (len(d.models) == 1 or name not in d.models)
    if rank:
        return "rank_adaptive" if evaluator else "rank"
    if not evaluator:
        return "is"
    # a session written before the option existed replays with "ipw" (session.designs)
    return str(d.options.get("estimator", "ipw"))


#: Short names of the estimators (plot legends).
ESTIMATOR_LABELS = {
    "is": "IS estimate",
    "model_assisted": "model-assisted estimate",
    "ipw": "AIS estimate",
    "rank": "IS estimate",
    "rank_adaptive": "AIS estimate",
}


def _estimator_text(kind: str, variance: str) -> str:
    se = (
        "the martingale standard error (Marchant & Rubinstein (2021), Sec. 3.3.2)"
        if variance == "martingale"
        else "the CLT plug-in standard error (Marchant & Rubinstein (2021), Thm. 2)"
    )
    return {
        "is": "self-normalized importance-weighted estimate (Sawade (2012), Eq. 3.11) with its "
        "delta-method standard error (Eq. 3.14)",
        "model_assisted": "model-assisted (difference) estimate of the adaptive design — the oracle "
        "model's belief as control variate, each draw's term weighted by the inverse of the "
        f"variance its belief predicted — with {se}",
        "ipw": "adaptive importance-sampling estimate (Marchant & Rubinstein (2021), Algorithm 1: "
        "self-normalized, each draw weighted p/q by the proposal it was drawn from) with "
        f"{se}",
        "rank": "importance-weighted estimate of the threshold-free measure from the weighted "
        "ranking of the labeled draws, with its influence-function standard error",
        "rank_adaptive": "importance-weighted estimate of the threshold-free measure from the "
        "weighted ranking of the labeled draws (each weighted p/q by the proposal it was drawn "
        f"from), with {se}",
    }[kind]


def _interval_text(est) -> str:
    lo, hi = est.bounds
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "t interval on the effective degrees of freedom"
    if est.event_weight is not None:
        return "gamma interval for a weighted count (Fay & Feuer (1997)), inside the range"
    return (
        "score-type interval on the effective sample size (never zero width, inside the "
        "measure's range)"
    )


def unseen_line(u: dict, measure: str, lvl: str) -> str:
    """The sentence ``bae status`` and the report print for ``Session.status()``'s ``"unseen"``
    entry of one estimate (:func:`bayes_activeeval.unseen_errors`).

    Parameters
    ----------
    u : dict
        ``{"regions": [{"predicted", "actual", "kind", "items", "labeled", "max_hidden",
        "value", "joint_hidden"}, …], "value": …}``.
    measure : str
        The measure's name.
    lvl : str
        The level as printed (``"95%"``).

    Returns
    -------
    str
    """

    def num(x) -> str:
        return "n/a" if x is None or not np.isfinite(x) else f"{x:.4f}"

    parts = [
        f"{g['max_hidden']:,} {g['kind']} among the {g['items'] - g['labeled']:,} unlabeled "
        f"predicted {g['predicted']} ({g['labeled']:,} of {g['items']:,} labeled; "
        f"{measure} {num(g['value'])})"
        for g in u["regions"]
    ]
    both = " and ".join(f"{g['joint_hidden']:,}" for g in u["regions"])
    return (
        f"errors no label has seen ({lvl}): up to {' and '.join(parts)}; all at once "
        f"({both}): {measure} {num(u['value'])}"
    )


def estimate_note(session, estimates: dict | None = None) -> str:
    """One sentence per kind of estimate in the report's table: how the session estimated each
    output (:func:`estimator_kind`) and which confidence interval it has, from the completed
    stages.

    Parameters
    ----------
    session : Session
        The labeling session.
    estimates : dict, optional
        ``{name: Estimate}`` (default ``session.estimates()``).

    Returns
    -------
    str
        Plain text.
    """
    estimates = session.estimates() if estimates is None else estimates
    variance = str(session.design.options.get("variance", "martingale"))
    groups: dict[str, list[str]] = {}
    for name, est in estimates.items():
        text = f"{_estimator_text(estimator_kind(session, name), variance)}; {_interval_text(est)}"
        groups.setdefault(text, []).append(name)
    if not groups:
        kind = estimator_kind(session, session.design.models[0])
        return f"The session's estimate will be the {_estimator_text(kind, variance)}."
    parts = []
    for text, names in groups.items():
        who = "" if len(groups) == 1 else f"{', '.join(names)}: "
        parts.append(f"{who}{text[0].upper() if not who else text[0]}{text[1:]}")
    return "; ".join(parts) + "; from the completed stages."


def _fig_posterior(
    posterior, freq: pd.DataFrame | None, measure: str, labels: list[str] | None = None
) -> str | None:
    if posterior is None:
        return None
    plt = _pyplot()
    post = posterior["posterior"]
    if "measure" not in post.data_vars:
        return None
    da = post["measure"]
    outputs = [str(o) for o in da.coords["output"].values] if "output" in da.dims else [measure]
    fig, axes = plt.subplots(1, len(outputs), figsize=(4.6 * len(outputs), 3.2), squeeze=False)
    for k, (ax, out) in enumerate(zip(axes[0], outputs, strict=True)):
        vals = np.asarray(da.isel(output=k).values if "output" in da.dims else da.values)
        ax.hist(vals.reshape(-1), bins=40, density=True, alpha=0.7, color="C0", label="posterior")
        if freq is not None and k < len(freq):
            r = freq.iloc[k]
            name = labels[k] if labels is not None and k < len(labels) else "estimate"
            ax.axvline(r["estimate"], color="C3", label=name)
            ax.axvspan(r["low"], r["high"], color="C3", alpha=0.15, label="confidence interval")
        ax.set_title(_lit(f"posterior of {out}"))
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


# -- HTML -----------------------------------------------------------------------------------------
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } .side { display: flex; gap: 1.5em; }
.side > div { flex: 1 1 0; min-width: 0; overflow-x: auto; } .side table { font-size: 0.8em; }
.side td, .side th { padding: 2px 4px; }
.meta td { text-align: left; } img { max-width: 100%; }
.note { color: #666; font-size: 0.85em; }
"""


def _table(frame: pd.DataFrame | None, fmt: str = "{:.4g}") -> str:
    if frame is None or frame.empty:
        return "<p class='note'>(none)</p>"
    return frame.to_html(
        index=not isinstance(frame.index, pd.RangeIndex),
        float_format=lambda v: fmt.format(v),
        border=0,
        escape=True,
    )


def _img(b64: str | None, alt: str) -> str:
    if b64 is None:
        return f"<p class='note'>({html.escape(alt)}: nothing to plot yet)</p>"
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{b64}'>"


def render_html(session, level: float = 0.95) -> str:
    """The report of a session as one self-contained HTML string.

    Parameters
    ----------
    session : Session
        The labeling session (:class:`bayes_activeeval.session.Session`).
    level : float
        Confidence level of the frequentist intervals, in ``(0, 1)`` (default 0.95); the
        posterior summary keeps ArviZ's 89% equal-tailed interval.

    Returns
    -------
    str
        An HTML page with the figures embedded as base64 PNG.
    """
    from ._validation import check_level

    if isinstance(level, (str, bytes, bool, np.bool_)):
        raise TypeError(f"level must be a number in (0, 1), got {level!r}")
    level = check_level(level)
    with session.store.reading():  # every table and figure from one state of the file
        return _render_html(session, level)


def _render_html(session, level: float) -> str:
    from tqdm import tqdm

    with tqdm(total=4, desc="report", unit="step", disable=None, leave=False) as bar:
        st = session.status(level)
        meas = st["measure"]
        bar.update()
        path = estimate_path(session, level)
        bar.update()
        q = session.proposal_q()
        bar.update()
        posterior = session.posterior()
        post_sum = posterior_summary(posterior)
        bar.update()
    freq_rows = []
    estimates = session.estimates()
    for name, est in estimates.items():
        lo, hi = est.confidence_interval(level)  # the interval `bae status` prints
        freq_rows.append(
            {
                "model": name,
                "estimate": est.value,
                "stderr": est.stderr,
                f"{level:.0%} low": lo,
                "high": hi,
                "draws": est.n_draws,
                "labels": est.n_labels,
            }
        )
    freq = pd.DataFrame(freq_rows)
    freq_for_plot = freq.rename(columns={f"{level:.0%} low": "low"}) if freq_rows else None
    plot_labels = [ESTIMATOR_LABELS[estimator_kind(session, r["model"])] for r in freq_rows]
    conflicts = posterior_conflicts(st["estimates"], post_sum, meas)
    unseen_html = "".join(
        f"<p class='note unseen'>{html.escape(r['model'])}: "
        f"{html.escape(unseen_line(r['unseen'], meas, f'{level:.0%}'))}</p>"
        for r in st["estimates"]
        if r.get("unseen")
    )
    curves = ""
    if isinstance(get_measure(session.design.measure), RankMeasure):
        curves = (
            "<h2>ROC and precision-recall curves</h2>"
            + _img(_fig_curves(session, level), "ROC and precision-recall curves")
            + "<p class='note'>Weighted curves of the labeled draws with "
            f"{level:.0%} simultaneous bands (bootstrap of the draws, sup-t; "
            "docs/threshold-free.md). The table's interval for these measures is the Wilson "
            "interval with the guarded influence-function variance.</p>"
        )
    comp = ""
    if len(session.design.models) > 1 and freq_rows:
        _, tests = comparison_table(session, level)
        comp = "<h2>Comparison of models</h2>" + _table(tests)
    budget = (
        f"{st['budget']:g} ({st['budget_left']:g} left)" if st["budget"] is not None else "none"
    )
    meta = pd.DataFrame(
        {
            "": [
                "session",
                "pool file",
                "pool sha256",
                "items",
                "models",
                "measure",
                "design",
                "oracle model",
                "seed",
                "labels",
                "budget",
                "stages completed",
                "items pending",
            ],
            "value": [
                session.path,
                session.pool_file.path,
                session.pool_file.checksum,
                f"{st['n_items']:,}",
                ", ".join(session.design.models),
                meas,
                st["design"],
                st["oracle"],
                str(session.design.seed),
                str(st["labels"]),
                budget,
                str(st["stages_completed"]),
                str(st["pending"]),
            ],
        }
    )
    if post_sum is not None:
        shown = post_sum[[c for c in post_sum.columns if not str(c).startswith("mcse")]]
        method = post_sum.attrs.get("method", "conjugate")
        model = _posterior_model(method)[1]
        note = posterior_note(method)
        bayes = (
            _table(shown, "{:.4g}")
            + f"<p class='note'>{model}; arviz.summary with its 89% equal-tailed interval. "
            "r_hat near 1 and large ess_bulk/ess_tail mean the draws can be trusted. "
            f"{html.escape(note)}</p>"
        )
    else:
        bayes = "<p class='note'>No posterior yet (no completed stage, or a regression pool).</p>"
    body = f"""
<h1>Evaluation report: {html.escape(meas)}</h1>
<p class="note">bae {_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC</p>
<div class="meta">{meta.to_html(index=False, header=False, border=0)}</div>
<div class="side">
  <div><h2>Frequentist answer</h2>{_table(freq)}
  <p class="note" id="estimator">{html.escape(estimate_note(session, estimates))}</p>
  {unseen_html}</div>
  <div><h2>Bayesian answer</h2>{bayes}</div>
</div>
{"".join(f"<p class='note'><b>{html.escape(c)}</b></p>" for c in conflicts)}
{comp}
{curves}
<h2>Estimate versus labels</h2>
{_img(_fig_path(path, meas, level), "estimate versus labels")}
<h2>Proposal against the score</h2>
{_img(_fig_proposal(session, q), "proposal against the score")}
<p class="note">n·q(x) above 1: the item is sampled more often than under passive sampling.</p>
<h2>Posterior of the measure</h2>
{_img(_fig_posterior(posterior, freq_for_plot, meas, plot_labels), "posterior of the measure")}
"""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>bae report: {html.escape(meas)}</title><style>{_CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def write_report(
    session, out: str | os.PathLike, level: float = 0.95, *, overwrite: bool = True
) -> str:
    """Write :func:`render_html` to ``out`` (atomically: a temporary file, then a rename; with
    ``overwrite=False`` an existing ``out`` is an error).

    Parameters
    ----------
    session : Session
        The labeling session (:class:`bayes_activeeval.session.Session`).
    out : str or os.PathLike
        Path of the HTML file to write.
    level : float
        Confidence level of the frequentist intervals, in ``(0, 1)`` (default 0.95).
    overwrite : bool
        Replace an existing ``out`` (default ``True``).

    Returns
    -------
    str
        ``out`` as a string.
    """
    from .io import write_new_file

    text = render_html(session, level)
    write_new_file(out, text, overwrite=overwrite)
    return str(out)


def _version() -> str:
    from . import __version__

    return __version__
