"""The item-level, finite-population posterior of a measure (``method="calibration"``).

The :class:`~bayes_activeeval.oracles.calibration.CalibrationOracle` label model
``logit P(y = 1 | x) = c + b (s(x) − s̄) + σ z_{h(x)}`` is fitted to the distinct labeled items
without weights — the adaptive selection depends only on the scores and earlier labels, so it is
ignorable given ``s`` (Rubin, 1976) — and the unlabeled items' labels are drawn from its
posterior predictive (binomial counts in narrow bins of ``s``); every draw of the pool's labels is
pushed through the measure (Marchant & Rubinstein (2021), Def. 1). The default of
``ActiveEvaluator.posterior()`` for a binary pool under a deterministic oracle; see
``docs/adaptive.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import check_count, check_rng
from ..measures import Measure
from .common import apply_g, check_labeled, key_names, prediction_key, unlabeled_loss_sums

__all__ = ["CalibrationOptions", "calibration_posterior"]


@dataclass(frozen=True)
class CalibrationOptions:
    """Options of the calibration posterior.

    Attributes
    ----------
    fit : {"laplace", "nuts"}
        Parameter draws of the label model from the importance-corrected Laplace posterior
        (σ at its mode; default) or from NUTS.
    bin_width : float
        Width of the log-odds grid on which the unlabeled items are binned (default 0.1: the
        bin's expected count is off by a relative ``≈ b² δ²/24``).
    calibration_options : dict
        Options of :class:`~bayes_activeeval.oracles.calibration.CalibrationOracle`
        (``n_strata``, prior scales, ``feature``, ``clip``, …).
    """

    fit: str = "laplace"
    bin_width: float = 0.1
    calibration_options: dict[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.fit not in ("laplace", "nuts"):
            raise ValueError(f"fit must be 'laplace' or 'nuts', got {self.fit!r}")
        bw = float(self.bin_width)
        if not np.isfinite(bw) or bw <= 0:
            raise ValueError(f"bin_width must be positive, got {self.bin_width!r}")


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
    ``options``.

    Returns
    -------
    xarray.DataTree
        ``risk``, ``measure``, ``a``, ``b``, ``stratum_effect`` and ``unlabeled_positives``
        (prediction) in ``posterior``; the labeled counts per prediction × class in
        ``observed_data``.
    """
    opts = CalibrationOptions() if options is None else options
    draws = check_count(draws, "draws")
    chains = check_count(chains, "chains")
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


def _calibration_posterior(
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
    """Item-level finite-population posterior (``method="calibration"``; see
    :func:`calibration_posterior`).

    1. Label model: the hierarchical Bayesian calibration of :class:`CalibrationOracle`
       (``logit P(y = 1 | x) = c + b (s(x) − s̄) + σ z_{h(x)}``, ``s`` the logit of the model's
       probability) fitted to the distinct labeled items, unweighted (the selection depends only
       on ``s`` and earlier labels, hence is ignorable given ``s``; Rubin 1976). Parameter draws
       from its importance-corrected Laplace posterior (``fit="laplace"``) or NUTS
       (``fit="nuts"``).
    2. Posterior predictive of the unlabeled items' labels. They are grouped by calibration
       stratum, prediction and a grid of ``s`` of width ``bin_width``; per draw ``t``, a bin's
       positives are ``n_t ∼ Binomial(N^U_bin, expit(η_t(s̄^U_bin)))``.
    3. ``R_t = Σ_{labeled} p ℓ(x, y) + Σ_bins [L^U_{bin,0} + (n_t / N^U_bin)(L^U_{bin,1} −
       L^U_{bin,0})]`` (``L^U_{bin,c}`` the ``p``-weighted loss sum of the bin's unlabeled items
       if their label were ``c``) and ``G_t = g(R_t)``.
    """
    from scipy import special

    from ..oracles.calibration import CalibrationOracle, log_odds

    if not deterministic:
        raise ValueError(
            "method='calibration' needs a deterministic oracle (deterministic=True); for a "
            "stochastic oracle use method='conjugate' with weighting='design'"
        )
    bw = float(bin_width)
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    if pool.task != "binary" or pool.pos is None:
        raise ValueError(
            "method='calibration' needs a binary pool with a positive class "
            f"(got task={pool.task!r}); use method='conjugate' or 'pymc'"
        )
    M, C, pos = pool.n_items, 2, int(pool.pos)
    idx, y = check_labeled(pool, indices, labels, encoded)
    if y.shape != idx.shape:
        raise ValueError(
            f"indices and labels must have the same length, got {idx.size} and {y.size}"
        )
    if y.size and (y.min() < 0 or y.max() >= C):
        raise ValueError("labels must be class indices 0..1 when encoded=True")
    ui, first = np.unique(idx, return_index=True)
    if ui.size == 0:
        raise ValueError("method='calibration' needs at least one labeled item")
    yu = y[first]
    opts = dict(calibration_options or {})
    S = chains * draws
    opts.setdefault("n_samples", max(512, 2 * S))
    oracle = CalibrationOracle(deterministic=True, model=models[0], **opts)
    oracle.initialize(pool, models[0])
    if oracle.used_feature == "logit" and "clip" not in opts:
        # the oracle clips probabilities at 1e-6 before the logit; rare-positive pools have most
        # of their items below that, and a label model that sees them all at logit(1e-6)
        # predicts phantom positives in the bulk: use the log-odds at full precision here
        x = log_odds(pool.view(models[0]).prob, pos)
        oracle.initialize_feature(x, oracle.prior_belief, pos, feature="logit")
    oracle.update(ui, yu)
    known = np.zeros(M, dtype=bool)
    known[ui] = True
    y_known = np.zeros(M, dtype=np.int64)
    y_known[ui] = yu
    key = prediction_key(pool, models)  # for grouping
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
    # parameter draws of the label model
    extra: dict[str, np.ndarray] = {}
    if fit == "laplace":
        thetas, w = oracle.posterior_samples()
        pick = rng.choice(thetas.shape[0], size=S, p=w)
        th = thetas[pick]
        cc, b = th[:, 0], np.exp(th[:, 1])
        u_h = np.exp(th[:, 2])[:, None] * th[:, 3:] if oracle.H else np.zeros((S, 1))
    else:
        idata = oracle.posterior(draws, rng=rng, tune=tune, chains=chains)
        post = idata["posterior"]
        cc = np.asarray(post["c"]).reshape(-1)
        b = np.asarray(post["b"]).reshape(-1)
        u_h = (
            np.asarray(post["stratum_effect"]).reshape(S, oracle.H)
            if oracle.H
            else np.zeros((S, 1))
        )
    extra["a"] = (cc - b * oracle.x_center).reshape(chains, draws)
    extra["b"] = b.reshape(chains, draws)
    if oracle.H:
        extra["stratum_effect"] = u_h.reshape(chains, draws, oracle.H)
    R = np.empty((S, d))
    n_pos = np.zeros((S, int(bin_key.max()) + 1 if nb else 1))
    block = max(1, (1 << 22) // max(nb, 1))
    for s0 in range(0, S, block):
        sb = slice(s0, min(s0 + block, S))
        eta = cc[sb, None] + b[sb, None] * (xbar[None, :] - oracle.x_center) + u_h[sb][:, bin_h]
        n1 = rng.binomial(N[None, :], special.expit(eta))
        R[sb] = base + (n1 / np.maximum(N, 1)[None, :]) @ D
        for k in np.unique(bin_key):
            n_pos[sb, k] = n1[:, bin_key == k].sum(axis=1)
    G = apply_g(m, R)
    info = {
        "oracle": oracle,
        "models": models,
        "n_pos": n_pos,
        "keys": np.arange(n_pos.shape[1]),
        "labeled": np.array(
            [[np.sum((key[ui] == k) & (yu == c)) for c in range(C)] for k in range(n_pos.shape[1])]
        ),
    }
    return R.reshape(chains, draws, d), G.reshape(chains, draws, m.n_outputs), extra, m, info


def _calibration_tree(pool, measure, indices, labels, **kw):
    """Wrap :func:`_calibration_posterior` as an ``xarray.DataTree``."""
    import arviz_base as azb

    R, G, extra, m, info = _calibration_posterior(pool, measure, indices, labels, **kw)
    oracle = info["oracle"]
    keys = key_names(pool, info["keys"], info["models"])
    post = {"risk": R, "measure": G, **extra}
    chains, draws = R.shape[:2]
    post["unlabeled_positives"] = info["n_pos"].reshape(chains, draws, -1)
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
    if oracle.H:
        coords["stratum"] = list(range(oracle.H))
    attrs = {
        "method": "calibration",
        "measure": m.name,
        "weighting": "none",
        "fit": kw["fit"],
        "bin_width": float(kw["bin_width"]),
        "finite_population": 1,
        "deterministic": 1,
    }
    dt = azb.from_dict(
        {"posterior": post, "observed_data": {"labeled_counts": info["labeled"]}},
        dims=dims,
        coords=coords,
        attrs={"posterior": attrs},
    )
    dt.attrs.update(attrs)
    return dt
