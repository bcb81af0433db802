"""Comparing models: paired Wald tests, power-optimal proposals, simultaneous tests, ranking.

Two models ``a`` and ``b`` are scored on the *same* draws with the *same* importance weights
(Sawade (2012), Sec. 3.2.1). The target is the difference ``Δ = G_a − G_b`` of any measure, a
generalized measure itself (:func:`~bayes_activeeval.measures.difference`), so the one
self-normalized estimator and the one delta-method variance of :mod:`bayes_activeeval.estimators`
give the paired estimate and its standard error (Sawade (2012), Eqs. 3.21-3.22; ratio measures such
as F1 through the delta method). The variance is the scale-invariant *thesis* form
``S² = n Σ v_i² (δ_i − Δ̂)² / (Σ v_i)²`` (Eq. 3.22), not the ``(1/W) Σ v_i² (δ_i − Δ̂)²`` printed in
Sawade et al. (2012), Eq. 4, which is too small by the support mass of ``q`` and rejects a true
null about half of the time under ``active_≠`` sampling.

For ``k`` models the stacked measure (:func:`~bayes_activeeval.measures.stack`) gives the joint
delta-method covariance of the ``k`` estimates on one shared sample; all-pairs (Tukey-type),
many-to-one (Dunnett-type), Holm and Bonferroni procedures are built on it
(Sawade (2012), Sec. 3.2.3).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import optimize, stats

from ._validation import check_count, check_fraction, check_level, check_model_names, check_rng
from .beliefs import as_belief, pool_belief
from .estimators import ConfidenceInterval, Estimate, draw_labels, weighted_estimate
from .measures import Measure, difference, stack
from .measures import get as get_measure
from .proposals import (
    CHUNK,
    DEFAULT_BELIEF_FLOOR,
    DEFAULT_MIX,
    Draws,
    Proposal,
    _costs,
    _mix,
    optimal_proposal,
)

__all__ = [
    "BestModel",
    "ComparisonResult",
    "MultipleComparisonResult",
    "compare",
    "comparison_proposal",
    "disagreement",
    "multiple_comparison",
    "wald_test",
]

_ALTERNATIVES = ("two-sided", "less", "greater")
PROPOSAL_KINDS = ("optimal", "passive", "active_0", "active_inf", "active_neq", "active_risk")
#: Absolute error requested from Genz's algorithm (``engine="scipy"``); tighter requests are
#: very slow for the singular all-pairs family (seconds per p-value for k = 5).
MVN_ABSEPS = 5e-4
MC_METHODS = ("tukey", "studentized_range", "dunnett", "holm", "bonferroni", "none")


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def _models_arg(
    pool, models, minimum: int, *, two: bool = False, name: str = "models"
) -> tuple[str, ...]:
    if models is None:
        models = pool.models
        if two and len(models) != 2:
            raise ValueError(
                f"the pool has models {list(models)}; name the two to compare with {name}=(a, b)"
            )
    models = check_model_names(models, minimum, name)
    for m in models:
        pool.check_model(m)
    return models


def _is_linear(measure: Measure) -> bool:
    """``g`` is the identity (a plain risk such as the error rate or MSE)."""
    return measure._g is None and measure.models is None


def _check_inputs(draws: Draws, oracle: str, variance: str) -> None:
    """Checks shared by :func:`compare` and :func:`multiple_comparison`."""
    if not isinstance(draws, Draws):
        raise TypeError(
            f"draws must be a Draws object (from Proposal.draw), got {type(draws).__name__}"
        )
    if oracle not in ("deterministic", "stochastic"):
        raise ValueError(f"oracle must be 'deterministic' or 'stochastic', got {oracle!r}")
    if variance not in ("auto", "wald", "score"):
        raise ValueError(f"variance must be 'auto', 'wald' or 'score', got {variance!r}")


def _resolve_variance(base: Measure, variance: str) -> str:
    """``"auto"``: ``"score"`` for plain risks, ``"wald"`` otherwise; ``"score"`` needs a plain risk."""
    if variance == "auto":
        return "score" if _is_linear(base) else "wald"
    if variance == "score" and not _is_linear(base):
        raise ValueError(
            f"variance='score' needs a plain risk (g the identity); {base.name!r} is a ratio or "
            "non-linear measure: use variance='wald'"
        )
    return variance


def _check_alternative(alternative: str) -> str:
    if alternative not in _ALTERNATIVES:
        raise ValueError(
            f"alternative must be 'two-sided', 'less' or 'greater', got {alternative!r}"
        )
    return alternative


def _wald_pvalue(z: float, alternative: str) -> float:
    """Wald p-value (Sawade (2012), Eq. 3.24); ``2·sf`` rather than ``2(1 − cdf)``."""
    if np.isnan(z):
        return np.nan
    if alternative == "two-sided":
        return float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
    if alternative == "less":
        return float(stats.norm.cdf(z))
    return float(stats.norm.sf(z))


def _z(estimate: float, stderr: float) -> float:
    if not np.isfinite(estimate) or not np.isfinite(stderr):
        return np.nan
    if stderr > 0:
        return estimate / stderr
    # degenerate sample (all paired differences equal): no evidence if Δ̂ = 0 (gotcha D.4)
    return 0.0 if estimate == 0 else np.copysign(np.inf, estimate)


def wald_test(
    estimate: float, stderr: float, alternative: str = "two-sided"
) -> tuple[float, float]:
    """Wald statistic ``T = Δ̂/SE`` and its p-value (Sawade (2012), Eq. 3.23-3.24).

    For callers that estimate ``Δ̂`` and its standard error themselves (e.g.
    :mod:`bayes_activeeval.ranking`). A zero standard error gives ``T = 0`` if ``Δ̂ = 0`` and
    ``±inf`` otherwise.
    """
    alternative = _check_alternative(alternative)
    z = _z(float(estimate), float(stderr))
    return float(z), _wald_pvalue(z, alternative)


def disagreement(pool, measure: str | Measure, a: str, b: str) -> np.ndarray:
    """Items where the losses of models ``a`` and ``b`` can differ, ``D_≠`` (Sawade (2012),
    Sec. 5.2.2).

    For classification an item belongs to ``D_≠`` when ``ℓ_a(x, y) ≠ ℓ_b(x, y)`` for some class
    ``y`` (exact enumeration over the classes); for regression when the two models' views differ
    (prediction, predictive std or score), since a loss can only read those.

    Returns
    -------
    ndarray of bool, shape (n_items,)
    """
    diff = difference(get_measure(measure), a, b)
    m, views = pool.resolve(diff)
    out = np.zeros(pool.n_items, dtype=bool)
    d = m.dim // 2
    for start in range(0, pool.n_items, CHUNK):
        sl = slice(start, min(start + CHUNK, pool.n_items))
        v = views(sl)
        if pool.task == "regression":
            va, vb = v[a], v[b]
            neq = va.pred != vb.pred
            for fa, fb in ((va.std, vb.std), (va.score, vb.score)):
                if fa is not None:
                    neq |= fa != fb
            out[sl] = neq
            continue
        for c in range(pool.n_classes):
            y = np.full(sl.stop - sl.start, c, dtype=np.int32)
            L = m.loss(y, v)
            out[sl] |= np.any(L[:, :d] != L[:, d:], axis=1)
    return out


def _support_mass(proposal: Proposal) -> float:
    return float(proposal.p[proposal.q > 0].sum())


# ------------------------------------------------------------------------------------------------
# two models
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class ComparisonResult:
    """The paired Wald test of ``H0: G_a = G_b`` (Sawade (2012), Eqs. 3.21-3.24).

    Attributes
    ----------
    statistic : float
        ``T = Δ̂ / SE`` (Eq. 3.23), asymptotically ``N(0, 1)`` under ``H0``.
    pvalue : float
        Wald p-value for ``alternative`` (Eq. 3.24).
    estimate : float
        ``Δ̂ = Ĝ_a − Ĝ_b`` (Eq. 3.21).
    stderr : float
        Standard error of ``Δ̂`` (Eq. 3.22 divided by ``√n``; delta method for ratio measures).
    alternative : str
        ``"two-sided"``, ``"less"`` (``H1: G_a < G_b``) or ``"greater"``.
    models : tuple of str
        ``(a, b)``.
    estimates : dict
        Per-model estimates ``{a: Ĝ_a, b: Ĝ_b}`` (NaN when the proposal left out the items where
        the models agree: then only the difference is identified).
    stderrs : dict
        Their standard errors.
    n_draws, n_labels : int
        Draws entering the estimate and labels bought.
    measure : str
    greater_is_better : bool
        Whether larger values of the measure are better (decides :attr:`better`).
    support_mass : float
        ``Σ_{q>0} p``: 1 unless the proposal is zero where the models agree, in which case the
        conditional estimate was multiplied by it (Sawade (2012), Sec. 5.2.2, ``active_≠``).
    """

    statistic: float
    pvalue: float
    estimate: float
    stderr: float
    alternative: str
    models: tuple[str, str]
    estimates: dict[str, float]
    stderrs: dict[str, float]
    n_draws: int
    n_labels: int
    measure: str
    greater_is_better: bool = False
    support_mass: float = 1.0
    variance: str = "wald"
    _sums: tuple[float, ...] | None = field(default=None, repr=False)

    @property
    def better(self) -> str | None:
        """The model that looks better on this sample (``None`` on a tie)."""
        if not np.isfinite(self.estimate) or self.estimate == 0:
            return None
        a_larger = self.estimate > 0
        return self.models[0] if a_larger == self.greater_is_better else self.models[1]

    def confidence_interval(self, level: float = 0.95) -> ConfidenceInterval:
        """Confidence interval for ``Δ = G_a − G_b``, dual to the test.

        ``variance="wald"``: the Wald interval ``Δ̂ ± z_{(1+level)/2} SE`` (Sawade (2012),
        Sec. 3.2.2, Eq. 3.16 with ``δ``). ``variance="score"``: the set of ``Δ0`` that the
        score-type test does not reject, ``|Σ v (δ − Δ0)| ≤ z sqrt(Σ v² (δ − Δ0)²)`` — a
        quadratic inequality in ``Δ0`` (a Wilson-type interval; the whole line if the effective
        sample size ``(Σ v)²/Σ v²`` is below ``z²``). One-sided alternatives give one-sided
        intervals, as :func:`scipy.stats.ttest_rel`.
        """
        level = check_level(level)
        if self.variance == "score" and self._sums is not None:
            return self._score_interval(level)
        if self.alternative == "two-sided":
            h = stats.norm.ppf(0.5 + level / 2) * self.stderr
            return ConfidenceInterval(self.estimate - h, self.estimate + h)
        h = stats.norm.ppf(level) * self.stderr
        if self.alternative == "less":
            return ConfidenceInterval(-np.inf, self.estimate + h)
        return ConfidenceInterval(self.estimate - h, np.inf)

    def _score_interval(self, level: float) -> ConfidenceInterval:
        A, W, B, C, D = self._sums
        two = self.alternative == "two-sided"
        z = stats.norm.ppf(0.5 + level / 2) if two else stats.norm.ppf(level)
        a, b, c = W * W - z * z * D, A * W - z * z * C, A * A - z * z * B
        if a <= 0:
            lo, hi = -np.inf, np.inf
        else:
            root = np.sqrt(max(b * b - a * c, 0.0))
            lo, hi = (b - root) / a * self.support_mass, (b + root) / a * self.support_mass
        if self.alternative == "less":
            return ConfidenceInterval(-np.inf, hi)
        if self.alternative == "greater":
            return ConfidenceInterval(lo, np.inf)
        return ConfidenceInterval(lo, hi)

    def to_frame(self) -> pd.DataFrame:
        """One row per model (estimate, stderr) and one for the difference."""
        a, b = self.models
        rows = {
            a: (self.estimates[a], self.stderrs[a]),
            b: (self.estimates[b], self.stderrs[b]),
            f"{a} - {b}": (self.estimate, self.stderr),
        }
        return pd.DataFrame.from_dict(rows, orient="index", columns=["estimate", "stderr"])

    def __repr__(self) -> str:
        a, b = self.models
        lo, hi = self.confidence_interval(0.95)
        per = ", ".join(f"{m}={self.estimates[m]:.4g}" for m in self.models)
        return (
            f"ComparisonResult({self.measure}[{a}] - {self.measure}[{b}] = {self.estimate:.4g} "
            f"± {self.stderr:.3g}, statistic={self.statistic:.4g}, pvalue={self.pvalue:.4g}, "
            f"alternative={self.alternative!r}, 95% CI=({lo:.4g}, {hi:.4g}), "
            f"variance={self.variance!r}; {per}; "
            f"n_draws={self.n_draws}, n_labels={self.n_labels})"
        )


def compare(
    pool,
    measure: str | Measure,
    draws: Draws,
    labels: Any,
    models: Sequence[str] | None = None,
    *,
    alternative: str = "two-sided",
    oracle: str = "deterministic",
    proposal: Proposal | None = None,
    variance: str = "auto",
) -> ComparisonResult:
    """Paired importance-weighted comparison of two models with a Wald test.

    Both models are scored on the same labeled draws with the same weights ``v = p/q``;
    ``Δ̂ = Σ v_i δ_i / Σ v_i`` (Sawade (2012), Eq. 3.21; for ratio measures ``Δ̂ = g(R̂_a) − g(R̂_b)``
    with the delta-method variance, Marchant & Rubinstein (2021), Thm. 2), ``T = Δ̂/SE``
    (Eq. 3.23) and the p-value of Eq. 3.24. The variance is the calibrated thesis form (Eq. 3.22).

    Parameters
    ----------
    pool : Pool
        A pool with (at least) the two models.
    measure : str or Measure
        Any scalar measure (``"error_rate"``, ``"f1"``, ``"mse"``, …), unbound.
    draws : Draws
        From :meth:`Proposal.draw` (any proposal: passive, :func:`comparison_proposal`, …).
    labels : array-like or mapping
        The label of each draw (aligned with ``draws.indices``) or ``{item: label}``.
    models : (str, str), optional
        ``(a, b)``; ``Δ = G_a − G_b``. Default: the pool's two models.
    alternative : {"two-sided", "less", "greater"}
        ``"less"``: ``H1: G_a < G_b``; ``"greater"``: ``H1: G_a > G_b``.
    oracle : {"deterministic", "stochastic"}
        As in :func:`~bayes_activeeval.estimate`.
    proposal : Proposal, optional
        The proposal the draws came from. Needed only when it is zero on items where the two
        models agree (``active_≠``, ``active_0``, ``active_inf`` with ``mix=0``): the
        self-normalized estimate then targets the difference *on the support*, and is multiplied
        by the support mass ``Σ_{q>0} p`` to give ``Δ`` (Sawade (2012), Sec. 5.2.2). The test
        statistic and p-value do not change.
    variance : {"auto", "wald", "score"}
        The variance in the test statistic. ``"wald"``: the thesis form centred at the estimate,
        ``S² = n Σ v² (δ − Δ̂)²/(Σ v)²`` (Eq. 3.22). ``"score"``: the same form centred at the
        null value, ``Σ v² (δ − 0)²/(Σ v)²`` — the variance of ``Δ̂`` *under H0*; only for plain
        risks (``g`` the identity: error rate, accuracy, MSE, MAE, Brier), where ``δ`` is the
        paired loss difference. Under active proposals a few draws with large weights where the
        models agree (``δ = 0``) add ``v² Δ̂²`` to the Wald variance, which makes the Wald test
        very conservative at small ``n`` (type-I error 0.01 instead of 0.05 at ``n = 100`` in
        ``benchmarks/comparison_type1_power.py``) and costs power; the score form is exact in
        the swap protocol and asymptotically equivalent. ``"auto"`` (default): ``"score"`` for
        plain risks, ``"wald"`` otherwise (ratio measures such as F1). :attr:`stderr` is always
        the Wald standard error of the estimate; the interval is dual to the test.

    Returns
    -------
    ComparisonResult

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.3, n_models=2, rng=0)
    >>> prop = bae.comparison_proposal(sp.pool, "error_rate", models=("m0", "m1"))
    >>> draws = prop.draw(300, rng=1)
    >>> res = bae.compare(sp.pool, "error_rate", draws, sp.labeler(draws.indices),
    ...                   models=("m0", "m1"))
    >>> lo, hi = res.confidence_interval(0.95)
    """
    _check_inputs(draws, oracle, variance)
    alternative = _check_alternative(alternative)
    pair = _models_arg(pool, models, 2, two=True)
    if len(pair) != 2:
        raise ValueError(f"models must name exactly two models, got {models!r}")
    a, b = pair
    base = get_measure(measure)
    if base.models is not None:
        raise ValueError(
            f"measure {base.name!r} is already bound to models {base.models}; pass the plain "
            "measure and models=(a, b)"
        )
    diff_m, views = pool.resolve(difference(base, a, b))
    st_m = stack(base, (a, b)).resolve(pool.n_classes)
    y = draw_labels(pool, draws.indices, labels, oracle=oracle)
    L = diff_m.loss(y, views(draws.indices))
    n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
    est = weighted_estimate(L, draws.weights, diff_m, n_labels=n_labels)
    per = weighted_estimate(L, draws.weights, st_m, n_labels=n_labels)

    scale = 1.0
    if proposal is not None:
        if not isinstance(proposal, Proposal):
            raise TypeError(f"proposal must be a Proposal, got {type(proposal).__name__}")
        if proposal.n_items != pool.n_items:
            raise ValueError(
                f"proposal covers {proposal.n_items} items but the pool has {pool.n_items}"
            )
        scale = _support_mass(proposal)
        if scale < 1.0 - 1e-12:
            _check_restricted(pool, base, a, b, proposal, draws)
    variance = _resolve_variance(base, variance)
    value, se = float(est.values[0]) * scale, float(est.stderrs[0]) * scale
    sums = None
    if variance == "score":
        delta = L[:, 0] - L[:, 1]
        v = np.asarray(draws.weights, dtype=float)
        v2 = v * v
        sums = (
            float(v @ delta),
            float(v.sum()),
            float(v2 @ (delta * delta)),
            float(v2 @ delta),
            float(v2.sum()),
        )
        A, W, B = sums[0], sums[1], sums[2]
        z = _z(A, np.sqrt(B)) if W > 0 else np.nan
    else:
        z = _z(value, se)
    if scale < 1.0 - 1e-12:
        estimates = {a: np.nan, b: np.nan}
        stderrs = {a: np.nan, b: np.nan}
    else:
        estimates = {a: float(per.values[0]), b: float(per.values[1])}
        stderrs = {a: float(per.stderrs[0]), b: float(per.stderrs[1])}
    return ComparisonResult(
        statistic=float(z),
        pvalue=_wald_pvalue(z, alternative),
        estimate=value,
        stderr=se,
        alternative=alternative,
        models=(a, b),
        estimates=estimates,
        stderrs=stderrs,
        n_draws=len(draws),
        n_labels=n_labels,
        measure=base.name,
        greater_is_better=base.greater_is_better,
        support_mass=scale,
        variance=variance,
        _sums=sums,
    )


def _check_restricted(pool, base, a, b, proposal: Proposal, draws: Draws) -> None:
    """A proposal with zero mass somewhere is only valid for a plain risk and only where the
    paired loss difference is identically zero (Sawade et al. (2012), gotcha D.3)."""
    if not _is_linear(base):
        raise ValueError(
            f"the proposal gives zero mass to {int(np.sum(proposal.q <= 0))} items; for the "
            f"non-linear measure {base.name!r} every item can move the estimate, so use a "
            "proposal with full support (mix > 0)"
        )
    off = (proposal.q <= 0) & (proposal.p > 0)
    bad = np.flatnonzero(off & disagreement(pool, base, a, b))
    if bad.size:
        raise ValueError(
            f"the proposal gives zero mass to item {bad[0]} (and {bad.size - 1} more) where the "
            f"losses of {a!r} and {b!r} can differ; the difference is not identified"
        )
    if np.any(proposal.q[draws.indices] <= 0):
        raise ValueError("some draws have zero probability under proposal; wrong proposal?")


# ------------------------------------------------------------------------------------------------
# proposals for comparisons
# ------------------------------------------------------------------------------------------------
def _pair_scores(pool, base, a, b, kind, belief, costs, floor) -> np.ndarray:
    """Unnormalized, unmixed pairwise proposal scores ``s(x)`` (q ∝ s) for one pair."""
    p = pool.p
    c = _costs(pool, costs)
    if kind == "optimal":
        # Sawade (2012), Thm. 5.1 through the general proposal (mix=1 only skips the mixing and
        # support check here; the integrand u(x) is what we need)
        prop = optimal_proposal(
            pool,
            difference(base, a, b),
            belief=belief,
            costs=False,
            belief_floor=floor,
            mix=1.0,
        )
        s = p * np.sqrt(np.maximum(prop.info["u"], 0.0))
    elif kind in ("active_0", "active_inf"):
        if pool.task != "regression":
            raise ValueError(
                f"kind={kind!r} is a regression baseline (Sawade (2012), Sec. 5.2.2); "
                "use 'active_neq' for classification"
            )
        gap = np.abs(pool.view(a).pred - pool.view(b).pred)
        s = p * (gap**2 if kind == "active_0" else gap)
    elif kind == "active_neq":
        mask = disagreement(pool, base, a, b)
        s = np.where(mask, p, 0.0)
    else:  # pragma: no cover - guarded by the caller
        raise AssertionError(kind)
    if c is not None:
        s = s / np.sqrt(c)
    return s


def comparison_proposal(
    pool,
    measure: str | Measure,
    models: Sequence[str] | None = None,
    *,
    kind: str = "optimal",
    belief: Any = None,
    costs: Any = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    mix: float = DEFAULT_MIX,
) -> Proposal:
    """A sampling distribution for comparing two or more models.

    Two models:

    - ``"optimal"`` — the power-optimal proposal ``q* ∝ p sqrt(E_π(δ − Δ̌)²)`` of Sawade (2012),
      Thm. 5.1 (Eq. 5.5), computed by the general :func:`~bayes_activeeval.optimal_proposal` for
      the measure :func:`~bayes_activeeval.measures.difference`, with the equal-mixture belief
      ``π = ½π_a + ½π_b`` (Eq. 5.11) and the intrinsic difference ``Δ̌`` (Eq. 5.12). Cor. 5.1
      (zero-one loss), Cor. 5.2 (squared loss) and the mixture form of Sec. 5.2.2 are special
      cases; ratio measures use ``‖Dg(R)(ℓ − R)‖`` with ``Dg = [Dg_a, −Dg_b]``.
    - ``"active_neq"`` — uniform (by ``p``) on the disagreement set ``D_≠`` (Sec. 5.2.2).
    - ``"active_0"`` / ``"active_inf"`` — ``q ∝ p (f_a − f_b)²`` / ``q ∝ p |f_a − f_b|``
      (regression, Sec. 5.2.2).
    - ``"active_risk"`` — ``½ q*_a + ½ q*_b``, the single-model optimal proposals with each
      model's own belief (Sec. 5.2.2; Sawade et al. (2012), "ARE").
    - ``"passive"`` — ``q = p``.

    ``k > 2`` models: the mixture of the normalized pairwise proposals over all pairs,
    ``q = 1/(k(k−1)) Σ_{i≠j} q*_{ij}`` (Sawade (2012), Eq. 5.16), with the belief the equal
    mixture over all ``k`` models; ``"active_risk"`` averages the ``k`` single-model proposals.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        An unbound scalar measure.
    models : sequence of str, optional
        Default: all models of the pool (at least two).
    kind : str
        One of ``"optimal"``, ``"passive"``, ``"active_0"``, ``"active_inf"``, ``"active_neq"``,
        ``"active_risk"``.
    belief : Belief or array-like, optional
        ``π(y|x)`` (e.g. an oracle model's posterior predictive). Default: the equal mixture of
        the models' predictive distributions.
    costs : None, bool or array-like
        Label costs (``q ∝ … c^{-1/2}``, Sawade (2012), Thm. 4.2); default the pool's.
    belief_floor : float
        As in :func:`~bayes_activeeval.optimal_proposal`.
    mix : float
        Defensive mixture ``q ← (1 − δ) q + δ p``. With ``mix=0`` the baselines ``active_neq``,
        ``active_0``, ``active_inf`` are zero where the models agree; pass the proposal to
        :func:`compare` (``proposal=``), which then rescales the estimate by the support mass
        ``|D_≠|/|D|`` (only valid for plain risks such as the error rate or MSE).

    Returns
    -------
    Proposal
        ``info`` holds ``comparison`` (the kind), ``models``, ``support_mass`` and, for
        ``"optimal"`` with two models, ``risk`` (``(R̂_a, R̂_b)`` under the belief), ``u`` and
        ``intrinsic_difference`` (``Δ̌``, Eq. 5.12).
    """
    if kind not in PROPOSAL_KINDS:
        raise ValueError(f"kind must be one of {', '.join(PROPOSAL_KINDS)}; got {kind!r}")
    models = _models_arg(pool, models, 2)
    base = get_measure(measure)
    if base.models is not None:
        raise ValueError(f"measure {base.name!r} is already bound to models {base.models}")
    floor = check_fraction(belief_floor, "belief_floor")
    mix = check_fraction(mix, "mix", allow_one=True)
    p = pool.p
    k = len(models)
    info: dict[str, Any] = {"comparison": kind, "models": models, "mix": mix}

    if kind == "passive":
        q = p.copy()
    elif kind == "optimal" and k == 2:
        prop = optimal_proposal(
            pool,
            difference(base, *models),
            belief=belief,
            costs=costs,
            belief_floor=floor,
            mix=mix,
        )
        prop.info.update(info)
        m = pool.resolve(difference(base, *models))[0]
        R = prop.info["risk"]
        d = R.size // 2
        prop.info["intrinsic_difference"] = float(m.g(R)[0])
        prop.info["estimates_under_belief"] = {
            models[0]: float(base.resolve(pool.n_classes).g(R[:d])[0]),
            models[1]: float(base.resolve(pool.n_classes).g(R[d:])[0]),
        }
        prop.info["support_mass"] = _support_mass(prop)
        return prop
    elif kind == "active_risk":
        q = np.zeros(pool.n_items)
        for mod in models:
            own = optimal_proposal(
                pool, base, model=mod, costs=costs, belief_floor=floor, mix=1.0
            ).info["u"]
            s = p * np.sqrt(np.maximum(own, 0.0))
            c = _costs(pool, costs)
            if c is not None:
                s = s / np.sqrt(c)
            q += s / s.sum() if s.sum() > 0 else p
        q /= k
    else:
        if kind == "optimal":
            # Eq. 5.16: the label belief is the equal mixture over all k models
            b = as_belief(pool, belief, models) if belief is not None else pool_belief(pool, models)
        else:
            b = None
        q = np.zeros(pool.n_items)
        n_pairs = 0
        for i in range(k):
            for j in range(i + 1, k):
                s = _pair_scores(pool, base, models[i], models[j], kind, b, costs, floor)
                if s.sum() > 0:
                    q += s / s.sum()
                    n_pairs += 1
        if n_pairs == 0:
            raise ValueError(
                f"the models {list(models)} agree on every item; there is nothing to compare"
            )
        q /= n_pairs
    q = _mix(q, p, mix)
    out = Proposal(q, p, kind, info)
    out.info["support_mass"] = _support_mass(out)
    return out


# ------------------------------------------------------------------------------------------------
# k models
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BestModel:
    """The best model and the probability of each model being the best.

    Attributes
    ----------
    model : str
        The model with the best estimate.
    probability : float
        ``P(model is best)`` under the sampling (or posterior) distribution.
    probabilities : pandas.Series
        ``P(best)`` for every model.
    source : str
        ``"bootstrap"`` (parametric, joint normal of the estimates) or ``"posterior"``.
    """

    model: str
    probability: float
    probabilities: pd.Series
    source: str


@dataclass(frozen=True, repr=False)
class MultipleComparisonResult:
    """Simultaneous pairwise comparisons of ``k`` models on one shared labeled sample.

    Tables are ``k × k`` arrays indexed ``[i, j]`` for the contrast ``G_i − G_j`` (NaN outside
    the family tested, e.g. pairs not involving the baseline for Dunnett), as in
    :class:`scipy.stats._result_classes.TukeyHSDResult`.

    Attributes
    ----------
    models : tuple of str
    estimates : ndarray (k,)
        ``Ĝ_i``.
    cov : ndarray (k, k)
        Their joint delta-method covariance (Sawade (2012), Lemma 3.4 on the stacked loss).
    difference : ndarray (k, k)
        ``Ĝ_i − Ĝ_j``.
    stderr : ndarray (k, k)
        Standard errors of the differences (``sqrt(Σ_ii + Σ_jj − 2Σ_ij)``; the pooled one for
        the studentized range).
    statistic : ndarray (k, k)
        Test statistics ``(Ĝ_i − Ĝ_j)/SE_ij`` (with the null-centred SE for
        ``variance="score"``).
    pvalue : ndarray (k, k)
        Multiplicity-adjusted p-values.
    raw_pvalue : ndarray (k, k)
        Unadjusted two-sided Wald p-values.
    method : str
    level : float
        Simultaneous confidence level of :meth:`confidence_interval` and :attr:`reject`.
    critical_value : float
        Simultaneous critical value ``c`` for ``|statistic|`` (intervals ``Δ̂ ± c·SE``).
    baseline : str or None
    measure : str
    greater_is_better : bool
    n_draws, n_labels : int
    """

    models: tuple[str, ...]
    estimates: np.ndarray
    cov: np.ndarray
    difference: np.ndarray
    stderr: np.ndarray
    statistic: np.ndarray
    pvalue: np.ndarray
    raw_pvalue: np.ndarray
    method: str
    level: float
    critical_value: float
    baseline: str | None
    measure: str
    greater_is_better: bool
    n_draws: int
    n_labels: int
    variance: str = "wald"
    _crit: Any = field(default=None, repr=False)
    _score: Any = field(default=None, repr=False)

    # -- tables ----------------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.models)

    @property
    def stderrs(self) -> np.ndarray:
        """Standard errors of the ``k`` estimates."""
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))

    @property
    def reject(self) -> np.ndarray:
        """``pvalue < 1 − level`` (the family-wise error is at most ``1 − level``)."""
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(self.pvalue), False, self.pvalue < 1.0 - self.level)

    def confidence_interval(self, level: float | None = None) -> ConfidenceInterval:
        """Simultaneous intervals for every ``G_i − G_j`` in the family, ``(low, high)`` k × k.

        Tukey/Dunnett: ``Δ̂_ij ± c SE_ij`` with ``c`` the ``level`` quantile of the max-|z| over the
        family (with ``variance="score"``: the pairs' score tests inverted at ``c``); studentized range: ``c = q_{k,ν}(level)/√2`` with the pooled SE; Holm and
        Bonferroni: Bonferroni intervals (level ``1 − (1 − level)/K``; Holm has no matching
        simultaneous intervals); ``"none"``: per-pair Wald intervals.
        """
        level = self.level if level is None else check_level(level)
        c = self.critical_value if level == self.level else self._crit(level)
        if self._score is not None:
            # invert |Σ v (δ − Δ0)| ≤ c sqrt(Σ v² (δ − Δ0)²) per pair (as compare(variance="score"))
            A, C, D, W, B = self._score
            a = W * W - c * c * D
            b = A * W - c * c * C
            cc = A * A - c * c * B
            with np.errstate(invalid="ignore", divide="ignore"):
                root = np.sqrt(np.clip(b * b - a * cc, 0.0, None))
                lo = np.where(a > 0, (b - root) / a, -np.inf)
                hi = np.where(a > 0, (b + root) / a, np.inf)
            nan = np.isnan(self.difference)
            return ConfidenceInterval(np.where(nan, np.nan, lo), np.where(nan, np.nan, hi))
        half = c * self.stderr
        return ConfidenceInterval(self.difference - half, self.difference + half)

    def to_dataset(self) -> xr.Dataset:
        """The k × k tables as an :class:`xarray.Dataset` (dims ``model``, ``versus``)."""
        ci = self.confidence_interval()
        coords = {"model": list(self.models), "versus": list(self.models)}
        dims = ("model", "versus")
        return xr.Dataset(
            {
                "difference": (dims, self.difference),
                "stderr": (dims, self.stderr),
                "statistic": (dims, self.statistic),
                "pvalue": (dims, self.pvalue),
                "raw_pvalue": (dims, self.raw_pvalue),
                "lower": (dims, ci.low),
                "upper": (dims, ci.high),
                "reject": (dims, self.reject),
                "estimate": (("model",), self.estimates),
            },
            coords=coords,
            attrs={"method": self.method, "level": self.level, "measure": self.measure},
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per tested pair ``(i < j)``, like statsmodels' ``summary_frame``."""
        ci = self.confidence_interval()
        rows = []
        for i, j in self._pairs():
            rows.append(
                {
                    "model": self.models[i],
                    "versus": self.models[j],
                    "difference": self.difference[i, j],
                    "stderr": self.stderr[i, j],
                    "statistic": self.statistic[i, j],
                    "pvalue": self.pvalue[i, j],
                    "lower": ci.low[i, j],
                    "upper": ci.high[i, j],
                    "reject": bool(self.reject[i, j]),
                }
            )
        return pd.DataFrame(rows)

    def _pairs(self) -> list[tuple[int, int]]:
        if self.baseline is not None:
            b = self.models.index(self.baseline)
            return [(i, b) for i in range(self.k) if i != b]
        return [(i, j) for i in range(self.k) for j in range(i + 1, self.k)]

    # -- ranking ---------------------------------------------------------------------------------
    def ranking(self) -> pd.DataFrame:
        """Models ordered best first: estimate, stderr and rank (1 = best)."""
        order = np.argsort(-self.estimates if self.greater_is_better else self.estimates)
        return pd.DataFrame(
            {
                "estimate": self.estimates[order],
                "stderr": self.stderrs[order],
                "rank": np.arange(1, self.k + 1),
            },
            index=pd.Index([self.models[i] for i in order], name="model"),
        )

    def _samples(self, n_samples, rng, posterior) -> tuple[np.ndarray, str]:
        if posterior is None:
            n_samples = check_count(n_samples, "n_samples")
            rng = check_rng(rng)
            cov = 0.5 * (self.cov + self.cov.T)
            draws = rng.multivariate_normal(self.estimates, cov, size=n_samples, method="eigh")
            return draws, "bootstrap"
        return _posterior_samples(posterior, self.models), "posterior"

    def best(self, *, n_samples: int = 20_000, rng: Any = None, posterior: Any = None) -> BestModel:
        """The best model and ``P(best)`` for every model.

        Without ``posterior``: a parametric bootstrap from the joint normal ``N(Ĝ, Σ̂)`` of the
        estimates (their asymptotic sampling distribution, Sawade (2012), Lemma 3.4; the model
        picked is ``argbest Ĝ`` as in Sawade (2012), Algorithm 3, line 7). With ``posterior``: the
        fraction of posterior draws in which each model is best.

        Parameters
        ----------
        n_samples : int
            Bootstrap draws.
        rng : None, int or Generator
        posterior : array-like (S, k) or xarray.DataArray, optional
            Posterior draws of the measure for each model (columns in the order of
            :attr:`models`), or a DataArray with a ``model`` dimension (other dims flattened).
        """
        samples, source = self._samples(n_samples, rng, posterior)
        pick = np.argmax(samples, axis=1) if self.greater_is_better else np.argmin(samples, axis=1)
        prob = np.bincount(pick, minlength=self.k) / samples.shape[0]
        series = pd.Series(prob, index=pd.Index(self.models, name="model"), name="p_best")
        top = self.ranking().index[0]
        return BestModel(top, float(series[top]), series, source)

    def rank_probabilities(
        self, *, n_samples: int = 20_000, rng: Any = None, posterior: Any = None
    ) -> pd.DataFrame:
        """``P(model has rank r)`` (1 = best), a k × k table, by the same parametric bootstrap
        (or posterior draws) as :meth:`best`."""
        samples, _ = self._samples(n_samples, rng, posterior)
        key = -samples if self.greater_is_better else samples
        ranks = np.argsort(np.argsort(key, axis=1), axis=1)  # 0 = best
        table = np.stack([np.bincount(ranks[:, i], minlength=self.k) for i in range(self.k)])
        return pd.DataFrame(
            table / samples.shape[0],
            index=pd.Index(self.models, name="model"),
            columns=pd.Index(np.arange(1, self.k + 1), name="rank"),
        )

    # -- text ------------------------------------------------------------------------------------
    def summary(self) -> str:
        """A readable table of the pairwise comparisons and the ranking."""
        lvl = f"{100 * self.level:g}%"
        head = (
            f"Simultaneous comparison of {self.k} models on {self.measure} "
            f"({self.method}, {lvl} family-wise; n_draws={self.n_draws}, "
            f"n_labels={self.n_labels})"
        )
        frame = self.to_frame()
        with pd.option_context("display.width", 120, "display.float_format", "{:.4g}".format):
            pairs = frame.to_string(index=False)
            rank = self.ranking().to_string()
        return f"{head}\n{pairs}\n\nranking ({'higher' if self.greater_is_better else 'lower'} is better):\n{rank}"

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        n_rej = int(np.sum(np.triu(self.reject | self.reject.T, 1)))
        return (
            f"MultipleComparisonResult(measure={self.measure!r}, method={self.method!r}, "
            f"models={list(self.models)}, level={self.level}, rejected_pairs={n_rej}, "
            f"best={self.ranking().index[0]!r})"
        )


def _posterior_samples(posterior, models) -> np.ndarray:
    if isinstance(posterior, xr.DataArray):
        if "model" not in posterior.dims:
            raise ValueError(f"posterior needs a 'model' dimension, has {posterior.dims}")
        arr = posterior.sel(model=list(models)).transpose(..., "model").values
        arr = arr.reshape(-1, len(models))
    else:
        arr = np.asarray(posterior, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != len(models):
            raise ValueError(f"posterior must have shape (n_draws, {len(models)}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("posterior has non-finite draws")
    return arr


def _contrasts(k: int, pairs: list[tuple[int, int]]) -> np.ndarray:
    C = np.zeros((len(pairs), k))
    for r, (i, j) in enumerate(pairs):
        C[r, i], C[r, j] = 1.0, -1.0
    return C


class _MaxAbsZ:
    """Distribution of ``max_r |(C Z)_r| / s_r`` for ``Z ∼ N(0, Σ)`` (the max-|z| of a family
    of contrasts; Hothorn, Bretz & Westfall (2008) single-step procedure).

    ``engine="qmc"``: randomized Sobol' points of the ``k``-dim normal (one sample answers every
    p-value and the critical value, so intervals and tests agree exactly); ``engine="scipy"``:
    :func:`scipy.stats.multivariate_normal.cdf` of the box ``[−t, t]^K`` over the correlation of
    the contrasts (Genz's algorithm; slow for singular all-pairs families with many models).
    """

    def __init__(self, C, cov, engine, n_points, rng):
        self.C = C
        V = C @ cov @ C.T
        self.s = np.sqrt(np.clip(np.diag(V), 0.0, None))
        self.engine = engine
        self.rng = rng
        ok = self.s > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            self.R = V[np.ix_(ok, ok)] / np.outer(self.s[ok], self.s[ok])
        self.K = int(ok.sum())
        if engine == "qmc":
            k = cov.shape[0]
            w, U = np.linalg.eigh(0.5 * (cov + cov.T))
            root = U * np.sqrt(np.clip(w, 0.0, None))
            m = int(2 ** np.ceil(np.log2(n_points)))
            sob = stats.qmc.Sobol(k, scramble=True, rng=rng).random(m)
            zs = stats.norm.ppf(np.clip(sob, 1e-16, 1 - 1e-16)) @ root.T
            D = zs @ C[ok].T / self.s[ok]
            self.maxabs = np.sort(np.abs(D).max(axis=1))

    def sf(self, t: float) -> float:
        if self.K == 0 or not np.isfinite(t):
            return 0.0 if np.isinf(t) else np.nan
        if self.engine == "qmc":
            return float(1.0 - np.searchsorted(self.maxabs, t, side="left") / self.maxabs.size)
        K = self.K
        R = self.R + 1e-9 * np.eye(K)
        cdf = stats.multivariate_normal.cdf(
            np.full(K, t),
            mean=np.zeros(K),
            cov=R,
            allow_singular=True,
            lower_limit=np.full(K, -t),
            abseps=MVN_ABSEPS,
            releps=0.0,
            rng=self.rng,
        )
        return float(np.clip(1.0 - cdf, 0.0, 1.0))

    def quantile(self, level: float) -> float:
        if self.K == 0:
            return np.nan
        if self.engine == "qmc":
            return float(np.quantile(self.maxabs, level))
        lo = stats.norm.ppf(0.5 + level / 2)
        hi = stats.norm.ppf(1 - (1 - level) / (2 * self.K)) + 0.5
        return float(optimize.brentq(lambda t: self.sf(t) - (1 - level), lo, hi, xtol=1e-4))


def multiple_comparison(
    pool,
    measure: str | Measure,
    draws: Draws,
    labels: Any,
    models: Sequence[str] | None = None,
    *,
    method: str = "tukey",
    baseline: str | None = None,
    level: float = 0.95,
    oracle: str = "deterministic",
    df: float = np.inf,
    variance: str = "auto",
    proposal: Proposal | None = None,
    engine: str = "auto",
    n_points: int = 1 << 16,
    rng: Any = None,
) -> MultipleComparisonResult:
    """Simultaneous pairwise comparison of ``k`` models on one shared labeled sample.

    The ``k`` estimates come from the stacked measure (:func:`~bayes_activeeval.measures.stack`)
    on the same draws and weights, so their joint delta-method covariance ``Σ̂`` (Sawade (2012),
    Lemma 3.4; Marchant & Rubinstein (2021), Thm. 2) captures the pairing. Procedures
    (Sawade (2012), Sec. 3.2.3):

    - ``"tukey"`` — all pairs, single-step max-|z|: the adjusted p-value of pair ``(i, j)`` is
      ``P(max_{r<s} |Z_r − Z_s|/SE_rs ≥ |z_ij|)`` for ``Z ∼ N(0, Σ̂)``, and the simultaneous
      intervals use its ``level`` quantile. Valid for any (estimated) covariance.
    - ``"studentized_range"`` — classical Tukey HSD: pooled ``SE² = mean_ij SE_ij²`` (the thesis'
      ``S_k²``) and ``scipy.stats.studentized_range`` with ``k`` and ``df`` (default ``∞``, the
      asymptotic Wald view; corrected as ``Q = √2 |Δ̂_ij| / SE``, see the catalogue's gotcha 11).
      Exact only when the estimates are independent with equal variances (or the covariance is
      exchangeable); a warning is given when the pairwise variances differ by more than 2×.
    - ``"dunnett"`` — every model against ``baseline``, single-step max-|z| over the ``k − 1``
      contrasts.
    - ``"holm"``, ``"bonferroni"`` — on the raw Wald p-values of all pairs (or of the pairs with
      ``baseline`` when it is given); intervals are Bonferroni intervals.
    - ``"none"`` — unadjusted Wald tests and intervals.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        An unbound scalar measure.
    draws : Draws
        One shared sample, e.g. from :func:`comparison_proposal` (Eq. 5.16). The proposal must
        have full support (``mix > 0`` or an optimal kind).
    labels : array-like or mapping
    models : sequence of str, optional
        Default: all the pool's models (at least two).
    method : str
        See above.
    baseline : str, optional
        Required for ``"dunnett"``; restricts Holm/Bonferroni to comparisons with it.
    level : float
        Family-wise confidence level ``1 − α``.
    oracle : {"deterministic", "stochastic"}
    df : float
        Degrees of freedom for ``"studentized_range"`` (default ``inf``).
    variance : {"auto", "wald", "score"}
        As in :func:`compare`: ``"wald"`` uses the joint delta-method covariance ``Σ̂`` centred at
        the estimates (Sawade (2012), Lemma 3.4); ``"score"`` (plain risks only) the covariance
        under the complete null, ``Σ v² (ℓ − m)(ℓ − m)ᵀ/(Σ v)²`` with a common centre ``m``
        (contrasts do not depend on it), so that pair ``(i, j)`` has the statistic
        ``Σ v δ_ij / sqrt(Σ v² δ_ij²)`` and the intervals invert the same tests with the
        simultaneous critical value. ``"auto"``: ``"score"`` for plain risks. The estimates'
        own covariance :attr:`cov` is always the delta-method one.
    proposal : Proposal, optional
        The proposal the draws came from; if given, it is checked to have full support (the
        ``k`` per-model estimates are not identified otherwise).
    engine : {"auto", "qmc", "scipy"}
        How the max-|z| distribution is computed: ``"qmc"`` (randomized Sobol' points in ``k``
        dims; default for all pairs) or ``"scipy"`` (:func:`scipy.stats.multivariate_normal.cdf`,
        default for Dunnett's full-rank family).
    n_points : int
        QMC points (Monte Carlo error of a p-value near 0.05 about ``1e-4`` for ``2^16``).
        Adjusted p-values are kept within ``[raw p, min(1, K·raw p)]`` (always true bounds).
    rng : None, int or Generator
        For the QMC points / Genz's randomized integration.

    Returns
    -------
    MultipleComparisonResult
    """
    _check_inputs(draws, oracle, variance)
    if method not in MC_METHODS:
        raise ValueError(f"method must be one of {', '.join(MC_METHODS)}; got {method!r}")
    if engine not in ("auto", "qmc", "scipy"):
        raise ValueError(f"engine must be 'auto', 'qmc' or 'scipy', got {engine!r}")
    level = check_level(level)
    n_points = check_count(n_points, "n_points", minimum=256)
    df = float(df)
    if not df > 0:
        raise ValueError(f"df must be positive, got {df!r}")
    models = _models_arg(pool, models, 2)
    k = len(models)
    if proposal is not None:
        if not isinstance(proposal, Proposal):
            raise TypeError(f"proposal must be a Proposal, got {type(proposal).__name__}")
        if _support_mass(proposal) < 1.0 - 1e-12:
            raise ValueError(
                "the proposal gives zero mass to some items; the k per-model estimates need a "
                "proposal with full support (use mix > 0)"
            )
    if baseline is not None and baseline not in models:
        raise ValueError(f"baseline {baseline!r} is not one of the models {list(models)}")
    if method == "dunnett" and baseline is None:
        raise ValueError("method='dunnett' needs baseline= (the model the others are compared to)")
    if method in ("tukey", "studentized_range") and baseline is not None:
        raise ValueError(f"method={method!r} compares all pairs; baseline= is for dunnett/holm/…")
    base = get_measure(measure)
    if base.models is not None:
        raise ValueError(f"measure {base.name!r} is already bound to models {base.models}")
    if base.n_outputs != 1:
        raise ValueError(f"multiple_comparison needs a scalar measure; {base.name!r} is not")
    st, views = pool.resolve(stack(base, models))
    y = draw_labels(pool, draws.indices, labels, oracle=oracle)
    L = st.loss(y, views(draws.indices))
    n_labels = draws.n_distinct if oracle == "deterministic" else len(draws)
    est: Estimate = weighted_estimate(L, draws.weights, st, n_labels=n_labels)
    G, cov = est.values, est.cov
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(cov))):
        raise ValueError(
            f"the labeled sample does not define {base.name!r} for every model yet; "
            "label more items"
        )

    _check_inputs(draws, oracle, variance)
    if method not in MC_METHODS:
        raise ValueError(f"method must be one of {', '.join(MC_METHODS)}; got {method!r}")
    if engine not in ("auto", "qmc", "scipy"):
        raise ValueError(f"engine must be 'auto', 'qmc' or 'scipy', got {engine!r}")
    diff = G[:, None] - G[None, :]
    wald_var = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov
    test_cov, score = cov, None
    if variance == "score":
        v = np.asarray(draws.weights, dtype=float)
        W, v2 = float(v.sum()), v * v
        c0 = L - G.mean()
        test_cov = (c0 * v2[:, None]).T @ c0 / W**2
        m1 = v2 @ L
        score = (diff * W, m1[:, None] - m1[None, :], float(v2.sum()), W)  # A, C, D, W
    var = np.diag(test_cov)[:, None] + np.diag(test_cov)[None, :] - 2 * test_cov
    se = np.sqrt(np.clip(var, 0.0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(se > 0, diff / se, np.where(diff == 0, 0.0, np.sign(diff) * np.inf))
    np.fill_diagonal(z, np.nan)
    raw = np.full((k, k), np.nan)
    off = ~np.eye(k, dtype=bool)
    raw[off] = np.minimum(1.0, 2.0 * stats.norm.sf(np.abs(z[off])))

    if baseline is not None:
        b = models.index(baseline)
        pairs = [(i, b) for i in range(k) if i != b]
    else:
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    K = len(pairs)
    mask = np.zeros((k, k), dtype=bool)
    for i, j in pairs:
        mask[i, j] = mask[j, i] = True
    pval = np.full((k, k), np.nan)
    se_used = np.where(mask, np.sqrt(np.clip(wald_var, 0.0, None)), np.nan)
    rng_ = check_rng(rng)

    if method in ("tukey", "dunnett"):
        eng = engine
        if eng == "auto":
            eng = "scipy" if method == "dunnett" else "qmc"
        dist = _MaxAbsZ(_contrasts(k, pairs), test_cov, eng, n_points, rng_)
        for i, j in pairs:
            p_ = dist.sf(abs(z[i, j]))
            p_ = float(np.clip(p_, raw[i, j], min(1.0, K * raw[i, j])))
            pval[i, j] = pval[j, i] = p_

        def crit(lv):
            return dist.quantile(lv)

    elif method == "studentized_range":
        pooled = float(np.sqrt(np.mean([var[i, j] for i, j in pairs])))
        vals = np.array([var[i, j] for i, j in pairs])
        if vals.min() > 0 and vals.max() / vals.min() > 2.0:
            warnings.warn(
                "the pairwise variances differ by more than a factor 2; the studentized range "
                "assumes equal variances and independent (or exchangeable) estimates — use "
                "method='tukey'",
                UserWarning,
                stacklevel=2,
            )
        se_used = np.where(mask, pooled, np.nan)
        score = None  # the classical HSD intervals use the pooled standard error
        for i, j in pairs:
            q = np.sqrt(2.0) * abs(diff[i, j]) / pooled if pooled > 0 else np.inf
            pval[i, j] = pval[j, i] = float(stats.studentized_range.sf(q, k, df))
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.where(mask, diff / pooled, np.nan)

        def crit(lv):
            return float(stats.studentized_range.ppf(lv, k, df) / np.sqrt(2.0))

    elif method in ("holm", "bonferroni"):
        ps = np.array([raw[i, j] for i, j in pairs])
        if method == "bonferroni":
            adj = np.minimum(1.0, K * ps)
        else:
            order = np.argsort(ps)
            stepped = np.minimum(1.0, (K - np.arange(K)) * ps[order])
            stepped = np.maximum.accumulate(stepped)
            adj = np.empty(K)
            adj[order] = stepped
        for (i, j), p_ in zip(pairs, adj, strict=True):
            pval[i, j] = pval[j, i] = p_

        def crit(lv):
            return float(stats.norm.ppf(1 - (1 - lv) / (2 * K)))

    else:  # none
        for i, j in pairs:
            pval[i, j] = pval[j, i] = raw[i, j]

        def crit(lv):
            return float(stats.norm.ppf(0.5 + lv / 2))

    z = np.where(mask, z, np.nan)
    return MultipleComparisonResult(
        models=models,
        estimates=G.copy(),
        cov=cov.copy(),
        difference=np.where(mask, diff, np.nan),
        stderr=se_used,
        statistic=z,
        pvalue=pval,
        raw_pvalue=np.where(mask, raw, np.nan),
        method=method,
        level=level,
        critical_value=crit(level),
        baseline=baseline,
        measure=base.name,
        greater_is_better=base.greater_is_better,
        n_draws=len(draws),
        n_labels=n_labels,
        variance=variance,
        _crit=crit,
        _score=None if score is None else (*score, W**2 * np.clip(var, 0.0, None)),
    )
