"""The within-leaf tilt of the Dirichlet-tree belief.

A leaf's predictive mass ``|U_k| π(y | k)`` (Marchant & Rubinstein (2021), Eq. 13) is shared among
its unlabeled items in proportion to the model's own probabilities, ``π_i(y) ∝ s_i(y) exp(c_{ky})``
(binary: ``σ(c_k + logit s_i)``): the minimum-KL redistribution relative to ``s`` that keeps every
leaf total. :func:`tilt_offsets_binary` solves the offsets by safeguarded Newton,
:func:`tilt_offsets` (multiclass) by iterative proportional fitting.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["LOGIT_CLIP", "WITHIN_LEAF", "leaf_ranges", "tilt_offsets", "tilt_offsets_binary"]

#: Within-leaf beliefs: ``"flat"`` (the paper's ``π(y | k_x)``) or ``"tilt"`` (the leaf's mass
#: redistributed among its unlabeled items in proportion to the model's probabilities).
WITHIN_LEAF = ("tilt", "flat")
LOGIT_CLIP = 35.0  # |logit s| beyond this is numerically 0 or 1 in float64


def leaf_ranges(strata: np.ndarray, values: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-leaf minimum and maximum of ``values`` (one stable sort, then ``reduceat``).

    Parameters
    ----------
    strata : ndarray of int (n,)
        Leaf of every item, in ``0..K-1``.
    values : ndarray (n,)
        One value per item.
    K : int
        Number of leaves.

    Returns
    -------
    lo, hi : ndarray (K,)
        Per-leaf minimum and maximum (``0`` for a leaf without items).
    """
    order = np.argsort(strata, kind="stable")
    counts = np.bincount(strata, minlength=K)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    v = values[order]
    nonempty = counts > 0
    lo = np.zeros(K)
    hi = np.zeros(K)
    if v.size:
        s = starts[nonempty]
        lo[nonempty] = np.minimum.reduceat(v, s)
        hi[nonempty] = np.maximum.reduceat(v, s)
    return lo, hi


def tilt_offsets_binary(
    logit: np.ndarray,
    strata: np.ndarray,
    unlabeled: np.ndarray | None,
    target: np.ndarray,
    lmin: np.ndarray,
    lmax: np.ndarray,
    start: np.ndarray | None = None,
    *,
    tol: float = 1e-11,
    max_iter: int = 200,
) -> np.ndarray:
    """Per-leaf logit offsets ``c_k`` with ``Σ_{i ∈ U_k} σ(c_k + logit_i) = |U_k| target_k``.

    The within-leaf exponential tilt of the Dirichlet-tree belief (module docstring): the
    minimum-KL redistribution, relative to the model's probabilities ``s_i = σ(logit_i)``, of the
    leaf's predictive mass ``|U_k| π(1 | k)`` (Marchant & Rubinstein (2021), Eq. 13) among its
    unlabeled items ``U_k``. Safeguarded Newton (bisection whenever a Newton step leaves the
    bracket), vectorised over all leaves; ``Σ σ(c + logit_i)`` is increasing in ``c``, and
    ``[logit t_k − max logit, logit t_k − min logit]`` brackets the root.

    Parameters
    ----------
    logit : ndarray (n,)
        ``logit s_i`` (clipped to ``±35``).
    strata : ndarray of int (n,)
        Leaf of every item.
    unlabeled : ndarray (n,) of 0/1 floats, or None
        Which items share the leaf's mass (None: all).
    target : ndarray (K,)
        ``π(1 | k)`` in ``(0, 1)``.
    lmin, lmax : ndarray (K,)
        Per-leaf bounds of ``logit`` (over any superset of ``U_k``).
    start : ndarray (K,), optional
        Warm start (clipped into the bracket).
    tol : float
        Stop when every leaf's total is within ``tol · |U_k| t_k (1 − t_k)`` of its target.
    max_iter : int
        Iteration cap.

    Returns
    -------
    ndarray (K,)
        ``c_k`` (leaves without unlabeled items keep their start value).
    """
    K = target.size
    w = None if unlabeled is None else unlabeled
    u = np.bincount(strata, weights=w, minlength=K).astype(float)
    t = np.clip(target, 1e-300, 1.0 - 1e-16)
    lt = np.log(t) - np.log1p(-t)
    lo = lt - lmax
    hi = lt - lmin
    c = np.zeros(K) if start is None else np.asarray(start, dtype=float).copy()
    c = np.clip(c, lo, hi)
    goal = u * t
    scale = tol * np.maximum(u * t * (1.0 - t), 1e-300)
    active = u > 0
    for _ in range(max_iter):
        sig = special.expit(c[strata] + logit)
        if w is not None:
            sig = sig * w
        F = np.bincount(strata, weights=sig, minlength=K) - goal
        todo = active & (np.abs(F) > scale) & (hi - lo > 1e-13 * (1.0 + np.abs(c)))
        if not todo.any():
            break
        # masked items have sig = 0, so sig (1 − sig) is the masked derivative too
        dF = np.bincount(strata, weights=sig * (1.0 - sig), minlength=K)
        hi = np.where(todo & (F > 0), c, hi)
        lo = np.where(todo & (F < 0), c, lo)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = c - F / dF
        ok = np.isfinite(newton) & (newton > lo) & (newton < hi)
        c = np.where(todo, np.where(ok, newton, 0.5 * (lo + hi)), c)
    return c


def tilt_offsets(
    log_s: np.ndarray,
    strata: np.ndarray,
    unlabeled: np.ndarray | None,
    target: np.ndarray,
    start: np.ndarray | None = None,
    *,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> np.ndarray:
    """Per-leaf, per-class log offsets ``c_{ky}`` with ``π_i(y) ∝ s_i(y) exp(c_{ky})`` and
    ``Σ_{i ∈ U_k} π_i(y) = |U_k| target_{ky}`` (multiclass within-leaf tilt).

    Iterative proportional fitting (raking): each sweep multiplies ``exp(c_{ky})`` by the ratio
    of the target to the current leaf total; the fixed point is the minimum-KL redistribution of
    the leaf's predictive mass ``|U_k| π(y | k)`` (Marchant & Rubinstein (2021), Eq. 13) relative
    to the model's probabilities.

    Parameters
    ----------
    log_s : ndarray (n, C)
        ``log s_i(y)`` (floored).
    strata, unlabeled
        As :func:`tilt_offsets_binary`.
    target : ndarray (K, C)
        ``π(y | k)``, rows summing to 1.
    start : ndarray (K, C), optional
        Warm start.
    tol : float
        Stop when every leaf total is within a relative ``tol`` of its target.
    max_iter : int
        Sweep cap.

    Returns
    -------
    ndarray (K, C)
    """
    K, C = target.shape
    flat = (strata[:, None] * C + np.arange(C)[None, :]).ravel()
    w = None if unlabeled is None else unlabeled
    u = np.bincount(strata, weights=w, minlength=K).astype(float)
    goal = u[:, None] * target
    c = np.zeros((K, C)) if start is None else np.asarray(start, dtype=float).copy()
    active = u > 0
    for _ in range(max_iter):
        z = log_s + c[strata]
        z -= z.max(axis=1, keepdims=True)
        P = np.exp(z)
        P /= P.sum(axis=1, keepdims=True)
        if w is not None:
            P *= w[:, None]
        S = np.bincount(flat, weights=P.ravel(), minlength=K * C).reshape(K, C)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.log(goal) - np.log(S)
        step[~active] = 0.0
        if np.max(np.abs(step), initial=0.0) <= tol:
            break
        c += step
        c -= c[:, :1]  # offsets are defined up to a constant per leaf
    return c
