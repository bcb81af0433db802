"""The adaptive proposal of Marchant & Rubinstein (2021), Prop. 2, and its ε schedules (Props. 3, 5)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_fraction
from ..beliefs import CategoricalBelief, as_belief
from ..kernel import (
    DEFAULT_BELIEF_FLOOR,
    class_deviation_norms,
    intrinsic_risk,
    label_costs,
    loss_table,
    mix_proposal,
    proposal_from_scores,
    proposal_scores,
)
from ..measures import Measure
from ..proposals import Proposal, ProposalInfo
from ..threshold_free import adaptive_rank_proposal, measure_models, rank_measure

#: Default ε_0 (relative to the mean integrand): with the deterministic schedule, every item whose
#: loss can be non-zero under the belief keeps at least about ε_t of the average proposal mass.
DEFAULT_EPSILON = 0.01
RELATIVE_FLOOR = 0.03
"""``ActiveEvaluator``'s default ``relative_floor`` with the model-assisted estimate: no unlabeled
item is believed less likely to carry a label than 3 % of the belief's own pool rate of the rarer
class (:func:`model_assisted_proposal`; measured in ``docs/adaptive.md``, "The relative floor").
A prior on how many errors the unlabeled bulk holds, set above the rate measured beyond the 1,000
highest-scored predicted non-matches on every record-linkage pool of
``benchmarks/real_pools_data.py`` (0-0.016 of the match rate). It was 0.01 before the change
recorded in ``CHANGELOG.md`` (session 29)."""


def epsilon_schedule(epsilon: float, *, stage: int, unlabeled_fraction: float, deterministic: bool):
    """The floor ``ε_t`` of the practical proposal at stage ``t``.

    Deterministic oracle: ``ε_t = ε_0 × (fraction of the pool still unlabeled)`` (Marchant &
    Rubinstein (2021), Prop. 3). Stochastic oracle: ``ε_t = ε_0/(t + 1)`` (Prop. 5), ``t`` the
    number of completed stages.

    Parameters
    ----------
    epsilon : float
        ``ε_0 >= 0``.
    stage : int
        Completed stages ``t >= 0``.
    unlabeled_fraction : float
        ``p``-mass of the items without a label, in ``[0, 1]``.
    deterministic : bool
        Which schedule.
    """
    if stage < 0:
        raise ValueError(f"stage must be >= 0, got {stage!r}")
    if not 0.0 <= unlabeled_fraction <= 1.0:
        raise ValueError(f"unlabeled_fraction must be in [0, 1], got {unlabeled_fraction!r}")
    if deterministic:
        return float(epsilon) * float(unlabeled_fraction)
    return float(epsilon) / (stage + 1)


def _floor_unknown(
    probs: np.ndarray,
    floor: float,
    known: np.ndarray | None,
    relative: float = 0.0,
    p: np.ndarray | None = None,
) -> np.ndarray:
    """Floor the class probabilities of items without a label; labeled ones keep a point mass.

    Every class is floored at ``max(floor, relative × min_c Σ_x p(x) π(c|x))`` (``p`` the item
    weights, normalized): with ``relative > 0`` no unlabeled item is believed less likely to
    carry a label than ``relative`` times the belief's own pool rate of its rarest class."""
    C = probs.shape[1]
    if floor * C >= 1:
        raise ValueError(f"belief_floor={floor!r} is too large for {C} classes")
    level = np.full(C, float(floor))
    if relative > 0:
        rate = (p @ probs) / p.sum() if p is not None else probs.mean(axis=0)
        level = np.maximum(level, relative * float(rate.min()))
    if not np.any(level > 0):
        return probs
    out = np.maximum(probs, level[None, :])
    out /= out.sum(axis=1, keepdims=True)
    if known is not None and known.any():
        out[known] = probs[known]
    return out


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``Σ_c a[:, c] b[:, c]`` (a column loop beats einsum for few classes)."""
    out = a[:, 0] * b[:, 0]
    for c in range(1, a.shape[1]):
        out += a[:, c] * b[:, c]
    return out


def _trusted_belief(probs: np.ndarray) -> CategoricalBelief:
    """A CategoricalBelief from probabilities already validated (skips the O(nC) checks)."""
    b = CategoricalBelief.__new__(CategoricalBelief)
    b.probs = probs
    b.n_items, b.n_classes = probs.shape
    return b


def _linearize(pool, measure, belief, model, epsilon, mix, belief_floor, known, relative_floor=0.0):
    """The common start of the adaptive proposals: validated ``ε`` and ``δ``, the floored belief
    (labeled items keep their point mass; :func:`_floor_unknown`), the plug-in risk ``R`` under
    it and ``Dg(R)``.

    Returns ``(measure, views, ε, δ, probs, R, J, loss table or None)``."""
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    eps = float(epsilon)
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    mix = check_fraction(mix, "mix", allow_one=True)
    floor = check_fraction(belief_floor, "belief_floor")
    b = belief if isinstance(belief, CategoricalBelief) else as_belief(pool, belief, models)
    if not isinstance(b, CategoricalBelief) or b.n_items != pool.n_items:
        b = as_belief(pool, b, models)  # raises the informative error
    relative = check_fraction(relative_floor, "relative_floor")
    probs = _floor_unknown(b.probs, floor, known, relative, pool.p)
    table = loss_table(pool, m, views)
    R = intrinsic_risk(pool, m, views, _trusted_belief(probs), table=table)
    J = m.jacobian(R)
    if not np.all(np.isfinite(J)):
        raise ValueError(
            f"measure {m.name!r} is undefined at the plug-in risk R={np.round(R, 6).tolist()} "
            "(e.g. no item predicted or believed positive); cannot build the proposal"
        )
    return m, views, eps, mix, probs, R, J, table


def adaptive_proposal(
    pool,
    measure: str | Measure,
    belief: Any,
    *,
    model: str | None = None,
    epsilon: float = 0.0,
    deterministic: bool = True,
    known: np.ndarray | None = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    costs: Any = None,
    mix: float = 0.0,
    estimator: str = "ipw",
    relative_floor: float = 0.0,
) -> Proposal:
    """The practical proposal of Marchant & Rubinstein (2021), Prop. 2, under a belief ``π_t``.

    ``q(x) ∝ p(x) c(x)^(-1/2) E_π max{‖Dg(R)(ℓ − R)‖, ε' 1[ℓ ≠ 0]}`` (``deterministic=True``) or
    ``p(x) c(x)^(-1/2) [E_π max{‖Dg(R)(ℓ − R)‖², ε'² 1[ℓ ≠ 0]}]^(1/2)`` (stochastic), with ``R``
    the plug-in risk under ``π`` (Sawade (2012), Eq. 4.21: the plug-in under the belief, not the importance-weighted estimate), then the defensive
    mixture ``(1 − δ) q + δ p`` (Sec. 3.3.1). ``ε' = ε · Σ_x p(x) a(x)`` is ``ε`` in units of the
    mean unfloored integrand ``a``. Label costs follow Sawade (2012), Thm. 4.2.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
    belief : CategoricalBelief or array-like (n, C)
        ``π_t(y|x)``.
    model : str, optional
        For a pool with several models and an unbound measure.
    epsilon : float
        Relative floor ``ε_t >= 0`` (already scheduled).
    deterministic : bool
        Deterministic (``E‖·‖``) or stochastic (``sqrt(E‖·‖²)``) form.
    known : ndarray of bool (n,), optional
        Items whose label is known: their belief is used as is (a point mass); the others are
        floored at ``belief_floor``.
    belief_floor : float
        Lower bound on unlabeled items' class probabilities (renormalized). For a threshold-free
        measure the cap of the scaled floor
        (:func:`~bayes_activeeval.threshold_free.adaptive_rank_proposal`).
    costs : None, bool or array-like
        Label costs (default the pool's).
    mix : float
        Defensive mixture weight ``δ`` in ``[0, 1]``.
    estimator : {"ipw", "model_assisted"}
        The estimator the proposal is built for. ``"model_assisted"``: the proposal of the
        difference estimator (see :func:`model_assisted_proposal`).
    relative_floor : float
        ``"model_assisted"`` only: floor each unlabeled item's class probabilities at
        ``relative_floor`` times the belief's pool rate of the rarer class as well (default 0;
        see :func:`model_assisted_proposal`).

    Returns
    -------
    Proposal
        ``kind="adaptive"``; ``info`` has ``risk``, ``jacobian``, ``a`` (integrand), ``epsilon``.
    """
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    if check_fraction(relative_floor, "relative_floor") and estimator != "model_assisted":
        raise ValueError(
            f"relative_floor={relative_floor!r} applies to estimator='model_assisted' only"
        )
    rank = rank_measure(measure)
    if rank is not None:  # ROC AUC, AP, recall@FPR: the influence function for Dg(R)(ℓ − R)
        b = belief if isinstance(belief, CategoricalBelief) else None
        if b is None or b.n_items != pool.n_items:
            b = as_belief(pool, belief, measure_models(pool, rank, model))
        return adaptive_rank_proposal(
            pool,
            rank,
            b.probs,
            model=model,
            epsilon=epsilon,
            deterministic=deterministic,
            known=known,
            belief_floor=belief_floor,
            costs=costs,
            mix=mix,
        )
    if estimator == "model_assisted":
        return model_assisted_proposal(
            pool,
            measure,
            belief,
            model=model,
            epsilon=epsilon,
            deterministic=deterministic,
            known=known,
            belief_floor=belief_floor,
            costs=costs,
            mix=mix,
            relative_floor=relative_floor,
        )
    m, views, eps, mix, probs, R, J, _ = _linearize(
        pool, measure, belief, model, epsilon, mix, belief_floor, known
    )
    power = 1 if deterministic else 2
    floor_all = not m.scale_invariant
    norms, nz = class_deviation_norms(
        pool, m, views, R, J, power=power, nonzero=eps > 0 and not floor_all
    )
    a = _row_dot(probs, norms)
    base = a if power == 1 else np.sqrt(a)
    p = pool.p
    sbar = float(p @ base)
    eps_abs = 0.0
    if eps > 0 and sbar > 0:
        eps_abs = eps * sbar
        e = eps_abs if power == 1 else eps_abs**2
        floored = np.maximum(norms, e)
        if not floor_all:
            floored = np.where(nz, floored, norms)
        a = _row_dot(probs, floored)
        base = a if power == 1 else np.sqrt(a)
    # every label known (no mass): the kernel samples passively
    q = proposal_from_scores(base, p, label_costs(pool, costs), mix)
    info = ProposalInfo(
        risk=R,
        jacobian=J,
        a=a,
        epsilon=eps,
        epsilon_abs=eps_abs,
        mix=mix,
        deterministic=bool(deterministic),
        measure=m.name,
    )
    return Proposal(q, p, "adaptive", info)


def _general_spread(m, views, table, probs, J, deterministic):
    """Per item: the spread ``E_π‖Dg(R)(ℓ − m(x))‖`` (or its root mean square), whether the loss
    can be non-zero, ``m(x) = E_π ℓ(x, y)`` and ``g ↦ Σ_x g(x) Cov_π ℓ(x, ·)``, for any number
    of classes (column operations per class, no (n, C, d) array)."""
    n, C = probs.shape
    if table is not None:  # from the (prediction, label) table, gathered per item
        nz_cell = np.any(table.table != 0, axis=2)
        losses = [table.table[:, c][table.keys] for c in range(C)]
        nzs = [nz_cell[:, c][table.keys] for c in range(C)]
    else:
        losses = [m.loss(np.full(n, c, dtype=np.int32), views(None)) for c in range(C)]
        nzs = [np.any(L != 0, axis=1) for L in losses]
    mloss = probs[:, 0, None] * losses[0]
    for c in range(1, C):
        mloss += probs[:, c, None] * losses[c]
    imgs = [L @ J.T for L in losses]  # Dg(R) ℓ(x, c), (n, o)
    centre = probs[:, 0, None] * imgs[0]
    for c in range(1, C):
        centre += probs[:, c, None] * imgs[c]
    s = np.zeros(n)
    for c in range(C):
        dev = imgs[c] - centre
        sq = np.einsum("no,no->n", dev, dev) if dev.shape[1] > 1 else dev[:, 0] ** 2
        s += probs[:, c] * (np.sqrt(sq) if deterministic else sq)
    if not deterministic:
        s = np.sqrt(np.maximum(s, 0.0))
    nz = nzs[0].copy()
    for c in range(1, C):
        nz |= nzs[c]

    def cov_terms(g2):
        out = np.zeros((mloss.shape[1], mloss.shape[1]))
        for c in range(C):
            X = (losses[c] - mloss) * np.sqrt(g2 * probs[:, c])[:, None]
            out += X.T @ X
        return out

    return s, nz, mloss, cov_terms


def _binary_spread(table, probs, J, deterministic):
    """:func:`_general_spread` for two classes and a loss that depends on the item only through
    its (prediction) cell ``k``: with ``Δ_k = ℓ(k, 1) − ℓ(k, 0)`` and ``π = π(1|x)``,
    ``ℓ(x, c) − m(x) = (c − π) Δ_k``, so the spread is ``2π(1 − π)‖Dg Δ_k‖`` (deterministic) or
    ``sqrt(π(1 − π))‖Dg Δ_k‖`` and ``Cov_π ℓ(x, ·) = π(1 − π) Δ_k Δ_kᵀ``: scalar work per item."""
    keys = table.keys
    T = table.table  # (K, 2, d)
    delta = T[:, 1] - T[:, 0]  # (K, d)
    img = delta @ J.T  # (K, o)
    norm = np.sqrt(np.einsum("ko,ko->k", img, img))
    pi = probs[:, 1]
    v = pi * (1.0 - pi)
    s = (2.0 * v if deterministic else np.sqrt(v)) * np.take(norm, keys)
    nz = np.take(np.any(T != 0, axis=(1, 2)), keys)
    mloss = np.empty((pi.size, T.shape[2]))
    for j in range(T.shape[2]):  # column by column: 1-d gathers are several times faster
        mloss[:, j] = np.take(T[:, 0, j], keys) + pi * np.take(delta[:, j], keys)

    def cov_terms(g2):
        per_key = np.bincount(keys, weights=g2 * v, minlength=T.shape[0])
        return np.einsum("k,kd,ke->de", per_key, delta, delta)

    return s, nz, mloss, cov_terms


def model_assisted_proposal(
    pool,
    measure: str | Measure,
    belief: Any,
    *,
    model: str | None = None,
    epsilon: float = 0.0,
    deterministic: bool = True,
    known: np.ndarray | None = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    costs: Any = None,
    mix: float = 0.0,
    relative_floor: float = 0.0,
) -> Proposal:
    """The adaptive proposal of the model-assisted (difference) estimate under a belief ``π_t``.

    The estimate of stage ``t`` uses the belief as a control variate: each draw contributes
    ``φ = M_t + (p/q_t)(x) (ℓ(x, y) − m_t(x))`` with ``m_t(x) = E_{π_t} ℓ(x, y)`` and
    ``M_t = Σ_x p(x) m_t(x)``, which has conditional mean ``R`` whatever the belief (the
    difference estimator of survey sampling, Särndal, Swensson & Wretman (1992), Sec. 6.3, made
    adaptive as in Marchant & Rubinstein (2021), Algorithm 1). The variance of ``Dg(R)φ`` given the
    past is ``Σ_x p(x)²/q(x) E_π‖Dg(R)(ℓ − m(x))‖² − const``, minimized (Cauchy-Schwarz, as in
    Sawade (2012), Thm. 4.1) by

        q(x) ∝ p(x) c(x)^(-1/2) sqrt(E_π‖Dg(R)(ℓ(x, y) − m(x))‖²),

    the belief's predictive standard deviation of the linearized loss instead of its root mean
    square deviation from ``R`` (``deterministic=False``). Under a deterministic oracle the
    variance of the limit is ``Σ_x p²/q ‖Dg(R)(ℓ(x, y*) − m_∞(x))‖²`` for the true labels ``y*``,
    minimized by ``q ∝ p ‖Dg(R)(ℓ(x, y*) − m_∞(x))‖``; its posterior mean
    ``q ∝ p c^(-1/2) E_π‖Dg(R)(ℓ − m(x))‖`` is the practical proposal, as in Marchant & Rubinstein
    (2021), Prop. 2 (for a binary label, ``2π(1 − π)|Dg(R)(ℓ(x, 1) − ℓ(x, 0))|``). An item with a known label (deterministic oracle) has ``ℓ = m``:
    it adds nothing to the variance and gets no mass. The floor ``ε' = ε × (p-mean of the
    integrand over unlabeled items)`` keeps every unlabeled item whose loss can be non-zero in the
    support (Prop. 3's role), and the defensive mixture ``δ`` is taken with ``p`` restricted to the
    unlabeled items.

    The belief is floored before anything is computed from it (``m_t``, ``M_t``, the proposal
    and the predicted covariance): each unlabeled item's class probabilities at
    ``belief_floor`` and, with ``relative_floor > 0``, at ``relative_floor`` times the belief's
    own pool rate of the rarer class (renormalized). A fitted belief extrapolates: a logistic map
    of the scores puts almost no probability on the lowest scores, where one pair in 600 is a
    match (``febrl3_given_name_lr``: 14 matches among 8,278 pairs tied at the minimum score), so
    the proposal reaches them only through the defensive mixture, with weights near ``1/δ``, and
    a draw that finds one moves the estimate far. The relative floor keeps such items
    at a share of the proposal their base rate allows; it is the same statement on a pool with
    one positive in ten and one in six thousand, where a fixed floor is not. It changes the
    control variate and ``q`` only, so each stage's term keeps conditional mean ``R`` whatever the
    floor.

    Parameters
    ----------
    pool, measure, belief, model, epsilon, deterministic, known, belief_floor, costs, mix
        As :func:`adaptive_proposal`.
    relative_floor : float
        In ``[0, 1)``; default 0 (``ActiveEvaluator``'s default is
        :data:`~bayes_activeeval.adaptive.RELATIVE_FLOOR`).

    Returns
    -------
    Proposal
        ``kind="adaptive"``, ``info.estimator="model_assisted"``; ``info.expected_loss`` is
        ``m_t`` (n, d), ``info.pool_expected`` is ``M_t`` and ``info.draw_cov`` the belief's
        covariance of one draw's term, ``Σ_x p(x)²/q(x) Cov_π ℓ(x, ·)`` (d, d), which
        :func:`~bayes_activeeval.estimators.difference_estimate` uses to weight the stages.
    """
    m, views, eps, mix, probs, R, J, table = _linearize(
        pool, measure, belief, model, epsilon, mix, belief_floor, known, relative_floor
    )
    C = probs.shape[1]
    if table is not None and C == 2:
        s, nz, mloss, cov_terms = _binary_spread(table, probs, J, deterministic)
    else:
        s, nz, mloss, cov_terms = _general_spread(m, views, table, probs, J, deterministic)
    p = pool.p
    open_ = p > 0
    if known is not None:
        s[known] = 0.0
        open_ = open_ & ~known
    need = open_ & nz
    pu = float(p[open_].sum())
    eps_abs = 0.0
    if eps > 0 and pu > 0:
        eps_abs = eps * float(p[open_] @ s[open_]) / pu
        s = np.where(need, np.maximum(s, eps_abs), s)
    p_open = np.where(open_, p, 0.0)
    if pu > 0:
        p_open = p_open / pu
    sc = proposal_scores(s, p, label_costs(pool, costs))
    if sc.sum() <= 0:  # nothing uncertain left: sample the unlabeled items passively
        sc = p_open.copy() if pu > 0 else p.copy()
    q = mix_proposal(sc, p_open if pu > 0 else p, mix)
    # the belief's covariance of one draw's term: Σ_x p²/q Cov_π ℓ(x, ·) (Cov = 0 if known)
    with np.errstate(divide="ignore", invalid="ignore"):
        g2 = np.where(q > 0, p * p / q, 0.0)
    if known is not None:
        g2[known] = 0.0
    draw_cov = cov_terms(g2)
    info = ProposalInfo(
        risk=R,
        jacobian=J,
        a=s,
        epsilon=eps,
        epsilon_abs=eps_abs,
        mix=mix,
        deterministic=bool(deterministic),
        measure=m.name,
        estimator="model_assisted",
        expected_loss=mloss,
        pool_expected=p @ mloss,
        draw_cov=draw_cov,
    )
    return Proposal(q, p, "adaptive", info)
