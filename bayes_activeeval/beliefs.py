"""Beliefs ``π(y | x)``: what we currently think each item's label distribution is.

A belief feeds the optimal proposal (Sawade (2012), Sec. 4.2.2; Marchant & Rubinstein (2021),
Prop. 2). Two kinds cover the package:

- :class:`CategoricalBelief` — class probabilities per item (classification);
- :class:`GaussianBelief` — a finite mixture of Gaussians per item (regression). One component is
  the model's predictive ``N(f(x), τ_x²)`` (Sawade (2012), Eq. 4.23); comparing models uses the
  equal mixture of their predictives (Sawade (2012), Eq. 5.11), taken exactly rather than
  moment-matched.

Expectations under a belief, ``E_{y∼π}[h(x, y)]``, are exact sums over classes, and Gauss–Hermite
quadrature for Gaussians (exact for polynomials in ``y`` of degree below ``2·nodes``, so for the
squared loss and its square).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._validation import MissingInput, as_array, check_finite, check_probabilities, show

__all__ = ["Belief", "CategoricalBelief", "GaussianBelief", "pool_belief"]


def row_sums(a: np.ndarray) -> np.ndarray:
    """Row sums of an (n, C) array, column by column (much faster than ``sum(axis=1)`` for small C)."""
    out = a[:, 0].copy()
    for c in range(1, a.shape[1]):
        out += a[:, c]
    return out


class Belief:
    """Base class: a label distribution for every item of a pool."""

    n_items: int

    def expect(self, fn: Callable[[np.ndarray, slice], np.ndarray], sl: slice) -> np.ndarray:
        """``E_{y∼π(·|x)}[fn(y, sl)]`` for the items ``sl`` (a slice or an index array)."""
        raise NotImplementedError

    def floored(self, floor: float) -> Belief:
        """A copy with every class probability at least ``floor`` (renormalized)."""
        return self


class CategoricalBelief(Belief):
    """Class probabilities ``π(y = c | x)``, shape ``(n, C)``.

    Parameters
    ----------
    probs : array-like (n, C)
        Rows must be probability vectors.
    name : str
        What the error messages call the array (default ``"belief"``).
    validate : bool
        Check that every entry is a probability and every row sums to 1 (within ``1e-6``);
        ``False`` skips the check for rows already known to be convex combinations.
    """

    def __init__(self, probs: np.ndarray, *, name: str = "belief", validate: bool = True) -> None:
        arr = np.asarray(probs, dtype=float)
        if arr.ndim != 2 or arr.shape[1] < 2:
            raise ValueError(f"{name} must have shape (n_items, n_classes), got {arr.shape}")
        if validate:
            check_probabilities(arr, name)
            sums = row_sums(arr)
            bad = np.flatnonzero(np.abs(sums - 1.0) > 1e-6)
            if bad.size:
                raise ValueError(
                    f"{name}[{bad[0]}] sums to {show(sums[bad[0]])}; rows must sum to 1"
                )
        self.probs = arr
        self.n_items, self.n_classes = arr.shape

    def expect(self, fn, sl):
        out = None
        for c in range(self.n_classes):
            pc = self.probs[sl, c]
            val = fn(np.full(pc.shape[0], c, dtype=np.int32), sl)
            term = pc.reshape((-1,) + (1,) * (val.ndim - 1)) * val
            out = term if out is None else out + term
        return out

    def floored(self, floor: float) -> CategoricalBelief:
        if floor <= 0:
            return self
        if floor * self.n_classes >= 1:
            raise ValueError(
                f"belief_floor={floor!r} is too large for {self.n_classes} classes "
                f"(must be below {1 / self.n_classes:g})"
            )
        if self.probs.min() >= floor:
            return self
        p = np.maximum(self.probs, floor)
        p /= row_sums(p)[:, None]
        return CategoricalBelief(p, validate=False)


class GaussianBelief(Belief):
    """A per-item mixture of Gaussians ``Σ_k w_k N(mean[:, k], std[:, k]²)``.

    Parameters
    ----------
    mean, std : array-like (n,) or (n, K)
        Component means and standard deviations (``std >= 0``; zero is a point mass).
    weights : array-like (K,), optional
        Mixture weights (equal by default).
    nodes : int
        Gauss–Hermite nodes per component (default 20).
    """

    def __init__(self, mean, std, weights=None, *, nodes: int = 20) -> None:
        mean = np.asarray(mean, dtype=float)
        std = np.asarray(std, dtype=float)
        if mean.ndim == 1:
            mean = mean[:, None]
        if std.ndim == 1:
            std = std[:, None]
        if mean.shape != std.shape:
            raise ValueError(f"mean has shape {mean.shape} but std has shape {std.shape}")
        check_finite(mean, "mean")
        check_finite(std, "std")
        if np.any(std < 0):
            raise ValueError("std must be non-negative")
        K = mean.shape[1]
        w = np.full(K, 1.0 / K) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (K,) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError(
                f"weights must be {K} non-negative numbers summing to 1, got {weights!r}"
            )
        self.mean, self.std, self.weights = mean, std, w
        self.n_items = mean.shape[0]
        t, h = np.polynomial.hermite.hermgauss(nodes)
        self._t = t * np.sqrt(2.0)
        self._h = h / np.sqrt(np.pi)

    def expect(self, fn, sl):
        out = None
        for k, wk in enumerate(self.weights):
            mu, sd = self.mean[sl, k], self.std[sl, k]
            for t, h in zip(self._t, self._h, strict=True):
                val = fn(mu + sd * t, sl)
                term = (wk * h) * val
                out = term if out is None else out + term
        return out

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of the mixture per item."""
        m = self.mean @ self.weights
        second = (self.mean**2 + self.std**2) @ self.weights
        return m, second - m**2


def pool_belief(pool, models: tuple[str, ...]) -> Belief:
    """The plug-in belief from the pool: the models' own predictive distributions.

    One model: its probabilities (Sawade (2012), Sec. 4.2.2) or its Gaussian predictive
    ``N(f(x), τ_x²)`` (Eq. 4.23). Several models: their equal mixture (Sawade (2012), Eq. 5.11).

    Parameters
    ----------
    pool : Pool
        A classification pool with ``probs`` or a regression pool with ``predictive_std``.
    models : tuple of str
        The models whose predictive distributions form the belief (at least one).

    Returns
    -------
    Belief
        A :class:`CategoricalBelief` ``(n, C)`` for classification, a :class:`GaussianBelief`
        with one equally weighted component per model for regression.
    """
    require_plugin(pool)
    if pool.task == "regression":
        mean = np.stack([pool.view(m).pred for m in models], axis=1)
        std = np.stack([pool.view(m).std for m in models], axis=1)
        return GaussianBelief(mean, std)
    probs = pool.view(models[0]).prob
    if len(models) > 1:
        probs = sum(pool.view(m).prob for m in models) / len(models)
    return CategoricalBelief(probs, validate=False)  # the pool validated its probabilities


def require_plugin(pool) -> None:
    """Raise :class:`~bayes_activeeval._validation.MissingInput` naming the column when ``pool``
    (in memory or lazy) cannot give the plug-in belief: a classification pool without
    ``probs``, a regression pool without ``predictive_std``."""
    if pool.task == "regression":
        if not pool.has_std():
            raise MissingInput(
                "the pool has no predictive_std, so there is no belief about the labels; ",
                "predictive_std",
                or_belief=True,
            )
    elif not pool.has_probs():
        raise MissingInput(
            "the pool has no probs, so there is no belief about the labels; ",
            "probs",
            or_belief=True,
        )


def as_belief(pool, belief, models: tuple[str, ...]) -> Belief:
    """Accept ``None`` (the pool's plug-in), a :class:`Belief`, or an array of class probabilities."""
    if belief is None:
        out = pool_belief(pool, models)
    elif isinstance(belief, Belief):
        out = belief
    else:
        if pool.task == "regression":
            raise TypeError("for a regression pool pass belief=GaussianBelief(mean, std)")
        arr = as_array(belief, "belief")
        if arr.ndim == 1 and pool.n_classes == 2:
            if pool.pos is None:
                raise ValueError(
                    f"belief is a vector of P(y = pos_label), but the classes "
                    f"{show(pool.classes)} have no default positive class: give the pool "
                    "pos_label=, or belief as (n, 2) class probabilities"
                )
            check_probabilities(arr, "belief")
            full = np.empty((arr.size, 2))
            full[:, pool.pos] = arr
            full[:, 1 - pool.pos] = 1 - arr
            arr = full
        out = CategoricalBelief(arr)
    if out.n_items != pool.n_items:
        raise ValueError(f"belief covers {out.n_items} items but the pool has {pool.n_items}")
    if isinstance(out, CategoricalBelief) and pool.task != "regression":
        if out.n_classes != pool.n_classes:
            raise ValueError(
                f"belief has {out.n_classes} classes but the pool has {pool.n_classes}"
            )
    return out
