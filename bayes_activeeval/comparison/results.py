"""Result objects of comparisons: two models, k models, and the sums they are built from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import optimize, stats

from .. import intervals
from .._validation import check_count, check_level, check_rng
from ..estimators import ConfidenceInterval, Estimate

#: Absolute error requested from Genz's algorithm (``engine="scipy"``); tighter requests are
#: very slow for the singular all-pairs family (seconds per p-value for k = 5).
MVN_ABSEPS = 5e-4


@dataclass(frozen=True)
class ScoreSums:
    """The weighted sums behind a score-type comparison test, for one pair or a k × k table.

    With importance weights ``v`` and paired loss differences ``δ``: ``A = Σ v δ``, ``W = Σ v``,
    ``B = Σ v² δ²``, ``C = Σ v² δ``, ``D = Σ v²``. The score statistic for ``H0: Δ = Δ0`` is
    ``Σ v (δ − Δ0) / sqrt(Σ v² (δ − Δ0)²)`` (Sawade (2012), Eq. 3.23 with the variance under the
    null); both :class:`ComparisonResult` and :class:`MultipleComparisonResult` keep these sums
    (scalars or arrays) and invert the test with :func:`invert_score_test`.

    Parameters
    ----------
    A : float or ndarray
        ``Σ v δ``, the weighted sum of the paired loss differences.
    W : float or ndarray
        ``Σ v``, the sum of the importance weights.
    B : float or ndarray
        ``Σ v² δ²``.
    C : float or ndarray
        ``Σ v² δ``.
    D : float or ndarray
        ``Σ v²``.
    """

    A: Any
    W: Any
    B: Any
    C: Any
    D: Any

    @classmethod
    def of(cls, v: np.ndarray, delta: np.ndarray) -> ScoreSums:
        """The sums of one pair: weights ``v`` and per-draw terms ``δ`` (floats)."""
        v2 = v * v
        return cls(
            A=float(v @ delta),
            W=float(v.sum()),
            B=float(v2 @ (delta * delta)),
            C=float(v2 @ delta),
            D=float(v2.sum()),
        )


def invert_score_test(sums: ScoreSums, z: float) -> tuple[Any, Any]:
    """The interval of ``Δ0`` dual to the score-type test at critical value ``z``.

    ``|Σ v (δ − Δ0)| ≤ z sqrt(Σ v² (δ − Δ0)²)`` is the quadratic inequality
    ``a Δ0² − 2 b Δ0 + c ≤ 0`` with ``a = W² − z² D``, ``b = A W − z² C``, ``c = A² − z² B``
    (Sawade (2012), Eq. 3.23 with the variance under ``H0: Δ = Δ0``). When ``a > 0`` the ``Δ0``
    it accepts are the interval ``(b ∓ sqrt(b² − a c)) / a`` (a Wilson-type interval). When
    ``a ≤ 0`` — the effective sample size ``W²/D`` is at most ``z²``, which happens under active
    proposals when a few draws where the models agree carry most of the weight — the accepted
    ``Δ0`` are the whole line or two rays around a bounded set of rejected ones; ``c > 0``
    (``|A|/sqrt(B) > z``) means that the test of ``Δ = 0`` rejects, so that ``0`` lies in that
    rejected set. Two rays are not an interval; what is returned keeps the interval dual to the
    test of ``Δ = 0`` (it contains 0 exactly when that test does not reject at ``z``):

    - ``c ≤ 0`` (no rejection at 0): the whole line;
    - ``c > 0``: the ray on the side of the estimate ``A/W`` (which it always contains, its
      statistic is 0), from the root of the quadratic on that side of 0 — ``c/(b + sqrt(b² − a c))``
      (``A > 0``) or ``c/(b − sqrt(b² − a c))`` (``A < 0``) — to ``±inf``. The ray left out lies
      beyond 0 on the other side: it would take a difference of the other sign than the
      estimate's, and farther from 0 than the rejected set.

    Works elementwise on arrays.

    Parameters
    ----------
    sums : ScoreSums
        The sums of one pair (scalars) or of a table of pairs (arrays).
    z : float
        The critical value (``z_{(1+level)/2}`` for a two-sided interval at ``level``).

    Returns
    -------
    low, high : float or ndarray
        The interval's ends (``−inf``/``inf`` for a ray or the whole line); floats for scalar
        sums.
    """
    a = sums.W * sums.W - z * z * sums.D
    b = sums.A * sums.W - z * z * sums.C
    c = sums.A * sums.A - z * z * sums.B
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(np.clip(b * b - a * c, 0.0, None))
        rays = (a <= 0) & (c > 0)  # the test of Δ = 0 rejects: keep the estimate's ray
        up = rays & (sums.A > 0)
        down = rays & (sums.A < 0)
        lo = np.where(a > 0, (b - root) / a, np.where(up, c / (b + root), -np.inf))
        hi = np.where(a > 0, (b + root) / a, np.where(down, c / (b - root), np.inf))
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def invert_statistic(
    statistic: Any,
    z: float,
    centre: float,
    bounds: tuple[float, float],
    scale: float,
    at_zero: float,
) -> tuple[float, float]:
    """The interval of ``Δ0`` dual to a test whose statistic ``T(Δ0)`` for ``H0: Δ = Δ0`` is
    computed afresh for each ``Δ0`` (the generalized score test of a non-linear difference,
    whose null-restricted point moves with ``Δ0``; Boos (1992), Eqs. 5-6), at critical value
    ``z``: ``{Δ0 : |T(Δ0)| ≤ z}``, found by root-finding (:func:`scipy.optimize.brentq`) on
    each side of ``centre``.

    From ``centre`` (the estimate, where ``T`` is about 0) each side is scanned outward on a
    geometric grid (steps ``scale/2 · √2^k``) up to the end of ``bounds``; the first grid point
    whose ``|T|`` exceeds ``z`` brackets the end, which :func:`~scipy.optimize.brentq` refines
    (a ``T`` that is NaN counts as not rejecting). A side with no rejection up to its bound
    ends at the bound — the analogue of the whole line or a ray of :func:`invert_score_test`
    when the statistic stays below ``z`` however far ``Δ0`` goes (few effective draws). The
    result is kept dual to the test of ``Δ = 0``: if ``|at_zero| ≤ z`` and 0 lies outside the
    set found around ``centre`` (a statistic that is not monotone), the interval is extended
    to 0; if ``|at_zero| > z`` and 0 lies inside (a rejected island the grid stepped over), it
    is cut between 0 and ``centre``. So it contains 0 exactly when the test does not reject.

    Parameters
    ----------
    statistic : callable
        ``Δ0 ↦ T(Δ0)``.
    z : float
        The critical value.
    centre : float
        Where to start (the estimate ``Δ̂``), inside ``bounds``.
    bounds : (float, float)
        The range of ``Δ`` (either end may be infinite).
    scale : float
        The scale of the grid (the estimate's standard error); 0 or NaN: 1 % of the range.
    at_zero : float
        ``T(0)``, the statistic of the test of ``Δ = 0`` (decides whether 0 belongs).

    Returns
    -------
    low, high : float
    """
    lo_b, hi_b = (float(b) for b in bounds)
    width = hi_b - lo_b
    if not (np.isfinite(scale) and scale > 0):
        scale = 0.01 * width if np.isfinite(width) else 0.01
    h = 0.5 * scale

    seen: dict[float, float] = {}

    def stat(x: float) -> float:
        # one evaluation per point: brentq starts from grid points already evaluated, and the
        # start c is checked more than once
        x = float(x)
        if x not in seen:
            seen[x] = statistic(x)
        return seen[x]

    def excess(x: float) -> float:
        t = stat(x)
        return -z if np.isnan(t) else min(abs(t), 1e12) - z

    def rejects(x: float) -> bool:
        return excess(x) > 0

    c = float(np.clip(centre, lo_b, hi_b)) if np.isfinite(centre) else 0.0
    if rejects(c):  # T(Δ̂) not about 0 (a very few draws): start where T changes sign
        t = stat(c)
        step = 1.0 if t > 0 else -1.0
        for k in range(120):
            x = c + step * h * np.sqrt(2.0) ** k
            x = min(x, hi_b) if step > 0 else max(x, lo_b)
            if not rejects(x):
                c = x
                break
            if x in (lo_b, hi_b) or not np.isfinite(x):
                break

    def end(direction: float) -> float:
        bound = hi_b if direction > 0 else lo_b
        prev = c
        for k in range(200):
            x = c + direction * h * np.sqrt(2.0) ** k
            x = min(x, bound) if direction > 0 else max(x, bound)
            if not np.isfinite(x):  # an unbounded side never rejected: a ray
                return bound
            if rejects(x):
                return float(optimize.brentq(excess, prev, x)) if prev != x else x
            if x == bound:
                return bound
            prev = x
        return bound

    lo, hi = (end(-1.0), end(1.0)) if not rejects(c) else (c, c)
    if lo_b <= 0.0 <= hi_b:
        zero_ok = not abs(at_zero) > z  # a NaN statistic does not reject
        if zero_ok and not lo <= 0.0 <= hi:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        elif not zero_ok and lo <= 0.0 <= hi:
            if c > 0:
                lo = max(float(optimize.brentq(excess, 0.0, c)), np.nextafter(0.0, 1.0))
            elif c < 0:
                hi = min(float(optimize.brentq(excess, c, 0.0)), np.nextafter(0.0, -1.0))
    return float(lo), float(hi)


def interval_method(
    method: str | None, newcombe_ok: bool, why: str, *, equal_weights: bool = True
) -> str:
    """The interval method of a comparison.

    By default ``"newcombe"`` where it applies (``newcombe_ok``; ``why`` says when) and the draws
    have equal importance weights (passive sampling), else ``"test"``; a bad name, or
    ``"newcombe"`` where it does not apply, is a ``ValueError``.
    """
    if method is None:
        return "newcombe" if newcombe_ok and equal_weights else "test"
    if method not in ("newcombe", "test"):
        raise ValueError(f"method must be 'newcombe' or 'test', got {method!r}")
    if method == "newcombe" and not newcombe_ok:
        raise ValueError(f"method='newcombe' needs {why} (a proposal with full support)")
    return method


def has_equal_weights(weights: Any, proposal: Any = None) -> bool:
    """Whether the design is passive: ``q ∝ p`` on every item of the ``proposal`` when it is
    given, else the importance ``weights`` of the draws all equal, up to rounding. With the
    proposal the answer does not depend on which items happened to be drawn (a proposal with
    two levels of ``q`` can draw items of one level only).

    Parameters
    ----------
    weights : array-like
        The draws' importance weights ``p/q``.
    proposal : Proposal, optional
        The proposal the draws came from.
    """
    if proposal is not None:
        p, q = np.asarray(proposal.p, dtype=float), np.asarray(proposal.q, dtype=float)
        on = p > 0
        if np.any(on & ~(q > 0)):
            return False
        w = p[on] / q[on]
    else:
        w = np.asarray(weights, dtype=float)
    if w.size == 0:
        return True
    return bool(np.ptp(w) <= 1e-9 * np.max(np.abs(w)))


def stratum_wilson(
    difference: Any, mass: float, size: float | None, bounds: tuple[float, float], level: float
) -> tuple[Any, Any]:
    """Wilson's interval for a post-stratified difference whose draws in ``D`` all had the same
    paired difference (the interval dual to the test is then a point): the mean difference on
    ``D``, ``Δ̂/P(D)``, rescaled to ``[0, 1]`` over the difference's range ``[lo − hi, hi − lo]``,
    on the Kish size of ``D``'s draws (Wilson's interval never has zero width; Brown, Cai &
    DasGupta (2001), Eq. 4), times ``P(D)``; without draws in ``D`` the whole range times
    ``P(D)``. Elementwise over ``difference``; the interval always contains ``Δ̂``.

    Parameters
    ----------
    difference : float or ndarray
        ``Δ̂``.
    mass : float
        ``P(D)``.
    size : float or None
        The Kish size of ``D``'s draws (0 or ``None``: none).
    bounds : (float, float)
        The measure's range ``(lo, hi)``.
    level : float
        Confidence level.

    Returns
    -------
    low, high : float or ndarray
    """
    lo_b, hi_b = bounds
    r_lo, r_hi = lo_b - hi_b, hi_b - lo_b
    d = np.asarray(difference, dtype=float)
    if not size or mass <= 0 or not np.all(np.isfinite(d)):
        return np.full_like(d, mass * r_lo), np.full_like(d, mass * r_hi)
    x = (d / mass - r_lo) / (r_hi - r_lo)
    wl, wh = intervals.wilson(x, size, level)
    wl, wh = mass * (r_lo + wl * (r_hi - r_lo)), mass * (r_lo + wh * (r_hi - r_lo))
    # the ends are exact at a bound; rounding of Δ̂/P(D) must not leave Δ̂ outside
    return np.minimum(wl, d), np.maximum(wh, d)


def class_allowance(restricted: Any, z: float) -> float:
    """The allowance for the classes of an averaged measure's difference that no draw tells
    apart: ``0`` when every class has a discordant draw, else the half-width ``h`` by which
    :func:`widen` widens the test's interval (``inf``: no bound, fall back to another interval).

    For balanced accuracy and the macro averages the difference ``G_a − G_b`` is a weighted sum
    ``Σ_k w_k (θ_a,k − θ_b,k)`` of per-class differences
    (:class:`~bayes_activeeval.measures.ClassParts`). Class ``k``'s part reads the loss
    components in the nonzero columns of its Jacobian row (``tp_k`` and its denominator's, in
    either model's block). When ``ℓ_a`` and ``ℓ_b`` agree on those components on every drawn
    item of positive weight (in particular when no draw carries the class) the class has no
    discordant draw: the generalized score test (Boos (1992), Eqs. 5-6) sees a zero difference
    with zero variance for it, and its interval has no allowance for the class's unknown
    difference — the class-wise version of every draw agreeing. A class whose part is known from
    the pool for both models (``low = high`` in
    :meth:`~bayes_activeeval.measures.ClassParts.limits`: neither model predicts it) has none,
    and neither has a class the two models predict on exactly the same pool items
    (:meth:`~bayes_activeeval.Pool.agreeing_classes`): its part is the same for both whatever
    the labels.

    For per-class recalls (``kind="recall"``: balanced accuracy, macro recall) both models'
    ratios share the class's denominator, so ``|θ_a,k − θ_b,k| ≤ π_k`` (times the parts'
    range), ``π_k`` the share of the class's items where the two disagree. With no discordant
    draw among the class's carrying draws, ``π_k`` is at most Wilson's upper limit at zero
    successes, ``z²/(n_k + z²)`` on their Kish size ``n_k = (Σ v)²/Σ v²`` (Brown, Cai &
    DasGupta (2001), Eq. 4; 1 without such draws), and the classes' allowances add in
    quadrature, as independent parts of a sum (Zou & Donner (2008), Sec. 2, with estimate 0):
    ``h = sqrt(Σ_k (w_k (hi − lo) z²/(n_k + z²))²)``. For precision and F1 parts the two
    models' denominators differ and no such bound is kept: ``inf``.

    Parameters
    ----------
    restricted : RestrictedScore or None
        The draws behind a generalized score test
        (:class:`~bayes_activeeval.comparison.pairwise.RestrictedScore`).
    z : float
        The critical value of the interval.

    Returns
    -------
    float
        ``0`` without ``restricted``, for a measure with no class parts, or when every class has
        a discordant draw.
    """
    if restricted is None:
        return 0.0
    m = restricted.path.diff_m
    if not m.averaged:
        return 0.0
    L = np.asarray(restricted.losses, dtype=float)
    v = np.asarray(restricted.weights, dtype=float)
    d = L.shape[1] // 2
    with np.errstate(all="ignore"):
        parts = m.class_parts(np.ones(2 * d))  # a point where every part is defined
    reads = np.asarray(parts.jacobian, dtype=float)
    reads = np.isnan(reads) | (reads != 0)
    K = reads.shape[0] // 2
    reads = reads[:K, :d] | reads[K:, d:]  # (K, d): the components class k reads
    low, high = parts.limits()
    known = (low[:K] == high[:K]) & (low[K:] == high[K:])
    if restricted.agree is not None:  # the two parts are equal on the pool
        known = known | restricted.agree
    on = v > 0
    La, Lb = L[on, :d], L[on, d:]
    moved = np.any(La != Lb, axis=0)  # (d,): components some draw tells apart
    blind = ~np.any(reads & moved[None, :], axis=1) & ~known
    if not np.any(blind):
        return 0.0
    if parts.kind != "recall":
        return np.inf
    avg = np.abs(np.asarray(parts.average, dtype=float)[0])
    span = parts.bounds[1] - parts.bounds[0]
    vo = v[on]
    h2 = 0.0
    for k in np.flatnonzero(blind):
        carry = np.any((La[:, reads[k]] != 0) | (Lb[:, reads[k]] != 0), axis=1)
        vk = vo[carry]
        n_k = float(vk.sum() ** 2 / (vk @ vk)) if vk.size else 0.0
        w = max(avg[k], avg[K + k])
        h2 += (w * span * z * z / (n_k + z * z)) ** 2
    return float(np.sqrt(h2))


def widen(estimate: Any, low: Any, high: Any, h: Any) -> tuple[Any, Any]:
    """``(low, high)`` around ``estimate`` widened by an independent part with estimate 0 and
    interval ``(−h, h)`` (MOVER for a sum, Zou & Donner (2008), Sec. 2):
    ``Δ̂ − sqrt((Δ̂ − low)² + h²)``, ``Δ̂ + sqrt((high − Δ̂)² + h²)``; never narrower than
    ``(low, high)``. Elementwise."""
    lo = np.minimum(low, estimate - np.hypot(estimate - low, h))
    hi = np.maximum(high, estimate + np.hypot(high - estimate, h))
    return lo, hi


@dataclass(frozen=True, repr=False)
class ComparisonResult:
    """The paired Wald test of ``H0: G_a = G_b`` (Sawade (2012), Eqs. 3.21-3.24).

    Returned by :func:`~bayes_activeeval.compare`.

    Parameters
    ----------
    statistic : float
        The test statistic ``T``.
    pvalue : float
        Its p-value for ``alternative``.
    estimate : float
        ``Δ̂ = Ĝ_a − Ĝ_b``.
    stderr : float
        The standard error of ``Δ̂``.
    alternative : {"two-sided", "less", "greater"}
        The alternative hypothesis tested.
    models : tuple of str
        The two models ``(a, b)``.
    estimates : dict
        Each model's estimate (NaN where not identified).
    stderrs : dict
        Each model's standard error.
    n_draws : int
        Draws entering the estimate.
    n_labels : int
        Labels bought.
    measure : str
        The name of the measure compared.
    greater_is_better : bool, optional
        Whether larger values of the measure are better (default ``False``).
    support_mass : float, optional
        ``P(D)``, the mass of the items where the two models' losses can differ, when the
        difference is post-stratified on them (default 1: not post-stratified).
    variance : {"wald", "score"}, optional
        The test's variance (default ``"wald"``): centred at ``Δ̂`` (Wald) or under the null
        (score-type, whose interval inverts the test with ``sums``).
    sums : ScoreSums, optional
        The sums of the score-type test (``None``, the default, with ``variance="wald"``).
    per_model : Estimate, optional
        The two models' estimates on the shared draws (default ``None``: not kept or not
        identified).
    bounds : tuple of float, optional
        The range of the measure (default ``(-inf, inf)``: unbounded).
    equal_weights : bool, optional
        Whether the draws had equal importance weights (passive sampling; default ``False``:
        not known), which makes Newcombe's interval the default.
    stratum_size : float, optional
        For a post-stratified difference (a plain risk under an active proposal, see
        :func:`~bayes_activeeval.compare`): the Kish size ``(Σ_D v)²/Σ_D v²`` of the draws in the
        disagreement set ``D`` (default ``None``: not post-stratified).
    restricted : RestrictedScore, optional
        For a ratio or non-linear measure tested with the generalized score test: the draws'
        losses and weights, from which the test of any ``H0: Δ = Δ0`` is recomputed at its own
        null-restricted point to invert it
        (:class:`~bayes_activeeval.comparison.pairwise.RestrictedScore`; default ``None``: a
        plain risk, whose score test inverts from :attr:`sums` alone, or the Wald test).

    Attributes
    ----------
    statistic : float
        ``T = Δ̂ / SE`` (Eq. 3.23), asymptotically ``N(0, 1)`` under ``H0``.
    pvalue : float
        Wald p-value for ``alternative`` (Eq. 3.24).
    estimate : float
        ``Δ̂ = Ĝ_a − Ĝ_b`` (Eq. 3.21).
    stderr : float
        Standard error of ``Δ̂`` (Eq. 3.22 divided by ``√n``; delta method for ratio measures).
    alternative : str
        ``"two-sided"``, ``"less"`` (``H1: G_a < G_b``) or ``"greater"``.
    models : tuple of str
        ``(a, b)``.
    estimates : dict
        Per-model estimates ``{a: Ĝ_a, b: Ĝ_b}`` (NaN when the proposal left out the items where
        the models agree: then only the difference is identified).
    stderrs : dict
        Their standard errors.
    n_draws, n_labels : int
        Draws entering the estimate and labels bought.
    measure : str
    greater_is_better : bool
        Whether larger values of the measure are better (decides :attr:`better`).
    support_mass : float
        ``P(D)``: for a plain risk under any proposal but passive sampling, the difference is
        the self-normalized estimate on the draws in ``D`` (the items where the two models'
        losses can differ; ``δ ≡ 0`` elsewhere) multiplied by it — post-stratification, and
        for a proposal that is zero off ``D`` Sawade (2012), Sec. 5.2.2 (``active_≠``); 1 when
        not post-stratified.
    per_model : Estimate or None
        The two models' estimates on the shared draws (the stacked measure; their joint
        delta-method covariance), ``None`` when only the difference is identified.
    bounds : (float, float)
        The range of the measure (``Measure.bounds``); the difference lies in
        ``[lo − hi, hi − lo]``.
    equal_weights : bool
        Whether every draw had the same importance weight (passive sampling).
    stratum_size : float or None
        The Kish size of the draws in ``D`` when the difference is post-stratified.
    """

    statistic: float
    pvalue: float
    estimate: float
    stderr: float
    alternative: str
    models: tuple[str, str]
    estimates: dict[str, float]
    stderrs: dict[str, float]
    n_draws: int
    n_labels: int
    measure: str
    greater_is_better: bool = False
    support_mass: float = 1.0
    variance: str = "wald"
    sums: ScoreSums | None = field(default=None, repr=False)
    per_model: Estimate | None = field(default=None, repr=False)
    bounds: tuple[float, float] = (-np.inf, np.inf)
    equal_weights: bool = False
    stratum_size: float | None = None
    restricted: Any = field(default=None, repr=False)

    @property
    def difference_bounds(self) -> tuple[float, float]:
        """The range of ``G_a − G_b``: ``[lo − hi, hi − lo]``."""
        lo, hi = self.bounds
        return (lo - hi, hi - lo)

    def model_intervals(self, level: float = 0.95) -> dict[str, ConfidenceInterval]:
        """Each model's own interval, :meth:`Estimate.confidence_interval` of its estimate on the
        shared draws (the interval ``bae status`` prints for it)."""
        if self.per_model is None:
            nan = ConfidenceInterval(np.nan, np.nan)
            return dict.fromkeys(self.models, nan)
        ci = self.per_model.confidence_interval(level)
        return {
            m: ConfidenceInterval(float(ci.low[i]), float(ci.high[i]))
            for i, m in enumerate(self.models)
        }

    @property
    def better(self) -> str | None:
        """The model that looks better on this sample (``None`` on a tie)."""
        if not np.isfinite(self.estimate) or self.estimate == 0:
            return None
        a_larger = self.estimate > 0
        return self.models[0] if a_larger == self.greater_is_better else self.models[1]

    def confidence_interval(
        self, level: float = 0.95, method: str | None = None
    ) -> ConfidenceInterval:
        """Confidence interval for ``Δ = G_a − G_b``.

        Under an active proposal (unequal importance weights) the default is the interval dual
        to the test: it excludes 0 exactly when :attr:`pvalue` is below ``1 − level``. Under
        passive sampling it is Newcombe's hybrid, which agrees with the test except when only a
        handful of draws are discordant (4 discordant draws, all one way: score test
        ``p = 0.046`` but Newcombe's 95 % interval contains 0; the exact sign test gives
        ``p = 0.125``); ``method="test"`` always matches the p-value.

        Parameters
        ----------
        level : float
        method : {"newcombe", "test"}, optional
            ``"newcombe"`` (default for a two-sided comparison of a measure with a bounded range
            when both models' estimates are identified and every draw has the same importance
            weight — passive sampling): Newcombe's (1998) hybrid score interval
            (method 10) from the two models' own intervals (:meth:`model_intervals`, the
            score-type default of :meth:`Estimate.confidence_interval`) and the correlation of
            their estimates (:func:`~bayes_activeeval.intervals.newcombe_difference`). It lies
            in ``[lo − hi, hi − lo]`` and keeps its width when every draw agrees (the test's
            interval is then the point ``Δ̂``). Under an active proposal (unequal weights) it is
            not the default: the models' own intervals are then wide and skewed (modified Wilson
            on a small effective sample size), and their skew does not cancel in the difference
            even when the two estimates are 0.997 correlated — the interval then contained 0 in
            runs where the test gave ``p = 3e-43``. When every draw's paired difference is the
            same, so that the test's interval would be the point ``Δ̂``, the default is, for a
            post-stratified difference (:attr:`stratum_size` set), Wilson's interval for the
            mean difference on ``D`` on the Kish size of ``D``'s draws times ``P(D)``
            (``P(D)·[lo − hi, hi − lo]`` without a draw in ``D``), and Newcombe's otherwise.
            The class-wise version: for an average of per-class ratios (balanced accuracy, the
            macro averages) with a class that no draw tells apart (:func:`class_allowance`), the
            test's interval has no allowance for that class's difference, and the default
            widens it by one (:func:`widen`; for precision and F1 parts Newcombe's, else the
            difference's range); it may then contain 0 where ``p < 1 − level``.
            ``"test"`` (default otherwise): the interval dual to the test, clipped to
            ``P(D)·[lo − hi, hi − lo]`` when post-stratified.
            ``variance="wald"``: ``Δ̂ ± z_{(1+level)/2} SE`` (Sawade (2012), Sec. 3.2.2,
            Eq. 3.16 with ``δ``). ``variance="score"``: the set of ``Δ0`` that the score-type
            test does not reject, ``|Σ v (δ − Δ0)| ≤ z sqrt(Σ v² (δ − Δ0)²)`` — a quadratic
            inequality in ``Δ0``; where the effective sample size ``(Σ v)²/Σ v²`` is at most
            ``z²`` that set is the whole line or two rays, and the interval is the whole range
            if the test does not reject ``Δ = 0`` and the ray on the estimate's side if it does
            (:func:`invert_score_test`). For a ratio or non-linear measure (the generalized
            score test, :attr:`restricted` set) each ``Δ0`` is tested at its own
            null-restricted point ``R⁰(Δ0)`` (Boos (1992), Eqs. 5-6;
            :func:`~bayes_activeeval.comparison.pairwise.restricted_influence`) and the ends
            are found by root-finding on each side of ``Δ̂`` within the difference's range
            (:func:`invert_statistic`); a side the test never rejects ends at the range's end.
            Subtracting ``Δ0`` from the terms at ``R⁰(0)`` instead gave an interval with the
            wrong variance: 0.46 coverage for balanced accuracy where two models differ only
            on a rare class. One-sided alternatives give one-sided intervals, as
            :func:`scipy.stats.ttest_rel`. Two-sided ones are clipped to the difference's range.
        """
        level = check_level(level)
        lo_d, hi_d = self.difference_bounds
        if self.stratum_size is not None:  # post-stratified: Δ = P(D)·E[δ | D]
            lo_d, hi_d = self.support_mass * lo_d, self.support_mass * hi_d
        newcombe_ok = (
            self.alternative == "two-sided"
            and self.per_model is not None
            and bool(np.isfinite(lo_d) and np.isfinite(hi_d))
            and bool(np.all(np.isfinite(self.per_model.values)))
        )
        why = "a two-sided comparison of a measure with a bounded range and both models' estimates"
        chosen = interval_method(method, newcombe_ok, why, equal_weights=self.equal_weights)
        if chosen == "newcombe":
            return self._newcombe_interval(level)
        ci = self._test_interval(level)
        if self.alternative == "two-sided":
            ci = ConfidenceInterval(
                float(np.clip(ci.low, lo_d, hi_d)), float(np.clip(ci.high, lo_d, hi_d))
            )
            tiny = 1e-6 * (hi_d - lo_d) if np.isfinite(hi_d - lo_d) else 0.0
            if method is None and (self.stratum_size == 0.0 or not ci.high - ci.low > tiny):
                # every draw's paired difference is the same (all agree, or all discordant one
                # way): the test's interval is the point Δ̂
                if self.stratum_size is not None and np.isfinite(hi_d - lo_d):
                    return self._stratum_wilson(level)
                if newcombe_ok:  # Newcombe's keeps the models' widths
                    return self._newcombe_interval(level)
            z = stats.norm.ppf(0.5 + level / 2)
            h = class_allowance(self.restricted, z) if method is None else 0.0
            if h > 0:
                # a class the measure averages over with no discordant draw: the test's interval
                # has no allowance for its difference; widened by a bound on it, else Newcombe's
                # (the models' own MOVER intervals allow for it), else the difference's range
                if np.isfinite(h):
                    lo, hi = widen(self.estimate, ci.low, ci.high, h)
                    return ConfidenceInterval(
                        float(np.clip(lo, lo_d, hi_d)), float(np.clip(hi, lo_d, hi_d))
                    )
                if newcombe_ok:
                    return self._newcombe_interval(level)
                return ConfidenceInterval(float(lo_d), float(hi_d))
        return ci

    def _stratum_wilson(self, level: float) -> ConfidenceInterval:
        lo, hi = stratum_wilson(
            self.estimate, self.support_mass, self.stratum_size, self.bounds, level
        )
        return ConfidenceInterval(float(lo), float(hi))

    def _newcombe_interval(self, level: float) -> ConfidenceInterval:
        a, b = self.models
        ci = self.model_intervals(level)
        cov = self.per_model.cov
        s = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        corr = cov[0, 1] / (s[0] * s[1]) if s[0] > 0 and s[1] > 0 else 0.0
        ga, gb = self.per_model.values
        lo, hi = intervals.newcombe_difference(
            (ga, gb), (tuple(ci[a]), tuple(ci[b])), corr, self.difference_bounds
        )
        return ConfidenceInterval(float(lo), float(hi))

    def _test_interval(self, level: float) -> ConfidenceInterval:
        # the score sums are kept where the p-value came from the score statistic: the score
        # test, or a Wald test whose standard error was 0 or undefined (compare's flat case)
        if self.sums is not None:
            return self._score_interval(level)
        if self.alternative == "two-sided":
            h = stats.norm.ppf(0.5 + level / 2) * self.stderr
            return ConfidenceInterval(self.estimate - h, self.estimate + h)
        h = stats.norm.ppf(level) * self.stderr
        if self.alternative == "less":
            return ConfidenceInterval(-np.inf, self.estimate + h)
        return ConfidenceInterval(self.estimate - h, np.inf)

    def _score_interval(self, level: float) -> ConfidenceInterval:
        two = self.alternative == "two-sided"
        z = stats.norm.ppf(0.5 + level / 2) if two else stats.norm.ppf(level)
        if self.restricted is not None:
            # a non-linear difference: the test of each Δ0 at its own restricted point
            lo, hi = invert_statistic(
                self.restricted.statistic,
                z,
                self.estimate,
                self.difference_bounds,
                self.stderr,
                self.statistic,
            )
        else:
            lo, hi = invert_score_test(self.sums, z)
            lo, hi = lo * self.support_mass, hi * self.support_mass
        if self.alternative == "less":
            return ConfidenceInterval(-np.inf, hi)
        if self.alternative == "greater":
            return ConfidenceInterval(lo, np.inf)
        return ConfidenceInterval(lo, hi)

    def to_frame(self) -> pd.DataFrame:
        """One row per model (estimate, stderr) and one for the difference."""
        a, b = self.models
        rows = {
            a: (self.estimates[a], self.stderrs[a]),
            b: (self.estimates[b], self.stderrs[b]),
            f"{a} - {b}": (self.estimate, self.stderr),
        }
        return pd.DataFrame.from_dict(rows, orient="index", columns=["estimate", "stderr"])

    def __repr__(self) -> str:
        a, b = self.models
        lo, hi = self.confidence_interval(0.95)
        per = ", ".join(f"{m}={self.estimates[m]:.4g}" for m in self.models)
        return (
            f"ComparisonResult({self.measure}[{a}] - {self.measure}[{b}] = {self.estimate:.4g} "
            f"± {self.stderr:.3g}, statistic={self.statistic:.4g}, pvalue={self.pvalue:.4g}, "
            f"alternative={self.alternative!r}, 95% CI=({lo:.4g}, {hi:.4g}), "
            f"variance={self.variance!r}; {per}; "
            f"n_draws={self.n_draws}, n_labels={self.n_labels})"
        )


@dataclass(frozen=True)
class BestModel:
    """The best model and the probability of each model being the best.

    Returned by :meth:`MultipleComparisonResult.best`.

    Parameters
    ----------
    model : str
        The model with the best point estimate.
    probability : float
        The probability that ``model`` is the best.
    probabilities : pandas.Series
        The probability that each model is the best, indexed by model.
    source : {"bootstrap", "posterior"}
        Where the probabilities come from: the parametric bootstrap or posterior draws.

    Attributes
    ----------
    model : str
        The model with the best estimate.
    probability : float
        ``P(model is best)`` under the sampling (or posterior) distribution.
    probabilities : pandas.Series
        ``P(best)`` for every model.
    source : str
        ``"bootstrap"`` (parametric, joint normal of the estimates) or ``"posterior"``.
    """

    model: str
    probability: float
    probabilities: pd.Series
    source: str


@dataclass(frozen=True, repr=False)
class MultipleComparisonResult:
    """Simultaneous pairwise comparisons of ``k`` models on one shared labeled sample.

    Tables are ``k × k`` arrays indexed ``[i, j]`` for the contrast ``G_i − G_j`` (NaN outside
    the family tested, e.g. pairs not involving the baseline for Dunnett), as in
    :class:`scipy.stats._result_classes.TukeyHSDResult`.

    Returned by :func:`~bayes_activeeval.multiple_comparison`.

    Parameters
    ----------
    models : tuple of str
        The ``k`` models compared.
    estimates : ndarray (k,)
        Each model's estimate ``Ĝ_i``.
    cov : ndarray (k, k)
        Their joint covariance ``Σ̂``.
    difference : ndarray (k, k)
        ``Ĝ_i − Ĝ_j`` (NaN outside the family).
    stderr : ndarray (k, k)
        The standard errors of the differences (NaN outside the family; the Wald ones, centred
        at the estimates, also with ``variance="score"``).
    statistic : ndarray (k, k)
        The pairs' test statistics.
    pvalue : ndarray (k, k)
        The multiplicity-adjusted p-values.
    raw_pvalue : ndarray (k, k)
        The unadjusted two-sided p-values.
    method : {"tukey", "studentized_range", "dunnett", "holm", "bonferroni", "none"}
        The multiple-comparison procedure.
    level : float
        The family-wise confidence level ``1 − α``.
    critical_value : float
        The simultaneous critical value at ``level``.
    baseline : str or None
        The model every other is compared with (required by Dunnett, optional for Holm,
        Bonferroni and ``"none"``); ``None`` for all pairs.
    measure : str
        The name of the measure compared.
    greater_is_better : bool
        Whether larger values of the measure are better.
    n_draws : int
        Draws entering the estimates.
    n_labels : int
        Labels bought.
    variance : {"wald", "score"}, optional
        The tests' variance (default ``"wald"``), as for :class:`ComparisonResult`.
    critical : FamilyCritical, optional
        The procedure's critical value at any level (for intervals at another ``level``).
    sums : ScoreSums, optional
        k × k sums of the score-type tests, whose inversion gives the ``"test"`` intervals
        (``None``, the default, for Wald tests and the studentized range).
    bounds : tuple of float, optional
        The range of the measure (default ``(-inf, inf)``: unbounded).
    per_model : Estimate, optional
        The ``k`` estimates on the shared draws (default ``None``).
    interval_critical : FamilyCritical, optional
        The critical value of the default (Newcombe) intervals when it differs from the tests'
        (default ``None``: ``critical``).
    equal_weights : bool, optional
        Whether the draws had equal importance weights (passive sampling; default ``False``:
        not known), which makes Newcombe's intervals the default.
    support_mass : float, optional
        ``P(D)`` when the differences are post-stratified on the set ``D`` where some two
        models' losses can differ (default 1: not post-stratified).
    stratum_size : float, optional
        The Kish size of the draws in ``D`` (default ``None``: not post-stratified).
    restricted : dict, optional
        For a ratio or non-linear measure tested with the generalized score test:
        ``(i, j) ↦ (RestrictedScore, Δ̂_ij, SE_ij)`` for every pair of the family whose test is
        defined — the draws from which the test of any ``H0: Δ_ij = Δ0`` is recomputed at its
        own null-restricted point, and the pair's own estimate and standard error where its
        inversion starts (default ``None``: a plain risk, a Wald test or the studentized range).
    score_pairs : ndarray of bool (k, k), optional
        With ``variance="wald"``: the pairs whose statistic is the score statistic because their
        Wald standard error is 0 (every draw in ``D`` has the same ``δ``); their ``method="test"``
        interval inverts that test from :attr:`sums` (default ``None``: no such pair).

    Attributes
    ----------
    models : tuple of str
    estimates : ndarray (k,)
        ``Ĝ_i``.
    cov : ndarray (k, k)
        Their joint delta-method covariance (Sawade (2012), Lemma 3.4 on the stacked loss).
    difference : ndarray (k, k)
        ``Ĝ_i − Ĝ_j``.
    stderr : ndarray (k, k)
        Standard errors of the differences (``sqrt(Σ_ii + Σ_jj − 2Σ_ij)``; the pooled one for
        the studentized range).
    statistic : ndarray (k, k)
        Test statistics ``(Ĝ_i − Ĝ_j)/SE_ij`` (with the null-centred SE for
        ``variance="score"``).
    pvalue : ndarray (k, k)
        Multiplicity-adjusted p-values.
    raw_pvalue : ndarray (k, k)
        Unadjusted two-sided p-values of :attr:`statistic` (Wald, or score with
        ``variance="score"``).
    method : str
    level : float
        Simultaneous confidence level of :meth:`confidence_interval` and :attr:`reject`.
    critical_value : float
        Simultaneous critical value ``c`` for ``|statistic|`` (intervals ``Δ̂ ± c·SE``).
    baseline : str or None
    measure : str
    greater_is_better : bool
    n_draws, n_labels : int
    per_model : Estimate or None
        The ``k`` estimates on the shared draws (the stacked measure, its joint covariance and
        each model's own interval); ``None`` for threshold-free measures.
    interval_critical : FamilyCritical or None
        The max-|z| on ``Σ̂`` behind the Newcombe intervals of Tukey and Dunnett when the tests
        used another covariance (``variance="score"``).
    equal_weights : bool
        Whether every draw had the same importance weight (passive sampling).
    support_mass : float
        ``P(D)``, the mass of the items where some two models' losses can differ, when the
        differences are post-stratified on them (plain risks under an active proposal, as in
        :func:`~bayes_activeeval.compare`); 1 otherwise. :attr:`difference` and its tests are
        then ``P(D)`` times the self-normalized estimates on the draws in ``D``, while
        :attr:`estimates` and :attr:`cov` are the models' own estimates from every draw.
    stratum_size : float or None
        The Kish size of the draws in ``D`` when the differences are post-stratified.
    """

    models: tuple[str, ...]
    estimates: np.ndarray
    cov: np.ndarray
    difference: np.ndarray
    stderr: np.ndarray
    statistic: np.ndarray
    pvalue: np.ndarray
    raw_pvalue: np.ndarray
    method: str
    level: float
    critical_value: float
    baseline: str | None
    measure: str
    greater_is_better: bool
    n_draws: int
    n_labels: int
    variance: str = "wald"
    critical: FamilyCritical | None = field(default=None, repr=False)
    sums: ScoreSums | None = field(default=None, repr=False)
    bounds: tuple[float, float] = (-np.inf, np.inf)
    per_model: Estimate | None = field(default=None, repr=False)
    interval_critical: FamilyCritical | None = field(default=None, repr=False)
    equal_weights: bool = False
    support_mass: float = 1.0
    stratum_size: float | None = None
    restricted: dict | None = field(default=None, repr=False)
    score_pairs: np.ndarray | None = field(default=None, repr=False)

    # -- tables ----------------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.models)

    @property
    def stderrs(self) -> np.ndarray:
        """Standard errors of the ``k`` estimates."""
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))

    @property
    def reject(self) -> np.ndarray:
        """``pvalue < 1 − level`` (the family-wise error is at most ``1 − level``)."""
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(self.pvalue), False, self.pvalue < 1.0 - self.level)

    def confidence_interval(
        self, level: float | None = None, method: str | None = None
    ) -> ConfidenceInterval:
        """Simultaneous intervals for every ``G_i − G_j`` in the family, ``(low, high)`` k × k.

        Under an active proposal (unequal importance weights) the default is the intervals dual
        to the tests (:attr:`reject`); under passive sampling it is Newcombe's hybrid, which
        agrees with them except when a pair has only a handful of discordant draws, as for two
        models (:meth:`ComparisonResult.confidence_interval`).

        Parameters
        ----------
        level : float, optional
            Simultaneous level (default :attr:`level`).
        method : {"newcombe", "test"}, optional
            ``"newcombe"`` (default for a measure with a bounded range when every model's
            estimate is identified and every draw has the same importance weight — passive
            sampling): Newcombe's (1998) hybrid score interval per pair, as
            :meth:`ComparisonResult.confidence_interval` gives for two models, with the normal
            quantile ``z`` replaced by the simultaneous critical value ``c`` of the family — each
            model's own score interval (:meth:`Estimate.confidence_interval`, modified Wilson on
            the effective size) at the marginal level ``2Φ(c) − 1``, combined with the correlation
            of the two estimates in the joint covariance ``Σ̂``
            (:func:`~bayes_activeeval.intervals.newcombe_difference`). ``c`` is the ``level``
            quantile of ``max_{(i,j)} |Z_i − Z_j|/SE_ij`` for ``Z ∼ N(0, Σ̂)`` (Tukey, Dunnett:
            the single-step max-|z| of Hothorn, Bretz & Westfall (2008), on ``Σ̂`` whatever
            ``variance`` the tests used), ``z_{1−α/2K}`` (Bonferroni, Holm), ``q_{k,ν}/√2``
            (studentized range) or ``z_{1−α/2}`` (``"none"``). Under passive sampling and for
            large samples the interval is close to ``Δ̂_ij ± c SE_ij``, the max-|z| interval;
            near a bound it keeps the width of the models' score intervals where the Wald form
            collapses to a point, and it always lies inside ``[lo − hi, hi − lo]``. Where some
            contrast of the family has ``SE = 0`` (every draw agrees on it), ``Σ̂`` says
            nothing about its joint distribution and ``c`` is Bonferroni's, always valid (the
            max-|z| quantile lies between ``z_{1−α/2}`` and it). Not exactly dual to the tests
            (:attr:`reject`), as for two models. Under an active proposal (unequal weights) it
            is not the default and it is not ``Δ̂_ij ± c SE_ij`` even for large samples: the
            models' own intervals are wide and skewed (small effective sample size) and the skew
            does not cancel in the difference, so it can contain 0 for a pair the tests reject
            with ``p = 2e-33``.
            ``"test"`` (default otherwise): the intervals dual to the tests —
            Tukey/Dunnett ``Δ̂_ij ± c SE_ij`` with ``c`` the quantile of the tests' max-|z|
            (with ``variance="score"``: the pairs' score tests inverted at ``c`` by
            :func:`invert_score_test`; for a ratio or non-linear measure each pair's
            generalized score test, every ``Δ0`` at its own null-restricted point, by
            :func:`invert_statistic`, and a pair whose interval would be the point ``Δ̂``
            gets Newcombe's where it applies, as :meth:`ComparisonResult.confidence_interval`);
            studentized range: ``c = q_{k,ν}(level)/√2`` with the
            pooled SE; Holm and Bonferroni: Bonferroni intervals (level ``1 − (1 − level)/K``;
            Holm has no matching simultaneous intervals); ``"none"``: per-pair Wald intervals —
            clipped to the range of a difference, which never changes whether an interval
            contains 0. Post-stratified differences (:attr:`support_mass` below 1) are clipped
            to ``P(D)`` times that range, and a pair whose interval would be a point (every draw
            in ``D`` with the same difference, or none) gets Wilson's interval on ``D``'s Kish
            size at the family's critical value, as :meth:`ComparisonResult.confidence_interval`.
            For an average of per-class ratios, a pair with a class that no draw tells apart
            is widened by :func:`class_allowance` at ``c`` (Newcombe's for precision and F1
            parts), as :meth:`ComparisonResult.confidence_interval`.
        """
        level = self.level if level is None else check_level(level)
        lo_b, hi_b = self.bounds
        d_lo, d_hi = lo_b - hi_b, hi_b - lo_b
        newcombe_ok = (
            self.per_model is not None
            and bool(np.isfinite(d_lo) and np.isfinite(d_hi))
            and bool(np.all(np.isfinite(self.per_model.values)))
        )
        why = "a measure with a bounded range and every model's estimate"
        chosen = interval_method(method, newcombe_ok, why, equal_weights=self.equal_weights)
        if chosen == "newcombe":
            return self._newcombe_interval(level)
        c = self.critical_value if level == self.level else self.critical.quantile(level)
        if self.stratum_size is not None:  # post-stratified: Δ = P(D)·E[δ | D]
            d_lo, d_hi = self.support_mass * d_lo, self.support_mass * d_hi
        nan = np.isnan(self.difference)
        if self.restricted is not None:
            # a non-linear difference: each pair's generalized score test inverted at c, every
            # Δ0 at its own restricted point (as compare())
            lo, hi = self._restricted_intervals(c, (d_lo, d_hi))
        elif self.sums is not None and self.score_pairs is None:
            # invert |Σ v (δ − Δ0)| ≤ c sqrt(Σ v² (δ − Δ0)²) per pair (as compare(variance="score"))
            lo, hi = invert_score_test(self.sums, c)
            lo, hi = lo * self.support_mass, hi * self.support_mass
        else:
            lo, hi = self.difference - c * self.stderr, self.difference + c * self.stderr
            if self.sums is not None:  # Wald pairs tested by their score statistic (flat SE)
                slo, shi = invert_score_test(self.sums, c)
                lo = np.where(self.score_pairs, slo * self.support_mass, lo)
                hi = np.where(self.score_pairs, shi * self.support_mass, hi)
        lo = np.where(nan, np.nan, np.clip(lo, d_lo, d_hi))
        hi = np.where(nan, np.nan, np.clip(hi, d_lo, d_hi))
        if method is None and self.stratum_size is not None and np.isfinite(d_hi - d_lo):
            # a pair whose draws in D all have the same δ (or no draw in D): the test's interval
            # is a point; Wilson's on D's Kish size at the family's critical value, as compare()
            lo, hi = _fill_points(lo, hi, nan, d_hi - d_lo, lambda: self._stratum_wilson(c))
        point = ~nan & ~(hi - lo > 1e-6 * (d_hi - d_lo))
        if method is None and self.restricted is not None and newcombe_ok:
            # a pair whose test interval is the point Δ̂ (every draw's terms alike): Newcombe's
            # keeps the models' widths, as compare()
            lo, hi = _fill_points(lo, hi, nan, d_hi - d_lo, lambda: self._newcombe_interval(level))
        else:
            point[:] = False
        if method is None and self.restricted is not None:
            # a pair with a class that no draw tells apart: widened by the class's allowance at
            # c (class_allowance), else Newcombe's, else the difference's range, as compare()
            h = np.zeros(lo.shape)
            for (i, j), (rs, _, _) in self.restricted.items():
                h[i, j] = h[j, i] = class_allowance(rs, c)
            h = np.where(nan | point, 0.0, h)
            if np.any(h > 0):
                wl, wh = widen(self.difference, lo, hi, np.where(np.isfinite(h), h, 0.0))
                wl, wh = np.clip(wl, d_lo, d_hi), np.clip(wh, d_lo, d_hi)
                lo, hi = np.where(h > 0, wl, lo), np.where(h > 0, wh, hi)
                if np.any(np.isinf(h)):
                    if newcombe_ok:
                        low, high = self._newcombe_interval(level)
                    else:
                        low, high = np.full(lo.shape, d_lo), np.full(hi.shape, d_hi)
                    lo, hi = np.where(np.isinf(h), low, lo), np.where(np.isinf(h), high, hi)
        return ConfidenceInterval(lo, hi)

    def _restricted_intervals(
        self, c: float, bounds: tuple[float, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each pair's generalized score test inverted at ``c`` (:func:`invert_statistic` of its
        :class:`~bayes_activeeval.comparison.pairwise.RestrictedScore`, from the pair's own
        estimate and standard error, as :meth:`ComparisonResult.confidence_interval`); a pair
        whose test is not defined keeps ``Δ̂ ± c·SE``."""
        lo = self.difference - c * self.stderr
        hi = self.difference + c * self.stderr
        for (i, j), (rs, centre, scale) in self.restricted.items():
            low, high = invert_statistic(
                rs.statistic, c, centre, bounds, scale, float(self.statistic[i, j])
            )
            lo[i, j], hi[i, j] = low, high
            lo[j, i], hi[j, i] = -high, -low
        return lo, hi

    def _stratum_wilson(self, c: float) -> tuple[np.ndarray, np.ndarray]:
        d = np.where(np.isnan(self.difference), 0.0, self.difference)
        level = float(np.clip(2.0 * stats.norm.cdf(c) - 1.0, 1e-12, 1.0 - 1e-15))
        return stratum_wilson(d, self.support_mass, self.stratum_size, self.bounds, level)

    def interval_critical_value(self, level: float | None = None) -> float:
        """The simultaneous critical value ``c`` of the Newcombe intervals: the
        ``level`` quantile of the family's max-|z| under ``N(0, Σ̂)`` for Tukey and Dunnett
        (Bonferroni's where a contrast has ``SE = 0``), the tests' critical value otherwise."""
        level = self.level if level is None else check_level(level)
        crit = self.interval_critical if self.interval_critical is not None else self.critical
        if crit.method in ("tukey", "dunnett"):
            dist = crit.max_abs_z
            if dist is None or dist.K < crit.n_pairs:
                return float(stats.norm.ppf(1 - (1 - level) / (2 * crit.n_pairs)))
        return crit.quantile(level)

    def _newcombe_interval(self, level: float) -> ConfidenceInterval:
        c = self.interval_critical_value(level)
        marginal = float(np.clip(2.0 * stats.norm.cdf(c) - 1.0, level, 1.0 - 1e-15))
        own = self.per_model.confidence_interval(marginal)
        lo_i, hi_i = np.atleast_1d(own.low), np.atleast_1d(own.high)
        G = self.per_model.values
        cov = self.per_model.cov
        s = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.where(np.outer(s, s) > 0, cov / np.outer(s, s), 0.0)
        lo_b, hi_b = self.bounds
        low, high = intervals.newcombe_difference(
            (G[:, None], G[None, :]),
            ((lo_i[:, None], hi_i[:, None]), (lo_i[None, :], hi_i[None, :])),
            corr,
            (lo_b - hi_b, hi_b - lo_b),
        )
        nan = np.isnan(self.difference)
        return ConfidenceInterval(np.where(nan, np.nan, low), np.where(nan, np.nan, high))

    def to_dataset(self) -> xr.Dataset:
        """The k × k tables as an :class:`xarray.Dataset` (dims ``model``, ``versus``)."""
        ci = self.confidence_interval()
        coords = {"model": list(self.models), "versus": list(self.models)}
        dims = ("model", "versus")
        return xr.Dataset(
            {
                "difference": (dims, self.difference),
                "stderr": (dims, self.stderr),
                "statistic": (dims, self.statistic),
                "pvalue": (dims, self.pvalue),
                "raw_pvalue": (dims, self.raw_pvalue),
                "lower": (dims, ci.low),
                "upper": (dims, ci.high),
                "reject": (dims, self.reject),
                "estimate": (("model",), self.estimates),
            },
            coords=coords,
            attrs={"method": self.method, "level": self.level, "measure": self.measure},
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per tested pair ``(i < j)``, like statsmodels' ``summary_frame``."""
        ci = self.confidence_interval()
        rows = []
        for i, j in self._pairs():
            rows.append(
                {
                    "model": self.models[i],
                    "versus": self.models[j],
                    "difference": self.difference[i, j],
                    "stderr": self.stderr[i, j],
                    "statistic": self.statistic[i, j],
                    "pvalue": self.pvalue[i, j],
                    "lower": ci.low[i, j],
                    "upper": ci.high[i, j],
                    "reject": bool(self.reject[i, j]),
                }
            )
        return pd.DataFrame(rows)

    def _pairs(self) -> list[tuple[int, int]]:
        if self.baseline is not None:
            b = self.models.index(self.baseline)
            return [(i, b) for i in range(self.k) if i != b]
        return [(i, j) for i in range(self.k) for j in range(i + 1, self.k)]

    # -- ranking ---------------------------------------------------------------------------------
    def ranking(self) -> pd.DataFrame:
        """Models ordered best first: estimate, stderr and rank (1 = best)."""
        order = np.argsort(-self.estimates if self.greater_is_better else self.estimates)
        return pd.DataFrame(
            {
                "estimate": self.estimates[order],
                "stderr": self.stderrs[order],
                "rank": np.arange(1, self.k + 1),
            },
            index=pd.Index([self.models[i] for i in order], name="model"),
        )

    def _samples(self, n_samples, rng, posterior) -> tuple[np.ndarray, str]:
        if posterior is None:
            n_samples = check_count(n_samples, "n_samples")
            rng = check_rng(rng)
            cov = 0.5 * (self.cov + self.cov.T)
            draws = rng.multivariate_normal(self.estimates, cov, size=n_samples, method="eigh")
            return draws, "bootstrap"
        return _posterior_samples(posterior, self.models), "posterior"

    def best(self, *, n_samples: int = 20_000, rng: Any = None, posterior: Any = None) -> BestModel:
        """The best model and ``P(best)`` for every model.

        Without ``posterior``: a parametric bootstrap from the joint normal ``N(Ĝ, Σ̂)`` of the
        estimates (their asymptotic sampling distribution, Sawade (2012), Lemma 3.4; the model
        picked is ``argbest Ĝ`` as in Sawade (2012), Algorithm 3, line 7). With ``posterior``: the
        fraction of posterior draws in which each model is best.

        Parameters
        ----------
        n_samples : int
            Bootstrap draws.
        rng : None, int or Generator
        posterior : array-like (S, k) or xarray.DataArray, optional
            Posterior draws of the measure for each model (columns in the order of
            :attr:`models`), or a DataArray with a ``model`` dimension (other dims flattened).
        """
        samples, source = self._samples(n_samples, rng, posterior)
        pick = np.argmax(samples, axis=1) if self.greater_is_better else np.argmin(samples, axis=1)
        prob = np.bincount(pick, minlength=self.k) / samples.shape[0]
        series = pd.Series(prob, index=pd.Index(self.models, name="model"), name="p_best")
        top = self.ranking().index[0]
        return BestModel(top, float(series[top]), series, source)

    def rank_probabilities(
        self, *, n_samples: int = 20_000, rng: Any = None, posterior: Any = None
    ) -> pd.DataFrame:
        """``P(model has rank r)`` (1 = best), a k × k table, by the same parametric bootstrap
        (or posterior draws) as :meth:`best`."""
        samples, _ = self._samples(n_samples, rng, posterior)
        key = -samples if self.greater_is_better else samples
        ranks = np.argsort(np.argsort(key, axis=1), axis=1)  # 0 = best
        table = np.stack([np.bincount(ranks[:, i], minlength=self.k) for i in range(self.k)])
        return pd.DataFrame(
            table / samples.shape[0],
            index=pd.Index(self.models, name="model"),
            columns=pd.Index(np.arange(1, self.k + 1), name="rank"),
        )

    # -- text ------------------------------------------------------------------------------------
    def summary(self) -> str:
        """A readable table of the pairwise comparisons and the ranking."""
        lvl = f"{100 * self.level:g}%"
        head = (
            f"Simultaneous comparison of {self.k} models on {self.measure} "
            f"({self.method}, {lvl} family-wise; n_draws={self.n_draws}, "
            f"n_labels={self.n_labels})"
        )
        frame = self.to_frame()
        with pd.option_context("display.width", 120, "display.float_format", "{:.4g}".format):
            pairs = frame.to_string(index=False)
            rank = self.ranking().to_string()
        return f"{head}\n{pairs}\n\nranking ({'higher' if self.greater_is_better else 'lower'} is better):\n{rank}"

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        n_rej = int(np.sum(np.triu(self.reject | self.reject.T, 1)))
        return (
            f"MultipleComparisonResult(measure={self.measure!r}, method={self.method!r}, "
            f"models={list(self.models)}, level={self.level}, rejected_pairs={n_rej}, "
            f"best={self.ranking().index[0]!r})"
        )


def _fill_points(lo, hi, nan, width, fill) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` with the pairs whose interval is a point (``hi − lo ≤ 1e-6 · width``; not
    the NaN ones outside the family) replaced by those of ``fill()``, which gives the ``k × k``
    ends of the fallback interval and is only called when some pair needs it."""
    point = ~nan & ~(hi - lo > 1e-6 * width)
    if np.any(point):
        low, high = fill()
        lo, hi = np.where(point, low, lo), np.where(point, high, hi)
    return lo, hi


def _posterior_samples(posterior, models) -> np.ndarray:
    if isinstance(posterior, xr.DataArray):
        if "model" not in posterior.dims:
            raise ValueError(f"posterior needs a 'model' dimension, has {posterior.dims}")
        arr = posterior.sel(model=list(models)).transpose(..., "model").values
        arr = arr.reshape(-1, len(models))
    else:
        arr = np.asarray(posterior, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != len(models):
            raise ValueError(f"posterior must have shape (n_draws, {len(models)}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("posterior has non-finite draws")
    return arr


class MaxAbsZ:
    """Distribution of ``max_r |(C Z)_r| / s_r`` for ``Z ∼ N(0, Σ)`` (the max-|z| of a family
    of contrasts; Hothorn, Bretz & Westfall (2008) single-step procedure).

    ``engine="qmc"``: randomized Sobol' points of the ``k``-dim normal (one sample answers every
    p-value and the critical value, so intervals and tests agree exactly); ``engine="scipy"``:
    :func:`scipy.stats.multivariate_normal.cdf` of the box ``[−t, t]^K`` over the correlation of
    the contrasts (Genz's algorithm; slow for singular all-pairs families with many models).
    """

    def __init__(self, C, cov, engine, n_points, rng):
        self.C = C
        V = C @ cov @ C.T
        self.s = np.sqrt(np.clip(np.diag(V), 0.0, None))
        self.engine = engine
        self.rng = rng
        ok = self.s > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            self.R = V[np.ix_(ok, ok)] / np.outer(self.s[ok], self.s[ok])
        self.K = int(ok.sum())
        if engine == "qmc" and self.K > 0:
            k = cov.shape[0]
            w, U = np.linalg.eigh(0.5 * (cov + cov.T))
            root = U * np.sqrt(np.clip(w, 0.0, None))
            m = int(2 ** np.ceil(np.log2(n_points)))
            sob = stats.qmc.Sobol(k, scramble=True, rng=rng).random(m)
            zs = stats.norm.ppf(np.clip(sob, 1e-16, 1 - 1e-16)) @ root.T
            D = zs @ C[ok].T / self.s[ok]
            self.maxabs = np.sort(np.abs(D).max(axis=1))

    def sf(self, t: float) -> float:
        if not np.isfinite(t):
            return 0.0 if np.isinf(t) else np.nan
        if self.K == 0:  # every contrast has SE = 0: the max-|z| is 0 (every draw agrees)
            return 1.0 if t <= 0 else 0.0
        if self.engine == "qmc":
            return float(1.0 - np.searchsorted(self.maxabs, t, side="left") / self.maxabs.size)
        K = self.K
        R = self.R + 1e-9 * np.eye(K)
        cdf = stats.multivariate_normal.cdf(
            np.full(K, t),
            mean=np.zeros(K),
            cov=R,
            allow_singular=True,
            lower_limit=np.full(K, -t),
            abseps=MVN_ABSEPS,
            releps=0.0,
            rng=self.rng,
        )
        return float(np.clip(1.0 - cdf, 0.0, 1.0))

    def quantile(self, level: float) -> float:
        if self.K == 0:
            return 0.0
        if self.engine == "qmc":
            return float(np.quantile(self.maxabs, level))
        lo = stats.norm.ppf(0.5 + level / 2)
        hi = stats.norm.ppf(1 - (1 - level) / (2 * self.K)) + 0.5
        return float(optimize.brentq(lambda t: self.sf(t) - (1 - level), lo, hi, xtol=1e-4))


@dataclass(frozen=True)
class FamilyCritical:
    """The simultaneous critical value of a multiple-comparison procedure at any level.

    Data, not a closure, so a :class:`MultipleComparisonResult` pickles: ``method`` with what it
    needs — the max-|z| distribution (``"tukey"``, ``"dunnett"``), ``k`` and ``df``
    (``"studentized_range"``), the family size ``n_pairs`` (``"holm"``, ``"bonferroni"``).

    Parameters
    ----------
    method : {"tukey", "studentized_range", "dunnett", "holm", "bonferroni", "none"}
        The multiple-comparison procedure (``"none"``: the per-pair ``z_{(1+level)/2}``).
    k : int
        The number of models.
    n_pairs : int
        The number of contrasts in the family.
    df : float, optional
        Degrees of freedom of the studentized range (default ``inf``).
    max_abs_z : MaxAbsZ, optional
        The max-|z| distribution of the family, needed by ``"tukey"`` and ``"dunnett"``
        (default ``None``).
    """

    method: str
    k: int
    n_pairs: int
    df: float = np.inf
    max_abs_z: MaxAbsZ | None = None

    def quantile(self, level: float) -> float:
        if self.method in ("tukey", "dunnett"):
            return self.max_abs_z.quantile(level)
        if self.method == "studentized_range":
            return float(stats.studentized_range.ppf(level, self.k, self.df) / np.sqrt(2.0))
        if self.method in ("holm", "bonferroni"):
            return float(stats.norm.ppf(1 - (1 - level) / (2 * self.n_pairs)))
        return float(stats.norm.ppf(0.5 + level / 2))
