"""The adaptive evaluator's threshold-free estimate counts a class by its distinct items, as
:func:`~bayes_activeeval.threshold_free.rank_estimate` does (``items=`` of
``rank_estimate_arrays``): when the only positive item is drawn several times, DeLong's
within-class variance is undefined, as for a single draw, whichever the oracle."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.posterior.calibration import calibration_map
from bayes_activeeval.proposals import Draws

N = 60


def _one_positive(with_probs: bool):
    """A pool of ``N`` items whose only positive (item 0) has the highest score."""
    rng = np.random.default_rng(0)
    s = np.r_[2.5, rng.normal(0, 1, N - 1)]
    y = np.r_[1, np.zeros(N - 1, int)]
    p = 1 / (1 + np.exp(-s))
    pool = bae.Pool((s > 0).astype(int), p if with_probs else None, scores=s)
    return pool, y


def _run_until_repeated_positive(pool, y, deterministic: bool, budget: int):
    """The first seed whose run draws the positive item at least twice (and labels it: the only
    positive); the evaluator, its estimate and the warnings of ``estimate()``."""
    for seed in range(40):
        ev = bae.ActiveEvaluator(pool, "roc_auc", deterministic=deterministic, rng=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev.run(lambda i: y[i], budget, batch_size=5, progress=False)
        d = ev.draws()
        if (d["label"] == 1).sum() >= 2:
            assert set(d["item"][d["label"] == 1]) == {0}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = ev.estimate()
            return ev, est, caught
    pytest.fail("no seed in 0..39 drew the positive item twice")


def _draws(ev) -> Draws:
    d = ev.draws()
    return Draws(d["item"].to_numpy(), d["weight"].to_numpy(), d["q"].to_numpy())


def test_stochastic_repeated_only_positive_takes_the_single_item_fallback():
    """No probabilities in the pool and a stochastic oracle: no belief answers for the variance,
    so the single positive item drawn k times takes the Kish fallback with a warning, exactly
    as ``rank_estimate(..., oracle="stochastic")`` on the same draws (before: the empirical
    variance, the positives' spread read from k equal influence terms)."""
    pool, y = _one_positive(with_probs=False)
    ev, est, caught = _run_until_repeated_positive(pool, y, deterministic=False, budget=15)
    k = int((ev.draws()["label"] == 1).sum())
    assert est.details["variance"] == "kish"
    msgs = [str(c.message) for c in caught if c.category is bae.UndefinedEstimateWarning]
    assert any(f"the positives are a single item drawn {k} times" in m for m in msgs), msgs
    draws = _draws(ev)
    with pytest.warns(bae.UndefinedEstimateWarning, match=f"single item drawn {k} times"):
        ref = tf.rank_estimate(pool, "roc_auc", draws, y[draws.indices], oracle="stochastic")
    assert ref.details["variance"] == "kish"
    np.testing.assert_allclose(est.values, ref.values, rtol=1e-12)
    np.testing.assert_allclose(est.cov, ref.cov, rtol=1e-12, atol=1e-15)
    assert est.kish[0] == pytest.approx(1.0)  # the positives are one item


def test_deterministic_repeated_only_positive_has_no_empirical_variance():
    """A deterministic oracle: the free repeats of the labeled positive do not make a spread of
    the positives, so the empirical (DeLong) variance is undefined and the guard's belief answers
    for it, as in ``rank_estimate`` given the same belief (the calibration of the scores to the
    labeled items); before, the empirical candidate was finite."""
    pool, y = _one_positive(with_probs=True)
    ev, est, _ = _run_until_repeated_positive(pool, y, deterministic=True, budget=25)
    assert not np.all(np.isfinite(est.details["cov_empirical"]))
    assert est.details["variance"] == "belief"
    draws = _draws(ev)
    known = np.unique(draws.indices)
    pi = calibration_map(pool, ("model",), known, y[known])
    ref = tf.rank_estimate(pool, "roc_auc", draws, y[draws.indices], belief=pi)
    assert ref.details["variance"] == est.details["variance"]
    np.testing.assert_allclose(est.values, ref.values, rtol=1e-12)
    np.testing.assert_allclose(est.cov, ref.cov, rtol=1e-12, atol=1e-15)
