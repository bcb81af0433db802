"""Exact first and second moments of DCG and ERR under independent graded relevance.

Every function works on a batch of ``m`` queries at once (arrays padded to the longest list) and
implements Sawade (2012), Thm. 6.1 and its proof in App. A.1 with the item labels independent
given the query (Eq. 6.3), ``p(y|x) = Π_z p(y_z|x, z)``:

- DCG (Eq. 6.1) is a sum of independent per-item terms, so mean and variance add up
  (Eq. A.2-A.3, and A.10-A.12 for the difference of two rankings): ``O(|Y| |r|)`` per query.
- ERR (Eq. 6.2) has the backward recursion for ``E[l²]`` (Eq. A.5-A.9; computed as a recursion,
  not as the ratio of suffix products of A.9, which underflows for long lists): ``O(|Y| |r|)``.
- The ERR cross moment ``E[l₁ l₂]`` of two rankings (Eq. A.13-A.21) sums over all pairs of
  positions; the product over the other items is evaluated in log space through a 2-D prefix sum,
  ``O(|r₁| |r₂|)`` per query.

Notation: ``order`` (m, L) holds the document index at each rank (``-1`` past the end of the
list), ``pos`` (m, D) the 1-based rank of each document (``0``: not in the list).
"""

from __future__ import annotations

import numpy as np

#: Queries per block in the O(|r₁||r₂|) ERR cross moment (bounds memory at about 100 MB).
CROSS_CHUNK = 256


def dcg_gain(grades: np.ndarray) -> np.ndarray:
    """``2^y − 1`` (Sawade (2012), Eq. 6.1)."""
    return np.exp2(grades) - 1.0


def err_kappa(grades: np.ndarray, max_grade: int) -> np.ndarray:
    """``κ_err(y) = (2^y − 1) / 2^{y_max}`` (Sawade (2012), Eq. 6.2; Chapelle et al. 2009)."""
    return (np.exp2(grades) - 1.0) / 2.0**max_grade


def discounts(pos: np.ndarray, k: int | None) -> np.ndarray:
    """``1/log2(i + 1)`` for each document at rank ``i`` (0 if absent or below the cut-off)."""
    pos = np.asarray(pos)
    keep = pos > 0
    if k is not None:
        keep &= pos <= k
    out = np.zeros(pos.shape)
    out[keep] = 1.0 / np.log2(pos[keep] + 1.0)
    return out


def item_moments(relevance: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``E[f(y_z)]`` per document: ``relevance`` (m, D, K) times ``values`` (K,) or (K, j)."""
    return relevance @ values


def gather(per_doc: np.ndarray, order: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """Per-document values (m, D) arranged by rank (m, L); ``fill`` past the end of a list."""
    safe = np.where(order >= 0, order, 0)
    out = np.take_along_axis(per_doc, safe, axis=1)
    return np.where(order >= 0, out, fill)


# ------------------------------------------------------------------------------------------------
# DCG
# ------------------------------------------------------------------------------------------------
def dcg_moments(relevance: np.ndarray, weights: list[np.ndarray]) -> tuple:
    """Mean vector and second-moment matrix of ``(l_1, …, l_r)``, ``l_j = Σ_z g(y_z) w_j(z)``.

    ``weights[j]`` (m, D) is ranking ``j``'s discount of every document (0 if absent), so one
    ranking gives DCG (Eq. A.2-A.3) and two give the pair whose difference is Eq. A.10-A.12.
    Returns ``mean`` (m, r) and ``second`` (m, r, r), ``second[:, i, j] = E[l_i l_j]``.
    """
    K = relevance.shape[-1]
    g = dcg_gain(np.arange(K, dtype=float))
    e1 = item_moments(relevance, g)
    var = item_moments(relevance, g * g) - e1 * e1
    W = np.stack(weights, axis=-1)  # (m, D, r)
    mean = np.einsum("md,mdr->mr", e1, W)
    cov = np.einsum("md,mdr,mds->mrs", np.maximum(var, 0.0), W, W)
    return mean, cov + mean[:, :, None] * mean[:, None, :]


# ------------------------------------------------------------------------------------------------
# ERR
# ------------------------------------------------------------------------------------------------
def _err_item_moments(relevance: np.ndarray, max_grade: int) -> dict[str, np.ndarray]:
    K = relevance.shape[-1]
    kap = err_kappa(np.arange(K, dtype=float), max_grade)
    one = 1.0 - kap
    V = np.stack([kap, kap * kap, kap * one, one, one * one], axis=1)  # (K, 5)
    M = item_moments(relevance, V)
    return {"a": M[..., 0], "a2": M[..., 1], "c": M[..., 2], "e1": M[..., 3], "e2": M[..., 4]}


def err_mean_second(relevance: np.ndarray, order: np.ndarray, max_grade: int) -> tuple:
    """``E[l]`` and ``E[l²]`` of ERR for one ranking per query (Sawade (2012), Eq. A.5-A.9).

    ``E[l] = Σ_i (a_i/i) Π_{k<i} (1 − a_k)`` and
    ``E[l²] = Σ_i [a2_i/i² + (2/i) c_i B_i] Π_{k<i} e_k`` with the backward recursion
    ``B_L = 0``, ``B_i = a_{i+1}/(i+1) + (1 − a_{i+1}) B_{i+1}``, where ``a = E κ``,
    ``a2 = E κ²``, ``c = E κ(1 − κ)``, ``e = E (1 − κ)²``.
    """
    mom = _err_item_moments(relevance, max_grade)
    a = gather(mom["a"], order)
    a2 = gather(mom["a2"], order)
    c = gather(mom["c"], order)
    e1 = gather(mom["e1"], order, fill=1.0)
    e2 = gather(mom["e2"], order, fill=1.0)
    m, L = order.shape
    inv = 1.0 / np.arange(1, L + 1, dtype=float)
    # exclusive prefix products in log space (κ < 1, so 1 − κ ≥ 2^-y_max > 0)
    log_e1 = np.concatenate([np.zeros((m, 1)), np.cumsum(np.log(e1), axis=1)[:, :-1]], axis=1)
    log_e2 = np.concatenate([np.zeros((m, 1)), np.cumsum(np.log(e2), axis=1)[:, :-1]], axis=1)
    mean = np.sum(a * inv * np.exp(log_e1), axis=1)
    B = np.zeros((m, L))
    for i in range(L - 2, -1, -1):
        B[:, i] = a[:, i + 1] * inv[i + 1] + e1[:, i + 1] * B[:, i + 1]
    second = np.sum((a2 * inv * inv + 2.0 * inv * c * B) * np.exp(log_e2), axis=1)
    return mean, second


def err_cross(
    relevance: np.ndarray,
    order1: np.ndarray,
    order2: np.ndarray,
    pos1: np.ndarray,
    pos2: np.ndarray,
    max_grade: int,
    chunk: int = CROSS_CHUNK,
) -> np.ndarray:
    """``E[l₁ l₂]`` of the ERR of two rankings of the same query (Sawade (2012), Eq. A.13-A.21).

    ``E[l₁ l₂] = Σ_{i∈r₁} Σ_{j∈r₂} 1/(i j) · F(z, z̄) · Π_{u ≠ z, z̄} E[(1 − κ_u)^{c_u}]``, with
    ``z = r₁(i)``, ``z̄ = r₂(j)``, ``c_u = [r₁⁻¹(u) < i] + [r₂⁻¹(u) < j]``, ``F = E κ_z²`` if
    ``z = z̄`` and ``E[κ_z (1−κ_z)^{[r₂⁻¹(z) < j]}] E[κ_z̄ (1−κ_z̄)^{[r₁⁻¹(z̄) < i]}]`` otherwise.
    The log of the product is ``S₁(i) + S₂(j) + M(i, j)`` minus the terms of ``z`` and ``z̄``,
    with ``S`` prefix sums of ``log E(1−κ)`` along each ranking and ``M`` the 2-D prefix sum of
    ``log E(1−κ)² − 2 log E(1−κ)`` over items in both rankings: ``O(|r₁||r₂|)`` per query.
    Returns (m,).
    """
    mom = _err_item_moments(relevance, max_grade)
    lg1 = np.log(mom["e1"])
    dd = np.log(mom["e2"]) - 2.0 * lg1
    m = order1.shape[0]
    out = np.empty(m)
    for s in range(0, m, chunk):
        sl = slice(s, min(s + chunk, m))
        out[sl] = _err_cross_block(
            mom, lg1[sl], dd[sl], order1[sl], order2[sl], pos1[sl], pos2[sl], sl
        )
    return out


def _err_cross_block(mom, lg1, dd, o1, o2, p1, p2, sl) -> np.ndarray:
    c, L1 = o1.shape
    L2 = o2.shape[1]
    if L1 == 0 or L2 == 0:
        return np.zeros(c)
    a, a2, cc = mom["a"][sl], mom["a2"][sl], mom["c"][sl]
    v1, v2 = o1 >= 0, o2 >= 0
    # prefix sums (exclusive) of log E(1-κ) along each ranking
    g1 = gather(lg1, o1)
    g2 = gather(lg1, o2)
    S1 = np.cumsum(g1, axis=1) - g1
    S2 = np.cumsum(g2, axis=1) - g2
    # 2-D exclusive prefix sum of dd over items ranked by both
    G = np.zeros((c, L1 + 1, L2 + 1))
    rows, docs = np.nonzero((p1 > 0) & (p2 > 0))
    np.add.at(G, (rows, p1[rows, docs], p2[rows, docs]), dd[rows, docs])
    M = np.cumsum(np.cumsum(G, axis=1), axis=2)[:, :L1, :L2]
    # the items at the pair of positions
    z = np.where(v1, o1, 0)
    zb = np.where(v2, o2, 0)
    i_idx = np.arange(1, L1 + 1)[None, :, None]
    j_idx = np.arange(1, L2 + 1)[None, None, :]
    pos2_z = np.take_along_axis(p2, z, axis=1)[:, :, None]  # r₂⁻¹(z), 0 if absent
    pos1_zb = np.take_along_axis(p1, zb, axis=1)[:, None, :]  # r₁⁻¹(z̄)
    Bz = (pos2_z > 0) & (pos2_z < j_idx)
    Azb = (pos1_zb > 0) & (pos1_zb < i_idx)
    lz = np.take_along_axis(lg1, z, axis=1)[:, :, None]
    lzb = np.take_along_axis(lg1, zb, axis=1)[:, None, :]
    log_rest = S1[:, :, None] + S2[:, None, :] + M - np.where(Bz, lz, 0.0) - np.where(Azb, lzb, 0.0)
    az = np.take_along_axis(a, z, axis=1)[:, :, None]
    cz = np.take_along_axis(cc, z, axis=1)[:, :, None]
    azb = np.take_along_axis(a, zb, axis=1)[:, None, :]
    czb = np.take_along_axis(cc, zb, axis=1)[:, None, :]
    a2z = np.take_along_axis(a2, z, axis=1)[:, :, None]
    same = z[:, :, None] == zb[:, None, :]
    F = np.where(same, a2z, np.where(Bz, cz, az) * np.where(Azb, czb, azb))
    valid = v1[:, :, None] & v2[:, None, :]
    terms = np.where(valid, F * np.exp(log_rest) / (i_idx * j_idx), 0.0)
    return terms.sum(axis=(1, 2))
