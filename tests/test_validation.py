"""Bad input: one test per rule in DESIGN.md's Conventions, each error naming argument and value."""

import numpy as np
import pytest

import bayes_activeeval as bae

F = np.array([0, 1, 1, 0, 1])
P = np.array([0.1, 0.8, 0.6, 0.3, 0.9])


@pytest.mark.parametrize(
    ("probs", "match"),
    [
        (np.array([0.1, 1.2, 0.6, 0.3, 0.9]), r"probs\[1\] = 1\.2 is not a probability"),
        (np.array([0.1, -0.1, 0.6, 0.3, 0.9]), r"probs\[1\] = -0\.1"),
        (np.array([0.1, np.nan, 0.6, 0.3, 0.9]), r"probs\[1\] = nan"),
        (np.array([[0.5, 0.6]] * 5), r"probs\[0\] sums to 1\.1"),
        (np.array([0.1, 0.8]), r"probs has 2 rows but the pool has 5 items"),
        (np.ones((6, 2)) / 2, r"probs has shape \(6, 2\); expected \(5, 2\)"),
    ],
)
def test_bad_probabilities(probs, match):
    with pytest.raises(ValueError, match=match):
        bae.Pool(predictions=F, probs=probs)


def test_shape_mismatches():
    with pytest.raises(
        ValueError, match=r"predictions\['b'\] has 4 items but the first model has 5"
    ):
        bae.Pool(predictions={"a": F, "b": F[:4]})
    with pytest.raises(ValueError, match="costs has 3 entries but the pool has 5 items"):
        bae.Pool(predictions=F, probs=P, costs=[1, 2, 3])
    with pytest.raises(ValueError, match="probs names models"):
        bae.Pool(predictions={"a": F, "b": F}, probs={"a": P})
    with pytest.raises(ValueError, match="must be one-dimensional"):
        bae.Pool(predictions=np.zeros((5, 2)))
    pool = bae.Pool(predictions=F, probs=P)
    with pytest.raises(ValueError, match="belief covers 3 items but the pool has 5"):
        bae.optimal_proposal(pool, "f1", belief=np.array([[0.5, 0.5]] * 3))
    with pytest.raises(ValueError, match="labels has 2 entries but there are 3 draws"):
        bae.estimate(pool, "f1", bae.Draws(np.array([0, 1, 2]), np.ones(3), np.ones(3) / 5), [0, 1])


def test_labels_outside_classes():
    pool = bae.Pool(predictions=F, probs=P)
    d = bae.Draws(np.array([0, 1]), np.ones(2), np.full(2, 0.2))
    with pytest.raises(ValueError, match=r"labels\[1\] = 2 is not one of the classes \[0, 1\]"):
        bae.estimate(pool, "f1", d, [0, 2])
    with pytest.raises(ValueError, match=r"labels\[0\] is NaN"):
        bae.estimate(pool, "f1", d, [np.nan, 1.0])
    spam = bae.Pool(predictions=np.array(["ham", "spam"]), probs=[0.2, 0.7], pos_label="spam")
    with pytest.raises(ValueError, match=r"labels\[0\] = 'eggs'"):
        bae.estimate(spam, "f1", d, ["eggs", "spam"])
    with pytest.raises(
        ValueError, match=r"predictions\[\'model\'\]\[2\] = 5 is not one of the classes"
    ):
        bae.Pool(predictions=np.array([0, 1, 5]), probs=np.array([0.1, 0.2, 0.3]), classes=[0, 1])


def test_budgets_larger_than_allowed():
    pool = bae.Pool(predictions=F, probs=P)
    prop = bae.optimal_proposal(
        pool, "precision", mix=0.0
    )  # mass only on the 3 predicted positives
    with pytest.raises(
        ValueError, match="n=4 distinct items requested but the proposal has only 3"
    ):
        prop.draw(4, rng=0, unique=True)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        prop.draw(0, rng=0)
    with pytest.raises(TypeError, match="n must be an integer"):
        prop.draw(2.5, rng=0)


def test_zero_mass_where_needed():
    """Recall needs the predicted negatives (a positive there is a false negative)."""
    p1 = np.array([0.0, 0.8, 0.6, 0.0, 0.9])
    pool = bae.Pool(predictions=F, probs=p1)
    with pytest.raises(ValueError, match=r"zero mass to item 0 .* use mix > 0 or belief_floor > 0"):
        bae.optimal_proposal(pool, "recall", mix=0.0, belief_floor=0.0)
    # either remedy works
    assert bae.optimal_proposal(pool, "recall", mix=0.0).q[0] > 0
    assert bae.optimal_proposal(pool, "recall", belief_floor=0.0).q[0] > 0
    # precision does not need them (w = 0 there): no error
    assert bae.optimal_proposal(pool, "precision", mix=0.0, belief_floor=0.0).q[0] == 0


def test_empty_pool_and_bad_numbers():
    with pytest.raises(ValueError, match="the pool is empty"):
        bae.Pool(predictions=np.array([], dtype=int))
    with pytest.raises(ValueError, match=r"costs\[1\] = 0\.0; label costs must be positive"):
        bae.Pool(predictions=F, probs=P, costs=[1, 0, 1, 1, 1])
    with pytest.raises(ValueError, match=r"costs\[2\] = nan"):
        bae.Pool(predictions=F, probs=P, costs=[1, 1, np.nan, 1, 1])
    with pytest.raises(ValueError, match=r"weights\[0\] = -1\.0"):
        bae.Pool(predictions=F, probs=P, weights=[-1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="weights sum to zero"):
        bae.Pool(predictions=F, probs=P, weights=[0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match=r"predictive_std\['model'\]\[0\] = -1\.0 is negative"):
        bae.Pool(predictions=np.array([0.5, 1.5]), predictive_std=[-1.0, 1.0])
    with pytest.raises(ValueError, match="mix must be in"):
        bae.optimal_proposal(bae.Pool(predictions=F, probs=P), "f1", mix=1.5)
    with pytest.raises(ValueError, match="belief_floor must be in"):
        bae.optimal_proposal(bae.Pool(predictions=F, probs=P), "f1", belief_floor=-0.1)


def test_classes_models_measures_and_rng():
    with pytest.raises(ValueError, match="cannot infer the classes"):
        bae.Pool(predictions=np.array(["a", "a"]), probs=[0.2, 0.3])
    with pytest.raises(ValueError, match="pos_label='x' is not one of the classes"):
        bae.Pool(predictions=F, probs=P, pos_label="x")
    strings = bae.Pool(
        predictions=np.array(["ham", "spam"]), probs=np.array([[0.8, 0.2], [0.3, 0.7]])
    )
    with pytest.raises(ValueError, match="needs a positive class: give the pool pos_label"):
        bae.optimal_proposal(strings, "f1")
    pool2 = bae.Pool(predictions={"a": F, "b": F}, probs={"a": P, "b": P})
    with pytest.raises(ValueError, match=r"several models .* name one with model="):
        bae.optimal_proposal(pool2, "f1")
    with pytest.raises(ValueError, match="model 'c' is not in the pool"):
        bae.optimal_proposal(pool2, "f1", model="c")
    reg = bae.Pool(predictions=np.array([0.5, 1.5]), predictive_std=[1.0, 1.0])
    with pytest.raises(
        ValueError, match="measure 'f1' is for classification but the pool is regression"
    ):
        bae.optimal_proposal(reg, "f1")
    multi = bae.Pool(predictions=np.array([0, 1, 2]), probs=np.eye(3))
    with pytest.raises(ValueError, match="use a macro/micro average such as 'f1_macro'"):
        bae.optimal_proposal(multi, "f1")
    with pytest.raises(TypeError, match="rng must be"):
        bae.optimal_proposal(bae.Pool(predictions=F, probs=P), "f1").draw(2, rng="seed")
    with pytest.raises(TypeError, match="legacy RandomState"):
        bae.optimal_proposal(bae.Pool(predictions=F, probs=P), "f1").draw(
            2, rng=np.random.RandomState(0)
        )
    nobelief = bae.Pool(predictions=F)
    with pytest.raises(ValueError, match="the pool has no probs, so there is no belief"):
        bae.optimal_proposal(nobelief, "f1")


def test_measure_undefined_under_belief():
    pool = bae.Pool(predictions=np.zeros(4, dtype=int), probs=np.full(4, 0.1), classes=[0, 1])
    with pytest.raises(ValueError, match="measure 'precision' is undefined at the intrinsic risk"):
        bae.optimal_proposal(pool, "precision")
