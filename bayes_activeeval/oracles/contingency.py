"""The posterior of any measure on the pool: item-level calibration and contingency-table models.

``method="calibration"`` (the default of ``ActiveEvaluator.posterior()`` for a binary pool under
a deterministic oracle) is a finite-population posterior at the *item* level: the
:class:`~bayes_activeeval.oracles.calibration.CalibrationOracle` label model
``logit P(y = 1 | x) = c + b (s(x) − s̄) + σ z_{h(x)}`` is fitted to the distinct labeled items
without weights — the adaptive selection depends only on the scores and earlier labels, so it is
ignorable given ``s`` (Rubin, 1976) — and the unlabeled items' labels are drawn from its
posterior predictive (binomial counts in narrow bins of ``s``); every draw of the pool's labels is
pushed through the measure. See :func:`contingency_posterior` and ``docs/adaptive.md``.

The cell models (``method="conjugate"`` / ``"pymc"``):

Cells are ``stratum × prediction × score bin``, each with a label distribution
``θ_cell = P(y | cell)`` over the true classes: the stratum ``h`` is a score stratum
(cumulative-sqrt-F rule), the prediction ``k`` that of the evaluated model (the joint predictions
for a measure bound to several models), and ``n_bins`` equal-count score bins split every
stratum-prediction group. The pool-level risk is obtained by post-stratification::

    R = Σ_{labeled x} p(x) ℓ(x, y(x))  +  Σ_{cells} P^U_cell Σ_c θ_{cell,c} L̄^U_{cell,c}

with ``P^U`` the ``p``-mass of the cell's *unlabeled* items and ``L̄^U_c`` their mean loss if their
label were ``c``. For losses that read only the predictions (accuracy, precision, recall, F_β,
MCC, …) this is the posterior confusion matrix on the pool (``Σ_h N_{h,k} P(y | h, k)`` plus the
known labels) pushed through the measure; for any other loss it is the cell-wise plug-in. Every
draw of ``θ`` gives ``R`` and ``G = g(R)``.

How the adaptively sampled labels enter the likelihood (``weighting=``):

- ``"none"`` (default for the PyMC model): the distinct labeled items enter as plain multinomial
  counts and their own losses exactly (finite-population inference); ``θ`` predicts only the
  unlabeled items, whose labels are drawn per posterior draw, ``n_cell ∼ Multinomial(N^U, θ)``. The
  sampler's choices depend only on observed quantities (scores, predictions, earlier labels), so
  the selection is ignorable (Rubin, 1976) for a model that conditions on what the selection
  depends on. Within a cell ``q`` still varies with the score, and the cells do not condition on
  it: the labeled items of a cell are its high-score ones, which biases the unlabeled rest upwards
  (``benchmarks/results/contingency_coverage.md``); ``method="calibration"`` conditions on the
  score item by item.
- ``"design"`` (default for the conjugate model): design-weighted pseudo-counts (a weighted
  pseudo-likelihood, as Marchant & Rubinstein (2021), App. H): the Hájek estimate
  ``Σ w 1[y = c] / Σ w`` (``w = p/q``, all draws) with the Kish effective size
  ``(Σ w)²/Σ w²`` (capped by the distinct labeled items), and post-stratification over all items
  (superpopulation rates: conservative when most of a cell is labeled). The conjugate cells do not
  condition on the score inside a cell, which is what makes the weights necessary. It needs
  ``q > 0`` on every item of a cell: a proposal that gives known true negatives zero mass (F1 under
  a deterministic oracle, once all of a cell's positives are found) biases its denominators.

Two ways to get the posterior of ``θ``:

- ``method="conjugate"``: independent Dirichlet rows ``θ_cell ∼ Dir(s0 π̄_cell + n_cell)``,
  ``π̄`` the model's mean probability in the cell, sampled exactly with NumPy;
- ``method="pymc"``: a hierarchical model sharing strength across sparse cells,
  ``θ_cell = softmax(a_k + b z_cell + σ u_{hk})`` with ``z_cell`` the cell's mean model
  log-probability and ``u ∼ N(0, 1)`` (a Bayesian recalibration of the model's probabilities with
  stratum effects), fitted by NUTS to the same counts.
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


def _check_labeled(pool, indices: Any, labels: Any, encoded: bool) -> tuple[np.ndarray, np.ndarray]:
    """The labeled items as int64 pool indices (checked) and their labels as encoded int64
    class indices (``encoded=True``: given so; else encoded by the pool)."""
    M = pool.n_items
    idx = np.asarray(indices)
    if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
        raise ValueError(f"indices must be a 1-D array of item indices, got shape {idx.shape}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= M):
        raise ValueError(f"indices has entries outside 0..{M - 1}")
    y = np.asarray(labels, dtype=np.int64) if encoded else pool.encode_labels(labels)
    return idx, np.asarray(y, dtype=np.int64)


def _unlabeled_loss_sums(
    m: Measure, views, p: np.ndarray, group: np.ndarray, n_groups: int, known, y_known, C: int
) -> tuple[np.ndarray, np.ndarray]:
    """``Σ p(x) ℓ(x, c)`` over each group's unlabeled items for every class ``c``, shape
    ``(n_groups, C, d)``, and ``Σ p(x) ℓ(x, y(x))`` over the labeled (``known``) items, shape
    ``(d,)``. Chunked over the pool; ``group`` may hold anything for labeled items."""
    M, d = p.size, m.dim
    pu_all = p * ~known
    group = np.maximum(group, 0)
    Lsum = np.zeros((n_groups, C, d))
    R_known = np.zeros(d)
    for start in range(0, M, CHUNK):
        sl = slice(start, min(start + CHUNK, M))
        v = views(sl)
        g, pu = group[sl], pu_all[sl]
        for c in range(C):
            L = m.loss(np.full(sl.stop - sl.start, c, dtype=np.int32), v)
            for j in range(d):
                Lsum[:, c, j] += np.bincount(g, weights=pu * L[:, j], minlength=n_groups)
            kn = known[sl] & (y_known[sl] == c)
            if kn.any():
                R_known += p[sl][kn] @ L[kn]
    return Lsum, R_known


def contingency_table(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    weights: Any,
    *,
    model: str | None = None,
    n_strata: int = 20,
    strata: Any = None,
    n_bins: int = 4,
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
    idx, y = _check_labeled(pool, indices, labels, encoded)
    w = np.asarray(weights, dtype=float)
    if y.shape != idx.shape or w.shape != idx.shape:
        raise ValueError(
            f"indices, labels and weights must have the same length, got {idx.size}, "
            f"{y.size} and {w.size}"
        )
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be positive and finite")
    key = _prediction_key(pool, models)
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
    P_unl = np.bincount(cell, weights=p * ~known, minlength=n_cells)
    N_unl = np.bincount(cell, weights=(~known).astype(float), minlength=n_cells)
    P_all = np.bincount(cell, weights=p, minlength=n_cells)
    Lsum, R_known = _unlabeled_loss_sums(m, views, p, cell, n_cells, known, y_known, C)
    belief = pool_belief(pool, models).probs if pool.has_probs() else None
    prior = np.zeros((n_cells, C))
    logp = np.zeros((n_cells, C))
    if belief is not None:  # chunked as the loss sums were (same summation order as before)
        for start in range(0, M, CHUNK):
            sl = slice(start, min(start + CHUNK, M))
            cs = cell[sl]
            for c in range(C):
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
        "N_unl": N_unl,
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


def _prediction_key(pool, models: tuple[str, ...]) -> np.ndarray:
    """Every item's joint predicted class under ``models``, ``Σ_j pred_j C^j`` (decoded by
    :func:`_key_names`)."""
    C = pool.n_classes
    key = np.zeros(pool.n_items, dtype=np.int64)
    for j, name in enumerate(models):
        key += pool.view(name).pred.astype(np.int64) * C**j
    return key


def _key_names(pool, keys: np.ndarray, models: tuple[str, ...]) -> list[str]:
    C = pool.n_classes
    out = []
    for k in keys.tolist():
        parts = []
        for j in range(len(models)):
            parts.append(str(pool.classes[(k // C**j) % C]))
        out.append(parts[0] if len(models) == 1 else ",".join(parts))
    return out


def _derived(table: dict[str, Any], theta: np.ndarray, rng=None) -> dict[str, np.ndarray]:
    """Risk and measure for posterior draws ``theta (..., cell, class)``.

    Superpopulation (``weighting="design"``): ``R = Σ_cells P_cell Σ_c θ_c L̄_c``. Finite
    population (``weighting="none"``, deterministic oracle): the unlabeled items' labels are drawn
    from the posterior predictive, ``n_cell ∼ Multinomial(N^U_cell, θ_cell)`` per draw, and
    ``R = R_known + Σ_cells P^U_cell Σ_c (n_{cell,c} / N^U_cell) L̄^U_{cell,c}`` — the pool's
    realized risk, not its expectation, so a pool whose positives are all labeled keeps
    posterior mass on "no positive left" (the expectation never reaches it).
    """
    m: Measure = table["measure"]
    if table["finite_population"] and rng is not None:
        N = table["N_unl"].astype(np.int64)
        th = np.clip(theta, 0.0, None)
        th = th / th.sum(axis=-1, keepdims=True)
        counts = rng.multinomial(np.broadcast_to(N, th.shape[:-1]), th)
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(N[:, None] > 0, counts / np.maximum(N, 1)[:, None], 0.0)
    else:
        frac = theta
    R = table["R_known"] + np.einsum("h,...hc,hcj->...j", table["P_unl"], frac, table["Lbar"])
    return {"risk": R, "measure": _apply_g(m, R)}


def _apply_g(m: Measure, R: np.ndarray) -> np.ndarray:
    flat = R.reshape(-1, R.shape[-1])
    with np.errstate(all="ignore"):
        G = np.stack([m.g(r) for r in flat])
    return G.reshape((*R.shape[:-1], m.n_outputs))


def contingency_posterior(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    weights: Any = None,
    *,
    model: str | None = None,
    method: str = "conjugate",
    n_strata: int = 20,
    strata: Any = None,
    n_bins: int = 4,
    prior_strength: float = 0.5,
    deterministic: bool = True,
    weighting: str | None = None,
    draws: int = 1000,
    chains: int = 2,
    tune: int = 1000,
    encoded: bool = False,
    fit: str = "laplace",
    bin_width: float = 0.1,
    calibration_options: dict[str, Any] | None = None,
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
    method : {"conjugate", "pymc", "calibration"}
        Independent conjugate Dirichlet rows (exact, NumPy), the hierarchical PyMC cell model, or
        the item-level calibration posterior (binary pools, deterministic oracle; the cell
        options ``n_strata``, ``strata``, ``n_bins``, ``prior_strength`` and ``weights`` are not
        used by it).
    n_strata : int
        Score strata (cumulative-sqrt-F rule on the plug-in log-odds); ignored with ``strata``.
    strata : array-like (n_items,), optional
        Your own stratum per item.
    n_bins : int
        Equal-count score bins inside each stratum-prediction group (default 4): narrow cells make
        the adaptive selection close to ignorable given the cell.
    prior_strength : float
        ``s0`` of the conjugate prior ``Dir(s0 π̄)``, ``π̄`` the model's mean probability in the cell
        (default 0.5: weak, because the model's probabilities may be miscalibrated).
    deterministic : bool
        Deterministic oracle: labeled items are counted once (and, with ``weighting="none"``,
        enter the pool risk exactly).
    weighting : {"design", "none"}, optional
        ``"design"`` (default for ``"conjugate"``): design-weighted pseudo-counts and
        post-stratification over all items. ``"none"`` (default for ``"pymc"``): unweighted counts
        of the distinct labeled items, the labeled items' losses exactly and the model's prediction
        for the unlabeled ones (finite-population inference; sound when the selection is ignorable
        given the cell). See the module notes and ``benchmarks/results/contingency_coverage.md``.
    draws, chains : int
        Posterior draws per chain and chains.
    tune : int
        NUTS tuning steps (``method="pymc"``).
    encoded : bool
        Labels are already encoded as class indices.
    fit : {"laplace", "nuts"}
        ``method="calibration"``: parameter draws of the label model from the
        importance-corrected Laplace posterior (σ at its mode; default) or from NUTS.
    bin_width : float
        ``method="calibration"``: width of the log-odds grid on which the unlabeled items are
        binned (default 0.1: the bin's expected count is off by a relative ``≈ b² δ²/24``).
    calibration_options : dict, optional
        ``method="calibration"``: options of
        :class:`~bayes_activeeval.oracles.calibration.CalibrationOracle` (``n_strata``, prior
        scales, ``feature``, ``clip``, …).
    rng : None, int or Generator

    Returns
    -------
    xarray.DataTree
        ``posterior``: ``theta`` (cell, class), ``risk`` (component), ``measure`` (output) and,
        for ``"pymc"``, the hierarchical parameters; ``observed_data``: the (pseudo-)counts;
        ``constant_data``: cell masses, strata, predictions, prior means and raw counts.
        ``method="calibration"``: ``risk``, ``measure``, ``a``, ``b``, ``stratum_effect`` and
        ``unlabeled_positives`` (prediction) in ``posterior``; the labeled counts per
        prediction × class in ``observed_data``. ``arviz.summary`` works.

    Notes
    -----
    The risk is ``R = Σ_{labeled} p ℓ(x, y) + Σ_{unlabeled} p ℓ(x, ỹ)`` with ``ỹ`` drawn from the
    label model's posterior predictive (finite population), or the post-stratified
    ``Σ_cells P_cell Σ_c θ_c L̄_c`` (``weighting="design"``; Marchant & Rubinstein (2021),
    App. H for the weighted pseudo-counts); ``G = g(R)`` per draw (Marchant & Rubinstein (2021),
    Def. 1).
    """
    import arviz_base as azb

    if method not in ("conjugate", "pymc", "calibration"):
        raise ValueError(f"method must be 'conjugate', 'pymc' or 'calibration', got {method!r}")
    s0 = float(prior_strength)
    if not np.isfinite(s0) or s0 <= 0:
        raise ValueError(f"prior_strength must be positive, got {prior_strength!r}")
    draws = check_count(draws, "draws")
    chains = check_count(chains, "chains")
    rng = check_rng(rng)
    if method == "calibration":
        if weighting not in (None, "none"):
            raise ValueError(
                f"method='calibration' uses unweighted labels; got weighting={weighting!r}"
            )
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
            fit=fit,
            bin_width=bin_width,
            calibration_options=calibration_options,
            rng=rng,
        )
    if weighting is None:
        weighting = "design" if method == "conjugate" else "none"
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
    der = _derived(table, theta, rng)
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
    :func:`contingency_posterior`).

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

    from ._common import log_odds
    from .calibration import CalibrationOracle

    if fit not in ("laplace", "nuts"):
        raise ValueError(f"fit must be 'laplace' or 'nuts', got {fit!r}")
    if not deterministic:
        raise ValueError(
            "method='calibration' needs a deterministic oracle (deterministic=True); for a "
            "stochastic oracle use method='conjugate' with weighting='design'"
        )
    bw = float(bin_width)
    if not np.isfinite(bw) or bw <= 0:
        raise ValueError(f"bin_width must be positive, got {bin_width!r}")
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    if pool.task != "binary" or pool.pos is None:
        raise ValueError(
            "method='calibration' needs a binary pool with a positive class "
            f"(got task={pool.task!r}); use method='conjugate' or 'pymc'"
        )
    M, C, pos = pool.n_items, 2, int(pool.pos)
    idx, y = _check_labeled(pool, indices, labels, encoded)
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
    key = _prediction_key(pool, models)  # for grouping
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
    Lsum, R_known = _unlabeled_loss_sums(m, views, p, item_bin, nb, known, y_known, C)
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
    G = _apply_g(m, R)
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
    keys = _key_names(pool, info["keys"], info["models"])
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
