"""Posteriors of the measure itself (not of the labels): what is the pool's F1, given the labels?

- :func:`contingency_posterior` — the one entry point; dispatches on ``method``;
- :func:`cell_posterior` — contingency-table cells (stratum × prediction × score bin), conjugate
  Dirichlet rows or a hierarchical PyMC model (:class:`CellOptions`);
- :func:`calibration_posterior` — item-level, finite-population posterior from the Bayesian
  calibration label model (:class:`CalibrationOptions`); :func:`calibration_map` — that label
  model's probabilities at its posterior mode (for several models, or with the models' own
  probabilities, their Bayesian model average).

Oracle models (``bayes_activeeval.oracles``) give beliefs about labels, ``π(y|x)``, that feed the
proposal; these give the posterior of ``G = g(R)`` on the pool (Marchant & Rubinstein (2021),
Def. 1) as an ``xarray.DataTree``.
"""

from .calibration import CalibrationOptions, calibration_map, calibration_posterior
from .contingency import CellOptions, cell_posterior, contingency_posterior, contingency_table

__all__ = [
    "CalibrationOptions",
    "CellOptions",
    "calibration_map",
    "calibration_posterior",
    "cell_posterior",
    "contingency_posterior",
    "contingency_table",
]
