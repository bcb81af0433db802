"""Moved to :mod:`bayes_activeeval.posterior` (a posterior of the measure, not an oracle model).

This module re-exports the old import path ``bayes_activeeval.oracles.contingency``.
"""

from ..posterior.contingency import contingency_posterior, contingency_table

__all__ = ["contingency_posterior", "contingency_table"]
