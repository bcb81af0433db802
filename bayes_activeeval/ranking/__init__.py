"""Evaluating and comparing ranking functions with graded relevance (Sawade (2012), Ch. 6).

A query's label is the grade of every document its rankers return, bought at a per-query cost.
Queries are drawn from the proposal that minimizes the variance of the self-normalized estimate
of DCG, ERR, NDCG@k or precision@k — or of the difference between two rankers — per unit of
cost (Sawade (2012), Eq. 6.7-6.11), computed in polynomial time (Thm. 6.1, App. A.1)::

    from bayes_activeeval import ranking
    rp = ranking.RankingPool.from_frame(frame, query="qid", item="doc",
            ranks={"a": "rank_a", "b": "rank_b"}, relevance=["p0", "p1", "p2", "p3", "p4"],
            cost="cost")
    ranking.evaluate(rp, "dcg", labeler, budget=300.0, model="a", rng=0)          # Estimate
    ranking.compare(rp, "err", labeler, budget=300.0, models=("a", "b"), rng=0)   # ComparisonResult
"""

from .evaluation import DESIGNS, compare, draw, estimate, evaluate, proposal, test
from .measures import RankingMeasure, get, query_values
from .pool import RankingPool
from .relevance import GradedRelevanceModel
from .synthetic import RankingData, make_ranking_pool

__all__ = [
    "DESIGNS",
    "GradedRelevanceModel",
    "RankingData",
    "RankingMeasure",
    "RankingPool",
    "compare",
    "draw",
    "estimate",
    "evaluate",
    "get",
    "make_ranking_pool",
    "proposal",
    "query_values",
    "test",
]
