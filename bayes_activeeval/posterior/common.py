"""Helpers shared by the measure posteriors: labeled-item checks, loss sums, prediction keys."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_encoded_labels, distinct_labels
from ..measures import Measure
from ..proposals import CHUNK

__all__ = [
    "apply_g",
    "check_labeled",
    "distinct_labels",
    "key_names",
    "prediction_key",
    "unlabeled_loss_sums",
]


def check_labeled(pool, indices: Any, labels: Any, encoded: bool) -> tuple[np.ndarray, np.ndarray]:
    """The labeled items as int64 pool indices (checked) and their labels as encoded int64
    class indices (``encoded=True``: given so; else encoded by the pool).

    Parameters
    ----------
    pool : Pool
        The pool the items belong to.
    indices : array-like of int (n,)
        The labeled items (repeats allowed), each in ``0..n_items-1``.
    labels : array-like (n,)
        Their labels: pool class values, or class indices with ``encoded=True``.
    encoded : bool
        ``True``: ``labels`` are already class indices (checked to be whole numbers in
        ``0..C-1``); ``False``: they are encoded (and checked) by
        :meth:`~bayes_activeeval.Pool.encode_labels`.

    Returns
    -------
    idx, y : ndarray of int64
        The item indices and the encoded labels (their lengths are not compared here).
    """
    M = pool.n_items
    idx = np.asarray(indices)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise ValueError(f"indices must be a 1-D array of item indices, got shape {idx.shape}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= M):
        raise ValueError(f"indices has entries outside 0..{M - 1}")
    if not encoded:
        return idx, np.asarray(pool.encode_labels(labels), dtype=np.int64)
    if not pool.n_classes:  # regression: no classes to check against
        return idx, np.asarray(labels, dtype=np.int64)
    y = check_encoded_labels(labels, pool.n_classes)
    return idx, y


def unlabeled_loss_sums(
    m: Measure, views, p: np.ndarray, group: np.ndarray, n_groups: int, known, y_known, C: int
) -> tuple[np.ndarray, np.ndarray]:
    """``Σ p(x) ℓ(x, c)`` over each group's unlabeled items for every class ``c``, shape
    ``(n_groups, C, d)``, and ``Σ p(x) ℓ(x, y(x))`` over the labeled (``known``) items, shape
    ``(d,)``. Chunked over the pool; ``group`` may hold anything for labeled items.

    Parameters
    ----------
    m : Measure
        The measure, resolved for the pool.
    views : callable
        ``views(idx)``: what the measure's loss reads on the items ``idx``
        (:meth:`~bayes_activeeval.Pool.resolve`).
    p : ndarray (n_items,)
        The test distribution ``p(x)``.
    group : ndarray of int (n_items,)
        The group of every unlabeled item, in ``0..n_groups-1`` (negative values, e.g. ``-1``
        for labeled items, are read as ``0``; labeled items add nothing to ``Lsum``).
    n_groups : int
        The number of groups.
    known : ndarray of bool (n_items,)
        The labeled items.
    y_known : ndarray of int (n_items,)
        The encoded label of every labeled item (ignored elsewhere).
    C : int
        The number of classes.

    Returns
    -------
    Lsum : ndarray (n_groups, C, d)
    R_known : ndarray (d,)
    """
    M, d = p.size, m.dim
    pu_all = p * ~known
    group = np.maximum(group, 0)
    Lsum = np.zeros((n_groups, C, d))
    R_known = np.zeros(d)
    for start in range(0, M, CHUNK):
        sl = slice(start, min(start + CHUNK, M))
        v = views(sl)
        g, pu = group[sl], pu_all[sl]
        for c in range(C):
            L = m.loss(np.full(sl.stop - sl.start, c, dtype=np.int32), v)
            for j in range(d):
                Lsum[:, c, j] += np.bincount(g, weights=pu * L[:, j], minlength=n_groups)
            kn = known[sl] & (y_known[sl] == c)
            if kn.any():
                R_known += p[sl][kn] @ L[kn]
    return Lsum, R_known


def prediction_key(pool, models: tuple[str, ...]) -> np.ndarray:
    """Every item's joint predicted class under ``models``, ``Σ_j pred_j C^j`` (decoded by
    :func:`key_names`).

    Parameters
    ----------
    pool : Pool
        A classification pool.
    models : tuple of str
        The models, in the order of the key's digits (model ``j`` is digit ``j`` in base ``C``).

    Returns
    -------
    ndarray of int64 (n_items,)
    """
    C = pool.n_classes
    key = np.zeros(pool.n_items, dtype=np.int64)
    for j, name in enumerate(models):
        key += pool.view(name).pred.astype(np.int64) * C**j
    return key


def key_names(pool, keys: np.ndarray, models: tuple[str, ...]) -> list[str]:
    """Readable names of prediction keys (:func:`prediction_key`): each model's predicted class.

    Parameters
    ----------
    pool : Pool
        The pool whose classes name the predictions.
    keys : ndarray of int
        Prediction keys ``Σ_j pred_j C^j``.
    models : tuple of str
        The models the keys were built from, in the same order.

    Returns
    -------
    list of str
        One name per key: the predicted class value, or for several models the values joined
        by ``","`` in the order of ``models``.
    """
    C = pool.n_classes
    out = []
    for k in keys.tolist():
        parts = []
        for j in range(len(models)):
            parts.append(str(pool.classes[(k // C**j) % C]))
        out.append(parts[0] if len(models) == 1 else ",".join(parts))
    return out


def apply_g(m: Measure, R: np.ndarray) -> np.ndarray:
    """``G = g(R)`` for every risk vector of a stack of them (e.g. posterior draws).

    Floating-point warnings are silenced: where ``g`` is undefined the value is whatever ``g``
    returns there (e.g. ``nan`` for a ratio with a zero denominator). Values are clipped to the
    measure's range (``Measure.bounds``): risks summed over cells can leave it by rounding
    (accuracy draws of ``1 + 1e-14``).

    Parameters
    ----------
    m : Measure
        The measure whose ``g`` is applied.
    R : ndarray (..., d)
        Risks, the last axis over the ``d`` loss components.

    Returns
    -------
    ndarray (..., n_outputs)
    """
    flat = R.reshape(-1, R.shape[-1])
    with np.errstate(all="ignore"):
        G = np.stack([m.g(r) for r in flat])
    lo, hi = m.bounds
    G = np.clip(G, lo, hi)  # NaN stays NaN
    return G.reshape((*R.shape[:-1], m.n_outputs))
