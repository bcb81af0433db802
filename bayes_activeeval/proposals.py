"""Proposals ``q``: the distributions over pool items from which labels are drawn.

The one optimal proposal (Sawade (2012), Thm. 4.1, 4.2, 5.1; Marchant & Rubinstein (2021), Prop. 1)
minimizes the asymptotic variance of the self-normalized importance-weighted estimate of any
generalized measure ``G = g(R)``::

    q*(x) ∝ p(x) · c(x)^(-1/2) · sqrt( E_{y∼π(y|x)} ‖Dg(R) (ℓ(x, y) − R)‖² )

with ``π`` the belief about the label, ``R`` the intrinsic risk under that belief (Sawade (2012),
Eq. 4.21-4.22) and ``c`` the label cost. The papers' closed forms (Cor. 4.2-4.4, 5.1, 5.2, Eq. 4.23)
are special cases, reproduced by this general code in the tests.

Defensive mixing, ``q ← (1 − δ) q + δ p``, keeps ``q > 0`` wherever ``p > 0`` and bounds every
importance weight by ``1/δ``; it costs at most a factor ``1/(1 − δ)`` in variance relative to the
unmixed proposal (because ``q ≥ (1 − δ) q*`` pointwise).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ._validation import as_1d, check_count, check_finite, check_fraction, check_rng, show
from .beliefs import CategoricalBelief, as_belief
from .kernel import (
    CHUNK,
    DEFAULT_BELIEF_FLOOR,
    DEFAULT_DEFENSIVE_FLOOR,
    DEFAULT_MIX,
    FLOOR_MASS,
    Integrand,
    LossTable,
    class_deviation_norms,
    deviation_integrand,
    drawable,
    expected_loss,
    expected_sq_deviation,
    explained_sq_deviation,
    intrinsic_risk,
    inverse_cdf,
    label_costs,
    loss_table,
    mix_proposal,
    predicted_variance,
    proposal_from_scores,
    resolve_defences,
    scaled_belief_floor,
    support_needed,
    unreachable_message,
)
from .measures import Measure
from .strata import score_strata

__all__ = [
    "DEFAULT_BELIEF_FLOOR",
    "DEFAULT_DEFENSIVE_FLOOR",
    "DEFAULT_MIX",
    "FLOOR_MASS",
    "Draws",
    "Proposal",
    "ProposalInfo",
    "class_deviation_norms",
    "default_scores",
    "expected_loss",
    "neyman_allocation",
    "optimal_proposal",
    "passive_proposal",
    "scaled_belief_floor",
    "stratified_proposal",
    "stratum_proposal",
]
# re-exported from .kernel (their home before the kernel had its own module)
__all__ += [
    "CHUNK",
    "Integrand",
    "LossTable",
    "deviation_integrand",
    "expected_sq_deviation",
    "explained_sq_deviation",
    "intrinsic_risk",
    "label_costs",
    "loss_table",
    "mix_proposal",
    "proposal_from_scores",
    "support_needed",
]


@dataclass(frozen=True)
class Draws:
    """Items drawn i.i.d. with replacement from a proposal.

    Parameters
    ----------
    indices : ndarray of int (n,)
        Pool indices of the draws, in draw order.
    weights : ndarray (n,)
        Importance weight ``p(x)/q(x)`` of each draw.
    q : ndarray (n,)
        Proposal probability ``q(x)`` of each drawn item.

    Attributes
    ----------
    indices : ndarray (n,)
        Pool indices of the draws, in draw order (repeats included).
    weights : ndarray (n,)
        Importance weights ``v = p(x)/q(x)`` (Sawade (2012), Eq. 3.11).
    q : ndarray (n,)
        The proposal's probability of each drawn item.
    """

    indices: np.ndarray
    weights: np.ndarray
    q: np.ndarray

    def __len__(self) -> int:
        return int(self.indices.size)

    @property
    def n_distinct(self) -> int:
        """Number of distinct items (labels a deterministic oracle must give)."""
        return int(np.unique(self.indices).size)

    def unique(self) -> np.ndarray:
        """Distinct drawn items in order of first draw: the items to label."""
        _, first = np.unique(self.indices, return_index=True)
        return self.indices[np.sort(first)]

    def __getitem__(self, key) -> Draws:
        """The draws selected by a slice, mask or index array (e.g. the first ``k`` draws)."""
        return Draws(self.indices[key], self.weights[key], self.q[key])

    def __add__(self, other: Draws) -> Draws:
        return Draws(
            np.concatenate([self.indices, other.indices]),
            np.concatenate([self.weights, other.weights]),
            np.concatenate([self.q, other.q]),
        )

    def __repr__(self) -> str:
        return f"Draws(n={len(self)}, distinct={self.n_distinct})"


@dataclass(frozen=True)
class ProposalInfo:
    """What a proposal was built from (every field optional; ``None`` = not applicable).

    Read as attributes (``info.u``) or, as before, by key (``info["u"]``, ``info.get("u")``,
    ``"u" in info``: a key is present when its field is not ``None``).

    Parameters
    ----------
    measure : str, optional
        Name of the measure the proposal is optimal for.
    risk : ndarray (d,), optional
        Intrinsic risk ``R`` under the belief, where ``g`` is linearized (threshold-free
        proposals: the measure value(s) under the belief).
    jacobian : ndarray (m, d), optional
        The Jacobian ``Dg(R)`` of the measure at ``risk``.
    u : ndarray (n,), optional
        Per-item deviation integrand ``u(x)`` the proposal was built from.
    a : ndarray (n,), optional
        Per-item floored integrand of an adaptive proposal.
    mix : float, optional
        Defensive mixture weight ``δ``.
    defensive_floor : float, optional
        Defensive floor ``λ`` of ``q ← max(q, λ p)/Z``.
    belief_floor : float, optional
        Floor on each class probability of the belief that was used.
    estimator : str, optional
        ``"ipw"`` or ``"model_assisted"``: the estimator the proposal is optimal for.
    epsilon, epsilon_abs : float, optional
        Relative floor ``ε_t`` of an adaptive proposal, and its absolute value ``ε'``.
    deterministic : bool, optional
        Whether an adaptive proposal uses the deterministic-oracle form.
    strata : ndarray of int (n,), optional
        Stratum of each item (stratified proposals).
    allocation : ndarray (H,), optional
        Share ``a_h`` of the draws per stratum (stratified proposals).
    stratum_mass : ndarray (H,), optional
        ``p``-mass ``P_h`` of each stratum (stratified proposals).
    comparison : str, optional
        Kind of comparison proposal (``"optimal"``, ``"active_neq"``, …).
    models : tuple of str, optional
        Names of the models a comparison proposal compares.
    support_mass : float, optional
        ``p``-mass of a comparison proposal's support.
    intrinsic_difference : float, optional
        Intrinsic risk difference ``Δ̌`` of a two-model optimal comparison proposal.
    estimates_under_belief : dict, optional
        Measure value(s) under the belief: per model for a two-model optimal comparison
        proposal; for a threshold-free proposal, by output name (one difference for a
        threshold-free comparison).
    positive_mix : float, optional
        Weight of the positive-seeking component of a threshold-free proposal.
    expected_loss : ndarray (n, d), optional
        The belief's expected loss ``m(x) = E_π ℓ(x, y)`` of every item (model-assisted
        adaptive proposals).
    pool_expected : ndarray (d,), optional
        Pool mean ``M = Σ_x p(x) m(x)`` of ``expected_loss`` (model-assisted adaptive proposals).
    draw_cov : ndarray (d, d), optional
        The belief's covariance of one draw's term (model-assisted adaptive proposals).

    Attributes
    ----------
    measure : str
        The measure the proposal is optimal for.
    risk : ndarray (d,)
        The intrinsic risk ``R`` under the belief (the linearization point).
    jacobian : ndarray (m, d)
        ``Dg(R)``.
    u : ndarray (n,)
        The deviation integrand used (:func:`~bayes_activeeval.kernel.deviation_integrand`).
    a : ndarray (n,)
        Adaptive proposals: the (floored) integrand ``E_π max{‖·‖, ε'}`` (Marchant & Rubinstein
        (2021), Prop. 2).
    mix : float
        Defensive mixture weight ``δ``.
    defensive_floor : float
        Defensive floor ``λ`` of ``q ← max(q, λ p)/Z``.
    belief_floor : float
    estimator : str
        ``"ipw"`` or ``"model_assisted"``.
    epsilon, epsilon_abs : float
        Adaptive proposals: the relative floor ``ε_t`` and its absolute value ``ε'``.
    deterministic : bool
        Adaptive proposals: the deterministic-oracle form.
    strata, allocation, stratum_mass : ndarray
        Stratified proposals: each item's stratum, the share of draws and the ``p``-mass per
        stratum.
    comparison : str
        Comparison proposals: the kind (``"optimal"``, ``"active_neq"``, …).
    models : tuple of str
        Comparison proposals: the models compared.
    support_mass : float
        Comparison proposals: ``p``-mass of the proposal's support.
    intrinsic_difference : float
        Two-model optimal comparison proposals: ``Δ̌`` (Sawade (2012), Eq. 5.12).
    estimates_under_belief : dict
        Two-model optimal comparison proposals: each model's measure under the belief;
        threshold-free proposals: the measure under the belief.
    positive_mix : float
        Threshold-free proposals: weight of the positive-seeking component
        (:func:`~bayes_activeeval.threshold_free.rank_proposal`).
    expected_loss, pool_expected : ndarray (n, d), (d,)
        Model-assisted adaptive proposals: the belief's expected loss ``m(x) = E_π ℓ(x, y)`` of
        every item and its pool mean ``M = Σ_x p(x) m(x)``, the control variate of the estimate.
    draw_cov : ndarray (d, d)
        Model-assisted adaptive proposals: the belief's covariance of one draw's term
        ``Σ_x p(x)²/q(x) Cov_π ℓ(x, ·)``.
    """

    measure: str | None = None
    risk: np.ndarray | None = None
    jacobian: np.ndarray | None = None
    u: np.ndarray | None = None
    a: np.ndarray | None = None
    mix: float | None = None
    defensive_floor: float | None = None
    belief_floor: float | None = None
    estimator: str | None = None
    epsilon: float | None = None
    epsilon_abs: float | None = None
    deterministic: bool | None = None
    strata: np.ndarray | None = None
    allocation: np.ndarray | None = None
    stratum_mass: np.ndarray | None = None
    comparison: str | None = None
    models: tuple | None = None
    support_mass: float | None = None
    intrinsic_difference: float | None = None
    estimates_under_belief: dict | None = None
    positive_mix: float | None = None
    expected_loss: np.ndarray | None = None
    pool_expected: np.ndarray | None = None
    draw_cov: np.ndarray | None = None

    def keys(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, None) if isinstance(key, str) else None
        if value is None or key.startswith("_"):
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.keys()

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def replace(self, **changes: Any) -> ProposalInfo:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


@dataclass
class Proposal:
    """A sampling distribution ``q`` over the pool's items.

    Parameters
    ----------
    q : array-like (n,)
        Non-negative, finite item probabilities with positive total; divided by their sum
        unless it is already within ``1e-12`` of one.
    p : ndarray (n,)
        The pool's test distribution ``p(x)``; must have the same shape as ``q``.
    kind : str
        How the proposal was built: ``"optimal"``, ``"passive"``, ``"stratified"``,
        ``"adaptive"``, or a comparison kind (``"active_neq"``, ``"active_0"``,
        ``"active_inf"``, ``"active_risk"``).
    info : ProposalInfo or mapping, optional
        What the proposal was built from; a mapping is converted to a :class:`ProposalInfo`
        (default: an empty one).

    Attributes
    ----------
    q : ndarray (n,)
        Probabilities, summing to one.
    p : ndarray (n,)
        The test distribution the estimate targets.
    kind : str
        How the proposal was built (see ``kind`` above).
    info : ProposalInfo
        What the proposal was built from: the intrinsic risk, the per-item expected squared
        deviation ``u(x)``, mixing weight, … (a mapping of the same keys is accepted).
    """

    q: np.ndarray
    p: np.ndarray
    kind: str
    info: ProposalInfo = field(default_factory=ProposalInfo)
    _cdf: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.info, ProposalInfo):
            self.info = ProposalInfo(**dict(self.info))
        q = np.asarray(self.q, dtype=float)
        if q.ndim != 1 or q.shape != np.shape(self.p):
            raise ValueError(f"q has shape {q.shape} but p has shape {np.shape(self.p)}")
        bad = np.flatnonzero(~np.isfinite(q) | (q < 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"q[{i}] = {show(q[i])}; q must be finite and non-negative")
        total = q.sum()
        if not np.isfinite(total):
            raise ValueError("q must be finite and non-negative; its sum overflows")
        if total <= 0:
            raise ValueError("q has no mass")
        self.q = q if abs(total - 1.0) < 1e-12 else q / total

    @property
    def n_items(self) -> int:
        return self.q.size

    def weights(self, indices: np.ndarray) -> np.ndarray:
        """Importance weights ``p/q`` of the given items.

        Parameters
        ----------
        indices : array-like of int
            Item indices in ``0..n_items - 1`` (a negative index is an error, not counted from
            the end, as on a lazy pool).

        Returns
        -------
        ndarray
            ``p(x)/q(x)`` at ``indices``.
        """
        idx = np.asarray(indices)
        if idx.dtype.kind in "iu" and idx.size:
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= self.n_items:
                raise ValueError(
                    f"item index {lo if lo < 0 else hi} is outside the pool (0..{self.n_items - 1})"
                )
        return self.p[idx] / self.q[idx]

    def draw(self, n: int, rng: Any = None, *, unique: bool = False) -> Draws:
        """Draw items i.i.d. with replacement (Sawade (2012), Algorithm 2, lines 2-3).

        Parameters
        ----------
        n : int
            Number of draws; with ``unique=True``, the number of *distinct* items to reach
            (drawing continues until that many distinct items appeared: a deterministic oracle's
            label budget, repeats kept for the estimate).
        rng : None, int or numpy.random.Generator
            Source of randomness (SPEC 7).
        unique : bool
            See ``n``.

        Returns
        -------
        Draws
            The drawn items, their weights ``p/q`` and ``q``.

        Raises
        ------
        ValueError
            With ``unique=True``, when fewer than ``n`` items have ``q > 0``, or fewer than
            ``n`` can be reached by the draw (an item whose ``q`` is below ``2**-52`` of the
            cumulative sum, e.g. ``q = 1e-300`` beside ``0.5``, is never drawn:
            :func:`~bayes_activeeval.kernel.drawable`).
        """
        n = check_count(n, "n")
        rng = check_rng(rng)
        if self._cdf is None:
            self._cdf = np.cumsum(self.q)
        if not unique:
            idx = self._sample(n, rng)
        else:
            support = int(np.count_nonzero(self.q))
            if n > support:
                raise ValueError(
                    f"n={n} distinct items requested but the proposal has only {support} items "
                    "with positive probability"
                )
            reach = int(np.count_nonzero(drawable(self._cdf)))
            if n > reach:
                raise ValueError(unreachable_message(n, reach))
            # the distinct items seen so far, kept incrementally: re-running np.unique over all
            # the draws at every pass took 52 s to reach 9,900 of 10^4 items
            seen = np.zeros(self.n_items, dtype=bool)
            batches: list[np.ndarray] = []
            n_distinct = 0
            while True:
                batch = self._sample(max(n - n_distinct, 16), rng)
                _, first = np.unique(batch, return_index=True)
                new = np.sort(first[~seen[batch[first]]])  # first draws of unseen items
                seen[batch[new]] = True
                if n_distinct + new.size >= n:
                    # stop exactly at the n-th distinct item: cut after its first occurrence
                    batches.append(batch[: new[n - n_distinct - 1] + 1])
                    break
                batches.append(batch)
                n_distinct += new.size
            idx = np.concatenate([np.empty(0, dtype=np.int64), *batches])
        return Draws(idx, self.weights(idx), self.q[idx])

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return inverse_cdf(self._cdf, rng.random(n) * self._cdf[-1])

    def predicted_variance(self, u: np.ndarray | None = None) -> float:
        """Asymptotic variance per draw, ``Σ_x p(x)² u(x)/q(x)`` (Sawade (2012), Lemma 3.4, Eq. 4.4), from the belief the proposal was built with.

        ``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²``; divide by ``n`` for the variance of an estimate from
        ``n`` draws. Pass ``u`` to evaluate this proposal under another belief or measure (e.g.
        a passive proposal, which computes none); ``inf`` when ``q = 0`` where ``p u > 0``.
        """
        u = self.info.u if u is None else np.asarray(u, dtype=float)
        if u is None:
            raise ValueError(
                "this proposal has no expected deviations u(x); build it with a measure"
            )
        return predicted_variance(self.p, u, self.q)

    def expected_cost(self, costs: np.ndarray | None) -> float:
        """Expected label cost of one draw, ``E_q[c]`` (Sawade (2012), Thm. 4.2: ``n* = Λ/E_q[c]``)."""
        if costs is None:
            return 1.0
        return float(self.q @ costs)

    def __repr__(self) -> str:
        return f"Proposal(kind={self.kind!r}, n_items={self.n_items})"


def optimal_proposal(
    pool,
    measure: str | Measure,
    *,
    model: str | None = None,
    belief: Any = None,
    risk: Any = None,
    costs: Any = None,
    belief_floor: float | str = "auto",
    mix: float | None = None,
    estimator: str = "ipw",
    defensive_floor: float | None = None,
) -> Proposal:
    """The variance-optimal proposal for any generalized measure (and the threshold-free ones).

    Implements ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(E_{y∼π}‖Dg(R)(ℓ(x, y) − R)‖²)``: Sawade (2012),
    Thm. 4.1 (Eq. 4.6), Thm. 4.2 (Eq. 4.25, label costs) and Thm. 5.1 (Eq. 5.5, differences of two
    models); Marchant & Rubinstein (2021), Prop. 1 (Eq. 5). The empirical version plugs in the pool
    distribution for ``p(x)``, the belief for ``p(y|x)`` and the intrinsic risk for ``R``
    (Sawade (2012), Sec. 4.2.2, Eq. 4.21-4.22).

    ROC AUC, average precision and recall at a false-positive rate (``"roc_auc"``,
    ``"average_precision"``, ``"recall@fpr=0.01"``) are linearized through their influence
    function instead (:func:`~bayes_activeeval.threshold_free.rank_proposal`).

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        Any measure; one bound to two models (:func:`~bayes_activeeval.measures.difference`) gives
        the power-optimal comparison proposal (Sawade (2012), Thm. 5.1).
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    belief : Belief or array-like, optional
        ``π(y|x)``. Default: the model's own probabilities (or Gaussian predictive), and for a
        measure over several models their equal mixture (Sawade (2012), Eq. 5.11).
    risk : array-like (d,), optional
        The ``R`` at which to linearize. Default: the intrinsic risk under the belief.
    costs : None, bool or array-like (n,)
        Label costs ``c(x)``; default the pool's (if any). ``False`` ignores them.
    belief_floor : float or "auto"
        Lower bound on each class probability of the belief (renormalized), so every label stays
        possible. Default ``"auto"``: the largest floor up to ``1e-6`` that adds at most 1 % to
        the proposal's mass (:func:`~bayes_activeeval.kernel.scaled_belief_floor`), so its
        variance cost under the belief is at most 1 % whatever the pool's size and skew;
        ``info["belief_floor"]`` has the value.
    mix : float, optional
        Defensive mixture weight ``δ`` in ``q ← (1 − δ) q + δ p`` (Hesterberg 1995): weights are
        bounded by ``1/δ`` and the variance is at most ``1/(1 − δ)`` times the unmixed one.
        Default ``None``: no mixture (``0``) for a generalized measure, whose proposal takes the
        defensive floor instead; ``0.05`` for a threshold-free one (:func:`~bayes_activeeval.
        threshold_free.rank_proposal`).
    defensive_floor : float, optional
        Defensive floor ``λ`` in ``q ← max(q, λ p)/Z``, ``Z = Σ max(q, λ p)``, after the mixture
        (:func:`~bayes_activeeval.kernel.floor_proposal`): weights are bounded by ``Z/λ`` and the
        variance — under any labels — is at most ``Z ≤ 1 + λ`` times the unfloored one, with
        ``Z = 1`` (no cost at all) where ``q ≥ λ p`` already. Default ``None``:
        ``DEFAULT_DEFENSIVE_FLOOR = 0.1`` for a generalized measure when ``mix`` is not given,
        else ``0`` (a given ``mix`` is the defence; ``docs/design.md``, "Defaults").
    estimator : {"ipw", "model_assisted"}
        The estimator the proposal is optimal for. ``"ipw"``: the importance-weighted estimate
        (Sawade (2012), Eq. 3.31). ``"model_assisted"``: the estimate that also uses the belief as a
        control variate (:func:`~bayes_activeeval.estimate` with ``estimator="model_assisted"``);
        its optimal proposal replaces ``u(x)`` by the belief's conditional variance
        ``E_π‖Dg(R)(ℓ − m(x))‖² = u(x) − ‖Dg(R)(m(x) − R)‖²``, ``m(x) = E_π ℓ(x, y)``.

    Returns
    -------
    Proposal
        ``kind="optimal"``; ``info`` holds ``risk``, ``jacobian``, ``u`` (the integrand used) and
        the mixing weight.

    Raises
    ------
    ValueError
        If the measure is undefined under the belief (e.g. precision when no item is predicted
        positive), or, with ``mix=0`` and no defensive floor, if the proposal gives zero mass to
        an item that needs it.
    """
    from .threshold_free import rank_measure, rank_proposal  # builds on this module

    # threshold-free measures keep rank_proposal's own defence, the mixture
    mix, defensive_floor = resolve_defences(
        mix, defensive_floor, keeps_mixture=rank_measure(measure) is not None
    )
    if getattr(pool, "is_lazy", False):  # a pool on dask: the same steps, chunk by chunk
        from .lazy import optimal_proposal as lazy_optimal_proposal

        return lazy_optimal_proposal(
            pool,
            measure,
            model=model,
            belief=belief,
            risk=risk,
            costs=costs,
            belief_floor=belief_floor,
            mix=mix,
            estimator=estimator,
            defensive_floor=defensive_floor,
        )
    mix = check_fraction(mix, "mix", allow_one=True)
    defensive_floor = check_fraction(defensive_floor, "defensive_floor", allow_one=True)

    if rank_measure(measure) is not None:  # ROC AUC, AP, recall@FPR: ψ for Dg(R)(ℓ − R)
        if risk is not None:
            raise ValueError(f"threshold-free measure {measure!r}: risk= does not apply")
        return rank_proposal(
            pool,
            measure,
            model=model,
            belief=belief,
            costs=costs,
            belief_floor=belief_floor,
            mix=mix,
            estimator=estimator,
            defensive_floor=defensive_floor,
        )
    c = label_costs(pool, costs)
    if isinstance(belief_floor, str):
        if belief_floor != "auto":
            raise ValueError(f"belief_floor must be a number or 'auto', got {belief_floor!r}")
        m, views = pool.resolve(measure, model)
        belief = as_belief(pool, belief, pool.models_of(m, model))
        belief_floor = DEFAULT_BELIEF_FLOOR
        if isinstance(belief, CategoricalBelief):
            k = None if c is None else pool.p / np.sqrt(c)
            belief_floor = scaled_belief_floor(pool, m, views, belief, weight=k)
    itg = deviation_integrand(
        pool,
        measure,
        model=model,
        belief=belief,
        risk=risk,
        belief_floor=belief_floor,
        estimator=estimator,
    )
    m, u, p = itg.measure, itg.u, pool.p
    q = proposal_from_scores(
        np.sqrt(np.maximum(u, 0.0)),
        p,
        c,
        mix,
        uniform_p=pool.has_uniform_weights,
        defensive_floor=defensive_floor,
    )
    if mix == 0 and defensive_floor == 0:
        need = support_needed(pool, m, itg.views)
        bad = np.flatnonzero(need & (q <= 0))
        if bad.size:
            raise ValueError(
                f"the proposal gives zero mass to item {bad[0]} (and {bad.size - 1} more) whose "
                "label could change the estimate; use mix > 0 or belief_floor > 0"
            )
    info = ProposalInfo(
        risk=itg.risk,
        jacobian=itg.jacobian,
        u=u,
        mix=mix,
        defensive_floor=defensive_floor,
        belief_floor=itg.belief_floor,
        measure=m.name,
        estimator=itg.estimator,
    )
    return Proposal(q, p, "optimal", info)


def passive_proposal(pool) -> Proposal:
    """Passive sampling: ``q = p`` (the uniform pool distribution unless the pool is weighted).

    Parameters
    ----------
    pool : Pool or LazyPool
        The pool whose test distribution ``p`` is copied (a lazy pool gives a lazy proposal).

    Returns
    -------
    Proposal
        ``kind="passive"`` and ``q`` a copy of ``pool.p``; for a lazy pool, a
        ``LazyProposal``.
    """
    if getattr(pool, "is_lazy", False):
        from .lazy import passive_proposal as lazy_passive_proposal

        return lazy_passive_proposal(pool)
    return Proposal(pool.p.copy(), pool.p, "passive")


def stratified_proposal(
    pool,
    measure: str | Measure | None = None,
    *,
    strata: int | np.ndarray = 10,
    allocation: str = "proportional",
    model: str | None = None,
    scores: np.ndarray | None = None,
    belief: Any = None,
    method: str = "quantile",
    mix: float = 0.0,
) -> Proposal:
    """Stratified sampling on score strata, expressed as a proposal.

    Items are grouped into strata by score; a stratum ``h`` receives a share ``a_h`` of the
    draws and items are drawn uniformly (by ``p``) within it, i.e. ``q(x) = a_h p(x)/P_h``.

    - ``"proportional"``: ``a_h = P_h`` — identical to passive sampling for i.i.d. draws.
    - ``"neyman"``: ``a_h ∝ P_h sqrt(Ū_h)`` with ``Ū_h`` the mean of
      ``u(x) = E_π‖Dg(R)(ℓ − R)‖²`` over the stratum — the optimal proposal constrained to be
      constant within strata (Neyman allocation for the self-normalized estimator).

    Parameters
    ----------
    pool : Pool or LazyPool
        The pool (a lazy pool is stratified chunk by chunk, with the same result).
    measure : str or Measure, optional
        The measure whose ``u(x)`` the ``"neyman"`` allocation uses; not needed for
        ``"proportional"``.
    strata : int or array-like (n,)
        Number of strata, or a stratum label per item.
    allocation : {"proportional", "neyman"}
        The share of draws per stratum (above).
    model : str, optional
        Which model of the pool (scores, probabilities, the measure's predictions).
    scores : array-like (n,), optional
        Scores to stratify on; default the pool's scores, else the probability of the positive
        (binary) or predicted class.
    belief : Belief or array-like, optional
        The belief ``π`` of ``u(x)`` for ``"neyman"`` (default: the model's probabilities).
    method : {"quantile", "csf"}
        Equal-size strata, or the cumulative-sqrt(F) rule (see :func:`~bayes_activeeval.strata.score_strata`).
    mix : float
        Defensive mixture with ``p`` (default 0: every stratum already has positive mass).

    Returns
    -------
    Proposal
        ``kind="stratified"``; ``info`` holds ``strata``, ``allocation`` (the share ``a_h``),
        ``stratum_mass`` (``P_h``) and ``mix``, and for ``"neyman"`` also ``u`` and ``risk``.
    """
    if getattr(pool, "is_lazy", False):  # exact strata and sums, chunk by chunk
        from .lazy import stratified_proposal as lazy_stratified_proposal

        return lazy_stratified_proposal(
            pool,
            measure,
            strata=strata,
            allocation=allocation,
            model=model,
            scores=scores,
            belief=belief,
            method=method,
            mix=mix,
        )
    if allocation not in ("proportional", "neyman"):
        raise ValueError(f"allocation must be 'proportional' or 'neyman', got {allocation!r}")
    mix = check_fraction(mix, "mix", allow_one=True)
    if isinstance(strata, (int, np.integer)) and not isinstance(strata, bool):
        if scores is None:
            s = default_scores(pool, model)
        else:
            s = check_finite(as_1d(scores, "scores", n=pool.n_items, dtype=float), "scores")
        labels, _ = score_strata(s, int(strata), method=method)
    else:
        labels = np.asarray(strata)
        if labels.shape != (pool.n_items,):
            raise ValueError(f"strata has shape {labels.shape}; expected ({pool.n_items},)")
        _, labels = np.unique(labels, return_inverse=True)
    H = int(labels.max()) + 1
    p = pool.p
    P = np.bincount(labels, weights=p, minlength=H)
    if allocation == "proportional":
        a = P.copy()
        info = ProposalInfo()
    else:
        if measure is None:
            raise ValueError("allocation='neyman' needs a measure")
        itg = deviation_integrand(pool, measure, model=model, belief=belief)
        u = itg.u
        a = neyman_allocation(P, np.bincount(labels, weights=p * u, minlength=H))
        info = ProposalInfo(u=u, risk=itg.risk)
    a = a / a.sum()
    q = mix_proposal(stratum_proposal(labels, p, a, P), p, mix)
    info = info.replace(strata=labels, allocation=a, stratum_mass=P, mix=mix)
    return Proposal(q, p, "stratified", info)


def neyman_allocation(P: np.ndarray, pu: np.ndarray) -> np.ndarray:
    """Neyman allocation of draws to strata, ``a_h ∝ P_h sqrt(Ū_h)``, ``Ū_h = Σ_{x∈h} p u / P_h``.

    The optimal proposal constrained to be constant within strata (Cochran (1977), Sec. 5.5, for
    the self-normalized estimator with ``u(x) = E_π‖Dg(R)(ℓ − R)‖²``, Sawade (2012), Thm. 4.1).

    Parameters
    ----------
    P : ndarray (H,)
        Stratum masses ``P_h = Σ_{x∈h} p(x)``.
    pu : ndarray (H,)
        ``Σ_{x∈h} p(x) u(x)`` per stratum.

    Returns
    -------
    ndarray (H,)
        Unnormalized ``a_h`` (``P`` when every ``Ū_h`` is zero).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        Ubar = pu / P
    a = P * np.sqrt(np.nan_to_num(Ubar))
    if a.sum() <= 0:
        a = P.copy()
    return a


def stratum_proposal(labels: np.ndarray, p: np.ndarray, a: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``q(x) = a_h p(x)/P_h`` for ``x`` in stratum ``h``: a share ``a_h`` of the draws per stratum,
    spread by ``p`` inside it (0 in strata without mass).

    Parameters
    ----------
    labels : ndarray of int (n,)
        Stratum of each item.
    p : ndarray (n,)
    a, P : ndarray (H,)
        Allocation and stratum masses.

    Returns
    -------
    ndarray (n,)
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(P[labels] > 0, a[labels] * p / P[labels], 0.0)


def default_scores(pool, model: str | None) -> np.ndarray:
    """The scores a stratified proposal stratifies on by default: the pool's raw scores, else the
    positive-class probability (binary) or the top class probability, else the predictive std.

    Parameters
    ----------
    pool : Pool
        The pool whose scores, probabilities or predictive standard deviations are read.
    model : str or None
        Which model of the pool (``None`` for a pool with one model).

    Returns
    -------
    ndarray (n,)
        One score per item.
    """
    model = pool.check_model(model)
    if pool.scores is not None:
        return pool.scores[model]
    v = pool.view(model)
    if v.prob is not None:
        if pool.task == "binary":
            return v.positive_prob()
        return v.prob.max(axis=1)
    if v.std is not None:
        return v.std
    raise ValueError("no scores to stratify on: give scores= or a pool with scores/probs")
