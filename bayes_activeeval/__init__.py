"""bayes_activeeval — label-efficient evaluation of predictive models.

Choose which items to label so that a model's error rate, F-measure, precision, recall, MSE — or
the answer to "which model is better?" — is as precise as possible for the labeling budget, with
honest confidence intervals. See ``docs/`` for the concepts and a page per capability.
"""

from . import benchmark, datasets, measures, planning, proposals, ranking
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
    "__version__",
    "benchmark",
    "compare",
    "comparison_proposal",
    "datasets",
    "difference",
    "estimate",
    "make_oracle",
    "measures",
    "model_assisted_estimate",
    "multiple_comparison",
    "optimal_proposal",
    "passive_proposal",
    "planning",
    "proposals",
    "ranking",
    "ratio_bias",
    "score_strata",
    "sequential_compare",
    "stack",
    "stratified_proposal",
    "weighted_estimate",
]
