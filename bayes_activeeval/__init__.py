"""bayes_activeeval — label-efficient evaluation of predictive models.

Choose which items to label so that a model's error rate, F-measure, precision, recall, MSE — or
the answer to "which model is better?" — is as precise as possible for the labeling budget, with
honest confidence intervals. See ``docs/`` for the concepts and a page per capability.

Layers (imports go one way, down this list; ``tests/test_layers.py`` checks it):

0. **Kernels** — depend only on NumPy and SciPy: ``measures`` (ℓ, g, Dg), ``beliefs``,
   ``strata``, ``pool``, ``kernel`` (the deviation integrand and the proposal-from-scores step),
   ``intervals`` (confidence intervals from an estimate and its effective size), ``estimators``,
   ``proposals``, ``datasets``, ``unseen`` (errors no label has seen).
1. **Bayesian models** — ``oracles`` (beliefs about the labels, π(y|x)) and ``posterior``
   (posteriors of the measure itself); PyMC and ArviZ enter here.
2. **Workflows** — ``adaptive``, ``comparison``, ``sequential``, ``planning``, ``benchmark``,
   ``ranking``.
3. **Applications** — ``io``, ``session``, ``report``, ``demo``, ``serve``, ``cli`` and this package
   namespace.

A module may import from its own layer or a lower one, never from a higher one; no module imports
another module's private (underscore) names.
"""

from . import (
    benchmark,
    datasets,
    intervals,
    kernel,
    measures,
    planning,
    posterior,
    proposals,
    ranking,
)
from .adaptive import ActiveEvaluator
from .beliefs import CategoricalBelief, GaussianBelief
from .comparison import (
    ComparisonResult,
    MultipleComparisonResult,
    compare,
    comparison_proposal,
    multiple_comparison,
)
from .estimators import (
    ConfidenceInterval,
    Estimate,
    UndefinedEstimateWarning,
    estimate,
    model_assisted_estimate,
    ratio_bias,
    weighted_estimate,
)
from .measures import FBeta, Measure, difference, stack
from .oracles import CalibrationOracle, DirichletTreeOracle, OracleModel, make_oracle
from .pool import Pool
from .proposals import Draws, Proposal, optimal_proposal, passive_proposal, stratified_proposal
from .sequential import GroupSequentialDesign, sequential_compare
from .strata import score_strata
from .unseen import UnseenErrors, unseen_errors

__version__ = "0.1.0.dev0"

__all__ = [
    "ActiveEvaluator",
    "CalibrationOracle",
    "CategoricalBelief",
    "ComparisonResult",
    "ConfidenceInterval",
    "DirichletTreeOracle",
    "Draws",
    "Estimate",
    "FBeta",
    "GaussianBelief",
    "GroupSequentialDesign",
    "Measure",
    "MultipleComparisonResult",
    "OracleModel",
    "Pool",
    "Proposal",
    "UndefinedEstimateWarning",
    "UnseenErrors",
    "__version__",
    "benchmark",
    "compare",
    "comparison_proposal",
    "datasets",
    "difference",
    "estimate",
    "intervals",
    "kernel",
    "make_oracle",
    "measures",
    "model_assisted_estimate",
    "multiple_comparison",
    "optimal_proposal",
    "passive_proposal",
    "planning",
    "posterior",
    "proposals",
    "ranking",
    "ratio_bias",
    "score_strata",
    "sequential_compare",
    "stack",
    "stratified_proposal",
    "unseen_errors",
    "weighted_estimate",
]
