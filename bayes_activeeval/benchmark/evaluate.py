"""Design-weighted estimates, variances and intervals of any number of rules."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from .._validation import (
    as_1d,
    check_count,
    check_level,
    check_rng,
)
from ..estimators import ConfidenceInterval, delta_method_bias
from .cells import (
    MEASURES,
    as_binary,
    cell_sums,
    element_variance,
    measures_and_grad,
    measures_hessian,
    pool_output_counts,
    rules_matrix,
    wilson_interval,
)
from .design import BenchmarkDesign, BenchmarkSample, stratum_guess
from .guidelines import weight_of
from .posterior import cell_posterior


def totals_bias(TP, FN, FP, TN, var_r):
    """Second-order (delta-method) bias of the measures of post-stratified totals.

    With ``FP = K − TP`` and ``TN = (N − K) − FN`` fixed by the known margins, every measure is
    a function of the two independently estimated totals ``TP`` (rule-positive cells) and ``FN``
    (rule-negative cells), which are unbiased, so ``E g(T̂) − g(T) ≈ ½ (g_TP,TP Var TP +
    g_FN,FN Var FN)`` (Cochran (1977), Sec. 6.8): :func:`~bayes_activeeval.estimators.
    delta_method_bias` with the closed-form Hessians of :func:`.cells.measures_hessian` and the
    diagonal covariance ``diag(Var TP, Var FN)``. ``var_r`` is (K, 2): ``Var FN, Var TP``.
    Returns the bias (K, M) to subtract; precision and accuracy are linear, so zero. The
    correction is skipped where the measure's denominator has a coefficient of variation above
    0.3 (tiny samples), where the expansion does not hold.
    """
    v_fn, v_tp = var_r[:, 0], var_r[:, 1]
    K = TP + FP
    dens = [TP + FN, TN + FP, TP + FP, TP + K + FN, TP + FP + FN + TN]
    S = np.zeros((*v_tp.shape, 2, 2))
    S[..., 0, 0] = v_tp
    S[..., 1, 1] = v_fn
    with np.errstate(divide="ignore", invalid="ignore"):
        b = delta_method_bias(measures_hessian(TP, FP, FN, TN), S)
        # the expansion is only valid when the denominator is well estimated (CV < 0.3)
        cv2 = np.stack([(v_tp + v_fn) / d**2 for d in dens], axis=-1)
    ok = np.isfinite(b) & (cv2 < 0.09)
    return np.where(ok, b, 0.0)


@dataclass(repr=False)
class BenchmarkEvaluation:
    """Estimates of sensitivity, specificity, precision, F1 and accuracy for many rules.

    Returned by :func:`evaluate`.

    Parameters
    ----------
    table : xarray.Dataset (rule, measure)
        The point estimates, standard errors, effective sizes, degrees of freedom and intervals.
    posterior : xarray.DataTree or None
        The Bayesian posterior of the measures per rule (``None`` when :func:`evaluate` was called
        with ``posterior=None``).
    cells : xarray.Dataset
        The labeled counts and weight sums (and pool counts when known) per cell.
    level : float
        The confidence level of the intervals in ``table``, in (0, 1).

    Attributes
    ----------
    table : xarray.Dataset (rule, measure)
        ``estimate``, ``stderr``, ``n_eff``, ``df`` (Satterthwaite) and the ``wald_low/high``,
        ``t_low/high``, ``wilson_low/high``
        intervals at ``level``; attrs record the estimator.
    posterior : xarray.DataTree or None
        Bayesian posterior of every measure per rule (group ``posterior``, variables named by
        measure, dims ``chain, draw, rule``).
    cells : xarray.Dataset
        Labeled counts, weight sums and pool margins per rule x stratum x output x label.
    level : float
    """

    table: xr.Dataset
    posterior: Any
    cells: xr.Dataset
    level: float

    @property
    def statistic(self) -> xr.DataArray:
        """Point estimates (rule, measure)."""
        return self.table["estimate"]

    @property
    def stderr(self) -> xr.DataArray:
        return self.table["stderr"]

    def confidence_interval(
        self, level: float | None = None, method: str = "wilson"
    ) -> ConfidenceInterval:
        """Wald, t or Wilson intervals (rule, measure) at any level (default: the one evaluated).

        ``"wald"``: ``estimate ± z SE``; ``"t"``: ``estimate ± t_df SE`` with the Satterthwaite
        degrees of freedom ``df`` of the variance estimate (Satterthwaite, 1946; see
        :func:`evaluate`); ``"wilson"``: Wilson's score interval with the effective sample size
        ``n_eff = p(1-p)/Var``.
        """
        lv = self.level if level is None else check_level(level)
        z = stats.norm.ppf(0.5 + lv / 2)
        est, se, ne = self.table["estimate"], self.table["stderr"], self.table["n_eff"]
        if method == "wald":
            return ConfidenceInterval((est - z * se).clip(0, 1), (est + z * se).clip(0, 1))
        if method == "t":
            df = self.table["df"].values
            tq = stats.t.ppf(0.5 + lv / 2, np.where(np.isfinite(df), df, 1e6))
            return ConfidenceInterval((est - tq * se).clip(0, 1), (est + tq * se).clip(0, 1))
        if method == "wilson":
            lo, hi = wilson_interval(est.values, ne.values, z)
            return ConfidenceInterval(est.copy(data=lo), est.copy(data=hi))
        raise ValueError(f"method must be 'wald', 't' or 'wilson', got {method!r}")

    def to_frame(self) -> pd.DataFrame:
        """Long table, one row per (rule, measure)."""
        return self.table.to_dataframe()

    def __repr__(self) -> str:
        K = self.table.sizes["rule"]
        head = self.table["estimate"].isel(rule=slice(0, 5)).to_pandas()
        post = "none" if self.posterior is None else self.posterior.attrs.get("method", "yes")
        return (
            f"BenchmarkEvaluation({K} rules, estimator={self.table.attrs['estimator']!r}, "
            f"level={self.level}, posterior={post})\n"
            + head.to_string(float_format=lambda v: f"{v:.4f}")
            + ("\n..." if K > 5 else "")
        )


def _ratio_cells(W, V, Ws, margins, m_t, ne, empty, sbar, lam):
    """Post-stratified cells under stratified sampling: Hajek rates ``theta`` and variance terms.

    Shapes: ``W``, ``V`` (K, H, r, y); ``Ws`` (K, H); ``margins``, ``ne``, ``empty`` (K, H, r);
    ``m_t`` (K, H, 1) the smoothing target, the stratum's rate with one pseudo-label at the pooled rate
    (:func:`_smoothing_target`); ``sbar`` (1, H, 1) the stratum's mean guess.
    Returns ``theta`` and ``Q = Var(N_hr theta_hr)`` (K, H, r).
    """
    Wc = W.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # an empty cell gets its stratum's mean guess times the rule output's lift over the
        # guess, estimated from the non-empty cells (a synthetic, model-assisted value):
        # lift_r = sum_h W_hr1 / sum_h sbar_h W_hr
        expect = np.where(empty, 0.0, sbar * Wc).sum(1)  # (K, r)
        seen = np.where(empty, 0.0, W[..., 1]).sum(1)
        lift = np.where(expect > 0, seen / expect, 1.0)
        theta_e = np.clip(sbar * lift[:, None, :], 0.0, 1.0)
        theta = np.where(empty, theta_e, W[..., 1] / Wc)
        # conditional variance of the post-stratified estimator, cell by cell:
        # Var(N_hr theta_hr) = (N_hr / W_hr)^2 V_hr S~^2_hr, which under stratified SRS is
        # N_hr^2 (1 - f_h) S~^2_hr / n_hr; an empty cell, whose rate is synthetic, is treated
        # as if estimated from its whole stratum.
        c = np.where(empty, margins / Ws[..., None], margins / Wc)
        Vc = np.where(empty, V.sum((-1, -2))[..., None], V.sum(-1))  # (K, H, r)
        tgt = np.stack([1 - m_t, m_t], axis=-1) * np.ones((1, 1, 2, 1))
        shares = np.nan_to_num(W / Wc[..., None])
        v_shares = np.nan_to_num(V / V.sum(-1, keepdims=True))
        s2 = element_variance(shares, v_shares, tgt, ne, np.array([0.0, 1.0]), lam)
        Q = np.where(margins > 0, np.nan_to_num(c**2 * Vc * s2), 0.0)
    return theta, Q


#: Pseudo-labels of the stratum's smoothing target towards the pooled rate.
_TARGET_PSEUDO = 1.0


def _pooled_rate(m_h, sizes):
    """The pool's estimated positive rate ``sum_h N_h m_h / N`` (K, 1), from the strata's rates."""
    sizes = np.asarray(sizes, dtype=float)
    return ((m_h * sizes).sum(-1) / sizes.sum())[..., None]


def _smoothing_target(rate, n_eff, pooled):
    """The variance smoothing's target: a stratum's rate with one pseudo-label at the pooled rate.

    ``(n_e m + kappa p) / (n_e + kappa)`` with ``m`` the stratum's (design-weighted) positive
    rate, ``n_e`` its Kish size (its label count under stratified sampling), ``p`` the pool's
    estimated rate ``sum_h N_h m_h / N`` and ``kappa = 1`` pseudo-label (shrinkage towards a
    pooled rate, as a Beta prior of one pseudo-label centred on it; compare Jeffreys'
    ``(k + 1/2)/(n + 1)``, Brown, Cai & DasGupta (2001), which puts the pseudo-label at 1/2 and
    doubled the interval width of specificity and accuracy with a calibrated guess). Without
    it a stratum whose labels are all 0 has ``m = 0`` and adds no variance at all, however large
    and sparsely sampled it is, so the intervals collapse when the guess under-rates the
    stratum: with an over-confident guess (logit doubled; prevalence 0.02, 500 labels, 2,000
    samples) 95% Wilson coverage of accuracy was 0.81 and of informative-rule sensitivity 0.85;
    with the pseudo-label 0.91-0.92 and 0.95, while a calibrated guess widens by at most 6%
    (``benchmarks/results/unknown_predictors_guess.md``). The pseudo-label vanishes against
    ``n_e`` as the stratum fills. For the
    intervals' variance only: the second-order bias correction uses the stratum's own rate.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return (n_eff * rate + _TARGET_PSEUDO * pooled) / (n_eff + _TARGET_PSEUDO)


def _difference_cells(W, V, Ws, margins, m_h, ne, empty, lam, floor=None):
    """Post-stratified cells under Poisson sampling: difference-estimator rates and variances.

    Inclusion probabilities vary inside a stratum and cell sizes are random, so the Hajek cell
    ratio carries an O(1/n_hr) size bias in small cells. Difference estimator per cell with the
    stratum's Hajek rate as working value ``m_h`` (Sarndal, Swensson & Wretman (1992),
    Sec. 6.3)::

        Y_hr = sum_{j in s_hr} w_j y_j + m_h (N_hr - sum_{j in s_hr} w_j),

    approximately unbiased for every cell, empty ones included (no synthetic rate needed), since
    ``E sum w y = Y_hr`` and ``E sum w = N_hr``. Shapes and returns as :func:`_ratio_cells`.
    ``floor``: ``(ne_h, t_h)``, the stratum's Kish size (K, H) and the pooled rate (K, 1), which
    floor the smoothing target by one pseudo-label (:func:`_smoothing_target`); ``None``: the
    stratum's own share is the target (unbiased for random rules; for the bias correction).
    """
    Wc = W.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        Y_hr = W[..., 1] + m_h * (margins - Wc)
        # a cell's value may leave [0, 1] (no labeled positive and weights over-shooting N_hr
        # give a negative count): that is what makes it unbiased, so it is kept
        theta = np.where(margins > 0, Y_hr / np.where(margins > 0, margins, 1.0), 0.0)
        # Horvitz-Thompson variance of the residuals y - m_h of the difference estimator,
        # sum_{j in s_hr} v_j (y_j - m_h)^2, with the v-weighted positive share shrunk by lam
        # pseudo-items towards the stratum's v-weighted share (unbiased when the cell's rate
        # equals its stratum's)
        Vd = V.sum(-1)  # (K, H, r)
        pv = np.nan_to_num(V[..., 1] / Vd)
        Vh = Vd.sum(-1, keepdims=True)
        pv_h = np.where(Vh > 0, V[..., 1].sum(-1, keepdims=True) / Vh, 0.0)
        # the smoothing target: the stratum's share, with one pseudo-label at the pooled rate
        # for the intervals' variance (floor)
        if floor is None:
            pv_t = pv_h
        else:
            pv_t = _smoothing_target(pv_h, floor[0][..., None], floor[1][..., None])
        pt = (ne * pv + lam * pv_t) / (ne + lam) if lam > 0 else pv
        e2 = pt * (1 - m_h) ** 2 + (1 - pt) * m_h**2
        # an empty cell's total N_hr m_h is estimated from its whole stratum:
        # (N_hr / W_h)^2 sum_{j in s_h} v_j (y_j - m_h)^2 (smoothed: the positive share is the
        # target's, so that a stratum of 0 labels still adds variance)
        p_e = (pv_t if lam > 0 else pv_h)[..., 0]
        e2_h = Vh[..., 0] * (p_e * (1 - m_h[..., 0]) ** 2 + (1 - p_e) * m_h[..., 0] ** 2)
        Q_e = (margins / np.where(Ws > 0, Ws, np.inf)[..., None]) ** 2 * e2_h[..., None]
        Q = np.where(margins > 0, np.nan_to_num(np.where(empty, Q_e, Vd * e2)), 0.0)
    return theta, Q


def _within_strata(W, W2, V, Ws, sizes, lam):
    """Labeled-items-only path: Hajek-within-strata totals, measures and linearised variance.

    ``T_c = sum_h (N_h / W_h) sum_{j in h, c} w_j`` for the four cells (pool items of strata
    with no label are spread by the overall cell shares); ``Var = sum_h a_h^2 V_h S~^2_h(G)``
    with the smoothing target being independence of rule output and label in the stratum.
    Shapes: ``W``, ``W2``, ``V`` (K, H, r, y); ``Ws`` (K, H); ``sizes`` (H,). Returns
    ``(vals, var, q2)``, each (K, M), ``q2`` the Satterthwaite denominator.
    """
    Kr, H = W.shape[0], W.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        a_h = np.where(Ws > 0, sizes[None, :] / Ws, 0.0)  # (K, H)
        missing = (sizes[None, :] * (Ws <= 0)).sum(-1)  # pool items in unsampled strata
        # (TP, FP, FN, TN) = (r1y1, r1y0, r0y1, r0y0)
        Wcell = W.reshape(Kr, H, 4)[..., [3, 2, 1, 0]]
        Vcell = V.reshape(Kr, H, 4)[..., [3, 2, 1, 0]]
        T = (a_h[..., None] * Wcell).sum(1)
        share = Wcell.sum(1) / Wcell.sum((1, 2))[:, None]
        T = T + missing[:, None] * share
        TP, FP, FN, TN = (T[:, i] for i in range(4))
        vals, G = measures_and_grad(TP, FP, FN, TN)  # G (K, M, 4)
        Vs = Vcell.sum(-1)
        ne = np.where(Ws > 0, Ws**2 / W2.sum((-1, -2)), 0.0)
        shares = np.nan_to_num(Wcell / Ws[..., None])
        v_shares = np.nan_to_num(Vcell / Vs[..., None])
        pr_ = shares[..., [0, 0, 2, 2]] + shares[..., [1, 1, 3, 3]]  # P(output) per cell
        py_ = shares[..., [0, 1, 0, 1]] + shares[..., [2, 3, 2, 3]]  # P(label) per cell
        tgt = pr_ * py_
        s2 = element_variance(
            shares[:, None], v_shares[:, None], tgt[:, None], ne[:, None], G[:, :, None], lam
        )  # (K, M, H)
        terms = (a_h**2 * Vs)[:, None, :] * np.nan_to_num(s2)  # (K, M, H)
        var = terms.sum(-1)
        q2 = (terms**2 / np.maximum(ne - 1.0, 1.0)[:, None, :]).sum(-1)
    return vals, var, q2


def evaluate(
    benchmark_labels: Any,
    rule_predictions: Any,
    design: Any,
    *,
    indices: Any = None,
    pool_margins: Any = None,
    level: float = 0.95,
    posterior: str | None = "conjugate",
    prior: Any = "guess",
    prior_strength: float = 2.0,
    finite_population: bool = True,
    draws: int = 1000,
    chains: int | None = None,
    tune: int = 1000,
    hierarchical: bool = True,
    bias_correction: bool = True,
    smoothing: float = 2.0,
    rng: Any = None,
) -> BenchmarkEvaluation:
    """Design-weighted estimates and Bayesian posteriors for any number of rules at once.

    **Frequentist** (design-based, post-stratified: Sarndal, Swensson & Wretman (1992), Sec. 7.6). Cells are stratum ``h`` x rule output ``r`` x
    label. When the rule's output is known on the whole pool (``rule_predictions`` over all
    ``N`` items, or ``pool_margins``), the estimator is *post-stratified*: the positive rate of
    each cell is the Hajek ratio ``theta_hr = sum w y / sum w`` over its labeled items and::

        TP = sum_h N_{h+} theta_{h+},  FN = sum_h N_{h-} theta_{h-},
        FP = K - TP,  TN = (N - K) - FN      (K = |S_R^+|, the paper's known rule margin)

    A cell with no labeled item (counted in ``collapsed_cells``) gets a synthetic rate: its
    stratum's mean guess times the rule output's lift over the guess in the non-empty cells,
    ``sum_h W_hr1 / sum_h sbar_h W_hr``. That lift is estimated from the labels on the rule's
    side, and when they hold no positive it is 0 and every empty cell on that side gets rate 0:
    then even a random rule with an exactly calibrated guess is biased low (precision −0.0100 on
    0.0305, z = −6.9, with 150 labels on three strata of rates 0.002 / 0.03 / 0.3,
    ``benchmarks/results/unknown_predictors_empty_cells.md``), which the minimum labels per
    stratum and larger budgets reduce. (Before session 31 this docstring called it exact for
    random rules with a calibrated guess.)

    Under **Poisson** sampling (``design.scheme == "poisson"``) the inclusion probability varies
    inside a stratum and the cell sizes are random, so a cell with one or two labels
    over-represents the items with the largest inclusion probability (the likely positives) and
    its Hajek ratio carries an O(1/n_hr) bias (+0.0015 on random-rule sensitivity of mean 0.052
    at prevalence 0.01 / 500 labels). Each cell total is then the *difference estimator* with
    the stratum's Hajek rate ``m_h = sum_{j in h} w_j y_j / sum_{j in h} w_j`` as working value
    (Sarndal, Swensson & Wretman (1992), Sec. 6.3)::

        Y_hr = sum_{j in s_hr} w_j y_j + m_h (N_hr - sum_{j in s_hr} w_j)

    unbiased for every cell up to the O(1/n_h) error of the stratum's ``m_h`` (since ``E sum w y
    = Y_hr`` and ``E sum w = N_hr``), including empty cells, which get ``m_h`` and need no
    synthetic rate. (Treating the realised sample of a stratum as a simple random sample,
    weights ``N_h / n_h``, is not an option here: it ignores the unequal inclusion
    probabilities inside the stratum and biases precision by +0.004 for random and +0.07 for
    informative rules in that setting.) Otherwise (the rule was only run on the labeled items) the four cells are estimated per stratum,
    ``T_c = sum_h (N_h / sum_{j in h} w_j) sum_{j in h, c} w_j`` (Hajek within strata, which
    equals Horvitz-Thompson under stratified sampling). The measures are ratios of these totals:
    sensitivity ``TP/(TP+FN)``, specificity ``TN/(TN+FP)``, precision ``TP/(TP+FP)``, F1
    ``2TP/(2TP+FP+FN)``, accuracy ``(TP+TN)/N``.

    Variance by linearisation, the same estimator on both paths. With ``G`` the gradient of a
    measure in the estimated totals, the variance is a sum over groups ``g`` of labeled items —
    the cells ``(h, r)`` (post-stratified) or the design strata ``h`` (Hajek) — of::

        Var = sum_g G_g^2 (N_g / W_g)^2 V_g S~^2_g,    V_g = sum_{j in g} (1 - pi_j) w_j^2,

    ``W_g = sum_{j in g} w_j``; ``S~^2_g`` estimates the element variance of the group's
    linearised variable (the label, or the item's cell gradient ``G_c``). Under stratified SRS
    this is the conditional variance of the post-stratified estimator, ``sum_h N_hr^2 (1 -
    f_h) s^2_hr / n_hr`` — for a 0/1 label ``V(TP) = sum_h N_h+^2 (1 -
    n_h+/N_h+) p_h+(1 - p_h+)/(n_h+ - 1)``, with the design stratum's finite-population
    correction (conditional post-stratification variance, Sarndal, Swensson & Wretman (1992),
    Sec. 7.6). Under Poisson sampling the cell term is the Horvitz-Thompson variance of the
    difference estimator's residuals, ``sum_{j in s_hr} (1 - pi_j) w_j^2 (y_j - m_h)^2``
    (Sarndal et al. (1992), Sec. 6.3), with the cell's ``v``-weighted positive share shrunk by
    ``smoothing`` pseudo-items towards its stratum's (unbiased when the cell's rate equals the
    stratum's); on the labeled-items-only path the Horvitz-Thompson form ``sum_j (1 - pi_j)
    (z_j / pi_j)^2`` of the linearised residuals. With ``smoothing=0`` ``S~^2`` is the textbook
    ``s^2 = n/(n-1) p(1-p)`` (unbiased; cells with at most one label use their stratum's rate);
    with ``smoothing=lam > 0`` (default 2) the shares are shrunk by ``lam`` pseudo-labels towards
    the stratum's rate and rescaled by ``1/(1 - n/(n+lam)^2)`` (see :func:`element_variance`):
    still unbiased when a cell's rate equals its stratum's (every random rule) and
    equal to ``s^2`` as cells grow, but defined and non-zero for cells whose few labels are all
    0 — where ``s^2 = 0`` is unbiased only on average and makes the interval collapse in most
    samples of a rare-positive rule. (The previous version replaced the variance of *every*
    pure cell by a collapsed-strata rate, Cochran Sec. 5A.12, which is conservative: it adds a
    positive term exactly when ``s^2 = 0``, inflating the variance by up to 1.9x and pushing
    95% coverage of random rules to 0.98-0.99.) An empty cell (whose rate is synthetic) is
    treated as estimated from its whole stratum.

    The Satterthwaite (1946) degrees of freedom of ``Var``, ``df = Var^2 / sum_g T_g^2 /
    (n_g - 1)`` with ``T_g`` the group's term, are reported and give ``t`` intervals.

    Intervals: Wald ``estimate ± z SE``; ``t``: ``estimate ± t_df SE``; and Wilson's score
    interval computed with an effective sample size ``n_eff = p(1-p)/Var`` (the design-effect
    adjustment of Korn & Graubard, 1998); when the estimated variance is zero (``p`` of 0 or 1)
    ``n_eff`` falls back to Kish's ``(sum w)^2 / sum w^2`` over the labeled items in the
    measure's denominator. Wilson keeps width where Wald collapses. All are
    clipped to [0, 1]. A census (every item of every stratum labeled, e.g. ``budget`` equal to
    the pool size) has variance exactly 0 by the finite-population correction and exact
    estimates: every interval is then the point itself (``n_eff = inf``).

    Point estimates: the post-stratified ratio above, with (``bias_correction=True``) the
    second-order delta-method correction of the ratio measures (sensitivity, specificity, F1;
    Cochran (1977), Sec. 6.8), computed with the same variance except for the pooled floor of
    the smoothing target (the correction uses the stratum's own rate, unbiased for random rules;
    the floor, conservative where a stratum's labels are all 0, biased random-rule sensitivity
    upwards by +0.0006 to +0.0013 under Poisson sampling at 0.01 / 500); precision and accuracy are
    linear in the estimated totals and not corrected. Under Poisson sampling the point
    estimates are *not* clipped to [0, 1]: the difference estimator is unbiased because a cell
    with no labeled positive (and, for a rare rule, a whole total) can fall below 0, and
    clipping biased random-rule sensitivity by +0.0013 (+0.0004 unclipped) at prevalence
    0.01 / 500 labels; the intervals are clipped (Wilson's uses the clipped estimate).

    **Bayesian**. ``posterior="conjugate"``: per rule, cell
    ``theta_hr ~ Beta(a_h + k_hr, b_h + n_hr - k_hr)`` drawn with NumPy (exact), with prior
    ``prior="guess"`` (mean = the stratum's mean guess, strength ``prior_strength``: shrinks
    sparse cells towards the guess — the paper's base-rate imputation as a prior mean rather
    than an assumption), ``"jeffreys"``, ``"uniform"`` or ``(a0, b0)`` (pseudo-counts of label 1
    and label 0). Post-stratified to the pool: with
    ``finite_population=True`` the unlabeled part of each cell is drawn as
    ``Binomial(N_hr - n_hr, theta_hr)`` and added to the labeled counts (the paper's finite-pool
    targets, Eqs. 3.1-3.3); otherwise ``N_hr theta_hr``. Without pool margins the model is a
    Dirichlet over the four cells per stratum, weighted by ``N_h``, with prior ``(b0, a0, b0,
    a0)`` on ``(r0y0, r0y1, r1y0, r1y1)`` (so the positive rate given either rule output is
    ``Beta(a0, b0)`` a priori, as in the Beta model). That labeled-only posterior
    **under-covers** (its credible intervals are too narrow, notably for random rules) and
    :func:`evaluate` warns when it is used: pass ``pool_margins`` (or the predictions on the
    whole pool) for calibrated posterior intervals. ``posterior="pymc"``: the hierarchical logit model (``logit theta_hr = o_h + b0 + s_h +
    (gamma + d_h)[r=+]``, ``o_h`` = logit of the stratum's mean guess; partial pooling across
    strata through ``sigma_s``, ``sigma_d``) sampled by NUTS, for a handful of rules;
    ``hierarchical=False`` gives the conjugate model in PyMC (a cross-check). Under Poisson
    sampling the inclusion probability varies inside a stratum, so the cell likelihoods use
    weighted pseudo-counts (Kish effective size ``n``, ``k = n theta_hat``) rather than the raw
    counts — a pseudo-likelihood, as in Marchant & Rubinstein (2021), App. H.

    Parameters
    ----------
    benchmark_labels : array-like (m,) of {0, 1}, or callable
        Labels of the sampled items, in the order of ``design.indices``; or a labeler called
        with those indices.
    rule_predictions : array-like (K, N) or (K, m) or (N,), mapping name -> array/callable, or
        callable / sequence of callables
        0/1 outputs of the rules on the whole pool (best: enables post-stratification) or on the
        labeled items only. A callable receives item indices (all pool items) and returns
        outputs.
    design : BenchmarkSample, BenchmarkDesign or LazyBenchmarkDesign
        The sample drawn (or the design plus ``indices=``; any design with ``sample_at`` and
        ``n_items``, such as the lazy design of a pool on dask).
    indices : array-like, optional
        Labeled items, when ``design`` is a design rather than a sample.
    pool_margins : array-like (K, H), optional
        Number of pool items per stratum each rule calls positive; lets post-stratification
        work with predictions on the labeled items only. Whole counts in ``[0, N_h]``, at
        least the labeled items the rule calls positive in the stratum and at most ``N_h``
        minus those it calls negative; with predictions on the whole pool they must equal
        the counts of those predictions (they are redundant then).
    level : float
        Confidence level of the intervals in the table.
    posterior : {"conjugate", "pymc", None}
    prior : {"guess", "jeffreys", "uniform"} or (a0, b0)
        ``(a0, b0)``: pseudo-counts of label 1 and label 0 of every cell's positive rate.
    prior_strength : float
        Strength of the ``"guess"`` prior (pseudo-labels per cell).
    finite_population : bool
        Posterior of the pool's own counts (True) or of the superpopulation rates.
    draws, chains, tune : int
        Posterior draws (per chain); chains (at least 1) default 1 (conjugate) or 2 (PyMC);
        NUTS tuning.
    hierarchical : bool
        PyMC only: hierarchical (default) or the conjugate Beta model.
    bias_correction : bool
        Subtract the second-order bias of the ratio measures (Cochran (1977), Sec. 6.8);
        post-stratified path only.
    smoothing : float
        Pseudo-labels ``lam`` of the variance estimator's shrinkage towards the stratum rate
        (``0`` = the textbook ``s^2``).
    rng : None, int or Generator

    Returns
    -------
    BenchmarkEvaluation

    Raises
    ------
    ValueError
        If a stratified design gives a non-empty stratum no labels (inclusion probability 0;
        see :func:`design`'s ``min_per_stratum``), or ``pool_margins`` is malformed or
        impossible. A non-empty stratum that holds no label in this sample (Poisson, or a
        partial labeling) gives a ``UserWarning``, as does the labeled-only posterior.
    """
    lv = check_level(level)
    rng = check_rng(rng)
    if posterior not in ("conjugate", "pymc", None):
        raise ValueError(f"posterior must be 'conjugate', 'pymc' or None, got {posterior!r}")
    lam = weight_of(smoothing, "smoothing")
    if chains is not None:
        chains = check_count(chains, "chains")
    sample, y = _labeled_sample(design, indices, benchmark_labels)
    cs = weighted_cells(sample, y, rule_predictions, pool_margins)
    _check_unlabeled_strata(sample.design, cs.n_h)
    est = design_estimate(cs, sample.design, lam, bias_correction)
    table = interval_table(est, cs, lv)
    table.attrs.update(
        {
            "scheme": sample.design.scheme,
            "n_labels": len(sample),
            "pool_size": sample.design.n_items,
            "smoothing": lam,
            "bias_correction": int(bool(bias_correction and cs.margins is not None)),
        }
    )
    post = None
    if posterior is not None:
        post = cell_posterior(
            cs.count,
            cs.weight,
            cs.weight_sq,
            cs.margins,
            sample.design,
            cs.names,
            method=posterior,
            prior=prior,
            prior_strength=prior_strength,
            finite_population=finite_population,
            draws=check_count(draws, "draws"),
            chains=chains,
            tune=check_count(tune, "tune", minimum=0),
            hierarchical=hierarchical,
            rng=rng,
        )
    return BenchmarkEvaluation(table=table, posterior=post, cells=cs.to_dataset(), level=lv)


# ------------------------------------------------------------------------------------------------
# the steps of evaluate: labeled sample -> weighted cells -> estimate and variance -> intervals
# ------------------------------------------------------------------------------------------------
def _labeled_sample(design, indices, benchmark_labels) -> tuple[BenchmarkSample, np.ndarray]:
    """The sample (from a sample, or a design plus ``indices``) and its 0/1 labels."""
    if isinstance(design, BenchmarkSample):
        sample = design
        if indices is not None:
            raise ValueError("pass indices= only with a BenchmarkDesign, not with a sample")
    elif isinstance(design, BenchmarkDesign) or (
        callable(getattr(design, "sample_at", None)) and hasattr(design, "n_items")
    ):  # an in-memory design or one duck-typed like it (LazyBenchmarkDesign)
        if indices is None:
            raise ValueError(
                f"design is a {type(design).__name__}: pass the labeled items as indices="
            )
        idx = as_1d(indices, "indices")
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= design.n_items):
            raise ValueError(
                f"indices must be in [0, {design.n_items}), got {idx.min()}..{idx.max()}"
            )
        if np.unique(idx).size != idx.size:
            raise ValueError("indices contains repeated items; each item is labeled once")
        sample = design.sample_at(idx)
    else:
        raise TypeError(
            f"design must be a BenchmarkSample (from BenchmarkDesign.sample) or a "
            f"BenchmarkDesign / LazyBenchmarkDesign, got {type(design).__name__}"
        )
    m = len(sample)
    if m == 0:
        raise ValueError("the sample is empty: nothing was labeled")
    if callable(benchmark_labels):
        benchmark_labels = benchmark_labels(sample.indices)
    y = as_binary(benchmark_labels, "benchmark_labels")
    if y.size != m:
        raise ValueError(f"benchmark_labels has {y.size} entries but {m} items were sampled")
    return sample, y


def _check_unlabeled_strata(dsg, n_h: np.ndarray) -> None:
    """Refuse a stratified design that never samples a non-empty stratum; warn when a non-empty
    stratum has no label in this sample.

    A stratified design with ``allocation[h] = 0`` gives the items of stratum ``h`` inclusion
    probability 0: no design-based estimate can account for the positives they hold, and the
    synthetic (guess-based) rates that fill the stratum in would be reported with intervals
    that ignore it (and under-cover). A stratum that
    could have been sampled but holds no label here (a Poisson sample by chance, or labels
    given for only part of a stratified sample) is filled in the same way, so it is warned.
    """
    sizes = np.asarray(dsg.stratum_sizes)
    alloc = np.asarray(dsg.allocation)
    never = np.flatnonzero((sizes > 0) & (alloc <= 0))
    if dsg.scheme == "stratified" and never.size:
        h = never[0]
        raise ValueError(
            f"the design gives stratum {h} ({int(sizes[h])} pool items) no labels "
            f"(allocation[{h}] = 0), so its items have inclusion probability 0 and no estimate "
            "can account for them; make the design with min_per_stratum >= 1"
        )
    empty = np.flatnonzero((sizes > 0) & (np.asarray(n_h) == 0))
    if empty.size:
        warnings.warn(
            f"strata {empty.tolist()} ({int(sizes[empty].sum())} pool items) have no labeled "
            "item in this sample: their counts are filled in without a label of their own "
            "(from the guess, the other strata, or as no positives) and the intervals do not "
            "include that uncertainty",
            UserWarning,
            stacklevel=3,
        )


@dataclass(frozen=True)
class WeightedCells:
    """Labeled counts and weight sums per rule x stratum x rule output x label.

    ``count``, ``weight`` (``Σ w``), ``weight_sq`` (``Σ w²``) and ``v`` (``Σ (1 − π) w²``, the
    Horvitz-Thompson variance factor) are (K, H, 2, 2), indexed ``[rule, stratum, output,
    label]``; ``margins`` (K, H, 2) the pool counts of each rule output per stratum, or None when
    the rules are only known on the labeled items; ``n_h`` (H,) labels per stratum.
    """

    names: list
    count: np.ndarray
    weight: np.ndarray
    weight_sq: np.ndarray
    v: np.ndarray
    margins: np.ndarray | None
    n_h: np.ndarray

    def to_dataset(self) -> xr.Dataset:
        H = self.count.shape[1]
        cdims = ("rule", "stratum", "output", "label")
        ccoords = {"rule": self.names, "stratum": np.arange(H), "output": [0, 1], "label": [0, 1]}
        cells = xr.Dataset(
            {
                "count": (cdims, self.count),
                "weight": (cdims, self.weight),
                "weight_sq": (cdims, self.weight_sq),
            },
            coords=ccoords,
        )
        if self.margins is not None:
            cells["pool_count"] = (("rule", "stratum", "output"), self.margins)
        return cells


def weighted_cells(
    sample: BenchmarkSample, y, rule_predictions, pool_margins=None
) -> WeightedCells:
    """Step 1 of :func:`evaluate`: the design-weighted cell sums of every rule."""
    dsg = sample.design
    N, H, m = dsg.n_items, dsg.n_strata, len(sample)
    names, P = rules_matrix(rule_predictions, N, m)
    Kr = P.shape[0]
    sizes = np.asarray(dsg.stratum_sizes)
    pm_ = None if pool_margins is None else _check_pool_margins(pool_margins, Kr, sizes)
    if P.shape[1] == N:
        margins = pool_output_counts(P, dsg.strata, H)
        Ps = P[:, sample.indices]
        if pm_ is not None:
            # the pool-wide predictions fix the margins: pool_margins may only repeat them
            bad = np.argwhere(pm_ != margins[..., 1])
            if bad.size:
                k, h = bad[0]
                raise ValueError(
                    f"pool_margins[{k}, {h}] = {_show(pm_[k, h])} contradicts rule_predictions, "
                    f"given on the whole pool, which call {int(margins[k, h, 1])} items of "
                    f"stratum {h} positive; pass pool_margins only with predictions on the "
                    "labeled items"
                )
    else:
        Ps = P
        margins = None if pm_ is None else np.stack([sizes[None, :] - pm_, pm_], axis=-1)
    hs = sample.strata
    w = sample.weights
    n_h = np.bincount(hs, minlength=H)
    # v_j = (1 - pi_j) w_j^2: per-item factor of the Horvitz-Thompson / stratified variance
    v = (1 - sample.inclusion) * w**2
    C = cell_sums(Ps, y, hs, H, np.stack([np.ones(m), w, w**2, v]))
    cnt = np.rint(C[:, 0])  # (K, H, r, y); the r = 0 sums are totals minus r = 1 sums,
    nz = cnt > 0  # so clean the rounding residue of empty cells
    if pm_ is not None and P.shape[1] != N:
        # a margin below the labeled items of that output is impossible: the labeled items
        # are pool items
        n_r = cnt.sum(-1)  # (K, H, r) labeled items per stratum and rule output
        for r, what in ((1, "positive"), (0, "negative")):
            bad = np.argwhere(margins[..., r] < n_r[..., r])
            if bad.size:
                k, h = bad[0]
                raise ValueError(
                    f"pool_margins[{k}, {h}] = {_show(pm_[k, h])} is impossible: rule {k} calls "
                    f"{int(n_r[k, h, r])} labeled items of stratum {h} {what}, so its pool "
                    f"margin must be between {int(n_r[k, h, 1])} and "
                    f"{int(sizes[h] - n_r[k, h, 0])}"
                )
    W, W2, V = (np.where(nz, np.maximum(C[:, i], 0.0), 0.0) for i in (1, 2, 3))
    return WeightedCells(names, cnt, W, W2, V, margins, n_h)


def _show(v) -> str:
    v = float(v)
    return repr(int(v)) if v.is_integer() else repr(v)


def _check_pool_margins(pool_margins, Kr: int, sizes: np.ndarray) -> np.ndarray:
    """``pool_margins`` as a float (K, H) array of whole counts in ``[0, N_h]``; the error
    names the first bad position and its value."""
    try:
        pm_ = np.asarray(pool_margins, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"pool_margins must hold counts, got {pool_margins!r}") from exc
    H = sizes.size
    if pm_.shape != (Kr, H):
        raise ValueError(
            f"pool_margins must have shape (rules, strata) = {(Kr, H)}, got {pm_.shape}"
        )
    checks = (
        (~np.isfinite(pm_), "expected a finite count"),
        ((pm_ < 0) | (pm_ > sizes[None, :]), None),
        (pm_ != np.round(pm_), "expected a whole number of pool items"),
    )
    for bad_mask, why in checks:
        bad = np.argwhere(bad_mask)
        if bad.size:
            k, h = bad[0]
            why = why or f"expected a count between 0 and the stratum size {int(sizes[h])}"
            raise ValueError(f"pool_margins[{k}, {h}] = {_show(pm_[k, h])}; {why}")
    return pm_


@dataclass(frozen=True)
class DesignEstimate:
    """Step 2 of :func:`evaluate`: point estimates ``vals`` (K, M), their linearised variance
    ``var`` and its Satterthwaite denominator ``q2``, the collapsed (empty) cells per rule, the
    estimator's name and whether the sample is a census (every stratum labeled in full, so the
    finite-population correction makes the variance exactly 0 and the estimates exact)."""

    vals: np.ndarray
    var: np.ndarray
    q2: np.ndarray
    collapsed: np.ndarray
    estimator: str
    census: bool = False


def design_estimate(
    cs: WeightedCells, dsg: BenchmarkDesign, lam: float, bias_correction: bool
) -> DesignEstimate:
    """Step 2 of :func:`evaluate`: the design-weighted estimate and its variance.

    Post-stratified (stratum x rule output) when the rules' pool margins are known, Hajek within
    strata otherwise; see :func:`evaluate` for the formulas.
    """
    W, W2, V, margins = cs.weight, cs.weight_sq, cs.v, cs.margins
    Kr = W.shape[0]
    Ws = W.sum(axis=(-1, -2))  # (K, H) stratum weight sums (same for every rule)
    # a census: every item of every stratum labeled with certainty (f_h = 1; under Poisson
    # sampling only if every pi_i = 1: a Poisson sample that happens to hold every item still
    # weights its labels by 1/pi_i and is not exact)
    census = bool(np.all(cs.n_h >= np.asarray(dsg.stratum_sizes)))
    if census and dsg.scheme == "poisson":
        census = bool(np.all(np.asarray(dsg.inclusion) >= 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        if margins is None:
            sizes = dsg.stratum_sizes.astype(float)
            vals, var, q2 = _within_strata(W, W2, V, Ws, sizes, lam)
            return DesignEstimate(
                vals, var, q2, np.zeros(Kr, dtype=int), "Hajek within strata", census
            )
        Wc = W.sum(-1)
        empty = Wc <= 0
        poisson = dsg.scheme == "poisson"
        # the stratum's Hajek positive rate (K, H, 1): the Poisson difference estimator's
        # working value m_h; with one pseudo-label at the pooled rate, the variance's smoothing target
        m_h = np.where(Ws > 0, W[..., 1].sum(-1) / Ws, 0.0)[..., None]
        ne = np.where(empty, 0.0, Wc**2 / W2.sum(-1))  # Kish size of each cell
        ne_h = np.where(Ws > 0, Ws**2 / W2.sum((-1, -2)), 0.0)  # and of each stratum (K, H)
        sg = stratum_guess(dsg)
        t_h = _pooled_rate(m_h[..., 0], dsg.stratum_sizes)  # (K, 1)
        # Q: the cells' variance for the intervals, smoothed towards the stratum's rate floored
        # by one pseudo-label at the pooled rate; Q_b: the same smoothed towards the stratum's
        # own rate (unbiased when a cell's rate is its stratum's, as for every random rule), for
        # the second-order bias correction. The floor is conservative in strata whose labels
        # are all 0 and more so for small cells (a rule-positive cell gets more of it than the
        # rule-negative cell of its stratum), so fed into the correction it biased random-rule
        # sensitivity by +0.0006 to +0.0013 (Poisson, prevalence 0.01, 500 labels).
        sbar = sg[None, :, None]

        def cells(floored):
            if poisson:
                fl = (ne_h, t_h) if floored else None
                return _difference_cells(W, V, Ws, margins, m_h, ne, empty, lam, fl)
            m_t = _smoothing_target(m_h, ne_h[..., None], t_h[..., None]) if floored else m_h
            return _ratio_cells(W, V, Ws, margins, m_t, ne, empty, sbar, lam)

        theta, Q = cells(True)
        TP = (margins[..., 1] * theta[..., 1]).sum(-1)
        FN = (margins[..., 0] * theta[..., 0]).sum(-1)
        FP = margins[..., 1].sum(-1) - TP
        TN = margins[..., 0].sum(-1) - FN
        vals, G = measures_and_grad(TP, FP, FN, TN)
        Gr = np.stack([G[..., 2] - G[..., 3], G[..., 0] - G[..., 1]], axis=-1)  # (K, M, r)
        var = np.einsum("kmr,khr->km", Gr**2, Q)
        # Satterthwaite degrees of freedom of var: a cell's term has n_e - 1 d.f.; an
        # empty cell's (estimated from its stratum) n_h - 1
        n_hs = np.broadcast_to(cs.n_h[None, :, None].astype(float), Q.shape)
        nu = np.maximum(np.where(empty, n_hs, ne) - 1.0, 1.0)
        q2 = np.einsum("kmr,khr->km", Gr**4, Q**2 / nu)
        if bias_correction:
            Q_b = cells(False)[1]
            vals = vals - totals_bias(TP, FN, FP, TN, Q_b.sum(1))
            # Poisson: the difference estimator is unbiased because a cell (and, for a rare
            # rule, a total) may fall below 0; clipping to [0, 1] biases the estimates of
            # rare rules upwards (random-rule sensitivity at 0.01 / 500: +0.0013 clipped,
            # +0.0004 unclipped), so only the intervals are clipped
            if not poisson:
                vals = np.clip(vals, 0.0, 1.0)
        n_collapsed = (empty & (margins > 0)).sum(axis=(-1, -2))
    return DesignEstimate(
        vals, var, q2, n_collapsed, "post-stratified (stratum x rule output)", census
    )


#: Cells (rule output, label) in each measure's denominator, for its Kish effective size.
_DENOMINATOR_CELLS = {
    "sensitivity": [(0, 1), (1, 1)],
    "specificity": [(0, 0), (1, 0)],
    "precision": [(1, 1), (1, 0)],
    "f1": [(1, 1), (1, 0), (0, 1)],
    "accuracy": [(0, 0), (0, 1), (1, 0), (1, 1)],
}


def interval_table(est: DesignEstimate, cs: WeightedCells, level: float) -> xr.Dataset:
    """Step 3 of :func:`evaluate`: standard errors, Satterthwaite d.f., effective sizes and the
    Wald, t and Wilson intervals (rule, measure) at ``level``."""
    vals, var, q2 = est.vals, est.var, est.q2
    with np.errstate(divide="ignore", invalid="ignore"):
        # Kish effective sizes of each measure's denominator
        Wry = cs.weight.sum(1)  # (K, r, y)
        W2ry = cs.weight_sq.sum(1)
        kish = np.stack(
            [
                sum(Wry[:, r, yy] for r, yy in _DENOMINATOR_CELLS[mm]) ** 2
                / sum(W2ry[:, r, yy] for r, yy in _DENOMINATOR_CELLS[mm])
                for mm in MEASURES
            ],
            axis=-1,
        )
        kish = np.where(np.isfinite(kish), kish, 0.0)
        var = np.maximum(var, 0.0)
        defined = np.isfinite(vals)
        pq = vals * (1 - vals)
        n_eff = np.where((var > 0) & (pq > 0), pq / var, kish)
        if est.census:
            # every item labeled: the estimates are the pool's values, the variance is exactly
            # 0 by the finite-population correction, and every interval is the point itself
            # (n_eff = inf makes Wilson's interval the point; Kish's fallback would not)
            var = np.zeros_like(var)
            n_eff = np.full_like(n_eff, np.inf)
        se = np.sqrt(var)
        n_eff = np.where(defined & (n_eff > 0), n_eff, np.nan)
        se = np.where(defined, se, np.nan)
        df = np.where(q2 > 0, var**2 / q2, np.inf)
        df = np.where(defined, np.maximum(df, 1.0), np.nan)
        z = stats.norm.ppf(0.5 + level / 2)
        wl, wh = np.clip(vals - z * se, 0, 1), np.clip(vals + z * se, 0, 1)
        tq = stats.t.ppf(0.5 + level / 2, np.where(np.isfinite(df), df, 1e6))
        tl, th = np.clip(vals - tq * se, 0, 1), np.clip(vals + tq * se, 0, 1)
        sl, sh = wilson_interval(vals, n_eff, z)
    coords = {"rule": cs.names, "measure": list(MEASURES)}
    dims = ("rule", "measure")
    return xr.Dataset(
        {
            "estimate": (dims, vals),
            "stderr": (dims, se),
            "n_eff": (dims, n_eff),
            "wald_low": (dims, wl),
            "wald_high": (dims, wh),
            "df": (dims, df),
            "t_low": (dims, tl),
            "t_high": (dims, th),
            "wilson_low": (dims, sl),
            "wilson_high": (dims, sh),
            "collapsed_cells": (("rule",), est.collapsed),
        },
        coords=coords,
        attrs={"estimator": est.estimator, "level": level},
    )
