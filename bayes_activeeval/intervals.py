"""Confidence intervals for importance-weighted estimates of bounded measures.

The Wald interval ``Ĝ ± z·SE`` (Sawade (2012), Lemma 3.3, Eq. 3.16) collapses where it is needed
most: an accuracy of 0.995 estimated from 50 labels is most often ``1`` with ``SE = 0`` and a
zero-width interval. For a measure with a bounded range ``[lo, hi]`` (accuracy, F1, precision, …)
this module gives score-type intervals on the *effective sample size* of the estimate (Korn &
Graubard (1998); Kott & Carr (1997)):

1. rescale to the unit interval, ``x̂ = (Ĝ − lo)/(hi − lo)``, ``SE_x = SE/(hi − lo)``;
2. the effective sample size ``n* = x̂(1 − x̂)/SE_x²`` — the number of independent Bernoulli
   draws that would give the estimate its standard error. Under passive sampling of a proportion
   the self-normalized estimate has ``SE² = x̂(1 − x̂)/n`` exactly, so ``n* = n``. Where ``x̂`` sits
   at a bound, or ``SE = 0``, ``n*`` is the Kish effective size ``(Σ v)²/Σ v²`` of the draws that
   carry the measure (for a plain risk all draws; for a ratio ``R1/R2`` the draws with a nonzero
   denominator loss);
3. an interval for a binomial proportion with ``n*`` trials and ``x̂·n*`` successes: Wilson's score
   interval; Wilson with the one-sided Poisson bound next to the boundary (Brown, Cai & DasGupta
   (2001), Sec. 4.1.1, "modified Wilson"); Jeffreys' equal-tailed interval (with the same paper's
   boundary modification); or Clopper-Pearson;
4. mapped back to ``[lo, hi]``.

The adaptive model-assisted (difference) estimate has its own default, ``"gamma"``: the gamma
interval for a weighted sum of Poisson counts (Fay & Feuer (1997); Tiwari, Clegg & Zou (2006) for
the modified increment) applied to the distance of the estimate from the nearer bound — for
accuracy, the weighted count of labeled errors (:func:`weighted_gamma`).

Balanced accuracy and the macro averages (means of per-class ratios) combine one such interval
per class by MOVER (Zou & Donner (2008); :func:`mover`): their delta-method variance loses every
class whose ratio sits at 0 or 1 (six labeled positives, all found), and under class skew that is
the class the interval most needs.

F1, F-beta, MCC and the Fowlkes-Mallows index of a sample with no labeled true positive get their
upper limit from the true positives' share of the carrying draws (:func:`true_positive_substitution`,
the substitution method of Daly (1998)): their delta-method standard error has no term for the
true-positive count there.

The functions take arrays and broadcast, so a Monte Carlo study evaluates all repetitions at once
(``benchmarks/boundary_coverage.py``). :func:`interval` is the one entry point; the per-method
functions on the unit scale are public for tests and studies.

References
----------
Daly, L. E. (1998). Confidence limits made easy: interval estimation using a substitution method.
*American Journal of Epidemiology* 147(8), 783-790.

Fay, M. P. & Feuer, E. J. (1997). Confidence intervals for directly standardized rates: a method
based on the gamma distribution. *Statistics in Medicine* 16(7), 791-801.

Brown, L. D., Cai, T. T. & DasGupta, A. (2001). Interval estimation for a binomial proportion.
*Statistical Science* 16(2), 101-133.

Korn, E. L. & Graubard, B. I. (1998). Confidence intervals for proportions with small expected
number of positive counts estimated from survey data. *Survey Methodology* 24(2), 193-201.

Kott, P. S. & Carr, D. A. (1997). Developing an estimation strategy for a pesticide data program.
*Journal of Official Statistics* 13(4), 367-383.

Tiwari, R. C., Clegg, L. X. & Zou, Z. (2006). Efficient interval estimation for age-adjusted
cancer rates. *Statistical Methods in Medical Research* 15(6), 547-569.

Newcombe, R. G. (1998). Improved confidence intervals for the difference between binomial
proportions based on paired data. *Statistics in Medicine* 17(22), 2635-2650.

Zou, G. Y. & Donner, A. (2008). Construction of confidence limits about effect measures: a
general approach. *Statistics in Medicine* 27(10), 1693-1702.

Zou, G. Y., Huang, W. & Zhang, X. (2009). A note on confidence interval estimation for a linear
function of binomial proportions. *Computational Statistics & Data Analysis* 53(4), 1080-1085.

Newcombe, R. G. (2013). *Confidence Intervals for Proportions and Related Measures of Effect
Size*. CRC Press, Ch. 7 (square-and-add).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special, stats

from ._validation import check_level

__all__ = [
    "BOUNDED_METHODS",
    "DEFAULT_METHOD",
    "METHODS",
    "TP_SUBSTITUTION",
    "carrying_kish",
    "carrying_sizes",
    "clopper_pearson",
    "effective_size",
    "gamma_unit",
    "interval",
    "jeffreys",
    "modified_wilson",
    "mover",
    "newcombe_difference",
    "true_positive_substitution",
    "weighted_gamma",
    "wilson",
]

#: Methods that need a bounded range (they fall back to ``"t"`` on an unbounded measure).
BOUNDED_METHODS = ("wilson", "modified_wilson", "jeffreys", "clopper_pearson")
#: Every method :func:`interval` knows.
METHODS = ("t", "wald", "logit", *BOUNDED_METHODS, "gamma")
#: The default of every interval in the package (chosen by ``benchmarks/boundary_coverage.py``).
DEFAULT_METHOD = "modified_wilson"


def _z(level: float) -> float:
    return float(stats.norm.ppf(0.5 + check_level(level) / 2))


# ------------------------------------------------------------------------------------------------
# unit-scale intervals for a proportion with n trials and x̂·n successes
# ------------------------------------------------------------------------------------------------
def wilson(x: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval for a proportion ``x`` observed in ``n`` (effective) trials.

    The set of ``p`` with ``|x − p| ≤ z sqrt(p(1 − p)/n)``::

        (x + z²/2n ± z sqrt(x(1 − x)/n + z²/4n²)) / (1 + z²/n)

    (Brown, Cai & DasGupta (2001), Eq. 4). ``n`` may be fractional (an effective sample size). It
    never has zero width for ``n < ∞`` and always lies inside ``[0, 1]``.

    Parameters
    ----------
    x : float or array-like
        The observed proportion (clipped to [0, 1]).
    n : float or array-like
        The number of (effective, possibly fractional) trials.
    level : float, optional
        Confidence level (default 0.95).

    Returns
    -------
    low, high : ndarray
        The interval's ends, inside [0, 1] (broadcast over ``x`` and ``n``).
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    n = np.asarray(n, dtype=float)
    z2 = _z(level) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        den = 1.0 + z2 / n
        centre = (x + z2 / (2 * n)) / den
        half = np.sqrt(z2) / den * np.sqrt(x * (1 - x) / n + z2 / (4 * n * n))
    # at a bound the interval reaches it exactly (not 1 − 1e-16: the truth may sit there)
    low = np.where(x <= 0.0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(x >= 1.0, 1.0, np.clip(centre + half, 0.0, 1.0))
    return low, high


def _poisson_kstar(n: np.ndarray) -> np.ndarray:
    """Effective counts up to which the Poisson bound replaces Wilson's (BCD (2001), Sec. 4.1.1:
    ``x* = 2`` for ``n ≤ 50``, ``3`` above; the dip is a Poisson effect, so we keep ``3`` for every
    larger ``n``)."""
    return np.where(n <= 50, 2.0, 3.0)


def modified_wilson(x: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's interval with the one-sided Poisson bound next to the boundary.

    Wilson's coverage dips to about 0.84 where ``n·p ≈ 0.1-0.2`` (one observed failure puts the
    lower bound above the truth). Brown, Cai & DasGupta (2001), Sec. 4.1.1, replace the lower bound
    for ``x = 1, …, x*`` successes by the one-sided Poisson bound ``½χ²_{2x, α}/n``
    (``x* = 2`` for ``n ≤ 50``, ``3`` for ``n ≤ 100``), and symmetrically the upper bound for
    ``n − x* ≤ x ≤ n − 1``. Here the counts are effective counts ``k = x·n`` (not integers), so
    the bound is ``Γ⁻¹(α; k)/n`` (``½χ²_{2k,α} = Γ⁻¹(α; k)``, the lower ``α`` quantile of a
    gamma with shape ``k``), applied for ``0 < k ≤ x*``, never making the interval narrower, and
    ``x* = 3`` for every ``n > 50``: the dip is a Poisson effect and does not fade with ``n``.

    Parameters
    ----------
    x : float or array-like
        The observed proportion (clipped to [0, 1]).
    n : float or array-like
        The number of (effective, possibly fractional) trials.
    level : float, optional
        Confidence level (default 0.95).

    Returns
    -------
    low, high : ndarray
        The interval's ends, inside [0, 1] (broadcast over ``x`` and ``n``).
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    n = np.asarray(n, dtype=float)
    lo, hi = wilson(x, n, level)
    alpha = 1.0 - level
    kstar = _poisson_kstar(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = x * n
        kk = (1.0 - x) * n
        plo = stats.gamma.ppf(alpha, np.where(k > 0, k, 1.0)) / n
        phi = 1.0 - stats.gamma.ppf(alpha, np.where(kk > 0, kk, 1.0)) / n
    # a tolerance: 200·(1 − 0.985) is 3.0000000000000027 in floating point
    kstar = kstar + 1e-9
    lo = np.where((k > 0) & (k <= kstar), np.minimum(lo, plo), lo)
    hi = np.where((kk > 0) & (kk <= kstar), np.maximum(hi, phi), hi)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def jeffreys(x: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Jeffreys' equal-tailed interval, the ``Beta(k + ½, n − k + ½)`` quantiles, ``k = x·n``.

    With the boundary modification of Brown, Cai & DasGupta (2001), Sec. 4.1.2: the lower bound is
    0 for ``k ≤ 1`` and the upper bound 1 for ``k ≥ n − 1``.

    Parameters
    ----------
    x : float or array-like
        The observed proportion (clipped to [0, 1]).
    n : float or array-like
        The number of (effective, possibly fractional) trials.
    level : float, optional
        Confidence level (default 0.95).

    Returns
    -------
    low, high : ndarray
        The interval's ends, inside [0, 1] (broadcast over ``x`` and ``n``).
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    n = np.asarray(n, dtype=float)
    a = (1.0 - check_level(level)) / 2
    k = x * n
    lo = special.betaincinv(k + 0.5, n - k + 0.5, a)
    hi = special.betaincinv(k + 0.5, n - k + 0.5, 1.0 - a)
    lo = np.where(k <= 1.0, 0.0, lo)
    hi = np.where(k >= n - 1.0, 1.0, hi)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def clopper_pearson(x: Any, n: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson's interval with ``k = x·n`` effective successes: ``Beta(k, n − k + 1)`` and
    ``Beta(k + 1, n − k)`` quantiles (Korn & Graubard (1998), Eq. 3, with their effective ``n``).

    Parameters
    ----------
    x : float or array-like
        The observed proportion (clipped to [0, 1]).
    n : float or array-like
        The number of (effective, possibly fractional) trials.
    level : float, optional
        Confidence level (default 0.95).

    Returns
    -------
    low, high : ndarray
        The interval's ends, inside [0, 1] (broadcast over ``x`` and ``n``).
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    n = np.asarray(n, dtype=float)
    a = (1.0 - check_level(level)) / 2
    k = x * n
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, special.betaincinv(np.maximum(k, 1e-300), n - k + 1.0, a), 0.0)
        hi = np.where(k < n, special.betaincinv(k + 1.0, np.maximum(n - k, 1e-300), 1.0 - a), 1.0)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def weighted_gamma(
    y: Any,
    var: Any,
    event_weight: Any,
    level: float = 0.95,
    event_weight_rms: Any = None,
    far_var: Any = None,
):
    """Gamma interval for a weighted sum of Poisson counts (Fay & Feuer (1997)).

    ``Y = Σ u_i X_i`` with independent Poisson ``X_i``, observed ``y`` with variance estimate
    ``v = Σ u_i² x_i``. Fay & Feuer approximate the distribution of ``Y`` by a gamma with the
    observed mean and variance and bound it by the gamma quantiles (``G⁻¹(p; shape, scale)``)::

        L = G⁻¹(α/2; y²/v, v/y)                                   (L = 0 where y = 0)
        U = G⁻¹(1 − α/2; (y + u)²/(v' + u₂²), (v' + u₂²)/(y + u)),   v' = max(v, v_a)

    The upper bound adds one more event of weight ``u`` — their ``u = u₂ = max u_i``; Tiwari,
    Clegg & Zou (2006) use the mean weight, which keeps coverage near nominal where the maximum
    is far above the typical weight. ``event_weight_rms`` (``u₂``, default ``u``) moment-matches
    the added event instead: one more event at a draw taken at random adds ``ū = mean u_i`` to
    the count and ``mean u_i²`` to the variance, which the mean weight alone understates when the
    weights vary — with it, the adaptive difference estimate's interval missed on the low side
    up to 6.2 % of the time at 500-2,000 labels (``benchmarks/results/gamma_event_weight.md``). Where
    ``y = 0`` the increment is ``(u, u²)`` whatever ``u₂``: the upper bound ``u·log(2/α)`` is the
    rule of three (``3.69 u`` at 95 %, two-sided) for weighted counts, the exact Poisson bound
    when events fall like the draws. With equal weights it is Garwood's exact Poisson interval
    (``y/u`` events). It never has zero width for ``u > 0``. ``far_var`` (``v_a``, default 0)
    is a variance the far side must at least allow where ``y > 0``: the adaptive difference
    estimate's anticipated variance, against heavy events its sample has not seen
    (:func:`~bayes_activeeval.estimators.difference_estimate`).

    Parameters
    ----------
    y : array-like
        The weighted count (``>= 0``; clipped).
    var : array-like
        Its variance estimate ``v`` (``>= 0``; ``L = y`` where ``y > 0 = v``).
    event_weight : array-like
        ``u``, the weight one more event would carry (``> 0``).
    level : float
        Confidence level.
    event_weight_rms : array-like, optional
        ``u₂``, the root-mean-square weight of one more event (its variance increment is
        ``u₂²``; default ``u``).
    far_var : array-like, optional
        ``v_a``, a lower bound on the variance of the far side where ``y > 0`` (default 0).

    Returns
    -------
    (low, high) : ndarray
    """
    y = np.clip(np.asarray(y, dtype=float), 0.0, None)
    v = np.clip(np.asarray(var, dtype=float), 0.0, None)
    vf = v if far_var is None else np.maximum(v, np.nan_to_num(np.asarray(far_var, dtype=float)))
    u = np.asarray(event_weight, dtype=float)
    u2 = u if event_weight_rms is None else np.asarray(event_weight_rms, dtype=float)
    a = (1.0 - check_level(level)) / 2
    pos = (y > 0) & (v > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(pos, y * y / np.where(pos, v, 1.0), 1.0)
        scale = np.where(pos, v / np.where(pos, y, 1.0), 1.0)
        low = np.where(pos, stats.gamma.ppf(a, shape, scale=scale), y)
        yu, vu = y + u, np.where(y > 0, vf + u2 * u2, v + u * u)
        high = stats.gamma.ppf(1.0 - a, yu * yu / vu, scale=vu / yu)
    return low, np.maximum(high, y)


def gamma_unit(
    x: Any,
    var: Any,
    event_weight: Any,
    level: float = 0.95,
    event_weight_rms: Any = None,
    far_var: Any = None,
):
    """:func:`weighted_gamma` on the unit scale (Fay & Feuer (1997), applied to the nearer bound).

    ``y = min(x, 1 − x)`` is the distance of the estimate from the nearer bound — the weighted
    count of the rare outcome (for the adaptive difference estimate of accuracy exactly the
    weighted count of labeled errors, plus a control variate of mean zero; see
    :func:`~bayes_activeeval.estimators.difference_estimate`). Its gamma interval ``[L, U]`` is
    mapped back: ``[1 − U, 1 − L]`` for ``x ≥ 1/2``, ``[L, U]`` below, clipped to ``[0, 1]``.

    Parameters
    ----------
    x : array-like
        The estimate on the unit scale.
    var : array-like
        Its variance on the unit scale (``SE_x²``).
    event_weight : array-like
        The weight of one more event on the unit scale (``ū``; the difference estimate's
        ``Estimate.event_weight``, the mean weight of its draws).
    level : float
        Confidence level.
    event_weight_rms : array-like, optional
        Its root-mean-square weight (``Estimate.event_weight_rms``; default ``ū``).
    far_var : array-like, optional
        The variance the far side must at least allow (``Estimate.anticipated_stderr²`` on the
        unit scale; :func:`weighted_gamma`).

    Returns
    -------
    (low, high) : ndarray
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    upper = x >= 0.5
    y = np.where(upper, 1.0 - x, x)
    lo_y, hi_y = weighted_gamma(y, var, event_weight, level, event_weight_rms, far_var)
    low = np.where(upper, 1.0 - hi_y, lo_y)
    high = np.where(upper, 1.0 - lo_y, hi_y)
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


_UNIT = {
    "wilson": wilson,
    "modified_wilson": modified_wilson,
    "jeffreys": jeffreys,
    "clopper_pearson": clopper_pearson,
}


# ------------------------------------------------------------------------------------------------
# effective sample size
# ------------------------------------------------------------------------------------------------
#: Distance (on the unit scale) below which an estimate counts as sitting at a bound: the
#: self-normalized ratio of a sample without a single error is ``1 − 1e-16`` in floating point,
#: and taking that at face value gives a tiny standard error and an interval that misses 1.
SNAP = 1e-12


def _snap(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) <= SNAP, 0.0, np.where(np.abs(1.0 - x) <= SNAP, 1.0, x))


#: Importance weights above this are divided by their maximum before the sums: ``(Σ v)²`` and
#: ``Σ v⁴`` overflow from about ``1e77`` (an ``OverflowError`` at ``1e160``, NaN at ``1e308``),
#: while every self-normalized quantity is unchanged by rescaling. Ordinary weights are far
#: below it and take the unscaled path, bit for bit.
HUGE_WEIGHT = 1e50


def unhuge(v: np.ndarray, *others: np.ndarray | None) -> tuple:
    """``v`` and ``others`` divided by ``max(v)`` when that exceeds :data:`HUGE_WEIGHT`, else
    unchanged (the same objects): the self-normalized estimate (Sawade (2012), Eq. 3.31), its
    variance (Eq. 3.14) and the effective sizes do not change when every weight is scaled.

    Parameters
    ----------
    v : ndarray
        Importance weights ``p/q``.
    *others : ndarray or None
        Arrays to divide by the same factor (e.g. variance weights).

    Returns
    -------
    tuple
        ``(v, *others)``, rescaled or as given.
    """
    top = float(v.max()) if v.size else 0.0
    if not top > HUGE_WEIGHT:
        return (v, *others)
    return (v / top, *(None if o is None else np.asarray(o, dtype=float) / top for o in others))


def carrying_kish(weights: Any, losses: Any, jacobian: Any) -> np.ndarray:
    """Kish effective size ``(Σ v)²/Σ v²`` of the draws that carry each output of a measure
    (see :func:`carrying_sizes`, which also gives the degrees of freedom of their weights).

    Parameters
    ----------
    weights : ndarray (n,)
        Importance weights ``v = p/q`` of the draws.
    losses : ndarray (n, d)
        The draws' loss vectors.
    jacobian : ndarray (m, d)
        ``Dg(R̂)``; the components output ``j`` reads are the nonzero entries of row ``j``.

    Returns
    -------
    ndarray (m,)
        The Kish effective size of each output's carrying draws (0 when none carries it).
    """
    return carrying_sizes(weights, losses, jacobian)[0]


def carrying_sizes(weights: Any, losses: Any, jacobian: Any) -> tuple[np.ndarray, np.ndarray]:
    """Kish effective size ``(Σ v)²/Σ v²`` of the draws that carry each output of a measure, and
    the degrees of freedom ``ν`` of their weights' heterogeneity, ``1/ν = Σ v⁴/(Σ v²)² − 1/m``
    (``m`` carrying draws).

    An output that reads one loss component (a plain risk: accuracy, error rate) is carried by
    every draw. One that reads several (a ratio ``R1/R2`` such as precision, recall or F1) is
    carried by the draws with a nonzero loss in the components it reads — for F1 the items
    predicted or labeled positive; the others enter neither numerator nor denominator.

    Parameters
    ----------
    weights : ndarray (n,)
        Importance weights ``v = p/q``.
    losses : ndarray (n, d)
    jacobian : ndarray (m, d)
        ``Dg(R̂)``; the components output ``j`` reads are the nonzero entries of row ``j``.

    ``(Σ v²)²/Σ v⁴`` is the Satterthwaite degrees of freedom of a variance ``Σ v_i² r_i²`` whose
    residuals ``r_i`` were all alike: how many draws the *weights* let carry the variance — small
    when a few heavily weighted draws do (false negatives of recall under extreme class skew). The
    design effect ``n*`` is then uncertain, which Korn & Graubard's (1998) ``n*(z/t_ν)²``
    adjustment is for. With equal weights (passive sampling) there is nothing to estimate —
    ``n* = n`` exactly, however rare the errors, and the score interval's null variance accounts
    for the rarity — so ``ν`` counts only the excess over equal weights: ``ν = ∞`` for equal
    weights, ``ν ≈ (Σ v²)²/Σ v⁴`` when a few weights dominate.

    Returns
    -------
    kish, weight_df : ndarray (m,)
    """
    (v,) = unhuge(np.asarray(weights, dtype=float))  # both sizes are scale-invariant
    L = np.asarray(losses, dtype=float)
    J = np.atleast_2d(np.asarray(jacobian, dtype=float))
    kish = np.empty(J.shape[0])
    wdf = np.empty(J.shape[0])
    for j, row in enumerate(J):
        reads = np.flatnonzero(np.nan_to_num(row, nan=1.0) != 0)
        if reads.size <= 1 or L.ndim != 2:
            w = v
        else:
            w = v[np.any(L[:, reads] != 0, axis=1)]
        w2 = w * w
        s2 = float(np.sum(w2))
        kish[j] = float(np.sum(w)) ** 2 / s2 if s2 > 0 else 0.0
        s4 = float(np.sum(w2 * w2))
        excess = s4 / (s2 * s2) - 1.0 / w.size if s4 > 0 else 0.0
        wdf[j] = 1.0 / excess if excess > 1e-12 else np.inf
    return kish, wdf


def effective_size(
    value: Any,
    stderr: Any,
    bounds: tuple[float, float],
    kish: Any,
    *,
    df: Any = None,
    level: float = 0.95,
) -> np.ndarray:
    """Effective sample size ``n*`` of an estimate of a bounded measure (Korn & Graubard (1998)).

    ``n* = x̂(1 − x̂)/SE_x²`` on the unit scale ``x = (G − lo)/(hi − lo)`` (the ``n*`` of Korn &
    Graubard (1998), Eq. 3); ``kish`` where ``x̂`` is at a bound or ``SE = 0`` (see
    :func:`carrying_kish`), and at most ``kish`` where fewer than one effective event lies
    between ``x̂`` and the nearer bound (``min(x̂, 1 − x̂)·n* < 1``): there the variance comes
    from less than one event — one event of weight ``u`` (normalized) gives ``n* ≈ 1/u``, about
    ``10¹²`` for an estimate just above :data:`SNAP`, whose interval then had almost no width
    while an estimate at ``SNAP`` got the Kish size — and the draws carry no more than their Kish
    size. The two sides of ``SNAP`` meet where the standard error vanishes with the distance to
    the bound (the empirical variance: one light event). They do not where it stays large: the
    rank measures' guarded variance keeps the belief's part at the bound, so an estimate just
    inside gets ``n*`` near 0 and an interval reaching the far bound, while one at ``SNAP`` gets
    the Kish size (an AUC of ``1 − 10⁻⁷`` with a guarded ``SE`` of 0.06 against an AUC of 1 with
    a Kish size of 340). Raising ``n*`` towards the Kish size there was measured and rejected
    (``docs/threshold-free.md``). With ``df`` (degrees of freedom
    of the variance estimate), the Korn & Graubard (1998) adjustment ``n* (z/t_df)²`` shrinks it
    so that the interval widens as a t interval would — where ``n*`` comes from the variance; the
    Kish size at a bound is a known function of the weights and is not adjusted.

    Parameters
    ----------
    value : float or array-like
        The estimate ``Ĝ``.
    stderr : float or array-like
        Its standard error, on the measure's scale.
    bounds : tuple of float
        ``(lo, hi)``, the measure's (finite) range.
    kish : float or array-like
        The Kish effective size used at a bound or where ``SE = 0``
        (:func:`carrying_kish`).
    df : float or array-like, optional
        Degrees of freedom of the variance estimate (floored at 1); ``None`` (the default) skips
        the adjustment, as does an infinite value.
    level : float, optional
        The confidence level of the ``z/t_df`` adjustment (default 0.95).

    Returns
    -------
    ndarray
        ``n*``, broadcast over the inputs.
    """
    lo, hi = bounds
    width = hi - lo
    x = _snap((np.asarray(value, dtype=float) - lo) / width)
    se = np.asarray(stderr, dtype=float) / width
    inside = (x > 0) & (x < 1) & (se > 0)
    kish = np.asarray(kish, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(inside, x * (1 - x) / (se * se), kish)
        # fewer than one effective event on the near side: the variance rests on less than one
        # event (one light event gives n* ≈ 1/weight, 1e12 for x just above SNAP, where x at
        # SNAP gets the Kish size); the sample carries no more than the Kish size there
        capped = inside & (np.minimum(x, 1 - x) * n < 1.0) & (kish < n)
        n = np.where(capped, kish, n)
    if df is not None:
        # only where n* was estimated from the variance: the Kish size (at a bound, or the cap
        # above) is a known function of the weights, and has no estimation error to widen for
        d = np.maximum(np.asarray(df, dtype=float), 1.0)
        ratio = np.where(np.isfinite(d), _z(level) / stats.t.ppf(0.5 + level / 2, d), 1.0)
        n = np.where(inside & ~capped, n * ratio**2, n)
    return n


# ------------------------------------------------------------------------------------------------
# the one entry point
# ------------------------------------------------------------------------------------------------
def interval(
    value: Any,
    stderr: Any,
    bounds: tuple[float, float] = (-np.inf, np.inf),
    level: float = 0.95,
    method: str = DEFAULT_METHOD,
    *,
    df: Any = None,
    kish: Any = None,
    n_df: Any = None,
    n_max: Any = None,
    event_weight: Any = None,
    event_weight_rms: Any = None,
    anticipated_stderr: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided confidence interval for an estimate ``value ± stderr`` of a measure.

    Parameters
    ----------
    value, stderr : array-like
        The estimate ``Ĝ`` and its delta-method standard error (Sawade (2012), Eq. 3.14).
    bounds : (float, float)
        The range of the measure (``Measure.bounds``).
    level : float
        Confidence level.
    method : str
        - ``"wald"``: ``Ĝ ± z SE`` (Sawade (2012), Lemma 3.3, Eq. 3.16), clipped to ``bounds``.
        - ``"t"``: ``Ĝ ± t_{ν−1} SE`` with ``ν = df`` the Satterthwaite degrees of freedom of the
          variance estimate, clipped to ``bounds``.
        - ``"logit"``: the Wald interval on ``logit((G − lo)/(hi − lo))`` (``log(G − lo)`` for a
          range bounded on one side), mapped back; the clipped Wald interval at a bound.
        - ``"wilson"``, ``"modified_wilson"``, ``"jeffreys"``, ``"clopper_pearson"``: the interval
          for a proportion with the effective sample size ``n*`` (:func:`effective_size`,
          Korn & Graubard (1998)) — :func:`wilson`, :func:`modified_wilson` (Brown, Cai &
          DasGupta (2001), Sec. 4.1.1), :func:`jeffreys`, :func:`clopper_pearson` — on the unit
          scale of the range. They need a bounded range; an unbounded one gets ``"t"``.
        - ``"gamma"``: Fay & Feuer's (1997) gamma interval for a weighted count
          (:func:`weighted_gamma`) applied to the distance of ``x̂ = (Ĝ − lo)/(hi − lo)`` from the
          nearer bound, with variance ``SE_x²`` and ``event_weight`` the weight of one more
          event (:func:`gamma_unit`); the default of the adaptive difference estimate. Needs a
          bounded range (an unbounded one gets ``"t"``).
    df : array-like, optional
        Satterthwaite degrees of freedom (``"t"``; default ``∞``).
    kish : array-like, optional
        Kish effective size of the draws that carry the measure (:func:`carrying_kish`), the
        effective size at a bound. Required by the proportion methods.
    n_df : array-like, optional
        Degrees of freedom for the Korn & Graubard (1998) adjustment ``n*(z/t)²`` of the
        proportion methods (default none; ``n − 1`` with ``n`` draws is their design df).
    n_max : array-like, optional
        Cap on ``n*`` (Korn & Graubard (1998) cap it at the sample size; default no cap, since a
        good proposal makes ``n*`` larger than the number of draws on purpose).
    event_weight : array-like, optional
        ``"gamma"``: the weight one labeled event carries on the unit scale (default
        ``1/kish``).
    event_weight_rms : array-like, optional
        ``"gamma"``: its root-mean-square weight, whose square is the variance one more event
        adds (:func:`weighted_gamma`; default ``event_weight``).
    anticipated_stderr : array-like, optional
        ``"gamma"``: the standard error the far side must at least allow
        (``Estimate.anticipated_stderr``; default none).

    Returns
    -------
    (low, high) : ndarray
        Always inside ``bounds``. A proportion-method interval has positive width whenever some
        draw carries the measure; with none it is the whole range.
    """
    level = check_level(level)
    se = np.asarray(stderr, dtype=float)
    if np.any(se < 0):
        raise ValueError(f"stderr must be >= 0, got {float(se[se < 0].ravel()[0])!r}")
    low, high = _interval(
        value, se, bounds, level, method, df, kish, n_df, n_max, event_weight, event_weight_rms,
        anticipated_stderr,
    )  # fmt: skip
    # an undefined (NaN) standard error gives an undefined interval (the proportion methods
    # would otherwise read it as 0 and fall back to the Kish size); an infinite one the range
    undefined = np.isnan(se)
    if undefined.any():
        low = np.where(undefined, np.nan, low)
        high = np.where(undefined, np.nan, high)
    return low, high


def _interval(
    value, se, bounds, level, method, df, kish, n_df, n_max, event_weight, event_weight_rms,
    anticipated_stderr,
):  # fmt: skip
    lo, hi = (float(b) for b in bounds)
    G = np.asarray(value, dtype=float)
    bounded = np.isfinite(lo) and np.isfinite(hi)
    if (method in BOUNDED_METHODS or method == "gamma") and not bounded:
        method = "t"
    if method == "wald" or method == "t":
        if method == "wald":
            crit = _z(level)
        else:
            nu = np.inf if df is None else np.asarray(df, dtype=float)
            crit = stats.t.ppf(0.5 + level / 2, np.maximum(nu - 1.0, 1.0))
        half = crit * se
        return np.clip(G - half, lo, hi), np.clip(G + half, lo, hi)
    if method == "logit":
        return _logit(G, se, lo, hi, level)
    if method == "gamma":
        if event_weight is None:
            if kish is None:
                raise ValueError("method='gamma' needs event_weight= (or kish=)")
            with np.errstate(divide="ignore"):
                event_weight = 1.0 / np.asarray(kish, dtype=float)
        x = _snap((G - lo) / (hi - lo))
        ul, uh = gamma_unit(
            np.where(np.isfinite(x), x, 0.5),
            (se / (hi - lo)) ** 2,
            event_weight,
            level,
            event_weight_rms,
            None if anticipated_stderr is None else (anticipated_stderr / (hi - lo)) ** 2,
        )
        ok = np.isfinite(x) & np.isfinite(ul) & np.isfinite(uh)
        low = np.where(ok, lo + (hi - lo) * ul, np.where(np.isfinite(x), lo, np.nan))
        high = np.where(ok, lo + (hi - lo) * uh, np.where(np.isfinite(x), hi, np.nan))
        return low, high
    if method not in _UNIT:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if kish is None:
        raise ValueError(f"method={method!r} needs kish= (the Kish size of the carrying draws)")
    n = effective_size(G, se, (lo, hi), kish, df=n_df, level=level)
    if n_max is not None:
        n = np.minimum(n, np.asarray(n_max, dtype=float))
    x = _snap((G - lo) / (hi - lo))
    ok = np.isfinite(x) & (n > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ul, uh = _UNIT[method](np.where(ok, x, 0.5), np.where(ok, n, 1.0), level)
    low = np.where(ok, lo + (hi - lo) * ul, np.where(np.isfinite(x), lo, np.nan))
    high = np.where(ok, lo + (hi - lo) * uh, np.where(np.isfinite(x), hi, np.nan))
    return low, high


def _logit(G, se, lo, hi, level):
    z = _z(level)
    if not np.isfinite(lo) and not np.isfinite(hi):
        raise ValueError("method='logit' needs a measure with a bounded range")
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.isfinite(lo) and np.isfinite(hi):
            x = (G - lo) / (hi - lo)
            t, st = np.log(x / (1 - x)), se / ((hi - lo) * x * (1 - x))
            low = lo + (hi - lo) * special.expit(t - z * st)
            high = lo + (hi - lo) * special.expit(t + z * st)
            inside = (x > 0) & (x < 1)
        elif np.isfinite(lo):
            t, st = np.log(G - lo), se / (G - lo)
            low, high = lo + np.exp(t - z * st), lo + np.exp(t + z * st)
            inside = G > lo
        else:
            t, st = np.log(hi - G), se / (hi - G)
            low, high = hi - np.exp(t + z * st), hi - np.exp(t - z * st)
            inside = G < hi
    wl, wh = np.clip(G - z * se, lo, hi), np.clip(G + z * se, lo, hi)
    return np.where(inside, low, wl), np.where(inside, high, wh)


# ------------------------------------------------------------------------------------------------
# differences of two models
# ------------------------------------------------------------------------------------------------
def newcombe_difference(
    values: tuple[Any, Any],
    intervals: tuple[tuple[Any, Any], tuple[Any, Any]],
    corr: Any,
    bounds: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid score interval for a paired difference ``G_a − G_b`` (Newcombe (1998), method 10).

    From the two marginal intervals ``(l_a, u_a)``, ``(l_b, u_b)`` (score-type, asymmetric near a
    bound) and the correlation ``φ`` of the two estimates::

        L = Δ̂ − sqrt((Ĝ_a − l_a)² − 2φ (Ĝ_a − l_a)(u_b − Ĝ_b) + (u_b − Ĝ_b)²)
        U = Δ̂ + sqrt((u_a − Ĝ_a)² − 2φ (u_a − Ĝ_a)(Ĝ_b − l_b) + (Ĝ_b − l_b)²)

    Newcombe's ``φ`` is the phi coefficient of the paired 2×2 table; here it is the correlation of
    the two estimates in their joint delta-method covariance (the same thing for passive sampling
    of two error indicators), taken as 0 where either standard error is 0 (Newcombe sets it to 0
    when a margin of the table is empty). Each margin keeps its own score interval's width where
    its estimate sits at a bound, so the interval of ``Δ`` does not collapse when every draw agrees.

    Parameters
    ----------
    values : (Ĝ_a, Ĝ_b)
    intervals : ((l_a, u_a), (l_b, u_b))
    corr : array-like
        ``φ``, clipped to ``[-1, 1]`` (NaN → 0).
    bounds : (float, float), optional
        Range of the difference (``(lo − hi, hi − lo)``) to clip to.
    """
    ga, gb = (np.asarray(v, dtype=float) for v in values)
    (la, ua), (lb, ub) = (
        (np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in intervals
    )
    phi = np.clip(np.nan_to_num(np.asarray(corr, dtype=float), nan=0.0), -1.0, 1.0)
    d = ga - gb
    dl = np.sqrt(
        np.clip((ga - la) ** 2 - 2 * phi * (ga - la) * (ub - gb) + (ub - gb) ** 2, 0, None)
    )
    du = np.sqrt(
        np.clip((ua - ga) ** 2 - 2 * phi * (ua - ga) * (gb - lb) + (gb - lb) ** 2, 0, None)
    )
    low, high = d - dl, d + du
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return low, high


# ------------------------------------------------------------------------------------------------
# linear combinations of per-class ratios (balanced accuracy, macro averages)
# ------------------------------------------------------------------------------------------------
def mover(
    centre: Any,
    values: Any,
    intervals: tuple[Any, Any],
    average: Any,
    corr: Any = None,
    bounds: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """MOVER interval for linear combinations ``G_o = Σ_k c_ok θ_k`` of parameters with
    their own intervals (Zou & Donner (2008); Zou, Huang & Zhang (2009); Newcombe (2013), Ch. 7).

    From each part's estimate ``θ̂_k`` and interval ``(l_k, u_k)`` the variance near each limit
    is recovered (``(θ̂_k − l_k)/z`` below, ``(u_k − θ̂_k)/z`` above) and combined::

        L = Ĝ − sqrt(Σ_jk c_j c_k ρ_jk a_j a_k),   a_k = θ̂_k − l_k if c_k > 0 else u_k − θ̂_k
        U = Ĝ + sqrt(Σ_jk c_j c_k ρ_jk b_j b_k),   b_k = u_k − θ̂_k if c_k > 0 else θ̂_k − l_k

    For ``θ_1 ± θ_2`` this is Zou & Donner's (2008) limits for a sum (Sec. 2; with ``ρ`` the
    correlation of the estimates, Newcombe's (1998) method 10 for a difference, as
    :func:`newcombe_difference`); for independent parts (``ρ = I``) the square-and-add limits of
    a linear function of proportions (Zou, Huang & Zhang (2009)). A part whose estimate sits at a
    bound keeps its own interval's width on the far side — where the delta method gives it no
    variance at all. The parts are assumed independent where ``corr`` is not given; with
    ``corr`` the approximation is that the correlation of the estimates holds near the limits.

    Parameters
    ----------
    centre : array-like (m,)
        ``Ĝ``, the estimate of each combination (``Σ_k c_ok θ̂_k``, or a bias-corrected or
        clipped value of it).
    values : array-like (K,)
        ``θ̂_k``.
    intervals : (array-like (K,), array-like (K,))
        ``(l_k, u_k)``, each containing ``θ̂_k``.
    average : array-like (m, K)
        The coefficients ``c_ok``.
    corr : array-like (K, K), optional
        ``ρ``, the correlation of the parts' estimates (NaN → 0 off the diagonal; default the
        identity: independent parts).
    bounds : (float, float), optional
        Range of the combinations to clip to.

    Returns
    -------
    (low, high) : ndarray (m,)
    """
    G = np.atleast_1d(np.asarray(centre, dtype=float))
    th = np.asarray(values, dtype=float)
    lo_k, hi_k = (np.asarray(a, dtype=float) for a in intervals)
    c = np.atleast_2d(np.asarray(average, dtype=float))
    K = th.size
    rho = np.eye(K) if corr is None else np.nan_to_num(np.asarray(corr, dtype=float), nan=0.0)
    rho = np.clip(rho, -1.0, 1.0)
    np.fill_diagonal(rho, 1.0)
    below, above = np.clip(th - lo_k, 0, None), np.clip(hi_k - th, 0, None)
    pos = c > 0
    a = c * np.where(pos, below, above)  # (m, K): signed distances to the lower limit
    b = c * np.where(pos, above, below)
    dl = np.sqrt(np.clip(np.einsum("oj,jk,ok->o", a, rho, a), 0, None))
    du = np.sqrt(np.clip(np.einsum("oj,jk,ok->o", b, rho, b), 0, None))
    low, high = G - dl, G + du
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return low, high


# ------------------------------------------------------------------------------------------------
# F-beta, MCC and Fowlkes-Mallows with no labeled true positive
# ------------------------------------------------------------------------------------------------
#: The measures :func:`true_positive_substitution` knows, with the loss components it reads.
TP_SUBSTITUTION = {
    "f_beta": ("tp", "weight"),
    "mcc": ("tp", "true_pos", "pred_pos"),
    "fowlkes_mallows": ("tp", "true_pos", "pred_pos"),
}


def true_positive_substitution(measure: str, share: Any, risk: Any, carrying: Any) -> np.ndarray:
    """The measure at a true-positive share ``J`` of its carrying draws, every other cell of the
    confusion matrix at its estimate (the substitution method of Daly (1998)).

    For a sample with no labeled true positive (``TP̂ = 0``) the delta-method standard error of
    F1 or MCC has no term for the true-positive count (every draw's is 0), and the score
    interval on it misses the one quantity that is unknown. The draws that carry these measures
    are the true positives, false positives and false negatives; their true-positive share::

        J = TP/(TP + FP + FN)

    is a proportion with its own score interval on the Kish size of the carrying draws
    (Korn & Graubard (1998); its estimate is 0 and its upper limit ``J_U`` under the default
    :func:`modified_wilson` is Wilson's ``z²/(n + z²)`` for ``n > 3`` equal-weight draws).
    Adding true positives until they make up the
    share ``J`` of the carrying draws, with the false positives, false negatives and true
    negatives at their estimates, adds ``t = J·C/(1 − J)`` to the true-positive share of all
    draws, ``C`` the carrying draws' share of the weight. Each measure is homogeneous of degree 0
    in the four cells, so (multiplying every cell by ``1 − J``):

    - ``"f_beta"``, ``risk = (0, R̂₂)`` with ``R₂ = (β² (TP + FN) + TP + FP)/(1 + β²)`` (the
      weight component of :class:`~bayes_activeeval.measures.FBeta`)::

          F_β(J) = J C / (J C + (1 − J) R̂₂)

      For ``β = 1``, ``R̂₂ = C/2`` and ``F1(J) = 2J/(1 + J)`` exactly, whatever the other cells:
      F1 is a monotone function of ``J`` alone, so the interval of ``J`` mapped through it
      covers F1 exactly as often as it covers ``J`` (Daly (1998): a measure that is a monotone
      function of a single parameter). For ``β ≠ 1`` F_β also depends on how the carrying draws
      split into false negatives and false positives, held at its estimate.
    - ``"mcc"``, ``risk = (0, ŷ, f̂)`` (the shares labeled and predicted positive, so
      ``F̂N = ŷ``, ``F̂P = f̂``, ``T̂N = 1 − ŷ − f̂`` and ``C = ŷ + f̂``): with ``tp = J C``,
      ``fp = (1 − J) f̂``, ``fn = (1 − J) ŷ``, ``tn = (1 − J) T̂N``::

          MCC(J) = (tp·tn − fp·fn) / sqrt((tp + fp)(tp + fn)(tn + fp)(tn + fn))

      (Matthews (1975)); ``MCC(1) = T̂N/sqrt((T̂N + f̂)(T̂N + ŷ))``, its limit.
    - ``"fowlkes_mallows"``, ``risk = (0, ŷ, f̂)``: ``FM(J) = tp/sqrt((tp + fp)(tp + fn))``.

    Each is nondecreasing in ``J`` (``F_β`` and ``FM`` plainly; for MCC the derivative in ``tp``
    with the other cells fixed is proportional to ``tn (tp + fp)(tp + fn) − ½ N (2 tp + fp +
    fn)`` with ``N ≤ tp·tn``, which is at least ``tn (½ tp (fp + fn) + fp·fn) ≥ 0``), equals the
    estimate at ``J = 0`` (``tp = J C/(1 − J)`` with the other cells fixed grows with ``J``), and
    so maps the upper limit ``J_U`` to an upper limit of the measure.

    Parameters
    ----------
    measure : {"f_beta", "mcc", "fowlkes_mallows"}
        Which measure (:data:`TP_SUBSTITUTION`).
    share : array-like
        ``J`` in ``[0, 1]`` (clipped).
    risk : array-like (..., d)
        The estimated loss vector ``R̂`` of the measure with its true-positive component 0
        (``d = 2`` for ``"f_beta"``, 3 otherwise).
    carrying : array-like
        ``C``, the share of the importance weight on the draws that carry the measure (predicted
        or labeled positive), ``> 0``.

    Returns
    -------
    ndarray
        The measure at ``J``, broadcast over ``share``, ``risk[..., 0]`` and ``carrying``.

    References
    ----------
    Daly, L. E. (1998). Confidence limits made easy: interval estimation using a substitution
    method. *American Journal of Epidemiology* 147(8), 783-790.

    Matthews, B. W. (1975). Comparison of the predicted and observed secondary structure of T4
    phage lysozyme. *Biochimica et Biophysica Acta* 405(2), 442-451.
    """
    if measure not in TP_SUBSTITUTION:
        raise ValueError(
            f"measure must be one of {', '.join(map(repr, TP_SUBSTITUTION))}; got {measure!r}"
        )
    J = np.clip(np.asarray(share, dtype=float), 0.0, 1.0)
    R = np.asarray(risk, dtype=float)
    d = len(TP_SUBSTITUTION[measure])
    if R.shape[-1] != d:
        raise ValueError(f"risk must have {d} components for measure={measure!r}; got {R.shape}")
    C = np.asarray(carrying, dtype=float)
    tp = J * C
    with np.errstate(divide="ignore", invalid="ignore"):
        if measure == "f_beta":
            return tp / (tp + (1.0 - J) * R[..., 1])
        y, f = R[..., 1], R[..., 2]
        fp, fn = (1.0 - J) * f, (1.0 - J) * y
        if measure == "fowlkes_mallows":
            return tp / np.sqrt((tp + fp) * (tp + fn))
        tn0 = np.clip(1.0 - y - f, 0.0, None)
        tn = (1.0 - J) * tn0
        mcc = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        limit = tn0 / np.sqrt((tn0 + f) * (tn0 + y))
        return np.where(J >= 1.0, limit, mcc)
