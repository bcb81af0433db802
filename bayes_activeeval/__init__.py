"""bayes_activeeval — label-efficient evaluation of predictive models.

Choose which items to label so that a model's error rate, F-measure, precision, recall, MSE — or
the answer to "which model is better?" — is as precise as possible for the labeling budget, with
honest confidence intervals. See ``docs/`` for the concepts and a page per capability.
"""

from . import benchmark, measures
from .beliefs import CategoricalBelief, GaussianBelief
from .estimators import ConfidenceInterval, Estimate, UndefinedEstimateWarning, estimate
from .measures import FBeta, Measure, difference, stack
from .pool import Pool
from .proposals import Draws, Proposal, optimal_proposal, passive_proposal, stratified_proposal
from .strata import score_strata

__version__ = "0.1.0.dev0"

__all__ = [
    "CategoricalBelief",
    "ConfidenceInterval",
    "Draws",
    "Estimate",
    "FBeta",
    "GaussianBelief",
    "Measure",
    "Pool",
    "Proposal",
    "UndefinedEstimateWarning",
    "__version__",
    "benchmark",
    "difference",
    "estimate",
    "measures",
    "optimal_proposal",
    "passive_proposal",
    "score_strata",
    "stack",
    "stratified_proposal",
]
