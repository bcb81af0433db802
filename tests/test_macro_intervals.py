"""Intervals of averages of per-class ratios (balanced accuracy, macro averages) by MOVER, and the
effective size next to ``intervals.SNAP``.

A class whose ratio estimate sits at 0 or 1 (six labeled positives, all predicted positive) has no
delta-method variance; the interval of the average used to come from the other classes alone and
covered 0.44 at 1.5 % positives and 400 passive draws (``docs/estimation.md``).
"""

import warnings

import numpy as np
import pytest
import sklearn.metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import intervals
from bayes_activeeval.measures import ModelView, get

#: Monte Carlo replications of the coverage tests
REPS = 300
#: 95 % minus three Monte Carlo standard errors of a coverage of 0.95 over REPS replications
FLOOR = 0.95 - 3 * np.sqrt(0.95 * 0.05 / REPS)  # 0.912


def _skewed_pool(seed=20240, n_items=100_000):
    """1.5 % positives, recall 0.9, specificity 0.964: balanced accuracy about 0.93."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n_items) < 0.015).astype(int)
    f = np.where(y == 1, rng.random(n_items) < 0.9, rng.random(n_items) > 0.964).astype(int)
    return y, f


def _coverage(name, y, f, n, n_classes=2, reps=REPS, seed=1):
    truth = {
        "balanced_accuracy": skm.balanced_accuracy_score(y, f),
        "recall_macro": skm.recall_score(y, f, average="macro", zero_division=0),
        "precision_macro": skm.precision_score(y, f, average="macro", zero_division=0),
        "f1_macro": skm.f1_score(y, f, average="macro", zero_division=0),
    }[name]
    m = get(name).resolve(n_classes)
    rng = np.random.default_rng(seed)
    hits, widths = 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        for _ in range(reps):  # passive sampling: uniform draws, equal weights
            idx = rng.integers(0, y.size, n)
            losses = m.loss(y[idx], ModelView(pred=f[idx], n_classes=n_classes, pos=1))
            lo, hi = bae.weighted_estimate(losses, np.ones(n), m).confidence_interval()
            hits += bool(lo <= truth <= hi)
            widths.append(hi - lo)
    return hits / reps, float(np.nanmean(widths))


def test_balanced_accuracy_covers_under_class_skew():
    # before: 0.440 (the positive class's recall at 1 added no variance); after: 0.977;
    # mean width 0.169 before, 0.262 after
    y, f = _skewed_pool()
    cov, width = _coverage("balanced_accuracy", y, f, 400)
    assert cov >= FLOOR, cov
    assert width < 0.35, width


def test_recall_macro_covers_under_class_skew():
    # before: 0.167 at 100 draws; after: 0.990
    y, f = _skewed_pool()
    cov, _ = _coverage("recall_macro", y, f, 100)
    assert cov >= FLOOR, cov


def test_precision_and_f1_macro_cover_under_class_skew():
    # before: 0.717 and 0.717 at 100 draws; after: 0.963 and 0.920. The one-vs-rest F1 of the
    # positive class has about five carrying draws there, and the binary F1 interval itself
    # covers about 0.91 on them: the macro average cannot do better than its parts, so F1 is
    # held to a stated 0.88
    y, f = _skewed_pool()
    cov, _ = _coverage("precision_macro", y, f, 100)
    assert cov >= FLOOR, cov
    cov, _ = _coverage("f1_macro", y, f, 100)
    assert cov >= 0.88, cov


def test_multiclass_balanced_accuracy_covers():
    # three classes, 90/8/2 %: before 0.857, after 0.970 (400 draws)
    rng = np.random.default_rng(3)
    y = rng.choice(3, 100_000, p=[0.9, 0.08, 0.02])
    f = np.where(rng.random(y.size) < 0.92, y, rng.choice(3, y.size))
    cov, _ = _coverage("balanced_accuracy", y, f, 400, n_classes=3)
    assert cov >= FLOOR, cov


def test_clear_estimate_keeps_its_width():
    # balanced classes, every class mid-range: the MOVER interval is about the old one
    rng = np.random.default_rng(5)
    n = 400
    y = (rng.random(n) < 0.5).astype(int)
    f = np.where(rng.random(n) < 0.85, y, 1 - y)
    for name in ("balanced_accuracy", "recall_macro", "f1_macro"):
        m = get(name).resolve(2)
        est = bae.weighted_estimate(m.loss(y, ModelView(pred=f, n_classes=2, pos=1)), np.ones(n), m)
        lo, hi = est.confidence_interval()
        wald = 2 * 1.959964 * est.stderr
        assert lo < est.value < hi
        assert 0.9 * wald < hi - lo < 1.15 * wald, (name, hi - lo, wald)


def test_binary_intervals_unchanged():
    """Binary accuracy, F1, recall and precision: the values the code before this change
    (commit c2dc361) gave, computed once; bit-identical when this was written."""
    rng = np.random.default_rng(7)
    n = 300
    y = (rng.random(n) < 0.1).astype(int)
    f = np.where(rng.random(n) < 0.1, 1 - y, y)
    gam = rng.gamma(2.0, 0.5, n)
    view = ModelView(pred=f, n_classes=2, pos=1)
    got = {}
    for design, v in (("passive", np.ones(n)), ("weighted", gam)):
        for name in ("accuracy", "f1", "recall", "precision"):
            m = get(name).resolve(2)
            est = bae.weighted_estimate(m.loss(y, view), v, m)
            for method in ("modified_wilson", "clopper_pearson"):
                got[design, name, method] = tuple(est.confidence_interval(method=method))
    assert got.keys() == _BEFORE.keys()
    for key, before in _BEFORE.items():
        np.testing.assert_allclose(got[key], before, rtol=1e-12, err_msg=str(key))


_BEFORE = {
    ("passive", "accuracy", "modified_wilson"): (0.8837267595665261, 0.9456531446048553),
    ("passive", "accuracy", "clopper_pearson"): (0.8833040835150876, 0.948071360663393),
    ("passive", "f1", "modified_wilson"): (0.5765490430378227, 0.799948580088106),
    ("passive", "f1", "clopper_pearson"): (0.5697480469078114, 0.8102379579773561),
    ("passive", "recall", "modified_wilson"): (0.7867654163738308, 0.9881546163100446),
    ("passive", "recall", "clopper_pearson"): (0.7792645984770381, 0.9918218655393437),
    ("passive", "precision", "modified_wilson"): (0.4230602802165686, 0.6883780078874284),
    ("passive", "precision", "clopper_pearson"): (0.41254412294167336, 0.7000927790724565),
    ("weighted", "accuracy", "modified_wilson"): (0.882668828244928, 0.9567168128617565),
    ("weighted", "accuracy", "clopper_pearson"): (0.8820243426583569, 0.9601831445279612),
    ("weighted", "f1", "modified_wilson"): (0.598936918800498, 0.8575381223457281),
    ("weighted", "f1", "clopper_pearson"): (0.5890545214449794, 0.8723433592657335),
    ("weighted", "recall", "modified_wilson"): (0.8629526949187122, 0.9949758479538234),
    ("weighted", "recall", "clopper_pearson"): (0.8601143371149744, 0.9967752548968524),
    ("weighted", "precision", "modified_wilson"): (0.43708937524084424, 0.7650016280731455),
    ("weighted", "precision", "clopper_pearson"): (0.4203014138800704, 0.7842618770757922),
}


def test_class_part_of_f1_macro_is_the_one_vs_rest_f1_interval():
    # each class's F1 interval is the binary F1 interval on its one-vs-rest contingency,
    # with importance weights (the Kish size of the draws predicted or labeled k)
    rng = np.random.default_rng(11)
    n = 500
    y = rng.choice(3, n, p=[0.7, 0.2, 0.1])
    f = np.where(rng.random(n) < 0.8, y, rng.choice(3, n))
    v = rng.gamma(2.0, 0.5, n)
    m = get("f1_macro").resolve(3)
    est = bae.weighted_estimate(m.loss(y, ModelView(pred=f, n_classes=3)), v, m)
    p = est.class_parts
    se = np.sqrt(np.diag(p.cov))
    lo, hi = intervals.interval(
        p.values, se, (0, 1), kish=p.kish, n_df=np.maximum(p.weight_df - 1, 1)
    )
    f1 = get("f1")
    for k in range(3):
        view = ModelView(pred=f, n_classes=3, pos=k)
        binary = bae.weighted_estimate(f1.loss(y, view), v, f1)
        assert p.values[k] == pytest.approx(binary.value, rel=1e-12)
        assert (lo[k], hi[k]) == pytest.approx(binary.confidence_interval(), rel=1e-10)
    assert np.mean(p.values) == pytest.approx(est.value, rel=1e-12)


def test_class_at_bound_widens_the_average():
    # 6 positives, all found; 394 negatives with 14 false positives. The positives' recall of
    # 1 keeps the width of its own interval (Kish size 6) in the average: [0.787, 0.989] (before:
    # [0.971, 0.989], from the negatives alone)
    y = np.r_[np.ones(6), np.zeros(394)].astype(int)
    f = y.copy()
    f[6:20] = 1
    m = get("balanced_accuracy").resolve(2)
    est = bae.weighted_estimate(m.loss(y, ModelView(pred=f, n_classes=2, pos=1)), np.ones(400), m)
    lo, hi = est.confidence_interval()
    tnr_lo, _ = bae.intervals.modified_wilson(380 / 394, 394)
    tpr_lo, _ = bae.intervals.modified_wilson(1.0, 6)
    assert est.value == pytest.approx((1 + 380 / 394) / 2)
    assert lo == pytest.approx(est.value - np.hypot(1 - tpr_lo, 380 / 394 - tnr_lo) / 2)
    assert hi < 1.0
    assert est.value - lo > 0.1


def test_unlabeled_class_enters_with_the_whole_range():
    # no positive drawn: balanced accuracy is the negatives' recall, and the positives' recall
    # is unknown, anywhere in [0, 1], with weight 1/2
    y = np.zeros(200, dtype=int)
    f = np.r_[np.ones(10), np.zeros(190)].astype(int)
    m = get("balanced_accuracy").resolve(2)
    est = bae.weighted_estimate(m.loss(y, ModelView(pred=f, n_classes=2, pos=1)), np.ones(200), m)
    lo, hi = est.confidence_interval()
    assert est.value == pytest.approx(0.95)
    assert lo < 0.95 / 2 + 0.05 and hi > 0.95


def test_stacked_measure_gives_each_model_its_own_interval():
    rng = np.random.default_rng(2)
    n_items = 5000
    y = (rng.random(n_items) < 0.03).astype(int)
    preds = {
        "a": np.where(rng.random(n_items) < 0.9, y, 1 - y),
        "b": np.where(rng.random(n_items) < 0.8, y, 1 - y),
    }
    pool = bae.Pool(predictions=preds, classes=[0, 1])
    d = bae.passive_proposal(pool).draw(400, rng=4)
    stacked = bae.estimate(pool, bae.stack("balanced_accuracy", ["a", "b"]), d, y[d.indices])
    lo, hi = stacked.confidence_interval()
    for i, model in enumerate("ab"):
        own = bae.estimate(pool, "balanced_accuracy", d, y[d.indices], model=model)
        assert (lo[i], hi[i]) == pytest.approx(own.confidence_interval(), rel=1e-12)
    diff = bae.estimate(pool, bae.difference("balanced_accuracy", "a", "b"), d, y[d.indices])
    dlo, dhi = diff.confidence_interval()
    assert -1 <= dlo < diff.value < dhi <= 1


def test_mover_is_newcombe_for_a_difference():
    vals, ints, phi = (0.8, 0.7), ((0.7, 0.88), (0.6, 0.79)), 0.3
    lo, hi = intervals.newcombe_difference(vals, ints, phi)
    mlo, mhi = intervals.mover(
        [0.1], vals, ([0.7, 0.6], [0.88, 0.79]), [[1.0, -1.0]], [[1, phi], [phi, 1]]
    )
    assert (mlo[0], mhi[0]) == pytest.approx((lo, hi), rel=1e-12)
    # independent parts of a mean: square-and-add
    mlo, mhi = intervals.mover([0.5], [0.4, 0.6], ([0.3, 0.4], [0.45, 0.9]), [[0.5, 0.5]])
    assert mlo[0] == pytest.approx(0.5 - np.hypot(0.1, 0.2) / 2)
    assert mhi[0] == pytest.approx(0.5 + np.hypot(0.05, 0.3) / 2)


def test_effective_size_is_continuous_across_snap():
    # one error with a weight of 1e-9 among 999 draws of weight 1: the estimate crosses SNAP
    # (1e-12) as the weight does. Before, n* jumped from the Kish size (999) to about 1e12 and
    # the upper limit from 0.0038 to 6e-12, below the one with no error at all
    m = get("error_rate")
    highs = []
    for v0 in (0.9e-9, 1.1e-9, 1e-6):
        losses = np.zeros((1000, 1))
        losses[0] = 1.0
        v = np.ones(1000)
        v[0] = v0
        highs.append(bae.weighted_estimate(losses, v, m).confidence_interval()[1])
    none = bae.weighted_estimate(np.zeros((1000, 1)), np.ones(1000), m).confidence_interval()[1]
    assert highs == pytest.approx([none] * 3, rel=0.01)
    n = intervals.effective_size([0.9e-12, 1.1e-12], [0.9e-12, 1.1e-12], (0, 1), 999.0)
    assert n == pytest.approx([999.0, 999.0])
    # with at least one effective event n* is unchanged: passive, one error in 1000
    x = 1e-3
    n = intervals.effective_size(x, np.sqrt(x * (1 - x) / 1000), (0, 1), 1000.0)
    assert n == pytest.approx(1000.0)


def _never_predicted_pool(p_absent, seed=7, n_items=100_000):
    """Classes [0, 1, 2]; the model never predicts class 2, which makes up ``p_absent`` of the
    items (0: declared but absent)."""
    rng = np.random.default_rng(seed)
    p = [0.7 * (1 - p_absent), 0.3 * (1 - p_absent), p_absent]
    y = rng.choice(3, n_items, p=p)
    f = np.where(rng.random(n_items) < 0.85, y, rng.choice(2, n_items))
    f = np.where(f == 2, 0, f)
    return bae.Pool(predictions=f, classes=[0, 1, 2]), y, f


@pytest.mark.parametrize("name", ["precision_macro", "recall_macro", "f1_macro"])
@pytest.mark.parametrize("p_absent", [0.0, 0.01])
def test_never_predicted_class_is_exactly_zero_in_macro_averages(name, p_absent):
    # TP = 0 for a class the model predicts nowhere: its precision, recall and F1 are 0
    # (zero_division=0) whatever the labels, so its part is known. Before: [0, 1] (width 0.337
    # at 30,000 draws when absent; coverage 0.997 at width 0.365 for precision_macro, 1 %)
    pool, y, f = _never_predicted_pool(p_absent)
    d = bae.passive_proposal(pool).draw(3000, rng=0)
    lab = y[d.indices]
    est = bae.estimate(pool, name, d, lab)
    fn = {"precision_macro": skm.precision_score, "recall_macro": skm.recall_score}.get(
        name, skm.f1_score
    )
    sample = fn(lab, f[d.indices], labels=[0, 1, 2], average="macro", zero_division=0)
    assert est.value == pytest.approx(sample, rel=1e-12)
    p = est.class_parts
    assert p.values[2] == 0.0 and p.low[2] == 0.0 and p.high[2] == 0.0
    lo, hi = est.confidence_interval()
    assert lo <= est.value <= hi
    assert hi - lo < 0.05, (lo, hi)
    truth = fn(y, f, labels=[0, 1, 2], average="macro", zero_division=0)
    assert lo - 0.01 < truth < hi + 0.01


def test_never_predicted_class_macro_coverage():
    # 70/29/1 %, class 2 never predicted, 300 passive draws: precision_macro 0.997 (width
    # 0.365) and f1_macro 0.993 (0.263) with the class at [0, 1]; now 0.957 (0.052) and
    # 0.957 (0.047), as before per-class intervals
    pool, y, f = _never_predicted_pool(0.01)
    truth = {
        "precision_macro": skm.precision_score(
            y, f, labels=[0, 1, 2], average="macro", zero_division=0
        ),
        "f1_macro": skm.f1_score(y, f, labels=[0, 1, 2], average="macro", zero_division=0),
    }
    prop = bae.passive_proposal(pool)
    hits = {k: 0 for k in truth}
    widths = {k: [] for k in truth}
    reps = 150
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bae.UndefinedEstimateWarning)
        for r in range(reps):
            d = prop.draw(300, rng=r)
            for name, t in truth.items():
                lo, hi = bae.estimate(pool, name, d, y[d.indices]).confidence_interval()
                hits[name] += bool(lo <= t <= hi)
                widths[name].append(hi - lo)
    floor = 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)
    for name in truth:
        assert hits[name] / reps >= floor, (name, hits[name] / reps)
        assert np.mean(widths[name]) < 0.1, (name, np.mean(widths[name]))


def test_never_predicted_class_balanced_accuracy_part():
    # balanced accuracy drops a class absent from the labels; a class the model never predicts
    # has recall 0 if it occurs. Once a draw carries it, its part is exactly 0 ...
    pool, y, f = _never_predicted_pool(0.01)
    d = bae.passive_proposal(pool).draw(3000, rng=0)
    lab = y[d.indices]
    assert (lab == 2).any()
    est = bae.estimate(pool, "balanced_accuracy", d, lab)
    assert est.value == pytest.approx(skm.balanced_accuracy_score(lab, f[d.indices]), rel=1e-12)
    p = est.class_parts
    assert p.values[2] == 0.0 and p.high[2] == 0.0
    lo, hi = est.confidence_interval()
    assert hi - lo < 0.1
    # ... and while none does, it lies in [0, θ̄] (recall 0, or dropped), not [0, 1]: the upper
    # limit comes from the other classes alone, the lower one is about θ̄/3 further down
    pool, y, f = _never_predicted_pool(0.0)
    d = bae.passive_proposal(pool).draw(3000, rng=0)
    est = bae.estimate(pool, "balanced_accuracy", d, y[d.indices])
    p = est.class_parts
    theta = np.mean(p.values[:2])
    assert est.value == pytest.approx(theta, rel=1e-12)
    assert (p.low[2], p.high[2]) == (0.0, pytest.approx(theta))
    lo, hi = est.confidence_interval()
    assert hi - est.value < 0.02  # before: (1 − θ̄)/3 ≈ 0.05 above
    assert theta / 3 < est.value - lo < theta / 3 + 0.03
    # a class the model does predict but no draw carries is genuinely unknown: [0, 1]
    m = get("balanced_accuracy").resolve(3).with_predicted([[True, True, True]])
    view = ModelView(pred=f[d.indices], n_classes=3)
    again = bae.weighted_estimate(m.loss(y[d.indices], view), np.ones(len(d)), m)
    assert (again.class_parts.low[2], again.class_parts.high[2]) == (0.0, 1.0)
    assert again.confidence_interval()[1] > hi + 0.01


def test_absent_class_balanced_accuracy_covers():
    # a declared class that never occurs and is never predicted: the interval reaches about
    # θ̄/3 below the estimate (no finite sample shows the class is absent) and still covers
    pool, y, f = _never_predicted_pool(0.0)
    truth = skm.balanced_accuracy_score(y, f)
    prop = bae.passive_proposal(pool)
    hits, reps = 0, 150
    for r in range(reps):
        d = prop.draw(300, rng=r)
        lo, hi = bae.estimate(pool, "balanced_accuracy", d, y[d.indices]).confidence_interval()
        hits += bool(lo <= truth <= hi)
    assert hits / reps >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)


def test_measure_bound_to_a_model_accepts_that_model():
    # precision_at_k(pool, k, "a") is bound to model a: model="a" names the same model (code
    # that passed model="a" before the measure was bound) and works; another model raises
    from bayes_activeeval.threshold_free import precision_at_k

    rng = np.random.default_rng(0)
    n = 5000
    p = rng.beta(0.3, 5, n)
    y = (rng.random(n) < p).astype(int)
    pa = np.clip(p + rng.normal(0, 0.05, n), 0, 1)
    pb = np.clip(p + rng.normal(0, 0.1, n), 0, 1)
    pool = bae.Pool(
        predictions={"a": (pa > 0.5).astype(int), "b": (pb > 0.5).astype(int)},
        probs={"a": pa, "b": pb},
    )
    m = precision_at_k(pool, 100, "a")
    d = bae.optimal_proposal(pool, m).draw(200, rng=1)
    plain = bae.estimate(pool, m, d, y[d.indices])
    named = bae.estimate(pool, m, d, y[d.indices], model="a")
    assert named.value == plain.value
    bae.optimal_proposal(pool, m, model="a")
    bae.ActiveEvaluator(pool, m, model="a", rng=0)
    with pytest.raises(ValueError, match=r"bound to models \('a',\).*model='b'"):
        bae.estimate(pool, m, d, y[d.indices], model="b")


@pytest.mark.parametrize("name", ["precision_macro", "f1_macro", "balanced_accuracy"])
def test_compare_per_model_intervals_are_each_models_own(name):
    """``compare`` resolves its per-model stack through the pool, so a model that never predicts
    a class gets the interval it gets alone (it got [0.593, 0.935] for [0.593, 0.609], and the
    default passive difference interval contained 0 for a difference whose interval excludes it)."""
    rng = np.random.default_rng(7)
    n = 100_000
    y = rng.choice(3, n, p=[0.69, 0.3, 0.01])
    fa = np.where(rng.random(n) < 0.85, y, rng.choice(2, n))
    fa = np.where(fa == 2, 0, fa)  # model a never predicts class 2
    fb = np.where(rng.random(n) < 0.8, y, rng.choice(3, n))
    pool = bae.Pool(predictions={"a": fa, "b": fb}, classes=[0, 1, 2])
    d = bae.passive_proposal(pool).draw(3000, rng=0)
    lab = y[d.indices]
    alone = bae.estimate(pool, name, d, lab, model="a").confidence_interval()
    r = bae.compare(pool, name, d, lab, models=("a", "b"))
    assert np.allclose(r.model_intervals()["a"], tuple(alone))


@pytest.mark.parametrize("name", ["precision_macro", "f1_macro", "balanced_accuracy"])
def test_lazy_pool_knows_never_predicted_classes(name):
    # a pool on dask reads which classes each model predicts in one pass over its chunks, so its
    # macro intervals are the in-memory pool's (before: the class kept [0, 1] on a lazy pool,
    # precision_macro at 3,000 draws [0.593, 0.935] against [0.593, 0.609])
    import dask.array as da

    pool, y, f = _never_predicted_pool(0.01)
    lazy = bae.Pool.from_dask(da.from_array(f, chunks=30_000), classes=[0, 1, 2])
    d = bae.passive_proposal(pool).draw(3000, rng=0)
    a = bae.estimate(pool, name, d, y[d.indices])
    b = bae.estimate(lazy, name, d, y[d.indices])
    assert b.value == pytest.approx(a.value, rel=1e-12)
    assert np.allclose(b.confidence_interval(), a.confidence_interval(), rtol=1e-12, atol=0)
    assert lazy.predicted_classes(lazy.models).tolist() == [[True, True, False]]


def test_agreeing_classes_lazy_equals_in_memory_and_ignores_zero_weight():
    """The classes two models predict on exactly the same items of positive weight, read in one
    pass over a lazy pool's chunks, as in memory; an item of weight 0 where they differ does not
    count."""
    import dask.array as da

    rng = np.random.default_rng(3)
    n = 9_000
    fa = rng.choice(3, n, p=[0.6, 0.35, 0.05])
    fb = np.where((fa != 2) & (rng.random(n) < 0.1), 1 - np.minimum(fa, 1), fa)
    w = np.ones(n)
    k = np.flatnonzero(fa == 0)[0]
    fb[k], w[k] = 2, 0.0  # differs on class 2 only where p(x) = 0
    mem = bae.Pool(predictions={"a": fa, "b": fb}, classes=[0, 1, 2], weights=w)
    lazy = bae.Pool.from_dask(
        {"a": da.from_array(fa, chunks=2_000), "b": da.from_array(fb, chunks=2_000)},
        classes=[0, 1, 2],
        weights=da.from_array(w, chunks=2_000),
    )
    assert mem.agreeing_classes("a", "b").tolist() == [False, False, True]
    assert lazy.agreeing_classes("a", "b").tolist() == [False, False, True]
    j = np.flatnonzero((fa == 1) & (fb == 1))[0]
    fb2 = fb.copy()
    fb2[j] = 2  # now they differ on class 2 (and 1) where p(x) > 0
    again = bae.Pool(predictions={"a": fa, "b": fb2}, classes=[0, 1, 2], weights=w)
    assert again.agreeing_classes("a", "b").tolist() == [False, False, False]
