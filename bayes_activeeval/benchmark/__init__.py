"""Benchmark label sets for predictors that are unknown when the labels are chosen.

Valizadegan, Amizadeh & Hauskrecht, *Sampling Strategies to Evaluate the Performance of Unknown
Predictors* (the "paper" below) ask: which items of a large, class-skewed pool should an expert
label once, so that the sensitivity, specificity and precision of classification rules that do
not exist yet can later be estimated well? This module answers in three parts.

**Planning** (functions a user calls before labeling anything):

- the paper's guidelines — the positive rate ``p`` left among unlabeled items at which two of its
  error bounds are equal (:func:`equalizing_rate`, Eqs. 3.22, 3.25, 3.29), the ratio
  ``alpha = p/pi`` (:func:`paper_alpha`, Eq. 3.24), the number of labeled positives that achieves
  it (:func:`positives_needed`, Eq. 3.23), the budget at which that saturates
  (:func:`saturation_budget`) and the bounds themselves (:func:`error_bound`, Eqs. 3.19-3.21);
- the design-based square-root ("Neyman") rules (Cochran (1977), Sec. 5.5; derived in ``docs/benchmark.md``, Sec. 2): the minority share of the labels that
  minimises a weighted sum of the variances (:func:`minority_share`), with an imperfect
  class guess entering through its recall and precision, and the variance ratio against
  simple random sampling (:func:`variance_ratio`).

**Design**: :func:`design` turns a class guess for every pool item (probabilities or scores)
into strata and an allocation (``"sqrt"`` = the square-root rule averaged over unknown
rules, ``"paper"`` = oversample the guessed minority up to Eq. 3.23, ``"proportional"``,
``"equal"``), realised as stratified simple random sampling without replacement or as Poisson
sampling, so every item's inclusion probability is known. :meth:`BenchmarkDesign.sample` draws the
items to label.

**Evaluation**: :func:`evaluate` takes the labels and the predictions of any number of rules
(a matrix rules x items, a mapping, or callables) and returns design-weighted (Horvitz-Thompson /
Hajek, post-stratified by stratum x rule output) estimates of sensitivity, specificity, precision,
F1 and accuracy with Wald and Wilson intervals, plus a Bayesian posterior per rule: an exact
conjugate Beta model per stratum x rule-output cell (NumPy draws) or a hierarchical PyMC
contingency model, post-stratified to the pool, as an
``xarray.DataTree``.

Why design weights instead of the paper's estimators: the paper's imputation estimator assumes
the rule is uninformative on the unlabeled items and its "blind labeling" shortcut is strongly
biased for informative rules once the labeled set is enriched with positives (measured in ``docs/benchmark.md``).
Design-weighted estimators are unbiased (ratio estimators up to O(1/n)) whatever the rule and
whatever the quality of the class guess; a poor guess only costs efficiency.


Layout: :mod:`.guidelines` (planning: the paper's guidelines and the square-root rules),
:mod:`.design` (strata, allocation, sampling), :mod:`.cells` (the counting kernel shared by the
estimate and the posterior), :mod:`.evaluate` (design-weighted estimates, variances, intervals)
and :mod:`.posterior` (the Bayesian contingency model).
"""

from .cells import MEASURES, measures_and_grad, population_measures
from .design import BenchmarkDesign, BenchmarkSample, design
from .evaluate import BenchmarkEvaluation, evaluate
from .guidelines import (
    equalizing_rate,
    error_bound,
    minority_share,
    paper_alpha,
    positives_needed,
    saturation_budget,
    variance_ratio,
)

#: Former private name, kept for scripts written against the single-module layout.
_measures_and_grad = measures_and_grad

__all__ = [
    "MEASURES",
    "BenchmarkDesign",
    "BenchmarkEvaluation",
    "BenchmarkSample",
    "design",
    "equalizing_rate",
    "error_bound",
    "evaluate",
    "minority_share",
    "paper_alpha",
    "population_measures",
    "positives_needed",
    "saturation_budget",
    "variance_ratio",
]
