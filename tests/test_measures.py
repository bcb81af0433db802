"""Measures: the estimator on uniform draws reproduces scikit-learn; Jacobians are right."""

import numpy as np
import pytest
from sklearn import metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import measures
from bayes_activeeval.measures import available, get


def _binary_data(rng, n=400):
    y = rng.integers(0, 2, n)
    f = np.where(rng.random(n) < 0.8, y, 1 - y)
    p1 = np.clip(np.where(f == 1, 0.7, 0.3) + 0.2 * rng.standard_normal(n), 0.01, 0.99)
    return y, f, p1


def _sk(name, y, f, p1, w=None):
    return {
        "accuracy": lambda: skm.accuracy_score(y, f, sample_weight=w),
        "error_rate": lambda: 1 - skm.accuracy_score(y, f, sample_weight=w),
        "precision": lambda: skm.precision_score(y, f, sample_weight=w),
        "recall": lambda: skm.recall_score(y, f, sample_weight=w),
        "f1": lambda: skm.f1_score(y, f, sample_weight=w),
        "f2": lambda: skm.fbeta_score(y, f, beta=2, sample_weight=w),
        "f0.5": lambda: skm.fbeta_score(y, f, beta=0.5, sample_weight=w),
        "balanced_accuracy": lambda: skm.balanced_accuracy_score(y, f, sample_weight=w),
        "mcc": lambda: skm.matthews_corrcoef(y, f, sample_weight=w),
        "brier": lambda: skm.brier_score_loss(y, p1, sample_weight=w),
        "fowlkes_mallows": lambda: np.sqrt(
            skm.precision_score(y, f, sample_weight=w) * skm.recall_score(y, f, sample_weight=w)
        ),
    }[name]()


BINARY = [
    "accuracy",
    "error_rate",
    "precision",
    "recall",
    "f1",
    "f2",
    "f0.5",
    "balanced_accuracy",
    "mcc",
    "brier",
    "fowlkes_mallows",
]


def _uniform_draws(pool, idx):
    q = np.full(pool.n_items, 1.0 / pool.n_items)
    return bae.Draws(np.asarray(idx), np.ones(len(idx)), q[idx])


@pytest.mark.parametrize("name", BINARY)
def test_binary_measures_equal_sklearn_on_uniform_draws(name, rng):
    y, f, p1 = _binary_data(rng)
    pool = bae.Pool(predictions=f, probs=p1)
    idx = np.arange(len(y))
    est = bae.estimate(pool, name, _uniform_draws(pool, idx), y)
    assert est.value == pytest.approx(_sk(name, y, f, p1), abs=1e-12)


@pytest.mark.parametrize("name", BINARY)
def test_weighted_estimate_equals_sklearn_sample_weight(name, rng):
    """Self-normalized IS = the metric with sample_weight = p/q (Sawade (2012), Eq. 3.31)."""
    y, f, p1 = _binary_data(rng)
    pool = bae.Pool(predictions=f, probs=p1)
    m, views = pool.resolve(name)
    w = rng.uniform(0.2, 5.0, len(y))
    est = bae.weighted_estimate(m.loss(y, views(None)), w, m)
    assert est.value == pytest.approx(_sk(name, y, f, p1, w), abs=1e-12)


def test_string_labels_and_pos_label(rng):
    y, f, p1 = _binary_data(rng)
    cls = np.array(["ham", "spam"])
    pool = bae.Pool(predictions=cls[f], probs=p1, pos_label="spam")
    est = bae.estimate(pool, "f1", _uniform_draws(pool, np.arange(len(y))), cls[y])
    assert est.value == pytest.approx(skm.f1_score(cls[y], cls[f], pos_label="spam"))
    # the other class as positive
    pool0 = bae.Pool(predictions=cls[f], probs=1 - p1, pos_label="ham")
    est0 = bae.estimate(pool0, "recall", _uniform_draws(pool0, np.arange(len(y))), cls[y])
    assert est0.value == pytest.approx(skm.recall_score(cls[y], cls[f], pos_label="ham"))


@pytest.mark.parametrize("kind", ["f1", "precision", "recall"])
@pytest.mark.parametrize("avg", ["macro", "micro"])
def test_multiclass_averages_equal_sklearn(kind, avg, rng):
    n, C = 600, 4
    y = rng.integers(0, C, n)
    f = np.where(rng.random(n) < 0.6, y, rng.integers(0, C, n))
    probs = rng.dirichlet(np.ones(C), n)
    pool = bae.Pool(predictions=f, probs=probs)
    w = rng.uniform(0.5, 2.0, n)
    m, views = pool.resolve(f"{kind}_{avg}")
    est = bae.weighted_estimate(m.loss(y, views(None)), w, m)
    fn = {"f1": skm.f1_score, "precision": skm.precision_score, "recall": skm.recall_score}[kind]
    assert est.value == pytest.approx(fn(y, f, average=avg, sample_weight=w), abs=1e-12)


def test_multiclass_accuracy_balanced_brier_equal_sklearn(rng):
    n, C = 500, 3
    y = rng.integers(0, C, n)
    f = np.where(rng.random(n) < 0.7, y, rng.integers(0, C, n))
    probs = rng.dirichlet(np.ones(C) * 2, n)
    pool = bae.Pool(predictions=f, probs=probs)
    d = _uniform_draws(pool, np.arange(n))
    assert bae.estimate(pool, "accuracy", d, y).value == pytest.approx(skm.accuracy_score(y, f))
    assert bae.estimate(pool, "balanced_accuracy", d, y).value == pytest.approx(
        skm.balanced_accuracy_score(y, f)
    )
    assert bae.estimate(pool, "brier", d, y).value == pytest.approx(skm.brier_score_loss(y, probs))


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("mse", skm.mean_squared_error),
        ("mae", skm.mean_absolute_error),
        ("r2", skm.r2_score),
    ],
)
def test_regression_measures_equal_sklearn(name, fn, rng):
    n = 300
    y = rng.standard_normal(n) * 2 + 1
    f = y + rng.standard_normal(n)
    pool = bae.Pool(predictions=f, predictive_std=np.ones(n))
    w = rng.uniform(0.5, 3, n)
    m, views = pool.resolve(name)
    est = bae.weighted_estimate(m.loss(y, views(None)), w, m)
    assert est.value == pytest.approx(fn(y, f, sample_weight=w), rel=1e-12)


@pytest.mark.parametrize("name", [*available(), "f2"])
def test_closed_form_jacobian_matches_finite_differences(name, rng):
    m = get(name).resolve(3)
    R = rng.uniform(0.15, 0.45, m.dim)
    if name == "r2":
        R = np.array([0.3, 1.2, 0.8, 1.0])  # variance R2 - R1² > 0
    J = m.jacobian(R)
    h = 1e-6
    num = np.column_stack([(m.g(R + h * e) - m.g(R - h * e)) / (2 * h) for e in np.eye(m.dim)])
    np.testing.assert_allclose(J, num, rtol=1e-5, atol=1e-7)


def test_custom_measure_with_automatic_jacobian(rng):
    """A custom measure from user functions: negative predictive value, TN / (TN + FN)."""

    def loss(y, view):
        neg = view.pred == 0
        return np.stack([(y == 0) & neg, neg], axis=1)

    npv = bae.Measure("npv", loss, g=lambda R: R[0] / R[1], components=("tn", "pred_neg"))
    y, f, p1 = _binary_data(rng)
    pool = bae.Pool(predictions=f, probs=p1)
    est = bae.estimate(pool, npv, _uniform_draws(pool, np.arange(len(y))), y)
    assert est.value == pytest.approx(np.mean(y[f == 0] == 0))
    R = np.array([0.3, 0.5])
    np.testing.assert_allclose(npv.jacobian(R), [[2.0, -1.2]], rtol=1e-6)


def test_difference_and_stack(rng):
    y, f, p1 = _binary_data(rng)
    g = np.where(rng.random(len(y)) < 0.9, f, 1 - f)
    pool = bae.Pool(predictions={"a": f, "b": g}, probs={"a": p1, "b": p1})
    d = _uniform_draws(pool, np.arange(len(y)))
    diff = bae.estimate(pool, bae.difference("f1", "a", "b"), d, y)
    assert diff.value == pytest.approx(skm.f1_score(y, f) - skm.f1_score(y, g))
    st = bae.estimate(pool, bae.stack("accuracy", ["a", "b"]), d, y)
    np.testing.assert_allclose(st.values, [skm.accuracy_score(y, f), skm.accuracy_score(y, g)])
    assert st.cov.shape == (2, 2)
    # the difference's variance is the contrast of the joint covariance
    acc_diff = bae.estimate(pool, bae.difference("accuracy", "a", "b"), d, y)
    c = np.array([1.0, -1.0])
    assert acc_diff.stderr**2 == pytest.approx(c @ st.cov @ c)
    assert list(st.to_frame().index) == ["accuracy[a]", "accuracy[b]"]


def test_unknown_measure_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown measure 'f_one'.*accuracy"):
        get("f_one")
    with pytest.raises(TypeError, match="measure must be a name or a Measure"):
        get(3)
    with pytest.raises(ValueError, match="beta must be a positive"):
        bae.FBeta(-1)


@pytest.mark.parametrize("name", available())
def test_affine_flag_agrees_with_a_constant_jacobian(name, rng):
    """``Measure.affine`` (the adaptive difference estimate's bound rule and gamma interval rely on
    it) is ``True`` exactly where ``Dg`` is the same at two points, for every built-in measure;
    stacks and differences keep it."""
    m = get(name).resolve(3)
    R1, R2 = rng.uniform(0.2, 0.8, (2, m.dim))
    constant = np.allclose(m.jacobian(R1), m.jacobian(R2))
    assert m.affine == constant
    assert bae.measures.difference(name, "a", "b").affine == constant
    assert bae.measures.stack(name, ["a", "b"]).affine == constant


def test_custom_measure_declares_an_affine_g():
    def loss(y, view):
        return (y != view.pred).astype(float)

    assert not bae.Measure("scaled", loss, lambda R: 2 * R, lambda R: np.array([[2.0]])).affine
    assert bae.Measure("scaled", loss, lambda R: 2 * R, affine=True).affine
    assert bae.Measure("plain", loss).affine


def test_get_tags_the_registered_name_and_derived_measures_do_not_inherit_it():
    """``get`` builds a new object per call; the registered name is what pool-wide caches key
    on: spellings of one registered measure share it, every F-beta with the same β shares one
    (``FBeta(1.0)`` is keyed apart from the registered ``"f1"``), and measures built from it
    (stack, difference) do not carry it."""
    assert get("F1").registered == get("f1").registered == "f1"
    assert get("f2").registered == get("f2.0").registered == get("F2.").registered == "f2.0"
    assert get("f1.0").registered == "f1.0" != get("f1").registered
    assert get("error-rate").registered == get("error_rate").registered
    f1 = get("f1")
    assert measures.stack(f1, ("a", "b")).registered is None
    assert measures.difference(f1, "a", "b").registered is None
    assert get(f1) is f1
    legacy = object.__new__(type(f1))  # as unpickled from before the attribute existed
    assert legacy.registered is None and legacy.base is None
