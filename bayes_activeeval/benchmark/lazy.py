"""Benchmark designs on a lazy pool: strata, allocation and the sample in stratum-level sums.

:func:`~bayes_activeeval.benchmark.design` on a :class:`~bayes_activeeval.lazy.LazyPool` returns a
:class:`LazyBenchmarkDesign`. Every quantity the design needs is a per-stratum sum (stratum sizes,
the guessed positives ``Σ s``, the influences ``Σ a`` of the square-root rule), so it takes three
passes over the chunks — the score range, the cumulative-sqrt(F) histogram of ``logit(s)``
(Dalenius & Hodges; Marchant & Rubinstein (2021), Sec. 4) and the per-stratum sums — and gives the
in-memory design's strata and allocation exactly. The stratified simple random sample then draws
``n_h`` positions in each stratum and reads only the chunks they fall in.

Supported: the guess from the pool's binary probabilities, the stratified scheme. Poisson
sampling (its inclusion probabilities are per item and solved for iteratively), guesses given as
arrays or scores and user strata need an in-memory pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from .._validation import check_count, check_fraction, check_rng
from ..lazy import LazyPool, lazy_score_strata
from .design import (
    BenchmarkSample,
    allocate,
    allocation_target,
    check_min_per_stratum,
    influence_coefficient,
    positives_cv,
    stratum_influence,
    warn_positives_cv,
)
from .guidelines import parse_targets, scalar_rate

__all__ = ["LazyBenchmarkDesign", "lazy_design"]


def _guess_chunk(cp, offset, model) -> np.ndarray:
    """The guess ``s_i`` on a chunk: the model's positive-class probability."""
    return cp.view(model).prob[:, cp.pos]


def _logit_guess(cp, offset, model) -> np.ndarray:
    """``logit(s)``, clipped as the in-memory design does: what the strata are cut on."""
    return special.logit(np.clip(_guess_chunk(cp, offset, model), 1e-9, 1 - 1e-9))


def _guess_sums(cp, offset, model):
    s = _guess_chunk(cp, offset, model)
    hard = bool(np.all((s == 0.0) | (s == 1.0)))
    return float(s.sum()), hard


def _chunk_strata(cp, offset, model, inner, relabel) -> np.ndarray:
    raw = np.searchsorted(inner, _logit_guess(cp, offset, model), side="right")
    return relabel[raw]


def _stratum_sums(cp, offset, model, inner, relabel, H):
    """Per stratum of a chunk: items and ``Σ s`` (the influences follow from them)."""
    h = _chunk_strata(cp, offset, model, inner, relabel)
    s = _guess_chunk(cp, offset, model)
    return np.bincount(h, minlength=H), np.bincount(h, s, H)


def _raw_counts(cp, offset, model, inner):
    raw = np.searchsorted(inner, _logit_guess(cp, offset, model), side="right")
    return np.bincount(raw, minlength=inner.size + 1)


def _pick_chunk(cp, offset, model, inner, relabel, wanted: dict):
    """Pool positions of the ``r``-th items of stratum ``h`` in this chunk, ``wanted[h] = r``."""
    h = _chunk_strata(cp, offset, model, inner, relabel)
    out = []
    for stratum, ranks in wanted.items():
        pos = np.flatnonzero(h == stratum)
        out.append(pos[np.asarray(ranks, dtype=np.int64)] + offset)
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


@dataclass(frozen=True, repr=False)
class LazyBenchmarkDesign:
    """A stratified benchmark design over a lazy pool (see :func:`lazy_design`).

    Holds only stratum-level quantities; the per-item ``strata``, ``inclusion`` and ``guess`` are
    lazy dask arrays. :meth:`sample` reads only the chunks holding the sampled items.

    Parameters
    ----------
    pool : LazyPool
        The binary pool on dask the design samples from.
    model : str
        The model whose positive-class probability is the guess ``s``.
    inner : ndarray
        Sorted inner boundaries of the raw strata of ``logit(s)`` (an item's raw stratum is
        ``searchsorted(inner, logit(s), "right")``).
    relabel : ndarray of int
        Maps each raw stratum (``inner.size + 1`` of them) to its stratum in ``0..H-1``.
    allocation : ndarray (H,) of int
        Labels per stratum.
    stratum_sizes : ndarray (H,) of int
        Pool items per stratum, ``N_h``.
    chunk_counts : ndarray (chunks, H) of int
        Items of each stratum in each chunk.
    stratum_guess : ndarray (H,)
        Mean guessed positive probability per stratum.
    influence_sums : ndarray (targets, H)
        ``Σ`` over each stratum of each target's per-item influence (in the order of
        ``targets``; used by :meth:`predicted_variance_ratio`).
    prevalence : float
        ``pi``, the pool's positive rate used for planning.
    budget : int
        Labels to spend.
    scheme : {"stratified"}
        The sampling scheme (the only one on a lazy pool).
    method : {"sqrt", "paper", "proportional", "equal"}
        The allocation method.
    targets : dict
        Target measure -> weight.
    rule_rate : float
        ``rbar``, the positive rate of the rules planned for.
    defensive : float
        ``λ``, the weight of proportional allocation mixed into the allocation, in [0, 1).

    Attributes
    ----------
    allocation, stratum_sizes : ndarray (H,)
        Labels and pool items per stratum.
    chunk_counts : ndarray (chunks, H)
        Items of each stratum in each chunk.
    stratum_guess : ndarray (H,)
        Mean guessed positive probability per stratum.
    prevalence, budget, scheme, method, targets, rule_rate, defensive
        As for :class:`~bayes_activeeval.benchmark.BenchmarkDesign`.
    """

    pool: LazyPool
    model: str
    inner: np.ndarray
    relabel: np.ndarray
    allocation: np.ndarray
    stratum_sizes: np.ndarray
    chunk_counts: np.ndarray
    stratum_guess: np.ndarray
    influence_sums: np.ndarray  # (targets, H)
    prevalence: float
    budget: int
    scheme: str
    method: str
    targets: dict
    rule_rate: float
    defensive: float

    @property
    def n_items(self) -> int:
        return self.pool.n_items

    @property
    def n_strata(self) -> int:
        return len(self.stratum_sizes)

    @property
    def strata(self):
        """Stratum of every item, as a lazy dask array."""
        return self.pool.column(
            None, _chunk_strata, self.model, self.inner, self.relabel, dtype=np.int64
        )

    @property
    def inclusion(self):
        """Inclusion probability of every item, as a lazy dask array."""
        return (self.allocation / self.stratum_sizes)[self.strata]

    @property
    def guess(self):
        """The guessed positive probability of every item, as a lazy dask array."""
        return self.pool.column(None, _guess_chunk, self.model)

    def sample(self, rng: Any = None) -> BenchmarkSample:
        """A stratified simple random sample without replacement: ``allocation[h]`` distinct
        positions among the ``N_h`` items of each stratum (``Generator.choice``), mapped to pool
        items through the per-chunk stratum counts; only the chunks holding them are read."""
        rng = check_rng(rng)
        pool = self.pool
        start = np.vstack(
            [np.zeros((1, self.n_strata), dtype=np.int64), np.cumsum(self.chunk_counts, axis=0)]
        )
        wanted: list[dict] = [{} for _ in range(pool.n_chunks)]
        for h in range(self.n_strata):
            n_h = int(self.allocation[h])
            if n_h == 0:
                continue
            ranks = np.sort(rng.choice(int(self.stratum_sizes[h]), size=n_h, replace=False))
            chunk = np.searchsorted(start[1:, h], ranks, side="right")
            for j in np.unique(chunk).tolist():
                wanted[j][h] = ranks[chunk == j] - start[j, h]
        ks = [j for j in range(pool.n_chunks) if wanted[j]]
        tasks = [
            pool.chunk_task(j, _pick_chunk, self.model, self.inner, self.relabel, wanted[j])
            for j in ks
        ]
        idx = np.sort(np.concatenate(pool.compute(tasks))) if ks else np.empty(0, np.int64)
        return self.sample_at(idx)

    def sample_at(self, idx: np.ndarray) -> BenchmarkSample:
        """The sample made of the (distinct, valid) pool positions ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        pool = self.pool
        chunk = pool.chunk_of(idx)
        h = np.empty(idx.size, dtype=np.int64)
        ks = np.unique(chunk).tolist()
        tasks = [
            pool.chunk_task(j, _chunk_strata, self.model, self.inner, self.relabel) for j in ks
        ]
        for j, hj in zip(ks, pool.compute(tasks), strict=True):
            sel = chunk == j
            h[sel] = hj[idx[sel] - pool.offsets[j]]
        incl = (self.allocation / self.stratum_sizes)[h]
        return BenchmarkSample(idx, incl, 1.0 / incl, h, self)

    def predicted_variance_ratio(self) -> dict[str, float]:
        """As :meth:`BenchmarkDesign.predicted_variance_ratio`, from the stratum sums.

        ``Σ_h W_h² ā_h / n_h`` (Valizadegan et al., Eqs. 3.5, 3.9, 3.11 in design-based form;
        see :func:`~bayes_activeeval.benchmark.design.target_influence`) against ``c_t s̄(1 −
        s̄)/n`` for simple random sampling.

        Returns
        -------
        dict
            Target -> predicted variance ratio.
        """
        n = self.budget
        W = self.stratum_sizes / self.n_items
        alloc = np.maximum(self.allocation, 1)
        sb = float((self.stratum_guess * self.stratum_sizes).sum() / self.n_items)
        out = {}
        for k, t in enumerate(self.targets):
            srs = influence_coefficient(t, self.prevalence, self.rule_rate) * sb * (1 - sb) / n
            abar = self.influence_sums[k] / self.stratum_sizes
            var = (W**2 * abar / alloc).sum()
            out[t] = float(var / srs) if srs > 0 else float("nan")
        return out

    def summary(self) -> pd.DataFrame:
        """Per-stratum table, as :meth:`BenchmarkDesign.summary`."""
        sg = self.stratum_guess * self.stratum_sizes
        return pd.DataFrame(
            {
                "pool_items": self.stratum_sizes,
                "labels": self.allocation,
                "inclusion": self.allocation / self.stratum_sizes,
                "mean_guess": self.stratum_guess,
                "expected_positives_labeled": sg * self.allocation / self.stratum_sizes,
            },
            index=pd.RangeIndex(self.n_strata, name="stratum"),
        )

    def __repr__(self) -> str:
        s = self.summary()
        exp_pos = float(s["expected_positives_labeled"].sum())
        return (
            f"LazyBenchmarkDesign(scheme={self.scheme!r}, method={self.method!r}, "
            f"budget={self.budget}, pool={self.n_items}, strata={self.n_strata}, "
            f"chunks={self.pool.n_chunks})\n  prevalence {self.prevalence:.4g}; expected labeled "
            f"positives {exp_pos:.1f}\n" + s.to_string(float_format=lambda v: f"{v:.4g}")
        )


def lazy_design(
    pool: LazyPool,
    *,
    budget: int,
    targets: Any = ("sensitivity", "specificity", "precision"),
    guess: Any = None,
    method: str = "sqrt",
    scheme: str = "stratified",
    n_strata: int | None = None,
    strata: Any = None,
    prevalence: float | None = None,
    rule_rate: float | None = None,
    guess_precision: float = 0.5,
    model: str | None = None,
    defensive: float = 0.1,
    min_per_stratum: int = 2,
) -> LazyBenchmarkDesign:
    """:func:`~bayes_activeeval.benchmark.design` on a lazy pool (same parameters and rules).

    The strata are the in-memory design's (``n_strata`` cumulative-sqrt(F) strata of
    ``logit(s)``), found exactly from additive histograms; sizes, ``Σ s`` and the influences of
    the square-root rule (Cochran (1977), Sec. 5.5) are per-stratum sums over the chunks; the
    allocation is the in-memory one.

    Parameters
    ----------
    pool : LazyPool
        A pool on dask with binary probabilities: its model's positive-class probability is the
        guess (a hard 0/1 guess is refused).
    budget : int
        Labels to spend, at most the pool size.
    targets : str, sequence or mapping, optional
        ``"sensitivity"``, ``"specificity"``, ``"precision"`` (weights via a mapping; default
        all three).
    guess : None, optional
        Must be ``None`` (a given guess needs an in-memory pool).
    method : {"sqrt", "paper", "proportional", "equal"}, optional
        The allocation method (default ``"sqrt"``), as for
        :func:`~bayes_activeeval.benchmark.design`.
    scheme : {"stratified"}, optional
        Must be ``"stratified"`` (the default; Poisson sampling needs an in-memory pool).
    n_strata : int, optional
        Score strata of ``logit(s)`` (default ``budget // 25`` clipped to 2..8).
    strata : None, optional
        Must be ``None`` (user strata need an in-memory pool).
    prevalence : float, optional
        ``pi``; default the mean guess.
    rule_rate : float, optional
        ``rbar``, the positive rate of the rules planned for (default ``pi``).
    guess_precision : float, optional
        Unused: it applies to a hard 0/1 guess, which a lazy pool refuses.
    model : str, optional
        Which model of a multi-model pool holds the guess.
    defensive : float, optional
        Mixing weight ``λ`` with proportional allocation, in [0, 1) (default 0.1).
    min_per_stratum : int, optional
        Minimum labels per stratum (default 2; at least 1, as for the in-memory design).

    Returns
    -------
    LazyBenchmarkDesign
    """
    if method not in ("sqrt", "paper", "proportional", "equal"):
        raise ValueError(
            f"method must be 'sqrt', 'paper', 'proportional' or 'equal', got {method!r}"
        )
    if scheme != "stratified":
        raise NotImplementedError(
            "on a lazy pool benchmark.design supports scheme='stratified' (Poisson inclusion "
            "probabilities are per item)"
        )
    if guess is not None or strata is not None:
        raise NotImplementedError(
            "on a lazy pool benchmark.design takes the guess from the pool's probabilities; "
            "guess= and strata= need an in-memory pool"
        )
    if not (pool.has_probs() and pool.n_classes == 2):
        raise ValueError(
            "the pool has no binary probs to guess the class from; a lazy design needs them"
        )
    model = pool.check_model(model)
    N = pool.n_items
    budget = check_count(budget, "budget")
    if budget > N:
        raise ValueError(f"budget must be <= the pool size {N}, got {budget!r}")
    tw = parse_targets(targets)
    lam = check_fraction(defensive, "defensive")
    mps = check_min_per_stratum(min_per_stratum, scheme)
    sums = pool.map_chunks(_guess_sums, model)
    if all(h for _, h in sums):
        raise NotImplementedError("a hard (0/1) guess needs an in-memory pool")
    pi = (
        float(sum(s for s, _ in sums) / N)
        if prevalence is None
        else scalar_rate(prevalence, "prevalence")
    )
    rbar = pi if rule_rate is None else scalar_rate(rule_rate, "rule_rate")
    k = int(np.clip(budget // 25, 2, 8)) if n_strata is None else check_count(n_strata, "n_strata")
    spec = (_logit_guess, model)
    inner, _, _ = lazy_score_strata(pool, k, method="csf", model=spec)
    raw = np.sum(pool.map_chunks(_raw_counts, model, inner), axis=0)
    used = np.flatnonzero(raw > 0)
    relabel = np.zeros(inner.size + 1, dtype=np.int64)
    relabel[used] = np.arange(used.size)
    H = used.size
    names = list(tw)
    per = pool.map_chunks(_stratum_sums, model, inner, relabel, H)
    chunk_counts = np.stack([c for c, _ in per])
    sizes = chunk_counts.sum(axis=0)
    exp_pos = np.sum([g for _, g in per], axis=0)
    # Σ over each stratum of each target's influence centred on the stratum's mean guess:
    # c_t N_h sbar_h (1 - sbar_h), exactly the in-memory design's sums
    infl = np.array([stratum_influence(t, exp_pos, sizes, pi, rbar) for t in names])
    a_h = (np.array([tw[t] for t in names])[:, None] * infl).sum(axis=0)

    target = allocation_target(
        method,
        sizes,
        a_h,
        exp_pos,
        budget=budget,
        prevalence=pi,
        targets=tw,
        rule_rate=None if rule_rate is None else rbar,
        defensive=lam,
    )
    alloc = allocate(sizes, target, budget, mps)
    warn_positives_cv(positives_cv(sizes, alloc, exp_pos), method, lam, mps)
    return LazyBenchmarkDesign(
        pool=pool,
        model=model,
        inner=inner,
        relabel=relabel,
        allocation=alloc,
        stratum_sizes=sizes,
        chunk_counts=chunk_counts,
        stratum_guess=exp_pos / sizes,
        influence_sums=infl,
        prevalence=pi,
        budget=budget,
        scheme=scheme,
        method=method,
        targets=tw,
        rule_rate=rbar,
        defensive=lam,
    )
