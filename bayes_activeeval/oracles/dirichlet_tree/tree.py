"""The tree of the Dirichlet-tree oracle: leaves are score strata, nodes contiguous ranges of them.

:func:`build_tree` builds the balanced tree of Marchant & Rubinstein (2021), Sec. 5.2 (the
complete binary tree of depth 8 over 256 strata, or the flat partition at depth 1); :class:`Tree`
holds its path matrix ``δ_c(k)`` (Eq. 16) and sibling groups; :class:`TreeOps` and the log-sum-exp
helpers are what the EM inner loop needs of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

__all__ = ["Tree", "TreeOps", "build_tree", "log_normalize_siblings", "lse", "lse_rows"]


@dataclass(frozen=True)
class Tree:
    """A rooted tree over ``K`` ordered leaves (the strata).

    Nodes are numbered in breadth-first order (root ``0``), so siblings are contiguous.

    Parameters
    ----------
    parent : ndarray of int (n_nodes,)
        Parent of each node, ``-1`` for the root.
    level : ndarray of int (n_nodes,)
        Depth of each node.
    leaf : ndarray of int (n_nodes,)
        Stratum of each leaf node, ``-1`` for an internal node.
    path : scipy.sparse.csr_matrix (n_nodes - 1, K)
        ``1`` where a non-root node covers a leaf.
    siblings : scipy.sparse.csr_matrix (n_nodes - 1, n_nodes - 1)
        ``1`` where two non-root nodes share a parent.

    Attributes
    ----------
    parent : ndarray (n_nodes,)
        Parent of each node (``-1`` for the root).
    level : ndarray (n_nodes,)
        Depth of each node (root ``0``).
    leaf : ndarray (n_nodes,)
        Stratum held by each leaf node, ``-1`` for internal nodes.
    path : scipy.sparse.csr_matrix (n_nodes - 1, K)
        ``δ_c(k)`` of Marchant & Rubinstein (2021), Eq. 16, for every non-root node ``c``.
    siblings : scipy.sparse.csr_matrix (n_nodes - 1, n_nodes - 1)
        ``1`` where two non-root nodes share a parent (sums over sibling groups).
    """

    parent: np.ndarray
    level: np.ndarray
    leaf: np.ndarray
    path: sparse.csr_matrix
    siblings: sparse.csr_matrix

    @property
    def n_nodes(self) -> int:
        return int(self.parent.size)

    @property
    def n_leaves(self) -> int:
        return int(self.path.shape[1])

    @property
    def leaves_under(self) -> np.ndarray:
        """Number of leaves under every non-root node, ``Σ_k δ_c(k)``."""
        return np.asarray(self.path.sum(axis=1)).ravel()

    @property
    def n_children(self) -> np.ndarray:
        """Number of children of every node."""
        return np.bincount(self.parent[1:], minlength=self.n_nodes)


def build_tree(n_leaves: int, depth: int = 8) -> Tree:
    """A balanced tree of (at most) the given depth over ``n_leaves`` ordered leaves.

    Each node's leaves (a contiguous range of strata) are split into ``m = ⌈n^{1/r}⌉`` near-equal
    contiguous parts, ``r`` being the levels left, so ``n_leaves = 256, depth = 8`` gives the
    complete binary tree of Marchant & Rubinstein (2021), Sec. 5.2 ("Ours-8") and ``depth = 1`` the
    flat partition ("Ours-1"). Nodes with one child never arise (they are "linked past", as in the
    reference code).

    Parameters
    ----------
    n_leaves : int
        Number of leaves ``K >= 1``.
    depth : int
        Maximum depth ``>= 1``.
    """
    if isinstance(n_leaves, bool) or not isinstance(n_leaves, (int, np.integer)) or n_leaves < 1:
        raise ValueError(f"n_leaves must be a positive integer, got {n_leaves!r}")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    parent, level, lo, hi = [-1], [0], [0], [int(n_leaves)]
    i = 0
    while i < len(parent):  # breadth-first over at most 2K - 1 nodes (not over pool items)
        a, b = lo[i], hi[i]
        size = b - a
        if size > 1:
            rem = max(int(depth) - level[i], 1)
            m = size if rem == 1 else min(size, max(2, int(np.ceil(size ** (1.0 / rem) - 1e-9))))
            cuts = np.rint(np.linspace(a, b, m + 1)).astype(int)
            for j in range(m):
                parent.append(i)
                level.append(level[i] + 1)
                lo.append(int(cuts[j]))
                hi.append(int(cuts[j + 1]))
        i += 1
    parent_a = np.asarray(parent, dtype=np.int64)
    lo_a, hi_a = np.asarray(lo), np.asarray(hi)
    n_nodes = parent_a.size
    # path[c - 1, k] = 1 if node c (non-root) covers leaf k: leaves of c are lo[c]..hi[c]-1
    rows = np.repeat(np.arange(1, n_nodes) - 1, hi_a[1:] - lo_a[1:])
    cols = np.concatenate([np.arange(lo_a[c], hi_a[c]) for c in range(1, n_nodes)] or [[]])
    path = sparse.csr_matrix(
        (np.ones(rows.size), (rows, cols.astype(np.int64))), shape=(n_nodes - 1, n_leaves)
    )
    # siblings (contiguous in BFS order): every pair within a parent's group of children
    par = parent_a[1:]
    n_nr = par.size
    first = np.searchsorted(par, par, side="left")  # par is non-decreasing in BFS order
    size = np.searchsorted(par, par, side="right") - first
    srows = np.repeat(np.arange(n_nr), size)
    scols = np.repeat(first, size) + (
        np.arange(srows.size) - np.repeat(np.cumsum(size) - size, size)
    )
    siblings = sparse.csr_matrix((np.ones(srows.size), (srows, scols)), shape=(n_nr, n_nr))
    leaf = np.where(hi_a - lo_a == 1, lo_a, -1)
    return Tree(parent_a, np.asarray(level, dtype=np.int64), leaf, path, siblings)


def lse(x: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """``log Σ exp x`` for small finite arrays (faster than scipy's for the EM inner loop).

    Parameters
    ----------
    x : ndarray
        Finite values.
    axis : int, optional
        The axis to sum over (default ``None``: all entries).
    keepdims : bool, optional
        Keep the summed axis with length one (default ``False``).

    Returns
    -------
    ndarray
        A 0-d array when ``axis`` is ``None`` and ``keepdims`` is ``False``.
    """
    m = np.max(x, axis=axis, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


class TreeOps:
    """What the EM inner loop needs of the tree: the CSR path matrix (``log ψ = δᵀ log b``) and,
    since every node covers a contiguous range ``[lo, hi)`` of leaves, node counts as differences
    of cumulative sums (no sparse product in the M-step).

    Parameters
    ----------
    tree : Tree
        The tree whose path matrix and sibling groups are precomputed.
    """

    def __init__(self, tree: Tree) -> None:
        P = tree.path.tocsr()
        P.sort_indices()
        self.path = P  # (n_nr, K)
        self.path_t = P.T.tocsr()  # (K, n_nr)
        K = P.shape[1]
        n_nr = P.shape[0]
        par = tree.parent[1:]
        if n_nr:
            self.lo = P.indices[P.indptr[:-1]]
            self.hi = P.indices[P.indptr[1:] - 1] + 1
            self.plo = np.where(par == 0, 0, self.lo[np.maximum(par - 1, 0)])
            self.phi = np.where(par == 0, K, self.hi[np.maximum(par - 1, 0)])
            starts = np.flatnonzero(np.r_[True, par[1:] != par[:-1]])
            self.starts = starts
            self.lengths = np.diff(np.r_[starts, par.size])
        else:
            self.lo = self.hi = self.plo = self.phi = np.zeros(0, dtype=np.int64)
            self.starts = self.lengths = np.zeros(0, dtype=np.int64)

    def cumulative(self, N: np.ndarray) -> np.ndarray:
        return np.concatenate([np.zeros((1, N.shape[1])), np.cumsum(N, axis=0)])

    def sibling_sum(self, w: np.ndarray) -> np.ndarray:
        """``Σ_{c' sibling of c} w_{c'}`` for every non-root node (siblings are contiguous)."""
        if w.shape[0] == 0:
            return w
        return np.repeat(np.add.reduceat(w, self.starts, axis=0), self.lengths, axis=0)


def lse_rows(x: np.ndarray) -> np.ndarray:
    """``log Σ_y exp x[k, y]`` per row, shape (K, 1); one ufunc call for two classes.

    Parameters
    ----------
    x : ndarray (K, C)
        Finite values.

    Returns
    -------
    ndarray (K, 1)
    """
    if x.shape[1] == 2:
        return np.logaddexp(x[:, :1], x[:, 1:])
    return lse(x, axis=1, keepdims=True)


def log_normalize_siblings(ops: TreeOps, log_b: np.ndarray) -> np.ndarray:
    """Log branch weights normalized within every sibling group: ``log b − log Σ_siblings b``.

    Each column (class) of every group of siblings then holds log probabilities summing to one
    (the branch probabilities of a node, per class). One shift by the largest entry guards
    against overflow; a group so far below it that its sum underflows (about 745 nats) is
    normalized with its own largest entry instead (a log-sum-exp per group), so it never becomes
    ``log 0``. (Shifting every group by its own maximum always would change the last bits of
    every fitted tree, and with them the draws of runs already recorded.)

    Parameters
    ----------
    ops : TreeOps
        The tree's operations (its sibling groups).
    log_b : ndarray (n_nodes - 1, C)
        Unnormalized log weights per non-root node and class.

    Returns
    -------
    ndarray (n_nodes - 1, C)
    """
    if log_b.shape[0] == 0:
        return log_b
    mx = log_b.max()
    s = ops.sibling_sum(np.exp(log_b - mx))
    low = ~(s > 0)
    if low.any():  # groups that underflowed: their own shift
        gmx = np.maximum.reduceat(log_b, ops.starts, axis=0)
        gmx = np.repeat(np.where(np.isfinite(gmx), gmx, 0.0), ops.lengths, axis=0)
        gs = ops.sibling_sum(np.exp(log_b - gmx))
        with np.errstate(divide="ignore"):
            return np.where(low, log_b - gmx - np.log(gs), log_b - mx - np.log(s))
    return log_b - mx - np.log(s)
