"""Whole ROC and precision-recall curves from importance-weighted draws, with simultaneous bands.

The curves are those of the weighted empirical score distributions of each class (the draws'
importance weights ``v = p/q`` as sample weights: the same arrays as scikit-learn's
``roc_curve`` / ``precision_recall_curve`` with ``sample_weight``).

**Band method: bootstrap of the draws, sup-t band with an Agresti-Coull floor.** The draws are
i.i.d. from ``q``, so resampling them (with their weights) reproduces the sampling distribution
of any smooth functional of the weighted empirical distribution. ``B`` multinomial resamples give
curves ``C*_b(x)`` on a grid with pointwise standard deviation ``σ̂(x)``. Each point is
studentized by ``σ̃(x) = max(σ̂(x), σ_AC(x))``, with ``σ_AC`` the Agresti-Coull standard
deviation (Agresti & Coull (1998), at ``z = z_{(1+level)/2}``) of a proportion ``Ĉ(x)`` on the
Kish effective number of draws behind the point (the positives for ROC, the draws above the
threshold for PR); ``c`` is the ``level`` quantile of ``max_x |C*_b(x) − Ĉ(x)| / σ̃(x)``
(the studentized sup-statistic band of Campbell (1994); Macskassy, Provost & Rosset (2005)
compare it with Kolmogorov-type bands, which ignore the weights' unequal information). The band
is the union of ``Ĉ ± c σ̂`` and the Agresti-Coull band at ``c``, clipped to ``[0, 1]``: where
the sample cannot see a change (the ROC curve of a sample whose lowest-scored positive sits above
most negatives is flat at 1 there, and every resample agrees) the floor keeps it honest. The
floor in the studentization matters: by ``σ̂`` alone, points next to flat stretches had
``σ̂ ≈ 0``, ``c`` was about 4.1 and the band covered 0.997-1.000 at 1:10
(``docs/threshold-free.md``). A PR band reaches precision 1 below the recall of the first drawn
positive (no drawn positive resolves the top of the ranking; the pool's precision there is often
1). With fewer than :data:`MIN_POSITIVES` effective positives :func:`curve_band` warns. Adaptive
proposals make the draws dependent; the band then treats them as independent, as the package's
variance does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ._validation import (
    check_binary_labels,
    check_count,
    check_finite,
    check_level,
    check_rng,
    check_weights,
)
from .estimators import draw_labels
from .proposals import Draws

#: The default precision-recall grid ends at this recall (see :func:`curve_band`).
PR_MAX_RECALL = 0.95

#: :func:`curve_band` warns below this Kish effective number of positives among the draws.
MIN_POSITIVES = 5

__all__ = [
    "CurveBand",
    "curve_band",
    "mpl_literal",
    "weighted_pr_curve",
    "weighted_roc_curve",
]


def mpl_literal(text: object) -> str:
    """Text that Matplotlib shows literally, for labels made of user-given names.

    A ``$`` would start mathtext (a model named ``cost$\\frac$`` breaks the figure when it is
    drawn) and a leading ``_`` hides a legend entry; the first is escaped, the second prefixed
    with a zero-width space. Shared by :meth:`CurveBand.plot` and :mod:`bayes_activeeval.report`.

    Parameters
    ----------
    text : object
        A model or measure name, or any label (converted with ``str``).

    Returns
    -------
    str
        The label to hand to Matplotlib.
    """
    s = str(text).replace("$", r"\$")
    return "\u200b" + s if s.startswith("_") else s


@dataclass(frozen=True, repr=False)
class CurveBand:
    """A curve estimate on a grid with a simultaneous confidence band.

    Returned by :func:`curve_band`.

    Parameters
    ----------
    curve : {"roc", "pr"}
        The ROC curve or the precision-recall curve.
    x : ndarray (g,)
        The grid: false-positive rates (ROC) or recalls (PR).
    y : ndarray (g,)
        The estimated curve on the grid.
    low, high : ndarray (g,)
        The lower and upper edges of the band, in [0, 1].
    level : float
        The band's nominal simultaneous level: conservative, a lower bound on the coverage of
        the whole curve rather than the coverage itself (the band usually covers more; see
        :func:`curve_band`).
    critical_value : float
        ``c``, the sup-t critical value (at least ``z_{(1+level)/2}``) of the deviations
        studentized by ``max(SD_boot, SD_Agresti-Coull)``: the band holds
        ``estimate ± c·SD_boot``, widened where the Agresti-Coull band at ``c`` is wider (and, for
        PR, up to 1 below the first drawn positive's recall).
    n_boot : int
        The bootstrap resamples used (those that defined a curve).
    model : str, optional
        The model whose curve it is (default ``"model"``).
    method : str, optional
        How the band was made (default ``"bootstrap sup-t"``).

    Attributes
    ----------
    curve : {"roc", "pr"}
    x : ndarray (g,)
        The grid: false-positive rates (ROC) or recalls (PR).
    y : ndarray (g,)
        The estimated true-positive rate (ROC) or precision (PR) at each grid point.
    low, high : ndarray (g,)
        The band.
    level : float
        The nominal level, a conservative lower bound on the coverage.
    critical_value : float
        ``c`` of the sup-t band.
    n_boot : int
    model : str
    method : str
    """

    curve: str
    x: np.ndarray
    y: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    critical_value: float
    n_boot: int
    model: str = "model"
    method: str = "bootstrap sup-t"

    def contains(self, y_true: np.ndarray) -> bool:
        """Whether a curve given on the same grid lies inside the band everywhere."""
        y_true = np.asarray(y_true, dtype=float)
        return bool(np.all((self.low - 1e-12 <= y_true) & (y_true <= self.high + 1e-12)))

    def to_frame(self) -> pd.DataFrame:
        xname, yname = ("fpr", "tpr") if self.curve == "roc" else ("recall", "precision")
        return pd.DataFrame({xname: self.x, yname: self.y, "low": self.low, "high": self.high})

    def plot(self, ax=None, **kwargs: Any):
        """Draw the curve and its band on a matplotlib axis (created if not given).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The axis to draw on (default: a new figure's).
        **kwargs
            Passed to ``ax.plot`` for the curve; the default ``label`` is the model's name,
            shown literally (:func:`mpl_literal`: ``$`` is not mathtext, a leading ``_`` does
            not hide the legend entry).

        Returns
        -------
        matplotlib.axes.Axes
            The axis.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(4.5, 4))
        kwargs.setdefault("label", mpl_literal(self.model))
        (line,) = ax.plot(self.x, self.y, **kwargs)
        ax.fill_between(
            self.x, self.low, self.high, color=line.get_color(), alpha=0.25, linewidth=0
        )
        if self.curve == "roc":
            ax.plot([0, 1], [0, 1], color="0.7", linewidth=0.8, linestyle=":")
            ax.set_xlabel("false-positive rate")
            ax.set_ylabel("true-positive rate (recall)")
        else:
            ax.set_xlabel("recall")
            ax.set_ylabel("precision")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{self.curve.upper()} curve, {100 * self.level:g}% simultaneous band")
        return ax

    def __repr__(self) -> str:
        return (
            f"CurveBand(curve={self.curve!r}, model={self.model!r}, grid={self.x.size}, "
            f"level={self.level}, critical_value={self.critical_value:.3g}, "
            f"mean width={np.mean(self.high - self.low):.3g})"
        )


def _sorted_groups(s: np.ndarray):
    """Order by score descending and the start of each tie group in that order."""
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    return order, starts, ss[starts]


def _cumulative(y, s, W):
    """Cumulative positive and negative mass at each distinct threshold (highest first), for one
    or many weight vectors ``W`` (shape (n,) or (B, n))."""
    order, starts, thr = _sorted_groups(s)
    W2 = np.atleast_2d(W)[:, order]
    yy = y[order].astype(bool)
    tp = np.cumsum(np.add.reduceat(np.where(yy, W2, 0.0), starts, axis=1), axis=1)
    fp = np.cumsum(np.add.reduceat(np.where(yy, 0.0, W2), starts, axis=1), axis=1)
    return tp, fp, thr


def weighted_roc_curve(y_true, y_score, sample_weight=None):
    """``(fpr, tpr, thresholds)`` of the weighted ROC curve; equals
    :func:`sklearn.metrics.roc_curve` with ``sample_weight`` and ``drop_intermediate=False``.

    Parameters
    ----------
    y_true : array-like (n,)
        0/1 labels, 1 the positive class.
    y_score : array-like (n,)
        Scores, higher meaning more likely positive.
    sample_weight : array-like (n,), optional
        Weights of the draws, e.g. the importance weights ``p/q`` (default: all 1). Samples of
        weight 0 are dropped, as scikit-learn does: their scores are not thresholds.

    Returns
    -------
    fpr, tpr : ndarray
        False- and true-positive rates at each threshold, starting at ``(0, 0)``.
    thresholds : ndarray
        ``inf``, then the distinct scores in decreasing order (one per rate after the first).


    Raises
    ------
    ValueError
        For labels other than 0/1, non-finite scores, negative or non-finite weights, weights
        that are all 0, or arrays of different lengths; and when either class has no weight
        (no positive or no negative of positive weight): one of the rates is then ``0/0``
        (before: NaN rates and a numpy ``RuntimeWarning``; scikit-learn warns and returns NaN),
        as :func:`curve_band` refuses draws without both classes.
    """
    y, s, v = _arrays(y_true, y_score, sample_weight)
    _check_classes(y, "roc")
    tp, fp, thr = _cumulative(y, s, v)
    tp, fp = tp[0], fp[0]
    return (
        np.r_[0.0, fp / fp[-1]],
        np.r_[0.0, tp / tp[-1]],
        np.r_[np.inf, thr],
    )


def weighted_pr_curve(y_true, y_score, sample_weight=None):
    """``(precision, recall, thresholds)`` as :func:`sklearn.metrics.precision_recall_curve` with
    ``sample_weight`` (thresholds ascending, the point ``(1, 0)`` appended; scikit-learn >= 1.3,
    ``drop_intermediate=False``).

    Parameters
    ----------
    y_true : array-like (n,)
        0/1 labels, 1 the positive class.
    y_score : array-like (n,)
        Scores, higher meaning more likely positive.
    sample_weight : array-like (n,), optional
        Weights of the draws, e.g. the importance weights ``p/q`` (default: all 1). Samples of
        weight 0 are dropped, as scikit-learn does: their scores are not thresholds.

    Returns
    -------
    precision, recall : ndarray
        Precision and recall at each threshold, then the appended point ``(1, 0)``.
    thresholds : ndarray
        The distinct scores in increasing order (one fewer than ``precision``).


    Raises
    ------
    ValueError
        For labels other than 0/1, non-finite scores, negative or non-finite weights, weights
        that are all 0, or arrays of different lengths; and when no positive has weight: recall
        is then ``0/0`` (before: NaN recalls and a numpy ``RuntimeWarning``). Without negatives
        the curve is defined (precision 1 at every threshold).
    """
    y, s, v = _arrays(y_true, y_score, sample_weight)
    _check_classes(y, "pr")
    tp, fp, thr = _cumulative(y, s, v)
    tp, fp = tp[0], fp[0]
    ps = tp + fp
    precision = np.divide(tp, ps, out=np.zeros_like(tp), where=ps != 0)
    recall = tp / tp[-1]
    sl = slice(None, None, -1)  # increasing thresholds
    return np.r_[precision[sl], 1.0], np.r_[recall[sl], 0.0], thr[sl]


def _check_classes(y: np.ndarray, curve: str) -> None:
    """Refuse labels (of the samples of positive weight) without a class the curve divides by:
    the positives for both curves (true-positive rate, recall), the negatives for ROC."""
    what = "the ROC curve" if curve == "roc" else "the precision-recall curve"
    if not np.any(y == 1):
        rate = "true-positive rate" if curve == "roc" else "recall"
        raise ValueError(
            f"y_true has no positive label of positive weight; {what} needs one (its {rate} "
            "would be 0/0)"
        )
    if curve == "roc" and not np.any(y == 0):
        raise ValueError(
            f"y_true has no negative label of positive weight; {what} needs one (its "
            "false-positive rate would be 0/0)"
        )


def _arrays(y_true, y_score, sample_weight):
    """Labels (0/1), finite scores and finite non-negative weights of one length, without the
    samples of weight zero (scikit-learn's ``roc_curve``/``precision_recall_curve`` drop them:
    their scores are no thresholds of the weighted curve)."""
    y = check_binary_labels(y_true).astype(int)
    s = np.asarray(y_score, dtype=float)
    if s.shape != y.shape:
        raise ValueError(
            f"y_true and y_score must be 1-d arrays of one length, got {y.shape} and {s.shape}"
        )
    check_finite(s, "y_score")
    if sample_weight is None:
        return y, s, np.ones_like(s)
    v = check_weights(sample_weight, n=s.size)
    keep = v != 0
    if not keep.any():
        raise ValueError("sample_weight is 0 for every sample; the curve needs a positive weight")
    return y[keep], s[keep], v[keep]


def _on_grid(curve, tp, fp, grid):
    """Curves for every row of ``tp``/``fp`` (shape (B, G)) evaluated on ``grid``; a row without
    positive mass (either curve) or without negative mass (ROC) defines no curve and is all NaN.

    Before, such rows gave finite curves: precision 0 at every recall for a bootstrap resample
    without positives (its recalls are ``0/0``), and whatever ``np.interp`` read off NaN
    false-positive rates for an ROC resample without negatives. :func:`curve_band` drops
    non-finite rows, so they inflated ``σ̂``, the critical value and ``CurveBand.n_boot``. A PR
    row without negatives keeps its curve (precision 1 at every recall)."""
    B = tp.shape[0]
    out = np.empty((B, grid.size))
    P, N = tp[:, -1:], fp[:, -1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        if curve == "roc":
            tpr = np.concatenate([np.zeros((B, 1)), tp / P], axis=1)
            fpr = np.concatenate([np.zeros((B, 1)), fp / N], axis=1)
            for b in range(B):
                out[b] = np.interp(grid, fpr[b], tpr[b])
        else:
            rec = tp / P
            prec = tp / (tp + fp)
            # precision at the first threshold reaching recall r
            for b in range(B):
                k = np.minimum(np.searchsorted(rec[b], grid, side="left"), rec.shape[1] - 1)
                out[b] = prec[b, k]
    undefined = P[:, 0] <= 0
    if curve == "roc":
        undefined |= N[:, 0] <= 0
    out[undefined] = np.nan
    return out


def _effective_counts(curve, y, s, v, xs):
    """Kish effective number of draws behind each grid point, for the Agresti-Coull floor of the
    band: the positives (ROC: the true-positive rate is a share of the positives) or the draws
    scoring at least the positive whose cumulative weight reaches the recall (PR: precision is a
    share of them). Counting only the positives above that threshold instead made the PR band
    no better where it under-covered (0.900 against 0.933 at 1:100 passive, 150 runs) and wider;
    the under-coverage came from recalls below the first drawn positive, which
    :func:`curve_band` now leaves unresolved."""
    pos = y == 1
    vp = v[pos]
    if curve == "roc":
        return np.full(xs.size, vp.sum() ** 2 / (vp @ vp))
    order, starts, _ = _sorted_groups(s)
    vs, ps = v[order], pos[order]
    cum_pos = np.cumsum(np.where(ps, vs, 0.0)) / vp.sum()
    k = np.minimum(np.searchsorted(cum_pos, xs - 1e-12, side="left"), v.size - 1)
    # a threshold takes its whole tie group: the count at the group's last draw, whatever the
    # order of the draws inside it (before, the band moved with that order)
    ends = np.r_[starts[1:], v.size] - 1
    k = ends[np.searchsorted(starts, k, side="right") - 1]
    c1, c2 = np.cumsum(vs), np.cumsum(vs * vs)
    return c1[k] ** 2 / c2[k]


def _ac_sd(est, n_eff, z):
    """Centre and standard deviation of the Agresti-Coull interval at ``z`` (Agresti & Coull
    (1998)) for a proportion ``est`` on ``n_eff`` effective draws."""
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = (n_eff * est + z**2 / 2) / (n_eff + z**2)
        return centre, np.sqrt(centre * (1 - centre) / (n_eff + z**2))


def _check_grid(grid: Any, curve: str) -> np.ndarray:
    """The grid of :func:`curve_band`: ``grid`` equally spaced points (a whole number >= 2) or
    the given one-dimensional, non-empty array of rates in ``[0, 1]``."""
    if np.ndim(grid) == 0:
        if isinstance(grid, (float, np.floating)) or not isinstance(grid, (int, np.integer)):
            raise ValueError(
                f"grid must be a whole number of points (>= 2) or an array of "
                f"{'false-positive rates' if curve == 'roc' else 'recalls'} in [0, 1], "
                f"got {grid!r}"
            )
        g = check_count(grid, "grid", minimum=2)
        return np.linspace(0.0, 1.0, g) if curve == "roc" else np.linspace(0.01, PR_MAX_RECALL, g)
    try:
        xs = np.asarray(grid, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"grid must be numbers in [0, 1], got {grid!r}") from None
    if xs.ndim != 1 or xs.size == 0:
        raise ValueError(f"grid must be a non-empty one-dimensional array, got shape {xs.shape}")
    bad = np.flatnonzero(~(np.isfinite(xs) & (xs >= 0.0) & (xs <= 1.0)))
    if bad.size:
        what = "false-positive rates" if curve == "roc" else "recalls"
        raise ValueError(
            f"grid[{bad[0]}] = {float(xs[bad[0]])!r}; the grid holds {what}, which must be "
            "in [0, 1]"
        )
    return xs


def curve_band(
    pool,
    draws: Draws,
    labels: Any,
    *,
    curve: str = "roc",
    model: str | None = None,
    level: float = 0.95,
    n_boot: int = 1000,
    grid: int | np.ndarray = 101,
    oracle: str = "deterministic",
    rng: Any = None,
) -> CurveBand:
    """The ROC or precision-recall curve of a model from labeled draws, with a simultaneous band.

    Parameters
    ----------
    pool : Pool
        A binary pool; items are ranked by the model's scores (or its positive probability).
    draws : Draws
    labels : array-like or mapping
        As in :func:`~bayes_activeeval.estimate`.
    curve : {"roc", "pr"}
        ROC (true-positive rate against false-positive rate) or precision against recall.
    model : str, optional
    level : float
        The band's nominal simultaneous level, in ``(0, 1)`` (default ``0.95``): a conservative
        level, a lower bound rather than the coverage. The band is built to cover the whole
        curve at least this often, and its Agresti-Coull parts (module docstring) make it
        wider than the bootstrap's ``level`` quantile alone: in the measured cells it covers
        more (0.95-1.00 at ``level=0.95``, ``docs/threshold-free.md``), except with too few
        positives, where it warns.
    n_boot : int
        Bootstrap resamples (``B``).
    grid : int or array-like
        Number of equally spaced grid points (a whole number >= 2) — false-positive rates on
        ``[0, 1]``, recalls on ``[0.01, 0.95]`` — or the grid itself, a non-empty
        one-dimensional array of rates in ``[0, 1]``. The PR grid stops short of full recall:
        precision at recall 1 is set by the pool's single lowest-scored positive, which a
        sample of a few thousand labels rarely contains (in a 60-run check at 1:100 and 2,000
        labels the band missed it there in 8 runs, and nowhere else).
    oracle : {"deterministic", "stochastic"}
        As in :func:`~bayes_activeeval.estimate` (default ``"deterministic"``).
    rng : None, int or Generator

    Returns
    -------
    CurveBand
        The curve on the grid and its simultaneous band (the method is in the module
        docstring; measured coverage in ``docs/threshold-free.md``).

    Warns
    -----
    UserWarning
        When the draws hold fewer than :data:`MIN_POSITIVES` effective positives (Kish size):
        the band then rests on where those few positives sit (1:1,000 passive, 1,000 labels,
        about one positive: it covered 0.634 before and 0.820 now, 161 runs;
        ``benchmarks/results/curve_bands.md``).

    Raises
    ------
    ValueError
        For an unknown ``curve`` or ``oracle``; a ``grid`` that is not a whole number >= 2 or a
        non-empty one-dimensional array of rates in ``[0, 1]``; a ``level`` outside ``(0, 1)``;
        labels outside the classes, or draws without both classes.
    NotImplementedError
        On a lazy pool: curves rank every item of the pool and are not lazy yet
        (:func:`~bayes_activeeval.threshold_free.estimates.check_not_lazy`).

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> from bayes_activeeval import curves, threshold_free as tf
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.01, rng=0)
    >>> d = tf.rank_proposal(sp.pool, "average_precision").draw(1000, rng=1)
    >>> band = curves.curve_band(sp.pool, d, sp.labeler(d.indices), curve="pr", rng=2)
    """
    from .threshold_free import measure_models, model_scores, rank_measure
    from .threshold_free.estimates import check_not_lazy

    if curve not in ("roc", "pr"):
        raise ValueError(f"curve must be 'roc' or 'pr', got {curve!r}")
    check_not_lazy(pool, "the ROC curve" if curve == "roc" else "the PR curve", "curve_band")
    if not isinstance(draws, Draws):
        raise TypeError(f"draws must be a Draws object, got {type(draws).__name__}")
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    level = check_level(level)
    n_boot = check_count(n_boot, "n_boot", minimum=20)
    rng = check_rng(rng)
    (name,) = measure_models(pool, rank_measure("roc_auc"), model)
    xs = _check_grid(grid, curve)
    v = check_weights(draws.weights, "draws.weights", n=len(draws))
    y = (draw_labels(pool, draws.indices, labels, oracle=oracle) == pool.pos).astype(int)
    if not (v[y == 1].sum() > 0 and v[y == 0].sum() > 0):
        raise ValueError(
            "the draws need at least one positive and one negative label of positive weight"
        )
    s = model_scores(pool, name)[draws.indices]
    # the draws in one order whatever order they came in (score, then item): the band and its
    # bootstrap do not depend on it
    canon = np.lexsort((draws.indices, -s))
    y, s, v = y[canon], s[canon], v[canon]
    tp, fp, _ = _cumulative(y, s, v)
    est = _on_grid(curve, tp, fp, xs)[0]
    n = v.size
    boot = np.empty((n_boot, xs.size))
    chunk = max(1, 2_000_000 // max(n, 1))
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=b)
        tpb, fpb, _ = _cumulative(y, s, counts * v)
        boot[start : start + b] = _on_grid(curve, tpb, fpb, xs)
    # a resample without positives (or, ROC, without negatives) defines no curve (_on_grid)
    ok = np.all(np.isfinite(boot), axis=1)
    boot = boot[ok]
    sd = boot.std(axis=0, ddof=1)
    z = float(stats.norm.ppf(0.5 + level / 2))
    # the Agresti-Coull standard deviation on the effective number of draws behind each point:
    # a floor under the bootstrap's (next to a flat stretch every resample agrees, the
    # bootstrap SD is nearly 0, and studentizing by it blew the sup statistic up: c ≈ 4.1 and
    # coverage 0.995-1.000 at 1:10)
    n_eff = _effective_counts(curve, y, s, v, xs)
    vp = v[y == 1]
    n_pos = float(vp.sum() ** 2 / (vp @ vp)) if vp.any() else 0.0
    if n_pos < MIN_POSITIVES:
        warnings.warn(
            f"the draws hold {n_pos:.3g} effective positives (Kish size); a curve band on fewer "
            f"than {MIN_POSITIVES} is unreliable (it rests on where those few positives sit); "
            "label more, or sample the positives with a rank proposal",
            UserWarning,
            stacklevel=2,
        )
    sigma = np.maximum(sd, _ac_sd(est, n_eff, z)[1])
    live = sigma > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = np.abs(boot[:, live] - est[live]) / sigma[live]
    crit = float(np.quantile(dev.max(axis=1), level)) if live.any() else 0.0
    crit = max(crit, z)
    # the band: the bootstrap band at c, widened to the Agresti-Coull band at c where that is
    # wider (where the sample saw no change, e.g. a TPR of 1 below the lowest drawn positive)
    ac, ac_sd = _ac_sd(est, n_eff, crit)
    low = np.clip(np.minimum(est - crit * sd, ac - crit * ac_sd), 0.0, 1.0)
    high = np.clip(np.maximum(est + crit * sd, ac + crit * ac_sd), 0.0, 1.0)
    if curve == "pr":
        # below the recall of the first drawn positive the sample holds no positive that
        # could place the threshold: precision there (often 1 at the very top of a pool) is
        # not resolved, and the band reaches 1
        r1 = tp[0][np.flatnonzero(tp[0] > 0)[0]] / tp[0][-1]
        high[xs < r1 - 1e-12] = 1.0
    if curve == "roc":  # the ROC curve passes through (0, 0) and (1, 1)
        low[xs <= 0], high[xs <= 0] = 0.0, np.maximum(high[xs <= 0], 0.0)
        low[xs >= 1], high[xs >= 1] = 1.0, 1.0
    return CurveBand(curve, xs, est, low, high, level, crit, int(ok.sum()), name)
