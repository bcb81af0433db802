"""compare() and multiple_comparison() on balanced accuracy under an active proposal: a sample
with no discordant draw in some class (the pool of ``benchmarks/macro_intervals.py``, ``flip 2
%``: no drawn positive where the models disagree) gets, by default, the test's interval widened
by an allowance for that class's difference (``class_allowance``), which the generalized score
test's interval lacks. Monte Carlo tolerance: 3 binomial standard errors of the coverage at the
nominal 0.95."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayes_activeeval as bae

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import macro_intervals

N = 400
MODELS = ("a", "b")


@pytest.fixture(scope="module")
def flip():
    pool, y, truth = macro_intervals._compare_pools()["flip 2 %"]
    prop = bae.comparison_proposal(pool, "balanced_accuracy", models=MODELS)
    dis = pool.view("a").pred != pool.view("b").pred
    return pool, y, truth, prop, dis


def _compare(pool, y, prop, d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bae.compare(pool, "balanced_accuracy", d, y[d.indices], MODELS, proposal=prop)


def allowance(restricted, z=1.959963984540054):
    from bayes_activeeval.comparison.results import class_allowance

    return class_allowance(restricted, z)


def _draws(flip, positives_discordant: bool):
    """The first draw (rng = 1000, 1001, …) with / without a drawn positive where the models
    disagree."""
    _, y, _, prop, dis = flip
    for r in range(1000, 1200):
        d = prop.draw(N, rng=r)
        k = int(np.sum((y[d.indices] == 1) & dis[d.indices]))
        if (k > 0) == positives_discordant:
            return d
    raise AssertionError("no such draw")


def test_no_discordant_positive_widens_test_interval(flip):
    pool, y, truth, prop, _ = flip
    d = _draws(flip, positives_discordant=False)
    c = _compare(pool, y, prop, d)
    test = c.confidence_interval(method="test")
    default = c.confidence_interval()
    assert default.low <= truth <= default.high
    assert not test.low <= truth <= test.high  # the mechanism: the positives' half is missing
    assert default.low <= test.low and default.high >= test.high
    # the p-value stays the test's: its statistic at Δ0 = 0
    assert c.statistic == c.restricted.statistic(0.0)
    h = allowance(c.restricted)
    assert 0 < h < np.inf
    assert default.high - c.estimate == pytest.approx(np.hypot(test.high - c.estimate, h))


def test_discordant_positive_keeps_test_interval(flip):
    pool, y, _, prop, _ = flip
    d = _draws(flip, positives_discordant=True)
    c = _compare(pool, y, prop, d)
    assert tuple(c.confidence_interval()) == tuple(c.confidence_interval(method="test"))
    assert allowance(c.restricted) == 0


def test_binary_measures_unaffected(flip):
    """On draws with no drawn positive where the models disagree (where balanced accuracy's
    interval is widened), a binary measure has no classes to allow for: its default interval is
    the test's."""
    pool, y, _, _, dis = flip
    for measure in ("f1", "precision"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prop_m = bae.comparison_proposal(pool, measure, models=MODELS)
            for r in range(1000, 1200):
                dm = prop_m.draw(N, rng=r)
                if not np.any((y[dm.indices] == 1) & dis[dm.indices]):
                    break
            else:
                raise AssertionError("no draw without a discordant positive")
            c = bae.compare(pool, measure, dm, y[dm.indices], MODELS, proposal=prop_m)
            ba = bae.compare(pool, "balanced_accuracy", dm, y[dm.indices], MODELS, proposal=prop_m)
        assert 0 < allowance(ba.restricted) < np.inf  # where balanced accuracy's is widened
        test = c.confidence_interval(method="test")
        assert test.high - test.low > 1e-6  # not a point (whose fallback is Newcombe's)
        assert allowance(c.restricted) == 0
        assert tuple(c.confidence_interval()) == tuple(test)


def test_multiple_comparison_pair(flip):
    pool, y, truth, prop, _ = flip
    d = _draws(flip, positives_discordant=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mc = bae.multiple_comparison(
            pool, "balanced_accuracy", d, y[d.indices], MODELS, proposal=prop
        )
    ci = mc.confidence_interval()
    test = mc.confidence_interval(method="test")
    assert ci.low[0, 1] <= truth <= ci.high[0, 1]
    assert ci.low[0, 1] < test.low[0, 1] and ci.high[0, 1] > test.high[0, 1]
    assert ci.low[1, 0] == -ci.high[0, 1] and ci.high[1, 0] == -ci.low[0, 1]


def _three_class_losses(y, f):
    cls = np.arange(3)[None, :]
    yc, fc = y[:, None] == cls, f[:, None] == cls
    return np.concatenate([yc & fc, fc, yc], axis=1).astype(float)


def test_allowance_per_class_kind():
    """Three classes; every disagreement has neither model predicting class 0, so no draw tells
    the models' class-0 precision apart: no bound kept (``inf``, Newcombe's by default). Macro
    recall on draws whose class-0 items all agree: Wilson's zero-count limit on their Kish size,
    weighed 1/3."""
    from bayes_activeeval.comparison.pairwise import RestrictedScore

    y = np.array([0, 0, 1, 1, 2, 2, 1, 2])
    fa = np.array([0, 0, 1, 2, 2, 1, 1, 2])
    fb = np.array([0, 0, 2, 1, 1, 2, 1, 2])
    v = np.array([1.0, 3.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0])
    L = np.concatenate([_three_class_losses(y, fa), _three_class_losses(y, fb)], axis=1)
    rs = RestrictedScore(L, v, "precision_macro", MODELS, 3)
    assert allowance(rs) == np.inf
    rec = RestrictedScore(L, v, "recall_macro", MODELS, 3)
    z = 1.959963984540054
    n0 = 4.0**2 / 10.0  # class 0's draws: weights 1 and 3
    assert allowance(rec, z) == pytest.approx(z * z / (n0 + z * z) / 3)
    # every class discordant: no allowance
    y2, fa2, fb2 = np.r_[y, 0], np.r_[fa, 0], np.r_[fb, 1]
    L2 = np.concatenate([_three_class_losses(y2, fa2), _three_class_losses(y2, fb2)], axis=1)
    assert allowance(RestrictedScore(L2, np.r_[v, 1.0], "recall_macro", MODELS, 3)) == 0


def _three_class_pool(n=3000, seed=0):
    """Classes 0, 1, 2 (2 is rare); both models predict 0 and 1 only, b less often right."""
    rng = np.random.default_rng(seed)
    y = rng.choice(3, n, p=[0.5, 0.45, 0.05])
    fa = np.where(rng.random(n) < 0.85, np.minimum(y, 1), 1 - np.minimum(y, 1))
    fb = np.where(rng.random(n) < 0.8, np.minimum(y, 1), 1 - np.minimum(y, 1))
    pa = np.full((n, 3), 0.1)
    pa[np.arange(n), fa] = 0.8
    pb = np.full((n, 3), 0.1)
    pb[np.arange(n), fb] = 0.8
    pool = bae.Pool(predictions={"a": fa, "b": fb}, probs={"a": pa, "b": pb}, classes=[0, 1, 2])
    return pool, y


def _class_two_pool(odd: bool):
    """Classes 0, 1 and a rare 2; both models predict class 2 on the same items (70 % of its
    items) and differ between 0 and 1 on about 10 % of the rest; with ``odd``, model b also
    predicts 2 on one item where a predicts 0 (returned; else ``None``)."""
    rng = np.random.default_rng(4)
    n = 1500
    y = rng.choice(3, n, p=[0.5, 0.45, 0.05])
    two = (y == 2) & (rng.random(n) < 0.7)
    fa = np.where(two, 2, np.where(rng.random(n) < 0.85, np.minimum(y, 1), 1 - np.minimum(y, 1)))
    fb = np.where(two, 2, np.where(rng.random(n) < 0.9, fa, 1 - np.minimum(fa, 1)))
    k = None
    if odd:
        k = np.flatnonzero((fa == 0) & (fb == 0))[0]
        fb[k] = 2  # the one item where the models' class-2 predictions differ
    probs = {}
    for name, f in (("a", fa), ("b", fb)):
        probs[name] = np.full((n, 3), 0.1)
        probs[name][np.arange(n), f] = 0.8
    pool = bae.Pool(predictions={"a": fa, "b": fb}, probs=probs, classes=[0, 1, 2])
    return pool, y, k


@pytest.mark.parametrize("measure", ["precision_macro", "f1_macro"])
def test_precision_and_f1_classes_without_a_discordant_draw_take_newcombes(measure):
    """A macro precision or F1 whose class no draw tells apart keeps no bound on that class's
    difference (the two models' denominators differ): the default interval is Newcombe's, in
    compare() and for the pair of multiple_comparison(). The models predict the rare class 2 on
    the same items but one (so its part of the difference is not known from the pool), and the
    samples taken are those that miss that item: class 2 has no discordant draw."""
    pool, y, odd = _class_two_pool(odd=True)
    prop = bae.comparison_proposal(pool, measure, ("a", "b"))
    for r in range(200):
        d = prop.draw(40, rng=r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = bae.compare(pool, measure, d, y[d.indices], ("a", "b"), proposal=prop)
        test = c.confidence_interval(method="test")
        if odd not in d.indices and test.high - test.low > 1e-6:
            break
    else:
        raise AssertionError("no sample with an undiscriminated class")
    assert allowance(c.restricted) == np.inf
    newcombe = c.confidence_interval(method="newcombe")
    assert tuple(c.confidence_interval()) == tuple(newcombe) != tuple(test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mc = bae.multiple_comparison(pool, measure, d, y[d.indices], ("a", "b"), proposal=prop)
    ci, nc = mc.confidence_interval(), mc.confidence_interval(method="newcombe")
    assert (ci.low[0, 1], ci.high[0, 1]) == (nc.low[0, 1], nc.high[0, 1])


@pytest.mark.parametrize("measure", ["precision_macro", "f1_macro", "balanced_accuracy"])
def test_a_class_both_models_predict_alike_takes_no_allowance(measure):
    """Both models predict the rare class 2 on exactly the same items and differ only between
    classes 0 and 1: class 2's part of the difference is 0 whatever the labels
    (``Pool.agreeing_classes``), so a sample with no discordant draw in it keeps the test's
    interval (before, precision and F1 fell back to Newcombe's, several times as wide)."""
    pool, y, _ = _class_two_pool(odd=False)
    np.testing.assert_array_equal(pool.agreeing_classes("a", "b"), [False, False, True])
    prop = bae.comparison_proposal(pool, measure, ("a", "b"))
    checked = 0
    for r in range(40):
        d = prop.draw(40, rng=r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = bae.compare(pool, measure, d, y[d.indices], ("a", "b"), proposal=prop)
            mc = bae.multiple_comparison(pool, measure, d, y[d.indices], ("a", "b"), proposal=prop)
        test = c.confidence_interval(method="test")
        if c.restricted is None or not test.high - test.low > 1e-6:
            continue
        assert allowance(c.restricted) == 0
        assert tuple(c.confidence_interval()) == tuple(test)
        ci, mt = mc.confidence_interval(), mc.confidence_interval(method="test")
        assert (ci.low[0, 1], ci.high[0, 1]) == (mt.low[0, 1], mt.high[0, 1])
        checked += 1
    assert checked >= 10


def test_coverage_optimal_design(flip):
    """Default interval, 200 samples of 400 draws: the old code covered 0.815 (the samples
    with no drawn positive where the models disagree never)."""
    pool, y, truth, prop, _ = flip
    reps, cover = 200, 0
    for r in range(reps):
        d = prop.draw(N, rng=1000 + r)
        lo, hi = _compare(pool, y, prop, d).confidence_interval()
        cover += lo <= truth <= hi
    tol = 3 * np.sqrt(0.95 * 0.05 / reps)
    assert cover / reps >= 0.95 - tol


def test_the_default_interval_survives_pickling():
    """A class neither model predicts is known (its part is 0 for both) and takes no allowance;
    the pool's predicted classes travel with the pickled result (the rebuilt measure had lost
    them, and every class then counted as uninformed)."""
    import pickle

    pool, y = _three_class_pool()
    prop = bae.comparison_proposal(pool, "balanced_accuracy", ("a", "b"))
    for r in range(3):
        d = prop.draw(150, rng=r)
        c = bae.compare(pool, "balanced_accuracy", d, y[d.indices], ("a", "b"), proposal=prop)
        again = pickle.loads(pickle.dumps(c))
        assert tuple(again.confidence_interval()) == tuple(c.confidence_interval())
