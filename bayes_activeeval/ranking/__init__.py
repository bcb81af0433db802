"""Evaluating and comparing ranking functions with graded relevance (Sawade (2012), Ch. 6).

A query's label is the grade of every document its rankers return, bought at a per-query cost.
Queries are drawn from the proposal that minimizes the variance of the estimate of DCG, ERR,
NDCG@k or precision@k — or of the difference between two rankers — per unit of cost (Sawade
(2012), Eq. 6.7-6.11), computed in polynomial time (Thm. 6.1, App. A.1). The default estimate is
model-assisted: the relevance model's exact expected loss per query is a control variate
(Särndal, Swensson & Wretman (1992), Sec. 6.3), with the proposal optimal for that estimator;
``estimator="ipw"`` gives the thesis's self-normalized estimate and proposal::

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
