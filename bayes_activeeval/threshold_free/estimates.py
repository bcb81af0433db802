"""Estimates of threshold-free measures from importance-weighted draws, their influence-function
variance and the paired comparison of two models on one sample."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import intervals
from .._validation import check_binary_labels, check_finite, check_probabilities, check_weights
from ..beliefs import CategoricalBelief, as_belief
from ..estimators import (
    Estimate,
    UndefinedEstimateWarning,
    draw_labels,
    satterthwaite_df,
)
from ..proposals import Draws
from .kernels import RankMeasure, influence, rank_measure

__all__ = [
    "RankEstimate",
    "expected_influence",
    "measure_models",
    "model_scores",
    "positive_probs",
    "rank_estimate",
    "rank_estimate_arrays",
    "stacked_estimate",
]


# ------------------------------------------------------------------------------------------------
# estimates
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class RankEstimate(Estimate):
    """An :class:`~bayes_activeeval.Estimate` of a threshold-free measure.

    Its intervals are the package's one interval function,
    :meth:`Estimate.confidence_interval` (:func:`bayes_activeeval.intervals.interval`), with
    ``"wilson"`` as the default method for a bounded range: Wilson's score interval on the
    effective sample size ``n* = x̂(1 − x̂)/SE²`` the influence-function standard error implies
    (Korn & Graubard (1998); Newcombe (2006) for the Mann-Whitney AUC), on the unit scale of the
    measure's range — asymmetric near 1, where good models' AUC and average precision sit, never
    crossing the bound. ``kish`` is the Kish size of the scarcer class among the draws (the
    effective size at the bound, where a sample without a discordant pair has ``SE = 0`` under
    the empirical variance). ``details["influence"]`` holds ``ψ̂`` of each draw (one column per
    model for a stack), ``details["variance"]`` which variance was used.

    Parameters
    ----------
    values : ndarray (m,)
        The estimated measure, one entry per output.
    cov : ndarray (m, m)
        Influence-function covariance of ``values``.
    risk : ndarray (m,)
        A copy of ``values`` for the estimates of this module (threshold-free measures have no
        mean loss vector).
    n_draws : int
        Number of draws entering the estimate (repeats included).
    n_labels : int
        Labels the oracle was asked for.
    outputs : tuple of str
        Names of the outputs.
    measure : str
        Name of the measure.
    bounds : (float, float)
        The measure's range (default unbounded); finite bounds make ``"wilson"`` the default
        interval.
    estimator : str
        ``"ipw"`` (default) or ``"model_assisted"`` (with a control variate).
    details : dict
        What the estimate was computed with: ``"influence"``, ``"variance"``,
        ``"design_weight_df"`` and, with a belief or a control variate, the candidate
        covariances and ``"lambda"`` (default empty).
    df : ndarray (m,), optional
        Satterthwaite degrees of freedom of the variance (``None``: a normal quantile).
    kish : ndarray (m,), optional
        Kish size of the scarcer class among the draws.
    weight_df : ndarray (m,), optional
        Degrees of freedom of that class's weight heterogeneity (``inf``: no adjustment).
    n_max : int, optional
        Cap on the effective sample size of the score-type intervals.
    event_weight, event_weight_rms : ndarray (m,), optional
        Mean and root-mean-square weight of one more labeled event, for the ``"gamma"`` interval
        of :class:`~bayes_activeeval.Estimate` (default ``None``).
    anticipated_stderr : ndarray (m,), optional
        The standard error the models' own probabilities anticipate (default ``None``).
    """

    def confidence_interval(self, level: float = 0.95, method: str | None = None):
        """Two-sided interval, inside the measure's range: :meth:`Estimate.confidence_interval`
        with ``method="wilson"`` by default for a bounded range (``"t"`` otherwise).

        Not the package's ``"modified_wilson"``: Brown, Cai & DasGupta's (2001) Poisson bound
        corrects the lattice of a binomial count near the boundary, and ``n*`` of a rank
        estimate counts no Bernoulli trials. On the rank estimates it only widened the interval:
        together with the Korn-Graubard df (now off under the guarded variance, see
        :func:`rank_estimate_arrays`) it took the optimal design's coverage for the AUC at
        1:1,000 and AP at 1:10,000 (default model) from 0.95-0.98 to 0.97-0.998 in
        ``benchmarks/threshold_free.py``. Every other method by name.
        """
        if method is None:
            lo, hi = self.bounds
            method = "wilson" if np.isfinite(lo) and np.isfinite(hi) else "t"
        return super().confidence_interval(level, method)


class LazyPoolNotSupported(NotImplementedError, ValueError):
    """A call that does not run on a lazy pool yet (:func:`check_not_lazy`).

    A :class:`NotImplementedError`, and a :class:`ValueError` so that the ``bae`` command
    reports it in one line, as it does bad input.
    """


def check_not_lazy(pool, measure: Any, what: str) -> None:
    """Refuse a threshold-free measure (or a whole curve) on a lazy pool, up front.

    ROC AUC, average precision, recall at a false-positive rate and the curves of
    :mod:`bayes_activeeval.curves` read every item's score and belief (the rank proposal's
    influence terms, the estimate's guarded variance, the curve's ranking), which a
    :class:`~bayes_activeeval.lazy.LazyPool` does not hold; they are not lazy yet
    (``docs/scale.md``).

    Parameters
    ----------
    pool : Pool
        Any pool; nothing happens unless it is lazy.
    measure : str or RankMeasure
        The measure (or a description such as ``"the ROC curve"``), named in the message.
    what : str
        The call that refuses, named first in the message (e.g. ``"optimal_proposal"``).

    Raises
    ------
    LazyPoolNotSupported
        A :class:`NotImplementedError` (and :class:`ValueError`) for a lazy pool, naming the
        call and the measure and pointing to an in-memory pool.
    """
    if not getattr(pool, "is_lazy", False):
        return
    name = measure.name if isinstance(measure, RankMeasure) else str(measure)
    raise LazyPoolNotSupported(
        f"{what}: the threshold-free measure {name!r} is not available on a lazy pool yet (it "
        "ranks every item of the pool by score); use an in-memory pool for it "
        "(pool.take(np.arange(pool.n_items)) when the pool fits in memory, or a Pool of its "
        "columns; on the command line: without --lazy), or a thresholded measure (precision, "
        "recall, F1, ...) on the lazy pool"
    )


def model_scores(pool, model: str) -> np.ndarray:
    """The ranking score of a model: the pool's ``scores`` if given, else ``P(y = pos | x)``.

    Parameters
    ----------
    pool : Pool
        A pool with scores or class probabilities.
    model : str
        The model's name.

    Returns
    -------
    ndarray (n,)
        One score per pool item.
    """
    if pool.scores is not None:
        return np.asarray(pool.scores[model], dtype=float)
    view = pool.view(model)
    if view.prob is None:
        raise ValueError(
            "threshold-free measures rank items by score: give the pool scores= or probs="
        )
    return view.positive_prob()


def positive_probs(pool, belief: Any, models: tuple[str, ...], floor: float) -> np.ndarray:
    """``π(y = pos | x)`` from a belief (default: the models' own probabilities, their equal mixture
    for several models, Sawade (2012), Eq. 5.11), floored at ``floor`` on both classes.

    Parameters
    ----------
    pool : Pool
        A binary pool.
    belief : Belief, array-like or None
        A categorical belief, class probabilities (n, 2) or ``π(y = pos | x)`` (n,); ``None``:
        the models' own probabilities.
    models : tuple of str
        The models whose probabilities make the default belief.
    floor : float
        ``π`` is clipped to ``[floor, 1 − floor]`` (``0``: no floor).

    Returns
    -------
    ndarray (n,)
        ``π(y = pos | x)`` of every pool item.
    """
    b = as_belief(pool, belief, models)
    if not isinstance(b, CategoricalBelief):
        raise TypeError("threshold-free measures need a categorical belief")
    pi = b.probs[:, pool.pos]
    if floor > 0:
        pi = np.clip(pi, floor, 1.0 - floor)
    return pi


def measure_models(pool, measure: RankMeasure, model: str | None) -> tuple[str, ...]:
    """The models a threshold-free measure reads on ``pool``: those it is bound to, else
    ``model`` (checked against the pool). The pool must be binary with a positive class.

    Parameters
    ----------
    pool : Pool
        The pool.
    measure : RankMeasure
        The measure, bound to models or not.
    model : str or None
        The model of an unbound measure (``None``: the pool's only model); must be ``None`` for
        a bound one.

    Returns
    -------
    tuple of str
        The model names, in the measure's order.
    """
    if pool.task != "binary" or pool.pos is None:
        raise ValueError(
            f"measure {measure.name!r} needs a binary pool with a positive class; the pool is "
            f"{pool.task}"
        )
    if measure.models is not None:
        if model is not None:
            raise ValueError(f"measure {measure.name!r} is bound to models; do not pass model=")
        for m in measure.models:
            pool.check_model(m)
        return measure.models
    return (pool.check_model(model),)


def _class_counts(
    y: np.ndarray, v: np.ndarray, items: np.ndarray | None
) -> dict[int, tuple[int, int, int]]:
    """Per class ``c``: its draws, those with positive weight, and the distinct items among the
    latter (``items`` the pool indices of the draws; ``None``: every draw its own item)."""
    out = {}
    for c in (0, 1):
        sel = y == c
        live = sel & (v > 0)
        k = int(np.count_nonzero(live))
        out[c] = (
            int(np.count_nonzero(sel)),
            k,
            k if items is None else np.unique(items[live]).size,
        )
    return out


def _class_factor(y: np.ndarray, v: np.ndarray, items: np.ndarray | None = None) -> np.ndarray:
    """Per-draw small-sample factor ``1/(1 − Σ_c v²/(Σ_c v)²)`` of the draw's class ``c``: the
    ``m/(m − 1)`` of DeLong's per-class variances on uniform weights, Kish's effective size
    otherwise. ``inf`` for a class whose draws of positive weight are a single item (one draw,
    or one item drawn several times: its influence terms are all equal and their spread says
    nothing about the class's variance); ``0`` for a draw of weight zero, which adds nothing
    (``0 · inf`` was NaN, with a numpy warning)."""
    counts = _class_counts(y, v, items)
    out = np.empty(v.size)
    for c in (0, 1):
        sel = y == c
        sv = v[sel].sum()
        share = float(v[sel] @ v[sel]) / sv**2 if sv > 0 else 1.0
        single = not share < 1.0 or counts[c][2] <= 1
        out[sel] = np.inf if single else 1.0 / (1.0 - share)
        out[sel & (v == 0)] = 0.0
    return out


def _single_item_message(y: np.ndarray, v: np.ndarray, items: np.ndarray | None) -> str:
    """Which class is a single item among the draws of positive weight, in words."""
    parts = []
    for c, (n_c, k, d) in _class_counts(y, v, items).items():
        if d > 1 or k == 0:
            continue
        name = "positives" if c == 1 else "negatives"
        if k == 1:
            zero = f" ({n_c} drawn, {n_c - 1} with weight 0)" if n_c > 1 else ""
            parts.append(f"the {name} are a single draw with positive weight{zero}")
        else:
            parts.append(f"the {name} are a single item drawn {k} times")
    return " and ".join(parts) if parts else "the within-class variance is not finite"


def _item_weights(w: np.ndarray, ids: np.ndarray | None) -> np.ndarray:
    """The weights of the draws summed per distinct item (unchanged without repeats)."""
    if ids is None:
        return w
    uniq, inv = np.unique(ids, return_inverse=True)
    return w if uniq.size == ids.size else np.bincount(inv, w, uniq.size)


def _scarcer_class_sizes(
    y: np.ndarray, v: np.ndarray, items: np.ndarray | None = None
) -> tuple[float, float]:
    """Kish size ``(Σ v)²/Σ v²`` of the draws of the scarcer class and the degrees of freedom of
    their weights' heterogeneity (:func:`~bayes_activeeval.intervals.carrying_sizes` on that
    class). A rank measure compares the two classes, so the class with fewer effective draws
    carries it: Hanley & McNeil's (1982) variance of the AUC near 1 is of order ``1/min(m, n)``.
    With ``items`` (pool indices of the draws) the weights of repeated items are summed first:
    the size of distinct items (one item drawn twice counts once)."""
    best = (np.inf, np.inf)
    for c in (0, 1):
        sel = y == c
        w = _item_weights(v[sel], None if items is None else items[sel])
        if w.size == 0:
            return 0.0, np.inf
        kish, wdf = intervals.carrying_sizes(w, np.ones((w.size, 1)), np.ones((1, 1)))
        if kish[0] < best[0]:
            best = (float(kish[0]), float(wdf[0]))
    return best


def rank_estimate_arrays(
    measure: RankMeasure | str,
    scores: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    *,
    variance_weights: np.ndarray | None = None,
    n_labels: int | None = None,
    belief: np.ndarray | None = None,
    variance: str = "guarded",
    control: np.ndarray | None = None,
    control_mean: Any = 0.0,
    items: np.ndarray | None = None,
) -> RankEstimate:
    """The weighted estimate of a threshold-free measure from labeled draws, with its influence
    function variance.

    Parameters
    ----------
    measure : RankMeasure or str
    scores : ndarray (n,) or (n, k)
        Scores of the drawn items, one column per model the measure reads.
    y : ndarray (n,)
        Labels of the draws, 1 for the positive class and 0 otherwise (booleans accepted; any
        other value is refused, as :func:`~bayes_activeeval.threshold_free.weighted_roc_auc`
        refuses it).
    weights : ndarray (n,)
        Importance weights ``v = p/q``, finite and non-negative.
    variance_weights : ndarray (n,), optional
        Second factor of the variance weights, ``Cov = Σ f_i v_i v'_i ψ_i ψ_iᵀ / (Σ v)²`` (as
        :func:`~bayes_activeeval.weighted_estimate`; adaptive sampling passes its martingale or
        CLT weights). ``f_i`` is the class factor ``1/(1 − Σ_c v²/(Σ_c v)²)``, which makes the
        variance DeLong's exactly on uniform weights.
    n_labels : int, optional
        Labels bought (default ``n``).
    belief : ndarray (n,), optional
        ``π(y = 1 | x_i)`` of the drawn items under the belief the proposal was built with.
    variance : {"guarded", "empirical", "belief"}
        ``"empirical"``: ``Σ f v v' ψ̂(x_i, y_i)²`` from the realized labels (DeLong's form).
        ``"belief"``: the same sum with ``ψ̂(x_i, y_i)²`` replaced by its expectation under the
        belief, ``π_i ψ̂(x_i, 1)² + (1 − π_i) ψ̂(x_i, 0)²`` (Rao-Blackwellized over the labels).
        ``"guarded"`` (default; ``"empirical"`` without a belief): the larger of the two (by
        trace). Under heavy class skew the variance of AUC comes from positives hidden among
        low scores; a sample that missed them has an empirical variance far too small (95%
        intervals of the AUC covered 0.49-0.85 with the optimal proposal at 1:1,000 and down to
        0.05 on real pools, ``benchmarks/results/threshold_free*.md``), while the belief
        still expects them. The guard keeps the empirical variance when the belief is too
        confident. With a belief the interval uses a normal quantile and no Korn-Graubard df
        (the guard, not a t or df adjustment, answers for small samples). Its coverage is at
        least nominal but often above 0.97 under skew: the estimate's sampling distribution is
        a mixture over the rare discordant positives a sample holds, and the maximum of two
        variance estimates is biased upward (``docs/threshold-free.md``,
        ``benchmarks/results/threshold_free.md``).

    control : ndarray (n,) or (n, m), optional
        The model-assisted (control-variate) form: ``m(x_i) = E_π ψ_π(x_i, y)`` of each draw, the
        influence the belief expects, with ``ψ_π`` the influence function at the pool under the
        belief (:func:`expected_influence`). The estimate becomes
        ``T(P̂) − λ (Σ v m / Σ v − M)``, ``M = control_mean = Σ_x p(x) m(x)`` (zero when ``m``
        is centred under the belief, as an influence function is), with ``λ`` the
        variance-minimizing coefficient estimated from the sample (as
        :func:`~bayes_activeeval.estimators.model_assisted_estimate` does for generalized
        measures), and the variance uses the residual ``ψ̂ − λ (m − m̄)``. Consistent whatever
        the belief: ``Σ v m / Σ v − M`` has mean zero to first order.
    control_mean : float or ndarray (m,)
        ``M``.
    items : ndarray of int (n,), optional
        Pool indices of the draws (:func:`rank_estimate` passes ``draws.indices``), so that a
        class is counted by its distinct items: one item drawn twice is still a single item,
        whose influence terms are all equal, and takes the single-draw fallback below (before,
        its ``SE`` collapsed to a fraction of a single draw's). Default: every draw a distinct
        item.

    Returns
    -------
    RankEstimate
        ``details["variance"]`` names the variance used; with a belief ``details`` also holds
        both candidates, ``"cov_empirical"`` and ``"cov_belief"``. ``estimator="model_assisted"``
        with ``details["lambda"]`` when ``control`` is given. ``details["variance"] == "kish"``
        when a class's draws of positive weight are a single item (one draw, or with ``items``
        one item drawn several times) and no belief answers for it: DeLong's within-class
        variance (the factor ``m/(m − 1)``) is then undefined, and the variance is that of a
        proportion at the estimate on the Kish size of the scarcer class (of its distinct items,
        repeats' weights summed), so the default interval is the Wilson interval on that size —
        the documented fallback where ``n*`` is undefined (before, ``SE`` and the interval were
        NaN without a warning).

    Raises
    ------
    ValueError
        For an unknown measure, a bad ``variance``/``belief`` (checked before anything else, an
        undefined sample included), non-finite ``scores``, labels ``y`` other than 0/1, negative
        or non-finite ``weights`` or lengths that do not match; ``scores`` with a number of
        columns other than the models the measure reads (one for an unbound measure), a
        ``control`` of a shape other than ``(n,)``/``(n, m)`` or ``items`` other than ``(n,)``
        (the message names the argument, its shape and the expected one).

    Warns
    -----
    UndefinedEstimateWarning
        When the sample lacks a class (the estimate is NaN), or when a class's draws of
        positive weight are a single item (the Kish-size fallback above; the message says
        which class, how many draws and how many of positive weight).
    UserWarning
        Recall at false-positive rate ``α`` when ``α n₀ < 1``, ``n₀`` the Kish size
        ``(Σ_{y=0} v)²/Σ_{y=0} v²`` of the drawn negatives: the sample resolves no
        false-positive rate below ``1/n₀``, fewer than one effective drawn negative lies above
        the threshold, and the estimate is the ROC curve's first step — the recall at a
        false-positive rate near ``1/n₀ > α``, biased upward, with intervals that miss from
        above (``docs/threshold-free.md``). At ``α n₀ ≥ 1`` a drawn negative pins the
        threshold. The threshold 1 is where the first step reaches ``α``; as
        :func:`~bayes_activeeval.curves.curve_band`'s few-positives warning, a ``UserWarning``:
        the estimate is defined, but unreliable.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    if variance not in ("guarded", "empirical", "belief"):
        raise ValueError(f"variance must be 'guarded', 'empirical' or 'belief', got {variance!r}")
    if belief is None and variance == "belief":
        raise ValueError("variance='belief' needs belief= (π of the drawn items)")
    S = check_finite(np.asarray(scores, dtype=float), "scores")
    if S.ndim == 1:
        S = S[:, None]
    if S.ndim != 2:
        raise ValueError(f"scores must be (n,) or (n, k), got shape {S.shape}")
    n, k = S.shape
    n_models = 1 if m.models is None else len(m.models)
    if k != n_models:
        want = f"({n},) or ({n}, 1)" if n_models == 1 else f"({n}, {n_models})"
        reads = "one model (it is not bound)" if m.models is None else f"models {m.models}"
        raise ValueError(
            f"scores has shape {np.shape(scores)}; measure {m.name!r} reads {reads}, so scores "
            f"must have shape {want}, one column per model"
        )
    y = check_binary_labels(y, "y")
    if y.size != n:
        raise ValueError(f"y has {y.size} entries but scores has {n} rows")
    y = y.astype(np.int8)
    v = check_weights(weights, "weights", n=n)
    if variance_weights is not None:
        check_weights(variance_weights, "variance_weights", n=n)
    n_out = m.n_outputs
    if control is not None:
        mm = np.asarray(control, dtype=float)
        if mm.shape != (n, n_out) and not (n_out == 1 and mm.shape == (n,)):
            want = f"({n},) or ({n}, 1)" if n_out == 1 else f"({n}, {n_out})"
            raise ValueError(
                f"control has shape {mm.shape}; expected {want} (one row per draw, one column "
                f"per output of {m.name!r})"
            )
        mm = mm.reshape(n, n_out)
    if items is not None:
        items = np.asarray(items)
        if items.shape != (n,):
            raise ValueError(f"items has shape {items.shape}; expected ({n},), one per draw")
    if belief is not None:
        pi = np.asarray(belief, dtype=float)
        if pi.shape != (n,):
            raise ValueError(f"belief has shape {pi.shape}; expected ({n},)")
        check_probabilities(pi, "belief")
    m1, m0 = v * y, v * (1 - y)
    vals, psis, psi1s, psi0s = [], [], [], []
    n_eff0 = float(m0.sum() ** 2 / (m0 @ m0)) if m0.any() else 0.0
    for j in range(k):
        val, p1, p0 = influence(m, S[:, j], m1, m0, n_eff_neg=n_eff0)
        vals.append(val)
        psis.append(np.where(y == 1, p1, p0))
        psi1s.append(p1)
        psi0s.append(p0)
    vals_a = np.array(m.combine(vals))
    psi = np.stack(m.combine(psis), axis=1) if n else np.zeros((0, n_out))
    n_lab = n if n_labels is None else int(n_labels)
    sv = v.sum()
    if not np.all(np.isfinite(vals_a)) or sv <= 0:
        warnings.warn(
            f"the labeled sample does not define {m.name!r} yet (it needs a positive and a "
            "negative); the estimate is NaN",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
        nan = np.full(n_out, np.nan)
        return RankEstimate(
            nan,
            np.full((n_out, n_out), np.nan),
            nan,
            n,
            n_lab,
            m.outputs,
            m.name,
            m.bounds,
            kish=np.zeros(n_out),
        )
    if m.kind == "recall_at_fpr" and float(m.fpr) * n_eff0 < 1.0:
        warnings.warn(
            f"{m.name!r} is below the sample's false-positive-rate resolution: the drawn "
            f"negatives have Kish size {n_eff0:.3g}, so fewer than one of them (α × size = "
            f"{float(m.fpr) * n_eff0:.2g}) scores above the threshold; the estimate reads the "
            f"ROC curve's first step (the recall near a false-positive rate of 1/{n_eff0:.3g}), "
            "is biased upward and its interval can miss. Label more negatives (a Kish size "
            f"of at least {1.0 / float(m.fpr):.3g}) or estimate the recall at a larger "
            "false-positive rate",
            UserWarning,
            stacklevel=2,
        )
    v2 = v * (v if variance_weights is None else np.asarray(variance_weights, dtype=float))
    vv = v2 * _class_factor(y, v, items)
    shift = np.zeros((n, n_out))
    details: dict[str, Any] = {}
    if control is not None:
        mbar = (v @ mm) / sv
        r = mm - mbar
        den = (r * r * v2[:, None]).sum(axis=0)
        # λ minimizes Σ v² (ψ − λ r)²; without spread in r the difference estimator (λ = 1)
        lam = np.where(
            den > 0, (psi * r * v2[:, None]).sum(axis=0) / np.where(den > 0, den, 1.0), 1.0
        )
        vals_a = np.clip(vals_a - lam * (mbar - np.asarray(control_mean, dtype=float)), *m.bounds)
        shift = lam * r
        psi = psi - shift
        details["lambda"] = lam
    with np.errstate(invalid="ignore"):
        cov = (psi * vv[:, None]).T @ psi / sv**2
    used = "empirical"
    if not np.all(np.isfinite(cov)):
        # a class whose draws are one item: its within-class variance (DeLong's m/(m − 1)) is
        # undefined
        cov = np.full((n_out, n_out), np.nan)
        df = None
    else:
        df = satterthwaite_df(vv, psi)
    if belief is not None and variance != "empirical":
        f1, f0 = np.stack(m.combine(psi1s), axis=1), np.stack(m.combine(psi0s), axis=1)
        f1, f0 = f1 - shift, f0 - shift
        # E_π[ψψᵀ] per draw: π ψ(x, 1)ψ(x, 1)ᵀ + (1 − π) ψ(x, 0)ψ(x, 0)ᵀ
        vb = v2  # a model-based expectation: no small-sample factor of the drawn classes
        with np.errstate(invalid="ignore"):
            cov_b = ((f1 * (vb * pi)[:, None]).T @ f1 + (f0 * (vb * (1 - pi))[:, None]).T @ f0) / (
                sv**2
            )
        details["cov_empirical"], details["cov_belief"] = cov, cov_b
        if variance == "belief" or not np.all(np.isfinite(cov)) or np.trace(cov_b) > np.trace(cov):
            cov, used = cov_b, "belief"
        # the guard already answers for small samples: a normal quantile on either side (the
        # Satterthwaite t on top of it over-covered, 0.99-1.0 at 1:100)
        df = None
    kish, wdf = _scarcer_class_sizes(y, v)
    if not np.all(np.isfinite(cov)):
        # the documented Kish-size fallback: the variance a proportion at the estimate has on
        # the Kish size of the scarcer class, so that the interval is the score interval on
        # that size (as for a sample without a discordant pair, where SE = 0)
        lo, hi = m.bounds
        if items is not None:  # the size of distinct items: a repeat counts once
            kish = _scarcer_class_sizes(y, v, items)[0]
        x = np.clip((vals_a - lo) / (hi - lo), 0.0, 1.0)
        cov = np.diag(x * (1.0 - x) / max(kish, 1.0) * (hi - lo) ** 2)
        used, df = "kish", None
        warnings.warn(
            f"{_single_item_message(y, v, items)}, so the variance of {m.name!r} cannot be "
            "estimated from the sample (DeLong's within-class variance needs two items); the "
            f"standard error and interval use the Kish size {kish:.3g} of the scarcer class",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
    details["design_weight_df"] = wdf
    if "cov_belief" in details:
        # the guard answers for the uncertainty of the variance (a sample that missed the
        # hidden positives): no Korn-Graubard df adjustment on top of it, whichever side won
        # (with it, and the Poisson-modified Wilson, the AUC at 1:1,000 covered 0.97-0.99)
        wdf = np.inf
    return RankEstimate(
        vals_a,
        cov,
        vals_a.copy(),
        n,
        n_lab,
        m.outputs,
        m.name,
        m.bounds,
        estimator="ipw" if control is None else "model_assisted",
        details={"influence": psi, "variance": used, **details},
        df=df,
        kish=np.full(n_out, kish),
        weight_df=np.full(n_out, wdf),
    )


def expected_influence(
    pool, measure: RankMeasure | str, probs: np.ndarray, *, model: str | None = None
) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The influence the belief expects of every pool item, ``m(x) = E_{y∼π} ψ_π(x, y)``.

    ``ψ_π`` is the influence function (:func:`influence`) at the pool under the belief (positive
    mass ``p π``, negative mass ``p (1 − π)``), so ``Σ_x p(x) m(x) = 0``. ``m`` is the control
    variate of the model-assisted estimate (:func:`rank_estimate_arrays` with ``control=``) and
    ``Var_π ψ = π (1 − π) (ψ(x, 1) − ψ(x, 0))²`` the integrand of its optimal proposal.

    Parameters
    ----------
    pool : Pool
        A binary pool.
    measure : RankMeasure or str
        ``"roc_auc"``, ``"average_precision"``, ``"recall@fpr=α"`` or a
        :class:`RankMeasure` (bound, or unbound with ``model``).
    probs : ndarray (n,)
        The belief ``π(y = pos | x)`` of every pool item.
    model : str, optional
        Which model, for an unbound measure.

    Returns
    -------
    values : ndarray (m,)
        The measure under the belief.
    expected : ndarray (n, m)
        ``m(x)``, one column per output (``ψ_a − ψ_b`` for a difference).
    parts : list of (ψ(x, 1), ψ(x, 0))
        One pair per output.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    pi = np.asarray(probs, dtype=float)
    vals, parts = belief_influence(pool, m, pi, model)
    expected = np.stack([pi * p1 + (1.0 - pi) * p0 for p1, p0 in parts], axis=1)
    return vals, expected, parts


def belief_influence(
    pool, m: RankMeasure, pi: np.ndarray, model: str | None = None
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The measure(s) under the belief ``π(y = pos | x) = pi`` and ``(ψ(x, 1), ψ(x, 0))`` of
    every pool item, one pair per output (``ψ_a − ψ_b`` for a difference): the influence
    function (:func:`influence`) at the pool under the belief (positive mass ``p π``, negative
    mass ``p (1 − π)``)."""
    models = measure_models(pool, m, model)
    p = pool.p
    m1, m0 = p * pi, p * (1.0 - pi)
    n_eff0 = float(m0.sum() ** 2 / (m0 @ m0))
    per_model = [influence(m, model_scores(pool, mod), m1, m0, n_eff_neg=n_eff0) for mod in models]
    combined = m.combine(per_model)
    return np.array([val for val, _, _ in combined]), [(p1, p0) for _, p1, p0 in combined]


def rank_estimate(
    pool,
    measure: RankMeasure | str,
    draws: Draws,
    labels: Any,
    *,
    model: str | None = None,
    oracle: str = "deterministic",
    belief: Any = None,
    variance: str = "guarded",
    estimator: str = "ipw",
) -> RankEstimate:
    """Estimate ROC AUC, average precision or recall at a false-positive rate from labeled draws.

    The estimate is the measure of the importance-weighted empirical distribution of the draws —
    the same number as scikit-learn's ``roc_auc_score`` / ``average_precision_score`` with
    ``sample_weight=draws.weights`` — and its standard error comes from the influence function
    (:func:`influence`): ``Var ≈ Σ f_i v_i² ψ̂_i² / (Σ v)²`` (Sawade (2012), Eq. 3.14 with ``ψ``
    for the centred loss; DeLong et al. (1988) on uniform weights).

    Parameters
    ----------
    pool : Pool
        A binary pool; items are ranked by the model's ``scores`` if the pool has them, else by
        its probability of the positive class.
    measure : str or RankMeasure
        ``"roc_auc"``, ``"average_precision"``, ``"recall@fpr=0.01"``, or a
        :class:`RankMeasure` (bound, or unbound with ``model``).
    draws : Draws
    labels : array-like (len(draws),) or mapping
        As in :func:`~bayes_activeeval.estimate`.
    model : str, optional
    oracle : {"deterministic", "stochastic"}
    belief : Belief or array-like, optional
        The belief for ``variance="guarded"``/``"belief"`` (:func:`rank_estimate_arrays`);
        default the model's own probabilities (their equal mixture for several models), as the
        proposals use. Ignored without probabilities in the pool.
    variance : {"guarded", "empirical", "belief"}
        See :func:`rank_estimate_arrays`.
    estimator : {"ipw", "model_assisted"}
        ``"model_assisted"``: the control-variate form with the belief's expected influence
        (:func:`expected_influence`; ``control=`` of :func:`rank_estimate_arrays`); pair it with
        ``rank_proposal(..., estimator="model_assisted")``. Needs a belief (or the pool's
        probabilities).

    Returns
    -------
    RankEstimate
        Intervals from :meth:`Estimate.confidence_interval` (the package's one interval
        function).

    Raises
    ------
    NotImplementedError
        On a lazy pool (:func:`check_not_lazy`): threshold-free measures are not lazy yet.

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> from bayes_activeeval import threshold_free as tf
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.01, rng=0)
    >>> draws = tf.rank_proposal(sp.pool, "roc_auc").draw(500, rng=1)
    >>> est = tf.rank_estimate(sp.pool, "roc_auc", draws, sp.labeler(draws.indices))
    >>> lo, hi = est.confidence_interval(0.95)
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    check_not_lazy(pool, m, "estimate (rank_estimate)")
    if not isinstance(draws, Draws):
        raise TypeError(
            f"draws must be a Draws object (from Proposal.draw), got {type(draws).__name__}"
        )
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    models = measure_models(pool, m, model)
    y = draw_labels(pool, draws.indices, labels, oracle=oracle) == pool.pos
    S = np.stack([model_scores(pool, mod)[draws.indices] for mod in models], axis=1)
    n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    pi = control = None
    if estimator == "model_assisted":
        if belief is None and not pool.has_probs():
            raise ValueError("estimator='model_assisted' needs a belief (or probs in the pool)")
        pi_pool = positive_probs(pool, belief, models, 0.0)
        _, expected, _ = expected_influence(pool, m, pi_pool, model=model)
        control = expected[draws.indices]
        pi = pi_pool[draws.indices] if variance != "empirical" else None
    elif variance != "empirical" and (belief is not None or pool.has_probs()):
        pi = positive_probs(pool, belief, models, 0.0)[draws.indices]
    return rank_estimate_arrays(
        m,
        S,
        y,
        draws.weights,
        n_labels=n_labels,
        belief=pi,
        variance=variance,
        control=control,
        items=draws.indices,
    )


# ------------------------------------------------------------------------------------------------
# comparison of models on one sample
# ------------------------------------------------------------------------------------------------
def stacked_estimate(
    pool,
    measure: RankMeasure | str,
    draws: Draws,
    labels: Any,
    models: tuple[str, ...],
    *,
    oracle: str = "deterministic",
    belief: Any = None,
    variance: str = "guarded",
) -> RankEstimate:
    """The measure for several models on one sample, with the joint covariance of the estimates
    (the k × k matrix of DeLong et al. (1988) on uniform weights).

    Parameters
    ----------
    pool : Pool
        A binary pool.
    measure : RankMeasure or str
        An unbound threshold-free measure (``"roc_auc"``, ``"average_precision"``,
        ``"recall@fpr=α"``).
    draws : Draws
        The labeled draws.
    labels : array-like (len(draws),) or mapping
        As in :func:`~bayes_activeeval.estimate`.
    models : tuple of str
        The models, one output each, in this order.
    oracle : {"deterministic", "stochastic"}
        As in :func:`rank_estimate` (default ``"deterministic"``).
    belief : Belief or array-like, optional
        As in :func:`rank_estimate`.
    variance : {"guarded", "empirical", "belief"}
        See :func:`rank_estimate_arrays` (default ``"guarded"``).

    Returns
    -------
    RankEstimate
        One output per model, with their joint covariance.

    Raises
    ------
    NotImplementedError
        On a lazy pool (:func:`check_not_lazy`): threshold-free measures are not lazy yet.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    check_not_lazy(pool, m, "compare (stacked_estimate)")
    return rank_estimate(
        pool, m.bind(models), draws, labels, oracle=oracle, belief=belief, variance=variance
    )
