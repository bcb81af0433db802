"""The oracle-model interface and the plug-in oracle.

An *oracle model* turns what is known — the pool (scores, model probabilities) and the labels
gathered so far — into a belief ``π(y|x)`` for every pool item. The adaptive evaluator
(Marchant & Rubinstein (2021), Algorithm 1) calls, once per stage::

    oracle.update(indices, labels, weights)   # the stage's labeled draws
    belief = oracle.belief()                  # posterior predictive for every item
    q = optimal proposal under belief         # Prop. 2 with the epsilon floor

Labels are encoded as the pool encodes them (class indices ``0..C-1``). ``weights`` are the
importance weights ``p(x)/q(x)`` of the draws: models of a *stochastic* oracle use them to undo
the sampling bias (Marchant & Rubinstein (2021), App. H); models of a *deterministic* oracle
condition on each item's (single) label and may ignore them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from ..beliefs import CategoricalBelief, pool_belief
from ._common import LabelCache, check_update

__all__ = ["OracleModel", "PluginOracle", "make_oracle", "register_oracle"]


class OracleModel(ABC):
    """A (Bayesian) model of the labeling oracle.

    Subclasses implement :meth:`initialize`, :meth:`update` and :meth:`belief`; Bayesian ones also
    :meth:`posterior`. :meth:`get_state`/:meth:`set_state` make an evaluation resumable: the state
    must be JSON-serializable or made of NumPy arrays.

    Attributes
    ----------
    deterministic : bool
        ``True`` when the oracle gives each item one fixed label (labeled items then get a point
        mass in :meth:`belief`).
    """

    deterministic: bool = True
    name: str = "oracle"
    _ready: bool = False  # set by initialize()

    def check_ready(self) -> None:
        """Raise :class:`RuntimeError` unless :meth:`initialize` has run."""
        if not self._ready:
            raise RuntimeError("initialize the oracle model with a pool first")

    def config(self) -> dict[str, Any]:
        """The options and pool dimensions a saved state must match (stored by
        :meth:`get_state`, checked by :meth:`set_state`); models with a state override it."""
        raise NotImplementedError(f"oracle model {self.name!r} has no configuration to check")

    @abstractmethod
    def initialize(self, pool, model: str | None = None) -> None:
        """Set the prior from the pool (scores, model probabilities). Called once, before labels."""

    @abstractmethod
    def update(self, indices: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> None:
        """Condition on newly labeled draws (encoded labels; importance weights ``p/q``)."""

    @abstractmethod
    def belief(self) -> CategoricalBelief:
        """The current posterior predictive ``π(y|x)`` for every pool item."""

    def posterior(self, draws: int = 1000, rng: Any = None):
        """The full posterior as an :class:`xarray.DataTree` (Bayesian oracle models only)."""
        raise NotImplementedError(f"oracle model {self.name!r} has no posterior")

    def get_state(self) -> dict[str, Any]:
        """What :meth:`set_state` needs to restore this model exactly."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:  # noqa: B027 - stateless by default
        """Restore a state from :meth:`get_state`."""


class PluginOracle(OracleModel):
    """The evaluated model's own probabilities (Sawade (2012), Sec. 4.2.2: the plug-in belief).

    Under a deterministic oracle, labeled items get a point mass on their label; nothing else is
    learned. With several models the belief is their equal mixture (Sawade (2012), Eq. 5.11).

    Parameters
    ----------
    deterministic : bool, optional
        Whether the oracle gives each item one fixed label, so that labeled items get a point
        mass on it (default ``True``); ``False``: the belief stays the models' probabilities.
    """

    name = "model"

    def __init__(self, deterministic: bool = True) -> None:
        self.deterministic = bool(deterministic)
        self._probs: np.ndarray | None = None
        self.cache: LabelCache | None = None

    def initialize(self, pool, model: str | None = None) -> None:
        models = pool.models if model is None else (pool.check_model(model),)
        self._probs = pool_belief(pool, tuple(models)).probs
        self.cache = LabelCache(self._probs.shape[0])
        self._ready = True

    def update(self, indices, labels, weights=None) -> None:
        """Record the labels (a deterministic oracle's point masses); nothing else is learned.

        Parameters
        ----------
        indices : array-like of int
            Pool indices of the labeled draws.
        labels : array-like of int
            Their encoded labels (class indices).
        weights : array-like, optional
            Importance weights ``p/q`` (checked, not used).

        Raises
        ------
        ValueError
            Indices outside the pool, labels outside ``0..C-1``, or (deterministic oracle) an
            item given a label other than the one it has; nothing of a refused update is kept.
        """
        self.check_ready()
        n_items, n_classes = self._probs.shape
        idx, y, _ = check_update(indices, labels, weights, n_items, n_classes)
        if self.deterministic:
            self.cache.add(idx, y)

    def belief(self) -> CategoricalBelief:
        self.check_ready()
        if not self.cache.n_labeled:
            return CategoricalBelief(self._probs)
        return CategoricalBelief(self.cache.point_masses(self._probs.copy()))

    def get_state(self) -> dict[str, Any]:
        self.check_ready()
        return self.cache.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the labels of :meth:`get_state`; also reads the ``{"known": {item: label}}``
        states written before the label cache (in order of first labeling, as saved)."""
        self.check_ready()
        if "known" in state:
            known = state["known"]
            state = {
                "items": [int(k) for k in known],
                "labels": [int(v) for v in known.values()],
            }
        self.cache.set_state(state)


_REGISTRY: dict[str, Callable[..., OracleModel]] = {"model": PluginOracle}


def register_oracle(name: str, factory: Callable[..., OracleModel]) -> None:
    """Make an oracle model available to :func:`make_oracle` under ``name``.

    Parameters
    ----------
    name : str
        The name (an existing one is replaced).
    factory : callable
        ``factory(**kwargs) -> OracleModel``, e.g. the oracle model's class.
    """
    _REGISTRY[name] = factory


def make_oracle(oracle: str | OracleModel, **kwargs: Any) -> OracleModel:
    """An oracle model from a name (``"model"``, ``"dirichlet-tree"``, ``"calibration"``, …).

    Parameters
    ----------
    oracle : str or OracleModel
        A name registered with :func:`register_oracle`, or an oracle model (returned as is).
    **kwargs
        Options passed to the named oracle's factory (refused with an oracle model).

    Returns
    -------
    OracleModel
        Not yet initialized when built from a name.
    """
    if isinstance(oracle, OracleModel):
        if kwargs:
            raise TypeError("options are only accepted with an oracle name")
        return oracle
    if not isinstance(oracle, str):
        raise TypeError(f"oracle must be a name or an OracleModel, got {type(oracle).__name__}")
    if oracle not in _REGISTRY:
        raise ValueError(f"unknown oracle {oracle!r}; known: {sorted(_REGISTRY)}")
    return _REGISTRY[oracle](**kwargs)
