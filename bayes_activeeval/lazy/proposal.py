"""Proposals on a lazy pool: ``q`` recomputed chunk by chunk, drawn in two levels.

:func:`optimal_proposal` sums the intrinsic risk and the unnormalized optimal proposal
``s(x) = p(x) c(x)^(-1/2) sqrt(u(x))`` (Sawade (2012), Thm. 4.1-4.2) per chunk; a
:class:`LazyProposal` keeps the chunk masses and recomputes ``q`` of a chunk when a draw lands
there (the two-level draw of the package docstring). :func:`model_assisted_terms` reads the
belief's terms of the model-assisted estimate at the drawn items only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from .._validation import check_count, check_fraction, check_rng, show
from ..beliefs import as_belief, require_plugin
from ..kernel import (
    DEFAULT_BELIEF_FLOOR,
    check_risk,
    drawable,
    floor_from_sums,
    inverse_cdf,
    mix_proposal,
    resolve_defences,
    risk_jacobian,
    unreachable_message,
)
from ..measures import Measure
from ..proposals import Draws, Proposal, ProposalInfo
from .chunks import (
    OptimalParams,
    cost_chunk,
    draw_chunk,
    drawable_chunk,
    floor_sum_chunk,
    floor_sums_chunk,
    mass_chunk,
    passive_q,
    passive_sums,
    pred_var_chunk,
    q_chunk,
    qp_at,
)
from .pool import LazyPool

__all__ = [
    "LazyProposal",
    "model_assisted_terms",
    "optimal_proposal",
    "passive_proposal",
    "scaled_floor",
]


class LazyProposal(Proposal):
    """A proposal over a :class:`LazyPool`: ``q`` is recomputed chunk by chunk when needed.

    Parameters
    ----------
    pool : LazyPool
        The pool the proposal is over.
    kind : str
        What kind of proposal (``"optimal"``, ``"passive"``, ``"stratified"``, …).
    qfn : callable
        The chunk task ``qfn(chunk_pool, offset, params)`` returning ``q`` on a chunk.
    params : object
        Its picklable parameters (e.g. :class:`~bayes_activeeval.lazy.chunks.OptimalParams`).
    chunk_mass : array-like (n_chunks,)
        ``Q_k``, the proposal's mass in each chunk: finite, non-negative, with a positive total
        (as ``q`` of a :class:`Proposal`).
    info : dict, optional
        Its keys ``"normalizer"``, ``"edges"`` and ``"support"`` set the attributes of those
        names; the others are the fields of the
        :class:`~bayes_activeeval.proposals.ProposalInfo` (default ``None``: none).
    item_records : callable, optional
        ``item_records(chunk_pool, offset, params, local)`` (default ``None``: no records).

    Attributes
    ----------
    q, p : dask.array.Array
        Lazy views of the proposal and the test distribution (computing them materializes ``n``
        floats; the draws never do).
    chunk_mass : ndarray (n_chunks,)
        ``Q_k``, the proposal's mass in each chunk: the first level of the two-level draw.
    kind, info
        As for :class:`Proposal`; ``info`` (a :class:`~bayes_activeeval.proposals.ProposalInfo`)
        has no per-item ``u``, ``a`` or ``strata`` (see :meth:`predicted_variance`).
    normalizer, edges, support
        The optimal proposal's ``S = Σ_x s(x)``; a stratified proposal's stratum edges; the
        number of items with ``q > 0``, counted per chunk when the proposal was built (``None``
        when not known).
    qfn, params
        The chunk task ``qfn(chunk_pool, offset, params)`` that recomputes ``q`` on a chunk, and
        its (picklable) parameters.
    item_records : callable or None
        ``item_records(chunk_pool, offset, params, local)``: what :meth:`sample` with
        ``records=True`` also returns of each drawn item (a dict of arrays).
    """

    def __init__(
        self,
        pool: LazyPool,
        kind: str,
        qfn: Callable,
        params: Any,
        chunk_mass: np.ndarray,
        info: dict[str, Any] | None = None,
        item_records: Callable | None = None,
    ) -> None:
        # no Proposal.__post_init__: q is never materialized
        self.pool = pool
        self.kind = kind
        extra = dict(info or {})
        #: pool-wide numbers that are not per-item: the optimal proposal's normalizer ``Σ s``,
        #: a stratified proposal's stratum edges, an adaptive proposal's support size
        self.normalizer = extra.pop("normalizer", None)
        self.edges = extra.pop("edges", None)
        self.support = extra.pop("support", None)
        self.info = ProposalInfo(**extra)
        self.qfn = qfn
        self.params = params
        self.chunk_mass = np.asarray(chunk_mass, dtype=float).reshape(-1)
        if self.chunk_mass.size != pool.n_chunks:
            raise ValueError(
                f"chunk_mass has {self.chunk_mass.size} entries but the pool has "
                f"{pool.n_chunks} chunks"
            )
        bad = np.flatnonzero(~np.isfinite(self.chunk_mass) | (self.chunk_mass < 0))
        if bad.size:  # e.g. a NaN risk or belief: every q of the chunk would be NaN
            k = int(bad[0])
            raise ValueError(
                f"chunk_mass[{k}] = {show(self.chunk_mass[k])}; q must be finite and non-negative"
            )
        if not np.isfinite(self.chunk_mass.sum()):
            raise ValueError("q must be finite and non-negative; its sum overflows")
        if self.chunk_mass.sum() <= 0:
            raise ValueError("q has no mass")
        self._cdf = np.cumsum(self.chunk_mass)
        self._drawable: int | None = None
        self._q = None
        self.item_records = item_records

    @property
    def q(self):
        if self._q is None:
            self._q = self.pool.column(None, self.qfn, self.params)
        return self._q

    @q.setter
    def q(self, value):  # dataclass fields of the base class
        self._q = value

    @property
    def p(self):
        return self.pool.p

    @p.setter
    def p(self, value):
        pass

    @property
    def n_items(self) -> int:
        return self.pool.n_items

    def q_chunk(self, k: int) -> np.ndarray:
        """``q`` on chunk ``k`` (in memory: ``chunk_sizes[k]`` floats)."""
        return self.pool.map_chunks(self.qfn, self.params, chunks=[k])[0]

    def weights(self, indices: np.ndarray) -> np.ndarray:
        """Importance weights ``p/q`` of the given items (only their chunks are read).

        Parameters
        ----------
        indices : array-like of int
            Item indices in ``0..n_items - 1``.

        Returns
        -------
        ndarray
        """
        _, q, p = self._at(np.asarray(indices, dtype=np.int64))
        return p / q

    def _at(self, idx: np.ndarray):
        pool = self.pool
        idx = pool.check_indices(idx)
        chunk = pool.chunk_of(idx)
        ks = np.unique(chunk)
        q = np.empty(idx.size)
        p = np.empty(idx.size)
        tasks = [
            pool.chunk_task(int(k), qp_at, self.qfn, self.params, idx[chunk == k] - pool.offsets[k])
            for k in ks
        ]
        for k, (qk, pk) in zip(ks, pool.compute(tasks), strict=True):
            sel = chunk == k
            q[sel], p[sel] = qk, pk
        return idx, q, p

    def draw(self, n: int, rng: Any = None, *, unique: bool = False) -> Draws:
        """Draw items i.i.d. with replacement (Sawade (2012), Algorithm 2, lines 2-3), two-level.

        A uniform ``t ∈ [0, Σ_k Q_k)`` picks the chunk ``k`` whose cumulative mass interval holds
        it, then the item whose cumulative ``q`` within the chunk holds ``t − Σ_{j<k} Q_j``: the
        inverse-CDF draw of the in-memory :meth:`Proposal.draw`, so the same ``rng`` gives the
        same items (up to rounding at the ~1e-16 level). Only chunks that receive draws are read.

        Parameters
        ----------
        n : int
            Number of draws; with ``unique=True``, distinct items to reach (as in memory).
        rng : None, int or numpy.random.Generator
            Source of randomness (SPEC 7).
        unique : bool
            See ``n``.

        Returns
        -------
        Draws

        Raises
        ------
        ValueError
            With ``unique=True``, when ``n`` exceeds the items with ``q > 0`` (:attr:`support`,
            counted when the proposal was built), or the items a draw can reach (checked, by
            one pass over the chunks, when a round of draws finds no new item:
            :func:`~bayes_activeeval.kernel.drawable`), as in memory.
        """
        n = check_count(n, "n")
        rng = check_rng(rng)
        if not unique:
            idx, q, p = self.sample(n, rng)
            return Draws(idx, p / q, q)
        support = self.pool.n_items if self.support is None else int(self.support)
        if n > support:
            raise ValueError(
                f"n={n} distinct items requested but the proposal has only {support} items "
                "with positive probability"
            )
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        idx = np.empty(0, dtype=np.int64)
        n_distinct = 0
        while n_distinct < n:
            got = self.sample(max(n - n_distinct, 16), rng)
            parts.append(got)
            idx = np.concatenate([idx, got[0]])
            _, first = np.unique(idx, return_index=True)
            if first.size == n_distinct and first.size < n:
                # a round without a new item: are n items reachable at all? (else it never ends)
                reach = self.drawable_count()
                if n > reach:
                    raise ValueError(unreachable_message(n, reach))
            n_distinct = first.size
        cut = np.sort(first)[n - 1] + 1
        q = np.concatenate([g[1] for g in parts])[:cut]
        p = np.concatenate([g[2] for g in parts])[:cut]
        idx = idx[:cut]
        return Draws(idx, p / q, q)

    def drawable_count(self) -> int:
        """How many items a draw can reach (one pass over the chunks the first time).

        An item counts when its interval of the cumulative ``q`` is wide enough for a uniform
        number to land in it, at both levels of the two-level draw
        (:func:`~bayes_activeeval.kernel.drawable`); at most :attr:`support`.

        Returns
        -------
        int
        """
        if self._drawable is None:
            total = float(self._cdf[-1])
            ks = np.flatnonzero(drawable(self._cdf, total))
            counts = self.pool.map_chunks(
                drawable_chunk, self.qfn, self.params, total, chunks=ks.tolist()
            )
            self._drawable = int(sum(counts))
        return self._drawable

    def sample(self, n: int, rng: np.random.Generator, records: bool = False):
        """``n`` i.i.d. two-level inverse-CDF draws (the work behind :meth:`draw`).

        Parameters
        ----------
        n : int
        rng : numpy.random.Generator
        records : bool
            Also return what :attr:`item_records` keeps of each drawn item.

        Returns
        -------
        tuple
            ``(indices, q, p)`` at the draws, and the records (a dict of arrays) with
            ``records=True``.
        """
        pool = self.pool
        t = rng.random(n) * self._cdf[-1]
        chunk = inverse_cdf(self._cdf, t)
        ks = np.unique(chunk)
        start = np.concatenate([[0.0], self._cdf[:-1]])
        itemfn = self.item_records if records else None
        tasks = [
            pool.chunk_task(
                int(k), draw_chunk, self.qfn, self.params, t[chunk == k] - start[k], itemfn
            )
            for k in ks
        ]
        idx = np.empty(n, dtype=np.int64)
        q = np.empty(n)
        p = np.empty(n)
        recs: dict[str, np.ndarray] = {}
        for k, (local, qk, pk, rk) in zip(ks, pool.compute(tasks), strict=True):
            sel = chunk == k
            idx[sel] = local + pool.offsets[k]
            q[sel], p[sel] = qk, pk
            for key, val in (rk or {}).items():
                if key not in recs:
                    recs[key] = np.empty((n, *val.shape[1:]), dtype=val.dtype)
                recs[key][sel] = val
        if records:
            return idx, q, p, recs
        return idx, q, p

    def predicted_variance(self, u: Any = None) -> float:
        """``Σ_x p(x)² u(x)/q(x)`` (Sawade (2012), Lemma 3.4), as a sum over chunks."""
        if u is not None:
            raise ValueError("a lazy proposal evaluates its own u(x) chunk by chunk; pass no u")
        if not isinstance(self.params, OptimalParams):
            raise ValueError(
                "this proposal has no expected deviations u(x); build it with a measure"
            )
        return float(sum(self.pool.map_chunks(pred_var_chunk, self.params)))

    def expected_cost(self, costs: Any = None) -> float:
        """Expected label cost of one draw, ``E_q[c]`` with the pool's costs."""
        if costs is not None and costs is not True:
            raise ValueError("a lazy proposal uses the pool's own costs")
        if not self.pool.has_costs:
            return 1.0
        return float(sum(self.pool.map_chunks(cost_chunk, self.qfn, self.params)))

    def __repr__(self) -> str:
        return (
            f"LazyProposal(kind={self.kind!r}, n_items={self.n_items}, "
            f"n_chunks={self.pool.n_chunks})"
        )


def optimal_proposal(
    pool: LazyPool,
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
) -> LazyProposal:
    """:func:`~bayes_activeeval.optimal_proposal` on a lazy pool, in two passes over the chunks.

    Pass 1 sums ``p(x) E_π[ℓ(x, y)]`` per chunk into the intrinsic risk ``R`` (Sawade (2012),
    Eq. 4.21-4.22; skipped when ``risk`` is given). Pass 2 sums
    ``s(x) = p(x) c(x)^(-1/2) sqrt(E_π‖Dg(R)(ℓ(x, y) − R)‖²)`` per chunk (Sawade (2012), Thm. 4.1,
    Eq. 4.6; Thm. 4.2, Eq. 4.25; Thm. 5.1 for differences), giving the chunk masses of
    ``q = (1 − δ) s/Σs + δ p``; with a defensive floor ``λ > 0`` one more pass sums the chunk
    masses of ``max(q, λ p)``. ``q`` itself is recomputed per chunk when drawn from.

    ``belief`` may be ``None`` (the pool's models, per chunk), an array aligned with the pool
    (NumPy or dask; sliced per chunk) or a callable ``belief(chunk_pool, offset) -> Belief``.
    ``costs`` may be ``None``/``True`` (the pool's) or ``False``. ``belief_floor="auto"`` (the
    default) is the in-memory scaled floor (:func:`~bayes_activeeval.kernel.scaled_belief_floor`)
    on a classification pool, from two more passes: the intrinsic risk under the unfloored
    belief, then the sums ``S``, ``T`` of :func:`~bayes_activeeval.kernel.belief_floor_sums`
    (``1e-6`` on a regression pool, as in memory).

    Parameters
    ----------
    pool : LazyPool
    measure : str or Measure
        Any generalized measure (a difference of two models included).
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    belief : None, array-like or callable, optional
        ``π(y|x)``, as above (default ``None``: the plug-in from the pool's probabilities or
        predictive standard deviations, which the pool must then have).
    risk : array-like (d,), optional
        The ``R`` at which to linearize (default: the intrinsic risk under the floored belief).
    costs : None or bool, optional
        ``None``/``True``: the pool's label costs, if any; ``False``: none (default ``None``).
    belief_floor : float or "auto", optional
        Floor on each class probability of the belief, in ``[0, 1)`` (default ``"auto"``).
    mix : float, optional
        Defensive mixture weight ``δ`` in ``[0, 1]`` (default ``None``: ``0``).
    estimator : {"ipw", "model_assisted"}, optional
        The estimator the proposal is optimal for (default ``"ipw"``).
    defensive_floor : float, optional
        Defensive floor ``λ`` in ``[0, 1]`` of ``q ← max(q, λ p)/Z`` (default ``None``:
        ``DEFAULT_DEFENSIVE_FLOOR`` when ``mix`` is not given, else ``0``; as in memory).

    Returns
    -------
    LazyProposal
        ``kind="optimal"``; ``info`` holds ``risk``, ``jacobian``, ``mix``, ``belief_floor``,
        ``measure`` and ``estimator``, and ``normalizer`` is ``S = Σ_x s(x)``.

    Raises
    ------
    NotImplementedError
        For a threshold-free measure (ROC AUC, average precision, recall at a false-positive
        rate): not lazy yet (:func:`~bayes_activeeval.threshold_free.estimates.check_not_lazy`).
    """
    from ..threshold_free.estimates import check_not_lazy
    from ..threshold_free.kernels import rank_measure

    if rank_measure(measure) is not None:  # ROC AUC, AP, recall@FPR: not lazy yet
        check_not_lazy(pool, rank_measure(measure), "optimal_proposal")
    m0 = pool.resolve(measure, model)[0]  # the measure, from the pool's metadata only
    auto = isinstance(belief_floor, str)
    if auto and belief_floor != "auto":
        raise ValueError(f"belief_floor must be a number or 'auto', got {belief_floor!r}")
    floor = DEFAULT_BELIEF_FLOOR if auto else check_fraction(belief_floor, "belief_floor")
    mix, defensive_floor = resolve_defences(mix, defensive_floor)
    mix = check_fraction(mix, "mix", allow_one=True)
    defensive_floor = check_fraction(defensive_floor, "defensive_floor", allow_one=True)
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    if costs is not None and costs is not True and costs is not False:
        raise ValueError("on a lazy pool costs must be None/True (the pool's) or False")
    use_costs = pool.has_costs and costs is not False
    pool.check_belief(belief)
    if belief is None:
        require_plugin(pool)
    if auto and pool.task != "regression":  # a categorical belief: the scaled floor
        floor = scaled_floor(pool, measure, model, belief, use_costs)
    if risk is None:
        R = pool.intrinsic_risk(measure, model, belief, floor)
    else:
        R = check_risk(risk, m0)
    J = risk_jacobian(m0, R)
    prm = OptimalParams(
        measure, model, belief, floor, R, J, estimator, use_costs, pool.has_uniform_weights
    )
    sums = pool.map_chunks(mass_chunk, prm, mix == 0 and defensive_floor == 0)
    S_k = np.array([s[0] for s in sums])
    P_k = np.array([s[1] for s in sums])
    S = float(S_k.sum())
    passive = S <= 0
    if passive:  # the belief says every label is known exactly: sample passively
        S_k = P_k.copy()
        S = float(S_k.sum())
    if mix == 0 and defensive_floor == 0:
        bad = [(c[2], c[3]) for c in sums if c[2] >= 0]
        if bad and not passive:
            raise ValueError(
                f"the proposal gives zero mass to item {bad[0][0]} (and "
                f"{sum(c for _, c in bad) - 1} more) whose label could change the estimate; use "
                "mix > 0 or belief_floor > 0"
            )
    prm = replace(prm, mix=mix, S=S, passive=passive)
    chunk_mass = mix_proposal(S_k.copy(), P_k, mix, total=S)
    if defensive_floor > 0:  # one more pass: the chunk masses of max(q, λ p)
        prm = replace(prm, defensive_floor=defensive_floor)
        chunk_mass = np.array(pool.map_chunks(floor_sum_chunk, prm))
        prm = replace(prm, Z=float(chunk_mass.sum()))
        chunk_mass = chunk_mass / prm.Z
    # items with q > 0: those with p > 0 under q = p (passive or δ = 1), those with s > 0 or
    # p > 0 when mixing or flooring, else those with s > 0
    column = 5 if (passive or mix == 1) else 6 if (mix > 0 or defensive_floor > 0) else 4
    support = int(sum(c[column] for c in sums))
    info = {
        "risk": R,
        "jacobian": J,
        "mix": mix,
        "defensive_floor": defensive_floor,
        "belief_floor": floor,
        "measure": m0.name,
        "estimator": estimator,
        "normalizer": S,
        "support": support,
    }
    return LazyProposal(pool, "optimal", q_chunk, prm, chunk_mass, info)


def scaled_floor(pool: LazyPool, measure, model, belief, costs: bool) -> float:
    """:func:`~bayes_activeeval.kernel.scaled_belief_floor` on a lazy pool, in two passes.

    Pass 1 sums the intrinsic risk ``R`` under the unfloored belief; pass 2 the sums ``S``,
    ``T`` of :func:`~bayes_activeeval.kernel.belief_floor_sums` at ``R``
    (:func:`~bayes_activeeval.lazy.chunks.floor_sums_chunk`); the floor is
    :func:`~bayes_activeeval.kernel.floor_from_sums` of their totals. Equal to the in-memory
    floor up to the order of summation.

    Parameters
    ----------
    pool : LazyPool
    measure, model, belief
        As for :func:`optimal_proposal`.
    costs : bool
        Whether the pool's label costs enter (``k = p c^(-1/2)``).

    Returns
    -------
    float
    """
    m = pool.resolve(measure, model)[0]
    R = pool.intrinsic_risk(measure, model, belief, 0.0)
    J = m.jacobian(R)
    if not np.all(np.isfinite(J)):
        return DEFAULT_BELIEF_FLOOR
    sums = np.sum(pool.map_chunks(floor_sums_chunk, measure, model, belief, R, J, costs), axis=0)
    return floor_from_sums(float(sums[0]), float(sums[1]))


def passive_proposal(pool: LazyPool) -> LazyProposal:
    """``q = p`` on a lazy pool (chunk masses from one pass of per-chunk sums of ``p``).

    Parameters
    ----------
    pool : LazyPool

    Returns
    -------
    LazyProposal
        ``kind="passive"``; ``support`` is the number of items with ``p > 0``.
    """
    if pool.has_uniform_weights:
        mass = pool.chunk_sizes / pool.n_items
        support = pool.n_items
    else:
        sums = pool.map_chunks(passive_sums)
        mass = np.array([m for m, _ in sums])
        support = int(sum(c for _, c in sums))
    return LazyProposal(pool, "passive", passive_q, None, mass, {"support": support})


def model_assisted_terms(pool: LazyPool, m: Measure, model, belief, indices: np.ndarray):
    """The belief's terms of the model-assisted estimate on a lazy pool.

    Parameters
    ----------
    pool : LazyPool
    m : Measure
    model : str or None
    belief : None or array-like
        The plug-in (``None``) or a belief array aligned with the pool.
    indices : ndarray of int
        The drawn items.

    Returns
    -------
    M : ndarray (d,)
        ``Σ_x p(x) m(x)`` over the pool, ``m(x) = E_π[ℓ(x, y)]`` (a sum over chunks).
    mm : ndarray (n, d)
        ``m(x_i)`` at the drawn items (only their chunks are read).
    """
    if belief is not None and (callable(belief) or not hasattr(belief, "__getitem__")):
        raise ValueError("a model-assisted estimate on a lazy pool takes belief=None or an array")
    pool.check_belief(belief)
    M = pool.intrinsic_risk(m, model, belief, 0.0)
    sub = pool.take(indices)
    if belief is None:
        b = as_belief(sub, None, sub.models_of(m, model))
    else:
        # gather the drawn rows only: a dask belief computes just the blocks holding them
        arr = belief if hasattr(belief, "shape") else np.asarray(belief)
        rows = np.asarray(arr[pool.check_indices(indices)])
        b = as_belief(sub, rows, sub.models_of(m, model))
    _, views = sub.resolve(m, model)
    ar = np.arange(sub.n_items)
    mm = b.expect(lambda yy, s: m.loss(yy, views(ar)), ar)
    return M, mm
