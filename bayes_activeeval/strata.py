"""Score strata: partitions of the pool by a model's score.

Two rules:

- ``"quantile"``: equal-mass strata (each holds about the same number of items).
- ``"csf"``: the cumulative square-root-of-frequency rule of Dalenius & Hodges (1959), as used by
  Marchant & Rubinstein (2021), Sec. 4 for the Dirichlet-tree leaves: scores are binned finely,
  ``sqrt`` of the bin counts is accumulated and cut into equal parts. It puts narrow strata where
  scores are dense and wide ones in the sparse tails, which is where rare positives live.
"""

from __future__ import annotations

import numpy as np

from ._validation import show

__all__ = ["csf_bins", "csf_boundaries", "score_strata"]


def csf_bins(n_strata: int, n_items: int, n_bins: int | None = None) -> int:
    """Fine bins of the cumulative-sqrt(F) rule: ``n_bins`` or ``max(64 n_strata, 4096)``, at most
    ``n_items`` (and at least 1).

    Parameters
    ----------
    n_strata : int
        Number of strata requested.
    n_items : int
        Number of items to bin (the cap).
    n_bins : int, optional
        Requested number of fine bins (default ``None``: ``max(64 n_strata, 4096)``).

    Returns
    -------
    int
        The number of fine bins.
    """
    nb = n_bins or max(64 * n_strata, 4096)
    return int(min(nb, max(n_items, 1)))


def csf_boundaries(counts: np.ndarray, bin_edges: np.ndarray, n_strata: int) -> np.ndarray:
    """Inner stratum boundaries of the cumulative-sqrt(F) rule from a fine histogram.

    Dalenius & Hodges (1959); Marchant & Rubinstein (2021), Sec. 4: ``sqrt`` of the bin counts is
    accumulated and cut into ``n_strata`` equal parts; each cut falls on a bin edge. Histograms
    add over disjoint sets of items, so a lazy pool's summed per-chunk counts give the in-memory
    boundaries exactly.

    Parameters
    ----------
    counts : ndarray (nb,)
        Items per fine bin.
    bin_edges : ndarray (nb + 1,)
        The bins' edges.
    n_strata : int

    Returns
    -------
    ndarray
        Sorted distinct inner boundaries (at most ``n_strata − 1``).
    """
    nb = counts.size
    cum = np.cumsum(np.sqrt(counts))
    targets = cum[-1] * np.arange(1, n_strata) / n_strata
    cut = np.searchsorted(cum, targets, side="left")
    return np.unique(bin_edges[np.clip(cut + 1, 1, nb - 1)])


def score_strata(
    scores: np.ndarray, n_strata: int, *, method: str = "csf", n_bins: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Assign each item to a score stratum.

    Parameters
    ----------
    scores : array-like (n,)
        Finite scores (higher = more likely positive; only the order matters for ``"quantile"``).
    n_strata : int
        Number of strata requested (fewer may result when scores have few distinct values).
    method : {"csf", "quantile"}
        Cumulative-sqrt(F) (Dalenius & Hodges; Marchant & Rubinstein (2021), Sec. 4) or equal size.
    n_bins : int, optional
        Fine bins for ``"csf"`` (default ``max(64 n_strata, 4096)``, capped by ``n``).

    Returns
    -------
    labels : ndarray (n,) of int
        Stratum of each item, ``0..H-1`` in increasing score order, every stratum non-empty.
    edges : ndarray (H + 1,)
        Score boundaries of the strata.
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"scores must be a non-empty vector, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"scores[{i}] = {show(s[i])}; scores must be finite")
    if isinstance(n_strata, bool) or not isinstance(n_strata, (int, np.integer)) or n_strata < 1:
        raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
    lo, hi = float(s.min()), float(s.max())
    if method == "quantile":
        qs = np.quantile(s, np.linspace(0, 1, n_strata + 1))
        inner = np.unique(qs[1:-1])
    elif method == "csf":
        nb = csf_bins(n_strata, s.size, n_bins)
        if hi == lo:
            inner = np.array([])
        else:
            bin_edges = np.linspace(lo, hi, nb + 1)
            counts, _ = np.histogram(s, bins=bin_edges)
            inner = csf_boundaries(counts, bin_edges, n_strata)
    else:
        raise ValueError(f"method must be 'csf' or 'quantile', got {method!r}")
    inner = inner[(inner > lo) & (inner <= hi)]
    labels = np.searchsorted(inner, s, side="right")
    # drop empty strata and relabel 0..H-1
    used, labels = np.unique(labels, return_inverse=True)
    full_edges = np.concatenate([[lo], inner, [hi]])
    edges = np.concatenate([full_edges[used], [hi]])
    return labels.astype(np.int64), edges
