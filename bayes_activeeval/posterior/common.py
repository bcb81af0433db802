"""Helpers shared by the measure posteriors: labeled-item checks, loss sums, prediction keys."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..measures import Measure
from ..proposals import CHUNK

__all__ = ["apply_g", "check_labeled", "key_names", "prediction_key", "unlabeled_loss_sums"]


def check_labeled(pool, indices: Any, labels: Any, encoded: bool) -> tuple[np.ndarray, np.ndarray]:
    """The labeled items as int64 pool indices (checked) and their labels as encoded int64
    class indices (``encoded=True``: given so; else encoded by the pool)."""
    M = pool.n_items
    idx = np.asarray(indices)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise ValueError(f"indices must be a 1-D array of item indices, got shape {idx.shape}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= M):
        raise ValueError(f"indices has entries outside 0..{M - 1}")
    y = np.asarray(labels, dtype=np.int64) if encoded else pool.encode_labels(labels)
    return idx, np.asarray(y, dtype=np.int64)


def unlabeled_loss_sums(
    m: Measure, views, p: np.ndarray, group: np.ndarray, n_groups: int, known, y_known, C: int
) -> tuple[np.ndarray, np.ndarray]:
    """``Σ p(x) ℓ(x, c)`` over each group's unlabeled items for every class ``c``, shape
    ``(n_groups, C, d)``, and ``Σ p(x) ℓ(x, y(x))`` over the labeled (``known``) items, shape
    ``(d,)``. Chunked over the pool; ``group`` may hold anything for labeled items."""
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
    :func:`key_names`)."""
    C = pool.n_classes
    key = np.zeros(pool.n_items, dtype=np.int64)
    for j, name in enumerate(models):
        key += pool.view(name).pred.astype(np.int64) * C**j
    return key


def key_names(pool, keys: np.ndarray, models: tuple[str, ...]) -> list[str]:
    C = pool.n_classes
    out = []
    for k in keys.tolist():
        parts = []
        for j in range(len(models)):
            parts.append(str(pool.classes[(k // C**j) % C]))
        out.append(parts[0] if len(models) == 1 else ",".join(parts))
    return out


def apply_g(m: Measure, R: np.ndarray) -> np.ndarray:
    flat = R.reshape(-1, R.shape[-1])
    with np.errstate(all="ignore"):
        G = np.stack([m.g(r) for r in flat])
    return G.reshape((*R.shape[:-1], m.n_outputs))
