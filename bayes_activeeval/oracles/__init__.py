"""Oracle models: beliefs ``π(y|x)`` about the labels, fitted to the labels gathered so far.

Every oracle model implements :class:`~bayes_activeeval.oracles.base.OracleModel`; look one up by
name with :func:`make_oracle`.
"""

from .base import OracleModel, PluginOracle, make_oracle, register_oracle

__all__ = ["OracleModel", "PluginOracle", "make_oracle", "register_oracle"]
