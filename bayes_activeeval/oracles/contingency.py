"""The contingency-table model: the posterior of any measure on the pool.

Cells are ``stratum × prediction × true class``: ``h`` a score stratum (cumulative-sqrt-F rule),
``k`` the prediction of the evaluated model (the joint predictions for a measure bound to several
models), ``c`` the true class. Each cell row has a label distribution ``θ_{hk} = P(y | h, k)``.

The pool-level risk is obtained by post-stratification::

    R = Σ_{labeled x} p(x) ℓ(x, y(x))  +  Σ_{h,k,c} P^U_{hk} θ_{hkc} L̄^U_{hkc}

with ``P^U_{hk}`` the ``p``-mass of the *unlabeled* items of cell ``(h, k)`` and ``L̄^U_{hkc}``
their mean loss if their label were ``c`` (under a stochastic oracle no label is exact and the
first sum is dropped, ``P^U = P``). For losses that depend on ``x`` only through the predictions
(accuracy, precision, recall, F_β, MCC, …) this is the posterior confusion matrix on the pool,
``Σ_h N_{h,k} P(y = c | h, k)`` plus the known labels, pushed through the measure; for any other
loss it is the cell-wise plug-in. Every draw of ``θ`` gives ``R`` and ``G = g(R)``.

How importance-weighted labels enter the likelihood. Adaptive sampling selects items with a
probability ``q(x)`` that varies *within* a cell (it depends on the score and on earlier labels).
Selection that depends only on observed quantities is ignorable for a model that conditions on
them (Rubin, 1976), but ``θ_{hk}`` pools items of different scores, so raw counts would
over-represent the high-``q`` items of the cell. The labeled draws therefore enter as
design-weighted pseudo-counts (a weighted pseudo-likelihood, as Marchant & Rubinstein (2021),
App. H): in each cell the Hájek estimate ``p̂_{hkc} = Σ w 1[y = c] / Σ w`` (``w = p/q``, repeats
included) is consistent for the cell's label distribution, and it is given the Kish effective
sample size ``n_eff = (Σ w)² / Σ w²`` (capped by the number of distinct labeled items), so the
pseudo-counts are ``ñ_{hkc} = n_eff p̂_{hkc}``. With ``q`` constant in a cell this is exactly the
multinomial likelihood of the cell's labels.

Two ways to get the posterior of ``θ``:

- ``method="conjugate"``: independent Dirichlet rows ``θ_{hk} ∼ Dir(s0 π̄_{hk} + ñ_{hk})``,
  ``π̄`` the mean plug-in belief of the cell, sampled exactly with NumPy;
- ``method="pymc"``: a hierarchical model that shares strength across sparse cells,
  ``θ_{hk} = softmax(a_k + b log π̄_{hk} + σ z_{hk})`` with ``z ∼ N(0, 1)`` (a Bayesian
  recalibration of the model's probabilities with cell effects), fitted by NUTS to the same
  pseudo-counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_count, check_rng
from ..beliefs import pool_belief
from ..measures import Measure
from ..proposals import CHUNK
from ..strata import score_strata

__all__ = ["contingency_posterior", "contingency_table"]


def _cell_scores(pool, models: tuple[str, ...]) -> np.ndarray:
    if pool.has_probs():
        probs = pool_belief(pool, models).probs
        if pool.n_classes == 2 and pool.pos is not None:
            p1 = np.clip(probs[:, pool.pos], 1e-12, 1 - 1e-12)
            return np.log(p1) - np.log1p(-p1)
        return probs.max(axis=1)
    if pool.scores is not None:
        return np.mean([pool.scores[m] for m in models], axis=0)
    return np.zeros(pool.n_items)


def _within_cell_bins(cell: np.ndarray, score: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-count score bins ``0..n_bins-1`` inside every cell (vectorised)."""
    if n_bins == 1:
        return np.zeros(cell.size, dtype=np.int64)
    order = np.lexsort((score, cell))
    sizes = np.bincount(cell)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(cell.size, dtype=np.int64)
    rank[order] = np.arange(cell.size) - starts[cell[order]]
    return np.minimum(rank * n_bins // sizes[cell], n_bins - 1)


def contingency_table(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    weights: Any,
    *,
    model: str | None = None,
    n_strata: int = 10,
    strata: Any = None,
    n_bins: int = 1,
    deterministic: bool = True,
    weighting: str = "design",
    encoded: bool = False,
) -> dict[str, Any]:
    """The cells, their pool masses, mean losses, covariates and labeled (pseudo-)counts.

    A cell is ``stratum × prediction × score bin`` (``n_bins`` equal-count bins of the score inside
    every stratum-prediction *group*). Parameters are those of :func:`contingency_posterior`.
    Returns a dict of NumPy arrays used by both posterior methods.
    """
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    if pool.task == "regression":
        raise ValueError("the contingency-table model needs a classification pool")
    if weighting not in ("design", "none"):
        raise ValueError(f"weighting must be 'design' or 'none', got {weighting!r}")
    n_bins = check_count(n_bins, "n_bins")
    M, C = pool.n_items, pool.n_classes
    idx = np.asarray(indices)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise ValueError(f"indices must be a 1-D array of item indices, got shape {idx.shape}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= M):
        raise ValueError(f"indices has entries outside 0..{M - 1}")
    y = np.asarray(labels, dtype=np.int64) if encoded else pool.encode_labels(labels)
    y = y.astype(np.int64)
    w = np.asarray(weights, dtype=float)
    if y.shape != idx.shape or w.shape != idx.shape:
        raise ValueError(
            f"indices, labels and weights must have the same length, got {idx.size}, "
            f"{y.size} and {w.size}"
        )
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be positive and finite")
    # prediction key: joint predicted class of the measure's models
    key = np.zeros(M, dtype=np.int64)
    for j, name in enumerate(models):
        key += pool.view(name).pred.astype(np.int64) * C**j
    score = _cell_scores(pool, models)
    if strata is None:
        h, _ = score_strata(score, check_count(n_strata, "n_strata"))
    else:
        h = np.asarray(strata)
        if h.shape != (M,):
            raise ValueError(f"strata has shape {h.shape}; expected ({M},)")
        _, h = np.unique(h, return_inverse=True)
    used_keys, key = np.unique(key, return_inverse=True)
    K = used_keys.size
    groups, group = np.unique(h * K + key, return_inverse=True)
    b = _within_cell_bins(group, score, n_bins)
    cells, cell = np.unique(group * n_bins + b, return_inverse=True)
    n_cells = cells.size
    cell_group = cells // n_bins
    cell_bin = cells % n_bins

    p = pool.p
    finite = bool(deterministic and weighting == "none")
    known = np.zeros(M, dtype=bool)
    y_known = np.zeros(M, dtype=np.int64)
    if finite and idx.size:
        known[idx] = True
        y_known[idx] = y
    pu_all = p * ~known
    P_unl = np.bincount(cell, weights=pu_all, minlength=n_cells)
    P_all = np.bincount(cell, weights=p, minlength=n_cells)
    d = m.dim
    Lsum = np.zeros((n_cells, C, d))
    R_known = np.zeros(d)
    belief = pool_belief(pool, models).probs if pool.has_probs() else None
    prior = np.zeros((n_cells, C))
    logp = np.zeros((n_cells, C))
    for start in range(0, M, CHUNK):
        sl = slice(start, min(start + CHUNK, M))
        v = views(sl)
        cs, pu = cell[sl], pu_all[sl]
        for c in range(C):
            L = m.loss(np.full(sl.stop - sl.start, c, dtype=np.int32), v)
            for j in range(d):
                Lsum[:, c, j] += np.bincount(cs, weights=pu * L[:, j], minlength=n_cells)
            kn = known[sl] & (y_known[sl] == c)
            if kn.any():
                R_known += p[sl][kn] @ L[kn]
            if belief is not None:
                bc = belief[sl, c]
                prior[:, c] += np.bincount(cs, weights=p[sl] * bc, minlength=n_cells)
                lb = np.log(np.clip(bc, 1e-12, 1.0))
                logp[:, c] += np.bincount(cs, weights=p[sl] * lb, minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        Lbar = np.where(P_unl[:, None, None] > 0, Lsum / P_unl[:, None, None], 0.0)
        prior = np.where(P_all[:, None] > 0, prior / P_all[:, None], 1.0 / C)
        logp = np.where(P_all[:, None] > 0, logp / P_all[:, None], 0.0)
    if belief is None:
        prior[:] = 1.0 / C
    # labeled counts: distinct items (deterministic) or draws (stochastic)
    raw = np.zeros((n_cells, C))
    pseudo = np.zeros((n_cells, C))
    if idx.size:
        dc = cell[idx]
        if deterministic:
            ui, first = np.unique(idx, return_index=True)
            np.add.at(raw, (cell[ui], y[first]), 1.0)
        else:
            np.add.at(raw, (dc, y), 1.0)
        if weighting == "none":
            pseudo = raw.copy()
        else:
            sw = np.bincount(dc, weights=w, minlength=n_cells)
            sw2 = np.bincount(dc, weights=w * w, minlength=n_cells)
            wy = np.zeros((n_cells, C))
            np.add.at(wy, (dc, y), w)
            with np.errstate(invalid="ignore", divide="ignore"):
                phat = np.where(sw[:, None] > 0, wy / sw[:, None], 0.0)
                neff = np.where(sw2 > 0, sw**2 / sw2, 0.0)
            neff = np.minimum(neff, raw.sum(axis=1))
            pseudo = neff[:, None] * phat
    return {
        "measure": m,
        "models": models,
        "cell_group": cell_group,
        "cell_bin": cell_bin,
        "group_stratum": groups // K,
        "group_key": used_keys[groups % K],
        "P_unl": P_unl,
        "P_all": P_all,
        "Lbar": Lbar,
        "R_known": R_known,
        "prior": prior,
        "logp": logp,
        "raw": raw,
        "pseudo": pseudo,
        "finite_population": finite,
        "classes": pool.classes,
        "n_classes": C,
        "deterministic": deterministic,
    }


def _key_names(pool, keys: np.ndarray, models: tuple[str, ...]) -> list[str]:
    C = pool.n_classes
    out = []
    for k in keys.tolist():
        parts = []
        for j in range(len(models)):
            parts.append(str(pool.classes[(k // C**j) % C]))
        out.append(parts[0] if len(models) == 1 else ",".join(parts))
    return out


def _derived(table: dict[str, Any], theta: np.ndarray) -> dict[str, np.ndarray]:
    """Risk, measure and confusion matrix for posterior draws ``theta (..., cell, class)``."""
    m: Measure = table["measure"]
    R = table["R_known"] + np.einsum("h,...hc,hcj->...j", table["P_unl"], theta, table["Lbar"])
    flat = R.reshape(-1, R.shape[-1])
    with np.errstate(all="ignore"):
        G = np.stack([m.g(r) for r in flat]).reshape((*R.shape[:-1], m.n_outputs))
    return {"risk": R, "measure": G}


def contingency_posterior(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    weights: Any = None,
    *,
    model: str | None = None,
    method: str = "conjugate",
    n_strata: int = 10,
    strata: Any = None,
    n_bins: int | None = None,
    prior_strength: float = 2.0,
    deterministic: bool = True,
    weighting: str | None = None,
    draws: int = 1000,
    chains: int = 2,
    tune: int = 1000,
    encoded: bool = False,
    rng: Any = None,
):
    """Posterior of a measure on the pool from the stratum × prediction × class table.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        Any classification measure (also one bound to several models).
    indices, labels, weights : array-like (n,)
        The labeled draws (repeats included), their labels and importance weights ``p/q``
        (default all ones: a passive sample).
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    method : {"conjugate", "pymc"}
        Independent conjugate Dirichlet rows (exact, NumPy) or the hierarchical PyMC model.
    n_strata : int
        Score strata (cumulative-sqrt-F rule on the plug-in log-odds); ignored with ``strata``.
    strata : array-like (n_items,), optional
        Your own stratum per item.
    n_bins : int, optional
        Equal-count score bins inside each stratum-prediction group (default 1 for
        ``"conjugate"``, 8 for ``"pymc"``, whose cells share a calibration slope).
    prior_strength : float
        ``s0`` of the conjugate prior ``Dir(s0 π̄)``, ``π̄`` the model's mean probability in the cell.
    deterministic : bool
        Deterministic oracle: labeled items are counted once (and, with ``weighting="none"``,
        enter the pool risk exactly).
    weighting : {"design", "none"}, optional
        ``"design"``: design-weighted pseudo-counts and post-stratification over all items
        (default for ``"conjugate"``); ``"none"``: unweighted counts of the distinct labeled items,
        the labeled items' losses exactly and the model's prediction for the unlabeled ones
        (default for ``"pymc"``; sound when the selection is ignorable given the cell, see the
        module notes).
    draws, chains : int
        Posterior draws per chain and chains.
    tune : int
        NUTS tuning steps (``method="pymc"``).
    encoded : bool
        Labels are already encoded as class indices.
    rng : None, int or Generator

    Returns
    -------
    xarray.DataTree
        ``posterior``: ``theta`` (cell, class), ``risk`` (component), ``measure`` (output) and,
        for ``"pymc"``, the hierarchical parameters; ``observed_data``: the (pseudo-)counts;
        ``constant_data``: cell masses, strata, predictions, prior means and raw counts.
        ``arviz.summary`` works.
    """
    import arviz_base as azb

    if method not in ("conjugate", "pymc"):
        raise ValueError(f"method must be 'conjugate' or 'pymc', got {method!r}")
    s0 = float(prior_strength)
    if not np.isfinite(s0) or s0 <= 0:
        raise ValueError(f"prior_strength must be positive, got {prior_strength!r}")
    draws = check_count(draws, "draws")
    chains = check_count(chains, "chains")
    rng = check_rng(rng)
    if weighting is None:
        weighting = "design" if method == "conjugate" else "none"
    if n_bins is None:
        n_bins = 1 if method == "conjugate" else 8
    if weights is None:
        weights = np.ones(np.shape(indices)[0] if np.ndim(indices) else 0)
    table = contingency_table(
        pool,
        measure,
        indices,
        labels,
        weights,
        model=model,
        n_strata=n_strata,
        strata=strata,
        n_bins=n_bins,
        deterministic=deterministic,
        weighting=weighting,
        encoded=encoded,
    )
    m: Measure = table["measure"]
    n_cells, C = table["prior"].shape
    group_names_key = _key_names(pool, table["group_key"], table["models"])
    group_names = [
        f"{h}|{k}" for h, k in zip(table["group_stratum"].tolist(), group_names_key, strict=True)
    ]
    cg = table["cell_group"]
    cell_names = [
        f"{group_names[g]}|{b}"
        for g, b in zip(cg.tolist(), table["cell_bin"].tolist(), strict=True)
    ]
    coords = {
        "cell": cell_names,
        "group": group_names,
        "class": [str(c) for c in pool.classes],
        "component": list(m.components),
        "output": list(m.outputs),
        "prediction": list(dict.fromkeys(group_names_key)),
    }
    prior_mean = np.clip(table["prior"], 1e-6, None)
    prior_mean = prior_mean / prior_mean.sum(axis=1, keepdims=True)
    if method == "conjugate":
        alpha = s0 * prior_mean + table["pseudo"]
        g = rng.standard_gamma(np.broadcast_to(alpha, (chains, draws, n_cells, C)))
        tot = g.sum(axis=-1, keepdims=True)
        theta = np.where(tot > 0, g / np.where(tot > 0, tot, 1.0), prior_mean)
        extra: dict[str, np.ndarray] = {}
    else:
        theta, extra = _fit_pymc(table, coords, draws, chains, tune, rng)
    der = _derived(table, theta)
    post = {"theta": theta, "risk": der["risk"], "measure": der["measure"], **extra}
    dims = {
        "theta": ["cell", "class"],
        "risk": ["component"],
        "measure": ["output"],
        "counts": ["cell", "class"],
        "raw_counts": ["cell", "class"],
        "prior_mean": ["cell", "class"],
        "cell_mass": ["cell"],
        "cell_stratum": ["cell"],
        "cell_prediction": ["cell"],
        "cell_bin": ["cell"],
        "a": ["prediction", "class"],
        "u": ["group", "class"],
    }
    attrs = {
        "method": method,
        "measure": m.name,
        "weighting": weighting,
        "n_bins": int(n_bins),
        "finite_population": int(table["finite_population"]),
        "deterministic": int(deterministic),
    }
    if method == "conjugate":
        coords.pop("group")
        coords.pop("prediction")
    dt = azb.from_dict(
        {
            "posterior": post,
            "observed_data": {"counts": table["pseudo"]},
            "constant_data": {
                "raw_counts": table["raw"],
                "prior_mean": prior_mean,
                "cell_mass": table["P_unl"],
                "cell_stratum": table["group_stratum"][cg],
                "cell_prediction": np.asarray(group_names_key)[cg],
                "cell_bin": table["cell_bin"],
            },
        },
        dims=dims,
        coords=coords,
        attrs={"posterior": attrs},
    )
    dt.attrs.update(attrs)
    return dt


def _fit_pymc(table, coords, draws, chains, tune, rng):
    """Hierarchical recalibration model, NUTS (see the module notes)::

        θ_cell = softmax(a_k + b · z_cell + σ u_group),   u ∼ N(0, 1),
        a ∼ N(0, 2), b ∼ LogNormal(0, 1), σ ∼ HalfNormal(1),

    with ``z_cell`` the cell's mean log-probability under the model (centred per row) and the
    (pseudo-)counts as a multinomial (pseudo-)likelihood.
    """
    import pymc as pm
    import pytensor.tensor as pt

    cg = table["cell_group"]
    gk = table["group_key"]
    pred_levels = list(dict.fromkeys(gk.tolist()))
    kidx = np.array([pred_levels.index(k) for k in gk[cg].tolist()])
    z = table["logp"] - table["logp"].mean(axis=1, keepdims=True)
    counts = table["pseudo"]
    model_coords = {
        "cell": coords["cell"],
        "group": coords["group"],
        "class": coords["class"],
        "prediction": coords["prediction"],
    }
    with pm.Model(coords=model_coords):
        a = pm.Normal("a", 0.0, 2.0, dims=("prediction", "class"))
        b = pm.LogNormal("b", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        u = pm.Normal("u", 0.0, 1.0, dims=("group", "class"))
        eta = a[kidx] + b * z + sigma * u[cg]
        logtheta = eta - pt.logsumexp(eta, axis=1, keepdims=True)
        pm.Potential("loglik", pt.sum(counts * logtheta))
        pm.Deterministic("theta_", pt.exp(logtheta), dims=("cell", "class"))
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            random_seed=int(rng.integers(2**31 - 1)),
            progressbar=False,
            compute_convergence_checks=False,
        )
    post = idata["posterior"]
    theta = post["theta_"].transpose("chain", "draw", "cell", "class").to_numpy()
    extra = {
        "a": post["a"].transpose("chain", "draw", "prediction", "class").to_numpy(),
        "b": post["b"].to_numpy(),
        "sigma": post["sigma"].to_numpy(),
        "u": post["u"].transpose("chain", "draw", "group", "class").to_numpy(),
    }
    return theta, extra
