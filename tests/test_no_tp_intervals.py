"""F1, F-beta, MCC and Fowlkes-Mallows intervals when no true positive was labeled.

At ``TP̂ = 0`` the upper limit is the measure at the upper limit ``J_U`` of the true positives'
share of the carrying draws, the other cells at their estimates
(:func:`bayes_activeeval.intervals.true_positive_substitution`; Daly (1998)); for F1 exactly
``2 J_U/(1 + J_U)``. Samples with a labeled true positive keep their interval bit for bit.
Figures: ``benchmarks/results/no_tp_intervals.md``.
"""

import warnings

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval import intervals
from bayes_activeeval.measures import FBeta, ModelView, difference, get, stack

Z2 = 1.959963984540054**2


def _losses(measure, tp, fn, fp, tn):
    """Loss rows of ``tp`` true positives, ``fn`` false negatives, ``fp`` false positives and
    ``tn`` true negatives, in that order."""
    y = np.repeat([1, 1, 0, 0], [tp, fn, fp, tn])
    f = np.repeat([1, 0, 1, 0], [tp, fn, fp, tn])
    return measure.loss(y, ModelView(pred=f, n_classes=2, pos=1))


def _estimate(name, tp, fn, fp, tn, weights=None):
    m = get(name).resolve(2)
    L = _losses(m, tp, fn, fp, tn)
    v = np.ones(L.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    return bae.weighted_estimate(L, v, m)


def _previous_interval(est, level=0.95, method="modified_wilson"):
    """The interval without the no-true-positive step (the previous code's call)."""
    wdf = est.weight_df
    low, high = intervals.interval(
        est.values,
        est.stderrs,
        est.bounds,
        level,
        method,
        df=est.effective_df,
        kish=est.kish,
        n_df=None if est.n_max is not None else np.maximum(wdf - 1.0, 1.0),
        n_max=est.n_max,
    )
    return float(low[0]), float(high[0])


# ------------------------------------------------------------------------------------------------
# the map
# ------------------------------------------------------------------------------------------------
def test_f1_map_is_2j_over_1_plus_j_whatever_the_other_cells():
    rng = np.random.default_rng(0)
    J = rng.random(200)
    fn, fp = rng.random(200) * 0.05, rng.random(200) * 0.05
    C = fn + fp
    risk = np.stack([np.zeros(200), (fn + fp) / 2], axis=1)  # F1's weight component at TP = 0
    got = intervals.true_positive_substitution("f_beta", J, risk, C)
    np.testing.assert_allclose(got, 2 * J / (1 + J), rtol=1e-12)


@pytest.mark.parametrize("beta", [0.5, 2.0])
def test_f_beta_map_is_the_measure_with_tp_added(beta):
    rng = np.random.default_rng(1)
    J = rng.random(100)
    fn, fp = rng.random(100) * 0.05, rng.random(100) * 0.05
    C = fn + fp
    b2 = beta * beta
    risk = np.stack([np.zeros(100), (b2 * fn + fp) / (1 + b2)], axis=1)
    got = intervals.true_positive_substitution("f_beta", J, risk, C)
    tp = J * C / (1 - J)  # true positives making up the share J of the carrying draws
    want = (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp)
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("kind", ["mcc", "fowlkes_mallows"])
def test_mcc_and_fm_maps_match_the_confusion_matrix_formulas(kind):
    rng = np.random.default_rng(2)
    J = rng.random(100) * 0.99
    fn, fp = rng.random(100) * 0.1 + 1e-3, rng.random(100) * 0.1 + 1e-3
    tn = 1 - fn - fp
    risk = np.stack([np.zeros(100), fn, fp], axis=1)  # (tp, labeled positive, predicted positive)
    got = intervals.true_positive_substitution(kind, J, risk, fn + fp)
    tp = J * (fn + fp) / (1 - J)
    if kind == "mcc":
        want = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    else:
        want = tp / np.sqrt((tp + fp) * (tp + fn))
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize(
    "kind, risk",
    [
        ("f_beta", (0.0, 0.013)),
        ("f_beta", (0.0, 0.002)),
        ("mcc", (0.0, 0.02, 0.01)),
        ("mcc", (0.0, 0.3, 0.4)),
        ("fowlkes_mallows", (0.0, 0.001, 0.05)),
    ],
)
def test_maps_start_at_the_estimate_and_never_decrease(kind, risk):
    C = risk[1] + risk[2] if kind != "f_beta" else 0.02
    J = np.linspace(0.0, 1.0, 2001)
    vals = intervals.true_positive_substitution(kind, J, np.asarray(risk), C)
    assert np.all(np.isfinite(vals))
    assert np.all(np.diff(vals) >= -1e-12)
    if kind == "mcc":
        y, f = risk[1], risk[2]
        estimate = -np.sqrt(y * f / ((1 - y) * (1 - f)))  # MCC with no true positive
        assert vals[0] == pytest.approx(estimate, rel=1e-12)
        assert vals[-1] == pytest.approx(vals[-2], abs=1e-3)  # the limit at J = 1 is continuous
    else:
        assert vals[0] == 0.0


def test_substitution_refuses_unknown_measures_and_shapes():
    with pytest.raises(ValueError, match=r"measure must be one of.*'precision'"):
        intervals.true_positive_substitution("precision", 0.1, (0.0, 0.1), 0.1)
    with pytest.raises(ValueError, match="risk must have 3 components"):
        intervals.true_positive_substitution("mcc", 0.1, (0.0, 0.1), 0.1)


# ------------------------------------------------------------------------------------------------
# the estimate's interval at TP = 0
# ------------------------------------------------------------------------------------------------
def test_f1_upper_limit_at_no_true_positive_is_the_mapped_share():
    # 10 carrying draws (5 false negatives, 5 false positives) among 1,000 passive draws
    est = _estimate("f1", 0, 5, 5, 990)
    ju = Z2 / (10 + Z2)  # Wilson's upper limit for 0 successes in 10 trials
    low, high = est.confidence_interval()
    assert est.value == 0.0 and low == 0.0
    assert high == pytest.approx(2 * ju / (1 + ju), rel=1e-12)  # previously ju itself
    assert high > 1.5 * _previous_interval(est)[1]


@pytest.mark.parametrize("method", ["wilson", "modified_wilson", "jeffreys", "clopper_pearson"])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_f1_weighted_draws_use_the_share_interval_on_the_kish_size(method, level):
    rng = np.random.default_rng(3)
    w = rng.gamma(2.0, 1.0, 600)
    est = _estimate("f1", 0, 7, 4, 589, weights=w)
    _, ju = intervals._UNIT[method](0.0, est.kish[0], level)
    _, high = est.confidence_interval(level, method)
    assert high == pytest.approx(2 * ju / (1 + ju), rel=1e-12)
    # the share is a proportion of the carrying draws: their Kish size, not all draws'
    carry = w[:11]
    assert est.kish[0] == pytest.approx(carry.sum() ** 2 / (carry**2).sum())


def test_n_max_caps_the_share_interval_too():
    est = _estimate("f1", 0, 30, 30, 540)
    capped = type(est)(**{**est.__dict__, "n_max": 12})
    _, ju = intervals.modified_wilson(0.0, 12.0)
    assert capped.confidence_interval().high == pytest.approx(2 * ju / (1 + ju), rel=1e-12)


def test_f2_and_mcc_and_fm_upper_limits_at_no_true_positive():
    tp, fn, fp, tn = 0, 6, 3, 491
    n = fn + fp + tn
    ju = Z2 / (9 + Z2)
    t = ju * (fn + fp) / (1 - ju)  # added true positives, in draws
    b2 = 4.0
    f2 = _estimate("f2", tp, fn, fp, tn)
    assert isinstance(get("f2"), FBeta)
    assert f2.confidence_interval().high == pytest.approx(
        (1 + b2) * t / ((1 + b2) * t + b2 * fn + fp)
    )
    mcc = _estimate("mcc", tp, fn, fp, tn)
    want = (t * tn - fp * fn) / np.sqrt((t + fp) * (t + fn) * (tn + fp) * (tn + fn))
    low, high = mcc.confidence_interval()
    assert high == pytest.approx(want, rel=1e-10)
    assert low == _previous_interval(mcc)[0]  # the lower limit is the previous one
    assert mcc.confidence_interval().high > 10 * (_previous_interval(mcc)[1] - mcc.value)
    fm = _estimate("fowlkes_mallows", tp, fn, fp, tn)
    assert fm.confidence_interval().high == pytest.approx(t / np.sqrt((t + fp) * (t + fn)))
    assert n == 500


def test_precision_and_recall_at_no_true_positive_are_unchanged():
    # a proportion already: its interval at 0 is the share interval itself
    for name in ("precision", "recall"):
        est = _estimate(name, 0, 5, 5, 990)
        assert "no_true_positive" not in est.details
        assert tuple(est.confidence_interval()) == _previous_interval(est)


def test_wald_t_and_logit_are_unchanged_at_no_true_positive():
    est = _estimate("mcc", 0, 5, 5, 990)
    for method in ("wald", "t", "logit"):
        lo, hi = est.confidence_interval(method=method)
        plain = intervals.interval(
            est.values, est.stderrs, est.bounds, 0.95, method, df=est.effective_df, kish=est.kish
        )
        assert (lo, hi) == (float(plain[0][0]), float(plain[1][0]))


# ------------------------------------------------------------------------------------------------
# samples with a true positive: bit-identical
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["f1", "f2", "mcc", "fowlkes_mallows"])
@pytest.mark.parametrize("tp", [1, 3, 40])
def test_intervals_with_a_true_positive_are_bit_identical(name, tp):
    rng = np.random.default_rng(tp)
    for weights in (None, rng.gamma(2.0, 1.0, 1000)):
        est = _estimate(name, tp, 20, 15, 1000 - tp - 35, weights=weights)
        assert "no_true_positive" not in est.details
        for method in ("modified_wilson", "wilson", "jeffreys", "clopper_pearson"):
            assert tuple(est.confidence_interval(method=method)) == _previous_interval(
                est, method=method
            )


def _two_model_pool():
    rng = np.random.default_rng(4)
    y = (rng.random(20_000) < 0.02).astype(int)
    a = np.where(y == 1, rng.random(y.size) < 0.5, rng.random(y.size) < 0.01).astype(int)
    b = np.where(y == 1, rng.random(y.size) < 0.9, rng.random(y.size) < 0.03).astype(int)
    probs = {k: np.where(v == 1, 0.7, 0.02) for k, v in (("a", a), ("b", b))}
    return bae.Pool(predictions={"a": a, "b": b}, probs=probs, classes=[0, 1]), y, a, b


def _a_without_true_positive(y, a, b):
    """Unit-weight draws of :func:`_two_model_pool` where model ``a`` has no true positive and
    ``b`` has some."""
    idx = np.concatenate(
        [
            np.flatnonzero((y == 1) & (a == 0) & (b == 1))[:4],
            np.flatnonzero((y == 0) & (a == 1))[:3],
            np.flatnonzero((y == 0) & (a == 0) & (b == 0))[:300],
        ]
    )
    return idx, bae.Draws(indices=idx, weights=np.ones(idx.size), q=np.full(idx.size, 1 / 20_000))


@pytest.mark.parametrize("name", ["f1", "mcc"])
def test_a_stack_gives_each_model_its_own_interval(name):
    pool, y, a, b = _two_model_pool()
    # a sample where model a has no true positive and model b has some
    idx, draws = _a_without_true_positive(y, a, b)
    st = bae.estimate(pool, stack(name, ["a", "b"]), draws, y[idx])
    gap = st.details["no_true_positive"]
    assert gap.at.tolist() == [True, False]
    lo, hi = st.confidence_interval()
    a_alone = bae.estimate(pool, name, draws, y[idx], model="a")
    assert hi[0] > _previous_interval(a_alone)[1] + 0.05  # the share's limit, not the old one
    for i, model in enumerate("ab"):
        alone = bae.estimate(pool, name, draws, y[idx], model=model)
        assert (lo[i], hi[i]) == tuple(alone.confidence_interval())
    one = bae.estimate(pool, name, draws, y[idx], model="b")
    assert (lo[1], hi[1]) == _previous_interval(one)


def test_differences_and_other_estimators_keep_their_intervals():
    """On a sample where neither model has a labeled true positive (so the plain estimate of
    each does take the substitution), a difference and the model-assisted estimate do not."""
    pool, y, a, b = _two_model_pool()
    idx = np.concatenate(
        [
            np.flatnonzero((y == 0) & (a == 1))[:5],
            np.flatnonzero((y == 0) & (b == 1))[:5],
            np.flatnonzero((y == 1) & (a == 0) & (b == 0))[:5],
            np.flatnonzero((y == 0) & (a == 0) & (b == 0))[:200],
        ]
    )
    draws = bae.Draws(indices=idx, weights=np.ones(idx.size), q=np.full(idx.size, 1.0 / 20_000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = [bae.estimate(pool, "f1", draws, y[idx], model=m) for m in "ab"]
        diff = bae.estimate(pool, difference("f1", "a", "b"), draws, y[idx])
        ma = bae.estimate(pool, "f1", draws, y[idx], model="a", estimator="model_assisted")
    assert all("no_true_positive" in e.details for e in plain)
    assert "no_true_positive" not in diff.details
    assert "no_true_positive" not in ma.details


# ------------------------------------------------------------------------------------------------
# coverage
# ------------------------------------------------------------------------------------------------
# cells where a true positive is rare: share J = 0.06 of the carrying draws (10 % of the draws)
CELLS = {"tp": 0.006, "fn": 0.054, "fp": 0.04, "tn": 0.9}
N, REPS = 400, 10_000


def _truth(name):
    tp, fn, fp, tn = (CELLS[k] for k in ("tp", "fn", "fp", "tn"))
    if name == "f1":
        return 2 * tp / (2 * tp + fn + fp)
    return (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))


@pytest.mark.parametrize("name", ["f1", "mcc"])
def test_missing_above_with_no_true_positive_is_rare(name):
    """P(no true positive and the truth above the interval) is at most about α/2.

    Given ``n_c`` carrying draws, TP̂ = 0 has probability ``(1 − J)^{n_c}``, and the share's
    upper limit ``J_U(n_c) ≈ z²/(n_c + z²)`` exceeds ``J`` unless that probability is below about
    ``α/2``. The previous F1 interval missed whenever ``J`` exceeded about ``J_U/2``
    (here ``J = 0.06``, ``J_U(40) = 0.088``: every sample with no true positive, 8 % of them).
    """
    rng = np.random.default_rng(5)
    counts = rng.multinomial(N, [CELLS[k] for k in ("tp", "fn", "fp", "tn")], size=REPS)
    no_tp = counts[counts[:, 0] == 0]
    assert no_tp.shape[0] > 0.05 * REPS  # about 0.994^400 = 9 % of the samples
    truth = _truth(name)
    above, covered = 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        for c in no_tp:
            est = _estimate(name, *c)
            if not np.isfinite(est.value):
                continue
            lo, hi = est.confidence_interval()
            above += truth > hi
            covered += lo <= truth <= hi
    alpha2 = 0.025
    assert above / REPS <= alpha2 + 3 * np.sqrt(alpha2 * (1 - alpha2) / REPS), above
    # and given no true positive, the interval covers (J is below J_U for n_c near 40)
    k = no_tp.shape[0]
    assert covered / k >= 0.95 - 3 * np.sqrt(0.05 * 0.95 / k), (covered, k)


def test_macro_f1_maps_a_class_part_with_no_true_positive():
    m = get("f1_macro").resolve(3)
    rng = np.random.default_rng(6)
    y = np.repeat([0, 0, 1, 1, 2, 2, 0], [300, 20, 30, 4, 5, 4, 3])
    f = np.repeat([0, 1, 1, 0, 0, 0, 2], [300, 20, 30, 4, 5, 4, 3])  # class 2: no true positive
    L = m.loss(y, ModelView(pred=f, n_classes=3, pos=1))
    for w in (np.ones(y.size), rng.gamma(2.0, 1.0, y.size)):
        est = bae.weighted_estimate(L, w, m)
        p = est.class_parts
        assert p.values[2] == 0.0 and p.values[0] > 0 and p.values[1] > 0
        se = np.sqrt(np.diag(p.cov))
        lo_k, hi_k = intervals.interval(
            p.values,
            se,
            p.bounds,
            0.95,
            "modified_wilson",
            kish=p.kish,
            n_df=np.maximum(p.weight_df - 1.0, 1.0),
        )
        ju = intervals.modified_wilson(0.0, p.kish[2])[1]
        assert hi_k[2] == ju  # the part's own interval at 0: the share's
        mapped = np.where(p.values == 0.0, 2 * hi_k / (1 + hi_k), hi_k)
        with np.errstate(divide="ignore", invalid="ignore"):
            corr = np.nan_to_num(p.cov / np.outer(se, se))
        corr[:, 2] = corr[2, :] = 0.0
        low, high = intervals.mover(est.values, p.values, (lo_k, mapped), p.average, corr, (0, 1))
        ci = est.confidence_interval()
        assert ci.high == pytest.approx(high[0], rel=1e-12)
        assert ci.low == pytest.approx(low[0], rel=1e-12)
        old = intervals.mover(est.values, p.values, (lo_k, hi_k), p.average, corr, (0, 1))
        assert ci.high > old[1][0] + 0.01


# ------------------------------------------------------------------------------------------------
# what a measure is, not what it is called
# ------------------------------------------------------------------------------------------------
def _jaccard_pair(name):
    """Two models' Jaccard indices ``TP/(TP + FP + FN) = R1/(2 R2 − R1)`` on F1's loss
    ``ℓ = [y f, (y + f)/2]`` per model, built by hand and named ``name`` with F1's component and
    output names: a measure no :func:`stack` made."""

    def loss(y, views):
        cols = []
        for v in (views["a"], views["b"]):
            yy, ff = (y == 1).astype(float), (v.pred == 1).astype(float)
            cols += [yy * ff, (yy + ff) / 2]
        return np.stack(cols, axis=1)

    def g(R):
        return np.array([R[0] / (2 * R[1] - R[0]), R[2] / (2 * R[3] - R[2])])

    def jac(R):
        da, db = (2 * R[1] - R[0]) ** 2, (2 * R[3] - R[2]) ** 2
        return np.array(
            [[2 * R[1] / da, -2 * R[0] / da, 0, 0], [0, 0, 2 * R[3] / db, -2 * R[2] / db]]
        )

    return bae.Measure(
        name,
        loss,
        g,
        jac,
        components=("tp[a]", "weight[a]", "tp[b]", "weight[b]"),
        outputs=("f1[a]", "f1[b]"),
        task="binary",
        greater_is_better=True,
        scale_invariant=True,
        models=("a", "b"),
        bounds=(0.0, 1.0),
    )


def test_a_hand_built_measure_named_like_a_stack_of_f1_gets_no_substitution():
    """The F1 substitution follows :attr:`Measure.base` (set by :func:`stack`), not the name: a
    pair of Jaccard indices named ``"f1[a,b]"`` with F1's loss and names keeps its own upper
    limit ``J_U`` where its model has no labeled true positive (the Jaccard index is the share
    ``J`` itself), as under any other name; the name-parsing code gave it F1's
    ``2J_U/(1 + J_U)``."""
    pool, y, a, b = _two_model_pool()
    idx, draws = _a_without_true_positive(y, a, b)
    named, other = (
        bae.estimate(pool, _jaccard_pair(n), draws, y[idx]) for n in ("f1[a,b]", "jaccard[a,b]")
    )
    assert named.values[0] == 0.0 and named.values[1] > 0.0  # model a: no true positive
    lo, hi = named.confidence_interval()
    assert (lo.tolist(), hi.tolist()) == tuple(x.tolist() for x in other.confidence_interval())
    assert hi[0] == intervals.modified_wilson(0.0, named.kish[0])[1]  # 7 carrying draws
    assert "no_true_positive" not in named.details
    # the stacked measure is recorded; a measure built by hand has none
    f1 = get("f1")
    assert stack(f1, ["a", "b"]).base is f1 and _jaccard_pair("f1[a,b]").base is None


def test_a_hand_built_average_named_f1_macro_keeps_its_parts_intervals():
    """The per-class F1 map ``2J/(1 + J)`` follows the kind of the parts
    (:attr:`~bayes_activeeval.measures.ClassParts.kind`), not the name: macro precision's maps
    under the name ``"f1_macro"`` keep macro precision's interval (the name-parsing code mapped
    its class with no labeled true positive as an F1)."""
    pm = get("precision_macro").resolve(3)
    hand = bae.Measure(
        "f1_macro",
        pm.loss,
        pm.g,
        pm.jacobian,
        components=pm.components,
        task="classification",
        greater_is_better=True,
        scale_invariant=True,
        bounds=(0.0, 1.0),
        tabular=True,
        class_parts=lambda R, predicted=None: pm.class_parts(R),
    )
    y = np.repeat([0, 0, 1, 1, 2, 2, 0], [300, 20, 30, 4, 5, 4, 3])
    f = np.repeat([0, 1, 1, 0, 0, 0, 2], [300, 20, 30, 4, 5, 4, 3])  # class 2: no true positive
    L = pm.loss(y, ModelView(pred=f, n_classes=3, pos=1))
    rng = np.random.default_rng(7)
    for w in (np.ones(y.size), rng.gamma(2.0, 1.0, y.size)):
        est, ref = bae.weighted_estimate(L, w, hand), bae.weighted_estimate(L, w, pm)
        assert est.class_parts.values[2] == 0.0 and est.class_parts.kish[2] > 0
        for method in ("modified_wilson", "wilson", "jeffreys", "clopper_pearson"):
            assert tuple(est.confidence_interval(method=method)) == tuple(
                ref.confidence_interval(method=method)
            )


def test_a_stack_of_an_f_beta_whose_name_get_cannot_read_takes_the_substitution():
    """``FBeta(1e-5)`` is named ``"f1e-05"``, which :func:`get` does not read back: the stack's
    substitution follows the stacked measure itself, so each model's interval is its own
    estimate's, as for ``"f1"`` (the name-parsing code gave model a the plain upper limit)."""
    pool, y, a, b = _two_model_pool()
    idx, draws = _a_without_true_positive(y, a, b)
    m = FBeta(1e-5)
    with pytest.raises(ValueError, match="unknown measure"):
        get(m.name)
    lo, hi = bae.estimate(pool, stack(m, ["a", "b"]), draws, y[idx]).confidence_interval()
    for i, model in enumerate("ab"):
        alone = bae.estimate(pool, m, draws, y[idx], model=model)
        assert (lo[i], hi[i]) == tuple(alone.confidence_interval())
    assert "no_true_positive" in bae.estimate(pool, m, draws, y[idx], model="a").details
