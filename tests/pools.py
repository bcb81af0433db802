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


def overlap_pool(m=5000, errors=(500, 500), overlap=250, seed=0):
    """Two binary classifiers, ``a`` wrong on ``errors[0]`` items and ``b`` on ``errors[1]``,
    ``overlap`` of them shared (``overlap = errors[0]``: ``b``'s errors are ``a``'s plus more),
    with rough probabilities around 0.7/0.3: they agree on most items, so an active proposal
    puts large weights on the few draws where they agree."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, m)
    perm = rng.permutation(m)
    ea, eb = errors
    wa = perm[:ea]
    wb = np.concatenate([perm[:overlap], perm[ea : ea + eb - overlap]])
    preds, probs = {}, {}
    for name, w in (("a", wa), ("b", wb)):
        pred = y.copy()
        pred[w] = 1 - pred[w]
        preds[name] = pred
        probs[name] = np.clip(np.where(pred == 1, 0.7, 0.3) + rng.normal(0, 0.1, m), 0.01, 0.99)
    return bae.Pool(predictions=preds, probs=probs, classes=[0, 1]), y


def swapped_pool(n=20_000, prevalence=0.02, seed=5):
    """Two models with exactly equal AUC and AP on the pool: model b's scores are model a's with
    the scores of label-identical neighbours (in the latent feature) swapped. Returns the pool,
    the labels and their true ``η(x) = P(y = 1 | x)``; the models' own probabilities
    ``expit(s)`` are over-dispersed (``s`` adds noise to the true log-odds)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(n)
    a0 = np.log(prevalence / (1 - prevalence)) - 2.0
    eta = special.expit(a0 + 2.5 * u)
    y = (rng.random(n) < eta).astype(int)
    sa = a0 + 2.5 * (u + 0.5 * rng.standard_normal(n))
    order = np.lexsort((u, y))
    partner = np.empty(n, dtype=np.int64)
    pairs = order[: n - n % 2].reshape(-1, 2)
    same = y[pairs[:, 0]] == y[pairs[:, 1]]
    partner[order] = order
    partner[pairs[same, 0]], partner[pairs[same, 1]] = pairs[same, 1], pairs[same, 0]
    sb = sa[partner]
    pa, pb = special.expit(sa), special.expit(sb)
    pool = bae.Pool(
        predictions={"a": (pa > 0.5).astype(int), "b": (pb > 0.5).astype(int)},
        probs={"a": pa, "b": pb},
        scores={"a": sa, "b": sb},
        classes=[0, 1],
    )
    return pool, y, eta
