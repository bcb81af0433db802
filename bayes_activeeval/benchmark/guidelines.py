"""Planning a benchmark label set: the paper's guidelines and the square-root rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import optimize

from .._validation import (
    check_count,
    check_fraction,
)

_TARGET_ALIASES = {
    "sensitivity": "sensitivity",
    "recall": "sensitivity",
    "se": "sensitivity",
    "tpr": "sensitivity",
    "specificity": "specificity",
    "sp": "specificity",
    "tnr": "specificity",
    "precision": "precision",
    "pr": "precision",
    "ppv": "precision",
}
_PAIRS = ("precision-specificity", "sensitivity-specificity", "uninformative")
#: The package's measure names (``"recall"``) are accepted in pair names too.
_PAIR_ALIASES = {"recall-specificity": "sensitivity-specificity"}


# ================================================================================================
# Planning: the paper's guidelines
# ================================================================================================


def check_rate(value: Any, name: str) -> np.ndarray:
    """A rate strictly inside (0, 1), scalar or array (the guidelines broadcast)."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number in (0, 1), got {value!r}") from exc
    bad = ~((arr > 0) & (arr < 1))
    if np.any(bad):
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return arr


def scalar_rate(value: Any, name: str) -> float:
    """:func:`check_rate` for an argument that must be one number (a design's prevalence or
    rule rate), refused by name when it is an array."""
    arr = check_rate(value, name)
    if arr.ndim:
        raise ValueError(f"{name} must be one number in (0, 1), got {value!r}")
    return float(arr)


def unlabeled_rates(value: Any) -> np.ndarray:
    """``unlabeled_rate`` as an array of rates in ``[0, 1]`` (the guidelines broadcast)."""
    try:
        p = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"unlabeled_rate must be a number in [0, 1], got {value!r}") from exc
    if np.any(~((p >= 0) & (p <= 1))):
        raise ValueError(f"unlabeled_rate must be in [0, 1], got {value!r}")
    return p


def weight_of(value: Any, name: str) -> float:
    """A non-negative finite number, or a ``ValueError`` naming the argument and the value."""
    try:
        w = float(value)
    except (TypeError, ValueError):
        w = np.nan
    if not (np.isfinite(w) and w >= 0):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return w


def _out(arr: np.ndarray) -> Any:
    return float(arr) if np.ndim(arr) == 0 else arr


def equalizing_rate(
    prevalence: Any, rule_rate: Any = None, *, pair: str = "precision-specificity"
) -> Any:
    """The paper's guideline: the positive rate ``p`` to leave among the unlabeled items.

    The paper bounds the error of its imputation estimator by Bernstein/PAC bounds
    (Eqs. 3.19-3.21) that depend on ``pi`` (prevalence), ``r`` (the rule's positive rate) and
    ``p = eps_O^+(U)``, the positive rate among the items left unlabeled — the only quantity a
    sampler controls. Setting two bounds equal and solving for ``p`` gives:

    - ``pair="precision-specificity"`` (Valizadegan et al., Eq. 3.22)::

          p = (1-r) r pi / ((1-pi)^3 + (1-r) r pi),   i.e. odds(p) = pi r (1-r) / (1-pi)^3

    - ``pair="sensitivity-specificity"`` (or ``"recall-specificity"``; Eq. 3.25)::

          p = pi^3 (1-r) / (pi^3 (1-r) + (1-pi)^3 r),  i.e. odds(p) = odds(pi)^3 / odds(r)

    - ``pair="uninformative"`` or ``rule_rate=None`` — rules with ``r ~ pi`` (Eq. 3.29), where the
      precision and sensitivity bounds coincide::

          p = pi^2 / (pi^2 + (1-pi)^2),   i.e. odds(p) = odds(pi)^2  (the "odds-squared rule")

    Trade-off: ``p < pi`` (``alpha < 1``, see :func:`paper_alpha`) says "label more positives than
    random sampling would". Read it as a *direction*, not an amount: the bounds equalised here
    are not minimised (Eqs. 3.19-3.21: ``p²(1 − p)`` and ``p(1 − p)²`` both grow on ``p < 1/3``, so all three bounds shrink together
    as ``p`` falls) and at realistic budgets the target saturates to "label only positives"
    (:func:`saturation_budget`). For the amount use :func:`minority_share`.

    Parameters
    ----------
    prevalence : float or array
        ``pi``, the positive rate of the pool, in (0, 1).
    rule_rate : float or array, optional
        ``r``, the positive rate of the (future) rule. ``None`` means ``r = pi`` (Eq. 3.29).
    pair : {"precision-specificity", "sensitivity-specificity", "uninformative"}

    Returns
    -------
    float or ndarray
        ``p`` (broadcast over the inputs).
    """
    pi = check_rate(prevalence, "prevalence")
    pair = _PAIR_ALIASES.get(pair, pair)
    if pair not in _PAIRS:
        raise ValueError(f"pair must be one of {_PAIRS}, got {pair!r}")
    if rule_rate is None or pair == "uninformative":
        return _out(pi**2 / (pi**2 + (1 - pi) ** 2))
    r = check_rate(rule_rate, "rule_rate")
    if pair == "precision-specificity":
        num = (1 - r) * r * pi
        return _out(num / ((1 - pi) ** 3 + num))
    num = pi**3 * (1 - r)
    return _out(num / (num + (1 - pi) ** 3 * r))


def paper_alpha(
    prevalence: Any, rule_rate: Any = None, *, pair: str = "precision-specificity"
) -> Any:
    """``alpha = p / pi`` (Valizadegan et al., Eq. 3.24) for the guideline :func:`equalizing_rate`.

    ``alpha < 1`` asks for more positives in the labeled set than random sampling gives,
    ``alpha > 1`` for more negatives. Under skew (``pi`` small) ``alpha << 1`` for every pair:
    e.g. ``pi = 0.04`` gives ``alpha = 0.0433`` from Eq. 3.29. The magnitude is not a usable
    target share at realistic budgets (see :func:`saturation_budget`).

    Parameters
    ----------
    prevalence : float or array
        ``pi``, the positive rate of the pool, in (0, 1).
    rule_rate : float or array, optional
        ``r``, the positive rate of the (future) rule; ``None`` (the default) means ``r = pi``
        (Eq. 3.29).
    pair : {"precision-specificity", "sensitivity-specificity", "uninformative"}, optional
        Which two error bounds are set equal (default ``"precision-specificity"``; ignored when
        ``rule_rate`` is ``None``), as for :func:`equalizing_rate`.

    Returns
    -------
    float or ndarray
        ``alpha`` (broadcast over the inputs).
    """
    pi = check_rate(prevalence, "prevalence")
    return _out(np.asarray(equalizing_rate(pi, rule_rate, pair=pair)) / pi)


def _pool_budget(pool_size: Any, budget: Any) -> tuple[int, int]:
    N = check_count(pool_size, "pool_size")
    n = check_count(budget, "budget", minimum=0)
    if n > N:
        raise ValueError(f"budget must be <= pool_size = {N}, got {budget!r}")
    return N, n


def positives_needed(prevalence: Any, pool_size: int, budget: int, unlabeled_rate: Any) -> Any:
    """Number of positives to label so that the unlabeled rate is ``p`` (Valizadegan, Eq. 3.23).

    ::

        |L_O^+| = min(|L|, [ |S| pi - |U| p ]_+),   |U| = |S| - |L|

    Trade-off: the smaller the target ``p`` (a stronger guideline), the more positives; with
    ``|L| << |S|`` the count reaches ``|L|`` (label only positives) for every guideline of
    the paper (see :func:`saturation_budget`), so the equation then says nothing about the amount.

    Parameters
    ----------
    prevalence : float
        ``pi``.
    pool_size : int
        ``|S|``.
    budget : int
        ``|L|``, labels to spend.
    unlabeled_rate : float or array
        ``p``, e.g. from :func:`equalizing_rate`.

    Returns
    -------
    float or ndarray
        Target number of labeled positives (not rounded).
    """
    pi = check_rate(prevalence, "prevalence")
    N, n = _pool_budget(pool_size, budget)
    p = unlabeled_rates(unlabeled_rate)
    return _out(np.minimum(n, np.maximum(N * pi - (N - n) * p, 0.0)))


def saturation_budget(prevalence: Any, pool_size: int, unlabeled_rate: Any) -> Any:
    """Largest budget at which Eq. 3.23 asks for positives only (Eq. 3.23 solved for ``|L_O^+| = |L|``).

    ``|L_O^+| = |L|`` whenever ``|L| <= N pi (1 - alpha) / (1 - alpha pi)`` with
    ``alpha = p/pi``. Covtype (``N = 581,012``, ``pi = 0.04``) with Eq. 3.29 saturates up to about
    22,300 labels — far beyond the paper's 2,000 — so in practice the guideline is bang-bang:
    "if ``alpha < 1``, fill the budget with minority items". That is why :func:`design` uses the
    square-root rules for the amount.

    Parameters
    ----------
    prevalence : float or array
        ``pi``, the positive rate of the pool, in (0, 1).
    pool_size : int
        ``N = |S|``, the number of pool items.
    unlabeled_rate : float or array
        ``p``, the target positive rate among the unlabeled items, e.g. from
        :func:`equalizing_rate`.

    Returns
    -------
    float or ndarray
        The budget ``|L|`` (not rounded; 0 when ``p >= pi``), broadcast over the inputs.
    """
    pi = check_rate(prevalence, "prevalence")
    N = check_count(pool_size, "pool_size")
    p = unlabeled_rates(unlabeled_rate)
    a = p / pi
    return _out(np.maximum(N * pi * (1 - a) / (1 - a * pi), 0.0))


def error_bound(
    measure: str,
    prevalence: Any,
    rule_rate: Any,
    unlabeled_rate: Any,
    pool_size: int,
    budget: int,
    *,
    delta: float = 0.05,
) -> Any:
    """The paper's PAC half-width for precision, sensitivity or specificity (Eqs. 3.19-3.21).

    ::

        |Pr - E| <= 2 sqrt(|U| p^2 (1-p) log(2/delta) / (|S|^2 r pi))            (3.19)
        |Se - E| <= 2 sqrt(|U| r p^2 (1-p) log(2/delta) / (|S|^2 pi^3))          (3.20)
        |Sp - E| <= 2 sqrt(|U| (1-r) p (1-p)^2 log(2/delta) / (|S|^2 (1-pi)^3))  (3.21)

    These hold for the paper's imputation estimator under its model (labels in ``U`` i.i.d.
    Bernoulli(``p``) and independent of the rule) and Prop. 3.4's approximations of
    ``|U_R^+|``, ``|U_R^-|``. Trade-off: all three shrink as ``p`` falls below 1/3 (label
    positives), so equalising them is a direction rule, not an optimum (Eqs. 3.19-3.21 all grow with ``p`` on ``[0, 1/3]``). They
    are loose (about 3.84 sigma at ``delta = 0.05``) and are *not* confidence intervals; for
    informative rules the relevant label probability is the rule's precision, not ``p``.

    Parameters
    ----------
    measure : {"precision", "sensitivity", "specificity"}
    prevalence, rule_rate, unlabeled_rate : float or array
        ``pi``, ``r``, ``p``.
    pool_size, budget : int
        ``|S|`` and ``|L|`` (``|U| = |S| - |L|``).
    delta : float
        Failure probability.

    Returns
    -------
    float or ndarray
    """
    m = _TARGET_ALIASES.get(str(measure).lower())
    if m is None:
        raise ValueError(
            f"measure must be 'precision', 'sensitivity' or 'specificity', got {measure!r}"
        )
    pi = check_rate(prevalence, "prevalence")
    r = check_rate(rule_rate, "rule_rate")
    p = unlabeled_rates(unlabeled_rate)
    delta = check_fraction(delta, "delta", allow_zero=False)
    N, n = _pool_budget(pool_size, budget)
    c = (N - n) * np.log(2 / delta) / N**2
    if m == "precision":
        v = p**2 * (1 - p) / (r * pi)
    elif m == "sensitivity":
        v = r * p**2 * (1 - p) / pi**3
    else:
        v = (1 - r) * p * (1 - p) ** 2 / (1 - pi) ** 3
    return _out(2 * np.sqrt(c * v))


# ================================================================================================
# Planning: square-root (Neyman) rules
# ================================================================================================


def parse_targets(targets: Any) -> dict[str, float]:
    if isinstance(targets, str):
        targets = (targets,)
    if isinstance(targets, Mapping):
        items = list(targets.items())
    else:
        try:
            items = [(t, 1.0) for t in targets]
        except TypeError as exc:
            raise TypeError(
                f"targets must be a measure name, a sequence of names or a mapping name -> "
                f"weight, got {targets!r}"
            ) from exc
    out: dict[str, float] = {}
    for name, w in items:
        key = _TARGET_ALIASES.get(str(name).lower())
        if key is None:
            raise ValueError(
                f"targets: unknown measure {name!r}; use 'sensitivity', 'specificity' or "
                "'precision'"
            )
        w = weight_of(w, f"targets: the weight of {name!r}")
        out[key] = out.get(key, 0.0) + w
    if not out or sum(out.values()) <= 0:
        raise ValueError(
            f"targets must name at least one measure with positive weight: {targets!r}"
        )
    return out


def _guess_strata(prevalence: float, guess_recall: float, guess_precision: float):
    """Weights and positive rates of the strata P (guessed minority) and Q of the paper's class guess (Sec. 4), ``W_P = c pi / g``."""
    c, g = guess_recall, guess_precision
    W_P = c * prevalence / g
    if not 0 < W_P <= 1:
        raise ValueError(
            f"guess_recall={c!r} and guess_precision={g!r} are inconsistent with "
            f"prevalence={prevalence!r}: the guessed-minority stratum would hold a share "
            f"{W_P:.4g} of the pool"
        )
    W_Q = 1 - W_P
    u_Q = (1 - c) * prevalence / W_Q if W_Q > 0 else 0.0
    return np.array([W_P, W_Q]), np.array([g, u_Q])


def _influence_variances(u, prevalence, se, sp, targets):
    """Per-stratum variance of the influence of one item on each target.

    A "noisy-oracle" rule (errors independent of the item given its class, sensitivity ``se``,
    specificity ``sp``) in a stratum whose positive rate is ``u``. Influence functions
    (per item, times the pool size): ``Se: y (R - Se)/pi``, ``Sp: (1-y)((1-R) - Sp)/(1-pi)``,
    ``Pr: R (y - Pr)/r`` with ``r = pi Se + (1-pi)(1-Sp)``. Returns the variances, shape
    ``(len(targets), len(u))`` (delta method; the derivation is in ``docs/benchmark.md``, Sec. 2).
    """
    u = np.asarray(u, dtype=float)
    pi = prevalence
    r = pi * se + (1 - pi) * (1 - sp)
    pr = pi * se / r
    variances = []
    for t in targets:
        if t == "sensitivity":
            m = np.zeros_like(u)
            e2 = u * se * (1 - se) / pi**2
        elif t == "specificity":
            m = np.zeros_like(u)
            e2 = (1 - u) * sp * (1 - sp) / (1 - pi) ** 2
        else:
            m = (u * se * (1 - pr) - (1 - u) * (1 - sp) * pr) / r
            e2 = (u * se * (1 - pr) ** 2 + (1 - u) * (1 - sp) * pr**2) / r**2
        variances.append(e2 - m**2)
    return np.array(variances)


def _rule_args(prevalence, sensitivity, specificity, rule_rate):
    pi = scalar_rate(prevalence, "prevalence")
    if sensitivity is None and specificity is None:
        r = pi if rule_rate is None else scalar_rate(rule_rate, "rule_rate")
        return pi, r, 1 - r  # uninformative rule with positive rate r (Se = 1 - Sp = r)
    if sensitivity is None or specificity is None:
        raise ValueError("give both sensitivity and specificity, or neither (uninformative rule)")
    se = scalar_rate(sensitivity, "sensitivity")
    sp = scalar_rate(specificity, "specificity")
    return pi, se, sp


def _planning_inputs(
    prevalence, target, sensitivity, specificity, rule_rate, guess_recall, guess_precision
):
    """Validated inputs of :func:`minority_share` and :func:`variance_ratio`.

    Returns ``(W, S2, weights)``: the weights of the strata P and Q (2,), the per-target element
    variances of the influence in each stratum (T, 2) and the target weights (T,).
    """
    pi, se, sp = _rule_args(prevalence, sensitivity, specificity, rule_rate)
    c = check_fraction(guess_recall, "guess_recall", allow_zero=False, allow_one=True)
    g = check_fraction(guess_precision, "guess_precision", allow_zero=False, allow_one=True)
    tw = parse_targets(target)
    W, u = _guess_strata(pi, c, g)
    S2 = _influence_variances(u, pi, se, sp, list(tw))
    return W, S2, np.array(list(tw.values()))


def _sum_share(W, S2, weights):
    """Closed-form share of stratum P minimising the weighted sum of variances."""
    A, B = (weights[:, None] * S2 * W**2).sum(axis=0)
    if A + B <= 0:
        return 0.5
    return float(np.sqrt(A) / (np.sqrt(A) + np.sqrt(B)))


def _share_objective(f, W, S2, weights):
    """Weighted sum (rows) of stratified variances for a share ``f`` in stratum P (per label)."""
    alloc = np.array([f, 1 - f])
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(S2 * W**2 > 0, S2 * W**2 / alloc, 0.0)
    return terms.sum(axis=1) * weights


def minority_share(
    prevalence: float,
    target: Any = ("sensitivity", "specificity", "precision"),
    *,
    sensitivity: float | None = None,
    specificity: float | None = None,
    rule_rate: float | None = None,
    criterion: str = "sum",
    guess_recall: float = 1.0,
    guess_precision: float = 1.0,
) -> float:
    """Variance-optimal share of the labels to take from the guessed minority class.

    The square-root (Neyman) rule (Cochran (1977), Sec. 5.5; derived in ``docs/benchmark.md``, Sec. 2) for
    two strata — ``P`` (guessed positive) and ``Q`` (the rest) — sampled by simple random
    sampling and analysed with design weights. With ``n_P = f n`` labels in ``P``, every target's
    variance has the form ``A/n_P + B/n_Q``; the weighted sum is minimised at::

        f* = sqrt(A) / (sqrt(A) + sqrt(B))

    **Estimator assumed**: the rule's outputs are known on the labeled items only, and the four
    cells are estimated within the strata P and Q (the ``"Hajek within strata"`` path of
    :func:`~bayes_activeeval.benchmark.evaluate`); the influences ``y (R − Se)/π``, ``(1 − y)((1 −
    R) − Sp)/(1 − π)``, ``R (y − Pr)/r`` keep the rule's own noise ``R``. When the rule is run on
    the whole pool, :func:`~bayes_activeeval.benchmark.evaluate` post-stratifies on its output
    (known margins), a random rule's noise drops out, and the optimal allocation becomes ``n_h ∝
    N_h sqrt(u_h(1 − u_h))`` for every target (``u_h`` the stratum's positive rate; see
    :func:`~bayes_activeeval.benchmark.design.target_influence`, the design-based form of
    Valizadegan et al., Eqs. 3.5, 3.9, 3.11) — with a perfect guess, no labels at all.

    Special cases with a perfect guess (``guess_recall = guess_precision = 1``):

    - precision only: ``n+/n- = sqrt((1-Se)(1-Sp)/(Se Sp))`` — a high-specificity rule's
      precision error is driven by its false positives among the huge negative class, so
      precision wants *negatives*;
    - sensitivity + specificity: ``n+/n- = sqrt(Se(1-Se)/(Sp(1-Sp)))``;
    - ``criterion="minimax"`` on sensitivity and specificity (equalise them, as the paper does):
      ``n+/n- = Se(1-Se)/(Sp(1-Sp))``;
    - an uninformative rule (``Se = 1 - Sp = r``, the default when neither is given): every
      criterion gives ``f* = 1/2``, with variance ratio ``4 pi (1-pi)`` against random
      sampling (:func:`variance_ratio`).

    Trade-off: the paper's "sample the minority" is right for sensitivity and for uninformative
    rules up to parity; past 1/2 it starves specificity and the precision of good rules, so cap
    the share near 1/2 unless sensitivity is the only target (``docs/benchmark.md``, Sec. 2). An imperfect
    guess of recall ``c`` and precision ``g`` changes the strata to
    ``W_P = c pi / g`` with positive rate ``g`` and ``W_Q = 1 - W_P`` with rate
    ``(1-c) pi / W_Q``; the missed positives then live in the large, sparsely sampled ``Q``
    stratum and set a floor of about ``1 - c`` on the variance ratio.

    Parameters
    ----------
    prevalence : float
        ``pi``.
    target : str, sequence of str or mapping str -> weight
        Among "sensitivity" ("recall"), "specificity", "precision"; a mapping gives weights.
    sensitivity, specificity : float, optional
        Of the rule to plan for; both or neither (neither = uninformative rule of rate
        ``rule_rate``, default ``pi``).
    rule_rate : float, optional
        Positive rate of the uninformative rule (default ``pi``).
    criterion : {"sum", "minimax"}
        Minimise the weighted sum of variances (closed form) or the largest weighted variance
        (solved numerically; convex in ``f``).
    guess_recall, guess_precision : float
        ``c`` and ``g`` of the class guess defining the strata (1 = the true class).

    Returns
    -------
    float
        ``f* = n_P / n``.
    """
    W, S2, weights = _planning_inputs(
        prevalence, target, sensitivity, specificity, rule_rate, guess_recall, guess_precision
    )
    if criterion == "sum":
        return _sum_share(W, S2, weights)
    if criterion != "minimax":
        raise ValueError(f"criterion must be 'sum' or 'minimax', got {criterion!r}")
    res = optimize.minimize_scalar(
        lambda f: _share_objective(f, W, S2, weights).max(),
        bounds=(1e-9, 1 - 1e-9),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(res.x)


def variance_ratio(
    prevalence: float,
    target: Any = ("sensitivity", "specificity", "precision"),
    *,
    share: float | None = None,
    sensitivity: float | None = None,
    specificity: float | None = None,
    rule_rate: float | None = None,
    guess_recall: float = 1.0,
    guess_precision: float = 1.0,
) -> float:
    """Variance of the two-stratum design over that of simple random sampling, same budget.

    ``sum_t w_t Var_t(share) / sum_t w_t Var_t(SRS)`` for the targets of :func:`minority_share`
    (``docs/benchmark.md``, Sec. 2), ignoring finite-population corrections, for the estimator
    of a rule known on the labeled items only (cells estimated within the strata; see
    :func:`minority_share`: with the rule's pool margins known,
    :func:`~bayes_activeeval.benchmark.evaluate` post-stratifies on its output and a random
    rule's variance is the one of
    :meth:`~bayes_activeeval.benchmark.BenchmarkDesign.predicted_variance_ratio` instead). Random
    sampling is taken with the same (class-post-stratified) estimator, i.e. the share ``W_P``
    that proportional allocation gives. At the
    optimal share (``share=None``) and a perfect guess an uninformative rule gets
    ``4 pi (1-pi)`` (0.154 at ``pi = 0.04``: an 85% label saving); with guess recall ``c`` the
    saving for sensitivity is ``[c sqrt(pi/g) + sqrt((1-c)(1 - c pi/g))]^2``, so recall
    matters far more than precision.

    Parameters
    ----------
    share : float, optional
        Share of labels in the guessed-minority stratum; default the optimum for the weighted sum.
    Other parameters
        As :func:`minority_share`.

    Returns
    -------
    float
    """
    W, S2, weights = _planning_inputs(
        prevalence, target, sensitivity, specificity, rule_rate, guess_recall, guess_precision
    )
    f = check_fraction(
        _sum_share(W, S2, weights) if share is None else share, "share", allow_one=True
    )
    strat = _share_objective(f, W, S2, weights).sum()
    prop = _share_objective(W[0], W, S2, weights).sum()
    return float(strat / prop)
