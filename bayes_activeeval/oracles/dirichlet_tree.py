"""The Dirichlet-tree oracle model of Marchant & Rubinstein (2021), Sec. 4 and App. F-I.

The pool is cut into score strata (cumulative-sqrt(F) rule, 256 strata by default) that become the
leaves of a tree (a complete binary tree of depth 8 by default), ordered by score so that
neighbouring strata share a parent. The generative model (Sec. 4.1) is::

    θ ~ Dirichlet(α)                       global label distribution
    y_i | θ ~ Categorical(θ)               every pool item i
    ψ_y ~ DirichletTree(β_y; T)            a distribution over leaves for every class y
    k_i | y_i ~ Categorical(ψ_{y_i})       the stratum of item i

so that ``π(y | k) ∝ θ_y ψ_{yk}`` (Eq. 13). A Dirichlet-tree puts independent Dirichlet
distributions on the branch probabilities ``b_{yc}`` of every internal node; ``ψ_{yk}`` is the
product of the ``b`` along the path to leaf ``k`` (Eq. 10).

Priors (Sec. 5.2 with the reference code's +1 per leaf): with ``s(y|k)`` the
mean model probability of class ``y`` over stratum ``k`` and ``κ = prior_strength / K``,

- leaf pseudo-counts ``c_{yk} = κ s(y|k) + 1``;
- ``α_y = 1 + Σ_k (c_{yk} − 1)``;
- ``β_{yc} = λ level(c)² + Σ_{k under c} c_{yk}`` for every non-root node ``c`` (``λ`` the tree
  smoothing, 1 in the paper).

Deterministic oracle (App. F): EM toward the MAP of ``(θ, ψ)`` given the observed labels and the
strata of *all* pool items. E-step (Eq. 12): an unlabeled item of stratum ``k`` has expected label
``π(y|k)``; M-step: ``θ_y ∝ α̃_y − 1`` and ``b_{yc} ∝ β̃_{yc} − #leaves(c)`` (Eq. 11), which with the
+1 per leaf is ``λ level(c)² + κ Σ_{k under c} s(y|k) + counts`` — always positive. Labeled items
get a point mass in the belief. Inference conditions on the labels actually observed, and the
selection of items depends only on the strata and on labels already observed, so it is ignorable
(Sec. 4.2): the importance weights are not needed.

Stochastic oracle (App. H, Eq. 14-15): each draw carries a fresh label, the pool items are not the
units; the posterior predictive ``p(y | k, L) ∝ α̃_y Π_c (β̃_{yc} / Σ_{c'} β̃_{yc'})^{δ_c(k)}`` uses
importance-weighted counts ``α̃_y = α_y + Σ w 1[y' = y]``, ``β̃_{yc} = β_{yc} + Σ w 1[y' = y] δ_c(k')``,
so that ``α̃/N`` and ``β̃/N`` converge to the pool quantities ``E_p[1{Y = y}]`` and
``E_p[1{Y = y} δ_c(k_X)]`` although the draws come from ``q``.

Within-leaf belief (``within_leaf``). The model above is about leaves: every item of leaf ``k``
has the same predictive ``π(y | k)`` (``within_leaf="flat"``, the paper's Eq. 13), which throws
away the evaluated model's ordering of the items *inside* a leaf. ``within_leaf="tilt"`` (the
default) keeps the leaf-level model, its priors, its EM/MAP and stochastic updates and its full
posterior unchanged, and only redistributes each leaf's predictive mass among the leaf's unlabeled
items in proportion to the model's own probabilities ``s_i``: an exponential tilt

    π_i(y) ∝ s_i(y) exp(c_{ky}),   with   Σ_{i ∈ U_k} π_i(y) = |U_k| π(y | k)

(binary: ``π_i(1) = σ(c_k + logit s_i)``, ``c_k`` by safeguarded Newton over all leaves at
once; multiclass: per-class offsets by iterative proportional fitting). ``U_k`` is the leaf's
unlabeled items (all its items for a stochastic oracle). Leaf totals, hence the E-step of the EM
(Eq. 12, which only uses ``u_k π(y | k)``), the MAP and the posterior are exactly those of the flat
model; the tilt is the minimum-KL redistribution of each leaf's mass relative to ``s``. Whatever
the belief, the importance weights ``p/q`` keep the estimator consistent (Marchant & Rubinstein
(2021), Thm. 1), so the tilt can only change the variance.

Every per-stage operation is on stratum-level arrays (``K × C``) plus a few gathers and
``bincount`` reductions over the pool; no Python loop runs over pool items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse, special

from .._validation import check_rng
from ..beliefs import CategoricalBelief
from ..strata import score_strata
from ._common import (
    LabelCache,
    check_update,
    common_state,
    log_odds,
    prior_probs,
    restore_common_state,
    stratification_scores,
)
from .base import OracleModel, register_oracle

__all__ = ["DirichletTreeOracle", "Tree", "build_tree", "tilt_offsets", "tilt_offsets_binary"]


@dataclass(frozen=True)
class Tree:
    """A rooted tree over ``K`` ordered leaves (the strata).

    Nodes are numbered in breadth-first order (root ``0``), so siblings are contiguous.

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


def _lse(x: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """``log Σ exp x`` for small finite arrays (faster than scipy's for the EM inner loop)."""
    m = np.max(x, axis=axis, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


#: Within-leaf beliefs: ``"flat"`` (the paper's ``π(y | k_x)``) or ``"tilt"`` (the leaf's mass
#: redistributed among its unlabeled items in proportion to the model's probabilities).
WITHIN_LEAF = ("tilt", "flat")
_LOGIT_CLIP = 35.0  # |logit s| beyond this is numerically 0 or 1 in float64


def _leaf_ranges(strata: np.ndarray, values: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-leaf minimum and maximum of ``values`` (one stable sort, then ``reduceat``)."""
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


class _Ops:
    """What the EM inner loop needs of the tree: the CSR path matrix (``log ψ = δᵀ log b``) and,
    since every node covers a contiguous range ``[lo, hi)`` of leaves, node counts as differences
    of cumulative sums (no sparse product in the M-step)."""

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


def _lse_rows(x: np.ndarray) -> np.ndarray:
    """``log Σ_y exp x[k, y]`` per row, shape (K, 1); one ufunc call for two classes."""
    if x.shape[1] == 2:
        return np.logaddexp(x[:, :1], x[:, 1:])
    return _lse(x, axis=1, keepdims=True)


def _log_normalize_siblings(ops: _Ops, log_b: np.ndarray) -> np.ndarray:
    if log_b.shape[0] == 0:
        return log_b
    mx = log_b.max()
    s = ops.sibling_sum(np.exp(log_b - mx))
    return log_b - mx - np.log(s)


class DirichletTreeOracle(OracleModel):
    """Dirichlet-tree model of the oracle (Marchant & Rubinstein (2021), Sec. 4, App. F, H).

    Parameters
    ----------
    n_strata : int
        Score strata (leaves), cut by the cumulative-sqrt(F) rule (Sec. 5.2: ``K = 2^8``).
    depth : int
        Tree depth (8: complete binary tree over 256 strata; 1: flat partition).
    deterministic : bool
        ``True``: one fixed label per item, EM/MAP updates and point masses (Sec. 4, App. F).
        ``False``: stochastic oracle, importance-weighted posterior predictive (App. H).
    prior_strength : float, optional
        Total prior weight of the model's probabilities, ``κ = prior_strength / K`` per stratum
        (default ``K``, as in the paper's experiments).
    tree_smoothing : float
        ``λ`` in ``β_{yc} = λ level(c)² + …``. Default ``0.01``; the paper's value is 1
        (Sec. 5.2). The ``λ level(c)²`` pseudo-counts are the same for every class, so for a rare
        class (a few dozen expected positives in the pool) ``λ = 1`` outweighs the model's own
        expected counts ``κ Σ s(y|k)`` and spreads the class evenly over the leaves a priori;
        ``benchmarks/results/adaptive_f1.md`` shows the effect. The paper's model is
        ``within_leaf="flat", tree_smoothing=1``.
    model : str, optional
        Which model of the pool supplies scores and prior probabilities.
    method : {"csf", "quantile"}
        Stratification rule (:func:`~bayes_activeeval.strata.score_strata`).
    em_tol : float
        EM stops when no log-parameter moves more than this (default ``1e-8``; the belief is then
        within a relative ``~1e-5`` of the exact fixed point).
    em_max_iter : int
        Cap on EM iterations per update (default 10000; SQUAREM-accelerated iterations count).
    accelerate : bool
        Use SQUAREM extrapolation (Varadhan & Roland 2008) with a monotonicity safeguard. EM on a
        pool with few labels converges slowly (most of the information is missing); SQUAREM
        reaches the same fixed point in far fewer iterations.
    within_leaf : {"tilt", "flat"}
        How a leaf's predictive ``π(y | k)`` becomes item beliefs. ``"flat"``: every item of the
        leaf gets ``π(y | k)`` (Eq. 13, the paper). ``"tilt"`` (default): the leaf's mass over
        its unlabeled items, ``|U_k| π(y | k)``, is shared in proportion to the model's own
        probabilities, ``π_i(y) ∝ s_i(y) exp(c_{ky})`` (binary: ``σ(c_k + logit s_i)``), so the
        model's ordering inside a leaf is kept while the leaf-level model learns each leaf's
        level. Leaf totals, the EM/MAP, the stochastic updates and :meth:`posterior` are the
        same for both (the tilt concerns the predictive belief only).

    Attributes
    ----------
    strata : ndarray (n,)
        Stratum (leaf) of each pool item after :meth:`initialize`.
    stratum_probs : ndarray (K, C)
        Current ``π(y | k)`` per stratum.
    within_offsets : ndarray (K,) or (K, C)
        The tilt's per-leaf offsets ``c_k`` (binary) or ``c_{ky}`` (``within_leaf="tilt"``).
    """

    name = "dirichlet-tree"

    def __init__(
        self,
        n_strata: int = 256,
        depth: int = 8,
        *,
        deterministic: bool = True,
        prior_strength: float | None = None,
        tree_smoothing: float = 0.01,
        model: str | None = None,
        method: str = "csf",
        em_tol: float = 1e-8,
        em_max_iter: int = 10_000,
        accelerate: bool = True,
        within_leaf: str = "tilt",
    ) -> None:
        if (
            isinstance(n_strata, bool)
            or not isinstance(n_strata, (int, np.integer))
            or n_strata < 1
        ):
            raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise ValueError(f"depth must be a positive integer, got {depth!r}")
        if prior_strength is not None and not (np.isfinite(prior_strength) and prior_strength > 0):
            raise ValueError(f"prior_strength must be positive, got {prior_strength!r}")
        if not (np.isfinite(tree_smoothing) and tree_smoothing > 0):
            raise ValueError(f"tree_smoothing must be positive, got {tree_smoothing!r}")
        if method not in ("csf", "quantile"):
            raise ValueError(f"method must be 'csf' or 'quantile', got {method!r}")
        if within_leaf not in WITHIN_LEAF:
            raise ValueError(f"within_leaf must be 'tilt' or 'flat', got {within_leaf!r}")
        if not (np.isfinite(em_tol) and em_tol > 0):
            raise ValueError(f"em_tol must be positive, got {em_tol!r}")
        if (
            isinstance(em_max_iter, bool)
            or not isinstance(em_max_iter, (int, np.integer))
            or em_max_iter < 1
        ):
            raise ValueError(f"em_max_iter must be a positive integer, got {em_max_iter!r}")
        self.n_strata = int(n_strata)
        self.depth = int(depth)
        self.deterministic = bool(deterministic)
        self.prior_strength = None if prior_strength is None else float(prior_strength)
        self.tree_smoothing = float(tree_smoothing)
        self.model = model
        self.method = method
        self.em_tol = float(em_tol)
        self.em_max_iter = int(em_max_iter)
        self.accelerate = bool(accelerate)
        self.within_leaf = within_leaf

    # -- set-up ---------------------------------------------------------------------------------
    def initialize(self, pool, model: str | None = None) -> None:
        """Stratify the pool, build the tree and set the priors (Marchant & Rubinstein (2021), Sec. 5.2 and App. I)."""
        model = self.model if model is None else model
        self.model = pool.check_model(model)
        scores = stratification_scores(pool, self.model)
        s = prior_probs(pool, self.model)
        strata, edges = score_strata(scores, self.n_strata, method=self.method)
        self._init_arrays(strata, s, classes=pool.classes)
        self.edges = edges

    def _init_arrays(self, strata: np.ndarray, s: np.ndarray, classes=None) -> None:
        strata = np.asarray(strata, dtype=np.int64)
        K = int(strata.max()) + 1
        n, C = s.shape
        self.strata = strata
        self.n_items, self.n_classes, self.K = n, C, K
        self.classes = np.arange(C) if classes is None else np.asarray(classes)
        self.tree = build_tree(K, self.depth)
        self._ops = _Ops(self.tree)
        self.sizes = np.bincount(strata, minlength=K).astype(float)
        # s(y|k): mean model probability per stratum
        flat = strata[:, None] * C + np.arange(C)[None, :]
        sk = np.bincount(flat.ravel(), weights=s.ravel(), minlength=K * C).reshape(K, C)
        sk = sk / np.maximum(self.sizes, 1.0)[:, None]
        # keep every class possible a priori (a model that never predicts a class would otherwise
        # give θ_y = 0 and rule the class out before any label)
        sk = np.maximum(sk, 1e-9)
        self.stratum_prior_probs = sk / sk.sum(axis=1, keepdims=True)
        strength = float(K) if self.prior_strength is None else self.prior_strength
        kappa = strength / K
        leaf_extra = kappa * self.stratum_prior_probs  # c_{yk} - 1
        self.alpha = 1.0 + leaf_extra.sum(axis=0)  # α_y
        lv = self.tree.level[1:].astype(float)
        # a_{yc} = β_{yc} - #leaves(c) = λ level(c)^2 + κ Σ_{k under c} s(y|k)   (MAP weight)
        self.a_map = self.tree_smoothing * lv[:, None] ** 2 + self.tree.path @ leaf_extra
        self.beta = self.a_map + self.tree.leaves_under[:, None]  # β_{yc}
        self._a_sib = self._ops.sibling_sum(self.a_map)
        self.obs = np.zeros((K, C))  # labeled counts (deterministic) / weighted counts (stochastic)
        self.cache = LabelCache(n)
        if self.within_leaf == "tilt":
            if C == 2:
                self._item_logit = np.clip(log_odds(s, 1), -_LOGIT_CLIP, _LOGIT_CLIP)
                self._logit_min, self._logit_max = _leaf_ranges(strata, self._item_logit, K)
                self.within_offsets = np.zeros(K)
            else:
                self._item_log_s = np.maximum(np.log(np.maximum(s, 1e-300)), -2 * _LOGIT_CLIP)
                self.within_offsets = np.zeros((K, C))
            # 1 for items sharing their leaf's mass (unlabeled; every item if stochastic)
            self._unlabeled_mask = np.ones(n) if self.deterministic else None
        self.n_updates = 0
        self.n_draws = 0
        self.em_iterations = 0
        self._ready = True
        if self.deterministic:
            self.log_theta, self.log_branch = self._prior_mode()
            self._run_em()
        else:
            self._stochastic_refresh()

    # -- deterministic oracle: EM toward the MAP (App. F) ---------------------------------------
    def _prior_mode(self) -> tuple[np.ndarray, np.ndarray]:
        log_theta = np.log(self.alpha - 1.0 + 1e-300)
        log_theta -= _lse(log_theta)
        log_b = _log_normalize_siblings(self._ops, np.log(self.a_map + 1e-300))
        return log_theta, log_b

    def _log_joint(self, log_theta, log_b) -> np.ndarray:
        """``log θ_y ψ_{yk}``, shape (K, C) (Eq. 10)."""
        if log_b.size:
            return self._ops.path_t @ log_b + log_theta[None, :]
        return np.zeros((self.K, self.n_classes)) + log_theta[None, :]

    def _unlabeled(self) -> np.ndarray:
        return self.sizes - self.obs.sum(axis=1)

    def _em_map(self, lt, lb, u, objective: bool = True):
        """One EM iteration (App. F: E-step Eq. 12, M-step Eq. 10-11) from normalized
        parameters; also returns the log posterior at the input (it shares the E-step's work)."""
        lj = self._log_joint(lt, lb)
        lse = _lse_rows(lj)
        f = (
            float(
                np.sum(self.obs * lj)
                + u @ lse[:, 0]
                + (self.alpha - 1.0) @ lt
                + np.sum(self.a_map * lb)
            )
            if objective
            else np.nan
        )
        N = self.obs + u[:, None] * np.exp(lj - lse)
        t = (self.alpha - 1.0) + N.sum(axis=0)
        new_theta = np.log(t) - np.log(t.sum())
        if lb.size:
            ops = self._ops
            cs = ops.cumulative(N)
            w = self.a_map + (cs[ops.hi] - cs[ops.lo])
            new_b = np.log(w) - np.log(self._a_sib + (cs[ops.phi] - cs[ops.plo]))
        else:
            new_b = lb
        return new_theta, new_b, f

    def _em_step(self, log_theta, log_b):
        """One EM iteration (App. F)."""
        nt, nb, _ = self._em_map(log_theta, log_b, self._unlabeled())
        return nt, nb

    def log_posterior(self, log_theta=None, log_branch=None) -> float:
        """Observed-data log posterior of ``(θ, ψ)`` up to a constant (deterministic oracle).

        ``Σ_{k,y} n^obs_{ky} log θ_y ψ_{yk} + Σ_k u_k log Σ_y θ_y ψ_{yk} + Σ_y (α_y − 1) log θ_y +
        Σ_{c,y} (β_{yc} − #leaves(c)) log b_{yc}`` with ``u_k`` the unlabeled items of stratum
        ``k``: the density (in ``ψ``-space, Minka's Dirichlet-tree density) whose mode EM finds
        (Marchant & Rubinstein (2021), App. F).
        """
        self._check_ready()
        lt = self.log_theta if log_theta is None else np.asarray(log_theta, dtype=float)
        lb = self.log_branch if log_branch is None else np.asarray(log_branch, dtype=float)
        lj = self._log_joint(lt, lb)
        val = float(np.sum(self.obs * lj))
        val += float(np.sum(self._unlabeled() * _lse(lj, axis=1)))
        val += float(np.sum((self.alpha - 1.0) * lt)) + float(np.sum(self.a_map * lb))
        return val

    def _run_em(self) -> None:
        """EM to convergence from the current (warm-start) parameters, SQUAREM-accelerated
        (Varadhan & Roland 2008, scheme S3, with the extrapolated point rejected whenever its log
        posterior falls below the cycle's start, so the iteration stays monotone like EM)."""
        lt, lb = self.log_theta, self.log_branch
        u = self._unlabeled()
        C = self.n_classes
        it = 0
        if not self.accelerate:
            while it < self.em_max_iter:
                nt, nb, _ = self._em_map(lt, lb, u)
                it += 1
                delta = max(np.max(np.abs(nt - lt)), np.max(np.abs(nb - lb), initial=0.0))
                lt, lb = nt, nb
                if delta < self.em_tol:
                    break
        else:
            while it < self.em_max_iter:
                t1, b1, f0 = self._em_map(lt, lb, u)
                t2, b2, _ = self._em_map(t1, b1, u, objective=False)
                it += 2
                r = np.concatenate([t1 - lt, (b1 - lb).ravel()])
                if np.max(np.abs(r)) < self.em_tol:
                    lt, lb = t1, b1
                    break
                v = np.concatenate([t2 - t1, (b2 - b1).ravel()]) - r
                nv = np.linalg.norm(v)
                alpha = min(-np.linalg.norm(r) / nv, -1.0) if nv > 0 else -1.0
                x0 = np.concatenate([lt, lb.ravel()])
                xs = x0 - 2 * alpha * r + alpha**2 * v
                ts = xs[:C] - _lse(xs[:C])
                bs = _log_normalize_siblings(self._ops, xs[C:].reshape(-1, C))
                tn, bn, fs = self._em_map(ts, bs, u)
                it += 1
                if not np.isfinite(fs) or fs < f0:
                    tn, bn = t2, b2  # rejected extrapolation: keep the plain EM iterate
                step = max(np.max(np.abs(tn - lt)), np.max(np.abs(bn - lb), initial=0.0))
                lt, lb = tn, bn
                if step < self.em_tol:
                    break
        self.log_theta, self.log_branch = lt, lb
        self.em_iterations = it
        lj = self._log_joint(lt, lb)
        self.stratum_probs = np.exp(lj - _lse(lj, axis=1, keepdims=True))
        self._fit_within()

    # -- stochastic oracle: weighted posterior predictive (App. H) -------------------------------
    def _stochastic_refresh(self) -> None:
        """Posterior predictive (Marchant & Rubinstein (2021), App. H, Eq. 14) per stratum."""
        at = self.alpha + self.obs.sum(axis=0)
        if self.tree.n_nodes > 1:
            bt = self.beta + self._ops.path @ self.obs
            log_b = np.log(bt) - np.log(self._ops.sibling_sum(bt))
        else:
            log_b = np.zeros((0, self.n_classes))
        self.log_theta = np.log(at) - np.log(at.sum())
        self.log_branch = log_b
        lj = self._log_joint(self.log_theta, log_b)
        self.stratum_probs = np.exp(lj - _lse(lj, axis=1, keepdims=True))
        self._fit_within()

    # -- within-leaf belief ------------------------------------------------------------------------
    def _fit_within(self) -> None:
        """Solve the tilt's offsets for the current ``π(y | k)`` (warm-started)."""
        if self.within_leaf != "tilt":
            return
        if self.n_classes == 2:
            self.within_offsets = tilt_offsets_binary(
                self._item_logit,
                self.strata,
                self._unlabeled_mask,
                self.stratum_probs[:, 1],
                self._logit_min,
                self._logit_max,
                start=self.within_offsets,
            )
        else:
            self.within_offsets = tilt_offsets(
                self._item_log_s,
                self.strata,
                self._unlabeled_mask,
                self.stratum_probs,
                start=self.within_offsets,
            )

    def _item_probs(self) -> np.ndarray:
        """Item-level ``π_i(y)`` before the point masses of labeled items, shape (n, C)."""
        if self.within_leaf == "flat":
            return self.stratum_probs[self.strata]
        if self.n_classes == 2:
            p1 = special.expit(self.within_offsets[self.strata] + self._item_logit)
            return np.stack([1.0 - p1, p1], axis=1)
        z = self._item_log_s + self.within_offsets[self.strata]
        z -= z.max(axis=1, keepdims=True)
        P = np.exp(z)
        P /= P.sum(axis=1, keepdims=True)
        return P

    # -- the OracleModel interface ----------------------------------------------------------------
    def update(self, indices, labels, weights=None) -> None:
        """Condition on labeled draws.

        Deterministic oracle: new items' labels enter the counts once (repeats are free and carry
        no new information), then EM runs to convergence warm-started from the last stage
        (App. F); ``weights`` are checked but not needed (ignorable selection, Sec. 4.2).
        Stochastic oracle: every draw adds its importance weight ``p/q`` to the counts of its
        label along its path (App. H, bias-corrected Eq. 15).
        """
        self._check_ready()
        idx, y, w = check_update(indices, labels, weights, self.n_items, self.n_classes)
        self.n_updates += 1
        self.n_draws += int(idx.size)
        C = self.n_classes
        if self.deterministic:
            new_i, new_y = self.cache.add(idx, y)
            if new_i.size and self.within_leaf == "tilt":
                self._unlabeled_mask[new_i] = 0.0
            if new_i.size:
                self.obs += np.bincount(
                    self.strata[new_i] * C + new_y, minlength=self.K * C
                ).reshape(self.K, C)
                self._run_em()
        else:
            if idx.size:
                self.obs += np.bincount(
                    self.strata[idx] * C + y, weights=w, minlength=self.K * C
                ).reshape(self.K, C)
            self._stochastic_refresh()

    def belief(self) -> CategoricalBelief:
        """The item beliefs: ``π(y | k_x)`` (Eq. 13/14) for ``within_leaf="flat"``, the tilted
        ``π_i(y) ∝ s_i(y) exp(c_{k_x y})`` (same leaf totals) for ``"tilt"``; point masses on
        labeled items (deterministic oracle)."""
        self._check_ready()
        probs = self._item_probs()
        if self.deterministic:
            self.cache.point_masses(probs)
        return CategoricalBelief(probs)

    @property
    def theta(self) -> np.ndarray:
        """Current ``θ`` (MAP for a deterministic oracle, posterior mean for a stochastic one)."""
        return np.exp(self.log_theta)

    def epsilon_factor(self) -> float:
        """The ``ε_t/ε_0`` of Marchant & Rubinstein (2021): the unlabeled fraction (Prop. 3) for a
        deterministic oracle, ``1/(t + 1)`` after ``t`` updates (Prop. 5) for a stochastic one."""
        self._check_ready()
        if self.deterministic:
            return 1.0 - self.cache.n_labeled / self.n_items
        return 1.0 / (self.n_updates + 1)

    # -- state ------------------------------------------------------------------------------------
    def _config(self) -> dict[str, Any]:
        return {
            "n_strata": self.n_strata,
            "depth": self.depth,
            "deterministic": self.deterministic,
            "prior_strength": self.prior_strength,
            "tree_smoothing": self.tree_smoothing,
            "method": self.method,
            "model": self.model,
            "within_leaf": self.within_leaf,
            "n_items": self.n_items,
            "n_leaves": self.K,
            "n_classes": self.n_classes,
        }

    def get_state(self) -> dict[str, Any]:
        """Everything :meth:`set_state` needs: config, labels or weighted counts, EM parameters."""
        state = common_state(self)
        state["n_draws"] = self.n_draws
        state["em_iterations"] = self.em_iterations
        state["log_theta"] = self.log_theta.copy()
        state["log_branch"] = self.log_branch.copy()
        if self.within_leaf == "tilt":
            state["within_offsets"] = self.within_offsets.copy()
        if not self.deterministic:
            state["counts"] = self.obs.copy()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` output on a model initialized with the same pool."""
        restore_common_state(
            self, state, ("n_items", "n_leaves", "n_classes", "depth", "deterministic")
        )
        C = self.n_classes
        self.n_draws = int(state.get("n_draws", 0))
        self.em_iterations = int(state.get("em_iterations", 0))
        if self.deterministic:
            items = self.cache.items
            self.obs = (
                np.bincount(self.strata[items] * C + self.cache.label[items], minlength=self.K * C)
                .reshape(self.K, C)
                .astype(float)
            )
        else:
            self.obs = np.asarray(state["counts"], dtype=float).reshape(self.K, C).copy()
        self.log_theta = np.asarray(state["log_theta"], dtype=float).copy()
        self.log_branch = np.asarray(state["log_branch"], dtype=float).reshape(-1, C).copy()
        lj = self._log_joint(self.log_theta, self.log_branch)
        self.stratum_probs = np.exp(lj - _lse(lj, axis=1, keepdims=True))
        if self.within_leaf == "tilt":
            if self.deterministic:
                self._unlabeled_mask = np.ones(self.n_items)
                self._unlabeled_mask[self.cache.items] = 0.0
            saved = state.get("within_offsets")
            shape = self.within_offsets.shape
            self.within_offsets = np.zeros(shape)
            if saved is not None and np.asarray(saved).size == self.within_offsets.size:
                self.within_offsets = np.asarray(saved, dtype=float).reshape(shape).copy()
            else:  # a state saved without the tilt (e.g. by a "flat" oracle): solve afresh
                self._fit_within()

    # -- full posteriors --------------------------------------------------------------------------
    def _coords(self) -> dict[str, Any]:
        return {
            "class": [str(c) for c in self.classes],
            "node": np.arange(1, self.tree.n_nodes),
            "stratum": np.arange(self.K),
        }

    def pymc_model(self):
        """The same model in PyMC: ``θ ~ Dirichlet(α)``, a Dirichlet per internal node and class
        on the branch probabilities (the Dirichlet-tree, Eq. 10), and the data as a potential.

        Deterministic oracle: the observed-data likelihood ``Σ n^obs_{ky} log θ_y ψ_{yk} +
        Σ_k u_k log Σ_y θ_y ψ_{yk}`` (the unobserved labels summed out). Stochastic oracle: the
        importance-weighted counts ``Σ w_{ky} log θ_y ψ_{yk}`` (App. H), which is conjugate.
        """
        self._check_ready()
        import pymc as pm
        import pytensor.tensor as pt

        tree, C = self.tree, self.n_classes
        coords = self._coords()
        nonroot_parent = tree.parent[1:]
        counts = np.bincount(nonroot_parent, minlength=tree.n_nodes)
        internal = np.flatnonzero(counts > 0)
        with pm.Model(coords=coords) as m:
            theta = pm.Dirichlet("theta", a=self.alpha, dims="class")
            log_theta = pt.log(theta)
            if tree.n_nodes > 1:
                pieces, order = [], []
                for mchild in np.unique(counts[internal]):
                    nodes = internal[counts[internal] == mchild]
                    # children of each node are contiguous (BFS numbering)
                    first = np.array([np.flatnonzero(nonroot_parent == v)[0] for v in nodes])
                    kids = first[:, None] + np.arange(mchild)[None, :]  # non-root row indices
                    conc = self.beta[kids].transpose(0, 2, 1)  # (n_nodes_m, C, mchild)
                    b = pm.Dirichlet(f"branch_{mchild}", a=conc, shape=conc.shape)
                    pieces.append(pt.log(b).transpose(0, 2, 1).reshape((-1, C)))
                    order.append(kids.ravel())
                perm = np.argsort(np.concatenate(order))
                log_b = pt.concatenate(pieces, axis=0)[perm]
                path = tree.path.T.toarray()
                log_joint = pt.dot(path, log_b) + log_theta[None, :]
                pm.Deterministic("branch", pt.exp(log_b), dims=("node", "class"))
            else:
                log_joint = pt.zeros((self.K, C)) + log_theta[None, :]
            lse = pm.math.logsumexp(log_joint, axis=1, keepdims=True)
            pm.Deterministic("pi", pt.exp(log_joint - lse), dims=("stratum", "class"))
            # the counts as data containers: models of the same tree share one compiled graph
            counts = pm.Data("counts", self.obs, dims=("stratum", "class"))
            if self.deterministic:
                unlabeled = pm.Data("unlabeled", self._unlabeled(), dims="stratum")
                loglik = pt.sum(counts * log_joint) + pt.sum(unlabeled * lse[:, 0])
            else:
                loglik = pt.sum(counts * log_joint)
            pm.Potential("labels", loglik)
        return m

    def posterior(
        self,
        draws: int = 1000,
        rng: Any = None,
        *,
        method: str = "auto",
        tune: int | None = None,
        chains: int = 2,
    ):
        """The full posterior of ``θ``, the branch probabilities and ``π(y | k)`` as a DataTree.

        This is the posterior of the leaf-level model, the same for ``within_leaf="tilt"`` and
        ``"flat"``: the tilt only maps the leaf-level predictive to item beliefs (a deterministic
        redistribution that preserves each leaf's total), so it changes no likelihood term.

        Parameters
        ----------
        draws : int
            Posterior draws per chain.
        rng : None, int or Generator
        method : {"auto", "nuts", "exact"}
            ``"exact"``: independent Dirichlet draws from the conjugate posterior (stochastic
            oracle only: ``θ ~ Dir(α̃)``, ``b_ν ~ Dir(β̃_ν)``, App. H Eq. 15) wrapped with
            :func:`arviz_base.from_dict`. ``"nuts"``: :meth:`pymc_model` sampled with
            ``pm.sample``. ``"auto"``: exact when conjugate (stochastic), NUTS otherwise.
        tune : int, optional
            NUTS tuning steps (default ``draws``).
        chains : int
            Chains (run sequentially, ``cores=1``).

        Returns
        -------
        xarray.DataTree
            Group ``posterior`` with ``theta`` (class), ``branch`` (node, class) and ``pi``
            (stratum, class); ``arviz.summary`` works on it.
        """
        self._check_ready()
        if method not in ("auto", "nuts", "exact"):
            raise ValueError(f"method must be 'auto', 'nuts' or 'exact', got {method!r}")
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
            raise ValueError(f"draws must be a positive integer, got {draws!r}")
        if method == "auto":
            method = "nuts" if self.deterministic else "exact"
        gen = check_rng(rng)
        if method == "exact":
            if self.deterministic:
                raise ValueError(
                    "the deterministic-oracle posterior is not conjugate (unlabeled items are a "
                    "mixture); use method='nuts'"
                )
            return self._exact_posterior(int(draws), int(chains), gen)
        import pymc as pm

        seed = int(gen.integers(2**31 - 1))
        with self.pymc_model():
            return pm.sample(
                draws=int(draws),
                tune=int(draws if tune is None else tune),
                chains=int(chains),
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )

    def _exact_posterior(self, draws: int, chains: int, gen: np.random.Generator):
        from arviz_base import from_dict

        C, S = self.n_classes, draws * chains
        at = self.alpha + self.obs.sum(axis=0)
        g = gen.gamma(np.broadcast_to(at, (S, C)))
        theta = g / g.sum(axis=1, keepdims=True)
        data: dict[str, Any] = {}
        log_theta = np.log(theta)
        if self.tree.n_nodes > 1:
            bt = self.beta + self.tree.path @ self.obs  # (n_nr, C)
            gb = gen.gamma(np.broadcast_to(bt, (S, *bt.shape)))
            sums = np.einsum("ij,sjc->sic", self.tree.siblings.toarray(), gb)
            branch = gb / sums
            log_joint = np.einsum("ki,sic->skc", self.tree.path.T.toarray(), np.log(branch))
            data["branch"] = branch.reshape(chains, draws, *bt.shape)
        else:
            log_joint = np.zeros((S, self.K, C))
        log_joint = log_joint + log_theta[:, None, :]
        pi = np.exp(log_joint - _lse(log_joint, axis=2, keepdims=True))
        data["theta"] = theta.reshape(chains, draws, C)
        data["pi"] = pi.reshape(chains, draws, self.K, C)
        dims = {"theta": ["class"], "branch": ["node", "class"], "pi": ["stratum", "class"]}
        return from_dict(
            {"posterior": data},
            coords=self._coords(),
            dims={k: v for k, v in dims.items() if k in data},
            attrs={
                "posterior": {"inference": "exact conjugate (Marchant & Rubinstein (2021), App. H)"}
            },
        )

    def exact_posterior_mean(self) -> dict[str, np.ndarray]:
        """Closed-form posterior quantities (stochastic oracle; conjugate): the means of ``θ`` and
        of the branch probabilities, and the posterior predictive ``p(y | k, L) ∝ E[θ_y ψ_{yk}] =
        E[θ_y] Π_c E[b_{yc}]^{δ_c(k)}`` (App. H, Eq. 14), which is what :meth:`belief` returns."""
        self._check_ready()
        if self.deterministic:
            raise ValueError("closed-form posterior means exist for the stochastic oracle only")
        at = self.alpha + self.obs.sum(axis=0)
        out = {"theta": at / at.sum(), "predictive": self.stratum_probs.copy()}
        if self.tree.n_nodes > 1:
            bt = self.beta + self.tree.path @ self.obs
            out["branch"] = bt / (self.tree.siblings @ bt)
        return out

    def __repr__(self) -> str:
        kind = "deterministic" if self.deterministic else "stochastic"
        extra = f", n_leaves={self.K}, n_labeled={self.cache.n_labeled}" if self._ready else ""
        return (
            f"DirichletTreeOracle(n_strata={self.n_strata}, depth={self.depth}, {kind}, "
            f"within_leaf={self.within_leaf!r}{extra})"
        )


register_oracle("dirichlet-tree", DirichletTreeOracle)
