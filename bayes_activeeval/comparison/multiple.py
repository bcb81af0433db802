"""k models: simultaneous pairwise comparisons on one shared labeled sample (:func:`multiple_comparison`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from .. import intervals
from .._validation import check_count, check_level, check_rng
from ..estimators import Estimate, draw_labels, weighted_estimate
from ..measures import Measure, difference, stack
from ..measures import get as get_measure
from ..proposals import Draws, Proposal
from ..threshold_free import RankMeasure, stacked_estimate
from .pairwise import (
    check_belief_arg,
    check_inputs,
    check_proposal,
    flat_se,
    is_linear,
    models_arg,
    pair_sums,
    post_stratum,
    resolve_variance,
    restricted_score_test,
    support_mass_of,
)
from .results import (
    FamilyCritical,
    MaxAbsZ,
    MultipleComparisonResult,
    ScoreSums,
)

MC_METHODS = ("tukey", "studentized_range", "dunnett", "holm", "bonferroni", "none")


def _contrasts(k: int, pairs: list[tuple[int, int]]) -> np.ndarray:
    C = np.zeros((len(pairs), k))
    for r, (i, j) in enumerate(pairs):
        C[r, i], C[r, j] = 1.0, -1.0
    return C


def _restricted_family(pool, base, spec, models, pairs, L, v, n_labels):
    """The generalized score tests of a ratio or non-linear measure for a family of pairs.

    ``L`` holds the stacked losses of the ``k`` models (``d`` columns each, in the order of
    ``models``) and ``v`` the draws' importance weights; pair ``(i, j)``'s losses are model
    ``i``'s columns then model ``j``'s, as :func:`~bayes_activeeval.measures.difference` gives.

    Each pair ``p = (i, j)`` is tested as :func:`compare` tests it, with the influence terms
    ``ψ_p`` of ``g(R_i) − g(R_j)`` at the pair's own null-restricted point (Boos (1992),
    Eqs. 5-6; :func:`~bayes_activeeval.comparison.pairwise.restricted_influence`) and the
    statistic ``Z_p = Σ v ψ_p / sqrt(Σ v² ψ_p²)``. Jointly, ``(Σ v ψ_p)_p`` is a sum of
    independent draws' terms, so under the complete null its covariance is estimated by the
    same sandwich, ``S_pq = Σ v² ψ_p ψ_q`` (Boos (1992), Eq. 6 for the stacked estimating
    functions of the ``K`` pairs): the simultaneous procedures take the max-|z| of
    ``N(0, S)`` standardized by ``sqrt(S_pp)``, whose diagonal gives each pair's own test.
    A pair whose terms are not defined (the measure is not defined at its pooled point) has a
    NaN statistic and enters ``S`` with zero terms.

    Returns
    -------
    z : ndarray (k, k)
        ``Z_p`` at ``[i, j]`` and ``−Z_p`` at ``[j, i]`` (NaN elsewhere).
    var : ndarray (k, k)
        The score variance of each pair's difference, ``Σ v² ψ_p² / (Σ v)²`` (the pooled
        standard error of the studentized range).
    S : ndarray (K, K)
        ``Σ v² ψ_p ψ_q`` over the pairs in the order of ``pairs``.
    restricted : dict
        ``(i, j) ↦ (RestrictedScore, Δ̂_ij, SE_ij)``: what inverting pair ``(i, j)``'s test
        needs (:meth:`MultipleComparisonResult.confidence_interval`), with the pair's own
        delta-method estimate and standard error, as in :func:`compare`.
    """
    k, K = len(models), len(pairs)
    n, d = v.size, L.shape[1] // k
    # the weights of every pair's test (restricted_score_test leaves rescaled weights as they are)
    vs = intervals.unhuge(v)[0]
    z = np.full((k, k), np.nan)
    var = np.full((k, k), np.nan)
    terms = np.zeros((n, K))
    restricted = {}
    for r, (i, j) in enumerate(pairs):
        pair = (models[i], models[j])
        dm, _ = pool.resolve(difference(base, *pair))
        Lp = np.concatenate([L[:, i * d : (i + 1) * d], L[:, j * d : (j + 1) * d]], axis=1)
        zp, sums, psi, rs = restricted_score_test(Lp, vs, dm, spec, pair, pool)
        z[i, j], z[j, i] = zp, -zp
        if rs is None:
            continue
        terms[:, r] = psi
        var[i, j] = var[j, i] = sums.B / sums.W**2
        est = weighted_estimate(Lp, v, dm, n_labels=n_labels)
        restricted[(i, j)] = (rs, float(est.values[0]), float(est.stderrs[0]))
    S = (terms * (vs * vs)[:, None]).T @ terms
    return z, var, S, restricted


def _score_table(Lk: np.ndarray, vk: np.ndarray) -> dict[str, Any]:
    """The score sums of every pair of models (:class:`ScoreSums` fields, k × k tables) from the
    draws in ``D``: their losses ``Lk`` (n, k) and weights ``vk``."""
    v2 = vk * vk
    m1 = v2 @ Lk
    A, B = pair_sums(Lk, vk)
    return {"A": A, "B": B, "C": m1[:, None] - m1[None, :], "D": float(v2.sum()),
            "W": float(vk.sum())}  # fmt: skip


def multiple_comparison(
    pool,
    measure: str | Measure,
    draws: Draws,
    labels: Any,
    models: Sequence[str] | None = None,
    *,
    method: str = "tukey",
    baseline: str | None = None,
    level: float = 0.95,
    oracle: str = "deterministic",
    df: float = np.inf,
    variance: str = "auto",
    proposal: Proposal | None = None,
    engine: str = "auto",
    n_points: int = 1 << 16,
    rng: Any = None,
    belief: Any = None,
) -> MultipleComparisonResult:
    """Simultaneous pairwise comparison of ``k`` models on one shared labeled sample.

    The ``k`` estimates come from the stacked measure (:func:`~bayes_activeeval.measures.stack`)
    on the same draws and weights, so their joint delta-method covariance ``Σ̂`` (Sawade (2012),
    Lemma 3.4; Marchant & Rubinstein (2021), Thm. 2) captures the pairing. Procedures
    (Sawade (2012), Sec. 3.2.3):

    - ``"tukey"`` — all pairs, single-step max-|z|: the adjusted p-value of pair ``(i, j)`` is
      ``P(max_{r<s} |Z_r − Z_s|/SE_rs ≥ |z_ij|)`` for ``Z ∼ N(0, Σ̂)``, and the simultaneous
      intervals use its ``level`` quantile. Valid for any (estimated) covariance.
    - ``"studentized_range"`` — classical Tukey HSD: pooled ``SE² = mean_ij SE_ij²`` (the thesis'
      ``S_k²``) and ``scipy.stats.studentized_range`` with ``k`` and ``df`` (default ``∞``, the
      asymptotic Wald view; corrected as ``Q = √2 |Δ̂_ij| / SE``: Sawade (2012), Sec. 3.2.3 prints it without Tukey's ``√2``).
      Exact only when the estimates are independent with equal variances (or the covariance is
      exchangeable); a warning is given when the pairwise variances differ by more than 2×.
    - ``"dunnett"`` — every model against ``baseline``, single-step max-|z| over the ``k − 1``
      contrasts.
    - ``"holm"``, ``"bonferroni"`` — on the raw Wald p-values of all pairs (or of the pairs with
      ``baseline`` when it is given); intervals are Bonferroni intervals.
    - ``"none"`` — unadjusted Wald tests and intervals.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        An unbound scalar measure.
    draws : Draws
        One shared sample, e.g. from :func:`comparison_proposal` (Eq. 5.16). The proposal must
        have full support (``mix > 0`` or an optimal kind).
    labels : array-like or mapping
    models : sequence of str, optional
        Default: all the pool's models (at least two).
    method : str
        See above.
    baseline : str, optional
        Required for ``"dunnett"``; restricts Holm/Bonferroni to comparisons with it.
    level : float
        Family-wise confidence level ``1 − α``.
    oracle : {"deterministic", "stochastic"}
    df : float
        Degrees of freedom for ``"studentized_range"`` (default ``inf``).
    variance : {"auto", "wald", "score"}
        As in :func:`compare`: ``"wald"`` uses the joint delta-method covariance ``Σ̂`` centred at
        the estimates (Sawade (2012), Lemma 3.4); ``"score"`` for a plain risk the covariance
        under the complete null, ``Σ v² (ℓ − m)(ℓ − m)ᵀ/(Σ v)²`` with a common centre ``m``
        (contrasts do not depend on it), so that pair ``(i, j)`` has the statistic
        ``Σ v δ_ij / sqrt(Σ v² δ_ij²)`` and the intervals invert the same tests with the
        simultaneous critical value. For a ratio or non-linear measure (F1, F-β, precision,
        recall, MCC, balanced accuracy, …) ``"score"`` tests every pair of the family with
        :func:`compare`'s generalized score test (Boos (1992), Eqs. 5-6: the influence terms
        ``ψ_p`` of the pair's difference at its own null-restricted point,
        :func:`~bayes_activeeval.comparison.pairwise.restricted_influence`; statistic
        ``Σ v ψ_p / sqrt(Σ v² ψ_p²)``), jointly through the covariance of those terms,
        ``S_pq = Σ v² ψ_p ψ_q`` (the sandwich of the stacked estimating functions of the
        ``K`` pairs): Tukey and Dunnett take the max-|z| of ``N(0, S)`` standardized by
        ``sqrt(S_pp)``, the studentized range the pooled score variance ``mean_p S_pp/(Σ v)²``,
        and the intervals invert each pair's test at the simultaneous critical value, every
        ``Δ0`` at its own restricted point. With two models the p-value and the intervals dual
        to the test are :func:`compare`'s. The joint Wald covariance made these procedures
        conservative under a comparison proposal (the Wald terms of the heavy draws where the
        models agree carry the estimated differences): on the complete null of
        ``benchmarks/comparison_type1_power.py`` (section 3b, three models, 100 draws) Tukey's
        family-wise error for F1 was 0.005 at ``α = 0.05``. ``"auto"``: ``"score"`` (threshold-free
        measures: ``"wald"``, DeLong's covariance). The estimates' own covariance :attr:`cov` is
        always the delta-method one.
    proposal : Proposal, optional
        The proposal the draws came from; if given, it is checked to have full support (the
        ``k`` per-model estimates are not identified otherwise).
    engine : {"auto", "qmc", "scipy"}
        How the max-|z| distribution is computed: ``"qmc"`` (randomized Sobol' points in ``k``
        dims; default for all pairs) or ``"scipy"`` (:func:`scipy.stats.multivariate_normal.cdf`,
        default for Dunnett's full-rank family).
    n_points : int
        QMC points (Monte Carlo error of a p-value near 0.05 about ``1e-4`` for ``2^16``).
        Adjusted p-values are kept within ``[raw p, min(1, K·raw p)]`` (always true bounds).
    rng : None, int or Generator
        For the QMC points / Genz's randomized integration.
    belief : Belief or array-like, optional
        Threshold-free measures only: the label belief ``π(y = pos | x)`` of every pool item for
        the guarded ``k × k`` covariance of the estimates (DeLong, DeLong & Clarke-Pearson
        (1988) with importance weights; the larger, by trace, of the empirical covariance and
        its expectation under the belief), as in :func:`compare` and
        :func:`~bayes_activeeval.threshold_free.stacked_estimate` (a
        :class:`~bayes_activeeval.beliefs.CategoricalBelief`, ``(n, 2)`` class probabilities or
        ``(n,)`` positive-class probabilities; length the pool's, values finite probabilities).
        Default: the equal mixture of the ``k`` models' probabilities (Sawade (2012),
        Eq. 5.11). Refused (``ValueError``) for any other measure.

    Returns
    -------
    MultipleComparisonResult
    """
    check_inputs(draws, oracle, variance)
    if method not in MC_METHODS:
        raise ValueError(f"method must be one of {', '.join(MC_METHODS)}; got {method!r}")
    if engine not in ("auto", "qmc", "scipy"):
        raise ValueError(f"engine must be 'auto', 'qmc' or 'scipy', got {engine!r}")
    level = check_level(level)
    n_points = check_count(n_points, "n_points", minimum=256)
    df = float(df)
    if not df > 0:
        raise ValueError(f"df must be positive, got {df!r}")
    models = models_arg(pool, models, 2)
    k = len(models)
    if proposal is not None:
        check_proposal(proposal, pool)
        if support_mass_of(proposal) < 1.0 - 1e-12:
            raise ValueError(
                "the proposal gives zero mass to some items; the k per-model estimates need a "
                "proposal with full support (use mix > 0)"
            )
    if baseline is not None and baseline not in models:
        raise ValueError(f"baseline {baseline!r} is not one of the models {list(models)}")
    if method == "dunnett" and baseline is None:
        raise ValueError("method='dunnett' needs baseline= (the model the others are compared to)")
    if method in ("tukey", "studentized_range") and baseline is not None:
        raise ValueError(f"method={method!r} compares all pairs; baseline= is for dunnett/holm/…")
    base = get_measure(measure)
    if base.models is not None:
        raise ValueError(f"measure {base.name!r} is already bound to models {base.models}")
    if base.n_outputs != 1:
        raise ValueError(f"multiple_comparison needs a scalar measure; {base.name!r} is not")
    check_belief_arg(base, belief)
    if isinstance(base, RankMeasure):  # ROC AUC, AP, recall@FPR: the k × k DeLong covariance
        if variance == "score":
            raise ValueError(
                f"variance='score' needs a plain risk; {base.name!r} is threshold-free"
            )
        variance = "wald"
        est: Estimate = stacked_estimate(
            pool, base, draws, labels, models, oracle=oracle, belief=belief
        )
        n_labels = est.n_labels
    else:
        variance = resolve_variance(variance)  # as compare() does
        st, views = pool.resolve(stack(base, models))
        y = draw_labels(pool, draws.indices, labels, oracle=oracle)
        L = st.loss(y, views(draws.indices))
        n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
        est = weighted_estimate(L, draws.weights, st, n_labels=n_labels)
    G, cov = est.values, est.cov
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(cov))):
        raise ValueError(
            f"the labeled sample does not define {base.name!r} for every model yet; "
            "label more items"
        )
    # the differences: post-stratified on the set D where some two models' losses can differ
    # (as compare() does for two), for plain risks under an active proposal
    strat = post_stratum(pool, base, models, draws, proposal)
    mass = strat.mass
    Gt, covt = G, cov
    if not isinstance(base, RankMeasure):  # the draws the differences are estimated from
        Lk, vk = L[strat.keep], np.asarray(draws.weights, dtype=float)[strat.keep]
    if strat.size is not None:
        if vk.size:
            st_d = weighted_estimate(Lk, vk, st, n_labels=n_labels)
            Gt, covt = mass * st_d.values, mass * mass * st_d.cov
        else:  # no draw where two models can differ: no evidence either way
            Gt, covt = np.zeros(k), np.zeros((k, k))
    diff = Gt[:, None] - Gt[None, :]
    wald_var = np.diag(covt)[:, None] + np.diag(covt)[None, :] - 2 * covt
    if baseline is not None:
        b = models.index(baseline)
        pairs = [(i, b) for i in range(k) if i != b]
    else:
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    K = len(pairs)
    mask = np.zeros((k, k), dtype=bool)
    for i, j in pairs:
        mask[i, j] = mask[j, i] = True
    test_cov, score, restricted, score_pairs = covt, None, None, None
    if variance == "score" and not isinstance(base, RankMeasure) and not is_linear(base):
        # a ratio or non-linear measure: each pair's generalized score test at its own
        # null-restricted point (as compare()), jointly through the covariance of their terms
        spec = measure if isinstance(measure, str) else base
        z, var, test_cov, restricted = _restricted_family(
            pool, base, spec, models, pairs, L, np.asarray(draws.weights, dtype=float), n_labels
        )
        contrasts = np.eye(K)
    else:
        contrasts = _contrasts(k, pairs)
        if variance == "score":
            W, v2 = float(vk.sum()), vk * vk
            if W > 0:  # the covariance under the complete null; a common centre cancels
                c0 = Lk - Lk.mean()
                test_cov = mass * mass * ((c0 * v2[:, None]).T @ c0) / W**2
            else:
                test_cov = np.zeros((k, k))
            score = _score_table(Lk, vk)
        var = np.diag(test_cov)[:, None] + np.diag(test_cov)[None, :] - 2 * test_cov
        se = np.sqrt(np.clip(var, 0.0, None))
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.sign(diff) * np.inf))
        flat = flat_se(se, diff)
        np.fill_diagonal(flat, False)
        if strat.size is not None and np.any(flat):
            # a pair whose draws in D all have the same δ has Wald SE 0 (it would reject at any
            # n); as in compare(), its score statistic Σ v δ / sqrt(Σ v² δ²) measures them, and
            # its score sums give the test's interval (score_pairs)
            if score is None:
                score, score_pairs = _score_table(Lk, vk), flat
            A, B = score["A"], score["B"]
            with np.errstate(invalid="ignore", divide="ignore"):
                zs = np.where(B > 0, A / np.sqrt(np.clip(B, 0.0, None)), 0.0)
            z = np.where(flat, zs, z)
    np.fill_diagonal(z, np.nan)
    raw = np.full((k, k), np.nan)
    off = ~np.eye(k, dtype=bool)
    raw[off] = np.minimum(1.0, 2.0 * stats.norm.sf(np.abs(z[off])))

    pval = np.full((k, k), np.nan)
    se_used = np.where(mask, np.sqrt(np.clip(wald_var, 0.0, None)), np.nan)
    rng_ = check_rng(rng)
    dist = None

    if method in ("tukey", "dunnett"):
        eng = engine
        if eng == "auto":
            eng = "scipy" if method == "dunnett" else "qmc"
        dist = MaxAbsZ(contrasts, test_cov, eng, n_points, rng_)
        for i, j in pairs:
            p_ = dist.sf(abs(z[i, j]))
            p_ = float(np.clip(p_, raw[i, j], min(1.0, K * raw[i, j])))
            pval[i, j] = pval[j, i] = p_

    elif method == "studentized_range":
        pooled = float(np.sqrt(np.mean([var[i, j] for i, j in pairs])))
        vals = np.array([var[i, j] for i, j in pairs])
        if vals.min() > 0 and vals.max() / vals.min() > 2.0:
            warnings.warn(
                "the pairwise variances differ by more than a factor 2; the studentized range "
                "assumes equal variances and independent (or exchangeable) estimates — use "
                "method='tukey'",
                UserWarning,
                stacklevel=2,
            )
        se_used = np.where(mask, pooled, np.nan)
        score = restricted = score_pairs = None  # the classical HSD intervals use the pooled SE
        for i, j in pairs:
            # a pooled standard error of 0 (no pair has a discordant draw): a difference of 0
            # is no evidence (q = 0, p = 1), any other is certain (q = ∞)
            if pooled > 0:
                q = np.sqrt(2.0) * abs(diff[i, j]) / pooled
            else:
                q = np.inf if diff[i, j] != 0 else 0.0
            pval[i, j] = pval[j, i] = float(stats.studentized_range.sf(q, k, df))
        with np.errstate(invalid="ignore", divide="ignore"):
            if pooled > 0:
                z = np.where(mask, diff / pooled, np.nan)
            else:
                z = np.where(mask, np.where(diff == 0, 0.0, np.sign(diff) * np.inf), np.nan)

    elif method in ("holm", "bonferroni"):
        ps = np.array([raw[i, j] for i, j in pairs])
        if method == "bonferroni":
            adj = np.minimum(1.0, K * ps)
        else:
            order = np.argsort(ps)
            stepped = np.minimum(1.0, (K - np.arange(K)) * ps[order])
            stepped = np.maximum.accumulate(stepped)
            adj = np.empty(K)
            adj[order] = stepped
        for (i, j), p_ in zip(pairs, adj, strict=True):
            pval[i, j] = pval[j, i] = p_

    else:  # none
        for i, j in pairs:
            pval[i, j] = pval[j, i] = raw[i, j]

    z = np.where(mask, z, np.nan)
    crit = FamilyCritical(method, k, K, df, dist)
    interval_crit = None
    if method in ("tukey", "dunnett") and variance == "score":
        # the default (Newcombe) intervals cover the true differences: their critical value is
        # the max-|z| under the estimates' own covariance Σ̂, not the complete null's
        ci_dist = MaxAbsZ(_contrasts(k, pairs), cov, dist.engine, n_points, rng_)
        interval_crit = FamilyCritical(method, k, K, df, ci_dist)
    return MultipleComparisonResult(
        models=models,
        estimates=G.copy(),
        cov=cov.copy(),
        difference=np.where(mask, diff, np.nan),
        stderr=se_used,
        statistic=z,
        pvalue=pval,
        raw_pvalue=np.where(mask, raw, np.nan),
        method=method,
        level=level,
        critical_value=crit.quantile(level),
        baseline=baseline,
        measure=base.name,
        greater_is_better=base.greater_is_better,
        n_draws=len(draws),
        n_labels=n_labels,
        variance=variance,
        critical=crit,
        sums=None if score is None else ScoreSums(**score),
        score_pairs=score_pairs,
        bounds=base.bounds,
        per_model=None if isinstance(base, RankMeasure) else est,
        interval_critical=interval_crit,
        equal_weights=strat.passive,
        support_mass=mass,
        stratum_size=strat.size,
        restricted=restricted,
    )
