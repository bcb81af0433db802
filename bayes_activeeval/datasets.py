"""Synthetic pools with known truth, and the embedded demo pool.

Nothing is downloaded: every pool here is generated deterministically from a seed.

The classification generator draws a latent feature ``u ∼ N(0, 1)`` per item, a true positive
probability ``η(x) = σ(a + b u)`` (``a`` solved so that the mean of ``η`` is the prevalence) and a
label ``y ∼ Bernoulli(η)``. The model sees ``u`` through noise: its logit is
``a + b (u + ε)``, ``ε ∼ N(0, noise²)``, which makes realistic, mildly over-confident
probabilities. ``calibration`` distorts what the model reports:

- ``"calibrated"`` — the model's probability ``σ(a + b(u + ε))``;
- ``"overconfident"`` — logits multiplied by 2;
- ``"svm"`` — probabilities squashed like Platt-less SVM margins mapped through a sigmoid
  (``σ(0.25·logit + 1)``): wrong scale and offset, right ordering;
- ``"stale"`` — the score ordering is right but the reported base rate is ten times too high.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ._validation import check_count, check_fraction, check_rng, show
from .pool import Pool

__all__ = ["SyntheticPool", "load_demo", "make_classification_pool", "make_regression_pool"]

DEMO_SIZE = 100_000
DEMO_PREVALENCE = 0.005
DEMO_SEED = 20121203


@dataclass(frozen=True)
class SyntheticPool:
    """A generated pool with its hidden truth.

    Made by :func:`make_classification_pool`, :func:`make_regression_pool` and
    :func:`load_demo`.

    Parameters
    ----------
    pool : Pool
        The pool the evaluator sees (the models' outputs, no labels).
    labels : ndarray (n,)
        The true label of every item.
    truth : ndarray (n,)
        The true ``P(y = 1 | x)`` (classification) or the noiseless mean ``μ(x)`` (regression).

    Attributes
    ----------
    pool : Pool
    labels : ndarray (n,)
        The true labels (held back from the evaluator; used to simulate the oracle).
    truth : ndarray (n,)
        The true ``P(y = 1 | x)`` (classification) or the noiseless mean (regression).
    """

    pool: Pool
    labels: np.ndarray
    truth: np.ndarray

    def labeler(self, indices) -> np.ndarray:
        """A deterministic oracle: the true labels of the given items."""
        return self.labels[np.asarray(indices)]


def _check_noise(noise) -> float:
    """``noise`` as a finite number >= 0 (0: a model without error), else an error naming it."""
    if isinstance(noise, (bool, str, bytes)):
        raise TypeError(f"noise must be a number, got {noise!r}")
    try:
        value = float(noise)
    except (TypeError, ValueError):
        raise TypeError(f"noise must be a number, got {noise!r}") from None
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {show(noise)}")
    return value


def _solve_intercept(u: np.ndarray, b: float, prevalence: float) -> float:
    def gap(a):
        return special.expit(a + b * u).mean() - prevalence

    return float(optimize.brentq(gap, -60.0, 60.0, xtol=1e-12))


def make_classification_pool(
    n: int = 100_000,
    prevalence: float = 0.01,
    *,
    separation: float = 2.5,
    noise: float = 0.4,
    calibration: str = "calibrated",
    threshold: float = 0.5,
    n_models: int = 1,
    rng=None,
) -> SyntheticPool:
    """A binary pool with rare positives and a model of realistic quality.

    Parameters
    ----------
    n : int
        Number of items.
    prevalence : float
        Expected fraction of positives (exact in expectation over labels).
    separation : float
        Slope ``b`` of the true log-odds in the latent feature (larger = easier problem).
    noise : float
        Standard deviation of the model's error in the latent feature (finite, ``>= 0``).
    calibration : {"calibrated", "overconfident", "svm", "stale"}
        How the reported probabilities are distorted (the ordering is kept).
    threshold : float
        The model predicts positive when its reported probability exceeds this.
    n_models : int
        Models with independent noise; named ``"m0"``, ``"m1"``, … when more than one.
    rng : None, int or Generator

    Returns
    -------
    SyntheticPool
    """
    rng = check_rng(rng)
    check_fraction(prevalence, "prevalence", allow_zero=False)
    if n < 1:
        raise ValueError(f"n must be positive, got {n!r}")
    noise = _check_noise(noise)
    n_models = check_count(n_models, "n_models")
    u = rng.standard_normal(n)
    a = _solve_intercept(u, separation, prevalence)
    eta = special.expit(a + separation * u)
    y = (rng.random(n) < eta).astype(np.int8)
    preds, probs, scores = {}, {}, {}
    for k in range(n_models):
        logit = a + separation * (u + noise * rng.standard_normal(n))
        if calibration == "calibrated":
            rep = logit
        elif calibration == "overconfident":
            rep = 2.0 * logit
        elif calibration == "svm":
            rep = 0.25 * logit + 1.0
        elif calibration == "stale":
            rep = logit + np.log(10.0)
        else:
            raise ValueError(
                "calibration must be 'calibrated', 'overconfident', 'svm' or 'stale', "
                f"got {calibration!r}"
            )
        prob = special.expit(rep)
        name = "model" if n_models == 1 else f"m{k}"
        probs[name] = prob
        preds[name] = (prob > threshold).astype(np.int8)
        scores[name] = logit
    pool = Pool(predictions=preds, probs=probs, scores=scores, classes=[0, 1])
    return SyntheticPool(pool, y, eta)


def make_regression_pool(
    n: int = 50_000,
    *,
    noise: float = 1.0,
    heteroscedastic: float = 1.0,
    misspecified: float = 0.0,
    n_models: int = 1,
    rng=None,
) -> SyntheticPool:
    """A regression pool whose model reports a Gaussian predictive ``N(f(x), τ_x²)``.

    The truth is ``y = μ(x) + σ(x) ε`` with ``σ(x) = noise · exp(0.5 · heteroscedastic · z)``; the model
    predicts ``f(x) = μ(x) + δ(x)`` with a small error ``δ`` and reports ``τ_x² = σ(x)² + Var δ``
    (a calibrated predictive). ``misspecified`` scales the reported ``τ`` wrongly
    (``τ·exp(misspecified · z')``) to test robustness.

    Parameters
    ----------
    n : int, optional
        Number of items (default 50,000).
    noise : float, optional
        Scale of the label noise ``σ(x)`` (default 1.0; finite, ``>= 0``); the model's error
        ``δ`` has standard deviation ``0.3 · noise``.
    heteroscedastic : float, optional
        How much ``σ(x)`` varies between items through the item's ``z ∼ N(0, 1)`` (default 1.0;
        0 gives constant noise).
    misspecified : float, optional
        Spread of the random factor ``exp(misspecified · z')`` on the reported ``τ`` (default 0:
        the reported predictive is calibrated).
    n_models : int, optional
        Models with independent errors; named ``"m0"``, ``"m1"``, … when more than one (default
        1, named ``"model"``).
    rng : None, int or Generator, optional
        Seed or generator.

    Returns
    -------
    SyntheticPool
        With the real-valued labels and ``truth = μ(x)``.
    """
    rng = check_rng(rng)
    noise = _check_noise(noise)
    n_models = check_count(n_models, "n_models")
    x = rng.standard_normal(n)
    z = rng.standard_normal(n)
    mu = 2.0 * np.sin(x) + x
    sigma = noise * np.exp(0.5 * heteroscedastic * z)
    y = mu + sigma * rng.standard_normal(n)
    preds, stds = {}, {}
    for k in range(n_models):
        err_sd = 0.3 * noise
        f = mu + err_sd * rng.standard_normal(n)
        tau = np.sqrt(sigma**2 + err_sd**2)
        if misspecified:
            tau = tau * np.exp(misspecified * rng.standard_normal(n))
        name = "model" if n_models == 1 else f"m{k}"
        preds[name], stds[name] = f, tau
    pool = Pool(predictions=preds, predictive_std=stds)
    return SyntheticPool(pool, y, mu)


def load_demo() -> SyntheticPool:
    """The embedded demo pool: 100,000 items, 0.5% positives, a good but imperfect model.

    Generated deterministically (seed fixed), so every call returns the same pool and labels.
    """
    return make_classification_pool(
        DEMO_SIZE,
        DEMO_PREVALENCE,
        separation=6.0,
        noise=0.2,
        calibration="calibrated",
        threshold=0.3,
        rng=DEMO_SEED,
    )
