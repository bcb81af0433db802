"""Precision at ``k``: a threshold measure in disguise, so the package's generalized measures cover it.

The top ``k`` items of the pool by a model's score are known before any label is bought, so
precision at ``k`` is the precision of the fixed rule "predict positive iff the score is at least the
``k``-th highest": ``ℓ = [y·1(top), 1(top)]``, ``g = R1/R2`` (Marchant & Rubinstein (2021),
Table 1). The measure is bound to the model whose ranking fixes the threshold (see
:func:`precision_at_k`). Every estimator, proposal, comparison and the adaptive loop apply unchanged; the optimal
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
    """The :class:`~bayes_activeeval.Measure` "precision among ``model``'s ``k`` top-scored items".

    The measure is **bound to** ``model`` (``measure.models == (model,)``, name
    ``"precision@k[model]"``): its threshold is ``model``'s ``k``-th highest score on ``pool``,
    and its loss reads ``model``'s scores, whatever model a call names. The package therefore
    refuses it for any other model — :func:`~bayes_activeeval.estimate` or
    :func:`~bayes_activeeval.optimal_proposal` with ``model=`` naming another model (``model=``
    may be omitted or name the bound model), and
    :func:`~bayes_activeeval.compare`, :func:`~bayes_activeeval.measures.stack` or
    :func:`~bayes_activeeval.measures.difference` over several models (it is already bound) —
    with a ``ValueError``. Before, the measure was unbound: evaluated "for" another model it
    applied this model's threshold to that model's scores, which is neither model's precision
    at ``k`` (``compare`` of two models on 20,000 passive draws gave ``Δ̂ = +0.090`` for a true
    ``−0.05``). Build one measure per model, ``precision_at_k(pool, k, "a")`` and
    ``precision_at_k(pool, k, "b")``, and estimate each. Why not one measure whose threshold
    follows the model it is evaluated for: a measure's loss sees a model's predictions and
    scores on the drawn items, not the model's name or the rest of the pool, so it cannot tell
    which model's ``k``-th score to use.

    Parameters
    ----------
    pool : Pool
        A binary pool; items are ranked by the model's ``scores`` (else its probability of the
        positive class).
    k : int
        How many top items; items tied with the ``k``-th highest score are all included.
    model : str, optional
        The model whose top ``k`` items are scored (default: the pool's only model).

    Returns
    -------
    Measure
        ``"precision@k[model]"``, bound to ``model``, usable with
        :func:`~bayes_activeeval.estimate`, :func:`~bayes_activeeval.optimal_proposal`,
        :class:`~bayes_activeeval.ActiveEvaluator`, … on this pool (the threshold is fixed from
        it) without ``model=`` or with ``model=`` naming the bound model.

    Raises
    ------
    ValueError
        For ``k`` outside ``[1, n]`` or a model not in the pool.

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> from bayes_activeeval.threshold_free import precision_at_k
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.01, rng=0)
    >>> m = precision_at_k(sp.pool, 100)
    >>> m.name
    'precision@100[model]'
    >>> d = bae.optimal_proposal(sp.pool, m).draw(200, rng=1)
    >>> est = bae.estimate(sp.pool, m, d, sp.labeler(d.indices))
    """
    name = pool.check_model(model)
    s = model_scores(pool, name)
    if not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 1 <= k <= s.size):
        raise ValueError(f"k must be an integer in [1, {s.size}], got {k!r}")
    threshold = float(np.partition(s, s.size - k)[s.size - k])
    has_scores = pool.scores is not None

    def loss(y, views):
        # bound to ``name``: the package hands a dict of views keyed by model name
        view = views[name] if isinstance(views, dict) else views
        score = view.score if has_scores else view.positive_prob()
        top = (score >= threshold).astype(float)
        yy = (y == view.pos).astype(float)
        return np.stack([yy * top, top], axis=1)

    return Measure(
        f"precision@{k}[{name}]",
        loss,
        _ratio,
        _ratio_jacobian,
        components=("tp_top", "top"),
        task="binary",
        greater_is_better=True,
        scale_invariant=True,
        models=(name,),
        bounds=(0.0, 1.0),
    )
