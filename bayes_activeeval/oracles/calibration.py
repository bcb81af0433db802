"""Bayesian calibration of a model's scores: an oracle model for uncalibrated or stale scores.

SVM margins, scores of a model trained on another population and probabilities whose base rate
has drifted order the items well but say little about ``P(y = 1 | x)``. This oracle model learns
the map from score to probability from the labels gathered so far: a hierarchical logistic
regression of the label on the (centred) logit of the model's probability — or on the raw score —
with random effects for score strata::

    η(x) = c + b · (x − x̄) + σ z_{h(x)},   b = exp(β),   P(y = 1 | x) = expit(η(x))
    c ~ Normal(x̄, s_c),   β ~ Normal(0, s_β),   σ ~ HalfNormal(s_σ),   z_h ~ Normal(0, 1)

(non-centred stratum effects; ``b > 0`` keeps the map increasing; the prior is centred on the
identity map ``η = x``, i.e. on the model's own probabilities). This is Platt scaling
(Platt 1999) made Bayesian, with a stratum-wise correction for curvature the logistic map misses.

The identity map is a sensible prior centre only for a feature on the log-odds scale. A raw score
(``feature="score"``: SVM margins, ranking scores, counts) has an arbitrary scale: the same ranking
on a scale 10,000 times larger needs a slope ``b`` of ``1e-4``, nine prior standard deviations of
``β`` away, and the prior wins over a few hundred labels. A raw score is therefore *standardized*
before the fit, ``x = (s − m) / d`` with the median ``m`` and ``d = IQR / 1.349`` (a robust
standard deviation; the standard deviation where over half the scores tie, 1 where all do), so
that the prior reads "one robust standard deviation of the score is about one logit" — weakly
informative priors on standardized inputs (Gelman, Jakulin, Pittau & Su (2008), Ann. Appl. Stat.
2(4)). The fit then does not depend on the units of the score: only the pivot ``x̄`` still does,
through its weights, the model's own ``expit(s)`` (for a pool with probabilities, none of it).
``coef_``, ``coef_stderr`` and the ``a``, ``b`` of :meth:`posterior` are mapped back to the raw
score. The log-odds feature (``feature="logit"``) is used as it is.

Optionally the map has asymptotes (Copas (1988), the contaminated logistic model): a share
``λ_0`` of the labels are positive and a share ``λ_1`` negative whatever the score, so that
``P(y = 1 | x) = λ_0 + (1 − λ_0 − λ_1) expit(η(x))``, with a Dirichlet prior on
``(λ_0, λ_1, 1 − λ_0 − λ_1)``. A logistic map alone goes to 0 and 1 exponentially in the score
and is therefore certain — probabilities of ``1e-9`` — about labels that noise, typos or a
plateau of the classifier's precision below 1 make merely rare; the asymptotes keep the belief
as uncertain there as the labels allow (``lower_asymptote``, ``upper_asymptote``).

How the importance-weighted labels enter the likelihood
-------------------------------------------------------
*Deterministic oracle* (each item has one label): the labeled items are a sample of the pool
whose selection depends only on the items' scores, strata and on labels already observed — never
on the unobserved labels themselves. The selection is therefore *missing at random* given the
covariates the model conditions on, and the conditional likelihood ``Π p(y_i | x_i)`` of the
labeled items is the correct likelihood of the calibration parameters (Rubin 1976; the same
ignorability argument as Marchant & Rubinstein (2021), Sec. 4.2). Weighting by ``p/q`` would only
add variance. Each item enters once, however often it was drawn.

*Stochastic oracle* (each draw has a fresh label): the draws enter a weighted pseudo-likelihood
``Σ_j w̃_j log p(y_j | x_j)`` with ``w̃_j = w_j n / Σ w`` (``w = p/q``, normalized to the number of
draws), as in Marchant & Rubinstein (2021), App. H. Under a correctly specified model this targets
the same parameters as the unweighted likelihood; when the logistic form is only approximate, the
weighted version targets the best approximation *on the pool* (the ``p``-weighted KL projection)
rather than on the proposal ``q``, which is what the belief is used for. The price is a larger
posterior spread when the weights vary.

Inference: a MAP fit (trust-region Newton on the exact log posterior, analytic gradient and
Hessian) with a Laplace approximation runs in the inner loop. :meth:`CalibrationOracle.belief`
returns either the plug-in ``expit(η̂(x))`` at the posterior mode (``predictive="map"``, the
default) or the posterior predictive ``E[expit(η(x)) | labels]`` (``predictive="mean"``) from the
Laplace approximation corrected by importance sampling. The probit approximation
``expit(m / sqrt(1 + π v / 8))`` (MacKay 1992) is *not* used: with rare positives most items sit
far in the lower tail, where it overstates ``P(y = 1)`` by orders of magnitude. The default is
the mode, as the Dirichlet-tree model's deterministic belief is (Marchant & Rubinstein (2021),
App. F): in ``benchmarks/oracle_calibration.py`` the posterior predictive hedges against the
uncertain lower tail and spreads draws over the bulk of negatives, which cost variance in every
setting tried. :meth:`CalibrationOracle.posterior` samples the same model with NUTS in PyMC.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import optimize, special

from .._validation import as_1d, check_count, check_finite, check_number, check_rng
from ..beliefs import CategoricalBelief
from ..strata import score_strata
from ._common import (
    LabelCache,
    check_config,
    check_update,
    common_state,
    log_odds,
    prior_probs,
    restore_common_state,
)
from .base import OracleModel, register_oracle

__all__ = ["CalibrationOracle", "feature_scaling", "log_odds"]

#: The default prior scales of the calibration map: ``s_c`` of the intercept at the pivot and
#: ``s_β`` of the log slope (``intercept_sd``, ``log_slope_sd``); also the scales of the
#: recalibrated cell prior of :func:`bayes_activeeval.posterior.cell_posterior`.
INTERCEPT_SD = 2.5
LOG_SLOPE_SD = 1.0

#: ``IQR / _IQR_PER_SD`` is the standard deviation of normal scores (``2 Φ⁻¹(0.75) ≈ 1.349``).
_IQR_PER_SD = float(2.0 * special.ndtri(0.75))

#: The options of :class:`CalibrationOracle` that change its belief for a given state, stored in
#: ``config()`` and checked by ``set_state`` (states saved before they were stored skip them).
_BELIEF_OPTIONS = (
    "model",
    "n_strata",
    "intercept_sd",
    "log_slope_sd",
    "stratum_sd",
    "clip",
    "predictive",
    "n_samples",
    "seed",
    "grid_size",
)


def feature_scaling(quartiles: Any, sd: Any = None) -> tuple[float, float]:
    """The robust centre and scale ``(m, d)`` of a raw score from its quartiles.

    ``m`` is the median and ``d = IQR / 1.349`` (``1.349 = 2 Φ⁻¹(0.75)``: the standard deviation
    of normal scores, unmoved by a few extreme ones); where the IQR is 0 (over half the scores
    tie) the standard deviation, and 1 where that is 0 too. The calibration oracle fits its map to
    ``(s − m) / d``, on which its identity-map prior means "one robust standard deviation of the
    score is about one logit" (Gelman, Jakulin, Pittau & Su (2008), Ann. Appl. Stat. 2(4):
    weakly informative priors on standardized inputs).

    Parameters
    ----------
    quartiles : array-like (3,)
        ``np.quantile(s, [0.25, 0.5, 0.75])`` (linear interpolation).
    sd : float or callable, optional
        The standard deviation of the scores, or a function returning it, used only when the IQR
        is 0 (default ``None``: 1 then).

    Returns
    -------
    m, d : float
        The centre and the scale (``d > 0``).
    """
    q1, med, q3 = (float(v) for v in np.asarray(quartiles, dtype=float))
    scale = (q3 - q1) / _IQR_PER_SD
    if not (np.isfinite(scale) and scale > 0) and sd is not None:
        scale = float(sd() if callable(sd) else sd)
    if not (np.isfinite(scale) and scale > 0):
        scale = 1.0
    return med, scale


class CalibrationOracle(OracleModel):
    """Hierarchical Bayesian logistic calibration of a binary model's scores.

    Parameters
    ----------
    deterministic : bool
        ``True``: one label per item, unweighted likelihood of the distinct labeled items
        (ignorable selection). ``False``: importance-weighted pseudo-likelihood of all draws
        (Marchant & Rubinstein (2021), App. H).
    model : str, optional
        Which model of the pool to calibrate.
    feature : {"auto", "logit", "score"}
        The covariate: the logit of the model's positive-class probability (``"logit"``), the
        score ``pool.scores[model]`` standardized by its median and ``IQR / 1.349``
        (``"score"``; Gelman et al. (2008); see the module notes), or ``"logit"`` when the pool
        has probabilities and ``"score"`` otherwise (``"auto"``).
    n_strata : int
        Score strata with their own random effect (cumulative-sqrt(F) rule on the feature);
        ``0`` fits plain Bayesian Platt scaling.
    intercept_sd, log_slope_sd, stratum_sd : float
        Prior scales ``s_c``, ``s_β`` (``b = exp β``) and ``s_σ`` (HalfNormal scale of the
        stratum effects).
    clip : float
        Probabilities are clipped to ``[clip, 1 − clip]`` before taking logits.
    predictive : {"map", "mean"}
        The belief: plug-in at the posterior mode (default) or the posterior predictive.
    n_samples : int
        Importance samples for ``predictive="mean"`` (default 512).
    seed : int
        Seed of the fixed standard draws behind those samples (the belief is a deterministic
        function of the state).
    grid_size : int
        Feature grid per stratum on which the posterior predictive is tabulated (default 128).
    lower_asymptote, upper_asymptote : float
        Dirichlet pseudo-counts ``a_0``, ``a_1`` of the asymptotes ``λ_0`` (positives at any
        score) and ``λ_1`` (negatives at any score) of Copas's (1988) contaminated logistic model;
        the map's own share has pseudo-count 1. ``0`` (the default) leaves that asymptote out.
        Fitted jointly with the map: the posterior mode by trust-region Newton with the shares a
        softmax, in which parametrization the mode of a Dirichlet(``a_0``, ``a_1``, 1) prior is
        that of Dirichlet(``1 + a_0``, ``1 + a_1``, 2) on the shares (the mode of
        Dirichlet(``a_0``, ``a_1``, 1) itself is at 0 for ``a_k < 1``). With no labeled surprise
        ``λ_k ≈ a_k / n``, set by the prior's pseudo-count (the rule of three would say
        ``3 / n``). The belief plugs in the shares at the mode; the Laplace covariance is that of
        the map with the shares held there (their own uncertainty, as large as ``λ_k`` when no
        surprise was labeled, is left out); :meth:`posterior` samples the shares too.

    Attributes
    ----------
    coef_ : dict
        MAP of ``a`` (intercept on the raw feature), ``b`` (slope on the raw feature) and
        ``sigma`` after an update; with asymptotes also ``lambda_0`` and ``lambda_1``.
    cov_ : ndarray
        Laplace covariance of the unconstrained parameters ``(c, β, log σ, z_1..z_H)`` (of the
        map on the standardized feature for ``feature="score"``).
    x_shift, x_scale : float
        The standardization ``x = (s − x_shift) / x_scale`` of the raw feature ``s`` (``0`` and
        ``1``: none, the log-odds feature).
    """

    name = "calibration"

    def __init__(
        self,
        *,
        deterministic: bool = True,
        model: str | None = None,
        feature: str = "auto",
        n_strata: int = 10,
        intercept_sd: float = INTERCEPT_SD,
        log_slope_sd: float = LOG_SLOPE_SD,
        stratum_sd: float = 0.5,
        clip: float = 1e-6,
        predictive: str = "map",
        n_samples: int = 512,
        seed: int = 0,
        grid_size: int = 128,
        lower_asymptote: float = 0.0,
        upper_asymptote: float = 0.0,
    ) -> None:
        for name, val in (
            ("lower_asymptote", lower_asymptote),
            ("upper_asymptote", upper_asymptote),
        ):
            if not (check_number(val, name) >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {val!r}")
        if predictive not in ("mean", "map"):
            raise ValueError(f"predictive must be 'mean' or 'map', got {predictive!r}")
        if feature not in ("auto", "logit", "score"):
            raise ValueError(f"feature must be 'auto', 'logit' or 'score', got {feature!r}")
        if not isinstance(deterministic, (bool, np.bool_)):
            raise TypeError(f"deterministic must be True or False, got {deterministic!r}")
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model must be a model name (str) or None, got {model!r}")
        check_count(n_strata, "n_strata", minimum=0)
        for name, val in (
            ("intercept_sd", intercept_sd),
            ("log_slope_sd", log_slope_sd),
            ("stratum_sd", stratum_sd),
        ):
            if not (check_number(val, name) > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {val!r}")
        if not (0 < check_number(clip, "clip") < 0.5):
            raise ValueError(f"clip must be in (0, 0.5), got {clip!r}")
        check_count(seed, "seed", minimum=0)
        self.deterministic = bool(deterministic)
        self.model = model
        self.feature = feature
        self.n_strata = int(n_strata)
        self.intercept_sd = float(intercept_sd)
        self.log_slope_sd = float(log_slope_sd)
        self.stratum_sd = float(stratum_sd)
        self.clip = float(clip)
        check_count(n_samples, "n_samples", minimum=16)
        check_count(grid_size, "grid_size", minimum=2)
        self.predictive_kind = predictive
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        self.grid_size = int(grid_size)
        self.asymptote_prior = (float(lower_asymptote), float(upper_asymptote))
        self.lam = np.zeros(2)  # (λ_0, λ_1), fitted with the map

    # -- set-up ---------------------------------------------------------------------------------
    def initialize(self, pool, model: str | None = None) -> None:
        """Compute the covariate and strata; before any label the belief is the model's own."""
        if pool.task != "binary" or pool.pos is None:
            raise ValueError(
                "the calibration oracle needs a binary pool with a positive class "
                f"(got task={pool.task!r}); use 'dirichlet-tree' for multiclass pools"
            )
        model = self.model if model is None else model
        self.model = pool.check_model(model)
        feature = self.feature
        if feature == "auto":
            feature = "logit" if pool.has_probs() else "score"
        view = pool.view(self.model)
        if feature == "logit":
            if view.prob is None:
                raise ValueError("feature='logit' needs a pool with probs")
            x = special.logit(np.clip(view.prob[:, pool.pos], self.clip, 1.0 - self.clip))
        else:
            if view.score is None:
                raise ValueError("feature='score' needs a pool with scores")
            x = np.asarray(view.score, dtype=float)
        self.initialize_feature(x, prior_probs(pool, self.model), pool.pos, feature=feature)

    def initialize_feature(
        self,
        x: np.ndarray,
        prior: np.ndarray,
        pos: int,
        *,
        feature: str = "logit",
        standardize: bool | tuple[float, float] | None = None,
    ) -> None:
        """Set up the model on a given covariate ``x`` (shape ``(n,)``) instead of the pool's.

        :meth:`initialize` calls this with the (clipped) logit or the raw score; a caller that
        needs another covariate — e.g. the full-precision :func:`log_odds`, which the clipped logit
        flattens in the far lower tail — passes it here. The strata are recomputed from the
        (standardized) covariate (``n_strata`` cumulative-sqrt(F) strata). Any labels are
        discarded.

        Parameters
        ----------
        x : array-like (n,)
            The covariate of every item, finite.
        prior : array-like (n, 2)
            The belief before any label.
        pos : int
            The positive class.
        feature : str, optional
            The name recorded in the state (default ``"logit"``).
        standardize : None, bool or (float, float), optional
            Fit the map to ``(x − m) / d``: ``None`` (default) does so for ``feature="score"``
            only, with ``(m, d)`` from :func:`feature_scaling` (median and ``IQR / 1.349``;
            Gelman et al. (2008)); ``True`` always, ``False`` never; a pair gives ``(m, d)``.
            ``coef_`` and the ``a``, ``b`` of :meth:`posterior` stay on the scale of ``x``.
        """
        x = check_finite(as_1d(x, "x", dtype=float), "x")
        prior = np.asarray(prior, dtype=float)
        if prior.shape != (x.size, 2):
            raise ValueError(f"prior has shape {prior.shape}; expected ({x.size}, 2)")
        if standardize is None:
            standardize = feature == "score"
        if isinstance(standardize, (bool, np.bool_)):
            shift, scale = (
                feature_scaling(np.quantile(x, [0.25, 0.5, 0.75]), lambda: np.std(x))
                if standardize and x.size
                else (0.0, 1.0)
            )
        else:
            try:
                shift, scale = standardize
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"standardize must be None, a bool or a pair (centre, scale), got "
                    f"{standardize!r}"
                ) from exc
            shift, scale = (
                check_number(shift, "standardize[0]"),
                check_number(scale, "standardize[1]"),
            )
            if not scale > 0:
                raise ValueError(f"standardize[1] (the scale) must be > 0, got {scale!r}")
        self._x_raw = x  # the covariate as given: an old state is restored on it (set_state)
        self.x_shift, self.x_scale = float(shift), float(scale)
        if self.x_shift != 0.0 or self.x_scale != 1.0:
            x = (x - self.x_shift) / self.x_scale
        strata = None
        if self.n_strata > 0:
            strata, _ = score_strata(x, self.n_strata, method="csf")
        self.x = x
        self.n_items = self.x.size
        self.pos = int(pos)
        self.used_feature = feature
        self.prior_belief = prior
        # pivot: the mean feature of the items the model expects to be positive, which is where
        # the labels carry information about the map when positives are rare (it decorrelates
        # c and β and keeps the Laplace approximation good where it matters)
        w1 = self.prior_belief[:, self.pos]
        self.x_center = (
            float(np.sum(w1 * self.x) / np.sum(w1)) if w1.sum() > 0 else float(self.x.mean())
        )
        self.xt = self.x - self.x_center
        if strata is None:
            self.strata = np.zeros(self.n_items, dtype=np.int64)
            self.H = 0
        else:
            self.strata = np.asarray(strata, dtype=np.int64)
            self.H = int(self.strata.max()) + 1
        self.cache = LabelCache(self.n_items)
        self._draw_idx = np.empty(0, dtype=np.int64)
        self._draw_y = np.empty(0, dtype=np.int64)
        self._draw_w = np.empty(0, dtype=float)
        self.n_updates = 0
        self.params = self._prior_mean()
        self.cov_ = None
        self.lam = np.zeros(2)
        # per-stratum feature ranges: the predictive is tabulated on a grid and interpolated
        G = self.grid_size
        nh = max(self.H, 1)
        lo = np.full(nh, np.inf)
        hi = np.full(nh, -np.inf)
        np.minimum.at(lo, self.strata, self.x)
        np.maximum.at(hi, self.strata, self.x)
        self._grid_lo, self._grid_hi = lo, hi
        self._grid_x = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, G)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            pos = np.where(hi > lo, (G - 1) / (hi - lo), 0.0)[self.strata] * (
                self.x - lo[self.strata]
            )
        j = np.clip(np.floor(pos).astype(np.int64), 0, G - 2)
        self._interp = (self.strata * G + j, pos - j)
        # fixed standard draws for the importance-corrected Laplace posterior (multivariate t, 5
        # degrees of freedom): the belief is a deterministic function of the state
        gen = np.random.default_rng(self.seed)
        self._tdf = 5.0
        self._Z = gen.standard_normal((self.n_samples, self.n_params))
        self._chi = gen.chisquare(self._tdf, self.n_samples) / self._tdf
        self._grid_logit = None
        self.predictive_ess_ = None
        self._ready = True

    @property
    def n_params(self) -> int:
        return 3 + self.H if self.H else 2

    def _prior_mean(self) -> np.ndarray:
        p = np.zeros(self.n_params)
        p[0] = self.x_center  # identity map: η = x
        if self.H:
            p[2] = np.log(self.stratum_sd * np.sqrt(2 / np.pi))  # HalfNormal mean
        return p

    # -- the data the likelihood sees ---------------------------------------------------------------
    def _data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Items, 0/1 outcomes and likelihood weights (1 for a deterministic oracle)."""
        if self.deterministic:
            items = self.cache.items
            y = (self.cache.label[items] == self.pos).astype(float)
            return items, y, np.ones(items.size)
        w = self._draw_w
        wn = w * (w.size / w.sum()) if w.size else w
        return self._draw_idx, (self._draw_y == self.pos).astype(float), wn

    # -- log posterior, gradient, Hessian ----------------------------------------------------------
    def _eta_parts(self, theta, items):
        xt = self.xt[items]
        b = np.exp(theta[1])
        eta = theta[0] + b * xt
        if self.H:
            sig = np.exp(theta[2])
            h = self.strata[items]
            z = theta[3:]
            eta = eta + sig * z[h]
            return eta, xt, b, sig, h, z
        return eta, xt, b, None, None, None

    def _objective(self, theta, items, y, w, lam=None):
        """Negative log posterior, gradient and Hessian in ``(c, β, log σ, z)``; with ``lam``
        the likelihood of Copas's mixture ``λ_0 + (1 − λ_0 − λ_1) expit(η)`` at those shares."""
        eta, xt, b, sig, h, z = self._eta_parts(theta, items)
        P = self.n_params
        if lam is None:
            ll = np.sum(w * (y * eta - np.logaddexp(0.0, eta)))
            p = special.expit(eta)
            r = w * (y - p)  # dℓ/dη
            Wt = w * p * (1 - p)  # -d²ℓ/dη²
        else:
            ll, r, Wt = self._mixture_eta(eta, y, w, lam)[:3]
        # dη/dθ has three dense columns (c, β, log σ) and one non-zero stratum column per item
        # (σ at column 3 + h): the gradient and the Fisher part J'WJ by sums and bincounts,
        # O(n P) instead of the dense O(n P²)
        D = np.empty((eta.size, 3 if self.H else 2))
        D[:, 0] = 1.0
        D[:, 1] = b * xt
        if self.H:
            D[:, 2] = sig * z[h]
        grad = np.zeros(P)
        k = D.shape[1]
        grad[:k] = D.T @ r
        hess = np.zeros((P, P))
        hess[:k, :k] = -(D.T * Wt) @ D
        hess[1, 1] += np.sum(r * b * xt)
        if self.H:
            H = self.H
            grad[3:] = sig * np.bincount(h, weights=r, minlength=H)
            for j in range(k):
                col = -sig * np.bincount(h, weights=Wt * D[:, j], minlength=H)
                hess[j, 3:] = col
                hess[3:, j] = col
            hess[3 + np.arange(H), 3 + np.arange(H)] = -(sig**2) * np.bincount(
                h, weights=Wt, minlength=H
            )
            hess[2, 2] += np.sum(r * sig * z[h])
            cross = np.bincount(h, weights=r * sig, minlength=H)
            hess[2, 3:] += cross
            hess[3:, 2] += cross
        # priors
        c0, sc, sb, ss = self.x_center, self.intercept_sd, self.log_slope_sd, self.stratum_sd
        lp = -0.5 * ((theta[0] - c0) / sc) ** 2 - 0.5 * (theta[1] / sb) ** 2
        grad[0] -= (theta[0] - c0) / sc**2
        grad[1] -= theta[1] / sb**2
        hess[0, 0] -= 1 / sc**2
        hess[1, 1] -= 1 / sb**2
        if self.H:
            s2 = np.exp(2 * theta[2])
            lp += -0.5 * s2 / ss**2 + theta[2] - 0.5 * np.sum(z**2)
            grad[2] += -s2 / ss**2 + 1.0
            hess[2, 2] -= 2 * s2 / ss**2
            grad[3:] -= z
            hess[3:, 3:] -= np.eye(self.H)
        return -(ll + lp), -grad, -hess

    def log_posterior(self, theta=None) -> float:
        """Log posterior density of the unconstrained parameters ``(c, β, log σ, z)`` (with the
        Jacobian of ``log σ``), up to a constant; with asymptotes, conditional on the fitted
        ``λ``."""
        self.check_ready()
        th = self.params if theta is None else np.asarray(theta, dtype=float)
        return -self._objective(th, *self._data(), self.lam if self.has_asymptotes else None)[0]

    def log_evidence(self, n_samples: int = 4096) -> float:
        """Log marginal likelihood of the labels, ``log p(y) = log ∫ p(y | θ) p(θ) dθ``, by
        importance sampling from a multivariate t (4 d.o.f.) centred at the posterior mode whose
        scale matrix is twice the Laplace covariance (Geweke 1989; Kass & Raftery 1995), the
        priors normalized (``c``, ``β``, the standard-normal ``z_h`` and the HalfNormal σ in
        ``log σ``), so that label models of different scores, or different numbers of strata,
        are compared on one scale. The Laplace approximation alone is exact to about 0.01 nats
        for the plain Platt map but about 2 nats too low with ten stratum effects, whose
        ``(log σ, z)`` posterior is far from Gaussian; the importance estimate's own Monte Carlo
        error there is about 0.2 nats (standard deviation over seeds at 4,096 draws).
        Deterministic given the state (fixed standard draws from ``seed``). Not available with
        asymptotes.

        Parameters
        ----------
        n_samples : int
            Importance draws (default 4,096).

        Returns
        -------
        float
            ``nan`` where the fit's Laplace covariance is not positive definite (a degenerate
            fit: the proposal would collapse along that direction and underestimate).
        """
        from scipy import stats
        from scipy.special import logsumexp

        self.check_ready()
        if self.cov_ is None:
            raise ValueError("no labels yet: the calibration has not been fitted")
        if self.has_asymptotes:
            raise ValueError("log_evidence is not available with asymptotes")
        n_samples = check_count(n_samples, "n_samples", minimum=16)
        d, df = self.n_params, 4.0
        cov = 2.0 * 0.5 * (self.cov_ + self.cov_.T)
        vals, vecs = np.linalg.eigh(cov)
        if not np.all(vals > 1e-12 * vals.max()):
            return float("nan")
        gen = np.random.default_rng([self.seed, 1])
        Z = gen.standard_normal((n_samples, d))
        chi = gen.chisquare(df, n_samples) / df
        thetas = self.params[None, :] + ((Z * np.sqrt(vals)) @ vecs.T) / np.sqrt(chi)[:, None]
        log_q = stats.multivariate_t(loc=self.params, shape=cov, df=df).logpdf(thetas)
        log2pi = np.log(2 * np.pi)
        const = -np.log(self.intercept_sd) - np.log(self.log_slope_sd) - log2pi
        if self.H:
            const += 0.5 * np.log(2 / np.pi) - np.log(self.stratum_sd) - 0.5 * self.H * log2pi
        items, y, w = self._data()
        log_p = np.concatenate(
            [
                self._log_post_many(thetas[k : k + 512], items, y, w)
                for k in range(0, n_samples, 512)
            ]
        )
        lw = np.where(np.isfinite(log_p), log_p + const - log_q, -np.inf)
        return float(logsumexp(lw) - np.log(n_samples))

    @staticmethod
    def _mixture_logs(eta, lam):
        """``log P_1`` and ``log(1 − P_1)`` of Copas's mixture ``P_1 = λ_0 + k expit(η)``,
        ``k = 1 − λ_0 − λ_1``, without subtracting from 1: ``1 − P_1 = λ_1 + k expit(−η)``."""
        k = 1.0 - lam[0] - lam[1]
        with np.errstate(divide="ignore"):
            lp1 = np.logaddexp(np.log(lam[0]), np.log(k) + special.log_expit(eta))
            lq1 = np.logaddexp(np.log(lam[1]), np.log(k) + special.log_expit(-eta))
        return lp1, lq1

    @classmethod
    def _mixture_eta(cls, eta, y, w, lam):
        """Copas's mixture per labeled item: the log-likelihood, ``dℓ/dη``, ``−d²ℓ/dη²``,
        ``dℓ/dP_1``, ``−d²ℓ/dP_1²``, ``expit(η)``, ``expit(−η)``, ``P_1`` and ``1 − P_1``."""
        s, sc = special.expit(eta), special.expit(-eta)
        k = 1.0 - lam[0] - lam[1]
        lp1, lq1 = cls._mixture_logs(eta, lam)
        p1, q1 = np.maximum(np.exp(lp1), 1e-300), np.maximum(np.exp(lq1), 1e-300)
        d1 = k * s * sc  # dP_1/dη
        d2 = d1 * (sc - s)  # d²P_1/dη²
        g = w * np.where(y > 0, 1.0 / p1, -1.0 / q1)  # dℓ/dP_1
        curv = w * np.where(y > 0, 1.0 / p1**2, 1.0 / q1**2)  # -d²ℓ/dP_1²
        ll = float(np.sum(w * np.where(y > 0, lp1, lq1)))
        return ll, g * d1, curv * d1 * d1 - g * d2, g, curv, s, sc, p1, q1

    @staticmethod
    def with_asymptotes(p, lam0, lam1):
        """``λ_0 + (1 − λ_0 − λ_1) p``: the map's probability ``p = expit(η)`` with the
        asymptotes of Copas's (1988) contaminated logistic model (broadcasting; ``λ = 0`` leaves
        ``p`` unchanged).

        Parameters
        ----------
        p : array-like
            The map's probabilities.
        lam0, lam1 : float or array-like
            The lower and upper asymptotes' shares.

        Returns
        -------
        ndarray
        """
        return lam0 + (1.0 - lam0 - lam1) * p

    @property
    def has_asymptotes(self) -> bool:
        """Whether the map has a lower or an upper asymptote (a pseudo-count above 0)."""
        return any(a > 0 for a in self.asymptote_prior)

    def _fit(self) -> None:
        items, y, w = self._data()
        if items.size == 0:
            self.params, self.cov_ = self._prior_mean(), None
            self.lam = np.zeros(2)
            self._grid_logit = None
            return
        if self.has_asymptotes:
            self._fit_joint(items, y, w)
        else:
            self._fit_map(items, y, w)
        # the posterior predictive table is built when a belief needs it (predictive="mean"):
        # the default MAP belief never does, and the table costs more than the fit
        self._grid_logit = None
        if self.predictive_kind == "mean":
            self._tabulate()

    def _shares(self, u, comps):
        """The shares ``(λ_k for k in comps, λ_map)`` as a softmax of ``(u, 0)``, and ``λ``."""
        sm = special.softmax(np.r_[u, 0.0])
        lam = np.zeros(2)
        lam[comps] = sm[:-1]
        return sm, lam

    def _joint_objective(self, x, items, y, w, comps, alpha):
        """Negative joint log posterior of the map ``θ`` and the shares' softmax coordinates
        ``u``, its gradient and Hessian (``θ`` block from :meth:`_objective` with Copas's
        mixture; the ``u`` block and the cross terms from ``P_1 = λ_0 + λ_map expit(η)``)."""
        n_th = self.n_params
        th, u = x[:n_th], x[n_th:]
        sm, lam = self._shares(u, comps)
        f, g_th, H_th = self._objective(th, items, y, w, lam)
        eta, xt, b, sig, h, z = self._eta_parts(th, items)
        _, _, _, G, C, s_, sc, p1, q1 = self._mixture_eta(eta, y, w, lam)
        ds = s_ * sc
        # dP_1/d(share) − P_1, without cancellation: 1 − P_1 for the lower asymptote, −P_1 for the
        # upper, expit(η) − P_1 = λ_1 expit(η) − λ_0 expit(−η) for the map
        v = np.column_stack([q1 if c == 0 else -p1 for c in comps] + [lam[1] * s_ - lam[0] * sc])
        e = sm[:-1] * v[:, :-1]  # dP_1/du_j
        m = comps.size
        A = alpha.sum()
        grad_u = G @ e + alpha[:-1] - sm[:-1] * A
        d2 = np.empty((m, m))
        for j in range(m):
            for k in range(m):
                dd = sm[j] * ((float(j == k) - sm[k]) * v[:, j] - sm[k] * v[:, k])
                d2[j, k] = G @ dd - (C * e[:, j]) @ e[:, k]
        d2 -= A * (np.diag(sm[:-1]) - np.outer(sm[:-1], sm[:-1]))
        # cross terms: d²ℓ/dη du_j per item, times dη/dθ
        X = (G * ds * sm[-1])[:, None] * (-sm[:-1])[None, :] - (C * sm[-1] * ds)[:, None] * e
        cross = np.zeros((n_th, m))
        cross[0] = X.sum(axis=0)
        cross[1] = (b * xt) @ X
        if self.H:
            cross[2] = (sig * z[h]) @ X
            for j in range(m):
                cross[3:, j] = sig * np.bincount(h, weights=X[:, j], minlength=self.H)
        f -= float(alpha @ np.log(sm))
        grad = np.r_[g_th, -grad_u]
        H = np.block([[H_th, -cross], [-cross.T, -d2]])
        return f, grad, H

    def _fit_joint(self, items, y, w) -> None:
        """Joint posterior mode of the map and the shares (see ``lower_asymptote``): trust-region
        Newton on ``(θ, u)`` with the shares a softmax of ``u`` over the asymptotes in use and the
        map, whose Dirichlet(``a_0``, ``a_1``, 1) density in ``u`` is
        ``Σ_k a_k log λ_k + log λ_map``; then the Laplace covariance of ``θ`` at the mode with
        the shares held there."""
        a = np.asarray(self.asymptote_prior)
        comps = np.flatnonzero(a > 0)
        alpha = np.r_[a[comps], 1.0]
        start = np.maximum(self.lam[comps], a[comps] / (w.sum() + alpha.sum()))
        u0 = np.log(start) - np.log1p(-start.sum())
        n_th = self.n_params
        res = _trust_newton(
            lambda x: self._joint_objective(x, items, y, w, comps, alpha), np.r_[self.params, u0]
        )
        theta = res.x[:n_th]
        self.lam = self._shares(res.x[n_th:], comps)[1]
        self._set_laplace(theta, self._objective(theta, items, y, w, self.lam)[2], res.success)

    def _fit_map(self, items, y, w) -> None:
        """MAP and Laplace covariance of the map's parameters (trust-region Newton)."""
        res = _trust_newton(lambda t: self._objective(t, items, y, w), self.params.copy())
        self._set_laplace(res.x, self._objective(res.x, items, y, w)[2], res.success)

    def _set_laplace(self, theta, H, converged) -> None:
        """The mode and the Laplace covariance ``H⁻¹`` (``H`` the negative log posterior's
        Hessian; a pseudo-inverse where it is not positive definite)."""
        try:
            cov = np.linalg.inv(H)
            cov = 0.5 * (cov + cov.T)
            if not np.all(np.linalg.eigvalsh(cov) > 0):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            cov = np.linalg.pinv(H + 1e-8 * np.eye(H.shape[0]))
        self.params, self.cov_ = np.asarray(theta, dtype=float), cov
        self.converged_ = bool(converged)

    # -- the OracleModel interface ------------------------------------------------------------------
    def update(self, indices, labels, weights=None) -> None:
        """Add labeled draws and refit (MAP + Laplace).

        Deterministic oracle: each distinct item enters the likelihood once, unweighted
        (ignorable selection). Stochastic oracle: every draw enters the pseudo-likelihood with its
        normalized importance weight (Marchant & Rubinstein (2021), App. H).
        """
        self.check_ready()
        idx, y, w = check_update(indices, labels, weights, self.n_items, 2)
        if self.deterministic:  # a conflicting label is refused before anything changes
            new_i, _ = self.cache.add(idx, y)
            self.n_updates += 1
            if new_i.size == 0:
                return
        else:
            self.n_updates += 1
            if idx.size == 0:
                return
            self._draw_idx = np.concatenate([self._draw_idx, idx])
            self._draw_y = np.concatenate([self._draw_y, y])
            self._draw_w = np.concatenate([self._draw_w, w])
        self._fit()

    @property
    def n_labels(self) -> int:
        """Labeled items (deterministic) or draws (stochastic) in the likelihood."""
        return self.cache.n_labeled if self.deterministic else int(self._draw_idx.size)

    def _log_post_many(self, thetas: np.ndarray, items, y, w) -> np.ndarray:
        """Log posterior (as :meth:`log_posterior`) at many parameter vectors, shape (S,)."""
        c, beta = thetas[:, 0], thetas[:, 1]
        b = np.exp(beta)
        eta = c[:, None] + b[:, None] * self.xt[items][None, :]
        c0, sc, sb, ss = self.x_center, self.intercept_sd, self.log_slope_sd, self.stratum_sd
        lp = -0.5 * ((c - c0) / sc) ** 2 - 0.5 * (beta / sb) ** 2
        if self.H:
            ls = thetas[:, 2]
            z = thetas[:, 3:]
            eta = eta + np.exp(ls)[:, None] * z[:, self.strata[items]]
            lp = lp - 0.5 * np.exp(2 * ls) / ss**2 + ls - 0.5 * np.sum(z**2, axis=1)
        if self.has_asymptotes:  # Copas's mixture: λ_0 + (1 − λ_0 − λ_1) expit(η)
            lp1, lq1 = self._mixture_logs(eta, self.lam)
            ll = (w[None, :] * np.where(y[None, :] > 0, lp1, lq1)).sum(axis=1)
            return ll + lp
        ll = (w[None, :] * (y[None, :] * eta - np.logaddexp(0.0, eta))).sum(axis=1)
        return ll + lp

    def posterior_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Importance-weighted posterior draws ``(θ_s, w_s)`` for the belief.

        A multivariate t (5 d.o.f.) around the Laplace approximation, reweighted by the exact
        posterior density (self-normalized importance sampling), which corrects the tails the
        Gaussian gets wrong. With stratum effects the scale ``σ`` is held at its posterior mode
        (empirical Bayes) and ``(c, β, z)`` are drawn from their conditional posterior — a
        log-concave logistic-regression posterior, where the correction works well; the full
        joint posterior including ``σ`` is :meth:`posterior` (NUTS). Deterministic given the
        state (fixed standard draws from ``seed``); the effective sample size is stored in
        ``predictive_ess_``.
        """
        self.check_ready()
        if self.cov_ is None:
            raise ValueError("no labels yet: the calibration has not been fitted")
        P = self.n_params
        free = np.array([0, 1, *range(3, P)]) if self.H else np.arange(P)
        prec = np.linalg.inv(self.cov_)
        cov = np.linalg.inv(prec[np.ix_(free, free)])  # conditional on log σ
        cov = 0.5 * (cov + cov.T)
        try:
            L = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            vals, vecs = np.linalg.eigh(cov)
            L = vecs * np.sqrt(np.maximum(vals, 1e-12))
        Z = self._Z[:, : free.size]
        scale = 1.0 / np.sqrt(self._chi)
        thetas = np.repeat(self.params[None, :], self.n_samples, axis=0)
        thetas[:, free] += (Z @ L.T) * scale[:, None]
        d2 = np.sum(Z**2, axis=1) / self._chi
        log_q = -0.5 * (self._tdf + free.size) * np.log1p(d2 / self._tdf)
        log_p = self._log_post_many(thetas, *self._data())
        lw = log_p - log_q
        lw = np.where(np.isfinite(lw), lw, -np.inf)
        w = np.exp(lw - lw.max())
        w /= w.sum()
        self.predictive_ess_ = float(1.0 / np.sum(w**2))
        return thetas, w

    def _tabulate(self) -> None:
        """Posterior predictive log-odds on each stratum's grid of feature values."""
        thetas, w = self.posterior_samples()
        c, b = thetas[:, 0], np.exp(thetas[:, 1])
        xg = self._grid_x - self.x_center  # (H, G)
        eta = c[:, None, None] + b[:, None, None] * xg[None, :, :]
        if self.H:
            eta = eta + (np.exp(thetas[:, 2])[:, None] * thetas[:, 3:])[:, :, None]
        lw = np.log(np.maximum(w, 1e-300))[:, None, None]
        log_p1 = special.logsumexp(lw - np.logaddexp(0.0, -eta), axis=0)
        log_p0 = special.logsumexp(lw - np.logaddexp(0.0, eta), axis=0)
        self._grid_logit = log_p1 - log_p0

    def linear_predictor(self) -> tuple[np.ndarray, np.ndarray]:
        """Laplace posterior mean ``m(x)`` and variance ``v(x)`` of ``η(x)`` for every item.

        ``v = g(x)ᵀ Σ g(x)`` with ``g = ∂η/∂θ = (1, b x̃, σ z_h, σ e_h)``; computed per stratum and
        expanded as ``A_h + 2 x̃ B_h + x̃² D`` (vectorised over the pool).
        """
        self.check_ready()
        th = self.params
        b = np.exp(th[1])
        m = th[0] + b * self.xt
        if self.cov_ is None:
            return m, np.zeros_like(m)
        S = self.cov_
        P = self.n_params
        if self.H:
            sig = np.exp(th[2])
            z = th[3:]
            m = m + sig * z[self.strata]
            E = np.zeros((self.H, P))  # e_c + w_h for every stratum
            E[:, 0] = 1.0
            E[:, 2] = sig * z
            E[np.arange(self.H), 3 + np.arange(self.H)] = sig
        else:
            E = np.zeros((1, P))
            E[0, 0] = 1.0
        A = np.einsum("hi,ij,hj->h", E, S, E)
        B = b * (E @ S[:, 1])
        D = b**2 * S[1, 1]
        h = self.strata if self.H else np.zeros(self.n_items, dtype=np.int64)
        v = A[h] + 2 * self.xt * B[h] + self.xt**2 * D
        return m, np.maximum(v, 0.0)

    def belief(self) -> CategoricalBelief:
        """The belief ``π(y|x)`` for every item.

        ``predictive="mean"``: the posterior predictive ``E[expit(η(x)) | labels]`` from the
        importance-corrected Laplace posterior (:meth:`posterior_samples`), tabulated on a grid
        of feature values per stratum and interpolated in log-odds. ``predictive="map"``: the
        plug-in ``expit(η̂(x))`` at the posterior mode. Before any label: the model's own
        probabilities. A deterministic oracle's labeled items get point masses.
        """
        self.check_ready()
        if self.n_labels == 0:  # no labeled item to give a point mass either
            return CategoricalBelief(self.prior_belief.copy())
        if self.predictive_kind == "map":
            p1 = special.expit(self.linear_predictor()[0])
        else:
            if self._grid_logit is None:
                self._tabulate()
            flat, t = self._interp
            g = self._grid_logit.ravel()
            p1 = special.expit((1.0 - t) * g[flat] + t * g[flat + 1])
        return self._binary_belief(self.with_asymptotes(p1, *self.lam))

    def _binary_belief(self, p1: np.ndarray) -> CategoricalBelief:
        """The two-class belief with ``P(y = pos) = p1``; labeled items of a deterministic oracle
        get point masses."""
        probs = np.empty((self.n_items, 2))
        probs[:, self.pos] = p1
        probs[:, 1 - self.pos] = 1.0 - p1
        if self.deterministic:
            self.cache.point_masses(probs)
        return CategoricalBelief(probs)

    @property
    def _raw_pivot(self) -> float:
        """``x̄ + m / d``: the intercept on the raw feature is ``a = c − b x̄ − (b / d) m``, i.e.
        ``c − b (x̄ + m / d)`` with ``b`` the slope on the standardized feature (``x̄`` when the
        feature is not standardized: ``m = 0``, ``d = 1``)."""
        return self.x_center + self.x_shift / self.x_scale

    @property
    def coef_(self) -> dict[str, float]:
        """MAP of the calibration map ``η = a + b s (+ σ z_h)`` on the raw feature ``s``.

        With a standardized score (``x = (s − m) / d``; :func:`feature_scaling`) the map fitted
        is ``η = c + β' (x − x̄)``; on the raw score ``b = β' / d`` and
        ``a = c − β' (x̄ + m / d)``.
        """
        self.check_ready()
        b = float(np.exp(self.params[1]))
        out = {"a": float(self.params[0] - b * self._raw_pivot), "b": b / self.x_scale}
        if self.H:
            out["sigma"] = float(np.exp(self.params[2]))
        if self.has_asymptotes:
            out["lambda_0"], out["lambda_1"] = (float(v) for v in self.lam)
        return out

    def coef_stderr(self) -> dict[str, float]:
        """Laplace (delta-method) standard errors of ``a`` and ``b`` (on the raw feature)."""
        self.check_ready()
        if self.cov_ is None:
            raise ValueError("no labels yet: the calibration has not been fitted")
        b = float(np.exp(self.params[1]))
        # a = c − e^β (x̄ + m/d), b = e^β / d: gradients wrt (c, β)
        ga = np.array([1.0, -b * self._raw_pivot])
        gb = np.array([0.0, b / self.x_scale])
        S = self.cov_[:2, :2]
        return {"a": float(np.sqrt(ga @ S @ ga)), "b": float(np.sqrt(gb @ S @ gb))}

    # -- state --------------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The options and pool facts a saved state must match (:meth:`set_state`)."""
        return {
            "deterministic": self.deterministic,
            "model": self.model,
            "feature": self.used_feature,
            "n_strata": self.n_strata,
            "n_items": self.n_items,
            "n_effects": self.H,
            "asymptotes": list(self.asymptote_prior),
            "intercept_sd": self.intercept_sd,
            "log_slope_sd": self.log_slope_sd,
            "stratum_sd": self.stratum_sd,
            "clip": self.clip,
            "predictive": self.predictive_kind,
            "n_samples": self.n_samples,
            "seed": self.seed,
            "grid_size": self.grid_size,
        }

    def get_state(self) -> dict[str, Any]:
        """Config, the labels (or weighted draws), the feature's standardization and the fitted
        parameters and covariance."""
        state = common_state(self)
        state["params"] = self.params.copy()
        state["cov"] = None if self.cov_ is None else self.cov_.copy()
        state["lam"] = self.lam.copy()
        state["feature_scaling"] = [self.x_shift, self.x_scale]
        if not self.deterministic:
            state["draw_items"] = self._draw_idx.copy()
            state["draw_labels"] = self._draw_y.copy()
            state["draw_weights"] = self._draw_w.copy()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` output on a model initialized with the same pool.

        Refuses a state saved with other options that change the belief (the model, the
        feature, the strata, the prior scales, the asymptotes, ``clip``, ``predictive``,
        ``n_samples``, ``seed``, ``grid_size``), naming the first that differs; a state saved
        before an option was stored skips that check. The feature's standardization is the
        state's: a state without one (saved before raw scores were standardized) is restored on
        the unstandardized feature, so that it gives the belief it gave when saved.

        Parameters
        ----------
        state : dict
            :meth:`get_state` output (also after a JSON round trip).
        """
        self.check_ready()
        keys = ("n_items", "deterministic", "feature", "asymptotes", *_BELIEF_OPTIONS)
        check_config(state, self.config(), keys)
        mine = (self.x_shift, self.x_scale)
        saved = tuple(float(v) for v in state.get("feature_scaling", (0.0, 1.0)))
        if saved != mine:
            self._restandardize(saved)
        try:
            restore_common_state(self, state, (*keys, "n_effects"))
        except ValueError:
            if saved != mine:  # leave the model as it was
                self._restandardize(mine)
            raise
        if not self.deterministic:
            self._draw_idx = np.asarray(state["draw_items"], dtype=np.int64).copy()
            self._draw_y = np.asarray(state["draw_labels"], dtype=np.int64).copy()
            self._draw_w = np.asarray(state["draw_weights"], dtype=float).copy()
        self.params = np.asarray(state["params"], dtype=float).copy()
        self.lam = np.asarray(state.get("lam", np.zeros(2)), dtype=float).copy()
        cov = state.get("cov")
        self.cov_ = None if cov is None else np.asarray(cov, dtype=float).copy()
        self._grid_logit = None
        if self.cov_ is not None and self.predictive_kind == "mean":
            self._tabulate()

    def _restandardize(self, scaling: tuple[float, float]) -> None:
        """Set the model up again on its covariate with the standardization ``scaling`` (labels
        discarded: :meth:`set_state` restores them)."""
        self.initialize_feature(
            self._x_raw, self.prior_belief, self.pos, feature=self.used_feature, standardize=scaling
        )

    # -- PyMC ---------------------------------------------------------------------------------------
    def pymc_model(self):
        """The calibration model in PyMC (non-centred stratum effects), with the labeled items as
        a Bernoulli likelihood (deterministic oracle) or the importance-weighted pseudo-likelihood
        as a ``pm.Potential`` (stochastic oracle, App. H)."""
        self.check_ready()
        import pymc as pm
        import pytensor.tensor as pt

        items, y, w = self._data()
        coords = {"label": np.arange(items.size)}
        if self.H:
            coords["stratum"] = np.arange(self.H)
        xt = self.xt[items]
        scaled = self.x_shift != 0.0 or self.x_scale != 1.0
        with pm.Model(coords=coords) as m:
            c = pm.Normal("c", mu=self.x_center, sigma=self.intercept_sd)
            beta = pm.Normal("log_slope", mu=0.0, sigma=self.log_slope_sd)
            if scaled:  # the slope b' on the standardized feature; a and b on the raw one
                b = pt.exp(beta)
                pm.Deterministic("b", b / self.x_scale)
                pm.Deterministic("a", c - b * self._raw_pivot)
            else:
                b = pm.Deterministic("b", pt.exp(beta))
                pm.Deterministic("a", c - b * self.x_center)
            eta = c + b * xt
            if self.H:
                sigma = pm.HalfNormal("sigma", sigma=self.stratum_sd)
                z = pm.Normal("z", 0.0, 1.0, dims="stratum")
                u = pm.Deterministic("stratum_effect", sigma * z, dims="stratum")
                eta = eta + u[self.strata[items]]
            if self.has_asymptotes:
                a0, a1 = self.asymptote_prior
                conc = [a for a in (a0, a1) if a > 0] + [1.0]
                share = pm.Dirichlet("asymptote_shares", a=np.asarray(conc))
                lam0 = share[0] if a0 > 0 else pt.as_tensor(0.0)
                lam1 = share[int(a0 > 0)] if a1 > 0 else pt.as_tensor(0.0)
                pm.Deterministic("lambda_0", lam0)
                pm.Deterministic("lambda_1", lam1)
                p1 = lam0 + (1.0 - lam0 - lam1) * pm.math.sigmoid(eta)
                if self.deterministic:
                    pm.Bernoulli("y", p=p1, observed=y.astype(np.int64), dims="label")
                else:
                    pm.Potential(
                        "weighted_loglik", pt.sum(w * (y * pt.log(p1) + (1 - y) * pt.log1p(-p1)))
                    )
            elif self.deterministic:
                pm.Bernoulli("y", logit_p=eta, observed=y.astype(np.int64), dims="label")
            else:
                pm.Potential("weighted_loglik", pt.sum(w * (y * eta - pt.log1pexp(eta))))
        return m

    def posterior(
        self, draws: int = 1000, rng: Any = None, *, tune: int | None = None, chains: int = 2
    ):
        """NUTS posterior of the calibration model (:meth:`pymc_model`).

        Parameters
        ----------
        draws : int, optional
            Draws per chain, at least 1 (default 1000).
        rng : None, int or numpy.random.Generator, optional
            Seeds the sampler.
        tune : int, optional
            Tuning steps per chain, at least 0 (default ``None``: ``draws``).
        chains : int, optional
            Chains, at least 1 (default 2), run one after the other (``cores=1``).

        Returns
        -------
        xarray.DataTree
            Variables ``a`` and ``b`` (the map on the raw feature), ``c`` and ``log_slope`` (the
            intercept at the pivot and the log slope, on the standardized feature for
            ``feature="score"``), with strata ``sigma``, ``z`` and ``stratum_effect`` (dim
            ``stratum``), and with asymptotes ``lambda_0``, ``lambda_1`` and
            ``asymptote_shares``.
        """
        self.check_ready()
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
            raise ValueError(f"draws must be a positive integer, got {draws!r}")
        chains = check_count(chains, "chains")
        if tune is not None:
            tune = check_count(tune, "tune", minimum=0)
        if self.n_labels == 0:
            raise ValueError("no labels yet: the posterior is the prior; update the model first")
        import pymc as pm

        seed = int(check_rng(rng).integers(2**31 - 1))
        with self.pymc_model():
            return pm.sample(
                draws=int(draws),
                tune=int(draws if tune is None else tune),
                chains=int(chains),
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )

    def predictive(self, idata, *, max_draws: int = 400, chunk: int = 1 << 16) -> CategoricalBelief:
        """Posterior predictive ``E[λ_0 + (1 − λ_0 − λ_1) expit(η(x))]`` for every pool item from
        posterior draws (e.g. :meth:`posterior`: ``c``, ``b`` on the raw feature, and
        ``stratum_effect``, ``lambda_0``, ``lambda_1`` where the model has them), averaging over
        at most ``max_draws`` draws."""
        self.check_ready()
        post = idata["posterior"] if "posterior" in idata.children else idata
        c = np.asarray(post["c"]).reshape(-1)
        b = np.asarray(post["b"]).reshape(-1)
        if self.x_scale != 1.0:  # "b" is the slope on the raw feature
            b = b * self.x_scale
        S = c.size
        sel = np.linspace(0, S - 1, min(S, int(max_draws))).astype(int)
        c, b = c[sel], b[sel]
        u = None
        if self.H:
            u = np.asarray(post["stratum_effect"]).reshape(S, self.H)[sel]
        lam0 = lam1 = np.zeros(sel.size)
        if self.has_asymptotes:
            lam0 = np.asarray(post["lambda_0"]).reshape(-1)[sel]
            lam1 = np.asarray(post["lambda_1"]).reshape(-1)[sel]
        p1 = np.empty(self.n_items)
        for start in range(0, self.n_items, chunk):
            sl = slice(start, min(start + chunk, self.n_items))
            eta = c[:, None] + b[:, None] * self.xt[None, sl]
            if u is not None:
                eta = eta + u[:, self.strata[sl]]
            p = self.with_asymptotes(special.expit(eta), lam0[:, None], lam1[:, None])
            p1[sl] = p.mean(axis=0)
        return self._binary_belief(p1)

    def __repr__(self) -> str:
        kind = "deterministic" if self.deterministic else "stochastic"
        extra = f", n_labels={self.n_labels}" if self._ready else ""
        return f"CalibrationOracle({kind}, n_strata={self.n_strata}{extra})"


def _trust_newton(objective, x0):
    """Minimize ``objective(x) -> (f, gradient, Hessian)`` by trust-region Newton
    (``scipy.optimize.minimize(method="trust-exact")``), evaluating it once per point: the
    method asks for ``(f, g)`` and ``H`` at the same ``x``."""
    memo: dict[bytes, tuple] = {}

    def obj(x):
        key = np.asarray(x, dtype=float).tobytes()
        if key not in memo:
            memo.clear()
            memo[key] = objective(x)
        return memo[key]

    return optimize.minimize(
        lambda x: obj(x)[:2],
        x0,
        jac=True,
        hess=lambda x: obj(x)[2],
        method="trust-exact",
        options={"gtol": 1e-8, "maxiter": 500},
    )


register_oracle("calibration", CalibrationOracle)
