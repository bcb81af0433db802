"""The core kernel: the deviation integrand and the proposal-from-scores step.

Every proposal in the package is built from two quantities (Sawade (2012), Thm. 4.1, 4.2, 5.1;
Marchant & Rubinstein (2021), Prop. 1)::

    u(x) = E_{y∼π(y|x)} ‖Dg(R) (ℓ(x, y) − R)‖²          (deviation_integrand)
    q(x) ∝ p(x) · c(x)^(-1/2) · sqrt(u(x)),  then q ← (1 − δ) q + δ p   (proposal_from_scores)

with ``R`` the intrinsic risk under the belief ``π`` (Sawade (2012), Eq. 4.21-4.22). This module
holds both steps and the loss kernels behind them; :mod:`~bayes_activeeval.proposals`,
:mod:`~bayes_activeeval.adaptive` and :mod:`~bayes_activeeval.comparison` call them. It depends
only on NumPy, the measures and the beliefs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import check_fraction, show
from .beliefs import Belief, CategoricalBelief, as_belief
from .measures import Measure, ModelView

__all__ = [
    "CHUNK",
    "DEFAULT_BELIEF_FLOOR",
    "DEFAULT_DEFENSIVE_FLOOR",
    "DEFAULT_MIX",
    "DRAW_RESOLUTION",
    "FLOOR_MASS",
    "Integrand",
    "LossTable",
    "belief_floor_sums",
    "cell_deviation_norms",
    "cell_mass",
    "check_risk",
    "class_deviation_norms",
    "deviation_integrand",
    "drawable",
    "expected_loss",
    "expected_sq_deviation",
    "explained_sq_deviation",
    "floor_from_sums",
    "floor_proposal",
    "intrinsic_risk",
    "inverse_cdf",
    "label_costs",
    "loss_table",
    "mix_proposal",
    "predicted_variance",
    "proposal_from_scores",
    "proposal_scores",
    "resolve_defences",
    "risk_jacobian",
    "scaled_belief_floor",
    "support_needed",
    "unreachable_message",
]

#: Default defensive mixture weight δ: weights are bounded by 1/δ = 20 and the variance is at most
#: 1/(1-δ) ≈ 1.053 times that of the unmixed proposal.
DEFAULT_MIX = 0.05
#: Default defensive floor λ of the static optimal proposal of a generalized measure,
#: ``q ← max(q, λ p)/Z``: weights are bounded by ``Z/λ ≤ 11`` and the variance is at most
#: ``Z ≤ 1 + λ`` times that of the unfloored proposal, ``Z = 1`` where ``q ≥ λ p`` already
#: (:func:`floor_proposal`; ``docs/design.md``, "Defaults").
DEFAULT_DEFENSIVE_FLOOR = 0.1
#: Default floor on the belief's class probabilities (keeps every label possible, so q > 0 wherever
#: the loss can be non-zero even without mixing). The adaptive evaluator's; the static proposal's
#: default is ``"auto"`` (:func:`scaled_belief_floor`), at most this.
DEFAULT_BELIEF_FLOOR = 1e-6
#: Largest share of the proposal's mass the ``"auto"`` belief floor may add (its variance cost
#: under the belief is at most this factor; :func:`scaled_belief_floor`).
FLOOR_MASS = 0.01
#: Narrowest share of a cumulative sum an inverse-CDF draw is taken to reach: the uniform numbers
#: (``Generator.random``, 53 bits) times the total are ``2**-53`` of it apart, so an item whose
#: interval is narrower than two such steps (one whose ``q`` rounds away in the sum included) is
#: hit with probability below ``2.2e-16`` per draw, or never (:func:`drawable`).
DRAW_RESOLUTION = 2.0**-52
#: Items processed per block by the vectorised kernels (bounds peak memory on 10^7-item pools).
CHUNK = 1 << 18


# ------------------------------------------------------------------------------------------------
# Kernels. Two paths compute the same quantities:
#  - the generic path evaluates the loss for every label value, chunk by chunk;
#  - the tabular path, for classification measures whose loss depends on an item only through the
#    predicted class(es) (Measure.tabular), evaluates the loss once per (prediction, label) cell and
#    gathers: exact, O(n·C), and an order of magnitude faster on 10^7-item pools.
@dataclass(frozen=True)
class LossTable:
    """The loss of a tabular measure as a table over (prediction key, label).

    ``keys[x]`` codes the prediction(s) of item ``x`` (for several models ``Σ_m f_m(x) C^m``) and
    ``table[k, c]`` is ``ℓ`` for prediction key ``k`` and label ``c``, shape ``(K, C, d)``.

    Parameters
    ----------
    keys : ndarray of int (n,)
        The prediction key of every item, in ``0..K-1`` (``K = C^M`` for ``M`` models).
    table : ndarray (K, C, d)
        The vector loss of every (prediction key, label) cell.
    """

    keys: np.ndarray
    table: np.ndarray


MAX_TABLE_ROWS = 1 << 20


def loss_table(pool, measure: Measure, views) -> LossTable | None:
    """The :class:`LossTable` of a tabular measure on a classification pool, else ``None``.

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.

    Returns
    -------
    LossTable or None
        ``None`` when the measure is not tabular, the pool is a regression pool, or the table
        would have more than ``2**20`` rows (``K · C``).
    """
    if not measure.tabular or pool.task == "regression":
        return None
    C = pool.n_classes
    full = views(None)
    names = list(full) if isinstance(full, dict) else [None]
    preds = [full[m].pred for m in names] if isinstance(full, dict) else [full.pred]
    K = C ** len(preds)
    if K * C > MAX_TABLE_ROWS:
        return None
    if len(preds) == 1:
        keys = preds[0]
    else:
        keys = np.zeros(pool.n_items, dtype=np.int64)
        for i, pr in enumerate(preds):
            keys += pr.astype(np.int64) * C**i
    combos = np.arange(K)
    cell_preds = [np.repeat((combos // C**i) % C, C) for i in range(len(preds))]
    y = np.tile(np.arange(C), K)

    def mk(pr):
        return ModelView(pred=pr, pos=pool.pos, n_classes=C)

    cells = {m: mk(cp) for m, cp in zip(names, cell_preds, strict=True)}
    view = cells if isinstance(full, dict) else cells[None]
    table = measure.loss(y, view).reshape(K, C, measure.dim)
    return LossTable(keys, table)


def _gather(values: np.ndarray, keys: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """``Σ_c probs[x, c] · values[keys[x], c]`` for every item (values of shape (K, C))."""
    out = probs[:, 0] * values[keys, 0]
    for c in range(1, probs.shape[1]):
        out += probs[:, c] * values[keys, c]
    return out


def expected_loss(pool, measure: Measure, views, belief: Belief, chunk: int = CHUNK) -> np.ndarray:
    """Per-item expected loss ``E_{y∼π}[ℓ(x, y)]``, shape ``(n, d)``.

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    belief : Belief
        The label distribution ``π(y|x)`` of every item of the pool.
    chunk : int, optional
        Items per block on the generic path (default :data:`CHUNK`, ``2**18``).

    Returns
    -------
    ndarray (n, d)
    """
    out = np.empty((pool.n_items, measure.dim))
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)
        out[sl] = belief.expect(lambda y, s, v=v: measure.loss(y, v), sl)
    return out


def intrinsic_risk(
    pool,
    measure: Measure,
    views,
    belief: Belief,
    chunk: int = CHUNK,
    table: LossTable | None = None,
) -> np.ndarray:
    """``R = Σ_x p(x) E_π[ℓ(x, y)]`` (Sawade (2012), Eq. 4.21-4.22), shape ``(d,)``.

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    belief : Belief
        The label distribution ``π(y|x)`` of every item of the pool.
    chunk : int, optional
        Items per block on the generic path (default :data:`CHUNK`, ``2**18``).
    table : LossTable, optional
        The measure's :func:`loss_table`, if already built (default ``None``: built here when
        ``belief`` is a :class:`~bayes_activeeval.beliefs.CategoricalBelief`; ``None`` from
        :func:`loss_table` means the generic path). Give one only with a categorical belief:
        the tabular path reads ``belief.probs``.

    Returns
    -------
    ndarray (d,)
        On a chunk of a lazy pool, the chunk's share of ``R`` (``p`` is the global one).
    """
    p = pool.p
    if table is None and isinstance(belief, CategoricalBelief):
        table = loss_table(pool, measure, views)
    if table is not None:
        W = cell_mass(table.keys, p, belief.probs, table.table.shape[0])
        return np.einsum("kc,kcd->d", W, table.table)
    R = np.zeros(measure.dim)
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)
        el = belief.expect(lambda y, s, v=v: measure.loss(y, v), sl)
        R += p[sl] @ el
    return R


def cell_mass(keys: np.ndarray, weight: np.ndarray, probs: np.ndarray, n_keys: int) -> np.ndarray:
    """``W[k, c] = Σ_x weight(x) π_c(x) 1[k(x) = k]``: the belief's mass per (prediction key,
    label) cell of a :class:`LossTable`, shape ``(n_keys, C)``.

    With ``weight = p`` it is the sufficient statistic of a tabular measure under a categorical
    belief: the intrinsic risk is ``R = Σ_{k,c} W[k, c] ℓ[k, c]`` (Sawade (2012), Eq. 4.21-4.22).
    Sums over disjoint sets of items (chunks of a lazy pool) add up to the pool's ``W``.

    Parameters
    ----------
    keys : ndarray of int (n,)
        ``LossTable.keys``.
    weight : ndarray (n,)
        Per-item weight (``p(x)``, or ``p(x) c(x)^(-1/2)``).
    probs : ndarray (n, C)
        The belief's class probabilities.
    n_keys : int
        ``K``, the number of prediction keys.

    Returns
    -------
    ndarray (n_keys, C)
    """
    return np.stack(
        [
            np.bincount(keys, weights=weight * probs[:, c], minlength=n_keys)
            for c in range(probs.shape[1])
        ],
        axis=1,
    )


def check_risk(risk: Any, measure: Measure) -> np.ndarray:
    """A given risk ``R`` as a float vector with one entry per component of ``measure``.

    Parameters
    ----------
    risk : array-like
        The risk; flattened, so any shape with ``d`` entries is accepted.
    measure : Measure
        The (resolved) measure whose ``d`` components ``risk`` must match.

    Returns
    -------
    ndarray (d,)

    Raises
    ------
    ValueError
        If ``risk`` has the wrong number of entries or an entry that is not finite (a NaN or
        infinite ``R`` would make every ``q(x)`` NaN).
    """
    R = np.asarray(risk, dtype=float).reshape(-1)
    if R.size != measure.dim:
        raise ValueError(
            f"risk has {R.size} entries; measure {measure.name!r} has {measure.dim} components"
        )
    bad = np.flatnonzero(~np.isfinite(R))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"risk[{i}] = {R[i]}; risk must be finite")
    return R


def risk_jacobian(
    measure: Measure,
    R: np.ndarray,
    *,
    risk_name: str = "intrinsic risk",
    purpose: str = "the optimal proposal",
) -> np.ndarray:
    """``Dg(R)``, the Jacobian every optimal proposal linearizes at (Sawade (2012), Thm. 4.1,
    Eq. 4.6), checked finite.

    Parameters
    ----------
    measure : Measure
    R : ndarray (d,)
        The risk at which to linearize.
    risk_name, purpose : str
        How the error message names ``R`` and what cannot be built.

    Returns
    -------
    ndarray (m, d)

    Raises
    ------
    ValueError
        If the measure is undefined at ``R`` (e.g. precision when no item is predicted positive).
    """
    J = measure.jacobian(R)
    if not np.all(np.isfinite(J)):
        raise ValueError(
            f"measure {measure.name!r} is undefined at the {risk_name} "
            f"R={np.round(R, 6).tolist()} (e.g. no item predicted or believed positive); "
            f"cannot build {purpose}"
        )
    return J


def _centre(measure: Measure, J: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``Dg(R)·R``, the centring of ``Dg(R)(ℓ − R) = Dg(R)ℓ − Dg(R)R``. It vanishes exactly for a
    scale-invariant ``g`` (Euler's theorem, degree 0); using the exact zero keeps ``q = 0`` where
    the loss is identically zero (e.g. predicted negatives for precision)."""
    return np.zeros(J.shape[0]) if measure.scale_invariant else J @ R


def expected_sq_deviation(
    pool,
    measure: Measure,
    views,
    belief: Belief,
    R: np.ndarray,
    J: np.ndarray,
    chunk: int = CHUNK,
    table: LossTable | None = None,
) -> np.ndarray:
    """``u(x) = E_{y∼π}‖Dg(R)(ℓ(x, y) − R)‖²`` per item (the integrand of Sawade (2012), Thm. 4.1;
    Marchant & Rubinstein (2021), Eq. 5 with the self-normalized centring).

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    belief : Belief
        The label distribution ``π(y|x)`` of every item of the pool.
    R : ndarray (d,)
        The risk at which to centre and linearize (the intrinsic risk under the belief, or a
        given one).
    J : ndarray (m, d)
        ``Dg(R)`` (:func:`risk_jacobian`).
    chunk : int, optional
        Items per block on the generic path (default :data:`CHUNK`, ``2**18``).
    table : LossTable, optional
        The measure's :func:`loss_table`, if already built (default ``None``: built here when
        ``belief`` is a :class:`~bayes_activeeval.beliefs.CategoricalBelief`; ``None`` from
        :func:`loss_table` means the generic path). Give one only with a categorical belief:
        the tabular path reads ``belief.probs``.

    Returns
    -------
    ndarray (n,)
    """
    JT = J.T
    offset = _centre(measure, J, R)
    if table is None and isinstance(belief, CategoricalBelief):
        table = loss_table(pool, measure, views)
    if table is not None:
        sq = cell_deviation_norms(table.table, measure, R, J, power=2)  # (K, C)
        return _gather(sq, table.keys, belief.probs)
    u = np.empty(pool.n_items)
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)

        def sq(y, s, v=v):
            dev = measure.loss(y, v) @ JT - offset
            return np.einsum("ij,ij->i", dev, dev)

        u[sl] = belief.expect(sq, sl)
    return u


def explained_sq_deviation(
    pool,
    measure: Measure,
    views,
    belief: Belief,
    R: np.ndarray,
    J: np.ndarray,
    chunk: int = CHUNK,
    table: LossTable | None = None,
) -> np.ndarray:
    """``‖Dg(R)(m(x) − R)‖²`` per item, ``m(x) = E_π[ℓ(x, y)]``: the part of
    :func:`expected_sq_deviation` the belief explains. ``u(x)`` minus this is the belief's
    conditional variance ``E_π‖Dg(R)(ℓ − m(x))‖²``, the integrand of the model-assisted proposal.

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    belief : Belief
        The label distribution ``π(y|x)`` of every item of the pool.
    R : ndarray (d,)
        The risk at which to centre and linearize (the intrinsic risk under the belief, or a
        given one).
    J : ndarray (m, d)
        ``Dg(R)`` (:func:`risk_jacobian`).
    chunk : int, optional
        Items per block on the generic path (default :data:`CHUNK`, ``2**18``).
    table : LossTable, optional
        The measure's :func:`loss_table`, if already built (default ``None``: built here when
        ``belief`` is a :class:`~bayes_activeeval.beliefs.CategoricalBelief`; ``None`` from
        :func:`loss_table` means the generic path). Give one only with a categorical belief:
        the tabular path reads ``belief.probs``.

    Returns
    -------
    ndarray (n,)
    """
    offset = _centre(measure, J, R)
    if table is None and isinstance(belief, CategoricalBelief):
        table = loss_table(pool, measure, views)
    if table is not None:
        dev = table.table @ J.T - offset  # (K, C, m)
        out = np.zeros(pool.n_items)
        for j in range(dev.shape[2]):
            mj = _gather(dev[:, :, j], table.keys, belief.probs)
            out += mj * mj
        return out
    m_all = expected_loss(pool, measure, views, belief, chunk)
    dev = m_all @ J.T - offset
    return np.einsum("ij,ij->i", dev, dev)


def cell_deviation_norms(
    table: np.ndarray, measure: Measure, R: np.ndarray, J: np.ndarray, *, power: int = 1
) -> np.ndarray:
    """``‖Dg(R)(ℓ[k, c] − R)‖^power`` per cell of a loss table ``ℓ`` of shape ``(K, C, d)``.

    The deviation of Sawade (2012), Thm. 4.1 (Eq. 4.6) and Marchant & Rubinstein (2021), Prop. 1-2,
    evaluated once per (prediction key, label) cell; centred exactly as
    :func:`expected_sq_deviation` (no centring for a scale-invariant ``g``).

    Parameters
    ----------
    table : ndarray (K, C, d)
        The loss table ``ℓ`` (``LossTable.table``).
    measure : Measure
        The measure; only its ``scale_invariant`` flag is read (it decides the centring).
    R : ndarray (d,)
        The risk at which to centre and linearize (the intrinsic risk under the belief, or a
        given one).
    J : ndarray (m, d)
        ``Dg(R)`` (:func:`risk_jacobian`).
    power : int, optional
        ``1`` for the norm, ``2`` (or any other value) for its square (default ``1``).

    Returns
    -------
    ndarray (K, C)
    """
    dev = table @ J.T - _centre(measure, J, R)
    sq = np.einsum("kcm,kcm->kc", dev, dev)
    return np.sqrt(sq) if power == 1 else sq


def class_deviation_norms(
    pool,
    measure: Measure,
    views,
    R: np.ndarray,
    J: np.ndarray,
    *,
    power: int = 1,
    nonzero: bool = True,
    chunk: int = CHUNK,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``n[x, c] = ‖Dg(R)(ℓ(x, c) − R)‖^power`` for every item and class, shape ``(n, C)``.

    With ``nonzero=True`` also ``nz[x, c] = any(ℓ(x, c) ≠ 0)``. Any floor ``ε`` and categorical
    belief ``π`` then give the integrand of the practical proposals,
    ``a(x) = Σ_c π(c|x) max{n[x, c], ε nz[x, c]}`` (Marchant & Rubinstein (2021), Prop. 2),
    without re-evaluating the loss.

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    R : ndarray (d,)
        The risk at which to centre and linearize (the intrinsic risk under the belief, or a
        given one).
    J : ndarray (m, d)
        ``Dg(R)`` (:func:`risk_jacobian`).
    power : {1, 2}, optional
        ``1`` for the norm, ``2`` for its square (default ``1``); anything else raises
        ``ValueError``.
    nonzero : bool, optional
        Also return ``nz`` (default ``True``).
    chunk : int, optional
        Items per block on the generic path (default :data:`CHUNK`, ``2**18``).

    Returns
    -------
    n : ndarray (n, C)
    nz : ndarray of bool (n, C) or None
        ``None`` with ``nonzero=False``.
    """
    if power not in (1, 2):
        raise ValueError(f"power must be 1 or 2, got {power!r}")
    offset = _centre(measure, J, R)
    table = loss_table(pool, measure, views)
    if table is not None:  # exact: evaluate per (prediction, label) cell and gather
        cell = cell_deviation_norms(table.table, measure, R, J, power=power)
        nz_cell = np.any(table.table != 0, axis=2) if nonzero else None
        return cell[table.keys], None if nz_cell is None else nz_cell[table.keys]
    n_items, C = pool.n_items, pool.n_classes
    out = np.empty((n_items, C))
    nz = np.empty((n_items, C), dtype=bool) if nonzero else None
    scalar = J.shape[0] == 1
    j0 = J[0]
    c0 = float(offset[0])
    for start in range(0, n_items, chunk):
        sl = slice(start, min(start + chunk, n_items))
        v = views(sl)
        size = sl.stop - sl.start
        for c in range(C):
            L = measure.loss(np.full(size, c, dtype=np.int32), v)
            if scalar:
                dev = L @ j0 - c0
                out[sl, c] = np.abs(dev) if power == 1 else dev * dev
            else:
                dev = L @ J.T - offset
                sq = np.einsum("ij,ij->i", dev, dev)
                out[sl, c] = np.sqrt(sq) if power == 1 else sq
            if nz is not None:  # column loop: much faster than any(axis=1) for small d
                acc = L[:, 0] != 0
                for j in range(1, L.shape[1]):
                    acc |= L[:, j] != 0
                nz[sl, c] = acc
    return out, nz


def support_needed(pool, measure: Measure, views, chunk: int = CHUNK) -> np.ndarray:
    """Items that need ``q > 0``: all with ``p > 0``, except, for scale-invariant measures, items
    whose loss is zero for every possible label (Marchant & Rubinstein (2021), Sec. 3.1: ``q(x) > 0``
    wherever ``p(x)‖ℓ(x, y)‖ > 0``).

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    chunk : int, optional
        Items per block on the generic path (default :data:`CHUNK`, ``2**18``).

    Returns
    -------
    ndarray of bool (n,)
    """
    need = pool.p > 0
    if not measure.scale_invariant or pool.task == "regression":
        return need
    table = loss_table(pool, measure, views)
    if table is not None:
        nonzero = np.any(table.table != 0, axis=(1, 2))
        return need & nonzero[table.keys]
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)
        any_nonzero = np.zeros(sl.stop - sl.start, dtype=bool)
        for c in range(pool.n_classes):
            y = np.full(sl.stop - sl.start, c, dtype=np.int32)
            any_nonzero |= np.any(measure.loss(y, v) != 0, axis=1)
        need[sl] &= any_nonzero
    return need


def scaled_belief_floor(
    pool,
    measure: Measure,
    views,
    belief: CategoricalBelief,
    *,
    weight: np.ndarray | None = None,
    mass: float = FLOOR_MASS,
    cap: float = DEFAULT_BELIEF_FLOOR,
) -> float:
    """The largest belief floor ``f <= cap`` that adds at most ``mass`` to the proposal's mass.

    The optimal proposal is ``q*(x) ∝ s(x) = k(x) sqrt(u(x))``, ``u(x) = Σ_y π(y|x) d_y(x)``,
    ``d_y = ‖Dg(R)(ℓ(x, y) − R)‖²`` (Sawade (2012), Thm. 4.1, Eq. 4.6; Marchant & Rubinstein
    (2021), Prop. 1), ``k = p c^(-1/2)``. Flooring ``π`` at ``f`` (renormalized) gives
    ``π_f(y) <= π(y) + f``, hence ``sqrt(u_f) <= sqrt(u) + sqrt(f) t(x)``,
    ``t = (Σ_y d_y)^(1/2)``, and the floored proposal's total mass ``S_f <= S + sqrt(f) T`` with
    ``S = Σ k sqrt(u)``, ``T = Σ k t``. Choosing ``sqrt(f) = mass · S / T`` bounds the added mass by
    ``mass · S``, so ``q_f >= q* / ((1 + mass) sqrt(1 + C f))`` pointwise and the predicted variance
    ``Σ p² u / q`` (Sawade (2012), Eq. 4.4) under the unfloored belief is at most
    ``(1 + mass) sqrt(1 + C f)`` times that of ``q*`` — also after the same defensive mixture.

    A fixed floor does not scale: on a pool of ``N`` confident negatives and ``M`` predicted
    positives it adds about ``N sqrt(f)`` items' worth of mass against ``M``; with ``f = 1e-6``,
    ``N = 54,000`` and ``M = 18`` it halves the positives' share of ``q``. The scaled floor gives
    ``sqrt(f) ≈ mass · M / N`` there.

    Parameters
    ----------
    pool, measure, views
        As :func:`~bayes_activeeval.optimal_proposal` resolves them.
    belief : CategoricalBelief
        The unfloored belief.
    weight : ndarray (n,), optional
        ``k(x)`` (default ``p``).
    mass : float
        Largest added share of the proposal's mass (default ``0.01``).
    cap : float
        Largest floor returned (default ``1e-6``).

    Returns
    -------
    float
        The floor ``f`` (``cap`` when the unfloored proposal is degenerate).
    """
    R = intrinsic_risk(pool, measure, views, belief)
    J = measure.jacobian(R)
    if not np.all(np.isfinite(J)):
        return float(cap)
    S, T = belief_floor_sums(pool, measure, views, belief, R, J, weight=weight)
    return floor_from_sums(S, T, mass=mass, cap=cap)


def belief_floor_sums(
    pool,
    measure: Measure,
    views,
    belief: CategoricalBelief,
    R: np.ndarray,
    J: np.ndarray,
    *,
    weight: np.ndarray | None = None,
) -> tuple[float, float]:
    """The two sums behind :func:`scaled_belief_floor`: ``S = Σ k sqrt(u)`` and ``T = Σ k t``.

    ``u(x) = Σ_y π(y|x) d_y(x)``, ``t(x) = (Σ_y d_y(x))^(1/2)``, ``d_y = ‖Dg(R)(ℓ(x, y) − R)‖²``
    at the unfloored belief's intrinsic risk ``R`` and ``J = Dg(R)``; ``k = p`` or ``weight``.
    Both are sums over items, so the sums over the chunks of a lazy pool add up to the pool's.

    Parameters
    ----------
    pool : Pool
        The pool: an in-memory :class:`~bayes_activeeval.Pool` (or one chunk of a lazy pool).
    measure : Measure
        The measure, resolved for the pool (:meth:`~bayes_activeeval.Pool.resolve`).
    views : callable
        ``views(idx)``: the :class:`~bayes_activeeval.measures.ModelView` of the items ``idx``
        (a dict of them for a measure bound to several models), as returned by
        :meth:`~bayes_activeeval.Pool.resolve`.
    belief : CategoricalBelief
        The unfloored belief.
    R : ndarray (d,)
        Its intrinsic risk (:func:`intrinsic_risk`).
    J : ndarray (m, d)
        ``Dg(R)``.
    weight : ndarray (n,), optional
        ``k(x)``, e.g. ``p(x) c(x)^(-1/2)`` with label costs (default ``None``: ``p``).

    Returns
    -------
    S, T : float
    """
    d, _ = class_deviation_norms(pool, measure, views, R, J, power=2, nonzero=False)
    k = pool.p if weight is None else weight
    S = float(k @ np.sqrt(np.maximum(_row_sum(belief.probs * d), 0.0)))
    T = float(k @ np.sqrt(_row_sum(d)))
    return S, T


def floor_from_sums(
    S: float, T: float, *, mass: float = FLOOR_MASS, cap: float = DEFAULT_BELIEF_FLOOR
) -> float:
    """The scaled belief floor ``min(cap, (mass · S / T)²)`` from the sums of
    :func:`belief_floor_sums` (``cap`` when either sum is zero); see :func:`scaled_belief_floor`.

    Parameters
    ----------
    S, T : float
        The sums ``S = Σ k sqrt(u)`` and ``T = Σ k t`` over the pool.
    mass : float, optional
        Largest added share of the proposal's mass (default :data:`FLOOR_MASS`, ``0.01``).
    cap : float, optional
        Largest floor returned (default :data:`DEFAULT_BELIEF_FLOOR`, ``1e-6``).

    Returns
    -------
    float
    """
    if not (S > 0 and T > 0):
        return float(cap)
    return float(min(cap, (mass * S / T) ** 2))


def _row_sum(a: np.ndarray) -> np.ndarray:
    out = a[:, 0].copy()
    for c in range(1, a.shape[1]):
        out += a[:, c]
    return out


def label_costs(pool, costs) -> np.ndarray | None:
    """The label costs ``c(x)`` a proposal uses: the pool's (``None``/``True``), none (``False``)
    or the given array (checked positive and finite).

    Parameters
    ----------
    pool : Pool
        The pool (its ``costs`` and ``n_items`` are read).
    costs : None, bool or array-like (n,)
        ``None`` or ``True``: the pool's costs; ``False``: none; an array: one cost per item.

    Returns
    -------
    ndarray (n,) or None
        ``None`` for no costs (also when the pool has none).
    """
    if costs is None or costs is True:
        return pool.costs
    if costs is False:
        return None
    arr = np.asarray(costs, dtype=float)
    if arr.shape != (pool.n_items,):
        raise ValueError(f"costs has shape {arr.shape}; expected ({pool.n_items},)")
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        i = int(np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))[0])
        raise ValueError(f"costs[{i}] = {show(arr[i])}; label costs must be positive and finite")
    return arr


def mix_proposal(
    s: np.ndarray, p: np.ndarray, mix: float, total: float | None = None
) -> np.ndarray:
    """Defensive mixture ``(1 − δ) s/Σs + δ p``, in place on ``s`` (Marchant & Rubinstein (2021),
    Sec. 3.3.1; Hesterberg's defensive importance sampling).

    ``total`` is the normalizer ``Σs`` when ``s`` is one part of a larger proposal (a chunk of a
    lazy pool, or per-chunk masses); default ``s.sum()``.

    Parameters
    ----------
    s : ndarray of float (n,)
        Unnormalized proposal (non-negative); overwritten with the result.
    p : ndarray (n,)
        The test distribution on the same items (or the per-chunk masses ``P_k``).
    mix : float
        Defensive mixture weight ``δ`` in ``[0, 1]``; ``0`` only normalizes.
    total : float, optional
        The normalizer of ``s`` (default ``None``: ``s.sum()``).

    Returns
    -------
    ndarray (n,)
        ``s`` itself, now the mixed proposal.
    """
    s *= (1.0 - mix) / (s.sum() if total is None else total)
    if mix:
        s += mix * p
    return s


def resolve_defences(
    mix: float | None, defensive_floor: float | None, *, keeps_mixture: bool = False
) -> tuple[float, float]:
    """``(mix, defensive_floor)`` with their ``None`` defaults resolved, the one place the
    defaults of a proposal's defence are decided.

    The static optimal proposal of a measure of expected losses and one model takes the
    defensive floor :data:`DEFAULT_DEFENSIVE_FLOOR` and no mixture (a given ``mix`` is the
    defence instead, and turns the floor off unless ``defensive_floor`` is given too);
    ``keeps_mixture=True`` (threshold-free measures, comparisons, adaptive and ranking designs,
    whose records were made with it) takes the mixture :data:`DEFAULT_MIX` and no floor
    (``docs/design.md``, "Defaults").

    Parameters
    ----------
    mix, defensive_floor : float or None
        As given by the caller (``None``: the default).
    keeps_mixture : bool
        Whether the design's default defence is the mixture.

    Returns
    -------
    (float, float)
        ``mix`` and ``defensive_floor``, unchecked.
    """
    if keeps_mixture:
        return (DEFAULT_MIX if mix is None else mix), (
            0.0 if defensive_floor is None else defensive_floor
        )
    if defensive_floor is None:
        defensive_floor = DEFAULT_DEFENSIVE_FLOOR if mix is None else 0.0
    return (0.0 if mix is None else mix), defensive_floor


def floor_proposal(
    q: np.ndarray, p: np.ndarray, floor: float, total: float | None = None
) -> np.ndarray:
    """Defensive floor ``q ← max(q, λ p) / Z``, ``Z = Σ max(q, λ p)``, in place on ``q``.

    A defensive component that costs only where it acts: with ``q`` normalized, ``Z − 1 =
    Σ (λ p − q)₊ ≤ λ P(q < λ p)``, and since the floored proposal is at least ``q/Z`` everywhere,
    its variance ``Σ p² v/q`` is at most ``Z`` times that of ``q`` for *any* non-negative
    integrand ``v`` (the true labels' or a belief's), while every weight ``p/q`` is at most
    ``Z/λ``. Hesterberg's (1995) defensive mixture ``(1 − δ) q + δ p`` bounds the weights by
    ``1/δ`` but pays ``1/(1 − δ)`` everywhere; the floor pays nothing on a pool where the
    belief puts at least ``λ p`` on every item (then ``Z = 1`` and ``q`` is unchanged).

    Parameters
    ----------
    q : ndarray of float (n,)
        A normalized proposal (or one chunk of it); overwritten with the result.
    p : ndarray (n,)
        The test distribution on the same items (a chunk's slice of it when ``total`` is given).
    floor : float
        ``λ`` in ``[0, 1]``; ``0`` returns ``q`` unchanged.
    total : float, optional
        The normalizer ``Z`` when ``q`` is one part of a larger proposal (default ``None``:
        ``Σ max(q, λ p)`` over ``q`` itself).

    Returns
    -------
    ndarray (n,)
        ``q`` itself, now floored and renormalized.
    """
    if floor:
        np.maximum(q, floor * p, out=q)
        q /= q.sum() if total is None else total
    return q


@dataclass(frozen=True)
class Integrand:
    """The deviation integrand of a measure under a belief, and what it was computed from.

    Parameters
    ----------
    u : ndarray (n,)
        The integrand per item: ``E_π‖Dg(R)(ℓ(x, y) − R)‖²``, or the conditional variance.
    risk : ndarray (d,)
        The risk ``R`` at which the integrand is centred and linearized.
    jacobian : ndarray (m, d)
        ``Dg(R)``, the measure's Jacobian at ``risk``.
    measure : Measure
        The measure, resolved for the pool.
    belief_floor : float
        The floor applied to the belief's class probabilities (``0``: none).
    estimator : str
        The estimator the integrand is for, ``"ipw"`` or ``"model_assisted"``.
    views : callable, optional
        The measure's ``views(idx)`` on the pool (:meth:`~bayes_activeeval.Pool.resolve`), kept
        for callers that read the loss again (default ``None``).

    Attributes
    ----------
    u : ndarray (n,)
        ``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²`` (or, for ``estimator="model_assisted"``, the belief's
        conditional variance ``E_π‖Dg(R)(ℓ − m(x))‖²``).
    risk : ndarray (d,)
        ``R``, the intrinsic risk under the belief (or the one given).
    jacobian : ndarray (m, d)
        ``Dg(R)``.
    measure : Measure
        The measure, resolved for the pool.
    belief_floor : float
    estimator : str
    """

    u: np.ndarray
    risk: np.ndarray
    jacobian: np.ndarray
    measure: Measure
    belief_floor: float
    estimator: str
    views: Any = None


def deviation_integrand(
    pool,
    measure: str | Measure,
    *,
    model: str | None = None,
    belief: Any = None,
    risk: Any = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    estimator: str = "ipw",
) -> Integrand:
    """The integrand ``u(x) = E_{y∼π}‖Dg(R)(ℓ(x, y) − R)‖²`` of the optimal proposal.

    Sawade (2012), Thm. 4.1 (Eq. 4.6) with the empirical plug-ins of Sec. 4.2.2 (Eq. 4.21-4.22:
    the belief for ``p(y|x)``, the intrinsic risk for ``R``); Marchant & Rubinstein (2021),
    Prop. 1 (Eq. 5). Parameters as :func:`~bayes_activeeval.optimal_proposal`.

    Parameters
    ----------
    pool : Pool
        The pool (an in-memory :class:`~bayes_activeeval.Pool`, or one chunk of a lazy pool).
    measure : str or Measure
        The measure (a name or a :class:`~bayes_activeeval.measures.Measure`).
    model : str, optional
        Which model, for a pool with several and a measure not bound to models.
    belief : Belief or array-like, optional
        ``π(y|x)``: a :class:`~bayes_activeeval.beliefs.Belief` or class probabilities. Default:
        the pool's plug-in from the model's own probabilities (or Gaussian predictive).
    risk : array-like (d,), optional
        The ``R`` at which to linearize. Default: the intrinsic risk under the (floored) belief.
    belief_floor : float, optional
        Lower bound on each class probability of the belief (renormalized), in ``[0, 1)``
        (default :data:`DEFAULT_BELIEF_FLOOR`, ``1e-6``; no ``"auto"`` here).
    estimator : {"ipw", "model_assisted"}, optional
        ``"model_assisted"`` returns the belief's conditional variance instead of ``u``
        (default ``"ipw"``).

    Returns
    -------
    Integrand
        ``u`` with the ``R``, ``Dg(R)``, resolved measure, floor and views it was computed from.

    Raises
    ------
    ValueError
        If the measure is undefined at ``R`` (e.g. precision when no item is predicted positive).
    """
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    floor = check_fraction(belief_floor, "belief_floor")
    b = as_belief(pool, belief, models).floored(floor)
    table = loss_table(pool, m, views) if isinstance(b, CategoricalBelief) else None
    R = intrinsic_risk(pool, m, views, b, table=table) if risk is None else check_risk(risk, m)
    J = risk_jacobian(m, R)
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    u = expected_sq_deviation(pool, m, views, b, R, J, table=table)
    if estimator == "model_assisted":
        u = np.maximum(u - explained_sq_deviation(pool, m, views, b, R, J, table=table), 0.0)
    return Integrand(u, R, J, m, floor, estimator, views)


def proposal_scores(
    scores: np.ndarray, p: np.ndarray, costs: np.ndarray | None = None, *, uniform_p: bool = False
) -> np.ndarray:
    """Unnormalized proposal ``s(x) = p(x) · c(x)^(-1/2) · scores(x)``.

    ``scores`` is ``sqrt(u(x))`` for the optimal proposal (Sawade (2012), Thm. 4.2, Eq. 4.25 with
    costs) or any other non-negative per-item magnitude. ``uniform_p=True`` says ``p`` is
    constant and skips the factor (it cancels in the normalization). Returns a new array.

    Parameters
    ----------
    scores : ndarray (n,)
        Non-negative per-item magnitudes.
    p : ndarray (n,)
        The test distribution.
    costs : ndarray (n,), optional
        Label costs ``c(x)`` (default ``None``: none).
    uniform_p : bool, optional
        ``p`` is constant: drop the factor ``p(x)`` (default ``False``).

    Returns
    -------
    ndarray (n,)
    """
    s = np.array(scores, dtype=float) if uniform_p else p * scores
    if costs is not None:
        s /= np.sqrt(costs)
    return s


def proposal_from_scores(
    scores: np.ndarray,
    p: np.ndarray,
    costs: np.ndarray | None = None,
    mix: float = 0.0,
    *,
    uniform_p: bool = False,
    defensive_floor: float = 0.0,
) -> np.ndarray:
    """The proposal-from-scores step: ``q ∝ p · c^(-1/2) · scores``, then the defensive mixture
    and the defensive floor.

    ``q = (1 − δ) s/Σs + δ p`` with ``s`` from :func:`proposal_scores`; when ``s`` has no mass
    (the belief says every label is known exactly: nothing to optimize) ``s = p`` (passive).
    For the optimal proposal ``scores = sqrt(u)`` (:func:`deviation_integrand`).

    Parameters
    ----------
    scores : ndarray (n,)
        Non-negative per-item magnitudes.
    p : ndarray (n,)
        The test distribution.
    costs : ndarray (n,), optional
        Label costs ``c(x)`` (default ``None``: none).
    mix : float, optional
        Defensive mixture weight ``δ`` (default ``0.0``: no mixture).
    uniform_p : bool, optional
        ``p`` is constant: drop the factor ``p(x)`` (default ``False``).
    defensive_floor : float, optional
        Defensive floor ``λ``: ``q ← max(q, λ p)/Z`` (:func:`floor_proposal`; default ``0.0``:
        none).

    Returns
    -------
    ndarray (n,)
        The proposal ``q`` (summing to one when ``p`` does).
    """
    s = proposal_scores(scores, p, costs, uniform_p=uniform_p)
    if s.sum() <= 0:
        s = p.copy()
    return floor_proposal(mix_proposal(s, p, mix), p, defensive_floor)


def predicted_variance(p: np.ndarray, u: np.ndarray, q: np.ndarray) -> float:
    """``Σ_x p(x)² u(x)/q(x)``: the asymptotic variance per draw of the importance-weighted
    estimate under ``q`` (Sawade (2012), Lemma 3.4, Eq. 4.4); ``inf`` where ``q = 0`` but
    ``p u > 0``. Sums over disjoint sets of items add up.

    Parameters
    ----------
    p, u, q : ndarray (n,)
        Test distribution, deviation integrand (:func:`deviation_integrand`) and proposal.

    Returns
    -------
    float
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p * u > 0, p**2 * u / q, 0.0)
    return float(terms.sum())


def inverse_cdf(cdf: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling: the index ``i`` with ``cdf[i-1] <= t < cdf[i]`` for each target.

    ``cdf`` is the cumulative sum of a proposal (or of per-chunk masses) and ``targets`` uniform
    on ``[0, cdf[-1])``; a target at or above ``cdf[-1]`` (rounding at the top) goes to the last
    item with positive mass, never to a zero-mass item after it. This is how every draw in
    the package turns uniform numbers into items (Sawade (2012), Algorithm 2, line 3).

    Parameters
    ----------
    cdf : ndarray (n,)
        Non-decreasing cumulative sums.
    targets : ndarray
        Positions in ``[0, cdf[-1])``.

    Returns
    -------
    ndarray of int64
    """
    idx = np.searchsorted(cdf, targets, side="right")
    last = int(np.searchsorted(cdf, cdf[-1], side="left")) if cdf.size else 0
    return np.minimum(idx, last).astype(np.int64)


def drawable(cdf: np.ndarray, total: float | None = None) -> np.ndarray:
    """Which items an inverse-CDF draw (:func:`inverse_cdf`) can reach.

    Item ``i`` is reachable when its interval ``[cdf[i-1], cdf[i])`` is at least
    :data:`DRAW_RESOLUTION` times the total wide. An item with ``q > 0`` can still have a
    zero-width interval (``q = 1e-300`` after a mass of ``0.5`` adds nothing to the sum), or one
    so narrow that no 53-bit uniform number times the total falls in it: such an item is never
    drawn, so a draw of distinct items must not wait for it.

    Parameters
    ----------
    cdf : ndarray (n,)
        Non-decreasing cumulative sums (of a proposal, or of a chunk's ``q`` from zero).
    total : float, optional
        The total the uniform numbers are scaled to (default ``None``: ``cdf[-1]``; for a
        chunk of a two-level draw, the whole proposal's).

    Returns
    -------
    ndarray of bool (n,)
    """
    cdf = np.asarray(cdf, dtype=float)
    if cdf.size == 0:
        return np.zeros(0, dtype=bool)
    total = float(cdf[-1]) if total is None else float(total)
    return np.diff(cdf, prepend=0.0) >= total * DRAW_RESOLUTION


def unreachable_message(n: int, reach: int) -> str:
    """The error message of a draw of ``n`` distinct items when only ``reach`` can be drawn.

    Parameters
    ----------
    n : int
        Distinct items requested.
    reach : int
        Items a draw can reach (:func:`drawable`).

    Returns
    -------
    str
    """
    return (
        f"n={n} distinct items requested but only {reach} items can be drawn: the others have "
        "q = 0 or a q below 2**-52 of the cumulative sum, which a draw never reaches"
    )
