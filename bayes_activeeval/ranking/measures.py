"""Ranking measures per query — DCG, ERR, NDCG@k, precision@k — as generalized measures.

The pool-level target is ``G = g(R)``, ``R = E_x[ℓ(r(x), y)]`` over the pool's queries
(Sawade (2012), Eq. 6.4): DCG and ERR are plain risks (``ℓ`` the per-query value, ``g`` the
identity); NDCG@k and precision@k are ratio measures ``ℓ = (numerator, denominator)``,
``g = R₁/R₂`` (the generalized-measure form of Marchant & Rubinstein (2021), Def. 1):

- NDCG@k: ``ℓ = (DCG@k, IDCG@k)``, so ``G = Σ_x DCG@k(x) / Σ_x IDCG@k(x)`` — the ratio of the
  mean gain to the mean ideal gain (queries weighted by their ideal gain). This is *not* the mean
  of per-query ratios that trec_eval or ranx report; :func:`query_values` gives those per query.
- precision@k: ``ℓ = (relevant in the top k, k)``, which equals the mean of per-query
  precision@k (trec_eval's definition: a list shorter than ``k`` counts the missing ranks as
  non-relevant).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..measures import Measure
from . import recursions as mo
from .pool import RankingPool

__all__ = ["RankingMeasure", "get", "query_losses", "query_values"]

_NAME = re.compile(r"^(dcg|err|ndcg|precision)(?:@(\d+))?$")


@dataclass(frozen=True)
class RankingMeasure:
    """A per-query ranking measure.

    Parameters
    ----------
    kind : {"dcg", "err", "ndcg", "precision"}
        The measure: discounted cumulative gain, expected reciprocal rank, normalized DCG or
        precision.
    k : int, optional
        Cut-off rank, a whole number ``>= 1`` (default ``None``: the whole list; precision
        requires one).
    threshold : int, optional
        Lowest grade counted as relevant by precision@k, a whole number ``>= 0`` (default 1).

    Raises
    ------
    ValueError
        An unknown ``kind``, a ``k`` or ``threshold`` that is not a whole number in range (a
        bool, a string or a fraction), or precision without ``k``.

    Attributes
    ----------
    kind : {"dcg", "err", "ndcg", "precision"}
    k : int or None
        Cut-off (``None``: the whole list; required for precision).
    threshold : int
        Lowest grade counted as relevant by precision@k (default 1).
    """

    kind: str
    k: int | None = None
    threshold: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("dcg", "err", "ndcg", "precision"):
            raise ValueError(
                f"measure must be 'dcg', 'err', 'ndcg' or 'precision' (optionally '@k'), got {self.kind!r}"
            )
        if self.k is not None:
            if _whole(self.k) is None or self.k < 1:
                raise ValueError(f"the cut-off k must be a whole number >= 1, got {self.k!r}")
            object.__setattr__(self, "k", _whole(self.k))
        if self.kind == "precision" and self.k is None:
            raise ValueError("precision needs a cut-off: 'precision@k'")
        if _whole(self.threshold) is None or self.threshold < 0:
            raise ValueError(
                f"threshold (the lowest grade counted as relevant) must be a whole number >= 0, "
                f"got {self.threshold!r}"
            )
        object.__setattr__(self, "threshold", _whole(self.threshold))

    @property
    def name(self) -> str:
        return self.kind if self.k is None else f"{self.kind}@{self.k}"

    @property
    def is_ratio(self) -> bool:
        return self.kind in ("ndcg", "precision")

    @property
    def dim(self) -> int:
        return 2 if self.is_ratio else 1

    def measure(self) -> Measure:
        """The package :class:`~bayes_activeeval.Measure` (``g`` and its Jacobian) for the
        estimators; its loss is computed from grade vectors by :func:`query_losses`."""

        def loss(y, view):  # pragma: no cover - never called: losses come from query_losses
            raise NotImplementedError("ranking losses are computed by ranking.query_losses")

        if not self.is_ratio:
            hi = 1.0 if self.kind == "err" else np.inf
            return Measure(
                self.name,
                loss,
                components=(self.name,),
                greater_is_better=True,
                bounds=(0.0, hi),
            )

        def g(R):
            return np.array([R[0] / R[1]])

        def jac(R):
            return np.array([[1.0 / R[1], -R[0] / R[1] ** 2]])

        return Measure(
            self.name,
            loss,
            g,
            jac,
            components=("numerator", "denominator"),
            greater_is_better=True,
            scale_invariant=True,
            bounds=(0.0, 1.0),
        )


def _whole(value) -> int | None:
    """``value`` as an ``int`` if it is a whole number (an integer, or a float with no
    fractional part), else ``None`` (a bool, a string, NaN or a fraction)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        return None
    if not np.isfinite(value) or value != int(value):
        return None
    return int(value)


def get(measure: str | RankingMeasure) -> RankingMeasure:
    """A :class:`RankingMeasure` from a name: ``"dcg"``, ``"dcg@10"``, ``"err"``, ``"err@5"``,
    ``"ndcg@10"``, ``"precision@10"``.

    Parameters
    ----------
    measure : str or RankingMeasure
        ``"dcg"``, ``"err"``, ``"ndcg"`` or ``"precision"``, optionally with a cut-off ``"@k"``
        (required for precision); case and surrounding spaces are ignored. A
        :class:`RankingMeasure` is returned as it is.

    Returns
    -------
    RankingMeasure
        For a name, with ``threshold=1``.
    """
    if isinstance(measure, RankingMeasure):
        return measure
    if not isinstance(measure, str):
        raise TypeError(f"measure must be a name or a RankingMeasure, got {measure!r}")
    hit = _NAME.match(measure.strip().lower())
    if hit is None:
        raise ValueError(
            f"measure={measure!r} is not a ranking measure; use 'dcg', 'err', 'dcg@k', 'err@k', "
            "'ndcg@k' or 'precision@k'"
        )
    kind, k = hit.group(1), hit.group(2)
    return RankingMeasure(kind, None if k is None else int(k))


# ------------------------------------------------------------------------------------------------
# per-query values from grades
# ------------------------------------------------------------------------------------------------
def query_losses(
    pool: RankingPool, measure: RankingMeasure, model: str, grades: np.ndarray, queries: np.ndarray
) -> np.ndarray:
    """``ℓ(r(x), y)`` (n, d) of ``model`` for the queries at pool positions ``queries`` with the
    grades ``grades`` (m, D) (Sawade (2012), Eq. 6.1-6.2).

    Parameters
    ----------
    pool : RankingPool
        The queries, their documents and the rankers' rankings.
    measure : RankingMeasure
        The measure (a parsed one: see :func:`get`).
    model : str
        The ranker whose ranking is scored.
    grades : ndarray of int (m, D)
        A grade per query of the pool and document slot (``RankingPool.grade_matrix``); negative
        entries (ungraded) count as grade 0.
    queries : array-like of int (n,)
        Pool positions of the queries to score (repeats allowed).

    Returns
    -------
    ndarray (n, d)
        One row per entry of ``queries``: ``d = 1`` (the DCG or ERR) for DCG and ERR, ``d = 2``
        (numerator, denominator) for NDCG (DCG@k, IDCG@k) and precision@k (relevant documents
        in the top ``k``, ``k``).
    """
    q = np.asarray(queries, dtype=np.int64)
    y = np.where(grades[q] >= 0, grades[q], 0).astype(float)
    pos = pool.truncated_positions(model, measure.k)[q]
    kind = measure.kind
    if kind in ("dcg", "ndcg"):
        dcg = np.sum(mo.dcg_gain(y) * mo.discounts(pos, None), axis=1)
        if kind == "dcg":
            return dcg[:, None]
        return np.stack([dcg, ideal_dcg(y, pool.n_docs[q], measure.k)], axis=1)
    if kind == "precision":
        hits = np.sum((pos > 0) & (y >= measure.threshold), axis=1).astype(float)
        return np.stack([hits, np.full(hits.shape, float(measure.k))], axis=1)
    order = pool.order(model, measure.k)[q]
    kap = mo.gather(mo.err_kappa(y, pool.max_grade), order)
    L = order.shape[1]
    log_stop = np.cumsum(np.log1p(-kap), axis=1) - np.log1p(-kap)
    err = np.sum(kap * np.exp(log_stop) / np.arange(1, L + 1), axis=1)
    return err[:, None]


def ideal_dcg(y: np.ndarray, n_docs: np.ndarray, k: int | None) -> np.ndarray:
    """IDCG@k: the DCG of the query's documents sorted by grade (all graded documents)."""
    D = y.shape[1]
    real = np.arange(D)[None, :] < np.asarray(n_docs)[:, None]
    srt = -np.sort(-np.where(real, y, -1.0), axis=1)
    gains = np.where(srt >= 0, mo.dcg_gain(np.maximum(srt, 0.0)), 0.0)
    ranks = np.arange(1, D + 1)
    disc = 1.0 / np.log2(ranks + 1.0)
    if k is not None:
        disc = np.where(ranks <= k, disc, 0.0)
    return gains @ disc


def query_values(
    pool: RankingPool, measure: str | RankingMeasure, model: str, grades: np.ndarray
) -> np.ndarray:
    """The per-query value (m,) for fully graded queries: DCG, ERR, NDCG = DCG@k/IDCG@k
    (0 when IDCG is 0), precision@k. ``grades`` is (m, D).

    Parameters
    ----------
    pool : RankingPool
        The queries, their documents and the rankers' rankings.
    measure : str or RankingMeasure
        The measure, by name (:func:`get`) or parsed.
    model : str
        The ranker whose ranking is scored.
    grades : ndarray of int (m, D)
        A grade for every document of every query of the pool (``RankingPool.grade_matrix``).

    Returns
    -------
    ndarray (m,)
        The measure's value on each query, in pool order.
    """
    rm = get(measure)
    L = query_losses(pool, rm, pool.check_model(model), grades, np.arange(pool.n_queries))
    if not rm.is_ratio:
        return L[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(L[:, 1] > 0, L[:, 0] / L[:, 1], 0.0)


# ------------------------------------------------------------------------------------------------
# moments under the relevance model
# ------------------------------------------------------------------------------------------------
def loss_moments(
    pool: RankingPool,
    measure: RankingMeasure,
    models: tuple[str, ...],
    relevance: np.ndarray,
    *,
    n_samples: int = 256,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean (m, d) and second moments (m, d, d) of the stacked losses of ``models``.

    Exact for DCG, ERR (Sawade (2012), Thm. 6.1, App. A.1) and precision@k; NDCG@k (whose
    ideal DCG is a sort of the grades) by Monte Carlo over ``n_samples`` grade vectors.
    """
    kind, k = measure.kind, measure.k
    r = len(models)
    if kind == "dcg":
        W = [mo.discounts(pool.truncated_positions(m, k), None) for m in models]
        return mo.dcg_moments(relevance, W)
    if kind == "precision":
        rel = relevance[..., measure.threshold :].sum(axis=-1)
        hit = [(pool.truncated_positions(m, k) > 0).astype(float) for m in models]
        H = np.stack(hit, axis=-1)
        mean_h = np.einsum("md,mdr->mr", rel, H)
        cov = np.einsum("md,mdr,mds->mrs", rel * (1.0 - rel), H, H)
        sec_h = cov + mean_h[:, :, None] * mean_h[:, None, :]
        kk = float(k)
        mean = np.zeros((pool.n_queries, 2 * r))
        sec = np.zeros((pool.n_queries, 2 * r, 2 * r))
        mean[:, 0::2] = mean_h
        mean[:, 1::2] = kk
        sec[:, 0::2, 0::2] = sec_h
        sec[:, 0::2, 1::2] = kk * mean_h[:, :, None]
        sec[:, 1::2, 0::2] = kk * mean_h[:, None, :]
        sec[:, 1::2, 1::2] = kk * kk
        return mean, sec
    if kind == "err":
        mean = np.zeros((pool.n_queries, r))
        sec = np.zeros((pool.n_queries, r, r))
        for i, m in enumerate(models):
            mean[:, i], sec[:, i, i] = mo.err_mean_second(
                relevance, pool.order(m, k), pool.max_grade
            )
        for i in range(r):
            for j in range(i + 1, r):
                x = mo.err_cross(
                    relevance,
                    pool.order(models[i], k),
                    pool.order(models[j], k),
                    pool.truncated_positions(models[i], k),
                    pool.truncated_positions(models[j], k),
                    pool.max_grade,
                )
                sec[:, i, j] = sec[:, j, i] = x
        return mean, sec
    return monte_carlo_moments(pool, measure, models, relevance, n_samples, rng)


def monte_carlo_moments(
    pool: RankingPool,
    measure: RankingMeasure,
    models: tuple[str, ...],
    relevance: np.ndarray,
    n_samples: int,
    rng: np.random.Generator | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and second moments of the stacked losses by sampling grade vectors (any measure)."""
    rng = np.random.default_rng(rng)
    m, D, K = relevance.shape
    d = measure.dim * len(models)
    mean = np.zeros((m, d))
    sec = np.zeros((m, d, d))
    cdf = np.cumsum(relevance, axis=-1)
    q = np.arange(m)
    for _ in range(n_samples):
        u = rng.random((m, D, 1))
        y = np.minimum((u > cdf).sum(axis=-1), K - 1)
        L = np.concatenate([query_losses(pool, measure, mm, y, q) for mm in models], axis=1)
        mean += L
        sec += L[:, :, None] * L[:, None, :]
    return mean / n_samples, sec / n_samples
