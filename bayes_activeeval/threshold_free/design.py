"""Optimal, comparison and adaptive proposals for threshold-free measures: the package's one
formula ``q ∝ p c^(-1/2) sqrt(E_π ψ²)`` with the influence function ``ψ``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._validation import check_fraction, check_model_names, check_probabilities
from ..kernel import (
    DEFAULT_BELIEF_FLOOR,
    DEFAULT_MIX,
    FLOOR_MASS,
    floor_proposal,
    label_costs,
    proposal_from_scores,
)
from ..proposals import Proposal, ProposalInfo
from .estimates import belief_influence, check_not_lazy, measure_models, positive_probs
from .kernels import RankMeasure, rank_measure

__all__ = [
    "adaptive_rank_proposal",
    "comparison_rank_proposal",
    "expected_sq_influence",
    "proposal_from_u",
    "rank_proposal",
    "scaled_rank_floor",
]


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
    u : ndarray (n,)
        ``E_π ‖ψ(x, y)‖²`` of every item.
    values : ndarray (m,)
        The measure under the belief, one entry per output.
    """
    m = rank_measure(measure)
    pi = np.asarray(probs, dtype=float)
    vals, parts = belief_influence(pool, m, pi, model)
    u = np.zeros(pool.n_items)
    for p1, p0 in parts:
        u += pi * p1 * p1 + (1.0 - pi) * p0 * p0
    return u, vals


def scaled_rank_floor(
    pool,
    measure: RankMeasure | str,
    probs: np.ndarray,
    *,
    model: str | None = None,
    costs: Any = None,
    mass: float = FLOOR_MASS,
    cap: float = DEFAULT_BELIEF_FLOOR,
) -> float:
    """The largest belief floor ``f <= cap`` that adds at most ``mass`` to the mass of the
    threshold-free proposal ``q* ∝ k sqrt(u)``, ``u = π ψ(x, 1)² + (1 − π) ψ(x, 0)²``,
    ``k = p c^(-1/2)``.

    The bound of :func:`~bayes_activeeval.kernel.scaled_belief_floor` with the influence function
    for the deviation: flooring ``π`` at ``f`` raises ``sqrt(u)`` by at most ``sqrt(f) t(x)``,
    ``t = (ψ(x, 1)² + ψ(x, 0)²)^(1/2)``, so ``sqrt(f) = mass · Σ k sqrt(u) / Σ k t`` adds at most
    ``mass`` of the proposal's mass (to first order: ``ψ`` itself moves with the floored belief).

    A fixed floor does not scale with the skew here either: ``ψ(x, 1)`` carries ``1/π₁``, so a
    floor ``f`` adds ``sqrt(f)/π₁`` to every confidently negative item. With ``f = 1e-6`` at
    1:10,000 that is 10 times the positive part of a typical item's integrand, and the proposal
    becomes nearly passive where the model is strong: its asymptotic label ratio against passive
    sampling fell from 3.0 (unfloored) to 0.2 on the strong 1:10,000 pool of
    ``benchmarks/threshold_free.py``, from 2.9 to 0.7 at 1:1,000.

    Parameters
    ----------
    pool : Pool
        A binary pool.
    measure : RankMeasure or str
        ``"roc_auc"``, ``"average_precision"``, ``"recall@fpr=α"`` or a
        :class:`RankMeasure` (bound, or unbound with ``model``).
    probs : ndarray (n,)
        The unfloored belief ``π(y = pos | x)`` of every pool item.
    model : str, optional
        Which model, for an unbound measure.
    costs : None, bool or array-like (n,)
        Label costs ``c(x)`` (:func:`~bayes_activeeval.kernel.label_costs`; default the pool's).
    mass : float
        The share of the proposal's mass the floor may add (default ``0.01``).
    cap : float
        The largest floor returned (default ``1e-6``); also returned when ``Σ k sqrt(u)`` or
        ``Σ k t`` is zero or not finite.

    Returns
    -------
    float
        The floor ``f``.
    """
    m = rank_measure(measure)
    pi = np.asarray(probs, dtype=float)
    _, parts = belief_influence(pool, m, pi, model)
    c = label_costs(pool, costs)
    k = pool.p if c is None else pool.p / np.sqrt(c)
    u = np.zeros(pool.n_items)
    t = np.zeros(pool.n_items)
    for p1, p0 in parts:
        u += pi * p1 * p1 + (1.0 - pi) * p0 * p0
        t += p1 * p1 + p0 * p0
    S, T = float(k @ np.sqrt(np.maximum(u, 0.0))), float(k @ np.sqrt(t))
    if not (np.isfinite(S) and np.isfinite(T) and S > 0 and T > 0):
        return float(cap)
    return float(min(cap, (mass * S / T) ** 2))


def proposal_from_u(
    pool, u: np.ndarray, *, costs: Any = None, mix: float = DEFAULT_MIX
) -> np.ndarray:
    """``q ∝ p c^(-1/2) sqrt(u)`` mixed with ``p``: the package's core proposal step
    (:func:`~bayes_activeeval.kernel.proposal_from_scores`; Sawade (2012), Thm. 4.1/4.2).

    Parameters
    ----------
    pool : Pool
        The pool (its test distribution ``p`` and costs are read).
    u : ndarray (n,)
        The integrand ``u(x)`` of every item (negative values count as 0).
    costs : None, bool or array-like (n,)
        Label costs ``c(x)`` (:func:`~bayes_activeeval.kernel.label_costs`; default the pool's).
    mix : float
        Defensive mixture weight ``δ`` with ``p`` (default 0.05).

    Returns
    -------
    ndarray (n,)
        The proposal probabilities ``q``.
    """
    return proposal_from_scores(np.sqrt(np.maximum(u, 0.0)), pool.p, label_costs(pool, costs), mix)


def _unreached(pool, q: np.ndarray) -> np.ndarray:
    """Items a draw never reaches although their label matters: ``q = 0`` where ``p > 0``
    (Marchant & Rubinstein (2021), Sec. 3.1: ``q(x) > 0`` wherever ``p(x)‖ψ(x, y)‖ > 0``; a
    threshold-free measure moves with the label of every item of positive mass)."""
    return (pool.p > 0) & (q <= 0)


#: Default weight of the positive-seeking component of the ROC AUC and recall@FPR proposals.
DEFAULT_POSITIVE_MIX = 0.2


def positive_seeking(pool, pi: np.ndarray, costs: Any = None) -> np.ndarray:
    """``q₊ ∝ p c^(-1/2) π``: draws likely positives (the component :func:`rank_proposal` mixes
    in so that a sample holds positives)."""
    return proposal_from_scores(pi, pool.p, label_costs(pool, costs), 0.0)


def rank_proposal(
    pool,
    measure: RankMeasure | str,
    *,
    model: str | None = None,
    belief: Any = None,
    costs: Any = None,
    belief_floor: float | str = "auto",
    mix: float = DEFAULT_MIX,
    positive_mix: float | None = None,
    estimator: str = "ipw",
    defensive_floor: float = 0.0,
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
    belief_floor : float or "auto"
        Floor on both class probabilities of the belief. Default ``"auto"``: the largest floor
        up to ``1e-6`` that adds at most 1 % to the proposal's mass (:func:`scaled_rank_floor`;
        a fixed ``1e-6`` made the proposal worse than passive sampling on strong models at
        1:1,000 and beyond). ``info["belief_floor"]`` has the value.
    mix : float
        Defensive mixture weight ``δ``.
    positive_mix : float, optional
        Weight ``λ`` of a positive-seeking component ``q₊ ∝ p π``:
        ``q = (1 − δ − λ) q* + λ q₊ + δ p``. It costs at most a factor ``1/(1 − δ − λ)`` in
        asymptotic variance and makes a sample without any positive — which leaves the measure
        undefined — improbable. Default ``0.2`` for ROC AUC and recall at a false-positive rate,
        ``0`` for average precision (whose ``q*`` already seeks positives): under heavy skew
        the AUC's ``q*`` spreads over the low-scored bulk, where its rare positives hide, and at
        1:1,000 drew no positive in 29-39% of 500-label samples (an exploratory run of
        ``benchmarks/threshold_free.py`` without the component; the committed results use it).

    defensive_floor : float, optional
        Defensive floor ``λ``: the final proposal becomes ``max(q, λ p)/Z``
        (:func:`~bayes_activeeval.kernel.floor_proposal`; default ``0.0``: none).
    estimator : {"ipw", "model_assisted"}
        The estimate the proposal is optimal for. ``"model_assisted"``: the control-variate
        estimate (:func:`~bayes_activeeval.threshold_free.rank_estimate` with
        ``estimator="model_assisted"``), whose residual ``ψ − m`` has conditional second moment
        ``Var_π ψ = π (1 − π) (ψ(x, 1) − ψ(x, 0))²`` in place of ``E_π ψ²`` (the same
        substitution as :func:`~bayes_activeeval.optimal_proposal` makes for generalized
        measures).

    Returns
    -------
    Proposal
        ``kind="optimal"``; ``info`` holds ``u``, ``estimates_under_belief`` (the measure under
        the belief), ``mix``, ``positive_mix``, ``belief_floor`` and ``estimator``.

    Raises
    ------
    ValueError
        If the measure is undefined under the belief, or if the proposal gives zero mass to an
        item of positive ``p`` (possible with ``mix=0`` where the belief expects no influence,
        e.g. ``belief_floor=0`` and ``π = 0`` for average precision): a draw never reaches it
        and the estimate would be inconsistent, as :func:`~bayes_activeeval.optimal_proposal`
        refuses for every other measure.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    check_not_lazy(pool, m, "rank_proposal")
    models = measure_models(pool, m, model)
    mix = check_fraction(mix, "mix", allow_one=True)
    defensive_floor = check_fraction(defensive_floor, "defensive_floor", allow_one=True)
    if isinstance(belief_floor, str):
        if belief_floor != "auto":
            raise ValueError(f"belief_floor must be a number or 'auto', got {belief_floor!r}")
        pi0 = positive_probs(pool, belief, models, 0.0)
        floor = DEFAULT_BELIEF_FLOOR
        if (pi0 * pool.p).sum() > 0 and ((1.0 - pi0) * pool.p).sum() > 0:
            floor = scaled_rank_floor(pool, m, pi0, model=model, costs=costs)
    else:
        floor = _rank_floor(belief_floor)
    pi = positive_probs(pool, belief, models, floor)
    if estimator == "ipw":
        u, value = expected_sq_influence(pool, m, pi, model=model)
    elif estimator == "model_assisted":
        value, parts = belief_influence(pool, m, pi, model)
        u = np.zeros(pool.n_items)
        for p1, p0 in parts:
            u += pi * (1.0 - pi) * (p1 - p0) ** 2
    else:
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    if not np.all(np.isfinite(value)):
        raise ValueError(
            f"measure {m.name!r} is undefined under the belief (no positive or no negative mass)"
        )
    if positive_mix is None:
        positive_mix = 0.0 if m.kind == "average_precision" else DEFAULT_POSITIVE_MIX
    lam = check_fraction(positive_mix, "positive_mix")
    if lam + mix >= 1:
        raise ValueError(f"mix + positive_mix must be below 1, got {mix} + {lam}")
    q = proposal_from_u(pool, u, costs=costs, mix=mix / (1.0 - lam) if lam else mix)
    if lam:
        q_pos = positive_seeking(pool, pi, costs)
        q = (1.0 - lam) * q + lam * q_pos
    q = floor_proposal(q, pool.p, defensive_floor)
    bad = np.flatnonzero(_unreached(pool, q))
    if bad.size:
        # as optimal_proposal for every other measure: a draw never reaches these items, and
        # the label of any of them moves a threshold-free measure (it adds to one class's mass)
        raise ValueError(
            f"the proposal for {m.name!r} gives zero mass to item {bad[0]} (and {bad.size - 1} "
            "more) whose label could change the estimate (the belief expects no influence there, "
            f"e.g. π = 0; belief_floor={floor:g}, mix={mix:g}); use mix > 0 or belief_floor > 0"
        )
    info = ProposalInfo(
        measure=m.name,
        risk=np.asarray(value, dtype=float),
        u=u,
        mix=mix,
        defensive_floor=defensive_floor,
        positive_mix=lam,
        belief_floor=floor,
        estimator=estimator,
        estimates_under_belief=dict(zip(m.outputs, map(float, value), strict=True)),
    )
    return Proposal(q, pool.p, "optimal", info)


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
    :func:`rank_proposal`.

    Parameters
    ----------
    pool : Pool
        A binary pool.
    measure : RankMeasure or str
        An unbound threshold-free measure (``"roc_auc"``, ``"average_precision"``,
        ``"recall@fpr=α"``).
    models : sequence of str, optional
        Two or more distinct models of the pool (default: all of the pool's models).
    **kwargs
        Passed to :func:`rank_proposal` for each pair (``belief``, ``costs``, ``mix``, …; not
        ``model``).

    Returns
    -------
    Proposal
        ``kind="optimal"``: for two models :func:`rank_proposal`'s for the difference, with its
        ``info``; for more, the equal mixture, whose ``info`` holds only ``models`` and
        ``measure``.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    check_not_lazy(pool, m, "comparison_rank_proposal")
    models = check_model_names(pool.models if models is None else models, 2)
    for name in models:
        pool.check_model(name)
    pairs = [(a, b) for i, a in enumerate(models) for b in models[i + 1 :]]
    if len(pairs) == 1:
        return rank_proposal(pool, m.bind(pairs[0], difference=True), **kwargs)
    q = np.zeros(pool.n_items)
    for pair in pairs:
        q += rank_proposal(pool, m.bind(pair, difference=True), **kwargs).q
    return Proposal(q / len(pairs), pool.p, "optimal", {"models": models, "measure": m.name})


def _rank_floor(belief_floor) -> float:
    """``belief_floor`` in ``[0, 0.5)``: a floor on both class probabilities above one half
    would clip every item to the same belief."""
    floor = check_fraction(belief_floor, "belief_floor")
    if floor >= 0.5:
        raise ValueError(
            f"belief_floor must be below 0.5 (it floors both class probabilities), got "
            f"{belief_floor!r}"
        )
    return floor


def adaptive_rank_proposal(
    pool,
    measure: RankMeasure | str,
    probs: np.ndarray,
    *,
    model: str | None = None,
    epsilon: float = 0.0,
    deterministic: bool = True,
    known: np.ndarray | None = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    costs: Any = None,
    mix: float = 0.0,
    positive_mix: float | None = None,
    scale_floor: bool = True,
) -> Proposal:
    """The adaptive proposal of Marchant & Rubinstein (2021), Prop. 2, for a threshold-free
    measure: ``q ∝ p c^(-1/2) E_π max{|ψ|, ε'}`` under a deterministic oracle,
    ``p c^(-1/2) sqrt(E_π max{ψ², ε'²})`` under a stochastic one, with ``ψ`` the influence function
    at the pool under the current belief and ``ε' = ε Σ p a`` (as
    :func:`~bayes_activeeval.adaptive.adaptive_proposal` does for generalized measures).

    Parameters
    ----------
    pool : Pool
        A binary pool.
    measure : RankMeasure or str
        ``"roc_auc"``, ``"average_precision"``, ``"recall@fpr=…"``, … (:func:`rank_measure`).
    probs : ndarray (n,) or (n, 2)
        The belief's ``π(y = pos | x)`` (or both columns, in the pool's class order).
    known : ndarray of bool (n,), optional
        Items with a label: their belief is a point mass and is not floored.
    belief_floor : float
        The cap of the floor on unlabeled items' class probabilities: with ``scale_floor`` the
        floor is :func:`scaled_rank_floor` capped at ``belief_floor`` (``1e-6`` by default, as
        :func:`rank_proposal`'s ``"auto"``), computed on the current belief with known items as
        point masses; ``0`` switches the floor off.
    positive_mix : float, optional
        The positive-seeking component of :func:`rank_proposal` (same default).
    scale_floor : bool
        ``False``: ``belief_floor`` as is (a fixed floor). A fixed ``1e-6`` adds ``sqrt(f)/π₁``
        to every confidently negative item's integrand (``ψ(x, 1)`` carries ``1/π₁``), which
        under heavy skew spreads the proposal over the bulk (:func:`scaled_rank_floor`).
    model, epsilon, deterministic, costs, mix
        As :func:`~bayes_activeeval.adaptive.adaptive_proposal`.

    Returns
    -------
    Proposal
        ``kind="adaptive"``; ``info`` holds ``risk``, ``a``, ``epsilon``, ``epsilon_abs``,
        ``mix``, ``deterministic``, ``measure`` and ``belief_floor`` (the floor applied).

    Warns
    -----
    UserWarning
        If the proposal gives zero mass to an unlabeled item of positive ``p`` (possible with
        ``mix=0`` where the belief expects no influence, e.g. ``belief_floor=0`` and ``π = 0``):
        it is never drawn and the estimate is inconsistent. A warning, not the ``ValueError`` of
        :func:`rank_proposal`: the adaptive loop builds this proposal at every stage, and
        :func:`~bayes_activeeval.adaptive.adaptive_proposal` checks nothing for other measures.
    """
    m = rank_measure(measure)
    if m is None:
        raise ValueError(f"{measure!r} is not a threshold-free measure")
    check_not_lazy(pool, m, "adaptive_rank_proposal")
    measure_models(pool, m, model)  # an unknown model fails before any work
    pi = np.asarray(probs, dtype=float)
    if pi.ndim == 2:
        if pi.shape[1] != pool.n_classes:
            raise ValueError(
                f"probs has {pi.shape[1]} columns; the pool has {pool.n_classes} classes"
            )
        pi = pi[:, pool.pos]
    if pi.shape != (pool.n_items,):
        raise ValueError(f"probs has shape {np.shape(probs)}; the pool has {pool.n_items} items")
    check_probabilities(pi, "probs")
    floor = _rank_floor(belief_floor)
    mix = check_fraction(mix, "mix", allow_one=True)
    eps = float(epsilon)
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    p = pool.p
    if floor > 0 and scale_floor and (pi * p).sum() > 0 and ((1.0 - pi) * p).sum() > 0:
        floor = scaled_rank_floor(pool, m, pi, model=model, costs=costs, cap=floor)
    if floor > 0:
        floored = np.clip(pi, floor, 1.0 - floor)
        pi = floored if known is None else np.where(known, pi, floored)
    vals, parts = belief_influence(pool, m, pi, model)
    if not np.all(np.isfinite(vals)):
        raise ValueError(f"measure {m.name!r} is undefined under the belief")
    power = 1 if deterministic else 2

    def integrand(e):
        a = np.zeros(pool.n_items)
        for p1, p0 in parts:
            n1 = np.abs(p1) if power == 1 else p1 * p1
            n0 = np.abs(p0) if power == 1 else p0 * p0
            a += pi * np.maximum(n1, e) + (1.0 - pi) * np.maximum(n0, e)
        return a

    a = integrand(0.0)
    base = a if power == 1 else np.sqrt(a)
    eps_abs = 0.0
    if eps > 0 and float(p @ base) > 0:
        eps_abs = eps * float(p @ base)
        a = integrand(eps_abs if power == 1 else eps_abs**2)
        base = a if power == 1 else np.sqrt(a)
    if positive_mix is None:
        positive_mix = 0.0 if m.kind == "average_precision" else DEFAULT_POSITIVE_MIX
    lam = check_fraction(positive_mix, "positive_mix")
    if lam + mix >= 1:
        raise ValueError(f"mix + positive_mix must be below 1, got {mix} + {lam}")
    q = proposal_from_u(pool, base**2, costs=costs, mix=mix / (1.0 - lam) if lam else mix)
    if lam:
        q = (1.0 - lam) * q + lam * positive_seeking(pool, pi, costs)
    unreached = _unreached(pool, q)
    if known is not None:
        unreached &= ~np.asarray(known, dtype=bool)  # a known label: q = 0 only where ψ = 0
    bad = np.flatnonzero(unreached)
    if bad.size:
        warnings.warn(
            f"the adaptive proposal for {m.name!r} gives zero mass to unlabeled item {bad[0]} "
            f"(and {bad.size - 1} more) whose label could change the estimate (the belief expects "
            f"no influence there, e.g. π = 0; belief_floor={floor:g}, mix={mix:g}): they are "
            "never drawn, so the estimate is inconsistent; use mix > 0 or belief_floor > 0",
            UserWarning,
            stacklevel=2,
        )
    info = {
        "risk": vals,  # the measure(s) under the belief
        "a": a,
        "epsilon": eps,
        "epsilon_abs": eps_abs,
        "mix": mix,
        "deterministic": bool(deterministic),
        "measure": m.name,
        "belief_floor": floor,
    }
    return Proposal(q, p, "adaptive", info)
