"""Shared plumbing of the oracle models: prior probabilities from the pool, update validation and
the label cache of a deterministic oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from .._validation import check_encoded_labels, distinct_labels

__all__ = ["LabelCache", "check_update", "log_odds", "prior_probs", "stratification_scores"]


def prior_probs(pool, model: str | None) -> np.ndarray:
    """The model's class probabilities ``s(y|x)``, shape ``(n, C)``, used to set priors.

    The pool's ``probs`` when present; otherwise ``expit(score)`` for a binary pool with scores
    (the convention of Marchant & Rubinstein (2021), Sec. 5.2 for SVM margins).
    """
    if pool.task == "regression":
        raise ValueError("oracle models of class labels need a classification pool")
    name = pool.check_model(model)
    view = pool.view(name)
    if view.prob is not None:
        return np.asarray(view.prob, dtype=float)
    if view.score is not None and pool.n_classes == 2 and pool.pos is not None:
        out = np.empty((pool.n_items, 2))
        out[:, pool.pos] = special.expit(view.score)
        out[:, 1 - pool.pos] = 1.0 - out[:, pool.pos]
        return out
    raise ValueError(
        "the pool has neither probs nor (binary) scores for model "
        f"{name!r}; an oracle model needs one of them to set its prior"
    )


def log_odds(probs: np.ndarray, pos: int) -> np.ndarray:
    """``log P(pos) − log P(other)`` of binary class probabilities ``(n, 2)`` at full precision.

    Unlike ``logit(clip(p, clip, 1 − clip))`` (the calibration oracle's default covariate) this
    keeps items below the clip apart; only exact zeros are floored (at the smallest normal float).

    Parameters
    ----------
    probs : array-like (n, 2)
        Binary class probabilities, columns ordered as the pool's classes.
    pos : int
        Column of the positive class (``0`` or ``1``).

    Returns
    -------
    ndarray (n,)
    """
    probs = np.asarray(probs, dtype=float)
    tiny = np.finfo(float).tiny
    return np.log(np.clip(probs[:, pos], tiny, 1.0)) - np.log(np.clip(probs[:, 1 - pos], tiny, 1.0))


def stratification_scores(pool, model: str | None) -> np.ndarray:
    """Scores that order the items: ``pool.scores[model]`` if present, else the positive-class
    probability (binary) or the largest class probability (multiclass)."""
    name = pool.check_model(model)
    if pool.scores is not None:
        return np.asarray(pool.scores[name], dtype=float)
    probs = prior_probs(pool, name)
    if pool.n_classes == 2 and pool.pos is not None:
        return probs[:, pool.pos]
    return probs.max(axis=1)


def check_update(
    indices: Any, labels: Any, weights: Any, n_items: int, n_classes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate the arguments of :meth:`OracleModel.update`; return int indices, int labels and
    float weights (``weights=None`` means all ones)."""
    idx = np.asarray(indices)
    if idx.ndim != 1:
        raise ValueError(f"indices must be one-dimensional, got shape {idx.shape}")
    if idx.size and idx.dtype.kind not in "iu":
        if idx.dtype.kind == "f" and np.all(idx == np.round(idx)):
            idx = idx.astype(np.int64)
        else:
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    bad = np.flatnonzero((idx < 0) | (idx >= n_items))
    if bad.size:
        raise ValueError(
            f"indices[{bad[0]}] = {idx[bad[0]]} is outside the pool (0..{n_items - 1})"
        )
    y = np.asarray(labels)
    if y.shape != idx.shape:
        raise ValueError(f"labels has shape {y.shape} but indices has shape {idx.shape}")
    y = check_encoded_labels(y, n_classes)
    if weights is None:
        w = np.ones(idx.size)
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != idx.shape:
            raise ValueError(f"weights has shape {w.shape} but indices has shape {idx.shape}")
        bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
        if bad.size:
            raise ValueError(
                f"weights[{bad[0]}] = {w[bad[0]]!r}; importance weights must be positive and finite"
            )
    return idx, y, w


def check_config(state: dict[str, Any], mine: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Refuse a saved state whose configuration differs from this oracle model's on ``keys``."""
    cfg = state.get("config", {})
    for key in keys:
        if key in cfg and cfg[key] != mine[key]:
            raise ValueError(
                f"state has {key}={cfg[key]!r} but this oracle model has {key}={mine[key]!r}; "
                "initialize it with the same pool and options"
            )


def common_state(oracle) -> dict[str, Any]:
    """The part of a fitted oracle model's state that every model shares: its name, its
    ``config()``, the update count and, for a deterministic oracle, the label cache."""
    oracle.check_ready()
    state: dict[str, Any] = {
        "oracle": oracle.name,
        "config": oracle.config(),
        "n_updates": oracle.n_updates,
    }
    if oracle.deterministic:
        state.update(oracle.cache.get_state())
    return state


def restore_common_state(oracle, state: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Undo :func:`common_state` after checking the configuration on ``keys``
    (:func:`check_config`)."""
    oracle.check_ready()
    check_config(state, oracle.config(), keys)
    oracle.n_updates = int(state.get("n_updates", 0))
    if oracle.deterministic:
        oracle.cache.set_state(state)


class LabelCache:
    """The labels of a deterministic oracle: one label per item, asked once.

    Stores the labeled items in order of first labeling (so the state is small and exact).
    """

    def __init__(self, n_items: int) -> None:
        self.n_items = int(n_items)
        self.label = np.full(self.n_items, -1, dtype=np.int64)
        self.items = np.empty(0, dtype=np.int64)

    def add(self, idx: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Record labels; return the items (and labels) that are new.

        Raises
        ------
        ValueError
            If an item gets two different labels (a deterministic oracle has one per item).
        """
        if idx.size == 0:
            return idx, y
        distinct_labels(idx, y)  # an item with two different labels is refused
        uniq, first = np.unique(idx, return_index=True)
        uy = y[first]
        old = self.label[uniq]
        known = old >= 0
        bad = np.flatnonzero(known & (old != uy))
        if bad.size:
            i = int(uniq[bad[0]])
            raise ValueError(
                f"item {i} was labeled {int(old[bad[0]])} before and {int(uy[bad[0]])} now; a "
                "deterministic oracle gives one label per item (use deterministic=False)"
            )
        # keep the order of first appearance for reproducible states
        new_mask = ~known
        new_items, new_labels = uniq[new_mask], uy[new_mask]
        pos = first[new_mask]
        o = np.argsort(pos, kind="stable")
        new_items, new_labels = new_items[o], new_labels[o]
        self.label[new_items] = new_labels
        self.items = np.concatenate([self.items, new_items])
        return new_items, new_labels

    @property
    def n_labeled(self) -> int:
        return int(self.items.size)

    def labels_of_items(self) -> np.ndarray:
        return self.label[self.items]

    def point_masses(self, probs: np.ndarray) -> np.ndarray:
        """Overwrite the rows of labeled items by a point mass on their label (in place)."""
        if self.items.size:
            probs[self.items] = 0.0
            probs[self.items, self.label[self.items]] = 1.0
        return probs

    def get_state(self) -> dict[str, Any]:
        return {"items": self.items.copy(), "labels": self.label[self.items].copy()}

    def set_state(self, state: dict[str, Any]) -> None:
        items = np.asarray(state.get("items", []), dtype=np.int64)
        labels = np.asarray(state.get("labels", []), dtype=np.int64)
        if items.shape != labels.shape:
            raise ValueError("state has mismatched 'items' and 'labels'")
        if items.size and (items.min() < 0 or items.max() >= self.n_items):
            raise ValueError("state has labeled items outside the pool")
        self.label = np.full(self.n_items, -1, dtype=np.int64)
        self.label[items] = labels
        self.items = items.copy()
