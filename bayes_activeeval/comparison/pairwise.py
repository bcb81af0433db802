"""Two models: the paired test (:func:`compare`) and the proposals for comparing (:func:`comparison_proposal`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .. import intervals
from .._validation import check_fraction, check_model_names, show
from ..beliefs import as_belief, pool_belief
from ..estimators import draw_labels, weighted_estimate
from ..kernel import (
    CHUNK,
    DEFAULT_BELIEF_FLOOR,
    DEFAULT_MIX,
    deviation_integrand,
    label_costs,
    mix_proposal,
    proposal_scores,
)
from ..measures import Measure, difference, stack
from ..measures import get as get_measure
from ..proposals import Draws, Proposal, ProposalInfo, optimal_proposal
from ..threshold_free import (
    RankMeasure,
    comparison_rank_proposal,
    rank_estimate,
    stacked_estimate,
)
from .results import ComparisonResult, ScoreSums, has_equal_weights

_ALTERNATIVES = ("two-sided", "less", "greater")
PROPOSAL_KINDS = ("optimal", "passive", "active_0", "active_inf", "active_neq", "active_risk")


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def models_arg(
    pool, models, minimum: int, *, two: bool = False, name: str = "models"
) -> tuple[str, ...]:
    if models is None:
        models = pool.models
        if two and len(models) != 2:
            raise ValueError(
                f"the pool has models {list(models)}; name the two to compare with {name}=(a, b)"
            )
    models = check_model_names(models, minimum, name)
    for m in models:
        pool.check_model(m)
    return models


def is_linear(measure: Measure) -> bool:
    """``g`` is the identity (a plain risk such as the error rate or MSE)."""
    return measure.plain_risk


def check_inputs(draws: Draws, oracle: str, variance: str) -> None:
    """Checks shared by :func:`compare` and :func:`multiple_comparison`."""
    if not isinstance(draws, Draws):
        raise TypeError(
            f"draws must be a Draws object (from Proposal.draw), got {type(draws).__name__}"
        )
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    if variance not in ("auto", "wald", "score"):
        raise ValueError(f"variance must be 'auto', 'wald' or 'score', got {variance!r}")


def resolve_variance(variance: str) -> str:
    """``"auto"``: ``"score"`` — the score test for plain risks and the generalized score test
    (:func:`restricted_influence`) for ratio and other non-linear measures."""
    return "score" if variance == "auto" else variance


def restricted_influence(
    L: np.ndarray, v: np.ndarray, diff_m: Measure, delta0: float = 0.0
) -> np.ndarray:
    """The paired influence terms of a non-linear difference ``g(R_a) − g(R_b)`` linearized at a
    point of the null hypothesis: the per-draw terms of the generalized score test of
    ``H0: g(R_a) − g(R_b) = Δ0`` (Boos (1992), Eqs. 5-6: the estimating function and its
    empirical (sandwich) variance at the null-restricted estimate; Rao's score test with the
    nuisance estimated under ``H0``).

    With ``R̂_a, R̂_b`` the self-normalized risk vectors (Sawade (2012), Eq. 3.31),
    ``R̄ = (R̂_a + R̂_b)/2`` and ``J̄`` the measure's Jacobian at ``R̄``, the restricted point is
    ``R_a⁰ = R̄ + d₀/2``, ``R_b⁰ = R̄ − d₀/2`` with ``d₀ = (R̂_a − R̂_b) − β (J̄(R̂_a − R̂_b) − Δ0)``:
    the difference of the risk vectors moved along ``β`` until its linearized difference is
    ``Δ0`` (``β = Σ v² δ̃ (ℓ_a − ℓ_b) / Σ v² δ̃²``, ``δ̃ = J̄(ℓ_a − ℓ_b)``, the regression of the
    paired loss differences on their linearized difference, so ``J̄β = 1`` and ``J̄ d₀ = Δ0``:
    ``R⁰`` satisfies ``H0`` to first order; for ``Δ0 = 0`` the component along the estimated
    difference is removed). The terms are
    ``ψ_i = Dg(R_a⁰)(ℓ_{a,i} − R_a⁰) − Dg(R_b⁰)(ℓ_{b,i} − R_b⁰)`` (Marchant & Rubinstein (2021),
    Thm. 2, at ``R⁰`` instead of ``R̂``); the statistic for ``Δ0`` is
    ``Σ v ψ / sqrt(Σ v² ψ²)``, and ``Σ v ψ / Σ v = Dg(R⁰)(R̂ − R⁰)`` is ``Δ̂ − Δ0`` to first
    order. Each ``Δ0`` needs its own ``R⁰``: the terms at ``R⁰(0)`` minus ``Δ0`` are not those
    at ``R⁰(Δ0)`` (for balanced accuracy the Jacobian at ``R⁰(Δ0)`` weighs the draws of a class
    by ``Δ0`` over the class's share, a term that the subtraction puts on every draw instead).

    Where the two models' losses agree ``ψ_i`` is ``(Dg(R_a⁰) − Dg(R_b⁰))(ℓ_i − R̄)`` (with
    ``Δ0 = 0``), first order in ``d₀`` and not in ``Δ̂``; the Wald terms there carry ``Δ̂``
    itself, so that the few heavy draws of a comparison proposal where the models agree made
    the Wald variance grow with ``|Δ̂|`` (a conservative test). For ``g`` a ratio ``T/W``
    (F1, F-β, precision, recall) ``J̄(R̂_a − R̂_b)`` is zero exactly when
    ``T̂_a/Ŵ_a = T̂_b/Ŵ_b`` (it is ``(T̂_a Ŵ_b − T̂_b Ŵ_a)/W̄²``). When the two models are
    exchangeable (each item's two losses equally likely either way round), ``δ̃`` changes sign
    with the orientation of the draw and ``Σ v δ̃ / sqrt(Σ v² δ̃²)`` is the plain-risk score
    statistic of the linearized losses. When no draw's two losses differ, ``Δ̂ = 0`` and the
    terms for ``Δ0 = 0`` are 0 (computed, they would be the rounding noise of
    ``J(ℓ − R̄) − J(ℓ − R̄)``, whose statistic could take any value up to ``√n``: balanced
    accuracy's exact null in ``benchmarks/compare_small_n.py`` was rejected 0.093 of the time at
    10 passive draws). If
    the Jacobian is not finite at ``R⁰`` the terms are taken at ``R̄`` (``d₀ = 0``) for
    ``Δ0 = 0`` and are NaN for any other ``Δ0``; if it is not finite at ``R̄``, they are NaN.
    For ``Δ0 ≠ 0`` the first-order point is refined by Newton's method along the same path
    until ``g(R_a⁰) − g(R_b⁰) = Δ0`` exactly (:meth:`RestrictedPath.point`); for ``Δ0 = 0`` it
    is kept (exact for a ratio).

    Parameters
    ----------
    L : ndarray (n, 2d)
        The losses of the difference measure, model ``a``'s ``d`` columns then ``b``'s.
    v : ndarray (n,)
        Importance weights ``p/q``.
    diff_m : Measure
        The resolved difference measure (:func:`~bayes_activeeval.measures.difference`).
    delta0 : float, optional
        The difference under the null hypothesis (default 0, the test of :func:`compare`).

    Returns
    -------
    ndarray (n,)
        ``ψ_i``; ``Σ v ψ / Σ v`` is the difference linearized at ``R⁰``.
    """
    return RestrictedPath(L, v, diff_m).influence(delta0)


class RestrictedPath:
    """The null-restricted points ``R⁰(Δ0)`` of :func:`restricted_influence` for every ``Δ0``
    (the pieces that do not depend on ``Δ0``, computed once).

    Parameters
    ----------
    L : ndarray (n, 2d)
        The losses of the difference measure, model ``a``'s ``d`` columns then ``b``'s.
    v : ndarray (n,)
        Importance weights ``p/q``.
    diff_m : Measure
        The resolved difference measure.
    """

    def __init__(self, L: np.ndarray, v: np.ndarray, diff_m: Measure):
        self.L = L = np.asarray(L, dtype=float)
        self.v = v
        self.diff_m = diff_m
        n, d = L.shape[0], L.shape[1] // 2
        self.n = n
        sv = float(v.sum())
        self.ok = False
        if n == 0 or not sv > 0:
            return
        R = (v @ L) / sv
        Ra, Rb = R[:d], R[d:]
        self.Rbar = Rbar = 0.5 * (Ra + Rb)
        with np.errstate(all="ignore"):
            J = np.asarray(diff_m.jacobian(np.concatenate([Rbar, Rbar])), dtype=float)[0]
        if not np.all(np.isfinite(J)):
            return
        Jbar = 0.5 * (J[:d] - J[d:])
        dl = L[:, :d] - L[:, d:]
        lin = dl @ Jbar
        v2 = v * v
        s2 = float(v2 @ (lin * lin))
        self.dR = Ra - Rb
        self.beta = (v2 * lin) @ dl / s2 if s2 > 0 else np.zeros(d)
        self.discordant = bool(np.any(dl != 0))
        self.slope = float(Jbar @ self.dR)
        self.ok = True

    def _terms(self, R0: np.ndarray, clean: bool = False) -> np.ndarray | None:
        with np.errstate(all="ignore"):
            J = np.asarray(self.diff_m.jacobian(R0), dtype=float)[0]
        if not np.all(np.isfinite(J)):
            return None
        dev = self.L - R0
        psi = dev @ J
        if clean:
            # the test of Δ = 0: a term that cancels to within rounding of its parts is 0. Two
            # precisions of exactly 1 (no false positive drawn for either model) left terms of
            # ~4e-16, whose statistic Σvψ/sqrt(Σv²ψ²) is anything up to sqrt(n): it rejected a
            # difference of exactly 0 (tests/test_comparison_second_review.py)
            psi[np.abs(psi) <= 1e-12 * (np.abs(dev) @ np.abs(J))] = 0.0
        return psi

    def _at(self, s: float) -> np.ndarray:
        d0 = self.dR - self.beta * s
        return np.concatenate([self.Rbar + 0.5 * d0, self.Rbar - 0.5 * d0])

    def point(self, delta0: float) -> tuple[np.ndarray, float]:
        """``R⁰(delta0)`` on the path ``d₀(s) = (R̂_a − R̂_b) − β s`` and its residual
        ``g(R_a⁰) − g(R_b⁰) − delta0``: the first-order point ``s = J̄(R̂_a − R̂_b) − delta0`` for
        ``delta0 = 0`` (the test of :func:`compare`, exact for a ratio ``T/W``, whose two
        ratios are equal exactly when ``J̄ d₀ = 0``), else refined by Newton's method in ``s``
        until ``g(R_a⁰) − g(R_b⁰) = delta0`` (steps halved while ``|residual|`` does not
        shrink); if that fails, the first-order point and its residual."""
        s0 = self.slope - delta0
        R0 = self._at(s0)
        if delta0 == 0:
            return R0, 0.0

        def resid(R):
            with np.errstate(all="ignore"):
                return float(np.asarray(self.diff_m.g(R), dtype=float)[0]) - delta0

        r0 = resid(R0)
        s, R, r = s0, R0, r0
        direction = np.concatenate([-0.5 * self.beta, 0.5 * self.beta])
        tol = 1e-12 * max(1.0, abs(delta0))
        for _ in range(30):
            if not np.isfinite(r) or abs(r) <= tol:
                break
            with np.errstate(all="ignore"):
                slope = float(np.asarray(self.diff_m.jacobian(R), dtype=float)[0] @ direction)
            if not (np.isfinite(slope) and slope != 0):
                break
            step = -r / slope
            for _ in range(30):
                R1 = self._at(s + step)
                r1 = resid(R1)
                if np.isfinite(r1) and abs(r1) < abs(r):
                    break
                step *= 0.5
            else:
                break
            s, R, r = s + step, R1, r1
        if np.isfinite(r) and abs(r) <= max(tol, 1e-9 * abs(r0)):
            return R, r
        return R0, r0

    def influence(self, delta0: float = 0.0) -> np.ndarray:
        """``ψ_i`` at ``R⁰(delta0)`` (NaN where not defined, see :func:`restricted_influence`)."""
        return self.terms(delta0)[0]

    def terms(self, delta0: float = 0.0) -> tuple[np.ndarray, float]:
        """``ψ_i`` at ``R⁰(delta0)`` and the residual ``g(R_a⁰) − g(R_b⁰) − delta0`` of
        :meth:`point`."""
        if not self.ok:
            return np.full(self.n, np.nan), np.nan
        if delta0 == 0 and not self.discordant:
            # every draw's two losses agree: Δ̂ = 0, and the terms at R_a⁰ = R_b⁰ = R̄ would be
            # rounding noise (J(ℓ − R̄) − J(ℓ − R̄)), whose statistic reached 6.6
            return np.zeros(self.n), 0.0
        R0, resid = self.point(delta0)
        psi = self._terms(R0, clean=delta0 == 0)
        if psi is None and delta0 == 0:
            psi = self._terms(np.concatenate([self.Rbar, self.Rbar]), clean=True)
        return (np.full(self.n, np.nan), np.nan) if psi is None else (psi, resid)


@dataclass(frozen=True, eq=False)
class RestrictedScore:
    """The draws behind the generalized score test of a non-linear difference (:func:`compare`
    for F1, precision, MCC, balanced accuracy, …), kept to invert the test: its statistic for
    any ``H0: Δ = Δ0`` is ``Σ v ψ(Δ0) / sqrt(Σ v² ψ(Δ0)²)`` with the influence terms
    ``ψ(Δ0)`` at the null-restricted point ``R⁰(Δ0)`` (Boos (1992), Eqs. 5-6;
    :func:`restricted_influence`), and at ``Δ0 = 0`` it is the test's statistic, bit for bit.

    Data, so a :class:`~bayes_activeeval.comparison.ComparisonResult` pickles: the measure is
    rebuilt from ``measure`` (a name, or the :class:`~bayes_activeeval.Measure` given to
    :func:`compare`), ``models`` and ``n_classes`` after unpickling.

    Parameters
    ----------
    losses : ndarray (n, 2d)
        The difference measure's losses of the draws, model ``a``'s columns then ``b``'s.
    weights : ndarray (n,)
        The weights of the test (``p/q``, rescaled by :func:`~bayes_activeeval.intervals.unhuge`).
    measure : str or Measure
        The measure compared, as given to :func:`compare`.
    models : (str, str)
        ``(a, b)``.
    n_classes : int
        The pool's number of classes (sizes the measure's components).
    predicted : ndarray of bool (2, C) or None, optional
        Which classes each model predicts somewhere in the pool
        (:meth:`~bayes_activeeval.Measure.with_predicted`; an average of per-class ratios reads
        it, e.g. the comparison's class allowance), carried so that the rebuilt measure knows it.
    agree : ndarray of bool (C,) or None, optional
        The classes the two models predict on exactly the same pool items
        (:meth:`~bayes_activeeval.Pool.agreeing_classes`): their part of the difference is 0,
        which the comparison's class allowance reads.
    """

    losses: np.ndarray
    weights: np.ndarray
    measure: Any
    models: tuple[str, str]
    n_classes: int
    predicted: np.ndarray | None = None
    agree: np.ndarray | None = None

    @property
    def path(self) -> RestrictedPath:
        path = self.__dict__.get("_path")
        if path is None:
            m = difference(get_measure(self.measure), *self.models).resolve(self.n_classes)
            m = m.with_predicted(self.predicted)
            path = self.__dict__["_path"] = RestrictedPath(self.losses, self.weights, m)
        return path

    def __getstate__(self) -> dict:
        return {k: val for k, val in self.__dict__.items() if k != "_path"}

    def statistic(self, delta0: float) -> float:
        """The generalized score statistic of ``H0: Δ = delta0``,
        ``(Σ v ψ + W r) / sqrt(Σ v² ψ²)`` with ``ψ`` at ``R⁰(delta0)`` and ``r`` the residual
        ``g(R_a⁰) − g(R_b⁰) − delta0`` of that point (0 where Newton's method reached the
        null; where it did not, ``W r`` puts the first-order point's miss back into the
        estimating function, ``Σ v ψ / W`` being ``Δ̂ − delta0 − r`` to first order); NaN where
        ``ψ`` is not defined, ``±inf`` when ``Σ v² ψ² = 0`` and the numerator is not."""
        delta0 = float(delta0)
        psi, resid = self.path.terms(delta0)
        if not np.all(np.isfinite(psi)):
            return np.nan
        sums = ScoreSums.of(self.weights, psi)
        if delta0 == 0:  # the reported test, bit for bit
            return _z(sums.A, np.sqrt(sums.B))
        return _z(sums.A + sums.W * resid, np.sqrt(sums.B))


def restricted_score_test(
    L: np.ndarray,
    v: np.ndarray,
    diff_m: Measure,
    spec: Any,
    pair: tuple[str, str],
    pool,
) -> tuple[float, ScoreSums | None, np.ndarray | None, RestrictedScore | None]:
    """The generalized score test of ``H0: g(R_a) = g(R_b)`` for one pair of models (Boos
    (1992), Eqs. 5-6): the statistic ``Σ v ψ / sqrt(Σ v² ψ²)`` with the influence terms ``ψ`` at
    the null-restricted point (:func:`restricted_influence`), as :func:`compare` and
    :func:`~bayes_activeeval.multiple_comparison` test a ratio or non-linear measure.

    Parameters
    ----------
    L : ndarray (n, 2d)
        The difference measure's losses of the draws, model ``a``'s columns then ``b``'s.
    v : ndarray (n,)
        The draws' importance weights ``p/q`` (rescaled here by
        :func:`~bayes_activeeval.intervals.unhuge`).
    diff_m : Measure
        The resolved difference measure of the pair.
    spec : str or Measure
        The measure as given by the caller (kept to rebuild ``diff_m`` after unpickling).
    pair : (str, str)
        ``(a, b)``.
    pool : Pool or LazyPool
        The pool: its number of classes and, for an average of per-class ratios, the classes
        the pair predicts on exactly the same items (:meth:`~bayes_activeeval.Pool.agreeing_classes`),
        kept with the test (:class:`RestrictedScore`).

    Returns
    -------
    statistic : float
        NaN where the measure is not defined at the pooled point (e.g. no positive drawn), 0
        without draws.
    sums : ScoreSums or None
        The sums of ``(v, ψ)`` (``None`` where the statistic is not defined).
    terms : ndarray (n,) or None
        ``ψ``.
    restricted : RestrictedScore or None
        The draws behind the test, to invert it.
    """
    vs = intervals.unhuge(v)[0]
    path = RestrictedPath(L, vs, diff_m)
    psi = path.influence(0.0)
    if L.shape[0] and np.all(np.isfinite(psi)) and vs.sum() > 0:
        sums = ScoreSums.of(vs, psi)
        agree = pool.agreeing_classes(*pair) if diff_m.averaged else None
        restricted = RestrictedScore(L, vs, spec, pair, pool.n_classes, diff_m.predicted, agree)
        restricted.__dict__["_path"] = path
        return _z(sums.A, np.sqrt(sums.B)), sums, psi, restricted
    return (np.nan if L.shape[0] else 0.0), None, None, None


def _check_alternative(alternative: str) -> str:
    if alternative not in _ALTERNATIVES:
        raise ValueError(
            f"alternative must be 'two-sided', 'less' or 'greater', got {alternative!r}"
        )
    return alternative


def _wald_pvalue(z: float, alternative: str) -> float:
    """Wald p-value (Sawade (2012), Eq. 3.24); ``2·sf`` rather than ``2(1 − cdf)``."""
    if np.isnan(z):
        return np.nan
    if alternative == "two-sided":
        return float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
    if alternative == "less":
        return float(stats.norm.cdf(z))
    return float(stats.norm.sf(z))


def _z(estimate: float, stderr: float) -> float:
    if not np.isfinite(estimate) or not np.isfinite(stderr):
        return np.nan
    if stderr > 0:
        return estimate / stderr
    # degenerate sample (all paired differences equal): no evidence if Δ̂ = 0 (Sawade (2012), Eq. 3.22 is 0)
    return 0.0 if estimate == 0 else np.copysign(np.inf, estimate)


def wald_test(
    estimate: float, stderr: float, alternative: str = "two-sided"
) -> tuple[float, float]:
    """Wald statistic ``T = Δ̂/SE`` and its p-value (Sawade (2012), Eq. 3.23-3.24).

    For callers that estimate ``Δ̂`` and its standard error themselves (e.g.
    :mod:`bayes_activeeval.ranking`). A zero standard error gives ``T = 0`` if ``Δ̂ = 0`` and
    ``±inf`` otherwise; a negative one is a ``ValueError``.

    Parameters
    ----------
    estimate : float
        ``Δ̂``, the estimated difference ``G_a − G_b``.
    stderr : float
        Its standard error, ``≥ 0`` (NaN gives NaN).
    alternative : {"two-sided", "less", "greater"}, optional
        ``"less"``: ``H1: Δ < 0``; ``"greater"``: ``H1: Δ > 0`` (default ``"two-sided"``).

    Returns
    -------
    statistic : float
        ``T`` (NaN when ``estimate`` or ``stderr`` is not finite).
    pvalue : float
        Its p-value under the standard normal (NaN with ``T``).

    Raises
    ------
    ValueError
        If ``stderr`` is negative.
    """
    alternative = _check_alternative(alternative)
    if float(stderr) < 0:
        raise ValueError(f"stderr must be non-negative, got {show(stderr)}")
    z = _z(float(estimate), float(stderr))
    return float(z), _wald_pvalue(z, alternative)


def disagreement(pool, measure: str | Measure, a: str, b: str) -> np.ndarray:
    """Items where the losses of models ``a`` and ``b`` can differ, ``D_≠`` (Sawade (2012),
    Sec. 5.2.2).

    For classification an item belongs to ``D_≠`` when ``ℓ_a(x, y) ≠ ℓ_b(x, y)`` for some class
    ``y`` (exact enumeration over the classes); for regression when the two models' views differ
    (prediction, predictive std or score), since a loss can only read those.

    Parameters
    ----------
    pool : Pool
        The pool holding both models.
    measure : str or Measure
        The measure whose losses are compared (a name or a :class:`~bayes_activeeval.Measure`).
    a, b : str
        The two models.

    Returns
    -------
    ndarray of bool, shape (n_items,)
    """
    diff = difference(get_measure(measure), a, b)
    m, views = pool.resolve(diff)
    out = np.zeros(pool.n_items, dtype=bool)
    d = m.dim // 2
    for start in range(0, pool.n_items, CHUNK):
        sl = slice(start, min(start + CHUNK, pool.n_items))
        v = views(sl)
        if pool.task == "regression":
            va, vb = v[a], v[b]
            neq = va.pred != vb.pred
            for fa, fb in ((va.std, vb.std), (va.score, vb.score)):
                if fa is not None:
                    neq |= fa != fb
            out[sl] = neq
            continue
        for c in range(pool.n_classes):
            y = np.full(sl.stop - sl.start, c, dtype=np.int32)
            L = m.loss(y, v)
            out[sl] |= np.any(L[:, :d] != L[:, d:], axis=1)
    return out


def _disagreement_any(pool, measure, models) -> np.ndarray:
    """Items where the losses of some two of ``models`` can differ: the union of ``D_≠`` of
    ``models[0]`` with each other model (models that differ from each other differ from it)."""
    out = np.zeros(pool.n_items, dtype=bool)
    for m in models[1:]:
        out |= disagreement(pool, measure, models[0], m)
    return out


def _chunk_disagreement_mass(chunk_pool, offset, measure, models) -> float:
    return float(
        np.asarray(chunk_pool.p, dtype=float)[_disagreement_any(chunk_pool, measure, models)].sum()
    )


def disagreement_set(pool, measure, models) -> tuple[float, np.ndarray | None]:
    """``P(D)`` and the membership of every pool item in ``D``, the items where the losses of
    some two of ``models`` can differ (:func:`disagreement`; for two models ``D_≠``), computed
    once per pool, measure and models and kept on the pool: :func:`compare` (at every look of
    :func:`~bayes_activeeval.sequential_compare`), :func:`comparison_proposal` (``active_neq``)
    and the planning functions need the same set. On a lazy pool ``P(D)`` is a sum per chunk and
    the membership is not kept (``None``).

    Parameters
    ----------
    pool : Pool or LazyPool
    measure : Measure
        The measure whose losses are compared (unbound).
    models : sequence of str
        At least two models.

    Returns
    -------
    mass : float
        ``Σ_{x ∈ D} p(x)``.
    in_d : ndarray of bool (n_items,) or None
        Whether each pool item lies in ``D`` (``None`` on a lazy pool). Shared: do not modify.
    """
    lazy = getattr(pool, "is_lazy", False)
    # a registered measure is keyed by its name (``get`` builds a new object per call), any
    # other by the object, which the cache holds so that an id is never matched to another object
    name = measure.registered
    cache = pool.__dict__.setdefault("_disagreement_mass", {})
    key = (name if name is not None else id(measure), tuple(models))
    hit = cache.get(key)
    if hit is None or (name is None and hit[0] is not measure):
        if lazy:
            mask = None
            mass = float(sum(pool.map_chunks(_chunk_disagreement_mass, measure, tuple(models))))
        else:
            mask = _disagreement_any(pool, measure, models)
            mask.flags.writeable = False  # shared by every caller
            mass = float(np.asarray(pool.p, dtype=float)[mask].sum())
        if len(cache) >= 8:
            cache.clear()
        # the object is kept only where it is the key (a registered name needs no identity check)
        hit = cache[key] = (measure if name is None else None, mass, mask)
    return hit[1], hit[2]


def pair_disagreement(pool, measure, a: str, b: str) -> np.ndarray:
    """:func:`disagreement` of ``a`` and ``b``, through the pool's cache of
    :func:`disagreement_set` in memory.

    Parameters
    ----------
    pool : Pool or LazyPool
    measure : Measure
        The measure whose losses are compared (unbound).
    a, b : str
        The two models.

    Returns
    -------
    ndarray of bool (n_items,)
        Whether each item lies in ``D_≠``: read-only and shared in memory; on a lazy pool a
        NumPy array computed afresh (one boolean per item, like the proposal's ``q``).
    """
    if getattr(pool, "is_lazy", False):  # the cache keeps no mask there: one pass, not two
        return np.asarray(disagreement(pool, measure, a, b))
    return disagreement_set(pool, measure, (a, b))[1]


def disagreement_mass(pool, measure, models, indices) -> tuple[float, np.ndarray]:
    """``P(D)`` and membership of ``indices`` in ``D``, the items where the losses of some two
    of ``models`` can differ — what the post-stratified difference of :func:`compare` and
    :func:`~bayes_activeeval.multiple_comparison` needs (:func:`disagreement_set`: one
    pool-wide pass per measure and models; on a lazy pool only the drawn items are read for
    the membership).

    Parameters
    ----------
    pool : Pool or LazyPool
    measure : Measure
        A plain risk.
    models : sequence of str
        At least two models.
    indices : ndarray of int
        Pool indices (the draws).

    Returns
    -------
    mass : float
        ``Σ_{x ∈ D} p(x)``.
    in_d : ndarray of bool
        Whether each of ``indices`` lies in ``D``.
    """
    idx = np.asarray(indices, dtype=np.int64)
    mass, mask = disagreement_set(pool, measure, models)
    if mask is not None:
        return mass, mask[idx]
    in_d = (
        _disagreement_any(pool.take(idx), measure, models) if idx.size else np.zeros(0, dtype=bool)
    )
    return mass, in_d


def check_belief_arg(base: Measure, belief: Any) -> None:
    """``belief=`` is for threshold-free measures only, whose guarded variance reads it (DeLong
    et al. (1988) with importance weights); any other measure's test uses the sample variance."""
    if belief is not None and not isinstance(base, RankMeasure):
        raise ValueError(
            f"belief= applies to threshold-free measures (ROC AUC, average precision, "
            f"recall@FPR), whose guarded variance uses it; got a {type(belief).__name__} "
            f"belief for measure={base.name!r}, whose test uses the sample variance alone "
            "(pass the belief to comparison_proposal instead)"
        )


def check_proposal(proposal: Any, pool: Any) -> None:
    """Refuse a ``proposal`` that is not a :class:`~bayes_activeeval.proposals.Proposal` over
    ``pool``'s items.

    Parameters
    ----------
    proposal : Proposal
        The proposal the draws came from.
    pool : Pool
        The pool the comparison is on.
    """
    if not isinstance(proposal, Proposal):
        raise TypeError(f"proposal must be a Proposal, got {type(proposal).__name__}")
    if proposal.n_items != pool.n_items:
        raise ValueError(
            f"proposal covers {proposal.n_items} items but the pool has {pool.n_items}"
        )


def support_mass_of(proposal: Proposal) -> float:
    return float(proposal.p[proposal.q > 0].sum())


def is_passive(draws: Draws, proposal: Proposal | None) -> bool:
    """Whether the design is passive sampling: ``q ∝ p`` on every item of ``proposal`` when it is
    given, else every draw's weight ``p/q`` equal to 1 (equal weights other than 1 come from an
    active proposal whose draws all fell on one level of ``q/p``, e.g. all where two models
    disagree)."""
    if not has_equal_weights(draws.weights, proposal):
        return False
    if proposal is not None:
        return True
    w = np.asarray(draws.weights, dtype=float)
    return bool(w.size == 0 or np.all(np.abs(w - 1.0) <= 1e-9))


@dataclass(frozen=True)
class Stratum:
    """How a plain risk's paired differences are estimated (:func:`post_stratum`).

    ``keep`` selects the draws that enter (those in ``D``, or all), ``mass`` is ``P(D)`` (1 when
    not post-stratified), ``size`` the Kish size of the kept draws (``None`` when not
    post-stratified), ``passive`` whether the design is passive sampling.
    """

    keep: Any
    mass: float
    size: float | None
    passive: bool


def post_stratum(pool, base: Measure, models, draws: Draws, proposal) -> Stratum:
    """The post-stratification of :func:`compare` and :func:`multiple_comparison`: for a plain
    risk under any design but passive sampling, the draws in the set ``D`` where some two of
    ``models`` can differ (``δ ≡ 0`` off it) and ``P(D)``, so that a difference is ``P(D)`` times
    the self-normalized difference of ``D``'s draws (Sawade (2012), Sec. 5.2.2 for a proposal
    that is zero off ``D``)."""
    passive = is_passive(draws, proposal)
    if passive or isinstance(base, RankMeasure) or not is_linear(base):
        return Stratum(slice(None), 1.0, None, passive)
    mass, in_d = disagreement_mass(pool, base, models, draws.indices)
    if mass >= 1.0 - 1e-12:
        return Stratum(slice(None), 1.0, None, passive)
    vk = np.asarray(draws.weights, dtype=float)[in_d]
    return Stratum(in_d, mass, float(vk.sum() ** 2 / (vk @ vk)) if vk.size else 0.0, passive)


def flat_se(se: Any, difference: Any) -> Any:
    """A standard error that is 0 up to rounding (``≤ 1e-12 |Δ̂|``): every draw of the stratum
    with the same paired difference."""
    return ~(np.asarray(se) > 1e-12 * np.maximum(np.abs(difference), 1e-300))


def pair_sums(L: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Σ v (ℓ_i − ℓ_j)`` and ``Σ v² (ℓ_i − ℓ_j)²`` for every pair of the columns of ``L``
    (``k × k``): the numerator and squared denominator of the score statistic (Sawade (2012),
    Eq. 3.23 with the variance under ``H0``), each difference formed before it is squared."""
    k = L.shape[1]
    A, B = np.zeros((k, k)), np.zeros((k, k))
    v2 = v * v
    for i in range(k):
        d = L[:, [i]] - L
        A[i], B[i] = v @ d, v2 @ (d * d)
    return A, B


def compare(
    pool,
    measure: str | Measure,
    draws: Draws,
    labels: Any,
    models: Sequence[str] | None = None,
    *,
    alternative: str = "two-sided",
    oracle: str = "deterministic",
    proposal: Proposal | None = None,
    variance: str = "auto",
    belief: Any = None,
) -> ComparisonResult:
    """Paired importance-weighted comparison of two models with a Wald test.

    Both models are scored on the same labeled draws with the same weights ``v = p/q``;
    ``Δ̂ = Σ v_i δ_i / Σ v_i`` (Sawade (2012), Eq. 3.21; for ratio measures ``Δ̂ = g(R̂_a) − g(R̂_b)``
    with the delta-method variance, Marchant & Rubinstein (2021), Thm. 2), ``T = Δ̂/SE``
    (Eq. 3.23) and the p-value of Eq. 3.24. The variance is the calibrated thesis form (Eq. 3.22).

    For a plain risk (error rate, accuracy, MSE, MAE, Brier) under any proposal but passive
    sampling the difference is post-stratified on the set ``D`` where the two models' losses
    can differ (:func:`disagreement`; ``δ ≡ 0`` off it and the pool knows ``P(D)``):
    ``Δ̂ = P(D) Σ_D v δ / Σ_D v`` over the draws in ``D``, with that ratio's variance times
    ``P(D)²`` (Sawade (2012), Sec. 5.2.2 for a proposal that is zero off ``D``). The score
    statistic is unchanged (the draws off ``D`` add nothing to ``Σ v δ`` or ``Σ v² δ²``), but
    ``W = Σ v`` and ``D = Σ v²`` of its sums, and so its interval, are over ``D``'s draws; the
    estimate no longer
    depends on how many of the few heavy draws where the models agree a sample holds (20 draws
    of a comparison proposal that all fell in ``D`` gave the difference on ``D``, 1.0, for a true
    0.103). ``support_mass`` and ``stratum_size`` of the result hold ``P(D)`` and the Kish size
    of ``D``'s draws; the per-model estimates use every draw. Passive draws (every weight 1)
    keep ``Ĝ_a − Ĝ_b``.

    Parameters
    ----------
    pool : Pool
        A pool with (at least) the two models.
    measure : str or Measure
        Any scalar measure (``"error_rate"``, ``"f1"``, ``"mse"``, …), unbound.
    draws : Draws
        From :meth:`Proposal.draw` (any proposal: passive, :func:`comparison_proposal`, …).
    labels : array-like or mapping
        The label of each draw (aligned with ``draws.indices``) or ``{item: label}``.
    models : (str, str), optional
        ``(a, b)``; ``Δ = G_a − G_b``. Default: the pool's two models.
    alternative : {"two-sided", "less", "greater"}
        ``"less"``: ``H1: G_a < G_b``; ``"greater"``: ``H1: G_a > G_b``.
    oracle : {"deterministic", "stochastic"}
        As in :func:`~bayes_activeeval.estimate`.
    proposal : Proposal, optional
        The proposal the draws came from: it decides whether the design is passive (``q ∝ p``
        on every item; without it, every draw's weight 1). A proposal that is zero on items
        where the models agree (``active_≠``, ``active_0``, ``active_inf`` with ``mix=0``) is
        checked to cover ``D``, and the per-model estimates are then NaN (not identified). It
        must cover the pool's items; threshold-free measures (ROC AUC, average precision,
        recall@FPR) rank every item and refuse a proposal without full support.
    variance : {"auto", "wald", "score"}
        The variance in the test statistic. ``"wald"``: the thesis form centred at the estimate,
        ``S² = n Σ v² (δ − Δ̂)²/(Σ v)²`` (Eq. 3.22). ``"score"``: the same form centred at the
        null value, ``Σ v² (δ − 0)²/(Σ v)²`` — the variance of ``Δ̂`` *under H0*. For plain
        risks (``g`` the identity: error rate, accuracy, MSE, MAE, Brier) ``δ`` is the paired
        loss difference; both forms use the draws in ``D`` only for a post-stratified
        difference (above). For ratio and other non-linear measures (F1, F-β, precision,
        recall, MCC, balanced accuracy, …) ``"score"`` is the generalized score test (Boos
        (1992), Eqs. 5-6): ``δ`` is the paired influence term linearized at a null-restricted
        point (:func:`restricted_influence`), the statistic ``Σ v δ / sqrt(Σ v² δ²)``. The Wald
        terms of the few heavy draws where the models agree carry ``Δ̂`` itself, so the Wald
        variance grew with ``|Δ̂|``: on the exact null of ``benchmarks/compare_small_n.py``
        the Wald test of F1 under the comparison proposal rejected 0.012 / 0.005 / 0.017 of
        the time at 50 / 100 / 200 draws for a nominal 0.05 (and 0.29 / 0.19 / 0.14 at
        3 / 6 / 10 draws, from near-zero standard errors); the score test is calibrated at
        every size there and more powerful (``results/comparison_type1_power.md``, section 3). The score form is exact in the swap protocol and asymptotically
        equivalent to the Wald form; before the post-stratification the heavy draws where the
        models agree added ``v² Δ̂²`` to the Wald variance, which made the Wald test very
        conservative at small ``n`` (type-I error 0.01 instead of 0.05 at ``n = 100`` in
        ``benchmarks/comparison_type1_power.py``; now 0.058). ``"auto"`` (default): ``"score"``
        (threshold-free measures: ``"wald"``, DeLong's test). :attr:`stderr` is always
        the Wald standard error of the estimate; ``confidence_interval(method="test")`` is
        dual to the test. The default interval is that one unless the draws are passive (equal
        weights), where it is Newcombe's hybrid score interval from the two models' own
        intervals for a two-sided comparison of a bounded measure
        (:meth:`ComparisonResult.confidence_interval`).
    belief : Belief or array-like, optional
        Threshold-free measures only (ROC AUC, average precision, recall@FPR): the label belief
        ``π(y = pos | x)`` of every pool item for the guarded variance of the difference — a
        :class:`~bayes_activeeval.beliefs.CategoricalBelief`, class probabilities ``(n, 2)`` or
        ``π(y = pos | x)`` ``(n,)``, as :func:`~bayes_activeeval.threshold_free.rank_estimate`
        takes it (its length must be the pool's, its values finite probabilities). The test is
        DeLong, DeLong & Clarke-Pearson's (1988) paired test with importance weights: the
        difference ``Δ̂ = Â_a − Â_b`` has influence function ``ψ = ψ_a − ψ_b`` and the variance
        is the larger (the *guard*) of the empirical ``Σ f_i v_i² ψ̂(x_i, y_i)²/(Σ v)²``
        (Sawade (2012), Eq. 3.14 with ``ψ`` for the centred loss; DeLong's paired variance on
        uniform weights) and its expectation under the belief
        ``Σ v_i² [π_i ψ̂(x_i, 1)² + (1 − π_i) ψ̂(x_i, 0)²]/(Σ v)²``
        (:func:`~bayes_activeeval.threshold_free.rank_estimate_arrays`). Default: the equal
        mixture of the two models' probabilities (Sawade (2012), Eq. 5.11), as
        :func:`comparison_proposal` uses. When the models' probabilities are over-dispersed,
        the default guard overstates the variance and the test is very conservative; on the
        exact-null pools of ``benchmarks/rank_comparison_belief.py`` (1:35 and 1:100,
        500-2,000 draws, ``α = 0.05``) its type-I error was 0.000-0.025, with the true ``η``
        0.005-0.040, and with the two models' ``"calibration"`` oracles fitted to the same
        draws (``oracle.belief()``) 0.023-0.070; power at 2,000 draws of the comparison
        proposal rose from 0.49 to 0.65 (``η``) and 0.68 (calibration) for ``ΔAUC = 0.027`` at
        1:35 (``docs/threshold-free.md``). A belief fitted to the same labels tracks the
        empirical variance and so gives up part of the guard's protection against samples that
        missed hidden positives. Any other measure refuses ``belief=`` (``ValueError``): its
        test uses the sample variance alone; give the belief to :func:`comparison_proposal`
        instead.

    Returns
    -------
    ComparisonResult

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.3, n_models=2, rng=0)
    >>> prop = bae.comparison_proposal(sp.pool, "error_rate", models=("m0", "m1"))
    >>> draws = prop.draw(300, rng=1)
    >>> res = bae.compare(sp.pool, "error_rate", draws, sp.labeler(draws.indices),
    ...                   models=("m0", "m1"))
    >>> lo, hi = res.confidence_interval(0.95)
    """
    check_inputs(draws, oracle, variance)
    alternative = _check_alternative(alternative)
    pair = models_arg(pool, models, 2, two=True)
    if len(pair) != 2:
        raise ValueError(f"models must name exactly two models, got {models!r}")
    a, b = pair
    base = get_measure(measure)
    if base.models is not None:
        raise ValueError(
            f"measure {base.name!r} is already bound to models {base.models}; pass the plain "
            "measure and models=(a, b)"
        )
    check_belief_arg(base, belief)
    scale = 1.0
    if proposal is not None:
        check_proposal(proposal, pool)
        scale = support_mass_of(proposal)
    if isinstance(base, RankMeasure):
        if variance == "score":
            raise ValueError(
                f"variance='score' needs a plain risk; {base.name!r} is threshold-free"
            )
        if scale < 1.0 - 1e-12:
            raise ValueError(
                f"the proposal gives zero mass to {int(np.sum(proposal.q <= 0))} items (support "
                f"mass {scale:.6g}); the threshold-free measure {base.name!r} ranks every item "
                "of the pool, so it needs a proposal with full support (mix > 0)"
            )
        return _compare_rank(
            pool, base, draws, labels, (a, b), alternative, oracle, proposal, belief=belief
        )
    diff_m, views = pool.resolve(difference(base, a, b))
    # through the pool, as ``estimate`` does: it gives averaged measures each model's predicted
    # classes, so the per-model intervals are those each model gets alone
    st_m, _ = pool.resolve(stack(base, (a, b)))
    y = draw_labels(pool, draws.indices, labels, oracle=oracle)
    L = diff_m.loss(y, views(draws.indices))
    n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
    per = weighted_estimate(L, draws.weights, st_m, n_labels=n_labels)

    if scale < 1.0 - 1e-12:
        _check_restricted(pool, base, a, b, proposal, draws)
    variance = resolve_variance(variance)
    strat = post_stratum(pool, base, (a, b), draws, proposal)
    Lk, vk = L[strat.keep], np.asarray(draws.weights, dtype=float)[strat.keep]
    if Lk.shape[0]:
        est = weighted_estimate(Lk, vk, diff_m, n_labels=n_labels)
        value, se = float(est.values[0]) * strat.mass, float(est.stderrs[0]) * strat.mass
    else:  # no draw where the two models can differ: no evidence either way
        value, se = 0.0, np.nan
    sums = restricted = None
    if variance == "score" and not is_linear(base):
        # the generalized score test: the paired influence terms at a null-restricted point
        spec = measure if isinstance(measure, str) else base
        z, sums, _, restricted = restricted_score_test(Lk, vk, diff_m, spec, (a, b), pool)
    elif variance == "score":
        sums = ScoreSums.of(vk, Lk[:, 0] - Lk[:, 1])
        z = _z(sums.A, np.sqrt(sums.B)) if sums.W > 0 else 0.0
    else:
        z = _z(value, se) if Lk.shape[0] else 0.0
        if strat.size is not None and Lk.shape[0] and flat_se(se, value):
            # every draw in D has the same δ: the Wald SE is 0 and would reject at any n (two
            # draws gave p = 0); the score statistic Σ v δ / sqrt(Σ v² δ²) still measures them,
            # and its sums give the interval dual to that p-value (the Wald one is a point)
            A, B = pair_sums(Lk, vk)
            z = _z(float(A[0, 1]), float(np.sqrt(B[0, 1])))
        if strat.size is not None and is_linear(base) and (not Lk.shape[0] or flat_se(se, value)):
            # the p-value is the score statistic's (or 1 without a draw in D): its sums give
            # the interval dual to it (the Wald one is a point, or NaN)
            sums = ScoreSums.of(vk, Lk[:, 0] - Lk[:, 1])
    if scale < 1.0 - 1e-12:  # the proposal left out items where the models agree
        estimates = {a: np.nan, b: np.nan}
        stderrs = {a: np.nan, b: np.nan}
    else:
        estimates = {a: float(per.values[0]), b: float(per.values[1])}
        stderrs = {a: float(per.stderrs[0]), b: float(per.stderrs[1])}
    return ComparisonResult(
        statistic=float(z),
        pvalue=_wald_pvalue(z, alternative),
        estimate=value,
        stderr=se,
        alternative=alternative,
        models=(a, b),
        estimates=estimates,
        stderrs=stderrs,
        n_draws=len(draws),
        n_labels=n_labels,
        measure=base.name,
        greater_is_better=base.greater_is_better,
        support_mass=strat.mass,
        variance=variance,
        sums=sums,
        per_model=None if np.isnan(estimates[a]) else per,
        bounds=base.bounds,
        equal_weights=strat.passive,
        stratum_size=strat.size,
        restricted=restricted,
    )


def _compare_rank(
    pool, base, draws, labels, pair, alternative, oracle, proposal=None, *, belief=None
) -> ComparisonResult:
    """:func:`compare` for ROC AUC, average precision or recall@FPR: DeLong, DeLong &
    Clarke-Pearson (1988) with importance weights — both measures from the same draws, the
    difference with influence function ``ψ_a − ψ_b`` and the guarded variance of
    :func:`~bayes_activeeval.threshold_free.rank_estimate` (DeLong's paired variance on uniform
    weights with ``variance="empirical"``), under ``belief`` (``None``: the equal mixture of the
    two models' probabilities). The measure's range ``[0, 1]`` bounds the difference to
    ``[-1, 1]``, where the interval is clipped."""
    a, b = pair
    per = stacked_estimate(pool, base, draws, labels, pair, oracle=oracle, belief=belief)
    est = rank_estimate(
        pool, base.bind(pair, difference=True), draws, labels, oracle=oracle, belief=belief
    )
    value, se = float(est.values[0]), float(est.stderrs[0])
    z = _z(value, se)
    return ComparisonResult(
        statistic=float(z),
        pvalue=_wald_pvalue(z, alternative),
        estimate=value,
        stderr=se,
        alternative=alternative,
        models=(a, b),
        estimates={a: float(per.values[0]), b: float(per.values[1])},
        stderrs={a: float(per.stderrs[0]), b: float(per.stderrs[1])},
        n_draws=len(draws),
        n_labels=est.n_labels,
        measure=base.base_name,
        greater_is_better=True,
        variance="wald",
        bounds=base.bounds,
        equal_weights=has_equal_weights(draws.weights, proposal),
    )


def _check_restricted(pool, base, a, b, proposal: Proposal, draws: Draws) -> None:
    """A proposal with zero mass somewhere is only valid for a plain risk and only where the
    paired loss difference is identically zero (Sawade (2012), Sec. 5.2.2, ``active_≠``, with the variance of Eq. 3.22)."""
    if not is_linear(base):
        raise ValueError(
            f"the proposal gives zero mass to {int(np.sum(proposal.q <= 0))} items; for the "
            f"non-linear measure {base.name!r} every item can move the estimate, so use a "
            "proposal with full support (mix > 0)"
        )
    off = (np.asarray(proposal.q) <= 0) & (np.asarray(proposal.p) > 0)  # dask on a lazy pool
    bad = np.flatnonzero(off & pair_disagreement(pool, base, a, b))
    if bad.size:
        raise ValueError(
            f"the proposal gives zero mass to item {bad[0]} (and {bad.size - 1} more) where the "
            f"losses of {a!r} and {b!r} can differ; the difference is not identified"
        )
    if np.any(proposal.q[draws.indices] <= 0):
        raise ValueError("some draws have zero probability under proposal; wrong proposal?")


# ------------------------------------------------------------------------------------------------
# proposals for comparisons
# ------------------------------------------------------------------------------------------------
def _pair_scores(pool, base, a, b, kind, belief, costs, floor) -> np.ndarray:
    """Unnormalized, unmixed pairwise proposal scores ``s(x)`` (q ∝ s) for one pair."""
    p = pool.p
    c = label_costs(pool, costs)
    if kind == "optimal":
        # Sawade (2012), Thm. 5.1: the general integrand of the difference measure
        u = deviation_integrand(pool, difference(base, a, b), belief=belief, belief_floor=floor).u
        scores = np.sqrt(np.maximum(u, 0.0))
    elif kind in ("active_0", "active_inf"):
        if pool.task != "regression":
            raise ValueError(
                f"kind={kind!r} is a regression baseline (Sawade (2012), Sec. 5.2.2); "
                "use 'active_neq' for classification"
            )
        gap = np.abs(pool.view(a).pred - pool.view(b).pred)
        scores = gap**2 if kind == "active_0" else gap
    elif kind == "active_neq":
        scores = pair_disagreement(pool, base, a, b).astype(float)
    else:  # pragma: no cover - guarded by the caller
        raise AssertionError(kind)
    return proposal_scores(scores, p, c)


def comparison_proposal(
    pool,
    measure: str | Measure,
    models: Sequence[str] | None = None,
    *,
    kind: str = "optimal",
    belief: Any = None,
    costs: Any = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    mix: float = DEFAULT_MIX,
) -> Proposal:
    """A sampling distribution for comparing two or more models.

    Two models:

    - ``"optimal"`` — the power-optimal proposal ``q* ∝ p sqrt(E_π(δ − Δ̌)²)`` of Sawade (2012),
      Thm. 5.1 (Eq. 5.5), computed by the general :func:`~bayes_activeeval.optimal_proposal` for
      the measure :func:`~bayes_activeeval.measures.difference`, with the equal-mixture belief
      ``π = ½π_a + ½π_b`` (Eq. 5.11) and the intrinsic difference ``Δ̌`` (Eq. 5.12). Cor. 5.1
      (zero-one loss), Cor. 5.2 (squared loss) and the mixture form of Sec. 5.2.2 are special
      cases; ratio measures use ``‖Dg(R)(ℓ − R)‖`` with ``Dg = [Dg_a, −Dg_b]``.
    - ``"active_neq"`` — uniform (by ``p``) on the disagreement set ``D_≠`` (Sec. 5.2.2).
    - ``"active_0"`` / ``"active_inf"`` — ``q ∝ p (f_a − f_b)²`` / ``q ∝ p |f_a − f_b|``
      (regression, Sec. 5.2.2).
    - ``"active_risk"`` — ``½ q*_a + ½ q*_b``, the single-model optimal proposals with each
      model's own belief (Sec. 5.2.2; Sawade et al. (2012), "ARE").
    - ``"passive"`` — ``q = p``.

    ``k > 2`` models: the mixture of the normalized pairwise proposals over all pairs,
    ``q = 1/(k(k−1)) Σ_{i≠j} q*_{ij}`` (Sawade (2012), Eq. 5.16), with the belief the equal
    mixture over all ``k`` models; ``"active_risk"`` averages the ``k`` single-model proposals.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        An unbound scalar measure.
    models : sequence of str, optional
        Default: all models of the pool (at least two).
    kind : str
        One of ``"optimal"``, ``"passive"``, ``"active_0"``, ``"active_inf"``, ``"active_neq"``,
        ``"active_risk"``.
    belief : Belief or array-like, optional
        ``π(y|x)`` (e.g. an oracle model's posterior predictive). Default: the equal mixture of
        the models' predictive distributions.
    costs : None, bool or array-like
        Label costs (``q ∝ … c^{-1/2}``, Sawade (2012), Thm. 4.2); default the pool's.
    belief_floor : float
        As in :func:`~bayes_activeeval.optimal_proposal`.
    mix : float
        Defensive mixture ``q ← (1 − δ) q + δ p``. With ``mix=0`` the baselines ``active_neq``,
        ``active_0``, ``active_inf`` are zero where the models agree; pass the proposal to
        :func:`compare` (``proposal=``), which then rescales the estimate by the support mass
        ``|D_≠|/|D|`` (only valid for plain risks such as the error rate or MSE).

    Returns
    -------
    Proposal
        ``info`` holds ``comparison`` (the kind), ``models``, ``support_mass`` and, for
        ``"optimal"`` with two models, ``risk`` (``(R̂_a, R̂_b)`` under the belief), ``u`` and
        ``intrinsic_difference`` (``Δ̌``, Eq. 5.12).
    """
    if kind not in PROPOSAL_KINDS:
        raise ValueError(f"kind must be one of {', '.join(PROPOSAL_KINDS)}; got {kind!r}")
    models = models_arg(pool, models, 2)
    base = get_measure(measure)
    if base.models is not None:
        raise ValueError(f"measure {base.name!r} is already bound to models {base.models}")
    floor = check_fraction(belief_floor, "belief_floor")
    mix = check_fraction(mix, "mix", allow_one=True)
    if isinstance(base, RankMeasure) and kind != "passive":
        if kind != "optimal":
            raise ValueError(f"threshold-free measure {base.name!r}: kind 'optimal' or 'passive'")
        # q ∝ p sqrt(E_π (ψ_a − ψ_b)²) (Sawade (2012), Thm. 5.1 with the influence function)
        return comparison_rank_proposal(
            pool, base, models, belief=belief, costs=costs, belief_floor=floor, mix=mix
        )
    p = pool.p
    k = len(models)
    info = {"comparison": kind, "models": models, "mix": mix}

    if kind == "passive":
        q = p.copy()
    elif kind == "optimal" and k == 2:
        prop = optimal_proposal(
            pool,
            difference(base, *models),
            belief=belief,
            costs=costs,
            belief_floor=floor,
            mix=mix,
        )
        m = pool.resolve(difference(base, *models))[0]
        R = prop.info.risk
        d = R.size // 2
        prop.info = prop.info.replace(
            **info,
            intrinsic_difference=float(m.g(R)[0]),
            estimates_under_belief={
                models[0]: float(base.resolve(pool.n_classes).g(R[:d])[0]),
                models[1]: float(base.resolve(pool.n_classes).g(R[d:])[0]),
            },
        )
        prop.info = prop.info.replace(support_mass=support_mass_of(prop))
        return prop
    elif kind == "active_risk":
        if getattr(pool, "is_lazy", False):
            raise NotImplementedError(
                "kind='active_risk' (a baseline) needs an in-memory pool; on a lazy pool use "
                "kind='optimal' or 'active_neq'"
            )
        q = np.zeros(pool.n_items)
        c = label_costs(pool, costs)
        for mod in models:
            own = deviation_integrand(pool, base, model=mod, belief_floor=floor).u
            s = proposal_scores(np.sqrt(np.maximum(own, 0.0)), p, c)
            q += s / s.sum() if s.sum() > 0 else p
        q /= k
    else:
        if kind == "optimal":
            # Eq. 5.16: the label belief is the equal mixture over all k models
            b = as_belief(pool, belief, models) if belief is not None else pool_belief(pool, models)
        else:
            b = None
        q = np.zeros(pool.n_items)
        n_pairs = 0
        for i in range(k):
            for j in range(i + 1, k):
                s = _pair_scores(pool, base, models[i], models[j], kind, b, costs, floor)
                if s.sum() > 0:
                    q = q + s / s.sum()  # s is a dask array on a lazy pool: no in-place add
                    n_pairs += 1
        if n_pairs == 0:
            raise ValueError(
                f"the models {list(models)} agree on every item; there is nothing to compare"
            )
        q /= n_pairs
    q = mix_proposal(q, p, mix)
    out = Proposal(q, p, kind, ProposalInfo(**info))
    out.info = out.info.replace(support_mass=support_mass_of(out))
    return out
