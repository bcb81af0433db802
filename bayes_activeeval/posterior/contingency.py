"""The posterior of any measure on the pool: item-level calibration and contingency-table models.

The posterior of a measure from contingency-table cells (``method="conjugate"`` / ``"pymc"``), and
:func:`contingency_posterior`, the one entry point that dispatches to these cell models or to the
item-level :func:`~bayes_activeeval.posterior.calibration_posterior`.

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
  a deterministic oracle, once all of a cell's positives are found) biases its denominators. A
  cell with few labels takes its rate mostly from its prior. The model's prior ``Dir(s0 π̄)``
  (``prior="model"``; the default before 2026-11-27), the model's own probabilities, carries
  about 42 pseudo-labels over the default 84 cells: with miscalibrated probabilities its 95 %
  intervals under-covered (F1 with SVM-like probabilities and a stochastic labeler 0.87 at 300
  labels and 0.84 at 1,000, ``benchmarks/results/posterior_cells_coverage.md``; accuracy 0.99-0.999
  with underconfident probabilities 0.00-0.43 at 50 and 200 labels,
  ``benchmarks/results/posterior_cells_boundary.md``), and fewer cells (``labels_per_cell=30``)
  mended that but collapsed with calibrated probabilities (0.04-0.55 at 50 labels). The
  recalibrated prior (``prior="recalibrated"``, binary pools with probabilities;
  :func:`_recalibrated_prior`)
  learns a calibration map and a strength per prediction from all cells' counts and integrates
  over them: near the boundary it covers 0.97-1.00, 0.93-1.00 and 0.94-1.00 at 50, 200 and 1,000
  labels with calibrated probabilities and 0.87-0.97, 0.84-0.98 and 0.89-0.97 with underconfident
  ones (``posterior_cells_boundary.md``), with intervals 1.06-3.61 times as wide where the
  model's prior was right (calibrated probabilities). With design-weighted counts it is the
  default (``prior="auto"``) for a measure of one model on a binary pool with probabilities
  (several models — a stack or a difference — keep the model's prior: not measured with the
  recalibrated one): F1 with a stochastic labeler
  0.950-0.970 where the model's prior covered 0.835-0.940 (``posterior_cells_coverage.md``), and
  after adaptive runs of 2,000 labels 0.98-1.00 in every setting, never below the model's prior
  on the same runs (``contingency_coverage.md``, paired re-run). With ``weighting="none"`` the
  default stays the model's prior: there the labeled items of a cell are its high-score ones,
  the map learns that selection and carries it into the unlabeled bulk (coverage 1.00 → 0.55 in
  one setting of the same re-run).

Two ways to get the posterior of ``θ``:

- ``method="conjugate"``: Dirichlet rows ``θ_cell ∼ Dir(s π'_cell + n_cell)``, sampled exactly
  with NumPy, independent given the prior: ``π'`` the recalibrated probabilities and ``s`` the
  strength, drawn from their grid posterior (``prior="recalibrated"``), or ``π̄`` the model's mean
  probability in the cell and ``s = s0`` (``prior="model"``);
- ``method="pymc"``: a hierarchical model sharing strength across sparse cells,
  ``θ_cell = softmax(a_k + b z_cell + σ u_{hk})`` with ``z_cell`` the cell's mean model
  log-probability and ``u ∼ N(0, 1)`` (a Bayesian recalibration of the model's probabilities with
  stratum effects), fitted by NUTS to the same counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from .._validation import check_count, check_number, check_rng
from ..beliefs import pool_belief
from ..measures import Measure
from ..oracles.calibration import INTERCEPT_SD, LOG_SLOPE_SD
from ..proposals import CHUNK
from ..strata import score_strata
from ..threshold_free.kernels import rank_measure
from .calibration import CalibrationOptions, calibration_posterior
from .common import (
    apply_g,
    check_labeled,
    distinct_labels,
    key_names,
    prediction_key,
    unlabeled_loss_sums,
)

__all__ = ["CellOptions", "cell_posterior", "contingency_posterior", "contingency_table"]


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
    n_strata: int = 20,
    strata: Any = None,
    n_bins: int = 4,
    deterministic: bool = True,
    weighting: str = "design",
    encoded: bool = False,
    labels_per_cell: float | None = None,
) -> dict[str, Any]:
    """The cells, their pool masses, mean losses, covariates and labeled (pseudo-)counts.

    A cell is ``stratum × prediction × score bin`` (``n_bins`` equal-count bins of the score inside
    every stratum-prediction *group*). Parameters are those of :func:`contingency_posterior`.
    Returns a dict of NumPy arrays used by both posterior methods.

    With ``labels_per_cell`` the cells are fewer where the labels are few
    (:func:`_capped_cells`): at most one cell per ``labels_per_cell`` labels.

    Parameters
    ----------
    pool : Pool
        A classification pool.
    measure : str or Measure
        Any classification measure (also one bound to several models).
    indices, labels, weights : array-like (n,)
        The labeled draws (repeats included), their labels and importance weights ``p/q``
        (positive and finite).
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    n_strata : int, optional
        Score strata (cumulative-sqrt-F rule), default ``20``; ignored with ``strata``.
    strata : array-like (n_items,), optional
        Your own stratum per item (default ``None``).
    n_bins : int, optional
        Equal-count score bins inside each stratum-prediction group (default ``4``).
    deterministic : bool, optional
        Deterministic oracle: a labeled item is counted once (default ``True``).
    weighting : {"design", "none"}, optional
        Design-weighted pseudo-counts (default) or plain counts. ``"none"`` with a
        deterministic oracle is finite-population: ``R_known`` holds the labeled items' losses
        and ``P_unl`` the unlabeled items' masses.
    encoded : bool, optional
        Labels are already class indices (default ``False``).
    labels_per_cell : float, optional
        Cut the bins, then the strata (not your own ``strata``), until the non-empty cells hold
        at least this many labels on average (labeled items for a deterministic oracle, draws
        for a stochastic one); ``n_strata`` and ``n_bins`` are then the most used (default
        ``None``: no cut).

    Returns
    -------
    dict
        ``measure`` (resolved), ``models``; per cell ``cell_group``, ``cell_bin``, ``P_unl``,
        ``N_unl``, ``P_all``, ``Lbar`` (cell, class, component), ``prior``, ``logp``, ``raw`` and
        ``pseudo`` (cell, class); per group ``group_stratum`` and ``group_key``; ``R_known``,
        ``finite_population``, ``classes``, ``n_classes``, ``deterministic`` and the
        ``n_strata`` (requested of the stratification; ``None`` with ``strata``) and ``n_bins``
        used; for a binary pool with probabilities ``logit_mass`` (cell, node), the cells'
        ``p``-mass on a grid of the log-odds of the positive class ``pos``, and ``logit_nodes``,
        the grid's (``p``-weighted mean) log-odds (both ``None`` otherwise).
    """
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    if pool.task == "regression":
        raise ValueError("the contingency-table model needs a classification pool")
    if weighting not in ("design", "none"):
        raise ValueError(f"weighting must be 'design' or 'none', got {weighting!r}")
    M, C = pool.n_items, pool.n_classes
    idx, y = check_labeled(pool, indices, labels, encoded)
    w = np.asarray(weights, dtype=float)
    if y.shape != idx.shape or w.shape != idx.shape:
        raise ValueError(
            f"indices, labels and weights must have the same length, got {idx.size}, "
            f"{y.size} and {w.size}"
        )
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be positive and finite")
    if deterministic and idx.size:  # one label per item: refuse two different ones
        ui, yu = distinct_labels(idx, y)
    n_labels = ui.size if deterministic and idx.size else idx.size
    key = prediction_key(pool, models)
    score = _cell_scores(pool, models)
    if strata is not None:
        h = np.asarray(strata)
        if h.shape != (M,):
            raise ValueError(f"strata has shape {h.shape}; expected ({M},)")
        _, h = np.unique(h, return_inverse=True)
        n_strata = None
    used_keys, key = np.unique(key, return_inverse=True)
    K = used_keys.size
    n_strata, n_bins, groups, cells, cell = _capped_cells(
        score,
        key,
        K,
        h if strata is not None else None,
        n_strata,
        n_bins,
        n_labels,
        labels_per_cell,
    )
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
    Lsum, R_known = unlabeled_loss_sums(m, views, p, cell, n_cells, known, y_known, C)
    belief = pool_belief(pool, models).probs if pool.has_probs() else None
    prior = np.zeros((n_cells, C))
    logp = np.zeros((n_cells, C))
    # the p-mass of every cell on a grid of the positive class's log-odds (binary pools with
    # probabilities): the recalibrated prior's cell means (:func:`_recalibrated_prior`)
    binary = belief is not None and C == 2 and pool.pos is not None
    nb = _LOGIT_BINS
    logit_mass = np.zeros(n_cells * nb) if binary else None
    node_sum, node_mass = np.zeros(nb), np.zeros(nb)
    if belief is not None:  # chunked as the loss sums were (same summation order as before)
        for start in range(0, M, CHUNK):
            sl = slice(start, min(start + CHUNK, M))
            cs = cell[sl]
            for c in range(C):
                bc = belief[sl, c]
                prior[:, c] += np.bincount(cs, weights=p[sl] * bc, minlength=n_cells)
                lb = np.log(np.clip(bc, 1e-12, 1.0))
                logp[:, c] += np.bincount(cs, weights=p[sl] * lb, minlength=n_cells)
            if binary:
                x = special.logit(np.clip(belief[sl, pool.pos], _LOGIT_CLIP, 1 - _LOGIT_CLIP))
                j = np.clip(((x - _LOGIT_LO) / _LOGIT_WIDTH).astype(np.int64), 0, nb - 1)
                logit_mass += np.bincount(cs * nb + j, weights=p[sl], minlength=n_cells * nb)
                node_sum += np.bincount(j, weights=p[sl] * x, minlength=nb)
                node_mass += np.bincount(j, weights=p[sl], minlength=nb)
    logit_nodes = None
    if binary:
        used = node_mass > 0
        logit_mass = logit_mass.reshape(n_cells, nb)[:, used]
        logit_nodes = node_sum[used] / node_mass[used]
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
            np.add.at(raw, (cell[ui], yu), 1.0)
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
        "n_strata": n_strata,
        "n_bins": n_bins,
        "logit_mass": logit_mass,
        "logit_nodes": logit_nodes,
        "pos": pool.pos,
    }


#: The log-odds grid of :func:`contingency_table` (``logit_mass``): probabilities clipped to
#: ``[1e-6, 1 − 1e-6]``, 256 equal bins of about 0.11 over the clipped range.
_LOGIT_CLIP = 1e-6
_LOGIT_LO = float(special.logit(_LOGIT_CLIP))
_LOGIT_BINS = 256
_LOGIT_WIDTH = -2.0 * _LOGIT_LO / _LOGIT_BINS
#: The grid of the recalibrated prior's hyperparameters (:func:`_recalibrated_prior`): the shift
#: ``a`` (±3.2 of its prior scale ``INTERCEPT_SD``), the log slope ``β`` (±2 ``LOG_SLOPE_SD``)
#: and the strength ``s = s0 · 4^j``, ``j = 0 … 5`` (``s0`` to ``1024 s0``).
_SHIFTS = np.arange(-32, 33) * (INTERCEPT_SD / 10.0)
_LOG_SLOPES = np.linspace(-2.0, 2.0, 9) * LOG_SLOPE_SD
_STRENGTHS = 4.0 ** np.arange(6)


def _recalibrated_prior(table: dict[str, Any], s0: float, n: int, rng) -> dict[str, np.ndarray]:
    """``n`` draws of the recalibrated cell prior's parameters, integrated over its hyperparameters.

    Per prediction ``k`` of the evaluated model(s), a calibration map of the model's log-odds
    ``x`` of the positive class (Platt (1999) scaling, as :class:`~bayes_activeeval.oracles.
    CalibrationOracle` fits it, here on the cells), centred on the identity::

        η_k(x) = x̄_k + a_k + b_k (x − x̄_k),   π'_cell = mean over the cell of expit(η_k(x)),
        θ_cell | a_k, b_k, s_k ∼ Beta(s_k π'_cell, s_k (1 − π'_cell)),
        a_k ∼ N(0, INTERCEPT_SD²),   log b_k ∼ N(0, LOG_SLOPE_SD²),   log s_k uniform,

    with ``x̄_k`` the prediction's ``p``-weighted mean log-odds — a hierarchical prior whose
    location (the recalibrated probabilities) and strength (how far a cell may depart from them)
    are learned from all cells' (pseudo-)counts. This is the hierarchical beta-binomial model of
    Gelman et al. (2013), *Bayesian Data Analysis*, 3rd ed., Sec. 5.3, with the prior means of the
    cells given by the map: the hyperparameters' posterior is their prior times the marginal
    likelihood of the counts, ``Π_cells B(s π' + n_1, s (1 − π') + n_0) / B(s π', s (1 − π'))``
    (their Eq. 5.8; design-weighted pseudo-counts for ``weighting="design"``), computed on the
    grid ``_SHIFTS × _LOG_SLOPES × s0 · _STRENGTHS`` as they do, so the labels are used once
    (no plug-in fit). Each draw takes a grid point from that posterior, then the cells' ``θ``
    from ``Dir(s π' + n)``. With ``a = 0``, ``b = 1`` and ``s = s0`` it is the model's prior
    ``Dir(s0 π̄)``.

    Returns
    -------
    dict
        ``alpha`` (n, cell, class), the Dirichlet parameters of ``θ`` per draw, and per
        prediction (in the order of first appearance in ``table["group_key"]``) the drawn
        ``shift``, ``slope`` and ``strength`` (n, prediction).
    """
    mass, nodes, counts = table["logit_mass"], table["logit_nodes"], table["pseudo"]
    pos = int(table["pos"])
    n_cells, C = counts.shape
    gk = table["group_key"]
    cell_key = gk[table["cell_group"]]
    levels = list(dict.fromkeys(gk.tolist()))
    a, beta = (g.ravel() for g in np.meshgrid(_SHIFTS, _LOG_SLOPES, indexing="ij"))
    b = np.exp(beta)
    S = s0 * _STRENGTHS
    log_prior = -0.5 * (a / INTERCEPT_SD) ** 2 - 0.5 * (beta / LOG_SLOPE_SD) ** 2
    log_prior = np.repeat(log_prior - special.logsumexp(log_prior), S.size) - np.log(S.size)
    alpha = np.empty((n, n_cells, C))
    hyper = {k: np.empty((n, len(levels))) for k in ("shift", "slope", "strength")}
    for j, k in enumerate(levels):
        cells = np.flatnonzero(cell_key == k)
        W = mass[cells]
        P = W.sum(axis=1)
        tot = P.sum()
        xbar = float(W.sum(axis=0) @ nodes / tot) if tot > 0 else 0.0
        eta = xbar + a[None, :] + b[None, :] * (nodes[:, None] - xbar)
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(P[:, None] > 0, (W @ special.expit(eta)) / P[:, None], 0.5)
        pm = np.empty((cells.size, a.size, C))
        pm[..., pos] = q
        pm[..., 1 - pos] = 1.0 - q
        pm = np.clip(pm, 1e-6, None)  # as the model's prior mean (cell_posterior)
        pm /= pm.sum(axis=-1, keepdims=True)
        nk = counts[cells]
        lab = nk.sum(axis=1) > 0  # a cell without counts has likelihood 1
        log_post = log_prior.copy()
        if lab.any():
            nl = nk[lab]
            N = nl.sum(axis=1)
            # Σ_cells log Γ(s) − log Γ(s + N) + Σ_c log Γ(s π'_c + n_c) − log Γ(s π'_c); the
            # terms of a class without counts vanish
            ll = np.broadcast_to(
                (special.gammaln(S)[None, :] - special.gammaln(S[None, :] + N[:, None])).sum(0),
                (a.size, S.size),
            ).copy()
            for c in range(C):
                has = nl[:, c] > 0
                if has.any():
                    al = S[None, None, :] * pm[lab][has][:, :, c, None]
                    ll += (
                        special.gammaln(al + nl[has, c][:, None, None]) - special.gammaln(al)
                    ).sum(axis=0)
            log_post = log_post + ll.ravel()
        w = np.exp(log_post - log_post.max())
        pick = rng.choice(w.size, n, p=w / w.sum())
        g, si = np.divmod(pick, S.size)
        alpha[:, cells, :] = S[si][:, None, None] * pm[:, g, :].transpose(1, 0, 2) + nk[None]
        hyper["shift"][:, j] = a[g]
        hyper["slope"][:, j] = b[g]
        hyper["strength"][:, j] = S[si]
    return {"alpha": alpha, **hyper}


def _capped_cells(score, key, K, h, n_strata, n_bins, n_labels, labels_per_cell):
    """The cells ``stratum × prediction × score bin``; with ``labels_per_cell``, at most one per
    ``labels_per_cell`` labels.

    ``n_strata`` strata (cumulative-sqrt-F rule on ``score``; ``h`` given: those strata) and
    ``n_bins`` equal-count bins per stratum-prediction group. With ``labels_per_cell``, while
    there are more non-empty cells than ``max(1, n_labels / labels_per_cell)`` the bins and then
    the score strata (never ``h``) are cut in proportion (by at least one each time). Cells
    without labels take their rates from the prior; with the model's prior ``Dir(s0 π̄)``
    (``prior="model"``), i.e. from the model's own probabilities, which is what made the
    design-weighted cells under-cover with miscalibrated probabilities and a few hundred labels
    (``benchmarks/results/posterior_cells_coverage.md``).

    Returns
    -------
    n_strata, n_bins : int or None, int
        The strata requested of the stratification (``None`` with ``h``) and the bins used.
    groups, cells, cell : ndarray
        The non-empty stratum-prediction groups (``stratum * K + key``), the non-empty cells
        (``group * n_bins + bin``, ``group`` the index in ``groups``) and every item's cell.
    """
    n_strata = None if h is not None else check_count(n_strata, "n_strata")
    n_bins = check_count(n_bins, "n_bins")
    cap = np.inf
    if labels_per_cell is not None:
        lpc = check_number(labels_per_cell, "labels_per_cell")
        if not lpc > 0:
            raise ValueError(f"labels_per_cell must be positive, got {labels_per_cell!r}")
        cap = max(1.0, n_labels / lpc)
    hh = h
    while True:
        if h is None:
            hh, _ = score_strata(score, n_strata)
        groups, group = np.unique(hh * K + key, return_inverse=True)
        b = _within_cell_bins(group, score, n_bins)
        cells, cell = np.unique(group * n_bins + b, return_inverse=True)
        if cells.size <= cap:
            break
        shrink = cap / cells.size
        if n_bins > 1:
            n_bins = max(1, min(n_bins - 1, int(n_bins * shrink)))
        elif h is None and n_strata > 1:
            n_strata = max(1, min(n_strata - 1, int(n_strata * shrink)))
        else:
            break
    return n_strata, n_bins, groups, cells, cell


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
    return {"risk": R, "measure": apply_g(m, R)}


@dataclass(frozen=True)
class CellOptions:
    """Options of the contingency-cell posteriors (``method="conjugate"`` / ``"pymc"``).

    Parameters
    ----------
    n_strata : int, optional
        The number of score strata (default ``20``).
    strata : array-like (n_items,), optional
        A stratum per item, used instead of the score strata (default ``None``).
    n_bins : int, optional
        Score bins per stratum-prediction group (default ``4``).
    prior_strength : float, optional
        ``s0 > 0`` of the conjugate prior (default ``0.5``); with ``prior="recalibrated"`` the
        smallest of the strengths ``s0 · 4^j``, ``j = 0 … 5``, it learns.
    weighting : {"design", "none"}, optional
        How the labels enter (default ``None``: ``"design"`` for ``"conjugate"``, ``"none"``
        for ``"pymc"``).
    labels_per_cell : float, optional
        Fewer cells when the labels are few (default ``None``: the cells as given): with ``n``
        labels (distinct labeled items, or draws for a stochastic oracle) the bins and then the
        score strata are cut until there are at most ``max(1, n / labels_per_cell)`` non-empty
        cells.
    prior : {"auto", "model", "recalibrated"}, optional
        The prior of the conjugate cells' rates. ``"model"``: ``Dir(s0 π̄)``, ``π̄`` the model's
        mean probability in the cell. ``"recalibrated"`` (binary pools with probabilities):
        per prediction, a calibration map of the model's log-odds (shift and slope) and a
        strength, integrated over their posterior given all cells' counts
        (:func:`_recalibrated_prior`); needs ``method="conjugate"``. ``"auto"`` (the default):
        ``"recalibrated"`` for the conjugate cells with design-weighted counts and a measure of
        one model on a binary pool with probabilities, ``"model"`` otherwise (see the module
        notes).

    Attributes
    ----------
    n_strata : int
        Score strata (cumulative-sqrt-F rule on the plug-in log-odds); ignored with ``strata``.
    strata : array-like (n_items,), optional
        Your own stratum per item.
    n_bins : int
        Equal-count score bins inside each stratum-prediction group (default 4): narrow cells make
        the adaptive selection close to ignorable given the cell.
    prior_strength : float
        ``s0`` of the conjugate prior ``Dir(s0 π̄)``, ``π̄`` the model's mean probability in the cell
        (default 0.5: weak, because the model's probabilities may be miscalibrated); the
        smallest strength of the recalibrated prior.
    weighting : {"design", "none"}, optional
        ``"design"`` (default for ``"conjugate"``): design-weighted pseudo-counts and
        post-stratification over all items. ``"none"`` (default for ``"pymc"``): unweighted counts
        of the distinct labeled items, the labeled items' losses exactly and, for the unlabeled
        items, labels drawn from the cell's posterior rates in every posterior draw,
        ``n_cell ∼ Multinomial(N^U_cell, θ_cell)`` (finite-population inference; sound when the
        selection is ignorable given the cell; the model's probabilities enter only through the
        prior mean ``π̄``). See the module notes and
        ``benchmarks/results/contingency_coverage.md``.
    labels_per_cell : float or None
        The fewest labels per non-empty cell on average (``None``: no cut). With the model's
        prior (``prior="model"``) cells with few or no labels take their rates from
        ``Dir(s0 π̄)``, i.e. from the model's own probabilities: with miscalibrated
        probabilities, 20 × 4 cells (84 non-empty) and a few hundred labels the design-weighted
        95 % interval of F1 under-covers, and fewer cells mend it
        (``benchmarks/results/posterior_cells_coverage.md`` and ``docs/adaptive.md``).
    prior : {"auto", "model", "recalibrated"}
        The prior of the conjugate cells (``"model"``: ``Dir(s0 π̄)``; ``"recalibrated"``: a
        learned calibration map and strength, binary pools with probabilities; ``"auto"``: the
        recalibrated prior for design-weighted counts and a measure of one model where it
        applies, the model's prior otherwise; see the module notes).
    """

    n_strata: int = 20
    strata: Any = None
    n_bins: int = 4
    prior_strength: float = 0.5
    weighting: str | None = None
    labels_per_cell: float | None = None
    prior: str = "auto"

    def __post_init__(self) -> None:
        if not check_number(self.prior_strength, "prior_strength") > 0:
            raise ValueError(f"prior_strength must be positive, got {self.prior_strength!r}")
        if self.prior not in ("auto", "model", "recalibrated"):
            raise ValueError(f"prior must be 'auto', 'model' or 'recalibrated', got {self.prior!r}")
        if self.labels_per_cell is not None and not (
            check_number(self.labels_per_cell, "labels_per_cell") > 0
        ):
            raise ValueError(f"labels_per_cell must be positive, got {self.labels_per_cell!r}")


#: The options each method accepts (the dispatcher's keyword arguments).
_CELL_KEYS = (
    "n_strata",
    "strata",
    "n_bins",
    "prior_strength",
    "weighting",
    "labels_per_cell",
    "prior",
)
_CALIBRATION_KEYS = ("fit", "bin_width", "calibration_options")


def contingency_posterior(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    weights: Any = None,
    *,
    model: str | None = None,
    method: str | None = None,
    deterministic: bool = True,
    draws: int = 1000,
    chains: int = 2,
    tune: int = 1000,
    encoded: bool = False,
    rng: Any = None,
    **options: Any,
):
    """Posterior of a measure on the pool: the one entry point for every method.

    Dispatches to :func:`cell_posterior` (``"conjugate"``, ``"pymc"``) or
    :func:`~bayes_activeeval.posterior.calibration_posterior` (``"calibration"``); the
    method's own options are keyword arguments here (collected into :class:`CellOptions` or
    :class:`~bayes_activeeval.posterior.CalibrationOptions`).

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        Any classification measure (also one bound to several models).
    indices, labels, weights : array-like (n,)
        The labeled draws (repeats included), their labels and importance weights ``p/q``
        (default all ones: a passive sample). The calibration posterior does not use the weights.
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    method : {None, "conjugate", "pymc", "calibration"}
        Independent conjugate Dirichlet rows (exact, NumPy), the hierarchical PyMC cell model, or
        the item-level calibration posterior (binary pools, deterministic oracle). ``None``
        (default): ``"calibration"`` for a threshold-free measure (its only posterior),
        ``"conjugate"`` otherwise. (``ActiveEvaluator.posterior()`` chooses for itself:
        ``"calibration"`` for a measure of one model on a binary pool under a deterministic
        oracle, ``"conjugate"`` otherwise.)
    deterministic : bool
        Deterministic oracle: labeled items are counted once (and, with ``weighting="none"``,
        enter the pool risk exactly).
    draws, chains : int
        Posterior draws per chain and chains.
    tune : int
        NUTS tuning steps (``method="pymc"``, or ``fit="nuts"``).
    encoded : bool
        Labels are already encoded as class indices.
    rng : None, int or Generator
    **options
        The method's options: ``n_strata``, ``strata``, ``n_bins``, ``prior_strength``,
        ``weighting``, ``labels_per_cell``, ``prior`` (cells, :class:`CellOptions`); ``fit``, ``bin_width``,
        ``calibration_options`` (calibration, :class:`~bayes_activeeval.posterior.
        CalibrationOptions`). Options of the other method are ignored; unknown names raise.

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
    rank = rank_measure(measure)
    if method is None:
        method = "calibration" if rank is not None else "conjugate"
    if method not in ("conjugate", "pymc", "calibration"):
        raise ValueError(f"method must be 'conjugate', 'pymc' or 'calibration', got {method!r}")
    unknown = sorted(set(options) - set(_CELL_KEYS) - set(_CALIBRATION_KEYS))
    if unknown:
        raise TypeError(f"contingency_posterior() got unexpected keyword arguments {unknown}")
    cell_opts = CellOptions(**{k: v for k, v in options.items() if k in _CELL_KEYS})
    if method != "calibration" and rank is not None:
        raise ValueError(
            f"the threshold-free measure {rank.name!r} has no contingency-table "
            f"posterior (method={method!r}): its value depends on the whole ranking, not on cell "
            "counts; use method='calibration'"
        )
    common = {
        "model": model,
        "deterministic": deterministic,
        "draws": draws,
        "chains": chains,
        "tune": tune,
        "encoded": encoded,
        "rng": rng,
    }
    if method == "calibration":
        if cell_opts.weighting not in (None, "none"):
            raise ValueError(
                f"method='calibration' uses unweighted labels; got weighting={cell_opts.weighting!r}"
            )
        cal = CalibrationOptions(**{k: v for k, v in options.items() if k in _CALIBRATION_KEYS})
        return calibration_posterior(pool, measure, indices, labels, options=cal, **common)
    return cell_posterior(
        pool, measure, indices, labels, weights, method=method, options=cell_opts, **common
    )


def cell_posterior(
    pool,
    measure: str | Measure,
    indices: Any,
    labels: Any,
    weights: Any = None,
    *,
    model: str | None = None,
    method: str = "conjugate",
    options: CellOptions | None = None,
    deterministic: bool = True,
    draws: int = 1000,
    chains: int = 2,
    tune: int = 1000,
    encoded: bool = False,
    rng: Any = None,
):
    """Posterior of a measure from the stratum × prediction × score-bin cells.

    ``method="conjugate"``: independent Dirichlet rows, sampled exactly with NumPy;
    ``method="pymc"``: the hierarchical cell model fitted by NUTS (see the module notes).
    Parameters as :func:`contingency_posterior`, the cell options in ``options``.

    Parameters
    ----------
    pool : Pool
        A classification pool.
    measure : str or Measure
        Any classification measure (also one bound to several models).
    indices, labels : array-like (n,)
        The labeled draws (repeats included) and their labels.
    weights : array-like (n,), optional
        The draws' importance weights ``p/q`` (default ``None``: all ones, a passive sample).
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    method : {"conjugate", "pymc"}, optional
        Independent conjugate Dirichlet rows (default) or the hierarchical PyMC cell model.
    options : CellOptions, optional
        The cell options (default ``None``: ``CellOptions()``).
    deterministic : bool, optional
        Deterministic oracle: a labeled item is counted once (default ``True``).
    draws, chains : int, optional
        Posterior draws per chain and chains (default ``1000`` and ``2``).
    tune : int, optional
        NUTS tuning steps, ``method="pymc"`` only (default ``1000``).
    encoded : bool, optional
        Labels are already class indices (default ``False``).
    rng : None, int or numpy.random.Generator, optional
        Random numbers for the conjugate draws, the finite-population label draws and the
        sampler's seed.

    Returns
    -------
    xarray.DataTree
        ``posterior``: ``theta`` (cell, class), ``risk`` (component), ``measure`` (output) and,
        for ``"pymc"``, ``a``, ``b``, ``sigma`` and ``u``; ``observed_data``: the
        (pseudo-)counts; ``constant_data``: raw counts, prior means, cell masses, strata,
        predictions and bins.
    """
    import arviz_base as azb

    if method not in ("conjugate", "pymc"):
        raise ValueError(f"method must be 'conjugate' or 'pymc', got {method!r}")
    opts = CellOptions() if options is None else options
    draws = check_count(draws, "draws")
    chains = check_count(chains, "chains")
    tune = check_count(tune, "tune", minimum=0)
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TypeError(f"deterministic must be True or False, got {deterministic!r}")
    rng = check_rng(rng)
    s0 = float(opts.prior_strength)
    weighting = opts.weighting
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
        n_strata=opts.n_strata,
        strata=opts.strata,
        n_bins=opts.n_bins,
        deterministic=deterministic,
        weighting=weighting,
        encoded=encoded,
        labels_per_cell=opts.labels_per_cell,
    )
    m: Measure = table["measure"]
    n_cells, C = table["prior"].shape
    group_names_key = key_names(pool, table["group_key"], table["models"])
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
    prior = opts.prior
    can_recalibrate = table["logit_mass"] is not None
    if prior == "auto":  # the recalibrated prior where it was measured (see the module notes)
        one_model = len(table["models"]) == 1
        use = method == "conjugate" and weighting == "design" and can_recalibrate and one_model
        prior = "recalibrated" if use else "model"
    if prior == "recalibrated" and (method != "conjugate" or not can_recalibrate):
        raise ValueError(
            "prior='recalibrated' needs method='conjugate' and a binary pool with probabilities "
            f"(got method={method!r}, {pool.task} pool"
            + ("" if pool.has_probs() else " without probabilities")
            + ")"
        )
    extra: dict[str, np.ndarray] = {}
    if method == "conjugate":  # Dirichlet rows drawn as normalized gammas
        shape = (chains, draws, n_cells, C)
        if prior == "recalibrated":
            rec = _recalibrated_prior(table, s0, chains * draws, rng)
            alpha = rec["alpha"].reshape(shape)
            extra = {
                f"prior_{k}": rec[k].reshape(chains, draws, -1)
                for k in ("shift", "slope", "strength")
            }
        else:
            alpha = np.broadcast_to(s0 * prior_mean + table["pseudo"], shape)
        g = rng.standard_gamma(alpha)
        tot = g.sum(axis=-1, keepdims=True)
        theta = np.where(tot > 0, g / np.where(tot > 0, tot, 1.0), prior_mean)
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
        "prior_shift": ["prediction"],
        "prior_slope": ["prediction"],
        "prior_strength": ["prediction"],
    }
    attrs = {
        "method": method,
        "measure": m.name,
        "weighting": weighting,
        "n_bins": int(table["n_bins"]),
        "n_strata": -1 if table["n_strata"] is None else int(table["n_strata"]),
        "finite_population": int(table["finite_population"]),
        "deterministic": int(deterministic),
        "prior": prior if method == "conjugate" else "hierarchical",
    }
    if method == "conjugate":
        coords.pop("group")
        if prior != "recalibrated":
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
