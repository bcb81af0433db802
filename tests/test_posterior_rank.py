"""The item-level calibration posterior of the threshold-free measures (ROC AUC, average
precision, recall at a false-positive rate): the exact label sampler, the measure from the
positives alone, and the posterior through the public API."""

import numpy as np
import pytest
from scipy import special

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf
from bayes_activeeval.posterior import calibration_posterior, contingency_posterior
from bayes_activeeval.posterior.calibration import _draw_positives
from bayes_activeeval.threshold_free.kernels import tie_groups

MEASURES = ["roc_auc", "average_precision", "recall@fpr=0.1"]


@pytest.fixture(scope="module")
def logistic_pool():
    """6,000 items whose labels follow the calibration model exactly:
    ``P(y = 1 | s) = expit(−4 + 1.5 s)`` for the model's score ``s = logit(prob)`` (about 7 %
    positives), so the posterior's label model is well specified."""
    rng = np.random.default_rng(8)
    s = rng.normal(0.0, 2.0, 6000)
    y = (rng.random(6000) < special.expit(-4.0 + 1.5 * s)).astype(int)
    prob = special.expit(s)
    pool = bae.Pool((prob > 0.5).astype(int), np.column_stack([1 - prob, prob]))
    return pool, y, s


def pool_value(measure, s, y, p=None):
    p = np.ones(y.size) / y.size if p is None else p
    return tf.influence(measure, s, p * y, p * (1 - y))[0]


@pytest.mark.parametrize("measure", MEASURES)
def test_values_from_positives_equal_the_kernel(measure):
    """Many label configurations of one ranking (ties, unequal masses), each given by its
    positives only: the value is the one :func:`influence` computes on the full configuration."""
    rng = np.random.default_rng(1)
    n, T = 400, 30
    s = np.round(rng.normal(size=n), 1)  # many ties
    p = rng.uniform(0.5, 2.0, n)
    inv, G = tie_groups(s)
    tot = np.bincount(inv, p, G)
    Y = rng.random((T, n)) < special.expit(2.0 * s - 2.0)[None, :]
    Y[0] = False  # no positive: undefined
    Y[1] = True  # no negative: undefined
    Y[2] = False
    Y[2, np.argmin(s)] = True  # a single positive at the bottom
    p[s >= np.sort(s)[-3]] = 0.0  # the top tie groups carry no mass (AP: 0/0 there)
    tot = np.bincount(inv, p, G)
    Y[3, np.argmax(s)] = True  # a massless positive at the top
    t, i = np.nonzero(Y)
    got = tf.values_from_positives(measure, t, inv[i], p[i], T, tot)
    want = np.array([tf.influence(measure, s, p * y, p * (1 - y))[0] for y in Y])
    assert np.isnan(got[0]) and np.isnan(got[1])
    np.testing.assert_allclose(got[2:], want[2:], rtol=1e-10, atol=1e-12)


def test_draw_positives_is_exact_per_item_and_per_draw():
    """The thinned sampler (quarter-octave bounds, binomial candidates, acceptance
    ``η/e``) draws ``y_{t,i} ∼ Bernoulli(expit(lin[t, h_i] + b_t x_i))`` independently: every
    item's count over the draws (items expecting at least 5; the rarer ones pooled) and every
    draw's count over the items match their Poisson-binomial means within 4.5 standard deviations
    (Bonferroni over 60 items and 4,000 draws), on items from ``η ≈ 1e-7`` (sparse path) to
    ``η ≈ 0.9`` (dense path)."""
    rng = np.random.default_rng(3)
    S, n = 4000, 60
    x = np.linspace(-12.0, 6.0, n)
    h = np.arange(n) % 2
    b = rng.uniform(0.9, 1.1, S)
    lin = np.column_stack([rng.normal(-4.0, 0.3, S), rng.normal(-3.0, 0.3, S)])
    eta = special.expit(lin[:, h] + b[:, None] * x[None, :])
    t, i = _draw_positives(np.random.default_rng(4), x, h, lin, b)
    assert np.unique(t * n + i).size == t.size  # at most one label per (draw, item)
    per_item = np.bincount(i, minlength=n)
    mean, var = eta.sum(0), (eta * (1 - eta)).sum(0)
    big = mean >= 5  # the normal approximation holds per item
    z = (per_item - mean) / np.sqrt(var)
    assert np.all(np.abs(z[big]) < 4.5), z[big]
    # the rare items (expected counts 1e-7 to 5) together
    small = ~big
    z_small = (per_item[small].sum() - mean[small].sum()) / np.sqrt(var[small].sum())
    assert abs(z_small) < 4.0, z_small
    per_draw = np.bincount(t, minlength=S)
    zd = (per_draw - eta.sum(1)) / np.sqrt((eta * (1 - eta)).sum(1))
    assert np.abs(zd).max() < 4.5
    # and the spread over draws is the Poisson-binomial one (independent items)
    ratio = np.var(per_draw - eta.sum(1)) / np.mean((eta * (1 - eta)).sum(1))
    assert 0.9 < ratio < 1.1, ratio


@pytest.mark.parametrize("measure", MEASURES)
def test_everything_labeled_is_exact(logistic_pool, measure):
    pool, y, s = logistic_pool
    idx = np.arange(pool.n_items)
    post = calibration_posterior(pool, measure, idx, y, draws=50, rng=0)
    g = post.posterior["measure"].values
    assert g.shape == (2, 50, 1)
    # (running sums over all draws' positives: rounding of order draws × ε)
    np.testing.assert_allclose(g, pool_value(measure, s, y), rtol=1e-9)
    assert post.posterior["unlabeled_positives"].values.sum() == 0
    assert post.attrs["method"] == "calibration" and post.attrs["measure"] == measure


def test_credible_intervals_cover_under_a_well_specified_label_model(logistic_pool):
    """Labels that follow the calibration model, 300 passive labels per sample, 40 samples: the
    95 % credible intervals of the pool's AUC and AP cover their realized values (finite
    population) at the nominal rate: ``P(Binomial(40, 0.95) ≤ 34) ≈ 0.05`` per measure, so 34
    is the floor; and the posterior mean is centred (mean error within 3 Monte Carlo s.e. plus
    a tenth of the mean posterior sd)."""
    pool, y, s = logistic_pool
    rng = np.random.default_rng(11)
    for measure in ("roc_auc", "average_precision"):
        truth = pool_value(measure, s, y)
        hits, errs, sds = 0, [], []
        for _ in range(40):
            idx = rng.choice(pool.n_items, 300, replace=False)
            post = calibration_posterior(pool, measure, idx, y[idx], draws=200, rng=rng)
            g = post.posterior["measure"].values.ravel()
            lo, hi = np.quantile(g, [0.025, 0.975])
            hits += lo <= truth <= hi
            errs.append(g.mean() - truth)
            sds.append(g.std())
        assert hits >= 34, (measure, hits)
        tol = 3 * np.std(errs) / np.sqrt(len(errs)) + 0.1 * np.mean(sds)
        assert abs(np.mean(errs)) < tol, (measure, np.mean(errs), tol)


def test_posterior_through_the_evaluator_and_the_dispatcher(rare_pool):
    """``ActiveEvaluator(pool, "roc_auc").posterior()`` is the calibration posterior of the
    labeled draws; a stacked or difference measure has one output per model (or one for the
    difference); a cell method names the measure and the method to use."""
    pool, y = rare_pool.pool, rare_pool.labels
    ev = bae.ActiveEvaluator(pool, "roc_auc", rng=0)
    ev.run(rare_pool.labeler, budget=300, progress=False)
    post = ev.posterior(draws=100, rng=1)
    d = ev.draws()
    ref = calibration_posterior(
        pool, "roc_auc", d["item"].to_numpy(), pool.encode_labels(d["label"]), draws=100,
        encoded=True, rng=1,
    )  # fmt: skip
    np.testing.assert_array_equal(post.posterior["measure"].values, ref.posterior["measure"])
    truth = pool_value("roc_auc", tf.model_scores(pool, "model"), y, pool.p)
    g = post.posterior["measure"].values.ravel()
    assert abs(g.mean() - truth) < 5 * g.std() + 0.01
    with pytest.raises(ValueError, match=r"roc_auc.*method='calibration'"):
        contingency_posterior(pool, "roc_auc", d["item"], d["label"], method="conjugate")


def test_several_models_are_refused():
    """The label model calibrates one model's scores: a stack or a difference of two models'
    AP would judge the second model against labels drawn from the first's ranking (its sign
    followed the order of the models), so it is refused; each model alone is the single-model
    posterior."""
    two = bae.datasets.make_classification_pool(4000, 0.05, n_models=2, rng=5)
    pool, y = two.pool, two.labels
    idx = np.random.default_rng(0).choice(pool.n_items, 800, replace=False)
    for measure in (
        bae.difference("average_precision", "m0", "m1"),
        bae.stack("average_precision", ("m0", "m1")),
    ):
        with pytest.raises(ValueError, match=r"takes one model, got \['m0', 'm1'\]"):
            calibration_posterior(pool, measure, idx, y[idx], draws=100, rng=2)
    one = calibration_posterior(pool, "average_precision", idx, y[idx], model="m1", draws=50)
    assert one.posterior["measure"].values.shape == (2, 50, 1)
    with pytest.raises(ValueError, match="deterministic"):
        calibration_posterior(pool, "roc_auc", idx, y[idx], deterministic=False)


def test_bernoulli_positions_are_bernoulli_trials():
    """The sampler gives the successes of independent Bernoulli(e) trials: each position's
    frequency is ``e`` and each pair's joint frequency ``e²`` (``n = 7``, ``e = 0.45``: many
    repeats redrawn); positions stay sorted, distinct and in range on ``4·10⁹`` trials."""
    from bayes_activeeval.posterior.calibration import _bernoulli_positions

    rng = np.random.default_rng(6)
    R, n, e = 20_000, 7, 0.45
    hit = np.zeros((R, n), dtype=bool)
    for r in range(R):
        pos = _bernoulli_positions(rng, n, e)
        assert np.all(np.diff(pos) > 0) and (pos.size == 0 or (pos[0] >= 0 and pos[-1] < n))
        hit[r, pos] = True
    se = np.sqrt(e * (1 - e) / R)
    assert np.all(np.abs(hit.mean(axis=0) - e) < 4.5 * se), hit.mean(axis=0)
    pair = (hit[:, :, None] & hit[:, None, :]).mean(axis=0)[np.triu_indices(n, 1)]
    se2 = np.sqrt(e**2 * (1 - e**2) / R)
    assert np.all(np.abs(pair - e**2) < 4.5 * se2), pair
    some = _bernoulli_positions(rng, 4 * 10**9, 1e-6)
    assert 0 <= some.min() and some.max() < 4 * 10**9 and np.all(np.diff(some) > 0)
    assert abs(some.size - 4000) < 5 * np.sqrt(4000)
