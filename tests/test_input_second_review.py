"""Bad input to the static path, second review (session 31): each is one ``ValueError`` naming
the argument and the value — an empty or malformed ``{item: label}`` map, two keys for one item,
an infinite or huge float label, draws of another pool, ``scores=`` of the wrong length, a
vector belief on a pool without a positive class, non-numeric probabilities or regression
predictions, a ``None`` prediction — and finite weights whose sum overflows still normalize."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayes_activeeval as bae

Y = np.array([0, 1, 1, 0, 1])
P = np.array([0.1, 0.8, 0.7, 0.2, 0.9])


@pytest.fixture
def small():
    pool = bae.Pool(predictions=Y, probs=P)
    return pool, bae.passive_proposal(pool).draw(5, rng=0)


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        ({}, "labels has no label for drawn item"),
        ({i + 0.9: int(Y[i]) for i in range(5)}, r"labels has the key 0\.9"),
        (
            {**{i: int(Y[i]) for i in range(5)}, **{str(i): 1 - int(Y[i]) for i in range(5)}},
            "names item 0 twice",
        ),
        ({True: 1, **{i: int(Y[i]) for i in range(2, 5)}}, "has the key True"),
        (np.array([0.0, 1.0, np.inf, 0.0, 1.0]), r"labels\[2\] is inf"),
        (np.array([0.0, 1.0, 1e300, 0.0, 1.0]), r"labels\[2\] = 1e\+300 is not one of"),
    ],
)
def test_bad_labels_are_named(small, labels, match):
    pool, d = small
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=match):
            bae.estimate(pool, "accuracy", d, labels)


def test_whole_number_keys_of_any_type_are_items(small):
    pool, d = small
    want = bae.estimate(pool, "accuracy", d, {i: int(Y[i]) for i in range(5)}).value
    for keys in (lambda i: str(i), lambda i: float(i), lambda i: np.int32(i)):
        got = bae.estimate(pool, "accuracy", d, {keys(i): int(Y[i]) for i in range(5)}).value
        assert got == want


def test_draws_of_another_pool_are_refused(small):
    pool, _ = small
    big = bae.Pool(predictions=np.r_[Y, Y], probs=np.r_[P, P])
    d = bae.passive_proposal(big).draw(30, rng=3)
    assert d.indices.max() >= 5
    with pytest.raises(ValueError, match="the draws are of another pool"):
        bae.estimate(pool, "accuracy", d, Y[d.indices % 5])


def test_weights_whose_sum_overflows_still_normalize():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        pool = bae.Pool(predictions=Y, probs=P, weights=[1e308, 1e308, 1, 1, 1])
    np.testing.assert_allclose(pool.p, [0.5, 0.5, 5e-309, 5e-309, 5e-309], rtol=1e-12, atol=0)
    assert pool.p.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: bae.stratified_proposal(
                bae.Pool(predictions=Y, probs=P), strata=2, scores=[0.1, 0.5, 0.9]
            ),
            "scores has 3 entries but the pool has 5 items",
        ),
        (
            lambda: bae.optimal_proposal(
                bae.Pool(predictions=np.array(["ham", "spam", "spam", "ham", "spam"])),
                "accuracy",
                belief=P,
            ),
            "no default positive class",
        ),
        (
            lambda: bae.Pool(predictions=np.array(["a", "1.0", "2"]), task="regression"),
            r"predictions\['model'\]\[0\] = 'a'",
        ),
        (
            lambda: bae.Pool(predictions=np.array([0, None, 1], dtype=object)),
            r"predictions\['model'\]\[1\] is None",
        ),
    ],
)
def test_bad_pool_and_proposal_input_is_named(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_text_probabilities_are_a_type_error_naming_probs():
    with pytest.raises(TypeError, match="probs must be array-like of numbers"):
        bae.Pool(predictions=Y, probs=["a"] * 5)
