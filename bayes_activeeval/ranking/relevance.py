"""A Bayesian graded-relevance model: ordered logistic on a ranker's scores with query effects.

When a ranker gives scores but no calibrated ``P(grade | query, doc)``, the optimal query
proposal (Sawade (2012), Eq. 6.10-6.12) needs a pointwise relevance model. The thesis uses a MAP
ordered logit (Sec. 6.4); this is its Bayesian version with a random effect per query (queries
differ in how many relevant documents they have)::

    x = standardized score,  η_{qd} = β x_{qd} + u_q,  u_q ∼ N(0, σ_q²),
    y_{qd} ∼ OrderedLogistic(η_{qd}, c_1 < … < c_{K−1})

fitted by NUTS (PyMC) on already graded queries. The posterior predictive averages the
ordered-logistic probabilities over posterior draws; for a query without grades the query
effect is drawn from its population ``N(0, σ_q²)``. Grades are i.i.d. given the query, as
Eq. 6.3 needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_count, check_rng
from .synthetic import ordered_logistic_probs

__all__ = ["GradedRelevanceModel"]


class GradedRelevanceModel:
    """Ordered-logistic relevance model with query random effects (PyMC).

    Parameters
    ----------
    n_grades : int
        ``K``: grades ``0..K−1`` (default 5, as MSLR-WEB30k).
    slope_sd, cutpoint_sd, query_sd : float
        Prior scales: ``β ∼ N(0, slope_sd²)``, ``c_k ∼ N(·, cutpoint_sd²)`` (ordered),
        ``σ_q ∼ HalfNormal(query_sd)``.

    Attributes
    ----------
    posterior : xarray.DataTree
        After :meth:`fit`: the NUTS posterior (variables ``slope``, ``cutpoints`` (dim ``cut``),
        ``query_sd``, ``query_effect`` (dim ``query``)).

    Examples
    --------
    >>> # not run: needs graded training queries
    >>> # model = GradedRelevanceModel().fit(train.score_a, train.grade, train.qid, draws=500)
    >>> # P = model.predict_proba(frame.score_a, frame.qid)   # (n, 5): the p0..p4 columns
    """

    def __init__(
        self,
        n_grades: int = 5,
        *,
        slope_sd: float = 2.5,
        cutpoint_sd: float = 5.0,
        query_sd: float = 1.0,
    ) -> None:
        self.n_grades = check_count(n_grades, "n_grades", minimum=2)
        self.slope_sd = float(slope_sd)
        self.cutpoint_sd = float(cutpoint_sd)
        self.query_sd = float(query_sd)
        self.posterior = None
        self._queries: dict[Any, int] = {}
        self._center = 0.0
        self._scale = 1.0

    def _x(self, scores: Any) -> np.ndarray:
        s = np.asarray(scores, dtype=float).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(s))
        if bad.size:
            raise ValueError(f"scores[{bad[0]}] = {s[bad[0]]!r}; scores must be finite")
        return (s - self._center) / self._scale

    def pymc_model(self, scores: Any, grades: Any, queries: Any):
        """The PyMC model for graded training rows (scores, grades ``0..K−1``, query ids)."""
        import pymc as pm

        s = np.asarray(scores, dtype=float).reshape(-1)
        y = np.asarray(grades)
        q = np.asarray(queries, dtype=object).reshape(-1)
        if not (s.size == y.size == q.size) or s.size == 0:
            raise ValueError(
                f"scores, grades and queries must have the same non-zero length, got "
                f"{s.size}, {y.size}, {q.size}"
            )
        yf = y.astype(float)
        bad = np.flatnonzero(~((yf >= 0) & (yf <= self.n_grades - 1) & (yf == np.floor(yf))))
        if bad.size:
            raise ValueError(
                f"grades[{bad[0]}] = {y[bad[0]]!r}; grades are whole numbers 0..{self.n_grades - 1}"
            )
        self._center = float(np.mean(s))
        self._scale = float(np.std(s)) or 1.0
        x = self._x(s)
        levels, qidx = np.unique(q.astype(str), return_inverse=True)
        self._queries = {str(k): i for i, k in enumerate(levels)}
        K = self.n_grades
        coords = {"query": levels.tolist(), "cut": list(range(K - 1)), "row": np.arange(x.size)}
        init = np.linspace(-1.5, 1.5, K - 1)
        with pm.Model(coords=coords) as model:
            beta = pm.Normal("slope", 0.0, self.slope_sd)
            sigma = pm.HalfNormal("query_sd", self.query_sd)
            z = pm.Normal("z", 0.0, 1.0, dims="query")
            u = pm.Deterministic("query_effect", sigma * z, dims="query")
            cut = pm.Normal(
                "cutpoints",
                mu=init,
                sigma=self.cutpoint_sd,
                transform=pm.distributions.transforms.ordered,
                initval=init,
                dims="cut",
            )
            pm.OrderedLogistic(
                "grade",
                eta=beta * x + u[qidx],
                cutpoints=cut,
                observed=y.astype(np.int64),
                dims="row",
            )
        return model

    def fit(
        self,
        scores: Any,
        grades: Any,
        queries: Any,
        *,
        draws: int = 500,
        tune: int = 500,
        chains: int = 2,
        rng: Any = None,
    ) -> GradedRelevanceModel:
        """Sample the posterior with NUTS (``cores=1``) on graded rows; returns ``self``."""
        import pymc as pm

        draws = check_count(draws, "draws")
        tune = check_count(tune, "tune", minimum=0)
        chains = check_count(chains, "chains")
        seed = int(check_rng(rng).integers(2**31 - 1))
        with self.pymc_model(scores, grades, queries):
            self.posterior = pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
        return self

    def predict_proba(
        self,
        scores: Any,
        queries: Any,
        *,
        max_draws: int = 200,
        chunk: int = 1 << 14,
        rng: Any = None,
    ) -> np.ndarray:
        """Posterior predictive ``P(grade = k | query, doc)``, shape (n, K).

        Averages the ordered-logistic probabilities over at most ``max_draws`` posterior draws;
        queries not seen in :meth:`fit` get a query effect drawn from ``N(0, σ_q²)`` per draw.
        """
        if self.posterior is None:
            raise ValueError("fit the model before predict_proba")
        post = self.posterior["posterior"] if "posterior" in self.posterior.children else None
        post = self.posterior if post is None else post
        beta = np.asarray(post["slope"]).reshape(-1)
        S = beta.size
        sel = np.linspace(0, S - 1, min(S, int(max_draws))).astype(int)
        beta = beta[sel]
        cut = np.asarray(post["cutpoints"]).reshape(S, -1)[sel]
        sig = np.asarray(post["query_sd"]).reshape(-1)[sel]
        u_known = np.asarray(post["query_effect"]).reshape(S, -1)[sel]
        x = self._x(scores)
        q = np.asarray(queries, dtype=object).reshape(-1).astype(str)
        if q.size != x.size:
            raise ValueError(f"scores has {x.size} entries but queries has {q.size}")
        rng = check_rng(rng)
        levels, qidx = np.unique(q, return_inverse=True)
        known = np.array([self._queries.get(k, -1) for k in levels])
        # query effect per draw and query level: posterior draws if seen, else the population
        U = rng.normal(0.0, 1.0, (sel.size, levels.size)) * sig[:, None]
        U[:, known >= 0] = u_known[:, known[known >= 0]]
        out = np.empty((x.size, self.n_grades))
        for start in range(0, x.size, chunk):
            sl = slice(start, min(start + chunk, x.size))
            eta = beta[:, None] * x[None, sl] + U[:, qidx[sl]]  # (S, n)
            P = ordered_logistic_probs(eta, cut[:, None, :])
            out[sl] = P.mean(axis=0)
        return out / out.sum(axis=1, keepdims=True)
