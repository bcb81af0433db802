"""Threshold-free measures and their kernels: scores and class masses -> the measure and the
influence function of every item, in ``O(n log n)``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import (
    check_binary_labels,
    check_finite,
    check_fraction,
    check_model_names,
    check_weights,
)

__all__ = [
    "KINDS",
    "RankMeasure",
    "influence",
    "rank_measure",
    "tie_groups",
    "values_from_positives",
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
#: ``recall@fpr=α`` and its spellings; read before ``-`` becomes ``_`` (``1e-05``)
_RECALL_AT = re.compile(r"^(?:recall|tpr)(?:@|[_-]at[_-])fpr[=_-]?([0-9.e+-]+)$")


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
        # repr: the shortest text that reads back as the same float (``:g`` kept 6 digits)
        return self.kind if self.kind != "recall_at_fpr" else f"recall@fpr={float(self.fpr)!r}"

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

    # -- what the package's workflows read from any measure ---------------------------------
    components = ("positive",)
    dim = 1

    def resolve(self, n_classes: int) -> RankMeasure:
        """Itself (the measure has no per-class components)."""
        return self

    def loss(self, y: np.ndarray, view: Any) -> np.ndarray:
        """What a labeled draw contributes before the ranking is known: ``1(y = pos)``, shape
        ``(n, 1)``. Workflows that store per-draw losses (the adaptive loop) store this; the
        estimate itself needs the scores of all draws (:func:`influence`)."""
        first = next(iter(view.values())) if isinstance(view, dict) else view
        return (np.asarray(y) == first.pos).astype(float)[:, None]

    def combine(self, per_model: list) -> list:
        """Per-model parts (arrays, or tuples of arrays) -> one per output: unchanged for a
        stack, ``[a − b]`` (elementwise for tuples) for a difference ``T_a − T_b``."""
        if not self.difference:
            return list(per_model)
        a, b = per_model
        if isinstance(a, tuple):
            return [tuple(x - y for x, y in zip(a, b, strict=True))]
        return [a - b]

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
    ``"recall@fpr=0.01"`` (or a :class:`RankMeasure` itself); ``None`` for any other measure.

    Parameters
    ----------
    measure : str, RankMeasure or any
        A name, case-insensitive: ``"roc_auc"`` (or ``"auc"``, ``"auroc"``,
        ``"roc_auc_score"``), ``"average_precision"`` (or ``"ap"``, ``"pr_auc"``,
        ``"average_precision_score"``), with ``-`` read as ``_`` in these; ``"recall@fpr=α"``
        (or ``"tpr@fpr=α"``, ``"recall_at_fpr_α"``, ``"recall-at-fpr-α"``, with ``α`` any
        float literal such as ``1e-05``); a :class:`RankMeasure` is returned as it is,
        anything else gives ``None``.

    Returns
    -------
    RankMeasure or None
        A new, unbound measure for a name; the given :class:`RankMeasure` itself (bound or
        not); ``None`` otherwise.
    """
    if isinstance(measure, RankMeasure):
        return measure
    if not isinstance(measure, str):
        return None
    key = measure.strip().lower()
    m = _RECALL_AT.match(key)
    if m:
        try:
            fpr = float(m.group(1))
        except ValueError:
            raise ValueError(f"cannot read the false-positive rate in {measure!r}") from None
        return RankMeasure("recall_at_fpr", fpr)
    return RankMeasure(_ALIASES[key]) if (key := key.replace("-", "_")) in _ALIASES else None


# ------------------------------------------------------------------------------------------------
# kernels: scores and class masses -> value and the influence function of every item
# ------------------------------------------------------------------------------------------------
def tie_groups(s: np.ndarray) -> tuple[np.ndarray, int]:
    """Tie groups of scores: the group index of every item among the distinct scores in ascending
    order, and their number ``K`` (``O(n log n)``, one stable sort).

    Parameters
    ----------
    s : ndarray (n,)

    Returns
    -------
    inv : ndarray of int (n,)
        Item ``i`` has the ``inv[i]``-th smallest distinct score.
    K : int
    """
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
    inv, G = tie_groups(s)
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
    # positive and total mass scoring >= this score, summed from the top: ``W − cumsum + g``
    # cancels catastrophically when the weights span more than ~1e6 (a light positive
    # under a heavy negative lost 4e-5 of AP against scikit-learn)
    tp = np.cumsum(g1[::-1])[::-1]
    pp = np.cumsum((g1 + g0)[::-1])[::-1]
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
    # the (randomized) threshold: groups above it count 1, the group it cuts counts λ. ROC point
    # k is group G-k; k is the first point with fpr > α. Where α lands exactly on a step that a
    # vertical segment (positives only) follows, np.interp reads the top of that segment, and so
    # must the threshold (side="left" took its bottom: the influence then had mean −0.75, not 0,
    # on a 14-draw sample); off such a step both sides give the same threshold
    k = int(np.clip(np.searchsorted(fpr, alpha, side="right"), 1, G))
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

    Parameters
    ----------
    measure : RankMeasure or str
        ``"roc_auc"``, ``"average_precision"``, ``"recall@fpr=α"`` (:func:`rank_measure`); a
        bound measure is evaluated as its base measure on these scores.
    scores : array-like (n,)
        Score of each item (higher = ranked as more likely positive).
    pos_mass, neg_mass : array-like (n,)
        Non-negative mass of each item as a positive and as a negative.
    n_eff_neg : float, optional
        Effective number of negatives ``n₀`` in the recall-at-FPR slope window (default: the Kish
        size ``(Σ neg_mass)² / Σ neg_mass²``); not used by the other measures.

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


def _recall_values(alpha: float, g1: np.ndarray, g0: np.ndarray) -> np.ndarray:
    """Recall at false-positive rate ``alpha`` for rows of dense tie-group masses (ascending
    scores), as :func:`_recall_at_fpr` computes it for one."""
    W1, W0 = g1.sum(axis=1), g0.sum(axis=1)
    W1s, W0s = np.where(W1 > 0, W1, 1.0), np.where(W0 > 0, W0, 1.0)
    return np.array(
        [
            _tpr_at(*_roc_points(a, b, w1, w0), alpha)
            for a, b, w1, w0 in zip(g1, g0, W1s, W0s, strict=True)
        ]
    )


def values_from_positives(
    measure: RankMeasure | str,
    draw: np.ndarray,
    group: np.ndarray,
    mass: np.ndarray,
    n_draws: int,
    group_mass: np.ndarray,
) -> np.ndarray:
    """The measure on one pool under many label configurations, given only their positives.

    Configuration ``t`` has positive mass ``mass[i]`` in tie group ``group[i]`` for every ``i``
    with ``draw[i] == t`` (the same item may appear in many configurations); every other unit of
    the pool's mass ``group_mass[k]`` (tie groups of the scores, ascending) is negative. For ROC
    AUC and average precision the cost is ``O(P log P)`` in the number of listed positives, not in
    the pool's size: with ``B(k)`` the pool's mass in groups below ``k``, ``A(k)`` its mass in
    groups ``≥ k`` and ``b_t(k)``, ``m_t(k)`` the configuration's positive mass below and in group
    ``k``,

    - ROC AUC ``= Σ_k m_t(k) [B(k) − b_t(k) + ½ (mass(k) − m_t(k))] / (W₁ W₀)`` (Hanley &
      McNeil (1982), ties ½);
    - average precision ``= Σ_k m_t(k) (W₁ − b_t(k)) / A(k) / W₁`` (scikit-learn's step-wise form).

    Recall at a false-positive rate is evaluated on the dense group masses in blocks of
    configurations. Equal to :func:`influence`'s value on each configuration (tested); ``nan``
    where a configuration has no positive mass or a negative mass below ``1e-12`` of the pool's.

    Parameters
    ----------
    measure : RankMeasure or str
    draw, group : ndarray of int (P,)
        Configuration and tie group of each listed positive.
    mass : ndarray (P,)
        Its mass (the pool's ``p`` of the item).
    n_draws : int
        Number of configurations ``T``.
    group_mass : ndarray (K,)
        The pool's total mass per tie group.

    Returns
    -------
    ndarray (T,)
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    tot = np.asarray(group_mass, dtype=float)
    K, T = tot.size, int(n_draws)
    draw = np.asarray(draw, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    keys, inv = np.unique(draw * K + group, return_inverse=True)
    mk = np.bincount(inv, np.asarray(mass, dtype=float), keys.size)
    tk, gk = keys // K, keys % K  # sorted by configuration, then by group
    W1 = np.bincount(tk, mk, T)
    W0 = tot.sum() - W1
    ok = (W1 > 0) & (W0 > 1e-12 * tot.sum())
    if m.kind == "recall_at_fpr":
        out = np.full(T, np.nan)
        block = max(1, (1 << 22) // max(K, 1))
        for t0 in range(0, T, block):
            t1 = min(t0 + block, T)
            sel = slice(*np.searchsorted(tk, [t0, t1]))  # tk is sorted
            g1 = np.bincount((tk[sel] - t0) * K + gk[sel], mk[sel], (t1 - t0) * K)
            g1 = g1.reshape(t1 - t0, K)
            out[t0:t1] = _recall_values(float(m.fpr), g1, tot[None, :] - g1)
        return np.where(ok, out, np.nan)
    cs = np.cumsum(mk)
    first = np.searchsorted(tk, tk, side="left")
    below = cs - (cs[first] - mk[first]) - mk  # the configuration's positive mass below
    W1s, W0s = np.where(ok, W1, 1.0), np.where(ok, W0, 1.0)
    if m.kind == "roc_auc":
        B = np.cumsum(tot) - tot
        num = mk * (B[gk] - below + 0.5 * (tot[gk] - mk))
        val = np.bincount(tk, num, T) / (W1s * W0s)
    else:
        A = np.cumsum(tot[::-1])[::-1][gk]  # the pool's mass at or above the group
        prec = np.divide(W1[tk] - below, A, out=np.zeros_like(A), where=A > 0)  # as the kernel
        val = np.bincount(tk, mk * prec, T) / W1s
    return np.where(ok, val, np.nan)


def weighted_roc_auc(y_true, y_score, sample_weight=None) -> float:
    """ROC AUC with weights as the ratio of weighted two-sample U-statistics, ``O(n log n)``.

    ``Σ_{i: y=1} Σ_{j: y=0} v_i v_j [1(s_i > s_j) + ½ 1(s_i = s_j)] / (Σ_{y=1} v · Σ_{y=0} v)``
    (Hanley & McNeil (1982)); equals :func:`sklearn.metrics.roc_auc_score` with
    ``sample_weight``.

    Parameters
    ----------
    y_true : array-like (n,)
        Labels: 1 for positive, 0 for negative.
    y_score : array-like (n,)
        Scores (higher = more likely positive).
    sample_weight : array-like (n,), optional
        Non-negative weights ``v`` (default: all 1).

    Returns
    -------
    float
        The weighted ROC AUC; ``nan`` when either class has no weight.

    Raises
    ------
    ValueError
        For labels other than 0/1, non-finite scores, negative or non-finite weights, or arrays
        of different lengths (the message names the argument, the first bad index and value).
    """
    y, s, v = _arrays(y_true, y_score, sample_weight)
    return influence("roc_auc", s, v * y, v * (1 - y))[0]


def weighted_average_precision(y_true, y_score, sample_weight=None) -> float:
    """Average precision with weights; equals :func:`sklearn.metrics.average_precision_score`
    with ``sample_weight``.

    Parameters
    ----------
    y_true : array-like (n,)
        Labels: 1 for positive, 0 for negative.
    y_score : array-like (n,)
        Scores (higher = more likely positive).
    sample_weight : array-like (n,), optional
        Non-negative weights (default: all 1).

    Returns
    -------
    float
        The weighted average precision; ``nan`` when either class has no weight.

    Raises
    ------
    ValueError
        As :func:`weighted_roc_auc`.
    """
    y, s, v = _arrays(y_true, y_score, sample_weight)
    return influence("average_precision", s, v * y, v * (1 - y))[0]


def _arrays(y_true, y_score, sample_weight):
    """Labels (0/1), finite scores and finite non-negative weights of one length."""
    y = check_binary_labels(y_true)
    s = np.asarray(y_score, dtype=float)
    if s.shape != y.shape:
        raise ValueError(
            f"y_true and y_score must be 1-d of one length, got {y.shape} and {s.shape}"
        )
    check_finite(s, "y_score")
    v = np.ones_like(s) if sample_weight is None else check_weights(sample_weight, n=s.size)
    return y, s, v
