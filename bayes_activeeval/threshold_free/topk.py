"""Precision at ``k``: a threshold measure in disguise, so the package's generalized measures cover it.

The top ``k`` items of the pool by a model's score are known before any label is bought, so
precision at ``k`` is the precision of the fixed rule "predict positive iff the score is at least the
``k``-th highest": ``ℓ = [y·1(top), 1(top)]``, ``g = R1/R2`` (Marchant & Rubinstein (2021),
Table 1). Every estimator, proposal, comparison and the adaptive loop apply unchanged; the optimal
proposal samples only the top ``k`` (the loss vanishes elsewhere and the measure is scale-invariant).
"""

from __future__ import annotations

import numpy as np

from ..measures import Measure
from .estimates import model_scores

__all__ = ["precision_at_k"]


def _ratio(R: np.ndarray) -> np.ndarray:
    return np.array([R[0] / R[1]]) if R[1] != 0 else np.array([np.nan])


def _ratio_jacobian(R: np.ndarray) -> np.ndarray:
    if R[1] == 0:
        return np.full((1, 2), np.nan)
    return np.array([[1.0 / R[1], -R[0] / R[1] ** 2]])


def precision_at_k(pool, k: int, model: str | None = None) -> Measure:
    """The :class:`~bayes_activeeval.Measure` "precision among the ``k`` top-scored items".

    Parameters
    ----------
    pool : Pool
        A binary pool; items are ranked by the model's ``scores`` (else its probability of the
        positive class).
    k : int
        How many top items; items tied with the ``k``-th highest score are all included.
    model : str, optional

    Returns
    -------
    Measure
        ``"precision@k"``, usable with :func:`~bayes_activeeval.estimate`,
        :func:`~bayes_activeeval.optimal_proposal`, :class:`~bayes_activeeval.ActiveEvaluator`, …
        on this pool (the threshold is fixed from it).

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> from bayes_activeeval.threshold_free import precision_at_k
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.01, rng=0)
    >>> m = precision_at_k(sp.pool, 100)
    >>> d = bae.optimal_proposal(sp.pool, m).draw(200, rng=1)
    >>> est = bae.estimate(sp.pool, m, d, sp.labeler(d.indices))
    """
    name = pool.check_model(model)
    s = model_scores(pool, name)
    if not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 1 <= k <= s.size):
        raise ValueError(f"k must be an integer in [1, {s.size}], got {k!r}")
    threshold = float(np.partition(s, s.size - k)[s.size - k])
    has_scores = pool.scores is not None

    def loss(y, view):
        score = view.score if has_scores else view.positive_prob()
        top = (score >= threshold).astype(float)
        yy = (y == view.pos).astype(float)
        return np.stack([yy * top, top], axis=1)

    return Measure(
        f"precision@{k}",
        loss,
        _ratio,
        _ratio_jacobian,
        components=("tp_top", "top"),
        task="binary",
        greater_is_better=True,
        scale_invariant=True,
        bounds=(0.0, 1.0),
    )
