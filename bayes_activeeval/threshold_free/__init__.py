"""Threshold-free measures: ROC AUC, average precision and recall at a fixed false-positive rate.

These measures are not of the form ``g(E_p[ℓ])`` (Marchant & Rubinstein (2021), Def. 1): ROC AUC
compares *pairs* of items, average precision averages a precision over the positives' own scores.
They are smooth functionals ``T(P)`` of the joint distribution ``P`` of score and label, and the one
tool that linearizes any such functional is its influence function ``ψ(x, y)`` (Hampel 1974): to
first order ``T(P̂) − T(P) ≈ E_P̂[ψ]``. With ``ψ`` in place of ``Dg(R)(ℓ − R)`` everything the
package does for generalized measures carries over unchanged:

- the estimate is the functional of the importance-weighted empirical distribution
  ``P̂ = Σ v_i δ_(x_i, y_i) / Σ v``, ``v = p/q`` (for ROC AUC, the ratio of weighted two-sample
  U-statistics; Hanley & McNeil (1982) for the Mann-Whitney form);
- its variance is ``Σ v_i² ψ̂_i² / (Σ v)²`` (Sawade (2012), Eq. 3.14 with ``ψ`` for the centred
  loss); for ROC AUC ``ψ`` is DeLong's placement value, and on uniform weights the variance equals
  DeLong, DeLong & Clarke-Pearson (1988) exactly;
- the optimal proposal is ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(E_{y∼π} ψ(x, y)²)`` (Sawade (2012),
  Thm. 4.1/4.2; Marchant & Rubinstein (2021), Prop. 1), with ``ψ`` computed on the pool under the
  belief ``π`` (the positive mass of item ``x`` is ``p(x) π(x)``, its negative mass
  ``p(x)(1 − π(x))``);
- comparing two models on one sample uses ``ψ_a − ψ_b`` (DeLong et al. (1988), the paired,
  correlated U-statistics), and its power-optimal proposal uses ``E_π (ψ_a − ψ_b)²``
  (Sawade (2012), Thm. 5.1).

Every kernel is ``O(n log n)``: one sort by score, tie groups, cumulative masses.

Layout: :mod:`.kernels` (the measures and their influence functions), :mod:`.estimates`
(estimates, variances, the paired comparison), :mod:`.design` (proposals), :mod:`.topk`
(precision at ``k``, a plain generalized measure); the curves and their
bands live in :mod:`bayes_activeeval.curves`.
"""

from .design import (
    adaptive_rank_proposal,
    comparison_rank_proposal,
    expected_sq_influence,
    proposal_from_u,
    rank_proposal,
    scaled_rank_floor,
)
from .estimates import (
    RankEstimate,
    expected_influence,
    measure_models,
    model_scores,
    positive_probs,
    rank_estimate,
    rank_estimate_arrays,
    stacked_estimate,
)
from .kernels import (
    KINDS,
    RankMeasure,
    influence,
    rank_measure,
    values_from_positives,
    weighted_average_precision,
    weighted_roc_auc,
)
from .topk import precision_at_k

__all__ = [
    "KINDS",
    "RankEstimate",
    "RankMeasure",
    "adaptive_rank_proposal",
    "comparison_rank_proposal",
    "expected_influence",
    "expected_sq_influence",
    "influence",
    "measure_models",
    "model_scores",
    "positive_probs",
    "precision_at_k",
    "proposal_from_u",
    "rank_estimate",
    "rank_estimate_arrays",
    "rank_measure",
    "rank_proposal",
    "scaled_rank_floor",
    "stacked_estimate",
    "values_from_positives",
    "weighted_average_precision",
    "weighted_roc_auc",
]
