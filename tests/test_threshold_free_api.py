"""Threshold-free measures through the package's public API: names accepted by estimate,
optimal_proposal, ActiveEvaluator, compare, multiple_comparison and comparison_proposal."""

import numpy as np
import pytest
from scipy import special
from sklearn import metrics as skm

import bayes_activeeval as bae
from bayes_activeeval import threshold_free as tf


@pytest.fixture(scope="module")
def three_models():
    sp = bae.datasets.make_classification_pool(20_000, 0.02, n_models=3, rng=21)
    return sp


def test_names_resolve_to_rank_measures():
    assert isinstance(bae.measures.get("roc_auc"), tf.RankMeasure)
    assert bae.measures.get("average_precision").kind == "average_precision"
    assert bae.measures.get("recall@fpr=0.05").fpr == 0.05
    d = bae.difference("roc_auc", "a", "b")
    assert d.difference and d.models == ("a", "b")
    assert bae.stack("roc_auc", ("a", "b", "c")).models == ("a", "b", "c")
    assert "roc_auc" in bae.measures.RANK_NAMES and "roc_auc" not in bae.measures.available()


def test_estimate_and_optimal_proposal_dispatch(rare_pool):
    pool, y = rare_pool.pool, rare_pool.labels
    prop = bae.optimal_proposal(pool, "roc_auc")
    np.testing.assert_allclose(prop.q, tf.rank_proposal(pool, "roc_auc").q)
    d = prop.draw(600, rng=1)
    est = bae.estimate(pool, "roc_auc", d, y[d.indices])
    ref = tf.rank_estimate(pool, "roc_auc", d, y[d.indices])
    assert est.value == ref.value and est.stderr == ref.stderr
    s = pool.scores["model"][d.indices]
    assert est.value == pytest.approx(skm.roc_auc_score(y[d.indices], s, sample_weight=d.weights))
    ap = bae.estimate(pool, "average_precision", d, y[d.indices])
    assert ap.value == pytest.approx(
        skm.average_precision_score(y[d.indices], s, sample_weight=d.weights)
    )


def test_active_evaluator_roc_auc(rare_pool):
    pool, y = rare_pool.pool, rare_pool.labels
    truth = tf.weighted_roc_auc(y, pool.scores["model"])
    ev = bae.ActiveEvaluator(pool, "roc_auc", rng=0)
    ev.run(rare_pool.labeler, budget=400, progress=False)
    est = ev.estimate()
    assert ev.n_labels == 400
    assert np.isfinite(est.value) and np.isfinite(est.stderr)
    lo, hi = est.confidence_interval(0.95)
    assert lo <= est.value <= hi
    assert abs(est.value - truth) < 5 * est.stderr + 0.01
    assert len(ev.history) >= 1


def test_active_evaluator_state_round_trip(rare_pool, tmp_path):
    pool = rare_pool.pool
    ev = bae.ActiveEvaluator(pool, "average_precision", rng=0)
    ev.run(rare_pool.labeler, budget=150, progress=False)
    path = ev.save(tmp_path / "ev.npz")
    ev2 = bae.ActiveEvaluator.load(path, pool)
    assert ev2.estimate().value == pytest.approx(ev.estimate().value)


def test_compare_and_multiple_comparison(three_models):
    pool, y = three_models.pool, three_models.labels
    prop = bae.comparison_proposal(pool, "roc_auc", models=("m0", "m1"))
    d = prop.draw(800, rng=3)
    res = bae.compare(pool, "roc_auc", d, y[d.indices], models=("m0", "m1"))
    m = tf.RankMeasure("roc_auc").bind(("m0", "m1"), difference=True)
    ref = tf.rank_estimate(pool, m, d, y[d.indices])
    assert res.estimate == pytest.approx(ref.value) and res.stderr == pytest.approx(ref.stderr)
    assert res.models == ("m0", "m1") and 0.0 <= res.pvalue <= 1.0
    mc = bae.multiple_comparison(pool, "roc_auc", d, y[d.indices])
    assert mc.k == 3
    est = tf.stacked_estimate(pool, "roc_auc", d, y[d.indices], ("m0", "m1", "m2"))
    np.testing.assert_allclose(mc.estimates, est.values)
    assert np.isfinite(mc.pvalue[0, 1])


def test_comparison_proposal_is_the_power_optimal_one(three_models):
    pool = three_models.pool
    q = bae.comparison_proposal(pool, "average_precision", models=("m0", "m2")).q
    ref = tf.comparison_rank_proposal(pool, "average_precision", ("m0", "m2")).q
    np.testing.assert_allclose(q, ref)


def test_rank_measures_refuse_regression_and_multiclass():
    reg = bae.datasets.make_regression_pool(200, rng=0).pool
    with pytest.raises(ValueError, match="binary"):
        bae.optimal_proposal(reg, "roc_auc")
    rng = np.random.default_rng(0)
    probs = special.softmax(rng.normal(size=(50, 3)), axis=1)
    multi = bae.Pool(predictions=probs.argmax(1), probs=probs)
    with pytest.raises(ValueError, match="binary"):
        bae.optimal_proposal(multi, "roc_auc")


@pytest.mark.parametrize("design", ["static", "adaptive"])
def test_cli_session_with_roc_auc(design, tmp_path):
    import json

    import pandas as pd
    from cli_helpers import ok

    from bayes_activeeval.demo import export_demo

    pool_csv, truth_csv = export_demo(tmp_path / "demo.csv")
    t = pd.read_csv(truth_csv, dtype={"id": str})
    truth = dict(zip(t["id"], t["label"].tolist(), strict=True))

    session = tmp_path / "s.bae"
    opts = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "p", "--score-col", "score"]
    ok("init", pool_csv, "--measure", "roc_auc", "--session", session, *opts,
       "--design", design, "--seed", 1)  # fmt: skip
    for k, n in enumerate((60, 60)):
        batch = tmp_path / f"b{k}.csv"
        ok("next", session, "--n", n, "--out", batch)
        b = pd.read_csv(batch, dtype=str)
        lab = tmp_path / f"l{k}.csv"
        pd.DataFrame({"id": b["id"], "label": [truth[i] for i in b["id"]]}).to_csv(lab, index=False)
        ok("record", session, lab)
    st = json.loads(ok("status", session, "--json").stdout)
    est = st["estimates"][0]
    assert 0.5 < est["estimate"] <= 1.0 and est["low"] <= est["estimate"] <= est["high"]
    # the calibration posterior beside it (the threshold-free measures' only posterior)
    (row,) = st["posterior"].values()
    assert 0.5 < row["mean"] <= 1.0 and row["eti89_lb"] <= row["mean"] <= row["eti89_ub"]
    text = ok("status", session).stdout
    assert "item-level calibration model" in text and "logistic calibration" in text
    report = tmp_path / "report.html"
    ok("report", session, "--out", report)
    html = report.read_text()
    assert "roc_auc" in html and "ROC and precision-recall curves" in html
    assert "Item-level calibration model" in html
    # curves, estimate path, proposal, posterior
    assert html.count("data:image/png;base64,") == 4


@pytest.mark.parametrize("measure", ["roc_auc", "average_precision"])
def test_estimate_model_assisted_for_rank_measures(balanced_pool, measure):
    """``bae.estimate(..., estimator="model_assisted")`` for AUC and AP: the control-variate
    estimate of ``rank_estimate``, unbiased for the exact pool value to within its Monte Carlo
    error, with a standard error that matches the Monte Carlo SD."""
    pool, y = balanced_pool.pool, balanced_pool.labels
    truth = tf.influence(measure, pool.scores["model"], pool.p * y, pool.p * (1 - y))[0]
    prop = bae.optimal_proposal(pool, measure, estimator="model_assisted")
    rng = np.random.default_rng(5)
    vals, ses = [], []
    for _ in range(120):
        d = prop.draw(500, rng=rng)
        est = bae.estimate(pool, measure, d, y[d.indices], estimator="model_assisted")
        assert est.estimator == "model_assisted"
        vals.append(est.value)
        ses.append(est.stderr)
    vals, ses = np.asarray(vals), np.asarray(ses)
    sd = vals.std(ddof=1)
    assert abs(vals.mean() - truth) < 3.5 * sd / np.sqrt(vals.size), (vals.mean(), truth, sd)
    # SD of a sample SD from 120 draws is about SD/sqrt(240): a 30% band is > 4 of them
    assert 0.7 < np.sqrt(np.mean(ses**2)) / sd < 1.3, (np.sqrt(np.mean(ses**2)), sd)
    ref = tf.rank_estimate(pool, measure, d, y[d.indices], estimator="model_assisted")
    assert est.value == ref.value and est.stderr == ref.stderr
    with pytest.raises(ValueError, match="bias_correction"):
        bae.estimate(pool, measure, d, y[d.indices], bias_correction=True)


@pytest.mark.parametrize("oracle", ["calibration", "auto"])
def test_adaptive_guard_uses_the_calibrated_label_model(rare_pool, oracle, tmp_path):
    """The adaptive rank estimate's guarded variance averages each draw's squared influence over
    the posterior's label model at its mode, fitted to all labeled items (no point masses), not
    over the models' own probabilities; a loaded evaluator gives the same interval; a stochastic
    oracle keeps the models' probabilities."""
    pool = rare_pool.pool
    ev = bae.ActiveEvaluator(pool, "roc_auc", oracle=oracle, batch_size=100, rng=4)
    ev.run(rare_pool.labeler, budget=300, progress=False)
    d = ev.draws()
    i = d["item"].to_numpy()
    known = np.unique(i)
    pi = bae.posterior.calibration_map(
        pool, "model", known, pool.encode_labels(rare_pool.labels[known])
    )
    s = tf.model_scores(pool, "model")[i]
    y = (pool.encode_labels(d["label"]) == pool.pos).astype(int)
    w = d["weight"].to_numpy()
    est = ev.estimate()
    ref = tf.rank_estimate_arrays("roc_auc", s[:, None], y, w, n_labels=ev.n_labels, belief=pi[i])
    assert est.value == ref.value
    np.testing.assert_allclose(est.details["cov_belief"], ref.details["cov_belief"], rtol=1e-12)
    own = pool.view().positive_prob()
    assert not np.allclose(pi[i], own[i], rtol=0.1)  # a different belief from the model's
    ev2 = bae.ActiveEvaluator.load(ev.save(tmp_path / "ev.npz"), pool)
    assert ev2.estimate().stderr == est.stderr
    st = bae.ActiveEvaluator(pool, "roc_auc", deterministic=False, batch_size=100, rng=4)
    st.run(rare_pool.labeler, budget=200, progress=False)
    d = st.draws()
    i = d["item"].to_numpy()
    y = (pool.encode_labels(d["label"]) == pool.pos).astype(int)
    ref = tf.rank_estimate_arrays(
        "roc_auc", tf.model_scores(pool, "model")[i][:, None], y, d["weight"].to_numpy(),
        n_labels=st.n_labels, belief=own[i],
    )  # fmt: skip
    np.testing.assert_allclose(st.estimate().details["cov_belief"], ref.details["cov_belief"])


def test_calibration_map_is_the_label_models_mode():
    """``calibration_map`` recovers a logistic map of the log-odds: labels drawn from
    ``expit(−3 + 2 s)`` on 4,000 items (2,000 distinct scores, each twice), one item of 1,000
    pairs labeled; the fitted probabilities track the true ones within 0.03 in mean absolute
    error, and a labeled item gets exactly its unlabeled twin's probability (no point mass)."""
    from scipy import special as sp

    rng = np.random.default_rng(2)
    s = np.repeat(rng.normal(0.0, 1.5, 2000), 2)
    eta = sp.expit(-3.0 + 2.0 * s)
    y = (rng.random(4000) < eta).astype(int)
    prob = sp.expit(s)
    pool = bae.Pool((prob > 0.5).astype(int), np.column_stack([1 - prob, prob]))
    items = 2 * rng.choice(2000, 1000, replace=False)  # the first of a pair
    pi = bae.posterior.calibration_map(pool, "model", items, y[items])
    assert np.mean(np.abs(pi - eta)) < 0.03
    np.testing.assert_array_equal(pi[items], pi[items + 1])


def test_cli_session_of_two_models_has_no_calibration_posterior(tmp_path):
    """A threshold-free session of several models: ``status`` (text and JSON) and ``report``
    show both models' estimates and no posterior (the calibration posterior, the only one these
    measures have, takes one model); the session is not written by them."""
    import json

    import pandas as pd
    from cli_helpers import ok

    data = bae.datasets.make_classification_pool(3000, 0.05, n_models=2, rng=3)
    probs = {m: data.pool.view(m).prob[:, 1] for m in ("m0", "m1")}
    ids = [f"i{k}" for k in range(data.pool.n_items)]
    frame = pd.DataFrame({"id": ids, **{f"p{m}": probs[m] for m in probs}})
    for m in probs:
        frame[f"y{m}"] = (probs[m] > 0.5).astype(int)
    pool_csv = tmp_path / "pool.csv"
    frame.to_csv(pool_csv, index=False)
    truth = dict(zip(ids, data.labels.tolist(), strict=True))

    session = tmp_path / "s.bae"
    ok("init", pool_csv, "--measure", "roc_auc", "--session", session, "--id-col", "id",
       "--pred", "m0=ym0", "--pred", "m1=ym1", "--prob", "m0=pm0", "--prob", "m1=pm1",
       "--seed", 2)  # fmt: skip
    batch = tmp_path / "b.csv"
    ok("next", session, "--n", 150, "--out", batch)
    b = pd.read_csv(batch, dtype=str)
    lab = tmp_path / "l.csv"
    pd.DataFrame({"id": b["id"], "label": [truth[i] for i in b["id"]]}).to_csv(lab, index=False)
    ok("record", session, lab)
    before = session.read_bytes()  # the session is one SQLite file
    st = json.loads(ok("status", session, "--json").stdout)
    assert [e["model"] for e in st["estimates"]] == ["m0", "m1"]
    assert all(0.5 < e["estimate"] <= 1.0 for e in st["estimates"])
    assert "posterior" not in st
    text = ok("status", session).stdout
    assert "m0" in text and "m1" in text and "posterior of the measure" not in text
    assert session.read_bytes() == before
    report = tmp_path / "report.html"
    ok("report", session, "--out", report)
    html = report.read_text()
    assert "Item-level calibration model" not in html and "roc_auc" in html


def test_calibration_log_evidence_against_quadrature_and_a_larger_sample():
    """The label model's log marginal likelihood (importance sampling): the Platt form (two
    parameters, ``log_slope_sd=0.5`` so every prior constant counts) against likelihood ×
    normalized prior integrated by 2-D quadrature (within 0.05 nats; measured 0.01), and with
    ten stratum effects against a 100,000-draw estimate from another proposal around the same
    mode (t with 5 d.o.f., scale 1.5; within 1 nat: the importance estimates of this
    funnel-shaped posterior scatter by about half a nat, the Laplace approximation alone is
    about 2 nats low); a degenerate covariance gives ``nan``."""
    from scipy import integrate, stats

    from bayes_activeeval.oracles.calibration import CalibrationOracle

    rng = np.random.default_rng(0)
    x = rng.normal(size=5000)
    y = (rng.random(5000) < special.expit(-1 + 1.5 * x + 0.6 * np.sin(2 * x))).astype(int)
    p = special.expit(x)
    pool = bae.Pool((p > 0.5).astype(int), p)
    items = rng.choice(5000, 200, replace=False)
    o = CalibrationOracle(model="model", n_strata=0, log_slope_sd=0.5)
    o.initialize(pool, "model")
    o.update(items, y[items])
    le = o.log_evidence()
    xt, yy, c0 = o.xt[items], y[items], o.x_center

    def integrand(beta, c):
        eta = c + np.exp(beta) * xt
        ll = np.sum(yy * eta - np.logaddexp(0, eta))
        lp = stats.norm.logpdf(c, c0, o.intercept_sd) + stats.norm.logpdf(beta, 0, o.log_slope_sd)
        return np.exp(ll + lp - le)

    cm, bm = o.params
    ratio, _ = integrate.dblquad(integrand, cm - 2, cm + 2, bm - 2, bm + 2)
    assert abs(np.log(ratio)) < 0.05

    o10 = CalibrationOracle(model="model", n_strata=10)
    o10.initialize(pool, "model")
    o10.update(items, y[items])
    prop = stats.multivariate_t(loc=o10.params, shape=1.5 * o10.cov_, df=5)
    th = prop.rvs(100_000, random_state=np.random.default_rng(1))
    lp = np.concatenate([o10._log_post_many(th[k : k + 10_000], *o10._data())
                         for k in range(0, th.shape[0], 10_000)])  # fmt: skip
    const = (
        -np.log(o10.intercept_sd) - np.log(o10.log_slope_sd) - np.log(2 * np.pi)
        + 0.5 * np.log(2 / np.pi) - np.log(o10.stratum_sd) - 0.5 * o10.H * np.log(2 * np.pi)
    )  # fmt: skip
    lw = lp + const - prop.logpdf(th)
    ref = special.logsumexp(lw) - np.log(lw.size)
    assert abs(o10.log_evidence() - ref) < 1.0
    laplace = (
        o10.log_posterior() + const + 0.5 * o10.n_params * np.log(2 * np.pi)
        + 0.5 * np.linalg.slogdet(o10.cov_)[1]
    )  # fmt: skip
    assert ref - laplace > 1.0  # why it is not the Laplace value (docs: about 2 nats low)
    o.cov_ = np.diag([1.0, 0.0])  # a degenerate fit has no evidence (not an underestimate)
    assert np.isnan(o.log_evidence())


@pytest.fixture(scope="module")
def strong_weak_pool():
    """20,000 items, 2 % positives; ``strong`` scores the true log-odds, ``weak`` mostly noise."""
    rng = np.random.default_rng(5)
    n = 20_000
    eta = rng.normal(-4.5, 2.0, n)
    y = (rng.random(n) < special.expit(eta)).astype(int)
    weak = 0.3 * eta + rng.normal(0.0, 2.0, n) - 3.0
    probs = {"strong": special.expit(eta), "weak": special.expit(weak)}
    preds = {m: (p > 0.5).astype(int) for m, p in probs.items()}
    return bae.Pool(preds, probs), y


def test_calibration_map_of_several_models_is_their_model_average(strong_weak_pool):
    """Several models: the Bayesian model average of their label models, the same in either
    order, between the members' maps item by item, and with 600 labels all but equal to the
    map of the scores that predict them (the weak model's evidence is far lower)."""
    from bayes_activeeval.posterior.calibration import _fitted_oracle

    pool, y = strong_weak_pool
    items = np.random.default_rng(1).choice(y.size, 600, replace=False)
    both = bae.posterior.calibration_map(pool, ("weak", "strong"), items, y[items])
    np.testing.assert_array_equal(
        both, bae.posterior.calibration_map(pool, ["strong", "weak"], items, y[items])
    )
    s = bae.posterior.calibration_map(pool, "strong", items, y[items])
    w = bae.posterior.calibration_map(pool, "weak", items, y[items])
    assert np.all((both >= np.minimum(s, w) - 1e-12) & (both <= np.maximum(s, w) + 1e-12))
    ev = {m: _fitted_oracle(pool, m, items, y[items], {}).log_evidence() for m in pool.models}
    assert ev["strong"] - ev["weak"] > 20  # the labels decide
    np.testing.assert_allclose(both, s, atol=1e-8)
    with pytest.raises(ValueError, match="at least one model"):
        bae.posterior.calibration_map(pool, [], items, y[items])


def test_adaptive_guard_of_a_difference_averages_both_calibrations(strong_weak_pool):
    """The adaptive guard of a difference of AUCs with the weak model first: its belief is the
    model average of both calibrations (not the first model's, which the labels reject)."""
    pool, y = strong_weak_pool
    ev = bae.ActiveEvaluator(pool, bae.difference("roc_auc", "weak", "strong"), rng=3)
    ev.run(lambda i: y[i], budget=400, progress=False)
    d = ev.draws()
    i = d["item"].to_numpy()
    known = np.unique(i)
    pi = bae.posterior.calibration_map(pool, ("weak", "strong"), known, y[known])
    first = bae.posterior.calibration_map(pool, "weak", known, y[known])
    assert not np.allclose(pi[i], first[i], rtol=0.1)
    m = tf.RankMeasure("roc_auc").bind(("weak", "strong"), difference=True)
    scores = np.column_stack([tf.model_scores(pool, k)[i] for k in ("weak", "strong")])
    ref = tf.rank_estimate_arrays(
        m, scores, y[i], d["weight"].to_numpy(), n_labels=ev.n_labels, belief=pi[i]
    )
    est = ev.estimate()
    assert est.value == pytest.approx(ref.value)
    np.testing.assert_allclose(est.details["cov_belief"], ref.details["cov_belief"], rtol=1e-10)


def test_calibration_map_with_probabilities_keeps_calibrated_ones(strong_weak_pool):
    """``with_probabilities=True``: where the model's probabilities are the true ones the
    average keeps them (most weight: the calibration's parameters cost an Occam factor the
    labels cannot repay), and where they are squashed like SVM margins it is the calibrated map
    (their likelihood is tens of nats lower); a repeated item counts once."""
    from scipy import special as sp

    pool, y = strong_weak_pool
    items = np.random.default_rng(2).choice(y.size, 600, replace=False)
    own = pool.view("strong").positive_prob()
    mapped = bae.posterior.calibration_map(pool, "strong", items, y[items])
    both = bae.posterior.calibration_map(pool, "strong", items, y[items], with_probabilities=True)
    weight = np.median((both - mapped) / (own - mapped))  # the probabilities' weight
    assert 0.5 < weight <= 1.0
    twice = np.concatenate([items, items])
    np.testing.assert_allclose(
        bae.posterior.calibration_map(pool, "strong", twice, y[twice], with_probabilities=True),
        both,
    )
    squashed = sp.expit(sp.logit(own) / 4)  # an SVM-like squashing of the true log-odds
    svm = bae.Pool((squashed > 0.5).astype(int), squashed)
    mapped = bae.posterior.calibration_map(svm, "model", items, y[items])
    both = bae.posterior.calibration_map(svm, "model", items, y[items], with_probabilities=True)
    np.testing.assert_allclose(both, mapped, atol=1e-8)
    with pytest.raises(ValueError, match="with_probabilities"):
        scores_only = bae.Pool((squashed > 0.5).astype(int), scores=sp.logit(squashed))
        bae.posterior.calibration_map(
            scores_only, "model", items, y[items], with_probabilities=True
        )


def test_calibration_map_model_average_weights(strong_weak_pool, monkeypatch):
    """Two models of the same quality (the strong scores with a little noise, twice): neither
    weight is degenerate and the average is ``Σ_k w_k P_k`` with ``w ∝ exp(log evidence)``;
    without evidence (degenerate fits) the weights are equal; ``model=None`` is the pool's only
    model."""
    from bayes_activeeval.posterior.calibration import _fitted_oracle

    _, y = strong_weak_pool
    rng = np.random.default_rng(7)
    eta = special.logit(strong_weak_pool[0].view("strong").positive_prob())
    probs = {k: special.expit(eta + rng.normal(0, 0.3, y.size)) for k in ("u", "v")}
    pool = bae.Pool({k: (p > 0.5).astype(int) for k, p in probs.items()}, probs)
    items = rng.choice(y.size, 400, replace=False)
    oracles = [_fitted_oracle(pool, k, items, y[items], {}) for k in ("u", "v")]
    w = special.softmax([o.log_evidence() for o in oracles])
    assert 0.02 < w[0] < 0.98
    ref = sum(wk * special.expit(o.linear_predictor()[0]) for wk, o in zip(w, oracles, strict=True))
    np.testing.assert_allclose(
        bae.posterior.calibration_map(pool, ("u", "v"), items, y[items]), ref, rtol=1e-12
    )
    from bayes_activeeval.oracles.calibration import CalibrationOracle

    monkeypatch.setattr(CalibrationOracle, "log_evidence", lambda self: float("nan"))
    eq = sum(0.5 * special.expit(o.linear_predictor()[0]) for o in oracles)
    np.testing.assert_allclose(
        bae.posterior.calibration_map(pool, ("u", "v"), items, y[items]), eq, rtol=1e-12
    )
    monkeypatch.undo()
    one = bae.Pool((probs["u"] > 0.5).astype(int), probs["u"])
    np.testing.assert_array_equal(
        bae.posterior.calibration_map(one, None, items, y[items]),
        bae.posterior.calibration_map(one, "model", items, y[items]),
    )
