"""Sampling designs for a benchmark label set: strata, allocation, inclusion probabilities."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, special

from .._validation import (
    as_1d,
    check_count,
    check_finite,
    check_fraction,
    check_rng,
)
from ..strata import score_strata
from .guidelines import equalizing_rate, parse_targets, positives_needed, scalar_rate


@dataclass(frozen=True, repr=False)
class BenchmarkSample:
    """Items drawn by a :class:`BenchmarkDesign`, to be labeled once.

    Made by :meth:`BenchmarkDesign.sample` or :meth:`BenchmarkDesign.sample_at` (and their
    :class:`~bayes_activeeval.benchmark.lazy.LazyBenchmarkDesign` counterparts).

    Parameters
    ----------
    indices : ndarray (m,)
        Pool positions of the drawn items.
    inclusion : ndarray (m,)
        Their first-order inclusion probabilities ``pi_i`` under the design.
    weights : ndarray (m,)
        Their design weights ``1/pi_i``.
    strata : ndarray (m,)
        The design stratum of each drawn item.
    design : BenchmarkDesign or LazyBenchmarkDesign
        The design they were drawn from.

    Attributes
    ----------
    indices : ndarray (m,)
        Pool positions of the items to label (distinct, sorted).
    inclusion : ndarray (m,)
        Their first-order inclusion probabilities ``pi_i``.
    weights : ndarray (m,)
        Design weights ``1/pi_i`` (Horvitz-Thompson).
    strata : ndarray (m,)
        Their strata.
    design : BenchmarkDesign
        The design that drew them (needed by :func:`evaluate`).
    """

    indices: np.ndarray
    inclusion: np.ndarray
    weights: np.ndarray
    strata: np.ndarray
    design: BenchmarkDesign

    def __len__(self) -> int:
        return len(self.indices)

    def to_frame(self) -> pd.DataFrame:
        """One row per item: index, stratum, inclusion probability, weight (the sampling log to keep beside the labels)."""
        return pd.DataFrame(
            {
                "item": self.indices,
                "stratum": self.strata,
                "inclusion": self.inclusion,
                "weight": self.weights,
            }
        )

    def __repr__(self) -> str:
        head = f"BenchmarkSample({len(self)} items to label, scheme={self.design.scheme!r}"
        if len(self) == 0:  # a Poisson sample may be empty: no weights to show
            return head + ")"
        return head + f", weights {self.weights.min():.3g}..{self.weights.max():.3g})"


@dataclass(frozen=True, repr=False)
class BenchmarkDesign:
    """A sampling design for a benchmark label set (see :func:`design`).

    Made by :func:`design`, which checks the inputs; the constructor does not.

    Parameters
    ----------
    strata : ndarray (N,) of int
        Stratum of every pool item, ``0..H-1`` in order of increasing mean guess.
    inclusion : ndarray (N,)
        Inclusion probability of every item (summing to ``budget``).
    allocation : ndarray (H,)
        Labels per stratum: exact integers (stratified scheme) or expected counts (Poisson).
    stratum_sizes : ndarray (H,) of int
        Pool items per stratum, ``N_h``.
    guess : ndarray (N,)
        Guessed positive-class probability ``s_i`` of every item.
    prevalence : float
        ``pi``, the pool's positive rate used for planning.
    budget : int
        Labels to spend (expected number under Poisson sampling).
    scheme : {"stratified", "poisson"}
        Stratified sampling without replacement or Poisson sampling.
    method : {"sqrt", "paper", "proportional", "equal"}
        The allocation method (as for :func:`design`).
    targets : dict
        Target measure (``"sensitivity"``, ``"specificity"``, ``"precision"``) -> weight.
    rule_rate : float
        ``rbar``, the positive rate of the rules planned for.
    defensive : float
        ``λ``, the weight of proportional allocation mixed into the allocation, in [0, 1).

    Attributes
    ----------
    strata : ndarray (N,)
        Stratum of every pool item (``0..H-1``, increasing guess).
    inclusion : ndarray (N,)
        Inclusion probability of every item; sums to the budget.
    allocation : ndarray (H,)
        Labels per stratum (stratified scheme: exact; Poisson: expected).
    stratum_sizes : ndarray (H,)
        ``N_h``.
    guess : ndarray (N,)
        Guessed positive probability of each item (``s_i``).
    prevalence : float
        ``pi`` used for planning.
    budget : int
    scheme : {"stratified", "poisson"}
    method : {"sqrt", "paper", "proportional", "equal"}
    targets : dict
        Target measures and weights.
    rule_rate : float
        ``rbar``, the positive rate of the unknown rules planned for.
    defensive : float
        Weight of proportional allocation mixed into the allocation.
    """

    strata: np.ndarray
    inclusion: np.ndarray
    allocation: np.ndarray
    stratum_sizes: np.ndarray
    guess: np.ndarray
    prevalence: float
    budget: int
    scheme: str
    method: str
    targets: dict
    rule_rate: float
    defensive: float
    _influence: np.ndarray = field(default=None)

    @property
    def n_items(self) -> int:
        return len(self.strata)

    @property
    def n_strata(self) -> int:
        return len(self.stratum_sizes)

    def sample(self, rng: Any = None) -> BenchmarkSample:
        """Draw the items to label.

        Stratified: a simple random sample without replacement of ``allocation[h]`` items in each
        stratum (one vectorised pass: random keys ranked within strata). Poisson: each item
        independently with probability ``inclusion[i]`` (the realised size is random, with
        expectation ``budget``).

        Parameters
        ----------
        rng : None, int or Generator

        Returns
        -------
        BenchmarkSample
        """
        rng = check_rng(rng)
        N = self.n_items
        if self.scheme == "poisson":
            idx = np.flatnonzero(rng.random(N) < self.inclusion)
        else:
            keys = rng.random(N)
            order = np.lexsort((keys, self.strata))
            starts = np.concatenate([[0], np.cumsum(self.stratum_sizes)[:-1]])
            rank = np.empty(N, dtype=np.int64)
            rank[order] = np.arange(N) - np.repeat(starts, self.stratum_sizes)
            idx = np.flatnonzero(rank < self.allocation[self.strata])
        return self.sample_at(idx)

    def sample_at(self, idx: np.ndarray) -> BenchmarkSample:
        """The sample made of the (distinct, valid) pool positions ``idx``."""
        incl = self.inclusion[idx]
        return BenchmarkSample(idx, incl, 1.0 / incl, self.strata[idx], self)

    def predicted_variance_ratio(self) -> dict[str, float]:
        """Predicted variance / that of simple random sampling, per target, for a random rule.

        Both variances are those of the post-stratified estimator of :func:`evaluate` (the
        rules' pool margins known) for rules of rate ``rule_rate`` independent of the label,
        with the guess taken as calibrated: ``Σ_h W_h² ā_h / n_h`` with ``ā_h = c_t s̄_h(1 −
        s̄_h)`` (:func:`target_influence`, the design-based form of Valizadegan et al.,
        Eqs. 3.5, 3.9, 3.11) against ``c_t s̄(1 − s̄)/n`` for simple random sampling of the
        same budget (one stratum, ``s̄`` the mean guess). The coefficient ``c_t`` cancels, so
        every target gets the same ratio. Stratified scheme: no finite-population correction
        on either side; Poisson: ``Σ_i a_i (1 − π_i)/π_i / N²`` against the same with ``π_i =
        n/N``.

        Returns
        -------
        dict
            Target -> predicted variance ratio (below 1: the design beats random sampling).
        """
        a = self._influence  # (T, N)
        n = self.budget
        sb = float(self.guess.mean())
        out = {}
        for k, t in enumerate(self.targets):
            # simple random sampling: one stratum, label variance around the pool's mean guess
            srs = influence_coefficient(t, self.prevalence, self.rule_rate) * sb * (1 - sb) / n
            if self.scheme == "poisson":
                var = (a[k] * (1 - self.inclusion) / self.inclusion).sum() / self.n_items**2
                srs = srs * (1 - n / self.n_items)
            else:
                abar = np.bincount(self.strata, a[k], self.n_strata) / self.stratum_sizes
                W = self.stratum_sizes / self.n_items
                alloc = np.maximum(self.allocation, 1)
                var = (W**2 * abar / alloc).sum()
            out[t] = float(var / srs) if srs > 0 else float("nan")
        return out

    def positives_cv(self) -> float:
        """Predicted coefficient of variation of the estimated positive total (guess taken as
        calibrated); it bounds the ratio bias of sensitivity and F1 in standard errors
        (:func:`~bayes_activeeval.benchmark.design.positives_cv`)."""
        exp_pos = self.stratum_guess_sums
        if self.scheme == "poisson":
            sb = (exp_pos / np.maximum(self.stratum_sizes, 1))[self.strata]
            s, p = self.guess, self.inclusion
            terms = (1 - p) / p * (s * (1 - s) + (s - sb) ** 2)
            return positives_cv(self.stratum_sizes, self.allocation, exp_pos, terms)
        return positives_cv(self.stratum_sizes, self.allocation, exp_pos)

    @functools.cached_property
    def stratum_guess_sums(self) -> np.ndarray:
        """``Σ s_i`` per stratum: the positives the guess expects in each stratum of the pool."""
        return np.bincount(self.strata, self.guess, self.n_strata)

    def summary(self) -> pd.DataFrame:
        """Per-stratum table: size, labels, inclusion probability, mean guess, expected positives."""
        H = self.n_strata
        sg = self.stratum_guess_sums
        return pd.DataFrame(
            {
                "pool_items": self.stratum_sizes,
                "labels": self.allocation,
                "inclusion": self.allocation / self.stratum_sizes,
                "mean_guess": sg / self.stratum_sizes,
                "expected_positives_labeled": sg * self.allocation / self.stratum_sizes,
            },
            index=pd.RangeIndex(H, name="stratum"),
        )

    def __repr__(self) -> str:
        s = self.summary()
        exp_pos = float(s["expected_positives_labeled"].sum())
        pi = self.prevalence
        p_eq = equalizing_rate(pi)
        lines = [
            f"BenchmarkDesign(scheme={self.scheme!r}, method={self.method!r}, budget={self.budget},"
            f" pool={self.n_items}, strata={self.n_strata})",
            f"  targets: {self.targets}; planned rule rate {self.rule_rate:.4g}",
            f"  prevalence {pi:.4g}; expected labeled positives {exp_pos:.1f} "
            f"(share {exp_pos / max(self.budget, 1):.3f}; random sampling: {pi:.3f})",
            f"  paper: alpha (Eq. 3.29) = {p_eq / pi:.4g}, target positives (Eq. 3.23) = "
            f"{positives_needed(pi, self.n_items, self.budget, p_eq):.0f}",
            "  predicted variance ratio vs random sampling (random rules): "
            + ", ".join(f"{k} {v:.3f}" for k, v in self.predicted_variance_ratio().items()),
            s.to_string(float_format=lambda v: f"{v:.4g}"),
        ]
        return "\n".join(lines)


#: Predicted coefficient of variation of the estimated positive total above which
#: :func:`design` warns (:func:`positives_cv`): sensitivity and F1 can then be biased by more
#: than half a standard error.
POSITIVES_CV_WARN = 0.5


def positives_cv(
    sizes: np.ndarray,
    allocation: np.ndarray,
    expected_positives: np.ndarray,
    item_terms: np.ndarray | None = None,
) -> float:
    """Predicted coefficient of variation of the design's estimate of the pool's positives.

    Sensitivity ``TP/(TP + FN)`` and F1 ``2TP/(TP + K + FN)`` are ratios whose denominator
    holds the estimated positive total ``D = TP + FN``. With ``TP`` and ``D`` (about) unbiased
    the ratio's bias is ``−Cov(Se, D)/D``, so ``|bias| <= SE(Se) x CV(D)`` (Hartley & Ross
    (1954); Cochran (1977), Sec. 6.8): harmless when ``CV(D)`` is small, up to a standard
    error and more when it is not. ``CV(D)`` is large when strata that hold many of the
    positives get one or two labels (``method="paper"`` with ``defensive=0``): ``D`` is then
    unbiased but very skewed (zero from those strata in most samples, ``N_h/n_h`` per labeled
    positive in the others), and the second-order correction of :func:`evaluate` is skipped
    (it needs a CV below 0.3). Predicted with the guess taken as calibrated, stratified::

        CV(D)^2 = sum_h N_h^2 (1 - n_h/N_h) sbar_h (1 - sbar_h) / n_h / (sum_h N_h sbar_h)^2

    Parameters
    ----------
    sizes : ndarray (H,)
        ``N_h``.
    allocation : ndarray (H,)
        ``n_h`` (stratified) or the expected labels per stratum (ignored with ``item_terms``).
    expected_positives : ndarray (H,)
        ``sum_{i in h} s_i``.
    item_terms : ndarray (N,), optional
        Poisson sampling: the per-item variance terms ``(1 - pi_i)/pi_i [s_i(1 - s_i) +
        (s_i - sbar_h)^2]`` (Horvitz-Thompson variance of the difference estimator's residuals),
        summed in place of the stratified formula.

    Returns
    -------
    float
        ``inf`` when a non-empty stratum with guessed positives gets no label.
    """
    sizes = np.asarray(sizes, dtype=float)
    total = float(np.sum(expected_positives))
    if not total > 0:
        return 0.0
    if item_terms is not None:
        var = float(np.sum(item_terms))
    else:
        n = np.asarray(allocation, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            sb = np.where(sizes > 0, np.asarray(expected_positives) / np.maximum(sizes, 1), 0.0)
            s2 = sb * (1 - sb)
            terms = np.where(
                s2 > 0, sizes**2 * np.maximum(1 - n / np.maximum(sizes, 1), 0) * s2 / n, 0.0
            )
        var = float(np.sum(terms))
    return float(np.sqrt(var) / total)


def warn_positives_cv(cv: float, method: str, defensive: float, min_per_stratum: int) -> None:
    """Warn when :func:`positives_cv` exceeds :data:`POSITIVES_CV_WARN` (see there)."""
    if cv > POSITIVES_CV_WARN:
        warnings.warn(
            f"this design estimates the pool's positive total with a predicted coefficient of "
            f"variation of {cv:.2f} (method={method!r}, defensive={defensive:g}, "
            f"min_per_stratum={min_per_stratum}; calibrated guess): strata that hold many "
            "positives get very few labels, so sensitivity and F1, whose denominator is that "
            f"total, can be biased by up to {cv:.2f} standard errors (mostly upwards; see "
            "BenchmarkDesign.positives_cv). Raise the budget, min_per_stratum or defensive"
            + (", or use method='sqrt'" if method != "sqrt" else ""),
            UserWarning,
            stacklevel=3,
        )


def check_min_per_stratum(min_per_stratum: Any, scheme: str) -> int:
    """``min_per_stratum`` checked: at least 1 under stratified sampling, at least 0 under Poisson.

    A stratified design that gives a (non-empty) stratum no label gives its items inclusion
    probability 0: no estimator can see them, and :func:`evaluate` would report confident
    intervals that miss the positives they hold. Poisson sampling keeps every inclusion
    probability above 0 whatever the floor.
    """
    if scheme == "stratified":
        mps = check_count(min_per_stratum, "min_per_stratum", minimum=0)
        if mps < 1:
            raise ValueError(
                f"min_per_stratum must be >= 1 under stratified sampling, got "
                f"{min_per_stratum!r}: a stratum without labels gives its items inclusion "
                "probability 0, so no estimate can account for the positives they hold"
            )
        return mps
    return check_count(min_per_stratum, "min_per_stratum", minimum=0)


def allocate(sizes: np.ndarray, target: np.ndarray, budget: int, minimum: int) -> np.ndarray:
    """Integer allocation ``n_h`` proportional to ``target`` with ``min(N_h, minimum) <= n_h <= N_h``."""
    sizes = sizes.astype(np.int64)
    lo = np.minimum(sizes, minimum).astype(float)
    if lo.sum() > budget:
        raise ValueError(
            f"budget={budget} is too small: each of the {len(sizes)} strata needs at least "
            f"{minimum} labels (reduce n_strata or min_per_stratum)"
        )
    t = np.maximum(np.asarray(target, dtype=float), 0)
    if t.sum() <= 0:
        t = sizes.astype(float)
    zero = t <= 0
    if zero.any() and np.where(zero, lo, sizes).sum() < budget:
        # the strata with a positive target cannot hold the budget even when full (a hard or
        # 0/1 guess without the defensive share): they are taken whole, and the strata with no
        # target share the rest in proportion to their room above the floor
        n = np.where(zero, lo, sizes).astype(np.int64)
        room = np.where(zero, sizes - lo, 0.0)
        n += allocate(room.astype(np.int64), room, int(budget - n.sum()), 0)
        return n

    def total(lam):
        return np.clip(lam * t, lo, sizes).sum()

    hi = 1.0
    while total(hi) < budget and hi < 1e300:
        hi *= 2
    lam = optimize.brentq(lambda v: total(v) - budget, 0.0, hi, xtol=1e-12 * hi)
    x = np.clip(lam * t, lo, sizes)
    n = np.floor(x + 1e-9).astype(np.int64)
    rest = budget - n.sum()
    if rest > 0:
        frac = np.where(n < sizes, x - n, -np.inf)
        n[np.argsort(-frac, kind="stable")[:rest]] += 1
    elif rest < 0:
        frac = np.where(n > lo, x - n, np.inf)
        n[np.argsort(frac, kind="stable")[:-rest]] -= 1
    return n


def _poisson_inclusion(a: np.ndarray, budget: int, floor: np.ndarray | float) -> np.ndarray:
    """``pi_i = min(1, max(floor, lam a_i))`` with ``sum pi_i = budget`` (Poisson PPS)."""
    a = np.maximum(a, 0)

    def total(lam):
        return np.clip(lam * a, floor, 1.0).sum()

    if total(0.0) >= budget:
        return np.full(a.shape, budget / a.size)
    hi = 1.0
    while total(hi) < budget and hi < 1e300:
        hi *= 2
    lam = optimize.brentq(lambda v: total(v) - budget, 0.0, hi, xtol=1e-14 * hi)
    p = np.clip(lam * a, floor, 1.0)
    return np.minimum(p * (budget / p.sum()), 1.0)  # the rescale is ~1e-15: keep the cap


def _poisson_floored(
    a: np.ndarray, h: np.ndarray, sizes: np.ndarray, budget: int, minimum: int
) -> np.ndarray:
    """Poisson inclusion probabilities ``∝ a`` (capped at 1) summing to ``budget`` with at least
    ``min(N_h, minimum)`` expected labels in every stratum ``h``. An item with ``a = 0`` (a guess
    of exactly 0 with no defensive mixture) gets ``1e-9`` of the largest ``a``: an inclusion
    probability of 0 would hide it from the Horvitz-Thompson estimate.

    A stratum whose share falls below its floor gets exactly the floor (spread ``∝ a`` inside it)
    and the others share the rest; strata are added to the floored set until none is below its
    floor (at most one pass per stratum: a stratum, once floored, stays floored).
    """
    floor = np.minimum(sizes, minimum).astype(float)
    if a.max() > 0:  # every item keeps some share, so Horvitz-Thompson sees every item
        a = np.where(a > 0, a, 1e-9 * a.max())
    if floor.sum() > budget:
        raise ValueError(
            f"budget={budget} is too small: each of the {len(sizes)} strata needs at least "
            f"{minimum} labels (reduce n_strata or min_per_stratum)"
        )
    fixed = np.zeros(sizes.size, dtype=bool)
    while True:
        incl = np.empty(a.size)
        for k in np.flatnonzero(fixed):
            m = h == k
            ak = a[m]  # every item of a floored stratum keeps some share, so the floor is met
            ak = np.maximum(ak, 1e-9 * ak.max()) if ak.max() > 0 else np.ones_like(ak)
            incl[m] = 1.0 if floor[k] >= ak.size else _poisson_inclusion(ak, floor[k], 0.0)
        free = ~fixed[h]
        rest = budget - floor[fixed].sum()
        if free.any():
            incl[free] = 1.0 if rest >= free.sum() else _poisson_inclusion(a[free], rest, 0.0)
        low = ~fixed & (np.bincount(h, incl, sizes.size) < floor * (1 - 1e-12))
        if not low.any():
            return incl
        fixed |= low


def _guess_from_input(pool_or_guess, guess, model, prevalence, guess_precision):
    from ..pool import Pool

    if guess is None:
        if isinstance(pool_or_guess, Pool):
            pool = pool_or_guess
            m = pool.check_model(model)
            if pool.has_probs() and pool.n_classes == 2:
                guess = pool.view(m).prob[:, pool.pos]
            elif pool.scores is not None:
                guess = pool.scores[m]
            else:
                raise ValueError(
                    "the pool has neither binary probs nor scores to guess the class from; "
                    "pass guess="
                )
        else:
            guess = pool_or_guess
    elif pool_or_guess is not None and not isinstance(pool_or_guess, Pool):
        raise TypeError("pass the guess either as the first argument or as guess=, not both")
    s = check_finite(as_1d(guess, "guess", dtype=float), "guess")
    if s.size == 0:
        raise ValueError("guess is empty: the pool has no items")
    if isinstance(pool_or_guess, Pool) and len(pool_or_guess) != s.size:
        raise ValueError(f"guess has {s.size} entries but the pool has {len(pool_or_guess)} items")
    uniq = np.unique(s)
    if uniq.size <= 2 and np.all(np.isin(uniq, (0.0, 1.0))):
        # a hard class guess: turn it into probabilities with its precision and the prevalence
        if prevalence is None:
            raise ValueError(
                "a hard (0/1) class guess needs prevalence= to know how many positives it misses"
            )
        pi = scalar_rate(prevalence, "prevalence")
        g = check_fraction(guess_precision, "guess_precision", allow_zero=False, allow_one=True)
        n_p = s.sum()
        n_q = s.size - n_p
        # the guessed positives hold g n_p positives; the pool holds pi N: a guess whose implied
        # recall g n_p / (pi N) exceeds 1 is impossible (as in guidelines._guess_strata)
        if g * n_p > pi * s.size * (1 + 1e-9):
            raise ValueError(
                f"guess_precision={guess_precision!r} and prevalence={prevalence!r} are "
                f"inconsistent with this guess: its {int(n_p)} guessed positives at precision "
                f"{g:.4g} hold {g * n_p:.4g} positives, more than the {pi * s.size:.4g} of the "
                f"pool (implied recall {g * n_p / (pi * s.size):.4g} > 1)"
            )
        u_q = max(pi * s.size - g * n_p, 0.0) / n_q if n_q > 0 else 0.0
        if u_q >= 1:
            raise ValueError(f"prevalence={prevalence!r} is impossible with this guess")
        return np.where(s == 1, g, u_q), pi, True
    if np.all((s >= 0) & (s <= 1)):
        pi = float(s.mean()) if prevalence is None else scalar_rate(prevalence, "prevalence")
        return s, pi, False
    # scores: read as log-odds up to a shift fixed by the prevalence
    if prevalence is None:
        raise ValueError(
            "guess looks like scores (values outside [0, 1]); pass prevalence= to calibrate them"
        )
    pi = scalar_rate(prevalence, "prevalence")
    shift = optimize.brentq(
        lambda b: special.expit(s + b).mean() - pi, -60 - s.max(), 60 - s.min(), xtol=1e-12
    )
    return special.expit(s + shift), pi, False


def influence_coefficient(target: str, prevalence: float, rule_rate: float) -> float:
    """Factor ``c_t`` of the label variance in a random rule's squared influence on ``target``.

    ``Var(target) ≈ c_t Σ_h W_h² σ²_h / n_h`` for a rule of positive rate ``r̄`` that is
    independent of the label, evaluated by the post-stratified estimator of :func:`evaluate`
    (cells stratum x rule output, known rule margins), with ``σ²_h`` the label variance of
    stratum ``h``: sensitivity ``r̄(1 − r̄)/π²``, specificity ``r̄(1 − r̄)/(1 − π)²``, precision
    ``1/r̄``. Derivation in :func:`target_influence`.

    Parameters
    ----------
    target : str
        ``"sensitivity"``, ``"specificity"`` or ``"precision"``.
    prevalence : float
        ``π``.
    rule_rate : float
        ``r̄``.

    Returns
    -------
    float
    """
    pi, rbar = prevalence, rule_rate
    if target == "sensitivity":
        return rbar * (1 - rbar) / pi**2
    if target == "specificity":
        return rbar * (1 - rbar) / (1 - pi) ** 2
    return 1.0 / rbar


def target_influence(
    target: str,
    s: np.ndarray,
    prevalence: float,
    rule_rate: float,
    center: np.ndarray | float | None = None,
) -> np.ndarray:
    """Per-item squared influence on one target's estimate, averaged over random rules.

    The quantity behind the ``"sqrt"`` allocation of :func:`design` (a square-root rule, Cochran
    (1977), Sec. 5.5) and :meth:`BenchmarkDesign.predicted_variance_ratio`. It is the
    design-based counterpart of Valizadegan et al., Eqs. 3.5, 3.9, 3.11 (``σ²(Se) = |U_R^+|
    p(1 − p)/|S_O^+|²``, ...): there every unlabeled item of the rule's output class adds the
    label variance ``p(1 − p)``; here every item adds its label variance around its stratum's
    rate, and the rule's own randomness adds nothing, because :func:`evaluate` post-stratifies
    on the rule output with the rule's pool margins known.

    Derivation. Post-stratified totals ``TP = Σ_h N_h+ θ_h+``, ``FN = Σ_h N_h− θ_h−`` with
    ``FP = K − TP``, ``TN = (N − K) − FN``. A rule that flags items at rate ``r̄`` independently
    of the label has ``N_h+ ≈ r̄ N_h``, ``n_h+ ≈ r̄ n_h`` and ``θ_h± = s̄_h`` (the stratum's
    positive rate), so ``Var TP = Σ_h N_h² r̄ σ²_h / n_h`` and ``Var FN = Σ_h N_h² (1 − r̄)
    σ²_h / n_h``, independent, with ``σ²_h = s̄_h(1 − s̄_h)``. With ``TP = r̄ Nπ``, ``FN = (1 −
    r̄) Nπ`` the delta method gives ``Var Se = [(1 − r̄)² r̄ + r̄² (1 − r̄)] Σ_h N_h² σ²_h /
    n_h / (Nπ)²``, i.e. ``Var = Σ_h W_h² ā_h / n_h`` with the per-item influence::

        sensitivity  r̄(1 − r̄) σ² / π²
        specificity  r̄(1 − r̄) σ² / (1 − π)²
        precision    σ² / r̄             (TP/K with K = r̄ N known)

    (:func:`influence_coefficient` times ``σ²``). All three are proportional to the label
    variance, so for random rules the three targets ask for the same allocation. The per-item
    label variance around a centre ``c`` (the stratum's mean guess) is ``E(y − c)² = s(1 − s) +
    (s − c)²``, whose stratum sum is ``N_h s̄_h(1 − s̄_h)``; without ``center`` it is
    ``s(1 − s)``. (The former version used the influence of the plain ratio estimator, e.g.
    ``r̄(1 − r̄)(1 − s)/(1 − π)²`` for specificity, which keeps the rule's noise that
    post-stratification removes: it predicted a specificity variance ratio of 1.81 against
    random sampling where repeated sampling gave 0.41.)

    Parameters
    ----------
    target : str
        ``"sensitivity"``, ``"specificity"`` or ``"precision"``.
    s : ndarray
        Guessed positive probabilities.
    prevalence : float
        ``π``.
    rule_rate : float
        ``r̄``.
    center : ndarray, float or None, optional
        The working rate each item's label is compared with (its stratum's mean guess ``s̄_h``);
        ``None``: the item's own ``s`` (influence ``∝ s(1 − s)``).

    Returns
    -------
    ndarray, shaped as ``s``
    """
    s = np.asarray(s, dtype=float)
    var = s * (1 - s)
    if center is not None:
        var = var + (s - center) ** 2
    return influence_coefficient(target, prevalence, rule_rate) * var


def stratum_influence(
    target: str, sum_s: np.ndarray, sizes: np.ndarray, prevalence: float, rule_rate: float
) -> np.ndarray:
    """``Σ_{i∈h}`` of :func:`target_influence` centred on the stratum mean: ``c_t N_h s̄_h(1 − s̄_h)``.

    Parameters
    ----------
    target : str
    sum_s : ndarray (H,)
        ``Σ_{i∈h} s_i``.
    sizes : ndarray (H,)
        ``N_h``.
    prevalence, rule_rate : float
        ``π`` and ``r̄``.

    Returns
    -------
    ndarray (H,)
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        sb = np.where(sizes > 0, sum_s / np.maximum(sizes, 1), 0.0)
    return influence_coefficient(target, prevalence, rule_rate) * sizes * sb * (1 - sb)


def allocation_target(
    method: str,
    sizes: np.ndarray,
    influence_sums: np.ndarray | None,
    expected_positives: np.ndarray | None,
    *,
    budget: int,
    prevalence: float,
    targets: dict,
    rule_rate: float | None,
    defensive: float,
) -> np.ndarray:
    """The continuous per-stratum allocation of :func:`design`, before rounding (:func:`allocate`).

    Parameters
    ----------
    method : {"sqrt", "paper", "proportional", "equal"}
        As for :func:`design`.
    sizes : ndarray (H,)
        Items per stratum.
    influence_sums : ndarray (H,) or None
        ``Σ_{x∈h} a(x)``, the target-weighted :func:`target_influence` (``"sqrt"`` only).
    expected_positives : ndarray (H,) or None
        ``Σ_{x∈h} s(x)`` (``"paper"`` only).
    budget : int
    prevalence : float
    targets : dict
        Target weights (:func:`~bayes_activeeval.benchmark.guidelines.parse_targets`).
    rule_rate : float or None
        The rule rate given by the user (``None``: the prevalence).
    defensive : float
        ``λ``: the share mixed in proportionally.

    Returns
    -------
    ndarray (H,)
        Sums to ``budget``.
    """
    H = sizes.size
    N = sizes.sum()
    pi = prevalence
    rbar = pi if rule_rate is None else rule_rate
    if method == "sqrt":
        target = sizes * np.sqrt(np.maximum(influence_sums, 0) / sizes)
        if not target.sum() > 0:  # the guess claims to know every label: nothing to optimise
            target = sizes.astype(float)
    elif method == "proportional":
        target = sizes.astype(float)
    elif method == "equal":
        target = np.ones(H)
    else:
        tw = targets
        if "precision" in tw and "specificity" in tw and rule_rate is not None:
            p = equalizing_rate(pi, rbar, pair="precision-specificity")
        elif "sensitivity" in tw and "specificity" in tw and rule_rate is not None:
            p = equalizing_rate(pi, rbar, pair="sensitivity-specificity")
        else:
            p = equalizing_rate(pi)
        need = positives_needed(pi, N, budget, p)
        exp_pos = expected_positives  # expected positives if the stratum were labeled fully
        target = np.zeros(H)
        remaining_pos, remaining_budget = need, float(budget)
        for k in np.argsort(-exp_pos / sizes, kind="stable"):
            if remaining_pos <= 0 or remaining_budget <= 0:
                break
            rate = exp_pos[k] / sizes[k]
            take = min(sizes[k], remaining_pos / max(rate, 1e-12), remaining_budget)
            target[k] = take
            remaining_pos -= take * rate
            remaining_budget -= take
        if remaining_budget > 0:
            free = np.maximum(sizes - target, 0)
            if free.sum() > 0:
                target += remaining_budget * free / free.sum()
    target = target / target.sum() * budget
    return (1 - defensive) * target + defensive * budget * sizes / N


def design(
    pool_or_guess: Any = None,
    *,
    budget: int,
    targets: Any = ("sensitivity", "specificity", "precision"),
    guess: Any = None,
    method: str = "sqrt",
    scheme: str = "stratified",
    n_strata: int | None = None,
    strata: Any = None,
    prevalence: float | None = None,
    rule_rate: float | None = None,
    guess_precision: float = 0.5,
    model: str | None = None,
    defensive: float = 0.1,
    min_per_stratum: int = 2,
) -> BenchmarkDesign:
    """Plan which pool items to label for evaluating rules that are not known yet.

    The design is deterministic; :meth:`BenchmarkDesign.sample` draws from it with an ``rng``.

    Steps: (1) turn the class guess into a probability ``s_i`` per item; (2) form strata — the
    guessed class for a hard guess, else ``n_strata`` score strata of ``logit(s)`` by the
    cumulative-sqrt(F) rule (:func:`bayes_activeeval.strata.score_strata`); (3) allocate the
    budget; (4) realise it with known inclusion probabilities.

    Allocation methods:

    - ``"sqrt"`` (default): a square-root (Neyman) rule for rules not known yet (Cochran (1977),
      Sec. 5.5). Averaging an item's squared influence on the post-stratified estimates of
      :func:`evaluate` over rules of rate ``rbar`` that are independent of the label gives
      (:func:`target_influence`; the design-based form of Valizadegan et al., Eqs. 3.5, 3.9,
      3.11)::

          a_i = [w_Se rbar(1-rbar)/pi^2 + w_Sp rbar(1-rbar)/(1-pi)^2 + w_Pr/rbar]
                x [s_i(1-s_i) + (s_i - sbar_h)^2]

      (the label variance of item ``i`` around its stratum's mean guess ``sbar_h``; its stratum
      sum is ``N_h sbar_h(1 - sbar_h)``), and the variance-optimal design samples ``pi_i ∝
      sqrt(a_i)`` (Poisson) or ``n_h ∝ N_h sqrt(mean_h a) = N_h sqrt(sbar_h(1 - sbar_h))``
      (stratified, Neyman). Post-stratification on the rule output removes the rule's own
      noise, so only the label variance is left and the three targets ask for the *same*
      allocation: ``targets`` weights change nothing here (they matter for ``"paper"``). Items
      whose label the guess claims to know (``s`` of 0 or 1) need no labels beyond the floors;
      when the guess claims to know every label (a perfect hard guess) the allocation falls
      back to proportional.
    - ``"paper"``: the paper's guideline as stated: the target number of positives from Eq. 3.23
      with ``p`` from Eq. 3.29 (``rule_rate=None``), Eq. 3.22 (precision and specificity
      targeted) or Eq. 3.25 (sensitivity and specificity), sought in the strata with the highest
      guess first (expected positives ``sum s_i``); the rest of the budget goes to the other
      strata in proportion to their size. Its estimates stay unbiased here because
      :func:`evaluate` weights by the design (the paper itself used unweighted plug-ins and
      blind labeling, which are biased for informative rules).
    - ``"proportional"``: ``n_h ∝ N_h`` (stratified random sampling).
    - ``"equal"``: the same number of labels per stratum.

    ``defensive`` mixes the allocation with the proportional one, ``(1-λ) opt + λ prop``
    (a defensive mixture, as Marchant & Rubinstein (2021), Sec. 3.3.1: keeps weights bounded when the guess is wrong). Every non-empty stratum
    gets at least ``min(N_h, min_per_stratum)`` labels so its variance can be estimated.

    A design whose strata holding many positives get only one or two labels (``"paper"`` with
    ``defensive=0``) estimates the pool's positive total with a skewed, high-variance estimate,
    and sensitivity and F1 of every rule inherit a ratio bias of up to ``CV`` standard errors
    (:func:`positives_cv`; random-rule sensitivity +0.024, about half its value, at 20,000 items,
    2% positives, 300 labels, ``min_per_stratum=1``): :func:`design` warns when the predicted
    ``CV`` exceeds :data:`POSITIVES_CV_WARN` (0.5).

    Parameters
    ----------
    pool_or_guess : Pool or array-like (N,)
        A :class:`~bayes_activeeval.Pool` (its model's positive-class probability, or its score,
        is the guess) or the guess itself: probabilities in [0, 1], scores (log-odds up to a
        shift; needs ``prevalence``), or a hard 0/1 guess (needs ``prevalence``; ``s_i`` is then
        ``guess_precision`` on guessed positives and the implied miss rate elsewhere).
    budget : int
        Labels to spend (expected number under Poisson sampling).
    targets : str, sequence or mapping
        "sensitivity", "specificity", "precision" (weights via a mapping).
    guess : array-like, optional
        The guess, when the first argument is a pool.
    method : {"sqrt", "paper", "proportional", "equal"}
    scheme : {"stratified", "poisson"}
        Stratified SRS without replacement (exact ``n_h``) or Poisson sampling (independent
        draws, random size).
    n_strata : int, optional
        Score strata (default ``budget // 25`` clipped to 2..8, so that each stratum gets
        about 25 labels or more on average; 2 for a hard guess).
    strata : array-like (N,) of int, optional
        Your own strata (overrides ``n_strata``).
    prevalence : float, optional
        ``pi``; default the mean guess.
    rule_rate : float, optional
        ``rbar``, the positive rate of the rules planned for (default ``pi``, the paper's
        "uninformative-rate" case, Eq. 3.29).
    guess_precision : float
        Precision of a hard 0/1 guess (ignored otherwise). Its guessed positives then hold
        ``guess_precision x n_guessed`` positives, which must not exceed ``prevalence x N``
        (an implied recall above 1 is refused, as in :func:`~bayes_activeeval.benchmark.variance_ratio`).
    model : str, optional
        Which model of a multi-model pool holds the guess.
    defensive : float
        Mixing weight ``λ`` with proportional allocation, in [0, 1).
    min_per_stratum : int
        Minimum labels per stratum (stratified scheme: at least 1, since a stratum without
        labels would give its items inclusion probability 0); also the Poisson floor per stratum
        in expectation (0 allowed: Poisson inclusion probabilities stay above 0).

    Returns
    -------
    BenchmarkDesign

    Warns
    -----
    UserWarning
        When :meth:`BenchmarkDesign.positives_cv` exceeds :data:`POSITIVES_CV_WARN`.
    """
    if getattr(pool_or_guess, "is_lazy", False):  # a pool on dask: stratum-level sums
        from .lazy import lazy_design

        return lazy_design(
            pool_or_guess,
            budget=budget,
            targets=targets,
            guess=guess,
            method=method,
            scheme=scheme,
            n_strata=n_strata,
            strata=strata,
            prevalence=prevalence,
            rule_rate=rule_rate,
            guess_precision=guess_precision,
            model=model,
            defensive=defensive,
            min_per_stratum=min_per_stratum,
        )
    if method not in ("sqrt", "paper", "proportional", "equal"):
        raise ValueError(
            f"method must be 'sqrt', 'paper', 'proportional' or 'equal', got {method!r}"
        )
    if scheme not in ("stratified", "poisson"):
        raise ValueError(f"scheme must be 'stratified' or 'poisson', got {scheme!r}")
    s, pi, hard = _guess_from_input(pool_or_guess, guess, model, prevalence, guess_precision)
    N = s.size
    budget = check_count(budget, "budget")
    if budget > N:
        raise ValueError(f"budget must be <= the pool size {N}, got {budget!r}")
    tw = parse_targets(targets)
    lam = check_fraction(defensive, "defensive")
    mps = check_min_per_stratum(min_per_stratum, scheme)
    rbar = pi if rule_rate is None else scalar_rate(rule_rate, "rule_rate")

    # strata
    if strata is not None:
        h = as_1d(strata, "strata", n=N)
        if h.dtype.kind not in "iu":
            raise TypeError(f"strata must hold integers, got dtype {h.dtype}")
        _, h = np.unique(h, return_inverse=True)
        # order strata by mean guess
        H = int(h.max()) + 1
        mean_s = np.bincount(h, s, H) / np.bincount(h, minlength=H)
        rank = np.empty(H, dtype=np.int64)
        rank[np.argsort(mean_s, kind="stable")] = np.arange(H)
        h = rank[h]
    elif hard:
        _, h = np.unique(s, return_inverse=True)
    else:
        k = (
            int(np.clip(budget // 25, 2, 8))
            if n_strata is None
            else check_count(n_strata, "n_strata")
        )
        z = special.logit(np.clip(s, 1e-9, 1 - 1e-9))
        h, _ = score_strata(z, k, method="csf")
    h = h.astype(np.int64)
    H = int(h.max()) + 1
    sizes = np.bincount(h, minlength=H)

    # per-item squared influence averaged over random rules (the "sqrt" rule): the label
    # variance around the stratum's mean guess, times each target's coefficient
    names = list(tw)
    sbar_h = np.bincount(h, s, H) / sizes
    influence = np.array([target_influence(t, s, pi, rbar, center=sbar_h[h]) for t in names])
    a = (np.array([tw[t] for t in names])[:, None] * influence).sum(axis=0)

    # target allocation (continuous) per stratum
    target = allocation_target(
        method,
        sizes,
        np.bincount(h, a, H) if method == "sqrt" else None,
        np.bincount(h, s, H) if method == "paper" else None,
        budget=budget,
        prevalence=pi,
        targets=tw,
        rule_rate=None if rule_rate is None else rbar,
        defensive=lam,
    )

    if scheme == "stratified":
        alloc = allocate(sizes, target, budget, mps)
        incl = (alloc / sizes)[h]
    else:
        if method == "sqrt":
            item_a = np.sqrt(a)
            if not item_a.sum() > 0:  # the guess claims to know every label
                item_a = np.ones(N)
            item_a = (1 - lam) * item_a / item_a.sum() * budget + lam * budget / N
        else:
            item_a = (target / sizes)[h]
        incl = _poisson_floored(item_a, h, sizes, budget, mps)
        alloc = np.bincount(h, incl, H)
    # the design owns its arrays: a copy of the caller's guess (as_1d may return the caller's
    # own float array), and every stored array read-only, so that nothing can change the design
    # after it was made
    s = np.array(s, dtype=float)
    for arr in (h, incl, alloc, sizes, s, influence):
        arr.flags.writeable = False
    dsg = BenchmarkDesign(
        strata=h,
        inclusion=incl,
        allocation=alloc,
        stratum_sizes=sizes,
        guess=s,
        prevalence=pi,
        budget=budget,
        scheme=scheme,
        method=method,
        targets=tw,
        rule_rate=rbar,
        defensive=lam,
        _influence=influence,
    )
    warn_positives_cv(dsg.positives_cv(), method, lam, mps)
    return dsg


def stratum_guess(dsg: BenchmarkDesign) -> np.ndarray:
    """Mean guessed positive probability of each stratum (H,)."""
    return np.bincount(dsg.strata, dsg.guess, dsg.n_strata) / dsg.stratum_sizes
