"""Pools shared by the comparison, sequential and planning tests."""

from __future__ import annotations

import numpy as np
from scipy import special

import bayes_activeeval as bae
from bayes_activeeval.proposals import Proposal


def binary_pool(m=4000, seed=0, noises=(0.3, 0.8)):
    """Two (or more) calibrated-ish models of different quality on a balanced binary pool."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(m)
    eta = special.expit(2.5 * u)
    y = (rng.random(m) < eta).astype(int)
    preds, probs = {}, {}
    for k, nz in enumerate(noises):
        logit = 2.5 * (u + nz * rng.standard_normal(m)) / np.sqrt(1 + (2.5 * nz) ** 2 * 0.35)
        pr = special.expit(logit)
        preds[f"m{k}"] = (pr > 0.5).astype(int)
        probs[f"m{k}"] = pr
    return bae.Pool(predictions=preds, probs=probs, classes=[0, 1]), y


def permuted_null(pool, labels, models, q):
    """Every item in k copies with the models' predictions cyclically permuted: all k pool risks
    are exactly equal. Drawing an item from ``q`` and a copy uniformly is the thesis' H0 protocol
    (swap the two models' predictions with probability 1/2 per draw, Sawade (2012), Sec. 5.4)."""
    k = len(models)
    preds, probs = {}, {}
    for i, name in enumerate(models):
        preds[name] = np.concatenate([pool.view(models[(i + s) % k]).pred for s in range(k)])
        probs[name] = np.concatenate([pool.view(models[(i + s) % k]).prob for s in range(k)])
    null = bae.Pool(predictions=preds, probs=probs, classes=pool.classes)
    prop = Proposal(np.tile(q, k) / k, null.p, "null")
    return null, np.tile(labels, k), prop
