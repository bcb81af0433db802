"""Counting kernels of benchmark evaluation: rule matrices, cell sums, the five measures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .._validation import check_binary_labels

#: Measures reported by :func:`~bayes_activeeval.benchmark.evaluate`, in this order.
MEASURES: tuple[str, ...] = ("sensitivity", "specificity", "precision", "f1", "accuracy")

_CHUNK = 2048  # rules per block in the vectorised kernels
_BLOCK_BYTES = 1 << 22  # bytes of gathered rule outputs per block in pool_output_counts


def measures_and_grad(TP, FP, FN, TN):
    """Values ``(..., M)`` and gradients ``(..., M, 4)`` w.r.t. ``(TP, FP, FN, TN)``."""
    TP, FP, FN, TN = (np.asarray(x, dtype=float) for x in (TP, FP, FN, TN))
    z = np.zeros_like(TP)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_se = TP + FN
        d_sp = TN + FP
        d_pr = TP + FP
        d_f1 = 2 * TP + FP + FN
        S = TP + FP + FN + TN
        vals = np.stack([TP / d_se, TN / d_sp, TP / d_pr, 2 * TP / d_f1, (TP + TN) / S], axis=-1)
        grads = np.stack(
            [
                np.stack([FN / d_se**2, z, -TP / d_se**2, z], axis=-1),
                np.stack([z, -TN / d_sp**2, z, FP / d_sp**2], axis=-1),
                np.stack([FP / d_pr**2, -TP / d_pr**2, z, z], axis=-1),
                np.stack(
                    [2 * (FP + FN) / d_f1**2, -2 * TP / d_f1**2, -2 * TP / d_f1**2, z], axis=-1
                ),
                np.stack(
                    [(FP + FN) / S**2, -(TP + TN) / S**2, -(TP + TN) / S**2, (FP + FN) / S**2],
                    axis=-1,
                ),
            ],
            axis=-2,
        )
    return vals, grads


def measures_hessian(TP, FP, FN, TN):
    """Hessians ``(..., M, 2, 2)`` of the measures in the estimated totals ``(TP, FN)``.

    With the rule's pool margins known, ``FP = K − TP`` and ``TN = (N − K) − FN`` follow, so every
    measure is a function of ``TP`` and ``FN`` alone. Sensitivity ``TP/(TP + FN)``, specificity
    ``TN/(TN + FP)`` and F1 ``2TP/(TP + K + FN)`` have the diagonal second derivatives below;
    precision ``TP/K`` and accuracy ``(TP + TN)/N`` are linear (zero Hessian). The mixed
    derivatives do not enter the bias because the two totals are estimated independently (their
    covariance is diagonal), so they are left at zero.
    """
    TP, FP, FN, TN = (np.asarray(x, dtype=float) for x in (TP, FP, FN, TN))
    K = TP + FP
    z = np.zeros_like(TP)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_se, d_sp, d_f1 = (TP + FN) ** 3, (TN + FP) ** 3, (TP + K + FN) ** 3
        diag = np.stack(
            [
                np.stack([-2 * FN / d_se, 2 * TP / d_se], axis=-1),
                np.stack([2 * TN / d_sp, -2 * FP / d_sp], axis=-1),
                np.stack([z, z], axis=-1),
                np.stack([-4 * (K + FN) / d_f1, 4 * TP / d_f1], axis=-1),
                np.stack([z, z], axis=-1),
            ],
            axis=-2,
        )  # (..., M, 2)
    H = np.zeros((*diag.shape, 2))
    H[..., 0, 0] = diag[..., 0]
    H[..., 1, 1] = diag[..., 1]
    return H


def population_measures(labels: Any, rule_predictions: Any) -> xr.DataArray:
    """Exact pool values of the measures for every rule (the targets, Valizadegan Eqs. 3.1-3.3).

    Parameters
    ----------
    labels : array-like (N,) of {0, 1}
        True labels of every pool item.
    rule_predictions : array-like (K, N) or (N,), or mapping name -> (N,)

    Returns
    -------
    xarray.DataArray (rule, measure)
    """
    y = as_binary(labels, "labels")
    names, P = rules_matrix(rule_predictions, y.size, y.size)
    yf = y.astype(float)
    K1 = P.sum(axis=1, dtype=np.float64)
    TP = P.astype(np.float64) @ yf
    FP = K1 - TP
    FN = yf.sum() - TP
    TN = y.size - K1 - FN
    vals, _ = measures_and_grad(TP, FP, FN, TN)
    return xr.DataArray(
        vals, dims=("rule", "measure"), coords={"rule": names, "measure": list(MEASURES)}
    )


def as_binary(values: Any, name: str) -> np.ndarray:
    return check_binary_labels(values, name).astype(np.int8)


def rules_matrix(rule_predictions: Any, n_pool: int, n_sample: int, indices=None):
    """``(names, P)`` with ``P`` a (K, n) int8 matrix over the pool (n = N) or the sample."""
    if isinstance(rule_predictions, Mapping):
        names = [str(k) for k in rule_predictions]
        items = list(rule_predictions.values())
    elif callable(rule_predictions):
        names, items = ["0"], [rule_predictions]
    elif isinstance(rule_predictions, np.ndarray) or not isinstance(rule_predictions, Sequence):
        arr = np.asarray(rule_predictions)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2:
            raise ValueError(
                f"rule_predictions must be (rules, items) or (items,), got shape {arr.shape}"
            )
        names, items = [str(i) for i in range(arr.shape[0])], None
        P = _check_rule_block(arr, n_pool, n_sample)
        return names, P
    else:
        items = list(rule_predictions)
        if (
            items
            and not any(callable(it) for it in items)
            and all(np.ndim(it) == 0 for it in items)
        ):
            # a flat list / tuple of 0/1 outputs is one rule (array-like (N,) or (m,)), not
            # N rules of one output each
            return rules_matrix(np.asarray(items), n_pool, n_sample)
        names = [str(i) for i in range(len(items))]
    if not items:
        raise ValueError("rule_predictions holds no rules")
    rows = []
    for nm, it in zip(names, items, strict=True):
        if callable(it):
            out = np.asarray(it(np.arange(n_pool)))
            if out.shape != (n_pool,):
                raise ValueError(
                    f"rule {nm!r}: the callable returned shape {out.shape} for {n_pool} items"
                )
            rows.append(out)
        else:
            rows.append(np.asarray(it))
    lengths = {r.shape for r in rows}
    if len(lengths) != 1:
        raise ValueError(f"rule_predictions: rules have different shapes {sorted(lengths)}")
    return names, _check_rule_block(np.stack(rows), n_pool, n_sample)


def _check_rule_block(arr: np.ndarray, n_pool: int, n_sample: int) -> np.ndarray:
    if arr.shape[1] not in (n_pool, n_sample):
        raise ValueError(
            f"rule_predictions has {arr.shape[1]} columns; expected the pool size {n_pool} "
            f"or the number of labeled items {n_sample}"
        )
    if arr.dtype == bool:
        return arr.view(np.int8)
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            bad = np.argwhere((arr < 0) | (arr > 1))[0]
            raise ValueError(
                f"rule_predictions[{bad[0]}, {bad[1]}] = {arr[bad[0], bad[1]].item()!r}; expected 0 or 1"
            )
        return arr.astype(np.int8, copy=False)
    try:
        f = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"rule_predictions must hold 0/1 outputs, got dtype {arr.dtype}") from exc
    bad = np.argwhere(~((f == 0) | (f == 1)))
    if bad.size:
        i, j = bad[0]
        raise ValueError(f"rule_predictions[{i}, {j}] = {arr[i, j].item()!r}; expected 0 or 1")
    return f.astype(np.int8)


def cell_sums(Ps: np.ndarray, y: np.ndarray, hs: np.ndarray, H: int, stats_w: np.ndarray):
    """Sums of ``stats_w`` (S, m) over the cells stratum x rule output x label, for every rule.

    Returns ``(K, S, H, 2, 2)`` indexed ``[rule, statistic, stratum, output, label]``; one
    matrix product per block of rules (no loop over items).
    """
    m = y.size
    S = stats_w.shape[0]
    onehot = hs[None, :] == np.arange(H)[:, None]  # (H, m)
    lab = np.stack([1 - y, y]).astype(float)  # (2, m)
    M = stats_w[:, None, None, :] * lab[None, :, None, :] * onehot[None, None, :, :]
    M = M.reshape(S * 2 * H, m)  # rows: (stat, label, stratum)
    tot = M.sum(axis=1).reshape(S, 2, H)
    out = np.empty((Ps.shape[0], S, H, 2, 2))
    for lo in range(0, Ps.shape[0], _CHUNK):
        blk = Ps[lo : lo + _CHUNK].astype(np.float64) @ M.T  # (k, S*2*H)
        pos = blk.reshape(-1, S, 2, H).transpose(0, 1, 3, 2)  # (k, S, H, label)
        out[lo : lo + _CHUNK, :, :, 1, :] = pos
        out[lo : lo + _CHUNK, :, :, 0, :] = tot.transpose(0, 2, 1)[None] - pos
    return out


def pool_output_counts(P: np.ndarray, strata: np.ndarray, H: int) -> np.ndarray:
    """Pool counts ``N_{h r}`` (K, H, 2) of each rule's outputs per stratum.

    Integer sums over each stratum's slice of the items sorted by stratum, on blocks of rules of
    at most ``_BLOCK_BYTES`` of gathered 0/1 outputs: one pass over ``P``, and the extra memory
    is one such block whatever the number of rules (the float64 cumulative sum of a block of
    rules used before cost ``8 K N`` bytes: +862 MB and 6 s at ``N = 10^6``, ``K = 100``).
    The counts are exact integers, returned as float64.
    """
    strata = np.asarray(strata)
    sizes = np.bincount(strata, minlength=H)
    K, N = P.shape
    pos = np.zeros((K, H), dtype=np.int64)
    order = np.argsort(strata, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    nonempty = np.flatnonzero(sizes > 0)
    rows = max(1, _BLOCK_BYTES // max(N * P.itemsize, 1))
    for lo in range(0, K, rows):
        blk = np.take(P[lo : lo + rows], order, axis=1)
        for h in nonempty:  # a reduction with dtype= casts in small buffers, not the block
            pos[lo : lo + rows, h] = blk[:, bounds[h] : bounds[h + 1]].sum(axis=1, dtype=np.int64)
    pos = pos.astype(np.float64)
    return np.stack([sizes[None, :] - pos, pos], axis=-1)


def _ratio_bias(TP, FN, FP, TN, var_r):
    """Second-order (delta-method) bias of the ratio measures, post-stratified case.

    With ``FP = K - TP`` and ``TN = (N - K) - FN`` fixed by the known margins, every measure is
    a function of the two independent estimated totals ``TP`` (rule-positive cells) and ``FN``
    (rule-negative cells), and ``E g(T_hat) - g(T) ≈ ½ (g_TP,TP Var TP + g_FN,FN Var FN)``
    (Cochran (1977), Sec. 6.8 for the ratio estimator). ``var_r`` is (K, 2): ``Var FN, Var TP``.
    Returns the bias (K, M) to subtract; precision and accuracy are linear, so zero. The
    correction is skipped where the measure's denominator has a coefficient of variation above
    0.3 (tiny samples), where the expansion does not hold.
    """
    v_fn, v_tp = var_r[:, 0], var_r[:, 1]
    K = TP + FP
    dens = [TP + FN, TN + FP, TP + FP, TP + K + FN, TP + FP + FN + TN]
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.stack(
            [
                (-2 * FN * v_tp + 2 * TP * v_fn) / dens[0] ** 3,
                (2 * TN * v_tp - 2 * FP * v_fn) / dens[1] ** 3,
                np.zeros_like(TP),
                (-4 * (K + FN) * v_tp + 4 * TP * v_fn) / dens[3] ** 3,
                np.zeros_like(TP),
            ],
            axis=-1,
        )
        # the expansion is only valid when the denominator is well estimated (CV < 0.3)
        cv2 = np.stack([(v_tp + v_fn) / d**2 for d in dens], axis=-1)
    ok = np.isfinite(b) & (cv2 < 0.09)
    return 0.5 * np.where(ok, b, 0.0)


def element_variance(shares, v_shares, target, n_eff, values, smoothing):
    """Within-group element variance ``S^2`` of a discrete variable, for the variance estimator.

    A group (a stratum x rule-output cell, or a design stratum) holds labeled items whose
    linearised variable takes the value ``values[c]`` in category ``c`` (label 0/1, or the four
    cells TP/FP/FN/TN); ``shares`` are the design-weighted category shares, ``v_shares`` the
    shares weighted by ``v_j = (1 - pi_j) w_j^2`` (equal to ``shares`` under stratified SRS),
    ``n_eff`` the group's Kish size ``(sum w)^2 / sum w^2`` (its label count under stratified
    SRS).

    ``smoothing = 0`` is the textbook unbiased sample variance ``s^2 = n/(n-1) sum_c p_c (g_c -
    gbar)^2`` (for a 0/1 label ``n/(n-1) p(1-p)``); groups with
    ``n_eff <= 1`` (no degree of freedom) use ``target`` instead. ``smoothing = lam > 0``
    shrinks the shares by ``lam`` pseudo-items towards ``target`` and rescales::

        p~ = (n p + lam q) / (n + lam),   S~^2 = [sum_c p~_c (g_c - g~)^2] / (1 - n/(n + lam)^2)

    which is exactly unbiased for ``S^2`` when the group's true shares equal a fixed ``q`` (since
    ``E p~ = q`` and ``Var(sum p~ g) = n S^2/(n + lam)^2``), reduces to ``s^2`` as ``n`` grows,
    and is defined for every group, including groups whose labels are all 0 or all 1 (where
    ``s^2 = 0`` although the rate is not known to be 0: unbiased on average, but a Wald
    interval built on it collapses in most samples).

    Shapes: ``shares``, ``v_shares``, ``target`` (..., C); ``n_eff`` (...); ``values``
    broadcastable to (..., C). Returns (...).
    """
    n = n_eff[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        if smoothing > 0:
            p = (n * shares + smoothing * target) / (n + smoothing)
            pv = (n * v_shares + smoothing * target) / (n + smoothing)
            fac = 1.0 / (1.0 - n_eff / (n_eff + smoothing) ** 2)
        else:
            ok = n > 1
            p = np.where(ok, shares, target)
            pv = np.where(ok, v_shares, target)
            fac = np.where(n_eff > 1, n_eff / (n_eff - 1), 1.0)
        p = np.nan_to_num(p)
        pv = np.nan_to_num(pv)
        mean = (p * values).sum(-1)
        s2 = (pv * (values - mean[..., None]) ** 2).sum(-1)
    return np.maximum(s2, 0.0) * fac


def wilson_interval(p, n, z):
    p = np.clip(p, 0.0, 1.0)  # Poisson point estimates may leave [0, 1] slightly
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1 + z**2 / n
        centre = (p + z**2 / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
