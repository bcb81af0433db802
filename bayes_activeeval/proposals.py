"""Proposals ``q``: the distributions over pool items from which labels are drawn.

The one optimal proposal (Sawade (2012), Thm. 4.1, 4.2, 5.1; Marchant & Rubinstein (2021), Prop. 1)
minimizes the asymptotic variance of the self-normalized importance-weighted estimate of any
generalized measure ``G = g(R)``::

    q*(x) ∝ p(x) · c(x)^(-1/2) · sqrt( E_{y∼π(y|x)} ‖Dg(R) (ℓ(x, y) − R)‖² )

with ``π`` the belief about the label, ``R`` the intrinsic risk under that belief (Sawade (2012),
Eq. 4.21-4.22) and ``c`` the label cost. The papers' closed forms (Cor. 4.2-4.4, 5.1, 5.2, Eq. 4.23)
are special cases, reproduced by this general code in the tests.

Defensive mixing, ``q ← (1 − δ) q + δ p``, keeps ``q > 0`` wherever ``p > 0`` and bounds every
importance weight by ``1/δ``; it costs at most a factor ``1/(1 − δ)`` in variance relative to the
unmixed proposal (because ``q ≥ (1 − δ) q*`` pointwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._validation import check_count, check_fraction, check_rng, show
from .beliefs import Belief, CategoricalBelief, as_belief
from .measures import Measure, ModelView
from .strata import score_strata

__all__ = [
    "DEFAULT_BELIEF_FLOOR",
    "DEFAULT_MIX",
    "Draws",
    "Proposal",
    "class_deviation_norms",
    "expected_loss",
    "optimal_proposal",
    "passive_proposal",
    "stratified_proposal",
]

#: Default defensive mixture weight δ: weights are bounded by 1/δ = 20 and the variance is at most
#: 1/(1-δ) ≈ 1.053 times that of the unmixed proposal.
DEFAULT_MIX = 0.05
#: Default floor on the belief's class probabilities (keeps every label possible, so q > 0 wherever
#: the loss can be non-zero even without mixing).
DEFAULT_BELIEF_FLOOR = 1e-6
#: Items processed per block by the vectorised kernels (bounds peak memory on 10^7-item pools).
CHUNK = 1 << 18


@dataclass(frozen=True)
class Draws:
    """Items drawn i.i.d. with replacement from a proposal.

    Attributes
    ----------
    indices : ndarray (n,)
        Pool indices of the draws, in draw order (repeats included).
    weights : ndarray (n,)
        Importance weights ``v = p(x)/q(x)`` (Sawade (2012), Eq. 3.11).
    q : ndarray (n,)
        The proposal's probability of each drawn item.
    """

    indices: np.ndarray
    weights: np.ndarray
    q: np.ndarray

    def __len__(self) -> int:
        return int(self.indices.size)

    @property
    def n_distinct(self) -> int:
        """Number of distinct items (labels a deterministic oracle must give)."""
        return int(np.unique(self.indices).size)

    def unique(self) -> np.ndarray:
        """Distinct drawn items in order of first draw: the items to label."""
        _, first = np.unique(self.indices, return_index=True)
        return self.indices[np.sort(first)]

    def __getitem__(self, key) -> Draws:
        """The draws selected by a slice, mask or index array (e.g. the first ``k`` draws)."""
        return Draws(self.indices[key], self.weights[key], self.q[key])

    def __add__(self, other: Draws) -> Draws:
        return Draws(
            np.concatenate([self.indices, other.indices]),
            np.concatenate([self.weights, other.weights]),
            np.concatenate([self.q, other.q]),
        )

    def __repr__(self) -> str:
        return f"Draws(n={len(self)}, distinct={self.n_distinct})"


@dataclass
class Proposal:
    """A sampling distribution ``q`` over the pool's items.

    Attributes
    ----------
    q : ndarray (n,)
        Probabilities, summing to one.
    p : ndarray (n,)
        The test distribution the estimate targets.
    kind : str
        ``"optimal"``, ``"passive"`` or ``"stratified"``.
    info : dict
        What the proposal was built from: the intrinsic risk, the per-item expected squared
        deviation ``u(x)``, mixing weight, …
    """

    q: np.ndarray
    p: np.ndarray
    kind: str
    info: dict[str, Any] = field(default_factory=dict)
    _cdf: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        q = np.asarray(self.q, dtype=float)
        if q.ndim != 1 or q.shape != np.shape(self.p):
            raise ValueError(f"q has shape {q.shape} but p has shape {np.shape(self.p)}")
        total = q.sum()
        if not (np.isfinite(total) and q.min() >= 0):  # a NaN fails both tests
            raise ValueError("q must be finite and non-negative")
        if total <= 0:
            raise ValueError("q has no mass")
        self.q = q if abs(total - 1.0) < 1e-12 else q / total

    @property
    def n_items(self) -> int:
        return self.q.size

    def weights(self, indices: np.ndarray) -> np.ndarray:
        """Importance weights ``p/q`` of the given items."""
        return self.p[indices] / self.q[indices]

    def draw(self, n: int, rng: Any = None, *, unique: bool = False) -> Draws:
        """Draw items i.i.d. with replacement (Sawade (2012), Algorithm 2, lines 2-3).

        Parameters
        ----------
        n : int
            Number of draws; with ``unique=True``, the number of *distinct* items to reach
            (drawing continues until that many distinct items appeared: a deterministic oracle's
            label budget, repeats kept for the estimate).
        rng : None, int or numpy.random.Generator
            Source of randomness (SPEC 7).
        unique : bool
            See ``n``.
        """
        n = check_count(n, "n")
        rng = check_rng(rng)
        if self._cdf is None:
            self._cdf = np.cumsum(self.q)
        if not unique:
            idx = self._sample(n, rng)
        else:
            support = int(np.count_nonzero(self.q))
            if n > support:
                raise ValueError(
                    f"n={n} distinct items requested but the proposal has only {support} items "
                    "with positive probability"
                )
            idx = np.empty(0, dtype=np.int64)
            n_distinct = 0
            while n_distinct < n:
                idx = np.concatenate([idx, self._sample(max(n - n_distinct, 16), rng)])
                _, first = np.unique(idx, return_index=True)
                n_distinct = first.size
            # stop exactly at the n-th distinct item: cut after its first occurrence
            idx = idx[: np.sort(first)[n - 1] + 1]
        return Draws(idx, self.weights(idx), self.q[idx])

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(n) * self._cdf[-1]
        idx = np.searchsorted(self._cdf, u, side="right")
        return np.minimum(idx, self.q.size - 1).astype(np.int64)

    def predicted_variance(self, u: np.ndarray | None = None) -> float:
        """Asymptotic variance per draw, ``Σ_x p(x)² u(x)/q(x)`` (Sawade (2012), Sec. 1.7 of the
        catalogue; Lemma 3.4), from the belief the proposal was built with.

        ``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²``; divide by ``n`` for the variance of an estimate from
        ``n`` draws. Pass ``u`` to evaluate this proposal under another belief or measure (e.g.
        a passive proposal, which computes none); ``inf`` when ``q = 0`` where ``p u > 0``.
        """
        u = self.info.get("u") if u is None else np.asarray(u, dtype=float)
        if u is None:
            raise ValueError(
                "this proposal has no expected deviations u(x); build it with a measure"
            )
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self.p * u > 0, self.p**2 * u / self.q, 0.0)
        return float(terms.sum())

    def expected_cost(self, costs: np.ndarray | None) -> float:
        """Expected label cost of one draw, ``E_q[c]`` (Sawade (2012), Thm. 4.2: ``n* = Λ/E_q[c]``)."""
        if costs is None:
            return 1.0
        return float(self.q @ costs)

    def __repr__(self) -> str:
        return f"Proposal(kind={self.kind!r}, n_items={self.n_items})"


# ------------------------------------------------------------------------------------------------
# Kernels. Two paths compute the same quantities:
#  - the generic path evaluates the loss for every label value, chunk by chunk;
#  - the tabular path, for classification measures whose loss depends on an item only through the
#    predicted class(es) (Measure.tabular), evaluates the loss once per (prediction, label) cell and
#    gathers: exact, O(n·C), and an order of magnitude faster on 10^7-item pools.
@dataclass(frozen=True)
class LossTable:
    """The loss of a tabular measure as a table over (prediction key, label).

    ``keys[x]`` codes the prediction(s) of item ``x`` (for several models ``Σ_m f_m(x) C^m``) and
    ``table[k, c]`` is ``ℓ`` for prediction key ``k`` and label ``c``, shape ``(K, C, d)``.
    """

    keys: np.ndarray
    table: np.ndarray


MAX_TABLE_ROWS = 1 << 20


def loss_table(pool, measure: Measure, views) -> LossTable | None:
    """The :class:`LossTable` of a tabular measure on a classification pool, else ``None``."""
    if not measure.tabular or pool.task == "regression":
        return None
    C = pool.n_classes
    full = views(None)
    names = list(full) if isinstance(full, dict) else [None]
    preds = [full[m].pred for m in names] if isinstance(full, dict) else [full.pred]
    K = C ** len(preds)
    if K * C > MAX_TABLE_ROWS:
        return None
    if len(preds) == 1:
        keys = preds[0]
    else:
        keys = np.zeros(pool.n_items, dtype=np.int64)
        for i, pr in enumerate(preds):
            keys += pr.astype(np.int64) * C**i
    combos = np.arange(K)
    cell_preds = [np.repeat((combos // C**i) % C, C) for i in range(len(preds))]
    y = np.tile(np.arange(C), K)

    def mk(pr):
        return ModelView(pred=pr, pos=pool.pos, n_classes=C)

    cells = {m: mk(cp) for m, cp in zip(names, cell_preds, strict=True)}
    view = cells if isinstance(full, dict) else cells[None]
    table = measure.loss(y, view).reshape(K, C, measure.dim)
    return LossTable(keys, table)


def _gather(values: np.ndarray, keys: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """``Σ_c probs[x, c] · values[keys[x], c]`` for every item (values of shape (K, C))."""
    out = probs[:, 0] * values[keys, 0]
    for c in range(1, probs.shape[1]):
        out += probs[:, c] * values[keys, c]
    return out


def expected_loss(pool, measure: Measure, views, belief: Belief, chunk: int = CHUNK) -> np.ndarray:
    """Per-item expected loss ``E_{y∼π}[ℓ(x, y)]``, shape ``(n, d)``."""
    out = np.empty((pool.n_items, measure.dim))
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)
        out[sl] = belief.expect(lambda y, s, v=v: measure.loss(y, v), sl)
    return out


def intrinsic_risk(
    pool,
    measure: Measure,
    views,
    belief: Belief,
    chunk: int = CHUNK,
    table: LossTable | None = None,
) -> np.ndarray:
    """``R = Σ_x p(x) E_π[ℓ(x, y)]`` (Sawade (2012), Eq. 4.21-4.22), shape ``(d,)``."""
    p = pool.p
    if table is None and isinstance(belief, CategoricalBelief):
        table = loss_table(pool, measure, views)
    if table is not None:
        K, C, _ = table.table.shape
        W = np.stack(
            [
                np.bincount(table.keys, weights=p * belief.probs[:, c], minlength=K)
                for c in range(C)
            ],
            axis=1,
        )
        return np.einsum("kc,kcd->d", W, table.table)
    R = np.zeros(measure.dim)
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)
        el = belief.expect(lambda y, s, v=v: measure.loss(y, v), sl)
        R += p[sl] @ el
    return R


def _centre(measure: Measure, J: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``Dg(R)·R``, the centring of ``Dg(R)(ℓ − R) = Dg(R)ℓ − Dg(R)R``. It vanishes exactly for a
    scale-invariant ``g`` (Euler's theorem, degree 0); using the exact zero keeps ``q = 0`` where
    the loss is identically zero (e.g. predicted negatives for precision)."""
    return np.zeros(J.shape[0]) if measure.scale_invariant else J @ R


def expected_sq_deviation(
    pool,
    measure: Measure,
    views,
    belief: Belief,
    R: np.ndarray,
    J: np.ndarray,
    chunk: int = CHUNK,
    table: LossTable | None = None,
) -> np.ndarray:
    """``u(x) = E_{y∼π}‖Dg(R)(ℓ(x, y) − R)‖²`` per item (the integrand of Sawade (2012), Thm. 4.1;
    Marchant & Rubinstein (2021), Eq. 5 with the self-normalized centring)."""
    JT = J.T
    offset = _centre(measure, J, R)
    if table is None and isinstance(belief, CategoricalBelief):
        table = loss_table(pool, measure, views)
    if table is not None:
        dev = table.table @ JT - offset  # (K, C, m)
        return _gather(np.einsum("kcm,kcm->kc", dev, dev), table.keys, belief.probs)
    u = np.empty(pool.n_items)
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)

        def sq(y, s, v=v):
            dev = measure.loss(y, v) @ JT - offset
            return np.einsum("ij,ij->i", dev, dev)

        u[sl] = belief.expect(sq, sl)
    return u


def explained_sq_deviation(
    pool,
    measure: Measure,
    views,
    belief: Belief,
    R: np.ndarray,
    J: np.ndarray,
    chunk: int = CHUNK,
    table: LossTable | None = None,
) -> np.ndarray:
    """``‖Dg(R)(m(x) − R)‖²`` per item, ``m(x) = E_π[ℓ(x, y)]``: the part of
    :func:`expected_sq_deviation` the belief explains. ``u(x)`` minus this is the belief's
    conditional variance ``E_π‖Dg(R)(ℓ − m(x))‖²``, the integrand of the model-assisted proposal."""
    offset = _centre(measure, J, R)
    if table is None and isinstance(belief, CategoricalBelief):
        table = loss_table(pool, measure, views)
    if table is not None:
        dev = table.table @ J.T - offset  # (K, C, m)
        out = np.zeros(pool.n_items)
        for j in range(dev.shape[2]):
            mj = _gather(dev[:, :, j], table.keys, belief.probs)
            out += mj * mj
        return out
    m_all = expected_loss(pool, measure, views, belief, chunk)
    dev = m_all @ J.T - offset
    return np.einsum("ij,ij->i", dev, dev)


def class_deviation_norms(
    pool,
    measure: Measure,
    views,
    R: np.ndarray,
    J: np.ndarray,
    *,
    power: int = 1,
    nonzero: bool = True,
    chunk: int = CHUNK,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``n[x, c] = ‖Dg(R)(ℓ(x, c) − R)‖^power`` for every item and class, shape ``(n, C)``.

    With ``nonzero=True`` also ``nz[x, c] = any(ℓ(x, c) ≠ 0)``. Any floor ``ε`` and categorical
    belief ``π`` then give the integrand of the practical proposals,
    ``a(x) = Σ_c π(c|x) max{n[x, c], ε nz[x, c]}`` (Marchant & Rubinstein (2021), Prop. 2),
    without re-evaluating the loss.
    """
    if power not in (1, 2):
        raise ValueError(f"power must be 1 or 2, got {power!r}")
    offset = _centre(measure, J, R)
    table = loss_table(pool, measure, views)
    if table is not None:  # exact: evaluate per (prediction, label) cell and gather
        dev = table.table @ J.T - offset
        sq = np.einsum("kcm,kcm->kc", dev, dev)
        cell = np.sqrt(sq) if power == 1 else sq
        nz_cell = np.any(table.table != 0, axis=2) if nonzero else None
        return cell[table.keys], None if nz_cell is None else nz_cell[table.keys]
    n_items, C = pool.n_items, pool.n_classes
    out = np.empty((n_items, C))
    nz = np.empty((n_items, C), dtype=bool) if nonzero else None
    scalar = J.shape[0] == 1
    j0 = J[0]
    c0 = float(offset[0])
    for start in range(0, n_items, chunk):
        sl = slice(start, min(start + chunk, n_items))
        v = views(sl)
        size = sl.stop - sl.start
        for c in range(C):
            L = measure.loss(np.full(size, c, dtype=np.int32), v)
            if scalar:
                dev = L @ j0 - c0
                out[sl, c] = np.abs(dev) if power == 1 else dev * dev
            else:
                dev = L @ J.T - offset
                sq = np.einsum("ij,ij->i", dev, dev)
                out[sl, c] = np.sqrt(sq) if power == 1 else sq
            if nz is not None:  # column loop: much faster than any(axis=1) for small d
                acc = L[:, 0] != 0
                for j in range(1, L.shape[1]):
                    acc |= L[:, j] != 0
                nz[sl, c] = acc
    return out, nz


def _support_needed(pool, measure: Measure, views, chunk: int = CHUNK) -> np.ndarray:
    """Items that need ``q > 0``: all with ``p > 0``, except, for scale-invariant measures, items
    whose loss is zero for every possible label (Marchant & Rubinstein (2021), Sec. 1.7 of the
    catalogue)."""
    need = pool.p > 0
    if not measure.scale_invariant or pool.task == "regression":
        return need
    table = loss_table(pool, measure, views)
    if table is not None:
        nonzero = np.any(table.table != 0, axis=(1, 2))
        return need & nonzero[table.keys]
    for start in range(0, pool.n_items, chunk):
        sl = slice(start, min(start + chunk, pool.n_items))
        v = views(sl)
        any_nonzero = np.zeros(sl.stop - sl.start, dtype=bool)
        for c in range(pool.n_classes):
            y = np.full(sl.stop - sl.start, c, dtype=np.int32)
            any_nonzero |= np.any(measure.loss(y, v) != 0, axis=1)
        need[sl] &= any_nonzero
    return need


def _costs(pool, costs) -> np.ndarray | None:
    if costs is None or costs is True:
        return pool.costs
    if costs is False:
        return None
    arr = np.asarray(costs, dtype=float)
    if arr.shape != (pool.n_items,):
        raise ValueError(f"costs has shape {arr.shape}; expected ({pool.n_items},)")
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        i = int(np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))[0])
        raise ValueError(f"costs[{i}] = {show(arr[i])}; label costs must be positive and finite")
    return arr


def _mix(s: np.ndarray, p: np.ndarray, mix: float) -> np.ndarray:
    """``(1 − δ) s/Σs + δ p``, in place on ``s``."""
    s *= (1.0 - mix) / s.sum()
    if mix:
        s += mix * p
    return s


def optimal_proposal(
    pool,
    measure: str | Measure,
    *,
    model: str | None = None,
    belief: Any = None,
    risk: Any = None,
    costs: Any = None,
    belief_floor: float = DEFAULT_BELIEF_FLOOR,
    mix: float = DEFAULT_MIX,
    estimator: str = "ipw",
) -> Proposal:
    """The variance-optimal proposal for any generalized measure.

    Implements ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(E_{y∼π}‖Dg(R)(ℓ(x, y) − R)‖²)``: Sawade (2012),
    Thm. 4.1 (Eq. 4.6), Thm. 4.2 (Eq. 4.25, label costs) and Thm. 5.1 (Eq. 5.5, differences of two
    models); Marchant & Rubinstein (2021), Prop. 1 (Eq. 5). The empirical version plugs in the pool
    distribution for ``p(x)``, the belief for ``p(y|x)`` and the intrinsic risk for ``R``
    (Sawade (2012), Sec. 4.2.2, Eq. 4.21-4.22).

    Parameters
    ----------
    pool : Pool
    measure : str or Measure
        Any measure; one bound to two models (:func:`~bayes_activeeval.measures.difference`) gives
        the power-optimal comparison proposal (Sawade (2012), Thm. 5.1).
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    belief : Belief or array-like, optional
        ``π(y|x)``. Default: the model's own probabilities (or Gaussian predictive), and for a
        measure over several models their equal mixture (Sawade (2012), Eq. 5.11).
    risk : array-like (d,), optional
        The ``R`` at which to linearize. Default: the intrinsic risk under the belief.
    costs : None, bool or array-like (n,)
        Label costs ``c(x)``; default the pool's (if any). ``False`` ignores them.
    belief_floor : float
        Lower bound on each class probability of the belief (renormalized), so every label stays
        possible. Default ``1e-6``.
    mix : float
        Defensive mixture weight ``δ`` in ``q ← (1 − δ) q + δ p``: weights are bounded by ``1/δ``
        and the variance is at most ``1/(1 − δ)`` times the unmixed one. Default ``0.05``.
    estimator : {"ipw", "model_assisted"}
        The estimator the proposal is optimal for. ``"ipw"``: the importance-weighted estimate
        (Sawade (2012), Eq. 3.31). ``"model_assisted"``: the estimate that also uses the belief as a
        control variate (:func:`~bayes_activeeval.estimate` with ``estimator="model_assisted"``);
        its optimal proposal replaces ``u(x)`` by the belief's conditional variance
        ``E_π‖Dg(R)(ℓ − m(x))‖² = u(x) − ‖Dg(R)(m(x) − R)‖²``, ``m(x) = E_π ℓ(x, y)``.

    Returns
    -------
    Proposal
        ``kind="optimal"``; ``info`` holds ``risk``, ``jacobian``, ``u`` (the integrand used) and
        the mixing weight.

    Raises
    ------
    ValueError
        If the measure is undefined under the belief (e.g. precision when no item is predicted
        positive), or, with ``mix=0``, if the proposal gives zero mass to an item that needs it.
    """
    m, views = pool.resolve(measure, model)
    models = pool.models_of(m, model)
    floor = check_fraction(belief_floor, "belief_floor")
    mix = check_fraction(mix, "mix", allow_one=True)
    b = as_belief(pool, belief, models).floored(floor)
    table = loss_table(pool, m, views) if isinstance(b, CategoricalBelief) else None
    if risk is None:
        R = intrinsic_risk(pool, m, views, b, table=table)
    else:
        R = np.asarray(risk, dtype=float).reshape(-1)
        if R.size != m.dim:
            raise ValueError(
                f"risk has {R.size} entries; measure {m.name!r} has {m.dim} components"
            )
    J = m.jacobian(R)
    if not np.all(np.isfinite(J)):
        raise ValueError(
            f"measure {m.name!r} is undefined at the intrinsic risk R={np.round(R, 6).tolist()} "
            "(e.g. no item predicted or believed positive); cannot build the optimal proposal"
        )
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    u = expected_sq_deviation(pool, m, views, b, R, J, table=table)
    if estimator == "model_assisted":
        u = np.maximum(u - explained_sq_deviation(pool, m, views, b, R, J, table=table), 0.0)
    c = _costs(pool, costs)
    p = pool.p
    s = np.sqrt(np.maximum(u, 0.0))
    if not pool.has_uniform_weights:
        s *= p
    if c is not None:
        s /= np.sqrt(c)
    if s.sum() <= 0:
        # the belief says every label is known exactly: nothing to optimize, sample passively
        s = p.copy()
    q = _mix(s, p, mix)
    if mix == 0:
        need = _support_needed(pool, m, views)
        bad = np.flatnonzero(need & (q <= 0))
        if bad.size:
            raise ValueError(
                f"the proposal gives zero mass to item {bad[0]} (and {bad.size - 1} more) whose "
                "label could change the estimate; use mix > 0 or belief_floor > 0"
            )
    info = {
        "risk": R,
        "jacobian": J,
        "u": u,
        "mix": mix,
        "belief_floor": floor,
        "measure": m.name,
        "estimator": estimator,
    }
    return Proposal(q, p, "optimal", info)


def passive_proposal(pool) -> Proposal:
    """Passive sampling: ``q = p`` (the uniform pool distribution unless the pool is weighted)."""
    return Proposal(pool.p.copy(), pool.p, "passive")


def stratified_proposal(
    pool,
    measure: str | Measure | None = None,
    *,
    strata: int | np.ndarray = 10,
    allocation: str = "proportional",
    model: str | None = None,
    scores: np.ndarray | None = None,
    belief: Any = None,
    method: str = "quantile",
    mix: float = 0.0,
) -> Proposal:
    """Stratified sampling on score strata, expressed as a proposal.

    Items are grouped into strata by score; a stratum ``h`` receives a share ``a_h`` of the
    draws and items are drawn uniformly (by ``p``) within it, i.e. ``q(x) = a_h p(x)/P_h``.

    - ``"proportional"``: ``a_h = P_h`` — identical to passive sampling for i.i.d. draws.
    - ``"neyman"``: ``a_h ∝ P_h sqrt(Ū_h)`` with ``Ū_h`` the mean of
      ``u(x) = E_π‖Dg(R)(ℓ − R)‖²`` over the stratum — the optimal proposal constrained to be
      constant within strata (Neyman allocation for the self-normalized estimator).

    Parameters
    ----------
    strata : int or array-like (n,)
        Number of strata, or a stratum label per item.
    scores : array-like (n,), optional
        Scores to stratify on; default the pool's scores, else the probability of the positive
        (binary) or predicted class.
    method : {"quantile", "csf"}
        Equal-size strata, or the cumulative-sqrt(F) rule (see :func:`~bayes_activeeval.strata.score_strata`).
    mix : float
        Defensive mixture with ``p`` (default 0: every stratum already has positive mass).
    """
    if allocation not in ("proportional", "neyman"):
        raise ValueError(f"allocation must be 'proportional' or 'neyman', got {allocation!r}")
    mix = check_fraction(mix, "mix", allow_one=True)
    if isinstance(strata, (int, np.integer)) and not isinstance(strata, bool):
        s = _default_scores(pool, model) if scores is None else np.asarray(scores, dtype=float)
        labels, _ = score_strata(s, int(strata), method=method)
    else:
        labels = np.asarray(strata)
        if labels.shape != (pool.n_items,):
            raise ValueError(f"strata has shape {labels.shape}; expected ({pool.n_items},)")
        _, labels = np.unique(labels, return_inverse=True)
    H = int(labels.max()) + 1
    p = pool.p
    P = np.bincount(labels, weights=p, minlength=H)
    if allocation == "proportional":
        a = P.copy()
        info: dict[str, Any] = {}
    else:
        if measure is None:
            raise ValueError("allocation='neyman' needs a measure")
        prop = optimal_proposal(pool, measure, model=model, belief=belief, mix=0.0, costs=False)
        u = prop.info["u"]
        with np.errstate(invalid="ignore", divide="ignore"):
            Ubar = np.bincount(labels, weights=p * u, minlength=H) / P
        a = P * np.sqrt(np.nan_to_num(Ubar))
        if a.sum() <= 0:
            a = P.copy()
        info = {"u": u, "risk": prop.info["risk"]}
    a = a / a.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(P[labels] > 0, a[labels] * p / P[labels], 0.0)
    q = _mix(q, p, mix)
    info.update({"strata": labels, "allocation": a, "stratum_mass": P, "mix": mix})
    return Proposal(q, p, "stratified", info)


def _default_scores(pool, model: str | None) -> np.ndarray:
    model = pool.check_model(model)
    if pool.scores is not None:
        return pool.scores[model]
    v = pool.view(model)
    if v.prob is not None:
        if pool.task == "binary":
            return v.positive_prob()
        return v.prob.max(axis=1)
    if v.std is not None:
        return v.std
    raise ValueError("no scores to stratify on: give scores= or a pool with scores/probs")
