"""Optimal query proposals, budgeted draws, estimates and paired tests for rankers.

The estimation proposal (Sawade (2012), Eq. 6.7 and 6.10) and the comparison proposal (Eq. 6.8-6.9
and 6.11) are the package's one optimal proposal with queries as items,

    q*(x) ∝ λ(x)^(-1/2) · sqrt( E_{y∼p(y|x;θ)} ‖Dg(R)(ℓ(r(x), y) − R)‖² ),

whose expectation over all grade vectors is computed in polynomial time from the first and second
moments of the per-query losses (Thm. 6.1; :mod:`bayes_activeeval.ranking.recursions`). Draws,
importance weights, the self-normalized estimate, its delta-method variance and the intervals are
those of :mod:`bayes_activeeval.proposals` and :mod:`bayes_activeeval.estimators`.

The default estimator is model-assisted (``estimator="model_assisted"``): the relevance model's
exact expected loss per query ``m(x) = E[ℓ|x;θ]`` (Thm. 6.1) is a control variate, the difference
estimator of survey sampling (Särndal, Swensson & Wretman (1992), Sec. 6.3) through
:func:`bayes_activeeval.model_assisted_estimate`, and the proposal is the one optimal for it
(the relevance model's conditional variance of the linearized loss in place of the second moment
around ``Ř``). On the synthetic LETOR pool of ``benchmarks/ranking.py`` it roughly halves the MSE
of ERR estimation against the plain self-normalized estimate from Eq. 6.10's proposal (see
``docs/ranking.md``). ``estimator="ipw"`` is the thesis's estimator with its proposal.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._validation import check_budget, check_count, check_fraction, check_rng, show
from ..comparison import ComparisonResult, wald_test
from ..estimators import (
    Estimate,
    UndefinedEstimateWarning,
    model_assisted_estimate,
    weighted_estimate,
)
from ..measures import difference, stack
from ..proposals import DEFAULT_MIX, Draws, Proposal
from .measures import RankingMeasure, get, loss_moments, query_losses
from .pool import RankingPool, check_relevance

__all__ = ["DESIGNS", "compare", "draw", "estimate", "evaluate", "proposal", "test"]

#: Sampling designs: the optimal proposal (Eq. 6.10/6.11), uniform queries, the optimal proposal
#: under a uniform relevance model (the thesis's ``active_uniD``), and ``q ∝ λ^(-1/2)``
#: (``active_λ``). The cost-blind ``active_uniC`` is ``design="optimal", costs=False``.
DESIGNS = ("optimal", "passive", "uniform-relevance", "cost")

#: Relative size below which the expected squared deviation ``u`` of a query is taken as 0: its
#: terms cancel to rounding error (about ``1e-16`` of their size) when the relevance model makes
#: the loss certain.
_ROUNDING = 1e-12


def _models(pool: RankingPool, models: Any, two: bool) -> tuple[str, ...]:
    if two:
        if models is None:
            if len(pool.models) != 2:
                raise ValueError(
                    f"the pool has rankers {list(pool.models)}; name two with models=(a, b)"
                )
            models = pool.models
        if isinstance(models, str) or len(tuple(models)) != 2:
            raise ValueError(f"models must name exactly two rankers, got {models!r}")
        a, b = (pool.check_model(m) for m in models)
        if a == b:
            raise ValueError(f"models must be two different rankers, got {models!r}")
        return (a, b)
    return (pool.check_model(models),)


def _target(measure: RankingMeasure, models: tuple[str, ...]):
    base = measure.measure()
    if len(models) == 1:
        return base
    return difference(base, *models)


def proposal(
    pool: RankingPool,
    measure: str | RankingMeasure,
    *,
    model: str | None = None,
    models: Sequence[str] | None = None,
    design: str = "optimal",
    costs: bool = True,
    relevance: np.ndarray | None = None,
    mix: float = DEFAULT_MIX,
    estimator: str = "model_assisted",
    n_samples: int = 256,
    rng: Any = None,
) -> Proposal:
    """The query proposal for estimating a ranker's measure or comparing two rankers.

    ``design="optimal"``: ``q*(x) ∝ λ(x)^(-1/2) sqrt(E[(Dg(Ř)(ℓ − Ř))²|x;θ])`` with the pool's
    relevance model ``p(y_z|x, z; θ)`` and the intrinsic risk ``Ř`` (Sawade (2012), Eq. 6.10 for
    one ranker; Eq. 6.11 with ``δ = l(r₁) − l(r₂)`` and ``Δ̌`` for two), the expectations computed
    in polynomial time (Thm. 6.1). The costs enter as in Eq. 6.7-6.9.

    Parameters
    ----------
    pool : RankingPool
    measure : str or RankingMeasure
        ``"dcg"``, ``"err"``, ``"dcg@k"``, ``"err@k"``, ``"ndcg@k"``, ``"precision@k"``.
    model : str, optional
        The ranker to evaluate (estimation).
    models : (str, str), optional
        The two rankers to compare (``Δ = G_a − G_b``); overrides ``model``.
    design : {"optimal", "passive", "uniform-relevance", "cost"}
        ``"passive"``: uniform queries. ``"uniform-relevance"``: the optimal proposal under
        ``p(y_z) = 1/|Y|`` (``active_uniD``; for DCG and ERR it is not uniform). ``"cost"``:
        ``q ∝ λ^(-1/2)`` (``active_λ``).
    costs : bool
        Use the query costs (default). ``False`` gives the cost-blind proposal (``active_uniC``).
    relevance : ndarray (m, D, K), optional
        Relevance probabilities to use instead of the pool's, checked as the pool's are: its
        shape, finite, in ``[0, 1]`` and summing to 1 for every document.
    mix : float
        Defensive mixture ``q ← (1 − δ) q + δ/m``: weights at most ``1/δ``, variance at most
        ``1/(1 − δ)`` times the unmixed one (default 0.05).
    estimator : {"model_assisted", "ipw"}
        The estimator the proposal is optimal for. ``"ipw"``: the self-normalized estimate,
        Sawade (2012), Eq. 6.10/6.11 as above. ``"model_assisted"`` (default; see
        :func:`estimate`): with the control variate ``m(x) = E[ℓ|x;θ]`` at ``λ = 1`` the
        estimate's asymptotic variance is ``Σ_x p(x)²/q(x) E[(Dg(ℓ − m(x)))²|x]`` (the
        difference estimator's, Särndal, Swensson & Wretman (1992), Sec. 6.3, with
        Hansen-Hurwitz draws), so minimizing it per unit of cost as in Sawade (2012), Eq. 6.7-6.10
        gives ``q*(x) ∝ λ(x)^(-1/2) sqrt(Var[Dg(Ř) ℓ | x; θ])``: the relevance model's variance
        of the linearized per-query loss replaces its second moment around ``Ř``. Queries whose
        loss the relevance model predicts with certainty (e.g. two rankers returning the same
        list) get only the defensive mixture, and if no query has any variance the proposal is
        uniform. (With either estimator a ``u`` below ``1e-12`` of the size of the terms it is
        computed from counts as 0: rounding error, not variance.)
    n_samples, rng
        Monte Carlo grade vectors for NDCG@k, whose moments have no closed form (``n_samples``
        a whole number ``>= 1``, default 256).

    Returns
    -------
    Proposal
        Over the pool's queries (``proposal.q`` sums to 1); ``info`` holds ``u`` (the expected
        squared deviation per query) and ``risk`` (``Ř``); ``proposal.expected_cost(pool.costs)``
        is ``E_q[λ]`` (``n* = Λ/E_q[λ]``, Eq. 6.7).
    """
    rm = _measure_for(pool, measure)
    mods = _models(pool, models, True) if models is not None else _models(pool, model, False)
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {list(DESIGNS)}, got {design!r}")
    _check_estimator(estimator)
    if relevance is not None:  # checked whatever the design uses (the passive one reads none)
        relevance = _relevance(pool, relevance)
    mix = check_fraction(mix, "mix", allow_one=True)
    n_samples = check_count(n_samples, "n_samples")
    m = pool.n_queries
    p = np.full(m, 1.0 / m)
    lam = pool.costs if costs else np.ones(m)
    info: dict[str, Any] = {"measure": rm.name, "models": mods, "mix": mix}
    if design == "passive":
        q = p.copy()
    elif design == "cost":
        q = 1.0 / np.sqrt(lam)
    else:
        if design == "uniform-relevance":
            rel = pool.uniform_relevance()
        else:  # checked above
            rel = pool.relevance if relevance is None else relevance
        target = _target(rm, mods)
        mean, sec = loss_moments(pool, rm, mods, rel, n_samples=n_samples, rng=check_rng(rng))
        R = mean.mean(axis=0)
        J = target.jacobian(R)
        if not np.all(np.isfinite(J)):
            raise ValueError(
                f"{rm.name} is undefined at the intrinsic risk {np.round(R, 6).tolist()} "
                "(e.g. no relevant document is possible); cannot build the optimal proposal"
            )
        offset = np.zeros(J.shape[0]) if target.scale_invariant else J @ R
        # E‖J(ℓ − R)‖² = Σ_o [J E[ℓℓᵀ] Jᵀ]_oo − 2 (J E ℓ)_o o_o + o_o²
        quad = np.einsum("od,mde,oe->m", J, sec, J)
        lin = (mean @ J.T) @ offset
        u = quad - 2.0 * lin + offset @ offset
        # the terms cancel when the loss is (nearly) certain: what is left below their rounding
        # error is noise, not variance, and would otherwise set q for those queries
        scale = np.abs(quad) + 2.0 * np.abs(lin) + offset @ offset
        if estimator == "model_assisted":
            explained = mean @ J.T - offset
            ex2 = np.einsum("mo,mo->m", explained, explained)
            u = u - ex2
            scale = scale + ex2
        u = np.where(u > _ROUNDING * scale, u, 0.0)
        if len(mods) == 2 and not rm.is_ratio:
            # the same list from both rankers: δ = 0 for every grade vector, exactly (the
            # moments' rounding would leave ~1e-17)
            same = _same_lists(pool, rm, *mods)
            u[same] = 0.0 if estimator == "model_assisted" else float(offset @ offset)
        info.update(u=u, risk=R, jacobian=J, estimator=estimator)
        q = np.sqrt(u / lam)
        if q.sum() <= 0:
            q = p.copy()
    q = q / q.sum()
    if mix and design != "passive":
        q = (1.0 - mix) * q + mix * p
    return Proposal(q, p, "passive" if design == "passive" else "optimal", info)


def draw(pool: RankingPool, proposal: Proposal, budget: float, rng: Any = None) -> Draws:
    """Draw queries i.i.d. from ``proposal`` until the label budget (in cost units) is spent.

    A query costs its ``λ(x)`` the first time it is drawn; a repeat costs nothing (the grades
    are reused) but enters the estimate again (Sawade (2012), Sec. 4.3 and 6.2). Drawing stops
    before the first new query whose cost would exceed what is left (so the spent cost never
    exceeds ``budget``), or right after the purchase that leaves no affordable query unbought.

    A query that costs more than the whole budget can never be bought; its draws are passed
    over (before, a draw of one ended the draw, with nothing bought if it came first). The set is
    fixed before drawing, so the draws kept are i.i.d. from ``q`` restricted to the queries the
    budget can buy; their weights ``p/q`` are off by the constant ``Σ_affordable q``, which the
    self-normalized estimates cancel. Passing over queries that are only unaffordable with what
    is *left* would not be sound: the draws would favour cheap queries beyond what ``q`` says, so
    the rule stops there instead. When such queries exist (``budget`` below the costliest query
    the proposal can draw) a warning says so: no draw can include them, so the IPW estimate
    describes the other queries, and the model-assisted one (the default) takes the model's
    expected loss for them.

    Parameters
    ----------
    pool : RankingPool
        The queries and their costs ``λ(x)`` (``pool.costs``).
    proposal : Proposal
        A proposal over the pool's queries (:func:`proposal`).
    budget : float
        Label budget in cost units: positive, finite and at least the cost of the cheapest query
        the proposal can draw.
    rng : None, int or numpy.random.Generator
        Source of randomness.

    Returns
    -------
    Draws
        The drawn queries in draw order, repeats included, with their importance weights;
        ``n_distinct`` queries are to be graded. Never empty.

    Raises
    ------
    ValueError
        A budget that is not positive and finite, or below the cost of the cheapest query the
        proposal can draw; a proposal over another number of queries.

    Warns
    -----
    UserWarning
        When some queries the proposal can draw cost more than ``budget`` (never bought).
    """
    budget = check_budget(budget)
    if proposal.n_items != pool.n_queries:
        raise ValueError(
            f"the proposal covers {proposal.n_items} queries but the pool has {pool.n_queries}"
        )
    cheapest = float(pool.costs[proposal.q > 0].min())
    if budget < cheapest:
        raise ValueError(
            f"budget={show(budget)} cannot buy a single query (the cheapest costs {cheapest:.6g})"
        )
    drawable = proposal.q > 0
    afford = drawable & (pool.costs <= budget)  # what the whole budget can buy
    never = np.flatnonzero(drawable & ~afford)
    if never.size:
        worst = never[np.argmax(pool.costs[never])]
        warnings.warn(
            f"budget={show(budget)} is below the cost of {never.size} of the "
            f"{int(drawable.sum())} queries the proposal can draw (up to {pool.costs[worst]:.6g}, "
            f"query {pool.query_ids[worst]!r}): no draw can include them, so an IPW estimate "
            "describes the other queries and the model-assisted one takes the model's expected "
            f"loss for them; a budget of at least {pool.costs[worst]:.6g} can buy any query",
            UserWarning,
            stacklevel=2,
        )
    rng = check_rng(rng)
    block = int(min(max(4 * budget / max(proposal.expected_cost(pool.costs), 1e-12), 64), 1e6))
    out: Draws | None = None
    seen: set[int] = set()
    unbought = drawable.copy()
    spent = 0.0
    passed = 0
    while True:
        d = proposal.draw(block, rng=rng)
        # pass over the queries that cost more than the whole budget, at every step: a fixed set,
        # so the draws kept are i.i.d. from q restricted to the queries the budget can buy (their
        # weights p/q are off by the constant factor Σ_afford q, which the estimates' normalization
        # cancels)
        ok = np.flatnonzero(afford[d.indices])
        if ok.size:
            d = d[ok]
        elif seen:
            continue
        else:
            passed += len(d)
            if passed < 64 * block:
                continue
            # a proposal with little mass on what the budget can buy: the first query bought
            # directly from q restricted to it (the same distribution, without the wait)
            cand = np.flatnonzero(afford)
            qa = proposal.q[cand] / proposal.q[cand].sum()
            first = cand[[int(rng.choice(cand.size, p=qa))]]
            d = Draws(first, proposal.weights(first), proposal.q[first])
        stop = None
        for t, i in enumerate(d.indices.tolist()):
            if i in seen:
                continue
            c = pool.costs[i]
            if spent + c > budget:
                stop = t
                break
            seen.add(i)
            spent += c
            unbought[i] = False
            # nothing left that the budget could buy: stop after this draw
            if not np.any(unbought & (pool.costs <= budget - spent)):
                stop = t + 1
                break
        part = d if stop is None else d[:stop]
        out = part if out is None else out + part
        if stop is not None:
            return out


def estimate(
    pool: RankingPool,
    measure: str | RankingMeasure,
    draws: Draws,
    labels: Mapping[Any, Mapping[Any, Any]] | np.ndarray,
    *,
    model: str | None = None,
    estimator: str = "model_assisted",
    relevance: np.ndarray | None = None,
    bias_correction: bool = False,
) -> Estimate:
    """The self-normalized estimate of a ranker's measure from graded queries.

    ``R̂ = Σ v_i ℓ(r(x_i), y_i) / Σ v_i`` (Sawade (2012), Eq. 3.11 with the ranking loss of
    Eq. 6.1/6.2; Eq. 3.31 and the delta method for NDCG@k and precision@k), by
    :func:`bayes_activeeval.weighted_estimate`.

    Parameters
    ----------
    pool : RankingPool
        The queries, their documents and the ranker's scores.
    measure : str or RankingMeasure
        ``"dcg"``, ``"err"``, ``"dcg@k"``, ``"err@k"``, ``"ndcg@k"`` or ``"precision@k"``
        (:func:`~bayes_activeeval.ranking.get`).
    draws : Draws
        The drawn queries and their importance weights (:func:`~bayes_activeeval.ranking.draw`).
    labels : mapping or ndarray
        ``{qid: {doc: grade}}`` covering every drawn query, or an (m, D) grade matrix aligned with
        the pool (``RankingPool.grade_matrix``): a whole number ``0..max_grade`` for every
        document of every drawn query (NaN, fractions and ``-1`` there are refused); the rows of
        queries not drawn are not read (``-1`` or NaN mark them ungraded).
    estimator : {"model_assisted", "ipw"}
        ``"model_assisted"`` (default): use the relevance model as a control variate,
        ``R̂ = R̂_IS − λ(M̂_IS − M)`` with ``m(x) = E[ℓ|x;θ]`` known exactly for every query
        (Thm. 6.1) and ``M`` its pool mean (:func:`bayes_activeeval.model_assisted_estimate`,
        ``λ`` tuned from the sample; ``λ = 1`` is the difference estimator of Särndal, Swensson &
        Wretman (1992), Sec. 6.3). Consistent whatever the relevance model; much less variable
        when it is good. ``"ipw"``: the plain self-normalized estimate (Eq. 3.11).
    model : str, optional
        Which ranker of the pool.
    relevance : ndarray (m, D, K), optional
        The relevance model for ``"model_assisted"`` (default: the pool's), checked as in
        :func:`proposal`.
    bias_correction : bool
        Subtract the estimated second-order bias (see :func:`bayes_activeeval.weighted_estimate`).
    """
    rm = _measure_for(pool, measure)
    model = pool.check_model(model)
    _check_estimator(estimator)
    if relevance is not None:  # checked whatever the estimator uses ("ipw" reads none)
        relevance = _relevance(pool, relevance)
    L, n_q = _losses(pool, rm, (model,), draws, labels)
    est = _estimate(
        pool, rm, (model,), rm.measure(), L, draws, n_q, estimator, relevance, bias_correction
    )
    return _with_details(est, pool, draws)


def test(
    pool: RankingPool,
    measure: str | RankingMeasure,
    draws: Draws,
    labels: Mapping[Any, Mapping[Any, Any]] | np.ndarray,
    *,
    models: Sequence[str] | None = None,
    alternative: str = "two-sided",
    estimator: str = "model_assisted",
    relevance: np.ndarray | None = None,
) -> ComparisonResult:
    """Paired Wald test of ``H0: G_a = G_b`` from graded queries (Sawade (2012), Eq. 3.21-3.24).

    Both rankers are scored on the same queries with the same weights; ``Δ̂ = Ĝ_a − Ĝ_b`` and its
    standard error come from :func:`bayes_activeeval.weighted_estimate` with the difference
    measure (delta method for the ratio measures); ``estimator="model_assisted"`` (default) as
    in :func:`estimate`. For DCG and ERR (not the ratio measures) the model-assisted difference
    is post-stratified on the queries where both rankers return the same list: there
    ``δ = ℓ_a − ℓ_b = 0`` for every grade vector, so ``Δ = f Δ_c`` with ``f`` the known share of
    the other queries and ``Δ_c`` estimated from the draws among them. Without it the floor
    weights of the same-list draws inflate the self-normalized standard error (95% intervals
    covered 0.975-0.979 in ``benchmarks/ranking.py`` with 40% of the queries re-ranked; 0.95-0.96
    with it).

    Parameters
    ----------
    pool : RankingPool
        The queries, their documents and the rankers' scores.
    measure : str or RankingMeasure
        ``"dcg"``, ``"err"``, ``"dcg@k"``, ``"err@k"``, ``"ndcg@k"`` or ``"precision@k"``
        (:func:`~bayes_activeeval.ranking.get`).
    draws : Draws
        The drawn queries and their importance weights (:func:`draw`).
    labels : mapping or ndarray
        ``{qid: {doc: grade}}`` covering every drawn query, or an (m, D) grade matrix aligned with
        the pool (``RankingPool.grade_matrix``): a whole number ``0..max_grade`` for every
        document of every drawn query (NaN, fractions and ``-1`` there are refused); the rows of
        queries not drawn are not read (``-1`` or NaN mark them ungraded).
    models : (str, str), optional
        The rankers ``(a, b)`` to compare (default: the pool's two rankers, if it has exactly
        two).
    alternative : {"two-sided", "less", "greater"}
        The alternative hypothesis: ``"less"`` is ``H1: G_a < G_b``, ``"greater"``
        ``H1: G_a > G_b`` (default ``"two-sided"``).
    estimator : {"model_assisted", "ipw"}
        As in :func:`estimate` (default ``"model_assisted"``).
    relevance : ndarray (m, D, K), optional
        The relevance model for ``"model_assisted"`` (default: the pool's), checked as in
        :func:`proposal`.

    Returns
    -------
    ComparisonResult
        ``Δ̂ = Ĝ_a − Ĝ_b``, its standard error, the Wald statistic and p-value, and each
        ranker's estimate on the shared draws; ``n_labels`` counts the graded queries. When no
        drawn query is one where the two rankers' lists differ (and the pool has such queries)
        the draws say nothing of the difference: the standard error, statistic, p-value and
        interval are NaN, with an ``UndefinedEstimateWarning`` (before, ``± 0`` and
        ``p = 0``).
    """
    rm = _measure_for(pool, measure)
    a, b = _models(pool, models, True)
    _check_estimator(estimator)
    if relevance is not None:  # checked whatever the estimator uses ("ipw" reads none)
        relevance = _relevance(pool, relevance)
    L, n_q = _losses(pool, rm, (a, b), draws, labels)
    base = rm.measure()
    est = _estimate(pool, rm, (a, b), difference(base, a, b), L, draws, n_q, estimator, relevance)
    per = _estimate(pool, rm, (a, b), stack(base, (a, b)), L, draws, n_q, estimator, relevance)
    value, se = float(est.values[0]), float(est.stderrs[0])
    same = _same_lists(pool, rm, a, b)
    if estimator == "model_assisted" and not rm.is_ratio and same.any():
        # Δ = f·Δ_c: the queries where both rankers return the same list have δ ≡ 0 for every
        # grade vector, a stratum of known size 1 − f and known mean 0; estimate the mean Δ_c
        # over the others from the draws that fell there (post-stratification, Särndal,
        # Swensson & Wretman (1992), Ch. 7), free of the noise those draws' weights add to
        # the self-normalizing sum
        keep = ~same[draws.indices]
        if keep.any():
            f = float(np.mean(~same))
            est_c = _estimate(
                pool, rm, (a, b), difference(base, a, b), L[keep], draws[keep], n_q, estimator,
                relevance, support=~same,
            )  # fmt: skip
            value, se = f * float(est_c.values[0]), f * float(est_c.stderrs[0])
    if (~same).any() and same[draws.indices].all():
        # every draw fell where the two lists are the same (δ ≡ 0, and m ≡ 0 there): the
        # residuals are all 0 and say nothing of the queries where the rankers differ, so the
        # standard error is undefined, not 0
        warnings.warn(
            f"no drawn query has different {rm.name} lists from {a!r} and {b!r} "
            f"({int(np.count_nonzero(~same))} of the pool's {same.size} queries do): the "
            "standard error of the difference is undefined",
            UndefinedEstimateWarning,
            stacklevel=2,
        )
        se = float("nan")
    z, pvalue = wald_test(value, se, alternative)
    return ComparisonResult(
        statistic=z,
        pvalue=pvalue,
        estimate=value,
        stderr=se,
        alternative=alternative,
        models=(a, b),
        estimates={a: float(per.values[0]), b: float(per.values[1])},
        stderrs={a: float(per.stderrs[0]), b: float(per.stderrs[1])},
        n_draws=len(draws),
        n_labels=n_q,
        measure=rm.name,
        greater_is_better=True,
    )


def evaluate(
    pool: RankingPool,
    measure: str | RankingMeasure,
    labeler: Callable[[list[Any]], Mapping[Any, Mapping[Any, Any]]],
    budget: float,
    *,
    model: str | None = None,
    design: str = "optimal",
    costs: bool = True,
    mix: float = DEFAULT_MIX,
    estimator: str = "model_assisted",
    rng: Any = None,
) -> Estimate:
    """Estimate a ranker's DCG, ERR, NDCG@k or precision@k within a label budget.

    Sawade (2012), Sec. 6.2-6.3 (Algorithm 2 with the ranking proposal of Eq. 6.10): build the
    query proposal, draw queries until ``budget`` (cost units) is spent, ask ``labeler`` once for
    the grades of every drawn query, and return the estimate with its delta-method standard
    error — by default the model-assisted estimate with the proposal optimal for it (see
    :func:`proposal` and :func:`estimate`), ``estimator="ipw"`` for the thesis's
    self-normalized estimate with the proposal of Eq. 6.10.

    Parameters
    ----------
    pool : RankingPool
    measure : str or RankingMeasure
    labeler : callable
        ``labeler(query_ids) -> {qid: {doc: grade}}`` for every document of those queries.
    budget : float
        Label budget in cost units (the pool's query costs).
    model : str, optional
        The ranker (default: the pool's only one).
    design, costs, mix
        See :func:`proposal`.
    estimator : {"model_assisted", "ipw"}
        See :func:`estimate`; the proposal is built for the same estimator.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    Estimate
        ``n_labels`` counts graded queries; ``details`` holds the design, the spent ``cost`` and
        the number of graded ``documents``.

    Examples
    --------
    >>> from bayes_activeeval import ranking
    >>> data = ranking.make_ranking_pool(300, rng=0)
    >>> est = ranking.evaluate(data.pool, "dcg", data.labeler, budget=60.0, model="a", rng=1)
    >>> lo, hi = est.confidence_interval(0.95)
    """
    rng = check_rng(rng)
    model = pool.check_model(model)
    prop = proposal(
        pool,
        measure,
        model=model,
        design=design,
        costs=costs,
        mix=mix,
        estimator=estimator,
        rng=rng,
    )
    draws = draw(pool, prop, budget, rng=rng)
    labels = _ask(pool, labeler, draws)
    est = estimate(pool, measure, draws, labels, model=model, estimator=estimator)
    return dataclasses.replace(est, details={**est.details, "design": design, "costs": costs})


def compare(
    pool: RankingPool,
    measure: str | RankingMeasure,
    labeler: Callable[[list[Any]], Mapping[Any, Mapping[Any, Any]]],
    budget: float,
    *,
    models: Sequence[str] | None = None,
    design: str = "optimal",
    costs: bool = True,
    mix: float = DEFAULT_MIX,
    alternative: str = "two-sided",
    estimator: str = "model_assisted",
    rng: Any = None,
) -> ComparisonResult:
    """Compare two rankers within a label budget: paired estimate of ``Δ = G_a − G_b``, Wald test
    and interval (Sawade (2012), Sec. 6.2-6.3 with the proposal of Eq. 6.11; Eq. 3.21-3.24).

    Parameters are those of :func:`evaluate` (``estimator`` included), with ``models=(a, b)`` and
    ``alternative``
    (``"two-sided"``, ``"less"``: ``G_a < G_b``, ``"greater"``).

    Parameters
    ----------
    pool : RankingPool
        The queries, their documents, costs and the rankers' scores.
    measure : str or RankingMeasure
        ``"dcg"``, ``"err"``, ``"dcg@k"``, ``"err@k"``, ``"ndcg@k"`` or ``"precision@k"``.
    labeler : callable
        ``labeler(query_ids) -> {qid: {doc: grade}}`` for every document of those queries.
    budget : float
        Label budget in cost units (the pool's query costs).
    models : (str, str), optional
        The rankers ``(a, b)`` to compare (default: the pool's two rankers, if it has exactly
        two).
    design : {"optimal", "passive", "uniform-relevance", "cost"}
        The query proposal, see :func:`proposal` (default ``"optimal"``).
    costs : bool
        Build the proposal with the query costs (default); see :func:`proposal`.
    mix : float
        Defensive mixture weight of the proposal (default 0.05); see :func:`proposal`.
    alternative : {"two-sided", "less", "greater"}
        The alternative hypothesis: ``"less"`` is ``H1: G_a < G_b``, ``"greater"``
        ``H1: G_a > G_b`` (default ``"two-sided"``).
    estimator : {"model_assisted", "ipw"}
        See :func:`estimate`; the proposal is built for the same estimator.
    rng : None, int or numpy.random.Generator
        Source of randomness.

    Returns
    -------
    ComparisonResult
        The paired test of :func:`test` on the draws bought with ``budget``.

    Examples
    --------
    >>> from bayes_activeeval import ranking
    >>> data = ranking.make_ranking_pool(300, rng=0)
    >>> res = ranking.compare(data.pool, "err", data.labeler, budget=60.0, models=("a", "b"), rng=1)
    >>> lo, hi = res.confidence_interval(0.95)
    """
    rng = check_rng(rng)
    pair = _models(pool, models, True)
    prop = proposal(
        pool,
        measure,
        models=pair,
        design=design,
        costs=costs,
        mix=mix,
        estimator=estimator,
        rng=rng,
    )
    draws = draw(pool, prop, budget, rng=rng)
    labels = _ask(pool, labeler, draws)
    return test(
        pool, measure, draws, labels, models=pair, alternative=alternative, estimator=estimator
    )


# ------------------------------------------------------------------------------------------------
def _check_estimator(estimator: str) -> None:
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")


def _measure_for(pool: RankingPool, measure: Any) -> RankingMeasure:
    """The measure (:func:`get`), refused if it can never count a document as relevant on this
    pool (a precision ``threshold`` above the pool's ``max_grade``: the measure would be 0
    whatever the grades)."""
    rm = get(measure)
    if rm.kind == "precision" and rm.threshold > pool.max_grade:
        raise ValueError(
            f"{rm.name}: threshold={rm.threshold} is above the pool's max_grade={pool.max_grade}, "
            "so no document could count as relevant (the measure would be 0 whatever the grades)"
        )
    return rm


def _relevance(pool: RankingPool, relevance: Any) -> np.ndarray:
    """The pool's relevance probabilities, or ``relevance`` checked as the pool checks its own:
    shape (m, D, K) of the pool's, finite, in ``[0, 1]`` and summing to 1 for every document (the
    padding past a query's documents is not read)."""
    if relevance is None:
        return pool.relevance
    try:
        rel = np.asarray(relevance, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"relevance must be a numeric array of shape {pool.relevance.shape}"
        ) from exc
    if rel.shape != pool.relevance.shape:
        raise ValueError(f"relevance has shape {rel.shape}; expected {pool.relevance.shape}")
    return check_relevance(rel, pool.query_ids, pool.doc_ids, pool.n_docs)


def _same_lists(pool: RankingPool, rm: RankingMeasure, a: str, b: str) -> np.ndarray:
    """Queries on which rankers ``a`` and ``b`` return the same (cut-off) list."""
    return np.all(pool.truncated_positions(a, rm.k) == pool.truncated_positions(b, rm.k), axis=1)


def _estimate(
    pool,
    rm,
    models,
    target,
    L,
    draws,
    n_q,
    estimator,
    relevance,
    bias_correction=False,
    support=None,
) -> Estimate:
    if estimator == "ipw":
        est = weighted_estimate(
            L, draws.weights, target, n_labels=n_q, bias_correction=bias_correction
        )
        return _one_query_undefined(est, draws)
    # m(x) = E[ℓ|x;θ] for every query (cached per measure for the pool's own relevance model)
    key = (rm, models) if relevance is None else None
    cached = pool._expected.get(key) if key is not None else None
    if cached is None:  # a relevance= argument was checked by estimate / test
        rel = pool.relevance if relevance is None else relevance
        mean, _ = loss_moments(pool, rm, models, rel, n_samples=256, rng=np.random.default_rng(0))
        cached = (mean, mean.mean(axis=0))
        if key is not None:
            pool._expected[key] = cached
    mean, M = cached
    if support is not None:  # the pool mean of m over these queries only
        M = mean[support].mean(axis=0)
    est = model_assisted_estimate(
        L,
        draws.weights,
        mean[draws.indices],
        M,
        target,
        n_labels=n_q,
        bias_correction=bias_correction,
    )
    return _one_query_undefined(est, draws)


def _one_query_undefined(est: Estimate, draws: Draws) -> Estimate:
    """``est`` with an undefined (NaN) covariance when its draws hold fewer than two distinct
    queries: one query, however often drawn, leaves every residual at exactly 0, and a variance
    estimated from one residual would print ``± 0``. A NaN standard error gives a NaN interval
    (:func:`bayes_activeeval.intervals.interval`) and a NaN test statistic and p-value
    (:func:`bayes_activeeval.wald_test`), as :mod:`bayes_activeeval.estimators` does for an
    estimate the sample does not define."""
    if np.unique(draws.indices).size >= 2:
        return est
    return dataclasses.replace(est, cov=np.full_like(est.cov, np.nan), df=None)


def _ask(pool: RankingPool, labeler, draws: Draws):
    if not callable(labeler):
        raise TypeError(f"labeler must be callable, got {labeler!r}")
    qids = [pool.query_ids[i] for i in draws.unique()]
    labels = labeler(qids)
    if not isinstance(labels, Mapping):
        raise TypeError(
            f"labeler must return a mapping {{qid: {{doc: grade}}}}, got {type(labels).__name__}"
        )
    return labels


def _losses(pool, rm, models, draws, labels) -> tuple[np.ndarray, int]:
    if not isinstance(draws, Draws):
        raise TypeError(f"draws must be a Draws object, got {type(draws).__name__}")
    idx = draws.indices
    if isinstance(labels, Mapping):
        G = pool.grade_matrix(labels, idx)
    else:
        G = _grade_array(pool, labels, idx)
    L = np.concatenate([query_losses(pool, rm, m, G, idx) for m in models], axis=1)
    return L, draws.n_distinct


def _grade_array(pool: RankingPool, labels: Any, idx: np.ndarray) -> np.ndarray:
    """An (m, D) grade matrix given as an array, checked on the drawn queries: every document of
    each must have a whole-number grade ``0..max_grade`` (NaN, fractions and ``-1`` are refused
    there). Rows of queries not drawn are not read (``-1`` or NaN mark them ungraded, as in
    ``RankingPool.grade_matrix``). Returns the int64 matrix, ``-1`` off the drawn queries."""
    try:
        G = np.asarray(labels, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "labels must be a mapping {qid: {doc: grade}} or a numeric (m, D) grade array"
        ) from exc
    if G.shape != (pool.n_queries, pool.max_docs):
        raise ValueError(
            f"labels has shape {G.shape}; expected a mapping or an array of shape "
            f"{(pool.n_queries, pool.max_docs)}"
        )
    uq = np.unique(idx)
    real = np.arange(pool.max_docs)[None, :] < pool.n_docs[uq][:, None]
    g = G[uq]
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(g) & (g == np.round(g)) & (g >= 0) & (g <= pool.max_grade)
    bad = np.argwhere(real & ~ok)
    if bad.size:
        r, c = bad[0]
        value = show(np.asarray(labels)[uq[r], c])
        raise ValueError(
            f"labels for query {pool.query_ids[uq[r]]!r}, document {pool.doc_ids[uq[r]][c]!r} "
            f"is {value}; every document of a drawn query needs a whole-number grade "
            f"0..{pool.max_grade} ({int(bad.shape[0])} bad in all; -1 or NaN may mark only "
            "queries not drawn)"
        )
    out = np.full(G.shape, -1, dtype=np.int64)
    out[uq] = np.where(real, g, -1).astype(np.int64)
    return out


def _with_details(est: Estimate, pool: RankingPool, draws: Draws) -> Estimate:
    uq = np.unique(draws.indices)
    details = {
        **est.details,
        "cost": float(pool.costs[uq].sum()),
        "documents": int(pool.n_docs[uq].sum()),
    }
    return dataclasses.replace(est, details=details)
