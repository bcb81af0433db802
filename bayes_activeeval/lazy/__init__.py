"""Pools beyond memory and beyond one machine: a lazy :class:`~bayes_activeeval.Pool` on dask.

A :class:`LazyPool` holds no per-item array. It holds, for each *chunk* of consecutive items, a
dask task that loads that chunk's columns (a few Parquet row groups, a block of Zarr or dask
arrays, a partition of a dask DataFrame). Every pool-wide quantity the package needs is a sum over
items, so every step is a dask reduction over chunks, run on the threaded scheduler or on a
``dask.distributed`` cluster (the ``client`` the pool was given, else the ambient one):

- intrinsic risk ``R = Σ_x p(x) E_π[ℓ(x, y)]`` (Sawade (2012), Eq. 4.21-4.22): per-chunk sums;
- optimal proposal ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(u(x))``, ``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²``
  (Sawade (2012), Thm. 4.1, Eq. 4.6; Thm. 4.2, Eq. 4.25): per-chunk sums ``S_k = Σ_{x∈k} s(x)``
  give the normalizer ``S = Σ_k S_k``; ``q`` of a chunk is then recomputed on demand,
  ``q(x) = (1 − δ) s(x)/S + δ p(x)``, never stored for the whole pool;
- draws: two-level inverse-CDF sampling — a uniform number picks a chunk by its mass
  ``Q_k = (1 − δ) S_k/S + δ P_k``, then an item by the cumulative sum of ``q`` inside that chunk.
  This is exactly the in-memory :meth:`Proposal.draw` (``searchsorted`` on the cumulative sum of
  ``q``), split in two, so the same ``rng`` gives the same items;
- estimates (Sawade (2012), Eq. 3.11/3.31) only read the drawn items, gathered chunk by chunk.

Each chunk is turned into a small in-memory :class:`Pool` (validated and encoded exactly as an
in-memory pool would be) and the package's own NumPy kernels run on it, so the lazy results equal
the in-memory ones up to the order of floating-point summation (``q`` to ~1e-15 relative).

Peak memory is a few chunks per worker thread: ``chunk_size`` items (default ``2**20``) of every
column the measure reads plus the kernels' temporaries, about 100 bytes per item of a binary pool
with one model.

Layout (imports run down this list, never up):

- :mod:`.chunks`: the chunk tasks — :class:`~.chunks.ChunkSpec` turns a chunk's raw columns into
  an in-memory pool; the per-chunk pieces of the optimal proposal (risk, ``u``, ``s``, mass,
  ``q``, draws). No dask.
- :mod:`.pool`: :class:`LazyPool` (running chunk tasks, gathering items).
- :mod:`.proposal`: :class:`LazyProposal`, the optimal and passive proposals, the model-assisted
  estimate's belief terms.
- :mod:`.sources`: the constructors behind :meth:`Pool.from_parquet`, :meth:`Pool.from_zarr`,
  :meth:`Pool.from_dask` and :meth:`Pool.from_dask_dataframe`.
- this module: the stratified proposal on exact score quantiles, and the public names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._validation import check_fraction, show
from ..kernel import DEFAULT_BELIEF_FLOOR, mix_proposal
from ..pool import Pool
from ..proposals import default_scores, neyman_allocation, stratum_proposal
from ..strata import csf_bins, csf_boundaries
from .chunks import OptimalParams, passive_sums, u_chunk
from .pool import DEFAULT_CHUNK_SIZE, LazyPool, import_dask, is_lazy
from .proposal import LazyProposal, model_assisted_terms, optimal_proposal, passive_proposal
from .sources import from_dask, from_dask_dataframe, from_parquet, from_zarr

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "GATHER_LIMIT",
    "QUANTILE_BINS",
    "LazyPool",
    "LazyProposal",
    "from_dask",
    "from_dask_dataframe",
    "from_parquet",
    "from_zarr",
    "import_dask",
    "is_lazy",
    "lazy_quantiles",
    "lazy_score_strata",
    "model_assisted_terms",
    "optimal_proposal",
    "passive_proposal",
    "stratified_proposal",
]


# ------------------------------------------------------------------------------------------------
# stratified proposals: score strata found exactly, in a few passes of per-chunk histograms.
# They live in the package module itself: GATHER_LIMIT and QUANTILE_BINS are read at call time
# from here (tests lower them to force the histogram passes).
#: Values gathered to the client at most when pinning down an order statistic exactly.
GATHER_LIMIT = 1 << 20
#: Bins per histogram pass of the exact quantile search.
QUANTILE_BINS = 4096


def _chunk_scores(cp: Pool, offset: int, model) -> np.ndarray:
    """The scores of a chunk: the pool's default scores of ``model``, or, when ``model`` is a
    tuple ``(fn, *args)``, ``fn(chunk_pool, offset, *args)``."""
    if isinstance(model, tuple):
        s = np.asarray(model[0](cp, offset, *model[1:]), dtype=float)
    else:
        s = np.asarray(default_scores(cp, model), dtype=float)
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise ValueError(f"scores[{offset + bad[0]}] = {show(s[bad[0]])}; scores must be finite")
    return s


def _minmax_chunk(cp: Pool, offset: int, model):
    s = _chunk_scores(cp, offset, model)
    return float(s.min()), float(s.max())


def _in(s: np.ndarray, a: float, b: float, closed: bool) -> np.ndarray:
    return (s >= a) & ((s < b) | (closed & (s == b)))


def _select_chunk(cp: Pool, offset: int, model, todo: list[tuple]):
    """For each interval ``(a, b, closed, gather)``: its values (gather) or histogram counts and
    the min/max of its members."""
    s = _chunk_scores(cp, offset, model)
    out = []
    for a, b, closed, gather in todo:
        v = s[_in(s, a, b, closed)]
        if gather:
            out.append(v)
        else:
            edges = np.linspace(a, b, QUANTILE_BINS + 1)
            j = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, QUANTILE_BINS - 1)
            mn = float(v.min()) if v.size else np.inf
            mx = float(v.max()) if v.size else -np.inf
            out.append((np.bincount(j, minlength=QUANTILE_BINS), mn, mx))
    return out


def _order_statistics(pool: LazyPool, model, ranks: np.ndarray, lo: float, hi: float):
    """The values of the scores at sorted positions ``ranks`` (exact), in passes over the chunks.

    An interval of score values holding some of the wanted positions is histogrammed into
    :data:`QUANTILE_BINS` bins (the bin of each position found from the counts) until it holds
    at most :data:`GATHER_LIMIT` values, which are then gathered and sorted.
    """
    n = pool.n_items
    # active intervals: (a, b, closed, below, count, ranks)
    active = [(lo, hi, True, 0, n, np.asarray(ranks, dtype=np.int64))]
    found: dict[int, float] = {}
    while active:
        todo = [(a, b, c, cnt <= GATHER_LIMIT) for a, b, c, _, cnt, _ in active]
        got = pool.map_chunks(_select_chunk, model, todo)
        nxt = []
        for i, (a, b, closed, below, _cnt, rs) in enumerate(active):
            parts = [g[i] for g in got]
            if todo[i][3]:
                v = np.sort(np.concatenate(parts))
                for r in rs.tolist():
                    found[r] = float(v[r - below])
                continue
            counts = np.sum([pt[0] for pt in parts], axis=0)
            mn = min(pt[1] for pt in parts)
            mx = max(pt[2] for pt in parts)
            if mn == mx:  # every value in the interval is the same
                for r in rs.tolist():
                    found[r] = mn
                continue
            edges = np.linspace(a, b, QUANTILE_BINS + 1)
            cum = below + np.cumsum(counts)
            j = np.searchsorted(cum, rs, side="right")  # the bin holding each position
            for jj in np.unique(j).tolist():
                sel = rs[j == jj]
                start = int(cum[jj - 1]) if jj > 0 else below
                last = jj == QUANTILE_BINS - 1
                nxt.append(
                    (
                        float(edges[jj]),
                        float(edges[jj + 1]) if not last else b,
                        closed if last else False,
                        start,
                        int(counts[jj]),
                        sel,
                    )
                )
        active = nxt
    return np.array([found[int(r)] for r in ranks])


def _np_quantile_from(n: int, probs: np.ndarray, stat) -> np.ndarray:
    """``np.quantile(s, probs)`` (method "linear") from the order statistics ``stat(ranks)``,
    with NumPy's own index and interpolation arithmetic, so the result is bit-identical."""
    probs = np.asarray(probs, dtype=float)
    virtual = n * probs + (1 + probs * (1 - 1 - 1)) - 1
    prev = np.floor(virtual)
    gamma = virtual - prev
    i0 = np.clip(prev.astype(np.int64), 0, n - 1)
    i1 = np.clip(prev.astype(np.int64) + 1, 0, n - 1)
    ranks = np.unique(np.concatenate([i0, i1]))
    vals = dict(zip(ranks.tolist(), stat(ranks).tolist(), strict=True))
    a = np.array([vals[i] for i in i0.tolist()])
    b = np.array([vals[i] for i in i1.tolist()])
    diff = b - a
    out = a + diff * gamma
    hi = gamma >= 0.5
    out[hi] = (b - diff * (1 - gamma))[hi]
    return out


def lazy_quantiles(pool: LazyPool, probs: Any, *, model=None) -> np.ndarray:
    """``np.quantile(scores, probs)`` (method "linear") of a lazy pool's scores, exact: the
    order statistics behind it found in passes over the chunks (:func:`_order_statistics`) and
    NumPy's own interpolation, so the result is bit-identical to the in-memory one.

    Parameters
    ----------
    pool : LazyPool
    probs : array-like of float
        Probabilities in ``[0, 1]``.
    model : str or tuple, optional
        The model whose default scores are used (default ``None``: the pool's only model), or a
        tuple ``(fn, *args)`` with ``fn(chunk_pool, offset, *args)`` the scores of a chunk.

    Returns
    -------
    ndarray
        One quantile per entry of ``probs``.
    """
    mm = pool.map_chunks(_minmax_chunk, model)
    lo, hi = min(m[0] for m in mm), max(m[1] for m in mm)
    return _np_quantile_from(
        pool.n_items,
        np.asarray(probs, dtype=float),
        lambda r: _order_statistics(pool, model, r, lo, hi),
    )


def _hist_chunk(cp: Pool, offset: int, model, edges: np.ndarray) -> np.ndarray:
    return np.histogram(_chunk_scores(cp, offset, model), bins=edges)[0]


def _strata_labels_chunk(cp: Pool, offset: int, model, inner: np.ndarray):
    """Raw stratum of every item (before empty strata are dropped) and ``Σ p`` per stratum."""
    labels = np.searchsorted(inner, _chunk_scores(cp, offset, model), side="right")
    return np.bincount(labels, minlength=inner.size + 1), np.bincount(
        labels, weights=cp.p, minlength=inner.size + 1
    )


def lazy_score_strata(pool: LazyPool, n_strata: int, *, method: str, model=None):
    """Stratum boundaries of :func:`~bayes_activeeval.strata.score_strata` on a lazy pool, exact.

    ``"csf"``: one pass for the score range, one for the histogram (histograms add over chunks).
    ``"quantile"``: the order statistics behind ``np.quantile`` found by :func:`_order_statistics`.
    ``model`` names the model whose default scores are stratified, or is a tuple
    ``(fn, *args)`` with ``fn(chunk_pool, offset, *args)`` the scores of a chunk.

    Parameters
    ----------
    pool : LazyPool
    n_strata : int
        Number of strata requested, at least 1 (fewer may result).
    method : {"quantile", "csf"}
        Equal-size strata, or the cumulative-sqrt(F) rule.
    model : str or tuple, optional
        The model whose default scores are stratified (default ``None``: the pool's only
        model), or ``(fn, *args)`` as above.

    Returns
    -------
    inner : ndarray
        Inner boundaries (an item's raw stratum is ``searchsorted(inner, score, "right")``;
        strata left empty are dropped by the caller, as ``score_strata`` does).
    lo, hi : float
        The smallest and largest score.
    """
    if isinstance(n_strata, bool) or not isinstance(n_strata, (int, np.integer)) or n_strata < 1:
        raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
    mm = pool.map_chunks(_minmax_chunk, model)
    lo, hi = min(m[0] for m in mm), max(m[1] for m in mm)
    n = pool.n_items
    if method == "quantile":
        qs = _np_quantile_from(
            n,
            np.linspace(0, 1, n_strata + 1),
            lambda r: _order_statistics(pool, model, r, lo, hi),
        )
        inner = np.unique(qs[1:-1])
    elif method == "csf":
        nb = csf_bins(n_strata, n)
        if hi == lo:
            inner = np.array([])
        else:
            bin_edges = np.linspace(lo, hi, nb + 1)
            counts = np.sum(pool.map_chunks(_hist_chunk, model, bin_edges), axis=0)
            inner = csf_boundaries(counts, bin_edges, n_strata)
    else:
        raise ValueError(f"method must be 'csf' or 'quantile', got {method!r}")
    inner = inner[(inner > lo) & (inner <= hi)]
    return inner, lo, hi


@dataclass(frozen=True)
class _StrataParams:
    model: Any
    inner: np.ndarray
    relabel: np.ndarray  # raw stratum -> 0..H-1
    a: np.ndarray
    P: np.ndarray
    mix: float
    total: float  # Σ_x q(x) before mixing


def _strat_labels(cp: Pool, offset: int, prm: _StrataParams) -> np.ndarray:
    raw = np.searchsorted(prm.inner, _chunk_scores(cp, offset, prm.model), side="right")
    return prm.relabel[raw]


def _strat_q(cp: Pool, offset: int, prm: _StrataParams) -> np.ndarray:
    """``q(x) = a_h p(x)/P_h`` on a chunk, then the mixture with ``p``."""
    q = stratum_proposal(_strat_labels(cp, offset, prm), cp.p, prm.a, prm.P)
    return mix_proposal(q, cp.p, prm.mix, total=prm.total)


def _strat_u_chunk(cp: Pool, offset: int, prm: _StrataParams, opt: OptimalParams, H: int):
    labels = _strat_labels(cp, offset, prm)
    return np.bincount(labels, weights=cp.p * u_chunk(cp, offset, opt), minlength=H)


def _strat_mass_chunk(cp: Pool, offset: int, prm: _StrataParams, mixing: bool):
    """``Σ`` of the unmixed ``q`` over a chunk, and its items with ``q > 0`` (with ``mixing``:
    those with ``p > 0`` too, which the mixture with ``p`` gives mass)."""
    q = _strat_q(cp, offset, replace(prm, mix=0.0, total=1.0))
    pos = (q > 0) | (cp.p > 0) if mixing else q > 0
    return float(q.sum()), int(np.count_nonzero(pos))


def stratified_proposal(
    pool: LazyPool,
    measure=None,
    *,
    strata: Any = 10,
    allocation: str = "proportional",
    model: str | None = None,
    scores: Any = None,
    belief: Any = None,
    method: str = "quantile",
    mix: float = 0.0,
) -> LazyProposal:
    """:func:`~bayes_activeeval.stratified_proposal` on a lazy pool.

    The score strata are found exactly as in memory (:func:`lazy_score_strata`); the stratum
    masses ``P_h`` (and for Neyman allocation ``Σ_h p u``, with ``u`` the integrand of Sawade
    (2012), Thm. 4.1) are per-chunk sums; ``q(x) = a_h p(x)/P_h`` is recomputed per chunk.
    ``strata`` must be a number of strata and the scores the pool's (``scores=None``).

    Parameters
    ----------
    pool : LazyPool
    measure : str or Measure, optional
        The measure whose ``u(x)`` the ``"neyman"`` allocation uses; not needed for
        ``"proportional"``.
    strata : int, optional
        Number of strata, at least 1 (default ``10``); a label per item is not supported on a
        lazy pool.
    allocation : {"proportional", "neyman"}, optional
        The share of draws per stratum (default ``"proportional"``).
    model : str, optional
        Which model of the pool (default ``None``: the only one): its default scores are
        stratified (:func:`~bayes_activeeval.proposals.default_scores`) and, for ``"neyman"``,
        its predictions and probabilities enter ``u(x)``.
    scores : None
        Must be ``None`` (the pool's own scores).
    belief : None, array-like or callable, optional
        The belief ``π`` of ``u(x)`` for ``"neyman"``, as for :func:`optimal_proposal` (default
        ``None``: the model's probabilities).
    method : {"quantile", "csf"}, optional
        Equal-size strata, or the cumulative-sqrt(F) rule (default ``"quantile"``).
    mix : float, optional
        Defensive mixture with ``p`` (default ``0.0``).

    Returns
    -------
    LazyProposal
        ``kind="stratified"``; ``info`` holds ``allocation`` (``a_h``), ``stratum_mass``
        (``P_h``) and ``mix``, and for ``"neyman"`` ``risk``; ``edges`` has the strata's
        score boundaries and ``support`` the number of items with ``q > 0``.
    """
    if allocation not in ("proportional", "neyman"):
        raise ValueError(f"allocation must be 'proportional' or 'neyman', got {allocation!r}")
    mix = check_fraction(mix, "mix", allow_one=True)
    if scores is not None:
        raise ValueError(
            "on a lazy pool stratified_proposal takes a number of strata and stratifies on the "
            "pool's own scores (scores=None)"
        )
    if isinstance(strata, bool) or not isinstance(strata, (int, np.integer)):
        if np.ndim(strata) == 0:
            raise ValueError(f"strata must be a positive number of strata, got {show(strata)}")
        raise ValueError(
            f"on a lazy pool strata must be a number of strata, not a label per item (got an "
            f"array of shape {np.shape(strata)}); the pool's own scores are stratified"
        )
    if strata < 1:
        raise ValueError(f"strata must be a positive number of strata, got {show(strata)}")
    pool.check_belief(belief)
    model = pool.check_model(model)
    inner, lo, hi = lazy_score_strata(pool, int(strata), method=method, model=model)
    prm0 = _StrataParams(
        model, inner, np.arange(inner.size + 1), np.zeros(0), np.zeros(0), 0.0, 1.0
    )
    sums = pool.map_chunks(_strata_labels_chunk, model, inner)
    counts = np.sum([s[0] for s in sums], axis=0)
    used = np.flatnonzero(counts > 0)
    relabel = np.zeros(inner.size + 1, dtype=np.int64)
    relabel[used] = np.arange(used.size)
    H = used.size
    P = np.sum([s[1] for s in sums], axis=0)[used]
    full_edges = np.concatenate([[lo], inner, [hi]])
    edges = np.concatenate([full_edges[used], [hi]])
    info: dict[str, Any] = {}
    if allocation == "proportional":
        a = P.copy()
    else:
        if measure is None:
            raise ValueError("allocation='neyman' needs a measure")
        opt = optimal_proposal(  # the in-memory Neyman allocation's u: the fixed 1e-6 floor
            pool,
            measure,
            model=model,
            belief=belief,
            mix=0.0,
            costs=False,
            belief_floor=DEFAULT_BELIEF_FLOOR,
        )
        prm0 = replace(prm0, relabel=relabel)
        pu = np.sum(pool.map_chunks(_strat_u_chunk, prm0, opt.params, H), axis=0)
        a = neyman_allocation(P, pu)
        info = {"risk": opt.info["risk"]}
    a = a / a.sum()
    prm = _StrataParams(model, inner, relabel, a, P, 0.0, 1.0)
    sums = pool.map_chunks(_strat_mass_chunk, prm, mix > 0)
    chunk_raw = np.array([m for m, _ in sums])
    support = int(sum(c for _, c in sums))
    total = float(chunk_raw.sum())
    prm = replace(prm, mix=mix, total=total)
    if pool.has_uniform_weights:
        P_k = pool.chunk_sizes / pool.n_items
    else:
        P_k = np.array([m for m, _ in pool.map_chunks(passive_sums)])
    mass = mix_proposal(chunk_raw, P_k, mix, total=total)
    info.update(
        {"allocation": a, "stratum_mass": P, "edges": edges, "mix": mix, "support": support}
    )
    return LazyProposal(pool, "stratified", _strat_q, prm, mass, info)
