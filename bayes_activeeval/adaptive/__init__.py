"""Adaptive evaluation: the query → label → update loop of Marchant & Rubinstein (2021), Algorithm 1.

Labels are drawn in *stages*. Within a stage, items are drawn i.i.d. with replacement from the
current proposal ``q_{t-1}``; each draw keeps its importance weight ``w = p(x)/q_{t-1}(x)``. At the
end of a stage the oracle model is updated with the stage's labels, its posterior predictive
``π_t(y|x)`` gives the plug-in risk ``R_t`` and a new proposal (Prop. 2)::

    deterministic oracle:  q_t(x) ∝ p(x) E_{π_t} max{‖Dg(R_t)(ℓ − R_t)‖, ε_t 1[ℓ ≠ 0]}
    stochastic oracle:     q_t(x) ∝ p(x) [E_{π_t} max{‖Dg(R_t)(ℓ − R_t)‖², ε_t² 1[ℓ ≠ 0]}]^(1/2)

with ``ε_t = ε_0 × (unlabeled fraction of the pool)`` (Prop. 3) or ``ε_t = ε_0/(t + 1)`` (Prop. 5).
``ε`` is measured in units of the mean integrand ``Σ_x p(x) a_t(x)``, so it is scale-free.

The estimate is the package's self-normalized estimate ``g(Σ w ℓ / Σ w)``. It is exactly
Marchant's AIS estimator (Eq. 1) for the augmented measure ``ℓ' = (ℓ, 1)``, ``g'(R, s) = g(R/s)``,
so Theorems 1-2, Props. 2-5 and the variance of Sec. 3.3.2 hold for it verbatim; the augmented
``Dg'(R, 1) ℓ' = Dg(R)(ℓ − R)`` is why the proposal is centred. For scale-invariant measures
(precision, recall, F_β, Fowlkes-Mallows and their differences) ``g(cR) = g(R)`` and
``Dg(R)R = 0``, so the estimate, the proposal and the variance all coincide *exactly* with
Marchant's uncentred ones. See ``docs/adaptive.md``.

Layout: :mod:`.proposal` (the Prop. 2 proposal and the ε schedules), :mod:`.evaluator`
(:class:`ActiveEvaluator`) and :mod:`.state` (saving and restoring an evaluator).
"""

from .evaluator import (
    DEFAULT_ORACLE,
    DEFAULT_STAGE_GROWTH,
    MAX_DRAWS_PER_QUERY,
    ActiveEvaluator,
    default_estimator,
    default_oracle,
    default_relative_floor,
)
from .proposal import (
    DEFAULT_EPSILON,
    RELATIVE_FLOOR,
    adaptive_proposal,
    epsilon_schedule,
    model_assisted_proposal,
)
from .state import STATE_VERSION

__all__ = [
    "DEFAULT_EPSILON",
    "DEFAULT_ORACLE",
    "DEFAULT_STAGE_GROWTH",
    "MAX_DRAWS_PER_QUERY",
    "RELATIVE_FLOOR",
    "STATE_VERSION",
    "ActiveEvaluator",
    "adaptive_proposal",
    "default_estimator",
    "default_oracle",
    "default_relative_floor",
    "epsilon_schedule",
    "model_assisted_proposal",
]
