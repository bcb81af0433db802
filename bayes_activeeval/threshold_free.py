"""Threshold-free measures: ROC AUC, average precision and recall at a fixed false-positive rate.

These measures are not of the form ``g(E_p[ℓ])`` (Marchant & Rubinstein (2021), Def. 1): ROC AUC
compares *pairs* of items, average precision averages a precision over the positives' own scores.
They are smooth functionals ``T(P)`` of the joint distribution ``P`` of score and label, and the one
tool that linearizes any such functional is its influence function ``ψ(x, y)`` (Hampel 1974): to
first order ``T(P̂) − T(P) ≈ E_P̂[ψ]``. With ``ψ`` in place of ``Dg(R)(ℓ − R)`` everything the
package does for generalized measures carries over unchanged:

- the estimate is the functional of the importance-weighted empirical distribution
  ``P̂ = Σ v_i δ_(x_i, y_i) / Σ v``, ``v = p/q`` (for ROC AUC, the ratio of weighted two-sample
  U-statistics; Hanley & McNeil (1982) for the Mann-Whitney form);
- its variance is ``Σ v_i² ψ̂_i² / (Σ v)²`` (Sawade (2012), Eq. 3.14 with ``ψ`` for the centred
  loss); for ROC AUC ``ψ`` is DeLong's placement value, and on uniform weights the variance equals
  DeLong, DeLong & Clarke-Pearson (1988) exactly;
- the optimal proposal is ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(E_{y∼π} ψ(x, y)²)`` (Sawade (2012),
  Thm. 4.1/4.2; Marchant & Rubinstein (2021), Prop. 1), with ``ψ`` computed on the pool under the
  belief ``π`` (the positive mass of item ``x`` is ``p(x) π(x)``, its negative mass
  ``p(x)(1 − π(x))``);
- comparing two models on one sample uses ``ψ_a − ψ_b`` (DeLong et al. (1988), the paired,
  correlated U-statistics), and its power-optimal proposal uses ``E_π (ψ_a − ψ_b)²``
  (Sawade (2012), Thm. 5.1).

Every kernel is ``O(n log n)``: one sort by score, tie groups, cumulative masses.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from ._validation import check_fraction, check_level, check_model_names
from .beliefs import CategoricalBelief, as_belief
from .estimators import (
    Estimate,
    UndefinedEstimateWarning,
    draw_labels,
    satterthwaite_df,
)
from .proposals import (
    DEFAULT_BELIEF_FLOOR,
    DEFAULT_MIX,
    Draws,
    Proposal,
    _costs,
    _mix,
)

__all__ = [
    "RankEstimate",
    "RankMeasure",
    "influence",
    "rank_estimate",
    "rank_measure",
    "rank_proposal",
    "weighted_average_precision",
    "weighted_roc_auc",
]

KINDS = ("roc_auc", "average_precision", "recall_at_fpr")

_ALIASES = {
    "roc_auc": "roc_auc",
    "auc": "roc_auc",
    "roc_auc_score": "roc_auc",
    "auroc": "roc_auc",
    "average_precision": "average_precision",
    "average_precision_score": "average_precision",
    "ap": "average_precision",
    "pr_auc": "average_precision",
}
_RECALL_AT = re.compile(r"^(?:recall|tpr)(?:@|_at_)fpr[=_]?([0-9.eE+-]+)$")


# ------------------------------------------------------------------------------------------------
# measures
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankMeasure:
    """A threshold-free measure of a scoring model (or a difference / stack of them).

    Parameters
    ----------
    kind : {"roc_auc", "average_precision", "recall_at_fpr"}
    fpr : float, optional
        The false-positive rate for ``"recall_at_fpr"``.
    models : tuple of str, optional
        Models the measure is bound to: two with ``difference=True`` (``T_a − T_b``), or several
        (the stacked vector ``(T_1, …, T_k)``).
    difference : bool
        Whether a two-model binding is the difference.
    """

    kind: str
    fpr: float | None = None
    models: tuple[str, ...] | None = None
    difference: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "recall_at_fpr":
            if self.fpr is None:
                raise ValueError("recall_at_fpr needs fpr=")
            check_fraction(self.fpr, "fpr", allow_zero=False)
        if self.difference and (self.models is None or len(self.models) != 2):
            raise ValueError("a difference needs exactly two models")

    # the attributes the rest of the package reads from a measure
    task = "binary"
    greater_is_better = True
    scale_invariant = True
    tabular = False

    @property
    def base_name(self) -> str:
        return self.kind if self.kind != "recall_at_fpr" else f"recall@fpr={self.fpr:g}"

    @property
    def name(self) -> str:
        b = self.base_name
        if self.models is None:
            return b
        if self.difference:
            a, c = self.models
            return f"{b}[{a}]-{b}[{c}]"
        return f"{b}[{','.join(self.models)}]"

    @property
    def outputs(self) -> tuple[str, ...]:
        if self.models is None or self.difference:
            return (self.name,)
        return tuple(f"{self.base_name}[{m}]" for m in self.models)

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)

    @property
    def bounds(self) -> tuple[float, float]:
        return (-1.0, 1.0) if self.difference else (0.0, 1.0)

    def bind(self, models, difference: bool = False) -> RankMeasure:
        """This measure bound to models (a stack, or with ``difference=True`` ``T_a − T_b``)."""
        if self.models is not None:
            raise ValueError(f"measure {self.name!r} is already bound to models {self.models}")
        models = check_model_names(models, 2 if difference else 1)
        return RankMeasure(self.kind, self.fpr, models, difference)

    def __repr__(self) -> str:
        return f"RankMeasure({self.name!r})"


def rank_measure(measure: Any) -> RankMeasure | None:
    """The :class:`RankMeasure` for a name such as ``"roc_auc"``, ``"average_precision"`` or
    ``"recall@fpr=0.01"`` (or a :class:`RankMeasure` itself); ``None`` for any other measure."""
    if isinstance(measure, RankMeasure):
        return measure
    if not isinstance(measure, str):
        return None
    key = measure.strip().lower().replace("-", "_")
    if key in _ALIASES:
        return RankMeasure(_ALIASES[key])
    m = _RECALL_AT.match(key)
    if m:
        try:
            fpr = float(m.group(1))
        except ValueError:
            raise ValueError(f"cannot read the false-positive rate in {measure!r}") from None
        return RankMeasure("recall_at_fpr", fpr)
    return None


# ------------------------------------------------------------------------------------------------
# kernels: scores and class masses -> value and the influence function of every item
# ------------------------------------------------------------------------------------------------
def _tie_groups(s: np.ndarray) -> tuple[np.ndarray, int]:
    """Group index of every item among the distinct scores in ascending order, and their number."""
    order = np.argsort(s, kind="stable")
    ss = s[order]
    new = np.empty(ss.size, dtype=bool)
    new[:1] = True
    new[1:] = ss[1:] != ss[:-1]
    gid = np.cumsum(new) - 1
    inv = np.empty(s.size, dtype=np.int64)
    inv[order] = gid
    return inv, int(gid[-1]) + 1 if s.size else 0


def _group_masses(s, m1, m0):
    inv, G = _tie_groups(s)
    return inv, np.bincount(inv, m1, G), np.bincount(inv, m0, G)


def _auc(inv, g1, g0, W1, W0):
    c1, c0 = np.cumsum(g1), np.cumsum(g0)
    v10 = (c0 - 0.5 * g0) / W0  # a positive at this score: negatives below, half the ties
    v01 = (W1 - c1 + 0.5 * g1) / W1  # a negative at this score: positives above, half the ties
    auc = float(g1 @ v10) / W1
    W = W1 + W0
    return auc, (v10[inv] - auc) * (W / W1), (v01[inv] - auc) * (W / W0)


def _ap(inv, g1, g0, W1, W0):
    W = W1 + W0
    tp = W1 - np.cumsum(g1) + g1  # positive mass scoring >= this score
    pp = tp + W0 - np.cumsum(g0) + g0
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(pp > 0, tp / pp, 0.0)
        r = np.where(pp > 0, g1 / pp, 0.0)
    ap = float(g1 @ prec) / W1
    c1 = np.cumsum(r)  # E[y' 1(s' <= s) / D(s')]
    c2 = np.cumsum(r * prec)  # E[y' prec(s') 1(s' <= s) / D(s')]
    pi1 = W1 / W
    psi1 = (prec + c1 - ap - c2) / pi1
    psi0 = -c2 / pi1
    return ap, psi1[inv], psi0[inv]


def _roc_points(g1, g0, W1, W0):
    """ROC points for thresholds at the distinct scores, highest first, starting at (0, 0)."""
    tpr = np.concatenate([[0.0], np.cumsum(g1[::-1]) / W1])
    fpr = np.concatenate([[0.0], np.cumsum(g0[::-1]) / W0])
    return fpr, tpr


def _tpr_at(fpr, tpr, alpha):
    return np.interp(alpha, fpr, tpr)


def _recall_at_fpr(inv, g1, g0, W1, W0, alpha, n_eff0):
    fpr, tpr = _roc_points(g1, g0, W1, W0)
    value = float(_tpr_at(fpr, tpr, alpha))
    G = g1.size
    # the (randomized) threshold: groups above it count 1, the group it cuts counts λ
    k = int(np.clip(np.searchsorted(fpr, alpha, side="left"), 1, G))  # ROC point k = group G-k
    lam = (alpha - fpr[k - 1]) / (fpr[k] - fpr[k - 1]) if fpr[k] > fpr[k - 1] else 1.0
    above = np.zeros(G)
    above[G - k + 1 :] = 1.0
    above[G - k] = np.clip(lam, 0.0, 1.0)
    # slope of the ROC curve at alpha: secant over a relative window shrinking with n_eff0·alpha
    h = min(0.5, max(n_eff0 * alpha, 1.0) ** (-1.0 / 3.0))
    lo, hi = alpha * (1 - h), min(alpha * (1 + h), 1.0)
    slope = float((_tpr_at(fpr, tpr, hi) - _tpr_at(fpr, tpr, lo)) / (hi - lo))
    pi1, pi0 = W1 / (W1 + W0), W0 / (W1 + W0)
    a = above[inv]
    psi1 = (a - value) / pi1
    psi0 = -slope * (a - alpha) / pi0
    return value, psi1, psi0


def influence(
    measure: RankMeasure | str,
    scores: np.ndarray,
    pos_mass: np.ndarray,
    neg_mass: np.ndarray,
    *,
    n_eff_neg: float | None = None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """A threshold-free measure and its influence function at a weighted score distribution.

    The distribution puts mass ``pos_mass[i]`` on (score ``scores[i]``, label 1) and
    ``neg_mass[i]`` on (``scores[i]``, label 0): the importance weights of labeled draws
    (``v·y``, ``v·(1 − y)``) or the pool under a belief (``p π``, ``p (1 − π)``).

    - ROC AUC ``= P(s > s') + ½ P(s = s')`` for a positive ``s`` and a negative ``s'``::

          ψ(x, 1) = (V₁₀(s) − AUC)/π₁,   ψ(x, 0) = (V₀₁(s) − AUC)/π₀

      with the placement values ``V₁₀(s) = P(s' < s | y' = 0) + ½ P(s' = s | y' = 0)`` and
      ``V₀₁(s) = P(s' > s | y' = 1) + ½ P(s' = s | y' = 1)`` (DeLong, DeLong & Clarke-Pearson
      (1988); Hanley & McNeil (1982)) and ``π₁ = P(y = 1)``.
    - Average precision ``AP = E[prec(s) | y = 1]``, ``prec(t) = P(y = 1 | s ≥ t)`` (scikit-learn's
      step-wise average precision)::

          ψ(x, y) = [y (prec(s) + c₁(s) − AP) − c₂(s)] / π₁,
          c₁(s) = E[y' 1(s' ≤ s)/D(s')],  c₂(s) = E[y' prec(s') 1(s' ≤ s)/D(s')],  D(t) = P(s ≥ t)

    - Recall at false-positive rate ``α`` (the ROC curve interpolated linearly at ``α``)::

          ψ(x, 1) = (a(s) − TPR)/π₁,   ψ(x, 0) = −ROC'(α) (a(s) − α)/π₀

      with ``a(s)`` the (randomized) indicator of scoring above the threshold and ``ROC'(α)`` the
      slope of the ROC curve, a secant over ``α(1 ± h)``, ``h = min(½, (n₀ α)^(-1/3))`` with
      ``n₀ = n_eff_neg`` (Hsieh & Turnbull (1996) give the same linearization).

    Returns
    -------
    value : float
    psi1, psi0 : ndarray (n,)
        ``ψ(x_i, 1)`` and ``ψ(x_i, 0)``: the influence of item ``i`` as a positive and as a
        negative. ``E[ψ] = 0`` under the distribution.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    s = np.asarray(scores, dtype=float)
    m1 = np.asarray(pos_mass, dtype=float)
    m0 = np.asarray(neg_mass, dtype=float)
    inv, g1, g0 = _group_masses(s, m1, m0)
    W1, W0 = float(g1.sum()), float(g0.sum())
    if not (W1 > 0 and W0 > 0):
        nan = np.full(s.size, np.nan)
        return np.nan, nan, nan.copy()
    if m.kind == "roc_auc":
        return _auc(inv, g1, g0, W1, W0)
    if m.kind == "average_precision":
        return _ap(inv, g1, g0, W1, W0)
    if n_eff_neg is None:
        n_eff_neg = W0**2 / float(m0 @ m0)
    return _recall_at_fpr(inv, g1, g0, W1, W0, float(m.fpr), float(n_eff_neg))


def weighted_roc_auc(y_true, y_score, sample_weight=None) -> float:
    """ROC AUC with weights as the ratio of weighted two-sample U-statistics, ``O(n log n)``.

    ``Σ_{i: y=1} Σ_{j: y=0} v_i v_j [1(s_i > s_j) + ½ 1(s_i = s_j)] / (Σ_{y=1} v · Σ_{y=0} v)``
    (Hanley & McNeil (1982)); equals :func:`sklearn.metrics.roc_auc_score` with
    ``sample_weight``.
    """
    y, s, v = _arrays(y_true, y_score, sample_weight)
    return influence("roc_auc", s, v * y, v * (1 - y))[0]


def weighted_average_precision(y_true, y_score, sample_weight=None) -> float:
    """Average precision with weights; equals :func:`sklearn.metrics.average_precision_score`
    with ``sample_weight``."""
    y, s, v = _arrays(y_true, y_score, sample_weight)
    return influence("average_precision", s, v * y, v * (1 - y))[0]


def _arrays(y_true, y_score, sample_weight):
    y = np.asarray(y_true).astype(float)
    s = np.asarray(y_score, dtype=float)
    v = np.ones_like(s) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    if not (y.shape == s.shape == v.shape) or y.ndim != 1:
        raise ValueError(
            f"y_true, y_score and sample_weight must be 1-d of one length, got {y.shape}, "
            f"{s.shape}, {v.shape}"
        )
    return y, s, v


# ------------------------------------------------------------------------------------------------
# estimates
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class RankEstimate(Estimate):
    """An :class:`~bayes_activeeval.Estimate` of a threshold-free measure.

    Its intervals default to the logit scale with a t quantile (``method="logit_t"``): AUC and average precision live
    in ``[0, 1]`` and good models sit near 1, where the Wald interval is symmetric about a skewed
    sampling distribution and crosses the bound. ``details["influence"]`` holds ``ψ̂`` of each draw
    (one column per model for a stack).
    """

    def confidence_interval(self, level: float = 0.95, method: str | None = None):
        """Two-sided interval.

        ``method="logit_t"`` (the default for a single measure): the Wald interval on the logit
        scale, ``expit(logit Ĝ ± t_{ν−1} SE/(Ĝ(1 − Ĝ)))``, with the Student-t quantile on the
        Satterthwaite effective degrees of freedom ``ν`` of the variance (:attr:`effective_df`).
        The logit keeps the interval inside ``[0, 1]`` and follows the skew of the sampling
        distribution near 1; the t quantile widens it when few draws (under heavy class skew: few
        positives) carry the variance. Other methods as :meth:`Estimate.confidence_interval`;
        ``"t"`` is the default for a difference of two models.
        """
        if method is None:
            method = "t" if self.bounds[0] < 0 else "logit_t"
        if method != "logit_t":
            return super().confidence_interval(level, method)
        level = check_level(level)
        G, se = self.values, self.stderrs
        crit = stats.t.ppf(0.5 + level / 2, df=np.maximum(self.effective_df - 1.0, 1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = special.logit(G)
            st = se / (G * (1 - G))
            low, high = special.expit(t - crit * st), special.expit(t + crit * st)
        inside = (G > 0) & (G < 1)
        tci = super().confidence_interval(level, "t")
        low = np.where(inside, low, np.atleast_1d(tci.low))
        high = np.where(inside, high, np.atleast_1d(tci.high))
        return self._pack(low, high)

    def to_frame(self, level: float = 0.95, method: str | None = None):
        ci = self.confidence_interval(level, method)
        frame = super().to_frame(level, "wald")
        frame["low"], frame["high"] = np.atleast_1d(ci.low), np.atleast_1d(ci.high)
        return frame


def model_scores(pool, model: str) -> np.ndarray:
    """The ranking score of a model: the pool's ``scores`` if given, else ``P(y = pos | x)``."""
    if pool.scores is not None:
        return np.asarray(pool.scores[model], dtype=float)
    view = pool.view(model)
    if view.prob is None:
        raise ValueError(
            "threshold-free measures rank items by score: give the pool scores= or probs="
        )
    return view.positive_prob()


def _measure_models(pool, measure: RankMeasure, model: str | None) -> tuple[str, ...]:
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


def _class_factor(y: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per-draw small-sample factor ``1/(1 − Σ_c v²/(Σ_c v)²)`` of the draw's class ``c``: the
    ``m/(m − 1)`` of DeLong's per-class variances on uniform weights, Kish's effective size
    otherwise. ``inf`` for a class with a single draw."""
    out = np.empty(v.size)
    for c in (0, 1):
        sel = y == c
        sv = v[sel].sum()
        share = float(v[sel] @ v[sel]) / sv**2 if sv > 0 else 1.0
        out[sel] = 1.0 / (1.0 - share) if share < 1.0 else np.inf
    return out


def rank_estimate_arrays(
    measure: RankMeasure | str,
    scores: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    *,
    variance_weights: np.ndarray | None = None,
    n_labels: int | None = None,
) -> RankEstimate:
    """The weighted estimate of a threshold-free measure from labeled draws, with its influence
    function variance.

    Parameters
    ----------
    measure : RankMeasure or str
    scores : ndarray (n,) or (n, k)
        Scores of the drawn items, one column per model the measure reads.
    y : ndarray (n,)
        Labels of the draws, 1 for the positive class and 0 otherwise.
    weights : ndarray (n,)
        Importance weights ``v = p/q``.
    variance_weights : ndarray (n,), optional
        Second factor of the variance weights, ``Cov = Σ f_i v_i v'_i ψ_i ψ_iᵀ / (Σ v)²`` (as
        :func:`~bayes_activeeval.weighted_estimate`; adaptive sampling passes its martingale or
        CLT weights). ``f_i`` is the class factor ``1/(1 − Σ_c v²/(Σ_c v)²)``, which makes the
        variance DeLong's exactly on uniform weights.

    Returns
    -------
    RankEstimate
    """
    m = rank_measure(measure)
    S = np.asarray(scores, dtype=float)
    if S.ndim == 1:
        S = S[:, None]
    y = np.asarray(y).astype(np.int8)
    v = np.asarray(weights, dtype=float)
    n, k = S.shape
    m1, m0 = v * y, v * (1 - y)
    vals, psis = [], []
    n_eff0 = float(m0.sum() ** 2 / (m0 @ m0)) if m0.any() else 0.0
    for j in range(k):
        val, p1, p0 = influence(m, S[:, j], m1, m0, n_eff_neg=n_eff0)
        vals.append(val)
        psis.append(np.where(y == 1, p1, p0))
    vals_a = np.array(vals)
    psi = np.stack(psis, axis=1) if n else np.zeros((0, k))
    if m.difference:
        vals_a = np.array([vals_a[0] - vals_a[1]])
        psi = psi[:, :1] - psi[:, 1:]
    n_out = vals_a.size
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
            nan, np.full((n_out, n_out), np.nan), nan, n, n_lab, m.outputs, m.name, m.bounds
        )
    vv = v * (v if variance_weights is None else np.asarray(variance_weights, dtype=float))
    vv = vv * _class_factor(y, v)
    with np.errstate(invalid="ignore"):
        cov = (psi * vv[:, None]).T @ psi / sv**2
    if not np.all(np.isfinite(cov)):
        cov = np.full((n_out, n_out), np.nan)
        df = None
    else:
        df = satterthwaite_df(vv, psi)
    return RankEstimate(
        vals_a,
        cov,
        vals_a.copy(),
        n,
        n_lab,
        m.outputs,
        m.name,
        m.bounds,
        details={"influence": psi},
        df=df,
    )


def rank_estimate(
    pool,
    measure: RankMeasure | str,
    draws: Draws,
    labels: Any,
    *,
    model: str | None = None,
    oracle: str = "deterministic",
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
        ``"roc_auc"``, ``"average_precision"``, ``"recall@fpr=0.01"``, or a bound
        :class:`RankMeasure`.
    draws : Draws
    labels : array-like (len(draws),) or mapping
        As in :func:`~bayes_activeeval.estimate`.
    model : str, optional
    oracle : {"deterministic", "stochastic"}

    Returns
    -------
    RankEstimate
        Intervals on the logit scale by default.

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
    if not isinstance(draws, Draws):
        raise TypeError(
            f"draws must be a Draws object (from Proposal.draw), got {type(draws).__name__}"
        )
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    models = _measure_models(pool, m, model)
    y = draw_labels(pool, draws.indices, labels, oracle=oracle) == pool.pos
    S = np.stack([model_scores(pool, mod)[draws.indices] for mod in models], axis=1)
    n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
    return rank_estimate_arrays(m, S, y, draws.weights, n_labels=n_labels)


# ------------------------------------------------------------------------------------------------
# proposals
# ------------------------------------------------------------------------------------------------
def expected_sq_influence(
    pool,
    measure: RankMeasure | str,
    probs: np.ndarray,
    *,
    model: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``u(x) = E_{y∼π} ‖ψ(x, y)‖²`` for every pool item, and the measure under the belief.

    ``ψ`` is the influence function (:func:`influence`) at the pool distribution under the belief
    ``π(y = 1 | x) = probs[x]``; for a difference ``ψ_a − ψ_b``, for a stack the squared norm of
    the vector (the trace criterion of the package's vector measures).
    """
    m = rank_measure(measure)
    models = _measure_models(pool, m, model)
    pi = np.asarray(probs, dtype=float)
    p = pool.p
    m1, m0 = p * pi, p * (1.0 - pi)
    n_eff0 = float(m0.sum() ** 2 / (m0 @ m0))
    vals, p1s, p0s = [], [], []
    for mod in models:
        val, p1, p0 = influence(m, model_scores(pool, mod), m1, m0, n_eff_neg=n_eff0)
        vals.append(val)
        p1s.append(p1)
        p0s.append(p0)
    if m.difference:
        p1s, p0s = [p1s[0] - p1s[1]], [p0s[0] - p0s[1]]
        vals = [vals[0] - vals[1]]
    u = np.zeros(pool.n_items)
    for p1, p0 in zip(p1s, p0s, strict=True):
        u += pi * p1 * p1 + (1.0 - pi) * p0 * p0
    return u, np.array(vals)


def positive_probs(pool, belief: Any, models: tuple[str, ...], floor: float) -> np.ndarray:
    """``π(y = pos | x)`` from a belief (default: the models' own probabilities, their equal mixture
    for several models, Sawade (2012), Eq. 5.11), floored at ``floor`` on both classes."""
    b = as_belief(pool, belief, models)
    if not isinstance(b, CategoricalBelief):
        raise TypeError("threshold-free measures need a categorical belief")
    pi = b.probs[:, pool.pos]
    if floor > 0:
        pi = np.clip(pi, floor, 1.0 - floor)
    return pi


def proposal_from_u(
    pool, u: np.ndarray, *, costs: Any = None, mix: float = DEFAULT_MIX
) -> np.ndarray:
    """``q ∝ p c^(-1/2) sqrt(u)`` mixed with ``p`` (Sawade (2012), Thm. 4.1/4.2; the package's
    defensive mixture ``(1 − δ) q + δ p``)."""
    p = pool.p
    s = np.sqrt(np.maximum(u, 0.0)) * p
    c = _costs(pool, costs)
    if c is not None:
        s /= np.sqrt(c)
    if not np.isfinite(s.sum()) or s.sum() <= 0:
        s = p.copy()
    return _mix(s, p, mix)


def rank_proposal(
    pool,
    measure: RankMeasure | str,
    *,
    model: str | None = None,
    belief: Any = None,
    costs: Any = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    mix: float = DEFAULT_MIX,
) -> Proposal:
    """The variance-optimal proposal for a threshold-free measure.

    ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(E_{y∼π} ψ(x, y)²)``: Sawade (2012), Thm. 4.1 and 4.2 and
    Marchant & Rubinstein (2021), Prop. 1 with the influence function ``ψ`` (:func:`influence`)
    as the linearization of the measure. ``ψ`` is computed on the whole pool under the belief by
    one sort, so the proposal costs ``O(n log n)``. For ROC AUC an item's weight grows with how
    surprising its label would be: a likely positive scored low, a likely negative scored high,
    and — because ``ψ(x, 1)`` carries ``1/π₁`` — every plausible positive under heavy skew.

    For a measure bound to two models with ``difference=True`` (``RankMeasure.bind``), this is the
    power-optimal proposal for the paired comparison, ``E_π (ψ_a − ψ_b)²`` (Sawade (2012),
    Thm. 5.1), with the belief the models' equal mixture by default (Eq. 5.11).

    Parameters
    ----------
    pool : Pool
    measure : str or RankMeasure
    model : str, optional
    belief : Belief or array-like, optional
        ``π(y|x)``; default the model's probabilities.
    costs : None, bool or array-like
        Label costs (default the pool's).
    belief_floor : float
        Floor on both class probabilities of the belief.
    mix : float
        Defensive mixture weight ``δ``.

    Returns
    -------
    Proposal
        ``kind="optimal"``; ``info`` holds ``u``, ``value`` (the measure under the belief), ``mix``.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    models = _measure_models(pool, m, model)
    floor = check_fraction(belief_floor, "belief_floor")
    mix = check_fraction(mix, "mix", allow_one=True)
    pi = positive_probs(pool, belief, models, floor)
    u, value = expected_sq_influence(pool, m, pi, model=model)
    if not np.all(np.isfinite(value)):
        raise ValueError(
            f"measure {m.name!r} is undefined under the belief (no positive or no negative mass)"
        )
    q = proposal_from_u(pool, u, costs=costs, mix=mix)
    info = {"u": u, "value": value, "mix": mix, "belief_floor": floor, "measure": m.name}
    return Proposal(q, pool.p, "optimal", info)


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
) -> RankEstimate:
    """The measure for several models on one sample, with the joint covariance of the estimates
    (the k × k matrix of DeLong et al. (1988) on uniform weights)."""
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    return rank_estimate(pool, m.bind(models), draws, labels, oracle=oracle)


def compare_rank(
    pool,
    measure: RankMeasure | str,
    draws: Draws,
    labels: Any,
    models: Any = None,
    *,
    alternative: str = "two-sided",
    oracle: str = "deterministic",
):
    """Paired test of ``H0: T_a = T_b`` for two models' AUCs (or APs) on one shared sample.

    The two estimates are correlated U-statistics of the same draws (DeLong, DeLong &
    Clarke-Pearson (1988)); the difference has the influence function ``ψ_a − ψ_b`` and the
    variance ``Σ f_i v_i² (ψ_a,i − ψ_b,i)² / (Σ v)²`` — DeLong's paired variance on uniform
    weights — and the Wald statistic ``Δ̂/SE`` (Sawade (2012), Eq. 3.23-3.24). Draw the sample from
    ``rank_proposal(pool, RankMeasure(...).bind((a, b), difference=True))`` for the power-optimal
    design (Sawade (2012), Thm. 5.1).

    Returns
    -------
    ComparisonResult
    """
    from .comparison import ComparisonResult, _check_alternative, _models_arg, _wald_pvalue, _z

    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    if m.models is not None:
        raise ValueError(f"measure {m.name!r} is already bound to models {m.models}")
    alternative = _check_alternative(alternative)
    models = _models_arg(pool, models, 2, two=True)
    if len(models) != 2:
        raise ValueError(f"compare needs exactly two models, got {list(models)}")
    est = stacked_estimate(pool, m, draws, labels, models, oracle=oracle)
    G, C = est.values, est.cov
    diff = float(G[0] - G[1])
    se = float(np.sqrt(max(C[0, 0] + C[1, 1] - 2 * C[0, 1], 0.0)))
    z = _z(diff, se)
    a, b = models
    return ComparisonResult(
        statistic=z,
        pvalue=_wald_pvalue(z, alternative),
        estimate=diff,
        stderr=se,
        alternative=alternative,
        models=(a, b),
        estimates={a: float(G[0]), b: float(G[1])},
        stderrs={a: float(est.stderrs[0]), b: float(est.stderrs[1])},
        n_draws=est.n_draws,
        n_labels=est.n_labels,
        measure=m.base_name,
        greater_is_better=True,
    )


def comparison_rank_proposal(
    pool,
    measure: RankMeasure | str,
    models: Any = None,
    **kwargs: Any,
) -> Proposal:
    """The power-optimal proposal for comparing two models' threshold-free measures,
    ``q ∝ p c^(-1/2) sqrt(E_π (ψ_a − ψ_b)²)`` (Sawade (2012), Thm. 5.1 with the influence
    function); for ``k > 2`` models the equal mixture of the pairwise proposals (as
    :func:`~bayes_activeeval.comparison_proposal` does). Keyword arguments as
    :func:`rank_proposal`."""
    from .comparison import _models_arg

    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    models = _models_arg(pool, models, 2)
    pairs = [(a, b) for i, a in enumerate(models) for b in models[i + 1 :]]
    if len(pairs) == 1:
        return rank_proposal(pool, m.bind(pairs[0], difference=True), **kwargs)
    q = np.zeros(pool.n_items)
    for pair in pairs:
        q += rank_proposal(pool, m.bind(pair, difference=True), **kwargs).q
    return Proposal(q / len(pairs), pool.p, "optimal", {"models": models, "measure": m.name})
