"""Bayesian contingency-table posteriors of the benchmark measures."""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from scipy import special

from .._validation import check_count
from .cells import MEASURES, measures_and_grad
from .design import stratum_guess


def _prior_ab(prior, strength, dsg):
    """Prior pseudo-counts ``(a0, b0)`` (H,) of label 1 and label 0 per stratum.

    ``"guess"``: ``strength x (sbar_h, 1 - sbar_h)`` (the stratum's mean guess); ``"jeffreys"``
    ``(1/2, 1/2)``; ``"uniform"`` ``(1, 1)``; a pair ``(a0, b0)`` the same in every stratum. In
    the Beta model (pool margins known) every cell's positive rate is ``Beta(a0, b0)`` a priori
    (Valizadegan et al., Eqs. 3.1-3.3 are the targets); in the Dirichlet model (labels only) the
    four cells ``(r0y0, r0y1, r1y0, r1y1)`` get ``(b0, a0, b0, a0)``, so the positive rate
    given either rule output is again ``Beta(a0, b0)``.
    """
    H = dsg.n_strata
    if isinstance(prior, str):
        if prior == "guess":
            sg = np.clip(stratum_guess(dsg), 1e-6, 1 - 1e-6)
            try:
                st = float(strength)
            except (TypeError, ValueError):
                st = np.nan
            if not (np.isfinite(st) and st > 0):
                raise ValueError(f"prior_strength must be a number > 0, got {strength!r}")
            return st * sg, st * (1 - sg)
        if prior == "jeffreys":
            return np.full(H, 0.5), np.full(H, 0.5)
        if prior == "uniform":
            return np.ones(H), np.ones(H)
        raise ValueError(f"prior must be 'guess', 'jeffreys', 'uniform' or (a0, b0), got {prior!r}")
    try:
        a0, b0 = (float(x) for x in prior)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"prior must be a name or a pair (a0, b0), got {prior!r}") from exc
    if not (np.isfinite(a0) and np.isfinite(b0) and a0 > 0 and b0 > 0):
        raise ValueError(f"prior (a0, b0) must be positive and finite, got {prior!r}")
    return np.full(H, a0), np.full(H, b0)


def _likelihood_counts(cnt, W, W2, dsg):
    """``(k, n)`` per cell (K, H, r): raw counts, or Kish pseudo-counts under Poisson sampling."""
    if dsg.scheme == "stratified":
        return cnt[..., 1], cnt.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        Wc, W2c = W.sum(-1), W2.sum(-1)
        n = np.where(W2c > 0, Wc**2 / W2c, 0.0)
        k = np.where(Wc > 0, n * W[..., 1] / Wc, 0.0)
    return k, n


def _finish_tree(arrays: dict, names, attrs, tree=None):
    import arviz_base

    if tree is None:
        tree = arviz_base.from_dict(
            {"posterior": arrays},
            dims={k: ["rule"] for k in arrays},
            coords={"rule": names},
        )
        tree.attrs.update(attrs)
        return tree
    ds = tree["posterior"].to_dataset()
    ds = ds.assign({k: (("chain", "draw", "rule"), v) for k, v in arrays.items()})
    tree["posterior"] = xr.DataTree(ds)
    tree.attrs.update(attrs)
    return tree


def _cells_to_measures(theta, cnt, margins, finite, rng):
    """Measures (…, K, M) from cell rates (…, K, H, r), post-stratified to the pool."""
    if finite:
        n_lab = cnt.sum(-1)  # (K, H, r)
        k_lab = cnt[..., 1]
        rest = np.maximum(margins - n_lab, 0).astype(np.int64)
        pos = k_lab + rng.binomial(np.broadcast_to(rest, theta.shape), theta)
    else:
        pos = margins * theta
    TP = pos[..., 1].sum(-1)
    FN = pos[..., 0].sum(-1)
    FP = margins[..., 1].sum(-1) - TP
    TN = margins[..., 0].sum(-1) - FN
    vals, _ = measures_and_grad(TP, FP, FN, TN)
    return vals


def cell_posterior(
    cnt,
    W,
    W2,
    margins,
    dsg,
    names,
    *,
    method,
    prior,
    prior_strength,
    finite_population,
    draws,
    chains,
    tune,
    hierarchical,
    rng,
):
    """Posterior draws of the five measures per rule (the Bayesian side of :func:`evaluate`).

    With the rules' pool margins ``N_hr`` (``margins`` (K, H, 2)), every stratum x rule-output
    cell has a positive rate ``theta_hr ~ Beta(a_h + k_hr, b_h + n_hr - k_hr)`` and the measures
    follow from the post-stratified totals (the finite-pool targets of Valizadegan et al.,
    Eqs. 3.1-3.3); these intervals are calibrated (95% coverage about 0.90-0.98 in
    ``benchmarks/results/unknown_predictors.md``).

    Without margins (``margins=None``: the rules known on the labeled items only) the
    conjugate model is a Dirichlet over the four cells ``(TP, FP, FN, TN)`` of each stratum,
    weighted by ``N_h``. It treats the rule's share of each stratum as unknown too, but its
    credible intervals **under-cover** — markedly so for random rules, whose posterior is
    narrower than the spread of its mean over repeated samples — so a ``UserWarning`` says to
    pass ``pool_margins`` (or the predictions on the whole pool) for calibrated intervals; the
    frequentist intervals of :func:`evaluate` are not affected.

    Parameters
    ----------
    cnt, W, W2 : ndarray (K, H, 2, 2)
        Labeled counts, weight sums and squared-weight sums per rule, stratum, output, label.
    margins : ndarray (K, H, 2) or None
        Pool counts of each rule output per stratum.
    dsg : BenchmarkDesign
    names : list of str
        Rule names.
    method : {"conjugate", "pymc"}
    prior, prior_strength, finite_population, draws, tune, hierarchical, rng
        As for :func:`evaluate`.
    chains : int or None
        Chains (default 1 for the conjugate model, 2 for PyMC); at least 1.

    Returns
    -------
    xarray.DataTree
        Group ``posterior`` with one variable per measure, dims ``chain, draw, rule``.
    """
    if chains is not None:
        chains = check_count(chains, "chains")
    Kr, H = cnt.shape[0], cnt.shape[1]
    a0, b0 = _prior_ab(prior, prior_strength, dsg)
    k, n = _likelihood_counts(cnt, W, W2, dsg)
    attrs = {
        "method": method,
        "prior": str(prior),
        "finite_population": int(bool(finite_population and margins is not None)),
        "model": "",
    }
    if method == "pymc":
        if margins is None:
            raise ValueError(
                "posterior='pymc' needs the rules' outputs on the whole pool (or pool_margins)"
            )
        return _posterior_pymc(
            k, n, cnt, margins, dsg, names, a0, b0, attrs,
            draws=draws, chains=chains or 2, tune=tune, hierarchical=hierarchical,
            finite=finite_population, rng=rng,
        )  # fmt: skip
    n_chain = chains or 1
    S = n_chain * draws
    out = np.empty((S, Kr, len(MEASURES)))
    if margins is not None:
        attrs["model"] = "Beta-binomial per stratum x rule-output cell"
        block = max(1, int(4_000_000 // max(S * H * 2, 1)))
        for lo in range(0, Kr, block):
            sl = slice(lo, lo + block)
            a = a0[None, :, None] + k[sl]
            b = b0[None, :, None] + n[sl] - k[sl]
            theta = rng.beta(a, b, size=(S, *a.shape))
            out[:, sl] = _cells_to_measures(theta, cnt[sl], margins[sl], finite_population, rng)
    else:
        attrs["model"] = "Dirichlet over (TP, FP, FN, TN) per stratum"
        warnings.warn(
            "the Bayesian posterior without pool margins (rules known on the labeled items "
            "only) under-covers: its credible intervals are too narrow, notably for rules "
            "unrelated to the label. Pass pool_margins (or the rule predictions on the whole "
            "pool) for calibrated posterior intervals, or use the frequentist intervals of "
            "the table.",
            UserWarning,
            stacklevel=3,
        )
        sg = np.clip(stratum_guess(dsg), 1e-6, 1 - 1e-6) if prior == "guess" else None
        # the cells' (pseudo-)counts of label 0 and 1, the same as the Beta model's
        obs = np.stack([n - k, k], axis=-1).reshape(Kr, H, 4)  # (r0y0, r0y1, r1y0, r1y1)
        if sg is not None:
            rho = (obs[..., 2:].sum(-1) + 0.5) / (obs.sum(-1) + 1.0)  # rule-positive share (K, H)
            alpha0 = prior_strength * np.stack(
                [(1 - rho) * (1 - sg), (1 - rho) * sg, rho * (1 - sg), rho * sg], axis=-1
            )
        else:
            # (a0, b0) are pseudo-counts of label 1 and label 0: alpha = (b0, a0, b0, a0) over
            # (r0y0, r0y1, r1y0, r1y1), so that the positive rate given either rule output is
            # Beta(a0, b0) a priori (Dirichlet aggregation), as in the pool-margin Beta model
            alpha0 = np.broadcast_to(np.stack([b0, a0, b0, a0], axis=-1)[None], obs.shape).astype(
                float
            )
        sizes = dsg.stratum_sizes.astype(float)
        block = max(1, int(4_000_000 // max(S * H * 4, 1)))
        for lo in range(0, Kr, block):
            sl = slice(lo, lo + block)
            g = rng.gamma(alpha0[sl] + obs[sl], size=(S, *obs[sl].shape))
            phi = g / g.sum(-1, keepdims=True)
            tot = (phi * sizes[None, None, :, None]).sum(-2)  # (S, k, 4)
            vals, _ = measures_and_grad(tot[..., 3], tot[..., 2], tot[..., 1], tot[..., 0])
            out[:, sl] = vals
    arrays = {
        mm: out[..., j].reshape(n_chain, draws, Kr).astype(np.float64)
        for j, mm in enumerate(MEASURES)
    }
    return _finish_tree(arrays, names, attrs)


def _posterior_pymc(
    k, n, cnt, margins, dsg, names, a0, b0, attrs, *, draws, chains, tune, hierarchical, finite, rng
):
    import pymc as pm
    import pytensor.tensor as pt

    Kr, H = k.shape[0], k.shape[1]
    coords = {"rule": names, "stratum": np.arange(H), "output": [0, 1]}
    seed = int(rng.integers(2**31 - 1))
    with pm.Model(coords=coords):
        if hierarchical:
            attrs["model"] = "hierarchical logit contingency model"
            sg = np.clip(stratum_guess(dsg), 1e-4, 1 - 1e-4)
            offset = special.logit(sg)
            b0_ = pm.Normal("b0", 0.0, 1.5, dims="rule")
            sigma_s = pm.HalfNormal("sigma_s", 1.0)
            sigma_d = pm.HalfNormal("sigma_d", 1.0)
            s_raw = pm.Normal("s_raw", 0.0, 1.0, dims=("rule", "stratum"))
            gamma = pm.Normal("gamma", 0.0, 2.5, dims="rule")
            d_raw = pm.Normal("d_raw", 0.0, 1.0, dims=("rule", "stratum"))
            eta_neg = offset[None, :] + b0_[:, None] + sigma_s * s_raw
            eta_pos = eta_neg + gamma[:, None] + sigma_d * d_raw
            eta = pt.stack([eta_neg, eta_pos], axis=-1)
            pm.Deterministic("theta", pm.math.sigmoid(eta), dims=("rule", "stratum", "output"))
            pm.Potential("likelihood", (-k * pt.log1pexp(-eta) - (n - k) * pt.log1pexp(eta)).sum())
        else:
            attrs["model"] = "Beta-binomial per cell in PyMC (cross-check of the conjugate model)"
            theta = pm.Beta(
                "theta",
                alpha=np.broadcast_to(a0[None, :, None], (Kr, H, 2)),
                beta=np.broadcast_to(b0[None, :, None], (Kr, H, 2)),
                dims=("rule", "stratum", "output"),
            )
            pm.Potential("likelihood", (k * pt.log(theta) + (n - k) * pt.log1p(-theta)).sum())
        tree = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            target_accept=0.95,
        )
    theta = tree["posterior"]["theta"].transpose("chain", "draw", "rule", "stratum", "output")
    vals = _cells_to_measures(np.asarray(theta.values), cnt, margins, finite, rng)
    arrays = {mm: vals[..., j] for j, mm in enumerate(MEASURES)}
    return _finish_tree(arrays, names, attrs, tree=tree)
