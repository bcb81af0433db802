"""A synthetic LETOR-like ranking pool: graded queries, two rankers, a relevance model, costs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from .._validation import check_count, check_rng
from .measures import query_values
from .pool import RankingPool

__all__ = ["RankingData", "make_ranking_pool", "ordered_logistic_probs"]

#: Cut-points of the ordered logistic that give MSLR-WEB30k-like grade frequencies
#: (about 52% grade 0, 32% 1, 13% 2, 2% 3, 1% 4).
CUTPOINTS = np.array([0.0, 2.0, 4.0, 5.5])


def ordered_logistic_probs(eta: np.ndarray, cutpoints: np.ndarray) -> np.ndarray:
    """``P(y = k) = σ(η − c_{k−1}) − σ(η − c_k)`` (``c_{−1} = −∞``, ``c_{K−1} = ∞``), shape (..., K).

    ``cutpoints`` (K−1,) or broadcastable against ``η[..., None]``.

    Parameters
    ----------
    eta : array-like
        Linear predictor ``η`` (any shape).
    cutpoints : array-like (K−1,)
        Increasing cut-points ``c_0 < … < c_{K−2}`` (e.g. :data:`CUTPOINTS`), or an array
        broadcastable against ``η[..., None]``.

    Returns
    -------
    ndarray (..., K)
        The probability of each of the ``K`` ordered grades, clipped to ``[0, 1]``.
    """
    eta = np.asarray(eta, dtype=float)[..., None]
    c = np.asarray(cutpoints, dtype=float)
    above = special.expit(eta - c)  # P(y > k) for k = 0..K-2 (cut-points broadcast)
    ones = np.ones((*above.shape[:-1], 1))
    zeros = np.zeros((*above.shape[:-1], 1))
    cum = np.concatenate([ones, above, zeros], axis=-1)
    return np.clip(cum[..., :-1] - cum[..., 1:], 0.0, 1.0)


@dataclass
class RankingData:
    """A synthetic ranking pool with its true grades.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per (query, document) with the rankers' ranks and scores, the relevance model's
        grade probabilities, the query cost and the true grade.
    pool : RankingPool
        The ranking pool built from ``frame``.
    grades : ndarray of int (m, D)
        True grades aligned with ``pool`` (``-1`` padding past each query's documents).

    Attributes
    ----------
    frame : pandas.DataFrame
        Long format: ``qid, doc, rank_a, rank_b, score_a, score_b, p0..p4, cost, grade``.
    pool : RankingPool
        Built from ``frame`` with the relevance columns and costs.
    grades : ndarray (m, D)
        The true grades aligned with ``pool`` (``-1`` padding).
    """

    frame: pd.DataFrame
    pool: RankingPool
    grades: np.ndarray

    def labeler(self, query_ids: Any) -> dict[Any, dict[Any, int]]:
        """``{qid: {doc: grade}}`` for the given queries (a deterministic oracle)."""
        idx = self.pool.query_index(query_ids)
        return {
            self.pool.query_ids[q]: {
                d: int(self.grades[q, j]) for j, d in enumerate(self.pool.doc_ids[q])
            }
            for q in idx
        }

    def true_value(self, measure: Any, model: str) -> float:
        """The measure of ``model`` on the whole pool with the true grades."""
        from .measures import get, query_losses

        rm = get(measure)
        if not rm.is_ratio:
            return float(query_values(self.pool, rm, model, self.grades).mean())
        L = query_losses(self.pool, rm, model, self.grades, np.arange(self.pool.n_queries))
        return float(L[:, 0].sum() / L[:, 1].sum())


def make_ranking_pool(
    n_queries: int = 2000,
    *,
    min_docs: int = 10,
    max_docs: int = 100,
    model_noise: float = 1.0,
    ranker_noise: tuple[float, float] = (1.0, 1.2),
    shared_noise: float = 1.0,
    cost_power: float = 1.0,
    changed: float = 1.0,
    rng: Any = None,
) -> RankingData:
    """A LETOR-like pool: queries with 10-100 documents graded 0-4, two rankers, costs.

    Each document has a latent relevance ``t = u_q + e`` (query effect ``u_q ∼ N(0, 1.5²)``,
    ``e ∼ N(0, 2²)``); its grade is ordered-logistic in ``t`` (cut-points :data:`CUTPOINTS`). The
    relevance model's ``P(grade = k)`` is the same ordered logistic at ``t + N(0, model_noise²)``
    (a good but imperfect model). Both rankers sort a query's documents by
    ``t + ε_shared + ε_ranker`` (``N(0, shared_noise²)`` and ``N(0, ranker_noise[j]²)``); with
    ``changed < 1`` ranker ``b`` is a new version of ``a`` that re-ranks only that fraction of the
    queries (on the others it returns ``a``'s list).
    Documents have log-normal lengths; a query costs ``Σ_docs log(1 + length)`` raised to
    ``cost_power`` and normalized to mean 1 (Sawade (2012), Sec. 6.4: costs logarithmic in the
    document length, growing with the list).

    Parameters
    ----------
    n_queries : int
        Number of queries (default 2000).
    min_docs, max_docs : int
        Each query's number of documents is uniform on ``min_docs..max_docs`` (defaults 10 and
        100; ``max_docs >= min_docs``).
    model_noise : float
        Standard deviation of the relevance model's error on the latent relevance (default 1).
    ranker_noise : (float, float)
        Standard deviations of rankers ``a`` and ``b``'s own noise (default ``(1.0, 1.2)``).
    shared_noise : float
        Standard deviation of the noise both rankers share (default 1).
    cost_power : float
        Exponent of a query's summed log-lengths in its cost (default 1).
    changed : float
        Probability that ranker ``b`` re-ranks a query; otherwise it returns ``a``'s list
        (default 1: every query re-ranked).
    rng : None, int or numpy.random.Generator
        Source of randomness.

    Returns
    -------
    RankingData
        The long-format frame, the :class:`RankingPool` with rankers ``"a"`` and ``"b"``, the
        relevance model and costs, and the true grades (``labeler`` answers with them).
    """
    n_queries = check_count(n_queries, "n_queries")
    min_docs = check_count(min_docs, "min_docs")
    max_docs = check_count(max_docs, "max_docs", minimum=min_docs)
    rng = check_rng(rng)
    n_d = rng.integers(min_docs, max_docs + 1, n_queries)
    qcode = np.repeat(np.arange(n_queries), n_d)
    n = qcode.size
    u = rng.normal(0.0, 1.5, n_queries)
    t = u[qcode] + rng.normal(0.0, 2.0, n)
    P_true = ordered_logistic_probs(t, CUTPOINTS)
    cdf = np.cumsum(P_true, axis=1)
    grade = np.minimum((rng.random((n, 1)) > cdf).sum(axis=1), 4)
    P_model = ordered_logistic_probs(t + rng.normal(0.0, model_noise, n), CUTPOINTS)
    shared = t + rng.normal(0.0, shared_noise, n)
    scores = {
        name: shared + rng.normal(0.0, s, n)
        for name, s in zip(("a", "b"), ranker_noise, strict=True)
    }
    same = rng.random(n_queries) >= changed
    scores["b"] = np.where(same[qcode], scores["a"], scores["b"])
    frame = pd.DataFrame(
        {
            "qid": [f"q{i:05d}" for i in qcode],
            "doc": [f"d{j}" for j in range(n)],
        }
    )
    for name, s in scores.items():
        frame[f"score_{name}"] = s
        # rank within the query by descending score
        order = np.lexsort((-s, qcode))
        rank = np.empty(n, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(n_d)])
        rank[order] = np.arange(n) - np.repeat(starts[:-1], n_d) + 1
        frame[f"rank_{name}"] = rank
    for k in range(5):
        frame[f"p{k}"] = P_model[:, k]
    length = rng.lognormal(6.0, 1.0, n)
    raw = np.bincount(qcode, weights=np.log1p(length), minlength=n_queries) ** cost_power
    cost = raw / raw.mean()
    frame["cost"] = cost[qcode]
    frame["grade"] = grade
    pool = RankingPool.from_frame(
        frame,
        query="qid",
        item="doc",
        ranks={"a": "rank_a", "b": "rank_b"},
        relevance=[f"p{k}" for k in range(5)],
        cost="cost",
    )
    G = np.full((pool.n_queries, pool.max_docs), -1, dtype=np.int64)
    slot = np.arange(n) - np.repeat(np.concatenate([[0], np.cumsum(n_d)])[:-1], n_d)
    G[qcode, slot] = grade
    return RankingData(frame, pool, G)
