"""Beliefs of the lazy adaptive evaluator, evaluated chunk by chunk.

:class:`~bayes_activeeval.adaptive.lazy.LazyActiveEvaluator` never holds a per-item belief. It
holds a small, picklable *chunk belief* that a chunk task turns into the class probabilities of
that chunk's items, and whose per-item *features* (what a drawn item's record keeps) give the
probabilities again at any later stage without reading the pool:

- :class:`PluginBelief`: the models' own probabilities (``oracle="model"``); the features are the
  floored probabilities themselves, fixed for the whole run.
- :class:`CalibrationBelief`: the MAP belief of the Bayesian calibration oracle
  (``oracle="calibration"``, :class:`~bayes_activeeval.oracles.CalibrationOracle`),
  ``P(y = 1 | x) = expit(c + b (x − x̄) + σ z_h(x))``; the features are the covariate ``x`` (a raw
  score standardized as in memory), the score stratum ``h`` and the model's own probability (the
  belief before any label).

The calibration model is fitted on the labeled items only (:class:`LabeledCalibration`): its
likelihood reads the covariate, stratum and label of each labeled item, and its prior three
pool-level statistics, the standardization of a raw score (median and quartiles, exact), the
pivot ``x̄`` and the strata (:func:`calibration_statistics`, a few passes of per-chunk sums). So
the lazy belief is the in-memory oracle's, up to the order of floating-point summation in ``x̄``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from ..beliefs import as_belief
from ..lazy import lazy_quantiles, lazy_score_strata
from ..oracles import CalibrationOracle
from ..oracles._common import prior_probs
from ..oracles.calibration import feature_scaling

__all__ = [
    "CalibrationBelief",
    "LabeledCalibration",
    "PluginBelief",
    "calibration_feature",
    "calibration_statistics",
    "floor_probs",
]


def floor_probs(probs: np.ndarray, floor: float) -> np.ndarray:
    """Class probabilities floored at ``floor`` and renormalized (a new array when floored).

    The floor of unlabeled items in Marchant & Rubinstein (2021), Prop. 2 as the in-memory
    :func:`~bayes_activeeval.adaptive.adaptive_proposal` applies it (labeled items get point
    masses afterwards).

    Parameters
    ----------
    probs : ndarray (n, C)
        Class probabilities, one row per item; with ``floor > 0`` it is not modified.
    floor : float
        The smallest probability of every class before renormalizing; ``<= 0`` returns ``probs``
        itself, unfloored.

    Returns
    -------
    ndarray (n, C)
    """
    if floor <= 0:
        return probs
    out = np.maximum(probs, floor)
    out /= out.sum(axis=1, keepdims=True)
    return out


@dataclass(frozen=True)
class PluginBelief:
    """The plug-in belief on a chunk: the models' probabilities (their mixture for several),
    floored at ``floor``.

    Parameters
    ----------
    models : tuple of str
        The models whose probabilities form the belief (their equal mixture for several).
    floor : float
        The belief floor: every class probability is floored at it and the rows renormalized
        (:func:`floor_probs`).

    Attributes
    ----------
    models : tuple of str
    floor : float
    """

    models: tuple[str, ...]
    floor: float

    def features(self, cp) -> np.ndarray:
        """The floored probabilities of the chunk's items, shape ``(n, C)``."""
        return floor_probs(as_belief(cp, None, self.models).probs, self.floor)

    def probs(self, features: np.ndarray) -> np.ndarray:
        """The floored probabilities from :meth:`features` rows (they are the features)."""
        return features


def calibration_feature(
    cp, model: str, feature: str, clip: float, pos: int, shift: float = 0.0, scale: float = 1.0
) -> np.ndarray:
    """The calibration covariate of a chunk's items, as
    :meth:`~bayes_activeeval.oracles.CalibrationOracle.initialize` computes it: the logit of the
    clipped positive-class probability (``"logit"``) or the score (``"score"``), standardized as
    ``(x − shift) / scale``.

    Parameters
    ----------
    cp : Pool
        The chunk as an in-memory pool (the ``chunk_pool`` of
        :meth:`~bayes_activeeval.lazy.LazyPool.map_chunks`).
    model : str
        The calibrated model.
    feature : {"logit", "score"}
        The covariate, already resolved (any value but ``"logit"`` gives the raw score).
    clip : float
        With ``"logit"``, the probability is clipped to ``[clip, 1 − clip]`` first.
    pos : int
        The positive class.
    shift, scale : float, optional
        The standardization of the pool's covariate (defaults ``0`` and ``1``: none;
        :func:`calibration_statistics` computes it for a raw score as the in-memory oracle does).

    Returns
    -------
    ndarray (n,)
        The covariate ``x`` of the chunk's items.
    """
    view = cp.view(model)
    if feature == "logit":
        x = special.logit(np.clip(view.prob[:, pos], clip, 1.0 - clip))
    else:
        x = np.asarray(view.score, dtype=float)
    if shift != 0.0 or scale != 1.0:
        x = (x - shift) / scale
    return x


@dataclass(frozen=True)
class CalibrationBelief:
    """The calibration oracle's MAP belief on a chunk, floored at ``floor``.

    ``P(y = pos | x) = expit(c + b (x − x̄) + σ z_h)`` with ``θ = (c, log b, log σ, z_1..z_H)``
    (:class:`~bayes_activeeval.oracles.CalibrationOracle`, ``predictive="map"``); before any label
    (``params=None``) the model's own probabilities.

    Parameters
    ----------
    model : str
        The calibrated model.
    feature : {"logit", "score"}
        The covariate: the logit of the clipped positive-class probability, or the raw score.
    clip : float
        Probabilities are clipped to ``[clip, 1 − clip]`` before the logit.
    pos : int
        The positive class.
    x_center : float
        The pivot ``x̄ = Σ w1 x / Σ w1`` (``w1`` the model's positive-class probability).
    inner : ndarray
        The sorted inner boundaries of the raw score strata.
    relabel : ndarray of int
        Maps each raw stratum (``inner.size + 1`` of them) to its stratum ``h`` in ``0..H−1``.
    n_effects : int
        ``H``, the strata with a random effect (0: plain Platt scaling).
    params : ndarray or None
        ``θ`` at the posterior mode; ``None`` before any label (the model's own probabilities).
    floor : float
        The belief floor: both class probabilities are floored at it and renormalized.
    asymptotes : tuple of float, optional
        ``(λ_0, λ_1)``, the fitted lower and upper asymptotes (default ``(0.0, 0.0)``: none).
    x_shift, x_scale : float, optional
        The standardization of a raw score (:func:`~bayes_activeeval.oracles.calibration.
        feature_scaling`; defaults ``0.0`` and ``1.0``: none, as for the log-odds).

    Attributes
    ----------
    model, feature : str
        The calibrated model and the covariate (``"logit"`` or ``"score"``).
    x_shift, x_scale : float
        The standardization ``(s − x_shift) / x_scale`` of the raw covariate ``s`` (``0`` and
        ``1`` for the log-odds).
    clip : float
    pos : int
        The positive class.
    x_center : float
        The pivot ``x̄``.
    inner, relabel : ndarray
        The score strata: raw stratum ``searchsorted(inner, x, "right")``, relabeled.
    n_effects : int
        ``H``, strata with a random effect (0: plain Platt scaling).
    params : ndarray or None
        ``θ`` at the posterior mode.
    floor : float
    asymptotes : tuple of float
        ``(λ_0, λ_1)``, the fitted asymptotes (``lower_asymptote``, ``upper_asymptote``; zeros
        without them): ``P(y = pos | x) = λ_0 + (1 − λ_0 − λ_1) expit(η(x))``.
    """

    model: str
    feature: str
    clip: float
    pos: int
    x_center: float
    inner: np.ndarray
    relabel: np.ndarray
    n_effects: int
    params: np.ndarray | None
    floor: float
    asymptotes: tuple[float, float] = (0.0, 0.0)
    x_shift: float = 0.0
    x_scale: float = 1.0

    def features(self, cp) -> np.ndarray:
        """``(x, h, prior P(y = pos))`` of the chunk's items, shape ``(n, 3)`` (``x``
        standardized)."""
        x = calibration_feature(
            cp, self.model, self.feature, self.clip, self.pos, self.x_shift, self.x_scale
        )
        h = self.strata(x)
        prior = prior_probs(cp, self.model)[:, self.pos]
        return np.stack([x, h.astype(float), prior], axis=1)

    def strata(self, x: np.ndarray) -> np.ndarray:
        """The stratum of each covariate value (zeros without strata)."""
        if not self.n_effects:
            return np.zeros(x.size, dtype=np.int64)
        return self.relabel[np.searchsorted(self.inner, x, side="right")]

    def probs(self, features: np.ndarray) -> np.ndarray:
        """The floored two-class belief from :meth:`features` rows, shape ``(n, 2)``.

        The same operations as :meth:`CalibrationOracle.linear_predictor` and ``belief``, so the
        values equal the in-memory oracle's.
        """
        if self.params is None:
            p1 = features[:, 2]
        else:
            th = self.params
            xt = features[:, 0] - self.x_center
            m = th[0] + np.exp(th[1]) * xt
            if self.n_effects:
                h = features[:, 1].astype(np.int64)
                m = m + np.exp(th[2]) * th[3:][h]
            p1 = CalibrationOracle.with_asymptotes(special.expit(m), *self.asymptotes)
        probs = np.empty((features.shape[0], 2))
        probs[:, self.pos] = p1
        probs[:, 1 - self.pos] = 1.0 - p1
        return floor_probs(probs, self.floor)


def _feature_sums(cp, offset, model, feature, clip, pos, shift=0.0, scale=1.0):
    """``(Σ w1 x, Σ w1, Σ x)`` of a chunk, ``w1`` the model's positive-class probability."""
    x = calibration_feature(cp, model, feature, clip, pos, shift, scale)
    w1 = prior_probs(cp, model)[:, pos]
    return float(np.sum(w1 * x)), float(np.sum(w1)), float(np.sum(x))


def _feature_scores(cp, offset, model, feature, clip, pos, shift=0.0, scale=1.0):
    return calibration_feature(cp, model, feature, clip, pos, shift, scale)


def _moment_sums(cp, offset, model, feature, clip, pos, mean):
    """``(Σ (x − mean)², n)`` of a chunk's raw covariate."""
    x = calibration_feature(cp, model, feature, clip, pos)
    return float(np.sum((x - mean) ** 2)), x.size


def _raw_strata_counts(cp, offset, model, feature, clip, pos, shift, scale, inner):
    x = calibration_feature(cp, model, feature, clip, pos, shift, scale)
    return np.bincount(np.searchsorted(inner, x, side="right"), minlength=inner.size + 1)


def _lazy_feature_scaling(pool, args) -> tuple[float, float]:
    """:func:`~bayes_activeeval.oracles.calibration.feature_scaling` of a lazy pool's raw
    covariate: its quartiles exact (the order statistics behind ``np.quantile``), the standard
    deviation (used only when the IQR is 0) from per-chunk sums."""
    n = pool.n_items
    q = lazy_quantiles(pool, [0.25, 0.5, 0.75], model=(_feature_scores, *args))

    def sd() -> float:
        mean = float(np.sum(pool.map_chunks(_feature_sums, *args), axis=0)[2]) / n
        ss = np.sum(pool.map_chunks(_moment_sums, *args, mean), axis=0)
        return float(np.sqrt(ss[0] / ss[1]))

    return feature_scaling(q, sd)


def calibration_statistics(
    pool, oracle: CalibrationOracle, model: str, floor: float
) -> CalibrationBelief:
    """The pool-level statistics of the calibration oracle on a lazy pool, in passes over chunks.

    The standardization of a raw score (``feature="score"``: median and ``IQR / 1.349``, exact),
    the pivot ``x̄ = Σ w1 x / Σ w1`` (``w1`` the model's positive-class probability; the mean of
    ``x`` when ``Σ w1 = 0``) and the ``n_strata`` cumulative-sqrt(F) strata of ``x``
    (:func:`~bayes_activeeval.lazy.lazy_score_strata`, exact), as
    :meth:`CalibrationOracle.initialize_feature` computes them in memory.

    Parameters
    ----------
    pool : LazyPool
        A binary pool.
    oracle : CalibrationOracle
        Its options (feature, strata, clip) are used.
    model : str
    floor : float
        The belief floor.

    Returns
    -------
    CalibrationBelief
        The belief before any label (``params=None``).
    """
    if pool.task != "binary" or pool.pos is None:
        raise ValueError(
            "the calibration oracle needs a binary pool with a positive class "
            f"(got task={pool.task!r}); use 'dirichlet-tree' for multiclass pools"
        )
    feature = oracle.feature
    if feature == "auto":
        feature = "logit" if pool.has_probs() else "score"
    if feature == "logit" and not pool.has_probs():
        raise ValueError("feature='logit' needs a pool with probs")
    raw_args = (model, feature, oracle.clip, pool.pos)
    shift, scale = 0.0, 1.0
    if feature == "score":  # standardized as CalibrationOracle.initialize_feature does
        shift, scale = _lazy_feature_scaling(pool, raw_args)
    args = (*raw_args, shift, scale)
    sums = np.sum(pool.map_chunks(_feature_sums, *args), axis=0)
    x_center = float(sums[0] / sums[1]) if sums[1] > 0 else float(sums[2] / pool.n_items)
    inner = np.zeros(0)
    relabel = np.zeros(1, dtype=np.int64)
    H = 0
    if oracle.n_strata > 0:
        inner, _, _ = lazy_score_strata(
            pool, oracle.n_strata, method="csf", model=(_feature_scores, *args)
        )
        raw = np.sum(pool.map_chunks(_raw_strata_counts, *args, inner), axis=0)
        used = np.flatnonzero(raw > 0)
        relabel = np.zeros(inner.size + 1, dtype=np.int64)
        relabel[used] = np.arange(used.size)
        H = int(used.size)
    return CalibrationBelief(
        model,
        feature,
        oracle.clip,
        int(pool.pos),
        x_center,
        inner,
        relabel,
        H,
        None,
        floor,
        x_shift=shift,
        x_scale=scale,
    )


class LabeledCalibration(CalibrationOracle):
    """The calibration oracle fitted on the labeled items of a lazy pool only.

    Its items are the labeled items in order of first labeling (as the in-memory oracle's label
    cache holds them); the pool-level pivot ``x̄`` and strata come from a
    :class:`CalibrationBelief` (:func:`calibration_statistics`). :meth:`refit` runs the in-memory
    oracle's own MAP fit (:meth:`CalibrationOracle.update`) on them, warm-started from the last
    fit as in memory, so the parameters equal the in-memory oracle's. Only
    ``predictive="map"`` (the default) is supported.

    Parameters
    ----------
    deterministic : bool, optional
        One label per item (default ``True``; :meth:`from_options` always passes ``True``).
    model : str, optional
        As for :class:`~bayes_activeeval.oracles.CalibrationOracle`; on a lazy pool the
        calibrated model is the one passed to :func:`calibration_statistics` instead.
    feature : {"auto", "logit", "score"}, optional
        The covariate (default ``"auto"``: ``"logit"`` when the pool has probabilities).
    n_strata : int, optional
        Score strata with their own random effect (default 10; 0: plain Platt scaling).
    intercept_sd, log_slope_sd, stratum_sd : float, optional
        Prior scales of the intercept, the log slope and the stratum effects (defaults 2.5, 1.0
        and 0.5).
    clip : float, optional
        Probabilities are clipped to ``[clip, 1 − clip]`` before the logit (default ``1e-6``).
    predictive : {"map", "mean"}, optional
        The belief (default ``"map"``, the plug-in at the posterior mode, the only one supported
        here: :meth:`from_options` refuses ``"mean"``).
    n_samples, seed, grid_size : int, optional
        The posterior-predictive settings of
        :class:`~bayes_activeeval.oracles.CalibrationOracle` (defaults 512, 0 and 128); they do
        not enter the MAP belief.
    lower_asymptote, upper_asymptote : float, optional
        Dirichlet pseudo-counts of the asymptotes ``λ_0`` and ``λ_1`` (default 0: left out).
    """

    def refit(self, stats: CalibrationBelief, x: np.ndarray, h: np.ndarray, y: np.ndarray):
        """Fit on all labeled items (covariate ``x``, stratum ``h``, label ``y`` in ``0..1``).

        Returns
        -------
        ndarray
            ``θ`` at the posterior mode (the asymptotes are in :attr:`lam`).
        """
        warm = self.params if getattr(self, "fitted_", False) else None
        warm_lam = self.lam.copy() if warm is not None else np.zeros(2)
        prior = np.zeros((x.size, 2))
        prior[:, stats.pos] = 1.0
        # x is already standardized with the pool's scaling (CalibrationBelief.features)
        self.initialize_feature(x, prior, stats.pos, feature=stats.feature, standardize=False)
        self.x_shift, self.x_scale = stats.x_shift, stats.x_scale
        self.lam = warm_lam  # the asymptotes warm-start too, as in memory
        # the pool's pivot and strata, not the labeled items' own
        self.x_center = stats.x_center
        self.xt = self.x - self.x_center
        self.strata = np.asarray(h, dtype=np.int64)
        self.H = stats.n_effects
        self.params = self._prior_mean() if warm is None else warm
        self.update(np.arange(x.size), y)
        self.fitted_ = True
        return self.params.copy()

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> LabeledCalibration:
        """A deterministic-oracle instance with the calibration oracle's options."""
        oracle = cls(deterministic=True, **options)
        if oracle.predictive_kind != "map":
            raise NotImplementedError(
                "on a lazy pool the calibration oracle gives its MAP belief (predictive='map')"
            )
        return oracle
