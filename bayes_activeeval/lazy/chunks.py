"""Chunk tasks: what a worker runs on one chunk of a lazy pool.

A chunk arrives as a dict of raw NumPy columns (``"pred/<model>"``, ``"prob/<model>"``,
``"std/<model>"``, ``"score/<model>"``, ``"cost"``, ``"weight"``, ``"item_id"``). :class:`ChunkSpec`
turns it into a small in-memory :class:`~bayes_activeeval.Pool` (validated and encoded exactly as
an in-memory pool would be, with the chunk's slice of the global ``p(x)``), and
:func:`run_chunk` calls a task ``fn(chunk_pool, offset, *args)`` on it. The tasks here are the
per-chunk pieces of the optimal proposal (Sawade (2012), Thm. 4.1-4.2): the intrinsic risk, the
integrand ``u``, the unnormalized proposal ``s``, its mass, the mixed ``q``, the second level of
the two-level draw. They call the package's NumPy kernels (:mod:`~bayes_activeeval.kernel`), so
the lazy results equal the in-memory ones up to the order of floating-point summation.

Every function is module level and every parameter set a frozen dataclass: picklable, so the tasks
travel to ``dask.distributed`` workers. This module does not import dask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._validation import show
from ..beliefs import CategoricalBelief, as_belief
from ..kernel import (
    belief_floor_sums,
    deviation_integrand,
    drawable,
    floor_proposal,
    intrinsic_risk,
    inverse_cdf,
    loss_table,
    mix_proposal,
    predicted_variance,
    proposal_scores,
    support_needed,
)
from ..measures import Measure
from ..pool import Pool

__all__ = [
    "ChunkBlock",
    "ChunkSpec",
    "OptimalParams",
    "chunk_belief",
    "chunk_p",
    "cost_chunk",
    "draw_chunk",
    "drawable_chunk",
    "first_predictions",
    "floor_sums_chunk",
    "get_column",
    "mass_chunk",
    "passive_q",
    "passive_sums",
    "pred_var_chunk",
    "q_chunk",
    "qp_at",
    "risk_chunk",
    "run_chunk",
    "s_chunk",
    "take_raw",
    "u_chunk",
    "unique_predictions",
    "weight_sum",
    "whole_and_distinct",
]


@dataclass(frozen=True)
class ChunkSpec:
    """What every chunk task needs to turn raw columns into an in-memory :class:`Pool`.

    Small and picklable, so it travels to distributed workers with every task.

    Parameters
    ----------
    models : tuple of str
        The pool's model names (the ``<model>`` of the ``"pred/<model>"`` columns).
    task : str
        The pool's task, ``"binary"``, ``"multiclass"`` or ``"regression"``.
    classes : ndarray or None
        The class values of the whole pool (``None`` for regression).
    pos_label : object or None
        The positive class of the whole pool (``None``: none).
    n_items : int
        Items in the whole pool.
    weight_total : float or None
        Sum of the raw item weights over the pool (``None``: uniform ``p = 1/n_items``).
    has_probs, has_std, has_scores, has_costs : bool
        Whether the chunks carry ``"prob/<model>"``, ``"std/<model>"``, ``"score/<model>"`` and
        ``"cost"`` columns.

    Attributes
    ----------
    models : tuple of str
    task : str
        ``"binary"``, ``"multiclass"`` or ``"regression"``.
    classes, pos_label
        As the lazy pool inferred them for the whole pool (a chunk never re-infers them).
    n_items : int
        Items in the whole pool.
    weight_total : float or None
        ``Σ`` of the raw item weights over the pool (``None``: uniform ``p = 1/n_items``).
    has_probs, has_std, has_scores, has_costs : bool
        Which optional columns the chunks carry.
    """

    models: tuple[str, ...]
    task: str
    classes: Any
    pos_label: Any
    n_items: int
    weight_total: float | None  # Σ raw weights (None: uniform p = 1/N)
    has_probs: bool
    has_std: bool
    has_scores: bool
    has_costs: bool

    def p(self, parts: dict[str, np.ndarray], n: int) -> np.ndarray:
        """The global test distribution ``p(x)`` on the ``n`` items of a chunk (not renormalized)."""
        if self.weight_total is None:
            return np.full(n, 1.0 / self.n_items)
        return np.asarray(parts["weight"], dtype=float) / self.weight_total

    def pool(self, parts: dict[str, np.ndarray], offset: int, p: Any = None) -> Pool:
        """The chunk as an in-memory pool whose ``p`` is the chunk's slice of the global ``p``
        (or ``p``, when given)."""
        ms = self.models

        def role(r):
            return {m: parts[f"{r}/{m}"] for m in ms}

        try:
            cp = Pool(
                predictions=role("pred"),
                probs=role("prob") if self.has_probs else None,
                predictive_std=role("std") if self.has_std else None,
                scores=role("score") if self.has_scores else None,
                costs=parts["cost"] if self.has_costs else None,
                classes=self.classes,
                pos_label=self.pos_label,
                task="regression" if self.task == "regression" else "classification",
            )
        except (ValueError, TypeError) as exc:
            n = len(next(iter(parts.values())))
            where = (
                "among the items read (indices are within them)"
                if p is not None
                else f"in the chunk of items {offset}..{offset + n - 1}; indices are within it"
            )
            raise type(exc)(f"{exc} ({where})") from exc
        n = cp.n_items
        if p is not None:
            cp._weights = p
            return cp
        if self.weight_total is not None:
            w = np.asarray(parts["weight"], dtype=float)
            bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
            if bad.size:
                raise ValueError(
                    f"weights[{offset + bad[0]}] = {show(w[bad[0]])}; item weights must be "
                    "finite and >= 0"
                )
        cp._weights = self.p(parts, n)  # the global p(x) on this chunk (not renormalized)
        return cp


def run_chunk(spec: ChunkSpec, parts, offset: int, fn: Callable, *args: Any) -> Any:
    """Run a chunk task: ``fn(chunk_pool, offset, *args)``.

    Parameters
    ----------
    spec : ChunkSpec
    parts : dict of ndarray
        The chunk's raw columns.
    offset : int
        Global index of the chunk's first item.
    fn : callable
        A module-level task ``fn(chunk_pool, offset, *args)``.

    Returns
    -------
    Whatever ``fn`` returns (keep it small: per-chunk sums or the rows asked for).
    """
    return fn(spec.pool(parts, offset), offset, *args)


def get_column(parts, key):
    """The raw column ``key`` of a chunk (a raw-column task: ``(parts, key)``).

    Parameters
    ----------
    parts : dict of ndarray
        The chunk's raw columns, keyed ``"pred/<model>"``, ``"prob/<model>"``, ``"cost"``, ….
    key : str
        The column, e.g. ``"pred/<model>"`` or ``"cost"``.

    Returns
    -------
    ndarray
    """
    return parts[key]


def chunk_p(cp: Pool, offset: int) -> np.ndarray:
    """``p(x)`` on a chunk.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item (unused).

    Returns
    -------
    ndarray (n_k,)
        The global ``p(x)`` of the chunk's items (not renormalized).
    """
    return cp.p


def first_predictions(parts, offset, models):
    """The raw predictions of the first model on a chunk (to tell regression from classes).

    Parameters
    ----------
    parts : dict of ndarray
        The chunk's raw columns, keyed ``"pred/<model>"``, ``"prob/<model>"``, ``"cost"``, ….
    offset : int
        Global index of the chunk's first item (unused).
    models : tuple of str
        The pool's model names; the first one's column is read.

    Returns
    -------
    ndarray (n_k,)
    """
    return np.asarray(parts[f"pred/{models[0]}"])


def unique_predictions(parts, offset, models):
    """The distinct raw predictions of all models on a chunk (to infer the classes).

    Parameters
    ----------
    parts : dict of ndarray
        The chunk's raw columns, keyed ``"pred/<model>"``, ``"prob/<model>"``, ``"cost"``, ….
    offset : int
        Global index of the chunk's first item (unused).
    models : tuple of str
        The pool's model names.

    Returns
    -------
    ndarray
        Sorted distinct values.
    """
    return np.unique(np.concatenate([np.unique(np.asarray(parts[f"pred/{m}"])) for m in models]))


def whole_and_distinct(parts, offset, models):
    """Whether the first model's raw predictions on a chunk are all whole numbers, and if so the
    distinct predictions of all models (to infer the task and the classes in one pass).

    Parameters
    ----------
    parts : dict of ndarray
        The chunk's raw columns, keyed ``"pred/<model>"``, ``"prob/<model>"``, ``"cost"``, ….
    offset : int
        Global index of the chunk's first item (unused).
    models : tuple of str
        The pool's model names.

    Returns
    -------
    whole : bool
        ``False`` if a prediction of the first model is a non-whole (or NaN) float.
    distinct : ndarray or None
        Sorted distinct predictions of all models (``None`` when not ``whole``).
    """
    first = np.asarray(parts[f"pred/{models[0]}"])
    if first.dtype.kind == "f" and not np.all(first == np.round(first)):
        return False, None
    return True, unique_predictions(parts, offset, models)


def weight_sum(parts, offset):
    """``Σ`` of the raw item weights of a chunk, checked finite and non-negative.

    Parameters
    ----------
    parts : dict of ndarray
        The chunk's raw columns; its ``"weight"`` column is read.
    offset : int
        Global index of the chunk's first item (names a bad item in the error).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming the first bad item by its global index.
    """
    w = np.asarray(parts["weight"], dtype=float)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise ValueError(
            f"weights[{offset + bad[0]}] = {show(w[bad[0]])}; item weights must be finite and >= 0"
        )
    return float(w.sum())


def take_raw(parts, local: np.ndarray, spec: ChunkSpec) -> dict[str, np.ndarray]:
    """The raw columns of the rows ``local`` of a chunk, and their global ``p`` (key ``"__p"``).

    The rows are validated and encoded later, together (:meth:`ChunkSpec.pool` with ``p``).

    Parameters
    ----------
    parts : dict of ndarray
        The chunk's raw columns, keyed ``"pred/<model>"``, ``"prob/<model>"``, ``"cost"``, ….
    local : ndarray of int
        Row indices within the chunk (repeats allowed).
    spec : ChunkSpec
        The pool's spec (its ``weight_total`` and ``n_items`` give ``p``).

    Returns
    -------
    dict of ndarray
        Every column but ``"weight"`` at the rows ``local``, and ``"__p"``.
    """
    out = {k: np.asarray(v)[local] for k, v in parts.items() if k != "weight"}
    if spec.weight_total is None:
        out["__p"] = np.full(local.size, 1.0 / spec.n_items)
    else:
        out["__p"] = np.asarray(parts["weight"], dtype=float)[local] / spec.weight_total
    return out


@dataclass(frozen=True)
class ChunkBlock:
    """A per-item array already cut to one chunk's rows (items ``offset..offset + n_k − 1``).

    :meth:`~bayes_activeeval.lazy.LazyPool.chunk_task` wraps the chunk's slice of a dask (or
    NumPy) belief in it, so each task depends on its own block only (not on the whole array,
    which dask would compute and hand to every task) and :func:`chunk_belief` does not slice
    it again. A dataclass: dask computes the block inside it before the task runs.

    Parameters
    ----------
    values : array-like (n_k, ...)
        The chunk's rows.

    Attributes
    ----------
    values : array-like
        The chunk's rows (an ndarray by the time a task runs).
    """

    values: Any

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the block."""
        return tuple(np.shape(self.values))

    def __len__(self) -> int:
        return int(self.shape[0])


def chunk_belief(cp: Pool, offset: int, measure: Measure, model, belief, floor: float):
    """The belief ``π(y|x)`` on a chunk, floored at ``floor``.

    Parameters
    ----------
    cp : Pool
        The chunk.
    offset : int
        Global index of the chunk's first item.
    measure : Measure
        The measure (its models give the plug-in's).
    model : str or None
        Which model, for a pool with several and a measure not bound to models.
    belief : None, ChunkBlock, array-like or callable
        ``None``: the plug-in from the chunk's own columns; a :class:`ChunkBlock`: the chunk's
        rows, already cut (used as they are); an array (NumPy or dask) aligned with the pool:
        its slice for the chunk; a callable: ``belief(chunk_pool, offset)``.
    floor : float
        The floor on each class probability.

    Returns
    -------
    Belief

    Raises
    ------
    ValueError
        If a block's rows are not the chunk's number of items.
    """
    models = cp.models_of(measure, model)
    if belief is None:
        b = as_belief(cp, None, models)
    elif isinstance(belief, ChunkBlock):
        rows = np.asarray(belief.values)
        if rows.ndim == 0 or rows.shape[0] != cp.n_items:
            raise ValueError(
                f"belief block for items {offset}..{offset + cp.n_items - 1} has shape "
                f"{rows.shape}; expected {cp.n_items} rows"
            )
        b = as_belief(cp, rows, models)
    elif callable(belief):
        b = belief(cp, offset)
    else:
        sl = slice(offset, offset + cp.n_items)
        b = as_belief(cp, np.asarray(belief[sl]), models)
    return b.floored(floor)


def risk_chunk(cp: Pool, offset: int, measure, model, belief, floor) -> np.ndarray:
    """The chunk's share ``Σ_{x∈k} p(x) E_π[ℓ(x, y)]`` of the intrinsic risk (Sawade (2012),
    Eq. 4.21-4.22); the shares of all chunks add up to ``R``.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    measure : str or Measure
        The measure, as given to :func:`~bayes_activeeval.optimal_proposal`.
    model : str or None
        Which model, for a pool with several and a measure not bound to models.
    belief : None, array-like or callable
        As for :func:`chunk_belief`.
    floor : float
        The belief floor.

    Returns
    -------
    ndarray (d,)
    """
    m, views = cp.resolve(measure, model)
    b = chunk_belief(cp, offset, m, model, belief, floor)
    table = loss_table(cp, m, views) if isinstance(b, CategoricalBelief) else None
    return intrinsic_risk(cp, m, views, b, table=table)


def floor_sums_chunk(
    cp: Pool, offset: int, measure, model, belief, R: np.ndarray, J: np.ndarray, costs: bool
) -> tuple[float, float]:
    """The chunk's shares of the sums ``S``, ``T`` behind the scaled belief floor
    (:func:`~bayes_activeeval.kernel.belief_floor_sums`, under the unfloored belief, at its
    intrinsic risk ``R`` and ``J = Dg(R)``; ``k = p c^(-1/2)`` when ``costs``).

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    measure : str or Measure
        The measure, as given to :func:`~bayes_activeeval.optimal_proposal`.
    model : str or None
        Which model, for a pool with several and a measure not bound to models.
    belief : None, array-like or callable
        As for :func:`chunk_belief`.
    R : ndarray (d,)
        The pool-wide intrinsic risk under the unfloored belief.
    J : ndarray (m, d)
        ``Dg(R)``.
    costs : bool
        Whether the pool's label costs enter ``k`` (ignored when the pool has none).

    Returns
    -------
    S_k, T_k : float
    """
    m, views = cp.resolve(measure, model)
    b = chunk_belief(cp, offset, m, model, belief, 0.0)
    k = cp.p / np.sqrt(cp.costs) if costs and cp.costs is not None else None
    return belief_floor_sums(cp, m, views, b, R, J, weight=k)


@dataclass(frozen=True)
class OptimalParams:
    """Everything a chunk needs to recompute its ``u``, ``s`` and ``q`` of the optimal proposal.

    Parameters
    ----------
    measure : str or Measure
        The measure, as given to :func:`~bayes_activeeval.optimal_proposal`.
    model : str or None
        Which model, for a pool with several and a measure not bound to models.
    belief : None, array-like or callable
        The belief, as for :func:`chunk_belief`.
    floor : float
        The belief floor applied on every chunk.
    R : ndarray (d,)
        The pool-wide risk at which to linearize.
    J : ndarray (m, d)
        ``Dg(R)``.
    estimator : str
        ``"ipw"`` or ``"model_assisted"``.
    costs : bool
        Whether the pool's label costs enter ``s``.
    uniform : bool
        Whether ``p`` is uniform (then ``s`` drops it).
    mix : float, optional
        Defensive mixture weight ``δ`` (default ``0.0``).
    S : float, optional
        ``Σ_x s(x)`` over the pool (default ``1.0``, a placeholder until it is summed).
    passive : bool, optional
        Whether the proposal falls back to ``p`` (default ``False``).
    defensive_floor : float, optional
        Defensive floor ``λ`` of ``q ← max(q, λ p)/Z`` (default ``0.0``: none).
    Z : float, optional
        ``Σ_x max(q(x), λ p(x))`` over the pool (default ``1.0``, until it is summed).

    Attributes
    ----------
    measure, model, belief
        As given to :func:`~bayes_activeeval.optimal_proposal` (``belief`` as for
        :func:`chunk_belief`).
    floor : float
        The belief floor.
    R, J : ndarray
        The pool-wide risk and ``Dg(R)``.
    estimator : str
    costs, uniform : bool
        Whether the pool's label costs enter; whether ``p`` is uniform (it cancels).
    mix : float
        Defensive mixture weight ``δ``.
    S : float
        ``Σ_x s(x)`` over the pool (set after the pass that sums it).
    passive : bool
        ``Σ s = 0``: the proposal falls back to ``p``.
    defensive_floor, Z : float
        The defensive floor ``λ`` and the floored proposal's normalizer.
    """

    measure: Any
    model: str | None
    belief: Any
    floor: float
    R: np.ndarray
    J: np.ndarray
    estimator: str
    costs: bool
    uniform: bool
    mix: float = 0.0
    S: float = 1.0
    passive: bool = False
    defensive_floor: float = 0.0
    Z: float = 1.0


def u_chunk(cp: Pool, offset: int, prm: OptimalParams) -> np.ndarray:
    """``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²`` on a chunk (Sawade (2012), Thm. 4.1, the integrand of
    Eq. 4.6), or the belief's conditional variance for the model-assisted estimator: the core
    kernel's :func:`~bayes_activeeval.kernel.deviation_integrand` at the pool-wide ``R``.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    prm : OptimalParams
        The optimal proposal's parameters.

    Returns
    -------
    ndarray (n_k,)
    """
    m, _ = cp.resolve(prm.measure, prm.model)
    b = chunk_belief(cp, offset, m, prm.model, prm.belief, 0.0)  # the kernel floors it
    itg = deviation_integrand(
        cp,
        prm.measure,
        model=prm.model,
        belief=b,
        risk=prm.R,
        belief_floor=prm.floor,
        estimator=prm.estimator,
    )
    return itg.u


def s_chunk(cp: Pool, offset: int, prm: OptimalParams) -> np.ndarray:
    """``s(x) = p(x) c(x)^(-1/2) sqrt(u(x))`` (``p`` dropped when uniform: it cancels), the
    unnormalized optimal proposal of Sawade (2012), Thm. 4.1 / Thm. 4.2 (Eq. 4.25).

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    prm : OptimalParams
        The optimal proposal's parameters.

    Returns
    -------
    ndarray (n_k,)
        ``p`` itself (a copy) when ``prm.passive``.
    """
    p = cp.p
    if prm.passive:
        return p.copy()
    u = u_chunk(cp, offset, prm)
    return proposal_scores(
        np.sqrt(np.maximum(u, 0.0)), p, cp.costs if prm.costs else None, uniform_p=prm.uniform
    )


def mass_chunk(cp: Pool, offset: int, prm: OptimalParams, check_support: bool):
    """The sums of one chunk behind the first level of the two-level draw.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    prm : OptimalParams
        The optimal proposal's parameters.
    check_support : bool
        Also look for items that need ``q > 0`` but get ``s = 0``.

    Returns
    -------
    tuple
        ``(S_k, P_k, first, count, n_s, n_p, n_sp)``: ``Σ s`` and ``Σ p`` over the chunk; with
        ``check_support`` the global index of the first item that needs ``q > 0`` but has
        ``s = 0`` (else ``-1``) and how many such items there are (Marchant & Rubinstein (2021),
        Sec. 3.1); and the numbers of items with ``s > 0``, with ``p > 0`` and with either, from
        which the proposal's support (items with ``q > 0``) follows once ``δ`` and the
        fallback to ``p`` are known.
    """
    s = s_chunk(cp, offset, prm)
    p = cp.p
    first, count = -1, 0
    if check_support:
        m, views = cp.resolve(prm.measure, prm.model)
        bad = np.flatnonzero(support_needed(cp, m, views) & (s <= 0))
        if bad.size:
            first, count = offset + int(bad[0]), int(bad.size)
    pos_s, pos_p = s > 0, p > 0
    return (
        float(s.sum()),
        float(p.sum()),
        first,
        count,
        int(np.count_nonzero(pos_s)),
        int(np.count_nonzero(pos_p)),
        int(np.count_nonzero(pos_s | pos_p)),
    )


def q_chunk(cp: Pool, offset: int, prm: OptimalParams) -> np.ndarray:
    """``q(x) = (1 − δ) s(x)/S + δ p(x)`` on a chunk: the mixed optimal proposal
    (:func:`~bayes_activeeval.kernel.mix_proposal` with the pool-wide normalizer ``S``), then the
    defensive floor ``max(q, λ p)/Z`` (:func:`~bayes_activeeval.kernel.floor_proposal` with the
    pool-wide normalizer ``Z``).

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    prm : OptimalParams
        The optimal proposal's parameters.

    Returns
    -------
    ndarray (n_k,)
    """
    q = mix_proposal(s_chunk(cp, offset, prm), cp.p, prm.mix, total=prm.S)
    return floor_proposal(q, cp.p, prm.defensive_floor, total=prm.Z)


def floor_sum_chunk(cp: Pool, offset: int, prm: OptimalParams) -> float:
    """``Σ max(q(x), λ p(x))`` over a chunk, ``q`` the mixed proposal before the floor: the
    chunk's share of the floored proposal's normalizer ``Z``."""
    q = q_chunk(cp, offset, replace(prm, defensive_floor=0.0))
    return float(np.maximum(q, prm.defensive_floor * cp.p).sum())


def draw_chunk(
    cp: Pool,
    offset: int,
    qfn: Callable,
    prm: Any,
    targets: np.ndarray,
    itemfn: Callable | None = None,
):
    """The second level of the two-level draw: the items of a chunk at cumulative-``q`` positions.

    Parameters
    ----------
    cp : Pool
    offset : int
    qfn : callable
        ``qfn(cp, offset, prm)``: the proposal on the chunk.
    prm
        Its parameters.
    targets : ndarray
        Positions in ``[0, Σ_{x∈k} q(x))``.
    itemfn : callable, optional
        ``itemfn(cp, offset, prm, local)``: what to keep of the drawn items (a dict of arrays).

    Returns
    -------
    tuple
        ``(local indices, q, p, records)`` at the drawn items (``records`` None without ``itemfn``).
    """
    q = qfn(cp, offset, prm)
    local = inverse_cdf(np.cumsum(q), targets)
    recs = None if itemfn is None else itemfn(cp, offset, prm, local)
    return local, q[local], cp.p[local], recs


def drawable_chunk(cp: Pool, offset: int, qfn: Callable, prm: Any, total: float) -> int:
    """How many items of a chunk the second level of the two-level draw can reach.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    qfn : callable
        ``qfn(cp, offset, prm)``: the proposal on the chunk.
    prm
        Its parameters.
    total : float
        The whole proposal's mass (the scale of the uniform numbers,
        :func:`~bayes_activeeval.kernel.drawable`).

    Returns
    -------
    int
        Items whose interval in the chunk's cumulative ``q`` is wide enough to be drawn.
    """
    return int(np.count_nonzero(drawable(np.cumsum(qfn(cp, offset, prm)), total)))


def pred_var_chunk(cp: Pool, offset: int, prm: OptimalParams) -> float:
    """The chunk's share of ``Σ_x p(x)² u(x)/q(x)`` (Sawade (2012), Lemma 3.4, Eq. 4.4).

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    prm : OptimalParams
        The optimal proposal's parameters.

    Returns
    -------
    float
    """
    return predicted_variance(cp.p, u_chunk(cp, offset, prm), q_chunk(cp, offset, prm))


def cost_chunk(cp: Pool, offset: int, qfn: Callable, prm: Any) -> float:
    """The chunk's share of ``E_q[c] = Σ_x q(x) c(x)`` (``Σ q`` without costs).

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    qfn : callable
        ``qfn(cp, offset, prm)``: the proposal on the chunk (e.g. :func:`q_chunk`).
    prm
        Its parameters.

    Returns
    -------
    float
    """
    q = qfn(cp, offset, prm)
    return float(q @ cp.costs) if cp.costs is not None else float(q.sum())


def passive_q(cp: Pool, offset: int, prm: Any) -> np.ndarray:
    """The passive proposal ``q = p`` on a chunk (``prm`` unused).

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item (unused).
    prm
        Unused (the passive proposal has no parameters).

    Returns
    -------
    ndarray (n_k,)
    """
    return cp.p.copy()


def passive_sums(cp: Pool, offset: int) -> tuple[float, int]:
    """``P_k = Σ_{x∈k} p(x)`` and the number of the chunk's items with ``p(x) > 0``.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item (unused).

    Returns
    -------
    P_k : float
    n_pos : int
    """
    p = cp.p
    return float(p.sum()), int(np.count_nonzero(p > 0))


def chunk_predicted_classes(cp: Pool, offset: int, models: tuple[str, ...]) -> np.ndarray:
    """Whether each model predicts each class on some item of the chunk with ``p(x) > 0``.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``.
    offset : int
        Global index of the chunk's first item (unused).
    models : tuple of str
        The models to read.

    Returns
    -------
    ndarray of bool, shape (len(models), C)
    """
    return cp.predicted_classes(models)


def chunk_agreeing_classes(cp: Pool, offset: int, a: str, b: str) -> np.ndarray:
    """Whether models ``a`` and ``b`` predict each class on exactly the same items of the chunk
    with ``p(x) > 0`` (:meth:`Pool.agreeing_classes`), shape ``(C,)``."""
    return cp.agreeing_classes(a, b)


def qp_at(cp: Pool, offset: int, qfn: Callable, prm: Any, local: np.ndarray):
    """``(q, p)`` at the chunk's items ``local``, with ``q = qfn(cp, offset, prm)``.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool whose ``p`` is its slice of the global ``p(x)``
        (:meth:`ChunkSpec.pool`).
    offset : int
        Global index of the chunk's first item.
    qfn : callable
        ``qfn(cp, offset, prm)``: the proposal on the chunk (e.g. :func:`q_chunk`).
    prm
        Its parameters.
    local : ndarray of int
        Item indices within the chunk.

    Returns
    -------
    q, p : ndarray
        At ``local``.
    """
    q = qfn(cp, offset, prm)
    return q[local], cp.p[local]
