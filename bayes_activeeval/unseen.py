"""Errors no label has seen: how many could hide among the unlabeled items, and what they would do.

An estimate from labeled draws says nothing about an error it had no chance to see. Take the pool
``A`` being evaluated and a pool ``B_k`` equal to it except that ``k`` of the items no one has
labeled are errors (a label other than the model's prediction), placed at random among the
unlabeled items of one predicted class. A run that labeled none of the ``k`` saw the same labels
on ``B_k`` as on ``A``, so it reports the same estimate and interval. With ``U`` unlabeled and
``L`` labeled items among the ``N = U + L`` of that predicted class, the chance that a placement at
random among all ``N`` items put none of the ``k`` errors where a label fell is the hypergeometric

    H(k) = C(U, k) / C(N, k)        (= P(no error among the L labeled items)),

which falls with ``k``. The **largest number of hidden errors the labels cannot rule out** at
level ``1 − α`` is the largest ``k`` with ``H(k) > α``: for a labeled fraction ``f = L/N`` it is
about ``ln(1/α)/f``, the rule of three of Hanley & Lippman-Hand (1983) in counts. An interval that
covers ``B_k`` at level ``1 − α`` must reach the measure's value on ``B_k`` for every smaller
``k``, whatever it does on ``A``.

:func:`unseen_errors` reports that count per predicted class and the measure's value with those
errors added to the estimate (``R̂ + k p̄ Δℓ``, ``p̄`` the mean ``p`` of the class's unlabeled
items and ``Δℓ`` the change of the loss vector when one of them becomes an error): a sensitivity
statement beside the confidence interval, which is conditional on what the sample has seen
(``docs/design.md``, "F1 intervals and the matches no draw has found"). It applies to measures of
the confusion matrix (accuracy, error rate, precision, recall, F-scores, balanced accuracy, MCC),
whose loss depends on an item only through its label and prediction, on a binary pool in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from ._validation import check_count, check_items, check_level, show

__all__ = ["UnseenErrors", "UnseenRegion", "applies_to", "max_hidden", "unseen_errors"]


def max_hidden(n_items: int, n_labeled: int, level: float = 0.95) -> int:
    """The largest number of errors placed at random among ``n_items`` items that ``n_labeled``
    labels would all miss with probability above ``1 − level``.

    ``max{k : C(U, k)/C(N, k) > 1 − level}`` with ``U = n_items − n_labeled`` unlabeled items
    (``U`` when nothing is labeled): the hypergeometric probability that none of ``k`` errors is
    among the labeled items (the rule of three in counts, ``≈ ln(1/α)/f`` for a labeled fraction
    ``f``; Hanley & Lippman-Hand (1983)).

    Parameters
    ----------
    n_items : int
        ``N``, the items of the region (labeled or not), ``>= 0``.
    n_labeled : int
        ``L``, the labeled items among them, ``0 <= L <= N``.
    level : float
        In ``(0, 1)``; default 0.95.

    Returns
    -------
    int
        Between 0 and ``N − L``.

    Examples
    --------
    >>> from bayes_activeeval.unseen import max_hidden
    >>> max_hidden(100_000, 1_000)      # 1 % labeled: about ln(20)/0.01 = 300
    297
    """
    n = check_count(n_items, "n_items", minimum=0)
    lab = check_count(n_labeled, "n_labeled", minimum=0)
    if lab > n:
        raise ValueError(f"n_labeled must be at most n_items ({n}), got {lab}")
    alpha = 1.0 - check_level(level)
    u = n - lab
    if lab == 0 or u == 0:
        return u

    def log_h(k: int) -> float:  # log C(U, k)/C(N, k)
        return float(
            special.gammaln(u + 1)
            - special.gammaln(u - k + 1)
            - special.gammaln(n + 1)
            + special.gammaln(n - k + 1)
        )

    # log_h(0) = 0 > target; find the last k above it. H(k) equal to α in exact arithmetic (a
    # tie, e.g. N = 20, L = 1, level 0.9 at k = 18) is not above it: the margin absorbs gammaln's
    # rounding, ~1e-13 here, and moves no other k (|log H(k) − log α| >= 1e-9 otherwise).
    lo, hi, target = 0, u, np.log(alpha) + 1e-10
    if log_h(hi) > target:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if log_h(mid) > target:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class UnseenRegion:
    """The unlabeled items of one predicted class and the errors they could hide.

    Parameters
    ----------
    predicted : object
        The predicted class (as in ``pool.classes``).
    actual : object
        The other class: what a hidden error's label is.
    kind : str
        ``"false negatives"`` or ``"false positives"``: what the hidden errors are.
    n_items, n_labeled : int
        Items with ``p > 0`` predicted ``predicted``, and how many of them are labeled.
    max_hidden : int
        The largest number of errors among the unlabeled ones that the labels cannot rule out at
        the level (:func:`max_hidden`).
    values : ndarray (m,)
        The measure with that many errors added to the estimate; NaN where the estimate leaves
        no room for them (a value outside the measure's range) or is itself undefined.
    joint_hidden : int
        This class's share of the errors of :attr:`UnseenErrors.values`: the largest number the
        labels miss with probability above ``(1 − level)^(1/c)`` for ``c`` predicted classes, so
        that missing every class's at once stays above ``1 − level``.
    """

    predicted: Any
    actual: Any
    kind: str
    n_items: int
    n_labeled: int
    max_hidden: int
    values: np.ndarray
    joint_hidden: int

    @property
    def labeled_fraction(self) -> float:
        """``n_labeled / n_items`` (NaN for an empty region)."""
        return self.n_labeled / self.n_items if self.n_items else float("nan")


@dataclass(frozen=True)
class UnseenErrors:
    """What errors no label has seen could do to an estimate (:func:`unseen_errors`).

    Parameters
    ----------
    measure : str
    outputs : tuple of str
    level : float
    estimate : ndarray (m,)
        The estimate's values.
    regions : tuple of UnseenRegion
        One per predicted class.
    values : ndarray (m,)
        The measure with every class's :attr:`UnseenRegion.joint_hidden` errors at once (the
        labels miss all of them with probability above ``1 − level``); NaN as in
        :attr:`UnseenRegion.values`.
    """

    measure: str
    outputs: tuple[str, ...]
    level: float
    estimate: np.ndarray
    regions: tuple[UnseenRegion, ...]
    values: np.ndarray

    def to_frame(self):
        """One row per predicted class: ``predicted``, ``actual``, ``items``, ``labeled``,
        ``labeled_fraction``, ``max_hidden`` and the measure's value(s) with them."""
        import pandas as pd

        rows = []
        for r in self.regions:
            row = {
                "predicted": r.predicted,
                "actual": r.actual,
                "items": r.n_items,
                "labeled": r.n_labeled,
                "labeled_fraction": r.labeled_fraction,
                "kind": r.kind,
                "max_hidden": r.max_hidden,
                "joint_hidden": r.joint_hidden,
            }
            for name, v in zip(self.outputs, r.values, strict=True):
                row[name if len(self.outputs) > 1 else self.measure] = float(v)
            rows.append(row)
        return pd.DataFrame(rows)

    def lines(self) -> list[str]:
        """The statement in words, one line per predicted class and one for all at once."""
        pct = f"{self.level:.0%}"
        out = []
        for r in self.regions:
            unl = r.n_items - r.n_labeled
            out.append(
                f"up to {r.max_hidden:,} {r.kind} (items of class {show(r.actual)}) could hide "
                f"among the {unl:,} unlabeled items predicted {show(r.predicted)} "
                f"({r.n_labeled:,} of {r.n_items:,} labeled; {pct}): {self.measure} would be "
                f"{_fmt(r.values)} (estimate {_fmt(self.estimate)})"
            )
        both = " and ".join(f"{r.joint_hidden:,} {r.kind}" for r in self.regions)
        out.append(f"all at once ({both}; {pct}): {self.measure} would be {_fmt(self.values)}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _fmt(v: np.ndarray) -> str:
    v = np.asarray(v, dtype=float)
    return f"{v[0]:.4g}" if v.size == 1 else "[" + ", ".join(f"{x:.4g}" for x in v) + "]"


def _labeled_items(labeled: Any, n: int) -> np.ndarray:
    from .proposals import Draws

    idx = labeled.indices if isinstance(labeled, Draws) else labeled
    arr = np.asarray(idx)
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(
                f"labeled as a mask must have one entry per pool item ({n}), got shape {arr.shape}"
            )
        return np.flatnonzero(arr)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError("labeled must be item indices (1-d integers), a bool mask or Draws")
    return np.unique(check_items(arr, n, "labeled"))


def applies_to(pool, measure: Any, model: str | None = None) -> bool:
    """Whether :func:`unseen_errors` applies: a binary pool in memory and a measure of the
    confusion matrix of one model (its loss depends on an item only through its label and the
    model's prediction).

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        A measure the pool resolves (``Pool.resolve`` raises for one it does not).
    model : str, optional
        Which model, for a pool with several.

    Returns
    -------
    bool
    """
    return _not_applicable(pool, measure, model) is None


def _not_applicable(pool, measure: Any, model: str | None):
    """Why :func:`unseen_errors` does not apply (``None`` where it does), and the resolved
    measure with its views and model names."""
    if getattr(pool, "is_lazy", False):
        return "unseen_errors needs a pool in memory, not one on dask"
    if pool.task != "binary":
        return (
            f"unseen_errors needs a binary pool; this one is {pool.task} ({pool.n_classes} classes)"
        )
    m, _ = pool.resolve(measure, model)
    names = pool.models_of(m, model)
    if len(names) != 1:
        return (
            f"measure {m.name!r} reads {len(names)} models; unseen_errors takes a measure of one "
            "model"
        )
    if not m.tabular:
        return (
            f"measure {m.name!r}: its loss depends on more than an item's label and prediction; "
            "unseen_errors takes a measure of the confusion matrix"
        )
    return None


def unseen_errors(
    pool,
    measure: Any,
    labeled: Any,
    estimate: Any,
    *,
    level: float = 0.95,
    model: str | None = None,
) -> UnseenErrors:
    """How many errors could hide among the unlabeled items, and the measure if they did.

    For each predicted class ``c`` (of items with ``p > 0``), :func:`max_hidden` gives the
    largest number ``k_c`` of errors (items labeled the other class) placed at random among its
    unlabeled items that the labels so far would all have missed with probability above
    ``1 − level``; the measure is then ``g(R̂ + k_c p̄_c Δℓ_c)``, with ``R̂`` the estimate's mean
    loss vector, ``p̄_c`` the mean ``p`` of the class's unlabeled items and ``Δℓ_c`` the change of
    an item's loss vector when its label becomes the other class (the same for every item of
    ``c`` for a measure of the confusion matrix). ``values`` adds every class's errors at once.
    A run that has labeled none of them cannot tell the pool from one that holds them (see the
    module docstring), so an interval honest on such pools reaches these values; the estimate's
    confidence interval is conditional on what the sample has seen and does not.

    Parameters
    ----------
    pool : Pool
        A binary pool in memory.
    measure : str or Measure
        A measure of the confusion matrix of one model (accuracy, error rate, precision, recall,
        F-scores, balanced accuracy, MCC).
    labeled : array-like of int, bool mask or Draws
        The labeled items (repeats are counted once).
    estimate : Estimate
        The estimate of ``measure`` from those labels (its ``risk`` is ``R̂``).
    level : float
        In ``(0, 1)``; default 0.95.
    model : str, optional
        Which model, for a pool with several.

    Returns
    -------
    UnseenErrors

    Raises
    ------
    ValueError
        A pool on dask or not binary, a measure that reads several models or whose loss depends
        on more than the label and the prediction (not of the confusion matrix), an estimate of
        another measure, labeled items outside the pool, ``level`` outside ``(0, 1)``.

    Notes
    -----
    The count is the rule of three (Hanley & Lippman-Hand (1983), "If nothing goes wrong, is
    everything all right?", JAMA 249) in its exact hypergeometric form for a finite pool; the
    argument that an interval honest on every such pool must reach these values is in
    ``docs/design.md`` ("What such an allowance costs"). The errors are placed at random among
    the class's unlabeled items, so the statement says nothing about errors hidden where the
    design looked least, and it is not a probability that they are there.

    Examples
    --------
    >>> import numpy as np, bayes_activeeval as bae
    >>> from bayes_activeeval.datasets import make_classification_pool
    >>> data = make_classification_pool(50_000, 0.01, rng=0)
    >>> draws = bae.optimal_proposal(data.pool, "f1").draw(1000, rng=1)
    >>> est = bae.estimate(data.pool, "f1", draws, data.labeler(draws.indices))
    >>> seen = bae.unseen_errors(data.pool, "f1", draws, est)
    >>> seen.regions[0].max_hidden > 0
    True
    """
    reason = _not_applicable(pool, measure, model)
    if reason is not None:
        raise ValueError(reason)
    lv = check_level(level)
    m, views = pool.resolve(measure, model)
    names = pool.models_of(m, model)
    R = np.asarray(getattr(estimate, "risk", None), dtype=float)
    if R.ndim != 1 or R.size != m.dim or getattr(estimate, "measure", m.name) != m.name:
        raise ValueError(
            f"estimate must be an Estimate of {m.name!r} (a mean loss vector of length {m.dim})"
        )
    n = pool.n_items
    known = np.zeros(n, dtype=bool)
    known[_labeled_items(labeled, n)] = True
    p = np.asarray(pool.p, dtype=float)
    pred = np.asarray(pool.view(names[0]).pred)
    classes = pool.classes
    pos = pool.pos
    by_class = {c: np.flatnonzero((pred == c) & (p > 0)) for c in (0, 1)}
    by_class = {c: items for c, items in by_class.items() if items.size}
    # the loss of one item per (prediction, label): a tabular loss is the same for every item of
    # a predicted class. With every component >= 0, a shifted mean below 0 is a pool that cannot
    # exist (more errors than the estimate counts correct items)
    table = {
        c: [m.loss(np.array([y]), views(items[:1])) for y in (0, 1)]
        for c, items in by_class.items()
    }
    nonneg = bool(np.all(np.asarray(list(table.values()), dtype=float) >= 0))
    defined = bool(np.all(np.isfinite(np.asarray(estimate.values, dtype=float))))
    alpha_joint = (1.0 - lv) ** (1.0 / max(len(by_class), 1))
    regions: list[UnseenRegion] = []
    shift_all = np.zeros_like(R)
    for c, items in by_class.items():
        delta = np.asarray(table[c][1 - c] - table[c][c], dtype=float).reshape(-1)
        open_ = items[~known[items]]
        n_lab = int(items.size - open_.size)
        pbar = float(p[open_].mean()) if open_.size else 0.0
        k = max_hidden(int(items.size), n_lab, lv)
        kj = max_hidden(int(items.size), n_lab, 1.0 - alpha_joint)
        shift_all = shift_all + kj * pbar * delta
        regions.append(
            UnseenRegion(
                predicted=classes[c],
                actual=classes[1 - c],
                kind="false positives" if c == pos else "false negatives",
                n_items=int(items.size),
                n_labeled=n_lab,
                max_hidden=int(k),
                values=_value(m, R + k * pbar * delta, nonneg, defined),
                joint_hidden=int(kj),
            )
        )
    return UnseenErrors(
        measure=m.name,
        outputs=tuple(m.outputs),
        level=lv,
        estimate=np.asarray(estimate.values, dtype=float).reshape(-1),
        regions=tuple(regions),
        values=_value(m, R + shift_all, nonneg, defined),
    )


def _value(m, R: np.ndarray, nonneg: bool, defined: bool) -> np.ndarray:
    """``g(R)``, NaN where the estimate is undefined or ``R`` describes no pool: the errors are
    added to what the estimate counts, so an estimate that counts fewer correct unlabeled items
    than that leaves no room for them (a mean loss below 0, or ``g`` outside the range)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.asarray(m.g(R), dtype=float).reshape(-1)
    if not defined or (nonneg and np.any(R < -1e-12)):
        return np.full(g.shape, np.nan)
    lo, hi = m.bounds
    tol = 1e-12 * max(1.0, float(np.nanmax(np.abs(g)))) if np.any(np.isfinite(g)) else 0.0
    bad = ~np.isfinite(g) | (g < lo - tol) | (g > hi + tol)
    return np.where(bad, np.nan, np.clip(g, lo, hi))
