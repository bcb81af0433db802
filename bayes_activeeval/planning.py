"""Planning: how many labels for a target test power or interval width.

Everything rests on the predicted asymptotic variance per draw of the importance-weighted
estimate under a proposal ``q`` (Sawade (2012), Lemma 3.4 / Lemma 5.2 in pool form)::

    σ_q² = Σ_x p(x)² u(x) / q(x),    u(x) = E_{y∼π}‖Dg(R)(ℓ(x, y) − R)‖²

with ``π`` the belief (the models' mixture predictive for comparisons, Eq. 5.11) and ``R`` the
intrinsic risk (Eq. 5.12). Passive sampling (``q = p``) gives ``Σ p u``; the optimal proposal
gives ``(Σ p sqrt(u))²`` up to its defensive mixing.

For a comparison with true difference ``Δ``, the Wald test from ``n`` draws has approximate power
(Sawade (2012), Eqs. 5.3-5.4; Sawade et al. (2012), Eq. 9)::

    1 − [Φ(z − μ) − Φ(−z − μ)],    μ = √n Δ / σ_q,   z = Φ⁻¹(1 − α/2)

and a Wald interval has half-width ``z σ_q / √n``. The predictions are only as good as the belief.

For a plain risk under any design but passive sampling, :func:`~bayes_activeeval.compare`
post-stratifies the difference on the set ``D`` where the two models' losses can differ:
``Δ = s Δ_D`` with ``s = Σ_D p`` and ``Δ_D`` the self-normalized difference of the draws in
``D`` (for a design that is zero where the models agree, ``active_neq``, ``active_0``,
``active_inf`` with ``mix=0``, this is Sawade (2012), Sec. 5.2.2); the paired difference ``δ`` is
identically 0 off ``D``, and the variance per draw is ``σ_q² = Σ_D p² E_π(δ − Δ̌/s)² / q``
(:func:`restricted_variance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from ._validation import check_count, check_fraction, check_level, check_number, show
from .comparison.pairwise import (
    comparison_proposal,
    is_linear,
    models_arg,
    pair_disagreement,
    support_mass_of,
)
from .kernel import deviation_integrand
from .kernel import predicted_variance as _predicted_variance
from .measures import Measure
from .measures import difference as difference_measure
from .measures import get as get_measure
from .proposals import DEFAULT_MIX, Proposal, optimal_proposal, passive_proposal

__all__ = ["Plan", "expected_labels", "labels_for_power", "labels_for_width", "power"]

DESIGNS = ("passive", "optimal", "active_0", "active_inf", "active_neq", "active_risk")


@dataclass(frozen=True)
class Plan:
    """A sample-size plan.

    Parameters
    ----------
    n_draws : int
        The number of i.i.d. draws the plan needs.
    expected_labels : float
        The expected number of distinct items among those draws.
    variance : float
        The predicted asymptotic variance per draw ``σ_q²`` of the estimate.
    design : str
        The proposal design planned for (``"optimal"``, ``"passive"``, ``"active_neq"``, …).
    target : str
        A description of the planning target.
    proposal : Proposal
        The proposal of ``design`` to draw from.

    Attributes
    ----------
    n_draws : int
        Draws needed (i.i.d. from the proposal, repeats included).
    expected_labels : float
        Expected number of distinct items among them, ``Σ_x 1 − (1 − q(x))^n`` (the labels a
        deterministic oracle must give).
    variance : float
        Predicted asymptotic variance per draw ``σ_q²``.
    design : str
    target : str
        What was planned for (e.g. ``"power=0.8 at Δ=0.02, α=0.05"``).
    proposal : Proposal
        The proposal to draw from.
    """

    n_draws: int
    expected_labels: float
    variance: float
    design: str
    target: str
    proposal: Proposal

    def __int__(self) -> int:
        return self.n_draws


def power(
    n: float | np.ndarray,
    difference: float,
    variance: float,
    *,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> float | np.ndarray:
    """Approximate power of the paired Wald test after ``n`` draws (Sawade (2012), Eq. 5.4).

    ``1 − [Φ(z − μ) − Φ(−z − μ)]`` with ``μ = √n Δ/σ`` (two-sided), ``Φ(μ − z_{1−α})`` one-sided
    (``"less"`` uses ``−μ``).

    Parameters
    ----------
    n : float or array
        Number of draws (finite, ``≥ 0``).
    difference : float
        True ``Δ = G_a − G_b`` (finite).
    variance : float
        Asymptotic variance per draw ``σ²`` (e.g. :meth:`Proposal.predicted_variance`).
    alpha : float
    alternative : {"two-sided", "less", "greater"}

    Raises
    ------
    ValueError
        If ``n`` is negative or not finite, ``difference`` is not finite or ``variance`` is not
        positive and finite (they used to give NaN); ``TypeError`` if one is not a number.
    """
    alpha = check_fraction(alpha, "alpha", allow_zero=False)
    variance = check_number(variance, "variance")
    if not (np.isfinite(variance) and variance > 0):
        raise ValueError(f"variance must be positive and finite, got {show(variance)}")
    difference = check_number(difference, "difference")
    try:
        n_arr = np.asarray(n, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"n must be a number of draws or an array of them, got {n!r}") from exc
    bad = np.flatnonzero(~(np.isfinite(n_arr) & (n_arr >= 0)).ravel())
    if bad.size:
        where = "" if n_arr.ndim == 0 else f"[{bad[0]}]"
        raise ValueError(
            f"n{where} = {show(n_arr.ravel()[bad[0]])} is not a number of draws (finite, >= 0)"
        )
    mu = np.sqrt(n_arr) * difference / np.sqrt(variance)
    if alternative == "two-sided":
        z = stats.norm.ppf(1 - alpha / 2)
        out = stats.norm.sf(z - mu) + stats.norm.cdf(-z - mu)
    elif alternative == "greater":
        out = stats.norm.sf(stats.norm.ppf(1 - alpha) - mu)
    elif alternative == "less":
        out = stats.norm.sf(stats.norm.ppf(1 - alpha) + mu)
    else:
        raise ValueError(
            f"alternative must be 'two-sided', 'less' or 'greater', got {alternative!r}"
        )
    return float(out) if np.ndim(out) == 0 else out


_power = power


def expected_labels(q: np.ndarray, n: int) -> float:
    """Expected number of distinct items in ``n`` i.i.d. draws from ``q``: ``Σ 1 − (1 − q)^n``.

    Parameters
    ----------
    q : array-like (n_items,)
        The proposal (item probabilities of one draw; clipped below ``1``).
    n : int
        The number of draws (a whole number ``≥ 0``).

    Returns
    -------
    float
    """
    n = check_count(n, "n", minimum=0)
    q = np.asarray(q, dtype=float)
    return float(np.sum(-np.expm1(n * np.log1p(-np.clip(q, 0.0, 1.0 - 1e-15)))))


def _design_proposal(pool, measure, models, design, mix, belief) -> tuple[Proposal, Proposal]:
    """The proposal for ``design`` and the optimal one (whose info holds ``u(x)`` and ``R``
    under the comparison belief)."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)}; got {design!r}")
    opt = comparison_proposal(pool, measure, models, kind="optimal", mix=mix, belief=belief)
    if opt.info.u is None:
        raise ValueError("planning for more than two models is not supported; give two models")
    if design == "optimal":
        return opt, opt
    if design == "passive":
        return passive_proposal(pool), opt
    return comparison_proposal(pool, measure, models, kind=design, mix=mix, belief=belief), opt


def restricted_variance(
    pool, measure, models, proposal: Proposal, optimal: Proposal, belief: Any = None
) -> float:
    """Predicted variance per draw of the post-stratified difference of a plain risk.

    With ``D`` the items where the two models' losses can differ, ``s = Σ_D p`` and
    ``v = p/q``, :func:`~bayes_activeeval.compare` estimates ``Δ̂ = s Σ_D v δ / Σ_D v`` under any
    proposal other than passive sampling (post-stratification on ``D``, where ``δ ≡ 0`` off it;
    Sawade (2012), Sec. 5.2.2 for a proposal that is zero off ``D``). ``Σ_D v δ / Σ_D v`` tends to
    ``Δ/s`` and, by the delta method for the ratio (Sawade (2012), Lemma 3.4),
    ``n Var(Σ_D v δ / Σ_D v) → E_q[1_D v² (δ − Δ/s)²] / s² = Σ_D p² (δ − Δ/s)² / (q s²)``;
    multiplying by ``s`` gives::

        σ_q² = Σ_D p² E_π(δ − Δ̌/s)² / q

    with the belief ``π`` and intrinsic difference ``Δ̌`` of the comparison (Eqs. 5.11-5.12).
    (``Σ p² u/q`` with ``u = E_π(δ − Δ̌)²`` counts the terms ``Δ̌²`` of the items off ``D``,
    where ``δ ≡ 0``; it is infinite where ``q = 0`` there.)

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        A plain risk (error rate, accuracy, MSE, …).
    models : (str, str)
    proposal : Proposal
        The design's proposal.
    optimal : Proposal
        The two models' optimal comparison proposal, built with ``belief`` (its ``info`` holds
        ``Δ̌``'s risks ``R`` and the belief floor).
    belief : optional
        The label belief ``optimal`` was built with (default: the models' equal mixture).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the measure is not a plain risk and the proposal is zero somewhere, or ``q = 0`` on
        an item where the two models' losses can differ (the difference is then not identified).
    """
    base = get_measure(measure)
    a, b = models
    off = (proposal.q <= 0) & (proposal.p > 0)
    if not is_linear(base):
        if off.any():
            raise ValueError(
                f"the {proposal.kind!r} proposal gives zero mass to {int(off.sum())} items; for "
                f"the non-linear measure {base.name!r} every item moves the estimate: use mix > 0"
            )
        return proposal.predicted_variance(optimal.info.u)
    # D through the pool's cache: the active_neq proposal of the same call read it too
    in_d = pair_disagreement(pool, base, a, b)
    bad = np.flatnonzero(off & in_d)
    if bad.size:
        raise ValueError(
            f"the {proposal.kind!r} proposal gives zero mass to item {bad[0]} (and "
            f"{bad.size - 1} more) where the difference can vary; use mix > 0"
        )
    s = float(proposal.p[in_d].sum())
    if s <= 0:
        return 0.0
    u_s = deviation_integrand(
        pool,
        difference_measure(base, a, b),
        belief=belief,
        risk=np.asarray(optimal.info.risk, dtype=float) / s,
        belief_floor=optimal.info.belief_floor,
    ).u
    return _predicted_variance(proposal.p[in_d], u_s[in_d], proposal.q[in_d])


def _design_variance(pool, measure, models, design, mix, belief) -> tuple[Proposal, float]:
    """The design's proposal and its predicted variance per draw ``σ_q²``."""
    prop, opt = _design_proposal(pool, measure, models, design, mix, belief)
    # compare() post-stratifies a plain risk's difference on D under every design but passive
    if support_mass_of(prop) < 1.0 - 1e-12 or (
        design != "passive" and is_linear(get_measure(measure))
    ):
        return prop, restricted_variance(pool, measure, models, prop, opt, belief)
    return prop, prop.predicted_variance(opt.info.u)


def _solve_n(fn, target: float) -> float:
    """Smallest real ``n ≥ 1`` with ``fn(n) ≥ target`` for increasing ``fn``."""
    if fn(1.0) >= target:
        return 1.0
    hi = 2.0
    while fn(hi) < target:
        hi *= 2
        if hi > 1e15:
            return np.inf
    return float(optimize.brentq(lambda n: fn(n) - target, hi / 2, hi, xtol=1e-6))


def labels_for_power(
    pool,
    measure: str | Measure,
    difference: float,
    models: Sequence[str] | None = None,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    design: str = "optimal",
    alternative: str = "two-sided",
    mix: float = DEFAULT_MIX,
    belief: Any = None,
) -> Plan:
    """Draws (and expected labels) for the paired Wald test to reach ``power`` at ``difference``.

    Solves ``1 − [Φ(z − μ) − Φ(−z − μ)] = power``, ``μ = √n Δ/σ_q`` (Sawade (2012), Eq. 5.4) with
    ``σ_q² = Σ p² u/q`` predicted from the mixture belief (Eq. 5.11) and intrinsic difference
    (Eq. 5.12); ``q`` is the power-optimal proposal (Thm. 5.1) or a baseline. A baseline that is
    zero where the models agree (``mix=0``) is planned with :func:`restricted_variance` (plain
    risks only).

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
    difference : float
        The difference ``Δ = G_a − G_b`` to detect (non-zero).
    models : (str, str), optional
    power : float
        Target power in (0, 1).
    alpha : float
    design : {"optimal", "passive", "active_0", "active_inf", "active_neq", "active_risk"}
    alternative : {"two-sided", "less", "greater"}
    mix : float
        Defensive mixture of the proposal (as in :func:`~bayes_activeeval.comparison_proposal`).
    belief : optional
        The label belief (default: the models' equal mixture).

    Returns
    -------
    Plan

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> sp = bae.datasets.make_classification_pool(20_000, 0.3, n_models=2, rng=0)
    >>> plan = bae.planning.labels_for_power(sp.pool, "error_rate", 0.02, design="optimal")
    >>> plan.n_draws > 0
    True
    """
    pw = check_fraction(power, "power", allow_zero=False)
    alpha = check_fraction(alpha, "alpha", allow_zero=False)
    difference = check_number(difference, "difference")
    if difference == 0:
        raise ValueError(f"difference must be a non-zero finite number, got {difference!r}")
    pair = models_arg(pool, models, 2, two=True)
    if len(pair) != 2:
        raise ValueError(f"models must name exactly two models, got {models!r}")
    prop, var = _design_variance(pool, measure, pair, design, mix, belief)
    if not np.isfinite(var):
        raise ValueError(
            f"the {design!r} proposal gives zero mass where the difference can vary; use mix > 0"
        )
    if var <= 0:
        raise ValueError("the belief predicts no variance at all; power is 1 for any n")
    n = _solve_n(lambda n: _power(n, difference, var, alpha=alpha, alternative=alternative), pw)
    if not np.isfinite(n):
        wrong_way = (alternative == "less" and difference > 0) or (
            alternative == "greater" and difference < 0
        )
        why = (
            "a one-sided test against the direction of the difference"
            if wrong_way
            else "it would take more than 1e15 draws"
        )
        raise ValueError(
            f"power={pw:g} is out of reach at difference={difference:g} with "
            f"alternative={alternative!r}: {why}"
        )
    n_int = int(np.ceil(n - 1e-9))
    target = f"power={pw:g} at difference={difference:g}, alpha={alpha:g} ({alternative})"
    return Plan(n_int, expected_labels(prop.q, n_int), var, design, target, prop)


def labels_for_width(
    pool,
    measure: str | Measure,
    half_width: float,
    *,
    model: str | None = None,
    models: Sequence[str] | None = None,
    level: float = 0.95,
    design: str = "optimal",
    mix: float | None = None,
    belief: Any = None,
) -> Plan:
    """Draws for a Wald interval of half-width ``half_width``: ``n = (z σ_q / h)²``.

    ``σ_q²`` is predicted as in :func:`labels_for_power` (Sawade (2012), Lemma 3.4 in pool form;
    Thm. 4.1 for the optimal proposal). With ``models=(a, b)`` the interval is for the difference
    ``G_a − G_b``; otherwise for the measure of ``model``.

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
    half_width : float
        Target half-width ``h > 0``.
    model : str, optional
        The model (single-model estimate).
    models : (str, str), optional
        For the interval of a difference.
    level : float
    design : {"optimal", "passive"} (plus the comparison baselines when ``models`` is given)
    mix : float, optional
        Defensive mixture of the proposal. Default ``None``: that of
        :func:`~bayes_activeeval.optimal_proposal` for one model (its defensive floor, no
        mixture), ``0.05`` for a difference (as :func:`~bayes_activeeval.comparison_proposal`).
    belief : optional

    Returns
    -------
    Plan
    """
    level = check_level(level)
    h = check_number(half_width, "half_width")
    if not h > 0:
        raise ValueError(f"half_width must be positive, got {half_width!r}")
    if models is not None:
        if model is not None:
            raise ValueError("give either model= (one estimate) or models= (a difference)")
        pair = models_arg(pool, models, 2, two=True)
        if len(pair) != 2:
            raise ValueError(f"models must name exactly two models, got {models!r}")
        mix = DEFAULT_MIX if mix is None else mix
        prop, var = _design_variance(pool, measure, pair, design, mix, belief)
    else:
        if design not in ("optimal", "passive"):
            raise ValueError(f"design must be 'optimal' or 'passive' for one model, got {design!r}")
        opt = optimal_proposal(pool, get_measure(measure), model=model, belief=belief, mix=mix)
        prop = opt if design == "optimal" else passive_proposal(pool)
        var = prop.predicted_variance(opt.info.u)
    if not np.isfinite(var):
        raise ValueError(f"the {design!r} proposal gives zero mass where it is needed; use mix > 0")
    z = stats.norm.ppf(0.5 + level / 2)
    n_int = max(1, int(np.ceil((z / h) ** 2 * var - 1e-9)))
    target = f"{100 * level:g}% half-width {h:g}"
    return Plan(n_int, expected_labels(prop.q, n_int), var, design, target, prop)
