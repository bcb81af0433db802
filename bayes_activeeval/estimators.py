"""Importance-weighted estimates of generalized measures, with delta-method standard errors.

One estimator for every measure (Sawade (2012), Eq. 3.11/3.31; Marchant & Rubinstein (2021),
Eq. 1 and Thm. 2)::

    R̂ = Σ v_i ℓ_i / Σ v_i,    Ĝ = g(R̂),    v_i = p(x_i)/q(x_i)

and one variance, the delta method applied to the weighted covariance of the centred losses
(Sawade (2012), Eq. 3.14 and Lemma 3.4; Marchant & Rubinstein (2021), Sec. 3.3.2)::

    Cov(Ĝ) ≈ Σ v_i² r_i r_iᵀ / (Σ v_i)²,    r_i = Dg(R̂) (ℓ_i − R̂)

The self-normalized ratio and a nonlinear ``g`` make ``Ĝ`` biased at order ``1/n``: about a tenth
of a standard error, but under extreme class skew (recall at 0.1% positives, where a few heavily
weighted false negatives carry the estimate) several Monte Carlo standard errors in a 2,000-run
study. ``bias_correction=True`` subtracts the second-order estimate of it (:func:`ratio_bias`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import special

from . import intervals
from ._validation import check_finite, check_items, check_level
from .beliefs import as_belief
from .measures import FBeta, Measure
from .proposals import Draws, intrinsic_risk

__all__ = [
    "ClassEstimates",
    "ConfidenceInterval",
    "Estimate",
    "NoTruePositive",
    "UndefinedEstimateWarning",
    "difference_estimate",
    "estimate",
    "model_assisted_estimate",
    "ratio_bias",
    "weighted_estimate",
]


class UndefinedEstimateWarning(UserWarning):
    """The sample cannot define the measure (e.g. recall before any positive was labeled)."""


class ConfidenceInterval(NamedTuple):
    """A confidence interval ``(low, high)``, like :class:`scipy.stats._common.ConfidenceInterval`.

    Parameters
    ----------
    low, high : float or array-like
        The lower and upper ends (floats for a scalar measure, arrays otherwise).
    """

    low: Any
    high: Any


class ClassEstimates(NamedTuple):
    """The per-class ratios behind an estimate of an averaged measure (balanced accuracy, macro
    recall/precision/F1), estimated from the same draws and weights
    (:meth:`~bayes_activeeval.measures.Measure.class_parts`).

    Parameters
    ----------
    values : ndarray (K,)
        ``θ̂_k``.
    cov : ndarray (K, K)
        Their delta-method covariance (Sawade (2012), Eq. 3.14, with ``Dθ`` for ``Dg``); NaN for
        a part no draw carries.
    kish, weight_df : ndarray (K,)
        Kish size of each part's carrying draws and their weights' degrees of freedom
        (:func:`~bayes_activeeval.intervals.carrying_sizes`): for recall of class ``k`` the
        draws labeled ``k``, for its precision the draws predicted ``k``, for its F1 both.
    average : ndarray (m, K)
        How output ``o`` moves with the parts, ``Σ_k average[o, k] (θ_k − θ̂_k)``
        (:class:`~bayes_activeeval.measures.ClassParts`).
    bounds : tuple of float
        Range of each part.
    low, high : ndarray (K,)
        What the pool already tells about each part (``bounds``, or ``[0, 0]`` for a class the
        model predicts nowhere; :class:`~bayes_activeeval.measures.ClassParts`): a part's
        interval is cut to ``[low_k, high_k]``, and is ``[low_k, high_k]`` where no draw
        carries the part.
    kind : str or None, optional
        Which one-vs-rest ratio every part is (``"precision"``, ``"recall"``, ``"f1"``) or
        ``None`` (:class:`~bayes_activeeval.measures.ClassParts`); a part of kind ``"f1"`` at 0
        gets the upper limit ``2J_U/(1 + J_U)`` (:meth:`Estimate.confidence_interval`).
    """

    values: np.ndarray
    cov: np.ndarray
    kish: np.ndarray
    weight_df: np.ndarray
    average: np.ndarray
    bounds: tuple[float, float]
    low: np.ndarray
    high: np.ndarray
    kind: str | None = None


class NoTruePositive(NamedTuple):
    """The outputs of an F-beta, MCC or Fowlkes-Mallows estimate (or a stack of one over models)
    whose labeled draws hold no true positive, and what their upper limit is built from
    (:func:`~bayes_activeeval.intervals.true_positive_substitution`; kept in
    ``Estimate.details["no_true_positive"]`` by :func:`weighted_estimate`).

    Parameters
    ----------
    measure : str
        ``"f_beta"``, ``"mcc"`` or ``"fowlkes_mallows"``
        (:data:`~bayes_activeeval.intervals.TP_SUBSTITUTION`).
    at : ndarray of bool (m,)
        The outputs with no labeled true positive (``TP̂ = 0``) and some carrying draw.
    risk : ndarray (m, d)
        Each output's block of ``R̂`` (its true-positive component, the first, 0 where ``at``).
    carrying : ndarray (m,)
        The share ``C`` of the importance weight on the draws carrying each output (labeled or
        predicted positive by its model).
    """

    measure: str
    at: np.ndarray
    risk: np.ndarray
    carrying: np.ndarray


@dataclass(frozen=True, repr=False)
class Estimate:
    """An importance-weighted estimate of a measure.

    Made by :func:`estimate` (through :func:`weighted_estimate` or
    :func:`model_assisted_estimate`) and by :func:`difference_estimate`, the adaptive
    evaluator's estimate.

    Parameters
    ----------
    values : ndarray (m,)
        The estimate ``Ĝ``, one entry per output.
    cov : ndarray (m, m)
        Its covariance.
    risk : ndarray (d,)
        ``R̂``, the weighted mean loss vector.
    n_draws : int
        Draws entering the estimate, repeats included.
    n_labels : int
        Labels the oracle was asked for.
    outputs : tuple of str
        The names of the ``m`` outputs.
    measure : str
        The name of the measure.
    bounds : tuple of float, optional
        The measure's range (default ``(-inf, inf)``: unbounded).
    estimator : str, optional
        Which estimator made it: ``"ipw"`` (the default, the self-normalized importance-weighted
        estimate), ``"model_assisted"`` or ``"difference"``.
    details : dict, optional
        Estimator-specific extras, e.g. ``"lambda"``, ``"bias"`` (default empty).
    df : ndarray (m,), optional
        Satterthwaite degrees of freedom of the variance estimate (default ``None``: infinite;
        see :attr:`effective_df`).
    kish, weight_df : ndarray (m,), optional
        Kish effective size of the draws that carry each output and the degrees of freedom of
        their weights' heterogeneity (default ``None``: ``n_draws`` and infinite).
    n_max : int, optional
        Cap on the effective sample size of the score-type intervals (default ``None``: none).
    event_weight, event_weight_rms : ndarray (m,), optional
        The mean and root-mean-square weight of one more labeled event, on the unit scale of the
        range (default ``None``; set, they make ``"gamma"`` the default interval).
    anticipated_stderr : ndarray (m,), optional
        The standard error the models' own probabilities anticipate (default ``None``).

    Attributes
    ----------
    values : ndarray (m,)
        ``Ĝ = g(R̂)``, one entry per output of the measure.
    cov : ndarray (m, m)
        Delta-method covariance of ``Ĝ`` (Sawade (2012), Eq. 3.14 / Lemma 3.4).
    risk : ndarray (d,)
        ``R̂``, the weighted mean of the loss vector.
    n_draws : int
        Number of draws entering the estimate (repeats included).
    n_labels : int
        Labels the oracle was asked for (distinct items under a deterministic oracle).
    outputs : tuple of str
        Names of the outputs.
    measure : str
        Name of the measure.
    bounds : (float, float)
        The measure's range (``Measure.bounds``); every interval lies inside it.
    kish, weight_df : ndarray (m,), optional
        Kish effective size of the draws that carry each output and the degrees of freedom of
        their weights' heterogeneity (:func:`~bayes_activeeval.intervals.carrying_sizes`), used by the
        score-type intervals.
    n_max : int, optional
        Cap on the effective sample size of the score-type intervals (Korn & Graubard (1998)
        cap it at the sample size). The adaptive AIS estimate sets it to its number of draws:
        near a bound of the range its ``n*`` is estimated from the few errors that also steered
        the proposal, and uncapped it under-covers (``benchmarks/results/boundary_coverage.md``:
        0.63-0.82 at accuracies 0.99-0.999; capped, at least 0.92). With a cap the weights'
        degrees of freedom are not applied.
    event_weight : ndarray (m,), optional
        The weight one labeled event carries in each output on the unit scale of the range. Set
        by :func:`difference_estimate` for a measure with an affine ``g`` each of whose outputs
        reads one loss column (accuracy, the error rate, a stack of them), whose default
        interval is then ``"gamma"`` (Fay & Feuer (1997),
        :func:`~bayes_activeeval.intervals.weighted_gamma`); ``None`` for a ratio such as F1 and
        for a difference of two models' accuracies (not a count of events: a difference near 0
        sits mid-range), which keep ``"modified_wilson"``. The mean weight of one more event
        (``ū``).
    event_weight_rms : ndarray (m,), optional
        The root-mean-square weight of one more event, set with :attr:`event_weight`: the
        ``"gamma"`` interval's variance increment is its square where an event has been labeled.
    anticipated_stderr : ndarray (m,), optional
        The standard error the models' own probabilities anticipate, at the level of the data
        (:func:`difference_estimate`): the ``"gamma"`` interval's far side uses the larger of
        its square and ``SE²``.
    class_parts : ClassEstimates or None
        Balanced accuracy and the macro averages (and their stacks and differences): the
        per-class ratios, their covariance and carrying Kish sizes, from which the score-type
        intervals are combined by MOVER (:meth:`confidence_interval`); kept in
        ``details["class_parts"]``.
    """

    values: np.ndarray
    cov: np.ndarray
    risk: np.ndarray
    n_draws: int
    n_labels: int
    outputs: tuple[str, ...]
    measure: str
    bounds: tuple[float, float] = (-np.inf, np.inf)
    estimator: str = "ipw"
    details: dict[str, Any] = field(default_factory=dict)
    df: np.ndarray | None = None
    kish: np.ndarray | None = None
    weight_df: np.ndarray | None = None
    n_max: int | None = None
    event_weight: np.ndarray | None = None
    event_weight_rms: np.ndarray | None = None
    anticipated_stderr: np.ndarray | None = None

    @property
    def class_parts(self) -> ClassEstimates | None:
        """The per-class ratios of an averaged measure (``None`` for any other measure)."""
        return self.details.get("class_parts")

    @property
    def value(self) -> float | np.ndarray:
        """The estimate (a float for a scalar measure)."""
        return float(self.values[0]) if self.values.size == 1 else self.values

    @property
    def stderrs(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))

    @property
    def stderr(self) -> float | np.ndarray:
        """Standard error (a float for a scalar measure)."""
        s = self.stderrs
        return float(s[0]) if s.size == 1 else s

    @property
    def effective_df(self) -> np.ndarray:
        """Satterthwaite degrees of freedom of the variance estimate, per output.

        The variance is a weighted sum of squared terms ``a_i = v_i v'_i r_i²``; its effective
        degrees of freedom are ``(Σ a_i)² / Σ a_i²`` (Satterthwaite, 1946): ``n`` when every draw
        contributes alike, small when a few heavily weighted draws carry the variance — as false
        negatives do for recall under extreme class skew.
        """
        if self.df is None:
            return np.full(self.values.shape, np.inf)
        return self.df

    def confidence_interval(
        self, level: float = 0.95, method: str | None = None
    ) -> ConfidenceInterval:
        """Two-sided confidence interval, inside the measure's range.

        The one interval of an estimate: the API, ``bae status``, ``bae compare``, the report and
        its HTML tables all call this (with the default method), so they print the same numbers.

        Parameters
        ----------
        level : float
            Confidence level in (0, 1).
        method : str, optional
            Default ``"modified_wilson"`` (:data:`~bayes_activeeval.intervals.DEFAULT_METHOD`)
            for a measure with a bounded range, ``"gamma"`` for the adaptive difference estimate
            (one that carries :attr:`event_weight`), ``"t"`` for an unbounded one (MSE, MAE, R²):

            - ``"gamma"``: Fay & Feuer's (1997) gamma interval for a weighted count applied to
              the distance of the estimate from the nearer bound of the range (for accuracy the
              weighted count of labeled errors), variance ``SE²``, one more event added to the
              upper end with the draws' mean weight and, where an event has been labeled, their
              mean squared weight as its variance (Fay & Feuer's (1997) increment, moment-matched;
              Tiwari, Clegg & Zou (2006) use the mean weight for both);
              :func:`~bayes_activeeval.intervals.weighted_gamma`. With no labeled error it is
              ``[1 − 3.69 ū, 1]``, the rule of three for weighted counts. Its far side allows
              at least :attr:`anticipated_stderr` squared where the estimate carries it (heavy
              events the sample has not seen; :func:`difference_estimate`).
              ``benchmarks/results/boundary_coverage.md`` (``adaptive_default``: ``ActiveEvaluator``
              with no options, true accuracies 0.9-1.0, 50-2,000 labels, 300 runs per cell):
              0.943-1.000 in all 60 cells, 1.03-1.25 times Wald's width where Wald covers and
              every run has labeled an error; the modified Wilson interval on the same runs
              covered down to 0.343.

            - ``"modified_wilson"``: the score interval for a proportion with the effective
              sample size ``n* = x̂(1 − x̂)/SE_x²`` on the unit scale of the range (Korn &
              Graubard (1998); the Kish size of the carrying draws where ``x̂`` sits at a bound
              or ``SE = 0``), where it comes from the variance shrunk by ``(z/t_ν)²`` with
              ``ν + 1`` the degrees of freedom of the carrying draws' weight heterogeneity
              (:func:`~bayes_activeeval.intervals.carrying_sizes`; ``∞`` for equal weights), with
              the one-sided Poisson bound next to the boundary
              (Brown, Cai & DasGupta (2001), Sec. 4.1.1). It never has zero width; for passive
              sampling of a proportion it is the modified Wilson interval with ``n`` trials.
              ``benchmarks/results/boundary_coverage.md``: coverage at least 0.93 for true
              accuracies 0.9-1.0 from 50 labels, passive and optimal designs, where the Wald
              interval covers 0.03-0.9.
            - ``"wilson"``, ``"jeffreys"``, ``"clopper_pearson"``: the same effective size with
              Wilson's, Jeffreys' or the Clopper-Pearson interval
              (:mod:`bayes_activeeval.intervals`).
            - ``"t"``: ``Ĝ ± t_{ν−1} SE``, ``ν`` the Satterthwaite effective degrees of freedom of
              the variance estimate (:attr:`effective_df`); in
              ``benchmarks/results/static_estimation.md`` it brought recall at 0.1% positives
              from 0.92-0.93 (Wald) to 0.95. Zero width when ``SE = 0``.
            - ``"wald"``: ``Ĝ ± z_{1−α/2} SE`` (Sawade (2012), Lemma 3.3, Eq. 3.16).
            - ``"logit"``: the Wald interval on ``logit((G − lo)/(hi − lo))`` (``log(G − lo)`` for
              a range bounded below), mapped back; the clipped Wald interval at a bound.

            ``"t"`` and ``"wald"`` are clipped to the measure's range (``Measure.bounds``).

            **Averages of per-class ratios** (balanced accuracy, macro recall, precision and F1,
            their stacks and differences; :attr:`class_parts` set): ``"modified_wilson"``,
            ``"wilson"``, ``"jeffreys"`` and ``"clopper_pearson"`` build that interval for each
            class's ratio, on its own effective size (the Kish size of the class's carrying draws
            where the ratio sits at 0 or 1), and combine them by MOVER (Zou & Donner (2008);
            :func:`~bayes_activeeval.intervals.mover`) with the correlation of the per-class
            estimates (0 for recall and precision, whose carrying draws are disjoint; positive
            for one-vs-rest F1), around ``Ĝ``. A class whose ratio sits at 0 or 1 has no
            delta-method variance and the interval of the average came from the other classes
            alone: balanced accuracy 0.93 at 1.5 % positives, 400 passive draws, covered 0.42
            (``docs/estimation.md``). A class no draw carries (balanced accuracy: not yet
            labeled) enters with the whole range as its interval.

            **No labeled true positive** (F1, F-β, MCC and Fowlkes-Mallows of
            :func:`weighted_estimate`, and stacks of them; ``details["no_true_positive"]``, a
            :class:`NoTruePositive`): with those four methods the upper limit of such an output
            is the measure at the upper limit ``J_U`` of the true positives' share
            ``J = TP/(TP + FP + FN)`` of the carrying draws — the method's interval for a
            proportion at 0 on their Kish size (capped at :attr:`n_max`) — with the other cells
            of the confusion matrix at their estimates (the substitution method of Daly (1998),
            :func:`~bayes_activeeval.intervals.true_positive_substitution`), where it is above the
            interval's own. For F1 it is ``2J_U/(1 + J_U)``, exact since ``F1 = 2J/(1 + J)``.
            The delta-method standard error has no term for the true-positive count there: the
            previous upper limit was ``J_U`` itself for F1, and MCC's interval nearly collapsed
            (``benchmarks/results/no_tp_intervals.md``: at 1 % positives and 2,000 passive draws
            coverage went from 0.913 to 0.967 for F1 and from 0.902 to 0.956 for MCC, at 500
            draws from 0.608 to 0.977 for MCC). The lower limit, and every interval of a sample
            with a labeled true positive, are unchanged. Macro F1 (and its stacks and
            differences) maps the interval of each class part at 0 the same way,
            ``[0, 2J_U/(1 + J_U)]``, before MOVER.
        """
        level = check_level(level)
        lo_b, hi_b = self.bounds
        bounded = bool(np.isfinite(lo_b) and np.isfinite(hi_b))
        if method is None:
            if not bounded:
                method = "t"
            elif self.event_weight is not None:
                method = "gamma"
            else:
                method = intervals.DEFAULT_METHOD
        if method not in intervals.METHODS:
            raise ValueError(
                f"method must be one of {', '.join(map(repr, intervals.METHODS))}; got {method!r}"
            )
        if method == "logit" and not (np.isfinite(lo_b) or np.isfinite(hi_b)):
            raise ValueError(
                f"method='logit' needs a measure with a bounded range; {self.measure!r} is unbounded"
            )
        if self.class_parts is not None and method in intervals.BOUNDED_METHODS and bounded:
            low, high = self._mover_interval(level, method)
            return self._pack(np.atleast_1d(low), np.atleast_1d(high))
        kish = self.kish if self.kish is not None else np.full(self.values.shape, self.n_draws)
        wdf = self.weight_df if self.weight_df is not None else np.full(kish.shape, np.inf)
        low, high = intervals.interval(
            self.values,
            self.stderrs,
            self.bounds,
            level,
            method,
            df=self.effective_df,
            kish=kish,
            n_df=None if self.n_max is not None else np.maximum(wdf - 1.0, 1.0),
            n_max=self.n_max,
            event_weight=self.event_weight,
            event_weight_rms=self.event_weight_rms,
            anticipated_stderr=self.anticipated_stderr,
        )
        low, high = np.atleast_1d(low), np.atleast_1d(high)
        gap = self.details.get("no_true_positive")
        if gap is not None and method in intervals.BOUNDED_METHODS and bounded:
            high = self._no_true_positive_high(high, gap, level, method, kish)
        return self._pack(low, high)

    def _no_true_positive_high(
        self, high: np.ndarray, gap: NoTruePositive, level: float, method: str, kish: np.ndarray
    ) -> np.ndarray:
        """The upper limit where no true positive was labeled (see :meth:`confidence_interval`):
        the measure at the upper limit ``J_U`` of the true positives' share of the carrying
        draws, ``method``'s interval for a proportion at 0 on their Kish size (capped at
        :attr:`n_max`), the other cells at their estimates; never below the interval's own."""
        m = self.values.size
        _, share = intervals.interval(
            np.zeros(m), np.zeros(m), (0.0, 1.0), level, method, kish=kish, n_max=self.n_max
        )
        upper = intervals.true_positive_substitution(gap.measure, share, gap.risk, gap.carrying)
        upper = np.clip(upper, *self.bounds)
        use = gap.at & np.isfinite(high) & np.isfinite(upper)
        return np.where(use, np.maximum(high, upper), high)

    def _mover_interval(self, level: float, method: str) -> tuple[np.ndarray, np.ndarray]:
        """Per-class score intervals combined by MOVER (see :meth:`confidence_interval`)."""
        p = self.class_parts
        var = np.diag(p.cov)
        se = np.sqrt(np.clip(np.nan_to_num(var, nan=0.0), 0.0, None))
        known = np.isfinite(p.values) & np.isfinite(var) & (p.kish > 0)
        lo_k, hi_k = intervals.interval(
            np.where(known, p.values, 0.5),
            se,
            p.bounds,
            level,
            method,
            kish=np.where(known, p.kish, 1.0),
            n_df=None if self.n_max is not None else np.maximum(p.weight_df - 1.0, 1.0),
            n_max=self.n_max,
        )
        if p.kind == "f1":
            # a class with no labeled true positive: its one-vs-rest F1 is 2J/(1 + J), J the
            # true positives' share of its carrying draws, and [0, hi_k] is J's interval there
            # (the estimate 0 on their Kish size; see confidence_interval)
            zero = known & (p.values == 0.0)
            hi_k = np.where(zero, 2.0 * hi_k / (1.0 + hi_k), hi_k)
        # a part no draw carries: its ratio is unknown, anywhere in what the pool allows
        # ([low_k, high_k]: its range, or [0, 0] for a class the model predicts nowhere);
        # a part the draws carry: its own interval, cut to what the pool allows
        lo_k = np.where(known, np.clip(lo_k, p.low, p.high), p.low)
        hi_k = np.where(known, np.clip(hi_k, p.low, p.high), p.high)
        with np.errstate(divide="ignore", invalid="ignore"):
            corr = p.cov / np.outer(se, se)
        corr = np.where(np.outer(known & (se > 0), known & (se > 0)), corr, 0.0)
        low, high = intervals.mover(
            self.values, p.values, (lo_k, hi_k), p.average, corr, self.bounds
        )
        undefined = ~np.isfinite(self.values) | np.isnan(self.stderrs)
        return np.where(undefined, np.nan, low), np.where(undefined, np.nan, high)

    def _pack(self, low: np.ndarray, high: np.ndarray) -> ConfidenceInterval:
        if self.values.size == 1:
            return ConfidenceInterval(float(low[0]), float(high[0]))
        return ConfidenceInterval(low, high)

    def to_frame(self, level: float = 0.95, method: str | None = None) -> pd.DataFrame:
        """One row per output: value, stderr and the interval bounds."""
        ci = self.confidence_interval(level, method)
        return pd.DataFrame(
            {
                "value": self.values,
                "stderr": self.stderrs,
                "low": np.atleast_1d(ci.low),
                "high": np.atleast_1d(ci.high),
            },
            index=pd.Index(self.outputs, name="output"),
        )

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{o}={v:.6g} ± {s:.3g}"
            for o, v, s in zip(self.outputs, self.values, self.stderrs, strict=True)
        )
        return f"Estimate({parts}; n_draws={self.n_draws}, n_labels={self.n_labels})"


def satterthwaite_df(vv: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Effective degrees of freedom ``(Σ a_i)² / Σ a_i²`` of ``Σ a_i``, ``a_i = vv_i r_i²``, per
    column of ``r`` (Satterthwaite, 1946). ``inf`` where the variance is zero."""
    a = vv[:, None] * r * r
    num = a.sum(axis=0) ** 2
    den = (a * a).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.inf)


def _hessian(measure: Measure, R: np.ndarray) -> np.ndarray:
    """``∂² g_m / ∂R_j ∂R_k`` by central differences of the measure's exact Jacobian, ``(m, d, d)``.

    Steps are relative to each component (``10⁻⁴ |R_k|``, with a floor for zero components), so
    the truncation error is ``O(10⁻⁸)`` relative for the rational maps of the built-in measures.
    """
    R = np.asarray(R, dtype=float)
    d = R.size
    scale = float(np.max(np.abs(R))) or 1.0
    h = 1e-4 * np.maximum(np.abs(R), 1e-6 * scale)
    cols = []
    for k in range(d):
        e = np.zeros(d)
        e[k] = h[k]
        cols.append((measure.jacobian(R + e) - measure.jacobian(R - e)) / (2.0 * h[k]))
    H = np.stack(cols, axis=-1)  # (m, d, d): H[m, j, k] = ∂J[m, j]/∂R_k
    return 0.5 * (H + np.swapaxes(H, 1, 2))


def ratio_bias(
    losses: np.ndarray, weights: np.ndarray, measure: Measure, risk: np.ndarray | None = None
) -> np.ndarray:
    """Estimated ``O(1/n)`` bias of ``Ĝ = g(R̂)``, ``R̂ = Σ v ℓ / Σ v`` (second-order delta method).

    With self-normalized weights ``w_i = v_i / Σ v`` and ``e_i = ℓ_i − R̂``::

        E[R̂] − R ≈ b_R = −Σ w_i² e_i                      (ratio bias)
        E[Ĝ] − G ≈ Dg(R̂) b_R + ½ Σ_jk H_jk(R̂) S_jk,     S = Σ w_i² e_i e_iᵀ

    The first line is the bias of a ratio of means, ``−Cov(mean of v, mean of v(ℓ − R))`` (Cochran
    (1977), Sec. 6.8, with ``E_q[v] = 1``), estimated from the sample; ``S`` is the covariance of
    ``R̂`` behind Sawade (2012), Eq. 3.14, and ``H`` the Hessian of ``g`` (central differences of
    :meth:`Measure.jacobian`). Subtracting it leaves a bias of order ``1/n²``
    (the Taylor-series correction of Cochran (1977), Sec. 6.8, for a general smooth ``g``).

    Parameters
    ----------
    losses : ndarray (n, d)
    weights : ndarray (n,)
        Importance weights ``p/q``.
    measure : Measure
    risk : ndarray (d,), optional
        ``R̂`` if already computed.

    Returns
    -------
    ndarray (m,)
        The estimated bias of each output (NaN where ``g`` is undefined at ``R̂``).
    """
    L = np.asarray(losses, dtype=float)
    (v,) = intervals.unhuge(np.asarray(weights, dtype=float))
    w = v / v.sum()
    R = (w @ L) if risk is None else np.asarray(risk, dtype=float)
    return _bias(L - R, w, measure, R)


def _bias(e: np.ndarray, w: np.ndarray, measure: Measure, R: np.ndarray) -> np.ndarray:
    """:func:`ratio_bias` from residuals ``e_i`` (rows) and normalized weights ``w``."""
    w2 = w * w
    b_R = -(w2 @ e)
    S = (e * w2[:, None]).T @ e
    with np.errstate(divide="ignore", invalid="ignore"):
        J = measure.jacobian(R)
        H = _hessian(measure, R)
        return delta_method_bias(H, S, jacobian=J, risk_bias=b_R)


def delta_method_bias(
    hessian: np.ndarray,
    covariance: np.ndarray,
    *,
    jacobian: np.ndarray | None = None,
    risk_bias: np.ndarray | None = None,
) -> np.ndarray:
    """Second-order bias of ``g(R̂)``: ``Dg(R) b_R + ½ Σ_jk H_jk(R) S_jk``.

    The Taylor expansion of ``E g(R̂) − g(R)`` to second order (Cochran (1977), Sec. 6.8), with
    ``b_R = E R̂ − R`` the bias of the estimated risks and ``S`` their covariance. The one kernel
    behind :func:`ratio_bias` (importance sampling: ``b_R`` the ratio-of-means bias, ``S`` the
    covariance of Sawade (2012), Eq. 3.14) and the benchmark evaluation's post-stratified
    totals (unbiased, ``b_R = 0``, ``S`` the design variance).

    Parameters
    ----------
    hessian : ndarray (..., m, d, d)
        Hessian of each output of ``g``.
    covariance : ndarray (..., d, d)
        Covariance ``S`` of ``R̂``.
    jacobian : ndarray (..., m, d), optional
        ``Dg(R)``; needed with ``risk_bias``.
    risk_bias : ndarray (..., d), optional
        ``b_R``; default zero (unbiased ``R̂``).

    Returns
    -------
    ndarray (..., m)
    """
    if np.ndim(covariance) == 2:
        out = 0.5 * np.einsum("mjk,jk->m", hessian, covariance)
    else:
        out = 0.5 * np.einsum("...mjk,...jk->...m", hessian, covariance)
    if risk_bias is not None:
        out = (
            jacobian @ risk_bias + out
            if np.ndim(risk_bias) == 1
            else (np.einsum("...md,...d->...m", jacobian, risk_bias) + out)
        )
    return out


#: Fewest draws from which :func:`model_assisted_estimate` tunes its ``λ`` (fewer: ``λ = 1``, the
#: difference estimator): the fitted ``λ`` uses a degree of freedom of the residuals, which a
#: handful of draws cannot spare.
MIN_TUNE_DRAWS = 10


def _distinct_rows(L: np.ndarray, mm: np.ndarray) -> int:
    """How many distinct (loss, expected loss) rows the draws hold, counted up to 3: with two,
    the centred loss and expected loss are proportional and a fitted ``λ`` leaves no residual."""
    rows = np.concatenate([L, mm], axis=1)
    first = rows[:1]
    other = rows[np.any(rows != first, axis=1)]
    if other.size == 0:
        return 1
    return 2 + int(np.any(np.any(other != other[:1], axis=1)))


def _check_draws(L: np.ndarray, v: np.ndarray, name: str = "weights") -> None:
    """Refuse importance weights that are not finite and non-negative, and losses that do not
    match them (a negative weight put an accuracy estimate at 1.43, outside its own interval)."""
    check_finite(v, name)
    if np.any(v < 0):
        i = int(np.flatnonzero(v < 0)[0])
        raise ValueError(f"{name}[{i}] = {float(v[i])!r}; importance weights must be >= 0")
    if v.size and (L.ndim != 2 or L.shape[0] != v.size):
        raise ValueError(
            f"losses must be an (n, d) array with one row per weight; got shape {L.shape} for "
            f"{v.size} weights"
        )
    check_finite(L, "losses")


def _read_pattern(measure: Measure, R: np.ndarray, J: np.ndarray) -> np.ndarray:
    """Which loss columns each output reads, as a 0/1 matrix shaped like ``J = Dg(R̂)``: the
    nonzero entries of ``Dg`` at ``R̂`` and at a point next to it. At ``R̂`` alone an entry can
    vanish by accident — precision's ``∂/∂R2 = −R1/R2²`` with no true positive labeled — and the
    output would then count as read from one column, carried by every draw
    (:func:`~bayes_activeeval.intervals.carrying_sizes`), which collapsed the interval of a
    precision of 0 out of 5 predicted positives to the Kish size of all 1,000 draws."""
    R = np.asarray(R, dtype=float)
    with np.errstate(all="ignore"):
        J2 = np.atleast_2d(np.asarray(measure.jacobian(R + 1e-6 * (1.0 + np.abs(R))), dtype=float))
    J = np.atleast_2d(np.asarray(J, dtype=float))
    if J2.shape != J.shape:
        J2 = J
    return ((np.nan_to_num(J, nan=1.0) != 0) | (np.nan_to_num(J2, nan=1.0) != 0)).astype(float)


def _true_positive_kind(measure: Measure) -> str | None:
    """``"f_beta"``, ``"mcc"`` or ``"fowlkes_mallows"`` for those built-in measures (not bound to
    models), else ``None``."""
    if measure.models is not None or measure.n_outputs != 1:
        return None
    if isinstance(measure, FBeta):
        return "f_beta"
    if (
        measure.name in ("mcc", "fowlkes_mallows")
        and measure.components == (intervals.TP_SUBSTITUTION[measure.name])
    ):
        return measure.name
    return None


def _true_positive_blocks(measure: Measure) -> tuple[str, int] | None:
    """The kind (:func:`_true_positive_kind`) and number of models of an F-beta, MCC or
    Fowlkes-Mallows measure or of a :func:`~bayes_activeeval.measures.stack` of one (its
    :attr:`~bayes_activeeval.measures.Measure.base`; output ``i`` reads the ``i``-th block of
    the loss components); ``None`` for any other measure, a difference of two models or a
    measure bound to models by hand among them."""
    if measure.models is None:
        kind = _true_positive_kind(measure)
        return None if kind is None else (kind, 1)
    kind = None if measure.base is None else _true_positive_kind(measure.base)
    return None if kind is None else (kind, len(measure.models))


def _no_true_positive(
    measure: Measure, R: np.ndarray, v: np.ndarray, L: np.ndarray
) -> NoTruePositive | None:
    """:class:`NoTruePositive` for the outputs of an F-beta, MCC or Fowlkes-Mallows estimate
    (or a stack of one) whose draws of positive weight hold no true positive; ``None`` when
    there is none."""
    found = _true_positive_blocks(measure)
    if found is None:
        return None
    kind, k = found
    d = len(intervals.TP_SUBSTITUTION[kind])
    if R.size != k * d or L.ndim != 2 or L.shape[1] != k * d:
        return None
    blocks = np.asarray(R, dtype=float).reshape(k, d)
    sv = float(v.sum())
    carrying = np.array(
        [float(v[np.any(L[:, i * d : (i + 1) * d] != 0, axis=1)].sum()) / sv for i in range(k)]
    )
    at = (blocks[:, 0] == 0.0) & (carrying > 0)
    if not at.any():
        return None
    return NoTruePositive(kind, at, blocks.copy(), carrying)


def _class_estimates(
    measure: Measure,
    R: np.ndarray,
    resid: np.ndarray,
    var_weights: np.ndarray,
    total: float,
    weights: np.ndarray,
    losses: np.ndarray,
) -> ClassEstimates | None:
    """The per-class ratios of an averaged measure at ``R̂`` (:class:`ClassEstimates`), with the
    estimator's own covariance ``Σ_i var_weights_i ρ_i ρ_iᵀ / total²``, ``ρ_i = Dθ(R̂) resid_i``
    (Sawade (2012), Eq. 3.14), and the Kish sizes of their carrying draws; ``None`` for any
    other measure."""
    with np.errstate(all="ignore"):
        parts = measure.class_parts(R)
        if parts is None:
            return None
        Jp = np.atleast_2d(np.asarray(parts.jacobian, dtype=float))
        J2 = np.atleast_2d(
            np.asarray(measure.class_parts(R + 1e-6 * (1.0 + np.abs(R))).jacobian, dtype=float)
        )
        r = resid @ Jp.T
        cov = (r * var_weights[:, None]).T @ r / total**2
    # the columns each part reads, as _read_pattern: nonzero (or NaN) at R̂ or next to it
    reads = ((np.nan_to_num(Jp, nan=1.0) != 0) | (np.nan_to_num(J2, nan=1.0) != 0)).astype(float)
    kish, wdf = intervals.carrying_sizes(weights, losses, reads)
    return ClassEstimates(
        np.asarray(parts.values, dtype=float),
        cov,
        kish,
        wdf,
        np.atleast_2d(np.asarray(parts.average, dtype=float)),
        parts.bounds,
        *parts.limits(),
        parts.kind,
    )


def weighted_estimate(
    losses: np.ndarray,
    weights: np.ndarray,
    measure: Measure,
    *,
    variance_weights: np.ndarray | None = None,
    n_labels: int | None = None,
    bias_correction: bool = False,
) -> Estimate:
    """The self-normalized importance-weighted estimate from losses and weights.

    ``Ĝ = g(R̂)`` with ``R̂ = Σ v ℓ / Σ v`` (Sawade (2012), Eq. 3.31) — with
    ``bias_correction=True``, minus its estimated ``O(1/n)`` bias (:func:`ratio_bias`); the
    covariance is the delta method of Sawade (2012), Eq. 3.14, for either.

    Parameters
    ----------
    losses : ndarray (n, d)
        ``ℓ(x_i, y_i)`` of the labeled draws.
    weights : ndarray (n,)
        Importance weights ``v_i = p(x_i)/q(x_i)``.
    measure : Measure
    variance_weights : ndarray (n,), optional
        Second factor of the variance weights: ``Cov = Σ v_i v'_i r_i r_iᵀ / (Σ v)²``. Default
        ``v' = v`` (Sawade (2012), Eq. 3.14). Adaptive sampling uses ``v'_i = p(x_i)/q_N(x_i)``
        with the latest proposal (Marchant & Rubinstein (2021), Sec. 3.3.2).
    n_labels : int, optional
        Labels bought (default ``n``).
    bias_correction : bool
        Subtract the second-order bias estimate (:func:`ratio_bias`). The corrected value is
        clipped to the measure's range; ``details["bias"]`` records the correction and
        ``details["uncorrected"]`` the plain ``g(R̂)``. Off by default: the plain estimate has the
        smaller MSE (the bias is about a tenth of a standard error) and equals scikit-learn's
        metric with ``sample_weight=p/q``. Turn it on when estimates will be averaged, or when the
        effective degrees of freedom are small (see ``benchmarks/results/static_estimation.md``).

    Returns
    -------
    Estimate
    """
    L = np.asarray(losses, dtype=float)
    v = np.asarray(weights, dtype=float)
    _check_draws(L, v)
    v, variance_weights = intervals.unhuge(v, variance_weights)
    n = v.size
    m = measure.n_outputs
    sv = v.sum()
    if n == 0 or sv <= 0:
        warnings.warn(
            "no draws with positive weight; the estimate is undefined",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
        nan = np.full(m, np.nan)
        return Estimate(
            nan,
            np.full((m, m), np.nan),
            np.full(L.shape[1] if L.ndim == 2 else 1, np.nan),
            n,
            n_labels if n_labels is not None else n,
            measure.outputs,
            measure.name,
            measure.bounds,
        )
    R = (v @ L) / sv
    with np.errstate(divide="ignore", invalid="ignore"):
        G = measure.g(R)
        J = measure.jacobian(R)
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(J))):
        warnings.warn(
            f"the labeled sample does not define {measure.name!r} yet (R̂={np.round(R, 6).tolist()}); "
            "the estimate is NaN",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
        cov = np.full((m, m), np.nan)
        df = None
    else:
        r = (L - R) @ J.T
        v2 = v if variance_weights is None else np.asarray(variance_weights, dtype=float)
        cov = (r * (v * v2)[:, None]).T @ r / sv**2
        df = satterthwaite_df(v * v2, r)
    parts = None if df is None else _class_estimates(measure, R, L - R, v * v2, sv, v, L)
    kish, wdf = (
        intervals.carrying_sizes(v, L, _read_pattern(measure, R, J))
        if df is not None
        else (None, None)
    )
    n_lab = n if n_labels is None else int(n_labels)
    details: dict[str, Any] = {}
    if bias_correction and df is not None:
        bias = ratio_bias(L, v, measure, R)
        if np.all(np.isfinite(bias)):
            lo, hi = measure.bounds
            details = {"bias": bias, "uncorrected": G}
            G = np.clip(G - bias, lo, hi)
    if parts is not None:
        details["class_parts"] = parts
    gap = None if df is None else _no_true_positive(measure, R, v, L)
    if gap is not None:
        details["no_true_positive"] = gap
    return Estimate(
        G,
        cov,
        R,
        n,
        n_lab,
        measure.outputs,
        measure.name,
        measure.bounds,
        details=details,
        df=df,
        kish=kish,
        weight_df=wdf,
    )


def model_assisted_estimate(
    losses: np.ndarray,
    weights: np.ndarray,
    expected: np.ndarray,
    pool_expected: np.ndarray,
    measure: Measure,
    *,
    tune: bool = True,
    n_labels: int | None = None,
    bias_correction: bool = False,
) -> Estimate:
    """The model-assisted (control-variate) estimate that uses the belief in the estimator too.

    With ``m(x) = E_π[ℓ(x, y)]`` known for every pool item and ``M = Σ_x p(x) m(x)``::

        R̂ = R̂_IS − λ (M̂_IS − M),    R̂_IS = Σ v ℓ / Σ v,    M̂_IS = Σ v m / Σ v

    ``M̂_IS − M`` has mean zero whatever the belief, so ``R̂`` is consistent for any belief and any
    ``λ``; a good belief makes ``ℓ − λ m`` nearly constant and the variance small. ``λ = 1`` is the
    difference estimator (the "model-assisted" estimator of survey sampling; prediction-powered
    inference in machine learning); ``tune=True`` estimates the variance-minimizing ``λ`` from the
    sample (as PPI++ does), which is asymptotically never worse than the IS estimate (``λ = 0``) nor
    the difference estimate (``λ = 1``). The delta-method covariance uses the residuals
    ``Dg(R̂)[(ℓ − R̂_IS) − λ(m − M̂_IS)]`` (Sawade (2012), Eq. 3.14 with the control variate).

    Parameters
    ----------
    losses : ndarray (n, d)
        ``ℓ`` of the labeled draws.
    weights : ndarray (n,)
        Importance weights ``p/q``.
    expected : ndarray (n, d)
        ``m(x_i)``, the belief's expected loss of each draw.
    pool_expected : ndarray (d,)
        ``M``, the belief's expected loss over the pool (exact, no labels needed).
    measure : Measure
    tune : bool
        Estimate ``λ`` (default) or use ``λ = 1``. With fewer than :data:`MIN_TUNE_DRAWS`
        draws, or fewer than three distinct pairs of loss and expected loss, ``λ = 1`` whatever
        ``tune`` says: fitted on two distinct pairs, ``λ`` makes every residual exactly 0 and the
        standard error 0, however often they were drawn (a ranking session showed
        ``ERR 0.8246 ± 0.0000`` for a true 0.497 after two graded queries).
    n_labels : int, optional
        Labels bought (default the number of draws).
    bias_correction : bool
        Subtract the second-order bias of the ratio and of ``g`` (:func:`ratio_bias` applied to the
        residuals ``(ℓ − R̂_IS) − λ(m − M̂_IS)``, ``λ`` held fixed), as :func:`weighted_estimate`
        does (off by default).

    Returns
    -------
    Estimate
        ``estimator="model_assisted"``; ``details["lambda"]`` holds ``λ``.
    """
    L = np.asarray(losses, dtype=float)
    mm = np.asarray(expected, dtype=float)
    v = np.asarray(weights, dtype=float)
    M = np.asarray(pool_expected, dtype=float)
    _check_draws(L, v)
    (v,) = intervals.unhuge(v)
    sv = v.sum()
    if v.size == 0 or sv <= 0:
        est = weighted_estimate(L, v, measure, n_labels=n_labels)
        return Estimate(**{**est.__dict__, "estimator": "model_assisted"})
    R_is = (v @ L) / sv
    M_is = (v @ mm) / sv
    lam = 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(2):  # linearize at the current estimate, re-tune once
            R = R_is - lam * (M_is - M)
            J = measure.jacobian(R)
            if not np.all(np.isfinite(J)):
                break
            el = (L - R_is) @ J.T
            em = (mm - M_is) @ J.T
            if tune and v.size >= MIN_TUNE_DRAWS and _distinct_rows(L, mm) >= 3:
                den = np.sum(v**2 * np.einsum("ij,ij->i", em, em))
                # den = 0: the sample cannot tune λ; keep the difference estimator (λ = 1)
                lam = float(np.sum(v**2 * np.einsum("ij,ij->i", el, em)) / den) if den > 0 else 1.0
        R = R_is - lam * (M_is - M)
        G = measure.g(R)
        J = measure.jacobian(R)
    m_out = measure.n_outputs
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(J))):
        warnings.warn(
            f"the labeled sample does not define {measure.name!r} yet; the estimate is NaN",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
        cov = np.full((m_out, m_out), np.nan)
        df = None
    else:
        e = (L - R_is) - lam * (mm - M_is)
        r = e @ J.T
        cov = (r * (v * v)[:, None]).T @ r / sv**2
        df = satterthwaite_df(v * v, r)
    parts = None if df is None else _class_estimates(measure, R, e, v * v, sv, v, L)
    kish, wdf = (
        intervals.carrying_sizes(v, L, _read_pattern(measure, R, J))
        if df is not None
        else (None, None)
    )
    n = v.size
    n_lab = n if n_labels is None else int(n_labels)
    details: dict[str, Any] = {"lambda": lam}
    if parts is not None:
        details["class_parts"] = parts
    if bias_correction and df is not None:
        # R̂ = R̂_IS − λ(M̂_IS − M) is a ratio of means in the residuals e (λ held fixed)
        bias = _bias(e, v / sv, measure, R)
        if np.all(np.isfinite(bias)):
            details.update(bias=bias, uncorrected=G)
            G = np.clip(G - bias, *measure.bounds)
    return Estimate(
        G,
        cov,
        R,
        n,
        n_lab,
        measure.outputs,
        measure.name,
        measure.bounds,
        "model_assisted",
        details,
        df,
        kish,
        wdf,
    )


def estimate(
    pool,
    measure: str | Measure,
    draws: Draws,
    labels: Any,
    *,
    model: str | None = None,
    oracle: str = "deterministic",
    estimator: str = "ipw",
    belief: Any = None,
    bias_correction: bool = False,
) -> Estimate:
    """Estimate a measure on the pool from labeled draws (Sawade (2012), Algorithm 2 and Eq. 3.31).

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
    draws : Draws
        From :meth:`Proposal.draw`.
    labels : array-like (len(draws),) or mapping
        The label of each draw, aligned with ``draws.indices``; or a mapping ``{item: label}``
        covering every drawn item.
    model : str, optional
        Which model (pools with several models and an unbound measure).
    oracle : {"deterministic", "stochastic"}
        Deterministic: an item has one true label; repeated draws must carry the same label and
        cost one label (they still enter the estimate). Stochastic: each draw has its own label.
    estimator : {"ipw", "model_assisted"}
        ``"ipw"``: the self-normalized importance-weighted estimate (Sawade (2012), Eq. 3.31).
        ``"model_assisted"``: also use the belief as a control variate
        (:func:`model_assisted_estimate`); pair it with
        ``optimal_proposal(..., estimator="model_assisted")``. For the threshold-free measures
        the control variate is the belief's expected influence ``m(x) = E_π ψ_π(x, y)``
        (:func:`~bayes_activeeval.threshold_free.rank_estimate`).
    belief : Belief or array-like, optional
        The belief for ``"model_assisted"`` (default: the pool's models, as in the proposal), and
        for the guarded variance of the threshold-free measures ``"roc_auc"``,
        ``"average_precision"`` and ``"recall@fpr=α"``, which are estimated by
        :func:`~bayes_activeeval.threshold_free.rank_estimate`.
    bias_correction : bool
        Subtract the estimated ``O(1/n)`` bias (:func:`ratio_bias`). Default ``False``: the plain
        ratio estimate of Sawade (2012), Eq. 3.31, which equals scikit-learn's metric on uniform
        draws.

    Returns
    -------
    Estimate
        Value, standard error and intervals; one row per output for vector measures.

    Examples
    --------
    >>> import numpy as np, bayes_activeeval as bae
    >>> rng = np.random.default_rng(0)
    >>> p1 = rng.beta(0.5, 5, 5000); y = rng.random(5000) < p1
    >>> pool = bae.Pool(predictions=(p1 > 0.5).astype(int), probs=p1)
    >>> draws = bae.optimal_proposal(pool, "f1").draw(500, rng=1)
    >>> est = bae.estimate(pool, "f1", draws, y[draws.indices].astype(int))
    >>> lo, hi = est.confidence_interval(0.95)
    """
    if not isinstance(draws, Draws):
        raise TypeError(
            f"draws must be a Draws object (from Proposal.draw), got {type(draws).__name__}"
        )
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    from .threshold_free import rank_estimate, rank_measure  # builds on this module

    if rank_measure(measure) is not None:  # ROC AUC, AP, recall@FPR (influence-function variance)
        if bias_correction:
            raise ValueError(f"threshold-free measure {measure!r}: no bias_correction")
        return rank_estimate(
            pool,
            measure,
            draws,
            labels,
            model=model,
            oracle=oracle,
            belief=belief,
            estimator=estimator,
        )
    m, views = pool.resolve(measure, model)
    y = draw_labels(pool, draws.indices, labels, oracle=oracle)
    L = m.loss(y, views(draws.indices))
    n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
    if estimator == "ipw":
        return weighted_estimate(
            L, draws.weights, m, n_labels=n_labels, bias_correction=bias_correction
        )
    if estimator != "model_assisted":
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    if getattr(pool, "is_lazy", False):  # M as a sum over chunks, m(x) at the drawn items only
        from .lazy import model_assisted_terms

        M, mm = model_assisted_terms(pool, m, model, belief, draws.indices)
    else:
        b = as_belief(pool, belief, pool.models_of(m, model))
        M = intrinsic_risk(pool, m, views, b)
        idx = draws.indices
        mm = b.expect(lambda yy, s: m.loss(yy, views(idx)), idx)
    return model_assisted_estimate(
        L, draws.weights, mm, M, m, n_labels=n_labels, bias_correction=bias_correction
    )


def _item_key(key: Any) -> int:
    """A key of an ``{item: label}`` map as a pool index: a whole number (an integer, a float
    without a fraction, or the text of one); anything else is refused by name."""
    if isinstance(key, (bool, np.bool_)):
        raise ValueError(f"labels has the key {key!r}; keys are item indices (whole numbers)")
    if isinstance(key, (int, np.integer)):
        return int(key)
    try:
        value = float(key)
    except (TypeError, ValueError):
        value = np.nan
    if not (np.isfinite(value) and value == int(value)):
        raise ValueError(f"labels has the key {key!r}; keys are item indices (whole numbers)")
    return int(value)


def draw_labels(
    pool, indices: np.ndarray, labels: Any, *, oracle: str = "deterministic"
) -> np.ndarray:
    """Encoded labels aligned with ``indices`` from an aligned array or an ``{item: label}`` map.

    Under a deterministic oracle, repeated items must carry the same label. Every caller passes
    ``draws.indices``, so this is where draws of another pool are refused.
    """
    indices = check_items(indices, pool.n_items, "draws.indices", ": the draws are of another pool")
    if isinstance(labels, Mapping):
        keys = np.fromiter((_item_key(k) for k in labels.keys()), dtype=np.int64, count=len(labels))
        vals = pool.encode_labels(list(labels.values()))
        order = np.argsort(keys, kind="stable")
        keys, vals = keys[order], vals[order]
        dup = np.flatnonzero(keys[1:] == keys[:-1])
        if dup.size:  # two keys naming one item (3 and "3", 3 and 3.0)
            raise ValueError(
                f"labels names item {int(keys[dup[0]])} twice (as different keys); give one "
                "label per item"
            )
        if keys.size == 0:
            if indices.size:
                raise ValueError(f"labels has no label for drawn item {int(indices[0])}")
            return vals
        pos = np.clip(np.searchsorted(keys, indices), 0, keys.size - 1)
        missing = np.flatnonzero(keys[pos] != indices)
        if missing.size:
            raise ValueError(f"labels has no label for drawn item {int(indices[missing[0]])}")
        return vals[pos]
    y = pool.encode_labels(labels)
    if y.shape[0] != indices.shape[0]:
        raise ValueError(
            f"labels has {y.shape[0]} entries but there are {indices.shape[0]} draws; "
            "give one label per draw or a mapping {item: label}"
        )
    if oracle == "deterministic" and indices.size:
        order = np.argsort(indices, kind="stable")
        si, sy = indices[order], y[order]
        clash = np.flatnonzero((si[1:] == si[:-1]) & (sy[1:] != sy[:-1]))
        if clash.size:
            item = int(si[clash[0]])
            raise ValueError(
                f"item {item} was drawn more than once with different labels; a deterministic "
                "oracle gives one label per item (use oracle='stochastic' if labels are noisy)"
            )
    return y


def difference_estimate(
    losses: np.ndarray,
    weights: np.ndarray,
    expected: np.ndarray,
    pool_expected: np.ndarray,
    measure: Measure,
    *,
    draw_cov: np.ndarray | None = None,
    n_labels: int | None = None,
    model_expected: np.ndarray | None = None,
    model_value: np.ndarray | None = None,
    bias_correction: bool = False,
) -> Estimate:
    """The adaptive model-assisted (difference) estimate: a belief per draw as control variate.

    Draw ``j`` came from the proposal ``q_{t(j)}`` built under the belief ``π_{t(j)}``, with
    ``m_j = E_{π_{t(j)}} ℓ(x_j, y)`` and ``M_j = Σ_x p(x) E_{π_{t(j)}} ℓ(x, y)`` fixed before the
    draw. Each term ``φ_j = M_j + w_j (ℓ_j − m_j)`` then has conditional mean ``R`` given the past
    (``E_q[w(ℓ − m)] = R − M``), whatever the beliefs: the difference estimator (Särndal,
    Swensson & Wretman (1992), Eq. 6.3.1) with the beliefs of Marchant & Rubinstein (2021),
    Algorithm 1. An item whose label the belief knows (``ℓ_j = m_j``) adds ``M_j`` exactly.

    The terms are combined as ``R̂ = Σ_j a_j φ_j / Σ_j a_j`` with ``a_j = 1/(Dg V_j Dgᵀ)``, the
    inverse of the variance each draw's *own* belief predicts for it
    (``V_j = Σ_x p²/q_{t(j)} Cov_{π_{t(j)}} ℓ(x, ·)``, fixed before the draw), in the spirit of
    the inverse-variance weighting of unbiased stage estimates (Cochran (1977), Sec. 5A.13; the
    stage weights of adaptive multiple importance sampling, Cornuet et al. (2012)). The first
    stages, drawn under the prior belief whose control variate is far off, would otherwise weigh
    as much as the last. The weights are *not* fixed before their stage is drawn: ``Dg`` is taken
    at the final estimate (linearized twice, below), so every ``a_j`` depends on all the draws,
    later stages included (on a 300-label F1 run the ratio of stage 1's weight to stage 0's was
    1.3015 from two stages, 1.2961 from three, 1.3020 from six). And even weights fixed before
    each stage would not make ``R̂`` unbiased: with weights that depend on the past,
    ``R̂ − R = Σ a_j (φ_j − R) / Σ a_j`` is a ratio of a martingale to a random sum, which has
    mean zero only asymptotically. So ``R̂`` (and ``Ĝ``) is consistent and asymptotically normal
    (a martingale central limit theorem, Marchant & Rubinstein (2021), Thm. 2), with an ``O(1/n)``
    bias at finite ``n``. Weights from each stage's own fixed Jacobian were tried (a scratch run)
    and biased ``R̂`` clearly, where the final-Jacobian combination showed no detectable bias.
    Without ``draw_cov`` every draw weighs the same. ``Ĝ = g(R̂)``, with the martingale variance
    ``Σ_j a_j² r_j r_jᵀ / (Σ a)²``, ``r_j = Dg(R̂)(φ_j − R̂)`` (Marchant & Rubinstein (2021),
    Sec. 3.3.2).

    **Near a bound of the range.** For accuracy (``ℓ = 1 − e``, ``e`` the error indicator, ``μ``
    the belief's error probability) the terms split as ``φ_j = b_j − w_j e_j`` with
    ``b_j = M_j + w_j(1 − m_j)``, and ``E_q b_j = M_j + Σ_x p(x)(1 − m(x)) = 1`` exactly, so

        1 − R̂ = Σ_j u_j e_j − (b̄ − 1),    u_j = a_j w_j / Σ a,    b̄ = Σ a_j b_j / Σ a:

    a weighted count of the labeled errors plus a control-variate term of known mean zero. Two
    consequences, both measured in ``benchmarks/boundary_coverage.py``:

    - With no labeled error the count is 0 and ``R̂ = b̄`` is the control variate alone
      (``1 − 1e-7`` under a calibrated belief, a sliver of an interval below a truth of 1).
      For a measure whose ``g`` is affine (accuracy, the error rate, their differences), where
      the labeled draws alone put an output on a bound of the range (``g(Σ w ℓ/Σ w)`` at
      ``lo`` or ``hi``: every label correct) that output is put on the bound with zero variance,
      as the importance-weighted estimate is. The event has probability ``→ 0`` for a truth
      inside the range, so the estimate stays consistent.
    - The interval of a weighted count with few events is skewed and its variance estimate
      ``Σ u_j² e_j`` moves with the count: for an affine ``g`` the default interval is Fay &
      Feuer's (1997) gamma interval for a weighted sum of Poisson counts (:func:`~bayes_activeeval.intervals.weighted_gamma`)
      on the distance from the nearer bound, with the martingale variance below and one more
      event on the far side, moment-matched to an event at a draw taken at random: mean
      ``ū = mean(a_j w_j)/Σ a`` (Tiwari, Clegg & Zou (2006)) and, where an error has been
      labeled, variance ``mean((a_j w_j)²)/(Σ a)²`` (``Estimate.event_weight_rms``; with the
      mean weight alone the interval missed on the low side up to 6.2 % of the time at 500-2,000
      labels, ``benchmarks/results/gamma_event_weight.md``); ``Estimate.event_weight`` holds ``ū · Σ_d |Dg_d| / (hi − lo)`` (the largest change
      of ``Ĝ`` one draw's loss vector in ``[0, 1]^d`` can make, on the unit scale; exact for a
      plain risk). With no error it is ``[1 − 3.69 ū, 1]``, the rule of three for weighted counts.
      A ratio such as F1 keeps the clipped estimate and the modified Wilson interval: its event
      weight grows as ``1/R`` with a rare class (``Measure.affine`` is ``False``). So does a
      difference of two models' accuracies, whose outputs read two loss columns: it is no
      count of events, and near 0 it sits mid-range, where one more event at the draws' weight
      stretched one side of the gamma interval about 20 times (it never excluded 0 where the
      Wald interval always did).
    - **Unseen heavy events.** The martingale variance only sees the errors that were drawn. Where
      the stage beliefs think a region of the pool error-free, ``q`` sits at the defensive floor
      there and an error in it weighs up to ``1/δ``; when fewer than about one such error is
      expected in the sample, the runs that drew none have a high estimate *and* a small
      variance, and the interval misses above the truth (the calibration oracle on a pool whose
      model is ten times underconfident covered 0.857 at 2,000 labels without what follows,
      0.990 with it, ``benchmarks/results/boundary_coverage.md``). For an output that is one binary loss column
      (accuracy, the error rate, each of a stack) the gamma interval's far side therefore allows
      at least the *anticipated* variance (Isaki & Fuller (1982): the design variance of the
      same estimate under a working model of the labels) under the models' own probabilities
      (``model_expected``, Sawade (2012), Sec. 4.2.2) with the level of the data: on the unit
      scale, with ``e_j`` the draw's event (a label away from the nearer bound) and ``π_j`` the
      models' probability of it,

          v_a = ω Σ_j u_j² b_j (1 − b_j),   b_j = min(1, (y / y_b) π_j),   u_j = a_j w_j / Σa,

      ``y`` and ``y_b`` the distances of ``Ĝ`` and of the models' own value ``g(R_b)``
      (``model_value``) from that bound: the models' probabilities say *where* errors can be,
      the labels *how many* there are. ``ω`` is the posterior probability of that working model
      against the stage beliefs, from their predictions of the labeled draws' events (equal
      prior odds; each stage belief predicted its draws before their labels were seen, a
      prequential comparison, Dawid (1984), while the working model's one level ``y/y_b`` is
      fitted on all of them): ``ω = expit(log p(e | b) − log p(e | π_t))``. Where
      the models' probabilities say nothing about where errors are (flat), the stage beliefs
      win and ``ω ≈ 0``; where the oracle's map is confidently wrong in a region the models'
      probabilities get right, ``ω ≈ 1``. ``Estimate.anticipated_stderr`` is ``sqrt(v_a)``
      (``details["anticipated"]`` holds ``v_a`` and ``ω``); the standard error stays the
      martingale one.

    Parameters
    ----------
    losses : ndarray (n, d)
        ``ℓ`` of the labeled draws.
    weights : ndarray (n,)
        Importance weights ``p/q`` of the draws.
    expected : ndarray (n, d)
        ``m_j``, each draw's expected loss under its stage's belief.
    pool_expected : ndarray (n, d)
        ``M_j``, the pool mean of the expected loss under each draw's stage belief.
    measure : Measure
    draw_cov : ndarray (n, d, d), optional
        ``V_j``, the covariance of draw ``j``'s term predicted by its stage's belief.
    n_labels : int, optional
        Labels bought (default the number of draws).
    model_expected : ndarray (n, d), optional
        ``E_b ℓ(x_j, ·)``, each draw's expected loss under the models' own probabilities; with
        ``model_value`` the anticipated variance above (affine ``g`` only).
    model_value : ndarray (m,), optional
        ``g(R_b)``, the measure under the models' own probabilities over the pool.
    bias_correction : bool
        Subtract the second-order bias of ``g`` (off by default):
        ``½ Σ_jk ∂²g/∂R_j∂R_k Ŝ_jk`` with ``Ŝ = Σ_j a_j² (φ_j − R̂)(φ_j − R̂)ᵀ / (Σ a)²`` the
        estimate's own covariance of ``R̂`` — the Taylor-series correction of Cochran (1977),
        Sec. 6.8 (:func:`delta_method_bias`, the kernel of :func:`ratio_bias`), with no
        ratio-of-means term: each ``φ_j`` has conditional mean ``R``, so ``R̂`` is a weighted mean
        of unbiased terms, not a ratio of two estimated means. Zero for an affine ``g``. On the
        synthetic pool of ``benchmarks/adaptive_synthetic_coverage.py`` (F1, 1% positives, 400
        runs of the default) the mean error fell from +0.0140 ± 0.0032 to +0.0022 ± 0.0034 at
        300 labels, and from +0.0062 to +0.0025 at 1,000, at a slightly larger RMSE (off by
        default). ``details["bias"]`` records the
        correction and ``details["uncorrected"]`` the clipped plain value.

    Returns
    -------
    Estimate
        ``estimator="difference"``; ``G`` clipped to the measure's range, ``details["raw"]`` the
        unclipped ``g(R̂)`` (before any bias correction), ``details["stage_weights"]`` the
        ``a_j`` normalized to mean 1,
        ``details["at_bound"]`` which outputs the bound rule put on a bound (their value and
        standard error before it in ``details["unsnapped"]``), ``event_weight`` the weight of one
        event for the ``"gamma"`` interval.
    """
    L = np.asarray(losses, dtype=float)
    v = np.asarray(weights, dtype=float)
    phi = np.asarray(pool_expected, dtype=float) + v[:, None] * (
        L - np.asarray(expected, dtype=float)
    )
    n = v.size
    n_lab = n if n_labels is None else int(n_labels)
    m_out = measure.n_outputs
    a = np.ones(n)
    R = phi.mean(axis=0) if n else np.full(measure.dim, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        G = measure.g(R)
        J = measure.jacobian(R)
        if draw_cov is not None and n and np.all(np.isfinite(J)):
            V = np.asarray(draw_cov, dtype=float)
            for _ in range(2):  # weights at the linearization point, re-linearized once
                pred = np.einsum("od,nde,oe->n", J, V, J)
                ok = np.isfinite(pred) & (pred > 0)
                if not ok.any():
                    break
                # a belief that predicts no variance gets the largest weight any draw has
                a = np.empty(n)
                a[ok] = 1.0 / pred[ok]
                a[~ok] = a[ok].max()
                a = a / a.mean()
                R = a @ phi / a.sum()
                G = measure.g(R)
                J = measure.jacobian(R)
                if not np.all(np.isfinite(J)):
                    break
    details: dict[str, Any] = {}
    df = kish = wdf = event_weight = event_weight_rms = anticipated = None
    if n == 0 or not (np.all(np.isfinite(G)) and np.all(np.isfinite(J))):
        warnings.warn(
            f"the labeled sample does not define {measure.name!r} yet; the estimate is NaN",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
        G = np.full(m_out, np.nan)
        cov = np.full((m_out, m_out), np.nan)
    else:
        r = (phi - R) @ J.T
        cov = (r * (a * a)[:, None]).T @ r / a.sum() ** 2
        df = satterthwaite_df(a * a, r)
        kish, wdf = intervals.carrying_sizes(v, L, _read_pattern(measure, R, J))
        parts = _class_estimates(measure, R, phi - R, a * a, a.sum(), v, L)
        details.update(raw=G, stage_weights=a)
        if parts is not None:
            details["class_parts"] = parts
        if bias_correction:
            bias = np.zeros(m_out)  # an affine g has no curvature
            if not measure.affine:
                e = phi - R
                S = (e * (a * a)[:, None]).T @ e / a.sum() ** 2
                with np.errstate(divide="ignore", invalid="ignore"):
                    bias = delta_method_bias(_hessian(measure, R), S)
            if np.all(np.isfinite(bias)):
                details.update(bias=bias, uncorrected=np.clip(G, *measure.bounds))
                G = G - bias
        if model_expected is not None and model_value is not None and measure.affine:
            anticipated, model_weight = _anticipated_variance(
                G,
                R,
                L,
                np.asarray(expected, dtype=float),
                v,
                a,
                J,
                measure,
                model_expected,
                model_value,
            )
            details["anticipated"] = {"variance": anticipated, "model_weight": model_weight}
            if np.all(np.isnan(anticipated)):
                anticipated = None
        G = np.clip(G, *measure.bounds)
        G, cov, event_weight, event_weight_rms = _at_bound(G, cov, L, v, a, J, measure, details)
    return Estimate(
        G,
        cov,
        R,
        n,
        n_lab,
        measure.outputs,
        measure.name,
        measure.bounds,
        "difference",
        details,
        df,
        kish,
        wdf,
        event_weight=event_weight,
        event_weight_rms=event_weight_rms,
        anticipated_stderr=None if anticipated is None else np.sqrt(np.nan_to_num(anticipated)),
    )


def _anticipated_variance(G, R, L, m, v, a, J, measure, model_expected, model_value):
    """The anticipated variance of the difference estimate on the far side of the gamma interval
    (see :func:`difference_estimate`), per output on the measure's scale, and the weight of the
    models' own probabilities against the stage beliefs; NaN where an output is not one binary
    loss column (a difference of two models' risks, a custom loss)."""
    lo, hi = measure.bounds
    width = hi - lo
    n_out = J.shape[0]
    out, weight = np.full(n_out, np.nan), np.full(n_out, np.nan)
    if not np.isfinite(width) or width <= 0:
        return out, weight
    mu = np.asarray(model_expected, dtype=float)
    gv = np.asarray(model_value, dtype=float)
    u = a * v / a.sum()
    for o in range(n_out):
        cols = np.flatnonzero(J[o] != 0)
        if cols.size != 1:
            continue
        c = cols[0]
        coef = J[o, c]
        shift = G[o] - coef * R[c] - lo  # g is affine: G = J R + g(0)

        def unit(values, coef=coef, shift=shift):
            return (coef * values + shift) / width

        z = unit(L[:, c])
        if not np.all(np.isclose(z, 0.0) | np.isclose(z, 1.0)):
            continue
        x = float(np.clip(unit(R[c]), 0.0, 1.0))
        far = 1.0 if x >= 0.5 else 0.0  # the nearer bound; events are draws away from it
        event = np.abs(np.round(z) - far)
        y = min(x, 1.0 - x)
        xb = float(np.clip((gv[o] - lo) / width, 0.0, 1.0))
        yb = min(xb, 1.0 - xb)
        if not yb > 0:
            continue
        p_model = np.clip(y / yb * np.abs(unit(mu[:, c]) - far), 0.0, 1.0)
        p_stage = np.abs(unit(m[:, c]) - far)
        weight[o] = special.expit(
            _bernoulli_loglik(event, p_model) - _bernoulli_loglik(event, p_stage)
        )
        out[o] = weight[o] * float(np.sum(u * u * p_model * (1.0 - p_model))) * width**2
    return out, weight


def _bernoulli_loglik(event, p):
    """``Σ log p(e_j)`` of 0/1 events under probabilities ``p`` (clipped to ``[1e-12, 1 − 1e-12]``)."""
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return float(np.sum(np.where(event > 0, np.log(p), np.log1p(-p))))


def _at_bound(G, cov, L, v, a, J, measure, details):
    """The difference estimate's bound rule and the weight of one event (see
    :func:`difference_estimate`): outputs whose labeled draws alone put the measure on a bound
    are put there with zero variance; ``ū = mean(a_j v_j)/Σ a · Σ_d |Dg_d| / (hi − lo)`` and the
    root-mean-square ``sqrt(mean((a_j v_j)²))/Σ a · Σ_d |Dg_d| / (hi − lo)``."""
    lo, hi = measure.bounds
    width = hi - lo
    if not np.isfinite(width) or v.sum() <= 0 or not measure.affine:
        return G, cov, None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        x_lab = (measure.g((v @ L) / v.sum()) - lo) / width
    top = np.isfinite(x_lab) & (np.abs(1.0 - x_lab) <= intervals.SNAP)
    bottom = np.isfinite(x_lab) & (np.abs(x_lab) <= intervals.SNAP)
    at = top | bottom
    if at.any():
        details["unsnapped"] = {
            "value": G.copy(),
            "stderr": np.sqrt(np.clip(np.diag(cov), 0, None)),
        }
        G = np.where(top, hi, np.where(bottom, lo, G))
        cov = cov.copy()
        cov[at, :] = 0.0
        cov[:, at] = 0.0
    details["at_bound"] = at
    if np.any(np.count_nonzero(J, axis=1) != 1):
        # an output that reads several loss columns (a difference of two models' accuracies)
        # is no weighted count of events: a near-0 difference sits mid-range, and one more
        # event at the draws' weight would stretch one side of its interval many times
        return G, cov, None, None
    # one more event at a draw taken at random: mean weight ū, mean squared weight u₂²
    scale = np.abs(J).sum(axis=1) / width / a.sum()
    return G, cov, float(np.mean(a * v)) * scale, float(np.sqrt(np.mean((a * v) ** 2))) * scale
