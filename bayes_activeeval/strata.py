"""Score strata: partitions of the pool by a model's score.

Two rules:

- ``"quantile"``: equal-mass strata (each holds about the same number of items).
- ``"csf"``: the cumulative square-root-of-frequency rule of Dalenius & Hodges (1959): a
  histogram of the scores, ``sqrt`` of its bin counts accumulated and cut into equal parts. It
  puts strata holding many items where scores are dense and strata holding few in the sparse
  tails, which is where rare positives live, *if* the histogram estimates the density: with bins
  so fine that each holds one item or none, ``sqrt(count) = count`` and the rule gives
  equal-size strata. ``histogram="fd"`` is the rule as Marchant & Rubinstein (2021), Sec. 5.2
  ran it for the Dirichlet-tree leaves (their ``activeeval``: a Freedman–Diaconis histogram,
  :func:`fd_bins`, and their walk over the bins, :func:`csf_boundaries` with ``walk=True``);
  ``histogram="fine"`` (the default, also of the Dirichlet tree) bins finely
  (``max(64 n_strata, 4096)`` bins), which on pools of 100,000 items is close to equal-size
  strata.
"""

from __future__ import annotations

import numpy as np

from ._validation import show

__all__ = ["csf_bins", "csf_boundaries", "fd_bins", "score_strata"]


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


def fd_bins(n_strata: int, n_items: int, iqr: float, span: float) -> int:
    """Bins of the Freedman–Diaconis histogram behind ``histogram="fd"``.

    Bin width ``2 IQR n^(-1/3)`` (Freedman & Diaconis 1981; NumPy's ``bins="fd"``), as in
    Marchant & Rubinstein's implementation of their Sec. 5.2 (``activeeval``,
    ``bins_hist="fd"``); when that gives no more bins than strata (or the IQR is 0),
    ``4 n_strata`` equal bins, their fallback. Capped at ``max(64 n_strata, 4096)`` (a
    heavy-tailed score cannot ask for millions) and at ``n_items``.

    Parameters
    ----------
    n_strata : int
        Number of strata requested.
    n_items : int
        Number of items to bin.
    iqr : float
        Interquartile range of the scores (``np.quantile`` at 0.75 minus at 0.25).
    span : float
        Largest minus smallest score.

    Returns
    -------
    int
        The number of bins.
    """
    width = 2.0 * iqr * n_items ** (-1.0 / 3.0)
    nb = int(np.ceil(span / width)) if width > 0 else 0
    if nb <= n_strata:
        nb = 4 * n_strata
    return min(nb, csf_bins(n_strata, n_items))  # the fine histogram's caps


def csf_boundaries(
    counts: np.ndarray, bin_edges: np.ndarray, n_strata: int, *, walk: bool = False
) -> np.ndarray:
    """Inner stratum boundaries of the cumulative-sqrt(F) rule from a histogram.

    Dalenius & Hodges (1959): ``sqrt`` of the bin counts is accumulated and cut into
    ``n_strata`` equal parts; each cut falls on a bin edge. ``walk=False``: part ``j`` starts
    after the first bin whose cumulative sum reaches ``j/n_strata`` of the total, and parts
    that start at the same edge merge. ``walk=True`` (Marchant & Rubinstein (2021), Sec. 5.2,
    as ``activeeval``'s ``csf_bin_edges`` walks the bins): part ``j`` starts at the *left*
    edge of that bin, and at most one part starts in a bin, so a part that would start in a
    bin already taken starts in the next one. A dense bin whose ``sqrt`` count spans several
    parts then hands the parts it cannot hold to the bins above it, which under a
    right-skewed score (a rare positive class) are the sparse top of the ranking: there every
    bin becomes a stratum. One difference from ``activeeval``: when the walk runs out of bins
    before every part has started, ``activeeval`` overwrites the last start with ``+inf``
    (merging the top two strata); here it is kept (on ``febrl3_given_name_lr`` of
    ``benchmarks/real_pools_data.py`` that gives 217 strata against 216; on the other five real
    pools the partitions are identical). Histograms add over disjoint sets of items, so a lazy
    pool's summed per-chunk counts give the in-memory boundaries exactly.

    Parameters
    ----------
    counts : ndarray (nb,)
        Items per bin.
    bin_edges : ndarray (nb + 1,)
        The bins' edges.
    n_strata : int
    walk : bool
        The walk above (default ``False``).

    Returns
    -------
    ndarray
        Sorted distinct inner boundaries (at most ``n_strata − 1``).
    """
    nb = counts.size
    cum = np.cumsum(np.sqrt(counts))
    j = np.arange(1, n_strata)
    cut = np.searchsorted(cum, cum[-1] * j / n_strata, side="left")
    if not walk:
        return np.unique(bin_edges[np.clip(cut + 1, 1, nb - 1)])
    # start bin of part j: max(start of part j − 1 plus one, first bin reaching the target)
    start = j + np.maximum.accumulate(np.maximum(cut - j, 0)) if j.size else j
    return np.unique(bin_edges[start[start < nb]])


def score_strata(
    scores: np.ndarray,
    n_strata: int,
    *,
    method: str = "csf",
    n_bins: int | None = None,
    histogram: str = "fine",
) -> tuple[np.ndarray, np.ndarray]:
    """Assign each item to a score stratum.

    Parameters
    ----------
    scores : array-like (n,)
        Finite scores (higher = more likely positive; only the order matters for ``"quantile"``).
    n_strata : int
        Number of strata requested (fewer may result when scores have few distinct values).
    method : {"csf", "quantile"}
        Cumulative-sqrt(F) (Dalenius & Hodges 1959) or equal size.
    n_bins : int, optional
        Bins of ``"csf"``'s histogram, either kind (default: ``max(64 n_strata, 4096)`` for
        ``"fine"``, :func:`fd_bins` for ``"fd"``; capped by ``n``).
    histogram : {"fine", "fd"}
        ``"csf"``'s histogram: fine bins, or the Freedman–Diaconis histogram with the walk of
        Marchant & Rubinstein (2021), Sec. 5.2 (the module's docstring says why they differ).

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
    if histogram not in ("fine", "fd"):
        raise ValueError(f"histogram must be 'fine' or 'fd', got {histogram!r}")
    lo, hi = float(s.min()), float(s.max())
    if method == "quantile":
        qs = np.quantile(s, np.linspace(0, 1, n_strata + 1))
        inner = np.unique(qs[1:-1])
    elif method == "csf":
        if hi == lo:
            inner = np.array([])
        else:
            if histogram == "fd" and n_bins is None:
                q25, q75 = np.quantile(s, [0.25, 0.75])
                nb = fd_bins(n_strata, s.size, float(q75 - q25), hi - lo)
            else:
                nb = csf_bins(n_strata, s.size, n_bins)
            bin_edges = np.linspace(lo, hi, nb + 1)
            counts, _ = np.histogram(s, bins=bin_edges)
            inner = csf_boundaries(counts, bin_edges, n_strata, walk=histogram == "fd")
    else:
        raise ValueError(f"method must be 'csf' or 'quantile', got {method!r}")
    inner = inner[(inner > lo) & (inner <= hi)]
    labels = np.searchsorted(inner, s, side="right")
    # drop empty strata and relabel 0..H-1
    used, labels = np.unique(labels, return_inverse=True)
    full_edges = np.concatenate([[lo], inner, [hi]])
    edges = np.concatenate([full_edges[used], [hi]])
    return labels.astype(np.int64), edges
