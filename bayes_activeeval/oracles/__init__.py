"""Oracle models: beliefs ``π(y|x)`` about the labels, fitted to the labels gathered so far.

Every oracle model implements :class:`~bayes_activeeval.oracles.base.OracleModel`; look one up by
name with :func:`make_oracle`.
"""

from .base import OracleModel, PluginOracle, make_oracle, register_oracle
from .calibration import CalibrationOracle
from .dirichlet_tree import DirichletTreeOracle
from .ensemble import EnsembleOracle

__all__ = [
    "CalibrationOracle",
    "DirichletTreeOracle",
    "EnsembleOracle",
    "OracleModel",
    "PluginOracle",
    "make_oracle",
    "register_oracle",
]
