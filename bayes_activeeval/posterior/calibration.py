"""The item-level, finite-population posterior of a measure (``method="calibration"``).

The :class:`~bayes_activeeval.oracles.calibration.CalibrationOracle` label model
``logit P(y = 1 | x) = c + b (s(x) − s̄) + σ z_{h(x)}`` (``s`` the model's log-odds, or its score
standardized by the median and ``IQR / 1.349``; with the oracle's asymptotes
``P = λ_0 + (1 − λ_0 − λ_1) expit(η)``) is fitted to the distinct labeled items
without weights — the adaptive selection depends only on the scores and earlier labels, so it is
ignorable given ``s`` (Rubin, 1976) — and the unlabeled items' labels are drawn from its
posterior predictive (binomial counts in narrow bins of ``s``); every draw of the pool's labels is
pushed through the measure (Marchant & Rubinstein (2021), Def. 1). The default of
``ActiveEvaluator.posterior()`` for a binary pool under a deterministic oracle; see
``docs/adaptive.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import check_count, check_number, check_rng
from ..measures import Measure
from .common import (
    apply_g,
    check_labeled,
    distinct_labels,
    key_names,
    prediction_key,
    unlabeled_loss_sums,
)

__all__ = ["CalibrationOptions", "calibration_map", "calibration_posterior"]


@dataclass(frozen=True)
class CalibrationOptions:
    """Options of the calibration posterior.

    Parameters
    ----------
    fit : {"laplace", "nuts"}, optional
        How the label model's parameters are drawn (default ``"laplace"``).
    bin_width : float, optional
        Width of the bins of the unlabeled items on the label model's feature (the log-odds;
        for a pool without probabilities the score standardized by its median and
        ``IQR / 1.349``), a finite number > 0 (default ``0.1``).
    calibration_options : dict, optional
        Keyword arguments of the calibration oracle (default ``None``: its defaults, except
        ``n_samples = max(512, 2 · chains · draws)`` and unclipped log-odds unless ``clip`` is
        given).

    Attributes
    ----------
    fit : {"laplace", "nuts"}
        Parameter draws of the label model from the importance-corrected Laplace posterior
        (σ at its mode; default) or from NUTS.
    bin_width : float
        Width of the grid of the label model's feature (log-odds, or standardized score) on
        which the unlabeled items are binned (default 0.1: the bin's expected count is off by a
        relative ``≈ b² δ²/24``).
    calibration_options : dict
        Options of :class:`~bayes_activeeval.oracles.calibration.CalibrationOracle`
        (``n_strata``, prior scales, ``feature``, ``clip``, the asymptotes, …).
    """

    fit: str = "laplace"
    bin_width: float = 0.1
    calibration_options: dict[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.fit, str) or self.fit not in ("laplace", "nuts"):
            raise ValueError(f"fit must be 'laplace' or 'nuts', got {self.fit!r}")
        if not check_number(self.bin_width, "bin_width") > 0:
            raise ValueError(f"bin_width must be a finite number > 0, got {self.bin_width!r}")
        opts = self.calibration_options
        if opts is not None and not isinstance(opts, Mapping):
            raise TypeError(
                f"calibration_options must be a dict of CalibrationOracle options or None, got "
                f"{opts!r}"
            )
        for key, why in (
            ("deterministic", "the calibration posterior is for a deterministic oracle"),
            ("model", "pass the model as model="),
        ):
            if opts is not None and key in opts:
                raise TypeError(f"calibration_options cannot set {key!r}: {why}")


def calibration_posterior(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    *,
    model: str | None = None,
    options: CalibrationOptions | None = None,
    deterministic: bool = True,
    draws: int = 1000,
    chains: int = 2,
    tune: int = 1000,
    encoded: bool = False,
    rng: Any = None,
):
    """Item-level finite-population posterior of a measure, as an ``xarray.DataTree``.

    Parameters are those of :func:`~bayes_activeeval.posterior.contingency_posterior` (binary
    pools, deterministic oracle; the labeled items enter unweighted), with the method's own
    ``options``. ``measure`` may also be a threshold-free measure (``"roc_auc"``,
    ``"average_precision"``, ``"recall@fpr=α"``, of one model; a stack or a difference is refused,
    since the label model calibrates one model's scores and would favour that model): every
    unlabeled item then draws its own label from the label model's posterior predictive and the
    measure is evaluated on the whole pool per draw (Marchant & Rubinstein (2021), Def. 1, with
    the ranking functional for ``g``).

    Parameters
    ----------
    pool : Pool
        A binary pool with a positive class.
    measure : str or Measure
        A measure of one model, or a threshold-free measure of one model.
    indices, labels : array-like (n,)
        The labeled draws (a repeated item counts once; two different labels of one item are
        refused) and their labels.
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    options : CalibrationOptions, optional
        The method's options (default ``None``: ``CalibrationOptions()``).
    deterministic : bool, optional
        Must be ``True`` (default): the posterior is for a deterministic oracle.
    draws, chains : int, optional
        Posterior draws per chain and chains (default ``1000`` and ``2``).
    tune : int, optional
        NUTS tuning steps, ``fit="nuts"`` only (default ``1000``).
    encoded : bool, optional
        Labels are already class indices ``0``/``1`` (default ``False``).
    rng : None, int or numpy.random.Generator, optional
        Random numbers for the parameter draws and the unlabeled items' labels.

    Returns
    -------
    xarray.DataTree
        ``risk``, ``measure``, ``a``, ``b`` (the map on the raw feature), ``stratum_effect`` and
        ``unlabeled_positives`` (prediction: every prediction of the pool) in ``posterior``; the
        labeled counts per prediction × class in ``observed_data``. For a threshold-free
        measure: ``measure``, ``a``, ``b``, ``stratum_effect`` and ``unlabeled_positives`` (one
        total per draw), and the labeled counts per class. With the oracle's asymptotes
        (``calibration_options``: ``lower_asymptote``, ``upper_asymptote``) the labels are
        drawn from Copas's (1988) ``λ_0 + (1 − λ_0 − λ_1) expit(η)``: ``lambda_0`` and
        ``lambda_1`` are posterior variables with ``fit="nuts"`` and attributes (the joint
        mode, held fixed) with ``fit="laplace"``.

    Raises
    ------
    ValueError
        If an item has two different labels (``deterministic=True``: one label per item).

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> demo = bae.datasets.make_classification_pool(20_000, prevalence=0.01, rng=0)
    >>> d = bae.optimal_proposal(demo.pool, "roc_auc").draw(500, rng=1)
    >>> post = bae.posterior.calibration_posterior(
    ...     demo.pool, "roc_auc", d.indices, demo.labels[d.indices], draws=200, rng=2)
    >>> float(post["posterior"]["measure"].mean()) > 0.5
    True
    """
    opts = CalibrationOptions() if options is None else options
    draws = check_count(draws, "draws")
    chains = check_count(chains, "chains")
    tune = check_count(tune, "tune", minimum=0)
    rng = check_rng(rng)
    return _calibration_tree(
        pool,
        measure,
        indices,
        labels,
        model=model,
        deterministic=deterministic,
        encoded=encoded,
        draws=draws,
        chains=chains,
        tune=tune,
        fit=opts.fit,
        bin_width=opts.bin_width,
        calibration_options=opts.calibration_options,
        rng=rng,
    )


def _calibration_posterior(pool, m, views, model, fitted, *, chains, draws, bin_width, rng):
    """Item-level finite-population posterior (``method="calibration"``; see
    :func:`calibration_posterior`).

    1. Label model: the hierarchical Bayesian calibration of :class:`CalibrationOracle`
       (``logit P(y = 1 | x) = c + b (s(x) − s̄) + σ z_{h(x)}``, ``s`` the logit of the model's
       probability, or its score standardized by the median and ``IQR / 1.349``) fitted to the
       distinct labeled items, unweighted (the selection depends only on ``s`` and earlier
       labels, hence is ignorable given ``s``; Rubin 1976). Parameter draws from its
       importance-corrected Laplace posterior (``fit="laplace"``) or NUTS (``fit="nuts"``).
    2. Posterior predictive of the unlabeled items' labels. They are grouped by calibration
       stratum, prediction and a grid of ``s`` of width ``bin_width``; per draw ``t``, a bin's
       positives are ``n_t ∼ Binomial(N^U_bin, P_t(s̄^U_bin))`` with ``P_t = expit(η_t)``, or
       with the oracle's asymptotes Copas's (1988) ``λ_0t + (1 − λ_0t − λ_1t) expit(η_t)``
       (``λ`` at the joint mode for ``fit="laplace"``, drawn for ``fit="nuts"``). Every
       prediction of the pool gets its count of unlabeled positives, also one whose items are
       all labeled.
    3. ``R_t = Σ_{labeled} p ℓ(x, y) + Σ_bins [L^U_{bin,0} + (n_t / N^U_bin)(L^U_{bin,1} −
       L^U_{bin,0})]`` (``L^U_{bin,c}`` the ``p``-weighted loss sum of the bin's unlabeled items
       if their label were ``c``) and ``G_t = g(R_t)``.
    """
    from scipy import special

    bw = float(bin_width)
    M, C = pool.n_items, 2
    oracle, ui, yu, cc, b, u_h = fitted.unpack()
    lam = fitted.lam
    S, pos = chains * draws, int(pool.pos)
    known = np.zeros(M, dtype=bool)
    known[ui] = True
    y_known = np.zeros(M, dtype=np.int64)
    y_known[ui] = yu
    key = prediction_key(pool, (model,))  # for grouping
    x, h = oracle.x, oracle.strata
    xb = np.floor((x - x.min()) / bw).astype(np.int64)
    nxb = int(xb.max()) + 1
    H = max(oracle.H, 1)
    raw_key = (key * H + h) * nxb + xb
    unl = ~known
    bins, binv = np.unique(raw_key[unl], return_inverse=True)
    nb = bins.size
    item_bin = np.full(M, -1, dtype=np.int64)
    item_bin[unl] = binv
    p = pool.p
    d = m.dim
    N = np.bincount(binv, minlength=nb).astype(np.int64)
    xbar = np.bincount(binv, weights=x[unl], minlength=nb) / np.maximum(N, 1)
    bin_h = (bins // nxb) % H
    bin_key = bins // (nxb * H)
    Lsum, R_known = unlabeled_loss_sums(m, views, p, item_bin, nb, known, y_known, C)
    base = R_known + Lsum[:, 1 - pos].sum(axis=0)
    D = Lsum[:, pos] - Lsum[:, 1 - pos]  # (bin, d)
    R = np.empty((S, d))
    # every prediction of the pool, also one whose items are all labeled (no unlabeled bin)
    K = int(pool.n_classes)
    n_pos = np.zeros((S, K))
    block = max(1, (1 << 22) // max(nb, 1))
    for s0 in range(0, S, block):
        sb = slice(s0, min(s0 + block, S))
        eta = cc[sb, None] + b[sb, None] * (xbar[None, :] - oracle.x_center) + u_h[sb][:, bin_h]
        p1 = special.expit(eta)
        if lam is not None:  # Copas's asymptotes: λ_0 + (1 − λ_0 − λ_1) expit(η), per draw
            p1 = oracle.with_asymptotes(p1, lam[sb, :1], lam[sb, 1:])
        n1 = rng.binomial(N[None, :], p1)
        R[sb] = base + (n1 / np.maximum(N, 1)[None, :]) @ D
        for k in np.unique(bin_key):
            n_pos[sb, k] = n1[:, bin_key == k].sum(axis=1)
    G = apply_g(m, R)
    info = {
        "n_pos": n_pos,
        "keys": np.arange(K),
        "labeled": np.bincount(key[ui] * C + yu, minlength=K * C).reshape(K, C),
    }
    return R.reshape(chains, draws, d), G.reshape(chains, draws, m.n_outputs), m, info


def _rank_posterior(pool, m, model, fitted, *, chains, draws, rng):
    """Item-level finite-population posterior of a threshold-free measure (ROC AUC, average
    precision, recall at a false-positive rate; one model).

    Step 1 is :func:`_calibration_posterior`'s label model. Step 2 draws every unlabeled item's
    label in every posterior draw ``t``, ``y ∼ Bernoulli(expit(η_t(x)))``, exactly but without
    touching every (item, draw) pair: items are grouped by an upper bound
    ``e ≥ max_t expit(η_t(x))`` (quarter-octave levels), each level draws its candidate (item,
    draw) pairs as the successes of Bernoulli(``e``) trials (a binomial count, then a uniform
    subset), and a candidate is kept with probability ``expit(η_t(x))/e`` (thinning; items with
    ``e > 0.05`` are drawn directly). Step 3 evaluates
    the measure on the whole pool per draw, labeled items at their labels, with the pool's masses
    ``p`` (:func:`~bayes_activeeval.threshold_free.values_from_positives`); no binning: the
    ranking needs each item's own score.
    """
    from ..threshold_free.estimates import model_scores
    from ..threshold_free.kernels import tie_groups, values_from_positives

    oracle, ui, yu, cc, b, u_h = fitted.unpack()
    M, S, pos = pool.n_items, chains * draws, int(pool.pos)
    p = np.asarray(pool.p, dtype=float)
    known = np.zeros(M, dtype=bool)
    known[ui] = True
    unl = np.flatnonzero(~known)
    lin = (cc - b * oracle.x_center)[:, None] + u_h  # η_t = lin[t, h] + b_t x
    t_new, i_new = _draw_positives(rng, oracle.x[unl], oracle.strata[unl], lin, b, lam=fitted.lam)
    kp = ui[yu == pos]  # the labeled positives, in every draw
    item = np.concatenate([np.repeat(kp, S), unl[i_new]])
    draw = np.concatenate([np.tile(np.arange(S), kp.size), t_new])
    inv, G = tie_groups(model_scores(pool, model))
    tot = np.bincount(inv, p, G)
    G_out = values_from_positives(m, draw, inv[item], p[item], S, tot)[:, None]
    hidden = np.bincount(t_new, minlength=S).reshape(chains, draws)
    return G_out.reshape(chains, draws, m.n_outputs), hidden, np.bincount(yu, minlength=2)


def _draw_positives(rng, x, h, lin, b, dense_above: float = 0.05, n_bins: int = 512, *, lam=None):
    """All ``(draw, item)`` pairs with a positive label when item ``i`` is positive in draw ``t``
    with probability ``P_t(x_i) = expit(lin[t, h_i] + b_t x_i)``, independently (see
    :func:`_rank_posterior`); with ``lam`` (shape ``(S, 2)``, Copas's asymptotes per draw)
    ``P_t = λ_0t + (1 − λ_0t − λ_1t) expit(…)``, bounded by ``max λ_0 + max(1 − λ_0 − λ_1)
    expit(max η)``.

    Returns
    -------
    t, i : ndarray of int
    """
    from scipy import special

    S, n = b.size, x.size
    if n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)

    def prob(eta, t):  # P_t(x) from η_t(x) for draws t (broadcast with eta)
        p1 = special.expit(eta)
        if lam is None:
            return p1
        return lam[t, 0] + (1.0 - lam[t, 0] - lam[t, 1]) * p1

    # an upper bound of η over the draws: η is linear in x, so on a bin of x its maximum over
    # the draws is at one of the bin's edges
    lo, hi = float(x.min()), float(x.max())
    width = max(hi - lo, 1e-12) / n_bins
    k = np.minimum(((x - lo) / width).astype(np.int64), n_bins - 1)
    edges = lo + width * np.arange(n_bins + 1)
    up = np.empty(n)
    for hh in np.unique(h):
        at = h == hh
        e_max = (lin[:, hh][:, None] + b[:, None] * edges[None, :]).max(axis=0)
        up[at] = np.maximum(e_max[k[at]], e_max[k[at] + 1])
    bound = special.expit(up)
    if lam is not None:
        bound = np.minimum(lam[:, 0].max() + (1.0 - lam.sum(axis=1)).max() * bound, 1.0)
    level = np.ceil(4.0 * np.log2(np.maximum(bound, 1e-300)))
    e = np.minimum(2.0 ** (level / 4.0), 1.0)
    ts, its = [], []
    dense = np.flatnonzero(e > dense_above)
    block = max(1, (1 << 22) // max(dense.size, 1))
    for t0 in range(0, S, block):
        t1 = min(t0 + block, S)
        eta = lin[t0:t1][:, h[dense]] + b[t0:t1, None] * x[dense][None, :]
        tt, ii = np.nonzero(rng.random(eta.shape) < prob(eta, np.arange(t0, t1)[:, None]))
        ts.append(tt + t0)
        its.append(dense[ii])
    sparse_items = np.flatnonzero(e <= dense_above)
    for lv in np.unique(level[sparse_items]):
        items = sparse_items[level[sparse_items] == lv]
        e_lv = 2.0 ** (lv / 4.0)
        flat = _bernoulli_positions(rng, items.size * S, e_lv)
        c = flat.size
        ii, tt = items[flat // S], flat % S
        eta = lin[tt, h[ii]] + b[tt] * x[ii]
        keep = rng.random(c) * e_lv < prob(eta, tt)
        ts.append(tt[keep])
        its.append(ii[keep])
    return np.concatenate(ts).astype(np.int64), np.concatenate(its).astype(np.int64)


def _fitted_oracle(pool, model: str, items: np.ndarray, labels: np.ndarray, opts: dict):
    """The Bayesian calibration of ``model``'s scores (:class:`~bayes_activeeval.oracles.
    calibration.CalibrationOracle`, deterministic, options ``opts``) fitted to distinct labeled
    ``items`` with encoded ``labels``."""
    from ..oracles.calibration import CalibrationOracle, log_odds

    pos = int(pool.pos)
    oracle = CalibrationOracle(deterministic=True, model=model, **opts)
    oracle.initialize(pool, model)
    if oracle.used_feature == "logit" and "clip" not in opts:
        # the oracle clips probabilities at 1e-6 before the logit; rare-positive pools have most
        # of their items below that, and a label model that sees them all at logit(1e-6)
        # predicts phantom positives in the bulk: use the log-odds at full precision here
        x = log_odds(pool.view(model).prob, pos)
        oracle.initialize_feature(x, oracle.prior_belief, pos, feature="logit")
    oracle.update(items, labels)
    return oracle


def calibration_map(
    pool,
    model: str | Sequence[str],
    items: Any,
    labels: Any,
    *,
    with_probabilities: bool = False,
) -> np.ndarray:
    """``P(y = pos | x)`` of every item under the label model of the calibration posterior at its
    posterior mode: the Bayesian calibration ``logit P = c + b (s(x) − s̄) + σ z_{h(x)}`` of the
    model's log-odds (or scores) fitted to the distinct labeled ``items`` (labels as class
    indices), unweighted (ignorable selection given the score; Rubin 1976) — and without the
    point masses an oracle model puts on labeled items.

    With several models (a stacked or difference measure) each model's scores get their own
    label model and the result is their Bayesian model average, ``Σ_k w_k P_k`` with
    ``w_k ∝ p(y | M_k)`` each label model's marginal likelihood
    (:meth:`~bayes_activeeval.oracles.calibration.CalibrationOracle.log_evidence`, importance
    sampling; Kass & Raftery 1995) under equal prior odds: the belief does not depend on the
    order of the models, and the labels decide which scores predict them (equal weights if a
    fit is degenerate and has no evidence). (Each label model
    conditions on one model's score while an adaptive design selected the items on all of
    them, so the selection is ignorable for each only approximately.) ``with_probabilities=True``
    adds each model's own probabilities to the average as a label model without parameters,
    whose marginal likelihood is their likelihood of the labels ``Π_i P(y_i | x_i)``: the
    calibration's prior is centred on the identity map, so where the probabilities are already
    calibrated the labels cannot tell the two apart and the Occam factor of the calibration's
    parameters keeps the probabilities, while SVM margins or stale probabilities lose by tens of
    nats. That is a valid Bayes factor only if the probabilities were not fitted to these
    labels.

    The adaptive evaluator's guarded variance of a threshold-free measure averages each draw's
    squared influence over it (``docs/threshold-free.md``).

    Parameters
    ----------
    pool : Pool
        A binary pool.
    model : str, sequence of str or None
        The model (``None``: the pool's only model), or the models whose label models are
        averaged.
    items, labels : array-like of int
        Labeled items (a repeated item counts once) and their encoded labels.
    with_probabilities : bool
        Also average the models' own probabilities (pools with probabilities only).

    Returns
    -------
    ndarray (n_items,)
    """
    from scipy import special

    items = np.asarray(items, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64)
    models = [model] if model is None or isinstance(model, str) else list(dict.fromkeys(model))
    if not models:
        raise ValueError("model must name at least one model, got an empty sequence")
    if with_probabilities and not pool.has_probs():
        raise ValueError("with_probabilities=True needs a pool with probabilities")
    oracles = [_fitted_oracle(pool, m, items, labels, {}) for m in models]
    probs = [special.expit(o.linear_predictor()[0]) for o in oracles]
    if len(probs) == 1 and not with_probabilities:
        return probs[0]
    log_ev = [o.log_evidence() for o in oracles]
    if with_probabilities:
        u, first = np.unique(items, return_index=True)  # each labeled item once, as the fits
        y = labels[first] == pool.pos
        for m in models:
            p1 = pool.view(m).positive_prob()
            probs.append(p1)
            py = np.where(y, p1[u], 1.0 - p1[u])
            log_ev.append(float(np.sum(np.log(np.clip(py, 1e-300, 1.0)))))
    if not np.all(np.isfinite(log_ev)):  # a degenerate fit has no evidence: equal weights
        log_ev = [0.0] * len(log_ev)
    w = special.softmax(log_ev)
    return np.sum([wk * pk for wk, pk in zip(w, probs, strict=True)], axis=0)


def _bernoulli_positions(rng, n: int, e: float) -> np.ndarray:
    """The successes among ``n`` independent Bernoulli(``e``) trials, as sorted positions, in
    ``O(e n)``: their number is ``Binomial(n, e)`` and, given it, they are a uniform subset,
    drawn as uniform positions with repeats redrawn (``numpy``'s ``choice`` without replacement
    would shuffle all ``n`` positions once ``e`` exceeds about 1 %). Used for ``e ≤ 0.05``, where
    repeats are rare."""
    c = int(rng.binomial(n, e))
    pos = np.unique(rng.integers(0, n, size=c))
    while pos.size < c:  # a uniform c-subset: the procedure is symmetric in the positions
        pos = np.unique(np.concatenate([pos, rng.integers(0, n, size=c - pos.size)]))
    return pos


@dataclass(frozen=True)
class _LabelModel:
    """The fitted label model of :func:`_label_model`: the oracle, the distinct labeled items
    and their (encoded) labels, per posterior draw the intercept at ``x_center`` (``c``), the
    slope on the oracle's (standardized) feature (``b``) and the stratum effects (``u_h``, shape
    ``(S, max(H, 1))``), the asymptotes ``(λ_0, λ_1)`` per draw (``lam``, shape ``(S, 2)``;
    ``None`` without them), and the parameter arrays of the posterior group (``params``: ``a``,
    ``b`` on the raw feature, ``stratum_effect``, with NUTS ``lambda_0`` and ``lambda_1``)."""

    oracle: Any
    items: np.ndarray
    labels: np.ndarray
    c: np.ndarray
    b: np.ndarray
    u_h: np.ndarray
    params: dict[str, np.ndarray]
    lam: np.ndarray | None = None

    def unpack(self) -> tuple:
        """``(oracle, items, labels, c, b, u_h)``."""
        return self.oracle, self.items, self.labels, self.c, self.b, self.u_h


def _label_model(
    pool, model, indices, labels, *, encoded, draws, chains, tune, fit, calibration_options, rng
) -> _LabelModel:
    """Step 1 of :func:`_calibration_posterior`: the Bayesian calibration of the one model's
    scores fitted to the distinct labeled items (unweighted), and ``chains × draws`` draws of its
    parameters. With asymptotes (``lower_asymptote``, ``upper_asymptote``) the shares are held at
    the oracle's joint mode for ``fit="laplace"`` (as its belief holds them) and drawn with the
    map for ``fit="nuts"``.

    Returns
    -------
    _LabelModel
    """
    if pool.task != "binary" or pool.pos is None:
        raise ValueError(
            "method='calibration' needs a binary pool with a positive class "
            f"(got task={pool.task!r}); use method='conjugate' or 'pymc'"
        )
    idx, y = check_labeled(pool, indices, labels, encoded)
    if y.shape != idx.shape:
        raise ValueError(
            f"indices and labels must have the same length, got {idx.size} and {y.size}"
        )
    if y.size and (y.min() < 0 or y.max() >= 2):
        raise ValueError("labels must be class indices 0..1 when encoded=True")
    ui, yu = distinct_labels(idx, y, hint="; method='conjugate' takes deterministic=False")
    if ui.size == 0:
        raise ValueError("method='calibration' needs at least one labeled item")
    opts = dict(calibration_options or {})
    S = chains * draws
    opts.setdefault("n_samples", max(512, 2 * S))
    oracle = _fitted_oracle(pool, model, ui, yu, opts)
    extra: dict[str, np.ndarray] = {}
    lam = None
    if fit == "laplace":
        thetas, w = oracle.posterior_samples()
        pick = rng.choice(thetas.shape[0], size=S, p=w)
        th = thetas[pick]
        cc, b = th[:, 0], np.exp(th[:, 1])
        u_h = np.exp(th[:, 2])[:, None] * th[:, 3:] if oracle.H else np.zeros((S, 1))
        if oracle.has_asymptotes:  # the shares at the joint mode, as the oracle's belief
            lam = np.broadcast_to(np.asarray(oracle.lam, dtype=float), (S, 2))
    else:
        idata = oracle.posterior(draws, rng=rng, tune=tune, chains=chains)
        post = idata["posterior"]
        cc = np.asarray(post["c"]).reshape(-1)
        b = np.asarray(post["b"]).reshape(-1)  # on the raw feature
        if oracle.x_scale != 1.0:
            b = b * oracle.x_scale
        u_h = (
            np.asarray(post["stratum_effect"]).reshape(S, oracle.H)
            if oracle.H
            else np.zeros((S, 1))
        )
        if oracle.has_asymptotes:
            lam = np.column_stack(
                [np.asarray(post[v], dtype=float).reshape(-1) for v in ("lambda_0", "lambda_1")]
            )
            extra["lambda_0"] = lam[:, 0].reshape(chains, draws)
            extra["lambda_1"] = lam[:, 1].reshape(chains, draws)
    # the map on the raw feature: a = c − b' (x̄ + m/d), b = b'/d (the oracle's coef_)
    extra["a"] = (cc - b * oracle._raw_pivot).reshape(chains, draws)
    extra["b"] = (b / oracle.x_scale).reshape(chains, draws)
    if oracle.H:
        extra["stratum_effect"] = u_h.reshape(chains, draws, oracle.H)
    return _LabelModel(oracle, ui, yu, cc, b, u_h, extra, lam)


def _calibration_tree(
    pool,
    measure,
    indices,
    labels,
    *,
    model,
    deterministic,
    encoded,
    draws,
    chains,
    tune,
    fit,
    bin_width,
    calibration_options,
    rng,
):
    """Fit the label model once (:func:`_label_model`) and wrap :func:`_calibration_posterior`
    (or, for a threshold-free measure, :func:`_rank_posterior`) as an ``xarray.DataTree``."""
    import arviz_base as azb

    from ..threshold_free import measure_models, rank_measure

    rank = rank_measure(measure)
    if not deterministic:
        other = (
            ""
            if rank
            else "; for a stochastic oracle use method='conjugate' with weighting='design'"
        )
        raise ValueError(
            f"method='calibration' needs a deterministic oracle (deterministic=True){other}"
        )
    if rank is not None:
        models = measure_models(pool, rank, model)
    else:
        m, views = pool.resolve(measure, model)
        models = pool.models_of(m, model)
    if len(models) > 1:
        # the label model calibrates one model's scores: every other model would be judged
        # against labels drawn from the first model's calibration, which favours the first (a
        # better second model's posterior mean F1 was 0.23 too low with 1,500 passive labels in
        # test_calibration_posterior_refuses_several_models' setting, on the code before this check)
        raise ValueError(
            f"the calibration posterior takes one model, got {list(models)}: its label model "
            "calibrates that model's scores, and another model would be judged against labels "
            "drawn from the first's calibration; ask for each model's posterior separately "
            "(model=...)"
            + ("" if rank is not None else ", or use method='conjugate' for the joint posterior")
        )
    (name,) = models
    fitted = _label_model(
        pool,
        name,
        indices,
        labels,
        encoded=encoded,
        draws=draws,
        chains=chains,
        tune=tune,
        fit=fit,
        calibration_options=calibration_options,
        rng=rng,
    )
    common = {"chains": chains, "draws": draws, "rng": rng}
    attrs = {
        "method": "calibration",
        "weighting": "none",
        "fit": fit,
        "finite_population": 1,
        "deterministic": 1,
    }
    if fitted.lam is not None and fit == "laplace":  # held at the mode: attributes, not draws
        attrs["lambda_0"], attrs["lambda_1"] = (float(v) for v in fitted.oracle.lam)
    if rank is not None:
        G, hidden, labeled = _rank_posterior(pool, rank, name, fitted, **common)
        post = {"measure": G, **fitted.params, "unlabeled_positives": hidden}
        dims = {"measure": ["output"], "stratum_effect": ["stratum"], "labeled_counts": ["class"]}
        coords = {"output": list(rank.outputs), "class": [str(c) for c in pool.classes]}
        observed = {"labeled_counts": labeled}
        attrs["measure"] = rank.name
    else:
        R, G, m, info = _calibration_posterior(
            pool, m, views, name, fitted, bin_width=bin_width, **common
        )
        keys = key_names(pool, info["keys"], (name,))
        chains, draws = R.shape[:2]
        post = {
            "risk": R,
            "measure": G,
            **fitted.params,
            "unlabeled_positives": info["n_pos"].reshape(chains, draws, -1),
        }
        dims = {
            "risk": ["component"],
            "measure": ["output"],
            "stratum_effect": ["stratum"],
            "unlabeled_positives": ["prediction"],
            "labeled_counts": ["prediction", "class"],
        }
        coords = {
            "component": list(m.components),
            "output": list(m.outputs),
            "prediction": keys,
            "class": [str(c) for c in pool.classes],
        }
        observed = {"labeled_counts": info["labeled"]}
        attrs["measure"] = m.name
        attrs["bin_width"] = float(bin_width)
    if fitted.oracle.H:
        coords["stratum"] = list(range(fitted.oracle.H))
    dt = azb.from_dict(
        {"posterior": post, "observed_data": observed},
        dims=dims,
        coords=coords,
        attrs={"posterior": attrs},
    )
    dt.attrs.update(attrs)
    return dt
