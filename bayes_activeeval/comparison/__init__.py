"""Comparing models: paired Wald tests, power-optimal proposals, simultaneous tests, ranking.

Two models ``a`` and ``b`` are scored on the *same* draws with the *same* importance weights
(Sawade (2012), Sec. 3.2.1). The target is the difference ``Δ = G_a − G_b`` of any measure, a
generalized measure itself (:func:`~bayes_activeeval.measures.difference`), so the one
self-normalized estimator and the one delta-method variance of :mod:`bayes_activeeval.estimators`
give the paired estimate and its standard error (Sawade (2012), Eqs. 3.21-3.22; ratio measures such
as F1 through the delta method). The variance is the scale-invariant *thesis* form
``S² = n Σ v_i² (δ_i − Δ̂)² / (Σ v_i)²`` (Eq. 3.22), not the ``(1/W) Σ v_i² (δ_i − Δ̂)²`` printed in
Sawade et al. (2012), Eq. 4, which is too small by the support mass of ``q`` and rejects a true
null about half of the time under ``active_≠`` sampling.

For ``k`` models the stacked measure (:func:`~bayes_activeeval.measures.stack`) gives the joint
delta-method covariance of the ``k`` estimates on one shared sample; all-pairs (Tukey-type),
many-to-one (Dunnett-type), Holm and Bonferroni procedures are built on it
(Sawade (2012), Sec. 3.2.3).

Layout: :mod:`.pairwise` (two models: :func:`compare`, :func:`comparison_proposal`),
:mod:`.multiple` (k models: :func:`multiple_comparison`) and :mod:`.results` (the result objects,
:class:`ScoreSums` and the one score-interval inversion :func:`invert_score_test`).
"""

from .multiple import MC_METHODS, multiple_comparison
from .pairwise import PROPOSAL_KINDS, compare, comparison_proposal, disagreement, wald_test
from .results import (
    MVN_ABSEPS,
    BestModel,
    ComparisonResult,
    FamilyCritical,
    MultipleComparisonResult,
    ScoreSums,
    invert_score_test,
)

__all__ = [
    "MC_METHODS",
    "MVN_ABSEPS",
    "PROPOSAL_KINDS",
    "BestModel",
    "ComparisonResult",
    "FamilyCritical",
    "MultipleComparisonResult",
    "ScoreSums",
    "compare",
    "comparison_proposal",
    "disagreement",
    "invert_score_test",
    "multiple_comparison",
    "wald_test",
]
